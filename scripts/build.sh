#!/usr/bin/env bash
# Configure and build gpufleet into BUILD_DIR (default build/ at the top of
# the repository), from any working directory. A build directory configured
# for another source tree is replaced rather than trusted.
#   GPUFLEET_WERROR=1     warnings are errors
#   GPUFLEET_SANITIZE=1   AddressSanitizer + UndefinedBehaviorSanitizer
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
case $build in /*) ;; *) build=$top/$build ;; esac

if [ -f "$build/CMakeCache.txt" ] &&
    ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$top" "$build/CMakeCache.txt"; then
	rm -rf "$build"
fi
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
    -DGPUFLEET_WERROR="${GPUFLEET_WERROR:-0}" \
    -DGPUFLEET_SANITIZE="${GPUFLEET_SANITIZE:-0}" >/dev/null
cmake --build "$build" -j"$(nproc)"
