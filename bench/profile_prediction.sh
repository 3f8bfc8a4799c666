#!/usr/bin/env bash
# Step time predicted from a profile (smpc compile --profile-db) against the
# measured one, for CPU multi-rank runs of the synthetic model (8 equal
# residual blocks of 1024x1024 matmuls, python/make_synthetic.py): each plan
# is run once with every rank profiled, then compiled again with those
# profiles, and the prediction compared with a fresh run's seconds per step.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
D=${SMP_BENCH_DIR:-/tmp/smp-bubble}
[[ -f $D/synthetic.onnx ]] || python3 python/make_synthetic.py "$D" --blocks 8 --hidden 1024
echo "| plan | measured s/step | predicted s/step | error |"
echo "| --- | --- | --- | --- |"
for cfg in "1 rank:1:" "dp2:2:--dp 2" "pp2 1f1b m=8:2:--pp 2 --microbatches 8 --schedule 1f1b" \
           "tp2:2:--tp 2"; do
  IFS=: read -r name n flags <<< "$cfg"
  compile() { $B/smpc compile "$D/synthetic.onnx" --train --loss mse:y:target --optimizer sgd \
      --lr 0.01 --batch-size 512 $flags "$@"; }
  compile -o "$D/pred.smpx" > /dev/null
  $B/smprun -n "$n" "$D/pred.smpx" --data "$D/data" --steps 4 --threads 1 \
    --profile "$D/pred.prof.json" > /dev/null
  files="$D/pred.prof.json"
  for ((r = 1; r < n; ++r)); do files="$files,$D/pred.prof.json.rank$r"; done
  predicted=$(compile --profile-db "$files" -o "$D/pred2.smpx" | grep -o 'predicted step time: [0-9.e-]*' | cut -d' ' -f4)
  measured=$($B/smprun -n "$n" "$D/pred.smpx" --data "$D/data" --steps 4 --threads 1 |
    grep -o 'trained 4 steps in [0-9.]*' | cut -d' ' -f5)
  python3 -c "m=$measured/4; p=$predicted; print(f'| $name | {m:.3f} | {p:.3f} | {100*(p-m)/m:+.1f}% |')"
done

# The same plans predicted from the one-rank profile only: measured times
# are rescaled by the ratio of the compiler's roofline cost of each op on the
# two plans' shapes (the profile records the cost it measured), and a
# pipeline adds its schedule's bubble.
echo
echo "| plan (from the 1-rank profile) | measured s/step | predicted s/step | error |"
echo "| --- | --- | --- | --- |"
$B/smpc compile "$D/synthetic.onnx" --train --loss mse:y:target --optimizer sgd --lr 0.01 \
  --batch-size 512 -o "$D/one.smpx" > /dev/null
$B/smprun "$D/one.smpx" --data "$D/data" --steps 4 --threads 1 --profile "$D/one.prof.json" > /dev/null
for cfg in "dp2:2:--dp 2" "pp2 1f1b m=8:2:--pp 2 --microbatches 8 --schedule 1f1b" "tp2:2:--tp 2"; do
  IFS=: read -r name n flags <<< "$cfg"
  compile() { $B/smpc compile "$D/synthetic.onnx" --train --loss mse:y:target --optimizer sgd \
      --lr 0.01 --batch-size 512 $flags "$@"; }
  predicted=$(compile --profile-db "$D/one.prof.json" -o "$D/pred2.smpx" | grep -o 'predicted step time: [0-9.e-]*' | cut -d' ' -f4)
  compile -o "$D/pred.smpx" > /dev/null
  measured=$($B/smprun -n "$n" "$D/pred.smpx" --data "$D/data" --steps 4 --threads 1 |
    grep -o 'trained 4 steps in [0-9.]*' | cut -d' ' -f5)
  python3 -c "m=$measured/4; p=$predicted; print(f'| $name | {m:.3f} | {p:.3f} | {100*(p-m)/m:+.1f}% |')"
done
