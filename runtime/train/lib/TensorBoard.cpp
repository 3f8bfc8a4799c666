//===- TensorBoard.cpp - Scalars in TensorBoard's event files -------------===//

#include "smprt/train/TensorBoard.h"

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace smprt {
namespace {

std::array<uint32_t, 256> crcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? 0x82f63b78u ^ (c >> 1) : c >> 1; // reflected Castagnoli
    t[i] = c;
  }
  return t;
}

// Protobuf wire format: varints, tags, length-delimited fields.
void varint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void tag(std::string &out, int field, int wireType) {
  varint(out, static_cast<uint64_t>(field) << 3 | wireType);
}
void fixed(std::string &out, const void *p, size_t n) { // little-endian host
  out.append(static_cast<const char *>(p), n);
}
void bytesField(std::string &out, int field, const std::string &v) {
  tag(out, field, 2);
  varint(out, v.size());
  out += v;
}
void doubleField(std::string &out, int field, double v) {
  tag(out, field, 1);
  fixed(out, &v, 8);
}
void floatField(std::string &out, int field, float v) {
  tag(out, field, 5);
  fixed(out, &v, 4);
}

std::string eventHeader(double wallTime, int64_t step) {
  std::string e;
  doubleField(e, 1, wallTime);
  if (step != 0) {
    tag(e, 2, 0);
    varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

} // namespace

uint32_t crc32c(const void *data, size_t n) {
  static const std::array<uint32_t, 256> table = crcTable();
  const auto *p = static_cast<const unsigned char *>(data);
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i)
    c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t maskedCrc32c(const void *data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

EventWriter::~EventWriter() {
  if (file_)
    std::fclose(file_);
}

Status EventWriter::open(const std::string &dir) {
  ::mkdir(dir.c_str(), 0755);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::failure(dir + ": cannot create the --tensorboard-dir "
                                 "directory (" +
                           std::strerror(errno) + ")");
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  double now = std::chrono::duration<double>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  path_ = dir + "/events.out.tfevents." +
          std::to_string(static_cast<long long>(now)) + "." + host + "." +
          std::to_string(::getpid()) + ".smprun";
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_)
    return Status::failure(path_ + ": cannot write (" +
                           std::strerror(errno) + ")");
  std::string e = eventHeader(now, 0);
  bytesField(e, 3, "brain.Event:2");
  return record(e);
}

Status EventWriter::record(const std::string &bytes) {
  uint64_t len = bytes.size();
  uint32_t lenCrc = maskedCrc32c(&len, 8), dataCrc =
                                               maskedCrc32c(bytes.data(),
                                                            bytes.size());
  std::string framed;
  fixed(framed, &len, 8);
  fixed(framed, &lenCrc, 4);
  framed += bytes;
  fixed(framed, &dataCrc, 4);
  if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size() ||
      std::fflush(file_) != 0)
    return Status::failure(path_ + ": write failed (" + std::strerror(errno) +
                           ")");
  return Status::success();
}

Status EventWriter::scalars(
    int64_t step, double wallTime,
    const std::vector<std::pair<std::string, double>> &values) {
  std::string summary;
  for (const auto &[name, v] : values) {
    std::string value;
    bytesField(value, 1, name);
    floatField(value, 2, static_cast<float>(v));
    bytesField(summary, 1, value);
  }
  std::string e = eventHeader(wallTime, step);
  bytesField(e, 5, summary);
  return record(e);
}

} // namespace smprt
