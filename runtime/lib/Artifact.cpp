//===- Artifact.cpp - Loading and validating model.smpx -------------------===//

#include "smprt/Artifact.h"

#include "smprt/FileFormat.h"

#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace smprt {
namespace {

constexpr uint32_t kMaxDType = static_cast<uint32_t>(DType::U64);

Status readFile(const std::string &path, std::string &bytes,
                uint64_t maxBytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::failure(path + ": missing (the artifact is incomplete)");
  if (!S_ISREG(st.st_mode))
    return Status::failure(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > maxBytes)
    return Status::failure(path + ": " + std::to_string(st.st_size) +
                           " bytes, more than the " +
                           std::to_string(maxBytes) + " expected");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::failure(path + ": cannot open");
  bytes.resize(st.st_size);
  in.read(bytes.data(), bytes.size());
  if (!in)
    return Status::failure(path + ": read failed");
  return Status::success();
}

template <typename Proto>
Status readProto(const std::string &path, uint64_t maxBytes, Proto &proto) {
  std::string bytes, payload;
  Status s = readFile(path, bytes, maxBytes);
  if (!s.ok())
    return s;
  s = unframe(bytes, path, payload);
  if (!s.ok())
    return s;
  if (!proto.ParseFromString(payload))
    return Status::failure(path + ": corrupt protobuf payload");
  return Status::success();
}

uint64_t physicalMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * size
                               : UINT64_MAX;
}

/// Checks shapes, sizes and offsets of every buffer against the arena.
Status checkBuffers(const smp::artifact::RankProgram &p,
                    const std::string &what) {
  for (int i = 0; i < p.buffers_size(); ++i) {
    const auto &b = p.buffers(i);
    std::string name = what + ": buffer #" + std::to_string(i) + " ('" +
                       b.name() + "')";
    if (b.dtype() > kMaxDType)
      return Status::failure(name + " has unknown dtype " +
                             std::to_string(b.dtype()));
    uint64_t numel = 1;
    for (int64_t d : b.shape()) {
      if (d < 0 || (d > 0 && numel > (uint64_t(1) << 50) / d))
        return Status::failure(name + " has a bad shape");
      numel *= d;
    }
    if (numel * dtypeSize(static_cast<DType>(b.dtype())) != b.bytes())
      return Status::failure(name + " size does not match its shape");
    uint64_t limit = b.pool() == 1 ? p.host_arena_bytes() : p.arena_bytes();
    if (b.pool() > 1 || b.offset() > limit || b.bytes() > limit - b.offset())
      return Status::failure(name + " lies outside the arena");
  }
  return Status::success();
}

Status checkIndex(uint32_t index, const smp::artifact::RankProgram &p,
                  const std::string &where) {
  if (index >= static_cast<uint32_t>(p.buffers_size()))
    return Status::failure(where + " refers to buffer #" +
                           std::to_string(index) + " of " +
                           std::to_string(p.buffers_size()));
  return Status::success();
}

} // namespace

Status loadManifest(const std::string &dir, smp::artifact::Manifest &out) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::failure(dir + ": not an artifact directory (compile one "
                                 "with `smpc compile MODEL -o " +
                           dir + "`)");
  return readProto(dir + "/manifest.pb", uint64_t(64) << 20, out);
}

