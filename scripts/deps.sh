#!/usr/bin/env bash
# Install the Debian 12 packages gpufleet needs to build, test and demo,
# skipping those already installed. Needs root (or sudo) only when something
# is missing. Installing openssh-server must not start a system sshd: the
# test fleet runs its own sshd processes and never touches the system's.
set -euo pipefail

packages=(gcc make cmake pkg-config libssh-dev libevent-dev libsqlite3-dev
	libjansson-dev libinih-dev libcurl4-openssl-dev openssl check openssh-client openssh-server sqlite3
	clang-format procps util-linux git time bsdutils musl-tools clang
	libclang-rt-14-dev jq python3 fish rsync
	prometheus # promtool check metrics (tests/fleet/metrics.sh, http.sh)
	chromium curl) # the dashboard in a headless browser (tests/fleet/http.sh)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
	    grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null ||
	    { echo "deps: need root to install: ${missing[*]}" >&2; exit 1; }
	sudo=sudo
fi
echo "deps: installing ${missing[*]}" >&2

# Keep maintainer scripts from starting services (sshd) while installing.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
	$sudo chmod 755 "$policy"
	made_policy=1
fi
restore() { [ "$made_policy" = 1 ] && $sudo rm -f "$policy"; return 0; }
trap restore EXIT

export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
