//===- TrainStepContract.cpp - The IR between the train-step passes -------===//
//
// See TrainStepContract.h.
//
//===----------------------------------------------------------------------===//

#include "TrainStepContract.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <map>

using namespace mlir;

namespace smp {

FailureOr<func::FuncOp> trainStep(ModuleOp module, StringRef pass) {
  if (auto f = lookupFuncOrError(module, "train_step", pass,
                                 "(run smp-build-gradients first)"))
    return f;
  return failure();
}

int64_t dataParallelRanks(ModuleOp module) {
  auto grid = module.lookupSymbol<shard::GridOp>("dp");
  int64_t ranks = 1;
  if (grid)
    for (int64_t d : grid.getShape())
      ranks *= d;
  return ranks;
}

int64_t dataParallelShardRanks(ModuleOp module) {
  auto grid = module.lookupSymbol<shard::GridOp>("dp");
  if (!grid || grid.getShape().empty())
    return 1;
  return grid.getShape().back();
}

FailureOr<int64_t> shardedDataParallelRanks(ModuleOp module, StringRef pass) {
  if (dataParallelRanks(module) > 1)
    return dataParallelShardRanks(module);
  module.emitError() << pass
                     << " needs data parallelism (a shard.grid @dp of more "
                        "than one rank: smp-build-gradients{dp=N})";
  return failure();
}

SmallVector<int16_t> dataParallelAxes(ModuleOp module, DpGroup group) {
  auto grid = module.lookupSymbol<shard::GridOp>("dp");
  int16_t rank = grid ? static_cast<int16_t>(grid.getShape().size()) : 1;
  switch (group) {
  case DpGroup::All: {
    SmallVector<int16_t> axes;
    for (int16_t a = 0; a < rank; ++a)
      axes.push_back(a);
    return axes;
  }
  case DpGroup::Shard:
    return {static_cast<int16_t>(rank - 1)};
  case DpGroup::Replica:
    return rank > 1 ? SmallVector<int16_t>{0} : SmallVector<int16_t>{};
  }
  llvm_unreachable("unknown data-parallel group");
}

static ModuleOp moduleOf(OpBuilder &b) {
  return b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
}

Value reduceScatterDp(OpBuilder &b, Location loc, Value flat, int64_t shards) {
  auto t = cast<RankedTensorType>(flat.getType());
  MLIRContext *ctx = b.getContext();
  return shard::ReduceScatterOp::create(
      b, loc, t.clone(ArrayRef<int64_t>{t.getDimSize(0) / shards}),
      FlatSymbolRefAttr::get(ctx, "dp"),
      b.getDenseI16ArrayAttr(dataParallelAxes(moduleOf(b), DpGroup::Shard)),
      flat, shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum),
      b.getIndexAttr(0));
}

Value allReduceDp(OpBuilder &b, Location loc, Value v, DpGroup group) {
  SmallVector<int16_t> axes = dataParallelAxes(moduleOf(b), group);
  return shard::AllReduceOp::create(
      b, loc, v, "dp",
      ArrayRef<shard::GridAxis>(axes),
      shard::ReductionKind::Sum);
}

Value gatherDp(OpBuilder &b, Location loc, Value v, int64_t ranks,
               DpGroup group) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(t.getShape());
  shape[0] *= ranks;
  return shard::AllGatherOp::create(
      b, loc, t.clone(shape), FlatSymbolRefAttr::get(b.getContext(), "dp"),
      b.getDenseI16ArrayAttr(dataParallelAxes(moduleOf(b), group)), v,
      b.getIndexAttr(0));
}

Value sliceDp(OpBuilder &b, Location loc, Value flat, int64_t shards) {
  auto t = cast<RankedTensorType>(flat.getType());
  SmallVector<int16_t> axes = dataParallelAxes(moduleOf(b), DpGroup::Shard);
  return shard::AllSliceOp::create(
      b, loc, t.clone(ArrayRef<int64_t>{t.getDimSize(0) / shards}), flat,
      "dp",
      ArrayRef<shard::GridAxis>(axes),
      0);
}

Value flattenPadded(OpBuilder &b, Location loc, Value v, int64_t dp) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t n = t.getNumElements(), padded = (n + dp - 1) / dp * dp;
  Value flat = t.getRank() == 1
                   ? v
                   : ReshapeOp::create(b, loc, t.clone(ArrayRef<int64_t>{n}), v);
  if (padded == n)
    return flat;
  auto zeros = RankedTensorType::get({padded - n}, t.getElementType());
  Value pad = ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          zeros, APFloat::getZero(
                     cast<FloatType>(t.getElementType()).getFloatSemantics())));
  return ConcatOp::create(b, loc, ValueRange{flat, pad},
                          b.getI64IntegerAttr(0));
}

