//===- Context.cu - Contexts, the device error flag, shared host helpers --===//

#include "Common.cuh"
#include "GemmTuning.cuh"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace smp::kernels::cuda {
using namespace detail;

namespace {
thread_local Context *tlsContext = nullptr;

std::string cudaMessage(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}
} // namespace

bool deviceAvailable() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError(); // clear the sticky-free error so later calls start clean
    return false;
  }
  return n > 0;
}

namespace {

/// Environment variable `name`, when set, as a block's rows (64 or 128;
/// `what` they are, for the error) given to `set`.
Status blockRowsFromEnvironment(const char *op, const char *name,
                                const char *what, Context &ctx,
                                Status (*set)(Context &, int)) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return Status::success();
  if (std::strcmp(v, "64") != 0 && std::strcmp(v, "128") != 0)
    return fail(op, std::string(name) + " must be 64 or 128 (" + what +
                        "), not '" + v + "'");
  return set(ctx, std::atoi(v));
}

/// The context's settings from the environment: SMP_CUBLASLT_TUNE (0 or
/// 1; SMP_CUBLASLT_TUNE_FILE is read once cuBLASLt is loaded),
/// SMP_ATTENTION_FORWARD_ROWS (64 or 128, the tensor-core attention
/// forward's queries a block) and SMP_ATTENTION_GRAD_ROWS (64 or 128, its
/// backward's keys or queries a block; the same bits either way), and
/// SMP_ATTENTION_WGMMA (0, 1, forward or backward: which passes run on
/// Hopper's wgmma). Empty: the default.
Status settingsFromEnvironment(const char *op, Context &ctx) {
  if (const char *v = std::getenv("SMP_CUBLASLT_TUNE")) {
    if (std::strcmp(v, "1") != 0 && std::strcmp(v, "0") != 0 && *v)
      return fail(op, std::string("SMP_CUBLASLT_TUNE must be 0 or 1 (time "
                                  "cuBLASLt's algorithms per product "
                                  "shape), not '") +
                          v + "'");
    ctx.tuneGemm = std::strcmp(v, "1") == 0;
  }
  SMP_RETURN_IF_ERROR(blockRowsFromEnvironment(
      op, "SMP_ATTENTION_FORWARD_ROWS",
      "the tensor-core attention forward's queries a block", ctx,
      setAttentionForwardRows));
  SMP_RETURN_IF_ERROR(blockRowsFromEnvironment(
      op, "SMP_ATTENTION_GRAD_ROWS",
      "the tensor-core attention backward's keys or queries a block", ctx,
      setAttentionGradRows));
  if (const char *v = std::getenv("SMP_ATTENTION_WGMMA"); v && *v) {
    std::string w = v;
    if (w != "0" && w != "1" && w != "forward" && w != "backward")
      return fail(op, "SMP_ATTENTION_WGMMA must be 0, 1, forward or backward "
                      "(the tensor-core attention's passes on Hopper's "
                      "wgmma: none, both, or the one named), not '" +
                          w + "'");
    SMP_RETURN_IF_ERROR(setAttentionWgmma(ctx, w == "1" || w == "forward",
                                          w == "1" || w == "backward"));
  }
  return Status::success();
}

} // namespace

