#!/usr/bin/env python3
"""Generate small malformed / adversarial ONNX models for the importer's error tests.

Every model is a variation of one tiny valid model (see ``base_model``):

    graph g:  input x float [2,3];  initializer w float [3] (raw_data);
              node add0: Add(x, w) -> y;  output y float [2,3]
    opset_import: default domain 17;  ir_version 8

Writes into --out (default test/Frontend/ONNX/Inputs/bad relative to the repo
root); the list of files and what is wrong with each is in README.md there.
Uses only onnx + numpy.  Models are serialized with ``SerializeToString`` and
written as raw bytes (never ``onnx.save``, which would try to validate or
rewrite external data), so the output is deterministic: regenerating gives
byte-identical files.

Regenerate with:  python3 python/make_bad_models.py
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "test" / "Frontend" / "ONNX" / "Inputs" / "bad"

W_VALUES = np.array([1.0, 2.0, 3.0], dtype=np.float32)  # 12 bytes, little-endian
FLOAT = TensorProto.FLOAT


# --------------------------------------------------------------------------- #
# Building blocks
# --------------------------------------------------------------------------- #


def w_raw() -> TensorProto:
    """Initializer w float [3] stored in raw_data."""
    return helper.make_tensor("w", FLOAT, [3], W_VALUES.tobytes(), raw=True)


def w_external(location: str, offset: int = 0, length: int = 12) -> TensorProto:
    """Initializer w float [3] whose data lives in an external file."""
    t = TensorProto()
    t.name = "w"
    t.data_type = FLOAT
    t.dims.extend([3])
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = t.external_data.add()
        entry.key = key
        entry.value = value
    return t


def vi(name: str, dims, elem_type: int = FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, list(dims))


def add_node(a: str = "x", b: str = "w", out: str = "y", name: str = "add0") -> onnx.NodeProto:
    return helper.make_node("Add", [a, b], [out], name=name)


def graph(nodes, inputs=None, outputs=None, initializers=None) -> onnx.GraphProto:
    return helper.make_graph(
        nodes,
        "g",
        inputs if inputs is not None else [vi("x", [2, 3])],
        outputs if outputs is not None else [vi("y", [2, 3])],
        initializer=initializers if initializers is not None else [w_raw()],
    )


def model(g: onnx.GraphProto) -> onnx.ModelProto:
    """ModelProto built by hand: ir_version 8, opset_import default domain 17,
    nothing else (no producer fields that could vary between onnx versions)."""
    m = onnx.ModelProto()
    m.ir_version = 8
    op = m.opset_import.add()
    op.domain = ""
    op.version = 17
    m.graph.CopyFrom(g)
    return m


def base_model() -> onnx.ModelProto:
    return model(graph([add_node()]))


def ser(m: onnx.ModelProto) -> bytes:
    return m.SerializeToString(deterministic=True)


# --------------------------------------------------------------------------- #
# The bad models
# --------------------------------------------------------------------------- #


def m_cycle() -> onnx.ModelProto:
    # n1: a = Add(x, b); n2: b = Relu(a)  -- a and b depend on each other.
    return model(
        graph(
            [helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2")],
            outputs=[vi("a", [2, 3])],
        )
    )


def m_dangling() -> onnx.ModelProto:
    return model(graph([add_node("x", "nowhere")]))


def m_dup_output() -> onnx.ModelProto:
    return model(
        graph([add_node(name="add0"), helper.make_node("Relu", ["x"], ["y"], name="relu0")])
    )


def m_no_opset() -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.ir_version = 8
    m.graph.CopyFrom(graph([add_node()]))
    assert len(m.opset_import) == 0
    return m


def m_unsupported_op() -> onnx.ModelProto:
    # The valid Add plus a well-formed NonMaxSuppression over constant boxes:
    # 2 non-overlapping boxes, both above the score threshold, at most 2 per
    # class -> selected_indices is exactly [[0,0,0],[0,0,1]] (int64 [2,3]).
    boxes = np.array([[[0, 0, 1, 1], [2, 2, 3, 3]]], dtype=np.float32)  # [1, 2, 4]
    scores = np.array([[[0.9, 0.8]]], dtype=np.float32)  # [1, 1, 2]
    inits = [
        w_raw(),
        helper.make_tensor("boxes", FLOAT, boxes.shape, boxes.tobytes(), raw=True),
        helper.make_tensor("scores", FLOAT, scores.shape, scores.tobytes(), raw=True),
        helper.make_tensor("max_output_boxes_per_class", TensorProto.INT64, [1], np.array([2], np.int64).tobytes(), raw=True),
        helper.make_tensor("iou_threshold", FLOAT, [1], np.array([0.5], np.float32).tobytes(), raw=True),
        helper.make_tensor("score_threshold", FLOAT, [1], np.array([0.1], np.float32).tobytes(), raw=True),
    ]
    nms = helper.make_node(
        "NonMaxSuppression",
        ["boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"],
        ["selected_indices"],
        name="nms_node",
    )
    return model(
        graph(
            [add_node(), nms],
            outputs=[vi("y", [2, 3]), vi("selected_indices", [2, 3], TensorProto.INT64)],
            initializers=inits,
        )
    )


def m_negative_dim() -> onnx.ModelProto:
    return model(graph([add_node()], inputs=[vi("x", [2, -3])]))


def m_huge_dim() -> onnx.ModelProto:
    big = 1 << 62  # 4611686018427387904; big * big overflows int64
    return model(graph([add_node()], inputs=[vi("x", [big, big])]))


def m_raw_size() -> onnx.ModelProto:
    t = TensorProto()
    t.name = "w"
    t.data_type = FLOAT
    t.dims.extend([3])
    t.raw_data = W_VALUES.tobytes()[:8]  # 8 bytes, 12 expected
    return model(graph([add_node()], initializers=[t]))


def m_unbound_dim() -> onnx.ModelProto:
    return model(graph([add_node()], inputs=[vi("x", ["batch", 3])], outputs=[vi("y", ["batch", 3])]))


def m_ext(location: str, offset: int = 0, length: int = 12) -> onnx.ModelProto:
    return model(graph([add_node()], initializers=[w_external(location, offset, length)]))


def external_entries(t: TensorProto, entries) -> TensorProto:
    t.data_location = TensorProto.EXTERNAL
    for key, value in entries:
        entry = t.external_data.add()
        entry.key = key
        entry.value = value
    return t


def m_ext_const() -> onnx.ModelProto:
    """A Constant and a ConstantOfShape whose `value` tensors are external
    data in weights.bin beside the model: c = w (float[3], bytes 0-11) and
    k = ConstantOfShape([2, 3]) filled with 2.0 (bytes 4-7); y = x + c + k."""
    c_val = TensorProto()
    c_val.name = "c_value"
    c_val.data_type = FLOAT
    c_val.dims.extend([3])
    external_entries(c_val, (("location", "weights.bin"), ("offset", "0"), ("length", "12")))
    k_val = TensorProto()
    k_val.name = "k_value"
    k_val.data_type = FLOAT
    k_val.dims.extend([1])
    external_entries(k_val, (("location", "weights.bin"), ("offset", "4"), ("length", "4")))
    shp = helper.make_tensor("shp", TensorProto.INT64, [2], np.array([2, 3], np.int64).tobytes(), raw=True)
    nodes = [
        helper.make_node("Constant", [], ["c"], name="const_c", value=c_val),
        helper.make_node("ConstantOfShape", ["shp"], ["k"], name="const_k", value=k_val),
        helper.make_node("Add", ["x", "c"], ["xc"], name="add_c"),
        helper.make_node("Add", ["xc", "k"], ["y"], name="add_k"),
    ]
    return model(graph(nodes, initializers=[shp]))


def m_ext_key() -> onnx.ModelProto:
    t = w_external("weights.bin")
    entry = t.external_data.add()
    entry.key = "basepath"
    entry.value = "/etc"
    return model(graph([add_node()], initializers=[t]))


BAD_UTF8_PLACEHOLDER = b"NODENAME"
BAD_UTF8_BYTES = b"add\xff\xfe\xc0\xaf0"  # same length: 0xff, 0xfe and overlong '/'


def m_bad_utf8_node() -> bytes:
    """The valid model whose node name is not UTF-8 (protobuf's python API
    cannot write such a string: the name is patched in the serialized bytes,
    same length, so every length prefix stays right)."""
    data = ser(model(graph([add_node(name=BAD_UTF8_PLACEHOLDER.decode())])))
    assert data.count(BAD_UTF8_PLACEHOLDER) == 1 and len(BAD_UTF8_BYTES) == len(BAD_UTF8_PLACEHOLDER)
    return data.replace(BAD_UTF8_PLACEHOLDER, BAD_UTF8_BYTES)


def m_name_escape() -> onnx.ModelProto:
    """Graph input and output names that are relative paths: smprun must not
    read DATA/../secret_in.npy or write OUT/../escaped_out.npy."""
    return model(
        graph(
            [add_node("../secret_in", "w", "../escaped_out")],
            inputs=[vi("../secret_in", [2, 3])],
            outputs=[vi("../escaped_out", [2, 3])],
        )
    )


# --------------------------------------------------------------------------- #
# Output
# --------------------------------------------------------------------------- #

# Models that must be valid ONNX (checked with onnx.checker after writing).
EXPECT_VALID = ("valid.onnx", "unbound_dim.onnx", "unsupported_op.onnx", "ext_ok/model.onnx",
                "ext_const/model.onnx", "name_escape.onnx")


def write(out: Path, rel: str, data: bytes, written: list) -> None:
    p = out / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_symlink():
        p.unlink()
    p.write_bytes(data)
    written.append(rel)


def symlink(out: Path, rel: str, target: str, written: list) -> None:
    p = out / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_symlink() or p.exists():
        p.unlink()
    os.symlink(target, p)
    written.append(f"{rel} -> {target}")


def m_const_of_shape(dims) -> onnx.ModelProto:
    """ConstantOfShape whose shape input is an initializer holding `dims`
    (a few bytes in the file, a huge tensor if materialised): issue 13."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [len(dims)],
                               np.array(dims, np.int64).tobytes(), raw=True)
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], name="cos0",
                            value=helper.make_tensor("value", FLOAT, [1], [1.0]))
    return model(graph([node], outputs=[vi("y", dims)], initializers=[shape]))


