//===- ModelProfile.cpp - Per-sample costs of the forward's ops -----------===//
//
// @main is imported at one sample per batch, so every activation is one
// sample's; weights are the parameters (as stored: f32 master copies of an
// fp32 export, bf16 ones of a bf16 export) and the ops on
// them only (weight transposes). Ops on the parameters' path are profiled in
// program order, as smp-pipeline-split sees them: a cut may follow an op
// where the fewest values cross.
//
//===----------------------------------------------------------------------===//

#include "smp/Planner/Planner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "smp/Analysis/Cost/OpCosts.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/PathOps.h"
#include "smp/Pipelines/Pipelines.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>
#include <map>

using namespace mlir;

namespace smp {
namespace {

double bytesOf(Value v) { return tensorBytes(v); }

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

constexpr llvm::StringLiteral kAnchorAttr = "planner_anchor"; // not an smp attribute: the dialect verifies those

/// The path op whose stage holds each forward op's results (the first
/// `numForward` ops of `step`, by index): path ops their own position,
/// other ops the next path op's, weight-only ops their first user's.
std::vector<int64_t>
forwardAnchors(func::FuncOp step, size_t numForward,
               const llvm::DenseMap<Operation *, size_t> &position,
               int64_t lastPath) {
  std::vector<Operation *> forward;
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (forward.size() == numForward)
      break;
    forward.push_back(&op);
  }
  llvm::DenseMap<Operation *, int64_t> anchor;
  std::vector<int64_t> byIndex(forward.size(), lastPath);
  int64_t next = lastPath;
  for (size_t i = forward.size(); i-- > 0;) {
    Operation *op = forward[i];
    auto it = position.find(op);
    int64_t a = next;
    if (it != position.end()) {
      next = a = static_cast<int64_t>(it->second);
    } else {
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers())
          if (auto u = anchor.find(user); u != anchor.end())
            a = std::min(a, u->second);
    }
    anchor[op] = byIndex[i] = a;
  }
  return byIndex;
}

/// Tags the forward ops of `step` (a step built from the same @main: its
/// first ops are @main's, in order) with their anchors.
void tagForwardAnchors(func::FuncOp step, const std::vector<int64_t> &anchors) {
  Builder b(step.getContext());
  size_t i = 0;
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (i == anchors.size())
      break;
    op.setAttr(kAnchorAttr, b.getI64IntegerAttr(anchors[i++]));
  }
}

/// ZeRO-3's gathered copies in `step` (see ModelProfile::ParamCopy), the
/// weight-only ops of `index` in `weightOnly`: as smp-shard-parameters
/// groups the uses of each parameter, by forward (`isForward`) or not.
template <typename IsForward>
std::vector<ModelProfile::ParamCopy>
parameterCopies(func::FuncOp step, const llvm::DenseMap<Operation *, int32_t> &index,
                const std::vector<int32_t> &anchor, IsForward isForward,
                llvm::DenseSet<Operation *> &weightOnly) {
  Block &body = step.getBody().front();
  SmallVector<Value> params;
  for (BlockArgument arg : body.getArguments())
    if (step.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr))
      params.push_back(arg);
  llvm::DenseMap<Value, Value> paramOf; // value -> parameter argument
  for (Value p : params)
    paramOf[p] = p;
  for (auto [op, p] : singleWeightOps(body, params)) {
    weightOnly.insert(op);
    paramOf[op->getResult(0)] = p;
  }
  // (parameter, forward) -> the copy, and the values it is read as.
  std::map<std::pair<unsigned, bool>, ModelProfile::ParamCopy> copies;
  std::map<std::pair<unsigned, bool>, llvm::DenseSet<Value>> read;
  for (auto &[value, param] : paramOf)
    for (Operation *user : value.getUsers()) {
      auto it = index.find(user);
      if (it == index.end() || weightOnly.count(user) ||
          isa<SgdUpdateOp, AdamUpdateOp>(user))
        continue;
      std::pair<unsigned, bool> key{
          cast<BlockArgument>(param).getArgNumber(), isForward(user)};
      auto [c, fresh] = copies.try_emplace(key);
      if (fresh || it->second < c->second.first) {
        c->second.first = it->second;
        c->second.anchor = anchor[it->second];
      }
      c->second.last = std::max(fresh ? it->second : c->second.last,
                                it->second);
      if (read[key].insert(value).second)
        c->second.bytes += bytesOf(value);
    }
  std::vector<ModelProfile::ParamCopy> out;
  for (auto &[key, c] : copies)
    out.push_back(c);
  llvm::stable_sort(
      out, [](const auto &x, const auto &y) { return x.first < y.first; });
  return out;
}

