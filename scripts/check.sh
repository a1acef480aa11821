#!/usr/bin/env bash
#===- scripts/check.sh - install, build and run every test ------------------===#
#
# The README's test command. Installs what is missing, builds, and runs
# check-memopt (gtest unit tests + the lit suite), then prints one summary line
# "check: N passed, M failed".
#
#===-------------------------------------------------------------------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

scripts/setup.sh
scripts/build.sh

log="$BUILD_DIR/check.log"
status=0
ninja -C "$BUILD_DIR" check-memopt 2>&1 | tee "$log" || status=$?

# Counts from ctest ("N tests failed out of M") and lit ("Passed: N").
read -r unit_failed unit_total < <(sed -n 's/.* \([0-9]\+\) tests failed out of \([0-9]\+\).*/\1 \2/p' "$log" | tail -1)
lit_passed=$(sed -n 's/^ *Passed *: *\([0-9]\+\).*/\1/p' "$log" | tail -1)
lit_failed=$(sed -n 's/^ *Failed *: *\([0-9]\+\).*/\1/p' "$log" | tail -1)
passed=$(( ${unit_total:-0} - ${unit_failed:-0} + ${lit_passed:-0} ))
failed=$(( ${unit_failed:-0} + ${lit_failed:-0} ))
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  failed=1
fi
echo "check: $passed passed, $failed failed"
exit "$status"
