//===- DataMovementTest.cpp - transpose, slice, concat, split, gather, ... ===//

#include "TestUtil.h"

namespace smp::kernels::cpu::test {
namespace {

/// A tensor whose element k is k (mod 100 for narrow types), so moved data
/// identifies its source.
Host iota(DType t, std::vector<int64_t> shape) {
  Host h(t, std::move(shape));
  int64_t mod = smp::base::dtypeSize(t) == 1 ? 100 : 2000;
  for (int64_t k = 0; k < h.numel(); ++k)
    h.set(k, t == DType::Bool ? k % 2 : k % mod);
  return h;
}

const DType kTypes[] = {DType::F32, DType::F64, DType::F16,
                        DType::I8,  DType::I64, DType::Bool};

TEST(Transpose, MatchesReference) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  const Case cases[] = {{{3, 5}, {1, 0}},
                        {{2, 3, 4}, {0, 2, 1}},
                        {{2, 3, 4, 5}, {0, 2, 1, 3}}, // attention heads
                        {{2, 3, 4, 5}, {3, 1, 0, 2}},
                        {{1, 4, 1, 3}, {2, 3, 0, 1}},
                        {{6}, {0}},
                        {{70, 130}, {1, 0}}};
  for (DType t : kTypes)
    for (const Case &c : cases) {
      Host in = iota(t, c.shape);
      std::vector<int64_t> os;
      for (int64_t p : c.perm)
        os.push_back(c.shape[p]);
      Host out(t, os);
      ASSERT_OK(transpose(in, c.perm, out));
      for (int64_t k = 0; k < out.numel(); ++k) {
        auto idx = unravel(k, os);
        std::vector<int64_t> src(idx.size());
        for (size_t d = 0; d < idx.size(); ++d)
          src[c.perm[d]] = idx[d];
        ASSERT_EQ(out.get(k), in.get(ravel(src, c.shape))) << k;
      }
    }
  Host in(DType::F32, {2, 3}), out(DType::F32, {3, 2});
  EXPECT_FALSE(transpose(in, {0, 0}, out).ok());
  EXPECT_FALSE(transpose(in, {0, 1}, out).ok()); // output shape
}

TEST(Slice, PositiveAndNegativeSteps) {
  struct Case {
    std::vector<int64_t> shape, starts, steps, out;
  };
  const Case cases[] = {
      {{10}, {2}, {3}, {3}},   // 2, 5, 8
      {{10}, {9}, {-1}, {10}}, // reversed
      {{10}, {8}, {-3}, {3}},  // 8, 5, 2
      {{4, 6}, {1, 0}, {2, 2}, {2, 3}},
      {{4, 6}, {3, 5}, {-1, -2}, {4, 3}},
      {{3, 4, 5}, {0, 1, 4}, {1, 1, -1}, {3, 2, 5}},
      {{3, 4}, {1, 0}, {1, 1}, {0, 4}}, // empty
  };
  for (DType t : kTypes)
    for (const Case &c : cases) {
      Host in = iota(t, c.shape), out(t, c.out);
      ASSERT_OK(slice(in, c.starts, c.steps, out));
      for (int64_t k = 0; k < out.numel(); ++k) {
        auto idx = unravel(k, c.out);
        for (size_t d = 0; d < idx.size(); ++d)
          idx[d] = c.starts[d] + idx[d] * c.steps[d];
        ASSERT_EQ(out.get(k), in.get(ravel(idx, c.shape)));
      }
    }
  Host in = iota(DType::F32, {10}), out(DType::F32, {4});
  EXPECT_FALSE(slice(in, {2}, {3}, out).ok()); // 2 + 3 * 3 = 11 > 9
  EXPECT_FALSE(slice(in, {2}, {0}, out).ok());
  ASSERT_OK(slice(in, {9}, {-3}, out));
  expectNear(out.values(), {9, 6, 3, 0}, 0);
}

TEST(ConcatSplit, RoundTripOnEveryAxis) {
  for (DType t : kTypes)
    for (int64_t axis = -3; axis < 3; ++axis) {
      int64_t a = axis < 0 ? axis + 3 : axis;
      std::vector<int64_t> base{2, 3, 4};
      std::vector<Host> parts;
      int64_t total = 0;
      for (int64_t size : {1, 3, 0, 2}) {
        auto s = base;
        s[a] = size;
        Host h = random(t, s, -50, 50, static_cast<unsigned>(size + 7 * a));
        parts.push_back(h);
        total += size;
      }
      auto os = base;
      os[a] = total;
      Host out(t, os);
      std::vector<TensorRef> refs;
      for (Host &h : parts)
        refs.push_back(h.ref);
      ASSERT_OK(concat(refs, axis, out));
      for (int64_t k = 0; k < out.numel(); ++k) {
        auto idx = unravel(k, os);
        size_t p = 0;
        while (idx[a] >= parts[p].ref.shape[a])
          idx[a] -= parts[p++].ref.shape[a];
        ASSERT_EQ(out.get(k), parts[p].get(ravel(idx, parts[p].ref.shape)));
      }
      std::vector<Host> back;
      std::vector<TensorRef> backRefs;
      for (Host &h : parts)
        back.emplace_back(t, h.ref.shape);
      for (Host &h : back)
        backRefs.push_back(h.ref);
      ASSERT_OK(split(out, axis, backRefs));
      for (size_t p = 0; p < parts.size(); ++p)
        EXPECT_EQ(back[p].bytes, parts[p].bytes);
    }
  Host a(DType::F32, {2, 3}), b(DType::F32, {3, 3}), o(DType::F32, {5, 3});
  EXPECT_FALSE(concat({a.ref, b.ref}, 1, o).ok());
  EXPECT_FALSE(concat({a.ref, a.ref}, 0, o).ok()); // 4 != 5
}

/// copy_multi: each pair copied; lists of different lengths, a pair of
/// different element counts and mixed dtypes are refused, naming them.
TEST(CopyMulti, EachPairAndItsChecks) {
  Host a = make(DType::F32, {2, 2}, {1, 2, 3, 4}),
       b = make(DType::F32, {3}, {5, 6, 7});
  Host oa(DType::F32, {4}), ob(DType::F32, {3});
  ASSERT_OK(copyMulti({a.ref, b.ref}, {oa.ref, ob.ref}));
  EXPECT_EQ(std::memcmp(oa.ref.data, a.ref.data, 16), 0);
  EXPECT_EQ(std::memcmp(ob.ref.data, b.ref.data, 12), 0);
  EXPECT_EQ(copyMulti({a.ref, b.ref}, {oa.ref}).error,
            "copy_multi: 2 inputs but 1 outputs");
  EXPECT_EQ(copyMulti({a.ref}, {ob.ref})
                .error.rfind("copy: element counts differ", 0),
            0u);
  Host h(DType::F16, {3}), oh(DType::F16, {3});
  EXPECT_EQ(copyMulti({a.ref, h.ref}, {oa.ref, oh.ref})
                .error.rfind("copy_multi: input #1", 0),
            0u);
}

TEST(Gather, AxesAndNegativeIndices) {
  for (DType it : {DType::I64, DType::I32, DType::I8, DType::U16})
    for (DType t : kTypes)
      for (int64_t axis : {0, 1, -1}) {
        std::vector<int64_t> ds{4, 5, 3};
        int64_t a = axis < 0 ? axis + 3 : axis;
        bool sign = smp::base::isSignedInteger(it);
        Host data = iota(t, ds);
        Host idx = random(it, {2, 3}, sign ? -ds[a] : 0, ds[a], 5);
        std::vector<int64_t> os(ds.begin(), ds.begin() + a);
        os.insert(os.end(), {2, 3});
        os.insert(os.end(), ds.begin() + a + 1, ds.end());
        Host out(t, os);
        ASSERT_OK(gather(data, idx, axis, out));
        for (int64_t k = 0; k < out.numel(); ++k) {
          auto oi = unravel(k, os);
          std::vector<int64_t> src(oi.begin(), oi.begin() + a);
          int64_t v = static_cast<int64_t>(idx.get(oi[a] * 3 + oi[a + 1]));
          src.push_back(v < 0 ? v + ds[a] : v);
          src.insert(src.end(), oi.begin() + a + 2, oi.end());
          ASSERT_EQ(out.get(k), data.get(ravel(src, ds)));
        }
      }
  // Embedding lookup with a scalar index, and errors naming the index.
  Host table = iota(DType::F32, {5, 2});
  Host row(DType::F32, {2});
  ASSERT_OK(gather(table, make(DType::I64, {}, {-2}), 0, row));
  expectNear(row.values(), {6, 7}, 0);
  Host two(DType::F32, {2, 2});
  smp::base::Status s = gather(table, make(DType::I64, {2}, {1, 5}), 0, two);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("index 5"), std::string::npos) << s.error;
  s = gather(table, make(DType::I32, {2}, {-6, 0}), 0, two);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("index -6"), std::string::npos) << s.error;
}

