#!/usr/bin/env bash
#===- scripts/check-sanitized.sh - the test suite under ASan and UBSan -----===#
#
# Configures build-asan/ with -DMEMOPT_ENABLE_SANITIZERS=ON, builds it, runs the
# gtest unit tests (ctest) and the lit tests that exercise memopt's own C++
# (below), and prints one summary line "check-sanitized: N passed, M failed".
# Any AddressSanitizer, UndefinedBehaviorSanitizer or LeakSanitizer report
# fails the test that triggered it. docs/Development.md says what is
# suppressed and why.
#
# With clang (the default when clang++-22 is installed) the same build also
# has -DMEMOPT_ENABLE_FUZZERS=ON: bench/fuzz/run.sh runs its fuzz targets
# (docs/Reliability.md), so CI builds the sanitized tree once for both.
#
#   BUILD_DIR   the build directory (build-asan)
#   JOBS        parallel build and test jobs (2)
#   LIT_PATHS   the lit tests to run, relative to test/ (SANITIZED_TESTS)
#   CXX, CC     the compilers (clang++-22 and clang-22 if installed, else c++
#               and cc; lit puts the same compiler first on PATH as `c++`,
#               so that OUT/train and the tests' own compiles share its
#               sanitizer runtime)
#   CMAKE_ARGS  extra configure arguments (e.g. a compiler launcher)
#
#===-------------------------------------------------------------------------===#
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-asan}
JOBS=${JOBS:-2}
LIT=${LIT:-/usr/lib/llvm-22/bin/lit}

if [[ -z "${CXX:-}" ]] && command -v clang++-22 >/dev/null; then
  CXX=clang++-22
  CC=${CC:-clang-22}
fi
CXX=${CXX:-c++}
CC=${CC:-cc}
fuzzers=OFF
if "$CXX" --version 2>/dev/null | grep -q clang; then
  fuzzers=ON
fi

if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  # shellcheck disable=SC2086
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_C_COMPILER="$CC" \
    -DMEMOPT_ENABLE_SANITIZERS=ON -DMEMOPT_ENABLE_FUZZERS=$fuzzers \
    ${CMAKE_ARGS:-} || exit 1
fi
ninja -C "$BUILD_DIR" -j "$JOBS" || {
  echo "check-sanitized: 0 passed, 1 failed (build)"
  exit 1
}

log="$BUILD_DIR/check-sanitized.log"
: >"$log"
status=0

# Unit tests. ctest does not export lit's environment: set the same options.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/test/lsan.supp}
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS") 2>&1 | tee -a "$log" || status=1

# The lit tests (lit.cfg.py sets the sanitizer options itself): every test
# of the compiler, the tools and the exporter, and the integration tests that
# drive each part of the runtimes and the driver once (the host kernels,
# convolutions, attention, data loading and its faults, collectives with
# 8-bit state, random graphs under every option). The other integration
# tests compare numerics with PyTorch on the same kernels: scripts/check.sh
# runs them, unsanitized.
SANITIZED_TESTS="Analysis Conversion Dialect Docs Examples Target Tools
  Transforms errors python
  Integration/codegen-runs.mlir Integration/pipeline-runs.mlir
  Integration/train-vs-pytorch.py Integration/conv-nets-vs-float64.py
  Integration/transformer-vs-pytorch.py Integration/train-on-data.py
  Integration/train-faults.py Integration/zero-8bit.py
  Integration/differential-smoke.test"
paths=()
for p in ${LIT_PATHS:-$SANITIZED_TESTS}; do paths+=("$BUILD_DIR/test/$p"); done
"$LIT" -sv --show-unsupported -j "$JOBS" "${paths[@]}" 2>&1 | tee -a "$log" || status=1

scripts/test-summary.sh "$log" check-sanitized "$status"
