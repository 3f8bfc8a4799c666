#!/usr/bin/env bash
# Benchmark: smpc compile time against graph size (issue 13: it grew
# quadratically). Chains of N nodes (Relu, Add of its own [8] weight,
# alternating; N/2 parameters) compiled for inference and with --train,
# and one Sum of N inputs. Prints wall and user seconds and peak RSS.
#
#   bash bench/compile_scaling.sh [SIZES...]     (default: 10000 50000 100000)
#
# Needs python3 with onnx and numpy. Writes into ${WORK:-/tmp/smp-bench-scaling}.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
WORK=${WORK:-/tmp/smp-bench-scaling}
SIZES=("${@:-10000 50000 100000}")
read -r -a SIZES <<< "${SIZES[*]}"
mkdir -p "$WORK"
fmt="%e s wall, %U s user, %M KiB peak RSS"
for n in "${SIZES[@]}"; do
  python3 bench/make_scaling_model.py chain "$n" "$WORK/chain$n.onnx"
  python3 bench/make_scaling_model.py sum "$n" "$WORK/sum$n.onnx"
  last=$((n - 1))
  /usr/bin/time -f "chain $n, compile:         $fmt" \
    "$BIN/smpc" compile "$WORK/chain$n.onnx" -o "$WORK/chain$n.smpx" > /dev/null
  /usr/bin/time -f "chain $n, compile --train: $fmt" \
    "$BIN/smpc" compile "$WORK/chain$n.onnx" -o "$WORK/chain$n-train.smpx" \
    --train --loss "mse:t$last:labels" > /dev/null
  /usr/bin/time -f "sum $n,   compile:         $fmt" \
    "$BIN/smpc" compile "$WORK/sum$n.onnx" -o "$WORK/sum$n.smpx" > /dev/null
done
