//===- PlannerTest.cpp - Model profiles as the planner sees them ----------===//

#include "smp/Planner/Planner.h"
#include "MlirTest.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "smp/InitAll.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace smp;

namespace {

class PlannerTest : public smp::test::MlirTest {
protected:
};

// x -> matmul -> + bias -> GELU -> transpose -> matmul: the bias and the
// GELU run in the first product's epilogue on a fusing device, and the
// transpose is absorbed by the second product.
constexpr const char *kMlp = R"(
module {
  func.func @main(%x: tensor<1x16x64xf32> {smp.input = "x"},
                  %w: tensor<64x256xf32> {smp.param = "w"},
                  %b: tensor<256xf32> {smp.param = "b"},
                  %w2: tensor<16x64xf32> {smp.param = "w2"})
      -> tensor<1x256x64xf32> {
    %0 = smp.matmul %x, %w : (tensor<1x16x64xf32>, tensor<64x256xf32>) -> tensor<1x16x256xf32>
    %1 = smp.add %b, %0 : (tensor<256xf32>, tensor<1x16x256xf32>) -> tensor<1x16x256xf32>
    %2 = smp.gelu %1 : tensor<1x16x256xf32>
    %3 = smp.transpose %2 {perm = array<i64: 0, 2, 1>} : tensor<1x16x256xf32> -> tensor<1x256x16xf32>
    %4 = smp.matmul %3, %w2 : (tensor<1x256x16xf32>, tensor<16x64xf32>) -> tensor<1x256x64xf32>
    return %4 : tensor<1x256x64xf32>
  }
}
)";

TEST_F(PlannerTest, FusingDevicesMoveElementwiseChainsOnce) {
  auto module = parseSourceString<ModuleOp>(kMlp, ctx.get());
  ASSERT_TRUE(module);
  auto plain = profileModel(*module, 1, "", /*fuse=*/false);
  auto fused = profileModel(*module, 1, "", /*fuse=*/true);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  ASSERT_EQ(plain->ops.size(), 5u);
  ASSERT_EQ(fused->ops.size(), 5u);
  double act = 16 * 256 * 4; // one sample's hidden activation, bytes
  // One kernel per op: the add and the GELU read and write it, and so does
  // the transpose.
  EXPECT_EQ(plain->ops[1].batchBytes, 2 * act);
  EXPECT_EQ(plain->ops[2].batchBytes, 2 * act);
  EXPECT_EQ(plain->ops[3].batchBytes, 2 * act);
  // Fused: the first product writes GELU's result, the second reads it.
  EXPECT_EQ(fused->ops[1].batchBytes, 0);
  EXPECT_EQ(fused->ops[2].batchBytes, 0);
  EXPECT_EQ(fused->ops[3].batchBytes, 0);
  EXPECT_EQ(fused->ops[0].batchBytes, plain->ops[0].batchBytes);
  EXPECT_EQ(fused->ops[4].batchBytes, plain->ops[4].batchBytes);
  // FLOPs are unchanged: the epilogue still computes.
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(fused->ops[i].flops, plain->ops[i].flops);
}

// A value read twice (the residual) cannot be fused away from its producer.
TEST_F(PlannerTest, SharedValuesAreStillWritten) {
  auto module = parseSourceString<ModuleOp>(R"(
module {
  func.func @main(%x: tensor<1x16x64xf32> {smp.input = "x"},
                  %w: tensor<64x64xf32> {smp.param = "w"})
      -> tensor<1x16x64xf32> {
    %0 = smp.matmul %x, %w : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
    %1 = smp.tanh %0 : tensor<1x16x64xf32>
    %2 = smp.add %0, %1 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    return %2 : tensor<1x16x64xf32>
  }
}
)",
                                            ctx.get());
  ASSERT_TRUE(module);
  auto fused = profileModel(*module, 1, "", /*fuse=*/true);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  double act = 16 * 64 * 4;
  // tanh reads the product's result, which the add reads as well.
  EXPECT_EQ(fused->ops[1].batchBytes, 2 * act);
  // The add fuses with tanh (its only user), still reading the product.
  EXPECT_EQ(fused->ops[2].batchBytes, act);
}

} // namespace
