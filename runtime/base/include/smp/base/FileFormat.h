//===- FileFormat.h - Framed, checksummed artifact files --------*- C++ -*-===//
//
// Every protobuf file of an artifact is framed: "SMPX", the format version
// (u32 little endian), a 64-bit checksum of the payload, then the payload.
// The checksum also covers the weights files (stored in the manifest).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_FILEFORMAT_H
#define SMP_BASE_FILEFORMAT_H

#include "smp/base/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace smp::base {

constexpr uint32_t kFormatVersion = 1;
constexpr size_t kFrameHeaderBytes = 16;

/// A fast 64-bit checksum (not cryptographic) of `size` bytes.
uint64_t checksum64(const void *data, size_t size);

/// Header + payload.
std::string frame(const std::string &payload);

/// Checks the header of `bytes` (magic, version, checksum) and returns the
/// payload. `what` names the file in error messages.
Status unframe(const std::string &bytes, const std::string &what,
               std::string &payload);

} // namespace smp::base

#endif // SMP_BASE_FILEFORMAT_H
