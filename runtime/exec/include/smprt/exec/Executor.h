//===- Executor.h - Runs one rank's program ---------------------*- C++ -*-===//

#ifndef SMPRT_EXEC_EXECUTOR_H
#define SMPRT_EXEC_EXECUTOR_H

#include "smprt/Base.h"
#include "smprt/comm/Communicator.h"
#include "smprt/exec/Arena.h"
#include "smprt/exec/Artifact.h"
#include "smprt/exec/Backend.h"
#include "smprt/exec/LaneHazards.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smprt {

class Executor {
public:
  Executor();
  ~Executor();
  /// The communicator of this rank, for the program's communication steps
  /// and the trainer (rank-0-only output, checkpoints). Call it before
  /// init(): the steps capture it when they are decoded. Without one (or
  /// with nullptr) the executor uses localCommunicator(). It must outlive
  /// the executor.
  void setCommunicator(Communicator *comm) {
    comm_ = comm ? comm : &localCommunicator();
  }
  Communicator &communicator() const { return *comm_; }
  /// Where the program runs; the CPU when not set. Call it before init();
  /// the backend must outlive the executor.
  void setBackend(Backend *backend);
  Backend &backend() const { return *backend_; }

  /// Allocates the arena and loads the weights of a validated artifact.
  Status init(const Artifact &artifact);

  /// Copies graph input `name` into its buffer; the dtype and shape must be
  /// exactly the compiled ones.
  /// Whether this rank's program takes the input `name` (the stages of a
  /// pipeline take different inputs).
  bool hasInput(const std::string &name) const;
  Status setInput(const std::string &name, const TensorRef &value,
                  const std::string &source);
  /// Runs every instruction once. Fails if an input was not set.
  Status run();
  /// Runs the instructions of the forward that computes the training
  /// step's loss (those marked `forward`) with every dropout off, as
  /// PyTorch's model.eval(): the loss output of a held-out batch, nothing
  /// trained (smprun --eval-data). The other outputs keep their values.
  Status runForward();
  /// The seed and step number the next run's dropout masks are drawn from
  /// (0, 0 until set).
  /// A recorded step (enableGraphs) holds the seed it was recorded with:
  /// another seed records the next step again.
  void setRandomState(uint64_t seed, uint64_t step);
  /// Views of the graph outputs in host memory (valid until the next run).
  std::vector<std::pair<std::string, TensorRef>> outputs() const;
  /// Copies buffer `index` (all its bytes) to host memory at `dst`, or
  /// host memory at `src` into it: how checkpoints and exports reach a
  /// device's arena.
  Status readBuffer(uint32_t index, void *dst) const;
  Status writeBuffer(uint32_t index, const void *src);

  /// Times each instruction of the training runs from now on (after
  /// init(); again: the sums restart). On a backend with a device clock
  /// (Backend::createTimingEvent: a GPU) two timing events bracket each
  /// instruction on the compute stream and nothing waits: the step runs as
  /// it would unprofiled, and the device's times are read once the step
  /// has finished. Elsewhere the host's wall time of each instruction (a
  /// device without a clock: each instruction waited for).
  Status enableProfiling();
  struct ProfileEntry {
    std::string op, loc;
    /// Summed over the runs: the device's time from the instruction's
    /// first queued work to its last (including any wait for its own
    /// launches) where profileClock() is "device", else the host's.
    double seconds;
    double hostSeconds; // the host's time issuing it (seconds on the CPU)
    /// "device" only: the device's time between the previous instruction's
    /// end and this one's start, with nothing queued (the host was behind);
    /// for the step's first instruction, since the previous profiled
    /// step's end (its waits, the next batch's inputs).
    double idleSeconds;
    int64_t calls;       // the runs
    int64_t elements;    // of its outputs (for scaling to other shapes)
    double flops, bytes; // the compiler's cost of one call (0: unknown)
    /// On a backend with device memory of its own: the most its kernels
    /// held at once in transient scratch beyond what was held before it
    /// (Backend::scratchSpan), measured in the first profiled step
    /// since init (the same every step); 0 elsewhere.
    uint64_t scratchBytes = 0;
  };
  std::vector<ProfileEntry> profile() const;
  /// Which clock the profile's `seconds` are of: "device" or "host".
  const char *profileClock() const {
    return timers_.empty() ? "host" : "device";
  }

