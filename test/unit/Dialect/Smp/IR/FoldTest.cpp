//===- FoldTest.cpp - Constant folding of smp ops against C++ references --===//

#include "MlirTest.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/InitAll.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;

namespace {

class FoldTest : public smp::test::MlirTest {
protected:
  /// Canonicalizes `src` and returns the returned constant values.
  std::vector<double> foldToValues(const std::string &src) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(src, ctx.get());
    EXPECT_TRUE(module);
    PassManager pm(ctx.get());
    pm.addPass(createCanonicalizerPass());
    EXPECT_TRUE(succeeded(pm.run(*module)));
    std::vector<double> values;
    module->walk([&](smp::ConstantOp op) {
      auto attr = cast<DenseElementsAttr>(op.getValue());
      if (!values.empty())
        return;
      if (isa<FloatType>(attr.getElementType()))
        for (const APFloat &v : attr.getValues<APFloat>())
          values.push_back(v.convertToDouble());
      else
        for (const APInt &v : attr.getValues<APInt>())
          values.push_back(static_cast<double>(v.getSExtValue()));
    });
    int returns = 0;
    module->walk([&](Operation *op) {
      if (op->getName().getStringRef() != "smp.constant" &&
          op->getDialect()->getNamespace() == "smp")
        ++returns;
    });
    EXPECT_EQ(returns, 0) << "not everything folded";
    return values;
  }
};

std::string denseF32(const std::vector<float> &v) {
  std::string s = "dense<[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]>";
}

TEST_F(FoldTest, BinaryOpsMatchScalarReference) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(0.5f, 3.0f);
  struct Case {
    const char *op;
    double (*ref)(double, double);
  } cases[] = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"pow", [](double a, double b) { return std::pow(a, b); }},
      {"max", [](double a, double b) { return std::max(a, b); }},
      {"min", [](double a, double b) { return std::min(a, b); }},
  };
  for (const Case &c : cases) {
    std::vector<float> a(6), b(3);
    for (float &v : a)
      v = dist(rng);
    for (float &v : b)
      v = dist(rng);
    std::string src = "func.func @f() -> tensor<2x3xf32> {\n"
                      "  %a = smp.constant " + denseF32(a) +
                      " : tensor<6xf32>\n"
                      "  %ar = smp.reshape %a : tensor<6xf32> -> tensor<2x3xf32>\n"
                      "  %b = smp.constant " + denseF32(b) +
                      " : tensor<3xf32>\n"
                      "  %r = smp." + c.op +
                      " %ar, %b : (tensor<2x3xf32>, tensor<3xf32>) -> "
                      "tensor<2x3xf32>\n"
                      "  return %r : tensor<2x3xf32>\n}\n";
    auto values = foldToValues(src);
    ASSERT_EQ(values.size(), 6u) << c.op;
    for (int i = 0; i < 6; ++i) {
      // The printed constants are rounded to 6 decimals, as parsed.
      double ref = static_cast<float>(
          c.ref(std::stod(std::to_string(a[i])),
                std::stod(std::to_string(b[i % 3]))));
      EXPECT_NEAR(values[i], ref, 1e-5 * std::max(1.0, std::fabs(ref)))
          << c.op << " element " << i;
    }
  }
}

TEST_F(FoldTest, ShapeSubgraphFoldsToConstant) {
  // Shape-like integer arithmetic: gather dims, scale, concat.
  auto values = foldToValues(R"(
func.func @f() -> tensor<3xi64> {
  %shape = smp.constant dense<[2, 16, 32]> : tensor<3xi64>
  %i = smp.constant dense<[1]> : tensor<1xi64>
  %seq = smp.gather %shape, %i {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %four = smp.constant dense<4> : tensor<i64>
  %h = smp.div %seq, %four : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %neg = smp.constant dense<[-1, 8]> : tensor<2xi64>
  %r = smp.concat %h, %neg {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
  return %r : tensor<3xi64>
}
)");
  EXPECT_EQ(values, (std::vector<double>{4, -1, 8}));
}

TEST_F(FoldTest, TransposeSliceAndTriluFold) {
  auto values = foldToValues(R"(
func.func @f() -> tensor<2x2xf32> {
  %m = smp.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]> : tensor<3x3xf32>
  %t = smp.transpose %m {perm = array<i64: 1, 0>} : tensor<3x3xf32> -> tensor<3x3xf32>
  %l = smp.trilu %t {upper = false, k = 0 : i64} : tensor<3x3xf32>
  %s = smp.slice %l {starts = array<i64: 2, 0>, limits = array<i64: -1, 3>, steps = array<i64: -2, 2>} : tensor<3x3xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
)");
  // t = [[1,4,7],[2,5,8],[3,6,9]]; lower = [[1,0,0],[2,5,0],[3,6,9]];
  // rows 2,0 and cols 0,2 -> [[3,9],[1,0]].
  EXPECT_EQ(values, (std::vector<double>{3, 9, 1, 0}));
}

} // namespace