/// A sum over the batch (axis 0): weight and bias gradients.
static bool reducesBatch(Operation *op) {
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
  if (!isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op) || !axes)
    return false;
  // ONNX's negative axes count from the end.
  int64_t rank = cast<ShapedType>(op->getOperand(0).getType()).getRank();
  return llvm::any_of(axes.asArrayRef(),
                      [&](int64_t a) { return a == 0 || a == -rank; });
}

/// An op whose result keeps the rows of its operands: a view, an elementwise
/// op or a collective (the sequence-parallel backward's all-gathered
/// [S, H] rows are no weight even where a parameter is [S, H], as GPT's
/// position table is at one sample).
static bool keepsRows(Operation *op) {
  return isa<ViewLikeOpInterface, CastOp, TpCopyOp, shard::AllGatherOp,
             shard::AllReduceOp, shard::ReduceScatterOp>(op) ||
         op->hasTrait<OpTrait::Elementwise>() ||
         op->hasTrait<OpTrait::smp::BroadcastingElementwise>();
}

/// As the artifact writer shares storage (Lowering::shareInPlace): an op
/// whose result may take an operand's storage (inPlaceOperands: the loss
/// gradient over the logits), where nothing reads the operand after it,
/// gives its value no bytes of its own and keeps the operand alive to the
/// result's last use (GPT-2 124M bf16 at batch 16: 1.65 GB).
void shareInPlace(const llvm::DenseMap<Operation *, int32_t> &index,
                  const llvm::DenseMap<Value, size_t> &rootOf,
                  std::vector<ModelProfile::StepValue> &values) {
  for (auto [op, at] : index) {
    for (auto [result, input] : inPlaceOperands(op)) {
      if (isa_and_nonnull<ViewLikeOpInterface>(input.getDefiningOp()))
        continue;
      auto in = rootOf.find(input), out = rootOf.find(op->getResult(result));
      if (in == rootOf.end() || out == rootOf.end() ||
          in->second == out->second)
        continue;
      ModelProfile::StepValue &iv = values[in->second],
                              &ov = values[out->second];
      if (iv.last != at)
        continue;
      iv.last = std::max(iv.last, ov.last);
      iv.foreignUses.append(ov.foreignUses.begin(), ov.foreignUses.end());
      ov.fixed = ov.perSample = 0;
    }
  }
}

/// A parameter's own narrowing cast (not one of a transpose of it): what
/// smp-shard-parameters applies to the rank's chunk.
static bool isNarrowingParamCast(func::FuncOp step, Operation *op) {
  auto arg = isNarrowingCast(op) ? dyn_cast<BlockArgument>(op->getOperand(0))
                                 : nullptr;
  return arg && step.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr);
}

