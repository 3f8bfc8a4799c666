#!/usr/bin/env bash
# step-counters.sh STAGES ROOT TMP: step_counters_stage of
# scripts/device-kit-stages.sh with a stub ncu on PATH (it records its
# arguments and writes Inputs/ncu-step-sample.csv to its --log-file, or
# fails without writing one when NCU_FAIL is set); for
# device-kit-step-counters.test.
set -euo pipefail
# shellcheck disable=SC1090
source "$1"
ROOT=$2 T=$3
# The stage's globals (run()'s in device-kit.sh).
export LOGS=$T/logs SUMMARY=$T/summary.md BIN=$T/bin PYTHON=${PYTHON:-python3}
mkdir -p "$LOGS" "$T/path"
room() { return 0; }
limited() { shift; "$@"; }
stage_begin() { echo "begin: $1"; }
stage_end() { echo "end: $1: $2"; }
skipped() { echo "skipped: $1: $2"; }
cat > "$T/path/ncu" <<STUB
#!/usr/bin/env bash
echo "\$@" > "$T/ncu-args"
[ -z "\${NCU_FAIL:-}" ] || { echo "==ERROR== no device"; exit 1; }
while [ \$# -gt 0 ]; do
  [ "\$1" = --log-file ] && cp "$ROOT/test/smprun/Inputs/ncu-step-sample.csv" "\$2"
  shift
done
STUB
chmod +x "$T/path/ncu"
PATH=$T/path:$PATH step_counters_stage /b
cat "$T/ncu-args"
cat "$SUMMARY"
rm -f "$SUMMARY" "$LOGS/step-ncu.csv"
NCU_FAIL=1 PATH=$T/path:$PATH step_counters_stage /b
cat "$SUMMARY"