TEST(Expand, BroadcastsToOutputShape) {
  for (DType t : kTypes) {
    Host in = iota(t, {3, 1, 2});
    Host out(t, {2, 3, 4, 2});
    ASSERT_OK(expand(in, out));
    for (int64_t k = 0; k < out.numel(); ++k)
      ASSERT_EQ(out.get(k),
                in.get(broadcastIndex(unravel(k, {2, 3, 4, 2}), {3, 1, 2})));
  }
  Host s = make(DType::F32, {}, {2.5}), o(DType::F32, {2, 2});
  ASSERT_OK(expand(s, o));
  expectNear(o.values(), {2.5, 2.5, 2.5, 2.5}, 0);
  EXPECT_FALSE(expand(Host(DType::F32, {3}), o).ok());
}

/// out[i..] = in[i[d] mod in dim d ..] (ONNX Tile), the index computed here
/// directly, for repeats of 0, 1 and more, size-1 dims and every dtype.
TEST(Tile, MatchesReference) {
  struct Case {
    std::vector<int64_t> shape, repeats;
  };
  const Case cases[] = {{{2, 3}, {1, 2}},       {{2, 3}, {3, 1}},
                        {{2, 1, 3}, {2, 4, 1}}, {{4}, {5}},
                        {{3, 2}, {0, 2}},       {{}, {}},
                        {{1, 7, 9}, {3, 2, 3}}, {{2, 3, 4}, {1, 1, 1}}};
  for (DType t : kTypes)
    for (const Case &c : cases) {
      Host in = iota(t, c.shape);
      std::vector<int64_t> os;
      for (size_t d = 0; d < c.shape.size(); ++d)
        os.push_back(c.shape[d] * c.repeats[d]);
      Host out(t, os);
      ASSERT_OK(tile(in, c.repeats, out));
      std::vector<int64_t> inStrides(c.shape.size(), 1);
      for (size_t d = c.shape.size(); d-- > 1;)
        inStrides[d - 1] = inStrides[d] * c.shape[d];
      for (int64_t k = 0; k < out.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, os);
        int64_t src = 0;
        for (size_t d = 0; d < idx.size(); ++d)
          src += (idx[d] % c.shape[d]) * inStrides[d];
        ASSERT_EQ(out.get(k), in.get(src)) << k;
      }
    }
  // ONNX's example: [[1, 2], [3, 4]] tiled by [2, 2].
  Host x = make(DType::F32, {2, 2}, {1, 2, 3, 4}), y(DType::F32, {4, 4});
  ASSERT_OK(tile(x, {2, 2}, y));
  expectNear(y.values(),
             {1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4}, 0);
  // Wrong output shape, repeat count or a negative repeat: refused.
  EXPECT_FALSE(tile(x, {2, 1}, y).ok());
  EXPECT_FALSE(tile(x, {2}, Host(DType::F32, {4, 2})).ok());
  EXPECT_FALSE(tile(x, {-1, 2}, Host(DType::F32, {0, 4})).ok());
}

