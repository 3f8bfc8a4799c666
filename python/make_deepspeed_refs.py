#!/usr/bin/env python3
"""DeepSpeed references for smpc --deepspeed: DeepSpeed itself trains the
`mlp` training fixture with each config of test/fixtures/deepspeed/*.json,
and smp must train the same numbers from the same file
(test/smprun/deepspeed.test).

For each CONFIG.json this writes test/fixtures/deepspeed/ref_CONFIG.json:
{"config": {"lr": ...}, "losses": [...], "grad_norms": [...], "lrs": [...]}
(the format of python/make_training_refs.py, read by
test/train/compare_losses.py), from STEPS steps of deepspeed.initialize(...)
with the config as it is, on CPU (DS_ACCELERATOR=cpu, gloo), on as many
processes as the config's data-parallel degree (train_batch_size /
(train_micro_batch_size_per_gpu x gradient_accumulation_steps), else
RANKS's, else 1).

The model is python/smp_models.py's MLP built as make_training_refs.py
builds it (torch.manual_seed(0)), whose initial weights are those of
test/fixtures/train/mlp.onnx (checked); the data is
test/fixtures/train/mlp/{x,labels}.npy. Step k (0-based) trains on samples
(k*B + i) % 16, i < B (B = train_batch_size), as smprun reads them: data-
parallel rank r takes the r-th of dp equal slices and cuts it into
micro-batches of train_micro_batch_size_per_gpu in order. Each step records
the lr the optimizer ran with (read before engine.step()), the loss (the
mean of every micro-batch's loss over every rank, which is the batch's mean
cross-entropy here: equal micro-batches, no ignored labels) and DeepSpeed's
engine.get_global_grad_norm() (before clipping). A bf16 (fp16) config
feeds x.bfloat16() (x.half()) to the 16-bit model DeepSpeed makes; the loss
is computed in fp32 on the logits, as smp computes it. fp16 runs on the CPU
with the accelerator's is_fp16_supported() made true (torch computes fp16
there), and its references add "loss_scales" (the scale each step ran with)
and "skipped" (DeepSpeed skipped the step: an overflow), with a null grad
norm on a skipped step.

Needs deepspeed (pip install deepspeed; CPU is enough), torch and onnx;
CI does not run it. Regenerate with:  python3 python/make_deepspeed_refs.py
[CONFIG ...] (the stems of the configs to redo; all by default)
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test" / "fixtures" / "deepspeed"
DATA = ROOT / "test" / "fixtures" / "train" / "mlp"
STEPS = 12
SAMPLES = 16

sys.path.insert(0, str(ROOT / "python"))
import smp_models as M  # noqa: E402


# Configs that leave the data-parallel degree to the launcher (DeepSpeed
# derives gradient_accumulation_steps from it): the ranks they run on
# (deepspeed.test compiles them with the same --dp).
RANKS = {"zero1_adam": 2}


def dp_degree(name: str, cfg: dict) -> int:
    if name in RANKS:
        return RANKS[name]
    t = cfg.get("train_batch_size")
    m = cfg.get("train_micro_batch_size_per_gpu")
    g = cfg.get("gradient_accumulation_steps")
    return t // (m * g) if t and m and g else 1


def check_initial_weights(model: torch.nn.Module) -> None:
    import onnx
    from onnx import numpy_helper
    proto = onnx.load(str(ROOT / "test" / "fixtures" / "train" / "mlp.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    for name, p in model.state_dict().items():
        got = inits.get(name)
        if got is None or not np.array_equal(got, p.numpy()):
            raise SystemExit(f"mlp.onnx's {name} is not smp_models.build_mlp()'s")


def worker(rank: int, world: int, port: int, cfg_path: str, out: dict) -> None:
    os.environ.update(DS_ACCELERATOR="cpu", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    import deepspeed
    import torch.distributed as dist
    from deepspeed.accelerator import get_accelerator
    # DeepSpeed's CPU accelerator says it has no fp16; torch computes fp16 on
    # the CPU, and DeepSpeed's fp16 machinery (loss scaler, fp32 master
    # weights) runs as on a GPU.
    get_accelerator().is_fp16_supported = lambda: True
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    cfg = json.loads(Path(cfg_path).read_text())
    model = M.build_mlp()
    if rank == 0:
        check_initial_weights(model)
    deepspeed.init_distributed(dist_backend="gloo")
    engine, opt, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=cfg)
    x = torch.from_numpy(np.load(DATA / "x.npy"))
    labels = torch.from_numpy(np.load(DATA / "labels.npy"))
    batch = engine.train_batch_size()
    micro = engine.train_micro_batch_size_per_gpu()
    bf16 = cfg.get("bf16", {}).get("enabled", False)
    fp16 = cfg.get("fp16", {}).get("enabled", False)
    losses, norms, lrs, scales, skipped = [], [], [], [], []
    for k in range(STEPS):
        idx = [(k * batch + i) % SAMPLES for i in range(batch)]
        mine = idx[rank * batch // world:(rank + 1) * batch // world]
        lrs.append(opt.param_groups[0]["lr"])
        total = torch.zeros(())
        own = None
        for m in range(0, len(mine), micro):
            rows = mine[m:m + micro]
            xb = x[rows].bfloat16() if bf16 else x[rows].half() if fp16 else x[rows]
            loss = F.cross_entropy(engine(xb).float(), labels[rows])
            engine.backward(loss)
            if m + micro >= len(mine) and world == 1 and not cfg.get("zero_optimization"):
                # DeepSpeed keeps no norm of an fp32 run without ZeRO: the
                # accumulated gradients' (one rank: nothing to reduce).
                own = torch.sqrt(sum((p.grad.double() ** 2).sum()
                                     for p in engine.module.parameters()
                                     if p.grad is not None))
            if m + micro >= len(mine) and fp16:
                scales.append(float(opt.loss_scale))
                before = engine.skipped_steps
            engine.step()
            total += loss.detach()
        dist.all_reduce(total)
        losses.append(float(total) / (len(mine) // micro * world))
        norm = engine.get_global_grad_norm()
        if norm is None and own is not None:
            norm = own
        if fp16:
            skipped.append(engine.skipped_steps > before)
            if skipped[-1]:
                norm = None
        norms.append(None if norm is None else float(norm))
    if rank == 0:
        out.update(losses=losses, grad_norms=norms, lrs=lrs)
        if fp16:
            out.update(loss_scales=scales, skipped=skipped)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    import deepspeed
    only = sys.argv[1:]  # config names (stems) to regenerate; all by default
    configs = sorted(p for p in OUT.glob("*.json") if not p.name.startswith("ref_")
                     and (not only or p.stem in only))
    for path in configs:
        cfg = json.loads(path.read_text())
        world = dp_degree(path.stem, cfg)
        with mp.Manager() as manager:
            out = manager.dict()
            mp.spawn(worker, args=(world, free_port(), str(path), out),
                     nprocs=world, join=True)
            result = dict(out)
        if any(n is None and not s for n, s in
               zip(result["grad_norms"], result.get("skipped", [False] * STEPS))):
            raise SystemExit(f"{path.name}: DeepSpeed reported no grad norm")
        ref = {"config": {"lr": max(result["lrs"]), "deepspeed": deepspeed.__version__,
                          "torch": torch.__version__, "ranks": world},
               **result}
        dest = OUT / f"ref_{path.stem}.json"
        dest.write_text(json.dumps(ref, indent=1) + "\n")
        print(f"{dest.relative_to(ROOT)}: {world} rank(s), losses "
              f"{result['losses'][0]:.6f} .. {result['losses'][-1]:.6f}")


if __name__ == "__main__":
    main()
