//===- CudaTrainingTest.cpp - CUDA gradients vs the CPU -------------------===//

#include "CudaTestUtil.h"

namespace smp_cuda_test {
namespace {

TEST_F(Cuda, GeluGrad) {
  unsigned seed = 300;
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (bool approx : {false, true}) {
      SCOPED_TRACE(std::string(name(t)) + (approx ? " tanh" : " exact"));
      Host x = random(t, {7, 13}, -5, 5, seed++);
      Host dy = random(DType::F32, {7, 13}, -1, 1, seed++), want(t, {7, 13});
      ASSERT_OK(cpuk::geluGrad(x, dy, approx, want));
      Dev dx(x), ddy(dy), dout(t, {7, 13});
      ASSERT_OK(cuk::geluGrad(dx, ddy, approx, dout));
      expectTol(dout, want);
    }
  // f16/bf16 throughout: whole 16-byte vectors (geluGradVec, f32 compute)
  // and a shape that is not (the generic kernel). dy up to 50: the two
  // forms' derivatives differ by up to 8.7e-4 (at x = -2, where the
  // derivative is -0.085), which f16's tolerance then tells apart.
  for (DType t : {DType::F16, DType::BF16})
    for (std::vector<int64_t> shape : {std::vector<int64_t>{6, 64}, {7, 13}})
      for (bool approx : {false, true}) {
        SCOPED_TRACE(std::string(name(t)) + (approx ? " tanh " : " exact ") +
                     smp::base::describe(make(t, shape)));
        Host x = random(t, shape, -5, 5, seed++);
        Host dy = random(t, shape, -50, 50, seed++), want(t, shape);
        ASSERT_OK(cpuk::geluGrad(x, dy, approx, want));
        Dev dx(x), ddy(dy), dout(t, shape);
        ASSERT_OK(cuk::geluGrad(dx, ddy, approx, dout));
        expectTol(dout, want);
      }
}

/// smp-fuse-backward's kernels: bias_gelu_grad and the norm gradients with
/// a residual, against the CPU's.
TEST_F(Cuda, BiasGeluGradAndNormGradResidual) {
  unsigned seed = 360;
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{3, 7, 40}, {600, 96}, {2, 1100}}) {
      SCOPED_TRACE(std::string(name(t)) + " " +
                   smp::base::describe(make(t, shape)));
      int64_t n = shape.back();
      Host x = random(t, shape, -4, 4, seed++), dy = random(t, shape, -1, 1, seed++);
      Host dx(t, shape), db(t, {n});
      ASSERT_OK(cpuk::biasGeluGrad(x, dy, true, dx, db));
      Dev gx(x), gdy(dy), gdx(t, shape), gdb(t, {n});
      ASSERT_OK(cuk::biasGeluGrad(gx, gdy, true, gdx, gdb));
      expectTol(gdx, dx);
      expectTol(gdb, db, true);

      Host r = random(t, shape, -2, 2, seed++), w = random(t, {n}, 0.5, 1.5, seed++);
      Host lx(t, shape), lw(t, {n}), lb(t, {n}), rx(t, shape), rw(t, {n});
      ASSERT_OK(cpuk::layerNormGrad(x, w, dy, -1, 1e-5f, lx, lw, lb, &r.ref));
      ASSERT_OK(cpuk::rmsNormGrad(x, w, dy, 1e-6f, rx, rw, &r.ref));
      Dev gr(r), gw(w), glx(t, shape), glw(t, {n}), glb(t, {n}),
          grx(t, shape), grw(t, {n});
      TensorRef res = gr;
      ASSERT_OK(cuk::layerNormGrad(gx, gw, gdy, -1, 1e-5f, glx, glw, glb, &res));
      ASSERT_OK(cuk::rmsNormGrad(gx, gw, gdy, 1e-6f, grx, grw, &res));
      expectTol(glx, lx, true);
      expectTol(glw, lw, true);
      expectTol(grx, rx, true);
      expectTol(grw, rw, true);
    }
}

