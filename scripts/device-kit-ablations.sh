#!/usr/bin/env bash
# The device kit's ablations (scripts/device-kit.sh sources this file):
# the list (ABLATIONS: what pack compiles or writes beside the benchmark's
# artifact, in the order run times them), the stage that times them (7),
# its rows (ablation_row, which stage 7c's rows use too), the row "best"
# and the check that leaves out rows on wgmma where the GPU tests found
# wgmma wrong. The functions read run()'s locals (BIN, LOGS, WORK) and
# device-kit.sh's helpers (limited, left, room, skipped, stage_begin,
# stage_end, fill_weights, SUMMARY, PYTHON, RESERVE).

# The benchmark's ablations, NAME:smpc flags: each compiled beside the
# benchmark's artifact and timed against it (stage 7). "--batch-size xK":
# K times the benchmark's batch (issue 19 asks for the largest that fits).
# "env VAR=VALUE ...": the benchmark's artifact run with that environment
# ({logs}: the run's output folder): SMP_CUBLASLT_TUNE=1 times cuBLASLt's
# algorithms per product shape and keeps the fastest in gemm-tuning.txt,
# which use-tuned-gemm (after it) runs untimed. "best:" is no artifact: the
# rows before it that beat the benchmark, run together (best_row, below).
# They run in this order (ablations.txt), the open questions first: the
# rows the budget has no room for are skipped, measured ones last; rows on
# wgmma are skipped when smp-cuda-wgmma-tests failed (wgmma_failed).
# shellcheck disable=SC2034 # read by device-kit.sh (pack)
ABLATIONS=("attention-wgmma:env SMP_ATTENTION_WGMMA=1"
  "attention-wgmma-rows-128:env SMP_ATTENTION_WGMMA=1 SMP_ATTENTION_FORWARD_ROWS=128 SMP_ATTENTION_GRAD_ROWS=128"
  "attention-wgmma-forward:env SMP_ATTENTION_WGMMA=forward"
  "cuda-graph:env SMP_CUDA_GRAPH=1"
  "attention-rows-128:env SMP_ATTENTION_FORWARD_ROWS=128"
  "attention-grad-rows-128:env SMP_ATTENTION_GRAD_ROWS=128"
  "dgelu-epilogue:--dgelu-epilogue" "no-bias-grad-epilogue:--no-bias-grad-epilogue"
  "dgelu-no-bias-grad:--dgelu-epilogue --no-bias-grad-epilogue"
  "no-residual-epilogue:--no-residual-epilogue"
  "tune-gemm:env SMP_CUBLASLT_TUNE=1 SMP_CUBLASLT_TUNE_FILE={logs}/gemm-tuning.txt"
  "use-tuned-gemm:env SMP_CUBLASLT_TUNE_FILE={logs}/gemm-tuning.txt"
  "no-fuse-loss-grad:--no-fuse-loss-grad" "best:"
  "batch-x2:--batch-size x2"
  "no-gelu-epilogue:--no-gelu-epilogue" "no-pad-vocab:--no-pad-vocab")

