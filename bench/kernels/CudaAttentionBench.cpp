//===- CudaAttentionBench.cpp - The CUDA attention kernels' speed ---------===//
//
// smp-cuda-attention-bench [--small] [--first] [--grad-rows 64|128]
// [--wgmma] [--iters N]: times the CUDA
// backend's attention (forward) and attention + attention_grad (training) in
// bf16 on the shapes of docs/benchmarks.md ("Fused attention on the GPU") and
// prints one markdown table row per shape, the same columns as
// bench/attention_torch.py prints for PyTorch's scaled_dot_product_attention
// on the same GPU (scripts/device-kit.sh runs both). FLOPs are counted as
// FlashAttention's papers count them: forward 4 B H T^2 D (half of it when
// causal), training 3.5 times the forward. Head dims up to 64 get a second
// row with the forward's 128-query blocks (setAttentionForwardRows; the
// backward the default's) and a third with the backward's 128-row blocks
// (setAttentionGradRows; the forward the default's); after every shape, on
// an H100/H200, the D = 64 shapes again with the forward and backward on
// Hopper's wgmma (setAttentionWgmma), in blocks of one warpgroup and of
// two (128 rows both ways). --small: shapes the CUDA
// emulator runs in seconds (smp-cuda-attention-bench-emu; a rehearsal,
// its times mean nothing). --first: only the first shape's first row (GPT-2
// 124M's, 64-query blocks), for a profiler: with --iters 1 its kernels run
// in this order, the forward 3 times, then the forward, Dsum, keys and
// queries passes 3 times (device-kit.sh profiles the last of each under
// ncu); --grad-rows 128 makes that row's backward the 128-row blocks' (the
// same order: `ncu -k regex:Mma --launch-skip 9 --launch-count 3` profiles
// them); --wgmma makes it the wgmma passes' (on an H100/H200; `ncu -k
// regex:Wgmma --launch-skip 9 --launch-count 3`). Exits 2 without a CUDA
// device.
//
//===----------------------------------------------------------------------===//

#include "smp/kernels/cuda/Kernels.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cuk = smp::kernels::cuda;
using smp::base::DType;
using smp::kernels::TensorRef;

namespace {

struct Shape {
  int64_t b, h, t, d;
  bool causal;
};

/// A bf16 device tensor of uniform values in [-1, 1) (or uninitialised).
struct DevTensor {
  TensorRef ref;
  DevTensor(DType t, std::vector<int64_t> shape, std::mt19937 *rng) {
    ref.dtype = t;
    ref.shape = std::move(shape);
    if (cudaMalloc(&ref.data, ref.bytes()) != cudaSuccess) {
      std::fprintf(stderr,
                   "smp-cuda-attention-bench: cudaMalloc of %zu "
                   "bytes failed\n",
                   ref.bytes());
      std::exit(1);
    }
    if (!rng)
      return;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<uint16_t> host(static_cast<size_t>(ref.numel()));
    for (uint16_t &x : host) {
      float f = u(*rng);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof(bits));
      x = static_cast<uint16_t>(bits >> 16); // bf16 by truncation
    }
    cudaMemcpy(ref.data, host.data(), ref.bytes(), cudaMemcpyHostToDevice);
  }
  ~DevTensor() { cudaFree(ref.data); }
  DevTensor(const DevTensor &) = delete;
  DevTensor &operator=(const DevTensor &) = delete;
};

void check(const smp::base::Status &s) {
  if (!s.ok()) {
    std::fprintf(stderr, "smp-cuda-attention-bench: %s\n", s.error.c_str());
    std::exit(1);
  }
}

/// Milliseconds per call of f (after 2 warm-up calls), on the stream.
template <class F> double timeMs(cuk::Context &ctx, int iters, F f) {
  for (int i = 0; i < 2; ++i)
    f();
  check(cuk::synchronize(ctx));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    f();
  check(cuk::synchronize(ctx));
  std::chrono::duration<double, std::milli> ms =
      std::chrono::steady_clock::now() - t0;
  return ms.count() / iters;
}

