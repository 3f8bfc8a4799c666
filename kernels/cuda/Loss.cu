//===- Loss.cu - Softmax cross-entropy and its gradient (PyTorch) ---------===//
//
// One block per row: loss = log(sum(exp(x - max))) + max - x[label], the
// exponentials in the compute type, a thread's sum of them in f32 for
// f16/bf16 logits and f64 otherwise (RowAcc), the block's in f64, max and
// sum in one pass over the row (rowStats). Labels are read on the
// device; a label outside [0, C) that is not ignoreIndex records a device
// error (reported by synchronize) and its row contributes NaN. Sum / Mean
// write per-row losses and weights to a scratch summed by one block. A row
// is `stride` values of which the first `classes` are logits and the rest
// padding (smp-pad-classes): not read, and given a zero gradient.
// cross_entropy_with_grad (smp-fuse-loss-grad): the loss and the gradient
// of each row from one statistics pass, the row read again (from L2) for
// the gradient, which may overwrite it; the same arithmetic as the two
// kernels (lossThreads: the same threads a row).
// cross_entropy_shard and its gradient (tensor parallelism's vocabulary-
// parallel loss): the same row statistics over a shard's valid columns.
// label_rank (an evaluation's accuracy): per row, a block's count of the
// shard's classes ranked before the label.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

struct Labels : IndexIn {
  int64_t ignore;
};

/// Threads of a loss kernel's block (a row a block) from 8192 classes (a
/// language model's vocabulary): few rows in flight, so a row read for its
/// statistics is still in L2 when cross_entropy_with_grad reads it again
/// for its gradient (GPT-2's rows: 100 KB; 132 SMs x one block: 13 MB).
/// Every row kernel here takes as many threads for the same rows, so each
/// sums a row's logits in the same groups: the fused op's numbers are the
/// two ops'.
constexpr int kWideLossThreads = 1024;
inline int lossThreads(int64_t classes) {
  return classes >= 8192 ? kWideLossThreads : rowThreads(classes);
}

/// The label of row r, or -1 with `valid` false for an ignored or bad label
/// (a bad one also records a device error).
__device__ inline int64_t rowLabel(const Labels &l, int64_t r, int64_t classes,
                                   DeviceError *err, int code, bool &ignored,
                                   bool &bad) {
  bool huge = l.huge(r);
  int64_t v = l.load(r);
  ignored = !huge && v == l.ignore;
  bad = !ignored && (huge || v < 0 || v >= classes);
  if (bad && threadIdx.x == 0)
    raiseError(err, code, v, r, classes, l.ignore);
  return v;
}

/// What a thread sums a row's exponentials in: f32 for f16/bf16 logits
/// (their rows converted every exponential to f64 and back, at the
/// conversion unit's rate, a quarter of the f32 one's: more time than the
/// row's bytes took on an H200), f64 for f32 and f64 logits. The block's
/// sum of the threads' sums is in f64 either way.
template <class S>
using RowAcc = std::conditional_t<sizeof(S) == 2, float, double>;

/// One logit x into a thread's running max mt and the sum st of its
/// exponentials relative to it.
template <class C, class Acc>
__device__ inline void statsAdd(C x, C &mt, Acc &st) {
  if (x > mt) {
    st = st * dExp(static_cast<Acc>(mt) - static_cast<Acc>(x)) + Acc(1);
    mt = x;
  } else if (x != -std::numeric_limits<C>::infinity()) { // NaN too
    st += static_cast<Acc>(dExp(x - mt));
  }
}

