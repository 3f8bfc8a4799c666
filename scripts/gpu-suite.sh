#!/usr/bin/env bash
# The CUDA backend against the CPU backend on the same artifacts, in two
# halves so that the compiling half runs where smpc is (it links MLIR) and
# the running half wherever smprun and a GPU are (scripts/device-kit.sh):
#
#   gpu-suite.sh compile DIR          smpc: every artifact of the suite into DIR
#   gpu-suite.sh run DIR OUT [DEVICE] smprun: the suite on DEVICE (default
#                                     cuda) against --device cpu, one line per
#                                     check to stdout, logs and metrics in OUT
#                                     (SUITE_JOBS=2 or 3: as many parts of it
#                                     at once, the lines in the same order)
#
# The suite (test/smprun/cuda.test runs both halves and checks the lines):
# every training fixture (mlp, cnn_bn, gpt, llama, bert) with SGD and AdamW,
# fp32 and bf16, 5 steps of batch 8: per-step losses and gradient norms of
# DEVICE within 1e-4 of the CPU in fp32, 2e-2 in bf16; the GPT with
# activation offloading and with full recomputation against the CPU (the
# offloading run again with --no-overlap, its copies waited for at once:
# the same bits as on the copy stream beside compute; and with
# --cuda-graph, its steps from the second on one CUDA graph: the same
# bits again, "gpt/off-graph", SKIPPED on the CPU); the
# GPT's AdamW runs again on DEVICE, bit for bit the first, twice, their
# checkpoints' tensors the same bytes ("again/gpt/P"); a
# checkpoint written on DEVICE resumed on the CPU (steps 4-5 equal the
# uninterrupted CPU run); --save-onnx from DEVICE. Then the Hugging Face
# exports of test/smprun/real-models.test (REAL, default test/fixtures/real):
# fp32 SGD and AdamW within 1e-4 of PyTorch's losses and gradient norms
# ("real/ARCH-OPT: ... ok"), bf16 AdamW within 2e-2 of the CPU
# ("real/ARCH-bf16: ..."). Last, decoders with head dims the tensor-core
# attention takes (smp-modelgen: a GPT with D = 64 and a LLaMA with D = 32
# and grouped-query attention, T = 96: two query tiles, the second a
# tail), bf16 AdamW within 2e-2 of the CPU ("wide/NAME: ..."), the GPT's
# again with its attention on Hopper's wgmma in blocks of one and of two
# warpgroups ("wide/gpt-d64-wgmma-64", "-128"; SKIPPED on a GPU other than
# an H100/H200). Then random
# dropout (DROPOUT, default test/fixtures/dropout, test/smprun/dropout.test):
# the transformer block (its attention-probability dropout drawn inside the
# fused attention kernels) with SGD and the Hugging Face GPT-2 with AdamW,
# fp32 within 1e-4 of PyTorch trained with smp's masks
# ("dropout/NAME: ... ok"; the block again with --cuda-graph, each step's
# masks drawn in its graph's launch: "dropout/block-graph", SKIPPED on the
# CPU), and the block in bf16 within 2e-2 of the CPU
# ("dropout/block-bf16: ..."); the block's and GPT-2's runs evaluate
# held-out samples (--eval-data: the step's forward with dropout off;
# GPT-2's accuracy too, --eval-accuracy, its hits and labels PyTorch's), and
# a ResNet trains 5 steps and evaluates with its batch norms on the running
# statistics, each within 1e-4 of PyTorch's eval() loss ("eval/NAME: ...").
# Last, smpc --eval-metrics (ACCURACY, default
# test/fixtures/hf-trainer/accuracy, test/smprun/eval-accuracy.test): a
# Hugging Face BERT of 2 classes trained 12 AdamW steps, its evaluations'
# F1, Matthews' correlation and weighted F1 (the confusion matrix counted
# on DEVICE) scikit-learn's, a GPT-2's top-2 and top-5 accuracy, and a BERT
# regression's Pearson and Spearman correlations scipy's, each with its
# predictions (--eval-predictions: gathered on DEVICE) PyTorch's
# ("metrics/NAME: ...").
#
# Environment: SMPC and SMPRUN (default: smpc / smprun on PATH), MODELGEN
# (default: smp-modelgen beside SMPC), SMPCKPT (default: smp-checkpoint
# beside SMPRUN), PYTHON
# (default python3), FIXTURES (default test/fixtures/train of this
# checkout); for `run` also SMPRUN_TIMEOUT (seconds one smprun may take:
# killed by timeout(1) after that) and SUITE_DEADLINE (unix seconds: no
# smprun runs past it, and a check that cannot start before it prints
# "NAME: SKIPPED (deadline)"). Every check prints one line; a failed run or
# comparison prints a line with FAILED (and the run that failed its own
# line); the script itself exits 0 once it has run every check.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SMPC=${SMPC:-smpc}
SMPRUN=${SMPRUN:-smprun}
SMPCKPT=${SMPCKPT:-$(dirname "$(command -v "$SMPRUN" || echo "$SMPRUN")")/smp-checkpoint}
PYTHON=${PYTHON:-python3}
FIXTURES=${FIXTURES:-$ROOT/test/fixtures/train}
REAL=${REAL:-$ROOT/test/fixtures/real}
DROPOUT=${DROPOUT:-$ROOT/test/fixtures/dropout}
RESNET=${RESNET:-$ROOT/test/fixtures/resnet}
ACCURACY=${ACCURACY:-$ROOT/test/fixtures/hf-trainer/accuracy}
# The --eval-metrics checks: NAME:model:lr:loss:labels:metrics
# (eval-accuracy.test's and eval-predictions.test's; `labels` the held-out
# file label_ids.npy holds: the labels input as fed).
METRICS=("bincls:bincls:0.01:loss:labels:accuracy,f1,matthews_correlation,f1_weighted"
  "lm:lm:0.003:loss:labels:accuracy,top2_accuracy,top5_accuracy"
  "reg:reg:0.01:mse%logits%labels:labels:pearson,spearmanr")
