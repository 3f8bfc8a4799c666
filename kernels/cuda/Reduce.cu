//===- Reduce.cu - reduce_sum / reduce_mean / reduce_max ------------------===//
//
// The input's dims are grouped into kept and reduced groups (size-1 dims
// dropped, neighbours of the same kind merged), as on the CPU. An output's
// elements are its kept index; each reduces over `count` elements addressed
// through the reduced groups. Two kernels:
//  * reduceRows, one block per output, when the innermost group is reduced
//    (a contiguous run per output) and long; when the outputs are few and
//    long (a full sum is one block) each is split into chunks too (a
//    block per output and chunk);
//  * reduceCols otherwise: 32 outputs per block (adjacent outputs read
//    adjacent inputs), the reduction split over 8 thread rows; when that
//    makes few blocks for long reductions (a bias gradient: [tokens, 768]
//    summed over the tokens, 24 blocks of 16,384 rows), the rows are split
//    into chunks too (a block per 32 outputs and chunk); reduceFinish
//    combines either split's partials in chunk order.
// A sum over the rows of an f16/bf16 [rows, n] matrix of whole aligned
// 16-byte vectors (a bias gradient) takes reduceColumnsVec instead: a thread
// per vector of columns (ColumnSums.cuh, its chunks finished alike).
// Float sums accumulate in double (as the CPU), integer sums wrap in 64 bits.
//
//===----------------------------------------------------------------------===//

#include "ColumnSums.cuh"
#include "Common.cuh"

#include <type_traits>

namespace smp::kernels::cuda {
using namespace detail;

namespace {

/// The element offset of row-major index i over `rank` dims.
__device__ inline int64_t offsetOf(int64_t i, int rank, const int64_t *shape,
                                   const int64_t *stride) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    int64_t q = i / shape[d];
    off += (i - q * shape[d]) * stride[d];
    i = q;
  }
  return off;
}

struct Plan {
  int keptRank = 0, redRank = 0;
  int64_t keptShape[kMaxRank], keptStride[kMaxRank];
  int64_t redShape[kMaxRank], redStride[kMaxRank];
  int64_t outputs = 1, count = 1;
  bool innerReduced = false; // the last non-1 input dim is reduced

  __device__ int64_t base(int64_t o) const {
    return offsetOf(o, keptRank, keptShape, keptStride);
  }
  __device__ int64_t reduced(int64_t r) const {
    if (redRank == 1)
      return r * redStride[0];
    return offsetOf(r, redRank, redShape, redStride);
  }
};

Status makePlan(const char *op, const std::vector<int64_t> &shape,
                const std::vector<bool> &reduced, Plan &p) {
  std::vector<common::DimGroup> groups = common::reduceGroups(shape, reduced);
  p.innerReduced = !groups.empty() && groups.back().reduced;
  for (const common::DimGroup &g : groups) {
    int &rank = g.reduced ? p.redRank : p.keptRank;
    if (rank == kMaxRank)
      return fail(op, "too many dim groups in " + shapeStr(shape));
    (g.reduced ? p.redShape : p.keptShape)[rank] = g.size;
    (g.reduced ? p.redStride : p.keptStride)[rank] = g.stride;
    ++rank;
    (g.reduced ? p.count : p.outputs) *= g.size;
  }
  if (p.redRank == 0) { // nothing reduced: one element per output
    p.redRank = 1;
    p.redShape[0] = 1;
    p.redStride[0] = 0;
  }
  return Status::success();
}

// Ops: Acc init(); Acc add(Acc, S); Acc combine(Acc, Acc); S finish(Acc).
template <class S> struct FloatSum {
  using Acc = double;
  bool mean;
  int64_t count;
  __device__ Acc init() const { return 0.0; }
  __device__ Acc add(Acc a, S v) const {
    return a + static_cast<double>(FT<S>::load(v));
  }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ S finish(Acc a) const {
    using C = typename FT<S>::C;
    return FT<S>::store(
        static_cast<C>(mean ? a / static_cast<double>(count) : a));
  }
};

