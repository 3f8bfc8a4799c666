//===- MatMul.cu - Batched matrix product on cuBLASLt ---------------------===//
//
// numpy.matmul(op(lhs), op(rhs)) with broadcast batch dims, as the CPU's
// matmul. Row-major C = op(A) op(B) is computed by cuBLASLt in column-major
// terms as C^T = op(B)^T op(A)^T: a row-major matrix is the column-major
// view of its transpose, so no data moves.
//
// Batches: when every batch of both operands is one stride apart (strides
// may differ per operand but not be 0), one strided-batched call; a rank-2
// rhs under a batched, untransposed lhs folds the batch into M (one GEMM);
// other broadcasts issue one call per group of the innermost merged batch
// dim (or per batch when an operand repeats inside it, since cuBLASLt
// documents non-negative but not zero batch strides).
//
// matmul_bias adds its bias (one value per column of the result, a row of
// column-major D) in cuBLASLt's CUBLASLT_EPILOGUE_BIAS, before the result is
// rounded to its type; where cuBLASLt has no algorithm with the epilogue,
// the plain product runs and the add kernel adds the bias after it.
// matmul_bias_gelu runs CUBLASLT_EPILOGUE_GELU_AUX_BIAS (the GELU's input
// written to the aux matrix, ld N) and matmul_gelu_grad
// CUBLASLT_EPILOGUE_DGELU_BGRAD (the aux matrix read, the bias gradient
// summed over D's columns): one cuBLASLt call each, so only a product that
// is a single call (no batch; a rank-2 rhs folds the batch into M) with N a
// multiple of 8 (the aux ld's documented constraint); matmul_bias_grad
// (lhs^T rhs) CUBLASLT_EPILOGUE_BGRADB (our lhs is cuBLASLt's B: its sum
// over k is the sum of lhs's rows), also one call; anything else, or a
// refusal, runs the separate kernels.
//
// Integers, and anything cuBLASLt's heuristic refuses, run gemmTiled: a
// 16x16 shared-memory tiled kernel (fp32 accumulation for f32/f16/bf16, f64
// for f64, wrapping 64-bit for integers).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "GemmTuning.cuh"

#include <array>
#include <map>
#include <memory>

