#!/usr/bin/env bash
# gpufleet metrics on a sandbox fleet with known fake GPUs: status stores
# the reports, then the Prometheus text must carry their exact numbers,
# up, price, the month to date equal to `cost --json`'s, the balance and
# runway equal to `provider ls --json`'s, the next armed stop equal to
# `shutdown ls --json`'s, and pass `promtool check metrics` with no lint
# issue. --output writes a 0644 file atomically; a selector narrows it.
. "$(dirname "$0")/../e2e/lib.sh"
export GPUFLEET_NO_PROGRESS=1
: "${GPUFLEET_AGENT:=$(dirname "$GPUFLEET")/gpufleet-agent}"
export GPUFLEET_AGENT
export TZ=UTC
if ! command -v promtool >/dev/null 2>&1; then
	echo "SKIP: promtool not found (Debian package prometheus)"
	exit 77
fi
data=$GPUFLEET_SRC/tests/data/agent

fleet_up 4
# Fake nvidia-smi fed from fixture sets: 2xA100 on inst-1, an RTX 4090 on 2.
for g in inst-1:a100 inst-2:rtx4090; do
	cp "$data/fake-nvidia-smi" "$(instance_dir "${g%:*}")/bin/nvidia-smi"
	cp -r "$data/gpus/${g#*:}/." "$(instance_dir "${g%:*}")/gpu/"
done
fleet break inst-3 refuse
# inst-4 reports a hostile model name (quotes, a backslash, 200 bytes more)
# twice under one index, and has no price.
long=$(printf 'x%.0s' $(seq 200))
evil="Evil \"GPU\" \\ $long"
d4=$(instance_dir inst-4)
cp "$data/fake-nvidia-smi" "$d4/bin/nvidia-smi"
for n in 1 2; do
	printf '0, GPU-evil-%d, %s, 50, 1, 100, 1000, 40, 10.00, 100.00, 535.0\n' \
	    "$n" "$evil" >>"$d4/gpu/query-gpu.csv"
done
# inst-1 billed per second, then marked stopped so its cost stays put;
# inst-2 billed per started hour (one hour so far: steady for the test).
run set inst-1 price=2.69/h billing=second provider=autodl
run set inst-2 price=1.20/h billing=hour provider=autodl \
    'stop_command=remote:true'
run set inst-3 price=0.05/min billing=minute currency=usd provider=vast
run provider add autodl --balance 500 --currency CNY
expect_rc 0 "provider add"

run status
expect_rc 1 "status: inst-3 unreachable"
sleep 1
run mark inst-1 stopped
expect_rc 0 "mark inst-1 stopped"
run shutdown inst-2 --in 2h --warn 0
expect_rc 0 "arm a deadline on inst-2"
run shutdown ls inst-2 --json
expect_rc 0 "shutdown ls reads the plan back"
at=$(printf '%s' "$out" | jq -r '.[0].watcher.deadlines[0].at_local')
next=$(date -u -d "$at" +%s)
expect_match "$next" '^[0-9]+$' "deadline time read back"

