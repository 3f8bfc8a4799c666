//===- ConvPoolTest.cpp - conv, max_pool, avg_pool ------------------------===//

#include "TestUtil.h"

#include <array>

namespace smp::kernels::cpu::test {
namespace {

int64_t outSize(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe,
                int64_t d, bool ceil) {
  int64_t span = in + pb + pe - (d * (k - 1) + 1);
  int64_t o = ceil ? (span + s - 1) / s + 1 : span / s + 1;
  if (ceil && (o - 1) * s >= in + pb)
    --o;
  return o;
}

struct Geo {
  std::vector<int64_t> in; // [N, C, spatial...]
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool ceil = false;
  std::vector<int64_t> outSpatial() const {
    size_t n = kernel.size();
    std::vector<int64_t> o;
    for (size_t d = 0; d < n; ++d)
      o.push_back(outSize(in[d + 2], kernel[d], strides[d], pads[d],
                          pads[n + d], dilations[d], ceil));
    return o;
  }
  /// Elements of the output's spatial dims (P), of the window (K) and of
  /// the input's spatial dims (I).
  std::array<int64_t, 3> spatialCounts() const {
    std::vector<int64_t> os = outSpatial();
    int64_t P = 1, K = 1, I = 1;
    for (size_t d = 0; d < kernel.size(); ++d) {
      P *= os[d];
      K *= kernel[d];
      I *= in[d + 2];
    }
    return {P, K, I};
  }
};

/// Naive convolution in double.
std::vector<double> refConv(const Geo &g, const Host &x, const Host &w,
                            const Host *b, int64_t group, int64_t M,
                            std::vector<int64_t> &outShape) {
  size_t n = g.kernel.size();
  auto os = g.outSpatial();
  outShape = {g.in[0], M};
  outShape.insert(outShape.end(), os.begin(), os.end());
  int64_t C = g.in[1], cg = C / group, mg = M / group;
  std::vector<int64_t> inSp(g.in.begin() + 2, g.in.end());
  auto [P, K, I] = g.spatialCounts();
  std::vector<double> out;
  for (int64_t bn = 0; bn < g.in[0]; ++bn)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t p = 0; p < P; ++p) {
        auto oi = unravel(p, os);
        double acc = b ? b->get(m) : 0;
        int64_t grp = m / mg;
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t k = 0; k < K; ++k) {
            auto ki = unravel(k, g.kernel);
            std::vector<int64_t> ii(n);
            bool inside = true;
            for (size_t d = 0; d < n; ++d) {
              ii[d] = oi[d] * g.strides[d] - g.pads[d] + ki[d] * g.dilations[d];
              inside = inside && ii[d] >= 0 && ii[d] < inSp[d];
            }
            if (!inside)
              continue;
            double xv = x.get((bn * C + grp * cg + c) * I + ravel(ii, inSp));
            double wv = w.get((m * cg + c) * K + k);
            acc += xv * wv;
          }
        out.push_back(acc);
      }
  return out;
}

