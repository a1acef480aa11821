#!/usr/bin/env bash
#===- scripts/demo.sh - install, build and run memopt's main job ------------===#
#
# The README's main-job command: export the bundled GPT-style decoder from
# PyTorch, compile its training step with memopt-compile (printing the memory
# account), and train it a few steps on the host runtime.
#
#===-------------------------------------------------------------------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
MODEL=${MODEL:-gpt}
STEPS=${STEPS:-5}

scripts/setup.sh
scripts/build.sh >/dev/null

out="$BUILD_DIR/demo/$MODEL"
mkdir -p "$out"
/usr/bin/python3 examples/pytorch/export.py "$MODEL" "$out"
"$BUILD_DIR/bin/memopt-compile" "$out/model.mlir" -o "$out/compiled"
"$out/compiled/train" --params "$out/model.safetensors" \
  --batch "$out/batch.safetensors" --steps "$STEPS" \
  --save "$out/final.safetensors"
echo "trained parameters and optimizer state: $out/final.safetensors"
