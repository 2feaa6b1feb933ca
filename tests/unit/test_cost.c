/* Cost per instance, provider and day on a real SQLite file; projection. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cost.h"

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

static const struct proj_case proj_cases[] = {
	{ 0, 0, 3600, 0, 0 },
	{ 100, 36000, 1800, 0, 18100 },
	{ 100, 36000, 0, 0, 100 },
	{ 5, 1, 1, 0, 6 }, /* 1/3600 of a minor unit rounds up */
	{ BILLING_MONEY_MAX - 1, 10000, 3600, -1, 0 },
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

/* Add an instance with a price and runs "start-end ..." to inv. */
static void
add_instance(struct inventory *inv, struct instance *in, const char *name,
    const char *provider, const char *price, const char *currency,
    const char *unit, const int64_t *runs, size_t nruns)
{
	struct billing_rule rule;
	char *cause = NULL;
	int set;
	size_t i;

	instance_init(in);
	in->name = strdup(name);
	in->host = strdup("10.0.0.1");
	free(in->provider);
	in->provider = strdup(provider);
	in->created_at = 1;
	ck_assert_int_eq(inventory_add(inv, in, &cause), 0);
	billing_rule_init(&rule, "CNY");
	ck_assert_int_eq(
	    ledger_price_field(&rule, "price", price, &set, &cause), 0);
	ck_assert_int_eq(
	    ledger_price_field(&rule, "currency", currency, &set, &cause), 0);
	ck_assert_int_eq(
	    ledger_price_field(&rule, "billing", unit, &set, &cause), 0);
	ck_assert_int_eq(ledger_price_put(inv, in->id, &rule, &cause), 0);
	for (i = 0; i < nruns; i += 2) {
		ck_assert_int_eq(ledger_add(inv, in->id, runs[i], "running",
				     "stated", NULL, &cause),
		    0);
		ck_assert_int_eq(ledger_add(inv, in->id, runs[i + 1], "stopped",
				     "stated", NULL, &cause),
		    0);
	}
}

/*
 * a1 (p1, 3.60 CNY/h per second) runs 11-02 23:00 to 11-03 01:00, across
 * midnight; v1 (p2, 1 USD/h per started hour) runs 30 minutes on 11-03.
 */
START_TEST(test_by_day_and_provider)
{
	static const int64_t a_runs[] = { 1793660400, 1793667600 };
	static const int64_t v_runs[] = { 1793700000, 1793701800 };
	char dir[] = "/tmp/gpufleet-cost.XXXXXX", path[64], *cause = NULL;
	struct inventory *inv;
	struct instance list[2];
	struct config cf;
	struct cost_report rep;
	struct cost_day *days;
	struct cost_group *groups;
	size_t ndays, ngroups;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	config_defaults(&cf);
	add_instance(
	    inv, &list[0], "a1", "p1", "3.60/h", "CNY", "second", a_runs, 2);
	add_instance(
	    inv, &list[1], "v1", "p2", "1/h", "USD", "hour", v_runs, 2);

	ck_assert_int_eq(cost_by_instance(inv, &cf, list, 2, T_NOV02, T_NOV04,
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

	ck_assert_int_eq(cost_by_day(inv, &cf, &rep, &days, &ndays, &cause), 0);
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
	ck_assert_int_eq(ledger_add(inv, list[0].id, T_NOV10 - 3600, "running",
			     "stated", NULL, &cause),
	    0);
	ck_assert_int_eq(cost_by_instance(inv, &cf, list, 1, T_NOV01, T_NOV10,
			     T_NOV10, &rep, &cause),
	    0);
	ck_assert_int_eq(rep.projecting, 1);
	ck_assert_int_eq(rep.month_end, T_DEC01);
	ck_assert_int_eq(rep.totals[0].amount, 72000 + 36000);
	ck_assert_int_eq(rep.totals[0].burn_per_hour, 36000);
	ck_assert_int_eq(rep.totals[0].projected,
	    72000 + 36000 + 36000 * ((T_DEC01 - T_NOV10) / 3600));
	cost_report_free(&rep);

	instance_clear(&list[0]);
	instance_clear(&list[1]);
	config_clear(&cf);
	inventory_close(inv);
	snprintf(path, sizeof path, "rm -rf %s", dir);
	ck_assert_int_eq(system(path), 0);
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
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