template <class S> struct FloatMax {
  using C = typename FT<S>::C;
  using Acc = C;
  __device__ Acc init() const { return -std::numeric_limits<C>::infinity(); }
  __device__ Acc add(Acc a, S s) const { return MaxOp{}(a, FT<S>::load(s)); }
  __device__ Acc combine(Acc a, Acc b) const { return MaxOp{}(a, b); }
  __device__ S finish(Acc a) const { return FT<S>::store(a); }
};

template <class T> struct IntSum {
  using Acc = unsigned long long;
  bool mean;
  int64_t count;
  __device__ Acc init() const { return 0; }
  __device__ Acc add(Acc a, T v) const {
    return a + static_cast<Acc>(static_cast<int64_t>(v));
  }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ T finish(Acc a) const {
    if (!mean || count == 0)
      return static_cast<T>(a);
    if constexpr (std::is_signed_v<T>)
      return static_cast<T>(static_cast<int64_t>(a) / count);
    else
      return static_cast<T>(a / static_cast<uint64_t>(count));
  }
};

/// Max of integers (and Bool as uint8), accumulated in a 64-bit type of the
/// same signedness (the shuffles need 32- or 64-bit values).
template <class T> struct IntMax {
  using Acc = std::conditional_t<std::is_signed_v<T>, long long,
                                 unsigned long long>;
  __device__ Acc init() const {
    return static_cast<Acc>(std::numeric_limits<T>::lowest());
  }
  __device__ Acc add(Acc a, T v) const {
    Acc w = static_cast<Acc>(v);
    return a < w ? w : a;
  }
  __device__ Acc combine(Acc a, Acc b) const { return a < b ? b : a; }
  __device__ T finish(Acc a) const { return static_cast<T>(a); }
};

template <class Ops> struct Combine {
  Ops ops;
  template <class A> __device__ A operator()(A a, A b) const {
    return ops.combine(a, b);
  }
};

/// Writes output o's (partial) result: y[o] = finish(a), or with `part`
/// (the chunked split) part[chunk][o] = a for reduceFinish.
template <class S, class Ops>
__device__ void storeReduced(S *y, typename Ops::Acc *part, const Plan &p,
                             const Ops &ops, int64_t o, typename Ops::Acc a) {
  if (part)
    part[static_cast<int64_t>(blockIdx.y) * p.outputs + o] = a;
  else
    y[o] = ops.finish(a);
}

/// Block (o, chunk) reduces elements [chunk chunkLen, +chunkLen) of output
/// o (chunkLen = count: all of them).
template <class S, class Ops>
__global__ void reduceRows(const S *x, S *y, typename Ops::Acc *part, Plan p,
                           Ops ops, int64_t chunkLen) {
  using Acc = typename Ops::Acc;
  int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunkLen,
          r1 = min(p.count, r0 + chunkLen);
  for (int64_t o = blockIdx.x; o < p.outputs; o += gridDim.x) {
    int64_t base = p.base(o);
    Acc a = ops.init();
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x)
      a = ops.add(a, x[base + p.reduced(r)]);
    a = blockReduce(a, Combine<Ops>{ops}, ops.init());
    if (threadIdx.x == 0)
      storeReduced(y, part, p, ops, o, a);
  }
}

/// Block (tile, chunk) reduces rows [chunk chunkRows, +chunkRows) of its 32
/// outputs over 8 thread rows (chunkRows = count: all of them).
template <class S, class Ops>
__global__ void reduceCols(const S *x, S *y, typename Ops::Acc *part, Plan p,
                           Ops ops, int64_t chunkRows) {
  using Acc = typename Ops::Acc;
  __shared__ Acc sh[kColsY][kColsX];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunkRows,
          r1 = min(p.count, r0 + chunkRows);
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * kColsX; o0 < p.outputs;
       o0 += static_cast<int64_t>(gridDim.x) * kColsX) {
    int64_t o = o0 + tx;
    Acc a = ops.init();
    if (o < p.outputs) {
      int64_t base = p.base(o);
      for (int64_t r = r0 + ty; r < r1; r += kColsY)
        a = ops.add(a, x[base + p.reduced(r)]);
    }
    sh[ty][tx] = a;
    __syncthreads();
    if (ty == 0 && o < p.outputs) {
      for (int k = 1; k < kColsY; ++k)
        a = ops.combine(a, sh[k][tx]);
      storeReduced(y, part, p, ops, o, a);
    }
    __syncthreads();
  }
}

