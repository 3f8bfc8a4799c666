//===- AttentionTest.cpp - Fused attention against PyTorch and unfused ----===//
//
// attention / attentionGrad against PyTorch's scaled_dot_product_attention
// and autograd (Inputs/attention, python/make_attention_refs.py: causal and
// not, Bool and additive masks, GQA and MQA, head dims 32/64/128, sequence
// lengths 1, 7, 9, 65, 130, S != Sk), f16/bf16 against f32, a larger random
// case against the unfused kernels (matmul + scale + mask + softmax +
// matmul, and the gradients composed from matmuls), a query with no allowed
// key, and every refused input; the bshd and packed layouts against
// heads-first.
//
//===----------------------------------------------------------------------===//

#include "AttentionRefs.h"

#include <cstdio>
#include <functional>

namespace smp::kernels::cpu::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Whether the inputs' mask is an additive float one (it has a gradient).
bool floatMask(const AttnInputs &in) {
  return in.hasMask && in.mask.ref.dtype != DType::Bool;
}

/// The results of a case: out, lse (the kernels' two parts (m, log l) and
/// their sum, which the references give), dq, dk, dv and, for a float mask,
/// its gradient dmask.
struct AttnResults {
  Host out, lse, lseSum, dq, dk, dv, dmask;
  int parts;
  AttnResults(const AttnCase &c, DType t, const AttnInputs &in)
      : out(t, {c.b, c.hq, c.s, c.dv}), lse(DType::F32, {c.b, c.hq, c.s, 2}),
        lseSum(DType::F32, {c.b, c.hq, c.s}), dq(t, {c.b, c.hq, c.s, c.d}),
        dk(t, {c.b, c.hkv, c.sk, c.d}), dv(t, {c.b, c.hkv, c.sk, c.dv}),
        dmask(floatMask(in) ? Host(t, in.mask.ref.shape) : Host()),
        parts(floatMask(in) ? 6 : 5) {}
  void sumLse() { lseSum = test::lseSum(lse); }
  const Host &part(int i) const {
    const Host *p[] = {&out, &lseSum, &dq, &dk, &dv, &dmask};
    return *p[i];
  }
};
const char *const kPartNames[] = {"out", "lse", "dq", "dk", "dv", "dmask"};

AttnResults runAttention(const AttnCase &c, const AttnInputs &in, DType t,
                         const DropoutKey *drop = nullptr) {
  AttnResults r(c, t, in);
  float scale = static_cast<float>(c.scale);
  EXPECT_OK(attention(in.q, in.k, in.v, in.maskRef(), scale, c.causal, r.out,
                      r.lse, false, drop));
  r.sumLse();
  EXPECT_OK(attentionGrad(in.q, in.k, in.v, r.out, r.lse, in.dout, in.maskRef(),
                          scale, c.causal, r.dq, r.dk, r.dv, false, drop));
  if (floatMask(in))
    EXPECT_OK(attentionMaskGrad(in.q, in.k, in.v, r.out, r.lse, in.dout,
                                in.mask, scale, c.causal, r.dmask, false,
                                drop));
  return r;
}

std::vector<double> readF32(const std::string &path, size_t n) {
  std::vector<float> f(n);
  std::FILE *fp = std::fopen(path.c_str(), "rb");
  if (!fp) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  size_t got = std::fread(f.data(), sizeof(float), n, fp);
  bool atEnd = std::fgetc(fp) == EOF;
  std::fclose(fp);
  EXPECT_TRUE(got == n && atEnd) << path << " does not hold " << n << " f32";
  return std::vector<double>(f.begin(), f.end());
}

TEST(Attention, MatchesPyTorch) {
  std::vector<AttnCase> cases = loadAttnCases();
  EXPECT_GE(cases.size(), 9u);
  for (const AttnCase &c : cases) {
    SCOPED_TRACE(c.name);
    AttnInputs in(c, DType::F32);
    AttnResults r = runAttention(c, in, DType::F32);
    size_t total = 0;
    for (int i = 0; i < r.parts; ++i)
      total += static_cast<size_t>(r.part(i).numel());
    std::vector<double> ref =
        readF32(attnFixtureDir() + "/" + c.name + ".bin", total);
    if (ref.size() != total)
      continue;
    size_t at = 0;
    std::printf("[ torch    ] %-18s", c.name.c_str());
    for (int i = 0; i < r.parts; ++i) {
      std::vector<double> got = r.part(i).values();
      std::vector<double> want(ref.begin() + at, ref.begin() + at + got.size());
      at += got.size();
      double rel = maxRelDiff(got, want);
      std::printf(" %s %.1e", kPartNames[i], rel);
      EXPECT_LE(rel, 1e-5) << kPartNames[i];
    }
    std::printf("\n");
  }
}

