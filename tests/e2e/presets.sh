#!/usr/bin/env bash
# Billing presets by name: `preset ls`, `set NAME preset=`, `add --preset`,
# the user's own providers.ini over the built-in one, a malformed file, an
# unknown preset, and `show` saying where a price came from.
. "$(dirname "$0")/lib.sh"
db=$XDG_DATA_HOME/gpufleet/fleet.db
user_ini=$XDG_CONFIG_HOME/gpufleet/providers.ini
export TZ=UTC
dump() { sqlite3 "$db" .dump; }
price_row() {
	sqlite3 "$db" "SELECT p.price, p.price_per, p.unit, p.min_billed,
	    p.stopped_per_day, p.monthly_price, p.egress_per_gb, p.currency
	    FROM instance_price p JOIN instance i ON i.id = p.instance_id
	    WHERE i.name = '$1' AND i.released_at IS NULL"
}
origin_row() {
	sqlite3 "$db" "SELECT o.name, o.date, o.source, o.file FROM
	    instance_preset o JOIN instance i ON i.id = o.instance_id
	    WHERE i.name = '$1' AND i.released_at IS NULL"
}
show_field() { printf '%s\n' "$out" | sed -n "s/^$1: *//p"; }

# --- preset ls: the built-in presets, with source, date and the caveat -------
run preset ls
expect_rc 0 "preset ls"
expect_eq "$(printf '%s\n' "$out" | head -1 | tr -s ' ')" \
    "NAME PRICE BILLING MIN STORAGE STOP DATE SOURCE FILE" "preset ls header"
expect_eq "$(printf '%s\n' "$out" | grep '^autodl.a100-80g ' | tr -s ' ')" \
    "autodl.a100-80g 4.98/h CNY second - 0.5/day remote:/usr/bin/shutdown (stop) 2026-11-01 https://www.autodl.com/market/list built in" \
    "preset ls: autodl.a100-80g"
expect_eq "$(printf '%s\n' "$out" | grep '^runpod.a100-80g ' | tr -s ' ')" \
    "runpod.a100-80g 1.64/h USD second 1m 0.24/day remote:runpodctl stop pod \$RUNPOD_POD_ID (stop) 2026-11-01 https://www.runpod.io/pricing built in" \
    "preset ls: runpod.a100-80g, with its minimum"
expect_eq "$(printf '%s\n' "$out" | sed '1d' | grep -c ' built in$')" 5 \
    "preset ls: five built-in presets"
expect_contains "$out" "These are examples, not quotes: check each against its source" \
    "preset ls says the presets are examples"
# Every shipped preset states its source and date in the file itself.
ini=$GPUFLEET_SRC/config/providers.ini
expect_eq "$(grep -c '^\[preset ' "$ini")" 5 "five presets shipped"
expect_eq "$(grep -c '^source = https://' "$ini")" 5 "each with a source"
expect_eq "$(grep -c '^date = 20[0-9][0-9]-[01][0-9]-[0-3][0-9]$' "$ini")" 5 \
    "each with a date"
expect_contains "$(cat "$ini")" "THESE ARE EXAMPLES, NOT QUOTES" \
    "the file says they are examples"

run preset ls --json
expect_rc 0 "preset ls --json"
expect_eq "$(printf '%s' "$out" | python3 -c '
import json, sys
p = [x for x in json.load(sys.stdin) if x["name"] == "vast.h100"][0]
print(p["price"], p["currency"], p["billing"], p["min_billed"],
      p["stopped_price"], p["egress_price"], p["provider"], p["date"],
      p["source"], p["file"], p["stop_method"])')" \
    "2.40/h USD second None 0.20/day 0.02/GB vast 2026-11-01 https://vast.ai/pricing config/providers.ini (built in) remote:vastai stop instance \$CONTAINER_ID --api-key \$CONTAINER_API_KEY (stop)" \
    "preset ls --json: vast.h100"
run preset rm x
expect_rc 2 "preset rm: not a verb"

# --- set NAME preset=: the whole price rule, and where it came from ---------
run add a1 10.0.0.1 --price 9/h
run set a1 min_billed=10m egress_price=1/GB
expect_rc 0 "a1 priced by hand"
run show a1
expect_eq "$(show_field price_from)" "set by hand" "show: price set by hand"
run set a1 preset=autodl.a100-80g
expect_rc 0 "set preset=autodl.a100-80g"
# 4.98/h -> 49800 minor units; 0.5/day -> 5000; 2599 -> 25990000. The
# preset has no min_billed and no egress_price: a whole rule, so both go.
expect_eq "$(price_row a1)" "49800|h|second|0|5000|25990000|0|CNY" \
    "a1's price rule is the preset's"