/// y[o]: the chunks' partials of output o combined in chunk order.
template <class S, class Ops>
__global__ void reduceFinish(const typename Ops::Acc *part, S *y,
                             int64_t outputs, int64_t chunks, Ops ops) {
  SMP_GRID_STRIDE(o, outputs) {
    typename Ops::Acc a = part[o];
    for (int64_t c = 1; c < chunks; ++c)
      a = ops.combine(a, part[c * outputs + o]);
    y[o] = ops.finish(a);
  }
}

/// The sums over the rows of a [rows, n] f16/bf16 matrix (n a multiple of
/// Pack<S>::N, aligned: a linear layer's bias gradient, [tokens, hidden]
/// summed over the tokens) on 16-byte vectors, accumulated in double as
/// FloatSum (vecColumnSums; columnSums' chunks, then columnSumsFinish).
/// reduceCols read one 2-byte element a thread.
template <class S>
__global__ void reduceColumnsVec(const S *x, int64_t rows, int64_t n,
                                 int64_t chunkRows, Out y, double *part) {
  using P = Pack<S>;
  const P *xv = reinterpret_cast<const P *>(x);
  int64_t nv = n / P::N;
  vecColumnSums<S, double>(
      rows, n, chunkRows, y, Out{nullptr, DType::F32}, part,
      [&](int64_t r, int64_t v, double(&s)[P::N], double(&)[P::N]) {
        P p = xv[r * nv + v];
#pragma unroll
        for (int k = 0; k < P::N; ++k)
          s[k] += static_cast<double>(FT<S>::load(p.v[k]));
      });
}

/// reduceColumnsVec when it takes the case: a sum (not a mean) of an
/// f16/bf16 input whose kept dims are one contiguous run of whole vectors
/// and whose reduced dims are the rows before it; `taken` says.
template <class S>
Status reduceColumnsFast(const char *name, Context *ctx, const Plan &p,
                         const S *x, const TensorRef &out, bool &taken) {
  taken = false;
  if constexpr (kHalf<S>) {
    int64_t n = p.outputs;
    if (p.innerReduced || p.keptRank != 1 || p.keptStride[0] != 1 ||
        p.redRank != 1 || p.redStride[0] != n || n % Pack<S>::N != 0 ||
        !aligned16({x}))
      return Status::success();
    taken = true;
    int64_t tiles = vecColumnTiles<S>(n);
    Out y = asOut(out);
    return columnSums<double>(
        name, ctx, tiles, p.count, n, ReduceChunks::kMinRows, y,
        Out{nullptr, DType::F32},
        [&](dim3 grid, int64_t chunkRows, double *part) {
          reduceColumnsVec<S><<<grid, dim3(kColsX, kColsY), 0, ctx->stream>>>(
              x, p.count, n, chunkRows, y, part);
        });
  }
  return Status::success();
}

/// The row path (a block per output) when the innermost group is reduced
/// and long, else the column path (a block per 32 outputs); either over
/// chunks of the reduced elements when the outputs alone make few blocks
/// (ReduceChunks in Common.cuh), their partials then combined by
/// reduceFinish.
template <class S, class Ops>
Status launchReduce(const char *name, Context *ctx, const Plan &p, const S *x,
                    S *y, const Ops &ops) {
  using Acc = typename Ops::Acc;
  bool rowPath = p.innerReduced && p.count >= 64;
  int64_t blocks = rowPath ? p.outputs : (p.outputs + kColsX - 1) / kColsX;
  ReduceChunks split(blocks, p.count,
                     rowPath ? ReduceChunks::kMinRowElements
                             : ReduceChunks::kMinRows);
  Scratch part;
  if (split.chunks > 1)
    SMP_RETURN_IF_ERROR(part.allocate(
        name, sizeof(Acc) * static_cast<size_t>(split.chunks * p.outputs),
        ctx->stream));
  Acc *pp = split.chunks > 1 ? part.as<Acc>() : nullptr;
  dim3 grid(blocksFor(blocks), static_cast<unsigned>(split.chunks));
  if (rowPath)
    reduceRows<S, Ops><<<grid, rowThreads(split.rows), 0, ctx->stream>>>(
        x, y, pp, p, ops, split.rows);
  else
    reduceCols<S, Ops><<<grid, dim3(kColsX, kColsY), 0, ctx->stream>>>(
        x, y, pp, p, ops, split.rows);
  SMP_RETURN_IF_ERROR(launchStatus(name));
  if (split.chunks == 1)
    return Status::success();
  return launchGrid(name, ctx, p.outputs, reduceFinish<S, Ops>,
                    part.as<const Acc>(), y, p.outputs, split.chunks, ops);
}

