#!/usr/bin/env bash
# Data from instances is untrusted: reports with values out of range are
# refused (agent error, nothing stored), a wrong entry that reached the
# ledger is repaired with `gpufleet ledger`, and remote text (progress,
# GPU and process names, gpu_error, deploy stderr, failure reasons) is
# shown escaped, never obeyed by the terminal.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
: "${GPUFLEET_AGENT:=$(dirname "$GPUFLEET")/gpufleet-agent}"
export GPUFLEET_AGENT
db=$XDG_DATA_HOME/gpufleet/fleet.db
sql() { sqlite3 "$db" "$@"; }
row() { printf '%s\n' "$out" | grep "^$1 "; }
no_raw_esc() {	# no_raw_esc TEXT DESCRIPTION: no ESC, BEL or C1 CSI byte
	checks=$((checks + 1))
	if printf '%s' "$1" | LC_ALL=C grep -q $'[\033\007\233]'; then
		fail "$2: raw control bytes in [$(printf '%s' "$1" | cat -v)]"
	fi
}

fleet_up 3
h1=$(instance_dir inst-1)/home
cp "$GPUFLEET_SRC/tests/data/agent/fake-nvidia-smi" "$(instance_dir inst-1)/bin/nvidia-smi"
cp -r "$GPUFLEET_SRC/tests/data/agent/gpus/a100/." "$(instance_dir inst-1)/gpu/"

# --- a progress file with escape sequences, read by the real agent -------
mkdir -p "$h1/.gpufleet"
printf '\033]0;title\a\033[2Jepoch 3\n' >"$h1/.gpufleet/progress"
run status inst-1
expect_rc 0 "status with an escaping progress file"
expect_contains "$(row inst-1)" '\e]0;title\a\e[2Jepoch 3 (' \
    "progress shown escaped"
no_raw_esc "$out" "status table"
env -u NO_COLOR script -qec "'$GPUFLEET' status inst-1" "$T/tty" >/dev/null 2>&1
expect_contains "$(cat "$T/tty")" '\e]0;title\a\e[2Jepoch 3' \
    "progress escaped on a terminal too"
checks=$((checks + 1))
if LC_ALL=C grep -q $'\033]0;title' "$T/tty"; then
	fail "the OSC title reached the terminal"
fi
rm "$h1/.gpufleet/progress"

# --- a fake agent: out-of-range values and escaping names ----------------
cat >"$T/evil-agent" <<'EOF'
#!/bin/sh
[ "$1" = report ] || exit 2
now=$(date +%s)
case $GPUFLEET_INSTANCE in
inst-1) printf '{"schema":1,"time":%s,"host":{"hostname":"x","container_start":-1000},"gpus":[]}\n' "$now" ;;
inst-2) printf '{"schema":1,"time":%s,"host":{"hostname":"x","container_start":9223372036854775807,"net_tx_bytes":-9223372036854775808},"gpus":[{"index":0,"util_gpu":1e308,"temp_c":-1e308}],"progress":{"text":"p","mtime":-9223372036854775808}}\n' "$now" ;;
inst-3) printf '{"schema":1,"time":%s,"host":{"hostname":"x","container_start":%s},"gpus":[{"index":0,"name":"\\u001b[2JA100 \\u001b]0;t\\u0007","util_gpu":50,"processes":[{"pid":7,"name":"\\u001b[31mpy\\u009b2J","mem_mib":1}]}]}\n' "$now" "$((now - 60))" ;;
esac
EOF
chmod 755 "$T/evil-agent"
hbefore=$(sql "SELECT count(*) FROM sample_host")
lbefore=$(sql "SELECT count(*) FROM ledger")
GPUFLEET_AGENT=$T/evil-agent run status 'inst-[1-2]'
expect_rc 1 "out-of-range reports fail their hosts"
expect_match "$(row inst-1)" "agent error: bad agent report: 'container_start' -1000 is out of range" \
    "container_start -1000 refused, naming the field"
expect_match "$(row inst-2)" "agent error: bad agent report: 'container_start' 9223372036854775807 is out of range" \
    "INT64 extremes refused"
expect_eq "$(sql "SELECT count(*) FROM sample_host")" "$hbefore" \
    "nothing stored from out-of-range reports"
expect_eq "$(sql "SELECT count(*) FROM ledger")" "$lbefore" \
    "nothing reached the ledger"
run cost
expect_rc 0 "cost still works for the whole fleet"

GPUFLEET_AGENT=$T/evil-agent run status inst-3
expect_rc 0 "a report with escaping names is in range"
expect_contains "$(row inst-3)" '1x\e[2JA100' "GPU name escaped"
expect_contains "$(row inst-3)" '\e[31mpy\xc2\x9b2J' "process name escaped (C1 too)"
no_raw_esc "$out" "names in the status table"

