#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (test/fuzz/corpus/<target>/).

Usage: python3 test/fuzz/make_seeds.py BUILD_DIR

Seeds are made from the project's own fixtures and Debian's libonnx-testdata
(one node test per op the importer supports), with stdlib only (no torch,
no numpy): small, valid inputs of every kind the fuzzers then mutate.
Existing files named crash-* / leak-* / timeout-* / oom-* (reproducers of
fixed bugs) are kept. Total size is kept under 1 MB.
"""

import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "test", "fuzz", "corpus")
NODE = "/usr/share/libonnx-testdata/data/node"
KEEP = ("crash-", "leak-", "timeout-", "oom-", "repro-")


def reset(target):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if not f.startswith(KEEP):
            os.unlink(os.path.join(d, f))
    return d


def put(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy(descr, shape, payload, version=1, fortran=False):
    shp = "(" + "".join(f"{s}, " for s in shape).rstrip(" ") + ")"
    if len(shape) > 1:
        shp = "(" + ", ".join(str(s) for s in shape) + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", shp)
    pre = 10 if version == 1 else 12
    header += " " * ((64 - (pre + len(header) + 1) % 64) % 64) + "\n"
    hl = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + hl + header.encode() + payload


def npy_seeds():
    d = reset("npy")
    sizes = {"<f4": 4, "<f8": 8, "<f2": 2, "|b1": 1, "|i1": 1, "<i2": 2,
             "<i4": 4, "<i8": 8, "|u1": 1, "<u2": 2, "<u4": 4, "<u8": 8}
    for descr, es in sizes.items():
        tag = descr[1:]
        put(d, f"{tag}_2x3.npy", npy(descr, [2, 3], bytes(range(6 * es))))
    put(d, "f4_scalar.npy", npy("<f4", [], struct.pack("<f", 1.5)))
    put(d, "f4_empty.npy", npy("<f4", [0, 4], b""))
    put(d, "f4_vec.npy", npy("<f4", [5], struct.pack("<5f", *range(5))))
    put(d, "i8_v2.npy", npy("<i8", [3], struct.pack("<3q", 1, -2, 3), version=2))
    put(d, "i8_v3.npy", npy("<i8", [1, 1, 2], struct.pack("<2q", 7, 8), version=3))
    put(d, "f4_fortran.npy", npy("<f4", [2, 2], bytes(16), fortran=True))
    put(d, "f4_bigendian.npy", npy(">f4", [2], bytes(8)))
    put(d, "f4_short_payload.npy", npy("<f4", [4], bytes(8)))
    put(d, "f4_4d.npy", npy("<f4", [1, 2, 1, 2], bytes(16)))
    fixture = os.path.join(ROOT, "test", "fixtures", "mlp_op17")
    for f in sorted(os.listdir(fixture)):
        p = os.path.join(fixture, f)
        if f.endswith(".npy") and os.path.getsize(p) < 4096:
            shutil.copy(p, os.path.join(d, "mlp_" + f))


def onnx_seeds():
    d = reset("onnx")
    fixtures = os.path.join(ROOT, "test", "fixtures")
    for f in ["cnn_op17.onnx", "cnn_bn_op17.onnx", "mlp_op17.onnx",
              "cnn_op14.onnx"]:
        shutil.copy(os.path.join(fixtures, f), os.path.join(d, f))
    ops = os.path.join(fixtures, "ops")
    for f in sorted(os.listdir(ops)):
        if f.endswith(".onnx") and os.path.getsize(os.path.join(ops, f)) < 64 << 10:
            shutil.copy(os.path.join(ops, f), os.path.join(d, "ops_" + f))
    bad = os.path.join(ROOT, "test", "Frontend", "ONNX", "Inputs", "bad")
    for f in sorted(os.listdir(bad)):
        p = os.path.join(bad, f)
        if f.endswith(".onnx") and os.path.getsize(p) < 64 << 10:
            shutil.copy(p, os.path.join(d, "bad_" + f))
    if not os.path.isdir(NODE):
        return
    supported = subprocess.run([os.path.join(BUILD, "bin", "smpc"), "ops"],
                               capture_output=True, text=True,
                               check=True).stdout.split()
    tests = sorted(os.listdir(NODE))
    for op in supported:
        # test_<op in snake case>..., e.g. ReduceMean -> test_reduce_mean
        snake = "".join("_" + c.lower() if c.isupper() else c for c in op).lstrip("_")
        picked = [t for t in tests if t == "test_" + snake or
                  t.startswith("test_" + snake + "_")][:2]
        for t in picked:
            p = os.path.join(NODE, t, "model.onnx")
            if os.path.isfile(p) and os.path.getsize(p) < 16 << 10:
                shutil.copy(p, os.path.join(d, "node_" + t[5:] + ".onnx"))


def mlir_seeds():
    d = reset("mlir")
    dialect = os.path.join(ROOT, "test", "Dialect", "Smp")
    for f in ["ops.mlir", "canonicalize.mlir", "build-train-step.mlir",
              "tensor-parallel.mlir", "pipeline-split.mlir", "raise-norms.mlir"]:
        # one module per seed: the lit files hold several split by // -----
        text = open(os.path.join(dialect, f)).read()
        for i, part in enumerate(text.split("// -----")):
            body = "\n".join(l for l in part.splitlines()
                             if not l.lstrip().startswith("//"))
            if body.strip():
                put(d, f"{f[:-5]}_{i}.mlir", body.encode())
    smpc = os.path.join(BUILD, "bin", "smpc")
    for f in ["mlp_op17.onnx", "cnn_op17.onnx"]:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "m.mlir")
            subprocess.run([smpc, "import", os.path.join(ROOT, "test", "fixtures", f),
                            "-o", out], check=True)
            shutil.copy(out, os.path.join(d, "import_" + f[:-5] + ".mlir"))


def container(art, rank, flags):
    """An artifact as the artifact fuzzer reads it (see ArtifactFuzzer.cpp)."""
    text = subprocess.run([os.path.join(BUILD, "bin", "smp-artifact-text"), "decode",
                           os.path.join(art, "manifest.pb")],
                          capture_output=True, text=True, check=True).stdout
    # the file names of this rank's entry ("ranks { rank: R program_file: ...")
    entries = text.split("ranks {")[1:]
    entry = next(e for e in entries
                 if (f"rank: {rank}\n" in e) or (rank == 0 and "rank:" not in e.split("program_file")[0]))
    field = lambda k: entry.split(k + ': "')[1].split('"')[0]

    def payload(name):
        with open(os.path.join(art, name), "rb") as f:
            return f.read()[16:]  # the frame header: SMPX, version, checksum
    manifest = payload("manifest.pb")
    program = payload(field("program_file"))
    with open(os.path.join(art, field("weights_file")), "rb") as f:
        weights = f.read()
    return (bytes([flags | rank << 1]) + struct.pack("<I", len(manifest)) + manifest +
            struct.pack("<I", len(program)) + program + weights)


def artifact_seeds():
    d = reset("artifact")
    smpc = os.path.join(BUILD, "bin", "smpc")
    mlp = os.path.join(ROOT, "test", "fixtures", "mlp_op17.onnx")
    train = ["--train", "--loss", "cross_entropy:logits:labels"]
    with tempfile.TemporaryDirectory() as tmp:
        gpt = os.path.join(tmp, "tiny_gpt.onnx")
        subprocess.run([os.path.join(BUILD, "bin", "smp-modelgen"), "gpt", "--layers", "1",
                        "--hidden", "8", "--heads", "2", "--seq", "4", "--vocab", "16",
                        "-o", gpt], check=True, capture_output=True)
        jobs = [("mlp_infer", mlp, [], 1),
                ("mlp_train_adamw", mlp, train + ["--optimizer", "adamw", "--lr", "0.01"], 1),
                ("gpt_dp2_zero", gpt, train + ["--batch-size", "4", "--dp", "2",
                                               "--shard-optimizer-state"], 2),
                ("gpt_tp2", gpt, train + ["--batch-size", "4", "--tp", "2"], 2),
                ("gpt_pp2", gpt, train + ["--batch-size", "4", "--pp", "2",
                                          "--microbatches", "2", "--optimizer", "sgd",
                                          "--lr-schedule", "cosine"], 2)]
        for name, model, flags, ranks in jobs:
            art = os.path.join(tmp, name + ".smpx")
            r = subprocess.run([smpc, "compile", model, "-o", art] + flags,
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"make_seeds: {name}: {r.stderr.strip()}")
            for rank in range(ranks):
                data = container(art, rank, 0)
                put(d, f"{name}_rank{rank}.bin", data)
                # the same, resealed by the harness (flags bit 0)
                put(d, f"{name}_rank{rank}_reseal.bin", bytes([data[0] | 1]) + data[1:])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    BUILD = os.path.abspath(sys.argv[1])
    npy_seeds()
    onnx_seeds()
    mlir_seeds()
    artifact_seeds()
    total = 0
    for t in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, t))
        size = sum(os.path.getsize(os.path.join(CORPUS, t, f)) for f in files)
        total += size
        print(f"{t}: {len(files)} files, {size} bytes")
    print(f"total: {total} bytes")
