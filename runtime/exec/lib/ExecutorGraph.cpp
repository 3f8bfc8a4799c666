//===- ExecutorGraph.cpp - The training step as one recorded graph --------===//
//
// Executor::enableGraphs: on a backend that records steps (a GPU's CUDA
// graphs), the second training run records its instructions as they are
// queued, with their side streams' ordering, and every later one launches
// the record. A dropout draws its masks from the step's number in a device
// word written before each run (Backend::makeStepCounter), not from the
// launch's arguments. What a record cannot hold is refused up front, naming
// the instruction: a collective or pipeline message (NCCL's stream, under
// the communicator's host-side deadline).
//
//===----------------------------------------------------------------------===//

#include "smprt/exec/Executor.h"

namespace smprt {
namespace {
/// What every error of this file begins with.
constexpr const char *what =
    "recording the step as a CUDA graph (--cuda-graph)";
} // namespace

Status Executor::enableGraphs() {
  if (!artifact_)
    return Status::failure(std::string(what) + ": no program loaded");
  if (!backend_->capturesSteps())
    return Status::failure(std::string(what) + ": " + backend_->name() +
                           " runs each instruction as it is issued and "
                           "records none; run on a GPU (--device cuda) or "
                           "without --cuda-graph");
  const auto &p = artifact_->program;
  bool draws = false;
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (p.instructions(static_cast<int>(i)).eval_only())
      continue;
    draws |= steps_[i].drawsRandom;
    if (steps_[i].lane == Lane::Comm)
      return Status::failure(
          std::string(what) + ": " + describeInstruction(i) +
          " is communication, which runs on NCCL's stream under the "
          "communicator's deadline and is not recorded; run one rank "
          "without parallelism, or without --cuda-graph");
  }
  if (draws) {
    const uint32_t *word = nullptr;
    if (Status s = backend_->makeStepCounter(word); !s.ok())
      return Status::failure(std::string(what) + ": " + s.error);
    random_.stepOnDevice = word;
  }
  stepCounter_ = draws;
  graphs_ = true;
  graph_.reset();
  graphRuns_ = 0;
  return Status::success();
}

void Executor::setRandomState(uint64_t seed, uint64_t step) {
  if (graph_ && seed != random_.seed) {
    graph_.reset(); // recorded with the old seed: record again
    graphRuns_ = 1;
  }
  random_.seed = seed;
  random_.step = step;
}

Status Executor::recordGraph(const RunMode &mode) {
  Status s = backend_->beginCapture();
  if (!s.ok())
    return Status::failure(std::string(what) + ": " + s.error);
  std::vector<size_t> untimed;
  s = issueSteps(mode, untimed);
  // The side streams' last steps joined back before the record ends.
  if (s.ok())
    s = joinLanes();
  std::unique_ptr<Backend::Graph> graph;
  Status ended = backend_->endCapture(graph); // ends it whatever happened
  if (!s.ok())
    return Status::failure(std::string(what) + ": " + s.error +
                           (ended.ok() ? "" : "; " + ended.error));
  if (!ended.ok())
    return Status::failure(std::string(what) + ": " + ended.error);
  graph_ = std::move(graph);
  return Status::success();
}

} // namespace smprt
