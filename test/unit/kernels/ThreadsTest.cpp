//===- ThreadsTest.cpp - the same bytes for any thread count --------------===//
//
// Every threaded kernel gives bit-identical outputs for 1, 2, 3, 4 and 7
// threads (docs/architecture.md, "kernels/cpu"): GEMMs (one product, batches,
// transposes, broadcast batches, shapes with 8-/16-wide tails, both our own
// AVX2 kernel and OpenBLAS), convolutions forward and backward, and the
// other parallel loops. Each runs with our AVX2 code on and off; ctest runs
// the suite again with OPENBLAS_CORETYPE=Haswell (the AVX2 kernels of
// OpenBLAS, which an AVX2-only CPU such as Zen 3 gets) as Threads*.avx2.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "VecMath.h"
#include "smp/kernels/cpu/Training.h"

#include <functional>
#include <string>

namespace smp::kernels::cpu::test {
namespace {

constexpr int kThreadCounts[] = {2, 3, 4, 7};

/// Runs `run` (which returns its outputs) under 1 thread, then under each of
/// kThreadCounts, with our AVX2 code on and off, and expects the same bytes
/// every time.
void expectSameBytes(const std::string &what,
                     const std::function<std::vector<Host>()> &run) {
  int before = numThreads();
  for (bool simd : {true, false}) {
    detail::vecUseSimd(simd);
    setNumThreads(1);
    std::vector<Host> serial = run();
    for (int threads : kThreadCounts) {
      setNumThreads(threads);
      std::vector<Host> parallel = run();
      ASSERT_EQ(serial.size(), parallel.size());
      for (size_t i = 0; i < serial.size(); ++i) {
        ASSERT_EQ(serial[i].bytes.size(), parallel[i].bytes.size());
        EXPECT_EQ(0,
                  std::memcmp(serial[i].bytes.data(), parallel[i].bytes.data(),
                              serial[i].bytes.size()))
            << what << ": output " << i << " differs between 1 and " << threads
            << " threads (AVX2 code " << (simd ? "on" : "off") << ")";
      }
    }
  }
  detail::vecUseSimd(true);
  setNumThreads(before);
}

TEST(Threads, SetNumThreadsKeepsResults) {
  Host a = random(DType::F32, {300, 200}, -1, 1, 1);
  Host o1(DType::F32, {300, 200}), o2(DType::F32, {300, 200});
  int before = numThreads();
  setNumThreads(1);
  EXPECT_EQ(numThreads(), 1);
  ASSERT_OK(softmax(a, 1, o1));
  setNumThreads(before);
  ASSERT_OK(softmax(a, 1, o2));
  EXPECT_EQ(o1.bytes, o2.bytes);
}

/// Tile is a strided copy split over threads: the same bytes for any count.
TEST(Threads, TileSameBytesAnyThreadCount) {
  Host a = random(DType::F32, {3, 70, 33}, -1, 1, 7);
  expectSameBytes("tile", [&] {
    std::vector<Host> outs;
    outs.emplace_back(DType::F32, std::vector<int64_t>{6, 70, 99});
    EXPECT_OK(tile(a, {2, 1, 3}, outs.back()));
    return outs;
  });
}

/// Dropout draws each element's word from its global index: chunks that
/// start inside a draw window (a tp split's rows too) give the same bytes.
TEST(Threads, DropoutSameBytesAnyThreadCount) {
  Host a = random(DType::F32, {5, 33, 129}, -1, 1, 8);
  DropoutKey plain;
  plain.seed = 9, plain.step = 2, plain.stream = 1, plain.ratio = 0.3;
  plain.samples = 5;
  DropoutKey split = plain;
  split.tpDim = 2, split.tpParts = 3, split.tpIndex = 2;
  expectSameBytes("dropout", [&] {
    std::vector<Host> outs;
    for (const DropoutKey &k : {plain, split}) {
      outs.emplace_back(DType::F32, std::vector<int64_t>{5, 33, 129});
      EXPECT_OK(dropout(a, k, outs.back()));
    }
    return outs;
  });
}

struct MatMulCase {
  std::vector<int64_t> a, b;
  bool ta, tb;
};

/// Products of every kind gemmBatch splits: one product by rows or by
/// columns, batches that do and do not divide by the thread count, our own
/// kernel (k <= 128, m >= 24) and OpenBLAS (small m, k > 1024, transposed
/// lhs), sizes that are not multiples of 6, 8 or 16.
TEST(Threads, MatMulSameBytesAnyThreadCount) {
  const MatMulCase cases[] = {
      {{8, 144}, {144, 1024}, false, false},  // conv-like: 8 rows, columns
      {{37, 129}, {129, 300}, false, false},  // OpenBLAS by columns
      {{301, 77}, {77, 45}, false, false},    // own kernel by rows
      {{1000, 33}, {33, 7}, false, false},    // tall and thin
      {{257, 300}, {300, 255}, false, false}, // OpenBLAS by rows
      {{64, 1030}, {1030, 70}, false, false}, // k > 1024
      {{3, 130, 96}, {3, 96, 90}, false, false},
      {{3, 96, 130}, {96, 90}, true, false},
      {{3, 40, 96}, {3, 300, 96}, false, true},
      {{5, 61, 83}, {5, 83, 47}, false, false},
      {{4, 50, 64}, {64, 70}, false, false}, // batch folded into rows
      {{2, 3, 70, 64}, {2, 3, 64, 70}, false, false},
      {{9, 100, 64}, {9, 64, 100}, false, false}, // attention-like
      {{40, 31, 17}, {40, 17, 29}, false, false}, // many small products
      {{200, 300}, {250, 300}, false, true},
      {{300, 199}, {300, 211}, true, false},
  };
  unsigned seed = 100;
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (const MatMulCase &c : cases) {
      if (t == DType::BF16 && c.a.size() > 2)
        continue;
      Host a = random(t, c.a, -1, 1, seed++), b = random(t, c.b, -1, 1, seed++);
      int64_t m = c.ta ? c.a.back() : c.a[c.a.size() - 2];
      int64_t n = c.tb ? c.b[c.b.size() - 2] : c.b.back();
      std::vector<int64_t> shape(c.a.begin(), c.a.end() - 2);
      if (c.b.size() > c.a.size())
        shape.assign(c.b.begin(), c.b.end() - 2);
      shape.push_back(m);
      shape.push_back(n);
      expectSameBytes(smp::base::describe(a) + " x " + smp::base::describe(b),
                      [&] {
                        std::vector<Host> outs;
                        outs.emplace_back(t, shape);
                        EXPECT_OK(matmul(a, b, outs.back(), c.ta, c.tb));
                        return outs;
                      });
    }
}

struct ConvCase {
  std::vector<int64_t> x, w, strides, pads, dilations;
  int64_t group;
};

/// Convolutions (im2col + GEMM, and the 1x1 path) forward, then their
/// gradients with respect to input and weight.
TEST(Threads, ConvSameBytesAnyThreadCount) {
  const ConvCase cases[] = {
      {{1, 16, 32, 32}, {8, 16, 3, 3}, {}, {1, 1, 1, 1}, {}, 1},
      {{2, 5, 37, 29}, {7, 5, 3, 3}, {2, 2}, {1, 0, 1, 2}, {}, 1},
      {{2, 12, 20, 21}, {12, 4, 3, 3}, {}, {1, 1, 1, 1}, {}, 3},
      {{2, 24, 17, 19}, {40, 24, 1, 1}, {}, {}, {}, 1}, // pointwise
      {{3, 7, 301}, {9, 7, 5}, {}, {4, 4}, {2}, 1},     // 1-d, dilated
      {{1, 3, 45, 47}, {33, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {}, 1},
  };
  unsigned seed = 300;
  for (DType t : {DType::F32, DType::F64, DType::F16})
    for (const ConvCase &c : cases) {
      Host x = random(t, c.x, -1, 1, seed++), w = random(t, c.w, -1, 1, seed++);
      Host bias = random(t, {c.w[0]}, -1, 1, seed++);
      std::vector<int64_t> yShape = {c.x[0], c.w[0]};
      for (size_t d = 2; d < c.x.size(); ++d) {
        size_t s = d - 2, dims = c.x.size() - 2;
        int64_t stride = c.strides.empty() ? 1 : c.strides[s];
        int64_t dil = c.dilations.empty() ? 1 : c.dilations[s];
        int64_t pad = c.pads.empty() ? 0 : c.pads[s] + c.pads[s + dims];
        yShape.push_back((c.x[d] + pad - dil * (c.w[d] - 1) - 1) / stride + 1);
      }
      Host dy = random(t, yShape, -1, 1, seed++);
      expectSameBytes(
          smp::base::describe(x) + " conv " + smp::base::describe(w), [&] {
            std::vector<Host> outs;
            outs.reserve(4);
            outs.emplace_back(t, yShape);
            EXPECT_OK(conv(x, w, nullptr, c.strides, c.pads, c.dilations,
                           c.group, outs.back()));
            outs.emplace_back(t, yShape);
            EXPECT_OK(conv(x, w, &bias.ref, c.strides, c.pads, c.dilations,
                           c.group, outs.back()));
            if (t != DType::F16) {
              outs.emplace_back(t, c.x);
              Host &dx = outs.back();
              outs.emplace_back(t, c.w);
              EXPECT_OK(convGrad(x, w, dy, c.strides, c.pads, c.dilations,
                                 c.group, dx, outs.back()));
            }
            return outs;
          });
    }
}

/// Every other parallel loop (chunk boundaries land mid-row with 3 and 7).
TEST(Threads, ParallelLoopsMatchSerial) {
  Host x = random(DType::F32, {1000, 120}, -2, 2, 2);
  Host xi = random(DType::I32, {64, 64}, -5, 5, 3);
  Host cond = random(DType::Bool, {1000, 1}, 0, 2, 4);
  Host img = random(DType::F32, {1, 16, 32, 32}, -1, 1, 5);
  Host w = random(DType::F32, {8, 16, 3, 3}, -1, 1, 6);
  Host labels = random(DType::I64, {1000}, 0, 120, 7);
  Host idx = random(DType::I64, {500}, -1000, 1000, 8);
  Host scale = random(DType::F32, {120}, 0.5, 1.5, 9);
  expectSameBytes("parallel loops", [&] {
    std::vector<Host> outs;
    auto add = [&](DType t, std::vector<int64_t> shape) -> Host & {
      outs.emplace_back(t, std::move(shape));
      return outs.back();
    };
    outs.reserve(24);
    EXPECT_OK(reduce(ReduceOp::Sum, x, {1}, add(DType::F32, {1000})));
    EXPECT_OK(reduce(ReduceOp::Max, x, {0}, add(DType::F32, {120})));
    EXPECT_OK(reduce(ReduceOp::Sum, x, {0}, add(DType::F32, {120})));
    EXPECT_OK(
        layerNorm(x, scale, nullptr, 1, 1e-5f, add(DType::F32, {1000, 120})));
    EXPECT_OK(rmsNorm(x, scale, 1e-5f, add(DType::F32, {1000, 120})));
    Host x3 = x;
    x3.ref.shape = {10, 100, 120};
    EXPECT_OK(softmax(x3, 1, add(DType::F32, {10, 100, 120})));
    EXPECT_OK(transpose(x, {1, 0}, add(DType::F32, {120, 1000})));
    EXPECT_OK(cast(x, add(DType::BF16, {1000, 120})));
    EXPECT_OK(where(cond, x, scale, add(DType::F32, {1000, 120})));
    EXPECT_OK(gather(x, idx, 0, add(DType::F32, {500, 120})));
    EXPECT_OK(matmul(xi, xi, add(DType::I32, {64, 64})));
    EXPECT_OK(conv(img, w, nullptr, {}, {1, 1, 1, 1}, {}, 1,
                   add(DType::F32, {1, 8, 32, 32})));
    EXPECT_OK(avgPool(img, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, false, false,
                      add(DType::F32, {1, 16, 32, 32})));
    EXPECT_OK(crossEntropy(x, labels, -100, Reduction::None,
                           add(DType::F32, {1000})));
    EXPECT_OK(unary(UnaryOp::Gelu, x, add(DType::F32, {1000, 120})));
    EXPECT_OK(cumsum(x, 1, false, false, add(DType::F32, {1000, 120})));
    EXPECT_OK(cumsum(x, 0, true, true, add(DType::F32, {1000, 120})));
    EXPECT_OK(binary(BinaryOp::FMod, x, scale, add(DType::F32, {1000, 120})));
    Host rows = idx;
    rows.ref.shape = {500, 1};
    Host &picked = add(DType::F32, {500, 120});
    EXPECT_OK(gatherNd(x, rows, 0, picked));
    EXPECT_OK(gatherNdGrad(rows, picked, 0, add(DType::F32, {1000, 120})));
    Host cols = random(DType::I64, {1000, 120}, -120, 120, 10);
    EXPECT_OK(gatherElements(x, cols, 1, add(DType::F32, {1000, 120})));
    EXPECT_OK(gatherElementsGrad(cols, x, 1, add(DType::F32, {1000, 120})));
    return outs;
  });
}

/// The gradient kernels and optimizer updates: the norm gradients sum the
/// scale and bias gradients over row blocks fixed by the shape.
TEST(Threads, TrainingSameBytesAnyThreadCount) {
  Host x = random(DType::F32, {1000, 120}, -4, 4, 21);
  Host dy = random(DType::F32, {1000, 120}, -1, 1, 22);
  Host xh = random(DType::BF16, {1000, 120}, -4, 4, 23);
  Host scale = random(DType::F32, {120}, 0.5, 1.5, 24);
  Host labels = random(DType::I64, {1000}, 0, 120, 25);
  labels.set(10, -100);
  Host idx = random(DType::I64, {3000}, -50, 50, 26);
  Host rows = random(DType::F32, {3000, 120}, -1, 1, 27);
  Host dloss = make(DType::F32, {}, {1.0});
  expectSameBytes("training kernels", [&] {
    std::vector<Host> outs;
    auto add = [&](DType t, std::vector<int64_t> shape) -> Host & {
      outs.emplace_back(t, std::move(shape));
      return outs.back();
    };
    outs.reserve(24);
    EXPECT_OK(geluGrad(x, dy, true, add(DType::F32, {1000, 120})));
    Host &bx = add(DType::F32, {1000, 120});
    EXPECT_OK(biasGeluGrad(x, dy, true, bx, add(DType::F32, {120})));
    Host &fx = add(DType::F32, {1000, 120});
    EXPECT_OK(layerNormGrad(x, scale, dy, 1, 1e-5f, fx, add(DType::F32, {120}),
                            add(DType::F32, {120}), &x.ref));
    EXPECT_OK(geluGrad(x, dy, false, add(DType::F32, {1000, 120})));
    EXPECT_OK(geluGrad(xh, xh, true, add(DType::BF16, {1000, 120})));
    Host &dx = add(DType::F32, {1000, 120});
    Host &ds = add(DType::F32, {120});
    EXPECT_OK(layerNormGrad(x, scale, dy, 1, 1e-5f, dx, ds,
                            add(DType::F32, {120})));
    Host &rx = add(DType::F32, {1000, 120});
    EXPECT_OK(rmsNormGrad(x, scale, dy, 1e-6f, rx, add(DType::F32, {120})));
    EXPECT_OK(crossEntropyGrad(x, labels, nullptr, dloss, -100,
                               Reduction::Mean, add(DType::F32, {1000, 120})));
    EXPECT_OK(gatherGrad(idx, rows, 0, add(DType::F32, {50, 120})));
    Host p(x), m(dy), v = random(DType::F32, {1000, 120}, 0, 0.1, 28);
    EXPECT_OK(adamUpdate(p, dy, m, v, 1e-3, 2, AdamOptions(), p, m, v));
    outs.push_back(p);
    outs.push_back(m);
    outs.push_back(v);
    Host q(x), b(dy);
    SgdOptions so;
    so.momentum = 0.9;
    EXPECT_OK(sgdUpdate(q, dy, b, 0.1, 2, so, q, b));
    outs.push_back(q);
    outs.push_back(b);
    return outs;
  });
}

/// Fused attention forward and backward (several query and key blocks with
/// tails, GQA, head dims off the 16-wide tiles, causal with a Bool mask or a
/// float bias, and bf16): the backward's passes sum every gradient in a
/// fixed order; with a dropout on the probabilities too (its mask a
/// function of each element's index).
TEST(Threads, AttentionSameBytesAnyThreadCount) {
  DropoutKey key;
  key.seed = 9, key.step = 4, key.stream = 1, key.ratio = 0.1;
  for (DType t : {DType::F32, DType::BF16})
    for (const DropoutKey *drop :
         std::initializer_list<const DropoutKey *>{nullptr, &key}) {
      Host q = random(t, {2, 4, 150, 40}, -1, 1, 31),
           k = random(t, {2, 2, 170, 40}, -1, 1, 32),
           v = random(t, {2, 2, 170, 24}, -1, 1, 33),
           dout = random(t, {2, 4, 150, 24}, -1, 1, 34),
           mask = random(DType::Bool, {2, 1, 150, 170}, 0, 1.3, 35);
      expectSameBytes(drop ? "attention dropout" : "attention", [&] {
        std::vector<Host> outs;
        outs.reserve(5);
        Host &o = outs.emplace_back(t, std::vector<int64_t>{2, 4, 150, 24});
        Host &lse =
            outs.emplace_back(DType::F32, std::vector<int64_t>{2, 4, 150, 2});
        EXPECT_OK(
            attention(q, k, v, &mask.ref, 0.15f, true, o, lse, false, drop));
        Host &dq = outs.emplace_back(t, std::vector<int64_t>{2, 4, 150, 40});
        Host &dk = outs.emplace_back(t, std::vector<int64_t>{2, 2, 170, 40});
        Host &dv = outs.emplace_back(t, std::vector<int64_t>{2, 2, 170, 24});
        EXPECT_OK(attentionGrad(q, k, v, o, lse, dout, &mask.ref, 0.15f, true,
                                dq, dk, dv, false, drop));
        return outs;
      });
      if (drop)
        continue; // the mask gradient once
      // A trainable bias [1, H, S, Sk] and one per key [B, 1, 1, Sk]: the mask
      // gradient sums over batches (and heads, queries) in one task each.
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{1, 4, 150, 170}, {2, 1, 1, 170}}) {
        Host bias = random(t, shape, -1, 1, 36);
        expectSameBytes("attention_mask_grad", [&] {
          std::vector<Host> outs;
          outs.reserve(2);
          Host o(t, {2, 4, 150, 24}), lse(DType::F32, {2, 4, 150, 2});
          EXPECT_OK(attention(q, k, v, &bias.ref, 0.15f, true, o, lse));
          outs.push_back(o);
          Host &db = outs.emplace_back(t, shape);
          EXPECT_OK(
              attentionMaskGrad(q, k, v, o, lse, dout, bias, 0.15f, true, db));
          return outs;
        });
      }
    }
}

} // namespace
} // namespace smp::kernels::cpu::test
