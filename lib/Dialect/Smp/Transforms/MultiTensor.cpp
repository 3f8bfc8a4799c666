//===- MultiTensor.cpp - smp-multi-tensor ---------------------------------===//
//
// Implements `smp-multi-tensor`: the step's per-parameter ops become one op
// over all the parameters, as PyTorch's fused and foreach optimizers do. On
// a GPU each of them is a launch on a tensor often too small to fill the
// device (a GPT-2 124M bf16 step: 148 adam_update and 148 cast launches,
// half of them on vectors of 768 elements).
//
// - adam_update, sgd_update: those with the same lr, step, skip and
//   hyper-parameters become one adam_update_multi (sgd_update_multi) where
//   the last of them was. An op that reads an update's result before then
//   ends the group there (the group so far becomes one op before it).
// - cast: the casts of the step's arguments between float types (mixed
//   precision's 16-bit copies of the f32 parameters) with the same
//   annotations (a pipeline stage's) become one cast_multi where the first
//   of them was; the float casts that only a concat reads (through
//   reshapes: data parallelism's 16-bit gradients cast to their f32
//   bucket) with the same annotations become one cast_multi right before
//   the concat.
// - add of f32 tensors of one shape where an operand is a cast of a 16-bit
//   tensor to f32 that only the add reads (gradient accumulation over
//   micro-batches under mixed precision: `add(acc, cast(g))`, a cast and an
//   add a parameter and micro-batch; a pipeline stage's GPT-2 share at 8
//   micro-batches: 832 casts and 738 adds of its 2,932 launches): those
//   with the same annotations become one add_multi of the 16-bit sources
//   where the last of them was, the casts gone; an op that reads a sum
//   ends the group there, as for the updates, and so does a group's
//   reaching 64 MiB of sums (its 16-bit operands stay live until then).
// - shard.all_slice along dim 0: those over the same grid axes, into the
//   same number of parts, of one element type and with the same
//   annotations (ZeRO-1/2's slices of the parameters for their update)
//   become one smp.all_slice_multi where the last of them was; an op that
//   reads a slice before then ends the group there, as for the updates.
//
// The kernels compute each tensor as its own op did: the bits do not
// change.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "smp/Pipelines/PipelineDefaults.h"
#include "llvm/ADT/MapVector.h"

#define DEBUG_TYPE "smp-multi-tensor"

