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
# On a failure, a digest of why at the very end of the log (a failed lit
# test's output otherwise sits in the middle of a long log).
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 || rc=$?
if [ "$rc" -ne 0 ]; then
  python3 scripts/ci-digest.py "$BUILD_DIR/Testing/Temporary/LastTest.log" || true
  exit "$rc"
fi
# The libFuzzer targets (clang-22, ASan+UBSan, build-fuzz/): each runs over
# its committed corpus and then mutates for FUZZ_SECONDS (default 20:
# docs/threat-model.md, "Fuzzing").
bash scripts/run-fuzz.sh "${FUZZ_SECONDS:-20}"
