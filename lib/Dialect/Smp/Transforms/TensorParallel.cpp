//===- TensorParallel.cpp - Megatron-style tensor parallelism -------------===//
//
// Implements `smp-tensor-parallel`. See Passes.td for the contract.
//
// A sharding says which dimension of a value each rank holds 1/tp of: Shard
// {dim, blocks} splits dim, viewed as [blocks, n], along n (blocks > 1 for
// the fused QKV projection that an equal split cuts into Q, K and V). Region
// discovery starts at a candidate row-parallel matmul (activation x weight)
// and requires its input split along the contraction dim, then walks the
// producers backwards, deriving each operand's sharding from its result's
// with the op's sharding rule (TensorParallelOpInterface, in the op models),
// until it reaches column-parallel matmuls of unsplit inputs. An operand a
// rule reads whole that takes a gradient enters through smp.tp_copy as
// those inputs do (each rank's share of its gradient is partial). Any op it
// cannot see through ends the attempt (the matmul stays replicated); a
// region that is sound but whose sizes tp does not divide is an error.
//
//===----------------------------------------------------------------------===//

#include "TrainStepUtils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "smp/Dialect/Smp/IR/SmpLayout.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "smp/Interfaces/TensorParallelInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace smp {
#define GEN_PASS_DEF_SMPTENSORPARALLELPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

using Shard = TpShard;
using Layout = TpOperandLayout;

std::string nameOf(Operation *op) {
  if (auto loc = dyn_cast<NameLoc>(op->getLoc()))
    return loc.getName().str();
  return op->getName().getStringRef().str();
}

