"""PyTorch training references for smp's tests, shared by the fixture
scripts (make_export_traps.py, make_op_fixtures.py, make_real_models.py,
make_resnet.py).

train_steps() runs `steps` optimizer steps in train() mode on consecutive
batches (wrapping around the samples, as smprun does) with cross-entropy over
every position, and returns the per-step losses and global gradient norms;
write_ref() stores them as test/train/compare_losses.py reads them;
fixture_arguments() is the scripts' command line.
"""

import argparse
import json
from pathlib import Path

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


def train_steps_grouped(model, x, labels, classes, opt_name, steps, batch,
                        dp, microbatches, sync=True):
    """train_steps as smp splits a step over `dp` data-parallel replicas and
    `microbatches` micro-batches with gradient accumulation (what matters
    for BatchNorm in train() mode): replica r takes samples [r B/dp, (r+1)
    B/dp) of the step's batch, micro-batch j of it the j-th equal slice.
    sync (SyncBatchNorm): micro-batch j's statistics are over every
    replica's micro-batch j (one forward of their concatenation); otherwise
    each replica's own, the running statistics rank 0's (DDP's
    broadcast_buffers). At dp = microbatches = 1 this is train_steps."""
    model.train()
    lr = LRS[opt_name]
    opt = (torch.optim.SGD(model.parameters(), lr=lr) if opt_name == "sgd"
           else torch.optim.AdamW(model.parameters(), lr=lr))
    samples = labels.shape[0]
    per = batch // (dp * microbatches)
    losses, norms = [], []
    for k in range(steps):
        lo = (k * batch) % samples
        opt.zero_grad()
        total = 0.0
        for j in range(microbatches):
            rows = [lo + r * (batch // dp) + j * per for r in range(dp)]
            groups = ([[torch.arange(a, a + per) for a in rows]] if sync
                      else [[torch.arange(a, a + per)] for a in rows])
            for g, idx in enumerate(groups):
                idx = torch.cat(idx)
                saved = {n: b.clone() for n, b in model.named_buffers()}
                logits = model(x[idx])
                loss = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, classes), labels[idx].reshape(-1),
                    reduction="sum") / labels[lo:lo + batch].numel()
                loss.backward()
                total += loss.item()
                if g > 0:  # replicas other than rank 0 keep no statistics
                    with torch.no_grad():
                        for n, b in model.named_buffers():
                            b.copy_(saved[n])
        norms.append(torch.sqrt(sum((p.grad.double() ** 2).sum()
                                    for p in model.parameters()
                                    if p.grad is not None)).item())
        losses.append(total)
        opt.step()
    return losses, norms


def fixture_arguments(name):
    """A command-line parser with --out, the directory written (default:
    test/fixtures/NAME of this repository)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parent.parent / "test" / "fixtures" / name)
    return ap


def write_ref(path, config, losses, norms):
    ref = {"config": config, "losses": losses, "grad_norms": norms}
    path.write_text(json.dumps(ref, indent=2) + "\n")


def strip_stack_traces(path):
    """Drops the nodes' stack traces of a dynamo export (they would make
    the file several times as large; smp reads them only to warn of a
    torch.no_grad() block, DetachedValues.cpp, whose fixture keeps them)."""
    import onnx  # only the fixture scripts need it
    m = onnx.load(str(path))
    for n in m.graph.node:
        keep = [p for p in n.metadata_props
                if p.key != "pkg.torch.onnx.stack_trace"]
        del n.metadata_props[:]
        n.metadata_props.extend(keep)
    onnx.save(m, str(path))
