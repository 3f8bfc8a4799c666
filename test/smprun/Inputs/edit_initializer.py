"""Writes a copy of an ONNX file with one float32 initializer's raw bytes
edited in place (no onnx package needed: a TensorProto serialises its name,
field 8, before its raw_data, field 9).

Usage: edit_initializer.py IN.onnx OUT.onnx NAME zero
         every value 0 (a zero-initialised parameter's fold)
       edit_initializer.py IN.onnx OUT.onnx NAME halves W
         each row of W values made two copies of its first W/2 (a
         parameter repeated along the last dim)
       edit_initializer.py IN.onnx OUT.onnx NAME ramp
         value i plus i / 1000 (a constant fold made a parameter's values)
       edit_initializer.py IN.onnx OUT.onnx NAME lowest V
         every float32 lowest value (torch.finfo.min) made V (a mask that
         adds -1e9 or -10000, as older code does)
"""
import struct
import sys

src, dst, name, mode = sys.argv[1:5]
data = open(src, "rb").read()
key = b"\x42" + bytes([len(name)]) + name.encode()
at = data.index(key) + len(key)
raw = data.index(b"\x4a", at)
assert raw - at < 64, f"{name}'s raw_data does not follow its name"
size, shift, k = 0, 0, raw + 1
while True:  # the length: a varint
    size |= (data[k] & 0x7F) << shift
    shift += 7
    k += 1
    if data[k - 1] < 0x80:
        break
n = size // 4
values = list(struct.unpack(f"<{n}f", data[k:k + size]))
if mode == "zero":
    values = [0.0] * n
elif mode == "ramp":
    values = [v + i / 1000 for i, v in enumerate(values)]
elif mode == "lowest":
    low = struct.unpack("<f", b"\xff\xff\x7f\xff")[0]
    values = [float(sys.argv[5]) if v == low else v for v in values]
else:
    w = int(sys.argv[5])
    for r in range(n // w):
        half = values[r * w:r * w + w // 2]
        values[r * w:(r + 1) * w] = half + half
out = data[:k] + struct.pack(f"<{n}f", *values) + data[k + size:]
open(dst, "wb").write(out)
