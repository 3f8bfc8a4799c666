#!/usr/bin/env bash
# best-row.sh ABLATIONS TMP: best_row of scripts/device-kit-ablations.sh on rows
# made up here, its row's run stubbed (prints what it would run); for
# device-kit-best-row.test.
set -euo pipefail
# shellcheck disable=SC1090
source "$1"
LOGS=$2/logs SUMMARY=$2/summary.md
ablation_row() { # NAME FLAGS ARTIFACT DEV BDIR STEPS VAR=VALUE...
  echo "row $1 | $2 | $3 | ${*:7}"
}
row() { # NAME MS ARTIFACT FLAGS [ENV]
  ROW_MS[$1]=$2 ROW_ART[$1]=$3 ROW_FLAGS[$1]=$4 ROW_ENV[$1]=${5:-}
}
# shellcheck disable=SC2034 # best_row reads them
reset() { declare -gA ROW_MS=() ROW_ART=() ROW_ENV=() ROW_FLAGS=(); }

reset
row gpt2-fused 40.00 /b/gpt2-fused.smpx "(the benchmark's)"
row ablate-dgelu-epilogue 39.0 /b/ablate-dgelu-epilogue.smpx --dgelu-epilogue
row ablate-dgelu-no-bias-grad 38.5 /b/ablate-dgelu-no-bias-grad.smpx \
  "--dgelu-epilogue --no-bias-grad-epilogue"
row ablate-no-residual-epilogue 41.0 /b/ablate-no-residual-epilogue.smpx \
  --no-residual-epilogue
row ablate-batch-x2 30.0 /b/ablate-batch-x2.smpx "--batch-size 32"
row ablate-attention-rows-128 39.7 /b/gpt2-fused.smpx \
  "SMP_ATTENTION_FORWARD_ROWS=128 (environment)" SMP_ATTENTION_FORWARD_ROWS=128
row ablate-tune-gemm 35.0 /b/gpt2-fused.smpx "(environment)" \
  "SMP_CUBLASLT_TUNE=1 SMP_CUBLASLT_TUNE_FILE=$LOGS/gemm-tuning.txt"
row ablate-use-tuned-gemm 39.5 /b/gpt2-fused.smpx "(environment)" \
  "SMP_CUBLASLT_TUNE_FILE=$LOGS/gemm-tuning.txt"
echo "faster: $(best_row /b cuda 10)"

reset
row gpt2-fused 40.00 /b/gpt2-fused.smpx "(the benchmark's)"
row ablate-dgelu-epilogue 40.5 /b/ablate-dgelu-epilogue.smpx --dgelu-epilogue
row ablate-attention-rows-128 39.0 /b/gpt2-fused.smpx \
  "SMP_ATTENTION_FORWARD_ROWS=128 (environment)" SMP_ATTENTION_FORWARD_ROWS=128
row ablate-use-tuned-gemm 39.9 /b/gpt2-fused.smpx "(environment)" \
  "SMP_CUBLASLT_TUNE_FILE=$LOGS/gemm-tuning.txt"
echo "envs only: $(best_row /b cuda 10)"

# Two rows set one variable: the faster's value alone, the fastest first.
reset
row gpt2-fused 40.00 /b/gpt2-fused.smpx "(the benchmark's)"
row ablate-attention-wgmma 38.0 /b/gpt2-fused.smpx \
  "SMP_ATTENTION_WGMMA=1 (environment)" SMP_ATTENTION_WGMMA=1
row ablate-attention-wgmma-forward 37.0 /b/gpt2-fused.smpx \
  "SMP_ATTENTION_WGMMA=forward (environment)" SMP_ATTENTION_WGMMA=forward
row ablate-attention-rows-128 39.0 /b/gpt2-fused.smpx \
  "SMP_ATTENTION_FORWARD_ROWS=128 (environment)" SMP_ATTENTION_FORWARD_ROWS=128
echo "one value: $(best_row /b cuda 10)"

reset
row gpt2-fused 40.00 /b/gpt2-fused.smpx "(the benchmark's)"
row ablate-dgelu-epilogue 40.5 /b/ablate-dgelu-epilogue.smpx --dgelu-epilogue
best_row /b cuda 10
echo "none: $(cat "$SUMMARY")"
