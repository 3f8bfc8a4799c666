#!/usr/bin/env python3
"""Checks the fields of smprun --metrics rows against each other and the
artifact: every step present once; time within a minute of now and
increasing; elapsed increasing and below the time span; tokens_per_s =
samples_per_s x TOKENS (null with TOKENS 0); samples_per_s = BATCH /
step_time; tflops_per_device = step_flops / RANKS / step_time / 1e12 and
mfu = tflops_per_device * 1e12 / the row's peak_flops, which is the
artifact's (step_flops and peak_flops read from MANIFEST.txt,
`smp-artifact-text decode MODEL.smpx/manifest.pb`) times THREADS for the
"cpu" preset (one core's peak; a rank computes on its threads), times 1
otherwise; peak_bytes_per_rank has RANKS entries, the first equal to
peak_bytes.

    check_metrics.py METRICS.jsonl MANIFEST.txt --ranks R --batch B --tokens T
                     [--threads N]
Prints "N rows consistent" or what differs (exit 1). Standard library only.
"""
import argparse
import json
import math
import re
import time

from same_losses import report  # this directory


def close(a, b, rel=1e-6):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics")
    ap.add_argument("manifest")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    text = open(args.manifest).read()
    step_flops = float(re.search(r"^step_flops: (\S+)", text, re.M).group(1))
    peak = float(re.search(r"^peak_flops: (\S+)", text, re.M).group(1))
    if re.search(r'^device: "cpu"', text, re.M):
        peak *= args.threads
    rows = [json.loads(l) for l in open(args.metrics) if l.strip()]
    bad = []
    now = time.time()
    for i, r in enumerate(rows):
        s = r["step"]
        if s != i + 1:
            bad.append(f"row {i}: step {s}")
        if not now - 3600 < r["time"] <= now + 1:
            bad.append(f"step {s}: time {r['time']} is not about now ({now})")
        if i and not (r["time"] >= rows[i - 1]["time"] and
                      r["elapsed"] > rows[i - 1]["elapsed"]):
            bad.append(f"step {s}: time or elapsed went back")
        if not close(r["samples_per_s"], args.batch / r["step_time"], 1e-4):
            bad.append(f"step {s}: samples_per_s {r['samples_per_s']} != "
                       f"{args.batch} / {r['step_time']}")
        want_tokens = r["samples_per_s"] * args.tokens if args.tokens else None
        if (r["tokens_per_s"] is None) != (want_tokens is None) or (
                want_tokens and not close(r["tokens_per_s"], want_tokens)):
            bad.append(f"step {s}: tokens_per_s {r['tokens_per_s']}, "
                       f"expected {want_tokens}")
        tflops = step_flops / args.ranks / r["step_time"] / 1e12
        if not close(r["tflops_per_device"], tflops, 1e-4):
            bad.append(f"step {s}: tflops_per_device {r['tflops_per_device']}"
                       f" != {tflops}")
        if not close(r["peak_flops"], peak):
            bad.append(f"step {s}: peak_flops {r['peak_flops']} != {peak}")
        if not close(r["mfu"], r["tflops_per_device"] * 1e12 / peak):
            bad.append(f"step {s}: mfu {r['mfu']}")
        peaks = r["peak_bytes_per_rank"]
        if len(peaks) != args.ranks or peaks[0] != r["peak_bytes"] or \
                min(peaks) <= 0:
            bad.append(f"step {s}: peak_bytes_per_rank {peaks}")
    if rows[-1]["elapsed"] > rows[-1]["time"] - rows[0]["time"] + \
            rows[0]["elapsed"] + 1e-3:
        bad.append("elapsed exceeds the time span")
    report(bad, f"{len(rows)} rows consistent")


if __name__ == "__main__":
    main()