template <class T> __global__ void fillKernel(T *p, int64_t n, T v) {
  SMP_GRID_STRIDE(i, n) { p[i] = v; }
}

/// The value of a reduction over no elements.
Status fillEmpty(const char *name, Context *ctx, ReduceOp op,
                 const TensorRef &out) {
  int64_t n = out.numel();
  if (smp::base::isFloat(out.dtype))
    return visitFloat(out.dtype, name, [&](auto tag) {
      using S = typename decltype(tag)::type;
      double v = op == ReduceOp::Sum    ? 0.0
                 : op == ReduceOp::Mean ? std::numeric_limits<double>::quiet_NaN()
                                        : -std::numeric_limits<double>::infinity();
      S sv;
      if constexpr (std::is_same_v<S, __half>)
        sv = __float2half_rn(static_cast<float>(v));
      else if constexpr (std::is_same_v<S, __nv_bfloat16>)
        sv = __float2bfloat16_rn(static_cast<float>(v));
      else
        sv = static_cast<S>(v);
      return launchGrid(name, ctx, n, fillKernel<S>, out.as<S>(), n, sv);
    });
  if (op == ReduceOp::Max && out.dtype != DType::Bool)
    return visitInt(out.dtype, name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return launchGrid(name, ctx, n, fillKernel<T>, out.as<T>(), n,
                        std::numeric_limits<T>::lowest());
    });
  return cudaStatus(name,
                    cudaMemsetAsync(out.data, 0, out.bytes(), ctx->stream));
}

//===----------------------------------------------------------------------===//
// sum_squares: the gradient norm's sums of squares, many tensors a launch
//===----------------------------------------------------------------------===//

/// One input of sum_squares: f32, or f16/bf16 read widened.
struct SquaresDesc {
  const void *p;
  int64_t n;
  DType t;
};

/// The sum in double of the squares (each rounded to f32, as the mul's) of
/// this thread's share of x[begin, end): a whole aligned chunk 16 bytes at
/// a time.
template <class T>
__device__ double chunkSquares(const T *x, int64_t begin, int64_t end) {
  using P = Pack<T>;
  double a = 0;
  const T *c = x + begin;
  if (end - begin == kMultiChunk && reinterpret_cast<uintptr_t>(c) % 16 == 0) {
    const P *v = reinterpret_cast<const P *>(c);
    for (int64_t i = threadIdx.x; i < kMultiChunk / P::N; i += blockDim.x) {
      P p = v[i];
#pragma unroll
      for (int k = 0; k < P::N; ++k) {
        float f = FT<T>::load(p.v[k]);
        a += static_cast<double>(f * f);
      }
    }
    return a;
  }
  for (int64_t i = threadIdx.x; i < end - begin; i += blockDim.x) {
    float f = FT<T>::load(c[i]);
    a += static_cast<double>(f * f);
  }
  return a;
}

/// A block per chunk of kMultiChunk elements of one tensor (Common.cuh's
/// multi-tensor plan): part[block] = its squares' sum.
__global__ void squareChunks(const SquaresDesc *descs,
                             const int64_t *firstBlock, int64_t count,
                             double *part) {
  MultiChunk mc = multiChunk(firstBlock, count);
  const SquaresDesc d = descs[mc.tensor];
  int64_t end = min(d.n, mc.begin + kMultiChunk);
  double a = 0;
  if (d.t == DType::F32)
    a = chunkSquares(static_cast<const float *>(d.p), mc.begin, end);
  else if (d.t == DType::F16)
    a = chunkSquares(static_cast<const __half *>(d.p), mc.begin, end);
  else
    a = chunkSquares(static_cast<const __nv_bfloat16 *>(d.p), mc.begin, end);
  a = blockSum(a);
  if (threadIdx.x == 0)
    part[blockIdx.x] = a;
}

