/* Prices, the ledger of state changes, and what status observes. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "actionlog.h"
#include "db.h"
#include "ledger.h"
#include "log.h"
#include "status.h"
#include "stoprequest.h"
#include "xmalloc.h"

static int per_from_name(const char *, enum billing_per *);
static void price_row(sqlite3_stmt *, struct billing_price *);
static int unit_from_name(const char *, enum billing_unit *);
struct tx_sample;
struct books;
static money_t egress_cost(const struct tx_sample *, size_t,
    const struct billing_price *, size_t, int64_t *);
static int books_load(struct inventory *, const struct ledger_books *, int64_t,
    int64_t, int64_t, struct books *, char **);
static void books_free(struct books *);
struct idle_group;
static void idle_close(struct ledger_books *, struct idle_group *, int);
static int idle_stream(struct inventory *, struct ledger_books *, size_t,
    int64_t, int64_t, int, int *, char **);
static size_t books_intervals(
    const struct books *, int64_t, struct billing_interval *);
static money_t books_egress(const struct books *, int64_t, int64_t, int64_t *);
static size_t first_at(const int64_t *, size_t, size_t, int64_t);
static size_t count_in(const int64_t *, size_t, int64_t, int64_t);
static void bucket(
    const int64_t *, const void *, size_t, size_t, size_t, size_t **, void **);
static int books_window(const struct books *, struct ledger_cost *, int64_t,
    int64_t, int64_t, struct billing_line **, size_t *, struct billing_piece **,
    size_t *, char **);
static double idle_fraction(struct inventory *, int64_t, int64_t, int64_t, int);
static int ledger_change(struct inventory *, int64_t, int64_t, int64_t,
    const char *, int64_t *, struct ledger_entry *, char **);
static int count_incidents(
    struct inventory *, int64_t, const char *, int64_t, int64_t);
static int cost_of(struct inventory *, const struct ledger_books *,
    const struct config *, struct ledger_cost *, int64_t, int64_t, int64_t,
    struct billing_line **, size_t *, struct billing_piece **, size_t *,
    char **);

static int
per_from_name(const char *s, enum billing_per *per)
{
	enum billing_per p;

	for (p = BILL_PER_SECOND; p <= BILL_PER_DAY; p++) {
		if (strcmp(billing_per_name(p), s) == 0) {
			*per = p;
			return 0;
		}
	}
	return -1;
}

static int
unit_from_name(const char *s, enum billing_unit *unit)
{
	enum billing_unit u;

	for (u = BILL_SECOND; u <= BILL_HOUR; u++) {
		if (strcmp(billing_unit_name(u), s) == 0) {
			*unit = u;
			return 0;
		}
	}
	return -1;
}

#define PRICE_COLUMNS                                                          \
	"valid_from, price, price_per, unit, min_billed, stopped_per_day, "    \
	"monthly_price, egress_per_gb, currency"

/* One instance_price row of PRICE_COLUMNS into p. */
static void
price_row(sqlite3_stmt *st, struct billing_price *p)
{
	const char *cur = (const char *)sqlite3_column_text(st, 8);
	struct billing_rule *rule = &p->rule;

	billing_rule_init(rule, "CNY");
	p->from = sqlite3_column_int64(st, 0);
	rule->price = sqlite3_column_int64(st, 1);
	per_from_name(
	    (const char *)sqlite3_column_text(st, 2), &rule->price_per);
	unit_from_name((const char *)sqlite3_column_text(st, 3), &rule->unit);
	rule->min_billed = sqlite3_column_int64(st, 4);
	rule->stopped_per_day = sqlite3_column_int64(st, 5);
	rule->monthly_price = sqlite3_column_int64(st, 6);
	rule->egress_per_gb = sqlite3_column_int64(st, 7);
	snprintf(rule->currency, sizeof rule->currency, "%s",
	    cur != NULL ? cur : "CNY");
}

/*
 * The price of an instance now (the latest of its history); *has is 0
 * (and rule holds defaults in CNY) when none was set.
 */
int
ledger_price_get(struct inventory *inv, int64_t id, struct billing_rule *rule,
    int *has, char **cause)
{
	struct billing_price p;
	sqlite3_stmt *st;
	int rc, r;

	billing_rule_init(rule, "CNY");
	*has = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT " PRICE_COLUMNS " FROM instance_price WHERE "
		 "instance_id = ? ORDER BY valid_from DESC LIMIT 1",
		 "reading a price", cause, "I", id)) != 0)
		return r;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		price_row(st, &p);
		*rule = p.rule;
		*has = 1;
	}
	r = db_finish(inv, st, rc, "reading a price", cause);
	return r < 0 ? r : 0;
}

/*
 * The price history of an instance, oldest first: *n entries in *out
 * (caller frees), none when it has no price.
 */
int
ledger_prices(struct inventory *inv, int64_t id, struct billing_price **out,
    size_t *n, char **cause)
{
	struct billing_price *v = NULL;
	sqlite3_stmt *st;
	size_t len = 0;
	int rc, r;

	*out = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT " PRICE_COLUMNS " FROM instance_price WHERE "
		 "instance_id = ? ORDER BY valid_from",
		 "reading the price history", cause, "I", id)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		v = xreallocarray(v, len + 1, sizeof *v);
		price_row(st, &v[len++]);
	}
	if ((r = db_finish(inv, st, rc, "reading the price history", cause)) <
	    0) {
		free(v);
		return r;
	}
	*out = v;
	*n = len;
	return 0;
}

/*
 * Store the price of an instance as its only one, in force since it was
 * added (add; inside the caller's transaction).
 */
int
ledger_price_put(struct inventory *inv, int64_t id,
    const struct billing_rule *rule, char **cause)
{
	int r;

	if ((r = db_exec(inv,
		 "DELETE FROM instance_price WHERE instance_id = ?",
		 "storing a price", cause, "I", id)) != 0)
		return r;
	return db_exec(inv,
	    "INSERT INTO instance_price (instance_id, " PRICE_COLUMNS
	    ") SELECT ?, created_at, ?, ?, ?, ?, ?, ?, ?, ? FROM instance "
	    "WHERE id = ?",
	    "storing a price", cause, "IIttIIIItI", id, rule->price,
	    billing_per_name(rule->price_per), billing_unit_name(rule->unit),
	    rule->min_billed, rule->stopped_per_day, rule->monthly_price,
	    rule->egress_per_gb, rule->currency, id);
}

/* Put every price of an instance's history in currency (a correction). */
int
ledger_price_currency(
    struct inventory *inv, int64_t id, const char *currency, char **cause)
{
	return db_exec(inv,
	    "UPDATE instance_price SET currency = ? WHERE instance_id = ? AND "
	    "currency != ?",
	    "storing a currency", cause, "tIt", currency, id, currency);
}

/*
 * The earliest time a price of an instance may be in force from: its
 * first ledger entry, or LEDGER_BACKDATE_MAX before it was added if that
 * is earlier.
 */
int
ledger_price_earliest(
    struct inventory *inv, const struct instance *in, int64_t *t, char **cause)
{
	sqlite3_stmt *st;
	int rc, r;

	*t = in->created_at - LEDGER_BACKDATE_MAX;
	if ((r = db_prepare(inv, &st,
		 "SELECT min(t) FROM ledger WHERE instance_id = ?",
		 "reading the ledger", cause, "I", in->id)) != 0)
		return r;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL &&
	    sqlite3_column_int64(st, 0) < *t)
		*t = sqlite3_column_int64(st, 0);
	r = db_finish(inv, st, rc, "reading the ledger", cause);
	return r < 0 ? r : 0;
}