  /// Checks every float output of every instruction as it runs (smprun
  /// --check-finite; PyTorch's torch.autograd.detect_anomaly): run() fails
  /// at the first instruction that writes a NaN, naming it, its node, the
  /// buffer that brought the NaN in (or that its inputs held none), and
  /// the first infinity written before it in that run. Each output is read
  /// back: for finding where a NaN starts, not for training.
  void enableFiniteChecks() { checkFinite_ = true; }
  bool finiteChecks() const { return checkFinite_; }
  /// With finite checks: the first instruction of the last run that wrote
  /// an infinity from finite inputs, described ("" if none).
  const std::string &firstInfinity() const { return firstInfinity_; }

  /// Whether the side lanes' steps (communication, offload copies: see
  /// LaneHazards.h) may run while later compute steps run (the default),
  /// or each is waited for by the compute stream at once (smprun
  /// --no-overlap; also while profiling or checking outputs, which read
  /// each instruction's results and time it alone). The numbers are the
  /// same either way.
  void setOverlap(bool overlap) { overlap_ = overlap; }
  bool overlap() const { return overlap_; }

  /// Runs each training step as one recorded graph from the second on
  /// (smprun --cuda-graph; Backend::beginCapture): the first training run
  /// queues its instructions one by one (and the libraries do their
  /// first-use work: cuBLASLt's algorithm choices, the kernels' modules),
  /// the second records them and launches the record, each later one
  /// launches it again: one call a step where each instruction made one to
  /// a few. The numbers are the same: the same work on the same buffers.
  /// Evaluations, profiled runs, finite checks and --no-overlap issue the
  /// instructions one by one. Fails, saying why and what to run instead,
  /// where a step cannot be recorded: a backend without graphs (the CPU).
  /// Collectives and a pipeline's messages are recorded on the
  /// communication stream (NCCL captures them; every rank records the
  /// same run), the sends still posted at the end queued into the record,
  /// and the step's end waits for the launch through that stream, under
  /// the communicator's deadline as before. Dropout reads the step's number
  /// from a device word written before each training run
  /// (Backend::makeStepCounter), so that a recorded step draws each step's
  /// own masks. After init(), which turns it off.
  Status enableGraphs();
  bool graphs() const { return graphs_; }
  /// Whether the step has been recorded (the runs launch it).
  bool graphRecorded() const { return graph_ != nullptr; }

  const Artifact &artifact() const { return *artifact_; }
  /// Views of every buffer (index = the program's buffer index), in the
  /// backend's memory: host memory only if backend().hostAddressable().
  const std::vector<TensorRef> &buffers() const { return buffers_; }
  uint64_t arenaBytes() const { return arena_.size(); }
  uint64_t highWaterBytes() const { return arena_.highWaterBytes(); }
  /// Bytes of the host pool (offloaded activations).
  uint64_t hostArenaBytes() const {
    return artifact_ ? artifact_->program.host_arena_bytes() : 0;
  }

private:
  Status loadWeights(const Artifact &artifact);
  Status runSteps(bool forwardOnly);
  /// How runSteps queues its instructions.
  struct RunMode {
    bool forwardOnly = false, profiling = false, timed = false,
         waitEach = false, serial = false, measureScratch = false;
  };
  /// Queues every instruction of the run (issue()), timing, checking and
  /// measuring each as `mode` says; `timedSteps` gets those timed.
  Status issueSteps(const RunMode &mode, std::vector<size_t> &timedSteps);
  /// Records the training step as a graph (enableGraphs) into graph_.
  Status recordGraph(const RunMode &mode);
  /// Launches graph_ (and orders the communication stream after it).
  Status launchGraph();
  /// Queues the posted sends into the record and joins their stream back.
  Status queueSends();
  /// Queues step i on its lane's stream, ordered against the other lanes
  /// (LaneHazards.h); `serial`: a side step is waited for at once.
  Status issue(size_t i, bool serial);
  /// Makes the compute stream wait for the side steps still pending.
  Status joinLanes();
  /// The instructions' byte ranges and the side steps' events (init).
  Status prepareLanes();
  /// --check-finite after instruction i (FiniteChecks.cpp).
  Status checkFiniteOutputs(size_t i);
  /// Buffer `index` in host memory: a view of the arena where the backend's
  /// memory is the host's, else of a copy made in `copy`.
  Status hostView(uint32_t index, std::string &copy, TensorRef &view) const;
  /// "instruction 7 of 73, 'mul' (node 'n')".
  std::string describeInstruction(size_t i) const;

