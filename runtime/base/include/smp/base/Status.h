//===- Status.h - The result of an operation that can fail ------*- C++ -*-===//
//
// Part of smp_base, the layer below the kernels, the runtime and the
// compiler's artifact writer: it includes nothing of theirs.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_STATUS_H
#define SMP_BASE_STATUS_H

#include <string>
#include <utility>

namespace smp::base {

/// The result of an operation that can fail on data (not on programming
/// errors): an index out of range, an integer division by zero, a bad file.
struct Status {
  std::string error; // empty on success
  bool ok() const { return error.empty(); }
  static Status success() { return {}; }
  static Status failure(std::string msg) { return Status{std::move(msg)}; }
};

} // namespace smp::base

/// Returns the Status of `expr` from the enclosing function when it failed.
#define SMP_RETURN_IF_ERROR(expr)                                              \
  do {                                                                         \
    if (::smp::base::Status smpStatus_ = (expr); !smpStatus_.ok())             \
      return smpStatus_;                                                       \
  } while (0)

#endif // SMP_BASE_STATUS_H
