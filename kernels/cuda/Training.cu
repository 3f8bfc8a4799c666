//===- Training.cu - gelu_grad and the optimizer updates ------------------===//
//
// Elementwise kernels that read each operand through its dtype (any float
// dtype per operand, as the CPU) and compute in f64 like the CPU, then
// round once; gelu_grad of f16/bf16 whole 16-byte vectors computes in f32
// (geluGradVec), and bias_gelu_grad of such rows sums the bias gradient in
// the same pass (biasGeluGradVec, ColumnSums.cuh). The optimizers read lr, step
// and the optional skip flag from device scalars inside the kernel, so a
// training step needs no host round trip. Multi-tensor Adam: one launch
// (Common.cuh's launchMulti), a block for each chunk of each tensor.
//
//===----------------------------------------------------------------------===//

#include "ColumnSums.cuh"
#include "Common.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

/// GELU's derivative at v in C (double for geluGradKernel, f32 for
/// geluGradOf): the tanh form or erf's.
template <class C, bool Tanh> __device__ inline C geluDerivative(C v) {
  if (Tanh) {
    const C k = C(0.79788456080286535588), c = C(0.044715);
    C t = dTanh(k * (v + c * v * v * v));
    return C(0.5) * (1 + t) +
           C(0.5) * v * (1 - t * t) * k * (1 + 3 * c * v * v);
  }
  return C(0.5) * (1 + dErf(v * C(0.70710678118654752440))) +
         v * dExp(C(-0.5) * v * v) * C(0.39894228040143267794); // 1/sqrt(2pi)
}

__global__ void geluGradKernel(In x, In dy, Out dx, bool tanhApprox,
                               int64_t n) {
  SMP_GRID_STRIDE(i, n) {
    double v = x.load(i);
    double d = tanhApprox ? geluDerivative<double, true>(v)
                          : geluDerivative<double, false>(v);
    dx.store(i, dy.load(i) * d);
  }
}

/// dx = dy gelu'(x) for a 16-byte vector of f16/bf16 values, each computed
/// in f32 and rounded to S (geluGradVec's and biasGeluGradVec's). By value:
/// a reference into global memory would be read an element at a time.
template <class S, bool Tanh>
__device__ inline Pack<S> geluGradOf(Pack<S> x, Pack<S> dy) {
  Pack<S> o;
#pragma unroll
  for (int k = 0; k < Pack<S>::N; ++k)
    o.v[k] = FT<S>::store(FT<S>::load(dy.v[k]) *
                          geluDerivative<float, Tanh>(FT<S>::load(x.v[k])));
  return o;
}

/// gelu_grad of f16/bf16 x, dy and dx over 16-byte vectors (dx may be dy).
/// geluGradKernel had taken 2-byte loads through the operands' dtypes and
/// f64 arithmetic: a GELU without a bias before it (T5's gated GELU) in a
/// 16-bit model.
template <class S, bool Tanh>
__global__ void geluGradVec(const Pack<S> *x, const Pack<S> *dy, Pack<S> *dx,
                            int64_t nv) {
  SMP_GRID_STRIDE(i, nv) { dx[i] = geluGradOf<S, Tanh>(x[i], dy[i]); }
}

/// Launches geluGradVec when it takes the case (x, dy and dx of one 16-bit
/// dtype, whole vectors, 16-byte aligned); `taken` says.
Status geluGradFast(const TensorRef &x, const TensorRef &dy, bool tanhApprox,
                    const TensorRef &dx, bool &taken) {
  const char *op = "gelu_grad";
  taken = false;
  DType t = x.dtype;
  if ((t != DType::F16 && t != DType::BF16) || dy.dtype != t || dx.dtype != t)
    return Status::success();
  return visitFloat(t, op, [&](auto tag) -> Status {
    using S = typename decltype(tag)::type;
    if constexpr (kHalf<S>) {
      using P = Pack<S>;
      int64_t n = x.numel();
      if (n % P::N != 0 || !aligned16({x.data, dy.data, dx.data}))
        return Status::success();
      taken = true;
      if (tanhApprox)
        return launch(op, n / P::N, geluGradVec<S, true>, x.as<P>(), dy.as<P>(),
                      dx.as<P>(), n / P::N);
      return launch(op, n / P::N, geluGradVec<S, false>, x.as<P>(), dy.as<P>(),
                    dx.as<P>(), n / P::N);
    } else {
      return Status::success();
    }
  });
}

} // namespace