/// smp-fuse-matmul-bias's kernels: the bias added in cuBLASLt's epilogue
/// (f32, f16, bf16; batched, broadcast and folded products; [N] and
/// [1, 1, N] biases) or by the add kernel after the product (f64, which
/// the emulator's cuBLASLt has no bias epilogue for), against the CPU's;
/// and matmul_bias_add and matmul_add, their addend read as cuBLASLt's C.
TEST_F(Cuda, MatMulBias) {
  struct Case {
    std::vector<int64_t> a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{3, 7, 40}, {96, 40}, false, true}, {{600, 96}, {96, 24}, false, false},
      {{4, 5, 7}, {4, 7, 3}, false, false}, {{7, 5}, {7, 3}, true, false},
      {{2, 1, 5, 7}, {1, 3, 3, 7}, false, true}, {{5, 7}, {4, 7, 3}, false, false},
      {{5, 0}, {0, 3}, false, false},
  };
  unsigned seed = 420;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64})
    for (const Case &c : cases)
      for (bool keepDims : {false, true}) {
        Host a = random(t, c.a, -1, 1, seed++), b = random(t, c.b, -1, 1, seed++);
        Host probe(t, {1});
        // The output's shape: the CPU's matmul says it (a wrong one fails).
        std::vector<int64_t> shape;
        for (size_t i = 0; i + 2 < std::max(c.a.size(), c.b.size()); ++i) {
          auto dim = [&](const std::vector<int64_t> &s) {
            size_t off = std::max(c.a.size(), c.b.size()) - s.size();
            return i < off ? int64_t(1) : s[i - off];
          };
          shape.push_back(std::max(dim(c.a), dim(c.b)));
        }
        int64_t m = c.ta ? c.a.back() : c.a[c.a.size() - 2];
        int64_t n = c.tb ? c.b[c.b.size() - 2] : c.b.back();
        shape.push_back(m);
        shape.push_back(n);
        std::vector<int64_t> biasShape(keepDims ? shape.size() : 1, 1);
        biasShape.back() = n;
        SCOPED_TRACE(std::string(name(t)) + " " +
                     smp::base::describe(make(t, c.a)) + " x " +
                     smp::base::describe(make(t, c.b)) + " + " +
                     smp::base::describe(make(t, biasShape)));
        Host bias = random(t, biasShape, -2, 2, seed++), want(t, shape);
        ASSERT_OK(cpuk::matmulBias(a, b, bias, want, c.ta, c.tb));
        Dev da(a), db(b), dbias(bias), dout(t, shape);
        ASSERT_OK(cuk::matmulBias(da, db, dbias, dout, c.ta, c.tb));
        expectTol(dout, want, true);
        // matmul_bias_add: the addend read as cuBLASLt's C (the batched
        // calls' C at D's offsets).
        Host addend = random(t, shape, -2, 2, seed++), want2(t, shape);
        ASSERT_OK(cpuk::matmulBiasAdd(a, b, bias, addend, want2, c.ta, c.tb));
        Dev daddend(addend), dout2(t, shape);
        ASSERT_OK(
            cuk::matmulBiasAdd(da, db, dbias, daddend, dout2, c.ta, c.tb));
        expectTol(dout2, want2, true);
        // matmul_add: the addend as C without a bias epilogue.
        Host want3(t, shape);
        ASSERT_OK(cpuk::matmulAdd(a, b, addend, want3, c.ta, c.tb));
        Dev dout3(t, shape);
        ASSERT_OK(cuk::matmulAdd(da, db, daddend, dout3, c.ta, c.tb));
        expectTol(dout3, want3, true);
      }
  // An addend of another shape is refused by name.
  {
    Host a = random(DType::F32, {4, 8}, -1, 1, 3),
         b = random(DType::F32, {8, 6}, -1, 1, 4);
    Dev da(a), db(b), dbias(Host(DType::F32, {6})),
        dadd(Host(DType::F32, {1, 6})), dout(DType::F32, {4, 6});
    Status s = cuk::matmulBiasAdd(da, db, dbias, dadd, dout, false, false);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error.find("matmul_bias_add: addend"), std::string::npos)
        << s.error;
  }
  // A bias of another width is refused by name.
  Host a = random(DType::F32, {4, 8}, -1, 1, 1), b = random(DType::F32, {8, 6}, -1, 1, 2);
  Dev da(a), db(b), dbias(Host(DType::F32, {5})), dout(DType::F32, {4, 6});
  Status s = cuk::matmulBias(da, db, dbias, dout, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("one element per column"), std::string::npos) << s.error;
}

