//===- Executor.h - Runs one rank's program ---------------------*- C++ -*-===//

#ifndef SMPRT_EXECUTOR_H
#define SMPRT_EXECUTOR_H

#include "smprt/Artifact.h"
#include "smprt/Communicator.h"
#include "smprt/Tensor.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smprt {

/// One arena per rank, sized by the compile-time memory plan. Pages are
/// mapped lazily; `highWaterBytes` is the highest arena byte any weight load
/// or instruction output has written (measured, to check the plan).
class Arena {
public:
  ~Arena();
  Status allocate(uint64_t bytes);
  char *data() const { return data_; }
  uint64_t size() const { return size_; }
  void touch(uint64_t offset, uint64_t bytes) {
    highWater_ = std::max(highWater_, offset + bytes);
  }
  uint64_t highWaterBytes() const { return highWater_; }

private:
  char *data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t highWater_ = 0;
};

/// A decoded instruction: runs its kernel on arena views.
struct Step {
  std::string op, loc;
  std::function<Status()> run;
  std::vector<uint32_t> outputs;
};

/// Builds the step of one instruction, or fails for an unknown op or bad
/// attributes (KernelTable.cpp). Communication steps capture `comm`.
Status decodeInstruction(const smp::artifact::Instruction &inst,
                         const std::vector<TensorRef> &buffers,
                         Communicator &comm, Step &step);

class Executor {
public:
  /// The communicator of this rank, for the program's communication steps
  /// and the trainer (rank-0-only output, checkpoints). Call it before
  /// init(): the steps capture it when they are decoded. Without one (or
  /// with nullptr) the executor uses localCommunicator(). It must outlive
  /// the executor.
  void setCommunicator(Communicator *comm) {
    comm_ = comm ? comm : &localCommunicator();
  }
  Communicator &communicator() const { return *comm_; }

  /// Allocates the arena and loads the weights of a validated artifact.
  Status init(const Artifact &artifact);

  /// Copies graph input `name` into its buffer; the dtype and shape must be
  /// exactly the compiled ones.
  /// Whether this rank's program takes the input `name` (the stages of a
  /// pipeline take different inputs).
  bool hasInput(const std::string &name) const;
  Status setInput(const std::string &name, const TensorRef &value,
                  const std::string &source);
  /// Runs every instruction once. Fails if an input was not set.
  Status run();
  /// Views of the graph outputs (valid until the next run).
  std::vector<std::pair<std::string, TensorRef>> outputs() const;

  /// Per-instruction wall time of the runs since profiling was enabled.
  void enableProfiling() {
    profile_.assign(steps_.size(), 0.0);
    profileRuns_ = 0;
  }
  struct ProfileEntry {
    std::string op, loc;
    double seconds;   // summed over the runs
    int64_t calls;    // the runs
    int64_t elements; // of its outputs (for scaling to other shapes)
    double flops, bytes; // the compiler's cost of one call (0: unknown)
  };
  std::vector<ProfileEntry> profile() const;

  const Artifact &artifact() const { return *artifact_; }
  /// Views of every buffer (index = the program's buffer index).
  const std::vector<TensorRef> &buffers() const { return buffers_; }
  uint64_t arenaBytes() const { return arena_.size(); }
  uint64_t highWaterBytes() const { return arena_.highWaterBytes(); }
  /// Bytes of the host pool (offloaded activations).
  uint64_t hostArenaBytes() const {
    return artifact_ ? artifact_->program.host_arena_bytes() : 0;
  }

private:
  Communicator *comm_ = &localCommunicator();
  /// Sub-communicators of the rank groups the program's collectives use.
  std::vector<std::unique_ptr<Communicator>> groups_;
  const Artifact *artifact_ = nullptr;
  Arena arena_;
  Arena hostArena_; // offloaded activations
  std::vector<TensorRef> buffers_;
  std::vector<Step> steps_;
  std::vector<bool> inputSet_;
  std::vector<double> profile_; // empty unless profiling
  int64_t profileRuns_ = 0;
};

} // namespace smprt

#endif // SMPRT_EXECUTOR_H
