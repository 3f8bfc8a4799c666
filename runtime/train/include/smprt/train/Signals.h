//===- Signals.h - Stopping a training run on a signal ----------*- C++ -*-===//
//
// A preemption (Slurm's time limit, a spot instance reclaimed, Ctrl-C) sends
// SIGTERM or SIGINT. The first such signal only records a stop request (an
// async-signal-safe store); the trainer polls it at each step boundary, the
// ranks agree on it, and the run stops after the current step with a
// checkpoint. A second signal ends the process at once (exit status
// 128 + signal), without a checkpoint, through the handler installed before
// (MPI's, which names the operation the rank was waiting in) when there was
// one. Installed after MPI is initialized, so that they come first.
//
// SIGUSR1 is a stop request too: Open MPI's mpirun forwards it to every rank
// (it answers SIGINT/SIGTERM itself by killing the ranks a second later),
// so `smprun -n N` relays a SIGINT/SIGTERM it gets as SIGUSR1 to mpirun,
// and `kill -USR1 <mpirun>` stops a run started with mpirun directly.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_SIGNALS_H
#define SMPRT_TRAIN_SIGNALS_H

namespace smprt {

/// Installs the handlers of SIGINT, SIGTERM and SIGUSR1 described above.
void installStopHandlers();

/// The signal of the first stop request, or 0 when none arrived.
int stopRequested();

/// "SIGINT", "SIGTERM", "SIGUSR1" or "signal N".
const char *signalName(int sig);

} // namespace smprt

#endif // SMPRT_TRAIN_SIGNALS_H
