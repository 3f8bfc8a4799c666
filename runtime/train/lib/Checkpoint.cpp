//===- Checkpoint.cpp - Atomic training checkpoints -----------------------===//

#include "smprt/train/Checkpoint.h"
#include "smprt/train/Reshard.h"

#include "checkpoint.pb.h"
#include "smprt/Base.h"

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
/// the process once that many bytes are written; `failAfter` (test hook)
/// fails the write there as a full disk would.
Status writeSynced(const std::string &path, const char *data, size_t size,
                   size_t abortAfter = SIZE_MAX, size_t failAfter = SIZE_MAX) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::failure(path + ": cannot create: " + errnoText());
  size_t done = 0;
  while (done < size) {
    size_t chunk = std::min<size_t>(size - done, 1 << 20);
    if (done < abortAfter && done + chunk > abortAfter)
      chunk = abortAfter - done;
    if (done < failAfter && done + chunk > failAfter)
      chunk = failAfter - done;
    ssize_t n = done == failAfter ? (errno = ENOSPC, -1)
                                  : ::write(fd, data + done, chunk);
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
    return Status::failure(
        final + ": cannot rename the new checkpoint: " + errnoText());
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

/// What is wrong with tensor `t` of an index ("" when nothing): its dtype,
/// shape and bytes, and its layout (smp::base::checkLayout, as the artifact
/// loader checks a buffer's) before any shard is gathered: a crafted index
/// with a fresh checksum must not make the gather write outside its
/// buffers.
std::string checkTensor(const pb::CheckpointTensor &t) {
  if (t.dtype() > static_cast<uint32_t>(DType::U64))
    return "has unknown dtype " + std::to_string(t.dtype());
  uint64_t n, esize = dtypeSize(static_cast<DType>(t.dtype()));
  if (!checkedElementCount(t.shape(), smp::base::kMaxLayoutElements, n))
    return "has an impossible shape";
  if (n * esize != t.bytes()) // n <= 2^50, esize <= 8
    return "holds " + std::to_string(t.bytes()) +
           " bytes but its shape needs " + std::to_string(n * esize);
  return smp::base::checkLayout(smp::base::layoutOf(t),
                                {t.shape().begin(), t.shape().end()});
}

/// Reads a checkpoint index file.
Status readIndex(const std::string &path, pb::Checkpoint &index) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::failure(path + ": missing");
  std::string framed((std::istreambuf_iterator<char>(file)),
                     std::istreambuf_iterator<char>()),
      payload;
  Status s = unframe(framed, path, payload, FileKind::Checkpoint);
  if (!s.ok())
    return s;
  if (!index.ParseFromString(payload))
    return Status::failure(path + ": corrupt");
  return Status::success();
}

} // namespace

void removeStaleCheckpointTemps(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  std::vector<std::string> stale;
  while (dirent *e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind(".tmp-step-", 0) == 0 || n == "latest.tmp")
      stale.push_back(n);
  }
  ::closedir(d);
  for (const std::string &n : stale) {
    std::string path = dir + "/" + n;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode))
      removeTree(path);
    else
      ::unlink(path.c_str());
  }
}

Status saveCheckpoint(const Executor &exec, const std::string &dir,
                      int64_t step, int64_t totalSteps, std::string &written) {
  return saveCheckpoint(exec, dir, step, totalSteps,
                        runRecordOf(exec.artifact()), written);
}

