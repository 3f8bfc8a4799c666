//===- CudaAttentionTest.cpp - CUDA fused attention against CPU and torch -===//
//
// The CUDA attention kernels on the PyTorch cases of AttentionTest
// (Inputs/attention) against both the PyTorch references and the CPU
// kernels (the float masks' gradient too), in f32, f16 and bf16; a larger
// causal GQA case with a Bool mask against the CPU; the backward's bytes do
// not change between two runs; the bshd and packed layouts against
// heads-first; the shared argument check's message. Skips
// without a GPU.
//
//===----------------------------------------------------------------------===//

#include "AttentionRefs.h"
#include "CudaTestUtil.h"

namespace smp_cuda_test {
namespace {

namespace kt = smp::kernels::cpu::test;

/// out, lse, dq, dk, dv (and dmask for a float mask) of a case on the CPU
/// (Host) or the GPU (Dev).
struct CpuResults {
  Host part[6];
};

bool floatMask(const kt::AttnInputs &in) {
  return in.hasMask && in.mask.ref.dtype != DType::Bool;
}

std::vector<std::vector<int64_t>> shapesOf(const kt::AttnCase &c,
                                           const kt::AttnInputs &in) {
  std::vector<std::vector<int64_t>> s = {{c.b, c.hq, c.s, c.dv},
                                         {c.b, c.hq, c.s, 2},
                                         {c.b, c.hq, c.s, c.d},
                                         {c.b, c.hkv, c.sk, c.d},
                                         {c.b, c.hkv, c.sk, c.dv}};
  if (floatMask(in))
    s.push_back(in.mask.ref.shape);
  return s;
}

DType partType(int i, DType t) { return i == 1 ? DType::F32 : t; }

CpuResults runCpu(const kt::AttnCase &c, const kt::AttnInputs &in, DType t,
                  const smp::kernels::DropoutKey *drop = nullptr) {
  CpuResults r;
  auto shapes = shapesOf(c, in);
  for (size_t i = 0; i < shapes.size(); ++i)
    r.part[i] = Host(partType(int(i), t), shapes[i]);
  float scale = static_cast<float>(c.scale);
  EXPECT_OK(cpuk::attention(in.q, in.k, in.v, in.maskRef(), scale, c.causal,
                            r.part[0], r.part[1], false, drop));
  EXPECT_OK(cpuk::attentionGrad(in.q, in.k, in.v, r.part[0], r.part[1], in.dout,
                                in.maskRef(), scale, c.causal, r.part[2],
                                r.part[3], r.part[4], false, drop));
  if (floatMask(in))
    EXPECT_OK(cpuk::attentionMaskGrad(in.q, in.k, in.v, r.part[0], r.part[1],
                                      in.dout, in.mask, scale, c.causal,
                                      r.part[5], false, drop));
  r.part[1] = kt::lseSum(r.part[1]); // as the references give it
  return r;
}

/// The GPU's results, downloaded (heads-first; with bshd the kernels run on
/// [B, S, H, D] copies of the operands and their results are transposed
/// back).
std::vector<Host> runGpu(const kt::AttnCase &c, const kt::AttnInputs &in,
                         DType t, bool bshd = false,
                         const smp::kernels::DropoutKey *drop = nullptr) {
  auto shapes = shapesOf(c, in);
  auto layout = [&](const Host &h) { return bshd ? kt::swapHeadsSeq(h) : h; };
  for (int i : {0, 2, 3, 4})
    if (bshd)
      std::swap(shapes[i][1], shapes[i][2]);
  Dev q(layout(in.q)), k(layout(in.k)), v(layout(in.v)), dout(layout(in.dout));
  std::unique_ptr<Dev> mask;
  if (in.hasMask)
    mask = std::make_unique<Dev>(in.mask);
  Dev out(t, shapes[0]), lse(DType::F32, shapes[1]), dq(t, shapes[2]),
      dk(t, shapes[3]), dv(t, shapes[4]);
  float scale = static_cast<float>(c.scale);
  const TensorRef *m = mask ? mask->ptr() : nullptr;
  EXPECT_OK(cuk::attention(q, k, v, m, scale, c.causal, out, lse, bshd, drop));
  EXPECT_OK(cuk::attentionGrad(q, k, v, out, lse, dout, m, scale, c.causal, dq,
                               dk, dv, bshd, drop));
  std::unique_ptr<Dev> dmask;
  if (floatMask(in)) {
    dmask = std::make_unique<Dev>(t, shapes[5]);
    EXPECT_OK(cuk::attentionMaskGrad(q, k, v, out, lse, dout, *m, scale,
                                     c.causal, *dmask, bshd, drop));
  }
  Status s = cuk::synchronize(*sharedContext());
  EXPECT_TRUE(s.ok()) << s.error;
  std::vector<Host> r = {layout(out.download()), kt::lseSum(lse.download()),
                         layout(dq.download()), layout(dk.download()),
                         layout(dv.download())};
  if (dmask)
    r.push_back(dmask->download());
  return r;
}

const char *const kParts[] = {"out", "lse", "dq", "dk", "dv", "dmask"};

TEST_F(Cuda, AttentionMatchesPyTorchAndCpu) {
  for (const kt::AttnCase &c : kt::loadAttnCases()) {
    SCOPED_TRACE(c.name);
    kt::AttnInputs in(c, DType::F32);
    std::vector<Host> gpu = runGpu(c, in, DType::F32);
    CpuResults cpu = runCpu(c, in, DType::F32);
    std::vector<float> ref(1);
    size_t total = 0;
    for (const Host &h : gpu)
      total += static_cast<size_t>(h.numel());
    ref.resize(total);
    std::string path = kt::attnFixtureDir() + "/" + c.name + ".bin";
    std::FILE *fp = std::fopen(path.c_str(), "rb");
    ASSERT_NE(fp, nullptr) << path;
    ASSERT_EQ(std::fread(ref.data(), sizeof(float), total, fp), total);
    std::fclose(fp);
    size_t at = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      std::vector<double> got = gpu[i].values();
      std::vector<double> want(ref.begin() + at, ref.begin() + at + got.size());
      at += got.size();
      EXPECT_LE(kt::maxRelDiff(got, want), 1e-5) << kParts[i] << " vs torch";
      EXPECT_LE(kt::maxRelDiff(got, cpu.part[i].values()), 1e-5)
          << kParts[i] << " vs cpu";
    }
  }
}

TEST_F(Cuda, AttentionHalfTypesMatchCpu) {
  for (DType t : {DType::F16, DType::BF16})
    for (const kt::AttnCase &c : kt::loadAttnCases()) {
      SCOPED_TRACE(c.name + " " + smp::base::dtypeName(t));
      kt::AttnInputs in(c, t);
      std::vector<Host> gpu = runGpu(c, in, t);
      CpuResults cpu = runCpu(c, in, t);
      double tol = t == DType::F16 ? 4e-3 : 3e-2;
      for (size_t i = 0; i < gpu.size(); ++i)
        EXPECT_LE(kt::maxRelDiff(gpu[i].values(), cpu.part[i].values()),
                  i == 1 ? 1e-5 : tol)
            << kParts[i];
    }
}

/// Several tiles with tails, GQA, head dims off any tile width, causal
/// with a Bool mask; the backward gives the same bytes twice.
TEST_F(Cuda, AttentionLargerCaseMatchesCpuAndIsDeterministic) {
  kt::AttnCase c;
  c.b = 2, c.hq = 4, c.hkv = 2, c.s = 150, c.sk = 170, c.d = 40, c.dv = 24;
  c.causal = true;
  c.scale = 0.15;
  c.seed = 41;
  c.mask = "bool_b1";
  kt::AttnInputs in(c, DType::F32);
  std::vector<Host> a = runGpu(c, in, DType::F32);
  std::vector<Host> b = runGpu(c, in, DType::F32);
  CpuResults cpu = runCpu(c, in, DType::F32);
  for (int i = 0; i < 5; ++i) {
    EXPECT_LE(kt::maxRelDiff(a[i].values(), cpu.part[i].values()), 1e-5)
        << kParts[i];
    EXPECT_EQ(a[i].bytes, b[i].bytes) << kParts[i] << " differs between runs";
  }
}

/// Large, exact scores (2500 + small integers): the GPU's probabilities
/// from (m, log l) are the CPU's to 1e-5 (one f32 m + log l was 1e-4 off).
TEST_F(Cuda, AttentionLargeScoresMatchCpu) {
  for (bool causal : {false, true}) {
    kt::AttnCase c = kt::largeScoreCase(causal);
    SCOPED_TRACE(c.name);
    kt::AttnInputs in = kt::largeScoreInputs(c);
    std::vector<Host> gpu = runGpu(c, in, DType::F32);
    CpuResults cpu = runCpu(c, in, DType::F32);
    for (size_t i = 0; i < gpu.size(); ++i)
      EXPECT_LE(kt::maxRelDiff(gpu[i].values(), cpu.part[i].values()), 1e-5)
          << kParts[i];
  }
}

/// The cases of the tensor-core tests (below).
std::vector<kt::AttnCase> tensorCoreCases() {
  std::vector<kt::AttnCase> cases;
  auto add = [&](int64_t b, int64_t hq, int64_t hkv, int64_t s, int64_t sk,
                 int64_t d, bool causal, const char *mask) {
    kt::AttnCase c;
    c.name = "d" + std::to_string(d) + (causal ? " causal " : " ") + mask +
             " s" + std::to_string(s) + " sk" + std::to_string(sk);
    c.b = b, c.hq = hq, c.hkv = hkv, c.s = s, c.sk = sk, c.d = c.dv = d;
    c.causal = causal;
    c.mask = mask;
    c.scale = 1.0 / std::sqrt(double(d));
    c.seed = 50 + cases.size();
    cases.push_back(c);
  };
  add(1, 2, 1, 130, 70, 64, false, "none"); // GQA, tails on both sides
  add(2, 2, 1, 150, 150, 64, true, "none"); // three tiles, the diagonal
  add(1, 2, 2, 70, 140, 64, true, "bool_b1");
  add(1, 2, 2, 65, 66, 64, false, "float_h");
  add(2, 1, 1, 40, 100, 64, false, "pad_b");
  add(1, 2, 1, 70, 70, 32, true, "none");
  add(1, 1, 1, 70, 50, 96, false, "none");
  add(1, 1, 1, 70, 70, 128, true, "bool_b1");
  return cases;
}

/// The f16/bf16 cases the tensor-core kernels take (AttentionMma.cu): each
/// head dim they have, tiles with tails, GQA, causal and not, a Bool mask,
/// a float mask with -inf and a padding mask. Against the CPU (f32 compute
/// throughout; the tensor cores' P and dS are rounded to f16/bf16): at
/// most 8e-4 (f16) and 7.1e-3 (bf16) of the largest value on the emulator,
/// checked at 2e-3 and 1.5e-2; lse within 1e-5; the same bytes twice (no
/// atomics; bf16).
TEST_F(Cuda, AttentionTensorCoresMatchCpuAndAreDeterministic) {
  std::vector<kt::AttnCase> cases = tensorCoreCases();
  for (DType t : {DType::F16, DType::BF16})
    for (const kt::AttnCase &c : cases) {
      SCOPED_TRACE(c.name + " " + smp::base::dtypeName(t));
      kt::AttnInputs in(c, t);
      // (cudaMalloc's tensors are aligned)
      ASSERT_TRUE(
          cuk::attentionOnTensorCores(t, c.d, c.dv, float(c.scale), {}));
      std::vector<Host> a = runGpu(c, in, t);
      CpuResults cpu = runCpu(c, in, t);
      double tol = t == DType::F16 ? 2e-3 : 1.5e-2;
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_LE(kt::maxRelDiff(a[i].values(), cpu.part[i].values()),
                  i == 1 ? 1e-5 : tol)
            << kParts[i];
      if (t != DType::BF16)
        continue; // the second run once per case (the emulator's time)
      std::vector<Host> b = runGpu(c, in, t);
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(a[i].bytes, b[i].bytes) << kParts[i] << " differs";
    }
}

/// The forward and the backward on Hopper's wgmma (setAttentionWgmma;
/// AttentionWgmma.cu, AttentionWgmmaGrad.cu), each alone and both (and
/// both on [B, S, H, D] operands), on the tensor-core cases they take (D =
/// 64: GQA, tails, causal tiles, masks),
/// f16 and bf16: within the tolerances of the mma.sync kernels against the
/// CPU, and of the mma.sync kernels (the backward alone reads the mma.sync
/// forward's out and lse); a GPU other than an H100/H200 refuses the
/// option (the test skips there). Also in smp-cuda-wgmma-tests, the
/// process the device kit runs it in.
TEST_F(Cuda, AttentionOnWgmmaMatchesCpuAndMma) {
  cuk::Context &ctx = *sharedContext();
  if (Status s = cuk::setAttentionWgmma(ctx, true); !s.ok())
    GTEST_SKIP() << s.error;
  ASSERT_OK(cuk::setAttentionWgmma(ctx, false));
  struct Passes {
    bool forward, backward;
  };
  for (DType t : {DType::F16, DType::BF16})
    for (const kt::AttnCase &c : tensorCoreCases()) {
      if (c.d != 64)
        continue;
      kt::AttnInputs in(c, t);
      std::vector<Host> mma = runGpu(c, in, t);
      CpuResults cpu = runCpu(c, in, t);
      double tol = t == DType::F16 ? 2e-3 : 1.5e-2;
      for (Passes p : {Passes{true, false}, {false, true}, {true, true}})
        for (bool bshd : {false, true}) {
          if (bshd && !(p.forward && p.backward))
            continue; // [B, S, H, D] operands once, both passes on wgmma
          SCOPED_TRACE(c.name + " " + smp::base::dtypeName(t) +
                       (p.forward ? " forward" : "") +
                       (p.backward ? " backward" : "") + " on wgmma" +
                       (bshd ? ", bshd" : ""));
          ASSERT_OK(cuk::setAttentionWgmma(ctx, p.forward, p.backward));
          std::vector<Host> wg = runGpu(c, in, t, bshd);
          ASSERT_OK(cuk::setAttentionWgmma(ctx, false));
          for (size_t i = 0; i < wg.size(); ++i) {
            EXPECT_LE(kt::maxRelDiff(wg[i].values(), cpu.part[i].values()),
                      i == 1 ? 1e-5 : tol)
                << kParts[i] << " vs cpu";
            EXPECT_LE(kt::maxRelDiff(wg[i].values(), mma[i].values()),
                      i == 1 ? 1e-5 : tol)
                << kParts[i] << " vs mma.sync";
          }
        }
    }
}

/// On wgmma, blocks of two warpgroups (setAttentionForwardRows and
/// setAttentionGradRows 128: 128 queries or keys a block, sharing the
/// walked tiles) give the bytes of one (64), both passes, on every D = 64
/// case and a longer causal one whose second warpgroups leave the tiles
/// past the diagonal: each row's products are the same products in the
/// same order, on a GPU too.
TEST_F(Cuda, AttentionOnWgmmaOf128RowsGivesTheBytesOf64) {
  cuk::Context &ctx = *sharedContext();
  if (Status s = cuk::setAttentionWgmma(ctx, true); !s.ok())
    GTEST_SKIP() << s.error;
  std::vector<kt::AttnCase> cases = tensorCoreCases();
  kt::AttnCase longer = cases[1];
  longer.name = "d64 causal none s300 sk300";
  longer.b = 1, longer.s = longer.sk = 300;
  cases.push_back(longer);
  for (const kt::AttnCase &c : cases) {
    if (c.d != 64)
      continue;
    SCOPED_TRACE(c.name);
    kt::AttnInputs in(c, DType::BF16);
    std::vector<Host> a = runGpu(c, in, DType::BF16);
    ASSERT_OK(cuk::setAttentionForwardRows(ctx, 128));
    ASSERT_OK(cuk::setAttentionGradRows(ctx, 128));
    std::vector<Host> b = runGpu(c, in, DType::BF16);
    ASSERT_OK(cuk::setAttentionForwardRows(ctx, 64));
    ASSERT_OK(cuk::setAttentionGradRows(ctx, 64));
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i].bytes, b[i].bytes) << kParts[i] << " differs";
  }
  ASSERT_OK(cuk::setAttentionWgmma(ctx, false));
}

