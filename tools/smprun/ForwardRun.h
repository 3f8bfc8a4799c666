//===- ForwardRun.h - smprun --output-dir: a forward run --------*- C++ -*-===//
//
// Runs a forward-only artifact on DIR's inputs and writes its outputs
// (ForwardRun.cpp): once, or over a dataset of several compiled batches
// when every output is computed sample by sample.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TOOLS_SMPRUN_FORWARDRUN_H
#define SMP_TOOLS_SMPRUN_FORWARDRUN_H

#include "Cli.h"

#include "smprt/exec/Artifact.h"
#include "smprt/exec/Executor.h"

namespace smprun {

/// smprun --output-dir DIR: the model over --data's samples, one .npy per
/// output. Returns the exit code.
int runForward(const Cli &cli, const smprt::Artifact &artifact,
               smprt::Executor &exec, smprt::Communicator &comm);

/// Writes each instruction's wall time as JSON to `path`; with `summary`,
/// prints the time per op (smprun.cpp).
int writeProfile(const smprt::Executor &exec, const std::string &path,
                 double seconds, bool summary);

} // namespace smprun

#endif // SMP_TOOLS_SMPRUN_FORWARDRUN_H
