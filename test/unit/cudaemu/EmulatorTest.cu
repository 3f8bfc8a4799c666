//===- EmulatorTest.cu - The CUDA emulator's own checks -------------------===//
//
// CUDA source (it builds with nvcc too) run through kernels/cudaemu: that
// the emulator computes what a GPU computes (block and grid indices in 3-D,
// shared memory with __syncthreads, warp shuffles, __syncthreads_or,
// atomics, the tensor cores' mma and ldmatrix, cp.async; CublasLtTest.cu
// has cuBLASLt's) and refuses what a GPU refuses or would fault on (launch
// limits and bounds, dynamic shared memory over the kernel's limit, host
// pointers, copies in the wrong direction, barriers that cannot complete,
// shuffles from exited lanes, misaligned copies and vectors), and that it does
// not hide a race behind one thread order (NcclTest.cu has NCCL's).
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "EmuTestUtil.h"

namespace {

using smp::emutest::deviceCopy;
using smp::emutest::hostCopy;

__global__ void linearIndex(int *out) {
  int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  int thread =
      (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  out[block * blockDim.x * blockDim.y * blockDim.z + thread] =
      block * 1000 + thread;
}

TEST(CudaEmu, GridAndBlockIndicesIn3D) {
  dim3 grid(3, 2, 2), block(4, 2, 3);
  int n = 12 * 24;
  int *d;
  ASSERT_EQ(cudaMalloc(&d, n * sizeof(int)), cudaSuccess);
  linearIndex<<<grid, block>>>(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> h = hostCopy(d, n);
  for (int b = 0; b < 12; ++b)
    for (int t = 0; t < 24; ++t)
      EXPECT_EQ(h[b * 24 + t], b * 1000 + t);
  cudaFree(d);
}

/// Per block: the sum by a shared-memory tree (barriers between levels);
/// per warp: the sum by xor shuffles and by down shuffles.
__global__ void sums(const float *in, float *blockOut, float *xorOut,
                     float *downOut) {
  __shared__ float s[256];
  int t = threadIdx.x;
  float v = in[blockIdx.x * blockDim.x + t];
  s[t] = v;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (t < o)
      s[t] += s[t + o];
    __syncthreads();
  }
  if (t == 0)
    blockOut[blockIdx.x] = s[0];
  float x = v, y = v;
  for (int o = 16; o > 0; o >>= 1) {
    x += __shfl_xor_sync(0xffffffffu, x, o);
    y += __shfl_down_sync(0xffffffffu, y, o);
  }
  int warp = (blockIdx.x * blockDim.x + t) / 32;
  xorOut[blockIdx.x * blockDim.x + t] = x; // every lane holds the sum
  if (t % 32 == 0)
    downOut[warp] = y; // lane 0 holds it
}

TEST(CudaEmu, SharedMemoryBarriersAndShuffles) {
  int blocks = 3, threads = 256, n = blocks * threads;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i)
    in[i] = static_cast<float>(i % 17); // small integers: exact sums
  float *din = deviceCopy(in), *b, *x, *w;
  cudaMalloc(&b, blocks * sizeof(float));
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&w, n / 32 * sizeof(float));
  sums<<<blocks, threads>>>(din, b, x, w);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<float> hb = hostCopy(b, blocks), hx = hostCopy(x, n),
                     hw = hostCopy(w, n / 32);
  for (int k = 0; k < blocks; ++k) {
    float want = 0;
    for (int i = 0; i < threads; ++i)
      want += in[k * threads + i];
    EXPECT_EQ(hb[k], want) << "block " << k;
  }
  for (int warp = 0; warp < n / 32; ++warp) {
    float want = 0;
    for (int i = 0; i < 32; ++i)
      want += in[warp * 32 + i];
    EXPECT_EQ(hw[warp], want) << "warp " << warp;
    for (int i = 0; i < 32; ++i)
      EXPECT_EQ(hx[warp * 32 + i], want) << "lane " << i;
  }
  cudaFree(din);
  cudaFree(b);
  cudaFree(x);
  cudaFree(w);
}

