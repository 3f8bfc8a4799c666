//===- CudaBackend.cpp - Arena, copies and kernels on one GPU -------------===//
//
// One rank, one GPU, one kernel context (a stream, cuBLASLt, the device
// error flag). The compute steps queue on the context's stream in program
// order. Two side streams, non-blocking and at the device's highest
// priority (their few blocks are scheduled ahead of the compute kernels'
// waiting ones), take the other lanes (Backend.h's Lane): communication,
// where the NCCL communicator and its groups queue every collective and
// pipeline message (an eager send is staged there and sent in one NCCL
// group with the communicator's next operation: NcclCommunicator.h), and
// the offload pool's copies. The executor orders the three with events
// (LaneHazards.h). The arena is one cudaMalloc; the offload pool is pinned
// host memory, which the copies reach with cudaMemcpyAsync. The executor
// copies weights and inputs in and outputs out synchronously on the
// compute stream, between steps. Timing events (createTimingEvent,
// elapsed) time the steps on the GPU's clock for the executor's profile.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaBackend.h"
#include "smprt/exec/BackendRegistry.h"

#include "smp/kernels/cuda/Kernels.h"
#include "smprt/comm/NcclCommunicator.h"

#include <cuda_runtime_api.h>

namespace smprt {
namespace {

namespace k = smp::kernels::cuda;

Status cudaFailure(const std::string &what, cudaError_t e) {
  return Status::failure(what + ": " + cudaGetErrorName(e) + " (" +
                         cudaGetErrorString(e) + ")");
}

/// A cudaEvent_t of one device: timing off (createEvent) or on
/// (createTimingEvent, for Backend::elapsed).
class CudaEvent final : public Event {
public:
  CudaEvent(const Backend &backend, cudaEvent_t event, bool timing = false)
      : backend_(backend), event_(event), timing_(timing) {}
  ~CudaEvent() override { cudaEventDestroy(event_); }
  bool query() override { return cudaEventQuery(event_) == cudaSuccess; }
  Status synchronize(const std::string &what) override {
    cudaError_t e = cudaEventSynchronize(event_);
    return e == cudaSuccess ? Status::success()
                            : cudaFailure(what + " on " + backend_.name(), e);
  }
  const Backend &backend() const override { return backend_; }
  cudaEvent_t event() const { return event_; }
  bool timing() const { return timing_; }

private:
  const Backend &backend_;
  cudaEvent_t event_;
  bool timing_;
};

/// `event` as a CudaEvent when `backend` made it, else null (events order
/// and time the streams of one backend only).
const CudaEvent *cudaEventOf(const Backend &backend, const Event &event) {
  return &event.backend() == &backend ? static_cast<const CudaEvent *>(&event)
                                      : nullptr;
}

/// A cudaStream_t of one device: the kernel context's (not owned), or one
/// made by createStream (non-blocking, destroyed with this object).
class CudaStream final : public Stream {
public:
  CudaStream(const Backend &backend, cudaStream_t stream, bool owned)
      : backend_(backend), stream_(stream), owned_(owned) {}
  ~CudaStream() override {
    if (owned_)
      cudaStreamDestroy(stream_);
  }
  Status record(Event &event) override {
    const CudaEvent *e = cudaEventOf(backend_, event);
    if (!e)
      return foreign(event, "record");
    return check(cudaEventRecord(e->event(), stream_), "recording an event");
  }
  Status wait(Event &event) override {
    const CudaEvent *e = cudaEventOf(backend_, event);
    if (!e)
      return foreign(event, "wait for");
    return check(cudaStreamWaitEvent(stream_, e->event(), 0),
                 "waiting for an event");
  }
  Status synchronize(const std::string &what) override {
    return check(cudaStreamSynchronize(stream_), what);
  }
  const Backend &backend() const override { return backend_; }
  cudaStream_t stream() const { return stream_; }

private:
  Status foreign(const Event &event, const char *verb) const {
    return Status::failure(std::string("a stream of ") + backend_.name() +
                           " cannot " + verb +
                           " an event of another "
                           "backend (" +
                           event.backend().name() + ")");
  }
  Status check(cudaError_t e, const std::string &what) const {
    return e == cudaSuccess ? Status::success()
                            : cudaFailure(what + " on " + backend_.name(), e);
  }
  const Backend &backend_;
  cudaStream_t stream_;
  bool owned_;
};

/// The lane an instruction's op runs on (the op schema's, see the file's
/// comment).
Lane laneOf(const std::string &op) {
  const smp::base::OpSchema *schema = smp::base::findOp(op);
  return schema ? smp::base::opLane(schema->id) : Lane::Compute;
}

/// A non-blocking stream at the device's highest priority.
cudaError_t createSideStream(cudaStream_t &out) {
  int least = 0, greatest = 0;
  cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  if (e == cudaSuccess)
    e = cudaStreamCreateWithPriority(&out, cudaStreamNonBlocking, greatest);
  return e;
}

class CudaBackend final : public Backend {
public:
  CudaBackend(int device, k::Context *ctx, cudaStream_t comm, cudaStream_t copy)
      : device_(device), ctx_(ctx), compute_(*this, k::stream(*ctx), false),
        comm_(*this, comm, true), copy_(*this, copy, true) {}
  ~CudaBackend() override {
    if (stepDevice_ || stepHost_) {
      cudaSetDevice(device_);
      cudaFree(stepDevice_);
      cudaFreeHost(stepHost_);
    }
    k::destroyContext(ctx_);
  }