/*
 * Store a price of an instance in force from `from` until its next change
 * (set; inside the caller's transaction), replacing one from the same
 * second. The first price is in force before its time too, so a change
 * from before it moves it back to just before the change (or to
 * LEDGER_BACKDATE_MAX before the instance was added, if earlier): it then
 * holds until the change. The currency is the whole history's: a new one
 * is a correction of every entry, not a change from `from`.
 */
int
ledger_price_set(struct inventory *inv, int64_t id, int64_t from,
    const struct billing_rule *rule, char **cause)
{
	int r;

	if ((r = db_exec(inv,
		 "UPDATE instance_price SET valid_from = min(? - 1, (SELECT "
		 "created_at FROM instance WHERE id = ?) - ?) WHERE "
		 "instance_id = ? AND valid_from > ? AND valid_from = (SELECT "
		 "min(valid_from) FROM instance_price WHERE instance_id = ?)",
		 "storing a price", cause, "IIIIII", from, id,
		 (int64_t)LEDGER_BACKDATE_MAX, id, from, id)) != 0)
		return r;
	if ((r = ledger_price_currency(inv, id, rule->currency, cause)) != 0)
		return r;
	return db_exec(inv,
	    "INSERT OR REPLACE INTO instance_price (instance_id, " PRICE_COLUMNS
	    ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	    "storing a price", cause, "IIIttIIIIt", id, from, rule->price,
	    billing_per_name(rule->price_per), billing_unit_name(rule->unit),
	    rule->min_billed, rule->stopped_per_day, rule->monthly_price,
	    rule->egress_per_gb, rule->currency);
}

/*
 * Set one pricing field of `set`: price, currency, billing, min_billed,
 * stopped_price, monthly_price, egress_price. *known is 0 if field is not
 * a pricing field (then nothing is changed and 0 returned).
 */
int
ledger_price_field(struct billing_rule *rule, const char *field,
    const char *value, int *known, char **cause)
{
	*known = 1;
	if (strcmp(field, "price") == 0)
		return billing_parse_price(
		    value, &rule->price, &rule->price_per, cause);
	if (strcmp(field, "currency") == 0)
		return billing_parse_currency(
		    value, rule->currency, sizeof rule->currency, cause);
	if (strcmp(field, "billing") == 0)
		return billing_parse_unit(value, &rule->unit, cause);
	if (strcmp(field, "min_billed") == 0) {
		if (billing_parse_duration(value, &rule->min_billed, cause) !=
		    0)
			return -1;
		if (rule->min_billed > BILLING_MIN_BILLED_MAX) {
			xasprintf(cause,
			    "min_billed '%s' is longer than 30 days", value);
			return -1;
		}
		return 0;
	}
	if (strcmp(field, "stopped_price") == 0)
		return billing_parse_stopped_price(
		    value, &rule->stopped_per_day, cause);
	if (strcmp(field, "monthly_price") == 0)
		return billing_parse_amount(value, &rule->monthly_price, cause);
	if (strcmp(field, "egress_price") == 0)
		return billing_parse_egress_price(
		    value, &rule->egress_per_gb, cause);
	*known = 0;
	return 0;
}

/* The pricing fields, in the order `set` and `show` list them. */
const char *const ledger_price_fields[LEDGER_NPRICE_FIELDS] = { "price",
	"currency", "billing", "min_billed", "stopped_price", "monthly_price",
	"egress_price" };

/*
 * One pricing field of rule as `set` takes it (2.69/h, CNY, second, 10m,
 * 0.5/day, 1500, 0.8/GB); "none" for a minimum, storage, plan or egress
 * price of 0. Caller frees.
 */
char *
ledger_price_value(const struct billing_rule *rule, const char *field)
{
	char *s, *a;
	int64_t m = rule->min_billed;

	if (strcmp(field, "price") == 0)
		return billing_format_price(rule->price, rule->price_per);
	if (strcmp(field, "currency") == 0)
		return xstrdup(rule->currency);
	if (strcmp(field, "billing") == 0)
		return xstrdup(billing_unit_name(rule->unit));
	if (strcmp(field, "min_billed") == 0) {
		if (m <= 0)
			return xstrdup("none");
		if (m % 3600 == 0)
			xasprintf(&s, "%lldh", (long long)(m / 3600));
		else if (m % 60 == 0)
			xasprintf(&s, "%lldm", (long long)(m / 60));
		else
			xasprintf(&s, "%llds", (long long)m);
		return s;
	}
	if (strcmp(field, "stopped_price") == 0 && rule->stopped_per_day > 0) {
		a = billing_format_exact(rule->stopped_per_day);
		xasprintf(&s, "%s/day", a);
		free(a);
		return s;
	}
	if (strcmp(field, "monthly_price") == 0 && rule->monthly_price > 0)
		return billing_format_exact(rule->monthly_price);
	if (strcmp(field, "egress_price") == 0 && rule->egress_per_gb > 0) {
		a = billing_format_exact(rule->egress_per_gb);
		xasprintf(&s, "%s/GB", a);
		free(a);
		return s;
	}
	return xstrdup("none");
}

/*
 * The pricing fields of rule as JSON: each as `set` takes it, and money as
 * exact minor units (minor_per_unit) beside it.
 */
json_t *
ledger_price_json(const struct billing_rule *rule)
{
	json_t *o = json_object();
	char *v;
	int k;

	for (k = 0; k < LEDGER_NPRICE_FIELDS; k++) {
		v = ledger_price_value(rule, ledger_price_fields[k]);
		json_object_set_new(o, ledger_price_fields[k], json_string(v));
		free(v);
	}
	json_object_set_new(o, "price_minor", json_integer(rule->price));
	json_object_set_new(
	    o, "price_per", json_string(billing_per_name(rule->price_per)));
	json_object_set_new(o, "min_billed_s", json_integer(rule->min_billed));
	json_object_set_new(
	    o, "stopped_per_day_minor", json_integer(rule->stopped_per_day));
	json_object_set_new(
	    o, "monthly_price_minor", json_integer(rule->monthly_price));
	json_object_set_new(
	    o, "egress_per_gb_minor", json_integer(rule->egress_per_gb));
	json_object_set_new(
	    o, "minor_per_unit", json_integer(BILLING_MINOR_PER_UNIT));
	return o;
}

/* Record a state change of an instance at time t. */
int
ledger_add(struct inventory *inv, int64_t id, int64_t t, const char *state,
    const char *source, const char *note, char **cause)
{
	return db_exec(inv,
	    "INSERT INTO ledger (instance_id, t, state, source, note) VALUES "
	    "(?, ?, ?, ?, ?)",
	    "writing the ledger", cause, "IIttt", id, t, state, source, note);
}

/*
 * An instance's ledger in time order, as billing reads it (ledger_entries
 * less ids and notes). *ev (caller frees) gets *n events.
 */
int
ledger_events(struct inventory *inv, int64_t id, struct ledger_event **ev,
    size_t *n, char **cause)
{
	struct ledger_entry *e;
	struct ledger_event *v;
	size_t i;
	int r;

	if ((r = ledger_entries(inv, id, &e, n, cause)) != 0)
		return r;
	v = xcalloc(*n + 1, sizeof *v);
	for (i = 0; i < *n; i++) {
		v[i].t = e[i].t;
		memcpy(v[i].state, e[i].state, sizeof v[i].state);
		memcpy(v[i].source, e[i].source, sizeof v[i].source);
	}
	ledger_entries_free(e, *n);
	*ev = v;
	return 0;
}

/*
 * Why gpufleet did not know instance id's state from t, into buf: the note
 * of the last unknown entry at t, else its source unless observed, else
 * "unreachable" (what status books when it cannot reach it).
 */
