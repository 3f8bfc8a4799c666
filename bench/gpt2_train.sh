#!/usr/bin/env bash
# GPT-2 124M training on one device: smp against PyTorch eager and
# torch.compile on the same model (smp-modelgen gpt; bench/gpt2_train_torch.py
# builds the same one), batch, sequence, AdamW and precision, measured in the
# same run. Prints a markdown table: tokens/s (median step after warm-up),
# MFU against the device's dense peak, and each side's loss after the steps.
#
#   bench/gpt2_train.sh [--device cuda|cpu] [--batch B] [--seq T]
#                       [--steps N] [--warmup N] [--precision bf16|fp32]
#                       [--peak-tflops P] [--small] [--no-torch]
#                       [--unfused] [--sdpa] [--no-compile] [--rounds R]
#                       [--layers L] [--hidden H] [--heads NH] [--vocab V]
#                       [--prebuilt] [--modes LIST] [--no-smp]
#                       [--deadline EPOCH]
#
# --unfused adds a row for smp with --no-fuse-attention (the s x s scores
# materialised); --sdpa adds PyTorch eager and torch.compile with
# scaled_dot_product_attention (its fused kernel) beside the explicit
# attention; --no-compile leaves out torch.compile (minutes of compilation on
# a CPU). --modes names the PyTorch rows and their order instead, comma-
# separated from eager, eager-sdpa, compile, compile-sdpa (the default:
# eager, then eager-sdpa with --sdpa, compile, compile-sdpa). --no-smp
# leaves out smp's rows (PyTorch only). --rounds R runs every row R times,
# alternating (smp, PyTorch, smp, ...), and prints each row's median with
# the range. --layers/--hidden/--heads/--vocab change the model (GPT-2 124M
# by default). --prebuilt skips smp-modelgen and smpc: SMP_BENCH_DIR
# already holds gpt2-fused.smpx (gpt2-unfused.smpx with --unfused) compiled
# for this shape and batch, and the tokens in data/ (scripts/device-kit.sh
# packs them, for a GPU machine without smpc).
#
# --deadline EPOCH (unix seconds) bounds the rows: each process runs under
# timeout(1) until EPOCH, and a row starts only with 20 s left (150 s for a
# torch.compile row); rows left out are listed under the table. An smp row
# cut at the deadline keeps the steps it finished (its median over the
# steps after the warm-up, or after the first when it did not get that far).
#
# With one round every row's line is printed as the row ends (the header
# first). A row that fails does not stop the others: the table has the rows
# that ran, a line under it says what failed, and the exit status is 1.
#
# --small: a 2-layer, 128-wide model with seq 64 and vocab 512, to check
# the benchmark itself on a CPU (`--device cpu --small`). The peak defaults to
# the H100 SXM's dense bf16 989 TFLOP/s (fp32: 67). MFU counts 6 N + 12 L H T
# FLOPs per token (N parameters, L layers, H hidden, T sequence; PaLM's
# formula, attention included, no recomputation). Memory: smp's planned
# arena, and on a GPU the device memory in use at most (smprun --metrics
# device_bytes: cudaMemGetInfo after each step, the CUDA context and
# libraries included); PyTorch's max allocated (CUDA) or peak resident set
# (CPU, the libraries included). Environment: SMP_BIN (the
# build's bin directory, default build/bin), SMP_BENCH_DIR (scratch, default
# /tmp/smp-gpt2-train), PYTHON.
set -euo pipefail