/// The types a parameter's gradient may have, which do not grow with the
/// batch: each parameter's and that of each value made from one parameter
/// alone without dropping any of it (a transpose, a cast, smp-pad-classes'
/// padded head; not a slice or a gather, which may be shaped like an
/// activation), their
/// transposes, and the same shapes in the half-precision types of mixed
/// precision (a weight's gradient made in bf16 by a product over the
/// batch's rows is typed like the weight's copy).
static llvm::DenseSet<Type> parameterTypes(func::FuncOp step) {
  llvm::DenseSet<Type> types;
  auto add = [&](Type type) {
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t)
      return;
    for (Type e : {t.getElementType(),
                   static_cast<Type>(BFloat16Type::get(t.getContext())),
                   static_cast<Type>(Float16Type::get(t.getContext()))}) {
      if (!isa<FloatType>(t.getElementType()) && e != t.getElementType())
        continue;
      types.insert(RankedTensorType::get(t.getShape(), e));
      if (t.getRank() == 2)
        types.insert(
            RankedTensorType::get({t.getDimSize(1), t.getDimSize(0)}, e));
    }
  };
  SmallVector<Value> params;
  for (BlockArgument arg : step.getBody().front().getArguments())
    if (step.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr)) {
      params.push_back(arg);
      add(arg.getType());
    }
  auto elements = [](Value v) {
    return cast<ShapedType>(v.getType()).getNumElements();
  };
  // Not a gather: an embedding's rows for constant positions (BERT's and
  // GPT's position tables read whole at the profile's one sample) are shaped
  // like the activations, [1, S, H].
  for (auto [op, param] : singleWeightOps(step.getBody().front(), params))
    if (isa<ShapedType>(op->getResult(0).getType()) && !isa<GatherOp>(op) &&
        elements(op->getResult(0)) >= elements(param))
      add(op->getResult(0).getType());
  return types;
}

