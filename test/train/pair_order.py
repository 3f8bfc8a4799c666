#!/usr/bin/env python3
"""Checks that in a pipelined step (the model.mlir of an artifact, or
smp-opt output) every pair of pipeline ranks exchanges its messages in one
order: the tags rank A sends to rank B appear in A's function in the order
B's function receives them (NCCL matches a pair's messages in queue order;
it has no tags). Prints "N pairs, M messages, in order" or the first pair
that differs, and exits 1 then. Standard library only.

    pair_order.py model.mlir
"""
import re
import sys
from collections import defaultdict

FUNC = re.compile(r"func\.func @\w+_pp(\d+)\(")
SEND = re.compile(r"smp\.send \S+ to (\d+) tag (\d+)")
RECV = re.compile(r"smp\.recv from (\d+) tag (\d+)")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    sends, recvs = defaultdict(list), defaultdict(list)  # (src, dst) -> tags
    rank = None
    for line in open(sys.argv[1]):
        m = FUNC.search(line)
        if m:
            rank = int(m.group(1))
            continue
        if rank is None:
            continue
        m = SEND.search(line)
        if m:
            sends[(rank, int(m.group(1)))].append(int(m.group(2)))
        m = RECV.search(line)
        if m:
            recvs[(int(m.group(1)), rank)].append(int(m.group(2)))
    pairs = sorted(set(sends) | set(recvs))
    for pair in pairs:
        if sends[pair] != recvs[pair]:
            print(f"ranks {pair[0]} -> {pair[1]}: sent {sends[pair]}, "
                  f"received {recvs[pair]}")
            return 1
    total = sum(len(v) for v in sends.values())
    print(f"{len(pairs)} pairs, {total} messages, in order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
