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
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>

using namespace mlir;

namespace smp {
namespace {

double bytesOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return 0;
  return static_cast<double>(t.getNumElements()) *
         std::max(1u, t.getElementTypeBitWidth() / 8);
}

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

} // namespace

llvm::Expected<ModelProfile> profileModel(ModuleOp module, int64_t tp,
                                          const std::string &vocabOutput) {
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
  Block &body = main.getBody().front();
  ModelProfile profile;
  profile.tp = tp;

  llvm::DenseSet<Value> weightOnly, staged;
  for (BlockArgument arg : body.getArguments())
    if (main.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr)) {
      weightOnly.insert(arg);
      profile.totalParamBytes += static_cast<double>(
          cast<RankedTensorType>(arg.getType()).getNumElements()) * 4;
    }
  // Each parameter is charged to the first path op that reads it (through
  // ops on weights only).
  llvm::DenseMap<Value, llvm::SmallVector<Value>> roots; // weight value -> params
  for (BlockArgument arg : body.getArguments())
    if (weightOnly.count(arg))
      roots[arg].push_back(arg);
  llvm::DenseSet<Value> charged;
  llvm::DenseMap<Operation *, size_t> position;
  for (Operation &op : body.without_terminator()) {
    if (op.hasTrait<OpTrait::ConstantLike>())
      continue;
    bool anyWeight = false, anyPath = false, anyOther = false;
    for (Value v : op.getOperands()) {
      if (weightOnly.count(v))
        anyWeight = true;
      else if (staged.count(v))
        anyPath = true;
      else if (!v.getDefiningOp() ||
               !v.getDefiningOp()->hasTrait<OpTrait::ConstantLike>())
        anyOther = true;
    }
    if (anyWeight && !anyPath && !anyOther) {
      for (Value r : op.getResults()) {
        weightOnly.insert(r);
        for (Value v : op.getOperands())
          for (Value p : roots.lookup(v))
            roots[r].push_back(p);
      }
      continue;
    }
    if (!anyWeight && !anyPath)
      continue; // on inputs only: recomputed where needed, cheap
    for (Value r : op.getResults())
      staged.insert(r);
    OpProfile p;
    OpCost cost = costOf(&op);
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
    p.batchBytes = std::max(0.0, cost.bytes() - p.fixedBytes);
    if (!isa<ReshapeOp, TpCopyOp>(op))
      for (Value r : op.getResults()) {
        p.savedBytes += bytesOf(r);
        profile.maxTempBytes = std::max(profile.maxTempBytes, bytesOf(r));
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
        last = std::max(last, it != position.end() ? it->second : n);
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