BIN=${SMP_BIN:-build/bin}
DIR=${SMP_BENCH_DIR:-/tmp/smp-gpt2-train}
PYTHON=${PYTHON:-python3}
L=12 H=768 NH=12 T=1024 V=50257
B=16 STEPS=30 WARM=10 DEV=cuda PREC=bf16 PEAK="" TORCH=1
UNFUSED=0 SDPA=0 COMPILE=1 ROUNDS=1 PREBUILT=0 MODES="" SMP=1 DEADLINE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEV=$2; shift 2 ;;
    --batch) B=$2; shift 2 ;;
    --seq) T=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARM=$2; shift 2 ;;
    --precision) PREC=$2; shift 2 ;;
    --peak-tflops) PEAK=$2; shift 2 ;;
    --small) L=2 H=128 NH=4 T=64 V=512; shift ;;
    --no-torch) TORCH=0; shift ;;
    --unfused) UNFUSED=1; shift ;;
    --sdpa) SDPA=1; shift ;;
    --no-compile) COMPILE=0; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --layers) L=$2; shift 2 ;;
    --hidden) H=$2; shift 2 ;;
    --heads) NH=$2; shift 2 ;;
    --vocab) V=$2; shift 2 ;;
    --prebuilt) PREBUILT=1; shift ;;
    --modes) MODES=$2; shift 2 ;;
    --no-smp) SMP=0; shift ;;
    --deadline) DEADLINE=$2; shift 2 ;;
    -h|--help) sed -n '2,49p' "$0"; exit 0 ;;
    *) echo "gpt2_train.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [ -n "$DEADLINE" ] && ! [ "$DEADLINE" -gt 0 ] 2>/dev/null; then
  echo "gpt2_train.sh: --deadline takes unix seconds, not '$DEADLINE'" >&2
  exit 2
fi
if [ -z "$PEAK" ]; then
  if [ "$PREC" = bf16 ]; then PEAK=989; else PEAK=67; fi
fi
mkdir -p "$DIR"
echo "# gpt2_train.sh: L=$L H=$H heads=$NH T=$T V=$V batch=$B steps=$STEPS (+$WARM warm-up) $PREC on $DEV" >&2

target=cpu
[ "$DEV" != cpu ] && target=cuda
rows=()
variants=()
if [ $SMP = 1 ]; then
  variants=(fused)
  [ $UNFUSED = 1 ] && variants+=(unfused)
fi
if [ ${#variants[@]} = 0 ]; then
  : # PyTorch only: no artifact, no tokens
elif [ $PREBUILT = 1 ]; then
  for variant in "${variants[@]}"; do
    [ -f "$DIR/gpt2-$variant.smpx/manifest.pb" ] || {
      echo "gpt2_train.sh: --prebuilt needs $DIR/gpt2-$variant.smpx" >&2
      exit 2
    }
  done
  [ -d "$DIR/data" ] || { echo "gpt2_train.sh: --prebuilt needs $DIR/data" >&2; exit 2; }
else
# The model and random tokens (enough samples for every step's batch).
"$BIN/smp-modelgen" gpt --layers "$L" --hidden "$H" --heads "$NH" --seq "$T" \
  --vocab "$V" -o "$DIR/gpt2.onnx" --write-data "$DIR/data" $((B * 2)) >&2
for variant in "${variants[@]}"; do
  flag=()
  [ "$variant" = unfused ] && flag=(--no-fuse-attention)
  start=$(date +%s.%N)
  "$BIN/smpc" compile "$DIR/gpt2.onnx" --train --target $target \
    --loss cross_entropy:logits:labels --optimizer adamw --lr 1e-4 \
    --precision "$PREC" --batch-size "$B" "${flag[@]}" \
    -o "$DIR/gpt2-$variant.smpx" >&2
  echo "# smpc compile ($variant attention): $(echo "$(date +%s.%N) - $start" | bc) s" >&2
done
fi
modes=()
if [ $TORCH = 1 ]; then
  if [ -n "$MODES" ]; then
    IFS=, read -r -a modes <<< "$MODES"
    for mode in "${modes[@]}"; do
      case $mode in
        eager | eager-sdpa | compile | compile-sdpa) ;;
        *) echo "gpt2_train.sh: --modes: unknown mode '$mode'" >&2; exit 2 ;;
      esac
    done
  else
    modes=(eager)
    [ $SDPA = 1 ] && modes+=(eager-sdpa)
    [ $COMPILE = 1 ] && modes+=(compile)
    [ $COMPILE = 1 ] && [ $SDPA = 1 ] && modes+=(compile-sdpa)
  fi
