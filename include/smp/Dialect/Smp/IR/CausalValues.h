//===- CausalValues.h - The two values of a causal mask ---------*- C++ -*-===//
//
// A mask over [..., S, S] is causal when every trailing [S, S] slice holds
// one value where key j <= query i and another where j > i. The importer
// checks an initializer's bytes this way (smp.causal_values) and
// smp-raise-attention a constant's elements: one classification for both.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_CAUSALVALUES_H
#define SMP_DIALECT_SMP_IR_CAUSALVALUES_H

#include <cmath>
#include <cstdint>
#include <optional>

namespace smp {

/// The two values of a causal mask: `below` where key j <= query i, `above`
/// where j > i (booleans as 0 and 1; a value <= -1e30 as -inf: added to a
/// score, either leaves exp() exactly 0).
struct CausalValues {
  double below, above;
};

/// A value of a causal mask as it is compared: -inf for <= -1e30.
inline double normalizeCausalValue(double x) {
  return x <= -1e30 ? -INFINITY : x;
}

/// The causal values of `n` elements in row-major order whose last two
/// dims are [s, s], element k read by `at(k)`; nullopt when a slice breaks
/// the pattern (NaN included) or both values are equal.
template <class At>
std::optional<CausalValues> classifyCausal(int64_t n, int64_t s, At &&at) {
  if (s < 2)
    return std::nullopt;
  std::optional<double> below, above;
  for (int64_t k = 0; k < n; ++k) {
    double x = normalizeCausalValue(at(k));
    int64_t i = (k / s) % s, j = k % s;
    std::optional<double> &slot = j <= i ? below : above;
    if (!slot)
      slot = x;
    if (!(*slot == x))
      return std::nullopt;
  }
  if (!below || !above || *below == *above)
    return std::nullopt;
  return CausalValues{*below, *above};
}

} // namespace smp

#endif // SMP_DIALECT_SMP_IR_CAUSALVALUES_H
