//===- GradientCheckTest.cpp - Every VJP against finite differences -------===//
//
// For each differentiable op: loss = sum(op(x...) * w) with a fixed random
// w, gradients from reverse-mode autodiff (compiled and run on the CPU
// runtime, in f64) against central finite differences of the same loss.
//
//===----------------------------------------------------------------------===//

#include "MlirTest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "smp/Dialect/Smp/Autodiff/Autodiff.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/InitAll.h"
#include "smp/Target/Artifact/ArtifactWriter.h"
#include "smprt/exec/Artifact.h"
#include "smprt/exec/Executor.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;

namespace {

struct NoWeights : smp::WeightSource {
  llvm::Expected<std::string> read(llvm::StringRef name,
                                   RankedTensorType) override {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no weights in gradient tests");
  }
};

/// A compiled function with f64 inputs, run repeatedly.
struct Compiled {
  smprt::Artifact artifact;
  smprt::Executor exec;
};

class GradientCheck : public smp::test::MlirTest {
protected:
  GradientCheck() {
    llvm::sys::fs::createUniqueDirectory("smp-gradcheck", scratch);
  }
  ~GradientCheck() override { llvm::sys::fs::remove_directories(scratch); }

  void compile(ModuleOp module, const std::string &name, Compiled &out) {
    NoWeights weights;
    smp::ArtifactOptions opts;
    opts.outputDir = (scratch + "/" + name).str();
    auto summary = smp::writeArtifact(module, weights, opts);
    ASSERT_TRUE(bool(summary)) << llvm::toString(summary.takeError());
    smprt::Status s = smprt::loadArtifact(opts.outputDir, 0, out.artifact);
    ASSERT_TRUE(s.ok()) << s.error;
    s = out.exec.init(out.artifact);
    ASSERT_TRUE(s.ok()) << s.error;
  }

  /// Runs with the given inputs; returns every output's values.
  std::vector<std::vector<double>> run(Compiled &c,
                                       std::vector<std::vector<double>> &in) {
    const auto &specs = c.artifact.manifest.inputs();
    for (int i = 0; i < specs.size(); ++i) {
      smprt::TensorRef ref{in[i].data(), smprt::DType::F64,
                           {specs[i].shape().begin(), specs[i].shape().end()}};
      smprt::Status s = c.exec.setInput(specs[i].name(), ref, "test");
      EXPECT_TRUE(s.ok()) << s.error;
    }
    smprt::Status s = c.exec.run();
    EXPECT_TRUE(s.ok()) << s.error;
    std::vector<std::vector<double>> out;
    for (const auto &[name, ref] : c.exec.outputs())
      out.emplace_back(ref.as<double>(), ref.as<double>() + ref.numel());
    return out;
  }

