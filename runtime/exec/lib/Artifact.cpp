//===- Artifact.cpp - Loading and validating model.smpx -------------------===//

#include "smprt/exec/Artifact.h"

#include "smp/base/Layout.h"
#include "smp/base/LrSchedules.h"
#include "smprt/Base.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace smprt {
namespace {

constexpr uint32_t kMaxDType = static_cast<uint32_t>(DType::U64);

/// lstat of a file of the artifact, refusing what is not a regular file.
/// smpc writes regular files only, so a symbolic link in an artifact (one
/// from elsewhere could point anywhere: /etc/passwd as its weights) is
/// refused, never followed.
Status statArtifactFile(const std::string &path, struct stat &st) {
  if (::lstat(path.c_str(), &st) != 0)
    return Status::failure(path + ": missing (the artifact is incomplete)");
  if (S_ISLNK(st.st_mode))
    return Status::failure(path + ": a symbolic link; an artifact holds "
                                  "regular files only (copy the file in)");
  if (!S_ISREG(st.st_mode))
    return Status::failure(path + ": not a regular file");
  return Status::success();
}

Status readFile(const std::string &path, std::string &bytes,
                uint64_t maxBytes) {
  struct stat st;
  Status s = statArtifactFile(path, st);
  if (!s.ok())
    return s;
  if (static_cast<uint64_t>(st.st_size) > maxBytes)
    return Status::failure(path + ": " + std::to_string(st.st_size) +
                           " bytes, more than the " + std::to_string(maxBytes) +
                           " expected");
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
  s = unframe(bytes, path, payload, FileKind::Artifact);
  if (!s.ok())
    return s;
  if (!proto.ParseFromString(payload))
    return Status::failure(path + ": corrupt protobuf payload");
  return Status::success();
}

/// The largest element count of one tensor (as the .npy reader's cap is
/// 2^40 elements; 2^50 here leaves room and keeps numel * 8 far from
/// overflowing).
constexpr uint64_t kMaxElements = uint64_t(1) << 50;

/// A semantic error: the file passed its checksum but says something
/// impossible, so it was crafted or written by a broken smpc.
Status inconsistent(const std::string &path, const std::string &what) {
  return Status::failure(path + ": " + what +
                         " (the artifact is inconsistent; recompile it)");
}

/// The device grid of a manifest: sizes along D, P, T and the axes from
/// slowest to fastest (as DeviceGrid in the compiler).
struct Grid {
  bool known = false; // false: an artifact that records no grid
  uint64_t size[3] = {1, 1, 1};
  int order[3] = {0, 1, 2};
  /// Hybrid sharding: ZeRO chunks split over groups of this many
  /// consecutive dp coordinates (the manifest's dp_shard; all of dp when 0).
  uint64_t dpShard = 1;

