//===- EmulatorTest.cu - The CUDA emulator's own checks -------------------===//
//
// CUDA source (it builds with nvcc too) run through kernels/cudaemu: that
// the emulator computes what a GPU computes (block and grid indices in 3-D,
// shared memory with __syncthreads, warp shuffles, __syncthreads_or,
// atomics, cuBLASLt's products against a loop) and refuses what a GPU
// refuses or would fault on (launch limits, dynamic shared memory over the
// kernel's limit, host pointers, copies in the wrong direction, barriers
// that cannot complete, shuffles from exited lanes, cuBLASLt operands that
// overrun their allocation or break the promised alignment), and that it
// does not hide a race behind one thread order.
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

template <class T> T *deviceCopy(const std::vector<T> &h) {
  T *d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, h.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(
      cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice),
      cudaSuccess);
  return d;
}

template <class T> std::vector<T> hostCopy(const T *d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return h;
}

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

//===----------------------------------------------------------------------===//
// cuBLASLt
//===----------------------------------------------------------------------===//

struct Lt {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t heur{};
  ~Lt() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
  }
  /// Column-major D (m x n) = op(A) op(B) (+ bias[i] on row i when `bias`,
  /// of type biasType: -1 is D's), batches `count` apart by their sizes;
  /// alignment promised for every operand.
  cublasStatus_t plan(cudaDataType_t t, bool ta, bool tb, int m, int n, int k,
                      int count, uint32_t align, const void *bias = nullptr,
                      int32_t biasType = -1) {
    cublasLtCreate(&h);
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (bias) {
      uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                     &epilogue, sizeof epilogue);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                     &bias, sizeof bias);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                     &biasType, sizeof biasType);
    }
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &oa,
                                   sizeof oa);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ob,
                                   sizeof ob);
    auto layout = [&](cublasLtMatrixLayout_t &l, int r, int cl) {
      cublasLtMatrixLayoutCreate(&l, t, r, cl, r);
      int64_t stride = int64_t(r) * cl;
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                       &count, sizeof count);
      cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof stride);
    };
    layout(a, ta ? k : m, ta ? m : k);
    layout(b, tb ? n : k, tb ? k : n);
    layout(c, m, n);
    cublasLtMatmulPreferenceCreate(&pref);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align);
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(h, op, a, b, c, c, pref,
                                                      1, &heur, &found);
    return s == CUBLAS_STATUS_SUCCESS && found == 1
               ? s
               : CUBLAS_STATUS_NOT_SUPPORTED;
  }
  cublasStatus_t run(const void *A, const void *B, void *D) {
    float alpha = 1, beta = 0;
    return cublasLtMatmul(h, op, &alpha, A, a, B, b, &beta, D, c, D, c,
                          &heur.algo, nullptr, 0, nullptr);
  }
};

TEST(CudaEmu, CublasLtProductsMatchALoop) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  const int m = 5, n = 3, k = 7, count = 2;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      std::vector<float> A(m * k * count), B(k * n * count);
      for (float &v : A)
        v = u(rng);
      for (float &v : B)
        v = u(rng);
      float *dA = deviceCopy(A), *dB = deviceCopy(B), *dD;
      cudaMalloc(&dD, m * n * count * sizeof(float));
      Lt lt;
      ASSERT_EQ(lt.plan(CUDA_R_32F, ta, tb, m, n, k, count, 4),
                CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(lt.run(dA, dB, dD), CUBLAS_STATUS_SUCCESS);
      std::vector<float> D = hostCopy(dD, m * n * count);
      for (int bi = 0; bi < count; ++bi)
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) {
            double want = 0;
            for (int p = 0; p < k; ++p) {
              // Column-major storage of A (m x k or k x m) and B.
              float x =
                  ta ? A[bi * m * k + i * k + p] : A[bi * m * k + p * m + i];
              float y =
                  tb ? B[bi * k * n + p * n + j] : B[bi * k * n + j * k + p];
              want += double(x) * y;
            }
            EXPECT_NEAR(D[bi * m * n + j * m + i], want, 1e-5)
                << "ta " << ta << " tb " << tb << " (" << bi << ", " << i
                << ", " << j << ")";
          }
      cudaFree(dA);
      cudaFree(dB);
      cudaFree(dD);
    }
}

