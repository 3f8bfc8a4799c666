//===- PipelineSchedule.cpp - Pipeline-parallel schedules and simulator ---===//

#include "smp/Schedule/PipelineSchedule.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <sstream>

namespace smp::schedule {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char &c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool setError(std::string *error, std::string message) {
  if (error)
    *error = std::move(message);
  return false;
}

bool checkParameters(int p, int m, int v, std::string *error) {
  if (p < 1)
    return setError(error, "the number of pipeline ranks must be at least 1, got " +
                               std::to_string(p));
  if (m < 1)
    return setError(error, "the number of micro-batches must be at least 1, got " +
                               std::to_string(m));
  if (v < 1)
    return setError(error, "the number of virtual stages per rank must be at least 1, got " +
                               std::to_string(v));
  if (p > kMaxRanks)
    return setError(error, "at most " + std::to_string(kMaxRanks) +
                               " pipeline ranks are supported, got " + std::to_string(p));
  if (m > kMaxMicrobatches)
    return setError(error, "at most " + std::to_string(kMaxMicrobatches) +
                               " micro-batches are supported, got " + std::to_string(m));
  if (v > kMaxVirtualStages)
    return setError(error, "at most " + std::to_string(kMaxVirtualStages) +
                               " virtual stages per rank are supported, got " +
                               std::to_string(v));
  // Up to three actions (F, BI, BW) per stage and micro-batch.
  if (3LL * p * v * m > kMaxActions)
    return setError(error, "the schedule would have more than " +
                               std::to_string(kMaxActions) + " actions (p=" +
                               std::to_string(p) + ", m=" + std::to_string(m) +
                               ", v=" + std::to_string(v) + ")");
  return true;
}

Schedule buildGPipe(int p, int m) {
  Schedule s(p);
  for (int r = 0; r < p; ++r) {
    for (int mb = 0; mb < m; ++mb)
      s[r].push_back({Action::F, r, mb});
    for (int mb = 0; mb < m; ++mb)
      s[r].push_back({Action::B, r, mb});
  }
  return s;
}

Schedule buildOneFOneB(int p, int m) {
  Schedule s(p);
  for (int r = 0; r < p; ++r) {
    std::vector<Action> &list = s[r];
    int warmup = std::min(p - r - 1, m);
    int f = 0, b = 0;
    for (; f < warmup; ++f)
      list.push_back({Action::F, r, f});
    while (f < m) {
      list.push_back({Action::F, r, f++});
      list.push_back({Action::B, r, b++});
    }
    while (b < m)
      list.push_back({Action::B, r, b++});
  }
  return s;
}

Schedule buildInterleaved(int p, int m, int v) {
  if (v == 1)
    return buildOneFOneB(p, m);
  // Group sizes: R = max(1, m/p) groups, sizes differing by at most one,
  // larger first (each >= p when m >= p; one group of m when m < p).
  int numGroups = std::max(1, m / p);
  int base = m / numGroups, extra = m % numGroups;
  int largest = base + (extra > 0 ? 1 : 0);
  // The (chunk, micro-batch) order every rank follows for its forwards;
  // backwards follow it with the chunks reversed.
  std::vector<std::pair<int, int>> order;
  order.reserve(static_cast<size_t>(m) * v);
  int first = 0;
  for (int g = 0; g < numGroups; ++g) {
    int size = base + (g < extra ? 1 : 0);
    for (int c = 0; c < v; ++c)
      for (int mb = first; mb < first + size; ++mb)
        order.push_back({c, mb});
    first += size;
  }
  int total = m * v;
  Schedule s(p);
  for (int r = 0; r < p; ++r) {
    std::vector<Action> &list = s[r];
    auto forward = [&](int k) {
      return Action{Action::F, order[k].first * p + r, order[k].second};
    };
    auto backward = [&](int k) {
      return Action{Action::B, (v - 1 - order[k].first) * p + r, order[k].second};
    };
    long long warmupLL = 2LL * (p - r - 1) + static_cast<long long>(v - 1) * largest;
    int warmup = static_cast<int>(std::min<long long>(warmupLL, total));
    int f = 0, b = 0;
    for (; f < warmup; ++f)
      list.push_back(forward(f));
    while (f < total) {
      list.push_back(forward(f++));
      list.push_back(backward(b++));
    }
    while (b < total)
      list.push_back(backward(b++));
  }
  return s;
}

Schedule buildZeroBubbleH1(int p, int m) {
  Schedule s = buildOneFOneB(p, m);
  for (int r = 0; r < p; ++r) {
    std::vector<Action> list;
    list.reserve(3 * static_cast<size_t>(m));
    int inputGrads = 0, weightGrads = 0;
    for (const Action &a : s[r]) {
      if (a.kind == Action::F) {
        list.push_back(a);
        continue;
      }
      list.push_back({Action::BI, a.stage, a.microbatch});
      ++inputGrads;
      // Keep at most r weight gradients pending: BW(k) follows BI(k + r).
      if (inputGrads - weightGrads > r)
        list.push_back({Action::BW, r, weightGrads++});
    }
    while (weightGrads < m)
      list.push_back({Action::BW, r, weightGrads++});
    s[r] = std::move(list);
  }
  return s;
}

/// Each schedule kind's canonical name (first) and the other names
/// parseScheduleKind accepts (null: no more).
struct ScheduleNames {
  ScheduleKind kind;
  const char *names[3];
};
constexpr ScheduleNames kScheduleNames[] = {
    {ScheduleKind::GPipe, {"gpipe"}},
    {ScheduleKind::OneFOneB, {"1f1b"}},
    {ScheduleKind::Interleaved, {"interleaved", "interleaved-1f1b"}},
    {ScheduleKind::ZeroBubbleH1, {"zb-h1", "zbh1", "zb_h1"}}};

/// Action::Kind's names, by its value.
constexpr const char *kActionNames[] = {"F", "B", "BI", "BW"};

} // namespace