/// matmul_bias_gelu and matmul_gelu_grad against the CPU's: cuBLASLt's
/// GELU_AUX_BIAS and DGELU_BGRAD epilogues where the product is one call
/// with N a multiple of 8 (a plain product, a batch folded into M), and the
/// separate kernels elsewhere (N of 12; a batched rhs: several products).
TEST_F(Cuda, GeluEpiloguesAreTheCpus) {
  struct Case {
    std::vector<int64_t> a, b;
    bool tb;
  };
  const Case cases[] = {{{600, 96}, {96, 24}, false},
                        {{3, 7, 40}, {96, 40}, true},
                        {{4, 9, 16}, {16, 12}, false},
                        {{4, 5, 7}, {4, 7, 8}, false}};
  unsigned seed = 520;
  for (DType t : {DType::F16, DType::BF16})
    for (const Case &c : cases) {
      std::vector<int64_t> out = c.a;
      out.back() = c.tb ? c.b[c.b.size() - 2] : c.b.back();
      std::vector<int64_t> bs = {out.back()};
      SCOPED_TRACE(std::string(name(t)) + " " +
                   smp::base::describe(make(t, c.a)) + " x " +
                   smp::base::describe(make(t, c.b)));
      Host a = random(t, c.a, -1, 1, seed++), b = random(t, c.b, -1, 1, seed++);
      Host bias = random(t, bs, -1, 1, seed++),
           x = random(t, out, -3, 3, seed++);
      Host result(t, out), pre(t, out), dx(t, out), db(t, bs);
      ASSERT_OK(cpuk::matmulBiasGelu(a, b, bias, result, pre, false, c.tb));
      ASSERT_OK(cpuk::matmulGeluGrad(a, b, x, dx, db, false, c.tb));
      Dev da(a), dbm(b), dbias(bias), dx0(x), gresult(t, out), gpre(t, out),
          gdx(t, out), gdb(t, bs);
      ASSERT_OK(
          cuk::matmulBiasGelu(da, dbm, dbias, gresult, gpre, false, c.tb));
      ASSERT_OK(cuk::matmulGeluGrad(da, dbm, dx0, gdx, gdb, false, c.tb));
      for (auto [got, want, what] : {std::tuple(&gresult, &result, "result"),
                                     std::tuple(&gpre, &pre, "preactivation"),
                                     std::tuple(&gdx, &dx, "input_grad")}) {
        SCOPED_TRACE(what);
        expectTol(*got, *want, true);
      }
      // The bias gradient sums input_grad's columns, whose elements may
      // differ by an ulp (the separate kernels round the product first):
      // within two ulps of the largest column's sum of magnitudes.
      double colAbs = 0;
      for (int64_t j = 0; j < out.back(); ++j) {
        double sum = 0;
        for (int64_t i = j; i < dx.numel(); i += out.back())
          sum += std::fabs(dx.get(i));
        colAbs = std::max(colAbs, sum);
      }
      SCOPED_TRACE("bias_grad");
      expectClose(gdb, db, 0,
                  colAbs * (t == DType::BF16 ? 1.0 / 128 : 1.0 / 1024));
    }
  // f32 operands are refused by name.
  Host a = random(DType::F32, {4, 8}, -1, 1, 1),
       b = random(DType::F32, {8, 8}, -1, 1, 2);
  Dev da(a), db(b), dbias(Host(DType::F32, {8})), dout(DType::F32, {4, 8});
  Status s = cuk::matmulBiasGelu(da, db, dbias, dout, dout, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("takes f16 or bf16"), std::string::npos) << s.error;
}

/// matmul_bias_grad against the CPU's: cuBLASLt's BGRADB epilogue sums the
/// bias gradient (the emulator in double, as reduce does: the same bits).
TEST_F(Cuda, MatMulBiasGradIsTheCpus) {
  unsigned seed = 620;
  for (DType t : {DType::F16, DType::BF16})
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{16, 8, 24},
                           {600, 96, 40},
                           {3, 36, 5}}) {
      SCOPED_TRACE(std::string(name(t)) + " " + std::to_string(m) + "x" +
                   std::to_string(n) + "x" + std::to_string(k));
      Host g = random(t, {m, n}, -1, 1, seed++),
           x = random(t, {m, k}, -1, 1, seed++);
      Host w(t, {n, k}), b(t, {n});
      ASSERT_OK(cpuk::matmulBiasGrad(g, x, w, b));
      Dev dg(g), dx(x), dw(t, {n, k}), db(t, {n});
      ASSERT_OK(cuk::matmulBiasGrad(dg, dx, dw, db));
      expectTol(dw, w, true);
      expectTol(db, b, true);
    }
}

