//===- smp-npy-diff.cpp - Compare two .npy files numerically --------------===//
//
// smp-npy-diff ACTUAL.npy EXPECTED.npy [--rtol R] [--atol A]
//
// Passes when every element satisfies |a - e| <= atol + rtol * |e| (as
// numpy.allclose), the shapes are equal, and NaNs sit in the same places.
// Prints the maximum absolute and relative (max|a-e| / max|e|) errors.
//
//===----------------------------------------------------------------------===//

#include "smp/base/Npy.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace smp::base;

static double valueAt(NpyArray &a, int64_t k) {
  return elementAsDouble(a.ref(), k);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: smp-npy-diff ACTUAL.npy EXPECTED.npy "
                         "[--rtol R] [--atol A]\n");
    return 2;
  }
  double rtol = 1e-4, atol = 1e-5;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rtol"))
      rtol = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--atol"))
      atol = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "smp-npy-diff: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  NpyArray actual, expected;
  Status s = readNpy(argv[1], actual);
  if (s.ok())
    s = readNpy(argv[2], expected);
  if (!s.ok()) {
    std::fprintf(stderr, "smp-npy-diff: %s\n", s.error.c_str());
    return 2;
  }
  if (actual.shape != expected.shape) {
    std::fprintf(stderr, "smp-npy-diff: shape %s differs from %s\n",
                 describe(actual.ref()).c_str(),
                 describe(expected.ref()).c_str());
    return 1;
  }
  int64_t n = 1, bad = 0, firstBad = -1;
  for (int64_t d : actual.shape)
    n *= d;
  double maxAbs = 0, maxRef = 0;
  for (int64_t k = 0; k < n; ++k) {
    double a = valueAt(actual, k), e = valueAt(expected, k);
    if (std::isnan(a) || std::isnan(e)) {
      if (std::isnan(a) != std::isnan(e) && !bad++)
        firstBad = k;
      continue;
    }
    if (std::isinf(e) && a == e)
      continue;
    double diff = std::fabs(a - e);
    maxAbs = std::max(maxAbs, diff);
    maxRef = std::max(maxRef, std::fabs(e));
    if (!(diff <= atol + rtol * std::fabs(e)) && !bad++)
      firstBad = k;
  }
  double rel = maxRef > 0 ? maxAbs / maxRef : maxAbs;
  std::printf("%lld elements: max abs error %.3g, max rel error %.3g "
              "(rtol %g, atol %g): %s\n",
              static_cast<long long>(n), maxAbs, rel, rtol, atol,
              bad ? "MISMATCH" : "ok");
  if (bad)
    std::printf("%lld elements differ; first at flat index %lld: %.9g vs "
                "%.9g\n",
                static_cast<long long>(bad), static_cast<long long>(firstBad),
                valueAt(actual, firstBad), valueAt(expected, firstBad));
  return bad ? 1 : 0;
}
