//===- NpyFuzzer.cpp - libFuzzer target: the runtime's .npy reader --------===//
//
// bytes -> DIR/input.npy -> smp::base::readNpy. A file the reader accepts is
// written back with writeNpy and read again: the round trip must give the
// same dtype, shape and bytes (a reader and writer that disagree would
// silently change data).
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "smp/base/Npy.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &dir = smp::fuzz::scratchDir();
  std::string path = dir + "/input.npy";
  smp::fuzz::writeFile(path, data, size);
  smp::base::NpyArray array;
  if (!smp::base::readNpy(path, array).ok())
    return 0;
  std::string copy = dir + "/copy.npy";
  smp::base::NpyArray again;
  smp::base::Status s = smp::base::writeNpy(copy, array.ref());
  if (s.ok())
    s = smp::base::readNpy(copy, again);
  if (!s.ok() || again.dtype != array.dtype || again.shape != array.shape ||
      again.bytes != array.bytes) {
    std::fprintf(stderr, "smp-fuzz-npy: round trip changed the array: %s\n",
                 s.error.c_str());
    std::abort();
  }
  return 0;
}
