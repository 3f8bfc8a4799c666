#!/usr/bin/env python3
"""Reads smprun's TensorBoard event files with the tensorboard package's own
reader (EventAccumulator, which checks the TFRecord framing and its masked
CRC-32C) and checks them against the run's --metrics file: every step has
every TAG, with the metrics' value rounded to float32 (TensorBoard's
simple_value; within 2 float32 ulps: the metrics print 9 significant digits
of the double, which can round to the neighbouring float), and no other
steps.

    check_tensorboard.py EVENT_DIR METRICS.jsonl TAG...

Prints "N steps, tags TAG... equal the metrics" or what differs (exit 1).
"""
import math
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator)

from same_losses import read_rows, report  # this directory


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def main():
    event_dir, metrics_path, tags = sys.argv[1], sys.argv[2], sys.argv[3:]
    rows = read_rows(metrics_path)
    acc = EventAccumulator(event_dir, size_guidance={"scalars": 0})
    acc.Reload()
    have = acc.Tags()["scalars"]
    bad = []
    for tag in tags:
        if tag not in have:
            bad.append(f"no scalar '{tag}' (the event files have {have})")
            continue
        seen = {e.step: e.value for e in acc.Scalars(tag)}
        if sorted(seen) != sorted(rows):
            bad.append(f"'{tag}' has steps {sorted(seen)}, the metrics "
                       f"{sorted(rows)}")
            continue
        for step, row in sorted(rows.items()):
            if not math.isclose(seen[step], f32(row[tag]), rel_tol=2.5e-7):
                bad.append(f"step {step}: '{tag}' is {seen[step]}, the "
                           f"metrics say {row[tag]}")
    report(bad, f"{len(rows)} steps, tags {' '.join(tags)} equal the metrics")


if __name__ == "__main__":
    main()
