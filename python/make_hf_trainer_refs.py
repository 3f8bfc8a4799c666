#!/usr/bin/env python3
"""Hugging Face Trainer references for smpc --training-args: transformers'
Trainer itself trains the `gpt` training fixture with each TrainingArguments
of CONFIGS below, and smp must train the same numbers from the same
arguments (test/smprun/hf-trainer.test).

For each NAME this writes test/fixtures/hf-trainer/NAME.json, the
arguments as a Trainer user saves them (`TrainingArguments(...)
.to_json_string()`, every key of this transformers version, output_dir
"out"), and ref_NAME.json: {"config": {...}, "losses": [...],
"grad_norms": [...], "lrs": [...]} (python/make_training_refs.py's
format, read by test/train/compare_losses.py) from STEPS steps of
Trainer.train() on the CPU; with eval_strategy "steps", also "evals":
{"step", "eval_loss" (Trainer.evaluate's), "batch_losses"} of every
evaluation, read by test/train/compare_evals.py.

The model is python/smp_models.py's GPT (build_gpt(), the weights of
test/fixtures/train/gpt.onnx: checked) with a forward that takes `labels`
and `num_items_in_batch` as Hugging Face's language models do: the loss is
the sum of the token cross-entropies over the Trainer's count of counted
labels in the step's batch (ignored labels, -100, fall unevenly in this
data), so that gradient accumulation trains the global batch's mean. The
data is test/fixtures/train/gpt/{idx,labels}.npy in order (a
SequentialSampler in place of the Trainer's shuffle: step k trains on
samples (k*B + i) % 16, as smprun reads them). Per step this records the
learning rate the optimizer ran with, the loss (the sum of the Trainer's
micro-batch losses; checked against the global batch's mean computed
apart) and the norm the Trainer's clip_grad_norm_ returned, before
clipping. The Trainer builds its own AdamW/SGD with its parameter groups
(get_decay_parameter_names, stored as "no_decay") and its scheduler.

The GPU_ONLY configs (fp16 and bf16 autocast) get their arguments' files
only; `--device cuda --out DIR NAME...` trains them on a GPU
(scripts/device-kit.sh's Trainer stage). It also writes sft_config.json,
TRL's SFTConfig as saved (when trl is
installed). Needs transformers (5.x), accelerate and torch; CI does not run
it.
Regenerate with:  python3 python/make_hf_trainer_refs.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test" / "fixtures" / "hf-trainer"
DATA = ROOT / "test" / "fixtures" / "train" / "gpt"
STEPS = 10
SAMPLES = 16

sys.path.insert(0, str(ROOT / "python"))
import smp_models as M  # noqa: E402

# What each fixture's user set; everything else is TrainingArguments'
# default. Every one trains 10 steps of a global batch of 8.
CONFIGS = {
    # The Trainer's defaults but the rate: AdamW with decay over its groups,
    # the linear schedule with a 3-step warmup, clipping at 1.0.
    "linear_decay": dict(learning_rate=3e-3, weight_decay=0.1,
                         warmup_steps=3),
    # A cosine after a warmup given as a fraction of max_steps, Adam's
    # betas and eps, clipping at 0.5, 2 accumulation steps of 4.
    "cosine_accum": dict(learning_rate=5e-3, lr_scheduler_type="cosine",
                         warmup_steps=0.2, per_device_train_batch_size=4,
                         gradient_accumulation_steps=2, adam_beta2=0.95,
                         adam_epsilon=1e-6, max_grad_norm=0.5,
                         weight_decay=0.01),
    # SGD (no weight decay: one group) and a cosine to a floor, unclipped.
    "sgd_min_lr": dict(optim="sgd", learning_rate=0.2,
                       lr_scheduler_type="cosine_with_min_lr",
                       lr_scheduler_kwargs={"min_lr_rate": 0.1},
                       warmup_steps=2, max_grad_norm=0.0),
    # A constant rate after a warmup.
    "constant_warmup": dict(learning_rate=2e-3,
                            lr_scheduler_type="constant_with_warmup",
                            warmup_steps=4, weight_decay=0.01),
    # The Trainer under DDP: 2 processes (gloo) of 4 samples each (rank r
    # the r-th half of each global batch of 8), the loss over the counted
    # labels of both (average_tokens_across_devices).
    "ddp_linear": dict(learning_rate=3e-3, weight_decay=0.1, warmup_steps=2,
                       per_device_train_batch_size=4, ranks=2),
    # linear_decay evaluated every 5 steps (Trainer.evaluate on the 16
    # samples, batches of 8): "evals" holds its eval_loss after steps 5 and
    # 10 (smprun --eval-data evaluates after the last step too).
    "linear_eval": dict(learning_rate=3e-3, weight_decay=0.1, warmup_steps=3,
                        eval_strategy="steps", eval_steps=5,
                        per_device_eval_batch_size=8),
    # The same evaluated on the first 12 samples only (written to eval12/):
    # a whole batch of 8 and a short one of 4, whose mean loss the
    # Trainer's eval_loss weights by its 4 samples.
    "linear_eval_short": dict(learning_rate=3e-3, weight_decay=0.1,
                              warmup_steps=3, eval_strategy="steps",
                              eval_steps=5, per_device_eval_batch_size=8,
                              eval_samples=12),
    # Evaluated before the first step (eval_on_start) and every 3 steps
    # from step 5 on (eval_delay): after steps 0, 6 and 9, and after the
    # last (10), as transformers 5 evaluates at the end.
    "linear_eval_start": dict(learning_rate=3e-3, weight_decay=0.1,
                              warmup_steps=3, eval_strategy="steps",
                              eval_steps=3, eval_delay=5, eval_on_start=True,
                              per_device_eval_batch_size=8),
    # Evaluation batches other than the training's 8: of 12 (a batch of 12
    # and a short one of 4) and of 4; each batch's loss the mean over its
    # own counted labels.
    "eval_batch12": dict(learning_rate=3e-3, weight_decay=0.1, warmup_steps=3,
                         eval_strategy="steps", eval_steps=5,
                         per_device_eval_batch_size=12),
    "eval_batch4": dict(learning_rate=3e-3, weight_decay=0.1, warmup_steps=3,
                        eval_strategy="steps", eval_steps=5,
                        per_device_eval_batch_size=4),
    # Evaluated every epoch (2 steps of 8 over the 16 samples) from epoch 2
    # on (eval_delay in epochs): after steps 4, 6, 8 and 10.
    "eval_epoch_delay": dict(learning_rate=3e-3, weight_decay=0.1,
                             warmup_steps=3, eval_strategy="epoch",
                             eval_delay=2, per_device_eval_batch_size=8),
    # ddp_linear evaluated every 5 steps: each of the 2 processes evaluates
    # batches of 4 (per_device_eval_batch_size); the eval_loss is the mean
    # of the global batches' losses (8 samples, the mean over both
    # processes' counted labels), as on one device with batches of 8.
    "ddp_eval": dict(learning_rate=3e-3, weight_decay=0.1, warmup_steps=2,
                     per_device_train_batch_size=4, ranks=2,
                     eval_strategy="steps", eval_steps=5,
                     per_device_eval_batch_size=4),
    # linear_decay in mixed precision (fp16: autocast and GradScaler; bf16:
    # autocast), only on a GPU (GPU_ONLY).
    "precision_fp16": dict(learning_rate=3e-3, weight_decay=0.1,
                           warmup_steps=3, fp16=True),
    "precision_bf16": dict(learning_rate=3e-3, weight_decay=0.1,
                           warmup_steps=3, bf16=True),
}
# On the CPU, accelerate runs fp16=True without fp16 autocast (its losses
# and gradient norms are fp32's within 1.2e-7), so these are the GPU's:
# here only their arguments' files are written; scripts/device-kit.sh's
# Trainer stage trains them on the GPU (--device cuda --out DIR) against
# smprun --device cuda on the artifacts compiled from those files.
GPU_ONLY = {"precision_fp16", "precision_bf16"}
DEVICE = "cpu"


class GPTForTrainer(M.GPT):
    """GPT with a Hugging Face language model's loss interface."""

    def forward(self, idx, labels=None, num_items_in_batch=None, **kwargs):
        logits = super().forward(idx)
        total = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                labels.reshape(-1), reduction="sum")
        count = (num_items_in_batch if num_items_in_batch is not None
                 else (labels != -100).sum())
        return {"loss": total / count, "logits": logits}


