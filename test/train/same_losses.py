#!/usr/bin/env python3
"""Checks that two smprun --metrics files agree on every step's loss and
gradient norm, and on the eval loss of every evaluation (--eval-data; the
runs must evaluate after the same steps): exactly by default, or within a
relative tolerance with --rtol (the later line wins when a resumed run
appended a step again). With --offset K, B's step s is A's step s + K (B
ran on from A's step K, as a model saved at step K and trained again), and
only A's later steps are compared. Standard library only.

    same_losses.py A.jsonl B.jsonl [--rtol R] [--offset K]
"""
import json
import sys


def read_rows(path):
    """A --metrics file's rows by step (a step appended again wins)."""
    rows = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if "eval_loss" in row:  # an evaluation joins its step
                    row = {**rows.get(row["step"], {}), **row}
                rows[row["step"]] = row
    return rows


def report(bad, ok):
    """Prints the first five of the problems `bad` after "FAILED: " and
    exits 1; prints `ok` when there are none."""
    if bad:
        print("FAILED: " + "; ".join(bad[:5]))
        sys.exit(1)
    print(ok)


def read(path):
    return {step: (row["loss"], row["grad_norm"], row.get("eval_loss"))
            for step, row in read_rows(path).items()}


def close(a, b, rtol):
    if rtol == 0:
        return a == b
    if a is None or b is None:
        return a is b
    return abs(a - b) <= rtol * max(abs(a), abs(b))


def main():
    args = sys.argv[1:]
    rtol, offset = 0.0, 0
    if "--rtol" in args:
        i = args.index("--rtol")
        rtol = float(args[i + 1])
        del args[i:i + 2]
    if "--offset" in args:
        i = args.index("--offset")
        offset = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = read(args[0]), read(args[1])
    if offset:
        a = {s - offset: v for s, v in a.items() if s > offset}
    if sorted(a) != sorted(b):
        print(f"steps differ: {sorted(a)} vs {sorted(b)}")
        return 1
    bad = [s for s in sorted(a)
           if not all(close(x, y, rtol) for x, y in zip(a[s], b[s]))]
    for s in bad:
        print(f"step {s}: {a[s]} vs {b[s]}")
    if bad:
        return 1
    evals = sum(a[s][2] is not None for s in a)
    also = f", eval losses of {evals} evaluation(s)" if evals else ""
    if rtol == 0:
        print(f"{len(a)} steps, losses and gradient norms bit-identical{also}")
    else:
        print(f"{len(a)} steps, losses and gradient norms within {rtol:g}{also}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
