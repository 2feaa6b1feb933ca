/*
 * Budget guards (controller/guard.c) on a real SQLite file with
 * instances, prices, ledger entries and a provider balance: caps per day,
 * per month and since added, each in the instance's currency; a runway
 * below its minimum; a hit fires once per period and again in the next;
 * released instances are ignored; a dry run changes nothing; guard_stop
 * runs the child and stores its result per host; a stop whose runner
 * died before its result was stored is resumed, one whose runner lives
 * is not.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "guard.h"
#include "ledger.h"
#include "actionlog.h"
#include "provider.h"
#include "schedrun.h"
#include "status.h"

/* 2026-12-01T00:00:00Z. */
#define T_DEC01 1796083200

static struct inventory *inv;
static struct config cf;
static char dir[40], path[64];

static void
setup(void)
{
	char *cause = NULL;

	snprintf(dir, sizeof dir, "/tmp/gpufleet-guard.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	config_defaults(&cf);
}

static void
teardown(void)
{
	char cmd[64];

	config_clear(&cf);
	inventory_close(inv);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/*
 * Add an instance on provider, priced per second at price ("36/h") in
 * currency, running from start (and stopped at end unless 0). Its id.
 */
static int64_t
add(const char *name, const char *provider, const char *price,
    const char *currency, int64_t start, int64_t end)
{
	struct instance in;
	struct billing_rule rule;
	char *cause = NULL;
	int64_t id;
	int set;

	instance_init(&in);
	in.name = strdup(name);
	in.host = strdup("10.0.0.1");
	free(in.provider);
	in.provider = strdup(provider);
	in.created_at = 1;
	ck_assert_int_eq(inventory_add(inv, &in, &cause), 0);
	id = in.id;
	instance_clear(&in);
	billing_rule_init(&rule, currency);
	ck_assert_int_eq(
	    ledger_price_field(&rule, "price", price, &set, &cause), 0);
	ck_assert_int_eq(
	    ledger_price_field(&rule, "billing", "second", &set, &cause), 0);
	ck_assert_int_eq(ledger_price_put(inv, id, &rule, &cause), 0);
	ck_assert_int_eq(
	    ledger_add(inv, id, start, "running", "stated", NULL, &cause), 0);
	if (end != 0)
		ck_assert_int_eq(
		    ledger_add(inv, id, end, "stopped", "stated", NULL, &cause),
		    0);
	return id;
}

/* Store a guard: max (an amount, or NULL) with per, or runway seconds. */
static void
add_guard(const char *name, const char *max, const char *per, int64_t runway,
    int shutdown)
{
	struct guard g;
	char *cause = NULL;

	memset(&g, 0, sizeof g);
	g.name = (char *)name;
	g.selector = (char *)"all";
	g.has_cost = max != NULL;
	if (max != NULL)
		ck_assert_int_eq(
		    billing_parse_amount(max, &g.max_cost, &cause), 0);
	g.per = (char *)per;
	g.min_runway_s = runway;
	g.shutdown = shutdown;
	g.created_at = 1;
	ck_assert_int_eq(guard_add(inv, &g, &cause), 0);
}

/* The first column of the one row sql gives, as text ("(null)" for
 * NULL). Caller frees. */
static char *
query(const char *sql)
{
	sqlite3_stmt *st;
	const unsigned char *v;
	char *out;

	ck_assert_int_eq(sqlite3_prepare_v2(inv->db, sql, -1, &st, NULL), 0);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	v = sqlite3_column_text(st, 0);
	out = strdup(v != NULL ? (const char *)v : "(null)");
	sqlite3_finalize(st);
	return out;
}

static long long
count(const char *sql)
{
	char *v = query(sql);
	long long n = strtoll(v, NULL, 10);

	free(v);
	return n;
}

/* Column of action_log row id must be want. */
static void
assert_logged(int64_t id, const char *column, const char *want)
{
	char sql[128], *v;

	snprintf(sql, sizeof sql, "SELECT %s FROM action_log WHERE id = %lld",
	    column, (long long)id);
	v = query(sql);
	ck_assert_str_eq(v, want);
	free(v);
}

/* Evaluate at now; wants n actions. Caller frees *out. */
static struct guard_action *
evaluate(int64_t now, size_t want)
{
	struct guard_action *out = NULL;
	char *cause = NULL;
	size_t n = 99;

	ck_assert_int_eq(guard_evaluate(inv, &cf, now, &out, &n, &cause), 0);
	ck_assert_uint_eq(n, want);
	return out;
}

/*
 * 36 CNY/h per second from 23:30: 6.00 at 23:40, 12.00 at 23:50 (fires,
 * logged), nothing more that day, and 12.00 again by 00:20 the next day
 * fires again. A dry run before shows it and writes nothing.
 */
START_TEST(per_day)
{
	struct guard_action *a, *p = NULL;
	char *cause = NULL;
	size_t n = 0;

	add("a1", "autodl", "36/h", "CNY", T_DEC01 - 1800, 0);
	add_guard("daily", "10", "day", 0, 0);
	guard_actions_free(evaluate(T_DEC01 - 1200, 0), 0);

	ck_assert_int_eq(
	    guard_preview(inv, &cf, T_DEC01 - 600, &p, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(p[0].log_id, 0);
	ck_assert_str_eq(p[0].why, "a1: cost 12.00 CNY today passed 10.00");
	guard_actions_free(p, n);
	ck_assert_int_eq(count("SELECT count(*) FROM guard_fire"), 0);
	ck_assert_int_eq(count("SELECT count(*) FROM action_log"), 0);

	a = evaluate(T_DEC01 - 600, 1);
	ck_assert_str_eq(a[0].guard, "daily");
	ck_assert_int_eq(a[0].shutdown, 0);
	ck_assert_uint_eq(a[0].nnames, 1);
	ck_assert_str_eq(a[0].names[0], "a1");
	ck_assert_str_eq(a[0].why, "a1: cost 12.00 CNY today passed 10.00");
	assert_logged(a[0].log_id, "kind", "guard_warn");
	assert_logged(a[0].log_id, "name", "daily");
	assert_logged(a[0].log_id, "instances", "[\"a1\"]");
	assert_logged(a[0].log_id, "why", a[0].why);
	assert_logged(a[0].log_id, "result", "(null)");
	guard_actions_free(a, 1);
	guard_actions_free(evaluate(T_DEC01 - 300, 0), 0);
	guard_actions_free(evaluate(T_DEC01 + 600, 0), 0);

	a = evaluate(T_DEC01 + 1200 + 1, 1);
	ck_assert_str_eq(a[0].why, "a1: cost 12.01 CNY today passed 10.00");
	guard_actions_free(a, 1);
	ck_assert_int_eq(count("SELECT count(*) FROM guard_fire WHERE period "
			       "IN ('2026-11-30', '2026-12-01')"),
	    2);
	ck_assert_int_eq(count("SELECT count(*) FROM action_log"), 2);
}
END_TEST

/*
 * a1 (CNY) ran 36.00 in November and 36.00 in December; a2 (USD) 10.00;
 * a3 (released) far more. Over 40 per month nothing; over 40 since added
 * only a1, in its currency.
 */
START_TEST(per_month_and_lifetime)
{
	struct guard_value *v;
	struct guard_action *a;
	struct guard *gs;
	char *cause = NULL;
	size_t n, ng;
	int64_t id3;

	add("a1", "autodl", "36/h", "CNY", T_DEC01 - 3600, T_DEC01 + 3600);
	add("a2", "vast", "1/h", "USD", T_DEC01 - 36000, T_DEC01);
	id3 = add("a3", "autodl", "3600/h", "CNY", T_DEC01 - 3600, T_DEC01);
	ck_assert_int_eq(inventory_release(inv, id3, T_DEC01 + 60, &cause), 0);
	/* a4's price was stored before the ceiling: it cannot be costed. */
	add("a4", "autodl", "36/h", "CNY", T_DEC01 - 3600, 0);
	ck_assert_int_eq(sqlite3_exec(inv->db,
			     "UPDATE instance_price SET price = "
			     "10000000000000, price_per = 's' WHERE "
			     "instance_id = (SELECT id FROM instance WHERE "
			     "name = 'a4')",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	add_guard("lifetime", "40", NULL, 0, 0);
	add_guard("monthly", "40", "month", 0, 1);

	a = evaluate(T_DEC01 + 7200, 1);
	ck_assert_str_eq(a[0].guard, "lifetime");
	ck_assert_uint_eq(a[0].nnames, 1);
	ck_assert_str_eq(
	    a[0].why, "a1: cost 72.00 CNY since added passed 40.00");
	guard_actions_free(a, 1);

	ck_assert_int_eq(guard_list(inv, &gs, &ng, &cause), 0);
	ck_assert_uint_eq(ng, 2);
	ck_assert_str_eq(gs[1].name, "monthly");
	ck_assert_int_eq(
	    guard_values(inv, &cf, &gs[1], T_DEC01 + 7200, &v, &n, &cause), 0);
	ck_assert_uint_eq(n, 3); /* a3 is released */
	ck_assert_str_eq(v[0].instance, "a1");
	ck_assert_str_eq(v[0].value, "36.00 CNY this month");
	ck_assert_str_eq(v[0].period, "2026-12");
	ck_assert_int_eq(v[0].hit, 0);
	ck_assert_str_eq(v[1].value, "0.00 USD this month");
	guard_values_free(v, n);
	ck_assert_int_eq(
	    guard_values(inv, &cf, &gs[0], T_DEC01 + 7200, &v, &n, &cause), 0);
	ck_assert_str_eq(v[1].value, "10.00 USD since added");
	ck_assert_int_eq(v[1].hit, 0);
	ck_assert_str_eq(v[2].instance, "a4");
	ck_assert_ptr_nonnull(strstr(v[2].value, "cannot cost: "));
	ck_assert_ptr_nonnull(strstr(v[2].value, "above 1000000 an hour"));
	ck_assert_int_eq(v[2].hit, 0);
	guard_values_free(v, n);
	guard_list_free(gs, ng);
}
END_TEST

/* Record a's stop as done, as the caller of guard_evaluate does. */
static void
stopped(const struct guard_action *a)
{
	json_t *res = json_pack("{s:s}", a->names[0], "ok");
	char *cause = NULL;

	ck_assert_int_eq(actionlog_result(inv, a->log_id, res, &cause), 0);
	json_decref(res);
}

/* State vast's balance (USD, in minor units) as of at. */
static void
balance(money_t amount, int64_t at, int create)
{
	struct provider_change chg;
	char *cause = NULL;

	memset(&chg, 0, sizeof chg);
	chg.currency = "USD";
	chg.set_balance = 1;
	chg.balance = amount;
	chg.balance_at = at;
	ck_assert_int_eq(provider_write(inv, "vast", create, &chg, &cause), 0);
}

/*
 * vast: 2.00 USD at T, a2 burning 1 USD/h: under 3h of runway it fires
 * once; a new balance of 10.00 re-arms it without firing; 1.00 fires it.
 * a1's provider has no balance: never hit.
 */
START_TEST(runway)
{
	struct guard_action *a;

	add("a1", "autodl", "36/h", "CNY", T_DEC01, 0);
	add("a2", "vast", "1/h", "USD", T_DEC01, 0);
	balance(20000, T_DEC01, 1);
	add_guard("low", NULL, NULL, 3 * 3600, 1);

	a = evaluate(T_DEC01 + 600, 1);
	ck_assert_int_eq(a[0].shutdown, 1);
	ck_assert_uint_eq(a[0].nnames, 1);
	ck_assert_str_eq(a[0].names[0], "a2");
	ck_assert_str_eq(
	    a[0].why, "a2: vast balance runway 1h49m is below 3h00m");
	assert_logged(a[0].log_id, "kind", "guard_shutdown");
	stopped(&a[0]);
	guard_actions_free(a, 1);
	guard_actions_free(evaluate(T_DEC01 + 1200, 0), 0);

	balance(100000, T_DEC01 + 1200, 0);
	guard_actions_free(evaluate(T_DEC01 + 1300, 0), 0);
	balance(10000, T_DEC01 + 1800, 0);
	a = evaluate(T_DEC01 + 1900, 1);
	ck_assert_str_eq(a[0].names[0], "a2");
	ck_assert_int_eq(a[0].resumed, 0);
	stopped(&a[0]);
	guard_actions_free(a, 1);
	ck_assert_int_eq(count("SELECT count(*) FROM guard_fire WHERE period "
			       "LIKE 'runway@%'"),
	    2);
}
END_TEST

/*
 * When gpufleet does not know, the money counts as billing. a1 (36 CNY/h
 * per second) ran from 00:00 and is unreachable (unknown) from 00:10: by
 * 00:20 billed 12.00, past a 10.00 daily cap (6.00 with the stretch
 * free). a2 (vast, 1 USD/h) likewise, on 2.00 stated at 00:00: 1200 s
 * cost 0.3334, 1.6666 left at the 1/h it still burns is 5999 s, under 3
 * hours (burning nothing, it never ran out).
 */
START_TEST(unknown)
{
	struct guard_action *a;
	char *cause = NULL;
	int64_t id1, id2;

	id1 = add("a1", "autodl", "36/h", "CNY", T_DEC01, 0);
	id2 = add("a2", "vast", "1/h", "USD", T_DEC01, 0);
	ck_assert_int_eq(ledger_add(inv, id1, T_DEC01 + 600, "unknown",
			     "observed", "unreachable", &cause),
	    0);
	ck_assert_int_eq(ledger_add(inv, id2, T_DEC01 + 600, "unknown",
			     "observed", "unreachable", &cause),
	    0);
	balance(20000, T_DEC01, 1);
	add_guard("daily", "10", "day", 0, 0);
	add_guard("low", NULL, NULL, 3 * 3600, 0);

	a = evaluate(T_DEC01 + 1200, 2);
	ck_assert_str_eq(a[0].guard, "daily");
	ck_assert_str_eq(a[0].why, "a1: cost 12.00 CNY today passed 10.00");
	ck_assert_str_eq(a[1].guard, "low");
	ck_assert_str_eq(
	    a[1].why, "a2: vast balance runway 1h39m is below 3h00m");
	guard_actions_free(a, 2);
}
END_TEST

/* Write an executable script at dir/name. */
static void
script(const char *name, const char *body, char *out, size_t len)
{
	FILE *fp;

	snprintf(out, len, "%s/%s", dir, name);
	ck_assert_ptr_nonnull(fp = fopen(out, "w"));
	fprintf(fp, "#!/bin/sh\n%s\n", body);
	fclose(fp);
	ck_assert_int_eq(chmod(out, 0700), 0);
}

/*
 * guard_stop runs SELF --db DB --config C shutdown NAMES --now --warn 0
 * --json and
 * stores what it says per host; a child that fails without naming a host
 * leaves its first stderr line as that host's result.
 */
START_TEST(stop)
{
	struct guard_action *a;
	struct fleet fleet;
	char ok[96], bad[96], want[256], *cause = NULL, *args;
	FILE *fp;

	add("a1", "autodl", "36/h", "CNY", T_DEC01 - 3600, 0);
	add("a2", "autodl", "36/h", "CNY", T_DEC01 - 3600, 0);
	add_guard("cap", "1", NULL, 0, 1);
	a = evaluate(T_DEC01, 1);
	ck_assert_uint_eq(a[0].nnames, 2);

	cf.path = strdup("/etc/gf.conf");
	fleet_init(&fleet, path, &cf);
	script("ok",
	    "echo \"$@\" >\"$(dirname \"$0\")/args\"; echo "
	    "'[{\"name\":\"a1\",\"error\":null},"
	    "{\"name\":\"a2\",\"error\":\"no route\"}]'",
	    ok, sizeof ok);
	ck_assert_int_eq(guard_stop(&fleet, ok, &a[0], &cause), 0);
	assert_logged(
	    a[0].log_id, "result", "{\"a1\":\"ok\",\"a2\":\"no route\"}");
	snprintf(want, sizeof want, "%s/args", dir);
	ck_assert_ptr_nonnull(fp = fopen(want, "r"));
	args = calloc(1, 256);
	ck_assert_ptr_nonnull(fgets(args, 256, fp));
	fclose(fp);
	snprintf(want, sizeof want,
	    "--db %s --config /etc/gf.conf shutdown a1,a2 --now --warn 0 "
	    "--json\n",
	    path);
	ck_assert_str_eq(args, want);
	free(args);

	script("bad", "echo boom >&2; echo more >&2; exit 3", bad, sizeof bad);
	ck_assert_int_eq(guard_stop(&fleet, bad, &a[0], &cause), 0);
	assert_logged(
	    a[0].log_id, "result", "{\"a1\":\"boom\",\"a2\":\"boom\"}");
	fleet_free(&fleet);
	guard_actions_free(a, 1);
}
END_TEST

/* Make pid (started at start) the runner of action_log row id. */
static void
set_runner(int64_t id, pid_t pid, int64_t start)
{
	char sql[160];

	snprintf(sql, sizeof sql,
	    "UPDATE action_log SET runner_pid = %ld, runner_start = %lld "
	    "WHERE id = %lld",
	    (long)pid, (long long)start, (long long)id);
	ck_assert_int_eq(sqlite3_exec(inv->db, sql, NULL, NULL, NULL), 0);
}

/* A's action again, resumed: same entry, instances and why. */
static void
assert_resumed(const struct guard_action *r, const struct guard_action *a)
{
	ck_assert_int_eq(r->resumed, 1);
	ck_assert_int_eq(r->shutdown, 1);
	ck_assert_int_eq(r->log_id, a->log_id);
	ck_assert_str_eq(r->guard, a->guard);
	ck_assert_str_eq(r->why, a->why);
	ck_assert_uint_eq(r->nnames, 2);
	ck_assert_str_eq(r->names[0], "a1");
	ck_assert_str_eq(r->names[1], "a2");
}

/*
 * A claimed stop with no result: its runner (a child here) alive with its
 * start time: not resumed; dead: resumed, once per evaluation, taken over
 * by this process; a dry run shows it and takes nothing; once its result
 * is stored, never again; a removed guard's pending stop stays.
 */
START_TEST(resume)
{
	struct guard_action *a, *r, *p = NULL;
	char *cause = NULL, want[64], *v;
	size_t n = 0;
	pid_t child;
	int st;

	add("a1", "autodl", "36/h", "CNY", T_DEC01 - 3600, 0);
	add("a2", "autodl", "36/h", "CNY", T_DEC01 - 3600, 0);
	add_guard("cap", "1", NULL, 0, 1);
	a = evaluate(T_DEC01, 1);
	ck_assert_int_eq(a[0].resumed, 0);
	snprintf(want, sizeof want, "%ld", (long)getpid());
	assert_logged(a[0].log_id, "runner_pid", want);

	ck_assert_int_ne(child = fork(), -1);
	if (child == 0) {
		pause();
		_exit(0);
	}
	set_runner(a[0].log_id, child, schedrun_pid_start(child));
	guard_actions_free(evaluate(T_DEC01 + 60, 0), 0);
	/* The same pid with another start time is another process. */
	set_runner(a[0].log_id, child, schedrun_pid_start(child) + 1);
	r = evaluate(T_DEC01 + 60, 1);
	assert_resumed(&r[0], &a[0]);
	guard_actions_free(r, 1);

	set_runner(a[0].log_id, child, schedrun_pid_start(child));
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	ck_assert_int_eq(waitpid(child, &st, 0), child);
	ck_assert_int_eq(
	    guard_preview(inv, &cf, T_DEC01 + 120, &p, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(p[0].resumed, 1);
	ck_assert_int_eq(p[0].log_id, 0);
	guard_actions_free(p, n);
	snprintf(want, sizeof want, "%ld", (long)child);
	assert_logged(a[0].log_id, "runner_pid", want);

	r = evaluate(T_DEC01 + 120, 1);
	assert_resumed(&r[0], &a[0]);
	snprintf(want, sizeof want, "%ld", (long)getpid());
	assert_logged(a[0].log_id, "runner_pid", want);
	guard_actions_free(r, 1);
	/* This process runs none of its stops while it evaluates. */
	r = evaluate(T_DEC01 + 180, 1);
	assert_resumed(&r[0], &a[0]);
	guard_actions_free(r, 1);

	stopped(&a[0]);
	guard_actions_free(evaluate(T_DEC01 + 240, 0), 0);
	v = query("SELECT count(*) FROM action_log");
	ck_assert_str_eq(v, "1");
	free(v);

	/* A removed guard's pending stop is not run again. */
	add_guard("cap2", "1", NULL, 0, 1);
	r = evaluate(T_DEC01 + 300, 1);
	set_runner(r[0].log_id, 0, 0);
	ck_assert_int_eq(guard_remove(inv, "cap2", &cause), 0);
	guard_actions_free(evaluate(T_DEC01 + 360, 0), 0);
	guard_actions_free(r, 1);
	guard_actions_free(a, 1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("guard");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	setenv("TZ", "UTC", 1);
	tzset();
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, per_day);
	tcase_add_test(tc, per_month_and_lifetime);
	tcase_add_test(tc, runway);
	tcase_add_test(tc, unknown);
	tcase_add_test(tc, stop);
	tcase_add_test(tc, resume);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
