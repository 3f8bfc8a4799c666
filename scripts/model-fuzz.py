#!/usr/bin/env python3
"""Random PyTorch models, exported the way users export them, trained by smp
and by PyTorch: the promise that smp trains what the user wrote, tried on
models nobody wrote a fixture for.

Each case draws a decoder language model in plain PyTorch (1-3 layers,
widths and head counts, LayerNorm or RMSNorm before or after the blocks,
GELU (erf or tanh), ReLU, SwiGLU, nn.PReLU() or per-token sigmoid-gated
MLPs, a constant or a learnable 0-D residual scale, biases or none, fused or separate
q/k/v projections, a causal mask by masked_fill or by an additive bias or
none, learned positions, rotary positions or none, a tied or separate LM
head), initialised as PyTorch does (fresh norms: the exporter merges their
equal weights), exports it with torch.onnx.export's defaults (constant
folding on; a symbolic or a fixed batch), trains it 3 steps in PyTorch and
with smpc + smprun (one rank, or sometimes dp2, tp2 or pp2), and checks every
step's loss and gradient norm within --rtol. Three cases in ten (--family)
are image classifiers instead: 1-3 Conv2d blocks (kernel 1/3/5, stride,
padding, dilation, grouped and depthwise convolutions, biases or none),
BatchNorm2d, GroupNorm, InstanceNorm2d or none,
ReLU/GELU/SiLU/Tanh/LeakyReLU/Sigmoid/ELU/PReLU, residual
adds, max or average pooling, upsampling by 2 (nearest, bilinear, bicubic,
align_corners or not, PixelShuffle, ConvTranspose2d), global average pooling or a flatten, a hidden
Linear with BatchNorm1d or not; trained by PyTorch in train() mode (batch
statistics) and exported in training mode, or in eval() mode (the default,
which folds a BatchNorm after a conv into it: smp must refuse that file).
One case in ten is a recurrent model: an embedding, nn.LSTM, nn.GRU or
nn.RNN (tanh or relu; 1-2 layers, bidirectional or not, batch_first or not)
and a head per step or over the mean of the steps. A model smpc refuses is
counted (with --verbose, listed with its message); a crash, a run that
fails or numbers that differ are failures, printed with the config and the
commands that reproduce them (--only K reruns case K of a seed).

    model-fuzz.py [--bin build/bin] [--cases 10] [--seed 1] [--only K]
                  [--work DIR] [--rtol 1e-4] [--family all|lm|cnn|rnn] [--verbose]

Needs torch, onnx and numpy (Debian's python3-torch is enough).
Exit status: 0 when every case agreed or was refused, 1 otherwise.
"""
import argparse
import copy
import json
import math
import os
import random
import shlex
import subprocess
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(cfg):
    if cfg["norm"] == "rms":
        return RMSNorm(cfg["d"], cfg["eps"])
    return nn.LayerNorm(cfg["d"], eps=cfg["eps"])


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.h = cfg["d"], cfg["heads"]
        self.hd = d // self.h
        self.kv = cfg["kv_heads"]  # grouped-query attention when < heads
        self.cfg = cfg
        bias = cfg["bias"]
        kvd = self.kv * self.hd
        if cfg["fused_qkv"]:
            self.qkv = nn.Linear(d, d + 2 * kvd, bias=bias)
        else:
            self.q = nn.Linear(d, d, bias=bias)
            self.k, self.v = (nn.Linear(d, kvd, bias=bias) for _ in range(2))
        self.o = nn.Linear(d, d, bias=bias)
        s = cfg["seq"]
        self.register_buffer("causal", torch.tril(torch.ones(s, s, dtype=torch.bool)),
                             persistent=False)
        if cfg["pos"] == "rope":
            inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
            f = torch.outer(torch.arange(s).float(), inv)
            emb = torch.cat((f, f), dim=-1)
            self.register_buffer("cos", emb.cos(), persistent=False)
            self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x, pad=None):
        b, s, d = x.shape
        kvd = self.kv * self.hd
        if self.cfg["fused_qkv"]:
            q, k, v = self.qkv(x).split([d, kvd, kvd], dim=-1)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q = q.view(b, s, self.h, self.hd).transpose(1, 2)
        k, v = (t.view(b, s, self.kv, self.hd).transpose(1, 2) for t in (k, v))
        if self.kv < self.h:
            # As Hugging Face's repeat_kv: torch 1.13 exports
            # repeat_interleave(dim=1) under a symbolic batch into a graph
            # whose Reshape gives the wrong shape (smp refuses it at the
            # product; onnxruntime would too).
            r = self.h // self.kv
            k, v = (t[:, :, None].expand(b, self.kv, r, s, self.hd).reshape(b, self.h, s, self.hd)
                    for t in (k, v))
        if self.cfg["pos"] == "rope":
            q = q * self.cos + rotate_half(q) * self.sin
            k = k * self.cos + rotate_half(k) * self.sin
        if self.cfg["scale"] == "div":
            att = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
        else:
            att = (q * self.hd ** -0.5) @ k.transpose(-2, -1)
        if self.cfg["mask"] == "fill":
            att = att.masked_fill(~self.causal, float("-inf"))
        elif self.cfg["mask"] == "additive":
            att = att + (~self.causal).float() * -1e9
        if pad is not None:
            att = att + pad  # padding: [batch, 1, 1, seq], 0 or very negative
        y = F.softmax(att, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, s, d))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, f, bias = cfg["d"], cfg["d"] * cfg["ratio"], cfg["bias"]
        self.kind = cfg["act"]
        self.up = nn.Linear(d, f, bias=bias)
        if self.kind == "swiglu":
            self.gate = nn.Linear(d, f, bias=bias)
        if self.kind == "gated":  # one sigmoid gate per token
            self.gate = nn.Linear(d, 1, bias=bias)
        if self.kind == "prelu":  # nn.PReLU(): one learnable slope
            self.prelu = nn.PReLU()
        self.down = nn.Linear(f, d, bias=bias)

    def forward(self, x):
        if self.kind == "swiglu":
            return self.down(F.silu(self.gate(x)) * self.up(x))
        if self.kind == "gated":
            return self.down(F.gelu(self.up(x)) * torch.sigmoid(self.gate(x)))
        if self.kind == "prelu":
            return self.down(self.prelu(self.up(x)))
        u = self.up(x)
        u = {"gelu": lambda t: F.gelu(t), "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
             "relu": F.relu}[self.kind](u)
        return self.down(u)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.pre = cfg["prenorm"]
        # A learnable 0-D residual scale (ReZero-style) or a constant.
        self.res = (nn.Parameter(torch.tensor(0.5)) if cfg["res_scale"] == "learned"
                    else cfg["res_scale"])
        self.n1, self.n2 = make_norm(cfg), make_norm(cfg)
        self.attn, self.mlp = Attention(cfg), MLP(cfg)

    def forward(self, x, pad=None):
        r = self.res
        if self.pre:
            x = x + r * self.attn(self.n1(x), pad)
            return x + r * self.mlp(self.n2(x))
        x = self.n1(x + r * self.attn(x, pad))
        return self.n2(x + r * self.mlp(x))


