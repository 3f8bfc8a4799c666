//===- Lowering.h - One rank's program from a function (internal) -*- C++
//-*-===//
//
// The artifact writer's pieces, shared by its files:
//   Lowering.cpp             arguments, ops and the memory plan of a program
//   InstructionEncoding.cpp  an op -> an instruction (attributes, collectives,
//                            the schema check)
//   WeightLayout.cpp         tensor-parallel slices and layout metadata
//   RankProgram.cpp          the functions to lower; per-rank programs
//   PlanReport.cpp           plan.txt
//   ArtifactWriter.cpp       the manifest and the files
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_TARGET_ARTIFACT_LOWERING_H
#define SMP_LIB_TARGET_ARTIFACT_LOWERING_H

#include "artifact.pb.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/BaseTypes.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Target/Artifact/ArtifactWriter.h"
#include "smp/Target/Artifact/DeviceGrid.h"
#include "smp/Target/Artifact/MemoryPlan.h"
#include "smp/base/DType.h"
#include "smp/base/Layout.h"
#include "smp/base/OpSchema.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace smp::writer {

namespace pb = smp::artifact;
using namespace mlir;

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
/// A view's offset in its root's storage is a multiple of this, the
/// arena's alignment (planMemory's), which kernels' vector loads rely on.
constexpr uint64_t kViewAlignment = 64;
constexpr uint64_t kWeightAlignment = 64;

inline llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

//===--- InstructionEncoding.cpp ------------------------------------------===//

/// The op's name in messages and instructions: its NameLoc, else its kind.
std::string valueName(Operation *op);
/// Little-endian bytes of a constant, one element at a time.
std::string elementsToBytes(DenseElementsAttr attr, size_t elementBytes);
/// Converts an op's attributes to artifact attributes.
llvm::Error convertAttrs(Operation *op, pb::Instruction &inst);
/// Checks an instruction against the runtime's op schema (OpSchema.def).
llvm::Error checkSchema(const pb::Instruction &inst);

/// The device arena at its most bytes live: the instant (an instruction
/// index; -1 before the first), that instruction, and what is live then by
/// role, with the largest of the step's own values (name, bytes, the
/// instructions that make it and last read it).
struct ArenaPeak {
  static constexpr size_t kLargest = 5;
  int64_t instruction = -1;
  std::string op, loc;
  uint64_t liveBytes = 0, parameters = 0, optimizerState = 0, inputs = 0,
           constants = 0, stepValues = 0;
  struct Value {
    std::string name;
    uint64_t bytes;
    int64_t made, lastRead;
  };
  std::vector<Value> largest;
};
/// `ranges` are the arena's roots' live ranges over the function's ops
/// (`firstInstruction`: each op's first instruction in `program`), `rootIds`
/// their buffers, `plan` their memory plan (whose peak this describes; the
/// bytes by role are the plan's aligned bytes).
ArenaPeak arenaPeak(const pb::RankProgram &program,
                    const std::vector<int64_t> &firstInstruction,
                    const std::vector<unsigned> &rootIds,
                    const std::vector<LiveRange> &ranges,
                    const MemoryPlan &plan);

/// One rank's program: every value gets a buffer in a single arena, every
/// smp op (but reshape and tp_copy, which alias their input) becomes an
/// instruction, parameters and constants become weight references into the
/// rank's weights file, and a first-fit plan over live ranges places the
/// buffers.
class Lowering {
public:
  /// `tpRank` of `tpSize`: which slice of tensor-parallel parameters this
  /// rank holds; `dpSize`: the data-parallel ranks a ZeRO-3 parameter's
  /// chunks are for.
  Lowering(func::FuncOp func, WeightSource &weights, int64_t tpRank = 0,
           int64_t tpSize = 1, int64_t dpSize = 1)
      : func(func), weights(weights), tpRank(tpRank), tpSize(tpSize),
        dpSize(dpSize) {}

  llvm::Error run();

