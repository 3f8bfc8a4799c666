//===- CublasLtTest.cu - The emulated cuBLASLt ----------------------------===//
//
// CUDA source (it builds with nvcc too) run through kernels/cudaemu: that
// the emulator's cuBLASLt computes what cuBLASLt computes (products against
// a loop, the bias, GELU and bias-gradient epilogues, the summation order
// asked for) and refuses what cuBLASLt refuses or a GPU would fault on
// (operands that overrun their allocation or break the promised
// alignment).
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "EmuTestUtil.h"

namespace {

using smp::emutest::deviceCopy;
using smp::emutest::hostCopy;

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

// The order the emulated cuBLASLt sums over k in: k order, or the reverse
// under SMP_CUDAEMU_SUM_ORDER=reverse (ctest's cudaemu.reverse-sums-order),
// told apart by 2^24 and sixteen 1s: in k order each 1 added to 2^24
// rounds away; the 1s summed first add 16.
TEST(CudaEmu, CublasLtSumsInTheOrderAsked) {
  const float big = 16777216.0f;
  const float want = smp::emutest::reverseSums() ? big + 16 : big;
  // A 1 x 17 row (2^24, then sixteen 1s) times a column of 1s.
  std::vector<float> A(17, 1.0f), B(17, 1.0f);
  A[0] = big;
  float *dA = deviceCopy(A), *dB = deviceCopy(B), *dD;
  cudaMalloc(&dD, sizeof(float));
  Lt lt;
  ASSERT_EQ(lt.plan(CUDA_R_32F, false, false, 1, 1, 17, 1, 4),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(lt.run(dA, dB, dD), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(hostCopy(dD, 1)[0], want);
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dD);
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

} // namespace