run metrics
expect_rc 0 "metrics"
m=$out
printf '%s\n' "$m" >"$T/metrics.prom"
# value NAME LABELS: the sample's value ("" when there is none).
value() {
	printf '%s\n' "$m" | awk -v k="$1$2 " 'index($0, k) == 1 { print substr($0, length(k) + 1) }'
}
g1='instance="inst-1",provider="autodl",gpu="0",uuid="GPU-4f1e9a2c-7b3d-5e8f-9c2a-3cecef5a0d11",model="NVIDIA A100-SXM4-80GB"'
g2='instance="inst-1",provider="autodl",gpu="1",uuid="GPU-8a9c0d1e-2f3b-4c5d-a6e7-8091a2b3c4d5",model="NVIDIA A100-SXM4-80GB"'
g3='instance="inst-2",provider="autodl",gpu="0",uuid="GPU-d1b3f0a4-6c2e-9b71-35e0-8a4f2c6d9e13",model="NVIDIA GeForce RTX 4090"'
expect_eq "$(value gpufleet_gpu_utilization_ratio "{$g1}")" 0.97 "A100 0 utilization"
expect_eq "$(value gpufleet_gpu_utilization_ratio "{$g2}")" 0.93 "A100 1 utilization"
expect_eq "$(value gpufleet_gpu_utilization_ratio "{$g3}")" 1 "4090 utilization"
expect_eq "$(value gpufleet_gpu_memory_used_bytes "{$g1}")" $((74213 * 1048576)) "memory used"
expect_eq "$(value gpufleet_gpu_memory_total_bytes "{$g1}")" $((81920 * 1048576)) "memory total"
expect_eq "$(value gpufleet_gpu_memory_used_bytes "{$g3}")" $((22114 * 1048576)) "4090 memory used"
expect_eq "$(value gpufleet_gpu_temperature_celsius "{$g2}")" 63 "temperature"
expect_eq "$(value gpufleet_gpu_power_watts "{$g1}")" 312.5 "power"
expect_eq "$(value gpufleet_gpu_power_watts "{$g3}")" 441.37 "4090 power"
expect_eq "$(printf '%s\n' "$m" | grep -c '^gpufleet_gpu_utilization_ratio{instance="inst-[123]"')" 3 \
    "three GPUs, none for the unreachable one"
i1='{instance="inst-1",provider="autodl"}'
i2='{instance="inst-2",provider="autodl"}'
i3='{instance="inst-3",provider="vast"}'
expect_eq "$(value gpufleet_instance_up "$i1")" 1 "inst-1 up"
expect_eq "$(value gpufleet_instance_up "$i3")" 0 "inst-3 not up"
# No login on inst-1 but status's own, which its agent leaves out.
expect_eq "$(value gpufleet_instance_sessions "$i1")" 0 "sessions: none"
expect_eq "$(value gpufleet_instance_sessions "$i3")" "" "no sessions without a report"
expect_eq "$(value gpufleet_instance_price_per_hour \
    '{instance="inst-1",provider="autodl",currency="CNY"}')" 2.69 "price inst-1"
expect_eq "$(value gpufleet_instance_price_per_hour \
    '{instance="inst-3",provider="vast",currency="USD"}')" 3 "0.05/min is 3 USD/h"
expect_eq "$(value gpufleet_instance_next_stop_timestamp_seconds "$i2")" "$next" \
    "next stop as shutdown ls"
expect_eq "$(value gpufleet_instance_next_stop_timestamp_seconds "$i1")" "" \
    "no next stop without a deadline"

# inst-4: one series for its repeated index, the label escaped and cut
# to 128 bytes, and nothing of money without a price.
expect_eq "$(printf '%s\n' "$m" | grep -c '^gpufleet_gpu_utilization_ratio{instance="inst-4"')" 1 \
    "a repeated GPU index is one series"
cut=$(printf '%s' "Evil \"GPU\" \\ $long" | head -c 128)
esc=$(printf '%s' "$cut" | sed 's/\\/\\\\/g; s/"/\\"/g')
expect_contains "$m" "gpu=\"0\",uuid=\"GPU-evil-1\",model=\"$esc\"} 0.5" \
    "hostile model escaped and cut to 128 bytes"
expect_eq "$(printf '%s\n' "$m" | grep -c 'cost_month_to_date{instance="inst-4"')" 0 \
    "no month to date without a price"
expect_eq "$(printf '%s\n' "$m" | grep -c 'price_per_hour{instance="inst-4"')" 0 \
    "no price without a price"

