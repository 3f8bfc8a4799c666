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
#                       [--prebuilt]
#
# --unfused adds a row for smp with --no-fuse-attention (the s x s scores
# materialised); --sdpa adds PyTorch eager and torch.compile with
# scaled_dot_product_attention (its fused kernel) beside the explicit
# attention; --no-compile leaves out torch.compile (minutes of compilation on
# a CPU). --rounds R runs every row R times, alternating (smp, PyTorch, smp,
# ...), and prints each row's median with the range. --layers/--hidden/
# --heads/--vocab change the model (GPT-2 124M by default). --prebuilt
# skips smp-modelgen and smpc: SMP_BENCH_DIR already holds
# gpt2-fused.smpx (gpt2-unfused.smpx with --unfused) compiled for this
# shape and batch, and the tokens in data/ (scripts/device-kit.sh packs
# them, for a GPU machine without smpc).
#
# --small: a 2-layer, 128-wide model with seq 64 and vocab 512, to check
# the benchmark itself on a CPU (`--device cpu --small`). The peak defaults to
# the H100 SXM's dense bf16 989 TFLOP/s (fp32: 67). MFU counts 6 N + 12 L H T
# FLOPs per token (N parameters, L layers, H hidden, T sequence; PaLM's
# formula, attention included, no recomputation). Memory: smp's planned
# arena; PyTorch's max allocated (CUDA) or peak resident set (CPU, the
# libraries included). Environment: SMP_BIN (the
# build's bin directory, default build/bin), SMP_BENCH_DIR (scratch, default
# /tmp/smp-gpt2-train), PYTHON.
set -euo pipefail

BIN=${SMP_BIN:-build/bin}
DIR=${SMP_BENCH_DIR:-/tmp/smp-gpt2-train}
PYTHON=${PYTHON:-python3}
L=12 H=768 NH=12 T=1024 V=50257
B=16 STEPS=30 WARM=10 DEV=cuda PREC=bf16 PEAK="" TORCH=1
UNFUSED=0 SDPA=0 COMPILE=1 ROUNDS=1 PREBUILT=0
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
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) echo "gpt2_train.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [ -z "$PEAK" ]; then
  if [ "$PREC" = bf16 ]; then PEAK=989; else PEAK=67; fi
fi
mkdir -p "$DIR"
echo "# gpt2_train.sh: L=$L H=$H heads=$NH T=$T V=$V batch=$B steps=$STEPS (+$WARM warm-up) $PREC on $DEV" >&2

target=cpu
[ "$DEV" != cpu ] && target=cuda
rows=()
variants=(fused)
[ $UNFUSED = 1 ] && variants+=(unfused)
if [ $PREBUILT = 1 ]; then
  for variant in "${variants[@]}"; do
    [ -f "$DIR/gpt2-$variant.smpx/manifest.pb" ] || {
      echo "gpt2_train.sh: --prebuilt needs $DIR/gpt2-$variant.smpx" >&2
      exit 2
    }
  done
  [ -d "$DIR/data" ] || { echo "gpt2_train.sh: --prebuilt needs $DIR/data" >&2; exit 2; }
else
# The model and random tokens (enough samples for every step's batch).
"$BIN/smp-modelgen" gpt --layers $L --hidden $H --heads $NH --seq $T \
  --vocab $V -o "$DIR/gpt2.onnx" --write-data "$DIR/data" $((B * 2)) >&2
for variant in "${variants[@]}"; do
  flag=""
  [ $variant = unfused ] && flag=--no-fuse-attention
  start=$(date +%s.%N)
  "$BIN/smpc" compile "$DIR/gpt2.onnx" --train --target $target \
    --loss cross_entropy:logits:labels --optimizer adamw --lr 1e-4 \
    --precision "$PREC" --batch-size $B $flag -o "$DIR/gpt2-$variant.smpx" >&2
  echo "# smpc compile ($variant attention): $(echo "$(date +%s.%N) - $start" | bc) s" >&2
done
fi
modes=()
if [ $TORCH = 1 ]; then
  modes=(eager)
  [ $SDPA = 1 ] && modes+=(eager-sdpa)
  [ $COMPILE = 1 ] && modes+=(compile)
  [ $COMPILE = 1 ] && [ $SDPA = 1 ] && modes+=(compile-sdpa)
fi
for round in $(seq 1 "$ROUNDS"); do
  for variant in "${variants[@]}"; do
    out="$DIR/smprun-$variant-$round.out"
    "$BIN/smprun" "$DIR/gpt2-$variant.smpx" --device "$DEV" --data "$DIR/data" \
      --steps $((STEPS + WARM)) --metrics "$DIR/smp-$variant-$round.jsonl" \
      > "$out"
    cat "$out" >&2
    rows+=("smp-$variant:$DIR/smp-$variant-$round.jsonl:$out")
  done
  for mode in "${modes[@]}"; do
    flag=""
    case $mode in
      compile) flag=--compile ;;
      eager-sdpa) flag=--sdpa ;;
      compile-sdpa) flag="--compile --sdpa" ;;
    esac
    $PYTHON "$(dirname "$0")/gpt2_train_torch.py" --layers $L --hidden $H \
      --heads $NH --seq $T --vocab $V --batch $B --steps $STEPS \
      --warmup $WARM --device "$DEV" --dtype "$PREC" $flag \
      > "$DIR/torch-$mode-$round.json"
    cat "$DIR/torch-$mode-$round.json" >&2
    rows+=("torch:$DIR/torch-$mode-$round.json:")
  done
done

$PYTHON - "$L" "$H" "$T" "$B" "$WARM" "$PEAK" "$V" "${rows[@]}" <<'EOF'
import json, re, statistics, sys
L, H, T, B, warm = map(int, sys.argv[1:6])
peak = float(sys.argv[6]) * 1e12
V = int(sys.argv[7])
rows = []
params = None
for spec in sys.argv[8:]:
    kind, path, out = spec.split(":")
    if kind == "torch":
        r = json.load(open(path))
        params = r["params"]
        name = "PyTorch " + r["mode"] + (" (SDPA)" if r["attention"] == "sdpa" else "")
        rows.append((name, r["tokens_per_s"], r["loss"], r["peak_bytes"]))
        continue
    smp = [json.loads(l) for l in open(path) if l.strip()]
    sps = statistics.median(r["samples_per_s"] for r in smp[warm:])
    m = re.search(r"arena (\d+) bytes planned", open(out).read())
    rows.append(("smp " + kind.split("-")[1] + " attention", sps * T,
                 smp[-1]["loss"], int(m.group(1)) if m else 0))
if params is None:  # smp only: GPT-2's count from the config
    params = V * H + T * H + L * (12 * H * H + 13 * H) + 2 * H
flops_per_token = 6 * params + 12 * L * H * T
# One line per row name, in first-run order: the median over the rounds
# (and the range when there are several).
names = list(dict.fromkeys(r[0] for r in rows))
print(f"| run | tokens/s | MFU | loss after the steps (own weights and data) | memory (bytes) |")
print(f"| --- | --- | --- | --- | --- |")
for name in names:
    runs = [r for r in rows if r[0] == name]
    tps = statistics.median(r[1] for r in runs)
    spread = "" if len(runs) == 1 else \
        f" ({min(r[1] for r in runs):,.0f}-{max(r[1] for r in runs):,.0f})"
    loss, mem = runs[-1][2], max(r[3] for r in runs)
    print(f"| {name} | {tps:,.0f}{spread} | "
          f"{100 * tps * flops_per_token / peak:.1f}% | {loss:.4f} | {mem:,} |")
EOF