namespace smp {
#define GEN_PASS_DEF_SMPMULTITENSORPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// Whether two updates may be one multi-tensor op: the same lr, step and
/// skip, and the same attributes (hyper-parameters and annotations).
template <typename OpT> bool sameUpdate(OpT a, OpT b) {
  return a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a.getSkip() == b.getSkip() &&
         a->getAttrDictionary() == b->getAttrDictionary();
}

/// The per-parameter values of `group` as columns: column c holds operand
/// (or result) c of each member, as `of(member)` lists them.
template <typename OpT, typename F>
SmallVector<SmallVector<Value>> columns(ArrayRef<OpT> group, F of) {
  SmallVector<SmallVector<Value>> cols;
  for (OpT op : group) {
    SmallVector<Value> row = of(op);
    cols.resize(row.size());
    for (auto [c, v] : llvm::enumerate(row))
      cols[c].push_back(v);
  }
  return cols;
}

/// The multi op of `group` at its last member's place, with its scalars,
/// hyper-parameters and annotations.
AdamUpdateMultiOp createMulti(OpBuilder &b, Location loc,
                              ArrayRef<AdamUpdateOp> group,
                              ArrayRef<SmallVector<Value>> in,
                              ArrayRef<Type> types) {
  AdamUpdateOp last = group.back();
  return AdamUpdateMultiOp::create(
      b, loc, types, types, types, in[0], in[1], in[2], in[3], last.getLr(),
      last.getStep(), last.getSkip(), last.getBeta1Attr(), last.getBeta2Attr(),
      last.getEpsilonAttr(), last.getWeightDecayAttr(),
      last.getDecoupledAttr());
}
SgdUpdateMultiOp createMulti(OpBuilder &b, Location loc,
                             ArrayRef<SgdUpdateOp> group,
                             ArrayRef<SmallVector<Value>> in,
                             ArrayRef<Type> types) {
  SgdUpdateOp last = group.back();
  return SgdUpdateMultiOp::create(
      b, loc, types, types, in[0], in[1], in[2], last.getLr(), last.getStep(),
      last.getSkip(), last.getMomentumAttr(), last.getDampeningAttr(),
      last.getWeightDecayAttr(), last.getNesterovAttr());
}

/// A member's per-parameter operands (param, grad, states) in the multi
/// op's order.
SmallVector<Value> perParam(AdamUpdateOp op) {
  return {op.getParam(), op.getGrad(), op.getExpAvg(), op.getExpAvgSq()};
}
SmallVector<Value> perParam(SgdUpdateOp op) {
  return {op.getParam(), op.getGrad(), op.getMomentumBuffer()};
}

/// Replaces `group` (two or more, in program order) by one multi-tensor op
/// where the last of them is: member i's result r becomes result r of
/// parameter i.
template <typename OpT> void fuseUpdates(ArrayRef<OpT> group) {
  if (group.size() < 2)
    return;
  SmallVector<Type> types;
  SmallVector<Location> locs;
  for (OpT op : group) {
    types.push_back(op.getParam().getType());
    locs.push_back(op.getLoc());
  }
  OpBuilder b(group.back());
  auto multi =
      createMulti(b, b.getFusedLoc(locs), group,
                  columns(group, [](OpT op) { return perParam(op); }), types);
  multi->setDiscardableAttrs(group.back()->getDiscardableAttrDictionary());
  size_t n = group.size();
  for (auto [i, member] : llvm::enumerate(group)) {
    OpT op = member;
    for (unsigned r = 0; r < op->getNumResults(); ++r)
      op->getResult(r).replaceAllUsesWith(multi->getResult(r * n + i));
    op.erase();
  }
}

/// Groups the block's ops of type OpT that `eligible` takes, in program
/// order, each with the first group whose first member it is `same` as;
/// `fuse` makes a group (in program order) one op. An op that reads a
/// member's result ends that member's group first: the group so far is
/// fused before the reader. A group that `full` says is full once a member
/// joins is fused there.
template <typename OpT, typename Eligible, typename Same, typename Fuse>
void groupInOrder(Block &block, Eligible eligible, Same same, Fuse fuse,
                  llvm::function_ref<bool(ArrayRef<OpT>)> full = nullptr) {
  std::vector<SmallVector<OpT>> open;
  llvm::DenseMap<Operation *, size_t> groupOf; // member -> index in `open`
  auto flush = [&](size_t g) {
    SmallVector<OpT> group = std::move(open[g]);
    open[g].clear();
    for (OpT op : group)
      groupOf.erase(op);
    fuse(ArrayRef<OpT>(group));
  };
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        if (auto it = groupOf.find(def); it != groupOf.end())
          flush(it->second);
    auto member = dyn_cast<OpT>(op);
    if (!member || !eligible(member))
      continue;
    // Its group, or a new one (a flushed group stays, empty).
    auto it = llvm::find_if(open, [&](ArrayRef<OpT> group) {
      return !group.empty() && same(group.front(), member);
    });
    size_t g = it - open.begin();
    if (it == open.end())
      open.emplace_back();
    open[g].push_back(member);
    groupOf[member] = g;
    if (full && full(open[g]))
      flush(g);
  }
  for (size_t g = 0; g < open.size(); ++g)
    flush(g);
}

/// Groups the block's updates of type OpT (see the file comment).
template <typename OpT> void groupUpdates(Block &block) {
  groupInOrder<OpT>(
      block, [](OpT) { return true; }, sameUpdate<OpT>, fuseUpdates<OpT>);
}

/// What all_slices must share to be one all_slice_multi (see the file
/// comment): grid, axes, parts, element type, annotations.
using SliceKey =
    std::tuple<StringRef, ArrayRef<int16_t>, int64_t, Type, DictionaryAttr>;
std::optional<SliceKey> sliceKey(shard::AllSliceOp op) {
  auto in = cast<RankedTensorType>(op.getInput().getType());
  auto out = cast<RankedTensorType>(op.getResult().getType());
  if (op.getSliceAxis().getSExtValue() != 0 || out.getRank() < 1 ||
      out.getDimSize(0) <= 0 || !in.hasStaticShape())
    return std::nullopt;
  return SliceKey{op.getGrid(), op.getGridAxes(),
                  in.getDimSize(0) / out.getDimSize(0), in.getElementType(),
                  op->getDiscardableAttrDictionary()};
}

