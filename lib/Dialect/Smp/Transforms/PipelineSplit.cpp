//===- PipelineSplit.cpp - Assign @main's ops to pipeline stages ----------===//
//
// Implements `smp-pipeline-split`. See Passes.td for the contract.
//
// Cut points: position k (between op k-1 and op k of the staged ops in
// program order) crosses the values defined before k and used at or after k
// (the function's results count as used at the end). Only positions crossing
// the fewest values are cut points; for a transformer these are the residual
// adds, where only the hidden state crosses.
//
// Balance: the stages' costs (sum of the ops' predicted costs) are balanced
// by minimising the largest, with a dynamic program over the cut points
// (O(stages x cut points^2)).
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Analysis/Cost/OpCosts.h"
#include "smp/Dialect/Smp/Transforms/PathOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "TrainStepUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>

#include <limits>

namespace smp {
#define GEN_PASS_DEF_SMPPIPELINESPLITPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// Predicted cost of one op's forward: FLOPs plus the bytes it moves (CPU
/// and GPU kernels outside GEMMs and convolutions are bandwidth-bound), from
/// CostOpInterface. The backward costs about twice the forward for every
/// op, so the forward's balance is the step's.
double predictedCost(Operation *op) {
  OpCost c = costOf(op);
  return c.flops + c.bytes();
}

struct SmpPipelineSplitPass
    : public smp::impl::SmpPipelineSplitPassBase<SmpPipelineSplitPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main =
        lookupFuncOrError(module, "main", "smp-pipeline-split", "to split");
    if (!main ||
        !checkAtLeastOne(module, "smp-pipeline-split", "stages", stages))
      return signalPassFailure();
    Block &body = main.getBody().front();

