//===- EvalMetrics.cpp - The classification metrics of an evaluation ------===//
//
// scikit-learn's formulas (precision_recall_fscore_support,
// matthews_corrcoef) over a confusion matrix: per class c, tp = C[c][c],
// predicted = column c's sum, true = row c's sum; precision tp / predicted,
// recall tp / true, f1 2 tp / (true + predicted), 0 where the denominator
// is 0 (zero_division's default). The averages run over the classes that
// occur among the labels or the predictions (unique_labels).
//
//===----------------------------------------------------------------------===//

#include "smp/base/EvalMetrics.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

namespace smp::base {

std::string evalMetricList() {
  std::string s;
  for (const char *name : kEvalMetrics)
    s += std::string(name) + ", ";
  return s + "or topK_accuracy (K from 2 to 1000: top5_accuracy)";
}

int64_t topKAccuracy(std::string_view name) {
  constexpr std::string_view head = "top", tail = "_accuracy";
  if (name.size() <= head.size() + tail.size() ||
      name.substr(0, head.size()) != head ||
      name.substr(name.size() - tail.size()) != tail)
    return 0;
  std::string_view digits =
      name.substr(head.size(), name.size() - head.size() - tail.size());
  if (digits.size() > 4 || digits[0] == '0')
    return 0;
  int64_t k = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return 0;
    k = k * 10 + (c - '0');
  }
  return k >= 2 && k <= 1000 ? k : 0;
}

bool isEvalMetric(std::string_view name) {
  return topKAccuracy(name) > 0 ||
         std::find(std::begin(kEvalMetrics), std::end(kEvalMetrics), name) !=
             std::end(kEvalMetrics);
}

bool isEvalCountOutput(std::string_view name) {
  constexpr std::string_view top = "eval_hits_top";
  return name == kEvalHitsOutput || name == kEvalLabelsOutput ||
         name == kEvalConfusionOutput ||
         (name.substr(0, top.size()) == top &&
          topKAccuracy("top" + std::string(name.substr(top.size())) +
                       "_accuracy") > 0);
}

namespace {

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

struct ClassCounts {
  std::vector<double> tp, predicted, truth;
};

ClassCounts classCounts(const double *counts, int64_t classes) {
  ClassCounts c;
  c.tp.assign(classes, 0), c.predicted.assign(classes, 0),
      c.truth.assign(classes, 0);
  for (int64_t i = 0; i < classes; ++i)
    for (int64_t j = 0; j < classes; ++j) {
      double n = counts[i * classes + j];
      c.truth[i] += n, c.predicted[j] += n;
      if (i == j)
        c.tp[i] += n;
    }
  return c;
}

/// Class c's precision, recall or f1 from (tp, predicted, true).
double score(char kind, double tp, double predicted, double truth) {
  return kind == 'p'   ? ratio(tp, predicted)
         : kind == 'r' ? ratio(tp, truth)
                       : ratio(2 * tp, truth + predicted);
}

double matthews(const ClassCounts &c) {
  double samples = 0, correct = 0, tp = 0, pp = 0, tt = 0;
  for (size_t k = 0; k < c.tp.size(); ++k) {
    samples += c.truth[k], correct += c.tp[k];
    tp += c.truth[k] * c.predicted[k];
    pp += c.predicted[k] * c.predicted[k], tt += c.truth[k] * c.truth[k];
  }
  double cov = correct * samples - tp, vp = samples * samples - pp,
         vt = samples * samples - tt;
  return vp * vt == 0 ? 0.0 : cov / std::sqrt(vt * vp);
}

} // namespace

double evalMetric(std::string_view name, const double *counts,
                  int64_t classes) {
  ClassCounts c = classCounts(counts, classes);
  double total = 0;
  for (double t : c.truth)
    total += t;
  if (total == 0)
    return NAN; // no label counted
  if (name == "matthews_correlation")
    return matthews(c);
  char kind = name[0]; // 'f', 'p' or 'r'
  if (isBinaryMetric(name))
    return classes == 2 ? score(kind, c.tp[1], c.predicted[1], c.truth[1])
                        : NAN;
  std::string_view average = name.substr(name.find('_') + 1);
  if (average == "micro") {
    double tp = 0, predicted = 0;
    for (int64_t k = 0; k < classes; ++k)
      tp += c.tp[k], predicted += c.predicted[k];
    return score(kind, tp, predicted, total);
  }
  double sum = 0, weights = 0;
  for (int64_t k = 0; k < classes; ++k) {
    if (c.truth[k] == 0 && c.predicted[k] == 0)
      continue; // a class neither among the labels nor the predictions
    double w = average == "weighted" ? c.truth[k] : 1.0;
    sum += w * score(kind, c.tp[k], c.predicted[k], c.truth[k]);
    weights += w;
  }
  return ratio(sum, weights);
}

namespace {

double pearson(const double *x, const double *y, int64_t n) {
  if (n < 2)
    return NAN;
  double mx = 0, my = 0;
  for (int64_t i = 0; i < n; ++i)
    mx += x[i], my += y[i];
  mx /= static_cast<double>(n), my /= static_cast<double>(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (int64_t i = 0; i < n; ++i) {
    double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy, sxx += dx * dx, syy += dy * dy;
  }
  return sxx == 0 || syy == 0 ? NAN : sxy / std::sqrt(sxx * syy);
}

/// 1-based ranks, ties at their average (scipy.stats.rankdata).
std::vector<double> ranks(const double *x, int64_t n) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return x[a] < x[b]; });
  std::vector<double> r(n);
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j + 1 < n && x[order[j + 1]] == x[order[i]])
      ++j;
    double average = 0.5 * static_cast<double>(i + j) + 1.0;
    for (int64_t k = i; k <= j; ++k)
      r[order[k]] = average;
    i = j + 1;
  }
  return r;
}

bool anyNan(const double *x, int64_t n) {
  return std::any_of(x, x + n, [](double v) { return std::isnan(v); });
}

} // namespace

double predictionMetric(std::string_view name, const double *predicted,
                        const double *target, int64_t n) {
  if (anyNan(predicted, n) || anyNan(target, n))
    return NAN; // as scipy's, whose ranks of a NaN are NaN
  if (name == "pearson")
    return pearson(predicted, target, n);
  std::vector<double> rp = ranks(predicted, n), rt = ranks(target, n);
  return pearson(rp.data(), rt.data(), n);
}

} // namespace smp::base
