//===- OpModelsTest.cpp - Every smp op has the models it needs ------------===//
//
// The op models (lib/Dialect/Smp/OpModels) hold each op's gradient, cost
// and tensor-parallel sharding rule. A new op that lacks one fails here,
// with a message naming it and the file to add it to. Ops that need no
// gradient or sharding rule are listed with the reason, and the lists are
// checked both ways (an op that gains a model must leave its list).
//
//===----------------------------------------------------------------------===//

#include "MlirTest.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/MLIRContext.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/InitAll.h"
#include "smp/Interfaces/AutodiffInterface.h"
#include "smp/Interfaces/CostInterface.h"
#include "smp/Interfaces/TensorParallelInterface.h"
#include "llvm/ADT/StringMap.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace smp;

namespace {

/// Ops autodiff never differentiates, and why.
const llvm::StringMap<const char *> &noGradient() {
  static const llvm::StringMap<const char *> m = {
      {"smp.constant", "no operands"},
      {"smp.not", "boolean"},
      {"smp.equal", "boolean result"},
      {"smp.less", "boolean result"},
      {"smp.greater", "boolean result"},
      {"smp.and", "boolean"},
      {"smp.or", "boolean"},
      {"smp.tp_rank", "integer, no operands"},
      {"smp.gelu_grad", "a backward op"},
      {"smp.bias_gelu_grad", "a backward op (formed after the step is built)"},
      {"smp.matmul_bias", "formed after the step is built and split"},
      {"smp.matmul_bias_add", "formed after the step is built and split"},
      {"smp.matmul_add", "formed after the step is built and split"},
      {"smp.matmul_bias_gelu", "formed after the step is built and split"},
      {"smp.matmul_gelu_grad",
       "a backward op (formed after the step is built)"},
      {"smp.matmul_bias_grad",
       "a backward op (formed after the step is built)"},
      {"smp.sum_squares", "formed after the step is built and split"},
      {"smp.layer_norm_grad", "a backward op"},
      {"smp.rms_norm_grad", "a backward op"},
      {"smp.cross_entropy_grad", "a backward op"},
      {"smp.cross_entropy_with_grad",
       "the loss and its backward op (formed after the step is built)"},
      {"smp.cross_entropy_shard_grad", "a backward op"},
      {"smp.label_rank", "an evaluation's accuracy: counts, no gradient"},
      {"smp.gather_grad", "a backward op"},
      {"smp.gather_nd_grad", "a backward op"},
      {"smp.slice_grad", "a backward op"},
      {"smp.pool_grad", "a backward op"},
      {"smp.attention_grad", "a backward op"},
      {"smp.attention_mask_grad", "a backward op"},
      {"smp.packed_attention_grad", "a backward op"},
      {"smp.sgd_update", "the optimizer, after the backward"},
      {"smp.adam_update", "the optimizer, after the backward"},
      {"smp.adam_update_multi", "formed after the step is built and split"},
      {"smp.sgd_update_multi", "formed after the step is built and split"},
      {"smp.cast_multi", "formed after the step is built and split"},
      {"smp.add_multi", "formed after the step is built and split"},
      {"smp.all_slice_multi", "formed after the step is built and split"},
      {"smp.send", "pipeline split, after the backward"},
      {"smp.recv", "pipeline split, after the backward"},
      {"smp.offload", "inserted after the backward"},
      {"smp.prefetch", "inserted after the backward"},
  };
  return m;
}

/// Forward ops (those smp-tensor-parallel meets) without a sharding rule: a
/// tensor-parallel region ends at them, and why.
const llvm::StringMap<const char *> &noShardingRule() {
  static const llvm::StringMap<const char *> m = {
      {"smp.constant", "read whole by every rank"},
      {"smp.tp_rank", "written by smp-tensor-parallel"},
      {"smp.tp_copy", "written by smp-tensor-parallel"},
      {"smp.reduce_sum", "not split through (yet)"},
      {"smp.reduce_mean", "not split through (yet)"},
      {"smp.reduce_max", "not split through (yet)"},
      {"smp.cumsum", "not split through (yet)"},
      {"smp.expand", "not split through (yet)"},
      {"smp.trilu", "not split through (yet)"},
      {"smp.layer_norm", "normalises the hidden dim tp splits"},
      {"smp.rms_norm", "normalises the hidden dim tp splits"},
      {"smp.batch_norm", "convolutional models are not split"},
      {"smp.conv", "convolutional models are not split"},
      {"smp.conv_grad", "convolutional models are not split (ConvTranspose)"},
      {"smp.max_pool", "convolutional models are not split"},
      {"smp.avg_pool", "convolutional models are not split"},
      {"smp.cross_entropy", "the loss: vocab-parallel is its own rewrite"},
      {"smp.cross_entropy_shard",
       "made by the vocab-parallel loss, already per rank"},
      {"smp.cross_entropy_shard_grad",
       "made by the vocab-parallel loss, already per rank"},
      {"smp.label_rank",
       "made after the split by smp-build-gradients (per rank under the "
       "vocab-parallel loss)"},
      {"smp.gather", "embeddings: vocab-parallel is its own rewrite"},
      {"smp.gather_nd", "not split through (yet)"},
      {"smp.gather_elements", "not split through (yet)"},
      {"smp.gather_elements_grad", "not split through (ScatterElements)"},
      {"smp.packed_attention", "formed after the step is built and split"},
      {"smp.cross_entropy_with_grad",
       "formed after the step is built and split"},
      {"smp.matmul_bias_add", "formed after the step is built and split"},
      {"smp.matmul_add", "formed after the step is built and split"},
  };
  return m;
}

class OpModelsTest : public smp::test::MlirTest {
protected:
  /// Every registered op of the smp dialect.
  std::vector<RegisteredOperationName> smpOps() {
    std::vector<RegisteredOperationName> ops;
    for (RegisteredOperationName name : ctx->getRegisteredOperations())
      if (name.getDialectNamespace() == SmpDialect::getDialectNamespace())
        ops.push_back(name);
    return ops;
  }
};

TEST_F(OpModelsTest, SeesEverySmpOp) {
  // Guards the tests below against an empty op list.
  EXPECT_GE(smpOps().size(), 75u);
}

TEST_F(OpModelsTest, EveryOpHasACost) {
  for (RegisteredOperationName name : smpOps())
    EXPECT_TRUE(name.hasInterface<CostOpInterface>())
        << name.getStringRef().str()
        << " has no cost: attach a CostOpInterface model in its family's "
           "file in lib/Dialect/Smp/OpModels";
  // The collectives the parallelisation passes write cost no device work.
  EXPECT_TRUE(RegisteredOperationName::lookup(shard::AllReduceOp::getOperationName(), ctx.get())
                  ->hasInterface<CostOpInterface>());
  EXPECT_TRUE(RegisteredOperationName::lookup(shard::AllGatherOp::getOperationName(), ctx.get())
                  ->hasInterface<CostOpInterface>());
  EXPECT_TRUE(RegisteredOperationName::lookup(shard::ReduceScatterOp::getOperationName(), ctx.get())
                  ->hasInterface<CostOpInterface>());
  EXPECT_TRUE(RegisteredOperationName::lookup(shard::AllSliceOp::getOperationName(), ctx.get())
                  ->hasInterface<CostOpInterface>());
}

TEST_F(OpModelsTest, EveryDifferentiableOpHasAGradient) {
  for (RegisteredOperationName name : smpOps()) {
    std::string op = name.getStringRef().str();
    bool listed = noGradient().count(op);
    bool has = name.hasInterface<AutodiffOpInterface>();
    EXPECT_TRUE(has || listed)
        << op << " has no gradient: attach an AutodiffOpInterface model "
                 "(SMP_VJP) in its family's file in lib/Dialect/Smp/OpModels, "
                 "or list it in noGradient() with the reason";
    EXPECT_FALSE(has && listed)
        << op << " has a gradient but is listed in noGradient()";
  }
  // The tensor-parallel exit's gradient.
  EXPECT_TRUE(RegisteredOperationName::lookup(shard::AllReduceOp::getOperationName(), ctx.get())
                  ->hasInterface<AutodiffOpInterface>());
}

TEST_F(OpModelsTest, EveryForwardOpDecidesItsShardingRule) {
  for (RegisteredOperationName name : smpOps()) {
    std::string op = name.getStringRef().str();
    // Ops written after the forward (backward, optimizer, pipeline,
    // offloading) never meet smp-tensor-parallel.
    if (noGradient().count(op) && !noShardingRule().count(op))
      continue;
    bool listed = noShardingRule().count(op);
    bool has = name.hasInterface<TensorParallelOpInterface>();
    EXPECT_TRUE(has || listed)
        << op << " has no tensor-parallel sharding rule: attach a "
                 "TensorParallelOpInterface model in its family's file in "
                 "lib/Dialect/Smp/OpModels, or list it in noShardingRule() "
                 "with the reason";
    EXPECT_FALSE(has && listed)
        << op << " has a sharding rule but is listed in noShardingRule()";
  }
}

TEST_F(OpModelsTest, UnaryElementwiseOpsSplitWeightChains) {
  // An op with upstream's Elementwise trait and one operand is split as its
  // operand, also where it computes from parameters only (a cast weight).
  for (RegisteredOperationName name : smpOps()) {
    if (!name.hasTrait<OpTrait::Elementwise>() ||
        !name.hasTrait<OpTrait::OneOperand>())
      continue;
    EXPECT_TRUE(name.hasInterface<TensorParallelOpInterface>())
        << name.getStringRef().str()
        << " is unary elementwise but has no sharding rule (attach "
           "SameSplitTpRule in lib/Dialect/Smp/OpModels/Elementwise.cpp)";
  }
}

} // namespace