Status saveCheckpoint(const Executor &exec, const std::string &dir,
                      int64_t step, int64_t totalSteps, const RunRecord &record,
                      std::string &written) {
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
  // What each untrained parameter is (smp-checkpoint list shows it).
  std::map<std::string, const char *> kinds;
  for (const std::string &n : exec.artifact().manifest.training().buffers())
    kinds[n] = "buffer";
  for (const std::string &n : exec.artifact().manifest.training().frozen())
    kinds[n] = "frozen";
  pb::Checkpoint index;
  index.set_step(step);
  index.set_total_steps(totalSteps);
  index.set_model_name(exec.artifact().manifest.model_name());
  index.set_rank(rank);
  index.set_num_ranks(ranks);
  setRunRecord(record, index);
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
    // The tensor's bytes from the arena (device memory on a GPU).
    size_t at = data.size();
    data.resize(at + t.bytes());
    if (!(s = exec.readBuffer(static_cast<uint32_t>(i), data.data() + at)).ok())
      break; // reported to every rank below
    e->set_checksum(checksum64(data.data() + at, t.bytes()));
    smp::base::setLayout(*e, smp::base::layoutOf(b));
    e->set_role(b.role());
    if (auto it = kinds.find(b.name());
        b.role() == "param" && it != kinds.end())
      e->set_kind(it->second);
  }
  size_t abortAfter = SIZE_MAX, failAfter = SIZE_MAX;
  if (const char *fault = std::getenv("SMP_FAULT_CHECKPOINT_ABORT_AT_STEP"))
    if (std::atoll(fault) == step)
      abortAfter = data.size() / 2;
  if (const char *fault = std::getenv("SMP_FAULT_CHECKPOINT_ENOSPC_AT_STEP"))
    if (std::atoll(fault) == step)
      failAfter = data.size() / 2;
  std::string prefix = tmp + "/" + rankPrefix(comm);
  if (s.ok())
    s = writeSynced(prefix + "tensors.bin", data.data(), data.size(),
                    abortAfter, failAfter);
  if (s.ok()) {
    std::string framed = frame(index.SerializeAsString(), FileKind::Checkpoint);
    s = writeSynced(prefix + "index.pb", framed.data(), framed.size());
  }
  // A failed save (a full disk, say) leaves nothing behind: the partial
  // directory would hold the space the next save needs. Every rank is past
  // its writes once `agree` returns.
  if (!(s = agree(comm, s, what + " (writing each rank's tensors)")).ok()) {
    if (rank == 0)
      removeTree(tmp);
    return s;
  }

  // Every rank's files are synced: rank 0 publishes the checkpoint.
  if (rank == 0) {
    s = publish(dir, tmp, final, name);
    if (!s.ok()) {
      removeTree(tmp);
      ::unlink((dir + "/latest.tmp").c_str());
    }
  }
  if (!(s = agree(comm, s, what + " (publishing it)")).ok())
    return s;
  written = final;
  return Status::success();
}

