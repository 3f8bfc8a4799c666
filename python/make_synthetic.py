#!/usr/bin/env python3
"""A synthetic model of equal residual blocks, for pipeline benchmarks.

    y = x + relu(x W_1) W'_1 ... repeated --blocks times (each block two
    Linear layers, no bias), with random data x and targets for an mse loss.

Writes DIR/synthetic.onnx and DIR/data/{x,target}.npy. Needs onnx and numpy.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dir")
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--samples", type=int, default=1024)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    h = args.hidden
    nodes, inits = [], []
    x = "x"
    for b in range(args.blocks):
        for k in range(2):
            w = (rng.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)
            inits.append(numpy_helper.from_array(w, f"block{b}.w{k}"))
        nodes += [
            helper.make_node("MatMul", [x, f"block{b}.w0"], [f"b{b}_a"], name=f"/block{b}/fc1"),
            helper.make_node("Relu", [f"b{b}_a"], [f"b{b}_r"], name=f"/block{b}/relu"),
            helper.make_node("MatMul", [f"b{b}_r", f"block{b}.w1"], [f"b{b}_m"], name=f"/block{b}/fc2"),
            helper.make_node("Add", [x, f"b{b}_m"], [f"b{b}_y"], name=f"/block{b}/residual"),
        ]
        x = f"b{b}_y"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="/out"))
    graph = helper.make_graph(
        nodes, "synthetic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", h])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    os.makedirs(os.path.join(args.dir, "data"), exist_ok=True)
    onnx.save(model, os.path.join(args.dir, "synthetic.onnx"))
    np.save(os.path.join(args.dir, "data", "x.npy"),
            rng.standard_normal((args.samples, h)).astype(np.float32))
    np.save(os.path.join(args.dir, "data", "target.npy"),
            rng.standard_normal((args.samples, h)).astype(np.float32))


if __name__ == "__main__":
    main()
