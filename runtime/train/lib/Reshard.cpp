//===- Reshard.cpp - Shards of global tensors across plans ----------------===//

#include "smprt/train/Reshard.h"
#include "smp/base/TpSlice.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace smprt {
namespace {

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Copies between a global tensor and its tensor-parallel slice (the
/// arithmetic the artifact writer cuts the weights with: smp/base/TpSlice.h).
void copyTpSlice(char *global, char *slice, const std::vector<int64_t> &shape,
                 const ShardLayout &l, size_t esize, bool toSlice) {
  smp::base::copyTpSlice(global, slice, shape,
                         {l.tpDim, l.tpBlocks, l.tpParts, l.tpIndex}, esize,
                         toSlice);
}

/// The shape of the tensor-parallel slice of `l`.
std::vector<int64_t> tpShape(const ShardLayout &l) {
  std::vector<int64_t> s = l.global;
  if (l.tpParts > 0)
    s[l.tpDim] = smp::base::tpSliceDim(
        s[l.tpDim], {l.tpDim, l.tpBlocks, l.tpParts, l.tpIndex});
  return s;
}

/// The element count of `shape`; false for a negative dim or more than
/// 2^50 elements (checked: never wraps).
bool countOf(const std::vector<int64_t> &shape, uint64_t &n) {
  constexpr uint64_t kMax = uint64_t(1) << 50;
  n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > kMax / static_cast<uint64_t>(d)))
      return false;
    n *= static_cast<uint64_t>(d);
  }
  return n <= kMax;
}

} // namespace

std::string checkShardLayout(const ShardLayout &l, uint64_t bytes,
                             size_t esize) {
  uint64_t n, global;
  if (!countOf(l.shape, n))
    return "has an impossible shape";
  if (n * esize != bytes) // n <= 2^50, esize <= 8
    return "holds " + std::to_string(bytes) + " bytes but its shape needs " +
           std::to_string(n * esize);
  if (!countOf(l.global, global))
    return "has an impossible global shape";
  bool tp = l.tpParts != 0, zero = l.zeroParts != 0;
  if (!tp && (l.tpDim || l.tpBlocks != 1 || l.tpIndex))
    return "has tensor-parallel fields without tp_parts";
  if (tp && (l.tpParts < 1 || l.tpParts > INT32_MAX || l.tpBlocks < 1 ||
             l.tpBlocks > INT32_MAX || l.tpDim < 0 ||
             l.tpDim >= static_cast<int64_t>(l.global.size()) ||
             l.tpIndex < 0 || l.tpIndex >= l.tpParts))
    return "has an impossible tensor-parallel layout (dim " +
           std::to_string(l.tpDim) + ", blocks " + std::to_string(l.tpBlocks) +
           ", slice " + std::to_string(l.tpIndex) + " of " +
           std::to_string(l.tpParts) + ")";
  // Dims <= 2^50 and blocks * parts < 2^62: tpShape cannot overflow.
  std::vector<int64_t> slice = tpShape(l);
  if (!zero) {
    if (l.zeroIndex || !l.zeroShape.empty())
      return "has ZeRO fields without zero_parts";
    if (slice != l.shape)
      return "has a shape that is not its slice of the global tensor";
    return "";
  }
  uint64_t whole;
  if (l.zeroParts < 1 || l.zeroParts > INT32_MAX || l.zeroIndex < 0 ||
      l.zeroIndex >= l.zeroParts)
    return "has an impossible ZeRO layout (chunk " +
           std::to_string(l.zeroIndex) + " of " + std::to_string(l.zeroParts) +
           ")";
  if (l.zeroShape != slice || !countOf(slice, whole) ||
      n != (whole + l.zeroParts - 1) / l.zeroParts)
    return "has a shape that is not its ZeRO chunk of the global tensor";
  return "";
}