REAL_ARCHS=(gpt2 bert distilbert roberta opt llama mistral gpt2_dyn llama_dyn
  vit_dyn t5_noopt)
REAL_BF16=(gpt2 bert llama vit_dyn t5_noopt)
MODELGEN=${MODELGEN:-$(dirname "$(command -v "$SMPC" || echo "$SMPC")")/smp-modelgen}
# The decoders of the tensor-core attention check: NAME:smp-modelgen flags.
WIDE=("gpt-d64:gpt --layers 2 --hidden 128 --heads 2"
  "llama-d32-gqa:llama --layers 2 --hidden 128 --heads 4 --kv-heads 2")
COMPARE=$ROOT/test/train/compare_losses.py
SAME=$ROOT/test/train/same_losses.py
SAME_FILES=$ROOT/test/train/same_files.py
MODELS=(mlp cnn_bn gpt llama bert)
OPTIMIZERS=("sgd --lr 0.1" "adamw --lr 1e-3")

usage() { awk 'NR > 1 && /^set -uo pipefail/ {exit} NR > 1' "$0" >&2; exit 2; }

# The label input of a real architecture's export.
real_labels() { case $1 in vit*) echo class_labels ;; *) echo labels ;; esac; }

# The real architectures' artifacts into DIR/real (smpc's warnings about
# these exports, expected, in DIR/real/*.log).
compile_real() {
  local dir=$1/real a c lr
  mkdir -p "$dir"
  for a in "${REAL_ARCHS[@]}"; do
    for c in sgd adamw; do
      lr=0.1
      [ $c = adamw ] && lr=1e-2
      "$SMPC" compile "$REAL/$a.onnx" --train --target cuda \
        --loss "cross_entropy:logits:$(real_labels $a)" --optimizer $c --lr $lr \
        --batch-size 8 -o "$dir/$a-$c.smpx" > /dev/null 2> "$dir/$a-$c.log" ||
        { cat "$dir/$a-$c.log" >&2; return 1; }
    done
  done
  for a in "${REAL_BF16[@]}"; do
    "$SMPC" compile "$REAL/$a.onnx" --train --target cuda --precision bf16 \
      --loss "cross_entropy:logits:$(real_labels $a)" --optimizer adamw \
      --lr 1e-2 --batch-size 8 -o "$dir/$a-bf16.smpx" > /dev/null \
      2> "$dir/$a-bf16.log" || { cat "$dir/$a-bf16.log" >&2; return 1; }
  done
}

