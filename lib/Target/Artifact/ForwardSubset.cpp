//===- ForwardSubset.cpp - The instructions an evaluation runs ------------===//
//
// smprun --eval-data measures the loss of held-out batches with the step's
// own program: it runs the instructions marked `forward` (the ops the
// step's "loss" output is computed from) with dropout off, and skips the
// backward, the gradient collectives and the optimizer. The subset reads
// and writes the same buffers as the step, a subset of their uses, so the
// step's memory plan holds for it.
//
// On a pipeline the loss is computed on the last stage from what the
// earlier stages send: a stage's forward also holds the sends whose
// receive is in its peer's forward, found by following the messages (a
// send and its receive share a tag) from stage to stage. Every collective
// in a forward is run by every rank of its group: they all run copies of
// the same stage's program.
//
// An evaluation's accuracy and metrics (smpc --eval-accuracy,
// --eval-metrics) are counted by ops that only their outputs read
// (smp/base/EvalMetrics.h: eval_hits, eval_labels, ...): those a
// training step does not need are marked eval_only, and only evaluations
// run them.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/IR/TrainedParams.h"
#include "smp/base/EvalMetrics.h"

#include <map>
#include <tuple>

namespace smp::writer {

namespace {

/// Whether result `i` of `f` is an evaluation's output: the loss, the
/// counts of its metrics or its predictions.
bool isEvalOutput(func::FuncOp f, unsigned i, bool lossToo) {
  auto name = f.getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr);
  if (!name)
    return false;
  return (lossToo && name.getValue() == "loss") ||
         smp::base::isEvalOutput(name.getValue());
}

/// For each stage's function, the ops the results that `picked` selects are
/// computed from, across the stages through the sends and receives.
std::vector<llvm::DenseSet<Operation *>>
opsFeeding(ArrayRef<func::FuncOp> stages,
           llvm::function_ref<bool(func::FuncOp, unsigned)> picked) {
  std::vector<llvm::DenseSet<Operation *>> forward(stages.size());
  // (from stage, to stage, tag) -> the send.
  std::map<std::tuple<int64_t, int64_t, int64_t>, Operation *> sends;
  for (size_t s = 0; s < stages.size(); ++s)
    func::FuncOp(stages[s]).walk([&](SendOp send) {
      sends[{static_cast<int64_t>(s), send.getPeer(), send.getTag()}] = send;
    });
  std::vector<std::pair<size_t, Operation *>> work;
  auto add = [&](size_t s, Operation *op) {
    if (op && forward[s].insert(op).second)
      work.push_back({s, op});
  };
  for (size_t s = 0; s < stages.size(); ++s) {
    func::FuncOp f = stages[s];
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (picked(f, i))
        add(s, v.getDefiningOp());
  }
  while (!work.empty()) {
    auto [s, op] = work.back();
    work.pop_back();
    for (Value v : op->getOperands())
      add(s, v.getDefiningOp());
    if (auto recv = dyn_cast<RecvOp>(op)) {
      auto it =
          sends.find({recv.getPeer(), static_cast<int64_t>(s), recv.getTag()});
      if (it != sends.end() && recv.getPeer() >= 0 &&
          recv.getPeer() < static_cast<int64_t>(stages.size()))
        add(static_cast<size_t>(recv.getPeer()), it->second);
    }
  }
  return forward;
}

} // namespace

EvalSubsets evalOps(ArrayRef<func::FuncOp> stages) {
  EvalSubsets e;
  e.forward = opsFeeding(stages, [](func::FuncOp f, unsigned i) {
    return isEvalOutput(f, i, true);
  });
  std::vector<llvm::DenseSet<Operation *>> training =
      opsFeeding(stages, [](func::FuncOp f, unsigned i) {
        return !isEvalOutput(f, i, false);
      });
  e.evalOnly.resize(stages.size());
  for (size_t s = 0; s < stages.size(); ++s)
    for (Operation *op : e.forward[s])
      if (!training[s].contains(op))
        e.evalOnly[s].insert(op);
  return e;
}

std::string runningStatsOf(func::FuncOp f, BatchNormOp bn, BlockArgument &mean,
                           BlockArgument &var) {
  auto meanName = bn->getAttrOfType<StringAttr>(SmpDialect::kRunningMeanAttr);
  auto varName = bn->getAttrOfType<StringAttr>(SmpDialect::kRunningVarAttr);
  mean = var = nullptr;
  for (BlockArgument arg : f.getArguments()) {
    auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                               SmpDialect::kParamAttr);
    if (name && name == meanName)
      mean = arg;
    if (name && name == varName)
      var = arg;
  }
  std::string node = "BatchNormalization (node '" + valueName(bn) + "')";
  // Normalising with its running statistics already (--bn-stats running:
  // frozen), as an evaluation does.
  if (!meanName && !varName && paramBehind(f, bn.getMean()) &&
      paramBehind(f, bn.getVariance()))
    return "";
  if (!meanName || !varName || !mean || !var)
    return node + ": its running statistics are not parameters of its "
                  "rank's program";
  // Of another float type (mixed precision: f32 running statistics, bf16
  // batch statistics), an evaluation rounds them to the batch's as the
  // step's normalisation computes; another shape is out of reach.
  for (auto [stat, like] :
       {std::pair{mean, bn.getMean()}, std::pair{var, bn.getVariance()}})
    if (cast<ShapedType>(stat.getType()).getShape() !=
        cast<ShapedType>(like.getType()).getShape()) {
      std::string have, want;
      llvm::raw_string_ostream(have) << stat.getType();
      llvm::raw_string_ostream(want) << like.getType();
      return node + ": its running statistics are " + have + ", not the " +
             want + " it normalises with (sharded)";
    }
  return "";
}

std::string evaluationRefusal(ArrayRef<func::FuncOp> stages) {
  std::string why;
  for (func::FuncOp f : stages)
    f.walk([&](BatchNormOp bn) {
      BlockArgument mean, var;
      why = runningStatsOf(f, bn, mean, var);
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    });
  if (!why.empty())
    why = "the model's " + why +
          ": an evaluation normalises with them as PyTorch's model.eval() "
          "does; evaluate the model --save-onnx writes instead (smp.run_onnx, "
          "or smpc compile without --train and smprun --output-dir)";
  return why;
}

} // namespace smp::writer
