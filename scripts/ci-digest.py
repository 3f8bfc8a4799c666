#!/usr/bin/env python3
"""Prints a short digest of the failed tests of a ctest run, for the end of
a CI log (scripts/run-tests.sh calls it when ctest fails).

A CI log is often read only at its head and tail, and a failed lit test's
output (its whole shell trace, FileCheck's input dump) sits in the middle.
This prints, per failed lit test and per failed GoogleTest, the lines that
say why: errors, FAILED markers, crashes, FileCheck's complaint and the
lines after it, and the last lines of the test's output.

    ci-digest.py build/Testing/Temporary/LastTest.log [--lines N]
Standard library only.
"""
import argparse
import re
import sys

# Lines worth showing wherever they occur in a failed test's output.
TELLING = re.compile(
    r"error:|FAILED|Failure|Assertion|Segmentation|core dumped|Killed|"
    r"Aborted|No space left|Bus error|Out of memory|oom|Traceback|"
    r"timed out|mpirun (noticed|was unable|detected)|ORTE|PMIX|not ok|"
    # compare_losses.py's rows past tolerance, same_losses.py's differences
    r"<-- |step \d+: \(",
    re.IGNORECASE)
LIT_START = re.compile(r"\*{20} TEST '(.+)' FAILED \*{20}")
LIT_END = re.compile(r"^\*{20}$")


def lit_failures(lines):
    """(name, body lines) of every failed lit test in the log."""
    out, name, body = [], None, []
    for line in lines:
        line = line[2:] if line.startswith("> ") else line
        m = LIT_START.search(line)
        if m:
            name, body = m.group(1), []
            continue
        if name is not None:
            if LIT_END.match(line.strip()):
                out.append((name, body))
                name = None
            else:
                body.append(line)
    if name is not None:
        out.append((name, body))
    return out


def telling_lines(body, limit):
    """The telling lines of one failure (a FileCheck error with the three
    lines after it), without repeats, then its last lines."""
    shown, seen = [], set()
    i = 0
    while i < len(body) and len(shown) < limit:
        line = body[i].rstrip()
        # The shell trace of a RUN line repeats its text: skip it.
        if TELLING.search(line) and not line.startswith("+ ") \
                and "# RUN: at line" not in line and line not in seen:
            seen.add(line)
            shown.append(line[:400])
            if "FileCheck" in line or line.lstrip().startswith("<stdin>") \
                    or re.search(r"\.test:\d+:\d+: error:", line):
                for extra in body[i + 1:i + 4]:
                    shown.append("    " + extra.rstrip()[:400])
        i += 1
    tail = [l.rstrip()[:400] for l in body[-8:] if l.strip()]
    return shown, tail


def gtest_failures(lines):
    """The GoogleTest failure lines ("[  FAILED  ]" and the file:line
    "Failure" messages with the line after each)."""
    out = []
    for i, line in enumerate(lines):
        if re.search(r"\[  FAILED  \]|: Failure$", line):
            out.append(line.rstrip()[:400])
            if line.rstrip().endswith("Failure"):
                out.extend("    " + l.rstrip()[:400] for l in lines[i + 1:i + 3])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--lines", type=int, default=40,
                    help="telling lines shown per failed test (default 40)")
    args = ap.parse_args()
    try:
        with open(args.log, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        print(f"ci-digest: {e}", file=sys.stderr)
        return 1
    print("==== digest of the failed tests (scripts/ci-digest.py) ====")
    for name, body in lit_failures(lines):
        shown, tail = telling_lines(body, args.lines)
        print(f"---- lit: {name}")
        for l in shown:
            print("  " + l)
        print("  (last lines)")
        for l in tail:
            print("  " + l)
    # A test ctest stopped at its TIMEOUT has no lit sections to show.
    timeouts = [l.strip() for l in lines if l.rstrip().endswith("(Timeout)")]
    if timeouts:
        print("---- ctest timeouts")
        for l in dict.fromkeys(timeouts):
            print("  " + l[:400])
    g = gtest_failures(lines)
    if g:
        print("---- GoogleTest")
        for l in g[:args.lines]:
            print("  " + l)
    print("==== end of digest ====")
    return 0


if __name__ == "__main__":
    sys.exit(main())
