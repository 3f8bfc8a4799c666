"""A minimal ONNX protobuf writer (stdlib only) for hostile test models.

The `onnx` package checks what it writes; these helpers write anything,
including what the package would refuse (negative dims, invalid UTF-8
names, unknown data types), which is what the mutation replay needs.
Field numbers are those of onnx/onnx.proto (proto2).
"""

import struct

FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL, FLOAT16, \
    DOUBLE, UINT32, UINT64 = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
BFLOAT16 = 16


def _varint(n):
    n &= (1 << 64) - 1  # int64 as two's complement, like protobuf
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def f_int(field, v):
    return _key(field, 0) + _varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return _key(field, 2) + _varint(len(b)) + b


def f_float(field, x):
    return _key(field, 5) + struct.pack("<f", x)


def attr(name, value, kind=None):
    """An AttributeProto: int, float, bytes/str, list of ints/floats, or a
    tensor (bytes from tensor(), with kind='t')."""
    out = f_bytes(1, name)
    if kind == "t":
        return out + f_bytes(5, value) + f_int(20, 4)
    if isinstance(value, bool) or isinstance(value, int):
        return out + f_int(3, int(value)) + f_int(20, 2)
    if isinstance(value, float):
        return out + f_float(2, value) + f_int(20, 1)
    if isinstance(value, (str, bytes)):
        return out + f_bytes(4, value) + f_int(20, 3)
    if value and isinstance(value[0], float):
        return out + b"".join(f_float(7, x) for x in value) + f_int(20, 6)
    return out + b"".join(f_int(8, x) for x in value) + f_int(20, 7)


def tensor(name, dims, dtype, raw=None, int64s=None, floats=None,
           external=None):
    """A TensorProto. `external`: list of (key, value) external_data entries
    (data_location is then EXTERNAL)."""
    out = b"".join(f_int(1, d) for d in dims) + f_int(2, dtype) + f_bytes(8, name)
    if raw is not None:
        out += f_bytes(9, raw)
    for v in int64s or []:
        out += f_int(7, v)
    for v in floats or []:
        out += f_float(4, v)
    if external is not None:
        for k, v in external:
            out += f_bytes(13, f_bytes(1, k) + f_bytes(2, v))
        out += f_int(14, 1)
    return out


def value_info(name, elem_type, dims):
    """A ValueInfoProto of a tensor; a str dim is a dim_param."""
    shape = b""
    for d in dims:
        shape += f_bytes(1, f_bytes(2, d) if isinstance(d, str) else f_int(1, d))
    tt = f_int(1, elem_type) + f_bytes(2, shape)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tt))


def node(op, inputs, outputs, name=None, attrs=(), domain=None):
    out = b"".join(f_bytes(1, i) for i in inputs)
    out += b"".join(f_bytes(2, o) for o in outputs)
    if name is not None:
        out += f_bytes(3, name)
    out += f_bytes(4, op)
    out += b"".join(f_bytes(5, a) for a in attrs)
    if domain is not None:
        out += f_bytes(7, domain)
    return out


def model(nodes, inputs, outputs, initializers=(), opset=17, name="g",
          ir_version=8):
    g = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name)
    g += b"".join(f_bytes(5, t) for t in initializers)
    g += b"".join(f_bytes(11, v) for v in inputs)
    g += b"".join(f_bytes(12, v) for v in outputs)
    m = f_int(1, ir_version) + f_bytes(2, "replay_mutations")
    if opset is not None:
        m += f_bytes(8, f_bytes(1, "") + f_int(2, opset))
    return m + f_bytes(7, g)


def i64(name, values, dims=None):
    """An int64 initializer/constant tensor with raw data."""
    return tensor(name, [len(values)] if dims is None else dims, INT64,
                  raw=b"".join(struct.pack("<q", v) for v in values))


def f32(name, values, dims=None):
    return tensor(name, [len(values)] if dims is None else dims, FLOAT,
                  raw=b"".join(struct.pack("<f", v) for v in values))
