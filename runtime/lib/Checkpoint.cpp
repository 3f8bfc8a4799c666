//===- Checkpoint.cpp - Atomic training checkpoints -----------------------===//

#include "smprt/Checkpoint.h"

#include "checkpoint.pb.h"
#include "smprt/FileFormat.h"

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

} // namespace

Status saveCheckpoint(const Executor &exec, const std::string &dir,
                      int64_t step, int64_t totalSteps, std::string &written) {
  ::mkdir(dir.c_str(), 0755);
  const auto &program = exec.artifact().program;
  pb::Checkpoint index;
  index.set_step(step);
  index.set_total_steps(totalSteps);
  index.set_model_name(exec.artifact().manifest.model_name());
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
  std::string name = stepDirName(step);
  std::string tmp = dir + "/.tmp-" + name, final = dir + "/" + name;
  removeTree(tmp);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    return Status::failure(tmp + ": cannot create: " + errnoText());
  size_t abortAfter = SIZE_MAX;
  if (const char *fault = std::getenv("SMP_FAULT_CHECKPOINT_ABORT_AT_STEP"))
    if (std::atoll(fault) == step)
      abortAfter = data.size() / 2;
  Status s = writeSynced(tmp + "/tensors.bin", data.data(), data.size(),
                         abortAfter);
  if (!s.ok())
    return s;
  std::string framed = frame(index.SerializeAsString());
  if (!(s = writeSynced(tmp + "/index.pb", framed.data(), framed.size())).ok())
    return s;
  syncDir(tmp);
  removeTree(final);
  if (::rename(tmp.c_str(), final.c_str()) != 0)
    return Status::failure(final + ": cannot rename the new checkpoint: " +
                           errnoText());
  syncDir(dir);
  // Only now does `latest` move to the new checkpoint.
  std::string latest = name + "\n";
  if (!(s = writeSynced(dir + "/latest.tmp", latest.data(), latest.size()))
           .ok())
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
  std::ifstream indexFile(ckpt + "/index.pb", std::ios::binary);
  if (!indexFile)
    return Status::failure(ckpt + "/index.pb: missing");
  std::string framed((std::istreambuf_iterator<char>(indexFile)),
                     std::istreambuf_iterator<char>()),
      payload;
  Status s = unframe(framed, ckpt + "/index.pb", payload);
  if (!s.ok())
    return s;
  pb::Checkpoint index;
  if (!index.ParseFromString(payload))
    return Status::failure(ckpt + "/index.pb: corrupt");
  std::ifstream dataFile(ckpt + "/tensors.bin", std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(dataFile)),
                   std::istreambuf_iterator<char>());
  std::map<std::string, const pb::CheckpointTensor *> byName;
  for (const auto &t : index.tensors()) {
    if (t.offset() > data.size() || t.bytes() > data.size() - t.offset())
      return Status::failure(ckpt + "/tensors.bin: truncated (tensor '" +
                             t.name() + "')");
    if (checksum64(data.data() + t.offset(), t.bytes()) != t.checksum())
      return Status::failure(ckpt + "/tensors.bin: checksum mismatch in '" +
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