  std::string name() const override {
    return "cuda:" + std::to_string(device_);
  }
  bool hostAddressable() const override { return false; }
  std::vector<std::string> notes() const override {
    std::vector<std::string> out;
    for (const std::string &p : k::epilogueFallbacks(*ctx_))
      out.push_back("cuBLASLt has no algorithm for the " + p +
                    " on this device: its separate kernels ran");
    for (const std::string &t : k::gemmTuning(*ctx_))
      out.push_back("SMP_CUBLASLT_TUNE: " + t);
    if (std::string f = k::gemmTuningFileNote(*ctx_); !f.empty())
      out.push_back("SMP_CUBLASLT_TUNE_FILE " + f);
    return out;
  }
  bool deviceMemory(uint64_t &inUse, uint64_t &total) const override {
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaSetDevice(device_) != cudaSuccess ||
        cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    inUse = totalBytes - freeBytes;
    total = totalBytes;
    return true;
  }

  bool deviceMemoryParts(DeviceMemoryParts &out) const override {
    k::DeviceMemoryHeld held;
    if (!k::memoryHeld(*ctx_, held).ok())
      return false;
    out.allocated = allocated_;
    out.workspace = held.workspace;
    out.scratchHigh = std::max(held.scratchHigh, scratchHighBefore_);
    out.poolHigh = std::max(held.poolHigh, poolHighBefore_);
    out.graphHigh = held.graphHigh;
    return true;
  }
  bool scratchSpan(bool start, uint64_t &bytes) override {
    k::DeviceMemoryHeld held;
    if (!k::memoryHeld(*ctx_, held).ok())
      return false;
    if (start) {
      // The pool's high-water marks restart: keep the run's so far.
      scratchHighBefore_ = std::max(scratchHighBefore_, held.scratchHigh);
      poolHighBefore_ = std::max(poolHighBefore_, held.poolHigh);
      if (!k::resetScratchHigh(*ctx_).ok() || !k::memoryHeld(*ctx_, held).ok())
        return false;
    }
    bytes = held.scratchHigh;
    return true;
  }

  Status allocate(uint64_t bytes, void **out) override {
    cudaError_t e = cudaMalloc(out, bytes);
    if (e == cudaSuccess)
      allocated_ += bytes;
    if (e != cudaSuccess) {
      size_t freeBytes = 0, total = 0;
      cudaMemGetInfo(&freeBytes, &total);
      cudaGetLastError();
      return Status::failure(
          "cannot allocate an arena of " + std::to_string(bytes) +
          " bytes on " + name() + " (" + std::to_string(freeBytes) + " of " +
          std::to_string(total) + " bytes free): " + cudaGetErrorString(e) +
          ". The plan needs less per device with recomputation "
          "(--checkpoint-activations full), more --microbatches, ZeRO "
          "(--zero-stage 2 or 3) or more devices; smpc compile --devices N "
          "--cluster (a preset, or a JSON file with the device's memory_gb) "
          "chooses a plan that fits");
    }
    return Status::success();
  }
  void release(void *p, uint64_t bytes) override {
    cudaFree(p);
    allocated_ -= bytes;
  }
  Status allocateHost(uint64_t bytes, void **out) override {
    cudaError_t e = cudaMallocHost(out, bytes);
    return e == cudaSuccess
               ? Status::success()
               : cudaFailure("cannot pin " + std::to_string(bytes) +
                                 " bytes of host memory for offloading",
                             e);
  }
  void releaseHost(void *p, uint64_t) override { cudaFreeHost(p); }

  Status copyIn(void *dst, const void *src, size_t bytes,
                const std::string &what) override {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice,
                "copying " + what + " to " + name());
  }
  Status copyOut(void *dst, const void *src, size_t bytes,
                 const std::string &what) override {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost,
                "copying " + what + " from " + name());
  }