expect_eq "$(origin_row a1)" \
    "autodl.a100-80g|2026-11-01|https://www.autodl.com/market/list|config/providers.ini (built in)" \
    "a1's price origin recorded"
run show a1
expect_eq "$(show_field provider)" "autodl" "the preset sets the provider"
expect_eq "$(show_field stop_method_from)" "provider autodl" \
    "and so the provider's stop method"
expect_eq "$(show_field price_from)" \
    "preset autodl.a100-80g (2026-11-01, an example: check it against https://www.autodl.com/market/list)" \
    "show: the price came from the preset"
run show a1 --json
expect_eq "$(printf '%s' "$out" | python3 -c '
import json, sys
o = json.load(sys.stdin)["price_from"]
print(o["preset"], o["date"], o["source"], o["file"], o["applied_at"] > 0)')" \
    "autodl.a100-80g 2026-11-01 https://www.autodl.com/market/list config/providers.ini (built in) True" \
    "show --json: price_from"
# The preset's price bills: 1h30m at 4.98/h per second = 4.98 * 1.5 = 7.47.
run mark a1 running --at 2026-11-02T01:00:00Z
run mark a1 stopped --at 2026-11-02T02:30:00Z
run cost a1 --since 2026-11-02T00:00:00Z --until 2026-11-02T02:30:00Z
expect_rc 0 "cost a1"
expect_contains "$out" "total 7.47 CNY" "1h30m at the preset's 4.98/h"

# A price set by hand afterwards: show no longer names the preset.
run set a1 price=5.20/h
expect_rc 0 "set price by hand"
expect_eq "$(origin_row a1)" "" "origin forgotten"
run show a1
expect_eq "$(show_field price_from)" "set by hand" "show: set by hand again"
expect_eq "$(show_field provider)" "autodl" "the provider stays"
# A field that is not pricing keeps the origin.
run set a1 preset=autodl.a100-80g
run set a1 notes=ok
expect_eq "$(origin_row a1 | cut -d'|' -f1)" "autodl.a100-80g" \
    "notes= keeps the origin"
run show a2
run add a2 10.0.0.2
run show a2
expect_eq "$(show_field price_from)" "(no price)" "show: no price"
run show a2 --json
expect_contains "$out" '"price_from": null' "show --json: no price is null"

# --- refusals: unknown preset, a field given twice; nothing changes ---------
before=$(dump)
run set a1 preset=autodl.a100
expect_rc 2 "unknown preset"
expect_eq "$err" "gpufleet: unknown preset 'autodl.a100' (presets: autodl.rtx4090, autodl.a100-80g, featurize.rtx4090, vast.h100, runpod.a100-80g; see gpufleet preset ls)" \
    "unknown preset: the names there are"
run set a1 preset=vast.h100 price=1/h
expect_rc 2 "preset= with price="
expect_eq "$err" "gpufleet: field 'price' is set by preset vast.h100 too: give one of them" \
    "preset= with price= refused"
run set a1 preset=vast.h100 preset=vast.h100
expect_rc 2 "preset= twice"
run add a3 10.0.0.3 --preset nope
expect_rc 2 "add --preset unknown"
expect_one_error_line "add --preset unknown"
run add a3 10.0.0.3 --preset runpod.a100-80g --currency EUR
expect_rc 2 "add --preset with --currency"
expect_eq "$err" "gpufleet: --currency is set by preset runpod.a100-80g too: give one of them" \
    "add --preset with --currency refused"
expect_eq "$(dump)" "$before" "db unchanged after the refusals"

# --- add --preset --------------------------------------------------------------
run add r1 10.0.0.4 --preset runpod.a100-80g --tag train
expect_rc 0 "add --preset"
# 1.64/h -> 16400; min 1m -> 60 s; 0.24/day -> 2400.
expect_eq "$(price_row r1)" "16400|h|second|60|2400|0|0|USD" "r1's price rule"
expect_eq "$(origin_row r1 | cut -d'|' -f1,2)" "runpod.a100-80g|2026-11-01" \
    "r1's origin"
