//===- CpuBackend.cpp - Host memory, kernels/cpu called synchronously -----===//

#include "cpu/CpuBackend.h"
#include "smprt/exec/Artifact.h"
#include "smprt/exec/BackendRegistry.h"

#include "smp/kernels/cpu/Kernels.h"

#include <cstring>
#include <sys/mman.h>

namespace smprt {

namespace {

/// Work on the CPU finishes when it is issued: an event is complete once
/// recorded (and before), a stream has nothing queued.
class CpuEvent final : public Event {
public:
  explicit CpuEvent(const Backend &backend) : backend_(backend) {}
  bool query() override { return true; }
  Status synchronize(const std::string &) override { return Status::success(); }
  const Backend &backend() const override { return backend_; }

private:
  const Backend &backend_;
};

class CpuStream final : public Stream {
public:
  explicit CpuStream(const Backend &backend) : backend_(backend) {}
  Status record(Event &event) override { return check(event, "record"); }
  Status wait(Event &event) override { return check(event, "wait for"); }
  Status synchronize(const std::string &) override { return Status::success(); }
  const Backend &backend() const override { return backend_; }

private:
  /// Events order the streams of one backend only.
  Status check(const Event &event, const char *verb) const {
    if (&event.backend() != &backend_)
      return Status::failure(std::string("a stream of ") + backend_.name() +
                             " cannot " + verb +
                             " an event of another "
                             "backend (" +
                             event.backend().name() + ")");
    return Status::success();
  }
  const Backend &backend_;
};

/// Host memory, kernels of kernels/cpu called synchronously.
class CpuBackend final : public Backend {
public:
  std::string name() const override { return "cpu"; }
  bool hostAddressable() const override { return true; }
  int computeUnits() const override { return smp::kernels::cpu::numThreads(); }

  /// Pages mapped lazily: an arena planned larger than what a run touches
  /// costs only address space. One larger than the machine's memory is
  /// refused (the mapping would succeed and the run be killed later).
  Status allocate(uint64_t bytes, void **out) override {
    if (uint64_t mem = physicalMemory(); bytes > mem)
      return Status::failure(
          "cannot allocate an arena of " + std::to_string(bytes) +
          " bytes: this machine has " + std::to_string(mem) +
          " bytes of memory. The plan needs less per rank with "
          "recomputation (--checkpoint-activations full), more "
          "--microbatches, ZeRO (--zero-stage 2 or 3) or more ranks; smpc "
          "compile --devices N --cluster (a preset, or a JSON file with the "
          "device's memory_gb) chooses a plan that fits");
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
                const RandomState &random, Step &step) override {
    return decodeInstruction(inst, buffers, comm, random, step);
  }
  Status synchronize(const std::string &) override { return Status::success(); }

  Stream &computeStream() override { return compute_; }
  Status createStream(std::unique_ptr<Stream> &out) override {
    out = std::make_unique<CpuStream>(*this);
    return Status::success();
  }
  Status createEvent(std::unique_ptr<Event> &out) override {
    out = std::make_unique<CpuEvent>(*this);
    return Status::success();
  }

private:
  CpuStream compute_{*this};
};

} // namespace

std::unique_ptr<Backend> makeCpuBackend() {
  return std::make_unique<CpuBackend>();
}

void registerCpuBackend(BackendRegistry &registry) {
  registry.add("cpu", /*takesDevice=*/false,
               [](int, int, std::unique_ptr<Backend> &out) {
                 out = makeCpuBackend();
                 return Status::success();
               });
}

} // namespace smprt