int
ledger_unknown_why(struct inventory *inv, int64_t id, int64_t t, char *buf,
    size_t size, char **cause)
{
	const char *source = NULL, *note = NULL;
	sqlite3_stmt *st;
	int rc, r;

	if ((r = db_prepare(inv, &st,
		 "SELECT source, note FROM ledger WHERE instance_id = ? AND "
		 "t = ? AND state = 'unknown' ORDER BY id DESC LIMIT 1",
		 "reading the ledger", cause, "II", id, t)) != 0)
		return r;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		source = (const char *)sqlite3_column_text(st, 0);
		note = (const char *)sqlite3_column_text(st, 1);
	}
	if (note != NULL && *note != '\0')
		snprintf(buf, size, "%s", note);
	else if (source != NULL && strcmp(source, "observed") != 0)
		snprintf(buf, size, "%s", source);
	else
		snprintf(buf, size, "unreachable");
	r = db_finish(inv, st, rc, "reading the ledger", cause);
	return r < 0 ? r : 0;
}

/*
 * Turn state changes into billing intervals up to time end: each state
 * holds until the next change; released ends everything (no interval);
 * several changes at the same second keep the last. An observed running
 * right after an unknown stretch (the instance seen again) resumes the
 * run, not a new start (see billing.h). iv needs room for n intervals;
 * returns how many were written.
 */
size_t
ledger_intervals(const struct ledger_event *ev, size_t n, int64_t end,
    struct billing_interval *iv)
{
	size_t i, k = 0;
	int64_t to;

	for (i = 0; i < n; i++) {
		to = i + 1 < n ? ev[i + 1].t : end;
		if (to > end)
			to = end;
		if (to <= ev[i].t || strcmp(ev[i].state, "released") == 0)
			continue;
		iv[k].start = ev[i].t;
		iv[k].end = to;
		if (strcmp(ev[i].state, "running") == 0)
			iv[k].state = BILL_RUNNING;
		else if (strcmp(ev[i].state, "stopped") == 0)
			iv[k].state = BILL_STOPPED;
		else
			iv[k].state = BILL_UNKNOWN;
		iv[k].resumes = iv[k].state == BILL_RUNNING && k > 0 &&
		    iv[k - 1].state == BILL_UNKNOWN &&
		    iv[k - 1].end == iv[k].start &&
		    strcmp(ev[i].source, "observed") == 0;
		if (k > 0 && iv[k - 1].state == iv[k].state &&
		    iv[k - 1].end == iv[k].start && iv[k].state != BILL_RUNNING)
			iv[k - 1].end = iv[k].end;
		else
			k++;
	}
	return k;
}

/* Record an incident (restart, outage) of an instance. */
int
ledger_incident(struct inventory *inv, int64_t id, int64_t t, const char *kind,
    const char *detail, char **cause)
{
	return db_exec(inv,
	    "INSERT INTO incident (instance_id, t, kind, detail) VALUES "
	    "(?, ?, ?, ?)",
	    "recording an incident", cause, "IItt", id, t, kind, detail);
}

/*
 * What a contact saw of instance in at time now: reachable with a
 * container that started at raw_start on the instance's clock (0:
 * unknown; skew is instance - controller), or not. First
 * the stops gpufleet caused are settled (stoprequest.c: an unreachable
 * instance with a stop pending is stopped, not out); then only changes
 * are recorded: the first sighting (running since the container started,
 * clamped to when the rental began: LEDGER.md), a container start that
 * moved while nothing stopped the instance (an unexpected restart), an
 * instance going unreachable (unknown from then: an outage) and coming
 * back, a stopped one answering (running again: from its container's
 * start when that came after the stop, else from now). Rows dated after
 * now (the laptop's clock moved back) decide nothing.
 */
int
ledger_observe(struct inventory *inv, const struct instance *in, int64_t now,
    int64_t raw_start, int64_t skew, int reachable, char **cause)
{
	/* On this machine's clock; raw_start is the instance's. */
	int64_t container_start = raw_start != 0 ? raw_start - skew : 0;
	struct ledger_event *ev = NULL, *last;
	int64_t id = in->id, prev_start = 0, begin = ledger_begin(in);
	int64_t since = 0, t;
	size_t n = 0, i;
	int r;
	char detail[160];

	if ((r = ledger_events(inv, id, &ev, &n, cause)) != 0)
		return r;
	while (n > 0 && ev[n - 1].t > now)
		n--;
	/* Since when it runs: seen again after an outage is no new start. */
	for (i = n; i > 0 && since == 0; i--) {
		if (strcmp(ev[i - 1].state, "running") == 0 &&
		    (i < 2 || strcmp(ev[i - 2].state, "unknown") != 0 ||
			strcmp(ev[i - 2].source, "observed") != 0))
			since = ev[i - 1].t;
	}
	free(ev);
	ev = NULL;
	if ((r = stoprequest_settle(inv, in, now, container_start, reachable,
		 since, cause)) != 0 ||
	    (r = ledger_events(inv, id, &ev, &n, cause)) != 0)
		return r;
	while (n > 0 && ev[n - 1].t > now)
		n--;
	last = n > 0 ? &ev[n - 1] : NULL;
	if (!reachable) {
		if (last != NULL && strcmp(last->state, "running") == 0 &&
		    strcmp(last->source, "observed") == 0) {
			r = ledger_add(inv, id, now, "unknown", "observed",
			    "unreachable", cause);
			if (r == 0)
				r = ledger_incident(
				    inv, id, now, "outage_start", NULL, cause);
		}
		goto out;
	}
	/* The last observed container start, from the samples. */
	{
		sqlite3_stmt *st;
		if (db_prepare(inv, &st,
			"SELECT container_start FROM sample_host WHERE "
			"instance_id = ? AND t < ? AND container_start IS NOT "
			"NULL ORDER BY t DESC LIMIT 1",
			NULL, NULL, "II", id, now) == 0) {
			if (sqlite3_step(st) == SQLITE_ROW)
				prev_start = sqlite3_column_int64(st, 0);
			sqlite3_finalize(st);
		}
	}
	if (last == NULL) {
		t = container_start != 0 && container_start <= now
		    ? container_start
		    : now;
		if (t < begin) {
			char *when = instance_format_time(t);
			snprintf(detail, sizeof detail,
			    "first seen running (its container start %s is "
			    "before the rental began: clamped)",
			    when);
			free(when);
			t = begin;
		} else
			snprintf(detail, sizeof detail, "first seen running");
		r = ledger_add(
		    inv, id, t, "running", "observed", detail, cause);
		goto out;
	}
	if (strcmp(last->state, "unknown") == 0 &&
	    strcmp(last->source, "observed") == 0) {
		r = ledger_add(inv, id, now, "running", "observed",
		    "reachable again", cause);
		if (r == 0)
			r = ledger_incident(
			    inv, id, now, "outage_end", NULL, cause);
		if (r != 0)
			goto out;
		/* On: it may have restarted while out of reach. */
	} else if (strcmp(last->state, "stopped") == 0) {
		/* Stopped, and it answers: running again. */
		int ours = strcmp(last->source, "performed") == 0;
		if (container_start > last->t && container_start <= now)
			r = ledger_add(inv, id, container_start, "running",
			    "observed",
			    ours ? "running again"
				 : "running again (started outside gpufleet)",
			    cause);
		else
			r = ledger_add(inv, id, now, "running", "observed",
			    "answers while booked stopped: running", cause);
		goto out;
	}
	if (raw_start != 0 && prev_start != 0 && raw_start != prev_start) {
		/* Did gpufleet (or the user) stop it since the last start? */
		int stopped = 0;
		for (i = 0; i < n; i++) {
			if (ev[i].t > prev_start &&
			    strcmp(ev[i].state, "stopped") == 0)
				stopped = 1;
		}
		if (!stopped) {
			snprintf(detail, sizeof detail,
			    "container start moved "
			    "from %lld to %lld",
			    (long long)prev_start, (long long)raw_start);
			r = ledger_incident(
			    inv, id, container_start, "restart", detail, cause);
		}
	}
out:
	free(ev);
	return r;
}

