//===- BuildGradients.cpp - forward, loss and gradients -------------------===//
//
// Implements `smp-build-gradients`, the first of the passes that build
// func @train_step (see TrainStepContract.h for what it hands on).
//
//===----------------------------------------------------------------------===//

#include "BatchNormTraining.h"
#include "EvalAccuracy.h"
#include "SampleDims.h"
#include "TrainStepContract.h"
#include "TrainStepUtils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "smp/Dialect/Smp/Autodiff/Autodiff.h"
#include "smp/Dialect/Smp/IR/DropoutKey.h"
#include "smp/Dialect/Smp/IR/SmpLayout.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/IR/TrainedParams.h"
#include "smp/Dialect/Smp/Transforms/LossShare.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "smp/base/EvalMetrics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Regex.h"

#include <map>
#include <optional>

#define DEBUG_TYPE "smp-build-gradients"

namespace smp {
#define GEN_PASS_DEF_SMPBUILDGRADIENTSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpBuildGradientsPass
    : public smp::impl::SmpBuildGradientsPassBase<SmpBuildGradientsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main =
        lookupFuncOrError(module, "main", "smp-build-gradients", "to train");
    if (!main)
      return signalPassFailure();
    if (module.lookupSymbol("train_step")) {
      module.emitError("smp-build-gradients: @train_step exists already");
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    if (dpShard < 0 || (dpShard > 1 && (dp % dpShard != 0 || dpShard > dp))) {
      module.emitError() << "smp-build-gradients: dp-shard "
                         << static_cast<int>(dpShard) << " does not divide dp "
                         << static_cast<int>(dp);
      return signalPassFailure();
    }
    if (dp > 1 && !module.lookupSymbol("dp")) {
      // Hybrid sharding: dp / S replica groups of S ranks (dp rank
      // r * S + s is shard s of group r).
      SmallVector<int64_t> shape{dp};
      if (dpShard > 1 && dpShard < dp)
        shape = {dp / dpShard, dpShard};
      b.setInsertionPointToStart(module.getBody());
      shard::GridOp::create(b, module.getLoc(), "dp", shape);
    }
    b.setInsertionPointAfter(main);
    auto step = cast<func::FuncOp>(b.clone(*main));
    step.setSymName("train_step");
    if (failed(build(step)))
      return signalPassFailure();
    eraseStopGradients(module);
  }

  /// Sum over the data-parallel ranks.
  Value allReduce(OpBuilder &b, Location loc, Value v) {
    return allReduceDp(b, loc, v);
  }

  /// Whether the built loss is already this rank's share of the global one.
  bool perRankShare = false;
  /// Unrolled step (micro-batches, pipeline stages): see buildUnrolled.
  bool unrolled = false;
  int64_t currentMicrobatch = 0;
  /// The loss's extra input holding every micro-batch (unrolled step).
  Value lossInputFull;
  /// Labels that count in a cross-entropy mean, over every rank and
  /// micro-batch (built once).
  Value labelCount;
  /// A --loss NAME's denominators over the whole step (LossShare.h).
  SmallVector<Value> lossStepSums;
  /// The fp16 loss scale (a state), when loss scaling.
  Value lossScale;
  /// --eval-accuracy: the cross-entropy buildLoss just built or found, and
  /// the step's counts so far.
  std::optional<AccuracyOperands> accuracy;
  SmallVector<Value> hitsTotals; // by hitRanks()
  Value labelsTotal, confusionTotal;
  /// --eval-predictions: an mse loss's output and target, the samples of
  /// the forward (@main's, before the step is built), and the step's
  /// predictions and labels so far ([microbatches * samples, per sample]).
  std::optional<std::pair<Value, Value>> regression;
  std::optional<SampleDims> sampleDims;
  Value predictedTotal, labelIdsTotal;

  /// An evaluation computes more than the loss (--eval-accuracy,
  /// --eval-metrics, --eval-predictions).
  bool evalCounts() {
    return evalAccuracy || !evalMetrics.empty() || wantsPredictions();
  }
  /// The evaluation gathers the predictions.
  bool wantsPredictions() {
    return evalPredictions || evalLogits ||
           llvm::any_of(evalMetrics, smp::base::needsPredictions);
  }
  /// The flag that asked for the evaluation's outputs (for errors).
  const char *evalFlag() {
    return evalAccuracy           ? "--eval-accuracy"
           : !evalMetrics.empty() ? "--eval-metrics"
                                  : "--eval-predictions";
  }
  LogicalResult checkMetricsFit(func::FuncOp f, bool regressionLoss) {
    return checkEvalMetricsFit(f, evalMetrics, evalAccuracy, loss,
                               regressionLoss);
  }