# The WIDE decoders (random weights, 40 samples of data) and their bf16
# AdamW artifacts into DIR/wide (the models themselves deleted: the kit
# carries the checkout too, 64 MiB in all).
compile_wide() {
  local dir=$1/wide w name
  mkdir -p "$dir"
  for w in "${WIDE[@]}"; do
    name=${w%%:*}
    # shellcheck disable=SC2086
    "$MODELGEN" ${w#*:} --seq 96 --vocab 96 -o "$dir/$name.onnx" \
      --write-data "$dir/$name" 40 > /dev/null || return 1
    "$SMPC" compile "$dir/$name.onnx" --train --target cuda --precision bf16 \
      --loss cross_entropy:logits:labels --optimizer adamw --lr 1e-3 \
      --batch-size 8 -o "$dir/$name.smpx" > /dev/null || return 1
    # The run needs the artifact and the data, not the 2 MB model.
    rm -f "$dir/$name.onnx" "$dir/$name.onnx.data"
  done
}

# The dropout fixtures' artifacts into DIR/dropout (dropout.test's flags).
compile_dropout() {
  local dir=$1/dropout
  mkdir -p "$dir"
  local block=("$SMPC" compile "$DROPOUT/block.onnx" --train --target cuda
    --loss mse:y:t --batch-size 8 --seed 1234 --optimizer sgd --lr 0.05
    --momentum 0.9)
  "${block[@]}" -o "$dir/block.smpx" > /dev/null || return 1
  "${block[@]}" --precision bf16 -o "$dir/block-bf16.smpx" > /dev/null ||
    return 1
  "$SMPC" compile "$DROPOUT/gpt2/gpt2.onnx" --train --target cuda \
    --loss cross_entropy:logits:labels --batch-size 8 --seed 1234 \
    --optimizer adamw --lr 0.01 --eval-accuracy -o "$dir/gpt2.smpx" > /dev/null \
    2> "$dir/gpt2.log" || { cat "$dir/gpt2.log" >&2; return 1; }
  "$SMPC" compile "$RESNET/resnet.onnx" --train --target cuda \
    --loss cross_entropy:logits:labels --batch-size 8 --optimizer sgd \
    --lr 0.1 -o "$dir/resnet.smpx" > /dev/null
}

compile() {
  local dir=$1 m o c p extra
  mkdir -p "$dir"
  for m in "${MODELS[@]}"; do
    for o in "${OPTIMIZERS[@]}"; do
      c=${o%% *}
      for p in fp32 bf16; do
        extra=()
        [ $m = cnn_bn ] && extra=(--bn-stats running)
        "$SMPC" compile "$FIXTURES/$m.onnx" --train "${extra[@]}" --target cuda \
          --loss cross_entropy:logits:labels --optimizer $o --precision $p \
          --batch-size 8 -o "$dir/$m.$c.$p.smpx" > /dev/null || return 1
      done
    done
  done
  for mode in "off:--offload-activations" "rc:--checkpoint-activations full"; do
    # shellcheck disable=SC2086
    "$SMPC" compile "$FIXTURES/gpt.onnx" --train --target cuda \
      --loss cross_entropy:logits:labels --optimizer adamw --lr 1e-3 \
      --batch-size 8 ${mode#*:} -o "$dir/gpt.${mode%%:*}.smpx" > /dev/null || return 1
  done
  compile_real "$dir" || return 1
  compile_wide "$dir" || return 1
  compile_dropout "$dir" || return 1
  compile_metrics "$dir"
}

# The --eval-metrics artifacts (with --eval-predictions) into DIR/metrics.
compile_metrics() {
  local dir=$1/metrics m name model lr loss labels names
  mkdir -p "$dir"
  for m in "${METRICS[@]}"; do
    IFS=: read -r name model lr loss labels names <<< "$m"
    "$SMPC" compile "$ACCURACY/$model/$model.onnx" --train --target cuda \
      --loss "${loss//%/:}" --batch-size 8 --optimizer adamw --lr "$lr" \
      --eval-metrics "$names" --eval-predictions -o "$dir/$name.smpx" \
      > /dev/null 2> "$dir/$name.log" || { cat "$dir/$name.log" >&2; return 1; }
  done
}

# The --eval-metrics artifacts on DEVICE: 12 steps evaluated every 4, the
# training within 1e-4 of PyTorch, the metrics scikit-learn's (the hits,
# labels and metrics exactly: the smallest gap between a label's logit and
# the best other is 1.9e-3) and the regression's correlations scipy's
# within 1e-5; the predictions PyTorch's (classes exactly: the smallest gap
# between a row's two largest logits is 2.1e-4; values within 1e-5).
run_metrics() {
  local dir=$1 dev=$2 m name model lr loss labels names line acc
  for m in "${METRICS[@]}"; do
    IFS=: read -r name model lr loss labels names <<< "$m"
    skip "metrics/$name" && continue
    rm -rf "$OUT/metrics.$name.jsonl" "$OUT/metrics.$name.predictions"
    acc=(--metrics "${names#accuracy,}" --metric-atol 1e-5)
    [ "${names%%,*}" = accuracy ] && acc=(--accuracy --metrics "${names#accuracy,}")
    if runone "metrics.$name.$dev" "$dir/$name.smpx" --device "$dev" \
      --data "$ACCURACY/$model/data" --steps 12 --eval-every 4 \
      --eval-data "$ACCURACY/$model/eval" --metrics "$OUT/metrics.$name.jsonl" \
      --eval-predictions "$OUT/metrics.$name.predictions"; then
      line=$("$PYTHON" "$COMPARE" "$OUT/metrics.$name.jsonl" \
        "$ACCURACY/$model/ref_adamw.json" --rtol 1e-4 --label "metrics/$name" 2>&1 |
        tail -n 1)
      case $line in
        *": ok") evals "metrics/$name" "$OUT/metrics.$name.jsonl" \
          "$ACCURACY/$model/ref_adamw_eval.json" "${acc[@]}" \
          --predictions "$OUT/metrics.$name.predictions" \
          --labels "$ACCURACY/$model/eval/$labels.npy" ;;
        *) echo "$line FAILED" ;;
      esac
    else
      echo "metrics/$name: FAILED (the run failed)"
    fi
  done
}

