#!/usr/bin/env python3
"""Writes test/fixtures/ops/: a tiny model whose export holds the ops real
exports need beyond the basic set (issue 12): CumSum (OPT's position ids,
`mask.cumsum(1)`, and a float `h.cumsum(1)` the gradient flows through),
Tile (`.repeat()` of an activation and of a parameter, as T5 repeats its
decoder mask) and Mod (`torch.fmod`, fmod=1). The TorchScript export of
nn.MultiheadAttention also writes Mod (test/fixtures/traps/gpt_torchscript.onnx).

Files (plain torch.onnx.export, no dynamic axes: the batch of 4 is in the
file):

  opsnet_torchscript.onnx  torch.onnx.export(..., dynamo=False)
  opsnet_dynamo_noopt.onnx torch.onnx.export(..., optimize=False)
  opsnet_dynamo.onnx       torch.onnx.export(...) (defaults; one file). Its
                           optimiser folds `self.pos.repeat(4, 2, 1)` into
                           an initializer `repeat_1` [4, 12, 16] and drops
                           `pos`: smp trains its distinct rows as `pos`
                           (docs/bring-your-own-model.md)
  splitnet_noopt.onnx      torch.split, chunk and unbind exported with
                           optimize=False: SplitToSequence and SequenceAt;
                           split/ its data and references
  opset23.onnx             nn.RMSNorm and grouped-query causal
                           scaled_dot_product_attention exported at opset 23
                           (RMSNormalization, Attention), symbolic batch;
                           opset23/ its data and references
  data/x.npy, data/mask.npy, data/labels.npy   8 samples (mask: 1s then
      padding 0s, as an attention mask)
  data/ref_sgd.json, data/ref_adamw.json  PyTorch's per-step losses and
      grad norms (5 steps, batch 4, train() mode), for
      test/train/compare_losses.py

Needs torch and onnx (PyPI); CI only reads the committed files.
"""


import numpy as np
import torch
import torch.nn as nn

import torch_refs

D, H, T, C = 8, 16, 6, 5
BATCH, SAMPLES, STEPS = 4, 8, 5


class OpsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, H)
        self.pos_emb = nn.Embedding(T + 1, H)
        self.pos = nn.Parameter(torch.randn(1, T, H) * 0.1)
        self.fc2 = nn.Linear(H, C)

    def forward(self, x, mask):
        # OPT's position ids: an int64 cumulative sum of the mask.
        pos_ids = mask.cumsum(1) * mask
        h = torch.tanh(self.fc1(x)) + self.pos_emb(pos_ids)
        # A float cumulative sum over time, then a remainder (fmod=1).
        c = torch.fmod(h.cumsum(1) * 0.5, 1.5)
        # Tile: an activation repeated along time, a parameter over the
        # batch (T5's .repeat() of its mask).
        t = c.repeat(1, 2, 1)
        p = self.pos.repeat(x.shape[0], 2, 1)
        return self.fc2(t + p)


class SplitNet(nn.Module):
    """torch.split by a size and by sizes, chunk and unbind, which the dynamo
    exporter with optimize=False writes as SplitToSequence and SequenceAt
    (GPT-J's rotary halves, MPT's and Phi-3's fused QKV)."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * H)
        self.fc = nn.Linear(H, C)

    def forward(self, x):
        q, k, v = self.qkv(x).split(H, dim=-1)
        a, b = q.split([6, H - 6], dim=-1)
        q = torch.cat([b, a * 2.0], -1)
        k1, k2 = k.chunk(2, dim=-1)
        k = torch.cat([k2, -k1], -1)
        h = torch.softmax(q @ k.transpose(1, 2) / 4.0, -1) @ v
        steps = h.unbind(1)
        h = torch.stack([steps[-1]] + list(steps[:-1]), 1)
        return self.fc(torch.tanh(h))


class Opset23Net(nn.Module):
    """nn.RMSNorm and scaled_dot_product_attention with grouped-query heads
    (4 query, 2 key/value) and is_causal, which torch.onnx.export at opset
    23 writes as RMSNormalization and Attention."""

    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(D), nn.RMSNorm(D)
        self.q, self.k, self.v = (nn.Linear(D, 16), nn.Linear(D, 8),
                                  nn.Linear(D, 8))
        self.o = nn.Linear(16, D)
        self.fc = nn.Linear(D, C)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, 4, 4).transpose(1, 2)
        k = self.k(h).view(b, t, 2, 4).transpose(1, 2)
        v = self.v(h).view(b, t, 2, 4).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, 16))
        return self.fc(self.norm2(x))


def write_model(out, name, data_dir, model_cls, x, labels, **export_args):
    """NAME.onnx (model_cls exported with export_args) and DATA_DIR/: its
    data and PyTorch's references."""
    (out / data_dir).mkdir(exist_ok=True)
    np.save(out / data_dir / "x.npy", x.numpy())
    np.save(out / data_dir / "labels.npy", labels.numpy())
    torch.manual_seed(0)
    model = model_cls().eval()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    torch.onnx.export(model, (x[:BATCH],), str(out / f"{name}.onnx"),
                      input_names=["x"], output_names=["logits"],
                      external_data=False, **export_args)
    torch_refs.strip_stack_traces(out / f"{name}.onnx")
    write_refs(model, init, out / data_dir, x, labels)


