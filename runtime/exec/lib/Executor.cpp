//===- Executor.cpp - Runs one rank's program -----------------------------===//

#include "smprt/exec/Executor.h"

#include <chrono>
#include <cstring>
#include <map>
#include <new>

namespace smprt {

Executor::Executor() : backend_(nullptr), ownBackend_(makeCpuBackend()) {
  backend_ = ownBackend_.get();
}

Executor::~Executor() = default;

void Executor::setBackend(Backend *backend) {
  backend_ = backend ? backend : ownBackend_.get();
}

/// Weights from the artifact's file (or their fill value) into the arena.
Status Executor::loadWeights(const Artifact &artifact) {
  const auto &p = artifact.program;
  std::string weights;
  Status s = readWeights(artifact, weights);
  if (!s.ok())
    return s;
  std::string fill; // host bytes of a filled weight
  for (const auto &w : p.weights()) {
    const auto &b = p.buffers(w.buffer());
    // loadArtifact checked the range [file_offset, +bytes) of a weight read
    // from the file (a filled one's file_offset means nothing).
    const char *src = nullptr;
    if (!w.zero_init())
      src = weights.data() + w.file_offset();
    else {
      if (w.fill_value() != 0 && b.dtype() != static_cast<uint32_t>(DType::F32))
        return Status::failure(artifact.dir + ": buffer '" + b.name() +
                               "' has a fill value but is not f32");
      fill.assign(w.bytes(), '\0');
      if (w.fill_value() != 0) {
        float v = static_cast<float>(w.fill_value());
        float *f = reinterpret_cast<float *>(fill.data());
        std::fill(f, f + w.bytes() / sizeof(float), v);
      }
      src = fill.data();
    }
    if (b.pool() != 0) // loadArtifact refuses these; never write past
      return Status::failure(artifact.dir + ": weight '" + b.name() +
                             "' is not in the arena");
    if (!(s = backend_->copyIn(arena_.data() + b.offset(), src, w.bytes(),
                               "weight '" + b.name() + "'"))
             .ok())
      return Status::failure(artifact.dir + ": " + s.error);
    arena_.touch(b.offset(), b.bytes());
  }
  return Status::success();
}

Status Executor::init(const Artifact &artifact) {
  // A recorded step holds the old program's addresses.
  graph_.reset();
  graphs_ = stepCounter_ = false;
  graphRuns_ = 0;
  random_.stepOnDevice = nullptr;
  artifact_ = &artifact;
  const auto &p = artifact.program;
  Status s = arena_.allocate(*backend_, p.arena_bytes(), /*host=*/false);
  if (!s.ok())
    return Status::failure(artifact.dir + ": " + s.error);
  // Offloaded activations live in host memory (pinned for the CUDA
  // backend's copies).
  if (!(s = hostArena_.allocate(*backend_, p.host_arena_bytes(), true)).ok())
    return Status::failure(artifact.dir + ": " + s.error);
  buffers_.clear();
  for (const auto &b : p.buffers()) {
    TensorRef ref;
    ref.data = (b.pool() == 1 ? hostArena_.data() : arena_.data()) + b.offset();
    ref.dtype = static_cast<DType>(b.dtype());
    ref.shape.assign(b.shape().begin(), b.shape().end());
    buffers_.push_back(ref);
  }
  if (!(s = loadWeights(artifact)).ok())
    return s;
  // The program's collectives run on the backend's communicator (NCCL on a
  // GPU), made from the run's.
  deviceComm_.reset();
  if (!(s = backend_->deviceCommunicator(*comm_, deviceComm_)).ok())
    return Status::failure(artifact.dir + ": " + s.error);
  programComm_ = deviceComm_ ? deviceComm_.get() : comm_;
  // Communicators of the rank groups the collectives run over, created in
  // sorted order (the same on every rank, so creation cannot deadlock).
  groups_.clear();
  std::map<std::vector<int>, Communicator *> groupOf;
  for (const auto &inst : p.instructions())
    if (auto it = inst.attrs().find("ranks"); it != inst.attrs().end())
      groupOf[std::vector<int>(it->second.ints().values().begin(),
                               it->second.ints().values().end())] = nullptr;
  for (auto &[ranks, group] : groupOf) {
    std::unique_ptr<Communicator> c;
    std::string what = "creating the group of ranks";
    for (int r : ranks)
      what += " " + std::to_string(r);
    if (!(s = programComm_->createGroup(ranks, c, what)).ok())
      return Status::failure(artifact.dir + ": " + s.error);
    group = c.get();
    groups_.push_back(std::move(c));
  }
  // The pipeline's messages on a device communicator: a channel per pair of
  // ranks and direction (a send then waits only for the earlier messages
  // to its peer), opened in the same order on every rank. Collective: every
  // rank takes part, with its peers or none.
  std::vector<int> peers;
  for (const auto &inst : p.instructions())
    if (inst.op() == "send" || inst.op() == "recv")
      if (auto it = inst.attrs().find("peer"); it != inst.attrs().end())
        peers.push_back(static_cast<int>(it->second.i()));
  if (!(s = programComm_->openPipes(peers, "opening the pipeline's message "
                                           "channels"))
           .ok())
    return Status::failure(artifact.dir + ": " + s.error);
  steps_.clear();
  for (const auto &inst : p.instructions()) {
    Step step;
    Communicator *comm = programComm_;
    if (auto it = inst.attrs().find("ranks"); it != inst.attrs().end())
      comm = groupOf[std::vector<int>(it->second.ints().values().begin(),
                                      it->second.ints().values().end())];
    if (!(s = backend_->decode(inst, buffers_, *comm, random_, step)).ok())
      return Status::failure(artifact.dir + ": instruction '" + inst.op() +
                             "' (" + inst.loc() + "): " + s.error);
    steps_.push_back(std::move(step));
  }
  if (!(s = prepareLanes()).ok())
    return Status::failure(artifact.dir + ": " + s.error);
  inputSet_.assign(p.inputs_size(), false);
  outputCopies_.clear();
  if (!backend_->hostAddressable())
    for (const auto &o : p.outputs()) {
      // Each output's host copy (a device's outputs come back to be read).
      size_t bytes = buffers_[o.buffer()].bytes();
      bool fits = bytes <= physicalMemory();
      try {
        if (fits)
          outputCopies_.emplace_back(bytes, '\0');
      } catch (const std::bad_alloc &) {
        fits = false;
      }
      if (!fits) {
        outputCopies_.clear();
        return Status::failure(
            artifact.dir + ": output '" + o.name() + "' (" +
            std::to_string(bytes) +
            " bytes) does not fit in this machine's memory, where it is "
            "copied from " +
            backend_->name() +
            ": compile the model for a smaller --batch-size");
      }
    }
  return backend_->synchronize("loading the weights");
}

Status Executor::setInput(const std::string &name, const TensorRef &value,
                          const std::string &source) {
  const auto &p = artifact_->program;
  for (int i = 0; i < p.inputs_size(); ++i) {
    if (p.inputs(i).name() != name)
      continue;
    const TensorRef &dst = buffers_[p.inputs(i).buffer()];
    if (value.dtype != dst.dtype || value.shape != dst.shape)
      return Status::failure(source + ": input '" + name + "' is " +
                             describe(value) +
                             " but the model was compiled "
                             "for " +
                             describe(dst));
    Status s = backend_->copyIn(dst.data, value.data, dst.bytes(),
                                "input '" + name + "'");
    if (!s.ok())
      return Status::failure(source + ": " + s.error);
    arena_.touch(static_cast<char *>(dst.data) - arena_.data(), dst.bytes());
    inputSet_[i] = true;
    return Status::success();
  }
  return Status::failure(source + ": the model has no input named '" + name +
                         "'");
}

Status Executor::run() { return runSteps(/*forwardOnly=*/false); }

Status Executor::runForward() {
  random_.evaluating = true;
  Status s = runSteps(/*forwardOnly=*/true);
  random_.evaluating = false;
  return s;
}

Status Executor::runSteps(bool forwardOnly) {
  const auto &p = artifact_->program;
  for (int i = 0; i < p.inputs_size(); ++i)
    if (!inputSet_[i])
      return Status::failure("input '" + p.inputs(i).name() +
                             "' was not given");
  RunMode mode;
  mode.forwardOnly = forwardOnly;
  // Profiles are of training steps.
  mode.profiling = !profile_.empty() && !forwardOnly;
  if (mode.profiling)
    ++profileRuns_;
  // A device queues the steps: its clock times them (timing events around
  // each, read after the step), or, without one, profiling waits for each.
  mode.timed = mode.profiling && !timers_.empty();
  if (!mode.timed) // an evaluation's device time is not idle time
    afterProfiledStep_ = false;
  mode.waitEach = mode.profiling && !mode.timed && !backend_->hostAddressable();
  // A profile times each instruction alone and the finite checks read each
  // one's outputs: their side steps are waited for at once.
  mode.serial = !overlap_ || mode.profiling || checkFinite_;
  hazards_.drain(); // what a failed run left pending
  // Each instruction's scratch, once (a few driver calls around each
  // instruction, outside its host time; 0 without device memory).
  mode.measureScratch = mode.profiling && !scratchMeasured_;
  std::vector<size_t> timedSteps;
  Stream &stream = backend_->computeStream();
  firstInfinity_.clear();
  bool recorded = graphs_ && !forwardOnly && !mode.serial;
  Status s;
  // The dropout's step, in the device word its kernels read (recorded or
  // not, a training run under enableGraphs reads it there).
  if (stepCounter_ && !forwardOnly)
    s = backend_->writeStepCounter(random_.step);
  if (s.ok() && recorded && !graph_ && graphRuns_++ > 0)
    s = recordGraph(mode);
  if (s.ok() && recorded && graph_) {
    s = launchGraph();
  } else if (s.ok()) {
    s = issueSteps(mode, timedSteps);
  }
  if (!s.ok())
    return s;
  if (mode.measureScratch)
    scratchMeasured_ = true;
  // Pipeline sends are eager; the step ends once the peers have them.
  s = joinLanes();
  if (s.ok())
    s = programComm_->completeSends("the sends of this step");
  if (s.ok() && mode.timed) {
    stepEnd_ = otherStepEnd();
    s = stream.record(*timers_[stepEnd_]);
  }
  if (s.ok())
    s = programComm_->synchronize("the collectives of this step");
  if (s.ok())
    s = backend_->synchronize("this step");
  if (s.ok() && mode.timed)
    s = addDeviceTimes(timedSteps);
  const auto &outs = artifact_->program.outputs();
  for (size_t i = 0; s.ok() && i < outputCopies_.size(); ++i)
    s = readBuffer(outs[static_cast<int>(i)].buffer(), outputCopies_[i].data());
  return s;
}

Status Executor::issueSteps(const RunMode &mode,
                            std::vector<size_t> &timedSteps) {
  const auto &p = artifact_->program;
  Stream &stream = backend_->computeStream();
  for (size_t i = 0; i < steps_.size(); ++i) {
    const auto &inst = p.instructions(static_cast<int>(i));
    if (mode.forwardOnly ? !inst.forward() : inst.eval_only())
      continue;
    const Step &step = steps_[i];
    uint64_t scratchBefore = mode.measureScratch ? scratchHeld(true) : 0;
    auto start = std::chrono::steady_clock::now();
    Status s = mode.timed ? stream.record(*timers_[2 * i]) : Status::success();
    if (s.ok())
      s = issue(i, mode.serial);
    if (s.ok() && mode.timed && (s = stream.record(*timers_[2 * i + 1])).ok())
      timedSteps.push_back(i);
    if (s.ok() && mode.waitEach)
      s = backend_->synchronize("the step");
    if (mode.profiling) {
      double host = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
      profileHost_[i] += host;
      if (!mode.timed)
        profile_[i] += host;
    }
    if (mode.measureScratch) {
      uint64_t high = scratchHeld(false);
      profileScratch_[i] = std::max(
          profileScratch_[i], high > scratchBefore ? high - scratchBefore : 0);
    }
    if (!s.ok())
      return Status::failure("instruction '" + step.op + "' (node '" +
                             step.loc + "'): " + s.error);
    if (checkFinite_ && !(s = checkFiniteOutputs(i)).ok())
      return s;
    for (uint32_t o : step.outputs)
      if (artifact_->program.buffers(o).pool() == 0)
        arena_.touch(static_cast<char *>(buffers_[o].data) - arena_.data(),
                     buffers_[o].bytes());
  }
  return Status::success();
}

Status Executor::readBuffer(uint32_t index, void *dst) const {
  const TensorRef &t = buffers_.at(index);
  if (artifact_->program.buffers(static_cast<int>(index)).pool() == 1) {
    std::memcpy(dst, t.data, t.bytes()); // the host pool
    return Status::success();
  }
  return backend_->copyOut(
      dst, t.data, t.bytes(),
      "buffer '" + artifact_->program.buffers(static_cast<int>(index)).name() +
          "'");
}

Status Executor::writeBuffer(uint32_t index, const void *src) {
  const TensorRef &t = buffers_.at(index);
  if (artifact_->program.buffers(static_cast<int>(index)).pool() == 1) {
    std::memcpy(t.data, src, t.bytes());
    return Status::success();
  }
  return backend_->copyIn(
      t.data, src, t.bytes(),
      "buffer '" + artifact_->program.buffers(static_cast<int>(index)).name() +
          "'");
}

bool Executor::hasInput(const std::string &name) const {
  for (const auto &b : artifact_->program.inputs())
    if (b.name() == name)
      return true;
  return false;
}

uint64_t Executor::scratchHeld(bool start) {
  uint64_t bytes = 0;
  return backend_->scratchSpan(start, bytes) ? bytes : 0;
}

Status Executor::enableProfiling() {
  if (profileScratch_.size() != steps_.size())
    profileScratch_.assign(steps_.size(), 0);
  profile_.assign(steps_.size(), 0.0);
  profileHost_.assign(steps_.size(), 0.0);
  profileIdle_.assign(steps_.size(), 0.0);
  profileRuns_ = 0;
  if (backend_->hostAddressable() || timers_.size() == 2 * steps_.size() + 2)
    return Status::success();
  std::vector<std::unique_ptr<Event>> timers(2 * steps_.size() + 2);
  for (auto &t : timers) {
    Status s = backend_->createTimingEvent(t);
    if (!s.ok())
      return Status::failure("profiling on " + backend_->name() + ": " +
                             s.error);
    if (!t) // no device clock: each instruction waited for
      return Status::success();
  }
  timers_ = std::move(timers);
  stepEnd_ = timers_.size() - 1;
  afterProfiledStep_ = false;
  return Status::success();
}

Status Executor::addDeviceTimes(const std::vector<size_t> &timed) {
  size_t before = otherStepEnd(); // the previous profiled step's end
  bool after = afterProfiledStep_;
  afterProfiledStep_ = true;
  for (size_t n = 0; n < timed.size(); ++n) {
    size_t i = timed[n];
    double busy = 0.0, idle = 0.0;
    Status s = backend_->elapsed(*timers_[2 * i], *timers_[2 * i + 1], busy);
    if (s.ok() && (n > 0 || after))
      s = backend_->elapsed(*timers_[n > 0 ? 2 * timed[n - 1] + 1 : before],
                            *timers_[2 * i], idle);
    if (!s.ok())
      return Status::failure("the profile's times of " +
                             describeInstruction(i) + ": " + s.error);
    profile_[i] += busy;
    profileIdle_[i] += idle;
  }
  return Status::success();
}

std::vector<Executor::ProfileEntry> Executor::profile() const {
  std::vector<ProfileEntry> out;
  for (size_t i = 0; i < profile_.size(); ++i) {
    int64_t elements = 0;
    for (uint32_t o : steps_[i].outputs)
      elements += buffers_[o].numel();
    const auto &attrs = artifact_->program.instructions(i).attrs();
    auto num = [&](const char *key) {
      auto it = attrs.find(key);
      return it == attrs.end() ? 0.0 : it->second.f();
    };
    out.push_back({steps_[i].op, steps_[i].loc, profile_[i], profileHost_[i],
                   profileIdle_[i], profileRuns_, elements, num("@flops"),
                   num("@bytes"), profileScratch_[i]});
  }
  return out;
}

std::vector<std::pair<std::string, TensorRef>> Executor::outputs() const {
  std::vector<std::pair<std::string, TensorRef>> out;
  const auto &outs = artifact_->program.outputs();
  for (int i = 0; i < outs.size(); ++i) {
    TensorRef t = buffers_[outs[i].buffer()];
    if (!outputCopies_.empty())
      t.data = const_cast<char *>(outputCopies_[static_cast<size_t>(i)].data());
    out.emplace_back(outs[i].name(), t);
  }
  return out;
}

} // namespace smprt
