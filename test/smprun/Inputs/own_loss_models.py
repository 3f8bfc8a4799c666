"""Writes, into argv[1]/<name>/, small models that compute their own loss
(an export of a module that returns it: `smpc compile --loss loss`), with
torch.onnx.export's defaults, their data (x.npy, labels.npy) and PyTorch's
one-device reference (ref_sgd.json: compare_losses.py's format), and 12
held-out samples (eval/) with the Hugging Face Trainer's eval loss of the
trained model on them (ref_eval.json: compare_evals.py's format; batches
of 8 and a short one of 4, each the model's own loss, weighted by their
samples; ref_eval4.json, ref_eval12.json: in batches of 4, of 12, the
Trainer's per_device_eval_batch_size). Used by test/smprun/own-loss.test, which trains them on one rank,
under --dp 2 and with micro-batches: every plan must train the one-device
numbers, and evaluate the Trainer's where smp can pad the short batch.

  sum        cross-entropy with reduction='sum'
  ignore     cross-entropy mean with ignore_index=3 (the shards count
             different numbers of labels)
  weighted   cross-entropy mean with class weights (a constant: divides by
             the sum of the labels' weights)
  batchmean  sum / x.size(0) * 0.5 (a constant folded from the batch's shape)
  literal    sum / 4.0 (a literal that equals the shard's batch)
  masked     sum(err * mask) / sum(mask), the mask from the labels
  shiftmean  sequences (x [B, 3, 6], labels [B, 3]): cross-entropy mean with
             ignore_index=3 of logits[:, :-1] against labels[:, 1:] (labels
             shifted in the model, as Hugging Face LMs do)
  nll        F.nll_loss(log_softmax, ignore_index=3) (ONNX's
             NegativeLogLikelihoodLoss: a ratio of two sums)
  nllweight  F.nll_loss with class weights (a constant) and reduction mean
  critbuf    nn.CrossEntropyLoss(weight=...) as a submodule: the weights are
             its buffer (an initializer the loss alone reads), trained with
             weight decay 0.1 (PyTorch neither steps nor decays a buffer)
  reg        mean cross-entropy + 1e-2 * sum of the squared weights (4 of
             its held-out labels -100)
  product    mean(logits) * mean(logits ** 2) (no sum or mean: refused)
  shifted    sum / (x.size(0) + 1) (folded from the batch's shape, not
             proportional to it: refused)
  selfsup    cross-entropy mean whose labels the model also embeds (an
             input it reads, where padding's -100 is out of range)"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

CLASSES, BATCH, SAMPLES, STEPS, LR, HELD_OUT = 5, 8, 16, 3, 0.1, 12


class Model(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.l1, self.l2 = nn.Linear(6, 8), nn.Linear(8, CLASSES)
        if kind == "critbuf":
            self.crit = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5, 3.0, 1.5]))
        if kind == "selfsup":
            self.emb = nn.Embedding(CLASSES, 8)

    def forward(self, x, labels):
        k = self.kind
        if k == "selfsup":  # the labels also embedded: an input, not only labels
            return F.cross_entropy(self.l2(torch.tanh(self.l1(x) + self.emb(labels))), labels)
        z = self.l2(torch.tanh(self.l1(x)))
        if k == "sum":
            return F.cross_entropy(z, labels, reduction="sum")
        if k == "ignore":
            return F.cross_entropy(z, labels, ignore_index=3)
        if k == "weighted":
            w = torch.tensor([1.0, 2.0, 0.5, 3.0, 1.5])
            return F.cross_entropy(z, labels, weight=w)
        if k == "critbuf":
            return self.crit(z, labels)
        if k == "batchmean":
            return F.cross_entropy(z, labels, reduction="sum") / x.shape[0] * 0.5
        if k == "literal":
            return F.cross_entropy(z, labels, reduction="sum") / 4.0
        if k == "masked":
            mask = (labels != 0).float()
            err = (z.softmax(-1)[:, 0] - 0.5) ** 2
            return (err * mask).sum() / mask.sum()
        if k == "shiftmean":  # x [B, 3, 6], labels [B, 3]
            return F.cross_entropy(z[:, :-1].reshape(-1, CLASSES),
                                   labels[:, 1:].reshape(-1), ignore_index=3)
        if k == "nll":
            return F.nll_loss(F.log_softmax(z, -1), labels, ignore_index=3)
        if k == "nllweight":
            w = torch.tensor([1.0, 2.0, 0.5, 3.0, 1.5])
            return F.nll_loss(F.log_softmax(z, -1), labels, weight=w)
        if k == "reg":
            reg = sum((p ** 2).sum() for n, p in self.named_parameters() if "weight" in n)
            return F.cross_entropy(z, labels) + 1e-2 * reg
        if k == "product":
            return z.mean() * (z ** 2).mean()
        if k == "shifted":
            return F.cross_entropy(z, labels, reduction="sum") / (x.shape[0] + 1)
        raise ValueError(k)


KINDS = ("sum", "ignore", "weighted", "batchmean", "literal", "masked", "shiftmean", "nll",
         "nllweight", "critbuf", "reg", "product", "shifted", "selfsup")
# Kinds trained with weight decay (smpc --weight-decay).
WEIGHT_DECAY = {"critbuf": 0.1}


def main():
    out = sys.argv[1]
    g = torch.Generator().manual_seed(3)
    x = torch.randn(SAMPLES, 6, generator=g)
    # Label 3 (ignored by "ignore") three times in the first 4 samples, once
    # in the next 4: the dp ranks count different numbers of labels.
    labels = torch.tensor([3, 1, 3, 3, 0, 3, 2, 4, 1, 3, 0, 0, 2, 3, 4, 1])
    flat = (x, labels)
    g3 = torch.Generator().manual_seed(4)
    seqs = (torch.randn(SAMPLES, 3, 6, generator=g3),
            torch.randint(0, CLASSES, (SAMPLES, 3), generator=g3))
    g5 = torch.Generator().manual_seed(5)
    held = {"flat": (torch.randn(HELD_OUT, 6, generator=g5),
                     torch.randint(0, CLASSES, (HELD_OUT,), generator=g5)),
            "seqs": (torch.randn(HELD_OUT, 3, 6, generator=g5),
                     torch.randint(0, CLASSES, (HELD_OUT, 3), generator=g5))}
    for kind in KINDS:
        x, labels = seqs if kind == "shiftmean" else flat
        ex, elabels = held["seqs" if kind == "shiftmean" else "flat"]
        if kind == "reg":  # ignored labels: batches count different numbers
            elabels = elabels.clone()
            elabels[[1, 5, 6, 10]] = -100
        d = os.path.join(out, kind)
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "x.npy"), x.numpy())
        np.save(os.path.join(d, "labels.npy"), labels.numpy())
        torch.manual_seed(0)
        m = Model(kind)
        torch.onnx.export(m, (x[:BATCH], labels[:BATCH]), os.path.join(d, "model.onnx"),
                          input_names=["x", "labels"], output_names=["loss"],
                          dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
        wd = WEIGHT_DECAY.get(kind, 0.0)
        opt = torch.optim.SGD(m.parameters(), lr=LR, weight_decay=wd)
        losses, norms = [], []
        for k in range(STEPS):
            lo = (k * BATCH) % SAMPLES
            opt.zero_grad()
            loss = m(x[lo:lo + BATCH], labels[lo:lo + BATCH])
            loss.backward()
            norms.append(torch.nn.utils.clip_grad_norm_(m.parameters(), float("inf")).item())
            losses.append(loss.item())
            opt.step()
        with open(os.path.join(d, "ref_sgd.json"), "w") as f:
            json.dump({"config": {"lr": LR, "weight_decay": wd}, "losses": losses, "grad_norms": norms}, f)
        os.makedirs(os.path.join(d, "eval"), exist_ok=True)
        np.save(os.path.join(d, "eval", "x.npy"), ex.numpy())
        np.save(os.path.join(d, "eval", "labels.npy"), elabels.numpy())
        m.eval()
        for size, name in ((BATCH, "ref_eval.json"), (4, "ref_eval4.json"),
                           (12, "ref_eval12.json")):
            with torch.no_grad():
                batch_losses = [m(ex[b:b + size], elabels[b:b + size]).item()
                                for b in range(0, HELD_OUT, size)]
            sizes = [min(size, HELD_OUT - b) for b in range(0, HELD_OUT, size)]
            evals = [{"step": STEPS, "batch_losses": batch_losses, "samples": HELD_OUT,
                      "eval_loss": float(np.dot(batch_losses, sizes) / HELD_OUT)}]
            with open(os.path.join(d, name), "w") as f:
                json.dump({"config": {"batch": BATCH, "eval_batch_size": size},
                           "evals": evals}, f)


if __name__ == "__main__":
    main()
