//===- AttentionBench.cpp - Fused vs unfused attention on the CPU ---------===//
//
// Google Benchmark timings of the CPU kernels at GPT-2-small's attention
// shape (H = 12, S = 1024, D = 64, causal, scale 1/8), batch B from the
// argument: the fused kernels (attention; attention + attentionGrad)
// against the unfused path the compiler emits without fusion, run on the
// existing kernels:
//
//   forward:  scores = matmul(q, k^T); mul by the scale; where(causal
//             mask, scores, -inf); softmax; matmul by v
//   backward: dv = P^T dout; dP = dout v^T; dS = P (dP - sum(P dP));
//             mul by the scale; dq = dS k; dk = dS^T q
//
// The *Dropout variants drop the probabilities (p = 0.1, as Hugging Face's
// attention_dropout): fused, the mask drawn inside the kernels; unfused,
// the dropout kernel on P in the forward and on dP in the backward.
//
// Results: docs/benchmarks.md, "Fused attention kernels (CPU)".
//
//===----------------------------------------------------------------------===//

#include "smp/kernels/cpu/Kernels.h"

#include <benchmark/benchmark.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

namespace cpuk = smp::kernels::cpu;
using smp::base::DType;
using smp::base::TensorRef;

constexpr int64_t kH = 12, kS = 1024, kD = 64;
constexpr float kScale = 0.125f;

/// A tensor that owns its bytes (not copyable: ref points into bytes).
struct Buf {
  Buf(const Buf &) = delete;
  std::vector<uint8_t> bytes;
  TensorRef ref;
  Buf(DType t, std::vector<int64_t> shape) {
    ref.dtype = t;
    ref.shape = std::move(shape);
    bytes.assign(ref.bytes(), 0);
    ref.data = bytes.data();
  }
  operator const TensorRef &() const { return ref; }
  void randomize(unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1, 1);
    float *p = ref.as<float>();
    for (int64_t i = 0; i < ref.numel(); ++i)
      p[i] = dist(gen);
  }
};

/// q, k, v, dout of batch b and the results of both paths.
struct Problem {
  int64_t b;
  Buf q, k, v, dout, out, lse, dq, dk, dv;
  Problem(int64_t batch)
      : b(batch), q(DType::F32, {b, kH, kS, kD}), k(q.ref.dtype, q.ref.shape),
        v(q.ref.dtype, q.ref.shape), dout(q.ref.dtype, q.ref.shape),
        out(q.ref.dtype, q.ref.shape), lse(DType::F32, {b, kH, kS, 2}),
        dq(q.ref.dtype, q.ref.shape), dk(q.ref.dtype, q.ref.shape),
        dv(q.ref.dtype, q.ref.shape) {
    q.randomize(1);
    k.randomize(2);
    v.randomize(3);
    dout.randomize(4);
  }
};

void check(const smp::base::Status &s, benchmark::State &state) {
  if (!s.ok())
    state.SkipWithError(s.error.c_str());
}

void BM_FusedForward(benchmark::State &state) {
  Problem p(state.range(0));
  for (auto _ : state)
    check(cpuk::attention(p.q, p.k, p.v, nullptr, kScale, true, p.out, p.lse),
          state);
}

/// The dropout on the probabilities of the *Dropout variants.
smp::kernels::DropoutKey dropoutKey() {
  smp::kernels::DropoutKey key;
  key.seed = 1, key.step = 1, key.ratio = 0.1;
  return key;
}

void fusedForwardBackward(benchmark::State &state, bool drop) {
  Problem p(state.range(0));
  smp::kernels::DropoutKey key = dropoutKey();
  const smp::kernels::DropoutKey *k = drop ? &key : nullptr;
  for (auto _ : state) {
    check(cpuk::attention(p.q, p.k, p.v, nullptr, kScale, true, p.out, p.lse,
                          false, k),
          state);
    check(cpuk::attentionGrad(p.q, p.k, p.v, p.out, p.lse, p.dout, nullptr,
                              kScale, true, p.dq, p.dk, p.dv, false, k),
          state);
  }
}

void BM_FusedForwardBackward(benchmark::State &state) {
  fusedForwardBackward(state, false);
}
void BM_FusedForwardBackwardDropout(benchmark::State &state) {
  fusedForwardBackward(state, true);
}

