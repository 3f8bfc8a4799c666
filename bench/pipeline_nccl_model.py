#!/usr/bin/env python3
"""A timed model of a compiled pipeline artifact's ranks on GPUs with NCCL.

Each rank has a compute stream (its instructions in order, each taking the
roofline time of its `@flops` and `@bytes` at H100 rates plus a launch) and
one communication stream on which NCCL runs its groups one after another,
as smprun's CUDA backend does (runtime/exec/lib/ExecutorLanes.cpp,
runtime/comm/lib/nccl/NcclCommunicator.cpp): a group is queued when the
host reaches its receive (or, for a send at once, the send) and starts once
the compute queued before it has run and the rank's previous group has
ended; a message moves once the groups of its send and of its receive have
both started, and a group ends when all of its messages have moved; the
compute after a receive waits for the receive's group. The groups are
made from the sends' join_tag as NcclCommunicator makes them: at once
(-3), with the next operation (none), held for a receive's tag or the
step's end (MessageGroups.cpp).

Three rows per artifact:
  artifact  the groups as compiled;
  late      every send at once turned into one with the next operation
            (how the runtime queued every send before 2026-12-07; holds
            kept);
  ideal     sends that never wait (posted at once, each message moving as
            soon as its bytes exist: MPI with unbounded buffers), the
            schedule's own bubble.

    pipeline_nccl_model.py MODEL.smpx [--compute-scale S] [--bin DIR]

Prints, per row, whether every rank finishes, the step's time, each rank's
compute time and the bubble (1 - compute / (ranks x step)). A model, not
a measurement: it has no NCCL kernel sharing SMs with compute, no host
falling behind, one link rate (100 GB/s, 10 us a message).
Standard library only; decodes with smp-artifact-text.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEAK, BANDWIDTH, LAUNCH = 989e12, 3.35e12, 4e-6  # H100 SXM bf16, HBM3
LINK, LATENCY = 100e9, 10e-6
AT_ONCE, NEXT = -3, -2


def attr(block, key, kind):
    m = re.search(r'key: "' + key + r'"\s*value \{\s*' + kind +
                  r': (-?[\d.e+]+)', block)
    return float(m.group(1)) if m else None


def load(smpx, tool):
    """Per rank: its training run's events, ('X', seconds), ('S', message,
    join, tag, bytes), ('R', message, tag) or ('C',)."""
    ranks = []
    paths = glob.glob(os.path.join(smpx, "rank*.program.pb"))
    for r in range(len(paths)):
        text = subprocess.check_output(
            [tool, "decode", os.path.join(smpx, f"rank{r}.program.pb")],
            text=True)
        sent, received, events = {}, {}, []
        for b in re.findall(r'\ninstructions \{(.*?)\n\}', text, re.S):
            if "eval_only: true" in b:
                continue
            op = re.search(r'op: "(\w+)"', b).group(1)
            if op in ("send", "recv"):
                peer, tag = int(attr(b, "peer", "i")), int(attr(b, "tag", "i"))
                pair = (r, peer) if op == "send" else (peer, r)
                count = sent if op == "send" else received
                n = count.get(pair, 0)
                count[pair] = n + 1
                if op == "send":
                    join = attr(b, "join_tag", "i")
                    events.append(("S", pair + (n,),
                                   NEXT if join is None else int(join), tag,
                                   (attr(b, "@bytes", "f") or 0) / 2))
                else:
                    events.append(("R", pair + (n,), tag))
            elif op in ("all_reduce", "all_gather", "reduce_scatter"):
                events.append(("C",))
            else:
                flops = attr(b, "@flops", "f") or 0
                nbytes = attr(b, "@bytes", "f") or 0
                events.append(("X", LAUNCH + max(flops / PEAK,
                                                 nbytes / BANDWIDTH)))
        ranks.append(events)
    return ranks


def groups_of(events, policy):
    """The rank's groups in issue order: (event index, sends, receive)."""
    posted, groups = [], []

    def take(kind, tag):
        taken, left, waiting = [], [], set()
        for m, join in posted:
            nxt = join == AT_ONCE or (kind != "once" and join == NEXT)
            if kind == "end" or (m[1] not in waiting and
                                 (nxt or (tag is not None and join == tag))):
                taken.append(m)
            else:
                waiting.add(m[1])
                left.append((m, join))
        posted[:] = left
        return taken

    for i, e in enumerate(events):
        if e[0] == "S" and policy != "ideal":
            join = NEXT if policy == "late" and e[2] == AT_ONCE else e[2]
            posted.append((e[1], join))
            if join == AT_ONCE:
                groups.append((i, take("once", None), None))
        elif e[0] == "R":
            groups.append((i, take("recv", e[2]), e[1]))
        elif e[0] == "C":
            groups.append((i, take("coll", None), None))
    if posted:
        groups.append((len(events), take("end", None), None))
    return groups