# The seconds before SUITE_DEADLINE (a lot without one).
left() {
  if [ -n "${SUITE_DEADLINE:-}" ]; then
    echo $((SUITE_DEADLINE - $(date +%s)))
  else
    echo 1000000
  fi
}

# skip CHECK: prints "CHECK: SKIPPED (deadline)" and succeeds when the
# deadline is too close to start the check (a few seconds).
skip() {
  [ "$(left)" -ge 5 ] && return 1
  echo "$1: SKIPPED (deadline: $(left) s left)"
}

# ": " and FILE's last line, if it has one.
last_line() {
  local l
  l=$(tail -n 1 "$1" 2>/dev/null)
  [ -z "$l" ] || echo ": $l"
}

# One smprun, its output in OUT/NAME.log, under timeout(1) with
# SMPRUN_TIMEOUT or SUITE_DEADLINE; prints "NAME: FAILED to run" on failure.
runone() {
  local name=$1 limit rc=0
  shift
  limit=$(left)
  if [ -n "${SMPRUN_TIMEOUT:-}" ] && [ "$SMPRUN_TIMEOUT" -lt "$limit" ]; then
    limit=$SMPRUN_TIMEOUT
  fi
  if [ "$limit" -lt 1000000 ]; then
    [ "$limit" -ge 1 ] || limit=1
    timeout --foreground -k 5 "$limit" "$SMPRUN" "$@" > "$OUT/$name.log" 2>&1 < /dev/null || rc=$?
  else
    "$SMPRUN" "$@" > "$OUT/$name.log" 2>&1 || rc=$?
  fi
  [ $rc = 0 ] && return 0
  if [ "$limit" -lt 1000000 ] && { [ $rc = 124 ] || [ $rc = 137 ]; }; then
    echo "$name: FAILED to run (timed out after $limit s)$(last_line "$OUT/$name.log")"
  else
    echo "$name: FAILED to run (exit $rc)$(last_line "$OUT/$name.log")"
  fi
  return 1
}

