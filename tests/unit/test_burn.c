/*
 * The money helpers of burn and display: what an instance spends per day
 * in each state, runway at a daily burn, shown parts that add up to the
 * shown total (largest remainder), and currencies as ISO 4217 codes.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"

struct burn_case {
	const char *price;
	const char *stopped; /* or NULL */
	enum billing_state state;
	money_t per_day;
};

static const struct burn_case burns[] = {
	/* 4.98/h x 24 = 119.52 a day. */
	{ "4.98/h", NULL, BILL_RUNNING, 1195200 },
	/* 0.0001/s x 86400 = 8.64 a day, exact although 0.36/h. */
	{ "0.0001/s", NULL, BILL_RUNNING, 86400 },
	/* 0.05/min x 1440 = 72.00 a day. */
	{ "0.05/min", "0.5/day", BILL_RUNNING, 720000 },
	/* Stopped: the storage, 0.5 a day, not the price. */
	{ "4.98/h", "0.5/day", BILL_STOPPED, 5000 },
	/* 0.01/h of storage is 0.24 a day. */
	{ "4.98/h", "0.01/h", BILL_STOPPED, 2400 },
	{ "4.98/h", NULL, BILL_STOPPED, 0 },
	/* Unknown: billed as running, so its price, not its storage. */
	{ "4.98/h", "0.5/day", BILL_UNKNOWN, 1195200 },
};

START_TEST(test_daily_burn)
{
	const struct burn_case *c = &burns[_i];
	struct billing_rule r;
	char *cause = NULL;

	billing_rule_init(&r, "CNY");
	ck_assert_int_eq(
	    billing_parse_price(c->price, &r.price, &r.price_per, &cause), 0);
	if (c->stopped != NULL)
		ck_assert_int_eq(billing_parse_stopped_price(
				     c->stopped, &r.stopped_per_day, &cause),
		    0);
	ck_assert_int_eq(billing_daily_burn(&r, c->state), c->per_day);
}
END_TEST

struct runway_case {
	money_t balance, per_day;
	int ret;
	int64_t want;
};

static const struct runway_case runways[] = {
	/* 10.00 at 0.5/day of storage: 20 days = 1728000 s. */
	{ 100000, 5000, 0, 1728000 },
	/* 10.00 at 0.5/day less a minor unit: 99999 * 86400 / 5000 =
	   1727982.72 -> 1727982 s, rounded down. */
	{ 99999, 5000, 0, 1727982 },
	{ 100000, 0, 1, INT64_MAX },
	{ 0, 5000, 0, 0 },
	{ 100000, -1, -1, -7 },
};

START_TEST(test_runway_daily)
{
	const struct runway_case *c = &runways[_i];
	int64_t secs = -7;

	ck_assert_int_eq(
	    billing_runway_daily(c->balance, c->per_day, &secs), c->ret);
	ck_assert_int_eq(secs, c->want);
}
END_TEST

#define MAXP 8

struct parts_case {
	const char *what;
	size_t n;
	money_t parts[MAXP];
	money_t target; /* -1: billing_cents of the parts' sum */
	money_t want[MAXP];
};

static const struct parts_case parts_cases[] = {
	/* The 8.39 + 0.00 next to 8.40: 8.3949 + 0.0049 = 8.3998,
	   shown 8.40; both remainders 0.0049, the tie goes to the first. */
	{ "issue", 2, { 83949, 49 }, -1, { 84000, 0 } },
	/* 33.33 + 33.33 + 33.34 hundredths of 1.00: the largest remainder
	   (0.0034) takes the missing cent. */
	{ "largest", 3, { 3333, 3333, 3334 }, -1, { 3300, 3300, 3400 } },
	/* A tie: 0.505 + 0.505 = 1.01; the first gets the cent. */
	{ "tie", 2, { 5050, 5050 }, -1, { 5100, 5000 } },
	/* Parts already whole cents stay as they are. */
	{ "exact", 3, { 100, 200, 12300 }, -1, { 100, 200, 12300 } },
	/* Seven of 0.1429 = 1.0003, shown 1.00: floors 0.14 x 7 = 0.98,
	   two cents to the first two (all remainders 0.0029). */
	{ "many", 7, { 1429, 1429, 1429, 1429, 1429, 1429, 1429 }, -1,
	    { 1500, 1500, 1400, 1400, 1400, 1400, 1400 } },
	/* Remainders decide, not order: 0.0011 + 0.0098 + 0.0091 = 0.02. */
	{ "order", 3, { 11, 98, 91 }, -1, { 0, 100, 100 } },
	/* A negative part floors down: -0.015 -> -0.02 (remainder 0.005),
	   0.03 stays; the sum 0.015 is shown 0.02, one cent to -0.02. */
	{ "negative", 2, { -150, 300 }, -1, { -100, 300 } },
	/* A target below the floors' sum (a shown row total rounded down by
	   the level above): the cent comes off the smallest remainder, the
	   later part on a tie. */
	{ "below", 2, { 1000, 1000 }, 1900, { 1000, 900 } },
	/* A target two cents above one part: both go to it, one a pass. */
	{ "above", 1, { 1049 }, 1200, { 1200 } },
	/* Nothing to round. */
	{ "zero", 3, { 0, 0, 0 }, -1, { 0, 0, 0 } },
};

