//===- ModelDevice.h - A modelled device on the CPU's memory ----*- C++ -*-===//
//
// The base of the executor tests' devices (ProfileTest's clocked queue,
// LanesTest's traced streams): not host-addressable, so the executor
// treats it as a GPU, with the CPU backend's memory, copies, communicator,
// streams and events underneath. A test's device adds its decode, its
// streams and what it records.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TEST_UNIT_EXEC_MODELDEVICE_H
#define SMP_TEST_UNIT_EXEC_MODELDEVICE_H

#include "smprt/exec/Backend.h"

#include <memory>
#include <string>

namespace smprt::test {

class ModelDevice : public Backend {
public:
  bool hostAddressable() const override { return false; }
  Status allocate(uint64_t bytes, void **out) override {
    return cpu_->allocate(bytes, out);
  }
  void release(void *p, uint64_t bytes) override { cpu_->release(p, bytes); }
  Status allocateHost(uint64_t bytes, void **out) override {
    return cpu_->allocateHost(bytes, out);
  }
  void releaseHost(void *p, uint64_t bytes) override {
    cpu_->releaseHost(p, bytes);
  }
  Status copyIn(void *dst, const void *src, size_t bytes,
                const std::string &what) override {
    return cpu_->copyIn(dst, src, bytes, what);
  }
  Status copyOut(void *dst, const void *src, size_t bytes,
                 const std::string &what) override {
    return cpu_->copyOut(dst, src, bytes, what);
  }
  Status deviceCommunicator(Communicator &host,
                            std::unique_ptr<Communicator> &out) override {
    return cpu_->deviceCommunicator(host, out);
  }
  Status createStream(std::unique_ptr<Stream> &out) override {
    return cpu_->createStream(out);
  }
  Status createEvent(std::unique_ptr<Event> &out) override {
    return cpu_->createEvent(out);
  }

protected:
  std::unique_ptr<Backend> cpu_ = makeCpuBackend();
};

} // namespace smprt::test

#endif // SMP_TEST_UNIT_EXEC_MODELDEVICE_H
