#!/usr/bin/env python3
"""Compares an smprun training run with a PyTorch reference.

    compare_losses.py METRICS.jsonl REF.json --rtol R [--grad-rtol G] [--label NAME]

METRICS.jsonl is what `smprun --steps N --metrics FILE` writes (one JSON
object per step: step, loss, lr, grad_norm, ...; the rows of evaluations,
with eval_loss, are left to compare_evals.py); REF.json is a
test/fixtures/train/<model>/ref_<config>.json written by
python/make_training_refs.py ({"config": {...}, "losses": [...],
"grad_norms": [...]}, and "lrs": [...], the learning rate of every step,
when the configuration has a learning-rate schedule; an fp16 reference
also has "loss_scales": [...], the loss scale each step used, and
"skipped": [...], true where the step was skipped because a gradient
overflowed, whose grad norm is null).

Prints every step's loss, grad norm and lr next to the reference's with the
relative error |smp - ref| / |ref|, then one summary line

    NAME: N steps, max rel err loss E grad_norm E lr E (rtol R): ok
    NAME: ... MISMATCH (...)

(with ", grad_norm rtol G" after R when --grad-rtol is given, and
"loss_scale E, K skipped" after the lr when the reference has loss scales;
"grad_norm n/a" when every step of the reference was skipped) and exits 1 on
a mismatch: a relative error above R (loss) or above G (grad norm; G
defaults to R, bf16 runs check grad norms more loosely than losses), a
missing, extra or non-finite step, or a learning rate that differs from the
reference's by more than 1e-6 relative (the run was compiled with other
flags): each step's against the reference's "lrs" where it has them, else
against config.lr. Where the reference has "loss_scales" and "skipped"
(fp16 dynamic loss scaling), each step's "loss_scale" must match to 1e-6
relative and "skipped" exactly (a missing field is a mismatch), and the grad
norm is not compared on a step the reference skipped (its grad norm is null
there; smprun writes null too). Exit status 2 means bad usage or unreadable
files.

Python 3 standard library only (CI has no numpy).
"""

import argparse
import json
import math
import os
import sys

LR_RTOL = 1e-6  # the lr is computed in double on both sides; this only absorbs rounding
SCALE_RTOL = 1e-6  # the loss scale is a power-of-two multiple of init_scale on both sides (float32)


