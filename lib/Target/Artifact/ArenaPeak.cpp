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
                    const std::vector<LiveRange> &ranges) {
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
  // Live bytes after each instant's starts and before its ends (a range
  // [start, end] holds its bytes at both ends, as the memory plan counts).
  std::vector<std::pair<int64_t, int64_t>> events; // (instant, +/- bytes)
  for (const LiveRange &r : ranges) {
    auto bytes = static_cast<int64_t>(r.bytes);
    events.push_back({r.start, bytes});
    int64_t end = std::max(r.end, r.start);
    if (end < std::numeric_limits<int64_t>::max())
      events.push_back({end + 1, -bytes});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  int64_t at = -1; // the peak's instant
  for (size_t k = 0; k < events.size(); ++k) {
    live += events[k].second;
    bool last =
        k + 1 == events.size() || events[k + 1].first != events[k].first;
    if (last && live > static_cast<int64_t>(peak.liveBytes)) {
      peak.liveBytes = static_cast<uint64_t>(live);
      at = events[k].first;
    }
  }
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
    sum += r.bytes;
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