/// Row r's max and sum(exp(x - max)) over the block, in one pass over the
/// row (a language model's rows are 100 KB: the loss and its gradient read
/// the step's largest tensor once each for their statistics, not twice).
/// Each thread keeps its own running max and the sum of its elements'
/// exponentials relative to it (rescaled in double when the max grows);
/// the block then takes the row's max and adds the thread sums rescaled
/// to it. A -inf logit adds 0; a NaN makes the sum NaN.
/// A 16-byte aligned row is read 16 bytes at a time (a thread's one 2-byte
/// load at a time kept too few bytes in flight: 433 GB/s on an H200), four
/// vectors a thread before their sums (one load in flight a thread left a
/// block's row wait on each; the sums in the same order).
template <class S>
__device__ void rowStats(const S *xr, int64_t classes,
                         typename FT<S>::C &m, double &sum) {
  using C = typename FT<S>::C;
  using P = Pack<S>;
  constexpr int kUnroll = 4;
  C mt = -std::numeric_limits<C>::infinity();
  RowAcc<S> st = 0;
  int64_t head = 0; // the elements read as whole vectors
  if (reinterpret_cast<uintptr_t>(xr) % 16 == 0) {
    const P *xv = reinterpret_cast<const P *>(xr);
    int64_t nv = classes / P::N, v = threadIdx.x, step = blockDim.x;
    for (; v + (kUnroll - 1) * step < nv; v += kUnroll * step) {
      P p[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        p[u] = xv[v + u * step];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int k = 0; k < P::N; ++k)
          statsAdd(FT<S>::load(p[u].v[k]), mt, st);
    }
    for (; v < nv; v += step) {
      P p = xv[v];
#pragma unroll
      for (int k = 0; k < P::N; ++k)
        statsAdd(FT<S>::load(p.v[k]), mt, st);
    }
    head = nv * P::N;
  }
  for (int64_t c = head + threadIdx.x; c < classes; c += blockDim.x)
    statsAdd(FT<S>::load(xr[c]), mt, st);
  m = blockMax(mt);
  double scaled =
      st == 0 ? 0.0
              : static_cast<double>(st) *
                    exp(static_cast<double>(mt) - static_cast<double>(m));
  sum = blockSum(scaled);
}

template <class S>
__global__ void __launch_bounds__(kWideLossThreads)
    crossEntropyRows(const S *x, Labels l, In w, int64_t rows, int64_t classes,
                     int64_t stride, Out outNone, double *rowLoss,
                     double *rowWeight, DeviceError *err) {
  using C = typename FT<S>::C;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    bool ignored, bad;
    int64_t lab = rowLabel(l, r, classes, err, kErrLabel, ignored, bad);
    double loss = 0, weight = 0;
    if (bad) {
      loss = nan("");
    } else if (!ignored) {
      const S *xr = x + r * stride;
      C m;
      double sum;
      rowStats(xr, classes, m, sum);
      loss = log(sum) + static_cast<double>(m) -
             static_cast<double>(FT<S>::load(xr[lab]));
      weight = w.p ? w.load(lab) : 1.0;
      if (w.p)
        loss *= weight;
    }
    if (threadIdx.x == 0) {
      if (outNone.p) // the logits' type, or f32 for f16/bf16 logits
        outNone.store(r, static_cast<double>(static_cast<C>(loss)));
      else {
        rowLoss[r] = loss;
        rowWeight[r] = weight;
      }
    }
  }
}

/// out[0] = sum(rowLoss) (/ sum(rowWeight) for Mean: NaN when 0), rounded
/// through the logits' compute type C.
template <class C>
__global__ void __launch_bounds__(1024)
    crossEntropyTotal(const double *rowLoss, const double *rowWeight,
                      int64_t rows, bool mean, Out out) {
  double total = 0, counted = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    total += rowLoss[r];
    counted += rowWeight[r];
  }
  total = blockSum(total);
  counted = blockSum(counted);
  if (threadIdx.x == 0) {
    if (mean)
      total = counted != 0 ? total / counted : nan("");
    out.store(0, static_cast<double>(static_cast<C>(total)));
  }
}

} // namespace

