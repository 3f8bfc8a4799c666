//===- Kernels.h - CPU kernels of the smp ops --------------------*- C++
//-*-===//
//
// One entry point per smp op (see include/smp/Dialect/Smp/IR/SmpOps.td for
// the semantics). Every tensor is dense and row-major. The caller (the
// runtime, following the compiler's inferred types) gives the output's shape
// and dtype; the kernel writes out.data and never allocates it. Outputs must
// not overlap inputs unless noted (elementwise ops may run in place).
//
// Every kernel returns a Status: data errors (an index out of range, an
// integer division by zero, a label outside the classes) and inconsistent
// arguments (shapes or dtypes that do not match the op) are errors with a
// message that starts with the op's name; nothing aborts.
//
// Float kernels accept f32, f64, f16 and bf16; f16/bf16 are computed in f32,
// f64 in f64. Sums (reductions, norm statistics, softmax denominators, losses)
// accumulate in double. NaNs propagate through max/min/relu/pooling. In f32,
// exp, tanh, sigmoid, silu, the tanh GELU and softmax use vectorised
// approximations on x86-64 CPUs with AVX2 and FMA (within a few ulp, see
// VecMath.h); elsewhere the C library.
//
// Plain C++17 + OpenMP + OpenBLAS; no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CPU_KERNELS_H
#define SMP_KERNELS_CPU_KERNELS_H

#include "smp/base/Tensor.h"

#include <cstdint>
#include <vector>

