//===- OwnLossCount.cpp - Which labels a model's own loss counts ----------===//
//
// See OwnLossCount.h. The labels' path to the cross-entropy is run on
// positions: the input's flat element indices, -1 for the -100s a concat
// adds, moved as the ops move the labels.
//
//===----------------------------------------------------------------------===//

#include "OwnLossCount.h"

#include "TrainStepUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"

#include <functional>
#include <optional>

using namespace mlir;

namespace smp {
namespace {

/// Positions of a value's elements, row-major.
struct Positions {
  SmallVector<int64_t> shape;
  std::vector<int64_t> at;
};

/// The most positions followed (a global batch's labels; 128 MiB).
constexpr int64_t kMaxPositions = int64_t(1) << 24;

std::optional<SmallVector<int64_t>> staticShape(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape() || t.getNumElements() > kMaxPositions)
    return std::nullopt;
  return SmallVector<int64_t>(t.getShape());
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

Positions slice(const Positions &in, SliceOp op, ArrayRef<int64_t> shape) {
  Positions out{SmallVector<int64_t>(shape), {}};
  int64_t n = 1;
  for (int64_t e : shape)
    n *= e;
  out.at.resize(n);
  SmallVector<int64_t> from = stridesOf(in.shape), idx(shape.size(), 0);
  ArrayRef<int64_t> starts = op.getStarts(), steps = op.getSteps();
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      src += (starts[d] + idx[d] * steps[d]) * from[d];
    out.at[i] = in.at[src];
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

Positions concat(ArrayRef<Positions> ins, int64_t axis,
                 ArrayRef<int64_t> shape) {
  Positions out{SmallVector<int64_t>(shape), {}};
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (const Positions &in : ins) {
      int64_t block = static_cast<int64_t>(in.at.size()) / outer;
      out.at.insert(out.at.end(), in.at.begin() + o * block,
                    in.at.begin() + (o + 1) * block);
    }
  return out;
}

/// The positions of `v`, computed from the input `labels` by slices,
/// reshapes, casts and concatenations with -100; none otherwise.
std::optional<Positions> positionsOf(Value v, BlockArgument labels) {
  std::optional<SmallVector<int64_t>> shape = staticShape(v);
  if (!shape)
    return std::nullopt;
  int64_t n = 1;
  for (int64_t e : *shape)
    n *= e;
  if (v == labels) {
    Positions p{*shape, std::vector<int64_t>(n)};
    for (int64_t i = 0; i < n; ++i)
      p.at[i] = i;
    return p;
  }
  if (getSplatConstant(v) == -100.0)
    return Positions{*shape, std::vector<int64_t>(n, -1)};
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  if (isa<ReshapeOp, CastOp>(op)) {
    std::optional<Positions> in = positionsOf(op->getOperand(0), labels);
    if (in)
      in->shape = *shape;
    return in;
  }
  if (auto s = dyn_cast<SliceOp>(op)) {
    std::optional<Positions> in = positionsOf(s.getInput(), labels);
    return in ? std::optional<Positions>(slice(*in, s, *shape)) : std::nullopt;
  }
  if (auto c = dyn_cast<ConcatOp>(op)) {
    SmallVector<Positions> ins;
    for (Value in : c.getInputs()) {
      std::optional<Positions> p = positionsOf(in, labels);
      if (!p)
        return std::nullopt;
      ins.push_back(std::move(*p));
    }
    return concat(ins, c.getAxis(), *shape);
  }
  return std::nullopt;
}

/// The cross-entropy mean `loss` is an affine function of (scalings and
/// offsets by values that do not depend on the batch), or null.
CrossEntropyOp affineCrossEntropy(func::FuncOp f, Value loss,
                                  std::string &why) {
  llvm::DenseMap<Value, bool> memo;
  auto fromBatch = [&](Value v) {
    return dependsOnArgument(v, memo, isBatchInput);
  };
  Value v = loss;
  while (Operation *op = v.getDefiningOp()) {
    if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
      if (ce.getReduction() != Reduction::mean || ce.getWeights())
        break;
      return ce;
    }
    if (isa<NegOp, CastOp, ReshapeOp>(op)) {
      v = op->getOperand(0);
      continue;
    }
    if (!isa<AddOp, SubOp, MulOp, DivOp>(op))
      break;
    bool lhs = fromBatch(op->getOperand(0)), rhs = fromBatch(op->getOperand(1));
    if (lhs == rhs || (isa<DivOp>(op) && rhs))
      break;
    v = op->getOperand(lhs ? 0 : 1);
  }
  why = "its loss is neither a cross-entropy mean without class weights, "
        "scaled or offset by values the batch does not change, nor a sum over "
        "the samples";
  return nullptr;
}

} // namespace

bool lossSumsSamples(func::FuncOp f, Value loss) {
  llvm::DenseMap<Value, bool> memo;
  auto fromBatch = [&](Value v) {
    return dependsOnArgument(v, memo, isBatchInput);
  };
  std::function<bool(Value)> sums = [&](Value v) {
    Operation *op = v.getDefiningOp();
    if (!op || !fromBatch(v))
      return false; // an input, or an offset the batch does not change
    if (auto ce = dyn_cast<CrossEntropyOp>(op))
      return ce.getReduction() == Reduction::sum;
    if (isa<ReduceSumOp>(op))
      return true;
    if (isa<NegOp, CastOp, ReshapeOp>(op))
      return sums(op->getOperand(0));
    if (isa<AddOp, SubOp>(op))
      return sums(op->getOperand(0)) && sums(op->getOperand(1));
    if (isa<MulOp>(op))
      return (!fromBatch(op->getOperand(0)) && sums(op->getOperand(1))) ||
             (!fromBatch(op->getOperand(1)) && sums(op->getOperand(0)));
    if (isa<DivOp>(op))
      return !fromBatch(op->getOperand(1)) && sums(op->getOperand(0));
    return false;
  };
  return sums(loss);
}

SmallVector<int64_t> countedLabelRanges(func::FuncOp f, Value loss,
                                        StringRef labels, std::string &why) {
  CrossEntropyOp ce = affineCrossEntropy(f, loss, why);
  if (!ce)
    return {};
  BlockArgument arg = namedInput(f, labels);
  std::optional<Positions> p;
  std::optional<SmallVector<int64_t>> shape;
  if (arg)
    shape = staticShape(arg);
  if (shape && !shape->empty() && (*shape)[0] > 0)
    p = positionsOf(ce.getLabels(), arg);
  why = "its cross-entropy's labels are not the input '" + labels.str() +
        "' moved by slices, reshapes and concatenations with -100";
  if (!p)
    return {};
  int64_t total = 1;
  for (int64_t e : *shape)
    total *= e;
  int64_t samples = (*shape)[0], per = total / samples;
  std::vector<char> read(total, 0);
  for (int64_t i : p->at) {
    if (i < 0)
      continue;
    if (read[i]) {
      why = "its cross-entropy reads a label of the input '" + labels.str() +
            "' twice";
      return {};
    }
    read[i] = 1;
  }
  for (int64_t s = 1; s < samples; ++s)
    if (!std::equal(read.begin(), read.begin() + per, read.begin() + s * per)) {
      why = "its cross-entropy reads other labels of one sample of '" +
            labels.str() + "' than of another";
      return {};
    }
  SmallVector<int64_t> ranges;
  for (int64_t r = 0; r < per; ++r) {
    if (!read[r])
      continue;
    if (!ranges.empty() && ranges.back() == r)
      ranges.back() = r + 1;
    else
      ranges.append({r, r + 1});
  }
  if (ranges.empty())
    why =
        "its cross-entropy reads none of the labels of '" + labels.str() + "'";
  else
    why.clear();
  return ranges;
}

} // namespace smp