namespace smp::kernels::cuda {
using namespace detail;

namespace {

/// The matrices (common::MatMulDims) and the batch walk; passed to the
/// kernels by value.
struct Geometry : common::MatMulDims {
  int64_t nb;
  Strided<2> batch; // batch index -> element offsets into A and B
  bool foldBatchIntoM;
};

//===----------------------------------------------------------------------===//
// Tiled fallback
//===----------------------------------------------------------------------===//

/// The tiled kernel's element access: floats as FT (computed in FT<T>::C);
/// integers accumulate wrapping in uint64_t, reduced to T at the end.
template <class T> struct IntMM {
  using C = uint64_t;
  __device__ static C load(T v) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  }
  __device__ static T store(C v) { return static_cast<T>(v); }
};
template <class T>
using MM = std::conditional_t<std::is_integral_v<T>, IntMM<T>, FT<T>>;

constexpr int kTile = 16;

/// Element (r, c) of op(X), X stored with row stride ld (op transposes when
/// trans), in the accumulator type; 0 outside [rows, cols].
template <class T>
__device__ typename MM<T>::C opElement(const T *x, bool trans, int64_t ld,
                                       int64_t r, int64_t c, int64_t rows,
                                       int64_t cols) {
  using C = typename MM<T>::C;
  if (r >= rows || c >= cols)
    return C(0);
  return MM<T>::load(trans ? x[c * ld + r] : x[r * ld + c]);
}

template <class T>
__global__ void gemmTiled(const T *a, const T *b, T *c, Geometry g) {
  using Acc = typename MM<T>::C;
  __shared__ Acc as[kTile][kTile + 1];
  __shared__ Acc bs[kTile][kTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t tilesM = (g.M + kTile - 1) / kTile, tilesN = (g.N + kTile - 1) / kTile;
  for (int64_t bi = blockIdx.z; bi < g.nb; bi += gridDim.z) {
    int64_t off[2];
    g.batch.offsets(bi, off);
    const T *pa = a + off[0], *pb = b + off[1];
    T *pc = c + bi * g.M * g.N;
    for (int64_t tm = blockIdx.y; tm < tilesM; tm += gridDim.y)
      for (int64_t tn = blockIdx.x; tn < tilesN; tn += gridDim.x) {
        int64_t i = tm * kTile + ty, j = tn * kTile + tx;
        Acc acc = Acc(0);
        for (int64_t k0 = 0; k0 < g.K; k0 += kTile) {
          as[ty][tx] = opElement(pa, g.transA, g.colsA, i, k0 + tx, g.M, g.K);
          bs[ty][tx] = opElement(pb, g.transB, g.colsB, k0 + ty, j, g.K, g.N);
          __syncthreads();
          for (int k = 0; k < kTile; ++k)
            acc += as[ty][k] * bs[k][tx];
          __syncthreads();
        }
        if (i < g.M && j < g.N)
          pc[i * g.N + j] = MM<T>::store(acc);
      }
  }
}

Status runTiled(const char *name, Context *ctx, const Geometry &g,
                const TensorRef &lhs, const TensorRef &rhs,
                const TensorRef &out) {
  auto launch = [&](auto tag) {
    using T = typename decltype(tag)::type;
    int64_t tilesM = (g.M + kTile - 1) / kTile,
            tilesN = (g.N + kTile - 1) / kTile;
    dim3 grid(static_cast<unsigned>(std::min<int64_t>(tilesN, 65535)),
              static_cast<unsigned>(std::min<int64_t>(tilesM, 65535)),
              static_cast<unsigned>(std::min<int64_t>(g.nb, 65535)));
    gemmTiled<T><<<grid, dim3(kTile, kTile), 0, ctx->stream>>>(
        lhs.as<T>(), rhs.as<T>(), out.as<T>(), g);
    return launchStatus(name);
  };
  if (smp::base::isFloat(lhs.dtype))
    return visitFloat(lhs.dtype, name, launch);
  return visitInt(lhs.dtype, name, launch);
}

//===----------------------------------------------------------------------===//
// cuBLASLt
//===----------------------------------------------------------------------===//


/// One cuBLASLt call: `count` products from these element offsets.
struct Call {
  int64_t offA, offB, offC;
};

/// A product's cuBLASLt epilogue (DEFAULT: none).
struct Epilogue {
  uint32_t mode = CUBLASLT_EPILOGUE_DEFAULT;
  /// The bias (BIAS, GELU_AUX_BIAS) or the bias gradient (DGELU_BGRAD).
  const void *bias = nullptr;
  /// The GELU's input, ld N: written (GELU_AUX_BIAS) or read (DGELU_BGRAD).
  const void *aux = nullptr;
  /// C, added to the product (beta = 1; out's shape and type), or null.
  const void *addend = nullptr;
};

/// The largest power of two (at most 256) dividing v; 256 for 0.
uint32_t alignmentOf(uint64_t v) {
  uint32_t a = 1;
  while (a < 256 && (v & a) == 0)
    a <<= 1;
  return a;
}

/// cuBLASLt's data, compute and scale types for `dt`; false where it has
/// none (the caller then runs the tiled kernel).
bool ltTypes(DType dt, bool allowTF32, cudaDataType_t &type,
             cublasComputeType_t &compute, cudaDataType_t &scaleType) {
  switch (dt) {
  case DType::F32:
    type = CUDA_R_32F;
    compute = allowTF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    return true;
  case DType::F64:
    type = CUDA_R_64F;
    compute = CUBLAS_COMPUTE_64F;
    scaleType = CUDA_R_64F;
    return true;
  case DType::F16:
    type = CUDA_R_16F;
    compute = CUBLAS_COMPUTE_32F;
    return true;
  case DType::BF16:
    type = CUDA_R_16BF;
    compute = CUBLAS_COMPUTE_32F;
    return true;
  default:
    return false;
  }
}

/// The cuBLASLt calls of one product: M' rows per product and `count`
/// products per call (strides sA, sB, sC in elements), with the alignment
/// of every pointer the calls use.
struct LtCalls {
  int64_t M = 0, count = 1, sA = 0, sB = 0, sC = 0;
  std::vector<Call> calls;
  uint32_t alA = 256, alB = 256, alC = 256;

  explicit LtCalls(const Geometry &g) : M(g.M), sC(g.M * g.N) {
    const Strided<2> &bt = g.batch;
    int r = bt.rank;
    if (g.foldBatchIntoM) {
      M = g.nb * g.M;
      calls.push_back({0, 0, 0});
      return;
    }
    int64_t last = bt.shape[r - 1], lA = bt.stride[0][r - 1],
            lB = bt.stride[1][r - 1];
    bool strided = last > 1 && lA != 0 && lB != 0 && last <= INT32_MAX;
    int64_t groups = g.nb / last;
    for (int64_t o = 0; o < groups; ++o) {
      // Offsets of batch o * last (dims before the last merged one).
      int64_t rem = o, offA = 0, offB = 0;
      for (int d = r - 2; d >= 0; --d) {
        int64_t idx = rem % bt.shape[d];
        rem /= bt.shape[d];
        offA += idx * bt.stride[0][d];
        offB += idx * bt.stride[1][d];
      }
      if (strided) {
        calls.push_back({offA, offB, o * last * sC});
      } else {
        for (int64_t k = 0; k < last; ++k)
          calls.push_back({offA + k * lA, offB + k * lB, (o * last + k) * sC});
      }
    }
    if (strided) {
      count = last;
      sA = lA;
      sB = lB;
    }
  }

  /// Alignment of every pointer the calls use (elements of `es` bytes).
  void align(const TensorRef &lhs, const TensorRef &rhs, const TensorRef &out,
             int64_t es) {
    for (const Call &c : calls) {
      alA = std::min(alA, alignmentOf(reinterpret_cast<uintptr_t>(lhs.data) +
                                      static_cast<uint64_t>(c.offA * es)));
      alB = std::min(alB, alignmentOf(reinterpret_cast<uintptr_t>(rhs.data) +
                                      static_cast<uint64_t>(c.offB * es)));
      alC = std::min(alC, alignmentOf(reinterpret_cast<uintptr_t>(out.data) +
                                      static_cast<uint64_t>(c.offC * es)));
    }
    if (count > 1) {
      alA = std::min(alA, alignmentOf(static_cast<uint64_t>(sA * es)));
      alB = std::min(alB, alignmentOf(static_cast<uint64_t>(sB * es)));
      alC = std::min(alC, alignmentOf(static_cast<uint64_t>(sC * es)));
    }
  }
};


} // namespace

// Named (not anonymous): Context's LtPlanCache holds them.
namespace lt {
/// Owns the cuBLASLt descriptors of one product.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtDescs() = default;
  LtDescs(const LtDescs &) = delete;
  LtDescs &operator=(const LtDescs &) = delete;
  ~LtDescs() {
    if (pref)
      cublasLtMatmulPreferenceDestroy(pref);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }
};

/// A product's cuBLASLt plan: its descriptors and the algorithm the
/// heuristic chose for them (none: cuBLASLt refuses the shape).
struct LtPlan {
  LtDescs d;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
  bool noted = false; // its refused epilogue is in epilogueFallbacks()
  /// The heuristic's algorithms, best first by its estimate: one, or
  /// kTuneCandidates under SMP_CUBLASLT_TUNE=1, which times them on the
  /// plan's first product and keeps the fastest (timeAlgorithms), or under
  /// SMP_CUBLASLT_TUNE_FILE, whose choice runs (`tuned`: either).
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool tuned = false;
  LtKey key{}; // its key in LtPlanCache (and SMP_CUBLASLT_TUNE_FILE)
};

} // namespace lt

