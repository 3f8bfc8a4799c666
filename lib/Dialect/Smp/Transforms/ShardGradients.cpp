//===- ShardGradients.cpp - smp-shard-gradients (ZeRO-2) -------------------===//
//
// Implements `smp-shard-gradients`: each gradient of @train_step becomes this
// data-parallel rank's summed chunk, reduce-scattered in buckets as the
// backward produces it, so that no rank keeps a whole gradient past its
// bucket (see TrainStepContract.h and Passes.td).
//
// A gradient is an accumulation tree: the sum over micro-batches (an
// unrolled step adds each micro-batch's gradient to the running sum) and,
// for a parameter with copies on several pipeline stages, over the copies.
// A reduce-scatter of a flattened, padded tensor is linear, so the chunk of
// a sum is the sum of the chunks: the leaves (one micro-batch's gradient on
// one stage) are reduce-scattered as they are made and the tree is rebuilt
// on chunks, in the same order (tied copies stay bit-identical).
//
//===----------------------------------------------------------------------===//

#include "TrainStepContract.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "smp-shard-gradients"

namespace smp {
#define GEN_PASS_DEF_SMPSHARDGRADIENTSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// The micro-batch of `v`'s defining op (-1: none or a block argument).
int64_t microbatchOf(Value v) {
  Operation *def = v.getDefiningOp();
  auto mb = def ? def->getAttrOfType<IntegerAttr>(SmpDialect::kMicrobatchAttr)
                : IntegerAttr();
  return mb ? mb.getInt() : -1;
}

/// An add of the step that sums two gradient parts of different
/// micro-batches or stages (the accumulation BuildGradients builds), as
/// opposed to an add inside one micro-batch's backward.
AddOp accumulation(Value v, Block &body) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add || add->getBlock() != &body)
    return AddOp();
  Value a = add.getLhs(), c = add.getRhs();
  if (a.getType() != v.getType() || c.getType() != v.getType())
    return AddOp();
  if (microbatchOf(a) == microbatchOf(c) && stageOf(a) == stageOf(c))
    return AddOp();
  return add;
}

struct ShardGradients {
  ShardGradients(func::FuncOp f, int64_t dp, double bucketMb, bool parts)
      : f(f), body(f.getBody().front()), dp(dp), bucketMb(bucketMb),
        parts(parts) {}

  func::FuncOp f;
  Block &body;
  int64_t dp;
  double bucketMb;
  /// Scatter each part of a gradient's accumulation tree (ZeRO-2), or the
  /// gradient, summed, as a whole (ZeRO-1).
  bool parts;
  /// The chunk of each leaf and of each rebuilt sum.
  llvm::DenseMap<Value, Value> chunkOf;

  /// The leaves of `v`'s accumulation tree, each once.
  void collect(Value v, llvm::SetVector<Value> &leaves) {
    if (AddOp add = parts ? accumulation(v, body) : AddOp()) {
      collect(add.getLhs(), leaves);
      collect(add.getRhs(), leaves);
      return;
    }
    leaves.insert(v);
  }