def build_model() -> torch.nn.Module:
    torch.manual_seed(0)
    model = GPTForTrainer(M.GPTConfig())
    M.perturb_norms(model)
    ref = M.build_gpt()
    for (name, p), (_, q) in zip(model.state_dict().items(),
                                 ref.state_dict().items()):
        assert torch.equal(p, q), name
    check_initial_weights(model)
    return model


def check_initial_weights(model: torch.nn.Module) -> None:
    import onnx
    from onnx import numpy_helper
    proto = onnx.load(str(ROOT / "test" / "fixtures" / "train" / "gpt.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    for name, p in model.named_parameters():
        got = inits.get(name)
        if got is None or not np.array_equal(got, p.detach().numpy()):
            raise SystemExit(f"gpt.onnx's {name} is not smp_models.build_gpt()'s")


def write_arguments(name: str, settings: dict, world: int, rank: int):
    """The TrainingArguments of `settings` on DEVICE, written to NAME.json
    as a Trainer user saves them (output_dir "out"; a GPU_ONLY one's
    use_cpu false, as on the GPU it is for)."""
    from transformers import TrainingArguments
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=tmp, max_steps=STEPS, report_to=[], logging_steps=1,
            save_strategy="no", use_cpu=DEVICE == "cpu", disable_tqdm=True,
            ddp_backend="gloo" if world > 1 else None,
            per_device_train_batch_size=settings.pop(
                "per_device_train_batch_size", 8),
            **settings)
        text = json.loads(args.to_json_string())
    text["output_dir"] = "out"
    if name in GPU_ONLY:
        text["use_cpu"] = False
    if rank == 0:
        (OUT / f"{name}.json").write_text(json.dumps(text, indent=2) + "\n")
    return args


def train(name: str, settings: dict) -> dict:
    from torch.utils.data import SequentialSampler
    from transformers import Trainer, TrainerCallback

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    # The Trainer's loss against the global batch's fp32 mean: within
    # rounding in fp32, within 16-bit rounding under autocast.
    rtol = 1e-2 if name in GPU_ONLY else 1e-5

    idx = torch.from_numpy(np.load(DATA / "idx.npy"))
    labels = torch.from_numpy(np.load(DATA / "labels.npy"))
    dataset = [{"idx": idx[i], "labels": labels[i]} for i in range(SAMPLES)]
    eval_samples = settings.pop("eval_samples", SAMPLES)
    if eval_samples != SAMPLES and rank == 0:
        held = OUT / f"eval{eval_samples}"
        held.mkdir(exist_ok=True)
        np.save(held / "idx.npy", idx[:eval_samples].numpy())
        np.save(held / "labels.npy", labels[:eval_samples].numpy())
    args = write_arguments(name, settings, world, rank)

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = build_model()
    record = {"lrs": [], "micro": [], "norms": [], "evals": []}

    class Sequential(Trainer):
        def _get_train_sampler(self, *a, **k):
            return SequentialSampler(self.train_dataset)

        def training_step(self, *a, **k):
            loss = super().training_step(*a, **k)
            record["micro"][-1].append(float(loss))
            return loss

    class Watch(TrainerCallback):
        def on_step_begin(self, args, state, control, optimizer=None, **kw):
            record["lrs"].append(optimizer.param_groups[0]["lr"])
            record["micro"].append([])

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "grad_norm" in logs:
                record["norms"].append(float(logs["grad_norm"]))

        def on_evaluate(self, args, state, control, metrics=None, model=None,
                        **kw):
            # The batches' mean losses computed apart: the Trainer's
            # eval_loss must be their mean weighted by their samples (a
            # short last batch counts its own). Under DDP a batch is the
            # processes' concurrent batches together, its loss the mean
            # over all their counted labels (average_tokens_across_devices).
            probe.load_state_dict(getattr(model, "module", model).state_dict())
            step = args.per_device_eval_batch_size * world
            with torch.no_grad():
                means, sizes = [], []
                for b in range(0, eval_samples, step):
                    rows = list(range(b, min(eval_samples, b + step)))
                    logits = M.GPT.forward(probe, idx[rows])
                    means.append(float(F.cross_entropy(
                        logits.reshape(-1, logits.shape[-1]),
                        labels[rows].reshape(-1))))
                    sizes.append(len(rows))
            got = float(metrics["eval_loss"])
            want = float(np.dot(means, sizes) / sum(sizes))
            if abs(got - want) > 1e-5 * abs(got):
                raise SystemExit(f"{name}: the Trainer's eval_loss {got} is "
                                 f"not its batches' weighted mean {want}")
            record["evals"].append({"step": state.global_step,
                                    "eval_loss": got, "batch_losses": means,
                                    "samples": sum(sizes)})

    batch = (args.per_device_train_batch_size *
             args.gradient_accumulation_steps * world)
    expected = []
    with torch.no_grad():
        probe = build_model()
    trainer = Sequential(model=model, args=args, train_dataset=dataset,
                         eval_dataset=dataset[:eval_samples]
                         if args.eval_strategy != "no" else None,
                         callbacks=[Watch()])
    # The global batch's mean loss of each step, computed apart from the
    # Trainer from the weights it starts the step with.
    original = trainer.training_step

    def checked_step(model_, inputs, *a, **k):
        if not record["micro"][-1]:
            k_step = len(record["micro"]) - 1
            rows = [(k_step * batch + i) % SAMPLES for i in range(batch)]
            probe.load_state_dict(getattr(model_, "module", model_).state_dict())
            with torch.no_grad():
                logits = M.GPT.forward(probe, idx[rows])
                expected.append(float(F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]),
                    labels[rows].reshape(-1))))
        return original(model_, inputs, *a, **k)

    trainer.training_step = checked_step
    trainer.train()
    losses = [sum(m) for m in record["micro"]]
    if world > 1:
        # Each rank's loss is its labels' share of the global mean times the
        # ranks (the Trainer scales it so that DDP's average sums them).
        import torch.distributed as dist
        total = torch.tensor(losses, dtype=torch.float64) / world
        dist.all_reduce(total)
        losses = total.tolist()
    for k, (got, want) in enumerate(zip(losses, expected)):
        if abs(got - want) > rtol * abs(want):
            raise SystemExit(f"{name}: step {k}: the Trainer's loss {got} is "
                             f"not the global batch's mean {want}")
    if len(record["norms"]) != STEPS or len(losses) != STEPS:
        raise SystemExit(f"{name}: {len(losses)} steps, "
                         f"{len(record['norms'])} grad norms logged")
    import transformers
    no_decay = sorted(n for n, _ in model.named_parameters()
                      if n not in trainer.get_decay_parameter_names(model))
    extra = {"evals": record["evals"]} if record["evals"] else {}
    return {**extra, "config": {"lr": max(record["lrs"]),
                       "transformers": transformers.__version__,
                       "torch": torch.__version__, "ranks": world,
                       "device": DEVICE,
                       "optimizer": type(getattr(trainer.optimizer, "optimizer",
                                              trainer.optimizer)).__name__,
                       "no_decay": no_decay,
                       "batch": args.per_device_eval_batch_size},
            "losses": losses, "grad_norms": record["norms"],
            "lrs": record["lrs"]}


