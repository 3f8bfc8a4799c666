//===- Attention.cu - Fused scaled-dot-product attention ------------------===//
//
// Tiled FlashAttention-2 kernels with f32 compute on the CUDA cores: every
// f32 attention, and the f16/bf16 ones that the tensor-core kernels
// (AttentionMma.cu) do not take (head dims other than D = Dv in 32, 64, 96,
// 128, unaligned tensors); the mask gradient always. Semantics:
// KernelApi.inc, "Attention".
//
//   forward:  one block per (query tile of kBQ queries, head, batch); it
//             walks the key tiles of kBK keys through shared memory with an
//             online softmax (running max m and sum l per query), the
//             output accumulator in shared memory.
//   backward: the CPU's deterministic two-pass split, no atomics:
//             pass 1, one block per (key tile, key/value head, batch):
//             dv += P^T dout and dk += dS^T q over every query tile of
//             every query head of the group; pass 2, one block per (query
//             tile, head, batch): dq += dS k over the key tiles.
//   mask gradient (a trainable additive mask only): one thread per mask
//             element, dS summed over what it broadcasts to.
//
// A warp holds one query row of a score tile, lane j its key j (kBK = 32),
// so row maxima and sums are warp shuffles. Scores are one fmaf chain over
// the head dim (scoreDot), the same in the forward and both backward passes.
// Key tiles above the causal diagonal are not visited; a tile no query of
// which may attend any key (mask all false / -inf) is skipped after its
// scores. The head dims' shared-memory tiles must fit the device (checked
// on the host: about 120 KB for the backward at D = Dv = 128). A dropout on
// the probabilities multiplies each P by its mask factor (dropFactor, the
// element's global index) after the softmax's sums: the forward's P v and
// the backward's dv read Z P, dS = P (Z dP - Dsum).
//
//===----------------------------------------------------------------------===//

#include "Attention.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

constexpr int kBQ = 16;        // queries per tile
constexpr int kBK = 32;        // keys per tile (one per lane)
constexpr int kThreadsA = 128; // 4 warps
constexpr int kWarps = kThreadsA / 32;

/// A mask's sizes (plain data for the mask-gradient kernel).
struct MaskShape {
  int64_t n[4];
};

/// q . k over d elements, one fmaf chain in order.
__device__ inline float scoreDot(const float *q, const float *k, int64_t d) {
  float s = 0.0f;
  for (int64_t p = 0; p < d; ++p)
    s = fmaf(q[p], k[p], s);
  return s;
}

/// The score of (i, j) or -inf (not allowed, or outside the sequences).
template <class S>
__device__ float scoreAt(const AttnArgs &a, int64_t b, int64_t h, int64_t i,
                         int64_t j, const float *qRow, const float *kRow) {
  float add;
  if (i >= a.g.s || j >= a.g.sk || !maskAt<S>(a, b, h, i, j, add))
    return -INFINITY;
  return a.scale * scoreDot(qRow, kRow, a.g.d) + add;
}

/// Copies rows [r0, r0 + n) of one head's rows (`cols` wide, at p + hr.start
/// with hr.ld between them; rows past `rows` as zeros) into shared memory
/// with row stride ld, as f32.
template <class S>
__device__ void loadTile(const S *p, HeadRows hr, int64_t r0, int n,
                         int64_t rows, int64_t cols, float *dst, int64_t ld) {
  for (int64_t e = threadIdx.x; e < n * cols; e += blockDim.x) {
    int64_t r = e / cols, c = e - r * cols;
    dst[r * ld + c] =
        r0 + r < rows ? FT<S>::load(p[hr.start + (r0 + r) * hr.ld + c]) : 0.0f;
  }
}

