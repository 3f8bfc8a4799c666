//===- Common.cuh - Internals shared by the CUDA kernels ---------*- C++ -*-===//
//
// The Context, the device error flag, fp16/bf16 load/store, strided N-d
// indexing, launch helpers and block reductions; the host-side checks and
// shapes shared with kernels/cpu (same messages) come from kernels/common.
// Private to kernels/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_COMMON_CUH
#define SMP_KERNELS_CUDA_COMMON_CUH

#include "smp/kernels/common/Dispatch.h"
#include "smp/kernels/common/Elements.h"
#include "smp/kernels/common/OpChecks.h"
#include "smp/kernels/cuda/Kernels.h"
#include "smp/kernels/cuda/Training.h"

#include "CublasLtLoader.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace smp::kernels::cuda {

//===----------------------------------------------------------------------===//
// Context and device errors
//===----------------------------------------------------------------------===//

/// Data error codes written by the kernels (first one wins).
enum ErrorCode : int {
  kErrNone = 0,
  kErrDivByZero = 1,       // div
  kErrGatherIndex = 2,     // gather: value, position, bound (dim), aux (axis)
  kErrGatherGradIndex = 3, // gather_grad: same fields
  kErrLabel = 4,         // cross_entropy: value, position, bound, aux (ignore)
  kErrLabelGrad = 5,     // cross_entropy_grad: value, position, bound
  kErrModByZero = 6,     // mod (aux 0) / fmod (aux 1)
  kErrGatherNdIndex = 7, // gather_nd: value, position, bound, aux (dim)
  kErrGatherNdGradIndex = 8,        // gather_nd_grad: same fields
  kErrGatherElementsIndex = 9,      // gather_elements: as gather
  kErrGatherElementsGradIndex = 10, // gather_elements_grad: same fields
  kErrLabelShard = 11,     // cross_entropy_shard(_grad): as cross_entropy
  kErrLabelRank = 12,      // label_rank: as cross_entropy
  kErrLabelRankShard = 13, // label_rank without a target: value, position,
                           // bound (the shard's end), aux (its first class)
};

struct DeviceError {
  int code;
  int pad;
  long long value, position, bound, aux;
};

/// cuBLASLt's descriptors and chosen algorithm per product shape
/// (MatMul.cu): built on a shape's first product, reused after.
struct LtPlanCache;
/// Frees the plans and their descriptors (before the cuBLASLt handle).
void destroyLtPlans(LtPlanCache *plans);
/// SMP_CUBLASLT_TUNE_FILE's algorithms (GemmTuning.cuh).
struct GemmTuningFile;

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  bool ownsStream = false;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  DeviceError *dError = nullptr; // device
  DeviceError *hError = nullptr; // pinned host, for synchronize
  bool allowTF32 = false;
  bool tuneGemm = false;          // SMP_CUBLASLT_TUNE=1 (MatMul.cu)
  GemmTuningFile *tuneFile = nullptr; // SMP_CUBLASLT_TUNE_FILE, or null
  LtPlanCache *ltPlans = nullptr; // MatMul.cu's, made on first use
  int attentionForwardRows = 64;  // setAttentionForwardRows
  int attentionGradRows = 64;     // setAttentionGradRows
  bool attentionWgmmaForward = false;  // setAttentionWgmma
  bool attentionWgmmaBackward = false; // setAttentionWgmma
};

/// Records a data error unless one is already recorded.
__device__ inline void raiseError(DeviceError *e, int code, long long value,
                                  long long position, long long bound,
                                  long long aux) {
  if (atomicCAS(&e->code, 0, code) == 0) {
    e->value = value;
    e->position = position;
    e->bound = bound;
    e->aux = aux;
  }
}