  void coordOf(uint64_t rank, uint64_t coord[3]) const {
    for (int i = 2; i >= 0; --i) {
      coord[order[i]] = rank % size[order[i]];
      rank /= size[order[i]];
    }
  }
  uint64_t rankOf(const uint64_t coord[3]) const {
    uint64_t r = 0;
    for (int axis : order)
      r = r * size[axis] + coord[axis];
    return r;
  }
};

Status checkGrid(const smp::artifact::Manifest &m, const std::string &path,
                 Grid &grid) {
  if (m.dp() == 0 && m.pp() == 0 && m.tp() == 0 && m.placement().empty())
    return Status::success(); // no grid recorded
  grid.known = true;
  grid.size[0] = m.dp();
  grid.size[1] = m.pp();
  grid.size[2] = m.tp();
  uint64_t ranks = 1;
  for (uint64_t s : grid.size) {
    if (s == 0)
      return inconsistent(path, "the device grid dp " + std::to_string(m.dp()) +
                                    " x pp " + std::to_string(m.pp()) +
                                    " x tp " + std::to_string(m.tp()) +
                                    " has an empty axis");
    ranks *= s; // each below 2^32: no overflow for three
  }
  if (ranks != m.num_ranks())
    return inconsistent(
        path, "the device grid dp " + std::to_string(m.dp()) + " x pp " +
                  std::to_string(m.pp()) + " x tp " + std::to_string(m.tp()) +
                  " is " + std::to_string(ranks) + " ranks, not the " +
                  std::to_string(m.num_ranks()) + " of num_ranks");
  std::string letters = m.placement().empty() ? "DPT" : m.placement();
  bool seen[3] = {false, false, false};
  bool ok = letters.size() == 3;
  for (size_t i = 0; ok && i < 3; ++i) {
    const char *at = std::strchr("DPT", letters[i]);
    int axis = at && letters[i] ? static_cast<int>(at - "DPT") : -1;
    ok = axis >= 0 && !seen[axis];
    if (ok) {
      seen[axis] = true;
      grid.order[i] = axis;
    }
  }
  if (!ok)
    return inconsistent(path, "unknown placement '" + m.placement() +
                                  "' (expected an order of D, P and T)");
  grid.dpShard = m.dp_shard() ? m.dp_shard() : grid.size[0];
  if (grid.size[0] % grid.dpShard != 0)
    return inconsistent(path, "shard groups of " +
                                  std::to_string(m.dp_shard()) +
                                  " ranks do not divide dp " +
                                  std::to_string(m.dp()));
  return Status::success();
}

/// Specs of the manifest's inputs and outputs: known dtypes, shapes of a
/// size that can exist, one spec per name.
template <typename Specs>
Status checkSpecs(const Specs &specs, const char *kind,
                  const std::string &path) {
  std::set<std::string> names;
  for (const auto &spec : specs) {
    uint64_t n;
    if (spec.dtype() > kMaxDType)
      return inconsistent(path, std::string(kind) + " '" + spec.name() +
                                    "' has unknown dtype " +
                                    std::to_string(spec.dtype()));
    if (!checkedElementCount(spec.shape(), kMaxElements, n))
      return inconsistent(path, std::string(kind) + " '" + spec.name() +
                                    "' has an impossible shape");
    if (!names.insert(spec.name()).second)
      return inconsistent(path, std::string(kind) + " '" + spec.name() +
                                    "' is listed twice");
  }
  return Status::success();
}

/// The numbers smprun trains with: finite and in range.
Status checkTraining(const smp::artifact::TrainingConfig &t,
                     const std::string &path) {
  if (!std::isfinite(t.lr()) || t.lr() < 0)
    return inconsistent(path, "learning rate " + std::to_string(t.lr()) +
                                  " (it must be a finite number >= 0)");
  if (t.warmup_steps() < 0)
    return inconsistent(path, "warmup_steps " +
                                  std::to_string(t.warmup_steps()) +
                                  " is negative");
  if (t.batch_size() < 0)
    return inconsistent(path, "batch_size " + std::to_string(t.batch_size()) +
                                  " is negative");
  if (!t.lr_schedule().empty() && !smp::base::isLrSchedule(t.lr_schedule()))
    return inconsistent(path, "unknown learning-rate schedule '" +
                                  t.lr_schedule() + "'");
  if (!t.warmup_type().empty() && t.warmup_type() != "log" &&
      t.warmup_type() != "linear")
    return inconsistent(path, "unknown warmup type '" + t.warmup_type() + "'");
  for (double v : {t.warmup_min(), t.cos_min_ratio()})
    if (!std::isfinite(v) || v < 0)
      return inconsistent(path, "warmup_min or cos_min_ratio " +
                                    std::to_string(v) +
                                    " (it must be a finite number >= 0)");
  if (!t.optimizer().empty() && t.optimizer() != "sgd" &&
      t.optimizer() != "adam" && t.optimizer() != "adamw")
    return inconsistent(path, "unknown optimizer '" + t.optimizer() + "'");
  return Status::success();
}

Status checkManifest(const smp::artifact::Manifest &m, const std::string &path,
                     Grid &grid) {
  Status s = checkGrid(m, path, grid);
  if (s.ok())
    s = checkSpecs(m.inputs(), "input", path);
  if (s.ok())
    s = checkSpecs(m.outputs(), "output", path);
  if (s.ok() && m.has_training())
    s = checkTraining(m.training(), path);
  if (!s.ok())
    return s;
  std::set<uint32_t> ranks;
  for (const auto &r : m.ranks())
    if (r.rank() >= m.num_ranks() || !ranks.insert(r.rank()).second)
      return inconsistent(
          path, "the file entry of rank " + std::to_string(r.rank()) +
                    (r.rank() >= m.num_ranks()
                         ? " is past the run's " +
                               std::to_string(m.num_ranks()) + " ranks"
                         : " is listed twice"));
  return Status::success();
}

/// How a buffer holds part of a global tensor (checkpoints gather and cut
/// by its Layout): a layout smp/base/Layout.h accepts for its shape, and
/// this rank's part on the grid.
Status checkLayout(const smp::artifact::Buffer &b,
                   const smp::artifact::RankProgram &p, const Grid &grid,
                   const std::string &path, const std::string &name) {
  smp::base::Layout l = smp::base::layoutOf(b);
  std::string bad =
      smp::base::checkLayout(l, {b.shape().begin(), b.shape().end()});
  if (!bad.empty())
    return inconsistent(path, name + " " + bad);
  if (!grid.known)
    return Status::success();
  if (l.tpSplit() && (static_cast<uint64_t>(l.tpParts) != grid.size[2] ||
                      static_cast<uint64_t>(l.tpIndex) != p.tp_rank()))
    return inconsistent(
        path, name + " is tensor-parallel slice " + std::to_string(l.tpIndex) +
                  " of " + std::to_string(l.tpParts) + ", but the rank is tp " +
                  std::to_string(p.tp_rank()) + " of " +
                  std::to_string(grid.size[2]));
  if (l.zeroChunk() &&
      (static_cast<uint64_t>(l.zeroParts) != grid.dpShard ||
       static_cast<uint64_t>(l.zeroIndex) != p.dp_rank() % grid.dpShard))
    return inconsistent(
        path, name + " is ZeRO chunk " + std::to_string(l.zeroIndex) + " of " +
                  std::to_string(l.zeroParts) + ", but the rank is dp " +
                  std::to_string(p.dp_rank()) + " of " +
                  std::to_string(grid.size[0]) +
                  (grid.dpShard != grid.size[0]
                       ? " (shard " + std::to_string(p.dp_rank() % grid.dpShard) +
                             " of a group of " + std::to_string(grid.dpShard) + ")"
                       : std::string()));
  return Status::success();
}

/// Checks shapes, sizes and offsets of every buffer against the arena.
Status checkBuffers(const smp::artifact::RankProgram &p, const Grid &grid,
                    const std::string &what) {
  for (int i = 0; i < p.buffers_size(); ++i) {
    const auto &b = p.buffers(i);
    std::string name = "buffer #" + std::to_string(i) + " ('" + b.name() + "')";
    if (b.dtype() > kMaxDType)
      return inconsistent(what, name + " has unknown dtype " +
                                    std::to_string(b.dtype()));
    uint64_t numel;
    if (!checkedElementCount(b.shape(), kMaxElements, numel))
      return inconsistent(what, name + " has an impossible shape");
    uint64_t esize = dtypeSize(static_cast<DType>(b.dtype()));
    if (numel * esize != b.bytes()) // numel <= 2^50, esize <= 8
      return inconsistent(what, name + " holds " + std::to_string(b.bytes()) +
                                    " bytes but its shape needs " +
                                    std::to_string(numel * esize));
    if (b.pool() > 1)
      return inconsistent(what, name + " is in unknown pool " +
                                    std::to_string(b.pool()));
    uint64_t limit = b.pool() == 1 ? p.host_arena_bytes() : p.arena_bytes();
    if (b.offset() > limit || b.bytes() > limit - b.offset())
      return inconsistent(
          what, name + " at offset " + std::to_string(b.offset()) + " (" +
                    std::to_string(b.bytes()) + " bytes) lies outside the " +
                    (b.pool() == 1 ? "host pool" : "arena") + " of " +
                    std::to_string(limit) + " bytes");
    if (esize > 1 && b.offset() % esize != 0)
      return inconsistent(what, name + " at offset " +
                                    std::to_string(b.offset()) +
                                    " is not aligned to its " +
                                    std::to_string(esize) + "-byte elements");
    Status s = checkLayout(b, p, grid, what, name);
    if (!s.ok())
      return s;
  }
  return Status::success();
}

Status checkIndex(uint32_t index, const smp::artifact::RankProgram &p,
                  const std::string &path, const std::string &where) {
  if (index >= static_cast<uint32_t>(p.buffers_size()))
    return inconsistent(path, where + " refers to buffer #" +
                                  std::to_string(index) + " of " +
                                  std::to_string(p.buffers_size()));
  return Status::success();
}

/// The rank's place: the program is rank `rank`'s, at its grid coordinates,
/// reading its data-parallel share of the batch (two ranks of one replica
/// group never read the same share; a copy of another rank's program
/// relabelled is refused).
Status checkPlace(const smp::artifact::RankProgram &p,
                  const smp::artifact::Manifest &m, const Grid &grid,
                  uint32_t rank, const std::string &path) {
  if (p.rank() != rank)
    return inconsistent(path, "holds rank " + std::to_string(p.rank()) +
                                  ", expected " + std::to_string(rank));
  if (!grid.known) {
    if (p.data_shards() > m.num_ranks() ||
        (p.data_shards() && p.data_shard() >= p.data_shards()))
      return inconsistent(path, "data shard " + std::to_string(p.data_shard()) +
                                    " of " + std::to_string(p.data_shards()) +
                                    " in a run of " +
                                    std::to_string(m.num_ranks()) + " ranks");
    return Status::success();
  }
  uint64_t coord[3];
  grid.coordOf(rank, coord);
  if (p.dp_rank() != coord[0] || p.pp_rank() != coord[1] ||
      p.tp_rank() != coord[2])
    return inconsistent(
        path, "rank " + std::to_string(rank) + " claims grid coordinates dp " +
                  std::to_string(p.dp_rank()) + ", pp " +
                  std::to_string(p.pp_rank()) + ", tp " +
                  std::to_string(p.tp_rank()) + " but placement " +
                  (m.placement().empty() ? "DPT" : m.placement()) +
                  " puts it at dp " + std::to_string(coord[0]) + ", pp " +
                  std::to_string(coord[1]) + ", tp " +
                  std::to_string(coord[2]));
  if (p.data_shards() != grid.size[0] || p.data_shard() != coord[0])
    return inconsistent(
        path, "rank " + std::to_string(rank) + " reads data shard " +
                  std::to_string(p.data_shard()) + " of " +
                  std::to_string(p.data_shards()) +
                  " but is data-parallel replica " + std::to_string(coord[0]) +
                  " of " + std::to_string(grid.size[0]) +
                  " (two replicas would train on the same samples)");
  return Status::success();
}

/// Attributes that name ranks: a collective's group ("ranks") and a
/// pipeline peer ("peer", "tag").
Status checkRankAttrs(const smp::artifact::Instruction &inst,
                      const smp::artifact::RankProgram &p,
                      const smp::artifact::Manifest &m, const Grid &grid,
                      uint32_t rank, const std::string &path,
                      const std::string &where) {
  const auto &attrs = inst.attrs();
  uint64_t coord[3];
  grid.coordOf(rank, coord);
  if (auto it = attrs.find("ranks"); it != attrs.end()) {
    const auto &v = it->second.ints().values();
    bool ok = it->second.has_ints() && v.size() > 0, self = false;
    for (int k = 0; ok && k < v.size(); ++k) {
      ok = v[k] >= 0 && v[k] < static_cast<int64_t>(m.num_ranks()) &&
           (k == 0 || v[k] > v[k - 1]);
      self |= v[k] == static_cast<int64_t>(rank);
    }
    if (!ok || !self)
      return inconsistent(path, where +
                                    ": its group of ranks is not a "
                                    "sorted set of the run's ranks "
                                    "holding rank " +
                                    std::to_string(rank));
    // Bound to a grid axis: the group is this rank's line along it (a
    // hybrid-sharded dp's shard or replica group: part of the dp line).
    if (auto g = attrs.find("grid"); grid.known && g != attrs.end()) {
      const std::string &name = g->second.s();
      bool shardGroup = name == "dp_shard", replicaGroup = name == "dp_replica";
      int axis = name == "dp" || shardGroup || replicaGroup ? 0
                 : name == "pp"                             ? 1
                 : name == "tp"                             ? 2
                                                            : -1;
      uint64_t s = grid.dpShard, d = coord[0];
      uint64_t count = axis < 0       ? 0
                       : shardGroup   ? s
                       : replicaGroup ? grid.size[0] / s
                                      : grid.size[axis];
      bool same = axis >= 0 && static_cast<uint64_t>(v.size()) == count;
      uint64_t c[3] = {coord[0], coord[1], coord[2]};
      for (int k = 0; same && k < v.size(); ++k) {
        uint64_t u = static_cast<uint64_t>(k);
        c[axis] = shardGroup ? d / s * s + u : replicaGroup ? u * s + d % s : u;
        same = static_cast<uint64_t>(v[k]) == grid.rankOf(c);
      }
      if (!same)
        return inconsistent(path, where + ": its group of ranks is not rank " +
                                      std::to_string(rank) + "'s " + name +
                                      " group");
    }
  }
  if (inst.op() == "send" || inst.op() == "recv") {
    int64_t peer = attrs.count("peer") ? attrs.at("peer").i() : -1;
    int64_t tag = attrs.count("tag") ? attrs.at("tag").i() : 0;
    bool ok = peer >= 0 && peer < static_cast<int64_t>(m.num_ranks()) &&
              peer != static_cast<int64_t>(rank);
    if (ok && grid.known) {
      uint64_t pc[3];
      grid.coordOf(static_cast<uint64_t>(peer), pc);
      ok = pc[0] == coord[0] && pc[2] == coord[2]; // another stage of mine
    }
    if (!ok)
      return inconsistent(path, where + ": peer " + std::to_string(peer) +
                                    " is not another pipeline stage of rank " +
                                    std::to_string(rank));
    if (tag < 0 || tag > INT32_MAX)
      return inconsistent(path, where + ": tag " + std::to_string(tag) +
                                    " is out of range");
  }
  (void)p;
  return Status::success();
}

} // namespace

