#!/usr/bin/env bash
#===- run.sh - ZeRO's per-rank memory on the large bundled models ---------===#
#
# Compiles examples/gpt2-small.mlir (batch 8, split over the ranks) and
# examples/llama-7b.mlir (batch 1 per rank: --rank-batch) with
# --data-parallel=N --zero-stage=S for N = 2, 4, 8 and S = 0 (plain data
# parallelism), 1, 2 and 3, up to the planned arena (--report-only), and prints
# one Markdown row per run: the rank's model state per parameter and its
# parts (memory report), the pools at the peak and the planned peak, next to
# the anchor, the ZeRO paper's per-rank model state for the same stage and
# precision (Rajbhandari et al. 2020, K = 12 bytes of optimizer state and
# master weights per parameter): f32 stage 0 16, stage 1 4 + 4 + 8/N, stage
# 2 4 + 12/N, stage 3 16/N; mixed precision stage 0 2 + 2 + 12, stage 1
# 2 + 2 + 12/N, stage 2 2 + 14/N, stage 3 16/N. Stage 3's rows also give the
# most gathered parameter bytes live at once, which the paper's 16/N leaves
# out.
#
#   ninja -C build memopt-compile
#   bench/zero/run.sh               # about 20 s
#
#===------------------------------------------------------------------------===#
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tool="${MEMOPT_COMPILE:-$repo/build/bin/memopt-compile}"
if [[ ! -x "$tool" ]]; then
  echo "run.sh: memopt-compile not found at '$tool' (build it or set MEMOPT_COMPILE)" >&2
  exit 1
fi
echo "| model | precision | N | stage | B/param (weights + master + grads + optimizer) | ZeRO paper B/param | grads at peak | optimizer | gathered at once | planned peak |"
echo "|---|---|---:|---:|---|---:|---:|---:|---:|---:|"
for model in gpt2-small llama-7b; do
  extra=()
  [[ $model == llama-7b ]] && extra=(--rank-batch --remat=sqrt)
  for precision in none bf16; do
    for n in 2 4 8; do
      for stage in 0 1 2 3; do
        report=$("$tool" "$repo/examples/$model.mlir" --report-only \
          --mixed-precision=$precision --data-parallel=$n --zero-stage=$stage \
          "${extra[@]}" 2>&1)
        /usr/bin/python3 - "$model" "$precision" "$n" "$stage" <<PY
import re, sys
model, precision, n, stage = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = """$report"""
state = re.search(r"model state per parameter: (.*)", text).group(1)
pool = lambda name: re.search(r"^  %s +(\S+ \S+)" % name, text, re.M).group(1)
peak = re.search(r"allocated for the step: (\S+ \S+)", text).group(1)
if precision == "none":
    anchor = {0: 16.0, 1: 8 + 8 / n, 2: 4 + 12 / n, 3: 16 / n}[stage]
else:
    anchor = {0: 16.0, 1: 4 + 12 / n, 2: 2 + 14 / n, 3: 16 / n}[stage]
gathered = re.search(r"gathered parameters \(ZeRO-3\): at most (\S+ \S+)", text)
print("| %s | %s | %d | %d | %s | %.2f | %s | %s | %s | %s |" % (
    model, precision, n, stage, state, anchor, pool("grads"),
    pool("optimizer"), gathered.group(1) if gathered else "-", peak))
PY
      done
    done
  done
done
