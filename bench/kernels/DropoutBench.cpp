//===- DropoutBench.cpp - smp.dropout's CPU kernel ------------------------===//
//
// Google Benchmark timings of the dropout kernel at GPT-2-small's residual
// stream ([B, 1024, 768], p = 0.1), plain and split over 2 tensor-parallel
// ranks along the hidden dim (the global index computed per element),
// f32 and bf16, against the elementwise multiply that applying a stored
// mask would cost. Results: docs/benchmarks.md, "Dropout (CPU)".
//
//===----------------------------------------------------------------------===//

#include "smp/kernels/cpu/Kernels.h"

#include <benchmark/benchmark.h>

#include <vector>

namespace {

namespace cpuk = smp::kernels::cpu;
using smp::base::DType;
using smp::base::TensorRef;

struct Buf {
  Buf(DType t, std::vector<int64_t> shape) {
    ref.dtype = t;
    ref.shape = std::move(shape);
    bytes.assign(ref.bytes(), 1);
    ref.data = bytes.data();
  }
  Buf(const Buf &) = delete;
  std::vector<uint8_t> bytes;
  TensorRef ref;
};

void run(benchmark::State &state, DType t, bool split) {
  int64_t batch = state.range(0);
  std::vector<int64_t> shape = {batch, 1024, split ? 384 : 768};
  Buf x(t, shape), y(t, shape);
  smp::kernels::DropoutKey key;
  key.seed = 1, key.stream = 3, key.ratio = 0.1, key.samples = batch;
  if (split)
    key.tpDim = 2, key.tpParts = 2, key.tpIndex = 1;
  for (auto _ : state) {
    key.step++;
    auto s = cpuk::dropout(x.ref, key, y.ref);
    if (!s.ok())
      state.SkipWithError(s.error.c_str());
    benchmark::DoNotOptimize(y.bytes.data());
  }
  state.SetItemsProcessed(state.iterations() * x.ref.numel());
}

void BM_DropoutF32(benchmark::State &s) { run(s, DType::F32, false); }
void BM_DropoutF32TpSplit(benchmark::State &s) { run(s, DType::F32, true); }
void BM_DropoutBF16(benchmark::State &s) { run(s, DType::BF16, false); }

void BM_MaskMultiplyF32(benchmark::State &state) {
  int64_t batch = state.range(0);
  Buf x(DType::F32, {batch, 1024, 768}), m(DType::F32, {batch, 1024, 768}),
      y(DType::F32, {batch, 1024, 768});
  for (auto _ : state) {
    auto s = cpuk::binary(smp::kernels::BinaryOp::Mul, x.ref, m.ref, y.ref);
    if (!s.ok())
      state.SkipWithError(s.error.c_str());
    benchmark::DoNotOptimize(y.bytes.data());
  }
  state.SetItemsProcessed(state.iterations() * x.ref.numel());
}

} // namespace

BENCHMARK(BM_DropoutF32)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DropoutF32TpSplit)->Arg(4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DropoutBF16)->Arg(4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskMultiplyF32)->Arg(4)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
