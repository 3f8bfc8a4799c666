//===- Cli.h - smprun's command line --------------------------*- C++ -*-===//
//
// The flags of smprun, their --help text and the checks of a command line
// that involve several flags (Cli.cpp). smprun.cpp runs what they ask.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TOOLS_SMPRUN_CLI_H
#define SMP_TOOLS_SMPRUN_CLI_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace smprun {

/// The command line.
struct Cli {
  std::string argv0, model, dataDir, outDir, profilePath, metricsPath, ckptDir,
      saveOnnx, sourceModel, tensorboardDir, progress = "auto", evalDir,
                                             evalPredictionsDir;
  int64_t steps = 0, ckptEvery = 0, threads = 0, ranks = 0, logEvery = 10,
          evalEvery = 0, profileWarmup = 0;
  double timeout = 600;
  bool resume = false, resetOptimizer = false, resetData = false,
       checkFinite = false, noOverlap = false, cudaGraph = false,
       allowCopiedLabels = false, ignoreUnreadData = false;
  std::string device; // "": the artifact's target
  std::vector<std::string> args;
  // What `smprun -n N` passes on to each rank: everything but -n N.
  std::vector<std::string> forwarded;
};

/// Parses and checks the flags; returns an exit code when smprun is done
/// (help, version, an error).
std::optional<int> parseCli(int argc, char **argv, Cli &cli);

/// Prints "smprun: error: MSG" (naming the rank once there are several)
/// as one line, ends every rank once MPI is up, and returns 1 (smprun.cpp).
int fail(const std::string &msg);

} // namespace smprun

#endif // SMP_TOOLS_SMPRUN_CLI_H
