//===- CublasLtLoader.h - cuBLASLt, loaded when first called --*- C++ -*-===//
//
// CublasLtLoader.cpp defines the cuBLASLt functions kernels/cuda calls and
// loads libcublasLt on the first call; the executables do not link it.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_CUBLASLTLOADER_H
#define SMP_KERNELS_CUDA_CUBLASLTLOADER_H

#include <cublasLt.h>

#include <string>

namespace smp::kernels::cuda::detail {

// The cuBLASLt functions kernels/cuda calls: X(name).
#define SMP_CUBLASLT_FUNCTIONS(X)                                              \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtGetVersion)                                                        \
  X(cublasLtMatmul)                                                            \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)

/// Each function of SMP_CUBLASLT_FUNCTIONS in a loaded library.
struct CublasLtTable {
#define SMP_CUBLASLT_FIELD(name) decltype(&::name) name = nullptr;
  SMP_CUBLASLT_FUNCTIONS(SMP_CUBLASLT_FIELD)
#undef SMP_CUBLASLT_FIELD
};

/// The library the loader opens: libcublasLt.so.<CUBLAS_VER_MAJOR>.
std::string cublasLtSoname();

/// dlopens `soname` and resolves every function into `out`; false, with
/// `error` saying what to install or set, when it cannot.
bool openCublasLt(const std::string &soname, CublasLtTable &out,
                  std::string &error);

/// cublasLtSoname()'s functions, opened on the first call; null when it
/// could not be (smp_cublaslt_load_error() says why).
const CublasLtTable *cublasLt();

} // namespace smp::kernels::cuda::detail

/// Why libcublasLt could not be loaded, or null: it was, or it is the
/// emulator's (kernels/cudaemu/CublasLt.cpp defines this too).
extern "C" const char *smp_cublaslt_load_error();

#endif // SMP_KERNELS_CUDA_CUBLASLTLOADER_H