  Communicator *comm_ = &localCommunicator();
  Backend *backend_;
  std::unique_ptr<Backend> ownBackend_; // the CPU, when none was set
  /// The communicator of the program's collectives: the backend's (NCCL on
  /// a GPU) or comm_ itself.
  std::unique_ptr<Communicator> deviceComm_;
  Communicator *programComm_ = nullptr;
  /// Sub-communicators of the rank groups the program's collectives use.
  std::vector<std::unique_ptr<Communicator>> groups_;
  const Artifact *artifact_ = nullptr;
  Arena arena_;
  Arena hostArena_; // offloaded activations
  std::vector<TensorRef> buffers_;
  std::vector<Step> steps_;
  RandomState random_; // read by the dropout steps
  std::vector<bool> inputSet_;
  /// Host copies of the outputs when the arena is not host memory.
  std::vector<std::string> outputCopies_;
  /// The device's times of the instructions timed in this run (their
  /// indices in `timed`), added to profile_ and profileIdle_.
  Status addDeviceTimes(const std::vector<size_t> &timed);
  /// The step-end timing event that is not timers_[stepEnd_].
  size_t otherStepEnd() const {
    return stepEnd_ == timers_.size() - 1 ? timers_.size() - 2
                                          : timers_.size() - 1;
  }

  std::vector<double> profile_; // empty unless profiling
  std::vector<double> profileHost_, profileIdle_;
  /// Each instruction's scratch (ProfileEntry::scratchBytes), measured
  /// once: in the first profiled step, before the sums that follow
  /// (--profile-warmup's) restart.
  std::vector<uint64_t> profileScratch_;
  bool scratchMeasured_ = false;
  /// The kernels' scratch held now (`start`: a span begins,
  /// Backend::scratchSpan) or at most since; 0 without device memory.
  uint64_t scratchHeld(bool start);
  /// With a device clock: each instruction's (start, end) timing events,
  /// then two for the steps' ends, a profiled step's end marked in
  /// timers_[stepEnd_] (the other holds the previous step's, if
  /// afterProfiledStep_).
  std::vector<std::unique_ptr<Event>> timers_;
  size_t stepEnd_ = 0;
  bool afterProfiledStep_ = false;
  int64_t profileRuns_ = 0;
  bool checkFinite_ = false;
  std::string firstInfinity_;
  bool overlap_ = true;
  bool graphs_ = false;
  bool stepCounter_ = false; // a dropout step reads random_.stepOnDevice
  int64_t graphRuns_ = 0;    // training runs since enableGraphs
  std::unique_ptr<Backend::Graph> graph_;
  /// Recorded on the compute stream after each launch of a step that
  /// communicates; the communication stream waits for it, so that the
  /// communicator's synchronize() watches the launch under its deadline.
  std::unique_ptr<Event> graphDone_;
  /// Recorded on the communication stream after the sends queued at the
  /// end of a record; the compute stream waits for it (joined back).
  std::unique_ptr<Event> sendsQueued_;
  /// What each instruction reads and writes, and each side step's end and
  /// the compute stream's point before it (their events; null for compute
  /// steps).
  std::vector<Access> access_;
  LaneHazards hazards_;
  std::vector<std::unique_ptr<Event>> laneDone_;
  std::unique_ptr<Event> laneStart_;
};

} // namespace smprt

#endif // SMPRT_EXEC_EXECUTOR_H
