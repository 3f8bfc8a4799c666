#!/usr/bin/env python3
"""Runs a training command, sends it --signal once its stdout shows step
--step (with --twice: SIGTERM right after, a second signal), then prints its
stdout and stderr and "exit status N". Exits 0 (FileCheck reads the output).

    signal_at_step.py --signal INT|TERM|USR1 --step K [--twice] -- CMD...
"""
import argparse
import os
import re
import signal
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--signal", required=True)
ap.add_argument("--step", type=int, required=True)
ap.add_argument("--twice", action="store_true")
ap.add_argument("cmd", nargs=argparse.REMAINDER)
args = ap.parse_args()
cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True, start_new_session=True)
out = []
sent = False
for line in proc.stdout:
    out.append(line)
    m = re.match(r"step (\d+) loss", line)
    if m and int(m.group(1)) >= args.step and not sent:
        os.kill(proc.pid, getattr(signal, "SIG" + args.signal))
        if args.twice:
            os.kill(proc.pid, signal.SIGTERM)
        sent = True
err = proc.stderr.read()
rc = proc.wait()
sys.stdout.write("".join(out) + err)
print(f"exit status {rc if rc >= 0 else 128 - rc}")
