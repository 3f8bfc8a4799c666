//===- TensorParallel.cpp - Megatron-style tensor parallelism -------------===//
//
// Implements `smp-tensor-parallel`. See Passes.td for the contract.
//
// A sharding says which dimension of a value each rank holds 1/tp of: Shard
// {dim, blocks} splits dim, viewed as [blocks, n], along n (blocks > 1 for
// the fused QKV projection that an equal split cuts into Q, K and V). Region
// discovery starts at a candidate row-parallel matmul (activation x weight)
// and requires its input split along the contraction dim, then walks the
// producers backwards, deriving each operand's sharding from its result's,
// until it reaches column-parallel matmuls of unsplit inputs. Any op it
// cannot see through ends the attempt (the matmul stays replicated); a
// region that is sound but whose sizes tp does not divide is an error.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace smp {
#define GEN_PASS_DEF_SMPTENSORPARALLELPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct Shard {
  int64_t dim = 0;
  int64_t blocks = 1;
  bool operator==(const Shard &o) const {
    return dim == o.dim && blocks == o.blocks;
  }
};

std::string nameOf(Operation *op) {
  if (auto loc = dyn_cast<NameLoc>(op->getLoc()))
    return loc.getName().str();
  return op->getName().getStringRef().str();
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// One candidate region: the values it splits and the weights it shards.
struct Region {
  int64_t tp;
  llvm::DenseSet<Value> weightOnly; // values computed from parameters only
  llvm::MapVector<Value, Shard> act;
  llvm::MapVector<Value, Shard> weights;
  llvm::SetVector<Operation *> columns;
  std::string indivisible; // the first size tp does not divide

  bool divisible(Value v, Shard s, Operation *at) {
    ArrayRef<int64_t> shape = shapeOf(v);
    if (s.dim < 0 || s.dim >= static_cast<int64_t>(shape.size()))
      return false;
    if (shape[s.dim] % (tp * s.blocks) != 0 && indivisible.empty()) {
      indivisible = "'" + nameOf(at) + "' has " + std::to_string(shape[s.dim]) +
                    (s.blocks > 1 ? " (" + std::to_string(s.blocks) + " blocks)"
                                  : std::string()) +
                    " along the dimension tp splits (heads or hidden units), "
                    "which tp " + std::to_string(tp) + " does not divide";
    }
    return true;
  }

  bool requireWeight(Value w, Shard s) {
    if (auto it = weights.find(w); it != weights.end())
      return it->second == s;
    if (!weightOnly.count(w))
      return false;
    weights.insert({w, s});
    Operation *def = w.getDefiningOp();
    if (!divisible(w, s, def ? def : w.getParentBlock()->getParentOp()))
      return false;
    if (!def)
      return true; // the parameter itself
    if (auto t = dyn_cast<TransposeOp>(def))
      return requireWeight(t.getInput(), Shard{t.getPerm()[s.dim], s.blocks});
    if (def->hasTrait<OpTrait::Elementwise>() && def->getNumOperands() == 1)
      return requireWeight(def->getOperand(0), s);
    return false;
  }

  /// Operand `o` of a broadcasting elementwise op whose result is split `s`.
  bool requireBroadcastOperand(Value o, Shard s, int64_t resultRank) {
    int64_t ad = s.dim - (resultRank - static_cast<int64_t>(shapeOf(o).size()));
    if (ad < 0 || shapeOf(o)[ad] == 1)
      return true; // does not span the split dim: every rank has it whole
    if (weightOnly.count(o))
      return requireWeight(o, Shard{ad, s.blocks});
    return require(o, Shard{ad, s.blocks});
  }

  bool require(Value v, Shard s) {
    if (auto it = act.find(v); it != act.end())
      return it->second == s;
    Operation *def = v.getDefiningOp();
    if (!def || weightOnly.count(v) || def->hasTrait<OpTrait::ConstantLike>())
      return false;
    act.insert({v, s});
    if (!divisible(v, s, def))
      return false;
    int64_t rank = shapeOf(v).size();
    if (auto mm = dyn_cast<MatMulOp>(def)) {
      bool lhsW = weightOnly.count(mm.getLhs()), rhsW = weightOnly.count(mm.getRhs());
      if (rhsW && !lhsW) { // column-parallel
        if (s.dim != rank - 1 || shapeOf(mm.getRhs()).size() != 2 ||
            act.count(mm.getLhs()))
          return false;
        columns.insert(mm);
        return requireWeight(mm.getRhs(),
                             Shard{mm.getTransposeRhs() ? 0 : 1, s.blocks});
      }
      if (lhsW || rhsW || s.dim >= rank - 2 || s.blocks != 1)
        return false;
      for (Value o : {mm.getLhs(), mm.getRhs()}) {
        int64_t ad = s.dim - (rank - static_cast<int64_t>(shapeOf(o).size()));
        if (ad < 0 || shapeOf(o)[ad] != shapeOf(v)[s.dim] || !require(o, Shard{ad, 1}))
          return false;
      }
      return true;
    }
    if (isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, WhereOp>(def)) {
      for (Value o : def->getOperands())
        if (!requireBroadcastOperand(o, s, rank))
          return false;
      return true;
    }
    if (def->hasTrait<OpTrait::Elementwise>() && def->getNumOperands() == 1)
      return require(def->getOperand(0), s);
    if (auto t = dyn_cast<TransposeOp>(def))
      return require(t.getInput(), Shard{t.getPerm()[s.dim], s.blocks});
    if (auto r = dyn_cast<ReshapeOp>(def)) {
      if (s.blocks != 1)
        return false;
      ArrayRef<int64_t> in = shapeOf(r.getInput()), out = shapeOf(v);
      int64_t pre = 1;
      for (int64_t e = 0; e < s.dim; ++e)
        pre *= out[e];
      int64_t p = 1;
      for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
        if (p == pre && in[d] != 1 &&
            (in[d] % out[s.dim] == 0 || out[s.dim] % in[d] == 0))
          return require(r.getInput(), Shard{d, 1});
        p *= in[d];
      }
      return false;
    }
    if (auto sl = dyn_cast<SliceOp>(def)) {
      int64_t d = s.dim;
      if (sl.getStarts()[d] != 0 || sl.getSteps()[d] != 1 ||
          sl.getLimits()[d] < shapeOf(sl.getInput())[d])
        return false;
      return require(sl.getInput(), s);
    }
    if (auto c = dyn_cast<ConcatOp>(def)) {
      int64_t axis = c.getAxis() < 0 ? c.getAxis() + rank : c.getAxis();
      if (axis == s.dim)
        return false;
      for (Value o : c.getInputs())
        if (!require(o, s))
          return false;
      return true;
    }
    if (auto sp = dyn_cast<SplitOp>(def)) {
      int64_t axis = sp.getAxis() < 0 ? sp.getAxis() + rank : sp.getAxis();
      if (axis != s.dim)
        return require(sp.getInput(), s);
      ArrayRef<int64_t> sizes = sp.getSizes();
      if (s.blocks != 1 || !llvm::all_equal(sizes))
        return false;
      return require(sp.getInput(),
                     Shard{s.dim, static_cast<int64_t>(sizes.size())});
    }
    if (isa<SoftmaxOp, LogSoftmaxOp>(def)) {
      int64_t axis = def->getAttrOfType<IntegerAttr>("axis").getInt();
      if ((axis < 0 ? axis + rank : axis) == s.dim)
        return false;
      return require(def->getOperand(0), s);
    }
    return false;
  }

  /// Every split value is used only inside the region (or by the row
  /// matmul), and every sharded weight only by the region.
  bool closed(Operation *row) {
    llvm::DenseSet<Operation *> ops{row};
    for (auto &[v, s] : act)
      ops.insert(v.getDefiningOp());
    for (auto &[w, s] : weights)
      if (Operation *def = w.getDefiningOp())
        ops.insert(def);
    for (auto &[v, s] : act)
      for (Operation *user : v.getUsers())
        if (!ops.count(user))
          return false;
    for (auto &[w, s] : weights)
      for (Operation *user : w.getUsers())
        if (!ops.count(user))
          return false;
    return !columns.empty();
  }
};

