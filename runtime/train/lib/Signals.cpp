//===- Signals.cpp - Stopping a training run on a signal ------------------===//

#include "smprt/train/Signals.h"

#include "smp/base/SignalSafe.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <initializer_list>
#include <unistd.h>

namespace smprt {
namespace {

// The first signal. Set by compare-and-swap: a process's signals go to any
// of its threads, so two can be handled at once, and each must not take
// itself for the first (a lock-free atomic is safe in a handler).
std::atomic<int> gStop{0};
static_assert(std::atomic<int>::is_always_lock_free);
// The handlers installed before ours (MPI's watchdog reports the operation
// a rank was waiting in when a launcher ends it): a second signal goes on
// to them.
struct sigaction gPrevious[NSIG];

void onSignal(int sig) {
  int none = 0;
  if (gStop.compare_exchange_strong(none, sig))
    return;
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

int stopRequested() { return gStop.load(); }

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
