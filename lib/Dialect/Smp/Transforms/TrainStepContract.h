//===- TrainStepContract.h - The IR between the train-step passes -*- C++ -*-===//
//
// The passes that build func @train_step (smp-build-gradients, then
// smp-recompute, smp-offload-activations, smp-shard-optimizer-state,
// smp-gradient-all-reduce, smp-loss-scaling, smp-gradient-norm and
// smp-optimizer) hand the step to each other as IR:
//
//   results  `smp.grad_of = N`      the gradient of parameter argument N
//                                   (after smp-shard-optimizer-state: this
//                                   rank's chunk of it flattened, the result
//                                   also carrying `smp.layout` =
//                                   #smp.layout<dp = chunk(of = the
//                                   parameter's shape)>, SmpLayout.h)
//            `smp.found_inf`        i1 scalar: the gradients overflowed
//                                   (loss scaling); the optimizer skips
//            `smp.update = NAME`    the new value of a parameter or state
//            `smp.output = NAME`    loss, loss_scale, skipped, grad_norm
//   args     `smp.state = "@loss_scale"` the dynamic loss scale (its value
//                                   seeded the backward)
//   ops      `smp.bwd`              the backward (of micro-batch `smp.mb`
//                                   when the step is unrolled; a step that is
//                                   not has no smp.mb, and smp-optimizer
//                                   drops its smp.bwd marks at the end)
//   module   `shard.grid @dp`       the data-parallel ranks: 1-D, or 2-D
//                                   [R, S] under hybrid sharding (R groups
//                                   of S ranks; ZeRO shards over the S
//                                   ranks of a group, axis 1, and replicates
//                                   across the groups, axis 0)
//
// smp-optimizer consumes the gradients and the overflow flag: the finished
// step returns only updates and outputs.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_TRANSFORMS_TRAINSTEPCONTRACT_H
#define SMP_LIB_TRANSFORMS_TRAINSTEPCONTRACT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpLayout.h"
#include "TrainStepUtils.h"

#include <optional>