/*
 * The laptop's clock against the latest time a contact was stored at: one
 * that moved back more than LEDGER_CLOCK_SLACK is said once per step (a
 * warning and an `events` entry), not booked per contact; rows dated
 * after now decide nothing meanwhile (ledger_observe).
 */
int
ledger_clock(struct inventory *inv, int64_t now, char **cause)
{
	sqlite3_stmt *st;
	int64_t high = 0, said = 0;
	char *why;
	int r, rc;

	if ((r = db_prepare(inv, &st,
		 "SELECT name, t FROM clock WHERE name IN ('high', 'said')",
		 "reading the clock", cause, "")) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (strcmp((const char *)sqlite3_column_text(st, 0), "high") ==
		    0)
			high = sqlite3_column_int64(st, 1);
		else
			said = sqlite3_column_int64(st, 1);
	}
	if ((r = db_finish(inv, st, rc, "reading the clock", cause)) < 0)
		return r;
	if (high - now > LEDGER_CLOCK_SLACK && said != high) {
		xasprintf(&why,
		    "the laptop's clock moved back %llds (from %lld to %lld); "
		    "what was booked after now decides nothing until the "
		    "clock passes it",
		    (long long)(high - now), (long long)high, (long long)now);
		warn_msg("%s", why);
		r = actionlog_add(
		    inv, now, "clock_back", NULL, NULL, why, NULL, NULL, cause);
		free(why);
		if (r != 0 ||
		    (r = db_exec(inv,
			 "INSERT OR REPLACE INTO clock (name, t) VALUES "
			 "('said', ?)",
			 "writing the clock", cause, "I", high)) < 0)
			return r;
	}
	if (now > high &&
	    (r = db_exec(inv,
		 "INSERT OR REPLACE INTO clock (name, t) VALUES ('high', ?)",
		 "writing the clock", cause, "I", now)) < 0)
		return r;
	return 0;
}

/*
 * When the rental of in began as far as the books allow: when it was
 * added, or earlier with `add --since`.
 */
int64_t
ledger_begin(const struct instance *in)
{
	return in->since != 0 && in->since < in->created_at ? in->since
							    : in->created_at;
}

/*
 * The share of sampled time in [from, to) during which every GPU was below
 * the idle threshold; NAN without samples. Raw samples count one each, a
 * 5-minute aggregate as many as it holds (idle only if its max was idle).
 */
static double
idle_fraction(
    struct inventory *inv, int64_t id, int64_t from, int64_t to, int threshold)
{
	sqlite3_stmt *st;
	double idle = 0, all = 0;

	if (db_prepare(inv, &st,
		"SELECT sum(w), sum(CASE WHEN u < ?4 THEN w ELSE 0 END) FROM ("
		"  SELECT t, 1 AS w, max(util) AS u FROM sample_gpu WHERE "
		"  instance_id = ?1 AND t >= ?2 AND t < ?3 GROUP BY t"
		"  UNION ALL SELECT t, max(n), max(util_max) FROM "
		"sample_gpu_5m "
		"  WHERE instance_id = ?1 AND t >= ?2 AND t < ?3 GROUP BY t)",
		NULL, NULL, "IIIi", id, from, to, threshold) != 0)
		return NAN;
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) != SQLITE_NULL) {
		all = sqlite3_column_double(st, 0);
		idle = sqlite3_column_double(st, 1);
	}
	sqlite3_finalize(st);
	return all > 0 ? idle / all : NAN;
}

static int
count_incidents(struct inventory *inv, int64_t id, const char *kind,
    int64_t from, int64_t to)
{
	sqlite3_stmt *st;
	int n = 0;

	if (db_prepare(inv, &st,
		"SELECT count(*) FROM incident WHERE instance_id = ? AND "
		"kind = ? AND t >= ? AND t < ?",
		NULL, NULL, "ItII", id, kind, from, to) != 0)
		return 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

/* One sample_host counter of bytes sent. */
struct tx_sample {
	int64_t t, v;
};

/*
 * Egress of the samples s (in time order, one window's) from the agent's
 * counters (resets handled): the bytes each sample adds are priced at the
 * egress price in force at its time, and each price's bytes rounded up on
 * their own; *total gets the bytes.
 */
static money_t
egress_cost(const struct tx_sample *s, size_t ns, const struct billing_price *p,
    size_t np, int64_t *total)
{
	int64_t prev = -1, bytes = 0, v, t;
	money_t sum = 0;
	size_t i = 0, k;

	*total = 0;
	for (k = 0; k < ns; k++) {
		t = s[k].t;
		v = s[k].v;
		if (i + 1 < np && p[i + 1].from <= t) {
			sum = billing_sat_add(
			    sum, billing_egress_cost(&p[i].rule, bytes));
			if (__builtin_add_overflow(*total, bytes, total))
				*total = INT64_MAX;
			bytes = 0;
			while (i + 1 < np && p[i + 1].from <= t)
				i++;
		}
		if (prev >= 0 && v >= 0 &&
		    __builtin_add_overflow(
			bytes, v >= prev ? v - prev : v, &bytes))
			bytes = INT64_MAX;
		prev = v;
	}
	if (__builtin_add_overflow(*total, bytes, total))
		*total = INT64_MAX;
	return billing_sat_add(sum, billing_egress_cost(&p[i].rule, bytes));
}

/*
 * What costing an instance reads, read once: its price now and its
 * history, its ledger, the times of its restarts, and its egress samples
 * in [from, to). Windows inside [from, to) are then costed in memory.
 */
struct books {
	const struct instance *in;
	struct billing_rule rule;
	int priced;
	struct billing_price *p, one; /* one: the price now, np 0 */
	size_t np;
	struct ledger_event *ev;
	size_t n;
	int64_t *restarts; /* in time order */
	size_t nrestarts;
	struct tx_sample *tx; /* in time order */
	size_t ntx;
	int borrowed; /* p, ev and restarts are a ledger_books' */
};

/*
 * Every instance's prices, ledger and incidents, read in one pass over
 * each table (in the table's own order, no index lookup per row) and
 * bucketed by instance id: bucket i of each is [off[i], off[i + 1]).
 */
struct ledger_books {
	size_t maxid;
	size_t *p_off, *ev_off, *rs_off, *out_off;
	struct billing_price *p; /* each bucket by valid_from */
	struct ledger_event *ev; /* each bucket by t, then id */
	int64_t *restarts;	 /* each bucket by t */
	int64_t *outages;	 /* outage_start times, each bucket by t */
	/* ledger_books_idle's window and each instance's sampled weights. */
	int64_t idle_from, idle_to;
	double *idle_all, *idle_below;
	int no_idle; /* ledger_books_no_idle */
};

/* Read an instance's books for windows in [from, to); books_free. */
static int
books_load(struct inventory *inv, const struct ledger_books *set, int64_t id,
    int64_t from, int64_t to, struct books *b, char **cause)
{
	sqlite3_stmt *st;
	size_t i = (size_t)id;
	int r;

	memset(b, 0, sizeof *b);
	if (set != NULL && id > 0 && i <= set->maxid) {
		b->borrowed = 1;
		b->p = set->p + set->p_off[i];
		b->np = set->p_off[i + 1] - set->p_off[i];
		b->ev = set->ev + set->ev_off[i];
		b->n = set->ev_off[i + 1] - set->ev_off[i];
		b->restarts = set->restarts + set->rs_off[i];
		b->nrestarts = set->rs_off[i + 1] - set->rs_off[i];
		billing_rule_init(&b->rule, "CNY");
		if ((b->priced = b->np > 0))
			b->rule = b->p[b->np - 1].rule;
	} else if ((r = ledger_price_get(
			inv, id, &b->rule, &b->priced, cause)) != 0 ||
	    (r = ledger_prices(inv, id, &b->p, &b->np, cause)) != 0 ||
	    (r = ledger_events(inv, id, &b->ev, &b->n, cause)) != 0)
		return r;
	b->one.from = 0;
	b->one.rule = b->rule;
	if (!b->borrowed &&
	    db_prepare(inv, &st,
		"SELECT t FROM incident WHERE instance_id = ? AND "
		"kind = 'restart' ORDER BY t",
		NULL, NULL, "I", id) == 0) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			b->restarts = xreallocarray(
			    b->restarts, b->nrestarts + 1, sizeof *b->restarts);
			b->restarts[b->nrestarts++] =
			    sqlite3_column_int64(st, 0);
		}
		sqlite3_finalize(st);
	}
	if (db_prepare(inv, &st,
		"SELECT t, net_tx_bytes FROM sample_host WHERE instance_id = ? "
		"AND t >= ? AND t < ? AND net_tx_bytes IS NOT NULL ORDER BY t",
		NULL, NULL, "III", id, from, to) == 0) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			b->tx = xreallocarray(b->tx, b->ntx + 1, sizeof *b->tx);
			b->tx[b->ntx].t = sqlite3_column_int64(st, 0);
			b->tx[b->ntx++].v = sqlite3_column_int64(st, 1);
		}
		sqlite3_finalize(st);
	}
	return 0;
}

