#!/usr/bin/env python3
"""Replays a structural mutation corpus through smpc and smprun and
classifies what happens (issue 13; docs/threat-model.md, "Fuzzing").

    python3 test/fuzz/replay_mutations.py --build build [--count 2000]
        [--seed 1] [--timeout 30] [--mem-mb 4096] [--keep DIR] [--max-fail 0]

Stdlib only (no onnx, no torch, no numpy): models are written by
onnx_writer.py, which writes what the onnx package would refuse. Each
input is one run of `smpc compile` (hostile models) or `smprun` (mutated
artifacts and data files) in a sandbox:

    ROOT/outside/      secrets that no run may open (watched with inotify)
    ROOT/box/          the sandbox; its own files are secrets too
    ROOT/box/model/    the model and its external data (smpc reads here)
    ROOT/box/art/      the artifact (smpc -o; smprun reads)
    ROOT/box/data/     smprun --data
    ROOT/box/out/      smprun --output-dir
    ROOT/box/cwd/      the working directory

Outcome classes: clean-error (exit != 0 with a one-line "smpc: error:" /
"smprun: error:"), success (exit 0), unclear-error (exit != 0 without
one), crash (killed by a signal), sanitizer (an ASan/UBSan/LSan report),
hang (past --timeout), escape (a file created, changed or opened outside
the directories the run may use), over-cap (out of memory, bad_alloc, an
allocation the sanitizer refused, or peak RSS over --mem-mb). Exit status
1 when a crash, sanitizer report, hang, escape or over-cap is found (more
than --max-fail of them).
"""

import argparse
import collections
import ctypes
import os
import random
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_writer as ow  # noqa: E402

ROOT_SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT_SRC, "test", "fixtures")

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
BIG = [0, 1, 2, 3, -1, -2, 7, 1 << 20, 1 << 31, (1 << 31) - 1, 1 << 32, 1 << 40,
       1 << 53, (1 << 53) + 1, 1 << 62, I64_MAX, I64_MIN, -(1 << 31), -(1 << 62)]
DTYPES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 21, 99, -1]
SECRET = b"SMP-SECRET-DO-NOT-READ-0123456789abcdef"


# ---- inotify: reads and writes outside the sandbox's allowed dirs ----------

class Watch:
    IN_ACCESS, IN_MODIFY, IN_OPEN, IN_CREATE = 0x1, 0x2, 0x20, 0x100
    IN_MOVED_TO, IN_DELETE, IN_ISDIR = 0x80, 0x200, 0x40000000

    def __init__(self, dirs):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        self.wd = {}
        mask = (self.IN_ACCESS | self.IN_MODIFY | self.IN_OPEN | self.IN_CREATE |
                self.IN_MOVED_TO | self.IN_DELETE)
        for d in dirs:
            w = self.libc.inotify_add_watch(self.fd, d.encode(), mask)
            if w < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch " + d)
            self.wd[w] = d

    def events(self):
        """(dir, name, mask) of the events since the last call, excluding
        directories being listed or opened (a path lookup is not a read)."""
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            i = 0
            while i < len(buf):
                wd, mask, _cookie, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode(errors="replace")
                i += 16 + n
                if not mask & self.IN_ISDIR:
                    out.append((self.wd.get(wd, "?"), name, mask))


# ---- the sandbox ------------------------------------------------------------

class Sandbox:
    def __init__(self, root):
        self.root = root
        self.outside = os.path.join(root, "outside")
        self.box = os.path.join(root, "box")
        os.makedirs(self.outside)
        os.makedirs(self.box)
        for d in (self.outside, self.box):
            with open(os.path.join(d, "secret.bin"), "wb") as f:
                f.write(SECRET * 64)
            write_npy(os.path.join(d, "secret_in.npy"), "<f4", [2, 4],
                      struct.pack("<8f", *([1234.5] * 8)))
        self.watch = Watch([self.outside, self.box])

    def reset(self):
        for sub in ("model", "art", "data", "out", "cwd"):
            p = os.path.join(self.box, sub)
            if os.path.lexists(p):
                rmtree(p)
            os.makedirs(p)
        self.watch.events()  # drop what the reset did
        self.before = snapshot(self.root, self.allowed_writes())

    def allowed_writes(self):
        return [os.path.join(self.box, d) for d in ("art", "out", "cwd", "data", "model")]

    def path(self, sub, name=""):
        return os.path.join(self.box, sub, name) if name else os.path.join(self.box, sub)

    def escapes(self):
        found = []
        for d, name, mask in self.watch.events():
            # In box/ itself only its subdirectories are made by the sandbox;
            # outside/ may not be touched at all.
            found.append(f"{'opened' if mask & (Watch.IN_OPEN | Watch.IN_ACCESS) else 'changed'} "
                         f"{os.path.relpath(os.path.join(d, name), self.root)}")
        after = snapshot(self.root, self.allowed_writes())
        for p in sorted(set(after) - set(self.before)):
            found.append("created " + os.path.relpath(p, self.root))
        for p in sorted(set(self.before) - set(after)):
            found.append("removed " + os.path.relpath(p, self.root))
        for p in sorted(set(after) & set(self.before)):
            if after[p] != self.before[p]:
                found.append("changed " + os.path.relpath(p, self.root))
        return found


