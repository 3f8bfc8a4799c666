//===- Kernels.h - CUDA kernels of the smp ops ------------------*- C++ -*-===//
//
// The CUDA backend of the kernel API (smp/kernels/Kernels.h and
// KernelApi.inc, declared once for every backend), in smp::kernels::cuda,
// plus devices, contexts and streams. It differs from the CPU in three ways:
//
//  * TensorRef::data points to DEVICE memory (every tensor, including labels,
//    indices and the optimizers' scalars). Dense row-major as on the CPU.
//  * Every kernel is asynchronous: it is enqueued on the stream of the
//    calling thread's current Context (setCurrentContext) and returns once
//    enqueued. The returned Status reports what the host can see: shapes,
//    dtypes and attributes that do not match the op, no current context, a
//    launch or cuBLASLt failure.
//  * Data errors (an index out of range, an integer division by zero, a
//    label outside the classes) are found on the device. They are recorded
//    in the context's device error flag (the first one wins) and reported by
//    the next synchronize(), whose message names the op like the CPU's
//    ("gather: index 7 at position 3 is out of range for axis 0 of size 5").
//    The outputs of a kernel that raised a data error are unspecified.
//
// Float kernels accept f32, f64, f16 and bf16; f16/bf16 are computed in f32,
// f64 in f64. Statistics (norms, softmax denominators) accumulate in f32 for
// f32/f16/bf16 (f64 for f64) with tree reductions; reductions (reduce_sum /
// reduce_mean) and the cross-entropy sums accumulate in f64. Results match
// the CPU kernels to rounding, not bit for bit; f16/bf16 attention on the
// tensor cores (attentionOnTensorCores) also rounds its probabilities and
// their gradients to f16/bf16 for the products, as FlashAttention does. GEMMs run on cuBLASLt (fp32
// compute, TF32 off unless setAllowTF32), with a plain tiled kernel for what
// cuBLASLt refuses (integer types, odd alignments). Binary ops broadcast up
// to 8 dims after merging contiguous dims. Integer division or mod by zero,
// a gather index or a cross-entropy label out of range are device errors.
// gatherGrad, gatherNdGrad and gatherElementsGrad scatter-add with atomics
// (f16/bf16 through an f32 scratch): the order of the additions is not
// deterministic, results may differ in the last bits between runs.
//
// Plain CUDA C++17 (cuBLASLt); no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_KERNELS_H
#define SMP_KERNELS_CUDA_KERNELS_H

#include "smp/kernels/Kernels.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace smp::kernels::cuda {

#include "smp/kernels/KernelApi.inc"

//===----------------------------------------------------------------------===//
// Devices, contexts and streams (Context.cu)
//===----------------------------------------------------------------------===//

/// A device, a stream, a cuBLASLt handle with its workspace, and the device
/// error flag the kernels write. Opaque; one per thread (or per stream).
struct Context;

/// True when the CUDA runtime finds at least one device. Never aborts: false
/// without a driver or a GPU.
bool deviceAvailable();

/// Creates a context on `device`. With stream == nullptr the context creates
/// (and owns) a non-blocking stream; otherwise it enqueues on `stream`, which
/// the caller keeps alive and destroys. Allocates the cuBLASLt workspace
/// (32 MiB) and the error flag.
Status createContext(int device, Context *&out, cudaStream_t stream = nullptr);
/// Synchronizes the stream, then frees what createContext allocated (also
/// the stream when the context owns it). Null is a no-op. Clears the
/// calling thread's current context if it is this one.
void destroyContext(Context *ctx);

/// The context the kernels of the calling thread enqueue on (thread-local);
/// also makes its device current (cudaSetDevice). Null clears it.
void setCurrentContext(Context *ctx);
Context *currentContext();

cudaStream_t stream(Context &ctx);
/// Makes the context's kernels and copies queue on `stream` from now on
/// (a side stream for a step of communication or offload copies; the
/// kernels there must not use the error flag's stream-ordered reads or
/// Scratch across streams) and returns the stream they queued on before.
cudaStream_t exchangeStream(Context &ctx, cudaStream_t stream);
/// The products whose cuBLASLt epilogue (bias, GELU, bias gradient) had no
/// algorithm on this device, one line each ("GELU_AUX_BIAS epilogue of a
/// bf16 [16384, 768] x [768, 3072] product"): their separate kernels ran
/// instead.
std::vector<std::string> epilogueFallbacks(const Context &ctx);
/// Under SMP_CUBLASLT_TUNE=1 (read when the context is made: unset, 0 or
/// 1), each product plan's first product (a plan: the shape, epilogue and
/// operand alignments) times the first 8 algorithms cuBLASLt's heuristic
/// proposes and keeps the fastest for the plan, as cudnn.benchmark does for
/// convolutions; a line per plan
/// ("matmul_gelu_grad bf16 [16384, 768] x [768, 3072] DGELU_BGRAD: 8 of 8
/// algorithms timed; the heuristic's first 1234.5 us (63 TFLOP/s), the
/// fastest (#3) 456.7 us (170 TFLOP/s)"). Off by default: which algorithm
/// wins can change between runs, and algorithms sum in other orders.
std::vector<std::string> gemmTuning(const Context &ctx);
/// Under SMP_CUBLASLT_TUNE_FILE=F (kernels/cuda/GemmTuning.cuh), the
/// algorithms SMP_CUBLASLT_TUNE=1 timed fastest are kept in F, and a run
/// with F reads them and runs them untimed (the same bits every run; a file
/// of another device or cuBLASLt is refused when the context is made). The
/// run's line on it ("F: 15 product plans ran its algorithm (6 not the
/// heuristic's first), 0 not in it ran the heuristic's first"), or "".
std::string gemmTuningFileNote(const Context &ctx);
int device(Context &ctx);
/// What the context holds on its device besides the caller's allocations:
/// the library workspaces it allocated (cuBLASLt's 32 MiB and the error
/// flag), and the kernels' scratches (Scratch: cudaMallocAsync from the
/// device's default pool, freed after their kernels): the most they held
/// at once (`scratchHigh`) and the most memory the pool mapped for them
/// (`poolHigh`; it keeps what it mapped) since the context was made or
/// since resetScratchHigh. A captured step's scratches (Graph below) are
/// its graph's memory instead: `graphHigh`, the most the device's graphs
/// have mapped.
struct DeviceMemoryHeld {
  uint64_t workspace = 0, scratchHigh = 0, poolHigh = 0, graphHigh = 0;
};
Status memoryHeld(const Context &ctx, DeviceMemoryHeld &out);
/// Starts `scratchHigh` and `poolHigh` again from what is held now.
Status resetScratchHigh(const Context &ctx);
/// Lets fp32 GEMMs use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
/// Off by default: fp32 GEMMs then match the CPU to fp32 rounding.
void setAllowTF32(Context &ctx, bool allow);

