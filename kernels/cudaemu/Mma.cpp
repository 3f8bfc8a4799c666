//===- Mma.cpp - The tensor cores' mma.sync and ldmatrix in the emulator --===//
//
// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: every lane of the warp
// puts its A, B and C registers in the warp's slot, the warp meets at a
// __syncwarp (which reports a lane that exited or never arrives, as a GPU
// would hang or fault), lane 0 computes the 16 x 8 product from the
// fragments in PTX's layout (kernels/cuda/Mma.cuh), and the warp meets
// again before each lane takes its C elements back. The 16 products of a C
// element are exact in f32 and added in k order onto c (under
// SMP_CUDAEMU_SUM_ORDER=reverse, added together last to first, then onto
// c): the hardware's order is not specified, so tests compare with a
// tolerance, which ctest's cudaemu.reverse-sums checks holds either way.
//
// ldmatrix.x4 the same way: the lanes' row addresses in the warp's slot, a
// __syncwarp, each lane reads its four registers (PTX's fragment of each
// 8 x 8 matrix, or of its transpose), a __syncwarp.
//
//===----------------------------------------------------------------------===//

#include "smp/cudaemu/Launch.h"

#include "State.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace smp::cudaemu {
namespace {

/// One warp's exchange: the lanes' fragments in, their C elements out.
struct Slot {
  uint32_t a[32][4], b[32][2];
  float c[32][4];
};

/// The warps' slots (launches run one at a time in the process; a block
/// has at most 32 warps).
Slot slots[32];
/// ldmatrix's: the row addresses of each warp's lanes.
const uint16_t *rows[32][32];

/// The running thread's warp in its block.
unsigned warpOf() {
  const ThreadState &s = self();
  return (s.threadIdx.x +
          s.blockDim.x * (s.threadIdx.y + s.blockDim.y * s.threadIdx.z)) /
         32;
}

float halfOf(uint32_t reg, int hi, bool bf16) {
  return halfBitsToFloat(static_cast<uint16_t>(hi ? reg >> 16 : reg & 0xffffu),
                         bf16);
}

/// The warp's product from its slot, in place of the slot's C elements:
/// the 16 x 16 A and 16 x 8 B unpacked from the lanes' registers, each C
/// element plus its 16 products in k order (each product is exact in f32).
void multiply(Slot &w, bool bf16) {
  float a[16][16], b[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    int g = lane / 4, t = lane % 4;
    for (int reg = 0; reg < 4; ++reg)
      for (int hi = 0; hi < 2; ++hi)
        a[g + (reg % 2) * 8][2 * t + hi + (reg / 2) * 8] =
            halfOf(w.a[lane][reg], hi, bf16);
    for (int reg = 0; reg < 2; ++reg)
      for (int hi = 0; hi < 2; ++hi)
        b[2 * t + hi + reg * 8][g] = halfOf(w.b[lane][reg], hi, bf16);
  }
  for (int lane = 0; lane < 32; ++lane) {
    int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      int row = g + (i >= 2 ? 8 : 0), col = 2 * t + i % 2;
      float acc = w.c[lane][i];
      if (reverseSums()) {
        float dot = 0;
        for (int k = 15; k >= 0; --k)
          dot += a[row][k] * b[k][col];
        acc += dot;
      } else {
        for (int k = 0; k < 16; ++k)
          acc += a[row][k] * b[k][col];
      }
      w.c[lane][i] = acc;
    }
  }
}

} // namespace

float halfBitsToFloat(uint16_t bits, bool bf16) {
  if (bf16) {
    uint32_t f = uint32_t(bits) << 16;
    float v;
    std::memcpy(&v, &f, sizeof(v));
    return v;
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

void mmaM16N8K16(bool bf16, float c[4], const uint32_t a[4],
                 const uint32_t b[2]) {
  const ThreadState &s = self();
  unsigned linear =
      s.threadIdx.x +
      s.blockDim.x * (s.threadIdx.y + s.blockDim.y * s.threadIdx.z);
  Slot &warp = slots[linear / 32];
  int lane = laneId();
  std::memcpy(warp.a[lane], a, sizeof(warp.a[lane]));
  std::memcpy(warp.b[lane], b, sizeof(warp.b[lane]));
  std::memcpy(warp.c[lane], c, sizeof(warp.c[lane]));
  syncwarp(0xffffffffu); // every lane's fragments are in
  if (lane == 0)
    multiply(warp, bf16);
  syncwarp(0xffffffffu); // the product is out; the next product's
                         // fragments go in after every lane read it
  std::memcpy(c, warp.c[lane], sizeof(warp.c[lane]));
}

void ldmatrixX4(bool trans, uint32_t r[4], const void *row) {
  const uint16_t **warp = rows[warpOf()];
  int lane = laneId();
  if (reinterpret_cast<uintptr_t>(row) % 16 != 0) {
    report("ldmatrix: lane " + std::to_string(lane) +
           "'s row address is not 16-byte aligned");
    std::abort();
  }
  warp[lane] = static_cast<const uint16_t *>(row);
  syncwarp(0xffffffffu); // every lane's row address is in
  int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const uint16_t *const *m = warp + 8 * i; // matrix i's rows
    uint32_t lo = trans ? m[2 * t][g] : m[g][2 * t];
    uint32_t hi = trans ? m[2 * t + 1][g] : m[g][2 * t + 1];
    r[i] = lo | hi << 16;
  }
  syncwarp(0xffffffffu); // the addresses are read before they change
}

} // namespace smp::cudaemu
