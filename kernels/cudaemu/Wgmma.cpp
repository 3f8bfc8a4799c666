//===- Wgmma.cpp - Hopper's warpgroup products in the emulator ------------===//
//
// wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16} with B in shared
// memory and A there too or in the warps' registers (kernels/cuda/
// Wgmma.cuh): each thread queues the products it issues (its accumulators'
// address, the descriptors, a copy of its A registers) and
// commits them in groups, as the hardware runs them asynchronously. A
// wgmma.wait_group meets the warpgroup's 128 threads (syncWarpgroup, which
// reports a thread that exited or a block without whole warpgroups), checks
// that they issued the same products, and the first thread to run after it
// computes every group the wait covers, oldest first: the operands read
// from shared memory then, through the descriptors (unswizzled; K-major:
// element (r, k) at start + (r / 8) SBO + (k / 8) LBO + (r % 8) 16 +
// (k % 8) 2; B MN-major: (k % 8) 16 + (n % 8) 2 in the core matrix), each
// accumulator written in its thread's registers then. So
// a kernel that reads its accumulators before waiting sees their old
// values, and one that overwrites an operand before waiting feeds the new
// bytes to the product. Sums as Mma.cpp's: the 16 products onto d in k
// order, or under SMP_CUDAEMU_SUM_ORDER=reverse added last to first and
// then onto d.
//
//===----------------------------------------------------------------------===//

#include "smp/cudaemu/Launch.h"

#include "State.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace smp::cudaemu {
namespace {

constexpr unsigned kMaxThreads = 1024, kGroupThreads = 128;

struct Product {
  float *d;
  int n;
  bool bf16, accumulate, aInRegisters, transB;
  uint64_t a, b;
  uint32_t aRegs[4]; // with aInRegisters: the thread's A fragment
  bool sameWork(const Product &o) const {
    return n == o.n && bf16 == o.bf16 && accumulate == o.accumulate &&
           aInRegisters == o.aInRegisters && transB == o.transB &&
           (aInRegisters || a == o.a) && b == o.b;
  }
};

/// A thread's products: issued since its last commit, and committed groups
/// not yet waited for (oldest first); `block` is the block they belong to.
struct Queue {
  uint64_t block = ~uint64_t(0);
  std::vector<Product> open;
  std::vector<std::vector<Product>> groups;
  uint64_t waits = 0; // the thread's wgmma.wait_group calls in this block
};

std::array<Queue, kMaxThreads> queues;
/// Per warpgroup: the waits whose products were computed (by the first of
/// its threads to run after the meeting).
std::array<uint64_t, kMaxThreads / kGroupThreads> computedWaits;

unsigned linearThread() {
  const ThreadState &s = self();
  return s.threadIdx.x +
         s.blockDim.x * (s.threadIdx.y + s.blockDim.y * s.threadIdx.z);
}

/// The calling thread's queue, emptied at the first call of a new block.
Queue &queue() {
  Queue &q = queues[linearThread()];
  uint64_t block = blockSerial();
  if (q.block != block) {
    q = Queue();
    q.block = block;
    if (linearThread() % kGroupThreads == 0)
      computedWaits[linearThread() / kGroupThreads] = 0;
  }
  return q;
}

[[noreturn]] void refuse(const std::string &why) {
  report("wgmma: " + why);
  std::abort();
}

float valueAt(const unsigned char *p, bool bf16) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return halfBitsToFloat(bits, bf16);
}

/// The rows x 16 operand a descriptor names (row r, column k): K-major,
/// or MN-major (each 16 bytes 8 rows of one column k; `mnMajor`).
std::vector<float> operand(uint64_t desc, int rows, bool bf16, bool mnMajor) {
  uint64_t start = (desc & 0x3FFF) << 4, lbo = (desc >> 16 & 0x3FFF) << 4,
           sbo = (desc >> 32 & 0x3FFF) << 4;
  if ((desc >> 49 & 7) != 0 || (desc >> 62) != 0)
    refuse("a descriptor with a swizzle or a base offset (the emulator "
           "knows unswizzled K-major operands only)");
  const auto *shared = static_cast<const unsigned char *>(dynamicShared());
  size_t bytes = dynamicSharedBytes();
  std::vector<float> m(static_cast<size_t>(rows) * 16);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < 16; ++k) {
      uint64_t at =
          start + (r / 8) * sbo + (k / 8) * lbo +
          (mnMajor ? (k % 8) * 16 + (r % 8) * 2 : (r % 8) * 16 + (k % 8) * 2);
      if (at + 2 > bytes)
        refuse("an operand element at byte " + std::to_string(at) +
               " past the launch's " + std::to_string(bytes) +
               " bytes of dynamic shared memory");
      m[r * 16 + k] = valueAt(shared + at, bf16);
    }
  return m;
}