Status createContext(int dev, Context *&out, cudaStream_t stream) {
  const char *op = "cuda_context";
  out = nullptr;
  Context *ctx = new Context;
  ctx->device = dev;
  if (Status s = settingsFromEnvironment(op, *ctx); !s.ok()) {
    delete ctx;
    return s;
  }
  auto cleanup = [&](Status s) {
    destroyContext(ctx);
    return s;
  };
  if (Status s = cudaStatus(op, cudaSetDevice(dev)); !s.ok()) {
    delete ctx;
    return s;
  }
  // The kernels' scratches (Scratch: cudaMallocAsync) come from the device's
  // default pool, which gives its memory back to the driver at every
  // synchronization unless told to keep it: each step, and under
  // `smprun --profile` each instruction, would map its scratches again.
  cudaMemPool_t pool;
  uint64_t keep = UINT64_MAX;
  if (Status s = cudaStatus(op, cudaDeviceGetDefaultMemPool(&pool, dev));
      !s.ok()) {
    delete ctx;
    return s;
  }
  if (Status s =
          cudaStatus(op, cudaMemPoolSetAttribute(
                             pool, cudaMemPoolAttrReleaseThreshold, &keep));
      !s.ok()) {
    delete ctx;
    return s;
  }
  if (stream) {
    ctx->stream = stream;
  } else {
    if (Status s = cudaStatus(
            op, cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
        !s.ok()) {
      ctx->stream = nullptr;
      return cleanup(s);
    }
    ctx->ownsStream = true;
  }
  if (cublasStatus_t st = cublasLtCreate(&ctx->lt);
      st != CUBLAS_STATUS_SUCCESS) {
    ctx->lt = nullptr;
    if (const char *why = smp_cublaslt_load_error())
      return cleanup(fail(op, why));
    return cleanup(fail(op, std::string("cublasLtCreate failed: ") +
                                cublasStatusName(st)));
  }
  // SMP_CUBLASLT_TUNE_FILE: read now (a file of another device is refused
  // before anything runs); its device line names cuBLASLt's version.
  if (const char *f = std::getenv("SMP_CUBLASLT_TUNE_FILE"); f && *f) {
    std::string device;
    if (Status s = tuningDeviceLine(op, dev, device); !s.ok())
      return cleanup(s);
    if (Status s =
            openGemmTuningFile(op, f, device, ctx->tuneGemm, ctx->tuneFile);
        !s.ok())
      return cleanup(s);
  }
  ctx->workspaceBytes = size_t(32) << 20;
  if (Status s =
          cudaStatus(op, cudaMalloc(&ctx->workspace, ctx->workspaceBytes));
      !s.ok()) {
    ctx->workspace = nullptr;
    return cleanup(s);
  }
  if (Status s = cudaStatus(op, cudaMalloc(&ctx->dError, sizeof(DeviceError)));
      !s.ok()) {
    ctx->dError = nullptr;
    return cleanup(s);
  }
  if (Status s = cudaStatus(
          op, cudaMallocHost(reinterpret_cast<void **>(&ctx->hError),
                             sizeof(DeviceError)));
      !s.ok()) {
    ctx->hError = nullptr;
    return cleanup(s);
  }
  if (Status s = cudaStatus(op, cudaMemsetAsync(ctx->dError, 0,
                                                sizeof(DeviceError),
                                                ctx->stream));
      !s.ok())
    return cleanup(s);
  if (Status s = cudaStatus(op, cudaStreamSynchronize(ctx->stream)); !s.ok())
    return cleanup(s);
  out = ctx;
  return Status::success();
}

void destroyContext(Context *ctx) {
  if (!ctx)
    return;
  if (tlsContext == ctx)
    tlsContext = nullptr;
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(ctx->device);
  if (ctx->stream)
    cudaStreamSynchronize(ctx->stream);
  if (ctx->hError)
    cudaFreeHost(ctx->hError);
  if (ctx->dError)
    cudaFree(ctx->dError);
  if (ctx->workspace)
    cudaFree(ctx->workspace);
  destroyLtPlans(ctx->ltPlans);
  ctx->ltPlans = nullptr;
  delete ctx->tuneFile;
  ctx->tuneFile = nullptr;
  if (ctx->lt)
    cublasLtDestroy(ctx->lt);
  if (ctx->ownsStream && ctx->stream)
    cudaStreamDestroy(ctx->stream);
  if (previous >= 0)
    cudaSetDevice(previous);
  cudaGetLastError();
  delete ctx;
}

void setCurrentContext(Context *ctx) {
  tlsContext = ctx;
  if (ctx)
    cudaSetDevice(ctx->device);
}

Context *currentContext() { return tlsContext; }

cudaStream_t stream(Context &ctx) { return ctx.stream; }
cudaStream_t exchangeStream(Context &ctx, cudaStream_t stream) {
  std::swap(ctx.stream, stream);
  return stream;
}
int device(Context &ctx) { return ctx.device; }
void setAllowTF32(Context &ctx, bool allow) { ctx.allowTF32 = allow; }

Status memoryHeld(const Context &ctx, DeviceMemoryHeld &out) {
  const char *op = "cuda_memory_held";
  out = DeviceMemoryHeld();
  out.workspace = ctx.workspaceBytes + (ctx.dError ? sizeof(DeviceError) : 0);
  cudaMemPool_t pool; // the kernels' scratches' (Scratch: cudaMallocAsync)
  SMP_RETURN_IF_ERROR(
      cudaStatus(op, cudaDeviceGetDefaultMemPool(&pool, ctx.device)));
  SMP_RETURN_IF_ERROR(
      cudaStatus(op, cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh,
                                             &out.scratchHigh)));
  SMP_RETURN_IF_ERROR(
      cudaStatus(op, cudaMemPoolGetAttribute(
                         pool, cudaMemPoolAttrReservedMemHigh, &out.poolHigh)));
  return cudaStatus(
      op, cudaDeviceGetGraphMemAttribute(
              ctx.device, cudaGraphMemAttrReservedMemHigh, &out.graphHigh));
}

