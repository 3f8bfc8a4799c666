#!/usr/bin/env python3
"""The device kit's weights (scripts/device-kit.sh): an artifact's weights
file without its f32 parameters, and the file again with random ones.

    kit_weights.py keep PROGRAM_TEXT WEIGHTS OUT   (PROGRAM_TEXT: `-` for stdin)
        From `smp-artifact-text decode RANK.program.pb`: writes OUT, the
        weights file's size and the bytes of every weight that is not an
        f32 parameter (constants such as int64 positions), with offsets.
    kit_weights.py fill KEPT WEIGHTS
        Writes WEIGHTS: N(0, 0.02) f32 values (seed 0) with the kept bytes
        at their offsets. Needs numpy.

Only the benchmark uses this: its parameters' values do not matter, and the
500 MB of GPT-2's do not travel.
"""
import json
import re
import struct
import sys


def blocks(text, kind):
    """The top-level `kind { ... }` blocks of a protobuf text dump, each as
    a dict of its scalar fields (their first occurrence)."""
    out = []
    for body in re.findall(r"^%s \{\n(.*?)^\}" % kind, text, re.M | re.S):
        fields = {}
        for line in body.splitlines():
            m = re.match(r"^  (\w+): (.*)$", line)
            if m and m.group(1) not in fields:
                fields[m.group(1)] = m.group(2).strip('"')
        out.append(fields)
    return out


def keep(text_path, weights_path, out_path):
    text = sys.stdin.read() if text_path == "-" else open(text_path).read()
    buffers = blocks(text, "buffers")
    kept = []
    with open(weights_path, "rb") as f, open(out_path, "wb") as out:
        f.seek(0, 2)
        size = f.tell()
        for w in blocks(text, "weights"):
            if w.get("zero_init") == "true":
                continue
            b = buffers[int(w.get("buffer", 0))]
            if b.get("role") == "param" and int(b.get("dtype", 0)) == 0:
                continue  # an f32 parameter: random on the device
            offset, n = int(w.get("file_offset", 0)), int(w.get("bytes", 0))
            f.seek(offset)
            kept.append((offset, f.read(n)))
        header = json.dumps({"size": size,
                             "kept": [[o, len(d)] for o, d in kept]}).encode()
        out.write(struct.pack("<Q", len(header)) + header)
        for _, data in kept:
            out.write(data)


def fill(kept_path, weights_path):
    import numpy as np
    with open(kept_path, "rb") as k:
        (n,) = struct.unpack("<Q", k.read(8))
        header = json.loads(k.read(n))
        kept = [(o, k.read(m)) for o, m in header["kept"]]
    size = header["size"]
    rng = np.random.default_rng(0)
    with open(weights_path, "wb") as f:
        left = size // 4
        while left:
            m = min(left, 1 << 24)
            f.write((rng.standard_normal(m, dtype=np.float32) * 0.02).tobytes())
            left -= m
        f.write(b"\0" * (size % 4))
        for offset, data in kept:
            f.seek(offset)
            f.write(data)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "keep":
        keep(*sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "fill":
        fill(*sys.argv[2:])
    else:
        sys.exit(__doc__)
