#!/usr/bin/env bash
# Builds the libFuzzer targets of test/fuzz with clang-22 and ASan+UBSan
# into build-fuzz/ and runs each one over its committed corpus for N
# seconds (default 60). Fails on any crash, sanitizer report, leak, timeout
# or allocation over the limits below, and leaves the reproducer in
# build-fuzz/findings/. docs/threat-model.md, "Fuzzing".
#
#   bash scripts/run-fuzz.sh [SECONDS] [TARGET...]   TARGET: npy artifact onnx mlir
#
# New inputs that reach new code go to build-fuzz/corpus/TARGET (kept
# between runs, not committed; `-merge=1` them into test/fuzz/corpus to keep).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(npy artifact onnx mlir)
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}

for tool in clang-22 clang++-22; do
  command -v $tool >/dev/null || {
    echo "run-fuzz: $tool not found (bash scripts/install-deps.sh installs it)" >&2
    exit 1
  }
done
if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  CC=clang-22 CXX=clang++-22 cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DSMP_ENABLE_FUZZERS=ON -DSMP_ENABLE_CUDA=OFF >/dev/null
fi
start=$(date +%s)
cmake --build "$BUILD_DIR" --target smp-fuzzers
echo "run-fuzz: build $(( $(date +%s) - start )) s"

# Limits: one allocation may be as large as the biggest constant the
# compiler makes (kMaxConstantBytes, 1 GiB) and a copy of it; no input of
# these sizes justifies more. Per input: 25 s (the importer of a 100k-node
# graph takes seconds; under ASan about 3x more).
# allow_user_poisoning=0: see test/fuzz/FuzzSupport.cpp (LLVM's allocator
# poisons in our code, libMLIR allocates uninstrumented from the same slab).
export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:detect_leaks=1:allocator_may_return_null=0:handle_abort=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$BUILD_DIR/findings"
status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "$BUILD_DIR/corpus/$t"
  log="$BUILD_DIR/findings/$t.log"
  echo "run-fuzz: smp-fuzz-$t for $SECONDS_PER_TARGET s"
  if ! "$BUILD_DIR/bin/smp-fuzz-$t" "$BUILD_DIR/corpus/$t" "test/fuzz/corpus/$t" \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=25 -seed=1 \
      -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=262144 \
      -artifact_prefix="$BUILD_DIR/findings/$t-" -print_final_stats=1 \
      >"$log" 2>&1; then
    status=1
    echo "run-fuzz: smp-fuzz-$t FAILED; see $log and $BUILD_DIR/findings/$t-*" >&2
    grep -E "^==[0-9]+==ERROR|runtime error|SUMMARY|Test unit written" "$log" >&2 || tail -20 "$log" >&2
  fi
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" "$log" |
    sed "s/^/run-fuzz: $t: /"
done
exit $status
