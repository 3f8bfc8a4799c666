//===- RankProgram.cpp - The functions to lower and per-rank programs -----===//
//
// Which functions become programs (one per pipeline rank), and each rank's
// copy of its stage's program bound to its grid coordinates.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "smp/Dialect/Smp/IR/SmpOps.h"

namespace smp::writer {

llvm::Expected<SmallVector<func::FuncOp>> rankFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> funcs;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(SmpDialect::kPipelineRankAttr))
      funcs.push_back(f);
  llvm::sort(funcs, [](func::FuncOp a, func::FuncOp b) {
    return a->getAttrOfType<IntegerAttr>(SmpDialect::kPipelineRankAttr).getInt() <
           b->getAttrOfType<IntegerAttr>(SmpDialect::kPipelineRankAttr).getInt();
  });
  for (auto [k, f] : llvm::enumerate(funcs))
    if (f->getAttrOfType<IntegerAttr>(SmpDialect::kPipelineRankAttr).getInt() !=
        static_cast<int64_t>(k))
      return fail("the pipeline-rank functions are not numbered 0.." +
                  llvm::Twine(funcs.size() - 1));
  if (funcs.empty()) {
    auto func = module.lookupSymbol<func::FuncOp>("train_step");
    if (!func)
      func = module.lookupSymbol<func::FuncOp>("main");
    if (!func) {
      auto all = module.getOps<func::FuncOp>();
      if (all.empty())
        return fail("module has no function to compile");
      func = *all.begin();
    }
    funcs.push_back(func);
  }
  return funcs;
}

/// A dropout's place in the global tensor on this rank (smp.dropout's, or
/// an attention op's dropout on its probabilities): its samples
/// follow the earlier data shards' (each `shard_samples` a step), and its
/// tensor-parallel part is the rank's.
static void
bindDropout(google::protobuf::Map<std::string, pb::Attribute> &attrs,
            const std::array<int64_t, 3> &coord) {
  auto get = [&](const char *name) -> int64_t {
    auto it = attrs.find(name);
    return it == attrs.end() ? 0 : it->second.i();
  };
  if (int64_t shard = get("shard_samples"); shard > 0)
    attrs["sample_offset"].set_i(get("sample_offset") +
                                 coord[kDataAxis] * shard);
  if (get("tp_parts") > 1)
    attrs["tp_index"].set_i(coord[kTensorAxis]);
}

llvm::Expected<pb::RankProgram> rankProgram(const pb::RankProgram &stage,
                                            const DeviceGrid &grid,
                                            int64_t rank) {
  pb::RankProgram program = stage;
  auto coord = grid.coordOf(rank);
  program.set_rank(static_cast<uint32_t>(rank));
  program.set_dp_rank(coord[kDataAxis]);
  program.set_pp_rank(coord[kPipelineAxis]);
  program.set_tp_rank(coord[kTensorAxis]);
  program.set_data_shard(coord[kDataAxis]);
  program.set_data_shards(grid.size[kDataAxis]);
  // ZeRO state or a ZeRO-3 parameter: this rank's chunk among its shard
  // group (hybrid sharding's replica groups hold the same chunks).
  int64_t shard = coord[kDataAxis] % grid.shardRanks();
  for (pb::Buffer &b : *program.mutable_buffers())
    if (b.has_layout() && b.layout().zero_parts()) {
      b.mutable_layout()->set_zero_parts(grid.shardRanks());
      b.mutable_layout()->set_zero_index(shard);
    }
  // A ZeRO-3 parameter's bytes: the file holds every chunk in turn.
  for (pb::WeightRef &w : *program.mutable_weights()) {
    const pb::Buffer &b = program.buffers(w.buffer());
    if (!w.zero_init() && b.has_layout() && b.layout().zero_parts())
      w.set_file_offset(w.file_offset() + shard * w.bytes());
  }
  for (pb::Instruction &inst : *program.mutable_instructions()) {
    auto &attrs = *inst.mutable_attrs();
    if (inst.op() == "send" || inst.op() == "recv") {
      auto peer = coord;
      peer[kPipelineAxis] = attrs["peer"].i();
      if (peer[kPipelineAxis] < 0 ||
          peer[kPipelineAxis] >= grid.size[kPipelineAxis])
        return fail(inst.op() + " to pipeline rank " +
                    llvm::Twine(peer[kPipelineAxis]) + " of " +
                    llvm::Twine(grid.size[kPipelineAxis]));
      attrs["peer"].set_i(grid.rankOf(peer));
      continue;
    }
    // dropout, or an attention op's dropout on its probabilities.
    if (attrs.count("stream")) {
      bindDropout(attrs, coord);
      continue;
    }
    auto it = attrs.find("grid");
    if (it == attrs.end())
      continue;
    auto group = grid.group(rank, it->second.s());
    if (!group)
      return fail("collective over unknown grid '" + it->second.s() +
                  "' (expected dp, dp_shard, dp_replica, tp or pp)");
    pb::Attribute ranks;
    for (int r : *group)
      ranks.mutable_ints()->add_values(r);
    attrs["ranks"] = ranks;
  }
  return program;
}

} // namespace smp::writer