/// f16 and bf16 (computed in f32) against f32 on the same rounded inputs:
/// within the storage type's rounding.
TEST(Attention, HalfTypesMatchF32) {
  std::vector<AttnCase> cases = loadAttnCases();
  for (DType t : {DType::F16, DType::BF16})
    for (const AttnCase &c : cases) {
      SCOPED_TRACE(c.name + (t == DType::F16 ? " f16" : " bf16"));
      AttnInputs half(c, t), wide(c, DType::F32);
      std::pair<Host *, const Host *> same[] = {{&wide.q, &half.q},
                                                {&wide.k, &half.k},
                                                {&wide.v, &half.v},
                                                {&wide.dout, &half.dout}};
      for (auto [w, h] : same)
        for (int64_t i = 0; i < w->numel(); ++i)
          w->set(i, h->get(i));
      if (c.mask != "none" && c.mask != "bool_b1")
        for (int64_t i = 0; i < wide.mask.numel(); ++i)
          wide.mask.set(i, half.mask.get(i));
      AttnResults a = runAttention(c, half, t);
      AttnResults b = runAttention(c, wide, DType::F32);
      for (int i = 0; i < a.parts; ++i)
        EXPECT_LE(maxRelDiff(a.part(i).values(), b.part(i).values()),
                  i == 1 ? 1e-6 : 4 * tolFor(t))
            << kPartNames[i];
    }
}

/// View of slice [offset, offset + prod(shape)) of h.
TensorRef view(const Host &h, int64_t offset, std::vector<int64_t> shape) {
  TensorRef r = h.ref;
  r.data = static_cast<float *>(h.ref.data) + offset;
  r.shape = std::move(shape);
  return r;
}

/// The unfused graph with the existing kernels, per (batch, head): scores =
/// matmul(q, k^T) * scale + mask, softmax, matmul by v; the gradients as
/// the unfused graph's backward composes them: dv = P^T dout,
/// dP = dout v^T, dS = P (dP - rowsum(P dP)), dq = scale dS k,
/// dk = scale dS^T q (summed over the heads of a group), dmask = dS / scale
/// summed over the mask's broadcast dims. With `z` ([B, Hq, S, Sk], the
/// dropout kernel's output on ones: 1 / (1 - p) or 0), the probabilities
/// are dropped as the unfused graph drops them: out = (Z P) v, dv = (Z
/// P)^T dout, dP = Z (dout v^T).
AttnResults unfused(const AttnCase &c, const AttnInputs &in,
                    const Host *z = nullptr) {
  AttnResults r(c, DType::F32, in);
  int64_t group = c.hq / c.hkv, n = c.s * c.sk;
  Host sc(DType::F32, {c.s, c.sk}), p(DType::F32, {c.s, c.sk}),
      dp(DType::F32, {c.s, c.sk}), part(DType::F32, {c.sk, c.d}),
      partV(DType::F32, {c.sk, c.dv});
  std::fill(r.dk.bytes.begin(), r.dk.bytes.end(), 0);
  std::fill(r.dv.bytes.begin(), r.dv.bytes.end(), 0);
  std::fill(r.dmask.bytes.begin(), r.dmask.bytes.end(), 0);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h) {
      int64_t qo = (b * c.hq + h) * c.s, ko = (b * c.hkv + h / group) * c.sk;
      TensorRef q = view(in.q, qo * c.d, {c.s, c.d}),
                k = view(in.k, ko * c.d, {c.sk, c.d}),
                v = view(in.v, ko * c.dv, {c.sk, c.dv}),
                g = view(in.dout, qo * c.dv, {c.s, c.dv});
      EXPECT_OK(matmul(q, k, sc, false, true));
      for (int64_t e = 0; e < n; ++e) {
        int64_t i = e / c.sk, j = e % c.sk;
        double x = sc.get(e) * float(c.scale);
        bool allowed = !(c.causal && j > i);
        if (in.hasMask) {
          int64_t mi = broadcastIndex({b, h, i, j}, in.mask.ref.shape);
          if (in.mask.ref.dtype == DType::Bool)
            allowed = allowed && in.mask.get(mi) != 0;
          else
            x += in.mask.get(mi);
        }
        sc.set(e, allowed ? x : -kInf);
      }
      EXPECT_OK(softmax(sc, 1, p));
      Host pz = p; // the dropped probabilities
      if (z)
        for (int64_t e = 0; e < n; ++e)
          pz.set(e, p.get(e) * z->get(qo * c.sk + e));
      EXPECT_OK(matmul(pz, v, view(r.out, qo * c.dv, {c.s, c.dv})));
      for (int64_t i = 0; i < c.s; ++i) { // lse = log sum exp(scores)
        double m = -kInf, s = 0;
        for (int64_t j = 0; j < c.sk; ++j)
          m = std::max(m, sc.get(i * c.sk + j));
        for (int64_t j = 0; j < c.sk; ++j)
          s += std::exp(sc.get(i * c.sk + j) - m);
        r.lse.set(2 * (qo + i), m);
        r.lse.set(2 * (qo + i) + 1, std::log(s));
      }
      EXPECT_OK(matmul(pz, g, partV, true, false)); // P^T dout
      for (int64_t e = 0; e < c.sk * c.dv; ++e)
        r.dv.set(ko * c.dv + e, r.dv.get(ko * c.dv + e) + partV.get(e));
      EXPECT_OK(matmul(g, v, dp, false, true)); // dout v^T
      if (z)
        for (int64_t e = 0; e < n; ++e)
          dp.set(e, dp.get(e) * z->get(qo * c.sk + e));
      for (int64_t i = 0; i < c.s; ++i) {
        double dot = 0;
        for (int64_t j = 0; j < c.sk; ++j)
          dot += p.get(i * c.sk + j) * dp.get(i * c.sk + j);
        for (int64_t j = 0; j < c.sk; ++j) {
          int64_t e = i * c.sk + j;
          double ds = p.get(e) * (dp.get(e) - dot);
          if (floatMask(in)) {
            int64_t mi = broadcastIndex({b, h, i, j}, in.mask.ref.shape);
            r.dmask.set(mi, r.dmask.get(mi) + ds);
          }
          dp.set(e, c.scale * ds);
        }
      }
      EXPECT_OK(matmul(dp, k, view(r.dq, qo * c.d, {c.s, c.d})));
      EXPECT_OK(matmul(dp, q, part, true, false));
      for (int64_t e = 0; e < c.sk * c.d; ++e)
        r.dk.set(ko * c.d + e, r.dk.get(ko * c.d + e) + part.get(e));
    }
  r.sumLse();
  return r;
}