/// The unfused path's tensors: scores/probabilities [B, H, S, S] and the
/// constants.
struct Unfused {
  Buf scores, masked, probs, dropped, dprobs, rowSum, scale, negInf, zero, mask;
  explicit Unfused(int64_t b)
      : scores(DType::F32, {b, kH, kS, kS}),
        masked(DType::F32, {b, kH, kS, kS}), probs(DType::F32, {b, kH, kS, kS}),
        dropped(DType::F32, {b, kH, kS, kS}),
        dprobs(DType::F32, {b, kH, kS, kS}), rowSum(DType::F32, {b, kH, kS, 1}),
        scale(DType::F32, {}), negInf(DType::F32, {}), zero(DType::F32, {}),
        mask(DType::Bool, {1, 1, kS, kS}) {
    *scale.ref.as<float>() = kScale;
    *negInf.ref.as<float>() = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < kS; ++i)
      for (int64_t j = 0; j <= i; ++j)
        mask.bytes[i * kS + j] = 1;
  }
};

/// With `drop`, the dropped probabilities go to P v (u.dropped).
smp::base::Status unfusedForward(Problem &p, Unfused &u,
                                 const smp::kernels::DropoutKey *drop) {
  using cpuk::BinaryOp;
  SMP_RETURN_IF_ERROR(cpuk::matmul(p.q, p.k, u.scores, false, true));
  SMP_RETURN_IF_ERROR(cpuk::binary(BinaryOp::Mul, u.scores, u.scale, u.scores));
  SMP_RETURN_IF_ERROR(cpuk::where(u.mask, u.scores, u.negInf, u.masked));
  SMP_RETURN_IF_ERROR(cpuk::softmax(u.masked, -1, u.probs));
  if (!drop)
    return cpuk::matmul(u.probs, p.v, p.out);
  SMP_RETURN_IF_ERROR(cpuk::dropout(u.probs, *drop, u.dropped));
  return cpuk::matmul(u.dropped, p.v, p.out);
}

smp::base::Status unfusedBackward(Problem &p, Unfused &u,
                                  const smp::kernels::DropoutKey *drop) {
  using cpuk::BinaryOp;
  SMP_RETURN_IF_ERROR(
      cpuk::matmul(drop ? u.dropped : u.probs, p.dout, p.dv, true, false));
  SMP_RETURN_IF_ERROR(cpuk::matmul(p.dout, p.v, u.dprobs, false, true));
  if (drop) // the dropout's gradient: the same mask on dP
    SMP_RETURN_IF_ERROR(cpuk::dropout(u.dprobs, *drop, u.dprobs));
  // softmax backward: dS = P (dP - sum(P dP)); the where's gradient
  // (masked entries get 0) is P's zeros there.
  SMP_RETURN_IF_ERROR(cpuk::binary(BinaryOp::Mul, u.probs, u.dprobs, u.scores));
  SMP_RETURN_IF_ERROR(
      cpuk::reduce(cpuk::ReduceOp::Sum, u.scores, {-1}, u.rowSum));
  SMP_RETURN_IF_ERROR(
      cpuk::binary(BinaryOp::Sub, u.dprobs, u.rowSum, u.dprobs));
  SMP_RETURN_IF_ERROR(cpuk::binary(BinaryOp::Mul, u.probs, u.dprobs, u.dprobs));
  SMP_RETURN_IF_ERROR(cpuk::where(u.mask, u.dprobs, u.zero, u.masked));
  SMP_RETURN_IF_ERROR(cpuk::binary(BinaryOp::Mul, u.masked, u.scale, u.masked));
  SMP_RETURN_IF_ERROR(cpuk::matmul(u.masked, p.k, p.dq));
  return cpuk::matmul(u.masked, p.q, p.dk, true, false);
}

void BM_UnfusedForward(benchmark::State &state) {
  Problem p(state.range(0));
  Unfused u(p.b);
  for (auto _ : state)
    check(unfusedForward(p, u, nullptr), state);
}

void unfusedForwardBackward(benchmark::State &state, bool drop) {
  Problem p(state.range(0));
  Unfused u(p.b);
  smp::kernels::DropoutKey key = dropoutKey();
  const smp::kernels::DropoutKey *k = drop ? &key : nullptr;
  for (auto _ : state) {
    check(unfusedForward(p, u, k), state);
    check(unfusedBackward(p, u, k), state);
  }
}

void BM_UnfusedForwardBackward(benchmark::State &state) {
  unfusedForwardBackward(state, false);
}
void BM_UnfusedForwardBackwardDropout(benchmark::State &state) {
  unfusedForwardBackward(state, true);
}

void shapes(benchmark::internal::Benchmark *b) {
  b->ArgName("B")->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_FusedForward)->Apply(shapes);
BENCHMARK(BM_UnfusedForward)->Apply(shapes);
BENCHMARK(BM_FusedForwardBackward)->Apply(shapes);
BENCHMARK(BM_UnfusedForwardBackward)->Apply(shapes);
BENCHMARK(BM_FusedForwardBackwardDropout)->Apply(shapes);
BENCHMARK(BM_UnfusedForwardBackwardDropout)->Apply(shapes);

} // namespace

BENCHMARK_MAIN();
