"""Writes argv[1]/{x,labels}.npy, model.onnx and PyTorch's references
(ref_sgd.json, ref_adamw.json) for test/smprun/torchscript-folds.test: a
small classifier whose output adds a zero buffer read through a cast
(`self.final_bias.to(x.dtype)`, as BART adds its final_logits_bias),
exported by the TorchScript exporter (dynamo=False) with its defaults:
constant folding stores the buffer as a value it computed, `onnx::Add_N`.
The same for two models whose folds hold distinct values, in
argv[1]/scaled (a parameter times a constant, as Funnel adds
`r_w_bias * scale`) and argv[1]/rows (a table's first rows, as GPT adds
`wpe(arange(T))`); and argv[1]/groupnorm, a fresh nn.GroupNorm, whose
weight and bias the exporter's group_norm unsqueezes to [C, 1] (folds of
ones and zeros)."""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_refs_writer import write_refs  # noqa: E402

CLASSES, BATCH, SAMPLES, STEPS = 5, 4, 16, 3
LRS = {"sgd": 0.1, "adamw": 1e-2}


class FinalBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = nn.Linear(6, 8), nn.Linear(8, CLASSES)
        self.register_buffer("final_bias", torch.zeros(1, CLASSES))

    def forward(self, x):
        return self.head(torch.relu(self.a(x))) + self.final_bias.to(x.dtype)


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = nn.Linear(6, 8), nn.Linear(8, CLASSES)
        self.r = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return self.head(torch.relu(self.a(x) + self.r * 0.35))


class Rows(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = nn.Linear(2, 8), nn.Linear(8, CLASSES)
        self.pos = nn.Embedding(5, 8)

    def forward(self, x):
        h = self.a(x.view(x.shape[0], 3, 2)) + self.pos(torch.arange(3))
        return self.head(torch.relu(h).mean(1))


class Grouped(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = nn.Linear(6, 16), nn.Linear(16, CLASSES)
        self.norm = nn.GroupNorm(2, 8)

    def forward(self, x):
        h = self.norm(self.a(x).view(x.shape[0], 8, 2))
        return self.head(torch.relu(h).flatten(1))


def export(cls, x, out, legacy):
    """out/model.onnx: cls() from torch.manual_seed(0), a symbolic batch."""
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.onnx.export(cls().eval(), (x[:BATCH],),
                      os.path.join(out, "model.onnx"),
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                      **legacy)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(SAMPLES, 6, generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    import numpy as np
    np.save(os.path.join(out, "x.npy"), x.numpy())
    np.save(os.path.join(out, "labels.npy"), labels.numpy())
    torch.manual_seed(0)
    legacy = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
    for cls, d in ((FinalBias, out), (Scaled, os.path.join(out, "scaled")),
                   (Rows, os.path.join(out, "rows")),
                   (Grouped, os.path.join(out, "groupnorm"))):
        export(cls, x, d, legacy)
        write_refs(cls, x, labels, d, LRS, STEPS, BATCH)


if __name__ == "__main__":
    main()