/// The step's values as live ranges (the profile's memory timeline), on the
/// step as the compiler lowers it (canonicalized, CSE'd; forward ops carry
/// kAnchorAttr), and the peak of live activation-sized temporaries beyond
/// the saved activations (the backward's working set, per sample).
/// Parameters and optimizer state (the step's arguments, and the updates
/// written back into them) are left to the planner; reshapes alias their
/// operand. A value grows with the batch when it depends on the data and is
/// a forward value or not shaped like a parameter (or its transpose). Backward values are
/// anchored at the latest forward value they read, else their operands'.
double stepLiveness(func::FuncOp step, int64_t lastPath,
                    std::vector<ModelProfile::StepValue> &values,
                    std::vector<ModelProfile::ParamCopy> &copies,
                    int32_t &length) {
  Block &body = step.getBody().front();
  llvm::DenseSet<Value> data;
  for (BlockArgument arg : body.getArguments())
    if (step.getArgAttr(arg.getArgNumber(), SmpDialect::kInputAttr))
      data.insert(arg);
  std::vector<Operation *> ops;
  llvm::DenseMap<Operation *, int32_t> index;
  for (Operation &op : body.without_terminator()) {
    index[&op] = static_cast<int32_t>(ops.size());
    ops.push_back(&op);
  }
  int32_t end = static_cast<int32_t>(ops.size());
  // Forward ops: @main's (tagged); recomputed copies are backward. An
  // activation's copy to host (offloading) ends its forward life.
  auto isForward = [&](Operation *op) {
    return (op->hasAttr(kAnchorAttr) && !op->hasAttr("smp.recomputed")) ||
           isa<OffloadOp>(op);
  };
  std::vector<int32_t> anchor(ops.size(), -1);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (auto a = ops[i]->getAttrOfType<IntegerAttr>(kAnchorAttr);
        a && isForward(ops[i])) {
      anchor[i] = static_cast<int32_t>(a.getInt());
      continue;
    }
    int32_t fromForward = -1, fromBackward = -1;
    for (Value v : ops[i]->getOperands()) {
      Operation *def = v.getDefiningOp();
      auto it = def ? index.find(def) : index.end();
      if (it == index.end())
        continue;
      if (isForward(def))
        fromForward = std::max(fromForward, anchor[it->second]);
      else if (fromBackward < 0)
        fromBackward = anchor[it->second];
    }
    anchor[i] = fromForward >= 0    ? fromForward
                : fromBackward >= 0 ? fromBackward
                                    : static_cast<int32_t>(lastPath);
  }
  llvm::DenseSet<Operation *> weightOnly;
  copies = parameterCopies(step, index, anchor, isForward, weightOnly);
  llvm::DenseSet<Type> paramTypes = parameterTypes(step);
  // Values: views (reshapes, tp copies) alias their source's root.
  llvm::DenseMap<Value, size_t> rootOf; // value -> index into `values`
  llvm::DenseSet<Value> updates;        // written back into an argument
  Operation *ret = body.getTerminator();
  for (unsigned k = 0; k < ret->getNumOperands(); ++k)
    if (step.getResultAttr(k, SmpDialect::kUpdateAttr))
      updates.insert(ret->getOperand(k));
  values.clear();
  // What grows with the batch: the data inputs and what is computed from
  // them, but for sums over the batch (axis 0: weight and bias gradients)
  // and parameter-shaped results of the backward (a forward one is an
  // activation: sequence parallelism's rows [S/tp, H] have a row-parallel
  // [H/tp, H] weight's shape when S = H).
  llvm::DenseSet<Value> grows;
  for (Value v : data)
    if (cast<ShapedType>(v.getType()).getNumElements() > 1)
      grows.insert(v);
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation *op = ops[i];
    bool fromData = llvm::any_of(op->getOperands(),
                                 [&](Value v) { return data.count(v); });
    bool fromGrowing = llvm::any_of(op->getOperands(),
                                    [&](Value v) { return grows.count(v); });
    for (Value r : op->getResults()) {
      if (fromData)
        data.insert(r);
      // A forward result is an activation even in a parameter's shape, and
      // so is what an op that keeps every row makes of one.
      if (fromGrowing && !reducesBatch(op) &&
          (isForward(op) || keepsRows(op) || !paramTypes.count(r.getType())) &&
          isa<ShapedType>(r.getType()) &&
          cast<ShapedType>(r.getType()).getNumElements() > 1)
        grows.insert(r);
      if (isa<OffloadOp>(op))
        continue; // in host memory until its smp.prefetch
      if (auto view = dyn_cast<ViewLikeOpInterface>(op);
          view && rootOf.count(view.getViewSource())) {
        rootOf[r] = rootOf[view.getViewSource()];
        continue;
      }
      // Optimizer results are updates or unread (no momentum buffer); as
      // "gradients" they ended the backward after the optimizer (stepPeak).
      if (updates.count(r) || isa<SgdUpdateOp, AdamUpdateOp>(op) ||
          !isa<ShapedType>(r.getType()))
        continue;
      ModelProfile::StepValue v;
      v.def = v.last = static_cast<int32_t>(i);
      v.anchor = anchor[i];
      double bytes = bytesOf(r);
      bool perSample = grows.count(r);
      (perSample ? v.perSample : v.fixed) = bytes;
      v.gradient = fromData && !perSample && !isForward(op);
      v.halfWidth =
          cast<ShapedType>(r.getType()).getElementTypeBitWidth() == 16;
      v.weightOnly = weightOnly.count(op) != 0;
      v.narrowedParam = v.weightOnly && isNarrowingParamCast(step, op);
      v.forward = isForward(op);
      v.saved = isForward(op) && llvm::any_of(r.getUsers(), [&](Operation *u) {
                  return !isForward(u);
                });
      rootOf[r] = values.size();
      values.push_back(v);
    }
  }
  for (auto &[value, root] : rootOf)
    for (Operation *user : value.getUsers()) {
      auto it = index.find(user);
      int32_t at = it != index.end() ? it->second : end; // returned
      values[root].last = std::max(values[root].last, at);
      if (it != index.end() && anchor[it->second] != values[root].anchor)
        values[root].foreignUses.push_back({at, anchor[it->second]});
      // A forward value the backward reads through a reshape is saved too.
      if (it != index.end() && !isForward(user) &&
          isForward(ops[values[root].def]))
        values[root].saved = true;
    }
  shareInPlace(index, rootOf, values);
  length = end;
  // The working set beyond the saved activations, per sample.
  std::vector<double> delta(ops.size() + 2, 0);
  for (const ModelProfile::StepValue &v : values)
    if (v.perSample > 0 && !v.saved) {
      delta[v.def] += v.perSample;
      delta[std::min<size_t>(v.last, ops.size()) + 1] -= v.perSample;
    }
  double live = 0, peak = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  return peak;
}

