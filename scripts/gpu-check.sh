#!/usr/bin/env bash
#===- gpu-check.sh - build and check the CUDA target on a GPU machine -----===#
#
# One prepared script for a machine with an NVIDIA GPU (docs/CUDA.md):
#   1. configures and builds memopt with the CUDA runtime for this GPU's
#      architecture (reusing BUILD if it is already configured);
#   2. runs the CUDA unit tests (kernels against f64 references) and the lit
#      tests of the CUDA target (test/Target: compile checks, the parity
#      of the CUDA runtime against the host runtime on every example model,
#      and two ranks on NCCL, plain and ZeRO-2, when mpirun is present);
#   3. runs bench/gpu (GPT-2 small, batch 8 x 1024 tokens: step time and
#      device memory, fp32/bf16 x remat none/blocks, next to PyTorch eager
#      when torch with CUDA is installed);
# and prints one summary. Designed to finish in under 10 minutes on an H200.
#
#   scripts/gpu-check.sh [--dry-run]   # --dry-run: print the steps, exit 2
#   env: BUILD (build-gpu), JOBS (nproc), STEPS (5), GPT_ARGS (bench size),
#        BENCH_TIMEOUT (360 s)
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

# What the run does, step by step (printed by --dry-run and without a GPU).
plan() {
  cat <<PLAN
gpu-check would run:
  1. build: cmake -G Ninja -S $root -B $build -DMEMOPT_ENABLE_CUDA=ON
       -DMEMOPT_CUDA_ARCHITECTURES=<the GPU's compute capability>
     ninja -C $build memopt-compile memopt-opt memopt_runtime_host
       memopt_runtime_cuda memopt_driver MemoptCudaRuntimeTests
  2. CUDA unit tests: $build/unittests/MemoptCudaRuntimeTests
     (each test passes, fails or skips; kernels against f64 references)
  3. lit on $build/test/Target: the CUDA target's compile checks, the
     parity of the CUDA runtime against the host runtime on every example
     model (cuda-parity.py), two ranks on NCCL, plain and ZeRO-2
     (cuda-data-parallel.py, when mpirun is present)
  4. bench/gpu/run.sh $build: GPT-2 small (batch 8 x 1024), fp32/bf16 x
     remat none/blocks, step time and peak device memory next to PyTorch
     eager's (when torch has CUDA), under a ${BENCH_TIMEOUT:-360} s limit
  then one summary table.
PLAN
}

if [ "${1:-}" = --dry-run ]; then
  plan
  exit 2
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
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
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version \
  --format=csv,noheader | head -1)
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
# Hopper's arch-specific target; any other GPU its plain compute capability.
arch=$cap
[ "$cap" = 90 ] && arch=90a
echo "gpu-check: $gpu, sm_$cap (building for $arch), $jobs jobs"

# 1. Build.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if ! cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DMEMOPT_ENABLE_CUDA=ON "-DMEMOPT_CUDA_ARCHITECTURES=$arch" \
    "${launcher[@]}" >"$log/configure.log" 2>&1; then
  tail -20 "$log/configure.log"
  echo "gpu-check: configuring failed (log: $log/configure.log)" >&2
  exit 2
fi
if ! ninja -C "$build" -j"$jobs" memopt-compile memopt-opt \
    memopt_runtime_host memopt_runtime_cuda memopt_driver \
    MemoptCudaRuntimeTests >"$log/build.log" 2>&1; then
  tail -30 "$log/build.log"
  echo "gpu-check: the build failed (log: $log/build.log)" >&2
  exit 1
fi
built=$(date +%s)

# 2. Tests.
status=0
if "$build/unittests/MemoptCudaRuntimeTests" >"$log/unit.log" 2>&1; then
  unit="passed ($(grep -c '^\[       OK' "$log/unit.log") tests)"
else
  unit="FAILED (log: $log/unit.log)"
  status=1
  grep -E '^\[  FAILED|Failure|error' "$log/unit.log" | head -20
fi
lit=$(command -v lit || command -v llvm-lit || echo /usr/lib/llvm-22/bin/lit)
if "$lit" -s -a "$build/test/Target" >"$log/lit.log" 2>&1; then
  littests="passed ($(grep -E '^\s*Passed' "$log/lit.log" | tr -s ' '))"
else
  littests="FAILED (log: $log/lit.log)"
  status=1
  grep -E 'FAIL|error' "$log/lit.log" | head -20
fi
if grep -q 'cuda-gpu) are unsupported' "$log/lit.log"; then
  littests="$littests; WARNING: lit did not detect the GPU"
  status=1
fi
parity=$(grep -E '^(mlp|gpt|cnn|cuda N=2[^:]*): ' "$log/lit.log" | sed 's/^/    /')
tested=$(date +%s)

# 3. Benchmark.
timeout "${BENCH_TIMEOUT:-360}" "$root/bench/gpu/run.sh" "$build" \
  >"$log/bench.log" 2>&1
bench_status=$?
[ $bench_status -ne 0 ] && status=1
end=$(date +%s)

echo
echo "== memopt gpu-check: $gpu =="
echo "build:        $((built - start)) s"
echo "unit tests:   $unit"
echo "lit (Target): $littests"
[ -n "$parity" ] && echo "$parity"
echo "tests:        $((tested - built)) s"
echo "bench/gpu:    $((end - tested)) s$([ $bench_status -ne 0 ] && echo " (exit $bench_status; log: $log/bench.log)")"
sed -n '/^GPT (/,$p' "$log/bench.log"
echo "total:        $((end - start)) s; logs in $log"
exit $status
