//===- CpuBackend.cpp - Host memory, kernels/cpu called synchronously -----===//

#include "cpu/CpuBackend.h"

#include <cstring>
#include <sys/mman.h>

namespace smprt {

namespace {

/// Host memory, kernels of kernels/cpu called synchronously.
class CpuBackend final : public Backend {
public:
  std::string name() const override { return "cpu"; }
  bool hostAddressable() const override { return true; }

  /// Pages mapped lazily: an arena planned larger than what a run touches
  /// costs only address space.
  Status allocate(uint64_t bytes, void **out) override {
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return Status::failure("cannot allocate an arena of " +
                             std::to_string(bytes) + " bytes");
    *out = p;
    return Status::success();
  }
  void release(void *p, uint64_t bytes) override { ::munmap(p, bytes); }
  Status allocateHost(uint64_t bytes, void **out) override {
    return allocate(bytes, out);
  }
  void releaseHost(void *p, uint64_t bytes) override { release(p, bytes); }

  Status copyIn(void *dst, const void *src, size_t bytes,
                const std::string &) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status copyOut(void *dst, const void *src, size_t bytes,
                 const std::string &) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status deviceCommunicator(Communicator &,
                            std::unique_ptr<Communicator> &out) override {
    out.reset();
    return Status::success();
  }
  Status decode(const smp::artifact::Instruction &inst,
                const std::vector<TensorRef> &buffers, Communicator &comm,
                Step &step) override {
    return decodeInstruction(inst, buffers, comm, step);
  }
  Status synchronize(const std::string &) override { return Status::success(); }
};

} // namespace

std::unique_ptr<Backend> makeCpuBackend() {
  return std::make_unique<CpuBackend>();
}

} // namespace smprt
