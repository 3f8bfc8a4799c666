"""Writes, into argv[1]/<name>/, small models written with torch.einsum and
other functional ops that export as compositions (reductions, TopK,
scatters), exported with torch.onnx.export's defaults, their data and
PyTorch's references (ref_sgd.json, ref_adamw.json: compare_losses.py's
format). Used by test/smprun/functional-ops.test.

  attention  "bqd,bkd->bqk", softmax, "bqk,bkd->bqd" (a batched matmul, a
             contraction over d, then over k)
  outer      "bi,bj->bij" summed by "bij->bi" (an outer product, a sum)
  ellipsis   "...i,ij->...j" on [B, S, I] (an ellipsis over two dims)
  chain      "bi,ij,jk->bk" (three operands contracted pairwise)
  transpose  "bij->bji" before a Linear (a pure transpose)
  reductions F.normalize (ReduceL2), std and var (ReduceProd of the shape,
             folded), logsumexp, amin, sign and round (no gradient), topk
             and sort (TopK: the gradient to the selected elements),
             scatter_add and scatter (ScatterElements), in-place
             assignments (ScatterND)"""
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_refs_writer import write_case  # noqa: E402

CLASSES, BATCH, SAMPLES, STEPS = 5, 4, 16, 3
LRS = {"sgd": 0.1, "adamw": 1e-2}


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(6, 8), nn.Linear(6, 8), nn.Linear(6, 8)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, x):  # [B, S, 6]
        s = torch.einsum("bqd,bkd->bqk", self.q(x), self.k(x)) / 8 ** 0.5
        y = torch.einsum("bqk,bkd->bqd", s.softmax(-1), self.v(x))
        return self.head(y.mean(1))


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(18, 7), nn.Linear(18, 5)
        self.head = nn.Linear(7, CLASSES)

    def forward(self, x):
        x = x.flatten(1)
        o = torch.einsum("bi,bj->bij", self.a(x), torch.tanh(self.b(x)))
        return self.head(torch.einsum("bij->bi", o))


class Ellipsis(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 9) / 3)
        self.head = nn.Linear(9, CLASSES)

    def forward(self, x):
        return self.head(torch.relu(torch.einsum("...i,ij->...j", x, self.w)).mean(1))


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(18, 10) / 4)
        self.w2 = nn.Parameter(torch.randn(10, CLASSES) / 3)

    def forward(self, x):
        return torch.einsum("bi,ij,jk->bk", x.flatten(1), self.w1, self.w2)


class Transpose(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.head = nn.Linear(24, CLASSES)

    def forward(self, x):  # [B, 3, 6] viewed as b i j
        y = self.a(torch.einsum("bij->bji", x.reshape(-1, 3, 6)))
        return self.head(torch.sigmoid(y).flatten(1))


class Reductions(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 8)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, x):  # [B, 3, 6]
        y = self.a(x)
        z = F.normalize(y, dim=-1) + (y - y.mean(-1, keepdim=True)) / y.std(-1, keepdim=True)
        z = z * y.var(1, keepdim=True) - torch.logsumexp(y, 1, keepdim=True)
        z = z + y.amin(-1, keepdim=True) + torch.sign(y) * torch.round(y * 2)
        z = z + torch.topk(y, 3, dim=-1).values.sum(-1, keepdim=True) \
            + torch.sort(y, dim=1).values
        idx = torch.tensor([1, 0, 3, 2, 5, 4, 7, 6]).expand_as(y)
        z = z + torch.zeros_like(y).scatter_add(2, idx, y * y) \
            + y.scatter(2, idx[..., :4], torch.tanh(y[..., :4]))
        w = y.clone()  # in-place assignments export as ScatterND
        w[:, 0] = w[:, 1] * 2
        w[:, :, 2:4] = torch.tanh(w[:, :, 4:6])
        z = z + w
        return self.head(z.mean(1))


def main():
    out = sys.argv[1]
    g = torch.Generator().manual_seed(2)
    x = torch.randn(SAMPLES, 3, 6, generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    for name, cls in (("attention", Attention), ("outer", Outer), ("ellipsis", Ellipsis),
                      ("chain", Chain), ("transpose", Transpose),
                      ("reductions", Reductions)):
        write_case(os.path.join(out, name), cls, x, labels, LRS, STEPS, BATCH)


if __name__ == "__main__":
    main()
