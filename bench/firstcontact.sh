#!/usr/bin/env bash
# What reading the user's ssh_config and known_hosts costs each first
# contact (the host key check), for fleets of N hosts imported from one
# ssh_config. Usage: bench/firstcontact.sh [N...] (default 50 500 2000)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$top/build bash "$top/scripts/build.sh" >/dev/null
cmake --build "$top/build" --target firstcontact >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ $# -eq 0 ]; then set -- 50 500 2000; fi
"$top/build/firstcontact" "$tmp" "$@"
