//===- SinusoidTables.cpp - Sinusoidal position tables --------------------===//
//
// A sinusoidal position table (Vaswani et al.): row p holds sin(p w_i) and
// cos(p w_i) for one frequency w_i per column pair, in halves (sin in the
// first D/2 columns, cos in the last: Marian, Pegasus, Whisper) or
// interleaved (sin in even columns, cos in odd: XLM). Hugging Face keeps such
// tables as parameters with requires_grad=False, which an ONNX file cannot
// say: trained, they move (AdamW's normalised steps move them most). The
// frequencies are read from row 1, so any spacing is recognised (Marian's
// 10000^(-2i/D), Whisper's log-spaced ones); a table of random or learnt
// values cannot match hundreds of values.
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include <cmath>
#include <cstring>

namespace smp::onnx_frontend {

bool holdsSinusoidTable(llvm::ArrayRef<int64_t> dims, llvm::StringRef bytes,
                        int64_t es) {
  // [..., P, D]: the leading dims flattened into rows (a fold of the
  // table's rows gathered at positions 0..P-1 may keep a batch dim of 1).
  if (dims.size() < 2 || (es != 4 && es != 8))
    return false;
  int64_t rows = 1;
  for (int64_t d : dims.drop_back())
    rows *= d;
  const int64_t cols = dims.back(), half = cols / 2;
  if (rows < 4 || cols < 4 || cols % 2 != 0 ||
      static_cast<int64_t>(bytes.size()) != rows * cols * es)
    return false;
  auto at = [&](int64_t p, int64_t c) -> double {
    const char *src = bytes.data() + (p * cols + c) * es;
    if (es == 4) {
      float v;
      std::memcpy(&v, src, 4);
      return v;
    }
    double v;
    std::memcpy(&v, src, 8);
    return v;
  };
  for (bool interleaved : {false, true}) {
    auto sinCol = [&](int64_t i) { return interleaved ? 2 * i : i; };
    auto cosCol = [&](int64_t i) { return interleaved ? 2 * i + 1 : half + i; };
    bool match = true;
    for (int64_t i = 0; match && i < half; ++i) {
      // Row 0: sin 0 and cos 0; row 1 gives the frequency.
      if (std::fabs(at(0, sinCol(i))) > 1e-6 ||
          std::fabs(at(0, cosCol(i)) - 1) > 1e-6) {
        match = false;
        break;
      }
      double w = std::atan2(at(1, sinCol(i)), at(1, cosCol(i)));
      // Tables computed in f32 (Whisper's) round p w: 1e-3 holds for
      // thousands of positions.
      for (int64_t p = 1; match && p < rows; ++p)
        match = std::fabs(at(p, sinCol(i)) - std::sin(p * w)) <= 1e-3 &&
                std::fabs(at(p, cosCol(i)) - std::cos(p * w)) <= 1e-3;
    }
    if (match)
      return true;
  }
  return false;
}

} // namespace smp::onnx_frontend
