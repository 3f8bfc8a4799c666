//===- Norm.cu - layer_norm, rms_norm, batch_norm and their gradients -----===//
//
// Forward: one block per row; the row's statistics are block reductions in
// the compute type (f32 for f32/f16/bf16, f64 for f64), the variance in two
// passes. Scale and bias (any float dtype) are read as they are when they
// have the normalised shape (the usual [hidden]: one launch a norm);
// broadcast onto the normalised dims, they are first expanded into a
// compute-type scratch of the row length (paramView).
//
// Gradients (any float dtype per operand): one block per row computes dx and
// stores the row's statistics; a column kernel (32 columns x 8 row slices
// per block) sums dscale / dbias per normalised position, into dscale and
// dbias themselves (two launches a norm) or, when the scale broadcasts, into
// scratches that a last kernel folds into the scale's shape.
//
// Where the rows allow it (one dtype, whole aligned 16-byte vectors: a
// transformer's hidden states), the forward and dx take a warp per row with
// the parameters staged in shared memory, and the column sums 16-byte
// vectors of columns (NormWarp.cuh): the same arithmetic per element, the
// sums in other groupings. f16/bf16 rows of 256, 512, 768 or 1,024 values
// are held in registers, a lane's vectors read once: the forward
// (normRowsHeld), and the gradient, which sums dscale / dbias in dx's pass
// (normGradRowsSums: each lane its columns over a block's 64 rows) and
// adds the blocks' sums in one kernel.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "NormWarp.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

template <class C>
__global__ void expandParamKernel(In p, Strided<1> st, C *out, int64_t n) {
  SMP_GRID_STRIDE(i, n) {
    int64_t off[1];
    st.offsets(i, off);
    out[i] = static_cast<C>(p.load(off[0]));
  }
}

/// The parameter p broadcast onto `target`, flattened into a C scratch.
template <class C>
Status expandParam(const char *op, Context *ctx, const TensorRef &p,
                   const std::vector<int64_t> &target, Scratch &s) {
  std::vector<int64_t> strides;
  if (!broadcastStrides(p.shape, target, strides))
    return fail(op, "parameter " + smp::base::describe(p) +
                        " does not broadcast onto " + shapeStr(target));
  int64_t n = product(target);
  if (Status st = s.allocate(op, static_cast<size_t>(n) * sizeof(C),
                             ctx->stream);
      !st.ok())
    return st;
  if (n == 0)
    return Status::success();
  Strided<1> st;
  if (Status r = makeStrided<1>(op, target, {strides}, st); !r.ok())
    return r;
  return launchGrid(op, ctx, n, expandParamKernel<C>, asIn(p), st, s.as<C>(),
                    n);
}

/// The dtype of compute type C.
template <class C> constexpr DType dtypeOfCompute() {
  return std::is_same_v<C, double> ? DType::F64 : DType::F32;
}

/// The parameter p as the kernels read it over `target` (the normalised
/// shape): p itself, in its own dtype, when it has target's elements (the
/// usual [hidden] scale: no launch), else p broadcast onto target in a C
/// scratch (expandParam). The same values either way.
template <class C>
Status paramView(const char *op, Context *ctx, const TensorRef &p,
                 const std::vector<int64_t> &target, Scratch &s, In &view) {
  std::vector<int64_t> strides;
  if (p.numel() == product(target) &&
      broadcastStrides(p.shape, target, strides)) {
    view = asIn(p);
    return Status::success();
  }
  SMP_RETURN_IF_ERROR(expandParam<C>(op, ctx, p, target, s));
  view = In{s.as<C>(), dtypeOfCompute<C>()};
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Forward kernels
//===----------------------------------------------------------------------===//

/// One row per block: layer norm ((x - mean) * rstd * scale (+ bias)) or,
/// with Rms, x * rstd * scale where rstd uses the mean square (mean 0).
template <class S, bool Rms>
__global__ void normRows(const S *x, S *y, int64_t rows, int64_t d, In scale,
                         In bias, float eps) {
  using C = typename FT<S>::C;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const S *xr = x + r * d;
    S *yr = y + r * d;
    C mean = C(0);
    if (!Rms) {
      C sum = C(0);
      for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
        sum += FT<S>::load(xr[i]);
      mean = blockSum(sum) / static_cast<C>(d);
    }
    C sq = C(0);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      C c = FT<S>::load(xr[i]) - mean;
      sq += c * c;
    }
    sq = blockSum(sq);
    C rstd = C(1) / dSqrt(sq / static_cast<C>(d) + static_cast<C>(eps));
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      C v = (FT<S>::load(xr[i]) - mean) * rstd * static_cast<C>(scale.load(i));
      if (bias.p)
        v += static_cast<C>(bias.load(i));
      yr[i] = FT<S>::store(v);
    }
  }
}