  pb::RankProgram program;
  ArenaPeak peak; // the device arena's (planBuffers)
  std::string weightsBytes;
  pb::Manifest manifestIO; // inputs/outputs specs only
  /// False: plan memory only, reading no parameter bytes.
  bool withWeights = true;
  /// The ops of the evaluation's forward (evalOps): their instructions
  /// are marked `forward`. Null: none marked (a forward-only artifact).
  const llvm::DenseSet<Operation *> *forward = nullptr;
  /// The ops of the forward that only evaluations run (evalOps): their
  /// instructions are marked `eval_only` too.
  const llvm::DenseSet<Operation *> *evalOnly = nullptr;

private:
  // Lowering.cpp
  llvm::Error checkArgumentNames();
  llvm::Error lowerArgument(BlockArgument arg);
  llvm::Error lowerInput(BlockArgument arg, StringAttr name);
  llvm::Error lowerState(BlockArgument arg, StringAttr name);
  llvm::Error lowerParam(BlockArgument arg, StringAttr name);
  void bindArgument(unsigned id, StringAttr name, const char *role);
  llvm::Error lowerOp(Operation &op, int64_t &index);
  llvm::Error lowerReturn(func::ReturnOp ret);
  llvm::Error lowerConstant(Operation &op);
  llvm::Error lowerTpRank(Operation &op);
  llvm::Error lowerAlias(Operation &op, int64_t index);
  /// A slice marked smp.view whose result is a contiguous part of its
  /// input's arena storage, at an aligned offset: that offset in bytes.
  std::optional<uint64_t> viewOffset(SliceOp slice);
  llvm::Error lowerView(SliceOp slice, uint64_t offset, int64_t index);
  /// After a batch norm of the evaluation's forward: the instruction only
  /// an evaluation runs, normalising with the running statistics.
  void addEvalBatchNorm(Operation &op);
  void planBuffers();
  /// An op that may write its output over an input (`inPlace`): the output
  /// takes the input's storage where nothing reads the input after it.
  void recordInPlace(Operation &op, const pb::Instruction &inst, int64_t index);
  void shareInPlace();
  // SideWork.cpp
  /// Records `op` (lowered at `index`) if its instruction runs on the
  /// communication lane (smp::base::opLane).
  void recordSideWork(Operation &op, int64_t index);
  /// The windows (`holds`) over which side work's operands could stay
  /// live: until the next work of its lane or the first use of its results
  /// (see SideWork.cpp).
  void holdSideOperands();
  /// `plan` of the device arena's roots `rootIds` over `ranges`, or the
  /// plan with the windows that fit the step's most bytes live, where it is
  /// no larger (then `ranges` and `live` hold the windows).
  MemoryPlan planWithHolds(const std::vector<unsigned> &rootIds,
                           std::vector<LiveRange> &ranges, MemoryPlan plan);
  llvm::Expected<unsigned> newBuffer(Value v, const std::string &name,
                                     int64_t start);
  void use(Value v, int64_t at);
  void addWeight(unsigned buffer, const std::string &bytes);
  /// Writes an updated parameter or state in place: its producer must be
  /// the last user of the argument it replaces.
  llvm::Error aliasUpdate(Value v, llvm::StringRef name);

  // InstructionEncoding.cpp
  llvm::Error lowerAllReduce(Operation &op, int64_t index);
  llvm::Error lowerShardCollective(Operation &op, int64_t index);
  llvm::Error lowerInstruction(Operation &op, int64_t index);

  // WeightLayout.cpp
  /// This rank's part (at tpRank of tpSize) of the global tensor of a
  /// value of type shape `local` and layout `layout` (null: whole).
  smp::base::Layout rankLayout(ArrayRef<int64_t> local,
                               LayoutAttr layout) const;
  /// Records how the buffer holds part of a global tensor (checkpoints).
  void setLayout(pb::Buffer &buffer, LayoutAttr layout) const;
  /// This rank's slice of the bytes of a tensor-parallel parameter of
  /// global type `full` split by `layout`.
  std::string tpSlice(const std::string &bytes, RankedTensorType full,
                      LayoutAttr layout) const;

  func::FuncOp func;
  WeightSource &weights;
  int64_t tpRank, tpSize, dpSize;

