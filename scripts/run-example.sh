#!/usr/bin/env bash
# The main job on a bundled example: installs dependencies, builds smpc and
# smprun, compiles the bundled GPT-style model (exported from PyTorch: tied
# embeddings, causal mask, 2 layers) for a batch of 2 sequences of 16 tokens,
# shows the plan, runs it on the CPU backend and checks the logits against
# PyTorch's, then trains it 5 steps with AdamW on one rank and on 8 ranks
# (dp2 x tp2 x pp2, 1F1B, ZeRO-1) and checks that both give PyTorch's losses.
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
echo "== losses against PyTorch's ($TRAIN/gpt/ref_adamw.json)"
python3 test/train/compare_losses.py "$OUT/metrics.jsonl" "$TRAIN/gpt/ref_adamw.json" --rtol 1e-4 --label "1 rank"
PLAN="--dp 2 --tp 2 --pp 2 --microbatches 2 --schedule 1f1b --shard-optimizer-state"
echo "== smpc compile $TRAIN/gpt.onnx --train ... --batch-size 8 $PLAN"
"$BIN/smpc" compile "$TRAIN/gpt.onnx" --train --loss cross_entropy:logits:labels \
  --optimizer adamw --lr 1e-3 --batch-size 8 $PLAN -o "$OUT/gpt-8ranks.smpx"
echo "== plan ($OUT/gpt-8ranks.smpx/plan.txt)"
cat "$OUT/gpt-8ranks.smpx/plan.txt" | sed -n '1,/instructions by op/p'
echo "== smprun -n 8 $OUT/gpt-8ranks.smpx --data $TRAIN/gpt --steps 5"
"$BIN/smprun" -n 8 "$OUT/gpt-8ranks.smpx" --data "$TRAIN/gpt" --steps 5 \
  --metrics "$OUT/metrics-8ranks.jsonl"
echo "== 8 ranks against one rank, and against PyTorch"
python3 test/train/same_losses.py "$OUT/metrics.jsonl" "$OUT/metrics-8ranks.jsonl" --rtol 1e-5
python3 test/train/compare_losses.py "$OUT/metrics-8ranks.jsonl" "$TRAIN/gpt/ref_adamw.json" --rtol 1e-4 --label "8 ranks"