/// normRows or, where it fits, normRowsWarp.
template <class S, bool Rms>
Status launchNormRows(const char *name, Context *ctx, const TensorRef &in,
                      const TensorRef &out, int64_t rows, int64_t d, In scale,
                      In bias, float eps) {
  using C = typename FT<S>::C;
  bool warp = warpRowsFit<S>(d, 2, {in.data, out.data});
  if (int k = heldVectors<S>(d); warp && k != 0) {
    constexpr int64_t kRowsPerBlock = 32;
    unsigned blocks = blocksFor((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    // The emulator's name for the launch (its listings).
    [[maybe_unused]] const char *held = "normRowsHeld<S, Rms, K>";
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kWarpRowsThreads, 2 * d * sizeof(C), ctx->stream>>>(
          in.as<S>(), out.as<S>(), rows, d, scale, bias, eps,
          kRowsPerBlock); // cudaemu-name: held
    };
    visitHeld(
        k, [&](auto K) { launch(normRowsHeld<S, Rms, decltype(K)::value>); });
    return launchStatus(name);
  }
  if (warp) {
    normRowsWarp<S, Rms>
        <<<warpRowBlocks(rows), kWarpRowsThreads, 2 * d * sizeof(C),
           ctx->stream>>>(in.as<S>(), out.as<S>(), rows, d, scale, bias, eps);
    return launchStatus(name);
  }
  normRows<S, Rms><<<blocksFor(rows), rowThreads(d), 0, ctx->stream>>>(
      in.as<S>(), out.as<S>(), rows, d, scale, bias, eps);
  return launchStatus(name);
}

/// Per channel: a = scale / sqrt(var + eps), m = mean, b = bias (in double,
/// then the compute type), stored as coef[3 * c + {0, 1, 2}].
template <class C>
__global__ void batchNormCoefs(In sc, In bi, In mu, In var, float eps,
                               int64_t channels, C *coef) {
  SMP_GRID_STRIDE(c, channels) {
    double a = sc.load(c) / sqrt(var.load(c) + static_cast<double>(eps));
    coef[3 * c] = static_cast<C>(a);
    coef[3 * c + 1] = static_cast<C>(mu.load(c));
    coef[3 * c + 2] = static_cast<C>(bi.load(c));
  }
}

template <class S>
__global__ void batchNormKernel(const S *x, S *y, int64_t n, int64_t channels,
                                int64_t inner,
                                const typename FT<S>::C *coef) {
  SMP_GRID_STRIDE(i, n) {
    int64_t c = (i / inner) % channels;
    y[i] = FT<S>::store((FT<S>::load(x[i]) - coef[3 * c + 1]) * coef[3 * c] +
                        coef[3 * c + 2]);
  }
}

} // namespace

Status layerNorm(const TensorRef &in, const TensorRef &scale,
                 const TensorRef *bias, int64_t axis, float epsilon,
                 const TensorRef &out) {
  const char *name = "layer_norm";
  std::vector<int64_t> normShape;
  SMP_RETURN_IF_ERROR(
      common::checkLayerNorm(in, scale, bias, axis, out, normShape));
  if (!smp::base::isFloat(in.dtype))
    return unsupported(name, in.dtype);
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  int64_t d = product(normShape);
  if (in.numel() == 0)
    return Status::success();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename FT<S>::C;
    Scratch sc, bi;
    In scaleView, biasView{nullptr, DType::F32};
    SMP_RETURN_IF_ERROR(
        paramView<C>(name, ctx, scale, normShape, sc, scaleView));
    if (bias)
      SMP_RETURN_IF_ERROR(
          paramView<C>(name, ctx, *bias, normShape, bi, biasView));
    return launchNormRows<S, false>(name, ctx, in, out, in.numel() / d, d,
                                    scaleView, biasView, epsilon);
  });
}

