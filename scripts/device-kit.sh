#!/usr/bin/env bash
# The device kit: smp's runtime as a relocatable bundle, and the GPU checks
# that run from it on a machine that has a GPU, CUDA 13 and Python but none
# of Debian's packages and no compiler for smp (docs/runtime-layout.md,
# "The device kit").
#
#   device-kit.sh pack [KIT]
#       From this checkout's build (BUILD_DIR, default build; the CUDA
#       backend built): smprun and the GPU test binaries, the shared
#       libraries they load that such a machine lacks (protobuf, OpenBLAS,
#       Open MPI's, ONNX's proto; not glibc nor CUDA's: those are the
#       machine's own), compressed; the CUDA suite's artifacts
#       (scripts/gpu-suite.sh compile); the GPT-2 124M benchmark's artifact
#       (bf16, AdamW, batch BENCH_BATCH, default 16) without its 500 MB of
#       weights, and its tokens. KIT defaults to build/device-kit (ignored by
#       git: the device tool carries it with carry=["build/device-kit"]).
#       Refuses a kit over 40 MiB (the device tool carries 64 MiB with the
#       checkout).
#
#   device-kit.sh run KIT OUT [--device cuda|cpu] [--steps N] [--warmup N]
#                             [--no-bench] [--no-torch]
#       On the GPU machine, from the checkout the kit travelled with: unpacks
#       the binaries, finds CUDA's libraries (the toolkit's lib64 folders,
#       the Python wheels' nvidia/*/lib), then in one go: the GPU unit tests
#       (smp-cuda-kernel-tests, smp-comm-nccl-tests on one rank; ctest's
#       label gpu), the CUDA suite of test/smprun/cuda.test, and the GPT-2
#       benchmark against PyTorch eager and torch.compile (with and without
#       SDPA) on the same GPU (bench/gpt2_train.sh --prebuilt; the weights
#       random, N(0, 0.02)). OUT gets five files (the device tool brings
#       back eight at most): summary.md (the results in one page), env.txt
#       (the machine, the libraries each binary loads), suite.txt, bench.md
#       and all.tar.gz (every log, metrics file and test report). --device cpu runs the
#       same steps on the CPU (the GPU tests skip; the benchmark on a small
#       GPT): how the kit is checked on a machine without a GPU.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}

usage() { sed -n '2,33p' "$0" >&2; exit 2; }

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