__device__ inline float warpMax(float v) {
  for (int o = 16; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ inline float warpSum(float v) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The forward's shared memory: q [kBQ][d], k [kBK][d + 1], v [kBK][dv],
/// P [kBQ][kBK], o [kBQ][dv], then m, l and the rescale factors per query.
size_t forwardSmem(const common::AttentionDims &g) {
  return sizeof(float) * (kBQ * g.d + kBK * (g.d + 1) + kBK * g.dv + kBQ * kBK +
                          kBQ * g.dv + 3 * kBQ);
}

template <class S>
__global__ void attentionForward(AttnArgs a, const S *q, const S *k, const S *v,
                                 S *out, float *lse) {
  extern __shared__ float sm[];
  const common::AttentionDims &g = a.g;
  int64_t b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kBQ;
  int64_t kvh = h / g.group, dk1 = g.d + 1;
  float *sq = sm, *sk = sq + kBQ * g.d, *sv = sk + kBK * dk1,
        *sp = sv + kBK * g.dv, *so = sp + kBQ * kBK, *sm_ = so + kBQ * g.dv,
        *sl = sm_ + kBQ, *sc = sl + kBQ;
  HeadRows kr = keyRows(g, b, kvh, g.d), vr = keyRows(g, b, kvh, g.dv),
           orow = outRows(g, b, h);
  loadTile(q, queryRows(g, b, h), i0, kBQ, g.s, g.d, sq, g.d);
  for (int64_t e = threadIdx.x; e < kBQ * g.dv; e += blockDim.x)
    so[e] = 0.0f;
  if (threadIdx.x < kBQ) {
    sm_[threadIdx.x] = -INFINITY;
    sl[threadIdx.x] = 0.0f;
  }
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t jEnd = a.causal ? min(g.sk, i0 + kBQ) : g.sk;
  for (int64_t j0 = 0; j0 < jEnd; j0 += kBK) {
    __syncthreads(); // the previous tile's readers are done
    loadTile(k, kr, j0, kBK, g.sk, g.d, sk, dk1);
    loadTile(v, vr, j0, kBK, g.sk, g.dv, sv, g.dv);
    __syncthreads();
    bool any = false;
    for (int r = warp; r < kBQ; r += kWarps) {
      float s =
          scoreAt<S>(a, b, h, i0 + r, j0 + lane, sq + r * g.d, sk + lane * dk1);
      sp[r * kBK + lane] = s;
      any |= s != -INFINITY;
    }
    if (!__syncthreads_or(any))
      continue; // nothing allowed in this tile
    for (int r = warp; r < kBQ; r += kWarps) {
      float s = sp[r * kBK + lane], mOld = sm_[r];
      float mNew = fmaxf(mOld, warpMax(s));
      float p = s == -INFINITY ? 0.0f : expf(s - mNew);
      float sum = warpSum(p); // the softmax's l: before the dropout
      sp[r * kBK + lane] = p * dropFactor(a, b, h, i0 + r, j0 + lane);
      if (lane == 0) {
        float corr = mOld == -INFINITY ? 0.0f : expf(mOld - mNew);
        sc[r] = mNew == -INFINITY ? 1.0f : corr;
        sl[r] = mNew == -INFINITY ? 0.0f : sl[r] * corr + sum;
        sm_[r] = mNew;
      }
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < kBQ * g.dv; e += blockDim.x) {
      int64_t r = e / g.dv, c = e - r * g.dv;
      float acc = so[e] * sc[r];
      for (int j = 0; j < kBK; ++j)
        acc = fmaf(sp[r * kBK + j], sv[j * g.dv + c], acc);
      so[e] = acc;
    }
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < kBQ * g.dv; e += blockDim.x) {
    int64_t r = e / g.dv, c = e - r * g.dv;
    if (i0 + r < g.s) {
      float l = sl[r];
      out[orow.start + (i0 + r) * orow.ld + c] =
          FT<S>::store(l == 0.0f ? 0.0f : so[e] / l);
    }
  }
  if (threadIdx.x < kBQ && i0 + threadIdx.x < g.s) {
    float l = sl[threadIdx.x],
          *at = lse + 2 * ((b * g.hq + h) * g.s + i0 + threadIdx.x);
    at[0] = l == 0.0f ? -INFINITY : sm_[threadIdx.x]; // (m, log l)
    at[1] = l == 0.0f ? -INFINITY : logf(l);
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// A query tile's operands in shared memory: q [kBQ][d], dout [kBQ][dv],
/// lse (m, log l) and Dsum (dout . out) per query.
struct QueryTile {
  float *q, *dout, *lse, *dsum;
};

template <class S>
__device__ void loadQueryTile(const AttnArgs &a, int64_t b, int64_t h,
                              int64_t i0, const S *q, const S *out,
                              const S *dout, const float *lse, QueryTile t) {
  const common::AttentionDims &g = a.g;
  int64_t row0 = (b * g.hq + h) * g.s; // of lse
  HeadRows orow = outRows(g, b, h);
  loadTile(q, queryRows(g, b, h), i0, kBQ, g.s, g.d, t.q, g.d);
  loadTile(dout, orow, i0, kBQ, g.s, g.dv, t.dout, g.dv);
  if (threadIdx.x < kBQ) {
    int64_t i = i0 + threadIdx.x;
    float d = 0.0f, m = -INFINITY, logL = -INFINITY;
    if (i < g.s) {
      m = lse[2 * (row0 + i)];
      logL = lse[2 * (row0 + i) + 1];
      int64_t at = orow.start + i * orow.ld;
      for (int64_t c = 0; c < g.dv; ++c)
        d = fmaf(FT<S>::load(dout[at + c]), FT<S>::load(out[at + c]), d);
    }
    t.lse[2 * threadIdx.x] = m;
    t.lse[2 * threadIdx.x + 1] = logL;
    t.dsum[threadIdx.x] = d;
  }
}

/// acc[j][c] += sum over the tile's queries r of w[r][j] * x[r][c], for the
/// kBK keys j and n columns c (the key-side products of the backward: dv from
/// the probabilities and dout, dk from dS and q). Each thread owns its
/// elements: a fixed summation order.
__device__ inline void accumulateTransposed(float *acc, const float *w,
                                            const float *x, int64_t n) {
  for (int64_t e = threadIdx.x; e < kBK * n; e += blockDim.x) {
    int64_t j = e / n, c = e - j * n;
    float sum = acc[e];
    for (int r = 0; r < kBQ; ++r)
      sum = fmaf(w[r * kBK + j], x[r * n + c], sum);
    acc[e] = sum;
  }
}

/// P (times the dropout's factor Z) and dS = P (Z dP - Dsum) of the query
/// tile against the key tile in shared memory (k with row stride d + 1, v
/// with dv + 1) into sp and sds [kBQ][kBK]; returns whether any entry is
/// allowed (the same for every thread).
template <class S>
__device__ bool probsAndDs(const AttnArgs &a, int64_t b, int64_t h, int64_t i0,
                           int64_t j0, QueryTile t, const float *sk,
                           const float *sv, float *sp, float *sds) {
  const common::AttentionDims &g = a.g;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  bool any = false;
  for (int r = warp; r < kBQ; r += kWarps) {
    float s = scoreAt<S>(a, b, h, i0 + r, j0 + lane, t.q + r * g.d,
                         sk + lane * (g.d + 1));
    float m = t.lse[2 * r], logL = t.lse[2 * r + 1];
    float p = s == -INFINITY || m == -INFINITY ? 0.0f : expf((s - m) - logL);
    float dp = scoreDot(t.dout + r * g.dv, sv + lane * (g.dv + 1), g.dv);
    float z = dropFactor(a, b, h, i0 + r, j0 + lane);
    sp[r * kBK + lane] = p * z; // dv sums the dropped probabilities
    sds[r * kBK + lane] = p * (z * dp - t.dsum[r]);
    any |= s != -INFINITY;
  }
  return __syncthreads_or(any);
}

/// Shared memory of pass 1: k, v tiles (padded rows), dk, dv accumulators,
/// the query tile, P and dS.
size_t keyPassSmem(const common::AttentionDims &g) {
  return sizeof(float) *
         (kBK * (g.d + 1) + kBK * (g.dv + 1) + kBK * g.d + kBK * g.dv +
          kBQ * g.d + kBQ * g.dv + 3 * kBQ + 2 * kBQ * kBK);
}

template <class S>
__global__ void attentionGradKeys(AttnArgs a, const S *q, const S *k,
                                  const S *v, const S *out, const float *lse,
                                  const S *dout, S *dk, S *dv) {
  extern __shared__ float sm[];
  const common::AttentionDims &g = a.g;
  int64_t b = blockIdx.z, kvh = blockIdx.y, j0 = int64_t(blockIdx.x) * kBK;
  float *sk = sm, *sv = sk + kBK * (g.d + 1), *sdk = sv + kBK * (g.dv + 1),
        *sdv = sdk + kBK * g.d;
  QueryTile t;
  t.q = sdv + kBK * g.dv;
  t.dout = t.q + kBQ * g.d;
  t.lse = t.dout + kBQ * g.dv;
  t.dsum = t.lse + 2 * kBQ;
  float *sp = t.dsum + kBQ, *sds = sp + kBQ * kBK;
  HeadRows kr = keyRows(g, b, kvh, g.d), vr = keyRows(g, b, kvh, g.dv);
  loadTile(k, kr, j0, kBK, g.sk, g.d, sk, g.d + 1);
  loadTile(v, vr, j0, kBK, g.sk, g.dv, sv, g.dv + 1);
  for (int64_t e = threadIdx.x; e < kBK * g.d; e += blockDim.x)
    sdk[e] = 0.0f;
  for (int64_t e = threadIdx.x; e < kBK * g.dv; e += blockDim.x)
    sdv[e] = 0.0f;
  for (int64_t h = kvh * g.group; h < (kvh + 1) * g.group; ++h)
    for (int64_t i0 = a.causal ? j0 / kBQ * kBQ : 0; i0 < g.s; i0 += kBQ) {
      __syncthreads(); // the previous tile's readers are done
      loadQueryTile(a, b, h, i0, q, out, dout, lse, t);
      __syncthreads();
      if (!probsAndDs<S>(a, b, h, i0, j0, t, sk, sv, sp, sds))
        continue;
      accumulateTransposed(sdv, sp, t.dout, g.dv); // dv += P^T dout
      accumulateTransposed(sdk, sds, t.q, g.d);    // dk += dS^T q
    }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < kBK * g.d; e += blockDim.x) {
    int64_t j = e / g.d, c = e - j * g.d;
    if (j0 + j < g.sk)
      dk[kr.start + (j0 + j) * kr.ld + c] = FT<S>::store(a.scale * sdk[e]);
  }
  for (int64_t e = threadIdx.x; e < kBK * g.dv; e += blockDim.x) {
    int64_t j = e / g.dv, c = e - j * g.dv;
    if (j0 + j < g.sk)
      dv[vr.start + (j0 + j) * vr.ld + c] = FT<S>::store(sdv[e]);
  }
}

/// Shared memory of pass 2: the query tile, dq, k and v tiles, P and dS.
size_t queryPassSmem(const common::AttentionDims &g) {
  return sizeof(float) * (kBQ * g.d + kBQ * g.dv + 3 * kBQ + kBQ * g.d +
                          kBK * (g.d + 1) + kBK * (g.dv + 1) + 2 * kBQ * kBK);
}

template <class S>
__global__ void attentionGradQueries(AttnArgs a, const S *q, const S *k,
                                     const S *v, const S *out, const float *lse,
                                     const S *dout, S *dq) {
  extern __shared__ float sm[];
  const common::AttentionDims &g = a.g;
  int64_t b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kBQ;
  int64_t kvh = h / g.group;
  QueryTile t;
  t.q = sm;
  t.dout = t.q + kBQ * g.d;
  t.lse = t.dout + kBQ * g.dv;
  t.dsum = t.lse + 2 * kBQ;
  float *sdq = t.dsum + kBQ, *sk = sdq + kBQ * g.d, *sv = sk + kBK * (g.d + 1),
        *sp = sv + kBK * (g.dv + 1), *sds = sp + kBQ * kBK;
  loadQueryTile(a, b, h, i0, q, out, dout, lse, t);
  for (int64_t e = threadIdx.x; e < kBQ * g.d; e += blockDim.x)
    sdq[e] = 0.0f;
  HeadRows kr = keyRows(g, b, kvh, g.d), vr = keyRows(g, b, kvh, g.dv),
           qr = queryRows(g, b, h);
  int64_t jEnd = a.causal ? min(g.sk, i0 + kBQ) : g.sk;
  for (int64_t j0 = 0; j0 < jEnd; j0 += kBK) {
    __syncthreads();
    loadTile(k, kr, j0, kBK, g.sk, g.d, sk, g.d + 1);
    loadTile(v, vr, j0, kBK, g.sk, g.dv, sv, g.dv + 1);
    __syncthreads();
    if (!probsAndDs<S>(a, b, h, i0, j0, t, sk, sv, sp, sds))
      continue;
    for (int64_t e = threadIdx.x; e < kBQ * g.d; e += blockDim.x) {
      int64_t r = e / g.d, c = e - r * g.d;
      float acc = sdq[e];
      for (int j = 0; j < kBK; ++j)
        acc = fmaf(sds[r * kBK + j], sk[j * (g.d + 1) + c], acc);
      sdq[e] = acc;
    }
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < kBQ * g.d; e += blockDim.x) {
    int64_t r = e / g.d, c = e - r * g.d;
    if (i0 + r < g.s)
      dq[qr.start + (i0 + r) * qr.ld + c] = FT<S>::store(a.scale * sdq[e]);
  }
}

/// x . y over n elements of S, one fmaf chain in order, f32.
template <class S> __device__ float dotOf(const S *x, const S *y, int64_t n) {
  float s = 0.0f;
  for (int64_t p = 0; p < n; ++p)
    s = fmaf(FT<S>::load(x[p]), FT<S>::load(y[p]), s);
  return s;
}

/// The mask's gradient, one thread per mask element (written for clarity:
/// a trainable mask is rare, and the tiled passes above are where the time
/// goes): dS summed over the (b, h, i, j) the element broadcasts to, in
/// that order, from global memory.
template <class S>
__global__ void attentionMaskGradElems(AttnArgs a, MaskShape m, const S *q,
                                       const S *k, const S *v, const S *out,
                                       const float *lse, const S *dout,
                                       S *dmask) {
  const common::AttentionDims &g = a.g;
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= m.n[0] * m.n[1] * m.n[2] * m.n[3])
    return;
  int64_t at[4], rest = e;
  for (int d = 3; d >= 0; --d) {
    at[d] = rest % m.n[d];
    rest /= m.n[d];
  }
  int64_t full[4] = {g.b, g.hq, g.s, g.sk}, lo[4], hi[4];
  for (int d = 0; d < 4; ++d) {
    lo[d] = m.n[d] == 1 ? 0 : at[d];
    hi[d] = m.n[d] == 1 ? full[d] : at[d] + 1;
  }
  float acc = 0.0f;
  for (int64_t b = lo[0]; b < hi[0]; ++b)
    for (int64_t h = lo[1]; h < hi[1]; ++h)
      for (int64_t i = lo[2]; i < hi[2]; ++i) {
        int64_t row = (b * g.hq + h) * g.s + i, kvh = h / g.group;
        float m = lse[2 * row], logL = lse[2 * row + 1];
        if (m == -INFINITY)
          continue;
        HeadRows qr = queryRows(g, b, h), orow = outRows(g, b, h),
                 kr = keyRows(g, b, kvh, g.d), vr = keyRows(g, b, kvh, g.dv);
        const S *qi = q + qr.start + i * qr.ld,
                *doi = dout + orow.start + i * orow.ld;
        float dsum = dotOf(doi, out + orow.start + i * orow.ld, g.dv);
        for (int64_t j = lo[3]; j < hi[3]; ++j) {
          float add;
          if (!maskAt<S>(a, b, h, i, j, add))
            continue;
          float p = expf(
              (a.scale * dotOf(qi, k + kr.start + j * kr.ld, g.d) + add - m) -
              logL);
          acc += p * (dropFactor(a, b, h, i, j) *
                          dotOf(doi, v + vr.start + j * vr.ld, g.dv) -
                      dsum);
        }
      }
  dmask[e] = FT<S>::store(acc);
}

} // namespace

namespace {

/// The forward of checked operands (`tensors`: those whose alignment and
/// row strides the tensor-core kernels need).
Status runAttention(const char *op, const common::AttentionDims &g,
                    const TensorRef &q, const TensorRef &k, const TensorRef &v,
                    const TensorRef *mask, float scale, bool causal,
                    const DropoutKey *dropout, const TensorRef &out,
                    const TensorRef &lse,
                    std::initializer_list<const TensorRef *> tensors) {
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  AttnArgs a;
  SMP_RETURN_IF_ERROR(makeArgs(op, g, mask, scale, causal, dropout, a));
  if (lse.numel() == 0)
    return Status::success();
  if (attentionOnTensorCores(q.dtype, g.d, g.dv, scale, tensors))
    return attentionMma(op, a, q.dtype, *ctx, q, k, v, out, lse);
  return visitFloat(q.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    if constexpr (std::is_same_v<S, double>) {
      return unsupported(op, q.dtype); // the checks refused it already
    } else {
      return launchTiles(op, attentionForward<S>, forwardSmem(g), g.s, kBQ,
                         g.hq, kThreadsA, g, *ctx, a, q.as<S>(), k.as<S>(),
                         v.as<S>(), out.as<S>(), lse.as<float>());
    }
  });
}

/// What the backward reads and writes (checked).
struct GradOperands {
  const TensorRef &q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv;
};

/// The backward of checked operands (`tensors` as runAttention's).
Status runAttentionGrad(const char *op, const common::AttentionDims &g,
                        const GradOperands &t, const TensorRef *mask,
                        float scale, bool causal, const DropoutKey *dropout,
                        std::initializer_list<const TensorRef *> tensors) {
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  AttnArgs a;
  SMP_RETURN_IF_ERROR(makeArgs(op, g, mask, scale, causal, dropout, a));
  if (attentionOnTensorCores(t.q.dtype, g.d, g.dv, scale, tensors))
    return attentionGradMma(op, a, t.q.dtype, *ctx, t.q, t.k, t.v, t.out, t.lse,
                            t.dout, t.dq, t.dk, t.dv);
  return visitFloat(t.q.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    if constexpr (std::is_same_v<S, double>) {
      return unsupported(op, t.q.dtype);
    } else {
      const S *q = t.q.as<S>(), *k = t.k.as<S>(), *v = t.v.as<S>(),
              *out = t.out.as<S>(), *dout = t.dout.as<S>();
      const float *lse = t.lse.as<float>();
      if (t.dk.numel() > 0 || t.dv.numel() > 0)
        SMP_RETURN_IF_ERROR(launchTiles(op, attentionGradKeys<S>,
                                        keyPassSmem(g), g.sk, kBK, g.hkv,
                                        kThreadsA, g, *ctx, a, q, k, v, out,
                                        lse, dout, t.dk.as<S>(), t.dv.as<S>()));
      if (t.dq.numel() == 0)
        return Status::success();
      return launchTiles(op, attentionGradQueries<S>, queryPassSmem(g), g.s,
                         kBQ, g.hq, kThreadsA, g, *ctx, a, q, k, v, out, lse,
                         dout, t.dq.as<S>());
    }
  });
}

} // namespace