/// What a backend that fuses (DeviceSpec::fusesElementwise) does not move
/// for forward op `op` of the step, in bytes:
///  - a layout change (transpose, split) that a matrix product absorbs, as a
///    strided operand or in its epilogue: all of it;
///  - an elementwise op whose input comes from an op it alone uses (of the
///    same shape): the read of that input and, unless the backward reads
///    the input too, the write of it (the producer's epilogue writes the
///    result instead). Chains (bias + GELU, scale + mask, bias + residual)
///    thus cost one read and one write.
class Fusion {
public:
  Fusion(Block &body, size_t numForward,
         const llvm::DenseSet<Value> &readByBackward)
      : numForward(numForward), readByBackward(readByBackward) {
    size_t i = 0;
    for (Operation &op : body.without_terminator())
      index[&op] = i++;
  }

  double savedBytes(Operation *op, const OpCost &cost) const {
    if (isa<TransposeOp, SplitOp>(op))
      return fromMatmul(op->getOperand(0), 0) ||
                     llvm::all_of(op->getResults(),
                                  [&](Value r) { return feedsMatmul(r, 0); })
                 ? cost.bytes()
                 : 0;
    // A softmax reduces whole rows: it cannot live in a matrix product's
    // epilogue, so it reads its input and writes its result.
    if (!op->hasTrait<OpTrait::smp::BroadcastingElementwise>() &&
        !op->hasTrait<OpTrait::Elementwise>())
      return 0;
    Value y = op->getResult(0);
    for (Value x : op->getOperands()) {
      Operation *producer = x.getDefiningOp();
      if (!producer || isa<ConstantOp>(producer) ||
          x.getType() != y.getType() || forwardUsers(x) != 1)
        continue;
      return tensorBytes(x) + (readByBackward.count(x) ? 0 : tensorBytes(y));
    }
    return 0;
  }

private:
  size_t forwardUsers(Value v) const {
    size_t n = 0;
    for (Operation *user : v.getUsers())
      if (auto it = index.find(user); it != index.end() && it->second < numForward)
        ++n;
    return n;
  }
  static bool isLayout(Operation *op) {
    return isa<ReshapeOp, TransposeOp, SplitOp>(op);
  }
  bool fromMatmul(Value v, int depth) const {
    Operation *def = v.getDefiningOp();
    if (!def || depth > 4)
      return false;
    if (isa<MatMulOp>(def))
      return forwardUsers(v) == 1;
    return isLayout(def) && fromMatmul(def->getOperand(0), depth + 1);
  }
  bool feedsMatmul(Value v, int depth) const {
    if (depth > 4)
      return false;
    bool any = false;
    for (Operation *user : v.getUsers()) {
      auto it = index.find(user);
      if (it == index.end() || it->second >= numForward)
        continue;
      any = true;
      if (isa<MatMulOp>(user))
        continue;
      if (!isLayout(user) ||
          !llvm::all_of(user->getResults(),
                        [&](Value r) { return feedsMatmul(r, depth + 1); }))
        return false;
    }
    return any;
  }

  llvm::DenseMap<Operation *, size_t> index;
  size_t numForward;
  const llvm::DenseSet<Value> &readByBackward;
};

/// Runs one of the planner's pipelines on its copy of the model, verified
/// once at the end rather than after every pass: the copies only feed
/// estimates, and `smpc compile` runs the same passes verified one by one.
/// Verifying after every pass was a tenth of planning a 128-layer GPT
/// (`smpc plan` of bench/megatron_table1.py's 1T row: 24.4 s -> 22.1 s).
LogicalResult runVerifiedOnce(PassManager &pm, ModuleOp m) {
  pm.enableVerifier(false);
  if (failed(pm.run(m)))
    return failure();
  return verify(m);
}

/// The training step the profile measures: one device, `stepLoss` (a
/// cross-entropy on the vocabulary output, or the user's loss), one
/// all-reduce per gradient, with or without full recomputation and
/// activation offloading.
TrainingPipelineOptions profiledStep(const std::string &stepLoss,
                                     bool recompute, bool offload,
                                     bool sequenceParallel) {
  TrainingPipelineOptions step;
  step.loss = stepLoss;
  step.sequenceParallel = sequenceParallel;
  step.bucketMb = 0;
  if (recompute)
    step.recompute = "full";
  step.offload = offload;
  step.phases = kPhaseTrainStep;
  return step;
}