Status resetScratchHigh(const Context &ctx) {
  const char *op = "cuda_reset_scratch_high";
  cudaMemPool_t pool;
  SMP_RETURN_IF_ERROR(
      cudaStatus(op, cudaDeviceGetDefaultMemPool(&pool, ctx.device)));
  // Setting a high-water attribute (to 0, the only value allowed) starts it
  // again from the current value.
  uint64_t zero = 0;
  SMP_RETURN_IF_ERROR(cudaStatus(
      op, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero)));
  return cudaStatus(
      op, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
}

Status synchronize(Context &ctx) {
  const char *op = "cuda_synchronize";
  SMP_RETURN_IF_ERROR(cudaStatus(op, cudaStreamSynchronize(ctx.stream)));
  SMP_RETURN_IF_ERROR(cudaStatus(
      op, cudaMemcpyAsync(ctx.hError, ctx.dError, sizeof(DeviceError),
                          cudaMemcpyDeviceToHost, ctx.stream)));
  SMP_RETURN_IF_ERROR(cudaStatus(op, cudaStreamSynchronize(ctx.stream)));
  DeviceError e = *ctx.hError;
  if (e.code == kErrNone)
    return Status::success();
  SMP_RETURN_IF_ERROR(cudaStatus(
      op, cudaMemsetAsync(ctx.dError, 0, sizeof(DeviceError), ctx.stream)));
  SMP_RETURN_IF_ERROR(cudaStatus(op, cudaStreamSynchronize(ctx.stream)));
  auto str = [](long long v) { return std::to_string(v); };
  switch (e.code) {
  case kErrDivByZero:
    return fail("div", "integer division by zero");
  case kErrModByZero:
    return fail(e.aux ? "fmod" : "mod", "integer division by zero");
  case kErrGatherIndex:
  case kErrGatherGradIndex:
  case kErrGatherNdIndex:
  case kErrGatherNdGradIndex:
  case kErrGatherElementsIndex:
  case kErrGatherElementsGradIndex: {
    static const char *const names[] = {
        "gather", "gather_grad", "", "", "", // codes 4-6: not indices
        "gather_nd", "gather_nd_grad", "gather_elements",
        "gather_elements_grad"};
    static_assert(sizeof(names) / sizeof(*names) ==
                      kErrGatherElementsGradIndex - kErrGatherIndex + 1,
                  "one name per error code from kErrGatherIndex on");
    return fail(names[e.code - kErrGatherIndex],
                "index " + str(e.value) + " at position " + str(e.position) +
                    " is out of range for axis " + str(e.aux) + " of size " +
                    str(e.bound));
  }
  case kErrLabel:
  case kErrLabelShard:
  case kErrLabelRank:
    return fail(e.code == kErrLabel        ? "cross_entropy"
                : e.code == kErrLabelShard ? "cross_entropy_shard"
                                           : "label_rank",
                "label " + str(e.value) + " at position " + str(e.position) +
                    " is outside [0, " + str(e.bound) +
                    ") and is not the ignore_index " + str(e.aux));
  case kErrLabelGrad:
    return fail("cross_entropy_grad",
                "label " + str(e.value) + " at position " + str(e.position) +
                    " is outside [0, " + str(e.bound) + ")");
  case kErrLabelRankShard:
    return fail("label_rank",
                "label " + str(e.value) + " at position " + str(e.position) +
                    " is not in the shard's classes [" + str(e.aux) + ", " +
                    str(e.bound) + "), and no target is given");
  default:
    return fail(op, "unknown device error code " + std::to_string(e.code));
  }
}

