//===- Layout.cpp - How a rank's tensor is part of a global tensor --------===//

#include "smp/base/Layout.h"

#include "smp/base/Shape.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace smp::base {

Layout Layout::wholeOf(const std::vector<int64_t> &shape) {
  Layout l;
  l.fullShape = shape;
  return l;
}

Layout Layout::tpSliceOf(const std::vector<int64_t> &full, int64_t dim,
                         int64_t blocks, int64_t parts, int64_t index) {
  Layout l;
  l.fullShape = full;
  l.tpDim = dim;
  l.tpBlocks = blocks;
  l.tpParts = parts;
  l.tpIndex = index;
  return l;
}

bool Layout::operator==(const Layout &o) const {
  return fullShape == o.fullShape && tpDim == o.tpDim &&
         tpBlocks == o.tpBlocks && tpParts == o.tpParts &&
         tpIndex == o.tpIndex && zeroShape == o.zeroShape &&
         zeroParts == o.zeroParts && zeroIndex == o.zeroIndex;
}

uint64_t elementCount(const std::vector<int64_t> &shape) {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

std::vector<int64_t> tpSliceShape(const Layout &l) {
  std::vector<int64_t> s = l.fullShape;
  if (l.tpSplit()) {
    int64_t per = l.tpBlocks * l.tpParts; // both below 2^31: no overflow
    s[l.tpDim] = (s[l.tpDim] + per - 1) / per * l.tpBlocks;
  }
  return s;
}

std::vector<int64_t> localShape(const Layout &l) {
  std::vector<int64_t> slice = tpSliceShape(l);
  if (!l.zeroChunk())
    return slice;
  uint64_t n = elementCount(slice), parts = l.zeroParts;
  return {static_cast<int64_t>((n + parts - 1) / parts)};
}

std::string checkLayout(const Layout &l, const std::vector<int64_t> &shape) {
  uint64_t n;
  if (!checkedElementCount(shape, kMaxLayoutElements, n))
    return "has an impossible shape";
  if (!checkedElementCount(l.fullShape, kMaxLayoutElements, n))
    return "has an impossible global shape";
  bool tp = l.tpParts != 0, zero = l.zeroParts != 0;
  if (!tp && (l.tpDim || l.tpBlocks || l.tpIndex))
    return "has tensor-parallel fields without tp_parts";
  if (tp && (l.tpParts < 1 || l.tpParts > INT32_MAX || l.tpBlocks < 1 ||
             l.tpBlocks > INT32_MAX || l.tpDim < 0 ||
             l.tpDim >= static_cast<int64_t>(l.fullShape.size()) ||
             l.tpIndex < 0 || l.tpIndex >= l.tpParts))
    return "has an impossible tensor-parallel layout (dim " +
           std::to_string(l.tpDim) + ", blocks " + std::to_string(l.tpBlocks) +
           ", slice " + std::to_string(l.tpIndex) + " of " +
           std::to_string(l.tpParts) + ")";
  if (!zero && (l.zeroIndex || !l.zeroShape.empty()))
    return "has ZeRO fields without zero_parts";
  if (zero && (l.zeroParts < 1 || l.zeroParts > INT32_MAX || l.zeroIndex < 0 ||
               l.zeroIndex >= l.zeroParts))
    return "has an impossible ZeRO layout (chunk " +
           std::to_string(l.zeroIndex) + " of " + std::to_string(l.zeroParts) +
           ")";
  // Dims <= 2^50 and blocks * parts < 2^62: the slice's dims cannot
  // overflow, but padding may take its count past the cap.
  std::vector<int64_t> slice = tpSliceShape(l);
  if (!checkedElementCount(slice, kMaxLayoutElements, n))
    return "has an impossible global shape";
  if (zero && (l.zeroShape != slice || localShape(l) != shape))
    return "has a shape that is not its ZeRO chunk of the global tensor";
  if (localShape(l) != shape)
    return tp ? "has a shape that is not its slice of the global tensor"
              : "is a whole tensor but its global shape differs from its "
                "shape";
  return "";
}

namespace {

/// Copies bytes [lo, hi) of the tensor-parallel slice of `l` (the whole
/// tensor when not split; bytes past the slice's end are a ZeRO chunk's
/// padding) between the global tensor and `part`, which holds slice byte lo
/// at its start. toPart: global -> part, zero-filling the padding (rows
/// past the end of the split dim too); otherwise part -> global, dropping
/// it.
void copySliceRange(char *global, char *part, const Layout &l, size_t esize,
                    uint64_t lo, uint64_t hi, bool toPart) {
  auto copy = [&](uint64_t at, char *g, uint64_t bytes) {
    if (toPart)
      std::memcpy(part + (at - lo), g, bytes);
    else
      std::memcpy(g, part + (at - lo), bytes);
  };
  auto zero = [&](uint64_t from, uint64_t to) {
    if (toPart && to > from)
      std::memset(part + (from - lo), 0, to - from);
  };
  const std::vector<int64_t> &shape = l.fullShape;
  if (!l.tpSplit()) {
    uint64_t end = std::min<uint64_t>(hi, elementCount(shape) * esize);
    if (end > lo)
      copy(lo, global + lo, end - lo);
    zero(std::max(lo, end), hi);
    return;
  }
  uint64_t outer = 1, inner = esize;
  for (int64_t d = 0; d < l.tpDim; ++d)
    outer *= shape[d];
  for (size_t d = l.tpDim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  uint64_t size = shape[l.tpDim], blocks = l.tpBlocks;
  uint64_t n = (size + blocks * l.tpParts - 1) / (blocks * l.tpParts);
  uint64_t run = n * inner, runs = outer * blocks, block = size / blocks;
  // Run k of the slice is block j = k % blocks of outer index k / blocks:
  // n rows from row j * block + tpIndex * n, those past the block's end
  // padding.
  for (uint64_t k = run ? lo / run : runs; k < runs && k * run < hi; ++k) {
    uint64_t j = k % blocks, first = j * block + l.tpIndex * n;
    uint64_t end = std::min(first + n, (j + 1) * block);
    uint64_t valid = end > first ? (end - first) * inner : 0;
    uint64_t a = std::max(lo, k * run), b = std::min(hi, k * run + run);
    uint64_t validEnd = std::min(b, k * run + valid);
    if (validEnd > a)
      copy(a, global + ((k / blocks) * size + first) * inner + (a - k * run),
           validEnd - a);
    zero(std::max(a, validEnd), b);
  }
  zero(std::max(lo, runs * run), hi);
}

/// The slice bytes [lo, hi) the shard `l` holds.
void shardRange(const Layout &l, size_t esize, uint64_t &lo, uint64_t &hi) {
  uint64_t bytes = elementCount(localShape(l)) * esize;
  lo = l.zeroChunk() ? static_cast<uint64_t>(l.zeroIndex) * bytes : 0;
  hi = lo + bytes;
}

} // namespace

void cutShard(const char *global, const Layout &l, size_t esize, char *shard) {
  uint64_t lo, hi;
  shardRange(l, esize, lo, hi);
  copySliceRange(const_cast<char *>(global), shard, l, esize, lo, hi,
                 /*toPart=*/true);
}

std::string cutShard(const std::string &global, const Layout &l, size_t esize) {
  std::string shard(elementCount(localShape(l)) * esize, '\0');
  cutShard(global.data(), l, esize, shard.data());
  return shard;
}

void pasteShard(const char *shard, const Layout &l, size_t esize,
                char *global) {
  uint64_t lo, hi;
  shardRange(l, esize, lo, hi);
  copySliceRange(global, const_cast<char *>(shard), l, esize, lo, hi,
                 /*toPart=*/false);
}

} // namespace smp::base
