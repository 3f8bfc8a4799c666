//===- CublasLt.cpp - cuBLASLt's matrix product in the emulator -----------===//
//
// The cuBLASLt calls smp makes, with the documented semantics: D =
// alpha op(A) op(B) + beta C on column-major (or row-major) layouts with
// leading dimensions and strided batches, f32/f16/bf16 storage with f32
// accumulation (tf32-rounded operands under CUBLAS_COMPUTE_32F_FAST_TF32)
// and f64. What cuBLASLt would refuse is refused the same way: a leading
// dimension shorter than a column, operands whose shapes do not chain, a
// type combination without a kernel, an epilogue this emulator does not
// model (CUBLAS_STATUS_NOT_SUPPORTED: the caller's fallback runs; it models
// CUBLASLT_EPILOGUE_BIAS with a bias of D's type: D's rows each get their
// bias element, added to alpha op(A) op(B) + beta C before D is rounded to
// its type, a batch stride of 0 sharing one bias; and for one unbatched
// product with f32 compute, CUBLASLT_EPILOGUE_GELU_AUX_BIAS (the biased sum
// stored to the aux matrix, its tanh-form GELU to D) and
// CUBLASLT_EPILOGUE_DGELU_BGRAD (D = the sum times the GELU's derivative at
// the aux matrix's element, and each row of D, as stored, summed in column
// order in double into the bias pointer), the aux matrix of D's type with
// the documented leading dimension: a multiple of 8, at least D's rows),
// and CUBLASLT_EPILOGUE_BGRADB (op(B)'s columns summed over k in order in
// double into the bias pointer: D's columns), and at
// the product: an operand or workspace not in device memory or running
// past its allocation, or a pointer less aligned than the preference
// promised when the algorithm was chosen (a real kernel would fault).
// Checks are made when cublasLtMatmul is called; the product is issued on
// its stream (Streams.cpp: run then, or later on a deferred stream).
//
//===----------------------------------------------------------------------===//

#include "State.h"
#include "Streams.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

using namespace smp::cudaemu;

namespace {

struct Handle {
  int magic = 0x4c74;
};
struct OpDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t biasType = -1; // -1: D's type
  int64_t biasStride = 0;
  const void *aux = nullptr;
  int64_t auxLd = 0;
};

bool geluEpilogue(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

/// The epilogues modelled for one unbatched product only.
bool oneProductEpilogue(uint32_t e) {
  return geluEpilogue(e) || e == CUBLASLT_EPILOGUE_BGRADB;
}

/// The tanh-form GELU and its derivative, in double.
constexpr double kGeluK = 0.79788456080286535588, kGeluC = 0.044715;
double geluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(kGeluK * (x + kGeluC * x * x * x)));
}
double geluTanhDerivative(double x) {
  double t = std::tanh(kGeluK * (x + kGeluC * x * x * x));
  return 0.5 * (1 + t) +
         0.5 * x * (1 - t * t) * kGeluK * (1 + 3 * kGeluC * x * x);
}
struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t order = CUBLASLT_ORDER_COL;
  int32_t batch = 1;
  int64_t stride = 0;
};
struct Pref {
  uint64_t workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256}; // A, B, C, D
};
constexpr uint64_t kAlgoMagic = 0x736d70656d75ull; // "smpemu"

OpDesc *op(cublasLtMatmulDesc_t d) { return reinterpret_cast<OpDesc *>(d); }
Layout *lay(cublasLtMatrixLayout_t l) { return reinterpret_cast<Layout *>(l); }
Pref *pref(cublasLtMatmulPreference_t p) {
  return reinterpret_cast<Pref *>(p);
}

size_t typeSize(cudaDataType_t t) {
  switch (t) {
  case CUDA_R_32F:
    return 4;
  case CUDA_R_64F:
    return 8;
  case CUDA_R_16F:
  case CUDA_R_16BF:
    return 2;
  default:
    return 0;
  }
}

