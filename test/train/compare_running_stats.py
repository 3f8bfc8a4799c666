#!/usr/bin/env python3
"""Compares the BatchNorm running statistics of a trained ONNX model (what
`smprun --save-onnx` writes) with a PyTorch reference.

    compare_running_stats.py TRAINED.onnx REF.json --rtol R [--label NAME]

REF.json is a test/fixtures/resnet/ref_*.json written by
python/make_resnet.py (or stored-precision/resnet_bf16/'s, whose running
statistics are bf16 or f16 tensors); its "running_stats" maps each BN buffer's name
(`layer1.0.bn1.running_mean`, ...) to its values after training. Each
tensor of that name in the model's initializers must match within R
relative to the tensor's scale: |smp - ref| <= R * max(max|ref|, 1e-3)
element by element (a running mean near zero has no relative error of its
own). Also checks that every BatchNormalization node of the model is in
inference mode (training_mode 0, one output), so the file runs in eval mode.

Prints one line per tensor and a summary

    NAME: N tensors, max rel err E (rtol R): ok | MISMATCH (...)

and exits 1 on a mismatch or a missing tensor. Pure Python (the ONNX file is
read with a small protobuf reader), as CI may lack the onnx package.
"""

import argparse
import json
import struct
import sys


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def fields(buf):
    """(field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield num, wire, value


def bf16(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def tensor(buf):
    """(name, values) of an f32, bf16 or f16 TensorProto; values None for
    another type."""
    name, dtype, raw, floats, ints = "", 0, None, [], []
    for num, wire, value in fields(buf):
        if num == 8:
            name = value.decode()
        elif num == 2:
            dtype = value
        elif num == 9:
            raw = value
        elif num == 4:
            floats += (list(struct.unpack(f"<{len(value) // 4}f", value))
                       if wire == 2 else list(struct.unpack("<f", value)))
        elif num == 5:  # int32_data: bf16 bit patterns, packed or not
            if wire == 2:
                i = 0
                while i < len(value):
                    v, i = varint(value, i)
                    ints.append(v)
            else:
                ints.append(value)
    if dtype == 1:  # FLOAT
        if raw is not None:
            floats = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        return name, floats
    if dtype in (16, 10):  # BFLOAT16, FLOAT16
        if raw is not None:
            ints = struct.unpack(f"<{len(raw) // 2}H", raw)
        if dtype == 10:
            return name, [struct.unpack("<e", struct.pack("<H", b & 0xFFFF))[0]
                          for b in ints]
        return name, [bf16(b & 0xFFFF) for b in ints]
    return name, None


def read_model(path):
    data = open(path, "rb").read()
    graph = next(v for n, w, v in fields(data) if n == 7)
    inits, bn_modes = {}, []
    for num, wire, value in fields(graph):
        if num == 5:
            name, values = tensor(value)
            inits[name] = values
        elif num == 1:  # a node
            op, outputs, training = "", 0, 0
            for n, w, v in fields(value):
                if n == 4:
                    op = v.decode()
                elif n == 2:
                    outputs += 1
                elif n == 5:  # an attribute
                    attr = dict((an, av) for an, aw, av in fields(v))
                    if attr.get(1) == b"training_mode":
                        training = attr.get(3, 0)
            if op == "BatchNormalization":
                bn_modes.append((training, outputs))
    return inits, bn_modes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("ref")
    ap.add_argument("--rtol", type=float, required=True)
    ap.add_argument("--label", default="running stats")
    args = ap.parse_args()
    inits, bn_modes = read_model(args.model)
    ref = json.load(open(args.ref))["running_stats"]
    worst, problems = 0.0, []
    for name, want in sorted(ref.items()):
        got = inits.get(name)
        if got is None or len(got) != len(want):
            problems.append(f"{name} missing or of another size")
            continue
        scale = max(max(abs(w) for w in want), 1e-3)
        err = max(abs(g - w) for g, w in zip(got, want)) / scale
        worst = max(worst, err)
        print(f"{name:40s} max rel err {err:.3g}")
    if not bn_modes:
        problems.append("no BatchNormalization node")
    if any(t != 0 or n != 1 for t, n in bn_modes):
        problems.append("a BatchNormalization node is in training mode")
    if worst > args.rtol:
        problems.append(f"max rel err {worst:.3g} > {args.rtol}")
    status = "ok" if not problems else "MISMATCH (" + "; ".join(problems) + ")"
    print(f"{args.label}: {len(ref)} tensors, max rel err {worst:.3g} "
          f"(rtol {args.rtol}): {status}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
