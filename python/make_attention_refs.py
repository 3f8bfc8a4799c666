#!/usr/bin/env python3
"""Writes test/unit/kernels/Inputs/attention/: PyTorch references for the
fused attention kernels (kernels/*/Attention*, test/unit/kernels/
AttentionTest.cpp).

The inputs are not stored: q, k, v, dout and the masks come from a small
counter-based generator (splitmix64 of seed * 16 + tensor id + element index,
its top 24 bits as a multiple of 2^-23 in [-1, 1), exact in f32) that
AttentionTest.cpp implements too. For each case of CASES the script computes,
in float64 with autograd,

  out = torch.nn.functional.scaled_dot_product_attention(q, k, v, mask,
            scale=scale, enable_gqa=...)       (causal: see below)
  lse = torch.logsumexp(scale * q k^T + mask, -1)   over the allowed keys
  dq, dk, dv (, dmask) = autograd of (out * dout).sum()

and stores them as little-endian f32 in <name>.bin (out, lse, dq, dk, dv in
that order, each row-major; then, for a float mask, its gradient dmask of
the mask's shape, the scores' gradient summed over the dims it broadcasts
along). cases.txt lists the cases, one a line:

  name B Hq Hkv S Sk D Dv causal mask scale seed

mask is none, bool_b1 (Bool [B, 1, S, Sk]: true = may attend), float_h
(additive [1, Hq, S, Sk], some -inf) or pad_b (additive [B, 1, 1, Sk], 0 or
-inf at the end of each batch's keys). PyTorch refuses attn_mask together
with is_causal, so a causal case with a mask passes the mask combined with
the causal lower triangle (top-left aligned, as is_causal). Key 0 is always
allowed, so no query is left without keys (PyTorch gives NaN there; the
kernels give 0, tested apart).

Needs torch (PyPI); CI only reads the committed files.
"""

import argparse
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

# name, B, Hq, Hkv, S, Sk, D, Dv, causal, mask, seed (scale = 1/sqrt(D)
# except where given)
CASES = [
    ("plain", 2, 2, 2, 7, 7, 32, 32, 0, "none", 1),
    ("causal_long", 1, 1, 1, 130, 130, 16, 16, 1, "none", 2),
    ("causal_cross", 1, 1, 1, 65, 9, 32, 32, 1, "none", 3),
    ("bool_mask", 2, 2, 2, 7, 33, 32, 32, 0, "bool_b1", 4),
    ("bool_mask_causal", 1, 1, 1, 7, 7, 128, 128, 1, "bool_b1", 5),
    ("float_mask_causal", 1, 2, 2, 9, 7, 64, 32, 1, "float_h", 6),
    ("pad_mask", 2, 2, 2, 7, 9, 32, 32, 0, "pad_b", 7),
    ("gqa", 1, 8, 2, 7, 7, 32, 32, 1, "none", 8),
    ("mqa", 1, 4, 1, 1, 65, 32, 32, 0, "none", 9),
]
SCALES = {"plain": 0.3}

MASK64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def uniform(seed, tensor_id, n):
    """n values in [0, 1), multiples of 2^-24."""
    base = (seed * 16 + tensor_id) << 32
    return np.array([(splitmix64(base + i) >> 40) / float(1 << 24)
                     for i in range(n)], dtype=np.float64)


def values(seed, tensor_id, shape):
    return torch.from_numpy(
        (2.0 * uniform(seed, tensor_id, int(np.prod(shape))) - 1.0)
        .reshape(shape))


def make_mask(kind, seed, b, hq, s, sk):
    """The mask as PyTorch takes it (None, bool, or float64 additive)."""
    if kind == "none":
        return None
    if kind == "bool_b1":
        u = uniform(seed, 10, b * s * sk).reshape(b, 1, s, sk)
        m = u < 0.7
        m[..., 0] = True
        return torch.from_numpy(m)
    if kind == "float_h":
        u = uniform(seed, 10, hq * s * sk).reshape(1, hq, s, sk)
        w = uniform(seed, 11, hq * s * sk).reshape(1, hq, s, sk)
        m = 2.0 * (2.0 * u - 1.0)
        m[w < 0.2] = -math.inf
        m[..., 0] = 2.0 * (2.0 * u[..., 0] - 1.0)
        return torch.from_numpy(m)
    if kind == "pad_b":
        m = np.zeros((b, 1, 1, sk))
        for i in range(b):  # batch i pads its last 2 i keys
            if i:
                m[i, ..., sk - 2 * i:] = -math.inf
        return torch.from_numpy(m)
    raise ValueError(kind)


def with_causal(mask, s, sk):
    tril = torch.ones(s, sk, dtype=torch.bool).tril()
    if mask is None:
        return tril
    if mask.dtype == torch.bool:
        return mask & tril
    return mask + torch.zeros(s, sk, dtype=torch.float64).masked_fill(
        ~tril, -math.inf)


def reference(case):
    name, b, hq, hkv, s, sk, d, dv, causal, kind, seed = case
    scale = SCALES.get(name, 1.0 / math.sqrt(d))
    q = values(seed, 0, (b, hq, s, d)).requires_grad_()
    k = values(seed, 1, (b, hkv, sk, d)).requires_grad_()
    v = values(seed, 2, (b, hkv, sk, dv)).requires_grad_()
    dout = values(seed, 3, (b, hq, s, dv))
    mask = make_mask(kind, seed, b, hq, s, sk)
    float_mask = mask is not None and mask.dtype != torch.bool
    if float_mask:
        mask.requires_grad_()
    full = with_causal(mask, s, sk) if causal else mask
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=full, scale=scale,
                                         enable_gqa=hq != hkv)
    out.backward(dout)
    with torch.no_grad():
        kk = k.repeat_interleave(hq // hkv, dim=1)
        scores = scale * q @ kk.transpose(-1, -2)
        if full is not None:
            scores = (scores.masked_fill(~full, -math.inf)
                      if full.dtype == torch.bool else scores + full)
        lse = torch.logsumexp(scores, dim=-1)
    parts = [out.detach(), lse, q.grad, k.grad, v.grad]
    if float_mask:
        # d mask: where the mask is -inf the probability is 0 and so is dS
        parts.append(mask.grad)
    assert all(torch.isfinite(p).all() for p in parts), name
    line = f"{name} {b} {hq} {hkv} {s} {sk} {d} {dv} {causal} {kind} " \
           f"{scale!r} {seed}"
    return line, np.concatenate([p.numpy().ravel() for p in parts])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parent.parent /
                    "test/unit/kernels/Inputs/attention")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    for case in CASES:
        line, data = reference(case)
        lines.append(line)
        data.astype("<f4").tofile(args.out / f"{case[0]}.bin")
    (args.out / "cases.txt").write_text(
        "# name B Hq Hkv S Sk D Dv causal mask scale seed "
        "(python/make_attention_refs.py)\n" + "\n".join(lines) + "\n")
    total = sum(f.stat().st_size for f in args.out.iterdir())
    print(f"wrote {len(lines)} cases to {args.out} ({total} bytes)")


if __name__ == "__main__":
    main()