# The ablations' stage: the benchmark's artifact, then in ablations.txt's
# order each ablate-NAME.smpx packed beside it (without one optimisation,
# or at another batch: its smpc flags in ablate-NAME.flags) or the
# benchmark's artifact again under ablate-NAME.env's VAR=VALUE ({logs}: the
# run's output folder), STEPS steps each; the median step time but the
# first's, with its tokens/s, MFU and the device's peak bytes, one table in
# summary.md (with the row "best" where ablations.txt names it: best_row),
# and the runs' SMP_CUBLASLT_TUNE notes after it. A row that would start with under 20 s of the budget left
# is skipped, and the rest.
ablation_stage() {
  local bdir=$1 dev=$2 steps=$3 a name n result=ok
  local arts=()
  # Each measured row's median ms, and what it changed: its artifact
  # (ROW_ART), its environment (ROW_ENV, {logs} filled in) and its flags.
  declare -gA ROW_MS=() ROW_ART=() ROW_ENV=() ROW_FLAGS=()
  [ ! -f "$bdir/ablations.txt" ] || while read -r n; do
    [ "$n" != best ] || arts+=(best)
    for a in "$bdir/ablate-$n.smpx" "$bdir/ablate-$n.env"; do
      [ ! -e "$a" ] || arts+=("$a")
    done
  done < "$bdir/ablations.txt"
  if [ ${#arts[@]} = 0 ]; then
    skipped "ablations" "none packed"
    return 0
  fi
  # shellcheck disable=SC2154 # min_ablate: run()'s, this stage's caller
  room "ablations" "$min_ablate" || return 0
  stage_begin "Ablations: the benchmark's model without one optimisation each (smprun, $steps steps)"
  {
    echo "| artifact | smpc flags | median ms/step (steps 2..$steps) | tokens/s | MFU | peak bytes |"
    echo "| --- | --- | --- | --- | --- | --- |"
  } >> "$SUMMARY"
  for a in "$bdir/gpt2-fused.smpx" "${arts[@]}"; do
    if [ "$a" = best ]; then
      best_row "$bdir" "$dev" "$steps" || result=$ROW_RESULT
      continue
    fi
    name=$(basename "${a%.*}")
    local flags="(the benchmark's)" envs=() run=$a
    if [ "${a##*.}" = env ]; then
      read -ra envs < "$a"
      flags="${envs[*]} (environment)"
      envs=("${envs[@]//\{logs\}/$LOGS}")
      run=$bdir/gpt2-fused.smpx
    fi
    [ ! -f "${a%.*}.flags" ] || flags=$(cat "${a%.*}.flags")
    if [ "$dev" = cpu ] && [[ " ${envs[*]} " == *" SMP_CUDA_GRAPH=1 "* ]]; then
      echo "| $name | $flags | skipped (--device cpu: the CPU records no CUDA graph) |" >> "$SUMMARY"
      continue
    fi
    if wgmma_failed "${envs[@]}"; then
      echo "| $name | $flags | skipped (smp-cuda-wgmma-tests failed: wgmma's results are wrong on this GPU) |" >> "$SUMMARY"
      continue
    fi
    ablation_row "$name" "$flags" "$run" "$dev" "$bdir" "$steps" "${envs[@]}" ||
      result=$ROW_RESULT
  done
  echo >> "$SUMMARY"
  if grep -qh '^note: SMP_CUBLASLT_TUNE' "$LOGS"/ablate-*.out 2> /dev/null; then
    {
      echo "cuBLASLt's algorithms timed per product shape (SMP_CUBLASLT_TUNE=1):"
      echo
      grep -h '^note: SMP_CUBLASLT_TUNE' "$LOGS"/ablate-*.out |
        sed -e 's/^note: SMP_CUBLASLT_TUNE: /- /' \
          -e "s|^note: SMP_CUBLASLT_TUNE_FILE $LOGS/|- file |"
      echo
    } >> "$SUMMARY"
  fi
  stage_end "ablations" "$result"
}

# wgmma_failed [VAR=VALUE...]: whether the environment runs the attention
# on wgmma (SMP_ATTENTION_WGMMA other than 0) where the GPU unit tests found
# wgmma's results wrong (WGMMA_FAILED=1, unit_tests_stage): such a row would
# time wrong numbers, and `best` could take it.
wgmma_failed() {
  local w
  [ "${WGMMA_FAILED:-0}" = 1 ] || return 1
  for w in "$@"; do
    case $w in SMP_ATTENTION_WGMMA=0) ;; SMP_ATTENTION_WGMMA=*) return 0 ;; esac
  done
  return 1
}