Status loadArtifact(const std::string &dir, uint32_t rank, Artifact &out) {
  out.dir = dir;
  struct stat st;
  std::string manifestPath = dir + "/manifest.pb";
  Status s = loadManifest(dir, out.manifest);
  if (!s.ok())
    return s;
  const auto &m = out.manifest;
  if (m.num_ranks() == 0 || rank >= m.num_ranks())
    return Status::failure(manifestPath + ": rank " + std::to_string(rank) +
                           " requested but the artifact has " +
                           std::to_string(m.num_ranks()) + " ranks");
  const smp::artifact::RankFile *file = nullptr;
  for (const auto &r : m.ranks())
    if (r.rank() == rank)
      file = &r;
  if (!file)
    return Status::failure(manifestPath + ": no entry for rank " +
                           std::to_string(rank));
  for (const std::string &name : {file->program_file(), file->weights_file()})
    if (name.empty() || name.find('/') != std::string::npos ||
        name.find("..") != std::string::npos)
      return Status::failure(manifestPath + ": bad file name '" + name + "'");
  std::string programPath = dir + "/" + file->program_file();
  if (::stat(programPath.c_str(), &st) == 0 &&
      static_cast<uint64_t>(st.st_size) != file->program_bytes())
    return Status::failure(programPath + ": " + std::to_string(st.st_size) +
                           " bytes, expected " +
                           std::to_string(file->program_bytes()) +
                           " (truncated or replaced)");
  s = readProto(programPath, file->program_bytes(), out.program);
  if (!s.ok())
    return s;
  const auto &p = out.program;
  if (p.rank() != rank)
    return Status::failure(programPath + ": holds rank " +
                           std::to_string(p.rank()) + ", expected " +
                           std::to_string(rank));
  uint64_t mem = physicalMemory();
  if (p.arena_bytes() > mem)
    return Status::failure(programPath + ": needs an arena of " +
                           std::to_string(p.arena_bytes()) +
                           " bytes but this machine has " +
                           std::to_string(mem));
  s = checkBuffers(p, programPath);
  if (!s.ok())
    return s;
  for (int i = 0; i < p.instructions_size(); ++i) {
    const auto &inst = p.instructions(i);
    std::string where = programPath + ": instruction #" + std::to_string(i) +
                        " (" + inst.op() + ")";
    for (uint32_t b : inst.inputs())
      if (!(s = checkIndex(b, p, where)).ok())
        return s;
    for (uint32_t b : inst.outputs())
      if (!(s = checkIndex(b, p, where)).ok())
        return s;
  }
  out.weightsPath = dir + "/" + file->weights_file();
  out.weightsBytes = file->weights_bytes();
  out.weightsChecksum = file->weights_checksum();
  if (::stat(out.weightsPath.c_str(), &st) != 0)
    return Status::failure(out.weightsPath +
                           ": missing (the artifact is incomplete)");
  if (static_cast<uint64_t>(st.st_size) != out.weightsBytes)
    return Status::failure(out.weightsPath + ": " +
                           std::to_string(st.st_size) + " bytes, expected " +
                           std::to_string(out.weightsBytes) +
                           " (truncated or replaced)");
  for (const auto &w : p.weights()) {
    if (!(s = checkIndex(w.buffer(), p, programPath + ": weight")).ok())
      return s;
    const auto &b = p.buffers(w.buffer());
    if (w.bytes() != b.bytes() ||
        (!w.zero_init() && (w.file_offset() > out.weightsBytes ||
                            w.bytes() > out.weightsBytes - w.file_offset())))
      return Status::failure(programPath + ": weight '" + b.name() +
                             "' does not fit the weights file");
  }
  // A rank binds every output and every input of the manifest, except that
  // a pipeline stage binds only the inputs it reads.
  auto checkBindings = [&](const auto &bindings, const auto &specs,
                           const char *kind, bool subset) -> Status {
    if (subset ? bindings.size() > specs.size()
               : bindings.size() != specs.size())
      return Status::failure(programPath + ": " + kind +
                             " bindings do not match the manifest");
    for (int i = 0; i < bindings.size(); ++i) {
      Status st = checkIndex(bindings[i].buffer(), p,
                             programPath + ": " + kind + " binding");
      if (!st.ok())
        return st;
      const auto &b = p.buffers(bindings[i].buffer());
      int k = i;
      if (subset)
        for (k = 0; k < specs.size() && specs[k].name() != bindings[i].name();)
          ++k;
      if (k >= specs.size() || bindings[i].name() != specs[k].name() ||
          b.dtype() != specs[k].dtype() ||
          !std::equal(b.shape().begin(), b.shape().end(),
                      specs[k].shape().begin(), specs[k].shape().end()))
        return Status::failure(programPath + ": " + kind + " '" +
                               bindings[i].name() +
                               "' differs from the manifest");
    }
    return Status::success();
  };
  if (!(s = checkBindings(p.inputs(), m.inputs(), "input", m.pp() > 1)).ok())
    return s;
  return checkBindings(p.outputs(), m.outputs(), "output", false);
}

Status readWeights(const Artifact &artifact, std::string &bytes) {
  Status s = readFile(artifact.weightsPath, bytes, artifact.weightsBytes);
  if (!s.ok())
    return s;
  if (bytes.size() != artifact.weightsBytes)
    return Status::failure(artifact.weightsPath + ": truncated");
  if (checksum64(bytes.data(), bytes.size()) != artifact.weightsChecksum)
    return Status::failure(artifact.weightsPath +
                           ": checksum mismatch (the weights are corrupt)");
  return Status::success();
}

} // namespace smprt
