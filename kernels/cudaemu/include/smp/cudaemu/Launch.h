//===- Launch.h - Kernel launches in the CUDA emulator ----------*- C++ -*-===//
//
// kernels/cudaemu/translate.py rewrites `k<<<grid, block, shared, stream>>>(
// args)` into `::smp::cudaemu::Launch("k", grid, block, shared, stream)
// .run(k, args)`. run() checks the launch as the CUDA runtime does (block
// and grid limits, the kernel's `__launch_bounds__`, dynamic shared memory
// against the kernel's limit, every pointer argument in device-accessible
// memory), records a refusal for
// cudaGetLastError, or issues the grid on its stream (which runs it then,
// or later on a stream that SMP_CUDAEMU_DEFER defers): blocks one after
// another, each block's threads as fibers that switch at __syncthreads and
// warp shuffles (Fibers.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_CUDAEMU_LAUNCH_H
#define SMP_CUDAEMU_LAUNCH_H

#include <cuda_runtime_api.h>
#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace smp::cudaemu {

/// The built-in variables of the running CUDA thread.
struct ThreadState {
  uint3 threadIdx;
  uint3 blockIdx;
  dim3 blockDim;
  dim3 gridDim;
};

/// The running thread's built-ins (only inside a kernel).
ThreadState &self();
/// The first statement of every kernel (translate.py puts it there):
/// `if (kernelEntry(N)) return;` with N the first argument of the kernel's
/// `__launch_bounds__`, or 0 where it declares none. A launch calls the
/// kernel once on the host thread before its checks ("probing"): there it
/// records N and returns true, so the kernel returns at once; in the
/// threads of the grid it returns false.
bool kernelEntry(unsigned maxThreads);
/// The running thread's lane (its linear index in the block mod 32).
int laneId();
void syncthreads();
int syncthreadsOr(int predicate);
void syncwarp(unsigned mask);
/// The value `src` passed to the same shuffle (a lane of the caller's warp).
uint64_t shuffleBits(unsigned mask, uint64_t value, int src, int width);
/// mma.sync.aligned.m16n8k16.row.col.f32 of bf16 (else f16) operands for
/// the calling warp: c += A B with the fragments in PTX's layout
/// (kernels/cuda/Mma.cuh). Every lane of the warp must call it.
void mmaM16N8K16(bool bf16, float c[4], const uint32_t a[4],
                 const uint32_t b[2]);
/// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 for the calling warp:
/// lane l gives the address of row l % 8 of 8 x 8 matrix l / 8 (16 bytes);
/// r[i] is matrix i's fragment (or its transpose's). Every lane must call.
void ldmatrixX4(bool trans, uint32_t r[4], const void *row);
/// A shared-memory address as a wgmma descriptor holds it: the byte offset
/// of p in the launch's dynamic shared memory (the emulator's static
/// `__shared__` arrays are not in that window: refused).
uint64_t sharedAddress(const void *p);
/// wgmma.mma_async.sync.aligned.m64nNk16.f32 of bf16 (else f16) operands
/// (kernels/cuda/Wgmma.cuh) for the calling warpgroup: d (n / 2
/// accumulators a thread) (+)= A B, A K-major in shared memory (descA) or,
/// where aRegs is given, the thread's 4 fragment registers (copied now), B
/// in shared memory (descB), K-major or with transB MN-major, both
/// unswizzled; done when a wgmmaWait covers its commit group (every thread
/// of the warpgroup must issue the same products).
void wgmmaM64K16(bool bf16, int n, float *d, uint64_t descA,
                 const uint32_t *aRegs, uint64_t descB, bool transB,
                 bool accumulate);