# against_cpu LABEL BASE ART DATA TOL DEVICE: 5 steps of ART on the CPU
# and on DEVICE (metrics OUT/BASE.cpu.jsonl and OUT/BASE.DEVICE.jsonl), and
# "LABEL: ..." saying whether their losses and gradient norms agree within
# TOL (or FAILED; SKIPPED past the deadline).
against_cpu() {
  local label=$1 base=$2 art=$3 data=$4 tol=$5 dev=$6
  skip "$label" && return 0
  rm -f "$OUT/$base.cpu.jsonl" "$OUT/$base.$dev.jsonl"
  if runone "$base.cpu" "$art" --device cpu --data "$data" --steps 5 \
    --metrics "$OUT/$base.cpu.jsonl" &&
    runone "$base.$dev" "$art" --device "$dev" --data "$data" --steps 5 \
      --metrics "$OUT/$base.$dev.jsonl"; then
    echo "$label: $("$PYTHON" "$SAME" "$OUT/$base.cpu.jsonl" \
      "$OUT/$base.$dev.jsonl" --rtol "$tol" || echo FAILED)"
  else
    echo "$label: FAILED (a run failed)"
  fi
}

# off_again NAME FLAG WHAT DIR DEVICE: the offloaded GPT again on DEVICE
# with FLAG, the same bits as its WHAT run before ("gpt/off-NAME").
off_again() {
  local name=$1 flag=$2 what=$3 dir=$4 dev=$5 run="gpt.off.$1.$5"
  skip "gpt/off-$name" && return 0
  rm -f "$OUT/$run.jsonl"
  if ! runone "$run" "$dir/gpt.off.smpx" --device "$dev" \
    --data "$FIXTURES/gpt" --steps 5 "$flag" --metrics "$OUT/$run.jsonl"; then
    echo "gpt/off-$name: FAILED (the run failed)"
  elif [ ! -s "$OUT/gpt.off.$dev.jsonl" ]; then
    echo "gpt/off-$name: FAILED (no $what run to compare with)"
  else
    echo "gpt/off-$name: $("$PYTHON" "$SAME" "$OUT/gpt.off.$dev.jsonl" \
      "$OUT/$run.jsonl" || echo FAILED)"
  fi
}

# The suite's first part: the training fixtures against the CPU, then the
# offloaded, recomputed, repeated, resumed and exported GPT (which read the
# fixtures' CPU runs).
run_first() {
  local dir=$1 dev=$2 m o c p tol
  for m in "${MODELS[@]}"; do
    for o in "${OPTIMIZERS[@]}"; do
      c=${o%% *}
      for p in fp32 bf16; do
        tol=1e-4
        [ $p = bf16 ] && tol=2e-2
        against_cpu "$m/$c/$p" "$m.$c.$p" "$dir/$m.$c.$p.smpx" \
          "$FIXTURES/$m" $tol "$dev"
      done
    done
  done
  # Offloading and recomputation on the device equal the CPU.
  for n in off rc; do
    skip "gpt/$n" && continue
    rm -f "$OUT/gpt.$n.$dev.jsonl"
    if ! runone "gpt.$n.$dev" "$dir/gpt.$n.smpx" --device "$dev" \
      --data "$FIXTURES/gpt" --steps 5 --metrics "$OUT/gpt.$n.$dev.jsonl"; then
      echo "gpt/$n: FAILED (the run failed)"
    elif [ ! -s "$OUT/gpt.adamw.fp32.cpu.jsonl" ]; then
      echo "gpt/$n: FAILED (no CPU run of gpt/adamw/fp32 to compare with)"
    else
      echo "gpt/$n: $("$PYTHON" "$SAME" "$OUT/gpt.adamw.fp32.cpu.jsonl" \
        "$OUT/gpt.$n.$dev.jsonl" --rtol 1e-4 || echo FAILED)"
    fi
  done
  # The offload copies ran on the copy stream beside the compute stream:
  # waiting for each at once (--no-overlap) gives the same bits, or the
  # streams raced.
  off_again serial --no-overlap overlapped "$dir" "$dev"
  # The offloaded step again as one CUDA graph from its second step on
  # (--cuda-graph: its copies recorded on their stream beside the compute):
  # the same bits as queued one by one. The CPU records no graph.
  if [ "$dev" != cpu ]; then
    off_again graph --cuda-graph "one-by-one" "$dir" "$dev"
  elif ! skip gpt/off-graph; then
    echo "gpt/off-graph: SKIPPED (the CPU records no graph: --cuda-graph is a GPU's)"
  fi
  run_again "$dir" "$dev"
  # A checkpoint written on the device resumes on the CPU: steps 4-5 equal
  # the uninterrupted CPU run.
  local a="$dir/gpt.adamw.fp32.smpx"
  rm -rf "$OUT/ckpt"
  if ! skip resume; then
    rm -f "$OUT/resumed.jsonl"
    if ! runone "ckpt.$dev" "$a" --device "$dev" --data "$FIXTURES/gpt" \
      --steps 3 --checkpoint-dir "$OUT/ckpt" --checkpoint-every 3 ||
      ! runone resume.cpu "$a" --device cpu --data "$FIXTURES/gpt" --steps 5 \
        --checkpoint-dir "$OUT/ckpt" --resume --metrics "$OUT/resumed.jsonl"; then
      echo "resume: FAILED (a run failed)"
    elif [ ! -s "$OUT/gpt.adamw.fp32.cpu.jsonl" ]; then
      echo "resume: FAILED (no CPU run of gpt/adamw/fp32 to compare with)"
    else
      tail -n 2 "$OUT/gpt.adamw.fp32.cpu.jsonl" > "$OUT/steps45.jsonl"
      echo "resume: $("$PYTHON" "$SAME" "$OUT/steps45.jsonl" \
        "$OUT/resumed.jsonl" --rtol 1e-4 || echo FAILED)"
    fi
  fi
  # The model trained on the device exports.
  rm -f "$OUT/trained.onnx"
  skip save-onnx && return 0
  if ! runone "save-onnx.$dev" "$a" --device "$dev" --data "$FIXTURES/gpt" \
    --steps 5 --save-onnx "$OUT/trained.onnx" \
    --source-model "$FIXTURES/gpt.onnx"; then
    echo "save-onnx: FAILED (smprun failed)"
  elif [ -s "$OUT/trained.onnx" ]; then
    echo "save-onnx: wrote $(wc -c < "$OUT/trained.onnx") bytes"
  else
    echo "save-onnx: FAILED (no file)"
  fi
}