/// A negative scale (legal in ONNX's Attention) on bf16 operands the
/// tensor cores would otherwise take: the CUDA-core kernels run it, to the
/// CPU's values. At -20 the scaled scores span hundreds of powers of two,
/// so the tensor-core kernels, which take each row's maximum before the
/// scale, would overflow their exponentials.
TEST_F(Cuda, AttentionOfANegativeScaleMatchesCpu) {
  kt::AttnCase c = tensorCoreCases()[1]; // causal, three tiles
  c.scale = -20.0;
  kt::AttnInputs in(c, DType::BF16);
  EXPECT_FALSE(
      cuk::attentionOnTensorCores(DType::BF16, c.d, c.dv, float(c.scale), {}));
  std::vector<Host> gpu = runGpu(c, in, DType::BF16);
  CpuResults cpu = runCpu(c, in, DType::BF16);
  for (size_t i = 0; i < gpu.size(); ++i)
    EXPECT_LE(kt::maxRelDiff(gpu[i].values(), cpu.part[i].values()),
              i == 1 ? 1e-5 : 1.5e-2)
        << kParts[i];
}

/// A dropout on the probabilities: the GPU draws the CPU's mask (the same
/// global indices) in the f32 kernels (tiles with tails, GQA, a float mask
/// with its gradient, a key placing the tensor among others' heads and
/// samples) and in the tensor-core kernels (bshd too), within the tests'
/// tolerances above; and the mask matters (without it, out differs).
TEST_F(Cuda, AttentionDropoutMatchesCpu) {
  smp::kernels::DropoutKey key;
  key.seed = 77, key.step = 3, key.stream = 2, key.ratio = 0.25;
  key.samples = 2, key.sampleOffset = 2;
  key.tpDim = 1, key.tpParts = 2, key.tpIndex = 1;
  kt::AttnCase c;
  c.b = 2, c.hq = 4, c.hkv = 2, c.s = 50, c.sk = 70, c.d = 40, c.dv = 24;
  c.causal = true, c.scale = 0.15, c.seed = 43, c.mask = "float_h";
  kt::AttnInputs in(c, DType::F32);
  std::vector<Host> gpu = runGpu(c, in, DType::F32, false, &key);
  CpuResults cpu = runCpu(c, in, DType::F32, &key);
  CpuResults plain = runCpu(c, in, DType::F32);
  for (size_t i = 0; i < gpu.size(); ++i)
    EXPECT_LE(kt::maxRelDiff(gpu[i].values(), cpu.part[i].values()), 1e-5)
        << kParts[i];
  EXPECT_GT(kt::maxRelDiff(cpu.part[0].values(), plain.part[0].values()), 1e-2);
  std::vector<kt::AttnCase> cases = tensorCoreCases();
  for (const kt::AttnCase &tc : {cases[1], cases[2]})
    for (bool bshd : {false, true}) {
      SCOPED_TRACE(tc.name + (bshd ? " bshd" : ""));
      kt::AttnInputs hin(tc, DType::BF16);
      std::vector<Host> a = runGpu(tc, hin, DType::BF16, bshd, &key);
      CpuResults ref = runCpu(tc, hin, DType::BF16, &key);
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_LE(kt::maxRelDiff(a[i].values(), ref.part[i].values()),
                  i == 1 ? 1e-5 : 1.5e-2)
            << kParts[i];
    }
}