fi

# table HEADER ROW...: the table's header (HEADER 1) and one line per row
# name (the median over its rounds). A row is KIND:METRICS:OUT:NOTE (KIND
# smp-<variant> or torch; NOTE, if any, goes after the name).
table() {
  # shellcheck disable=SC2086 # PYTHON may carry options
  $PYTHON - "$L" "$H" "$T" "$B" "$WARM" "$PEAK" "$V" "$@" <<'EOF'
import json, re, statistics, sys
L, H, T, B, warm = map(int, sys.argv[1:6])
peak = float(sys.argv[6]) * 1e12
V = int(sys.argv[7])
header = sys.argv[8] == "1"
rows = []
params = None
for spec in sys.argv[9:]:
    kind, path, out, note = spec.split(":", 3)
    note = f" ({note})" if note else ""
    if kind == "torch":
        r = json.load(open(path))
        params = r["params"]
        name = "PyTorch " + r["mode"] + (" (SDPA)" if r["attention"] == "sdpa" else "")
        rows.append((name + note, r["tokens_per_s"], r["loss"], (r["peak_bytes"], 0, None)))
        continue
    smp = [json.loads(l) for l in open(path) if l.strip()]
    # The steps after the warm-up; a row cut short keeps what it has.
    steady = smp[warm:] or smp[1:] or smp
    sps = statistics.median(r["samples_per_s"] for r in steady)
    text = open(out).read()
    m = re.search(r"arena (\d+) bytes planned", text)
    # The device's own count (cudaMemGetInfo after each step), when a GPU
    # ran, and what smprun says held it beyond the arena.
    device = max((r.get("device_bytes") or 0) for r in smp)
    parts = re.search(r"in a pool of (\d+), cuBLASLt workspace (\d+); "
                      r"the rest (\d+)", text)
    parts = tuple(map(int, parts.groups())) if parts else None
    rows.append(("smp " + kind.split("-")[1] + " attention" + note, sps * T,
                 smp[-1]["loss"], (int(m.group(1)) if m else 0, device, parts)))
if params is None:  # smp only: GPT-2's count from the config (PyTorch's too)
    params = V * H + T * H + L * (12 * H * H + 13 * H) + 2 * H
flops_per_token = 6 * params + 12 * L * H * T
# One line per row name, in first-run order: the median over the rounds
# (and the range when there are several).
names = list(dict.fromkeys(r[0] for r in rows))
if header:
    print(f"| run | tokens/s | MFU | loss after the steps (own weights and data) | memory (bytes) |")
    print(f"| --- | --- | --- | --- | --- |")
for name in names:
    runs = [r for r in rows if r[0] == name]
    tps = statistics.median(r[1] for r in runs)
    spread = "" if len(runs) == 1 else \
        f" ({min(r[1] for r in runs):,.0f}-{max(r[1] for r in runs):,.0f})"
    loss = runs[-1][2]
    mem, device = max(r[3][0] for r in runs), max(r[3][1] for r in runs)
    mem = f"{mem:,}" if mem else "?"  # no arena line: smprun cut short
    if device:  # smp on a GPU: the plan, then what the device held
        mem += f" planned; {device:,} on the device"
        parts = runs[-1][3][2]
        if parts:  # beyond the arena: the kernels' scratch pool, the
            # cuBLASLt workspace, the context and the loaded code
            mem += (f" (scratch pool {parts[0]:,}, cuBLASLt workspace "
                    f"{parts[1]:,}, context and code {parts[2]:,})")
    print(f"| {name} | {tps:,.0f}{spread} | "
          f"{100 * tps * flops_per_token / peak:.1f}% | {loss:.4f} | {mem} |")
EOF
}

