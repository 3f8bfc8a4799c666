//===- SequenceParallel.cpp - Megatron sequence parallelism ---------------===//
//
// Implements `smp-sequence-parallel`. See Passes.td for the contract.
//
// Between smp-tensor-parallel's regions every op works token by token (bias
// and residual adds, norms over the last dim, elementwise ops), so a rank
// need only hold 1/tp of the tokens there. A value of shape [d0, ..., H] is
// viewed as [T, H] (T: the micro-batch's tokens, the product of the leading
// dims) and a rank holds rows [r T/tp, (r + 1) T/tp). A region's exit, the
// all_reduce of its partial sums, becomes a reduce_scatter onto the rank's
// rows; each token-wise op reading such rows is redone on them; wherever a
// whole value is needed again (a region's tp_copy entry, anything that is
// not token-wise) the rows are all-gathered. The gradients follow from the
// collectives' VJPs (OpModels/Communication.cpp): reduce_scatter and
// all_slice get all_gather, all_gather gets all_slice, and the tp_copy
// before a region makes its all_reduce + all_slice a reduce_scatter
// (smp-fuse-backward). A replicated operand of a token-wise op is read as
// its rows (all_slice) or, when it broadcasts over the tokens (a norm's
// scale, a bias), through tp_copy: its gradient, summed over this rank's
// tokens only, is all-reduced over tp.
//
//===----------------------------------------------------------------------===//

#include "TrainStepUtils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Dialect/Smp/IR/DropoutKey.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/IR/SmpTraits.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace smp {
#define GEN_PASS_DEF_SMPSEQUENCEPARALLELPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// The tokens of a statically shaped value of rank >= 2 (the product of its
/// leading dims), or nullopt.
std::optional<int64_t> tokensOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape() || t.getRank() < 2)
    return std::nullopt;
  int64_t n = 1;
  for (int64_t d : t.getShape().drop_back())
    n *= d;
  return n;
}

/// Whether `from` broadcasts numpy-style to `to`.
bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  for (size_t k = 1; k <= from.size(); ++k)
    if (from[from.size() - k] != 1 &&
        from[from.size() - k] != to[to.size() - k])
      return false;
  return true;
}

/// How a token-wise op on a rank's rows reads an operand.
enum class Read { Rows, Broadcast };

struct SequenceParallel {
  SequenceParallel(func::FuncOp main, int64_t tp)
      : main(main), tp(tp), b(main.getContext()) {}

  func::FuncOp main;
  int64_t tp;
  OpBuilder b;
  /// Each whole value that has this rank's rows: the rows, [T / tp, H].
  llvm::MapVector<Value, Value> rows;
  /// Replicated operands read whole by ops on rows: their tp_copy.
  llvm::DenseMap<Value, Value> entered;
  /// Replicated values broadcast to a shape and sliced: their rows.
  llvm::DenseMap<std::pair<Value, Type>, Value> sliced;
  /// The ops whose results have rows (their originals die at the end).
  llvm::SetVector<Operation *> replaced;
  /// The region exits that became reduce_scatters.
  int64_t seeds = 0;

  RankedTensorType rowsType(Value whole) {
    auto t = cast<RankedTensorType>(whole.getType());
    return RankedTensorType::get({*tokensOf(whole) / tp, t.getShape().back()},
                                 t.getElementType());
  }

