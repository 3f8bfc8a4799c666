"""Hostile inputs for replay_mutations.py, one generator per class of
issue 13: models for `smpc compile` (case_*) and artifacts and data files
for `smprun` (case_art_*, case_npy). Each takes a random.Random and the
sandbox (paths `sb.path(sub)`, `sb.outside`) and writes its input there.
Stdlib only.
"""

import os
import random  # noqa: F401  (generators take a random.Random)
import re
import shutil
import struct
import subprocess

import onnx_writer as ow

ROOT_SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT_SRC, "test", "fixtures")

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
BIG = [0, 1, 2, 3, -1, -2, 7, 1 << 20, 1 << 31, (1 << 31) - 1, 1 << 32, 1 << 40,
       1 << 53, (1 << 53) + 1, 1 << 62, I64_MAX, I64_MIN, -(1 << 31), -(1 << 62)]
DTYPES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 21, 99, -1]


def rmtree(p):
    def onerror(func, path, _):
        os.chmod(os.path.dirname(path), 0o700)
        func(path)
    if os.path.islink(p) or not os.path.isdir(p):
        os.unlink(p)
    else:
        shutil.rmtree(p, onerror=onerror)


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
    """smp::base::fileNameFor (runtime/base/lib/Files.cpp)."""
    out = ""
    for b in name.encode("utf-8", "surrogateescape"):
        if b in (0x2F, 0x5C, 0x25) or b < 0x20 or b == 0x7F:
            out += "%%%02X" % b
        else:
            out += chr(b) if b < 0x80 else bytes([b]).decode("latin-1")
    return out


# ---- hostile models (smpc) --------------------------------------------------

def replace_file(f, by, target=None):
    """Puts in place of file `f` a FIFO, a directory or a link to `target`
    (`by`: "fifo", "dir" or "link"): files smprun must refuse to read."""
    os.unlink(f)
    if by == "fifo":
        os.mkfifo(f)
    elif by == "dir":
        os.mkdir(f)
    else:
        os.symlink(target, f)


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
    if (os.path.islink(path) or not os.path.isfile(path) or
            os.path.getsize(path) > 64 << 20):  # the harness must not escape either
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
    """smp::base::DType (runtime/base/include/smp/base/DType.h) -> .npy descr."""
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
        replace_file(f, "fifo")
    elif op == 4:
        replace_file(f, "link", rng.choice(["/dev/zero", os.path.join(sb.outside, "secret.bin")]))
    else:
        replace_file(f, "dir")
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
        replace_file(f, "fifo")
    elif kind == 1:
        replace_file(f, "dir")
    elif kind == 2:
        # (a link of the user's own to a regular file elsewhere is the
        # user's: docs/threat-model.md, "Trusted"; devices are refused)
        replace_file(f, "link", rng.choice(["/dev/zero", "/dev/urandom", "/proc/self/mem",
                                            "/nonexistent", "."]))
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