# Deploy stderr and gpu_error, escaped.
cat >"$T/err-agent" <<'EOF'
#!/bin/sh
[ "$1" = report ] || exit 2
case $GPUFLEET_INSTANCE in
inst-1) printf 'boom \033[2J\033]0;t\a\n' >&2; exit 5 ;;
inst-2) printf '{"schema":1,"time":%s,"host":{"hostname":"x"},"gpus":[],"gpu_error":"NVIDIA-SMI \\u001b[2Jfailed"}\n' "$(date +%s)" ;;
esac
EOF
chmod 755 "$T/err-agent"
GPUFLEET_AGENT=$T/err-agent run status 'inst-[1-2]'
expect_contains "$(row inst-1)" 'agent failed with status 5: boom \e[2J\e]0;t\a' \
    "agent stderr escaped"
expect_contains "$(row inst-2)" '(NVIDIA-SMI \e[2Jfailed)' "gpu_error escaped"
no_raw_esc "$out" "deploy errors in the status table"
run history inst-1
no_raw_esc "$out$err" "history"

# --- a wrong entry in the ledger is repaired with gpufleet ledger --------
id1=$(sql "SELECT id FROM instance WHERE name = 'inst-1'")
sql "INSERT INTO ledger (instance_id, t, state, source, note) VALUES ($id1, -1000, 'running', 'observed', 'first seen running')"
bad=$(sql "SELECT max(id) FROM ledger")
run cost
expect_rc 3 "a broken ledger entry fails cost"
expect_contains "$err" "inst-1: interval start -1000 is out of range (see gpufleet ledger inst-1)" \
    "cost names the instance and the repair"
run ledger inst-1
expect_rc 0 "ledger lists"
expect_match "$out" "^$bad +1969-12-31T23:43:20Z +running +observed +first seen running" \
    "the wrong entry is listed with its id"
run ledger inst-2 --delete "$bad"
expect_rc 2 "an entry of another instance is not deleted"
expect_eq "$(sql "SELECT count(*) FROM ledger WHERE id = $bad")" 1 "still there"
run ledger inst-1 --delete "$bad"
expect_rc 0 "delete the wrong entry"
expect_eq "$out" "inst-1: ledger entry $bad deleted" "delete output"
expect_eq "$(sql "SELECT count(*) FROM ledger WHERE id = $bad")" 0 "entry gone"
run cost
expect_rc 0 "cost works again after the repair"
first=$(sql "SELECT min(id) FROM ledger WHERE instance_id = $id1")
backdate inst-1 2026-11-01T00:00:00Z
run ledger inst-1 --move "$first" --at 2026-11-01T00:00:00Z
expect_rc 0 "move an entry"
expect_eq "$(sql "SELECT t FROM ledger WHERE id = $first")" 1793491200 \
    "entry moved to the stated time"
run ledger inst-1 --json
expect_match "$out" '"t": 1793491200' "ledger --json"

# --- exec: failure reasons escaped, progress line guarded ------------------
run exec inst-1 -b -- 'printf "\033[2J out\n"; exit 3'
expect_contains "$out" "==== inst-1 (1 host): exit 3" "gather header"
expect_contains "$out" $'\033[2J out' "gathered output stays byte for byte"
run exec inst-1 -- 'printf "a\033]0;x" >&2; printf "\033[1mb\n"'
expect_eq "$out" $'inst-1: \033[1mb' "default output byte for byte"
env -u GPUFLEET_NO_PROGRESS script -qec \
    "'$GPUFLEET' exec inst-1 -- 'printf \"a\\033]0;x\" >&2' >/dev/null" \
    "$T/tty2" >/dev/null 2>&1
# Every progress line and the summary start with CAN, which ends the OSC
# the host left open; grep counts within lines (no newline in patterns).
draws=$(LC_ALL=C grep -ao $'\033\\[K\\[[0-9]*/[0-9]* done' "$T/tty2" | wc -l)
guarded=$(LC_ALL=C grep -ao $'\030\r\033\\[K\\[[0-9]*/[0-9]* done' "$T/tty2" | wc -l)
checks=$((checks + 1))
[ "$draws" -ge 1 ] && [ "$guarded" = "$draws" ] ||
    fail "progress lines not guarded by CAN ($guarded of $draws): [$(cat -v "$T/tty2")]"
checks=$((checks + 1))
LC_ALL=C grep -aq $'\030gpufleet: exec: 1 host' "$T/tty2" ||
    fail "the summary is not guarded by CAN: [$(cat -v "$T/tty2")]"
expect_contains "$(cat "$T/tty2")" $'a\033]0;x' "the host's stderr reached the terminal as sent"
finish
