//===- Recompute.cpp - Activation checkpointing in the built backward -----===//
//
// After autodiff, the backward reads forward values directly, which keeps
// every activation alive from the forward to the backward. Recomputation
// gives the backward its own copies: the forward ops of a segment are cloned
// right before the first backward op that reads one of the segment's
// values, and the backward reads the clones. The originals die at the end
// of the forward; only the segment's inputs (the checkpoints) stay alive.
//
//   full       segments are the stretches of the forward between cut points
//              (where the fewest values cross: the residual stream between
//              half-layers) and at pipeline stage boundaries, so a
//              transformer keeps one hidden state per half-layer and
//              recomputes the rest, each stage its own.
//   selective  segments are the attention cores: the scores' batched matmul
//              of two activations, the elementwise ops after it (scale,
//              mask) and the softmax; the checkpoints are Q and K (as in
//              Korthikanti et al. 2022, which keeps the linear layers'
//              outputs and recomputes the quadratic part).
//   gathers    segments are sequence parallelism's all_gathers over @tp
//              and the views of their results (reshape, tp_copy): the
//              backward gathers the rows again for the weight gradients
//              of the column-parallel products, so only the rows stay
//              alive (Korthikanti et al.: the all-gather is repeated in the
//              backward pass instead of keeping its output).
//
//===----------------------------------------------------------------------===//

#include "Recompute.h"
#include "TrainStepUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

using namespace mlir;

namespace smp {
namespace {

/// The backward ops, in order, and the position of each.
void listBackward(Block::iterator begin, Block::iterator end,
                  SmallVector<Operation *> &ops,
                  llvm::DenseMap<Operation *, size_t> &index) {
  for (auto it = begin; it != end; ++it)
    ops.push_back(&*it);
  for (auto [i, op] : llvm::enumerate(ops))
    index[op] = i;
}

/// The ops of `forward` computed from the step's data inputs (through any
/// op of the block before them: an unrolled micro-batch's input slices).
llvm::DenseSet<Operation *> opsFromData(ArrayRef<Operation *> forward) {
  llvm::DenseSet<Operation *> fromData;
  if (forward.empty())
    return fromData;
  auto isData = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      return f && f.getArgAttr(arg.getArgNumber(), SmpDialect::kInputAttr);
    }
    return fromData.count(v.getDefiningOp()) > 0;
  };
  for (Operation &op : *forward.front()->getBlock())
    if (llvm::any_of(op.getOperands(), isData))
      fromData.insert(&op);
  return fromData;
}

/// The forward's segments between cut points (full recomputation).
SmallVector<SmallVector<Operation *>> fullSegments(ArrayRef<Operation *> fwd) {
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(fwd))
    position[op] = i;
  size_t n = fwd.size();
  // Only activations count: values computed from the data. A value made
  // from weights and constants alone (a causal mask or the positions built
  // once and read by every layer) would cross every cut and leave the
  // fewest crossings only where it does not exist yet; segments read it as
  // they read a checkpoint. So would an activation read across most of the
  // forward (BERT's attention mask, made from the data and read by every
  // layer's attention: counted, the only cuts were after the last
  // attention and the whole encoder was one segment); it is not counted
  // either, and is a checkpoint all the same.
  llvm::DenseSet<Operation *> fromData = opsFromData(fwd);
  std::vector<int64_t> delta(n + 1, 0);
  for (auto [i, op] : llvm::enumerate(fwd))
    for (Value r : op->getResults()) {
      if (!fromData.count(op))
        continue;
      size_t last = i;
      for (Operation *user : r.getUsers())
        if (auto it = position.find(user); it != position.end())
          last = std::max(last, it->second);
      if (last > i && 2 * (last - i) <= n) {
        delta[i + 1] += 1;
        if (last + 1 <= n)
          delta[last + 1] -= 1;
      }
    }
  int64_t crossing = 0, fewest = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> at(n + 1, 0);
  for (size_t k = 1; k <= n; ++k) {
    crossing += delta[k];
    at[k] = crossing;
    if (k < n && crossing > 0) // where activations flow (not among the
      fewest = std::min(fewest, crossing); // weight casts before the data)
  }
  // A pipeline stage's segments end at its last op: a segment across a
  // cut would recompute the earlier stage's part for the later one's
  // backward, on the earlier rank, before that rank's own backward, and
  // send it again.
  auto stageOf = [](Operation *op) -> std::optional<int64_t> {
    if (auto s = op->getAttrOfType<IntegerAttr>(SmpDialect::kStageAttr))
      return s.getInt();
    return std::nullopt;
  };
  SmallVector<SmallVector<Operation *>> segments(1);
  for (size_t i = 0; i < n; ++i) {
    segments.back().push_back(fwd[i]);
    if (i + 1 == n)
      break;
    std::optional<int64_t> here = stageOf(fwd[i]), next = stageOf(fwd[i + 1]);
    if (at[i + 1] == fewest || (here && next && *here != *next))
      segments.emplace_back();
  }
  return segments;
}

