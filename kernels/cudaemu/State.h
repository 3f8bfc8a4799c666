//===- State.h - The emulated device's state ---------------------*- C++ -*-===//
//
// What the emulated CUDA runtime, cuBLASLt and NCCL share: the allocations
// (device, pinned host, pool), the last and the sticky error, each
// kernel's dynamic shared memory limit, and the emulated device's
// properties (an H100 SXM's limits). Private to kernels/cudaemu.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_CUDAEMU_STATE_H
#define SMP_CUDAEMU_STATE_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace smp::cudaemu {

enum class MemoryKind { Device, PinnedHost };

/// An allocation the emulator made.
struct Allocation {
  uintptr_t base = 0;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::Device;
  /// A dry run's: mmap'd without reserving (munmap'd on release).
  bool mapped = false;
};

/// Allocates `bytes` (at least 1) aligned to 256 bytes, filled with a
/// pattern (device memory starts as garbage), and records it. A dry run's
/// is mapped without reserving it and unfilled (zeros, pages untouched).
void *allocate(size_t bytes, MemoryKind kind);
/// Frees an allocation made by allocate; false (nothing freed) when p is
/// not the start of one of `kind`.
bool release(void *p, MemoryKind kind);
/// The allocation holding [p, p + bytes), or false.
bool findAllocation(const void *p, size_t bytes, Allocation &out);
/// True when [p, p + bytes) lies in device memory or pinned host memory
/// (what a kernel, a copy engine or NCCL can reach).
bool deviceAccessible(const void *p, size_t bytes);
/// Bytes allocated on the device now.
size_t deviceBytesInUse();

/// SMP_CUDAEMU_DRY_RUN=1: every launch, cuBLASLt product and copy is
/// checked as usual but no kernel or product runs and fresh memory is not
/// filled (its pages stay unmapped until a copy or memset writes them): a full-size model's step is validated
/// (launch limits, shared memory, layouts, extents, alignment) in seconds
/// and without its memory. The numbers it computes are meaningless.
bool dryRun();
/// SMP_CUDAEMU_DRY_RUN=edges: a dry run whose launches of more than 1,024
/// blocks run their first and last blocks, smaller ones all (cuBLASLt's
/// products still skipped, fresh memory still unfilled and reading as
/// zeros): a full-size model's largest indices are
/// computed, so an index that overflows 32 bits (a signed one aborts: the
/// translated sources check signed overflow) or runs past its buffer shows
/// in seconds, without the model's memory.
bool dryRunEdges();
/// SMP_CUDAEMU_NO_EPILOGUES=1: cuBLASLt's heuristic finds no algorithm for
/// any product with an epilogue (as a cuBLASLt without one for a shape
/// would), so smp's fallbacks to separate kernels run.
bool noEpilogues();
/// SMP_CUDAEMU_SUM_ORDER=reverse: the tensor cores' mma adds its 16
/// products together last to first and then onto C, and the emulated
/// cuBLASLt sums each product over k last to first (the default: in k
/// order onto C). A GPU's order is neither: a kernel test that passes
/// only in one order compares more tightly than the hardware allows.
bool reverseSums();
/// SMP_CUDAEMU_COMPUTE_CAPABILITY=M.N: the compute capability the emulated
/// devices report (9.0 by default: an H100's), so that what a GPU other
/// than Hopper refuses (the wgmma paths) can be checked.
std::pair<int, int> computeCapability();
/// A 16-bit bf16 (else f16) value's bits as a float (Mma.cpp).
float halfBitsToFloat(uint16_t bits, bool bf16);
/// Counts a checked launch (of `blocks` blocks of `threads`) or cuBLASLt
/// product; a dry run prints the counts at exit ("N kernel launches (K
/// kernels and ops) and P cuBLASLt products checked").
void countLaunch(const char *kernel, uint64_t blocks, uint64_t threads);
/// `unalignedRows`: an operand's leading dimension is not a multiple of 16
/// bytes (a dry run counts them: cuBLASLt's fast kernels need 16).
void countProduct(bool unalignedRows = false);
/// Counts a cuBLASLt heuristic query (host time on a GPU: a few
/// microseconds each); a dry run prints the count beside the products.
void countHeuristicQuery();
/// Counts a call that makes the host wait for the device (a stream, event
/// or device synchronization, a synchronous copy); a dry run prints the
/// count beside the launches: on a GPU each one drains the launch queue.
void countHostWait();
/// Counts a cudaMemcpyAsync the stream runs (on a GPU an operation of its
/// own, as a launch is); a dry run prints the count beside the launches.
void countAsyncCopy();

/// Records e for cudaGetLastError; a sticky error (a fault in a kernel)
/// is also returned by every later synchronizing call, as CUDA's.
void setError(cudaError_t e, bool sticky = false);
/// Prints the emulator's diagnosis of a failed launch or call to stderr.
void report(const std::string &message);
cudaError_t takeLastError();
cudaError_t peekLastError();
cudaError_t stickyError();

/// The limit set by cudaFuncSetAttribute(MaxDynamicSharedMemorySize).
size_t dynamicSharedLimit(const void *kernel);
/// The running block's dynamic shared memory size, and its serial (each
/// block a launch runs has its own).
size_t dynamicSharedBytes();
uint64_t blockSerial();
void setDynamicSharedLimit(const void *kernel, size_t bytes);

/// The emulated device's limits (an H100 SXM's).
constexpr size_t kSharedPerBlock = 48 * 1024;
constexpr size_t kSharedPerBlockOptin = 227 * 1024;
constexpr int kMultiprocessors = 132;
/// The emulated device's memory: SMP_CUDAEMU_DEVICE_MEMORY bytes, else an
/// H100's 80 GiB. cudaMalloc refuses what would go over it, as a GPU's does.
size_t deviceMemory();

} // namespace smp::cudaemu

#endif // SMP_CUDAEMU_STATE_H