def rmtree(p):
    def onerror(func, path, _):
        os.chmod(os.path.dirname(path), 0o700)
        func(path)
    if os.path.islink(p) or not os.path.isdir(p):
        os.unlink(p)
    else:
        shutil.rmtree(p, onerror=onerror)


def snapshot(root, skip):
    """path -> (size, mtime) of every entry under root but the skipped dirs."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skip]
        for n in filenames + dirnames:
            p = os.path.join(dirpath, n)
            try:
                st = os.lstat(p)
                out[p] = (st.st_size, st.st_mtime_ns if stat.S_ISREG(st.st_mode) else 0)
            except FileNotFoundError:
                pass
    return out


def write_npy(path, descr, shape, payload, version=1, header=None):
    if header is None:
        shp = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shp)
        pre = 10 if version == 1 else 12
        header += " " * ((64 - (pre + len(header) + 1) % 64) % 64) + "\n"
    hb = header.encode() if isinstance(header, str) else header
    hl = struct.pack("<H", len(hb) & 0xFFFF) if version == 1 else struct.pack("<I", len(hb))
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY" + bytes([version, 0]) + hl + hb + payload)


def file_name_for(name):
    """smprt::fileNameFor (runtime/lib/Files.cpp)."""
    out = ""
    for b in name.encode("utf-8", "surrogateescape"):
        if b in (0x2F, 0x5C, 0x25) or b < 0x20 or b == 0x7F:
            out += "%%%02X" % b
        else:
            out += chr(b) if b < 0x80 else bytes([b]).decode("latin-1")
    return out


# ---- hostile models (smpc) --------------------------------------------------

def pick(rng, xs):
    return xs[rng.randrange(len(xs))]


def io(name="x", dims=(2, 4), t=ow.FLOAT):
    return ow.value_info(name, t, list(dims))


def case_shapes(rng, sb):
    """Huge, negative and overflowing shapes wherever a shape is read."""
    dims = [pick(rng, BIG) for _ in range(rng.randint(1, 3))]
    kind = rng.randrange(6)
    if kind == 0:
        nodes = [ow.node("Relu", ["x"], ["y"], "r")]
        return ow.model(nodes, [io("x", dims)], [io("y", dims)])
    if kind == 1:
        nodes = [ow.node("ConstantOfShape", ["s"], ["y"], "c",
                         [ow.attr("value", ow.f32("v", [1.0], [1]), "t")])]
        return ow.model(nodes, [], [io("y", [])], [ow.i64("s", dims)])
    if kind == 2:
        nodes = [ow.node("Expand", ["x", "s"], ["y"], "e")]
        return ow.model(nodes, [io("x", [1, 1])], [io("y", [])], [ow.i64("s", dims)])
    if kind == 3:
        nodes = [ow.node("Reshape", ["x", "s"], ["y"], "rs")]
        return ow.model(nodes, [io("x", (2, 4))], [io("y", [])], [ow.i64("s", dims)])
    if kind == 4:
        nodes = [ow.node("Tile", ["x", "s"], ["y"], "t")]
        return ow.model(nodes, [io("x", [1] * len(dims))], [io("y", [])],
                        [ow.i64("s", dims)])
    # an initializer whose dims disagree with (or overflow) its data
    n = rng.choice([0, 4, 8, 16])
    w = ow.tensor("w", dims, ow.FLOAT, raw=bytes(n))
    nodes = [ow.node("Add", ["x", "w"], ["y"], "a")]
    return ow.model(nodes, [io("x", (2, 4))], [io("y", (2, 4))], [w])


def case_dtypes(rng, sb):
    """Data types swapped: Cast targets, initializers, Gather float indices."""
    kind = rng.randrange(4)
    t = pick(rng, DTYPES)
    if kind == 0:
        nodes = [ow.node("Cast", ["x"], ["y"], "c", [ow.attr("to", t)])]
        return ow.model(nodes, [io("x")], [io("y", (2, 4), max(t, 0))])
    if kind == 1:
        size = rng.choice([0, 1, 8, 16, 32])
        w = ow.tensor("w", [2, 4], t, raw=bytes(rng.randrange(256) for _ in range(size)))
        nodes = [ow.node("Add", ["x", "w"], ["y"], "a")]
        return ow.model(nodes, [io("x")], [io("y")], [w])
    if kind == 2:
        # Gather whose constant indices are float / f16 (made by a Cast)
        it = rng.choice([ow.FLOAT, ow.FLOAT16, ow.DOUBLE, ow.BFLOAT16, ow.BOOL])
        nodes = [ow.node("Shape", ["x"], ["s"], "shape"),
                 ow.node("Cast", ["s"], ["sf"], "cast", [ow.attr("to", it)]),
                 ow.node("Gather", ["x", "sf"], ["y"], "g", [ow.attr("axis", 0)])]
        return ow.model(nodes, [io("x")], [io("y", [])])
    idx = ow.tensor("i", [2], pick(rng, DTYPES), raw=bytes(rng.choice([0, 8, 16])))
    nodes = [ow.node("Gather", ["x", "i"], ["y"], "g",
                     [ow.attr("axis", pick(rng, [0, 1, -1, 2, I64_MAX]))])]
    return ow.model(nodes, [io("x")], [io("y", [])], [idx])


def case_folds(rng, sb):
    """Integer folds at the edges: INT64_MIN / -1, overflowing Add/Mul/Pow."""
    op = pick(rng, ["Div", "Mod", "Add", "Sub", "Mul", "Pow"])
    t = rng.choice([ow.INT64, ow.INT32])
    vals = [I64_MIN, -1, 0, 1, 2, 63, 64, I64_MAX, (1 << 31) - 1, -(1 << 31)]
    a, b = pick(rng, vals), pick(rng, vals)
    if t == ow.INT32:
        a, b = [max(-(1 << 31), min((1 << 31) - 1, v)) for v in (a, b)]
    fmt = "<q" if t == ow.INT64 else "<i"
    ta = ow.tensor("a", [1], t, raw=struct.pack(fmt, a))
    tb = ow.tensor("b", [1], t, raw=struct.pack(fmt, b))
    attrs = [ow.attr("fmod", rng.randrange(2))] if op == "Mod" else []
    nodes = [ow.node(op, ["a", "b"], ["c"], "f", attrs),
             ow.node("Cast", ["c"], ["cf"], "cast", [ow.attr("to", ow.FLOAT)]),
             ow.node("Add", ["x", "cf"], ["y"], "add")]
    return ow.model(nodes, [io("x", (1,))], [io("y", (1,))], [ta, tb])


def case_extdata(rng, sb):
    """External data of initializers and Constant values: absolute paths,
    '..', symbolic links (inside and out), FIFOs, directories, /dev/zero,
    hard links, past-the-end offsets, unknown keys."""
    mdir = sb.path("model")
    with open(os.path.join(mdir, "data.bin"), "wb") as f:
        f.write(struct.pack("<8f", *range(8)) * 4)
    kind = rng.randrange(11)
    loc = "data.bin"
    if kind == 0:
        loc = os.path.join(sb.outside, "secret.bin")
    elif kind == 1:
        loc = rng.choice(["../secret.bin", "../../outside/secret.bin", "sub/../data.bin",
                          "./../secret.bin"])
    elif kind == 2:
        os.symlink(os.path.join(sb.outside, "secret.bin"), os.path.join(mdir, "link.bin"))
        loc = "link.bin"
    elif kind == 3:
        os.symlink("data.bin", os.path.join(mdir, "link.bin"))
        loc = "link.bin"
    elif kind == 4:
        os.mkfifo(os.path.join(mdir, "fifo.bin"))
        loc = "fifo.bin"
    elif kind == 5:
        os.mkdir(os.path.join(mdir, "dir.bin"))
        loc = "dir.bin"
    elif kind == 6:
        os.symlink("/dev/zero", os.path.join(mdir, "zero.bin"))
        loc = "zero.bin"
    elif kind == 7:
        os.link(os.path.join(mdir, "data.bin"), os.path.join(mdir, "hard.bin"))
        loc = "hard.bin"
    elif kind == 8:
        os.mkdir(os.path.join(mdir, "sub"))
        os.symlink(sb.outside, os.path.join(mdir, "sub", "up"))
        loc = "sub/up/secret.bin"
    elif kind == 9:
        loc = rng.choice(["data.bin\0../secret.bin", "", "/", ".", "data.bin/"])
    entries = [("location", loc)]
    if rng.random() < 0.5:
        entries.append(("offset", str(pick(rng, [0, 4, 32, 128, 1 << 40, -4] + BIG))))
    if rng.random() < 0.5:
        entries.append(("length", str(pick(rng, [0, 32, 64, 1 << 40, -1] + BIG))))
    if kind == 10 or rng.random() < 0.1:
        entries.append((rng.choice(["basepath", "checksum", "location", "offset"]), "x"))
    dims = rng.choice([[2, 4], [8], [1 << 40], [2, 4]])
    t = ow.tensor("w", dims, ow.FLOAT, external=entries)
    if rng.random() < 0.5:
        nodes = [ow.node("Add", ["x", "w"], ["y"], "a")]
        return ow.model(nodes, [io("x")], [io("y")], [t])
    op = rng.choice(["Constant", "ConstantOfShape"])
    if op == "Constant":
        nodes = [ow.node("Constant", [], ["w"], "k", [ow.attr("value", t, "t")]),
                 ow.node("Add", ["x", "w"], ["y"], "a")]
        return ow.model(nodes, [io("x")], [io("y")])
    t1 = ow.tensor("v", [1], ow.FLOAT, external=entries)
    nodes = [ow.node("ConstantOfShape", ["s"], ["w"], "k", [ow.attr("value", t1, "t")]),
             ow.node("Add", ["x", "w"], ["y"], "a")]
    return ow.model(nodes, [io("x")], [io("y")], [ow.i64("s", [2, 4])])


HOSTILE_NAMES = ["../secret_in", "../../outside/secret_in", "/tmp/abs_out", "a/b", "..",
                 ".", "", "a\\b", "%2F..%2Fx", "nl\nname", "tab\tname", "x" * 4096,
                 b"bad\xff\xfeutf8", b"\xc0\xaf..", "con", "a\0b", "..%2Fsecret_in",
                 "~/home", "$HOME", "x.npy", "-rf"]


def case_names(rng, sb):
    """File-name escapes in graph input and output names, invalid UTF-8 in
    any name; compiled then run by smprun with data."""
    def nm():
        n = pick(rng, HOSTILE_NAMES)
        return n.decode("latin-1") if isinstance(n, bytes) else n
    xin, yout = "x", "y"
    which = rng.randrange(4)
    if which in (0, 2):
        xin = nm()
    if which in (1, 2):
        yout = nm()
    node_name = nm() if which == 3 else "r"
    op_type = nm() if which == 3 and rng.random() < 0.2 else "Relu"

    def enc(s):
        return s.encode("latin-1") if all(ord(c) < 256 for c in s) else s.encode()
    nodes = [ow.node(enc(op_type), [enc(xin)], [enc(yout)], enc(node_name))]
    return ow.model(nodes, [ow.value_info(enc(xin), ow.FLOAT, [2, 4])],
                    [ow.value_info(enc(yout), ow.FLOAT, [2, 4])]), "run"


def case_conv(rng, sb):
    """Conv and pooling with pads, strides, dilations and kernels at the
    edges (INT64_MAX pads used to compile into a wrapped shape)."""
    def v(n):
        return [pick(rng, [0, 1, 2, -1, 1 << 31, 1 << 62, I64_MAX, I64_MIN]) if rng.random() < 0.5
                else rng.choice([0, 1, 2]) for _ in range(n)]
    op = rng.choice(["Conv", "MaxPool", "AveragePool"])
    attrs = []
    if rng.random() < 0.7:
        attrs.append(ow.attr("pads", v(4)))
    if rng.random() < 0.5:
        attrs.append(ow.attr("strides", v(2)))
    if rng.random() < 0.4:
        attrs.append(ow.attr("dilations", v(2)))
    if op != "Conv" or rng.random() < 0.3:
        attrs.append(ow.attr("kernel_shape", v(2) if rng.random() < 0.5 else [2, 2]))
    if rng.random() < 0.2:
        attrs.append(ow.attr("group", pick(rng, [0, -1, 2, I64_MAX])))
    if rng.random() < 0.2:
        attrs.append(ow.attr("auto_pad", rng.choice(["SAME_UPPER", "VALID", "NOTSET", "BOGUS"])))
    inits = [ow.f32("w", [0.5] * 8, [2, 1, 2, 2])] if op == "Conv" else []
    ins = ["x", "w"] if op == "Conv" else ["x"]
    nodes = [ow.node(op, ins, ["y"], "c", attrs)]
    return ow.model(nodes, [io("x", (1, 1, 4, 4))], [io("y", [])], inits)


def case_misc(rng, sb):
    """Range past 2^53 and with zero steps, Slice/Split/Transpose/Squeeze/
    Gather/Concat/Softmax/Trilu/CumSum with out-of-range attributes, a long
    Sum, cycles and bad opsets."""
    kind = rng.randrange(10)
    if kind == 0:
        t = rng.choice([ow.INT64, ow.FLOAT, ow.INT32, ow.DOUBLE])
        fmt = {ow.INT64: "<q", ow.FLOAT: "<f", ow.INT32: "<i", ow.DOUBLE: "<d"}[t]
        vals = [0, 1, -1, 3, 1 << 53, (1 << 53) + 1, (1 << 60), I64_MAX, I64_MIN, 1 << 31]

        def sc(name):
            v = pick(rng, vals)
            if t == ow.INT32:
                v = max(-(1 << 31), min((1 << 31) - 1, v))
            return ow.tensor(name, [], t, raw=struct.pack(fmt, v))
        nodes = [ow.node("Range", ["s", "l", "d"], ["y"], "range")]
        return ow.model(nodes, [], [io("y", [], t)], [sc("s"), sc("l"), sc("d")])
    if kind == 1:
        vals = [0, 1, -1, 2, I64_MAX, I64_MIN, 1 << 62, -(1 << 62)]
        nodes = [ow.node("Slice", ["x", "st", "en", "ax", "sp"], ["y"], "sl")]
        inits = [ow.i64("st", [pick(rng, vals)]), ow.i64("en", [pick(rng, vals)]),
                 ow.i64("ax", [pick(rng, [0, 1, -1, 2, I64_MIN])]),
                 ow.i64("sp", [pick(rng, vals)])]
        return ow.model(nodes, [io("x")], [io("y", [])], inits)
    if kind == 2:
        attrs = [ow.attr("axis", pick(rng, [0, 1, -3, 5, I64_MAX]))]
        ins = ["x"]
        inits = []
        if rng.random() < 0.5:
            ins.append("sp")
            inits.append(ow.i64("sp", [pick(rng, BIG), pick(rng, BIG)]))
        else:
            attrs.append(ow.attr("num_outputs", pick(rng, [0, 1, 3, -1, I64_MAX])))
        nodes = [ow.node("Split", ins, ["y", "z"], "sp", attrs)]
        return ow.model(nodes, [io("x")], [io("y", []), io("z", [])], inits, opset=18)
    if kind == 3:
        perm = [pick(rng, [0, 1, 2, -1, I64_MAX]) for _ in range(rng.randint(0, 3))]
        nodes = [ow.node("Transpose", ["x"], ["y"], "t", [ow.attr("perm", perm)])]
        return ow.model(nodes, [io("x")], [io("y", [])])
    if kind == 4:
        op = rng.choice(["Squeeze", "Unsqueeze", "ReduceSum", "ReduceMean", "ReduceMax"])
        nodes = [ow.node(op, ["x", "a"], ["y"], "s")]
        return ow.model(nodes, [io("x")], [io("y", [])],
                        [ow.i64("a", [pick(rng, [0, 1, 2, -1, -3, I64_MAX, I64_MIN])])])
    if kind == 5:
        idx = [pick(rng, [0, 1, -1, 2, -3, I64_MAX, I64_MIN]) for _ in range(2)]
        nodes = [ow.node("Gather", ["x", "i"], ["y"], "g",
                         [ow.attr("axis", pick(rng, [0, 1, -1]))])]
        return ow.model(nodes, [io("x")], [io("y", [])], [ow.i64("i", idx)]), "run"
    if kind == 6:
        op = rng.choice(["Concat", "Softmax", "LogSoftmax", "CumSum", "Flatten", "Trilu"])
        a = pick(rng, [0, 1, -1, 2, -3, I64_MAX, I64_MIN])
        if op == "Concat":
            nodes = [ow.node(op, ["x", "x"], ["y"], "c", [ow.attr("axis", a)])]
            return ow.model(nodes, [io("x")], [io("y", [])])
        if op == "CumSum":
            nodes = [ow.node(op, ["x", "a"], ["y"], "c")]
            return ow.model(nodes, [io("x")], [io("y", [])], [ow.i64("a", [a], [])])
        if op == "Trilu":
            nodes = [ow.node(op, ["x", "k"], ["y"], "c")]
            return ow.model(nodes, [io("x")], [io("y", [])], [ow.i64("k", [a], [])]), "run"
        nodes = [ow.node(op, ["x"], ["y"], "c", [ow.attr("axis", a)])]
        return ow.model(nodes, [io("x")], [io("y", [])])
    if kind == 7:
        n = rng.choice([2, 100, 3000])
        nodes = [ow.node("Sum", ["x"] * n, ["y"], "sum")]
        return ow.model(nodes, [io("x")], [io("y")]), "run"
    if kind == 8:
        nodes = [ow.node("Add", ["x", "b"], ["a"], "n0"), ow.node("Relu", ["a"], ["b"], "n1"),
                 ow.node("Relu", ["a"], ["y"], "n2")]
        if rng.random() < 0.5:
            nodes = [ow.node("Relu", ["x"], ["y"], "n0"), ow.node("Relu", ["x"], ["y"], "n1")]
        return ow.model(nodes, [io("x")], [io("y")])
    nodes = [ow.node("Relu", ["x"], ["y"], "r")]
    return ow.model(nodes, [io("x")], [io("y")], opset=pick(rng, [None, 0, 1, 6, 22, 99, -1,
                                                                  I64_MAX]),
                    ir_version=pick(rng, [0, 3, 8, 99, -1]))


def case_bytes(rng, sb):
    """Byte-level mutations of real models: truncation, bit flips, splices."""
    src = pick(rng, ["mlp_op17.onnx", "cnn_op17.onnx", "cnn_bn_op17.onnx"])
    with open(os.path.join(FIXTURES, src), "rb") as f:
        data = bytearray(f.read())
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        if op == 0 and len(data) > 1:
            del data[rng.randrange(len(data)):]
        elif op == 1 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 2 and data:
            i = rng.randrange(len(data))
            data[i] = rng.choice([0, 0x7F, 0x80, 0xFF])
        elif data:
            i, j = sorted(rng.randrange(len(data)) for _ in range(2))
            data[i:i] = data[i:j][:4096]
    return bytes(data)


MODEL_CLASSES = {"shapes": case_shapes, "dtypes": case_dtypes, "folds": case_folds,
                 "extdata": case_extdata, "names": case_names, "conv": case_conv,
                 "misc": case_misc, "model-bytes": case_bytes}


# ---- artifacts and data files (smprun) ----------------------------------------

class Bases:
    """Valid artifacts compiled once, the material the smprun cases mutate."""

    def __init__(self, tools, root):
        self.dir = os.path.join(root, "bases")
        os.makedirs(self.dir)
        self.tools = tools
        mlp = os.path.join(FIXTURES, "mlp_op17.onnx")
        train = ["--train", "--loss", "cross_entropy:logits:labels"]
        self.arts = {}
        for name, flags in [("infer", []), ("train", train + ["--optimizer", "adamw"])]:
            out = os.path.join(self.dir, name + ".smpx")
            subprocess.run([tools["smpc"], "compile", mlp, "-o", out] + flags,
                           check=True, capture_output=True)
            self.arts[name] = out

    def specs(self, art):
        text = decode(self.tools, os.path.join(art, "manifest.pb"))
        return parse_specs(text)


def decode(tools, path):
    """The protobuf text of an artifact file (None if it is not a regular
    file a test helper may read, or does not decode)."""
    if not os.path.isfile(path) or os.path.getsize(path) > 64 << 20:
        return None
    r = subprocess.run([tools["smp-artifact-text"], "decode", path], capture_output=True,
                       timeout=60)
    return r.stdout.decode(errors="replace") if r.returncode == 0 else None


def parse_specs(text):
    """[(name, dtype, shape)] of the manifest's inputs (protobuf text)."""
    specs = []
    for m in re.finditer(r"^inputs \{\n(.*?)^\}", text or "", re.S | re.M):
        body = m.group(1)
        name = re.search(r'name: "((?:[^"\\]|\\.)*)"', body)
        if not name:
            continue
        raw = name.group(1).encode("latin-1", "backslashreplace").decode("unicode_escape")
        raw = raw.encode("latin-1", "surrogateescape").decode("utf-8", "surrogateescape")
        dt = re.search(r"dtype: (\d+)", body)
        specs.append((raw, int(dt.group(1)) if dt else 0,
                      [int(s) for s in re.findall(r"shape: (-?\d+)", body)]))
    return specs


