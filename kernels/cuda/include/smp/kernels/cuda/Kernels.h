//===- Kernels.h - CUDA kernels of the smp ops ------------------*- C++ -*-===//
//
// The CUDA twin of smp/kernels/cpu/Kernels.h: the same entry points, names,
// argument order and semantics (see that header), with three differences:
//
//  * TensorRef::data points to DEVICE memory (every tensor, including labels,
//    indices and the optimizers' scalars). Dense row-major as on the CPU.
//  * Every kernel is asynchronous: it is enqueued on the stream of the
//    calling thread's current Context (setCurrentContext) and returns once
//    enqueued. The returned Status reports what the host can see: shapes,
//    dtypes and attributes that do not match the op, no current context, a
//    launch or cuBLASLt failure.
//  * Data errors (an index out of range, an integer division by zero, a
//    label outside the classes) are found on the device. They are recorded
//    in the context's device error flag (the first one wins) and reported by
//    the next synchronize(), whose message names the op like the CPU's
//    ("gather: index 7 at position 3 is out of range for axis 0 of size 5").
//    The outputs of a kernel that raised a data error are unspecified.
//
// Float kernels accept f32, f64, f16 and bf16; f16/bf16 are computed in f32,
// f64 in f64. Statistics (norms, softmax denominators) accumulate in f32 for
// f32/f16/bf16 (f64 for f64) with tree reductions; reductions (reduce_sum /
// reduce_mean) and the cross-entropy sums accumulate in f64. Results match
// the CPU kernels to rounding, not bit for bit. GEMMs run on cuBLASLt (fp32
// compute, TF32 off unless setAllowTF32), with a plain tiled kernel for what
// cuBLASLt refuses (integer types, odd alignments).
//
// Plain CUDA C++17 (cuBLASLt); no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_KERNELS_H
#define SMP_KERNELS_CUDA_KERNELS_H

#include "smp/base/Tensor.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace smp::kernels::cuda {

using smp::base::DType;
using smp::base::Status;
using smp::base::TensorRef;

//===----------------------------------------------------------------------===//
// Devices, contexts and streams (Context.cu)
//===----------------------------------------------------------------------===//

/// A device, a stream, a cuBLASLt handle with its workspace, and the device
/// error flag the kernels write. Opaque; one per thread (or per stream).
struct Context;

/// True when the CUDA runtime finds at least one device. Never aborts: false
/// without a driver or a GPU.
bool deviceAvailable();

/// Creates a context on `device`. With stream == nullptr the context creates
/// (and owns) a non-blocking stream; otherwise it enqueues on `stream`, which
/// the caller keeps alive and destroys. Allocates the cuBLASLt workspace
/// (32 MiB) and the error flag.
Status createContext(int device, Context *&out, cudaStream_t stream = nullptr);
/// Synchronizes the stream, then frees what createContext allocated (also
/// the stream when the context owns it). Null is a no-op. Clears the
/// calling thread's current context if it is this one.
void destroyContext(Context *ctx);

/// The context the kernels of the calling thread enqueue on (thread-local);
/// also makes its device current (cudaSetDevice). Null clears it.
void setCurrentContext(Context *ctx);
Context *currentContext();

cudaStream_t stream(Context &ctx);
int device(Context &ctx);
/// Lets fp32 GEMMs use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
/// Off by default: fp32 GEMMs then match the CPU to fp32 rounding.
void setAllowTF32(Context &ctx, bool allow);

/// Waits for the stream, then reads and clears the device error flag: a
/// failure naming the op for the first data error any kernel recorded since
/// the last synchronize, or for an asynchronous CUDA error.
Status synchronize(Context &ctx);

//===----------------------------------------------------------------------===//
// Elementwise (Elementwise.cu, Cast.cu)
//===----------------------------------------------------------------------===//

/// Same enumerators, in the same order, as smp::kernels::cpu::UnaryOp (a
/// static_cast converts between them).
enum class UnaryOp : uint8_t {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Tanh,
  Erf,
  Sigmoid,
  Silu,
  Relu,
  Sin,
  Cos,
  Not,
  Gelu,
  GeluTanh,
};
const char *unaryOpName(UnaryOp op);

Status unary(UnaryOp op, const TensorRef &in, const TensorRef &out);
Status leakyRelu(const TensorRef &in, float alpha, const TensorRef &out);
Status gelu(const TensorRef &in, bool tanhApproximation, const TensorRef &out);

/// Same enumerators, in the same order, as smp::kernels::cpu::BinaryOp.
enum class BinaryOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div, // integer division by zero: a device error ("div: ...")
  Pow,
  Max,
  Min,
  Equal,
  Less,
  Greater,
  And,
  Or,
  Mod,  // floor remainder; integer by zero: a device error ("mod: ...")
  FMod, // C fmod; integer by zero: a device error ("fmod: ...")
};
const char *binaryOpName(BinaryOp op);

/// Numpy broadcasting (up to 8 dims after merging contiguous dims).
Status binary(BinaryOp op, const TensorRef &lhs, const TensorRef &rhs,
              const TensorRef &out);
