//===- Files.h - Names from the model as files; safe reads -*- C++ -*-===//
//
// What smprun trusts and checks about files (docs/threat-model.md):
//
// * A name taken from the model (a graph input or output) never becomes a
//   path by itself: fileNameFor() percent-encodes every byte that could
//   leave the directory or hide in it ('/', '\\', '%', control bytes), so
//   an input named "../secret_in" is read from DIR/..%2Fsecret_in.npy and
//   never from outside DIR. Ordinary names (input_ids, logits,
//   onnx::MatMul_12) are unchanged.
// * A data file is read only if it is a regular file (checked with fstat on
//   the opened descriptor, opened without blocking: a FIFO or a device such
//   as /dev/zero is refused), and only up to the size fstat reported.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_FILES_H
#define SMP_BASE_FILES_H

#include "smp/base/NonCopyable.h"
#include "smp/base/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace smp::base {

/// The file name (without directory or extension) under which the tensor
/// called `name` in the model is read or written: `name` with '/', '\\',
/// '%' and bytes below 0x20 or equal to 0x7f written as %XX (upper-case
/// hex). Injective, so two tensors never share a file.
std::string fileNameFor(const std::string &name);

/// An open, read-only regular file (closed on destruction).
class RegularFile : NonCopyable {
public:
  ~RegularFile();

  /// Opens `path` without blocking and checks, on the descriptor, that it
  /// is a regular file: "PATH: not a regular file" otherwise.
  Status open(const std::string &path);
  uint64_t size() const { return size_; }
  /// Reads exactly `n` bytes at `offset` (an error if the file is shorter).
  Status read(uint64_t offset, char *dst, size_t n) const;
  /// Maps the whole (non-empty) file read-only (private: later writes to
  /// the file by others are not promised to show); unmapped when the last
  /// copy of `out` goes. Pages are read from disk as they are touched.
  Status map(std::shared_ptr<const char> &out) const;

private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// Whether `path` can be written (created, or overwritten), without
/// truncating an existing file or leaving a new one behind; `why` says why
/// not (strerror). Safe while other processes probe the same path at once
/// (every rank of a run checks its --save-onnx file): a file that another
/// probe made and removed between two of this one's calls is probed again.
bool canWriteFile(const std::string &path, std::string &why);

/// Reads the whole regular file `path` into `bytes`, refusing other kinds
/// of file and files larger than `maxBytes` (before allocating).
Status readRegularFile(const std::string &path, std::string &bytes,
                       uint64_t maxBytes = UINT64_MAX);

} // namespace smp::base

#endif // SMP_BASE_FILES_H
