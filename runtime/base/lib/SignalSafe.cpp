//===- SignalSafe.cpp - Writes to stderr from a signal handler -----------===//

#include "smp/base/SignalSafe.h"

#include <unistd.h>

namespace smp::base {

void writeStderr(const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(2, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void writeStderr(const char *s) {
  size_t n = 0; // not strlen: kept to calls POSIX lists as signal-safe
  while (s[n])
    ++n;
  writeStderr(s, n);
}

} // namespace smp::base