Status geluGrad(const TensorRef &x, const TensorRef &dy, bool tanhApprox,
                const TensorRef &dx) {
  const char *op = "gelu_grad";
  SMP_RETURN_IF_ERROR(common::checkGeluGrad(x, dy, dx));
  bool taken;
  SMP_RETURN_IF_ERROR(geluGradFast(x, dy, tanhApprox, dx, taken));
  if (taken)
    return Status::success();
  int64_t n = x.numel();
  return launch(op, n, geluGradKernel, asIn(x), asIn(dy), asOut(dx), tanhApprox,
                n);
}

namespace {

/// bias_gelu_grad over f16/bf16 rows of n values (whole aligned 16-byte
/// vectors: a transformer's [tokens, 4 hidden] MLP): dx = dy gelu'(x)
/// computed in f32 and rounded to S, and dbias the column sums of the
/// rounded dx (the CPU's), in the same pass (vecColumnSums). x, dy and dx
/// are read and written once (dx may be dy: a vector is read before it is
/// written); the generic path ran geluGradKernel (2-byte loads, f64) and a
/// reduce that read dx again.
template <class S, bool Tanh>
__global__ void biasGeluGradVec(const S *x, const S *dy, S *dx, int64_t rows,
                                int64_t n, int64_t chunkRows, Out db,
                                typename FT<S>::C *part) {
  using A = typename FT<S>::C;
  using P = Pack<S>;
  const P *xv = reinterpret_cast<const P *>(x);
  const P *gv = reinterpret_cast<const P *>(dy);
  P *ov = reinterpret_cast<P *>(dx);
  int64_t nv = n / P::N;
  vecColumnSums<S, A>(rows, n, chunkRows, db, Out{nullptr, DType::F32}, part,
                      [&](int64_t r, int64_t v, A(&s)[P::N], A(&)[P::N]) {
                        int64_t i = r * nv + v;
                        P o = geluGradOf<S, Tanh>(xv[i], gv[i]);
#pragma unroll
                        for (int k = 0; k < P::N; ++k)
                          s[k] += FT<S>::load(o.v[k]);
                        ov[i] = o;
                      });
}

/// Launches biasGeluGradVec when it takes the case (x, dy, dx and dbias
/// of one 16-bit dtype, rows of whole aligned vectors); `taken` says.
Status biasGeluGradFast(const TensorRef &x, const TensorRef &dy,
                        bool tanhApprox, const TensorRef &dx,
                        const TensorRef &dbias, bool &taken) {
  const char *op = "bias_gelu_grad";
  taken = false;
  DType t = x.dtype;
  if ((t != DType::F16 && t != DType::BF16) || dy.dtype != t || dx.dtype != t ||
      dbias.dtype != t || x.shape.empty())
    return Status::success();
  return visitFloat(t, op, [&](auto tag) -> Status {
    using S = typename decltype(tag)::type;
    if constexpr (kHalf<S>) {
      using A = typename FT<S>::C;
      int64_t n = x.shape.back(), rows = n ? x.numel() / n : 0;
      if (n % Pack<S>::N != 0 || rows == 0 ||
          !aligned16({x.data, dy.data, dx.data}))
        return Status::success();
      taken = true;
      Context *ctx;
      SMP_RETURN_IF_ERROR(requireContext(op, ctx));
      int64_t tiles = vecColumnTiles<S>(n);
      Out db = asOut(dbias);
      // Chunks of 64 rows: GPT-2's 3,072 columns are 12 tiles wide.
      return columnSums<A>(
          op, ctx, tiles, rows, n, 64, db, Out{nullptr, DType::F32},
          [&](dim3 grid, int64_t chunkRows, A *part) {
            dim3 block(kColsX, kColsY);
            if (tanhApprox)
              biasGeluGradVec<S, true><<<grid, block, 0, ctx->stream>>>(
                  x.as<S>(), dy.as<S>(), dx.as<S>(), rows, n, chunkRows, db,
                  part);
            else
              biasGeluGradVec<S, false><<<grid, block, 0, ctx->stream>>>(
                  x.as<S>(), dy.as<S>(), dx.as<S>(), rows, n, chunkRows, db,
                  part);
          });
    } else {
      return Status::success();
    }
  });
}

} // namespace