/// `group` (two or more, in program order) becomes one all_slice_multi
/// where the last of them is.
void fuseSlices(ArrayRef<shard::AllSliceOp> group) {
  if (group.size() < 2)
    return;
  SmallVector<Value> inputs;
  SmallVector<Type> types;
  SmallVector<Location> locs;
  for (shard::AllSliceOp op : group) {
    inputs.push_back(op.getInput());
    types.push_back(op.getResult().getType());
    locs.push_back(op.getLoc());
  }
  shard::AllSliceOp last = group.back();
  OpBuilder b(last);
  auto multi =
      AllSliceMultiOp::create(b, b.getFusedLoc(locs), types, inputs,
                              last.getGridAttr(), last.getGridAxesAttr());
  multi->setDiscardableAttrs(last->getDiscardableAttrDictionary());
  for (auto [i, member] : llvm::enumerate(group)) {
    shard::AllSliceOp op = member;
    op.getResult().replaceAllUsesWith(multi.getResults()[i]);
    op.erase();
  }
}

/// The block's all_slices along dim 0, grouped as the file comment says.
void groupSlices(Block &block) {
  groupInOrder<shard::AllSliceOp>(
      block, [](shard::AllSliceOp op) { return sliceKey(op).has_value(); },
      [](shard::AllSliceOp a, shard::AllSliceOp b) {
        return sliceKey(a) == sliceKey(b);
      },
      fuseSlices);
}

/// A cast between float types.
bool isFloatCast(CastOp op) {
  return isa<FloatType>(getElementTypeOrSelf(op.getInput().getType())) &&
         isa<FloatType>(getElementTypeOrSelf(op.getType()));
}

/// A cast of one of the block's arguments between float types.
bool isArgumentCast(CastOp op, Block &block) {
  auto arg = dyn_cast<BlockArgument>(op.getInput());
  return arg && arg.getOwner() == &block && isFloatCast(op);
}

/// `casts` (two or more, in program order) become one cast_multi before
/// `at` (null: where the first of them is).
void fuseCasts(ArrayRef<CastOp> casts, Operation *at = nullptr) {
  if (casts.size() < 2)
    return;
  SmallVector<Value> inputs;
  SmallVector<Type> types;
  SmallVector<Location> locs;
  for (CastOp c : casts) {
    inputs.push_back(c.getInput());
    types.push_back(c.getType());
    locs.push_back(c.getLoc());
  }
  Operation *first = CastOp(casts.front()).getOperation();
  OpBuilder b(at ? at : first);
  auto multi = CastMultiOp::create(b, b.getFusedLoc(locs), types, inputs);
  multi->setDiscardableAttrs(casts.front()->getDiscardableAttrDictionary());
  for (auto [i, member] : llvm::enumerate(casts)) {
    CastOp c = member;
    c.getResult().replaceAllUsesWith(multi.getResults()[i]);
    c.erase();
  }
}

/// The block's casts of its arguments, by annotations (a pipeline stage's
/// own), become one cast_multi each where the first of them is.
void groupArgumentCasts(Block &block) {
  llvm::MapVector<DictionaryAttr, SmallVector<CastOp>> groups;
  for (Operation &op : block)
    if (auto c = dyn_cast<CastOp>(op); c && isArgumentCast(c, block))
      groups[c->getDiscardableAttrDictionary()].push_back(c);
  for (auto &[annotations, casts] : groups)
    fuseCasts(casts);
}

/// The float casts that only a concat reads, each directly or through
/// reshapes that nothing else reads (data parallelism's 16-bit gradients
/// cast to their f32 bucket: a launch each on a GPU, 148 a GPT-2 step), by
/// annotations, become one cast_multi right before the concat; the reshapes
/// move after it.
void groupBucketCasts(Block &block) {
  SmallVector<ConcatOp> concats;
  for (Operation &op : block)
    if (auto c = dyn_cast<ConcatOp>(op))
      concats.push_back(c);
  for (ConcatOp concat : concats) {
    llvm::MapVector<DictionaryAttr, SmallVector<CastOp>> groups;
    llvm::DenseMap<Operation *, SmallVector<Operation *>> chainOf;
    for (Value v : concat.getInputs()) {
      SmallVector<Operation *> chain; // the reshapes, concat side first
      while (auto r = v.getDefiningOp<ReshapeOp>()) {
        if (!r->hasOneUse())
          break;
        chain.push_back(r);
        v = r.getInput();
      }
      auto c = v.getDefiningOp<CastOp>();
      if (!c || !c->hasOneUse() || c->getBlock() != &block || !isFloatCast(c))
        continue;
      groups[c->getDiscardableAttrDictionary()].push_back(c);
      chainOf[c] = std::move(chain);
    }
    for (auto &[annotations, casts] : groups) {
      if (casts.size() < 2)
        continue;
      for (CastOp c : casts)
        for (Operation *r : llvm::reverse(chainOf[c]))
          r->moveBefore(concat);
      // Before the first reshape moved (or the concat).
      Operation *at = concat;
      for (CastOp c : casts)
        if (!chainOf[c].empty() && chainOf[c].back()->isBeforeInBlock(at))
          at = chainOf[c].back();
      fuseCasts(casts, at);
    }
  }
}