struct LtPlanCache {
  std::map<LtKey, std::unique_ptr<lt::LtPlan>> plans;
  /// epilogueFallbacks(): the refused epilogues' products, each once.
  std::vector<std::string> fallbacks;
  /// gemmTuning(): a line per tuned plan.
  std::vector<std::string> tuning;
};
void destroyLtPlans(LtPlanCache *plans) { delete plans; }

namespace {
using namespace lt;

/// Plans past this many (a model has a few dozen shapes) are all dropped.
constexpr size_t kMaxLtPlans = 4096;

/// Builds the descriptors of a product and asks the heuristic for an
/// algorithm; a status only for a failed descriptor call.
Status makeLtPlan(const char *name, Context *ctx, const Geometry &g,
                  const LtCalls &lc, cudaDataType_t type,
                  cublasComputeType_t compute, cudaDataType_t scaleType,
                  const Epilogue &e, LtPlan &plan) {
  LtDescs &d = plan.d;
  auto ok = [](cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; };
  auto ltFail = [&](const char *what, cublasStatus_t s) {
    return fail(name, std::string(what) + " failed: " + cublasStatusName(s));
  };
  int64_t M = lc.M, count = lc.count;
  int64_t rowsA = g.foldBatchIntoM ? M : g.rowsA;
  // Column-major: D (N x M') = opa(a) (N x K) * opb(b) (K x M'), with
  // a = rhs stored as colsB x rowsB (ld colsB), b = lhs stored as colsA x
  // rowsA' (ld colsA), D = out stored as N x M' (ld N).
  cublasStatus_t st;
  if (!ok(st = cublasLtMatmulDescCreate(&d.op, compute, scaleType)))
    return ltFail("cublasLtMatmulDescCreate", st);
  cublasOperation_t opa = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (!ok(st = cublasLtMatmulDescSetAttribute(
              d.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa))) ||
      !ok(st = cublasLtMatmulDescSetAttribute(
              d.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb))))
    return ltFail("cublasLtMatmulDescSetAttribute", st);
  if (e.mode != CUBLASLT_EPILOGUE_DEFAULT) {
    // D's rows (column-major) are out's columns: the bias (or its gradient)
    // runs along them and broadcasts over D's columns (out's rows) and the
    // batch (stride 0); the aux matrix is laid out as D (ld N).
    int32_t biasType = type;
    int64_t auxLd = g.N;
    if (!ok(st = cublasLtMatmulDescSetAttribute(d.op,
                                                CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                &e.mode, sizeof(e.mode))) ||
        !ok(st = cublasLtMatmulDescSetAttribute(
                d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                sizeof(biasType))) ||
        !ok(st = cublasLtMatmulDescSetAttribute(
                d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e.bias,
                sizeof(e.bias))))
      return ltFail("cublasLtMatmulDescSetAttribute", st);
    if (e.aux && (!ok(st = cublasLtMatmulDescSetAttribute(
                          d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                          &e.aux, sizeof(e.aux))) ||
                  !ok(st = cublasLtMatmulDescSetAttribute(
                          d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd,
                          sizeof(auxLd)))))
      return ltFail("cublasLtMatmulDescSetAttribute", st);
  }
  auto layout = [&](cublasLtMatrixLayout_t &l, int64_t rows, int64_t cols,
                    int64_t ld, int64_t stride) {
    cublasStatus_t s = cublasLtMatrixLayoutCreate(
        &l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld);
    if (!ok(s))
      return s;
    if (count > 1) {
      int32_t n32 = static_cast<int32_t>(count);
      s = cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n32, sizeof(n32));
      if (!ok(s))
        return s;
      s = cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof(stride));
    }
    return s;
  };
  if (!ok(st = layout(d.a, g.colsB, g.rowsB, g.colsB, lc.sB)) ||
      !ok(st = layout(d.b, g.colsA, rowsA, g.colsA, lc.sA)) ||
      !ok(st = layout(d.c, g.N, M, g.N, lc.sC)))
    return ltFail("cublasLtMatrixLayoutCreate", st);
  if (!ok(st = cublasLtMatmulPreferenceCreate(&d.pref)))
    return ltFail("cublasLtMatmulPreferenceCreate", st);
  uint64_t ws = ctx->workspaceBytes;
  // cuBLASLt's A is our rhs, its B our lhs.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const uint32_t *>
      alignments[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &lc.alB},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &lc.alA},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &lc.alC},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &lc.alC}};
  st = cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (auto [attr, value] : alignments)
    if (ok(st))
      st = cublasLtMatmulPreferenceSetAttribute(d.pref, attr, value,
                                                sizeof(*value));
  if (!ok(st))
    return ltFail("cublasLtMatmulPreferenceSetAttribute", st);
  int want = ctx->tuneGemm || ctx->tuneFile ? kTuneCandidates : 1, found = 0;
  std::vector<cublasLtMatmulHeuristicResult_t> heur(want);
  st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, d.op, d.a, d.b, d.c, d.c, d.pref,
                                      want, heur.data(), &found);
  for (int i = 0; ok(st) && i < found; ++i)
    if (heur[i].state == CUBLAS_STATUS_SUCCESS)
      plan.candidates.push_back(heur[i].algo);
  plan.found = !plan.candidates.empty();
  if (plan.found)
    plan.algo = plan.candidates[0];
  return Status::success();
}

