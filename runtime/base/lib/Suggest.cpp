//===- Suggest.cpp - "Did you mean" for unknown flags and commands --------===//

#include "smp/base/Suggest.h"

#include <algorithm>

namespace smp::base {

size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closestMatch(const std::string &word,
                         const std::vector<std::string> &candidates) {
  std::string w = word.substr(0, word.find('='));
  size_t limit = std::min<size_t>(3, std::max<size_t>(1, w.size() / 3));
  std::string best;
  size_t bestDistance = limit + 1;
  for (const std::string &c : candidates) {
    size_t d = editDistance(w, c);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

std::string didYouMean(const std::string &word,
                       const std::vector<std::string> &candidates) {
  std::string best = closestMatch(word, candidates);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

} // namespace smp::base
