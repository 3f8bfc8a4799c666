//===- ArenaPeak.cpp - What the device arena holds at its peak -----------===//
//
// The instant of a rank's program when the most arena bytes are live, what
// is live then by role (parameters, optimizer state, inputs, constants, the
// step's own values) and the largest of the step's own values: plan.txt's
// answer to "what takes my memory", and what the planner's memory model is
// checked against.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include <algorithm>
#include <limits>

namespace smp::writer {

ArenaPeak arenaPeak(const pb::RankProgram &program,
                    const std::vector<int64_t> &firstInstruction,
                    const std::vector<unsigned> &rootIds,
                    const std::vector<LiveRange> &ranges,
                    const MemoryPlan &plan) {
  ArenaPeak peak;
  // An instant as an instruction index: -1 before the first, the number of
  // instructions after the last (the returned values).
  auto instructionAt = [&](int64_t t) -> int64_t {
    if (t < 0)
      return -1;
    return t < static_cast<int64_t>(firstInstruction.size())
               ? firstInstruction[static_cast<size_t>(t)]
               : program.instructions_size();
  };
  // The memory plan's peak: its instant and its (aligned) bytes.
  int64_t at = plan.peakLiveAt;
  peak.liveBytes = plan.peakLiveBytes;
  peak.instruction = instructionAt(at);
  if (peak.instruction >= 0 && peak.instruction < program.instructions_size()) {
    const pb::Instruction &inst =
        program.instructions(static_cast<int>(peak.instruction));
    peak.op = inst.op();
    peak.loc = inst.loc();
  }
  std::vector<ArenaPeak::Value> own;
  for (size_t k = 0; k < ranges.size(); ++k) {
    const LiveRange &r = ranges[k];
    if (r.start > at || std::max(r.end, r.start) < at)
      continue;
    const pb::Buffer &b = program.buffers(static_cast<int>(rootIds[k]));
    const std::string &role = b.role();
    uint64_t &sum = role == "param"      ? peak.parameters
                    : role == "state"    ? peak.optimizerState
                    : role == "input"    ? peak.inputs
                    : role == "constant" ? peak.constants
                                         : peak.stepValues;
    sum += plannedBytes(r);
    if (role.empty())
      own.push_back({b.name(), r.bytes, instructionAt(r.start),
                     instructionAt(std::max(r.end, r.start))});
  }
  std::stable_sort(own.begin(), own.end(), [](const auto &a, const auto &b) {
    return a.bytes > b.bytes;
  });
  own.resize(std::min(own.size(), ArenaPeak::kLargest));
  peak.largest = std::move(own);
  return peak;
}

} // namespace smp::writer