class TorchBlock(nn.Module):
    """PyTorch's own nn.TransformerEncoderLayer (batch_first), causal by an
    attn_mask or not."""

    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            cfg["d"], cfg["heads"], dim_feedforward=cfg["d"] * cfg["ratio"], dropout=0.0,
            activation="gelu" if cfg["act"].startswith("gelu") else "relu",
            batch_first=True, norm_first=cfg["prenorm"], layer_norm_eps=cfg["eps"])
        s = cfg["seq"]
        self.causal = cfg["mask"] != "none"
        self.register_buffer("mask", torch.triu(torch.full((s, s), float("-inf")), 1),
                             persistent=False)

    def forward(self, x, pad=None):
        return self.layer(x, src_mask=self.mask if self.causal else None)


class LM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg["vocab"], cfg["d"], padding_idx=cfg["padding_idx"])
        if cfg["pos"] == "learned":
            self.wpe = nn.Embedding(cfg["seq"], cfg["d"])
        kind = TorchBlock if cfg["torch_layer"] else Block
        self.blocks = nn.ModuleList(kind(cfg) for _ in range(cfg["layers"]))
        self.norm = make_norm(cfg) if cfg["final_norm"] else None
        out = cfg["classes"] if cfg["classify"] else cfg["vocab"]
        self.head = nn.Linear(cfg["d"], out, bias=cfg["classify"])
        if cfg["tied"] and not cfg["classify"]:
            self.head.weight = self.wte.weight

    def forward(self, idx, attention_mask=None):
        x = self.wte(idx)
        if self.cfg["pos"] == "learned":
            x = x + self.wpe(torch.arange(idx.shape[1]))
        pad = None
        if attention_mask is not None:
            # As BERT's extended attention mask: (1 - mask) * a large negative.
            pad = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for blk in self.blocks:
            x = blk(x, pad)
        if self.norm is not None:
            x = self.norm(x)
        if self.cfg["classify"]:
            x = x.mean(dim=1)  # a sequence classifier: labels [batch]
        return self.head(x)


