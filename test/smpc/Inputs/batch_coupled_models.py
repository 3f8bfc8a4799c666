"""Writes, into argv[1]/<name>.onnx, small models exported with
torch.onnx.export's defaults whose outputs mix the batch's samples (or keep
them per sample), for test/smpc/batch-coupling.test. Input x [batch, 6],
output logits [batch, 5].

  centred     logits - logits.mean(0) (a reduction over the batch dim)
  contrast    softmax(a @ b.T) @ b: every sample against every other (a
              CLIP-style similarity matrix, attention across the batch)
  first       logits + logits[0] (the first sample broadcast to all)
  cumulative  logits.cumsum(0)
  persample   logits - logits.mean(1) and a reshape to [batch * 5] and back
              (sample by sample: trains under any plan)
  negative    logits - logits.mean(-2) (the batch dim counted from the end:
              ReduceMean axes [-2])
  pooled      ConvNeXt's pooler: the mean over dims (-2, -1) of [batch, 5,
              1, 2], then a LayerNorm (axis -1): sample by sample"""
import os
import sys

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.a, self.b = nn.Linear(6, 5), nn.Linear(6, 5)
        self.norm = nn.LayerNorm(5)

    def forward(self, x):
        z = self.a(x)
        k = self.kind
        if k == "centred":
            return z - z.mean(0, keepdim=True)
        if k == "contrast":
            s = z @ self.b(x).t()
            return s.softmax(-1) @ self.b(x)
        if k == "first":
            return z + z[0]
        if k == "cumulative":
            return z.cumsum(0)
        if k == "persample":
            y = (z - z.mean(1, keepdim=True)).reshape(-1)
            return y.reshape(x.shape[0], 5)
        if k == "negative":
            return z - z.mean(-2, keepdim=True)
        if k == "pooled":
            grid = torch.cat([z, 2 * z], -1).reshape(x.shape[0], 5, 1, 2)
            return self.norm(grid.mean((-2, -1)))
        raise ValueError(k)


def main():
    out = sys.argv[1]
    x = torch.randn(8, 6)
    for kind in ("centred", "contrast", "first", "cumulative", "persample",
                 "negative", "pooled"):
        torch.manual_seed(0)
        torch.onnx.export(Model(kind).eval(), (x,), os.path.join(out, kind + ".onnx"),
                          input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})


if __name__ == "__main__":
    main()
