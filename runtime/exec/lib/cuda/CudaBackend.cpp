//===- CudaBackend.cpp - Arena, copies and kernels on one GPU -------------===//
//
// One rank, one GPU, one kernel context (a stream, cuBLASLt, the device
// error flag). Every step queues on that stream in program order, so the
// steps need no events between them; collectives queue on the same stream
// through NCCL (an eager pipeline send is staged there and sent in one NCCL
// group with the communicator's next operation: NcclCommunicator.h). The
// arena is one cudaMalloc; the offload pool is pinned host memory, which
// the copies reach with cudaMemcpyAsync. The executor copies weights and
// inputs in and outputs out synchronously, between steps.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaBackend.h"

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

class CudaBackend final : public Backend {
public:
  CudaBackend(int device, k::Context *ctx) : device_(device), ctx_(ctx) {}
  ~CudaBackend() override { k::destroyContext(ctx_); }

  std::string name() const override {
    return "cuda:" + std::to_string(device_);
  }
  bool hostAddressable() const override { return false; }

  Status allocate(uint64_t bytes, void **out) override {
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
      size_t freeBytes = 0, total = 0;
      cudaMemGetInfo(&freeBytes, &total);
      return Status::failure(
          "cannot allocate an arena of " + std::to_string(bytes) +
          " bytes on " + name() + " (" + std::to_string(freeBytes) + " of " +
          std::to_string(total) + " bytes free): " + cudaGetErrorString(e));
    }
    return Status::success();
  }
  void release(void *p, uint64_t) override { cudaFree(p); }
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
    return createNcclCommunicator(host, k::stream(*ctx_), options, out);
  }

  Status decode(const smp::artifact::Instruction &inst,
                const std::vector<TensorRef> &buffers, Communicator &comm,
                Step &step) override {
    Status s = decodeCudaInstruction(inst, buffers, comm, step);
    if (!s.ok())
      return s;
    // Each step queues on this backend's context, whichever thread runs it.
    step.run = [run = std::move(step.run), ctx = ctx_] {
      if (k::currentContext() != ctx)
        k::setCurrentContext(ctx);
      return run();
    };
    return Status::success();
  }

  Status synchronize(const std::string &what) override {
    Status s = k::synchronize(*ctx_);
    return s.ok() ? s
                  : Status::failure(what + " on " + name() + ": " + s.error);
  }

private:
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
  if (device < 0)
    device = localRank % count;
  if (device >= count)
    return Status::failure("--device cuda:" + std::to_string(device) +
                           ": only " + std::to_string(count) +
                           " CUDA device(s) are visible");
  k::Context *ctx = nullptr;
  Status s = k::createContext(device, ctx);
  if (!s.ok())
    return Status::failure("cuda:" + std::to_string(device) + ": " + s.error);
  k::setCurrentContext(ctx);
  out = std::make_unique<CudaBackend>(device, ctx);
  return Status::success();
}

} // namespace smprt