def load_metrics(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise SystemExit("%s:%d: not JSON: %s" % (path, n, e))
            if "eval_loss" not in row:  # an evaluation's (compare_evals.py)
                rows.append(row)
    return rows


def rel_err(got, ref):
    if not (isinstance(got, (int, float)) and math.isfinite(got)):
        return math.inf
    if got == ref:
        return 0.0
    return abs(got - ref) / max(abs(ref), 1e-30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("metrics", help="smprun --metrics output (JSON lines)")
    ap.add_argument("ref", help="PyTorch reference (ref_<config>.json)")
    ap.add_argument("--rtol", type=float, required=True, help="relative tolerance for losses and grad norms")
    ap.add_argument("--grad-rtol", type=float,
                    help="relative tolerance for grad norms (default: --rtol); e.g. looser for bf16 runs")
    ap.add_argument("--label", help="name in the summary line (default: <model>/<config> from REF's path)")
    try:
        args = ap.parse_args()
    except SystemExit as e:
        sys.exit(0 if e.code == 0 else 2)

    try:
        with open(args.ref) as f:
            ref = json.load(f)
        rows = load_metrics(args.metrics)
        ref_losses = [float(x) for x in ref["losses"]]
        ref_norms = [None if x is None else float(x) for x in ref["grad_norms"]]
        ref_lrs = [float(x) for x in ref["lrs"]] if "lrs" in ref else None
        ref_scales = [float(x) for x in ref["loss_scales"]] if "loss_scales" in ref else None
        ref_skipped = ref.get("skipped")
        if ref_skipped is not None and not all(isinstance(x, bool) for x in ref_skipped):
            raise ValueError("%s: \"skipped\" must be a list of true/false" % args.ref)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("compare_losses: %s" % e, file=sys.stderr)
        sys.exit(2)
    except SystemExit as e:
        print("compare_losses: %s" % e, file=sys.stderr)
        sys.exit(2)
    if len(ref_norms) != len(ref_losses):
        print("compare_losses: %s: %d losses but %d grad norms" % (args.ref, len(ref_losses), len(ref_norms)),
              file=sys.stderr)
        sys.exit(2)
    if ref_lrs is not None and len(ref_lrs) != len(ref_losses):
        print("compare_losses: %s: %d losses but %d lrs" % (args.ref, len(ref_losses), len(ref_lrs)),
              file=sys.stderr)
        sys.exit(2)
    if (ref_scales is None) != (ref_skipped is None):
        print("compare_losses: %s: \"loss_scales\" and \"skipped\" come together" % args.ref, file=sys.stderr)
        sys.exit(2)
    if ref_scales is not None and not (len(ref_scales) == len(ref_skipped) == len(ref_losses)):
        print("compare_losses: %s: %d losses but %d loss scales and %d skipped" % (
            args.ref, len(ref_losses), len(ref_scales), len(ref_skipped)), file=sys.stderr)
        sys.exit(2)
    for i, n in enumerate(ref_norms):
        if n is None and not (ref_skipped is not None and ref_skipped[i]):
            print("compare_losses: %s: grad norm of step %d is null but the step was not skipped" % (args.ref, i + 1),
                  file=sys.stderr)
            sys.exit(2)

    grad_rtol = args.rtol if args.grad_rtol is None else args.grad_rtol
    label = args.label
    if not label:
        stem = os.path.splitext(os.path.basename(args.ref))[0]
        if stem.startswith("ref_"):
            stem = stem[4:]
        label = "%s/%s" % (os.path.basename(os.path.dirname(os.path.abspath(args.ref))) or "?", stem)

    config = ref.get("config", {})
    ref_lr = config.get("lr")
    if ref_lrs is None and ref_lr is not None:
        ref_lrs = [float(ref_lr)] * len(ref_losses)  # a constant rate
    problems = []
    if len(rows) != len(ref_losses):
        problems.append("%d steps in %s, %d in the reference" % (len(rows), args.metrics, len(ref_losses)))

    max_loss = max_norm = max_lr = max_scale = 0.0
    norms_compared = n_skipped = 0
    header = "%-4s %14s %14s %10s   %14s %14s %10s   %12s %12s %10s" % (
        "step", "smp loss", "ref loss", "rel err", "smp grad_norm", "ref grad_norm", "rel err",
        "smp lr", "ref lr", "rel err")
    if ref_scales is not None:
        header += "   %12s %12s %10s   %s" % ("smp scale", "ref scale", "rel err", "skipped smp/ref")
    print(header)
    for i, (rl, rn) in enumerate(zip(ref_losses, ref_norms)):
        if i >= len(rows):
            break
        row = rows[i]
        step = row.get("step")
        loss = row.get("loss")
        norm = row.get("grad_norm")
        if step != i + 1:
            problems.append("line %d is step %r, expected %d" % (i + 1, step, i + 1))
        el = rel_err(loss, rl)
        en = math.nan  # not compared: the reference skipped this step (null grad norm)
        max_loss = max(max_loss, el)
        flag = ""
        if el > args.rtol:
            flag += "  <-- loss"
            problems.append("step %d loss %r vs %r (rel err %.3g)" % (i + 1, loss, rl, el))
        if rn is not None:
            en = rel_err(norm, rn)
            max_norm = max(max_norm, en)
            norms_compared += 1
            if en > grad_rtol:
                flag += "  <-- grad_norm"
                problems.append("step %d grad_norm %r vs %r (rel err %.3g)" % (i + 1, norm, rn, en))
        scale_cols = ""
        if ref_scales is not None:
            scale = row.get("loss_scale")
            skipped = row.get("skipped")
            es = rel_err(scale, ref_scales[i])
            max_scale = max(max_scale, es)
            if es > SCALE_RTOL:
                flag += "  <-- loss_scale"
                problems.append("step %d loss_scale %r vs %r (rel err %.3g)" % (i + 1, scale, ref_scales[i], es))
            if skipped is not ref_skipped[i]:
                flag += "  <-- skipped"
                problems.append("step %d skipped %s, the reference %s" % (
                    i + 1, json.dumps(skipped), json.dumps(ref_skipped[i])))
            n_skipped += ref_skipped[i]
            scale_cols = "   %12.6g %12.6g %10.3g   %s/%s" % (
                scale if isinstance(scale, (int, float)) and not isinstance(scale, bool) else math.nan,
                ref_scales[i], es, json.dumps(skipped), json.dumps(ref_skipped[i]))
        lr = row.get("lr")
        rlr = ref_lrs[i] if ref_lrs is not None else math.nan
        elr = math.nan
        if ref_lrs is not None:
            elr = rel_err(lr, rlr)
            max_lr = max(max_lr, elr)
            if elr > LR_RTOL:
                flag += "  <-- lr"
                problems.append("step %d lr %r, the reference used %r (rel err %.3g)" % (i + 1, lr, rlr, elr))
        print("%-4d %14.8g %14.8g %10.3g   %14.8g %14.8g %10.3g   %12.6g %12.6g %10.3g%s%s" % (
            i + 1, loss if isinstance(loss, (int, float)) else math.nan, rl, el,
            norm if isinstance(norm, (int, float)) else math.nan, math.nan if rn is None else rn, en,
            lr if isinstance(lr, (int, float)) else math.nan, rlr, elr, scale_cols, flag))

    compared = min(len(rows), len(ref_losses))
    norm_summary = "%.3g" % max_norm if norms_compared or not compared else "n/a"
    summary = "%s: %d steps, max rel err loss %.3g grad_norm %s%s%s (rtol %g%s)" % (
        label, compared, max_loss, norm_summary,
        " lr %.3g" % max_lr if ref_lrs is not None else "",
        " loss_scale %.3g, %d skipped" % (max_scale, n_skipped) if ref_scales is not None else "", args.rtol,
        ", grad_norm rtol %g" % grad_rtol if args.grad_rtol is not None else "")
    if problems:
        more = " and %d more" % (len(problems) - 3) if len(problems) > 3 else ""
        print("%s: MISMATCH (%s%s)" % (summary, "; ".join(problems[:3]), more))
        sys.exit(1)
    print("%s: ok" % summary)


if __name__ == "__main__":
    main()
