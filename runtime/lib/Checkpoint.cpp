//===- Checkpoint.cpp - Atomic training checkpoints -----------------------===//

#include "smprt/Checkpoint.h"

#include "checkpoint.pb.h"
#include "smprt/FileFormat.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace smprt {
namespace {

namespace pb = smp::artifact;

std::string errnoText() { return std::strerror(errno); }

/// Writes `bytes` to `path` and fsyncs it. `abortAfter` (test hook) kills
/// the process once that many bytes are written.
Status writeSynced(const std::string &path, const char *data, size_t size,
                   size_t abortAfter = SIZE_MAX) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::failure(path + ": cannot create: " + errnoText());
  size_t done = 0;
  while (done < size) {
    size_t chunk = std::min<size_t>(size - done, 1 << 20);
    if (done < abortAfter && done + chunk > abortAfter)
      chunk = abortAfter - done;
    ssize_t n = ::write(fd, data + done, chunk);
    if (n < 0) {
      ::close(fd);
      return Status::failure(path + ": write failed: " + errnoText());
    }
    done += static_cast<size_t>(n);
    if (done == abortAfter)
      ::_exit(137); // simulated crash in the middle of a save
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    return Status::failure(path + ": sync failed: " + errnoText());
  return Status::success();
}

void syncDir(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void removeTree(const std::string &path) {
  DIR *d = ::opendir(path.c_str());
  if (d) {
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        ::unlink((path + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

bool checkpointed(const pb::Buffer &b) {
  return b.role() == "param" || b.role() == "state";
}

std::string stepDirName(int64_t step) {
  char buf[32];
  snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return buf;
}

/// Files of this rank in a checkpoint directory: "index.pb" and
/// "tensors.bin" in a single-rank run, "rank<R>.index.pb" and
/// "rank<R>.tensors.bin" in a run of several ranks.
std::string rankPrefix(const Communicator &comm) {
  return comm.size() == 1 ? "" : "rank" + std::to_string(comm.rank()) + ".";
}

/// Every rank learns whether any rank failed; a rank that did not fail
/// itself gets an error saying so (the failing rank reports its own).
Status agree(Communicator &comm, const Status &mine, const std::string &what) {
  if (comm.size() == 1)
    return mine;
  int32_t failed = mine.ok() ? 0 : 1;
  Status s = comm.allReduce(&failed, 1, DType::I32, ReduceOp::Max, what);
  if (!s.ok())
    return s;
  if (!mine.ok())
    return mine;
  if (failed)
    return Status::failure(what + ": another rank failed (see its error)");
  return Status::success();
}

/// Renames the complete temporary checkpoint `tmp` to `final`, then moves
/// `latest` to it and removes all but the previous checkpoint.
Status publish(const std::string &dir, const std::string &tmp,
               const std::string &final, const std::string &name) {
  syncDir(tmp);
  removeTree(final);
  if (::rename(tmp.c_str(), final.c_str()) != 0)
    return Status::failure(final + ": cannot rename the new checkpoint: " +
                           errnoText());
  syncDir(dir);
  // Only now does `latest` move to the new checkpoint.
  std::string latest = name + "\n";
  Status s = writeSynced(dir + "/latest.tmp", latest.data(), latest.size());
  if (!s.ok())
    return s;
  if (::rename((dir + "/latest.tmp").c_str(), (dir + "/latest").c_str()) != 0)
    return Status::failure(dir + "/latest: cannot update: " + errnoText());
  syncDir(dir);
  // Keep this checkpoint and the one before it.
  if (DIR *d = ::opendir(dir.c_str())) {
    std::vector<std::string> old;
    while (dirent *e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("step-", 0) == 0 && n < name)
        old.push_back(n);
    }
    ::closedir(d);
    std::sort(old.begin(), old.end());
    for (size_t i = 0; i + 1 < old.size(); ++i)
      removeTree(dir + "/" + old[i]);
  }
  return Status::success();
}

bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

/// Reads a checkpoint index file.
Status readIndex(const std::string &path, pb::Checkpoint &index) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::failure(path + ": missing");
  std::string framed((std::istreambuf_iterator<char>(file)),
                     std::istreambuf_iterator<char>()),
      payload;
  Status s = unframe(framed, path, payload);
  if (!s.ok())
    return s;
  if (!index.ParseFromString(payload))
    return Status::failure(path + ": corrupt");
  return Status::success();
}

} // namespace

Status saveCheckpoint(const Executor &exec, const std::string &dir,
                      int64_t step, int64_t totalSteps, std::string &written) {
  Communicator &comm = exec.communicator();
  const int rank = comm.rank(), ranks = comm.size();
  std::string name = stepDirName(step);
  std::string tmp = dir + "/.tmp-" + name, final = dir + "/" + name;
  std::string what = "saving checkpoint " + final;
  // Rank 0 makes the temporary directory every rank writes into.
  Status s;
  if (rank == 0) {
    ::mkdir(dir.c_str(), 0755);
    removeTree(tmp);
    if (::mkdir(tmp.c_str(), 0755) != 0)
      s = Status::failure(tmp + ": cannot create: " + errnoText());
  }
  if (!(s = agree(comm, s, what + " (creating " + tmp + ")")).ok())
    return s;

  const auto &program = exec.artifact().program;
  pb::Checkpoint index;
  index.set_step(step);
  index.set_total_steps(totalSteps);
  index.set_model_name(exec.artifact().manifest.model_name());
  index.set_rank(rank);
  index.set_num_ranks(ranks);
  std::string data;
  for (int i = 0; i < program.buffers_size(); ++i) {
    const auto &b = program.buffers(i);
    if (!checkpointed(b))
      continue;
    const TensorRef &t = exec.buffers()[i];
    pb::CheckpointTensor *e = index.add_tensors();
    e->set_name(b.name());
    e->set_dtype(b.dtype());
    *e->mutable_shape() = b.shape();
    e->set_offset(data.size());
    e->set_bytes(t.bytes());
    e->set_checksum(checksum64(t.data, t.bytes()));
    data.append(static_cast<const char *>(t.data), t.bytes());
  }
  size_t abortAfter = SIZE_MAX;
  if (const char *fault = std::getenv("SMP_FAULT_CHECKPOINT_ABORT_AT_STEP"))
    if (std::atoll(fault) == step)
      abortAfter = data.size() / 2;
  std::string prefix = tmp + "/" + rankPrefix(comm);
  s = writeSynced(prefix + "tensors.bin", data.data(), data.size(),
                  abortAfter);
  if (s.ok()) {
    std::string framed = frame(index.SerializeAsString());
    s = writeSynced(prefix + "index.pb", framed.data(), framed.size());
  }
  if (!(s = agree(comm, s, what + " (writing each rank's tensors)")).ok())
    return s;

  // Every rank's files are synced: rank 0 publishes the checkpoint.
  if (rank == 0)
    s = publish(dir, tmp, final, name);
  if (!(s = agree(comm, s, what + " (publishing it)")).ok())
    return s;
  written = final;
  return Status::success();
}

Status loadCheckpoint(Executor &exec, const std::string &dir, int64_t &step,
                      int64_t &totalSteps) {
  std::ifstream latestFile(dir + "/latest");
  std::string name;
  if (!latestFile || !std::getline(latestFile, name))
    return Status::failure(dir + "/latest: no checkpoint to resume from");
  if (name.empty() || name.find('/') != std::string::npos ||
      name.find("..") != std::string::npos)
    return Status::failure(dir + "/latest: names a bad checkpoint '" + name +
                           "'");
  std::string ckpt = dir + "/" + name;
  const Communicator &comm = exec.communicator();
  std::string prefix = rankPrefix(comm);
  std::string indexPath = ckpt + "/" + prefix + "index.pb",
              dataPath = ckpt + "/" + prefix + "tensors.bin";
  pb::Checkpoint index;
  if (!fileExists(indexPath)) {
    // Written with another number of ranks? Say so rather than "missing".
    pb::Checkpoint other;
    for (const char *alt : {"index.pb", "rank0.index.pb"})
      if (readIndex(ckpt + "/" + alt, other).ok()) {
        uint32_t n = std::max<uint32_t>(1, other.num_ranks());
        return Status::failure(
            ckpt + ": written by a run of " + std::to_string(n) +
            (n == 1 ? " rank" : " ranks") + ", this run has " +
            std::to_string(comm.size()) +
            " (resharding checkpoints is not supported yet)");
      }
    return Status::failure(indexPath + ": missing");
  }
  Status s = readIndex(indexPath, index);
  if (!s.ok())
    return s;
  uint32_t writtenRanks = std::max<uint32_t>(1, index.num_ranks());
  if (writtenRanks != static_cast<uint32_t>(comm.size()) ||
      index.rank() != static_cast<uint32_t>(comm.rank()))
    return Status::failure(
        indexPath + ": written by rank " + std::to_string(index.rank()) +
        " of " + std::to_string(writtenRanks) + ", but this is rank " +
        std::to_string(comm.rank()) + " of " + std::to_string(comm.size()));
  std::ifstream dataFile(dataPath, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(dataFile)),
                   std::istreambuf_iterator<char>());
  std::map<std::string, const pb::CheckpointTensor *> byName;
  for (const auto &t : index.tensors()) {
    if (t.offset() > data.size() || t.bytes() > data.size() - t.offset())
      return Status::failure(dataPath + ": truncated (tensor '" +
                             t.name() + "')");
    if (checksum64(data.data() + t.offset(), t.bytes()) != t.checksum())
      return Status::failure(dataPath + ": checksum mismatch in '" +
                             t.name() + "'");
    byName[t.name()] = &t;
  }
  // Check every buffer before touching any.
  const auto &program = exec.artifact().program;
  std::vector<std::pair<int, const pb::CheckpointTensor *>> copies;
  for (int i = 0; i < program.buffers_size(); ++i) {
    const auto &b = program.buffers(i);
    if (!checkpointed(b))
      continue;
    auto it = byName.find(b.name());
    if (it == byName.end())
      return Status::failure(ckpt + ": has no tensor '" + b.name() +
                             "' (written for another model or optimizer?)");
    const auto &t = *it->second;
    if (t.dtype() != b.dtype() ||
        !std::equal(t.shape().begin(), t.shape().end(), b.shape().begin(),
                    b.shape().end()))
      return Status::failure(ckpt + ": tensor '" + b.name() +
                             "' has another dtype or shape than the model's");
    copies.emplace_back(i, &t);
  }
  for (auto [i, t] : copies)
    std::memcpy(exec.buffers()[i].data, data.data() + t->offset(), t->bytes());
  step = index.step();
  totalSteps = index.total_steps();
  return Status::success();
}

} // namespace smprt
