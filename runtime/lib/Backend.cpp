//===- Backend.cpp - The CPU backend and the backend registry -------------===//

#include "smprt/Backend.h"

#ifdef SMPRT_HAVE_CUDA
#include "cuda/CudaBackend.h"
#endif

#include <cstdlib>
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
  Status synchronize(const std::string &) override {
    return Status::success();
  }
};

} // namespace

std::unique_ptr<Backend> makeCpuBackend() {
  return std::make_unique<CpuBackend>();
}

bool cudaBackendBuilt() {
#ifdef SMPRT_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

Status makeBackend(const std::string &spec, int localRank,
                   std::unique_ptr<Backend> &out) {
  if (spec == "cpu") {
    out = makeCpuBackend();
    return Status::success();
  }
  int device = -1; // from the local rank
  if (spec.rfind("cuda", 0) == 0) {
    std::string rest = spec.substr(4);
    if (!rest.empty()) {
      char *end = nullptr;
      long d = rest[0] == ':' ? std::strtol(rest.c_str() + 1, &end, 10) : -1;
      if (rest.size() < 2 || !end || *end || d < 0 || d > 1024)
        return Status::failure("--device '" + spec +
                               "': expected cpu, cuda or cuda:N");
      device = static_cast<int>(d);
    }
#ifdef SMPRT_HAVE_CUDA
    return makeCudaBackend(device, localRank, out);
#else
    (void)localRank;
    return Status::failure("--device " + spec +
                           ": this smprun was built without the CUDA backend "
                           "(nvcc was not found when it was configured)");
#endif
  }
  return Status::failure("--device '" + spec +
                         "': expected cpu, cuda or cuda:N");
}

} // namespace smprt
