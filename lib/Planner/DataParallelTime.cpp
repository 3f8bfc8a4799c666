//===- DataParallelTime.cpp - What data parallelism adds to a step --------===//
//
// Without overlap (the CPU backend) every collective is on the step's
// critical path, priced from the largest stage's parameters as one
// collective each:
//   ZeRO-0 and 1   the gradients' all-reduce (ZeRO-1: reduce-scatter and
//                  the parameters' all-gather, the same bytes)
//   ZeRO-2         a reduce-scatter per micro-batch (one all-reduce's worth
//                  with one) and the parameters' all-gather
//   ZeRO-3         per micro-batch a reduce-scatter and the parameters'
//                  gathers for the forward and the backward (and a
//                  recomputed forward), in the type their uses compute in
//                  (Stages::gatherWidth: bf16 under mixed precision)
// With overlap (the CUDA backend, runtime/exec's lanes) each stage's one
// micro-batch runs its forward ops, then their backward in reverse, and its
// collectives queue on one stream as the compiled step issues them:
//   gradient buckets (smp-gradient-all-reduce, smp-shard-optimizer-state,
//                  smp-shard-gradients; --bucket-mb, PlanRequest::
//                  bucketBytes) after the
//                  backward op that completes their last gradient, waited
//                  for at the step's end: the all-reduce (ZeRO-0) or
//                  reduce-scatter in the last micro-batch's backward
//                  (ZeRO-1, and ZeRO-2 with one micro-batch), in every
//                  micro-batch's (ZeRO-2 and 3, counted m times)
//   ZeRO-3 gathers one per op that first uses parameters, forward then
//                  backward (twice its bytes when recomputing), each issued
//                  with the op `prefetch` gathers before its own
//                  (smp-shard-parameters) and waited for by its op; m times
//   after the update  ZeRO-1 and 2's all-gather of the parameters, and
//                  hybrid sharding's sum across the replica groups: exposed
// Not modelled: what the collectives' kernels take from the compute (SMs,
// memory bandwidth), and a later micro-batch's forward hiding the tail of
// an earlier one's scatters.
//
//===----------------------------------------------------------------------===//

#include "DataParallelTime.h"

#include "smp/Analysis/Cost/CostModel.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <functional>
#include <tuple>

namespace smp {
namespace planning {

double exposedCommSeconds(const std::vector<double> &ops,
                          const std::vector<CommTask> &tasks) {
  size_t n = ops.size();
  std::vector<std::vector<size_t>> waits(n + 1);
  for (size_t k = 0; k < tasks.size(); ++k)
    waits[std::min(tasks[k].need, n)].push_back(k);
  std::vector<double> opEnd(n, 0.0), taskEnd(tasks.size(), 0.0);
  double clock = 0, stream = 0, compute = 0;
  size_t next = 0;
  // Queues the tasks that ops [0, done) release, in order.
  auto queue = [&](size_t done) {
    for (; next < tasks.size() && std::min(tasks[next].release, n) <= done;
         ++next) {
      size_t r = std::min(tasks[next].release, n);
      stream =
          std::max(stream, r == 0 ? 0.0 : opEnd[r - 1]) + tasks[next].seconds;
      taskEnd[next] = stream;
    }
  };
  for (size_t i = 0; i <= n; ++i) {
    queue(i);
    for (size_t k : waits[i])
      clock = std::max(clock, k < next ? taskEnd[k] : stream);
    if (i == n)
      break;
    clock += ops[i];
    opEnd[i] = clock;
    compute += ops[i];
  }
  queue(n);
  for (size_t k = 0; k < next; ++k)
    clock = std::max(clock, taskEnd[k]);
  return clock - compute;
}

namespace {

/// One stage's collectives against one micro-batch of its ops.
struct StageComm {
  const Stages &st;
  size_t begin, end;
  bool rc;
  bool offload;
  double bucketBytes;
  std::function<double(Collective, double)> time;

  size_t forwardAt(size_t i) const { return i - begin; }
  size_t backwardAt(size_t i) const { return (end - begin) + (end - 1 - i); }

  /// The micro-batch's forward ops, then their backward in reverse (an
  /// offloading stage's copies back spread over the backward by time: the
  /// stage's, not each op's alone, which would count every op's input).
  std::vector<double> ops() const {
    std::vector<double> out(2 * (end - begin));
    double backward = 0;
    for (size_t i = begin; i < end; ++i) {
      double f = st.fwd[i] + st.tpComm[i];
      out[forwardAt(i)] = f;
      out[backwardAt(i)] = st.time(i, i + 1, rc, false) - f;
      backward += out[backwardAt(i)];
    }
    double copies =
        st.time(begin, end, rc, offload) - st.time(begin, end, rc, false);
    if (copies > 0 && backward > 0)
      for (size_t i = begin; i < end; ++i)
        out[backwardAt(i)] *= 1 + copies / backward;
    return out;
  }

  /// The gradient buckets' `kind` collectives, each after the backward op
  /// that completes its last gradient, needed at the end.
  void buckets(Collective kind, std::vector<CommTask> &tasks) const {
    double bytes = 0;
    size_t last = 0;
    auto close = [&] {
      if (bytes > 0)
        tasks.push_back({last + 1, 2 * (end - begin), time(kind, bytes)});
      bytes = 0;
    };
    for (size_t i = end; i-- > begin;) {
      double size = st.params[i];
      if (size <= 0)
        continue;
      if (bytes > 0 && bytes + size > bucketBytes)
        close();
      bytes += size;
      last = backwardAt(i);
    }
    close();
  }

