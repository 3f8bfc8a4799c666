"""Writes, into argv[1]/<name>/, small models whose tensor-parallel layer
reads operands whole, exported with torch.onnx.export's defaults (eval()
mode, a symbolic batch), their data and PyTorch's references
(ref_sgd.json, ref_adamw.json: compare_losses.py's format):

  gate   relu(up(x)) * sigmoid(gate(x)) -> down: a [batch, 1] gate every
         tp rank reads whole (its gradient was this rank's hidden units'
         share: silently wrong under --tp)
  prelu  Linear -> nn.PReLU() -> Linear -> nn.PReLU() -> Linear, times a
         learnable 0-D scale: one-element parameters (smpc made them
         constants) and comparisons inside the tp region (refused before)
  elu    Linear -> ELU -> Linear (`where(x > 0, ...)`: refused before)
Used by test/smprun/tp-whole-operands.test."""
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_refs_writer import write_case  # noqa: E402

CLASSES, BATCH, SAMPLES, STEPS = 8, 8, 32, 4
LRS = {"sgd": 0.5, "adamw": 1e-2}


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.gate, self.down = nn.Linear(16, 32), nn.Linear(16, 1), nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)) * torch.sigmoid(self.gate(x)))


class PRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, CLASSES)
        self.p1, self.p2 = nn.PReLU(), nn.PReLU()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        return self.c(self.p2(self.b(self.p1(self.a(x)))) * self.scale)


class Elu(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.b(F.elu(self.a(x)))


def main():
    out = sys.argv[1]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(SAMPLES, 16, generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    for name, cls in (("gate", Gate), ("prelu", PRelu), ("elu", Elu)):
        write_case(os.path.join(out, name), cls, x, labels, LRS, STEPS, BATCH)


if __name__ == "__main__":
    main()