NPY_DESCR = {0: ("<f4", 4), 1: ("<f2", 2), 2: ("<f2", 2), 3: ("<f8", 8), 4: ("|i1", 1),
             5: ("<i2", 2), 6: ("<i4", 4), 7: ("<i8", 8), 8: ("<i8", 8), 9: ("|b1", 1),
             10: ("|u1", 1), 11: ("<u2", 2), 12: ("<u4", 4), 13: ("<u8", 8)}


def dtype_descr(d):
    """smprt::DType (runtime/include/smprt/Tensor.h) -> .npy descr."""
    return NPY_DESCR.get(d, ("<f4", 4))


def write_data(sb, specs, rng=None, hostile_copy=True):
    """Zero-filled .npy data for every input of the artifact, under the name
    smprun reads; also the raw name (an escape attempt reads that)."""
    for name, dtype, shape in specs:
        if name.startswith("@"):
            continue
        descr, size = dtype_descr(dtype)
        n = 1
        for d in shape:
            n *= max(d, 0)
        if n * size > 1 << 26:
            continue
        try:
            write_npy(os.path.join(sb.path("data"), file_name_for(name) + ".npy"), descr,
                      shape, bytes(n * size))
        except OSError:  # a name too long for a file: smprun must say so
            pass


def copy_art(base, sb):
    dst = sb.path("art")
    rmtree(dst)
    shutil.copytree(base, dst)
    return dst


