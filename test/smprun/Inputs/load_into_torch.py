"""load_into_torch.py CHECKPOINT.safetensors MODEL IDX.npy EXPECTED.npy

Loads an exported smp checkpoint into PyTorch's own module MODEL (a class
of python/make_export_traps.py) with load_state_dict(strict=True) (every
name and shape PyTorch's), runs it in eval mode on IDX and compares the
logits with EXPECTED (PyTorch's after the same training): prints "ok" or
the mismatch. Reads safetensors with numpy (no safetensors package)."""
import json
import struct
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "python"))
import make_export_traps  # noqa: E402

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16}


def read_safetensors(path):
    data = Path(path).read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(
            data[8 + n + lo:8 + n + hi], dtype=DTYPES[e["dtype"]]).reshape(
                e["shape"]).copy())
    return out


def main():
    ckpt, model_name, idx, expected = sys.argv[1:5]
    model = getattr(make_export_traps, model_name)().eval()
    model.load_state_dict(read_safetensors(ckpt), strict=True)
    with torch.no_grad():
        got = model(torch.from_numpy(np.load(idx))).numpy()
    want = np.load(expected)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    print("ok" if err <= 1e-4 else f"MISMATCH: max rel err {err:.3g}")


if __name__ == "__main__":
    main()
