//===- OptimizerUpdate.cpp - smp-optimizer --------------------------------===//
//
// Implements `smp-optimizer`, the last of the passes that build
// func @train_step: each gradient becomes the parameter's and its states'
// updates (torch.optim.SGD, Adam, AdamW semantics).
//
//===----------------------------------------------------------------------===//

#include "TrainStepContract.h"
#include "TrainStepUtils.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/Support/Regex.h"

#define DEBUG_TYPE "smp-optimizer"

namespace smp {
#define GEN_PASS_DEF_SMPOPTIMIZERPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpOptimizerPass
    : public smp::impl::SmpOptimizerPassBase<SmpOptimizerPass> {
  using Base::Base;

  /// --no-decay, compiled (shared by the pass's clones); the parameters it
  /// matched.
  std::shared_ptr<llvm::Regex> noDecayRegex;
  int undecayed = 0;

  /// The new results, and their attributes.
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> attrs;

  /// A ZeRO-1/2 parameter's updated chunk, gathered with the others of its
  /// bucket once every update is made (gatherInBuckets): the result it
  /// becomes and the whole parameter's type.
  struct PendingGather {
    size_t result;
    Value chunk;
    RankedTensorType whole;
    std::optional<int64_t> stage;
  };
  SmallVector<PendingGather> pending;

  void add(Value v, StringRef attr, StringRef name) {
    MLIRContext *ctx = &getContext();
    results.push_back(v);
    attrs.push_back(DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, attr),
                             StringAttr::get(ctx, name))}));
  }

  /// The weight decay given, else PyTorch's default (0.01 for AdamW, else 0).
  float decay() const {
    return weightDecay >= 0 ? weightDecay.getValue()
                            : (optimizer == "adamw" ? 0.01f : 0.0f);
  }

  /// Updates the parameter of `grad` (and its states) with learning rate
  /// `lr` at step `step`, unless `found` (when given) says the gradients
  /// overflowed.
  void update(func::FuncOp f, OpBuilder &b, const Gradient &grad, Value lr,
              Value step, Value found, int64_t dp) {
    Location loc = f.getLoc();
    Type f32 = b.getF32Type();
    Value param = grad.param, g = grad.value;
    std::string name =
        f.getArgAttrOfType<StringAttr>(grad.param.getArgNumber(),
                                       SmpDialect::kParamAttr)
            .str();
    float wd = decay();
    // --no-decay: PyTorch's parameter group without weight decay.
    if (!noDecay.empty() && noDecayRegex->match(name)) {
      wd = 0.0f;
      ++undecayed;
    }
    Type type = param.getType();
    Value paramIn = param;
    // A ZeRO-3 parameter is this rank's chunk already: updated in place.
    LayoutAttr paramLayout = getArgLayout(f, grad.param.getArgNumber());
    bool paramSharded = paramLayout && paramLayout.getDpChunked();
    if (grad.sharded && !paramSharded) { // update this rank's shard of the
                                         // flattened parameter
      paramIn = sliceDp(b, loc, flattenPadded(b, loc, param, dp), dp);
      type = g.getType();
    }
    auto elt = cast<RankedTensorType>(type).getElementType();
    if (elt != f32) {
      lr = CastOp::create(b, loc, RankedTensorType::get({}, elt), lr);
      step = CastOp::create(b, loc, RankedTensorType::get({}, elt), step);
    }
    // The chunk stands for the whole parameter until gatherInBuckets.
    auto whole = [&](Value newParam) {
      if (grad.sharded && !paramSharded)
        pending.push_back({results.size(), newParam,
                           cast<RankedTensorType>(param.getType()),
                           stageOf(param)});
      return newParam;
    };
    if (optimizer == "sgd") {
      Value buf = momentum != 0.0f
                      ? addState(f, type, name + ".momentum_buffer",
                                 std::nullopt, param)
                      : g;
      auto upd = SgdUpdateOp::create(
          b, loc, type, type, paramIn, g, buf, lr, step, found,
          b.getF32FloatAttr(momentum), b.getF32FloatAttr(dampening),
          b.getF32FloatAttr(wd), b.getBoolAttr(nesterov));
      add(whole(upd.getNewParam()), SmpDialect::kUpdateAttr, name);
      if (momentum != 0.0f)
        add(upd.getNewMomentumBuffer(), SmpDialect::kUpdateAttr,
            name + ".momentum_buffer");
      return;
    }
    Value m = addState(f, type, name + ".exp_avg", std::nullopt, param);
    Value v = addState(f, type, name + ".exp_avg_sq", std::nullopt, param);
    auto upd = AdamUpdateOp::create(
        b, loc, type, type, type, paramIn, g, m, v, lr, step, found,
        b.getF32FloatAttr(beta1), b.getF32FloatAttr(beta2),
        b.getF32FloatAttr(epsilon), b.getF32FloatAttr(wd),
        b.getBoolAttr(optimizer == "adamw"));
    add(whole(upd.getNewParam()), SmpDialect::kUpdateAttr, name);
    add(upd.getNewExpAvg(), SmpDialect::kUpdateAttr, name + ".exp_avg");
    add(upd.getNewExpAvgSq(), SmpDialect::kUpdateAttr, name + ".exp_avg_sq");
  }

  /// The whole parameters of `bucket` (indices into `pending`): one
  /// all-gather of their chunks concatenated ([W] -> [dp * W], rank r's W
  /// values at r W), the [dp, W] view split into each parameter's columns
  /// (one split: one instruction, where a strided slice each was a launch
  /// each on a GPU), each flattened, unpadded and reshaped. A bucket of one
  /// gathers its chunk alone (unshard).
  void gatherBucket(OpBuilder &b, Location loc, ArrayRef<unsigned> bucket,
                    int64_t dp) {
    if (bucket.size() == 1) {
      const PendingGather &p = pending[bucket[0]];
      results[p.result] = unshard(b, loc, p.chunk, p.whole, dp);
      return;
    }
    SmallVector<Value> chunks;
    for (unsigned k : bucket)
      chunks.push_back(pending[k].chunk);
    Value cat = ConcatOp::create(b, loc, chunks, b.getI64IntegerAttr(0));
    auto ct = cast<RankedTensorType>(cat.getType());
    int64_t width = ct.getDimSize(0);
    Value all = gatherDp(b, loc, cat, dp, DpGroup::Shard);
    Value rows =
        ReshapeOp::create(b, loc, ct.clone(ArrayRef<int64_t>{dp, width}), all);
    SmallVector<int64_t> widths;
    for (unsigned k : bucket)
      widths.push_back(
          cast<RankedTensorType>(pending[k].chunk.getType()).getDimSize(0));
    auto cols = SplitOp::create(b, loc, rows, b.getI64IntegerAttr(1),
                                b.getDenseI64ArrayAttr(widths));
    for (auto [i, k] : llvm::enumerate(bucket)) {
      const PendingGather &p = pending[k];
      Value flat =
          ReshapeOp::create(b, loc, ct.clone(ArrayRef<int64_t>{dp * widths[i]}),
                            cols.getResult(i));
      results[p.result] = unpadded(b, loc, flat, p.whole);
    }
  }

  /// Gathers the pending parameters in buckets of one stage and element
  /// type, in the order they were updated, of up to bucket-mb MiB gathered
  /// (a chunk is 1/dp of that): a collective a bucket, where one a
  /// parameter paid a collective's latency for each of a model's many
  /// small tensors (GPT-2 124M: 148).
  void gatherInBuckets(func::FuncOp f, OpBuilder &b, Location loc, int64_t dp) {
    SmallVector<Value> chunks;
    for (const PendingGather &p : pending)
      chunks.push_back(p.chunk);
    auto together = [&](unsigned x, unsigned y) {
      return pending[x].stage == pending[y].stage &&
             getElementTypeOrSelf(pending[x].chunk.getType()) ==
                 getElementTypeOrSelf(pending[y].chunk.getType());
    };
    for (const SmallVector<unsigned> &bucket :
         gradientBuckets(f.getBody().front(), chunks,
                         bucketMb / static_cast<double>(dp), together))
      gatherBucket(b, loc, bucket, dp);
    pending.clear();
  }

  /// A --no-decay that matches no trained parameter is refused (a typo
  /// would silently decay everything); one with no weight decay to take
  /// away says it changes nothing.
  LogicalResult checkNoDecay(func::FuncOp f, ArrayRef<Gradient> grads) {
    if (noDecay.empty() || grads.empty())
      return success();
    if (undecayed == 0) {
      std::string names;
      for (const Gradient &g : llvm::ArrayRef(grads).take_front(8))
        names += std::string(names.empty() ? "" : ", ") +
                 f.getArgAttrOfType<StringAttr>(g.param.getArgNumber(),
                                                SmpDialect::kParamAttr)
                     .str();
      return f.emitError() << "--no-decay '" << noDecay
                           << "' matches no trained parameter (they are: "
                           << names << (grads.size() > 8 ? ", ..." : "")
                           << "; `smpc summary` lists them all)";
    }
    if (decay() == 0.0f)
      f.emitWarning() << "--no-decay changes nothing: the weight decay is 0 ("
                      << optimizer
                      << "'s default; pass --weight-decay X to decay the "
                         "other parameters)";
    return success();
  }

  /// Ends the step: an unrolled step's new ops get the stage of their
  /// operands (for smp-pipeline-schedule); one that is not drops the
  /// backward marks (its ops are one program, which CSE may merge).
  static void finish(func::FuncOp f) {
    Block &body = f.getBody().front();
    bool unrolled = llvm::any_of(body, [](Operation &op) {
      return op.hasAttr(SmpDialect::kMicrobatchAttr);
    });
    if (unrolled) {
      propagateStages(body);
      return;
    }
    for (Operation &op : body)
      op.removeAttr(SmpDialect::kBackwardAttr);
  }

  /// Refuses an unknown optimizer or a bad --no-decay regex before
  /// anything runs.
  LogicalResult initialize(MLIRContext *ctx) override {
    noDecayRegex = std::make_shared<llvm::Regex>(noDecay);
    std::string error;
    if (!noDecay.empty() && !noDecayRegex->isValid(error))
      return emitError(UnknownLoc::get(ctx))
             << "bad --no-decay regex '" << noDecay << "': " << error;
    return checkChoice(ctx, "optimizer", optimizer, {"sgd", "adam", "adamw"});
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    results.clear();
    attrs.clear();
    pending.clear();
    auto f = trainStep(module, "smp-optimizer");
    if (failed(f))
      return signalPassFailure();
    Block &body = f->getBody().front();
    Operation *ret = body.getTerminator();
    OpBuilder b(ret);
    Location loc = f->getLoc();
    Type f32 = b.getF32Type();
    Type scalarF32 = RankedTensorType::get({}, f32);
    Value lr = addInput(*f, scalarF32, "@lr");
    Value step = addInput(*f, scalarF32, "@step");
    std::optional<unsigned> foundAt = findResult(*f, kFoundInfAttr);
    Value found = foundAt ? ret->getOperand(*foundAt) : Value();
    if (found) {
      // Skipped steps do not count for the optimizer (as GradScaler skips
      // optimizer.step()): its own step counter.
      Value optStep = addState(*f, scalarF32, "@optimizer_step");
      Value nextStep =
          AddOp::create(b, loc, optStep, scalarConst(b, loc, f32, 1.0));
      add(WhereOp::create(b, loc, found, optStep, nextStep),
          SmpDialect::kUpdateAttr, "@optimizer_step");
      step = nextStep;
    }
    int64_t dp = dataParallelShardRanks(module);
    SmallVector<Gradient> grads = gradients(*f);
    undecayed = 0;
    for (const Gradient &g : grads)
      update(*f, b, g, lr, step, found, dp);
    gatherInBuckets(*f, b, loc, dp);
    if (failed(checkNoDecay(*f, grads)))
      return signalPassFailure();
    // The other results: the updates of the step's own states (`@` names:
    // the loss scale's) first, then the parameters' updates, the other
    // updates (running statistics) and the outputs.
    SmallVector<std::pair<int, unsigned>> others; // (group, result)
    static constexpr llvm::StringLiteral kOutputs[] = {"loss", "grad_norm",
                                                       "skipped", "loss_scale"};
    for (unsigned i = 0; i < f->getNumResults(); ++i) {
      if (auto u = f->getResultAttrOfType<StringAttr>(i, SmpDialect::kUpdateAttr))
        others.push_back({u.getValue().starts_with("@") ? -1 : 0, i});
      else if (auto o = f->getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr))
        others.push_back(
            {1 + static_cast<int>(llvm::find(kOutputs, o.getValue()) -
                                  std::begin(kOutputs)),
             i});
    }
    llvm::stable_sort(others, [](auto &x, auto &y) { return x.first < y.first; });
    SmallVector<Value> all;
    SmallVector<DictionaryAttr> allAttrs;
    for (auto [group, i] : others)
      if (group < 0) {
        all.push_back(ret->getOperand(i));
        allAttrs.push_back(f->getResultAttrDict(i));
      }
    all.append(results.begin(), results.end());
    allAttrs.append(attrs.begin(), attrs.end());
    for (auto [group, i] : others)
      if (group >= 0) {
        all.push_back(ret->getOperand(i));
        allAttrs.push_back(f->getResultAttrDict(i));
      }
    setResults(*f, all, allAttrs);
    finish(*f);
  }
};

} // namespace