Status rmsNorm(const TensorRef &in, const TensorRef &scale, float epsilon,
               const TensorRef &out) {
  const char *name = "rms_norm";
  std::vector<int64_t> last;
  SMP_RETURN_IF_ERROR(common::checkRmsNorm(in, scale, out, last));
  if (!smp::base::isFloat(in.dtype))
    return unsupported(name, in.dtype);
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  int64_t d = last[0];
  if (in.numel() == 0)
    return Status::success();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename FT<S>::C;
    Scratch sc;
    In scaleView;
    SMP_RETURN_IF_ERROR(paramView<C>(name, ctx, scale, last, sc, scaleView));
    return launchNormRows<S, true>(name, ctx, in, out, in.numel() / d, d,
                                   scaleView, In{nullptr, DType::F32}, epsilon);
  });
}

Status batchNorm(const TensorRef &in, const TensorRef &scale,
                 const TensorRef &bias, const TensorRef &mean,
                 const TensorRef &variance, float epsilon,
                 const TensorRef &out) {
  const char *name = "batch_norm";
  SMP_RETURN_IF_ERROR(
      common::checkBatchNorm(in, scale, bias, mean, variance, out));
  int64_t channels = in.shape[1];
  if (!smp::base::isFloat(in.dtype))
    return unsupported(name, in.dtype);
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  if (in.numel() == 0)
    return Status::success();
  int64_t inner = product(in.shape, 2), n = in.numel();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename FT<S>::C;
    Scratch coef;
    SMP_RETURN_IF_ERROR(
        coef.allocate(name, 3 * channels * sizeof(C), ctx->stream));
    SMP_RETURN_IF_ERROR(launchGrid(
        name, ctx, channels, batchNormCoefs<C>, asIn(scale), asIn(bias),
        asIn(mean), asIn(variance), epsilon, channels, coef.as<C>()));
    return launchGrid(name, ctx, n, batchNormKernel<S>, in.as<S>(), out.as<S>(),
                      n, channels, inner, coef.as<C>());
  });
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