    // Ops on the path from the inputs through the parameters get a stage
    // by position; ops on parameters only (weight transposes, masks kept as
    // buffers) run on the stages of their users, copied when there are
    // several; ops on inputs only are free.
    for (Operation &op : body.without_terminator())
      op.removeAttr(SmpDialect::kStageAttr);
    PathOps classified = findPathOps(main);
    SmallVector<Operation *> ops(classified.path), weightOps(classified.weightOps);
    llvm::DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(ops))
      position[op] = i;
    int64_t n = ops.size();
    if (n == 0) {
      main.emitError("smp-pipeline-split: no op of @main computes on both "
                     "the inputs and the parameters; there is nothing to "
                     "split");
      return signalPassFailure();
    }

    // crossing[k]: values defined before position k and used at or after it.
    std::vector<int64_t> delta(n + 1, 0);
    for (Operation *op : ops) {
      int64_t def = position[op];
      for (Value r : op->getResults()) {
        int64_t last = def;
        for (Operation *user : r.getUsers()) {
          auto it = position.find(user);
          last = std::max(last, it != position.end() ? it->second : n);
        }
        if (last > def) { // crosses positions def+1 .. last
          delta[def + 1] += 1;
          if (last + 1 <= n)
            delta[last + 1] -= 1;
        }
      }
    }
    std::vector<int64_t> crossing(n + 1, 0);
    for (int64_t k = 1; k <= n; ++k)
      crossing[k] = crossing[k - 1] + delta[k];
    int64_t fewest = std::numeric_limits<int64_t>::max();
    for (int64_t k = 1; k < n; ++k)
      fewest = std::min(fewest, crossing[k]);
    SmallVector<int64_t> candidates;
    for (int64_t k = 1; k < n; ++k)
      if (crossing[k] == fewest)
        candidates.push_back(k);

    std::vector<double> prefix(n + 1, 0.0);
    for (int64_t i = 0; i < n; ++i)
      prefix[i + 1] = prefix[i] + predictedCost(ops[i]);

    SmallVector<int64_t> cutsAt;
    if (!cuts.empty()) {
      if (static_cast<int64_t>(cuts.size()) != stages - 1) {
        module.emitError() << "smp-pipeline-split: " << cuts.size()
                           << " cut(s) given for " << static_cast<int64_t>(stages)
                           << " stages (need " << stages - 1 << ")";
        return signalPassFailure();
      }
      for (const std::string &name : cuts) {
        int64_t at = -1;
        for (int64_t i = 0; i < n && at < 0; ++i)
          if (auto loc = dyn_cast<NameLoc>(ops[i]->getLoc()))
            if (loc.getName().getValue() == name)
              at = i;
        if (at < 0) {
          module.emitError() << "smp-pipeline-split: no node named '" << name
                             << "' computes on the parameters' path (cuts "
                                "name the ONNX node a stage starts at)";
          return signalPassFailure();
        }
        if (at == 0 || (!cutsAt.empty() && at <= cutsAt.back())) {
          module.emitError() << "smp-pipeline-split: cut at '" << name
                             << "' leaves an empty stage (cuts must follow "
                                "program order)";
          return signalPassFailure();
        }
        if (crossing[at] > fewest)
          ops[at]->emitWarning()
              << "cut at '" << name << "' sends " << crossing[at]
              << " tensors between stages per micro-batch; the cut points "
                 "send "
              << fewest;
        cutsAt.push_back(at);
      }
    } else if (stages > 1) {
      if (static_cast<int64_t>(candidates.size()) < stages - 1) {
        module.emitError()
            << "cannot split the model into " << static_cast<int64_t>(stages)
            << " pipeline stages: it has " << candidates.size()
            << " cut point(s) (places where only " << fewest
            << " tensor(s) cross), so at most " << candidates.size() + 1
            << " stages: ask for fewer (smpc: --pp times --virtual-stages), "
               "or name where stages start (--pp-cuts)";
        return signalPassFailure();
      }
      cutsAt = balance(candidates, prefix, n);
    }

    // Mark the ops and record the stage costs.
    SmallVector<double> costs(stages, 0.0);
    int64_t stage = 0;
    for (int64_t i = 0; i < n; ++i) {
      while (stage < static_cast<int64_t>(cutsAt.size()) && i >= cutsAt[stage])
        ++stage;
      ops[i]->setAttr(SmpDialect::kStageAttr,
                      IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                       stage));
      costs[stage] += prefix[i + 1] - prefix[i];
    }
    placeWeightOps(weightOps);
    module->setAttr(SmpDialect::kStageCostsAttr,
                    DenseF64ArrayAttr::get(&getContext(), costs));
  }

  /// Gives each op on parameters only the stage of its users, with a copy
  /// per further stage (in reverse order, so that chains are copied whole).
  void placeWeightOps(ArrayRef<Operation *> weightOps) {
    auto i64 = IntegerType::get(&getContext(), 64);
    for (Operation *op : llvm::reverse(weightOps)) {
      std::map<int64_t, SmallVector<OpOperand *>> usesByStage;
      for (Value r : op->getResults())
        for (OpOperand &use : r.getUses()) {
          Operation *user = use.getOwner();
          int64_t stage = stages - 1; // the return
          if (auto s = user->getAttrOfType<IntegerAttr>(SmpDialect::kStageAttr))
            stage = s.getInt();
          usesByStage[stage].push_back(&use);
        }
      if (usesByStage.empty())
        usesByStage[0] = {};
      bool first = true;
      for (auto &[stage, uses] : usesByStage) {
        Operation *target = op;
        if (!first) {
          OpBuilder b(op);
          target = b.clone(*op);
          for (OpOperand *use : uses)
            use->set(target->getResult(
                cast<OpResult>(use->get()).getResultNumber()));
        }
        target->setAttr(SmpDialect::kStageAttr, IntegerAttr::get(i64, stage));
        first = false;
      }
    }
  }

  /// Cut positions (stages - 1 of `candidates`) minimising the costliest
  /// stage; ties prefer the earlier cut.
  SmallVector<int64_t> balance(ArrayRef<int64_t> candidates,
                               ArrayRef<double> prefix, int64_t n) {
    // Boundaries: 0, the candidates, n. best[s][j]: the smallest largest
    // stage cost of s+1 stages covering ops [0, bound[j]).
    SmallVector<int64_t> bound{0};
    bound.append(candidates.begin(), candidates.end());
    bound.push_back(n);
    size_t c = bound.size();
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> best(stages, std::vector<double>(c, inf));
    std::vector<std::vector<size_t>> from(stages, std::vector<size_t>(c, 0));
    for (size_t j = 1; j < c; ++j)
      best[0][j] = prefix[bound[j]];
    for (int64_t s = 1; s < stages; ++s)
      for (size_t j = 1; j < c; ++j)
        for (size_t i = 1; i < j; ++i) {
          double v = std::max(best[s - 1][i], prefix[bound[j]] - prefix[bound[i]]);
          if (v < best[s][j]) {
            best[s][j] = v;
            from[s][j] = i;
          }
        }
    SmallVector<int64_t> result(stages - 1);
    size_t j = c - 1;
    for (int64_t s = stages - 1; s > 0; --s) {
      j = from[s][j];
      result[s - 1] = bound[j];
    }
    return result;
  }
};

} // namespace
