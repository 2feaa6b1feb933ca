/*
 * Cost per instance, provider and day, and advice, on a real SQLite file;
 * the month-end projection.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "advise.h"
#include "cost.h"
#include "status.h"

/* 2026-11-xx, UTC. */
#define T_NOV01 1793491200
#define T_DEC01 1796083200
#define T_NOV02 1793577600
#define T_NOV04 1793750400
#define T_NOV10 1794268800

struct proj_case {
	money_t total, burn;
	int64_t secs;
	int rc;
	money_t want;
};

/* Burn per day: 864000 is 86.40 a day, 3.60 an hour. */
static const struct proj_case proj_cases[] = {
	{ 0, 0, 3600, 0, 0 },
	{ 100, 864000, 1800, 0, 18100 },
	{ 100, 864000, 0, 0, 100 },
	{ 5, 1, 1, 0, 6 }, /* 1/86400 of a minor unit rounds up */
	{ BILLING_MONEY_MAX - 1, 240000, 3600, -1, 0 },
};

START_TEST(test_projection)
{
	const struct proj_case *c = &proj_cases[_i];
	char *cause = NULL;
	money_t got = 0;

	ck_assert_int_eq(
	    cost_projection(c->total, c->burn, c->secs, &got, &cause), c->rc);
	if (c->rc == 0)
		ck_assert_int_eq(got, c->want);
	else
		ck_assert_ptr_nonnull(cause);
	free(cause);
}
END_TEST

START_TEST(test_month_start)
{
	ck_assert_int_eq(cost_month_start(1794744000, 0), T_NOV01);
	ck_assert_int_eq(cost_month_start(1794744000, 1), T_DEC01);
	ck_assert_int_eq(cost_month_start(1798761599, 1), 1798761600);
}
END_TEST

/* A database in a fresh directory, and the default configuration. */
struct fixture {
	char dir[40];
	struct inventory *inv;
	struct config cf;
};

