//===- PathOps.cpp - The ops on the parameters' path ----------------------===//

#include "smp/Dialect/Smp/Transforms/PathOps.h"

#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp {

PathOps findPathOps(func::FuncOp f, size_t limit) {
  PathOps result;
  Block &body = f.getBody().front();
  llvm::DenseSet<Value> staged;
  for (BlockArgument arg : body.getArguments())
    if (f.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr))
      result.weightOnly.insert(arg);
  size_t index = 0;
  for (Operation &op : body.without_terminator()) {
    if (limit && index++ >= limit)
      break;
    if (op.hasTrait<OpTrait::ConstantLike>())
      continue;
    bool anyWeight = false, anyPath = false, anyOther = false;
    for (Value v : op.getOperands()) {
      if (result.weightOnly.count(v))
        anyWeight = true;
      else if (staged.count(v))
        anyPath = true;
      else if (!v.getDefiningOp() ||
               !v.getDefiningOp()->hasTrait<OpTrait::ConstantLike>())
        anyOther = true;
    }
    if (anyWeight && !anyPath && !anyOther) {
      for (Value r : op.getResults())
        result.weightOnly.insert(r);
      result.weightOps.push_back(&op);
      continue;
    }
    if (!anyWeight && !anyPath)
      continue; // on inputs only
    for (Value r : op.getResults())
      staged.insert(r);
    result.path.push_back(&op);
  }
  return result;
}

bool isNarrowingCast(Operation *op) {
  auto cast = dyn_cast<CastOp>(op);
  if (!cast)
    return false;
  auto from = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getOperand()));
  auto to = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getType()));
  return from && to && to.getWidth() < from.getWidth();
}

llvm::MapVector<Operation *, Value> singleWeightOps(Block &body,
                                                   ArrayRef<Value> params) {
  llvm::MapVector<Operation *, Value> ops;
  llvm::DenseMap<Value, Value> paramOf; // a parameter or a result of `ops`
  for (Value p : params)
    paramOf[p] = p;
  for (Operation &op : body) {
    if (op.getNumResults() != 1 || op.getNumRegions() != 0 ||
        !op.getDialect() ||
        op.getDialect()->getNamespace() != SmpDialect::getDialectNamespace() ||
        op.hasTrait<OpTrait::ConstantLike>() || !isMemoryEffectFree(&op))
      continue;
    Value from;
    bool only = true;
    for (Value v : op.getOperands()) {
      Value p = paramOf.lookup(v);
      if (p && (!from || from == p))
        from = p;
      else if (!v.getDefiningOp() ||
               !v.getDefiningOp()->hasTrait<OpTrait::ConstantLike>())
        only = false;
    }
    if (from && only) {
      ops.insert({&op, from});
      paramOf[op.getResult(0)] = from;
    }
  }
  return ops;
}

} // namespace smp
