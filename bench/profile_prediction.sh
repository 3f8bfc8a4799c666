#!/usr/bin/env bash
# Step time predicted from a profile (smpc compile --profile-db) against the
# measured one, for CPU multi-rank runs of the synthetic model (8 equal
# residual blocks of 1024x1024 matmuls, python/make_synthetic.py): each plan
# is run once with every rank profiled, then compiled again with those
# profiles, and the prediction compared with fresh runs' seconds per step
# (the median of three runs of 6 steps: two ranks on a 2-core machine vary
# by 10-20% from run to run). A pipeline's prediction runs its ranks'
# programs side by side (smp::estimatePipeline), so the rows include
# unequal stages (--pp-cuts) and every schedule. The profiles skip their
# first step (--profile-warmup 1: its first touches of the arena). With
# SMP_BASELINE_SMPC=PATH (another build's smpc) a column gives its
# prediction from the same profiles: a change to the model compared on the
# same measurements.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SMP_BIN:-build/bin}
D=${SMP_BENCH_DIR:-/tmp/smp-bubble}
[[ -f $D/synthetic.onnx ]] || ${PYTHON:-python3} python/make_synthetic.py "$D" --blocks 8 --hidden 1024
SMPC="$B/smpc"
compile() { $SMPC compile "$D/synthetic.onnx" --train --loss mse:y:target --optimizer sgd \
    --lr 0.01 --batch-size 512 "$@"; }
# The predicted step of the plan $1 (flags) from the profiles $2, by $SMPC.
predict() {
  # shellcheck disable=SC2086
  compile $1 --profile-db "$2" -o "$D/pred2.smpx" | grep -o 'predicted step time: [0-9.e-]*' |
    cut -d' ' -f4
}
BASE=${SMP_BASELINE_SMPC:-}
# Seconds per step of $D/pred.smpx on $1 ranks: the median of three runs.
measure() {
  for _ in 1 2 3; do
    "$B"/smprun -n "$1" "$D/pred.smpx" --data "$D/data" --steps 6 --threads 1 2> /dev/null |
      grep -o 'trained 6 steps in [0-9.]*' | cut -d' ' -f5
  done | sort -n | sed -n 2p
}
# A table row: name, measured seconds for 6 steps, predictions (this
# smpc's, then the baseline's).
row() {
  python3 -c "
m = $2 / 6
cells = [f'{p:.3f} ({100 * (p - m) / m:+.1f}%)' for p in [${3}${4:+, $4}]]
print('| $1 | ' + f'{m:.3f} | ' + ' | '.join(cells) + ' |')"
}
# The predictions of this smpc and of the baseline from profiles $2.
predictions() {
  local mine base=""
  mine=$(predict "$1" "$2")
  [[ -n $BASE ]] && base=$(SMPC=$BASE predict "$1" "$2")
  echo "$mine" "$base"
}
header() {
  echo "| $1 | measured s/step | predicted s/step (error) |${BASE:+ predicted by the baseline smpc |}"
  echo "| --- | --- | --- |${BASE:+ --- |}"
}
plans=("1 rank:1:" "dp2:2:--dp 2" "tp2:2:--tp 2"
       "pp2 1f1b m=8:2:--pp 2 --microbatches 8 --schedule 1f1b"
       "pp2 1f1b m=8, stages of 6 and 2 blocks:2:--pp 2 --microbatches 8 --schedule 1f1b --pp-cuts /block6/fc1"
       "pp2 gpipe m=4:2:--pp 2 --microbatches 4 --schedule gpipe"
       "pp2 zb-h1 m=8:2:--pp 2 --microbatches 8 --schedule zb-h1"
       "pp2 interleaved v=2 m=8:2:--pp 2 --microbatches 8 --schedule interleaved --virtual-stages 2")
header plan
for cfg in "${plans[@]}"; do
  IFS=: read -r name n flags <<< "$cfg"
  # shellcheck disable=SC2086
  compile $flags -o "$D/pred.smpx" > /dev/null
  "$B"/smprun -n "$n" "$D/pred.smpx" --data "$D/data" --steps 5 --threads 1 \
    --profile "$D/pred.prof.json" --profile-warmup 1 > /dev/null 2>&1
  files="$D/pred.prof.json"
  for ((r = 1; r < n; ++r)); do files="$files,$D/pred.prof.json.rank$r"; done
  read -r mine base <<< "$(predictions "$flags" "$files")"
  row "$name" "$(measure "$n")" "$mine" "$base"
done

# The same plans predicted from the one-rank profile only: measured times
# are rescaled by the ratio of the compiler's roofline cost of each op on
# the two plans' shapes (the profile records the cost it measured).
echo
header "plan (from the 1-rank profile)"
compile -o "$D/one.smpx" > /dev/null
"$B"/smprun "$D/one.smpx" --data "$D/data" --steps 5 --threads 1 --profile "$D/one.prof.json" \
  --profile-warmup 1 > /dev/null 2>&1
for cfg in "${plans[@]:1}"; do
  IFS=: read -r name n flags <<< "$cfg"
  read -r mine base <<< "$(predictions "$flags" "$D/one.prof.json")"
  # shellcheck disable=SC2086
  compile $flags -o "$D/pred.smpx" > /dev/null
  row "$name" "$(measure "$n")" "$mine" "$base"
done
