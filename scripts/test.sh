#!/usr/bin/env bash
# README command 2: install missing packages, build, run the whole test
# suite through ctest. Extra arguments go to ctest (e.g. -R fleet_).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
case $build in /*) ;; *) build=$top/$build ;; esac

[ "${GPUFLEET_NO_DEPS:-0}" = 1 ] || bash "$top/scripts/deps.sh"
BUILD_DIR=$build bash "$top/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
