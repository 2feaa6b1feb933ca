#!/usr/bin/env bash
# Build gpufleet and install it for this user: gpufleet in PREFIX/bin (so
# it is on PATH as every example assumes), the agent it uploads to the
# instances in PREFIX/libexec/gpufleet (where gpufleet looks, relative to
# itself). From any working directory; can be run again.
#   PREFIX=DIR         where to install (default ~/.local)
#   BUILD_DIR=DIR      the build directory (default build/ at the top)
#   GPUFLEET_NO_DEPS=1 do not apt-get missing packages first
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
prefix=${PREFIX:-$HOME/.local}
case $prefix in /*) ;; *) prefix=$PWD/$prefix ;; esac
build=${BUILD_DIR:-$top/build}
case $build in /*) ;; *) build=$top/$build ;; esac

[ "${GPUFLEET_NO_DEPS:-0}" = 1 ] || bash "$top/scripts/deps.sh"
BUILD_DIR=$build bash "$top/scripts/build.sh"
# The prefix is given at install time only: gpufleet finds the agent
# relative to itself, so the build need not be configured for it.
cmake --install "$build" --prefix "$prefix" >/dev/null
echo "installed $prefix/bin/gpufleet and $prefix/libexec/gpufleet/gpufleet-agent"
case ":$PATH:" in
*":$prefix/bin:"*) ;;
*) echo "note: $prefix/bin is not on PATH; add it, e.g. in ~/.profile:" \
	"export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
"$prefix/bin/gpufleet" --version