  llvm::DenseMap<Value, unsigned> bufferOf;
  std::vector<Value> valueOf; // buffer -> the value it was made for
  llvm::StringMap<unsigned> argByName;
  llvm::DenseSet<unsigned> argBuffers; // the buffers in argByName
  std::vector<unsigned> root;  // buffer -> storage root (reshape aliases)
  /// root -> the buffers it is the root of (re-rooting touches only those).
  std::vector<SmallVector<unsigned, 1>> members;
  std::vector<uint8_t> pool;   // buffer -> 0 device arena, 1 host pool
  /// buffer -> its bytes' offset in its root's storage (views; else 0).
  std::vector<uint64_t> viewOffsetOf;
  /// The ops lowered as aliases or views (no instruction of their own).
  llvm::DenseSet<Operation *> aliases;
  std::vector<LiveRange> live; // per buffer; meaningful for roots
  /// The live ranges' instants (ops that make instructions or aliases) ->
  /// the first instruction at or after each.
  std::vector<int64_t> firstInstruction;
  struct InPlace {
    unsigned output, input;
    int64_t index;
  };
  std::vector<InPlace> inPlace;
  /// Each op that made an instruction or an alias -> its instant.
  llvm::DenseMap<Operation *, int64_t> instantOf;
  struct SideWork {
    int64_t index;
    Operation *op;
  };
  /// The communication lane's ops, in program order.
  std::vector<SideWork> sideWork;
  struct Hold {
    unsigned root;
    int64_t end;
  };
  std::vector<Hold> holds;     // in program order
  int64_t instants = 0;        // the instants of the function
  int64_t constantBytes = 0;   // written out by constants so far
};

//===--- RankProgram.cpp ---------------------------------------------------===//

/// The functions to lower, one per pipeline rank in rank order; without
/// any, the single step (@train_step, else @main, else the first).
llvm::Expected<SmallVector<func::FuncOp>> rankFunctions(ModuleOp module);
/// Rank `rank`'s copy of its stage's program: the grid coordinates, the
/// batch share, collectives bound to their rank groups and pipeline peers
/// to world ranks.
llvm::Expected<pb::RankProgram> rankProgram(const pb::RankProgram &stage,
                                            const DeviceGrid &grid,
                                            int64_t rank);

//===--- ForwardSubset.cpp
//-------------------------------------------------===//

/// For each pipeline stage's function (in order; or the one step), the ops
/// an evaluation runs (`forward`: those the step's "loss" output and its
/// accuracy's counts are computed from, across the stages through the
/// sends and receives), and those of them that no training output needs
/// (`evalOnly`: the accuracy's).
struct EvalSubsets {
  std::vector<llvm::DenseSet<Operation *>> forward, evalOnly;
};
EvalSubsets evalOps(ArrayRef<func::FuncOp> stages);
/// The parameters of `f` holding training batch norm `bn`'s running mean
/// and variance (smp-build-gradients names them on it), or why an
/// evaluation cannot normalise with them ("" when it can; null `mean` and
/// `var` when `bn` normalises with them already: --bn-stats running).
std::string runningStatsOf(func::FuncOp f, BatchNormOp bn, BlockArgument &mean,
                           BlockArgument &var);
/// Why a training step's forward does not evaluate the model as PyTorch's
/// model.eval() does (a batch norm's running statistics out of reach),
/// what smprun --eval-data refuses with; "" when it does.
std::string evaluationRefusal(ArrayRef<func::FuncOp> stages);

//===--- PlanReport.cpp ----------------------------------------------------===//

/// plan.txt: the grid, the parallelism in words, per-stage memory and
/// instruction counts; `funcs` the stages' functions, `evalRefusal` the
/// manifest's (evaluationRefusal).
std::string planReport(ModuleOp module, ArrayRef<func::FuncOp> funcs,
                       const std::vector<std::unique_ptr<Lowering>> &stages,
                       const ArtifactOptions &options, const DeviceGrid &grid,
                       llvm::StringRef evalRefusal);

//===--- PlanDetails.cpp ---------------------------------------------------===//

/// What plan.txt's training sections and plan.json report.
struct PlanDetails {
  const pb::Manifest *manifest = nullptr;
  const ArtifactOptions *options = nullptr;
  DeviceGrid grid;
  struct Stage {
    std::string startsAt; // the ONNX node the stage starts at ("": inputs)
    std::string recompute = "none";
    bool offload = false;
    uint64_t arenaBytes = 0, hostBytes = 0, weightsBytes = 0;
    ArenaPeak peak;
  };
  std::vector<Stage> stages;
};

PlanDetails collectPlanDetails(const SmallVector<func::FuncOp> &funcs,
                               const std::vector<std::unique_ptr<Lowering>> &stages,
                               const ArtifactOptions &options,
                               const DeviceGrid &grid,
                               const pb::Manifest &manifest);

/// plan.txt's lines: the reproducing command, inputs, loss, optimizer,
/// precision, degrees, stages, prediction and the rank map.
std::string planDetailsText(const PlanDetails &details);

/// plan.json: the same under "artifact", merged into the planner's report
/// (options.plannerJson) when there is one.
std::string planJson(const PlanDetails &details);

} // namespace smp::writer

#endif // SMP_LIB_TARGET_ARTIFACT_LOWERING_H