std::optional<ScheduleKind> parseScheduleKind(std::string_view name) {
  std::string n = lower(name);
  for (const ScheduleNames &entry : kScheduleNames)
    for (const char *known : entry.names)
      if (known && n == known)
        return entry.kind;
  return std::nullopt;
}

const char *scheduleKindName(ScheduleKind kind) {
  for (const ScheduleNames &entry : kScheduleNames)
    if (entry.kind == kind)
      return entry.names[0];
  return "?";
}

std::string toString(const Action &action) {
  auto k = static_cast<size_t>(action.kind);
  const char *kind = k < std::size(kActionNames) ? kActionNames[k] : "?";
  return std::string(kind) + "(" + std::to_string(action.stage) + "," +
         std::to_string(action.microbatch) + ")";
}

std::string formatSchedule(const Schedule &schedule) {
  std::ostringstream os;
  for (size_t r = 0; r < schedule.size(); ++r) {
    os << "rank " << r << ":";
    for (const Action &a : schedule[r])
      os << ' ' << toString(a);
    os << '\n';
  }
  return os.str();
}

Schedule buildSchedule(ScheduleKind kind, int p, int m, int v, std::string *error) {
  if (!checkParameters(p, m, v, error))
    return {};
  if (v != 1 && kind != ScheduleKind::Interleaved) {
    setError(error, std::string("schedule '") + scheduleKindName(kind) +
                        "' has one stage per rank; " + std::to_string(v) +
                        " virtual stages need 'interleaved'");
    return {};
  }
  switch (kind) {
  case ScheduleKind::GPipe:
    return buildGPipe(p, m);
  case ScheduleKind::OneFOneB:
    return buildOneFOneB(p, m);
  case ScheduleKind::Interleaved:
    return buildInterleaved(p, m, v);
  case ScheduleKind::ZeroBubbleH1:
    return buildZeroBubbleH1(p, m);
  }
  setError(error, "unknown schedule kind");
  return {};
}

