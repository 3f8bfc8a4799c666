"""The `.detach()` traps of make_export_traps.py (`--only detach`): models
whose forward detaches a value, which ONNX cannot say, written as a user
exports them, with PyTorch's references. Split from make_export_traps.py,
which imports it.
"""

import torch
import torch.nn as nn

import torch_refs
from make_export_traps import BATCH, DIM, VOCAB, fresh, write_refs


class DetachLM(nn.Module):
    """`.detach()` in the forward, which ONNX cannot say: kind "ste", a
    straight-through rounding `h + (round(4h) / 4 - h).detach()` (VQ-VAE's,
    BitNet's estimator); "stop", a gate of the embedding detached,
    `h * sigmoid(x.detach())`; "frozen", a Linear's weight also read
    detached, `F.linear(x, fc.weight.detach())`; "nograd", a gate computed
    by a Linear of its own in a `with torch.no_grad():` block, which the
    file cannot mark; "scaled", a Linear's weight also read scaled,
    `F.linear(x, fc.weight * 0.5)`, which the exporter folds into a
    constant; "probe", a linear probe of detached features beside a head
    trained through them, `head(relu(h).detach()) + aux(relu(h))` (a
    Linear of a 3-D input is a MatMul and an Add: the Add reads no detached
    value)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.tok = nn.Embedding(VOCAB, DIM)
        self.fc = nn.Linear(DIM, DIM)
        if kind == "nograd":
            self.gate = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB)
        if kind == "probe":
            self.aux = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx)
        h = self.fc(x)
        if self.kind == "nograd":
            with torch.no_grad():
                g = torch.sigmoid(self.gate(x))
            h = h * g
        elif self.kind == "ste":
            h = h + (torch.round(h * 4) / 4 - h).detach()
        elif self.kind == "stop":
            h = h * torch.sigmoid(x.detach())
        elif self.kind == "scaled":
            h = h + nn.functional.linear(x, self.fc.weight * 0.5)
        elif self.kind == "probe":
            h = torch.relu(h)
            return self.head(h.detach()) + self.aux(h)
        else:
            h = h + nn.functional.linear(x, self.fc.weight.detach())
        return self.head(h)


def write_detached(out, idx, labels):
    """detach_{ste,stop,frozen,probe}.onnx (plain export), the optimize=False
    exports of ste and frozen, ste's with a symbolic batch, and their
    references."""
    for kind in ("ste", "stop", "frozen", "probe"):
        model, init, common = fresh(lambda: DetachLM(kind))
        files = [(f"detach_{kind}.onnx", {})]
        if kind in ("ste", "frozen"):
            files.append((f"detach_{kind}_noopt.onnx", {"optimize": False}))
        if kind == "ste":  # for the pipeline plans
            files.append(("detach_ste_batch.onnx", {"dynamic_shapes": {
                "idx": {0: torch.export.Dim("batch")}}}))
        for name, extra in files:
            torch.onnx.export(model, (idx[:BATCH],), str(out / name),
                              external_data=False, **common, **extra)
            torch_refs.strip_stack_traces(out / name)
        write_refs(model, init, out / f"detach_{kind}", idx, labels)
    # The no_grad block is seen only by its stack traces: kept.
    model, init, common = fresh(lambda: DetachLM("nograd"))
    torch.onnx.export(model, (idx[:BATCH],), str(out / "detach_nograd.onnx"),
                      external_data=False, **common)
    # A parameter's image folded into a constant: refused, no references.
    model, init, common = fresh(lambda: DetachLM("scaled"))
    path = out / "detach_scaled.onnx"
    torch.onnx.export(model, (idx[:BATCH],), str(path), external_data=False,
                      **common)
    torch_refs.strip_stack_traces(path)