namespace {

/// dx of one row per block; stores the row's statistics (layer norm: mean,
/// rstd; rms norm: 0, 1 / rms) in stats[2 r], stats[2 r + 1]. A residual
/// (res.p set) is added to dx rounded to its type, as a separate add.
template <class A, bool Rms>
__global__ void normGradRows(In x, In dy, In w, In res, Out dx, int64_t rows,
                             int64_t n, float eps, A *stats) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * n;
    A mean = A(0), rstd;
    if (Rms) {
      A sq = A(0);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        A v = static_cast<A>(x.load(base + j));
        sq += v * v;
      }
      sq = blockSum(sq);
      rstd = A(1) / dSqrt(sq / static_cast<A>(n) + static_cast<A>(eps));
    } else {
      A sum = A(0);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        sum += static_cast<A>(x.load(base + j));
      mean = blockSum(sum) / static_cast<A>(n);
      A sq = A(0);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        A c = static_cast<A>(x.load(base + j)) - mean;
        sq += c * c;
      }
      sq = blockSum(sq);
      rstd = A(1) / dSqrt(sq / static_cast<A>(n) + static_cast<A>(eps));
    }
    // Layer norm: sumD = sum(dy w), sumDX = sum(dy w xhat).
    // RMS norm: sumDX = sum(dy w x).
    A sumD = A(0), sumDX = A(0);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      A xv = static_cast<A>(x.load(base + j));
      A d = static_cast<A>(dy.load(base + j)) * static_cast<A>(w.load(j));
      sumD += d;
      sumDX += d * (Rms ? xv : (xv - mean) * rstd);
    }
    sumD = blockSum(sumD);
    sumDX = blockSum(sumDX);
    A inv = A(1) / static_cast<A>(n);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      A xv = static_cast<A>(x.load(base + j));
      A d = static_cast<A>(dy.load(base + j)) * static_cast<A>(w.load(j));
      A g = Rms ? rstd * (d - xv * rstd * rstd * sumDX * inv)
                : rstd * (d - sumD * inv - (xv - mean) * rstd * sumDX * inv);
      if (res.p) {
        double r = res.load(base + j); // before the store: may share memory
        dx.store(base + j, static_cast<double>(g));
        dx.store(base + j, loadFloat(dx.p, dx.t, base + j) + r);
      } else {
        dx.store(base + j, static_cast<double>(g));
      }
    }
    if (threadIdx.x == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

/// ds[j] = sum_r dy[r, j] xhat[r, j], db[j] = sum_r dy[r, j] (db.p null:
/// none), each summed in A from A(0) as foldToParam sums them. Block (tile,
/// c) sums rows [c chunkRows, (c + 1) chunkRows); with `part` (chunks of
/// ReduceChunks) it writes its sums there, ds's at part[c n + j] and db's at
/// part[(chunks + c) n + j], for columnSumsFinish.
template <class A, bool Rms>
__global__ void normGradColumns(In x, In dy, const A *stats, int64_t rows,
                                int64_t n, int64_t chunkRows, Out ds, Out db,
                                A *part) {
  __shared__ A ps[kColsY][kColsX], pb[kColsY][kColsX];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t c = blockIdx.y, r1 = min(rows, (c + 1) * chunkRows);
  for (int64_t j0 = static_cast<int64_t>(blockIdx.x) * kColsX; j0 < n;
       j0 += static_cast<int64_t>(gridDim.x) * kColsX) {
    int64_t j = j0 + tx;
    A s = A(0), b = A(0);
    if (j < n)
      for (int64_t r = c * chunkRows + ty; r < r1; r += kColsY) {
        A g = static_cast<A>(dy.load(r * n + j));
        A xv = static_cast<A>(x.load(r * n + j));
        A xhat = Rms ? xv * stats[2 * r + 1]
                     : (xv - stats[2 * r]) * stats[2 * r + 1];
        s += g * xhat;
        b += g;
      }
    columnRowsSum(ps, pb, j, n, s, b, part, c, int64_t(gridDim.y), ds, db);
  }
}

/// The finish's thread rows after normGradRowsSums (1,024 threads a block).
constexpr int kFinishRows = 32;

/// out[s] = sum of full[j] over the positions j of the normalised shape
/// that parameter element s broadcasts onto.
template <class A>
__global__ void foldToParam(const A *full, Strided<1> keep, Strided<1> bcast,
                            int64_t bcount, Out out, int64_t n) {
  SMP_GRID_STRIDE(s, n) {
    int64_t base[1];
    keep.offsets(s, base);
    A acc = A(0);
    for (int64_t b = 0; b < bcount; ++b) {
      int64_t off[1];
      bcast.offsets(b, off);
      acc += full[base[0] + off[0]];
    }
    out.store(s, static_cast<double>(acc));
  }
}

template <class A>
Status foldParam(const char *op, Context *ctx, const A *full,
                 const std::vector<int64_t> &norm, const TensorRef &param,
                 const TensorRef &out) {
  std::vector<int64_t> pshape(norm.size() - param.shape.size(), 1);
  pshape.insert(pshape.end(), param.shape.begin(), param.shape.end());
  std::vector<int64_t> normStrides = contiguousStrides(norm), bshape(norm.size());
  for (size_t d = 0; d < norm.size(); ++d)
    bshape[d] = pshape[d] == 1 ? norm[d] : 1;
  Strided<1> keep, bcast;
  SMP_RETURN_IF_ERROR(makeStrided<1>(op, pshape, {normStrides}, keep));
  SMP_RETURN_IF_ERROR(makeStrided<1>(op, bshape, {normStrides}, bcast));
  int64_t n = param.numel();
  return launchGrid(op, ctx, n, foldToParam<A>, full, keep, bcast,
                    product(bshape), asOut(out), n);
}

/// The rows' statistics (2 A values a row) that dx's kernels store for
/// the column sums; normGradRowsSums needs none.
template <class A>
Status allocateStats(const char *op, Context *ctx, int64_t rows,
                     Scratch &stats) {
  return stats.allocate(op, static_cast<size_t>(2 * rows) * sizeof(A),
                        ctx->stream);
}

/// normGradRowsSums over f16/bf16 rows of n = 32 k Pack<S>::N values (k in
/// 1..4), then columnSumsFinish over its blocks' sums: x and dy read
/// once (the column kernel read them again: 50 MB of GPT-2's 100 a norm).
template <class S, bool Rms>
Status normGradSums(const char *op, Context *ctx, const S *x, const S *dy, In w,
                    const S *res, S *dx, int64_t rows, int64_t n, float eps,
                    int k, Out ds, Out db) {
  using A = typename FT<S>::C;
  int64_t per = sumsRowsPerBlock(rows), blocks = (rows + per - 1) / per;
  Scratch part;
  SMP_RETURN_IF_ERROR(part.allocate(
      op, sizeof(A) * static_cast<size_t>(2 * blocks * n), ctx->stream));
  // The staged scale and a row of sums a warp.
  size_t smem =
      static_cast<size_t>((1 + kWarpRowsThreads / 32) * n) * sizeof(A);
  // The emulator's name for the launch (its listings).
  [[maybe_unused]] const char *sums = "normGradRowsSums<S, Rms, K>";
  auto launch = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(blocks), kWarpRowsThreads, smem,
             ctx->stream>>>(x, dy, w, res, dx, rows, n, eps, per,
                            part.as<A>()); // cudaemu-name: sums
  };
  visitHeld(
      k, [&](auto K) { launch(normGradRowsSums<S, Rms, decltype(K)::value>); });
  SMP_RETURN_IF_ERROR(launchStatus(op));
  return finishColumnSums<A, kFinishRows>(op, ctx, part.as<const A>(), blocks,
                                          n, ds, db);
}