namespace {

enum { kF, kB, kBI, kBW, kNumKinds };

/// Structure: ranges, ranks, duplicates. Marks seen[cell * kNumKinds +
/// kind] for every action; false with *error on the first bad one.
bool checkActions(const Schedule &schedule, int p, int m, int numStages,
                  std::vector<unsigned char> &seen, std::string *error) {
  auto cell = [m](int stage, int mb) { return static_cast<size_t>(stage) * m + mb; };
  for (int r = 0; r < p; ++r) {
    for (const Action &a : schedule[r]) {
      if (a.kind != Action::F && a.kind != Action::B && a.kind != Action::BI &&
          a.kind != Action::BW) {
        *error = "rank " + std::to_string(r) + " has an action of unknown kind";
        return false;
      }
      if (a.stage < 0 || a.stage >= numStages || a.microbatch < 0 ||
          a.microbatch >= m) {
        *error = "rank " + std::to_string(r) + ": " + toString(a) +
                 " is out of range (" + std::to_string(numStages) +
                 " stages, " + std::to_string(m) + " micro-batches)";
        return false;
      }
      if (rankOfStage(a.stage, p) != r) {
        *error = "rank " + std::to_string(r) + ": " + toString(a) +
                 " belongs to rank " + std::to_string(rankOfStage(a.stage, p));
        return false;
      }
      unsigned char &flag = seen[cell(a.stage, a.microbatch) * kNumKinds + a.kind];
      if (flag) {
        *error = "rank " + std::to_string(r) + ": " + toString(a) +
                 " appears more than once";
        return false;
      }
      flag = 1;
    }
  }
  return true;
}

/// The first action the schedule lacks ("" when complete); false with
/// *error where a (stage, micro-batch) has B mixed with BI/BW.
bool findMissing(const std::vector<unsigned char> &seen, int m, int numStages,
                 std::string *missing, std::string *error) {
  auto cell = [m](int stage, int mb) { return static_cast<size_t>(stage) * m + mb; };
  for (int s = 0; s < numStages && missing->empty(); ++s) {
    for (int mb = 0; mb < m; ++mb) {
      const unsigned char *f = &seen[cell(s, mb) * kNumKinds];
      bool split = f[kBI] || f[kBW];
      if (f[kB] && split) {
        *error = "stage " + std::to_string(s) + ", micro-batch " +
                 std::to_string(mb) + " has both B and BI/BW";
        return false;
      }
      Action need{Action::F, s, mb};
      if (!f[kF])
        need.kind = Action::F;
      else if (split && !f[kBI])
        need.kind = Action::BI;
      else if (split && !f[kBW])
        need.kind = Action::BW;
      else if (!split && !f[kB])
        need.kind = Action::B;
      else
        continue;
      *missing = toString(need) + " is missing";
      break;
    }
  }
  return true;
}

/// Runs a schedule's actions in order on each rank as soon as their inputs
/// are ready, filling the result's times and peaks.
struct Execution {
  const Schedule &schedule;
  int p, m, numStages;
  const Costs &costs;
  SimulationResult &result;
  // finish*[cell] < 0: not done yet.
  std::vector<double> finishF, finishBack, finishBI;
  std::vector<size_t> next;
  std::vector<double> rankTime;
  std::vector<int> inFlight, pendingW;
  bool record; // start times and peaks into the result

  Execution(const Schedule &schedule, int p, int m, int numStages,
            const Costs &costs, SimulationResult &result, bool record = true)
      : schedule(schedule), p(p), m(m), numStages(numStages), costs(costs),
        result(result), record(record) {
    const size_t cells = static_cast<size_t>(numStages) * m;
    finishF.assign(cells, -1.0);
    finishBack.assign(cells, -1.0);
    finishBI.assign(cells, -1.0);
    next.assign(p, 0);
    rankTime.assign(p, 0.0);
    inFlight.assign(p, 0);
    pendingW.assign(p, 0);
    if (!record)
      return;
    result.peakInFlightActivations.assign(p, 0);
    result.peakPendingWeightGradients.assign(p, 0);
    result.startTimes.resize(p);
    for (int r = 0; r < p; ++r)
      result.startTimes[r].assign(schedule[r].size(), -1.0);
  }