/// Several blocks of queries and keys with tails (S = 200, Sk = 150), head
/// dims that are not multiples of 16, GQA, causal with a Bool mask that
/// blanks a whole key block (skipped), a float mask per head and a causal
/// float mask [B, 1, 1, Sk] (one value per key, broadcast over heads and
/// queries: its gradient sums over both; a per-query mask would have a
/// gradient of exactly 0, a softmax being blind to a row's shift): fused
/// equals the unfused kernels.
TEST(Attention, MatchesUnfusedKernels) {
  for (const char *mask : {"bool", "float", "float_keys"}) {
    SCOPED_TRACE(mask);
    AttnCase c;
    c.b = 2, c.hq = 4, c.hkv = 2, c.s = 200, c.sk = 150, c.d = 40, c.dv = 24;
    c.causal = std::string(mask) != "float";
    c.scale = 0.2;
    c.seed = 21;
    AttnInputs in(c, DType::F32);
    in.hasMask = true;
    if (std::string(mask) == "float_keys") {
      in.mask = genValues(DType::F32, {c.b, 1, 1, c.sk}, c.seed, 10);
    } else if (c.causal) {
      in.mask = Host(DType::Bool, {c.b, 1, c.s, c.sk});
      for (int64_t e = 0; e < in.mask.numel(); ++e) {
        int64_t j = e % c.sk;
        in.mask.set(e, j == 0 || (j / 64 != 1 &&
                                  uniformAt(c.seed, 10, uint64_t(e)) < 0.8));
      }
    } else {
      in.mask = genValues(DType::F32, {1, c.hq, c.s, c.sk}, c.seed, 10);
    }
    AttnResults fused = runAttention(c, in, DType::F32);
    AttnResults ref = unfused(c, in);
    for (int i = 0; i < fused.parts; ++i) {
      double rel = maxRelDiff(fused.part(i).values(), ref.part(i).values());
      std::printf("[ unfused  ] %s mask: %s %.1e\n", mask, kPartNames[i], rel);
      EXPECT_LE(rel, 1e-5) << kPartNames[i];
    }
  }
}

/// The dropout kernel's factors for a [B, Hq, S, Sk] tensor under `key`:
/// dropout() of ones (1 / (1 - p) where kept, 0 where dropped).
Host dropoutFactors(const AttnCase &c, const DropoutKey &key) {
  Host ones(DType::F32, {c.b, c.hq, c.s, c.sk}), z = ones;
  for (int64_t i = 0; i < ones.numel(); ++i)
    ones.set(i, 1.0);
  EXPECT_OK(dropout(ones, key, z));
  return z;
}

