//===- Shape.cpp - Strides ------------------------------------------------===//

#include "smp/base/Shape.h"

namespace smp::base {

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

} // namespace smp::base