Status attention(const TensorRef &q, const TensorRef &k, const TensorRef &v,
                 const TensorRef *mask, float scale, bool causal,
                 const TensorRef &out, const TensorRef &lse, bool bshd,
                 const DropoutKey *dropout) {
  common::AttentionDims g;
  g.bshd = bshd;
  SMP_RETURN_IF_ERROR(common::checkAttention(q, k, v, mask, out, lse, g));
  return runAttention("attention", g, q, k, v, mask, scale, causal, dropout,
                      out, lse, {&q, &k, &v, &out});
}

Status attentionGrad(const TensorRef &q, const TensorRef &k, const TensorRef &v,
                     const TensorRef &out, const TensorRef &lse,
                     const TensorRef &dout, const TensorRef *mask, float scale,
                     bool causal, const TensorRef &dq, const TensorRef &dk,
                     const TensorRef &dv, bool bshd,
                     const DropoutKey *dropout) {
  common::AttentionDims g;
  g.bshd = bshd;
  SMP_RETURN_IF_ERROR(
      common::checkAttentionGrad(q, k, v, out, lse, dout, mask, dq, dk, dv, g));
  return runAttentionGrad(
      "attention_grad", g, {q, k, v, out, lse, dout, dq, dk, dv}, mask, scale,
      causal, dropout, {&q, &k, &v, &out, &dout, &dq, &dk, &dv});
}

