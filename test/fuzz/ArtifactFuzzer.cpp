//===- ArtifactFuzzer.cpp - libFuzzer target: the runtime's artifact loader ===//
//
// bytes -> an artifact directory -> smprt::loadArtifact (+ readWeights).
// MLIR-free, like smprun. An input is
//
//   flags (1 byte) | u32 LE n | manifest payload (n bytes)
//                  | u32 LE m | rank program payload (m bytes) | weights
//
// (a short input is cut where it ends). The harness frames each payload
// with a fresh checksum, as smpc would, so the fuzzer reaches the semantic
// checks instead of stopping at the checksum. flags bit 0: "reseal" (the
// manifest's entry for the loaded rank gets the file names, sizes and
// weights checksum of the files written, as `smp-artifact-text reseal`
// does); bits 1-3: the rank loaded; bit 4: write no weights file.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "smprt/Base.h"
#include "smprt/exec/Artifact.h"

#include <algorithm>
#include <cstdio>
#include <cctype>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

/// Takes a u32-length-prefixed field from the front of [p, end).
std::string take(const uint8_t *&p, const uint8_t *end) {
  if (end - p < 4) {
    p = end;
    return "";
  }
  uint32_t n = p[0] | p[1] << 8 | p[2] << 16 | uint32_t(p[3]) << 24;
  p += 4;
  size_t len = std::min<size_t>(n, static_cast<size_t>(end - p));
  std::string s(reinterpret_cast<const char *>(p), len);
  p += len;
  return s;
}

/// A name the loader could open inside the directory (it refuses the rest
/// itself; the harness only avoids writing outside its scratch dir).
bool plainName(const std::string &s) {
  if (s.empty() || s.size() > 64 || s == "manifest.pb" || s == "." ||
      s == "..")
    return false;
  for (char c : s)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const uint8_t *p = data + 1, *end = data + size;
  uint8_t flags = data[0];
  uint32_t rank = (flags >> 1) & 7;
  std::string manifestBytes = take(p, end);
  std::string programBytes = take(p, end);
  std::string weights(reinterpret_cast<const char *>(p), end - p);

  std::string dir = smp::fuzz::scratchDir() + "/model.smpx";
  ::mkdir(dir.c_str(), 0700);
  std::string programName = "rank" + std::to_string(rank) + ".program.pb";
  std::string weightsName = "rank" + std::to_string(rank) + ".weights.bin";
  smp::artifact::Manifest manifest;
  if (manifest.ParseFromString(manifestBytes)) {
    for (auto &r : *manifest.mutable_ranks()) {
      if (r.rank() != rank)
        continue;
      std::string framed =
          smprt::frame(programBytes, smprt::FileKind::Artifact);
      if (flags & 1) {
        r.set_program_file(programName);
        r.set_weights_file(weightsName);
        r.set_program_bytes(framed.size());
        r.set_weights_bytes(weights.size());
        r.set_weights_checksum(smprt::checksum64(weights.data(), weights.size()));
      } else {
        if (plainName(r.program_file()))
          programName = r.program_file();
        if (plainName(r.weights_file()) && r.weights_file() != programName)
          weightsName = r.weights_file();
      }
      break;
    }
    if (flags & 1)
      manifest.SerializeToString(&manifestBytes);
  }
  std::vector<std::string> written = {dir + "/manifest.pb",
                                      dir + "/" + programName};
  smp::fuzz::writeFile(
      written[0], smprt::frame(manifestBytes, smprt::FileKind::Artifact).data(),
      smprt::frame(manifestBytes, smprt::FileKind::Artifact).size());
  std::string framedProgram =
      smprt::frame(programBytes, smprt::FileKind::Artifact);
  smp::fuzz::writeFile(written[1], framedProgram.data(), framedProgram.size());
  if (!(flags & 16)) {
    written.push_back(dir + "/" + weightsName);
    smp::fuzz::writeFile(written.back(), weights.data(), weights.size());
  }

  smprt::Artifact artifact;
  smprt::Status s = smprt::loadArtifact(dir, rank, artifact);
  if (s.ok()) {
    std::string bytes;
    s = smprt::readWeights(artifact, bytes);
  }
  if (smp::fuzz::verbose())
    std::fprintf(stderr, "smp-fuzz-artifact: rank %u: %s\n", rank,
                 s.ok() ? "loaded" : s.error.c_str());
  for (const std::string &f : written)
    ::unlink(f.c_str());
  return 0;
}
