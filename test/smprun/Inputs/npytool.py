#!/usr/bin/env python3
"""Small .npy tool for lit tests, without numpy (the test python may lack it).

  npytool.py save PATH DESCR DIMS VALUE     e.g. save x.npy <f4 2,3 1.0
  npytool.py print PATH                     the values, one line
  npytool.py set SRC DST INDEX VALUE        copy with element INDEX set
  npytool.py fill SRC DST VALUE             copy with every element set
  npytool.py rotate SRCDIR DSTDIR K         every .npy of SRCDIR with its
                                            samples (leading dim) rotated by K
  npytool.py cast SRC DST DESCR             copy with the values stored as
                                            DESCR (integers: wrapped)

DESCR is <f4, <f8, an integer type <i1 <i2 <i4 <i8 <u1 <u2 <u4 <u8; VALUE is
a number or nan.
"""
import ast
import struct
import sys

FMT = {"<f4": "f", "<f8": "d", "<i1": "b", "<i2": "h", "<i4": "i", "<i8": "q",
       "<u1": "B", "<u2": "H", "<u4": "I", "<u8": "Q"}


def header(descr, shape):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()


def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<H", data[8:10])[0]
    meta = ast.literal_eval(data[10:10 + n].decode())
    fmt = FMT[meta["descr"]]
    count = 1
    for d in meta["shape"]:
        count *= d
    values = list(struct.unpack("<%d%s" % (count, fmt), data[10 + n:]))
    return meta["descr"], meta["shape"], values


def write(path, descr, shape, values):
    fmt = FMT[descr]
    with open(path, "wb") as f:
        f.write(header(descr, shape) + struct.pack("<%d%s" % (len(values), fmt), *values))


def value(descr, text):
    return float(text) if descr in ("<f4", "<f8") else int(text)


def main(argv):
    cmd = argv[1]
    if cmd == "save":
        path, descr, dims, v = argv[2:6]
        shape = [int(d) for d in dims.split(",") if d]
        count = 1
        for d in shape:
            count *= d
        write(path, descr, shape, [value(descr, v)] * count)
    elif cmd == "print":
        print(read(argv[2])[2])
    elif cmd == "set":
        src, dst, index, v = argv[2:6]
        descr, shape, values = read(src)
        values[int(index)] = value(descr, v)
        write(dst, descr, shape, values)
    elif cmd == "fill":
        src, dst, v = argv[2:5]
        descr, shape, values = read(src)
        write(dst, descr, shape, [value(descr, v)] * len(values))
    elif cmd == "rotate":
        import os
        src, dst, k = argv[2], argv[3], int(argv[4])
        os.makedirs(dst, exist_ok=True)
        for name in sorted(os.listdir(src)):
            if not name.endswith(".npy"):
                continue
            descr, shape, values = read(os.path.join(src, name))
            row = len(values) // shape[0]
            values = values[k * row:] + values[:k * row]
            write(os.path.join(dst, name), descr, shape, values)
    elif cmd == "cast":
        src, dst, descr = argv[2:5]
        _, shape, values = read(src)
        if descr not in ("<f4", "<f8"):
            bits = 8 * struct.calcsize(FMT[descr])
            signed = descr.startswith("<i")
            values = [int(v) % (1 << bits) for v in values]
            if signed:
                values = [v - (1 << bits) if v >= 1 << (bits - 1) else v for v in values]
        write(dst, descr, shape, values)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