namespace detail {

//===----------------------------------------------------------------------===//
// Host-side checks (kernels/common, shared with kernels/cpu)
//===----------------------------------------------------------------------===//

// fail, unsupported, checkTensor / checkDType / checkShape, broadcasting,
// normAxis, product, Tag, visitInt, visitBytes, ...
using namespace common;

/// The calling thread's context, or a failure naming op.
Status requireContext(const char *op, Context *&ctx);
/// A failure naming op for a CUDA error (success for cudaSuccess).
Status cudaStatus(const char *op, cudaError_t e);
/// cudaGetLastError after a launch.
Status launchStatus(const char *op);
/// Success on a device of compute capability 9.0 (H100, H200: the sm_90a
/// code of Hopper's wgmma runs there only); else a failure naming op and
/// `what` needs it.
Status requireHopper(const char *op, const char *what, int device);
/// The name of a cuBLAS(Lt) status (cublasGetStatusString is in libcublas,
/// which this library does not link).
const char *cublasStatusName(cublasStatus_t s);

/// Stream-ordered scratch memory (cudaMallocAsync), freed in stream order
/// when it goes out of scope (after the kernels that use it were enqueued).
class Scratch {
public:
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() {
    if (ptr_)
      cudaFreeAsync(ptr_, stream_);
  }
  Status allocate(const char *op, size_t bytes, cudaStream_t stream) {
    stream_ = stream;
    return cudaStatus(op, cudaMallocAsync(&ptr_, std::max<size_t>(bytes, 16),
                                          stream));
  }
  template <class T> T *as() const { return static_cast<T *>(ptr_); }

private:
  void *ptr_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

/// Copies host bytes [src, src + bytes) to device memory `dst` in the
/// parameters of kernels launched on `stream` (Context.cu: 4,000 bytes a
/// launch), so that nothing is read from host memory after the call: a
/// step captured as a CUDA graph carries the bytes its capture saw (a
/// graph's copy from a host vector would read it at each launch, long
/// after it is gone), and the host does not wait for a pageable copy's
/// staging.
Status uploadBytes(const char *op, void *dst, const void *src, size_t bytes,
                   cudaStream_t stream);

/// Scratch holding a copy of host `values` (uploadBytes: `values` may die
/// when this returns).
template <class T>
Status upload(const char *op, const std::vector<T> &values, Scratch &s,
              cudaStream_t stream) {
  size_t bytes = values.size() * sizeof(T);
  if (Status st = s.allocate(op, bytes, stream); !st.ok())
    return st;
  return uploadBytes(op, s.as<void>(), values.data(), bytes, stream);
}

//===----------------------------------------------------------------------===//
// Dtype dispatch
//===----------------------------------------------------------------------===//

/// Calls f(Tag<S>{}) with the device storage type of float dtype t.
template <class F> Status visitFloat(DType t, const char *op, F &&f) {
  return common::visitFloat<__half, __nv_bfloat16>(t, op, f);
}

//===----------------------------------------------------------------------===//
// Float storage types and their compute types (device)
//===----------------------------------------------------------------------===//

template <class S> struct FT;
template <> struct FT<float> {
  using C = float;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
template <> struct FT<double> {
  using C = double;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
};
template <> struct FT<__half> {
  using C = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct FT<__nv_bfloat16> {
  using C = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) {
    return __float2bfloat16_rn(v);
  }
};

/// Element i of a float tensor of any float dtype, as double.
__device__ inline double loadFloat(const void *p, DType t, int64_t i) {
  switch (t) {
  case DType::F32:
    return static_cast<const float *>(p)[i];
  case DType::F64:
    return static_cast<const double *>(p)[i];
  case DType::F16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case DType::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  default:
    return 0;
  }
}

/// Stores v into a float tensor of any float dtype (through f32 for the half
/// types, as the CPU's storeDouble).
__device__ inline void storeFloat(void *p, DType t, int64_t i, double v) {
  switch (t) {
  case DType::F32:
    static_cast<float *>(p)[i] = static_cast<float>(v);
    break;
  case DType::F64:
    static_cast<double *>(p)[i] = v;
    break;
  case DType::F16:
    static_cast<__half *>(p)[i] = __float2half_rn(static_cast<float>(v));
    break;
  case DType::BF16:
    static_cast<__nv_bfloat16 *>(p)[i] =
        __float2bfloat16_rn(static_cast<float>(v));
    break;
  default:
    break;
  }
}

/// A float tensor of any float dtype read element by element in double
/// (operands whose dtypes may differ from each other).
struct In {
  const void *p; // null: absent (optional operands)
  DType t;
  __device__ double load(int64_t i) const { return loadFloat(p, t, i); }
};
/// A float tensor of any float dtype written element by element.
struct Out {
  void *p;
  DType t;
  __device__ void store(int64_t i, double v) const { storeFloat(p, t, i, v); }
};
inline In asIn(const TensorRef &t) { return In{t.data, t.dtype}; }
/// An optional operand (p null when t is).
inline In asIn(const TensorRef *t) {
  return t ? asIn(*t) : In{nullptr, DType::F32};
}
inline Out asOut(const TensorRef &t) { return Out{t.data, t.dtype}; }

/// Element i of an integer (or Bool) tensor as int64 (the CPU's loadInt).
using common::loadIndex;

/// An integer tensor of any integer dtype read on the device (indices,
/// labels).
struct IndexIn {
  const void *p;
  DType t;

  __device__ int64_t load(int64_t i) const { return loadIndex(p, t, i); }
  /// True for a u64 element above INT64_MAX (never a valid index).
  __device__ bool huge(int64_t i) const {
    return t == DType::U64 &&
           static_cast<const uint64_t *>(p)[i] > uint64_t(INT64_MAX);
  }
  /// Element i normalised into [0, dim) (a negative index counts from the
  /// end), or -1 after recording error `code` with the index, its position
  /// i, `dim` and `axis`: the one range check of gather, gather_nd and
  /// gather_elements and their gradients.
  __device__ int64_t checked(int64_t i, int64_t dim, int64_t axis,
                             DeviceError *err, int code) const {
    bool big = huge(i);
    int64_t v = load(i);
    if (big || v < -dim || v >= dim) {
      raiseError(err, code, v, i, dim, axis);
      return -1;
    }
    return v < 0 ? v + dim : v;
  }
};
inline IndexIn asIndexIn(const TensorRef &t) {
  return IndexIn{t.data, t.dtype};
}

/// A one-element device scalar of any float or integer dtype as double.
__device__ inline double loadScalar(const void *p, DType t) {
  if (smp::base::DType::F32 == t || t == DType::F64 || t == DType::F16 ||
      t == DType::BF16)
    return loadFloat(p, t, 0);
  if (t == DType::U64)
    return static_cast<double>(*static_cast<const uint64_t *>(p));
  return static_cast<double>(loadIndex(p, t, 0));
}

__device__ inline bool isNaN(float v) { return isnan(v); }
__device__ inline bool isNaN(double v) { return isnan(v); }
template <class T> __device__ bool isNaN(T) { return false; } // integers

/// Math in the compute type (float or double): the float or the double
/// function of the CUDA math library.
__device__ inline float dExp(float x) { return expf(x); }
__device__ inline double dExp(double x) { return exp(x); }
__device__ inline float dLog(float x) { return logf(x); }
__device__ inline double dLog(double x) { return log(x); }
__device__ inline float dSqrt(float x) { return sqrtf(x); }
__device__ inline double dSqrt(double x) { return sqrt(x); }
__device__ inline float dTanh(float x) { return tanhf(x); }
__device__ inline double dTanh(double x) { return tanh(x); }
__device__ inline float dErf(float x) { return erff(x); }
__device__ inline double dErf(double x) { return erf(x); }
__device__ inline float dSin(float x) { return sinf(x); }
__device__ inline double dSin(double x) { return sin(x); }
__device__ inline float dCos(float x) { return cosf(x); }
__device__ inline double dCos(double x) { return cos(x); }
__device__ inline float dAbs(float x) { return fabsf(x); }
__device__ inline double dAbs(double x) { return fabs(x); }
__device__ inline float dPow(float x, float y) { return powf(x, y); }
__device__ inline double dPow(double x, double y) { return pow(x, y); }
__device__ inline float dFmod(float x, float y) { return fmodf(x, y); }
__device__ inline double dFmod(double x, double y) { return fmod(x, y); }

/// v < 0 without a warning for unsigned types.
template <class T> __device__ bool isNegative(T v) {
  if constexpr (std::is_signed_v<T>)
    return v < T(0);
  else
    return false;
}

//===----------------------------------------------------------------------===//
// Strided N-d indexing
//===----------------------------------------------------------------------===//

constexpr int kMaxRank = 8;

/// A contiguous output of `shape` read through N operands with element
/// strides (any sign, 0 for broadcast dims); size-1 dims dropped and
/// mergeable dims merged (as the CPU's StridedLoop). Passed by value.
template <int N> struct Strided {
  int rank = 0;
  int64_t shape[kMaxRank];
  int64_t stride[N][kMaxRank];

  /// Offsets of output element i into each operand.
  __device__ void offsets(int64_t i, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k)
      off[k] = 0;
    if (rank == 1) {
      for (int k = 0; k < N; ++k)
        off[k] = i * stride[k][0];
      return;
    }
    for (int d = rank - 1; d >= 0; --d) {
      int64_t q = i / shape[d], idx = i - q * shape[d];
      i = q;
      for (int k = 0; k < N; ++k)
        off[k] += idx * stride[k][d];
    }
  }
};

/// Builds a Strided<N>; fails when more than kMaxRank dims remain.
template <int N>
Status makeStrided(const char *op, const std::vector<int64_t> &outShape,
                   const std::array<std::vector<int64_t>, N> &strides,
                   Strided<N> &s) {
  std::vector<int64_t> shape;
  std::array<std::vector<int64_t>, N> str;
  common::mergeDims<N>(outShape, strides, shape, str);
  if (shape.size() > static_cast<size_t>(kMaxRank))
    return fail(op, "more than " + std::to_string(kMaxRank) +
                        " non-mergeable dims in " + shapeStr(outShape));
  s.rank = static_cast<int>(shape.size());
  for (int d = 0; d < s.rank; ++d) {
    s.shape[d] = shape[d];
    for (int k = 0; k < N; ++k)
      s.stride[k][d] = str[k][d];
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Launch helpers
//===----------------------------------------------------------------------===//

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n items with `threads` per block.
inline unsigned gridFor(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, int64_t(1) << 20));
}

/// Blocks for a loop with one block per item (grid-stride over items).
inline unsigned blocksFor(int64_t items) {
  return static_cast<unsigned>(
      std::clamp<int64_t>(items, 1, int64_t(1) << 20));
}

/// Threads (a multiple of 32, at most 256) for one block reducing n items.
inline int rowThreads(int64_t n) {
  if (n <= 32)
    return 32;
  if (n <= 64)
    return 64;
  if (n <= 128)
    return 128;
  return 256;
}

/// How a reduction splits the elements each output sums: a block per
/// output (row sums) or per 32 outputs (column sums: a bias or norm
/// gradient, [16,384 tokens, 768], is 24 blocks, 24 of an H100's 132 SMs,
/// each reading 2,048 rows a thread) gives few blocks when the outputs are
/// few. Chunks of at least minRows elements (kMinRows for columns,
/// kMinRowElements for rows) make about kBlocks blocks; each writes partial
/// sums, which a second kernel combines in chunk order. The split depends on
/// the shape only, so the sums have the same bits on any device. chunks ==
/// 1: no split (enough blocks already, or short reductions).
struct ReduceChunks {
  static constexpr int64_t kBlocks = 2048, kMinRows = 256,
                           kMinRowElements = 4096;
  int64_t chunks = 1, rows = 0; // rows: a chunk's (the last may have fewer)
  ReduceChunks(int64_t tiles, int64_t totalRows, int64_t minRows) {
    rows = totalRows;
    if (tiles >= kBlocks / 2 || totalRows < 2 * minRows)
      return;
    int64_t want = std::clamp<int64_t>((kBlocks + tiles - 1) / tiles, 2,
                                       (totalRows + minRows - 1) / minRows);
    rows = (totalRows + want - 1) / want;
    chunks = (totalRows + rows - 1) / rows;
  }
};

/// Enqueues kernel(args...) over n items (gridFor(n) blocks of kThreads) on
/// ctx's stream and returns the launch status; launches nothing for n == 0.
template <class... P, class... A>
Status launchGrid(const char *op, const Context *ctx, int64_t n,
                  void (*kernel)(P...), const A &...args) {
  if (n == 0)
    return Status::success();
  kernel<<<gridFor(n), kThreads, 0, ctx->stream>>>(args...); // cudaemu-name: op
  return launchStatus(op);
}

/// launchGrid on the calling thread's context (a failure naming op when
/// there is none, also for n == 0).
template <class... P, class... A>
Status launch(const char *op, int64_t n, void (*kernel)(P...),
              const A &...args) {
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  return launchGrid(op, ctx, n, kernel, args...);
}

#define SMP_GRID_STRIDE(i, n)                                                  \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x +            \
                   threadIdx.x;                                                \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

//===----------------------------------------------------------------------===//
// Multi-tensor launches (PyTorch's multi_tensor_apply): one launch over many
// tensors, each cut in chunks of kMultiChunk elements, a block a chunk
//===----------------------------------------------------------------------===//

constexpr int64_t kMultiChunk = 8192;

/// The blocks of a multi-tensor launch: tensor k's first is firstBlock[k].
struct MultiTensorPlan {
  std::vector<int64_t> firstBlock;
  int64_t blocks = 0;
  /// The next tensor, of n > 0 elements.
  void add(int64_t n) {
    firstBlock.push_back(blocks);
    blocks += (n + kMultiChunk - 1) / kMultiChunk;
  }
};

/// This block's tensor (the last k with firstBlock[k] <= blockIdx.x) and
/// the first element of its chunk.
struct MultiChunk {
  int64_t tensor, begin;
};
__device__ inline MultiChunk multiChunk(const int64_t *firstBlock,
                                        int64_t count) {
  int64_t b = blockIdx.x, lo = 0, hi = count - 1;
  while (lo < hi) {
    int64_t mid = (lo + hi + 1) / 2;
    if (firstBlock[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return MultiChunk{lo, (b - firstBlock[lo]) * kMultiChunk};
}

/// The device copies of a multi-tensor launch's descriptors and of its
/// plan's first blocks (a plan of more than INT32_MAX blocks is refused).
template <class D>
Status uploadMulti(const char *op, const Context *ctx,
                   const std::vector<D> &descs, const MultiTensorPlan &plan,
                   Scratch &dDescs, Scratch &dFirst) {
  if (plan.blocks > INT32_MAX)
    return Status::failure(std::string(op) +
                           ": too many elements for one launch");
  SMP_RETURN_IF_ERROR(upload(op, descs, dDescs, ctx->stream));
  return upload(op, plan.firstBlock, dFirst, ctx->stream);
}

/// Enqueues kernel(descs, firstBlock, count, args...) on the calling
/// thread's context, a block for each chunk of `plan` (descs[k] describes
/// its tensor k; both arrays are copied to the device).
template <class D, class... P, class... A>
Status launchMulti(const char *op, const std::vector<D> &descs,
                   const MultiTensorPlan &plan,
                   void (*kernel)(const D *, const int64_t *, int64_t, P...),
                   const A &...args) {
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  if (descs.empty())
    return Status::success();
  Scratch dDescs, dFirst;
  SMP_RETURN_IF_ERROR(uploadMulti(op, ctx, descs, plan, dDescs, dFirst));
  kernel<<<static_cast<unsigned>(plan.blocks), kThreads, 0, ctx->stream>>>(
      dDescs.template as<D>(), dFirst.as<int64_t>(),
      static_cast<int64_t>(descs.size()), args...); // cudaemu-name: op
  return launchStatus(op);
}

//===----------------------------------------------------------------------===//
// 16-byte vectors (a memory-bound kernel's loads: one access moves 8 bf16 or
// 4 f32 values, which keeps enough bytes in flight to fill the bandwidth)
//===----------------------------------------------------------------------===//

/// Whether S is a 16-bit float (f16, bf16): the storage types the vector
/// paths and the tensor cores take.
template <class S>
constexpr bool kHalf =
    std::is_same_v<S, __half> || std::is_same_v<S, __nv_bfloat16>;

/// 16 bytes of S, loaded or stored in one access.
template <class S> struct alignas(16) Pack {
  static constexpr int N = 16 / static_cast<int>(sizeof(S));
  S v[N];
};

/// True when every pointer is 16-byte aligned (null ones too).
inline bool aligned16(std::initializer_list<const void *> ps) {
  for (const void *p : ps)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return false;
  return true;
}

/// The sum over the warp, in every lane (all 32 lanes call it).
template <class T> __device__ T warpAllSum(T v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

//===----------------------------------------------------------------------===//
// Block reductions (blockDim.x a multiple of 32, all threads call them)
//===----------------------------------------------------------------------===//

struct SumOp {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
/// Max that propagates NaN (a NaN operand wins).
struct MaxOp {
  template <class T> __device__ T operator()(T a, T b) const {
    return (b > a || isNaN(b)) ? b : a;
  }
};

template <class T> __device__ T shuffleDown(T v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}

/// Reduces v over the block with op (identity: the value idle lanes use);
/// every thread gets the result.
template <class T, class Op>
__device__ T blockReduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int warps = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, shuffleDown(v, o));
  __syncthreads(); // partial may still be read by a previous call
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? partial[lane] : identity;
    for (int o = 16; o > 0; o >>= 1)
      v = op(v, shuffleDown(v, o));
    if (lane == 0)
      partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

template <class T> __device__ T blockSum(T v) {
  return blockReduce(v, SumOp{}, T(0));
}
template <class T> __device__ T blockMax(T v) {
  return blockReduce(v, MaxOp{}, -std::numeric_limits<T>::infinity());
}

} // namespace detail
} // namespace smp::kernels::cuda

#endif // SMP_KERNELS_CUDA_COMMON_CUH