/// An epilogue's cuBLASLt name ("an" for one smp does not use).
const char *epilogueName(uint32_t mode) {
  return mode == CUBLASLT_EPILOGUE_BIAS            ? "BIAS"
         : mode == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? "GELU_AUX_BIAS"
         : mode == CUBLASLT_EPILOGUE_DGELU_BGRAD   ? "DGELU_BGRAD"
         : mode == CUBLASLT_EPILOGUE_BGRADB        ? "BGRADB"
                                                   : "an";
}

/// "bf16 [16384, 768] x [768, 3072]": a call's product.
std::string productText(const Geometry &g, DType dt, const LtCalls &lc) {
  auto dims = [](int64_t a, int64_t b) {
    return "[" + std::to_string(a) + ", " + std::to_string(b) + "]";
  };
  return std::string(smp::base::dtypeName(dt)) + " " + dims(lc.M, g.K) + " x " +
         dims(g.K, g.N);
}

/// "matmul_bias bf16 [16384, 768] x [768, 2304] BIAS": a plan in words.
std::string planText(const char *name, const Geometry &g, DType dt,
                     const LtCalls &lc, uint32_t mode) {
  std::string s = std::string(name) + " " + productText(g, dt, lc);
  if (mode != CUBLASLT_EPILOGUE_DEFAULT)
    s += std::string(" ") + epilogueName(mode);
  return s;
}