TEST_F(Cuda, LayerNormGradAndRmsNormGrad) {
  struct Case {
    std::vector<int64_t> x;
    int64_t axis;
    std::vector<int64_t> scale;
  };
  const Case cases[] = {{{8, 16}, 1, {16}},
                        {{2, 3, 8}, 1, {3, 8}},
                        {{2, 3, 8}, 1, {3, 1}},
                        {{2, 3, 8}, -1, {1}},
                        {{300, 64}, 1, {64}},
                        {{2, 1100}, 1, {1100}},
                        // Many rows, few columns: the parameters' gradients
                        // summed over chunks of rows (a tail; broadcast).
                        {{1300, 24}, 1, {24}},
                        {{4, 700, 40}, -1, {40}},
                        {{600, 3, 8}, 1, {3, 1}}};
  unsigned seed = 320;
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string("layer_norm_grad ") + name(t) + " " +
                   smp::base::describe(make(t, c.x)) + " scale " +
                   smp::base::describe(make(t, c.scale)));
      Host x = random(t, c.x, -2, 3, seed++);
      Host scale = random(DType::F32, c.scale, 0.5, 1.5, seed++);
      Host dy = random(t, c.x, -1, 1, seed++);
      Host dx(t, c.x), ds(t, c.scale), db(t, c.scale);
      ASSERT_OK(cpuk::layerNormGrad(x, scale, dy, c.axis, 1e-5f, dx, ds, db));
      Dev gx(x), gscale(scale), gdy(dy), gdx(t, c.x), gds(t, c.scale),
          gdb(t, c.scale);
      ASSERT_OK(cuk::layerNormGrad(gx, gscale, gdy, c.axis, 1e-5f, gdx, gds,
                                   gdb));
      expectTol(gdx, dx, true);
      expectTol(gds, ds, true);
      expectTol(gdb, db, true);
    }
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{6, 32}, {2, 3, 40}, {2, 1500}, {1200, 16}}) {
      for (bool broadcastScale : {false, true}) {
        SCOPED_TRACE(std::string("rms_norm_grad ") + name(t) + " " +
                     smp::base::describe(make(t, shape)));
        std::vector<int64_t> ss{broadcastScale ? 1 : shape.back()};
        Host x = random(t, shape, -2, 2, seed++);
        Host scale = random(t, ss, 0.5, 1.5, seed++);
        Host dy = random(t, shape, -1, 1, seed++);
        Host dx(t, shape), ds(t, ss);
        ASSERT_OK(cpuk::rmsNormGrad(x, scale, dy, 1e-6f, dx, ds));
        Dev gx(x), gscale(scale), gdy(dy), gdx(t, shape), gds(t, ss);
        ASSERT_OK(cuk::rmsNormGrad(gx, gscale, gdy, 1e-6f, gdx, gds));
        expectTol(gdx, dx, true);
        expectTol(gds, ds, true);
      }
    }
}

TEST_F(Cuda, CrossEntropyGrad) {
  using Red = cuk::Reduction;
  unsigned seed = 340;
  for (DType t : {DType::F32, DType::BF16})
    for (Red red : {Red::None, Red::Sum, Red::Mean})
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(std::string(name(t)) + " reduction " +
                     std::to_string(int(red)) + (weighted ? " weighted" : ""));
        int64_t rows = 9, classes = 700;
        Host logits = random(t, {rows, classes}, -3, 3, seed++);
        Host labels = random(DType::I64, {rows}, 0, double(classes), seed++);
        labels.set(2, -100);
        Host w = random(DType::F32, {classes}, 0.5, 2, seed++);
        Host g = red == Red::None ? random(DType::F32, {rows}, -1, 1, seed++)
                                  : make(DType::F32, {}, {0.75});
        Host want(t, {rows, classes});
        ASSERT_OK(cpuk::crossEntropyGrad(
            logits, labels, weighted ? &w.ref : nullptr, g, -100,
            static_cast<cpuk::Reduction>(red), want));
        Dev dl(logits), dlab(labels), dw(w), dg(g), dout(t, {rows, classes});
        ASSERT_OK(cuk::crossEntropyGrad(dl, dlab, weighted ? dw.ptr() : nullptr,
                                        dg, -100, red, dout));
        expectTol(dout, want, true);
      }
  Host logits = random(DType::F32, {2, 3}, -1, 1, 1);
  Host labels = make(DType::I32, {2}, {1, 7}), g = make(DType::F32, {}, {1});
  Dev dl(logits), dlab(labels), dg(g), dout(DType::F32, {2, 3});
  ASSERT_OK(cuk::crossEntropyGrad(dl, dlab, nullptr, dg, -100, Red::Mean, dout));
  expectDeviceError("cross_entropy_grad: label 7 at position 1");
}

