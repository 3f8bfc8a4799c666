#!/usr/bin/env python3
"""PyTorch references for smp's random dropout (test/smprun/dropout.test).

A small pre-norm transformer block with a dropout in each place models put
one (after the input projection, on the attention probabilities, on the MLP's
hidden activation inside the tensor-parallel region, after each residual
branch), exported as users export a model they train with dropout:
torch.onnx.export in TrainingMode.TRAINING (TorchScript), which writes each
nn.Dropout as Dropout(training_mode=1) named after its module
("/drop_attn/Dropout").

smp's mask is a function of (seed, step, the Dropout's stream, the
element's index in the global tensor): Philox4x32-10 (Salmon et al., SC11)
keyed by the seed, counter (index / 4 low and high words, stream, step),
word index % 4, kept when the word >= round(p * 2^32), kept values scaled by
1 / (1 - p) (kernels/common/Dropout.h). The stream of a Dropout is its rank
among the file's Dropout nodes. This script implements that generator again
in numpy (checked against Random123's published known-answer vectors
first), replaces each nn.Dropout with a module applying that mask to the
whole global batch, and trains the model in PyTorch: so the reference is
PyTorch's forward, backward and optimizer with smp's masks, and smp's
training must match it whatever the plan (each rank draws its part of the
global mask).

Writes test/fixtures/dropout/{block.onnx, data/x.npy, data/t.npy,
ref_sgd.json, ref_adamw.json} and README.md. Needs torch and onnx;
regenerate with:  python3 python/make_dropout_refs.py
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test" / "fixtures" / "dropout"
SAMPLES, BATCH, SEQ, DIN, DIM, HEADS, DOUT = 16, 8, 4, 8, 16, 2, 4
STEPS = 8
SEED = 1234

M32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(ctr, key):
    """Random123's philox4x32_R(10, ctr, key) on arrays: ctr a list of four
    uint32 arrays, key two uint32 scalars. Returns four uint32 arrays."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in ctr)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & M32,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & M32)
        k0 = (k0 + np.uint64(0x9E3779B9)) & M32
        k1 = (k1 + np.uint64(0xBB67AE85)) & M32
    return [c.astype(np.uint32) for c in (c0, c1, c2, c3)]


