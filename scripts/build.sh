#!/usr/bin/env bash
# Configures (once) and builds smp with Ninja and ccache into $BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$BUILD_DIR" "$@"
