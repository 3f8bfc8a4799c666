//===- Streams.h - The emulator's streams and deferred work -----*- C++ -*-===//
//
// Where the emulated runtime, cuBLASLt and NCCL issue their work: a stream
// runs it when it is issued (the default), or, under SMP_CUDAEMU_DEFER,
// a deferred stream queues it until something needs it (Streams.cpp), so
// that a missing cudaStreamWaitEvent between two streams reads stale
// data. Private to kernels/cudaemu.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_CUDAEMU_STREAMS_H
#define SMP_CUDAEMU_STREAMS_H

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace smp::cudaemu {

/// The current device of the calling thread (cudaSetDevice's).
int emuCurrentDevice();

/// A point in a stream's work: the stream's serial and the position of an
/// item on it (1 the first item issued). Stream 0: nothing to wait for.
struct StreamPoint {
  uint64_t stream = 0, position = 0;
};

/// How an item is issued.
enum class WorkKind {
  Normal,    // queued on a deferred stream, else run now
  Immediate, // run now, after the work before it on its stream
  Ordered,   // as Normal; runs after every Ordered item of its key issued
             // before it (WorkOrder::key, NCCL's communicator: its ranks
             // exchange in issue order)
  Lazy,      // as Ordered, but queued on any stream, which then queues the
             // work after it too, until something needs it (a send's wait
             // for its receive: on a GPU it holds its stream, not the host)
};

/// What an item waits for beside its stream's earlier work.
struct WorkOrder {
  /// Ordered and Lazy items run after the Ordered and Lazy items of the
  /// same key issued before them (NCCL's: the communicator, whose ranks
  /// exchange in the order they issue; a GPU runs a communicator's
  /// operations one after another, those of two communicators apart).
  uintptr_t key = 0;
  /// Ordered: whether the item may wait for another process (a group with
  /// a receive or a collective); one that cannot may run while the host
  /// waits (progressQueued).
  bool mayWait = true;
  /// Lazy: whether it would run now without waiting (a send's receive
  /// posted); none: only when something needs it.
  std::function<bool()> ready;
  /// Normal: the point a cudaStreamWaitEvent item waits for.
  StreamPoint waitsFor;
};

/// What became of an issued item: where it sits, and whether it has run.
struct Issued {
  StreamPoint at;
  bool ran = false;
};

/// Issues `work` on `stream` (0, cudaStreamLegacy or cudaStreamPerThread:
/// the current device's null stream). The legacy null stream's ordering
/// holds: work on it runs after the work issued before it on every
/// blocking stream of its device, and theirs after its.
Issued enqueueWork(cudaStream_t stream, std::function<void()> work,
                   WorkKind kind = WorkKind::Normal, WorkOrder order = {});
/// The point of the last item issued on `stream` (what an event recorded
/// there now would stand for).
StreamPoint streamTail(cudaStream_t stream);
/// Queues on `stream` a wait for `point` (cudaStreamWaitEvent's).
void enqueueWait(cudaStream_t stream, StreamPoint point);
/// Runs the work of `point`'s stream up to and including it.
void runUpTo(StreamPoint point);
/// Runs every Ordered item issued so far (NCCL's, before a communicator
/// goes).
void runOrdered();
/// While this process waits for another (a receive's message, a send's
/// receive posted): runs the queued work that waits for nothing, on every
/// stream not running (a deferred one's too, SMP_CUDAEMU_DEFER: slow, it
/// still runs while the host waits for another process): a Lazy item
/// whose `ready` says so, then the work behind it (kernels, copies, Ordered
/// items that cannot wait, waits for work that has run), as a GPU runs a
/// stream whose send completed while the host does something else (a send
/// on one communicator's stream behind a send whose receive was posted,
/// while the host waits for a message on another). Whether it ran
/// anything.
bool progressQueued();
/// Runs everything queued on the current device's null stream and its
/// blocking streams (before a synchronous copy or memset).
void runLegacy();
/// Runs everything queued on every stream.
void runAll();

/// A piece of work a stream capture recorded (cudaStreamBeginCapture to
/// cudaStreamEndCapture), as it was issued.
struct CapturedWork {
  std::function<void()> work;
  WorkKind kind = WorkKind::Normal;
  WorkOrder order;
};

/// What a capture made (a cudaGraph_t's contents, Graphs.cpp): the work of
/// every stream it joined, in issue order, an order every dependency of
/// the capture respects (each stream's own order, and a wait's event
/// recorded before the wait), so that a launch may run it all on one
/// stream (its Lazy items, the sends' waits for their receives, after the
/// rest: on a GPU each holds only its own branch of the graph); and the memory
/// its stream-ordered allocations took, which is the graph's own (the same
/// addresses on every launch) until the last graph or instantiation holding it
/// goes.
struct GraphBody {
  std::vector<CapturedWork> work;
  /// The capture's allocations (address, bytes), and those freed in the
  /// capture: a later allocation on the same stream (ordered after the
  /// free) takes one back, as a GPU's graph reuses the memory of
  /// allocations whose lifetimes do not overlap.
  std::vector<std::pair<void *, size_t>> memory;
  size_t memoryBytes = 0;
  struct Freed {
    void *p;
    size_t bytes;
    cudaStream_t stream;
  };
  std::vector<Freed> freed;
  GraphBody() = default;
  GraphBody(const GraphBody &) = delete;
  GraphBody &operator=(const GraphBody &) = delete;
  ~GraphBody();
};
/// A cudaGraph_t (and a cudaGraphExec_t: an instantiation shares its body).
struct EmuGraph {
  std::shared_ptr<GraphBody> body;
};

/// The body of the capture `stream` is part of, or null when it is not
/// captured.
std::shared_ptr<GraphBody> capturedBody(cudaStream_t stream);
/// A call that waits for the device, or allocates or frees memory
/// synchronously (`call`, for the report), while a stream is captured:
/// cudart refuses it (cudaErrorStreamCaptureUnsupported) and invalidates
/// the captures in progress, whose cudaStreamEndCapture then fails. Returns
/// cudaSuccess when no capture is in progress.
cudaError_t refuseDuringCapture(const char *call);
/// What cudart refuses on a captured stream (`why`, for the report): when
/// `stream` is captured, its capture is invalidated and
/// cudaErrorStreamCaptureUnsupported returned; else cudaSuccess.
cudaError_t refuseOnCapturedStream(cudaStream_t stream, const std::string &why);
/// Graph memory (Graphs.cpp): `bytes` taken by a capture's allocation or
/// given back with a graph's body (cudaDeviceGetGraphMemAttribute's).
void graphMemoryChanged(int64_t bytes);

} // namespace smp::cudaemu

#endif // SMP_CUDAEMU_STREAMS_H
