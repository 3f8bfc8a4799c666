#!/usr/bin/env bash
# Configures (once) and builds smp (or the targets given) with Ninja and
# ccache into $BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
fi
if (($#)); then
  cmake --build "$BUILD_DIR" --target "$@"
else
  cmake --build "$BUILD_DIR"
fi
