# Sourced by bash (tests/fleet/latency.sh, bench/exec.sh): put
# tests/harness/delayrelay in front of every instance of a fleet.
#
#   relay_up DELAYRELAY FLEET_DIR RTT_MS OUT_DIR
#
# starts DELAYRELAY as a child of the calling shell (it exits when that
# shell does; RELAY_PID is its pid), one relay port per instance of
# FLEET_DIR/instances.tsv, and writes OUT_DIR/ssh_config (FLEET_DIR's, with
# each instance's Port the relay's and OUT_DIR/known_hosts as its
# UserKnownHostsFile) and OUT_DIR/known_hosts (the same host keys, under
# the relay's ports: host keys are still checked).  OUT_DIR/ports has the
# "INSTANCE_PORT RELAY_PORT" pairs.  Returns non-zero, saying why on
# stderr, if the relay does not come up within 30 s.

relay_up() {
	local bin=$1 fleet=$2 rtt=$3 out=$4 ports i
	mkdir -p "$out" || return 1
	rm -f "$out/ports"
	ports=$(awk -F '\t' '{ print $2 }' "$fleet/instances.tsv") || return 1
	# shellcheck disable=SC2086 # one argument per port
	"$bin" "$rtt" "$out/ports" $ports &
	RELAY_PID=$!
	for ((i = 0; i < 300; i++)); do
		[ -s "$out/ports" ] && break
		kill -0 "$RELAY_PID" 2>/dev/null || break
		sleep 0.1
	done
	if [ ! -s "$out/ports" ]; then
		echo "relay_up: delayrelay did not start" >&2
		return 1
	fi
	awk -v kh="$out/known_hosts" '
		FILENAME == ARGV[1] { map[$1] = $2; next }
		FILENAME == ARGV[2] {
			if (match($1, /^\[127\.0\.0\.1\]:[0-9]+$/)) {
				p = substr($1, 13)
				if (!(p in map)) { print "relay_up: no relay for port " p > "/dev/stderr"; exit 1 }
				$1 = "[127.0.0.1]:" map[p]
			}
			print > kh
			next
		}
		$1 == "Port" {
			if (!($2 in map)) { print "relay_up: no relay for port " $2 > "/dev/stderr"; exit 1 }
			print "\tPort " map[$2]; next
		}
		$1 == "UserKnownHostsFile" { print "\tUserKnownHostsFile " kh; next }
		{ print }
	' "$out/ports" "$fleet/known_hosts" "$fleet/ssh_config" >"$out/ssh_config"
}
