//===- TpSlice.cpp - A tensor-parallel slice of a tensor ------------------===//

#include "smp/base/TpSlice.h"

#include <algorithm>
#include <cstring>

namespace smp::base {

int64_t tpSliceDim(int64_t size, const TpSliceSpec &spec) {
  int64_t per = spec.blocks * spec.parts;
  return (size + per - 1) / per * spec.blocks;
}

void copyTpSlice(char *global, char *slice, const std::vector<int64_t> &shape,
                 const TpSliceSpec &spec, size_t elementBytes, bool toSlice) {
  uint64_t outer = 1, inner = elementBytes;
  for (int64_t d = 0; d < spec.dim; ++d)
    outer *= shape[d];
  for (size_t d = spec.dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  uint64_t size = shape[spec.dim];
  uint64_t n = (size + spec.blocks * spec.parts - 1) / (spec.blocks * spec.parts);
  uint64_t k = 0;
  for (uint64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < spec.blocks; ++j, ++k) {
      uint64_t first = j * (size / spec.blocks) + spec.index * n;
      uint64_t end =
          std::min<uint64_t>(first + n, (j + 1) * (size / spec.blocks));
      uint64_t valid = end > first ? (end - first) * inner : 0;
      char *g = global + (o * size + first) * inner;
      char *s = slice + k * n * inner;
      if (toSlice) {
        std::memcpy(s, g, valid);
        std::memset(s + valid, 0, n * inner - valid);
      } else {
        std::memcpy(g, s, valid);
      }
    }
}

} // namespace smp::base
