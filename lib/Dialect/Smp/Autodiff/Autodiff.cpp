//===- Autodiff.cpp - Reverse-mode automatic differentiation --------------===//
//
// Walks a block backwards from a scalar loss, asking each op for its
// vector-Jacobian product (AutodiffOpInterface, whose models live with the
// op families in lib/Dialect/Smp/OpModels) and summing the gradients of
// values used more than once. Only float values that depend on a value
// we differentiate with respect to get gradients (not through an op marked
// smp.no_grad: a loss's normaliser counted from its inputs' weights).
//
//===----------------------------------------------------------------------===//

#include "smp/Dialect/Smp/Autodiff/Autodiff.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "smp/Dialect/Smp/Autodiff/GradientUtils.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace smp {
namespace {

/// The op just before the builder's insertion point (nullptr at the start).
Operation *lastInserted(OpBuilder &b) {
  Block::iterator ip = b.getInsertionPoint();
  return ip == b.getInsertionBlock()->begin() ? nullptr : &*std::prev(ip);
}

/// Gives the ops built after `mark` the pipeline stage of `from` (when it has
/// one), so that a backward op runs on the stage of its forward op.
void inheritStage(OpBuilder &b, Operation *mark, Operation *from) {
  Attribute stage = from ? from->getAttr("smp.stage") : Attribute();
  if (!stage)
    return;
  Block *block = b.getInsertionBlock();
  Block::iterator ip = b.getInsertionPoint();
  for (Block::iterator it = mark ? std::next(mark->getIterator())
                                 : block->begin();
       it != ip; ++it)
    if (!it->hasTrait<OpTrait::ConstantLike>())
      it->setAttr("smp.stage", stage);
}

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

} // namespace

FailureOr<SmallVector<Value>> differentiate(OpBuilder &builder, Block &body,
                                            Value loss, ArrayRef<Value> wrt) {
  // Forward: which values depend on what we differentiate.
  llvm::DenseSet<Value> active(wrt.begin(), wrt.end());
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    ops.push_back(&op);
    bool anyActive = llvm::any_of(op.getOperands(),
                                  [&](Value v) { return active.count(v); });
    if (!anyActive || op.hasAttr(SmpDialect::kNoGradAttr))
      continue;
    for (Value r : op.getResults())
      if (isFloatTensor(r))
        active.insert(r);
  }
  SmallVector<Value> result(wrt.size());
  if (!active.count(loss))
    return result; // nothing reaches the loss

  llvm::DenseMap<Value, Value> grads;
  autodiff::Grad G{builder, loss.getLoc()};
  Operation *mark = lastInserted(builder);
  grads[loss] = G.reshape(G.scalar(loss, 1.0),
                          autodiff::typeOf(loss).getShape());
  inheritStage(builder, mark, loss.getDefiningOp());
  // Backward, in reverse program order (a topological order).
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> gy;
    bool anyGrad = false;
    for (Value r : op->getResults()) {
      Value g = grads.lookup(r);
      gy.push_back(g);
      anyGrad |= bool(g);
    }
    if (!anyGrad)
      continue;
    SmallVector<bool> need;
    bool anyNeed = false;
    for (Value v : op->getOperands()) {
      need.push_back(active.count(v) && isFloatTensor(v));
      anyNeed |= need.back();
    }
    if (!anyNeed)
      continue;
    auto iface = dyn_cast<AutodiffOpInterface>(op);
    if (!iface)
      return op->emitOpError("has no gradient (autodiff cannot go through "
                             "it); freeze the parameters that reach it");
    SmallVector<Value> gx;
    mark = lastInserted(builder);
    if (failed(iface.buildVJP(builder, gy, need, gx)))
      return failure();
    for (auto [operand, g, needed] :
         llvm::zip(op->getOperands(), gx, need)) {
      if (!g || !needed)
        continue;
      Value &slot = grads[operand];
      slot = slot ? G.add(slot, g) : g;
    }
    inheritStage(builder, mark, op);
  }
  for (auto [i, v] : llvm::enumerate(wrt))
    result[i] = grads.lookup(v);
  return result;
}

} // namespace smp
