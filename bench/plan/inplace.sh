#!/usr/bin/env bash
#===- inplace.sh - effect of buffer reuse on the training-step arena -------===#
#
# Bufferizes the training step of each example with the four settings of
# --memopt-bufferize's reuse rules (none, in-place elementwise only, reshape
# views only, both), plans the buffers, and prints one Markdown table row per
# example and setting: scratch buffers (memref.alloc), reshape views, the
# kernels that remain, the bytes of all scratch buffers together (what an
# allocator without reuse would hold), the lower bound (the largest total of
# 256-byte-rounded buffer sizes live at one op, from
# --memopt-test-print-liveness: the bound --memopt-plan-buffers aims for) and
# the planned arena.
#
#   bench/plan/inplace.sh                # examples/{mlp,gpt,cnn}.mlir
#   MEMOPT_OPT=build-re/bin/memopt-opt bench/plan/inplace.sh mlp path/to/model.mlir
#
# An argument is the name of an example or the path of a module holding one
# `memopt.loss` function (e.g. the model.mlir that memopt.export writes).
#
#===------------------------------------------------------------------------===#
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
opt="${MEMOPT_OPT:-$repo/build/bin/memopt-opt}"
examples=("$@")
[[ ${#examples[@]} -gt 0 ]] || examples=(mlp gpt cnn)

if [[ ! -x "$opt" ]]; then
  echo "inplace.sh: memopt-opt not found at '$opt' (build it or set MEMOPT_OPT)" >&2
  exit 1
fi

# "<total bytes> <lower bound>" of a liveness listing on stdin.
sizes() {
  python3 -c '
import re, sys
delta = {}
total = 0
for line in sys.stdin:
    m = re.match(r"buffer \d+ \S+ size=(\d+) live=\[(\d+), (\d+)\]", line)
    if m:
        total += int(m[1])
        size = -(-int(m[1]) // 256) * 256
        delta[int(m[2])] = delta.get(int(m[2]), 0) + size
        delta[int(m[3]) + 1] = delta.get(int(m[3]) + 1, 0) - size
live = bound = 0
for t in sorted(delta):
    live += delta[t]
    bound = max(bound, live)
print(total, bound)'
}

echo "| example | reuse | buffers | views | kernels | all buffers (B) | lower bound (B) | arena (B) | arena vs none |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for example in "${examples[@]}"; do
  input="$example"
  [[ -f "$input" ]] || input="$repo/examples/$example.mlir"
  tensors="$("$opt" "$input" --memopt-autodiff)"
  none=""
  for mode in none in-place alias both; do
    case "$mode" in
    none) options="reuse=false" ;;
    in-place) options="alias-reshapes=false" ;;
    alias) options="in-place=false" ;;
    both) options="reuse=true" ;;
    esac
    buffers="$("$opt" --memopt-bufferize="$options" <<<"$tensors")"
    planned="$("$opt" --memopt-plan-buffers --memopt-verify-plan <<<"$buffers")"
    allocs="$(grep -c '= memref.alloc()' <<<"$buffers" || true)"
    views="$(grep -c '= memref.reinterpret_cast' <<<"$buffers" || true)"
    kernels="$(grep -c 'memopt.kernel "' <<<"$buffers" || true)"
    read -r total bound < <("$opt" --memopt-test-print-liveness <<<"$buffers" | sizes)
    arena="$(grep -o 'memopt.arena_bytes = [0-9]*' <<<"$planned" | grep -o '[0-9]*$')"
    [[ -n "$none" ]] || none="$arena"
    change="$(python3 -c "print(f'{($arena - $none) / $none * 100:+.1f} %')")"
    echo "| $example | $mode | $allocs | $views | $kernels | $total | $bound | $arena | $change |"
  done
done
