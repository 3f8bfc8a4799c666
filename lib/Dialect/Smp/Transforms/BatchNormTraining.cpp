//===- BatchNormTraining.cpp - Batch norm in train() mode -----------------===//
//
// The training step normalises every batch norm with its batch's statistics,
// as PyTorch's train() mode does, whatever mode the file was exported in:
//
//   s1 = sum(x) over every dim but 1        (all_reduce over @dp: global)
//   mean = s1 / N                           (N: values per channel, all ranks)
//   s2 = sum((x - mean)^2)                  (all_reduce over @dp: global)
//   y = batch_norm(x, scale, bias, mean, s2 / N)
//   running_mean' = running_mean * m + mean * (1 - m)
//   running_var'  = running_var * m + s2 / (N - 1) * (1 - m)
//
// (m: ONNX's momentum, 1 - PyTorch's). Two passes (mean, then the centred
// squares) keep the variance exact where a sum of squares would cancel. The
// gradient flows through mean and variance by autodiff: smp.batch_norm's VJP
// covers its statistics, and an all_reduce on @dp gets an all_reduce back.
// With `replica` statistics every rank normalises with its own batch's, and
// the running statistics follow dp rank 0's (an all_gather, then its slice),
// as DDP's broadcast_buffers makes rank 0's buffers the model's.
// A batch norm whose mean and variance the forward computes from its input
// (track_running_stats=False) already normalises with its batch's
// statistics: it stays as stored.
//
//===----------------------------------------------------------------------===//

#include "BatchNormTraining.h"

#include "TrainStepContract.h"
#include "TrainStepUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/IR/TrainedParams.h"

#define DEBUG_TYPE "smp-build-gradients"

using namespace mlir;

namespace smp {
namespace {

/// Whether `v`'s values reach only the function's outputs (through any ops
/// but batch norms): a training-mode export's running-statistics outputs,
/// which the training step drops.
bool feedsOnlyOutputs(Value v) {
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value w = work.pop_back_val();
    for (Operation *user : w.getUsers()) {
      if (isa<func::ReturnOp>(user))
        continue;
      if (isa<BatchNormOp>(user) || user->getNumResults() == 0)
        return false;
      for (Value r : user->getResults())
        work.push_back(r);
    }
  }
  return true;
}

/// Whether `arg` is read by `bn` as one of its operands only (directly or
/// through casts), or else only on the way to the function's outputs.
bool onlyReadBy(BlockArgument arg, Operation *bn) {
  SmallVector<Value> work{arg};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (user == bn) {
        if (llvm::count(bn->getOperands(), v) > 1)
          return false;
        continue;
      }
      if (auto cast = dyn_cast<CastOp>(user)) {
        work.push_back(cast.getResult());
        continue;
      }
      if (!llvm::all_of(user->getResults(), feedsOnlyOutputs))
        return false;
    }
  }
  return true;
}

struct Rewriter {
  func::FuncOp f;
  int64_t dp;
  BatchNormStats stats;
  SmallVector<RunningStat> running;

  Value allReduce(OpBuilder &b, Location loc, Value v) {
    return allReduceDp(b, loc, v);
  }

  /// dp rank 0's value of `v` (1-D) on every rank.
  Value rankZeros(OpBuilder &b, Location loc, Value v) {
    int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(0);
    Value all = gatherDp(b, loc, v, dp);
    return SliceOp::create(b, loc, all, b.getDenseI64ArrayAttr({0}),
                           b.getDenseI64ArrayAttr({n}),
                           b.getDenseI64ArrayAttr({1}));
  }

