#!/usr/bin/env bash
#===- gpu-check.sh - build and check the CUDA target on a GPU machine -----===#
#
# One prepared script for a machine with an NVIDIA GPU (docs/CUDA.md). Its
# steps, each under its own time limit, 9 minutes in all on a 16-core H200
# machine:
#   0. preflight: the GPU, its compute capability and the driver's CUDA
#      version against the CUDA runtime memopt builds with;
#   1. build only the CUDA target's tools, runtimes and tests for this GPU's
#      architecture (reusing BUILD if it is already configured);
#   2. the CUDA unit tests (kernels against f64 references); with a GPU a
#      skipped test is a failure, except the one that expects no device;
#   3. the lit tests of the CUDA target: compile checks, the parity of the
#      CUDA runtime against the host runtime on every example model;
#   4. two ranks on NCCL, plain and ZeRO-2 (cuda-data-parallel.py, with
#      NCCL_DEBUG=WARN), when mpirun is present;
#   5. bench/gpu (GPT-2 small, batch 8 x 1024 tokens: step time and device
#      memory), in the time left.
# Each step's result is printed, and appended to SUMMARY, as it ends, so a
# run cut short still shows the steps before.
#
#   scripts/gpu-check.sh [--dry-run]   # --dry-run: print the plan, exit 2
#   env: BUILD (build-gpu), JOBS (nproc), SUMMARY (LOG/summary.txt)
#
# Exit code: 0 all checks passed, 1 a check failed, 2 no GPU or missing
# prerequisites.
#
#===------------------------------------------------------------------------===#
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
start=$(date +%s)
log=$(mktemp -d /tmp/memopt-gpu-check.XXXXXX)
summary=${SUMMARY:-$log/summary.txt}

# The steps' time limits in seconds; they add up to 540 (9 minutes).
LIMIT_PREFLIGHT=10
LIMIT_BUILD=240
LIMIT_UNIT=60
LIMIT_LIT=90
LIMIT_NCCL=60
LIMIT_TOTAL=540
# The CUDA runtime memopt builds with needs a driver for CUDA 13.0 or later.
NEEDED_CUDA=13000

plan() {
  cat <<PLAN
gpu-check would run (time limits; ${LIMIT_TOTAL} s in all):
  0. preflight (${LIMIT_PREFLIGHT} s): nvidia-smi's GPU, compute capability and
     driver; the driver's CUDA version >= $((NEEDED_CUDA / 1000)).$((NEEDED_CUDA % 1000 / 10))
  1. build (${LIMIT_BUILD} s): cmake -G Ninja -S $root -B $build -DMEMOPT_ENABLE_CUDA=ON
       -DMEMOPT_CUDA_ARCHITECTURES=<the GPU's compute capability>
     ninja -C $build memopt-compile memopt-opt memopt_runtime_host
       memopt_runtime_cuda memopt_driver MemoptCudaRuntimeTests
  2. CUDA unit tests (${LIMIT_UNIT} s): $build/unittests/MemoptCudaRuntimeTests
     (kernels against f64 references; a skipped test fails the check)
  3. lit on $build/test/Target (${LIMIT_LIT} s): the CUDA target's compile
     checks and the parity of the CUDA runtime against the host runtime on
     every example model (cuda-parity.py)
  4. NCCL (${LIMIT_NCCL} s): two ranks, plain and ZeRO-2
     (cuda-data-parallel.py, NCCL_DEBUG=WARN), when mpirun is present
  5. bench/gpu/run.sh $build (the time left): GPT-2 small (batch 8 x 1024),
     fp32/bf16 x remat none/blocks, step time and peak device memory
  each step's result as it ends, in $summary; then one summary table.
PLAN
}

if [ "${1:-}" = --dry-run ]; then
  plan
  exit 2
fi

# Prints and records one step's result.
report() {
  printf '%-14s %s\n' "$1:" "$2" | tee -a "$summary"
}
status=0

# 0. Preflight.
if ! command -v nvidia-smi >/dev/null ||
    ! timeout "$LIMIT_PREFLIGHT" nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "gpu-check: no NVIDIA GPU (nvidia-smi -L lists none)" >&2
  plan
  exit 2
fi
for tool in cmake ninja nvcc; do
  command -v "$tool" >/dev/null || [ -x "/usr/local/cuda/bin/$tool" ] || {
    echo "gpu-check: '$tool' not found (scripts/setup.sh installs the build" \
      "prerequisites; CUDA must be at /usr/local/cuda)" >&2
    exit 2
  }
