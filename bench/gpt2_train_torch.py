#!/usr/bin/env python3
"""PyTorch reference for bench/gpt2_train.sh: the model smp-modelgen's `gpt`
writes (GPT-2: learned positions, pre-LayerNorm blocks, fused QKV and MLP
nn.Linear layers with biases, causal attention, GELU(tanh), final LayerNorm,
LM head tied to the token embedding; no dropout), trained with AdamW on
random tokens, timed per step after warm-up.

    gpt2_train_torch.py --layers 12 --hidden 768 --heads 12 --seq 1024 \
        --vocab 50257 --batch 16 --steps 30 --warmup 10 \
        --device cuda --dtype bf16 [--compile] [--sdpa]

Prints one JSON line: tokens/s (median step), step time, parameters, the
peak memory (CUDA: max allocated; CPU: the process's peak resident set,
libraries included), and the mode. Attention is written out (matmul, mask,
softmax, matmul) like smp's unfused model unless --sdpa asks for PyTorch's
fused scaled_dot_product_attention (flash attention on a GPU, a fused
kernel on the CPU).
"""
import argparse
import json
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, heads, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln_1 = nn.LayerNorm(h)
        self.c_attn = nn.Linear(h, 3 * h)
        self.c_proj = nn.Linear(h, h)
        self.ln_2 = nn.LayerNorm(h)
        self.c_fc = nn.Linear(h, 4 * h)
        self.mlp_proj = nn.Linear(4 * h, h)

    def attention(self, x):
        b, t, h = x.shape
        q, k, v = self.c_attn(x).split(h, dim=2)
        shape = (b, t, self.heads, h // self.heads)
        q, k, v = (y.view(shape).transpose(1, 2) for y in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, h))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(
            F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.hidden)
        self.wpe = nn.Embedding(a.seq, a.hidden)
        self.h = nn.ModuleList(
            Block(a.hidden, a.heads, a.sdpa) for _ in range(a.layers))
        self.ln_f = nn.LayerNorm(a.hidden)
        # GPT-2's initialization (smp-modelgen's too): N(0, 0.02) weights
        # and embeddings, zero biases, unit norm scales.
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, idx, labels):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied LM head
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)),
                               labels.view(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in [("layers", 12), ("hidden", 768), ("heads", 12),
                          ("seq", 1024), ("vocab", 50257), ("batch", 16),
                          ("steps", 30), ("warmup", 10)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="bf16")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--sdpa", action="store_true")
    a = p.parse_args()

    torch.manual_seed(0)
    dev = torch.device(a.device)
    model = GPT(a).to(dev)
    params = sum(t.numel() for t in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0,
                            fused=dev.type == "cuda")
    step_fn = torch.compile(model) if a.compile else model
    idx = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    labels = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16,
                         enabled=a.dtype == "bf16")

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times, loss = [], None
    for i in range(a.warmup + a.steps):
        sync()
        start = time.perf_counter()
        with amp:
            loss = step_fn(idx, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
    if not times:
        p.error("--steps must be at least 1")
    step = statistics.median(times)
    if dev.type == "cuda":
        peak = torch.cuda.max_memory_allocated()
    else:  # ru_maxrss is in KiB on Linux
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({
        "mode": "torch.compile" if a.compile else "eager",
        "attention": "sdpa" if a.sdpa else "explicit",
        "params": params, "batch": a.batch, "seq": a.seq,
        "step_s": step, "tokens_per_s": a.batch * a.seq / step,
        "loss": float(loss.detach()), "peak_bytes": peak}))


if __name__ == "__main__":
    main()
