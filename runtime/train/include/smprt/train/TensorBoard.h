//===- TensorBoard.h - Scalars in TensorBoard's event files -----*- C++ -*-===//
//
// Writes the scalars of each step as a TensorBoard event file
// (DIR/events.out.tfevents.<unix time>.<host>.<pid>.smprun): TFRecord framing
// (little-endian uint64 length, masked CRC-32C of the length, the record,
// masked CRC-32C of the record) around protobuf `Event` messages encoded by
// hand with the field numbers of TensorFlow's event.proto and summary.proto:
//
//   Event   { double wall_time = 1; int64 step = 2;
//             oneof what { string file_version = 3; Summary summary = 5; } }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
//
// The first record is the file_version "brain.Event:2" event, as
// tensorflow's and PyTorch's writers begin.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_TENSORBOARD_H
#define SMPRT_TRAIN_TENSORBOARD_H

#include "smprt/Base.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace smprt {

/// CRC-32C (Castagnoli) of `n` bytes, and TFRecord's masked form of it.
uint32_t crc32c(const void *data, size_t n);
uint32_t maskedCrc32c(const void *data, size_t n);

class EventWriter : NonCopyable {
public:
  ~EventWriter();

  /// Creates `dir` if missing and a new event file in it.
  Status open(const std::string &dir);
  bool isOpen() const { return file_ != nullptr; }
  const std::string &path() const { return path_; }

  /// One event of `step` with a simple_value per (tag, value), flushed.
  Status scalars(int64_t step, double wallTime,
                 const std::vector<std::pair<std::string, double>> &values);

private:
  Status record(const std::string &bytes);
  FILE *file_ = nullptr;
  std::string path_;
};

} // namespace smprt

#endif // SMPRT_TRAIN_TENSORBOARD_H