/// A dropout on the probabilities: the fused kernels draw the mask the
/// unfused dropout kernel draws over the [B, Hq, S, Sk] probabilities (the
/// same key, its global indices), and give the unfused graph's results
/// with that mask (Z P v, dv from Z P, dS = P (Z dP - Dsum)), masks, GQA,
/// tails and all; also with a key that places the tensor among others
/// (samples 2 at offset 4, this rank's heads 1 of 2 parts).
TEST(Attention, DropoutMatchesUnfusedKernels) {
  for (int keyCase = 0; keyCase < 2; ++keyCase)
    for (const char *mask : {"bool", "float_keys"}) {
      SCOPED_TRACE(std::string(mask) + (keyCase ? " placed" : ""));
      AttnCase c;
      c.b = 2, c.hq = 4, c.hkv = 2, c.s = 200, c.sk = 150, c.d = 40, c.dv = 24;
      c.causal = true, c.scale = 0.2, c.seed = 23;
      AttnInputs in(c, DType::F32);
      in.hasMask = true;
      if (std::string(mask) == "float_keys") {
        in.mask = genValues(DType::F32, {c.b, 1, 1, c.sk}, c.seed, 10);
      } else {
        in.mask = Host(DType::Bool, {c.b, 1, c.s, c.sk});
        for (int64_t e = 0; e < in.mask.numel(); ++e)
          in.mask.set(e, e % c.sk == 0 ||
                             uniformAt(c.seed, 10, uint64_t(e)) < 0.8);
      }
      DropoutKey key;
      key.seed = 1234, key.step = 7, key.stream = 3, key.ratio = 0.3;
      if (keyCase) {
        key.samples = 2, key.sampleOffset = 4;
        key.tpDim = 1, key.tpParts = 2, key.tpBlocks = 1, key.tpIndex = 1;
      }
      Host z = dropoutFactors(c, key);
      int64_t dropped = 0;
      for (int64_t i = 0; i < z.numel(); ++i)
        dropped += z.get(i) == 0;
      double rate = double(dropped) / double(z.numel());
      EXPECT_NEAR(rate, 0.3, 0.01);
      AttnResults fused = runAttention(c, in, DType::F32, &key);
      AttnResults ref = unfused(c, in, &z);
      AttnResults plain = unfused(c, in);
      for (int i = 0; i < fused.parts; ++i) {
        double rel = maxRelDiff(fused.part(i).values(), ref.part(i).values());
        std::printf("[ dropout  ] %s%s: %s %.1e\n", mask,
                    keyCase ? " placed" : "", kPartNames[i], rel);
        EXPECT_LE(rel, 1e-5) << kPartNames[i];
      }
      // The mask matters (lse is the undropped softmax's either way).
      EXPECT_GT(maxRelDiff(fused.out.values(), plain.out.values()), 1e-2);
      EXPECT_LE(maxRelDiff(fused.lseSum.values(), plain.lseSum.values()), 1e-5);
    }
}