  /// `body` defines %y from the arguments %a0.. (all smp.input, f64); the
  /// loss sum(%y * w) is appended. Checks every argument's gradient.
  /// Arguments listed in `constants` get no gradient by design (running
  /// statistics, class weights): their gradient must be absent.
  void check(const std::string &args, const std::string &body,
             const std::string &yType, double lo = -1.5, double hi = 1.5,
             double tol = 1e-6, std::vector<size_t> constants = {},
             double h = 1e-6) {
    std::string src = "func.func @main(" + args + ") -> (" + yType +
                      " {smp.output = \"loss\"}) {\n" +
                      body + "\n  return %y : " + yType + "\n}\n";
    OwningOpRef<ModuleOp> fwd = parseSourceString<ModuleOp>(src, ctx.get());
    ASSERT_TRUE(fwd) << src;
    auto main = *fwd->getOps<func::FuncOp>().begin();
    Block &blk = main.getBody().front();
    auto ret = cast<func::ReturnOp>(blk.getTerminator());
    OpBuilder b(ret);
    Location loc = main.getLoc();
    Value y = ret.getOperand(0);
    auto yt = cast<RankedTensorType>(y.getType());
    // Loss weights: fixed pseudo-random values in [-1, 1].
    std::mt19937 rng(17);
    std::uniform_real_distribution<double> wdist(-1.0, 1.0);
    std::vector<double> w(yt.getNumElements());
    for (double &v : w)
      v = wdist(rng);
    Value wc = smp::ConstantOp::create(
        b, loc, DenseElementsAttr::get(yt, ArrayRef<double>(w)));
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < yt.getRank(); ++d)
      axes.push_back(d);
    Value loss = smp::ReduceSumOp::create(
        b, loc, smp::MulOp::create(b, loc, y, wc),
        b.getDenseI64ArrayAttr(axes), false);
    ret->setOperands(loss);
    main.setType(FunctionType::get(ctx.get(), blk.getArgumentTypes(),
                                   {loss.getType()}));
    // The gradient function: the same body, returning d(loss)/d(args).
    OwningOpRef<ModuleOp> grad(cast<ModuleOp>((*fwd)->clone()));
    auto gmain = *grad->getOps<func::FuncOp>().begin();
    Block &gblk = gmain.getBody().front();
    auto gret = cast<func::ReturnOp>(gblk.getTerminator());
    OpBuilder gb(gret);
    SmallVector<Value> wrt(gblk.getArguments().begin(),
                           gblk.getArguments().end());
    auto grads = smp::differentiate(gb, gblk, gret.getOperand(0), wrt);
    ASSERT_TRUE(succeeded(grads));
    SmallVector<Value> results;
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    for (auto [i, g] : llvm::enumerate(*grads)) {
      Value v = g;
      if (!v) // no gradient reaches it: zeros
        v = smp::ConstantOp::create(
            gb, loc,
            DenseElementsAttr::get(cast<RankedTensorType>(wrt[i].getType()),
                                   0.0));
      results.push_back(v);
      types.push_back(v.getType());
      attrs.push_back(gb.getDictionaryAttr(gb.getNamedAttr(
          "smp.output", gb.getStringAttr("g" + std::to_string(i)))));
    }
    func::ReturnOp::create(gb, loc, results);
    gret.erase();
    gmain.setType(FunctionType::get(ctx.get(), gblk.getArgumentTypes(), types));
    gmain.setAllResultAttrs(attrs);

    Compiled f, g;
    compile(*fwd, "f" + std::to_string(counter), f);
    compile(*grad, "g" + std::to_string(counter++), g);
    if (HasFatalFailure())
      return;
    std::vector<std::vector<double>> inputs;
    std::uniform_real_distribution<double> xdist(lo, hi);
    for (const auto &spec : f.artifact.manifest.inputs()) {
      int64_t n = 1;
      for (int64_t d : spec.shape())
        n *= d;
      std::vector<double> v(n);
      for (double &x : v)
        x = xdist(rng);
      inputs.push_back(v);
    }
    auto analytic = run(g, inputs);
    for (size_t a = 0; a < inputs.size(); ++a) {
      if (llvm::is_contained(constants, a)) {
        EXPECT_FALSE((*grads)[a]) << "argument " << a << " got a gradient";
        continue;
      }
      for (size_t k = 0; k < inputs[a].size(); ++k) {
        double saved = inputs[a][k];
        inputs[a][k] = saved + h;
        double up = run(f, inputs)[0][0];
        inputs[a][k] = saved - h;
        double down = run(f, inputs)[0][0];
        inputs[a][k] = saved;
        double numeric = (up - down) / (2 * h);
        EXPECT_NEAR(analytic[a][k], numeric,
                    tol * std::max(1.0, std::fabs(numeric)))
            << "argument " << a << " element " << k << " of:\n" << src;
      }
    }
  }

  llvm::SmallString<128> scratch;
  int counter = 0;
};

#define T(shape) "tensor<" shape "xf64>"
#define IN(i, shape) "%a" #i ": " T(shape) " {smp.input = \"a" #i "\"}"

TEST_F(GradientCheck, Binary) {
  for (const char *op : {"add", "sub", "mul", "div", "max", "min"})
    check(IN(0, "2x3") ", " IN(1, "3"),
          std::string("  %y = smp.") + op +
              " %a0, %a1 : (" T("2x3") ", " T("3") ") -> " T("2x3"),
          T("2x3"), 0.5, 1.5);
  check(IN(0, "2x3") ", " IN(1, "2x1"),
        "  %y = smp.pow %a0, %a1 : (" T("2x3") ", " T("2x1") ") -> " T("2x3"),
        T("2x3"), 0.5, 1.5);
}

