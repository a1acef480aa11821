#!/usr/bin/env bash
#===- scripts/setup.sh - install what memopt needs on Debian 12 -------------===#
#
# Idempotent: installs only the Debian packages that are missing, and fails
# loudly (non-zero exit, the package named) when one cannot be installed.
# Every capability that needs a package adds it to PACKAGES here, nowhere else.
#
#===-------------------------------------------------------------------------===#
set -euo pipefail

PACKAGES=(
  # Compiler infrastructure: MLIR/LLVM 22 (libMLIR.so, mlir-tblgen, lit, FileCheck).
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # Libraries LLVM's CMake config links against.
  zlib1g-dev libzstd-dev libedit-dev libcurl4-openssl-dev
  # Build tools and unit tests.
  cmake ninja-build g++ libgtest-dev
  # Host runtime (OpenBLAS GEMMs, oneDNN convolutions) and reports.
  libopenblas-dev libdnnl-dev nlohmann-json3-dev
  # Data parallelism on the host (memopt-compile --data-parallel, mpirun).
  libopenmpi-dev openmpi-bin
  # Exporter and its tests (torch 1.13 for /usr/bin/python3).
  python3-torch python3-numpy
  # The torchvision model zoo (bench/zoo, its CI subset).
  python3-torchvision
  # Headless browser for the lit test of OUT/memory_report.html (report-html.test).
  chromium
  # clang and its sanitizer/libFuzzer runtimes: the sanitized build and the
  # fuzz targets (scripts/check-sanitized.sh, bench/fuzz/run.sh).
  clang-22 libclang-rt-22-dev
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  echo "setup: apt-get failed to install: ${missing[*]}" >&2
  exit 1
fi

# apt-get can succeed without installing a package it does not know under that
# name on every release; check each one again.
for pkg in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    echo "setup: package '$pkg' is still not installed" >&2
    exit 1
  fi
done
echo "setup: done"