/// bshd and packed layouts draw the heads-first kernels' mask: the same
/// bytes with a dropout; ratio 1 drops everything (zeros); a key that
/// splits the keys' dim, or a ratio outside [0, 1], is refused.
TEST(Attention, DropoutInEveryLayout) {
  AttnCase c;
  c.b = 2, c.hq = 4, c.hkv = 2, c.s = c.sk = 70, c.d = c.dv = 16;
  c.causal = true, c.scale = 0.25, c.seed = 31;
  AttnInputs in(c, DType::F32);
  DropoutKey key;
  key.seed = 5, key.step = 2, key.stream = 1, key.ratio = 0.2;
  AttnResults want = runAttention(c, in, DType::F32, &key);
  float scale = static_cast<float>(c.scale);
  Host q = swapHeadsSeq(in.q), k = swapHeadsSeq(in.k), v = swapHeadsSeq(in.v),
       dout = swapHeadsSeq(in.dout);
  AttnResults got(c, DType::F32, in);
  Host out = swapHeadsSeq(got.out), dq = swapHeadsSeq(got.dq),
       dk = swapHeadsSeq(got.dk), dv = swapHeadsSeq(got.dv);
  ASSERT_OK(attention(q, k, v, nullptr, scale, true, out, got.lse, true, &key));
  ASSERT_OK(attentionGrad(q, k, v, out, got.lse, dout, nullptr, scale, true, dq,
                          dk, dv, true, &key));
  EXPECT_EQ(swapHeadsSeq(out).bytes, want.out.bytes) << "bshd out";
  EXPECT_EQ(swapHeadsSeq(dq).bytes, want.dq.bytes) << "bshd dq";
  EXPECT_EQ(swapHeadsSeq(dv).bytes, want.dv.bytes) << "bshd dv";
  Host qkv = packHeads({&in.q, &in.k, &in.v}), lse(DType::F32, {2, 4, 70, 2}),
       pout(DType::F32, {c.b, c.s, c.hq, c.d}), dqkv(DType::F32, qkv.ref.shape);
  ASSERT_OK(packedAttention(qkv, c.hkv, nullptr, scale, true, pout, lse, &key));
  ASSERT_OK(packedAttentionGrad(qkv, c.hkv, pout, lse, dout, nullptr, scale,
                                true, dqkv, &key));
  EXPECT_EQ(swapHeadsSeq(pout).bytes, want.out.bytes) << "packed out";
  EXPECT_EQ(unpackHeads(dqkv, 0, c.hq).bytes, want.dq.bytes) << "packed dq";
  EXPECT_EQ(unpackHeads(dqkv, c.hq + c.hkv, c.hkv).bytes, want.dv.bytes)
      << "packed dv";

  DropoutKey all = key;
  all.ratio = 1;
  AttnResults none = runAttention(c, in, DType::F32, &all);
  for (const Host *h : {&none.out, &none.dq, &none.dk, &none.dv})
    for (double x : h->values())
      EXPECT_EQ(x, 0.0);

  DropoutKey keys = key;
  keys.tpDim = 3, keys.tpParts = 2;
  Status s = attention(in.q, in.k, in.v, nullptr, scale, true, got.out, got.lse,
                       false, &keys);
  EXPECT_NE(s.error.find("attention: its dropout's key splits the keys' dim"),
            std::string::npos)
      << s.error;
  DropoutKey bad = key;
  bad.ratio = 1.5;
  s = attentionGrad(in.q, in.k, in.v, want.out, want.lse, in.dout, nullptr,
                    scale, true, got.dq, got.dk, got.dv, false, &bad);
  EXPECT_NE(s.error.find("attention_grad: dropout: ratio 1.5"),
            std::string::npos)
      << s.error;
}

/// Large scores (largeScoreCase: 2500 + small integers, exact whatever
/// the summation order): the probabilities are recomputed from (m, log l)
/// as exactly as the unfused softmax computes them; with one f32 lse = m +
/// log l, rounded to 2.4e-4 at 2500, out and the gradients were 1e-4 off.
TEST(Attention, LargeScoresMatchUnfused) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    AttnCase c = largeScoreCase(causal);
    AttnInputs in = largeScoreInputs(c);
    AttnResults fused = runAttention(c, in, DType::F32);
    AttnResults ref = unfused(c, in);
    for (int i = 0; i < fused.parts; ++i) {
      double rel = maxRelDiff(fused.part(i).values(), ref.part(i).values());
      std::printf("[ large    ] %s: %s %.1e\n", causal ? "causal" : "full",
                  kPartNames[i], rel);
      EXPECT_LE(rel, 1e-5) << kPartNames[i];
    }
  }
}

/// A query whose keys are all masked (or causal with none before it) gets
/// out 0 and lse -inf, and no gradient; the other rows are unaffected.
TEST(Attention, QueryWithoutKeysGivesZero) {
  AttnCase c;
  c.b = 1, c.hq = 2, c.hkv = 1, c.s = 3, c.sk = 5, c.d = 8, c.dv = 8;
  c.scale = 0.5;
  AttnInputs in(c, DType::F32);
  in.hasMask = true;
  in.mask = make(DType::Bool, {1, 1, 3, 5},
                 {1, 0, 1, 1, 0, /**/ 0, 0, 0, 0, 0, /**/ 1, 1, 1, 1, 1});
  AttnResults r = runAttention(c, in, DType::F32);
  AttnResults ref = unfused(c, in);
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_EQ(r.lse.get(2 * (h * 3 + 1)), -kInf);
    EXPECT_EQ(r.lse.get(2 * (h * 3 + 1) + 1), -kInf);
    for (int64_t e = 0; e < 8; ++e) {
      EXPECT_EQ(r.out.get((h * 3 + 1) * 8 + e), 0.0);
      EXPECT_EQ(r.dq.get((h * 3 + 1) * 8 + e), 0.0);
      for (int64_t i : {0, 2}) {
        int64_t at = (h * 3 + i) * 8 + e;
        EXPECT_NEAR(r.out.get(at), ref.out.get(at), 1e-6);
        EXPECT_NEAR(r.dq.get(at), ref.dq.get(at), 1e-6);
      }
    }
  }
  // No keys at all: every query has none.
  AttnCase e = c;
  e.sk = 0;
  AttnInputs none(e, DType::F32);
  AttnResults z = runAttention(e, none, DType::F32);
  for (int64_t i = 0; i < z.out.numel(); ++i)
    EXPECT_EQ(z.out.get(i), 0.0);
  for (int64_t i = 0; i < z.lse.numel(); ++i)
    EXPECT_EQ(z.lse.get(i), -kInf);
}