static void
fixture_open(struct fixture *f)
{
	char path[64], *cause = NULL;

	snprintf(f->dir, sizeof f->dir, "/tmp/gpufleet-cost.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	snprintf(path, sizeof path, "%s/fleet.db", f->dir);
	ck_assert_int_eq(inventory_open(path, &f->inv, &cause), 0);
	config_defaults(&f->cf);
}

static void
fixture_close(struct fixture *f, struct instance *list, size_t n)
{
	char cmd[64];

	instance_free_array(list, n);
	config_clear(&f->cf);
	inventory_close(f->inv);
	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Add an instance priced by fields (name, value pairs, then NULL). */
static void
add_instance(struct inventory *inv, struct instance *in, const char *name,
    const char *provider, const char *const *fields)
{
	struct billing_rule rule;
	char *cause = NULL;
	int set;

	instance_init(in);
	in->name = strdup(name);
	in->host = strdup("10.0.0.1");
	free(in->provider);
	in->provider = strdup(provider);
	in->created_at = 1;
	ck_assert_int_eq(inventory_add(inv, in, &cause), 0);
	billing_rule_init(&rule, "CNY");
	for (; fields[0] != NULL; fields += 2)
		ck_assert_int_eq(ledger_price_field(
				     &rule, fields[0], fields[1], &set, &cause),
		    0);
	ck_assert_int_eq(ledger_price_put(inv, in->id, &rule, &cause), 0);
}

/* Stated: running from start, and stopped at end unless it is 0. */
static void
add_run(struct inventory *inv, int64_t id, int64_t start, int64_t end)
{
	char *cause = NULL;

	ck_assert_int_eq(
	    ledger_add(inv, id, start, "running", "stated", NULL, &cause), 0);
	if (end != 0)
		ck_assert_int_eq(
		    ledger_add(inv, id, end, "stopped", "stated", NULL, &cause),
		    0);
}

/*
 * a1 (p1, 3.60 CNY/h per second) runs 11-02 23:00 to 11-03 01:00, across
 * midnight; v1 (p2, 1 USD/h per started hour) runs 30 minutes on 11-03.
 */
START_TEST(test_by_day_and_provider)
{
	static const char *const a1_price[] = { "price", "3.60/h", "billing",
		"second", NULL };
	static const char *const v1_price[] = { "price", "1/h", "currency",
		"USD", "billing", "hour", NULL };
	struct fixture f;
	struct inventory *inv;
	struct instance *list = calloc(2, sizeof *list);
	char *cause = NULL;
	struct cost_report rep;
	struct cost_day *days;
	struct cost_group *groups;
	size_t ndays, ngroups;

	fixture_open(&f);
	inv = f.inv;
	add_instance(inv, &list[0], "a1", "p1", a1_price);
	add_instance(inv, &list[1], "v1", "p2", v1_price);
	add_run(inv, list[0].id, 1793660400, 1793667600);
	add_run(inv, list[1].id, 1793700000, 1793701800);

	ck_assert_int_eq(cost_by_instance(inv, &f.cf, list, 2, T_NOV02, T_NOV04,
			     T_NOV10, &rep, &cause),
	    0);
	ck_assert_int_eq(rep.rows[0].amount, 72000);
	ck_assert_int_eq(rep.rows[1].amount, 10000);
	ck_assert_uint_eq(rep.ntotals, 2);
	ck_assert_str_eq(rep.totals[0].currency, "CNY");
	ck_assert_int_eq(rep.totals[0].amount, 72000);
	ck_assert_str_eq(rep.totals[1].currency, "USD");
	ck_assert_int_eq(rep.totals[1].amount, 10000);
	/* The window ended days before now: nothing to project. */
	ck_assert_int_eq(rep.projecting, 0);

	ck_assert_int_eq(
	    cost_by_day(inv, &f.cf, &rep, &days, &ndays, &cause), 0);
	ck_assert_uint_eq(ndays, 4);
	ck_assert_str_eq(days[0].day, "2026-11-02");
	ck_assert_str_eq(days[0].currency, "CNY");
	ck_assert_int_eq(days[0].amount, 36000);
	ck_assert_str_eq(days[1].day, "2026-11-02");
	ck_assert_str_eq(days[1].currency, "USD");
	ck_assert_int_eq(days[1].amount, 0);
	ck_assert_str_eq(days[2].day, "2026-11-03");
	ck_assert_int_eq(days[2].amount, 36000);
	ck_assert_str_eq(days[3].day, "2026-11-03");
	ck_assert_str_eq(days[3].currency, "USD");
	ck_assert_int_eq(days[3].amount, 10000);
	free(days);

	ck_assert_int_eq(cost_by_provider(&rep, &groups, &ngroups, &cause), 0);
	ck_assert_uint_eq(ngroups, 2);
	ck_assert_str_eq(groups[0].provider, "p1");
	ck_assert_int_eq(groups[0].instances, 1);
	ck_assert_int_eq(groups[0].running_secs, 7200);
	ck_assert_int_eq(groups[0].amount, 72000);
	ck_assert_str_eq(groups[1].provider, "p2");
	ck_assert_str_eq(groups[1].currency, "USD");
	ck_assert_int_eq(groups[1].running_secs, 1800);
	ck_assert_int_eq(groups[1].amount, 10000);
	free(groups);
	cost_report_free(&rep);

	/* Still running at now: projected to the month end at 3.60/h. */
	add_run(inv, list[0].id, T_NOV10 - 3600, 0);
	ck_assert_int_eq(cost_by_instance(inv, &f.cf, list, 1, T_NOV01, T_NOV10,
			     T_NOV10, &rep, &cause),
	    0);
	ck_assert_int_eq(rep.projecting, 1);
	ck_assert_int_eq(rep.month_end, T_DEC01);
	ck_assert_int_eq(rep.totals[0].amount, 72000 + 36000);
	ck_assert_int_eq(rep.totals[0].burn_per_hour, 36000);
	ck_assert_int_eq(rep.totals[0].projected,
	    72000 + 36000 + 36000 * ((T_DEC01 - T_NOV10) / 3600));
	cost_report_free(&rep);

	fixture_close(&f, list, 2);
}
END_TEST

/*
 * a2 ran from 20 days ago to 6 days ago and pays storage while stopped;
 * autodl releases after 4 days. v1 has run for an hour at 1 USD/h on a
 * balance of 2 USD stated then: 1 USD left, an hour to go.
 */
START_TEST(test_advice)
{
	static const char *const a2_price[] = { "price", "2/h", "stopped_price",
		"24/day", NULL };
	static const char *const v1_price[] = { "price", "1/h", "currency",
		"USD", NULL };
	struct fixture f;
	struct inventory *inv;
	struct instance *list = calloc(2, sizeof *list);
	struct provider_change chg;
	char *cause = NULL;
	struct advice *v;
	size_t n;

	fixture_open(&f);
	inv = f.inv;
	add_instance(inv, &list[0], "a2", "autodl", a2_price);
	add_instance(inv, &list[1], "v1", "vast", v1_price);
	add_run(inv, list[0].id, T_NOV10 - 20 * 86400, T_NOV10 - 6 * 86400);
	add_run(inv, list[1].id, T_NOV10 - 3600, 0);
	memset(&chg, 0, sizeof chg);
	chg.set_release = 1;
	chg.release_after_days = 4;
	ck_assert_int_eq(provider_write(inv, "autodl", 1, &chg, &cause), 0);
	memset(&chg, 0, sizeof chg);
	chg.currency = "USD";
	chg.set_balance = 1;
	chg.balance = 20000;
	chg.balance_at = T_NOV10 - 3600;
	ck_assert_int_eq(provider_write(inv, "vast", 1, &chg, &cause), 0);
	/* Adding one twice is refused, naming it. */
	ck_assert_int_eq(
	    provider_write(inv, "vast", 1, &chg, &cause), -GF_EUSAGE);
	ck_assert_str_eq(cause, "provider 'vast' exists (use provider set)");
	free(cause);
	cause = NULL;

	ck_assert_int_eq(
	    advise_run(inv, &f.cf, list, 2, T_NOV10, &v, &n, &cause), 0);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(v[0].kind, "stopped");
	ck_assert_str_eq(v[0].name, "a2");
	ck_assert_str_eq(v[0].message,
	    "stopped for 6d00h and paying storage (144.00 CNY so far); "
	    "release it if it is not coming back");
	ck_assert_str_eq(v[1].kind, "release");
	ck_assert_str_eq(v[1].message,
	    "stopped 6 days; autodl releases instances stopped 4 days "
	    "(data lost)");
	ck_assert_str_eq(v[2].kind, "availability");
	ck_assert_str_eq(v[2].name, "autodl");
	ck_assert_str_eq(v[3].kind, "availability");
	ck_assert_str_eq(v[3].name, "vast");
	ck_assert_int_eq(advise_counts(&v[3]), 0);
	ck_assert_str_eq(v[4].kind, "runway");
	ck_assert_str_eq(v[4].name, "vast");
	ck_assert_str_eq(v[4].message,
	    "1.00 USD left runs out in 1h00m: top up or stop instances");
	ck_assert_int_eq(advise_counts(&v[4]), 1);
	advise_free(v, n);

	fixture_close(&f, list, 2);
}
END_TEST

/* p's burn and runway over the first n of list, one stopped among them. */
static void
check_runway(struct fixture *f, const struct instance *list, size_t n,
    struct provider_info *p, int64_t now, money_t per_day, money_t per_hour,
    int running, int64_t runway)
{
	char *cause = NULL;

	ck_assert_int_eq(
	    cost_provider_runway(f->inv, &f->cf, list, n, p, now, 0, &cause),
	    0);
	ck_assert_int_eq(p->burn_per_day, per_day);
	ck_assert_int_eq(p->burn, per_hour);
	ck_assert_int_eq(p->running, running);
	ck_assert_int_eq(p->stopped, 1);
	ck_assert_int_eq(p->runway, runway);
}

/*
 * Storage while stopped is in the burn, the projection and the runway.
 * s1 (4.9783/h per second, storage 0.5/day) ran 2 h from 12-01 00:00 and
 * has been stopped since; now is 12-01 10:48 (38880 s in), 30.55 days
 * before the month ends (31 * 86400 - 38880 = 2639520 s).
 *   compute 4.9783 * 2 = 9.9566; storage 0.5 * 31680 s / 86400 =
 *   0.18333 -> 0.1834 (rounded up): month to date 10.14.
 *   Projected by hand: 10.14 + 0.5 x 30.55 days = 25.42
 *   (101400 + 5000 * 2639520 / 86400 = 101400 + 152750 = 254150,
 *   25.415 shown half away from zero as 25.42), not 10.14 at a burn of 0.
 */
START_TEST(test_stopped_burn)
{
	static const char *const s1_price[] = { "price", "4.9783/h", "billing",
		"second", "stopped_price", "0.5/day", NULL };
	static const char *const r1_price[] = { "price", "4.98/h", NULL };
	const int64_t now = T_DEC01 + 38880;
	struct fixture f;
	struct inventory *inv;
	struct instance *list = calloc(2, sizeof *list);
	struct provider_info *pv;
	struct provider_change chg;
	struct cost_report rep;
	char *cause = NULL, *shown;
	size_t np;

	fixture_open(&f);
	inv = f.inv;
	add_instance(inv, &list[0], "s1", "autodl", s1_price);
	add_run(inv, list[0].id, T_DEC01, T_DEC01 + 7200);
	ck_assert_int_eq(cost_by_instance(inv, &f.cf, list, 1, T_DEC01, now,
			     now, &rep, &cause),
	    0);
	ck_assert_int_eq(rep.rows[0].total.compute, 99566);
	ck_assert_int_eq(rep.rows[0].total.storage, 1834);
	ck_assert_int_eq(rep.totals[0].amount, 101400);
	ck_assert_int_eq(rep.projecting, 1);
	ck_assert_int_eq(rep.month_end - now, 2639520);
	/* 0.5/day; shown per hour 5000 / 24 = 208.33 -> 209 (0.02). */
	ck_assert_int_eq(rep.totals[0].burn_per_day, 5000);
	ck_assert_int_eq(rep.totals[0].burn_per_hour, 209);
	ck_assert_int_eq(rep.totals[0].projected, 254150);
	shown = billing_format(rep.totals[0].projected, "CNY");
	ck_assert_str_eq(shown, "25.42 CNY");
	free(shown);
	cost_report_free(&rep);

	/*
	 * A balance of 20 CNY stated now, only storage burning: 200000 *
	 * 86400 / 5000 = 3456000 s (40 days), not "never".
	 */
	memset(&chg, 0, sizeof chg);
	chg.set_balance = 1;
	chg.balance = 200000;
	chg.balance_at = now;
	ck_assert_int_eq(provider_write(inv, "autodl", 1, &chg, &cause), 0);
	ck_assert_int_eq(provider_list(inv, &pv, &np, &cause), 0);
	ck_assert_uint_eq(np, 1);
	check_runway(&f, list, 1, &pv[0], now, 5000, 209, 0, 3456000);
	ck_assert_int_eq(pv[0].left, 200000);

	/*
	 * And r1 running at 4.98/h on the same balance: 4.98 * 24 = 119.52
	 * a day, burn 1195200 + 5000 = 1200200 a day (5.0009 an hour ->
	 * 50009); runway 200000 * 86400 / 1200200 = 14397.6 -> 14397 s.
	 */
	add_instance(inv, &list[1], "r1", "autodl", r1_price);
	add_run(inv, list[1].id, now - 3600, 0);
	check_runway(&f, list, 2, &pv[0], now, 1200200, 50009, 1, 14397);
	provider_free(pv, np);
	fixture_close(&f, list, 2);
}
END_TEST

/* A ledger row as status observes it: state at t with note. */
static void
observe(struct inventory *inv, int64_t id, int64_t t, const char *state,
    const char *note)
{
	char *cause = NULL;

	ck_assert_int_eq(
	    ledger_add(inv, id, t, state, "observed", note, &cause), 0);
}

/*
 * When gpufleet does not know, the money counts as billing. u1 (3.60 CNY/h
 * per started hour) was seen running from 11-02 00:00, unreachable from
 * 00:30, reachable again at 01:06:40 (4000 s), stopped (stated) at
 * 01:23:20 (5000 s): one run of 5000 s, 2 hours, 72000, of which the
 * second hour, starting at 01:00 in the unknown stretch, 36000. (Before:
 * 36000 + a new start's hour 36000, the unknown stretch free.)
 */
START_TEST(test_unknown)
{
	static const char *const price[] = { "price", "3.60/h", "billing",
		"hour", NULL };
	struct fixture f;
	struct inventory *inv;
	struct instance *list = calloc(2, sizeof *list);
	struct cost_report rep;
	struct cost_unknown *u;
	struct provider_info *pv;
	struct provider_change chg;
	char *cause = NULL;
	size_t n, np;

	fixture_open(&f);
	inv = f.inv;
	add_instance(inv, &list[0], "u1", "p1", price);
	observe(inv, list[0].id, T_NOV02, "running", "first seen running");
	observe(inv, list[0].id, T_NOV02 + 1800, "unknown", "unreachable");
	observe(inv, list[0].id, T_NOV02 + 4000, "running", "reachable again");
	ck_assert_int_eq(ledger_add(inv, list[0].id, T_NOV02 + 5000, "stopped",
			     "stated", NULL, &cause),
	    0);
	ck_assert_int_eq(cost_by_instance(inv, &f.cf, list, 1, T_NOV02, T_NOV04,
			     T_NOV10, &rep, &cause),
	    0);
	ck_assert_int_eq(rep.rows[0].amount, 72000);
	ck_assert_int_eq(rep.rows[0].total.unknown, 36000);
	ck_assert_int_eq(rep.rows[0].total.unknown_secs, 2200);
	ck_assert_int_eq(rep.rows[0].total.running_secs, 2800);
	ck_assert_int_eq(rep.rows[0].total.starts, 1);
	cost_report_free(&rep);
	ck_assert_int_eq(cost_unknown_stretches(inv, &list[0], T_NOV02, T_NOV04,
			     T_NOV10, &u, &n, &cause),
	    0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(u[0].start, T_NOV02 + 1800);
	ck_assert_int_eq(u[0].end, T_NOV02 + 4000);
	ck_assert_int_eq(u[0].secs, 2200);
	ck_assert_int_eq(u[0].ongoing, 0);
	ck_assert_str_eq(u[0].why, "unreachable");
	free(u);

	/* Back with a moved container start (a restart): a new start, its
	   own hour. 4000 s through the unknown stretch, 2 hours; 1000 s
	   after, 1 hour: 108000. */
	ck_assert_int_eq(ledger_incident(inv, list[0].id, T_NOV02 + 3000,
			     "restart", "container start moved", &cause),
	    0);
	ck_assert_int_eq(cost_by_instance(inv, &f.cf, list, 1, T_NOV02, T_NOV04,
			     T_NOV10, &rep, &cause),
	    0);
	ck_assert_int_eq(rep.rows[0].amount, 108000);
	ck_assert_int_eq(rep.rows[0].total.unknown, 36000);
	ck_assert_int_eq(rep.rows[0].total.starts, 2);
	cost_report_free(&rep);

	/*
	 * u2 on p2, seen running an hour ago and unreachable for the last
	 * 30 min: its hour (36000) so far, and it burns its price, 3.60/h
	 * (864000 a day), in the projection and the provider's runway: 10.00
	 * stated an hour ago, 6.40 left, 1h46m40s (6400 s) at 3.60/h.
	 */
	add_instance(inv, &list[1], "u2", "p2", price);
	observe(inv, list[1].id, T_NOV10 - 3600, "running", "first seen");
	observe(inv, list[1].id, T_NOV10 - 1800, "unknown", "unreachable");
	ck_assert_int_eq(cost_by_instance(inv, &f.cf, list + 1, 1, T_NOV01,
			     T_NOV10, T_NOV10, &rep, &cause),
	    0);
	ck_assert_int_eq(rep.rows[0].unknown_now, 1);
	ck_assert_int_eq(rep.rows[0].amount, 36000);
	ck_assert_int_eq(rep.rows[0].total.unknown, 0);
	ck_assert_int_eq(cost_burn_per_day(&rep.rows[0]), 864000);
	ck_assert_int_eq(rep.totals[0].burn_per_hour, 36000);
	ck_assert_int_eq(rep.totals[0].projected,
	    36000 + 36000 * ((T_DEC01 - T_NOV10) / 3600));
	cost_report_free(&rep);
	ck_assert_int_eq(cost_unknown_stretches(inv, &list[1], T_NOV01, T_NOV10,
			     T_NOV10, &u, &n, &cause),
	    0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(u[0].ongoing, 1);
	ck_assert_int_eq(u[0].secs, 1800);
	free(u);

	memset(&chg, 0, sizeof chg);
	chg.set_balance = 1;
	chg.balance = 100000;
	chg.balance_at = T_NOV10 - 3600;
	ck_assert_int_eq(provider_write(inv, "p2", 1, &chg, &cause), 0);
	ck_assert_int_eq(provider_list(inv, &pv, &np, &cause), 0);
	ck_assert_uint_eq(np, 1);
	ck_assert_int_eq(cost_provider_runway(inv, &f.cf, list + 1, 1, &pv[0],
			     T_NOV10, 0, &cause),
	    0);
	ck_assert_int_eq(pv[0].left, 64000);
	ck_assert_int_eq(pv[0].burn_per_day, 864000);
	ck_assert_int_eq(pv[0].running, 1);
	ck_assert_int_eq(pv[0].runway, 6400);
	provider_free(pv, np);
	fixture_close(&f, list, 2);
}
END_TEST

/*
 * The unknown stretches from the books of every instance are those read
 * one by one, each with its why: the note of the entry that began it, its
 * source if stated without a note, else "unreachable".
 */
START_TEST(test_unknown_books)
{
	static const char *const price[] = { "price", "3.60/h", NULL };
	struct fixture f;
	struct inventory *inv;
	struct instance *list = calloc(2, sizeof *list);
	struct ledger_books *books;
	struct cost_unknown *u, *w;
	char *cause = NULL;
	size_t n, nw, i, k;

	fixture_open(&f);
	inv = f.inv;
	add_instance(inv, &list[0], "b1", "p1", price);
	add_instance(inv, &list[1], "b2", "p1", price);
	for (k = 0; k < 2; k++) {
		observe(inv, list[k].id, T_NOV02, "running", "seen");
		observe(inv, list[k].id, T_NOV02 + 1800, "unknown", NULL);
		observe(inv, list[k].id, T_NOV02 + 4000, "running", "seen");
		ck_assert_int_eq(
		    ledger_add(inv, list[k].id, T_NOV02 + 5000, "unknown",
			"stated", "lost the key", &cause),
		    0);
		ck_assert_int_eq(ledger_add(inv, list[k].id, T_NOV02 + 6000,
				     "stopped", "stated", NULL, &cause),
		    0);
		ck_assert_int_eq(ledger_add(inv, list[k].id, T_NOV02 + 7000,
				     "unknown", "stated", NULL, &cause),
		    0);
	}
	ck_assert_int_eq(ledger_books_load(inv, &books, &cause), 0);
	for (k = 0; k < 2; k++) {
		ck_assert_int_eq(
		    cost_unknown_stretches_from(inv, books, &list[k], T_NOV02,
			T_NOV04, T_NOV10, &u, &n, &cause),
		    0);
		ck_assert_int_eq(cost_unknown_stretches(inv, &list[k], T_NOV02,
				     T_NOV04, T_NOV10, &w, &nw, &cause),
		    0);
		ck_assert_uint_eq(n, 3);
		ck_assert_uint_eq(nw, n);
		ck_assert_str_eq(u[0].why, "unreachable");
		ck_assert_str_eq(u[1].why, "lost the key");
		ck_assert_str_eq(u[2].why, "stated");
		for (i = 0; i < n; i++) {
			ck_assert_int_eq(u[i].start, w[i].start);
			ck_assert_int_eq(u[i].end, w[i].end);
			ck_assert_int_eq(u[i].secs, w[i].secs);
			ck_assert_int_eq(u[i].ongoing, w[i].ongoing);
			ck_assert_str_eq(u[i].why, w[i].why);
		}
		free(u);
		free(w);
	}
	ledger_books_free(books);
	fixture_close(&f, list, 2);
}
END_TEST

/* The monthly advice of the only instance in v. */
static const struct advice *
monthly_of(const struct advice *v, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(v[i].kind, "monthly") == 0 &&
		    strcmp(v[i].name, name) == 0)
			return &v[i];
	}
	ck_abort_msg("no monthly advice for %s", name);
	return NULL;
}

/*
 * advise on young instances uses the span observed, not 7 days. All at
 * 4.98/h with a 2,599 monthly plan; break-even 2599 / 4.98 / 30 = 17.396
 * h/day.
 *   y1: rented 2 days ago, always on: 24 h/day over 2.0 days; by hand
 *       24 x 4.98 x 30 = 3,585.60 against a 2,599 plan saves 986.60.
 *   y2: rented 2 days ago, ran the first day only: 12 h/day; 12 x 4.98 x
 *       30 = 1,792.80, so the plan costs 2599 - 1792.80 = 806.20 more.
 *   y3: rented 6 hours ago, always on: 24 h/day over 0.25 days, thin.
 */
START_TEST(test_advise_young)
{
	static const char *const price[] = { "price", "4.98/h", "monthly_price",
		"2599", NULL };
	struct fixture f;
	struct instance *list = calloc(3, sizeof *list);
	const struct advice *a;
	struct advice *v;
	char *cause = NULL;
	size_t n;

	fixture_open(&f);
	add_instance(f.inv, &list[0], "y1", "p", price);
	add_instance(f.inv, &list[1], "y2", "p", price);
	add_instance(f.inv, &list[2], "y3", "p", price);
	list[0].created_at = list[1].created_at = T_NOV10 - 2 * 86400;
	list[2].created_at = T_NOV10 - 6 * 3600;
	add_run(f.inv, list[0].id, T_NOV10 - 2 * 86400, 0);
	add_run(f.inv, list[1].id, T_NOV10 - 2 * 86400, T_NOV10 - 86400);
	add_run(f.inv, list[2].id, T_NOV10 - 6 * 3600, 0);
	ck_assert_int_eq(
	    advise_run(f.inv, &f.cf, list, 3, T_NOV10, &v, &n, &cause), 0);

	a = monthly_of(v, n, "y1");
	ck_assert_str_eq(a->message,
	    "used 24.0 h/day over 2.0 days of evidence, break-even 17.4 "
	    "h/day: the monthly plan saves 986.60 CNY/month over hourly "
	    "(3,585.60 CNY for 30 days at that use)");
	ck_assert_int_eq(a->has_monthly, 1);
	ck_assert_int_eq(a->evidence_s, 2 * 86400);
	ck_assert_int_eq(a->monthly.hourly_month, 35856000);
	ck_assert_int_eq(a->monthly.monthly_price, 25990000);
	ck_assert_int_eq(a->monthly.savings, 9866000);

	a = monthly_of(v, n, "y2");
	ck_assert_str_eq(a->message,
	    "used 12.0 h/day over 2.0 days of evidence, break-even 17.4 "
	    "h/day: the monthly plan costs 806.20 CNY/month more than hourly "
	    "(1,792.80 CNY for 30 days at that use)");
	ck_assert_int_eq(a->monthly.savings, -8062000);

	a = monthly_of(v, n, "y3");
	ck_assert_str_eq(a->message,
	    "used 24.0 h/day over 0.2 days of evidence (thin: under a day), "
	    "break-even 17.4 h/day: the monthly plan saves 986.60 CNY/month "
	    "over hourly (3,585.60 CNY for 30 days at that use)");
	ck_assert_int_eq(a->evidence_s, 6 * 3600);
	advise_free(v, n);
	fixture_close(&f, list, 3);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("cost");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	setenv("TZ", "UTC", 1);
	tzset();
	tcase_add_loop_test(
	    tc, test_projection, 0, sizeof proj_cases / sizeof proj_cases[0]);
	tcase_add_test(tc, test_month_start);
	tcase_add_test(tc, test_by_day_and_provider);
	tcase_add_test(tc, test_advice);
	tcase_add_test(tc, test_stopped_burn);
	tcase_add_test(tc, test_unknown);
	tcase_add_test(tc, test_unknown_books);
	tcase_add_test(tc, test_advise_young);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