# The checks after the real architectures': none reads another's files.
run_rest() {
  run_wide "$1/wide" "$2"
  run_dropout "$1/dropout" "$2"
  run_metrics "$1/metrics" "$2"
}

# The suite, its lines in one order whatever SUITE_JOBS is: with 2 or
# more, the real architectures' checks run beside the first part, and with
# 3 or more the rest beside both, their lines kept until the part before
# them has printed its own.
run() {
  local dir=$1 dev=$3 jobs=${SUITE_JOBS:-1} real rest pr=0 pw=0
  OUT=$2
  [[ $jobs =~ ^[1-9][0-9]*$ ]] || {
    echo "gpu-suite.sh: SUITE_JOBS=$jobs: the number of parts run at once (1, 2 or 3)" >&2
    exit 2
  }
  mkdir -p "$OUT"
  real=$OUT/suite.real.txt rest=$OUT/suite.rest.txt
  if [ "$jobs" -ge 2 ]; then
    run_real "$dir/real" "$dev" > "$real" &
    pr=$!
  fi
  if [ "$jobs" -ge 3 ]; then
    run_rest "$dir" "$dev" > "$rest" &
    pw=$!
  fi
  run_first "$dir" "$dev"
  if [ $pr = 0 ]; then
    run_real "$dir/real" "$dev"
  else
    wait $pr
    cat "$real"
  fi
  if [ $pw = 0 ]; then
    run_rest "$dir" "$dev"
  else
    wait $pw
    cat "$rest"
  fi
  return 0
}

