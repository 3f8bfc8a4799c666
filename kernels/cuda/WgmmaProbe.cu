//===- WgmmaProbe.cu - One warpgroup's wgmma product, on its own ----------===//
//
// wgmmaProduct64 (smp/kernels/cuda/Wgmma.h): a block of one warpgroup
// copies its operands into shared memory as unswizzled core matrices
// (Wgmma.cuh: A K-major; B K-major or MN-major), or loads A's fragments
// into registers, issues four m64n64k16 products over K = 64 in one commit
// group, waits, and writes its accumulators to d in the layout Wgmma.cuh
// gives them.
//
//===----------------------------------------------------------------------===//

#include "smp/kernels/cuda/Wgmma.h"

#include "Mma.cuh"
#include "Wgmma.cuh"

namespace smp::kernels::cuda {
namespace {

using namespace detail;

constexpr int kN = 64, kGroupThreads = 128;
constexpr int kTileBytes = kN * kN * 2;

/// The byte offset of element (r, k) of a 64 x 64 K-major operand (r a row
/// of A or a column of B), or of element (k, n) of an MN-major B.
__device__ inline uint32_t kMajorOffset(int r, int k, uint32_t lbo,
                                        uint32_t sbo) {
  return (r / 8) * sbo + (k / 8) * lbo + (r % 8) * 16 + (k % 8) * 2;
}
__device__ inline uint32_t mnMajorOffset(int k, int n, uint32_t lbo,
                                         uint32_t sbo) {
  return (n / 8) * sbo + (k / 8) * lbo + (k % 8) * 16 + (n % 8) * 2;
}

/// Two adjacent 16-bit values as one register (the lower index low).
template <class S> __device__ inline uint32_t twoValues(const S *p) {
  uint32_t v;
#ifdef SMP_CUDAEMU
  std::memcpy(&v, p, sizeof(v));
#else
  v = *reinterpret_cast<const uint32_t *>(p);
#endif
  return v;
}

template <class S, bool kRegA, bool kTransB>
__global__ void __launch_bounds__(kGroupThreads)
    wgmmaProductKernel(const S *a, const S *b, float *d, uint32_t lbo,
                       uint32_t sbo, bool swapMn) {
  extern __shared__ __align__(128) unsigned char tiles[];
  unsigned char *sa = tiles, *sb = tiles + kTileBytes;
  // 16 bytes (8 values along a row of the global array) a copy.
  for (int v = threadIdx.x; v < kN * kN / 8; v += kGroupThreads) {
    int r = v / (kN / 8), c = v % (kN / 8) * 8;
    if (!kRegA)
      copy16(sa + kMajorOffset(r, c, lbo, sbo), a + r * kN + c);
    // b's row r: B's column r (K-major), or B's row k = r (MN-major).
    copy16(sb + (kTransB ? mnMajorOffset(r, c, lbo, sbo)
                         : kMajorOffset(r, c, lbo, sbo)),
           b + r * kN + c);
  }
  fenceProxyAsync();
  __syncthreads();
  int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // A's fragments for the four k-steps (kRegA), unchanged until the wait.
  uint32_t frag[kN / 16][4];
#pragma unroll
  for (int s = 0; s < kN / 16; ++s) {
    const S *row = a + (16 * w + g) * kN + 16 * s + 2 * t;
    frag[s][0] = kRegA ? twoValues(row) : 0;
    frag[s][1] = kRegA ? twoValues(row + 8 * kN) : 0;
    frag[s][2] = kRegA ? twoValues(row + 8) : 0;
    frag[s][3] = kRegA ? twoValues(row + 8 * kN + 8) : 0;
  }
  // An MN-major B's descriptor strides (exchanged: the diagnostic).
  uint32_t mnK = swapMn ? sbo : lbo, mnN = swapMn ? lbo : sbo;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i)
    acc[i] = 0;
  wgmmaFence();
#pragma unroll
  for (int s = 0; s < kN / 16; ++s) {
    // K [16 s, 16 s + 16): two core matrices along K.
    uint64_t db = kTransB ? wgmmaMnMajor(sb + 2 * s * lbo, mnK, mnN)
                          : wgmmaKMajor(sb + 2 * s * lbo, lbo, sbo);
    if constexpr (kRegA)
      wgmmaM64N64K16<S, kTransB>(acc, frag[s], db, s > 0);
    else
      wgmmaM64N64K16<S, kTransB>(acc, wgmmaKMajor(sa + 2 * s * lbo, lbo, sbo),
                                 db, s > 0);
  }
  wgmmaCommit();
  wgmmaWait<0>();
  wgmmaFenceOperands(acc);
  wgmmaKeepOperands(frag);
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    int row = 16 * w + g + 8 * (i % 4 / 2), col = 8 * (i / 4) + 2 * t + i % 2;
    d[row * kN + col] = acc[i];
  }
}

template <class S, bool kRegA, bool kTransB>
void launchProduct(const void *a, const void *b, float *d, uint32_t lbo,
                   uint32_t sbo, bool swapMn) {
  wgmmaProductKernel<S, kRegA, kTransB><<<1, kGroupThreads, 2 * kTileBytes>>>(
      static_cast<const S *>(a), static_cast<const S *>(b), d, lbo, sbo,
      swapMn);
}

template <class S>
void launchForm(const void *a, const void *b, float *d, uint32_t lbo,
                uint32_t sbo, WgmmaForm form) {
  bool swap = form.swapMnStrides;
  if (form.aInRegisters && form.bTransposed)
    launchProduct<S, true, true>(a, b, d, lbo, sbo, swap);
  else if (form.aInRegisters)
    launchProduct<S, true, false>(a, b, d, lbo, sbo, swap);
  else if (form.bTransposed)
    launchProduct<S, false, true>(a, b, d, lbo, sbo, swap);
  else
    launchProduct<S, false, false>(a, b, d, lbo, sbo, swap);
}

} // namespace

base::Status wgmmaProduct64(const void *a, const void *b, float *d, bool bf16,
                            WgmmaLayout layout, WgmmaForm form) {
  const char *op = "wgmma_product";
  int device = 0;
  SMP_RETURN_IF_ERROR(cudaStatus(op, cudaGetDevice(&device)));
  SMP_RETURN_IF_ERROR(requireHopper(op, "wgmma", device));
  uint32_t lbo = layout == WgmmaLayout::KFirst ? 128 : 1024;
  uint32_t sbo = layout == WgmmaLayout::KFirst ? 1024 : 128;
  if (bf16)
    launchForm<__nv_bfloat16>(a, b, d, lbo, sbo, form);
  else
    launchForm<__half>(a, b, d, lbo, sbo, form);
  if (Status st = launchStatus(op); !st.ok())
    return st;
  return cudaStatus(op, cudaDeviceSynchronize());
}

} // namespace smp::kernels::cuda
