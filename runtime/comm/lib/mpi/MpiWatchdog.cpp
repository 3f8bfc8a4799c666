//===- MpiWatchdog.cpp - Deadlines and SIGTERM reports for MPI ------------===//

#include "mpi/MpiWatchdog.h"

#include "smp/base/SignalSafe.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace smprt::mpi {
namespace {

using smp::base::writeStderr;

// What the SIGTERM handler reports: the operation this rank waits in (set
// around every wait) and the message prefix. Plain arrays: the handler may
// only read them and call write(2).
char gWaitingIn[512];
volatile sig_atomic_t gWaiting = 0;
char gPrefix[160];

extern "C" void onTerminate(int sig) {
  if (gWaiting) {
    writeStderr(gPrefix);
    writeStderr("stopped by the launcher in ");
    writeStderr(gWaitingIn);
    writeStderr(" (another rank failed, or the job was cancelled)\n");
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

} // namespace

void setErrorPrefix(const std::string &program, const std::string &who) {
  std::snprintf(gPrefix, sizeof(gPrefix),
                "%s: error: rank %s: ", program.c_str(), who.c_str());
}

void installTerminateHandler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = onTerminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

void resetTerminateHandler() { std::signal(SIGTERM, SIG_DFL); }

void stopReportingWait() { gWaiting = 0; }

WaitingIn::WaitingIn(const std::string &what) {
  size_t n = std::min(what.size(), sizeof(gWaitingIn) - 1);
  gWaiting = 0;
  std::memcpy(gWaitingIn, what.data(), n);
  gWaitingIn[n] = 0;
  gWaiting = 1;
}

WaitingIn::~WaitingIn() { gWaiting = 0; }

BlockingDeadline::BlockingDeadline(double seconds, std::string message)
    : message_(std::move(message)) {
  auto limit = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(seconds, 1e9)));
  thread_ = std::thread([this, limit] {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, limit, [this] { return done_; }))
      return;
    gWaiting = 0; // no second line from the SIGTERM handler
    writeStderr(message_.c_str());
    ::_exit(1);
  });
}

BlockingDeadline::~BlockingDeadline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string timedOutLine(const std::string &program, int rank, double seconds,
                         const std::string &what, const std::string &why) {
  return program + ": error: rank " + std::to_string(rank) +
         ": timed out after " + secondsText(seconds) + " s in " + what + " (" +
         why + ")\n";
}

void faultStallStartup(int rank) {
  const char *fault = std::getenv("SMP_FAULT_STALL_STARTUP_RANK");
  if (!fault || rank < 0 || std::atoi(fault) != rank)
    return;
  for (;;) {
    struct timespec ts = {3600, 0};
    nanosleep(&ts, nullptr);
  }
}

} // namespace smprt::mpi
