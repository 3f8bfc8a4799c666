//===- PipelineSchedule.h - Pipeline-parallel schedules and simulator -----===//
//
// Per-rank action lists for pipeline parallelism (GPipe, 1F1B, Megatron's
// interleaved 1F1B, zero-bubble ZB-H1) and a simulator that executes them
// with given action costs, detects deadlocks, checks that every action is
// present exactly once on the right rank and measures the makespan, the
// bubble fraction and the activations each rank keeps alive.
//
// Model: `p` pipeline ranks, `m` micro-batches, `v` virtual stages (model
// chunks) per rank. The model has S = p*v stages; stage s lives on rank
// s % p (chunk s / p), interleaved as in Megatron-LM. Dependencies (sends
// and receives are implied by them when the producer is on another rank):
//   F(s, mb)       needs F(s-1, mb)                         (s > 0)
//   B/BI(s, mb)    needs F(s, mb) and B/BI(s+1, mb)         (s < S-1)
//   BW(s, mb)      needs BI(s, mb) (and may be deferred)
// B is the full backward; BI (input gradient) and BW (weight gradient) are
// its two halves, used by the zero-bubble schedules instead of B.
//
// Pure C++17, no MLIR: the planner and the runtime both use it.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_SCHEDULE_PIPELINESCHEDULE_H
#define SMP_SCHEDULE_PIPELINESCHEDULE_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace smp::schedule {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };

/// "gpipe", "1f1b", "interleaved", "zb-h1" (case-insensitive; also accepts
/// "interleaved-1f1b", "zbh1" and "zb_h1"); std::nullopt for anything else.
std::optional<ScheduleKind> parseScheduleKind(std::string_view name);
/// The canonical name parseScheduleKind accepts.
const char *scheduleKindName(ScheduleKind kind);

struct Action {
  enum Kind { F, B, BI, BW };
  Kind kind;
  int stage;
  int microbatch;

  bool operator==(const Action &o) const {
    return kind == o.kind && stage == o.stage && microbatch == o.microbatch;
  }
  bool operator!=(const Action &o) const { return !(*this == o); }
};

/// "F(3,2)", "BW(0,5)": kind(stage, micro-batch).
std::string toString(const Action &action);

/// One ordered action list per rank.
using Schedule = std::vector<std::vector<Action>>;

/// One line per rank: "rank 0: F(0,0) F(0,1) B(0,0) ...".
std::string formatSchedule(const Schedule &schedule);

inline int rankOfStage(int stage, int numRanks) { return stage % numRanks; }

/// Parameter limits buildSchedule and simulateSchedule accept.
constexpr int kMaxRanks = 4096;
constexpr int kMaxMicrobatches = 65536;
constexpr int kMaxVirtualStages = 256;
constexpr long long kMaxActions = 1LL << 24;

/// The per-rank action lists of `kind` for p ranks, m micro-batches and v
/// model chunks per rank. Returns an empty schedule and sets *error (when
/// given) for invalid parameters: p, m or v < 1, v > 1 with a kind other
/// than Interleaved, or sizes beyond the limits above.
///
///  * GPipe: every forward, then every backward (micro-batches in order).
///  * OneFOneB: PipeDream-flush / Megatron non-interleaved: rank r runs
///    min(p-r-1, m) warm-up forwards, then alternates one forward and one
///    backward, then the remaining backwards (cool-down).
///  * Interleaved: Megatron's interleaved 1F1B. Micro-batches are processed
///    in groups; within a group every chunk's forwards run for the whole
///    group before the next chunk's (backwards: chunks in reverse). Rank r
///    runs min(2(p-r-1) + (v-1)*g, m*v) warm-up forwards (g: the largest
///    group), then 1F1B over (chunk, micro-batch) pairs. With m % p == 0 the
///    groups have p micro-batches: Megatron's order (Megatron runs every
///    forward first when m == p; the capped formula gives the same makespan
///    with fewer activations on the last ranks). Otherwise there
///    are R = max(1, m/p) groups whose sizes differ by at most one (larger
///    first), so every group has at least p micro-batches when m >= p and a
///    single group of m when m < p; groups of p with a short last group
///    deadlock under this warm-up (e.g. p=4, m=5, v=3). v == 1 gives 1F1B.
///  * ZeroBubbleH1: ZB-H1 (Qi et al. 2023): 1F1B's order of forwards and
///    backwards with each backward split into BI and BW; rank r defers its
///    weight gradients so that at most r of them are pending (BW(k) follows
///    BI(k+r)), the rest run at the end. Activations alive (F done, BI not)
///    are those of 1F1B; activations plus pending BWs never exceed p.
Schedule buildSchedule(ScheduleKind kind, int numRanks, int numMicrobatches,
                       int virtualStages, std::string *error = nullptr);

