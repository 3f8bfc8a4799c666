#!/usr/bin/env python3
"""The hardware counters of every kernel of a training step, from Nsight
Compute's raw CSV (scripts/device-kit.sh's stage "step counters" runs
`ncu --csv --page raw --print-units base --metrics ...` on one step of the
GPT-2 benchmark's artifact): a markdown table of the kernels by their total
time, with what each achieved. Standard library only.

    ncu_table.py STEP.csv [--top 25]

Per kernel (launches of one function and template instance together; the
parameters and namespaces dropped from its name): launches, total ms, us a
launch, the DRAM bytes it moved a second (GB/s) and as a share of the
device's peak, the SMs' busiest unit's share of its peak, registers a
thread and the achieved occupancy (warps active against the most an SM
holds), the shares weighted by each launch's time. The rest in one line;
then the totals. Each kernel ran alone under ncu (replayed for its
counters): the table says what each kernel does, the profile
(profile_table.py) what the step spends on it.

The metrics it reads (any missing one leaves its column "-"):
gpu__time_duration.sum, dram__bytes.sum,
dram__throughput.avg.pct_of_peak_sustained_elapsed,
sm__throughput.avg.pct_of_peak_sustained_elapsed,
launch__registers_per_thread,
sm__warps_active.avg.pct_of_peak_sustained_active.
"""
import argparse
import csv
import re
import sys

TIME = "gpu__time_duration.sum"
BYTES = "dram__bytes.sum"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
REGS = "launch__registers_per_thread"
OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
METRICS = [TIME, BYTES, DRAM, SM, REGS, OCC]


def short_name(name):
    """`void a::b::k<c::T, 4>(T *, int)` -> `k<T, 4>`: the function and its
    template arguments, without the parameters, namespaces or `void`."""
    name = name.strip().replace("(anonymous namespace)::", "")
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            name = name[:i]
            break
    name = re.sub(r"^void\s+", "", name)
    name = re.sub(r"[A-Za-z_]\w*::", "", name)
    return name if len(name) <= 70 else name[:67] + "..."


def number(text):
    """A counter's value ("1,234.5" or "1234.5"), or None."""
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return None


def read_rows(path):
    """The launches: (kernel name, {metric: value}), and the units row."""
    try:
        with open(path, newline="") as f:
            lines = [l for l in f if l.startswith('"')]
    except OSError as e:
        raise SystemExit(f"ncu_table.py: {path}: {e.strerror} (did ncu run?)")
    if not lines:
        raise SystemExit(f"ncu_table.py: {path}: no CSV rows (did ncu run?)")
    reader = csv.reader(lines)
    header = next(reader)
    if "Kernel Name" not in header:
        raise SystemExit(f"ncu_table.py: {path}: no 'Kernel Name' column")
    units, launches = None, []
    for row in reader:
        rec = dict(zip(header, row))
        if not rec.get("ID"):  # the units row
            units = rec
            continue
        values = {m: number(rec[m]) for m in METRICS if m in rec}
        launches.append((short_name(rec["Kernel Name"]), values))
    return launches, units


def to_seconds(value, unit):
    scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3,
             "second": 1.0}.get(unit, 1e-9)
    return value * scale


def to_bytes(value, unit):
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
             "KB": 1e3, "MB": 1e6, "GB": 1e9}.get(unit, 1)
    return value * scale


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    launches, units = read_rows(args.csv)
    units = units or {}
    kernels = {}
    for name, v in launches:
        k = kernels.setdefault(name, {"n": 0, "sec": 0.0, "bytes": 0.0,
                                      "dram": 0.0, "sm": 0.0, "occ": 0.0,
                                      "regs": set(), "has": set()})
        sec = to_seconds(v.get(TIME) or 0.0, units.get(TIME, "nsecond"))
        k["n"] += 1
        k["sec"] += sec
        if v.get(BYTES) is not None:
            k["bytes"] += to_bytes(v[BYTES], units.get(BYTES, "byte"))
            k["has"].add(BYTES)
        for key, metric in (("dram", DRAM), ("sm", SM), ("occ", OCC)):
            if v.get(metric) is not None:
                k[key] += v[metric] * sec
                k["has"].add(metric)
        if v.get(REGS) is not None:
            k["regs"].add(int(v[REGS]))
    total = sum(k["sec"] for k in kernels.values())
    order = sorted(kernels.items(), key=lambda kv: -kv[1]["sec"])

    def share(k, key, metric):
        if metric not in k["has"] or k["sec"] <= 0:
            return "-"
        return f"{k[key] / k['sec']:.0f}%"

    print("| kernel | launches | total ms | us a launch | DRAM GB/s | "
          "DRAM % of peak | SM % of peak | registers | occupancy |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, k in order[:args.top]:
        gbs = (f"{k['bytes'] / k['sec'] / 1e9:,.0f}"
               if BYTES in k["has"] and k["sec"] > 0 else "-")
        regs = "/".join(str(r) for r in sorted(k["regs"])) or "-"
        print(f"| `{name}` | {k['n']} | {k['sec'] * 1e3:,.3f} | "
              f"{k['sec'] / k['n'] * 1e6:,.1f} | {gbs} | "
              f"{share(k, 'dram', DRAM)} | {share(k, 'sm', SM)} | {regs} | "
              f"{share(k, 'occ', OCC)} |")
    rest = order[args.top:]
    if rest:
        print(f"\nThe other {len(rest)} kernel{'s' if len(rest) > 1 else ''}: "
              f"{sum(k['n'] for _, k in rest)} launches, "
              f"{sum(k['sec'] for _, k in rest) * 1e3:,.3f} ms.")
    print(f"\n{len(launches)} launches of {len(kernels)} kernels, "
          f"{total * 1e3:,.3f} ms in all (each kernel alone under ncu).")


if __name__ == "__main__":
    sys.exit(main())
