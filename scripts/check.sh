#!/usr/bin/env bash
#===- scripts/check.sh - install, build and run every test ------------------===#
#
# The README's test command. Installs what is missing, builds, and runs
# check-memopt (gtest unit tests + the lit suite), then names every test
# that did not run on this machine and prints one summary line
# "check: N passed, M failed, K skipped".
#
#===-------------------------------------------------------------------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

scripts/setup.sh
scripts/build.sh

log="$BUILD_DIR/check.log"
status=0
# lit lists the tests it did not run (unsupported on this machine: the GPU
# tests without a GPU), so that the summary can name them.
LIT_OPTS="${LIT_OPTS:-} --show-unsupported" \
  ninja -C "$BUILD_DIR" check-memopt 2>&1 | tee "$log" || status=$?

scripts/test-summary.sh "$log" check "$status"