START_TEST(test_round_parts)
{
	const struct parts_case *c = &parts_cases[_i];
	money_t shown[MAXP], sum = 0, target;
	size_t i;

	for (i = 0; i < c->n; i++)
		sum += c->parts[i];
	target = c->target >= 0 ? c->target : billing_cents(sum);
	billing_round_parts(c->parts, c->n, target, shown);
	for (i = 0; i < c->n; i++)
		ck_assert_msg(shown[i] == c->want[i], "%s: part %zu: %lld",
		    c->what, i, (long long)shown[i]);
}
END_TEST

/* Random parts: shown ones are whole cents, within a cent, add up. */
START_TEST(test_round_parts_sum)
{
	money_t parts[MAXP], shown[MAXP], sum, ssum;
	unsigned seed = 15;
	size_t n, i;
	int k;

	for (k = 0; k < 2000; k++) {
		n = 1 + (size_t)(rand_r(&seed) % MAXP);
		for (sum = 0, i = 0; i < n; i++) {
			parts[i] = rand_r(&seed) % 100000;
			sum += parts[i];
		}
		billing_round_parts(parts, n, billing_cents(sum), shown);
		for (ssum = 0, i = 0; i < n; i++) {
			ck_assert_int_eq(shown[i] % 100, 0);
			ck_assert_int_lt(llabs(shown[i] - parts[i]), 100);
			ssum += shown[i];
		}
		ck_assert_int_eq(ssum, billing_cents(sum));
	}
}
END_TEST

START_TEST(test_cents)
{
	/* As billing_format shows them: half away from zero. */
	ck_assert_int_eq(billing_cents(254150), 254200); /* 25.415 -> 25.42 */
	ck_assert_int_eq(billing_cents(254149), 254100);
	ck_assert_int_eq(billing_cents(-150), -200);
	ck_assert_int_eq(billing_cents(-149), -100);
	ck_assert_int_eq(billing_cents(0), 0);
}
END_TEST

struct currency_case {
	const char *text;
	const char *code; /* NULL: refused */
	const char *cause;
};

static const struct currency_case currencies[] = {
	{ "CNY", "CNY", NULL },
	{ "cny", "CNY", NULL },
	{ "usd", "USD", NULL },
	{ "AED", "AED", NULL }, /* the first of the table */
	{ "ZWL", "ZWL", NULL }, /* the last */
	{ "JPY", "JPY", NULL },
	{ "TWD", "TWD", NULL },
	{ "RMB", NULL, "currency 'RMB' is not an ISO 4217 code: use CNY" },
	{ "rmb", NULL, "currency 'rmb' is not an ISO 4217 code: use CNY" },
	{ "NTD", NULL, "currency 'NTD' is not an ISO 4217 code: use TWD" },
	{ "YEN", NULL, "currency 'YEN' is not an ISO 4217 code: use JPY" },
	{ "HRK", NULL, "currency 'HRK' is not an ISO 4217 code: use EUR" },
	{ "XYZ", NULL,
	    "currency 'XYZ' is not an ISO 4217 code (e.g. CNY, USD, EUR)" },
	{ "XXX", NULL,
	    "currency 'XXX' is not an ISO 4217 code (e.g. CNY, USD, EUR)" },
	{ "AAA", NULL,
	    "currency 'AAA' is not an ISO 4217 code (e.g. CNY, USD, EUR)" },
	{ "ZZZ", NULL,
	    "currency 'ZZZ' is not an ISO 4217 code (e.g. CNY, USD, EUR)" },
	{ "EURO", NULL,
	    "currency 'EURO' must be a three-letter code (e.g. CNY, USD, "
	    "EUR)" },
};

START_TEST(test_currency)
{
	const struct currency_case *c = &currencies[_i];
	char buf[8] = "", *cause = NULL;
	int r = billing_parse_currency(c->text, buf, sizeof buf, &cause);

	if (c->code != NULL) {
		ck_assert_int_eq(r, 0);
		ck_assert_str_eq(buf, c->code);
		ck_assert_int_eq(billing_currency_known(c->code), 1);
	} else {
		ck_assert_int_eq(r, -1);
		ck_assert_str_eq(cause, c->cause);
		ck_assert_str_eq(buf, "");
	}
	free(cause);
}
END_TEST

/* A rule read back holding a non-ISO code still validates and costs. */
START_TEST(test_currency_stored)
{
	struct billing_rule r;
	char *cause = NULL;

	billing_rule_init(&r, "RMB");
	r.price = 26900;
	ck_assert_int_eq(billing_currency_known("RMB"), 0);
	ck_assert_int_eq(billing_rule_validate(&r, &cause), 0);
	ck_assert_int_eq(billing_run_cost(&r, 3600, NULL), 26900);
}
END_TEST

#define LOOP(tc, fn, table)                                                    \
	tcase_add_loop_test(tc, fn, 0, (int)(sizeof table / sizeof table[0]))

int
main(void)
{
	Suite *s = suite_create("burn");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	LOOP(tc, test_daily_burn, burns);
	LOOP(tc, test_runway_daily, runways);
	LOOP(tc, test_round_parts, parts_cases);
	tcase_add_test(tc, test_round_parts_sum);
	tcase_add_test(tc, test_cents);
	LOOP(tc, test_currency, currencies);
	tcase_add_test(tc, test_currency_stored);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