  /// ZeRO-3's gathers in program order (the forward's, then the
  /// backward's), each issued with the op `prefetch` gathers before its
  /// own, `width` of the parameters' f32 bytes each.
  void gathers(int64_t prefetch, double width,
               std::vector<CommTask> &tasks) const {
    std::vector<std::pair<size_t, double>> uses; // (op position, bytes)
    for (size_t i = begin; i < end; ++i)
      if (st.params[i] > 0)
        uses.push_back({forwardAt(i), width * st.params[i]});
    for (size_t i = end; i-- > begin;)
      if (st.params[i] > 0)
        uses.push_back({backwardAt(i), width * st.params[i] * (rc ? 2 : 1)});
    size_t ahead = static_cast<size_t>(std::max<int64_t>(prefetch, 0));
    for (size_t j = 0; j < uses.size(); ++j)
      tasks.push_back({j >= ahead ? uses[j - ahead].first : 0, uses[j].first,
                       time(Collective::AllGather, uses[j].second)});
  }

  /// What `tasks` (in any order) add to the micro-batch's compute, queued
  /// in the order they are issued, and their sum.
  std::pair<double, double> run(std::vector<CommTask> tasks) const {
    std::stable_sort(tasks.begin(), tasks.end(),
                     [](const CommTask &x, const CommTask &y) {
                       return x.release < y.release;
                     });
    double sum = 0;
    for (const CommTask &t : tasks)
      sum += t.seconds;
    return {exposedCommSeconds(ops(), tasks), sum};
  }
};

/// Every collective exposed, priced from the largest stage's parameters.
double serialTime(const Candidate &c, double params, bool recompute,
                  double width,
                  const std::function<double(Collective, double)> &time) {
  double gathers = 2 + (recompute ? 1 : 0);
  double m = static_cast<double>(c.m);
  if (c.zero == 3)
    return m * (time(Collective::ReduceScatter, params) +
                gathers * time(Collective::AllGather, width * params));
  if (c.zero == 2 && c.m > 1)
    return m * time(Collective::ReduceScatter, params) +
           time(Collective::AllGather, params);
  return time(Collective::AllReduce, params);
}

} // namespace

DataParallelTime dataParallelTime(const Stages &st, const PlanRequest &req,
                                  const Candidate &c,
                                  const std::vector<size_t> &ends,
                                  const std::vector<bool> &recompute,
                                  int64_t dpPerNode) {
  DataParallelTime out;
  if (c.dp <= 1)
    return out;
  const DeviceSpec &d = req.device;
  // ZeRO's collectives run within a shard group of S adjacent dp ranks
  // (all of dp unless hybrid sharding made groups).
  int64_t shard = c.zero > 0 ? c.shard : c.dp;
  std::function<double(Collective, double)> time = [&](Collective kind,
                                                       double bytes) {
    return groupCollectiveTime(kind, bytes, static_cast<int>(shard),
                               static_cast<int>(dpPerNode), d);
  };
  bool anyRecompute = llvm::any_of(recompute, [](bool r) { return r; });
  double width = c.zero == 3 ? st.gatherWidth : 1.0;
  double largest = 0;
  for (size_t s = 0, begin = 0; s < ends.size(); ++s) {
    size_t end = ends[s] + 1;
    double params = st.prefixParams[end] - st.prefixParams[begin];
    largest = std::max(largest, params);
    if (d.overlapsCommunication && end > begin) {
      StageComm stage{st,        begin,           end, recompute[s],
                      c.offload, req.bucketBytes, time};
      std::vector<CommTask> tasks;
      double m = static_cast<double>(c.m), exposed = 0, total = 0;
      if (c.zero == 3 || (c.zero == 2 && c.m > 1)) {
        stage.buckets(Collective::ReduceScatter, tasks);
        if (c.zero == 3)
          stage.gathers(req.gatherPrefetch, width, tasks);
        auto [e, sum] = stage.run(tasks);
        exposed = m * e, total = m * sum;
      } else {
        stage.buckets(c.zero == 0 ? Collective::AllReduce
                                  : Collective::ReduceScatter,
                      tasks);
        std::tie(exposed, total) = stage.run(tasks);
      }
      if (c.zero == 1 || c.zero == 2) {
        double gather = time(Collective::AllGather, params);
        exposed += gather, total += gather;
      }
      out.exposed = std::max(out.exposed, exposed);
      out.total = std::max(out.total, total);
    }
    begin = end;
  }
  if (!d.overlapsCommunication)
    out.exposed = out.total = serialTime(c, largest, anyRecompute, width, time);
  // Hybrid sharding: the chunks' sum over the dp / S replica groups, once
  // per step (a group's rank meets its peers S dp ranks apart).
  if (c.zero > 0 && shard < c.dp) {
    double across = groupCollectiveTime(
        Collective::AllReduce, largest / static_cast<double>(shard),
        static_cast<int>(c.dp / shard),
        static_cast<int>(std::max<int64_t>(1, dpPerNode / shard)), d);
    out.exposed += across, out.total += across;
  }
  return out;
}

} // namespace planning
} // namespace smp