/// Product j of the group: every thread's accumulators (the warpgroup's
/// 64 x n) from their registers, A and B from shared memory.
void compute(std::array<const Product *, kGroupThreads> &p) {
  const Product &w = *p[0];
  std::vector<float> a = w.aInRegisters ? std::vector<float>(64 * 16)
                                        : operand(w.a, 64, w.bf16, false),
                     b = operand(w.b, w.n, w.bf16, w.transB);
  if (w.aInRegisters) // each warp's 16 rows as mma.sync's A fragment
    for (unsigned t = 0; t < kGroupThreads; ++t) {
      int row = static_cast<int>(16 * (t / 32) + t % 32 / 4),
          col = static_cast<int>(2 * (t % 4));
      for (int reg = 0; reg < 4; ++reg)
        for (int hi = 0; hi < 2; ++hi) {
          uint32_t bits = p[t]->aRegs[reg];
          a[(row + reg % 2 * 8) * 16 + col + reg / 2 * 8 + hi] =
              halfBitsToFloat(
                  static_cast<uint16_t>(hi ? bits >> 16 : bits & 0xffffu),
                  w.bf16);
        }
    }
  for (unsigned t = 0; t < kGroupThreads; ++t) {
    int warp = static_cast<int>(t / 32), g = static_cast<int>(t % 32 / 4),
        q = static_cast<int>(t % 4);
    for (int i = 0; i < w.n / 2; ++i) {
      int row = 16 * warp + g + 8 * (i % 4 / 2),
          col = 8 * (i / 4) + 2 * q + i % 2;
      float acc = w.accumulate ? p[t]->d[i] : 0.0f;
      if (reverseSums()) {
        float dot = 0;
        for (int k = 15; k >= 0; --k)
          dot += a[row * 16 + k] * b[col * 16 + k];
        acc += dot;
      } else {
        for (int k = 0; k < 16; ++k)
          acc += a[row * 16 + k] * b[col * 16 + k];
      }
      p[t]->d[i] = acc;
    }
  }
}

} // namespace

uint64_t sharedAddress(const void *p) {
  auto at = reinterpret_cast<uintptr_t>(p),
       base = reinterpret_cast<uintptr_t>(dynamicShared());
  if (at < base || at > base + dynamicSharedBytes())
    refuse("a descriptor of an address outside the launch's dynamic shared "
           "memory (in the emulator, wgmma operands live there)");
  if ((at - base) % 16 != 0)
    refuse("a descriptor of a shared-memory address not 16-byte aligned");
  return at - base;
}

void wgmmaM64K16(bool bf16, int n, float *d, uint64_t descA,
                 const uint32_t *aRegs, uint64_t descB, bool transB,
                 bool accumulate) {
  if (n < 8 || n > 256 || n % 8 != 0)
    refuse("m64n" + std::to_string(n) + "k16: N is 8 to 256 in steps of 8");
  Product p{d, n, bf16, accumulate, aRegs != nullptr, transB, descA, descB, {}};
  if (aRegs)
    std::memcpy(p.aRegs, aRegs, sizeof(p.aRegs));
  queue().open.push_back(p);
}

void wgmmaFence() { queue(); }

void wgmmaCommit() {
  Queue &q = queue();
  q.groups.push_back(std::move(q.open));
  q.open.clear();
}

void wgmmaWait(int n) {
  Queue &mine = queue();
  ++mine.waits;
  syncWarpgroup();
  unsigned group = linearThread() / kGroupThreads;
  if (computedWaits[group] >= mine.waits)
    return; // another thread of the warpgroup computed this wait's groups
  computedWaits[group] = mine.waits;
  unsigned first = group * kGroupThreads;
  const Queue &lead = queues[first]; // what the others are compared with
  size_t keep = static_cast<size_t>(n < 0 ? 0 : n);
  size_t done = mine.groups.size() > keep ? mine.groups.size() - keep : 0;
  for (unsigned t = first; t < first + kGroupThreads; ++t) {
    const Queue &q = queues[t];
    bool same = q.block == lead.block && q.waits == lead.waits &&
                q.groups.size() == lead.groups.size();
    for (size_t g = 0; same && g < q.groups.size(); ++g) {
      same = q.groups[g].size() == lead.groups[g].size();
      for (size_t j = 0; same && j < q.groups[g].size(); ++j)
        same = q.groups[g][j].sameWork(lead.groups[g][j]);
    }
    if (!same)
      refuse("thread " + std::to_string(t) + " of warpgroup " +
             std::to_string(group) +
             " issued, committed or waited for other products than thread " +
             std::to_string(first) +
             " (every thread of a warpgroup issues the same ones)");
  }
  std::array<const Product *, kGroupThreads> p;
  for (size_t g = 0; g < done; ++g)
    for (size_t j = 0; j < mine.groups[g].size(); ++j) {
      for (unsigned t = 0; t < kGroupThreads; ++t)
        p[t] = &queues[first + t].groups[g][j];
      compute(p);
    }
  for (unsigned t = first; t < first + kGroupThreads; ++t) {
    auto &groups = queues[t].groups;
    groups.erase(groups.begin(), groups.begin() + static_cast<long>(done));
  }
}

} // namespace smp::cudaemu
