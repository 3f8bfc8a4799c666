//===- ShardParameters.cpp - smp-shard-parameters (ZeRO-3) ----------------===//
//
// Implements `smp-shard-parameters`: each trained parameter of @train_step is
// stored as this data-parallel rank's chunk and all-gathered where it is
// used (see Passes.td and TrainStepContract.h).
//
// A parameter's uses are grouped by where they run: the forward or the
// backward (smp.bwd) of one micro-batch (smp.mb) on one pipeline stage
// (smp.stage). Each group gathers its own whole copy right before its first
// use, so the copy lives only as long as the group (a copy kept from the
// forward to the backward would cost what ZeRO-3 saves). Ops computed from
// the parameter alone (the weight-only ops the importer and the
// mixed-precision pass make: transposes, reshapes, casts) would carry a
// whole copy from one group to the next in their results; they are redone
// per group on the group's copy instead. A cast to a narrower float commutes
// with the gather (the padding casts to zero), so it is applied to the
// chunk and the gather moves the low type. A constant a redone op reads is
// copied where the gather runs before it.
//
//===----------------------------------------------------------------------===//

#include "TrainStepContract.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/IRMapping.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/PathOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <tuple>

#define DEBUG_TYPE "smp-shard-parameters"

namespace smp {
#define GEN_PASS_DEF_SMPSHARDPARAMETERSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// Where an op runs: (micro-batch, stage, backward), -1 where unmarked.
using Placement = std::tuple<int64_t, int64_t, bool>;

Placement placementOf(Operation *op) {
  auto get = [&](StringRef name) {
    auto a = op->getAttrOfType<IntegerAttr>(name);
    return a ? a.getInt() : int64_t(-1);
  };
  return {get(SmpDialect::kMicrobatchAttr), get(SmpDialect::kStageAttr),
          op->hasAttr(SmpDialect::kBackwardAttr)};
}

struct ShardParameters {
  ShardParameters(func::FuncOp f, int64_t dp, int64_t prefetch)
      : f(f), body(f.getBody().front()), dp(dp), prefetch(prefetch) {}

  func::FuncOp f;
  Block &body;
  int64_t dp, prefetch;

  /// One whole copy of a parameter: the uses (outside the parameter's
  /// weight-only ops) that run at one placement.
  struct Group {
    BlockArgument param;
    SmallVector<OpOperand *> uses;
    Operation *first = nullptr; // the earliest user
  };

  /// The uses of `param` and of its weight-only ops by other ops, grouped
  /// by placement.
  SmallVector<Group> groupsOf(BlockArgument param,
                              const llvm::SetVector<Operation *> &views) {
    std::map<Placement, Group> byPlacement;
    auto addUses = [&](Value v) {
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (views.contains(user))
          continue;
        Group &g = byPlacement[placementOf(user)];
        g.param = param;
        g.uses.push_back(&use);
        if (!g.first || user->isBeforeInBlock(g.first))
          g.first = user;
      }
    };
    addUses(param);
    for (Operation *op : views)
      addUses(op->getResult(0));
    SmallVector<Group> groups;
    for (auto &[placement, g] : byPlacement)
      groups.push_back(std::move(g));
    return groups;
  }

  /// The whole type of each sharded parameter (its argument is the chunk).
  llvm::DenseMap<Value, RankedTensorType> wholeType;

  /// `v` (a parameter or one of its weight-only ops' results) made at the
  /// builder's point from the parameter's chunk: the parameter gathered,
  /// the ops redone on the copy, a narrowing cast of the parameter applied
  /// to the chunk before the gather.
  Value rebuild(OpBuilder &b, Value v, llvm::DenseMap<Value, Value> &made) {
    if (Value m = made.lookup(v))
      return m;
    Location loc = f.getLoc();
    if (auto it = wholeType.find(v); it != wholeType.end())
      return made[v] = unshard(b, loc, v, it->second, dp);
    Operation *op = v.getDefiningOp();
    Value from = op->getOperand(0);
    if (isNarrowingCast(op) && wholeType.count(from)) {
      auto whole = cast<RankedTensorType>(v.getType());
      auto ct = cast<RankedTensorType>(from.getType());
      Value low =
          CastOp::create(b, loc, ct.clone(whole.getElementType()), from);
      return made[v] = unshard(b, loc, low, whole, dp);
    }
    IRMapping map;
    for (Value operand : op->getOperands()) {
      // A constant the op reads is kept, or copied where the gather runs
      // before it (a weight-only op of the backward, BiT's standardised
      // weight's: its constants come with the backward, after the point a
      // prefetched gather runs at).
      auto c = operand.getDefiningOp<ConstantOp>();
      if (c && b.getInsertionPoint() != body.end() &&
          c->isBeforeInBlock(&*b.getInsertionPoint()))
        continue;
      Value m = made.lookup(operand);
      if (!m)
        m = made[operand] =
            c ? b.clone(*c)->getResult(0) : rebuild(b, operand, made);
      map.map(operand, m);
    }
    return made[v] = b.clone(*op, map)->getResult(0);
  }

