//===- LossShard.cpp - Vocabulary-parallel cross-entropy statistics -------===//
//
// One rank's part of tensor parallelism's cross-entropy (smp.cross_entropy_
// shard): per row, log(sum(exp)) over the shard's valid columns and the
// label's logit when the label is in the shard; and its gradient, written
// element by element after reading the element, so dlogits may be the
// logits' storage. Row statistics in double. label_rank (an evaluation's
// accuracy): per row, the shard's classes ranked before the label.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "smp/kernels/common/OpChecks.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace smp::kernels::cpu {
using namespace detail;

namespace {

/// The labels as int64 (checked: in [0, classes) or ignoreIndex), the
/// shard's first class and its valid columns.
Status shardLabels(const char *op, const TensorRef &labels,
                   const TensorRef &offset, int64_t classes,
                   int64_t ignoreIndex, int64_t width,
                   std::vector<int64_t> &lab, int64_t &first, int64_t &valid) {
  SMP_RETURN_IF_ERROR(loadLabels(op, labels, classes, ignoreIndex, lab));
  first = loadInt(offset, 0);
  valid = std::clamp<int64_t>(classes - first, 0, width);
  if (first < 0)
    return fail(op, "offset " + std::to_string(first) + " is negative");
  return Status::success();
}

/// Row r's column of label `v`, or -1 when the label is not in the shard.
inline int64_t shardColumn(int64_t v, int64_t ignoreIndex, int64_t first,
                           int64_t valid) {
  if (v == ignoreIndex || v < first || v - first >= valid)
    return -1;
  return v - first;
}

} // namespace

Status crossEntropyShard(const TensorRef &logits, const TensorRef &labels,
                         const TensorRef &offset, int64_t classes,
                         int64_t ignoreIndex, const TensorRef &out) {
  const char *op = "cross_entropy_shard";
  int64_t rows, width, first, valid;
  SMP_RETURN_IF_ERROR(common::checkCrossEntropyShard(
      op, logits, labels, offset, classes, out, nullptr, nullptr, rows, width));
  std::vector<int64_t> lab;
  SMP_RETURN_IF_ERROR(shardLabels(op, labels, offset, classes, ignoreIndex,
                                  width, lab, first, valid));
  std::vector<double> stats(static_cast<size_t>(2 * rows));
  SMP_RETURN_IF_ERROR(visitFloat(logits.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S *x = logits.as<S>();
    parallelFor(rows, grainFor(4 * valid + 1), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const S *xr = x + r * width;
        auto at = [&](int64_t c) {
          return static_cast<double>(Float<S>::load(xr[c]));
        };
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t c = 0; c < valid; ++c)
          m = std::max(m, at(c));
        double lse = m;
        if (m != -std::numeric_limits<double>::infinity()) {
          double sum = 0;
          for (int64_t c = 0; c < valid; ++c)
            sum += std::exp(at(c) - m);
          lse = m + std::log(sum); // NaN in, NaN out
        }
        int64_t col = shardColumn(lab[r], ignoreIndex, first, valid);
        stats[2 * r] = lse;
        stats[2 * r + 1] = col < 0 ? 0.0 : at(col);
      }
    });
    return Status::success();
  }));
  return storeDouble(op, out, stats);
}

Status labelRank(const TensorRef &logits, const TensorRef &labels,
                 const TensorRef &offset, const TensorRef *target,
                 int64_t classes, int64_t ignoreIndex, const TensorRef &out) {
  const char *op = "label_rank";
  int64_t rows, width, first, valid;
  SMP_RETURN_IF_ERROR(common::checkLabelRank(op, logits, labels, offset, target,
                                             classes, out, rows, width));
  std::vector<int64_t> lab;
  SMP_RETURN_IF_ERROR(shardLabels(op, labels, offset, classes, ignoreIndex,
                                  width, lab, first, valid));
  std::vector<double> t = target ? toDouble(*target) : std::vector<double>();
  for (int64_t r = 0; r < rows && !target; ++r)
    if (lab[r] != ignoreIndex &&
        shardColumn(lab[r], ignoreIndex, first, valid) < 0)
      return fail(op, "label " + std::to_string(lab[r]) + " of row " +
                          std::to_string(r) + " is not in the shard's " +
                          std::to_string(valid) + " classes from " +
                          std::to_string(first) + ", and no target is given");
  float *o = out.as<float>();
  return visitFloat(logits.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S *x = logits.as<S>();
    parallelFor(rows, grainFor(2 * valid + 1), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const S *xr = x + r * width;
        auto at = [&](int64_t c) {
          return static_cast<double>(Float<S>::load(xr[c]));
        };
        int64_t label = lab[r], before = 0;
        if (label != ignoreIndex) {
          double tr = target ? t[r] : at(label - first);
          if (std::isnan(tr))
            before = valid;
          else
            for (int64_t c = 0; c < valid; ++c) {
              double xc = at(c);
              before +=
                  std::isnan(xc) || xc > tr || (xc == tr && first + c < label);
            }
        }
        o[r] = static_cast<float>(before);
      }
    });
    return Status::success();
  });
}

Status crossEntropyShardGrad(const TensorRef &logits, const TensorRef &labels,
                             const TensorRef &offset, const TensorRef &stats,
                             const TensorRef &grad, int64_t classes,
                             int64_t ignoreIndex, const TensorRef &dlogits) {
  const char *op = "cross_entropy_shard_grad";
  int64_t rows, width, first, valid;
  SMP_RETURN_IF_ERROR(common::checkCrossEntropyShard(op, logits, labels, offset,
                                                     classes, stats, &grad,
                                                     &dlogits, rows, width));
  std::vector<int64_t> lab;
  SMP_RETURN_IF_ERROR(shardLabels(op, labels, offset, classes, ignoreIndex,
                                  width, lab, first, valid));
  std::vector<double> st = toDouble(stats), g = toDouble(grad);
  return visitFloat(logits.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename Float<S>::C;
    const S *x = logits.as<S>();
    S *dx = dlogits.as<S>();
    parallelFor(rows, grainFor(4 * width), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        int64_t col = shardColumn(lab[r], ignoreIndex, first, valid);
        double lse = st[2 * r], g0 = g[2 * r], g1 = g[2 * r + 1];
        const S *xr = x + r * width;
        S *dr = dx + r * width;
        for (int64_t c = 0; c < width; ++c) {
          double d = 0;
          if (c < valid) {
            double xc = static_cast<double>(Float<S>::load(xr[c]));
            d = g0 == 0 ? 0.0 : g0 * std::exp(xc - lse);
            if (c == col)
              d += g1;
          }
          dr[c] = Float<S>::store(static_cast<C>(d));
        }
      }
    });
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
