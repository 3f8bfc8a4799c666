//===- DropoutTest.cpp - smp.dropout's generator and kernel ---------------===//
//
// Philox4x32-10 against Random123's published known answers; the mask's
// rate and scaling; and the property every plan relies on: a rank's part of
// the tensor (a tensor-parallel split, a run of samples) draws exactly its
// part of the global tensor's mask.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "VecMath.h"
#include "smp/kernels/common/Dropout.h"

namespace smp::kernels::cpu::test {
namespace {

using common::philox4x32x10;

// Random123's tests/kat_vectors, "philox4x32 10" lines (counter, key ->
// output), as TensorFlow's and other ports check them.
TEST(Philox, Random123KnownAnswers) {
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  } kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat &k : kats) {
    uint32_t out[4];
    philox4x32x10(k.ctr, k.key, out);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], k.out[i]) << "word " << i;
  }
}

DropoutKey keyOf(double ratio, uint64_t seed = 7, uint64_t step = 3,
                 int64_t stream = 2) {
  DropoutKey k;
  k.seed = seed, k.step = step, k.stream = stream, k.ratio = ratio;
  return k;
}

TEST(Dropout, KeepsOneMinusPScaledByItsInverse) {
  Host x = random(DType::F32, {200, 500}, 0.5, 2, 1), y(DType::F32, {200, 500});
  ASSERT_OK(dropout(x, keyOf(0.3), y));
  int64_t kept = 0;
  float scale = static_cast<float>(1.0 / 0.7);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float xi = x.as<float>()[i], yi = y.as<float>()[i];
    if (yi != 0) {
      ++kept;
      EXPECT_EQ(yi, xi * scale) << i;
    }
  }
  // 100000 draws: 0.7 +- 4.6 standard deviations (0.00145 each).
  EXPECT_NEAR(static_cast<double>(kept) / x.numel(), 0.7, 0.0067);
}

TEST(Dropout, TheKeyChoosesTheMask) {
  Host x = make(DType::F32, {64, 64}), a(DType::F32, {64, 64}),
       b(DType::F32, {64, 64});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.set(i, 1);
  ASSERT_OK(dropout(x, keyOf(0.5), a));
  ASSERT_OK(dropout(x, keyOf(0.5), b));
  EXPECT_EQ(a.values(), b.values()); // a function of the key
  for (DropoutKey other : {keyOf(0.5, 8), keyOf(0.5, 7, 4), keyOf(0.5, 7, 3, 5),
                           keyOf(0.5, 7 + (uint64_t(1) << 32))}) {
    ASSERT_OK(dropout(x, other, b));
    int64_t same = 0;
    for (int64_t i = 0; i < x.numel(); ++i)
      same += a.get(i) == b.get(i);
    // Independent masks agree on about half the elements.
    EXPECT_NEAR(static_cast<double>(same) / x.numel(), 0.5, 0.05);
  }
}

TEST(Dropout, RatiosZeroAndOneAndHalfTypesAndInPlace) {
  Host x = random(DType::F32, {3, 5}, -2, 2, 2), y(DType::F32, {3, 5});
  ASSERT_OK(dropout(x, keyOf(0), y));
  EXPECT_EQ(y.values(), x.values());
  ASSERT_OK(dropout(x, keyOf(1), y));
  EXPECT_EQ(y.values(), std::vector<double>(15, 0.0));
  Host f32 = random(DType::F32, {4, 9}, -2, 2, 3), want(DType::F32, {4, 9});
  ASSERT_OK(dropout(f32, keyOf(0.25), want));
  for (DType t : {DType::F64, DType::F16, DType::BF16}) {
    SCOPED_TRACE(smp::base::dtypeName(t));
    Host h(t, {4, 9}), o(t, {4, 9});
    for (int64_t i = 0; i < h.numel(); ++i)
      h.set(i, f32.get(i));
    ASSERT_OK(dropout(h, keyOf(0.25), o));
    for (int64_t i = 0; i < h.numel(); ++i)
      EXPECT_NEAR(o.get(i),
                  h.get(i) == 0 ? 0 : want.get(i) * h.get(i) / f32.get(i),
                  std::fabs(want.get(i)) * 1e-2)
          << i;
    EXPECT_EQ(o.get(0) == 0, want.get(0) == 0);
  }
  ASSERT_OK(dropout(f32, keyOf(0.25), f32)); // in place
  EXPECT_EQ(f32.values(), want.values());
}

/// out[...] of the global tensor at the part `index` of `parts` of dim
/// `dim` (in `blocks` blocks).
Host partOf(const Host &global, int64_t dim, int64_t parts, int64_t blocks,
            int64_t index) {
  std::vector<int64_t> shape = global.ref.shape;
  int64_t d = shape[dim], local = d / parts, block = local / blocks;
  shape[dim] = local;
  Host out(global.ref.dtype, shape);
  AxisSplit s = splitAtAxis(global.ref.shape, dim);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < local; ++j) {
      int64_t jg = j / block * block * parts + index * block + j % block;
      for (int64_t n = 0; n < s.inner; ++n)
        out.set((o * local + j) * s.inner + n,
                global.get((o * d + jg) * s.inner + n));
    }
  return out;
}

