#!/usr/bin/env bash
#===- scripts/demo.sh - install, build and run memopt's main job ------------===#
#
# The README's main-job command: a character-level GPT on Shakespeare
# (examples/shakespeare): prepare the text as token files, export the model
# from PyTorch, compile its training step with memopt-compile (printing the
# memory account), and train it on the host runtime from the token file
# with nanoGPT's learning-rate schedule, evaluating on the held-out text
# every 100 steps.
#
#===-------------------------------------------------------------------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
STEPS=${STEPS:-300}

scripts/setup.sh
scripts/build.sh >/dev/null

out="$BUILD_DIR/demo/shakespeare"
mkdir -p "$out"
example=examples/shakespeare/shakespeare.py
/usr/bin/python3 "$example" prepare "$out"
/usr/bin/python3 "$example" export "$out"
"$BUILD_DIR/bin/memopt-compile" "$out/model.mlir" -o "$out/compiled" \
  --lr=1e-3 --lr-schedule=nanogpt --warmup-steps=100 --decay-steps="$STEPS" \
  --min-lr=1e-4
"$out/compiled/train" --params "$out/model.safetensors" \
  --tokens "$out/train.bin" --seed 1337 --steps "$STEPS" \
  --eval-every 100 --eval-tokens "$out/val.bin" --eval-batches 8 \
  --log "$out/train.jsonl" --save "$out/final.safetensors"
echo "trained parameters, optimizer state and position: $out/final.safetensors"
echo "resume with --params $out/final.safetensors; compare with PyTorch:"
echo "  /usr/bin/python3 $example compare $out"
