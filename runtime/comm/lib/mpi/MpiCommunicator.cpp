//===- MpiCommunicator.cpp - MPI start-up, groups, shut-down --------------===//
//
// The lifecycle of the MPI communicator: create() (MPI_Init_thread under
// the start-up watchdog), createGroup, the destructor (MPI_Finalize), and
// the small collectives barrier and broadcast. The reductions and gathers
// are in MpiCollectives.cpp, send/recv in MpiPointToPoint.cpp.
//
//===----------------------------------------------------------------------===//

#include "mpi/MpiInternal.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace smprt {
namespace {

bool gCreated = false;

} // namespace

MpiCommunicator::MpiCommunicator() : impl_(std::make_unique<Impl>()) {}

Status MpiCommunicator::create(const MpiOptions &options,
                               std::unique_ptr<MpiCommunicator> &out) {
  if (gCreated)
    return Status::failure("MPI communicator: one per process, and this "
                           "process has made one already");
  // Start-up is bounded like every operation: MPI_Init_thread and the
  // collectives below wait for every rank and cannot be polled. A SIGTERM
  // from the launcher meanwhile says where this rank was.
  int rank = options.launchRank;
  std::string who = rank >= 0 ? std::to_string(rank) : std::string("?");
  mpi::setErrorPrefix(options.program, who);
  std::string startup = "MPI start-up";
  std::string why =
      (rank >= 0 && options.launchSize > 0
           ? "rank " + who + " of " + std::to_string(options.launchSize) + "; "
           : std::string()) +
      "MPI_Init waits for every rank of the run: a rank did not start or is "
      "stopped, or the launcher's network is unreachable; --timeout sets "
      "the limit";
  std::unique_ptr<MpiCommunicator> c;
  {
    mpi::installTerminateHandler();
    mpi::WaitingIn marker(startup);
    mpi::BlockingDeadline deadline(options.timeoutSeconds,
                                   mpi::timedOutLine(options.program, rank,
                                                     options.timeoutSeconds,
                                                     startup, why));
    mpi::faultStallStartup(rank);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      int rc =
          MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      if (rc != MPI_SUCCESS)
        return Status::failure("MPI_Init_thread failed: " +
                               mpi::mpiErrorText(rc));
    }
    gCreated = true;
    c.reset(new MpiCommunicator());
    Impl &m = *c->impl_;
    m.world = true;
    m.timeout = options.timeoutSeconds;
    m.program = options.program;
    m.maxChunkBytes =
        std::max<size_t>(1, std::min<size_t>(options.maxChunkBytes, INT32_MAX));
    // Errors are returned, not fatal, on the world and on our duplicate.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &m.comm);
    if (rc != MPI_SUCCESS)
      return Status::failure("MPI_Comm_dup failed: " + mpi::mpiErrorText(rc));
    MPI_Comm_set_errhandler(m.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m.comm, &m.rank);
    MPI_Comm_size(m.comm, &m.size);
    m.worldRank = m.rank;
    MPI_Comm local;
    if (MPI_Comm_split_type(m.comm, MPI_COMM_TYPE_SHARED, m.rank, MPI_INFO_NULL,
                            &local) == MPI_SUCCESS) {
      MPI_Comm_size(local, &m.localSize);
      MPI_Comm_free(&local);
    }
  }
  Impl &m = *c->impl_;
  void *ub = nullptr;
  int flag = 0;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) ==
          MPI_SUCCESS &&
      flag)
    m.tagUB = *static_cast<int *>(ub);
  mpi::setErrorPrefix(m.program, std::to_string(m.rank));
  // MPI_Init may have installed handlers of its own.
  mpi::installTerminateHandler();
  out = std::move(c);
  return Status::success();
}

