//===- FileFormat.h - Framed, checksummed artifact files --------*- C++ -*-===//
//
// Every protobuf file of an artifact and every checkpoint index is framed:
// "SMPX", the format version (u32 little endian), a 64-bit checksum of the
// payload, then the payload. The checksum also covers the weights files
// (stored in the manifest). Artifacts and checkpoints have their own format
// versions: a file of another version is refused with what to do.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_FILEFORMAT_H
#define SMP_BASE_FILEFORMAT_H

#include "smp/base/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace smp::base {

/// What a framed file is: an artifact's manifest or rank program (written
/// by smpc), or a checkpoint index (written by smprun).
enum class FileKind { Artifact, Checkpoint };

/// The format versions this build writes and reads. 2: a tensor's parallel
/// layout is one Layout message (runtime/proto/layout.proto). Artifacts 3:
/// attention's log-sum-exp is [B, H, S, 2] (its maximum and log of the sum;
/// a version-2 artifact's [B, H, S] would fail the kernels' checks).
constexpr uint32_t kArtifactFormatVersion = 3;
constexpr uint32_t kCheckpointFormatVersion = 2;
constexpr size_t kFrameHeaderBytes = 16;

/// The format version of files of `kind`.
uint32_t formatVersion(FileKind kind);

/// A fast 64-bit checksum (not cryptographic) of `size` bytes.
uint64_t checksum64(const void *data, size_t size);

/// Header (with the format version of `kind`) + payload.
std::string frame(const std::string &payload, FileKind kind);

/// Checks the header of `bytes` (magic, the format version of `kind`,
/// checksum) and returns the payload. `what` names the file in error
/// messages; a file of another version gets one saying what to do with it.
Status unframe(const std::string &bytes, const std::string &what,
               std::string &payload, FileKind kind);

} // namespace smp::base

#endif // SMP_BASE_FILEFORMAT_H
