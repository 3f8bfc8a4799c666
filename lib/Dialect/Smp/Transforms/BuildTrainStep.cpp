//===- BuildTrainStep.cpp - forward + loss + backward + optimizer ---------===//
//
// Implements `smp-build-train-step`.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/IRMapping.h"
#include "smp/Dialect/Smp/Autodiff/Autodiff.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "BatchNormTraining.h"
#include "Recompute.h"
#include "TrainStepUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Regex.h"

#include <limits>
#include <map>

#define DEBUG_TYPE "smp-build-train-step"

namespace smp {
#define GEN_PASS_DEF_SMPBUILDTRAINSTEPPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpBuildTrainStepPass
    : public smp::impl::SmpBuildTrainStepPassBase<SmpBuildTrainStepPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("smp-build-train-step: no func @main to train");
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      module.emitError("smp-build-train-step: @train_step exists already");
      return signalPassFailure();
    }
    if (optimizer != "sgd" && optimizer != "adam" && optimizer != "adamw") {
      module.emitError() << "unknown optimizer '" << optimizer
                         << "' (expected sgd, adam or adamw)";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    if (dp > 1 && !module.lookupSymbol("dp")) {
      b.setInsertionPointToStart(module.getBody());
      shard::GridOp::create(b, module.getLoc(), "dp",
                            ArrayRef<int64_t>{static_cast<int64_t>(dp)});
    }
    b.setInsertionPointAfter(main);
    auto step = cast<func::FuncOp>(b.clone(*main));
    step.setSymName("train_step");
    if (failed(build(step)))
      return signalPassFailure();
  }

  /// Sum over the data-parallel ranks (shard.all_reduce on the dp grid).
  Value allReduce(OpBuilder &b, Location loc, Value v) {
    return shard::AllReduceOp::create(b, loc, v, "dp",
                                      ArrayRef<shard::GridAxis>{0},
                                      shard::ReductionKind::Sum);
  }

  /// v flattened to 1-D and zero-padded to a multiple of the dp ranks.
  Value flatten(OpBuilder &b, Location loc, Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    int64_t n = t.getNumElements(), padded = (n + dp - 1) / dp * dp;
    Value flat = ReshapeOp::create(b, loc, t.clone(ArrayRef<int64_t>{n}), v);
    if (padded == n)
      return flat;
    auto zeros = RankedTensorType::get({padded - n}, t.getElementType());
    Value pad = ConstantOp::create(
        b, loc, DenseElementsAttr::get(
                    zeros, APFloat::getZero(cast<FloatType>(t.getElementType())
                                                .getFloatSemantics())));
    return ConcatOp::create(b, loc, ValueRange{flat, pad},
                            b.getI64IntegerAttr(0));
  }

  /// Sums a flattened gradient over the ranks, keeping this rank's chunk.
  Value reduceScatter(OpBuilder &b, Location loc, Value flat) {
    auto t = cast<RankedTensorType>(flat.getType());
    auto chunk = t.clone(ArrayRef<int64_t>{t.getDimSize(0) / dp});
    return shard::ReduceScatterOp::create(
        b, loc, chunk, FlatSymbolRefAttr::get(b.getContext(), "dp"),
        b.getDenseI16ArrayAttr({0}), flat,
        shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
        b.getIndexAttr(0));
  }

  /// Gathers every rank's updated chunk back into the parameter's shape.
  Value unshard(OpBuilder &b, Location loc, Value chunk, Value param) {
    auto pt = cast<RankedTensorType>(param.getType());
    auto ct = cast<RankedTensorType>(chunk.getType());
    int64_t n = pt.getNumElements(), padded = ct.getDimSize(0) * dp;
    Value all = shard::AllGatherOp::create(
        b, loc, ct.clone(ArrayRef<int64_t>{padded}),
        FlatSymbolRefAttr::get(b.getContext(), "dp"),
        b.getDenseI16ArrayAttr({0}), chunk, b.getIndexAttr(0));
    if (padded != n)
      all = SliceOp::create(b, loc, all, b.getDenseI64ArrayAttr({0}),
                            b.getDenseI64ArrayAttr({n}),
                            b.getDenseI64ArrayAttr({1}));
    return ReshapeOp::create(b, loc, pt, all);
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
  /// The fp16 loss scale (a state), when loss scaling.
  Value lossScale;

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

  Value addInput(func::FuncOp f, Type type, StringRef name) {
    unsigned index = f.getNumArguments();
    (void)f.insertArgument(index, type,
                           DictionaryAttr::get(
                               f.getContext(),
                               {NamedAttribute(
                                   StringAttr::get(f.getContext(),
                                                   SmpDialect::kInputAttr),
                                   StringAttr::get(f.getContext(), name))}),
                           f.getLoc());
    return f.getArgument(index);
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
      return *v;
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
      IntegerAttr vocab;
      for (unsigned i = 0; i < f.getNumResults(); ++i)
        if (outs[i] == *logits)
          vocab = f.getResultAttrOfType<IntegerAttr>(i, "smp.tp_vocab");
      if (dp <= 1 && !unrolled && !vocab)
        return Value(CrossEntropyOp::create(b, loc, *logits, labels, Value(),
                                            -100, Reduction::mean));
      // Data parallel: this rank's share of the global mean, sum_r / count
      // over every rank's labels that are not ignored, so the ranks' losses
      // (and gradients) add up to exactly the one-device values.
      // Micro-batches likewise: the count is over the whole step's labels.
      Value sum = vocab ? vocabParallelCrossEntropy(b, loc, *logits, labels,
                                                    vocab.getInt())
                        : Value(CrossEntropyOp::create(b, loc, *logits, labels,
                                                       Value(), -100,
                                                       Reduction::sum));
      if (!labelCount) {
        Value all = unrolled ? lossInputFull : labels;
        auto lab = cast<RankedTensorType>(all.getType());
        Value ignore = ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   int64_t(-100)));
        Value kept = CastOp::create(
            b, loc, lab.clone(b.getF32Type()),
            NotOp::create(b, loc, EqualOp::create(b, loc, all, ignore)));
        labelCount = reduceAll<ReduceSumOp>(b, loc, kept);
        if (dp > 1)
          labelCount = allReduce(b, loc, labelCount);
      }
      perRankShare = true;
      return Value(DivOp::create(b, loc, toF32(b, loc, sum), labelCount));
    }
    if (parts.size() == 3 && parts[0] == "mse") {
      auto out = output(f, outs, parts[1]);
      if (failed(out))
        return failure();
      auto ot = cast<RankedTensorType>(out->getType());
      auto targetOr = lossInput(f, b, ot, parts[2]);
      if (failed(targetOr))
        return failure();
      Value target = *targetOr;
      Value d = SubOp::create(b, loc, *out, target);
      return reduceAll<ReduceMeanOp>(b, loc, MulOp::create(b, loc, d, d));
    }
    f.emitError() << "bad --loss '" << loss
                  << "': expected NAME, cross_entropy:LOGITS:LABELS or "
                     "mse:OUTPUT:TARGET";
    return failure();
  }

  /// Marks the ops after `mark` (up to the builder's insertion point) as
  /// micro-batch `mb`'s (backward ones with smp.bwd) and gives those without
  /// a stage the stage of their operands.
  void stampMicrobatch(OpBuilder &b, Operation *mark, int64_t mb,
                       bool backward) {
    Block *block = b.getInsertionBlock();
    Operation *first = mark ? mark->getNextNode() : &block->front();
    for (Block::iterator it = first->getIterator(); it != b.getInsertionPoint();
         ++it) {
      if (it->hasTrait<OpTrait::ConstantLike>())
        continue;
      it->setAttr(SmpDialect::kMicrobatchAttr,
                  b.getI64IntegerAttr(mb));
      if (backward)
        it->setAttr(SmpDialect::kBackwardAttr, b.getUnitAttr());
    }
    propagateStages(*block, first);
  }

  /// The unrolled step: @main's forward once per micro-batch (the inputs
  /// hold every micro-batch and are sliced), each micro-batch's loss and
  /// backward, and the gradients summed over the micro-batches. A parameter
  /// used on several pipeline stages (a tied embedding and LM head) gets an
  /// argument per stage; each copy's gradient is the sum of every copy's,
  /// added in stage order on each stage, so the copies stay equal.
  /// `duplicate` marks the copies after the first (left out of the norm).
  LogicalResult buildUnrolled(func::FuncOp f, OpBuilder &b,
                              SmallVector<Value> &params,
                              SmallVector<std::string> &names,
                              SmallVector<bool> &duplicate,
                              FailureOr<SmallVector<Value>> &grads,
                              Value &lossTotal) {
    MLIRContext *ctx = f.getContext();
    Location loc = f.getLoc();
    Block &body = f.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    int64_t m = microbatches;

    // 1. A copy of each parameter per stage that uses it.
    SmallVector<Value> trainable(params);
    params.clear();
    names.clear();
    duplicate.clear();
    SmallVector<SmallVector<unsigned>> copiesOf; // per trainable parameter
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
          names.push_back(name.str());
          duplicate.push_back(!first);
        }
        first = false;
      }
    }
    duplicate.resize(params.size(), false);

    // 2. Inputs hold every micro-batch; micro-batch 0 uses slice 0.
    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      forward.push_back(&op);
    SmallVector<std::pair<Value, Value>> inputs; // (full, slice 0)
    SmallVector<unsigned> replaced;
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
    SmallVector<SmallVector<Value>> outs(m);
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
      }
      for (Value v : ret.getOperands())
        outs[i].push_back(map.lookupOrDefault(v));
    }

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
      stampMicrobatch(b, mark, i, /*backward=*/false);
      mark = lastBefore(b);
      Value target = lossScale ? Value(MulOp::create(b, loc, loss32, lossScale))
                               : loss32;
      auto g = differentiate(b, body, target, params);
      if (failed(g))
        return failure();
      SmallVector<Operation *> fwd;
      for (Operation &op : body) {
        if (&op == mark->getNextNode())
          break;
        auto mb = op.getAttrOfType<IntegerAttr>(SmpDialect::kMicrobatchAttr);
        if (mb && mb.getInt() == i && !op.hasAttr(SmpDialect::kBackwardAttr))
          fwd.push_back(&op);
      }
      rewriteSavedActivations(fwd, mark, b);
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
        if (auto s = stageOf(params[k]))
          setStage(acc[k].getDefiningOp(), *s);
      }
      stampMicrobatch(b, mark, i, /*backward=*/true);
    }
    for (unsigned i : llvm::reverse(replaced))
      f.eraseArgument(i);

    // 5. Tied copies: every copy gets the sum of all, in stage order.
    SmallVector<Value> total(acc);
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
        total[k] = sum;
      }
    }
    grads = total;
    return success();
  }

  /// Sums the gradients over the data-parallel ranks in buckets: gradients
  /// of one stage and element type, in the order the backward computes
  /// them, are flattened and concatenated up to bucket-mb MiB, all-reduced
  /// at once and split back. Each bucket's ops follow its last gradient, so
  /// the all-reduce can overlap the rest of the backward.
  void allReduceInBuckets(OpBuilder &b, Location loc, SmallVector<Value> &grads,
                          ArrayRef<Value> params) {
    Block *block = b.getInsertionBlock();
    SmallVector<unsigned> order;
    for (unsigned k = 0; k < grads.size(); ++k)
      if (grads[k])
        order.push_back(k);
    auto defOf = [&](unsigned k) { return grads[k].getDefiningOp(); };
    llvm::stable_sort(order, [&](unsigned x, unsigned y) {
      Operation *a = defOf(x), *c = defOf(y);
      if (!a || !c)
        return bool(c) && !a;
      return a->isBeforeInBlock(c);
    });
    uint64_t limit = static_cast<uint64_t>(bucketMb * 1024.0 * 1024.0);
    SmallVector<unsigned> bucket;
    uint64_t bytes = 0;
    auto flush = [&] {
      if (bucket.empty())
        return;
      Operation *after = nullptr; // the bucket's last gradient
      for (unsigned k : bucket)
        if (Operation *d = defOf(k); d && d->getBlock() == block &&
                                     (!after || after->isBeforeInBlock(d)))
          after = d;
      Operation *mark = lastBefore(b);
      if (bucket.size() == 1) {
        grads[bucket[0]] = allReduce(b, loc, grads[bucket[0]]);
      } else {
        SmallVector<Value> flat;
        int64_t total = 0;
        for (unsigned k : bucket) {
          auto t = cast<RankedTensorType>(grads[k].getType());
          flat.push_back(ReshapeOp::create(
              b, loc, t.clone(ArrayRef<int64_t>{t.getNumElements()}), grads[k]));
          total += t.getNumElements();
        }
        Value summed = allReduce(
            b, loc, ConcatOp::create(b, loc, flat, b.getI64IntegerAttr(0)));
        int64_t offset = 0;
        for (unsigned k : bucket) {
          auto t = cast<RankedTensorType>(grads[k].getType());
          int64_t n = t.getNumElements();
          Value part = SliceOp::create(b, loc, summed,
                                       b.getDenseI64ArrayAttr({offset}),
                                       b.getDenseI64ArrayAttr({offset + n}),
                                       b.getDenseI64ArrayAttr({1}));
          grads[k] = ReshapeOp::create(b, loc, t, part);
          offset += n;
        }
        (void)total;
      }
      // Move the bucket's ops right after its last gradient.
      Operation *first = mark ? mark->getNextNode() : &block->front();
      if (after && first) {
        SmallVector<Operation *> ops;
        for (Operation *op = first; op && op != &*b.getInsertionPoint();
             op = op->getNextNode())
          ops.push_back(op);
        for (Operation *op : ops) {
          op->moveAfter(after);
          after = op;
        }
      }
      bucket.clear();
      bytes = 0;
    };
    std::optional<int64_t> stage;
    Type elt;
    for (unsigned k : order) {
      auto t = cast<RankedTensorType>(grads[k].getType());
      uint64_t size = t.getNumElements() * t.getElementTypeBitWidth() / 8;
      std::optional<int64_t> s = stageOf(params[k]);
      if (!bucket.empty() && (s != stage || t.getElementType() != elt ||
                              bytes + size > limit))
        flush();
      bucket.push_back(k);
      bytes += size;
      stage = s;
      elt = t.getElementType();
    }
    flush();
  }

  /// Recomputes and/or offloads what the backward built after `mark` reads
  /// of the forward ops `fwd` (the recompute and offload options).
  void rewriteSavedActivations(ArrayRef<Operation *> fwd, Operation *mark,
                               OpBuilder &b) {
    if (recompute != "none") {
      SmallVector<Operation *> chosen;
      for (Operation *op : fwd) {
        auto stage = op->getAttrOfType<IntegerAttr>(SmpDialect::kStageAttr);
        if (recomputeStages.empty() ||
            (stage && llvm::is_contained(recomputeStages, stage.getInt())))
          chosen.push_back(op);
      }
      recomputeActivations(chosen, std::next(mark->getIterator()),
                           b.getInsertionPoint(), recompute);
    }
    if (offload)
      offloadActivations(fwd, std::next(mark->getIterator()),
                         b.getInsertionPoint(), offloadHorizon,
                         offloadMinBytes);
  }

  LogicalResult build(func::FuncOp f) {
    MLIRContext *ctx = f.getContext();
    Block &body = f.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ret);
    Location loc = f.getLoc();
    unrolled = microbatches > 1 ||
               llvm::any_of(body.getOperations(), [](Operation &op) {
                 return op.hasAttr(SmpDialect::kStageAttr);
               });
    if (microbatches < 1)
      return f.emitError() << "microbatches must be >= 1, got " << static_cast<int64_t>(microbatches);
    if (recompute != "none" && recompute != "full" && recompute != "selective")
      return f.emitError() << "unknown recompute mode '" << recompute
                           << "' (expected none, full or selective)";

    if (bnStats != "global" && bnStats != "replica" && bnStats != "running")
      return f.emitError() << "unknown bn-stats '" << bnStats
                           << "' (expected global, replica or running)";
    // Batch norms normalise with the batch's statistics (train() mode); their
    // running statistics are updated by the step, not trained. (`running`:
    // they normalise with the running statistics, which stay as they are.)
    // Running statistics are buffers: never trained, in any mode.
    llvm::DenseSet<Value> runningArgs = batchNormStatArgs(f);
    FailureOr<SmallVector<RunningStat>> running = SmallVector<RunningStat>();
    if (bnStats != "running")
      running = trainBatchNorms(f, dp,
                                bnStats == "global" ? BatchNormStats::Global
                                                    : BatchNormStats::Replica);
    if (failed(running))
      return failure();

    sinkWeightOnlyOps(f);

    // Trainable parameters: float, not frozen, not matching --freeze.
    llvm::Regex frozen(freeze);
    std::string regexError;
    if (!freeze.empty() && !frozen.isValid(regexError))
      return f.emitError() << "bad --freeze regex '" << freeze
                           << "': " << regexError;
    SmallVector<Value> params;
    SmallVector<std::string> names;
    int64_t matched = 0;
    for (BlockArgument arg : body.getArguments()) {
      unsigned i = arg.getArgNumber();
      auto name = f.getArgAttrOfType<StringAttr>(i, SmpDialect::kParamAttr);
      if (!name || f.getArgAttr(i, SmpDialect::kFrozenAttr))
        continue;
      if (!isa<FloatType>(cast<RankedTensorType>(arg.getType()).getElementType()))
        continue;
      if (!freeze.empty() && frozen.match(name.getValue())) {
        ++matched;
        continue;
      }
      // A batch norm's running statistics (updated by the step, never
      // trained; --freeze naming them, as for any buffer, changes nothing).
      if (runningArgs.contains(arg))
        continue;
      params.push_back(arg);
      names.push_back(name.str());
    }
    if (!freeze.empty() && matched == 0)
      return f.emitError() << "--freeze '" << freeze
                           << "' matches no trainable parameter (names are "
                              "the ONNX initializer names; see smpc summary)";
    if (!freeze.empty() && params.empty())
      return f.emitError() << "--freeze '" << freeze
                           << "' matches every parameter: nothing would train";
    Type f32 = b.getF32Type();
    Type scalarF32 = RankedTensorType::get({}, f32);
    // A parameter's state records how it is laid out across ranks (for
    // checkpoints that another plan resumes): the parameter's tensor-
    // parallel split and, under ZeRO-1, the shape it flattens.
    auto addState = [&](Type type, const std::string &name,
                        std::optional<float> init = std::nullopt,
                        Value param = Value()) {
      unsigned index = f.getNumArguments();
      SmallVector<NamedAttribute> attrs{NamedAttribute(
          StringAttr::get(ctx, SmpDialect::kStateAttr),
          StringAttr::get(ctx, name))};
      if (init)
        attrs.push_back(NamedAttribute(StringAttr::get(ctx, "smp.init"),
                                       b.getF32FloatAttr(*init)));
      if (auto arg = dyn_cast_or_null<BlockArgument>(param)) {
        if (Attribute shard = f.getArgAttr(arg.getArgNumber(), "smp.tp_shard"))
          attrs.push_back(NamedAttribute(StringAttr::get(ctx, "smp.tp_shard"),
                                         shard));
        if (type != param.getType())
          attrs.push_back(NamedAttribute(
              StringAttr::get(ctx, "smp.zero_shape"),
              b.getDenseI64ArrayAttr(
                  cast<RankedTensorType>(param.getType()).getShape())));
      }
      (void)f.insertArgument(index, type, DictionaryAttr::get(ctx, attrs), loc);
      return f.getArgument(index);
    };
    Value loss32, scale, found, scaleUsed;
    FailureOr<SmallVector<Value>> grads;
    SmallVector<bool> duplicate(params.size(), false);
    // Dynamic loss scaling (fp16): differentiate loss * scale, then unscale.
    if (lossScaling) {
      scale = addState(scalarF32, "@loss_scale", float(initScale));
      // The scale this step used, read before the scale's in-place update.
      scaleUsed = MulOp::create(b, loc, scale, scalarConst(b, loc, f32, 1.0));
      lossScale = scale;
    }
    if (unrolled) {
      if (failed(buildUnrolled(f, b, params, names, duplicate, grads, loss32)))
        return failure();
    } else {
      auto lossValue = buildLoss(f, b, ret.getOperands());
      if (failed(lossValue))
        return failure();
      loss32 = scalarF32Loss(b, loc, *lossValue);
      // Data parallel: every rank differentiates its share of the global
      // loss and the gradients are summed over the ranks.
      if (dp > 1 && !perRankShare)
        loss32 = DivOp::create(b, loc, loss32,
                               scalarConst(b, loc, f32, static_cast<double>(dp)));
      Value target = scale ? Value(MulOp::create(b, loc, loss32, scale)) : loss32;
      Operation *mark = lastBefore(b);
      grads = differentiate(b, body, target, params);
      if (failed(grads))
        return failure();
      SmallVector<Operation *> fwd;
      for (Operation &op : body) {
        if (!mark)
          break;
        if (!op.hasTrait<OpTrait::ConstantLike>())
          fwd.push_back(&op);
        if (&op == mark)
          break;
      }
      if (mark)
        rewriteSavedActivations(fwd, mark, b);
    }
    bool zero = dp > 1 && shardOptimizerState;
    if (dp > 1) {
      if (zero) {
        for (Value &g : *grads)
          if (g) // ZeRO-1: each rank keeps the sum of its shard only
            g = reduceScatter(b, loc, flatten(b, loc, g));
      } else {
        allReduceInBuckets(b, loc, *grads, params);
      }
      loss32 = allReduce(b, loc, loss32); // the global loss, on every rank
    }
    if (scale) {
      // Any inf or NaN gradient makes sum(g * 0) NaN.
      Value total;
      for (Value &g : *grads) {
        if (!g)
          continue;
        auto t = cast<RankedTensorType>(g.getType());
        Value z = reduceAll<ReduceSumOp>(
            b, loc,
            MulOp::create(b, loc, toF32(b, loc, g), scalarConst(b, loc, f32, 0.0)));
        total = total ? Value(AddOp::create(b, loc, total, z)) : z;
        Value inv = DivOp::create(b, loc, scalarConst(b, loc, f32, 1.0), scale);
        if (t.getElementType() != f32)
          inv = CastOp::create(b, loc, RankedTensorType::get({}, t.getElementType()), inv);
        g = MulOp::create(b, loc, g, inv);
      }
      // ZeRO-1: each rank checked its shards only; an overflow anywhere
      // (a NaN in any rank's sum) skips the step on every rank.
      if (zero && total)
        total = allReduce(b, loc, total);
      found = total ? Value(NotOp::create(b, loc, EqualOp::create(b, loc, total, total)))
                    : Value(ConstantOp::create(
                          b, loc, DenseElementsAttr::get(
                                      RankedTensorType::get({}, b.getI1Type()), false)));
    }

    // Global gradient norm (always reported), then optional clipping.
    // Summed per pipeline stage first (a tied weight's copies count once),
    // then over the stages, so that only scalars cross between stages.
    // Tensor-parallel parameters: each rank holds a slice, so their squares
    // are summed over the tp ranks too.
    std::map<std::pair<int64_t, bool>, Value> stageSumSq;
    for (auto [k, g] : llvm::enumerate(*grads)) {
      if (!g || duplicate[k])
        continue;
      Value g32 = toF32(b, loc, g);
      Value sq = reduceAll<ReduceSumOp>(b, loc, MulOp::create(b, loc, g32, g32));
      auto arg = cast<BlockArgument>(params[k]);
      bool sliced = f.getArgAttr(arg.getArgNumber(), "smp.tp_shard") != nullptr;
      Value &partial = stageSumSq[{stageOf(params[k]).value_or(0), sliced}];
      partial = partial ? Value(AddOp::create(b, loc, partial, sq)) : sq;
    }
    Value sumSq;
    for (auto &[key, partial] : stageSumSq) {
      if (zero) // each rank summed the squares of its shards
        partial = allReduce(b, loc, partial);
      if (key.second)
        partial = shard::AllReduceOp::create(b, loc, partial, "tp",
                                             ArrayRef<shard::GridAxis>{0},
                                             shard::ReductionKind::Sum);
      sumSq = sumSq ? Value(AddOp::create(b, loc, sumSq, partial)) : partial;
    }
    Value gradNorm = sumSq ? Value(SqrtOp::create(b, loc, sumSq))
                           : scalarConst(b, loc, f32, 0.0);
    SmallVector<Value> clipped(grads->begin(), grads->end());
    if (clipGradNorm > 0 && sumSq) {
      // coef = min(1, max_norm / (norm + 1e-6)), as clip_grad_norm_.
      Value denom = AddOp::create(b, loc, gradNorm, scalarConst(b, loc, f32, 1e-6));
      Value coef = MinOp::create(
          b, loc, DivOp::create(b, loc, scalarConst(b, loc, f32, clipGradNorm), denom),
          scalarConst(b, loc, f32, 1.0));
      for (Value &g : clipped) {
        if (!g)
          continue;
        auto t = cast<RankedTensorType>(g.getType());
        Value c = t.getElementType() == f32
                      ? coef
                      : Value(CastOp::create(b, loc, RankedTensorType::get({}, t.getElementType()), coef));
        g = MulOp::create(b, loc, g, c);
      }
    }

    Value lr = addInput(f, scalarF32, "@lr");
    Value stepIndex = addInput(f, scalarF32, "@step");
    float wd = weightDecay >= 0 ? weightDecay.getValue()
                                : (optimizer == "adamw" ? 0.01f : 0.0f);

    SmallVector<Value> newResults;
    SmallVector<DictionaryAttr> newAttrs;
    auto updateAttr = [&](StringRef name) {
      return DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, SmpDialect::kUpdateAttr),
                               StringAttr::get(ctx, name))});
    };
    if (scale) {
      // Skipped steps do not count for the optimizer (as GradScaler skips
      // optimizer.step()): its own step counter, and the scale's update.
      Value one = scalarConst(b, loc, f32, 1.0), zero = scalarConst(b, loc, f32, 0.0);
      Value optStep = addState(scalarF32, "@optimizer_step");
      Value tracker = addState(scalarF32, "@growth_tracker");
      Value nextStep = AddOp::create(b, loc, optStep, one);
      Value newStep = WhereOp::create(b, loc, found, optStep, nextStep);
      Value nextTracker = AddOp::create(b, loc, tracker, one);
      Value grow = Value(GreaterOp::create(
          b, loc, nextTracker, scalarConst(b, loc, f32, growthInterval - 0.5)));
      Value grown = WhereOp::create(
          b, loc, grow, MulOp::create(b, loc, scale, scalarConst(b, loc, f32, 2.0)),
          scale);
      Value newScale = WhereOp::create(
          b, loc, found, MulOp::create(b, loc, scale, scalarConst(b, loc, f32, 0.5)),
          grown);
      Value newTracker = WhereOp::create(
          b, loc, found, zero, WhereOp::create(b, loc, grow, zero, nextTracker));
      stepIndex = nextStep;
      for (auto [v, name] :
           {std::make_pair(newScale, "@loss_scale"),
            std::make_pair(newTracker, "@growth_tracker"),
            std::make_pair(newStep, "@optimizer_step")}) {
        newResults.push_back(v);
        newAttrs.push_back(updateAttr(name));
      }
    }
    for (auto [param, g, name] : llvm::zip(params, clipped, names)) {
      if (!g)
        continue; // no gradient reaches it: PyTorch skips it too
      Type type = param.getType();
      Value paramIn = param;
      if (zero) { // update this rank's shard of the flattened parameter
        paramIn = shard::AllSliceOp::create(
            b, loc, g.getType(), flatten(b, loc, param), "dp",
            ArrayRef<shard::GridAxis>{0}, 0);
        type = g.getType();
      }
      Value lrT = lr, stepT = stepIndex;
      auto elt = cast<RankedTensorType>(type).getElementType();
      if (elt != f32) {
        lrT = CastOp::create(b, loc, RankedTensorType::get({}, elt), lr);
        stepT = CastOp::create(b, loc, RankedTensorType::get({}, elt), stepIndex);
      }
      if (optimizer == "sgd") {
        Value buf = momentum != 0.0f ? addState(type, name + ".momentum_buffer",
                                                std::nullopt, param)
                                     : g;
        auto upd = SgdUpdateOp::create(
            b, loc, type, type, paramIn, g, buf, lrT, stepT, found,
            b.getF32FloatAttr(momentum), b.getF32FloatAttr(dampening),
            b.getF32FloatAttr(wd), b.getBoolAttr(nesterov));
        newResults.push_back(zero ? unshard(b, loc, upd.getNewParam(), param)
                                  : upd.getNewParam());
        newAttrs.push_back(updateAttr(name));
        if (momentum != 0.0f) {
          newResults.push_back(upd.getNewMomentumBuffer());
          newAttrs.push_back(updateAttr(name + ".momentum_buffer"));
        }
        continue;
      }
      Value m = addState(type, name + ".exp_avg", std::nullopt, param);
      Value v = addState(type, name + ".exp_avg_sq", std::nullopt, param);
      auto upd = AdamUpdateOp::create(
          b, loc, type, type, type, paramIn, g, m, v, lrT, stepT, found,
          b.getF32FloatAttr(beta1), b.getF32FloatAttr(beta2),
          b.getF32FloatAttr(epsilon), b.getF32FloatAttr(wd),
          b.getBoolAttr(optimizer == "adamw"));
      newResults.push_back(zero ? unshard(b, loc, upd.getNewParam(), param)
                                : upd.getNewParam());
      newAttrs.push_back(updateAttr(name));
      newResults.push_back(upd.getNewExpAvg());
      newAttrs.push_back(updateAttr(name + ".exp_avg"));
      newResults.push_back(upd.getNewExpAvgSq());
      newAttrs.push_back(updateAttr(name + ".exp_avg_sq"));
    }
    // The running statistics, after every micro-batch's update.
    for (auto &[name, value] : chainRunningStats(f, *running)) {
      newResults.push_back(value);
      newAttrs.push_back(updateAttr(name));
    }
    auto outputAttr = [&](StringRef name) {
      return DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, SmpDialect::kOutputAttr),
                               StringAttr::get(ctx, name))});
    };
    newResults.push_back(loss32);
    newAttrs.push_back(outputAttr("loss"));
    newResults.push_back(gradNorm);
    newAttrs.push_back(outputAttr("grad_norm"));
    if (scale) {
      newResults.push_back(CastOp::create(b, loc, scalarF32, found));
      newAttrs.push_back(outputAttr("skipped"));
      newResults.push_back(scaleUsed);
      newAttrs.push_back(outputAttr("loss_scale"));
    }

    // Replace the forward outputs with the step's.
    func::ReturnOp::create(b, loc, newResults);
    ret.erase();
    if (unrolled)
      propagateStages(body);
    SmallVector<Type> types;
    for (Value v : newResults)
      types.push_back(v.getType());
    f.setType(FunctionType::get(ctx, body.getArgumentTypes(), types));
    f.setAllResultAttrs(newAttrs);
    return success();
  }
};

} // namespace
