//===- Reshard.cpp - Shards of global tensors across plans ----------------===//

#include "smprt/Reshard.h"

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

/// Copies between a global tensor and its tensor-parallel slice: dim viewed
/// as [blocks, parts, n], index `index` along parts. toSlice: global ->
/// slice, else slice -> global.
void copyTpSlice(char *global, char *slice, const std::vector<int64_t> &shape,
                 const ShardLayout &l, size_t esize, bool toSlice) {
  uint64_t outer = 1, inner = esize;
  for (int64_t d = 0; d < l.tpDim; ++d)
    outer *= shape[d];
  for (size_t d = l.tpDim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  uint64_t size = shape[l.tpDim];
  uint64_t n = (size + l.tpBlocks * l.tpParts - 1) / (l.tpBlocks * l.tpParts);
  uint64_t k = 0;
  for (uint64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < l.tpBlocks; ++j, ++k) {
      // Rows past the end (a padded vocabulary) are zeros in the slice.
      uint64_t first = j * (size / l.tpBlocks) + l.tpIndex * n;
      uint64_t end = std::min<uint64_t>(first + n, (j + 1) * (size / l.tpBlocks));
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

/// The shape of the tensor-parallel slice of `l`.
std::vector<int64_t> tpShape(const ShardLayout &l) {
  std::vector<int64_t> s = l.global;
  if (l.tpParts > 0)
    s[l.tpDim] = (s[l.tpDim] + l.tpBlocks * l.tpParts - 1) /
                 (l.tpBlocks * l.tpParts) * l.tpBlocks;
  return s;
}

} // namespace

Status gatherShards(const std::vector<ShardPiece> &pieces, size_t esize,
                    std::string &global, const std::string &what) {
  if (pieces.empty())
    return Status::failure(what + ": no shard");
  const ShardLayout &first = pieces.front().layout;
  global.assign(product(first.global) * esize, '\0');
  // Tensor-parallel slices, each assembled from its ZeRO chunks.
  std::map<int64_t, std::string> slices;
  std::map<int64_t, std::vector<bool>> chunksSeen;
  int64_t tpParts = std::max<int64_t>(1, first.tpParts);
  for (const ShardPiece &p : pieces) {
    const ShardLayout &l = p.layout;
    if (l.global != first.global || std::max<int64_t>(1, l.tpParts) != tpParts ||
        (l.tpParts && (l.tpDim != first.tpDim || l.tpBlocks != first.tpBlocks)))
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