/// wgmma.fence, wgmma.commit_group and wgmma.wait_group n.
void wgmmaFence();
void wgmmaCommit();
void wgmmaWait(int n);
/// A barrier of the calling thread's warpgroup (its 4 warps' 128 threads):
/// false, with the launch failed, when one of them has exited.
void syncWarpgroup();
/// cp.async of `bytes` from global to shared memory: done when a later
/// cpAsyncWait of the calling thread covers its group (the emulator copies
/// then, so a read before the wait sees the old bytes, as a GPU may).
void cpAsync(void *dst, const void *src, size_t bytes);
/// cp.async.commit_group: the thread's copies since the last commit form a
/// group.
void cpAsyncCommit();
/// cp.async.wait_group n: every committed group of the thread but the
/// newest n is done.
void cpAsyncWait(int n);
/// The launch's dynamic shared memory (`extern __shared__`).
void *dynamicShared();
/// A `__shared__` array (a function-local static): filled with a NaN
/// pattern by the first thread of each block that reaches it.
void sharedStatic(void *array, size_t bytes);

/// A pointer argument of a launch, checked against device memory.
struct PointerArgument {
  int index;
  const void *pointer;
};

/// Checks one launch (when it is issued) and issues it on its stream:
/// body(arg) on every thread of the grid. `owner` keeps arg (the kernel's
/// parameters) alive until the launch has run.
void launchKernel(const char *name, const void *kernel, dim3 grid, dim3 block,
                  size_t sharedBytes, cudaStream_t stream, void (*body)(void *),
                  void *arg, const std::vector<PointerArgument> &pointers,
                  std::shared_ptr<void> owner);

class Launch {
public:
  Launch(const char *name, dim3 grid, dim3 block, size_t sharedBytes = 0,
         cudaStream_t stream = nullptr)
      : name_(name), grid_(grid), block_(block), shared_(sharedBytes),
        stream_(stream) {}

  template <class... P, class... A>
  void run(void (*kernel)(P...), A &&...args) {
    static_assert(sizeof...(P) == sizeof...(A),
                  "a launch passes one argument per kernel parameter");
    // The parameters as the kernel receives them (by value, converted).
    std::tuple<std::decay_t<P>...> params(
        static_cast<std::decay_t<P>>(std::forward<A>(args))...);
    go(reinterpret_cast<const void *>(kernel), kernel, params);
  }

  /// A template kernel whose arguments deduce its template arguments:
  /// `call` calls it (the kernel's own limit on dynamic shared memory is
  /// not known here: the default one applies).
  template <class F, class... A> void runDeduced(F call, A &&...args) {
    std::tuple<std::decay_t<A>...> params(std::forward<A>(args)...);
    go(nullptr, call, params);
  }

private:
  /// The kernel and its by-value parameters, owned by the launch (a
  /// deferred stream runs it after the caller's arguments are gone).
  template <class F, class... T> struct Body {
    F call;
    std::tuple<T...> params;
    static void run(void *b) {
      Body *self = static_cast<Body *>(b);
      std::apply(self->call, self->params);
    }
  };

  /// Checks and runs `call` on every thread with copies of `params` (the
  /// kernel's by-value parameters).
  template <class F, class... T>
  void go(const void *kernel, F call, std::tuple<T...> &params) {
    std::vector<PointerArgument> pointers;
    collectPointers(params, pointers, std::index_sequence_for<T...>{});
    auto body = std::make_shared<Body<F, T...>>(Body<F, T...>{call, params});
    void *arg = body.get();
    launchKernel(name_, kernel, grid_, block_, shared_, stream_,
                 &Body<F, T...>::run, arg, pointers, std::move(body));
  }

  template <class Tuple, size_t... I>
  static void collectPointers(const Tuple &t,
                              std::vector<PointerArgument> &out,
                              std::index_sequence<I...>) {
    (addPointer(static_cast<int>(I), std::get<I>(t), out), ...);
  }
  template <class T>
  static void addPointer(int index, const T &v,
                         std::vector<PointerArgument> &out) {
    if constexpr (std::is_pointer_v<T>)
      out.push_back({index, static_cast<const void *>(v)});
  }

  const char *name_;
  dim3 grid_, block_;
  size_t shared_;
  cudaStream_t stream_;
};

} // namespace smp::cudaemu

#endif // SMP_CUDAEMU_LAUNCH_H
