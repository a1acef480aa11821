#!/usr/bin/env bash
#===- bench/fuzz/run.sh - run the libFuzzer targets -------------------------===#
#
# Runs each fuzz target of a -DMEMOPT_ENABLE_FUZZERS=ON build (build-asan/,
# which scripts/check-sanitized.sh configures with clang) for a fixed number
# of executions, from seed corpora made of the lit tests and examples, and
# prints one line per target:
#
#   <target> runs=<executions> cov=<edges> ft=<features> corpus=<inputs>
#            crashes=<n> seconds=<s>
#
# then "fuzz: N targets, M crashes". Exit code 1 if any target crashed,
# leaked, timed out or tripped a sanitizer; the input that did it is kept in
# WORK/<target>/crashes/ (reproduce: BUILD/bin/memopt-fuzz-<target> FILE).
#
#   RUNS        executions per target (100000); --smoke sets 3000
#   TARGETS     which targets (parse pipeline safetensors csv)
#   BUILD_DIR   the fuzzing build (build-asan)
#   WORK        seeds, corpora and crashes (BUILD_DIR/fuzz-work); a corpus
#               grows from run to run unless WORK is removed
#   MAX_TIME    seconds per target at most (0: no limit)
#
#===-------------------------------------------------------------------------===#
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build-asan}
RUNS=${RUNS:-100000}
TARGETS=${TARGETS:-parse pipeline safetensors csv}
MAX_TIME=${MAX_TIME:-0}
if [[ "${1:-}" == "--smoke" ]]; then
  RUNS=3000
fi
BIN="$BUILD_DIR/bin"
WORK=${WORK:-$BUILD_DIR/fuzz-work}
DICT="$BUILD_DIR/fuzz/memopt.dict"
PYTHON=/usr/bin/python3

for t in $TARGETS; do
  if [[ ! -x "$BIN/memopt-fuzz-$t" ]]; then
    echo "fuzz: $BIN/memopt-fuzz-$t is missing: build with" \
      "-DMEMOPT_ENABLE_FUZZERS=ON (scripts/check-sanitized.sh does)" >&2
    exit 1
  fi
done

# Seeds: every .mlir of the examples and the tests (split at `// -----`),
# the CSV problems and `#--- *.csv` sections of the tests, the safetensors
# files of test/errors, and the inputs that once crashed a target
# (fuzz/regressions/<target>/).
make_seeds() {
  local target=$1 dir=$2
  rm -rf "$dir" && mkdir -p "$dir"
  case $target in
  parse | pipeline)
    "$PYTHON" - "$target" "$dir" examples test <<'PY'
import os, re, sys
target, out, roots = sys.argv[1], sys.argv[2], sys.argv[3:]
# The pipeline target reads its options from the last byte, XOR '\n'
# (fuzz/FuzzPipeline.cpp): each step also seeds five option sets, all
# offloads; blocks + bf16; sqrt + micro-batches; selective + clipping;
# ZeRO-3 + optimizer offload.
configs = [3, 4 | 16, 8 | 32, 12 | 64, 128 | 1] if target == "pipeline" else []
n = 0
for root in roots:
    for base, _, files in os.walk(root):
        for name in sorted(files):
            path = os.path.join(base, name)
            if name.endswith(".mlir"):
                chunks = re.split(r"^// -----\s*$", open(path).read(),
                                  flags=re.M)
            elif name.endswith(".test"):
                parts = re.split(r"^#--- (\S+)\s*$", open(path).read(),
                                 flags=re.M)
                chunks = [parts[i + 1] for i in range(1, len(parts) - 1, 2)
                          if parts[i].endswith(".mlir")]
            else:
                continue
            for chunk in chunks:
                if not chunk.strip():
                    continue
                if not chunk.endswith("\n"):
                    chunk += "\n"
                data = chunk.encode()
                variants = [data]
                if "memopt.loss" in chunk:
                    variants += [data[:-1] + bytes([c ^ 10]) for c in configs]
                for variant in variants:
                    n += 1
                    with open(os.path.join(out, "seed-%04d.mlir" % n), "wb") as f:
                        f.write(variant)
PY
    ;;
  csv)
    "$PYTHON" - "$dir" test <<'PY'
import os, re, sys
out, root = sys.argv[1], sys.argv[2]
n = 0
for base, _, files in os.walk(root):
    for name in sorted(files):
        path = os.path.join(base, name)
        chunks = []
        if name.endswith(".csv"):
            chunks = [open(path).read()]
        elif name.endswith(".test"):
            parts = re.split(r"^#--- (\S+)\s*$", open(path).read(), flags=re.M)
            chunks = [parts[i + 1] for i in range(1, len(parts) - 1, 2)
                      if parts[i].endswith(".csv")]
        for chunk in chunks:
            if len(chunk) <= 65536:
                n += 1
                with open(os.path.join(out, "seed-%04d.csv" % n), "w") as f:
                    f.write(chunk)
PY
    ;;
  safetensors)
    "$PYTHON" test/errors/Inputs/make-safetensors.py "$dir" >/dev/null
    ;;
  esac
  if [[ -d "fuzz/regressions/$target" ]]; then
    cp fuzz/regressions/"$target"/* "$dir"/ 2>/dev/null || true
  fi
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/test/lsan.supp}
if [[ -x /usr/lib/llvm-22/bin/llvm-symbolizer ]]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-22/bin/llvm-symbolizer
fi

total_crashes=0
for t in $TARGETS; do
  dir="$WORK/$t"
  mkdir -p "$dir/corpus" "$dir/crashes"
  make_seeds "$t" "$dir/seeds"
  args=(-runs="$RUNS" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1
        -artifact_prefix="$dir/crashes/" -max_total_time="$MAX_TIME")
  case $t in
  parse) args+=(-max_len=8192 -dict="$DICT") ;;
  pipeline) args+=(-max_len=4096 -dict="$DICT") ;;
  safetensors) args+=(-max_len=4096) ;;
  csv) args+=(-max_len=4096) ;;
  esac
  log="$dir/fuzz.log"
  start=$(date +%s)
  "$BIN/memopt-fuzz-$t" "${args[@]}" "$dir/corpus" "$dir/seeds" >"$log" 2>&1
  status=$?
  seconds=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  crashes=$(find "$dir/crashes" -type f | wc -l)
  if [[ $status -ne 0 && $crashes -eq 0 ]]; then
    crashes=1 # a failure libFuzzer did not save an input for
  fi
  total_crashes=$(( total_crashes + crashes ))
  echo "$t runs=${runs:-0} cov=${cov:-0} ft=${ft:-0} corpus=$corpus" \
    "crashes=$crashes seconds=$seconds"
  if [[ $crashes -ne 0 ]]; then
    echo "  see $log" >&2
    grep -m3 -E 'ERROR|runtime error|==[0-9]+==' "$log" | sed 's/^/  /' >&2
  fi
done
echo "fuzz: $(echo $TARGETS | wc -w) targets, $total_crashes crashes"
[[ $total_crashes -eq 0 ]]