def m_expand(dims) -> onnx.ModelProto:
    """Expand of the graph input x [1] to `dims` (an initializer)."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [len(dims)],
                               np.array(dims, np.int64).tobytes(), raw=True)
    node = helper.make_node("Expand", ["x", "shape"], ["y"], name="expand0")
    return model(graph([node], inputs=[vi("x", [1])], outputs=[vi("y", dims)],
                       initializers=[shape]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    written: list[str] = []

    valid = ser(base_model())
    w_bytes = W_VALUES.tobytes()

    write(out, "valid.onnx", valid, written)
    write(out, "empty.onnx", b"", written)
    write(out, "truncated.onnx", valid[: int(len(valid) * 0.6)], written)
    write(out, "random.onnx", np.random.RandomState(0).bytes(4096), written)
    write(out, "cycle.onnx", ser(m_cycle()), written)
    write(out, "dangling.onnx", ser(m_dangling()), written)
    write(out, "dup_output.onnx", ser(m_dup_output()), written)
    write(out, "no_opset.onnx", ser(m_no_opset()), written)
    write(out, "unsupported_op.onnx", ser(m_unsupported_op()), written)
    write(out, "negative_dim.onnx", ser(m_negative_dim()), written)
    write(out, "huge_dim.onnx", ser(m_huge_dim()), written)
    write(out, "raw_size.onnx", ser(m_raw_size()), written)
    write(out, "unbound_dim.onnx", ser(m_unbound_dim()), written)

    # External data, one directory per case so path checks see a clean base dir.
    write(out, "ext_ok/model.onnx", ser(m_ext("weights.bin")), written)
    write(out, "ext_ok/weights.bin", w_bytes, written)
    write(out, "ext_abs/model.onnx", ser(m_ext("/etc/passwd")), written)
    write(out, "ext_dotdot/model.onnx", ser(m_ext("../ext_ok/weights.bin")), written)
    write(out, "ext_symlink/model.onnx", ser(m_ext("weights.bin")), written)
    symlink(out, "ext_symlink/weights.bin", "../ext_ok/weights.bin", written)
    # ext_hardlink/weights.bin is deliberately NOT generated: git cannot store
    # hard links, so the test creates one (ln) at test time next to a copy of
    # this model.
    write(out, "ext_hardlink/model.onnx", ser(m_ext("weights.bin")), written)
    write(out, "ext_range/model.onnx", ser(m_ext("weights.bin", offset=8, length=12)), written)
    write(out, "ext_range/weights.bin", w_bytes, written)
    write(out, "ext_missing/model.onnx", ser(m_ext("missing.bin")), written)
    missing = out / "ext_missing" / "missing.bin"
    if missing.exists() or missing.is_symlink():
        missing.unlink()

    # Constant / ConstantOfShape values as external data (resolved beside
    # the model, not in the working directory); ext_const_cwd has the same
    # model and no weights.bin: run from ext_const, it must not find one.
    write(out, "ext_const/model.onnx", ser(m_ext_const()), written)
    write(out, "ext_const/weights.bin", w_bytes, written)
    write(out, "ext_const_cwd/model.onnx", ser(m_ext_const()), written)
    write(out, "ext_key/model.onnx", ser(m_ext_key()), written)
    write(out, "ext_key/weights.bin", w_bytes, written)
    write(out, "bad_utf8_node.onnx", m_bad_utf8_node(), written)
    write(out, "name_escape.onnx", ser(m_name_escape()), written)

    # Sizes (issue 13): tiny files naming huge tensors. They aborted with
    # "LLVM ERROR: out of memory" or made the artifact writer grow memory.
    write(out, "const_of_shape_2e40.onnx", ser(m_const_of_shape([2**40])), written)
    write(out, "const_of_shape_2e20x2e20.onnx", ser(m_const_of_shape([2**20, 2**20])), written)
    write(out, "const_of_shape_2e31x2e31.onnx", ser(m_const_of_shape([2**31, 2**31])), written)
    write(out, "const_of_shape_2e62.onnx", ser(m_const_of_shape([2**62])), written)
    write(out, "expand_2e20x2e20.onnx", ser(m_expand([2**20, 2**20])), written)

    # Sanity: the models meant to be valid are accepted by onnx.checker (by
    # path, so external data is resolved relative to the model's directory).
    for rel in EXPECT_VALID:
        onnx.checker.check_model(str(out / rel), full_check=True)
    loaded = onnx.load(str(out / "ext_ok" / "model.onnx"), load_external_data=True)
    assert np.array_equal(onnx.numpy_helper.to_array(loaded.graph.initializer[0]), W_VALUES)

    for rel in written:
        print(rel)
    print(f"wrote {len(written)} files under {out}")


if __name__ == "__main__":
    main()
