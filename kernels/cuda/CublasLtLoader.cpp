//===- CublasLtLoader.cpp - cuBLASLt, loaded when first called ------------===//
//
// smp's executables do not link libcublasLt: it is 541 MB (CUDA 13.0) and
// the dynamic loader spent ~140 ms of CPU relocating it at the start of
// every process that linked it, every rank of every CPU run included,
// which never calls it (docs/runtime-layout.md). This file defines the
// cuBLASLt functions kernels/cuda calls, with the declarations of CUDA's
// <cublasLt.h> (a signature that drifts from the header does not compile);
// the first call dlopens libcublasLt.so.<CUBLAS_VER_MAJOR> (searched as the
// linked library was: LD_LIBRARY_PATH, the executable's RUNPATH, the loader
// cache) and resolves every function at once. When it cannot be loaded, or
// lacks one of them, every call returns CUBLAS_STATUS_NOT_INITIALIZED and
// smp_cublaslt_load_error() says why.
//
//===----------------------------------------------------------------------===//

#include "CublasLtLoader.h"

#include <dlfcn.h>

#include <mutex>

namespace smp::kernels::cuda::detail {

std::string cublasLtSoname() {
  return "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
}

bool openCublasLt(const std::string &soname, CublasLtTable &out,
                  std::string &error) {
  void *lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    error = "cannot load " + soname + " (" + (why ? why : "dlopen failed") +
            "): install CUDA " + std::to_string(CUBLAS_VER_MAJOR) +
            "'s cuBLAS or put the folder that has it on LD_LIBRARY_PATH";
    return false;
  }
  CublasLtTable t;
#define SMP_RESOLVE(name)                                                      \
  t.name = reinterpret_cast<decltype(t.name)>(dlsym(lib, #name));              \
  if (!t.name) {                                                               \
    error = soname + " has no " #name ": it is not the cuBLASLt of CUDA " +    \
            std::to_string(CUBLAS_VER_MAJOR);                                  \
    dlclose(lib);                                                              \
    return false;                                                              \
  }
  SMP_CUBLASLT_FUNCTIONS(SMP_RESOLVE)
#undef SMP_RESOLVE
  out = t;
  return true;
}

namespace {
CublasLtTable table;
std::string loadError;
std::once_flag loaded;
} // namespace

const CublasLtTable *cublasLt() {
  std::call_once(loaded, [] {
    CublasLtTable t;
    if (openCublasLt(cublasLtSoname(), t, loadError))
      table = t;
  });
  return table.cublasLtCreate ? &table : nullptr;
}

} // namespace smp::kernels::cuda::detail

using smp::kernels::cuda::detail::cublasLt;

extern "C" {

const char *smp_cublaslt_load_error() {
  return cublasLt() ? nullptr : smp::kernels::cuda::detail::loadError.c_str();
}

#define SMP_CALL(name, ...)                                                    \
  const auto *t = cublasLt();                                                  \
  return t ? t->name(__VA_ARGS__) : CUBLAS_STATUS_NOT_INITIALIZED

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  SMP_CALL(cublasLtCreate, handle);
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  SMP_CALL(cublasLtDestroy, handle);
}

/// 0 when the library cannot be loaded.
size_t cublasLtGetVersion() {
  const auto *t = cublasLt();
  return t ? t->cublasLtGetVersion() : 0;
}

cublasStatus_t
cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
               const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
               const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
               const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
               cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
               void *workspace, size_t workspaceBytes, cudaStream_t stream) {
  SMP_CALL(cublasLtMatmul, handle, desc, alpha, A, Adesc, B, Bdesc, beta, C,
           Cdesc, D, Ddesc, algo, workspace, workspaceBytes, stream);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
    cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
    int *returnAlgoCount) {
  SMP_CALL(cublasLtMatmulAlgoGetHeuristic, handle, desc, Adesc, Bdesc, Cdesc,
           Ddesc, preference, requestedAlgoCount, heuristicResultsArray,
           returnAlgoCount);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  SMP_CALL(cublasLtMatmulDescCreate, desc, computeType, scaleType);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  SMP_CALL(cublasLtMatmulDescDestroy, desc);
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                               cublasLtMatmulDescAttributes_t attr,
                               const void *buf, size_t sizeInBytes) {
  SMP_CALL(cublasLtMatmulDescSetAttribute, desc, attr, buf, sizeInBytes);
}

cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  SMP_CALL(cublasLtMatmulPreferenceCreate, pref);
}

cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  SMP_CALL(cublasLtMatmulPreferenceDestroy, pref);
}

cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                     cublasLtMatmulPreferenceAttributes_t attr,
                                     const void *buf, size_t sizeInBytes) {
  SMP_CALL(cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  SMP_CALL(cublasLtMatrixLayoutCreate, layout, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  SMP_CALL(cublasLtMatrixLayoutDestroy, layout);
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                 cublasLtMatrixLayoutAttribute_t attr,
                                 const void *buf, size_t sizeInBytes) {
  SMP_CALL(cublasLtMatrixLayoutSetAttribute, layout, attr, buf, sizeInBytes);
}

#undef SMP_CALL
} // extern "C"