  /// Gathers `g`'s copy (number `copy`) at the builder's point, with the
  /// placement of its first use, and points its uses at it. The gathers are
  /// numbered (`smp.copy`): a step that is not unrolled drops its backward
  /// marks at the end, and CSE would otherwise merge the backward's gather
  /// into the forward's, keeping one copy alive from one to the other.
  void gather(OpBuilder &b, const Group &g, int64_t copy) {
    Operation *mark = lastBefore(b);
    llvm::DenseMap<Value, Value> made;
    for (OpOperand *use : g.uses)
      use->set(rebuild(b, use->get(), made));
    markLike(b, mark, g.first);
    Operation *first = mark ? mark->getNextNode() : &body.front();
    for (Operation *op = first; op && op != &*b.getInsertionPoint();
         op = op->getNextNode())
      if (isa<shard::AllGatherOp>(op))
        op->setAttr("smp.copy", b.getI64IntegerAttr(copy));
  }

  void run() {
    llvm::SetVector<Value> params;
    for (const Gradient &g : gradients(f))
      params.insert(g.param);
    // Each parameter's weight-only ops, in block order.
    llvm::DenseMap<Value, llvm::SetVector<Operation *>> views;
    for (auto [op, p] : singleWeightOps(body, params.getArrayRef()))
      views[p].insert(op);
    SmallVector<Group> groups;
    for (Value p : params)
      for (Group &g : groupsOf(cast<BlockArgument>(p), views[p]))
        groups.push_back(std::move(g));
    // The chunks replace the parameters.
    for (Value v : params) {
      auto p = cast<BlockArgument>(v);
      auto t = cast<RankedTensorType>(p.getType());
      wholeType[p] = t;
      int64_t n = t.getNumElements();
      p.setType(t.clone(ArrayRef<int64_t>{(n + dp - 1) / dp}));
      setArgLayout(f, p.getArgNumber(),
                   LayoutAttr::chunkOf(getArgLayout(f, p.getArgNumber()),
                                       f.getContext(), t.getShape()));
    }
    // In the order of their first uses, gather k runs right before the
    // first use of gather k - prefetch.
    llvm::stable_sort(groups, [](const Group &x, const Group &y) {
      return x.first != y.first && x.first->isBeforeInBlock(y.first);
    });
    SmallVector<Operation *> firsts;
    for (const Group &g : groups)
      firsts.push_back(g.first);
    for (auto [k, g] : llvm::enumerate(groups)) {
      OpBuilder b(firsts[k >= static_cast<size_t>(prefetch) ? k - prefetch
                                                             : 0]);
      gather(b, g, static_cast<int64_t>(k));
    }
    for (auto &[p, ops] : views)
      for (Operation *op : llvm::reverse(ops))
        if (op->use_empty())
          op->erase();
    f.setType(FunctionType::get(f.getContext(), body.getArgumentTypes(),
                                f.getResultTypes()));
  }
};

struct SmpShardParametersPass
    : public smp::impl::SmpShardParametersPassBase<SmpShardParametersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = trainStep(module, "smp-shard-parameters");
    if (failed(f))
      return signalPassFailure();
    auto dp = shardedDataParallelRanks(module, "smp-shard-parameters");
    if (failed(dp))
      return signalPassFailure();
    if (prefetch < 0) {
      module.emitError() << "smp-shard-parameters: prefetch must be >= 0, got "
                         << prefetch;
      return signalPassFailure();
    }
    ShardParameters(*f, *dp, prefetch).run();
  }
};

} // namespace
