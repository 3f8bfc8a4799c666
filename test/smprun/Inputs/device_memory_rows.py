#!/usr/bin/env python3
"""For cudaemu-device-memory.test: prints, per --metrics row, each rank's
device bytes less its arena high-water mark, and whether device_bytes is
rank 0's entry.

    device_memory_rows.py LABEL METRICS.jsonl
"""
import json
import sys

label, path = sys.argv[1], sys.argv[2]
with open(path) as f:
    for line in f:
        r = json.loads(line)
        extra = [d - p for d, p in zip(r["device_bytes_per_rank"],
                                       r["peak_bytes_per_rank"])]
        print(label, r["step"], extra,
              r["device_bytes"] == r["device_bytes_per_rank"][0])
