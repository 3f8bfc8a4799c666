//===- AttentionRefs.h - Attention test cases and their inputs ----*- C++
//-*-===//
//
// The cases of test/unit/kernels/Inputs/attention/cases.txt (written with
// PyTorch's references by python/make_attention_refs.py) and the inputs
// both sides generate from them: splitmix64 of (seed * 16 + tensor id) <<
// 32 plus the element index, its top 24 bits as a multiple of 2^-23 in
// [-1, 1) (exact in every float type's f32 compute). Shared by the CPU and
// CUDA kernel tests.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TEST_UNIT_KERNELS_ATTENTIONREFS_H
#define SMP_TEST_UNIT_KERNELS_ATTENTIONREFS_H

#include "TestUtil.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace smp::kernels::cpu::test {

struct AttnCase {
  std::string name, mask = "none";
  int64_t b = 1, hq = 1, hkv = 1, s = 1, sk = 1, d = 16, dv = 16;
  bool causal = false;
  double scale = 1;
  uint64_t seed = 1;
};

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Element i of generator stream (seed, id): a multiple of 2^-24 in [0, 1).
inline double uniformAt(uint64_t seed, uint64_t id, uint64_t i) {
  return double(splitmix64(((seed * 16 + id) << 32) + i) >> 40) /
         double(1 << 24);
}

/// Tensor `id` of a case: values 2u - 1 in dtype t.
inline Host genValues(DType t, std::vector<int64_t> shape, uint64_t seed,
                      uint64_t id) {
  Host h(t, std::move(shape));
  for (int64_t i = 0; i < h.numel(); ++i)
    h.set(i, 2.0 * uniformAt(seed, id, static_cast<uint64_t>(i)) - 1.0);
  return h;
}

/// The case's mask in dtype t for float masks (make_attention_refs.py's
/// make_mask); an empty Host for "none".
inline Host genMask(const AttnCase &c, DType t) {
  double inf = std::numeric_limits<double>::infinity();
  if (c.mask == "bool_b1") {
    Host m(DType::Bool, {c.b, 1, c.s, c.sk});
    for (int64_t i = 0; i < m.numel(); ++i)
      m.set(i, i % c.sk == 0 || uniformAt(c.seed, 10, uint64_t(i)) < 0.7);
    return m;
  }
  if (c.mask == "float_h") {
    Host m(t, {1, c.hq, c.s, c.sk});
    for (int64_t i = 0; i < m.numel(); ++i) {
      double u = uniformAt(c.seed, 10, uint64_t(i)),
             w = uniformAt(c.seed, 11, uint64_t(i));
      m.set(i, w < 0.2 && i % c.sk != 0 ? -inf : 2.0 * (2.0 * u - 1.0));
    }
    return m;
  }
  if (c.mask == "pad_b") {
    Host m(t, {c.b, 1, 1, c.sk});
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t j = 0; j < c.sk; ++j)
        m.set(b * c.sk + j, b && j >= c.sk - 2 * b ? -inf : 0.0);
    return m;
  }
  return Host();
}

/// The fixtures' directory: $SMP_ATTENTION_FIXTURES where set (a test
/// binary run from another checkout: scripts/device-kit.sh), else the
/// source tree's.
inline std::string attnFixtureDir() {
  const char *dir = std::getenv("SMP_ATTENTION_FIXTURES");
  return dir && *dir ? dir : SMP_ATTENTION_FIXTURES;
}

/// The cases of cases.txt (empty, with a test failure, when unreadable).
inline std::vector<AttnCase> loadAttnCases() {
  std::vector<AttnCase> cases;
  std::ifstream in(attnFixtureDir() + "/cases.txt");
  if (!in) {
    ADD_FAILURE() << "cannot read " << attnFixtureDir() << "/cases.txt";
    return cases;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream ls(line);
    AttnCase c;
    int causal = 0;
    ls >> c.name >> c.b >> c.hq >> c.hkv >> c.s >> c.sk >> c.d >> c.dv >>
        causal >> c.mask >> c.scale >> c.seed;
    EXPECT_TRUE(bool(ls)) << "bad line in cases.txt: " << line;
    c.causal = causal != 0;
    cases.push_back(c);
  }
  return cases;
}

/// The inputs of a case in dtype t: q, k, v, dout and the mask.
struct AttnInputs {
  Host q, k, v, dout, mask;
  bool hasMask = false;
  AttnInputs(const AttnCase &c, DType t)
      : q(genValues(t, {c.b, c.hq, c.s, c.d}, c.seed, 0)),
        k(genValues(t, {c.b, c.hkv, c.sk, c.d}, c.seed, 1)),
        v(genValues(t, {c.b, c.hkv, c.sk, c.dv}, c.seed, 2)),
        dout(genValues(t, {c.b, c.hq, c.s, c.dv}, c.seed, 3)),
        mask(genMask(c, t)), hasMask(c.mask != "none") {}
  const TensorRef *maskRef() const { return hasMask ? &mask.ref : nullptr; }
};

