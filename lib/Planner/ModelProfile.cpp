//===- ModelProfile.cpp - Per-sample costs of the forward's ops -----------===//
//
// @main is imported at one sample per batch, so every activation is one
// sample's; weights are the parameters (f32 master copies) and the ops on
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
#include "mlir/Pass/PassManager.h"
#include "smp/Analysis/Cost/OpCosts.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/PathOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>

using namespace mlir;

namespace smp {
namespace {

double bytesOf(Value v) { return tensorBytes(v); }

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// The training step's peak of live values that depend on the data (per
/// sample at one sample per batch), minus what the forward saves for the
/// backward: the backward's working set. Parameter-shaped values (weight
/// gradients) are counted with the parameters, not here.
double transientPeak(func::FuncOp step, size_t numForward,
                     const llvm::DenseSet<Value> &saved) {
  Block &body = step.getBody().front();
  llvm::DenseSet<Type> paramTypes;
  llvm::DenseSet<Value> data;
  for (BlockArgument arg : body.getArguments()) {
    if (step.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr))
      paramTypes.insert(arg.getType());
    else if (step.getArgAttr(arg.getArgNumber(), SmpDialect::kInputAttr))
      data.insert(arg);
  }
  llvm::DenseMap<Operation *, size_t> index;
  std::vector<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  std::vector<double> delta(ops.size() + 2, 0);
  double savedBytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation *op = ops[i];
    bool fromData = llvm::any_of(op->getOperands(),
                                 [&](Value v) { return data.count(v); });
    if (!fromData)
      continue;
    for (Value r : op->getResults()) {
      data.insert(r);
      if (paramTypes.count(r.getType()) || isa<ReshapeOp, TpCopyOp>(op))
        continue;
      size_t last = i;
      for (Operation *user : r.getUsers())
        if (auto it = index.find(user); it != index.end())
          last = std::max(last, it->second);
      if (i < numForward && saved.count(r)) {
        savedBytes += bytesOf(r);
        continue; // counted as saved activations
      }
      delta[i] += bytesOf(r);
      delta[last + 1] -= bytesOf(r);
    }
  }
  double live = 0, peak = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  (void)savedBytes;
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
    if (!isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, WhereOp>(op) &&
        !op->hasTrait<OpTrait::Elementwise>() && !isa<GeluOp>(op))
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

} // namespace

llvm::Expected<ModelProfile> profileModel(ModuleOp module, int64_t tp,
                                          const std::string &vocabOutput,
                                          bool fuse) {
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  if (tp > 1) {
    std::string diagnostics;
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
      if (diagnostics.empty())
        diagnostics = d.str();
      return success();
    });
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    SmpTensorParallelPassOptions options;
    options.tp = static_cast<int>(tp);
    options.vocabParallel = vocabOutput;
    pm.addPass(createSmpTensorParallelPass(options));
    if (failed(pm.run(*copy)))
      return fail(diagnostics.empty() ? "tensor parallelism failed"
                                      : diagnostics);
  }
  auto main = copy->lookupSymbol<func::FuncOp>("main");
  if (!main)
    return fail("the model has no func @main");
  // With a cross-entropy on `vocabOutput`, build the training step on the
  // copy: the activations the backward really reads (saved for it) are then
  // known, rather than every forward result. Its first ops are @main's.
  size_t numForward = main.getBody().front().getOperations().size() - 1;
  llvm::DenseSet<Value> readByBackward;
  bool knowSaved = false;
  if (!vocabOutput.empty()) {
    ScopedDiagnosticHandler quiet(module.getContext(),
                                  [](Diagnostic &) { return success(); });
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    SmpBuildTrainStepPassOptions options;
    options.loss = "cross_entropy:" + vocabOutput + ":labels";
    options.bucketMb = 0;
    pm.addPass(createSmpBuildTrainStepPass(options));
    if (succeeded(pm.run(*copy))) {
      auto step = copy->lookupSymbol<func::FuncOp>("train_step");
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
  Block &body = main.getBody().front();
  ModelProfile profile;
  profile.tp = tp;

  PathOps classified = findPathOps(main, numForward);
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
  llvm::DenseMap<Operation *, size_t> position;
  Fusion fusion(body, numForward, readByBackward);
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
        for (Value param : roots.lookup(v))
          if (charged.insert(param).second)
            p.paramBytes += static_cast<double>(
                cast<RankedTensorType>(param.getType()).getNumElements()) * 4;
      }
    }
    // Bytes beyond the weights grow with the batch.
    p.batchBytes = std::max(0.0, cost.bytes() - p.fixedBytes - fused);
    for (Value r : op.getResults()) {
      profile.maxTempBytes = std::max(profile.maxTempBytes, bytesOf(r));
      if (!isa<ReshapeOp, TpCopyOp>(op) &&
          (!knowSaved || readByBackward.count(r)))
        p.savedBytes += bytesOf(r);
    }
    if (auto ar = dyn_cast<shard::AllReduceOp>(op);
        ar && ar.getGrid() == "tp")
      p.tpCommBytes = bytesOf(ar.getInput());
    if (auto loc = dyn_cast<NameLoc>(op.getLoc()))
      p.name = loc.getName().str();
    position[&op] = profile.ops.size();
    profile.ops.push_back(p);
    profile.modelFlopsPerSample += cost.flops;
  }
  if (knowSaved)
    profile.transientBytes = transientPeak(main, numForward, readByBackward);
  size_t n = profile.ops.size();
  if (n == 0)
    return fail("no op of @main computes on both the inputs and the "
                "parameters");
  // What crosses the cut after each op.
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
  return profile;
}

} // namespace smp