/// Notes that cuBLASLt has no algorithm for this product's epilogue: once a
/// plan (a refused plan is met every step), and a line once.
void noteFallback(Context *ctx, LtPlan &plan, const Geometry &g, DType dt,
                  const LtCalls &lc, uint32_t mode) {
  if (mode == CUBLASLT_EPILOGUE_DEFAULT || plan.noted)
    return;
  plan.noted = true;
  std::string line = std::string(epilogueName(mode)) + " epilogue of a " +
                     productText(g, dt, lc) + " product";
  auto &seen = ctx->ltPlans->fallbacks;
  if (std::find(seen.begin(), seen.end(), line) == seen.end())
    seen.push_back(line);
}

/// The cached plan of this product, made on its shape's first product.
Status ltPlanFor(const char *name, Context *ctx, const Geometry &g, DType dt,
                 const LtCalls &lc, cudaDataType_t type,
                 cublasComputeType_t compute, cudaDataType_t scaleType,
                 const Epilogue &e, LtPlan *&plan) {
  auto align = [](const void *p) -> int64_t {
    return p ? alignmentOf(reinterpret_cast<uintptr_t>(p)) : 0;
  };
  LtKey key = {static_cast<int64_t>(dt),
               ctx->allowTF32,
               g.transA,
               g.transB,
               g.rowsA,
               g.colsA,
               g.rowsB,
               g.colsB,
               g.N,
               g.foldBatchIntoM,
               lc.M,
               lc.count,
               lc.sA,
               lc.sB,
               lc.sC,
               lc.alA,
               lc.alB,
               lc.alC,
               e.mode,
               align(e.bias),
               align(e.aux)};
  if (!ctx->ltPlans)
    ctx->ltPlans = new LtPlanCache;
  auto &plans = ctx->ltPlans->plans;
  if (auto it = plans.find(key); it != plans.end()) {
    plan = it->second.get();
    return Status::success();
  }
  auto fresh = std::make_unique<LtPlan>();
  SMP_RETURN_IF_ERROR(
      makeLtPlan(name, ctx, g, lc, type, compute, scaleType, e, *fresh));
  fresh->key = key;
  if (ctx->tuneFile && fresh->found) { // SMP_CUBLASLT_TUNE_FILE's, untimed
    int a = -1;
    SMP_RETURN_IF_ERROR(
        algorithmFromFile(name, *ctx->tuneFile, key, fresh->candidates.size(),
                          planText(name, g, dt, lc, e.mode), a));
    if (a >= 0) {
      fresh->algo = fresh->candidates[a];
      fresh->tuned = true;
    }
  }
  if (plans.size() >= kMaxLtPlans)
    plans.clear();
  plan = fresh.get();
  plans.emplace(key, std::move(fresh));
  return Status::success();
}