// smp-pad-classes: rows of 704 values of which 700 are logits (NaN past
// them: any read of the padding would show), the loss and gradient as the
// CPU's with `classes`, zero written over the padding; also written over
// the logits (the writer's in-place sharing).
TEST_F(Cuda, CrossEntropyPaddedRowsAreTheCpus) {
  using Red = cuk::Reduction;
  unsigned seed = 360;
  int64_t rows = 9, classes = 700, stride = 704;
  for (DType t : {DType::F32, DType::BF16})
    for (Red red : {Red::None, Red::Mean}) {
      SCOPED_TRACE(std::string(name(t)) + " reduction " +
                   std::to_string(int(red)));
      Host logits = random(t, {rows, stride}, -3, 3, seed++);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = classes; c < stride; ++c)
          logits.set(r * stride + c, std::numeric_limits<double>::quiet_NaN());
      Host labels = random(DType::I64, {rows}, 0, double(classes), seed++);
      labels.set(2, -100);
      Host w = random(DType::F32, {classes}, 0.5, 2, seed++);
      std::vector<int64_t> oshape = red == Red::None
                                        ? std::vector<int64_t>{rows}
                                        : std::vector<int64_t>{};
      Host loss(t, oshape);
      auto cred = static_cast<cpuk::Reduction>(red);
      ASSERT_OK(cpuk::crossEntropy(logits, labels, -100, cred, loss, &w.ref,
                                   classes));
      Dev dl(logits), dlab(labels), dw(w), dloss(t, oshape);
      ASSERT_OK(
          cuk::crossEntropy(dl, dlab, -100, red, dloss, dw.ptr(), classes));
      expectTol(dloss, loss, true);
      Host g = red == Red::None ? random(DType::F32, {rows}, -1, 1, seed++)
                                : make(DType::F32, {}, {0.75});
      Host want(t, {rows, stride}), sevens(t, {rows, stride});
      for (int64_t i = 0; i < sevens.numel(); ++i)
        sevens.set(i, 7);
      ASSERT_OK(cpuk::crossEntropyGrad(logits, labels, &w.ref, g, -100, cred,
                                       want, classes));
      Dev dg(g), dout(sevens);
      ASSERT_OK(cuk::crossEntropyGrad(dl, dlab, dw.ptr(), dg, -100, red, dout,
                                      classes));
      expectTol(dout, want, true);
      Host got = dout.download();
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_EQ(got.get(r * stride + classes + 1), 0.0) << "row " << r;
      Dev inPlace(logits); // the gradient over the logits: the same
      ASSERT_OK(cuk::crossEntropyGrad(inPlace, dlab, dw.ptr(), dg, -100, red,
                                      inPlace, classes));
      expectTol(inPlace, want, true);
    }
  // A label in the padding is outside the classes.
  Host logits = random(DType::F32, {2, 8}, -1, 1, 1);
  Host labels = make(DType::I64, {2}, {1, 6}), g = make(DType::F32, {}, {1});
  Dev dl(logits), dlab(labels), dg(g), dout(DType::F32, {2, 8});
  ASSERT_OK(
      cuk::crossEntropyGrad(dl, dlab, nullptr, dg, -100, Red::Mean, dout, 6));
  expectDeviceError(
      "cross_entropy_grad: label 6 at position 1 is outside [0, 6)");
}

/// smp-fuse-sum-squares: the gradient norm's sum of squares over many
/// tensors (150, sizes from a scalar to many chunks' worth, whole chunks
/// read 16 bytes at a time and tails; f32 with bf16 and f16 among them, as
/// smp-fuse-grad-casts leaves them; an empty one), against the CPU's.
TEST_F(Cuda, SumSquares) {
  std::vector<Host> xs;
  std::vector<std::unique_ptr<Dev>> ds;
  std::vector<TensorRef> hrefs, drefs;
  for (unsigned i = 0; i < 150; ++i) {
    std::vector<int64_t> shape =
        i == 7       ? std::vector<int64_t>{300000}  // f32
        : i == 9     ? std::vector<int64_t>{2, 8200} // f16
        : i == 11    ? std::vector<int64_t>{3, 8197} // bf16
        : i == 13    ? std::vector<int64_t>{0, 4}    // empty
        : i % 3 == 0 ? std::vector<int64_t>{}
                     : std::vector<int64_t>{3, 50 + 7 * int64_t(i)};
    DType t = i % 5 == 1 ? DType::BF16 : i % 7 == 2 ? DType::F16 : DType::F32;
    xs.push_back(random(t, shape, -2, 2, 500 + i));
  }
  for (const Host &x : xs) {
    hrefs.push_back(x.ref);
    ds.push_back(std::make_unique<Dev>(x));
    drefs.push_back(*ds.back());
  }
  Host want(DType::F32, {});
  ASSERT_OK(cpuk::sumSquares(hrefs, want));
  Dev got(DType::F32, {});
  ASSERT_OK(cuk::sumSquares(drefs, got));
  expectTol(got, want, true);
}