TEST(Conv, MatchesNaiveReference) {
  struct Case {
    Geo g;
    int64_t M, group;
    bool bias;
  };
  const Case cases[] = {
      {{{2, 3, 7, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, 4, 1, true},
      {{{1, 4, 9, 8}, {3, 2}, {2, 3}, {0, 1, 2, 0}, {1, 1}}, 6, 2, false},
      {{{1, 2, 9, 9}, {3, 3}, {1, 2}, {2, 2, 2, 2}, {2, 3}}, 3, 1, true},
      {{{2, 4, 5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}}, 8, 1, true}, // 1x1
      {{{2, 6, 5, 4}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
       6,
       6,
       true},                                            // depthwise
      {{{2, 3, 11}, {4}, {2}, {1, 2}, {1}}, 5, 1, true}, // 1-d
      {{{1, 2, 4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {1, 1, 2}},
       3,
       1,
       true}, // 3-d
      {{{2, 16, 20, 20}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, 16, 1, false},
      // Large enough for the GEMMs to be split over the threads.
      {{{1, 16, 24, 24}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, 24, 1, true},
      {{{1, 64, 16, 16}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}}, 72, 1, false},
  };
  unsigned seed = 1;
  for (DType t : {DType::F32, DType::F64, DType::F16})
    for (const Case &c : cases) {
      std::vector<int64_t> ws{c.M, c.g.in[1] / c.group};
      ws.insert(ws.end(), c.g.kernel.begin(), c.g.kernel.end());
      Host x = random(t, c.g.in, -1, 1, seed++),
           w = random(t, ws, -1, 1, seed++);
      Host b = random(DType::F32, {c.M}, -1, 1, seed++);
      std::vector<int64_t> os;
      std::vector<double> want =
          refConv(c.g, x, w, c.bias ? &b : nullptr, c.group, c.M, os);
      Host out(t, os);
      SCOPED_TRACE(smp::base::describe(x) + " * " + smp::base::describe(w));
      ASSERT_OK(conv(x, w, c.bias ? &b.ref : nullptr, c.g.strides, c.g.pads,
                     c.g.dilations, c.group, out));
      double tol = t == DType::F32 ? 1e-5 : t == DType::F64 ? 1e-12 : 1e-2;
      expectNear(out.values(), want, tol, tol);
    }
}

TEST(Conv, HandComputed2x2) {
  // x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], w = [[1, 0], [0, -1]], bias 10:
  // out[i][j] = x[i][j] - x[i+1][j+1] + 10 = 6 everywhere.
  Host x = make(DType::F32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Host w = make(DType::F32, {1, 1, 2, 2}, {1, 0, 0, -1});
  Host b = make(DType::F32, {1}, {10});
  Host y(DType::F32, {1, 1, 2, 2});
  ASSERT_OK(conv(x, w, &b.ref, {}, {}, {}, 1, y));
  expectNear(y.values(), {6, 6, 6, 6}, 0);
  // w = all ones, pad 1, stride 2: sums of the 2x2 windows at (-1,-1),
  // (-1,1), (1,-1), (1,1).
  Host ones = make(DType::F32, {1, 1, 2, 2}, {1, 1, 1, 1});
  ASSERT_OK(conv(x, ones, nullptr, {2, 2}, {1, 1, 1, 1}, {}, 1, y));
  expectNear(y.values(), {1, 2 + 3, 4 + 7, 5 + 6 + 8 + 9}, 0);
  // Wrong output shape and channel mismatch are errors.
  EXPECT_FALSE(
      conv(x, w, nullptr, {}, {}, {}, 1, Host(DType::F32, {1, 1, 3, 3})).ok());
  EXPECT_FALSE(
      conv(x, make(DType::F32, {1, 2, 2, 2}), nullptr, {}, {}, {}, 1, y).ok());
}

//===----------------------------------------------------------------------===//
// Pools
//===----------------------------------------------------------------------===//

std::vector<double> refPool(const Geo &g, const Host &x, bool isMax,
                            bool countPad, std::vector<int64_t> &outShape) {
  size_t n = g.kernel.size();
  auto os = g.outSpatial();
  outShape = {g.in[0], g.in[1]};
  outShape.insert(outShape.end(), os.begin(), os.end());
  std::vector<int64_t> inSp(g.in.begin() + 2, g.in.end());
  auto [P, K, I] = g.spatialCounts();
  std::vector<double> out;
  for (int64_t plane = 0; plane < g.in[0] * g.in[1]; ++plane)
    for (int64_t p = 0; p < P; ++p) {
      auto oi = unravel(p, os);
      double best = -INFINITY, sum = 0;
      int64_t inside = 0, padded = 0;
      for (int64_t k = 0; k < K; ++k) {
        auto ki = unravel(k, g.kernel);
        std::vector<int64_t> ii(n);
        bool in = true, inPad = true;
        for (size_t d = 0; d < n; ++d) {
          ii[d] = oi[d] * g.strides[d] - g.pads[d] + ki[d] * g.dilations[d];
          in = in && ii[d] >= 0 && ii[d] < inSp[d];
          inPad =
              inPad && ii[d] >= -g.pads[d] && ii[d] < inSp[d] + g.pads[n + d];
        }
        padded += inPad;
        if (!in)
          continue;
        double v = x.get(plane * I + ravel(ii, inSp));
        best = std::max(best, v);
        sum += v;
        ++inside;
      }
      out.push_back(isMax ? best : sum / (countPad ? padded : inside));
    }
  return out;
}

TEST(Pool, MatchesNaiveReference) {
  const Geo cases[] = {
      {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
      {{1, 2, 7, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
      {{1, 2, 6, 7}, {3, 2}, {2, 3}, {1, 0, 1, 1}, {1, 1}, true},
      {{1, 1, 10, 9}, {3, 3}, {3, 2}, {0, 1, 2, 1}, {2, 1}, false},
      {{2, 2, 11}, {4}, {3}, {2, 1}, {1}, true},
      {{1, 2, 5, 4, 6},
       {2, 3, 2},
       {2, 1, 2},
       {1, 1, 0, 0, 1, 1},
       {1, 1, 1},
       true},
  };
  unsigned seed = 1;
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (const Geo &g : cases)
      for (int mode = 0; mode < 3; ++mode) { // max, avg, avg + pads
        Host x = random(t, g.in, -3, 3, seed++);
        std::vector<int64_t> os;
        std::vector<double> want = refPool(g, x, mode == 0, mode == 2, os);
        Host out(t, os);
        SCOPED_TRACE(smp::base::describe(x) + " mode " + std::to_string(mode) +
                     (g.ceil ? " ceil" : ""));
        if (mode == 0)
          ASSERT_OK(maxPool(x, g.kernel, g.strides, g.pads, g.dilations, g.ceil,
                            out));
        else
          ASSERT_OK(avgPool(x, g.kernel, g.strides, g.pads, g.dilations, g.ceil,
                            mode == 2, out));
        double tol = mode == 0 ? 0 : t == DType::F32 ? 1e-6 : tolFor(t);
        expectNear(out.values(), want, tol, tol);
      }
}

TEST(Pool, PyTorchCeilModeValues) {
  Host x(DType::F32, {1, 1, 4, 4});
  for (int i = 0; i < 16; ++i)
    x.set(i, i + 1);
  Host y(DType::F32, {1, 1, 3, 3});
  // F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True,
  //              count_include_pad=True)
  ASSERT_OK(avgPool(x, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, true, y));
  expectNear(y.values(),
             {1.5555556, 3.3333333, 2.0, 6.3333335, 11.0, 6.0, 4.5, 7.5, 4.0},
             1e-6);
  // ... and count_include_pad=False.
  ASSERT_OK(avgPool(x, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, false, y));
  expectNear(y.values(), {3.5, 5, 6, 9.5, 11, 12, 13.5, 15, 16}, 1e-6);
  // F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)
  ASSERT_OK(maxPool(x, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, y));
  expectNear(y.values(), {6, 8, 8, 14, 16, 16, 14, 16, 16}, 0);
  // No padding, ceil mode: the last window overhangs by one column/row.
  Host y2(DType::F32, {1, 1, 2, 2});
  ASSERT_OK(avgPool(x, {3, 3}, {2, 2}, {}, {}, true, false, y2));
  expectNear(y2.values(), {6, 7.5, 12, 13.5}, 1e-6);
  ASSERT_OK(maxPool(x, {3, 3}, {2, 2}, {}, {}, true, y2));
  expectNear(y2.values(), {11, 12, 15, 16}, 0);
  // Without ceil mode the output is 1x1; a 2x2 output is then an error.
  EXPECT_FALSE(maxPool(x, {3, 3}, {2, 2}, {}, {}, false, y2).ok());
  // NaN wins a max window.
  x.set(0, NAN);
  Host y1(DType::F32, {1, 1, 1, 1});
  ASSERT_OK(maxPool(x, {4, 4}, {1, 1}, {}, {}, false, y1));
  EXPECT_TRUE(std::isnan(y1.get(0)));
}

} // namespace
} // namespace smp::kernels::cpu::test
