//===- EvalAccuracy.cpp - An evaluation's accuracy ------------------------===//
//
// See EvalAccuracy.h. A row is a hit when no class ranks before its label
// (smp.label_rank 0): with the rows' label logits known (all-reduced by
// the vocabulary-parallel loss), each tp rank ranks its shard's classes and
// the ranks add up, so no rank holds more than its shard of the logits.
// The confusion matrix is one product: the labels' one-hot rows (zero where
// the label is not counted) transposed, times the argmax's one-hot rows
// (ArgMax's composition: the first index where the row holds its maximum,
// or a NaN), exact in f32 up to 2^24 counts.
//
//===----------------------------------------------------------------------===//

#include "EvalAccuracy.h"

#include "TrainStepUtils.h"
#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Matchers.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp {

namespace {

/// The ops `v` is computed from, `v`'s own included.
SetVector<Operation *> computedFrom(Value v) {
  SetVector<Operation *> slice;
  BackwardSliceOptions options;
  options.inclusive = true;
  options.omitBlockArguments = true;
  (void)getBackwardSlice(v, &slice, options);
  return slice;
}

/// Whether `v` is computed from a parameter (an argument marked
/// smp.param) of `f`.
bool readsParameter(func::FuncOp f, Value v) {
  auto isParam = [&](Value x) {
    auto arg = dyn_cast<BlockArgument>(x);
    return arg && arg.getOwner() == &f.getBody().front() &&
           f.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr);
  };
  if (isParam(v))
    return true;
  for (Operation *op : computedFrom(v))
    if (llvm::any_of(op->getOperands(), isParam))
      return true;
  return false;
}

/// The `d` of a mean of d * d or d ^ 2 over every element.
Value squaredDifference(ReduceMeanOp mean) {
  auto in = cast<RankedTensorType>(mean.getInput().getType());
  if (cast<RankedTensorType>(mean.getType()).getNumElements() != 1 ||
      in.getNumElements() == 1)
    return {};
  Operation *sq = mean.getInput().getDefiningOp();
  if (auto mul = dyn_cast_or_null<MulOp>(sq);
      mul && mul.getLhs() == mul.getRhs())
    return mul.getLhs();
  if (auto pow = dyn_cast_or_null<PowOp>(sq)) {
    DenseElementsAttr two;
    if (matchPattern(pow.getRhs(), m_Constant(&two)) && two.isSplat() &&
        isa<FloatType>(two.getElementType()) &&
        two.getSplatValue<APFloat>().convertToDouble() == 2.0)
      return pow.getLhs();
  }
  return {};
}

} // namespace

int64_t ownLossCrossEntropies(Value loss) {
  return llvm::count_if(computedFrom(loss),
                        [](Operation *op) { return isa<CrossEntropyOp>(op); });
}

FailureOr<std::pair<Value, Value>> ownLossSquaredError(func::FuncOp f,
                                                       Value loss,
                                                       StringRef name,
                                                       StringRef flag) {
  SmallVector<std::pair<Value, Value>> found;
  for (Operation *op : computedFrom(loss))
    if (auto mean = dyn_cast<ReduceMeanOp>(op))
      if (Value d = squaredDifference(mean))
        if (auto sub = d.getDefiningOp<SubOp>()) {
          // MSELoss(input, target): input - target, the input the model's.
          Value a = sub.getLhs(), t = sub.getRhs();
          if (!readsParameter(f, a) && readsParameter(f, t))
            std::swap(a, t);
          if (readsParameter(f, a) && !readsParameter(f, t) &&
              a.getType() == t.getType())
            found.push_back({a, t});
        }
  if (found.size() != 1)
    return f.emitError()
           << flag << ": the model's own loss '" << name
           << "' is computed from "
           << (found.empty()
                   ? std::string("no mean squared error")
                   : std::to_string(found.size()) + " mean squared errors")
           << " of an output and a target (nn.MSELoss, a regression's "
              "loss); its predictions are the values of exactly one (export "
              "the model's output and pass --loss mse:OUTPUT:TARGET)";
  return found.front();
}

FailureOr<AccuracyOperands> ownLossCrossEntropy(func::FuncOp f, Value loss,
                                                StringRef name,
                                                StringRef flag) {
  SmallVector<CrossEntropyOp> found;
  for (Operation *op : computedFrom(loss))
    if (auto ce = dyn_cast<CrossEntropyOp>(op))
      found.push_back(ce);
  if (found.size() != 1) {
    f.emitError()
        << flag << ": the model's own loss '" << name << "' is computed from "
        << (found.empty() ? std::string("no cross-entropy")
                          : std::to_string(found.size()) + " cross-entropies")
        << "; an evaluation's metrics need exactly one, whose logits' "
           "argmax is compared with its labels (leave "
        << flag
        << " out, or export the model's logits and pass --loss "
           "cross_entropy:LOGITS:LABELS, or mse:OUTPUT:TARGET for a "
           "regression)";
    return failure();
  }
  CrossEntropyOp ce = found.front();
  AccuracyOperands a;
  a.logits = ce.getLogits();
  a.labels = ce.getLabels();
  a.ignoreIndex = ce.getIgnoreIndex();
  a.classes = ce.getClasses().value_or(0);
  return a;
}

