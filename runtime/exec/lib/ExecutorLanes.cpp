//===- ExecutorLanes.cpp - The executor's side streams --------------------===//
//
// Steps of the communication and copy lanes queue on the backend's side
// streams, ordered against the compute stream by events from the byte
// ranges each instruction reads and writes (LaneHazards.h).
//
//===----------------------------------------------------------------------===//

#include "smprt/exec/Executor.h"

namespace smprt {

Status Executor::prepareLanes() {
  const auto &p = artifact_->program;
  access_.assign(steps_.size(), Access());
  laneDone_.clear();
  laneDone_.resize(steps_.size());
  laneStart_.reset();
  hazards_.drain();
  auto range = [&](uint32_t b) {
    const auto &buf = p.buffers(static_cast<int>(b));
    return ByteRange{buf.pool(), buf.offset(), buf.offset() + buf.bytes()};
  };
  for (size_t i = 0; i < steps_.size(); ++i) {
    const auto &inst = p.instructions(static_cast<int>(i));
    for (uint32_t b : inst.inputs())
      access_[i].reads.push_back(range(b));
    for (uint32_t b : inst.outputs())
      access_[i].writes.push_back(range(b));
    if (steps_[i].lane == Lane::Compute)
      continue;
    Status s;
    if (!laneStart_)
      s = backend_->createEvent(laneStart_);
    if (s.ok())
      s = backend_->createEvent(laneDone_[i]);
    if (!s.ok())
      return Status::failure("the " + std::string(laneName(steps_[i].lane)) +
                             " stream of " + describeInstruction(i) + ": " +
                             s.error);
  }
  return Status::success();
}

Status Executor::issue(size_t i, bool serial) {
  const Step &step = steps_[i];
  Stream &compute = backend_->computeStream();
  auto ordering = [&](Status s) {
    return s.ok() ? s
                  : Status::failure("ordering the " +
                                    std::string(laneName(step.lane)) +
                                    " stream: " + s.error);
  };
  if (step.lane == Lane::Compute) {
    for (size_t id : hazards_.before(Lane::Compute, access_[i]))
      if (Status s = compute.wait(*laneDone_[id]); !s.ok())
        return ordering(s);
    return step.run();
  }
  Stream &side = backend_->laneStream(step.lane);
  Status s;
  for (size_t id : hazards_.before(step.lane, access_[i]))
    if (!(s = side.wait(*laneDone_[id])).ok())
      return ordering(s);
  // After the compute work queued so far: what it writes is there, what
  // it reads is read.
  if (!(s = compute.record(*laneStart_)).ok() ||
      !(s = side.wait(*laneStart_)).ok())
    return ordering(s);
  if (!(s = step.run()).ok())
    return s;
  if (!(s = side.record(*laneDone_[i])).ok())
    return ordering(s);
  if (serial)
    return ordering(compute.wait(*laneDone_[i]));
  hazards_.queued(i, step.lane, access_[i]);
  return Status::success();
}

Status Executor::joinLanes() {
  Stream &compute = backend_->computeStream();
  for (size_t id : hazards_.drain())
    if (Status s = compute.wait(*laneDone_[id]); !s.ok())
      return Status::failure("waiting for the " +
                             std::string(laneName(steps_[id].lane)) +
                             " stream at the step's end: " + s.error);
  return Status::success();
}

} // namespace smprt