# The device's runs repeat to the bit: the GPT (AdamW, fp32 and bf16) runs
# twice more on DEVICE, each saving a checkpoint at its last step; the first
# gives the suite's first run's losses and gradient norms exactly, and the
# two checkpoints hold the same bytes in every parameter and optimizer
# state (smp-checkpoint export --state; where they differ the tensors are
# named: the backward op that made their gradient, or one before it, sums
# in its threads' order). No kernel may: the embedding's gradient is
# sorted, the attention's backward is two passes, every sum's grouping
# follows the shapes.
run_again() {
  local dir=$1 dev=$2 p r first at ok
  for p in fp32 bf16; do
    skip "again/gpt/$p" && continue
    first=$OUT/gpt.adamw.$p.$dev.jsonl
    if [ ! -s "$first" ]; then
      echo "again/gpt/$p: FAILED (no first run of gpt/adamw/$p)"
      continue
    fi
    ok=1
    for r in 1 2; do
      at=$OUT/again.$p.$r
      rm -rf "$at" && mkdir -p "$at"
      if ! runone "gpt.adamw.$p.again$r.$dev" "$dir/gpt.adamw.$p.smpx" \
        --device "$dev" --data "$FIXTURES/gpt" --steps 5 \
        --metrics "$at/metrics.jsonl" --checkpoint-dir "$at/ckpt" \
        --checkpoint-every 5; then
        ok=0
      elif ! "$SMPCKPT" export "$at/ckpt" --format npy --state \
        -o "$at/tensors" > "$at/export.log" 2>&1; then
        echo "again/gpt/$p: FAILED (smp-checkpoint export$(last_line "$at/export.log"))"
        ok=2
      fi
      [ $ok = 1 ] || break
    done
    [ $ok = 0 ] && echo "again/gpt/$p: FAILED (a run failed)"
    [ $ok = 1 ] || continue
    echo "again/gpt/$p: $("$PYTHON" "$SAME" "$first" \
      "$OUT/again.$p.1/metrics.jsonl" || echo FAILED); $("$PYTHON" \
      "$SAME_FILES" "$OUT/again.$p.1/tensors" "$OUT/again.$p.2/tensors")"
  done
}

# The dropout fixtures on DEVICE: fp32 against PyTorch with smp's masks
# (8 steps, as dropout.test), the block in bf16 against the CPU.
run_dropout() {
  local dir=$1 dev=$2 name data ref line
  for name in block gpt2; do
    data=$DROPOUT/data ref=$DROPOUT/ref_sgd.json
    [ $name = gpt2 ] && data=$DROPOUT/gpt2/data ref=$DROPOUT/gpt2/ref_adamw.json
    skip "dropout/$name" && { skip "eval/$name"; continue; }
    rm -f "$OUT/dropout.$name.jsonl"
    if runone "dropout.$name.$dev" "$dir/$name.smpx" --device "$dev" \
      --data "$data" --steps 8 --metrics "$OUT/dropout.$name.jsonl" \
      --eval-data "${data%/data}/eval" --eval-every 4; then
      line=$("$PYTHON" "$COMPARE" "$OUT/dropout.$name.jsonl" "$ref" \
        --rtol 1e-4 --label "dropout/$name" 2>&1 | tail -n 1)
      case $line in *": ok") echo "$line" ;; *) echo "$line FAILED" ;; esac
      # GPT-2's evaluations count its accuracy too (--eval-accuracy:
      # smp.label_rank on the device), as PyTorch's argmax does.
      evals "eval/$name" "$OUT/dropout.$name.jsonl" "${ref%.json}_eval.json" \
        $([ $name = gpt2 ] && echo --accuracy)
    else
      echo "dropout/$name: FAILED (the run failed)"
      echo "eval/$name: FAILED (the run failed)"
    fi
  done
  # The block again as one CUDA graph from its second step (--cuda-graph:
  # each step's masks from the device's step counter): PyTorch's numbers
  # still. The CPU records no graph.
  if [ "$dev" = cpu ]; then
    skip dropout/block-graph ||
      echo "dropout/block-graph: SKIPPED (the CPU records no graph: --cuda-graph is a GPU's)"
  elif ! skip dropout/block-graph; then
    rm -f "$OUT/dropout.block-graph.jsonl"
    if runone "dropout.block-graph.$dev" "$dir/block.smpx" --device "$dev" \
      --data "$DROPOUT/data" --steps 8 --cuda-graph \
      --metrics "$OUT/dropout.block-graph.jsonl"; then
      line=$("$PYTHON" "$COMPARE" "$OUT/dropout.block-graph.jsonl" \
        "$DROPOUT/ref_sgd.json" --rtol 1e-4 --label dropout/block-graph 2>&1 |
        tail -n 1)
      case $line in *": ok") echo "$line" ;; *) echo "$line FAILED" ;; esac
    else
      echo "dropout/block-graph: FAILED (the run failed)"
    fi
  fi
  against_cpu "dropout/block-bf16" "dropout.block-bf16" \
    "$dir/block-bf16.smpx" "$DROPOUT/data" 2e-2 "$dev"
  skip eval/resnet && return 0
  rm -f "$OUT/eval.resnet.jsonl"
  if runone "eval.resnet.$dev" "$dir/resnet.smpx" --device "$dev" \
    --data "$RESNET" --steps 5 --eval-data "$RESNET/heldout" \
    --metrics "$OUT/eval.resnet.jsonl"; then
    evals eval/resnet "$OUT/eval.resnet.jsonl" "$RESNET/ref_sgd_eval.json"
  else
    echo "eval/resnet: FAILED (the run failed)"
  fi
}

