#!/usr/bin/env python3
"""Stops a training run with a real signal at a random step, resumes it with
the command it printed, and checks the result against an uninterrupted run.

    stop_and_resume.py --signal INT|TERM|USR1
        [--target smprun|mpirun|scancel:JOB]
        [--seed S] [--min-step A --max-step B] --reference FULL.jsonl
        [--reference-onnx FULL.onnx] -- SMPRUN-COMMAND...

SMPRUN-COMMAND must train with --metrics M, --checkpoint-dir D and
--save-onnx F (when --reference-onnx is given). The driver starts it in its
own process group, waits until its stdout shows step K (K drawn from
[A, B] with seed S, printed), sends the signal to the process (--target
smprun) or to the mpirun it runs under (--target mpirun: the newest process
named mpirun in the group), or through Slurm (--target scancel:JOB:
`scancel --signal=SIG` of the job named JOB, srun -J JOB), and then checks
that
  - it exits with 128 + the signal (SIGUSR1 relayed by smprun -n reports
    the signal smprun got), after a step >= K, having said
    "stopped by ... after step J of N; checkpoint D/step-<J>" and
    "resume with: CMD";
  - D/latest names step J and the metrics hold steps 1..J;
  - CMD (run as printed, through the shell) exits 0 and its metrics equal
    the reference's bit for bit (every step's loss and gradient norm), and
    the trained model's sha256 equals the reference's.
Prints "stopped at step J, resumed: N steps bit-identical" and exits 0, or
prints what differs and exits 1. Standard library only.
"""
import argparse
import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import time

from same_losses import read as read_metrics  # this directory


def fail(msg):
    print("FAILED: " + msg)
    sys.exit(1)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def option(cmd, flag):
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


def mpirun_in_group(pgid):
    """The newest process named mpirun whose process group is `pgid`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if name == "mpirun" and int(fields[2]) == pgid:
            found.append(int(pid))
    return max(found) if found else None


def run_signalled(cmd, k, send):
    """Runs `cmd` in its own process group, collecting its output, and calls
    send(proc) once, when its stdout first shows step `k` or later. Returns
    (stdout, stderr, exit status, whether send was called)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    out, sent = [], False
    for line in proc.stdout:
        out.append(line)
        m = re.match(r"step (\d+) loss", line)
        if m and int(m.group(1)) >= k and not sent:
            send(proc)
            sent = True
    err = proc.stderr.read()
    return "".join(out), err, proc.wait(), sent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--signal", required=True, choices=["INT", "TERM", "USR1"])
    ap.add_argument("--target", default="smprun")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--min-step", type=int, default=3)
    ap.add_argument("--max-step", type=int, default=30)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--reference-onnx")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    k = random.Random(seed).randint(args.min_step, args.max_step)
    print(f"seed {seed}: signal SIG{args.signal} at step {k}")
    sig = getattr(signal, "SIG" + args.signal)
    metrics, ckpt = option(cmd, "--metrics"), option(cmd, "--checkpoint-dir")
    steps = int(option(cmd, "--steps"))

    def send(proc):
        target = proc.pid
        if args.target.startswith("scancel:"):
            job = subprocess.run(["squeue", "-h", "-n", args.target[8:],
                                  "-o", "%i"], capture_output=True,
                                 text=True).stdout.split()
            if len(job) != 1:
                fail(f"squeue found jobs {job} named {args.target[8:]}")
            subprocess.run(["scancel", "--signal=" + args.signal, job[0]],
                           check=True)
            return
        if args.target == "mpirun":
            target = mpirun_in_group(proc.pid)
            if target is None:
                fail("no mpirun in the run's process group")
        os.kill(target, sig)

    out, err, rc, sent = run_signalled(cmd, k, send)
    if not sent:
        fail(f"the run ended before step {k} (exit {rc}):\n{out}{err}")
    # What smprun reports: the signal smprun got (SIGUSR1 sent to mpirun is
    # what the ranks got).
    if rc == 0:
        fail(f"the run finished all {steps} steps before the signal sent at "
             f"step {k} reached it: give the run more --steps")
    if rc != 128 + sig:
        fail(f"exit status {rc}, expected {128 + sig}:\n{err}")
    m = re.search(r"smprun: stopped by (.*) after step (\d+) of (\d+); "
                  r"checkpoint (\S+)\n", err)
    if not m:
        fail("no 'stopped by ... after step J of N; checkpoint' line:\n" + err)
    stopped = int(m.group(2))
    if stopped < k or stopped >= steps or int(m.group(3)) != steps:
        fail(f"stopped after step {stopped} of {m.group(3)}, signal at {k}")
    if m.group(4) != os.path.join(ckpt, "step-%08d" % stopped):
        fail("checkpoint " + m.group(4))
    with open(os.path.join(ckpt, "latest")) as f:
        if f.read().strip() != "step-%08d" % stopped:
            fail("latest is not the stop step's checkpoint")
    if sorted(read_metrics(metrics)) != list(range(1, stopped + 1)):
        fail("the stopped run's metrics do not hold steps 1.." + str(stopped))
    if f"step {stopped} loss" not in out or f"step {stopped + 1} loss" in out:
        fail(f"stdout does not end at step {stopped}:\n{out}")
    r = re.search(r"smprun: resume with: (.*)\n", err)
    if not r:
        fail("no 'resume with:' line:\n" + err)
    resumed = subprocess.run(r.group(1), shell=True, capture_output=True,
                             text=True)
    if resumed.returncode != 0:
        fail(f"the resume command exited {resumed.returncode}:\n"
             f"{r.group(1)}\n{resumed.stderr}")
    want, got = read_metrics(args.reference), read_metrics(metrics)
    if sorted(got) != sorted(want):
        fail(f"steps {sorted(got)} != {sorted(want)}")
    for s in sorted(want):
        if want[s] != got[s]:
            fail(f"step {s}: loss/grad_norm {got[s]} != {want[s]}")
    if args.reference_onnx:
        if sha256(option(cmd, "--save-onnx")) != sha256(args.reference_onnx):
            fail("the trained model differs from the uninterrupted run's")
    print(f"stopped at step {stopped}, resumed: {len(want)} steps "
          f"bit-identical" + (", same trained model" if args.reference_onnx
                              else ""))


if __name__ == "__main__":
    main()
