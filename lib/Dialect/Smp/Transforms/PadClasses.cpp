//===- PadClasses.cpp - smp-pad-classes -----------------------------------===//
//
// Implements `smp-pad-classes`: a language model's logits [tokens, V] are the
// step's largest products (the LM head, and the two products of its
// gradient: for GPT-2 at 16 x 1024 tokens a third of the step's FLOPs). With
// GPT-2's V = 50257 a row of 16-bit logits is not a multiple of 16 bytes, so
// cuBLASLt may only run those products with kernels for unaligned rows
// (nanoGPT measured padding to 50304 as its largest single speed-up). The
// weight is padded with zero rows once a step instead, the product
// computes Vp aligned columns, and the loss reads only the first V:
//
//   Wp = concat(W, zeros)               [Vp, C] (or [C, Vp])
//   L = matmul(h, Wp)                   [.., Vp]
//   loss = cross_entropy(L, y) {classes = V}
//   G = cross_entropy_grad(L, y, s) {classes = V}   zero past V
//   dh = matmul(G, Wp)                  the padding contracts to 0
//                                       (another operand gets zeros too)
//   dW = slice(matmul(G^T, h))          [Vp, C] -> [V, C]
//
// Every value the step had keeps its numbers: the padded columns are
// computed and read by no loss (nor by an evaluation's label_rank, whose
// `classes` names the first V already), and add exact zeros where they are
// contracted. A logits value read by anything but the loss (an output, a
// softmax), a gradient read by an op this pass does not know, or fewer
// classes than min-classes (a classifier's) stays unpadded.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-pad-classes"

namespace smp {
#define GEN_PASS_DEF_SMPPADCLASSESPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// The padded class count: a multiple of 64 (8 below 4096 classes: 16
/// bytes of f16/bf16, without tripling a tiny vocabulary).
int64_t paddedClasses(int64_t v) {
  int64_t m = v >= 4096 ? 64 : 8;
  return (v + m - 1) / m * m;
}

/// An operand contracting the classes along its `axis`.
struct Contracted {
  OpOperand *operand;
  int64_t axis;
};

/// A result to slice back to `classes` along `axis` after padding.
struct Sliced {
  Value result;
  int64_t axis;
};

/// One LM head's rewrite, found before anything changes.
struct Plan {
  Operation *head = nullptr; // matmul or matmul_bias producing the logits
  Value weight;              // its rank-2 rhs
  int64_t weightAxis = 0;    // the weight's class axis
  int64_t classes = 0, padded = 0;
  SmallVector<Operation *> losses;  // cross_entropy(_grad) of the logits
  SmallVector<Value> views;         // gradients and their reshapes
  SmallVector<Contracted> contract; // operands contracting the classes
  SmallVector<Sliced> sliced;       // results with a class axis
};

/// The readers of `g` (a gradient [.., classes] or a reshape of it keeping
/// its last dim), recorded in `p`; false for one this pass does not know.
bool planReaders(Value g, Plan &p) {
  p.views.push_back(g);
  for (OpOperand &use : g.getUses()) {
    Operation *user = use.getOwner();
    if (auto r = dyn_cast<ReshapeOp>(user)) {
      ArrayRef<int64_t> s = shapeOf(r.getResult());
      if (s.empty() || s.back() != p.classes || !planReaders(r, p))
        return false;
      continue;
    }
    if (auto mm = dyn_cast<MatMulOp>(user)) {
      if (mm.getLhs() == mm.getRhs())
        return false;
      bool lhs = use.getOperandNumber() == 0;
      bool contracted = lhs ? !mm.getTransposeLhs() : mm.getTransposeRhs();
      int64_t rank = shapeOf(mm.getResult()).size();
      if (!contracted) { // g's classes are the result's rows or columns
        p.sliced.push_back({mm.getResult(), lhs ? rank - 2 : rank - 1});
        continue;
      }
      // Contracted with the other operand's K axis: that gets zeros too
      // (the padded weight itself where it is the head's weight).
      OpOperand &other = mm->getOpOperand(lhs ? 1 : 0);
      bool otherT = lhs ? mm.getTransposeRhs() : mm.getTransposeLhs();
      int64_t otherRank = shapeOf(other.get()).size();
      if (otherRank < 2)
        return false;
      int64_t kAxis = otherRank - ((lhs != otherT) ? 2 : 1);
      p.contract.push_back({&other, kAxis});
      continue;
    }
    if (auto bg = dyn_cast<MatMulBiasGradOp>(user)) {
      if (use.getOperandNumber() != 0 || bg.getRhs() == g)
        return false;
      p.sliced.push_back({bg.getResult(), 0});
      p.sliced.push_back(
          {bg.getBiasGrad(),
           static_cast<int64_t>(shapeOf(bg.getBiasGrad()).size()) - 1});
      continue;
    }
    if (auto sum = dyn_cast<ReduceSumOp>(user)) {
      int64_t rank = shapeOf(g).size();
      bool keepsClasses = llvm::none_of(
          sum.getAxes(), [&](int64_t a) { return a == rank - 1 || a == -1; });
      ArrayRef<int64_t> s = shapeOf(sum.getResult());
      if (!keepsClasses || s.empty() || s.back() != p.classes)
        return false;
      p.sliced.push_back({sum.getResult(), static_cast<int64_t>(s.size()) - 1});
      continue;
    }
    return false;
  }
  return true;
}

/// The rewrite of the LM head producing `logits`, if every reader of the
/// logits and of their gradients is one this pass knows.
std::optional<Plan> planHead(Value logits, int64_t minClasses) {
  Operation *head = logits.getDefiningOp();
  if (!head || !isa<MatMulOp, MatMulBiasOp>(head))
    return std::nullopt;
  Plan p;
  p.head = head;
  p.weight = head->getOperand(1);
  bool transposeRhs = isa<MatMulOp>(head)
                          ? cast<MatMulOp>(head).getTransposeRhs()
                          : cast<MatMulBiasOp>(head).getTransposeRhs();
  if (shapeOf(p.weight).size() != 2 || head->getOperand(0) == p.weight)
    return std::nullopt;
  if (auto mb = dyn_cast<MatMulBiasOp>(head))
    if (shapeOf(mb.getBias()).size() != 1)
      return std::nullopt;
  p.weightAxis = transposeRhs ? 0 : 1;
  p.classes = shapeOf(logits).back();
  p.padded = paddedClasses(p.classes);
  if (p.classes % 8 == 0 || p.classes < minClasses)
    return std::nullopt;
  for (OpOperand &use : logits.getUses()) {
    Operation *user = use.getOwner();
    // An evaluation's label ranks read the first `classes` columns already.
    if (isa<LabelRankOp>(user) && use.getOperandNumber() == 0)
      continue;
    if (!isa<CrossEntropyOp, CrossEntropyGradOp>(user) ||
        use.getOperandNumber() != 0 || user->hasAttr("classes"))
      return std::nullopt;
    p.losses.push_back(user);
    if (auto grad = dyn_cast<CrossEntropyGradOp>(user))
      if (!planReaders(grad.getResult(), p))
        return std::nullopt;
  }
  // A gradient contracted with itself (g g^T) is padded already.
  for (const Contracted &c : p.contract)
    if (llvm::is_contained(p.views, c.operand->get()))
      return std::nullopt;
  return p;
}

/// `v` with its dim `axis` resized to `size`.
RankedTensorType resized(Value v, int64_t axis, int64_t size) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = size;
  return type.clone(shape);
}

