#!/usr/bin/env python3
"""The planner's memory estimate against the compiler's memory plan, per
pipeline rank, for the training fixtures (GPT, LLaMA, BERT) under a set of
plans: `smpc plan` prints each chosen plan's compiled arenas beside its
estimate (models this small are compiled in a moment). Prints a markdown
table of (estimate - arena) / arena per rank.

Usage: bench/planner_memory.py [--smpc build/bin/smpc] [--fixtures DIR]"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

PLANS = [
    ("1 rank", "--devices 1"),
    ("1 rank, 2 micro-batches, full recomputation",
     "--devices 1 --microbatch-size 4 --checkpoint-activations full"),
    ("1 rank, offloading", "--devices 1 --offload-activations"),
    ("tp2", "--devices 2 --tp 2 --pp 1"),
    ("4 devices (dp4, ZeRO-1)", "--devices 4 --tp 1 --pp 1 --zero-stage 1"),
    ("pp2, 1F1B", "--devices 2 --pp 2 --tp 1 --schedule 1f1b"),
    ("pp2, 1F1B, full recomputation",
     "--devices 2 --pp 2 --tp 1 --schedule 1f1b --checkpoint-activations full"),
    ("pp2, 1F1B, offloading",
     "--devices 2 --pp 2 --tp 1 --schedule 1f1b --offload-activations"),
    ("pp2, ZB-H1", "--devices 2 --pp 2 --tp 1 --schedule zb-h1"),
    ("pp2, ZB-H1, full recomputation",
     "--devices 2 --pp 2 --tp 1 --schedule zb-h1 --checkpoint-activations full"),
    ("tp2 x pp2, 1F1B", "--devices 4 --tp 2 --pp 2 --schedule 1f1b"),
    ("dp2 x tp2 x pp2, 1F1B, ZeRO-1",
     "--devices 8 --dp 2 --tp 2 --pp 2 --schedule 1f1b --zero-stage 1"),
    ("pp4, ZB-H1, micro-batch 1",
     "--devices 4 --pp 4 --tp 1 --schedule zb-h1 --microbatch-size 1"),
    ("pp4, ZB-H1, micro-batch 1, offloading",
     "--devices 4 --pp 4 --tp 1 --schedule zb-h1 --microbatch-size 1 "
     "--offload-activations"),
]


def compare(smpc, model, flags, tmp):
    out = subprocess.run(
        [smpc, "plan", model, "--cluster", "cpu", "--global-batch", "8",
         "--optimizer", "adamw", "--json", f"{tmp}/p.json"] + flags.split(),
        capture_output=True, text=True)
    if out.returncode != 0:
        return "refused"
    m = re.search(r"liveness-based plan\):((?: \d+)+) bytes", out.stdout)
    if not m:
        return "not compiled"
    arenas = [int(x) for x in m.group(1).split()]
    stages = json.load(open(f"{tmp}/p.json"))["best"]["stages"]
    return " / ".join(f"{100 * (s['memory_bytes'] - a) / a:+.1f}%"
                      for s, a in zip(stages, arenas))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smpc", default="build/bin/smpc")
    ap.add_argument("--fixtures", default="test/fixtures/train")
    args = ap.parse_args()
    models = ["gpt", "llama", "bert"]
    print("| plan | " + " | ".join(models) + " |")
    print("| --- |" + " --- |" * len(models))
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in PLANS:
            cells = [compare(args.smpc, os.path.join(args.fixtures, m + ".onnx"),
                             flags, tmp) for m in models]
            print(f"| {name} | " + " | ".join(cells) + " |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
