//===- FileFormat.cpp - Framed, checksummed artifact files ----------------===//

#include "smp/base/FileFormat.h"

#include <cstring>

namespace smp::base {

static uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

uint64_t checksum64(const void *data, size_t size) {
  const auto *p = static_cast<const unsigned char *>(data);
  // Four independent lanes over 8-byte words keep this near memory speed.
  uint64_t lanes[4] = {0x9e3779b97f4a7c15ULL, 0xbf58476d1ce4e5b9ULL,
                       0x94d049bb133111ebULL, 0x2545f4914f6cdd1dULL};
  size_t i = 0;
  for (; i + 32 <= size; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lanes[l] = (lanes[l] ^ w) * 0x100000001b3ULL;
      lanes[l] = (lanes[l] << 31) | (lanes[l] >> 33);
    }
  uint64_t h = size;
  for (uint64_t lane : lanes)
    h = mix(h ^ lane);
  for (; i < size; ++i)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return mix(h);
}

static void putLE(std::string &out, uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b)
    out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

static uint64_t getLE(const std::string &in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int b = 0; b < bytes; ++b)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + b]))
         << (8 * b);
  return v;
}

uint32_t formatVersion(FileKind kind) {
  return kind == FileKind::Artifact ? kArtifactFormatVersion
                                    : kCheckpointFormatVersion;
}

/// The error for a file of format version `version` where this build reads
/// `kind`'s: what wrote it and what to do.
static Status versionMismatch(const std::string &what, FileKind kind,
                              uint32_t version) {
  uint32_t mine = formatVersion(kind);
  bool older = version < mine;
  std::string head = what + ": " +
                     (kind == FileKind::Artifact ? "artifact" : "checkpoint") +
                     " format version " + std::to_string(version) +
                     ", this smprun reads " + std::to_string(mine);
  if (kind == FileKind::Artifact)
    return Status::failure(
        head + (older ? " (an older smpc wrote it); recompile the model with "
                        "this release's smpc"
                      : "; recompile the model with a matching smpc"));
  return Status::failure(
      head + (older ? " (an older smprun wrote it); re-save it: resume it "
                      "with that smprun and --save-onnx, then compile that "
                      "model with this release's smpc (or start the run "
                      "again)"
                    : "; resume it with the smprun that wrote it"));
}

std::string frame(const std::string &payload, FileKind kind) {
  std::string out = "SMPX";
  putLE(out, formatVersion(kind), 4);
  putLE(out, checksum64(payload.data(), payload.size()), 8);
  out += payload;
  return out;
}

Status unframe(const std::string &bytes, const std::string &what,
               std::string &payload, FileKind kind) {
  if (bytes.size() < kFrameHeaderBytes || bytes.compare(0, 4, "SMPX") != 0)
    return Status::failure(what + ": not an smp artifact file (bad magic; "
                                  "truncated or not written by smpc)");
  uint32_t version = static_cast<uint32_t>(getLE(bytes, 4, 4));
  if (version != formatVersion(kind))
    return versionMismatch(what, kind, version);
  uint64_t expected = getLE(bytes, 8, 8);
  uint64_t actual = checksum64(bytes.data() + kFrameHeaderBytes,
                               bytes.size() - kFrameHeaderBytes);
  if (expected != actual)
    return Status::failure(what + ": checksum mismatch (the file is "
                                  "corrupt or was modified)");
  payload = bytes.substr(kFrameHeaderBytes);
  return Status::success();
}

} // namespace smp::base