// The order the tensor cores and cuBLASLt sum in: the default (k order onto
// the accumulator), or the reverse under SMP_CUDAEMU_SUM_ORDER=reverse
// (ctest's cudaemu.reverse-sums-order), told apart by 2^24 and sixteen 1s:
// in k order each 1 added to 2^24 rounds away; the 1s summed first add 16.
TEST(CudaEmu, SumsInTheOrderAsked) {
  const char *order = std::getenv("SMP_CUDAEMU_SUM_ORDER");
  bool reverse = order && std::string(order) == "reverse";
  const float big = 16777216.0f, want = reverse ? big + 16 : big;
  // mma: C = 2^24 plus the 16 products of 1 x 1.
  std::vector<__nv_bfloat16> a(256, __float2bfloat16(1.0f)),
      b(128, __float2bfloat16(1.0f));
  std::vector<float> c(128, big);
  __nv_bfloat16 *da = deviceCopy(a), *db = deviceCopy(b);
  float *dc = deviceCopy(c);
  mmaTile<<<1, 32>>>(da, db, dc);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (float v : hostCopy(dc, 128))
    EXPECT_EQ(v, want);
  // cuBLASLt: a 1 x 17 row (2^24, then sixteen 1s) times a column of 1s.
  std::vector<float> A(17, 1.0f), B(17, 1.0f);
  A[0] = big;
  float *dA = deviceCopy(A), *dB = deviceCopy(B), *dD;
  cudaMalloc(&dD, sizeof(float));
  Lt lt;
  ASSERT_EQ(lt.plan(CUDA_R_32F, false, false, 1, 1, 17, 1, 4),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(lt.run(dA, dB, dD), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(hostCopy(dD, 1)[0], want);
  for (void *p : {static_cast<void *>(da), static_cast<void *>(db),
                  static_cast<void *>(dc), static_cast<void *>(dA),
                  static_cast<void *>(dB), static_cast<void *>(dD)})
    cudaFree(p);
}

TEST(CudaEmu, CublasLtBiasEpilogueAddsARowBias) {
  // Exact in f32: small integers. Two batches share the bias (stride 0).
  const int m = 4, n = 3, k = 5, count = 2;
  std::vector<float> A(m * k * count), B(k * n * count), bias(m);
  for (size_t i = 0; i < A.size(); ++i)
    A[i] = float(int(i % 7) - 3);
  for (size_t i = 0; i < B.size(); ++i)
    B[i] = float(int(i % 5) - 2);
  for (int i = 0; i < m; ++i)
    bias[i] = 100.0f * float(i + 1);
  float *dA = deviceCopy(A), *dB = deviceCopy(B), *dBias = deviceCopy(bias);
  float *dD;
  cudaMalloc(&dD, m * n * count * sizeof(float));
  Lt lt;
  ASSERT_EQ(lt.plan(CUDA_R_32F, false, false, m, n, k, count, 4, dBias),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(lt.run(dA, dB, dD), CUBLAS_STATUS_SUCCESS);
  std::vector<float> D = hostCopy(dD, m * n * count);
  for (int bi = 0; bi < count; ++bi)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        float want = bias[i];
        for (int p = 0; p < k; ++p)
          want += A[bi * m * k + p * m + i] * B[bi * k * n + j * k + p];
        EXPECT_EQ(D[bi * m * n + j * m + i], want)
            << bi << " " << i << " " << j;
      }
  // A bias of another type than D's is not modelled: no algorithm (smp's
  // matmul_bias then adds the bias with its own kernel).
  Lt other;
  EXPECT_EQ(
      other.plan(CUDA_R_32F, false, false, m, n, k, 1, 4, dBias, CUDA_R_16F),
      CUBLAS_STATUS_NOT_SUPPORTED);
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dBias);
  cudaFree(dD);
}

TEST(CudaEmu, CublasLtRefusesWhatCublasLtRefuses) {
  cublasLtMatrixLayout_t l = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 8, 4, 7),
            CUBLAS_STATUS_INVALID_VALUE); // ld < rows, column-major
  Lt lt;
  // Operands aligned to less than their element: no algorithm.
  EXPECT_EQ(lt.plan(CUDA_R_32F, false, false, 4, 4, 4, 1, 2),
            CUBLAS_STATUS_NOT_SUPPORTED);
}