/// cast_multi (smp-multi-tensor's casts of the parameters): the bytes of
/// the CPU's cast of each tensor, one of them over several chunks, one
/// empty, in one launch.
TEST_F(Cuda, CastMultiIsEachCast) {
  const std::pair<DType, DType> pairs[] = {{DType::F32, DType::BF16},
                                           {DType::F32, DType::F16},
                                           {DType::BF16, DType::F32},
                                           {DType::F64, DType::F32}};
  std::vector<Host> wants;
  std::vector<std::unique_ptr<Dev>> ins, outs;
  std::vector<TensorRef> inRefs, outRefs;
  for (int i = 0; i < 30; ++i) {
    auto [from, to] = pairs[i % 4];
    std::vector<int64_t> shape = i == 5    ? std::vector<int64_t>{3, 8193}
                                 : i == 11 ? std::vector<int64_t>{0}
                                           : std::vector<int64_t>{i + 1, 7};
    Host x = random(from, shape, -3, 3, 900 + i);
    wants.emplace_back(to, shape);
    ASSERT_OK(cpuk::cast(x, wants.back()));
    ins.push_back(std::make_unique<Dev>(x));
    outs.push_back(std::make_unique<Dev>(to, shape));
    inRefs.push_back(*ins.back());
    outRefs.push_back(*outs.back());
  }
  ASSERT_OK(cuk::castMulti(inRefs, outRefs));
  for (size_t i = 0; i < wants.size(); ++i) {
    SCOPED_TRACE("tensor " + std::to_string(i));
    expectSameBytes(*outs[i], wants[i]);
  }
  outRefs.pop_back();
  EXPECT_EQ(cuk::castMulti(inRefs, outRefs).error,
            "cast_multi: 30 inputs but 29 outputs");
}

/// add_multi (smp-multi-tensor's accumulation of 16-bit gradients over
/// micro-batches): the bytes of the CPU's, pairs of several chunks, one
/// empty, a sum over its f32 first operand, in one launch.
TEST_F(Cuda, AddMultiIsTheCpus) {
  const std::pair<DType, DType> types[] = {{DType::F32, DType::BF16},
                                           {DType::BF16, DType::BF16},
                                           {DType::F16, DType::F32},
                                           {DType::BF16, DType::F32}};
  std::vector<Host> wants;
  std::vector<std::unique_ptr<Dev>> ls, rs, outs;
  std::vector<const Dev *> sums;
  std::vector<TensorRef> lRefs, rRefs, outRefs;
  for (int i = 0; i < 30; ++i) {
    auto [lt, rt] = types[i % 4];
    std::vector<int64_t> shape = i == 4    ? std::vector<int64_t>{3, 8193}
                                 : i == 11 ? std::vector<int64_t>{0}
                                           : std::vector<int64_t>{i + 1, 7};
    Host l = random(lt, shape, -3, 3, 1300 + i);
    Host r = random(rt, shape, -3, 3, 1400 + i);
    wants.emplace_back(DType::F32, shape);
    ASSERT_OK(cpuk::addMulti({l.ref}, {r.ref}, {wants.back().ref}));
    ls.push_back(std::make_unique<Dev>(l));
    rs.push_back(std::make_unique<Dev>(r));
    lRefs.push_back(*ls.back());
    rRefs.push_back(*rs.back());
    if (lt == DType::F32) { // over its lhs, as the artifact shares them
      sums.push_back(ls.back().get());
    } else {
      outs.push_back(std::make_unique<Dev>(DType::F32, shape));
      sums.push_back(outs.back().get());
    }
    outRefs.push_back(*sums.back());
  }
  ASSERT_OK(cuk::addMulti(lRefs, rRefs, outRefs));
  for (size_t i = 0; i < wants.size(); ++i) {
    SCOPED_TRACE("pair " + std::to_string(i));
    expectSameBytes(*sums[i], wants[i]);
  }
  outRefs.pop_back();
  EXPECT_EQ(cuk::addMulti(lRefs, rRefs, outRefs).error,
            "add_multi: 30 lhs, 30 rhs but 29 outputs");
}

/// smp-fuse-loss-casts: the f32 loss of f16/bf16 logits, against the CPU's.
TEST_F(Cuda, CrossEntropyOfSixteenBitLogitsHasAnF32Loss) {
  using Red = cuk::Reduction;
  unsigned seed = 480;
  for (DType t : {DType::BF16, DType::F16})
    for (Red red : {Red::None, Red::Mean}) {
      SCOPED_TRACE(std::string(name(t)) + " reduction " + std::to_string(int(red)));
      int64_t rows = 9, classes = 700;
      Host logits = random(t, {rows, classes}, -3, 3, seed++);
      Host labels = random(DType::I64, {rows}, 0, double(classes), seed++);
      labels.set(4, -100);
      std::vector<int64_t> shape;
      if (red == Red::None)
        shape = {rows};
      Host want(DType::F32, shape);
      ASSERT_OK(cpuk::crossEntropy(logits, labels, -100,
                                   static_cast<cpuk::Reduction>(red), want));
      Dev dl(logits), dlab(labels), dout(DType::F32, shape);
      ASSERT_OK(cuk::crossEntropy(dl, dlab, -100, red, dout));
      expectTol(dout, want, true);
    }
  // Only f32, and only for 16-bit logits.
  Host logits = random(DType::F32, {2, 3}, -1, 1, 1);
  Host labels = make(DType::I64, {2}, {1, 2});
  Dev dl(logits), dlab(labels), dout(DType::F64, {});
  Status s = cuk::crossEntropy(dl, dlab, -100, Red::Mean, dout);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("output"), std::string::npos) << s.error;
}

