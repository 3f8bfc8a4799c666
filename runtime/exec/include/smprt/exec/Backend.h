//===- Backend.h - Where a rank's program runs ------------------*- C++ -*-===//
//
// The executor is the same for every device: it lays the program's buffers
// out in one arena, loads the weights, decodes each instruction into a step
// and runs the steps in order. A Backend supplies what differs:
//
//   cpu    arena in host pages (mapped lazily), kernels of kernels/cpu run
//          synchronously, collectives through the host communicator (MPI).
//   cuda   arena from cudaMalloc, offload pool in pinned host memory,
//          kernels of kernels/cuda queued on one stream, collectives
//          through NCCL on that stream (exec/lib/cuda, built with nvcc).
//
// Backends are chosen by name from a BackendRegistry (BackendRegistry.h);
// streams and events (below) order work within and across streams.
//
// Buffers of a device arena are not host memory: the executor copies inputs
// in and outputs, checkpoints and exports out through the backend.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_EXEC_BACKEND_H
#define SMPRT_EXEC_BACKEND_H

#include "smp/base/OpSchema.h"
#include "smprt/Base.h"
#include "smprt/comm/Communicator.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smp::artifact {
class Instruction;
} // namespace smp::artifact

namespace smprt {

/// Which of a backend's streams a step's work queues on: the compute
/// stream, or one of two side streams, for communication (collectives,
/// pipeline messages) and for copies between the arena and the host pool
/// (offloading), so that they overlap the compute work that does not need
/// them. The executor orders the lanes with events (LaneHazards.h). Which
/// ops take a side lane is the op schema's (smp::base::opLane).
using Lane = smp::base::OpLane;

/// "compute", "communication", "copy".
const char *laneName(Lane lane);

/// A decoded instruction: runs (or, on a device, queues) its kernel on
/// arena views, on the stream of its lane (Backend::laneStream).
struct Step {
  std::string op, loc;
  std::function<Status()> run;
  std::vector<uint32_t> outputs;
  Lane lane = Lane::Compute;
  /// Reads the run's RandomState when it runs (a dropout that drops): what
  /// it queues differs from step to step, so a recorded step
  /// (Executor::enableGraphs) gives it the step's number in device memory.
  bool drawsRandom = false;
};

class Backend;

/// What smp.dropout's masks are drawn from in the coming run: the seed
/// (smpc --seed) and the step's number (from 0), set by the trainer before
/// each step; each decoded dropout step reads it when it runs.
struct RandomState {
  uint64_t seed = 0, step = 0;
  /// Where not null, a word of device memory holding `step` (low 32 bits)
  /// that the dropout kernels read instead (Backend::makeStepCounter): a
  /// step recorded as a graph draws each run's masks from it.
  const uint32_t *stepOnDevice = nullptr;
  /// An evaluation's run (Executor::runForward): every dropout keeps
  /// everything, as in PyTorch's model.eval().
  bool evaluating = false;
};

/// A point in the work of a stream. Stream::record marks it; Stream::wait
/// orders the work queued after it on another stream behind it. An event
/// never recorded is complete. Belongs to the backend that created it.
class Event {
public:
  virtual ~Event() = default;
  /// Whether the work before the recorded point has finished (never
  /// blocks; true on the CPU, where work finishes when it is issued).
  virtual bool query() = 0;
  /// Blocks the host until the work before the recorded point has
  /// finished; `what` names the wait in errors.
  virtual Status synchronize(const std::string &what) = 0;
  virtual const Backend &backend() const = 0;
};

/// An ordered queue of a backend's work: what is queued on one stream runs
/// in order; work on different streams may overlap unless ordered with
/// events (record on one, wait on the other). The CPU runs everything when
/// it is issued, so its streams are trivially in order and complete; on a
/// GPU a stream is a CUDA stream.
class Stream {
public:
  virtual ~Stream() = default;
  /// Marks in `event` the point after the work queued on this stream so
  /// far (replacing what it marked before).
  virtual Status record(Event &event) = 0;
  /// Makes the work queued on this stream from now on wait for the point
  /// `event` marks (on any stream of the same backend), without blocking
  /// the host.
  virtual Status wait(Event &event) = 0;
  /// Blocks the host until the work queued on this stream has finished.
  virtual Status synchronize(const std::string &what) = 0;
  virtual const Backend &backend() const = 0;
};

class Backend {
public:
  virtual ~Backend() = default;
  /// "cpu", "cuda:0", ... (for messages and `smprun` output).
  virtual std::string name() const = 0;
  /// Whether arena memory is host memory (the executor may read it).
  virtual bool hostAddressable() const = 0;
  /// What the user should know about how this run executed, a line each
  /// (smprun prints them at the end): e.g. the products whose cuBLASLt
  /// epilogue had no algorithm, so separate kernels ran.
  virtual std::vector<std::string> notes() const { return {}; }
  /// The units one device preset's peak counts, that this rank's kernels
  /// run on: the CPU backend's threads (the "cpu" preset's peak is one
  /// core's); a GPU is one device.
  virtual int computeUnits() const { return 1; }
  /// A device's memory as the driver counts it: the bytes in use on the
  /// whole device now (the arena, the libraries' workspaces and buffers,
  /// the context; other processes' too) and its total. False when the
  /// backend has no device memory of its own (the CPU).
  virtual bool deviceMemory(uint64_t &inUse, uint64_t &total) const {
    (void)inUse;
    (void)total;
    return false;
  }
  /// What this backend holds on its device, by whom: `allocated`, what
  /// allocate() holds now (the plan's arena); `workspace`, the libraries'
  /// fixed buffers (cuBLASLt's); `scratchHigh`, the most the kernels'
  /// transient scratches held at once, and `poolHigh`, the most memory
  /// their pool mapped (it keeps it), since the backend was made (spans
  /// included). What the device holds beyond these is the CUDA context
  /// and the loaded code; `graphHigh`, the most the captured steps' graphs
  /// mapped for their scratches (beginCapture). False where the backend
  /// has no device memory of its own.
  struct DeviceMemoryParts {
    uint64_t allocated = 0, workspace = 0, scratchHigh = 0, poolHigh = 0,
             graphHigh = 0;
  };
  virtual bool deviceMemoryParts(DeviceMemoryParts &out) const {
    (void)out;
    return false;
  }
  /// A span of the kernels' scratch (the executor's per-instruction
  /// figure): `start` begins one and gives the bytes held now; otherwise
  /// the most held at once since the span began. deviceMemoryParts still
  /// reports the whole run's. False without device memory.
  virtual bool scratchSpan(bool start, uint64_t &bytes) {
    (void)start;
    (void)bytes;
    return false;
  }