Status crossEntropy(const TensorRef &logits, const TensorRef &labels,
                    int64_t ignoreIndex, Reduction reduction,
                    const TensorRef &out, const TensorRef *weights,
                    int64_t requested) {
  const char *name = "cross_entropy";
  int64_t classes, stride, rows = labels.numel();
  SMP_RETURN_IF_ERROR(
      common::checkCrossEntropy(logits, labels, reduction != Reduction::None,
                                out, weights, requested, classes, stride));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  Labels l{asIndexIn(labels), ignoreIndex};
  In w = asIn(weights); // w.p null: no weights
  return visitFloat(logits.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    if (reduction == Reduction::None) {
      if (rows == 0)
        return Status::success();
      crossEntropyRows<S>
          <<<blocksFor(rows), lossThreads(classes), 0, ctx->stream>>>(
              logits.as<S>(), l, w, rows, classes, stride, asOut(out), nullptr,
              nullptr, ctx->dError);
      return launchStatus(name);
    }
    Scratch loss, weight;
    SMP_RETURN_IF_ERROR(
        loss.allocate(name, rows * sizeof(double), ctx->stream));
    SMP_RETURN_IF_ERROR(
        weight.allocate(name, rows * sizeof(double), ctx->stream));
    if (rows > 0) {
      crossEntropyRows<S>
          <<<blocksFor(rows), lossThreads(classes), 0, ctx->stream>>>(
              logits.as<S>(), l, w, rows, classes, stride,
              Out{nullptr, out.dtype}, loss.as<double>(), weight.as<double>(),
              ctx->dError);
      SMP_RETURN_IF_ERROR(launchStatus(name));
    }
    crossEntropyTotal<typename FT<S>::C><<<1, 1024, 0, ctx->stream>>>(
        loss.as<double>(), weight.as<double>(), rows,
        reduction == Reduction::Mean, asOut(out));
    return launchStatus(name);
  });
}

//===----------------------------------------------------------------------===//
// Gradient
//===----------------------------------------------------------------------===//

namespace {

/// *counted = the sum of the weights (1 without weights) of the rows whose
/// label is valid and not ignored.
__global__ void __launch_bounds__(1024)
    countLabels(Labels l, In w, int64_t rows, int64_t classes,
                double *counted) {
  double c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    if (l.huge(r))
      continue;
    int64_t v = l.load(r);
    if (v == l.ignore || v < 0 || v >= classes)
      continue;
    c += w.p ? w.load(v) : 1.0;
  }
  c = blockSum(c);
  if (threadIdx.x == 0)
    *counted = c;
}

template <class S>
__global__ void __launch_bounds__(kWideLossThreads)
    crossEntropyGradRows(const S *x, Labels l, In w, In g, bool none, bool mean,
                         const double *counted, int64_t rows, int64_t classes,
                         int64_t stride, Out dx, DeviceError *err) {
  using C = typename FT<S>::C;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    bool ignored, bad;
    int64_t lab = rowLabel(l, r, classes, err, kErrLabelGrad, ignored, bad);
    int64_t base = r * stride;
    for (int64_t c = classes + threadIdx.x; c < stride; c += blockDim.x)
      dx.store(base + c, 0.0);
    if (ignored || bad) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        dx.store(base + c, 0.0);
      continue;
    }
    double scale = g.load(none ? r : 0);
    if (mean)
      scale /= *counted;
    if (w.p)
      scale *= w.load(lab);
    const S *xr = x + base;
    C m;
    double sum;
    rowStats(xr, classes, m, sum);
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      double p = static_cast<double>(dExp(FT<S>::load(xr[c]) - m)) / sum;
      dx.store(base + c, scale * (p - (c == lab ? 1.0 : 0.0)));
    }
  }
}

/// One vector of a row's gradient: k exp(x - m), less `scale` at the
/// label's column, in RowAcc<S>; 0 for a row that is not live (ignored or
/// a bad label) and in the padding past `classes`. Vector v of the row.
template <class S>
__device__ inline Pack<S> gradVector(const Pack<S> &p, int64_t v, bool live,
                                     int64_t classes, int64_t lab, RowAcc<S> k,
                                     RowAcc<S> scale, typename FT<S>::C m) {
  using C = typename FT<S>::C;
  using Acc = RowAcc<S>;
  Pack<S> o;
#pragma unroll
  for (int e = 0; e < Pack<S>::N; ++e) {
    int64_t c = v * Pack<S>::N + e;
    Acc d = 0;
    if (live && c < classes)
      d = k * static_cast<Acc>(dExp(FT<S>::load(p.v[e]) - m)) -
          (c == lab ? scale : Acc(0));
    o.v[e] = FT<S>::store(static_cast<C>(d));
  }
  return o;
}