/// Runs the product on cuBLASLt with epilogue `e`. Sets `refused` (and
/// returns success) when cuBLASLt has no algorithm for it; the caller then
/// runs the tiled kernel or its epilogue's separate kernels. The
/// descriptors and algorithm of a shape are made once (ltPlanFor): the
/// heuristic costs microseconds of host time a call.
Status runLt(const char *name, Context *ctx, const Geometry &g, DType dt,
             const TensorRef &lhs, const TensorRef &rhs, const Epilogue &e,
             const TensorRef &out, bool &refused) {
  refused = true;
  cudaDataType_t type;
  cublasComputeType_t compute;
  cudaDataType_t scaleType = CUDA_R_32F;
  if (!ltTypes(dt, ctx->allowTF32, type, compute, scaleType))
    return Status::success(); // refused
  int64_t es = static_cast<int64_t>(smp::base::dtypeSize(dt));

  // The calls: M' rows per product and `count` products per call.
  LtCalls lc(g);
  // The GELU epilogues' aux matrix and the bias gradients span one product.
  bool oneProduct =
      e.mode != CUBLASLT_EPILOGUE_DEFAULT && e.mode != CUBLASLT_EPILOGUE_BIAS;
  if (oneProduct &&
      (lc.calls.size() != 1 || lc.count != 1 || (e.aux && g.N % 8 != 0)))
    return Status::success(); // refused
  lc.align(lhs, rhs, out, es);
  if (e.addend) // C: laid out as D (the key's alignment of C and D)
    for (const Call &c : lc.calls)
      lc.alC =
          std::min(lc.alC, alignmentOf(reinterpret_cast<uintptr_t>(e.addend) +
                                       static_cast<uint64_t>(c.offC * es)));
  LtPlan *plan = nullptr;
  SMP_RETURN_IF_ERROR(
      ltPlanFor(name, ctx, g, dt, lc, type, compute, scaleType, e, plan));
  if (!plan->found) {
    noteFallback(ctx, *plan, g, dt, lc, e.mode);
    return Status::success(); // refused: the caller runs the tiled kernel
  }
  const LtDescs &d = plan->d;
  // A cached plan holds the pointers of the product it was made for (ones
  // of the same alignment: the key): this product's bias and aux matrix.
  for (auto [attr, ptr] :
       {std::pair(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e.bias),
        std::pair(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &e.aux)}) {
    if (!*ptr)
      continue;
    cublasStatus_t st =
        cublasLtMatmulDescSetAttribute(d.op, attr, ptr, sizeof(*ptr));
    if (st != CUBLAS_STATUS_SUCCESS)
      return fail(name, std::string("cublasLtMatmulDescSetAttribute failed: ") +
                            cublasStatusName(st));
  }

  float alpha32 = 1.0f, beta32 = e.addend ? 1.0f : 0.0f;
  double alpha64 = 1.0, beta64 = e.addend ? 1.0 : 0.0;
  const void *alpha = dt == DType::F64 ? static_cast<const void *>(&alpha64)
                                       : static_cast<const void *>(&alpha32);
  const void *beta = dt == DType::F64 ? static_cast<const void *>(&beta64)
                                      : static_cast<const void *>(&beta32);
  const char *pa = static_cast<const char *>(rhs.data);
  const char *pb = static_cast<const char *>(lhs.data);
  char *pc = static_cast<char *>(out.data);
  // C: the addend (beta 1), or D itself (beta 0: not read).
  const char *pcIn = e.addend ? static_cast<const char *>(e.addend) : pc;
  // Every call of the product with `algo`; the first failing call's status
  // (failedAt: its number).
  size_t failedAt = 0;
  auto enqueue = [&](const cublasLtMatmulAlgo_t &algo) {
    for (size_t i = 0; i < lc.calls.size(); ++i) {
      const Call &c = lc.calls[i];
      char *dst = pc + c.offC * es;
      cublasStatus_t st = cublasLtMatmul(
          ctx->lt, d.op, alpha, pa + c.offB * es, d.a, pb + c.offA * es, d.b,
          beta, pcIn + c.offC * es, d.c, dst, d.c, &algo, ctx->workspace,
          ctx->workspaceBytes, ctx->stream);
      if (st != CUBLAS_STATUS_SUCCESS) {
        failedAt = i;
        return st;
      }
    }
    return CUBLAS_STATUS_SUCCESS;
  };
  if (ctx->tuneGemm && !plan->tuned) {
    double flops = 2.0 * static_cast<double>(lc.M) * static_cast<double>(g.N) *
                   static_cast<double>(g.K) * static_cast<double>(lc.count) *
                   static_cast<double>(lc.calls.size());
    std::string what = planText(name, g, dt, lc, e.mode), line;
    int chosen = -1;
    plan->tuned = true;
    SMP_RETURN_IF_ERROR(timeAlgorithms(name, ctx->stream, plan->candidates,
                                       what, flops, enqueue, chosen, line));
    if (chosen >= 0)
      plan->algo = plan->candidates[chosen];
    if (!line.empty())
      ctx->ltPlans->tuning.push_back(line);
    if (ctx->tuneFile && chosen >= 0)
      SMP_RETURN_IF_ERROR(
          recordGemmTuning(name, *ctx->tuneFile, plan->key, chosen, what));
  }
  if (cublasStatus_t st = enqueue(plan->algo); st != CUBLAS_STATUS_SUCCESS) {
    // A first call that cuBLASLt rejects (nothing was enqueued yet): run
    // the tiled kernel instead, now and for this shape from now on.
    if (failedAt == 0 && (st == CUBLAS_STATUS_NOT_SUPPORTED ||
                          st == CUBLAS_STATUS_INVALID_VALUE ||
                          st == CUBLAS_STATUS_ARCH_MISMATCH)) {
      plan->found = false;
      noteFallback(ctx, *plan, g, dt, lc, e.mode);
      return Status::success(); // refused
    }
    refused = false;
    return fail(name,
                std::string("cublasLtMatmul failed: ") + cublasStatusName(st));
  }
  refused = false;
  return launchStatus(name);
}

