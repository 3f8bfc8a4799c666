#!/usr/bin/env python3
"""Writes test/fixtures/norms/: a small CNN whose BatchNorm keeps no running
statistics (nn.BatchNorm2d(track_running_stats=False): it normalises with
its batch's statistics in train() and eval() alike), exported the way users
export it, and PyTorch's training references.

  bn_batch_stats.onnx    torch.onnx.export(model, (x,), path,
                         dynamic_shapes=...) with default flags: the
                         exporter computes the mean and variance in the
                         graph (ReduceMean) and feeds them to an inference
                         BatchNormalization
  x.npy, y.npy           16 images 3 x 8 x 8, their classes (of 10)
  ref_sgd.json, ref_adamw.json
                         5 steps of batch 8, train() mode
                         (test/train/compare_losses.py)

Needs torch and onnx (PyPI: torch 2.15); CI only reads the committed files.
"""

import warnings

import numpy as np
import torch
from torch import nn

import torch_refs

BATCH, SAMPLES, STEPS, CLASSES = 8, 16, 5, 10


class BatchStatsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8, track_running_stats=False)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


def main():
    out = torch_refs.fixture_arguments("norms").parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model = BatchStatsNet().eval()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(2)
    x = torch.randn(SAMPLES, 3, 8, 8, generator=g)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    np.save(out / "x.npy", x.numpy())
    np.save(out / "y.npy", y.numpy())
    path = out / "bn_batch_stats.onnx"
    torch.onnx.export(model, (x[:BATCH],), str(path), input_names=["x"],
                      output_names=["logits"],
                      dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
                      external_data=False)
    torch_refs.strip_stack_traces(path)
    for opt in ("sgd", "adamw"):
        model.load_state_dict(init)
        losses, norms = torch_refs.train_steps(model, (x,), y, CLASSES, opt,
                                               STEPS, BATCH)
        torch_refs.write_ref(out / f"ref_{opt}.json",
                             {"name": opt, "optimizer": opt,
                              "lr": torch_refs.LRS[opt], "batch_size": BATCH,
                              "steps": STEPS, "samples": SAMPLES},
                             losses, norms)


if __name__ == "__main__":
    main()
