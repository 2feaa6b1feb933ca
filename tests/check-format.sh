#!/usr/bin/env bash
# Fails if any C source or header differs from what .clang-format produces.
set -eu
cf=${1:-clang-format}
cd "$GPUFLEET_SRC"
files=$(git ls-files '*.c' '*.h' '*.h.in' 2>/dev/null || find controller agent include tests -name '*.[ch]')
[ -n "$files" ] || { echo "no sources found"; exit 1; }
bad=0
for f in $files; do
	if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
		echo "not formatted: $f (run: $cf -i $f)"
		bad=1
	fi
done
exit $bad