Status where(const TensorRef &cond, const TensorRef &lhs, const TensorRef &rhs,
             const TensorRef &out);
Status cast(const TensorRef &in, const TensorRef &out);

//===----------------------------------------------------------------------===//
// Linear algebra (MatMul.cu)
//===----------------------------------------------------------------------===//

/// cuBLASLt for f32 / f64 / f16 / bf16 (fp32 accumulation for the half
/// types); integers and layouts cuBLASLt refuses run a tiled kernel.
Status matmul(const TensorRef &lhs, const TensorRef &rhs, const TensorRef &out,
              bool transposeLhs = false, bool transposeRhs = false);

//===----------------------------------------------------------------------===//
// Reductions (Reduce.cu), softmax (Softmax.cu)
//===----------------------------------------------------------------------===//

enum class ReduceOp : uint8_t { Sum, Mean, Max };

Status reduce(ReduceOp op, const TensorRef &in,
              const std::vector<int64_t> &axes, const TensorRef &out);
/// One thread per line along the axis, in order (as the CPU: floats in
/// double, integers wrapping).
Status cumsum(const TensorRef &in, int64_t axis, bool exclusive, bool reverse,
              const TensorRef &out);
Status softmax(const TensorRef &in, int64_t axis, const TensorRef &out);
Status logSoftmax(const TensorRef &in, int64_t axis, const TensorRef &out);

//===----------------------------------------------------------------------===//
// Normalisation (Norm.cu)
//===----------------------------------------------------------------------===//

Status layerNorm(const TensorRef &in, const TensorRef &scale,
                 const TensorRef *bias, int64_t axis, float epsilon,
                 const TensorRef &out);
Status rmsNorm(const TensorRef &in, const TensorRef &scale, float epsilon,
               const TensorRef &out);
Status batchNorm(const TensorRef &in, const TensorRef &scale,
                 const TensorRef &bias, const TensorRef &mean,
                 const TensorRef &variance, float epsilon,
                 const TensorRef &out);

//===----------------------------------------------------------------------===//
// Losses (Loss.cu)
//===----------------------------------------------------------------------===//

enum class Reduction : uint8_t { None = 0, Sum = 1, Mean = 2 };

/// A label outside [0, C) that is not ignoreIndex is a device error
/// ("cross_entropy: label ...").
Status crossEntropy(const TensorRef &logits, const TensorRef &labels,
                    int64_t ignoreIndex, Reduction reduction,
                    const TensorRef &out, const TensorRef *weights = nullptr);

//===----------------------------------------------------------------------===//
// Data movement (DataMovement.cu); any dtype
//===----------------------------------------------------------------------===//

Status copy(const TensorRef &in, const TensorRef &out);
Status transpose(const TensorRef &in, const std::vector<int64_t> &perm,
                 const TensorRef &out);
Status slice(const TensorRef &in, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &steps, const TensorRef &out);
Status concat(const std::vector<TensorRef> &inputs, int64_t axis,
              const TensorRef &out);
Status split(const TensorRef &in, int64_t axis,
             const std::vector<TensorRef> &outputs);
/// gather_nd / gather_elements (see the CPU's Kernels.h); an index out of
/// range is a device error ("gather_nd: index ..."); at most kMaxRank (8)
/// tuple components / dims.
Status gatherNd(const TensorRef &data, const TensorRef &indices,
                int64_t batchDims, const TensorRef &out);
Status gatherElements(const TensorRef &data, const TensorRef &indices,
                      int64_t axis, const TensorRef &out);
/// An index outside [-dim, dim) is a device error ("gather: index ...").
Status gather(const TensorRef &data, const TensorRef &indices, int64_t axis,
              const TensorRef &out);
Status expand(const TensorRef &in, const TensorRef &out);
Status trilu(const TensorRef &in, bool upper, int64_t k, const TensorRef &out);

//===----------------------------------------------------------------------===//
// Convolution and pooling (Conv.cu): direct kernels, for small CNNs
//===----------------------------------------------------------------------===//

Status conv(const TensorRef &in, const TensorRef &weight, const TensorRef *bias,
            const std::vector<int64_t> &strides,
            const std::vector<int64_t> &pads,
            const std::vector<int64_t> &dilations, int64_t group,
            const TensorRef &out);
Status maxPool(const TensorRef &in, const std::vector<int64_t> &kernel,
               const std::vector<int64_t> &strides,
               const std::vector<int64_t> &pads,
               const std::vector<int64_t> &dilations, bool ceilMode,
               const TensorRef &out);
Status avgPool(const TensorRef &in, const std::vector<int64_t> &kernel,
               const std::vector<int64_t> &strides,
               const std::vector<int64_t> &pads,
               const std::vector<int64_t> &dilations, bool ceilMode,
               bool countIncludePad, const TensorRef &out);

} // namespace smp::kernels::cuda

#endif // SMP_KERNELS_CUDA_KERNELS_H
