//===- Reproduce.h - The smpc command that reproduces a plan ----*- C++ -*-===//

#ifndef SMPC_REPRODUCE_H
#define SMPC_REPRODUCE_H

#include "Options.h"

#include <string>

/// The `smpc compile` command line that builds this artifact's plan again:
/// the arguments as given (after --config expansion), and for a plan the
/// planner chose, its choice pinned (--dp/--tp/--pp, --microbatches,
/// --schedule, --pp-cuts, ZeRO-1, recomputation, offloading) in place of
/// the planner's flags. Arguments are quoted for a POSIX shell.
std::string reproducingCommand(const Options &opts);

#endif // SMPC_REPRODUCE_H