  /// Reduce-scatters `bucket` (leaves of one micro-batch, stage and element
  /// type) at once: each leaf flattened, padded and viewed as [dp, n / dp],
  /// the views concatenated along dim 1, so that rank r's part of the
  /// flattened whole is chunk r of every leaf in turn.
  void scatter(ArrayRef<Value> bucket) {
    Operation *last = lastDefinition(body, bucket);
    OpBuilder b(f.getContext());
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&body);
    Operation *mark = lastBefore(b);
    Location loc = f.getLoc();
    if (bucket.size() == 1) {
      chunkOf[bucket[0]] =
          reduceScatterDp(b, loc, flattenPadded(b, loc, bucket[0], dp), dp);
    } else {
      SmallVector<Value> rows;
      SmallVector<int64_t> widths;
      int64_t total = 0;
      for (Value v : bucket) {
        Value flat = flattenPadded(b, loc, v, dp);
        auto t = cast<RankedTensorType>(flat.getType());
        int64_t w = t.getDimSize(0) / dp;
        rows.push_back(ReshapeOp::create(
            b, loc, t.clone(ArrayRef<int64_t>{dp, w}), flat));
        widths.push_back(w);
        total += w;
      }
      Value cat = ConcatOp::create(b, loc, rows, b.getI64IntegerAttr(1));
      auto ct = cast<RankedTensorType>(cat.getType());
      Value mine = reduceScatterDp(
          b, loc,
          ReshapeOp::create(b, loc, ct.clone(ArrayRef<int64_t>{dp * total}),
                            cat),
          dp);
      int64_t offset = 0;
      for (auto [v, w] : llvm::zip(bucket, widths)) {
        auto slice = SliceOp::create(
            b, loc, mine, b.getDenseI64ArrayAttr({offset}),
            b.getDenseI64ArrayAttr({offset + w}), b.getDenseI64ArrayAttr({1}));
        // A view of the chunk: nothing reads the reduce-scatter's result
        // until the chunks' first use, so it runs beside the backward
        // (runtime/exec's lanes; the memory plan keeps its input for as
        // long: lib/Target/Artifact/SideWork.cpp).
        slice->setAttr(SmpDialect::kViewAttr, b.getUnitAttr());
        chunkOf[v] = slice;
        offset += w;
      }
    }
    markLike(b, mark, last);
  }

  /// Scatters the leaves in buckets of one micro-batch, stage and element
  /// type, in the order the backward makes them.
  void scatterInBuckets(ArrayRef<Value> leaves) {
    auto key = [&](Value v) {
      Operation *d = v.getDefiningOp();
      return std::make_tuple(microbatchOf(v), stageOf(v),
                             d && d->hasAttr(SmpDialect::kBackwardAttr),
                             getElementTypeOrSelf(v.getType()));
    };
    for (const SmallVector<unsigned> &bucket :
         gradientBuckets(body, leaves, bucketMb, [&](unsigned x, unsigned y) {
           return key(leaves[x]) == key(leaves[y]);
         })) {
      SmallVector<Value> values;
      for (unsigned k : bucket)
        values.push_back(leaves[k]);
      scatter(values);
    }
  }

  /// The chunk of `v`: a leaf's, or the sum of its parts' chunks, added
  /// where the original add was (or after its parts' chunks) with its
  /// marks.
  Value chunk(Value v) {
    if (Value c = chunkOf.lookup(v))
      return c;
    AddOp add = accumulation(v, body);
    assert(add && "every leaf has its chunk");
    Value lhs = chunk(add.getLhs()), rhs = chunk(add.getRhs());
    Operation *after = add;
    for (Value part : {lhs, rhs})
      if (Operation *d = part.getDefiningOp();
          d && d->getBlock() == &body && after->isBeforeInBlock(d))
        after = d;
    OpBuilder b(after->getContext());
    b.setInsertionPointAfter(after);
    auto sum = AddOp::create(b, add.getLoc(), lhs, rhs);
    for (NamedAttribute a : add->getDiscardableAttrs())
      sum->setAttr(a.getName(), a.getValue());
    return chunkOf[v] = sum;
  }

  void run() {
    SmallVector<Gradient> grads;
    llvm::SetVector<Value> leaves;
    for (const Gradient &g : gradients(f))
      if (!g.sharded) {
        grads.push_back(g);
        collect(g.value, leaves);
      }
    scatterInBuckets(leaves.getArrayRef());
    SmallVector<Operation *> replaced;
    for (const Gradient &g : grads) {
      Value c = chunk(g.value);
      if (Operation *d = g.value.getDefiningOp())
        replaced.push_back(d);
      setGradientChunk(f, g, c);
    }
    // The whole sums are dead now: erase them (and the adds they summed).
    while (!replaced.empty()) {
      Operation *op = replaced.pop_back_val();
      if (!op->use_empty() || !isa<AddOp>(op) || op->getBlock() != &body)
        continue;
      SmallVector<Value> parts(op->getOperands());
      op->erase();
      for (Value p : parts)
        if (Operation *d = p.getDefiningOp(); d && isa<AddOp>(d))
          replaced.push_back(d);
    }
  }
};

struct SmpShardGradientsPass
    : public smp::impl::SmpShardGradientsPassBase<SmpShardGradientsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = trainStep(module, "smp-shard-gradients");
    if (failed(f))
      return signalPassFailure();
    auto dp = shardedDataParallelRanks(module, "smp-shard-gradients");
    if (failed(dp))
      return signalPassFailure();
    scatterGradientChunks(*f, *dp, bucketMb, /*parts=*/true);
  }
};

} // namespace

void smp::scatterGradientChunks(func::FuncOp f, int64_t dp, double bucketMb,
                                bool parts) {
  ShardGradients(f, dp, bucketMb, parts).run();
}