/// A 4x4x4 f32 product (16-byte alignment promised) whose A is `aFloats`
/// long and starts `aOffset` floats in; exits 0 when the synchronisation
/// reports an illegal address (a death test's child).
void productExpectingFault(int aFloats, int aOffset) {
  Lt lt;
  lt.plan(CUDA_R_32F, false, false, 4, 4, 4, 1, 16);
  float *a = nullptr;
  float *b = nullptr;
  float *d = nullptr;
  cudaMalloc(&a, aFloats * sizeof(float));
  cudaMalloc(&b, 16 * sizeof(float));
  cudaMalloc(&d, 16 * sizeof(float));
  lt.run(a + aOffset, b, d);
  std::exit(cudaDeviceSynchronize() == cudaErrorIllegalAddress ? 0 : 1);
}

/// A 4x4x4 f32 product with a bias epilogue whose bias holds 3 of D's 4
/// rows; exits 0 when the synchronisation reports an illegal address.
void biasExpectingFault() {
  Lt lt;
  float *a = nullptr, *b = nullptr, *d = nullptr, *bias = nullptr;
  cudaMalloc(&a, 16 * sizeof(float));
  cudaMalloc(&b, 16 * sizeof(float));
  cudaMalloc(&d, 16 * sizeof(float));
  cudaMalloc(&bias, 3 * sizeof(float));
  lt.plan(CUDA_R_32F, false, false, 4, 4, 4, 1, 16, bias);
  lt.run(a, b, d);
  std::exit(cudaDeviceSynchronize() == cudaErrorIllegalAddress ? 0 : 1);
}

/// An 8x4x4 f32 product with the GELU_AUX_BIAS epilogue: an aux matrix of
/// D's shape at leading dimension `auxLd`, `auxFloats` long. Exits 0 when
/// the product is refused (`refusedExit`) or the synchronisation reports
/// an illegal address.
void geluAuxExpecting(int64_t auxLd, int auxFloats, bool refusedExit) {
  Lt lt;
  float *a = nullptr, *b = nullptr, *d = nullptr, *bias = nullptr,
        *aux = nullptr;
  cudaMalloc(&a, 32 * sizeof(float));
  cudaMalloc(&b, 16 * sizeof(float));
  cudaMalloc(&d, 32 * sizeof(float));
  cudaMalloc(&bias, 8 * sizeof(float));
  cudaMalloc(&aux, auxFloats * sizeof(float));
  lt.plan(CUDA_R_32F, false, false, 8, 4, 4, 1, 16, bias);
  uint32_t epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                 &epilogue, sizeof epilogue);
  cublasLtMatmulDescSetAttribute(
      lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
  cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                 &auxLd, sizeof auxLd);
  cublasStatus_t s = lt.run(a, b, d);
  if (refusedExit)
    std::exit(s == CUBLAS_STATUS_NOT_SUPPORTED ? 0 : 1);
  std::exit(cudaDeviceSynchronize() == cudaErrorIllegalAddress ? 0 : 1);
}

/// A 4x8x4 f32 product with the BGRADB epilogue whose bias gradient holds
/// D's 4 rows, not its 8 columns; exits 0 on the illegal address.
void bgradbExpectingFault() {
  Lt lt;
  float *a = nullptr, *b = nullptr, *d = nullptr, *bias = nullptr;
  cudaMalloc(&a, 16 * sizeof(float));
  cudaMalloc(&b, 32 * sizeof(float));
  cudaMalloc(&d, 32 * sizeof(float));
  cudaMalloc(&bias, 4 * sizeof(float));
  lt.plan(CUDA_R_32F, false, false, 4, 8, 4, 1, 16, bias);
  uint32_t epilogue = CUBLASLT_EPILOGUE_BGRADB;
  cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                 &epilogue, sizeof epilogue);
  lt.run(a, b, d);
  std::exit(cudaDeviceSynchronize() == cudaErrorIllegalAddress ? 0 : 1);
}