# ablation_row NAME FLAGS ARTIFACT DEV BDIR STEPS [VAR=VALUE...]: one row of
# the ablations' table, ARTIFACT run STEPS steps under the environment;
# its median ms in ROW_MS[NAME] when it ran. Fails (ROW_RESULT says why)
# when the row failed or the budget skipped it.
ablation_row() {
  local name=$1 flags=$2 art=$3 dev=$4 bdir=$5 steps=$6 prep ms rc=0
  shift 6
  if [ $(($(left) - RESERVE)) -lt 20 ]; then
    echo "| $name | | skipped (the budget: $(($(left) - RESERVE)) s left) |" >> "$SUMMARY"
    ROW_RESULT="rows skipped (the budget)"
    return 1
  fi
  prep=$(fill_weights "$art")
  if [ "$prep" != ok ]; then
    ms=$prep
  elif limited 90 env "$@" "$BIN/smprun" "$art" --device "$dev" \
    --data "$bdir/data" --steps "$steps" --metrics "$LOGS/$name.jsonl" \
    > "$LOGS/$name.out" 2>&1; then
    ms=$("$PYTHON" -c 'import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][1:]
def med(k):
    return statistics.median(r[k] for r in rows)
if rows:
    ms, tok, mfu = med("step_time") * 1e3, med("tokens_per_s"), med("mfu")
    peak = max(r.get("peak_bytes", 0) for r in rows)
    print(f"{ms:,.2f} | {tok:,.0f} | {mfu * 100:.1f}% | {peak:,}")
else:
    print("no steps")' "$LOGS/$name.jsonl")
  else
    rc=$?
    ms="FAILED (status $rc: $(tail -n 1 "$LOGS/$name.out"))"
  fi
  echo "| $name | $flags | $ms |" >> "$SUMMARY"
  if [ "$prep" = ok ] && [ $rc = 0 ] && [[ $ms =~ ^[0-9] ]]; then
    ROW_MS[$name]=${ms%% *}
    ROW_MS[$name]=${ROW_MS[$name]//,/}
    ROW_ART[$name]=$art
    ROW_ENV[$name]="$*"
    ROW_FLAGS[$name]=$flags
    return 0
  fi
  ROW_RESULT=$ms
  return 1
}

# best_row BDIR DEV STEPS: the faster choices of the rows measured so far
# together, as one more row ("best"): the fastest artifact of the benchmark's batch (the
# benchmark's or an ablation's; not another batch) under every environment
# row that beat the benchmark's by more than 0.5% (not SMP_CUBLASLT_TUNE=1,
# which tunes anew each run: use-tuned-gemm runs its file), the fastest
# first, a row that sets a variable a faster one set left out
# (SMP_ATTENTION_WGMMA=1 and =forward: the faster of the two). Nothing to
# run when the benchmark's configuration was the fastest; says so.
best_row() {
  local bdir=$1 dev=$2 steps=$3 base n art=gpt2-fused envs=() what=() words w
  base=${ROW_MS[gpt2-fused]:-}
  [ -n "$base" ] || return 0
  local rows byms
  local -A set=()
  mapfile -t rows < <(printf '%s\n' "${!ROW_MS[@]}" | sort) # a fixed order
  mapfile -t byms < <(for n in "${rows[@]}"; do echo "${ROW_MS[$n]} $n"; done |
    sort -s -g -k1,1 | cut -d' ' -f2)
  for n in "${rows[@]}"; do
    if [[ ${ROW_ART[$n]} != *.smpx ]] || [ -n "${ROW_ENV[$n]}" ]; then
      continue
    fi
    [[ ${ROW_FLAGS[$n]} != *--batch-size* ]] || continue
    awk -v a="${ROW_MS[$n]}" -v b="${ROW_MS[$art]}" 'BEGIN {exit !(a < b)}' &&
      art=$n
  done
  [ "$art" = gpt2-fused ] || what+=("${ROW_FLAGS[$art]}")
  for n in "${byms[@]}"; do
    if [ -z "${ROW_ENV[$n]}" ] || [[ ${ROW_ENV[$n]} == *SMP_CUBLASLT_TUNE=1* ]]; then
      continue
    fi
    awk -v a="${ROW_MS[$n]}" -v b="$base" 'BEGIN {exit !(a < 0.995 * b)}' ||
      continue
    read -ra words <<< "${ROW_ENV[$n]}"
    for w in "${words[@]}"; do
      [ -z "${set[${w%%=*}]:-}" ] || continue 2
    done
    for w in "${words[@]}"; do
      set[${w%%=*}]=1
    done
    envs+=("${words[@]}")
    what+=("${words[@]}")
  done
  if [ ${#what[@]} = 0 ]; then
    echo "| best | (the benchmark's: no ablation was faster) | ${base} |" >> "$SUMMARY"
    return 0
  fi
  ablation_row best "${what[*]//$LOGS\//\{logs\}/}" "${ROW_ART[$art]}" "$dev" \
    "$bdir" "$steps" "${envs[@]}"
}
