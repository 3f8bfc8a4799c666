//===- RankHosts.h - Which host each rank runs on ---------------*- C++ -*-===//

#ifndef SMPRUN_RANKHOSTS_H
#define SMPRUN_RANKHOSTS_H

#include "smprt/comm/Communicator.h"
#include "smprt/exec/Artifact.h"

#include <string>
#include <vector>

/// Every rank's host name and grid coordinates, gathered from all ranks
/// (collective): the rank -> host map the compiler could not know (plan.txt
/// lists the rank -> dp/pp/tp map). On rank 0 `lines` gets one line per
/// rank ("rank 3: host node-a (dp 0, pp 1, tp 1)"), or, past 64 ranks, one
/// per host with its ranks.
smprt::Status rankHostMap(smprt::Communicator &comm,
                          const smp::artifact::RankProgram &program,
                          std::vector<std::string> &lines);

#endif // SMPRUN_RANKHOSTS_H
