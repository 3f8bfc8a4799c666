//===- AttentionBlocks.cpp - Building blocks of the CPU attention ---------===//
//
// The 6 x 16 register tile (AVX2/FMA where the CPU has it, chosen at run
// time as in VecMath.cpp and Gemm.cpp; a scalar loop elsewhere), the scores
// of a row and the block-skipping test. See AttentionBlocks.h.
//
//===----------------------------------------------------------------------===//

#include "AttentionBlocks.h"
#include "VecMath.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define SMP_ATTN_X86 1
#endif

namespace smp::kernels::cpu::detail::attn {

namespace {

#ifdef SMP_ATTN_X86
#define SMP_AVX2 __attribute__((target("avx2,fma")))

/// C[6][16] (+)= sum over p < k of rows[r][p] * b[p * ldb + 0..16), one FMA
/// chain per element, 12 accumulator registers.
SMP_AVX2 void tileAvx2(int64_t k, const float *const *rows, const float *b,
                       int64_t ldb, float *c, int64_t ldc, bool acc) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (acc) {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
    c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
  } else {
    c00 = c01 = c10 = c11 = c20 = c21 = _mm256_setzero_ps();
    c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
  }
  const float *a0 = rows[0], *a1 = rows[1], *a2 = rows[2], *a3 = rows[3],
              *a4 = rows[4], *a5 = rows[5];
  for (int64_t p = 0; p < k; ++p, b += ldb) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), v;
    v = _mm256_broadcast_ss(a0 + p);
    c00 = _mm256_fmadd_ps(v, b0, c00);
    c01 = _mm256_fmadd_ps(v, b1, c01);
    v = _mm256_broadcast_ss(a1 + p);
    c10 = _mm256_fmadd_ps(v, b0, c10);
    c11 = _mm256_fmadd_ps(v, b1, c11);
    v = _mm256_broadcast_ss(a2 + p);
    c20 = _mm256_fmadd_ps(v, b0, c20);
    c21 = _mm256_fmadd_ps(v, b1, c21);
    v = _mm256_broadcast_ss(a3 + p);
    c30 = _mm256_fmadd_ps(v, b0, c30);
    c31 = _mm256_fmadd_ps(v, b1, c31);
    v = _mm256_broadcast_ss(a4 + p);
    c40 = _mm256_fmadd_ps(v, b0, c40);
    c41 = _mm256_fmadd_ps(v, b1, c41);
    v = _mm256_broadcast_ss(a5 + p);
    c50 = _mm256_fmadd_ps(v, b0, c50);
    c51 = _mm256_fmadd_ps(v, b1, c51);
  }
  _mm256_storeu_ps(c, c00);
  _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10);
  _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20);
  _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30);
  _mm256_storeu_ps(c + 3 * ldc + 8, c31);
  _mm256_storeu_ps(c + 4 * ldc, c40);
  _mm256_storeu_ps(c + 4 * ldc + 8, c41);
  _mm256_storeu_ps(c + 5 * ldc, c50);
  _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}
#endif

/// The same tile in plain C++ (CPUs without AVX2/FMA, vecUseSimd(false)).
void tileScalar(int64_t k, const float *const *rows, const float *b,
                int64_t ldb, float *c, int64_t ldc, bool acc) {
  float t[kMR][kNR];
  for (int64_t r = 0; r < kMR; ++r)
    for (int64_t q = 0; q < kNR; ++q)
      t[r][q] = acc ? c[r * ldc + q] : 0.0f;
  for (int64_t p = 0; p < k; ++p, b += ldb)
    for (int64_t r = 0; r < kMR; ++r) {
      float a = rows[r][p];
      for (int64_t q = 0; q < kNR; ++q)
        t[r][q] += a * b[q];
    }
  for (int64_t r = 0; r < kMR; ++r)
    for (int64_t q = 0; q < kNR; ++q)
      c[r * ldc + q] = t[r][q];
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

} // namespace

void gemmRows(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
              const float *zeros, const float *b, int64_t ldb,
              int64_t panelStride, float *c, int64_t ldc, bool acc) {
  auto tile = tileScalar;
#ifdef SMP_ATTN_X86
  if (vecSimdActive())
    tile = tileAvx2;
#endif
  for (int64_t i = 0; i < m; i += kMR) {
    const float *rows[kMR];
    for (int64_t r = 0; r < kMR; ++r)
      rows[r] = i + r < m ? a + (i + r) * lda : zeros;
    for (int64_t q = 0; q < n / kNR; ++q)
      tile(k, rows, b + q * panelStride, ldb, c + i * ldc + q * kNR, ldc, acc);
  }
}

void Scores::row(float *r, int64_t b, int64_t h, int64_t i, int64_t j0,
                 int64_t bc) const {
  for (int64_t c = 0; c < bc; ++c)
    r[c] *= scale;
  if (mask) {
    int64_t base = b * st[0] + h * st[1] + i * st[2] + j0 * st[3], sj = st[3];
    switch (maskType) {
    case DType::Bool: {
      const uint8_t *m = static_cast<const uint8_t *>(mask) + base;
      for (int64_t c = 0; c < bc; ++c)
        if (!m[c * sj])
          r[c] = kNegInf;
      break;
    }
    case DType::F32: {
      const float *m = static_cast<const float *>(mask) + base;
      for (int64_t c = 0; c < bc; ++c)
        r[c] += m[c * sj];
      break;
    }
    case DType::F16: {
      const uint16_t *m = static_cast<const uint16_t *>(mask) + base;
      for (int64_t c = 0; c < bc; ++c)
        r[c] += smp::base::halfToFloat(m[c * sj]);
      break;
    }
    default: { // BF16 (checkAttention allows no other)
      const uint16_t *m = static_cast<const uint16_t *>(mask) + base;
      for (int64_t c = 0; c < bc; ++c)
        r[c] += smp::base::bf16ToFloat(m[c * sj]);
      break;
    }
    }
  }
  if (causal)
    for (int64_t c = std::max<int64_t>(0, i - j0 + 1); c < bc; ++c)
      r[c] = kNegInf;
}

