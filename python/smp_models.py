"""Small reference PyTorch models used to produce ONNX test fixtures for smp.

Shared by make_fixtures.py (tiny fixtures committed under test/fixtures/),
make_training_refs.py (training fixtures and PyTorch loss references under
test/fixtures/train/) and export_gpt2.py (a GPT-2 124M-shaped model, random
weights, not committed).

Every model here is plain PyTorch written by hand (no hub downloads, no
transformers dependency) so that what the ONNX exporter sees is exactly the
familiar GPT-2 / LLaMA / BERT formulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #


def perturb_norms(model: nn.Module) -> None:
    """Give normalisation layers non-trivial parameters and all-zero Linear
    biases random values, using the global torch RNG.

    Freshly initialised models have LayerNorm/RMSNorm weight 1, bias 0,
    BatchNorm stats 0/1 and (GPT-2 init) zero biases.  That hides bugs such as
    a missing scale or shift, and the ONNX exporter deduplicates identical
    initializers (every zero bias becomes one tensor plus Identity nodes), so a
    random-init export would not look like a trained checkpoint's graph.
    """
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear) and m.bias is not None and not m.bias.any():
                m.bias.copy_(0.02 * torch.randn_like(m.bias))
            if isinstance(m, (nn.LayerNorm, nn.BatchNorm2d, RMSNorm)):
                m.weight.copy_(1.0 + 0.2 * torch.randn_like(m.weight))
                if getattr(m, "bias", None) is not None:
                    m.bias.copy_(0.2 * torch.randn_like(m.bias))
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(0.5 * torch.randn_like(m.running_mean))
                m.running_var.copy_(0.5 + torch.rand_like(m.running_var))


# --------------------------------------------------------------------------- #
# MLP and CNN
# --------------------------------------------------------------------------- #


class MLP(nn.Module):
    """Linear(16,32)-ReLU-Linear(32,32)-GELU-Linear(32,10)."""

    def __init__(self, d_in: int = 16, d_hidden: int = 32, d_out: int = 10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, d_hidden),
            nn.ReLU(),
            nn.Linear(d_hidden, d_hidden),
            nn.GELU(),
            nn.Linear(d_hidden, d_out),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(nn.Module):
    """Conv-BN-ReLU-MaxPool-Conv-ReLU-AvgPool-GlobalAvgPool-Flatten-Linear."""

    def __init__(self, in_ch: int = 1, n_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_ch, 4, 3, padding=1),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, stride=1),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.AdaptiveAvgPool2d(1),
        )
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(8, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(self.features(x)))


# --------------------------------------------------------------------------- #
# GPT-2 (nanoGPT-style)
# --------------------------------------------------------------------------- #


@dataclass
class GPTConfig:
    vocab_size: int = 64
    block_size: int = 16
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 32
    layer_norm_eps: float = 1e-5


GPT2_124M = GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.n_embd = cfg.n_embd
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        # GPT-2 style causal mask buffer ("bias" in the HF / nanoGPT naming).
        bs = cfg.block_size
        self.register_buffer("bias", torch.tril(torch.ones(bs, bs)).view(1, 1, bs, bs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        hd = C // self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)  # (B, nh, T, hd)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hd)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPTMLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class GPTBlock(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.mlp = GPTMLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
                wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
                h=nn.ModuleList([GPTBlock(cfg) for _ in range(cfg.n_layer)]),
                ln_f=nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps),
            )
        )
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # weight tying
        self.apply(self._init_weights)
        # GPT-2: scaled init of the residual projections.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return self.lm_head(x)


# --------------------------------------------------------------------------- #
# LLaMA
# --------------------------------------------------------------------------- #


@dataclass
class LlamaConfig:
    vocab_size: int = 64
    dim: int = 32
    n_layer: int = 2
    n_head: int = 4
    hidden_dim: int = 64
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: (B, nh, T, hd); cos/sin: (T, hd) broadcast over batch and heads.
    return x * cos + rotate_half(x) * sin


class LlamaAttention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        assert cfg.dim % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.head_dim = cfg.dim // cfg.n_head
        self.wq = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, C = x.size()
        q = self.wq(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores + mask  # additive causal mask, (T, T)
        att = F.softmax(scores, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.wo(y)


class SwiGLU(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.w2 = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = LlamaAttention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = SwiGLU(cfg)

    def forward(self, x, cos, sin, mask):
        h = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        hd = cfg.dim // cfg.n_head
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList([LlamaBlock(cfg) for _ in range(cfg.n_layer)])
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)  # untied
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        B, T = idx.size()
        x = self.tok_embeddings(idx)
        # RoPE tables computed in forward (Range -> Mul -> Cos/Sin in ONNX).
        pos = torch.arange(T, device=idx.device, dtype=torch.float32)
        freqs = pos[:, None] * self.inv_freq[None, :]  # (T, hd/2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (T, hd)
        cos, sin = emb.cos(), emb.sin()
        # Additive causal mask computed in forward: 0 on/below diagonal, -inf above.
        mask = torch.full((T, T), float("-inf"), device=idx.device).triu(1)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output(self.norm(x))


# --------------------------------------------------------------------------- #
# BERT
# --------------------------------------------------------------------------- #


@dataclass
class BertConfig:
    vocab_size: int = 64
    hidden: int = 32
    n_layer: int = 2
    n_head: int = 4
    intermediate: int = 64
    max_position: int = 16
    type_vocab_size: int = 2
    n_labels: int = 5
    layer_norm_eps: float = 1e-12


class BertSelfAttention(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.head_dim = cfg.hidden // cfg.n_head
        self.query = nn.Linear(cfg.hidden, cfg.hidden)
        self.key = nn.Linear(cfg.hidden, cfg.hidden)
        self.value = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x, ext_mask):
        B, T, C = x.size()
        q = self.query(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = self.key(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores + ext_mask  # (B, 1, 1, T)
        probs = F.softmax(scores, dim=-1)
        return (probs @ v).transpose(1, 2).contiguous().view(B, T, C)


class BertLayer(nn.Module):
    """Post-LN encoder layer (original BERT)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = BertSelfAttention(cfg)
        self.attention_output = nn.Linear(cfg.hidden, cfg.hidden)
        self.attention_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(cfg.hidden, cfg.intermediate)
        self.act = nn.GELU()  # exact (erf) GELU
        self.output = nn.Linear(cfg.intermediate, cfg.hidden)
        self.output_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)

    def forward(self, x, ext_mask):
        h = self.attention_norm(x + self.attention_output(self.attention(x, ext_mask)))
        return self.output_norm(h + self.output(self.act(self.intermediate(h))))