ACTS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "tanh": nn.Tanh,
        "leaky_relu": lambda: nn.LeakyReLU(0.1), "sigmoid": nn.Sigmoid,
        "elu": nn.ELU, "prelu": nn.PReLU, "relu6": nn.ReLU6, "hardtanh": nn.Hardtanh,
        "hardswish": nn.Hardswish, "selu": nn.SELU, "celu": lambda: nn.CELU(1.5)}


class ConvBlock(nn.Module):
    """Conv2d, BatchNorm2d or not, an activation, a residual add where the
    shape allows, then max/avg pooling or none."""
    def __init__(self, cin, b):
        super().__init__()
        self.b = b
        self.conv = nn.Conv2d(cin, b["out"], b["k"], stride=b["stride"], padding=b["pad"],
                              dilation=b["dil"], groups=b["groups"], bias=b["bias"])
        self.bn = nn.BatchNorm2d(b["out"]) if b["bn"] else None
        # nn.GroupNorm (2 groups where the channels allow) or
        # nn.InstanceNorm2d(affine=True) where there is no BatchNorm.
        other = b.get("norm", "none")
        self.norm = (nn.GroupNorm(2 if b["out"] % 2 == 0 else 1, b["out"]) if other == "gn"
                     else nn.InstanceNorm2d(b["out"], affine=True) if other == "in" else None)
        self.act = ACTS[b["act"]]()
        if b.get("up") == "convT":  # a learned upsampling by 2
            k, p, op = b["convT"]
            g = b["out"] if b["convT_dw"] else 1
            self.upconv = nn.ConvTranspose2d(b["out"], b["out"], k, stride=2, padding=p,
                                             output_padding=op, groups=g, bias=b["bias"])

    def forward(self, x):
        y = self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        if self.norm is not None:
            y = self.norm(y)
        y = self.act(y)
        if self.b["residual"] and y.shape == x.shape:
            y = y + x
        if self.b["pool"] == "max":
            y = F.max_pool2d(y, 2)
        elif self.b["pool"] == "avg":
            y = F.avg_pool2d(y, 2)
        up = self.b.get("up", "none")  # nn.Upsample / PixelShuffle by 2
        if up == "shuffle":
            y = F.pixel_shuffle(y, 2)
        elif up == "convT":
            y = self.upconv(y)
        elif up == "nearest":
            y = F.interpolate(y, scale_factor=2, mode="nearest")
        elif up != "none":
            y = F.interpolate(y, scale_factor=2, mode=up, align_corners=self.b["align"])
        return y