pack() {
  local kit=$1 build=${BUILD_DIR:-$ROOT/build} bin
  local bins=(smprun smp-cuda-kernel-tests smp-comm-nccl-tests smp-artifact-text)
  for b in "${bins[@]}" smpc smp-modelgen; do
    [ -x "$build/bin/$b" ] || {
      echo "device-kit: $build/bin/$b not found: build with the CUDA backend" \
        "(nvcc at /usr/local/cuda/bin) first: bash scripts/build.sh" >&2
      exit 1
    }
  done
  rm -rf "$kit"
  mkdir -p "$kit/payload/bin" "$kit/payload/lib" "$kit/bench"
  for b in "${bins[@]}"; do
    cp "$build/bin/$b" "$kit/payload/bin/"
    strip --strip-unneeded "$kit/payload/bin/$b"
    ldd "$build/bin/$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
      while read -r name path; do
        own_library "$name" && continue
        [ -f "$kit/payload/lib/$name" ] && continue
        cp -L "$path" "$kit/payload/lib/$name"
        strip --strip-unneeded "$kit/payload/lib/$name" 2>/dev/null || true
      done
  done
  # The CUDA suite's artifacts (small: the training fixtures).
  SMPC=$build/bin/smpc bash "$ROOT/scripts/gpu-suite.sh" compile "$kit/art" >&2
  # The benchmark: GPT-2 124M (as bench/gpt2_train.sh builds it) and a
  # small GPT for --device cpu. The 124M model's weights file is dropped
  # (the run step writes random ones and reseals the artifact).
  local B=${BENCH_BATCH:-16}
  bench_model() { # DIR BATCH TARGET modelgen-args...
    local dir=$1 batch=$2 target=$3
    shift 3
    mkdir -p "$dir"
    "$build/bin/smp-modelgen" gpt "$@" -o "$dir/gpt2.onnx" \
      --write-data "$dir/data" $((batch * 2)) > /dev/null
    "$build/bin/smpc" compile "$dir/gpt2.onnx" --train --target "$target" \
      --loss cross_entropy:logits:labels --optimizer adamw --lr 1e-4 \
      --precision bf16 --batch-size "$batch" -o "$dir/gpt2-fused.smpx" > /dev/null
    rm -f "$dir/gpt2.onnx" "$dir/gpt2.onnx.data"
  }
  bench_model "$kit/bench/gpt2" "$B" cuda --layers 12 --hidden 768 --heads 12 \
    --seq 1024 --vocab 50257
  local art=$kit/bench/gpt2/gpt2-fused.smpx w
  for w in "$art"/*.weights.bin; do
    # What the file holds besides f32 parameters (the positions' int64
    # constant, say) is kept; the parameters become random on the device.
    "$build/bin/smp-artifact-text" decode "${w%.weights.bin}.program.pb" |
      "$PYTHON" "$ROOT/scripts/kit_weights.py" keep - "$w" "$w.kept"
    rm "$w"
  done
  echo "$B" > "$kit/bench/gpt2/batch"
  bench_model "$kit/bench/small" 4 cpu --layers 2 --hidden 128 --heads 4 \
    --seq 64 --vocab 512
  echo 4 > "$kit/bench/small/batch"
  # Compressed: most of it is OpenBLAS and the CUDA kernels' fat binaries.
  tar -C "$kit" -cJf "$kit/payload.tar.xz" payload
  rm -rf "$kit/payload"
  local bytes
  bytes=$(du -sb "$kit" | cut -f1)
  {
    echo "device kit $(date -u +%Y-%m-%dT%H:%MZ) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "payload: $(tar -tJf "$kit/payload.tar.xz" | grep -c -v '/$') files"
    tar -tvJf "$kit/payload.tar.xz" | awk '{print "  " $3, $6}'
    echo "total: $bytes bytes"
  } > "$kit/MANIFEST.txt"
  cat "$kit/MANIFEST.txt"
  if [ "$bytes" -gt $((40 * 1024 * 1024)) ]; then
    echo "device-kit: $kit is $bytes bytes, over 40 MiB" >&2
    exit 1
  fi
}

# CUDA's library folders on this machine (the toolkit's, the Python
# wheels'), for LD_LIBRARY_PATH.
cuda_library_path() {
  local dirs=() d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-*/lib64 \
    /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && dirs+=("$d")
  done
  d=$("$PYTHON" -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0] + "/"))' 2>/dev/null || true)
  if [ -n "$d" ]; then
    for l in "$d"/*/lib; do [ -d "$l" ] && dirs+=("$l"); done
  fi
  (IFS=:; echo "${dirs[*]}")
}

# Brings the run's results to DEST: the one-page files and a tarball of the
# rest (the device tool returns eight files at most).
finish() {
  local out=$1 dest=$2 f
  for f in summary.md env.txt suite.txt bench.md; do
    [ -f "$out/$f" ] && cp "$out/$f" "$dest/"
  done
  tar -C "$out/.." -czf "$dest/all.tar.gz" out
}

run() {
  local kit=$1 out=$2 dev=cuda steps=30 warm=10 bench=1 torch=1
  shift 2
  while [ $# -gt 0 ]; do
    case "$1" in
      --device) dev=$2; shift 2 ;;
      --steps) steps=$2; shift 2 ;;
      --warmup) warm=$2; shift 2 ;;
      --no-bench) bench=0; shift ;;
      --no-torch) torch=0; shift ;;
      *) usage ;;
    esac
  done
  kit=$(cd "$kit" && pwd)
  mkdir -p "$out"
  local dest work
  dest=$(cd "$out" && pwd)
  work=$(mktemp -d "${TMPDIR:-/tmp}/smp-kit.XXXXXX")
  out=$work/out
  mkdir -p "$out"
  # shellcheck disable=SC2064
  trap "finish '$out' '$dest'" EXIT
  tar -C "$work" -xJf "$kit/payload.tar.xz"
  # The binaries run through wrappers that give them the kit's libraries
  # and CUDA's; nothing else sees them (PyTorch has its own libstdc++).
  local BIN=$work/payload/wrap libs b
  libs="$work/payload/lib:$(cuda_library_path)"
  mkdir -p "$BIN"
  for b in "$work"/payload/bin/*; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
      "$libs" "$b" > "$BIN/$(basename "$b")"
    chmod +x "$BIN/$(basename "$b")"
  done
  export SMP_ATTENTION_FIXTURES=$ROOT/test/unit/kernels/Inputs/attention
  {
    echo "date: $(date -u)"
    echo "host: $(uname -a)"
    echo "kit: $(head -n 1 "$kit/MANIFEST.txt")"
    echo "libraries: $libs"
    if command -v nvidia-smi > /dev/null; then nvidia-smi 2>&1; else
      echo "nvidia-smi: none"; fi
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1 || true
    for b in "$work"/payload/bin/*; do
      echo "== ldd $b"
      LD_LIBRARY_PATH="$libs" ldd "$b"
    done
  } > "$out/env.txt" 2>&1
  if grep -q "=> not found" "$out/env.txt"; then
    grep "=> not found" "$out/env.txt" | sort -u
    echo "device-kit: libraries missing (see $out/env.txt)" >&2
    exit 1
  fi
  local summary=$out/summary.md
  echo "# device kit run on $dev, $(date -u)" > "$summary"
  grep -m1 -E "NVIDIA|nvidia-smi: none" "$out/env.txt" >> "$summary" || true
  # 1. The GPU unit tests (each skips without a GPU).
  for t in smp-cuda-kernel-tests smp-comm-nccl-tests; do
    "$BIN/$t" --gtest_output="xml:$out/$t.xml" > "$out/$t.log" 2>&1 &&
      echo "$t: $(grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ test' "$out/$t.log" |
        sed 's/^\[ *//; s/ *\]//; s/, listed below://' | tr '\n' ' ')" ||
      echo "$t: FAILED: $(grep -E '^\[  FAILED  \]' "$out/$t.log" | head -5 | tr '\n' ' ')"
  done | tee -a "$summary"
  # 2. The CUDA suite (its --save-onnx reads the ONNX model at the path the
  # artifact recorded when it was compiled elsewhere: linked to this
  # checkout's copy where it is missing).
  local src
  src=$("$BIN/smp-artifact-text" decode "$kit/art/gpt.adamw.fp32.smpx/manifest.pb" |
    sed -n 's/^ *source_model: "\(.*\)"$/\1/p')
  if [ -n "$src" ] && [ ! -e "$src" ]; then
    mkdir -p "$(dirname "$src")" 2>/dev/null &&
      ln -s "$ROOT/test/fixtures/train/$(basename "$src")" "$src" 2>/dev/null || true
  fi
  echo "## CUDA suite (test/smprun/cuda.test's checks)" >> "$summary"
  SMPRUN=$BIN/smprun PYTHON=$PYTHON bash "$ROOT/scripts/gpu-suite.sh" run \
    "$kit/art" "$out/suite" "$dev" | tee "$out/suite.txt" >> "$summary"
  echo "suite: $(grep -c -v FAILED "$out/suite.txt") ok, $(grep -c FAILED "$out/suite.txt") failed" |
    tee -a "$summary"
  # 3. The GPT-2 benchmark.
  [ $bench = 1 ] || return 0
  local model=gpt2 args=(--device "$dev" --steps "$steps" --warmup "$warm" --sdpa)
  if [ "$dev" = cpu ]; then
    model=small
    args=(--device cpu --small --steps 2 --warmup 1 --sdpa --no-compile)
  fi
  # PyTorch 2 (scaled_dot_product_attention, torch.compile) or none.
  "$PYTHON" -c 'import torch, sys; sys.exit(int(torch.__version__.split(".")[0]) < 2)' \
    2>/dev/null || torch=0
  [ $torch = 1 ] || args+=(--no-torch)
  local bdir=$work/bench
  cp -r "$kit/bench/$model" "$bdir"
  local kept
  for kept in "$bdir"/gpt2-fused.smpx/*.weights.bin.kept; do
    [ -e "$kept" ] || continue
    # Random parameters in place of the dropped file, then the checksums.
    "$PYTHON" "$ROOT/scripts/kit_weights.py" fill "$kept" "${kept%.kept}"
    rm "$kept"
    "$BIN/smp-artifact-text" reseal "$bdir/gpt2-fused.smpx"
  done
  echo "## GPT-2 benchmark (bench/gpt2_train.sh --prebuilt ${args[*]} --batch $(cat "$bdir/batch"))" >> "$summary"
  SMP_BIN=$BIN SMP_BENCH_DIR=$bdir PYTHON=$PYTHON bash "$ROOT/bench/gpt2_train.sh" \
    --prebuilt --batch "$(cat "$bdir/batch")" "${args[@]}" \
    > "$out/bench.md" 2> "$out/bench.log" ||
    echo "bench: FAILED ($(tail -n 1 "$out/bench.log"))" >> "$summary"
  cat "$out/bench.md" >> "$summary"
  cp "$bdir"/*.jsonl "$bdir"/*.json "$out/" 2>/dev/null || true
}

case "${1:-}" in
  pack) [ $# -le 2 ] || usage; pack "${2:-$ROOT/build/device-kit}" ;;
  run) [ $# -ge 3 ] || usage; run "${@:2}" ;;
  *) usage ;;
esac
