#!/usr/bin/env bash
# Measured pipeline bubble of each schedule on CPU ranks, for a synthetic
# model of equal residual blocks (python/make_synthetic.py, needs onnx and
# numpy), against the simulator's figure. One thread per rank; run it on an
# otherwise idle machine with at least P cores.
#
#   bench/pipeline_bubble.sh [P] [M]      (default P=2, M=8)
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:-2}
M=${2:-8}
B=build/bin
D=${SMP_BENCH_DIR:-/tmp/smp-bubble}
[[ -f $D/synthetic.onnx ]] || python3 python/make_synthetic.py "$D" --blocks $((4 * P)) --hidden 1024
for cfg in "gpipe 1" "1f1b 1" "interleaved 2" "zb-h1 1"; do
  read -r s v <<< "$cfg"
  $B/smpc compile "$D/synthetic.onnx" --train --loss mse:y:target --optimizer sgd --lr 0.01 \
    --batch-size $((64 * M)) --pp "$P" --microbatches "$M" --schedule "$s" \
    --virtual-stages "$v" -o "$D/$s.smpx" > /dev/null
  $B/smprun -n "$P" "$D/$s.smpx" --data "$D/data" --steps 6 --threads 1 \
    --profile "$D/$s.prof.json" > /dev/null
  python3 bench/pipeline_bubble.py "$D/$s.prof.json" "$P" "$M" "$s" "$v"
done