RankedTensorType localType(Type t, Shard s, int64_t tp) {
  auto rt = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(rt.getShape());
  shape[s.dim] /= tp;
  return rt.clone(shape);
}

struct SmpTensorParallelPass
    : public smp::impl::SmpTensorParallelPassBase<SmpTensorParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("smp-tensor-parallel: no func @main to split");
      return signalPassFailure();
    }
    if (tp < 1) {
      module.emitError() << "smp-tensor-parallel: tp must be >= 1, got " << static_cast<int64_t>(tp);
      return signalPassFailure();
    }
    if (tp == 1)
      return;
    Block &body = main.getBody().front();
    llvm::DenseSet<Value> weightOnly;
    for (BlockArgument arg : body.getArguments())
      if (main.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr))
        weightOnly.insert(arg);
    for (Operation &op : body.without_terminator())
      if (op.getNumOperands() > 0 &&
          llvm::all_of(op.getOperands(), [&](Value v) {
            return weightOnly.count(v) ||
                   (v.getDefiningOp() &&
                    v.getDefiningOp()->hasTrait<OpTrait::ConstantLike>());
          }) &&
          llvm::any_of(op.getOperands(),
                       [&](Value v) { return weightOnly.count(v); }))
        for (Value r : op.getResults())
          weightOnly.insert(r);

    llvm::DenseSet<Operation *> taken;
    llvm::DenseSet<Value> takenWeights;
    SmallVector<std::pair<Region, Operation *>> regions;
    for (Operation &op : body.without_terminator()) {
      auto row = dyn_cast<MatMulOp>(op);
      if (!row || taken.count(row) || !weightOnly.count(row.getRhs()) ||
          weightOnly.count(row.getLhs()) ||
          shapeOf(row.getRhs()).size() != 2 || row.getTransposeLhs())
        continue;
      Region region{tp, weightOnly, {}, {}, {}, {}};
      int64_t k = shapeOf(row.getLhs()).size() - 1;
      if (!region.require(row.getLhs(), Shard{k, 1}) ||
          !region.requireWeight(row.getRhs(),
                                Shard{row.getTransposeRhs() ? 1 : 0, 1}) ||
          !region.closed(row))
        continue;
      // Regions do not overlap: a matmul or weight is split one way only.
      if (llvm::any_of(region.act,
                       [&](auto &e) { return taken.count(e.first.getDefiningOp()); }) ||
          llvm::any_of(region.weights,
                       [&](auto &e) { return takenWeights.count(e.first); }))
        continue;
      if (!region.indivisible.empty()) {
        row->emitError() << "cannot split the layer ending at '"
                         << nameOf(row) << "' over tp "
                         << static_cast<int64_t>(tp) << ": "
                         << region.indivisible;
        return signalPassFailure();
      }
      for (auto &[v, s] : region.act)
        taken.insert(v.getDefiningOp());
      taken.insert(row);
      for (auto &[w, s] : region.weights)
        takenWeights.insert(w);
      regions.push_back({std::move(region), row});
    }
    if (regions.empty()) {
      main.emitError() << "smp-tensor-parallel: found no layer to split over "
                          "tp "
                       << static_cast<int64_t>(tp)
                       << " (no matmul pair with a splittable path between)";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    if (!module.lookupSymbol("tp")) {
      b.setInsertionPointToStart(module.getBody());
      shard::GridOp::create(b, module.getLoc(), "tp",
                            ArrayRef<int64_t>{static_cast<int64_t>(tp)});
    }
    for (auto &[region, row] : regions)
      rewrite(main, region, row, b);
    main.setType(FunctionType::get(&getContext(), body.getArgumentTypes(),
                                   main.getFunctionType().getResults()));
  }

  void rewrite(func::FuncOp main, Region &region, Operation *row,
               OpBuilder &b) {
    MLIRContext *ctx = &getContext();
    // Fix shape attributes before the types change (once per op: a split
    // has several results).
    llvm::DenseSet<Operation *> fixed;
    for (auto &[v, s] : region.act) {
      Operation *def = v.getDefiningOp();
      if (!fixed.insert(def).second)
        continue;
      if (auto sl = dyn_cast<SliceOp>(def)) {
        SmallVector<int64_t> limits(sl.getLimits());
        limits[s.dim] /= tp;
        sl.setLimits(limits);
      } else if (auto sp = dyn_cast<SplitOp>(def)) {
        int64_t rank = shapeOf(v).size();
        int64_t axis = sp.getAxis() < 0 ? sp.getAxis() + rank : sp.getAxis();
        if (axis == s.dim) {
          SmallVector<int64_t> sizes(sp.getSizes());
          for (int64_t &n : sizes)
            n /= tp;
          sp.setSizes(sizes);
        }
      }
    }
    for (auto &[v, s] : region.act)
      v.setType(localType(v.getType(), s, tp));
    for (auto &[w, s] : region.weights) {
      w.setType(localType(w.getType(), s, tp));
      if (auto arg = dyn_cast<BlockArgument>(w))
        main.setArgAttr(arg.getArgNumber(), "smp.tp_shard",
                        DenseI64ArrayAttr::get(ctx, {s.dim, s.blocks}));
    }
    // Enter: the column matmuls' inputs, once each.
    llvm::DenseMap<Value, Value> entered;
    for (Operation *col : region.columns) {
      auto mm = cast<MatMulOp>(col);
      Value x = mm.getLhs();
      Value &copy = entered[x];
      if (!copy) {
        b.setInsertionPointAfterValue(x);
        copy = TpCopyOp::create(b, x.getLoc(), x);
      }
      mm.getLhsMutable().assign(copy);
    }
    // Exit: the row matmul's partial sums.
    b.setInsertionPointAfter(row);
    Value partial = row->getResult(0);
    auto sum = shard::AllReduceOp::create(b, row->getLoc(), partial, "tp",
                                          ArrayRef<shard::GridAxis>{0},
                                          shard::ReductionKind::Sum);
    partial.replaceAllUsesExcept(sum.getResult(), sum.getOperation());
  }
};

} // namespace