class ConvNet(nn.Module):
    """An image classifier: convolution blocks, global average pooling or a
    flatten, then a Linear head (with a hidden Linear + BatchNorm1d or not)."""
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        cin = cfg["in_ch"]
        blocks = []
        for b in cfg["convs"]:
            blocks.append(ConvBlock(cin, b))
            cin = b["out"] // 4 if b.get("up") == "shuffle" else b["out"]
        self.blocks = nn.ModuleList(blocks)
        width = cin if cfg["gap"] else cin * cfg["final_hw"] ** 2
        layers = []
        if cfg["hidden"]:
            layers += [nn.Linear(width, cfg["hidden"])]
            if cfg["bn1d"]:
                layers += [nn.BatchNorm1d(cfg["hidden"])]
            layers += [ACTS[cfg["head_act"]]()]
            width = cfg["hidden"]
        layers += [nn.Linear(width, cfg["classes"])]
        self.head = nn.Sequential(*layers)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        x = x.mean(dim=(2, 3)) if self.cfg["gap"] else torch.flatten(x, 1)
        return self.head(x)


class RecurrentNet(nn.Module):
    """Embedding -> nn.LSTM, nn.GRU or nn.RNN (1-2 layers, bidirectional or
    not, batch_first or not) -> a Linear head per step, or over the mean of
    the steps (a sequence classifier)."""
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg["vocab"], cfg["d"])
        kind = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cfg["cell"]]
        kw = {"nonlinearity": cfg["nonlin"]} if cfg["cell"] == "rnn" else {}
        self.rnn = kind(cfg["d"], cfg["hidden"], num_layers=cfg["layers"],
                        batch_first=cfg["batch_first"], bidirectional=cfg["bidir"],
                        bias=cfg["bias"], **kw)
        out = cfg["classes"] if cfg["classify"] else cfg["vocab"]
        self.head = nn.Linear(cfg["hidden"] * (2 if cfg["bidir"] else 1), out)

    def forward(self, idx):
        x = self.emb(idx)
        if not self.cfg["batch_first"]:
            x = x.transpose(0, 1)
        y, _ = self.rnn(x)
        if not self.cfg["batch_first"]:
            y = y.transpose(0, 1)
        if self.cfg["classify"]:
            y = y.mean(dim=1)
        return self.head(y)


def draw_rnn_config(rng):
    return {"family": "rnn", "cell": rng.choice(["lstm", "gru", "rnn"]),
            "nonlin": rng.choice(["tanh", "relu"]), "d": rng.choice([8, 16]),
            "hidden": rng.choice([8, 12, 16]), "layers": rng.choice([1, 2]),
            "bidir": rng.random() < 0.4, "batch_first": rng.random() < 0.5,
            "bias": rng.random() < 0.8, "classify": rng.random() < 0.3,
            "classes": rng.choice([3, 10]), "seq": rng.choice([3, 5, 8]),
            "vocab": rng.choice([17, 32]), "batch": rng.choice([4, 6]),
            "dynamic": rng.random() < 0.7,
            "optimizer": rng.choice(["sgd", "sgd-momentum", "adam", "adamw"]),
            "plan": rng.choice([[], [], ["--dp", "2"], ["--pp", "2", "--microbatches", "2"],
                                ["--tp", "2"]]),
            "seed": rng.randrange(1 << 30)}


