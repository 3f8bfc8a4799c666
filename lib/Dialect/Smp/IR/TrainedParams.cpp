//===- TrainedParams.cpp - Which parameters a training step trains --------===//

#include "smp/Dialect/Smp/IR/TrainedParams.h"

#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <set>

using namespace mlir;

namespace smp {

BlockArgument paramBehind(func::FuncOp f, Value v) {
  while (auto cast = v.getDefiningOp<CastOp>())
    v = cast.getInput();
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &f.getBody().front() ||
      !f.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr))
    return {};
  return arg;
}

bool computesOwnStatistics(Operation *op) {
  auto bn = dyn_cast<BatchNormOp>(op);
  if (!bn)
    return false;
  // Whether `v` is computed from the batch norm's input (a walk up its
  // defining ops, a few hundred at most: the statistics are a few ops).
  auto fromInput = [&](Value v) {
    SmallVector<Value> work{v};
    llvm::DenseSet<Value> seen;
    while (!work.empty() && seen.size() < 256) {
      Value w = work.pop_back_val();
      if (w == bn.getInput())
        return true;
      if (!seen.insert(w).second)
        continue;
      if (Operation *def = w.getDefiningOp())
        llvm::append_range(work, def->getOperands());
    }
    return false;
  };
  return fromInput(bn.getMean()) && fromInput(bn.getVariance());
}

llvm::DenseSet<Value> runningStatArgs(func::FuncOp f) {
  llvm::DenseSet<Value> args;
  if (f.isExternal())
    return args;
  f.walk([&](Operation *op) {
    SmallVector<Value, 2> reads;
    if (auto bn = dyn_cast<BatchNormOp>(op))
      reads = {bn.getMean(), bn.getVariance()};
    else if (op->hasAttr(SmpDialect::kRunningStatAttr) &&
             op->getNumOperands() > 0)
      reads = {op->getOperand(0)};
    for (Value v : reads)
      if (BlockArgument arg = paramBehind(f, v))
        args.insert(arg);
  });
  return args;
}

bool isTrainedParam(func::FuncOp f, unsigned i, const llvm::Regex *freeze,
                    const llvm::DenseSet<Value> &runningStats) {
  auto name = f.getArgAttrOfType<StringAttr>(i, SmpDialect::kParamAttr);
  if (!name || f.getArgAttr(i, SmpDialect::kFrozenAttr) ||
      (freeze && freeze->match(name.getValue())))
    return false;
  auto type = dyn_cast<RankedTensorType>(f.getArgument(i).getType());
  return type && isa<FloatType>(type.getElementType()) &&
         !runningStats.contains(f.getArgument(i));
}

void untrainedParams(func::FuncOp f, const llvm::Regex *freeze,
                     std::vector<std::string> &buffers,
                     std::vector<std::string> &frozen) {
  llvm::DenseSet<Value> running = runningStatArgs(f);
  std::set<std::string> b, z;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto name = f.getArgAttrOfType<StringAttr>(i, SmpDialect::kParamAttr);
    if (!name || isTrainedParam(f, i, freeze, running))
      continue;
    bool byFlag = freeze && freeze->match(name.getValue()) &&
                  isTrainedParam(f, i, nullptr, running);
    (byFlag ? z : b).insert(name.str());
  }
  buffers.assign(b.begin(), b.end());
  frozen.assign(z.begin(), z.end());
}

} // namespace smp