namespace smp::kernels::cpu {

using smp::base::DType;
using smp::base::Status;
using smp::base::TensorRef;

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

/// Sets the number of OpenMP threads the kernels use (n >= 1). GEMMs are
/// split over these threads too, each part a single-threaded OpenBLAS call
/// (OpenBLAS's own thread pool is set to one thread).
void setNumThreads(int n);
/// The OpenMP thread count the kernels use.
int numThreads();

//===----------------------------------------------------------------------===//
// Elementwise (Elementwise.cpp, Cast.cpp)
//===----------------------------------------------------------------------===//

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
const char *unaryOpName(UnaryOp op);

/// out = op(in); same shape and dtype. May run in place (out.data == in.data).
Status unary(UnaryOp op, const TensorRef &in, const TensorRef &out);
/// out = x >= 0 ? x : alpha * x (floats).
Status leakyRelu(const TensorRef &in, float alpha, const TensorRef &out);
/// smp.gelu: UnaryOp::Gelu or UnaryOp::GeluTanh.
Status gelu(const TensorRef &in, bool tanhApproximation, const TensorRef &out);

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
const char *binaryOpName(BinaryOp op);

/// out = lhs op rhs with numpy broadcasting. lhs and rhs have the same dtype;
/// out has that dtype (Bool for comparisons and logic). Integer add/sub/mul/
/// pow wrap around; an integer div/mod/fmod by zero is an error (a float one
/// gives inf or NaN). May run in place on an operand that has out's shape.
Status binary(BinaryOp op, const TensorRef &lhs, const TensorRef &rhs,
              const TensorRef &out);

/// out = cond ? lhs : rhs, broadcasting all three (cond is Bool; lhs, rhs and
/// out share any dtype).
Status where(const TensorRef &cond, const TensorRef &lhs, const TensorRef &rhs,
             const TensorRef &out);

/// Element type conversion between any two dtypes (same shape). Float to
/// integer truncates toward zero (NaN gives 0; values beyond the range of
/// i64 saturate before wrapping to a narrower type); to Bool is x != 0;
/// integers wrap modulo the target width as in C.
Status cast(const TensorRef &in, const TensorRef &out);

//===----------------------------------------------------------------------===//
// Linear algebra (MatMul.cpp)
//===----------------------------------------------------------------------===//

/// numpy.matmul(op(lhs), op(rhs)) where op swaps the last two dims when its
/// flag is set; rank-1 operands are promoted (lhs to [1, K], rhs to [K, 1])
/// before the transpose and the promoted dim is dropped from out; batch dims
/// broadcast. f32 runs on cblas_sgemm, f64 on dgemm, f16/bf16 through f32,
/// integers with a plain loop (wrapping).
Status matmul(const TensorRef &lhs, const TensorRef &rhs, const TensorRef &out,
              bool transposeLhs = false, bool transposeRhs = false);

//===----------------------------------------------------------------------===//
// Reductions (Reduce.cpp), softmax (Softmax.cpp)
//===----------------------------------------------------------------------===//

enum class ReduceOp : uint8_t { Sum, Mean, Max };

/// Reduces `in` over `axes` (distinct; negative values count from the end).
/// out holds the kept dims in order; keepdims only changes out.shape (the
/// element count and layout are the same). Floats sum in double; integers
/// sum wrapping in 64 bits and their mean truncates; Max of floats propagates
/// NaN and is -inf over an empty set; Max also accepts Bool.
Status reduce(ReduceOp op, const TensorRef &in,
              const std::vector<int64_t> &axes, const TensorRef &out);

/// Cumulative sum along `axis` (negative counts from the end): out[.., i, ..]
/// sums in[.., j, ..] over j <= i, or j < i with `exclusive`, j >= i (j > i)
/// with `reverse`. Floats accumulate in double (as PyTorch's CPU cumsum
/// does), integers wrap. Lines along the axis run in parallel, each in
/// order, so the result does not depend on the thread count.
Status cumsum(const TensorRef &in, int64_t axis, bool exclusive, bool reverse,
              const TensorRef &out);

/// exp(x - max) / sum(exp(x - max)) along `axis` (negative counts from the
/// end). Same shape and dtype.
Status softmax(const TensorRef &in, int64_t axis, const TensorRef &out);
/// x - max - log(sum(exp(x - max))) along `axis`.
Status logSoftmax(const TensorRef &in, int64_t axis, const TensorRef &out);

//===----------------------------------------------------------------------===//
// Normalisation (Norm.cpp)
//===----------------------------------------------------------------------===//

/// Normalises over dims [axis, rank): (x - mean) / sqrt(var + eps) * scale
/// (+ bias); scale and bias (any float dtype) broadcast onto those dims.
/// `bias` may be null.
Status layerNorm(const TensorRef &in, const TensorRef &scale,
                 const TensorRef *bias, int64_t axis, float epsilon,
                 const TensorRef &out);

/// x / sqrt(mean(x^2, last dim) + eps) * scale; scale broadcasts onto the
/// last dim.
Status rmsNorm(const TensorRef &in, const TensorRef &scale, float epsilon,
               const TensorRef &out);

/// Inference batch norm over channel dim 1 of [N, C, ...]:
/// (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c]; the four
/// per-channel tensors are [C] of any float dtype.
Status batchNorm(const TensorRef &in, const TensorRef &scale,
                 const TensorRef &bias, const TensorRef &mean,
                 const TensorRef &variance, float epsilon,
                 const TensorRef &out);

//===----------------------------------------------------------------------===//
// Losses (Loss.cpp)
//===----------------------------------------------------------------------===//

/// Same numbering as smp::Reduction in SmpAttrs.td.
enum class Reduction : uint8_t { None = 0, Sum = 1, Mean = 2 };

/// Softmax cross-entropy of logits [..., C] against integer labels [...]
/// (any integer dtype), PyTorch semantics: a label equal to ignoreIndex
/// contributes 0 (and a 0 in the None output); Mean divides by the number of
/// labels that are not ignored (NaN when all are ignored, as in PyTorch).
/// out is labels' shape for None, a scalar (one element) otherwise. A label
/// outside [0, C) that is not ignoreIndex is an error naming it.
/// With `weights` ([C], any float dtype), each loss is scaled by its class's
/// weight and Mean divides by the sum of the weights of the labels that are
/// not ignored (PyTorch and ONNX SoftmaxCrossEntropyLoss semantics).
Status crossEntropy(const TensorRef &logits, const TensorRef &labels,
                    int64_t ignoreIndex, Reduction reduction,
                    const TensorRef &out, const TensorRef *weights = nullptr);

//===----------------------------------------------------------------------===//
// Data movement (DataMovement.cpp); any dtype, elements copied by size
//===----------------------------------------------------------------------===//

/// Copies the elements (smp.reshape: same dtype and element count). A no-op
/// when out.data == in.data.
Status copy(const TensorRef &in, const TensorRef &out);

/// out dim i = in dim perm[i].
Status transpose(const TensorRef &in, const std::vector<int64_t> &perm,
                 const TensorRef &out);

/// out[i...] = in[starts[d] + i[d] * steps[d] ...]. Starts are normalised
/// (inside the dim, see SliceOp); steps are non-zero and may be negative;
/// out.shape gives the number of elements per dim. An index outside the
/// input is an error.
Status slice(const TensorRef &in, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &steps, const TensorRef &out);

/// Concatenates along `axis` (negative counts from the end).
Status concat(const std::vector<TensorRef> &inputs, int64_t axis,
              const TensorRef &out);

/// Splits along `axis` into outputs whose sizes along it sum to in's.
Status split(const TensorRef &in, int64_t axis,
             const std::vector<TensorRef> &outputs);

/// out = data[:axis] ++ indices.shape ++ data[axis+1:]; indices of any
/// integer dtype, negative ones count from the end; an index outside
/// [-dim, dim) is an error naming it.
Status gather(const TensorRef &data, const TensorRef &indices, int64_t axis,
              const TensorRef &out);

/// ONNX GatherND: out = indices.shape[:-1] ++ data.shape[b + k:], each
/// index tuple (k = indices' last dim) reading one slice of data after the
/// b = batchDims shared leading dims. An index outside [-dim, dim) is an
/// error naming it.
Status gatherNd(const TensorRef &data, const TensorRef &indices,
                int64_t batchDims, const TensorRef &out);

/// ONNX GatherElements (torch.gather): out (the indices' shape) reads
/// data at each element's position with `axis` replaced by its index.
Status gatherElements(const TensorRef &data, const TensorRef &indices,
                      int64_t axis, const TensorRef &out);

/// Numpy-broadcasts `in` to out.shape.
Status expand(const TensorRef &in, const TensorRef &out);

/// Keeps the upper (col - row >= k) or lower (col - row <= k) triangle of
/// the last two dims, zeroing the rest. May run in place.
Status trilu(const TensorRef &in, bool upper, int64_t k, const TensorRef &out);

//===----------------------------------------------------------------------===//
// Convolution and pooling (Conv.cpp); input [N, C, spatial...]
//===----------------------------------------------------------------------===//
//
// strides/dilations have one entry per spatial dim (empty: all 1); pads holds
// the begin pads of every spatial dim, then the end pads (empty: all 0).

/// Grouped N-d convolution: weight [M, C / group, k...], bias [M] or null.
/// im2col + GEMM (sgemm for f32/f16/bf16, dgemm for f64).
Status conv(const TensorRef &in, const TensorRef &weight, const TensorRef *bias,
            const std::vector<int64_t> &strides,
            const std::vector<int64_t> &pads,
            const std::vector<int64_t> &dilations, int64_t group,
            const TensorRef &out);

/// Max over each window's taps that fall inside the input (padding never
/// wins; NaN propagates; a window with no tap inside gives -inf).
Status maxPool(const TensorRef &in, const std::vector<int64_t> &kernel,
               const std::vector<int64_t> &strides,
               const std::vector<int64_t> &pads,
               const std::vector<int64_t> &dilations, bool ceilMode,
               const TensorRef &out);

/// Average over each window (ONNX AveragePool-19 / PyTorch): the divisor is
/// the number of taps inside the input, or with countIncludePad the taps
/// inside the padded input [-padBegin, size + padEnd) (a ceil-mode window
/// that overhangs the end padding does not count the overhang).
Status avgPool(const TensorRef &in, const std::vector<int64_t> &kernel,
               const std::vector<int64_t> &strides,
               const std::vector<int64_t> &pads,
               const std::vector<int64_t> &dilations, bool ceilMode,
               bool countIncludePad, const TensorRef &out);

} // namespace smp::kernels::cpu

#endif // SMP_KERNELS_CPU_KERNELS_H
