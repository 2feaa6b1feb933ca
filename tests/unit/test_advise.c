/* Advice as data, on a real SQLite file: stopped, release and runway. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advise.h"
#include "ledger.h"
#include "provider.h"
#include "status.h"

#define NOW 1794268800 /* 2026-11-10T00:00:00Z */

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
	char dir[] = "/tmp/gpufleet-advise.XXXXXX", path[64], *cause = NULL;
	struct inventory *inv;
	struct instance list[2];
	struct provider_change chg;
	struct config cf;
	struct advice *v;
	size_t n;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	config_defaults(&cf);
	add_instance(inv, &list[0], "a2", "autodl", a2_price);
	add_instance(inv, &list[1], "v1", "vast", v1_price);
	ck_assert_int_eq(ledger_add(inv, list[0].id, NOW - 20 * 86400,
			     "running", "stated", NULL, &cause),
	    0);
	ck_assert_int_eq(ledger_add(inv, list[0].id, NOW - 6 * 86400, "stopped",
			     "stated", NULL, &cause),
	    0);
	ck_assert_int_eq(ledger_add(inv, list[1].id, NOW - 3600, "running",
			     "stated", NULL, &cause),
	    0);
	memset(&chg, 0, sizeof chg);
	chg.set_release = 1;
	chg.release_after_days = 4;
	ck_assert_int_eq(provider_write(inv, "autodl", 1, &chg, &cause), 0);
	memset(&chg, 0, sizeof chg);
	chg.currency = "USD";
	chg.set_balance = 1;
	chg.balance = 20000;
	chg.balance_at = NOW - 3600;
	ck_assert_int_eq(provider_write(inv, "vast", 1, &chg, &cause), 0);
	/* Adding one twice is refused, naming it. */
	ck_assert_int_eq(
	    provider_write(inv, "vast", 1, &chg, &cause), -GF_EUSAGE);
	ck_assert_str_eq(cause, "provider 'vast' exists (use provider set)");
	free(cause);
	cause = NULL;

	ck_assert_int_eq(advise_run(inv, &cf, list, 2, NOW, &v, &n, &cause), 0);
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
	Suite *s = suite_create("advise");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	setenv("TZ", "UTC", 1);
	tcase_add_test(tc, test_advice);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
