//===- NcclCommunicator.h - Collectives on device buffers -------*- C++ -*-===//
//
// The communicator of the CUDA backend: the Communicator interface on DEVICE
// pointers. allReduce, allGather, reduceScatter, send, recv, sendRecv and
// postSend are queued on the stream it was made with (the CUDA backend's
// communication stream, which the executor orders against its compute
// stream with events) and return once queued; synchronize() waits for
// them. barrier and broadcast work on HOST
// memory and are the host communicator's (the trainer agrees on checkpoints
// with them).
//
// The communicator is non-blocking (ncclConfig_t::blocking = 0): every NCCL
// call that NCCL answers with ncclInProgress (initialization, the first
// operation between two ranks, which connects them) is polled with
// ncclCommGetAsyncError, like synchronize() polls the stream, against the
// deadline NcclOptions::timeoutSeconds. Past it, or on an asynchronous NCCL
// error, the NCCL communicator is aborted (ncclCommAbort) and the call fails
//
//   <what>: no progress for T s; the NCCL communicator was aborted (a rank
//   failed or is stuck?)
//   <what>: NCCL error on rank R: <ncclGetErrorString> (<ncclGetLastError>)
//
// after which every call fails naming the first error. abort() aborts the
// NCCL communicator, then the host communicator's run.
//
// Point-to-point: NCCL has no tags. Messages between two ranks of a
// communicator are matched in the order they were queued; the program's
// tags only name the message in errors. NCCL cannot tell a receiver that
// the matching send has another size: the sizes must agree (the compiler
// emits both sides from one instruction).
//
// Pipes (openPipes, what the executor opens for a pipeline's peers): for
// each pair of ranks, a two-rank NCCL communicator and a stream for each
// direction, made over the pair's host group in increasing (low, high)
// order and connected by a byte each way before openPipes returns. A
// message to a piped peer (send, postSend, the send of sendRecv) is a copy
// staged on this communicator's stream (the caller may overwrite `data`
// with later work on the stream), then sent on the pipe's stream after it;
// this stream does not wait for the send. A receive from a piped peer runs
// on its pipe's stream after this stream's work so far, and this stream's
// later work waits for it. A send then waits only for the earlier messages
// to the same peer, which the peer receives in the same order: whatever
// the schedule's order, no message waits behind another rank's operation
// (docs/architecture.md, "Pipeline messages on NCCL"). The kernels of
// several NCCL communicators then run side by side, as PyTorch's per-pair
// communicators do; NCCL's documentation warns that this holds only while
// they can all be resident on the GPU at once (a pipeline's pipes are a
// few small point-to-point kernels). Not yet run on several GPUs.
//
// Without a pipe, postSend stages its copy the same way and queues the
// ncclSend in one NCCL group with this communicator's next device
// operation (recv, send, sendRecv, a collective), or alone by
// completeSends, synchronize or queueSends: NCCL runs a communicator's
// operations one after the other on the GPU, whatever their streams, so a
// send queued alone before a receive would wait for the peer's receive,
// which may wait behind the peer's own send; inside one group the send and
// the receive progress together, as in an MPI sendrecv.
//
// completeSends waits (under the watchdog) until every posted message has
// been sent (a pipe's too) and gives its copy back to the communicator's
// memory pool, which keeps the memory for the next step until the
// communicator is destroyed. On a stream being captured into a CUDA graph
// the copies and sends are recorded (queueSends queues the last of them,
// and joins the pipes' streams back, before the capture ends) and complete
// with each launch of the graph, which the caller waits for: no event of
// their own, nothing for completeSends to wait for.
//
// Reductions are NCCL's: f16/bf16 are added in their own precision at each
// step of NCCL's algorithm (not in f32 rounded once as on the host
// communicators: identical on 1 rank, the last bits may differ beyond),
// Mean is ncclAvg (NCCL scales by 1/size(); the last bit may differ from
// sum / size()), Bool is u8 with Max ('any') and Min ('all'). NCCL has no
// 16-bit integers: reductions of i16/u16 are refused (gathers move any
// dtype).
//
// createGroup is collective over the members only: the host communicator's
// createGroup makes the host group, its rank 0 makes a new ncclUniqueId and
// broadcasts it over that group, and every member initializes an NCCL
// communicator of the group. The group shares the stream and the timeout,
// owns its host group, and must be destroyed before this communicator.
//
// The destructor waits (under the watchdog) for the queued operations and
// destroys the NCCL communicator, or aborts it after an error or a timeout.
// Messages posted and never queued are dropped with a warning on stderr
// (call completeSends first).
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_COMM_NCCLCOMMUNICATOR_H
#define SMPRT_COMM_NCCLCOMMUNICATOR_H

#include "smprt/comm/Communicator.h"

#include <cuda_runtime_api.h>

#include <memory>

namespace smprt {

struct NcclOptions {
  /// The watchdog's deadline for one wait (initialization, NCCL accepting a
  /// group, synchronize, completeSends).
  double timeoutSeconds = 600;
};

/// A communicator over the same ranks as `host` whose collectives and
/// point-to-point calls take device pointers and are queued on `stream`
/// (the backend's communication stream). Collective over all ranks of `host`:
/// rank 0 makes the ncclUniqueId and host.broadcast()s it; every rank calls
/// ncclCommInitRank (device = the current CUDA device, set by the caller).
/// `host` and `stream` must outlive the communicator.
Status createNcclCommunicator(Communicator &host, cudaStream_t stream,
                              const NcclOptions &options,
                              std::unique_ptr<Communicator> &out);

} // namespace smprt

#endif // SMPRT_COMM_NCCLCOMMUNICATOR_H