def write_refs(model, init, out, x, labels):
    """PyTorch's losses and grad norms of `model` from `init` (5 steps)."""
    for opt_name, lr in torch_refs.LRS.items():
        model.load_state_dict(init)
        losses, norms = torch_refs.train_steps(model, (x,), labels, C,
                                               opt_name, STEPS, BATCH)
        torch_refs.write_ref(out / f"ref_{opt_name}.json",
                             {"name": opt_name, "optimizer": opt_name, "lr": lr,
                              "batch_size": BATCH, "steps": STEPS,
                              "samples": SAMPLES}, losses, norms)


def write_split_net(out, x, g):
    """splitnet_noopt.onnx and split/: SplitNet exported with
    optimize=False; returns its labels."""
    labels = torch.randint(0, C, (SAMPLES, T), generator=g)
    write_model(out, "splitnet_noopt", "split", SplitNet, x, labels,
                optimize=False)
    return labels


def main():
    out = torch_refs.fixture_arguments("ops").parse_args().out
    (out / "data").mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(SAMPLES, T, D, generator=g)
    lengths = torch.randint(2, T + 1, (SAMPLES,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    labels = torch.randint(0, C, (SAMPLES, 2 * T), generator=g)
    np.save(out / "data" / "x.npy", x.numpy())
    np.save(out / "data" / "mask.npy", mask.numpy())
    np.save(out / "data" / "labels.npy", labels.numpy())

    torch.manual_seed(0)
    model = OpsNet().eval()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    example = (x[:BATCH], mask[:BATCH])
    names = dict(input_names=["x", "mask"], output_names=["logits"])
    torch.onnx.export(model, example, str(out / "opsnet_torchscript.onnx"),
                      dynamo=False, **names)
    torch.onnx.export(model, example, str(out / "opsnet_dynamo.onnx"),
                      external_data=False, **names)
    torch.onnx.export(model, example, str(out / "opsnet_dynamo_noopt.onnx"),
                      external_data=False, optimize=False, **names)
    for opt_name, lr in torch_refs.LRS.items():
        model.load_state_dict(init)
        losses, norms = torch_refs.train_steps(model, (x, mask), labels, C,
                                               opt_name, STEPS, BATCH)
        flags = (f"--train --loss cross_entropy:logits:labels --optimizer {opt_name} "
                 f"--lr {lr} --batch-size {BATCH}")
        torch_refs.write_ref(out / "data" / f"ref_{opt_name}.json",
                             {"name": opt_name, "optimizer": opt_name, "lr": lr,
                              "batch_size": BATCH, "steps": STEPS,
                              "samples": SAMPLES, "smpc_flags": flags},
                             losses, norms)
    labels = write_split_net(out, x, g)
    # opset23.onnx and opset23/: a symbolic batch, opset 23.
    write_model(out, "opset23", "opset23", Opset23Net, x, labels,
                opset_version=23,
                dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    print("wrote", out)


if __name__ == "__main__":
    main()