TEST_F(GradientCheck, Mod) {
  // The remainder is smooth away from its jumps (a / b an integer), which
  // random inputs in [0.5, 1.5] miss; positive and negative divisors (the
  // floor remainder's adjustment).
  for (const char *attrs : {"", " {fmod = true}"}) {
    check(IN(0, "2x3") ", " IN(1, "3"),
          std::string("  %y = smp.mod %a0, %a1") + attrs +
              " : (" T("2x3") ", " T("3") ") -> " T("2x3"),
          T("2x3"), 0.5, 1.5);
    check(IN(0, "2x3") ", " IN(1, "3"),
          "  %n = smp.neg %a1 : " T("3") "\n"
          "  %y = smp.mod %a0, %n" + std::string(attrs) +
              " : (" T("2x3") ", " T("3") ") -> " T("2x3"),
          T("2x3"), 0.5, 1.5);
  }
}

TEST_F(GradientCheck, CumSum) {
  for (const char *attrs :
       {"axis = 1 : i64", "axis = -1 : i64, exclusive = true",
        "axis = 0 : i64, reverse = true",
        "axis = 1 : i64, exclusive = true, reverse = true"})
    check(IN(0, "3x4"),
          std::string("  %y = smp.cumsum %a0 {") + attrs + "} : " T("3x4"),
          T("3x4"));
}

TEST_F(GradientCheck, Unary) {
  for (const char *op : {"neg", "exp", "tanh", "erf", "sigmoid", "silu",
                         "sin", "cos", "gelu", "abs", "relu"})
    check(IN(0, "2x3"),
          std::string("  %y = smp.") + op + " %a0 : " T("2x3"), T("2x3"));
  for (const char *op : {"log", "sqrt", "rsqrt", "reciprocal"})
    check(IN(0, "2x3"),
          std::string("  %y = smp.") + op + " %a0 : " T("2x3"), T("2x3"), 0.5,
          1.5);
  check(IN(0, "2x3"),
        "  %y = smp.gelu %a0 {approximate = #smp<gelu_approximation tanh>} : " T("2x3"),
        T("2x3"));
  check(IN(0, "2x3"), "  %y = smp.leaky_relu %a0 {alpha = 0.1 : f32} : " T("2x3"),
        T("2x3"));
  // The same mask drawn again on dy (a function of its key, not stored).
  check(IN(0, "4x6"),
        "  %y = smp.dropout %a0 {ratio = 0.5 : f32, stream = 3 : i64, "
        "samples = 4 : i64} : " T("4x6"),
        T("4x6"));
}

TEST_F(GradientCheck, MatMul) {
  check(IN(0, "2x3x4") ", " IN(1, "4x5"),
        "  %y = smp.matmul %a0, %a1 : (" T("2x3x4") ", " T("4x5") ") -> " T("2x3x5"),
        T("2x3x5"));
  check(IN(0, "3x4") ", " IN(1, "5x4"),
        "  %y = smp.matmul %a0, %a1 {transpose_rhs = true} : (" T("3x4") ", " T("5x4") ") -> " T("3x5"),
        T("3x5"));
  check(IN(0, "4x3") ", " IN(1, "4x5"),
        "  %y = smp.matmul %a0, %a1 {transpose_lhs = true} : (" T("4x3") ", " T("4x5") ") -> " T("3x5"),
        T("3x5"));
  check(IN(0, "4") ", " IN(1, "2x4x3"),
        "  %y = smp.matmul %a0, %a1 : (" T("4") ", " T("2x4x3") ") -> " T("2x3"),
        T("2x3"));
}

