#!/usr/bin/env bash
#===- scripts/build.sh - configure and build memopt in build/ ---------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD_DIR" ${JOBS:+-j "$JOBS"}
