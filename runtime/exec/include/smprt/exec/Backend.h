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
//          through NCCL on that stream (runtime/lib/cuda, built with nvcc).
//
// Buffers of a device arena are not host memory: the executor copies inputs
// in and outputs, checkpoints and exports out through the backend.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_EXEC_BACKEND_H
#define SMPRT_EXEC_BACKEND_H

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

/// A decoded instruction: runs (or, on a device, queues) its kernel on
/// arena views.
struct Step {
  std::string op, loc;
  std::function<Status()> run;
  std::vector<uint32_t> outputs;
};

class Backend {
public:
  virtual ~Backend() = default;
  /// "cpu", "cuda:0", ... (for messages and `smprun` output).
  virtual std::string name() const = 0;
  /// Whether arena memory is host memory (the executor may read it).
  virtual bool hostAddressable() const = 0;

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
  /// attributes. Communication steps capture `comm`.
  virtual Status decode(const smp::artifact::Instruction &inst,
                        const std::vector<TensorRef> &buffers,
                        Communicator &comm, Step &step) = 0;

  /// Waits for the queued work and reports errors the kernels found in the
  /// data (an index out of range, ...). Nothing to wait for on the CPU.
  virtual Status synchronize(const std::string &what) = 0;
};

/// The CPU backend (always built).
std::unique_ptr<Backend> makeCpuBackend();

/// Whether this smprun was built with the CUDA backend (nvcc was found).
bool cudaBackendBuilt();

/// "cpu", "cuda" or "cuda:N". For "cuda" the device is the rank's local
/// rank modulo the visible devices. Fails with a clear message when the
/// backend was not built or no device is usable.
Status makeBackend(const std::string &spec, int localRank,
                   std::unique_ptr<Backend> &out);

} // namespace smprt

#endif // SMPRT_EXEC_BACKEND_H