/// The product with epilogue `e` (null: none). `ran` says whether it ran:
/// with an epilogue, false where cuBLASLt has no algorithm for it (or the
/// product is empty or sums nothing), and nothing was enqueued: the caller
/// runs its separate kernels. Without, the tiled kernel runs what cuBLASLt
/// refuses.
Status runProduct(const char *name, const TensorRef &lhs, const TensorRef &rhs,
                  const Epilogue *e, const TensorRef &out, bool transposeLhs,
                  bool transposeRhs, bool &ran) {
  ran = false;
  SMP_RETURN_IF_ERROR(common::checkMatMulOperands(lhs, rhs, out));
  if (!smp::base::isFloat(lhs.dtype) && !smp::base::isInteger(lhs.dtype))
    return unsupported(name, lhs.dtype);
  common::MatMulShape ms;
  SMP_RETURN_IF_ERROR(
      common::matmulShape(lhs, rhs, out, transposeLhs, transposeRhs, ms));
  Geometry g;
  static_cast<common::MatMulDims &>(g) = ms;
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  if (e && (out.numel() == 0 || g.K == 0))
    return Status::success(); // the caller's kernels
  ran = true;
  if (out.numel() == 0)
    return Status::success();
  if (g.K == 0) // empty sum: zeros of any dtype are zero bytes
    return cudaStatus(name,
                      cudaMemsetAsync(out.data, 0, out.bytes(), ctx->stream));

  g.nb = product(ms.batch);
  SMP_RETURN_IF_ERROR(
      makeStrided<2>(name, ms.batch, {ms.strA, ms.strB}, g.batch));
  g.foldBatchIntoM = !g.transA && product(ms.batchB) == 1 &&
                     product(ms.batchA) == g.nb && g.nb > 1;

  if (smp::base::isFloat(lhs.dtype)) {
    bool refused = false;
    Status s = runLt(name, ctx, g, lhs.dtype, lhs, rhs, e ? *e : Epilogue(),
                     out, refused);
    ran = s.ok() && !refused;
    if (!s.ok() || ran || e)
      return s;
  }
  ran = true;
  return runTiled(name, ctx, g, lhs, rhs, out);
}

/// The product with epilogue `e`, or where it did not run `fallback()`:
/// the epilogue's separate kernels.
template <class Fallback>
Status epilogueOr(const char *name, const TensorRef &lhs, const TensorRef &rhs,
                  const Epilogue &e, const TensorRef &out, bool transposeLhs,
                  bool transposeRhs, Fallback fallback) {
  bool ran = false;
  SMP_RETURN_IF_ERROR(
      runProduct(name, lhs, rhs, &e, out, transposeLhs, transposeRhs, ran));
  return ran ? Status::success() : fallback();
}

} // namespace

Status matmul(const TensorRef &lhs, const TensorRef &rhs, const TensorRef &out,
              bool transposeLhs, bool transposeRhs) {
  bool ran;
  return runProduct("matmul", lhs, rhs, nullptr, out, transposeLhs,
                    transposeRhs, ran);
}

Status matmulBias(const TensorRef &lhs, const TensorRef &rhs,
                  const TensorRef &bias, const TensorRef &out,
                  bool transposeLhs, bool transposeRhs) {
  SMP_RETURN_IF_ERROR(common::checkMatMulBias(rhs, bias, out));
  return epilogueOr(
      "matmul_bias", lhs, rhs, Epilogue{CUBLASLT_EPILOGUE_BIAS, bias.data}, out,
      transposeLhs, transposeRhs, [&] {
        SMP_RETURN_IF_ERROR(matmul(lhs, rhs, out, transposeLhs, transposeRhs));
        return out.numel() == 0 ? Status::success()
                                : binary(BinaryOp::Add, out, bias, out);
      });
}