def draw_conv_config(rng):
    hw = rng.choice([6, 8, 12])
    cfg = {"family": "cnn", "in_ch": rng.choice([1, 3]), "hw": hw, "convs": [],
           "classes": rng.choice([3, 10]), "gap": rng.random() < 0.6,
           "hidden": rng.choice([0, 0, 16]), "bn1d": rng.random() < 0.5,
           "head_act": rng.choice(sorted(ACTS)),
           "batch": rng.choice([4, 6]), "dynamic": rng.random() < 0.8,
           "optimizer": rng.choice(["sgd", "sgd-momentum", "adam-eps", "adamw-eps"]),
           "plan": rng.choice([[], [], ["--dp", "2"], ["--tp", "2"]]),
           "seed": rng.randrange(1 << 30)}
    cin = cfg["in_ch"]
    for _ in range(rng.choice([1, 2, 3])):
        k = rng.choice([1, 3, 3, 5])
        dil = rng.choice([1, 1, 2]) if k > 1 else 1
        groups = rng.choice([1, 1, cin]) if cin > 1 else 1
        out = groups * rng.choice([1, 2]) if groups > 1 else rng.choice([4, 6, 8])
        stride = rng.choice([1, 1, 2])
        pad = rng.choice([0, dil * (k // 2)])
        size = (hw + 2 * pad - dil * (k - 1) - 1) // stride + 1
        if size < 2:
            break
        b = {"out": out, "k": k, "stride": stride, "pad": pad, "dil": dil,
             "groups": groups, "bias": rng.random() < 0.5, "bn": rng.random() < 0.5,
             "norm": rng.choice(["none", "gn", "in"]),
             "act": rng.choice(sorted(ACTS)), "residual": rng.random() < 0.4,
             "pool": rng.choice(["none", "none", "max", "avg"]) if size >= 4 else "none"}
        hw = size // 2 if b["pool"] != "none" else size
        b["up"] = rng.choice(["none"] * 4 + ["nearest", "bilinear", "bicubic", "shuffle",
                                             "convT", "convT"])
        b["align"] = rng.random() < 0.5
        b["convT"] = rng.choice([(2, 0, 0), (3, 1, 1), (4, 1, 0)])
        b["convT_dw"] = rng.random() < 0.3
        if b["up"] == "shuffle" and out % 4 != 0:
            b["up"] = "none"
        if b["up"] != "none" and hw <= 8:
            hw *= 2
            out = out // 4 if b["up"] == "shuffle" else out
        else:
            b["up"] = "none"
        cfg["convs"].append(b)
        cin = out
    if not cfg["convs"]:
        cfg["convs"].append({"out": 4, "k": 1, "stride": 1, "pad": 0, "dil": 1, "groups": 1,
                             "bias": True, "bn": True, "act": "relu", "residual": False,
                             "pool": "none"})
    cfg["final_hw"] = hw
    bn = any(b["bn"] for b in cfg["convs"]) or (cfg["hidden"] and cfg["bn1d"])
    # A BatchNorm model is exported in training mode mostly (what keeps its
    # BatchNorms); in eval() mode TorchScript folds those after a conv
    # (smp refuses to train that file).
    # (One BatchNorm model in ten tries that refusal.)
    cfg["export_mode"] = "train" if bn and rng.random() < 0.9 else "eval"
    if bn and any(x in cfg["plan"] for x in ("--pp",)):
        cfg["plan"] = []
    if not cfg["dynamic"]:
        cfg["plan"] = rng.choice([[], ["--tp", "2"]])
    # Tensor parallelism splits matmul pairs: without a hidden layer in the
    # head a CNN has none (refused); such a case tries data parallelism,
    # with a batch it can split, instead.
    if cfg["plan"] == ["--tp", "2"] and not cfg["hidden"]:
        cfg["plan"] = ["--dp", "2"] if cfg["dynamic"] else []
    return cfg


def draw_config(rng):
    heads = rng.choice([1, 2, 4])
    hd = rng.choice([4, 8, 16])
    cfg = {
        "layers": rng.choice([1, 2, 3]), "heads": heads, "d": heads * hd,
        "kv_heads": rng.choice([k for k in (1, 2, 4) if heads % k == 0 and k <= heads]),
        "res_scale": rng.choice([1.0, 1.0, 0.5, "learned"]),
        "torch_layer": rng.random() < 0.2,
        "classify": rng.random() < 0.2, "classes": rng.choice([3, 10]),
        "seq": rng.choice([5, 8, 13]), "vocab": rng.choice([17, 64]),
        "norm": rng.choice(["layer", "rms"]), "eps": rng.choice([1e-5, 1e-6]),
        "prenorm": rng.random() < 0.7, "final_norm": rng.random() < 0.8,
        "act": rng.choice(["gelu", "gelu_tanh", "relu", "swiglu", "gated", "prelu"]),
        "ratio": rng.choice([2, 4]), "bias": rng.random() < 0.6,
        "fused_qkv": rng.random() < 0.5,
        "mask": rng.choice(["fill", "fill", "additive", "none"]),
        "scale": rng.choice(["div", "mul"]),
        "pos": rng.choice(["learned", "rope", "none"]),
        "tied": rng.random() < 0.5,
        "batch": rng.choice([4, 6]), "dynamic": rng.random() < 0.7,
        "optimizer": rng.choice(["sgd", "sgd-momentum", "adam", "adamw"]),
        "plan": rng.choice([[], [], [], ["--dp", "2"], ["--tp", "2"],
                            ["--pp", "2", "--microbatches", "2"]]),
        "seed": rng.randrange(1 << 30),
        "padding": rng.random() < 0.3,
        "padding_idx": rng.choice([None, None, 0]),
    }
    if cfg["torch_layer"]:
        cfg["padding"] = False
    if not cfg["dynamic"] and rng.random() < 0.8:
        # A fixed batch cannot be split (refused, and tried now and then):
        # one rank or tensor parallelism.
        cfg["plan"] = rng.choice([[], ["--tp", "2"]])
    return cfg


OPTIMIZERS = {  # smpc flags, torch.optim factory
    "sgd": (["--optimizer", "sgd", "--lr", "0.1"], lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd-momentum": (["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    "adam": (["--optimizer", "adam", "--lr", "0.01"], lambda p: torch.optim.Adam(p, lr=0.01)),
    "adamw": (["--optimizer", "adamw", "--lr", "0.01"], lambda p: torch.optim.AdamW(p, lr=0.01)),
    # The image classifiers' Adam: a BatchNorm makes some gradients zero but
    # for rounding (the bias of the Linear or conv before it, a weight column
    # reading a feature the batch barely varies), and Adam with eps 1e-8
    # turns each such rounding into a whole learning-rate step of either
    # sign: PyTorch and smp then part by 1e-3 in a step. eps 1e-3 keeps them
    # small steps.
    "adam-eps": (["--optimizer", "adam", "--lr", "0.01", "--eps", "1e-3"],
                 lambda p: torch.optim.Adam(p, lr=0.01, eps=1e-3)),
    "adamw-eps": (["--optimizer", "adamw", "--lr", "0.01", "--eps", "1e-3"],
                  lambda p: torch.optim.AdamW(p, lr=0.01, eps=1e-3)),
}


def torch_losses(model, inputs, labels, cfg, steps):
    """PyTorch's losses and gradient norms, batch k = samples k*B.. (mod N)
    as smprun takes them."""
    opt = OPTIMIZERS[cfg["optimizer"]][1](list(model.parameters()))
    b, n = cfg["batch"], inputs[0].shape[0]
    out = []
    for k in range(steps):
        rows = [(k * b + i) % n for i in range(b)]
        opt.zero_grad(set_to_none=True)
        logits = model(*(t[rows] for t in inputs))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               labels[rows].reshape(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        opt.step()
        out.append((loss.item(), norm.item()))
    return out


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600)
    return p.returncode, p.stdout


def lm_case(cfg):
    """The decoder, its inputs (token ids, and a padding mask or not), its
    labels and the names of its inputs."""
    torch.manual_seed(cfg["seed"])
    model = LM(cfg).eval()
    b, s, v = cfg["batch"], cfg["seq"], cfg["vocab"]
    idx = torch.randint(0, v, (2 * b, s))
    idx[:, -1] = 0  # token 0 in every sample (the padding_idx row, if any)
    labels = torch.randint(0, cfg["classes"], (2 * b,)) if cfg["classify"] \
        else torch.randint(0, v, (2 * b, s))
    inputs = (idx,)
    if cfg["padding"]:
        # Each sample's first 1..seq tokens are real; padded positions are
        # not labelled (ignore_index -100).
        mask = (torch.arange(s)[None, :] <
                torch.randint(1, s + 1, (2 * b, 1))).long()
        inputs = (idx, mask)
        if not cfg["classify"]:
            labels = labels.masked_fill(mask == 0, -100)
    return model, inputs, labels, ["idx", "attention_mask"][:len(inputs)], {}


def rnn_case(cfg):
    """The recurrent model (eval(): no dropout), its token ids and labels."""
    torch.manual_seed(cfg["seed"])
    model = RecurrentNet(cfg).eval()
    b, s, v = cfg["batch"], cfg["seq"], cfg["vocab"]
    idx = torch.randint(0, v, (2 * b, s))
    labels = torch.randint(0, cfg["classes"], (2 * b,)) if cfg["classify"] \
        else torch.randint(0, v, (2 * b, s))
    return model, (idx,), labels, ["idx"], {}


def cnn_case(cfg):
    """The image classifier (in train() mode: BatchNorm's batch statistics,
    what smp trains), its images and labels."""
    torch.manual_seed(cfg["seed"])
    model = ConvNet(cfg)
    b = cfg["batch"]
    x = torch.randn(2 * b, cfg["in_ch"], cfg["hw"], cfg["hw"])
    labels = torch.randint(0, cfg["classes"], (2 * b,))
    kw = {}
    if cfg["export_mode"] == "train":
        kw["training"] = torch.onnx.TrainingMode.TRAINING
    model.train(cfg["export_mode"] == "train")
    return model, (x,), labels, ["x"], kw


def case(i, args, counts):
    rng = random.Random(f"{args.seed}/{i}")
    family = args.family
    if family == "all":  # its own draw: the seed's decoders stay as they were
        u = random.Random(f"{args.seed}/{i}/family").random()
        family = "cnn" if u < 0.3 else "rnn" if u >= 0.9 else "lm"
    draw, make = {"cnn": (draw_conv_config, cnn_case), "rnn": (draw_rnn_config, rnn_case),
                  "lm": (draw_config, lm_case)}[family]
    cfg = draw(rng)
    desc = json.dumps(cfg, separators=(",", ":"))
    work = os.path.join(args.work, f"case{i}")
    os.makedirs(work, exist_ok=True)
    model, inputs, labels, names, kw = make(cfg)
    b = cfg["batch"]
    for name, t in zip(names, inputs):
        np.save(os.path.join(work, f"{name}.npy"), t.numpy())
    np.save(os.path.join(work, "labels.npy"), labels.numpy())
    path = os.path.join(work, "model.onnx")
    kw.update({"input_names": names, "output_names": ["logits"]})
    if cfg["dynamic"]:
        kw["dynamic_axes"] = {n: {0: "batch"} for n in names + ["logits"]}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, tuple(t[:b] for t in inputs), path, **kw)
    except Exception as e:  # PyTorch's exporter, not smp: not counted
        counts["unexported"] += 1
        if args.verbose:
            print(f"case {i}: torch.onnx.export failed: {desc}\n  {str(e).splitlines()[0]}")
        return
    if family == "cnn":
        model.train()  # PyTorch trains with the batch's statistics
    # PyTorch in float64 as well: where float32 rounding alone moves its own
    # numbers by more than a quarter of --rtol (an ill-conditioned model: a
    # step-1 gradient norm of 3e5, then chaos), no float32 reference can
    # judge smp at --rtol; the case is counted as unstable, not compared.
    ref64 = torch_losses(copy.deepcopy(model).double(),
                         tuple(t.double() if t.is_floating_point() else t for t in inputs),
                         labels, cfg, args.steps)
    ref = torch_losses(model, inputs, labels, cfg, args.steps)
    spread = max(abs(x - y) / max(abs(x), abs(y), 1e-30)
                 for a, c in zip(ref, ref64) for x, y in zip(a, c))
    if spread > args.rtol / 4:
        counts["unstable"] += 1
        if args.verbose:
            print(f"case {i}: unstable (PyTorch float32 vs float64: {spread:.1e}): {desc}")
        return
    smpx = os.path.join(work, "model.smpx")
    metrics = os.path.join(work, "smp.jsonl")
    n = 1
    for k in range(0, len(cfg["plan"]), 2):
        n *= int(cfg["plan"][k + 1]) if cfg["plan"][k] in ("--dp", "--tp", "--pp") else 1
    cc = [os.path.join(args.bin, "smpc"), "compile", path, "--train", "--loss",
          "cross_entropy:logits:labels", "--batch-size", str(b)] + \
        OPTIMIZERS[cfg["optimizer"]][0] + cfg["plan"] + ["-o", smpx]
    rc, out = run(cc)
    if rc != 0:
        if rc == 1 and "error:" in out and "Assertion" not in out:
            counts["refused"] += 1
            if args.verbose:
                msg = [l for l in out.splitlines() if "error:" in l][0]
                print(f"case {i}: refused: {desc}\n  {msg.strip()}")
            return
        return fail(i, counts, desc, f"smpc exited {rc}", [cc], out)
    rcmd = [os.path.join(args.bin, "smprun")] + (["-n", str(n)] if n > 1 else []) + \
        [smpx, "--data", work, "--steps", str(args.steps), "--metrics", metrics]
    rc, out = run(rcmd)
    if rc != 0:
        return fail(i, counts, desc, f"smprun exited {rc}", [cc, rcmd], out)
    with open(metrics) as f:
        got = [(r["loss"], r["grad_norm"]) for r in map(json.loads, filter(str.strip, f))]
    for k, ((l0, g0), (l1, g1)) in enumerate(zip(ref, got)):
        for what, x, y in (("loss", l0, l1), ("gradient norm", g0, g1)):
            if not abs(x - y) <= args.rtol * max(abs(x), abs(y)):
                return fail(i, counts, desc, f"step {k + 1}: {what} {x} (PyTorch) vs {y} (smp)",
                            [cc, rcmd])
    if len(got) != len(ref):
        return fail(i, counts, desc, f"{len(got)} steps, PyTorch {len(ref)}", [cc, rcmd])
    counts["agreed"] += 1
    print(f"case {i}: ok: {desc}")
    sys.stdout.flush()


def fail(i, counts, desc, what, cmds, out=""):
    counts["failed"] += 1
    print(f"case {i}: FAILED: {what}\n  config {desc}")
    for c in cmds:
        print("  " + " ".join(shlex.quote(x) for x in c))
    if out:
        print("  | " + "\n  | ".join(out.strip().splitlines()[-6:]))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--bin", default=os.path.join(root, "build", "bin"))
    ap.add_argument("--cases", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, help="run only case K of the seed")
    ap.add_argument("--work", default="/tmp/model-fuzz")
    ap.add_argument("--rtol", type=float, default=1e-4,
                    help="losses and gradient norms against PyTorch's")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--family", choices=["all", "lm", "cnn", "rnn"], default="all",
                    help="decoders, image classifiers or both (3 in 10)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    counts = {"agreed": 0, "refused": 0, "failed": 0, "unexported": 0, "unstable": 0}
    for i in [args.only] if args.only is not None else range(args.cases):
        case(i, args, counts)
    print(f"model-fuzz: seed {args.seed}: {counts['agreed']} models trained to PyTorch's "
          f"losses within {args.rtol:g}, {counts['refused']} refused with an error, "
          f"{counts['failed']} failed"
          + (f" ({counts['unexported']} PyTorch could not export)" if counts["unexported"] else "")
          + (f" ({counts['unstable']} too ill-conditioned to compare: PyTorch's float32 and "
             f"float64 differ)" if counts["unstable"] else ""))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
