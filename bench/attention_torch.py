#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes of
bench/kernels/CudaAttentionBench.cpp (smp-cuda-attention-bench), in bf16
on the GPU: forward, and forward + backward (training), one markdown table
row per shape and backend, the same columns as smp's rows, FLOPs counted
the same way (forward 4 B H T^2 D, half when causal; training 3.5 times
the forward). Backends: FlashAttention (PyTorch's flash kernel) and cuDNN's
fused attention where PyTorch has them; a backend that refuses a shape
prints a row saying so.

  attention_torch.py [--iters N]

Exits 2 without a CUDA device (scripts/device-kit.sh runs it beside
smp-cuda-attention-bench).
"""
import argparse
import sys
import time

SHAPES = [(16, 12, 1024, 64, True), (16, 12, 1024, 64, False),
          (4, 12, 4096, 64, True), (8, 16, 2048, 128, True)]


def time_ms(torch, fn, iters):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        print("attention_torch.py: no CUDA device is usable here", file=sys.stderr)
        return 2
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("torch SDPA flash", SDPBackend.FLASH_ATTENTION)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        backends.append(("torch SDPA cuDNN", SDPBackend.CUDNN_ATTENTION))
    gen = torch.Generator(device="cuda").manual_seed(42)
    for name, backend in backends:
        for b, h, t, d, causal in SHAPES:
            label = f"{b} x {h} x {t} x {d}{' causal' if causal else ''}"

            def rand():
                return (torch.rand(b, h, t, d, device="cuda", generator=gen,
                                   dtype=torch.float32) * 2 - 1).to(torch.bfloat16)
            q, k, v, dout = rand(), rand(), rand(), rand()
            q.requires_grad_(True)
            k.requires_grad_(True)
            v.requires_grad_(True)

            def forward():
                with torch.no_grad(), sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def training():
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                out.backward(dout)
            try:
                fwd = time_ms(torch, forward, args.iters)
                train = time_ms(torch, training, args.iters)
            except RuntimeError as e:
                print(f"| {name} | {label} | refused: {str(e).splitlines()[0][:80]} | | | |")
                continue
            flop = 4.0 * b * h * t * t * d * (0.5 if causal else 1.0)
            print(f"| {name} | {label} | {fwd:.3f} | {flop / fwd / 1e9:.1f} | "
                  f"{train:.3f} | {3.5 * flop / train / 1e9:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