Status packedAttention(const TensorRef &qkv, int64_t kvHeads,
                       const TensorRef *mask, float scale, bool causal,
                       const TensorRef &out, const TensorRef &lse,
                       const DropoutKey *dropout) {
  common::AttentionDims g;
  SMP_RETURN_IF_ERROR(
      common::checkPackedAttention(qkv, kvHeads, mask, out, lse, g));
  common::PackedViews in = common::packedViews(qkv, g);
  return runAttention("packed_attention", g, in.q, in.k, in.v, mask, scale,
                      causal, dropout, out, lse,
                      {&qkv, &in.q, &in.k, &in.v, &out});
}

Status packedAttentionGrad(const TensorRef &qkv, int64_t kvHeads,
                           const TensorRef &out, const TensorRef &lse,
                           const TensorRef &dout, const TensorRef *mask,
                           float scale, bool causal, const TensorRef &dqkv,
                           const DropoutKey *dropout) {
  common::AttentionDims g;
  SMP_RETURN_IF_ERROR(common::checkPackedAttentionGrad(qkv, kvHeads, out, lse,
                                                       dout, mask, dqkv, g));
  common::PackedViews in = common::packedViews(qkv, g),
                      d = common::packedViews(dqkv, g);
  return runAttentionGrad(
      "packed_attention_grad", g,
      {in.q, in.k, in.v, out, lse, dout, d.q, d.k, d.v}, mask, scale, causal,
      dropout,
      {&qkv, &dqkv, &in.q, &in.k, &in.v, &out, &dout, &d.q, &d.k, &d.v});
}

