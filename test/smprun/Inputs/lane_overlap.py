#!/usr/bin/env python3
"""How much compute each side-lane instruction of a program can overlap.

Reads a program as `smp-artifact-text decode rankR.program.pb` prints it
and follows the executor's ordering rule (runtime/exec LaneHazards.h):
collectives and pipeline messages (the communication lane) and offload
copies (the copy lane) run beside the compute instructions after them
until the first one that reads what they write or writes what they read
or write (byte ranges of the operands' buffers). Prints one line a side
instruction:

  <index> <op> in-place|copy <MiB> overlaps <N> compute instructions,
  <G> GFLOP; waited for at <index>|the step end
"""
import re
import sys

COMM = {"all_reduce", "reduce_scatter", "all_gather", "send", "recv"}
COPY = {"offload", "prefetch"}


def blocks(text, name):
    """The bodies of the top-level `name { ... }` blocks."""
    out = []
    for m in re.finditer(r"^" + name + r" \{$", text, re.M):
        depth, j = 0, m.end() - 1
        while True:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                break
            j += 1
        out.append(text[m.end():j])
    return out


def field(body, key):
    m = re.search(r"^  " + key + r": (\d+)$", body, re.M)
    return int(m.group(1)) if m else 0


def lane(op):
    return "comm" if op in COMM else "copy" if op in COPY else "compute"


def main():
    text = open(sys.argv[1]).read()
    bufs = []
    for b in blocks(text, "buffers"):
        start = field(b, "offset")
        bufs.append((field(b, "pool"), start, start + field(b, "bytes")))
    insts = []
    for b in blocks(text, "instructions"):
        op = re.search(r'^  op: "(\w+)"', b, re.M).group(1)
        ins = [int(x) for x in re.findall(r"^  inputs: (\d+)$", b, re.M)]
        outs = [int(x) for x in re.findall(r"^  outputs: (\d+)$", b, re.M)]
        m = re.search(r'key: "@flops"\s*value \{\s*f: ([\d.e+-]+)', b)
        insts.append((op, ins, outs, float(m.group(1)) if m else 0.0,
                      "eval_only: true" in b))

    def meet(a, b):
        return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2]
                   for x in a for y in b)

    def conflict(a, b):
        return meet(a[1], b[1]) or meet(a[1], b[0]) or meet(a[0], b[1])

    pending, done = [], []
    for i, (op, ins, outs, flops, eval_only) in enumerate(insts):
        if eval_only:
            continue
        access = ([bufs[k] for k in ins], [bufs[k] for k in outs])
        if lane(op) != "compute":
            pending.append(dict(i=i, op=op, lane=lane(op), access=access,
                                n=0, flops=0.0, inplace=access[0] == access[1],
                                bytes=sum(bufs[k][2] - bufs[k][1]
                                          for k in outs)))
            continue
        joined = set()
        for n, p in enumerate(pending):
            if conflict(p["access"], access):
                joined |= {m for m in range(n + 1)
                           if pending[m]["lane"] == p["lane"]}
        kept = []
        for n, p in enumerate(pending):
            if n in joined:
                p["end"] = i
                done.append(p)
            else:
                p["n"] += 1
                p["flops"] += flops
                kept.append(p)
        pending = kept
    for p in pending:
        p["end"] = "the step end"
        done.append(p)
    for p in sorted(done, key=lambda p: p["i"]):
        print(f"{p['i']} {p['op']} {'in-place' if p['inplace'] else 'copy'}"
              f" {p['bytes'] / 2**20:.1f} MiB overlaps {p['n']} compute"
              f" instructions, {p['flops'] / 1e9:.1f} GFLOP; waited for at"
              f" {p['end']}")


if __name__ == "__main__":
    main()
