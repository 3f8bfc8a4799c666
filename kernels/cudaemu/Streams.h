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
  Ordered,   // as Normal; runs after every Ordered item issued before it
             // (NCCL's operations: the ranks exchange in issue order)
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
                   WorkKind kind = WorkKind::Normal);
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
/// Runs everything queued on the current device's null stream and its
/// blocking streams (before a synchronous copy or memset).
void runLegacy();
/// Runs everything queued on every stream.
void runAll();

} // namespace smp::cudaemu

#endif // SMP_CUDAEMU_STREAMS_H