/// The failure message of attention (grad: attentionGrad) on the case with
/// one operand replaced.
std::string attnError(const AttnCase &c, const AttnInputs &in,
                      const AttnResults &r, bool grad) {
  Status s = grad
                 ? attentionGrad(in.q, in.k, in.v, r.out, r.lse, in.dout,
                                 in.maskRef(), 1.0f, c.causal, r.dq, r.dk, r.dv)
                 : attention(in.q, in.k, in.v, in.maskRef(), 1.0f, c.causal,
                             r.out, r.lse);
  EXPECT_FALSE(s.ok());
  return s.error;
}

/// With bshd the operands and results are [B, S, H, D]: the same bytes as
/// heads-first on the transposed tensors (lse and the mask's gradient
/// unchanged), on every PyTorch case (masks, GQA, causal) in f32 and bf16.
TEST(Attention, BshdLayoutGivesTheBytesOfHeadsFirst) {
  for (DType t : {DType::F32, DType::BF16})
    for (const AttnCase &c : loadAttnCases()) {
      SCOPED_TRACE(c.name + " " + smp::base::dtypeName(t));
      AttnInputs in(c, t);
      AttnResults want = runAttention(c, in, t);
      Host q = swapHeadsSeq(in.q), k = swapHeadsSeq(in.k),
           v = swapHeadsSeq(in.v), dout = swapHeadsSeq(in.dout);
      AttnResults got(c, t, in);
      Host out = swapHeadsSeq(got.out), dq = swapHeadsSeq(got.dq),
           dk = swapHeadsSeq(got.dk), dv = swapHeadsSeq(got.dv);
      float scale = static_cast<float>(c.scale);
      ASSERT_OK(attention(q, k, v, in.maskRef(), scale, c.causal, out, got.lse,
                          true));
      ASSERT_OK(attentionGrad(q, k, v, out, got.lse, dout, in.maskRef(), scale,
                              c.causal, dq, dk, dv, true));
      if (floatMask(in))
        ASSERT_OK(attentionMaskGrad(q, k, v, out, got.lse, dout, in.mask,
                                    scale, c.causal, got.dmask, true));
      got.out = swapHeadsSeq(out), got.dq = swapHeadsSeq(dq),
      got.dk = swapHeadsSeq(dk), got.dv = swapHeadsSeq(dv);
      got.sumLse();
      for (int i = 0; i < want.parts; ++i)
        EXPECT_EQ(got.part(i).bytes, want.part(i).bytes) << kPartNames[i];
    }
  // Its shapes are checked in its layout.
  AttnCase c;
  c.b = 2, c.hq = 4, c.hkv = 2, c.s = 3, c.sk = 5, c.d = 8, c.dv = 8;
  AttnInputs in(c, DType::F32);
  Host out(DType::F32, {2, 4, 3, 8}), lse(DType::F32, {2, 4, 3, 2});
  Status s = attention(swapHeadsSeq(in.q), swapHeadsSeq(in.k),
                       swapHeadsSeq(in.v), nullptr, 1.0f, false, out, lse, true);
  EXPECT_NE(s.error.find("attention: out has shape [2, 4, 3, 8], expected [2, 3, 4, 8]"),
            std::string::npos)
      << s.error;
  s = attention(in.q, in.k, in.v, nullptr, 1.0f, false, out, lse, true);
  EXPECT_NE(s.error.find("attention: q has 3 heads, not a multiple of the 5 "
                         "heads of k and v"),
            std::string::npos)
      << s.error;
}

/// The cases a packed qkv can hold (S = Sk, D = Dv): the PyTorch cases'
/// and a float and a padding mask over them.
std::vector<AttnCase> packableCases() {
  std::vector<AttnCase> cases;
  for (const AttnCase &c : loadAttnCases())
    if (c.s == c.sk && c.d == c.dv)
      cases.push_back(c);
  AttnCase c;
  c.name = "packed float mask";
  c.b = 2, c.hq = 4, c.hkv = 2, c.s = c.sk = 9, c.d = c.dv = 16;
  c.causal = true, c.mask = "float_h", c.scale = 0.25, c.seed = 40;
  cases.push_back(c);
  c.name = "packed pad mask";
  c.hq = c.hkv = 2, c.causal = false, c.mask = "pad_b", c.seed = 41;
  cases.push_back(c);
  return cases;
}