def check_known_answers():
    """Random123's kat_vectors for philox4x32 10."""
    kats = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
            ((0xffffffff,) * 4, (0xffffffff,) * 2,
             (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
            ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
             (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for ctr, key, want in kats:
        got = tuple(int(w[0]) for w in philox4x32_10([[c] for c in ctr], key))
        assert got == want, (ctr, key, [hex(g) for g in got])


def keep_mask(shape, p, seed, step, stream):
    """smp's mask of a global tensor of `shape` (C order)."""
    n = int(np.prod(shape))
    g = np.arange(n, dtype=np.uint64)
    words = philox4x32_10([g >> np.uint64(2), g >> np.uint64(34),
                           np.full(n, stream, np.uint64), np.full(n, step, np.uint64)],
                          (seed & 0xFFFFFFFF, seed >> 32))
    word = np.choose((g & np.uint64(3)).astype(np.int64), words)
    threshold = min(round(p * 2.0 ** 32), 2 ** 32 - 1)
    return (word >= threshold).reshape(shape)


class SmpDropout(nn.Module):
    """nn.Dropout(p) with smp's mask for the current step."""

    def __init__(self, p):
        super().__init__()
        self.p = p
        self.stream = None
        self.step = 0

    def forward(self, x):
        mask = keep_mask(tuple(x.shape), float(np.float32(self.p)), SEED, self.step, self.stream)
        scale = np.float32(1.0 / (1.0 - float(np.float32(self.p))))
        return x * torch.from_numpy(mask).to(x.dtype) * float(scale)


class Block(nn.Module):
    """Input projection, one pre-norm attention + MLP block, head."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(DIN, DIM)
        self.drop_in = nn.Dropout(0.1)
        self.ln1 = nn.LayerNorm(DIM)
        self.qkv_q = nn.Linear(DIM, DIM)
        self.qkv_k = nn.Linear(DIM, DIM)
        self.qkv_v = nn.Linear(DIM, DIM)
        self.drop_attn = nn.Dropout(0.2)
        self.proj = nn.Linear(DIM, DIM)
        self.drop_res1 = nn.Dropout(0.1)
        self.ln2 = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, 4 * DIM)
        self.drop_mlp = nn.Dropout(0.3)
        self.fc2 = nn.Linear(4 * DIM, DIM)
        self.drop_res2 = nn.Dropout(0.1)
        self.head = nn.Linear(DIM, DOUT)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.drop_in(self.inp(x))
        a = self.ln1(h)
        hd = DIM // HEADS

        def heads(t):
            return t.reshape(b, s, HEADS, hd).transpose(1, 2)

        q, k, v = heads(self.qkv_q(a)), heads(self.qkv_k(a)), heads(self.qkv_v(a))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)
        o = (self.drop_attn(probs) @ v).transpose(1, 2).reshape(b, s, DIM)
        h = h + self.drop_res1(self.proj(o))
        m = self.drop_mlp(F.gelu(self.fc1(self.ln2(h))))
        h = h + self.drop_res2(self.fc2(m))
        return self.head(h)


def export(model, path):
    import onnx
    x = torch.zeros(BATCH, SEQ, DIN)
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kwargs = dict(input_names=["x"], output_names=["y"], opset_version=17,
                      do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING,
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        try:
            torch.onnx.export(model, (x,), str(path), dynamo=False, **kwargs)
        except TypeError:
            torch.onnx.export(model, (x,), str(path), **kwargs)
    graph = onnx.load(str(path)).graph
    # Streams: the Dropout nodes in file order; node names carry the module.
    names = [n.name for n in graph.node if n.op_type == "Dropout"]
    modules = dict(model.named_modules())
    order = []
    for stream, name in enumerate(names):
        module = name.strip("/").split("/")[0]
        assert module in modules and isinstance(modules[module], nn.Dropout), name
        order.append((module, stream))
    return order


def train(model, x, t, make_opt, steps):
    opt = make_opt(model.parameters())
    losses, norms = [], []
    for k in range(steps):
        idx = [(k * BATCH + i) % SAMPLES for i in range(BATCH)]
        for m in model.modules():
            if isinstance(m, SmpDropout):
                m.step = k
        opt.zero_grad()
        loss = F.mse_loss(model(x[idx]), t[idx])
        loss.backward()
        norms.append(float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters()))))
        losses.append(loss.item())
        opt.step()
    return losses, norms


class StreamedDropout:
    """torch.nn.functional.dropout replaced by smp's mask, the stream being
    the call's rank in the forward (the order the export writes the Dropout
    nodes in). Used as a context manager; `step` set before each forward."""

    def __init__(self):
        self.step = 0
        self.calls = 0
        self.saved = None

    def __enter__(self):
        self.saved = F.dropout

        def dropout(x, p=0.5, training=True, inplace=False):
            if not training or p == 0:
                return x
            stream = self.calls
            self.calls += 1
            mask = keep_mask(tuple(x.shape), float(np.float32(p)), SEED, self.step, stream)
            scale = np.float32(1.0 / (1.0 - float(np.float32(p))))
            return x * torch.from_numpy(mask).to(x.dtype) * float(scale)
        F.dropout = dropout
        torch.nn.functional.dropout = dropout
        return self

    def __exit__(self, *exc):
        F.dropout = self.saved
        torch.nn.functional.dropout = self.saved


def make_gpt2():
    """A Hugging Face GPT-2 from a small config with its default dropouts
    (embd, attn, resid: 0.1), exported as a user exports a model to train
    (TorchScript, TrainingMode.TRAINING, the default sdpa attention, whose
    attention dropout the exporter writes without training_mode). The
    reference runs the eager attention (the same math; its dropout an
    F.dropout call) with smp's masks, streams in call order."""
    import onnx
    from transformers import GPT2Config, GPT2LMHeadModel
    out = OUT / "gpt2"
    out.mkdir(exist_ok=True)
    cfg = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
               eos_token_id=0, bos_token_id=0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**cfg, attn_implementation="sdpa"))

    class Logits(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                          use_cache=False, return_dict=False)[0]

    wrapped = Logits(model).train()
    ids = torch.zeros(BATCH, 8, dtype=torch.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapped, (ids,), str(out / "gpt2.onnx"), dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["input_ids"], output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}})
    nodes = [n for n in onnx.load(str(out / "gpt2.onnx")).graph.node if n.op_type == "Dropout"]
    g = torch.Generator().manual_seed(2)
    data = torch.randint(0, 64, (SAMPLES, 8), generator=g)
    labels = torch.randint(0, 64, (SAMPLES, 8), generator=g)
    (out / "data").mkdir(exist_ok=True)
    np.save(out / "data" / "input_ids.npy", data.numpy())
    np.save(out / "data" / "labels.npy", labels.numpy())
    eager = GPT2LMHeadModel(GPT2Config(**cfg, attn_implementation="eager"))
    eager.load_state_dict(model.state_dict())
    ref = Logits(eager).train()
    opt = torch.optim.AdamW(ref.parameters(), lr=0.01)
    losses, norms = [], []
    with StreamedDropout() as drops:
        for k in range(STEPS):
            idx = [(k * BATCH + i) % SAMPLES for i in range(BATCH)]
            drops.step, drops.calls = k, 0
            opt.zero_grad()
            logits = ref(data[idx])
            loss = F.cross_entropy(logits.reshape(-1, 64), labels[idx].reshape(-1))
            loss.backward()
            assert drops.calls == len(nodes), (drops.calls, [n.name for n in nodes])
            norms.append(float(torch.sqrt(sum((p.grad.double() ** 2).sum()
                                              for p in ref.parameters() if p.grad is not None))))
            losses.append(loss.item())
            opt.step()
    (out / "ref_adamw.json").write_text(json.dumps(
        {"config": {"lr": 0.01, "seed": SEED, "flags": "--optimizer adamw --lr 0.01",
                    "torch": torch.__version__, "dropout_nodes": [n.name for n in nodes]},
         "losses": losses, "grad_norms": norms}, indent=2) + "\n")
    print("gpt2", ["%.6f" % v for v in losses])


