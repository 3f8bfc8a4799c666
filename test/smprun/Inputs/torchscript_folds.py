"""Writes argv[1]/{x,labels}.npy, model.onnx and PyTorch's references
(ref_sgd.json, ref_adamw.json) for test/smprun/torchscript-folds.test: a
small classifier whose output adds a zero buffer read through a cast
(`self.final_bias.to(x.dtype)`, as BART adds its final_logits_bias),
exported by the TorchScript exporter (dynamo=False) with its defaults:
constant folding stores the buffer as a value it computed, `onnx::Add_N`."""
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
    model = FinalBias().eval()
    legacy = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
    torch.onnx.export(model, (x[:BATCH],), os.path.join(out, "model.onnx"),
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                      **legacy)
    write_refs(FinalBias, x, labels, out, LRS, STEPS, BATCH)


if __name__ == "__main__":
    main()