static void
books_free(struct books *b)
{
	if (!b->borrowed) {
		free(b->p);
		free(b->ev);
		free(b->restarts);
	}
	free(b->tx);
	memset(b, 0, sizeof *b);
}

/*
 * The index of the first of n times at or after t: the times are sorted,
 * one every stride bytes from v (an array of them, or a member of an
 * array of structs).
 */
static size_t
first_at(const int64_t *v, size_t n, size_t stride, int64_t t)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (*(const int64_t *)((const char *)v + mid * stride) < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The books' ledger as billing intervals up to cut (ledger_intervals), a
 * resumed run that a restart came in the middle of made a new start. iv
 * needs room for b->n; returns how many were written.
 */
static size_t
books_intervals(const struct books *b, int64_t cut, struct billing_interval *iv)
{
	size_t i, k = ledger_intervals(b->ev, b->n, cut, iv);

	/* Seen again with a moved container start: a restart, a new start. */
	for (i = 1; i < k; i++) {
		if (iv[i].resumes &&
		    first_at(b->restarts, b->nrestarts, sizeof *b->restarts,
			iv[i].start + 1) > first_at(b->restarts, b->nrestarts,
					       sizeof *b->restarts,
					       iv[i - 1].start))
			iv[i].resumes = 0;
	}
	return k;
}

/* The egress of the books' samples in [from, to); *bytes gets the bytes. */
static money_t
books_egress(const struct books *b, int64_t from, int64_t to, int64_t *bytes)
{
	const struct billing_price *p = b->np > 0 ? b->p : &b->one;
	size_t np = b->np > 0 ? b->np : 1, lo = 0, hi = 0;

	if (b->ntx > 0) {
		lo = first_at(&b->tx[0].t, b->ntx, sizeof *b->tx, from);
		hi = first_at(&b->tx[0].t, b->ntx, sizeof *b->tx, to);
	}
	return egress_cost(b->tx + lo, hi - lo, p, np, bytes);
}

/*
 * Cost the books over [from, to) at time now (inside the span they were
 * read for): c's rule, states now, total, egress and amount; with lines,
 * the bill's lines and pieces as ledger_explain gives them.
 */
static int
books_window(const struct books *b, struct ledger_cost *c, int64_t from,
    int64_t to, int64_t now, struct billing_line **lines, size_t *nlines,
    struct billing_piece **pieces, size_t *npieces, char **cause)
{
	const struct billing_price *p = b->np > 0 ? b->p : &b->one;
	size_t np = b->np > 0 ? b->np : 1, k;
	struct billing_interval *iv;
	const struct ledger_event *ev = b->ev;
	char *why = NULL;
	int r;

	c->rule = b->rule;
	c->priced = b->priced;
	iv = xcalloc(b->n + 1, sizeof *iv);
	k = books_intervals(b, to < now ? to : now, iv);
	c->running_now = b->n > 0 && strcmp(ev[b->n - 1].state, "running") == 0;
	c->stopped_now = b->n > 0 && strcmp(ev[b->n - 1].state, "stopped") == 0;
	c->unknown_now = b->n > 0 && strcmp(ev[b->n - 1].state, "unknown") == 0;
	if (lines != NULL)
		r = billing_explain_prices(p, np, iv, k, from, to, &c->total,
		    lines, nlines, pieces, npieces, &why);
	else
		r = billing_window_prices(
		    p, np, iv, k, from, to, &c->total, &why);
	free(iv);
	if (r != 0) {
		xasprintf(cause, "%s: %s (see gpufleet ledger %s)", c->in->name,
		    why, c->in->name);
		free(why);
		return -GF_EDB;
	}
	c->egress = books_egress(b, from, to, &c->egress_bytes);
	c->amount = c->total.compute;
	if (billing_add(&c->amount, c->total.storage, cause) != 0 ||
	    billing_add(&c->amount, c->egress, cause) != 0)
		return -GF_EDB;
	return 0;
}

/*
 * Cost one instance over [from, to), all figures in c; c->rule is the
 * price now, the window is charged under the price history.
 */
int
ledger_cost(struct inventory *inv, const struct config *cf,
    struct ledger_cost *c, int64_t from, int64_t to, int64_t now, char **cause)
{
	return cost_of(
	    inv, NULL, cf, c, from, to, now, NULL, NULL, NULL, NULL, cause);
}

/* ledger_cost with the books of every instance read before (may be NULL). */
int
ledger_cost_from(struct inventory *inv, const struct ledger_books *set,
    const struct config *cf, struct ledger_cost *c, int64_t from, int64_t to,
    int64_t now, char **cause)
{
	return cost_of(
	    inv, set, cf, c, from, to, now, NULL, NULL, NULL, NULL, cause);
}

/*
 * ledger_cost with the bill's lines and their pieces under the price
 * history (billing_explain_prices): the lines' amounts and c->egress add
 * up to c->amount. Caller frees *lines and *pieces (also on failure).
 */
int
ledger_explain(struct inventory *inv, const struct config *cf,
    struct ledger_cost *c, int64_t from, int64_t to, int64_t now,
    struct billing_line **lines, size_t *nlines, struct billing_piece **pieces,
    size_t *npieces, char **cause)
{
	*lines = NULL;
	*nlines = 0;
	*pieces = NULL;
	*npieces = 0;
	return cost_of(inv, NULL, cf, c, from, to, now, lines, nlines, pieces,
	    npieces, cause);
}

/* ledger_cost, and with lines, ledger_explain. */
static int
cost_of(struct inventory *inv, const struct ledger_books *set,
    const struct config *cf, struct ledger_cost *c, int64_t from, int64_t to,
    int64_t now, struct billing_line **lines, size_t *nlines,
    struct billing_piece **pieces, size_t *npieces, char **cause)
{
	struct books b;
	size_t i = (size_t)c->in->id;
	int r;

	if ((r = books_load(inv, set, c->in->id, from, to, &b, cause)) != 0 ||
	    (r = books_window(&b, c, from, to, now, lines, nlines, pieces,
		 npieces, cause)) != 0) {
		books_free(&b);
		return r;
	}
	books_free(&b);
	if (set != NULL && set->no_idle)
		c->idle_frac = NAN;
	else if (set != NULL && set->idle_all != NULL &&
	    set->idle_from == from && set->idle_to == to && c->in->id > 0 &&
	    i <= set->maxid)
		c->idle_frac = set->idle_all[i] > 0
		    ? set->idle_below[i] / set->idle_all[i]
		    : NAN;
	else
		c->idle_frac = idle_fraction(
		    inv, c->in->id, from, to, cf->status_idle_util);
	/* Of the compute of sampled time: unknown stretches have no samples. */
	c->idle = isnan(c->idle_frac)
	    ? 0
	    : (money_t)ceil(
		  (double)(c->total.compute - c->total.unknown) * c->idle_frac);
	if (set != NULL && c->in->id > 0 && i <= set->maxid) {
		c->restarts = (int)count_in(set->restarts + set->rs_off[i],
		    set->rs_off[i + 1] - set->rs_off[i], from, to);
		c->outages = (int)count_in(set->outages + set->out_off[i],
		    set->out_off[i + 1] - set->out_off[i], from, to);
		return 0;
	}
	c->restarts = count_incidents(inv, c->in->id, "restart", from, to);
	c->outages = count_incidents(inv, c->in->id, "outage_start", from, to);
	return 0;
}

/* How many of the n sorted times v are in [from, to). */
static size_t
count_in(const int64_t *v, size_t n, int64_t from, int64_t to)
{
	if (n == 0)
		return 0;
	return first_at(v, n, sizeof *v, to) - first_at(v, n, sizeof *v, from);
}

/*
 * Spread the n rows (size bytes each, the instance id of row k in ids[k],
 * in the order read) into buckets by id, keeping that order within each:
 * *off gets maxid + 2 offsets. Caller frees *off and *out.
 */
static void
bucket(const int64_t *ids, const void *rows, size_t n, size_t size,
    size_t maxid, size_t **off, void **out)
{
	size_t *o = xcalloc(maxid + 2, sizeof *o), *at, k;
	char *v = xcalloc(n + 1, size);

	for (k = 0; k < n; k++)
		o[ids[k] + 1]++;
	for (k = 1; k < maxid + 2; k++)
		o[k] += o[k - 1];
	at = xcalloc(maxid + 1, sizeof *at);
	for (k = 0; k < n; k++)
		memcpy(v + (o[ids[k]] + at[ids[k]]++) * size,
		    (const char *)rows + k * size, size);
	free(at);
	*off = o;
	*out = v;
}

/* Append (id, row) to a growing pair of arrays of n, noting the largest id. */
#define BOOKS_PUSH(ids, rows, n, id, row, maxid)                               \
	do {                                                                   \
		if ((n) % 4096 == 0) {                                         \
			(ids) =                                                \
			    xreallocarray((ids), (n) + 4096, sizeof *(ids));   \
			(rows) =                                               \
			    xreallocarray((rows), (n) + 4096, sizeof *(rows)); \
		}                                                              \
		(ids)[(n)] = (id);                                             \
		(rows)[(n)++] = (row);                                         \
		if ((size_t)(id) > (maxid))                                    \
			(maxid) = (size_t)(id);                                \
	} while (0)

/*
 * Read every instance's prices, ledger and restart and outage incidents
 * at once, one pass over each table, for costing many instances
 * (ledger_cost_from, ledger_cost_windows); free with ledger_books_free.
 * An instance above the largest id read is read on its own as before.
 */
int
ledger_books_load(
    struct inventory *inv, struct ledger_books **out, char **cause)
{
	struct ledger_books *set = xcalloc(1, sizeof *set);
	struct billing_price *p = NULL, pr;
	struct ledger_event *ev = NULL, e;
	int64_t *pid = NULL, *eid = NULL, *rid = NULL, *oid = NULL;
	int64_t *rt = NULL, *ot = NULL, id, t;
	size_t np = 0, nev = 0, nr = 0, no = 0, k, j, m, n;
	sqlite3_stmt *st;
	const char *text;
	int rc, r;

	*out = NULL;
	if ((r = db_prepare(inv, &st,
		 "SELECT " PRICE_COLUMNS ", instance_id FROM instance_price "
		 "ORDER BY instance_id, valid_from",
		 "reading the prices", cause, "")) != 0)
		goto out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((id = sqlite3_column_int64(st, 9)) <= 0)
			continue;
		price_row(st, &pr);
		BOOKS_PUSH(pid, p, np, id, pr, set->maxid);
	}
	if ((r = db_finish(inv, st, rc, "reading the prices", cause)) < 0)
		goto out;
	/* The table's own order (id), which keeps same-second rows in it. */
	if ((r = db_prepare(inv, &st,
		 "SELECT instance_id, t, state, source FROM ledger ORDER BY id",
		 "reading the ledger", cause, "")) != 0)
		goto out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((id = sqlite3_column_int64(st, 0)) <= 0)
			continue;
		memset(&e, 0, sizeof e);
		e.t = sqlite3_column_int64(st, 1);
		if ((text = (const char *)sqlite3_column_text(st, 2)) != NULL)
			xstrlcpy(e.state, text, sizeof e.state);
		if ((text = (const char *)sqlite3_column_text(st, 3)) != NULL)
			xstrlcpy(e.source, text, sizeof e.source);
		BOOKS_PUSH(eid, ev, nev, id, e, set->maxid);
	}
	if ((r = db_finish(inv, st, rc, "reading the ledger", cause)) < 0)
		goto out;
	if ((r = db_prepare(inv, &st,
		 "SELECT instance_id, t, kind = 'restart' FROM incident WHERE "
		 "kind IN ('restart', 'outage_start') ORDER BY t, id",
		 "reading the incidents", cause, "")) != 0)
		goto out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((id = sqlite3_column_int64(st, 0)) <= 0)
			continue;
		t = sqlite3_column_int64(st, 1);
		if (sqlite3_column_int(st, 2))
			BOOKS_PUSH(rid, rt, nr, id, t, set->maxid);
		else
			BOOKS_PUSH(oid, ot, no, id, t, set->maxid);
	}
	if ((r = db_finish(inv, st, rc, "reading the incidents", cause)) < 0)
		goto out;
	bucket(
	    pid, p, np, sizeof *p, set->maxid, &set->p_off, (void **)&set->p);
	bucket(eid, ev, nev, sizeof *ev, set->maxid, &set->ev_off,
	    (void **)&set->ev);
	bucket(rid, rt, nr, sizeof *rt, set->maxid, &set->rs_off,
	    (void **)&set->restarts);
	bucket(oid, ot, no, sizeof *ot, set->maxid, &set->out_off,
	    (void **)&set->outages);
	/*
	 * Each instance's ledger by time, same-second entries in id order (as
	 * ledger_entries' ORDER BY t, id): a stable insertion sort, quick on
	 * a ledger written mostly in time order.
	 */
	for (k = 0; k <= set->maxid; k++) {
		struct ledger_event *v = set->ev + set->ev_off[k];
		n = set->ev_off[k + 1] - set->ev_off[k];
		for (j = 1; j < n; j++) {
			e = v[j];
			for (m = j; m > 0 && v[m - 1].t > e.t; m--)
				v[m] = v[m - 1];
			v[m] = e;
		}
	}
	*out = set;
	set = NULL;
	r = 0;
