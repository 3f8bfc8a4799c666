//===- Signals.cpp - Stopping a training run on a signal ------------------===//

#include "smprt/train/Signals.h"

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

/// write(2) of a C string (async-signal-safe).
void say(const char *s) {
  size_t n = 0;
  while (s[n])
    ++n;
  while (n > 0) {
    ssize_t w = ::write(2, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void onSignal(int sig) {
  if (gStop == 0) {
    gStop = sig;
    return;
  }
  say("\nsmprun: a second signal (");
  say(signalName(sig));
  say("): stopping now, without a checkpoint\n");
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