/// biasGeluGradVec where it applies; else two launches: geluGrad, then
/// reduce's column sums of dx. (matmul_gelu_grad, with cuBLASLt's
/// DGELU_BGRAD epilogue on the product that makes dy, is smpc
/// --dgelu-epilogue's.)
Status biasGeluGrad(const TensorRef &x, const TensorRef &dy, bool tanhApprox,
                    const TensorRef &dx, const TensorRef &dbias) {
  SMP_RETURN_IF_ERROR(common::checkBiasGeluGrad(x, dy, dx, dbias));
  if (dbias.dtype != dx.dtype)
    return unsupported("bias_gelu_grad", dbias.dtype);
  bool taken;
  SMP_RETURN_IF_ERROR(biasGeluGradFast(x, dy, tanhApprox, dx, dbias, taken));
  if (taken)
    return Status::success();
  SMP_RETURN_IF_ERROR(geluGrad(x, dy, tanhApprox, dx));
  common::BiasSums b = common::biasSums(x, dbias);
  return reduce(ReduceOp::Sum, dx, b.axes, b.sums);
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

namespace {

/// The device scalars of an update.
struct Hyper {
  const void *lr;
  DType lrType;
  const void *step;
  DType stepType;
  const void *skip; // null: never skip
};

/// The CPU runtime's skipUpdate reads the flag's first byte.
__device__ inline bool skipSet(const Hyper &h) {
  return h.skip && *static_cast<const uint8_t *>(h.skip) != 0;
}

/// Copies in to out element i when they differ (skip path).
__device__ inline void copyThrough(In in, Out out, int64_t i) {
  if (in.p != out.p)
    out.store(i, in.load(i));
}

/// One tensor of a (multi-tensor) SGD update.
struct SgdDesc {
  In param, grad, buf;
  Out newParam, newBuf;
  int64_t n;
};

/// SGD on elements [begin, end) of one tensor.
__device__ inline void sgdRange(const SgdDesc &t, int64_t begin, int64_t end,
                                int64_t stride, bool skip, double lr,
                                double step, const SgdOptions &o) {
  for (int64_t i = begin; i < end; i += stride) {
    if (skip) {
      copyThrough(t.param, t.newParam, i);
      copyThrough(t.buf, t.newBuf, i);
      continue;
    }
    double p = t.param.load(i);
    double d = t.grad.load(i);
    if (o.weightDecay != 0)
      d += o.weightDecay * p;
    if (o.momentum != 0) {
      double b = t.buf.load(i);
      b = step <= 1 ? d : o.momentum * b + (1 - o.dampening) * d;
      d = o.nesterov ? d + o.momentum * b : b;
      t.newBuf.store(i, b);
    }
    t.newParam.store(i, p - lr * d);
  }
}

__global__ void sgdKernel(SgdDesc t, Hyper h, SgdOptions o) {
  int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  sgdRange(t, start, t.n, static_cast<int64_t>(gridDim.x) * blockDim.x,
           skipSet(h), loadScalar(h.lr, h.lrType),
           loadScalar(h.step, h.stepType), o);
}

/// Block b updates its chunk of its tensor (Common.cuh's multi-tensor
/// launch).
__global__ void sgdMultiKernel(const SgdDesc *tensors,
                               const int64_t *firstBlock, int64_t count,
                               Hyper h, SgdOptions o) {
  MultiChunk c = multiChunk(firstBlock, count);
  const SgdDesc &t = tensors[c.tensor];
  int64_t end = c.begin + kMultiChunk < t.n ? c.begin + kMultiChunk : t.n;
  sgdRange(t, c.begin + threadIdx.x, end, blockDim.x, skipSet(h),
           loadScalar(h.lr, h.lrType), loadScalar(h.step, h.stepType), o);
}

/// One tensor of a (multi-tensor) Adam update. f32x4: the parameter, its
/// moments and their outputs are f32 and 16-byte aligned (an f32 master
/// copy's state, GPT-2's under bf16), so adamMultiKernel moves them four
/// elements an access (adamRangeF32x4).
struct AdamDesc {
  In param, grad, m, v;
  Out newParam, newM, newV;
  int64_t n;
  bool f32x4;
};

/// The update of one element (double arithmetic, the CPU's order);
/// stepSize = lr / (1 - beta1^step), bc2Sqrt = sqrt(1 - beta2^step).
__device__ inline void adamElement(double &p, double g, double &m, double &v,
                                   double lr, double stepSize, double bc2Sqrt,
                                   const AdamOptions &o) {
  if (o.decoupled)
    p *= 1 - lr * o.weightDecay;
  else if (o.weightDecay != 0)
    g += o.weightDecay * p;
  m += (1 - o.beta1) * (g - m);
  v = v * o.beta2 + (1 - o.beta2) * g * g;
  p -= stepSize * m / (sqrt(v) / bc2Sqrt + o.epsilon);
}

/// Adam on elements [begin, end) of one tensor; bc1 = 1 - beta1^step,
/// bc2Sqrt = sqrt(1 - beta2^step).
__device__ inline void adamRange(const AdamDesc &t, int64_t begin, int64_t end,
                                 int64_t stride, bool skip, double lr,
                                 double bc1, double bc2Sqrt,
                                 const AdamOptions &o) {
  double stepSize = lr / bc1;
  for (int64_t i = begin; i < end; i += stride) {
    if (skip) {
      copyThrough(t.param, t.newParam, i);
      copyThrough(t.m, t.newM, i);
      copyThrough(t.v, t.newV, i);
      continue;
    }
    double p = t.param.load(i), m = t.m.load(i), v = t.v.load(i);
    adamElement(p, t.grad.load(i), m, v, lr, stepSize, bc2Sqrt, o);
    t.newParam.store(i, p);
    t.newM.store(i, m);
    t.newV.store(i, v);
  }
}

/// adamRange over a chunk [begin, end) of an f32x4 tensor (begin a multiple
/// of 4), thread `tid` of `threads`: the f32 streams as 16-byte vectors
/// (Pack<float>), the gradient element by element (any float type), the
/// last elements past a multiple of 4 one by one; the same arithmetic.
__device__ inline void adamRangeF32x4(const AdamDesc &t, int64_t begin,
                                      int64_t end, int tid, int threads,
                                      double lr, double bc1, double bc2Sqrt,
                                      const AdamOptions &o) {
  using P = Pack<float>;
  static_assert(kMultiChunk % P::N == 0, "chunks start on whole vectors");
  double stepSize = lr / bc1;
  const P *pv = static_cast<const P *>(t.param.p),
          *mv = static_cast<const P *>(t.m.p),
          *vv = static_cast<const P *>(t.v.p);
  P *npv = static_cast<P *>(t.newParam.p), *nmv = static_cast<P *>(t.newM.p),
    *nvv = static_cast<P *>(t.newV.p);
  int64_t whole = begin + (end - begin) / P::N * P::N;
  for (int64_t i = begin + P::N * int64_t(tid); i < whole;
       i += P::N * threads) {
    P ps = pv[i / P::N], ms = mv[i / P::N], vs = vv[i / P::N];
#pragma unroll
    for (int k = 0; k < P::N; ++k) {
      double p = ps.v[k], m = ms.v[k], v = vs.v[k];
      adamElement(p, t.grad.load(i + k), m, v, lr, stepSize, bc2Sqrt, o);
      ps.v[k] = static_cast<float>(p);
      ms.v[k] = static_cast<float>(m);
      vs.v[k] = static_cast<float>(v);
    }
    npv[i / P::N] = ps;
    nmv[i / P::N] = ms;
    nvv[i / P::N] = vs;
  }
  adamRange(t, whole + tid, end, threads, false, lr, bc1, bc2Sqrt, o);
}

__device__ inline void adamScalars(const Hyper &h, const AdamOptions &o,
                                   double &lr, double &bc1, double &bc2Sqrt) {
  lr = loadScalar(h.lr, h.lrType);
  double step = loadScalar(h.step, h.stepType);
  bc1 = 1 - pow(o.beta1, step);
  bc2Sqrt = sqrt(1 - pow(o.beta2, step));
}

__global__ void adamKernel(AdamDesc t, Hyper h, AdamOptions o) {
  double lr, bc1, bc2Sqrt;
  adamScalars(h, o, lr, bc1, bc2Sqrt);
  int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  adamRange(t, start, t.n, static_cast<int64_t>(gridDim.x) * blockDim.x,
            skipSet(h), lr, bc1, bc2Sqrt, o);
}

/// Block b updates its chunk of its tensor (Common.cuh's multi-tensor
/// launch).
__global__ void adamMultiKernel(const AdamDesc *tensors,
                                const int64_t *firstBlock, int64_t count,
                                Hyper h, AdamOptions o) {
  double lr, bc1, bc2Sqrt;
  adamScalars(h, o, lr, bc1, bc2Sqrt);
  MultiChunk c = multiChunk(firstBlock, count);
  const AdamDesc &t = tensors[c.tensor];
  int64_t end = c.begin + kMultiChunk < t.n ? c.begin + kMultiChunk : t.n;
  bool skip = skipSet(h);
  if (t.f32x4 && !skip) // chunks start at multiples of kMultiChunk
    adamRangeF32x4(t, c.begin, end, threadIdx.x, blockDim.x, lr, bc1, bc2Sqrt,
                   o);
  else
    adamRange(t, c.begin + threadIdx.x, end, blockDim.x, skip, lr, bc1, bc2Sqrt,
              o);
}

Status checkScalar(const char *op, const char *what, const TensorRef &t) {
  SMP_RETURN_IF_ERROR(checkTensor(op, what, t));
  if (t.numel() != 1 || t.dtype == DType::Bool)
    return fail(op, std::string(what) + " must be a one-element number, got " +
                        smp::base::describe(t));
  return Status::success();
}

Status makeHyper(const char *op, const TensorRef &lr, const TensorRef &step,
                 const TensorRef *skip, Hyper &h) {
  SMP_RETURN_IF_ERROR(checkScalar(op, "lr", lr));
  SMP_RETURN_IF_ERROR(checkScalar(op, "step", step));
  if (skip) {
    SMP_RETURN_IF_ERROR(checkTensor(op, "skip", *skip));
    if (skip->numel() < 1)
      return fail(op, "skip must hold one element");
  }
  h = Hyper{lr.data, lr.dtype, step.data, step.dtype,
            skip ? skip->data : nullptr};
  return Status::success();
}

Status makeAdamDesc(const char *op, const AdamTensors &a, AdamDesc &d) {
  SMP_RETURN_IF_ERROR(common::checkAdam(op, a.param, a.grad, a.expAvg,
                                        a.expAvgSq, a.newParam, a.newExpAvg,
                                        a.newExpAvgSq));
  int64_t n = a.param.numel();
  if (a.newParam.numel() != n || a.newExpAvg.numel() != n ||
      a.newExpAvgSq.numel() != n)
    return fail(op, "outputs differ in size from the parameter");
  d = AdamDesc{asIn(a.param),
               asIn(a.grad),
               asIn(a.expAvg),
               asIn(a.expAvgSq),
               asOut(a.newParam),
               asOut(a.newExpAvg),
               asOut(a.newExpAvgSq),
               n,
               false};
  bool f32 = true;
  for (const TensorRef *x : {&a.param, &a.expAvg, &a.expAvgSq, &a.newParam,
                             &a.newExpAvg, &a.newExpAvgSq})
    f32 = f32 && x->dtype == DType::F32;
  d.f32x4 =
      f32 && aligned16({a.param.data, a.expAvg.data, a.expAvgSq.data,
                        a.newParam.data, a.newExpAvg.data, a.newExpAvgSq.data});
  return Status::success();
}

} // namespace

namespace {

Status makeSgdDesc(const char *op, const SgdTensors &t, SgdDesc &d) {
  SMP_RETURN_IF_ERROR(
      common::checkSgd(t.param, t.grad, t.buffer, t.newParam, t.newBuffer));
  int64_t n = t.param.numel();
  if (t.newParam.numel() != n || t.newBuffer.numel() != n)
    return fail(op, "outputs differ in size from the parameter");
  d = SgdDesc{asIn(t.param),     asIn(t.grad),       asIn(t.buffer),
              asOut(t.newParam), asOut(t.newBuffer), n};
  return Status::success();
}

/// A multi-tensor update: each entry checked and described by makeDesc
/// (an empty one skipped), then one launch of `kernel` over their chunks.
template <class T, class D, class O>
Status
updateMulti(const char *op, const std::vector<T> &tensors, const TensorRef &lr,
            const TensorRef &step, const TensorRef *skip, const O &options,
            Status (*makeDesc)(const char *, const T &, D &),
            void (*kernel)(const D *, const int64_t *, int64_t, Hyper, O)) {
  std::vector<D> descs;
  MultiTensorPlan plan;
  for (const T &t : tensors) {
    D d;
    SMP_RETURN_IF_ERROR(makeDesc(op, t, d));
    if (d.n == 0)
      continue;
    descs.push_back(d);
    plan.add(d.n);
  }
  Hyper h;
  SMP_RETURN_IF_ERROR(makeHyper(op, lr, step, skip, h));
  return launchMulti(op, descs, plan, kernel, h, options);
}

} // namespace

Status sgdUpdate(const TensorRef &param, const TensorRef &grad,
                 const TensorRef &buffer, const TensorRef &lr,
                 const TensorRef &step, const TensorRef *skip,
                 const SgdOptions &options, const TensorRef &newParam,
                 const TensorRef &newBuffer) {
  const char *op = "sgd_update";
  SgdDesc d;
  SMP_RETURN_IF_ERROR(
      makeSgdDesc(op, SgdTensors{param, grad, buffer, newParam, newBuffer}, d));
  Hyper h;
  SMP_RETURN_IF_ERROR(makeHyper(op, lr, step, skip, h));
  return launch(op, d.n, sgdKernel, d, h, options);
}

Status sgdUpdateMulti(const std::vector<SgdTensors> &tensors,
                      const TensorRef &lr, const TensorRef &step,
                      const TensorRef *skip, const SgdOptions &options) {
  return updateMulti("sgd_update_multi", tensors, lr, step, skip, options,
                     makeSgdDesc, sgdMultiKernel);
}

Status adamUpdate(const TensorRef &param, const TensorRef &grad,
                  const TensorRef &expAvg, const TensorRef &expAvgSq,
                  const TensorRef &lr, const TensorRef &step,
                  const TensorRef *skip, const AdamOptions &options,
                  const TensorRef &newParam, const TensorRef &newExpAvg,
                  const TensorRef &newExpAvgSq) {
  const char *op = "adam_update";
  AdamDesc d;
  SMP_RETURN_IF_ERROR(
      makeAdamDesc(op,
                   AdamTensors{param, grad, expAvg, expAvgSq, newParam,
                               newExpAvg, newExpAvgSq},
                   d));
  Hyper h;
  SMP_RETURN_IF_ERROR(makeHyper(op, lr, step, skip, h));
  return launch(op, d.n, adamKernel, d, h, options);
}

Status adamUpdateMulti(const std::vector<AdamTensors> &tensors,
                       const TensorRef &lr, const TensorRef &step,
                       const TensorRef *skip, const AdamOptions &options) {
  return updateMulti("adam_update_multi", tensors, lr, step, skip, options,
                     makeAdamDesc, adamMultiKernel);
}

} // namespace smp::kernels::cuda