  /// The K of each count of labels among their row's K first classes the
  /// evaluation makes: 1 for the accuracy, then each topK_accuracy's.
  SmallVector<int64_t> hitRanks() {
    SmallVector<int64_t> ks;
    if (evalAccuracy || llvm::is_contained(evalMetrics, "accuracy"))
      ks.push_back(1);
    for (const std::string &m : evalMetrics)
      if (int64_t k = smp::base::topKAccuracy(m))
        ks.push_back(k);
    return ks;
  }

  /// Adds the evaluation's counts of the loss just built to the step's:
  /// the hits and labels of the accuracy, the confusion matrix of the
  /// other metrics.
  LogicalResult accumulateAccuracy(func::FuncOp f, OpBuilder &b, Location loc) {
    if (regression) {
      LogicalResult done = accumulatePredictions(f, b, loc, nullptr);
      regression.reset();
      return done;
    }
    if (!accuracy)
      return success();
    auto add = [&](Value &total, Value v) {
      total = total ? Value(AddOp::create(b, loc, total, v)) : v;
    };
    if (SmallVector<int64_t> ks = hitRanks(); !ks.empty()) {
      FailureOr<AccuracyCounts> counts =
          buildAccuracy(b, loc, f, *accuracy, ks);
      if (failed(counts))
        return failure();
      hitsTotals.resize(ks.size());
      for (auto [total, hits] : llvm::zip(hitsTotals, counts->hits))
        add(total, hits);
      add(labelsTotal, counts->labels);
    }
    if (llvm::any_of(evalMetrics, smp::base::needsConfusion)) {
      FailureOr<Value> confusion =
          buildConfusion(b, loc, f, *accuracy, evalMetrics);
      if (failed(confusion))
        return failure();
      add(confusionTotal, *confusion);
    }
    if (wantsPredictions() &&
        failed(accumulatePredictions(f, b, loc, &*accuracy)))
      return failure();
    accuracy.reset();
    return success();
  }

  /// Adds this micro-batch's predictions and labels (of `a`'s
  /// cross-entropy, or of `regression`) to the step's, placed at the
  /// micro-batch's samples.
  LogicalResult accumulatePredictions(func::FuncOp f, OpBuilder &b,
                                      Location loc, const AccuracyOperands *a) {
    int64_t samples = sampleDims->microbatch();
    Value from = a ? a->logits : regression->first;
    if (currentMicrobatch == 0)
      if (std::string why = sampleDims->notLeading(from); !why.empty())
        return f.emitError()
               << "--eval-predictions: each sample's predictions are read "
                  "from the "
               << (a ? "logits of the loss's cross-entropy"
                     : "output of the mse loss")
               << ", which must hold the samples one after another along "
                  "dim 0: "
               << why;
    FailureOr<Predictions> p =
        a ? buildPredictions(b, loc, f, *a, samples, evalLogits)
          : buildRegressionPredictions(b, loc, f, regression->first,
                                       regression->second, samples);
    if (failed(p))
      return failure();
    int64_t m = unrolled ? static_cast<int64_t>(microbatches) : 1;
    auto add = [&](Value &total, Value v) {
      v = placeMicrobatch(b, loc, v, currentMicrobatch, m);
      total = total ? Value(AddOp::create(b, loc, total, v)) : v;
    };
    add(predictedTotal, p->predicted);
    add(labelIdsTotal, p->labels);
    return success();
  }