/// Splits `copy` over `tp` devices (tensor parallelism, with the vocabulary
/// parallel on `vocabOutput`) and gives it `precision`, in the compiler's
/// order (smp-mixed-precision after smp-tensor-parallel: the LM head is
/// found as the product the logits are); the first diagnostic on failure.
llvm::Error applyParallelismAndPrecision(
    ModuleOp module, ModuleOp copy, int64_t tp, const std::string &vocabOutput,
    bool sequenceParallel, const std::string &precision, bool masterWeights) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    if (diagnostics.empty())
      diagnostics = d.str();
    return success();
  });
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  TrainingPipelineOptions options;
  options.tp = tp;
  options.vocabParallel = vocabOutput;
  options.sequenceParallel = sequenceParallel;
  options.precision = precision;
  options.masterWeights = masterWeights;
  options.phases = kPhaseTensorParallel | kPhaseMixedPrecision;
  buildTrainingPipeline(pm, options);
  if (failed(runVerifiedOnce(pm, copy)))
    return fail(diagnostics.empty()
                    ? (tp > 1 ? "tensor parallelism failed"
                              : "cannot apply precision " + precision)
                    : diagnostics);
  return llvm::Error::success();
}

/// What profileModel measures on: the function whose ops it profiles
/// (@main, or the training step built on the copy), its forward length, the
/// values the backward reads and a copy to build the other steps from.
struct ProfiledFunction {
  func::FuncOp main;
  size_t numForward = 0;
  llvm::DenseSet<Value> readByBackward;
  bool knowSaved = false;
  OwningOpRef<ModuleOp> unbuilt; // the model before its step was built

  /// With a loss (`stepLoss`, profiledStep's), builds the training step on the
  /// copy: the activations the backward really reads (saved for it) are then
  /// known, rather than every forward result. Its first ops are @main's.
  void buildStep(ModuleOp module, ModuleOp copy, const std::string &stepLoss,
                 bool sequenceParallel) {
    numForward = main.getBody().front().getOperations().size() - 1;
    if (stepLoss.empty())
      return;
    unbuilt = cast<ModuleOp>(copy->clone());
    ScopedDiagnosticHandler quiet(module.getContext(),
                                  [](Diagnostic &) { return success(); });
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    buildTrainingPipeline(pm,
                          profiledStep(stepLoss, /*recompute=*/false,
                                       /*offload=*/false, sequenceParallel));
    if (succeeded(runVerifiedOnce(pm, copy))) {
      auto step = copy.lookupSymbol<func::FuncOp>("train_step");
      size_t i = 0;
      for (Operation &op : step.getBody().front().without_terminator()) {
        if (i++ < numForward)
          continue;
        for (Value v : op.getOperands())
          readByBackward.insert(v);
      }
      main = step;
      knowSaved = true;
    }
  }
};