namespace {

/// Every rank's index and tensors of the newest checkpoint in `dir`,
/// checksums verified, with the shards of each tensor by name.
struct CheckpointFiles {
  std::string ckpt;
  pb::Checkpoint first;
  std::vector<pb::Checkpoint> indexes;
  std::vector<std::string> data;
  std::map<std::string,
           std::vector<std::pair<uint32_t, const pb::CheckpointTensor *>>>
      byName;
};

Status readCheckpointFiles(const std::string &dir, CheckpointFiles &files) {
  std::ifstream latestFile(dir + "/latest");
  std::string name;
  if (!latestFile || !std::getline(latestFile, name))
    return Status::failure(dir + "/latest: no checkpoint to resume from");
  if (name.empty() || name.find('/') != std::string::npos ||
      name.find("..") != std::string::npos)
    return Status::failure(dir + "/latest: names a bad checkpoint '" + name +
                           "'");
  std::string ckpt = dir + "/" + name;
  // Every rank's index and tensors (one rank's only, when the plan is the
  // one that wrote them, the shards match this rank's buffers).
  pb::Checkpoint first;
  std::string firstPath = ckpt + "/index.pb";
  if (!fileExists(firstPath))
    firstPath = ckpt + "/rank0.index.pb";
  Status s = readIndex(firstPath, first);
  if (!s.ok())
    return s;
  uint32_t writtenRanks = std::max<uint32_t>(1, first.num_ranks());
  std::vector<pb::Checkpoint> indexes(writtenRanks);
  std::vector<std::string> data(writtenRanks);
  for (uint32_t r = 0; r < writtenRanks; ++r) {
    std::string prefix =
        writtenRanks == 1 ? "" : "rank" + std::to_string(r) + ".";
    std::string indexPath = ckpt + "/" + prefix + "index.pb",
                dataPath = ckpt + "/" + prefix + "tensors.bin";
    if (!(s = readIndex(indexPath, indexes[r])).ok())
      return s;
    if (indexes[r].rank() != r || indexes[r].step() != first.step())
      return Status::failure(indexPath + ": not rank " + std::to_string(r) +
                             " of the checkpoint of step " +
                             std::to_string(first.step()));
    std::ifstream dataFile(dataPath, std::ios::binary);
    if (!dataFile)
      return Status::failure(dataPath + ": missing");
    data[r].assign((std::istreambuf_iterator<char>(dataFile)),
                   std::istreambuf_iterator<char>());
    for (const auto &t : indexes[r].tensors()) {
      std::string bad = checkTensor(t);
      if (!bad.empty())
        return Status::failure(indexPath + ": tensor '" + t.name() + "' " +
                               bad +
                               " (the checkpoint is inconsistent; it was "
                               "not written by smprun)");
      if (t.offset() > data[r].size() ||
          t.bytes() > data[r].size() - t.offset())
        return Status::failure(dataPath + ": truncated (tensor '" + t.name() +
                               "')");
      if (checksum64(data[r].data() + t.offset(), t.bytes()) != t.checksum())
        return Status::failure(dataPath + ": checksum mismatch in '" +
                               t.name() + "'");
    }
  }
  files.ckpt = ckpt;
  files.first = std::move(first);
  files.indexes = std::move(indexes);
  files.data = std::move(data);
  for (uint32_t r = 0; r < writtenRanks; ++r)
    for (const auto &t : files.indexes[r].tensors())
      files.byName[t.name()].push_back({r, &t});
  return Status::success();
}

} // namespace

namespace {

/// The checkpoint's parameters (role "param"), global shapes, by name.
std::vector<ParamSpec> checkpointParameters(const CheckpointFiles &files) {
  std::vector<ParamSpec> out;
  for (const auto &[name, shards] : files.byName) {
    const pb::CheckpointTensor &t = *shards.front().second;
    if (t.role() == "param")
      out.push_back({name, t.dtype(), smp::base::layoutOf(t).fullShape});
  }
  return out;
}

} // namespace