def case_art_bytes(rng, sb, bases):
    """Truncated, bit-flipped, missing or replaced artifact files (the
    checksums catch these)."""
    name = rng.choice(["infer", "train"])
    art = copy_art(bases.arts[name], sb)
    files = sorted(f for f in os.listdir(art) if f.endswith((".pb", ".bin")))
    f = os.path.join(art, pick(rng, files))
    op = rng.randrange(6)
    if op == 0:
        with open(f, "r+b") as fh:
            fh.truncate(rng.randrange(os.path.getsize(f) + 1))
    elif op == 1:
        data = bytearray(open(f, "rb").read())
        for _ in range(rng.randint(1, 8)):
            if data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        open(f, "wb").write(data)
    elif op == 2:
        os.unlink(f)
    elif op == 3:
        os.unlink(f)
        os.mkfifo(f)
    elif op == 4:
        os.unlink(f)
        os.symlink(rng.choice(["/dev/zero", os.path.join(sb.outside, "secret.bin")]), f)
    else:
        os.unlink(f)
        os.mkdir(f)
    write_data(sb, bases.specs(bases.arts[name]))
    return art, name


TEXT_FIELDS_INT = re.compile(r"^(\s*)(\w+): (-?\d+)$", re.M)
TEXT_FIELDS_STR = re.compile(r'^(\s*)(\w+): "((?:[^"\\]|\\.)*)"$', re.M)


