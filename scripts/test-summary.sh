#!/usr/bin/env bash
#===- scripts/test-summary.sh - one summary line from a ctest + lit log ----===#
#
#   scripts/test-summary.sh LOG NAME STATUS
#
# Reads the output of ctest and lit (run with --show-unsupported) in LOG,
# names every test that did not run ("NAME: skipped <test>": gtest cases
# that called GTEST_SKIP, lit tests unsupported on this machine), prints
# "NAME: N passed, M failed, K skipped" and exits with STATUS, the exit code
# of the test run (a failure the counts miss still counts as one).
#
#===-------------------------------------------------------------------------===#
set -euo pipefail
log=$1 name=$2 status=$3

read -r unit_failed unit_total < <(sed -n 's/.* \([0-9]\+\) tests failed out of \([0-9]\+\).*/\1 \2/p' "$log" | tail -1)
mapfile -t skipped < <(
  sed -n 's/^[[:space:]]*[0-9]\+ - \(.*\) (Skipped)$/\1/p' "$log"
  sed -n '/^Unsupported Tests (/,/^$/s/^  \(memopt :: .*\)$/\1/p' "$log")
unit_skipped=$(grep -c ' - .* (Skipped)$' "$log" || true)
lit_passed=$(sed -n 's/^ *Passed *: *\([0-9]\+\).*/\1/p' "$log" | tail -1)
lit_failed=$(sed -n 's/^ *Failed *: *\([0-9]\+\).*/\1/p' "$log" | tail -1)
passed=$(( ${unit_total:-0} - ${unit_failed:-0} - unit_skipped + ${lit_passed:-0} ))
failed=$(( ${unit_failed:-0} + ${lit_failed:-0} ))
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  failed=1
fi
for test in "${skipped[@]}"; do
  echo "$name: skipped $test"
done
echo "$name: $passed passed, $failed failed, ${#skipped[@]} skipped"
exit "$status"