def main():
    check_known_answers()
    make_gpt2()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "data").mkdir(exist_ok=True)
    torch.manual_seed(0)
    model = Block()
    order = export(model, OUT / "block.onnx")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(SAMPLES, SEQ, DIN, generator=g)
    t = torch.randn(SAMPLES, SEQ, DOUT, generator=g)
    np.save(OUT / "data" / "x.npy", x.numpy())
    np.save(OUT / "data" / "t.npy", t.numpy())
    configs = {
        "sgd": (lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), "--optimizer sgd --lr 0.05 --momentum 0.9"),
        "adamw": (lambda p: torch.optim.AdamW(p, lr=0.01), "--optimizer adamw --lr 0.01"),
    }
    for name, (make_opt, flags) in configs.items():
        torch.manual_seed(0)
        ref = Block()
        ref.load_state_dict(model.state_dict())
        for module, stream in order:
            d = SmpDropout(getattr(ref, module).p)
            d.stream = stream
            setattr(ref, module, d)
        ref.train()
        losses, norms = train(ref, x, t, make_opt, STEPS)
        out = {"config": {"lr": make_opt(ref.parameters()).param_groups[0]["lr"],
                          "seed": SEED, "flags": flags, "torch": torch.__version__,
                          "streams": dict(order)},
               "losses": losses, "grad_norms": norms}
        (OUT / f"ref_{name}.json").write_text(json.dumps(out, indent=2) + "\n")
        print(name, ["%.6f" % v for v in losses])
    # Without dropout, for the test that dropout changes the numbers.
    torch.manual_seed(0)
    plain = Block()
    plain.load_state_dict(model.state_dict())
    plain.eval()
    losses, norms = train(plain, x, t, configs["sgd"][0], STEPS)
    (OUT / "ref_sgd_nodropout.json").write_text(json.dumps(
        {"config": {"lr": 0.05, "flags": "--no-dropout"}, "losses": losses, "grad_norms": norms},
        indent=2) + "\n")


if __name__ == "__main__":
    main()