def write_sft_config() -> None:
    """sft_config.json: TRL's SFTConfig as its users save it (its defaults:
    bf16, gradient checkpointing, lr 2e-5; use_cpu for this machine), for
    test/smpc/training-args.test (no reference run: TRL makes the tokens)."""
    try:
        from trl import SFTConfig
    except ImportError:
        print("trl not installed: sft_config.json left as it is")
        return
    with tempfile.TemporaryDirectory() as tmp:
        text = json.loads(SFTConfig(output_dir=tmp, report_to=[], use_cpu=True,
                                    max_steps=10).to_json_string())
    text["output_dir"] = "out"
    (OUT / "sft_config.json").write_text(json.dumps(text, indent=2) + "\n")


def main() -> None:
    """All configs; with names, those only (how a DDP config runs itself
    under torch.distributed.run). --device cuda trains on the GPU (the
    GPU_ONLY configs only there), --out DIR writes there."""
    import subprocess
    global DEVICE, OUT
    argv = sys.argv[1:]
    while argv and argv[0] in ("--device", "--out"):
        if argv[0] == "--device":
            DEVICE = argv[1]
        else:
            OUT = Path(argv[1])
        argv = argv[2:]
    only = argv
    child = "WORLD_SIZE" in os.environ
    OUT.mkdir(parents=True, exist_ok=True)
    if DEVICE != "cpu":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    elif not child:
        write_sft_config()
    for name, settings in CONFIGS.items():
        if only and name not in only:
            continue
        settings = dict(settings)
        if name in GPU_ONLY and DEVICE == "cpu":
            write_arguments(name, settings, 1, 0)
            print(f"{name}.json: the arguments only (trained on a GPU)")
            continue
        ranks = settings.pop("ranks", 1)
        if ranks > 1 and not child:
            subprocess.run([sys.executable, "-m", "torch.distributed.run",
                            "--standalone", f"--nproc_per_node={ranks}",
                            __file__, name], check=True)
            continue
        ref = train(name, settings)
        if int(os.environ.get("RANK", "0")) != 0:
            continue
        dest = OUT / f"ref_{name}.json"
        dest.write_text(json.dumps(ref, indent=2) + "\n")
        print(f"{os.path.relpath(dest, ROOT)}: losses {ref['losses'][0]:.6f} .. "
              f"{ref['losses'][-1]:.6f}, lrs {ref['lrs'][:4]}")


if __name__ == "__main__":
    main()
