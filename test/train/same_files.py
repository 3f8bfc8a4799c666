#!/usr/bin/env python3
"""Checks that two folders hold the same files with the same bytes (two
runs' tensors exported by `smp-checkpoint export --format npy --state`: the
same bytes are the same bits of every value). Prints "N files
bit-identical", or "FAILED: K of N files differ: NAME, ..." naming the first
eight (or the files only one folder has) and exits 1. Standard library only.

    same_files.py DIR_A DIR_B
"""
import os
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = sys.argv[1], sys.argv[2]
    names_a, names_b = set(os.listdir(a)), set(os.listdir(b))
    if names_a != names_b:
        only = sorted(names_a ^ names_b)
        print(f"FAILED: {len(only)} file(s) in one folder only: "
              + ", ".join(only[:8]))
        return 1
    if not names_a:
        print(f"FAILED: no files in {a}")
        return 1
    differ = []
    for name in sorted(names_a):
        with open(os.path.join(a, name), "rb") as fa, \
                open(os.path.join(b, name), "rb") as fb:
            if fa.read() != fb.read():
                differ.append(name)
    if differ:
        print(f"FAILED: {len(differ)} of {len(names_a)} files differ: "
              + ", ".join(differ[:8]))
        return 1
    print(f"{len(names_a)} files bit-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
