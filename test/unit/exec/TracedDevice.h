//===- TracedDevice.h - A device that writes down its streams --*- C++ -*-===//
//
// The executor tests' traced device (LanesTest's streams, GraphTest's
// recorded steps): it runs nothing and writes down every stream operation,
// so that what the executor queues is checked as a GPU would see it; and
// the small programs they run.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TEST_UNIT_EXEC_TRACEDDEVICE_H
#define SMP_TEST_UNIT_EXEC_TRACEDDEVICE_H

#include "smp/base/FileFormat.h"
#include "smprt/exec/Executor.h"

#include "ModelDevice.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace smprt::test {

/// A device on the CPU backend's memory that runs nothing and writes down
/// every stream operation: "<stream> run <op>", "<stream> record eN",
/// "<stream> wait eN" (events numbered as made), "sync". An op's name
/// gives its kind: "ar..." a collective, "send" and "recv" a pipeline's
/// messages, "off..." an offload copy, "drop..." a dropout drawing from
/// the step's number, anything else compute.
class TracedDevice : public ModelDevice {
public:
  std::vector<std::string> trace;

  struct Mark final : Event {
    Mark(const Backend &b, int id) : owner(b), id(id) {}
    bool query() override { return true; }
    Status synchronize(const std::string &) override {
      return Status::success();
    }
    const Backend &backend() const override { return owner; }
    const Backend &owner;
    int id;
  };
  struct Queue final : Stream {
    Queue(TracedDevice &d, const char *name) : dev(d), name(name) {}
    Status record(Event &e) override {
      dev.trace.push_back(name + " record e" +
                          std::to_string(static_cast<Mark &>(e).id));
      return Status::success();
    }
    Status wait(Event &e) override {
      dev.trace.push_back(name + " wait e" +
                          std::to_string(static_cast<Mark &>(e).id));
      return Status::success();
    }
    Status synchronize(const std::string &) override {
      return Status::success();
    }
    const Backend &backend() const override { return dev; }
    TracedDevice &dev;
    std::string name;
  };

  std::string name() const override { return "traced:0"; }
  /// The op names its lane: "ar...", "send" and "recv" communication,
  /// "off..." copies.
  Status decode(const smp::artifact::Instruction &inst,
                const std::vector<TensorRef> &, Communicator &,
                const RandomState &, Step &step) override {
    step.op = inst.op();
    bool message = step.op == "send" || step.op == "recv";
    step.lane = step.op.rfind("ar", 0) == 0 || message ? Lane::Comm
                : step.op.rfind("off", 0) == 0         ? Lane::Copy
                                                       : Lane::Compute;
    // "drop...": a dropout that draws from the step's number.
    step.drawsRandom = step.op.rfind("drop", 0) == 0;
    Queue *q = &static_cast<Queue &>(laneStream(step.lane));
    step.run = [this, q, op = step.op] {
      trace.push_back(q->name + " run " + op);
      return Status::success();
    };
    return Status::success();
  }
  Status synchronize(const std::string &) override {
    trace.push_back("sync");
    return Status::success();
  }
  Stream &computeStream() override { return compute_; }
  Stream &laneStream(Lane lane) override {
    return lane == Lane::Comm ? comm_ : lane == Lane::Copy ? copy_ : compute_;
  }
  Status createEvent(std::unique_ptr<Event> &out) override {
    out = std::make_unique<Mark>(*this, events_++);
    return Status::success();
  }

private:
  Queue compute_{*this, "compute"}, comm_{*this, "comm"}, copy_{*this, "copy"};
  int events_ = 0;
};

/// A program over buffers of 64 bytes each at 64 * index (pool 1: the
/// host pool's), of instructions (op, inputs, outputs).
struct Program {
  Artifact artifact;
  struct Inst {
    std::string op;
    std::vector<uint32_t> in, out;
  };
  Program(int buffers, const std::vector<Inst> &insts, int hostBuffers = 0) {
    artifact.dir = ::testing::TempDir();
    artifact.weightsPath = artifact.dir + "/lanes-test-weights.bin";
    std::ofstream(artifact.weightsPath, std::ios::binary).close();
    artifact.weightsChecksum = smp::base::checksum64(nullptr, 0);
    auto &p = artifact.program;
    p.set_arena_bytes(64 * buffers);
    p.set_host_arena_bytes(64 * hostBuffers);
    for (int b = 0; b < buffers + hostBuffers; ++b) {
      auto *buf = p.add_buffers();
      buf->set_dtype(static_cast<uint32_t>(DType::F32));
      buf->add_shape(16);
      buf->set_pool(b < buffers ? 0 : 1);
      buf->set_offset(64 * (b < buffers ? b : b - buffers));
      buf->set_bytes(64);
    }
    for (const Inst &i : insts) {
      auto *inst = p.add_instructions();
      inst->set_op(i.op);
      inst->set_loc("node_" + i.op);
      for (uint32_t b : i.in)
        inst->add_inputs(b);
      for (uint32_t b : i.out)
        inst->add_outputs(b);
    }
  }
};

} // namespace smprt::test

#endif // SMP_TEST_UNIT_EXEC_TRACEDDEVICE_H
