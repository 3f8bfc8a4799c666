//===- TrainStepUtils.cpp - Helpers of the train-step passes -------------===//

#include "TrainStepUtils.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>

using namespace mlir;

namespace smp {

func::FuncOp lookupFuncOrError(ModuleOp module, StringRef name,
                               StringRef pass, StringRef why) {
  auto f = module.lookupSymbol<func::FuncOp>(name);
  if (!f)
    module.emitError() << pass << ": no func @" << name << " " << why;
  return f;
}

Value namedOutput(func::FuncOp f, StringRef name) {
  Operation *ret = f.getBody().front().getTerminator();
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (auto n = f.getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr);
        n && n.getValue() == name)
      return ret->getOperand(i);
  return nullptr;
}

BlockArgument namedInput(func::FuncOp f, StringRef name) {
  for (BlockArgument a : f.getArguments())
    if (auto n = f.getArgAttrOfType<StringAttr>(a.getArgNumber(),
                                                SmpDialect::kInputAttr);
        n && n.getValue() == name)
      return a;
  return nullptr;
}

bool checkAtLeastOne(ModuleOp module, StringRef pass, StringRef option,
                     int64_t value) {
  if (value >= 1)
    return true;
  module.emitError() << pass << ": " << option << " must be >= 1, got "
                     << value;
  return false;
}

LogicalResult checkChoice(MLIRContext *ctx, StringRef what, StringRef value,
                          ArrayRef<StringRef> choices) {
  if (llvm::is_contained(choices, value))
    return success();
  auto diag = emitError(UnknownLoc::get(ctx))
              << "unknown " << what << " '" << value << "' (expected ";
  for (size_t i = 0; i < choices.size(); ++i)
    diag << (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ")
         << choices[i];
  return diag << ")";
}

Value scalarConst(OpBuilder &b, Location loc, Type elt, double v) {
  auto type = RankedTensorType::get({}, elt);
  APFloat value(v);
  bool loses;
  value.convert(cast<FloatType>(elt).getFloatSemantics(),
                APFloat::rmNearestTiesToEven, &loses);
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, value));
}

Value keptLabels(OpBuilder &b, Location loc, Value labels, int64_t ignoreIndex,
                 Type elt) {
  auto lt = cast<RankedTensorType>(labels.getType());
  auto scalar = RankedTensorType::get({}, lt.getElementType());
  Value ignore = ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          scalar, b.getIntegerAttr(lt.getElementType(), ignoreIndex)));
  return CastOp::create(
      b, loc, lt.clone(elt),
      NotOp::create(b, loc, EqualOp::create(b, loc, labels, ignore)));
}

/// `v` with f32 elements (cast when it has another float type).
Value toF32(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType().isF32())
    return v;
  return CastOp::create(b, loc, t.clone(b.getF32Type()), v);
}


/// Micro-batch `i` of `m` of `full` (equal slices along dim 0).
Value sliceMicrobatch(OpBuilder &b, Location loc, Value full,
                             int64_t i, int64_t m) {
  auto t = cast<RankedTensorType>(full.getType());
  int64_t rows = t.getDimSize(0) / m;
  SmallVector<int64_t> begin(t.getRank(), 0), end(t.getShape()),
      stepOne(t.getRank(), 1);
  begin[0] = i * rows;
  end[0] = (i + 1) * rows;
  return SliceOp::create(b, loc, full, b.getDenseI64ArrayAttr(begin),
                         b.getDenseI64ArrayAttr(end),
                         b.getDenseI64ArrayAttr(stepOne));
}

/// Sum over the tokens of the cross-entropy of vocab-parallel logits
/// (this rank's ceil(V/tp) columns, the last padded; any float type): each
/// rank's log-sum-exp and target logit per row in one pass over its shard
/// (smp.cross_entropy_shard, whose gradient is one pass too, written over
/// the logits), combined over @tp as Megatron's parallel cross-entropy does
/// (the log-sum-exps by their max and a sum of exponentials, the target
/// logits by a sum), so no rank ever holds the whole logits or an f32 copy.
Value vocabParallelCrossEntropy(OpBuilder &b, Location loc, Value logits,
                                Value labels, int64_t vocab, Value *offsetOut,
                                Value *targetOut) {
  auto tpReduce = [&](Value v, shard::ReductionKind kind) -> Value {
    return shard::AllReduceOp::create(b, loc, v, "tp",
                                      ArrayRef<shard::GridAxis>{0}, kind);
  };
  auto i64Const = [&](ArrayRef<int64_t> shape, ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get(shape, b.getI64Type());
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, values));
  };
  auto zt = cast<RankedTensorType>(logits.getType());
  int64_t rank = zt.getRank(), cols = zt.getDimSize(rank - 1);
  Value start = MulOp::create(
      b, loc, TpRankOp::create(b, loc, RankedTensorType::get({}, b.getI64Type())),
      i64Const({}, {cols}));
  Value stats = CrossEntropyShardOp::create(b, loc, logits, labels, start,
                                            b.getI64IntegerAttr(vocab),
                                            b.getI64IntegerAttr(-100));
  auto st = cast<RankedTensorType>(stats.getType());
  auto column = [&](int64_t k) -> Value {
    SmallVector<int64_t> begin(st.getRank(), 0), end(st.getShape()),
        stepOne(st.getRank(), 1);
    begin.back() = k;
    end.back() = k + 1;
    return SliceOp::create(b, loc, stats, b.getDenseI64ArrayAttr(begin),
                           b.getDenseI64ArrayAttr(end),
                           b.getDenseI64ArrayAttr(stepOne));
  };
  Value lseShard = column(0), target = column(1);
  Value m = tpReduce(lseShard, shard::ReductionKind::Max);
  Value s = tpReduce(ExpOp::create(b, loc, SubOp::create(b, loc, lseShard, m)),
                     shard::ReductionKind::Sum);
  Value lse = AddOp::create(b, loc, LogOp::create(b, loc, s), m);
  Value zy = tpReduce(target, shard::ReductionKind::Sum);
  auto lt = cast<RankedTensorType>(labels.getType());
  SmallVector<int64_t> shape(lt.getShape());
  shape.push_back(1);
  if (offsetOut)
    *offsetOut = start;
  if (targetOut)
    *targetOut = ReshapeOp::create(
        b, loc, cast<RankedTensorType>(zy.getType()).clone(lt.getShape()), zy);
  Value lab = ReshapeOp::create(b, loc, lt.clone(shape), labels);
  Value kept = keptLabels(b, loc, lab, -100, st.getElementType());
  return reduceAll<ReduceSumOp>(
      b, loc, MulOp::create(b, loc, SubOp::create(b, loc, lse, zy), kept));
}

