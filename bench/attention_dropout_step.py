#!/usr/bin/env python3
"""Training step with Hugging Face's default dropouts, attention fused or not.

A GPT-2-style decoder (pre-norm blocks, causal attention written as
softmax(q k^T / sqrt(d)) -> dropout -> @ v, GELU MLP) with GPT-2's default
dropouts (0.1 on the embeddings, the attention probabilities and each
residual branch), exported as users export a model they train with
dropout: torch.onnx.export in TrainingMode.TRAINING (Dropout nodes with
training_mode=1). Each configuration is compiled with `smpc compile
--train` (fused: the default, the probabilities' dropout drawn inside
smp.attention; unfused: --no-fuse-attention, smp.dropout on the [B, H, S,
S] probabilities) and trained with smprun; prints the median step time
after the first step and the planned and measured peak bytes.

Results: docs/benchmarks.md, "Attention dropout in a training step (CPU)".

  /usr/bin/python3 bench/attention_dropout_step.py [--layers 2] [--seq 1024]
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, hidden, heads, p):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)
        self.attn_drop = nn.Dropout(p)
        self.resid_drop1 = nn.Dropout(p)
        self.resid_drop2 = nn.Dropout(p)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        probs = self.attn_drop(torch.softmax(scores, dim=-1))
        a = (probs @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.resid_drop1(self.proj(a))
        m = self.out(nn.functional.gelu(self.fc(self.ln2(x))))
        return x + self.resid_drop2(m)


class Model(nn.Module):
    def __init__(self, vocab, seq, hidden, heads, layers, p):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Parameter(torch.randn(seq, hidden) * 0.02)
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList(Block(hidden, heads, p) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids):
        x = self.drop(self.wte(input_ids) + self.wpe)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--bin", default=os.environ.get("SMP_BIN_DIR", "build/bin"))
    a = ap.parse_args()

    torch.manual_seed(0)
    model = Model(a.vocab, a.seq, a.hidden, a.heads, a.layers, 0.1)
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "gpt.onnx")
        ids = torch.randint(0, a.vocab, (a.batch, a.seq))
        torch.onnx.export(model, (ids,), onnx_path, input_names=["input_ids"],
                          output_names=["logits"], opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False,
                          dynamic_axes={"input_ids": {0: "batch"},
                                        "logits": {0: "batch"}})
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        rng = np.random.default_rng(0)
        n = a.batch * (a.steps + 1)
        np.save(os.path.join(data, "input_ids.npy"),
                rng.integers(0, a.vocab, (n, a.seq)).astype(np.int64))
        np.save(os.path.join(data, "labels.npy"),
                rng.integers(0, a.vocab, (n, a.seq)).astype(np.int64))
        print(f"GPT-style, {a.layers} layers, hidden {a.hidden}, {a.heads} "
              f"heads, seq {a.seq}, batch {a.batch}, dropout 0.1")
        for name, flags in (("fused", []), ("unfused", ["--no-fuse-attention"])):
            art = os.path.join(tmp, name + ".smpx")
            run([os.path.join(a.bin, "smpc"), "compile", onnx_path, "--train",
                 "--loss", "cross_entropy:logits:labels", "--optimizer",
                 "adamw", "--lr", "1e-4", "--batch-size", str(a.batch),
                 "-o", art] + flags)
            with open(os.path.join(art, "plan.json")) as f:
                stage = json.load(f)["artifact"]["stages"][0]
                planned = stage["arena_bytes"] + stage["weights_bytes"]
            metrics = os.path.join(tmp, name + ".jsonl")
            run([os.path.join(a.bin, "smprun"), art, "--data", data, "--steps",
                 str(a.steps), "--metrics", metrics])
            rows = [json.loads(line) for line in open(metrics)]
            times = [r["step_time"] for r in rows[1:]]
            print(f"{name:8s} step {statistics.median(times) * 1e3:8.1f} ms "
                  f"(median of {len(times)}), loss {rows[-1]['loss']:.4f}, "
                  f"peak {rows[-1]['peak_bytes'] / 2**20:.0f} MiB measured"
                  f", arena + weights {planned / 2**20:.0f} MiB planned")


if __name__ == "__main__":
    main()
