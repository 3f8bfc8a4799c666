//===- FuzzSupport.cpp - Shared helpers of the libFuzzer targets ----------===//

#include "FuzzSupport.h"

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <ftw.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
/// ASan's defaults for the targets. allow_user_poisoning=0: LLVM's
/// BumpPtrAllocator poisons the slabs it starts in our (instrumented) code
/// and unpoisons what it hands out only there, so memory that Debian's
/// uninstrumented libMLIR allocates from the same slab reads as
/// "use-after-poison" (a false positive in FileLineColRange::get, found by
/// smp-fuzz-mlir). Real overflows are still caught by ASan's own redzones.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0:detect_leaks=1";
}
#endif
#endif

namespace smp::fuzz {

static int removeEntry(const char *path, const struct stat *, int,
                       struct FTW *) {
  return ::remove(path);
}

static void removeScratch() {
  ::nftw(scratchDir().c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS);
}

const std::string &scratchDir() {
  static const std::string dir = [] {
    const char *tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") +
                        "/smp-fuzz-XXXXXX";
    if (!::mkdtemp(templ.data())) {
      std::perror("smp-fuzz: mkdtemp");
      std::abort();
    }
    return templ;
  }();
  static const bool registered = (std::atexit(removeScratch), true);
  (void)registered;
  return dir;
}

void writeFile(const std::string &path, const void *data, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror(("smp-fuzz: " + path).c_str());
    std::abort();
  }
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n <= 0) {
      std::perror(("smp-fuzz: write " + path).c_str());
      std::abort();
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  ::close(fd);
}

bool verbose() {
  static const bool v = std::getenv("SMP_FUZZ_VERBOSE") != nullptr;
  return v;
}

} // namespace smp::fuzz