def case_art_semantic(rng, sb, bases):
    """Crafted artifacts with valid checksums: a number or a name of the
    manifest or a rank program changed, the frame and the manifest resealed
    (only the runtime's semantic checks can refuse these)."""
    name = rng.choice(["infer", "train"])
    art = copy_art(bases.arts[name], sb)
    target = rng.choice(["manifest.pb", "rank0.program.pb", "rank0.program.pb"])
    path = os.path.join(art, target)
    text = decode(bases.tools, path)
    ints = list(TEXT_FIELDS_INT.finditer(text))
    strs = list(TEXT_FIELDS_STR.finditer(text))
    for _ in range(rng.randint(1, 3)):
        if ints and (rng.random() < 0.75 or not strs):
            m = pick(rng, ints)
            v = pick(rng, BIG + [int(m.group(3)) + rng.choice([-1, 1, 8, -8])])
            text = text[:m.start(3)] + str(v) + text[m.end(3):]
        elif strs:
            m = pick(rng, strs)
            v = pick(rng, ["../secret.bin", "/etc/passwd", "", "x" * 300, "rank0.program.pb",
                           "manifest.pb", "..", "sgd", "cosine", "nope", "..%2Fsecret_in",
                           "../secret_in"])
            text = text[:m.start(3)] + v + text[m.end(3):]
        ints = list(TEXT_FIELDS_INT.finditer(text))
        strs = list(TEXT_FIELDS_STR.finditer(text))
    if target == "manifest.pb" and rng.random() < 0.3:
        text = re.sub(r"lr: [-\d.e+]+", "lr: " + rng.choice(["-1", "nan", "inf", "1e400", "0"]),
                      text)
    tfile = os.path.join(sb.path("cwd"), "mut.txt")
    open(tfile, "w").write(text)
    subprocess.run([bases.tools["smp-artifact-text"], "encode", tfile, path],
                   capture_output=True)
    subprocess.run([bases.tools["smp-artifact-text"], "reseal", art], capture_output=True)
    write_data(sb, bases.specs(bases.arts[name]))
    return art, name