/// A row's gradient over its nv vectors (gradVector), read from xv and
/// written to dv (which may be xv: each vector is read before it is
/// written, by the thread that writes it), two vectors a thread in flight.
template <class S>
__device__ void writeRowGrad(const Pack<S> *xv, Pack<S> *dv, int64_t nv,
                             bool live, int64_t classes, int64_t lab, double k,
                             double scale, typename FT<S>::C m) {
  using Acc = RowAcc<S>;
  Acc ka = static_cast<Acc>(k), sa = static_cast<Acc>(scale);
  int64_t v = threadIdx.x, step = blockDim.x;
  for (; v + step < nv; v += 2 * step) {
    Pack<S> p0 = xv[v], p1 = xv[v + step];
    dv[v] = gradVector<S>(p0, v, live, classes, lab, ka, sa, m);
    dv[v + step] = gradVector<S>(p1, v + step, live, classes, lab, ka, sa, m);
  }
  if (v < nv)
    dv[v] = gradVector<S>(xv[v], v, live, classes, lab, ka, sa, m);
}

/// The scale of row r's gradient: the incoming gradient (per row for
/// None), over the count for Mean, times the label's weight.
__device__ inline double rowScale(In g, bool none, bool mean,
                                  const double *counted, In w, int64_t r,
                                  int64_t lab) {
  double scale = g.load(none ? r : 0);
  if (mean)
    scale /= *counted;
  if (w.p)
    scale *= w.load(lab);
  return scale;
}

/// The gradient of each row (crossEntropyGradRows' for dx of the logits'
/// dtype S, rows of whole aligned 16-byte vectors: stride a multiple of
/// Pack<S>::N; 16-byte loads and stores, scale / sum taken once a row)
/// and, with kLoss, crossEntropyRows' loss from the same statistics
/// (cross_entropy_with_grad: the same arithmetic as the two ops'). dx may
/// be x's storage: the label's logit is read before the block's first
/// barrier, every other value before its thread writes it.
template <class S, bool kLoss>
__global__ void __launch_bounds__(kWideLossThreads)
    crossEntropyGradRowsVec(const S *x, Labels l, In w, In g, bool none,
                            bool mean, const double *counted, int64_t rows,
                            int64_t classes, int64_t stride, S *dx, Out outNone,
                            double *rowLoss, double *rowWeight,
                            DeviceError *err) {
  using C = typename FT<S>::C;
  using P = Pack<S>;
  int64_t nv = stride / P::N;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    bool ignored, bad;
    int64_t lab = rowLabel(l, r, classes, err,
                           kLoss ? kErrLabel : kErrLabelGrad, ignored, bad);
    const S *xr = x + r * stride;
    bool live = !ignored && !bad;
    double loss = bad ? nan("") : 0.0, weight = 0, scale = 0, k = 0;
    C m = C(0);
    if (live) {
      double target = kLoss ? static_cast<double>(FT<S>::load(xr[lab])) : 0;
      double sum;
      rowStats(xr, classes, m, sum);
      loss = log(sum) + static_cast<double>(m) - target;
      weight = w.p ? w.load(lab) : 1.0;
      if (w.p)
        loss *= weight;
      scale = rowScale(g, none, mean, counted, w, r, lab);
      k = scale / sum;
    }
    if (kLoss && threadIdx.x == 0) {
      if (outNone.p) // the logits' type, or f32 for f16/bf16 logits
        outNone.store(r, static_cast<double>(static_cast<C>(loss)));
      else {
        rowLoss[r] = loss;
        rowWeight[r] = weight;
      }
    }
    writeRowGrad<S>(reinterpret_cast<const P *>(xr),
                    reinterpret_cast<P *>(dx + r * stride), nv, live, classes,
                    lab, k, scale, m);
  }
}

/// Whether crossEntropyGradRowsVec takes these rows: the gradient in the
/// logits' dtype, rows of whole aligned 16-byte vectors.
bool vectorRows(const TensorRef &logits, const TensorRef &dlogits,
                int64_t stride) {
  size_t bytes = smp::base::dtypeSize(logits.dtype);
  return dlogits.dtype == logits.dtype && bytes != 0 &&
         stride % static_cast<int64_t>(16 / bytes) == 0 &&
         aligned16({logits.data, dlogits.data});
}

} // namespace

