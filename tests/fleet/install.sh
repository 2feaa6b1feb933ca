#!/usr/bin/env bash
# An installed gpufleet works from its prefix: `cmake --install` (what
# scripts/install.sh runs) puts gpufleet in PREFIX/bin and the agent in
# PREFIX/libexec/gpufleet, and the installed gpufleet finds that agent by
# itself (no GPUFLEET_AGENT, nothing beside it) and deploys it to a real
# instance; moved to another prefix, it still does. Without it, the error
# names every place it looked.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
build=$(dirname "$GPUFLEET")
unset GPUFLEET_AGENT

cmake --install "$build" --prefix "$T/prefix" >"$T/install.log" 2>&1
rc=$?
expect_rc 0 "cmake --install into a temporary prefix"
checks=$((checks + 1))
[ -x "$T/prefix/bin/gpufleet" ] || fail "no bin/gpufleet: $(cat "$T/install.log")"
checks=$((checks + 1))
[ -x "$T/prefix/libexec/gpufleet/gpufleet-agent" ] || fail "no libexec/gpufleet/gpufleet-agent"
checks=$((checks + 1))
[ ! -e "$T/prefix/bin/gpufleet-agent" ] || fail "the agent is on PATH (bin/)"
GPUFLEET=$T/prefix/bin/gpufleet
run --version
expect_match "$out" '^gpufleet [0-9]+\.[0-9]+\.[0-9]+$' "the installed gpufleet runs"

fleet_up 1
run status inst-1
expect_rc 0 "status with the installed gpufleet deploys its agent"
expect_match "$(printf '%s\n' "$out" | grep '^inst-1 ')" '^inst-1 +up ' "inst-1 up"
agent=$(ls "$(instance_dir inst-1)"/home/.cache/gpufleet/gpufleet-agent-* 2>/dev/null)
checks=$((checks + 1))
[ -n "$agent" ] && cmp -s "$agent" "$T/prefix/libexec/gpufleet/gpufleet-agent" ||
    fail "the installed agent was not the one deployed"

# Moved to another prefix (a relocated install), it finds its agent there.
mv "$T/prefix" "$T/moved"
GPUFLEET=$T/moved/bin/gpufleet
rm -rf "$(instance_dir inst-1)"/home/.cache/gpufleet
run status inst-1
expect_rc 0 "a moved install finds its agent"
expect_match "$(printf '%s\n' "$out" | grep '^inst-1 ')" '^inst-1 +up ' "inst-1 up from the moved install"

# With no agent anywhere: one line naming where it looked.
rm "$T/moved/libexec/gpufleet/gpufleet-agent"
rm -rf "$(instance_dir inst-1)"/home/.cache/gpufleet
run status inst-1
checks=$((checks + 1))
[ "$rc" != 0 ] || fail "status without an agent succeeded"
expect_contains "$out$err" "cannot find the agent binary (tried $T/moved/bin/gpufleet-agent, $T/moved/bin/../libexec/gpufleet/gpufleet-agent," \
    "the error names the places it looked"

finish
