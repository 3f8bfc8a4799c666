#!/usr/bin/env bash
# The device kit's run stages that scripts/device-kit.sh sources: the
# GPU unit tests (2), the attention kernels (2b), PyTorch's rows (6, 7b),
# the Hugging Face Trainer's mixed precision (6b), the ablations (7) and
# the step's counters (8); and pack's check of its artifacts
# (edges_check). They read run()'s locals (kit, BIN, LOGS, WORK, min_unit)
# and device-kit.sh's helpers (limited, cap, room, skipped, stage_begin,
# stage_end, bench_md, SUMMARY, PYTHON, ROOT).

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

# pack_host_model DIR BUILD: stage 7c's artifact, a small GPT for the GPU
# (2 layers, 128 wide, T = 64, batch 4, bf16 AdamW) and its data.
pack_host_model() {
  local dir=$1 build=$2
  mkdir -p "$dir"
  "$build/bin/smp-modelgen" gpt --layers 2 --hidden 128 --heads 4 --seq 64 \
    --vocab 512 -o "$dir/gpt.onnx" --write-data "$dir/data" 8 > /dev/null
  "$build/bin/smpc" compile "$dir/gpt.onnx" --train --target cuda \
    --loss cross_entropy:logits:labels --optimizer adamw --lr 1e-4 \
    --precision bf16 --batch-size 4 -o "$dir/gpt.smpx" > /dev/null
  rm -f "$dir/gpt.onnx" "$dir/gpt.onnx.data"
}

# graph_host_stage DEV STEPS: 7c, the step as one CUDA graph where the
# host bounds it: bench/host's small GPT (2 layers, 128 wide, T = 64,
# batch 4, bf16 AdamW: 73 kernel launches and 27 cuBLASLt products a step,
# each little work) queued one by one and as a graph (SMP_CUDA_GRAPH=1),
# STEPS steps each, as two rows of the ablations' table. GPU only.
graph_host_stage() {
  local dev=$1 steps=$2 bdir=$WORK/bench/host result=ok
  if [ "$dev" != cuda ] || [ ! -d "$bdir" ]; then
    skipped "CUDA graph where the host bounds the step" \
      "no GPU (the CPU records no graph) or no bench/host in the kit"
    return 0
  fi
  room "CUDA graph where the host bounds the step" 30 || return 0
  stage_begin "The step as one CUDA graph where the host bounds it (a small GPT, smprun, $steps steps)"
  declare -gA ROW_MS=() ROW_ART=() ROW_ENV=() ROW_FLAGS=()
  {
    echo "| artifact | environment | median ms/step (steps 2..$steps) | tokens/s | MFU | peak bytes |"
    echo "| --- | --- | --- | --- | --- | --- |"
  } >> "$SUMMARY"
  ablation_row host-one-by-one "(queued one by one)" "$bdir/gpt.smpx" "$dev" \
    "$bdir" "$steps" || result=$ROW_RESULT
  ablation_row host-graph "SMP_CUDA_GRAPH=1" "$bdir/gpt.smpx" "$dev" \
    "$bdir" "$steps" SMP_CUDA_GRAPH=1 || result=$ROW_RESULT
  echo >> "$SUMMARY"
  stage_end "CUDA graph where the host bounds the step" "$result"
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

# The Hugging Face Trainer's mixed precision on the GPU: the Trainer trains
# the gpt fixture 10 steps with fp16 (autocast and GradScaler) and bf16
# (autocast) from precision_{fp16,bf16}.json (python/make_hf_trainer_refs.py
# --device cuda), and smprun trains the artifacts smpc compiled from the
# same files; their losses and gradient norms compared (the CPU runs no
# fp16 autocast: only a GPU checks this). Needs transformers in PYTHON.
trainer_stage() {
  local dev=$1 dir=$LOGS/trainer rc=0 result=ok p name line
  mkdir -p "$dir"
  stage_begin "Trainer mixed precision (the HF Trainer's fp16 and bf16 against smp's)"
  limited 150 "$PYTHON" "$ROOT/python/make_hf_trainer_refs.py" --device "$dev" \
    --out "$dir" precision_fp16 precision_bf16 > "$dir/trainer.log" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    result="FAILED (the Trainer, status $rc: $(tail -n 1 "$dir/trainer.log"))"
    echo "trainer: $result" >> "$SUMMARY"
    stage_end "Trainer mixed precision" "$result"
    return 0
  fi
  # The tolerances of the CUDA suite's 16-bit checks (fp16 has 3 more bits).
  for p in fp16:5e-3 bf16:2e-2; do
    name=precision_${p%%:*}
    rc=0
    limited 60 "$BIN/smprun" "$WORK/trainer/$name.smpx" --device "$dev" \
      --data "$ROOT/test/fixtures/train/gpt" --steps 10 \
      --metrics "$dir/$name.jsonl" > "$dir/$name.out" 2> "$dir/$name.err" || rc=$?
    if [ $rc != 0 ]; then
      line="trainer/$name: FAILED (smprun status $rc: $(tail -n 1 "$dir/$name.err"))"
    else
      line=$("$PYTHON" "$ROOT/test/train/compare_losses.py" "$dir/$name.jsonl" \
        "$dir/ref_$name.json" --rtol "${p#*:}" --label "trainer/$name" 2>&1 |
        tail -n 1)
    fi
    echo "$line" >> "$SUMMARY"
    case $line in *": ok") ;; *) result="not ok: ${line#trainer/}" ;; esac
  done
  stage_end "Trainer mixed precision" "$result"
}