uint64_t physicalMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * size
                               : UINT64_MAX;
}

Status loadManifest(const std::string &dir, smp::artifact::Manifest &out) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::failure(dir +
                           ": not an artifact directory (compile one "
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
  Grid grid;
  if (!(s = checkManifest(m, manifestPath, grid)).ok())
    return s;
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
  if (!(s = statArtifactFile(programPath, st)).ok())
    return s;
  if (static_cast<uint64_t>(st.st_size) != file->program_bytes())
    return Status::failure(
        programPath + ": " + std::to_string(st.st_size) + " bytes, expected " +
        std::to_string(file->program_bytes()) + " (truncated or replaced)");
  s = readProto(programPath, file->program_bytes(), out.program);
  if (!s.ok())
    return s;
  const auto &p = out.program;
  if (!(s = checkPlace(p, m, grid, rank, programPath)).ok())
    return s;
  // The arena is the device's (its backend refuses one that does not fit);
  // the host pool is this machine's memory whatever the device.
  uint64_t mem = physicalMemory();
  if (p.host_arena_bytes() > mem)
    return Status::failure(programPath + ": needs a host pool of " +
                           std::to_string(p.host_arena_bytes()) +
                           " bytes but this machine has " +
                           std::to_string(mem));
  s = checkBuffers(p, grid, programPath);
  if (!s.ok())
    return s;
  for (int i = 0; i < p.instructions_size(); ++i) {
    const auto &inst = p.instructions(i);
    std::string where =
        "instruction #" + std::to_string(i) + " (" + inst.op() + ")";
    for (uint32_t b : inst.inputs())
      if (!(s = checkIndex(b, p, programPath, where)).ok())
        return s;
    for (uint32_t b : inst.outputs())
      if (!(s = checkIndex(b, p, programPath, where)).ok())
        return s;
    if (!(s = checkRankAttrs(inst, p, m, grid, rank, programPath, where)).ok())
      return s;
  }
  out.weightsPath = dir + "/" + file->weights_file();
  out.weightsBytes = file->weights_bytes();
  out.weightsChecksum = file->weights_checksum();
  if (!(s = statArtifactFile(out.weightsPath, st)).ok())
    return s;
  if (static_cast<uint64_t>(st.st_size) != out.weightsBytes)
    return Status::failure(out.weightsPath + ": " + std::to_string(st.st_size) +
                           " bytes, expected " +
                           std::to_string(out.weightsBytes) +
                           " (truncated or replaced)");
  for (const auto &w : p.weights()) {
    if (!(s = checkIndex(w.buffer(), p, programPath, "a weight")).ok())
      return s;
    const auto &b = p.buffers(w.buffer());
    if (w.bytes() != b.bytes() ||
        (!w.zero_init() && (w.file_offset() > out.weightsBytes ||
                            w.bytes() > out.weightsBytes - w.file_offset())))
      return inconsistent(programPath, "weight '" + b.name() +
                                           "' does not fit the weights file");
    if (b.pool() != 0)
      return inconsistent(programPath,
                          "weight '" + b.name() + "' is in the host pool");
    if (w.zero_init() && !std::isfinite(w.fill_value()))
      return inconsistent(programPath, "weight '" + b.name() +
                                           "' is filled with " +
                                           std::to_string(w.fill_value()));
  }
  // A rank binds every output and every input of the manifest, except that
  // a pipeline stage binds only the inputs it reads.
  auto checkBindings = [&](const auto &bindings, const auto &specs,
                           const char *kind, bool subset) -> Status {
    if (subset ? bindings.size() > specs.size()
               : bindings.size() != specs.size())
      return inconsistent(programPath, std::string(kind) +
                                           " bindings do not match the "
                                           "manifest");
    std::set<std::string> names;
    for (int i = 0; i < bindings.size(); ++i) {
      Status st = checkIndex(bindings[i].buffer(), p, programPath,
                             std::string(kind) + " binding");
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
        return inconsistent(programPath, std::string(kind) + " '" +
                                             bindings[i].name() +
                                             "' differs from the manifest");
      if (!names.insert(bindings[i].name()).second || b.pool() != 0)
        return inconsistent(
            programPath,
            std::string(kind) + " '" + bindings[i].name() +
                (b.pool() != 0 ? "' is in the host pool" : "' is bound twice"));
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