TEST_F(GradientCheck, ReductionsAndSoftmax) {
  check(IN(0, "2x3x4"),
        "  %y = smp.reduce_sum %a0 {axes = array<i64: 1>} : " T("2x3x4") " -> " T("2x1x4"),
        T("2x1x4"));
  check(IN(0, "2x3x4"),
        "  %y = smp.reduce_mean %a0 {axes = array<i64: 0, 2>, keepdims = false} : " T("2x3x4") " -> " T("3"),
        T("3"));
  check(IN(0, "2x3x4"),
        "  %y = smp.reduce_max %a0 {axes = array<i64: -1>} : " T("2x3x4") " -> " T("2x3x1"),
        T("2x3x1"));
  check(IN(0, "2x5"), "  %y = smp.softmax %a0 {axis = -1 : i64} : " T("2x5"),
        T("2x5"));
  check(IN(0, "3x2"), "  %y = smp.log_softmax %a0 {axis = 0 : i64} : " T("3x2"),
        T("3x2"));
}

TEST_F(GradientCheck, Norms) {
  check(IN(0, "2x3x4") ", " IN(1, "4") ", " IN(2, "4"),
        "  %y = smp.layer_norm %a0, %a1, %a2 {axis = -1 : i64, epsilon = 1.0e-5 : f32} : (" T("2x3x4") ", " T("4") ", " T("4") ") -> " T("2x3x4"),
        T("2x3x4"));
  check(IN(0, "2x3x4") ", " IN(1, "3x4"),
        "  %y = smp.layer_norm %a0, %a1 {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (" T("2x3x4") ", " T("3x4") ") -> " T("2x3x4"),
        T("2x3x4"));
  check(IN(0, "2x3x4") ", " IN(1, "4"),
        "  %y = smp.rms_norm %a0, %a1 {epsilon = 1.0e-6 : f32} : (" T("2x3x4") ", " T("4") ") -> " T("2x3x4"),
        T("2x3x4"));
  check(IN(0, "2x3x2x2") ", " IN(1, "3") ", " IN(2, "3") ", " IN(3, "3") ", " IN(4, "3"),
        "  %y = smp.batch_norm %a0, %a1, %a2, %a3, %a4 {epsilon = 1.0e-5 : f32} : (" T("2x3x2x2") ", " T("3") ", " T("3") ", " T("3") ", " T("3") ") -> " T("2x3x2x2"),
        T("2x3x2x2"), 0.5, 1.5, 1e-6);
}

TEST_F(GradientCheck, CrossEntropy) {
  for (const char *red : {"mean", "sum", "none"}) {
    bool none = std::string(red) == "none";
    check(IN(0, "2x3x5"),
          std::string("  %l = smp.constant dense<[[1, -100, 4], [0, 2, 2]]> : tensor<2x3xi64>\n"
                      "  %y = smp.cross_entropy %a0, %l {reduction = #smp<reduction ") +
              red + ">} : (" T("2x3x5") ", tensor<2x3xi64>) -> " +
              (none ? T("2x3") : "tensor<f64>"),
          none ? T("2x3") : "tensor<f64>");
  }
  check(IN(0, "2x3x5") ", " IN(1, "5"),
        "  %l = smp.constant dense<[[1, -100, 4], [0, 2, 2]]> : tensor<2x3xi64>\n"
        "  %y = smp.cross_entropy %a0, %l, %a1 : (" T("2x3x5") ", tensor<2x3xi64>, " T("5") ") -> tensor<f64>",
        "tensor<f64>", 0.5, 1.5, 1e-6, {1});
}

