#!/usr/bin/env python3
"""Writes test/fixtures/onnx-node/: ONNX's own backend node tests of the
opset 23 ops smp imports (Attention, RMSNormalization), made by the `onnx`
package's test-case code and reference implementation (Debian's
libonnx-testdata, ONNX 1.12, predates them). The layout is the backend test
data's (`test_x/model.onnx`, `test_x/test_data_set_0/{input,output}_N.pb`),
which smp-onnx-conformance reads. The `_expanded` variants (the ops'
function bodies in other ops) are left out, and so are the tests of what
smp refuses by name (a key/value cache, softcap, the qk_matmul_output
output, opset 25's sliding windows) but one of each (REFUSED), which
test/Frontend/ONNX/conformance-attention.test checks are refused.

Needs onnx >= 1.18 (PyPI); CI only reads the committed files.
"""

import argparse
import shutil
from pathlib import Path

import onnx
from onnx import numpy_helper
from onnx.backend.test.case.node import collect_testcases

OPS = ("Attention", "RMSNormalization")
REFUSED = ("test_attention_4d_with_past_and_present",
           "test_attention_4d_gqa_causal_nonpad_decode",
           "test_attention_4d_softcap", "test_attention_4d_with_qk_matmul",
           "test_attention_local_window")


def refused(model):
    """Whether smp refuses the test's Attention by name."""
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    for n in model.graph.node:
        if n.op_type != "Attention":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        if (len([i for i in n.input[4:] if i]) or
                len([o for o in n.output[3:] if o]) or
                attrs.get("softcap", 0.0) != 0.0):
            return True
    return opset > 24


def write_case(case, out):
    d = out / case.name
    if d.exists():
        shutil.rmtree(d)
    (d / "test_data_set_0").mkdir(parents=True)
    (d / "model.onnx").write_bytes(case.model.SerializeToString())
    inputs, outputs = case.data_sets[0]
    for kind, values, infos in (("input", inputs, case.model.graph.input),
                                ("output", outputs, case.model.graph.output)):
        for j, v in enumerate(values):
            t = v if isinstance(v, onnx.TensorProto) else \
                numpy_helper.from_array(v, infos[j].name)
            (d / "test_data_set_0" / f"{kind}_{j}.pb").write_bytes(
                t.SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve()
                    .parents[1] / "test" / "fixtures" / "onnx-node")
    out = ap.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for case in collect_testcases():
        if case.kind != "node" or "_expanded" in case.name:
            continue
        if not any(n.op_type in OPS for n in case.model.graph.node):
            continue
        if refused(case.model) and case.name not in REFUSED:
            continue
        write_case(case, out)
        names.append(case.name)
    print("wrote", len(names), "tests to", out, "with onnx", onnx.__version__)


if __name__ == "__main__":
    main()
