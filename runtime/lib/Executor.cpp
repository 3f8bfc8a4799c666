//===- Executor.cpp - Runs one rank's program -----------------------------===//

#include "smprt/Executor.h"

#include <chrono>
#include <map>
#include <cstring>
#include <sys/mman.h>

namespace smprt {

Arena::~Arena() {
  if (data_)
    ::munmap(data_, size_);
}

Status Arena::allocate(uint64_t bytes) {
  size_ = std::max<uint64_t>(bytes, 1);
  void *p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    data_ = nullptr;
    return Status::failure("cannot allocate an arena of " +
                           std::to_string(bytes) + " bytes");
  }
  data_ = static_cast<char *>(p);
  return Status::success();
}

Status Executor::init(const Artifact &artifact) {
  artifact_ = &artifact;
  const auto &p = artifact.program;
  Status s = arena_.allocate(p.arena_bytes());
  if (!s.ok())
    return s;
  // Offloaded activations live in host memory (pinned memory for the CUDA
  // backend's copies; ordinary pages here).
  if (!(s = hostArena_.allocate(p.host_arena_bytes())).ok())
    return s;
  buffers_.clear();
  for (const auto &b : p.buffers()) {
    TensorRef ref;
    ref.data = (b.pool() == 1 ? hostArena_.data() : arena_.data()) + b.offset();
    ref.dtype = static_cast<DType>(b.dtype());
    ref.shape.assign(b.shape().begin(), b.shape().end());
    buffers_.push_back(ref);
  }
  std::string weights;
  if (!(s = readWeights(artifact, weights)).ok())
    return s;
  for (const auto &w : p.weights()) {
    const auto &b = p.buffers(w.buffer());
    if (w.zero_init() && w.fill_value() == 0) {
      std::memset(arena_.data() + b.offset(), 0, w.bytes());
    } else if (w.zero_init()) {
      if (b.dtype() != static_cast<uint32_t>(DType::F32))
        return Status::failure(artifact.dir + ": buffer '" + b.name() +
                               "' has a fill value but is not f32");
      float v = static_cast<float>(w.fill_value());
      float *p = reinterpret_cast<float *>(arena_.data() + b.offset());
      std::fill(p, p + w.bytes() / sizeof(float), v);
    }
    else
      std::memcpy(arena_.data() + b.offset(), weights.data() + w.file_offset(),
                  w.bytes());
    arena_.touch(b.offset(), b.bytes());
  }
  // Communicators of the rank groups the collectives run over, created in
  // sorted order (the same on every rank, so creation cannot deadlock).
  groups_.clear();
  std::map<std::vector<int>, Communicator *> groupOf;
  for (const auto &inst : p.instructions())
    if (auto it = inst.attrs().find("ranks"); it != inst.attrs().end())
      groupOf[std::vector<int>(it->second.ints().values().begin(),
                               it->second.ints().values().end())] = nullptr;
  for (auto &[ranks, group] : groupOf) {
    std::unique_ptr<Communicator> c;
    std::string what = "creating the group of ranks";
    for (int r : ranks)
      what += " " + std::to_string(r);
    if (!(s = comm_->createGroup(ranks, c, what)).ok())
      return Status::failure(artifact.dir + ": " + s.error);
    group = c.get();
    groups_.push_back(std::move(c));
  }
  steps_.clear();
  for (const auto &inst : p.instructions()) {
    Step step;
    Communicator *comm = comm_;
    if (auto it = inst.attrs().find("ranks"); it != inst.attrs().end())
      comm = groupOf[std::vector<int>(it->second.ints().values().begin(),
                                      it->second.ints().values().end())];
    if (!(s = decodeInstruction(inst, buffers_, *comm, step)).ok())
      return Status::failure(artifact.dir + ": instruction '" + inst.op() +
                             "' (" + inst.loc() + "): " + s.error);
    steps_.push_back(std::move(step));
  }
  inputSet_.assign(p.inputs_size(), false);
  return Status::success();
}

Status Executor::setInput(const std::string &name, const TensorRef &value,
                          const std::string &source) {
  const auto &p = artifact_->program;
  for (int i = 0; i < p.inputs_size(); ++i) {
    if (p.inputs(i).name() != name)
      continue;
    const TensorRef &dst = buffers_[p.inputs(i).buffer()];
    if (value.dtype != dst.dtype || value.shape != dst.shape)
      return Status::failure(source + ": input '" + name + "' is " +
                             describe(value) + " but the model was compiled "
                                               "for " +
                             describe(dst));
    std::memcpy(dst.data, value.data, dst.bytes());
    arena_.touch(static_cast<char *>(dst.data) - arena_.data(), dst.bytes());
    inputSet_[i] = true;
    return Status::success();
  }
  return Status::failure(source + ": the model has no input named '" + name +
                         "'");
}

Status Executor::run() {
  const auto &p = artifact_->program;
  for (int i = 0; i < p.inputs_size(); ++i)
    if (!inputSet_[i])
      return Status::failure("input '" + p.inputs(i).name() +
                             "' was not given");
  if (!profile_.empty())
    ++profileRuns_;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step &step = steps_[i];
    auto start = std::chrono::steady_clock::now();
    Status s = step.run();
    if (!profile_.empty())
      profile_[i] += std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    if (!s.ok())
      return Status::failure("instruction '" + step.op + "' (node '" +
                             step.loc + "'): " + s.error);
    for (uint32_t o : step.outputs)
      if (artifact_->program.buffers(o).pool() == 0)
        arena_.touch(static_cast<char *>(buffers_[o].data) - arena_.data(),
                     buffers_[o].bytes());
  }
  // Pipeline sends are eager; the step ends once the peers have them.
  return comm_->completeSends("the sends of this step");
}

bool Executor::hasInput(const std::string &name) const {
  for (const auto &b : artifact_->program.inputs())
    if (b.name() == name)
      return true;
  return false;
}

std::vector<Executor::ProfileEntry> Executor::profile() const {
  std::vector<ProfileEntry> out;
  for (size_t i = 0; i < profile_.size(); ++i)
  {
    int64_t elements = 0;
    for (uint32_t o : steps_[i].outputs)
      elements += buffers_[o].numel();
    const auto &attrs = artifact_->program.instructions(i).attrs();
    auto num = [&](const char *key) {
      auto it = attrs.find(key);
      return it == attrs.end() ? 0.0 : it->second.f();
    };
    out.push_back({steps_[i].op, steps_[i].loc, profile_[i], profileRuns_,
                   elements, num("@flops"), num("@bytes")});
  }
  return out;
}

std::vector<std::pair<std::string, TensorRef>> Executor::outputs() const {
  std::vector<std::pair<std::string, TensorRef>> out;
  for (const auto &b : artifact_->program.outputs())
    out.emplace_back(b.name(), buffers_[b.buffer()]);
  return out;
}

} // namespace smprt
