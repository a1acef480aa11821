#!/usr/bin/env bash
#===- scripts/gen-docs.sh - refresh docs/generated from ODS -----------------===#
#
# The op and pass reference is generated from the .td files at build time
# (build/docs); this copies it into docs/generated so it can be read on the
# web. test/Docs/up-to-date.test fails when the copy is stale.
#
#===-------------------------------------------------------------------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
ninja -C "$BUILD_DIR" memopt-doc
mkdir -p docs/generated
cp "$BUILD_DIR/docs/Dialects/MemoptOps.md" docs/generated/MemoptOps.md
cp "$BUILD_DIR/docs/Passes/MemoptPasses.md" docs/generated/MemoptPasses.md
cp "$BUILD_DIR/docs/Passes/MemoptConversionPasses.md" \
  docs/generated/MemoptConversionPasses.md
echo "docs/generated refreshed"
