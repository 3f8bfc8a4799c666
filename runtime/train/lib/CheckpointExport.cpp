//===- CheckpointExport.cpp - Checkpoints in other formats ----------------===//

#include "smprt/train/CheckpointExport.h"

#include "checkpoint.pb.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

namespace smprt {
namespace {

namespace pb = smp::artifact;

/// The safetensors dtype names.
const char *safetensorsDtype(DType t) {
  switch (t) {
  case DType::F32: return "F32";
  case DType::F64: return "F64";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::Bool: return "BOOL";
  case DType::I8: return "I8";
  case DType::I16: return "I16";
  case DType::I32: return "I32";
  case DType::I64: return "I64";
  case DType::U8: return "U8";
  case DType::U16: return "U16";
  case DType::U32: return "U32";
  case DType::U64: return "U64";
  }
  return nullptr;
}

Status writeFile(const std::string &path, const std::string &head,
                 const std::map<std::string, GlobalTensor> *tensors) {
  std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return Status::failure(path + ": cannot write (" + std::strerror(errno) +
                           ")");
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  if (tensors)
    for (const auto &[name, t] : *tensors)
      ok = ok && std::fwrite(t.bytes.data(), 1, t.bytes.size(), f) ==
                     t.bytes.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    return Status::failure(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::failure(path + ": cannot rename into place (" +
                           std::strerror(errno) + ")");
  return Status::success();
}

} // namespace

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

Status writeSafetensors(const std::string &path,
                        const std::map<std::string, GlobalTensor> &tensors,
                        const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[k, v] : metadata) {
      header += (first ? "" : ",") + jsonString(k) + ":" + jsonString(v);
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto &[name, t] : tensors) {
    const char *dtype = safetensorsDtype(static_cast<DType>(t.dtype));
    if (!dtype)
      return Status::failure(path + ": tensor '" + name +
                             "' has an unknown dtype " +
                             std::to_string(t.dtype));
    if (name == "__metadata__")
      return Status::failure(path + ": a tensor named '__metadata__' cannot "
                                    "be stored in safetensors");
    header += std::string(header.size() > 1 ? "," : "") + jsonString(name) +
              ":{\"dtype\":\"" + dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  header += "}";
  // The data starts 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string head(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    head[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return writeFile(path, head + header, &tensors);
}

Status writeGatheredCheckpoint(const std::string &srcDir,
                               const std::string &outDir,
                               std::string &written) {
  CheckpointSummary summary;
  Status s = summarizeCheckpoint(srcDir, summary);
  if (!s.ok())
    return s;
  std::map<std::string, GlobalTensor> tensors[2];
  const char *roles[2] = {"param", "state"};
  for (int k = 0; k < 2; ++k)
    if (!(s = readGlobalTensors(srcDir, roles[k], tensors[k])).ok())
      return s;
  pb::Checkpoint index;
  index.set_step(summary.step);
  index.set_total_steps(summary.totalSteps);
  index.set_model_name(summary.modelName);
  index.set_rank(0);
  index.set_num_ranks(1);
  RunRecord record = summary.record;
  if (!record.plan.empty())
    record.plan = "gathered from " + record.plan;
  setRunRecord(record, index);
  std::map<std::string, std::string> kinds;
  for (const CheckpointSummary::Tensor &t : summary.tensors)
    if (t.role == "param")
      kinds[t.name] = t.kind;
  std::string data;
  for (int k = 0; k < 2; ++k)
    for (const auto &[name, t] : tensors[k]) {
      pb::CheckpointTensor *e = index.add_tensors();
      e->set_name(name);
      e->set_dtype(t.dtype);
      for (int64_t d : t.shape)
        e->add_shape(d);
      e->set_offset(data.size());
      e->set_bytes(t.bytes.size());
      e->set_checksum(checksum64(t.bytes.data(), t.bytes.size()));
      e->set_role(roles[k]);
      if (k == 0)
        e->set_kind(kinds[name]);
      data += t.bytes;
    }
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld",
                static_cast<long long>(summary.step));
  std::string step = outDir + "/" + name;
  if (::mkdir(outDir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::failure(outDir + ": cannot create (" +
                           std::strerror(errno) + ")");
  if (::mkdir(step.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::failure(step + ": cannot create (" + std::strerror(errno) +
                           ")");
  if (!(s = writeFile(step + "/tensors.bin", data, nullptr)).ok() ||
      !(s = writeFile(step + "/index.pb", frame(index.SerializeAsString(),
                                                  FileKind::Checkpoint),
                      nullptr))
           .ok() ||
      !(s = writeFile(outDir + "/latest", std::string(name) + "\n", nullptr))
           .ok())
    return s;
  written = step;
  return Status::success();
}

} // namespace smprt
