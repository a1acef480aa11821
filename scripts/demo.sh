#!/usr/bin/env bash
#===- scripts/demo.sh - install, build and run memopt's main job ------------===#
#
# The README's main-job command: for each bundled example model, verify it
# with memopt-opt and print its model-state memory account (parameters, and
# the bytes of weights, gradients and AdamW state by dtype).
#
#===-------------------------------------------------------------------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

scripts/setup.sh
scripts/build.sh >/dev/null

for model in examples/*.mlir; do
  echo "== $model"
  "$BUILD_DIR/bin/memopt-opt" "$model" --memopt-print-model-state -o /dev/null
done