done
export PATH="$PATH:/usr/local/cuda/bin"
gpu=$(timeout "$LIMIT_PREFLIGHT" nvidia-smi \
  --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
cap=$(timeout "$LIMIT_PREFLIGHT" nvidia-smi --query-gpu=compute_cap \
  --format=csv,noheader | head -1 | tr -d ' .')
# The driver's CUDA version, as nvidia-smi's banner prints it (e.g. 13.0).
driver_cuda=$(timeout "$LIMIT_PREFLIGHT" nvidia-smi 2>/dev/null |
  sed -n 's/.*CUDA Version: *\([0-9]*\)\.\([0-9]*\).*/\1 \2/p' | head -1)
read -r major minor <<<"${driver_cuda:-0 0}"
if [ $((major * 1000 + minor * 10)) -lt "$NEEDED_CUDA" ]; then
  report preflight "FAILED: $gpu: the driver supports CUDA $major.$minor," \
    "memopt's CUDA runtime needs $((NEEDED_CUDA / 1000)).$((NEEDED_CUDA % 1000 / 10)): update the NVIDIA driver"
  exit 2
fi
# Hopper's arch-specific target; any other GPU its plain compute capability.
arch=$cap
[ "$cap" = 90 ] && arch=90a
report preflight "$gpu, sm_$cap (building for $arch), driver CUDA $major.$minor, $jobs jobs"

# Seconds left of the whole run.
left() { echo $((LIMIT_TOTAL - ($(date +%s) - start))); }

# 1. Build.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
step=$(date +%s)
if ! timeout "$LIMIT_BUILD" cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release -DMEMOPT_ENABLE_CUDA=ON \
    "-DMEMOPT_CUDA_ARCHITECTURES=$arch" "${launcher[@]}" \
    >"$log/configure.log" 2>&1 ||
  ! timeout $((LIMIT_BUILD - ($(date +%s) - step))) ninja -C "$build" \
    -j"$jobs" memopt-compile memopt-opt memopt_runtime_host \
    memopt_runtime_cuda memopt_driver MemoptCudaRuntimeTests \
    >"$log/build.log" 2>&1; then
  tail -30 "$log/build.log" "$log/configure.log" 2>/dev/null
  report build "FAILED after $(($(date +%s) - step)) s (logs: $log)"
  exit 1
fi
report build "$(($(date +%s) - step)) s"

# 2. Unit tests: with a GPU, a skip means a test did not run. The one test
# that expects no device skips when there is one.
step=$(date +%s)
timeout "$LIMIT_UNIT" "$build/unittests/MemoptCudaRuntimeTests" \
  >"$log/unit.log" 2>&1
unit_status=$?
skipped=$(grep '^\[  SKIPPED \]' "$log/unit.log" | grep -v 'NameAndNoDeviceError' |
  grep -c '\.' || true)
if [ $unit_status -eq 0 ] && [ "$skipped" -eq 0 ]; then
  report "unit tests" "passed ($(grep -c '^\[       OK' "$log/unit.log") tests, $(($(date +%s) - step)) s)"
else
  status=1
  report "unit tests" "FAILED (exit $unit_status, $skipped skipped; log: $log/unit.log)"
  grep -E '^\[  (FAILED|SKIPPED)|Failure|error' "$log/unit.log" | head -20
fi

# 3. The CUDA target's lit tests, NCCL's apart.
lit=$(command -v lit || command -v llvm-lit || echo /usr/lib/llvm-22/bin/lit)
step=$(date +%s)
if timeout "$LIMIT_LIT" "$lit" -s -a "$build/test/Target" \
    --filter-out 'cuda-data-parallel' >"$log/lit.log" 2>&1; then
  report "lit (Target)" "passed ($(grep -E '^\s*Passed' "$log/lit.log" | tr -s ' '), $(($(date +%s) - step)) s)"
else
  status=1
  report "lit (Target)" "FAILED (log: $log/lit.log)"
  grep -E 'FAIL|error' "$log/lit.log" | head -20
fi
if grep -q 'cuda-gpu) are unsupported' "$log/lit.log"; then
  status=1
  report "lit (Target)" "FAILED: lit did not detect the GPU"
fi
grep -E '^(mlp|gpt|cnn): ' "$log/lit.log" | sed 's/^/    /' | tee -a "$summary"

# 4. NCCL: two ranks, asynchronous errors and warnings in the log.
step=$(date +%s)
if command -v mpirun >/dev/null; then
  if NCCL_DEBUG=WARN timeout "$LIMIT_NCCL" "$lit" -s -a \
      "$build/test/Target" --filter 'cuda-data-parallel' \
      >"$log/nccl.log" 2>&1; then
    report NCCL "passed ($(($(date +%s) - step)) s)"
  else
    status=1
    report NCCL "FAILED (log: $log/nccl.log)"
    grep -E 'FAIL|error|NCCL WARN' "$log/nccl.log" | head -20
  fi
  grep -E '^cuda N=2[^:]*: ' "$log/nccl.log" | sed 's/^/    /' | tee -a "$summary"
else
  report NCCL "not run (no mpirun)"
fi

# 5. Benchmark, in the time left.
bench_limit=$(left)
if [ "$bench_limit" -lt 30 ]; then
  report bench/gpu "not run (${bench_limit} s left)"
else
  step=$(date +%s)
  timeout "$bench_limit" "$root/bench/gpu/run.sh" "$build" >"$log/bench.log" 2>&1
  bench_status=$?
  [ $bench_status -ne 0 ] && status=1
  report bench/gpu "$(($(date +%s) - step)) s of ${bench_limit}$([ $bench_status -ne 0 ] && echo " (exit $bench_status; log: $log/bench.log)")"
  sed -n '/^GPT (/,$p' "$log/bench.log" | tee -a "$summary"
fi

echo
echo "== memopt gpu-check: $gpu =="
cat "$summary"
echo "total:         $(($(date +%s) - start)) s; logs in $log"
exit $status
