//===- State.cpp - Allocations, errors and limits of the emulator ---------===//

#include "State.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace smp::cudaemu {
bool noEpilogues() {
  static const bool on = [] {
    const char *v = std::getenv("SMP_CUDAEMU_NO_EPILOGUES");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

bool reverseSums() {
  static const bool on = [] {
    const char *v = std::getenv("SMP_CUDAEMU_SUM_ORDER");
    return v && std::string(v) == "reverse";
  }();
  return on;
}

std::pair<int, int> computeCapability() {
  static const std::pair<int, int> cc = [] {
    const char *v = std::getenv("SMP_CUDAEMU_COMPUTE_CAPABILITY");
    if (!v || !*v)
      return std::pair<int, int>(9, 0);
    int major = 0, minor = 0;
    char end = 0;
    if (std::sscanf(v, "%d.%d%c", &major, &minor, &end) != 2 || major < 1 ||
        minor < 0) {
      report(std::string("SMP_CUDAEMU_COMPUTE_CAPABILITY must be MAJOR.MINOR "
                         "(such as 9.0 or 8.0), not '") +
             v + "'");
      std::abort();
    }
    return std::pair<int, int>(major, minor);
  }();
  return cc;
}

namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations; // by base
  size_t deviceBytes = 0;
  std::unordered_map<const void *, size_t> sharedLimits;
};

Registry &registry() {
  static Registry *r = new Registry; // never destroyed: used at exit
  return *r;
}

thread_local cudaError_t lastError = cudaSuccess;
std::atomic<int> sticky{cudaSuccess};

} // namespace

void *allocate(size_t bytes, MemoryKind kind) {
  // Exactly the bytes asked for (256-byte aligned, as cudaMalloc's): a
  // memory checker (valgrind, docs/cuda-emulator.md) sees a kernel that
  // reads or writes past the end of a buffer.
  size_t rounded = std::max<size_t>(bytes, 1);
  Registry &r = registry();
  bool device = kind == MemoryKind::Device;
  if (device) { // the device's bytes taken first, or out of memory
    std::lock_guard<std::mutex> lock(r.mutex);
    if (bytes > deviceMemory() || r.deviceBytes > deviceMemory() - bytes)
      return nullptr;
    r.deviceBytes += bytes;
  }
  void *p = nullptr;
  // A dry run's memory is mapped without reserving it: pages cost nothing
  // until touched, so a full-size model's arena fits an emulated device
  // larger than this machine (malloc's mapping of more than the machine's
  // memory, which Linux's default overcommit refuses, would not).
  bool mapped = dryRun();
  if (mapped) {
    p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      p = nullptr;
  } else if (posix_memalign(&p, 256, rounded) != 0) {
    p = nullptr;
  }
  if (!p) {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (device)
      r.deviceBytes -= bytes;
    return nullptr;
  }
  // Fresh device memory holds whatever was there: a pattern that reads as
  // a NaN in f32 and bf16 and f16, so that an unwritten output shows.
  // (A dry run's fresh pages read as zeros: a dry run of the edges runs
  // kernels on what the blocks it skips would have written, and zeros are
  // a value every kernel takes.)
  if (!mapped)
    std::memset(p, 0xff, rounded);
  std::lock_guard<std::mutex> lock(r.mutex);
  r.allocations[reinterpret_cast<uintptr_t>(p)] =
      Allocation{reinterpret_cast<uintptr_t>(p), bytes, kind, mapped};
  return p;
}

bool release(void *p, MemoryKind kind) {
  Registry &r = registry();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.allocations.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.allocations.end() || it->second.kind != kind)
      return false;
    a = it->second;
    if (kind == MemoryKind::Device)
      r.deviceBytes -= a.bytes;
    r.allocations.erase(it);
  }
  if (a.mapped)
    ::munmap(p, std::max<size_t>(a.bytes, 1));
  else
    std::free(p);
  return true;
}

bool findAllocation(const void *p, size_t bytes, Allocation &out) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.allocations.upper_bound(a);
  if (it == r.allocations.begin())
    return false;
  --it;
  const Allocation &al = it->second;
  // A zero-byte range may sit at the end of an allocation.
  if (a < al.base || a + bytes > al.base + std::max<size_t>(al.bytes, 1))
    return false;
  out = al;
  return true;
}

bool deviceAccessible(const void *p, size_t bytes) {
  Allocation a;
  return findAllocation(p, bytes, a);
}

size_t deviceBytesInUse() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.deviceBytes;
}

size_t deviceMemory() {
  static const size_t bytes = [] {
    const char *v = std::getenv("SMP_CUDAEMU_DEVICE_MEMORY");
    char *end = nullptr;
    unsigned long long n = v && *v ? std::strtoull(v, &end, 10) : 0;
    return n > 0 && end && *end == '\0' ? static_cast<size_t>(n)
                                        : size_t(80) << 30;
  }();
  return bytes;
}

