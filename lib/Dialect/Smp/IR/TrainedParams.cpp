//===- TrainedParams.cpp - Which parameters a training step trains --------===//

#include "smp/Dialect/Smp/IR/TrainedParams.h"

#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

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

} // namespace smp
