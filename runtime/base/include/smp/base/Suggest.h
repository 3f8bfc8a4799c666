//===- Suggest.h - "Did you mean" for unknown flags and commands -*- C++ -*-===//
//
// Part of smp_base: the tools that link no LLVM (smprun, smp-checkpoint)
// suggest the closest known spelling of a mistyped flag or subcommand, as
// llvm::cl does for smpc and smp-opt.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_SUGGEST_H
#define SMP_BASE_SUGGEST_H

#include <string>
#include <vector>

namespace smp::base {

/// Levenshtein distance (insertions, deletions, substitutions) of a and b.
size_t editDistance(const std::string &a, const std::string &b);

/// The candidate closest to `word` when it is close enough to be a typo (at
/// most a third of the word's length, at least 1, at most 3 edits; a flag
/// given with "=value" is compared without it); "" otherwise.
std::string closestMatch(const std::string &word,
                         const std::vector<std::string> &candidates);

/// " (did you mean '--steps'?)" or "".
std::string didYouMean(const std::string &word,
                       const std::vector<std::string> &candidates);

} // namespace smp::base

#endif // SMP_BASE_SUGGEST_H
