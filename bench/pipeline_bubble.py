#!/usr/bin/env python3
"""Measured pipeline bubble from smprun --profile files of every rank.

busy(r) = time rank r spent in instructions other than recv/send (compute);
span(r) = time in all its instructions (compute + waiting for peers).
bubble  = 1 - sum_r busy(r) / (p * max_r span(r)), the idle share of the
pipeline, to compare with the simulator's figure for the schedule (F=1, B=2,
BI=BW=1, no communication time: smp::schedule::unitCostBubbleFraction).
"""
import json
import sys


def simulated(kind, p, m, v):
    if kind in ("gpipe", "1f1b"):
        return (p - 1) / (m + p - 1)
    if kind == "interleaved":
        return 1 - v * m / (v * max(m, p) + min(m, p) - 1)
    if kind == "zb-h1":
        return 1 - 3 * m / max(3 * m + p - 1, 2 * m + 2 * p - 1)
    raise SystemExit(f"unknown schedule {kind}")


def main():
    if len(sys.argv) != 6:
        raise SystemExit("usage: pipeline_bubble.py PROFILE P M SCHEDULE V")
    path, p, m, kind, v = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    busy, span = [], []
    for r in range(p):
        entries = json.load(open(path if r == 0 else f"{path}.rank{r}"))
        busy.append(sum(e["seconds"] for e in entries if e["op"] not in ("recv", "send")))
        span.append(sum(e["seconds"] for e in entries))
    measured = 1 - sum(busy) / (p * max(span))
    sim = simulated(kind, p, m, v)
    print(f"{kind:12s} p={p} m={m} v={v}: measured bubble {100 * measured:5.1f}%  "
          f"simulator {100 * sim:5.1f}%  difference {100 * (measured - sim):+5.1f} points  "
          f"(busy per rank {', '.join(f'{b:.2f}' for b in busy)} s of {max(span):.2f} s)")


if __name__ == "__main__":
    main()