def case_npy(rng, sb, bases):
    """Data files: crafted .npy headers, truncated or flipped payloads, and
    files that are not regular (FIFO, directory, /dev/zero, a link out)."""
    name = rng.choice(["infer", "train"])
    art = copy_art(bases.arts[name], sb)
    specs = bases.specs(bases.arts[name])
    write_data(sb, specs)
    victims = [s for s in specs if not s[0].startswith("@")]
    vname, dtype, shape = pick(rng, victims)
    f = os.path.join(sb.path("data"), file_name_for(vname) + ".npy")
    descr, size = dtype_descr(dtype)
    kind = rng.randrange(9)
    if kind == 0:
        os.unlink(f)
        os.mkfifo(f)
    elif kind == 1:
        os.unlink(f)
        os.mkdir(f)
    elif kind == 2:
        os.unlink(f)
        os.symlink(rng.choice(["/dev/zero", "/dev/urandom", os.path.join(sb.outside, "secret_in.npy"),
                               "/proc/self/mem", "/nonexistent"]), f)
    elif kind == 3:
        sh = [pick(rng, BIG) for _ in range(rng.randint(0, 4))]
        write_npy(f, descr, sh, bytes(rng.choice([0, 8, 64])))
    elif kind == 4:
        header = pick(rng, [
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 4), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4",
            "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 16), }",
            "{'descr': '>f4', 'fortran_order': False, 'shape': (4, 16), }",
            "{'descr': '|O', 'fortran_order': False, 'shape': (4, 16), }",
            "{'descr': '<f4', 'shape': (4, 16), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (0x10, 4), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4,,16), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4 16), }",
            "{'descr': '", "", "\0" * 100,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 5000 + "), }"])
        write_npy(f, descr, shape, bytes(64), version=rng.choice([1, 2, 3, 0, 9]), header=header)
    elif kind == 5:
        data = bytearray(open(f, "rb").read())
        del data[rng.randrange(len(data) + 1):]
        open(f, "wb").write(data)
    elif kind == 6:
        data = bytearray(open(f, "rb").read())
        for _ in range(rng.randint(1, 6)):
            if data:
                data[rng.randrange(min(len(data), 128))] ^= 1 << rng.randrange(8)
        open(f, "wb").write(data)
    elif kind == 7:
        # v2 header whose length field claims 4 GiB
        with open(f, "wb") as fh:
            fh.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFFF) + b"{}")
    else:
        # labels out of range (class indices) and NaN inputs: errors or losses, never UB
        t = pick(rng, specs)
        d, s = dtype_descr(t[1])
        n = 1
        for x in t[2]:
            n *= x
        fill = struct.pack("<q", pick(rng, [I64_MIN, -1, 1 << 40, I64_MAX])) if d == "<i8" else \
            struct.pack("<f", float("nan")) if d == "<f4" else bytes(s)
        write_npy(os.path.join(sb.path("data"), file_name_for(t[0]) + ".npy"), d, t[2], fill * n)
    return art, name


