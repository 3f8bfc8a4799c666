#!/usr/bin/env python3
"""Where a training step's time goes, from `smprun --profile FILE`: the
top ops as a markdown table (scripts/device-kit.sh puts it in its
summary.md for the GPT-2 benchmark's artifact). Standard library only.

    profile_table.py PROFILE.json [--base FIRST.json] [--top 15]
                     [--nodes 10] [--warmup K]

PROFILE.json is smprun's --profile output: one entry per instruction of
the program with op, node (the ONNX node it came from; its gradients carry
the same name), seconds (summed over the steps: on a GPU the device's
clock, timing events around each instruction and nothing waited for; on
the CPU its wall time), clock ("device" or "host"), host_seconds (the
host's time issuing it), idle_seconds (device clock: the device's time
with nothing queued before it; for a step's first instruction, since the
previous step's end), calls (the steps), flops and bytes of
one call, and scratch_bytes (a device's: the most the instruction's kernels
held at once in transient scratch, measured in the first profiled step). (Profiles written before the clock was recorded have seconds
only, the host's.) --base is the profile of a one-step run of the same artifact: its
times are subtracted instruction by instruction, which leaves the steady
steps without the first step's one-time costs (lazy kernel loading, library
handles, allocator growth); without it the first step is in the table,
unless the run left it out (`smprun --profile-warmup K`: say so with
--warmup K).

Prints the top ops by total time (per op: instructions, total ms, ms per
step, share, achieved TFLOP/s and GB/s, and the host's ms per step issuing
them), the rest in one line; on the device's clock, the device's idle time
a step between instructions and between steps, and the host's time a
step; then the top
source nodes (forward and gradient instructions of one ONNX node together,
the layers' /h.N/ merged into /h.*/).
"""
import argparse
import collections
import json
import re
import sys


def load(path):
    with open(path) as f:
        entries = json.load(f)
    if not isinstance(entries, list):
        raise SystemExit(f"profile_table.py: {path}: not a list of entries")
    return entries