def simulate(ranks, policy, scale):
    n = len(ranks)
    groups = [groups_of(e, policy) for e in ranks]
    size = {e[1]: e[4] for ev in ranks for e in ev if e[0] == "S"}
    where = {}  # message -> {"S": (rank, group), "R": (rank, group)}
    for r, gs in enumerate(groups):
        for g, (_, sends, recv) in enumerate(gs):
            for m in sends:
                where.setdefault(m, {})["S"] = (r, g)
            if recv:
                where.setdefault(recv, {})["R"] = (r, g)
    at = [{g[0]: k for k, g in enumerate(gs)} for gs in groups]
    start, end, ready = {}, {}, {}
    cur, clock = [0] * n, [0.0] * n       # next event, compute stream's end
    nextg, comm = [0] * n, [0.0] * n      # next group, comm stream's end
    issued = [dict() for _ in range(n)]   # group -> compute end at its issue
    received = [0.0] * n                  # the latest receive's group end

    def moved(r, g, m, side):
        if policy == "ideal" and side == "S":
            return None if m not in ready else ready[m] + size[m] / LINK + LATENCY
        peer = where[m][side]
        if peer not in start:
            return None
        return max(start[(r, g)], start[peer]) + size[m] / LINK + LATENCY

    progress = True
    while progress:
        progress = False
        for r in range(n):
            while True:
                g = nextg[r]
                if g < len(groups[r]) and g in issued[r] and (r, g) not in start:
                    start[(r, g)] = max(comm[r], issued[r][g])
                    progress = True
                if (r, g) in start and (r, g) not in end:
                    _, sends, recv = groups[r][g]
                    t = start[(r, g)]
                    times = [moved(r, g, m, "R") for m in sends]
                    if recv:
                        times.append(moved(r, g, recv, "S"))
                    if None not in times:
                        end[(r, g)] = max([t] + times)
                        comm[r] = end[(r, g)]
                        if recv:
                            received[r] = max(received[r], comm[r])
                        nextg[r] += 1
                        progress = True
                        continue
                if cur[r] in at[r] and at[r][cur[r]] not in issued[r]:
                    issued[r][at[r][cur[r]]] = clock[r]
                    progress = True
                    continue
                if cur[r] >= len(ranks[r]):
                    break
                e = ranks[r][cur[r]]
                if e[0] == "X":
                    if any(groups[r][k][2] and (r, k) not in end
                           for k in issued[r]):
                        break  # compute after a receive waits for it
                    clock[r] = max(clock[r], received[r]) + e[1] * scale
                elif e[0] == "S":
                    ready[e[1]] = clock[r]
                cur[r] += 1
                progress = True
    done = all(cur[r] >= len(ranks[r]) and nextg[r] >= len(groups[r])
               for r in range(n))
    step = max(max([clock[r]] + [end[k] for k in end if k[0] == r])
               for r in range(n))
    busy = [sum(e[1] * scale for e in ev if e[0] == "X") for ev in ranks]
    return done, step, busy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("smpx")
    ap.add_argument("--compute-scale", type=float, default=1.0,
                    help="multiply every compute instruction's time (a "
                    "small model's kernels at a large model's share of "
                    "the step)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    ranks = load(args.smpx, os.path.join(args.bin, "smp-artifact-text"))
    for policy in ("artifact", "late", "ideal"):
        done, step, busy = simulate(ranks, policy, args.compute_scale)
        bubble = 1 - sum(busy) / (len(busy) * step) if step else 0
        print(f"{policy:8s} finishes={done} step={step * 1e3:.3f} ms "
              f"compute/rank={[round(b * 1e3, 3) for b in busy]} "
              f"bubble={bubble:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