  Status deviceCommunicator(Communicator &host,
                            std::unique_ptr<Communicator> &out) override {
    // NCCL's start-up (ncclCommInitRank waits for every rank) and each
    // collective are bounded by the host communicator's deadline
    // (smprun --timeout), not a fixed one.
    NcclOptions options;
    if (host.timeoutSeconds() > 0)
      options.timeoutSeconds = host.timeoutSeconds();
    return createNcclCommunicator(host, comm_.stream(), options, out);
  }

  Status decode(const smp::artifact::Instruction &inst,
                const std::vector<TensorRef> &buffers, Communicator &comm,
                const RandomState &random, Step &step) override {
    Status s = decodeCudaInstruction(inst, buffers, comm, random, step);
    if (!s.ok())
      return s;
    // Each step queues on this backend's context, whichever thread runs it,
    // on its lane's stream.
    step.lane = laneOf(step.op);
    cudaStream_t lane = step.lane == Lane::Compute ? nullptr
                        : step.lane == Lane::Comm  ? comm_.stream()
                                                   : copy_.stream();
    step.run = [run = std::move(step.run), ctx = ctx_, lane] {
      if (k::currentContext() != ctx)
        k::setCurrentContext(ctx);
      if (!lane)
        return run();
      cudaStream_t compute = k::exchangeStream(*ctx, lane);
      Status s = run();
      k::exchangeStream(*ctx, compute);
      return s;
    };
    return Status::success();
  }

  Status synchronize(const std::string &what) override {
    Status s = k::synchronize(*ctx_);
    return s.ok() ? s
                  : Status::failure(what + " on " + name() + ": " + s.error);
  }

  Stream &computeStream() override { return compute_; }
  Stream &laneStream(Lane lane) override {
    return lane == Lane::Comm ? comm_ : lane == Lane::Copy ? copy_ : compute_;
  }

  Status createStream(std::unique_ptr<Stream> &out) override {
    cudaStream_t stream = nullptr;
    Status s = onDevice("creating a stream", [&] {
      return cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    });
    if (s.ok())
      out = std::make_unique<CudaStream>(*this, stream, true);
    return s;
  }

  Status createEvent(std::unique_ptr<Event> &out) override {
    cudaEvent_t event = nullptr;
    Status s = onDevice("creating an event", [&] {
      return cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    });
    if (s.ok())
      out = std::make_unique<CudaEvent>(*this, event);
    return s;
  }

  Status createTimingEvent(std::unique_ptr<Event> &out) override {
    cudaEvent_t event = nullptr;
    Status s = onDevice("creating a timing event", [&] {
      return cudaEventCreateWithFlags(&event, cudaEventDefault);
    });
    if (s.ok())
      out = std::make_unique<CudaEvent>(*this, event, /*timing=*/true);
    return s;
  }

  Status elapsed(Event &from, Event &to, double &seconds) override {
    auto timer = [&](Event &e) -> const CudaEvent * {
      const CudaEvent *c = cudaEventOf(*this, e);
      return c && c->timing() ? c : nullptr;
    };
    const CudaEvent *a = timer(from), *b = timer(to);
    if (!a || !b)
      return Status::failure("timing two events on " + name() +
                             ": not timing events of this backend");
    float ms = 0.0f;
    Status s = onDevice("timing two events", [&] {
      return cudaEventElapsedTime(&ms, a->event(), b->event());
    });
    seconds = ms * 1e-3;
    return s;
  }