/// One row: the shape timed with `rows` queries a forward block and
/// `gradRows` keys (or queries) a backward block, or with the forward and
/// backward on wgmma.
void run(cuk::Context &ctx, const Shape &s, int iters, int rows,
         int gradRows = 64, bool wgmma = false) {
  check(cuk::setAttentionForwardRows(ctx, rows));
  check(cuk::setAttentionGradRows(ctx, gradRows));
  check(cuk::setAttentionWgmma(ctx, wgmma));
  std::mt19937 rng(42);
  std::vector<int64_t> qs = {s.b, s.h, s.t, s.d};
  DevTensor q(DType::BF16, qs, &rng), k(DType::BF16, qs, &rng),
      v(DType::BF16, qs, &rng), dout(DType::BF16, qs, &rng),
      out(DType::BF16, qs, nullptr),
      lse(DType::F32, {s.b, s.h, s.t, 2}, nullptr),
      dq(DType::BF16, qs, nullptr), dk(DType::BF16, qs, nullptr),
      dv(DType::BF16, qs, nullptr);
  float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  auto forward = [&] {
    check(cuk::attention(q.ref, k.ref, v.ref, nullptr, scale, s.causal, out.ref,
                         lse.ref));
  };
  double fwd = timeMs(ctx, iters, forward);
  double train = timeMs(ctx, iters, [&] {
    forward();
    check(cuk::attentionGrad(q.ref, k.ref, v.ref, out.ref, lse.ref, dout.ref,
                             nullptr, scale, s.causal, dq.ref, dk.ref, dv.ref));
  });
  double flop = 4.0 * s.b * s.h * s.t * s.t * s.d * (s.causal ? 0.5 : 1.0);
  bool tc = cuk::attentionOnTensorCores(DType::BF16, s.d, s.d, scale,
                                        {&q.ref, &k.ref, &v.ref, &out.ref});
  std::printf("| smp %s | %lld x %lld x %lld x %lld%s | %.3f | %.1f | %.3f "
              "| %.1f |\n",
              !tc                   ? "CUDA cores"
              : wgmma && rows != 64 ? "tensor cores, wgmma, 128-row blocks"
              : wgmma               ? "tensor cores, wgmma"
              : gradRows != 64      ? "tensor cores, 128-row backward blocks"
              : rows != 64          ? "tensor cores, 128-row blocks"
                                    : "tensor cores",
              (long long)s.b, (long long)s.h, (long long)s.t, (long long)s.d,
              s.causal ? " causal" : "", fwd, flop / fwd / 1e9, train,
              3.5 * flop / train / 1e9);
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  bool small = false, first = false, wgmma = false;
  int iters = 10, gradRows = 64;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--small"))
      small = true;
    else if (!std::strcmp(argv[i], "--first"))
      first = true;
    else if (!std::strcmp(argv[i], "--wgmma"))
      wgmma = true;
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--grad-rows") && i + 1 < argc)
      gradRows = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: smp-cuda-attention-bench [--small] "
                           "[--first] [--grad-rows 64|128] [--wgmma] "
                           "[--iters N]\n");
      return 2;
    }
  }
  if (iters < 1 || (gradRows != 64 && gradRows != 128) ||
      !cuk::deviceAvailable()) {
    std::fprintf(stderr, "smp-cuda-attention-bench: %s\n",
                 iters < 1 ? "--iters must be at least 1"
                 : gradRows == 64 || gradRows == 128
                     ? "no CUDA device is usable here"
                     : "--grad-rows must be 64 or 128");
    return 2;
  }
  cuk::Context *ctx = nullptr;
  check(cuk::createContext(0, ctx));
  cuk::setCurrentContext(ctx);
  std::vector<Shape> shapes;
  if (small)
    shapes = {{1, 2, 128, 64, true}, {1, 2, 96, 32, false}};
  else
    shapes = {{16, 12, 1024, 64, true}, // GPT-2 124M's, batch 16
              {16, 12, 1024, 64, false},
              {4, 12, 4096, 64, true},
              {8, 16, 2048, 128, true}};
  std::printf("| kernel | B x H x T x D | forward ms | forward TFLOP/s | "
              "training ms | training TFLOP/s |\n|---|---|---|---|---|---|\n");
  for (const Shape &s : shapes) {
    run(*ctx, s, small ? 1 : iters, 64, first ? gradRows : 64, first && wgmma);
    if (first)
      break;
    if (s.d <= 64) { // the other block sizes (the same results)
      run(*ctx, s, small ? 1 : iters, 128);
      run(*ctx, s, small ? 1 : iters, 64, 128);
    }
  }
  // Last, where a fault ends no other row: the forward and backward on
  // Hopper's wgmma (setAttentionWgmma; D = 64, an H100/H200 only).
  if (!first && cuk::setAttentionWgmma(*ctx, true).ok())
    for (const Shape &s : shapes)
      if (s.d == 64) { // blocks of one warpgroup, then of two
        run(*ctx, s, small ? 1 : iters, 64, 64, true);
        run(*ctx, s, small ? 1 : iters, 128, 128, true);
      }
  cuk::destroyContext(ctx);
  return 0;
}
