#!/usr/bin/env bash
# The main job on a bundled example: installs dependencies, builds smpc and
# imports the bundled GPT-style model (tied embeddings, causal mask) for a
# batch of 8 sequences of 16 tokens, then prints its summary and IR.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh smpc
BUILD_DIR=${BUILD_DIR:-build}
SMPC=$BUILD_DIR/bin/smpc
MODEL=test/fixtures/gpt_op17.onnx
OUT=${OUT:-$BUILD_DIR/example}
mkdir -p "$OUT"
echo "== smpc summary $MODEL --dim batch=8 --dim seq=16"
"$SMPC" summary "$MODEL" --dim batch=8 --dim seq=16
echo "== smpc import $MODEL --dim batch=8 --dim seq=16 -o $OUT/gpt.mlir"
"$SMPC" import "$MODEL" --dim batch=8 --dim seq=16 -o "$OUT/gpt.mlir"
echo "wrote $OUT/gpt.mlir ($(wc -c < "$OUT/gpt.mlir") bytes); first ops:"
grep -m 12 -E "smp\.(gather|layer_norm|matmul|softmax|gelu)" "$OUT/gpt.mlir"