/// The loss as an f32 scalar.
Value scalarF32Loss(OpBuilder &b, Location loc, Value loss) {
  auto lt = cast<RankedTensorType>(loss.getType());
  if (lt.getRank() != 0)
    loss = ReshapeOp::create(b, loc, lt.clone(ArrayRef<int64_t>{}), loss);
  return toF32(b, loc, loss);
}

/// The pipeline stage of a value: its op's, or a parameter argument's.
std::optional<int64_t> stageOf(Value v) {
  IntegerAttr stage;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      stage = f.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                              SmpDialect::kStageAttr);
  } else {
    stage = v.getDefiningOp()->getAttrOfType<IntegerAttr>(
        SmpDialect::kStageAttr);
  }
  if (!stage)
    return std::nullopt;
  return stage.getInt();
}

void setStage(Operation *op, int64_t stage) {
  op->setAttr(SmpDialect::kStageAttr,
              IntegerAttr::get(IntegerType::get(op->getContext(), 64), stage));
}

/// Ops without a stage that use a staged value run on the stage of their
/// first staged operand; the others (constants, computations on inputs
/// only) stay free, for every stage that needs them to recompute.
void propagateStages(Block &body, Operation *from) {
  for (Operation &op : llvm::make_range(
           from ? from->getIterator() : body.begin(), body.end())) {
    if (op.hasAttr(SmpDialect::kStageAttr) ||
        op.hasTrait<OpTrait::ConstantLike>() || op.hasTrait<OpTrait::IsTerminator>())
      continue;
    for (Value v : op.getOperands())
      if (auto stage = stageOf(v)) {
        setStage(&op, *stage);
        break;
      }
  }
}

Operation *lastBefore(OpBuilder &b) {
  Block::iterator ip = b.getInsertionPoint();
  return ip == b.getInsertionBlock()->begin() ? nullptr : &*std::prev(ip);
}

/// Moves each op computed from parameters and constants only (the
/// importer hoists weight transposes to the top) right before its first
/// user: its gradient is then complete as soon as its user's backward is
/// done, not at the very end of the backward, and data-parallel buckets
/// can start early. The copies also live shorter.
void sinkWeightOnlyOps(func::FuncOp f) {
  Block &body = f.getBody().front();
  llvm::DenseSet<Value> weightOnly;
  for (BlockArgument arg : body.getArguments())
    if (f.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr))
      weightOnly.insert(arg);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    if (op.hasTrait<OpTrait::ConstantLike>() || op.getNumOperands() == 0)
      continue;
    bool onlyWeights = llvm::all_of(op.getOperands(), [&](Value v) {
      Operation *d = v.getDefiningOp();
      return weightOnly.count(v) || (d && d->hasTrait<OpTrait::ConstantLike>());
    });
    if (!onlyWeights)
      continue;
    for (Value r : op.getResults())
      weightOnly.insert(r);
    ops.push_back(&op);
  }
  for (Operation *op : llvm::reverse(ops)) {
    Operation *first = nullptr;
    for (Operation *user : op->getUsers())
      if (user->getBlock() == &body && (!first || user->isBeforeInBlock(first)))
        first = user;
    if (first && op->getNextNode() != first)
      op->moveBefore(first);
  }
}

bool dependsOnArgument(Value v, llvm::DenseMap<Value, bool> &memo,
                       function_ref<bool(func::FuncOp, unsigned)> pred) {
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  bool result = false;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      result = pred(f, arg.getArgNumber());
  } else {
    memo[v] = false; // no cycles in a block; guards the recursion
    for (Value in : v.getDefiningOp()->getOperands())
      if ((result = dependsOnArgument(in, memo, pred)))
        break;
  }
  return memo[v] = result;
}

bool isBatchInput(func::FuncOp f, unsigned i) {
  auto n = f.getArgAttrOfType<StringAttr>(i, SmpDialect::kInputAttr);
  return n && !n.getValue().starts_with("@");
}

void eraseStopGradients(ModuleOp module) {
  module.walk([](CastOp cast) {
    if (cast->hasAttr(SmpDialect::kNoGradAttr) &&
        cast.getInput().getType() == cast.getType()) {
      cast.getResult().replaceAllUsesWith(cast.getInput());
      cast->erase();
    }
  });
}

} // namespace smp
