#!/usr/bin/env bash
# The main job on a bundled example: installs dependencies, builds smpc and
# smprun, compiles the bundled GPT-style model (exported from PyTorch: tied
# embeddings, causal mask, 2 layers) for a batch of 2 sequences of 16 tokens,
# shows the plan, runs it on the CPU backend and checks the logits against
# PyTorch's, then trains it 5 steps with AdamW. (Multi-rank plans come next.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh smpc smprun smp-npy-diff
BUILD_DIR=${BUILD_DIR:-build}
BIN=$BUILD_DIR/bin
MODEL=test/fixtures/gpt_op17.onnx
DATA=test/fixtures/gpt_op17
OUT=${OUT:-$BUILD_DIR/example}
rm -rf "$OUT" && mkdir -p "$OUT"
echo "== smpc summary $MODEL --dim batch=2 --dim seq=16"
"$BIN/smpc" summary "$MODEL" --dim batch=2 --dim seq=16
echo "== smpc compile $MODEL --batch-size 2 --dim seq=16 -o $OUT/gpt.smpx"
"$BIN/smpc" compile "$MODEL" --batch-size 2 --dim seq=16 -o "$OUT/gpt.smpx"
echo "== plan ($OUT/gpt.smpx/plan.txt)"
cat "$OUT/gpt.smpx/plan.txt"
echo "== smprun $OUT/gpt.smpx --data $DATA --output-dir $OUT/out"
"$BIN/smprun" "$OUT/gpt.smpx" --data "$DATA" --output-dir "$OUT/out"
echo "== logits against PyTorch's reference"
"$BIN/smp-npy-diff" "$OUT/out/logits.npy" "$DATA/logits.npy" --rtol 1e-4
TRAIN=test/fixtures/train
echo "== smpc compile $TRAIN/gpt.onnx --train --loss cross_entropy:logits:labels --optimizer adamw --lr 1e-3 --batch-size 8"
"$BIN/smpc" compile "$TRAIN/gpt.onnx" --train --loss cross_entropy:logits:labels \
  --optimizer adamw --lr 1e-3 --batch-size 8 -o "$OUT/gpt-train.smpx"
echo "== smprun $OUT/gpt-train.smpx --data $TRAIN/gpt --steps 5"
"$BIN/smprun" "$OUT/gpt-train.smpx" --data "$TRAIN/gpt" --steps 5 \
  --metrics "$OUT/metrics.jsonl"
echo "(PyTorch's losses for the same run: $TRAIN/gpt/ref_adamw.json)"
