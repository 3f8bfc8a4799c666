//===- Fibers.cpp - Blocks of CUDA threads as fibers ----------------------===//
//
// launchKernel checks a launch as the CUDA runtime does, then issues it on
// its stream (Streams.cpp), which runs its blocks one after another on the
// issuing host thread, or later on a stream SMP_CUDAEMU_DEFER defers (on
// the thread whose call needs them). Each CUDA thread of
// a block is a fiber with its own stack; the scheduler runs every ready
// fiber until it exits or waits (at __syncthreads, a warp shuffle or
// __syncwarp), then releases a warp whose named lanes all wait at a warp
// operation, or the block once every live thread waits at __syncthreads.
// Anything else is a deadlock on a GPU (threads of one block at different
// barriers) and is reported as a failed launch. The scheduler walks the
// fibers forward in even phases and backward in odd ones, so that a read
// that a missing barrier leaves racing sees the other order too. Blocks run
// first to last, or last to first with SMP_CUDAEMU_BLOCK_ORDER=reverse.
// Launches run one at a time in the process (shared memory is static
// storage). cp.async copies wait on their thread until a wait_group covers
// them.
//
// The context switch saves the callee-saved registers, MXCSR and the x87
// control word on the fiber's stack (x86-64 System V; elsewhere ucontext).
//
//===----------------------------------------------------------------------===//

#include "smp/cudaemu/Launch.h"

#include "State.h"
#include "Streams.h"

