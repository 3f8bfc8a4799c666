#!/usr/bin/env python3
"""Random parallel plans against one rank: the promise that any plan trains
to the one-device numbers, tried on plans nobody wrote a test for.

Each case draws a model (the training fixtures and the Hugging Face exports
under test/fixtures), a batch, an optimizer, sometimes bf16 or fp16, and a
plan (dp, tp, pp, schedule, micro-batches, ZeRO stage, hybrid sharding,
buckets, gather prefetch, sequence parallelism, recomputation, offloading,
placement; sometimes the planner's own, sometimes given as a --config file,
sometimes resumed from a checkpoint under a second plan), compiles it with
smpc, trains a few steps with smprun and checks every step's loss and
gradient norm within --rtol (--low-rtol in bf16/fp16; 2.5 times that after
the first step under Adam) of the same model and optimizer on one rank (compiled without any plan flag). A plan smpc refuses is fine when the
refusal is an `error:` line (counted, listed with --verbose); anything else
is a failure: a crash or a refusal without a message at compile or run
time, a run that fails, or numbers that differ. Failures print the two
command lines to reproduce them.

    plan-fuzz.py [--bin build/bin] [--cases 20] [--seed 1] [--only K]
                 [--work DIR] [--models gpt,llama,...] [--verbose] ...
                 (--help lists the shares of each kind of case)

Exit status: 0 when every case agreed (or was refused cleanly), 1 otherwise.
Standard library only (the comparison is test/train/same_losses.py's).
"""
import argparse
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "test", "fixtures")

# name: (model file, data dir, tensor-parallel degrees, tokens per sample,
# has attention, labels input)
MODELS = {
    "gpt": ("train/gpt.onnx", "train/gpt", (1, 2, 4), 16, True, "labels"),
    "llama": ("train/llama.onnx", "train/llama", (1, 2, 4), 16, True, "labels"),
    "bert": ("train/bert.onnx", "train/bert", (1, 2, 4), 16, True, "labels"),
    "tinylm": ("train/tinylm.onnxtxt", "train/tinylm", (1, 3), 5, False, "labels"),
    "mlp": ("train/mlp.onnx", "train/mlp", (1, 2), 1, False, "labels"),
    "cnn_bn": ("train/cnn_bn.onnx", "train/cnn_bn", (1,), 1, False, "labels"),
    "gpt2": ("real/gpt2_dyn.onnx", "real", (1, 2), 8, True, "labels"),
    "llama-hf": ("real/llama_dyn.onnx", "real", (1, 2), 8, True, "labels"),
    "mistral": ("real/mistral_dyn.onnx", "real", (1, 2), 8, True, "labels"),
    "opt": ("real/opt_dyn.onnx", "real", (1, 2), 8, True, "labels"),
    "bert-hf": ("real/bert_dyn.onnx", "real", (1, 2), 8, True, "labels"),
    "distilbert": ("real/distilbert_dyn.onnx", "real", (1, 2), 8, True, "labels"),
    "roberta": ("real/roberta_dyn.onnx", "real", (1, 2), 8, True, "labels"),
    "t5": ("real/t5_noopt.onnx", "real", (1, 2), 8, True, "labels"),
    "vit": ("real/vit_dyn.onnx", "real", (1, 2), 17, True, "class_labels"),
    # Exported with a fixed batch of 8 (torch.onnx.export's default): the
    # batch comes from the file, or --batch-size must agree with it.
    "gpt2-static": ("real/gpt2.onnx", "real", (1, 2), 8, True, "labels"),
    "llama-static": ("real/llama.onnx", "real", (1, 2), 8, True, "labels"),
    "bert-static": ("real/bert.onnx", "real", (1, 2), 8, True, "labels"),
    "vit-static": ("real/vit.onnx", "real", (1, 2), 17, True, "class_labels"),
}
STATIC_BATCH = 8


def draw_optimizer(rng):
    kind = rng.choice(["sgd", "sgd-momentum", "adam", "adamw"])
    flags = {"sgd": ["--optimizer", "sgd", "--lr", "0.1"],
             "sgd-momentum": ["--optimizer", "sgd", "--lr", "0.05",
                              "--momentum", "0.9"],
             "adam": ["--optimizer", "adam", "--lr", "1e-2"],
             "adamw": ["--optimizer", "adamw", "--lr", "1e-2"]}[kind]
    if kind == "sgd-momentum" and rng.random() < 0.3:
        flags += ["--nesterov"]
    if kind != "sgd" and rng.random() < 0.3:
        flags += ["--weight-decay", "0.1"]
    if rng.random() < 0.3:
        flags += ["--clip-grad-norm", "0.5"]
    if rng.random() < 0.2:
        flags += ["--lr-schedule", "cosine", "--warmup-steps", "1",
                  "--decay-steps", "4"]
    return flags