TEST(Dropout, EachPartDrawsItsPartOfTheGlobalMask) {
  // The global batch: 4 samples of [6, 8].
  Host x = random(DType::F32, {4, 6, 8}, 0.5, 1.5, 4),
       whole(DType::F32, {4, 6, 8});
  DropoutKey key = keyOf(0.4);
  key.samples = 4;
  ASSERT_OK(dropout(x, key, whole));
  // Tensor-parallel parts of dim 1 and 2, plain and in blocks (a fused
  // projection's [q | k | v]), with the samples of two data-parallel ranks.
  struct Case {
    int64_t dim, parts, blocks;
  } cases[] = {{1, 2, 1}, {1, 3, 1}, {2, 2, 1},
               {2, 2, 2}, {1, 2, 3}, {0, 2, 1}};
  for (const Case &c : cases)
    for (int64_t rank = 0; rank < 2; ++rank) {
      SCOPED_TRACE(::testing::Message()
                   << "dim " << c.dim << " parts " << c.parts << " blocks "
                   << c.blocks << " dp rank " << rank);
      if (c.dim == 0 && rank > 0)
        continue; // dim 0 is the samples' (sequence parallelism's rows)
      Host samples = c.dim == 0 ? x : partOf(x, 0, 2, 1, rank);
      Host wantSamples = c.dim == 0 ? whole : partOf(whole, 0, 2, 1, rank);
      for (int64_t index = 0; index < c.parts; ++index) {
        Host in = partOf(samples, c.dim, c.parts, c.blocks, index);
        Host want = partOf(wantSamples, c.dim, c.parts, c.blocks, index);
        Host out(DType::F32, in.ref.shape);
        DropoutKey k = key;
        k.samples = c.dim == 0 ? 4 : 2;
        k.sampleOffset = c.dim == 0 ? 0 : 2 * rank;
        k.tpDim = c.dim, k.tpParts = c.parts, k.tpBlocks = c.blocks;
        k.tpIndex = index;
        ASSERT_OK(dropout(in, k, out));
        EXPECT_EQ(out.values(), want.values()) << "part " << index;
      }
    }
}

// The AVX2 path draws eight counters at once: the same words as the scalar
// Philox, on a plain and on a split key (windows refilled within a row).
TEST(Dropout, DrawsTheSameWordsWithAndWithoutSimd) {
  bool was = detail::vecSimdActive();
  Host x = random(DType::F32, {3, 10, 37}, 0.5, 1.5, 5);
  DropoutKey split = keyOf(0.5, 0x1234567890ull);
  split.samples = 3, split.sampleOffset = 5;
  split.tpDim = 1, split.tpParts = 2, split.tpBlocks = 5, split.tpIndex = 1;
  for (DropoutKey k : {keyOf(0.5, 0x1234567890ull), split}) {
    Host plain(DType::F32, {3, 10, 37}), simd(DType::F32, {3, 10, 37});
    detail::vecUseSimd(false);
    ASSERT_OK(dropout(x, k, plain));
    detail::vecUseSimd(true);
    ASSERT_OK(dropout(x, k, simd));
    EXPECT_EQ(simd.values(), plain.values());
  }
  detail::vecUseSimd(was);
}

// The kernel's runs (the AVX2 draws compared and transposed in registers,
// windows cut at a run's ends) keep exactly the elements the header's
// one-element mask keeps (common::dropoutKeeps): an unsplit tensor whose
// first global index is not a multiple of 4, and a split whose rows are
// runs (inner extent 37).
TEST(Dropout, RunsKeepWhatThePerElementMaskKeeps) {
  bool was = detail::vecSimdActive();
  Host x = random(DType::F32, {3, 10, 37}, 0.5, 1.5, 6);
  DropoutKey plain = keyOf(0.4, 99), split = keyOf(0.4, 99);
  plain.samples = 3, plain.sampleOffset = 5;
  split.tpDim = 1, split.tpParts = 2, split.tpBlocks = 5, split.tpIndex = 1;
  for (bool simd : {true, false})
    for (const DropoutKey &k : {plain, split}) {
      detail::vecUseSimd(simd);
      Host y(DType::F32, {3, 10, 37});
      ASSERT_OK(dropout(x, k, y));
      common::DropoutPlan plan;
      ASSERT_OK(common::planDropout(k, x, y, plan));
      for (int64_t i = 0; i < x.numel(); ++i)
        ASSERT_EQ(y.get(i) != 0, common::dropoutKeeps(plan, i))
            << i << (simd ? " simd" : " scalar");
    }
  detail::vecUseSimd(was);
}

TEST(Dropout, RefusesKeysThatDoNotFitTheTensor) {
  Host x(DType::F32, {4, 6}), y(DType::F32, {4, 6});
  DropoutKey k = keyOf(0.1);
  k.tpDim = 2, k.tpParts = 2;
  EXPECT_EQ(dropout(x, k, y).error,
            "dropout: its tensor-parallel dim 2 is not a dim of a rank-2 "
            "tensor");
  k.tpDim = 1, k.tpBlocks = 4;
  EXPECT_EQ(dropout(x, k, y).error,
            "dropout: part 0 of 2 in 4 blocks does not split its dim of 6");
  k = keyOf(0.1);
  k.samples = 5;
  EXPECT_EQ(dropout(x, k, y).error,
            "dropout: 5 samples do not split its 24 elements");
  EXPECT_EQ(dropout(x, keyOf(1.5), y).error,
            "dropout: ratio 1.500000 is not in [0, 1]");
  Host i(DType::I32, {4, 6});
  EXPECT_FALSE(dropout(i, keyOf(0.1), i).ok());
}

} // namespace
} // namespace smp::kernels::cpu::test
