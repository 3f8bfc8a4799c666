//===- SignalSafe.h - Writes to stderr from a signal handler -*- C++ -*-===//
//
// The one way the runtime writes to stderr where only async-signal-safe
// calls may run (a signal handler), or where a line must go out in one
// write(2) so that a launcher's own messages cannot split it.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_SIGNALSAFE_H
#define SMP_BASE_SIGNALSAFE_H

#include <cstddef>

namespace smp::base {

/// Writes the `n` bytes at `s` to stderr with write(2), going on after a
/// short write and giving up at an error. Async-signal-safe.
void writeStderr(const char *s, size_t n);

/// The same for the C string `s`.
void writeStderr(const char *s);

} // namespace smp::base

#endif // SMP_BASE_SIGNALSAFE_H