template <class T> cublasStatus_t setValue(T &field, const void *buf,
                                           size_t size) {
  if (size != sizeof(T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

/// Element (r, c) offset of a layout (one matrix of the batch).
int64_t at(const Layout &l, int64_t r, int64_t c) {
  return l.order == CUBLASLT_ORDER_COL ? c * l.ld + r : r * l.ld + c;
}

/// Elements a batch of this layout spans from its first element.
int64_t extent(const Layout &l) {
  int64_t one = l.order == CUBLASLT_ORDER_COL
                    ? (int64_t(l.cols) - 1) * l.ld + int64_t(l.rows)
                    : (int64_t(l.rows) - 1) * l.ld + int64_t(l.cols);
  return (l.batch - 1) * l.stride + one;
}

double load(const void *p, cudaDataType_t t, int64_t i) {
  switch (t) {
  case CUDA_R_32F:
    return static_cast<const float *>(p)[i];
  case CUDA_R_64F:
    return static_cast<const double *>(p)[i];
  case CUDA_R_16F:
    return __half2float(static_cast<const __half *>(p)[i]);
  case CUDA_R_16BF:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  default:
    return 0;
  }
}

void store(void *p, cudaDataType_t t, int64_t i, double v) {
  switch (t) {
  case CUDA_R_32F:
    static_cast<float *>(p)[i] = static_cast<float>(v);
    break;
  case CUDA_R_64F:
    static_cast<double *>(p)[i] = v;
    break;
  case CUDA_R_16F:
    static_cast<__half *>(p)[i] = __float2half_rn(static_cast<float>(v));
    break;
  case CUDA_R_16BF:
    static_cast<__nv_bfloat16 *>(p)[i] =
        __float2bfloat16_rn(static_cast<float>(v));
    break;
  default:
    break;
  }
}

/// TF32: the f32 value with its mantissa rounded to 10 bits.
float tf32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) != 0x7f800000u)
    u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&v, &u, 4);
  return v;
}

/// Why this product has no kernel, or empty.
std::string refusal(const OpDesc &d, const Layout &a, const Layout &b,
                    const Layout &c, const Layout &dd) {
  uint64_t m = d.transA == CUBLAS_OP_N ? a.rows : a.cols;
  uint64_t k = d.transA == CUBLAS_OP_N ? a.cols : a.rows;
  uint64_t kb = d.transB == CUBLAS_OP_N ? b.rows : b.cols;
  uint64_t n = d.transB == CUBLAS_OP_N ? b.cols : b.rows;
  if (k != kb || c.rows != m || c.cols != n || dd.rows != m || dd.cols != n)
    return "op(A) " + std::to_string(m) + "x" + std::to_string(k) +
           ", op(B) " + std::to_string(kb) + "x" + std::to_string(n) +
           ", C " + std::to_string(c.rows) + "x" + std::to_string(c.cols) +
           ", D " + std::to_string(dd.rows) + "x" + std::to_string(dd.cols) +
           " do not chain";
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
      d.epilogue != CUBLASLT_EPILOGUE_BIAS && !oneProductEpilogue(d.epilogue))
    return "epilogue " + std::to_string(d.epilogue) +
           " is not modelled by the emulator";
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
      (d.compute == CUBLAS_COMPUTE_64F ||
       (d.biasType != -1 && d.biasType != dd.type)))
    return "the bias epilogues are modelled for f32 compute with a bias of "
           "D's type only";
  if (oneProductEpilogue(d.epilogue) &&
      (dd.batch != 1 || dd.order != CUBLASLT_ORDER_COL))
    return "the GELU and BGRADB epilogues are modelled for one column-major "
           "product";
  if (geluEpilogue(d.epilogue)) {
    if (!d.aux || d.auxLd % 8 != 0 || d.auxLd < int64_t(dd.rows))
      return "the GELU epilogues need an aux pointer and an aux leading "
             "dimension divisible by 8 and at least D's rows (" +
             std::to_string(d.auxLd) + " for " + std::to_string(dd.rows) + ")";
  }
  if (a.batch != dd.batch || b.batch != dd.batch || c.batch != dd.batch)
    return "batch counts differ";
  bool f64 = d.compute == CUBLAS_COMPUTE_64F;
  bool f32 = d.compute == CUBLAS_COMPUTE_32F ||
             d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  if (f64 && (d.scale != CUDA_R_64F || a.type != CUDA_R_64F ||
              b.type != CUDA_R_64F || c.type != CUDA_R_64F ||
              dd.type != CUDA_R_64F))
    return "CUBLAS_COMPUTE_64F needs f64 scale and operands";
  if (f32) {
    if (d.scale != CUDA_R_32F)
      return "f32 compute needs an f32 scale type";
    if (a.type != b.type || c.type != dd.type ||
        (a.type != c.type && c.type != CUDA_R_32F))
      return "no kernel for these operand types";
    if (a.type == CUDA_R_64F || typeSize(a.type) == 0)
      return "no kernel for these operand types";
    if (d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 && a.type != CUDA_R_32F)
      return "CUBLAS_COMPUTE_32F_FAST_TF32 takes f32 operands";
  }
  if (!f32 && !f64)
    return "compute type " + std::to_string(d.compute) +
           " is not modelled by the emulator";
  return "";
}

