//===- Planner.h - Choose dp x tp x pp, micro-batches, schedule -*- C++ -*-===//
//
// The planner sees the model as the per-sample costs of the forward ops on
// the parameters' path (a ModelProfile per tensor-parallel degree, from the
// IR that smp-tensor-parallel writes for that degree), cuts them into
// pipeline stages by dynamic programming under each stage's memory cap, and
// prices every plan of the space with the cost model: the pipeline's
// makespan under its schedule, tensor-parallel and pipeline messages, the
// data-parallel gradient reduction and the optimizer step. It returns the
// fastest plan that fits, the runners-up, and, when nothing fits, what
// would.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_PLANNER_PLANNER_H
#define SMP_PLANNER_PLANNER_H

#include "smp/Analysis/Cost/DeviceSpec.h"
#include "smp/Pipelines/PipelineDefaults.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
}

namespace smp {

/// One forward op on the parameters' path, per sample of the batch.
struct OpProfile {
  double flops = 0;           // per sample
  double batchBytes = 0;      // bytes moved that grow with the batch, per sample
  double fixedBytes = 0;      // bytes that do not (weights read)
  bool matrix = false;
  unsigned bits = 32;
  double savedBytes = 0;      // activations kept for the backward, per sample
  double paramBytes = 0;      // parameters (this rank's slice) first used here
  std::vector<unsigned> params; // every parameter read (ModelProfile::paramSizes)
  /// Moved over tp in the forward, per sample (the whole buffer: the
  /// all-reduced tensor, or under sequence parallelism the reduce-scattered
  /// input or the gathered result).
  double tpCommBytes = 0;
  /// 0: all_reduce (its gradient is free, a tp_copy's all-reduce pays the
  /// backward); 1: reduce_scatter (the backward all-gathers); 2: all_gather
  /// (the backward reduce-scatters and all-gathers the rows again).
  int tpCollective = 0;
  bool cutAfter = false;      // a pipeline cut may follow this op
  double boundaryBytes = 0;   // per sample, what crosses a cut after this op
  std::string name;           // node name, for reports
};

struct ModelProfile {
  int64_t tp = 1;
  /// Profiled with sequence parallelism between the tp regions.
  bool sequenceParallel = false;
  std::vector<OpProfile> ops;
  double totalParamBytes = 0;  // the whole model, f32 (one tp rank's slice)
  double maxTempBytes = 0;     // the largest single result, per sample
  /// Per sample: the step's peak of live activation-sized temporaries beyond
  /// the saved activations (the backward's working set), from a liveness
  /// sweep over the built training step; 0 when unknown.
  double transientBytes = 0;
  double modelFlopsPerSample = 0; // forward, whole model (all tp ranks)

