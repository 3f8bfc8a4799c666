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
// postSend copies the message into a buffer of the communicator (stream-
// ordered: the caller may overwrite `data` with later work on the stream)
// and returns at once. The ncclSend itself is queued in one NCCL group with
// this communicator's next device operation (recv, send, sendRecv, a
// collective), or alone by completeSends/synchronize. Two reasons: NCCL
// runs the operations of a communicator one after the other on the GPU,
// whatever their streams, so a send queued on its own before a receive
// would wait for the peer's receive, which may wait behind the peer's own
// send (a stage posting its output before receiving from the next stage,
// which does the same, would deadlock); and ranks connect on their first
// message, which needs both sides in NCCL. Inside one group the send and
// the receive progress together, as in an MPI sendrecv. postSendJoining
// lets the compiler choose otherwise per message
// (lib/Target/Artifact/MessageGroups.cpp plays every rank's groups
// through): kAtOnce queues the message now in a group of its own (where no
// rank would wait for ever: a first stage's forward outputs, which would
// otherwise wait for its first backward's receive); a tag holds it for the
// group of that receive (NCCL holds a send larger than its buffers, and its
// group, until the peer posts the receive: where the next operation's
// group would wait for a receive the peer posts only after this rank's
// group); kAtCompleteSends holds it for completeSends. A message after one
// left behind to the same peer waits with it. completeSends waits (under
// the watchdog) until every posted message has been sent and gives its
// copy back to the communicator's memory pool, which keeps the memory for
// the next step until the communicator is destroyed. On a stream being
// captured into a CUDA graph the copies and sends are recorded (queueSends
// queues the last of them before the capture ends) and complete with each
// launch of the graph, which the caller waits for: no event of their own,
// nothing for completeSends to wait for.
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