bool checkLayout(const Layout &l) {
  int64_t need = l.order == CUBLASLT_ORDER_COL ? int64_t(l.rows)
                                               : int64_t(l.cols);
  return l.ld >= std::max<int64_t>(need, 1) && l.batch >= 1 &&
         (l.batch == 1 || l.stride >= 0);
}

/// The GELU epilogues on D's values v (m x n, row-major; one product):
/// GELU_AUX_BIAS stores v to the aux matrix and makes it gelu(v);
/// DGELU_BGRAD multiplies v by the GELU's derivative at the aux element.
void geluEpilogueOf(const OpDesc &d, const Layout &dl, std::vector<double> &v) {
  if (!geluEpilogue(d.epilogue))
    return;
  int64_t m = dl.rows, n = dl.cols;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double &x = v[static_cast<size_t>(i * n + j)];
      int64_t a = j * d.auxLd + i;
      if (d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
        store(const_cast<void *>(d.aux), dl.type, a, x);
        x = geluTanh(x);
      } else {
        x *= geluTanhDerivative(load(d.aux, dl.type, a));
      }
    }
}

/// D = alpha op(A) op(B) + beta C (+ bias), batch by batch: op(A) and op(B)
/// read into row-major arrays of the accumulator type Acc (tf32-rounded
/// when `tf`), each D element summed over k in order (reverseSums(): last
/// to first) in Acc, then scaled, C
/// and the bias added and D stored (after C was read: in place is allowed).
template <class Acc>
void product(const OpDesc &d, const Layout &a, const Layout &b,
             const Layout &c, const Layout &dl, double alpha, double beta,
             const void *A, const void *B, const void *C, void *D, bool tf) {
  const void *bias = d.epilogue == CUBLASLT_EPILOGUE_BIAS ||
                             d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                         ? d.bias
                         : nullptr;
  int64_t m = dl.rows, n = dl.cols;
  int64_t k = d.transA == CUBLAS_OP_N ? a.cols : a.rows;
  std::vector<Acc> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(k * n)),
      acc(static_cast<size_t>(n));
  std::vector<double> out(static_cast<size_t>(m * n));
  auto round = [&](double v) {
    Acc r = static_cast<Acc>(v);
    if constexpr (std::is_same_v<Acc, float>)
      if (tf)
        r = tf32(r);
    return r;
  };
  const bool reverse = reverseSums();
  for (int32_t bi = 0; bi < dl.batch; ++bi) {
    const char *pa = static_cast<const char *>(A) + bi * a.stride * typeSize(a.type);
    const char *pb = static_cast<const char *>(B) + bi * b.stride * typeSize(b.type);
    const char *pc = static_cast<const char *>(C) + bi * c.stride * typeSize(c.type);
    char *pd = static_cast<char *>(D) + bi * dl.stride * typeSize(dl.type);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p)
        x[i * k + p] = round(load(
            pa, a.type, d.transA == CUBLAS_OP_N ? at(a, i, p) : at(a, p, i)));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        y[p * n + j] = round(load(
            pb, b.type, d.transB == CUBLAS_OP_N ? at(b, p, j) : at(b, j, p)));
    for (int64_t i = 0; i < m; ++i) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t q = 0; q < k; ++q) {
        int64_t p = reverse ? k - 1 - q : q;
        Acc xi = x[i * k + p];
        const Acc *yp = &y[p * n];
        for (int64_t j = 0; j < n; ++j)
          acc[j] += xi * yp[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        double v = alpha * static_cast<double>(acc[j]);
        if (beta != 0)
          v += beta * load(pc, c.type, at(c, i, j));
        if (bias)
          v += load(bias, dl.type, bi * d.biasStride + i);
        out[static_cast<size_t>(i * n + j)] = v;
      }
    }
    geluEpilogueOf(d, dl, out);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        store(pd, dl.type, at(dl, i, j), out[static_cast<size_t>(i * n + j)]);
    if (d.epilogue == CUBLASLT_EPILOGUE_BGRADB)
      for (int64_t j = 0; j < n; ++j) { // op(B)'s columns summed over k
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += load(pb, b.type,
                      d.transB == CUBLAS_OP_N ? at(b, p, j) : at(b, j, p));
        store(const_cast<void *>(d.bias), dl.type, j, sum);
      }
    if (d.epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD)
      for (int64_t i = 0; i < m; ++i) { // D's rows as stored, in column order
        double sum = 0;
        for (int64_t j = 0; j < n; ++j)
          sum += load(pd, dl.type, at(dl, i, j));
        store(const_cast<void *>(d.bias), dl.type, i, sum);
      }
  }
}