bool Scores::anyAllowed(int64_t b, int64_t h, int64_t i0, int64_t br,
                        int64_t j0, int64_t bc) const {
  if (causal && j0 > i0 + br - 1)
    return false;
  if (!mask)
    return true;
  // A mask broadcast over the queries needs one row (the last: with causal
  // it allows the most keys).
  int64_t first = st[2] == 0 ? i0 + br - 1 : i0;
  for (int64_t i = first; i < i0 + br; ++i) {
    int64_t n = causal ? std::min(bc, i - j0 + 1) : bc;
    int64_t base = b * st[0] + h * st[1] + i * st[2] + j0 * st[3], sj = st[3];
    for (int64_t c = 0; c < n; ++c) {
      int64_t e = base + c * sj;
      bool allowed;
      switch (maskType) {
      case DType::Bool:
        allowed = static_cast<const uint8_t *>(mask)[e] != 0;
        break;
      case DType::F32:
        allowed = static_cast<const float *>(mask)[e] != kNegInf;
        break;
      case DType::F16:
        allowed = smp::base::halfToFloat(
                      static_cast<const uint16_t *>(mask)[e]) != kNegInf;
        break;
      default:
        allowed = smp::base::bf16ToFloat(
                      static_cast<const uint16_t *>(mask)[e]) != kNegInf;
        break;
      }
      if (allowed)
        return true;
    }
  }
  return false;
}

void Operands::scores(int64_t b, int64_t h, int64_t i0, int64_t br, int64_t kb,
                      float *s, const float *zeros) const {
  int64_t kvh = h / g->group, j0 = kb * kBc, bc = std::min(kBc, g->sk - j0);
  const float *panels = kp.data() + kBlock(b, kvh, kb) * blockFloats(g->d);
  gemmRows(br, kBc, g->d, q.p + qRow(b, h, i0) * q.ld, q.ld, zeros, panels, kNR,
           g->d * kNR, s, kBc, false);
  for (int64_t r = 0; r < br; ++r)
    sc.row(s + r * kBc, b, h, i0 + r, j0, bc);
}

void Operands::dropFactors(int64_t row, int64_t j0, int64_t bc,
                           float *z) const {
  dropoutFactorRun(
      drop,
      static_cast<uint64_t>(common::dropoutRowBase(drop, row, g->sk) + j0), bc,
      z);
}

Scores makeScores(const common::AttentionDims &g, const TensorRef *mask,
                  float scale, bool causal) {
  Scores s;
  s.scale = scale;
  s.causal = causal;
  if (mask && mask->numel() > 0) {
    s.mask = mask->data;
    s.maskType = mask->dtype;
    for (int d = 0; d < 4; ++d)
      s.st[d] = g.maskStride[d];
  }
  return s;
}

//===----------------------------------------------------------------------===//
// The bshd layout
//===----------------------------------------------------------------------===//

namespace {

/// from [B, X, Y, D] into to [B, Y, X, D] (the same bytes per element);
/// consecutive x of `from` are fromLd elements apart (Y D when it is
/// contiguous), consecutive y of `to` toLd (X D).
void swapMiddle(const TensorRef &from, const TensorRef &to, int64_t fromLd,
                int64_t toLd) {
  int64_t nb = from.shape[0], nx = from.shape[1], ny = from.shape[2],
          d = from.shape[3];
  size_t es = dtypeSize(from.dtype), row = static_cast<size_t>(d) * es;
  const auto *in = static_cast<const unsigned char *>(from.data);
  auto *out = static_cast<unsigned char *>(to.data);
  parallelFor(nb * nx, grainFor(ny * d), [&](int64_t b0, int64_t b1) {
    for (int64_t bx = b0; bx < b1; ++bx) {
      int64_t b = bx / nx, x = bx % nx;
      for (int64_t y = 0; y < ny; ++y)
        std::memcpy(out + static_cast<size_t>((b * ny + y) * toLd + x * d) * es,
                    in + static_cast<size_t>(bx * fromLd + y * d) * es, row);
    }
  });
}

TensorRef swappedShape(const TensorRef &t, void *data) {
  TensorRef r = t;
  std::swap(r.shape[1], r.shape[2]);
  r.data = data;
  return r;
}

} // namespace

TensorRef HeadsFirst::scratchFor(const TensorRef &t) {
  bufs_.emplace_back(std::max<size_t>(t.bytes(), 1));
  return swappedShape(t, bufs_.back().data());
}

TensorRef HeadsFirst::copy(const TensorRef &t, int64_t ld) {
  TensorRef r = scratchFor(t);
  if (t.numel() > 0)
    swapMiddle(t, r, ld ? ld : t.shape[2] * t.shape[3],
               t.shape[1] * t.shape[3]);
  return r;
}

void HeadsFirst::writeBack(const TensorRef &from, const TensorRef &to,
                           int64_t ld) {
  if (to.numel() > 0)
    swapMiddle(from, to, from.shape[2] * from.shape[3],
               ld ? ld : to.shape[2] * to.shape[3]);
}

} // namespace smp::kernels::cpu::detail::attn