/// v's 16-bit float source where v is a cast of it to f32 that nothing but
/// its one reader reads; null otherwise.
Value widenedSource(Value v) {
  auto c = v.getDefiningOp<CastOp>();
  if (!c || !c->hasOneUse())
    return {};
  Type from = getElementTypeOrSelf(c.getInput().getType());
  if (!(from.isF16() || from.isBF16()) ||
      !getElementTypeOrSelf(c.getType()).isF32())
    return {};
  return c.getInput();
}

/// An f32 add of two operands of its shape of which at least one is such a
/// cast (the micro-batches' accumulation of 16-bit gradients): its pair in
/// an add_multi, each cast's source in the cast's place.
std::optional<std::pair<Value, Value>> accumulation(AddOp add) {
  auto t = dyn_cast<RankedTensorType>(add.getType());
  if (!t || !t.hasStaticShape() || !t.getElementType().isF32() ||
      add.getLhs().getType() != t || add.getRhs().getType() != t)
    return std::nullopt;
  Value l = widenedSource(add.getLhs()), r = widenedSource(add.getRhs());
  if (!l && !r)
    return std::nullopt;
  return std::pair{l ? l : add.getLhs(), r ? r : add.getRhs()};
}

/// `group` (two or more accumulations, in program order) becomes one
/// add_multi where the last of them is; the casts they read go.
void fuseAccumulations(ArrayRef<AddOp> group) {
  if (group.size() < 2)
    return;
  SmallVector<Value> inputs(2 * group.size());
  SmallVector<Type> types;
  SmallVector<Location> locs;
  SmallVector<Operation *> casts;
  for (auto [i, member] : llvm::enumerate(group)) {
    AddOp add = member;
    auto [l, r] = *accumulation(add);
    inputs[i] = l;
    inputs[group.size() + i] = r;
    types.push_back(add.getType());
    locs.push_back(add.getLoc());
    for (Value v : {add.getLhs(), add.getRhs()})
      if (widenedSource(v))
        casts.push_back(v.getDefiningOp());
  }
  AddOp last = group.back();
  OpBuilder b(last);
  auto multi = AddMultiOp::create(b, b.getFusedLoc(locs), types, inputs);
  multi->setDiscardableAttrs(last->getDiscardableAttrDictionary());
  for (auto [i, member] : llvm::enumerate(group)) {
    AddOp add = member;
    add.getResult().replaceAllUsesWith(multi.getResults()[i]);
    add.erase();
  }
  for (Operation *c : casts)
    c->erase();
}

/// The block's accumulations (see the file comment), by annotations.
void groupAccumulations(Block &block) {
  // A group's bytes of sums so far, by its first member (an op of the
  // block before the pass: no group's first is made by a flush).
  llvm::DenseMap<Operation *, int64_t> sums;
  groupInOrder<AddOp>(
      block, [](AddOp op) { return accumulation(op).has_value(); },
      [](AddOp a, AddOp b) {
        return a->getDiscardableAttrDictionary() ==
               b->getDiscardableAttrDictionary();
      },
      fuseAccumulations,
      [&](ArrayRef<AddOp> group) {
        AddOp first = group.front(), last = group.back();
        int64_t &bytes = sums[first];
        bytes += cast<RankedTensorType>(last.getType()).getNumElements() * 4;
        return bytes >= kAccumulationGroupBytes; // PipelineDefaults.h
      });
}

struct SmpMultiTensorPass
    : public smp::impl::SmpMultiTensorPassBase<SmpMultiTensorPass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      groupUpdates<AdamUpdateOp>(block);
      groupUpdates<SgdUpdateOp>(block);
      groupAccumulations(block);
      groupArgumentCasts(block);
      groupSlices(block);
      groupBucketCasts(block);
    }
  }
};

} // namespace