/// The gradient's kernels with a warp per row and 16-byte accesses where
/// the tensors allow them (one dtype, whole aligned vectors: the hidden
/// states of a transformer); `done` false: not taken.
template <class A, bool Rms>
Status normGradWarp(const char *op, Context *ctx, const TensorRef &x,
                    const TensorRef &dy, const TensorRef &dx,
                    const TensorRef *residual, In w, int64_t rows, int64_t n,
                    float eps, Scratch &stats, Out ds, Out db, bool &done) {
  done = false;
  if (dy.dtype != x.dtype || dx.dtype != x.dtype ||
      (residual && residual->dtype != x.dtype))
    return Status::success();
  return visitFloat(x.dtype, op, [&](auto tag) -> Status {
    using S = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<typename FT<S>::C, A>) {
      return Status::success();
    } else {
      const S *res = residual ? residual->as<S>() : nullptr;
      if (!warpRowsFit<S>(n, 1, {x.data, dy.data, dx.data, res}))
        return Status::success();
      done = true;
      if (int k = heldVectors<S>(n); k != 0)
        return normGradSums<S, Rms>(op, ctx, x.as<S>(), dy.as<S>(), w, res,
                                    dx.as<S>(), rows, n, eps, k, ds, db);
      SMP_RETURN_IF_ERROR(allocateStats<A>(op, ctx, rows, stats));
      normGradRowsWarp<S, Rms>
          <<<warpRowBlocks(rows), kWarpRowsThreads, n * sizeof(A),
             ctx->stream>>>(x.as<S>(), dy.as<S>(), w, res, dx.as<S>(), rows, n,
                            eps, stats.as<A>());
      SMP_RETURN_IF_ERROR(launchStatus(op));
      int64_t tiles = vecColumnTiles<S>(n);
      // Chunks of 64 rows: a hidden size of 768 is 3 tiles wide.
      return columnSums<A>(
          op, ctx, tiles, rows, n, 64, ds, db,
          [&](dim3 grid, int64_t chunkRows, A *part) {
            normGradColumnsVec<S, Rms>
                <<<grid, dim3(kColsX, kColsY), 0, ctx->stream>>>(
                    x.as<S>(), dy.as<S>(), stats.as<A>(), rows, n, chunkRows,
                    ds, db, part);
          });
    }
  });
}

