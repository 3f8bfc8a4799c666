#!/usr/bin/env python3
"""Replays a structural mutation corpus through smpc and smprun and
classifies what happens (issue 13; docs/threat-model.md, "Fuzzing").

    python3 test/fuzz/replay_mutations.py --build build [--count 2000]
        [--seed 1] [--timeout 30] [--mem-mb 4096] [--keep DIR] [--max-fail 0]

Stdlib only (no onnx, no torch, no numpy): models are written by
onnx_writer.py, which writes what the onnx package would refuse. Each
input is one run of `smpc compile` (hostile models) or `smprun` (mutated
artifacts and data files) in a sandbox:

    ROOT/outside/      secrets that no run may open (watched with inotify)
    ROOT/box/          the sandbox; its own files are secrets too
    ROOT/box/model/    the model and its external data (smpc reads here)
    ROOT/box/art/      the artifact (smpc -o; smprun reads)
    ROOT/box/data/     smprun --data
    ROOT/box/out/      smprun --output-dir
    ROOT/box/cwd/      the working directory

Outcome classes: clean-error (exit != 0 with a one-line "smpc: error:" /
"smprun: error:"), success (exit 0), unclear-error (exit != 0 without
one), crash (killed by a signal), sanitizer (an ASan/UBSan/LSan report),
hang (past --timeout), escape (a file created, changed or opened outside
the directories the run may use), over-cap (out of memory, bad_alloc, an
allocation the sanitizer refused, or peak RSS over --mem-mb). Exit status
1 when a crash, sanitizer report, hang, escape or over-cap is found (more
than --max-fail of them).
"""

import argparse
import collections
import ctypes
import os
import random
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_cases import (MODEL_CLASSES, RUN_CLASSES, Bases, decode,  # noqa: E402
                          parse_specs, rmtree, write_data, write_npy)


SECRET = b"SMP-SECRET-DO-NOT-READ-0123456789abcdef"


# ---- inotify: reads and writes outside the sandbox's allowed dirs ----------

class Watch:
    IN_ACCESS, IN_MODIFY, IN_OPEN, IN_CREATE = 0x1, 0x2, 0x20, 0x100
    IN_MOVED_TO, IN_DELETE, IN_ISDIR = 0x80, 0x200, 0x40000000

    def __init__(self, dirs):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        self.wd = {}
        mask = (self.IN_ACCESS | self.IN_MODIFY | self.IN_OPEN | self.IN_CREATE |
                self.IN_MOVED_TO | self.IN_DELETE)
        for d in dirs:
            w = self.libc.inotify_add_watch(self.fd, d.encode(), mask)
            if w < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch " + d)
            self.wd[w] = d

    def events(self):
        """(dir, name, mask) of the events since the last call, excluding
        directories being listed or opened (a path lookup is not a read)."""
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            i = 0
            while i < len(buf):
                wd, mask, _cookie, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode(errors="replace")
                i += 16 + n
                if not mask & self.IN_ISDIR:
                    out.append((self.wd.get(wd, "?"), name, mask))


# ---- the sandbox ------------------------------------------------------------

class Sandbox:
    def __init__(self, root):
        self.root = root
        self.outside = os.path.join(root, "outside")
        self.box = os.path.join(root, "box")
        os.makedirs(self.outside)
        os.makedirs(self.box)
        for d in (self.outside, self.box):
            with open(os.path.join(d, "secret.bin"), "wb") as f:
                f.write(SECRET * 64)
            write_npy(os.path.join(d, "secret_in.npy"), "<f4", [2, 4],
                      struct.pack("<8f", *([1234.5] * 8)))
        self.watch = Watch([self.outside, self.box])

    def reset(self):
        for sub in ("model", "art", "data", "out", "cwd"):
            p = os.path.join(self.box, sub)
            if os.path.lexists(p):
                rmtree(p)
            os.makedirs(p)
        self.watch.events()  # drop what the reset did
        self.before = snapshot(self.root, self.allowed_writes())

    def allowed_writes(self):
        return [os.path.join(self.box, d) for d in ("art", "out", "cwd", "data", "model")]

    def path(self, sub, name=""):
        return os.path.join(self.box, sub, name) if name else os.path.join(self.box, sub)

    def escapes(self):
        found = []
        for d, name, mask in self.watch.events():
            # In box/ itself only its subdirectories are made by the sandbox;
            # outside/ may not be touched at all.
            found.append(f"{'opened' if mask & (Watch.IN_OPEN | Watch.IN_ACCESS) else 'changed'} "
                         f"{os.path.relpath(os.path.join(d, name), self.root)}")
        after = snapshot(self.root, self.allowed_writes())
        for p in sorted(set(after) - set(self.before)):
            found.append("created " + os.path.relpath(p, self.root))
        for p in sorted(set(self.before) - set(after)):
            found.append("removed " + os.path.relpath(p, self.root))
        for p in sorted(set(after) & set(self.before)):
            if after[p] != self.before[p]:
                found.append("changed " + os.path.relpath(p, self.root))
        return found