Status crossEntropyGrad(const TensorRef &logits, const TensorRef &labels,
                        const TensorRef *weights, const TensorRef &dloss,
                        int64_t ignoreIndex, Reduction reduction,
                        const TensorRef &dlogits, int64_t requested) {
  const char *op = "cross_entropy_grad";
  int64_t classes, stride, rows;
  SMP_RETURN_IF_ERROR(common::checkCrossEntropyGrad(
      logits, labels, weights, dloss, reduction != Reduction::None, dlogits,
      requested, classes, stride, rows));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  if (dlogits.numel() == 0)
    return Status::success();
  Labels l{asIndexIn(labels), ignoreIndex};
  In w = asIn(weights); // w.p null: no weights
  Scratch counted;
  SMP_RETURN_IF_ERROR(counted.allocate(op, sizeof(double), ctx->stream));
  countLabels<<<1, 1024, 0, ctx->stream>>>(l, w, rows, classes,
                                           counted.as<double>());
  SMP_RETURN_IF_ERROR(launchStatus(op));
  return visitFloat(logits.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    if (vectorRows(logits, dlogits, stride)) {
      crossEntropyGradRowsVec<S, false>
          <<<blocksFor(rows), lossThreads(classes), 0, ctx->stream>>>(
              logits.as<S>(), l, w, asIn(dloss), reduction == Reduction::None,
              reduction == Reduction::Mean, counted.as<double>(), rows, classes,
              stride, dlogits.as<S>(), Out{nullptr, DType::F32}, nullptr,
              nullptr, ctx->dError);
      return launchStatus(op);
    }
    crossEntropyGradRows<S>
        <<<blocksFor(rows), lossThreads(classes), 0, ctx->stream>>>(
            logits.as<S>(), l, w, asIn(dloss), reduction == Reduction::None,
            reduction == Reduction::Mean, counted.as<double>(), rows, classes,
            stride, asOut(dlogits), ctx->dError);
    return launchStatus(op);
  });
}

Status crossEntropyWithGrad(const TensorRef &logits, const TensorRef &labels,
                            const TensorRef *weights, const TensorRef &dloss,
                            int64_t ignoreIndex, Reduction reduction,
                            const TensorRef &loss, const TensorRef &dlogits,
                            int64_t requested) {
  const char *op = "cross_entropy_with_grad";
  int64_t classes, stride, rows;
  bool reduced = reduction != Reduction::None;
  SMP_RETURN_IF_ERROR(common::checkCrossEntropy(
      logits, labels, reduced, loss, weights, requested, classes, stride));
  SMP_RETURN_IF_ERROR(
      common::checkCrossEntropyGrad(logits, labels, weights, dloss, reduced,
                                    dlogits, requested, classes, stride, rows));
  if (rows == 0 || !smp::base::isFloat(logits.dtype) ||
      !vectorRows(logits, dlogits, stride)) {
    // The two kernels, the loss first: dlogits may be the logits' storage.
    SMP_RETURN_IF_ERROR(crossEntropy(logits, labels, ignoreIndex, reduction,
                                     loss, weights, requested));
    return crossEntropyGrad(logits, labels, weights, dloss, ignoreIndex,
                            reduction, dlogits, requested);
  }
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  Labels l{asIndexIn(labels), ignoreIndex};
  In w = asIn(weights); // w.p null: no weights
  Scratch counted, rowLoss, rowWeight;
  SMP_RETURN_IF_ERROR(counted.allocate(op, sizeof(double), ctx->stream));
  countLabels<<<1, 1024, 0, ctx->stream>>>(l, w, rows, classes,
                                           counted.as<double>());
  SMP_RETURN_IF_ERROR(launchStatus(op));
  if (reduced)
    for (Scratch *s : {&rowLoss, &rowWeight})
      SMP_RETURN_IF_ERROR(s->allocate(
          op, static_cast<size_t>(rows) * sizeof(double), ctx->stream));
  return visitFloat(logits.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    crossEntropyGradRowsVec<S, true>
        <<<blocksFor(rows), lossThreads(classes), 0, ctx->stream>>>(
            logits.as<S>(), l, w, asIn(dloss), !reduced,
            reduction == Reduction::Mean, counted.as<double>(), rows, classes,
            stride, dlogits.as<S>(),
            reduced ? Out{nullptr, loss.dtype} : asOut(loss),
            rowLoss.as<double>(), rowWeight.as<double>(), ctx->dError);
    SMP_RETURN_IF_ERROR(launchStatus(op));
    if (!reduced)
      return Status::success();
    crossEntropyTotal<typename FT<S>::C><<<1, 1024, 0, ctx->stream>>>(
        rowLoss.as<double>(), rowWeight.as<double>(), rows,
        reduction == Reduction::Mean, asOut(loss));
    return launchStatus(op);
  });
}

