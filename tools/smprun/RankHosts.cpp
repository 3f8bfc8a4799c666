//===- RankHosts.cpp - Which host each rank runs on -----------------------===//

#include "RankHosts.h"

#include <cstring>
#include <map>
#include <unistd.h>

namespace {

/// One rank's record: its host name (truncated, NUL-padded) and coordinates.
struct Record {
  char host[52];
  uint32_t dp, pp, tp;
};
static_assert(sizeof(Record) == 64, "a fixed-size record per rank");

} // namespace

smprt::Status rankHostMap(smprt::Communicator &comm,
                          const smp::artifact::RankProgram &program,
                          std::vector<std::string> &lines) {
  Record mine{};
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0)
    std::strcpy(name, "unknown");
  std::strncpy(mine.host, name, sizeof(mine.host) - 1);
  mine.dp = program.dp_rank();
  mine.pp = program.pp_rank();
  mine.tp = program.tp_rank();
  std::vector<Record> all(static_cast<size_t>(comm.size()));
  smprt::Status s = comm.allGather(&mine, all.data(), sizeof(Record),
                                   smprt::DType::U8, "the rank -> host map");
  if (!s.ok() || comm.rank() != 0)
    return s;
  if (all.size() <= 64) {
    for (size_t r = 0; r < all.size(); ++r)
      lines.push_back("rank " + std::to_string(r) + ": host " +
                      std::string(all[r].host) + " (dp " +
                      std::to_string(all[r].dp) + ", pp " +
                      std::to_string(all[r].pp) + ", tp " +
                      std::to_string(all[r].tp) + ")");
    return s;
  }
  std::map<std::string, std::vector<size_t>> byHost;
  for (size_t r = 0; r < all.size(); ++r)
    byHost[all[r].host].push_back(r);
  for (const auto &[host, ranks] : byHost) {
    std::string text = "host " + host + ": ranks ";
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
        ++j;
      text += (i ? "," : "") + std::to_string(ranks[i]) +
              (j > i ? "-" + std::to_string(ranks[j]) : "");
      i = j + 1;
    }
    lines.push_back(text);
  }
  return s;
}