/// concat(v, zeros) along `axis` to `size`, before `at` with its
/// annotations.
Value padWithZeros(OpBuilder &b, Operation *at, Value v, int64_t axis,
                   int64_t size) {
  auto type = cast<RankedTensorType>(v.getType());
  auto zerosType = resized(v, axis, size - type.getDimSize(axis));
  auto zeros = ConstantOp::create(
      b, at->getLoc(),
      DenseElementsAttr::get(zerosType, b.getZeroAttr(type.getElementType())));
  auto cat = ConcatOp::create(b, at->getLoc(), ValueRange{v, zeros},
                              b.getI64IntegerAttr(axis));
  for (Operation *op : {zeros.getOperation(), cat.getOperation()})
    op->setDiscardableAttrs(at->getDiscardableAttrDictionary());
  return cat;
}

void rewrite(Plan &p) {
  OpBuilder b(p.head);
  Value padded = padWithZeros(b, p.head, p.weight, p.weightAxis, p.padded);
  p.head->getOpOperand(1).set(padded);
  if (auto mb = dyn_cast<MatMulBiasOp>(p.head))
    mb.getBiasMutable().assign(
        padWithZeros(b, p.head, mb.getBias(), 0, p.padded));
  Value logits = p.head->getResult(0);
  int64_t last = shapeOf(logits).size() - 1;
  logits.setType(resized(logits, last, p.padded));
  IntegerAttr classes = b.getI64IntegerAttr(p.classes);
  for (Operation *loss : p.losses)
    loss->setAttr("classes", classes);
  for (Value v : p.views)
    v.setType(resized(v, shapeOf(v).size() - 1, p.padded));
  for (Contracted &c : p.contract) {
    if (c.operand->get() == p.weight && c.axis == p.weightAxis) {
      c.operand->set(padded);
      continue;
    }
    Operation *user = c.operand->getOwner();
    b.setInsertionPoint(user);
    c.operand->set(padWithZeros(b, user, c.operand->get(), c.axis, p.padded));
  }
  llvm::DenseMap<Operation *, Operation *> after; // an op -> its last slice
  for (Sliced &s : p.sliced) {
    Operation *op = s.result.getDefiningOp();
    Operation *&last = after[op];
    b.setInsertionPointAfter(last ? last : op);
    auto type = cast<RankedTensorType>(s.result.getType());
    int64_t rank = type.getRank();
    SmallVector<int64_t> starts(rank, 0), limits(type.getShape()),
        steps(rank, 1);
    s.result.setType(resized(s.result, s.axis, p.padded));
    auto slice =
        SliceOp::create(b, op->getLoc(), type, s.result, starts, limits, steps);
    slice->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    s.result.replaceAllUsesExcept(slice, slice);
    last = slice;
  }
}

struct SmpPadClassesPass
    : public smp::impl::SmpPadClassesPassBase<SmpPadClassesPass> {
  using SmpPadClassesPassBase::SmpPadClassesPassBase;
  void runOnOperation() override {
    SmallVector<Value> logits;
    getOperation().walk([&](CrossEntropyOp op) {
      if (!llvm::is_contained(logits, op.getLogits()))
        logits.push_back(op.getLogits());
    });
    for (Value l : logits)
      if (std::optional<Plan> p = planHead(l, minClasses))
        rewrite(*p);
  }
};

} // namespace
