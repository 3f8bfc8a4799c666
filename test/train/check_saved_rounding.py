"""check_saved_rounding.py TRAINED.onnx SOURCE.onnx NPY_DIR (stored-precision-save.test):
TRAINED.onnx's bf16 initializers against the f32 checkpoint values
(smp-checkpoint export --format npy) rounded to nearest even, and against SOURCE.onnx's untrained ones."""
import json
import sys

import numpy as np
import onnx

trained, source, npy = sys.argv[1:4]
index = json.load(open(npy + "/index.json"))
before = {i.name: i for i in onnx.load(source).graph.initializer}
for init in onnx.load(trained).graph.initializer:
    if init.name not in ("model.model.embed_tokens.weight",
                         "model.model.layers.0.input_layernorm.weight"):
        continue
    assert init.data_type == onnx.TensorProto.BFLOAT16, init.data_type
    got = np.frombuffer(init.raw_data, dtype=np.uint16)
    f32 = np.load(npy + "/" + index[init.name]).astype(np.float32).ravel()
    bits = f32.view(np.uint32).astype(np.uint64)
    want = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    assert np.array_equal(got, want), init.name
    old = np.frombuffer(before[init.name].raw_data, dtype=np.uint16)
    print("%s: bf16, rounded from the checkpoint's f32, %s" % (
        init.name, "trained" if not np.array_equal(got, old) else "UNCHANGED"))