run show r1
expect_eq "$(show_field provider)" "runpod" "add --preset sets the provider"

# --- the user's providers.ini: adds and replaces presets -------------------
mkdir -p "$(dirname "$user_ini")"
cat >"$user_ini" <<'INI'
; my own
[preset autodl.a100-80g]
source = my invoice of 2026-11-20
date = 2026-11-20
provider = autodl
currency = CNY
price = 4.60/h
billing = minute
min_billed = 5m

[preset lab.box]
source = https://lab.example.org/prices
date = 2026-12-01
currency = EUR
price = 0.80/h
billing = hour
stop_command = local:labctl stop {instance_id}
stop_kind = stop
INI
run preset ls
expect_rc 0 "preset ls with a user file"
expect_eq "$(printf '%s\n' "$out" | grep '^autodl.a100-80g ' | tr -s ' ')" \
    "autodl.a100-80g 4.60/h CNY minute 5m none remote:/usr/bin/shutdown (stop) 2026-11-20 my invoice of 2026-11-20 $user_ini" \
    "the user's autodl.a100-80g replaces the built-in one"
expect_eq "$(printf '%s\n' "$out" | grep -c '^autodl.a100-80g ')" 1 \
    "listed once"
expect_eq "$(printf '%s\n' "$out" | grep '^lab.box ' | tr -s ' ')" \
    "lab.box 0.80/h EUR hour - none local:labctl stop {instance_id} (stop) 2026-12-01 https://lab.example.org/prices $user_ini" \
    "the user's own preset"
run set a2 preset=autodl.a100-80g
expect_rc 0 "set the user's autodl.a100-80g"
expect_eq "$(price_row a2)" "46000|h|minute|300|0|0|0|CNY" \
    "a2's price is the user's preset"
expect_eq "$(origin_row a2)" \
    "autodl.a100-80g|2026-11-20|my invoice of 2026-11-20|$user_ini" \
    "a2's origin names the user's file"
run set a2 platform_id=77 preset=lab.box
expect_rc 0 "set lab.box"
run show a2
expect_eq "$(show_field stop_command)" "local:labctl stop {instance_id}" \
    "the preset's stop method"
expect_eq "$(show_field price_from)" \
    "preset lab.box (2026-12-01, an example: check it against https://lab.example.org/prices)" \
    "show: lab.box"

# --- a malformed file: one line with file:line, exit 2, nothing changed -----
before=$(dump)
malformed() { # WHAT LINE MESSAGE, the file on stdin
	cat >"$user_ini"
	run preset ls
	expect_rc 2 "preset ls, $1"
	expect_eq "$err" "gpufleet: $user_ini:$2: $3" "$1"
	run set a2 preset=autodl.rtx4090
	expect_rc 2 "set preset=, $1"
}
malformed "bad price" 6 "[preset x]: price 'abc' has no period (e.g. 2.69/h, 0.05/min, 0.001/s, 60/day)" <<'INI'
[preset x]
source = me
date = 2026-01-01
currency = CNY
billing = second
price = abc
INI
malformed "no price" 2 "[preset x] has no price (required: source, date, price, currency, billing)" <<'INI'
[preset x]
source = me
date = 2026-01-01
currency = CNY
billing = second
INI
malformed "bad date" 3 "date '2026-02-30' in [preset x] is not a day written YYYY-MM-DD" <<'INI'
[preset x]
source = me
date = 2026-02-30
INI
malformed "unknown key" 2 "unknown key 'colour' in [preset x] (keys: source, date, provider, currency, price, billing, min_billed, stopped_price, monthly_price, egress_price, stop_command, stop_kind)" <<'INI'
[preset x]
colour = red
INI
malformed "not a preset" 2 "section [autodl] is not a preset (write [preset NAME]; stop methods go in config.ini as [provider.NAME])" <<'INI'
[autodl]
stop_kind = stop
INI
malformed "currency" 4 "[preset x]: currency 'RMB' is not an ISO 4217 code: use CNY" <<'INI'
[preset x]
source = me
date = 2026-01-01
currency = RMB
INI
malformed "syntax" 3 "syntax error" <<'INI'
[preset x]
source = me
[preset y
INI
expect_eq "$(dump)" "$before" "db unchanged after malformed files"
# Commands that use no preset do not read the file.
run set a2 notes=fine
expect_rc 0 "set without preset= ignores a malformed providers.ini"

finish