# evals NAME METRICS REF [FLAG...]: the run's evaluations against PyTorch's
# eval() losses (compare_evals.py, with FLAG: --accuracy), one line.
evals() {
  local line
  line=$("$PYTHON" "$ROOT/test/train/compare_evals.py" "$2" "$3" --rtol 1e-4 \
    --label "$1" "${@:4}" 2>&1 | tail -n 1)
  case $line in *": ok") echo "$line" ;; *) echo "$line FAILED" ;; esac
}

# The WIDE decoders on DEVICE against the CPU (bf16: the tensor-core
# attention on a GPU).
run_wide() {
  local dir=$1 dev=$2 w name rows label base out
  for w in "${WIDE[@]}"; do
    name=${w%%:*}
    against_cpu "wide/$name" "wide.$name" "$dir/$name.smpx" "$dir/$name" \
      2e-2 "$dev"
  done
  # The D = 64 decoder with its attention on Hopper's wgmma (both passes),
  # in blocks of one warpgroup and of two: on an H100/H200; elsewhere
  # smprun refuses the option and the line says SKIPPED and why.
  for rows in 64 128; do
    label=wide/gpt-d64-wgmma-$rows base=wide.gpt-d64-wgmma-$rows
    out=$(SMP_ATTENTION_WGMMA=1 SMP_ATTENTION_FORWARD_ROWS=$rows \
      SMP_ATTENTION_GRAD_ROWS=$rows against_cpu "$label" "$base" \
      "$dir/gpt-d64.smpx" "$dir/gpt-d64" 2e-2 "$dev")
    if grep -qs 'needs compute capability 9.0' "$OUT/$base.$dev.log"; then
      echo "$label: SKIPPED (no wgmma here: $(grep -o 'device [0-9]* has [0-9.]*' \
        "$OUT/$base.$dev.log" | head -n 1))"
    else
      echo "$out"
    fi
  done
}

# The real architectures on DEVICE: fp32 against PyTorch's references, bf16
# against the CPU.
run_real() {
  local dir=$1 dev=$2 a c line
  for a in "${REAL_ARCHS[@]}"; do
    for c in sgd adamw; do
      skip "real/$a-$c" && continue
      rm -f "$OUT/real.$a-$c.jsonl"
      if runone "real.$a-$c.$dev" "$dir/$a-$c.smpx" --device "$dev" \
        --data "$REAL" --steps 5 --metrics "$OUT/real.$a-$c.jsonl"; then
        line=$("$PYTHON" "$COMPARE" "$OUT/real.$a-$c.jsonl" \
          "$REAL/${a%%_*}/ref_$c.json" --rtol 1e-4 --label "real/$a-$c" 2>&1 |
          tail -n 1)
        case $line in *": ok") echo "$line" ;; *) echo "$line FAILED" ;; esac
      else
        echo "real/$a-$c: FAILED (the run failed)"
      fi
    done
  done
  for a in "${REAL_BF16[@]}"; do
    against_cpu "real/$a-bf16" "real.$a-bf16" "$dir/$a-bf16.smpx" "$REAL" \
      2e-2 "$dev"
  done
}

case "${1:-}" in
  compile) [ $# -eq 2 ] || usage; compile "$2" ;;
  run) [ $# -ge 3 ] && [ $# -le 4 ] || usage; run "$2" "$3" "${4:-cuda}" ;;
  *) usage ;;
esac
