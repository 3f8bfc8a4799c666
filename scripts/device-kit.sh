#!/usr/bin/env bash
# The device kit: smp's runtime as a relocatable bundle, and the GPU checks
# that run from it on a machine that has a GPU, CUDA 13 and Python but none
# of Debian's packages and no compiler for smp (docs/runtime-layout.md,
# "The device kit").
#
#   device-kit.sh pack [KIT] [--emulate]
#       From this checkout's build (BUILD_DIR, default build; the CUDA
#       backend built): smprun and the GPU test binaries, the shared
#       libraries they load that such a machine lacks (protobuf, OpenBLAS,
#       Open MPI's, ONNX's proto; not glibc nor CUDA's: those are the
#       machine's own); the CUDA suite's artifacts
#       (scripts/gpu-suite.sh compile); the GPT-2 124M benchmark's artifact
#       (bf16, AdamW, batch BENCH_BATCH, default 16) without its 500 MB of
#       weights, and its tokens; all in one xz archive (payload.tar.xz:
#       payload/, art/, bench/, trainer/). KIT defaults to build/device-kit (ignored by
#       git: the device tool carries it with carry=["build/device-kit"]).
#       Refuses a kit over 40 MiB (the device tool carries 64 MiB with the
#       checkout). --emulate packs the CUDA emulator's builds in their place
#       (smprun-emu as smprun, the *-emu tests; docs/cuda-emulator.md) and a
#       small GPT as the benchmark: a rehearsal of the GPU run on this
#       machine (`run KIT OUT --device cuda --no-torch`). KIT_EDGES=1
#       first runs each benchmark artifact one step on the CUDA emulator's
#       dry run of the edges (smprun-emu, SMP_CUDAEMU_DRY_RUN=edges: every
#       large launch's first and last blocks at full size; GPT-2 124M's
#       ~25 s an artifact), the times in bench/gpt2/edges.txt; an artifact
#       that fails stops the pack before any device time is spent on it.
#
#   device-kit.sh run KIT OUT [--device cuda|cpu] [--budget SECONDS]
#                             [--steps N] [--warmup N] [--profile-steps N]
#                             [--no-bench] [--no-torch]
#                             [--torch-modes LIST]
#       On the GPU machine, from the checkout the kit travelled with: unpacks
#       the binaries and runs them through wrappers with the kit's libraries
#       and CUDA's (the driver's /usr/local/nvidia/lib64 and lib, the folder
#       of libcuda.so.1 that ldconfig knows, the toolkit's lib64 folders,
#       the Python wheels' nvidia/*/lib), then, in this order, each stage
#       while the budget lasts:
#         1. env: the machine, nvidia-smi, PyTorch, ldd of every binary. A
#            library missing is reported at the top of env.txt and in
#            summary.md, and the run goes on; only one that smprun misses
#            skips the stages that need smprun.
#         2. the GPU unit tests (smp-cuda-kernel-tests, smp-cuda-wgmma-tests,
#            smp-comm-nccl-tests
#            on one rank; ctest's label gpu), 150 s each at most; then the
#            attention kernels, bf16, forward and training, smp's
#            (smp-cuda-attention-bench) against PyTorch's SDPA flash and
#            cuDNN backends (bench/attention_torch.py) on the same shapes,
#            one table (attention.md; not with --device cpu); where ncu is
#            found, the kernels' hardware counters at GPT-2's shape
#            (attention-ncu.txt; the passes on wgmma in
#            attention-ncu-wgmma.txt; the figures in summary.md);
#         3. the CUDA suite of test/smprun/cuda.test (scripts/gpu-suite.sh
#            run), 60 s for each smprun at most, three parts of it at once
#            on a machine of 8 cores or more (SUITE_JOBS overrides);
#         4. the GPT-2 benchmark's smp row (bench/gpt2_train.sh --prebuilt;
#            the weights random, N(0, 0.02)), 240 s at most;
#         5. smp's time per op: smprun --profile on the same artifact for
#            1 + N steps (--profile-steps, default 10; the first left out,
#            --profile-warmup 1; the GPU's clock, nothing waited for), its
#            top 15 ops, the GPU's idle time between instructions and the
#            top source nodes as tables (scripts/profile_table.py);
#         6. the PyTorch rows on the same GPU: torch.compile and eager
#            with SDPA, then without (torch.compile rows need 150 s left;
#            --torch-modes LIST: those rows in that order, comma-separated
#            from compile-sdpa, eager-sdpa, compile, eager: rows measured
#            before leave the budget to the stages after them);
#            6b. the Hugging Face Trainer's fp16 and bf16 (autocast) on
#            the GPU against smprun's artifacts compiled from the same
#            TrainingArguments files (needs transformers; also with
#            --no-bench);
#         7. the ablations: the benchmark's artifact and the same model
#            compiled without one optimisation each, or at twice the
#            batch (ABLATIONS), --warmup steps each (5 at least), a table
#            of their median step times, tokens/s, MFU and peak bytes,
#            with a row "best" of the faster choices the rows before it
#            found, together;
#            7b. torch.compile with SDPA at twice the batch (GPU only,
#            120 s left at least; not when --torch-modes leaves out
#            compile-sdpa); 7c. a small GPT's step, which the host bounds,
#            queued one by one and as a CUDA graph (GPU only);
#         8. where ncu is found (GPU only, 90 s left at least): every
#            kernel of one step of the benchmark's artifact on the
#            hardware counters, a table by total time (DRAM GB/s and share
#            of peak, SM share, registers, occupancy;
#            scripts/ncu_table.py; the raw CSV in step-ncu.csv).
#       --budget (default 480) counts from the start of `run`: every
#       process runs under timeout(1) within it and its own cap; a stage or
#       row that cannot start in what is left is skipped, and summary.md
#       says so and why. So nothing outlives the budget by more than a few
#       seconds, even when the run itself is killed.
#       OUT fills as the run goes (the device tool brings back files that
#       are in OUT when its command ends, eight at most, even when it kills
#       it): env.txt (the machine, the libraries each binary loads) first;
#       summary.md (the results in one page, a line per suite check as it
#       is printed, a line per benchmark row as it ends, the profile
#       tables, each stage's seconds, and the stages' table at the end);
#       suite.txt; bench.md; attention.md; attention-ncu*.txt; all.tar.gz
#       (every log, metrics
#       file, profile and test report), refreshed after every stage.
#       --device cpu runs the same steps on the CPU (the GPU tests skip; no
#       attention stage; the benchmark on a small GPT, no torch.compile):
#       how the kit is checked on a machine without a GPU.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}

usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" >&2; exit 2; }

# Libraries the GPU machine has of its own: glibc's, and CUDA's (the
# toolkit or the Python wheels).
own_library() {
  case "$1" in
    linux-vdso* | ld-linux* | libc.so* | libm.so* | libpthread.so* | \
      libdl.so* | librt.so* | libcuda.so* | libcudart.so* | libcublas* | \
      libnccl.so* | libnvrtc* | libcudnn* | libnvJitLink*) return 0 ;;
  esac
  return 1
}

# Libraries smp's binaries load on first use rather than link
# (kernels/cuda/CublasLtLoader.cpp: libcublasLt.so.<CUDA major>).
LAZY_LIBRARIES=(libcublasLt.so.13)

pack() {
  local kit=$1 emulate=${2:-} build=${BUILD_DIR:-$ROOT/build}
  local bins=(smprun smp-cuda-kernel-tests smp-cuda-wgmma-tests smp-comm-nccl-tests
    smp-artifact-text smp-cuda-attention-bench smp-checkpoint)
  # The build each kit binary comes from (--emulate: the emulator's).
  local suffix=""
  [ "$emulate" = --emulate ] && suffix=-emu
  # (The emulator's kernel tests hold the wgmma test: run filtered.)
  from() {
    case $1 in
      smp-artifact-text | smp-checkpoint | smpc | smp-modelgen) echo "$1" ;;
      smp-cuda-wgmma-tests) [ -n "$suffix" ] && echo smp-cuda-kernel-tests-emu || echo "$1" ;;
      *) echo "$1$suffix" ;;
    esac
  }
  for b in "${bins[@]}" smpc smp-modelgen; do
    [ -x "$build/bin/$(from "$b")" ] || {
      echo "device-kit: $build/bin/$(from "$b") not found: build with the CUDA" \
        "backend (nvcc at /usr/local/cuda/bin) first: bash scripts/build.sh" >&2
      exit 1
    }
  done
  rm -rf "$kit"
  mkdir -p "$kit/payload/bin" "$kit/payload/lib" "$kit/bench"
  for b in "${bins[@]}"; do
    cp "$build/bin/$(from "$b")" "$kit/payload/bin/$b"
    strip --strip-unneeded "$kit/payload/bin/$b"
    ldd "$build/bin/$(from "$b")" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
      while read -r name path; do
        own_library "$name" && continue
        [ -f "$kit/payload/lib/$name" ] && continue
        cp -L "$path" "$kit/payload/lib/$name"
        strip --strip-unneeded "$kit/payload/lib/$name" 2>/dev/null || true
      done
  done
  # The CUDA suite's artifacts (small: the training fixtures).
  SMPC=$build/bin/smpc bash "$ROOT/scripts/gpu-suite.sh" compile "$kit/art" >&2
  # The Trainer stage's: the gpt fixture from the Trainer's arguments.
  mkdir -p "$kit/trainer"
  local p
  for p in fp16 bf16; do
    "$build/bin/smpc" compile "$ROOT/test/fixtures/train/gpt.onnx" --train \
      --target cuda --loss cross_entropy:logits:labels \
      --training-args "$ROOT/test/fixtures/hf-trainer/precision_$p.json" \
      -o "$kit/trainer/precision_$p.smpx" > /dev/null
  done
  # The benchmark: GPT-2 124M (as bench/gpt2_train.sh builds it) and a
  # small GPT for --device cpu. Their weights files are dropped
  # (the run step writes random ones and reseals the artifact).
  local B=${BENCH_BATCH:-16}
  bench_model() { # DIR BATCH TARGET modelgen-args...
    local dir=$1 batch=$2 target=$3
    shift 3
    mkdir -p "$dir"
    # Samples for a step of the ablations' x2 batch (smprun cycles them).
    "$build/bin/smp-modelgen" gpt "$@" -o "$dir/gpt2.onnx" \
      --write-data "$dir/data" $((batch * 2)) > /dev/null
    local common=(--train --target "$target" --loss cross_entropy:logits:labels
      --optimizer adamw --lr 1e-4 --precision bf16)
    "$build/bin/smpc" compile "$dir/gpt2.onnx" "${common[@]}" \
      --batch-size "$batch" -o "$dir/gpt2-fused.smpx" > /dev/null
    # The ablations (stage 7): the same model without one optimisation, or
    # at another batch.
    local ab flags
    : > "$dir/ablations.txt"
    for ab in "${ABLATIONS[@]}"; do
      echo "${ab%%:*}" >> "$dir/ablations.txt"
      flags=${ab#*:}
      [ -n "$flags" ] || continue # best: made of the rows before it
      if [[ $flags == "env "* ]]; then
        echo "${flags#env }" > "$dir/ablate-${ab%%:*}.env"
        continue
      fi
      case $flags in
        "--batch-size x"*) flags="--batch-size $((batch * ${flags#--batch-size x}))" ;;
      esac
      local own=$flags
      [[ $flags == *--batch-size* ]] || flags="$flags --batch-size $batch"
      # shellcheck disable=SC2086 # the flags split
      "$build/bin/smpc" compile "$dir/gpt2.onnx" "${common[@]}" $flags \
        -o "$dir/ablate-${ab%%:*}.smpx" > /dev/null
      echo "$own" > "$dir/ablate-${ab%%:*}.flags"
    done
    rm -f "$dir/gpt2.onnx" "$dir/gpt2.onnx.data"
    [ "${KIT_EDGES:-0}" != 1 ] || [ "$target" != cuda ] ||
      edges_check "$dir" "$build/bin/smprun-emu"
  }
  if [ -n "$suffix" ]; then # the emulator: a GPT it runs in seconds
    B=4
    bench_model "$kit/bench/gpt2" "$B" cuda --layers 2 --hidden 128 --heads 4 \
      --seq 64 --vocab 1025
  else
    bench_model "$kit/bench/gpt2" "$B" cuda --layers 12 --hidden 768 --heads 12 \
      --seq 1024 --vocab 50257
  fi
  echo "$B" > "$kit/bench/gpt2/batch"
  [ -z "$suffix" ] || echo "packed with --emulate: the binaries run --device" \
    "cuda on the CUDA emulator (docs/cuda-emulator.md); its speeds are not a" \
    "GPU's" > "$kit/EMULATED"
  bench_model "$kit/bench/small" 4 cpu --layers 2 --hidden 128 --heads 4 \
    --seq 64 --vocab 512
  echo 4 > "$kit/bench/small/batch"
  pack_host_model "$kit/bench/host" "$build" # stage 7c's
  local w
  for w in "$kit"/bench/*/*.smpx/*.weights.bin; do
    # What the file holds besides f32 parameters (the positions' int64
    # constant, say) is kept; the parameters become random where it runs.
    "$build/bin/smp-artifact-text" decode "${w%.weights.bin}.program.pb" |
      "$PYTHON" "$ROOT/scripts/kit_weights.py" keep - "$w" "$w.kept"
    rm "$w"
  done
  # Compressed: most of it is OpenBLAS and the CUDA kernels' fat binaries.
  # xz -9's 64 MiB window spans the three binaries that hold the same
  # kernels, so each is stored once (xz's default 8 MiB window does not:
  # 20.3 MB against 13.1 MB for this payload on 2026-12-04). XZ_OPT, when
  # set, chooses instead: the tests' --lzma2=preset=1,dict=64MiB keeps the
  # window (9 s and 16.0 MB for the 114 MB payload of 2026-12-05, where -2
  # took 12 s and 25.6 MB, and -9 41 s and 14.5 MB).
  # The artifacts (art, bench, trainer: 16 MB of protobuf and parameters,
  # 2.9 MB compressed) go in the same archive; the run unpacks them beside
  # the payload.
  local level=(-9)
  [ -z "${XZ_OPT:-}" ] || level=()
  tar -C "$kit" -cf - payload art bench trainer |
    xz "${level[@]}" -T1 > "$kit/payload.tar.xz"
  rm -rf "$kit/payload" "$kit/art" "$kit/bench" "$kit/trainer"
  local bytes listing
  bytes=$(du -sb "$kit" | cut -f1)
  # The archive listed once (each listing decompresses all of it).
  listing=$(tar -tvJf "$kit/payload.tar.xz")
  {
    echo "device kit $(date -u +%Y-%m-%dT%H:%MZ) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    awk '$6 !~ /\/$/ { if ($6 ~ /^payload\//) p++; else a++ }
      END { printf "payload: %d files (and the artifacts: %d)\n", p, a }' <<< "$listing"
    awk '$6 ~ /^payload\// {print "  " $3, $6}' <<< "$listing"
    echo "total: $bytes bytes"
  } > "$kit/MANIFEST.txt"
  cat "$kit/MANIFEST.txt"
  if [ "$bytes" -gt $((40 * 1024 * 1024)) ]; then
    echo "device-kit: $kit is $bytes bytes, over 40 MiB" >&2
    exit 1
  fi
  # The device tool carries the kit with the checkout's tracked and
  # untracked-not-ignored files, 64 MiB in all (a 35 MB kit and a 35 MB
  # checkout did not fit).
  local tree
  tree=$(cd "$ROOT" && { git ls-files -z; git ls-files -z --others \
    --exclude-standard; } 2>/dev/null | xargs -0 du -cb 2>/dev/null |
    awk '$2 == "total" {t += $1} END {print t + 0}')
  if [ $((bytes + tree)) -gt $((64 * 1024 * 1024)) ]; then
    echo "device-kit: warning: the kit ($bytes bytes) and the checkout" \
      "($tree bytes) are over the 64 MiB a device call carries" >&2
  fi
}


# CUDA's library folders on this machine, for LD_LIBRARY_PATH: the driver's
# (libcuda.so.1: /usr/local/nvidia, where a GPU container mounts it, or
# wherever ldconfig knows it), the toolkit's, the Python wheels' (nvidia/*/lib,
# nvidia/cu13/lib among them).
cuda_library_path() {
  local dirs=() d l
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
    [ -d "$d" ] && dirs+=("$d")
  done
  l=$({ ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true; } |
    awk '$1 == "libcuda.so.1" && /x86-64/ && $NF ~ /^\// {print $NF; exit}')
  [ -n "$l" ] && dirs+=("$(dirname "$l")")
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-*/lib64 \
    /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && dirs+=("$d")
  done
  while read -r d; do
    for l in "$d"/*/lib "$d"/*/lib64; do [ -d "$l" ] && dirs+=("$l"); done
  done < <(timeout --foreground 60 "$PYTHON" -c \
    'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null || true)
  [ ${#dirs[@]} = 0 ] || printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++' | paste -sd:
}

# The run's clock: DEADLINE (unix seconds) is the start plus the budget;
# RESERVE seconds stay for the last summary and tarball.
RESERVE=5
left() { echo $((DEADLINE - $(date +%s))); }
# cap S: the seconds a process may take: S, or what the budget has left
# (at least 1).
cap() {
  local l=$(($(left) - RESERVE))
  [ "$1" -lt "$l" ] && l=$1
  [ "$l" -ge 1 ] || l=1
  echo "$l"
}
# limited S CMD...: CMD under timeout(1) with cap S (TERM, KILL 5 s later);
# its status (124 or 137: cut).
limited() {
  local s
  s=$(cap "$1")
  shift
  timeout --foreground -k 5 "$s" "$@" < /dev/null
}

# The stages: each adds "name|seconds|result" to STAGES and a line with its
# seconds to summary.md, then the tarball is refreshed.
STAGES=()
# stage NAME SECONDS RESULT: a row of the stages' table ('|' out, long
# results cut).
stage() {
  local r=${3//|//}
  [ ${#r} -le 160 ] || r="${r:0:157}..."
  STAGES+=("$1|$2|$r")
}
stage_begin() {
  STAGE_T0=$(date +%s)
  echo "## $1" >> "$SUMMARY"
}
stage_end() {
  local s=$(($(date +%s) - STAGE_T0))
  stage "$1" "$s" "$2"
  echo "_$1: $s s, $2; $(left) s of the budget left_" >> "$SUMMARY"
  echo >> "$SUMMARY"
  refresh
}
# room STAGE NEED: whether STAGE, which needs NEED seconds, may start; if
# not, summary.md says it was skipped and why.
# Whether PYTHON has PyTorch 2 (scaled_dot_product_attention, compile).
have_torch2() {
  limited 90 "$PYTHON" -c 'import torch, sys; sys.exit(int(torch.__version__.split(".")[0]) < 2)' \
    2>/dev/null
}
room() {
  local l=$(($(left) - RESERVE))
  [ "$l" -ge "$2" ] && return 0
  skipped "$1" "the budget: $l s left, it needs $2 s"
  return 1
}
skipped() {
  stage "$1" 0 "skipped: $2"
  echo "## $1: skipped ($2)" >> "$SUMMARY"
  echo >> "$SUMMARY"
  echo "$1: skipped ($2)"
}

# all.tar.gz in OUT: every log and the one-page files (renamed into place,
# so that a run killed meanwhile leaves the previous one).
refresh() {
  local f
  for f in summary.md env.txt suite.txt bench.md attention.md; do
    [ -f "$DEST/$f" ] && cp "$DEST/$f" "$LOGS/"
  done
  # shellcheck disable=SC2015 # any failure: the previous tarball stays
  tar -C "$WORK" -czf "$WORK/all.tar.gz" out 2>/dev/null &&
    cp "$WORK/all.tar.gz" "$DEST/all.tar.gz.part" &&
    mv -f "$DEST/all.tar.gz.part" "$DEST/all.tar.gz" || true
}

# At the end (or on TERM/INT): the stages' table, the last tarball.
finish() {
  local rc=$? s name secs result
  trap - EXIT
  {
    echo "## Stages (budget $BUDGET s, $(($(date +%s) - DEADLINE + BUDGET)) s used)"
    echo
    echo "| stage | seconds | result |"
    echo "| --- | --- | --- |"
    for s in "${STAGES[@]}"; do
      IFS='|' read -r name secs result <<< "$s"
      echo "| $name | $secs | $result |"
    done
  } >> "$SUMMARY"
  # The same five files whatever ran.
  [ -f "$DEST/suite.txt" ] ||
    echo "The CUDA suite did not run (summary.md says why)." > "$DEST/suite.txt"
  [ -f "$DEST/bench.md" ] ||
    echo "The benchmark did not run (summary.md says why)." > "$DEST/bench.md"
  refresh
  rm -rf "$WORK"
  exit "$rc"
}

# bench.md from the benchmark's parts so far: one table (smp's row, then
# PyTorch's), the notes under it.
bench_md() {
  local parts=("$LOGS"/bench-smp.md "$LOGS"/bench-torch.md) p
  {
    echo "| run | tokens/s | MFU | loss after the steps (own weights and data) | memory (bytes) |"
    echo "| --- | --- | --- | --- | --- |"
    for p in "${parts[@]}"; do
      [ -f "$p" ] && grep -v -e '^| run |' -e '^| --- |' "$p" | grep '^|'
    done
    for p in "${parts[@]}"; do
      [ -f "$p" ] && grep -v -e '^|' -e '^[[:space:]]*$' "$p"
    done | sed '1s/^/\n/'
  } > "$DEST/bench.md" || true
}

# fill_weights ART: random parameters in place of the artifact's dropped
# weights file, then its checksums; prints ok or why not. The fill is a
# function of the .kept file (seed 0), so an ablation whose .kept is the
# benchmark's (the same weights' layout) links the file filled before
# (WORK/weights: GPT-2's 500 MB, a few seconds of the budget each).
fill_weights() {
  local art=$1 kept out made
  mkdir -p "$WORK/weights"
  for kept in "$art"/*.weights.bin.kept; do
    [ -e "$kept" ] || continue
    out=${kept%.kept} made=$WORK/weights/$(sha256sum < "$kept" | cut -c1-64)
    if { { [ -f "$made" ] && ln -f "$made" "$out"; } ||
      { limited 120 "$PYTHON" "$ROOT/scripts/kit_weights.py" fill "$kept" \
        "$out" && { ln -f "$out" "$made" || true; }; }; } \
      > "$LOGS/weights.log" 2>&1 &&
      limited 60 "$BIN/smp-artifact-text" reseal "$art" \
        >> "$LOGS/weights.log" 2>&1; then
      rm "$kept"
    else
      echo "FAILED: no weights ($(tail -n 1 "$LOGS/weights.log"))"
      return 0
    fi
  done
  echo ok
}

# The stages that run() calls (env, unit tests, attention, the suite, smp's
# row and profile, PyTorch, Trainer, counters), and pack's check of its
# artifacts (edges_check); the ablations (their list, ABLATIONS, which pack
# reads too, and stage 7).
# shellcheck source=scripts/device-kit-stages.sh
source "$ROOT/scripts/device-kit-stages.sh"
# shellcheck source=scripts/device-kit-ablations.sh
source "$ROOT/scripts/device-kit-ablations.sh"

run() {
  local kit=$1 out=$2 dev=cuda steps=30 warm=10 bench=1 torch=1 psteps=10
  local modes=""
  BUDGET=480
  shift 2
  while [ $# -gt 0 ]; do
    case "$1" in
      --device) dev=$2; shift 2 ;;
      --budget) BUDGET=$2; shift 2 ;;
      --steps) steps=$2; shift 2 ;;
      --warmup) warm=$2; shift 2 ;;
      --profile-steps) psteps=$2; shift 2 ;;
      --no-bench) bench=0; shift ;;
      --no-torch) torch=0; shift ;;
      --torch-modes) modes=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  local n
  for n in "$BUDGET" "$steps" "$warm" "$psteps"; do
    [[ $n =~ ^[0-9]+$ ]] || usage
  done
  if [ -n "$modes" ] &&
    ! [[ $modes =~ ^(compile-sdpa|eager-sdpa|compile|eager)(,(compile-sdpa|eager-sdpa|compile|eager))*$ ]]; then
    echo "device-kit: --torch-modes '$modes': a comma-separated list of" \
      "compile-sdpa, eager-sdpa, compile and eager" >&2
    exit 2
  fi
  DEADLINE=$(($(date +%s) + BUDGET))
  kit=$(cd "$kit" && pwd)
  mkdir -p "$out"
  DEST=$(cd "$out" && pwd)
  rm -f "$DEST"/summary.md "$DEST"/env.txt "$DEST"/suite.txt "$DEST"/bench.md \
    "$DEST"/attention.md "$DEST"/all.tar.gz "$DEST"/all.tar.gz.part
  SUMMARY=$DEST/summary.md
  local env=$DEST/env.txt
  # What each stage may take: its minimum to start and its processes' caps.
  local min_unit=20 min_attn=30 min_suite=30 min_bench=60 min_profile=40
  local min_ablate=60
  if [ "$dev" = cpu ]; then
    min_unit=3 min_attn=3 min_suite=10 min_bench=10 min_profile=5
    min_ablate=5
  fi
  # env.txt first of all: whatever happens next, it is in OUT.
  {
    echo "date: $(date -u)"
    echo "host: $(uname -a)"
    echo "kit: $(head -n 1 "$kit/MANIFEST.txt")"
    echo "budget: $BUDGET s, until $(date -u -d "@$DEADLINE" 2>/dev/null || echo "$DEADLINE")"
  } > "$env"
  echo "# device kit run on $dev, $(date -u) (budget $BUDGET s)" > "$SUMMARY"
  [ ! -f "$kit/EMULATED" ] || echo "**$(cat "$kit/EMULATED")**" >> "$SUMMARY"
  echo >> "$SUMMARY"
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/smp-kit.XXXXXX")
  LOGS=$WORK/out
  mkdir -p "$LOGS"
  trap finish EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT

  # 1. The machine and the libraries (sets BIN and smprun_ok).
  local BIN smprun_ok=1
  env_stage || return 1

  # 2. The GPU unit tests (each skips without a GPU).
  unit_tests_stage

  # 2b. The attention kernels against PyTorch's SDPA (not on the CPU).
  if [ "$dev" = cpu ]; then
    skipped "attention kernels" "--device cpu"
  elif room "attention kernels" $min_attn; then
    attention_stage "$dev" "$torch"
  fi

  # 3. The CUDA suite.
  suite_stage

  # 4-6. The GPT-2 benchmark: smp's row, where its time goes, PyTorch's rows.
  if [ $bench = 0 ]; then
    skipped "GPT-2 benchmark" "--no-bench"
    trainer_stage_if "$dev" "$torch"
    return 0
  fi
  local model=gpt2 args=(--device "$dev" --steps "$steps" --warmup "$warm")
  # torch.compile with SDPA first: the row issue 19 compares smp with.
  [ -n "$modes" ] || modes=compile-sdpa,eager-sdpa,compile,eager
  if [ "$dev" = cpu ]; then
    model=small
    args=(--device cpu --small --steps 2 --warmup 1)
    # No torch.compile on the CPU (minutes of compilation).
    modes=$(echo "$modes" | tr , '\n' | { grep -v '^compile' || true; } |
      paste -sd, -)
  fi
  local bdir=$WORK/bench/$model batch smp_row=0 # unpacked, writable
  batch=$(cat "$bdir/batch")
  smp_row_stage

  # 5. Where smp's step goes.
  profile_stage

  # 6. PyTorch on the same GPU: PyTorch 2 (scaled_dot_product_attention,
  # torch.compile) or none.
  torch_stage "$bdir" "$torch" "$batch" "$modes" "${args[@]}"

  # 6b. The Trainer's mixed precision against smp's.
  if [ $smprun_ok = 0 ]; then
    skipped "Trainer mixed precision" "smprun misses libraries"
  else
    trainer_stage_if "$dev" "$torch"
  fi

  # 7. What the optimisations buy: the ablations against smp's artifact.
  if [ $smp_row = 0 ]; then
    skipped "ablations" "no smp row"
  else
    ablation_stage "$bdir" "$dev" $((warm > 5 ? warm : 5))
  fi

  # 7b. torch.compile with SDPA at twice the batch (smp's: the ablations'
  # batch-x2 row).
  torch_x2_stage "$bdir" "$dev" "$torch" "$batch" "$modes" "${args[@]}"

  # 7c. The CUDA graph where the host bounds the step (a small GPT; the
  # emulator's steps are slow, its speeds no GPU's: --steps steps there).
  local hsteps=$((steps * 10))
  [ ! -f "$kit/EMULATED" ] || hsteps=$steps
  graph_host_stage "$dev" "$hsteps"

  # 8. Each kernel of the step on the hardware counters (GPU only).
  if [ $smp_row = 0 ] || [ "$dev" != cuda ] || [ -f "$kit/EMULATED" ]; then
    skipped "step counters" "no smp row, no GPU or an emulated kit"
  else
    step_counters_stage "$bdir"
  fi
}

case "${1:-}" in
  pack)
    [ $# -le 3 ] || usage
    if [ "${2:-}" = --emulate ]; then pack "$ROOT/build/device-kit" --emulate
    elif [ -z "${3:-}" ] || [ "$3" = --emulate ]; then
      pack "${2:-$ROOT/build/device-kit}" "${3:-}"
    else usage; fi ;;
  run) [ $# -ge 3 ] || usage; run "${@:2}" ;;
  *) usage ;;
esac
