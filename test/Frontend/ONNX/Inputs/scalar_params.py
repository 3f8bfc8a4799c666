"""Writes scalars.onnx (argv[1]): x [batch, 4] -> MatMul -> two PRelu with
one-element slopes (`act2.weight = Identity(act.weight)`: what TorchScript's
eval() export makes of two fresh nn.PReLU()) -> Mul by a 0-D `scale` -> Mul by
one-element constants an exporter named (`onnx::Mul_7`, `val_3`,
`/c/Constant_output_0`) -> two more PRelu whose slopes torch.onnx.export
folded (`onnx::PRelu_20`, [1, 1], and its Identity copy) -> y. Used by
scalar-parameters.test."""
import sys

import onnx
from onnx import TensorProto, helper

inits = [
    helper.make_tensor("act.weight", TensorProto.FLOAT, [1], [0.25]),
    helper.make_tensor("scale", TensorProto.FLOAT, [], [1.5]),
    helper.make_tensor("onnx::Mul_7", TensorProto.FLOAT, [], [2.0]),
    helper.make_tensor("val_3", TensorProto.FLOAT, [], [0.5]),
    helper.make_tensor("/c/Constant_output_0", TensorProto.FLOAT, [1], [0.75]),
    helper.make_tensor("onnx::PRelu_20", TensorProto.FLOAT, [1, 1], [0.25]),
    helper.make_tensor("fc.weight", TensorProto.FLOAT, [4, 4],
                       [1.0, 0.5, 0.0, -0.5, 0.5, 1.0, 0.5, 0.0,
                        0.0, 0.5, 1.0, 0.5, -0.5, 0.0, 0.5, 1.0]),
]
nodes = [
    helper.make_node("Identity", ["act.weight"], ["act2.weight"]),
    helper.make_node("MatMul", ["x", "fc.weight"], ["h"]),
    helper.make_node("PRelu", ["h", "act.weight"], ["a"]),
    helper.make_node("PRelu", ["a", "act2.weight"], ["b"]),
    helper.make_node("Mul", ["b", "scale"], ["c"]),
    helper.make_node("Mul", ["c", "onnx::Mul_7"], ["d"]),
    helper.make_node("Mul", ["d", "val_3"], ["e"]),
    helper.make_node("Mul", ["e", "/c/Constant_output_0"], ["f"]),
    helper.make_node("Identity", ["onnx::PRelu_20"], ["onnx::PRelu_21"]),
    helper.make_node("PRelu", ["f", "onnx::PRelu_20"], ["g"]),
    helper.make_node("PRelu", ["g", "onnx::PRelu_21"], ["y"]),
]
graph = helper.make_graph(
    nodes, "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