  size_t cell(int stage, int mb) const { return static_cast<size_t>(stage) * m + mb; }

  // Whether the dependency (stage, mb) in `finish` is done; if so, raises
  // *at to the time it is usable on `rank` (its finish time, plus the
  // communication time when another rank produced it).
  bool ready(int rank, int stage, int mb, const std::vector<double> &finish,
             double *at) const {
    double t = finish[cell(stage, mb)];
    if (t < 0)
      return false;
    if (rankOfStage(stage, p) != rank)
      t += costs.communication;
    *at = std::max(*at, t);
    return true;
  }

  std::string waitingFor(int rank, const Action &a) const {
    double at = 0;
    switch (a.kind) {
    case Action::F:
      if (a.stage > 0 && !ready(rank, a.stage - 1, a.microbatch, finishF, &at))
        return toString({Action::F, a.stage - 1, a.microbatch});
      break;
    case Action::B:
    case Action::BI:
      if (!ready(rank, a.stage, a.microbatch, finishF, &at))
        return toString({Action::F, a.stage, a.microbatch});
      if (a.stage + 1 < numStages &&
          !ready(rank, a.stage + 1, a.microbatch, finishBack, &at))
        return "the backward of stage " + std::to_string(a.stage + 1) +
               ", micro-batch " + std::to_string(a.microbatch);
      break;
    case Action::BW:
      if (!ready(rank, a.stage, a.microbatch, finishBI, &at))
        return toString({Action::BI, a.stage, a.microbatch});
      break;
    }
    return "";
  }

  /// Runs rank r's next action if its inputs are ready.
  bool step(int r) {
    const Action &a = schedule[r][next[r]];
    double start = rankTime[r];
    bool ok = true;
    switch (a.kind) {
    case Action::F:
      ok = a.stage == 0 || ready(r, a.stage - 1, a.microbatch, finishF, &start);
      break;
    case Action::B:
    case Action::BI:
      ok = ready(r, a.stage, a.microbatch, finishF, &start) &&
           (a.stage + 1 == numStages ||
            ready(r, a.stage + 1, a.microbatch, finishBack, &start));
      break;
    case Action::BW:
      ok = ready(r, a.stage, a.microbatch, finishBI, &start);
      break;
    }
    if (!ok)
      return false;
    double end = start + costs.of(a);
    size_t c = cell(a.stage, a.microbatch);
    switch (a.kind) {
    case Action::F:
      finishF[c] = end;
      ++inFlight[r];
      if (record)
        result.peakInFlightActivations[r] =
            std::max(result.peakInFlightActivations[r], inFlight[r]);
      break;
    case Action::B:
      finishBack[c] = end;
      --inFlight[r];
      break;
    case Action::BI:
      finishBack[c] = end;
      finishBI[c] = end;
      --inFlight[r];
      ++pendingW[r];
      if (record)
        result.peakPendingWeightGradients[r] =
            std::max(result.peakPendingWeightGradients[r], pendingW[r]);
      break;
    case Action::BW:
      --pendingW[r];
      break;
    }
    if (record)
      result.startTimes[r][next[r]] = start;
    rankTime[r] = end;
    result.busyTime += costs.of(a);
    result.makespan = std::max(result.makespan, end);
    ++next[r];
    return true;
  }