Value unpadded(OpBuilder &b, Location loc, Value flat, RankedTensorType pt) {
  int64_t n = pt.getNumElements();
  if (cast<RankedTensorType>(flat.getType()).getDimSize(0) != n)
    flat = SliceOp::create(b, loc, flat, b.getDenseI64ArrayAttr({0}),
                           b.getDenseI64ArrayAttr({n}),
                           b.getDenseI64ArrayAttr({1}));
  if (flat.getType() == pt)
    return flat;
  return ReshapeOp::create(b, loc, pt, flat);
}

Value unshard(OpBuilder &b, Location loc, Value chunk, RankedTensorType pt,
              int64_t shards) {
  return unpadded(b, loc, gatherDp(b, loc, chunk, shards, DpGroup::Shard), pt);
}

void markLike(OpBuilder &b, Operation *mark, Operation *from) {
  if (!from)
    return;
  static constexpr llvm::StringLiteral kMarks[] = {
      SmpDialect::kMicrobatchAttr, SmpDialect::kBackwardAttr,
      SmpDialect::kStageAttr};
  Block *block = b.getInsertionBlock();
  Operation *first = mark ? mark->getNextNode() : &block->front();
  for (Operation *op = first; op && op != &*b.getInsertionPoint();
       op = op->getNextNode())
    for (StringRef name : kMarks) {
      if (Attribute a = from->getAttr(name))
        op->setAttr(name, a);
      else
        op->removeAttr(name);
    }
}

SmallVector<Gradient> gradients(func::FuncOp f) {
  SmallVector<Gradient> grads;
  Operation *ret = f.getBody().front().getTerminator();
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (auto of = f.getResultAttrOfType<IntegerAttr>(i, kGradOfAttr)) {
      LayoutAttr layout = getResultLayout(f, i);
      grads.push_back({i, f.getArgument(of.getInt()), ret->getOperand(i),
                       layout && layout.getDpChunked()});
    }
  return grads;
}

void setGradientChunk(func::FuncOp f, const Gradient &g, Value chunk) {
  setResult(f, g.result, chunk);
  setResultLayout(
      f, g.result,
      LayoutAttr::chunk(f.getContext(),
                        cast<RankedTensorType>(g.param.getType()).getShape()));
}

Operation *lastDefinition(Block &block, ValueRange values) {
  Operation *last = nullptr;
  for (Value v : values)
    if (Operation *d = v.getDefiningOp();
        d && d->getBlock() == &block && (!last || last->isBeforeInBlock(d)))
      last = d;
  return last;
}

SmallVector<SmallVector<unsigned>>
gradientBuckets(Block &block, ArrayRef<Value> values, double bucketMb,
                llvm::function_ref<bool(unsigned, unsigned)> together) {
  SmallVector<unsigned> order;
  for (unsigned k = 0; k < values.size(); ++k)
    if (values[k])
      order.push_back(k);
  auto defOf = [&](unsigned k) -> Operation * {
    Operation *d = values[k].getDefiningOp();
    return d && d->getBlock() == &block ? d : nullptr;
  };
  llvm::stable_sort(order, [&](unsigned x, unsigned y) {
    Operation *a = defOf(x), *c = defOf(y);
    if (!a || !c)
      return bool(c) && !a;
    return a->isBeforeInBlock(c);
  });
  uint64_t limit = static_cast<uint64_t>(bucketMb * 1024.0 * 1024.0);
  SmallVector<SmallVector<unsigned>> buckets;
  uint64_t bytes = 0;
  for (unsigned k : order) {
    auto t = cast<RankedTensorType>(values[k].getType());
    uint64_t size = t.getNumElements() * t.getElementTypeBitWidth() / 8;
    if (buckets.empty() || !together(buckets.back().front(), k) ||
        bytes + size > limit) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(k);
    bytes += size;
  }
  return buckets;
}

std::optional<unsigned> findResult(func::FuncOp f, StringRef attr,
                                   StringRef name) {
  for (unsigned i = 0; i < f.getNumResults(); ++i) {
    Attribute a = f.getResultAttr(i, attr);
    if (!a)
      continue;
    auto s = dyn_cast<StringAttr>(a);
    if (name.empty() || (s && s.getValue() == name))
      return i;
  }
  return std::nullopt;
}

void setResult(func::FuncOp f, unsigned i, Value v) {
  Block &body = f.getBody().front();
  body.getTerminator()->setOperand(i, v);
  f.setType(FunctionType::get(f.getContext(), body.getArgumentTypes(),
                              body.getTerminator()->getOperandTypes()));
}

