"""Checks plan.txt's "at its peak" line of each stage against itself and
plan.json: the parts (parameters, optimizer state, inputs, constants, the
step's values) add up to the live bytes, the arena holds them, each listed
value's [made, last read] range holds the peak instruction, and plan.json's
stage has the same live bytes and instruction. Usage: check_arena_peak.py
ARTIFACT_DIR."""
import json
import re
import sys

art = sys.argv[1]
text = open(f"{art}/plan.txt").read().splitlines()
stages = json.load(open(f"{art}/plan.json"))["artifact"]["stages"]
stage_re = re.compile(r"^stage (\d+): .*; memory (\d+) bytes per device")
peak_re = re.compile(
    r"^  at its peak (\d+) bytes are live \(instruction (-?\d+), [^)]*\): "
    r"parameters (\d+), optimizer state (\d+), inputs (\d+), constants (\d+), "
    r"the step's values (\d+)(?: \(largest: (.*)\))?(?:; the layout adds (\d+))?$")
value_re = re.compile(r"'([^']*)' (\d+) \[(-?\d+), (-?\d+)\]")
for i, line in enumerate(text):
    m = stage_re.match(line)
    if not m:
        continue
    stage, arena = int(m.group(1)), int(m.group(2))
    p = peak_re.match(text[i + 1])
    assert p, f"stage {stage}: no peak line: {text[i + 1]!r}"
    live, at = int(p.group(1)), int(p.group(2))
    parts = sum(int(p.group(k)) for k in range(3, 8))
    assert parts == live, f"stage {stage}: parts {parts} != live {live}"
    assert live <= arena, f"stage {stage}: live {live} > arena {arena}"
    layout = int(p.group(9) or 0)
    assert live + layout == arena, f"stage {stage}: {live} + {layout} != {arena}"
    values = value_re.findall(p.group(8) or "")
    assert values, f"stage {stage}: no largest values"
    sizes = [int(v[1]) for v in values]
    assert sizes == sorted(sizes, reverse=True), f"stage {stage}: not largest first"
    for name, _, made, last in values:
        assert int(made) <= at <= int(last), f"stage {stage}: {name} [{made}, {last}] not live at {at}"
    js = stages[stage]
    assert js["peak_live_bytes"] == live and js["peak_instruction"] == at, (
        f"stage {stage}: plan.json {js['peak_live_bytes']} at {js['peak_instruction']}")
    print(f"stage {stage}: parts add up, within the arena, largest live at the "
          f"peak, plan.json agrees")
