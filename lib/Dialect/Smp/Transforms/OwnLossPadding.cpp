//===- OwnLossPadding.cpp - Whether padding leaves a model's loss alone ---===//
//
// See OwnLossPadding.h. Elements "of a padding sample" are those that
// SampleDims places in a padding sample's run of the leading dim: every
// value followed below is sample-major along dim 0 (SampleDims::leading),
// or a constant, so that an op's padding elements come from its operands'
// padding elements.
//
//===----------------------------------------------------------------------===//

#include "OwnLossPadding.h"

#include "TrainStepUtils.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"

#include "smp/Dialect/Smp/IR/SmpOps.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace smp {
namespace {

/// Whether `v` is a constant whose every element is `value`.
bool isSplat(Value v, int64_t value) {
  return getSplatConstant(v) == static_cast<double>(value);
}

bool isScalarConstant(Value v) {
  DenseElementsAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.getNumElements() == 1;
}

bool sameShape(Value a, Value b) {
  return cast<ShapedType>(a.getType()).getShape() ==
         cast<ShapedType>(b.getType()).getShape();
}

std::string opName(Operation *op) {
  return "'" + op->getName().getStringRef().str() + "'";
}

/// Whether `cond` is `v == -100` (`taken` false) or `!(v == -100)`
/// (`taken` true): a where whose branch `v` is taken where `cond` is
/// `taken` never passes v's -100s.
bool isIgnoreTest(Value cond, Value v, bool taken) {
  Operation *op = cond.getDefiningOp();
  if (auto n = dyn_cast_or_null<NotOp>(op))
    return isIgnoreTest(n.getInput(), v, !taken);
  auto eq = dyn_cast_or_null<EqualOp>(op);
  if (!eq || taken)
    return false;
  Value a = eq.getOperand(0), b = eq.getOperand(1);
  return (a == v && isSplat(b, -100)) || (b == v && isSplat(a, -100));
}

} // namespace

std::string OwnLossPadding::readAsData(StringRef labels) {
  BlockArgument a = namedInput(f, labels);
  if (!a)
    return "";
  llvm::DenseSet<Value> seen;
  std::string kept = labelsInput; // atPadding may set it
  Operation *op = dataReader(a, seen);
  labelsInput = kept;
  if (!op)
    return "";
  std::string node;
  if (auto loc = dyn_cast<NameLoc>(op->getLoc()))
    node = " (node '" + loc.getName().str() + "')";
  return "reads its labels from the input '" + labels.str() +
         "', which the model also reads with " + opName(op) + node +
         ", where padding's -100 is not a value it takes";
}

Operation *OwnLossPadding::dataReader(Value v, llvm::DenseSet<Value> &seen) {
  if (!seen.insert(v).second)
    return nullptr;
  for (OpOperand &use : v.getUses()) {
    Operation *op = use.getOwner();
    if (isa<func::ReturnOp, EqualOp, LessOp, GreaterOp>(op))
      continue;
    if (auto ce = dyn_cast<CrossEntropyOp>(op);
        ce && use.get() == ce.getLabels())
      continue;
    if (auto w = dyn_cast<WhereOp>(op)) {
      // The branch not taken at padding; the -100s replaced
      // (labels.masked_fill(labels == -100, pad): T5's, BART's decoder
      // inputs).
      std::optional<bool> c = atPadding(w.getCondition());
      bool lhs = use.get() == w.getLhs();
      if (use.get() == w.getCondition() || (c && lhs != *c) ||
          isIgnoreTest(w.getCondition(), use.get(), lhs))
        continue;
    } else if (!isa<SliceOp, ReshapeOp, TransposeOp, ExpandOp, CastOp,
                    ConcatOp>(op)) {
      return op;
    }
    if (Operation *r = dataReader(op->getResult(0), seen))
      return r;
  }
  return nullptr;
}

bool OwnLossPadding::fromBatch(Value v) {
  return dependsOnArgument(v, batchMemo, isBatchInput);
}

std::string OwnLossPadding::whyNot(Value loss, StringRef name) {
  labelsInput.clear();
  std::string why = padFree(loss);
  if (why.empty() && labelsInput.empty())
    why = "reads no labels that padding could set to -100";
  if (why.empty())
    why = readAsData(labelsInput);
  if (why.empty())
    return "";
  labelsInput.clear();
  return "the model's own loss output '" + name.str() + "' " + why;
}

std::string OwnLossPadding::padFree(Value v) {
  if (!fromBatch(v))
    return "";
  Operation *op = v.getDefiningOp();
  if (!op)
    return "is an input";
  if (isa<CrossEntropyOp>(op))
    return crossEntropy(op);
  if (auto r = dyn_cast<ReduceSumOp>(op)) {
    if (vanishes(r.getInput()))
      return "";
    return "sums values with 'smp.reduce_sum' that padding samples change "
           "(they leave out only a cross-entropy's labels -100 and what "
           "vanishes there)";
  }
  if (isa<ReduceMeanOp>(op))
    return "averages with 'smp.reduce_mean' over every element, the padding "
           "samples' included";
  if (isa<MulOp, DivOp>(op))
    for (Value c : op->getOperands()) {
      if (!isScalarConstant(c))
        continue;
      const char *verb = isa<MulOp>(op) ? "multiplies" : "divides";
      if (op->hasAttr(SmpDialect::kBatchScaledAttr))
        return std::string(verb) +
               " by a value folded from the batch's shape (x.size(0)): a "
               "padded batch's is the global batch, not the short one";
      if (auto m = op->getParentOfType<ModuleOp>();
          m && m->hasAttr(SmpDialect::kBatchScalingUnknownAttr))
        return std::string(verb) +
               " by a constant that smp cannot tell from one folded from the "
               "batch's shape (x.size(0)), which a padded batch holds at the "
               "global batch";
    }
  if (isa<AddOp, SubOp, MulOp, DivOp, NegOp, CastOp, ReshapeOp>(op)) {
    for (Value in : op->getOperands())
      if (std::string why = padFree(in); !why.empty())
        return why;
    return "";
  }
  return "is computed by " + opName(op) +
         ", which smp cannot tell to leave padding samples out";
}