TEST_F(GradientCheck, DataMovement) {
  check(IN(0, "2x3x4"),
        "  %y = smp.transpose %a0 {perm = array<i64: 2, 0, 1>} : " T("2x3x4") " -> " T("4x2x3"),
        T("4x2x3"));
  check(IN(0, "2x3x4"),
        "  %y = smp.reshape %a0 : " T("2x3x4") " -> " T("6x4"), T("6x4"));
  check(IN(0, "1x3"), "  %y = smp.expand %a0 : " T("1x3") " -> " T("4x3"),
        T("4x3"));
  // Tile: every copy's gradient summed (a size-1 dim repeated too).
  check(IN(0, "2x1x3"),
        "  %y = smp.tile %a0 {repeats = array<i64: 2, 3, 1>} : " T("2x1x3") " -> " T("4x3x3"),
        T("4x3x3"));
  check(IN(0, "3x2"),
        "  %y = smp.tile %a0 {repeats = array<i64: 1, 4>} : " T("3x2") " -> " T("3x8"),
        T("3x8"));
  check(IN(0, "5x4"),
        "  %y = smp.slice %a0 {starts = array<i64: 4, 1>, limits = array<i64: -1, 4>, steps = array<i64: -2, 2>} : " T("5x4") " -> " T("3x2"),
        T("3x2"));
  check(IN(0, "2x3") ", " IN(1, "2x1"),
        "  %y = smp.concat %a0, %a1 {axis = 1 : i64} : (" T("2x3") ", " T("2x1") ") -> " T("2x4"),
        T("2x4"));
  check(IN(0, "2x5"),
        "  %p:2 = smp.split %a0 {axis = 1 : i64, sizes = array<i64: 2, 3>} : " T("2x5") " -> " T("2x2") ", " T("2x3") "\n"
        "  %y = smp.mul %p#1, %p#1 : (" T("2x3") ", " T("2x3") ") -> " T("2x3"),
        T("2x3"));
  check(IN(0, "4x3"),
        "  %i = smp.constant dense<[[3, 0], [3, -1]]> : tensor<2x2xi64>\n"
        "  %y = smp.gather %a0, %i {axis = 0 : i64} : (" T("4x3") ", tensor<2x2xi64>) -> " T("2x2x3"),
        T("2x2x3"));
  // Index tuples with a batch dim and a repeated tuple; elements along
  // axis 1 with repeated and negative indices.
  check(IN(0, "2x3x4"),
        "  %i = smp.constant dense<[[[2], [0], [2]], [[-1], [1], [0]]]> : tensor<2x3x1xi64>\n"
        "  %y = smp.gather_nd %a0, %i {batch_dims = 1 : i64} : (" T("2x3x4") ", tensor<2x3x1xi64>) -> " T("2x3x4"),
        T("2x3x4"));
  check(IN(0, "3x4"),
        "  %i = smp.constant dense<[[3, 3, -1], [0, 1, 0]]> : tensor<2x3xi32>\n"
        "  %y = smp.gather_elements %a0, %i {axis = 1 : i64} : (" T("3x4") ", tensor<2x3xi32>) -> " T("2x3"),
        T("2x3"));
  check(IN(0, "3x3"),
        "  %y = smp.trilu %a0 {upper = false, k = 0 : i64} : " T("3x3"), T("3x3"));
  check(IN(0, "2x3") ", " IN(1, "2x3"),
        "  %z = smp.constant dense<0.0> : tensor<f64>\n"
        "  %c = smp.greater %a0, %z : (" T("2x3") ", tensor<f64>) -> tensor<2x3xi1>\n"
        "  %y = smp.where %c, %a0, %a1 : (tensor<2x3xi1>, " T("2x3") ", " T("2x3") ") -> " T("2x3"),
        T("2x3"));
  check(IN(0, "2x3"),
        "  %c = smp.cast %a0 : " T("2x3") " to tensor<2x3xf32>\n"
        "  %y = smp.cast %c : tensor<2x3xf32> to " T("2x3"),
        T("2x3"), -1.5, 1.5, 1e-3, {}, /*h=*/1e-2); // f32 round trip
}

TEST_F(GradientCheck, ConvAndPool) {
  check(IN(0, "2x4x5x5") ", " IN(1, "6x2x3x3") ", " IN(2, "6"),
        "  %y = smp.conv %a0, %a1, %a2 {strides = array<i64: 2, 1>, pads = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 2>, group = 2 : i64} : (" T("2x4x5x5") ", " T("6x2x3x3") ", " T("6") ") -> " T("2x6x2x2"),
        T("2x6x2x2"));
  check(IN(0, "1x2x5x5"),
        "  %y = smp.max_pool %a0 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true} : " T("1x2x5x5") " -> " T("1x2x3x3"),
        T("1x2x3x3"));
  for (const char *countPad : {"false", "true"})
    check(IN(0, "1x2x5x5"),
          std::string("  %y = smp.avg_pool %a0 {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad = ") +
              countPad + "} : " T("1x2x5x5") " -> " T("1x2x3x3"),
          T("1x2x3x3"));
}

} // namespace