# --deadline: the seconds a row needs to start, the seconds left, and the
# rows' processes under timeout(1) until the deadline.
MIN_ROW=20 MIN_COMPILE_ROW=150
left() { echo $((DEADLINE - $(date +%s))); }
limited() {
  if [ -z "$DEADLINE" ]; then "$@"; return; fi
  local l
  l=$(left)
  [ "$l" -ge 1 ] || l=1
  timeout --foreground -k 5 "$l" "$@" < /dev/null
}
notes=()
failed=0
# may_start NAME NEED: whether the row NAME, which needs NEED seconds, may
# start before the deadline (a note says why not).
may_start() {
  [ -n "$DEADLINE" ] || return 0
  local l
  l=$(left)
  [ "$l" -ge "$2" ] && return 0
  notes+=("skipped: $1: $l s left before the deadline, the row needs $2")
  return 1
}
# why STATUS: how a row's process ended ("exit N", or cut at the deadline).
why() {
  if [ -n "$DEADLINE" ] && { [ "$1" = 124 ] || [ "$1" = 137 ]; }; then
    echo "cut at the deadline"
  else
    echo "exit $1"
  fi
}
# One round: each row's line is printed as the row ends.
stream=0
if [ "$ROUNDS" = 1 ]; then
  stream=1
  table 1
fi
row() {
  rows+=("$1")
  [ $stream = 0 ] || table 0 "$1"
}
for round in $(seq 1 "$ROUNDS"); do
  for variant in "${variants[@]}"; do
    name="smp $variant attention"
    out="$DIR/smprun-$variant-$round.out"
    metrics="$DIR/smp-$variant-$round.jsonl"
    may_start "$name" $MIN_ROW || continue
    rm -f "$metrics"
    rc=0
    limited "$BIN/smprun" "$DIR/gpt2-$variant.smpx" --device "$DEV" \
      --data "$DIR/data" --steps $((STEPS + WARM)) --metrics "$metrics" \
      > "$out" 2> "$out.err" || rc=$?
    cat "$out" "$out.err" >&2
    ran=0
    [ -s "$metrics" ] && ran=$(grep -c . "$metrics")
    note=""
    [ $rc = 0 ] || note="$(why $rc) after $ran of $((STEPS + WARM)) steps"
    if [ "$ran" -gt 0 ]; then
      row "smp-$variant:$metrics:$out:$note"
    else
      notes+=("failed: $name: $(why $rc), no step: $(tail -n 1 "$out.err")")
    fi
    [ "$(why $rc)" != "exit $rc" ] || [ $rc = 0 ] || failed=1
  done
  for mode in "${modes[@]}"; do
    flag=()
    need=$MIN_ROW
    case $mode in
      compile) flag=(--compile) need=$MIN_COMPILE_ROW ;;
      eager-sdpa) flag=(--sdpa) ;;
      compile-sdpa) flag=(--compile --sdpa) need=$MIN_COMPILE_ROW ;;
    esac
    may_start "PyTorch $mode" $need || continue
    json="$DIR/torch-$mode-$round.json"
    rc=0
    # shellcheck disable=SC2086 # PYTHON may carry options
    limited $PYTHON "$(dirname "$0")/gpt2_train_torch.py" --layers "$L" \
      --hidden "$H" --heads "$NH" --seq "$T" --vocab "$V" --batch "$B" \
      --steps "$STEPS" --warmup "$WARM" --device "$DEV" --dtype "$PREC" \
      "${flag[@]}" > "$json" 2> "$json.err" || rc=$?
    cat "$json" "$json.err" >&2
    if [ $rc = 0 ] && [ -s "$json" ]; then
      row "torch:$json::"
    else
      notes+=("failed: PyTorch $mode: $(why $rc): $(grep -v '^[[:space:]]*$' "$json.err" | tail -n 1)")
      [ "$(why $rc)" != "exit $rc" ] || failed=1
    fi
  done
done

[ $stream = 1 ] || table 1 "${rows[@]}"
if [ ${#notes[@]} -gt 0 ]; then
  echo
  printf '%s\n' "${notes[@]}"
fi
exit $failed
