"""PyTorch training references for smp's tests, shared by the fixture
scripts (make_export_traps.py, make_op_fixtures.py, make_real_models.py).

train_steps() runs `steps` optimizer steps in train() mode on consecutive
batches (wrapping around the samples, as smprun does) with cross-entropy over
every position, and returns the per-step losses and global gradient norms;
write_ref() stores them as test/train/compare_losses.py reads them.
"""

import json

import torch

LRS = {"sgd": 0.1, "adamw": 1e-2}


def train_steps(model, inputs, labels, classes, opt_name, steps, batch):
    """inputs: the model's input tensors (sliced alike, first dim samples)."""
    model.train()
    lr = LRS[opt_name]
    opt = (torch.optim.SGD(model.parameters(), lr=lr) if opt_name == "sgd"
           else torch.optim.AdamW(model.parameters(), lr=lr))
    samples = labels.shape[0]
    losses, norms = [], []
    for k in range(steps):
        lo = (k * batch) % samples
        opt.zero_grad()
        logits = model(*(t[lo:lo + batch] for t in inputs))
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, classes), labels[lo:lo + batch].reshape(-1))
        loss.backward()
        norms.append(torch.sqrt(sum((p.grad.double() ** 2).sum()
                                    for p in model.parameters()
                                    if p.grad is not None)).item())
        losses.append(loss.item())
        opt.step()
    return losses, norms


def write_ref(path, config, losses, norms):
    ref = {"config": config, "losses": losses, "grad_norms": norms}
    path.write_text(json.dumps(ref, indent=2) + "\n")