__global__ void anyOver(const int *in, int threshold, int *out) {
  int v = in[threadIdx.x];
  out[threadIdx.x] = __syncthreads_or(v > threshold);
}

__global__ void histogram(const int *in, int *bins) {
  atomicAdd(&bins[in[blockIdx.x * blockDim.x + threadIdx.x]], 1);
}

TEST(CudaEmu, SyncthreadsOrAndAtomics) {
  std::vector<int> in(64);
  for (int i = 0; i < 64; ++i)
    in[i] = i % 5;
  int *d = deviceCopy(in), *out, *bins;
  cudaMalloc(&out, 64 * sizeof(int));
  anyOver<<<1, 64>>>(d, 3, out);
  for (int v : hostCopy(out, 64))
    EXPECT_EQ(v, 1);
  anyOver<<<1, 64>>>(d, 4, out);
  for (int v : hostCopy(out, 64))
    EXPECT_EQ(v, 0);
  cudaMalloc(&bins, 5 * sizeof(int));
  cudaMemset(bins, 0, 5 * sizeof(int));
  histogram<<<2, 32>>>(d, bins);
  std::vector<int> hb = hostCopy(bins, 5);
  EXPECT_EQ(hb, (std::vector<int>{13, 13, 13, 13, 12}));
  cudaFree(d);
  cudaFree(out);
  cudaFree(bins);
}

