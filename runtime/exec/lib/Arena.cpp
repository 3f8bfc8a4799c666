//===- Arena.cpp - A rank's memory for its program's buffers --------------===//

#include "smprt/exec/Arena.h"

namespace smprt {

Arena::~Arena() { release(); }

void Arena::release() {
  if (data_ && backend_)
    host_ ? backend_->releaseHost(data_, size_)
          : backend_->release(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

Status Arena::allocate(Backend &backend, uint64_t bytes, bool host) {
  release();
  backend_ = &backend;
  host_ = host;
  size_ = std::max<uint64_t>(bytes, 1);
  void *p = nullptr;
  Status s =
      host ? backend.allocateHost(size_, &p) : backend.allocate(size_, &p);
  if (!s.ok()) {
    size_ = 0;
    return s;
  }
  data_ = static_cast<char *>(p);
  return Status::success();
}

} // namespace smprt
