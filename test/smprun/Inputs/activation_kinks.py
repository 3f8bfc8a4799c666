"""Writes, into argv[1]/<name>/, models whose activations see inputs exactly
at their kinks, exported with torch.onnx.export's defaults, their data and
PyTorch's references (ref_sgd.json, ref_adamw.json: compare_losses.py's
format):

  kinks  ELU, SELU, CELU, Hardsigmoid, Hardswish, ReLU6 and Hardtanh(-3, 3)
         of x + a zero-initialised bias, x holding exact 0 and +-3 (each
         one's kinks): at 0 smp's ELU family and ReLU6 (Clip) took half the
         gradient (min/max split a tie), Hardsigmoid, Hardswish and
         Hardtanh half at +-3
  norm   Conv2d 1x1 -> InstanceNorm2d(affine) -> ELU -> Linear on images of
         which some are all zeros: their normalised rows are constant, the
         norm's output is its zero bias, exactly ELU's kink (found by
         scripts/model-fuzz.py --seed 90 --only 21)
Used by test/smprun/activation-kinks.test."""
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_refs_writer import write_case  # noqa: E402

CLASSES, BATCH, SAMPLES, STEPS = 4, 8, 24, 3
LRS = {"sgd": 0.1, "adamw": 1e-2}


class Kinks(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(7, 8))
        self.head = nn.Linear(56, CLASSES)

    def forward(self, x):
        b = self.bias
        acts = [F.elu(x + b[0], alpha=0.7), F.selu(x + b[1]),
                F.celu(x + b[2], alpha=1.3), F.hardsigmoid(x + b[3]),
                F.hardswish(x + b[4]), F.relu6(x + b[5]),
                F.hardtanh(x + b[6], -3.0, 3.0)]
        return self.head(torch.cat(acts, 1))


class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.norm = nn.InstanceNorm2d(4, affine=True)
        self.head = nn.Linear(4 * 2 * 2, CLASSES)

    def forward(self, x):
        return self.head(torch.flatten(F.elu(self.norm(self.conv(x))), 1))


def data(name, g):
    if name == "kinks":
        x = torch.randn(SAMPLES, 8, generator=g)
        pick = torch.randint(0, 4, (SAMPLES, 8), generator=g)
        x = torch.where(pick == 0, torch.zeros_like(x), x)
        x = torch.where(pick == 1, torch.full_like(x, 3.0), x)
        return torch.where(pick == 2, torch.full_like(x, -3.0), x)
    x = torch.randn(SAMPLES, 3, 2, 2, generator=g)
    x[::3] = 0  # every third image all zeros
    return x


def main():
    out = sys.argv[1]
    for name, cls in (("kinks", Kinks), ("norm", Norm)):
        g = torch.Generator().manual_seed(1)
        x = data(name, g)
        labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
        write_case(os.path.join(out, name), cls, x, labels, LRS, STEPS, BATCH)


if __name__ == "__main__":
    main()
