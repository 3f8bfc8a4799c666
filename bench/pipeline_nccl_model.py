#!/usr/bin/env python3
"""A timed model of a compiled pipeline artifact's ranks on GPUs with NCCL.

Each rank has a compute stream (its instructions in order, each taking the
roofline time of its `@flops` and `@bytes` at H100 rates plus a launch) and
communication streams on which NCCL runs its groups one after another
(runtime/exec/lib/ExecutorLanes.cpp,
runtime/comm/lib/nccl/NcclCommunicator.cpp): a group is queued when the
host reaches its receive (or, for a send at once, the send) and starts once
the compute queued before it has run and its stream's previous group has
ended; a message moves once the groups of its send and of its receive have
both started, and a group ends when all of its messages have moved; the
compute after a receive waits for the receive's group.

Three rows per artifact:
  pipes     as smprun's CUDA backend runs them since 2026-12-07
            (openPipes): a communicator and a stream for each (from, to)
            pair of ranks, every send at once and every receive alone on
            its pair's stream;
  one-stream  every group on the rank's one communication stream, each
            send with the rank's next operation (how the runtime queued
            sends before 2026-12-06; from then to its pipes the compiler
            chose per send: at once, with the next operation or held);
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


def attr(block, key, kind):
    m = re.search(r'key: "' + key + r'"\s*value \{\s*' + kind +
                  r': (-?[\d.e+]+)', block)
    return float(m.group(1)) if m else None


def load(smpx, tool):
    """Per rank: its training run's events, ('X', seconds), ('S', message,
    tag, bytes), ('R', message, tag) or ('C',)."""
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
                    events.append(("S", pair + (n,), tag,
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


def stream_of(policy, event):
    """The communication stream a send or receive runs on: the rank's one
    stream, or with `pipes` the stream of its (from, to) pair."""
    return event[1][:2] if policy == "pipes" else 0


def groups_of(events, policy):
    """The rank's groups in issue order: (event index, sends, receive,
    stream)."""
    posted, groups = {}, []

    def take(stream):
        taken = posted.get(stream, [])
        posted[stream] = []
        return taken

    for i, e in enumerate(events):
        if e[0] == "S" and policy != "ideal":
            stream = stream_of(policy, e)
            posted.setdefault(stream, []).append(e[1])
            if policy == "pipes":  # at once, alone on its pair's stream
                groups.append((i, take(stream), None, stream))
        elif e[0] == "R":
            stream = stream_of(policy, e)
            groups.append((i, take(stream), e[1], stream))
        elif e[0] == "C":
            groups.append((i, take(0), None, 0))
    for stream, queue in list(posted.items()):
        if queue:
            groups.append((len(events), take(stream), None, stream))
    return groups


def simulate(ranks, policy, scale):
    n = len(ranks)
    groups = [groups_of(e, policy) for e in ranks]
    size = {e[1]: e[3] for ev in ranks for e in ev if e[0] == "S"}
    where = {}  # message -> {"S": (rank, group), "R": (rank, group)}
    queues = [{} for _ in range(n)]  # stream -> its groups in issue order
    at = [{} for _ in range(n)]      # event index -> the groups it issues
    for r, gs in enumerate(groups):
        for g, (i, sends, recv, stream) in enumerate(gs):
            for m in sends:
                where.setdefault(m, {})["S"] = (r, g)
            if recv:
                where.setdefault(recv, {})["R"] = (r, g)
            queues[r].setdefault(stream, []).append(g)
            at[r].setdefault(i, []).append(g)
    start, end, ready = {}, {}, {}
    cur, clock = [0] * n, [0.0] * n  # next event, compute stream's end
    head = [{s: 0 for s in q} for q in queues]  # each stream's next group
    free = [{} for _ in range(n)]    # each stream's end
    issued = [dict() for _ in range(n)]  # group -> compute end at its issue

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
            for stream, queue in queues[r].items():
                while head[r][stream] < len(queue):
                    g = queue[head[r][stream]]
                    if g not in issued[r]:
                        break
                    if (r, g) not in start:
                        start[(r, g)] = max(free[r].get(stream, 0.0),
                                            issued[r][g])
                        progress = True
                    _, sends, recv, _ = groups[r][g]
                    times = [moved(r, g, m, "R") for m in sends]
                    if recv:
                        times.append(moved(r, g, recv, "S"))
                    if None in times:
                        break
                    end[(r, g)] = free[r][stream] = max([start[(r, g)]] + times)
                    head[r][stream] += 1
                    progress = True
            while True:
                for g in at[r].get(cur[r], []):
                    if g not in issued[r]:
                        issued[r][g] = clock[r]
                        progress = True
                if cur[r] >= len(ranks[r]):
                    break
                e = ranks[r][cur[r]]
                if e[0] == "X":
                    # Compute after a receive waits for it.
                    receives = [g for g in issued[r] if groups[r][g][2]]
                    if any((r, g) not in end for g in receives):
                        break
                    last = max([end[(r, g)] for g in receives] or [0.0])
                    clock[r] = max(clock[r], last) + e[1] * scale
                elif e[0] == "S":
                    ready[e[1]] = clock[r]
                cur[r] += 1
                progress = True
    done = all(cur[r] >= len(ranks[r]) for r in range(n)) and \
        len(end) == sum(len(g) for g in groups)
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
    for policy in ("pipes", "one-stream", "ideal"):
        done, step, busy = simulate(ranks, policy, args.compute_scale)
        bubble = 1 - sum(busy) / (len(busy) * step) if step else 0
        print(f"{policy:10s} finishes={done} step={step * 1e3:.3f} ms "
              f"compute/rank={[round(b * 1e3, 3) for b in busy]} "
              f"bubble={bubble:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