/// A block per tensor: sums[t] = its chunks' sums (in double, rounded to
/// f32, as its reduce_sum rounds); 0 for an empty tensor.
__global__ void tensorSquares(const int64_t *firstBlock, int64_t tensors,
                              int64_t blocks, const double *part, float *sums) {
  int64_t t = blockIdx.x;
  int64_t b1 = t + 1 < tensors ? firstBlock[t + 1] : blocks;
  double s = 0;
  for (int64_t b = firstBlock[t] + threadIdx.x; b < b1; b += blockDim.x)
    s += part[b];
  s = blockSum(s);
  if (threadIdx.x == 0)
    sums[t] = static_cast<float>(s);
}

/// out = the f32 sum of the tensors' sums in tensor order (as the add chain
/// rounds: 0 + the first term is the term, squares being >= 0).
__global__ void sumTensorSquares(const float *sums, int64_t tensors,
                                 float *out) {
  if (threadIdx.x != 0 || blockIdx.x != 0)
    return;
  float total = 0;
  for (int64_t t = 0; t < tensors; ++t)
    total += sums[t];
  out[0] = total;
}

} // namespace

Status sumSquares(const std::vector<TensorRef> &inputs, const TensorRef &out) {
  const char *name = "sum_squares";
  SMP_RETURN_IF_ERROR(common::checkSumSquares(inputs, out));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  // A block per chunk of each tensor (a function of the shapes, so the
  // order of the sums depends on nothing else); 64 blocks a tensor had left
  // GPT-2's 38.6M-element embedding to 64 blocks: 143 GB/s on an H200.
  std::vector<SquaresDesc> descs;
  MultiTensorPlan plan;
  for (const TensorRef &x : inputs) {
    descs.push_back({x.data, x.numel(), x.dtype});
    plan.add(x.numel()); // an empty tensor: no blocks
  }
  int64_t tensors = static_cast<int64_t>(inputs.size());
  Scratch dDescs, dFirst, part, sums;
  SMP_RETURN_IF_ERROR(uploadMulti(name, ctx, descs, plan, dDescs, dFirst));
  SMP_RETURN_IF_ERROR(part.allocate(
      name,
      static_cast<size_t>(std::max<int64_t>(plan.blocks, 1)) * sizeof(double),
      ctx->stream));
  SMP_RETURN_IF_ERROR(sums.allocate(
      name, static_cast<size_t>(tensors) * sizeof(float), ctx->stream));
  if (plan.blocks > 0) {
    squareChunks<<<static_cast<unsigned>(plan.blocks), kThreads, 0,
                   ctx->stream>>>(dDescs.as<SquaresDesc>(),
                                  dFirst.as<int64_t>(), tensors,
                                  part.as<double>());
    SMP_RETURN_IF_ERROR(launchStatus(name));
  }
  tensorSquares<<<static_cast<unsigned>(tensors), kThreads, 0, ctx->stream>>>(
      dFirst.as<int64_t>(), tensors, plan.blocks, part.as<double>(),
      sums.as<float>());
  SMP_RETURN_IF_ERROR(launchStatus(name));
  sumTensorSquares<<<1, 32, 0, ctx->stream>>>(sums.as<float>(), tensors,
                                              out.as<float>());
  return launchStatus(name);
}