bool dryRun() {
  static const bool on = [] {
    const char *v = std::getenv("SMP_CUDAEMU_DRY_RUN");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

namespace {
// SMP_CUDAEMU_DRY_RUN=kernels: the exit report also lists the launches of
// each kernel, the most launched first; =grids: with the fewest and most
// blocks a launch of it had and its threads a block.
std::string dryRunMode() {
  const char *v = std::getenv("SMP_CUDAEMU_DRY_RUN");
  return v ? v : "";
}
bool listGrids() { return dryRunMode() == "grids"; }
bool listKernels() { return dryRunMode() == "kernels" || listGrids(); }
} // namespace

bool dryRunEdges() {
  static const bool on = dryRunMode() == "edges";
  return on;
}

namespace {
/// A kernel's launches: how many, their fewest and most blocks, and the
/// fewest and most threads a block.
struct KernelLaunches {
  uint64_t n = 0, minBlocks = ~uint64_t(0), maxBlocks = 0,
           minThreads = ~uint64_t(0), maxThreads = 0;
};

struct Counts {
  std::mutex mutex;
  uint64_t launches = 0, products = 0, hostWaits = 0, queries = 0,
           asyncCopies = 0, unaligned = 0;
  std::map<std::string, KernelLaunches> kernels; // by kernel
};

std::string range(uint64_t lo, uint64_t hi) {
  return lo == hi ? std::to_string(lo)
                  : std::to_string(lo) + ".." + std::to_string(hi);
}

void reportKernels(const std::map<std::string, KernelLaunches> &kernels) {
  std::vector<std::pair<uint64_t, std::string>> byCount;
  for (const auto &[name, k] : kernels)
    byCount.emplace_back(k.n, name);
  std::sort(byCount.begin(), byCount.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (const auto &[n, name] : byCount) {
    std::string grid;
    if (listGrids()) {
      const KernelLaunches &k = kernels.at(name);
      grid = "  (" + range(k.minBlocks, k.maxBlocks) + " blocks of " +
             range(k.minThreads, k.maxThreads) + " threads)";
    }
    std::fprintf(stderr, "%10llu  %s%s\n", static_cast<unsigned long long>(n),
                 name.c_str(), grid.c_str());
  }
}

Counts &counts() {
  static Counts *c = [] {
    auto *n = new Counts;
    if (dryRun())
      std::atexit([] {
        Counts &k = counts();
        report("dry run: " + std::to_string(k.launches) + " kernel launches (" +
               std::to_string(k.kernels.size()) + " kernels and ops) and " +
               std::to_string(k.products) + " cuBLASLt products (" +
               std::to_string(k.queries) + " heuristic queries) checked, " +
               (dryRunEdges() ? "each launch's first and last blocks run, "
                                "no product; "
                              : "none run; ") +
               std::to_string(k.hostWaits) +
               " host waits (synchronizations and synchronous copies); " +
               std::to_string(k.asyncCopies) + " asynchronous copies; " +
               std::to_string(k.unaligned) +
               " products on rows not a multiple of 16 bytes");
        if (listKernels())
          reportKernels(k.kernels);
      });
    return n;
  }();
  return *c;
}
} // namespace

void countLaunch(const char *kernel, uint64_t blocks, uint64_t threads) {
  Counts &c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.launches;
  KernelLaunches &k = c.kernels[kernel];
  ++k.n;
  k.minBlocks = std::min(k.minBlocks, blocks);
  k.maxBlocks = std::max(k.maxBlocks, blocks);
  k.minThreads = std::min(k.minThreads, threads);
  k.maxThreads = std::max(k.maxThreads, threads);
}

void countProduct(bool unalignedRows) {
  Counts &c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.products;
  c.unaligned += unalignedRows;
}

void countHeuristicQuery() {
  Counts &c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.queries;
}

void countHostWait() {
  Counts &c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.hostWaits;
}

void countAsyncCopy() {
  Counts &c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.asyncCopies;
}

void setError(cudaError_t e, bool isSticky) {
  if (e == cudaSuccess)
    return;
  if (lastError == cudaSuccess)
    lastError = e;
  if (isSticky) {
    int expected = cudaSuccess;
    sticky.compare_exchange_strong(expected, e);
  }
}

void report(const std::string &message) {
  std::fprintf(stderr, "smp CUDA emulator: %s\n", message.c_str());
  std::fflush(stderr);
}

cudaError_t takeLastError() {
  cudaError_t e = lastError;
  lastError = cudaSuccess;
  if (e == cudaSuccess)
    e = static_cast<cudaError_t>(sticky.load());
  return e;
}

cudaError_t peekLastError() {
  return lastError != cudaSuccess ? lastError
                                  : static_cast<cudaError_t>(sticky.load());
}

cudaError_t stickyError() { return static_cast<cudaError_t>(sticky.load()); }

size_t dynamicSharedLimit(const void *kernel) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.sharedLimits.find(kernel);
  return it == r.sharedLimits.end() ? kSharedPerBlock : it->second;
}

void setDynamicSharedLimit(const void *kernel, size_t bytes) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.sharedLimits[kernel] = bytes;
}

} // namespace smp::cudaemu