TEST(CudaEmuDeathTest, CublasLtFaultsOnOverrunsAndBrokenAlignment) {
  // The bias epilogue reads one bias element per row of D.
  EXPECT_EXIT(
      biasExpectingFault(), testing::ExitedWithCode(0),
      "the bias .D's rows., 16 bytes, is not inside a device allocation");
  // The layout spans 16 floats; A holds 15.
  EXPECT_EXIT(productExpectingFault(15, 0), testing::ExitedWithCode(0),
              "not inside a device allocation");
  // A 4-byte aligned, 16 promised.
  EXPECT_EXIT(productExpectingFault(20, 1), testing::ExitedWithCode(0),
              "less aligned");
  // The GELU epilogue's aux matrix holds D (8 x 4 at ld 8): 28 of 32 floats
  // fault; an ld short of D's 8 rows, or not a multiple of 8, is refused.
  EXPECT_EXIT(geluAuxExpecting(8, 28, false), testing::ExitedWithCode(0),
              "the aux matrix .D's shape, its ld., 128 bytes, is not inside");
  EXPECT_EXIT(geluAuxExpecting(4, 32, true), testing::ExitedWithCode(0),
              "aux leading dimension divisible by 8 and at least D's rows .4 "
              "for 8.");
  EXPECT_EXIT(geluAuxExpecting(12, 48, true), testing::ExitedWithCode(0),
              "divisible by 8");
  // BGRADB writes one bias-gradient element per column of D.
  EXPECT_EXIT(bgradbExpectingFault(), testing::ExitedWithCode(0),
              "the bias gradient .D's columns., 32 bytes, is not inside");
}

//===----------------------------------------------------------------------===//
// NCCL between processes
//===----------------------------------------------------------------------===//

/// body(comm, rank) on two ranks of one communicator: rank 0 here, rank 1
/// in a child process; true when both return true.
template <class Body> bool onTwoRanks(Body body) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess)
    return false;
  pid_t child = fork();
  int rank = child == 0 ? 1 : 0;
  cudaSetDevice(rank);
  ncclComm_t comm = nullptr;
  bool ok =
      ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess && body(comm, rank);
  ncclCommDestroy(comm);
  if (child == 0)
    _exit(ok ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// NCCL between two processes: one emulated device each.
class CudaEmuNccl : public ::testing::Test {
protected:
  void SetUp() override {
    int devices = 0;
    cudaGetDeviceCount(&devices);
    if (devices < 2)
      GTEST_SKIP() << "needs SMP_CUDAEMU_DEVICES=2 (NCCL: one rank per GPU)";
  }
};

TEST_F(CudaEmuNccl, ReducesAndGathersAcrossProcesses) {
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    std::vector<float> mine = {1.0f + rank, 2.0f * rank, -1.0f, 0.5f};
    float *d = deviceCopy(mine), *all;
    cudaMalloc(&all, 8 * sizeof(float));
    bool ok =
        ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, comm, nullptr) ==
            ncclSuccess &&
        ncclAllGather(d, all, 4, ncclFloat32, comm, nullptr) == ncclSuccess;
    std::vector<float> h = hostCopy(all, 8);
    std::vector<float> want = {3, 2, -2, 1, 3, 2, -2, 1};
    return ok && h == want;
  }));
}

TEST_F(CudaEmuNccl, RefusesMismatchedCollectivesAndOverlaps) {
  // Rank 1 reduces 5 elements where rank 0 reduces 4: NCCL would hang or
  // mix them up; both ranks are told.
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    float *d;
    cudaMalloc(&d, 8 * sizeof(float));
    return ncclAllReduce(d, d, 4 + rank, ncclFloat32, ncclSum, comm, nullptr) ==
           ncclInvalidUsage;
  }));
  // An all-gather whose send buffer overlaps its receive buffer elsewhere
  // than at this rank's slot.
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    float *d;
    cudaMalloc(&d, 8 * sizeof(float));
    float *send = d + 4 * rank + 1;
    return ncclAllGather(send, d, 3, ncclFloat32, comm, nullptr) ==
           ncclInvalidUsage;
  }));
}

} // namespace
