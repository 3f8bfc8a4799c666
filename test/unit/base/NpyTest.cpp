//===- NpyTest.cpp - .npy files read and mapped ----------------------------===//

#include "smp/base/Npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace smp::base {
namespace {

std::string tempPath(const char *name) {
  return ::testing::TempDir() + name + std::to_string(::getpid()) + ".npy";
}

TEST(Npy, MappedDataIsTheReadData) {
  std::vector<int64_t> values(1000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = int64_t(i) * 7 - 300;
  std::string path = tempPath("npy_map");
  ASSERT_TRUE(writeNpy(path, TensorRef{values.data(), DType::I64, {10, 100}}).ok());
  NpyArray read, mapped;
  ASSERT_TRUE(readNpy(path, read).ok());
  ASSERT_TRUE(readNpy(path, mapped, /*map=*/true).ok());
  EXPECT_FALSE(read.mapped);
  ASSERT_TRUE(mapped.mapped);
  EXPECT_TRUE(mapped.bytes.empty());
  EXPECT_EQ(mapped.shape, (std::vector<int64_t>{10, 100}));
  EXPECT_EQ(0, std::memcmp(mapped.data(), values.data(), values.size() * 8));
  EXPECT_EQ(0, std::memcmp(read.data(), values.data(), values.size() * 8));
  // A copy keeps the mapping alive after the original goes, and after the
  // file is removed.
  NpyArray copy = mapped;
  mapped = NpyArray();
  std::remove(path.c_str());
  EXPECT_EQ(0, std::memcmp(copy.data(), values.data(), values.size() * 8));
}

TEST(Npy, Bf16IsWrittenWidenedToFloat32) {
  // numpy has no bf16: the float32 file holds each value exactly.
  const float values[] = {1.0f, -0.0078125f, 3.3895314e38f, 1e-40f};
  std::vector<uint16_t> bits;
  for (float v : values)
    bits.push_back(floatToBf16(v));
  std::string path = tempPath("npy_bf16");
  ASSERT_TRUE(writeNpy(path, TensorRef{bits.data(), DType::BF16, {4}}).ok());
  NpyArray read;
  ASSERT_TRUE(readNpy(path, read).ok());
  std::remove(path.c_str());
  ASSERT_EQ(read.dtype, DType::F32);
  EXPECT_EQ(read.shape, (std::vector<int64_t>{4}));
  for (size_t i = 0; i < bits.size(); ++i) {
    float f;
    std::memcpy(&f, read.data() + 4 * i, 4);
    EXPECT_EQ(floatToBf16(f), bits[i]) << i;
    EXPECT_EQ(f, bf16ToFloat(bits[i])) << i;
  }
}

TEST(Npy, UnalignedDataIsReadNotMapped) {
  // A hand-written version 1.0 header of 117 bytes: the data starts at
  // byte 127, not a multiple of 8.
  std::string dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
  dict.resize(116, ' ');
  dict += '\n';
  std::string path = tempPath("npy_unaligned");
  {
    std::ofstream f(path, std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    char len[2] = {char(dict.size() & 0xff), char(dict.size() >> 8)};
    f.write(len, 2);
    f << dict;
    int64_t v[3] = {5, -6, 7};
    f.write(reinterpret_cast<const char *>(v), sizeof(v));
  }
  NpyArray a;
  ASSERT_TRUE(readNpy(path, a, /*map=*/true).ok());
  EXPECT_FALSE(a.mapped);
  int64_t v[3];
  std::memcpy(v, a.data(), sizeof(v));
  EXPECT_EQ(v[0], 5);
  EXPECT_EQ(v[1], -6);
  EXPECT_EQ(v[2], 7);
  std::remove(path.c_str());
}

} // namespace
} // namespace smp::base