//===----------------------------------------------------------------------===//
// Vocabulary shards
//===----------------------------------------------------------------------===//

namespace {

/// The shard's first class (read on the device) and its valid columns.
__device__ inline void shardColumns(IndexIn offset, int64_t classes,
                                    int64_t width, int64_t &first,
                                    int64_t &valid) {
  first = offset.load(0);
  valid = classes - first;
  valid = valid < 0 ? 0 : valid > width ? width : valid;
}

/// Row r's label column in the shard, or -1 (not there, ignored or bad: a
/// bad one records the device error and sets `bad`).
__device__ inline int64_t shardLabelColumn(const Labels &l, int64_t r,
                                           int64_t classes, int64_t first,
                                           int64_t valid, DeviceError *err,
                                           bool &bad) {
  bool ignored;
  int64_t lab = rowLabel(l, r, classes, err, kErrLabelShard, ignored, bad);
  return !ignored && !bad && lab >= first && lab - first < valid ? lab - first
                                                                 : -1;
}

template <class S>
__global__ void crossEntropyShardRows(const S *x, Labels l, IndexIn offset,
                                      int64_t rows, int64_t width,
                                      int64_t classes, Out out,
                                      DeviceError *err) {
  using C = typename FT<S>::C;
  int64_t first, valid;
  shardColumns(offset, classes, width, first, valid);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    bool bad;
    int64_t col = shardLabelColumn(l, r, classes, first, valid, err, bad);
    const S *xr = x + r * width;
    C m;
    double sum;
    rowStats(xr, valid, m, sum);
    double lse = m == -std::numeric_limits<C>::infinity()
                     ? -std::numeric_limits<double>::infinity()
                     : log(sum) + static_cast<double>(m);
    double target = col < 0 ? 0.0 : static_cast<double>(FT<S>::load(xr[col]));
    if (threadIdx.x == 0) {
      out.store(2 * r, bad ? nan("") : lse);
      out.store(2 * r + 1, target);
    }
  }
}

template <class S>
__global__ void crossEntropyShardGradRows(const S *x, Labels l, IndexIn offset,
                                          In stats, In grad, int64_t rows,
                                          int64_t width, int64_t classes,
                                          Out dx, DeviceError *err) {
  using C = typename FT<S>::C;
  int64_t first, valid;
  shardColumns(offset, classes, width, first, valid);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    bool bad;
    int64_t col = shardLabelColumn(l, r, classes, first, valid, err, bad);
    double g0 = grad.load(2 * r), g1 = grad.load(2 * r + 1);
    C lse = static_cast<C>(stats.load(2 * r));
    const S *xr = x + r * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      double d = 0;
      if (c < valid) { // read before the write: dx may be x's storage
        C xc = FT<S>::load(xr[c]);
        d = g0 == 0 ? 0.0 : g0 * static_cast<double>(dExp(xc - lse));
        if (c == col)
          d += g1;
      }
      dx.store(r * width + c, d);
    }
  }
}