/// Packed: q, k and v read in place from one [B, S, Hq + 2 Hkv, D] and dq,
/// dk, dv written into one of its shape give the bytes of heads-first on
/// the separate tensors, in f32 and bf16 (causal, GQA, Bool, float and
/// padding masks); every element of dqkv is written.
TEST(Attention, PackedGivesTheBytesOfHeadsFirst) {
  std::vector<AttnCase> cases = packableCases();
  EXPECT_GE(cases.size(), 6u);
  for (DType t : {DType::F32, DType::BF16})
    for (const AttnCase &c : cases) {
      SCOPED_TRACE(c.name + " " + smp::base::dtypeName(t));
      AttnInputs in(c, t);
      AttnResults want = runAttention(c, in, t);
      Host qkv = packHeads({&in.q, &in.k, &in.v}), dout = swapHeadsSeq(in.dout);
      Host out(t, {c.b, c.s, c.hq, c.d}), lse(DType::F32, {c.b, c.hq, c.s, 2}),
          dqkv(t, qkv.ref.shape);
      for (int64_t i = 0; i < dqkv.numel(); ++i)
        dqkv.set(i, 7.0); // not a gradient: each must be overwritten
      float scale = static_cast<float>(c.scale);
      ASSERT_OK(
          packedAttention(qkv, c.hkv, in.maskRef(), scale, c.causal, out, lse));
      ASSERT_OK(packedAttentionGrad(qkv, c.hkv, out, lse, dout, in.maskRef(),
                                    scale, c.causal, dqkv));
      EXPECT_EQ(swapHeadsSeq(out).bytes, want.out.bytes) << "out";
      EXPECT_EQ(lse.bytes, want.lse.bytes) << "lse";
      EXPECT_EQ(unpackHeads(dqkv, 0, c.hq).bytes, want.dq.bytes) << "dq";
      EXPECT_EQ(unpackHeads(dqkv, c.hq, c.hkv).bytes, want.dk.bytes) << "dk";
      EXPECT_EQ(unpackHeads(dqkv, c.hq + c.hkv, c.hkv).bytes, want.dv.bytes)
          << "dv";
    }
}

TEST(Attention, PackedRefusesBadInputs) {
  Host qkv(DType::F32, {2, 3, 8, 8}), out(DType::F32, {2, 3, 4, 8}),
      lse(DType::F32, {2, 4, 3, 2});
  auto error = [](Status s) { return s.ok() ? std::string("ok") : s.error; };
  for (int64_t kv : {0, 3, 4})
    EXPECT_NE(
        error(packedAttention(qkv, kv, nullptr, 1.0f, false, out, lse))
            .find("packed_attention: qkv [2, 3, 8, 8] has 8 heads, not "
                  "Hq + 2 Hkv with Hq a positive multiple of kv_heads = " +
                  std::to_string(kv)),
        std::string::npos)
        << kv;
  Host heads(DType::F32, {2, 4, 3, 8}); // out heads-first
  EXPECT_NE(error(packedAttention(qkv, 2, nullptr, 1.0f, false, heads, lse))
                .find("packed_attention: out has shape [2, 4, 3, 8], "
                      "expected [2, 3, 4, 8]"),
            std::string::npos);
  Host flat(DType::F32, {2, 3, 64});
  EXPECT_NE(error(packedAttention(flat, 2, nullptr, 1.0f, false, out, lse))
                .find("packed_attention: qkv must be [B, S, Hq + 2 Hkv, D], "
                      "got [2, 3, 64]"),
            std::string::npos);
  ASSERT_OK(packedAttention(qkv, 2, nullptr, 1.0f, false, out, lse));
  Host dqkv(DType::F32, {2, 3, 4, 8});
  EXPECT_NE(error(packedAttentionGrad(qkv, 2, out, lse, out, nullptr, 1.0f,
                                      false, dqkv))
                .find("packed_attention_grad: dqkv has shape [2, 3, 4, 8], "
                      "expected [2, 3, 8, 8]"),
            std::string::npos);
}

