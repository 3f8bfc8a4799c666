//===- SideWork.cpp - The memory plan's window for side work --------------===//
//
// A backend runs collectives and pipeline messages on a communication
// stream beside the compute work after them (runtime/exec's lanes,
// smp::base::opLane), until the first instruction that touches the bytes of
// their operands: that instruction waits for them. An operand that dies at
// the collective (ZeRO's reduce-scatter input, the bucket packed for it)
// would have its memory reused by the very next instruction, which then
// waits: nothing overlaps. So the plan may keep such operands live until
// the next work of the same lane (which queues behind this one in any case)
// or the first use of the work's results (which waits for it in any case),
// whichever comes first, and the step's end at the latest.
//
// Only where memory allows: a window is taken, in program order, where the
// bytes live over it stay within the step's most bytes live without any
// window, and the windows stand only if the arena they give is no larger
// than the arena without them. The overlap never costs device memory (the
// plan the planner and the user were told fits still fits).
//
// The copy lane (offloading) keeps its rule: an offload exists to give the
// activation's device memory back, and the forward issues one after
// another, so the window would buy an instruction or two.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include <algorithm>

namespace smp::writer {

void Lowering::recordSideWork(Operation &op, int64_t index) {
  const pb::Instruction &inst =
      program.instructions(static_cast<int>(firstInstruction.back()));
  const smp::base::OpSchema *schema = smp::base::findOp(inst.op());
  if (schema && smp::base::opLane(schema->id) == smp::base::OpLane::Comm)
    sideWork.push_back({index, &op});
}

void Lowering::holdSideOperands() {
  for (size_t k = 0; k < sideWork.size(); ++k) {
    const SideWork &w = sideWork[k];
    // The next collective (the step's end after the last).
    int64_t until = k + 1 < sideWork.size() ? sideWork[k + 1].index : instants;
    // The first instruction that reads a result, through aliases and
    // views (which read nothing themselves).
    SmallVector<Value> results(w.op->getResults());
    while (!results.empty())
      for (Operation *user : results.pop_back_val().getUsers()) {
        if (aliases.contains(user)) {
          results.append(user->result_begin(), user->result_end());
          continue;
        }
        auto it = instantOf.find(user);
        if (it != instantOf.end())
          until = std::min(until, it->second);
      }
    if (until <= w.index + 1)
      continue; // the next instruction needs it: nothing to overlap
    SmallVector<Value> operands(w.op->getOperands());
    operands.append(w.op->result_begin(), w.op->result_end());
    for (Value v : operands) {
      auto it = bufferOf.find(v);
      if (it == bufferOf.end())
        continue;
      unsigned r = root[it->second];
      if (pool[r] != 0 || argBuffers.contains(r) || live[r].start < 0 ||
          live[r].end >= until - 1)
        continue;
      holds.push_back({r, until - 1});
    }
  }
}

MemoryPlan Lowering::planWithHolds(const std::vector<unsigned> &rootIds,
                                   std::vector<LiveRange> &ranges,
                                   MemoryPlan plan) {
  if (holds.empty())
    return plan;
  // Bytes live at each instant (0 .. instants; before the first and after
  // the last count as the ends).
  auto clampAt = [&](int64_t t) { return std::clamp<int64_t>(t, 0, instants); };
  // By differences: a weight lives at every instant, and a model has
  // thousands of them.
  std::vector<int64_t> change(static_cast<size_t>(instants) + 2, 0);
  for (const LiveRange &r : ranges) {
    change[clampAt(r.start)] += static_cast<int64_t>(plannedBytes(r));
    change[clampAt(r.end) + 1] -= static_cast<int64_t>(plannedBytes(r));
  }
  std::vector<uint64_t> liveAt(change.size(), 0);
  int64_t sum = 0;
  for (size_t t = 0; t < change.size(); ++t)
    liveAt[t] = static_cast<uint64_t>(sum += change[t]);
  uint64_t most = *std::max_element(liveAt.begin(), liveAt.end());
  llvm::DenseMap<unsigned, size_t> at;
  for (size_t k = 0; k < rootIds.size(); ++k)
    at[rootIds[k]] = k;
  std::vector<LiveRange> held = ranges;
  for (const Hold &h : holds) {
    auto it = at.find(h.root);
    if (it == at.end())
      continue;
    LiveRange &r = held[it->second];
    if (r.end >= h.end)
      continue;
    int64_t from = clampAt(r.end + 1), to = clampAt(h.end);
    uint64_t bytes = plannedBytes(r);
    bool fits = true;
    for (int64_t t = from; t <= to && fits; ++t)
      fits = liveAt[t] + bytes <= most;
    if (!fits)
      continue;
    for (int64_t t = from; t <= to; ++t)
      liveAt[t] += bytes;
    r.end = h.end;
  }
  MemoryPlan withHolds = planMemory(held);
  if (withHolds.arenaBytes > plan.arenaBytes)
    return plan;
  ranges = std::move(held);
  for (size_t k = 0; k < rootIds.size(); ++k)
    live[rootIds[k]] = ranges[k];
  return withHolds;
}

} // namespace smp::writer