void setResults(func::FuncOp f, ValueRange values,
                ArrayRef<DictionaryAttr> attrs) {
  Block &body = f.getBody().front();
  Operation *ret = body.getTerminator();
  OpBuilder b(ret);
  func::ReturnOp::create(b, f.getLoc(), values);
  ret->erase();
  f.setType(FunctionType::get(f.getContext(), body.getArgumentTypes(),
                              ValueRange(values).getTypes()));
  f.setAllResultAttrs(attrs);
}

void appendResult(func::FuncOp f, Value v, StringRef attr, Attribute value) {
  Operation *ret = f.getBody().front().getTerminator();
  SmallVector<Value> values(ret->getOperands());
  SmallVector<DictionaryAttr> attrs;
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    attrs.push_back(f.getResultAttrDict(i)
                        ? f.getResultAttrDict(i)
                        : DictionaryAttr::get(f.getContext()));
  values.push_back(v);
  attrs.push_back(DictionaryAttr::get(
      f.getContext(),
      {NamedAttribute(StringAttr::get(f.getContext(), attr), value)}));
  setResults(f, values, attrs);
}

Value addInput(func::FuncOp f, Type type, StringRef name) {
  MLIRContext *ctx = f.getContext();
  unsigned index = f.getNumArguments();
  (void)f.insertArgument(
      index, type,
      DictionaryAttr::get(ctx, {NamedAttribute(
                                   StringAttr::get(ctx, SmpDialect::kInputAttr),
                                   StringAttr::get(ctx, name))}),
      f.getLoc());
  return f.getArgument(index);
}

Value addState(func::FuncOp f, Type type, StringRef name,
               std::optional<float> init, Value param) {
  MLIRContext *ctx = f.getContext();
  Builder b(ctx);
  unsigned index = f.getNumArguments();
  SmallVector<NamedAttribute> attrs{
      NamedAttribute(StringAttr::get(ctx, SmpDialect::kStateAttr),
                     StringAttr::get(ctx, name))};
  if (init)
    attrs.push_back(NamedAttribute(StringAttr::get(ctx, "smp.init"),
                                   b.getF32FloatAttr(*init)));
  if (auto arg = dyn_cast_or_null<BlockArgument>(param)) {
    LayoutAttr layout = getArgLayout(f, arg.getArgNumber());
    if (type != param.getType()) // a ZeRO-1 chunk of the parameter
      layout = LayoutAttr::chunkOf(
          layout, ctx, cast<RankedTensorType>(param.getType()).getShape());
    if (layout)
      attrs.push_back(namedLayout(layout));
  }
  (void)f.insertArgument(index, type, DictionaryAttr::get(ctx, attrs),
                         f.getLoc());
  return f.getArgument(index);
}

SmallVector<BackwardRange> backwardRanges(func::FuncOp f) {
  Block &body = f.getBody().front();
  bool unrolled = llvm::any_of(body, [](Operation &op) {
    return op.hasAttr(SmpDialect::kMicrobatchAttr);
  });
  auto keyOf = [&](Operation &op) -> std::optional<int64_t> {
    if (!unrolled)
      return 0;
    auto mb = op.getAttrOfType<IntegerAttr>(SmpDialect::kMicrobatchAttr);
    return mb ? std::optional<int64_t>(mb.getInt()) : std::nullopt;
  };
  std::map<int64_t, BackwardRange> ranges;
  for (Operation &op : body) {
    if (!op.hasAttr(SmpDialect::kBackwardAttr))
      continue;
    std::optional<int64_t> key = keyOf(op);
    if (!key)
      continue;
    auto [it, fresh] = ranges.try_emplace(*key);
    if (fresh) {
      it->second.begin = op.getIterator();
      if (unrolled)
        it->second.microbatch = *key;
    }
    it->second.end = std::next(op.getIterator());
  }
  // The forward: the ops before the backward (of the same micro-batch).
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::ConstantLike>() ||
        op.hasAttr(SmpDialect::kBackwardAttr))
      continue;
    std::optional<int64_t> key = keyOf(op);
    auto it = key ? ranges.find(*key) : ranges.end();
    if (it != ranges.end() && op.isBeforeInBlock(&*it->second.begin))
      it->second.forward.push_back(&op);
  }
  SmallVector<BackwardRange> result;
  for (auto &[key, range] : ranges)
    result.push_back(std::move(range));
  return result;
}

void markBackward(Operation *op, const BackwardRange &range) {
  Builder b(op->getContext());
  op->setAttr(SmpDialect::kBackwardAttr, b.getUnitAttr());
  if (range.microbatch)
    op->setAttr(SmpDialect::kMicrobatchAttr,
                b.getI64IntegerAttr(*range.microbatch));
}

} // namespace smp
