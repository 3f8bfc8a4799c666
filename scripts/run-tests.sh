#!/usr/bin/env bash
# The test command: installs dependencies, builds everything and runs every
# test (lit + GoogleTest) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --tests
# A one-node Slurm for test/smprun/launchers-srun.test (never touches a
# Slurm this machine already has; without root the test is skipped).
bash scripts/slurm-local.sh
start=$(date +%s)
bash scripts/build.sh
echo "build: $(( $(date +%s) - start )) s"
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2
# The libFuzzer targets (clang-22, ASan+UBSan, build-fuzz/): each runs over
# its committed corpus and then mutates for FUZZ_SECONDS (default 45).
bash scripts/run-fuzz.sh "${FUZZ_SECONDS:-45}"
