//===- Reshard.h - Shards of global tensors across plans --------*- C++ -*-===//
//
// A rank's buffer may hold part of a global tensor: a tensor-parallel slice
// (dim viewed as [blocks, parts, n], one index along parts) and, for ZeRO-1
// optimizer state, a chunk of that slice flattened and zero-padded to a
// multiple of the data-parallel ranks. Checkpoints store each rank's shards
// with their layout; resuming under another plan gathers a tensor whole
// from the shards that cover it and cuts this rank's shard out of it.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_RESHARD_H
#define SMPRT_TRAIN_RESHARD_H

#include "smprt/Base.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smprt {

struct ShardLayout {
  std::vector<int64_t> shape;  // of the shard as stored
  std::vector<int64_t> global; // of the whole tensor
  int64_t tpDim = 0, tpBlocks = 1, tpParts = 0, tpIndex = 0;
  std::vector<int64_t> zeroShape; // the tensor-parallel slice's shape
  int64_t zeroParts = 0, zeroIndex = 0;

  /// From an artifact Buffer or a CheckpointTensor (same field names).
  template <typename Proto> static ShardLayout of(const Proto &p) {
    ShardLayout l;
    l.shape.assign(p.shape().begin(), p.shape().end());
    l.global.assign(p.global_shape().begin(), p.global_shape().end());
    if (l.global.empty())
      l.global = l.shape;
    l.tpDim = p.tp_dim();
    l.tpBlocks = p.tp_blocks() ? p.tp_blocks() : 1;
    l.tpParts = p.tp_parts();
    l.tpIndex = p.tp_index();
    l.zeroShape.assign(p.zero_shape().begin(), p.zero_shape().end());
    l.zeroParts = p.zero_parts();
    l.zeroIndex = p.zero_index();
    return l;
  }
  template <typename Proto> void to(Proto &p) const {
    for (int64_t d : global)
      p.add_global_shape(d);
    p.set_tp_dim(tpDim);
    p.set_tp_blocks(tpBlocks);
    p.set_tp_parts(tpParts);
    p.set_tp_index(tpIndex);
    for (int64_t d : zeroShape)
      p.add_zero_shape(d);
    p.set_zero_parts(zeroParts);
    p.set_zero_index(zeroIndex);
  }
};

struct ShardPiece {
  ShardLayout layout;
  const char *data;
  size_t bytes;
};

/// Whether `l` describes a shard that gatherShards and sliceShard can use:
/// element counts of at most 2^50 (never wrapping), `bytes` the shard's
/// element count times `elementBytes`, the tensor-parallel fields (dim
/// inside the global shape, 1 <= blocks, parts < 2^31, index < parts) and
/// the ZeRO fields (index < parts < 2^31, the chunk of the slice) in range
/// and consistent with the shapes. Returns "" when it does, else what is
/// wrong (for an error naming the file and the tensor).
std::string checkShardLayout(const ShardLayout &l, uint64_t bytes,
                             size_t elementBytes);

/// Assembles the global tensor (layout.global of `pieces`' first entry) from
/// shards of `elementBytes`-byte elements; every part must be present.
/// Errors name `what`.
Status gatherShards(const std::vector<ShardPiece> &pieces, size_t elementBytes,
                    std::string &global, const std::string &what);

/// The bytes of the shard `layout` of `global`.
std::string sliceShard(const std::string &global, const ShardLayout &layout,
                       size_t elementBytes);

} // namespace smprt

#endif // SMPRT_TRAIN_RESHARD_H