/// The forward with 128 queries a block (32 a warp) gives the bytes of the
/// default 64 on every case it takes (D <= 64): each row's products and
/// softmax are the same operations in the same order.
TEST_F(Cuda, AttentionForwardOf128RowsGivesTheBytesOf64) {
  cuk::Context &ctx = *sharedContext();
  for (const kt::AttnCase &c : tensorCoreCases()) {
    if (c.d > 64)
      continue;
    SCOPED_TRACE(c.name);
    kt::AttnInputs in(c, DType::BF16);
    std::vector<Host> a = runGpu(c, in, DType::BF16);
    ASSERT_OK(cuk::setAttentionForwardRows(ctx, 128));
    std::vector<Host> b = runGpu(c, in, DType::BF16);
    ASSERT_OK(cuk::setAttentionForwardRows(ctx, 64));
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i].bytes, b[i].bytes) << kParts[i] << " differs";
  }
  Status s = cuk::setAttentionForwardRows(ctx, 96);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error.find("64 or 128 queries a block, not 96"),
            std::string::npos)
      << s.error;
}

/// The backward with 128 keys a block in its key pass and 128 queries in its
/// query pass (32 a warp) gives the bytes of the default 64 on every case it
/// takes (D <= 64; bf16, and f16 on the longer case), and on a longer causal
/// one whose blocks hold whole 128-row tiles and skip the slices past the
/// diagonal: each element's products and sums are the same operations in
/// the same order. The emulator's launches show the passes on half the
/// blocks (test/smprun/attention-grad-rows.test).
TEST_F(Cuda, AttentionGradOf128RowsGivesTheBytesOf64) {
  cuk::Context &ctx = *sharedContext();
  std::vector<kt::AttnCase> cases = tensorCoreCases();
  kt::AttnCase longer = cases[1];
  longer.name = "d64 causal none s300 sk300";
  longer.b = 1, longer.s = longer.sk = 300;
  cases.push_back(longer);
  auto same = [&](const kt::AttnCase &c, DType t) {
    SCOPED_TRACE(c.name + " " + smp::base::dtypeName(t));
    kt::AttnInputs in(c, t);
    std::vector<Host> a = runGpu(c, in, t);
    ASSERT_OK(cuk::setAttentionGradRows(ctx, 128));
    std::vector<Host> b = runGpu(c, in, t, /*bshd=*/true);
    ASSERT_OK(cuk::setAttentionGradRows(ctx, 64));
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i].bytes, b[i].bytes) << kParts[i] << " differs";
  };
  for (const kt::AttnCase &c : cases)
    if (c.d <= 64)
      same(c, DType::BF16);
  same(longer, DType::F16);
  Status s = cuk::setAttentionGradRows(ctx, 96);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error.find("64 or 128 keys (or queries) a block, not 96"),
            std::string::npos)
      << s.error;
}

