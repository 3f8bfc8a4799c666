#!/usr/bin/env python3
"""Checks an smprun evaluation against the trained model run forward.

    eval_vs_logits.py METRICS.jsonl LOGITS.npy LABELS.npy --rtol R [--label NAME]

METRICS.jsonl holds the run's evaluation rows (--eval-data); LOGITS.npy is
the forward of the model that run saved (--save-onnx, compiled without
--train and run with --output-dir on the held-out samples: the inference
path, a batch norm reading its running statistics there), LABELS.npy the
held-out labels. The last evaluation's eval_loss must be the mean
cross-entropy of those logits (one batch) within R:

    NAME: eval_loss E, forward's cross-entropy C, rel err X (rtol R): ok

Exits 1 on a mismatch, 2 on bad usage. Needs numpy.
"""

import argparse
import json
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics")
    ap.add_argument("logits")
    ap.add_argument("labels")
    ap.add_argument("--rtol", type=float, required=True)
    ap.add_argument("--label", default="eval")
    args = ap.parse_args()
    try:
        with open(args.metrics) as f:
            rows = [r for r in (json.loads(l) for l in f if l.strip()) if "eval_loss" in r]
        z = np.load(args.logits).astype(np.float64)
        labels = np.load(args.labels)
    except (OSError, ValueError) as e:
        print("eval_vs_logits: %s" % e, file=sys.stderr)
        sys.exit(2)
    if not rows:
        print("%s: no evaluation in %s: MISMATCH" % (args.label, args.metrics))
        sys.exit(1)
    z -= z.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    ce = float(-np.take_along_axis(logp, labels[..., None], axis=-1).mean())
    got = rows[-1]["eval_loss"]
    err = abs(got - ce) / abs(ce)
    print("%s: eval_loss %.7f, forward's cross-entropy %.7f, rel err %.2e (rtol %g): %s" % (
        args.label, got, ce, err, args.rtol, "ok" if err <= args.rtol else "MISMATCH"))
    sys.exit(0 if err <= args.rtol else 1)


if __name__ == "__main__":
    main()