RUN_CLASSES = {"artifact-bytes": case_art_bytes, "artifact-semantic": case_art_semantic,
               "npy": case_npy}


# ---- running and classifying ---------------------------------------------------

SAN_RE = re.compile(rb"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|"
                    rb"ERROR: UndefinedBehaviorSanitizer")
OOM_RE = re.compile(rb"out of memory|std::bad_alloc|allocation-size-too-big|"
                    rb"requested allocation size|rss limit exceeded|Cannot allocate memory|"
                    rb"exceeds maximum supported size")


def run(argv, cwd, timeout, mem_mb, sanitized):
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (f"detect_leaks=1:allocator_may_return_null=0:hard_rss_limit_mb={mem_mb}:"
                           f"max_allocation_size_mb={mem_mb // 2}:handle_abort=1")
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    env["OMP_NUM_THREADS"] = "1"

    def limits():
        os.nice(10)
        if not sanitized:  # ASan reserves terabytes of address space
            lim = (mem_mb << 20) * 2
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.setsid()
    start = time.time()
    with tempfile.TemporaryFile() as errf:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                             stderr=errf, preexec_fn=limits)
        hung, nap = False, 0.001
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.time() - start > timeout and not hung:
                os.killpg(p.pid, signal.SIGKILL)
                hung = True
            time.sleep(nap)
            nap = min(nap * 2, 0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        if hung:  # what the group left behind
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        errf.seek(0)
        err = errf.read()
    return p.returncode, err, hung, time.time() - start, ru.ru_maxrss


def classify(rc, err, hung, escapes, tool):
    if escapes:
        return "escape"
    if hung:
        return "hang"
    if SAN_RE.search(err):
        return "sanitizer"
    if OOM_RE.search(err):
        return "over-cap"
    if rc < 0:
        return "crash"
    if rc == 0:
        return "success"
    lines = [l for l in err.splitlines() if l.startswith(tool.encode() + b": error:")]
    return "clean-error" if lines else "unclear-error"


BAD = ("crash", "sanitizer", "hang", "escape", "over-cap")


def self_check(sb):
    """The detectors detect: a read outside, a write outside, a hang, a
    signal (else a clean table would prove nothing)."""
    checks = [(["cat", os.path.join(sb.outside, "secret.bin")], "escape"),
              (["cat", os.path.join(sb.box, "data", "..", "secret_in.npy")], "escape"),
              (["touch", os.path.join(sb.box, "escaped_out.npy")], "escape"),
              (["sleep", "5"], "hang"),
              (["sh", "-c", "kill -SEGV $$"], "crash"),
              (["sh", "-c", "echo 'smpc: error: x: bad' >&2; exit 1"], "clean-error"),
              (["sh", "-c", "echo 'runtime error: signed integer overflow' >&2; exit 1"],
               "sanitizer")]
    for argv, want in checks:
        sb.reset()
        rc, err, hung, _, _ = run(argv, sb.path("cwd"), 1, 1024, False)
        got = classify(rc, err, hung, sb.escapes(), "smpc")
        if got != want:
            sys.exit(f"replay_mutations: self-check failed: {argv} was {got}, not {want}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="build dir with bin/smpc, bin/smprun")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--mem-mb", type=int, default=4096)
    ap.add_argument("--sanitized", action="store_true",
                    help="the tools are built with ASan (no RLIMIT_AS)")
    ap.add_argument("--keep", help="copy the inputs of bad outcomes here")
    ap.add_argument("--max-fail", type=int, default=0)
    ap.add_argument("--classes", help="comma-separated subset of the classes")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    bindir = os.path.join(os.path.abspath(args.build), "bin")
    tools = {t: os.path.join(bindir, t) for t in ("smpc", "smprun", "smp-artifact-text")}
    for t in tools.values():
        if not os.access(t, os.X_OK):
            sys.exit(f"replay_mutations: {t} not found (build it first)")
    classes = list(MODEL_CLASSES) + list(RUN_CLASSES)
    if args.classes:
        classes = [c for c in args.classes.split(",") if c]
    rng = random.Random(args.seed)
    table = collections.defaultdict(collections.Counter)
    bad = []
    peak = 0
    slow = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="smp-replay-") as root:
        sb = Sandbox(os.path.join(root, "sb"))
        self_check(sb)
        bases = Bases(tools, root)
        for i in range(args.count):
            cls = classes[i % len(classes)]
            sb.reset()
            crng = random.Random(rng.getrandbits(64))
            steps = []
            if cls in MODEL_CLASSES:
                made = MODEL_CLASSES[cls](crng, sb)
                runs = made[1] == "run" if isinstance(made, tuple) else crng.random() < 0.3
                data = made[0] if isinstance(made, tuple) else made
                mpath = sb.path("model", "model.onnx")
                with open(mpath, "wb") as f:
                    f.write(data)
                steps.append(("smpc", [tools["smpc"], "compile", mpath, "-o", sb.path("art")]))
            else:
                art, _ = RUN_CLASSES[cls](crng, sb, bases)
                runs = True
            results = []
            for tool, argv in steps:
                results.append((tool, argv) + run(argv, sb.path("cwd"), args.timeout,
                                                  args.mem_mb, args.sanitized))
            if runs and (not results or results[-1][2] == 0):
                art = sb.path("art")
                text = decode(tools, os.path.join(art, "manifest.pb"))
                if text is not None or cls in RUN_CLASSES:
                    if cls in MODEL_CLASSES:
                        write_data(sb, parse_specs(text))
                    training = text is not None and "training {" in text
                    argv = [tools["smprun"], art, "--data", sb.path("data")]
                    argv += ["--steps", "2"] if training else ["--output-dir", sb.path("out")]
                    if text is None and crng.random() < 0.5:
                        argv = argv[:4] + ["--steps", "1"]
                    results.append(("smprun", argv) + run(argv, sb.path("cwd"), args.timeout,
                                                          args.mem_mb, args.sanitized))
            escapes = sb.escapes()
            worst = None
            for tool, argv, rc, err, hung, secs, rss in results:
                peak = max(peak, rss)
                slow.append((secs, i, cls, tool))
                c = classify(rc, err, hung, escapes, tool)
                if rss > args.mem_mb * 1024 and c not in BAD:
                    c = "over-cap"
                table[f"{cls} ({tool})"][c] += 1
                table["total"][c] += 1
                if c in BAD or (args.verbose and c == "unclear-error"):
                    worst = (tool, c, rc, err, escapes, argv)
            if worst:
                tool, c, rc, err, escapes, argv = worst
                msg = (err.decode(errors="replace").strip().splitlines() or [""])
                print(f"[{i}] {cls}: {tool} {c} rc={rc} {escapes or ''} {msg[-1][:300]}",
                      file=sys.stderr)
                if worst[1] in BAD:
                    bad.append((i, cls, c))
                    if args.keep:
                        dst = os.path.join(args.keep, f"{i:05d}-{cls}-{c}")
                        shutil.copytree(sb.box, dst, symlinks=True,
                                        ignore=shutil.ignore_patterns("secret*"))
                        open(os.path.join(dst, "argv.txt"), "w").write(repr(argv) + "\n")
    cols = ["success", "clean-error", "unclear-error", "crash", "sanitizer", "hang", "escape",
            "over-cap"]
    width = max(len(k) for k in table) + 2
    print("class".ljust(width) + "".join(c.rjust(14) for c in ["runs"] + cols))
    for k in sorted(table, key=lambda k: (k == "total", k)):
        row = table[k]
        print(k.ljust(width) + str(sum(row.values())).rjust(14) +
              "".join(str(row[c]).rjust(14) for c in cols))
    print(f"{args.count} inputs in {time.time() - t0:.0f} s; peak RSS of a run "
          f"{peak // 1024} MiB; bad outcomes: {len(bad)}")
    if args.verbose:
        for secs, i, cls, tool in sorted(slow, reverse=True)[:8]:
            print(f"slowest: [{i}] {cls} ({tool}) {secs:.1f} s")
    return 1 if len(bad) > args.max_fail else 0


if __name__ == "__main__":
    sys.exit(main())