  /// Memory of the arena (`bytes` > 0); released by `release`.
  virtual Status allocate(uint64_t bytes, void **out) = 0;
  virtual void release(void *p, uint64_t bytes) = 0;
  /// Host memory the device copies to and from (offloaded activations):
  /// pinned for CUDA.
  virtual Status allocateHost(uint64_t bytes, void **out) = 0;
  virtual void releaseHost(void *p, uint64_t bytes) = 0;

  /// Synchronous copies between host memory and arena memory (after the
  /// queued work). `what` names the data for errors.
  virtual Status copyIn(void *dst, const void *src, size_t bytes,
                        const std::string &what) = 0;
  virtual Status copyOut(void *dst, const void *src, size_t bytes,
                         const std::string &what) = 0;

  /// The communicator the program's collectives use, made from the run's
  /// host communicator (collective over its ranks). The CPU backend uses
  /// `host` itself (out stays empty).
  virtual Status deviceCommunicator(Communicator &host,
                                    std::unique_ptr<Communicator> &out) = 0;

  /// Builds the step of one instruction, or fails for an unknown op or bad
  /// attributes. Communication steps capture `comm`, random ones (dropout)
  /// `random`, which must outlive the step.
  virtual Status decode(const smp::artifact::Instruction &inst,
                        const std::vector<TensorRef> &buffers,
                        Communicator &comm, const RandomState &random,
                        Step &step) = 0;

  /// Waits for the queued work and reports errors the kernels found in the
  /// data (an index out of range, ...). Nothing to wait for on the CPU.
  virtual Status synchronize(const std::string &what) = 0;

  /// The stream the compute steps are queued on, in program order; the
  /// host's copies (copyIn, copyOut) queue on it too.
  virtual Stream &computeStream() = 0;
  /// The stream of a step's lane (Step::lane): the backend decides which
  /// steps go to a side stream, and their work queues there. The CPU has
  /// one lane: its steps finish as they are issued.
  virtual Stream &laneStream(Lane lane) {
    (void)lane;
    return computeStream();
  }
  /// Another stream of this device, e.g. for communication or offload
  /// copies overlapped with compute (ordered against it with events).
  virtual Status createStream(std::unique_ptr<Stream> &out) = 0;
  /// An event of this device, for Stream::record and Stream::wait.
  virtual Status createEvent(std::unique_ptr<Event> &out) = 0;

  /// An event whose recorded points the device's own clock times
  /// (elapsed()): how a device's work is profiled without waiting for each
  /// step (Executor::enableProfiling). `out` stays empty where the host's
  /// clock times the work: the CPU, whose steps finish as they are issued.
  virtual Status createTimingEvent(std::unique_ptr<Event> &out) {
    out.reset();
    return Status::success();
  }
  /// The device's seconds from the point `from` marks to the one `to`
  /// marks: two timing events of this backend, recorded, their work
  /// finished.
  virtual Status elapsed(Event &from, Event &to, double &seconds) {
    (void)from;
    (void)to;
    seconds = 0.0;
    return Status::failure(name() + " has no device clock to time events");
  }

  /// A step's work recorded once and queued again as a whole (a CUDA
  /// graph): launch() queues on the compute stream what the capture
  /// recorded, with the operands it was recorded with.
  class Graph {
  public:
    virtual ~Graph() = default;
    virtual Status launch() = 0;
  };
  /// Whether beginCapture() can record a step (a GPU's).
  virtual bool capturesSteps() const { return false; }
  /// A word of device memory (made once, this backend's) that a recorded
  /// step's dropout reads the step's number from (RandomState::
  /// stepOnDevice), and the write of `step` into it, queued on the compute
  /// stream before the step's work: a graph draws each step's masks.
  virtual Status makeStepCounter(const uint32_t *&word) {
    word = nullptr;
    return Status::failure(name() + " records no steps");
  }
  virtual Status writeStepCounter(uint64_t step) {
    (void)step;
    return Status::failure(name() + " records no steps");
  }
  /// From now until endCapture(), the work queued on the compute stream,
  /// and on the lanes' streams ordered after it, is recorded, not run;
  /// nothing may wait for the device meanwhile.
  virtual Status beginCapture() {
    return Status::failure(name() + " cannot record a step as a graph");
  }
  /// The recorded work as a graph; on failure (something waited for the
  /// device during the capture) `out` is null, the error says what was
  /// refused, and nothing of the capture ran.
  virtual Status endCapture(std::unique_ptr<Graph> &out) {
    out.reset();
    return Status::failure(name() + " cannot record a step as a graph");
  }
};

/// The CPU backend (always built; the executor's default).
std::unique_ptr<Backend> makeCpuBackend();

} // namespace smprt

#endif // SMPRT_EXEC_BACKEND_H