  /// running * momentum + batch * (1 - momentum), in the running
  /// statistic's type; the op reading `running` is marked for chaining.
  void update(OpBuilder &b, Location loc, BlockArgument arg, Value batch,
              double momentum) {
    auto at = cast<RankedTensorType>(arg.getType());
    if (cast<RankedTensorType>(batch.getType()).getElementType() !=
        at.getElementType())
      batch = CastOp::create(
          b, loc, cast<RankedTensorType>(batch.getType()).clone(at.getElementType()),
          batch);
    if (batch.getType() != at)
      batch = ReshapeOp::create(b, loc, at, batch);
    std::string name =
        f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), SmpDialect::kParamAttr)
            .str();
    Type elt = at.getElementType();
    auto decay = MulOp::create(b, loc, arg, scalarConst(b, loc, elt, momentum));
    decay->setAttr(SmpDialect::kRunningStatAttr, b.getStringAttr(name));
    AddOp::create(b, loc, decay,
                  MulOp::create(b, loc, batch,
                                scalarConst(b, loc, elt, 1.0 - momentum)));
    running.push_back({arg, name});
  }

  LogicalResult rewrite(BatchNormOp bn) {
    BlockArgument mean = paramBehind(f, bn.getMean());
    BlockArgument var = paramBehind(f, bn.getVariance());
    if (!mean && !var && computesOwnStatistics(bn))
      return success(); // its batch's statistics already: as stored
    if (!mean || !var)
      return bn.emitError()
             << "batch norm: the running " << (mean ? "variance" : "mean")
             << " is not a parameter of the file (a constant or a computed "
                "value), so training cannot update it as PyTorch's train() "
                "does; export the model with its BatchNorm buffers as "
                "initializers";
    for (BlockArgument arg : {mean, var})
      if (mean == var || !onlyReadBy(arg, bn))
        return bn.emitError()
               << "batch norm: its running statistic '"
               << f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                 SmpDialect::kParamAttr)
                      .getValue()
               << "' is also read elsewhere (the exporter merged equal "
                  "tensors); training updates it, so it must be this "
                  "batch norm's own: re-export with torch.onnx.export(..., "
                  "dynamo=True, optimize=False)";
    auto xt = cast<RankedTensorType>(bn.getInput().getType());
    int64_t channels = xt.getDimSize(1);
    int64_t local = xt.getNumElements() / std::max<int64_t>(channels, 1);
    int64_t count =
        local * (stats == BatchNormStats::Global ? std::max<int64_t>(dp, 1) : 1);
    if (count <= 1)
      return bn.emitError()
             << "batch norm sees " << count
             << " value per channel in a training step (input " << xt
             << "): batch statistics need more than one (PyTorch refuses "
                "this too); train with a larger batch";

    OpBuilder b(bn);
    Location loc = bn.getLoc();
    Operation *mark = bn->getPrevNode();
    SmallVector<int64_t> others, chan(xt.getRank(), 1);
    chan[1] = channels;
    for (int64_t d = 0; d < xt.getRank(); ++d)
      if (d != 1)
        others.push_back(d);
    auto axes = b.getDenseI64ArrayAttr(others);
    Type elt = xt.getElementType();
    // The sums, their all_reduce and the statistics are f32 for a bf16 or
    // f16 input (as PyTorch's batch norm under autocast keeps them): a
    // channel's sum rounded to 8 bits, and again per rank under dp, moved
    // the mean by more than the batch's own spread.
    Type acc = elt.getIntOrFloatBitWidth() < 32 ? b.getF32Type() : elt;
    auto sumOf = [&](Value v) -> Value {
      if (acc != elt)
        v = CastOp::create(b, loc,
                           cast<RankedTensorType>(v.getType()).clone(acc), v);
      return ReduceSumOp::create(b, loc, v, axes, false);
    };
    auto toElt = [&](Value v) -> Value {
      return acc == elt
                 ? v
                 : Value(CastOp::create(
                       b, loc, cast<RankedTensorType>(v.getType()).clone(elt),
                       v));
    };
    bool sync = stats == BatchNormStats::Global && dp > 1;
    Value s1 = sumOf(bn.getInput());
    if (sync)
      s1 = allReduce(b, loc, s1);
    Value n = scalarConst(b, loc, acc, static_cast<double>(count));
    Value batchMean = DivOp::create(b, loc, s1, n);
    Value meanElt = toElt(batchMean);
    Value centred =
        SubOp::create(b, loc, bn.getInput(),
                      ReshapeOp::create(b, loc, xt.clone(chan), meanElt));
    Value s2 = sumOf(MulOp::create(b, loc, centred, centred));
    if (sync)
      s2 = allReduce(b, loc, s2);
    Value batchVar = DivOp::create(b, loc, s2, n);
    Value unbiased = DivOp::create(
        b, loc, s2, scalarConst(b, loc, acc, static_cast<double>(count - 1)));

    double momentum = bn.getMomentum().convertToDouble();
    Value meanForUpdate = batchMean, varForUpdate = unbiased;
    if (stats == BatchNormStats::Replica && dp > 1) {
      meanForUpdate = rankZeros(b, loc, batchMean);
      varForUpdate = rankZeros(b, loc, unbiased);
    }
    update(b, loc, mean, meanForUpdate, momentum);
    update(b, loc, var, varForUpdate, momentum);
    // What an evaluation normalises with (smprun --eval-data).
    bn->setAttr(SmpDialect::kRunningMeanAttr,
                b.getStringAttr(running[running.size() - 2].name));
    bn->setAttr(SmpDialect::kRunningVarAttr,
                b.getStringAttr(running.back().name));
    auto reshapeLike = [&](Value v, Value like) {
      return v.getType() == like.getType()
                 ? v
                 : Value(ReshapeOp::create(b, loc, like.getType(), v));
    };
    bn.getMeanMutable().assign(reshapeLike(meanElt, bn.getMean()));
    bn.getVarianceMutable().assign(
        reshapeLike(toElt(batchVar), bn.getVariance()));

    // The new ops run where the batch norm runs.
    if (auto stage = bn->getAttr(SmpDialect::kStageAttr))
      for (Operation *op = mark ? mark->getNextNode() : &bn->getBlock()->front();
           op != bn.getOperation(); op = op->getNextNode())
        if (!op->hasTrait<OpTrait::ConstantLike>())
          op->setAttr(SmpDialect::kStageAttr, stage);
    return success();
  }
};

} // namespace

FailureOr<SmallVector<RunningStat>>
trainBatchNorms(func::FuncOp f, int64_t dp, BatchNormStats stats) {
  Rewriter r{f, dp, stats, {}};
  SmallVector<BatchNormOp> bns;
  f.walk([&](BatchNormOp bn) { bns.push_back(bn); });
  for (BatchNormOp bn : bns)
    if (failed(r.rewrite(bn)))
      return failure();
  return r.running;
}

SmallVector<std::pair<std::string, Value>>
chainRunningStats(func::FuncOp f, ArrayRef<RunningStat> stats) {
  llvm::StringMap<SmallVector<Operation *>> decays; // per name, program order
  f.walk([&](MulOp op) {
    if (auto name = op->getAttrOfType<StringAttr>(SmpDialect::kRunningStatAttr))
      decays[name.getValue()].push_back(op);
  });
  SmallVector<std::pair<std::string, Value>> result;
  for (const RunningStat &s : stats) {
    Value last;
    for (Operation *decay : decays[s.name]) {
      if (last)
        decay->setOperand(0, last);
      last = (*decay->getResult(0).user_begin())->getResult(0); // the add
    }
    result.push_back({s.name, last});
  }
  return result;
}

} // namespace smp
