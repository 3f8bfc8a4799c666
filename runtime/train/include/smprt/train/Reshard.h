//===- Reshard.h - Shards of global tensors across plans --------*- C++ -*-===//
//
// A rank's buffer may hold part of a global tensor (its Layout,
// smp/base/Layout.h: a tensor-parallel slice and, for ZeRO-1 optimizer
// state, a chunk of that slice). Checkpoints store each rank's shards with
// their layout; resuming under another plan gathers a tensor whole from the
// shards that cover it (here) and cuts this rank's shard out of it
// (smp::base::cutShard).
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_RESHARD_H
#define SMPRT_TRAIN_RESHARD_H

#include "smp/base/Layout.h"
#include "smprt/Base.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smprt {

/// One shard: its layout (checked by smp::base::checkLayout) and bytes.
struct ShardPiece {
  smp::base::Layout layout;
  const char *data;
  size_t bytes;
};

/// Assembles the global tensor (layout.fullShape of `pieces`' first entry)
/// from shards of `elementBytes`-byte elements; every part must be present
/// and the shards must agree on the layout. Errors name `what`.
Status gatherShards(const std::vector<ShardPiece> &pieces, size_t elementBytes,
                    std::string &global, const std::string &what);

} // namespace smprt

#endif // SMPRT_TRAIN_RESHARD_H
