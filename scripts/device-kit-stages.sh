#!/usr/bin/env bash
# The device kit's run stages that scripts/device-kit.sh sources: env (1),
# the GPU unit tests (2), the attention kernels (2b), the CUDA suite (3),
# smp's benchmark row (4) and profile (5), PyTorch's rows (6, 7b), the
# Hugging Face Trainer's mixed precision (6b), the step as a CUDA graph
# where the host bounds it (7c) and the step's counters (8); and pack's
# check of its artifacts (edges_check). The ablations (7) are in
# device-kit-ablations.sh. They read run()'s locals (kit, dev, BIN, LOGS,
# WORK, DEST, bdir, args, batch, psteps, smprun_ok, smp_row and the
# min_* floors) and device-kit.sh's helpers (limited, cap, room, skipped,
# stage_begin, stage_end, bench_md, fill_weights, cuda_library_path,
# SUMMARY, PYTHON, ROOT, DEADLINE, RESERVE, LAZY_LIBRARIES).
# shellcheck disable=SC2154 # run()'s locals, seen through bash's dynamic scope

# 1. env: the machine and the libraries (env.txt; the GPU and PyTorch at
# the summary's top). Sets run()'s BIN (the wrappers that give the
# binaries the kit's libraries and CUDA's) and smprun_ok (0: smprun misses
# a library, and the stages that need it are skipped); fails without
# the payload.
env_stage() {
  stage_begin "env"
  # Not cut by --budget: nothing runs without it (a small budget on a
  # loaded machine cut it, and the run failed instead of skipping stages).
  if ! timeout --foreground -k 5 120 tar -C "$WORK" -xJf "$kit/payload.tar.xz" \
    < /dev/null; then
    echo "device-kit: cannot unpack $kit/payload.tar.xz" | tee -a "$SUMMARY" >&2
    stage_end "env" "FAILED: no payload"
    return 1
  fi
  # The binaries run through wrappers that give them the kit's libraries
  # and CUDA's; nothing else sees them (PyTorch has its own libstdc++).
  BIN=$WORK/payload/wrap
  local libs b
  libs=$(cuda_library_path)
  libs="$WORK/payload/lib${libs:+:$libs}"
  mkdir -p "$BIN"
  for b in "$WORK"/payload/bin/*; do
    # shellcheck disable=SC2016 # $LD_LIBRARY_PATH and $@: the wrapper's
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
      "$libs" "$b" > "$BIN/$(basename "$b")"
    chmod +x "$BIN/$(basename "$b")"
  done
  export SMP_ATTENTION_FIXTURES=$ROOT/test/unit/kernels/Inputs/attention
  local gpu torchv
  {
    echo "libraries: $libs"
    echo "python: $PYTHON"
    if command -v nvidia-smi > /dev/null; then limited 30 nvidia-smi 2>&1 || true
    else echo "nvidia-smi: none"; fi
  } >> "$env"
  if command -v nvidia-smi > /dev/null; then
    gpu=$(limited 30 nvidia-smi --query-gpu=name,driver_version,memory.total \
      --format=csv,noheader 2>&1 | head -n 4 | paste -sd';') || true
    gpu="GPU: ${gpu:-nvidia-smi said nothing}"
  else
    gpu="nvidia-smi: none"
  fi
  torchv=$(limited 90 "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1 | tail -n 1) || true
  echo "$torchv" >> "$env"
  local missing="" m
  smprun_ok=1
  for b in "$WORK"/payload/bin/*; do
    echo "== ldd $b" >> "$env"
    LD_LIBRARY_PATH="$libs" ldd "$b" >> "$env" 2>&1 || true
    m=$(LD_LIBRARY_PATH="$libs" ldd "$b" 2>&1 | awk '/=> not found/ {print $1}' |
      sort -u | paste -sd' ') || true
    if [ -n "$m" ]; then
      missing+="$(basename "$b"): $m"$'\n'
      [ "$(basename "$b")" = smprun ] && smprun_ok=0
    fi
  done
  # Loaded on first use (kernels/cuda/CublasLtLoader.cpp): ldd does not
  # list it; the kit's binaries search it on LD_LIBRARY_PATH.
  local lazy found d dirs
  IFS=: read -ra dirs <<< "$libs"
  for lazy in "${LAZY_LIBRARIES[@]}"; do
    found=""
    for d in "${dirs[@]}"; do
      [ -e "$d/$lazy" ] && { found=$d/$lazy; break; }
    done
    [ -n "$found" ] || found=$({ ldconfig -p 2>/dev/null || true; } |
      awk -v n="$lazy" '$1 == n && $NF ~ /^\// {print $NF; exit}')
    echo "== loaded on first use: $lazy => ${found:-not found}" >> "$env"
    [ -n "$found" ] || missing+="smprun (on its first matrix product): $lazy"$'\n'
  done
  {
    echo "$gpu"
    echo "$torchv"
    echo
  } >> "$SUMMARY"
  if [ -n "$missing" ]; then
    # At the top of env.txt and in the summary; the run goes on.
    { echo "MISSING LIBRARIES (ldd, with LD_LIBRARY_PATH=the libraries below):"
      printf '%s' "$missing" | sed 's/^/  /'
      echo
      cat "$env"
    } > "$WORK/env.txt" && mv "$WORK/env.txt" "$env"
    { echo "**Missing libraries** (ldd; env.txt has the search path):"
      echo
      printf '%s' "$missing" | sed 's/^/- /'
      echo
    } >> "$SUMMARY"
    printf 'device-kit: missing libraries:\n%s' "$missing" >&2
  fi
  stage_end "env" "$([ -n "$missing" ] && echo "libraries missing" || echo ok)"
}

# 3. The CUDA suite of test/smprun/cuda.test (scripts/gpu-suite.sh run;
# its --save-onnx reads this checkout's copy of the fixture the
# artifact was compiled from: --source-model), a line per check in
# suite.txt and the summary.
suite_stage() {
  local rc result line
  if [ "$smprun_ok" = 0 ]; then
    skipped "CUDA suite" "smprun misses libraries"
  elif room "CUDA suite" "$min_suite"; then
    stage_begin "CUDA suite (test/smprun/cuda.test's checks)"
    rc=0
    # Three parts of it at once where the machine has the cores for their
    # CPU runs (a GPU machine's 16; SUITE_JOBS overrides): each smprun's
    # start (the CUDA context, cuBLASLt) overlaps the others' work.
    local jobs=1
    [ "$(nproc)" -lt 8 ] || jobs=3
    SUITE_JOBS=${SUITE_JOBS:-$jobs} \
      SUITE_DEADLINE=$((DEADLINE - RESERVE - 3)) SMPRUN_TIMEOUT=60 \
      SMPRUN=$BIN/smprun PYTHON=$PYTHON limited 100000 \
      bash "$ROOT/scripts/gpu-suite.sh" run "$WORK/art" "$LOGS/suite" "$dev" |
      tee -a "$DEST/suite.txt" >> "$SUMMARY" || rc=$?
    local checks ok failed skip late
    # One line per check (a run that failed has its own line, NAME.DEVICE).
    checks=$(grep -c -E '^[^ .:]+: ' "$DEST/suite.txt" || true)
    failed=$(grep -E '^[^ .:]+: ' "$DEST/suite.txt" | grep -c FAILED || true)
    skip=$(grep -E '^[^ .:]+: ' "$DEST/suite.txt" | grep -c SKIPPED || true)
    ok=$((checks - failed - skip))
    line="suite: $ok ok, $failed failed"
    [ "$skip" = 0 ] || line+=", $skip skipped (the budget, no wgmma here, or the CPU: no CUDA graph)"
    [ "$rc" = 0 ] || line+=", cut after $checks checks (status $rc)"
    echo "$line" | tee -a "$SUMMARY"
    # A check SKIPPED for what the device lacks (no wgmma, the CPU's CUDA
    # graph) is the suite's answer; one the deadline cut is not.
    late=$(grep -E '^[^ .:]+: SKIPPED \(deadline' "$DEST/suite.txt" | grep -c . || true)
    result=ok
    [ "$failed" = 0 ] && [ "$late" = 0 ] && [ "$rc" = 0 ] || result=${line#suite: }
    stage_end "CUDA suite" "$result"
  fi
}

# 4. The GPT-2 benchmark's smp row (bench/gpt2_train.sh --prebuilt on
# run()'s bdir, batch and args); smp_row=1 when it printed one.
smp_row_stage() {
  local rc result
  if [ "$smprun_ok" = 0 ]; then
    skipped "GPT-2 benchmark: smp" "smprun misses libraries"
  elif room "GPT-2 benchmark: smp" "$min_bench"; then
    stage_begin "GPT-2 benchmark: smp (bench/gpt2_train.sh --prebuilt ${args[*]} --batch $batch)"
    local prep
    prep=$(fill_weights "$bdir/gpt2-fused.smpx")
    if [ "$prep" != ok ]; then
      echo "bench: smp $prep" | tee -a "$SUMMARY"
      result=$prep
    else
      local limit
      limit=$(cap 240)
      rc=0
      SMP_BIN=$BIN SMP_BENCH_DIR=$bdir PYTHON=$PYTHON limited "$limit" \
        bash "$ROOT/bench/gpt2_train.sh" --prebuilt --batch "$batch" \
        "${args[@]}" --no-torch --deadline $(($(date +%s) + limit - 10)) \
        2> "$LOGS/bench-smp.log" | tee "$LOGS/bench-smp.md" >> "$SUMMARY" ||
        rc=$?
      cp "$bdir"/*.jsonl "$bdir"/*.out "$bdir"/*.err "$LOGS/" 2>/dev/null || true
      bench_md
      grep '^| smp' "$LOGS/bench-smp.md" && smp_row=1
      result=ok
      if [ $rc != 0 ]; then
        result="FAILED (status $rc: $(tail -n 1 "$LOGS/bench-smp.log"))"
        echo "bench: smp $result" | tee -a "$SUMMARY"
      fi
    fi
    stage_end "GPT-2 benchmark: smp" "$result"
  fi
}

# 5. Where smp's step goes: smprun --profile for 1 + N steps (run()'s
# psteps), the first left out (--profile-warmup 1: its one-time costs,
# ~90 ms in the first product, had not cancelled against a 1-step
# run's); the steps' times and the top ops as tables.
profile_stage() {
  local rc result
  if [ "$psteps" = 0 ]; then
    skipped "smp profile" "--profile-steps 0"
  elif [ "$smp_row" = 0 ]; then
    skipped "smp profile" "no smp row"
  elif room "smp profile" "$min_profile"; then
    stage_begin "Where smp's step goes (smprun --profile, $psteps steps after a warm-up step)"
    local a="$bdir/gpt2-fused.smpx"
    rc=0
    limited 90 "$BIN/smprun" "$a" --device "$dev" --data "$bdir/data" \
      --steps $((psteps + 1)) --profile "$LOGS/profile.json" \
      --profile-warmup 1 --metrics "$LOGS/profile.jsonl" \
      > "$LOGS/profile.out" 2>&1 || rc=$?
    if [ $rc = 0 ] && [ -s "$LOGS/profile.json" ]; then
      "$PYTHON" - "$LOGS/profile.jsonl" >> "$SUMMARY" 2>/dev/null <<'EOF' || true
import json, sys
ms = [json.loads(l)["step_time"] * 1e3 for l in open(sys.argv[1]) if l.strip()]
print("The profiled run's steps (timed on the device's clock, nothing waited for): "
      + ", ".join(f"{m:,.1f}" for m in ms) + " ms")
print()
EOF
      if "$PYTHON" "$ROOT/scripts/profile_table.py" "$LOGS/profile.json" \
        --warmup 1 --top 15 --nodes 10 > "$LOGS/profile.md" 2>&1; then
        cat "$LOGS/profile.md" >> "$SUMMARY"
        echo >> "$SUMMARY"
        result=ok
      else
        result="FAILED: profile_table.py: $(tail -n 1 "$LOGS/profile.md")"
        echo "profile: $result" | tee -a "$SUMMARY"
      fi
    else
      result="FAILED: smprun --profile, status $rc: $(tail -n 1 "$LOGS/profile.out")"
      echo "profile: $result" | tee -a "$SUMMARY"
    fi
    stage_end "smp profile" "$result"
  fi
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
  # shellcheck disable=SC2034 # ablation_row's (device-kit-ablations.sh)
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
  if [ "$torch" = 0 ]; then
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
  if room "GPU unit tests" "$min_unit"; then
    stage_begin "GPU unit tests"
    # Hopper's wgmma (the probe, the attention forward on it) in a process
    # of its own, smp-cuda-wgmma-tests (a wrong descriptor can fault and
    # end every later test of a process): the kernel tests without them,
    # then they alone (the emulated kit's copy of both is the emulator's
    # whole kernel-test binary).
    for t in smp-cuda-kernel-tests smp-cuda-wgmma-tests smp-comm-nccl-tests; do
      if [ $(($(left) - RESERVE)) -lt "$min_unit" ]; then
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
      # shellcheck disable=SC2034 # read by wgmma_failed (device-kit-ablations.sh)
      [ $t != smp-cuda-wgmma-tests ] || [[ $line != *FAILED* ]] ||
        WGMMA_FAILED=1
      echo "$line" | tee -a "$SUMMARY"
    done
    stage_end "GPU unit tests" "$result"
  fi
}