/// Reads a neighbour's shared value with no barrier between the write and
/// the read: a race a GPU may or may not show.
__global__ void racyNeighbour(int *out) {
  __shared__ int s[64];
  s[threadIdx.x] = threadIdx.x;
  out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

TEST(CudaEmu, DoesNotHideAMissingBarrier) {
  int *out;
  cudaMalloc(&out, 64 * sizeof(int));
  racyNeighbour<<<1, 64>>>(out);
  std::vector<int> h = hostCopy(out, 64);
  int right = 0;
  for (int i = 0; i < 64; ++i)
    right += h[i] == (i + 1) % 64;
  EXPECT_LT(right, 64) << "every thread saw its neighbour's write although "
                          "no barrier orders them";
  cudaFree(out);
}

__global__ void touch(int *p) {
  extern __shared__ int dyn[];
  dyn[threadIdx.x] = threadIdx.x;
  __syncthreads();
  p[threadIdx.x] = dyn[(threadIdx.x + 1) % blockDim.x];
}

TEST(CudaEmu, RefusesLaunchesAGpuRefuses) {
  int *d;
  ASSERT_EQ(cudaMalloc(&d, 1024 * sizeof(int)), cudaSuccess);
  // The default (48 KB), which an earlier run of this test (--gtest_repeat)
  // raised below: the attribute belongs to the kernel for the process.
  ASSERT_EQ(cudaFuncSetAttribute(
                touch, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 * 1024),
            cudaSuccess);
  touch<<<1, 1025, 1025 * sizeof(int)>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  touch<<<dim3(1, 65536), 32, 32 * sizeof(int)>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  touch<<<1, 32, 64 * 1024>>>(d); // over 48 KB without the attribute
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncSetAttribute(
                touch, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
            cudaSuccess);
  touch<<<1, 32, 64 * 1024>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> h = hostCopy(d, 32);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(h[i], (i + 1) % 32);
  // A copy whose kind does not match its pointers, or past an allocation.
  int other[4] = {};
  EXPECT_EQ(cudaMemcpy(other, d, sizeof other, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d + 1022, other, sizeof other, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  cudaGetLastError();
  cudaFree(d);
}

__global__ void __launch_bounds__(64) bounded(int *p) {
  p[threadIdx.x] = threadIdx.x;
}

__global__ void unbounded(int *p) { p[threadIdx.x] = threadIdx.x; }

// A block over the kernel's __launch_bounds__ is refused as a GPU refuses
// it; a kernel without them runs blocks of up to 256 threads (smp's rule:
// ptxas may give it 255 registers a thread, which a larger block may not
// hold). Neither runs: the output keeps the NaN pattern of fresh memory.
TEST(CudaEmu, RefusesBlocksOverTheKernelsLaunchBounds) {
  int *d;
  ASSERT_EQ(cudaMalloc(&d, 1024 * sizeof(int)), cudaSuccess);
  bounded<<<1, 128>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchOutOfResources);
  unbounded<<<1, 512>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchOutOfResources);
  EXPECT_EQ(hostCopy(d, 1)[0], -1);
  bounded<<<1, 64>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  unbounded<<<1, 256>>>(d + 64);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> h = hostCopy(d, 320);
  for (int i = 0; i < 320; ++i)
    EXPECT_EQ(h[i], i < 64 ? i : i - 64);
  cudaFree(d);
}

__global__ void barrierOrShuffle(float *out) {
  float v = threadIdx.x;
  if (threadIdx.x < 16)
    __syncthreads();
  else
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

__global__ void shuffleFromExited(float *out) {
  if (threadIdx.x >= 16)
    return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}

// A fault is sticky for the rest of the process (as on a GPU): each of
// these runs in a child process, which exits 0 when the synchronisation
// after `kernel` on one warp reports `want`.
template <class K> void launchExpecting(K kernel, cudaError_t want) {
  float *d;
  cudaMalloc(&d, 32 * sizeof(float));
  kernel<<<1, 32>>>(d);
  std::exit(cudaDeviceSynchronize() == want ? 0 : 1);
}

TEST(CudaEmuDeathTest, ReportsBarriersThatCannotComplete) {
  EXPECT_EXIT(launchExpecting(barrierOrShuffle, cudaErrorLaunchFailure),
              testing::ExitedWithCode(0), "a GPU would hang");
  EXPECT_EXIT(launchExpecting(shuffleFromExited, cudaErrorLaunchFailure),
              testing::ExitedWithCode(0), "has exited");
}

TEST(CudaEmuDeathTest, ReportsHostPointers) {
  EXPECT_EXIT(
      {
        std::vector<int> host(64);
        linearIndex<<<1, 64>>>(host.data());
        std::exit(cudaDeviceSynchronize() == cudaErrorIllegalAddress ? 0 : 1);
      },
      testing::ExitedWithCode(0), "not device memory");
}

//===----------------------------------------------------------------------===//
// Tensor cores: mma.sync.m16n8k16
//===----------------------------------------------------------------------===//

/// Two halves in one register, the first in the low bits.
__device__ uint32_t pairOf(const __nv_bfloat16 *p, int stride) {
  uint16_t lo, hi;
  std::memcpy(&lo, p, 2);
  std::memcpy(&hi, p + stride, 2);
  return lo | uint32_t(hi) << 16;
}

/// Each warp: c (16 x 8, row-major) += a (16 x 16, row-major) b (16 x 8,
/// row-major), its fragments gathered in PTX's layout (PTX ISA, "Matrix
/// Fragments for mma.m16n8k16 with floating point type"); warp w works on
/// the w-th set of matrices.
__global__ void mmaTile(const __nv_bfloat16 *a, const __nv_bfloat16 *b,
                        float *c) {
  int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  a += w * 256, b += w * 128, c += w * 128;
  uint32_t fa[4] = {pairOf(a + g * 16 + 2 * t, 1),
                    pairOf(a + (g + 8) * 16 + 2 * t, 1),
                    pairOf(a + g * 16 + 2 * t + 8, 1),
                    pairOf(a + (g + 8) * 16 + 2 * t + 8, 1)};
  uint32_t fb[2] = {pairOf(b + 2 * t * 8 + g, 8),
                    pairOf(b + (2 * t + 8) * 8 + g, 8)};
  float fc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                 c[(g + 8) * 8 + 2 * t + 1]};
  ::smp::cudaemu::mmaM16N8K16(true, fc, fa, fb);
  c[g * 8 + 2 * t] = fc[0];
  c[g * 8 + 2 * t + 1] = fc[1];
  c[(g + 8) * 8 + 2 * t] = fc[2];
  c[(g + 8) * 8 + 2 * t + 1] = fc[3];
}

TEST(CudaEmu, MmaM16N8K16IsTheProductInPtxLayout) {
  int warps = 2;
  std::vector<__nv_bfloat16> a(warps * 256), b(warps * 128);
  std::vector<float> c(warps * 128);
  // Small integers: every product and sum is exact.
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = __float2bfloat16(float(int(i * 7 % 13) - 6));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = __float2bfloat16(float(int(i * 5 % 11) - 5));
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = float(i % 9);
  __nv_bfloat16 *da = deviceCopy(a), *db = deviceCopy(b);
  float *dc = deviceCopy(c);
  mmaTile<<<1, warps * 32>>>(da, db, dc);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<float> got = hostCopy(dc, c.size());
  for (int w = 0; w < warps; ++w)
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        float want = c[w * 128 + i * 8 + j];
        for (int k = 0; k < 16; ++k)
          want += __bfloat162float(a[w * 256 + i * 16 + k]) *
                  __bfloat162float(b[w * 128 + k * 8 + j]);
        EXPECT_EQ(got[w * 128 + i * 8 + j], want)
            << "warp " << w << " C[" << i << "][" << j << "]";
      }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

// The order the tensor cores' mma sums in: its 16 products onto C in k
// order, or (SMP_CUDAEMU_SUM_ORDER=reverse, ctest's
// cudaemu.reverse-sums-order) together last to first and then onto C, told
// apart by C = 2^24 and sixteen products of 1: in k order each 1 added to
// 2^24 rounds away; the products summed first add 16.
TEST(CudaEmu, MmaSumsInTheOrderAsked) {
  const float big = 16777216.0f;
  const float want = smp::emutest::reverseSums() ? big + 16 : big;
  std::vector<__nv_bfloat16> a(256, __float2bfloat16(1.0f)),
      b(128, __float2bfloat16(1.0f));
  std::vector<float> c(128, big);
  __nv_bfloat16 *da = deviceCopy(a), *db = deviceCopy(b);
  float *dc = deviceCopy(c);
  mmaTile<<<1, 32>>>(da, db, dc);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (float v : hostCopy(dc, 128))
    EXPECT_EQ(v, want);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

/// ldmatrix.x4 (and .trans) of four 8 x 8 matrices of a 16 x 16 tile in
/// dynamic shared memory (row stride 24 elements): lane l's four registers
/// to out[l][0..3] and out[32 + l][0..3].
__global__ void ldmatrixTile(const uint16_t *in, uint32_t *out) {
  extern __shared__ uint16_t tile[];
  for (int e = threadIdx.x; e < 16 * 16; e += 32)
    tile[e / 16 * 24 + e % 16] = in[e];
  __syncwarp();
  int l = threadIdx.x, i = l / 8;
  // Matrix i: rows 8 (i % 2), columns 8 (i / 2) of the tile.
  const uint16_t *row = tile + (l % 8 + i % 2 * 8) * 24 + i / 2 * 8;
  uint32_t r[4], rt[4];
  ::smp::cudaemu::ldmatrixX4(false, r, row);
  ::smp::cudaemu::ldmatrixX4(true, rt, row);
  for (int k = 0; k < 4; ++k) {
    out[l * 4 + k] = r[k];
    out[(32 + l) * 4 + k] = rt[k];
  }
}

TEST(CudaEmu, LdmatrixGivesEachLaneItsFragment) {
  std::vector<uint16_t> in(256);
  for (int e = 0; e < 256; ++e)
    in[e] = static_cast<uint16_t>(e); // row e / 16, column e % 16
  uint16_t *din = deviceCopy(in);
  uint32_t *dout;
  cudaMalloc(&dout, 64 * 4 * sizeof(uint32_t));
  ldmatrixTile<<<1, 32, 16 * 24 * sizeof(uint16_t)>>>(din, dout);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<uint32_t> got = hostCopy(dout, 64 * 4);
  // PTX ISA, ldmatrix: lane l holds row l / 4, columns 2 (l % 4) and
  // 2 (l % 4) + 1 of each matrix; with .trans, those of its transpose.
  auto at = [&](int m, int row, int col) {
    return uint32_t((row + m % 2 * 8) * 16 + col + m / 2 * 8);
  };
  for (int l = 0; l < 32; ++l)
    for (int m = 0; m < 4; ++m) {
      int g = l / 4, t = l % 4;
      EXPECT_EQ(got[l * 4 + m], at(m, g, 2 * t) | at(m, g, 2 * t + 1) << 16)
          << "lane " << l << " matrix " << m;
      EXPECT_EQ(got[(32 + l) * 4 + m], at(m, 2 * t, g) | at(m, 2 * t + 1, g)
                                                             << 16)
          << "lane " << l << " matrix " << m << " (.trans)";
    }
  cudaFree(din);
  cudaFree(dout);
}

/// cp.async: out[0] before any wait, out[1] after waiting for all but the
/// newest group (the first group's copy), out[2] after waiting for all.
__global__ void asyncCopies(const int *in, int *out) {
  __shared__ __align__(16) int a[4], b[4];
  a[0] = -1;
  b[0] = -1;
  ::smp::cudaemu::cpAsync(a, in, 16);
  ::smp::cudaemu::cpAsyncCommit();
  ::smp::cudaemu::cpAsync(b, in + 4, 16);
  ::smp::cudaemu::cpAsyncCommit();
  out[0] = a[0];
  ::smp::cudaemu::cpAsyncWait(1);
  out[1] = a[0] * 100 + b[0];
  ::smp::cudaemu::cpAsyncWait(0);
  out[2] = b[0];
}

TEST(CudaEmu, CpAsyncLandsWhenItsGroupIsWaitedFor) {
  std::vector<int> in = {7, 0, 0, 0, 9, 0, 0, 0};
  int *din = deviceCopy(in), *dout;
  cudaMalloc(&dout, 3 * sizeof(int));
  asyncCopies<<<1, 1>>>(din, dout);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> got = hostCopy(dout, 3);
  EXPECT_EQ(got[0], -1);          // not copied yet
  EXPECT_EQ(got[1], 7 * 100 - 1); // the first group only
  EXPECT_EQ(got[2], 9);
  cudaFree(din);
  cudaFree(dout);
}

__global__ void exitsWithCopiesInFlight(float *out) {
  __shared__ __align__(16) float a[4];
  ::smp::cudaemu::cpAsync(a, out, 16);
  ::smp::cudaemu::cpAsyncCommit();
}

TEST(CudaEmuDeathTest, ReportsCopiesNeverWaitedFor) {
  EXPECT_EXIT(launchExpecting(exitsWithCopiesInFlight, cudaErrorLaunchFailure),
              testing::ExitedWithCode(0), "never waited for");
}

__global__ void misalignedCopy(float *out) {
  __shared__ __align__(16) float a[8];
  ::smp::cudaemu::cpAsync(a, out + 1, 16); // 4 bytes past 16-byte alignment
  ::smp::cudaemu::cpAsyncCommit();
  ::smp::cudaemu::cpAsyncWait(0);
}

__global__ void misalignedVector(float *out) {
  const float4 *v = reinterpret_cast<const float4 *>(out + 1);
  float4 x = *v; // a GPU faults: a 16-byte load 4 bytes past alignment
  out[threadIdx.x] = x.x;
}

// What x86 does and a GPU faults on: a 16-byte cp.async or vector load
// from an address not 16-byte aligned (the emulator's translated code
// checks every typed access's alignment: UBSan's, fatal).
TEST(CudaEmuDeathTest, ReportsMisalignedCopiesAndVectors) {
  EXPECT_DEATH(launchExpecting(misalignedCopy, cudaSuccess),
               "cp.async of 16 bytes .* not aligned");
  EXPECT_DEATH(launchExpecting(misalignedVector, cudaSuccess),
               "misaligned address");
}

__global__ void overflowsAnInt(float *out) {
  int i = 2147483647 - 16 + static_cast<int>(threadIdx.x); // lane 16 on
  out[threadIdx.x] = static_cast<float>(i + 1);
}

// An index computed in 32 bits that a large grid overflows: the translated
// sources check signed overflow (UBSan's, fatal), so a full-size model's
// last block (SMP_CUDAEMU_DRY_RUN=edges runs it) shows it.
TEST(CudaEmuDeathTest, ReportsSignedOverflow) {
  EXPECT_DEATH(launchExpecting(overflowsAnInt, cudaSuccess),
               "signed integer overflow");
}

__global__ void blockIndices(int *out) {
  if (threadIdx.x == 0)
    out[blockIdx.x] = static_cast<int>(blockIdx.x) + 1;
}

// SMP_CUDAEMU_DRY_RUN=edges (ctest's cudaemu.dry-run-edges; skipped
// otherwise): a launch of more than 1,024 blocks runs its first and last
// only, one of 1,024 or fewer all of them; fresh memory reads as zeros.
TEST(CudaEmu, DryRunOfTheEdgesRunsTheFirstAndLastBlocks) {
  const char *mode = std::getenv("SMP_CUDAEMU_DRY_RUN");
  if (!mode || std::string(mode) != "edges")
    GTEST_SKIP() << "runs under SMP_CUDAEMU_DRY_RUN=edges";
  int *d;
  ASSERT_EQ(cudaMalloc(&d, 4096 * sizeof(int)), cudaSuccess);
  blockIndices<<<4096, 32>>>(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> h = hostCopy(d, 4096);
  for (int b = 0; b < 4096; ++b)
    EXPECT_EQ(h[b], b == 0 || b == 4095 ? b + 1 : 0) << "block " << b;
  blockIndices<<<1024, 32>>>(d + 1024);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  h = hostCopy(d + 1024, 1024);
  for (int b = 0; b < 1024; ++b)
    EXPECT_EQ(h[b], b + 1) << "block " << b;
  cudaFree(d);
}

__global__ void mmaOnHalfAWarp(float *out) {
  if (threadIdx.x >= 16)
    return;
  float c[4] = {};
  uint32_t a[4] = {}, b[2] = {};
  ::smp::cudaemu::mmaM16N8K16(true, c, a, b);
  out[threadIdx.x] = c[0];
}

TEST(CudaEmuDeathTest, ReportsAnMmaWithoutTheWholeWarp) {
  EXPECT_EXIT(launchExpecting(mmaOnHalfAWarp, cudaErrorLaunchFailure),
              testing::ExitedWithCode(0), "has exited");
}

/// A wgmma wait of one warp: a warpgroup is four.
__global__ void wgmmaOnOneWarp(float *out) {
  ::smp::cudaemu::wgmmaWait(0);
  out[threadIdx.x] = 0;
}

/// A warpgroup whose thread 5 issues a product the others do not.
__global__ void wgmmaDiverging(float *out) {
  extern __shared__ unsigned char tiles[];
  float d[8] = {};
  uint64_t at = ::smp::cudaemu::sharedAddress(tiles);
  ::smp::cudaemu::wgmmaM64K16(true, 16, d, at >> 4, nullptr,
                              (at >> 4) + (threadIdx.x == 5), false, false);
  ::smp::cudaemu::wgmmaCommit();
  ::smp::cudaemu::wgmmaWait(0);
  out[threadIdx.x] = d[0];
}

void launchWgmmaDiverging() {
  float *d;
  cudaMalloc(&d, 128 * sizeof(float));
  wgmmaDiverging<<<1, 128, 4096>>>(d);
  cudaDeviceSynchronize();
}

TEST(CudaEmuDeathTest, ReportsWgmmaWithoutItsWholeWarpgroup) {
  EXPECT_EXIT(launchExpecting(wgmmaOnOneWarp, cudaErrorLaunchFailure),
              testing::ExitedWithCode(0), "a warpgroup is 4 whole warps");
  EXPECT_DEATH(launchWgmmaDiverging(), "thread 5 of warpgroup 0 issued");
}

} // namespace
