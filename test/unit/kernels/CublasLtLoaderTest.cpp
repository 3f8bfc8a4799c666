//===- CublasLtLoaderTest.cpp - cuBLASLt loaded on its first call ---------===//
//
// kernels/cuda/CublasLtLoader.cpp: the executables do not link libcublasLt;
// its functions load it on their first call. These run without a GPU (the
// toolkit's library is on every machine that builds the CUDA backend).
//
//===----------------------------------------------------------------------===//

#include "CublasLtLoader.h"

#include <gtest/gtest.h>

namespace {
using namespace smp::kernels::cuda::detail;

TEST(CublasLtLoader, OpensTheToolkitsLibraryAndResolvesEveryFunction) {
  EXPECT_EQ(cublasLtSoname(),
            "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR));
  CublasLtTable t;
  std::string error;
  ASSERT_TRUE(openCublasLt(cublasLtSoname(), t, error)) << error;
#define SMP_CHECK(name) EXPECT_NE(t.name, nullptr) << #name;
  SMP_CUBLASLT_FUNCTIONS(SMP_CHECK)
#undef SMP_CHECK
}

// The functions kernels/cuda calls reach the library: a matrix layout (a
// host-side descriptor, no GPU needed) made and destroyed through them.
TEST(CublasLtLoader, CallsReachTheLibrary) {
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 3, 4),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_NE(layout, nullptr);
  int64_t ld = 8;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_LD,
                                             &ld, sizeof ld),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(layout), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(smp_cublaslt_load_error(), nullptr);
}

TEST(CublasLtLoader, SaysWhatToDoWhenTheLibraryIsMissing) {
  CublasLtTable t;
  std::string error;
  EXPECT_FALSE(openCublasLt("libsmp-no-such-library.so.13", t, error));
  EXPECT_NE(error.find("cannot load libsmp-no-such-library.so.13 ("),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("install CUDA " + std::to_string(CUBLAS_VER_MAJOR) +
                       "'s cuBLAS or put the folder that has it on "
                       "LD_LIBRARY_PATH"),
            std::string::npos)
      << error;
  EXPECT_EQ(t.cublasLtCreate, nullptr);
}

TEST(CublasLtLoader, RefusesALibraryWithoutTheFunctions) {
  CublasLtTable t;
  std::string error;
  EXPECT_FALSE(openCublasLt("libm.so.6", t, error));
  EXPECT_EQ(error, "libm.so.6 has no cublasLtCreate: it is not the cuBLASLt "
                   "of CUDA " +
                       std::to_string(CUBLAS_VER_MAJOR));
}

} // namespace