/// Profiles each path op of `f.main` into profile.ops (parameters charged to
/// the first path op that reads them); `position` maps each to its index.
void profilePathOps(const ProfiledFunction &f, bool fuse, ModelProfile &profile,
                    llvm::DenseMap<Operation *, size_t> &position) {
  func::FuncOp main = f.main;
  Block &body = main.getBody().front();
  PathOps classified = findPathOps(main, f.numForward);
  const llvm::DenseSet<Value> &weightOnly = classified.weightOnly;
  for (BlockArgument arg : body.getArguments())
    if (main.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr))
      profile.totalParamBytes += static_cast<double>(
          cast<RankedTensorType>(arg.getType()).getNumElements()) * 4;
  // Each parameter is charged to the first path op that reads it (through
  // ops on weights only).
  llvm::DenseMap<Value, llvm::SmallVector<Value>> roots; // weight value -> params
  for (BlockArgument arg : body.getArguments())
    if (weightOnly.count(arg))
      roots[arg].push_back(arg);
  for (Operation *op : classified.weightOps)
    for (Value r : op->getResults())
      for (Value v : op->getOperands())
        for (Value param : roots.lookup(v))
          roots[r].push_back(param);
  llvm::DenseSet<Value> charged;
  Fusion fusion(body, f.numForward, f.readByBackward);
  for (Operation *opPtr : classified.path) {
    Operation &op = *opPtr;
    OpProfile p;
    OpCost cost = costOf(&op);
    double fused = fuse ? fusion.savedBytes(&op, cost) : 0;
    p.flops = cost.flops;
    p.matrix = cost.matrix;
    for (Value v : op.getOperands()) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (t && isa<FloatType>(t.getElementType()))
        p.bits = t.getElementTypeBitWidth();
      if (weightOnly.count(v)) {
        p.fixedBytes += bytesOf(v);
        for (Value param : roots.lookup(v)) {
          // In their stored type (f32 master copies of an fp32 export;
          // a bf16 export trains bf16 parameters, gradients and states).
          auto type = cast<RankedTensorType>(param.getType());
          double bytes = static_cast<double>(type.getNumElements()) *
                         type.getElementTypeBitWidth() / 8;
          unsigned id = cast<BlockArgument>(param).getArgNumber();
          if (profile.paramSizes.size() <= id)
            profile.paramSizes.resize(id + 1, 0);
          profile.paramSizes[id] = bytes;
          p.params.push_back(id);
          if (charged.insert(param).second)
            p.paramBytes += bytes;
        }
      }
    }
    // Bytes beyond the weights grow with the batch.
    p.batchBytes = std::max(0.0, cost.bytes() - p.fixedBytes - fused);
    for (Value r : op.getResults()) {
      profile.maxTempBytes = std::max(profile.maxTempBytes, bytesOf(r));
      if (!isa<ViewLikeOpInterface>(op) &&
          (!f.knowSaved || f.readByBackward.count(r)))
        p.savedBytes += bytesOf(r);
    }
    if (auto ar = dyn_cast<shard::AllReduceOp>(op);
        ar && ar.getGrid() == "tp")
      p.tpCommBytes = bytesOf(ar.getInput());
    if (auto rs = dyn_cast<shard::ReduceScatterOp>(op);
        rs && rs.getGrid() == "tp") {
      p.tpCommBytes = bytesOf(rs.getInput());
      p.tpCollective = 1;
    }
    if (auto ag = dyn_cast<shard::AllGatherOp>(op);
        ag && ag.getGrid() == "tp") {
      p.tpCommBytes = bytesOf(ag.getResult());
      p.tpCollective = 2;
    }
    if (auto loc = dyn_cast<NameLoc>(op.getLoc()))
      p.name = loc.getName().str();
    position[&op] = profile.ops.size();
    profile.ops.push_back(p);
    profile.modelFlopsPerSample += cost.flops;
  }
}

/// The memory timeline on the step as the compiler lowers it (profile.steps):
/// without and with full recomputation, and with `offload` with activation
/// offloading too.
void profileStepMemory(ModuleOp module, ModuleOp copy, ProfiledFunction &f,
                       const std::string &stepLoss, bool offload,
                       const llvm::DenseMap<Operation *, size_t> &position,
                       ModelProfile &profile) {
  int64_t lastPath = static_cast<int64_t>(profile.ops.size()) - 1;
  std::vector<int64_t> anchors =
      forwardAnchors(f.main, f.numForward, position, lastPath);
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  auto sweep = [&](ModuleOp m, ModelProfile::StepMemory &memory,
                   bool tagged) -> std::optional<double> {
    auto step = m.lookupSymbol<func::FuncOp>("train_step");
    if (!step)
      return std::nullopt;
    if (!tagged)
      tagForwardAnchors(step, anchors);
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    TrainingPipelineOptions cleanup;
    cleanup.phases = kPhaseCleanup;
    buildTrainingPipeline(pm, cleanup);
    if (failed(runVerifiedOnce(pm, m)))
      return std::nullopt;
    return stepLiveness(step, lastPath, memory.values, memory.copies,
                        profile.stepLength);
  };
  OwningOpRef<ModuleOp> lowered(cast<ModuleOp>(copy->clone()));
  if (auto transient = sweep(*lowered, profile.steps[0][0], false))
    profile.transientBytes = *transient;
  // Recomputation reorders the forward (a segment's ops move next to
  // their first backward use) and offloading adds copies to it, so those
  // steps are not tagged by position: @main's ops are tagged before the
  // step is built from them, and their clones in the step carry the tags
  // (recomputed copies are marked as such and are not forward ops).
  if (auto m = f.unbuilt->lookupSymbol<func::FuncOp>("main"))
    tagForwardAnchors(m, anchors);
  int32_t length = profile.stepLength;
  for (auto [recompute, offloading] :
       {std::pair(true, false), std::pair(false, true),
        std::pair(true, true)}) {
    if (offloading && !offload)
      continue;
    OwningOpRef<ModuleOp> built(cast<ModuleOp>(f.unbuilt->clone()));
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    buildTrainingPipeline(pm, profiledStep(stepLoss, recompute, offloading,
                                           profile.sequenceParallel));
    if (succeeded(runVerifiedOnce(pm, *built)))
      (void)sweep(*built, profile.steps[recompute][offloading], true);
  }
  profile.stepLength = length;
}