/// gather_nd / gather_elements and their gradients against the CPU: with
/// batch dims, negative and repeated indices; bad indices are device errors.
TEST_F(Cuda, GatherNdAndGatherElements) {
  unsigned seed = 380;
  Host tuples = make(DType::I64, {2, 3, 1}, {2, 0, 2, -1, 1, 0});
  Host pairs = make(DType::I32, {3, 2}, {1, 1, -1, 0, 1, 1});
  Host cols = make(DType::I64, {2, 3, 3}, {0, 3, 3, -1, 2, 0, 3, 1, 1,
                                           2, 2, 0, 1, -4, 3, 0, 0, 1});
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::I64}) {
    SCOPED_TRACE(name(t));
    Host data = random(t, {2, 3, 4}, -9, 9, seed++);
    Host w1(t, {2, 3, 4}), w2(t, {3, 4}), w3(t, {2, 3, 3});
    ASSERT_OK(cpuk::gatherNd(data, tuples, 1, w1));
    ASSERT_OK(cpuk::gatherNd(data, pairs, 0, w2));
    ASSERT_OK(cpuk::gatherElements(data, cols, 2, w3));
    Dev dd(data), dt(tuples), dp(pairs), dc(cols), o1(t, {2, 3, 4}),
        o2(t, {3, 4}), o3(t, {2, 3, 3});
    ASSERT_OK(cuk::gatherNd(dd, dt, 1, o1));
    ASSERT_OK(cuk::gatherNd(dd, dp, 0, o2));
    ASSERT_OK(cuk::gatherElements(dd, dc, 2, o3));
    expectSameBytes(o1, w1);
    expectSameBytes(o2, w2);
    expectSameBytes(o3, w3);
    if (!smp::base::isFloat(t))
      continue;
    Host g1 = random(t, {2, 3, 4}, -1, 1, seed++), g3 = random(t, {2, 3, 3}, -1, 1, seed++);
    Host x1(t, {2, 3, 4}), x3(t, {2, 3, 4});
    ASSERT_OK(cpuk::gatherNdGrad(tuples, g1, 1, x1));
    ASSERT_OK(cpuk::gatherElementsGrad(cols, g3, 2, x3));
    Dev dg1(g1), dg3(g3), dx1(t, {2, 3, 4}), dx3(t, {2, 3, 4});
    ASSERT_OK(cuk::gatherNdGrad(dt, dg1, 1, dx1));
    ASSERT_OK(cuk::gatherElementsGrad(dc, dg3, 2, dx3));
    expectSameBytes(dx1, x1);
    expectSameBytes(dx3, x3);
  }
  {
    Host data = random(DType::F32, {2, 3}, -1, 1, 1);
    Host bad = make(DType::I64, {2, 2}, {1, 2, 1, 3});
    Dev dd(data), di(bad), out(DType::F32, {2});
    ASSERT_OK(cuk::gatherNd(dd, di, 0, out));
    expectDeviceError("gather_nd: index 3 at position 3 is out of range for axis 1 of size 3");
    Host cbad = make(DType::I32, {2, 2}, {0, 1, 2, -4});
    Dev dc(cbad), o2(DType::F32, {2, 2});
    ASSERT_OK(cuk::gatherElements(dd, dc, 1, o2));
    expectDeviceError("gather_elements: index -4 at position 3");
    Dev dx(DType::F32, {2, 3});
    ASSERT_OK(cuk::gatherElementsGrad(dc, o2, 1, dx));
    expectDeviceError("gather_elements_grad: index -4 at position 3");
  }
}