/// With bshd ([B, S, H, D] operands and results) every kernel gives the
/// bytes of heads-first on the transposed tensors: the CUDA-core kernels
/// (f32, the PyTorch cases with their masks and the mask's gradient) and the
/// tensor-core ones (bf16, their cases, both forward block sizes).
TEST_F(Cuda, AttentionBshdLayoutGivesTheBytesOfHeadsFirst) {
  auto same = [](const std::vector<Host> &a, const std::vector<Host> &b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i].bytes, b[i].bytes) << kParts[i] << " differs";
  };
  for (const kt::AttnCase &c : kt::loadAttnCases()) {
    SCOPED_TRACE(c.name);
    kt::AttnInputs in(c, DType::F32);
    same(runGpu(c, in, DType::F32, true), runGpu(c, in, DType::F32));
  }
  cuk::Context &ctx = *sharedContext();
  for (const kt::AttnCase &c : tensorCoreCases()) {
    SCOPED_TRACE(c.name + " bf16");
    kt::AttnInputs in(c, DType::BF16);
    std::vector<Host> want = runGpu(c, in, DType::BF16);
    same(runGpu(c, in, DType::BF16, true), want);
    if (c.d > 64)
      continue;
    ASSERT_OK(cuk::setAttentionForwardRows(ctx, 128));
    std::vector<Host> rows128 = runGpu(c, in, DType::BF16, true);
    ASSERT_OK(cuk::setAttentionForwardRows(ctx, 64));
    same(rows128, want);
  }
}

