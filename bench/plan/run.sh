#!/usr/bin/env bash
#===- run.sh - memopt-plan over the DSA placement benchmarks ---------------===#
#
# Runs memopt-plan on every CSV of shared/benchmarks/dsa with a fixed time
# limit and prints one Markdown table row per instance, next to the reference
# figure quoted in that folder's README.
#
#   bench/plan/run.sh                 # from anywhere
#   MEMOPT_DSA_DIR=/path/to/dsa MEMOPT_PLAN=build/bin/memopt-plan \
#   TIME_LIMIT=5 bench/plan/run.sh
#
#===------------------------------------------------------------------------===#
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dsa="${MEMOPT_DSA_DIR:-$repo/../shared/benchmarks/dsa}"
plan="${MEMOPT_PLAN:-$repo/build/bin/memopt-plan}"
limit="${TIME_LIMIT:-5}"

if [[ ! -x "$plan" ]]; then
  echo "run.sh: memopt-plan not found at '$plan' (build it or set MEMOPT_PLAN)" >&2
  exit 1
fi
if [[ ! -d "$dsa" ]]; then
  echo "run.sh: benchmark folder '$dsa' not found (set MEMOPT_DSA_DIR)" >&2
  exit 1
fi

# Reference figures from $dsa/README.md (MiniMalloc = exact search asked to fit
# the given capacity; greedy = best of three greedy orders; IREE = its own
# offsets).
reference() {
  case "$1" in
  A.1048576) echo "MiniMalloc fits 1048576 in 5.12 s" ;;
  B.1048576) echo "MiniMalloc fits 1048576 in 3.60 s" ;;
  C.1048576) echo "MiniMalloc reaches LB 1039360 in 0.11 s" ;;
  D.1048576) echo "MiniMalloc fits 1048576 in 2.69 s, nothing lower in 60 s" ;;
  E.1048576) echo "MiniMalloc fits 1048576 in 3.57 s" ;;
  F.1048576) echo "MiniMalloc fits 1048576 in 5.07 s" ;;
  G.1048576) echo "MiniMalloc fits 1048576 in 1.35 s" ;;
  H.1048576) echo "MiniMalloc fits 1048576 in 1.86 s" ;;
  I.1048576) echo "MiniMalloc fits 1048576 in 4.72 s" ;;
  J.1048576) echo "MiniMalloc fits 1048576 in 1.04 s, nothing lower in 60 s" ;;
  K.1048576) echo "MiniMalloc fits 1048576 in 0.74 s" ;;
  bert_base) echo "greedy 1.000; MiniMalloc not at LB in 30 s" ;;
  bert_large | bert_nezha | pangu_13B) echo "greedy 1.000" ;;
  pangu_2.6B) echo "greedy 1.0334; MiniMalloc not at LB in 30 s" ;;
  resnet50) echo "greedy 1.0030; MiniMalloc at LB in 0.82 s" ;;
  tiny_bert) echo "greedy 1.0010; MiniMalloc at LB in 1.44 s" ;;
  G_1) echo "greedy 1.0035; MiniMalloc at LB in 2.17 s" ;;
  S_1) echo "greedy 1.0249; MiniMalloc not at LB in 60 s" ;;
  iree_mobilebert) echo "IREE 1.4385; greedy by size 1.0000" ;;
  iree_mobilenet) echo "IREE 1.2814; greedy by size 1.0000" ;;
  *) echo "-" ;;
  esac
}

echo "memopt-plan --time-limit=$limit, $(date -u +%Y-%m-%d), $(nproc) cores"
echo
echo "| instance | buffers | LB | memopt arena | ratio | time (ms) | reference |"
echo "|---|---:|---:|---:|---:|---:|---|"
status=0
ratios="" # "folder ratio" lines, for the geometric means below the table
for csv in "$dsa"/*/*.csv; do
  name="$(basename "$csv" .csv)"
  buffers=$(($(grep -cv '^[[:space:]]*$' "$csv") - 1))
  if ! line="$("$plan" "$csv" --time-limit="$limit")"; then
    echo "| $name | $buffers | FAILED | | | | $(reference "$name") |"
    status=1
    continue
  fi
  arena="$(sed -E 's/.*arena=([0-9]+).*/\1/' <<<"$line")"
  lb="$(sed -E 's/.*lower_bound=([0-9]+).*/\1/' <<<"$line")"
  ratio="$(sed -E 's/.*ratio=([0-9.]+).*/\1/' <<<"$line")"
  ms="$(sed -E 's/.*time_ms=([0-9]+).*/\1/' <<<"$line")"
  folder="$(basename "$(dirname "$csv")")"
  ratios+="$folder $ratio"$'\n'
  echo "| $folder/$name | $buffers | $lb | $arena | $ratio | $ms | $(reference "$name") |"
done
echo
# Geometric mean of the ratios per folder (from the 4-decimal figures).
printf '%s' "$ratios" | awk '
  NF == 2 { sum[$1] += log($2); n[$1]++ }
  END { for (f in sum) printf "geomean ratio %s: %.4f (%d instances)\n", f, exp(sum[f] / n[f]), n[f] }' |
  sort
exit "$status"
