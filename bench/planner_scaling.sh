#!/usr/bin/env bash
# Planner time against model depth and device count: GPT models of hidden
# 12288 (96 heads, seq 2048, vocab 51200; GPT-3 175B at 96 layers) from
# smp-modelgen, planned on A100-80G clusters with a global batch of 1536, and
# the 1T model (128 layers, hidden 25600, 160 heads) on 3072 GPUs with batch
# 3072. Prints a markdown table of wall times (best of 3).
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
D=${SMP_BENCH_DIR:-/tmp/smp-planner}
mkdir -p "$D"
best() { # best of 3 wall times of "$@", in seconds
  local t best=999
  for _ in 1 2 3; do
    t=$( { /usr/bin/time -f %e "$@" > /dev/null; } 2>&1 | tail -1)
    best=$(python3 -c "print(min($best, $t))")
  done
  echo "$best"
}
echo "| layers | parameters | 64 GPUs | 512 GPUs | 1024 GPUs | 3072 GPUs |"
echo "| --- | --- | --- | --- | --- | --- |"
for L in 24 48 96 192; do
  $B/smp-modelgen gpt --layers $L --hidden 12288 --heads 96 --seq 2048 --vocab 51200 \
    -o "$D/gpt-$L.mlir" > "$D/gpt-$L.txt"
  params=$(grep -o '[0-9]* parameters' "$D/gpt-$L.txt" | cut -d' ' -f1)
  row="| $L | $(python3 -c "print(f'{$params/1e9:.0f}B')") |"
  for N in 64 512 1024 3072; do
    row="$row $(best $B/smpc plan "$D/gpt-$L.mlir" --devices $N --cluster a100-sxm-80g \
      --global-batch 1536 --precision bf16) s |"
  done
  echo "$row"
done
$B/smp-modelgen gpt --layers 128 --hidden 25600 --heads 160 --seq 2048 --vocab 51200 \
  -o "$D/gpt-1t.mlir" > /dev/null
echo
echo "1T (128 layers, hidden 25600) on 3072 x a100-sxm-80g, batch 3072:" \
  "$(best $B/smpc plan "$D/gpt-1t.mlir" --devices 3072 --cluster a100-sxm-80g \
     --global-batch 3072 --precision bf16) s"
