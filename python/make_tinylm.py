#!/usr/bin/env python3
"""Writes test/fixtures/train/tinylm.onnxtxt and its data: a tiny language
model whose vocabulary (7) no tensor-parallel degree above 1 divides, with a
tied embedding / LM head and one residual MLP of 6 hidden units, for the
vocab-parallel tests (tp 3 pads the vocabulary to 9 rows). Needs numpy only.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "test", "fixtures", "train")
V, C, T, N = 7, 6, 5, 16


def values(a):
    return ", ".join(f"{x:.6f}" for x in a.reshape(-1))


def main():
    rng = np.random.default_rng(7)
    wte = rng.standard_normal((V, C)) * 0.5
    w1 = rng.standard_normal((C, C)) / np.sqrt(C)
    w2 = rng.standard_normal((C, C)) / np.sqrt(C)
    text = f"""<
  ir_version: 8,
  opset_import: ["" : 17]
>
tinylm (int64[batch,{T}] idx) => (float[batch,{T},{V}] logits)
<float[{V},{C}] wte = {{{values(wte)}}}, float[{C},{C}] w1 = {{{values(w1)}}}, float[{C},{C}] w2 = {{{values(w2)}}}>
{{
  e = Gather (wte, idx)
  h1 = MatMul (e, w1)
  a = Relu (h1)
  h2 = MatMul (a, w2)
  h = Add (e, h2)
  wt = Transpose <perm = [1, 0]> (wte)
  logits = MatMul (h, wt)
}}
"""
    with open(os.path.join(OUT, "tinylm.onnxtxt"), "w") as f:
        f.write(text)
    idx = rng.integers(0, V, size=(N, T)).astype(np.int64)
    labels = np.roll(idx, -1, axis=1)
    labels[:, -1] = -100
    os.makedirs(os.path.join(OUT, "tinylm"), exist_ok=True)
    np.save(os.path.join(OUT, "tinylm", "idx.npy"), idx)
    np.save(os.path.join(OUT, "tinylm", "labels.npy"), labels)


if __name__ == "__main__":
    main()