MpiCommunicator::~MpiCommunicator() {
  Impl &m = *impl_;
  if (m.world)
    mpi::resetTerminateHandler();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return; // MPI reads no copies any more
  if (!m.posted.empty())
    m.abandonSends();
  if (m.comm != MPI_COMM_NULL)
    MPI_Comm_free(&m.comm);
  if (m.world) {
    // MPI_Finalize may wait for the other ranks too.
    mpi::BlockingDeadline deadline(
        m.timeout, mpi::timedOutLine(m.program, m.worldRank, m.timeout,
                                     "MPI shut-down (MPI_Finalize)",
                                     "a peer rank died or hung"));
    MPI_Finalize();
  }
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::size() const { return impl_->size; }
int MpiCommunicator::localSize() const { return impl_->localSize; }
void MpiCommunicator::setTimeout(double seconds) { impl_->timeout = seconds; }
double MpiCommunicator::timeout() const { return impl_->timeout; }
void MpiCommunicator::setMaxChunkBytes(size_t bytes) {
  impl_->maxChunkBytes =
      std::max<size_t>(1, std::min<size_t>(bytes, INT32_MAX));
}
size_t MpiCommunicator::pendingSends() const { return impl_->posted.size(); }

Status MpiCommunicator::createGroup(const std::vector<int> &ranks,
                                    std::unique_ptr<Communicator> &out,
                                    const std::string &what) {
  const Impl &m = *impl_;
  Status s = checkGroup(ranks, what);
  if (!s.ok())
    return s;
  MPI_Group all = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_group(m.comm, &all);
  if (rc == MPI_SUCCESS)
    rc = MPI_Group_incl(all, static_cast<int>(ranks.size()), ranks.data(),
                        &members);
  if (rc == MPI_SUCCESS) {
    // Blocks until the other members call it: bounded by a watchdog thread.
    mpi::WaitingIn marker(what);
    mpi::BlockingDeadline deadline(
        m.timeout, mpi::timedOutLine(m.program, m.worldRank, m.timeout, what,
                                     "a member of the group did not create it: "
                                     "it died or hung, or its program names "
                                     "other groups"));
    rc = MPI_Comm_create_group(m.comm, members, 0, &comm);
  }
  if (members != MPI_GROUP_NULL)
    MPI_Group_free(&members);
  if (all != MPI_GROUP_NULL)
    MPI_Group_free(&all);
  if (rc != MPI_SUCCESS)
    return m.mpiError(rc, what);
  if (comm == MPI_COMM_NULL)
    return Status::failure(what + ": MPI made no communicator for rank " +
                           std::to_string(m.rank));
  std::unique_ptr<MpiCommunicator> c(new MpiCommunicator());
  Impl &g = *c->impl_;
  g.comm = comm;
  MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g.comm, &g.rank);
  MPI_Comm_size(g.comm, &g.size);
  g.localSize = m.localSize;
  g.tagUB = m.tagUB;
  g.worldRank = m.worldRank;
  g.timeout = m.timeout;
  g.maxChunkBytes = m.maxChunkBytes;
  g.program = m.program;
  out = std::move(c);
  return Status::success();
}

Status MpiCommunicator::barrier(const std::string &what) {
  const Impl &m = *impl_;
  auto until = m.deadline();
  MPI_Request req;
  int rc = MPI_Ibarrier(m.comm, &req);
  if (rc != MPI_SUCCESS)
    return m.mpiError(rc, what);
  return m.wait1(req, until, what);
}

Status MpiCommunicator::broadcast(void *data, size_t bytes, int root,
                                  const std::string &what) {
  const Impl &m = *impl_;
  Status s = checkRoot(root, what);
  if (s.ok())
    s = checkBuffer(data, bytes, what);
  if (!s.ok() || bytes == 0)
    return s;
  char *p = static_cast<char *>(data);
  return m.eachChunk(bytes, m.maxChunkBytes, m.deadline(), what,
                     [&](size_t off, int n, MPI_Request *req) {
                       return MPI_Ibcast(p + off, n, MPI_BYTE, root, m.comm,
                                         req);
                     });
}

void MpiCommunicator::abort(int code) {
  mpi::stopReportingWait();
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, code);
  ::_exit(code);
}

} // namespace smprt