/// The attention cores (selective recomputation).
SmallVector<SmallVector<Operation *>>
attentionCores(ArrayRef<Operation *> fwd) {
  llvm::DenseSet<Operation *> inForward(fwd.begin(), fwd.end());
  SmallVector<SmallVector<Operation *>> cores;
  for (Operation *op : fwd) {
    if (!isa<SoftmaxOp>(op))
      continue;
    SmallVector<Operation *> chain{op};
    Operation *cur = op;
    bool found = false;
    while (true) {
      // Follow the largest operand computed in the forward (the scores,
      // not a broadcast mask or scale).
      Operation *next = nullptr;
      int64_t largest = -1;
      for (Value v : cur->getOperands()) {
        Operation *d = v.getDefiningOp();
        if (!d || !inForward.count(d) || d->hasTrait<OpTrait::ConstantLike>())
          continue;
        int64_t n = cast<RankedTensorType>(v.getType()).getNumElements();
        if (n > largest) {
          largest = n;
          next = d;
        }
      }
      if (!next)
        break;
      if (auto mm = dyn_cast<MatMulOp>(next)) {
        Operation *l = mm.getLhs().getDefiningOp(), *r = mm.getRhs().getDefiningOp();
        if (l && r && inForward.count(l) && inForward.count(r)) {
          chain.push_back(next);
          found = true;
        }
        break;
      }
      if (!next->hasTrait<OpTrait::Elementwise>() &&
          !next->hasTrait<OpTrait::smp::BroadcastingElementwise>())
        break;
      chain.push_back(next);
      cur = next;
    }
    if (found)
      cores.push_back(SmallVector<Operation *>(chain.rbegin(), chain.rend()));
  }
  return cores;
}