Status reduce(ReduceOp op, const TensorRef &in,
              const std::vector<int64_t> &axes, const TensorRef &out) {
  const char *name = reduceOpName(op);
  std::vector<bool> reduced;
  SMP_RETURN_IF_ERROR(common::checkReduce(name, in, axes, out, reduced));
  bool isF = smp::base::isFloat(in.dtype), isBool = in.dtype == DType::Bool;
  if ((isBool && op != ReduceOp::Max) ||
      (!isF && !isBool && !smp::base::isInteger(in.dtype)))
    return unsupported(name, in.dtype);
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  if (out.numel() == 0)
    return Status::success();
  if (in.numel() == 0)
    return fillEmpty(name, ctx, op, out);
  Plan p;
  SMP_RETURN_IF_ERROR(makePlan(name, in.shape, reduced, p));

  if (isF)
    return visitFloat(in.dtype, name, [&](auto tag) {
      using S = typename decltype(tag)::type;
      if (op == ReduceOp::Max)
        return launchReduce(name, ctx, p, in.as<S>(), out.as<S>(),
                            FloatMax<S>{});
      if (op == ReduceOp::Sum) {
        bool taken;
        SMP_RETURN_IF_ERROR(
            reduceColumnsFast<S>(name, ctx, p, in.as<S>(), out, taken));
        if (taken)
          return Status::success();
      }
      return launchReduce(name, ctx, p, in.as<S>(), out.as<S>(),
                          FloatSum<S>{op == ReduceOp::Mean, p.count});
    });
  if (isBool)
    return launchReduce(name, ctx, p, in.as<uint8_t>(), out.as<uint8_t>(),
                        IntMax<uint8_t>{});
  return visitInt(in.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (op == ReduceOp::Max)
      return launchReduce(name, ctx, p, in.as<T>(), out.as<T>(), IntMax<T>{});
    return launchReduce(name, ctx, p, in.as<T>(), out.as<T>(),
                        IntSum<T>{op == ReduceOp::Mean, p.count});
  });
}

} // namespace smp::kernels::cuda

//===----------------------------------------------------------------------===//
// Cumulative sum: one thread per line along the axis, in order
//===----------------------------------------------------------------------===//

namespace smp::kernels::cuda {
using namespace detail;
namespace {

/// cumsum's arithmetic: floats accumulate in double, integers wrap in 64
/// bits.
template <class S> struct FloatScan {
  using Acc = double;
  __device__ static Acc load(S v) {
    return static_cast<double>(FT<S>::load(v));
  }
  __device__ static S store(Acc a) {
    return FT<S>::store(static_cast<typename FT<S>::C>(a));
  }
};
template <class T> struct IntScan {
  using Acc = uint64_t;
  using U = std::make_unsigned_t<T>;
  __device__ static Acc load(T v) { return static_cast<uint64_t>(U(v)); }
  __device__ static T store(Acc a) { return static_cast<T>(static_cast<U>(a)); }
};
template <class S>
using Scan =
    std::conditional_t<std::is_integral_v<S>, IntScan<S>, FloatScan<S>>;

template <class S>
__global__ void cumsumKernel(const S *x, S *y, int64_t lines, int64_t len,
                             int64_t inner, bool exclusive, bool reverse) {
  using Ops = Scan<S>;
  SMP_GRID_STRIDE(line, lines) {
    int64_t o = line / inner, i = line - o * inner;
    const S *px = x + o * len * inner + i;
    S *py = y + o * len * inner + i;
    typename Ops::Acc acc = 0;
    for (int64_t step = 0; step < len; ++step) {
      int64_t j = (reverse ? len - 1 - step : step) * inner;
      typename Ops::Acc v = Ops::load(px[j]);
      if (exclusive) {
        py[j] = Ops::store(acc);
        acc += v;
      } else {
        acc += v;
        py[j] = Ops::store(acc);
      }
    }
  }
}

} // namespace

Status cumsum(const TensorRef &in, int64_t axis, bool exclusive, bool reverse,
              const TensorRef &out) {
  const char *name = "cumsum";
  common::AxisSplit s;
  SMP_RETURN_IF_ERROR(common::checkCumSum(in, axis, out, s));
  bool isF = smp::base::isFloat(in.dtype);
  if (!isF && !smp::base::isInteger(in.dtype))
    return unsupported(name, in.dtype);
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  if (out.numel() == 0)
    return Status::success();
  int64_t lines = s.outer * s.inner;
  auto run = [&](auto tag) {
    using S = typename decltype(tag)::type;
    return launchGrid(name, ctx, lines, cumsumKernel<S>, in.as<S>(),
                      out.as<S>(), lines, s.len, s.inner, exclusive, reverse);
  };
  return isF ? visitFloat(in.dtype, name, run) : visitInt(in.dtype, name, run);
}

} // namespace smp::kernels::cuda
