#!/usr/bin/env bash
# Benchmark: GPT-2-small-shaped forward (124M params, T=1024, batch 4) on the
# smp CPU backend against onnxruntime, same machine and thread count.
#
#   bash bench/gpt2_forward.sh [THREADS]
#
# Needs torch (to export the model once), onnxruntime and numpy from PyPI.
# Writes into ${WORK:-/tmp/smp-bench-gpt2}.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-2}
WORK=${WORK:-/tmp/smp-bench-gpt2}
BIN=${BUILD_DIR:-build}/bin
mkdir -p "$WORK"
if [[ ! -f $WORK/gpt2.onnx ]]; then
  python3 python/export_gpt2.py --out "$WORK/gpt2.onnx" --batch 4 --seq 1024 \
    --save-io "$WORK/io"
fi
/usr/bin/time -f "smpc compile: %e s, peak RSS %M KiB" \
  "$BIN/smpc" compile "$WORK/gpt2.onnx" -o "$WORK/gpt2.smpx"
for run in 1 2 3; do
  "$BIN/smprun" "$WORK/gpt2.smpx" --data "$WORK/io" --output-dir "$WORK/out" \
    --threads "$THREADS" | tail -1
done
"$BIN/smp-npy-diff" "$WORK/out/logits.npy" "$WORK/io/logits.npy" --rtol 1e-4
python3 bench/ort_forward.py "$WORK/gpt2.onnx" "$WORK/io" --threads "$THREADS"
