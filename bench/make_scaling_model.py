#!/usr/bin/env python3
"""Writes a large, shallow-width ONNX graph for bench/compile_scaling.sh.

  make_scaling_model.py chain N OUT   x -> Relu -> Add(w_i) -> Relu -> ...:
                                      N nodes, N/2 distinct [8] weights
  make_scaling_model.py sum N OUT     y = Sum(x_0, ..., x_{N-1}): N inputs

Shapes are tiny ([4, 8]) so the time measured is the compiler's, not the
bytes'. OUT ending in .onnxtxt: ONNX text syntax, written with the standard
library alone (the lit tests use it); else a .onnx file (needs onnx and
numpy). The output is deterministic.
"""
import random
import sys


def onnxtxt(kind: str, n: int) -> str:
    lines = []
    if kind == "chain":
        rng = random.Random(0)
        prev, weights = "x", []
        for i in range(n):
            if i % 2 == 0:
                lines.append(f"  t{i} = Relu ({prev})")
            else:
                values = ", ".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(8))
                weights.append(f"float[8] w{i} = {{{values}}}")
                lines.append(f"  t{i} = Add ({prev}, w{i})")
            prev = f"t{i}"
        sig = f"(float[4,8] x) => (float[4,8] {prev})"
        inits = " <" + ", ".join(weights) + ">" if weights else ""
        head = f"{kind} {sig}{inits}"
    elif kind == "sum":
        xs = [f"x{i}" for i in range(n)]
        head = f"{kind} (" + ", ".join(f"float[4,8] {x}" for x in xs) + ") => (float[4,8] y)"
        lines.append("  y = Sum (" + ", ".join(xs) + ")")
    else:
        sys.exit(f"unknown kind {kind!r} (chain or sum)")
    return ('<ir_version: 8, opset_import: ["" : 17]>\n' + head + "\n{\n"
            + "\n".join(lines) + "\n}\n")


def main() -> None:
    kind, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if out.endswith(".onnxtxt"):
        with open(out, "w") as f:
            f.write(onnxtxt(kind, n))
        return
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    vi = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, 8])
    nodes, inits = [], []
    if kind == "chain":
        rng = np.random.default_rng(0)
        prev = "x"
        for i in range(n):
            if i % 2 == 0:
                nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"n{i}"))
            else:
                w = rng.standard_normal(8).astype(np.float32)
                inits.append(numpy_helper.from_array(w, f"w{i}"))
                nodes.append(helper.make_node("Add", [prev, f"w{i}"], [f"t{i}"], name=f"n{i}"))
            prev = f"t{i}"
        inputs, outputs = [vi("x")], [vi(prev)]
    elif kind == "sum":
        inputs = [vi(f"x{i}") for i in range(n)]
        nodes.append(helper.make_node("Sum", [f"x{i}" for i in range(n)], ["y"], name="sum"))
        outputs = [vi("y")]
    else:
        sys.exit(f"unknown kind {kind!r} (chain or sum)")
    graph = helper.make_graph(nodes, kind, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(out, "wb") as f:
        f.write(model.SerializeToString(deterministic=True))


if __name__ == "__main__":
    main()
