//===- Kernels.h - The kernel API of every backend ---------------*- C++ -*-===//
//
// One entry point per smp op (see include/smp/Dialect/Smp/IR/SmpOps.td for
// the semantics), declared once for all backends: the argument types here,
// the functions in KernelApi.inc, which each backend's header includes in its
// namespace (smp::kernels::cpu, smp::kernels::cuda) and implements. Adding a
// kernel means one declaration in KernelApi.inc and one definition per
// backend; the runtime's kernel tables (runtime/exec/lib/KernelSteps.inc)
// call it through `k::` for every backend alike.
//
// Conventions: every tensor is dense and row-major. The caller (the runtime,
// following the compiler's inferred types) gives the output's shape and
// dtype; the kernel writes out.data and never allocates it. Outputs must not
// overlap inputs unless noted (elementwise ops may run in place).
//
// Every kernel returns a Status: data errors (an index out of range, an
// integer division by zero, a label outside the classes) and inconsistent
// arguments (shapes or dtypes that do not match the op) are errors with a
// message that starts with the op's name; nothing aborts. Where a backend
// differs (device memory, asynchronous launches, data errors reported by a
// later synchronize) its own header says so.
//
// Float kernels accept f32, f64, f16 and bf16; f16/bf16 are computed in f32,
// f64 in f64. No MLIR, no CUDA, no OpenMP here.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_KERNELS_H
#define SMP_KERNELS_KERNELS_H

#include "smp/base/Tensor.h"

#include <cstdint>
#include <vector>

namespace smp::kernels {

using smp::base::DType;
using smp::base::Status;
using smp::base::TensorRef;

enum class UnaryOp : uint8_t {
  Neg, // floats and integers
  Abs, // floats and integers
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Tanh,
  Erf,
  Sigmoid,
  Silu,
  Relu, // floats and integers
  Sin,
  Cos,
  Not,      // Bool only
  Gelu,     // exact: 0.5 x (1 + erf(x / sqrt 2))
  GeluTanh, // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
};
/// "neg", ..., "gelu_tanh" (kernels/common).
const char *unaryOpName(UnaryOp op);

enum class BinaryOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div,     // integer division truncates; by zero is an error
  Pow,     // integers: a negative exponent gives +-1 for |base| 1, else 0
  Max,     // NaN propagates
  Min,     // NaN propagates
  Equal,   // any dtype -> Bool
  Less,    // any dtype -> Bool
  Greater, // any dtype -> Bool
  And,     // Bool
  Or,      // Bool
  Mod,     // floor remainder, the divisor's sign (Python's %, ONNX fmod=0)
  FMod,    // C fmod, the dividend's sign (ONNX fmod=1)
};
/// "add", ..., "fmod" (kernels/common).
const char *binaryOpName(BinaryOp op);

enum class ReduceOp : uint8_t { Sum, Mean, Max };
/// "reduce_sum", "reduce_mean", "reduce_max" (kernels/common).
const char *reduceOpName(ReduceOp op);

/// Same numbering as smp::Reduction in SmpAttrs.td.
enum class Reduction : uint8_t { None = 0, Sum = 1, Mean = 2 };

/// torch.optim.SGD's hyperparameters (the learning rate and step are
/// arguments: host scalars on the CPU, device scalars on a GPU).
struct SgdOptions {
  double momentum = 0, dampening = 0, weightDecay = 0;
  bool nesterov = false;
};

/// torch.optim.Adam / AdamW's hyperparameters.
struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weightDecay = 0;
  bool decoupled = true; // AdamW
};

/// smp.dropout's key: the step's (seed, step), the op's stream, its ratio,
/// and where the local tensor sits in the global one (every plan's split of
/// it): `samples` local samples along dim 0 (0: none), the first of them
/// sample `sampleOffset` of the global batch; a tensor-parallel split of dim
/// `tpDim` (-1: none) into `tpParts`, this rank's part `tpIndex`, the dim
/// made of `tpBlocks` blocks each split alike. See common/Dropout.h.
/// `stepOnDevice`, where not null: a word of device memory the kernels read
/// the step from instead (its low 32 bits, as `step`'s), so that a step
/// recorded as a CUDA graph draws each run's masks.
struct DropoutKey {
  uint64_t seed = 0, step = 0;
  const uint32_t *stepOnDevice = nullptr;
  int64_t stream = 0;
  double ratio = 0;
  int64_t samples = 0, sampleOffset = 0;
  int64_t tpDim = -1, tpParts = 1, tpBlocks = 1, tpIndex = 0;
};

} // namespace smp::kernels

#endif // SMP_KERNELS_KERNELS_H