/// op(lhs) op(rhs) (+ *bias where given) + addend: cuBLASLt reads the
/// addend as C (beta = 1), the bias in its epilogue; where it has no
/// algorithm, the product (matmulBias with a bias) then the add kernel.
static Status productPlusAddend(const char *name, const TensorRef &lhs,
                                const TensorRef &rhs, const TensorRef *bias,
                                const TensorRef &addend, const TensorRef &out,
                                bool transposeLhs, bool transposeRhs) {
  Epilogue e{bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT,
             bias ? bias->data : nullptr, nullptr, addend.data};
  return epilogueOr(name, lhs, rhs, e, out, transposeLhs, transposeRhs, [&] {
    SMP_RETURN_IF_ERROR(
        bias ? matmulBias(lhs, rhs, *bias, out, transposeLhs, transposeRhs)
             : matmul(lhs, rhs, out, transposeLhs, transposeRhs));
    return out.numel() == 0 ? Status::success()
                            : binary(BinaryOp::Add, out, addend, out);
  });
}

Status matmulAdd(const TensorRef &lhs, const TensorRef &rhs,
                 const TensorRef &addend, const TensorRef &out,
                 bool transposeLhs, bool transposeRhs) {
  SMP_RETURN_IF_ERROR(common::checkMatMulAdd(addend, out));
  return productPlusAddend("matmul_add", lhs, rhs, nullptr, addend, out,
                           transposeLhs, transposeRhs);
}

Status matmulBiasAdd(const TensorRef &lhs, const TensorRef &rhs,
                     const TensorRef &bias, const TensorRef &addend,
                     const TensorRef &out, bool transposeLhs,
                     bool transposeRhs) {
  SMP_RETURN_IF_ERROR(common::checkMatMulBiasAdd(rhs, bias, addend, out));
  return productPlusAddend("matmul_bias_add", lhs, rhs, &bias, addend, out,
                           transposeLhs, transposeRhs);
}

Status matmulBiasGelu(const TensorRef &lhs, const TensorRef &rhs,
                      const TensorRef &bias, const TensorRef &out,
                      const TensorRef &pre, bool transposeLhs,
                      bool transposeRhs) {
  const char *name = "matmul_bias_gelu";
  SMP_RETURN_IF_ERROR(
      common::checkGeluEpilogue(name, lhs, rhs, out, pre, bias));
  Epilogue e{CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias.data, pre.data};
  return epilogueOr(name, lhs, rhs, e, out, transposeLhs, transposeRhs, [&] {
    SMP_RETURN_IF_ERROR(
        matmulBias(lhs, rhs, bias, pre, transposeLhs, transposeRhs));
    return gelu(pre, /*tanhApproximation=*/true, out);
  });
}

Status matmulGeluGrad(const TensorRef &lhs, const TensorRef &rhs,
                      const TensorRef &pre, const TensorRef &dx,
                      const TensorRef &dbias, bool transposeLhs,
                      bool transposeRhs) {
  const char *name = "matmul_gelu_grad";
  SMP_RETURN_IF_ERROR(
      common::checkGeluEpilogue(name, lhs, rhs, dx, pre, dbias));
  Epilogue e{CUBLASLT_EPILOGUE_DGELU_BGRAD, dbias.data, pre.data};
  return epilogueOr(name, lhs, rhs, e, dx, transposeLhs, transposeRhs, [&] {
    SMP_RETURN_IF_ERROR(matmul(lhs, rhs, dx, transposeLhs, transposeRhs));
    return biasGeluGrad(pre, dx, /*tanhApprox=*/true, dx, dbias);
  });
}

Status matmulBiasGrad(const TensorRef &lhs, const TensorRef &rhs,
                      const TensorRef &out, const TensorRef &dbias) {
  SMP_RETURN_IF_ERROR(common::checkMatMulBiasGrad(lhs, rhs, out, dbias));
  // cuBLASLt's B is our lhs: BGRADB sums op(B)'s columns over k, our rows.
  Epilogue e{CUBLASLT_EPILOGUE_BGRADB, dbias.data};
  return epilogueOr("matmul_bias_grad", lhs, rhs, e, out, true, false, [&] {
    SMP_RETURN_IF_ERROR(matmul(lhs, rhs, out, true, false));
    common::BiasSums b = common::biasSums(lhs, dbias);
    return reduce(ReduceOp::Sum, lhs, b.axes, b.sums);
  });
}

std::vector<std::string> epilogueFallbacks(const Context &ctx) {
  return ctx.ltPlans ? ctx.ltPlans->fallbacks : std::vector<std::string>();
}

std::vector<std::string> gemmTuning(const Context &ctx) {
  return ctx.ltPlans ? ctx.ltPlans->tuning : std::vector<std::string>();
}

std::string gemmTuningFileNote(const Context &ctx) {
  return detail::gemmTuningFileNote(ctx.tuneFile);
}

} // namespace smp::kernels::cuda
