#!/usr/bin/env python3
"""Compares the evaluations of an smprun run with a PyTorch reference.

    compare_evals.py METRICS.jsonl REF.json --rtol R [--label NAME]

METRICS.jsonl is what `smprun --steps N --eval-data DIR --metrics FILE`
writes; its evaluation rows hold step, eval_loss, eval_samples,
eval_batches. REF.json (python/make_eval_refs.py) holds "evals": a list of
{"step", "eval_loss", "batch_losses"[, "samples"]} and "config":
{"batch", ...}, the global batch. Every reference evaluation must be in
the run, at its step, with its samples (those of its batches: "samples",
else batch x batches), and no other: prints each with the
relative error of its loss, then one line

    NAME: N evaluations, max rel err E (rtol R): ok
    NAME: ... MISMATCH (...)

and exits 1 on a mismatch, 2 on bad usage or unreadable files. Python 3
standard library only.
"""

import argparse
import json
import math
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("metrics")
    ap.add_argument("ref")
    ap.add_argument("--rtol", type=float, required=True)
    ap.add_argument("--label", default="eval")
    try:
        args = ap.parse_args()
    except SystemExit as e:
        sys.exit(0 if e.code == 0 else 2)
    try:
        with open(args.ref) as f:
            ref = json.load(f)
        want = ref["evals"]
        batch = int(ref["config"]["batch"])
        with open(args.metrics) as f:
            got = [r for r in (json.loads(l) for l in f if l.strip())
                   if "eval_loss" in r]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("compare_evals: %s" % e, file=sys.stderr)
        sys.exit(2)
    problems, worst = [], 0.0
    by_step = {r["step"]: r for r in got}
    if len(by_step) != len(got):
        problems.append("an evaluation reported twice")
    for w in want:
        r = by_step.pop(w["step"], None)
        if r is None:
            problems.append("no evaluation after step %d" % w["step"])
            continue
        loss = r["eval_loss"]
        err = (math.inf if not isinstance(loss, (int, float)) or not math.isfinite(loss)
               else abs(loss - w["eval_loss"]) / max(abs(w["eval_loss"]), 1e-30))
        worst = max(worst, err)
        samples = w.get("samples", batch * len(w["batch_losses"]))
        print("step %d: eval_loss %.7f ref %.7f rel err %.2e samples %s" % (
            w["step"], loss if loss is not None else math.nan, w["eval_loss"], err,
            r.get("eval_samples")))
        if r.get("eval_samples") != samples:
            problems.append("step %d evaluated %s samples, the reference %d" % (
                w["step"], r.get("eval_samples"), samples))
    if by_step:
        problems.append("evaluations the reference has not: steps %s" % sorted(by_step))
    if worst > args.rtol:
        problems.append("eval_loss off by %.2e" % worst)
    print("%s: %d evaluations, max rel err %.2e (rtol %g): %s" % (
        args.label, len(want), worst, args.rtol,
        "ok" if not problems else "MISMATCH (%s)" % "; ".join(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
