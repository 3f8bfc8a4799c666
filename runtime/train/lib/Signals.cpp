//===- Signals.cpp - Stopping a training run on a signal ------------------===//

#include "smprt/train/Signals.h"

#include "smp/base/SignalSafe.h"

#include <csignal>
#include <initializer_list>
#include <cstdio>
#include <unistd.h>

namespace smprt {
namespace {

volatile sig_atomic_t gStop = 0;
// The handlers installed before ours (MPI's watchdog reports the operation
// a rank was waiting in when a launcher ends it): a second signal goes on
// to them.
struct sigaction gPrevious[NSIG];

void onSignal(int sig) {
  if (gStop == 0) {
    gStop = sig;
    return;
  }
  smp::base::writeStderr("\nsmprun: a second signal (");
  smp::base::writeStderr(signalName(sig));
  smp::base::writeStderr("): stopping now, without a checkpoint\n");
  const struct sigaction &prev = gPrevious[sig];
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL &&
      prev.sa_handler != SIG_IGN && prev.sa_handler != onSignal)
    prev.sa_handler(sig); // reports, then ends the process by the signal
  ::_exit(128 + sig);
}

} // namespace

void installStopHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGUSR1})
    ::sigaction(sig, &sa, &gPrevious[sig]);
}

int stopRequested() { return gStop; }

const char *signalName(int sig) {
  switch (sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGUSR1:
    return "SIGUSR1";
  case SIGHUP:
    return "SIGHUP";
  default:
    return "a signal";
  }
}

} // namespace smprt
