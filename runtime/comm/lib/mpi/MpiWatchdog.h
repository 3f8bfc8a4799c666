//===- MpiWatchdog.h - Deadlines and SIGTERM reports for MPI ----*- C++ -*-===//
//
// Internal to the MPI communicator (runtime/comm/lib/mpi). A polled MPI
// operation checks its own deadline (MpiInternal.h, Impl::wait); the calls
// that cannot be polled (MPI_Init_thread, MPI_Comm_dup,
// MPI_Comm_create_group, MPI_Finalize) run under a BlockingDeadline. While
// a rank waits, a SIGTERM from the launcher prints the operation it waited
// in. None of this calls MPI (MPI_THREAD_FUNNELED).
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_COMM_MPI_MPIWATCHDOG_H
#define SMPRT_COMM_MPI_MPIWATCHDOG_H

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace smprt::mpi {

using Clock = std::chrono::steady_clock;

/// The start of the SIGTERM handler's line: "<program>: error: rank <who>: ".
void setErrorPrefix(const std::string &program, const std::string &who);
/// Installs the SIGTERM handler (again after MPI_Init, which may have
/// installed its own).
void installTerminateHandler();
/// Restores SIGTERM's default action.
void resetTerminateHandler();
/// From now on, a SIGTERM prints nothing (this rank reports its own error).
void stopReportingWait();

/// Marks the operation this rank waits in for the SIGTERM handler.
struct WaitingIn {
  explicit WaitingIn(const std::string &what);
  ~WaitingIn();
  WaitingIn(const WaitingIn &) = delete;
  WaitingIn &operator=(const WaitingIn &) = delete;
};

/// A deadline for one blocking MPI call that cannot be polled: a thread
/// that, unless the object is destroyed within `seconds`, writes `message`
/// (one line) to stderr and ends the process with _exit(1). The launcher
/// sees the rank exit with an error and ends the others.
class BlockingDeadline {
public:
  BlockingDeadline(double seconds, std::string message);
  ~BlockingDeadline();
  BlockingDeadline(const BlockingDeadline &) = delete;
  BlockingDeadline &operator=(const BlockingDeadline &) = delete;

private:
  std::string message_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

/// The watchdog's line for a blocking call: as for a polled operation,
/// "<program>: error: rank R: timed out after T s in <what> (<why>)".
std::string timedOutLine(const std::string &program, int rank, double seconds,
                         const std::string &what, const std::string &why);

/// SMP_FAULT_STALL_STARTUP_RANK=R: rank R sleeps before MPI_Init_thread,
/// as a rank that never starts (for tests of the start-up deadline).
void faultStallStartup(int rank);

} // namespace smprt::mpi

#endif // SMPRT_COMM_MPI_MPIWATCHDOG_H
