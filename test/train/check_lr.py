#!/usr/bin/env python3
"""Checks every --metrics row's learning rate against the schedule smpc's
flags describe: lr*(k+1)/W for 0-based step k < W (warmup), then for cosine
lr*(1+cos(pi*min(1, (k-W)/max(1, D-W))))/2 with D = --decay, the step where
it reaches 0 (torch.optim.lr_scheduler.LambdaLR with that lambda, as
python/make_training_refs.py feeds PyTorch); 1e-7 relative.

    check_lr.py METRICS.jsonl --lr LR --warmup W [--decay D]
Prints "N steps follow the schedule" or the first step that does not.
"""
import argparse
import json
import math
import sys

ap = argparse.ArgumentParser()
ap.add_argument("metrics")
ap.add_argument("--lr", type=float, required=True)
ap.add_argument("--warmup", type=int, default=0)
ap.add_argument("--decay", type=int)
args = ap.parse_args()
rows = [json.loads(l) for l in open(args.metrics) if l.strip()]
for r in rows:
    k = r["step"] - 1
    if k < args.warmup:
        want = args.lr * (k + 1) / args.warmup
    elif args.decay:
        p = min(1.0, (k - args.warmup) / max(1, args.decay - args.warmup))
        want = args.lr * 0.5 * (1 + math.cos(math.pi * p))
    else:
        want = args.lr
    if not math.isclose(r["lr"], want, rel_tol=1e-7, abs_tol=1e-15):
        print(f"FAILED: step {r['step']}: lr {r['lr']}, expected {want}")
        sys.exit(1)
print(f"{len(rows)} steps follow the schedule")