cublasStatus_t refuse(cublasStatus_t s, const std::string &why) {
  report(why);
  return s;
}

/// The epilogue's bias (D's rows) and aux matrix (as D, with its ld) lie in
/// device memory, aligned to their element.
cublasStatus_t checkEpilogueBuffers(const OpDesc &d, const Layout &dl) {
  if (d.epilogue == CUBLASLT_EPILOGUE_DEFAULT)
    return CUBLAS_STATUS_SUCCESS;
  size_t es = typeSize(dl.type);
  if (!d.bias)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasLtMatmul: a bias epilogue without a bias pointer");
  struct Buffer {
    const char *what;
    const void *p;
    int64_t elements;
  };
  bool columns = d.epilogue == CUBLASLT_EPILOGUE_BGRADB;
  Buffer bufs[2] = {
      {columns ? "the bias gradient (D's columns)" : "the bias (D's rows)",
       d.bias,
       (int64_t(dl.batch) - 1) * d.biasStride +
           int64_t(columns ? dl.cols : dl.rows)},
      {"the aux matrix (D's shape, its ld)", d.aux,
       (int64_t(dl.cols) - 1) * d.auxLd + int64_t(dl.rows)}};
  for (int i = 0; i < (geluEpilogue(d.epilogue) ? 2 : 1); ++i) {
    const Buffer &b = bufs[i];
    size_t bytes = static_cast<size_t>(b.elements) * es;
    if (!deviceAccessible(b.p, bytes) ||
        reinterpret_cast<uintptr_t>(b.p) % es != 0) {
      report(std::string("cublasLtMatmul: ") + b.what + ", " +
             std::to_string(bytes) +
             " bytes, is not inside a device allocation or not aligned to "
             "its element");
      setError(cudaErrorIllegalAddress, true);
      return CUBLAS_STATUS_EXECUTION_FAILED;
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

// kernels/cuda/Common.cuh: the real library is loaded on its first call
// (kernels/cuda/CublasLtLoader.cpp); this one is always there.
const char *smp_cublaslt_load_error() { return nullptr; }

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = reinterpret_cast<cublasLtHandle_t>(new Handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete reinterpret_cast<Handle *>(h);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  *d = reinterpret_cast<cublasLtMatmulDesc_t>(new OpDesc{compute, scale});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete op(d);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(
    cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
    const void *buf, size_t size) {
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setValue(op(d)->transA, buf, size);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setValue(op(d)->transB, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return setValue(op(d)->epilogue, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setValue(op(d)->bias, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return setValue(op(d)->biasType, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
    return setValue(op(d)->biasStride, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return setValue(op(d)->aux, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return setValue(op(d)->auxLd, buf, size);
  default:
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatmulDescSetAttribute: attribute " +
                      std::to_string(attr) +
                      " is not modelled by the emulator "
                      "(kernels/cudaemu/CublasLt.cpp)");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  Layout x{type, rows, cols, ld};
  if (typeSize(type) == 0 || !checkLayout(x))
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasLtMatrixLayoutCreate: " + std::to_string(rows) +
                      "x" + std::to_string(cols) + " with ld " +
                      std::to_string(ld) + " (column-major ld >= rows)");
  *l = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout(x));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete lay(l);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(
    cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
    const void *buf, size_t size) {
  switch (attr) {
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
    return setValue(lay(l)->batch, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
    return setValue(lay(l)->stride, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_ORDER:
    return setValue(lay(l)->order, buf, size);
  default:
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatrixLayoutSetAttribute: attribute " +
                      std::to_string(attr) + " is not modelled");
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Pref);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete pref(p);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
    const void *buf, size_t size) {
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return setValue(pref(p)->workspace, buf, size);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    return setValue(pref(p)->align[0], buf, size);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    return setValue(pref(p)->align[1], buf, size);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    return setValue(pref(p)->align[2], buf, size);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return setValue(pref(p)->align[3], buf, size);
  default:
    return CUBLAS_STATUS_SUCCESS; // search preferences: no effect here
  }
}

/// The emulated library's version: CUDA's headers'.
size_t cublasLtGetVersion() { return CUBLAS_VERSION; }

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *returned) {
  countHeuristicQuery();
  *returned = 0;
  if (requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  std::string why = refusal(*op(d), *lay(a), *lay(b), *lay(c), *lay(dd));
  if (!why.empty()) {
    report("cuBLASLt heuristic: no algorithm: " + why);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (noEpilogues() && op(d)->epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    return CUBLAS_STATUS_NOT_SUPPORTED; // SMP_CUDAEMU_NO_EPILOGUES
  // Kernels need operands aligned to their element at least.
  const Layout *ls[4] = {lay(a), lay(b), lay(c), lay(dd)};
  for (int i = 0; i < 4; ++i)
    if (pref(p)->align[i] < typeSize(ls[i]->type))
      return CUBLAS_STATUS_NOT_SUPPORTED;
  // Two algorithms where more are asked for (smp's SMP_CUBLASLT_TUNE times
  // them), the same product each: data[5] numbers them.
  *returned = std::min(requested, 2);
  for (int k = 0; k < *returned; ++k) {
    cublasLtMatmulHeuristicResult_t r{};
    r.algo.data[0] = kAlgoMagic;
    for (int i = 0; i < 4; ++i)
      r.algo.data[1 + i] = pref(p)->align[i];
    r.algo.data[5] = static_cast<uint64_t>(k);
    r.workspaceSize = 0;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    results[k] = r;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                              const void *alpha, const void *A,
                              cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc,
                              void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceBytes, cudaStream_t stream) {
  if (!h || !desc)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  const OpDesc &d = *op(desc);
  const Layout &a = *lay(Adesc), &b = *lay(Bdesc), &c = *lay(Cdesc),
               &dl = *lay(Ddesc);
  std::string why = refusal(d, a, b, c, dl);
  if (!why.empty())
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul: " + why);
  if (!algo || algo->data[0] != kAlgoMagic)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasLtMatmul: an algorithm not from the heuristic");
  if (C == D && (c.ld != dl.ld || c.order != dl.order || c.type != dl.type ||
                 c.stride != dl.stride))
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasLtMatmul: in place (C == D) with different layouts");
  const void *ptrs[4] = {A, B, C, D};
  const Layout *ls[4] = {&a, &b, &c, &dl};
  const char *names[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; ++i) {
    size_t bytes = static_cast<size_t>(extent(*ls[i])) * typeSize(ls[i]->type);
    if (!deviceAccessible(ptrs[i], bytes)) {
      report(std::string("cublasLtMatmul: ") + names[i] + " (" +
             std::to_string(bytes) +
             " bytes by its layout) is not inside a device allocation");
      setError(cudaErrorIllegalAddress, true);
      return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    uint64_t promised = algo->data[1 + i];
    if (reinterpret_cast<uintptr_t>(ptrs[i]) % promised != 0) {
      report(std::string("cublasLtMatmul: ") + names[i] +
             " is less aligned than the " + std::to_string(promised) +
             " bytes the algorithm was chosen for");
      setError(cudaErrorIllegalAddress, true);
      return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (dl.batch > 1 &&
        (ls[i]->stride * typeSize(ls[i]->type)) % promised != 0) {
      report(std::string("cublasLtMatmul: ") + names[i] +
             "'s batch stride breaks the promised alignment");
      setError(cudaErrorIllegalAddress, true);
      return CUBLAS_STATUS_EXECUTION_FAILED;
    }
  }
  if (cublasStatus_t st = checkEpilogueBuffers(d, dl);
      st != CUBLAS_STATUS_SUCCESS)
    return st;
  if (workspace && workspaceBytes &&
      !deviceAccessible(workspace, workspaceBytes)) {
    report("cublasLtMatmul: the workspace is not device memory");
    setError(cudaErrorIllegalAddress, true);
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }

  bool unaligned = false;
  for (const Layout *l : ls)
    unaligned |= (l->ld * typeSize(l->type)) % 16 != 0;
  countProduct(unaligned);
  if (dryRun())
    return CUBLAS_STATUS_SUCCESS; // checked, not computed
  bool f64 = d.compute == CUBLAS_COMPUTE_64F;
  bool tf = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  double al = f64 ? *static_cast<const double *>(alpha)
                  : *static_cast<const float *>(alpha);
  double be = f64 ? *static_cast<const double *>(beta)
                  : *static_cast<const float *>(beta);
  // The product runs when the stream's work reaches it (later on a stream
  // SMP_CUDAEMU_DEFER defers): it keeps copies of the descriptors and of
  // alpha and beta (host values, read when the call is made).
  enqueueWork(stream, [d, a, b, c, dl, al, be, A, B, C, D, f64, tf] {
    if (f64)
      product<double>(d, a, b, c, dl, al, be, A, B, C, D, false);
    else
      product<float>(d, a, b, c, dl, al, be, A, B, C, D, tf);
  });
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
