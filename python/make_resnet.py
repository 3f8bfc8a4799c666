#!/usr/bin/env python3
"""Writes test/fixtures/resnet/: a small torchvision-style ResNet (BasicBlocks
of conv-BN-ReLU, a downsampling block whose shortcut is a 1x1 conv + BN,
global average pooling, a linear classifier; fresh init, so every BN weight
is 1 and bias 0, running mean 0 and variance 1) trained in PyTorch's train()
mode, with its exports and PyTorch's references.

  resnet.onnx        the export docs/bring-your-own-model.md recommends for a
                     model with BatchNorm: the dynamo exporter with
                     optimize=False (its optimiser would fold BN into the
                     convolutions) and a symbolic batch dim, in eval() mode
  resnet_train.onnx  the TorchScript exporter in training mode
                     (training=torch.onnx.TrainingMode.TRAINING):
                     BatchNormalization with training_mode=1 and its running
                     statistics outputs
  resnet_plain.onnx  plain torch.onnx.export(model, (x,), path) of the module
                     as users have it (train() mode, default flags): the
                     optimiser folds every BN into its convolution
  x.npy, labels.npy  16 samples [3, 16, 16], 10 classes
  eval/x.npy         the first 8 (one batch), for forward runs
  logits.npy         PyTorch's eval() output of the fresh model on x[:8]
  logits_<opt>.npy   the same after ref_<opt>'s 5 steps (running statistics
                     and parameters trained)
  ref_<opt>[_<plan>].json
                     PyTorch's per-step losses and grad norms (5 steps, SGD
                     lr 0.1 / AdamW lr 1e-2, batches of 8, train() mode),
                     with "running_stats": every BN's running mean and
                     variance after the 5 steps
      ref_sgd, ref_adamw   one device (python/torch_refs.py)
      ref_sgd_train_export the same from resnet_train.onnx's statistics
      ref_sgd_mb4          4 micro-batches of 2 per step with gradient
                           accumulation: BN statistics per micro-batch,
                           running statistics updated once per micro-batch
      ref_sgd_dp2_mb2      DDP over 2 replicas with SyncBatchNorm and 2
                           micro-batches: each micro-batch's statistics over
                           both replicas' micro-batches (2 + 2 samples)
      ref_sgd_dp2_replica  DDP over 2 replicas, BatchNorm (not synced): each
                           replica's statistics over its own 4 samples, the
                           running statistics rank 0's (broadcast_buffers)

  heldout/, ref_<opt>_eval.json
                     written by make_eval_refs.py --resnet from the above:
                     the first 8 samples with their labels, and PyTorch's
                     eval() loss of them after ref_<opt>'s 5 steps (from
                     logits_<opt>.npy), for smprun --eval-data

Needs torch and onnx (PyPI); CI only reads the committed files.
"""

import json
import warnings

import numpy as np
import torch

import torch_refs

BATCH, SAMPLES, STEPS, CLASSES = 8, 16, 5, 10


class BasicBlock(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = torch.nn.Sequential(
                torch.nn.Conv2d(cin, cout, 1, stride, bias=False),
                torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.downsample is None
                               else self.downsample(x)))


class ResNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.layer1 = torch.nn.Sequential(BasicBlock(8, 8, 1))
        self.layer2 = torch.nn.Sequential(BasicBlock(8, 16, 2))
        self.fc = torch.nn.Linear(16, CLASSES)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(x.mean((2, 3)))


def fresh():
    torch.manual_seed(0)
    return ResNet()


def running_stats(model):
    return {name: buf.tolist() for name, buf in model.named_buffers()
            if name.endswith(("running_mean", "running_var"))}


def write(path, config, losses, norms, model):
    ref = {"config": config, "losses": losses, "grad_norms": norms,
           "running_stats": running_stats(model)}
    path.write_text(json.dumps(ref, indent=2) + "\n")


def main():
    out = torch_refs.fixture_arguments("resnet").parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")

    g = torch.Generator().manual_seed(1)
    x = torch.randn(SAMPLES, 3, 16, 16, generator=g)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    np.save(out / "x.npy", x.numpy())
    np.save(out / "labels.npy", y.numpy())
    (out / "eval").mkdir(exist_ok=True)  # one batch, for forward runs
    np.save(out / "eval" / "x.npy", x[:BATCH].numpy())
    with torch.no_grad():
        np.save(out / "logits.npy", fresh().eval()(x[:BATCH]).numpy())

    example = (x[:BATCH],)
    torch.onnx.export(fresh().eval(), example, out / "resnet.onnx",
                      dynamo=True, optimize=False, external_data=False,
                      input_names=["x"],
                      output_names=["logits"],
                      dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    # Exporting in training mode runs the module once: its running
    # statistics (and the file's) are one update past the fresh ones.
    exported = fresh().train()
    torch.onnx.export(exported, example, out / "resnet_train.onnx",
                      dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    torch.onnx.export(fresh(), example, out / "resnet_plain.onnx",
                      external_data=False)  # one file, as committed
    for f in ("resnet.onnx", "resnet_train.onnx", "resnet_plain.onnx"):
        data = out / (f + ".data")
        assert not data.exists(), f"{data}: external data"
        assert (out / f).stat().st_size < 1 << 20

    base = {"model": "resnet", "batch_size": BATCH, "steps": STEPS}
    for opt in ("sgd", "adamw"):
        model = fresh()
        losses, norms = torch_refs.train_steps(model, [x], y, CLASSES, opt,
                                               STEPS, BATCH)
        write(out / f"ref_{opt}.json",
              dict(base, optimizer=opt, lr=torch_refs.LRS[opt]),
              losses, norms, model)
        with torch.no_grad():  # the trained model in eval() mode
            np.save(out / f"logits_{opt}.npy",
                    model.eval()(x[:BATCH]).numpy())
    # The training-mode export goes on from the statistics it holds.
    losses, norms = torch_refs.train_steps(exported, [x], y, CLASSES, "sgd",
                                           STEPS, BATCH)
    write(out / "ref_sgd_train_export.json",
          dict(base, optimizer="sgd", lr=torch_refs.LRS["sgd"]),
          losses, norms, exported)
    # The grouped loop at one replica and one micro-batch is torch_refs'.
    model = fresh()
    check, _ = torch_refs.train_steps_grouped(model, x, y, CLASSES, "sgd",
                                              STEPS, BATCH, 1, 1)
    ref = json.loads((out / "ref_sgd.json").read_text())["losses"]
    assert np.allclose(check, ref, rtol=1e-6), (check, ref)
    for name, dp, mb, sync in (("mb4", 1, 4, True), ("dp2_mb2", 2, 2, True),
                               ("dp2_replica", 2, 1, False)):
        model = fresh()
        losses, norms = torch_refs.train_steps_grouped(
            model, x, y, CLASSES, "sgd", STEPS, BATCH, dp, mb, sync)
        write(out / f"ref_sgd_{name}.json",
              dict(base, optimizer="sgd", lr=torch_refs.LRS["sgd"], dp=dp,
                   microbatches=mb, bn_stats="global" if sync else "replica"),
              losses, norms, model)
    print("wrote", out)


if __name__ == "__main__":
    main()
