//===- LossShareTest.cpp - Constants folded from the batch's shape --------===//
//
// markBatchScaledLossConstants compares a --loss NAME's arithmetic at two
// batch sizes (smpc imports the model twice): a constant proportional to
// the batch is marked smp.batch_scaled, an equal one is a literal, another
// is refused, and where the two imports differ in form the module is
// marked smp.batch_scaling_unknown (no constant there is taken for a
// literal).
//
//===----------------------------------------------------------------------===//

#include "MlirTest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/Transforms/LossShare.h"

#include "llvm/Support/FormatVariadic.h"

namespace smp::test {
namespace {

/// A module whose loss is sum(x @ w) `op` `k` (op: div or mul).
std::string lossModule(llvm::StringRef op, double k) {
  return llvm::formatv(R"(
  func.func @main(%x: tensor<2x3xf32> {{smp.input = "x"}, %w: tensor<3x3xf32> {{smp.param = "w"})
      -> (tensor<f32> {{smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %s = smp.reduce_sum %y {{axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    %k = smp.constant dense<{1:e}> : tensor<f32>
    %l = smp.{0} %s, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  })",
                       op, k)
      .str();
}

class LossShareTest : public MlirTest {
protected:
  /// Marks `main`'s loss against `probe`'s (imported at twice the batch).
  mlir::LogicalResult mark(mlir::ModuleOp main, mlir::ModuleOp probe) {
    return markBatchScaledLossConstants(
        main.lookupSymbol<mlir::func::FuncOp>("main"),
        probe.lookupSymbol<mlir::func::FuncOp>("main"), "loss", 2);
  }

  /// The smp.batch_scaled mark of `main`'s loss op, or 0.
  int64_t scaled(mlir::ModuleOp main) {
    mlir::Operation *ret = main.lookupSymbol<mlir::func::FuncOp>("main")
                               .getBody()
                               .front()
                               .getTerminator();
    auto a =
        ret->getOperand(0).getDefiningOp()->getAttrOfType<mlir::IntegerAttr>(
            "smp.batch_scaled");
    return a ? a.getInt() : 0;
  }
};

TEST_F(LossShareTest, ProportionalDivisorIsBatchScaled) {
  auto main = parse(lossModule("div", 2)), probe = parse(lossModule("div", 4));
  ASSERT_TRUE(mlir::succeeded(mark(*main, *probe)));
  EXPECT_EQ(scaled(*main), 1);
  EXPECT_FALSE((*main)->hasAttr(SmpDialect::kBatchScalingUnknownAttr));
}

TEST_F(LossShareTest, InverseFactorIsBatchScaledDown) {
  auto main = parse(lossModule("mul", 0.5)),
       probe = parse(lossModule("mul", 0.25));
  ASSERT_TRUE(mlir::succeeded(mark(*main, *probe)));
  EXPECT_EQ(scaled(*main), -1);
}

TEST_F(LossShareTest, EqualConstantIsALiteral) {
  auto main = parse(lossModule("div", 4)), probe = parse(lossModule("div", 4));
  ASSERT_TRUE(mlir::succeeded(mark(*main, *probe)));
  EXPECT_EQ(scaled(*main), 0);
  EXPECT_FALSE((*main)->hasAttr(SmpDialect::kBatchScalingUnknownAttr));
}

TEST_F(LossShareTest, NonProportionalConstantIsRefused) {
  auto main = parse(lossModule("div", 5)), probe = parse(lossModule("div", 9));
  std::string message;
  mlir::ScopedDiagnosticHandler h(ctx.get(), [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  EXPECT_TRUE(mlir::failed(mark(*main, *probe)));
  EXPECT_NE(message.find("(5 at this batch, 9 at 2 times it) that is not "
                         "proportional to the batch size"),
            std::string::npos)
      << message;
}

// The imports differ in form (a division at one batch, a multiplication at
// the other): the constant cannot be told from a literal, so the module
// says so and smp-build-gradients refuses to scale by it.
TEST_F(LossShareTest, FormMismatchMarksScalingUnknown) {
  auto main = parse(lossModule("div", 2)),
       probe = parse(lossModule("mul", 0.25));
  ASSERT_TRUE(mlir::succeeded(mark(*main, *probe)));
  EXPECT_EQ(scaled(*main), 0);
  EXPECT_TRUE((*main)->hasAttr(SmpDialect::kBatchScalingUnknownAttr));
}

} // namespace
} // namespace smp::test