# Whether the Trainer stage can run here, else skipped with why.
trainer_stage_if() {
  local dev=$1 torch=$2
  if [ "$dev" != cuda ]; then
    skipped "Trainer mixed precision" "--device $dev (the CPU runs no fp16 autocast)"
  elif [ "$torch" = 0 ]; then
    skipped "Trainer mixed precision" "--no-torch"
  elif [ ! -d "$WORK/trainer" ]; then
    skipped "Trainer mixed precision" "the kit holds no trainer/ artifacts"
  elif ! limited 90 "$PYTHON" -c 'import transformers, accelerate' 2>/dev/null; then
    skipped "Trainer mixed precision" "no transformers and accelerate in $PYTHON"
  elif room "Trainer mixed precision" 40; then
    trainer_stage "$dev"
  fi
}

# The attention kernels' stage: smp's (smp-cuda-attention-bench, --small on
# an emulated kit) and, with torch, PyTorch's SDPA on the same shapes
# (bench/attention_torch.py), one table in summary.md and attention.md.
attention_stage() {
  local dev=$1 torch=$2 small=() rc=0 result=ok
  # shellcheck disable=SC2154 # kit: run()'s, this stage's caller
  [ -f "$kit/EMULATED" ] && small=(--small)
  stage_begin "attention kernels (smp against PyTorch's SDPA, bf16)"
  {
    limited 120 "$BIN/smp-cuda-attention-bench" "${small[@]}" \
      2> "$LOGS/attention-smp.log" || rc=$?
    if [ $rc != 0 ]; then
      result="smp: exit $rc: $(tail -n 1 "$LOGS/attention-smp.log")"
    elif [ "$torch" = 1 ] && [ "$dev" = cuda ] && [ ${#small[@]} = 0 ]; then
      limited 180 "$PYTHON" "$ROOT/bench/attention_torch.py" \
        2> "$LOGS/attention-torch.log" | grep '^|' ||
        result="torch: $(tail -n 1 "$LOGS/attention-torch.log")"
    fi
  } > "$LOGS/attention.md"
  cp "$LOGS/attention.md" "$DEST/attention.md"
  cat "$LOGS/attention.md" >> "$SUMMARY"
  [ "$result" = ok ] || echo "$result" >> "$SUMMARY"
  [ $rc != 0 ] || [ "$dev" != cuda ] || [ ${#small[@]} != 0 ] ||
    attention_counters
  stage_end "attention kernels" "$result"
}

# torch.compile with SDPA at twice the benchmark's batch (issue 19 compares
# at the largest batch that fits; smp's row is the ablations' batch-x2).
# torch_stage BDIR TORCH BATCH MODES [the benchmark's other arguments]:
# stage 6, PyTorch's rows MODES (comma-separated) on the benchmark's model.
torch_stage() {
  local bdir=$1 torch=$2 batch=$3 modes=$4 rc=0 result=ok
  shift 4
  if [ $torch = 0 ]; then
    skipped "GPT-2 benchmark: PyTorch" "--no-torch"
  elif [ -z "$modes" ]; then
    skipped "GPT-2 benchmark: PyTorch" \
      "--torch-modes names only torch.compile rows, which the CPU runs none of"
  elif ! have_torch2; then
    skipped "GPT-2 benchmark: PyTorch" "no PyTorch 2 in $PYTHON"
  elif room "GPT-2 benchmark: PyTorch" 20; then
    stage_begin "GPT-2 benchmark: PyTorch ($modes)"
    rc=0
    SMP_BENCH_DIR=$bdir PYTHON=$PYTHON limited 100000 \
      bash "$ROOT/bench/gpt2_train.sh" --prebuilt --batch "$batch" "$@" \
      --no-smp --modes "$modes" --deadline $((DEADLINE - RESERVE - 10)) \
      2> "$LOGS/bench-torch.log" | tee "$LOGS/bench-torch.md" >> "$SUMMARY" ||
      rc=$?
    cp "$bdir"/*.json "$bdir"/*.json.err "$LOGS/" 2>/dev/null || true
    bench_md
    grep '^| PyTorch' "$LOGS/bench-torch.md" || true
    result=ok
    grep -q '^skipped' "$LOGS/bench-torch.md" && result="rows skipped (the budget)"
    [ $rc = 0 ] || result="not all rows ran (status $rc)"
    stage_end "GPT-2 benchmark: PyTorch" "$result"
  fi
}

# torch_x2_stage BDIR DEV TORCH BATCH MODES [the benchmark's other
# arguments]: runs when MODES (stage 6's rows) has compile-sdpa.
torch_x2_stage() {
  local bdir=$1 dev=$2 torch=$3 batch=$4 modes=$5 rc=0 result=ok
  shift 5
  if [ "$torch" = 0 ] || [ "$dev" != cuda ] || ! have_torch2; then
    skipped "GPT-2 benchmark: PyTorch at twice the batch" \
      "no GPU, --no-torch or no PyTorch 2"
    return 0
  fi
  if [[ ,$modes, != *,compile-sdpa,* ]]; then
    skipped "GPT-2 benchmark: PyTorch at twice the batch" \
      "--torch-modes leaves out compile-sdpa"
    return 0
  fi
  room "GPT-2 benchmark: PyTorch at twice the batch" 120 || return 0
  stage_begin "GPT-2 benchmark: PyTorch compile-sdpa at batch $((batch * 2))"
  SMP_BENCH_DIR=$bdir PYTHON=$PYTHON limited 100000 \
    bash "$ROOT/bench/gpt2_train.sh" --prebuilt --batch $((batch * 2)) \
    "$@" --no-smp --modes compile-sdpa \
    --deadline $((DEADLINE - RESERVE - 10)) 2> "$LOGS/bench-torch-x2.log" |
    tee "$LOGS/bench-torch-x2.md" >> "$SUMMARY" || rc=$?
  [ $rc = 0 ] || result="FAILED (status $rc)"
  stage_end "GPT-2 benchmark: PyTorch at twice the batch" "$result"
}

# Nsight Compute's command line, where the machine has one ("" if not).
find_ncu() {
  local found="" f
  found=$(command -v ncu || true)
  if [ -z "$found" ]; then
    for f in /opt/nvidia/nsight-compute/*/ncu; do # the newest last
      [ -x "$f" ] && found=$f
    done
  fi
  echo "$found"
}

# The counters of every kernel of one step of the benchmark's artifact
# (Nsight Compute, each kernel replayed alone; --clock-control none): the
# raw CSV in step-ncu.csv, scripts/ncu_table.py's table of the kernels by
# their total time (DRAM GB/s and share of peak, SM share, registers,
# occupancy) in summary.md: what each kernel achieves against what its
# prediction in docs/benchmarks.md assumed. Last, as the least urgent.
step_counters_stage() {
  local bdir=$1 ncu rc=0 result=ok
  ncu=$(find_ncu)
  if [ -z "$ncu" ]; then
    skipped "step counters" "no ncu on this machine"
    return 0
  fi
  room "step counters" 90 || return 0
  stage_begin "The step's kernels' counters (ncu, one step of the benchmark's artifact)"
  # ncu prints its table when the program ends: a run cut by the time
  # limit leaves none, so the launches are bounded (one step is ~340
  # kernels and cuBLASLt's, each replayed a few times: ~0.1 s each).
  limited 150 "$ncu" --clock-control none --csv --page raw \
    --print-units base --launch-count 600 --log-file "$LOGS/step-ncu.csv" \
    --metrics gpu__time_duration.sum,dram__bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    "$BIN/smprun" "$bdir/gpt2-fused.smpx" --device cuda --data "$bdir/data" \
    --steps 1 > "$LOGS/step-ncu.out" 2>&1 || rc=$?
  if "$PYTHON" "$ROOT/scripts/ncu_table.py" "$LOGS/step-ncu.csv" \
    > "$LOGS/step-ncu.md" 2>&1; then
    cat "$LOGS/step-ncu.md" >> "$SUMMARY"
    echo >> "$SUMMARY"
    [ $rc = 0 ] || result="ncu exit $rc (the table has what it profiled)"
  else
    result="FAILED (ncu exit $rc): $(tail -n 1 "$LOGS/step-ncu.md")"
    echo "step counters: $result" | tee -a "$SUMMARY"
  fi
  stage_end "step counters" "$result"
}

# The hardware counters of smp's attention kernels at GPT-2 124M's shape
# (Nsight Compute, where the machine has it and its runtime lets it read
# them; --clock-control none: the clocks as they are): the last forward,
# key pass and query pass of `smp-cuda-attention-bench --first --iters 1`
# (its 10th to 12th kernels with "Mma" in their names), then, budget
# permitting, of `--first --wgmma` (the passes on Hopper's wgmma: "Wgmma"),
# the whole reports in attention-ncu.txt and attention-ncu-wgmma.txt, their
# figures and the profiler's advice in summary.md.
attention_counters() {
  local ncu
  ncu=$(find_ncu)
  if [ -z "$ncu" ]; then
    echo "_attention counters: no ncu on this machine_" >> "$SUMMARY"
    return 0
  fi
  room "attention counters" 60 || return 0
  attention_ncu "$ncu" Mma attention-ncu.txt
  room "attention counters (wgmma)" 60 || return 0
  attention_ncu "$ncu" Wgmma attention-ncu-wgmma.txt --wgmma
}

# attention_ncu NCU NAME FILE [BENCH ARGS]: one profile of
# attention_counters (the kernels whose names hold NAME).
attention_ncu() {
  local ncu=$1 name=$2 file=$3 rc=0
  shift 3
  limited 90 "$ncu" --clock-control none -k "regex:$name" --launch-skip 9 \
    --launch-count 3 --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section InstructionStats \
    "$BIN/smp-cuda-attention-bench" --first --iters 1 "$@" \
    > "$LOGS/$file" 2>&1 || rc=$?
  cp "$LOGS/$file" "$DEST/$file"
  {
    echo "### Attention kernels' counters, $name (ncu, exit $rc)"
    echo '```'
    grep -E "attn[A-Za-z]+$name|Duration|Throughput|Registers Per|Occupancy|Warp Cycles Per|Issue Slots|Bank Conflicts|Executed Ipc|(OPT|WRN)" \
      "$LOGS/$file" | cut -c1-220 | head -n 150
    echo '```'
  } >> "$SUMMARY"
}

# edges_check DIR EMU: each artifact of DIR one step on EMU (smprun-emu,
# the CUDA emulator's smprun) on its dry run of the edges
# (docs/cuda-emulator.md: every large launch's first and last blocks at the
# artifact's full size), the times in DIR/edges.txt; one that fails stops
# the pack.
edges_check() {
  local dir=$1 emu=$2 a
  [ -x "$emu" ] || {
    echo "device-kit: KIT_EDGES=1 needs $emu (the CUDA emulator's build)" >&2
    exit 1
  }
  : > "$dir/edges.txt"
  # The numbers are meaningless: a step that ran whole and then stopped
  # for a non-finite loss or gradient norm passes.
  local ran='trained 1 steps in [0-9.]* s|step 1: the (loss|gradient norm) is [-a-z]*; stopping'
  for a in "$dir"/*.smpx; do
    SMP_CUDAEMU_DRY_RUN=edges "$emu" "$a" --device cuda \
      --data "$dir/data" --steps 1 > "$a.edges.log" 2>&1 || true
    if ! grep -Eq "$ran" "$a.edges.log" ||
      grep -q 'runtime error\|refused\|smp CUDA emulator: kernel' "$a.edges.log"; then
      echo "device-kit: $(basename "$a") fails the CUDA emulator's dry run" \
        "of the edges (SMP_CUDAEMU_DRY_RUN=edges smprun-emu $a --device" \
        "cuda --data $dir/data --steps 1):" >&2
      tail -5 "$a.edges.log" >&2
      exit 1
    fi
    echo "$(basename "$a"): $(grep -Eo "$ran" "$a.edges.log" | head -1)" \
      >> "$dir/edges.txt"
    rm "$a.edges.log"
  done
}

# The GPU unit tests' line for binary T (log LOG, timeout(1)'s status RC).
unit_line() {
  local t=$1 log=$2 rc=$3 last
  last=$(grep -E '^\[ RUN +\]' "$log" | tail -n 1 | sed 's/^\[ RUN *\] //')
  if [ "$rc" = 0 ]; then
    echo "$t: $(grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ test' "$log" |
      sed 's/^\[ *//; s/ *\]//; s/, listed below://' | tr '\n' ' ')"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "$t: FAILED: timed out (${last:+in $last, }see $t.log)"
  elif grep -q -E '^\[  FAILED  \]' "$log"; then
    echo "$t: FAILED: $(grep -E '^\[  FAILED  \]' "$log" | head -5 | tr '\n' ' ')"
  else
    echo "$t: FAILED: exit $rc${last:+ in $last}: $(tail -n 1 "$log")"
  fi
}

# The GPU unit tests' stage (2): each binary's line in summary.md.
unit_tests_stage() {
  local t rc line result=ok
  if room "GPU unit tests" $min_unit; then
    stage_begin "GPU unit tests"
    # Hopper's wgmma (the probe, the attention forward on it) in a process
    # of its own, smp-cuda-wgmma-tests (a wrong descriptor can fault and
    # end every later test of a process): the kernel tests without them,
    # then they alone (the emulated kit's copy of both is the emulator's
    # whole kernel-test binary).
    for t in smp-cuda-kernel-tests smp-cuda-wgmma-tests smp-comm-nccl-tests; do
      if [ $(($(left) - RESERVE)) -lt $min_unit ]; then
        line="$t: skipped (the budget: $(($(left) - RESERVE)) s left)"
      else
        rc=0
        local only=('--gtest_filter=-*Wgmma*')
        [ $t = smp-cuda-wgmma-tests ] && only=('--gtest_filter=*Wgmma*')
        [ $t = smp-comm-nccl-tests ] && only=()
        limited 150 "$BIN/$t" --gtest_output="xml:$LOGS/$t.xml" "${only[@]}" \
          > "$LOGS/$t.log" 2>&1 || rc=$?
        line=$(unit_line "$t" "$LOGS/$t.log" "$rc")
      fi
      case $line in *FAILED* | *skipped*) result="not all passed" ;; esac
      # The ablations then skip the rows on wgmma (wgmma_failed).
      [ $t != smp-cuda-wgmma-tests ] || [[ $line != *FAILED* ]] ||
        WGMMA_FAILED=1
      echo "$line" | tee -a "$SUMMARY"
    done
    stage_end "GPU unit tests" "$result"
  fi
}