#include <vector_functions.h>

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace smp::cudaemu {
namespace {

#if defined(__x86_64__)
extern "C" void smp_cudaemu_switch(void **save, void *load);
extern "C" void smp_cudaemu_start();
asm(R"(
  .text
  .globl smp_cudaemu_switch
  .type smp_cudaemu_switch,@function
smp_cudaemu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size smp_cudaemu_switch, .-smp_cudaemu_switch

  .globl smp_cudaemu_start
  .type smp_cudaemu_start,@function
smp_cudaemu_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size smp_cudaemu_start, .-smp_cudaemu_start
)");
#endif

constexpr size_t kStackBytes = 128 * 1024;
constexpr size_t kGuardBytes = 4096;
constexpr unsigned kMaxThreads = 1024;

/// Fiber stacks, made once and reused (each with a guard page below it).
struct Stacks {
  char *base = nullptr;
  Stacks() {
    size_t each = kStackBytes + kGuardBytes;
    void *p = mmap(nullptr, each * kMaxThreads, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      report("cannot map the fibers' stacks");
      std::abort();
    }
    base = static_cast<char *>(p);
    for (unsigned i = 0; i < kMaxThreads; ++i)
      mprotect(base + i * each, kGuardBytes, PROT_NONE);
  }
  /// One past the top of stack i (16-byte aligned).
  char *top(unsigned i) const {
    return base + (i + 1) * (kStackBytes + kGuardBytes);
  }
};

enum class Wait { Ready, Block, Warp, Group, Done };

/// A cp.async copy not done yet.
struct PendingCopy {
  void *dst;
  const void *src;
  size_t bytes;
};

struct Fiber {
  void *sp = nullptr;
#if !defined(__x86_64__)
  ucontext_t uc;
#endif
  Wait state = Wait::Ready;
  ThreadState ts;
  int lane = 0, warp = 0;
  unsigned mask = 0;        // warp operation: the lanes named
  uint64_t value = 0;       // shuffle: this lane's value, then the result
  int src = -1;             // shuffle: the lane read; -1: __syncwarp
  int predicate = 0;        // __syncthreads_or: in, then the result
  std::vector<PendingCopy> openCopies;              // cp.async, uncommitted
  std::vector<std::vector<PendingCopy>> copyGroups; // committed, oldest first

  /// As constructed, keeping what the vectors hold allocated: every block
  /// resets its threads (a std::deque here allocated per thread per block,
  /// a tenth of the emulator's instructions and more under valgrind).
  void reset() {
    sp = nullptr;
    state = Wait::Ready;
    ts = ThreadState();
    lane = warp = 0;
    mask = 0;
    value = 0;
    src = -1;
    predicate = 0;
    openCopies.clear();
    copyGroups.clear();
  }
};

struct BlockRun {
  std::vector<Fiber> fibers;
  void *schedulerSp = nullptr;
#if !defined(__x86_64__)
  ucontext_t schedulerUc;
#endif
  Fiber *current = nullptr;
  void (*body)(void *) = nullptr;
  void *arg = nullptr;
  std::vector<char> shared;
  uint64_t block = 0;                          // serial of the block running
  std::unordered_map<void *, uint64_t> filled; // static shared: its block
  std::string exitError; // a thread that exited with copies in flight
};

BlockRun *running = nullptr; // the launch being run (one at a time)

void switchTo(Fiber &f) {
  running->current = &f;
#if defined(__x86_64__)
  smp_cudaemu_switch(&running->schedulerSp, f.sp);
#else
  swapcontext(&running->schedulerUc, &f.uc);
#endif
  running->current = nullptr;
}

void yieldToScheduler() {
  Fiber *f = running->current;
#if defined(__x86_64__)
  smp_cudaemu_switch(&f->sp, running->schedulerSp);
#else
  swapcontext(&f->uc, &running->schedulerUc);
#endif
}

void fiberMain(void *p) {
  Fiber *f = static_cast<Fiber *>(p);
  running->body(running->arg);
  if ((!f->openCopies.empty() || !f->copyGroups.empty()) &&
      running->exitError.empty())
    running->exitError = "thread " + std::to_string(f->warp * 32 + f->lane) +
                         " exited with cp.async copies it never waited for";
  f->state = Wait::Done;
  yieldToScheduler();
  std::abort(); // a finished fiber is never resumed
}

#if !defined(__x86_64__)
void fiberTrampoline(unsigned lo, unsigned hi) {
  fiberMain(reinterpret_cast<void *>((uintptr_t(hi) << 32) | lo));
}
#endif

void startFiber(Fiber &f, char *top) {
#if defined(__x86_64__)
  // The frame smp_cudaemu_switch pops: MXCSR and x87 control word, r15,
  // r14, r13 (entry), r12 (argument), rbx, rbp, return address.
  uint64_t *sp = reinterpret_cast<uint64_t *>(top - 16 - 64);
  uint32_t mxcsr;
  uint16_t fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  uint64_t control = mxcsr | (uint64_t(fpucw) << 32);
  sp[0] = control;
  sp[1] = 0;                                         // r15
  sp[2] = 0;                                         // r14
  sp[3] = reinterpret_cast<uint64_t>(&fiberMain);    // r13
  sp[4] = reinterpret_cast<uint64_t>(&f);            // r12
  sp[5] = 0;                                         // rbx
  sp[6] = 0;                                         // rbp
  sp[7] = reinterpret_cast<uint64_t>(&smp_cudaemu_start);
  f.sp = sp;
#else
  getcontext(&f.uc);
  f.uc.uc_stack.ss_sp = top - kStackBytes;
  f.uc.uc_stack.ss_size = kStackBytes;
  f.uc.uc_link = nullptr;
  uintptr_t p = reinterpret_cast<uintptr_t>(&f);
  makecontext(&f.uc, reinterpret_cast<void (*)()>(&fiberTrampoline), 2,
              unsigned(p & 0xffffffffu), unsigned(p >> 32));
#endif
}

std::string dims(dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
         std::to_string(d.z) + ")";
}

/// Releases the warps whose named lanes all wait at a warp operation;
/// false when none could be, or (with `error` set) when a warp operation
/// names a lane that exited or reads a lane that is not taking part.
bool releaseWarps(BlockRun &b, std::string &error) {
  bool released = false;
  size_t n = b.fibers.size();
  for (size_t w0 = 0; w0 < n; w0 += 32) {
    size_t w1 = std::min(n, w0 + 32);
    bool anyWaiting = false, allThere = true;
    unsigned mask = 0;
    for (size_t t = w0; t < w1; ++t)
      if (b.fibers[t].state == Wait::Warp) {
        anyWaiting = true;
        mask = b.fibers[t].mask;
      }
    if (!anyWaiting)
      continue;
    for (size_t t = w0; t < w1; ++t) {
      const Fiber &f = b.fibers[t];
      if (!(mask >> f.lane & 1u))
        continue;
      if (f.state == Wait::Done) {
        error = "lane " + std::to_string(f.lane) + " of warp " +
                std::to_string(w0 / 32) +
                " is named by a warp shuffle or __syncwarp but has exited";
        return false;
      }
      if (f.state != Wait::Warp)
        allThere = false;
    }
    if (!allThere)
      continue;
    for (size_t t = w0; t < w1; ++t) {
      Fiber &f = b.fibers[t];
      if (f.state != Wait::Warp)
        continue;
      if (f.src >= 0) {
        size_t s = w0 + static_cast<size_t>(f.src);
        if (s >= w1 || b.fibers[s].state != Wait::Warp ||
            b.fibers[s].src < 0) {
          error = "lane " + std::to_string(f.lane) + " of warp " +
                  std::to_string(w0 / 32) + " shuffles from lane " +
                  std::to_string(f.src) + ", which is not taking part";
          return false;
        }
      }
    }
    // Every lane reads the values as they were at the shuffle.
    std::array<uint64_t, 32> values;
    for (size_t t = w0; t < w1; ++t)
      values[t - w0] = b.fibers[t].value;
    for (size_t t = w0; t < w1; ++t) {
      Fiber &f = b.fibers[t];
      if (f.state != Wait::Warp)
        continue;
      if (f.src >= 0)
        f.value = values[static_cast<size_t>(f.src)];
      f.state = Wait::Ready;
    }
    released = true;
  }
  return released;
}

/// Releases each warpgroup (4 warps, 128 threads) whose threads all wait
/// at syncWarpgroup; false with `error` where one of its threads has
/// exited or the block has no whole warpgroup there.
bool releaseGroups(BlockRun &b, std::string &error) {
  bool released = false;
  size_t n = b.fibers.size();
  for (size_t g0 = 0; g0 < n; g0 += 128) {
    size_t g1 = std::min(n, g0 + 128);
    bool anyWaiting = false, allThere = true;
    for (size_t t = g0; t < g1; ++t) {
      Wait s = b.fibers[t].state;
      anyWaiting |= s == Wait::Group;
      allThere &= s == Wait::Group;
    }
    if (!anyWaiting)
      continue;
    std::string group = "warpgroup " + std::to_string(g0 / 128);
    if (g1 - g0 < 128) {
      error = group + " takes part in a warpgroup operation but has " +
              std::to_string(g1 - g0) +
              " threads (a warpgroup is 4 whole warps)";
      return false;
    }
    for (size_t t = g0; t < g1; ++t)
      if (b.fibers[t].state == Wait::Done) {
        error = "thread " + std::to_string(t) + " of " + group +
                " has exited while the others wait at a warpgroup operation";
        return false;
      }
    if (!allThere)
      continue;
    for (size_t t = g0; t < g1; ++t)
      b.fibers[t].state = Wait::Ready;
    released = true;
  }
  return released;
}

/// Runs one block to its end; false (with `error`) on a deadlock.
bool runBlock(BlockRun &b, const Stacks &stacks, std::string &error) {
  for (size_t t = 0; t < b.fibers.size(); ++t)
    startFiber(b.fibers[t], stacks.top(static_cast<unsigned>(t)));
  for (unsigned phase = 0;; ++phase) {
    // Each fiber runs until it waits or exits; its state then is its state
    // at the end of the phase (no other fiber changes it), so the waits are
    // counted in the same pass.
    size_t n = b.fibers.size();
    size_t live = 0, atBlock = 0, atWarp = 0, atGroup = 0;
    int any = 0;
    for (size_t k = 0; k < n; ++k) {
      Fiber &f = b.fibers[phase % 2 ? n - 1 - k : k];
      if (f.state == Wait::Ready)
        switchTo(f);
      switch (f.state) {
      case Wait::Done:
        continue;
      case Wait::Block:
        ++atBlock;
        any |= f.predicate;
        break;
      case Wait::Warp:
        ++atWarp;
        break;
      case Wait::Group:
        ++atGroup;
        break;
      case Wait::Ready:
        break;
      }
      ++live;
    }
    if (live == 0)
      return true;
    if (atWarp && releaseWarps(b, error))
      continue;
    if (atGroup && error.empty() && releaseGroups(b, error))
      continue;
    if (!error.empty())
      return false;
    if (atBlock == live) {
      for (Fiber &f : b.fibers)
        if (f.state == Wait::Block) {
          f.predicate = any;
          f.state = Wait::Ready;
        }
      continue;
    }
    error =
        std::to_string(atBlock) + " of " + std::to_string(live) +
        " live threads wait at __syncthreads and " +
        std::to_string(atWarp + atGroup) +
        " at a warp or warpgroup operation that cannot complete (a barrier not "
        "reached by every thread: a GPU would hang)";
    return false;
  }
}

std::mutex launchMutex;

Fiber &currentFiber() {
  if (!running || !running->current) {
    report("a device built-in was used outside a kernel");
    std::abort();
  }
  return *running->current;
}

} // namespace

ThreadState &self() { return currentFiber().ts; }
int laneId() { return currentFiber().lane; }

void syncthreads() {
  Fiber &f = currentFiber();
  f.predicate = 0;
  f.state = Wait::Block;
  yieldToScheduler();
}

int syncthreadsOr(int predicate) {
  Fiber &f = currentFiber();
  f.predicate = predicate != 0;
  f.state = Wait::Block;
  yieldToScheduler();
  return f.predicate;
}

void syncwarp(unsigned mask) {
  Fiber &f = currentFiber();
  f.mask = mask;
  f.src = -1;
  f.state = Wait::Warp;
  yieldToScheduler();
}

void cpAsync(void *dst, const void *src, size_t bytes) {
  // A GPU faults on a copy whose addresses are not aligned to its size.
  if (reinterpret_cast<uintptr_t>(dst) % bytes != 0 ||
      reinterpret_cast<uintptr_t>(src) % bytes != 0) {
    report("cp.async of " + std::to_string(bytes) + " bytes from " +
           std::to_string(reinterpret_cast<uintptr_t>(src)) + " to " +
           std::to_string(reinterpret_cast<uintptr_t>(dst)) +
           ": an address not aligned to the copy's size (a GPU faults: "
           "misaligned address)");
    std::abort();
  }
  currentFiber().openCopies.push_back({dst, src, bytes});
}

void cpAsyncCommit() {
  Fiber &f = currentFiber();
  f.copyGroups.push_back(std::move(f.openCopies));
  f.openCopies.clear();
}

void cpAsyncWait(int n) {
  Fiber &f = currentFiber();
  size_t keep = static_cast<size_t>(std::max(n, 0));
  if (f.copyGroups.size() <= keep)
    return;
  size_t done = f.copyGroups.size() - keep;
  for (size_t g = 0; g < done; ++g)
    for (const PendingCopy &c : f.copyGroups[g])
      std::memcpy(c.dst, c.src, c.bytes);
  f.copyGroups.erase(f.copyGroups.begin(),
                     f.copyGroups.begin() + static_cast<std::ptrdiff_t>(done));
}

uint64_t shuffleBits(unsigned mask, uint64_t value, int src, int width) {
  Fiber &f = currentFiber();
  if (width <= 0 || width > 32 || (width & (width - 1))) {
    report("a warp shuffle with width " + std::to_string(width) +
           " (a power of two up to 32)");
    std::abort();
  }
  f.mask = mask;
  f.value = value;
  f.src = src;
  f.state = Wait::Warp;
  yieldToScheduler();
  return f.value;
}

void *dynamicShared() {
  currentFiber();
  return running->shared.data();
}

size_t dynamicSharedBytes() {
  currentFiber();
  return running->shared.size();
}

uint64_t blockSerial() {
  currentFiber();
  return running->block;
}

void syncWarpgroup() {
  Fiber &f = currentFiber();
  f.state = Wait::Group;
  yieldToScheduler();
}

void sharedStatic(void *array, size_t bytes) {
  currentFiber();
  uint64_t &at = running->filled[array];
  if (at != running->block) {
    std::memset(array, 0xff, bytes);
    at = running->block;
  }
}

namespace {
// A launch's probe (kernelEntry): set while the host thread calls the
// kernel once before the launch's checks; the bound it declared.
thread_local bool probing = false;
thread_local int64_t probedBound = -1;

// A block of more threads than this needs its kernel to declare
// __launch_bounds__: ptxas gives a kernel without them up to 255 registers
// a thread, and 255 x 256 is what an SM's 65,536 registers hold at most.
constexpr uint64_t kUnboundedThreads = 256;

// The first argument of the kernel's __launch_bounds__ (0: none), or -1
// where the kernel has no entry check (translate.py did not rewrite it).
int64_t launchBound(void (*body)(void *), void *arg) {
  probing = true;
  probedBound = -1;
  body(arg);
  probing = false;
  return probedBound;
}

// Why a block of `threads` may not run a kernel of `bound`, or "".
std::string boundRefusal(int64_t bound, uint64_t threads) {
  std::string t = std::to_string(threads);
  if (bound < 0)
    return "the kernel has no entry check (translate.py did not see its "
           "definition)";
  if (bound > 0 && threads > uint64_t(bound))
    return "a block of " + t + " threads, over the kernel's " +
           "__launch_bounds__ of " + std::to_string(bound) +
           " (a GPU refuses it: too many resources requested)";
  if (bound == 0 && threads > kUnboundedThreads)
    return "a block of " + t + " threads for a kernel without " +
           "__launch_bounds__ (smp's rule: ptxas may give such a kernel "
           "up to 255 registers a thread, more than a block of " +
           t +
           " can hold in an SM's 65,536, and the GPU then refuses the "
           "launch); declare __launch_bounds__(" +
           t + ") on the kernel";
  return "";
}
} // namespace

bool kernelEntry(unsigned maxThreads) {
  if (!probing)
    return false;
  probedBound = maxThreads;
  return true;
}

namespace {
/// The launch's checks when it is issued (cudart's refusals, recorded for
/// cudaGetLastError; a host pointer faults): true when it may not run.
bool launchRefused(const char *name, const void *kernel, dim3 grid, dim3 block,
                   size_t sharedBytes, void (*body)(void *), void *arg,
                   const std::vector<PointerArgument> &pointers) {
  auto refuse = [&](cudaError_t e, const std::string &why) {
    report(std::string("launch of ") + name + " refused: " + why);
    setError(e);
    return true;
  };
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || block.x > 1024 ||
      block.y > 1024 || block.z > 64)
    return refuse(cudaErrorInvalidConfiguration,
                  "block " + dims(block) +
                      " (at most 1024 threads; x, y <= 1024, z <= 64)");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u ||
      grid.y > 65535 || grid.z > 65535)
    return refuse(cudaErrorInvalidConfiguration,
                  "grid " + dims(grid) +
                      " (x < 2^31, y and z <= 65535, none 0)");
  if (std::string why = boundRefusal(launchBound(body, arg), threads);
      !why.empty())
    return refuse(cudaErrorLaunchOutOfResources, why);
  size_t limit = dynamicSharedLimit(kernel);
  if (sharedBytes > limit)
    return refuse(cudaErrorInvalidValue,
                  std::to_string(sharedBytes) +
                      " bytes of dynamic shared memory, over the kernel's "
                      "limit of " +
                      std::to_string(limit) +
                      (limit == kSharedPerBlock
                           ? " (raise it with cudaFuncSetAttribute)"
                           : ""));
  for (const PointerArgument &p : pointers)
    if (p.pointer && !deviceAccessible(p.pointer, 0)) {
      report(std::string("kernel ") + name + ": argument " +
             std::to_string(p.index) + " is not device memory (" +
             std::to_string(reinterpret_cast<uintptr_t>(p.pointer)) +
             "): a GPU would fault");
      setError(cudaErrorIllegalAddress, true);
      return true;
    }
  return false;
}