/// label_rank: one block per row; each thread counts its columns ranked
/// before the label, the block sums them (every thread takes part in the
/// sum, whatever the row).
template <class S>
__global__ void labelRankRows(const S *x, Labels l, IndexIn offset, In target,
                              int64_t rows, int64_t width, int64_t classes,
                              float *out, DeviceError *err) {
  int64_t first, valid;
  shardColumns(offset, classes, width, first, valid);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    bool ignored, bad;
    int64_t lab = rowLabel(l, r, classes, err, kErrLabelRank, ignored, bad);
    const S *xr = x + r * width;
    bool inShard = !ignored && !bad && lab >= first && lab - first < valid;
    if (!ignored && !bad && !target.p && !inShard && threadIdx.x == 0)
      raiseError(err, kErrLabelRankShard, lab, r, first + valid, first);
    bool counts = !ignored && !bad && (target.p || inShard);
    double t = !counts    ? 0.0
               : target.p ? target.load(r)
                          : static_cast<double>(FT<S>::load(xr[lab - first]));
    double n = 0;
    if (counts && isnan(t))
      n = threadIdx.x == 0 ? static_cast<double>(valid) : 0.0;
    else if (counts)
      for (int64_t c = threadIdx.x; c < valid; c += blockDim.x) {
        double xc = static_cast<double>(FT<S>::load(xr[c]));
        n += isnan(xc) || xc > t || (xc == t && first + c < lab) ? 1.0 : 0.0;
      }
    n = blockSum(n);
    if (threadIdx.x == 0)
      out[r] = bad ? nanf("") : static_cast<float>(n);
  }
}

} // namespace

Status crossEntropyShard(const TensorRef &logits, const TensorRef &labels,
                         const TensorRef &offset, int64_t classes,
                         int64_t ignoreIndex, const TensorRef &out) {
  const char *op = "cross_entropy_shard";
  int64_t rows, width;
  SMP_RETURN_IF_ERROR(common::checkCrossEntropyShard(
      op, logits, labels, offset, classes, out, nullptr, nullptr, rows, width));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  if (rows == 0)
    return Status::success();
  Labels l{asIndexIn(labels), ignoreIndex};
  return visitFloat(logits.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    crossEntropyShardRows<S>
        <<<blocksFor(rows), rowThreads(width), 0, ctx->stream>>>(
            logits.as<S>(), l, asIndexIn(offset), rows, width, classes,
            asOut(out), ctx->dError);
    return launchStatus(op);
  });
}

Status crossEntropyShardGrad(const TensorRef &logits, const TensorRef &labels,
                             const TensorRef &offset, const TensorRef &stats,
                             const TensorRef &grad, int64_t classes,
                             int64_t ignoreIndex, const TensorRef &dlogits) {
  const char *op = "cross_entropy_shard_grad";
  int64_t rows, width;
  SMP_RETURN_IF_ERROR(common::checkCrossEntropyShard(op, logits, labels, offset,
                                                     classes, stats, &grad,
                                                     &dlogits, rows, width));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  if (dlogits.numel() == 0)
    return Status::success();
  Labels l{asIndexIn(labels), ignoreIndex};
  return visitFloat(logits.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    crossEntropyShardGradRows<S>
        <<<blocksFor(rows), rowThreads(width), 0, ctx->stream>>>(
            logits.as<S>(), l, asIndexIn(offset), asIn(stats), asIn(grad), rows,
            width, classes, asOut(dlogits), ctx->dError);
    return launchStatus(op);
  });
}

Status labelRank(const TensorRef &logits, const TensorRef &labels,
                 const TensorRef &offset, const TensorRef *target,
                 int64_t classes, int64_t ignoreIndex, const TensorRef &out) {
  const char *op = "label_rank";
  int64_t rows, width;
  SMP_RETURN_IF_ERROR(common::checkLabelRank(op, logits, labels, offset, target,
                                             classes, out, rows, width));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  if (rows == 0)
    return Status::success();
  Labels l{asIndexIn(labels), ignoreIndex};
  return visitFloat(logits.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    labelRankRows<S><<<blocksFor(rows), rowThreads(width), 0, ctx->stream>>>(
        logits.as<S>(), l, asIndexIn(offset), asIn(target), rows, width,
        classes, out.as<float>(), ctx->dError);
    return launchStatus(op);
  });
}

} // namespace smp::kernels::cuda