  /// Runs every action it can; a deadlock sets result.deadlock and error.
  void run() {
    bool progress = true;
    size_t remaining = 0;
    for (int r = 0; r < p; ++r)
      remaining += schedule[r].size();
    while (remaining > 0 && progress) {
      progress = false;
      for (int r = 0; r < p; ++r) {
        while (next[r] < schedule[r].size()) {
          if (!step(r))
            break;
          --remaining;
          progress = true;
        }
      }
    }
    if (remaining > 0) {
      result.deadlock = true;
      std::string message = "deadlock:";
      for (int r = 0; r < p; ++r) {
        if (next[r] >= schedule[r].size())
          continue;
        const Action &a = schedule[r][next[r]];
        message += " rank " + std::to_string(r) + " waits at " + toString(a) +
                   " for " + waitingFor(r, a) + ";";
      }
      message.pop_back();
      result.error = message;
    }
  }
};

/// 1 - busy / (p x makespan) of a finished simulation (0 for no time).
double bubbleOf(const SimulationResult &result, int p) {
  return result.makespan > 0 ? 1.0 - result.busyTime / (p * result.makespan)
                             : 0.0;
}

} // namespace

SimulationResult simulateSchedule(const Schedule &schedule, int p, int m, int v,
                                  const Costs &costs) {
  SimulationResult result;
  if (!checkParameters(p, m, v, &result.error))
    return result;
  if (!(costs.forward >= 0 && costs.backward >= 0 && costs.backwardInput >= 0 &&
        costs.backwardWeight >= 0 && costs.communication >= 0) ||
      std::any_of(costs.stageScale.begin(), costs.stageScale.end(),
                  [](double f) { return !(f >= 0); })) {
    result.error = "action costs and the communication time must be non-negative";
    return result;
  }
  if (static_cast<long long>(schedule.size()) != p) {
    result.error = "the schedule has " + std::to_string(schedule.size()) +
                   " ranks, expected " + std::to_string(p);
    return result;
  }
  const int numStages = p * v;
  const size_t cells = static_cast<size_t>(numStages) * m;
  if (!costs.stageScale.empty() &&
      costs.stageScale.size() != static_cast<size_t>(numStages)) {
    result.error = "the costs scale " +
                   std::to_string(costs.stageScale.size()) +
                   " stages, the schedule has " + std::to_string(numStages);
    return result;
  }

  // Structure: ranges, ranks, duplicates, B mixed with BI/BW.
  std::vector<unsigned char> seen(cells * kNumKinds, 0);
  if (!checkActions(schedule, p, m, numStages, seen, &result.error))
    return result;
  std::string missing;
  if (!findMissing(seen, m, numStages, &missing, &result.error))
    return result;
  result.complete = missing.empty();

  Execution(schedule, p, m, numStages, costs, result).run();
  if (result.error.empty() && !result.complete)
    result.error = missing;
  result.bubbleFraction = bubbleOf(result, p);
  return result;
}

double simulatedMakespan(const Schedule &schedule, int p, int m, int v,
                         const Costs &costs, double *bubbleFraction) {
  SimulationResult result;
  if (static_cast<long long>(schedule.size()) != p ||
      (!costs.stageScale.empty() &&
       costs.stageScale.size() != static_cast<size_t>(p) * v))
    return -1;
  Execution(schedule, p, m, p * v, costs, result, /*record=*/false).run();
  if (result.deadlock)
    return -1;
  if (bubbleFraction)
    *bubbleFraction = bubbleOf(result, p);
  return result.makespan;
}

double unitCostBubbleFraction(ScheduleKind kind, int p, int m, int v) {
  if (!checkParameters(p, m, v, nullptr) ||
      (v != 1 && kind != ScheduleKind::Interleaved))
    return -1.0;
  const double P = p, M = m, V = v;
  switch (kind) {
  case ScheduleKind::GPipe:
  case ScheduleKind::OneFOneB:
    return (P - 1) / (M + P - 1);
  case ScheduleKind::Interleaved:
    return 1.0 - V * M / (V * std::max(M, P) + std::min(M, P) - 1);
  case ScheduleKind::ZeroBubbleH1:
    return 1.0 - 3 * M / std::max(3 * M + P - 1, 2 * M + 2 * P - 1);
  }
  return -1.0;
}

} // namespace smp::schedule
