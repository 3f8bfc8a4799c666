"""no-decay.test's model and PyTorch references: Linear, LayerNorm, GELU,
Linear, exported with torch.onnx.export's defaults (symbolic batch), and 4
steps of AdamW and SGD with weight decay 0.1 in two parameter groups, as
Hugging Face's Trainer and nanoGPT build them: the 2-D weights decayed, the
biases and the LayerNorm weight not (<dir>/ref_<optimizer>_groups.json),
and with one group decaying everything (<dir>/ref_<optimizer>_all.json)."""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS, BATCH, DECAY = 4, 4, 0.1
LRS = {"adamw": 0.01, "sgd": 0.5}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 12)
        self.ln = nn.LayerNorm(12)
        self.fc2 = nn.Linear(12, 5)

    def forward(self, x):
        return self.fc2(F.gelu(self.ln(self.fc1(x))))


def optimizer(opt_name, model, groups):
    params = list(model.named_parameters())
    if groups:
        params = [{"params": [p for _, p in params if p.dim() >= 2],
                   "weight_decay": DECAY},
                  {"params": [p for _, p in params if p.dim() < 2],
                   "weight_decay": 0.0}]
    else:
        params = [p for _, p in params]
    cls = torch.optim.AdamW if opt_name == "adamw" else torch.optim.SGD
    return cls(params, lr=LRS[opt_name], weight_decay=DECAY)


def main(d):
    os.makedirs(d, exist_ok=True)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 6, generator=g)
    labels = torch.randint(0, 5, (8,), generator=g)
    np.save(os.path.join(d, "x.npy"), x.numpy())
    np.save(os.path.join(d, "labels.npy"), labels.numpy())
    torch.manual_seed(0)
    torch.onnx.export(Net().eval(), (x[:BATCH],), os.path.join(d, "m.onnx"),
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    for opt_name in LRS:
        for groups in (True, False):
            torch.manual_seed(0)
            m = Net()
            opt = optimizer(opt_name, m, groups)
            losses, norms = [], []
            for k in range(STEPS):
                lo = (k * BATCH) % x.shape[0]
                opt.zero_grad()
                loss = F.cross_entropy(m(x[lo:lo + BATCH]),
                                       labels[lo:lo + BATCH])
                loss.backward()
                norms.append(nn.utils.clip_grad_norm_(m.parameters(),
                                                      float("inf")).item())
                losses.append(loss.item())
                opt.step()
            name = f"ref_{opt_name}_{'groups' if groups else 'all'}.json"
            with open(os.path.join(d, name), "w") as f:
                json.dump({"config": {"lr": LRS[opt_name]}, "losses": losses,
                           "grad_norms": norms}, f)


if __name__ == "__main__":
    main(sys.argv[1])