/// Duration of each action; a cross-rank dependency becomes visible
/// `communication` after the producing action finishes (0: instantly).
/// With `stageScale` (one factor per stage, p x v of them), an action of
/// stage s takes its kind's duration times stageScale[s]: stages of
/// unequal time.
struct Costs {
  double forward = 1.0;
  double backward = 2.0;
  double backwardInput = 1.0;
  double backwardWeight = 1.0;
  double communication = 0.0;
  std::vector<double> stageScale;

  /// The duration of `action`.
  double of(const Action &action) const {
    double t = of(action.kind);
    if (action.stage >= 0 &&
        static_cast<size_t>(action.stage) < stageScale.size())
      t *= stageScale[action.stage];
    return t;
  }

  /// The duration of an action of `kind`.
  double of(Action::Kind kind) const {
    switch (kind) {
    case Action::F:
      return forward;
    case Action::B:
      return backward;
    case Action::BI:
      return backwardInput;
    case Action::BW:
      return backwardWeight;
    }
    return 0.0;
  }
};

struct SimulationResult {
  /// Every F and B (or BI and BW) of every stage x micro-batch exactly once,
  /// on the stage's rank; nothing else. Structural: independent of deadlock.
  bool complete = false;
  /// No rank could progress while some still had actions.
  bool deadlock = false;
  /// The first problem found (empty when complete and deadlock-free).
  std::string error;
  /// Finish time of the last executed action (time starts at 0).
  double makespan = 0.0;
  /// Sum of the durations of the executed actions.
  double busyTime = 0.0;
  /// 1 - busyTime / (p * makespan); 0 when the makespan is 0.
  double bubbleFraction = 0.0;
  /// Per rank: the most (stage, micro-batch) activations alive at once (F
  /// done, B/BI not yet done). With v > 1 one of them is a chunk's share of
  /// a micro-batch, i.e. 1/v of a non-interleaved rank's activations.
  std::vector<int> peakInFlightActivations;
  /// Per rank: the most weight gradients pending at once (BI done, BW not).
  std::vector<int> peakPendingWeightGradients;
  /// Start time of each action, shaped like the schedule (-1: not executed,
  /// because of a deadlock).
  std::vector<std::vector<double>> startTimes;
};

/// Executes every rank's list in order; a rank blocks until the dependencies
/// of its next action are done. Structural errors (wrong number of ranks,
/// stage or micro-batch out of range, an action on the wrong rank, a
/// duplicate, B mixed with BI/BW for one stage x micro-batch, invalid
/// parameters or negative costs) are reported in `error` with complete ==
/// false and nothing simulated. Otherwise the schedule is simulated (also
/// when incomplete: a missing dependency shows as a deadlock).
SimulationResult simulateSchedule(const Schedule &schedule, int numRanks,
                                  int numMicrobatches, int virtualStages,
                                  const Costs &costs = Costs());

/// The makespan simulateSchedule gives for a schedule buildSchedule made
/// (not checked again: no start times or peaks, for callers that simulate
/// one shape many times, such as the planner), its bubble fraction into
/// *bubbleFraction. Returns -1 on a deadlock or a rank count or stageScale
/// that does not fit p and v.
double simulatedMakespan(const Schedule &schedule, int numRanks,
                         int numMicrobatches, int virtualStages,
                         const Costs &costs, double *bubbleFraction = nullptr);

/// The bubble fraction the simulator gives for buildSchedule(kind, p, m, v)
/// with the default Costs (F=1, B=2, BI=BW=1, no communication time):
///   GPipe, OneFOneB: (p-1)/(m+p-1)
///   Interleaved:     1 - v*m / (v*max(m,p) + min(m,p) - 1)
///                    ((p-1)/(v*m+p-1) for m >= p)
///   ZeroBubbleH1:    1 - 3m / max(3m+p-1, 2m+2p-1)
///                    ((p-1)/(3m+p-1) for m >= p)
/// Returns -1 for invalid parameters.
double unitCostBubbleFraction(ScheduleKind kind, int numRanks,
                              int numMicrobatches, int virtualStages);

} // namespace smp::schedule

#endif // SMP_SCHEDULE_PIPELINESCHEDULE_H