/// Each all_gather over @tp and the views of its result (gathers).
SmallVector<SmallVector<Operation *>> rowGathers(ArrayRef<Operation *> fwd) {
  llvm::DenseSet<Operation *> inForward(fwd.begin(), fwd.end());
  SmallVector<SmallVector<Operation *>> segments;
  for (Operation *op : fwd) {
    auto gather = dyn_cast<shard::AllGatherOp>(op);
    if (!gather || gather.getGrid() != "tp")
      continue;
    llvm::SetVector<Operation *> chain;
    chain.insert(op);
    for (size_t k = 0; k < chain.size(); ++k)
      for (Operation *user : chain[k]->getResult(0).getUsers())
        if (inForward.count(user) && isa<ReshapeOp, TpCopyOp>(user))
          chain.insert(user);
    SmallVector<Operation *> segment(chain.begin(), chain.end());
    llvm::sort(segment, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    segments.push_back(std::move(segment));
  }
  return segments;
}

/// Whether `op` runs in pipeline stage `stage` (always, when the step has
/// no stages).
bool inStage(Operation *op, std::optional<int64_t> stage) {
  auto a = op->getAttrOfType<IntegerAttr>(SmpDialect::kStageAttr);
  return !stage || !a || a.getInt() == *stage;
}

/// The backward (ops in `bwdIndex`) of `value`'s pipeline stage reads `back`
/// where it read `value`, and where it read a forward view of `value`, the
/// same view of `back` (made right after it). Another stage's backward keeps
/// reading `value`: the rank that runs it received its own copy in the
/// forward, and the prefetch runs in this stage's backward, after that one.
void replaceBackwardReads(Value value, Value back,
                          const llvm::DenseMap<Operation *, size_t> &bwdIndex) {
  std::optional<int64_t> stage = stageOf(value);
  auto ownBackward = [&](OpOperand &use) {
    return bwdIndex.count(use.getOwner()) != 0 &&
           inStage(use.getOwner(), stage);
  };
  OpBuilder b(back.getContext());
  b.setInsertionPointAfterValue(back);
  SmallVector<Value> views;
  for (Operation *user : value.getUsers())
    if (isa<ReshapeOp>(user) && !bwdIndex.count(user))
      views.push_back(user->getResult(0));
  for (size_t k = 0; k < views.size(); ++k) {
    Value view = views[k];
    for (Operation *user : view.getUsers())
      if (isa<ReshapeOp>(user) && !bwdIndex.count(user))
        views.push_back(user->getResult(0));
    if (llvm::none_of(view.getUses(), ownBackward))
      continue;
    Value again = ReshapeOp::create(b, view.getLoc(), view.getType(), back);
    view.replaceUsesWithIf(again, ownBackward);
  }
  value.replaceUsesWithIf(back, ownBackward);
}

} // namespace

size_t recomputeActivations(ArrayRef<Operation *> forward, Block::iterator
                                                               backwardBegin,
                            Block::iterator backwardEnd, StringRef mode) {
  SmallVector<SmallVector<Operation *>> segments =
      mode == "full"      ? fullSegments(forward)
      : mode == "gathers" ? rowGathers(forward)
                          : attentionCores(forward);
  // Backward ops, in order, and their positions.
  SmallVector<Operation *> backward;
  llvm::DenseMap<Operation *, size_t> bwdIndex;
  listBackward(backwardBegin, backwardEnd, backward, bwdIndex);
  size_t cloned = 0;
  for (auto &segment : segments) {
    llvm::DenseSet<Operation *> members(segment.begin(), segment.end());
    // Full: values defined in the segment that later forward segments read
    // are checkpoints, which the backward keeps reading (they are the next
    // segment's recomputation's inputs). Selective: the core's values are
    // all recomputed, also the probabilities the forward goes on to use.
    llvm::DenseSet<Value> checkpoint;
    for (Operation *op : mode == "full" ? segment : ArrayRef<Operation *>())
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers())
          if (!members.count(user) && !bwdIndex.count(user))
            checkpoint.insert(r);
    // The first backward op that reads a recomputable value.
    size_t first = backward.size();
    for (Operation *op : segment)
      for (Value r : op->getResults())
        if (!checkpoint.count(r))
          for (Operation *user : r.getUsers())
            if (auto it = bwdIndex.find(user); it != bwdIndex.end())
              first = std::min(first, it->second);
    if (first == backward.size())
      continue;
    OpBuilder b(backward[first]);
    IRMapping map;
    for (Operation *op : segment) {
      Operation *copy = b.clone(*op, map);
      // Marked, so that CSE does not merge the copy back into the original.
      copy->setAttr("smp.recomputed", b.getUnitAttr());
      for (auto [orig, mine] : llvm::zip(op->getResults(), copy->getResults()))
        if (!checkpoint.count(orig))
          map.map(orig, mine);
        else
          map.map(orig, orig);
      ++cloned;
    }
    for (Operation *op : segment)
      for (Value r : op->getResults()) {
        if (checkpoint.count(r))
          continue;
        Value mine = map.lookup(r);
        r.replaceUsesWithIf(mine, [&](OpOperand &use) {
          return bwdIndex.count(use.getOwner()) != 0;
        });
      }
  }
  return cloned;
}

} // namespace smp