  bool capturesSteps() const override { return true; }
  Status makeStepCounter(const uint32_t *&word) override {
    word = nullptr;
    if (!stepDevice_ || !stepHost_) {
      // A pair half made (the other allocation failed) is completed here:
      // writeStepCounter writes through both.
      Status s = onDevice("making the step counter", [&] {
        cudaError_t e =
            stepDevice_ ? cudaSuccess
                        : cudaMalloc(reinterpret_cast<void **>(&stepDevice_),
                                     sizeof(uint32_t));
        if (e == cudaSuccess && !stepHost_)
          e = cudaMallocHost(reinterpret_cast<void **>(&stepHost_),
                             sizeof(uint32_t));
        return e;
      });
      if (!s.ok())
        return s;
    }
    word = stepDevice_;
    return Status::success();
  }
  /// The previous step was waited for at its end: the pinned word is free
  /// to change, and the copy runs before the step's work on the stream.
  Status writeStepCounter(uint64_t step) override {
    if (!stepDevice_ || !stepHost_)
      return Status::failure("the step counter of " + name() + " was not made");
    *stepHost_ = static_cast<uint32_t>(step);
    k::setCurrentContext(ctx_);
    cudaError_t e = cudaMemcpyAsync(stepDevice_, stepHost_, sizeof(uint32_t),
                                    cudaMemcpyHostToDevice, k::stream(*ctx_));
    return e == cudaSuccess
               ? Status::success()
               : cudaFailure("writing the step counter on " + name(), e);
  }
  Status beginCapture() override {
    k::setCurrentContext(ctx_);
    Status s = k::beginCapture(*ctx_);
    return s.ok() ? s
                  : Status::failure("capturing the step on " + name() + ": " +
                                    s.error);
  }
  Status endCapture(std::unique_ptr<Graph> &out) override {
    out.reset();
    k::Graph *graph = nullptr;
    Status s = k::endCapture(*ctx_, graph);
    if (!s.ok())
      return Status::failure("capturing the step on " + name() + ": " +
                             s.error);
    out = std::make_unique<CudaGraph>(ctx_, graph);
    return s;
  }

private:
  /// A captured step (kernels' Graph), launched on the context's stream.
  class CudaGraph final : public Graph {
  public:
    CudaGraph(k::Context *ctx, k::Graph *graph) : ctx_(ctx), graph_(graph) {}
    ~CudaGraph() override { k::destroyGraph(graph_); }
    Status launch() override {
      k::setCurrentContext(ctx_);
      return k::launchGraph(*ctx_, *graph_);
    }

  private:
    k::Context *ctx_;
    k::Graph *graph_;
  };

  /// Runs the CUDA call `call` with this backend's device current.
  template <typename Call> Status onDevice(const std::string &what, Call call) {
    cudaError_t e = cudaSetDevice(device_);
    if (e == cudaSuccess)
      e = call();
    return e == cudaSuccess ? Status::success()
                            : cudaFailure(what + " on " + name(), e);
  }

  /// After the queued work: the copy sees what the steps wrote.
  Status copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
              const std::string &what) {
    if (!bytes)
      return Status::success();
    k::setCurrentContext(ctx_);
    cudaStream_t stream = k::stream(*ctx_);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, stream);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(stream);
    return e == cudaSuccess ? Status::success() : cudaFailure(what, e);
  }

  int device_;
  k::Context *ctx_;
  // The step counter (makeStepCounter): the device's word, its pinned copy.
  uint32_t *stepDevice_ = nullptr, *stepHost_ = nullptr;
  uint64_t allocated_ = 0; // what allocate() holds
  // The pool's high-water marks before scratchSpan last restarted them.
  uint64_t scratchHighBefore_ = 0, poolHighBefore_ = 0;
  CudaStream compute_;     // the kernel context's stream
  CudaStream comm_, copy_; // the side streams (the lanes' own)
};

} // namespace

Status makeCudaBackend(int device, int localRank,
                       std::unique_ptr<Backend> &out) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return Status::failure(
        "--device cuda: no CUDA device is usable here" +
        std::string(e != cudaSuccess
                        ? std::string(" (") + cudaGetErrorString(e) + ")"
                        : std::string()));
  if (device < 0) {
    // One rank per device: NCCL refuses two ranks on one GPU ("Duplicate
    // GPU detected"), after every rank has started; say so first.
    if (localRank >= count)
      return Status::failure(
          "--device cuda: this is rank " + std::to_string(localRank + 1) +
          " on its node but the node shows " + std::to_string(count) +
          " CUDA device(s), and each rank needs its own: start at most " +
          std::to_string(count) +
          " rank(s) per node (smprun -n, mpirun --npernode) or make more "
          "devices visible (CUDA_VISIBLE_DEVICES)");
    device = localRank;
  }
  if (device >= count)
    return Status::failure("--device cuda:" + std::to_string(device) +
                           ": only " + std::to_string(count) +
                           " CUDA device(s) are visible");
  k::Context *ctx = nullptr;
  Status s = k::createContext(device, ctx);
  if (!s.ok())
    return Status::failure("cuda:" + std::to_string(device) + ": " + s.error);
  k::setCurrentContext(ctx);
  cudaStream_t comm = nullptr, copy = nullptr;
  cudaError_t e2 = createSideStream(comm);
  if (e2 == cudaSuccess && (e2 = createSideStream(copy)) != cudaSuccess)
    cudaStreamDestroy(comm);
  if (e2 != cudaSuccess) {
    k::destroyContext(ctx);
    return cudaFailure("cuda:" + std::to_string(device) +
                           ": creating the communication and copy streams",
                       e2);
  }
  out = std::make_unique<CudaBackend>(device, ctx, comm, copy);
  return Status::success();
}

void registerCudaBackend(BackendRegistry &registry) {
  registry.add("cuda", /*takesDevice=*/true, makeCudaBackend);
}

} // namespace smprt