def rate(amount, sec, unit):
    """amount / sec in `unit`s, three significant digits ("-" without)."""
    if sec <= 0 or not amount:
        return "-"
    v = amount / sec / unit
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def scratch_line(entries, by_op):
    """The kernels' transient scratch (a device's profile: scratch_bytes,
    measured in the first profiled step): the instruction that held the
    most, and the three ops that held the most in one instruction."""
    held = [e for e in entries if e.get("scratch_bytes", 0) > 0]
    if not held:
        return
    top = max(held, key=lambda e: e["scratch_bytes"])
    per_op = sorted(((max(e.get("scratch_bytes", 0) for e in g), op)
                     for op, g in by_op.items()), reverse=True)
    ops = ", ".join(f"{op} {n:,}" for n, op in per_op[:3] if n > 0)
    print()
    print(f"The kernels' scratch (bytes held at once beyond the arena): "
          f"at most {top['scratch_bytes']:,} in one instruction "
          f"({top['op']}, node {top['node']}); the most an op's one "
          f"instruction held: {ops}.")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("profile")
    p.add_argument("--base")
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--nodes", type=int, default=10)
    a = p.parse_args()

    entries = load(a.profile)
    if not entries:
        print("profile: no instructions")
        return
    steps = max(e.get("calls", 0) for e in entries)
    note = (f"{steps} steps after {a.warmup} warm-up step(s) left out "
            f"(smprun --profile-warmup {a.warmup})" if a.warmup > 0 else
            f"{steps} steps, the first one's warm-up included")
    if a.base:
        base = load(a.base)
        same = len(base) == len(entries) and all(
            b["op"] == e["op"] and b["node"] == e["node"]
            for b, e in zip(base, entries))
        if not same:
            print(f"(--base {a.base} is another program: not subtracted)")
        else:
            bsteps = max(b.get("calls", 0) for b in base)
            if steps > bsteps:
                entries = [dict(e, calls=e["calls"] - b["calls"], **{
                    k: max(0.0, e[k] - b.get(k, 0.0))
                    for k in ("seconds", "host_seconds", "idle_seconds")
                    if k in e}) for b, e in zip(base, entries)]
                note = (f"{steps - bsteps} steps: a {steps}-step run less a "
                        f"{bsteps}-step one, the warm-up subtracted")
                steps -= bsteps
    steps = max(steps, 1)
    total = sum(e["seconds"] for e in entries)
    if total <= 0:
        print("profile: no time recorded")
        return

    device = all(e.get("clock") == "device" for e in entries)
    hosted = all("host_seconds" in e for e in entries)
    if device:
        note += "; the device's clock, nothing waited for"

    def row_stats(group):
        sec = sum(e["seconds"] for e in group)
        flops = sum(e.get("flops", 0) * e.get("calls", 0) for e in group)
        nbytes = sum(e.get("bytes", 0) * e.get("calls", 0) for e in group)
        return sec, rate(flops, sec, 1e12), rate(nbytes, sec, 1e9)

    def host_ms(group):
        if not hosted:
            return "-"
        return f"{sum(e['host_seconds'] for e in group) * 1e3 / steps:,.2f}"

    by_op = collections.defaultdict(list)
    for e in entries:
        by_op[e["op"]].append(e)
    ops = sorted(by_op, key=lambda o: -sum(e["seconds"] for e in by_op[o]))
    print(f"Time per op ({note}; {total * 1e3:,.1f} ms in all, "
          f"{total * 1e3 / steps:,.1f} ms per step):")
    print()
    print("| op | instructions | total ms | ms/step | share | TFLOP/s | GB/s "
          "| host ms/step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for op in ops[:a.top]:
        sec, tflops, gbs = row_stats(by_op[op])
        print(f"| {op} | {len(by_op[op])} | {sec * 1e3:,.1f} | "
              f"{sec * 1e3 / steps:,.2f} | {100 * sec / total:.1f}% | "
              f"{tflops} | {gbs} | {host_ms(by_op[op])} |")
    rest = [e for op in ops[a.top:] for e in by_op[op]]
    if rest:
        sec = sum(e["seconds"] for e in rest)
        print(f"| {len(ops) - a.top} other ops | {len(rest)} | "
              f"{sec * 1e3:,.1f} | {sec * 1e3 / steps:,.2f} | "
              f"{100 * sec / total:.1f}% | | | {host_ms(rest)} |")
    if device:
        # A step's first instruction's idle time is since the previous
        # step's end (the step's waits, the next batch's inputs).
        ran = [e for e in entries if e.get("calls", 0) > 0]
        between = ran[0].get("idle_seconds", 0.0) if ran else 0.0
        idle = sum(e.get("idle_seconds", 0.0) for e in ran[1:])
        print()
        print(f"The device waited for the host {idle * 1e3 / steps:,.2f} ms "
              f"a step between the instructions and "
              f"{between * 1e3 / steps:,.2f} ms between the steps; the host "
              f"took {host_ms(entries)} ms a step to issue the instructions.")
    scratch_line(entries, by_op)
    if a.nodes <= 0:
        return
    by_node = collections.defaultdict(list)
    for e in entries:
        node = re.sub(r"/h\.\d+/", "/h.*/", e["node"])
        by_node[(node, e["op"])].append(e)
    keys = sorted(by_node, key=lambda k: -sum(e["seconds"] for e in by_node[k]))
    print()
    print(f"Top {min(a.nodes, len(keys))} source nodes (forward and gradient "
          "instructions together, layers merged):")
    print()
    print("| node | op | instructions | ms/step | share | TFLOP/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for node, op in keys[:a.nodes]:
        sec, tflops, _ = row_stats(by_node[(node, op)])
        print(f"| {node} | {op} | {len(by_node[(node, op)])} | "
              f"{sec * 1e3 / steps:,.2f} | {100 * sec / total:.1f}% | {tflops} |")


if __name__ == "__main__":
    sys.exit(main())