namespace smp {

/// Result attribute: the gradient of parameter argument N (i64).
constexpr llvm::StringLiteral kGradOfAttr = "smp.grad_of";
/// Unit result attribute: the i1 scalar that says the step's gradients
/// overflowed.
constexpr llvm::StringLiteral kFoundInfAttr = "smp.found_inf";
/// The dynamic loss scale's state name.
constexpr llvm::StringLiteral kLossScaleState = "@loss_scale";

/// func @train_step of `module`, or an error naming `pass` (which needs
/// smp-build-gradients to have run).
mlir::FailureOr<mlir::func::FuncOp> trainStep(mlir::ModuleOp module,
                                              llvm::StringRef pass);

/// The number of data-parallel ranks (the shard.grid @dp's size, 1 without).
int64_t dataParallelRanks(mlir::ModuleOp module);

/// The ranks a ZeRO chunk is split over: the last axis of @dp (all the
/// data-parallel ranks unless hybrid sharding made the grid 2-D).
int64_t dataParallelShardRanks(mlir::ModuleOp module);

/// The number of ZeRO shard ranks (dataParallelShardRanks), or (no data
/// parallelism) failure after the error "`pass` needs data parallelism ..."
/// on the module: the ZeRO passes.
mlir::FailureOr<int64_t> shardedDataParallelRanks(mlir::ModuleOp module,
                                                  llvm::StringRef pass);

/// Which data-parallel ranks a collective spans: all of them, this rank's
/// shard group (the ranks that split a ZeRO chunk among them), or its
/// replica group (the ranks that hold the same chunk). Without hybrid
/// sharding the shard group is all the ranks and the replica group is this
/// rank alone.
enum class DpGroup { All, Shard, Replica };

/// The axes of @dp that `group` spans (empty: a replica group of one rank).
llvm::SmallVector<int16_t> dataParallelAxes(mlir::ModuleOp module,
                                            DpGroup group);

/// Sum over the data-parallel ranks of `group` (shard.all_reduce on the dp
/// grid).
mlir::Value allReduceDp(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                        DpGroup group = DpGroup::All);

/// Sum over the `shards` ranks of this rank's shard group, of which this
/// rank keeps its 1/shards: shard.reduce_scatter of the 1-D `flat` (a
/// multiple of `shards` long). Under hybrid sharding the chunk still needs
/// the sum over the replica groups (smp-gradient-all-reduce adds it).
mlir::Value reduceScatterDp(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value flat, int64_t shards);

/// `v` flattened to 1-D and zero-padded to a multiple of `dp` (ZeRO-1).
mlir::Value flattenPadded(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value v, int64_t dp);

/// The `v` ([n, ...]) of every rank of this rank's `group` (`ranks` of
/// them) along dim 0, in the ranks' order ([ranks * n, ...]):
/// shard.all_gather over @dp's axes of `group`.
mlir::Value gatherDp(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                     int64_t ranks, DpGroup group = DpGroup::All);

/// The 1-D `flat` (a parameter flattened and zero-padded: flattenPadded's
/// layout) cut to the parameter's elements and reshaped to `whole`.
mlir::Value unpadded(mlir::OpBuilder &b, mlir::Location loc, mlir::Value flat,
                     mlir::RankedTensorType whole);

/// Gathers the chunks of this rank's shard group (`shards` ranks) back
/// into a tensor of type `whole` (its element type the chunk's): the
/// parameter after a ZeRO-1 update, a ZeRO-3 parameter before its uses.
mlir::Value unshard(mlir::OpBuilder &b, mlir::Location loc, mlir::Value chunk,
                    mlir::RankedTensorType whole, int64_t shards);

/// This rank's chunk of the 1-D `flat` (a multiple of `shards` long) among
/// its shard group: shard.all_slice (no communication).
mlir::Value sliceDp(mlir::OpBuilder &b, mlir::Location loc, mlir::Value flat,
                    int64_t shards);

/// Gives the ops after `mark` (null: from the block's start) up to the
/// builder's insertion point the placement marks (smp.stage, smp.mb,
/// smp.bwd) of `from`, and only those.
void markLike(mlir::OpBuilder &b, mlir::Operation *mark,
              mlir::Operation *from);

/// One gradient of the step: its result and its parameter argument.
struct Gradient {
  unsigned result;
  mlir::BlockArgument param;
  /// Its value (the return's operand).
  mlir::Value value;
  /// A ZeRO-1 shard (a dp chunk layout on the result).
  bool sharded;
};

/// The step's gradients, in result order.
llvm::SmallVector<Gradient> gradients(mlir::func::FuncOp f);

/// Makes `chunk` (this rank's chunk of `g` flattened) the value of `g`'s
/// result, with the layout #smp.layout<dp = chunk(of = the parameter's
/// shape)>.
void setGradientChunk(mlir::func::FuncOp f, const Gradient &g,
                      mlir::Value chunk);

/// ZeRO's gradient chunks (ShardGradients.cpp): each gradient of `f` not
/// yet sharded becomes this rank's chunk among `dp` ranks (setGradientChunk),
/// reduce-scattered in buckets of up to `bucketMb` MiB right after the last
/// value of its bucket is made, with that value's marks (in a pipeline, the
/// last micro-batch's backward). `parts`: each micro-batch's and stage's part
/// of a gradient on its own, the sums taken on the chunks (ZeRO-2: no whole
/// gradient outlives its bucket); else the summed gradient (ZeRO-1: one
/// reduce-scatter a step).
void scatterGradientChunks(mlir::func::FuncOp f, int64_t dp, double bucketMb,
                           bool parts);

/// The last op of `block` that defines one of `values` (null: none does).
mlir::Operation *lastDefinition(mlir::Block &block, mlir::ValueRange values);

/// Groups the non-null `values` (gradients or their parts, all ops of
/// `block` or arguments) into buckets for one collective each: in the
/// order `block` makes them (arguments first), consecutive values that
/// `together` pairs, up to `bucketMb` MiB (a larger value alone). Returns
/// indices into `values`.
llvm::SmallVector<llvm::SmallVector<unsigned>>
gradientBuckets(mlir::Block &block, llvm::ArrayRef<mlir::Value> values,
                double bucketMb,
                llvm::function_ref<bool(unsigned, unsigned)> together);

/// The result carrying unit attribute or string attribute `attr` (with
/// value `name` when given).
std::optional<unsigned> findResult(mlir::func::FuncOp f, llvm::StringRef attr,
                                   llvm::StringRef name = "");

/// Replaces the value of result `i` (retyping `f`).
void setResult(mlir::func::FuncOp f, unsigned i, mlir::Value v);

/// Appends a result with attribute `attr` = `value`.
void appendResult(mlir::func::FuncOp f, mlir::Value v, llvm::StringRef attr,
                  mlir::Attribute value);

/// Replaces the return with `values` and `attrs`, and retypes `f`.
void setResults(mlir::func::FuncOp f, mlir::ValueRange values,
                llvm::ArrayRef<mlir::DictionaryAttr> attrs);

/// A new argument `smp.input = name`.
mlir::Value addInput(mlir::func::FuncOp f, mlir::Type type,
                     llvm::StringRef name);

/// A new optimizer (or loss-scaling) state argument `smp.state = name`,
/// with `smp.init` when given; a parameter's state records the parameter's
/// tensor-parallel split and, when its type differs (a ZeRO-1 shard), the
/// shape it flattens.
mlir::Value addState(mlir::func::FuncOp f, mlir::Type type,
                     llvm::StringRef name,
                     std::optional<float> init = std::nullopt,
                     mlir::Value param = mlir::Value());

/// The forward and backward of one micro-batch (or of the whole step when it
/// is not unrolled): the forward's ops in order, and the backward's range.
struct BackwardRange {
  llvm::SmallVector<mlir::Operation *> forward;
  mlir::Block::iterator begin, end;
  /// The micro-batch, when the step is unrolled.
  std::optional<int64_t> microbatch;
};

/// The step's backward ranges (smp.bwd), by micro-batch.
llvm::SmallVector<BackwardRange> backwardRanges(mlir::func::FuncOp f);

/// Marks `op` as part of the backward of `range`.
void markBackward(mlir::Operation *op, const BackwardRange &range);

/// Runs `rewrite`, which adds ops to the backward of `range` (those that
/// `isAdded` says, not marked yet), marks them (smp.bwd, smp.mb), and gives
/// them stages in an unrolled step.
template <typename Pred, typename Fn>
void rewriteBackward(mlir::func::FuncOp f, const BackwardRange &range,
                     Pred isAdded, Fn rewrite) {
  rewrite();
  mlir::Block &body = f.getBody().front();
  mlir::Operation *first = nullptr;
  for (mlir::Operation &op : body) {
    bool added = isAdded(op) && !op.hasAttr(SmpDialect::kBackwardAttr);
    if (added)
      markBackward(&op, range);
    if (!first && (added || &op == &*range.begin))
      first = &op;
  }
  if (range.microbatch && first)
    propagateStages(body, first);
}

} // namespace smp

#endif // SMP_LIB_TRANSFORMS_TRAINSTEPCONTRACT_H