def draw_plan(rng, tps, tokens, attention, batch):
    """Plan flags and the rank count, or None when the draw cannot hold
    (the fuzzer draws again instead of testing smpc's refusals)."""
    tp = rng.choice(tps)
    pp = rng.choice([1, 1, 2, 2, 3, 4])
    dp = rng.choice([1, 2, 2, 3, 4])
    if dp * tp * pp > 8 or dp * tp * pp == 1 or batch % dp:
        return None
    local = batch // dp
    flags, n = [], dp * tp * pp
    if dp > 1:
        flags += ["--dp", str(dp)]
    if tp > 1:
        flags += ["--tp", str(tp)]
    micro = rng.choice([m for m in (1, 2, 4) if local % m == 0])
    if pp > 1:
        flags += ["--pp", str(pp)]
        micro = rng.choice([m for m in (pp, 2 * pp) if local % m == 0] or [0])
        if not micro and local % 2 == 0 and local >= 2:
            micro = local
        if not micro:
            return None
        schedule = rng.choice(["gpipe", "1f1b", "interleaved", "zb-h1"])
        flags += ["--schedule", schedule]
        if schedule == "interleaved":
            flags += ["--virtual-stages", "2"]
    if micro > 1:
        flags += ["--microbatches", str(micro)]
    if dp > 1:
        zero = rng.choice([0, 0, 1, 2, 3])
        if zero:
            flags += ["--zero-stage", str(zero)]
        if zero and dp == 4 and rng.random() < 0.4:
            flags += ["--sharded-dp", "2"]
        if rng.random() < 0.4:
            flags += ["--bucket-mb", rng.choice(["0", "0.01"])]
        if zero == 3 and rng.random() < 0.5:
            flags += ["--gather-prefetch", "1"]
    if tp > 1 and rng.random() < 0.4 and (local // micro) * tokens % tp == 0:
        flags += ["--sequence-parallel"]
    ckpt = rng.choice(["none", "none", "full", "selective"]) if attention \
        else rng.choice(["none", "full"])
    if ckpt != "none":
        flags += ["--checkpoint-activations", ckpt]
    if rng.random() < 0.2:
        flags += ["--offload-activations"]
        if rng.random() < 0.5:
            flags += ["--activation-loading-horizon", "2"]
    if n > 2 and rng.random() < 0.2:
        flags += ["--placement", rng.choice(["spread", "PDT", "TDP"])]
    return flags, n


# Plan flags a config file may give by SageMaker's name (docs/python.md).
SAGEMAKER = {"--pp": "pipeline_parallel_degree", "--tp": "tensor_parallel_degree",
             "--microbatches": "microbatches", "--placement": "placement_strategy",
             "--sharded-dp": "sharded_data_parallel_degree",
             "--offload-activations": "offload_activations",
             "--activation-loading-horizon": "activation_loading_horizon"}


def as_config(rng, flags):
    """The flags as a --config JSON object: each by its own name or, where
    SageMaker has one, sometimes by SageMaker's."""
    config, k = {}, 0
    while k < len(flags):
        flag = flags[k]
        switch = k + 1 == len(flags) or flags[k + 1].startswith("--")
        value = True if switch else flags[k + 1]
        if not switch and value.lstrip("-").replace(".", "").isdigit():
            value = float(value) if "." in value or "e" in value else int(value)
        key = SAGEMAKER[flag] if flag in SAGEMAKER and rng.random() < 0.5 \
            else rng.choice([flag[2:], flag[2:].replace("-", "_"), flag])
        config[key] = value
        k += 1 if switch else 2
    return config


def run(cmd, timeout):
    """(exit status or "timeout", output, seconds). The command runs in its
    own process group, killed whole on timeout (smprun -n's mpirun and
    ranks too)."""
    t = time.time()
    for attempt in range(10):
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            break
        except OSError:
            # The binary is being relinked (a build during a long run).
            if attempt == 9:
                raise
            time.sleep(3)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out, time.time() - t
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return "timeout", out, time.time() - t


def clean_refusal(rc, out):
    """smpc refused the plan the way users are promised: exit 1 and an
    `error:` line saying why."""
    return rc == 1 and "error:" in out and "Assertion" not in out \
        and "LLVM ERROR" not in out and "Stack dump" not in out


def compare(a, b, rtol, later_rtol=None):
    """The first step whose loss, gradient norm or eval loss (after the
    step, with --eval-data) differ by more than `rtol` (`later_rtol` after
    step 1, when given)."""
    def rows(path):
        out = {}
        with open(path) as f:
            for r in map(json.loads, filter(str.strip, f)):
                # An evaluation's row joins its step's; a resumed run's
                # row for a step again wins.
                row = out.setdefault(r["step"], [None, None, None])
                if "eval_loss" in r:
                    row[2] = r["eval_loss"]
                else:
                    row[:2] = [r["loss"], r["grad_norm"]]
        return out
    ra, rb = rows(a), rows(b)
    if sorted(ra) != sorted(rb):
        return f"steps differ: {sorted(ra)} vs {sorted(rb)}"
    for s in sorted(ra):
        tol = rtol if s == 1 or later_rtol is None else later_rtol
        for x, y, what in zip(ra[s], rb[s],
                              ("loss", "gradient norm", "eval loss")):
            if what == "eval loss" and x is None and y is None:
                continue
            if x is None or y is None or abs(x - y) > tol * max(abs(x), abs(y)):
                return f"step {s}: {what} {x} (one rank) vs {y}"
    return None


def compare_onnx(a, b, rtol, atol):
    """The first initializer of saved model `b` whose values differ from
    `a`'s by more than `rtol` of its norm plus `atol` an element (in norm:
    a wrong gather or slice moves the whole tensor; under SGD the
    attention's key bias, whose gradient is zero but for rounding, only
    drifts by rounding and is all rounding when it starts at zero), or
    None."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    def weights(path):
        return {t.name: numpy_helper.to_array(t).astype(np.float64)
                for t in onnx.load(path).graph.initializer}
    wa, wb = weights(a), weights(b)
    if sorted(wa) != sorted(wb):
        return f"initializers differ: {sorted(set(wa) ^ set(wb))[:5]}"
    for name, x in wa.items():
        y = wb[name]
        if x.shape != y.shape:
            return f"{name}: shape {x.shape} (one rank) vs {y.shape}"
        err = np.linalg.norm(x - y)
        if err > rtol * np.linalg.norm(x) + atol * np.sqrt(x.size):
            return (f"{name}: |one rank - plan| = {err:.3g}, "
                    f"|one rank| = {np.linalg.norm(x):.3g}")
    return None


class Fuzzer:
    def __init__(self, args):
        self.args = args
        self.smpc = os.path.join(args.bin, "smpc")
        self.smprun = os.path.join(args.bin, "smprun")
        self.smprun_emu = os.path.join(args.bin, "smprun-emu")
        if args.device == "cuda":
            # One emulated device per rank (docs/cuda-emulator.md).
            os.environ["SMP_CUDAEMU_DEVICES"] = "8"
        self.bases = {}
        self.counts = {"agreed": 0, "refused": 0, "failed": 0}

    def compile_cmd(self, model, base_flags, plan_flags, out):
        """smpc's command line; the batch is among base_flags."""
        path = os.path.join(FIX, MODELS[model][0])
        loss = "cross_entropy:logits:" + MODELS[model][5]
        target = ["--target", "cuda"] if self.args.device == "cuda" else []
        return [self.smpc, "compile", path, "--train", "--loss", loss] + \
            target + base_flags + plan_flags + ["-o", out]

    def run_cmd(self, model, smpx, n, metrics, run_flags, reference=False):
        """smprun's command line with `run_flags`; the plan's runs on
        --device (the CUDA emulator's smprun-emu for cuda, with
        --cuda-graph where drawn), the one-rank reference on the CPU."""
        cuda = self.args.device == "cuda" and not reference
        cmd = [self.smprun_emu if cuda else self.smprun, smpx, "--data",
               os.path.join(FIX, MODELS[model][1]),
               "--steps", str(self.args.steps), "--metrics", metrics,
               "--device", "cuda" if cuda else "cpu"] + \
            [f for f in run_flags if cuda or f != "--cuda-graph"]
        if n > 1:
            # A hung collective ends the run with the rank and the message
            # it waits for.
            cmd += ["--timeout", str(self.args.collective_timeout)]
        return cmd[:1] + (["-n", str(n)] if n > 1 else []) + cmd[1:]

    def base(self, model, base_flags, run_flags):
        """The one-rank run of this model and optimizer (made once)."""
        run_flags = [f for f in run_flags if f != "--cuda-graph"]
        key = (model, tuple(base_flags), tuple(run_flags))
        if key not in self.bases:
            tag = f"{model}-base{len(self.bases)}"
            smpx = os.path.join(self.args.work, tag + ".smpx")
            metrics = os.path.join(self.args.work, tag + ".jsonl")
            cc = self.compile_cmd(model, base_flags, [], smpx)
            rc, out, _ = run(cc, 600)
            refused = rc != 0 and clean_refusal(rc, out)
            if rc == 0:
                save = ["--save-onnx", smpx + ".onnx"] \
                    if MODELS[model][0].endswith(".onnx") else []
                rc, out, _ = run(self.run_cmd(model, smpx, 1, metrics,
                                              run_flags, reference=True) +
                                 save, 600)
            self.bases[key] = (metrics if rc == 0 else None, cc, out, refused)
        return self.bases[key]

    def fail(self, case, what, cmds, out=""):
        self.counts["failed"] += 1
        print(f"case {case}: FAILED: {what}")
        for c in cmds:
            print("  " + " ".join(shlex.quote(x) for x in c))
        if out:
            print("  | " + "\n  | ".join(out.strip().splitlines()[-8:]))
        sys.stdout.flush()

    def draw_case(self, rng):
        """(model, flags both runs share, the plan, the plan a resumed run
        continues under or None, the one-rank reference's flags)."""
        model = rng.choice(self.args.models)
        _, _, tps, tokens, attention, _ = MODELS[model]
        batch = self.args.batch or rng.choice([8, 12, 16])
        base_flags = ["--batch-size", str(batch)]
        if model.endswith("-static"):
            # The file's batch, given or not; another is refused.
            batch = STATIC_BATCH
            base_flags = rng.choice([[], ["--batch-size", str(batch)],
                                     ["--batch-size", "16"]])
        base_flags += draw_optimizer(rng)
        if attention and rng.random() < 0.15:
            base_flags += ["--no-fuse-attention"]
        if rng.random() < self.args.low_precision:
            base_flags += ["--precision", rng.choice(["bf16", "fp16"])]
        if rng.random() < 0.1:
            # Frozen parameters (no gradient, no update) under any plan.
            base_flags += ["--freeze", rng.choice(["bias", "weight$", "\\.0\\."])]
        # BatchNorm's batch statistics depend on how samples are grouped;
        # frozen ones (running statistics, eval()-mode) do not.
        grouped = model == "cnn_bn"
        if grouped and rng.random() < 0.3:
            base_flags += ["--bn-stats", "running"]
            grouped = False

        def plan():
            while True:
                drawn = draw_plan(rng, tps, tokens, attention, batch)
                # Under dp, BatchNorm's micro-batch j is over every
                # replica's j-th micro-batch: samples one rank never
                # groups together.
                if drawn and not (grouped and "--dp" in drawn[0]
                                  and "--microbatches" in drawn[0]):
                    return drawn
        first = plan()
        if not grouped and rng.random() < self.args.auto:
            # The planner chooses (as `smpc compile --devices N` does for
            # users who pin nothing).
            n = rng.choice([2, 4, 8])
            cluster = "cpu"
            if rng.random() < 0.6:
                # Small devices: the planner must shard, recompute or
                # offload (and its compiled arenas must fit).
                kb = rng.choice([120, 200, 300, 500, 1000, 2000])
                cluster = os.path.join(self.args.work, f"cpu{kb}k.json")
                with open(cluster, "w") as f:
                    json.dump({"base": "cpu", "memory_gb": kb * 1e-6}, f)
            first = (["--devices", str(n), "--cluster", cluster] +
                     (["--checkpoint-activations", "auto"]
                      if rng.random() < 0.5 else []), n)
        second = plan() if rng.random() < self.args.resume else None
        ref_flags = base_flags
        if grouped:
            # BatchNorm's statistics are each micro-batch's (as PyTorch
            # with gradient accumulation): one rank with the same
            # micro-batches is the reference (docs/bring-your-own-model.md);
            # a resumed BatchNorm run keeps its plan's micro-batches.
            micro = [f for j, f in enumerate(first[0])
                     if "--microbatches" in first[0][max(j - 1, 0):j + 1]]
            ref_flags = base_flags + micro
            if second:
                second = (first[0], first[1])
        # Run flags both runs take: evaluations (the forward alone, a
        # pipeline's every stage through it) must score as one rank does.
        run_flags = []
        if rng.random() < self.args.eval:
            run_flags += ["--eval-data", os.path.join(FIX, MODELS[model][1]),
                          "--eval-every", "2"]
        if self.args.device == "cuda" and rng.random() < self.args.cuda_graph:
            run_flags += ["--cuda-graph"]  # the plan's runs only
        return model, base_flags, first, second, ref_flags, run_flags

    def compile(self, i, tag, model, flags, plan, desc):
        """Compiles a case's plan: the artifact, or None (refused or
        failed, counted)."""
        smpx = os.path.join(self.args.work, f"case{i}{tag}.smpx")
        if plan and self.rng.random() < self.args.config:
            # The same plan from a config file (SageMaker's keys or smpc's).
            path = os.path.join(self.args.work, f"case{i}{tag}.json")
            with open(path, "w") as f:
                json.dump(as_config(self.rng, plan), f)
            plan = ["--config", path]
            desc += f" [{tag or 'plan'} via {path}]"
        cc = self.compile_cmd(model, flags, plan, smpx)
        rc, out, _ = run(cc, 600)
        if rc == 0:
            return smpx, cc
        if clean_refusal(rc, out):
            self.counts["refused"] += 1
            if self.args.verbose:
                msg = [l for l in out.splitlines() if "error:" in l][0]
                print(f"case {i}: refused: {desc}\n  {msg.strip()}")
        else:
            self.fail(i, f"{desc}: smpc exited {rc} without a clean error", [cc], out)
        return None, cc

    def case(self, i, rng):
        self.rng = rng
        model, base_flags, (plan, n), second, ref_flags, run_flags = \
            self.draw_case(rng)
        desc = f"{model} {' '.join(base_flags)} | {' '.join(plan)} (n={n})"
        if run_flags:
            desc += f" | run {' '.join(run_flags)}"
        if second:
            desc += f", resumed after step {self.args.steps // 2} under " \
                f"{' '.join(second[0])} (n={second[1]})"
        if self.args.verbose:
            print(f"case {i}: {desc}")
            sys.stdout.flush()
        base_metrics, base_cmd, base_out, refused = self.base(model, ref_flags,
                                                              run_flags)
        if refused:
            # Refused whatever the plan (--freeze matching every parameter).
            self.counts["refused"] += 1
            if self.args.verbose:
                msg = [l for l in base_out.splitlines() if "error:" in l][0]
                print(f"case {i}: refused on one rank: {desc}\n  {msg.strip()}")
            return
        if base_metrics is None:
            self.fail(i, f"{desc}: the one-rank run failed", [base_cmd], base_out)
            return
        smpx, cc = self.compile(i, "", model, base_flags, plan, desc)
        if not smpx:
            return
        cmds = [cc]
        metrics = os.path.join(self.args.work, f"case{i}.jsonl")
        rcmd = self.run_cmd(model, smpx, n, metrics, run_flags)
        if second:
            smpx2, cc2 = self.compile(i, "-resumed", model, base_flags,
                                      second[0], desc)
            if not smpx2:
                return
            ckpt = os.path.join(self.args.work, f"case{i}.ckpt")
            half = str(self.args.steps // 2)
            rcmd[rcmd.index("--steps") + 1] = half
            rcmd += ["--checkpoint-dir", ckpt, "--checkpoint-every", half]
            cmds += [cc2]
        t = time.time()
        rc, out, _ = run(rcmd, self.args.timeout)
        cmds.append(rcmd)
        if rc == 0 and second:
            rcmd = self.run_cmd(model, smpx2, second[1], metrics, run_flags) + \
                ["--checkpoint-dir", ckpt, "--resume"]
            rc, out, _ = run(rcmd, self.args.timeout)
            cmds.append(rcmd)
        saved = None
        # Under SGD only: Adam divides each gradient by its own magnitude,
        # so a parameter whose gradient is rounding noise (the attention's
        # key bias: softmax ignores it) takes steps of the learning rate in
        # directions that differ between plans.
        if rc == 0 and rng.random() < self.args.export and \
                MODELS[model][0].endswith(".onnx") and "sgd" in base_flags:
            # The trained model gathered from every rank (smprun
            # --save-onnx) against the one rank's, from a run of its own.
            saved = os.path.join(self.args.work, f"case{i}.onnx")
            rcmd = self.run_cmd(model, smpx, n,
                                os.path.join(self.args.work, f"case{i}.x.jsonl"),
                                []) + \
                ["--save-onnx", saved]
            rc, out, _ = run(rcmd, self.args.timeout)
            cmds.append(rcmd)
        if rc != 0:
            self.fail(i, f"{desc}: smprun exited {rc}", cmds,
                      "\n".join(l for l in out.splitlines() if "error" in l)
                      or out)
            return
        rtol = self.args.rtol if "--precision" not in base_flags \
            else self.args.low_rtol
        # Adam turns the rounding of a gradient near zero into a whole
        # learning-rate step, so in bf16/fp16 the plans' steps after the
        # first drift apart by more than the first step's rounding.
        adaptive = rtol != self.args.rtol and "adam" in " ".join(base_flags)
        bad = compare(base_metrics, metrics, rtol,
                      2.5 * rtol if adaptive else None)
        if not bad and saved:
            fp32 = rtol == self.args.rtol
            bad = compare_onnx(base_metrics.replace(".jsonl", ".smpx.onnx"), saved,
                               1e-4 if fp32 else 5e-2, 1e-5 if fp32 else 1e-3)
        if bad:
            self.fail(i, f"{desc}: {bad}", [base_cmd] + cmds)
            return
        self.counts["agreed"] += 1
        print(f"case {i}: ok ({time.time() - t:.1f} s): {desc}")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default="/tmp/plan-fuzz")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--low-rtol", type=float, default=2e-2,
                    help="the tolerance of bf16 and fp16 cases")
    ap.add_argument("--low-precision", type=float, default=0.2,
                    help="the share of cases trained in bf16 or fp16")
    ap.add_argument("--resume", type=float, default=0.2,
                    help="the share of cases resumed under another plan")
    ap.add_argument("--export", type=float, default=0.25,
                    help="the share of SGD cases whose trained model (smprun "
                    "--save-onnx) is compared with one rank's (needs onnx)")
    ap.add_argument("--auto", type=float, default=0.1,
                    help="the share of cases the planner plans (--devices N)")
    ap.add_argument("--config", type=float, default=0.2,
                    help="the share of plans given as a --config file")
    ap.add_argument("--eval", type=float, default=0.2,
                    help="the share of cases that also evaluate (smprun "
                    "--eval-data, after steps 2 and 4), their eval losses "
                    "compared with one rank's")
    ap.add_argument("--cuda-graph", type=float, default=0.3,
                    help="with --device cuda, the share of runs whose steps "
                    "from the second run as one CUDA graph (--cuda-graph)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=0,
                    help="the global batch (default: drawn from 8, 12 and 16; "
                    "the fixtures hold 16 samples)")
    ap.add_argument("--timeout", type=int, default=600,
                    help="seconds a run may take")
    ap.add_argument("--collective-timeout", type=int, default=60,
                    help="smprun --timeout: seconds a rank waits in one "
                    "collective or receive")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where the plans run (cuda: the artifacts built for "
                    "it, run by smprun-emu on the CUDA emulator without a "
                    "GPU); the one-rank reference runs on the CPU")
    ap.add_argument("--verbose", action="store_true",
                    help="print each case before running it, and refusals")
    ap.add_argument("--only", type=int,
                    help="run only case N of the seed (to reproduce it)")
    args = ap.parse_args()
    args.models = args.models.split(",")
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
    except ImportError:
        if args.export:
            print("plan-fuzz: no onnx/numpy module: the trained models are "
                  "not compared (--export 0)")
        args.export = 0
    os.makedirs(args.work, exist_ok=True)
    fz = Fuzzer(args)
    for i in [args.only] if args.only is not None else range(args.cases):
        # Each case has its own generator: --only K draws case K alone.
        fz.case(i, random.Random(f"{args.seed}/{i}"))
    c = fz.counts
    print(f"plan-fuzz: seed {args.seed}: {c['agreed']} plans agreed with one rank "
          f"within {args.rtol:g} (bf16 and fp16: {args.low_rtol:g}), "
          f"{c['refused']} refused with an error, "
          f"{c['failed']} failed")
    return 1 if c["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