class Bert(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.cfg = cfg
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.max_position, cfg.hidden)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden)
        self.register_buffer(
            "token_type_ids", torch.zeros(1, cfg.max_position, dtype=torch.long), persistent=False
        )
        self.emb_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList([BertLayer(cfg) for _ in range(cfg.n_layer)])
        self.classifier = nn.Linear(cfg.hidden, cfg.n_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        B, T = input_ids.size()
        pos = torch.arange(T, dtype=torch.long, device=input_ids.device)
        tt = self.token_type_ids[:, :T]
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(pos)
            + self.token_type_embeddings(tt)
        )
        x = self.emb_norm(x)
        ext_mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, ext_mask)
        return self.classifier(x)


# --------------------------------------------------------------------------- #
# Seeded builders of the fixture models (shared by make_fixtures.py and
# make_training_refs.py; each seeds the global RNG itself, so a model's
# weights do not depend on what was built before it)
# --------------------------------------------------------------------------- #


def build_mlp() -> nn.Module:
    torch.manual_seed(0)
    return MLP()


def build_cnn() -> nn.Module:
    torch.manual_seed(0)
    model = CNN()
    # A few training-mode passes to move the running stats, then random affine
    # params / stats on top so BatchNorm is clearly not an identity.
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(8, 1, 12, 12) * 2.0 + 0.5)
    perturb_norms(model)
    return model


def _build_perturbed(model_class, config) -> nn.Module:
    """model_class(config), seeded, with perturbed norms."""
    torch.manual_seed(0)
    model = model_class(config)
    perturb_norms(model)
    return model


def build_gpt() -> nn.Module:
    return _build_perturbed(GPT, GPTConfig())


def build_llama() -> nn.Module:
    return _build_perturbed(Llama, LlamaConfig())


def build_bert() -> nn.Module:
    return _build_perturbed(Bert, BertConfig())
