#!/usr/bin/env bash
# How big the inventory gets under a month of one-minute `status` polling
# of 50 instances (2 GPUs each), through gpufleet's own storage and rollup
# code with a simulated clock. Usage: bench/dbsize.sh [INSTANCES DAYS GPUS]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$top/build bash "$top/scripts/build.sh" >/dev/null
cmake --build "$top/build" --target dbsize >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$top/build/dbsize" "$tmp/fleet.db" "${1:-50}" "${2:-30}" "${3:-2}"
