//===- PipelineTime.cpp - A pipeline's ranks side by side ----------------===//

#include "smp/Analysis/Cost/PipelineTime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Analysis/Cost/OpCosts.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

using namespace mlir;

namespace smp {
namespace {

/// One thing a rank does, in its program's order.
struct Event {
  enum Kind { Work, Send, Recv } kind = Work;
  double seconds = 0;  // the rank's own time for it
  double transfer = 0; // a send: its message's time in flight
  int64_t peer = 0, tag = 0;
};

using MessageKey = std::tuple<int64_t, int64_t, int64_t>; // from, to, tag

std::vector<Event> eventsOf(func::FuncOp f, const DeviceSpec &device,
                            const ProfileDB *profile, PipelineEstimate &e) {
  std::vector<Event> events;
  f.walk([&](Operation *op) {
    if (op == f.getOperation() || isa<func::ReturnOp>(op))
      return;
    Event ev;
    if (auto recv = dyn_cast<RecvOp>(op)) {
      ev.kind = Event::Recv, ev.peer = recv.getPeer(), ev.tag = recv.getTag();
      ++e.modelledOps;
      events.push_back(ev);
      return;
    }
    OpEstimate t = estimateOp(op, device, profile);
    ++(t.measured ? e.measuredOps : e.modelledOps);
    ev.seconds = t.seconds;
    if (auto send = dyn_cast<SendOp>(op)) {
      ev.kind = Event::Send, ev.peer = send.getPeer(), ev.tag = send.getTag();
      ev.transfer = collectiveTime(
          Collective::P2P, tensorBytes(send.getInput()), 2, false, device);
      // A backend that communicates beside its compute (the CUDA one's
      // pipes) queues the send and goes on: a launch, not the transfer.
      if (device.overlapsCommunication && !t.measured)
        ev.seconds = device.kernelOverhead;
    }
    events.push_back(ev);
  });
  return events;
}

} // namespace

double PipelineEstimate::bubble() const {
  if (stepSeconds <= 0 || busySeconds.empty())
    return 0;
  double busy = 0;
  for (double b : busySeconds)
    busy += b;
  return std::max(0.0, 1 - busy / (busySeconds.size() * stepSeconds));
}

PipelineEstimate estimatePipeline(ArrayRef<func::FuncOp> ranks,
                                  const DeviceSpec &device,
                                  const ProfileDB *profile) {
  PipelineEstimate e;
  const size_t n = ranks.size();
  std::vector<std::vector<Event>> events;
  for (func::FuncOp f : ranks)
    events.push_back(eventsOf(f, device, profile, e));
  e.finishSeconds.assign(n, 0);
  e.busySeconds.assign(n, 0);
  e.waitSeconds.assign(n, 0);
  std::vector<size_t> next(n, 0);
  std::map<MessageKey, std::deque<double>> arrivals;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < n; ++r) {
      double &clock = e.finishSeconds[r];
      for (; next[r] < events[r].size(); ++next[r], progress = true) {
        const Event &ev = events[r][next[r]];
        if (ev.kind == Event::Recv) {
          auto it = arrivals.find({ev.peer, static_cast<int64_t>(r), ev.tag});
          if (it == arrivals.end() || it->second.empty())
            break; // not sent yet
          double at = it->second.front();
          it->second.pop_front();
          e.waitSeconds[r] += std::max(0.0, at - clock);
          clock = std::max(clock, at);
          continue;
        }
        if (ev.kind == Event::Send)
          arrivals[{static_cast<int64_t>(r), ev.peer, ev.tag}].push_back(
              clock + ev.transfer);
        clock += ev.seconds;
        e.busySeconds[r] += ev.seconds;
      }
    }
  }
  for (size_t r = 0; r < n; ++r) {
    if (next[r] == events[r].size())
      continue;
    const Event &ev = events[r][next[r]];
    e.error += (e.error.empty() ? "" : "; ") + std::string("rank ") +
               std::to_string(r) + " waits for the message of rank " +
               std::to_string(ev.peer) + " with tag " + std::to_string(ev.tag);
  }
  if (!e.error.empty())
    return e;
  e.stepSeconds =
      *std::max_element(e.finishSeconds.begin(), e.finishSeconds.end());
  return e;
}

} // namespace smp
