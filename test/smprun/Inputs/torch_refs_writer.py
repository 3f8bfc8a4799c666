"""PyTorch's references for the small models the smprun tests generate:
`steps` steps of cross-entropy training from torch.manual_seed(0) + cls(),
batch k = samples [k B, (k + 1) B) (mod N) as smprun takes them, written as
<dir>/ref_<optimizer>.json in compare_losses.py's format; write_case also
writes the data and the model's export (torch.onnx.export's defaults)."""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F


def write_refs(cls, x, labels, d, lrs, steps, batch):
    samples = labels.shape[0]
    for opt_name, lr in lrs.items():
        torch.manual_seed(0)
        m = cls()
        opt = (torch.optim.SGD(m.parameters(), lr=lr) if opt_name == "sgd"
               else torch.optim.AdamW(m.parameters(), lr=lr))
        losses, norms = [], []
        for k in range(steps):
            lo = (k * batch) % samples
            opt.zero_grad()
            loss = F.cross_entropy(m(x[lo:lo + batch]), labels[lo:lo + batch])
            loss.backward()
            norms.append(torch.nn.utils.clip_grad_norm_(m.parameters(), float("inf")).item())
            losses.append(loss.item())
            opt.step()
        with open(os.path.join(d, f"ref_{opt_name}.json"), "w") as f:
            json.dump({"config": {"lr": lr}, "losses": losses, "grad_norms": norms}, f)


def write_case(d, cls, x, labels, lrs, steps, batch):
    """<d>/x.npy, labels.npy, model.onnx (cls() from torch.manual_seed(0),
    eval() mode, a symbolic batch) and the references."""
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), x.numpy())
    np.save(os.path.join(d, "labels.npy"), labels.numpy())
    torch.manual_seed(0)
    model = cls().eval()
    torch.onnx.export(model, (x[:batch],), os.path.join(d, "model.onnx"),
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    write_refs(cls, x, labels, d, lrs, steps, batch)