TEST(Attention, RefusesBadInputs) {
  AttnCase c;
  c.b = 2, c.hq = 4, c.hkv = 2, c.s = 3, c.sk = 5, c.d = 8, c.dv = 6;
  auto expectError =
      [&](const std::function<void(AttnInputs &, AttnResults &)> &edit,
          const std::string &want, bool grad = false) {
        AttnInputs in(c, DType::F32);
        AttnResults r(c, DType::F32, in);
        edit(in, r);
        std::string got = attnError(c, in, r, grad);
        EXPECT_NE(got.find(want), std::string::npos)
            << "got '" << got << "', want '" << want << "'";
      };
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.q = Host(DType::F64, {2, 4, 3, 8});
      },
      "attention: q is 2x4x3x8xf64, expected f32, f16 or bf16");
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.k = Host(DType::BF16, {2, 2, 5, 8});
      },
      "attention: q, k and v must have one dtype");
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.q = Host(DType::F32, {4, 3, 8});
      },
      "attention: q must be [B, Hq, S, D], got [4, 3, 8]");
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.k = Host(DType::F32, {2, 2, 5, 7});
      },
      "attention: k [2, 2, 5, 7] does not match q [2, 4, 3, 8]");
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.v = Host(DType::F32, {2, 2, 4, 6});
      },
      "attention: v [2, 2, 4, 6] does not match k [2, 2, 5, 8]");
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.k = Host(DType::F32, {2, 3, 5, 8});
        in.v = Host(DType::F32, {2, 3, 5, 6});
      },
      "attention: q has 4 heads, not a multiple of the 3 heads of k and v");
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.hasMask = true;
        in.mask = Host(DType::Bool, {2, 2, 3, 5});
      },
      "attention: mask [2, 2, 3, 5] must be rank 4 with each dim 1 or that of "
      "[B, Hq, S, Sk] = [2, 4, 3, 5]");
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.hasMask = true;
        in.mask = Host(DType::F32, {3, 5});
      },
      "attention: mask [3, 5] must be rank 4");
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.hasMask = true;
        in.mask = Host(DType::I64, {1, 1, 3, 5});
      },
      "attention: mask is 1x1x3x5xi64, expected bool or q's element type f32");
  expectError(
      [](AttnInputs &, AttnResults &r) {
        r.out = Host(DType::F32, {2, 4, 3, 8});
      },
      "attention: out has shape [2, 4, 3, 8], expected [2, 4, 3, 6]");
  expectError(
      [](AttnInputs &, AttnResults &r) {
        r.out = Host(DType::F16, {2, 4, 3, 6});
      },
      "attention: out is 2x4x3x6xf16, expected element type f32");
  expectError(
      [](AttnInputs &, AttnResults &r) {
        r.lse = Host(DType::F32, {2, 4, 3});
      },
      "attention: lse has shape [2, 4, 3], expected [2, 4, 3, 2]");
  expectError(
      [](AttnInputs &, AttnResults &r) {
        r.lse = Host(DType::BF16, {2, 4, 3, 2});
      },
      "attention: lse is 2x4x3x2xbf16, expected element type f32");
  // attention_grad: the same checks, then the gradients.
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.v = Host(DType::F32, {2, 2, 4, 6});
      },
      "attention_grad: v [2, 2, 4, 6] does not match k", true);
  expectError(
      [](AttnInputs &in, AttnResults &) {
        in.dout = Host(DType::F32, {2, 4, 3, 8});
      },
      "attention_grad: dout has shape [2, 4, 3, 8], expected [2, 4, 3, 6]",
      true);
  expectError(
      [](AttnInputs &, AttnResults &r) {
        r.dq = Host(DType::F32, {2, 4, 3, 6});
      },
      "attention_grad: dq has shape [2, 4, 3, 6], expected [2, 4, 3, 8]", true);
  expectError(
      [](AttnInputs &, AttnResults &r) {
        r.dk = Host(DType::F32, {2, 4, 5, 8});
      },
      "attention_grad: dk has shape [2, 4, 5, 8], expected [2, 2, 5, 8]", true);
  expectError(
      [](AttnInputs &, AttnResults &r) {
        r.dv = Host(DType::BF16, {2, 2, 5, 6});
      },
      "attention_grad: dv is 2x2x5x6xbf16, expected element type f32", true);
  // attention_mask_grad: the same checks, an additive mask, dmask like it.
  auto maskGradError = [&](DType maskType, std::vector<int64_t> dmaskShape,
                           const std::string &want) {
    AttnInputs in(c, DType::F32);
    AttnResults r(c, DType::F32, in);
    in.mask = Host(maskType, {1, 4, 3, 5});
    Host dmask(DType::F32, std::move(dmaskShape));
    Status s = attentionMaskGrad(in.q, in.k, in.v, r.out, r.lse, in.dout,
                                 in.mask, 1.0f, false, dmask.ref);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.error.find(want), std::string::npos)
        << "got '" << s.error << "', want '" << want << "'";
  };
  maskGradError(DType::Bool, {1, 4, 3, 5},
                "attention_mask_grad: mask is 1x4x3x5xbool; only an additive "
                "mask of q's dtype has a gradient");
  maskGradError(DType::F32, {1, 1, 3, 5},
                "attention_mask_grad: dmask has shape [1, 1, 3, 5], expected "
                "[1, 4, 3, 5]");
}

} // namespace
} // namespace smp::kernels::cpu::test