Status loadCheckpoint(Executor &exec, const std::string &dir,
                      const ResumeOptions &options, ResumeInfo &info) {
  CheckpointFiles files;
  Status s = readCheckpointFiles(dir, files);
  if (!s.ok())
    return s;
  const std::string &ckpt = files.ckpt;
  const auto &byName = files.byName;
  const auto &data = files.data;
  info.checkpoint = ckpt;
  info.step = files.first.step();
  info.totalSteps = files.first.total_steps();
  info.numRanks = std::max<uint32_t>(1, files.first.num_ranks());
  info.written = runRecordFrom(files.first);
  if (!(s = checkResume(exec.artifact(), checkpointParameters(files), options,
                        info))
           .ok())
    return s;

  // Check and build every buffer before touching any.
  const auto &program = exec.artifact().program;
  std::vector<std::pair<int, std::string>> values;
  for (int i = 0; i < program.buffers_size(); ++i) {
    const auto &b = program.buffers(i);
    if (!checkpointed(b) ||
        (info.resetOptimizer && b.role() == "state" &&
         isOptimizerState(b.name())))
      continue; // a reset optimizer keeps its initial state
    auto it = byName.find(b.name());
    if (it == byName.end() && b.role() == "state" && isOptimizerState(b.name()))
      return Status::failure(ckpt + ": has no optimizer state '" + b.name() +
                             "' (written with another optimizer?); pass "
                             "--reset-optimizer to start fresh optimizer "
                             "state");
    if (it == byName.end())
      return Status::failure(ckpt + ": has no tensor '" + b.name() +
                             "' (written for another model or optimizer?)");
    smp::base::Layout mine = smp::base::layoutOf(b);
    std::vector<ShardPiece> pieces;
    for (auto [r, t] : it->second) {
      if (t->dtype() != b.dtype())
        return Status::failure(ckpt + ": tensor '" + b.name() +
                               "' has another dtype than the model's");
      pieces.push_back({smp::base::layoutOf(*t), data[r].data() + t->offset(),
                        static_cast<size_t>(t->bytes())});
    }
    if (pieces.front().layout.fullShape != mine.fullShape)
      return Status::failure(ckpt + ": tensor '" + b.name() +
                             "' has another shape than the model's");
    size_t esize = dtypeSize(static_cast<DType>(b.dtype()));
    std::string whole;
    if (!(s = gatherShards(pieces, esize, whole,
                           ckpt + ": tensor '" + b.name() + "'"))
             .ok())
      return s;
    std::string local = smp::base::cutShard(whole, mine, esize);
    if (local.size() != exec.buffers()[i].bytes())
      return Status::failure(ckpt + ": tensor '" + b.name() +
                             "' does not fit this rank's buffer");
    values.emplace_back(i, std::move(local));
  }
  for (auto &[i, bytes] : values)
    if (Status w = exec.writeBuffer(static_cast<uint32_t>(i), bytes.data());
        !w.ok())
      return Status::failure(ckpt + ": " + w.error);
  return Status::success();
}

Status summarizeCheckpoint(const std::string &dir, CheckpointSummary &out) {
  CheckpointFiles files;
  Status s = readCheckpointFiles(dir, files);
  if (!s.ok())
    return s;
  out.checkpoint = files.ckpt;
  out.step = files.first.step();
  out.totalSteps = files.first.total_steps();
  out.numRanks = std::max<uint32_t>(1, files.first.num_ranks());
  out.modelName = files.first.model_name();
  out.record = runRecordFrom(files.first);
  for (const auto &[name, shards] : files.byName) {
    const pb::CheckpointTensor &t = *shards.front().second;
    CheckpointSummary::Tensor e;
    e.name = name;
    e.role = t.role();
    e.kind = t.kind();
    e.dtype = t.dtype();
    e.shape = smp::base::layoutOf(t).fullShape;
    uint64_t n = 1;
    for (int64_t d : e.shape)
      n *= static_cast<uint64_t>(d);
    e.bytes = n * dtypeSize(static_cast<DType>(t.dtype()));
    e.shards = static_cast<uint32_t>(shards.size());
    out.tensors.push_back(std::move(e));
  }
  return Status::success();
}

Status readGlobalTensors(const std::string &dir, const std::string &role,
                         std::map<std::string, GlobalTensor> &out) {
  CheckpointFiles files;
  Status s = readCheckpointFiles(dir, files);
  if (!s.ok())
    return s;
  for (const auto &[name, shards] : files.byName) {
    const pb::CheckpointTensor &first = *shards.front().second;
    if (first.role() != role)
      continue;
    std::vector<ShardPiece> pieces;
    for (auto [r, t] : shards)
      pieces.push_back({smp::base::layoutOf(*t),
                        files.data[r].data() + t->offset(),
                        static_cast<size_t>(t->bytes())});
    GlobalTensor g;
    g.dtype = first.dtype();
    g.shape = pieces.front().layout.fullShape;
    if (!(s = gatherShards(pieces, dtypeSize(static_cast<DType>(g.dtype)),
                           g.bytes, files.ckpt + ": tensor '" + name + "'"))
             .ok())
      return s;
    out[name] = std::move(g);
  }
  return Status::success();
}

} // namespace smprt