TEST_F(Cuda, GatherGradAndSliceGrad) {
  unsigned seed = 360;
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16})
    for (int64_t axis : {0, 1}) {
      SCOPED_TRACE(std::string("gather_grad ") + name(t) + " axis " +
                   std::to_string(axis));
      std::vector<int64_t> data{6, 5, 4};
      Host idx = make(DType::I64, {2, 4}, {0, 3, 3, -1, 2, 0, 3, 1});
      std::vector<int64_t> dyShape(data.begin(), data.begin() + axis);
      dyShape.insert(dyShape.end(), {2, 4});
      dyShape.insert(dyShape.end(), data.begin() + axis + 1, data.end());
      Host dy = random(t, dyShape, -1, 1, seed++), want(t, data);
      ASSERT_OK(cpuk::gatherGrad(idx, dy, axis, want));
      Dev di(idx), ddy(dy), dout(t, data);
      ASSERT_OK(cuk::gatherGrad(di, ddy, axis, dout));
      expectSameBytes(dout, want);
    }
  {
    Host idx = make(DType::I32, {2}, {0, 9}), dy = random(DType::F32, {2, 3}, -1, 1, 2);
    Dev di(idx), ddy(dy), dout(DType::F32, {4, 3});
    ASSERT_OK(cuk::gatherGrad(di, ddy, 0, dout));
    expectDeviceError("gather_grad: index 9 at position 1");
  }
  for (DType t : {DType::F32, DType::I64, DType::F16}) {
    SCOPED_TRACE(std::string("slice_grad ") + name(t));
    Host dy = random(t, {3, 3}, -9, 9, seed++), want(t, {5, 6});
    ASSERT_OK(cpuk::sliceGrad(dy, {4, 1}, {-2, 2}, want));
    Dev ddy(dy), dout(t, {5, 6});
    ASSERT_OK(cuk::sliceGrad(ddy, {4, 1}, {-2, 2}, dout));
    expectSameBytes(dout, want);
  }
}

TEST_F(Cuda, ConvGradAndPoolGrad) {
  struct ConvCase {
    std::vector<int64_t> x, w, strides, pads, dil;
    int64_t group;
  };
  const ConvCase convs[] = {
      {{2, 4, 7, 7}, {6, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 2},
      {{1, 3, 10}, {4, 3, 3}, {}, {}, {2}, 1},
      {{2, 3, 5, 6}, {5, 3, 1, 1}, {}, {}, {}, 1},
      {{1, 2, 6, 5}, {3, 2, 2, 3}, {2, 1}, {1, 0, 0, 2}, {1, 2}, 1},
  };
  unsigned seed = 380;
  for (DType t : {DType::F32, DType::F64})
    for (const ConvCase &c : convs) {
      SCOPED_TRACE(std::string("conv_grad ") + name(t) + " " +
                   smp::base::describe(make(t, c.x)));
      std::vector<int64_t> out = windowOutShape(
          c.x, c.w[0], std::vector<int64_t>(c.w.begin() + 2, c.w.end()),
          c.strides, c.pads, c.dil);
      Host x = random(t, c.x, -1, 1, seed++), w = random(t, c.w, -1, 1, seed++);
      Host dy = random(t, out, -1, 1, seed++);
      Host dx(t, c.x), dw(t, c.w);
      ASSERT_OK(cpuk::convGrad(x, w, dy, c.strides, c.pads, c.dil, c.group, dx,
                               dw));
      Dev gx(x), gw(w), gdy(dy), gdx(t, c.x), gdw(t, c.w);
      ASSERT_OK(cuk::convGrad(gx, gw, gdy, c.strides, c.pads, c.dil, c.group,
                              gdx, gdw));
      expectTol(gdx, dx, true);
      expectTol(gdw, dw, true);
    }
  struct PoolCase {
    std::vector<int64_t> x, y, kernel, strides, pads, dil;
  };
  const PoolCase pools[] = {
      {{2, 3, 7, 7}, {2, 3, 4, 4}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}},
      {{1, 2, 9}, {1, 2, 3}, {2}, {3}, {0, 1}, {2}},
      {{1, 1, 4, 4}, {1, 1, 3, 3}, {2, 2}, {}, {}, {}},
  };
  for (DType t : {DType::F32, DType::BF16})
    for (const PoolCase &c : pools)
      for (int kind = 0; kind < 3; ++kind) {
        SCOPED_TRACE(std::string("pool_grad ") + std::to_string(kind) + " " +
                     name(t) + " " + smp::base::describe(make(t, c.x)));
        Host x = random(t, c.x, -2, 2, seed++), dy = random(t, c.y, -1, 1, seed++);
        Host want(t, c.x);
        ASSERT_OK(cpuk::poolGrad(kind == 0, x, dy, c.kernel, c.strides, c.pads,
                                 c.dil, kind == 2, want));
        Dev gx(x), gdy(dy), gdx(t, c.x);
        ASSERT_OK(cuk::poolGrad(kind == 0, gx, gdy, c.kernel, c.strides, c.pads,
                                c.dil, kind == 2, gdx));
        expectTol(gdx, want, true);
      }
}

} // namespace
} // namespace smp_cuda_test
