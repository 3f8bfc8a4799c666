#!/usr/bin/env bash
# smprun -n 2 end to end (ctest smprun-multirank-train):
#   multirank_train.sh SMPC SMPRUN TESTDIR WORKDIR
# A data-parallel (--dp 2) training artifact of the MLP: smprun -n 2
# re-executes through mpirun, each rank loads its own files, rank 0 alone
# prints the step lines and writes the metrics, every rank checkpoints its own
# tensors, a 2-rank resume continues bit-identically to the uninterrupted
# 2-rank run (and within 1e-5 of one rank), and an error on one rank ends
# both in seconds.
set -euo pipefail
SMPC=$1 SMPRUN=$2 TESTDIR=$3 WORK=$4
DATA=$TESTDIR/fixtures/train/mlp
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"
fail() { echo "FAILED: $*" >&2; exit 1; }

"$SMPC" compile "$TESTDIR/fixtures/train/mlp.onnx" --train \
  --loss cross_entropy:logits:labels --optimizer adamw --lr 1e-2 \
  --batch-size 8 -o one.smpx > /dev/null
"$SMPC" compile "$TESTDIR/fixtures/train/mlp.onnx" --train \
  --loss cross_entropy:logits:labels --optimizer adamw --lr 1e-2 \
  --batch-size 8 --dp 2 -o two.smpx > /dev/null

# The single-rank reference (1 thread, like each of the 2 ranks below).
"$SMPRUN" one.smpx --data "$DATA" --steps 4 --threads 1 --metrics ref.jsonl \
  > ref.out

# Two ranks, checkpoint at step 2.
start=$(date +%s%N)
"$SMPRUN" -n 2 two.smpx --data "$DATA" --steps 2 --threads 1 \
  --metrics two.jsonl --checkpoint-dir ck --checkpoint-every 2 > two.out
echo "smprun -n 2 (2 steps, launch included): $(( ($(date +%s%N) - start) / 1000000 )) ms"
cat two.out
[[ $(grep -c '^step ' two.out) == 2 ]] || fail "expected 2 step lines (rank 0 only)"
[[ $(grep -c '^trained 2 steps' two.out) == 1 ]] || fail "expected one summary line"
[[ $(wc -l < two.jsonl) == 2 ]] || fail "expected 2 metrics lines (rank 0 only)"
[[ $(cat ck/latest) == step-00000002 ]] || fail "latest: $(cat ck/latest)"
for f in rank0.index.pb rank0.tensors.bin rank1.index.pb rank1.tensors.bin; do
  [[ -s ck/step-00000002/$f ]] || fail "ck/step-00000002/$f missing"
done
[[ ! -e ck/step-00000002/index.pb ]] || fail "a single-rank index in a 2-rank checkpoint"
ls -a ck | grep -q '^\.tmp' && fail "a temporary checkpoint was left behind"

# Resume on 2 ranks to step 4: bit-identical to 4 uninterrupted 2-rank steps,
# and within 1e-5 of one rank (the cross-rank sums add in another order).
"$SMPRUN" -n 2 two.smpx --data "$DATA" --steps 4 --threads 1 \
  --metrics full2.jsonl > /dev/null
"$SMPRUN" -n 2 two.smpx --data "$DATA" --steps 4 --threads 1 --resume \
  --metrics two.jsonl --checkpoint-dir ck --checkpoint-every 2 > resumed.out
grep -q '^step 3 loss' resumed.out || fail "no step 3 after resuming"
grep -q '^step 1 loss' resumed.out && fail "resumed from the start"
python3 "$TESTDIR/train/same_losses.py" full2.jsonl two.jsonl
python3 "$TESTDIR/train/same_losses.py" ref.jsonl two.jsonl --rtol 1e-5

# A 2-rank checkpoint resumes on one rank (the checkpoint is resharded): the
# continued run equals the one-rank run within 1e-5.
"$SMPRUN" one.smpx --data "$DATA" --steps 6 --threads 1 --metrics ref6.jsonl > /dev/null
cp two.jsonl one-resumed.jsonl
"$SMPRUN" one.smpx --data "$DATA" --steps 6 --threads 1 --resume \
  --checkpoint-dir ck --metrics one-resumed.jsonl > /dev/null ||
  fail "a 1-rank resume of a 2-rank checkpoint failed"
python3 "$TESTDIR/train/same_losses.py" ref6.jsonl one-resumed.jsonl --rtol 1e-5

# Rank counts and single-rank-only options.
if "$SMPRUN" two.smpx --data "$DATA" --steps 1 2> err2.txt; then
  fail "a 2-rank artifact ran on 1 rank"; fi
grep -q "two.smpx: compiled for 2 ranks but launched with 1; run it with smprun -n 2" err2.txt ||
  fail "unexpected error: $(cat err2.txt)"
"$SMPRUN" -n 2 two.smpx --data "$DATA" --steps 1 --save-onnx x.onnx > save.out ||
  fail "--save-onnx on 2 ranks failed"
grep -q "gathered from 2 ranks" save.out || fail "unexpected: $(cat save.out)"
[[ -s x.onnx ]] || fail "x.onnx was not written"
[[ ! -e x.onnx.shards ]] || fail "the gathered shards were not removed"

# An error on rank 1 only (its program is gone) ends rank 0 too, at once.
cp -r two.smpx broken.smpx && rm broken.smpx/rank1.program.pb
start=$(date +%s)
if "$SMPRUN" -n 2 broken.smpx --data "$DATA" --steps 2 --timeout 60 \
    > broken.out 2> err4.txt; then fail "a broken rank 1 succeeded"; fi
elapsed=$(( $(date +%s) - start ))
cat err4.txt
grep -q "smprun: error: rank 1: broken.smpx/rank1.program.pb: missing" err4.txt ||
  fail "unexpected error: $(cat err4.txt)"
(( elapsed < 30 )) || fail "took $elapsed s to end the run"
echo "multirank_train: passed"
