//===- MpiTestCheck.h - Checks shared by smp-comm-mpi-test's files -*- C++ -*-===//
//
// CHECK counts and reports per rank; finish() in MpiCommTest.cpp sums the
// failures over the ranks.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TEST_UNIT_COMM_MPITESTCHECK_H
#define SMP_TEST_UNIT_COMM_MPITESTCHECK_H

#include "smprt/comm/MpiCommunicator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace smprt;

namespace mpitest {

inline int gRank = 0, gSize = 1, gChecks = 0, gFailures = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    ++gChecks;                                                                 \
    if (!(cond)) {                                                             \
      ++gFailures;                                                             \
      std::fprintf(stderr, "rank %d: FAILED %s:%d: %s: ", gRank, __FILE__,     \
                   __LINE__, #cond);                                           \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fprintf(stderr, "\n");                                              \
    }                                                                          \
  } while (0)

#define CHECK_OK(status)                                                       \
  do {                                                                         \
    Status s_ = (status);                                                      \
    CHECK(s_.ok(), "%s", s_.error.c_str());                                    \
  } while (0)

#define CHECK_ERROR(status, text)                                              \
  do {                                                                         \
    Status s_ = (status);                                                      \
    std::string t_ = (text);                                                   \
    CHECK(!s_.ok() && s_.error.find(t_) != std::string::npos,                  \
          "expected an error containing '%s', got '%s'", t_.c_str(),           \
          s_.error.c_str());                                                   \
  } while (0)

template <typename T> bool sameBits(const T &a, const T &b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// The collectives on any number of ranks (MpiCollectivesTest.cpp).
void runCollectiveTests(smprt::Communicator &c);
/// Groups and posted sends on 4 ranks (MpiGroupsTest.cpp).
void testGroups(smprt::MpiCommunicator &world);
void testPipeline(smprt::MpiCommunicator &c);

} // namespace mpitest

#endif // SMP_TEST_UNIT_COMM_MPITESTCHECK_H