  /// The training step of one sample as live ranges over its ops (empty
  /// when the step could not be built): every value but the parameters, the
  /// optimizer state and the updates written back into them.
  struct StepValue {
    int32_t def = 0, last = 0; // ops of the step, inclusive
    int32_t anchor = 0;        // the op of `ops` whose stage holds it
    double fixed = 0;          // bytes that do not grow with the batch
    double perSample = 0;      // bytes per sample
    bool gradient = false;     // a parameter's gradient (or a part of it)
    bool saved = false;        // kept by the forward for the backward
    /// Computed from parameters (and constants) alone: a transpose or a
    /// cast of a weight. ZeRO-3 redoes it on each gathered copy instead.
    bool weightOnly = false;
    /// A narrowing cast of a parameter (mixed precision's low-precision
    /// copy): ZeRO-3 casts the rank's chunk instead, before the gather.
    bool narrowedParam = false;
    /// Made by a forward op (not the backward's, nor a recomputed copy).
    bool forward = false;
    /// Elements of 16 bits (bf16, f16): a gradient so is summed over
    /// micro-batches in f32, twice its bytes.
    bool halfWidth = false;
    /// Uses by ops anchored elsewhere (op, its anchor): another stage's.
    llvm::SmallVector<std::pair<int32_t, int32_t>, 1> foreignUses;
  };
  /// Bytes (f32) of each parameter, by the step's argument number.
  std::vector<double> paramSizes;
  /// ZeRO-3's whole copies of the parameters (smp-shard-parameters): one
  /// per parameter for the forward's uses and one for the backward's (a
  /// recomputed forward's are the backward's), live from the group's first
  /// use to its last, of the bytes the uses read (the parameter, or its
  /// weight-only transposes and low-precision casts). In the order of their
  /// first uses, the order smp-shard-parameters' prefetch counts in.
  struct ParamCopy {
    int32_t first = 0, last = 0, anchor = 0;
    double bytes = 0;
  };
  /// The step built one way: its values and ZeRO-3's copies.
  struct StepMemory {
    std::vector<StepValue> values;
    std::vector<ParamCopy> copies;
  };
  /// The step as built without and with full recomputation (the backward's
  /// copies of each segment's forward; saved: the checkpoints), and without
  /// and with activation offloading (the offloaded activations are in host
  /// memory between their smp.offload and smp.prefetch: no step value);
  /// `values` empty when that step was not built.
  StepMemory steps[2][2];
  const StepMemory &step(bool recompute, bool offload) const {
    return steps[recompute][offload];
  }
  int32_t stepLength = 0;
};

/// The most bytes live at once in the step (`values`: one of a profile's
/// steps) of a stage holding `ops` [begin, end)
/// for one micro-batch of `b` samples (values anchored there, and those of
/// other stages it reads),
/// without the parameters and optimizer state, split by what is live at
/// that moment: gradients, values the forward saved for the backward, and
/// the rest (the working set). The gradients are counted as `gradients`
/// says.
enum class GradientLifetime {
  /// Gradient accumulation: the running sums are the caller's to count
  /// whole; an f32 gradient this backward makes is live with its new sum at
  /// the add that follows it (two of its size for one op); a 16-bit one is
  /// summed into its f32 sum in place by an add_multi of up to
  /// kAccumulationGroupBytes of sums (smp-multi-tensor), live from its make
  /// to its group's; with `bucketBytes` the sums are packed into buckets of
  /// that size for their collective after the add of each bucket's last
  /// (one op's copy).
  Accumulated,
  /// Their own lifetimes in the profiled step (made as the backward goes,
  /// kept to the end).
  Kept,
  /// Whole ones kept until their bucket of `bucketBytes` is full, then
  /// packed and reduce-scattered (ZeRO-2); each bucket's chunk (a
  /// `chunkFraction` of it) lives from its scatter to the end of the step.
  Scattered,
};
struct StepPeak {
  double total = 0, gradients = 0, saved = 0, other = 0;
  /// ZeRO-3's gathered parameter copies.
  double gathered = 0;
};
/// ZeRO-3's parameters in a step: the copies it gathers, and the fraction
/// of each parameter a rank keeps (1 / the ranks it is sharded over).
struct ShardedParameters {
  const std::vector<ModelProfile::ParamCopy> *copies = nullptr;
  double fraction = 1;
  /// Each copy gathered this many copies ahead of its first use (in the
  /// order of the first uses).
  int64_t prefetch = 0;
};
/// How stepPeak counts: the gradients (`gradients`, ZeRO-2's buckets of
/// `bucketBytes` and the chunk a rank keeps, `chunkFraction`), ZeRO-3's
/// parameters (`sharded`: the weight-only values give way to the gathered
/// copies, but for a parameter's low-precision cast: the compiler casts the
/// rank's chunk before the gather, one chunk-sized cast kept for every copy,
/// ShardParameters.cpp, so it counts at `sharded->fraction` of its size),
/// and with `sharedCasts` (gradient accumulation over several
/// micro-batches) the forward's low-precision copies of the weights live
/// through the step: one cast of each weight serves every micro-batch's
/// forward (CSE'd, and made at once by smp-multi-tensor).
struct StepPeakOptions {
  GradientLifetime gradients = GradientLifetime::Kept;
  double bucketBytes = 0;
  const ShardedParameters *sharded = nullptr;
  double chunkFraction = 0;
  bool sharedCasts = false;
};
StepPeak stepPeak(const std::vector<ModelProfile::StepValue> &values,
                  size_t begin, size_t end, double b,
                  const StepPeakOptions &options);

/// What the forward of ops [begin, end) keeps for the backward of one
/// micro-batch of `b` samples, in bytes.
double stageSavedBytes(const std::vector<ModelProfile::StepValue> &values,
                       size_t begin, size_t end, double b);

/// Profiles `module`'s @main (imported at one sample per batch) for tensor-
/// parallel degree `tp` (running smp-tensor-parallel on a copy; the logits
/// of a cross-entropy loss named by `vocabOutput` split by vocabulary).
/// With `fuse`, ops are costed as a fusing backend runs them (elementwise
/// chains in one pass, layout changes absorbed by matrix products); with
/// `sequenceParallel` (tp > 1), the regions' outside is split by tokens.
/// `precision` (fp32, bf16, fp16) is applied after the split, as the
/// compiler does: `module` itself is the model as imported, in f32. With
/// `offload`, the steps with activation offloading are built too; with
/// `masterWeights`, parameters stored in bf16/fp16 are f32 masters
/// (smp-master-weights), counted at 4 bytes. The profiled training step
/// (what each op saves for the backward, the liveness memory model) is
/// built with a cross-entropy on `vocabOutput`, else with `loss` (an
/// `smpc --loss` spec: mse:y:target, ...), else not at all.
llvm::Expected<ModelProfile>
profileModel(mlir::ModuleOp module, int64_t tp, const std::string &vocabOutput,
             bool fuse = false, bool sequenceParallel = false,
             const std::string &precision = "fp32", bool offload = false,
             bool masterWeights = false, const std::string &loss = "");

struct PlanRequest {
  int64_t devices = 1;
  int64_t globalBatch = 1;       // samples per step
  DeviceSpec device;
  std::string optimizer = "adamw"; // sgd (no state), sgd-momentum, adam(w)
  /// The loss (smpc --loss); a cross-entropy's output is choosePlan's
  /// `vocabOutput`, any other loss builds the profiled step with this.
  std::string loss;
  /// The training precision (fp32, bf16, fp16: smp-mixed-precision).
  std::string precision = "fp32";
  /// fp32 master copies of parameters stored in bf16/fp16
  /// (smp-master-weights).
  bool masterWeights = false;
  /// Pinned choices (unset: searched). `microbatches`: the micro-batches
  /// per step (smpc --microbatches; one for a model whose batch norms
  /// normalise over the batch).
  std::optional<int64_t> dp, tp, pp, microbatchSize, microbatches,
      virtualStages;
  std::optional<std::string> schedule;
  /// The ZeRO stage (0 none, 1 optimizer state, 2 and gradients, 3 and
  /// parameters).
  std::optional<int> zeroStage;
  /// Hybrid sharding: the ZeRO stage shards over groups of this many dp
  /// ranks (unset: searched among the divisors of dp).
  std::optional<int64_t> shardedDp;
  /// ZeRO-3: each parameter gather this many gathers ahead of its first use
  /// (smp-shard-parameters' prefetch: smpc --gather-prefetch, by default
  /// kDefaultGatherPrefetch for the CUDA target): the copies live from then.
  int64_t gatherPrefetch = 0;
  /// The gradient buckets' bytes (smpc --bucket-mb; 25 MiB): ZeRO-2's
  /// buckets in flight, the packed copies, the collectives beside the
  /// backward.
  double bucketBytes = 25.0 * 1024 * 1024;
  /// Sequence parallelism under tp (unset: searched for every tp > 1).
  std::optional<bool> sequenceParallel;
  std::optional<bool> recompute, offload;
  /// Fraction of device memory a plan may use (the rest: runtime, fragments).
  double memoryFraction = 0.9;
  size_t runnersUp = 5;
  /// What the search minimises: the step time (then the memory), or with
  /// this set the peak memory per device (then the step time).
  bool minimizeMemory = false;
};

/// What one device of a pipeline stage holds at its predicted peak, in
/// bytes (the parts sum to the stage's memory).
struct MemoryBreakdown {
  double parameters = 0, gradients = 0, optimizerState = 0, activations = 0,
         workspace = 0;
  double total() const {
    return parameters + gradients + optimizerState + activations + workspace;
  }
};

struct Plan {
  int64_t dp = 1, tp = 1, pp = 1, microbatchSize = 1, microbatches = 1,
          virtualStages = 1;
  std::string schedule = "1f1b";
  /// ZeRO stage: 0 none, 1 optimizer state sharded over dp, 2 and the
  /// gradients (reduce-scattered as the backward makes them), 3 and the
  /// parameters (gathered before each use).
  int zeroStage = 0;
  /// Hybrid sharding: ZeRO shards over groups of this many adjacent dp
  /// ranks and replicates across the dp / shardedDp groups (0: one group).
  int64_t shardedDp = 0;
  /// The ranks a ZeRO chunk is split over.
  int64_t shardRanks() const { return shardedDp > 0 ? shardedDp : dp; }
  /// Megatron's sequence parallelism between the tp regions.
  bool sequenceParallel = false;
  bool recompute = false, offload = false;
  /// Which stages recompute their activations (all when `recompute` and the
  /// planner did not choose per stage).
  std::vector<bool> stageRecompute;
  /// Predicted. `dataParallelSeconds`: what the data-parallel collectives
  /// add to the step (on a device that overlaps communication, the part
  /// that outlasts the compute beside it); `dataParallelCommSeconds`: all
  /// of their time.
  double stepSeconds = 0, pipelineSeconds = 0, dataParallelSeconds = 0,
         dataParallelCommSeconds = 0, optimizerSeconds = 0, bubble = 0;
  double samplesPerSecond = 0, mfu = 0;
  std::vector<double> stageSeconds;  // forward + backward of one micro-batch
  std::vector<double> stageMemory;   // bytes per rank of each stage
  std::vector<MemoryBreakdown> stageBreakdown; // the same, by kind
  double peakMemory = 0;
  std::vector<std::string> cuts;     // node names stages 1.. start at
  std::vector<size_t> stageEnds;     // the profile's last op of each stage
  /// How stageMemory was found: "liveness" (each stage's step swept for its
  /// live values) or "estimate" (the search's formula: recomputing or
  /// offloading stages, or no step to sweep).
  std::string memoryModel = "estimate";
  std::string summary() const;       // "dp=2 tp=4 pp=8 mb=1x96 1f1b ..."
};

struct PlanResult {
  Plan best;
  std::vector<Plan> runnersUp;
  size_t plansPriced = 0, plansFitting = 0;
  double plannerSeconds = 0;
};

/// Chooses the fastest plan that fits. `module` holds @main at one sample
/// per batch. Fails with what would make a plan fit when none does.
llvm::Expected<PlanResult> choosePlan(mlir::ModuleOp module,
                                      const PlanRequest &request,
                                      const std::string &vocabOutput);

/// The plan, its prediction and the runners-up as a text table.
std::string formatPlanResult(const PlanResult &result,
                             const PlanRequest &request);

/// The chosen plan as an SVG: its pipeline timeline (the schedule
/// simulated with the slowest stage's times) and each stage's memory per
/// device against the device's.
std::string planReportSvg(const PlanResult &result, const PlanRequest &req);

/// The same as JSON (for the report written beside an artifact).
std::string planResultJson(const PlanResult &result,
                           const PlanRequest &request);

} // namespace smp

#endif // SMP_PLANNER_PLANNER_H