/// Runs a checked launch's blocks (when its stream's work reaches it); a
/// failure is sticky, as a fault on a GPU.
void runGrid(const char *name, dim3 grid, dim3 block, size_t sharedBytes,
             void (*body)(void *), void *arg) {
  if (stickyError() != cudaSuccess)
    return; // a faulted context runs nothing more
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  std::lock_guard<std::mutex> lock(launchMutex);
  static Stacks *stacks = new Stacks;
  BlockRun b;
  b.body = body;
  b.arg = arg;
  b.fibers.resize(threads);
  b.shared.resize(std::max<size_t>(sharedBytes, 16));
  running = &b;
  std::string error;
  // Blocks in order, or (SMP_CUDAEMU_BLOCK_ORDER=reverse) last to first: a
  // kernel whose blocks depend on each other's writes shows in one order.
  static const bool reverse = [] {
    const char *v = std::getenv("SMP_CUDAEMU_BLOCK_ORDER");
    return v && std::string(v) == "reverse";
  }();
  uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  // A dry run of the edges: a launch of more than kWholeGrid blocks runs
  // its first and last block only (a smaller one, all of them: what its
  // blocks compute may steer a later kernel's indices, as a sort's counts
  // steer its scatter, and the blocks skipped would leave them stale).
  constexpr uint64_t kWholeGrid = 1024;
  bool edges = dryRunEdges() && blocks > kWholeGrid;
  uint64_t runs = edges ? 2 : blocks;
  for (uint64_t k = 0; k < runs && error.empty(); ++k) {
    uint64_t lin = reverse ? blocks - 1 - k : k;
    if (edges && k == 1)
      lin = reverse ? 0 : blocks - 1;
    unsigned bx = static_cast<unsigned>(lin % grid.x);
    unsigned by = static_cast<unsigned>(lin / grid.x % grid.y);
    unsigned bz = static_cast<unsigned>(lin / (uint64_t(grid.x) * grid.y));
    for (size_t t = 0; t < threads; ++t) {
      Fiber &f = b.fibers[t];
      f.reset();
      unsigned tt = static_cast<unsigned>(t);
      f.ts.threadIdx = make_uint3(tt % block.x, tt / block.x % block.y,
                                  tt / (block.x * block.y));
      f.ts.blockIdx = make_uint3(bx, by, bz);
      f.ts.blockDim = block;
      f.ts.gridDim = grid;
      f.lane = static_cast<int>(t % 32);
      f.warp = static_cast<int>(t / 32);
    }
    // Shared memory starts as garbage on a GPU: a NaN pattern here.
    std::memset(b.shared.data(), 0xff, b.shared.size());
    ++b.block;
    if (!runBlock(b, *stacks, error))
      error = "block " + dims(dim3(bx, by, bz)) + ": " + error;
    else if (!b.exitError.empty())
      error = "block " + dims(dim3(bx, by, bz)) + ": " + b.exitError;
  }
  running = nullptr;
  if (!error.empty()) {
    report(std::string("kernel ") + name + " (grid " + dims(grid) +
           ", block " + dims(block) + "): " + error);
    setError(cudaErrorLaunchFailure, true);
  }
}
} // namespace

void launchKernel(const char *name, const void *kernel, dim3 grid, dim3 block,
                  size_t sharedBytes, cudaStream_t stream, void (*body)(void *),
                  void *arg, const std::vector<PointerArgument> &pointers,
                  std::shared_ptr<void> owner) {
  if (launchRefused(name, kernel, grid, block, sharedBytes, body, arg,
                    pointers))
    return;
  if (stickyError() != cudaSuccess)
    return; // a faulted context runs nothing more
  countLaunch(name, uint64_t(grid.x) * grid.y * grid.z,
              uint64_t(block.x) * block.y * block.z);
  if (dryRun() && !dryRunEdges())
    return; // checked only
  // The blocks run when the stream's work reaches them: at once, or later
  // on a stream SMP_CUDAEMU_DEFER defers (the launch owns its parameters).
  enqueueWork(stream, [=, owner = std::move(owner)] {
    runGrid(name, grid, block, sharedBytes, body, arg);
  });
}

} // namespace smp::cudaemu
