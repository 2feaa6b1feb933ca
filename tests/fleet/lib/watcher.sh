# shellcheck shell=bash
# Helpers for the watcher's fleet tests (tests/fleet/watcher.sh,
# shutdown.sh, autostop.sh): sourced after tests/e2e/lib.sh. The instances'
# "platforms" are the harness's fake stop tools (fleet --help, "Fake
# platform tools"); the watcher runs the real agent on the instance.

export GPUFLEET_NO_PROGRESS=1
: "${GPUFLEET_AGENT:=$(dirname "$GPUFLEET")/gpufleet-agent}"
export GPUFLEET_AGENT
# The controller's test knobs (README "Test knobs"): they go into the plan.
# The stop's confirm window must outlast the harness watchdog's reaction to
# a fake stop (about a second idle, several on a loaded CI machine), or a
# working stop is retried and counted twice; 8 s keeps a stop_failed test
# (two windows) short.
export GPUFLEET_CHECK_INTERVAL=1 GPUFLEET_STOP_CONFIRM=8 GPUFLEET_MIN_IDLE=2
export TZ=UTC
db=$XDG_DATA_HOME/gpufleet/fleet.db
sql() { sqlite3 "$db" "$@"; }

# rdir NAME: the instance's remote_dir (the default, ~/.cache/gpufleet).
rdir() { printf '%s/home/.cache/gpufleet' "$(instance_dir "$1")"; }

# journal NAME [JQ_FILTER]: the parsable lines of the instance's journal
# as read from its disk (what the watcher wrote, whoever reads it later),
# one compact JSON object per line, filtered by JQ_FILTER (a select()).
journal() {
	local f
	f=$(rdir "$1")/journal.jsonl
	[ -f "$f" ] || return 0
	jq -c -R "fromjson? | ${2:-.}" <"$f" 2>/dev/null
}

# jcount NAME EVENT [EXTRA_JQ_CONDITION]: journal entries of one event.
jcount() {
	journal "$1" "select(.event == \"$2\"${3:+ and ($3)})" | wc -l
}

# calls NAME TOOL: calls.log lines of one fake tool.
calls() { awk -F'\t' -v t="$2" '$1 == t' "$(instance_dir "$1")/calls.log" | wc -l; }

# fstate NAME: the harness's state of the instance (ok, stopped, ...).
fstate() { fleet status | awk -v n="$1" '$1 == n { print $3 }'; }

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND until it succeeds;
# a failure (counted) if it never does. Returns COMMAND's last status.
wait_for() {
	local limit=$1 what=$2 end
	shift 2
	end=$((SECONDS + limit))
	while ! "$@"; do
		if [ "$SECONDS" -ge "$end" ]; then
			checks=$((checks + 1))
			fail "$what (not within ${limit}s)"
			return 1
		fi
		sleep 0.2
	done
	checks=$((checks + 1))
	return 0
}

# Conditions for wait_for.
is_state() { [ "$(fstate "$1")" = "$2" ]; }
has_event() { [ "$(jcount "$@")" -gt 0 ]; }
has_call() { [ "$(calls "$1" "$2")" -gt 0 ]; }

# gpu_util NAME UTIL...: fake GPUs at UTIL percent each, no GPU process.
gpu_util() {
	local dir n=0 u
	dir=$(instance_dir "$1")
	shift
	cp "$GPUFLEET_SRC/tests/data/agent/fake-nvidia-smi" "$dir/bin/nvidia-smi"
	chmod 755 "$dir/bin/nvidia-smi"
	rm -f "$dir/gpu/query-apps.csv" "$dir/gpu/fail" "$dir/gpu/hang"
	: >"$dir/gpu/query-gpu.csv.new"
	for u in "$@"; do
		printf '%d, GPU-0000000%d-7b3d-5e8f-9c2a-3cecef5a0d11, NVIDIA A100-SXM4-80GB, %d, 1, 500, 81920, 40, 60.00, 400.00, 535.104.05\n' \
		    "$n" "$n" "$u" >>"$dir/gpu/query-gpu.csv.new"
		n=$((n + 1))
	done
	mv -f "$dir/gpu/query-gpu.csv.new" "$dir/gpu/query-gpu.csv"
}

# alive PID: the process exists and is not a zombie (a killed process
# whose parent is init stays a zombie until init gets round to it).
alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	case $st in Z* | '') return 1 ;; esac
}

# watcher_pid NAME: the pid in the instance's watcher.pid, if that process
# lives.
watcher_pid() {
	local p
	read -r p 2>/dev/null <"$(rdir "$1")/watcher.pid" || return 1
	alive "$p" && printf '%s\n' "$p"
}

# status_watcher NAME: `status NAME --json`'s watcher object (after a
# contact), compact.
status_watcher() {
	"$GPUFLEET" status "$1" --json 2>/dev/null |
	    jq -c --arg n "$1" '.[] | select(.name == $n) | .watcher'
}

# deadline_id: the id of the one deadline in `shutdown ... --json` output.
deadline_id() { printf '%s' "$out" | jq -r '.[0].id'; }

# show_journal NAME: the journal on stderr (for a failure's context).
show_journal() { echo "--- journal of $1:" >&2; journal "$1" >&2; }