template <class A, bool Rms>
Status normGrad(const char *op, Context *ctx, const TensorRef &x,
                const TensorRef &scale, const TensorRef &dy,
                const std::vector<int64_t> &norm, float eps,
                const TensorRef &dx, const TensorRef &dscale,
                const TensorRef *dbias, const TensorRef *residual) {
  int64_t n = product(norm), rows = x.numel() / n;
  Scratch w, stats, ds, db;
  In wView;
  SMP_RETURN_IF_ERROR(paramView<A>(op, ctx, scale, norm, w, wView));
  // A scale of the normalised shape gets its gradients written in place;
  // a broadcast one gets them summed into it (foldParam).
  bool folded = wView.p != scale.data;
  Out dsOut = asOut(dscale);
  Out dbOut = dbias ? asOut(*dbias) : Out{nullptr, DType::F32};
  if (folded) {
    for (Scratch *sc : {&ds, &db})
      SMP_RETURN_IF_ERROR(
          sc->allocate(op, static_cast<size_t>(n) * sizeof(A), ctx->stream));
    dsOut = Out{ds.as<A>(), dtypeOfCompute<A>()};
    dbOut = Out{dbias ? db.as<A>() : nullptr, dtypeOfCompute<A>()};
  }
  bool done;
  Status warp = normGradWarp<A, Rms>(op, ctx, x, dy, dx, residual, wView, rows,
                                     n, eps, stats, dsOut, dbOut, done);
  SMP_RETURN_IF_ERROR(warp);
  if (!done) {
    SMP_RETURN_IF_ERROR(allocateStats<A>(op, ctx, rows, stats));
    In xo = asIn(x), go = asIn(dy);
    normGradRows<A, Rms><<<blocksFor(rows), rowThreads(n), 0, ctx->stream>>>(
        xo, go, wView, asIn(residual), asOut(dx), rows, n, eps, stats.as<A>());
    SMP_RETURN_IF_ERROR(launchStatus(op));
    Status sums = columnSums<A>(
        op, ctx, (n + kColsX - 1) / kColsX, rows, n, ReduceChunks::kMinRows,
        dsOut, dbOut, [&](dim3 grid, int64_t chunkRows, A *part) {
          normGradColumns<A, Rms>
              <<<grid, dim3(kColsX, kColsY), 0, ctx->stream>>>(
                  xo, go, stats.as<A>(), rows, n, chunkRows, dsOut, dbOut,
                  part);
        });
    SMP_RETURN_IF_ERROR(sums);
  }
  if (!folded)
    return Status::success();
  SMP_RETURN_IF_ERROR(foldParam<A>(op, ctx, ds.as<A>(), norm, scale, dscale));
  if (dbias)
    return foldParam<A>(op, ctx, db.as<A>(), norm, scale, *dbias);
  return Status::success();
}

Status zeroFill(const char *op, Context *ctx, const TensorRef &t) {
  if (t.bytes() == 0)
    return Status::success();
  return cudaStatus(op, cudaMemsetAsync(t.data, 0, t.bytes(), ctx->stream));
}


} // namespace

Status layerNormGrad(const TensorRef &x, const TensorRef &scale,
                     const TensorRef &dy, int64_t axis, float epsilon,
                     const TensorRef &dx, const TensorRef &dscale,
                     const TensorRef &dbias, const TensorRef *residual) {
  const char *op = "layer_norm_grad";
  std::vector<int64_t> norm;
  SMP_RETURN_IF_ERROR(
      common::checkNormGrad(op, x, scale, dy, axis, dx, dscale, &dbias, norm));
  SMP_RETURN_IF_ERROR(common::checkResidual(op, x, residual));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  if (x.numel() == 0) { // no rows: zero parameter gradients
    SMP_RETURN_IF_ERROR(zeroFill(op, ctx, dscale));
    return zeroFill(op, ctx, dbias);
  }
  if (x.dtype == DType::F64)
    return normGrad<double, false>(op, ctx, x, scale, dy, norm, epsilon, dx,
                                   dscale, &dbias, residual);
  return normGrad<float, false>(op, ctx, x, scale, dy, norm, epsilon, dx,
                                dscale, &dbias, residual);
}

Status rmsNormGrad(const TensorRef &x, const TensorRef &scale,
                   const TensorRef &dy, float epsilon, const TensorRef &dx,
                   const TensorRef &dscale, const TensorRef *residual) {
  const char *op = "rms_norm_grad";
  std::vector<int64_t> norm;
  SMP_RETURN_IF_ERROR(
      common::checkNormGrad(op, x, scale, dy, -1, dx, dscale, nullptr, norm));
  SMP_RETURN_IF_ERROR(common::checkResidual(op, x, residual));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  if (x.numel() == 0)
    return zeroFill(op, ctx, dscale);
  if (x.dtype == DType::F64)
    return normGrad<double, true>(op, ctx, x, scale, dy, norm, epsilon, dx,
                                  dscale, nullptr, residual);
  return normGrad<float, true>(op, ctx, x, scale, dy, norm, epsilon, dx,
                               dscale, nullptr, residual);
}

} // namespace smp::kernels::cuda