/// What crosses the cut after each op (boundaryBytes), and the cuts with
/// the fewest values crossing (cutAfter).
void markCuts(const llvm::DenseMap<Operation *, size_t> &position,
              bool knowSaved, ModelProfile &profile) {
  size_t n = profile.ops.size();
  std::vector<double> countDelta(n + 1, 0), bytesDelta(n + 1, 0);
  for (auto &[op, at] : position)
    for (Value r : op->getResults()) {
      size_t last = at;
      for (Operation *user : r.getUsers()) {
        auto it = position.find(user);
        if (it != position.end())
          last = std::max(last, it->second);
        else if (!knowSaved)
          last = n; // @main's return (the step's loss and backward don't count)
      }
      if (last > at) {
        countDelta[at + 1] += 1;
        bytesDelta[at + 1] += bytesOf(r);
        if (last + 1 <= n) {
          countDelta[last + 1] -= 1;
          bytesDelta[last + 1] -= bytesOf(r);
        }
      }
    }
  double count = 0, bytes = 0, fewest = std::numeric_limits<double>::max();
  std::vector<double> crossing(n + 1, 0);
  for (size_t k = 1; k <= n; ++k) {
    count += countDelta[k];
    bytes += bytesDelta[k];
    crossing[k] = count;
    if (k < n) {
      profile.ops[k - 1].boundaryBytes = bytes;
      fewest = std::min(fewest, count);
    }
  }
  for (size_t k = 1; k < n; ++k)
    profile.ops[k - 1].cutAfter = crossing[k] == fewest;
}

} // namespace

llvm::Expected<ModelProfile>
profileModel(ModuleOp module, int64_t tp, const std::string &vocabOutput,
             bool fuse, bool sequenceParallel, const std::string &precision,
             bool offload, bool masterWeights, const std::string &loss) {
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  sequenceParallel = sequenceParallel && tp > 1;
  if (llvm::Error err = applyParallelismAndPrecision(
          module, *copy, tp, vocabOutput, sequenceParallel, precision,
          masterWeights))
    return std::move(err);
  ProfiledFunction f;
  f.main = copy->lookupSymbol<func::FuncOp>("main");
  if (!f.main)
    return fail("the model has no func @main");
  // The loss of the profiled step: a cross-entropy on the vocabulary
  // output, else the user's (a regression's mse, ...).
  std::string stepLoss =
      !vocabOutput.empty() ? "cross_entropy:" + vocabOutput + ":labels" : loss;
  f.buildStep(module, *copy, stepLoss, sequenceParallel);
  ModelProfile profile;
  profile.tp = tp;
  profile.sequenceParallel = sequenceParallel;
  llvm::DenseMap<Operation *, size_t> position;
  profilePathOps(f, fuse, profile, position);
  if (f.knowSaved)
    profileStepMemory(module, *copy, f, stepLoss, offload, position, profile);
  if (profile.ops.empty())
    return fail("no op of @main computes on both the inputs and the "
                "parameters");
  markCuts(position, f.knowSaved, profile);
  return profile;
}

} // namespace smp