Status gatherShards(const std::vector<ShardPiece> &pieces, size_t esize,
                    std::string &global, const std::string &what) {
  if (pieces.empty())
    return Status::failure(what + ": no shard");
  const ShardLayout &first = pieces.front().layout;
  // The shards cover the tensor (padding only adds to them): a global shape
  // larger than their bytes is refused before it is allocated.
  uint64_t covered = 0, globalCount;
  for (const ShardPiece &p : pieces)
    covered += p.bytes; // each is inside a file read into memory
  if (!countOf(first.global, globalCount) || globalCount > covered / esize)
    return Status::failure(what + ": its global shape is larger than all its "
                                  "shards together");
  global.assign(globalCount * esize, '\0');
  // Tensor-parallel slices, each assembled from its ZeRO chunks.
  std::map<int64_t, std::string> slices;
  std::map<int64_t, std::vector<bool>> chunksSeen;
  std::map<int64_t, int64_t> zeroPartsOf; // of each slice's chunks
  int64_t tpParts = std::max<int64_t>(1, first.tpParts);
  for (const ShardPiece &p : pieces) {
    const ShardLayout &l = p.layout;
    auto zp = zeroPartsOf.emplace(l.tpIndex, l.zeroParts);
    if (l.global != first.global ||
        std::max<int64_t>(1, l.tpParts) != tpParts ||
        (l.tpParts &&
         (l.tpDim != first.tpDim || l.tpBlocks != first.tpBlocks)) ||
        zp.first->second != l.zeroParts)
      return Status::failure(what + ": its shards disagree on its layout");
    std::vector<int64_t> sliceShape = tpShape(l);
    size_t sliceBytes = product(sliceShape) * esize;
    std::string &slice = slices[l.tpIndex];
    if (l.zeroParts > 0) {
      size_t n = product(l.zeroShape), chunk = p.bytes / esize;
      if (chunk * l.zeroParts < n || p.bytes != chunk * esize)
        return Status::failure(what + ": a ZeRO chunk has the wrong size");
      if (slice.size() < chunk * l.zeroParts * esize)
        slice.resize(chunk * l.zeroParts * esize, '\0');
      std::memcpy(&slice[l.zeroIndex * chunk * esize], p.data, p.bytes);
      auto &seen = chunksSeen[l.tpIndex];
      seen.resize(l.zeroParts, false);
      seen[l.zeroIndex] = true;
    } else {
      if (p.bytes != sliceBytes)
        return Status::failure(what + ": a shard has the wrong size");
      slice.assign(p.data, p.bytes);
      chunksSeen[l.tpIndex] = {true};
    }
  }
  if (static_cast<int64_t>(slices.size()) != tpParts)
    return Status::failure(what + ": the checkpoint holds " +
                           std::to_string(slices.size()) + " of its " +
                           std::to_string(tpParts) + " tensor-parallel slices");
  for (auto &[index, seen] : chunksSeen)
    for (bool b : seen)
      if (!b)
        return Status::failure(what + ": the checkpoint misses ZeRO chunks");
  ShardLayout l = first;
  for (auto &[index, slice] : slices) {
    l.tpIndex = index;
    if (first.tpParts > 0)
      copyTpSlice(&global[0], &slice[0], first.global, l, esize, false);
    else
      std::memcpy(&global[0], slice.data(), global.size());
  }
  return Status::success();
}

std::string sliceShard(const std::string &global, const ShardLayout &l,
                       size_t esize) {
  std::string slice;
  if (l.tpParts > 0) {
    slice.resize(product(tpShape(l)) * esize);
    copyTpSlice(const_cast<char *>(global.data()), &slice[0], l.global, l,
                esize, true);
  } else {
    slice = global;
  }
  if (l.zeroParts <= 0)
    return slice;
  size_t chunk = product(l.shape) * esize;
  slice.resize(std::max(slice.size(), chunk * l.zeroParts), '\0');
  return slice.substr(l.zeroIndex * chunk, chunk);
}

} // namespace smprt