# Month to date, balance, runway: the commands' own numbers (minor units).
minor() { awk -v v="$1" 'BEGIN { if (v == "") print ""; else printf "%.0f\n", v * 10000 }'; }
run cost --json
costs=$out
for n in inst-1:CNY inst-2:CNY inst-3:USD; do
	name=${n%:*} cur=${n#*:}
	want=$(printf '%s' "$costs" | jq -r --arg n "$name" '.instances[] | select(.name == $n) | .total')
	got=$(value gpufleet_instance_cost_month_to_date \
	    "{instance=\"$name\",provider=\"$( [ "$name" = inst-3 ] && echo vast || echo autodl)\",currency=\"$cur\"}")
	expect_eq "$(minor "$got")" "$want" "$name month to date equals cost --json"
done
expect_eq "$(printf '%s' "$costs" | jq -r '.instances[] | select(.name == "inst-2") | .total')" \
    12000 "inst-2: one started hour at 1.20"
run provider ls --json
left=$(printf '%s' "$out" | jq -r '.[] | select(.name == "autodl") | .left')
runway=$(printf '%s' "$out" | jq -r '.[] | select(.name == "autodl") | .runway_s')
expect_eq "$(minor "$(value gpufleet_provider_balance '{provider="autodl",currency="CNY"}')")" \
    "$left" "balance equals provider ls --json"
expect_eq "$(value gpufleet_provider_runway_seconds '{provider="autodl"}')" "$runway" \
    "runway equals provider ls --json"
expect_eq "$(value gpufleet_provider_balance '{provider="vast",currency="USD"}')" "" \
    "no balance stated: none shown"

# Every family has HELP and TYPE; no NaN; promtool finds nothing to say.
checks=$((checks + 1))
if printf '%s\n' "$m" | grep -qi 'nan\|inf'; then fail "NaN or Inf in: $m"; fi
for f in $(printf '%s\n' "$m" | grep -v '^#' | sed 's/[{ ].*//' | sort -u); do
	expect_eq "$(printf '%s\n' "$m" | grep -c "^# TYPE $f gauge$")" 1 "TYPE of $f"
	expect_eq "$(printf '%s\n' "$m" | grep -c "^# HELP $f ")" 1 "HELP of $f"
done
lint=$(promtool check metrics <"$T/metrics.prom" 2>&1)
prc=$?
expect_eq "$prc" 0 "promtool check metrics exit status"
expect_eq "$lint" "" "promtool check metrics: no lint issue"

# --- --output: atomically, 0644, the same text; bad paths refused --------
mkdir -p "$T/textfile"
umask 077
run metrics --output "$T/textfile/gpufleet.prom"
umask 022
expect_rc 0 "metrics --output"
expect_eq "$out" "" "nothing on stdout with --output"
expect_eq "$(stat -c %a "$T/textfile/gpufleet.prom")" 644 "mode 0644 whatever the umask"
expect_eq "$(cat "$T/textfile/gpufleet.prom")" "$m" "the same text as stdout"
expect_eq "$(ls -A "$T/textfile")" gpufleet.prom "no temporary file left"
run metrics --output "$T/nonexistent/x.prom"
expect_rc 2 "--output into a missing directory"
expect_one_error_line "--output into a missing directory"
expect_contains "$err" "$T/nonexistent/x.prom" "the error names the file"
run metrics --output ''
expect_rc 2 "--output ''"
expect_one_error_line "--output ''"

# --- a selector narrows the instances; providers stay ----------------------
run metrics inst-2
expect_rc 0 "metrics inst-2"
expect_eq "$(printf '%s\n' "$out" | grep -c 'instance="inst-1"')" 0 "inst-1 left out"
expect_contains "$out" "gpufleet_instance_up$i2 1" "inst-2 in"
expect_contains "$out" 'gpufleet_provider_balance{provider="autodl"' "providers stay"
run metrics nosuch
expect_rc 2 "unknown instance"
expect_one_error_line "unknown instance"
run metrics inst-1 inst-2
expect_rc 2 "two selectors"
expect_one_error_line "two selectors"

# --- the help tells the truth --------------------------------------------
run metrics --help
expect_contains "$out" "--output FILE" "help names --output"
expect_contains "$out" "textfile collector" "help says what --output is for"
finish
