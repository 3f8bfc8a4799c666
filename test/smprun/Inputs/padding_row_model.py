"""Writes an nn.Embedding(padding_idx=0) model exported as users do
(torch.onnx.export's defaults: the TorchScript exporter, which drops
padding_idx), its data (token 0 in every sample) and PyTorch's losses and
gradient norms for 3 steps of SGD, as smprun --metrics lines: pad.jsonl
with padding_idx (row 0 gets no gradient), nopad.jsonl for the same model
and initial values with an ordinary row 0. Usage: padding_row_model.py DIR"""
import copy
import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class M(nn.Module):
    def __init__(self, padding_idx):
        super().__init__()
        self.e = nn.Embedding(11, 8, padding_idx=padding_idx)
        self.l = nn.Linear(8, 11)

    def forward(self, idx):
        return self.l(torch.tanh(self.e(idx)))


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
model = M(padding_idx=0).eval()
idx = torch.randint(0, 11, (8, 5))
idx[:, 0] = 0
labels = torch.randint(0, 11, (8, 5))
np.save(os.path.join(out, "idx.npy"), idx.numpy())
np.save(os.path.join(out, "labels.npy"), labels.numpy())
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(model, (idx[:4],), os.path.join(out, "m.onnx"),
                      input_names=["idx"], output_names=["logits"],
                      dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
ordinary = M(padding_idx=None).eval()
ordinary.load_state_dict(model.state_dict())
for name, m in (("pad", copy.deepcopy(model)), ("nopad", ordinary)):
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    with open(os.path.join(out, name + ".jsonl"), "w") as f:
        for k in range(3):
            rows = [(k * 4 + i) % 8 for i in range(4)]
            opt.zero_grad()
            logits = m(idx[rows])
            loss = F.cross_entropy(logits.reshape(-1, 11), labels[rows].reshape(-1))
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(m.parameters(), float("inf"))
            opt.step()
            f.write(json.dumps({"step": k + 1, "loss": loss.item(),
                                "grad_norm": norm.item()}) + "\n")