//===----------------------------------------------------------------------===//
// Host helpers
//===----------------------------------------------------------------------===//

namespace detail {

Status requireContext(const char *op, Context *&ctx) {
  ctx = tlsContext;
  if (!ctx)
    return fail(op, "no current CUDA context (call "
                    "smp::kernels::cuda::setCurrentContext)");
  return Status::success();
}

Status cudaStatus(const char *op, cudaError_t e) {
  if (e == cudaSuccess)
    return Status::success();
  return fail(op, "CUDA error " + cudaMessage(e));
}

Status launchStatus(const char *op) {
  return cudaStatus(op, cudaGetLastError());
}

Status requireHopper(const char *op, const char *what, int device) {
  int major = 0, minor = 0;
  SMP_RETURN_IF_ERROR(
      cudaStatus(op, cudaDeviceGetAttribute(
                         &major, cudaDevAttrComputeCapabilityMajor, device)));
  SMP_RETURN_IF_ERROR(
      cudaStatus(op, cudaDeviceGetAttribute(
                         &minor, cudaDevAttrComputeCapabilityMinor, device)));
  if (major == 9 && minor == 0)
    return Status::success();
  return fail(op, std::string(what) +
                      " needs compute capability 9.0 (H100, H200); device " +
                      std::to_string(device) + " has " + std::to_string(major) +
                      "." + std::to_string(minor));
}

namespace {
/// The bytes one launch of storeBytes carries (under the 4 KB of kernel
/// parameters every architecture takes).
constexpr size_t kParamBytes = 4000;
struct ParamBytes {
  unsigned char b[kParamBytes];
};
__global__ void storeBytes(unsigned char *dst, ParamBytes src, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    dst[i] = src.b[i];
}
} // namespace

Status uploadBytes(const char *op, void *dst, const void *src, size_t bytes,
                   cudaStream_t stream) {
  auto *out = static_cast<unsigned char *>(dst);
  const auto *in = static_cast<const unsigned char *>(src);
  for (size_t at = 0; at < bytes; at += kParamBytes) {
    size_t n = std::min(kParamBytes, bytes - at);
    ParamBytes chunk{};
    std::memcpy(chunk.b, in + at, n);
    storeBytes<<<1, 256, 0, stream>>>(out + at, chunk, static_cast<int>(n));
    SMP_RETURN_IF_ERROR(launchStatus(op));
  }
  return Status::success();
}

const char *cublasStatusName(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR:
    return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR:
    return "CUBLAS_STATUS_LICENSE_ERROR";
  default:
    return "unknown cuBLAS status";
  }
}

} // namespace detail
} // namespace smp::kernels::cuda