def snapshot(root, skip):
    """path -> (size, mtime) of every entry under root but the skipped dirs."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skip]
        for n in filenames + dirnames:
            p = os.path.join(dirpath, n)
            try:
                st = os.lstat(p)
                out[p] = (st.st_size, st.st_mtime_ns if stat.S_ISREG(st.st_mode) else 0)
            except FileNotFoundError:
                pass
    return out


# ---- running and classifying ---------------------------------------------------

SAN_RE = re.compile(rb"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|"
                    rb"ERROR: UndefinedBehaviorSanitizer")
OOM_RE = re.compile(rb"out of memory|std::bad_alloc|allocation-size-too-big|"
                    rb"requested allocation size|rss limit exceeded|Cannot allocate memory|"
                    rb"exceeds maximum supported size")


def run(argv, cwd, timeout, mem_mb, sanitized):
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (f"allow_user_poisoning=0:detect_leaks=1:allocator_may_return_null=0:hard_rss_limit_mb={mem_mb}:"
                           f"max_allocation_size_mb={mem_mb // 2}:handle_abort=1")
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    env["OMP_NUM_THREADS"] = "1"

    def limits():
        os.nice(10)
        if not sanitized:  # ASan reserves terabytes of address space
            lim = (mem_mb << 20) * 2
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.setsid()
    start = time.time()
    with tempfile.TemporaryFile() as errf:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                             stderr=errf, preexec_fn=limits)
        hung, nap = False, 0.001
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.time() - start > timeout and not hung:
                os.killpg(p.pid, signal.SIGKILL)
                hung = True
            time.sleep(nap)
            nap = min(nap * 2, 0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        if hung:  # what the group left behind
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        errf.seek(0)
        err = errf.read()
    return p.returncode, err, hung, time.time() - start, ru.ru_maxrss


def classify(rc, err, hung, escapes, tool):
    if escapes:
        return "escape"
    if hung:
        return "hang"
    if SAN_RE.search(err):
        return "sanitizer"
    if OOM_RE.search(err):
        return "over-cap"
    if rc < 0:
        return "crash"
    if rc == 0:
        return "success"
    lines = [l for l in err.splitlines() if l.startswith(tool.encode() + b": error:")]
    return "clean-error" if lines else "unclear-error"


BAD = ("crash", "sanitizer", "hang", "escape", "over-cap")


def self_check(sb):
    """The detectors detect: a read outside, a write outside, a hang, a
    signal (else a clean table would prove nothing)."""
    checks = [(["cat", os.path.join(sb.outside, "secret.bin")], "escape"),
              (["cat", os.path.join(sb.box, "data", "..", "secret_in.npy")], "escape"),
              (["touch", os.path.join(sb.box, "escaped_out.npy")], "escape"),
              (["sleep", "5"], "hang"),
              (["sh", "-c", "kill -SEGV $$"], "crash"),
              (["sh", "-c", "echo 'smpc: error: x: bad' >&2; exit 1"], "clean-error"),
              (["sh", "-c", "echo 'runtime error: signed integer overflow' >&2; exit 1"],
               "sanitizer")]
    for argv, want in checks:
        sb.reset()
        rc, err, hung, _, _ = run(argv, sb.path("cwd"), 1, 1024, False)
        got = classify(rc, err, hung, sb.escapes(), "smpc")
        if got != want:
            sys.exit(f"replay_mutations: self-check failed: {argv} was {got}, not {want}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="build dir with bin/smpc, bin/smprun")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--mem-mb", type=int, default=4096)
    ap.add_argument("--sanitized", action="store_true",
                    help="the tools are built with ASan (no RLIMIT_AS)")
    ap.add_argument("--keep", help="copy the inputs of bad outcomes here")
    ap.add_argument("--max-fail", type=int, default=0)
    ap.add_argument("--classes", help="comma-separated subset of the classes")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    bindir = os.path.join(os.path.abspath(args.build), "bin")
    tools = {t: os.path.join(bindir, t) for t in ("smpc", "smprun", "smp-artifact-text")}
    for t in tools.values():
        if not os.access(t, os.X_OK):
            sys.exit(f"replay_mutations: {t} not found (build it first)")
    classes = list(MODEL_CLASSES) + list(RUN_CLASSES)
    if args.classes:
        classes = [c for c in args.classes.split(",") if c]
    rng = random.Random(args.seed)
    table = collections.defaultdict(collections.Counter)
    bad = []
    peak = 0
    slow = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="smp-replay-") as root:
        sb = Sandbox(os.path.join(root, "sb"))
        self_check(sb)
        bases = Bases(tools, root)
        for i in range(args.count):
            cls = classes[i % len(classes)]
            sb.reset()
            crng = random.Random(rng.getrandbits(64))
            steps = []
            if cls in MODEL_CLASSES:
                made = MODEL_CLASSES[cls](crng, sb)
                runs = made[1] == "run" if isinstance(made, tuple) else crng.random() < 0.3
                data = made[0] if isinstance(made, tuple) else made
                mpath = sb.path("model", "model.onnx")
                with open(mpath, "wb") as f:
                    f.write(data)
                steps.append(("smpc", [tools["smpc"], "compile", mpath, "-o", sb.path("art")]))
            else:
                art, _ = RUN_CLASSES[cls](crng, sb, bases)
                runs = True
            results = []
            for tool, argv in steps:
                results.append((tool, argv) + run(argv, sb.path("cwd"), args.timeout,
                                                  args.mem_mb, args.sanitized))
            if runs and (not results or results[-1][2] == 0):
                art = sb.path("art")
                text = decode(tools, os.path.join(art, "manifest.pb"))
                if text is not None or cls in RUN_CLASSES:
                    if cls in MODEL_CLASSES:
                        write_data(sb, parse_specs(text))
                    training = text is not None and "training {" in text
                    argv = [tools["smprun"], art, "--data", sb.path("data")]
                    argv += ["--steps", "2"] if training else ["--output-dir", sb.path("out")]
                    if text is None and crng.random() < 0.5:
                        argv = argv[:4] + ["--steps", "1"]
                    results.append(("smprun", argv) + run(argv, sb.path("cwd"), args.timeout,
                                                          args.mem_mb, args.sanitized))
            escapes = sb.escapes()
            worst = None
            for tool, argv, rc, err, hung, secs, rss in results:
                peak = max(peak, rss)
                slow.append((secs, i, cls, tool))
                c = classify(rc, err, hung, escapes, tool)
                if rss > args.mem_mb * 1024 and c not in BAD:
                    c = "over-cap"
                table[f"{cls} ({tool})"][c] += 1
                table["total"][c] += 1
                if c in BAD or (args.verbose and c == "unclear-error"):
                    worst = (tool, c, rc, err, escapes, argv)
            if worst:
                tool, c, rc, err, escapes, argv = worst
                msg = (err.decode(errors="replace").strip().splitlines() or [""])
                print(f"[{i}] {cls}: {tool} {c} rc={rc} {escapes or ''} {msg[-1][:300]}",
                      file=sys.stderr)
                if worst[1] in BAD:
                    bad.append((i, cls, c))
                    if args.keep:
                        dst = os.path.join(args.keep, f"{i:05d}-{cls}-{c}")
                        shutil.copytree(sb.box, dst, symlinks=True,
                                        ignore=shutil.ignore_patterns("secret*"))
                        open(os.path.join(dst, "argv.txt"), "w").write(repr(argv) + "\n")
    cols = ["success", "clean-error", "unclear-error", "crash", "sanitizer", "hang", "escape",
            "over-cap"]
    width = max(len(k) for k in table) + 2
    print("class".ljust(width) + "".join(c.rjust(14) for c in ["runs"] + cols))
    for k in sorted(table, key=lambda k: (k == "total", k)):
        row = table[k]
        print(k.ljust(width) + str(sum(row.values())).rjust(14) +
              "".join(str(row[c]).rjust(14) for c in cols))
    print(f"{args.count} inputs in {time.time() - t0:.0f} s; peak RSS of a run "
          f"{peak // 1024} MiB; bad outcomes: {len(bad)}")
    if args.verbose:
        for secs, i, cls, tool in sorted(slow, reverse=True)[:8]:
            print(f"slowest: [{i}] {cls} ({tool}) {secs:.1f} s")
    return 1 if len(bad) > args.max_fail else 0


if __name__ == "__main__":
    sys.exit(main())