/// A case whose scores are large and exact: q and k in {-1, 0, 1}, an
/// additive float mask of 2500 + {-2 .. 2} (largeScoreInputs), scale 1.
inline AttnCase largeScoreCase(bool causal) {
  AttnCase c;
  c.name = causal ? "large causal" : "large";
  c.b = 1, c.hq = 2, c.hkv = 1, c.s = 70, c.sk = 90, c.d = 16, c.dv = 24;
  c.causal = causal, c.scale = 1.0, c.seed = 23;
  return c;
}
inline AttnInputs largeScoreInputs(const AttnCase &c) {
  AttnInputs in(c, DType::F32);
  auto smallInt = [&](uint64_t id, int64_t i, int n) {
    return std::floor(n * uniformAt(c.seed, id, uint64_t(i))) - n / 2;
  };
  for (Host *t : {&in.q, &in.k})
    for (int64_t i = 0; i < t->numel(); ++i)
      t->set(i, smallInt(t == &in.q ? 30 : 31, i, 3));
  in.hasMask = true;
  in.mask = Host(DType::F32, {1, 1, c.s, c.sk});
  for (int64_t i = 0; i < in.mask.numel(); ++i)
    in.mask.set(i, 2500.0 + smallInt(32, i, 5));
  return in;
}

/// The log-sum-exp [B, H, S] of the kernels' two parts [B, H, S, 2]
/// (m, log l): their sum in double (-inf where a query has no key), which
/// the references give.
inline Host lseSum(const Host &parts) {
  const std::vector<int64_t> &d = parts.ref.shape;
  Host r(DType::F32, {d[0], d[1], d[2]});
  for (int64_t i = 0; i < r.numel(); ++i)
    r.set(i, parts.get(2 * i) + parts.get(2 * i + 1));
  return r;
}

/// max |got - want| / max |want| (infinities and NaNs must match exactly: a
/// mismatch gives inf).
inline double maxRelDiff(const std::vector<double> &got,
                         const std::vector<double> &want) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i]))
      return std::numeric_limits<double>::infinity();
    if (std::isnan(want[i]))
      continue;
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      if (got[i] != want[i])
        return std::numeric_limits<double>::infinity();
      continue;
    }
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    ref = std::max(ref, std::fabs(want[i]));
  }
  if (got.size() != want.size())
    return std::numeric_limits<double>::infinity();
  return ref > 0 ? diff / ref : diff;
}

/// h [B, X, Y, D] as [B, Y, X, D]: the heads-first operands of a case in
/// the bshd layout, and back.
inline Host swapHeadsSeq(const Host &h) {
  const std::vector<int64_t> &d = h.ref.shape;
  Host r(h.ref.dtype, {d[0], d[2], d[1], d[3]});
  size_t row = static_cast<size_t>(d[3]) * smp::base::dtypeSize(h.ref.dtype);
  for (int64_t b = 0; b < d[0]; ++b)
    for (int64_t x = 0; x < d[1]; ++x)
      for (int64_t y = 0; y < d[2]; ++y)
        std::memcpy(r.bytes.data() + ((b * d[2] + y) * d[1] + x) * row,
                    h.bytes.data() + ((b * d[1] + x) * d[2] + y) * row, row);
  return r;
}

/// Heads-first parts [B, H_i, S, D] (q, then k, then v) packed as one
/// [B, S, sum H_i, D]: packedAttention's qkv.
inline Host packHeads(std::initializer_list<const Host *> parts) {
  const std::vector<int64_t> &d0 = (*parts.begin())->ref.shape;
  int64_t heads = 0;
  for (const Host *p : parts)
    heads += p->ref.shape[1];
  Host r((*parts.begin())->ref.dtype, {d0[0], d0[2], heads, d0[3]});
  size_t row = static_cast<size_t>(d0[3]) * smp::base::dtypeSize(r.ref.dtype);
  int64_t first = 0;
  for (const Host *p : parts) {
    int64_t n = p->ref.shape[1];
    for (int64_t b = 0; b < d0[0]; ++b)
      for (int64_t h = 0; h < n; ++h)
        for (int64_t s = 0; s < d0[2]; ++s)
          std::memcpy(r.bytes.data() +
                          ((b * d0[2] + s) * heads + first + h) * row,
                      p->bytes.data() + ((b * n + h) * d0[2] + s) * row, row);
    first += n;
  }
  return r;
}

/// Heads [first, first + n) of a packed [B, S, H, D] as [B, n, S, D].
inline Host unpackHeads(const Host &packed, int64_t first, int64_t n) {
  const std::vector<int64_t> &d = packed.ref.shape;
  Host r(packed.ref.dtype, {d[0], n, d[1], d[3]});
  size_t row = static_cast<size_t>(d[3]) * smp::base::dtypeSize(r.ref.dtype);
  for (int64_t b = 0; b < d[0]; ++b)
    for (int64_t h = 0; h < n; ++h)
      for (int64_t s = 0; s < d[1]; ++s)
        std::memcpy(r.bytes.data() + ((b * n + h) * d[1] + s) * row,
                    packed.bytes.data() +
                        ((b * d[1] + s) * d[2] + first + h) * row,
                    row);
  return r;
}

} // namespace smp::kernels::cpu::test

#endif // SMP_TEST_UNIT_KERNELS_ATTENTIONREFS_H
