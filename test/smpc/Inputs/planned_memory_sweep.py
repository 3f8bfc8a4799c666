"""smpc compile --devices N over devices of several memory sizes: every
artifact written fits the planner's limit (90% of the device) on every
pipeline rank, and every refusal says why. Prints one summary line and the
first "planning again" note. Usage: planned_memory_sweep.py SMPC MODEL DIR
DEVICES BATCH KB..."""
import json
import os
import re
import subprocess
import sys

smpc, model, out, devices, batch = sys.argv[1:6]
sizes = [int(k) for k in sys.argv[6:]]
os.makedirs(out, exist_ok=True)
written = replanned = refused = 0
first_note = None
for kb in sizes:
    cluster = f"{out}/c{kb}.json"
    with open(cluster, "w") as f:
        json.dump({"base": "cpu", "memory_gb": kb * 1e3 / 1e9}, f)
    art = f"{out}/a{kb}.smpx"
    r = subprocess.run([smpc, "compile", model, "--train", "--loss",
                        "cross_entropy:logits:labels", "--optimizer", "adamw",
                        "--batch-size", batch, "--devices", devices,
                        "--cluster", cluster, "-o", art],
                       capture_output=True, text=True)
    notes = [l for l in r.stderr.splitlines() if l.startswith("smpc: note: the planned")]
    if notes and first_note is None:
        first_note = notes[0]
    replanned += bool(notes)
    if r.returncode != 0:
        assert re.search(r"error: (no plan fits|.*after 3 plans)", r.stderr), r.stderr
        refused += 1
        continue
    limit = 0.9 * kb * 1000
    arenas = [int(x) for x in re.findall(r"memory (\d+) bytes per device",
                                         open(f"{art}/plan.txt").read())]
    assert arenas, f"{kb} KB: no stage memory in plan.txt"
    over = [a for a in arenas if a > limit]
    assert not over, f"{kb} KB: arenas {arenas} over the limit {limit:.0f}"
    written += 1
print(f"{len(sizes)} devices: {written} artifacts within 90% of the device, "
      f"{refused} refused with a reason, {replanned} planned again")
print(first_note)