LogicalResult
ownLossEvaluation(func::FuncOp f, Value loss, StringRef name, StringRef flag,
                  ArrayRef<std::string> metrics, bool accuracy,
                  std::optional<AccuracyOperands> &crossEntropy,
                  std::optional<std::pair<Value, Value>> &squaredError) {
  // A loss of no cross-entropy is a regression's when asked for values, or
  // for predictions alone.
  bool values = llvm::any_of(metrics, smp::base::needsPredictions);
  bool classes =
      accuracy || !llvm::all_of(metrics, smp::base::needsPredictions);
  if (ownLossCrossEntropies(loss) == 0 && (values || !classes)) {
    std::string asked = flag.str();
    for (const std::string &m : metrics)
      if (smp::base::needsPredictions(m)) {
        asked = "--eval-metrics " + m;
        break;
      }
    auto r = ownLossSquaredError(f, loss, name, asked);
    if (failed(r) || failed(checkEvalMetricsFit(f, metrics, accuracy, name,
                                                /*regressionLoss=*/true)))
      return failure();
    squaredError = *r;
    return success();
  }
  if (failed(checkEvalMetricsFit(f, metrics, accuracy, name,
                                 /*regressionLoss=*/false)))
    return failure();
  auto a = ownLossCrossEntropy(f, loss, name, flag);
  if (failed(a))
    return failure();
  crossEntropy = *a;
  return success();
}

FailureOr<AccuracyCounts> buildAccuracy(OpBuilder &b, Location loc,
                                        func::FuncOp f,
                                        const AccuracyOperands &a,
                                        ArrayRef<int64_t> ks) {
  auto lt = cast<RankedTensorType>(a.logits.getType());
  auto labelsType = cast<RankedTensorType>(a.labels.getType());
  int64_t all = a.classes > 0 ? a.classes : lt.getShape().back();
  for (int64_t k : ks)
    if (k >= all)
      return f.emitError() << "--eval-metrics top" << k
                           << "_accuracy: the logits have " << all
                           << " classes, so every label is among its row's "
                           << k << " first; ask for a K below " << all;
  Value offset = a.offset;
  if (!offset)
    offset = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                               int64_t(0)));
  int64_t classes = a.classes > 0 ? a.classes : lt.getShape().back();
  Value rank = LabelRankOp::create(b, loc, a.logits, a.labels, offset, a.target,
                                   b.getI64IntegerAttr(classes),
                                   b.getI64IntegerAttr(a.ignoreIndex));
  if (a.target)
    rank = shard::AllReduceOp::create(b, loc, rank, "tp",
                                      ArrayRef<shard::GridAxis>{0},
                                      shard::ReductionKind::Sum);
  Type f32 = b.getF32Type();
  Value kept = keptLabels(b, loc, a.labels, a.ignoreIndex, f32);
  AccuracyCounts counts;
  for (int64_t k : ks) {
    // The ranks are whole numbers: below K is at most K - 1 (0: equal).
    Value among = k == 1
                      ? Value(EqualOp::create(b, loc, rank,
                                              scalarConst(b, loc, f32, 0.0)))
                      : Value(LessOp::create(
                            b, loc, rank,
                            scalarConst(b, loc, f32, static_cast<double>(k))));
    Value first = CastOp::create(b, loc, labelsType.clone(f32), among);
    counts.hits.push_back(
        reduceAll<ReduceSumOp>(b, loc, MulOp::create(b, loc, first, kept)));
  }
  counts.labels = reduceAll<ReduceSumOp>(b, loc, kept);
  return counts;
}

