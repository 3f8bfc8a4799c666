#!/usr/bin/env python3
"""Loads a safetensors file written by `smp-checkpoint export --format
safetensors` into the PyTorch model of a training fixture (rebuilt by
python/smp_models.py, as python/make_training_refs.py builds it), runs the
trained model in eval mode on the fixture's first batch and compares its
logits with PyTorch's own trained logits (logits_after_<config>.npy).

    safetensors_into_torch.py FILE.safetensors FIXTURE_DIR MODEL CONFIG REPO

The file is read with the `safetensors` library (safetensors.torch.load_file)
where it is installed, else with a reader of the documented format (8-byte
little-endian header length, JSON header, little-endian data) written here.
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np
import torch


def read_plain(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    dtypes = {"F32": np.float32, "F64": np.float64, "F16": np.float16,
              "I64": np.int64, "I32": np.int32, "U8": np.uint8, "BOOL": np.bool_}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        arr = np.frombuffer(data[base + a:base + b], dtype=dtypes[e["dtype"]])
        out[name] = torch.from_numpy(arr.reshape(e["shape"]).copy())
    return out


def main():
    path, fixture, model_name, config, repo = sys.argv[1:6]
    sys.path.insert(0, str(Path(repo) / "python"))
    import smp_models as M

    try:
        from safetensors.torch import load_file
        tensors, reader = load_file(path), "safetensors library"
    except ImportError:
        tensors, reader = read_plain(path), "plain reader"
    model = getattr(M, "build_" + model_name)()
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    # A tied weight (gpt's lm_head is wte) is one tensor in the checkpoint:
    # its other key is the same parameter, loaded through the first.
    sd = model.state_dict(keep_vars=True)
    loaded = {id(sd[k]) for k in tensors if k in sd}
    left = sorted(k for k in missing if id(sd[k]) not in loaded)
    model.eval()
    first = Path(fixture) / "first8"
    inputs = [torch.from_numpy(np.load(f)) for f in sorted(first.glob("*.npy"))]
    with torch.no_grad():
        logits = model(*inputs).numpy()
    ref = np.load(Path(fixture) / f"logits_after_{config}.npy")
    diff = float(np.max(np.abs(logits - ref)) / np.max(np.abs(ref)))
    print(f"read with the {reader}: {len(tensors)} tensors, missing {left}, "
          f"unexpected {sorted(unexpected)}")
    print(f"max |torch - reference| / max |reference| = {diff:.3g}: "
          f"{'within' if diff <= 1e-4 else 'OVER'} 1e-4")


if __name__ == "__main__":
    main()
