"""Traps of make_export_traps.py, written as a user exports them, with
PyTorch's references: `--only folds`, two position lookups at the same
positions, which the dynamo exporter's optimiser folds into equal
initializers and keeps one of; `--only torchscript`, what a TorchScript
export cannot say (a shared block, a buffer the logits read, a tied
weight folded into a cat). Split from
make_export_traps.py, which imports it.
"""

import torch
import torch.nn as nn

import torch_refs
from make_export_traps import BATCH, DIM, SEQ, VOCAB, fresh, write_refs


class TwoLookupsLM(nn.Module):
    """Two branches, each adding a learned position table's rows 0..S-1
    to the token embeddings: kind "shared", one table read by both (one
    parameter, its gradient the sum of both branches'); kind "equal", a
    table each, the second a copy of the first (two parameters with equal
    values, as a deep-copied module's)."""

    def __init__(self, kind):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos_a = nn.Embedding(SEQ, DIM)
        if kind == "equal":
            self.pos_b = nn.Embedding(SEQ, DIM)
            with torch.no_grad():
                self.pos_b.weight.copy_(self.pos_a.weight)
        else:
            self.pos_b = self.pos_a
        self.fc_a = nn.Linear(DIM, DIM)
        self.fc_b = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx)
        at = torch.arange(idx.shape[1])
        a = torch.relu(self.fc_a(x + self.pos_a(at)))
        b = torch.tanh(self.fc_b(x * 0.5 + self.pos_b(at)))
        return self.head(a + b)


def write_merged_folds(out, idx, labels):
    """folds_{shared,equal}.onnx (plain export), folds_*_noopt.onnx
    (optimize=False) and their references."""
    for kind in ("shared", "equal"):
        model, init, common = fresh(lambda: TwoLookupsLM(kind))
        for name, extra in ((f"folds_{kind}.onnx", {}),
                            (f"folds_{kind}_noopt.onnx", {"optimize": False})):
            torch.onnx.export(model, (idx[:BATCH],), str(out / name),
                              external_data=False, **common, **extra)
            torch_refs.strip_stack_traces(out / name)
        write_refs(model, init, out / f"folds_{kind}", idx, labels)


class LogitBiasLM(nn.Module):
    """A zero buffer added to the logits (Hugging Face's final_logits_bias
    in BART and Marian: register_buffer, never trained)."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.fc = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB)
        self.register_buffer("final_logits_bias", torch.zeros(1, VOCAB))

    def forward(self, idx):
        h = torch.relu(self.fc(self.tok(idx)))
        return self.head(h) + self.final_logits_bias


class TiedCatLM(nn.Module):
    """MobileBERT's LM head: the logits multiply by cat([decoder.weight.t(),
    dense.weight]), the decoder tied to the token embedding (narrower than
    the hidden size), plus a bias."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM // 2)
        self.up = nn.Linear(DIM // 2, DIM)
        self.dense = nn.Linear(VOCAB, DIM // 2, bias=False)
        self.bias = nn.Parameter(torch.zeros(VOCAB))

    def forward(self, idx):
        h = torch.relu(self.up(self.tok(idx)))
        w = torch.cat([self.tok.weight.t(), self.dense.weight], dim=0)
        return h @ w + self.bias


class TiedCatTailLM(nn.Module):
    """The tie trailing and untransposed: the logits multiply by
    cat([dense.weight, side]), `side` a parameter read as it is elsewhere
    (its own product added to the logits)."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.side = nn.Parameter(torch.randn(DIM // 2, VOCAB) * 0.2)
        self.dense = nn.Linear(VOCAB, DIM // 2, bias=False)

    def forward(self, idx):
        h = torch.relu(self.tok(idx))
        w = torch.cat([self.dense.weight, self.side], dim=0)
        return h @ w + h[..., : DIM // 2] @ self.side


def write_torchscript(out, idx, labels):
    """What a TorchScript export (dynamo=False) cannot say:
    albert_torchscript.onnx (SharedBlockLM, albert/'s references: its shared
    block's constant norm weights and biases read by every layer's nodes),
    logitbias_torchscript.onnx (LogitBiasLM) and tiedcat_torchscript.onnx
    (TiedCatLM: constant folding stores the cat, the tied embedding's
    transpose in its first rows) with their references; tiedcat_noopt.onnx
    and tiedcat_dynamo.onnx, TiedCatLM through the dynamo exporter with
    optimize=False and with its defaults (the optimiser folds the cat too,
    its record naming tok.weight and dense.weight); tiedtail_torchscript.onnx
    and tiedtail_dynamo.onnx (TiedCatTailLM: the tied rows last, not
    transposed) with their references."""
    from make_export_traps import SharedBlockLM
    for name, cls, refs in (("albert", SharedBlockLM, False),
                            ("logitbias", LogitBiasLM, True),
                            ("tiedcat", TiedCatLM, True),
                            ("tiedtail", TiedCatTailLM, True)):
        model, init, common = fresh(cls)
        torch.onnx.export(model, (idx[:BATCH],),
                          str(out / f"{name}_torchscript.onnx"), dynamo=False,
                          **common)
        if name == "tiedcat":
            noopt = out / "tiedcat_noopt.onnx"
            torch.onnx.export(model, (idx[:BATCH],), str(noopt),
                              external_data=False, optimize=False, **common)
            torch_refs.strip_stack_traces(noopt)
        if name in ("tiedcat", "tiedtail"):
            dyn = out / f"{name}_dynamo.onnx"
            torch.onnx.export(model, (idx[:BATCH],), str(dyn),
                              external_data=False, **common)
            torch_refs.strip_stack_traces(dyn)
        if refs:
            write_refs(model, init, out / name, idx, labels)