namespace {

/// Why --eval-metrics `name` cannot count `a`'s confusion matrix, or "".
std::string confusionRefusal(const AccuracyOperands &a, int64_t classes,
                             const std::string &name) {
  std::string at = "--eval-metrics " + name + ": ";
  if (a.target)
    return at + "--tp splits the logits' " + std::to_string(classes) +
           " classes over the tensor-parallel ranks (a vocabulary-parallel "
           "cross-entropy), and " +
           name +
           " needs each row's argmax over all of them; leave it out "
           "(--eval-metrics accuracy is counted shard by shard) or compile "
           "without --tp";
  if (classes > smp::base::kMaxConfusionClasses)
    return at + "the logits have " + std::to_string(classes) +
           " classes, and a confusion matrix is counted for at most " +
           std::to_string(smp::base::kMaxConfusionClasses) +
           " (a classifier's); a language model's is --eval-metrics "
           "accuracy";
  if (smp::base::isBinaryMetric(name) && classes != 2)
    return at + name +
           " is scikit-learn's average='binary' (class 1 against class 0) "
           "and the logits have " +
           std::to_string(classes) + " classes: pass " + name + "_macro, " +
           name + "_micro or " + name + "_weighted";
  return "";
}

} // namespace

namespace {

/// -k for class k of `classes` (i64 [classes]).
Value negatedClasses(OpBuilder &b, Location loc, int64_t classes) {
  SmallVector<int64_t> negated(classes);
  for (int64_t k = 0; k < classes; ++k)
    negated[k] = -k;
  return ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({classes}, b.getI64Type()),
                             ArrayRef<int64_t>(negated)));
}

/// Minus each row's argmax as ArgMax's import composes it (the first index
/// where the row holds its maximum, or its first NaN: torch.argmax), i64
/// [..., 1]: a row's largest -k over its maxima is minus its first.
Value firstMax(OpBuilder &b, Location loc, Value x, Value negPos,
               int64_t classes) {
  auto lt = cast<RankedTensorType>(x.getType());
  auto axes = b.getDenseI64ArrayAttr({lt.getRank() - 1});
  Value none = ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                             -classes));
  Value atMax =
      EqualOp::create(b, loc, x, ReduceMaxOp::create(b, loc, x, axes, true));
  Value isNan = NotOp::create(b, loc, EqualOp::create(b, loc, x, x));
  Value isTop = OrOp::create(b, loc, atMax, isNan);
  return ReduceMaxOp::create(
      b, loc, WhereOp::create(b, loc, isTop, negPos, none), axes, true);
}

/// `v` as f32 [samples, its elements per sample]; an error on `f` (`what`
/// names it) where its elements do not split over the samples.
FailureOr<Value> perSample(OpBuilder &b, Location loc, func::FuncOp f, Value v,
                           int64_t samples, StringRef what) {
  auto t = cast<RankedTensorType>(v.getType());
  if (samples <= 0 || t.getNumElements() % samples != 0)
    return f.emitError() << "--eval-predictions: the " << what << " " << t
                         << " do not split into the micro-batch's " << samples
                         << " samples";
  auto want = RankedTensorType::get({samples, t.getNumElements() / samples},
                                    b.getF32Type());
  if (!t.getElementType().isF32())
    v = CastOp::create(b, loc, t.clone(b.getF32Type()), v);
  return v.getType() == want ? v : Value(ReshapeOp::create(b, loc, want, v));
}

} // namespace

FailureOr<Predictions> buildPredictions(OpBuilder &b, Location loc,
                                        func::FuncOp f,
                                        const AccuracyOperands &a,
                                        int64_t samples, bool logits) {
  auto lt = cast<RankedTensorType>(a.logits.getType());
  int64_t classes = lt.getShape().back();
  if (a.target)
    return f.emitError()
           << "--eval-predictions: --tp splits the logits' "
           << (a.classes > 0 ? a.classes : classes)
           << " classes over the tensor-parallel ranks (a vocabulary-parallel "
              "cross-entropy), and a prediction is a row's argmax over all of "
              "them; compile without --tp, or leave --eval-predictions out";
  if (a.classes > 0 && a.classes != classes)
    return f.emitError() << "--eval-predictions: the logits hold " << classes
                         << " columns for " << a.classes
                         << " classes; predictions need unpadded ones";
  FailureOr<Value> labels = perSample(b, loc, f, a.labels, samples, "labels");
  if (failed(labels))
    return failure();
  if (logits) {
    // The rows themselves: [samples, rows per sample, classes].
    if (classes > smp::base::kMaxConfusionClasses)
      return f.emitError()
             << "--eval-logits: the logits have " << classes
             << " classes, and an evaluation returns the logits of at most "
             << smp::base::kMaxConfusionClasses
             << " (a classifier's); a language model's predictions are "
                "--eval-predictions (their argmax)";
    FailureOr<Value> rows =
        perSample(b, loc, f, a.logits, samples, "logits' values");
    if (failed(rows))
      return failure();
    int64_t per = cast<RankedTensorType>(rows->getType()).getDimSize(1);
    auto shaped = RankedTensorType::get({samples, per / classes, classes},
                                        b.getF32Type());
    return Predictions{ReshapeOp::create(b, loc, shaped, *rows), *labels};
  }
  Value first =
      firstMax(b, loc, a.logits, negatedClasses(b, loc, classes), classes);
  Value argmax = NegOp::create(b, loc, first);
  FailureOr<Value> predicted =
      perSample(b, loc, f, argmax, samples, "logits' rows");
  if (failed(predicted))
    return failure();
  return Predictions{*predicted, *labels};
}