/// Packed: q, k and v read in place from one [B, S, Hq + 2 Hkv, D] and dq,
/// dk, dv written into one give the bytes of heads-first on the separate
/// tensors: the CUDA-core kernels (f32; the PyTorch cases S = Sk, D = Dv
/// with their masks) and the tensor-core ones (bf16, their cases S = Sk, a
/// GQA one); every element of dqkv is written.
TEST_F(Cuda, AttentionPackedGivesTheBytesOfHeadsFirst) {
  auto check = [](const kt::AttnCase &c, DType t) {
    SCOPED_TRACE(c.name + " " + smp::base::dtypeName(t));
    kt::AttnInputs in(c, t);
    std::vector<Host> want = runGpu(c, in, t);
    Host packed = kt::packHeads({&in.q, &in.k, &in.v}),
         fill(t, packed.ref.shape);
    for (int64_t i = 0; i < fill.numel(); ++i)
      fill.set(i, 7.0); // not a gradient: each must be overwritten
    Dev qkv(packed), dout(kt::swapHeadsSeq(in.dout)), dqkv(fill),
        out(t, {c.b, c.s, c.hq, c.d}), lse(DType::F32, {c.b, c.hq, c.s, 2});
    std::unique_ptr<Dev> mask;
    if (in.hasMask)
      mask = std::make_unique<Dev>(in.mask);
    const TensorRef *m = mask ? mask->ptr() : nullptr;
    float scale = static_cast<float>(c.scale);
    ASSERT_OK(cuk::packedAttention(qkv, c.hkv, m, scale, c.causal, out, lse));
    ASSERT_OK(cuk::packedAttentionGrad(qkv, c.hkv, out, lse, dout, m, scale,
                                       c.causal, dqkv));
    ASSERT_OK(cuk::synchronize(*sharedContext()));
    Host grads = dqkv.download();
    std::vector<Host> got = {
        kt::swapHeadsSeq(out.download()), kt::lseSum(lse.download()),
        kt::unpackHeads(grads, 0, c.hq), kt::unpackHeads(grads, c.hq, c.hkv),
        kt::unpackHeads(grads, c.hq + c.hkv, c.hkv)};
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i].bytes, want[i].bytes) << kParts[i] << " differs";
  };
  int cases = 0;
  for (const kt::AttnCase &c : kt::loadAttnCases())
    if (c.s == c.sk && c.d == c.dv && ++cases)
      check(c, DType::F32);
  for (const kt::AttnCase &c : tensorCoreCases())
    if (c.s == c.sk && ++cases)
      check(c, DType::BF16);
  kt::AttnCase gqa = tensorCoreCases()[1];
  gqa.name = "d64 causal gqa packed";
  gqa.hq = 4, gqa.hkv = 2, gqa.s = gqa.sk = 100;
  check(gqa, DType::BF16);
  EXPECT_GE(cases, 6);
}