Status attentionMaskGrad(const TensorRef &q, const TensorRef &k,
                         const TensorRef &v, const TensorRef &out,
                         const TensorRef &lse, const TensorRef &dout,
                         const TensorRef &mask, float scale, bool causal,
                         const TensorRef &dmask, bool bshd,
                         const DropoutKey *dropout) {
  const char *op = "attention_mask_grad";
  common::AttentionDims g;
  g.bshd = bshd;
  SMP_RETURN_IF_ERROR(
      common::checkAttentionMaskGrad(q, k, v, out, lse, dout, mask, dmask, g));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  AttnArgs a;
  SMP_RETURN_IF_ERROR(makeArgs(op, g, &mask, scale, causal, dropout, a));
  if (dmask.numel() == 0)
    return Status::success();
  MaskShape m{{mask.shape[0], mask.shape[1], mask.shape[2], mask.shape[3]}};
  return visitFloat(q.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    if constexpr (std::is_same_v<S, double>) {
      return unsupported(op, q.dtype);
    } else {
      constexpr int kThreads = 256;
      attentionMaskGradElems<S>
          <<<blocksOf(dmask.numel(), kThreads), kThreads, 0, ctx->stream>>>(
              a, m, q.as<S>(), k.as<S>(), v.as<S>(), out.as<S>(),
              lse.as<float>(), dout.as<S>(), dmask.as<S>());
      return launchStatus(op);
    }
  });
}

} // namespace smp::kernels::cuda