TEST(Trilu, UpperAndLowerWithOffsets) {
  for (DType t : kTypes)
    for (bool upper : {true, false})
      for (int64_t k : {-5, -1, 0, 1, 2, 7}) {
        Host in = iota(t, {2, 3, 4});
        Host out(t, {2, 3, 4});
        ASSERT_OK(trilu(in, upper, k, out));
        for (int64_t f = 0; f < out.numel(); ++f) {
          int64_t c = f % 4, r = (f / 4) % 3;
          bool keep = upper ? c - r >= k : c - r <= k;
          ASSERT_EQ(out.get(f), keep ? in.get(f) : 0.0) << f;
        }
        ASSERT_OK(trilu(in, upper, k, in)); // in place
        EXPECT_EQ(in.bytes, out.bytes);
      }
  // The causal mask of a 3x3 attention score.
  Host ones = make(DType::F32, {3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  Host m(DType::F32, {3, 3});
  ASSERT_OK(trilu(ones, false, 0, m));
  expectNear(m.values(), {1, 0, 0, 1, 1, 0, 1, 1, 1}, 0);
}

TEST(Copy, Reshape) {
  Host in = iota(DType::F32, {2, 6}), out(DType::F32, {3, 4});
  ASSERT_OK(copy(in, out));
  EXPECT_EQ(in.bytes, out.bytes);
  EXPECT_FALSE(copy(in, Host(DType::F32, {5})).ok());
}

} // namespace
} // namespace smp::kernels::cpu::test
