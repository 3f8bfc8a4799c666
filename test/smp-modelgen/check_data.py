#!/usr/bin/env python3
"""Checks what smp-modelgen --write-data wrote: DIR/idx.npy and
DIR/labels.npy, int64 [N, S], tokens in [0, V), labels the next tokens
(labels[:, :-1] == idx[:, 1:]). Standard library only.

    check_data.py DIR N S V
"""
import ast
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:6] == b"\x93NUMPY", f"{path}: not a .npy file"
    major = raw[6]
    if major == 1:
        (hlen,), start = struct.unpack("<H", raw[8:10]), 10
    else:
        (hlen,), start = struct.unpack("<I", raw[8:12]), 12
    header = ast.literal_eval(raw[start:start + hlen].decode("latin1"))
    data = raw[start + hlen:]
    assert header["descr"] == "<i8", f"{path}: dtype {header['descr']}"
    assert not header["fortran_order"], f"{path}: Fortran order"
    shape = tuple(header["shape"])
    count = 1
    for d in shape:
        count *= d
    assert len(data) == 8 * count, f"{path}: {len(data)} bytes for {shape}"
    return shape, struct.unpack(f"<{count}q", data)


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    d, n, s, v = sys.argv[1], *map(int, sys.argv[2:])
    ishape, idx = load(f"{d}/idx.npy")
    lshape, labels = load(f"{d}/labels.npy")
    assert ishape == (n, s) and lshape == (n, s), f"shapes {ishape} {lshape}"
    assert all(0 <= t < v for t in idx + labels), "token out of range"
    for i in range(n):
        row, lab = idx[i * s:(i + 1) * s], labels[i * s:(i + 1) * s]
        assert row[1:] == lab[:-1], f"sample {i}: labels are not the next tokens"
    print(f"ok: {n} samples of {s} tokens in [0, {v}), "
          f"{len(set(idx))} distinct, labels = next tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