FailureOr<Predictions> buildRegressionPredictions(OpBuilder &b, Location loc,
                                                  func::FuncOp f, Value output,
                                                  Value target,
                                                  int64_t samples) {
  FailureOr<Value> predicted = perSample(b, loc, f, output, samples, "outputs");
  FailureOr<Value> targets = perSample(b, loc, f, target, samples, "targets");
  if (failed(predicted) || failed(targets))
    return failure();
  return Predictions{*predicted, *targets};
}

LogicalResult checkEvalMetricsFit(func::FuncOp f, ArrayRef<std::string> metrics,
                                  bool accuracy, StringRef loss,
                                  bool regressionLoss) {
  SmallVector<std::string> names(metrics.begin(), metrics.end());
  if (accuracy)
    names.push_back("accuracy");
  for (const std::string &m : names)
    if (smp::base::needsPredictions(m) != regressionLoss)
      return f.emitError()
             << "--eval-metrics " << m << ": "
             << (regressionLoss
                     ? "the mse loss '" + loss.str() +
                           "' compares values, not classes; a regression's "
                           "metrics are pearson and spearmanr"
                     : m +
                           " correlates predicted values with their "
                           "targets, and the loss '" +
                           loss.str() +
                           "' is a cross-entropy over classes; it needs an "
                           "mse:OUTPUT:TARGET loss (a regression)");
  return success();
}

Value placeMicrobatch(OpBuilder &b, Location loc, Value v, int64_t i,
                      int64_t m) {
  if (m == 1)
    return v;
  auto t = cast<RankedTensorType>(v.getType());
  int64_t samples = t.getDimSize(0);
  SmallVector<Value> parts;
  auto zeros = [&](int64_t n) {
    SmallVector<int64_t> shape(t.getShape());
    shape[0] = n;
    if (n > 0)
      parts.push_back(ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(t.clone(shape),
                                 b.getF32FloatAttr(0.0).getValue())));
  };
  zeros(i * samples);
  parts.push_back(v);
  zeros((m - 1 - i) * samples);
  return ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(0));
}

FailureOr<Value> buildConfusion(OpBuilder &b, Location loc, func::FuncOp f,
                                const AccuracyOperands &a,
                                ArrayRef<std::string> metrics) {
  auto lt = cast<RankedTensorType>(a.logits.getType());
  int64_t classes = lt.getShape().back();
  // A tp rank's shard of the classes (a.classes: all of them) is refused.
  for (const std::string &name : metrics)
    if (smp::base::needsConfusion(name))
      if (std::string why =
              confusionRefusal(a, a.classes > 0 ? a.classes : classes, name);
          !why.empty())
        return f.emitError() << why;
  if (a.classes > 0 && a.classes != classes) // smp-pad-classes runs later
    return f.emitError() << "--eval-metrics: the logits hold " << classes
                         << " columns for " << a.classes
                         << " classes; a confusion matrix needs unpadded ones";
  Type i64 = b.getI64Type(), f32 = b.getF32Type();
  Value negPos = negatedClasses(b, loc, classes);
  Value first = firstMax(b, loc, a.logits, negPos, classes);
  auto oneHot = lt.clone(f32);
  Value predicted =
      CastOp::create(b, loc, oneHot, EqualOp::create(b, loc, negPos, first));
  SmallVector<int64_t> column(lt.getShape());
  column.back() = 1;
  Value labels =
      ReshapeOp::create(b, loc, RankedTensorType::get(column, i64), a.labels);
  Value isLabel =
      EqualOp::create(b, loc, NegOp::create(b, loc, labels), negPos);
  Value label = CastOp::create(b, loc, oneHot, isLabel);
  Value kept = keptLabels(b, loc, labels, a.ignoreIndex, f32);
  label = MulOp::create(b, loc, label, kept);
  auto rows =
      RankedTensorType::get({lt.getNumElements() / classes, classes}, f32);
  auto flat = [&](Value v) {
    return v.getType() == rows ? v : Value(ReshapeOp::create(b, loc, rows, v));
  };
  Value labelRows = flat(label), predictedRows = flat(predicted);
  return Value(MatMulOp::create(b, loc, labelRows, predictedRows,
                                /*transpose_lhs=*/true,
                                /*transpose_rhs=*/false));
}

} // namespace smp