std::string OwnLossPadding::crossEntropy(Operation *op) {
  auto ce = cast<CrossEntropyOp>(op);
  if (ce.getIgnoreIndex() != -100)
    return "is a cross-entropy that ignores the label " +
           std::to_string(ce.getIgnoreIndex()) + ", not -100 (the padding's)";
  if (std::string why = dims.notLeading(ce.getLogits()); !why.empty())
    return "is a cross-entropy whose logits are not computed sample by "
           "sample (" +
           why + ")";
  if (Value w = ce.getWeights(); w && fromBatch(w))
    return "is a cross-entropy whose class weights are computed from the "
           "batch";
  std::string before = labelsInput;
  if (!ignoredAtPadding(ce.getLabels())) {
    if (!before.empty() && labelsInput != before)
      return "reads labels from two inputs ('" + before + "' and '" +
             labelsInput + "'), and padding sets one";
    return "is a cross-entropy whose labels are not an input's values "
           "(sliced, reshaped or shifted), which padding could set to -100";
  }
  return "";
}

bool OwnLossPadding::ignoredAtPadding(Value v) {
  if (isSplat(v, -100))
    return true;
  // Integers that hold -100 (a cast to i1 does not).
  auto type = dyn_cast<IntegerType>(getElementTypeOrSelf(v));
  if (!dims.leading(v) || !type || type.getWidth() < 8)
    return false;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto n = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                            SmpDialect::kInputAttr);
    if (!n)
      return false;
    if (labelsInput.empty())
      labelsInput = n.str();
    else if (labelsInput != n.getValue()) {
      labelsInput = n.str(); // crossEntropy names both
      return false;
    }
    return true;
  }
  Operation *op = v.getDefiningOp();
  if (auto c = dyn_cast<ConcatOp>(op))
    return llvm::all_of(c.getInputs(),
                        [&](Value in) { return ignoredAtPadding(in); });
  if (isa<SliceOp, ReshapeOp, TransposeOp, ExpandOp, CastOp>(op))
    return ignoredAtPadding(op->getOperand(0));
  if (auto w = dyn_cast<WhereOp>(op))
    return ignoredAtPadding(w.getLhs()) && ignoredAtPadding(w.getRhs());
  return false;
}

bool OwnLossPadding::vanishes(Value v) {
  if (isSplat(v, 0))
    return true;
  if (!dims.leading(v))
    return false;
  Operation *op = v.getDefiningOp();
  if (!op)
    return false;
  // An operand broadcast into `v` must be a constant or of its shape (its
  // padding elements then are v's).
  auto elementwise = [&](Value in) {
    return isSplat(in, 0) || (sameShape(in, v) && vanishes(in));
  };
  if (auto ce = dyn_cast<CrossEntropyOp>(op))
    return ce.getReduction() == Reduction::none && crossEntropy(op).empty();
  if (auto w = dyn_cast<WhereOp>(op)) {
    std::optional<bool> c = atPadding(w.getCondition());
    bool lhs = elementwise(w.getLhs()), rhs = elementwise(w.getRhs());
    return (c == true && lhs) || (c == false && rhs) || (lhs && rhs);
  }
  if (isa<MulOp>(op))
    return elementwise(op->getOperand(0)) || elementwise(op->getOperand(1));
  if (isa<DivOp>(op))
    return !fromBatch(op->getOperand(1)) && elementwise(op->getOperand(0));
  if (isa<AddOp, SubOp>(op))
    return elementwise(op->getOperand(0)) && elementwise(op->getOperand(1));
  if (auto c = dyn_cast<CastOp>(op);
      c && getElementTypeOrSelf(c.getInput()).isInteger(1))
    return atPadding(c.getInput()) == false;
  if (isa<NegOp, CastOp, ReshapeOp, TransposeOp, SliceOp, ExpandOp>(op))
    return vanishes(op->getOperand(0));
  return false;
}

std::optional<bool> OwnLossPadding::atPadding(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || !dims.leading(v))
    return std::nullopt;
  if (auto n = dyn_cast<NotOp>(op)) {
    if (std::optional<bool> x = atPadding(n.getInput()))
      return !*x;
    return std::nullopt;
  }
  if (isa<EqualOp>(op)) {
    Value a = op->getOperand(0), b = op->getOperand(1);
    if (isSplat(a, -100))
      std::swap(a, b);
    if (isSplat(b, -100) && sameShape(a, v) && ignoredAtPadding(a))
      return true;
  }
  return std::nullopt;
}

} // namespace smp