/// Whether attention and attention_grad of dtype t, head dims d (q, k) and
/// dv (v), with the softmax's scale, over these tensors run on the tensor
/// cores (AttentionMma.cu): f16 or bf16, d = dv in {32, 64, 96, 128}, a
/// positive scale (the kernels take each row's maximum of the unscaled
/// scores), every tensor with elements 16-byte aligned and its last two
/// dims under 2^31 / 128 elements (a tile's offsets are 32-bit). There, as in
/// FlashAttention, the probabilities and their gradients are rounded to t for
/// the products that read them; the rest runs the f32-compute kernels (the CUDA
/// cores).
bool attentionOnTensorCores(DType t, int64_t d, int64_t dv, float scale,
                            std::initializer_list<const TensorRef *> tensors);
/// The queries a block of the tensor-core attention forward takes: 64 (the
/// default: 16 a warp) or 128 (32 a warp, each K/V fragment serving two
/// row tiles; head dims up to 64 only, larger ones keep 64; on wgmma, two
/// warpgroups of 64 sharing the K/V tiles). The same results either way; a
/// tuning knob the GPU benchmark compares
/// (bench/kernels/CudaAttentionBench.cpp). Fails for other values.
Status setAttentionForwardRows(Context &ctx, int rows);
/// The keys a block of the tensor-core attention backward's key pass takes,
/// and the queries a block of its query pass: 64 (the default: 16 a warp)
/// or 128 (32 a warp, each fragment of the tile the pass walks serving two
/// row tiles; head dims up to 64 without dropout only, others keep 64; on
/// wgmma, two warpgroups of 64 sharing the walked tiles). The same results
/// either way; a tuning knob the GPU benchmark compares.
/// Fails for other values.
Status setAttentionGradRows(Context &ctx, int rows);
/// The tensor-core attention's forward (AttentionWgmma.cu) and backward
/// (AttentionWgmmaGrad.cu) on Hopper's wgmma, each where it applies:
/// f16/bf16, D = Dv = 64, no dropout; elsewhere, and when off (the
/// default), mma.sync's (setAttentionForwardRows, setAttentionGradRows).
/// Results within the tensor cores' rounding of mma.sync's (the hardware
/// sums products in its own order), the forward's statistics the same.
/// Turning either on fails on a device other than compute capability 9.0
/// (H100, H200).
Status setAttentionWgmma(Context &ctx, bool forward, bool backward);
/// Both passes on wgmma, or neither.
inline Status setAttentionWgmma(Context &ctx, bool on) {
  return setAttentionWgmma(ctx, on, on);
}

/// A step's work captured as a CUDA graph (Graph.cu): the kernels,
/// cuBLASLt products and copies queued on the context's stream between
/// beginCapture and endCapture (and on the streams that waited for its
/// events, joined back before the end), launched again in one call. Each
/// launch repeats them with the arguments and addresses they were
/// captured with; their scratches are the graph's own memory.
struct Graph;
/// Starts capturing the context's stream: from now until endCapture its
/// work is recorded, not run. Nothing may wait for the device meanwhile.
Status beginCapture(Context &ctx);
/// Ends the capture and instantiates its graph into `out` (the caller's:
/// destroyGraph). When the capture failed (something waited for the
/// device, or copied from pageable host memory, or a stream that joined it
/// was not joined back) `out` is null, the capture is over, and the error
/// says what cudart refused.
Status endCapture(Context &ctx, Graph *&out);
/// Queues the graph's work on the context's stream.
Status launchGraph(Context &ctx, Graph &graph);
void destroyGraph(Graph *graph);

/// Waits for the stream, then reads and clears the device error flag: a
/// failure naming the op for the first data error any kernel recorded since
/// the last synchronize, or for an asynchronous CUDA error.
Status synchronize(Context &ctx);

} // namespace smp::kernels::cuda

#endif // SMP_KERNELS_CUDA_KERNELS_H
