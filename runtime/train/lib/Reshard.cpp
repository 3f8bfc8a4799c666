//===- Reshard.cpp - Shards of global tensors across plans ----------------===//

#include "smprt/train/Reshard.h"

#include <algorithm>
#include <map>

namespace smprt {

using smp::base::Layout;

Status gatherShards(const std::vector<ShardPiece> &pieces, size_t esize,
                    std::string &global, const std::string &what) {
  if (pieces.empty())
    return Status::failure(what + ": no shard");
  const Layout &first = pieces.front().layout;
  // The shards cover the tensor (padding only adds to them): a global shape
  // larger than their bytes is refused before it is allocated.
  uint64_t covered = 0, globalCount;
  for (const ShardPiece &p : pieces)
    covered += p.bytes; // each is inside a file read into memory
  if (!checkedElementCount(first.fullShape, smp::base::kMaxLayoutElements,
                           globalCount) ||
      globalCount > covered / esize)
    return Status::failure(what + ": its global shape is larger than all its "
                                  "shards together");
  global.assign(globalCount * esize, '\0');
  // Which ZeRO chunks of each tensor-parallel slice are present.
  std::map<int64_t, std::vector<bool>> chunksSeen;
  std::map<int64_t, int64_t> zeroPartsOf; // of each slice's chunks
  int64_t tpParts = std::max<int64_t>(1, first.tpParts);
  for (const ShardPiece &p : pieces) {
    const Layout &l = p.layout;
    auto zp = zeroPartsOf.emplace(l.tpIndex, l.zeroParts);
    if (l.fullShape != first.fullShape ||
        std::max<int64_t>(1, l.tpParts) != tpParts ||
        (l.tpParts &&
         (l.tpDim != first.tpDim || l.tpBlocks != first.tpBlocks)) ||
        zp.first->second != l.zeroParts)
      return Status::failure(what + ": its shards disagree on its layout");
    if (p.bytes != smp::base::elementCount(smp::base::localShape(l)) * esize)
      return Status::failure(what + (l.zeroChunk()
                                         ? ": a ZeRO chunk has the wrong size"
                                         : ": a shard has the wrong size"));
    smp::base::pasteShard(p.data, l, esize, &global[0]);
    std::vector<bool> &seen = chunksSeen[l.tpIndex];
    seen.resize(std::max<int64_t>(1, l.zeroParts), false);
    seen[l.zeroChunk() ? l.zeroIndex : 0] = true;
  }
  if (static_cast<int64_t>(chunksSeen.size()) != tpParts)
    return Status::failure(what + ": the checkpoint holds " +
                           std::to_string(chunksSeen.size()) + " of its " +
                           std::to_string(tpParts) + " tensor-parallel slices");
  for (auto &[index, seen] : chunksSeen)
    for (bool b : seen)
      if (!b)
        return Status::failure(what + ": the checkpoint misses ZeRO chunks");
  return Status::success();
}

} // namespace smprt
