//===- Npy.cpp - NumPy .npy files -----------------------------------------===//

#include "smp/base/Npy.h"

#include "smp/base/Files.h"
#include "smp/base/Shape.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace smp::base {
namespace {

struct DescrEntry {
  const char *descr;
  DType dtype;
};
const DescrEntry kDescrs[] = {
    {"<f4", DType::F32},  {"<f8", DType::F64}, {"<f2", DType::F16},
    {"|b1", DType::Bool}, {"|i1", DType::I8},  {"<i2", DType::I16},
    {"<i4", DType::I32},  {"<i8", DType::I64}, {"|u1", DType::U8},
    {"<u2", DType::U16},  {"<u4", DType::U32}, {"<u8", DType::U64},
};

const char *descrOf(DType t) {
  for (const auto &e : kDescrs)
    if (e.dtype == t)
      return e.descr;
  return nullptr;
}

/// The value of `key` in the header dict, as written by numpy.
std::string headerField(const std::string &header, const std::string &key) {
  auto pos = header.find("'" + key + "'");
  if (pos == std::string::npos)
    return "";
  pos = header.find(':', pos);
  if (pos == std::string::npos)
    return "";
  ++pos;
  while (pos < header.size() && header[pos] == ' ')
    ++pos;
  if (pos >= header.size())
    return "";
  char open = header[pos];
  char close = open == '\'' ? '\'' : open == '(' ? ')' : ',';
  auto end = header.find(close, pos + 1);
  if (end == std::string::npos)
    return "";
  return header.substr(pos, end - pos + 1);
}

} // namespace

Status readNpy(const std::string &path, NpyArray &out, bool map) {
  // A regular file only (a directory, FIFO or device is refused before
  // anything is read), and no more than its size is ever allocated.
  RegularFile file;
  Status s = file.open(path);
  if (!s.ok())
    return s;
  uint64_t size = file.size();
  char prefix[12];
  if (size < 10 || !file.read(0, prefix, 10).ok() ||
      std::memcmp(prefix, "\x93NUMPY", 6) != 0)
    return Status::failure(path + ": not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(prefix[6]);
  uint64_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(prefix[8]) |
                (static_cast<unsigned char>(prefix[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12 || !file.read(0, prefix, 12).ok())
      return Status::failure(path + ": truncated .npy header");
    headerLen = 0;
    for (int b = 0; b < 4; ++b)
      headerLen |=
          static_cast<uint64_t>(static_cast<unsigned char>(prefix[8 + b]))
          << (8 * b);
    headerStart = 12;
  } else {
    return Status::failure(path + ": unsupported .npy version " +
                           std::to_string(major));
  }
  if (headerLen > size - headerStart)
    return Status::failure(path + ": truncated .npy header");
  std::string header(headerLen, '\0');
  if (!(s = file.read(headerStart, header.data(), headerLen)).ok())
    return s;
  std::string descr = headerField(header, "descr");
  bool found = false;
  for (const auto &e : kDescrs)
    if (descr == std::string("'") + e.descr + "'") {
      out.dtype = e.dtype;
      found = true;
    }
  if (!found)
    return Status::failure(path + ": unsupported dtype " + descr +
                           " (little-endian numeric or bool arrays only)");
  if (headerField(header, "fortran_order") != "False,")
    return Status::failure(path + ": Fortran-order arrays are not supported");
  std::string shape = headerField(header, "shape");
  out.shape.clear();
  std::stringstream ss(shape.size() > 2 ? shape.substr(1, shape.size() - 2)
                                        : "");
  std::string item;
  constexpr int64_t kMaxElements = int64_t(1) << 40;
  int64_t numel = 1;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos)
      continue;
    char *end;
    errno = 0;
    long long d = std::strtoll(item.c_str(), &end, 10);
    if (errno || end == item.c_str() ||
        std::string(end).find_first_not_of(' ') != std::string::npos || d < 0 ||
        d > kMaxElements)
      return Status::failure(path + ": bad shape " + shape);
    out.shape.push_back(d);
    // Checked: the product of dims up to 2^40 each overflows int64.
    if (!checkedMul(numel, static_cast<int64_t>(d), numel) ||
        numel > kMaxElements)
      return Status::failure(path + ": shape " + shape + " is too large");
  }
  uint64_t payload = size - headerStart - headerLen;
  uint64_t expected = static_cast<uint64_t>(numel) * dtypeSize(out.dtype);
  if (payload != expected)
    return Status::failure(path + ": holds " + std::to_string(payload) +
                           " data bytes but shape " + shape + " of " +
                           dtypeName(out.dtype) + " needs " +
                           std::to_string(expected));
  uint64_t offset = headerStart + headerLen;
  out.mapped.reset();
  out.mappedData = nullptr;
  if (map && offset % dtypeSize(out.dtype) == 0) {
    out.bytes.clear();
    if (!(s = file.map(out.mapped)).ok())
      return s;
    out.mappedData = out.mapped.get() + offset;
    return Status::success();
  }
  out.bytes.resize(expected);
  return file.read(offset, out.bytes.data(), expected);
}

Status writeNpy(const std::string &path, const TensorRef &tensor) {
  // numpy has no bf16: widened to float32, exactly.
  TensorRef t = tensor;
  std::string widened;
  if (t.dtype == DType::BF16) {
    widened.resize(t.numel() * sizeof(float));
    convertFloats(t.data, DType::BF16, widened.data(), DType::F32, t.numel());
    t = TensorRef{widened.data(), DType::F32, t.shape};
  }
  const char *descr = descrOf(t.dtype);
  if (!descr)
    return Status::failure(path + ": cannot write dtype " +
                           std::string(dtypeName(t.dtype)) + " as .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i)
    shape += std::to_string(t.shape[i]) + (t.shape.size() == 1      ? ","
                                           : i + 1 < t.shape.size() ? ", "
                                                                    : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Status::failure(path + ": cannot write");
    out.write("\x93NUMPY\x01\x00", 8);
    char len[2] = {static_cast<char>(header.size() & 0xff),
                   static_cast<char>(header.size() >> 8)};
    out.write(len, 2);
    out << header;
    out.write(static_cast<const char *>(t.data), t.bytes());
    if (!out)
      return Status::failure(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::failure(path + ": cannot rename the written file");
  return Status::success();
}

} // namespace smp::base
