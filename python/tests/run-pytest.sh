#!/usr/bin/env bash
# Runs the smp package's pytest suite with python3 (ctest's python-pytest).
# Exit 77 (ctest: skipped) with the reason when python3 lacks pytest or
# numpy; the tests that need torch and onnx skip themselves without them
# and pytest's summary (-rs) prints why.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
for mod in pytest numpy; do
  if ! "$PY" -c "import $mod" 2>/dev/null; then
    echo "python-pytest: SKIPPED: $("$PY" --version 2>&1) has no $mod" \
         "(scripts/install-deps.sh installs python3-$mod)"
    exit 77
  fi
done
"$PY" -c "import torch, onnx; print('python-pytest: torch', torch.__version__, 'onnx', onnx.__version__)" 2>/dev/null ||
  echo "python-pytest: torch or onnx missing: the export tests skip"
exec "$PY" -m pytest -q -rsx -p no:cacheprovider tests
