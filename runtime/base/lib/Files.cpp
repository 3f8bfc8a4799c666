//===- Files.cpp - File names from the model, safe reads of data files ----===//

#include "smp/base/Files.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace smp::base {

std::string fileNameFor(const std::string &name) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    if (c == '/' || c == '\\' || c == '%' || c < 0x20 || c == 0x7f) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool canWriteFile(const std::string &path, std::string &why) {
  // Create it (and remove it again), or open it as it is if it exists. A
  // file that exists at the first open and is gone at the second was
  // another probe's (or another writer's, renaming its own): try again.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(path.c_str());
      return true;
    }
    if (errno != EEXIST)
      break;
    fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      ::close(fd);
      return true;
    }
    if (errno != ENOENT)
      break;
  }
  why = std::strerror(errno);
  return false;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status RegularFile::open(const std::string &path) {
  path_ = path;
  // O_NONBLOCK: opening a FIFO without a writer must not wait for one.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0)
    return Status::failure(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0)
    return Status::failure(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Status::failure(path + ": not a regular file");
  size_ = static_cast<uint64_t>(st.st_size);
  return Status::success();
}

Status RegularFile::read(uint64_t offset, char *dst, size_t n) const {
  if (offset > size_ || n > size_ - offset)
    return Status::failure(path_ + ": truncated (" + std::to_string(size_) +
                           " bytes)");
  size_t done = 0;
  while (done < n) {
    ssize_t got =
        ::pread(fd_, dst + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return Status::failure(path_ + ": read failed: " + std::strerror(errno));
    if (got == 0)
      return Status::failure(path_ + ": truncated while reading (the file "
                                     "shrank)");
    done += static_cast<size_t>(got);
  }
  return Status::success();
}

Status RegularFile::map(std::shared_ptr<const char> &out) const {
  void *p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (p == MAP_FAILED)
    return Status::failure(path_ + ": cannot map: " + std::strerror(errno));
  size_t bytes = size_;
  out = std::shared_ptr<const char>(static_cast<const char *>(p),
                                    [bytes](const char *q) {
                                      ::munmap(const_cast<char *>(q), bytes);
                                    });
  return Status::success();
}

Status readRegularFile(const std::string &path, std::string &bytes,
                       uint64_t maxBytes) {
  RegularFile file;
  Status s = file.open(path);
  if (!s.ok())
    return s;
  if (file.size() > maxBytes)
    return Status::failure(path + ": " + std::to_string(file.size()) +
                           " bytes, more than the " + std::to_string(maxBytes) +
                           " allowed");
  bytes.resize(file.size());
  return file.read(0, bytes.data(), bytes.size());
}

} // namespace smp::base