/// One candidate region: the values it splits and the weights it shards.
/// The op-specific knowledge (how an op's operands must be split for each
/// rank to compute its share of the result) is the ops'
/// TensorParallelOpInterface rules (lib/Dialect/Smp/OpModels).
struct Region {
  int64_t tp;
  const llvm::DenseSet<Value> &weightOnly; // computed from parameters only
  /// Values a gradient flows into (computed from trained parameters).
  const llvm::DenseSet<Value> &differentiable;
  llvm::MapVector<Value, Shard> act;
  llvm::MapVector<Value, Shard> weights;
  llvm::SetVector<OpOperand *> entries; // read whole: a tp_copy enters
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
                    "which tp " +
                    std::to_string(tp) +
                    " does not divide (give a --tp that divides it)";
    }
    return true;
  }

  /// The operand layouts `def`'s rule asks for with result `v` split `s`
  /// (none when it has no rule or cannot be split so).
  std::optional<SmallVector<Layout>> layoutsOf(Operation *def, Value v,
                                               Shard s) {
    auto rule = dyn_cast<TensorParallelOpInterface>(def);
    SmallVector<Layout> layouts;
    auto isWeight = [&](Value x) { return weightOnly.count(x) > 0; };
    if (!rule || failed(rule.getTpOperandLayouts(cast<OpResult>(v), s, tp,
                                                 isWeight, layouts)))
      return std::nullopt;
    return layouts;
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
    auto rule = dyn_cast<TensorParallelOpInterface>(def);
    if (!rule || !rule.splitsTpWeightChains())
      return false;
    std::optional<SmallVector<Layout>> layouts = layoutsOf(def, w, s);
    if (!layouts)
      return false;
    for (auto [operand, layout] : llvm::zip(def->getOpOperands(), *layouts)) {
      if (layout.kind == Layout::Kind::Enter)
        return false;
      if (layout.kind == Layout::Kind::Whole) {
        if (!enterWhole(operand))
          return false;
      } else if (!requireWeight(operand.get(), layout.shard)) {
        return false;
      }
    }
    return true;
  }

  /// An operand every rank reads whole while the op's result is split: each
  /// rank's share of its gradient is partial (over this rank's part of the
  /// split dimension), so one that takes a gradient enters through a
  /// tp_copy (whose gradient sums the ranks'); a constant, an input or a
  /// frozen buffer is read as it is.
  bool enterWhole(OpOperand &operand) {
    if (!differentiable.count(operand.get()))
      return true;
    if (act.count(operand.get()))
      return false;
    entries.insert(&operand);
    return true;
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
    std::optional<SmallVector<Layout>> layouts = layoutsOf(def, v, s);
    if (!layouts)
      return false;
    for (auto [operand, layout] :
         llvm::zip(def->getOpOperands(), *layouts)) {
      switch (layout.kind) {
      case Layout::Kind::Whole:
        if (!enterWhole(operand))
          return false;
        break;
      case Layout::Kind::Split:
        if (!require(operand.get(), layout.shard))
          return false;
        break;
      case Layout::Kind::SplitWeight:
        if (!requireWeight(operand.get(), layout.shard))
          return false;
        break;
      case Layout::Kind::Enter:
        if (act.count(operand.get()))
          return false;
        entries.insert(&operand);
        break;
      }
    }
    return true;
  }

  /// A row-parallel candidate: `row` reads an activation and a weight
  /// (rank 2), which this region then requires split along the contraction.
  bool requireRow(MatMulOp row) {
    if (!weightOnly.count(row.getRhs()) || weightOnly.count(row.getLhs()) ||
        shapeOf(row.getRhs()).size() != 2 || row.getTransposeLhs())
      return false;
    int64_t k = shapeOf(row.getLhs()).size() - 1;
    return require(row.getLhs(), Shard{k, 1}) &&
           requireWeight(row.getRhs(), Shard{row.getTransposeRhs() ? 1 : 0, 1});
  }

  /// Every split value is used only inside the region (or by its row
  /// matmuls), and every sharded weight only by the region.
  bool closed(ArrayRef<Operation *> rows) {
    llvm::DenseSet<Operation *> ops(rows.begin(), rows.end());
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
    return !entries.empty();
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
    auto main =
        lookupFuncOrError(module, "main", "smp-tensor-parallel", "to split");
    if (!main || !checkAtLeastOne(module, "smp-tensor-parallel", "tp", tp))
      return signalPassFailure();
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

    // Values a gradient reaches: computed from a trained parameter.
    llvm::DenseSet<Value> differentiable;
    for (BlockArgument arg : body.getArguments())
      if (main.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr) &&
          !main.getArgAttr(arg.getArgNumber(), SmpDialect::kFrozenAttr))
        differentiable.insert(arg);
    for (Operation &op : body.without_terminator())
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return differentiable.count(v); }))
        for (Value r : op.getResults())
          if (isa<FloatType>(getElementTypeOrSelf(r.getType())))
            differentiable.insert(r);

    llvm::DenseSet<Operation *> taken;
    llvm::DenseSet<Value> takenWeights;
    SmallVector<std::pair<Region, SmallVector<Operation *>>> regions;
    for (Operation &op : body.without_terminator()) {
      auto row = dyn_cast<MatMulOp>(op);
      if (!row || taken.count(row))
        continue;
      Region region{tp, weightOnly, differentiable, {}, {}, {}, {}};
      SmallVector<Operation *> rows{row};
      if (!region.requireRow(row))
        continue;
      if (!region.closed(rows) && !joinSharedRows(region, row, taken, rows))
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
      taken.insert(rows.begin(), rows.end());
      for (auto &[w, s] : region.weights)
        takenWeights.insert(w);
      regions.push_back({std::move(region), std::move(rows)});
    }
    SmallVector<VocabTable> tables = findVocabTables(main, weightOnly, takenWeights);
    if (regions.empty() && tables.empty()) {
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
    for (auto &[region, rows] : regions)
      rewrite(main, region, rows, b);
    for (VocabTable &table : tables)
      rewriteVocab(main, table, b);
    main.setType(FunctionType::get(&getContext(), body.getArgumentTypes(),
                                   main.getFunctionType().getResults()));
  }

  /// An embedding table / LM head weight split by vocabulary rows.
  struct VocabTable {
    BlockArgument param;
    int64_t dim;                      // the vocabulary dim of the parameter
    SmallVector<GatherOp> gathers;    // embedding lookups (axis 0, dim 0)
    MatMulOp lmHead;                  // the LM head producing the output
    SmallVector<TransposeOp> chain;   // param -> ... -> the LM head's rhs
    unsigned output = 0;              // the LM head's result index
  };

  /// The tables to split: parameters read only by embedding gathers of
  /// input-derived ids and, with vocab-parallel=NAME, by the LM head that
  /// computes output NAME (through weight transposes).
  SmallVector<VocabTable> findVocabTables(func::FuncOp main,
                                          const llvm::DenseSet<Value> &weightOnly,
                                          const llvm::DenseSet<Value> &taken) {
    Block &body = main.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::MapVector<Value, VocabTable> byParam;
    auto isParam = [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      return arg && main.getArgAttr(arg.getArgNumber(), SmpDialect::kParamAttr);
    };
    // The LM head.
    if (!vocabParallel.empty())
      for (unsigned i = 0; i < main.getNumResults(); ++i) {
        auto name = main.getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr);
        if (!name || name.getValue() != vocabParallel)
          continue;
        auto mm = ret.getOperand(i).getDefiningOp<MatMulOp>();
        if (!mm || !ret.getOperand(i).hasOneUse() || !weightOnly.count(mm.getRhs()) ||
            weightOnly.count(mm.getLhs()) || shapeOf(mm.getRhs()).size() != 2 ||
            mm.getTransposeLhs())
          break;
        int64_t dim = mm.getTransposeRhs() ? 0 : 1;
        Value w = mm.getRhs();
        SmallVector<TransposeOp> chain;
        while (auto t = w.getDefiningOp<TransposeOp>()) {
          if (!w.hasOneUse())
            break;
          chain.insert(chain.begin(), t);
          dim = t.getPerm()[dim];
          w = t.getInput();
        }
        if (!isParam(w))
          break;
        VocabTable &t = byParam[w];
        t.param = cast<BlockArgument>(w);
        t.dim = dim;
        t.lmHead = mm;
        t.chain = chain;
        t.output = i;
      }
    // Embedding lookups of input-derived ids. A table with a padding_idx
    // lookup stays whole (its gradient mask compares global ids).
    llvm::SmallPtrSet<void *, 4> keepWhole;
    for (Operation &op : body.without_terminator()) {
      auto g = dyn_cast<GatherOp>(op);
      if (!g || g.getAxis() != 0 || !isParam(g.getData()) ||
          weightOnly.count(g.getIndices()))
        continue;
      Operation *def = g.getIndices().getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>())
        continue;
      VocabTable &t = byParam[g.getData()];
      if (t.lmHead && t.dim != 0) {
        t.param = BlockArgument(); // disagreeing uses: leave it whole
        continue;
      }
      t.param = cast<BlockArgument>(g.getData());
      t.dim = 0;
      t.gathers.push_back(g);
      if (g.getPaddingIdx())
        keepWhole.insert(g.getData().getAsOpaquePointer());
    }
    for (auto &[param, t] : byParam)
      if (keepWhole.count(param.getAsOpaquePointer()))
        t.param = BlockArgument();
    SmallVector<VocabTable> tables;
    for (auto &[param, t] : byParam) {
      if (!t.param || taken.count(param))
        continue;
      // Every use is one of the table's gathers or its LM head chain.
      bool closed = llvm::all_of(param.getUsers(), [&](Operation *user) {
        return llvm::is_contained(t.gathers, user) ||
               (!t.chain.empty() && user == t.chain.front()) ||
               (t.chain.empty() && user == t.lmHead.getOperation());
      });
      // Worth splitting: the LM head, or a table with more rows than ranks.
      if (closed && (t.lmHead || shapeOf(param)[t.dim] >= tp))
        tables.push_back(t);
    }
    return tables;
  }

  void rewriteVocab(func::FuncOp main, VocabTable &t, OpBuilder &b) {
    MLIRContext *ctx = &getContext();
    int64_t vocab = shapeOf(t.param)[t.dim];
    int64_t rows = (vocab + tp - 1) / tp; // per rank, the last zero-padded
    auto local = [&](Value v, int64_t dim) {
      auto type = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[dim] = rows;
      v.setType(type.clone(shape));
    };
    // The full vocabulary is recorded where tp does not divide it.
    int64_t full = vocab % tp != 0 ? vocab : 0;
    local(t.param, t.dim);
    setArgLayout(main, t.param.getArgNumber(),
                 LayoutAttr::split(ctx, t.dim, 1, full));
    if (t.lmHead) {
      int64_t dim = t.dim;
      for (TransposeOp tr : t.chain) {
        ArrayRef<int64_t> perm = tr.getPerm();
        dim = std::find(perm.begin(), perm.end(), dim) - perm.begin();
        local(tr.getResult(), dim);
      }
      b.setInsertionPoint(t.lmHead);
      Value x = t.lmHead.getLhs();
      t.lmHead.getLhsMutable().assign(TpCopyOp::create(b, x.getLoc(), x));
      Value out = t.lmHead.getResult();
      local(out, shapeOf(out).size() - 1);
      SmallVector<Type> results(main.getFunctionType().getResults());
      results[t.output] = out.getType();
      main.setType(FunctionType::get(ctx, main.getFunctionType().getInputs(),
                                     results));
      setResultLayout(main, t.output,
                      LayoutAttr::split(ctx, shapeOf(out).size() - 1, 1, full));
    }
    for (GatherOp g : t.gathers) {
      // Look up the ids in this rank's rows, zero the others, sum the ranks.
      Location loc = g.getLoc();
      b.setInsertionPoint(g);
      Value ids = g.getIndices();
      auto idType = cast<RankedTensorType>(ids.getType());
      Type idElt = idType.getElementType();
      auto scalar = [&](Type elt, int64_t v) -> Value {
        auto type = RankedTensorType::get({}, elt);
        return ConstantOp::create(
            b, loc, DenseElementsAttr::get(type, APInt(elt.getIntOrFloatBitWidth(), v, true)));
      };
      Value rank = TpRankOp::create(b, loc, RankedTensorType::get({}, b.getI64Type()));
      if (!idElt.isInteger(64))
        rank = CastOp::create(b, loc, RankedTensorType::get({}, idElt), rank);
      Value start = MulOp::create(b, loc, rank, scalar(idElt, rows));
      Value shifted = SubOp::create(b, loc, ids, start);
      Value valid = AndOp::create(
          b, loc, NotOp::create(b, loc, LessOp::create(b, loc, shifted, scalar(idElt, 0))),
          LessOp::create(b, loc, shifted, scalar(idElt, rows)));
      Value safe = WhereOp::create(b, loc, valid, shifted, scalar(idElt, 0));
      g.getIndicesMutable().assign(safe);
      b.setInsertionPointAfter(g);
      SmallVector<int64_t> bshape(idType.getShape());
      bshape.push_back(1);
      Value validB = ReshapeOp::create(
          b, loc, RankedTensorType::get(bshape, b.getI1Type()), valid);
      auto outType = cast<RankedTensorType>(g.getType());
      Value zero = ConstantOp::create(
          b, loc, DenseElementsAttr::get(RankedTensorType::get({}, outType.getElementType()),
                                         APFloat::getZero(cast<FloatType>(outType.getElementType())
                                                              .getFloatSemantics())));
      Value masked = WhereOp::create(b, loc, validB, g.getResult(), zero);
      auto sum = shard::AllReduceOp::create(b, loc, masked, "tp",
                                            ArrayRef<shard::GridAxis>{0},
                                            shard::ReductionKind::Sum);
      g.getResult().replaceAllUsesExcept(sum.getResult(), masked.getDefiningOp());
    }
  }

  /// A region whose weights other products read too: a layer applied at
  /// several depths (ALBERT's one layer, every layer's matmuls reading its
  /// weights). The other row matmuls of its row weight join it, each with
  /// its own path split alike; the union must be closed.
  bool joinSharedRows(Region &region, MatMulOp row,
                      const llvm::DenseSet<Operation *> &taken,
                      SmallVectorImpl<Operation *> &rows) {
    // (requireRow asks for the weight's shard again: a product reading it
    // the other way round is refused there.)
    for (Operation *user : row.getRhs().getUsers()) {
      auto other = dyn_cast<MatMulOp>(user);
      if (!other || llvm::is_contained(rows, user))
        continue;
      if (taken.count(other) || !region.requireRow(other))
        return false;
      rows.push_back(other);
    }
    return rows.size() > 1 && region.closed(rows);
  }

  void rewrite(func::FuncOp main, Region &region, ArrayRef<Operation *> rows,
               OpBuilder &b) {
    MLIRContext *ctx = &getContext();
    // Fix shape attributes before the types change (once per op: a split
    // has several results).
    llvm::DenseSet<Operation *> fixed;
    for (auto &[v, s] : region.act) {
      Operation *def = v.getDefiningOp();
      if (fixed.insert(def).second)
        cast<TensorParallelOpInterface>(def).shrinkForTp(cast<OpResult>(v), s,
                                                         tp);
    }
    for (auto &[v, s] : region.act)
      v.setType(localType(v.getType(), s, tp));
    for (auto &[w, s] : region.weights) {
      w.setType(localType(w.getType(), s, tp));
      if (auto arg = dyn_cast<BlockArgument>(w))
        setArgLayout(main, arg.getArgNumber(),
                     LayoutAttr::split(ctx, s.dim, s.blocks));
    }
    // Enter: the column matmuls' inputs, once each.
    llvm::DenseMap<Value, Value> entered;
    for (OpOperand *entry : region.entries) {
      Value x = entry->get();
      Value &copy = entered[x];
      if (!copy) {
        b.setInsertionPointAfterValue(x);
        copy = TpCopyOp::create(b, x.getLoc(), x);
      }
      entry->set(copy);
    }
    for (Operation *op : fixed)
      cast<TensorParallelOpInterface>(op).finishTp(tp);
    // Exit: the row matmuls' partial sums.
    for (Operation *row : rows) {
      b.setInsertionPointAfter(row);
      Value partial = row->getResult(0);
      auto sum = shard::AllReduceOp::create(b, row->getLoc(), partial, "tp",
                                            ArrayRef<shard::GridAxis>{0},
                                            shard::ReductionKind::Sum);
      partial.replaceAllUsesExcept(sum.getResult(), sum.getOperation());
    }
  }
};

} // namespace