  /// The value named `name` among the function's outputs `outs` (the
  /// return's operands, or their copies for a micro-batch).
  FailureOr<Value> output(func::FuncOp f, ValueRange outs, StringRef name) {
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (auto n = f.getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr);
          n && n.getValue() == name)
        return outs[i];
    std::string names;
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (auto n = f.getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr))
        names += (names.empty() ? "" : ", ") + n.str();
    f.emitError() << "the model has no output named '" << name
                  << "' (outputs: " << names << ")";
    return failure();
  }

  /// The loss's extra input (labels, targets) of `type`; in an unrolled step
  /// the micro-batch's slice of an input holding every micro-batch.
  FailureOr<Value> lossInput(func::FuncOp f, OpBuilder &b,
                             RankedTensorType type, StringRef name) {
    if (!lossInputFull) {
      // The labels (targets) are a new input: no name the model has.
      auto named = [&](StringAttr a) { return a && a.getValue() == name; };
      const char *taken = nullptr;
      for (unsigned i = 0; i < f.getNumArguments() && !taken; ++i)
        if (named(f.getArgAttrOfType<StringAttr>(i, SmpDialect::kInputAttr)))
          taken = "the model already has an input of that name";
      for (unsigned i = 0; i < f.getNumResults() && !taken; ++i)
        if (named(f.getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr)))
          taken = "that is an output of the model";
      if (taken) {
        f.emitError() << "--loss names '" << name << "' as its labels, but "
                      << taken
                      << "; the loss adds its own input: give it a new name";
        return failure();
      }
    }
    if (!unrolled)
      return addInput(f, type, name);
    if (!lossInputFull) {
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= microbatches;
      lossInputFull = addInput(f, type.clone(shape), name);
    }
    return sliceMicrobatch(b, f.getLoc(), lossInputFull, currentMicrobatch,
                           microbatches);
  }

  /// Builds the scalar loss at the end of the body from the forward
  /// outputs `outs`.
  FailureOr<Value> buildLoss(func::FuncOp f, OpBuilder &b, ValueRange outs) {
    SmallVector<StringRef> parts;
    StringRef(loss).split(parts, ':');
    Location loc = f.getLoc();
    if (parts.size() == 1 && !parts[0].empty()) {
      auto v = output(f, outs, parts[0]);
      if (failed(v))
        return failure();
      auto t = cast<RankedTensorType>(v->getType());
      if (t.getNumElements() != 1 || !isa<FloatType>(t.getElementType())) {
        f.emitError() << "loss output '" << parts[0]
                      << "' must be a float scalar, got " << t;
        return failure();
      }
      if (evalCounts() &&
          failed(ownLossEvaluation(f, *v, parts[0], evalFlag(), evalMetrics,
                                   evalAccuracy, accuracy, regression)))
        return failure();
      // Split over data-parallel ranks or micro-batches: this shard's
      // exact share of the one-device loss (LossShare.h).
      int64_t m = unrolled ? static_cast<int64_t>(microbatches) : 1;
      if (dp * m == 1)
        return *v;
      perRankShare = true;
      return buildLossShare(b, *v, parts[0], dp, m, lossStepSums);
    }
    if (parts.size() == 3 && parts[0] == "cross_entropy") {
      auto logits = output(f, outs, parts[1]);
      if (failed(logits))
        return failure();
      auto lt = cast<RankedTensorType>(logits->getType());
      if (lt.getRank() < 1 || !isa<FloatType>(lt.getElementType())) {
        f.emitError() << "cross_entropy logits '" << parts[1]
                      << "' must be float [..., classes], got " << lt;
        return failure();
      }
      auto labelsOr = lossInput(
          f, b, RankedTensorType::get(lt.getShape().drop_back(), b.getI64Type()),
          parts[2]);
      if (failed(labelsOr))
        return failure();
      Value labels = *labelsOr;
      if (evalCounts()) {
        if (failed(checkMetricsFit(f, /*regressionLoss=*/false)))
          return failure();
        accuracy = AccuracyOperands{*logits, labels};
      }
      // Vocab-parallel logits (smp-tensor-parallel): this rank's classes
      // of the full vocabulary.
      std::optional<int64_t> vocab;
      for (unsigned i = 0; i < f.getNumResults(); ++i) {
        LayoutAttr layout =
            outs[i] == *logits ? getResultLayout(f, i) : nullptr;
        if (!layout || !layout.hasTpSplit())
          continue;
        std::optional<int64_t> tp = gridSize(f, "tp");
        if (layout.getTpDim() != lt.getRank() - 1 || layout.getDpChunked() ||
            !tp) {
          f.emitError() << "cross_entropy logits '" << parts[1]
                        << "' have layout " << layout
                        << "; only the class dim can be split, over a "
                           "shard.grid @tp";
          return failure();
        }
        vocab = layout.fullExtent(lt.getShape().back(), *tp);
      }
      if (dp <= 1 && !unrolled && !vocab)
        return Value(CrossEntropyOp::create(b, loc, *logits, labels, Value(),
                                            -100, Reduction::mean,
                                            IntegerAttr()));
      // Data parallel: this rank's share of the global mean, sum_r / count
      // over every rank's labels that are not ignored, so the ranks' losses
      // (and gradients) add up to exactly the one-device values.
      // Micro-batches likewise: the count is over the whole step's labels.
      if (vocab && accuracy)
        accuracy->classes = *vocab;
      Value sum = vocab ? vocabParallelCrossEntropy(
                              b, loc, *logits, labels, *vocab,
                              accuracy ? &accuracy->offset : nullptr,
                              accuracy ? &accuracy->target : nullptr)
                        : Value(CrossEntropyOp::create(
                              b, loc, *logits, labels, Value(), -100,
                              Reduction::sum, IntegerAttr()));
      if (!labelCount) {
        Value all = unrolled ? lossInputFull : labels;
        labelCount = reduceAll<ReduceSumOp>(
            b, loc, keptLabels(b, loc, all, -100, b.getF32Type()));
        if (dp > 1)
          labelCount = allReduce(b, loc, labelCount);
      }
      perRankShare = true;
      return Value(DivOp::create(b, loc, toF32(b, loc, sum), labelCount));
    }
    if (parts.size() == 3 && parts[0] == "mse" && evalAccuracy) {
      f.emitError() << "--eval-accuracy needs a cross-entropy loss: '" << loss
                    << "' compares values, not classes (leave "
                       "--eval-accuracy out; a regression's metrics are "
                       "--eval-metrics pearson,spearmanr)";
      return failure();
    }
    if (parts.size() == 3 && parts[0] == "mse" &&
        failed(checkMetricsFit(f, /*regressionLoss=*/true)))
      return failure();
    if (parts.size() == 3 && parts[0] == "mse") {
      auto out = output(f, outs, parts[1]);
      if (failed(out))
        return failure();
      auto ot = cast<RankedTensorType>(out->getType());
      auto targetOr = lossInput(f, b, ot, parts[2]);
      if (failed(targetOr))
        return failure();
      Value target = *targetOr;
      if (wantsPredictions())
        regression = {*out, target};
      Value d = SubOp::create(b, loc, *out, target);
      return reduceAll<ReduceMeanOp>(b, loc, MulOp::create(b, loc, d, d));
    }
    f.emitError() << "bad --loss '" << loss
                  << "': expected NAME, cross_entropy:LOGITS:LABELS or "
                     "mse:OUTPUT:TARGET";
    return failure();
  }
  /// Marks the ops after `mark` (up to the builder's insertion point) as
  /// micro-batch `mb`'s in an unrolled step (backward ones with smp.bwd) and
  /// gives those without a stage the stage of their operands; in a step
  /// that is not unrolled, marks the backward's ops with smp.bwd only.
  void stampMicrobatch(OpBuilder &b, Operation *mark, int64_t mb,
                       bool backward) {
    Block *block = b.getInsertionBlock();
    Operation *first = mark ? mark->getNextNode() : &block->front();
    for (Block::iterator it = first->getIterator(); it != b.getInsertionPoint();
         ++it) {
      if (it->hasTrait<OpTrait::ConstantLike>())
        continue;
      if (unrolled)
        it->setAttr(SmpDialect::kMicrobatchAttr, b.getI64IntegerAttr(mb));
      if (backward)
        it->setAttr(SmpDialect::kBackwardAttr, b.getUnitAttr());
    }
    if (unrolled)
      propagateStages(*block, first);
  }

  /// A copy of each parameter per pipeline rank that uses it (the step is
  /// unrolled): `params` (the trainable ones) becomes every copy of them,
  /// a trainable parameter's copies listed together in `copiesOf`.
  void copyParamsPerRank(func::FuncOp f, OpBuilder &b,
                         SmallVector<Value> &params,
                         SmallVector<SmallVector<unsigned>> &copiesOf) {
    Location loc = f.getLoc();
    Block &body = f.getBody().front();
    SmallVector<Value> trainable(params);
    params.clear();
    unsigned numArgs = body.getNumArguments();
    for (unsigned i = 0; i < numArgs; ++i) {
      BlockArgument arg = body.getArgument(i);
      auto name = f.getArgAttrOfType<StringAttr>(i, SmpDialect::kParamAttr);
      if (!name)
        continue;
      // One copy per pipeline rank that reads it (chunk c runs on rank
      // c mod pp): a rank with several chunks of an interleaved schedule
      // updates its copy once. Keyed by rank, holding the rank's first
      // stage (the copy's smp.stage) and the uses.
      // (pp 1, the default: every stage is its own rank.)
      auto rankOf = [&](int64_t stage) {
        return pipelineRanks > 1 ? stage % pipelineRanks : stage;
      };
      std::map<int64_t, std::pair<int64_t, SmallVector<OpOperand *>>>
          usesByRank;
      for (OpOperand &use : arg.getUses()) {
        auto s = use.getOwner()->getAttrOfType<IntegerAttr>(SmpDialect::kStageAttr);
        int64_t stage = s ? s.getInt() : 0;
        auto [it, fresh] = usesByRank.insert({rankOf(stage), {stage, {}}});
        it->second.first = std::min(it->second.first, stage);
        it->second.second.push_back(&use);
      }
      if (usesByRank.empty())
        usesByRank[0] = {0, {}};
      // In stage order (the first copy is the one on the earliest stage).
      std::map<int64_t, SmallVector<OpOperand *>> usesByStage;
      for (auto &[rank, entry] : usesByRank)
        usesByStage[entry.first] = std::move(entry.second);
      bool train = llvm::is_contained(trainable, Value(arg));
      if (train)
        copiesOf.emplace_back();
      bool first = true;
      for (auto &[stage, uses] : usesByStage) {
        Value copy = arg;
        if (!first) {
          unsigned index = f.getNumArguments();
          (void)f.insertArgument(index, arg.getType(), f.getArgAttrDict(i), loc);
          copy = f.getArgument(index);
          for (OpOperand *use : uses)
            use->set(copy);
        }
        f.setArgAttr(cast<BlockArgument>(copy).getArgNumber(),
                     SmpDialect::kStageAttr, b.getI64IntegerAttr(stage));
        if (train) {
          copiesOf.back().push_back(params.size());
          params.push_back(copy);
        }
        first = false;
      }
    }

  }

  /// The inputs hold every micro-batch (micro-batch 0 uses slice 0) and
  /// @main's forward is copied for micro-batches 1..m-1: `outs` gets each
  /// micro-batch's outputs. `replaced` lists the original inputs.
  LogicalResult unrollForward(func::FuncOp f, OpBuilder &b, unsigned numArgs,
                              SmallVector<SmallVector<Value>> &outs,
                              SmallVector<unsigned> &replaced) {
    MLIRContext *ctx = f.getContext();
    Location loc = f.getLoc();
    Block &body = f.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    int64_t m = microbatches;
    // 2. Inputs hold every micro-batch; micro-batch 0 uses slice 0.
    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      forward.push_back(&op);
    SmallVector<std::pair<Value, Value>> inputs; // (full, slice 0)
    if (m > 1) {
      OpBuilder top(ctx);
      top.setInsertionPointToStart(&body);
      for (unsigned i = 0; i < numArgs; ++i) {
        BlockArgument arg = body.getArgument(i);
        if (!f.getArgAttr(i, SmpDialect::kInputAttr))
          continue;
        auto t = cast<RankedTensorType>(arg.getType());
        if (t.getRank() == 0)
          return f.emitError() << "input #" << i << " is a scalar: it cannot "
                                  "be split into micro-batches";
        SmallVector<int64_t> shape(t.getShape());
        shape[0] *= m;
        unsigned index = f.getNumArguments();
        (void)f.insertArgument(index, t.clone(shape), f.getArgAttrDict(i), loc);
        Value full = f.getArgument(index);
        Value slice0 = sliceMicrobatch(top, loc, full, 0, m);
        arg.replaceAllUsesWith(slice0);
        inputs.push_back({full, slice0});
        replaced.push_back(i);
      }
    }

    // 3. Forward copies for micro-batches 1..m-1; micro-batch 0 is @main's.
    outs.assign(m, {});
    outs[0].assign(ret.getOperands().begin(), ret.getOperands().end());
    for (Operation *op : forward)
      if (!op->hasTrait<OpTrait::ConstantLike>())
        op->setAttr(SmpDialect::kMicrobatchAttr, b.getI64IntegerAttr(0));
    for (int64_t i = 1; i < m; ++i) {
      IRMapping map;
      for (auto &[full, slice0] : inputs)
        map.map(slice0, sliceMicrobatch(b, loc, full, i, m));
      for (Operation *op : forward) {
        if (op->hasTrait<OpTrait::ConstantLike>())
          continue;
        Operation *copy = b.clone(*op, map);
        copy->setAttr(SmpDialect::kMicrobatchAttr, b.getI64IntegerAttr(i));
        // Micro-batch i's samples follow the i earlier ones' in the rank's
        // batch: its dropout masks are theirs (smp-key-dropout).
        if (drawsDropout(copy))
          setDropoutPlace(copy, DropoutPlace::SampleOffset,
                          getDropoutPlace(copy, DropoutPlace::Samples) * i);
      }
      for (Value v : ret.getOperands())
        outs[i].push_back(map.lookupOrDefault(v));
    }

    return success();
  }

  /// The unrolled step: @main's forward once per micro-batch (the inputs
  /// hold every micro-batch and are sliced), each micro-batch's loss and
  /// backward, and the gradients summed over the micro-batches. A parameter
  /// used on several pipeline stages (a tied embedding and LM head) gets an
  /// argument per rank; each copy's gradient is the sum of every copy's,
  /// added in stage order on each stage, so the copies stay equal.
  LogicalResult buildUnrolled(func::FuncOp f, OpBuilder &b,
                              SmallVector<Value> &params,
                              SmallVector<Value> &grads, Value &lossTotal) {
    Location loc = f.getLoc();
    Block &body = f.getBody().front();
    int64_t m = microbatches;
    unsigned numArgs = body.getNumArguments();
    SmallVector<SmallVector<unsigned>> copiesOf; // per trainable parameter
    copyParamsPerRank(f, b, params, copiesOf);
    SmallVector<SmallVector<Value>> outs;
    SmallVector<unsigned> replaced;
    if (failed(unrollForward(f, b, numArgs, outs, replaced)))
      return failure();

    // 4. Each micro-batch's loss and backward; gradients summed.
    SmallVector<Value> acc(params.size());
    Type f32 = b.getF32Type();
    for (int64_t i = 0; i < m; ++i) {
      currentMicrobatch = i;
      Operation *mark = lastBefore(b);
      auto lossValue = buildLoss(f, b, outs[i]);
      if (failed(lossValue))
        return failure();
      Value loss32 = scalarF32Loss(b, loc, *lossValue);
      if (!perRankShare && m * dp > 1)
        loss32 = DivOp::create(
            b, loc, loss32, scalarConst(b, loc, f32, static_cast<double>(m * dp)));
      lossTotal = lossTotal ? Value(AddOp::create(b, loc, lossTotal, loss32))
                            : loss32;
      if (failed(accumulateAccuracy(f, b, loc)))
        return failure();
      stampMicrobatch(b, mark, i, /*backward=*/false);
      mark = lastBefore(b);
      Value target = lossScale ? Value(MulOp::create(b, loc, loss32, lossScale))
                               : loss32;
      auto g = differentiate(b, body, target, params);
      if (failed(g))
        return failure();
      // Each gradient joins the running sum as soon as it is made, so a
      // micro-batch's gradients do not all wait for the end of its backward
      // beside the sum of the earlier ones.
      for (auto [k, gk] : llvm::enumerate(*g)) {
        if (!gk)
          continue;
        if (acc[k]) {
          OpBuilder::InsertionGuard guard(b);
          if (Operation *def = gk.getDefiningOp();
              def && def->getBlock() == &body)
            b.setInsertionPointAfter(def);
          acc[k] = AddOp::create(b, loc, acc[k], gk);
        } else {
          acc[k] = gk;
        }
        // A sum runs on its parameter's stage. A first gradient keeps the
        // stage of the backward op that made it: the gradient of a
        // parameter added to the hidden state (folded embedding rows) is
        // the input gradient of the next stage's first op, whose other
        // operands (a norm's weight) live on that stage only.
        Operation *def = acc[k].getDefiningOp();
        if (auto s = stageOf(params[k]);
            s && def && (acc[k] != gk || !def->hasAttr(SmpDialect::kStageAttr)))
          setStage(def, *s);
      }
      stampMicrobatch(b, mark, i, /*backward=*/true);
    }
    for (unsigned i : llvm::reverse(replaced))
      (void)f.eraseArgument(i);

    // 5. Tied copies: every copy gets the sum of all, in stage order.
    grads.assign(acc.begin(), acc.end());
    for (const auto &copies : copiesOf) {
      if (copies.size() < 2)
        continue;
      for (unsigned k : copies) {
        Value sum;
        for (unsigned j : copies) {
          if (!acc[j])
            continue;
          sum = sum ? Value(AddOp::create(b, loc, sum, acc[j])) : acc[j];
          if (sum != acc[j])
            setStage(sum.getDefiningOp(), *stageOf(params[k]));
        }
        grads[k] = sum;
      }
    }
    return success();
  }

  /// The trainable parameters: float, not frozen, not matching `freeze`,
  /// not a batch norm's running statistic (`runningArgs`).
  FailureOr<SmallVector<Value>>
  trainableParams(func::FuncOp f, const llvm::DenseSet<Value> &runningArgs) {
    Block &body = f.getBody().front();
    llvm::Regex frozen(freeze);
    std::string regexError;
    if (!freeze.empty() && !frozen.isValid(regexError)) {
      f.emitError() << "bad --freeze regex '" << freeze << "': " << regexError;
      return failure();
    }
    SmallVector<Value> params;
    int64_t matched = 0;
    for (BlockArgument arg : body.getArguments()) {
      unsigned i = arg.getArgNumber();
      auto name = f.getArgAttrOfType<StringAttr>(i, SmpDialect::kParamAttr);
      // A name --freeze matches counts even when the importer froze it
      // already (a buffer: the export sidecar lists every buffer) or it is
      // a batch norm's running statistic (never trained either).
      if (name && !freeze.empty() && frozen.match(name.getValue()))
        ++matched;
      if (isTrainedParam(f, i, freeze.empty() ? nullptr : &frozen, runningArgs))
        params.push_back(arg);
    }
    if (!freeze.empty() && matched == 0) {
      f.emitError() << "--freeze '" << freeze
                    << "' matches no trainable parameter (names are the ONNX "
                       "initializer names; see smpc summary)";
      return failure();
    }
    if (!freeze.empty() && params.empty()) {
      f.emitError() << "--freeze '" << freeze
                    << "' matches every parameter: nothing would train";
      return failure();
    }
    return params;
  }

  /// The step that is not unrolled: the loss on @main's outputs and its
  /// backward (marked smp.bwd).
  LogicalResult buildWhole(func::FuncOp f, OpBuilder &b,
                           ArrayRef<Value> params, SmallVector<Value> &grads,
                           Value &loss32) {
    Location loc = f.getLoc();
    Block &body = f.getBody().front();
    Type f32 = b.getF32Type();
    auto lossValue = buildLoss(f, b, body.getTerminator()->getOperands());
    if (failed(lossValue))
      return failure();
    loss32 = scalarF32Loss(b, loc, *lossValue);
    if (failed(accumulateAccuracy(f, b, loc)))
      return failure();
    // Data parallel: every rank differentiates its share of the global
    // loss and the gradients are summed over the ranks.
    if (dp > 1 && !perRankShare)
      loss32 = DivOp::create(b, loc, loss32,
                             scalarConst(b, loc, f32, static_cast<double>(dp)));
    Value target =
        lossScale ? Value(MulOp::create(b, loc, loss32, lossScale)) : loss32;
    Operation *mark = lastBefore(b);
    auto g = differentiate(b, body, target, params);
    if (failed(g))
      return failure();
    grads.assign(g->begin(), g->end());
    stampMicrobatch(b, mark, 0, /*backward=*/true);
    return success();
  }

  LogicalResult build(func::FuncOp f) {
    MLIRContext *ctx = f.getContext();
    Block &body = f.getBody().front();
    OpBuilder b(body.getTerminator());
    Location loc = f.getLoc();
    unrolled = microbatches > 1 ||
               llvm::any_of(body.getOperations(), [](Operation &op) {
                 return op.hasAttr(SmpDialect::kStageAttr);
               });
    if (microbatches < 1)
      return f.emitError() << "microbatches must be >= 1, got "
                           << static_cast<int64_t>(microbatches);
    // Where the forward holds the samples, before the step changes it.
    if (wantsPredictions())
      sampleDims.emplace(f);
    if (bnStats != "global" && bnStats != "replica" && bnStats != "running")
      return f.emitError() << "unknown bn-stats '" << bnStats
                           << "' (expected global, replica or running)";
    // Batch norms normalise with the batch's statistics (train() mode); their
    // running statistics are updated by the step, not trained. (`running`:
    // they normalise with the running statistics, which stay as they are.)
    // Running statistics are buffers: never trained, in any mode.
    llvm::DenseSet<Value> runningArgs = runningStatArgs(f);
    FailureOr<SmallVector<RunningStat>> running = SmallVector<RunningStat>();
    if (bnStats != "running")
      running = trainBatchNorms(f, dp,
                                bnStats == "global" ? BatchNormStats::Global
                                                    : BatchNormStats::Replica);
    if (failed(running))
      return failure();

    sinkWeightOnlyOps(f);
    auto params = trainableParams(f, runningArgs);
    if (failed(params))
      return failure();
    Type f32 = b.getF32Type();
    Type scalarF32 = RankedTensorType::get({}, f32);
    Value loss32, scaleUsed;
    SmallVector<Value> grads;
    // Dynamic loss scaling (fp16): differentiate loss * scale (the later
    // smp-loss-scaling unscales).
    if (lossScaling) {
      lossScale = addState(f, scalarF32, kLossScaleState, float(initScale));
      // The scale this step used, read before the scale's in-place update.
      scaleUsed = MulOp::create(b, loc, lossScale, scalarConst(b, loc, f32, 1.0));
    }
    if (failed(unrolled ? buildUnrolled(f, b, *params, grads, loss32)
                        : buildWhole(f, b, *params, grads, loss32)))
      return failure();

    // The gradients, the running statistics (after every micro-batch's
    // update), the loss and the scale it was differentiated with.
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> attrs;
    auto add = [&](Value v, StringRef attr, Attribute value) {
      results.push_back(v);
      attrs.push_back(DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, attr), value)}));
    };
    for (auto [param, g] : llvm::zip(*params, grads))
      if (g) // no gradient reaches it: PyTorch skips it too
        add(g, kGradOfAttr,
            b.getI64IntegerAttr(cast<BlockArgument>(param).getArgNumber()));
    for (auto &[name, value] : chainRunningStats(f, *running))
      add(value, SmpDialect::kUpdateAttr, StringAttr::get(ctx, name));
    add(loss32, SmpDialect::kOutputAttr, StringAttr::get(ctx, "loss"));
    SmallVector<int64_t> ks = hitRanks();
    for (auto [k, total] : llvm::zip(ks, hitsTotals))
      if (k == 1)
        add(total, SmpDialect::kOutputAttr,
            StringAttr::get(ctx, kEvalHitsOutput));
    if (labelsTotal)
      add(labelsTotal, SmpDialect::kOutputAttr,
          StringAttr::get(ctx, kEvalLabelsOutput));
    for (auto [k, total] : llvm::zip(ks, hitsTotals))
      if (k > 1)
        add(total, SmpDialect::kOutputAttr,
            StringAttr::get(ctx, smp::base::evalTopHitsOutput(k)));
    if (confusionTotal)
      add(confusionTotal, SmpDialect::kOutputAttr,
          StringAttr::get(ctx, kEvalConfusionOutput));
    if (predictedTotal) {
      add(predictedTotal, SmpDialect::kOutputAttr,
          StringAttr::get(ctx, smp::base::kEvalPredictionsOutput));
      add(labelIdsTotal, SmpDialect::kOutputAttr,
          StringAttr::get(ctx, smp::base::kEvalLabelIdsOutput));
    }
    if (scaleUsed)
      add(scaleUsed, SmpDialect::kOutputAttr, StringAttr::get(ctx, "loss_scale"));
    setResults(f, results, attrs);
    return success();
  }
};

} // namespace
