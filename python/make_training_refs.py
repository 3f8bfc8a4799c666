#!/usr/bin/env python3
"""Training fixtures: small models, datasets and PyTorch loss curves that smp's
training step (smpc compile --train, smprun --steps) must reproduce.

For every model <name> (mlp, cnn_bn, gpt, llama, bert) this writes, under
--out (default test/fixtures/train relative to the repo root):

    <name>.onnx                  opset 17, dynamic leading dim `batch`, < 1 MB
    <name>/<input>.npy           the dataset: 16 samples per graph input
    <name>/labels.npy            int64 class ids (-100 = ignored), one per
                                 sample (mlp, cnn_bn) or per token (the rest)
    <name>/ref_<config>.json     {"config": {...}, "losses": [5 floats],
                                  "grad_norms": [5 floats]} (+ "lrs":
                                  [5 floats] for a config with a schedule;
                                  + "loss_scales" and "skipped" for fp16)
    <name>/logits_after_<config>.npy  the trained model's logits (eval-mode
                                 forward after the STEPS steps) on the first
                                 BATCH samples
    <name>/first8/<input>.npy    the first BATCH samples of every graph input
                                 (no labels): the data of a forward run of a
                                 batch-8 artifact

and replaces the training section of ../README.md.  The references come
from training a deep copy of the PyTorch model for STEPS steps of BATCH
samples (a config's own `steps` where it sets them: fp16_overflow runs 6);
step k (0-based) uses samples (k*BATCH + i) % N, as smprun does.
The loss is F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1)) on the
batch before the step; the grad norm is what clip_grad_norm_(params, inf)
returns, before any clipping.  A config with a learning-rate schedule
(adamw_cosine) runs it as LambdaLR(opt, lambda k: lr_at(k) / lr), stepped
after every optimizer step, where lr_at(k) is smp's schedule of 0-based step
k of STEPS (linear warmup lr*(k+1)/K for k < K, then cosine
lr*0.5*(1+cos(pi*(k-K)/max(1, STEPS-K))) or constant lr); the lr each step
used is stored as "lrs".  Everything is float32 on one CPU thread with
torch.use_deterministic_algorithms(True), except in the bf16 configs
(bf16_sgd, bf16_adamw: smpc --precision bf16), whose forward runs under
torch.autocast("cpu", dtype=torch.bfloat16) with fp32 parameters (master
weights) and optimizer, the loss computed in fp32 on logits.float(), and the
backward outside autocast (the standard mixed-precision recipe); their
logits_after_<config>.npy come from the same autocast forward, cast to
float32.  The fp16 configs (fp16_sgd, fp16_adamw, and fp16_overflow for mlp
only: smpc --precision fp16 [--loss-scale X]) are the same recipe under
torch.autocast("cpu", dtype=torch.float16) (supported on CPU by this torch;
no manual casting) plus dynamic loss scaling with torch.amp.GradScaler("cpu")
and its defaults (init_scale 65536 or the config's loss_scale,
growth_factor 2, backoff_factor 0.5, growth_interval 2000):
scaler.scale(loss).backward(), scaler.unscale_(opt), the grad norm of the
unscaled gradients, scaler.step(opt), scaler.update().  Their references
also hold "loss_scales" (the float32 scale each step used) and "skipped"
(true where a gradient was inf/NaN, so that opt.step() did not run and the
scale halved; the grad norm of such a step is null).  The script checks
that a skipped step left the parameters and the optimizer's step count
(Adam's bias correction, SGD's momentum buffer) unchanged, and that skipped
<=> inf/NaN found by unscale_ <=> non-finite grad norm.

The models are trained in eval() mode: BatchNorm (cnn_bn) uses and keeps its
running statistics, which is what smp's inference-mode batch_norm computes
(its scale and bias train; mean and variance get no gradient).  None of the
models has dropout.

Every export is checked with onnx.checker and with onnxruntime against
PyTorch on the first batch (and at batch 3, for the dynamic dim).

Regenerate with:  python3 python/make_training_refs.py
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import sys
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as MF  # noqa: E402  (export helpers, input generators, tied-weight check)
import smp_models as M  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "test" / "fixtures" / "train"
OPSET = 17
SAMPLES = 16
BATCH = 8
STEPS = 5
ALT_BATCH = 3  # second onnxruntime check of the dynamic batch dim
LABELS = "labels"
IGNORE_INDEX = -100
FIRST_DIR = f"first{BATCH}"  # <name>/first8/: the first BATCH samples of every input
LOSS = f"cross_entropy:{MF.OUTPUT}:{LABELS}"


# --------------------------------------------------------------------------- #
# Optimizer configurations (PyTorch arguments and the matching smpc flags)
# --------------------------------------------------------------------------- #


@dataclass
class OptConfig:
    name: str
    optimizer: str  # sgd | adam | adamw
    lr: float
    momentum: float = 0.0
    weight_decay: float | None = None  # None: the optimizer's default
    clip_grad_norm: float | None = None
    lr_schedule: str = "constant"  # constant | cosine (smpc --lr-schedule)
    warmup_steps: int = 0  # smpc --warmup-steps
    precision: str = "fp32"  # fp32 | bf16 | fp16 (smpc --precision; PyTorch: CPU autocast)
    loss_scale: float | None = None  # fp16: GradScaler's init_scale (smpc --loss-scale); None: default
    steps: int = STEPS  # smprun --steps
    models: tuple[str, ...] | None = None  # only these training fixtures (None: every one)

    @property
    def bf16(self) -> bool:
        return self.precision == "bf16"

    @property
    def fp16(self) -> bool:
        return self.precision == "fp16"

    def applies_to(self, model: str) -> bool:
        return self.models is None or model in self.models

    def autocast(self):
        """The context of the forward pass: CPU autocast to bfloat16 (bf16) or float16 (fp16) for a
        mixed-precision config (fp32 parameters, i.e. master weights, and optimizer; autocast casts
        them where an op runs in the low precision), else nothing."""
        if self.bf16:
            return torch.autocast("cpu", dtype=torch.bfloat16)
        if self.fp16:
            return torch.autocast("cpu", dtype=torch.float16)
        if self.precision != "fp32":
            raise ValueError(self.precision)
        return contextlib.nullcontext()

    def make_scaler(self):
        """fp16: torch.amp.GradScaler("cpu") with its defaults (growth_factor 2, backoff_factor 0.5,
        growth_interval 2000; init_scale 65536 unless loss_scale is given), else None."""
        if not self.fp16:
            return None
        kw = {} if self.loss_scale is None else {"init_scale": self.loss_scale}
        return torch.amp.GradScaler("cpu", **kw)

    @property
    def scheduled(self) -> bool:
        return self.lr_schedule != "constant" or self.warmup_steps > 0

    def lr_at(self, k: int, total: int | None = None) -> float:
        """The learning rate of 0-based step k of a run of `total` (default: self.steps) steps (smp's
        runtime schedule)."""
        if total is None:
            total = self.steps
        if k < self.warmup_steps:
            return self.lr * (k + 1) / self.warmup_steps
        if self.lr_schedule == "cosine":
            return self.lr * 0.5 * (1.0 + math.cos(math.pi * (k - self.warmup_steps)
                                                    / max(1, total - self.warmup_steps)))
        return self.lr

    def make_scheduler(self, opt: torch.optim.Optimizer):
        """LambdaLR giving step k the rate lr_at(k), or None without a schedule."""
        if not self.scheduled:
            return None
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda k: self.lr_at(k) / self.lr)

    def make(self, params) -> torch.optim.Optimizer:
        kw = {} if self.weight_decay is None else {"weight_decay": self.weight_decay}
        if self.optimizer == "sgd":
            return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum, nesterov=False, **kw)
        if self.optimizer == "adam":
            return torch.optim.Adam(params, lr=self.lr, **kw)
        if self.optimizer == "adamw":
            return torch.optim.AdamW(params, lr=self.lr, **kw)
        raise ValueError(self.optimizer)

    def smpc_flags(self) -> str:
        f = [f"--optimizer {self.optimizer}", f"--lr {self.lr:g}"]
        if self.momentum:
            f.append(f"--momentum {self.momentum:g}")
        if self.weight_decay is not None:
            f.append(f"--weight-decay {self.weight_decay:g}")
        if self.clip_grad_norm is not None:
            f.append(f"--clip-grad-norm {self.clip_grad_norm:g}")
        if self.lr_schedule != "constant":
            f.append(f"--lr-schedule {self.lr_schedule}")
        if self.warmup_steps:
            f.append(f"--warmup-steps {self.warmup_steps}")
        if self.precision != "fp32":
            f.append(f"--precision {self.precision}")
        if self.loss_scale is not None:
            f.append(f"--loss-scale {self.loss_scale:g}")
        return " ".join(f)

    def describe(self, opt: torch.optim.Optimizer, scaler=None) -> dict:
        """The configuration as written to ref_<name>.json: every hyperparameter PyTorch used."""
        d = OrderedDict(name=self.name, optimizer=self.optimizer)
        for k, v in opt.defaults.items():
            if k in ("lr", "momentum", "dampening", "nesterov", "weight_decay", "betas", "eps", "amsgrad"):
                d[k] = list(v) if isinstance(v, tuple) else v
        d["clip_grad_norm"] = self.clip_grad_norm
        if self.scheduled:  # only then, so that the constant-rate references stay as they were
            d["lr_schedule"] = self.lr_schedule
            d["warmup_steps"] = self.warmup_steps
        if self.precision != "fp32":  # only then, so that the fp32 references stay as they were
            d["precision"] = self.precision
            dtype = {"bf16": "bfloat16", "fp16": "float16"}[self.precision]
            d["autocast"] = f"torch.autocast('cpu', dtype=torch.{dtype}) forward; loss on logits.float()"
        if scaler is not None:  # the GradScaler's settings (init_scale: the scale of the first step)
            d["grad_scaler"] = OrderedDict(
                init_scale=self.loss_scale if self.loss_scale is not None else 65536.0,
                growth_factor=scaler.get_growth_factor(), backoff_factor=scaler.get_backoff_factor(),
                growth_interval=scaler.get_growth_interval())
        d["loss"] = LOSS
        d["ignore_index"] = IGNORE_INDEX
        d["batch_size"] = BATCH
        d["steps"] = self.steps
        d["samples"] = SAMPLES
        d["smpc_flags"] = f"--train --loss {LOSS} {self.smpc_flags()} --batch-size {BATCH}"
        return d


CONFIGS = [
    OptConfig("sgd", "sgd", lr=0.1),
    OptConfig("sgd_momentum", "sgd", lr=0.05, momentum=0.9, weight_decay=1e-4, clip_grad_norm=1.0),
    OptConfig("adamw", "adamw", lr=1e-3),
    OptConfig("adam", "adam", lr=1e-3, weight_decay=1e-4),
    OptConfig("adamw_cosine", "adamw", lr=1e-3, lr_schedule="cosine", warmup_steps=2),
    # bf16 mixed precision: the forward under CPU autocast (bfloat16), fp32 master weights, loss
    # (on the logits cast to float32) and optimizer; compared loosely (2e-2 relative on the loss)
    OptConfig("bf16_sgd", "sgd", lr=0.1, precision="bf16"),
    OptConfig("bf16_adamw", "adamw", lr=1e-3, precision="bf16"),
    # fp16 mixed precision: the forward under CPU autocast (float16), fp32 master weights, loss and
    # optimizer, and dynamic loss scaling (torch.amp.GradScaler("cpu"), default settings); compared
    # loosely like bf16, the loss scale and the skipped steps exactly
    OptConfig("fp16_sgd", "sgd", lr=0.1, precision="fp16"),
    OptConfig("fp16_adamw", "adamw", lr=1e-3, precision="fp16"),
    # every step overflows (scale 1e30 * gradients > float16's max): each is skipped and the scale halves
    OptConfig("fp16_overflow", "adamw", lr=0.1, precision="fp16", loss_scale=1e30, steps=6, models=("mlp",)),
]


# --------------------------------------------------------------------------- #
# Models and datasets
# --------------------------------------------------------------------------- #


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def class_labels(shape: tuple, classes: int, seed: int, ignore_fraction: float = 0.0) -> torch.Tensor:
    """Random class ids; about `ignore_fraction` of them (at least one if > 0) set to IGNORE_INDEX."""
    g = gen(seed)
    labels = torch.randint(0, classes, shape, generator=g, dtype=torch.int64)
    if ignore_fraction > 0:
        drop = torch.rand(shape, generator=g) < ignore_fraction
        drop.view(-1)[0] = True
        labels[drop] = IGNORE_INDEX
    return labels


@dataclass
class TrainFixture:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], "OrderedDict[str, torch.Tensor]"]  # SAMPLES samples of every graph input
    labels: Callable[[], torch.Tensor]
    description: str
    constant_folding: bool = True
    check: Callable | None = None  # structural check of the export (see make_fixtures.Fixture)


SEQ = 16
TRAIN_FIXTURES = [
    TrainFixture(
        "mlp", M.build_mlp,
        lambda: MF.x_input((SAMPLES, 16))(seed=101),
        lambda: class_labels((SAMPLES,), 10, seed=102),
        "the `mlp` fixture's model (Linear-ReLU-Linear-GELU(erf)-Linear, 10 classes)",
    ),
    TrainFixture(
        "cnn_bn", M.build_cnn,
        lambda: MF.x_input((SAMPLES, 1, 12, 12))(seed=201),
        lambda: class_labels((SAMPLES,), 10, seed=202),
        "the `cnn_bn` fixture's model (Conv-BatchNorm-ReLU-MaxPool-Conv-ReLU-AvgPool-GlobalAvgPool-Linear, "
        "10 classes), exported with do_constant_folding=False so `BatchNormalization` stays; trained in "
        "eval() mode, i.e. with frozen BatchNorm statistics (scale and bias train)",
        constant_folding=False,
    ),
    TrainFixture(
        "gpt", M.build_gpt,
        lambda: MF.idx_input(64)(seed=301, override=(SAMPLES, SEQ)),
        lambda: class_labels((SAMPLES, SEQ), 64, seed=302, ignore_fraction=0.1),
        "the `gpt` fixture's model (vocab 64, lm_head tied to wte), exported with do_constant_folding=False "
        "so that the tied weight is one initializer, as in `gpt_tied_op17`; the labels are random token "
        "ids",
        constant_folding=False,
        check=MF.check_tied_embedding,
    ),
    TrainFixture(
        "llama", M.build_llama,
        lambda: MF.idx_input(64)(seed=401, override=(SAMPLES, SEQ)),
        lambda: class_labels((SAMPLES, SEQ), 64, seed=402, ignore_fraction=0.1),
        "the `llama` fixture's model (RMSNorm, RoPE, SwiGLU, untied head, vocab 64)",
    ),
    TrainFixture(
        "bert", M.build_bert,
        lambda: MF.bert_inputs()(seed=501, override=(SAMPLES, SEQ)),
        lambda: class_labels((SAMPLES, SEQ), 5, seed=502, ignore_fraction=0.1),
        "the `bert` fixture's model (post-LN encoder, per-token 5-class head); `attention_mask` is 0 on "
        "the last 4 positions of every odd sample",
    ),
]


# --------------------------------------------------------------------------- #
# Reference training
# --------------------------------------------------------------------------- #


def batch_indices(step: int) -> list[int]:
    return [(step * BATCH + i) % SAMPLES for i in range(BATCH)]


def first_indices() -> list[int]:
    """The samples of the forward checks after training (logits_after_*, first8/)."""
    return list(range(BATCH))


def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX)


def train_reference(model: nn.Module, data: "OrderedDict[str, torch.Tensor]", labels: torch.Tensor,
                    cfg: OptConfig) -> tuple[dict, np.ndarray]:
    """The reference of `cfg` and the trained model's logits on the first BATCH samples.

    An fp16 config runs the standard GradScaler loop: scaler.scale(loss).backward(),
    scaler.unscale_(opt), the grad norm (of the unscaled gradients), scaler.step(opt) (which skips
    opt.step() when a gradient is inf/NaN), scaler.update(); it records the scale each step used
    ("loss_scales"), whether the step was skipped ("skipped") and None as the grad norm of a
    skipped step."""
    model = copy.deepcopy(model).eval()  # eval(): frozen BatchNorm statistics, no dropout anywhere
    params = [p for p in model.parameters() if p.requires_grad]
    opt = cfg.make(params)
    sched = cfg.make_scheduler(opt)
    scaler = cfg.make_scaler()
    losses, norms, lrs, scales, skipped = [], [], [], [], []
    for k in range(cfg.steps):
        lrs.append(opt.param_groups[0]["lr"])  # the rate this step uses
        if sched is not None and not math.isclose(lrs[-1], cfg.lr_at(k), rel_tol=1e-12):
            raise SystemExit(f"{cfg.name}: LambdaLR gave step {k} lr {lrs[-1]!r}, expected {cfg.lr_at(k)!r}")
        idx = batch_indices(k)
        opt.zero_grad(set_to_none=True)
        with cfg.autocast():
            logits = model(*(t[idx] for t in data.values()))
        loss = loss_fn(logits.float(), labels[idx])  # fp32 loss (.float() is a no-op for fp32 logits)
        if scaler is None:
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(params, float("inf"))  # the norm only (coef clamps to 1)
            if cfg.clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, cfg.clip_grad_norm)
            opt.step()
            skip = False
        else:
            before = [p.detach().clone() for p in params]
            steps_before = _optimizer_steps(opt)
            scaled = scaler.scale(loss)  # loss * scale (fp32)
            scale = scaler.get_scale()  # the scale this step uses: the float32 value (init_scale rounded)
            scaled.backward()
            scaler.unscale_(opt)  # grads *= 1/scale, records whether any is inf/NaN
            found_inf = sum(v.item() for v in scaler._found_inf_per_device(opt).values()) > 0
            norm = torch.nn.utils.clip_grad_norm_(params, float("inf"))  # of the unscaled gradients
            if cfg.clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, cfg.clip_grad_norm)
            scaler.step(opt)  # opt.step() unless found_inf
            scaler.update()  # found_inf: scale * 0.5; growth_interval good steps in a row: scale * 2
            skip = scaler.get_scale() < scale
            # consistency: skipped <=> some gradient was inf/NaN <=> the norm is not finite; a skipped
            # step leaves the parameters and the optimizer's step count as they were
            unchanged = all(torch.equal(a, p.detach()) for a, p in zip(before, params))
            if not (skip == found_inf == (not torch.isfinite(norm).item())):
                raise SystemExit(f"{cfg.name}: step {k + 1}: skipped {skip}, found_inf {found_inf}, norm {norm}")
            if skip and not (unchanged and _optimizer_steps(opt) == steps_before):
                raise SystemExit(f"{cfg.name}: step {k + 1}: a skipped step changed the model or optimizer")
            scales.append(scale)
            skipped.append(skip)
        if sched is not None:
            sched.step()
        if not (torch.isfinite(loss) and (skip or torch.isfinite(norm))):
            raise SystemExit(f"{cfg.name}: non-finite loss or grad norm at step {k + 1}")
        losses.append(loss.item())
        norms.append(None if skip else norm.item())
    ref = OrderedDict(config=cfg.describe(opt, scaler), losses=losses, grad_norms=norms)
    if sched is not None:
        ref["lrs"] = lrs
    if scaler is not None:
        ref["loss_scales"] = scales
        ref["skipped"] = skipped
    with torch.no_grad(), cfg.autocast():
        logits = model(*(t[first_indices()] for t in data.values()))
    return ref, logits.float().numpy()


def _optimizer_steps(opt: torch.optim.Optimizer) -> list:
    """The per-parameter step counts of an Adam/AdamW (what its bias correction uses) or, for SGD,
    whether each parameter has a momentum buffer yet (its first step initialises it)."""
    out = []
    for st in opt.state.values():
        out.append(float(st["step"]) if "step" in st else st.get("momentum_buffer") is not None)
    return out


# --------------------------------------------------------------------------- #
# Export, check, write
# --------------------------------------------------------------------------- #


def make_one(fx: TrainFixture, out_dir: Path) -> dict:
    path = out_dir / f"{fx.name}.onnx"
    model = fx.build().eval()
    data = fx.inputs()
    labels = fx.labels()
    for k, v in data.items():
        assert v.shape[0] == SAMPLES, (fx.name, k, v.shape)
    assert labels.shape[0] == SAMPLES and labels.dtype == torch.int64

    first = OrderedDict((k, v[batch_indices(0)]) for k, v in data.items())
    dynamic_axes = {n: {0: "batch"} for n in list(data) + [MF.OUTPUT]}
    proto, size = MF.export_onnx(model, first, path, OPSET, dynamic_axes, fx.constant_folding)
    check_notes = fx.check(proto) if fx.check is not None else []
    for vi in list(proto.graph.input) + list(proto.graph.output):
        d0 = vi.type.tensor_type.shape.dim[0]
        if d0.dim_param != "batch":
            raise SystemExit(f"{path}: {vi.name} has leading dim {d0}, expected the symbolic dim `batch`")

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref, got = MF.run_both(model, sess, first)
    err, ok = MF.ort_matches(got, ref)
    alt = OrderedDict((k, v[:ALT_BATCH]) for k, v in data.items())
    aref, agot = MF.run_both(model, sess, alt)
    alt_err, alt_ok = MF.ort_matches(agot, aref)
    print(f"{fx.name:8s} {size:8d} B  onnxruntime vs torch: max rel err {err:.3e} (batch {BATCH}), "
          f"{alt_err:.3e} (batch {ALT_BATCH})")
    if not (ok and alt_ok):
        raise SystemExit(f"FAIL: {fx.name}: onnxruntime differs from PyTorch ({err:.3e}, {alt_err:.3e})")

    data_dir = out_dir / fx.name
    data_dir.mkdir(parents=True, exist_ok=True)
    first_dir = data_dir / FIRST_DIR
    first_dir.mkdir(exist_ok=True)
    for old in list(data_dir.glob("*.npy")) + list(data_dir.glob("ref_*.json")) + list(first_dir.glob("*.npy")):
        old.unlink()
    for k, v in data.items():
        np.save(data_dir / f"{k}.npy", v.numpy())
        np.save(first_dir / f"{k}.npy", v[first_indices()].numpy())
    np.save(data_dir / f"{LABELS}.npy", labels.numpy())

    refs = OrderedDict()
    for cfg in CONFIGS:
        if not cfg.applies_to(fx.name):
            continue
        r, logits = train_reference(model, data, labels, cfg)
        refs[cfg.name] = r
        (data_dir / f"ref_{cfg.name}.json").write_text(json.dumps(r, indent=2) + "\n")
        assert logits.dtype == np.float32 and logits.shape[0] == BATCH, (fx.name, cfg.name, logits.shape)
        np.save(data_dir / f"logits_after_{cfg.name}.npy", logits)
        print(f"  {cfg.name:13s} losses " + " ".join(f"{x:.6f}" for x in r["losses"])
              + "  grad norms " + " ".join("-" if x is None else f"{x:.4f}" for x in r["grad_norms"])
              + ("  lrs " + " ".join(f"{x:.3g}" for x in r["lrs"]) if "lrs" in r else "")
              + ("  loss scales " + " ".join(f"{x:g}" + ("(skipped)" if sk else "")
                                             for x, sk in zip(r["loss_scales"], r["skipped"]))
                 if "loss_scales" in r else ""))

    return dict(
        fixture=fx, size=size, err=err, alt_err=alt_err, refs=refs,
        data_bytes=sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file()),
        inputs=[(vi.name, *MF.value_info_str(vi)) for vi in proto.graph.input],
        outputs=[(vi.name, *MF.value_info_str(vi)) for vi in proto.graph.output],
        samples={k: (str(v.dtype).replace("torch.", ""), list(v.shape)) for k, v in data.items()},
        labels=(list(labels.shape), int((labels == IGNORE_INDEX).sum())),
        n_nodes=len(proto.graph.node), n_init=len(proto.graph.initializer),
        ops=sorted({n.op_type for n in proto.graph.node}),
        check_notes=check_notes,
    )


def fp32_counterpart(c: OptConfig) -> OptConfig:
    """The fp32 config with the optimizer and lr of mixed-precision config `c` (sgd, adamw)."""
    return next(f for f in CONFIGS if f.precision == "fp32" and f.optimizer == c.optimizer and f.lr == c.lr
                and not f.scheduled and not f.momentum and f.weight_decay is None)


def readme_section(results: list[dict]) -> list[str]:
    L = [MF.TRAINING_MARKER, ""]
    L.append("## Training fixtures (`train/`)")
    L.append("")
    L.append("Generated by `python/make_training_refs.py` (same model builders as above, from")
    L.append("`python/smp_models.py`); regenerate with `python3 python/make_training_refs.py`, which rewrites")
    L.append("`train/` and this section (`make_fixtures.py` keeps the section when it rewrites the rest).")
    L.append(f"Generated with torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__}.")
    L.append("")
    L.append(f"For each model `<name>`: `train/<name>.onnx` (opset {OPSET}, TorchScript-based exporter, eval mode,")
    L.append("`torch.manual_seed(0)` weights as in the forward fixtures, leading dim of every input and of `logits`")
    L.append(f"the symbolic dim `batch`, `seq` static {SEQ}); `train/<name>/<input>.npy`, {SAMPLES} samples of each graph")
    L.append(f"input (seeded); `train/<name>/{LABELS}.npy`, int64 class ids (per sample for mlp/cnn_bn, per token")
    L.append(f"for the others, where about 10% are {IGNORE_INDEX}, the ignored label); and `train/<name>/ref_<config>.json`:")
    L.append("`{\"config\": {...}, \"losses\": [...], \"grad_norms\": [...]}`, PyTorch's run of that configuration")
    L.append("(a configuration with a learning-rate schedule also has `\"lrs\": [...]`, the rate of each step, and")
    L.append("`lr_schedule`/`warmup_steps` in its config; an `fp16_*` configuration also has `\"loss_scales\"` and")
    L.append("`\"skipped\"`, see below); `train/<name>/logits_after_<config>.npy`, float32, the")
    L.append(f"logits of the model trained by that reference on the first {BATCH} samples (a forward pass in eval mode")
    L.append(f"after the {STEPS} steps); and `train/<name>/{FIRST_DIR}/<input>.npy`, the first {BATCH} samples of every graph")
    L.append(f"input (no labels), the `--data` of a forward run of a batch-{BATCH} artifact.")
    L.append("")
    own_steps = ", ".join(f"`{c.name}` {c.steps}" for c in CONFIGS if c.steps != STEPS)
    L.append(f"Each reference trains a deep copy of the PyTorch model for {STEPS} steps ({own_steps}) of batch {BATCH}; step k")
    L.append(f"(0-based) uses samples `(k*{BATCH} + i) % {SAMPLES}`, as `smprun --steps` does. The loss is")
    L.append("`F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))` (mean over the non-ignored labels) of")
    L.append("the batch before the step; the grad norm is the value `clip_grad_norm_(params, inf)` returns, i.e.")
    L.append("the global L2 norm of the gradients before clipping. float32, one thread,")
    L.append("`torch.use_deterministic_algorithms(True)` (the `bf16_*` and `fp16_*` configs: see below).")
    L.append("")
    bf16 = [c for c in CONFIGS if c.bf16]
    L.append("The `bf16_*` configs (`smpc --precision bf16`) are mixed precision, PyTorch's standard recipe: the")
    L.append("forward runs under `torch.autocast(\"cpu\", dtype=torch.bfloat16)` with fp32 parameters (master weights)")
    L.append("and fp32 optimizer state; the loss is `cross_entropy(logits.float(), ...)` in fp32 and `backward()` runs")
    L.append("outside the autocast region; `logits_after_bf16_*.npy` come from the same autocast forward, cast to")
    L.append("float32. CPU autocast runs only matmul/linear/bmm/conv in bf16 (weights cast at use); every other op")
    L.append("runs in the dtype of its inputs, so whatever is fed by an fp32 parameter, buffer or embedding outside")
    L.append("a matmul is promoted back to fp32: with these models the embeddings, the residual stream, LayerNorm")
    L.append("and RMSNorm, RoPE and the bert/llama softmax (its scores get the fp32 additive mask) run in fp32,")
    L.append("while the gpt softmax (its causal mask is a `masked_fill`, which keeps bf16), GELU/SiLU, the cnn_bn")
    L.append("BatchNorm/ReLU/pools and the whole mlp are bf16.")
    L.append("smp's bf16 computes every f32 value of the forward in bf16 (sums accumulated in higher precision),")
    L.append("which is why these references are compared loosely (see `test/smprun/train-bf16.test`). These tiny")
    L.append("models start near the uniform prediction, so bf16 barely moves their losses: the largest relative")
    diffs = []
    for r in results:
        for c in bf16:
            fp = fp32_counterpart(c)
            a, b = r["refs"][fp.name]["losses"], r["refs"][c.name]["losses"]
            diffs.append((max(abs(x - y) / abs(y) for x, y in zip(a, b)), r["fixture"].name, c.name, fp.name))
    worst = max(diffs)
    L.append(f"difference between a `bf16_*` reference's losses and its fp32 counterpart's (`sgd`, `adamw`) is")
    L.append(f"{worst[0]:.2g} ({worst[1]} `{worst[2]}`), far below the 2e-2 tolerance: the loss comparison alone")
    L.append("would not tell a bf16 run from an fp32 one, hence the test's check of the compiled IR.")
    L.append("")
    fp16 = [c for c in CONFIGS if c.fp16]
    default16 = [c for c in fp16 if c.loss_scale is None]
    n_skip = sum(sum(r["refs"][c.name]["skipped"]) for r in results for c in default16 if c.name in r["refs"])
    scales = sorted({x for r in results for c in default16 if c.name in r["refs"] for x in r["refs"][c.name]["loss_scales"]})
    diffs = []
    for r in results:
        for c in default16:
            if c.name in r["refs"]:
                a, b = r["refs"][fp32_counterpart(c).name]["losses"], r["refs"][c.name]["losses"]
                diffs.append((max(abs(x - y) / abs(y) for x, y in zip(a, b)), r["fixture"].name, c.name))
    worst = max(diffs)
    L.append("The `fp16_*` configs (`smpc --precision fp16 [--loss-scale X]`) are the same recipe in float16,")
    L.append("`torch.autocast(\"cpu\", dtype=torch.float16)` (this torch's CPU autocast supports float16, so no manual")
    L.append("casting is needed; every module of these models outputs the same dtypes as under bf16 autocast), plus")
    L.append("dynamic loss scaling with `torch.amp.GradScaler(\"cpu\")` and its defaults (init_scale 65536, or")
    L.append("`--loss-scale X`; growth_factor 2, backoff_factor 0.5, growth_interval 2000):")
    L.append("`scaler.scale(loss).backward()`, `scaler.unscale_(opt)`,")
    L.append("the grad norm of the unscaled gradients, `scaler.step(opt)`, `scaler.update()`. Their references also")
    L.append("hold `\"loss_scales\"`, the scale each step used (the float32 value GradScaler keeps), and `\"skipped\"`,")
    L.append("true where a gradient was inf/NaN: `opt.step()` did not run (parameters, optimizer state and the")
    L.append("optimizer's step count unchanged, which the script checks) and the scale halved; the grad norm of a")
    L.append(f"skipped step is `null`. At the default scale no model overflows: {n_skip} skipped steps, loss scale")
    L.append(f"{' / '.join(f'{x:g}' for x in scales)} on every step (the first growth would come after 2000 good steps).")
    L.append("`fp16_overflow` (mlp only, " + ", ".join(f"{c.steps} steps, AdamW lr {c.lr:g}, init_scale {c.loss_scale:g}"
                                                    for c in fp16 if c.loss_scale is not None) + ")")
    ov = [(r["fixture"].name, c, r["refs"][c.name]) for r in results for c in fp16
          if c.loss_scale is not None and c.name in r["refs"]]
    for name, c, ref in ov:
        L.append(f"overflows float16 on every step: {sum(ref['skipped'])} of {c.steps} steps skipped, the scale halving each")
        L.append(f"time ({' -> '.join(f'{x:.4g}' for x in ref['loss_scales'])}); the model never changes, so the losses")
        L.append("alternate between the untrained model's losses on the two batches.")
    L.append("As with bf16, fp16 barely moves the losses (largest relative difference from the fp32 counterpart:")
    L.append(f"{worst[0]:.2g}, {worst[1]} `{worst[2]}`), hence `test/smprun/train-fp16.test`'s IR checks.")
    L.append("")
    L.append("A learning-rate schedule (`--lr-schedule cosine --warmup-steps K`) gives 0-based step k of the")
    L.append(f"{STEPS}-step run the rate `lr*(k+1)/K` for k < K, then `lr*0.5*(1+cos(pi*(k-K)/max(1, {STEPS}-K)))`; the")
    L.append("reference runs it as `LambdaLR(opt, lambda k: f(k)/lr)` with `scheduler.step()` after every")
    L.append("`optimizer.step()`.")
    L.append("")
    L.append("The models train in **eval() mode**: `cnn_bn`'s BatchNorm uses and keeps its running statistics")
    L.append("(frozen), because smp's `batch_norm` is the inference-mode op (its scale and bias get gradients,")
    L.append("the mean and variance initializers get none and are not updated). No model has dropout.")
    L.append("")
    L.append("| config | PyTorch | smpc flags |")
    L.append("| --- | --- | --- |")
    torch_args = {
        "sgd": "`SGD(lr=0.1)`",
        "sgd_momentum": "`SGD(lr=0.05, momentum=0.9, weight_decay=1e-4, nesterov=False)` + `clip_grad_norm_(params, 1.0)`",
        "adamw": "`AdamW(lr=1e-3)` (weight_decay 0.01, betas (0.9, 0.999), eps 1e-8)",
        "adam": "`Adam(lr=1e-3, weight_decay=1e-4)`",
        "adamw_cosine": "`AdamW(lr=1e-3)` + `LambdaLR`: warmup 2 steps, then cosine to 0 over the 5 "
                        "(rates " + ", ".join(f"{c.lr_at(k):.3g}" for c in CONFIGS if c.name == "adamw_cosine"
                                              for k in range(STEPS)) + ")",
        "bf16_sgd": "`SGD(lr=0.1)`, forward under `autocast(\"cpu\", bfloat16)`",
        "bf16_adamw": "`AdamW(lr=1e-3)`, forward under `autocast(\"cpu\", bfloat16)`",
        "fp16_sgd": "`SGD(lr=0.1)`, forward under `autocast(\"cpu\", float16)`, `GradScaler(\"cpu\")`",
        "fp16_adamw": "`AdamW(lr=1e-3)`, forward under `autocast(\"cpu\", float16)`, `GradScaler(\"cpu\")`",
        "fp16_overflow": "mlp only, 6 steps: `AdamW(lr=0.1)`, forward under `autocast(\"cpu\", float16)`, "
                         "`GradScaler(\"cpu\", init_scale=1e30)`",
    }
    for cfg in CONFIGS:
        L.append(f"| `{cfg.name}` | {torch_args[cfg.name]} | `{cfg.smpc_flags()}` |")
    L.append("")
    L.append(f"All are compiled with `--train --loss {LOSS} --batch-size {BATCH}`; `test/smprun/train.test` runs")
    L.append("every model x fp32 config and compares with `test/train/compare_losses.py` (rtol 1e-4, loss and grad")
    L.append("norm; each step's lr to 1e-6 relative, against `lrs` where the reference has it, else the config's")
    L.append("`lr`). `test/smprun/train-bf16.test` runs every model x `bf16_*` config (`--precision bf16`) and")
    L.append("compares the losses to 2e-2 relative (`--rtol 2e-2`) and the grad norms only loosely, to 1e-1")
    L.append("(`--grad-rtol 1e-1`); it also checks that each artifact's `model.mlir` really computes in bf16.")
    L.append("`test/smprun/train-fp16.test` does the same for every model x `fp16_sgd`/`fp16_adamw` (`--precision fp16`;")
    L.append("loss 2e-2, grad norm 1e-1, an f16 matmul and the loss-scale state in `model.mlir`) and runs mlp")
    L.append("`fp16_overflow` (`--loss-scale 1e30 --steps 6`); compare_losses.py checks every step's `loss_scale`")
    L.append("(1e-6 relative) and `skipped` (exactly) against the reference's and skips the grad norm of skipped steps.")
    L.append("`test/smprun/save-onnx.test` trains mlp/gpt/llama/bert with `sgd` and `adamw`, writes the trained model")
    L.append(f"with `smprun --save-onnx`, compiles that ONNX forward at batch {BATCH}, runs it on `{FIRST_DIR}/` and compares")
    L.append("the logits with `logits_after_<config>.npy` (`smp-npy-diff --rtol 1e-4 --atol 1e-5`).")
    L.append("")
    L.append("| model | bytes | nodes | initializers | inputs | samples | labels (ignored) | ORT rel err (batch 8 / 3) |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        fx = r["fixture"]
        ins = "<br>".join(f"`{n}` {dt} {s}" for n, dt, s in r["inputs"])
        smp = "<br>".join(f"`{k}` {dt} {s}" for k, (dt, s) in r["samples"].items())
        L.append(f"| `{fx.name}.onnx` | {r['size']} | {r['n_nodes']} | {r['n_init']} | {ins} | {smp} | "
                 f"{r['labels'][0]} ({r['labels'][1]}) | {r['err']:.2e} / {r['alt_err']:.2e} |")
    L.append("")
    L.append("Reference losses (first -> last step; `-`: no such reference):")
    L.append("")
    L.append("| model | " + " | ".join(f"`{c.name}`" for c in CONFIGS) + " |")
    L.append("| --- |" + " --- |" * len(CONFIGS))
    for r in results:
        cells = [f"{r['refs'][c.name]['losses'][0]:.4f} -> {r['refs'][c.name]['losses'][-1]:.4f}"
                 if c.name in r["refs"] else "-" for c in CONFIGS]
        L.append(f"| `{r['fixture'].name}` | " + " | ".join(cells) + " |")
    L.append("")
    for r in results:
        fx = r["fixture"]
        L.append(f"- `{fx.name}`: {fx.description}. Ops: " + ", ".join(f"`{o}`" for o in r["ops"]) + ".")
        for n in r["check_notes"]:
            L.append("  " + n.lstrip())
    L.append("")
    return L


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    ap.add_argument("--only", nargs="*", help="only these models (README.md is then not rewritten)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    out_dir = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}  onnx {onnx.__version__}  onnxruntime {ort.__version__}  -> {out_dir}")

    results = [make_one(fx, out_dir) for fx in TRAIN_FIXTURES if not args.only or fx.name in args.only]
    if args.only:
        print(f"wrote {len(results)} models (README.md not rewritten because of --only)")
        return
    readme = out_dir.parent / "README.md"
    MF.replace_training_section(readme, readme_section(results))
    print(f"wrote {len(results)} models and the training section of {readme}")


if __name__ == "__main__":
    main()
