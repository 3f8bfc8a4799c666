//===- Arena.h - A rank's memory for its program's buffers ------*- C++ -*-===//

#ifndef SMPRT_EXEC_ARENA_H
#define SMPRT_EXEC_ARENA_H

#include "smprt/Base.h"
#include "smprt/exec/Backend.h"

#include <algorithm>
#include <cstdint>

namespace smprt {

/// One arena per rank, sized by the compile-time memory plan, in the
/// backend's memory (host pages mapped lazily on the CPU, cudaMalloc on a
/// GPU). `highWaterBytes` is the highest arena byte any weight load, input
/// or instruction output has written (measured, to check the plan).
class Arena : NonCopyable {
public:
  ~Arena();
  /// Device memory of `backend`, or its host memory for copies (`host`).
  Status allocate(Backend &backend, uint64_t bytes, bool host);
  char *data() const { return data_; }
  uint64_t size() const { return size_; }
  void touch(uint64_t offset, uint64_t bytes) {
    highWater_ = std::max(highWater_, offset + bytes);
  }
  uint64_t highWaterBytes() const { return highWater_; }

private:
  void release();
  Backend *backend_ = nullptr;
  bool host_ = false;
  char *data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t highWater_ = 0;
};

} // namespace smprt

#endif // SMPRT_EXEC_ARENA_H