namespace smp {

size_t offloadActivations(ArrayRef<Operation *> forward,
                          Block::iterator backwardBegin,
                          Block::iterator backwardEnd, int64_t horizon,
                          int64_t minBytes) {
  SmallVector<Operation *> backward;
  llvm::DenseMap<Operation *, size_t> bwdIndex;
  listBackward(backwardBegin, backwardEnd, backward, bwdIndex);
  llvm::DenseSet<Operation *> inForward(forward.begin(), forward.end());
  // The saved values, by their first backward read.
  struct Saved {
    Value value;
    Operation *lastForwardUse;
    size_t firstBackwardUse;
  };
  SmallVector<Saved> saved;
  // Only activations: a value made from the weights alone (a transposed
  // weight) is the weights' business, and offloading it would keep alive
  // what canonicalization folds away.
  llvm::DenseSet<Operation *> fromData = opsFromData(forward);
  for (Operation *op : forward) {
    // A reshape's result is its input's buffer: the input is offloaded
    // where the backward reads it (through its views, which the backward
    // makes again of the prefetched copy). tp_copy, the other view, is
    // kept: it is the value the column-parallel matmuls' backward reads
    // (its input is not), so offloading it is what frees that activation.
    if (op->hasTrait<OpTrait::ConstantLike>() || isa<ReshapeOp>(op) ||
        !fromData.count(op))
      continue;
    for (Value r : op->getResults()) {
      auto t = dyn_cast<RankedTensorType>(r.getType());
      if (!t || !t.hasStaticShape() ||
          t.getNumElements() * std::max(1u, t.getElementTypeBitWidth() / 8) <
              static_cast<uint64_t>(minBytes))
        continue;
      Operation *last = op;
      size_t first = backward.size();
      std::optional<int64_t> stage = stageOf(r);
      SmallVector<Value> reads{r}; // r and its forward views
      for (size_t k = 0; k < reads.size(); ++k)
        for (Operation *user : reads[k].getUsers()) {
          if (auto it = bwdIndex.find(user); it != bwdIndex.end()) {
            // Only its own stage's backward reads the prefetched copy
            // (replaceBackwardReads).
            if (inStage(user, stage))
              first = std::min(first, it->second);
            continue;
          }
          if (!inForward.count(user))
            continue;
          if (last->isBeforeInBlock(user))
            last = user;
          if (isa<ReshapeOp>(user))
            reads.push_back(user->getResult(0));
        }
      if (first < backward.size())
        saved.push_back({r, last, first});
    }
  }
  llvm::stable_sort(saved, [](const Saved &a, const Saved &b) {
    return a.firstBackwardUse < b.firstBackwardUse;
  });
  // The first `horizon` the backward reads would be fetched back as it
  // starts, right after the forward: copied out and in for nothing (GPT-2's
  // logits, read by the loss and at once by its gradient: 3.3 GB each way,
  // and the loss's fusions no longer saw them). They stay.
  size_t kept = std::min(saved.size(),
                         static_cast<size_t>(std::max<int64_t>(horizon, 0)));
  for (auto [k, s] : llvm::enumerate(saved)) {
    if (k < kept)
      continue;
    OpBuilder b(s.lastForwardUse->getContext());
    b.setInsertionPointAfter(s.lastForwardUse);
    auto offload = OffloadOp::create(b, s.value.getLoc(), s.value);
    Value host = offload;
    // The copy belongs to the forward of the value's stage and micro-batch.
    if (Operation *def = s.value.getDefiningOp())
      for (llvm::StringRef name : {"smp.stage", "smp.mb"})
        if (Attribute a = def->getAttr(name))
          offload->setAttr(name, a);
    size_t anchor = saved[k - horizon].firstBackwardUse;
    anchor = std::min(anchor, s.firstBackwardUse);
    b.setInsertionPoint(backward[anchor]);
    Value back = PrefetchOp::create(b, s.value.getLoc(), host);
    replaceBackwardReads(s.value, back, bwdIndex);
  }
  return saved.size() - kept;
}

} // namespace smp