out:
	free(p);
	free(pid);
	free(ev);
	free(eid);
	free(rt);
	free(rid);
	free(ot);
	free(oid);
	ledger_books_free(set);
	return r;
}

/* One (instance, time) of GPU samples being summed by idle_add. */
struct idle_group {
	int64_t id, t;
	double w, u; /* the largest weight and numeric utilisation */
	int open, has_u;
	int has_text; /* a utilisation not a number: SQL orders it above */
};

/* Close g: its weight is sampled time, idle time if its max is below. */
static void
idle_close(struct ledger_books *set, struct idle_group *g, int threshold)
{
	if (!g->open)
		return;
	g->open = 0;
	if (g->id <= 0 || (size_t)g->id > set->maxid)
		return;
	set->idle_all[g->id] += g->w;
	if (g->has_u && !g->has_text && g->u < threshold)
		set->idle_below[g->id] += g->w;
}

/*
 * Sum the GPU samples (raw ones, k 0, weighing one each; aggregates, k 1,
 * as many as they hold) of [from, to) per instance and time, as
 * idle_fraction weighs them, from rows in key order (no GROUP BY: half the
 * time). A utilisation that is not a number (never stored by gpufleet) is
 * above any threshold, as SQL compares it there; at a weight that is not
 * one, *odd is set and nothing more summed.
 */
