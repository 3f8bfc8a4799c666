#!/usr/bin/env bash
# wgmma-failed-rows.sh ABLATIONS TMP: ablation_stage of
# scripts/device-kit-ablations.sh on ablations made up here, each row's run
# stubbed (prints what it would run), with and without WGMMA_FAILED; for
# device-kit-wgmma-failed.test.
set -euo pipefail
# shellcheck disable=SC1090
source "$1"
# shellcheck disable=SC2034 # the stage reads them
LOGS=$2/logs SUMMARY=$2/summary.md min_ablate=0
mkdir -p "$LOGS" "$2/b"
b=$2/b
: > "$b/gpt2-fused.smpx"
printf '%s\n' attention-wgmma attention-wgmma-rows-128 attention-rows-128 \
  > "$b/ablations.txt"
echo SMP_ATTENTION_WGMMA=1 > "$b/ablate-attention-wgmma.env"
echo SMP_ATTENTION_WGMMA=1 SMP_ATTENTION_FORWARD_ROWS=128 \
  > "$b/ablate-attention-wgmma-rows-128.env"
echo SMP_ATTENTION_FORWARD_ROWS=128 > "$b/ablate-attention-rows-128.env"
room() { return 0; }
stage_begin() { :; }
stage_end() { :; }
ablation_row() { # NAME FLAGS ARTIFACT DEV BDIR STEPS VAR=VALUE...
  echo "| $1 | ran ${*:7} |" >> "$SUMMARY"
}
for failed in 0 1; do
  : > "$SUMMARY"
  # shellcheck disable=SC2034 # wgmma_failed reads it
  WGMMA_FAILED=$failed
  ablation_stage "$b" cuda 10
  sed "s/^/failed=$failed: /" "$SUMMARY" | grep 'ablate-\|gpt2-fused'
done