/// What the tensor-core kernels take: f16/bf16, D = Dv in {32, 64, 96,
/// 128}, a positive scale, 16-byte aligned tensors whose rows are less than
/// 2^31 / 128 elements apart.
TEST_F(Cuda, AttentionTensorCoresTakeHalfTypesOfTheirHeadDimsAligned) {
  alignas(16) static uint16_t buffer[64];
  TensorRef x;
  x.dtype = DType::BF16;
  x.shape = {1, 1, 1, 64};
  x.data = buffer;
  EXPECT_TRUE(cuk::attentionOnTensorCores(DType::BF16, 64, 64, 0.125f, {&x}));
  EXPECT_TRUE(cuk::attentionOnTensorCores(DType::F16, 128, 128, 0.125f, {&x}));
  EXPECT_FALSE(cuk::attentionOnTensorCores(DType::F32, 64, 64, 0.125f, {&x}));
  EXPECT_FALSE(cuk::attentionOnTensorCores(DType::BF16, 64, 32, 0.125f, {&x}));
  EXPECT_FALSE(cuk::attentionOnTensorCores(DType::BF16, 40, 40, 0.125f, {&x}));
  EXPECT_FALSE(
      cuk::attentionOnTensorCores(DType::BF16, 256, 256, 0.125f, {&x}));
  EXPECT_FALSE(cuk::attentionOnTensorCores(DType::BF16, 64, 64, -0.125f, {&x}));
  EXPECT_FALSE(cuk::attentionOnTensorCores(DType::BF16, 64, 64, 0.0f, {&x}));
  TensorRef odd = x;
  odd.data = buffer + 1; // 2-byte aligned
  EXPECT_FALSE(
      cuk::attentionOnTensorCores(DType::BF16, 64, 64, 0.125f, {&x, &odd}));
  TensorRef empty = odd;
  empty.shape = {0, 1, 1, 64}; // no elements: its address is not read
  EXPECT_TRUE(
      cuk::attentionOnTensorCores(DType::BF16, 64, 64, 0.125f, {&x, &empty}));
  TensorRef wide = x; // bshd rows 2^18 heads x 64 apart: 32-bit tile offsets
  wide.shape = {1, 1, int64_t(1) << 18, 64};
  EXPECT_FALSE(
      cuk::attentionOnTensorCores(DType::BF16, 64, 64, 0.125f, {&x, &wide}));
  wide.shape = {1, 1, int64_t(1) << 17, 64};
  EXPECT_TRUE(
      cuk::attentionOnTensorCores(DType::BF16, 64, 64, 0.125f, {&x, &wide}));
}

TEST_F(Cuda, AttentionRefusesWhatTheCpuRefuses) {
  Dev q(DType::F32, {2, 4, 3, 8}), k(DType::F32, {2, 3, 5, 8}),
      v(DType::F32, {2, 3, 5, 8}), out(DType::F32, {2, 4, 3, 8}),
      lse(DType::F32, {2, 4, 3, 2});
  Status s = cuk::attention(q, k, v, nullptr, 1.0f, false, out, lse);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error.find("attention: q has 4 heads, not a multiple of the 3 "
                         "heads of k and v"),
            std::string::npos)
      << s.error;
}

} // namespace
} // namespace smp_cuda_test
