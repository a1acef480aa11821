#!/usr/bin/env bash
#===- scripts/check-blas-variants.sh - parity tests on other BLAS kernels ---===#
#
# Runs the tests that compare memopt with PyTorch (the parity oracle,
# docs/Reliability.md) with OpenBLAS forced to other kernels and thread
# counts, as on CPUs other than this one: every GEMM then sums in another
# order, in memopt and in PyTorch alike. Each variant must pass. A variant
# is KERNEL:THREADS; the default runs each kernel once, the thread counts
# alternating. A variant that repeats one already run is skipped, and
# scripts/check.sh has run the machine's own kernel on every core:
#
#   scripts/check-blas-variants.sh            # after scripts/build.sh
#   VARIANTS="Haswell:1 Prescott:4" scripts/check-blas-variants.sh
#
# A kernel the CPU cannot run is skipped with a message (OpenBLAS would
# fall back to another one silently); Prescott (SSE3) runs everywhere.
#
#===-------------------------------------------------------------------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
VARIANTS=${VARIANTS:-"default:1 Haswell:2 SkylakeX:1 Prescott:2"}
LIT=${LIT:-/usr/lib/llvm-22/bin/lit}
TESTS=(Integration/train-vs-pytorch.py Integration/accumulate-vs-pytorch.py
       Integration/mixed-precision-vs-pytorch.py Integration/bf16-conv-bias.py
       Integration/fused-vs-pytorch.py
       python/oracle.py)

# Prints the kernel OpenBLAS runs under the environment it is given.
CORENAME='import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())'

flags=$(grep -m1 '^flags' /proc/cpuinfo)
passed=0 failed=0 skipped=0
failures=()
# What has run: scripts/check.sh ran the machine's own kernel on every core.
ran=" $(/usr/bin/python3 -c "$CORENAME" | tr '[:upper:]' '[:lower:]'):$(nproc) "
for variant in $VARIANTS; do
  if [[ ! $variant =~ ^[A-Za-z0-9]+:[1-9][0-9]*$ ]]; then
    echo "blas-variants: '$variant' is not KERNEL:THREADS" >&2
    exit 2
  fi
  coretype=${variant%%:*}
  threads=${variant#*:}
  case $coretype in
    Haswell) needs=avx2 ;;
    SkylakeX) needs=avx512f ;;
    *) needs= ;;
  esac
  if [[ -n $needs && $flags != *" $needs"* ]]; then
    echo "blas-variants: $coretype skipped: the CPU has no $needs"
    skipped=$((skipped + 1))
    continue
  fi
  env=(OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads")
  if [[ $coretype != default ]]; then
    env+=(OPENBLAS_CORETYPE="$coretype")
  fi
  kernel=$(env "${env[@]}" /usr/bin/python3 -c "$CORENAME")
  name="$coretype ($kernel), $threads thread(s)"
  if [[ $coretype != default && ${kernel,,} != "${coretype,,}" ]]; then
    echo "blas-variants: $name: OpenBLAS did not take the kernel" >&2
    failed=$((failed + 1))
    failures+=("$name")
    continue
  fi
  key="${kernel,,}:$threads"
  if [[ $ran == *" $key "* ]]; then
    echo "blas-variants: $name skipped: ran already"
    skipped=$((skipped + 1))
    continue
  fi
  ran+="$key "
  echo "blas-variants: $name"
  if env "${env[@]}" "$LIT" -q "${TESTS[@]/#/$BUILD_DIR/test/}"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$name")
  fi
done
for failure in "${failures[@]}"; do
  echo "blas-variants: FAILED under $failure"
done
echo "blas-variants: $passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
