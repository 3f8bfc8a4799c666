"""The merged-fold traps of make_export_traps.py (`--only folds`): two
position lookups at the same positions, which the dynamo exporter's
optimiser folds into equal initializers and keeps one of, written as a
user exports them, with PyTorch's references. Split from
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
