//===- ExecutorGraph.cpp - The training step as one recorded graph --------===//
//
// Executor::enableGraphs: on a backend that records steps (a GPU's CUDA
// graphs), the second training run records its instructions as they are
// queued, with their side streams' ordering, and every later one launches
// the record. A dropout draws its masks from the step's number in a device
// word written before each run (Backend::makeStepCounter), not from the
// launch's arguments. Collectives are recorded on the communication stream
// (NCCL captures them: a collective property, which every rank's identical
// run gives it), and after each launch the communication stream waits for
// the compute stream's end of it, so that the communicator's synchronize()
// at the step's end watches the launch under its deadline. A pipeline's
// messages are recorded too: the sends still posted when the step's
// instructions are queued are queued into the record (queueSends) and
// joined back, and complete with the launch. What a record cannot hold is
// refused up front: a backend that records nothing (the CPU).
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
  bool draws = false, communicates = false, sends = false;
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (p.instructions(static_cast<int>(i)).eval_only())
      continue;
    draws |= steps_[i].drawsRandom;
    communicates |= steps_[i].lane == Lane::Comm;
    sends |= steps_[i].op == "send";
  }
  if (draws) {
    const uint32_t *word = nullptr;
    if (Status s = backend_->makeStepCounter(word); !s.ok())
      return Status::failure(std::string(what) + ": " + s.error);
    random_.stepOnDevice = word;
  }
  graphDone_.reset();
  sendsQueued_.reset();
  Status made;
  if (communicates)
    made = backend_->createEvent(graphDone_);
  if (made.ok() && sends)
    made = backend_->createEvent(sendsQueued_);
  if (!made.ok())
    return Status::failure(std::string(what) + ": " + made.error);
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

Status Executor::launchGraph() {
  Status s = graph_->launch();
  if (!s.ok())
    return Status::failure("launching the step's graph: " + s.error);
  if (!graphDone_)
    return s;
  // The communication stream after the launch: the communicator waits
  // for its own stream, which the launch did not queue on.
  if (!(s = backend_->computeStream().record(*graphDone_)).ok() ||
      !(s = backend_->laneStream(Lane::Comm).wait(*graphDone_)).ok())
    return Status::failure(
        "ordering the communication stream after the step's graph: " + s.error);
  return s;
}

Status Executor::queueSends() {
  Status s = programComm_->queueSends("the sends of this step");
  if (s.ok() &&
      (!(s = backend_->laneStream(Lane::Comm).record(*sendsQueued_)).ok() ||
       !(s = backend_->computeStream().wait(*sendsQueued_)).ok()))
    s = Status::failure("joining the communication stream after the "
                        "step's sends: " +
                        s.error);
  return s;
}

Status Executor::recordGraph(const RunMode &mode) {
  Status s = backend_->beginCapture();
  if (!s.ok())
    return Status::failure(std::string(what) + ": " + s.error);
  std::vector<size_t> untimed;
  s = issueSteps(mode, untimed);
  // The pipeline's sends still posted, into the record, and the
  // communication stream joined back after them.
  if (s.ok() && sendsQueued_)
    s = queueSends();
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
