//===- Artifact.h - Loading and validating model.smpx -----------*- C++ -*-===//

#ifndef SMPRT_EXEC_ARTIFACT_H
#define SMPRT_EXEC_ARTIFACT_H

#include "artifact.pb.h"
#include "smprt/Base.h"

#include <string>

namespace smprt {

/// One rank's view of an artifact, validated: every size, offset, index and
/// checksum was checked before anything large is allocated.
struct Artifact {
  std::string dir;
  smp::artifact::Manifest manifest;
  smp::artifact::RankProgram program;
  std::string weightsPath;
  uint64_t weightsBytes = 0;
  uint64_t weightsChecksum = 0;
};

Status loadArtifact(const std::string &dir, uint32_t rank, Artifact &out);

/// Reads and checks only the manifest of the artifact `dir` (how many ranks
/// it was compiled for, before a rank's files are read).
Status loadManifest(const std::string &dir, smp::artifact::Manifest &out);

/// This machine's physical memory in bytes (UINT64_MAX when the system
/// does not say): what the host pool, a CPU arena and a device's outputs'
/// host copies must fit in.
uint64_t physicalMemory();

/// Reads the rank's weights file, checking its size and checksum.
Status readWeights(const Artifact &artifact, std::string &bytes);

} // namespace smprt

#endif // SMPRT_EXEC_ARTIFACT_H
