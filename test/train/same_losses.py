#!/usr/bin/env python3
"""Checks that two smprun --metrics files agree exactly on every step's loss
and gradient norm (the later line wins when a resumed run appended a step
again). Standard library only.

    same_losses.py A.jsonl B.jsonl
"""
import json
import sys


def read(path):
    steps = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                steps[rec["step"]] = (rec["loss"], rec["grad_norm"])
    return steps


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = read(sys.argv[1]), read(sys.argv[2])
    if sorted(a) != sorted(b):
        print(f"steps differ: {sorted(a)} vs {sorted(b)}")
        return 1
    bad = [s for s in sorted(a) if a[s] != b[s]]
    for s in bad:
        print(f"step {s}: {a[s]} vs {b[s]}")
    if bad:
        return 1
    print(f"{len(a)} steps, losses and gradient norms bit-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
