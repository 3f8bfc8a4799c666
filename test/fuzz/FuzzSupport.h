//===- FuzzSupport.h - Shared helpers of the libFuzzer targets --*- C++ -*-===//
//
// The targets read files, as smpc and smprun do: each process gets one
// private scratch directory (removed at exit) into which an input is
// written before the code under test opens it.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TEST_FUZZ_FUZZSUPPORT_H
#define SMP_TEST_FUZZ_FUZZSUPPORT_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace smp::fuzz {

/// The process's scratch directory (created on first use).
const std::string &scratchDir();

/// Writes `size` bytes to `path` (created or truncated); aborts on failure,
/// which is the harness's fault, not the input's.
void writeFile(const std::string &path, const void *data, size_t size);

/// SMP_FUZZ_VERBOSE is set: targets print what became of each input.
bool verbose();

} // namespace smp::fuzz

#endif // SMP_TEST_FUZZ_FUZZSUPPORT_H
