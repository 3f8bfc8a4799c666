//===- GraphBuilder.h - One model description, two writers ------*- C++ -*-===//
//
// The GPT and LLaMA decoders are written once (Models.cpp) against this
// interface; MlirWriter builds the smp dialect module the ONNX importer
// would produce (parameters as shape-only function arguments), OnnxWriter
// builds an ONNX graph with random initializers. Both see the same calls in
// the same order with the same node names, so the two outputs describe the
// same model (a lit test checks that importing the .onnx gives the .mlir's
// summary).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TOOLS_MODELGEN_GRAPHBUILDER_H
#define SMP_TOOLS_MODELGEN_GRAPHBUILDER_H

#include <cstdint>
#include <string>
#include <vector>

namespace smp::modelgen {

using Shape = std::vector<int64_t>;

/// How a parameter is initialised (ONNX output only; .mlir has no bytes).
enum class Init { Normal, Ones, Zeros };

enum class Binary { Add, Sub, Mul, Div };
enum class Unary { Neg, Cos, Sin };

class GraphBuilder {
public:
  /// A value handle, local to one builder.
  using V = int;
  virtual ~GraphBuilder() = default;

  /// The int64 graph input [batch, seq]; dim 0 is the batch.
  virtual V inputIds(const std::string &name, const Shape &shape) = 0;
  /// A float parameter (function argument / initializer).
  virtual V param(const std::string &name, const Shape &shape, Init init) = 0;
  /// Marks `v` as the graph output `name` (of the given shape).
  virtual void output(const std::string &name, V v, const Shape &shape) = 0;

  // Constants. `node` names the op (ONNX node name, MLIR NameLoc).
  virtual V constI64(const std::string &node, const Shape &shape,
                     const std::vector<int64_t> &values) = 0;
  virtual V constF32(const std::string &node, const Shape &shape,
                     const std::vector<float> &values) = 0;
  /// ConstantOfShape: a splat (printed as one value at any size).
  virtual V fillF32(const std::string &node, const Shape &shape,
                    float value) = 0;
  virtual V fillBool(const std::string &node, const Shape &shape,
                     bool value) = 0;

  virtual V gather(const std::string &node, V table, V indices) = 0;
  virtual V binary(Binary kind, const std::string &node, V a, V b) = 0;
  virtual V unary(Unary kind, const std::string &node, V x) = 0;
  virtual V matmul(const std::string &node, V a, V b) = 0;
  virtual V transpose(const std::string &node, V x, const Shape &perm) = 0;
  /// Reshape to `shape`, whose dim 0 is the batch dim of the input (ONNX
  /// writes 0, "copy", so a symbolic batch works).
  virtual V reshape(const std::string &node, V x, const Shape &shape) = 0;
  /// Broadcast to `shape`, dim 0 being the batch (ONNX writes 1 there).
  virtual V expand(const std::string &node, V x, const Shape &shape) = 0;
  virtual std::vector<V> split(const std::string &node, V x, int64_t axis,
                               const Shape &sizes) = 0;
  /// x[..., start:end, ...] along `axis` (of an input of rank `rank`).
  virtual V slice(const std::string &node, V x, int64_t rank, int64_t axis,
                  int64_t start, int64_t end) = 0;
  virtual V concat(const std::string &node, const std::vector<V> &xs,
                   int64_t axis) = 0;
  virtual V trilu(const std::string &node, V x, bool upper, int64_t k) = 0;
  virtual V where(const std::string &node, V cond, V a, V b) = 0;
  virtual V softmax(const std::string &node, V x, int64_t axis) = 0;
  virtual V layerNorm(const std::string &node, V x, V scale, V bias,
                      int64_t axis, float eps) = 0;
  /// x * rsqrt(mean(x^2, last dim) + eps) * scale.
  virtual V rmsNorm(const std::string &node, V x, V scale, int64_t axis,
                    float eps) = 0;
  /// GELU, tanh approximation.
  virtual V geluTanh(const std::string &node, V x) = 0;
  /// x * sigmoid(x).
  virtual V silu(const std::string &node, V x) = 0;

  V add(const std::string &n, V a, V b) { return binary(Binary::Add, n, a, b); }
  V mul(const std::string &n, V a, V b) { return binary(Binary::Mul, n, a, b); }
  V div(const std::string &n, V a, V b) { return binary(Binary::Div, n, a, b); }
};

} // namespace smp::modelgen

#endif // SMP_TOOLS_MODELGEN_GRAPHBUILDER_H