static int
idle_stream(struct inventory *inv, struct ledger_books *set, size_t k,
    int64_t from, int64_t to, int threshold, int *odd, char **cause)
{
	static const char *const sql[] = {
		"SELECT instance_id, t, 1, util FROM sample_gpu WHERE +t >= ?1 "
		"AND +t < ?2 ORDER BY instance_id, t",
		"SELECT instance_id, t, n, util_max FROM sample_gpu_5m WHERE "
		"+t >= ?1 AND +t < ?2 ORDER BY instance_id, t"
	};
	struct idle_group g = { 0, 0, 0, 0, 0, 0, 0 };
	sqlite3_stmt *st;
	int64_t id, t;
	double w, u;
	int rc, r, tw, tu;

	if ((r = db_prepare(inv, &st, sql[k], "reading the GPU samples", cause,
		 "II", from, to)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		tw = sqlite3_column_type(st, 2);
		tu = sqlite3_column_type(st, 3);
		if (tw == SQLITE_TEXT || tw == SQLITE_BLOB ||
		    tw == SQLITE_NULL) {
			*odd = 1;
			break;
		}
		id = sqlite3_column_int64(st, 0);
		t = sqlite3_column_int64(st, 1);
		w = sqlite3_column_double(st, 2);
		if (!g.open || id != g.id || t != g.t) {
			idle_close(set, &g, threshold);
			g.open = 1;
			g.id = id;
			g.t = t;
			g.w = w;
			g.has_u = g.has_text = 0;
		} else if (w > g.w)
			g.w = w;
		if (tu == SQLITE_TEXT || tu == SQLITE_BLOB)
			g.has_text = 1;
		else if (tu != SQLITE_NULL) {
			u = sqlite3_column_double(st, 3);
			if (!g.has_u || u > g.u)
				g.u = u;
			g.has_u = 1;
		}
	}
	if (rc == SQLITE_ROW) {
		sqlite3_finalize(st);
		return 0;
	}
	idle_close(set, &g, threshold);
	r = db_finish(inv, st, rc, "reading the GPU samples", cause);
	return r < 0 ? r : 0;
}

/*
 * Every instance's idle_fraction over [from, to) in one read of each
 * sample table, for ledger_cost_from over that window.
 */
int
ledger_books_idle(struct inventory *inv, struct ledger_books *set, int64_t from,
    int64_t to, int threshold, char **cause)
{
	static const char *const sql[] = {
		"SELECT instance_id, 1, max(util) < ?3 FROM sample_gpu WHERE "
		"+t >= ?1 AND +t < ?2 GROUP BY instance_id, t",
		"SELECT instance_id, max(n), max(util_max) < ?3 FROM "
		"sample_gpu_5m WHERE +t >= ?1 AND +t < ?2 GROUP BY "
		"instance_id, "
		"t"
	};
	sqlite3_stmt *st;
	int64_t id;
	double w;
	size_t k;
	int rc, r, odd = 0;

	free(set->idle_all);
	free(set->idle_below);
	set->idle_all = xcalloc(set->maxid + 1, sizeof *set->idle_all);
	set->idle_below = xcalloc(set->maxid + 1, sizeof *set->idle_below);
	set->idle_from = from;
	set->idle_to = to;
	/*
	 * Raw samples count one each, an aggregate as many as it holds, as
	 * idle_fraction weighs them; each table read in its key's order (+t:
	 * not through the time index, a seek per row), so nothing is sorted,
	 * and summed here. Weights are whole numbers, so the sums are exact
	 * in any order.
	 */
	for (k = 0; k < 2 && !odd; k++) {
		if ((r = idle_stream(
			 inv, set, k, from, to, threshold, &odd, cause)) != 0)
			return r;
	}
	if (!odd)
		return 0;
	/* A weight that is not a number: SQL's max and sums, grouped there. */
	memset(set->idle_all, 0, (set->maxid + 1) * sizeof *set->idle_all);
	memset(set->idle_below, 0, (set->maxid + 1) * sizeof *set->idle_below);
	for (k = 0; k < 2; k++) {
		if ((r = db_prepare(inv, &st, sql[k], "reading the GPU samples",
			 cause, "IIi", from, to, threshold)) != 0)
			return r;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			id = sqlite3_column_int64(st, 0);
			if (id <= 0 || (size_t)id > set->maxid ||
			    sqlite3_column_type(st, 1) == SQLITE_NULL)
				continue;
			w = sqlite3_column_double(st, 1);
			set->idle_all[id] += w;
			if (sqlite3_column_int(st, 2) == 1)
				set->idle_below[id] += w;
		}
		r = db_finish(inv, st, rc, "reading the GPU samples", cause);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * An instance's ledger in time order as ledger_events gives it, from the
 * books of every instance read before (set, may be NULL) where they hold
 * it. *ev (caller frees) gets *n events.
 */
int
ledger_events_from(struct inventory *inv, const struct ledger_books *set,
    int64_t id, struct ledger_event **ev, size_t *n, char **cause)
{
	size_t i = (size_t)id;

	if (set == NULL || id <= 0 || i > set->maxid)
		return ledger_events(inv, id, ev, n, cause);
	*n = set->ev_off[i + 1] - set->ev_off[i];
	*ev = xcalloc(*n + 1, sizeof **ev);
	if (*n > 0)
		memcpy(*ev, set->ev + set->ev_off[i], *n * sizeof **ev);
	return 0;
}

/*
 * For callers that read no idle figures (a provider's runway): costing
 * from set leaves idle_frac NAN and idle 0 instead of reading samples.
 */
void
ledger_books_no_idle(struct ledger_books *set)
{
	set->no_idle = 1;
}

void
ledger_books_free(struct ledger_books *set)
{
	if (set == NULL)
		return;
	free(set->idle_all);
	free(set->idle_below);
	free(set->p_off);
	free(set->ev_off);
	free(set->rs_off);
	free(set->out_off);
	free(set->p);
	free(set->ev);
	free(set->restarts);
	free(set->outages);
	free(set);
}

/*
 * What one instance costs in each window [bounds[k], bounds[k + 1]) for k
 * below nwin, each as ledger_cost's amount for it, from one read of its
 * books. rule gets its price now; ok[k] is 0 where window k could not be
 * costed (amounts[k] then 0).
 */
int
ledger_cost_windows(struct inventory *inv, const struct ledger_books *set,
    const struct instance *in, const int64_t *bounds, size_t nwin, int64_t now,
    struct billing_rule *rule, money_t *amounts, int *ok, char **cause)
{
	struct billing_interval *iv;
	struct billing_total *tot;
	struct ledger_cost c;
	struct books b;
	char *why = NULL;
	int64_t bytes;
	size_t k, nv;
	int r;

	if ((r = books_load(
		 inv, set, in->id, bounds[0], bounds[nwin], &b, cause)) != 0) {
		books_free(&b);
		return r;
	}
	*rule = b.rule;
	/*
	 * One pass over the ledger for all the windows: a window's figures
	 * do not depend on where the ledger is cut past its end (see
	 * billing.h), so the intervals cut at the last window's end are
	 * every window's. A ledger billing refuses is costed window by
	 * window instead, each window failing or not on its own as before.
	 */
	iv = xcalloc(b.n + 1, sizeof *iv);
	tot = xcalloc(nwin + 1, sizeof *tot);
	nv = books_intervals(&b, bounds[nwin] < now ? bounds[nwin] : now, iv);
	if (billing_windows_prices(b.np > 0 ? b.p : &b.one, b.np > 0 ? b.np : 1,
		iv, nv, bounds, nwin, tot, &why) == 0) {
		for (k = 0; k < nwin; k++) {
			amounts[k] = tot[k].compute;
			ok[k] = billing_add(
				    &amounts[k], tot[k].storage, &why) == 0 &&
			    billing_add(&amounts[k],
				books_egress(
				    &b, bounds[k], bounds[k + 1], &bytes),
				&why) == 0;
			if (!ok[k])
				amounts[k] = 0;
			free(why);
			why = NULL;
		}
		nwin = 0;
	}
	free(why);
	why = NULL;
	free(iv);
	free(tot);
	for (k = 0; k < nwin; k++) {
		memset(&c, 0, sizeof c);
		c.in = in;
		ok[k] = books_window(&b, &c, bounds[k], bounds[k + 1], now,
			    NULL, NULL, NULL, NULL, &why) == 0;
		amounts[k] = ok[k] ? c.amount : 0;
		free(why);
		why = NULL;
	}
	books_free(&b);
	return 0;
}

/* An instance's ledger rows in time order, with ids and notes. *out (free
 * with ledger_entries_free) gets *n rows. */
int
ledger_entries(struct inventory *inv, int64_t id, struct ledger_entry **out,
    size_t *n, char **cause)
{
	sqlite3_stmt *st;
	struct ledger_entry *v = NULL;
	size_t len = 0;
	int rc, r;

	if ((r = db_prepare(inv, &st,
		 "SELECT id, t, state, source, note FROM ledger WHERE "
		 "instance_id = ? ORDER BY t, id",
		 "reading the ledger", cause, "I", id)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		v = xreallocarray(v, len + 1, sizeof *v);
		v[len].id = sqlite3_column_int64(st, 0);
		v[len].t = sqlite3_column_int64(st, 1);
		snprintf(v[len].state, sizeof v[len].state, "%s",
		    sqlite3_column_text(st, 2));
		snprintf(v[len].source, sizeof v[len].source, "%s",
		    sqlite3_column_text(st, 3));
		v[len].note = sqlite3_column_type(st, 4) == SQLITE_NULL
		    ? NULL
		    : xstrdup((const char *)sqlite3_column_text(st, 4));
		len++;
	}
	if ((r = db_finish(inv, st, rc, "reading the ledger", cause)) < 0) {
		ledger_entries_free(v, len);
		return r;
	}
	*out = v;
	*n = len;
	return 0;
}

void
ledger_entries_free(struct ledger_entry *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i].note);
	free(v);
}

/*
 * Run one statement on ledger row entry (bound as ?1, t as ?2), whose
 * instance (any when id is 0, else it must be id's) goes in *owner and
 * the row as it was in *was (free was->note). A row that is not there,
 * or a release (undone only by re-adding the instance), is refused with
 * -GF_EUSAGE.
 */
static int
ledger_change(struct inventory *inv, int64_t id, int64_t entry, int64_t t,
    const char *sql, int64_t *owner, struct ledger_entry *was, char **cause)
{
	sqlite3_stmt *st;
	int r, found = 0;

	memset(was, 0, sizeof *was);
	if ((r = db_prepare(inv, &st,
		 "SELECT instance_id, t, state, source, note FROM ledger "
		 "WHERE id = ?1 AND (?2 = 0 OR instance_id = ?2)",
		 "reading the ledger", cause, "II", entry, id)) != 0)
		return r;
	if (sqlite3_step(st) == SQLITE_ROW) {
		found = 1;
		*owner = sqlite3_column_int64(st, 0);
		was->id = entry;
		was->t = sqlite3_column_int64(st, 1);
		snprintf(was->state, sizeof was->state, "%s",
		    sqlite3_column_text(st, 2));
		snprintf(was->source, sizeof was->source, "%s",
		    sqlite3_column_text(st, 3));
		was->note = sqlite3_column_type(st, 4) == SQLITE_NULL
		    ? NULL
		    : xstrdup((const char *)sqlite3_column_text(st, 4));
	}
	sqlite3_finalize(st);
	if (!found) {
		xasprintf(cause, "%s ledger entry %lld",
		    id != 0 ? "this instance has no" : "there is no",
		    (long long)entry);
		return -GF_EUSAGE;
	}
	if (strcmp(was->state, "released") == 0) {
		xasprintf(cause,
		    "ledger entry %lld is a release, which is not undone "
		    "here",
		    (long long)entry);
		free(was->note);
		was->note = NULL;
		return -GF_EUSAGE;
	}
	return db_exec(inv, sql, "writing the ledger", cause, "II", entry, t);
}

/*
 * Remove ledger row entry (a wrong observation), of instance id or of
 * any instance when id is 0; *owner and *was as ledger_change.
 */
int
ledger_remove(struct inventory *inv, int64_t id, int64_t entry, int64_t *owner,
    struct ledger_entry *was, char **cause)
{
	return ledger_change(inv, id, entry, 0,
	    "DELETE FROM ledger WHERE id = ?1 AND ?2 = 0", owner, was, cause);
}

/* Move ledger row entry to time t; id, *owner and *was as ledger_remove. */
int
ledger_amend(struct inventory *inv, int64_t id, int64_t entry, int64_t t,
    int64_t *owner, struct ledger_entry *was, char **cause)
{
	return ledger_change(inv, id, entry, t,
	    "UPDATE ledger SET t = ?2 WHERE id = ?1", owner, was, cause);
}

/*
 * Check that time t can go in the ledger of an instance created at
 * created (0: not known) at time now: not after now, and not more than
 * LEDGER_BACKDATE_MAX before it was added. Else -GF_EUSAGE.
 */
int
ledger_check_time(int64_t t, int64_t created, int64_t now, char **cause)
{
	char *when, *limit;

	if (t > now) {
		when = instance_format_time(t);
		xasprintf(cause, "time %s is in the future", when);
		free(when);
		return -GF_EUSAGE;
	}
	if (created != 0 && t < created - LEDGER_BACKDATE_MAX) {
		when = instance_format_time(t);
		limit = instance_format_time(created - LEDGER_BACKDATE_MAX);
		xasprintf(cause,
		    "time %s is more than 7 days before the instance was "
		    "added (earliest %s)",
		    when, limit);
		free(when);
		free(limit);
		return -GF_EUSAGE;
	}
	return 0;
}