  /// `v` viewed as [T, H].
  Value flatten(Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() == 2)
      return v;
    return ReshapeOp::create(
        b, v.getLoc(), t.clone(ArrayRef<int64_t>{*tokensOf(v), t.getShape().back()}),
        v);
  }

  /// Whether `op` computes each token from the same token of its operands.
  static bool tokenWise(Operation *op) {
    if (op->getNumResults() != 1 || !tokensOf(op->getResult(0)))
      return false;
    if (auto ln = dyn_cast<LayerNormOp>(op)) {
      int64_t rank = shapeOf(ln.getInput()).size();
      int64_t axis = static_cast<int64_t>(ln.getAxis());
      if (axis < 0)
        axis += rank;
      return axis == rank - 1;
    }
    if (isa<RmsNormOp>(op))
      return true;
    return op->hasTrait<OpTrait::Elementwise>() ||
           op->hasTrait<OpTrait::smp::BroadcastingElementwise>();
  }

  /// How `op` (token-wise, result shape `shape`) reads operand `o` on rows:
  /// as rows (its own, or a replicated value's) or broadcast whole.
  std::optional<Read> readOf(Value o, ArrayRef<int64_t> shape) {
    ArrayRef<int64_t> s = shapeOf(o);
    if (rows.count(o))
      return s == shape ? std::optional<Read>(Read::Rows) : std::nullopt;
    if (!broadcastsTo(s, shape))
      return std::nullopt;
    int64_t lead = 1;
    for (size_t k = 0; k + 1 < s.size(); ++k)
      lead *= s[k];
    return lead == 1 ? Read::Broadcast : Read::Rows;
  }

  /// Whether `op` can run on this rank's rows (with `anyTokens`: whatever
  /// the number of tokens).
  bool onRows(Operation *op, bool anyTokens = false) {
    if (!tokenWise(op) ||
        (!anyTokens && *tokensOf(op->getResult(0)) % tp != 0))
      return false;
    ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
    bool any = false;
    for (Value o : op->getOperands()) {
      std::optional<Read> read = readOf(o, shape);
      if (!read)
        return false;
      any |= rows.count(o) > 0;
    }
    return any;
  }

  /// A reshape that keeps the tokens and the last dim: rows in, rows out.
  static bool keepsRows(ReshapeOp r) {
    return tokensOf(r.getInput()) && tokensOf(r.getResult()) &&
           tokensOf(r.getResult()) == tokensOf(r.getInput()) &&
           shapeOf(r.getResult()).back() == shapeOf(r.getInput()).back();
  }

  /// Whether an op would run on rows if `v` had rows (directly or through
  /// reshapes that keep them).
  bool readOnRows(Value v) {
    for (Operation *user : v.getUsers()) {
      if (auto r = dyn_cast<ReshapeOp>(user); r && keepsRows(r)) {
        if (readOnRows(r.getResult()))
          return true;
        continue;
      }
      rows[v] = Value(); // as if it had rows, for the check
      bool ok = onRows(user, /*anyTokens=*/true);
      rows.erase(v);
      if (ok)
        return true;
    }
    return false;
  }

  /// This rank's rows of operand `o` of an op of result shape `shape`.
  Value rowsOf(Value o, Type shapeType, Location loc) {
    if (auto it = rows.find(o); it != rows.end())
      return it->second;
    Value &slot = sliced[{o, shapeType}];
    if (slot)
      return slot;
    auto whole = cast<RankedTensorType>(shapeType).clone(
        cast<RankedTensorType>(o.getType()).getElementType());
    Value full = o.getType() == whole ? o : Value(ExpandOp::create(b, loc, whole, o));
    Value flat = flatten(full);
    slot = shard::AllSliceOp::create(b, loc, rowsType(full), flat, "tp",
                                     ArrayRef<shard::GridAxis>{0}, 0);
    return slot;
  }

  /// `o` read whole by an op on rows: its gradient is all-reduced over tp.
  Value broadcastOf(Value o) {
    Operation *def = o.getDefiningOp();
    if ((def && def->hasTrait<OpTrait::ConstantLike>()) ||
        !isa<FloatType>(getElementTypeOrSelf(o.getType())))
      return o;
    Value &copy = entered[o];
    if (!copy)
      copy = TpCopyOp::create(b, o.getLoc(), o);
    return copy;
  }

  /// The region exit `ar` as a reduce_scatter onto this rank's rows.
  LogicalResult seed(shard::AllReduceOp ar) {
    Value sum = ar.getResult();
    std::optional<int64_t> tokens = tokensOf(sum);
    if (!tokens || ar.getReduction() != shard::ReductionKind::Sum ||
        !readOnRows(sum))
      return success();
    if (*tokens % tp != 0)
      return ar.emitError()
             << "sequence parallelism splits the " << *tokens
             << " tokens of a micro-batch (the leading dims of "
             << ar.getResult().getType() << ") over tp " << tp
             << ", which does not divide them; give a micro-batch whose "
                "tokens tp divides, or leave out --sequence-parallel";
    b.setInsertionPointAfter(ar);
    Value flat = flatten(ar.getInput());
    MLIRContext *ctx = b.getContext();
    rows[sum] = shard::ReduceScatterOp::create(
        b, ar.getLoc(), rowsType(sum), FlatSymbolRefAttr::get(ctx, "tp"),
        b.getDenseI16ArrayAttr({0}), flat,
        shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum),
        b.getIndexAttr(0));
    replaced.insert(ar);
    ++seeds;
    return success();
  }

  /// Redoes the token-wise `op` on this rank's rows.
  void cloneOnRows(Operation *op) {
    b.setInsertionPoint(op);
    Value result = op->getResult(0);
    SmallVector<Value> operands;
    for (Value o : op->getOperands())
      operands.push_back(*readOf(o, shapeOf(result)) == Read::Rows
                             ? rowsOf(o, result.getType(), op->getLoc())
                             : broadcastOf(o));
    Operation *c = b.clone(*op);
    c->setOperands(operands);

    c->getResult(0).setType(rowsType(result));
    if (auto ln = dyn_cast<LayerNormOp>(c))
      ln.setAxis(1);
    // A dropout on rows draws its rows of the mask: the rows are a split of
    // the [T, H] view's dim 0 over tp (its samples stay leading).
    if (isa<DropoutOp>(c))
      setDropoutTpSplit(c, 0, tp, 1);
    rows[result] = c->getResult(0);
    replaced.insert(op);
  }

  /// Whole values again where an op that is not on rows reads them.
  void gatherTheRest() {
    for (auto &[whole, part] : rows) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : whole.getUses())
        if (!replaced.count(use.getOwner()))
          uses.push_back(&use);
      if (uses.empty())
        continue;
      Operation *first = uses.front()->getOwner();
      for (OpOperand *use : uses)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      b.setInsertionPoint(first);
      auto t = cast<RankedTensorType>(whole.getType());
      Value all = shard::AllGatherOp::create(
          b, whole.getLoc(),
          t.clone(ArrayRef<int64_t>{*tokensOf(whole), t.getShape().back()}),
          FlatSymbolRefAttr::get(b.getContext(), "tp"),
          b.getDenseI16ArrayAttr({0}), part, b.getIndexAttr(0));
      if (all.getType() != t)
        all = ReshapeOp::create(b, whole.getLoc(), t, all);
      for (OpOperand *use : uses)
        use->set(all);
    }
  }

  LogicalResult run() {
    Block &body = main.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
        if (ar.getGrid() == "tp" && failed(seed(ar)))
          return failure();
        continue;
      }
      auto reshape = dyn_cast<ReshapeOp>(op);
      if (reshape && rows.count(reshape.getInput()) && keepsRows(reshape)) {
        Value part = rows.lookup(reshape.getInput());
        rows[reshape.getResult()] = part;
        replaced.insert(&op);
        continue;
      }
      if (onRows(&op))
        cloneOnRows(&op);
    }
    if (seeds == 0)
      return main.emitError()
             << "smp-sequence-parallel: found no tensor-parallel region whose "
                "output is read token by token (a norm, a residual add) to "
                "split along the sequence";
    gatherTheRest();
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (replaced.count(&op) && op.use_empty())
        op.erase();
    return success();
  }
};

struct SmpSequenceParallelPass
    : public smp::impl::SmpSequenceParallelPassBase<SmpSequenceParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = lookupFuncOrError(module, "main", "smp-sequence-parallel",
                                  "to split");
    if (!main)
      return signalPassFailure();
    auto grid = module.lookupSymbol<shard::GridOp>("tp");
    if (!grid || grid.getShape().size() != 1 || grid.getShape()[0] < 2) {
      module.emitError("smp-sequence-parallel needs tensor parallelism (a "
                       "shard.grid @tp of more than one rank: run "
                       "smp-tensor-parallel{tp=N} first)");
      return signalPassFailure();
    }
    SequenceParallel sp(main, grid.getShape()[0]);
    if (failed(sp.run()))
      return signalPassFailure();
  }
};

} // namespace
