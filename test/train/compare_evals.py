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

and exits 1 on a mismatch, 2 on bad usage or unreadable files. With
--accuracy the reference's evaluations hold "eval_labels" and
"eval_accuracy" too (smpc --eval-accuracy): the run's must count the same
labels and hits (accuracy x labels, to the nearest integer), exactly. With
--metrics NAME,... the reference's evaluations hold scikit-learn's
"metrics" (smpc --eval-metrics): the run's eval_NAME must equal each within
1e-8, the 9 digits the metrics file keeps (ratios of integer counts: one
count more or less moves them by far more); --metric-atol A loosens that
to A for a correlation of float predictions (pearson, spearmanr). With
--predictions DIR (smprun --eval-predictions) the reference's evaluations
hold "predictions" (PyTorch's argmax classes, or an mse loss's values):
DIR/predictions-step-K.npy must hold them, classes exactly, values within
1e-5 of each (relative above 1), or with --logits the reference's "logits"
(smpc --eval-logits); with --labels FILE.npy (the held-out
labels the loss reads) DIR/label_ids.npy must hold those. Python 3
standard library only.
"""

import argparse
import ast
import json
import math
import struct
import sys


def accuracy_problems(want, got):
    """The differences between a reference evaluation's accuracy and the
    run's: the labels counted and the hits, as integers."""
    step = want["step"]
    if "eval_accuracy" not in got or "eval_labels" not in got:
        return ["step %d reports no eval_accuracy (compiled without "
                "--eval-accuracy?)" % step]
    labels, acc = got["eval_labels"], got["eval_accuracy"]
    hits = round(acc * labels) if isinstance(acc, (int, float)) and \
        math.isfinite(acc) else None
    want_hits = round(want["eval_accuracy"] * want["eval_labels"])
    print("step %d: eval_accuracy %s ref %.7f (%s of %s labels, ref %d of %d)" % (
        step, acc, want["eval_accuracy"], hits, labels, want_hits,
        want["eval_labels"]))
    if labels != want["eval_labels"] or hits != want_hits:
        return ["step %d: %s of %s labels ranked first, the reference %d of %d" % (
            step, hits, labels, want_hits, want["eval_labels"])]
    return []


def metric_problems(want, got, names, atol=1e-8):
    """The differences between a reference evaluation's scikit-learn
    metrics and the run's eval_NAME."""
    problems = []
    for name in names:
        value, ref = got.get("eval_" + name), want["metrics"][name]
        print("step %d: eval_%s %s ref %.12f" % (want["step"], name, value, ref))
        if not isinstance(value, (int, float)) or abs(value - ref) > atol:
            problems.append("step %d: eval_%s %s, the reference %.12f" % (
                want["step"], name, value, ref))
    return problems


def read_npy(path):
    """A little-endian, C-order .npy file of float32, float64, int32 or
    int64: (shape, flat list of its values)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError("%s: not a .npy file" % path)
    size, start = ((struct.unpack("<H", data[8:10])[0], 10) if data[6] == 1
                   else (struct.unpack("<I", data[8:12])[0], 12))
    header = ast.literal_eval(data[start:start + size].decode("latin1"))
    code = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q"}.get(header["descr"])
    if code is None or header["fortran_order"]:
        raise ValueError("%s: dtype %s not read here" % (path, header["descr"]))
    body = data[start + size:]
    return tuple(header["shape"]), list(struct.unpack(
        "<%d%s" % (len(body) // struct.calcsize(code), code), body))


def flat(values):
    """A nested list's values, in order."""
    if isinstance(values, list):
        return [v for x in values for v in flat(x)]
    return [values]


def prediction_problems(want, directory, key="predictions"):
    """The differences between a reference evaluation's predictions (or,
    key "logits", its logits: smpc --eval-logits) and those smprun
    --eval-predictions wrote."""
    step = want["step"]
    path = "%s/predictions-step-%d.npy" % (directory, step)
    try:
        shape, got = read_npy(path)
    except (OSError, ValueError) as e:
        return ["step %d: %s" % (step, e)]
    ref = flat(want[key])
    classes = all(isinstance(v, int) for v in ref)
    if len(got) != len(ref):
        return ["step %d: %s holds %d predictions %s, the reference %d" % (
            step, path, len(got), shape, len(ref))]
    off = [i for i, (g, r) in enumerate(zip(got, ref))
           if (g != r if classes else abs(g - r) > 1e-5 * max(1.0, abs(r)))]
    print("step %d: %d predictions %s, %d %s the reference's" % (
        step, len(got), shape, len(off),
        "differ from" if classes else "off by more than 1e-5 from"))
    return ["step %d: prediction %d is %s, the reference %s" % (
        step, off[0], got[off[0]], ref[off[0]])] if off else []


def label_problems(directory, labels):
    """The differences between smprun's label_ids.npy and the held-out
    labels the loss reads."""
    try:
        _, got = read_npy("%s/label_ids.npy" % directory)
        _, want = read_npy(labels)
    except (OSError, ValueError) as e:
        return ["labels: %s" % e]
    off = sum(1 for g, w in zip(got, want) if g != w)
    print("label_ids: %d of %d differ from %s" % (off, len(want), labels))
    if len(got) != len(want) or off:
        return ["label_ids.npy holds %d labels, %d of them not %s's" % (
            len(got), off, labels)]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("metrics")
    ap.add_argument("ref")
    ap.add_argument("--rtol", type=float, required=True)
    ap.add_argument("--label", default="eval")
    ap.add_argument("--accuracy", action="store_true",
                    help="also compare eval_accuracy and eval_labels")
    ap.add_argument("--metrics", default="", dest="metric_names",
                    help="also compare these eval_NAME with the reference's "
                         "metrics (comma-separated)")
    ap.add_argument("--metric-atol", type=float, default=1e-8,
                    help="the metrics' absolute tolerance")
    ap.add_argument("--predictions", default="",
                    help="smprun --eval-predictions' directory")
    ap.add_argument("--logits", action="store_true",
                    help="the predictions are the reference's logits")
    ap.add_argument("--labels", default="",
                    help="the held-out labels (.npy) label_ids.npy holds")
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
        if args.accuracy:
            problems += accuracy_problems(w, r)
        if args.metric_names:
            problems += metric_problems(w, r, args.metric_names.split(","),
                                        args.metric_atol)
        if args.predictions:
            problems += prediction_problems(
                w, args.predictions, "logits" if args.logits else "predictions")
        if r.get("eval_samples") != samples:
            problems.append("step %d evaluated %s samples, the reference %d" % (
                w["step"], r.get("eval_samples"), samples))
    if by_step:
        problems.append("evaluations the reference has not: steps %s" % sorted(by_step))
    if args.predictions and args.labels:
        problems += label_problems(args.predictions, args.labels)
    if worst > args.rtol:
        problems.append("eval_loss off by %.2e" % worst)
    print("%s: %d evaluations, max rel err %.2e (rtol %g): %s" % (
        args.label, len(want), worst, args.rtol,
        "ok" if not problems else "MISMATCH (%s)" % "; ".join(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
