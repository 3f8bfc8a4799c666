#!/usr/bin/env python3
"""Runs a training command, sends it --signal once its stdout shows step
--step (with --twice: SIGTERM right after, a second signal), then prints its
stdout and stderr and "exit status N". Exits 0 (FileCheck reads the output).

    signal_at_step.py --signal INT|TERM|USR1 --step K [--twice] -- CMD...
"""
import argparse
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "train"))
from stop_and_resume import run_signalled  # test/train

ap = argparse.ArgumentParser()
ap.add_argument("--signal", required=True)
ap.add_argument("--step", type=int, required=True)
ap.add_argument("--twice", action="store_true")
ap.add_argument("cmd", nargs=argparse.REMAINDER)
args = ap.parse_args()
cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd


def send(proc):
    os.kill(proc.pid, getattr(signal, "SIG" + args.signal))
    if args.twice:
        os.kill(proc.pid, signal.SIGTERM)


out, err, rc, _ = run_signalled(cmd, args.step, send)
sys.stdout.write(out + err)
print(f"exit status {rc if rc >= 0 else 128 - rc}")
