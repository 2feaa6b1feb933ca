/*
 * The billing model, one row per case, every amount worked out by hand in
 * the row's comment. Money is in minor units of 1/10000: 2.69 CNY = 26900.
 * Most rows use 2.69 CNY/h, so one second costs 26900/3600 = 7.47 minor.
 */

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "xmalloc.h"

#define MIN  60
#define HOUR 3600
#define DAY  86400
/* 2026-10-31, 2026-11-01, 2026-12-01 at 00:00:00Z */
#define OCT31 1793404800LL
#define NOV1  1793491200LL
#define DEC1  1796083200LL

#define P269 26900 /* 2.69 */

static void rule_make(struct billing_rule *, money_t, enum billing_per,
    enum billing_unit, int64_t, money_t);
static void total_eq(
    const struct billing_total *, const struct billing_total *, const char *);
static size_t ledger_make(struct billing_interval *, size_t);
static void window(const struct billing_rule *, const struct billing_interval *,
    size_t, int64_t, int64_t, struct billing_total *);
static void add(struct billing_total *, const struct billing_total *);

/* A rule in CNY with the fields the tables vary. */
static void
rule_make(struct billing_rule *r, money_t price, enum billing_per per,
    enum billing_unit unit, int64_t min_billed, money_t stopped_per_day)
{
	billing_rule_init(r, "CNY");
	r->price = price;
	r->price_per = per;
	r->unit = unit;
	r->min_billed = min_billed;
	r->stopped_per_day = stopped_per_day;
}

/*
 * Every field of two totals is equal. Checked with if, not ck_assert, as the
 * property loops call this often and Check records every passing assert.
 */
static void
total_eq(const struct billing_total *got, const struct billing_total *want,
    const char *what)
{
	if (strcmp(got->currency, want->currency) == 0 &&
	    got->running_secs == want->running_secs &&
	    got->billed_secs == want->billed_secs &&
	    got->starts == want->starts &&
	    got->stopped_secs == want->stopped_secs &&
	    got->unknown_secs == want->unknown_secs &&
	    got->compute == want->compute && got->storage == want->storage &&
	    got->unknown == want->unknown)
		return;
	ck_abort_msg("%s: got %s running %lld billed %lld starts %lld "
		     "stopped %lld unknown %lld compute %lld storage %lld "
		     "unknown %lld; want %s %lld %lld %lld %lld %lld %lld %lld "
		     "%lld",
	    what, got->currency, (long long)got->running_secs,
	    (long long)got->billed_secs, (long long)got->starts,
	    (long long)got->stopped_secs, (long long)got->unknown_secs,
	    (long long)got->compute, (long long)got->storage,
	    (long long)got->unknown, want->currency,
	    (long long)want->running_secs, (long long)want->billed_secs,
	    (long long)want->starts, (long long)want->stopped_secs,
	    (long long)want->unknown_secs, (long long)want->compute,
	    (long long)want->storage, (long long)want->unknown);
}

/* billing_window, aborting the test with its cause on failure. */
static void
window(const struct billing_rule *r, const struct billing_interval *iv,
    size_t n, int64_t from, int64_t to, struct billing_total *total)
{
	char *cause = NULL;

	if (billing_window(r, iv, n, from, to, total, &cause) != 0)
		ck_abort_msg("window %lld..%lld: %s", (long long)from,
		    (long long)to, cause);
}

/* Add part into sum, aborting on failure. */
static void
add(struct billing_total *sum, const struct billing_total *part)
{
	char *cause = NULL;

	if (billing_total_add(sum, part, &cause) != 0)
		ck_abort_msg("%s", cause);
}

/* ---- parsing ---- */

struct amount_case {
	const char *text;
	int ok;
	money_t want;
	const char *why; /* part of the error */
};

static const struct amount_case amounts[] = {
	{ "2.69", 1, 26900, NULL },
	{ "0.5", 1, 5000, NULL },
	{ "0", 1, 0, NULL },
	{ "1137.50", 1, 11375000, NULL },
	{ "0.0001", 1, 1, NULL },
	{ "007.5", 1, 75000, NULL },
	{ "1000000000", 1, 10000000000000LL, NULL },
	{ "", 0, 0, "empty" },
	{ "-1", 0, 0, "negative" },
	{ "-0.5", 0, 0, "negative" },
	{ "1,137.50", 0, 0, "separators" },
	{ "2,69", 0, 0, "separators" },
	{ "1e3", 0, 0, "not a number" },
	{ "2.", 0, 0, "not a number" },
	{ ".5", 0, 0, "not a number" },
	{ "2.69001", 0, 0, "4 decimals" },
	{ " 2", 0, 0, "not a number" },
	{ "2 ", 0, 0, "not a number" },
	{ "+2", 0, 0, "not a number" },
	{ "abc", 0, 0, "not a number" },
	{ "0x10", 0, 0, "not a number" },
	{ "inf", 0, 0, "not a number" },
	{ "1000000000.0001", 0, 0, "too large" },
	{ "99999999999999999999", 0, 0, "too large" },
};

START_TEST(test_parse_amount)
{
	const struct amount_case *c = &amounts[_i];
	char *cause = NULL, *quoted;
	money_t got = -1;
	int r = billing_parse_amount(c->text, &got, &cause);

	if (c->ok) {
		ck_assert_msg(r == 0, "'%s' refused: %s", c->text, cause);
		ck_assert_msg(got == c->want, "'%s' gave %lld, want %lld",
		    c->text, (long long)got, (long long)c->want);
		return;
	}
	ck_assert_msg(
	    r == -1, "'%s' accepted as %lld", c->text, (long long)got);
	quoted = NULL;
	ck_assert_int_ge(xasprintf(&quoted, "amount '%s'", c->text), 0);
	ck_assert_msg(strstr(cause, quoted) != NULL, "cause: %s", cause);
	ck_assert_msg(strstr(cause, c->why) != NULL, "cause: %s", cause);
	free(quoted);
	free(cause);
}
END_TEST

struct price_case {
	const char *text;
	int ok;
	money_t want;
	enum billing_per per;
	const char *why;
};

static const struct price_case prices[] = {
	{ "2.69/h", 1, 26900, BILL_PER_HOUR, NULL },
	{ "2.69/hour", 1, 26900, BILL_PER_HOUR, NULL },
	{ "2.69/hr", 1, 26900, BILL_PER_HOUR, NULL },
	{ "2.69/H", 1, 26900, BILL_PER_HOUR, NULL },
	{ "0.05/min", 1, 500, BILL_PER_MINUTE, NULL },
	{ "0.05/minute", 1, 500, BILL_PER_MINUTE, NULL },
	{ "0.001/s", 1, 10, BILL_PER_SECOND, NULL },
	{ "0.001/sec", 1, 10, BILL_PER_SECOND, NULL },
	{ "0.001/second", 1, 10, BILL_PER_SECOND, NULL },
	{ "60/day", 1, 600000, BILL_PER_DAY, NULL },
	{ "60/d", 1, 600000, BILL_PER_DAY, NULL },
	{ "0/h", 1, 0, BILL_PER_HOUR, NULL },
	{ "2.69", 0, 0, 0, "no period" },
	{ "2.69/m", 0, 0, 0, "ambiguous" },
	{ "2.69/month", 0, 0, 0, "monthly_price" },
	{ "2.69/week", 0, 0, 0, "unknown period 'week'" },
	{ "2.69/", 0, 0, 0, "unknown period ''" },
	{ "-2.69/h", 0, 0, 0, "negative" },
	{ "/h", 0, 0, 0, "empty" },
	{ "1e3/h", 0, 0, 0, "not a number" },
	{ "2.69/h/h", 0, 0, 0, "not a number" },
	{ "2,69/h", 0, 0, 0, "separators" },
	{ "2.69001/h", 0, 0, 0, "4 decimals" },
	/* The ceiling: what a price comes to in an hour, at most 10^6. */
	{ "1000000/h", 1, 10000000000LL, BILL_PER_HOUR, NULL },
	{ "1000000.0001/h", 0, 0, 0, "too high (at most 1000000 an hour)" },
	{ "277.7777/s", 1, 2777777, BILL_PER_SECOND, NULL },
	{ "277.7778/s", 0, 0, 0, "too high" },
	{ "1000000000/s", 0, 0, 0, "too high" },
	{ "16666.6666/min", 1, 166666666, BILL_PER_MINUTE, NULL },
	{ "16666.6667/min", 0, 0, 0, "too high" },
	{ "24000000/day", 1, 240000000000LL, BILL_PER_DAY, NULL },
	{ "24000000.0001/day", 0, 0, 0, "too high" },
};

START_TEST(test_parse_price)
{
	const struct price_case *c = &prices[_i];
	char *cause = NULL, *quoted = NULL;
	enum billing_per per = BILL_PER_DAY;
	money_t got = -1;
	int r = billing_parse_price(c->text, &got, &per, &cause);

	if (c->ok) {
		ck_assert_msg(r == 0, "'%s' refused: %s", c->text, cause);
		ck_assert_msg(got == c->want, "'%s' gave %lld, want %lld",
		    c->text, (long long)got, (long long)c->want);
		ck_assert_int_eq(per, c->per);
		return;
	}
	ck_assert_msg(r == -1, "'%s' accepted", c->text);
	ck_assert_int_ge(xasprintf(&quoted, "price '%s'", c->text), 0);
	ck_assert_msg(strstr(cause, quoted) != NULL, "cause: %s", cause);
	ck_assert_msg(strstr(cause, c->why) != NULL, "cause: %s", cause);
	free(quoted);
	free(cause);
}
END_TEST

struct other_price_case {
	int egress; /* else stopped */
	const char *text;
	int ok;
	money_t want;
};

static const struct other_price_case other_prices[] = {
	{ 0, "1.20/day", 1, 12000 },
	{ 0, "1.2/d", 1, 12000 },
	/* 0.05/h * 24 = 1.20/day */
	{ 0, "0.05/h", 1, 12000 },
	/* 0.0001/s * 86400 = 8.64/day */
	{ 0, "0.0001/s", 1, 86400 },
	{ 0, "1.20", 0, 0 },
	{ 0, "-1/day", 0, 0 },
	/* At most 10^6 an hour: 1000000/h is 24000000/day, 1000001/h is not */
	{ 0, "1000000/h", 1, 10000000000LL * 24 },
	{ 0, "24000000/day", 1, 10000000000LL * 24 },
	{ 0, "1000001/h", 0, 0 },
	{ 0, "20000000/h", 0, 0 },
	{ 0, "1000000000/s", 0, 0 },
	{ 1, "0.80/GB", 1, 8000 },
	{ 1, "0.8/gb", 1, 8000 },
	{ 1, "0.80", 0, 0 },
	{ 1, "0.80/TB", 0, 0 },
	{ 1, "x/GB", 0, 0 },
	{ 1, "1000000/GB", 1, 10000000000LL },
	{ 1, "1000000.0001/GB", 0, 0 },
};

START_TEST(test_parse_other_price)
{
	const struct other_price_case *c = &other_prices[_i];
	char *cause = NULL, *quoted = NULL;
	money_t got = -1;
	int r;

	if (c->egress)
		r = billing_parse_egress_price(c->text, &got, &cause);
	else
		r = billing_parse_stopped_price(c->text, &got, &cause);
	if (c->ok) {
		ck_assert_msg(r == 0, "'%s' refused: %s", c->text, cause);
		ck_assert_msg(got == c->want, "'%s' gave %lld, want %lld",
		    c->text, (long long)got, (long long)c->want);
		return;
	}
	ck_assert_msg(r == -1, "'%s' accepted", c->text);
	ck_assert_int_ge(xasprintf(&quoted, "%s price '%s'",
			     c->egress ? "egress" : "stopped", c->text),
	    0);
	ck_assert_msg(strstr(cause, quoted) != NULL, "cause: %s", cause);
	free(quoted);
	free(cause);
}
END_TEST

struct duration_case {
	const char *text;
	int ok;
	int64_t want;
	const char *why;
};

static const struct duration_case durations[] = {
	{ "10m", 1, 600, NULL },
	{ "1h", 1, 3600, NULL },
	{ "90s", 1, 90, NULL },
	{ "1h30m", 1, 5400, NULL },
	{ "2d", 1, 172800, NULL },
	{ "0", 1, 0, NULL },
	{ "0s", 1, 0, NULL },
	{ "1w", 1, 604800, NULL },
	/* 86400 + 7200 + 180 + 4 */
	{ "1d2h3m4s", 1, 93784, NULL },
	{ "3650d", 1, 3650LL * 86400, NULL },
	{ "", 0, 0, "empty" },
	{ "90", 0, 0, "needs a unit" },
	{ "1h30", 0, 0, "needs a unit" },
	{ "-5m", 0, 0, "not like" },
	{ "1h1h", 0, 0, "not like" },
	{ "30m1h", 0, 0, "not like" },
	{ "1.5h", 0, 0, "not like" },
	{ "1y", 0, 0, "not like" },
	{ "h", 0, 0, "not like" },
	{ "10 m", 0, 0, "not like" },
	{ "10M", 0, 0, "not like" },
	{ "3651d", 0, 0, "longer than 3650 days" },
	{ "99999999999999999999s", 0, 0, "longer than" },
};

START_TEST(test_parse_duration)
{
	const struct duration_case *c = &durations[_i];
	char *cause = NULL;
	int64_t got = -1;
	int r = billing_parse_duration(c->text, &got, &cause);

	if (c->ok) {
		ck_assert_msg(r == 0, "'%s' refused: %s", c->text, cause);
		ck_assert_msg(got == c->want, "'%s' gave %lld, want %lld",
		    c->text, (long long)got, (long long)c->want);
		return;
	}
	ck_assert_msg(
	    r == -1, "'%s' accepted as %lld", c->text, (long long)got);
	if (*c->text != '\0')
		ck_assert_msg(
		    strstr(cause, c->text) != NULL, "cause: %s", cause);
	ck_assert_msg(strstr(cause, c->why) != NULL, "cause: %s", cause);
	free(cause);
}
END_TEST

START_TEST(test_parse_unit_currency)
{
	static const char *bad_units[] = { "Hour", "sec", "", "hours" };
	static const char *bad_currencies[] = { "CN", "CNYY", "C1Y", "" };
	enum billing_unit u;
	char cur[8], *cause = NULL;
	size_t i;

	ck_assert_int_eq(billing_parse_unit("second", &u, &cause), 0);
	ck_assert_int_eq(u, BILL_SECOND);
	ck_assert_int_eq(billing_parse_unit("minute", &u, &cause), 0);
	ck_assert_int_eq(u, BILL_MINUTE);
	ck_assert_int_eq(billing_parse_unit("hour", &u, &cause), 0);
	ck_assert_int_eq(u, BILL_HOUR);
	ck_assert_str_eq(billing_unit_name(BILL_MINUTE), "minute");
	for (i = 0; i < sizeof bad_units / sizeof bad_units[0]; i++) {
		ck_assert_int_eq(
		    billing_parse_unit(bad_units[i], &u, &cause), -1);
		ck_assert_ptr_nonnull(strstr(cause, "billing '"));
		ck_assert_ptr_nonnull(strstr(cause, bad_units[i]));
		free(cause);
	}
	ck_assert_int_eq(
	    billing_parse_currency("cny", cur, sizeof cur, &cause), 0);
	ck_assert_str_eq(cur, "CNY");
	ck_assert_int_eq(
	    billing_parse_currency("USD", cur, sizeof cur, &cause), 0);
	ck_assert_str_eq(cur, "USD");
	for (i = 0; i < sizeof bad_currencies / sizeof bad_currencies[0]; i++) {
		ck_assert_int_eq(billing_parse_currency(bad_currencies[i], cur,
				     sizeof cur, &cause),
		    -1);
		ck_assert_ptr_nonnull(strstr(cause, "currency '"));
		ck_assert_ptr_nonnull(strstr(cause, bad_currencies[i]));
		free(cause);
	}
}
END_TEST

START_TEST(test_rule_validate)
{
	struct billing_rule r;
	char *cause = NULL;

	rule_make(&r, P269, BILL_PER_HOUR, BILL_MINUTE, 600, 12000);
	r.monthly_price = 17400000;
	r.egress_per_gb = 8000;
	ck_assert_msg(billing_rule_validate(&r, &cause) == 0, "%s", cause);

	r.price = -1;
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "price"));
	free(cause);
	r.price = BILLING_AMOUNT_MAX + 1;
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	free(cause);
	/* Above 10^6 an hour, as a stored rule may be from before the
	   ceiling: refused, naming the fix. */
	r.price = 2777778;
	r.price_per = BILL_PER_SECOND;
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "above 1000000 an hour"));
	free(cause);
	r.price = 2777777;
	ck_assert_msg(billing_rule_validate(&r, &cause) == 0, "%s", cause);
	r.price_per = BILL_PER_HOUR;
	r.stopped_per_day = 240000000001LL;
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	free(cause);
	r.stopped_per_day = 12000;
	r.egress_per_gb = 10000000001LL;
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	free(cause);
	r.egress_per_gb = 8000;
	r.price = P269;

	r.min_billed = -1;
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "min_billed"));
	free(cause);
	r.min_billed = 31 * DAY;
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	free(cause);
	r.min_billed = 0;

	r.unit = (enum billing_unit)7;
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	free(cause);
	r.unit = BILL_HOUR;

	memcpy(r.currency, "cny", 4);
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "currency 'cny'"));
	free(cause);
	r.currency[0] = '\0';
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	free(cause);
	memcpy(r.currency, "CNYX", 5);
	ck_assert_int_eq(billing_rule_validate(&r, &cause), -1);
	free(cause);
}
END_TEST

/* ---- one run ---- */

struct run_case {
	const char *what;
	money_t price;
	enum billing_per per;
	enum billing_unit unit;
	int64_t min_billed;
	int64_t secs;
	int64_t want_billed;
	money_t want_cost;
};

static const struct run_case runs[] = {
	/* Same 2.69/h, 10 min: 26900 * 600/3600 = 4483.33 -> 4484. */
	{ "10m per second", P269, BILL_PER_HOUR, BILL_SECOND, 0, 600, 600,
	    4484 },
	{ "10m per minute", P269, BILL_PER_HOUR, BILL_MINUTE, 0, 600, 600,
	    4484 },
	/* A started hour is a whole hour: 26900. */
	{ "10m per hour", P269, BILL_PER_HOUR, BILL_HOUR, 0, 600, 3600, 26900 },
	/* 10m01s: 26900 * 601/3600 = 4490.81 -> 4491. */
	{ "601s per second", P269, BILL_PER_HOUR, BILL_SECOND, 0, 601, 601,
	    4491 },
	/* 11 started minutes: 26900 * 660/3600 = 4931.67 -> 4932. */
	{ "601s per minute", P269, BILL_PER_HOUR, BILL_MINUTE, 0, 601, 660,
	    4932 },
	{ "601s per hour", P269, BILL_PER_HOUR, BILL_HOUR, 0, 601, 3600,
	    26900 },
	/* 1h00m01s starts a second hour: 2 * 26900 = 53800. */
	{ "3601s per hour", P269, BILL_PER_HOUR, BILL_HOUR, 0, 3601, 7200,
	    53800 },
	{ "1h per second", P269, BILL_PER_HOUR, BILL_SECOND, 0, 3600, 3600,
	    26900 },
	/* Start and stop within one unit. 30 s in one minute: 26900/60 =
	   448.33 -> 449. */
	{ "30s per minute", P269, BILL_PER_HOUR, BILL_MINUTE, 0, 30, 60, 449 },
	{ "1s per hour", P269, BILL_PER_HOUR, BILL_HOUR, 0, 1, 3600, 26900 },
	/* One second: 26900/3600 = 7.47 -> 8. */
	{ "1s per second", P269, BILL_PER_HOUR, BILL_SECOND, 0, 1, 1, 8 },
	/* A zero-length run costs the minimum charge only. */
	{ "0s, no minimum", P269, BILL_PER_HOUR, BILL_HOUR, 0, 0, 0, 0 },
	{ "0s, minimum 10m", P269, BILL_PER_HOUR, BILL_SECOND, 600, 0, 600,
	    4484 },
	{ "negative, no minimum", P269, BILL_PER_HOUR, BILL_MINUTE, 0, -5, 0,
	    0 },
	/* Minimum charge: 90 s billed as 10 min = 4484 (as above). */
	{ "90s, minimum 10m", P269, BILL_PER_HOUR, BILL_SECOND, 600, 90, 600,
	    4484 },
	/* Above the minimum it no longer matters: 15 min = 26900/4 = 6725. */
	{ "15m, minimum 10m", P269, BILL_PER_HOUR, BILL_SECOND, 600, 900, 900,
	    6725 },
	/* Minimum 90 s, then whole minutes: 2 min = 26900/30 = 896.67 ->
	   897. */
	{ "30s, minimum 90s, per minute", P269, BILL_PER_HOUR, BILL_MINUTE, 90,
	    30, 120, 897 },
	{ "30s, minimum 10m, per hour", P269, BILL_PER_HOUR, BILL_HOUR, 600, 30,
	    3600, 26900 },
	/* 0.05/min billed per minute is exact: 7m30s -> 8 min = 0.40. */
	{ "0.05/min, 450s per minute", 500, BILL_PER_MINUTE, BILL_MINUTE, 0,
	    450, 480, 4000 },
	/* Per second: 500 * 450/60 = 3750 exactly. */
	{ "0.05/min, 450s per second", 500, BILL_PER_MINUTE, BILL_SECOND, 0,
	    450, 450, 3750 },
	/* 0.001/s by the hour: 61 min -> 2 h = 7200 * 10 = 72000. */
	{ "0.001/s, 3660s per hour", 10, BILL_PER_SECOND, BILL_HOUR, 0, 3660,
	    7200, 72000 },
	/* 60/day for one hour: 600000 * 3600/86400 = 25000 exactly. */
	{ "60/day, 1h per second", 600000, BILL_PER_DAY, BILL_SECOND, 0, 3600,
	    3600, 25000 },
	/* 61 s -> 2 min: 600000 * 120/86400 = 833.33 -> 834. */
	{ "60/day, 61s per minute", 600000, BILL_PER_DAY, BILL_MINUTE, 0, 61,
	    120, 834 },
	{ "free", 0, BILL_PER_HOUR, BILL_HOUR, 0, 601, 3600, 0 },
	/* A year at 2.69/h: 26900 * 8760 = 235644000 (23,564.40). */
	{ "a year", P269, BILL_PER_HOUR, BILL_HOUR, 0, 365 * DAY, 365 * DAY,
	    235644000 },
};

START_TEST(test_run_cost)
{
	const struct run_case *c = &runs[_i];
	struct billing_rule r;
	int64_t billed = -1;
	money_t cost;

	rule_make(&r, c->price, c->per, c->unit, c->min_billed, 0);
	cost = billing_run_cost(&r, c->secs, &billed);
	ck_assert_msg(billed == c->want_billed, "%s: billed %lld, want %lld",
	    c->what, (long long)billed, (long long)c->want_billed);
	ck_assert_msg(cost == c->want_cost, "%s: cost %lld, want %lld", c->what,
	    (long long)cost, (long long)c->want_cost);
	ck_assert_int_eq(billing_run_cost(&r, c->secs, NULL), cost);
}
END_TEST

struct other_cost_case {
	const char *what;
	int egress;
	money_t price; /* per day, or per GB */
	int64_t amount;
	money_t want;
};

static const struct other_cost_case other_costs[] = {
	/* Storage 1.20/day = 12000 per day, prorated per second. */
	{ "3 days stopped", 0, 12000, 3 * DAY, 36000 },
	{ "36h stopped", 0, 12000, 36 * HOUR, 18000 },
	/* 12000/86400 = 0.139 -> 1. */
	{ "1s stopped", 0, 12000, 1, 1 },
	{ "0s stopped", 0, 12000, 0, 0 },
	{ "no storage price", 0, 0, DAY, 0 },
	/* Egress 0.80/GB = 8000 per 10^9 bytes. */
	{ "1.5 GB", 1, 8000, 1500000000, 12000 },
	{ "1 byte", 1, 8000, 1, 1 },
	{ "0 bytes", 1, 8000, 0, 0 },
	{ "1 TB", 1, 8000, 1000000000000LL, 8000000 },
	{ "no egress price", 1, 0, 1000000000000LL, 0 },
};

START_TEST(test_other_cost)
{
	const struct other_cost_case *c = &other_costs[_i];
	struct billing_rule r;
	money_t got;

	rule_make(&r, P269, BILL_PER_HOUR, BILL_SECOND, 0, 0);
	if (c->egress) {
		r.egress_per_gb = c->price;
		got = billing_egress_cost(&r, c->amount);
	} else {
		r.stopped_per_day = c->price;
		got = billing_stopped_cost(&r, c->amount);
	}
	ck_assert_msg(got == c->want, "%s: %lld, want %lld", c->what,
	    (long long)got, (long long)c->want);
}
END_TEST

/* ---- windows ---- */

struct window_case {
	const char *what;
	enum billing_unit unit;
	int64_t min_billed;
	money_t stopped_per_day;
	struct billing_interval iv[4];
	size_t n;
	int64_t from, to;
	struct billing_total want; /* currency filled in by the test */
};

#define RUN(a, b)                                                              \
	{                                                                      \
		(a), (b), BILL_RUNNING, 0                                      \
	}
/* Running again after an unknown stretch, seen again: the run goes on. */
#define RESUME(a, b)                                                           \
	{                                                                      \
		(a), (b), BILL_RUNNING, 1                                      \
	}
#define STOP(a, b)                                                             \
	{                                                                      \
		(a), (b), BILL_STOPPED, 0                                      \
	}
#define UNK(a, b)                                                              \
	{                                                                      \
		(a), (b), BILL_UNKNOWN, 0                                      \
	}
/* running, billed, starts, stopped, unknown, compute, storage */
#define TOTAL(ru, bi, st, so, un, co, sto)                                     \
	{                                                                      \
		"", (ru), (bi), (st), (so), (un), (co), (sto), 0               \
	}
/* The same with what the unknown stretches cost, of compute. */
#define TOTALU(ru, bi, st, so, un, co, sto, uco)                               \
	{                                                                      \
		"", (ru), (bi), (st), (so), (un), (co), (sto), (uco)           \
	}

#define H1 (NOV1 + HOUR)
static const struct window_case windows[] = {
	/* 22:00 Oct 31 to 02:00 Nov 1 per second: two hours each side,
	   2 * 26900 = 53800 each. */
	{ "per second, before midnight", BILL_SECOND, 0, 0,
	    { RUN(NOV1 - 2 * HOUR, NOV1 + 2 * HOUR) }, 1, OCT31, NOV1,
	    TOTAL(7200, 7200, 1, 0, 0, 53800, 0) },
	{ "per second, after midnight", BILL_SECOND, 0, 0,
	    { RUN(NOV1 - 2 * HOUR, NOV1 + 2 * HOUR) }, 1, NOV1, NOV1 + DAY,
	    TOTAL(7200, 7200, 0, 0, 0, 53800, 0) },
	/* 23:30 to 00:10 per hour: the one hour is charged when it starts,
	   on Oct 31 (26900); Nov 1 has 10 min of running and no charge. */
	{ "per hour, 40m over midnight, Oct 31", BILL_HOUR, 0, 0,
	    { RUN(NOV1 - 1800, NOV1 + 600) }, 1, OCT31, NOV1,
	    TOTAL(1800, 3600, 1, 0, 0, 26900, 0) },
	{ "per hour, 40m over midnight, Nov 1", BILL_HOUR, 0, 0,
	    { RUN(NOV1 - 1800, NOV1 + 600) }, 1, NOV1, NOV1 + DAY,
	    TOTAL(600, 0, 0, 0, 0, 0, 0) },
	/* 23:30 to 00:40: the second hour starts at 00:30, on Nov 1. */
	{ "per hour, 70m over midnight, Nov 1", BILL_HOUR, 0, 0,
	    { RUN(NOV1 - 1800, NOV1 + 2400) }, 1, NOV1, NOV1 + DAY,
	    TOTAL(2400, 3600, 0, 0, 0, 26900, 0) },
	/* Three 5-minute runs in one hour, per hour: each start is billed
	   an hour, 3 * 26900 = 80700 for 15 minutes of running. */
	{ "three short runs per hour", BILL_HOUR, 0, 0,
	    { RUN(NOV1 + 10 * HOUR, NOV1 + 10 * HOUR + 300),
		RUN(NOV1 + 10 * HOUR + 600, NOV1 + 10 * HOUR + 900),
		RUN(NOV1 + 10 * HOUR + 1800, NOV1 + 10 * HOUR + 2100) },
	    3, NOV1 + 10 * HOUR, NOV1 + 11 * HOUR,
	    TOTAL(900, 10800, 3, 0, 0, 80700, 0) },
	/* The same per second: each run rounds on its own, 26900 * 300/3600
	   = 2241.67 -> 2242, three times 6726 (one 15-minute run: 6725). */
	{ "three short runs per second", BILL_SECOND, 0, 0,
	    { RUN(NOV1 + 10 * HOUR, NOV1 + 10 * HOUR + 300),
		RUN(NOV1 + 10 * HOUR + 600, NOV1 + 10 * HOUR + 900),
		RUN(NOV1 + 10 * HOUR + 1800, NOV1 + 10 * HOUR + 2100) },
	    3, NOV1 + 10 * HOUR, NOV1 + 11 * HOUR,
	    TOTAL(900, 900, 3, 0, 0, 6726, 0) },
	/* Nov 1 09:00-21:00 running (12 * 26900 = 322800), then stopped for
	   three days at 1.20/day: Nov 1 has 3 h stopped (12000/8 = 1500),
	   Nov 2 a whole day (12000), Nov 4 21 h (12000 * 21/24 = 10500). */
	{ "stopped, day 1", BILL_SECOND, 0, 12000,
	    { RUN(NOV1 + 9 * HOUR, NOV1 + 21 * HOUR),
		STOP(NOV1 + 21 * HOUR, NOV1 + 3 * DAY + 21 * HOUR) },
	    2, NOV1, NOV1 + DAY,
	    TOTAL(43200, 43200, 1, 10800, 0, 322800, 1500) },
	{ "stopped, day 2", BILL_SECOND, 0, 12000,
	    { RUN(NOV1 + 9 * HOUR, NOV1 + 21 * HOUR),
		STOP(NOV1 + 21 * HOUR, NOV1 + 3 * DAY + 21 * HOUR) },
	    2, NOV1 + DAY, NOV1 + 2 * DAY, TOTAL(0, 0, 0, DAY, 0, 0, 12000) },
	{ "stopped, day 4", BILL_SECOND, 0, 12000,
	    { RUN(NOV1 + 9 * HOUR, NOV1 + 21 * HOUR),
		STOP(NOV1 + 21 * HOUR, NOV1 + 3 * DAY + 21 * HOUR) },
	    2, NOV1 + 3 * DAY, NOV1 + 4 * DAY,
	    TOTAL(0, 0, 0, 21 * HOUR, 0, 0, 10500) },
	/* All four days: 1500 + 12000 + 12000 + 10500 = 36000 = 3 days. */
	{ "stopped, four days", BILL_SECOND, 0, 12000,
	    { RUN(NOV1 + 9 * HOUR, NOV1 + 21 * HOUR),
		STOP(NOV1 + 21 * HOUR, NOV1 + 3 * DAY + 21 * HOUR) },
	    2, NOV1, NOV1 + 4 * DAY,
	    TOTAL(43200, 43200, 1, 3 * DAY, 0, 322800, 36000) },
	/* Nov 30 21:00 to Dec 1 01:00 per second: November 3 h (80700),
	   December 1 h (26900). */
	{ "month end, November", BILL_SECOND, 0, 0,
	    { RUN(DEC1 - 3 * HOUR, DEC1 + HOUR) }, 1, NOV1, DEC1,
	    TOTAL(10800, 10800, 1, 0, 0, 80700, 0) },
	{ "month end, December", BILL_SECOND, 0, 0,
	    { RUN(DEC1 - 3 * HOUR, DEC1 + HOUR) }, 1, DEC1, DEC1 + 31 * DAY,
	    TOTAL(3600, 3600, 0, 0, 0, 26900, 0) },
	/* Stopped over the month end at 1.20/day: half a day each, 6000. */
	{ "stopped over month end", BILL_SECOND, 0, 12000,
	    { STOP(DEC1 - 12 * HOUR, DEC1 + 12 * HOUR) }, 1, NOV1, DEC1,
	    TOTAL(0, 0, 0, 43200, 0, 0, 6000) },
	/* Unknown is billed as running: 2 h with nothing before it is a
	   start of its own, 2 * 26900 = 53800, all of it unknown. */
	{ "unknown is billed as running", BILL_SECOND, 0, 12000,
	    { UNK(NOV1 + HOUR, NOV1 + 3 * HOUR) }, 1, NOV1, NOV1 + DAY,
	    TOTALU(0, 7200, 1, 0, 7200, 53800, 0, 53800) },
	/* Per second, 10 min minimum: running 20 min, unknown 5, running
	   again (seen again, resumes) 25: one run of 3000 s, 26900 * 3000 /
	   3600 = 22416.67 -> 22417. The unknown part is the run's growth
	   over it: by 25 min 11208.33 -> 11209, by 20 min 8966.67 -> 8967,
	   2242. (Each stretch a run of its own, as before: 8967 + 11209 =
	   20176, the unknown 5 min free.) */
	{ "unknown between runs, per second", BILL_SECOND, 600, 0,
	    { RUN(H1, H1 + 1200), UNK(H1 + 1200, H1 + 1500),
		RESUME(H1 + 1500, H1 + 3000) },
	    3, NOV1, NOV1 + DAY,
	    TOTALU(2700, 3000, 1, 0, 300, 22417, 0, 2242) },
	/* Per minute, 10 min minimum: running 200 s, unknown 700 s, running
	   again 100 s: one run of 1000 s, 17 minutes (1020 s), 26900 * 1020
	   / 3600 = 7621.67 -> 7622; no second minimum (the old way: 4484 +
	   4484 = 8968 and the unknown free). Unknown: by 900 s 15 min, 6725,
	   less the minimum charged at the start, 4484: 2241. */
	{ "unknown between runs, per minute", BILL_MINUTE, 600, 0,
	    { RUN(H1, H1 + 200), UNK(H1 + 200, H1 + 900),
		RESUME(H1 + 900, H1 + 1000) },
	    3, NOV1, NOV1 + DAY, TOTALU(300, 1020, 1, 0, 700, 7622, 0, 2241) },
	/* Per hour, 1 h minimum: running 30 min, unknown 2200 s, running
	   again 3500 s: one run of 7500 s, 3 hours, 80700. The second hour
	   starts in the unknown stretch: 26900 of it. (The old way: 26900
	   + 26900, a second minimum for the same session.) */
	{ "unknown between runs, per hour", BILL_HOUR, HOUR, 0,
	    { RUN(H1, H1 + 1800), UNK(H1 + 1800, H1 + 4000),
		RESUME(H1 + 4000, H1 + 7500) },
	    3, NOV1, NOV1 + DAY,
	    TOTALU(5300, 3 * HOUR, 1, 0, 2200, 80700, 0, 26900) },
	/* The same, but running again is not known to resume (a start
	   stated after the outage): the run through the unknown stretch is
	   4000 s, 2 hours (53800); the new start 1000 s, its minimum hour
	   (26900). */
	{ "unknown, then a new start", BILL_HOUR, HOUR, 0,
	    { RUN(H1, H1 + 1800), UNK(H1 + 1800, H1 + 4000),
		RUN(H1 + 4000, H1 + 5000) },
	    3, NOV1, NOV1 + DAY,
	    TOTALU(2800, 3 * HOUR, 2, 0, 2200, 80700, 0, 26900) },
	/* Unknown until now (the ledger's last word): per minute, 30 min
	   running and 10 min unknown are 40 minutes, 17933.33 -> 17934;
	   30 min alone 13450, so the unknown 10 min cost 4484. */
	{ "unknown until now", BILL_MINUTE, 0, 0,
	    { RUN(H1, H1 + 1800), UNK(H1 + 1800, H1 + 2400) }, 2, NOV1,
	    NOV1 + DAY, TOTALU(1800, 2400, 1, 0, 600, 17934, 0, 4484) },
	/* A window that ends 5 min into it: 35 minutes, 15691.67 -> 15692,
	   of which unknown 15692 - 13450 = 2242. */
	{ "unknown until now, window cut", BILL_MINUTE, 0, 0,
	    { RUN(H1, H1 + 1800), UNK(H1 + 1800, H1 + 2400) }, 2, NOV1,
	    H1 + 2100, TOTALU(1800, 2100, 1, 0, 300, 15692, 0, 2242) },
	/* Unknown, then stopped, per second at 1.20/day stored: 1800 s
	   running and 200 s unknown are 2000 s, 14944.44 -> 14945 (13450
	   for the running part: 1495 unknown); stopped an hour, 500. */
	{ "unknown, then stopped", BILL_SECOND, 0, 12000,
	    { RUN(H1, H1 + 1800), UNK(H1 + 1800, H1 + 2000),
		STOP(H1 + 2000, H1 + 5600) },
	    3, NOV1, NOV1 + DAY,
	    TOTALU(1800, 2000, 1, 3600, 200, 14945, 500, 1495) },
	/* Unknown after a stop is a start of its own: 100 s under the 10
	   min minimum, 4484; the run before it 1200 s, 8967; stopped an
	   hour, 500. */
	{ "unknown after a stop", BILL_SECOND, 600, 12000,
	    { RUN(H1, H1 + 1200), STOP(H1 + 1200, H1 + 4800),
		UNK(H1 + 4800, H1 + 4900) },
	    3, NOV1, NOV1 + DAY,
	    TOTALU(1200, 1800, 2, 3600, 100, 13451, 500, 4484) },
	/* Per hour, running 23:30-23:50 then unknown to 00:40: one run of
	   70 min, 2 hours. The first was charged at 23:30 (Oct 31); the
	   second starts at 00:30, in the unknown stretch, on Nov 1. */
	{ "per hour, unknown over midnight, Oct 31", BILL_HOUR, 0, 0,
	    { RUN(NOV1 - 1800, NOV1 - 600), UNK(NOV1 - 600, NOV1 + 2400) }, 2,
	    OCT31, NOV1, TOTALU(1200, HOUR, 1, 0, 600, 26900, 0, 0) },
	{ "per hour, unknown over midnight, Nov 1", BILL_HOUR, 0, 0,
	    { RUN(NOV1 - 1800, NOV1 - 600), UNK(NOV1 - 600, NOV1 + 2400) }, 2,
	    NOV1, NOV1 + DAY, TOTALU(0, HOUR, 0, 0, 2400, 26900, 0, 26900) },
	/* A zero-length run with a 10 min minimum: 4484, where it starts. */
	{ "0s run, minimum 10m", BILL_SECOND, 600, 0,
	    { RUN(NOV1 + 5 * HOUR, NOV1 + 5 * HOUR) }, 1, NOV1, NOV1 + DAY,
	    TOTAL(0, 600, 1, 0, 0, 4484, 0) },
	{ "0s run at the window end", BILL_SECOND, 600, 0,
	    { RUN(NOV1 + 5 * HOUR, NOV1 + 5 * HOUR) }, 1, NOV1, NOV1 + 5 * HOUR,
	    TOTAL(0, 0, 0, 0, 0, 0, 0) },
	/* 2 min over midnight with a 10 min minimum: the minimum (4484) is
	   charged at the start, on Oct 31; Nov 1 gets nothing. */
	{ "minimum over midnight, Oct 31", BILL_SECOND, 600, 0,
	    { RUN(NOV1 - 60, NOV1 + 60) }, 1, OCT31, NOV1,
	    TOTAL(60, 600, 1, 0, 0, 4484, 0) },
	{ "minimum over midnight, Nov 1", BILL_SECOND, 600, 0,
	    { RUN(NOV1 - 60, NOV1 + 60) }, 1, NOV1, NOV1 + DAY,
	    TOTAL(60, 0, 0, 0, 0, 0, 0) },
	{ "outside the window", BILL_SECOND, 600, 12000,
	    { RUN(NOV1 - 2 * DAY, NOV1 - DAY), STOP(NOV1 - DAY, NOV1) }, 2,
	    NOV1, NOV1 + DAY, TOTAL(0, 0, 0, 0, 0, 0, 0) },
	{ "empty ledger", BILL_HOUR, 600, 12000, { RUN(0, 0) }, 0, NOV1,
	    NOV1 + DAY, TOTAL(0, 0, 0, 0, 0, 0, 0) },
};

START_TEST(test_window)
{
	const struct window_case *c = &windows[_i];
	struct billing_rule r;
	struct billing_total got, want = c->want;
	char *cause = NULL;

	rule_make(&r, P269, BILL_PER_HOUR, c->unit, c->min_billed,
	    c->stopped_per_day);
	memcpy(want.currency, "CNY", 4);
	ck_assert_msg(
	    billing_window(&r, c->iv, c->n, c->from, c->to, &got, &cause) == 0,
	    "%s: %s", c->what, cause);
	total_eq(&got, &want, c->what);
}
END_TEST

struct window_error_case {
	struct billing_interval iv[2];
	size_t n;
	int64_t from, to;
	const char *why;
};

static const struct window_error_case window_errors[] = {
	{ { RUN(NOV1, NOV1 + 1) }, 1, NOV1 + 1, NOV1, "ends (1793491200)" },
	{ { RUN(NOV1 + 5, NOV1) }, 1, NOV1, DEC1, "ends before it starts" },
	{ { RUN(NOV1, NOV1 + 10), STOP(NOV1 + 5, NOV1 + 20) }, 2, NOV1, DEC1,
	    "overlaps" },
	{ { RUN(NOV1 + 10, NOV1 + 20), STOP(NOV1, NOV1 + 5) }, 2, NOV1, DEC1,
	    "overlaps" },
	{ { { NOV1, NOV1 + 10, (enum billing_state)9, 0 } }, 1, NOV1, DEC1,
	    "state 9" },
	{ { RUN(-5, 10) }, 1, NOV1, DEC1, "interval start -5" },
	{ { RUN(0, 10) }, 1, -1, DEC1, "window start -1" },
};

START_TEST(test_window_error)
{
	const struct window_error_case *c = &window_errors[_i];
	struct billing_rule r;
	struct billing_total got;
	char *cause = NULL;

	rule_make(&r, P269, BILL_PER_HOUR, BILL_HOUR, 0, 0);
	ck_assert_int_eq(
	    billing_window(&r, c->iv, c->n, c->from, c->to, &got, &cause), -1);
	ck_assert_msg(strstr(cause, c->why) != NULL, "cause: %s", cause);
	free(cause);

	r.currency[0] = '\0';
	ck_assert_int_eq(
	    billing_window(&r, c->iv, 0, NOV1, DEC1, &got, &cause), -1);
	free(cause);
}
END_TEST

/* ---- explain: the lines of a bill ---- */

/* state, start, end, secs, window_secs, billed, units, min, starts,
   window_billed, charge, before, amount */
#define LINE(st, a, b, se, ws, bi, un, mi, sts, wb, ch, be, am)                \
	{                                                                      \
		(st), (a), (b), (se), (ws), (bi), (un), (mi), (sts), (wb),     \
		    (ch), (be), (am), 0                                        \
	}
/* The same for a line billed as part of the run before it. */
#define CONT(st, a, b, se, ws, bi, un, mi, sts, wb, ch, be, am)                \
	{                                                                      \
		(st), (a), (b), (se), (ws), (bi), (un), (mi), (sts), (wb),     \
		    (ch), (be), (am), 1                                        \
	}

struct explain_case {
	const char *what;
	enum billing_unit unit;
	int64_t min_billed;
	money_t stopped_per_day;
	struct billing_interval iv[4];
	size_t n;
	int64_t from, to;
	struct billing_line want[4];
	size_t nwant;
};

static const struct explain_case explains[] = {
	/* Per minute, 10 min minimum, at 2.69/h and 1.20/day stored:
	   a 3m20s run is billed the minimum, 600 s = 10 units, 26900 * 600 /
	   3600 = 4483.33 -> 4484; 4 h stopped, 12000 * 4 / 24 = 2000; a run
	   of 2h00m30s (7230 s) is billed 121 whole minutes (7260 s),
	   26900 * 7260 / 3600 = 54248.33 -> 54249, no minimum; then 3370 s
	   unknown, billed as that run going on: 10600 s from its start,
	   177 minutes (10620 s), 26900 * 10620 / 3600 = 79355, of which the
	   unknown line gets 79355 - 54249 = 25106 for its 56 minutes (it was
	   not billed before, and its 56 minutes free). Lines 4484 + 2000 +
	   54249 + 25106 = 85839. */
	{ "per minute with a minimum", BILL_MINUTE, 600, 12000,
	    { RUN(H1, H1 + 200), STOP(H1 + 200, H1 + 4 * HOUR + 200),
		RUN(H1 + 4 * HOUR + 200, H1 + 6 * HOUR + 230),
		UNK(H1 + 6 * HOUR + 230, NOV1 + 8 * HOUR) },
	    4, NOV1, NOV1 + DAY,
	    { LINE(BILL_RUNNING, H1, H1 + 200, 200, 200, 600, 10, 1, 1, 600,
		  4484, 0, 4484),
		LINE(BILL_STOPPED, H1 + 200, H1 + 4 * HOUR + 200, 4 * HOUR,
		    4 * HOUR, 0, 0, 0, 0, 0, 2000, 0, 2000),
		LINE(BILL_RUNNING, H1 + 4 * HOUR + 200, H1 + 6 * HOUR + 230,
		    7230, 7230, 7260, 121, 0, 1, 7260, 54249, 0, 54249),
		CONT(BILL_UNKNOWN, H1 + 6 * HOUR + 230, NOV1 + 8 * HOUR, 3370,
		    3370, 3360, 56, 0, 0, 3360, 25106, 0, 25106) },
	    4 },
	/* Hourly: running 30 min, unknown 2200 s, running again (resumes)
	   1000 s: one run of 5000 s, 2 hours. The first hour is the
	   running line's, the second starts in the unknown stretch (26900),
	   running again starts none: 0. */
	{ "hourly, unknown between runs", BILL_HOUR, 0, 0,
	    { RUN(H1, H1 + 1800), UNK(H1 + 1800, H1 + 4000),
		RESUME(H1 + 4000, H1 + 5000) },
	    3, NOV1, NOV1 + DAY,
	    { LINE(BILL_RUNNING, H1, H1 + 1800, 1800, 1800, HOUR, 1, 0, 1, HOUR,
		  26900, 0, 26900),
		CONT(BILL_UNKNOWN, H1 + 1800, H1 + 4000, 2200, 2200, HOUR, 1, 0,
		    0, HOUR, 26900, 0, 26900),
		CONT(BILL_RUNNING, H1 + 4000, H1 + 5000, 1000, 1000, 0, 0, 0, 0,
		    0, 0, 0, 0) },
	    3 },
	/* The same from 01:50, in the unknown stretch: the running line is
	   past (not a line); the unknown one's second hour starts at 02:00,
	   inside the window: all of its 26900. */
	{ "hourly, a window from inside the unknown stretch", BILL_HOUR, 0, 0,
	    { RUN(H1, H1 + 1800), UNK(H1 + 1800, H1 + 4000),
		RESUME(H1 + 4000, H1 + 5000) },
	    3, H1 + 3000, NOV1 + DAY,
	    { CONT(BILL_UNKNOWN, H1 + 1800, H1 + 4000, 2200, 1000, HOUR, 1, 0,
		  0, HOUR, 26900, 0, 26900),
		CONT(BILL_RUNNING, H1 + 4000, H1 + 5000, 1000, 1000, 0, 0, 0, 0,
		    0, 0, 0, 0) },
	    2 },
	/* Hourly, 23:30 to 00:40 seen from Nov 1: the run's 70 min are
	   billed 2 hours (53800); the first (26900) was charged on Oct 31
	   when it started, so Nov 1 gets the second hour, 26900. */
	{ "hourly, a run over midnight", BILL_HOUR, 0, 0,
	    { RUN(NOV1 - 1800, NOV1 + 2400) }, 1, NOV1, NOV1 + DAY,
	    { LINE(BILL_RUNNING, NOV1 - 1800, NOV1 + 2400, 4200, 2400, 7200, 2,
		0, 0, 3600, 53800, 26900, 26900) },
	    1 },
	/* Hourly, a 20 min run with a 2 h minimum: 2 units, 53800. */
	{ "hourly, the minimum", BILL_HOUR, 2 * HOUR, 0, { RUN(H1, H1 + 1200) },
	    1, NOV1, NOV1 + DAY,
	    { LINE(BILL_RUNNING, H1, H1 + 1200, 1200, 1200, 7200, 2, 1, 1, 7200,
		53800, 0, 53800) },
	    1 },
	/* Per minute, 30 s with a 1 min minimum: whole units alone give
	   60 s, so the minimum changes nothing (26900 / 60 = 448.33 -> 449). */
	{ "a minimum the unit covers", BILL_MINUTE, 60, 0, { RUN(H1, H1 + 30) },
	    1, NOV1, NOV1 + DAY,
	    { LINE(BILL_RUNNING, H1, H1 + 30, 30, 30, 60, 1, 0, 1, 60, 449, 0,
		449) },
	    1 },
	/* Per second, the window ends an hour into a 2 h run: counted as if
	   it stopped there, 3600 s, 26900. */
	{ "per second, cut by the window end", BILL_SECOND, 0, 0,
	    { RUN(H1, H1 + 2 * HOUR) }, 1, NOV1, NOV1 + 2 * HOUR,
	    { LINE(BILL_RUNNING, H1, H1 + 2 * HOUR, HOUR, HOUR, HOUR, HOUR, 0,
		1, HOUR, 26900, 0, 26900) },
	    1 },
	/* Intervals the window does not see are no lines; a 0 s run with a
	   10 min minimum is one (26900 / 6 = 4483.33 -> 4484). */
	{ "outside the window, a 0 s start", BILL_SECOND, 600, 12000,
	    { RUN(NOV1 - 2 * DAY, NOV1 - DAY), STOP(NOV1 - DAY, H1),
		RUN(H1, H1), STOP(H1, H1) },
	    4, NOV1 + HOUR, NOV1 + DAY,
	    { LINE(BILL_RUNNING, H1, H1, 0, 0, 600, 600, 1, 1, 600, 4484, 0,
		4484) },
	    1 },
};

START_TEST(test_explain)
{
	const struct explain_case *c = &explains[_i];
	struct billing_rule r;
	struct billing_total got, want;
	struct billing_line *lines;
	size_t n, i;
	money_t sum = 0;
	char *cause = NULL;

	rule_make(&r, P269, BILL_PER_HOUR, c->unit, c->min_billed,
	    c->stopped_per_day);
	ck_assert_msg(billing_explain(&r, c->iv, c->n, c->from, c->to, &got,
			  &lines, &n, &cause) == 0,
	    "%s: %s", c->what, cause);
	ck_assert_msg(n == c->nwant, "%s: %zu lines", c->what, n);
	for (i = 0; i < n; i++) {
		const struct billing_line *l = &lines[i], *w = &c->want[i];
		ck_assert_msg(l->state == w->state && l->start == w->start &&
			l->end == w->end && l->secs == w->secs &&
			l->window_secs == w->window_secs &&
			l->billed_secs == w->billed_secs &&
			l->units == w->units &&
			l->min_applied == w->min_applied &&
			l->starts == w->starts &&
			l->window_billed == w->window_billed &&
			l->charge == w->charge && l->before == w->before &&
			l->amount == w->amount && l->continues == w->continues,
		    "%s: line %zu: secs %lld/%lld billed %lld units %lld min "
		    "%d charge %lld before %lld amount %lld continues %d",
		    c->what, i, (long long)l->secs, (long long)l->window_secs,
		    (long long)l->billed_secs, (long long)l->units,
		    l->min_applied, (long long)l->charge, (long long)l->before,
		    (long long)l->amount, l->continues);
		sum += l->amount;
	}
	/* The lines are the window's total, and billing_window's. */
	ck_assert_int_eq(sum, got.compute + got.storage);
	ck_assert_int_eq(
	    billing_window(&r, c->iv, c->n, c->from, c->to, &want, &cause), 0);
	total_eq(&got, &want, c->what);
	free(lines);
}
END_TEST

START_TEST(test_explain_error)
{
	struct billing_interval iv[] = { RUN(NOV1 + 5, NOV1) };
	struct billing_rule r;
	struct billing_total got;
	struct billing_line *lines;
	size_t n;
	char *cause = NULL;

	rule_make(&r, P269, BILL_PER_HOUR, BILL_HOUR, 0, 0);
	ck_assert_int_eq(
	    billing_explain(&r, iv, 1, NOV1, DEC1, &got, &lines, &n, &cause),
	    -1);
	ck_assert_str_eq(
	    cause, "interval 1793491205..1793491200 ends before it starts");
	ck_assert_uint_eq(n, 0);
	free(lines);
	free(cause);
}
END_TEST

/* ---- price history: runs spanning a change, charged piecewise ---- */

/* One history entry as a case row gives it: from, price, per, unit... */
struct price_row {
	int64_t from;
	money_t price;
	enum billing_per per;
	enum billing_unit unit;
	int64_t min_billed;
	money_t stopped_per_day;
};

struct history_case {
	const char *what;
	struct price_row p[3];
	size_t np;
	struct billing_interval iv[3];
	size_t n;
	int64_t from, to;
	struct billing_total want; /* currency filled in by the test */
};

#define P228 22800 /* 2.28 */
#define P498 49800 /* 4.98 */

static const struct history_case histories[] = {
	/* The example: a past run at 4.98/h per second, then `set
	   price=2.28/h`. 4.98 * 6665 s / 3600 = 9.2199 -> 92200 (9.22) is
	   kept; before price history it became 2.28 * 6665 / 3600 = 4.2212
	   -> 42212. The issue says 1h51m, 9.22 -> 4.23: 1h51m exactly
	   (6660 s) is 9.213 -> 9.21 and 4.218 -> 4.22, so its run was some
	   seconds over 1h51m (9.22 needs 6662..6668 s), and 4.23 matches
	   none of those (2.28 * 6668 / 3600 = 4.2231 -> 4.22). */
	{ "issue 15: a past run keeps its price",
	    { { NOV1, P498, BILL_PER_HOUR, BILL_SECOND, 0, 0 },
		{ NOV1 + DAY, P228, BILL_PER_HOUR, BILL_SECOND, 0, 0 } },
	    2, { RUN(NOV1 + HOUR, NOV1 + HOUR + 6665) }, 1, NOV1, DEC1,
	    TOTAL(6665, 6665, 1, 0, 0, 92200, 0) },
	/* A run after the change is at the new price: 42212 as above. */
	{ "a run after the change",
	    { { NOV1, P498, BILL_PER_HOUR, BILL_SECOND, 0, 0 },
		{ NOV1 + DAY, P228, BILL_PER_HOUR, BILL_SECOND, 0, 0 } },
	    2, { RUN(NOV1 + 2 * DAY, NOV1 + 2 * DAY + 6665) }, 1, NOV1, DEC1,
	    TOTAL(6665, 6665, 1, 0, 0, 42212, 0) },
	/* Per second, 100 s each side of a change at 01:00: 2.69 * 100 /
	   3600 = 747.22 and 2.28 * 100 / 3600 = 633.33, rounded once:
	   1380.56 -> 1381 (each rounded on its own would be 748 + 634). */
	{ "per second over a change, rounded once",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_SECOND, 0, 0 },
		{ NOV1 + HOUR, P228, BILL_PER_HOUR, BILL_SECOND, 0, 0 } },
	    2, { RUN(NOV1 + HOUR - 100, NOV1 + HOUR + 100) }, 1, NOV1, DEC1,
	    TOTAL(200, 200, 1, 0, 0, 1381, 0) },
	/* Per hour, 00:00 to 02:10 with a change at 01:30: three hours
	   billed, starting 00:00 and 01:00 at 2.69, 02:00 at 2.28:
	   2 * 26900 + 22800 = 76600. */
	{ "per hour: each unit at the price when it starts",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_HOUR, 0, 0 },
		{ NOV1 + HOUR + 1800, P228, BILL_PER_HOUR, BILL_HOUR, 0, 0 } },
	    2, { RUN(NOV1, NOV1 + 2 * HOUR + 600) }, 1, NOV1, DEC1,
	    TOTAL(7800, 3 * HOUR, 1, 0, 0, 76600, 0) },
	/* The same cut at 01:30: by then two hours have started, both at
	   2.69 (53800); the third (02:00, 2.28) falls after: 22800. */
	{ "per hour: window before the cut",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_HOUR, 0, 0 },
		{ NOV1 + HOUR + 1800, P228, BILL_PER_HOUR, BILL_HOUR, 0, 0 } },
	    2, { RUN(NOV1, NOV1 + 2 * HOUR + 600) }, 1, NOV1,
	    NOV1 + HOUR + 1800, TOTAL(5400, 2 * HOUR, 1, 0, 0, 53800, 0) },
	{ "per hour: window after the cut",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_HOUR, 0, 0 },
		{ NOV1 + HOUR + 1800, P228, BILL_PER_HOUR, BILL_HOUR, 0, 0 } },
	    2, { RUN(NOV1, NOV1 + 2 * HOUR + 600) }, 1, NOV1 + HOUR + 1800,
	    DEC1, TOTAL(2400, HOUR, 0, 0, 0, 22800, 0) },
	/* Unit and minimum from the rule at the start: per minute with a
	   10 min minimum, then from 00:02 per hour without one. A 3 min
	   run at 00:00 is billed 10 min in minutes: units at 00:00 and
	   00:01 at 2.69, the eight from 00:02 at 2.28: (2 * 60 * 26900 +
	   8 * 60 * 22800) / 3600 = 3936.67 -> 3937. A 5 min run at 00:10
	   is under the new rule: one hour, 22800. 3937 + 22800 = 26737. */
	{ "unit and minimum from the rule at the start",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_MINUTE, 600, 0 },
		{ NOV1 + 120, P228, BILL_PER_HOUR, BILL_HOUR, 0, 0 } },
	    2, { RUN(NOV1, NOV1 + 180), RUN(NOV1 + 600, NOV1 + 900) }, 2, NOV1,
	    DEC1, TOTAL(480, 600 + HOUR, 2, 0, 0, 26737, 0) },
	/* Prices per different periods: 100/day for 1000 s (11574.07),
	   then 2.69/h for 1000 s (7472.22): 19046.30 -> 19047 (each on its
	   own: 11575 + 7473 = 19048). */
	{ "per day, then per hour",
	    { { NOV1, 1000000, BILL_PER_DAY, BILL_SECOND, 0, 0 },
		{ NOV1 + 1000, P269, BILL_PER_HOUR, BILL_SECOND, 0, 0 } },
	    2, { RUN(NOV1, NOV1 + 2000) }, 1, NOV1, DEC1,
	    TOTAL(2000, 2000, 1, 0, 0, 19047, 0) },
	/* Before the first entry its rule is in force: an hour on Oct 31
	   at a price first set on Nov 1, 26900. */
	{ "the first price holds before it too",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_HOUR, 0, 0 },
		{ NOV1 + DAY, P228, BILL_PER_HOUR, BILL_HOUR, 0, 0 } },
	    2, { RUN(NOV1 - HOUR, NOV1 - 600) }, 1, OCT31, DEC1,
	    TOTAL(3000, HOUR, 1, 0, 0, 26900, 0) },
	/* Three prices in one hourly run: 00:00 at 2.69, 01:00 at 2.28
	   (from 00:30), 02:00 at 4.98 (from 01:59): 26900 + 22800 + 49800
	   = 99500. */
	{ "three prices in one run",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_HOUR, 0, 0 },
		{ NOV1 + 1800, P228, BILL_PER_HOUR, BILL_HOUR, 0, 0 },
		{ NOV1 + 2 * HOUR - 60, P498, BILL_PER_HOUR, BILL_HOUR, 0,
		    0 } },
	    3, { RUN(NOV1, NOV1 + 2 * HOUR + 1) }, 1, NOV1, DEC1,
	    TOTAL(7201, 3 * HOUR, 1, 0, 0, 99500, 0) },
	/* Storage per second at the price then: stopped a day, 1.20/day
	   for 6 h (3000) then 0.50/day for 18 h (3750): 6750. */
	{ "storage over a change",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_SECOND, 0, 12000 },
		{ NOV1 + 6 * HOUR, P269, BILL_PER_HOUR, BILL_SECOND, 0,
		    5000 } },
	    2, { STOP(NOV1, NOV1 + DAY) }, 1, NOV1, DEC1,
	    TOTAL(0, 0, 0, DAY, 0, 0, 6750) },
	/* Per hour, running 00:00-00:30, then unknown to 02:10, with a
	   change to 2.28 at 01:30: one run of 3 hours, units from 00:00 and
	   01:00 at 2.69 and 02:00 at 2.28, 76600; all but the first hour
	   (26900) start in the unknown stretch: 49700. */
	{ "unknown over a change, per hour",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_HOUR, 0, 0 },
		{ NOV1 + HOUR + 1800, P228, BILL_PER_HOUR, BILL_HOUR, 0, 0 } },
	    2,
	    { RUN(NOV1, NOV1 + 1800), UNK(NOV1 + 1800, NOV1 + 2 * HOUR + 600) },
	    2, NOV1, DEC1,
	    TOTALU(1800, 3 * HOUR, 1, 0, 6000, 76600, 0, 49700) },
	/* 50 s at 1.20/day (6.94) and 50 s at 0.50/day (2.89): 9.84 -> 10,
	   rounded once; the interval outlives the window end. */
	{ "storage over a change, rounded once",
	    { { NOV1, P269, BILL_PER_HOUR, BILL_SECOND, 0, 12000 },
		{ NOV1 + 50, P269, BILL_PER_HOUR, BILL_SECOND, 0, 5000 } },
	    2, { STOP(NOV1, NOV1 + DAY) }, 1, NOV1, NOV1 + 100,
	    TOTAL(0, 0, 0, 100, 0, 0, 10) },
};

/* A history from a case's rows, in CNY. */
static void
history_make(struct billing_price *p, const struct price_row *row, size_t np)
{
	size_t i;

	for (i = 0; i < np; i++) {
		p[i].from = row[i].from;
		rule_make(&p[i].rule, row[i].price, row[i].per, row[i].unit,
		    row[i].min_billed, row[i].stopped_per_day);
	}
}

START_TEST(test_history)
{
	const struct history_case *c = &histories[_i];
	struct billing_price p[3];
	struct billing_total got, want = c->want;
	char *cause = NULL;

	history_make(p, c->p, c->np);
	memcpy(want.currency, "CNY", 4);
	ck_assert_msg(billing_window_prices(p, c->np, c->iv, c->n, c->from,
			  c->to, &got, &cause) == 0,
	    "%s: %s", c->what, cause);
	total_eq(&got, &want, c->what);
}
END_TEST

/* A history that is empty, out of order or mixes currencies is refused. */
START_TEST(test_history_error)
{
	struct billing_price p[2];
	struct billing_interval iv[] = { RUN(NOV1, NOV1 + HOUR) };
	struct billing_total got;
	char *cause = NULL;

	rule_make(&p[0].rule, P269, BILL_PER_HOUR, BILL_SECOND, 0, 0);
	p[1] = p[0];
	p[0].from = NOV1;
	p[1].from = NOV1;
	ck_assert_int_eq(
	    billing_window_prices(p, 0, iv, 1, NOV1, DEC1, &got, &cause), -1);
	ck_assert_str_eq(cause, "no price");
	free(cause);
	ck_assert_int_eq(
	    billing_window_prices(p, 2, iv, 1, NOV1, DEC1, &got, &cause), -1);
	ck_assert_str_eq(cause,
	    "price from 1793491200 is not after the one before it "
	    "(from 1793491200)");
	free(cause);
	p[1].from = NOV1 + 1;
	memcpy(p[1].rule.currency, "USD", 4);
	ck_assert_int_eq(
	    billing_window_prices(p, 2, iv, 1, NOV1, DEC1, &got, &cause), -1);
	ck_assert_str_eq(
	    cause, "price from 1793491201 is in USD, the one before in CNY");
	free(cause);
	ck_assert_ptr_eq(billing_price_at(p, 2, NOV1 - 1), &p[0].rule);
	ck_assert_ptr_eq(billing_price_at(p, 2, NOV1 + 1), &p[1].rule);
}
END_TEST

/*
 * Explain under a price history: the lines come from the loop that
 * charges the window, with the pieces of each line's charge.
 * History: 2.69/h per hour, 1.20/day stored; from 01:30 2.28/h and
 * 2.40/day; from 04:10 1.20/day again (2.28/h still). Ledger: running
 * 00:00-02:10, stopped 02:10-06:10.
 * The run, 7800 s, is billed 3 hours: units start 00:00 and 01:00 (before
 * 01:30, 2.69) and 02:00 (2.28): 2 * 26900 + 22800 = 76600 (7.66), in
 * two pieces (the 04:10 change is past its last unit).
 * The stop: 02:10-04:10 at 2.40/day, 24000 * 7200 / 86400 = 2000, and
 * 04:10-06:10 at 1.20/day, 12000 * 7200 / 86400 = 1000: 3000 (0.30).
 * Lines 76600 + 3000 = 79600 (7.96), billing_window_prices' total.
 * From 01:30 on, the run's two first hours (53800) were charged before
 * the window: it gets 22800, the stop all of its 3000.
 */
static const struct billing_interval explain_prices_iv[] = {
	RUN(NOV1, NOV1 + 2 * HOUR + 600),
	STOP(NOV1 + 2 * HOUR + 600, NOV1 + 6 * HOUR + 600),
};

struct explain_prices_case {
	int64_t from;
	money_t before0, amount0; /* the run's line */
};

static const struct explain_prices_case explain_prices_cases[] = {
	{ NOV1, 0, 76600 },
	{ NOV1 + HOUR + 1800, 53800, 22800 },
};

START_TEST(test_explain_prices)
{
	const struct explain_prices_case *c = &explain_prices_cases[_i];
	struct billing_price p[3];
	struct billing_total got, want;
	struct billing_line *lines;
	struct billing_piece *pc;
	size_t n, npc, i;
	money_t sum = 0;
	char *cause = NULL;

	rule_make(&p[0].rule, P269, BILL_PER_HOUR, BILL_HOUR, 0, 12000);
	p[0].from = NOV1;
	rule_make(&p[1].rule, P228, BILL_PER_HOUR, BILL_HOUR, 0, 24000);
	p[1].from = NOV1 + HOUR + 1800;
	rule_make(&p[2].rule, P228, BILL_PER_HOUR, BILL_HOUR, 0, 12000);
	p[2].from = NOV1 + 4 * HOUR + 600;
	ck_assert_msg(
	    billing_explain_prices(p, 3, explain_prices_iv, 2, c->from, DEC1,
		&got, &lines, &n, &pc, &npc, &cause) == 0,
	    "%s", cause);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(lines[0].state, BILL_RUNNING);
	ck_assert_int_eq(lines[0].billed_secs, 3 * HOUR);
	ck_assert_int_eq(lines[0].units, 3);
	ck_assert_int_eq(lines[0].charge, 76600);
	ck_assert_int_eq(lines[0].before, c->before0);
	ck_assert_int_eq(lines[0].amount, c->amount0);
	ck_assert_int_eq(lines[1].state, BILL_STOPPED);
	ck_assert_int_eq(lines[1].charge, 3000);
	ck_assert_int_eq(lines[1].before, 0);
	ck_assert_int_eq(lines[1].amount, 3000);

	/* The pieces: 2 hours at 2.69 from 00:00, 1 at 2.28 from 02:00;
	   2 h stored at 2.40/day from 02:10, 2 h at 1.20/day from 04:10. */
	ck_assert_uint_eq(npc, 4);
	ck_assert_uint_eq(pc[0].line, 0);
	ck_assert_int_eq(pc[0].start, NOV1);
	ck_assert_int_eq(pc[0].units, 2);
	ck_assert_int_eq(pc[0].secs, 2 * HOUR);
	ck_assert_int_eq(pc[0].rule.price, P269);
	ck_assert_uint_eq(pc[1].line, 0);
	ck_assert_int_eq(pc[1].start, NOV1 + 2 * HOUR);
	ck_assert_int_eq(pc[1].units, 1);
	ck_assert_int_eq(pc[1].secs, HOUR);
	ck_assert_int_eq(pc[1].rule.price, P228);
	ck_assert_uint_eq(pc[2].line, 1);
	ck_assert_int_eq(pc[2].start, NOV1 + 2 * HOUR + 600);
	ck_assert_int_eq(pc[2].secs, 2 * HOUR);
	ck_assert_int_eq(pc[2].units, 0);
	ck_assert_int_eq(pc[2].rule.stopped_per_day, 24000);
	ck_assert_uint_eq(pc[3].line, 1);
	ck_assert_int_eq(pc[3].start, NOV1 + 4 * HOUR + 600);
	ck_assert_int_eq(pc[3].secs, 2 * HOUR);
	ck_assert_int_eq(pc[3].rule.stopped_per_day, 12000);

	/* The lines are the window's total, and billing_window_prices'. */
	for (i = 0; i < n; i++)
		sum += lines[i].amount;
	ck_assert_int_eq(sum, c->amount0 + 3000);
	ck_assert_int_eq(sum, got.compute + got.storage);
	ck_assert_int_eq(billing_window_prices(p, 3, explain_prices_iv, 2,
			     c->from, DEC1, &want, &cause),
	    0);
	total_eq(&got, &want, "explain under a price history");
	free(lines);
	free(pc);
}
END_TEST

/*
 * The pieces of an unknown line that goes on with a run, over a change of
 * price and unit: per minute at 2.69/h, from 00:05 per hour at 2.28/h.
 * Running 00:00-00:10, unknown 00:10-00:20: one run under the rule of its
 * start (per minute), 20 minutes: 5 at 2.69 and 15 at 2.28, (5 * 60 *
 * 26900 + 15 * 60 * 22800) / 3600 = 7941.67 -> 7942. By 00:10, 5 and 5:
 * 4141.67 -> 4142. The unknown line: 3800, one piece of its own 10
 * minutes at 2.28, billed per minute (the run's unit, not the hour of
 * the rule in force then).
 */
START_TEST(test_explain_unknown_prices)
{
	static const struct billing_interval iv[] = {
		RUN(NOV1, NOV1 + 600),
		UNK(NOV1 + 600, NOV1 + 1200),
	};
	struct billing_price p[2];
	struct billing_total got;
	struct billing_line *lines;
	struct billing_piece *pc;
	size_t n, npc;
	char *cause = NULL;

	rule_make(&p[0].rule, P269, BILL_PER_HOUR, BILL_MINUTE, 0, 0);
	p[0].from = NOV1;
	rule_make(&p[1].rule, P228, BILL_PER_HOUR, BILL_HOUR, 0, 0);
	p[1].from = NOV1 + 300;
	ck_assert_msg(billing_explain_prices(p, 2, iv, 2, NOV1, DEC1, &got,
			  &lines, &n, &pc, &npc, &cause) == 0,
	    "%s", cause);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(lines[0].charge, 4142);
	ck_assert_int_eq(lines[0].units, 10);
	ck_assert_int_eq(lines[1].state, BILL_UNKNOWN);
	ck_assert_int_eq(lines[1].continues, 1);
	ck_assert_int_eq(lines[1].units, 10);
	ck_assert_int_eq(lines[1].billed_secs, 600);
	ck_assert_int_eq(lines[1].charge, 3800);
	ck_assert_int_eq(got.compute, 7942);
	ck_assert_int_eq(got.unknown, 3800);
	ck_assert_int_eq(got.starts, 1);
	/* Line 0: 5 minutes at 2.69, 5 at 2.28; line 1: 10 at 2.28. */
	ck_assert_uint_eq(npc, 3);
	ck_assert_uint_eq(pc[2].line, 1);
	ck_assert_int_eq(pc[2].start, NOV1 + 600);
	ck_assert_int_eq(pc[2].units, 10);
	ck_assert_int_eq(pc[2].secs, 600);
	ck_assert_int_eq(pc[2].rule.price, P228);
	ck_assert_int_eq(pc[2].rule.unit, BILL_MINUTE);
	free(lines);
	free(pc);
}
END_TEST

/* ---- currencies ---- */

START_TEST(test_currencies)
{
	struct billing_total cny, usd, sum;
	struct billing_rule r;
	struct billing_sums sums = { NULL, 0 };
	struct billing_interval iv[] = { RUN(NOV1, NOV1 + HOUR) };
	char *cause = NULL;

	rule_make(&r, P269, BILL_PER_HOUR, BILL_SECOND, 0, 0);
	ck_assert_int_eq(
	    billing_window(&r, iv, 1, NOV1, DEC1, &cny, &cause), 0);
	/* 1.10 USD/h for the same hour: 11000. */
	memcpy(r.currency, "USD", 4);
	r.price = 11000;
	ck_assert_int_eq(
	    billing_window(&r, iv, 1, NOV1, DEC1, &usd, &cause), 0);
	ck_assert_str_eq(usd.currency, "USD");

	/* Totals never mix: an empty total adopts, another currency is
	   refused and leaves the sum as it was. */
	memset(&sum, 0, sizeof sum);
	ck_assert_int_eq(billing_total_add(&sum, &cny, &cause), 0);
	ck_assert_int_eq(billing_total_add(&sum, &cny, &cause), 0);
	ck_assert_int_eq(billing_total_add(&sum, &usd, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "USD"));
	ck_assert_ptr_nonnull(strstr(cause, "CNY"));
	free(cause);
	ck_assert_str_eq(sum.currency, "CNY");
	ck_assert_int_eq(sum.compute, 2 * 26900);
	ck_assert_int_eq(sum.running_secs, 2 * HOUR);

	/* Per-currency sums keep them apart: CNY 26900 + 26900, USD 11000. */
	ck_assert_int_eq(
	    billing_sums_add(&sums, "CNY", cny.compute, &cause), 0);
	ck_assert_int_eq(
	    billing_sums_add(&sums, "USD", usd.compute, &cause), 0);
	ck_assert_int_eq(
	    billing_sums_add(&sums, "CNY", cny.compute, &cause), 0);
	ck_assert_uint_eq(sums.n, 2);
	ck_assert_str_eq(sums.v[0].currency, "CNY");
	ck_assert_int_eq(billing_sums_get(&sums, "CNY"), 53800);
	ck_assert_int_eq(billing_sums_get(&sums, "USD"), 11000);
	ck_assert_int_eq(billing_sums_get(&sums, "EUR"), 0);
	ck_assert_int_eq(billing_sums_add(&sums, "cny", 1, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "'cny'"));
	free(cause);
	ck_assert_int_eq(billing_sums_add(&sums, "USD", INT64_MAX, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "overflows"));
	free(cause);
	ck_assert_int_eq(billing_sums_get(&sums, "USD"), 11000);
	billing_sums_free(&sums);
	ck_assert_uint_eq(sums.n, 0);
}
END_TEST

struct add_case {
	money_t sum;
	money_t add;
	int ok;
	money_t want; /* the sum after: unchanged when refused */
};

static const struct add_case adds[] = {
	{ 0, 0, 1, 0 },
	{ 26900, 26900, 1, 53800 },
	{ INT64_MAX - 1, 1, 1, INT64_MAX },
	{ INT64_MAX, 1, 0, INT64_MAX },
	{ INT64_MAX, INT64_MAX, 0, INT64_MAX },
	{ 5, -10, 1, -5 },
	{ INT64_MIN, -1, 0, INT64_MIN },
	{ INT64_MIN + 1, -1, 1, INT64_MIN },
	{ -922337203685477580LL, INT64_MIN, 0, -922337203685477580LL },
};

/* Sums of money never wrap: they fail, naming the problem. */
START_TEST(test_add)
{
	const struct add_case *c = &adds[_i];
	money_t sum = c->sum;
	char *cause = NULL;
	int r = billing_add(&sum, c->add, &cause);

	ck_assert_int_eq(r, c->ok ? 0 : -1);
	ck_assert_int_eq(sum, c->want);
	if (!c->ok) {
		ck_assert_ptr_nonnull(cause);
		ck_assert_ptr_nonnull(strstr(cause, "overflows"));
	}
	free(cause);
}
END_TEST

/* ---- properties ---- */

static const struct {
	money_t price;
	enum billing_per per;
} property_prices[] = {
	{ P269, BILL_PER_HOUR },
	{ 500, BILL_PER_MINUTE },
	{ 10, BILL_PER_SECOND },
	{ 600000, BILL_PER_DAY },
	{ 1, BILL_PER_DAY },
};
static const int64_t property_mins[] = { 0, 1, 90, 600, 3600 };
#define NPRICES (sizeof property_prices / sizeof property_prices[0])
#define NMINS	(sizeof property_mins / sizeof property_mins[0])

/* Cost and billed time never decrease as a run grows, for every unit. */
START_TEST(test_monotonic)
{
	struct billing_rule r;
	int64_t s, b, prev_b;
	money_t c, prev_c, st, prev_st;
	size_t p, m;
	int u;

	for (u = BILL_SECOND; u <= BILL_HOUR; u++)
		for (p = 0; p < NPRICES; p++)
			for (m = 0; m < NMINS; m++) {
				rule_make(&r, property_prices[p].price,
				    property_prices[p].per,
				    (enum billing_unit)u, property_mins[m],
				    12000);
				prev_c = prev_b = prev_st = 0;
				for (s = 0; s <= 10000; s++) {
					c = billing_run_cost(&r, s, &b);
					st = billing_stopped_cost(&r, s);
					if (c < prev_c || b < prev_b ||
					    st < prev_st || b < s ||
					    b < property_mins[m])
						ck_abort_msg(
						    "unit %d price %zu "
						    "min %zu: wrong at "
						    "%lld s",
						    u, p, m, (long long)s);
					prev_c = c;
					prev_b = b;
					prev_st = st;
				}
			}
}
END_TEST

/* For the same price, per second <= per minute <= per hour. */
START_TEST(test_unit_order)
{
	struct billing_rule r;
	money_t c[3];
	int64_t s;
	size_t p, m;
	int u;

	for (p = 0; p < NPRICES; p++)
		for (m = 0; m < NMINS; m++)
			for (s = 0; s <= 10000; s++) {
				for (u = BILL_SECOND; u <= BILL_HOUR; u++) {
					rule_make(&r, property_prices[p].price,
					    property_prices[p].per,
					    (enum billing_unit)u,
					    property_mins[m], 0);
					c[u] = billing_run_cost(&r, s, NULL);
				}
				if (c[0] > c[1] || c[1] > c[2])
					ck_abort_msg("price %zu min %zu %lld "
						     "s: %lld %lld %lld",
					    p, m, (long long)s, (long long)c[0],
					    (long long)c[1], (long long)c[2]);
			}
}
END_TEST

#define LEDGER_MAX 2000
#define LEDGER_T0  (OCT31 - 6 * DAY)
#define LEDGER_T1  (DEC1 + 5 * DAY)

/*
 * A deterministic ledger from Oct 25 to Dec 6: runs, stops and unknown
 * stretches of 0 s to a few days, with gaps, over every midnight; a third
 * of the runs resume the run before (after an unknown stretch).
 */
static size_t
ledger_make(struct billing_interval *iv, size_t max)
{
	uint64_t x = 88172645463325252ULL;
	int64_t t = LEDGER_T0, len;
	size_t n = 0;

	while (t < LEDGER_T1 && n < max) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		switch (x % 8) {
		case 0:
			len = 0;
			break;
		case 1:
			len = (int64_t)(x >> 8) % (3 * DAY);
			break;
		case 2:
			len = (int64_t)(x >> 8) % 120;
			break;
		default:
			len = (int64_t)(x >> 8) % (5 * HOUR);
			break;
		}
		iv[n].start = t;
		iv[n].end = t + len;
		iv[n].state = (x >> 40) % 5 == 0 ? BILL_STOPPED
		    : (x >> 40) % 5 == 1	 ? BILL_UNKNOWN
						 : BILL_RUNNING;
		iv[n].resumes =
		    iv[n].state == BILL_RUNNING && (x >> 30) % 3 == 0;
		t += len + ((x >> 50) % 3 == 0 ? (int64_t)(x >> 52) % 7200 : 0);
		n++;
	}
	return n;
}

/*
 * Windows partition exactly: the days of November add up to November, the
 * hours of a day to that day, arbitrary cuts to the whole, and the whole
 * ledger to the sum of its runs' and stops' own costs, to the minor unit;
 * a run being a running interval, or an unknown one after no run, with
 * the unknown and resuming intervals that go on from it, touching.
 */
START_TEST(test_partition)
{
	static struct billing_interval iv[LEDGER_MAX];
	struct billing_total whole, part, sum, want;
	struct billing_rule r;
	size_t n = ledger_make(iv, LEDGER_MAX), i, j, k, m, crossings, months;
	size_t lens[3] = { 0, 0, 0 };
	int64_t t, cut, b, s0, end = LEDGER_T1 + 7 * DAY;
	uint64_t x = 2463534242ULL;
	int u;

	ck_assert_uint_gt(n, 100);
	/* The ledger has runs over both month ends and many midnights. */
	for (i = 0, crossings = 0, months = 0; i < n; i++) {
		if (iv[i].start / DAY != iv[i].end / DAY &&
		    iv[i].end % DAY != 0)
			crossings++;
		if ((iv[i].start < NOV1 && iv[i].end > NOV1) ||
		    (iv[i].start < DEC1 && iv[i].end > DEC1)) {
			ck_assert_int_eq(iv[i].state, BILL_RUNNING);
			months++;
		}
	}
	ck_assert_uint_gt(crossings, 20);
	ck_assert_uint_eq(months, 2);
	for (u = BILL_SECOND; u <= BILL_HOUR; u++)
		for (m = 0; m < NMINS; m++) {
			rule_make(&r, P269, BILL_PER_HOUR, (enum billing_unit)u,
			    property_mins[m], 12000);

			window(&r, iv, n, NOV1, DEC1, &whole);
			memset(&sum, 0, sizeof sum);
			for (t = NOV1; t < DEC1; t += DAY) {
				window(&r, iv, n, t, t + DAY, &part);
				add(&sum, &part);
			}
			total_eq(&sum, &whole, "days of November");
			ck_assert_int_gt(whole.compute, 0);
			ck_assert_int_gt(whole.storage, 0);
			ck_assert_int_gt(whole.unknown_secs, 0);

			window(&r, iv, n, NOV1 + DAY, NOV1 + 2 * DAY, &whole);
			memset(&sum, 0, sizeof sum);
			for (t = NOV1 + DAY; t < NOV1 + 2 * DAY; t += HOUR) {
				window(&r, iv, n, t, t + HOUR, &part);
				add(&sum, &part);
			}
			total_eq(&sum, &whole, "hours of Nov 2");

			window(&r, iv, n, LEDGER_T0, end, &whole);
			memset(&sum, 0, sizeof sum);
			for (t = LEDGER_T0; t < end; t = cut) {
				x ^= x << 13;
				x ^= x >> 17;
				x ^= x << 5;
				cut = t + (int64_t)(x % (2 * DAY));
				if (cut > end)
					cut = end;
				window(&r, iv, n, t, cut, &part);
				add(&sum, &part);
			}
			total_eq(&sum, &whole, "arbitrary cuts");

			memset(&want, 0, sizeof want);
			memcpy(want.currency, "CNY", 4);
			for (i = 0; i < n; i = j) {
				j = i + 1;
				t = iv[i].end - iv[i].start;
				if (iv[i].state == BILL_STOPPED) {
					want.storage +=
					    billing_stopped_cost(&r, t);
					want.stopped_secs += t;
					continue;
				}
				while (j < n && iv[j].start == iv[j - 1].end &&
				    (iv[j].state == BILL_UNKNOWN ||
					(iv[j].state == BILL_RUNNING &&
					    iv[j].resumes)))
					j++;
				s0 = iv[i].start;
				for (k = i; k < j; k++) {
					t = iv[k].end - iv[k].start;
					if (iv[k].state == BILL_RUNNING) {
						want.running_secs += t;
						continue;
					}
					want.unknown_secs += t;
					want.unknown += billing_run_cost(
					    &r, iv[k].end - s0, NULL);
					if (k > i)
						want.unknown -=
						    billing_run_cost(&r,
							iv[k].start - s0, NULL);
				}
				want.compute += billing_run_cost(
				    &r, iv[j - 1].end - s0, &b);
				want.billed_secs += b;
				want.starts++;
				lens[j - i > 2 ? 2 : j - i - 1]++;
			}
			total_eq(&whole, &want, "whole ledger");
			/* Runs of one stretch, two, and more. */
			ck_assert_uint_gt(lens[0], 10);
			ck_assert_uint_gt(lens[1], 10);
			ck_assert_uint_gt(lens[2], 2);
			ck_assert_int_gt(want.unknown, 0);
		}
}
END_TEST

/*
 * Under a price history: a history of one rule repeated at many times
 * costs what that rule alone does, whatever the unit and minimum (the cut
 * into units loses and adds nothing), and days of a history whose price
 * changes every few days add up to the month.
 */
START_TEST(test_history_partition)
{
	static struct billing_interval iv[LEDGER_MAX];
	struct billing_price p[8];
	struct billing_total whole, part, sum, want;
	size_t n = ledger_make(iv, LEDGER_MAX), i, m;
	int64_t t;
	int u;
	char *cause = NULL;

	for (u = BILL_SECOND; u <= BILL_HOUR; u++)
		for (m = 0; m < NMINS; m++) {
			for (i = 0; i < 8; i++) {
				p[i].from = NOV1 + (int64_t)i * 4 * DAY + 4321;
				rule_make(&p[i].rule, P269, BILL_PER_HOUR,
				    (enum billing_unit)u, property_mins[m],
				    12000);
			}
			window(&p[0].rule, iv, n, LEDGER_T0, LEDGER_T1, &want);
			if (billing_window_prices(p, 8, iv, n, LEDGER_T0,
				LEDGER_T1, &whole, &cause) != 0)
				ck_abort_msg("%s", cause);
			total_eq(&whole, &want, "one rule repeated");

			for (i = 0; i < 8; i++) {
				p[i].rule.price = P269 + (money_t)i * 1111;
				p[i].rule.price_per =
				    i % 2 ? BILL_PER_MINUTE : BILL_PER_HOUR;
				p[i].rule.stopped_per_day = 12000 - i * 999;
			}
			if (billing_window_prices(
				p, 8, iv, n, NOV1, DEC1, &whole, &cause) != 0)
				ck_abort_msg("%s", cause);
			memset(&sum, 0, sizeof sum);
			for (t = NOV1; t < DEC1; t += DAY) {
				if (billing_window_prices(p, 8, iv, n, t,
					t + DAY, &part, &cause) != 0)
					ck_abort_msg("%s", cause);
				add(&sum, &part);
			}
			total_eq(&sum, &whole, "days of November, 8 prices");
			ck_assert_int_gt(whole.compute, want.compute / 2);
		}
}
END_TEST

/*
 * billing_windows_prices costs each of many consecutive windows exactly as
 * billing_window_prices costs it alone: the days of the ledger and a week
 * past it, hours, cuts at interval starts and ends (zero-length intervals
 * on a window's edge) and empty windows, under a price history.
 */
START_TEST(test_windows_one_pass)
{
	static struct billing_interval iv[LEDGER_MAX];
	static int64_t bounds[4 * LEDGER_MAX + 2];
	static struct billing_total got[4 * LEDGER_MAX + 1];
	struct billing_price p[8];
	struct billing_total want;
	size_t n = ledger_make(iv, LEDGER_MAX), i, w, nw, m, cuts;
	int64_t t;
	int u;
	char *cause = NULL;

	for (u = BILL_SECOND; u <= BILL_HOUR; u++)
		for (m = 0; m < NMINS; m++) {
			for (i = 0; i < 8; i++) {
				p[i].from = NOV1 + (int64_t)i * 4 * DAY + 4321;
				rule_make(&p[i].rule, P269 + (money_t)i * 1111,
				    i % 2 ? BILL_PER_MINUTE : BILL_PER_HOUR,
				    (enum billing_unit)u, property_mins[m],
				    12000 - (money_t)i * 999);
			}
			for (cuts = 0; cuts < 3; cuts++) {
				nw = 0;
				bounds[0] = LEDGER_T0 - DAY;
				if (cuts == 0) {
					for (t = bounds[0] + DAY;
					     t <= LEDGER_T1 + 7 * DAY; t += DAY)
						bounds[++nw] = t;
				} else if (cuts == 1) {
					for (t = NOV1; t <= NOV1 + 3 * DAY;
					     t += HOUR)
						bounds[++nw] = t;
				} else {
					for (i = 0; i < n; i++) {
						bounds[++nw] = iv[i].start;
						bounds[++nw] = iv[i].start;
						bounds[++nw] = iv[i].end;
					}
					bounds[++nw] = iv[n - 1].end + DAY;
				}
				if (billing_windows_prices(p, 8, iv, n, bounds,
					nw, got, &cause) != 0)
					ck_abort_msg("%s", cause);
				for (w = 0; w < nw; w++) {
					if (billing_window_prices(p, 8, iv, n,
						bounds[w], bounds[w + 1], &want,
						&cause) != 0)
						ck_abort_msg("%s", cause);
					total_eq(&got[w], &want,
					    cuts == 0	    ? "days"
						: cuts == 1 ? "hours"
							    : "cuts");
				}
			}
		}
}
END_TEST

/*
 * A window that has ended never changes as a run goes on, and a window the
 * run is in never loses money as the run grows.
 */
START_TEST(test_window_stable)
{
	struct billing_interval iv = RUN(NOV1 + 100, NOV1 + 100);
	struct billing_total closed, open, first, prev;
	struct billing_rule r;
	size_t m;
	int u;

	memset(&first, 0, sizeof first);
	for (u = BILL_SECOND; u <= BILL_HOUR; u++)
		for (m = 0; m < NMINS; m++) {
			rule_make(&r, P269, BILL_PER_HOUR, (enum billing_unit)u,
			    property_mins[m], 0);
			memset(&prev, 0, sizeof prev);
			for (iv.end = iv.start; iv.end <= iv.start + 10000;
			     iv.end++) {
				window(&r, &iv, 1, NOV1, NOV1 + 3000, &closed);
				window(&r, &iv, 1, NOV1, NOV1 + DAY, &open);
				if (iv.end == NOV1 + 3000)
					first = closed;
				if (iv.end > NOV1 + 3000)
					total_eq(
					    &closed, &first, "closed window");
				if (open.compute < prev.compute ||
				    open.billed_secs < prev.billed_secs)
					ck_abort_msg("unit %d min %zu: window "
						     "lost money at end %lld",
					    u, m, (long long)iv.end);
				prev = open;
			}
		}
}
END_TEST

/* ---- advice, runway, formatting ---- */

START_TEST(test_monthly)
{
	struct billing_rule r;
	struct billing_advice adv;
	double h = 0;

	/* 4.99/h against 1,740/month: 1740 / 4.99 / 30 = 11.623 h/day. */
	rule_make(&r, 49900, BILL_PER_HOUR, BILL_SECOND, 0, 0);
	r.monthly_price = 17400000;
	ck_assert_int_eq(billing_monthly_breakeven(&r, &h), 0);
	ck_assert_double_eq_tol(h, 11.6232, 0.0001);
	/* 19.2 h/day * 30 = 576 h * 4.99 = 2,874.24; minus 1,740 saves
	   1,134.24. */
	ck_assert_int_eq(billing_monthly_savings(&r, 19.2), 11342400);
	/* Unused, the plan costs its whole price. */
	ck_assert_int_eq(billing_monthly_savings(&r, 0), -17400000);
	/* Usage is clamped to 24 h: 720 h * 4.99 = 3,592.80 - 1,740. */
	ck_assert_int_eq(billing_monthly_savings(&r, 30), 18528000);
	ck_assert_int_eq(billing_monthly_savings(&r, -3), -17400000);
	ck_assert_int_eq(billing_advise_monthly(&r, 19.2, &adv), 0);
	ck_assert_int_eq(adv.hourly_month, 28742400);
	ck_assert_int_eq(adv.monthly_price, 17400000);
	ck_assert_int_eq(adv.savings, 11342400);
	ck_assert_double_eq_tol(adv.breakeven_hours_per_day, 11.6232, 0.0001);
	ck_assert_double_eq_tol(adv.used_hours_per_day, 19.2, 1e-9);

	/* 120/day = 5/h against 2,400/month: 2400 / 5 / 30 = 16 h/day, and
	   at 16 h/day: 480 h * 5 = 2,400, saving nothing. */
	rule_make(&r, 1200000, BILL_PER_DAY, BILL_HOUR, 0, 0);
	r.monthly_price = 24000000;
	ck_assert_int_eq(billing_monthly_breakeven(&r, &h), 0);
	ck_assert_double_eq_tol(h, 16.0, 1e-9);
	ck_assert_int_eq(billing_monthly_savings(&r, 16), 0);

	/* No plan, or a free machine: no break-even. */
	r.monthly_price = 0;
	ck_assert_int_eq(billing_monthly_breakeven(&r, &h), -1);
	ck_assert_int_eq(billing_monthly_savings(&r, 10), 0);
	ck_assert_int_eq(billing_advise_monthly(&r, 10, &adv), -1);
	r.monthly_price = 24000000;
	r.price = 0;
	ck_assert_int_eq(billing_monthly_breakeven(&r, &h), -1);
}
END_TEST

struct runway_case {
	money_t balance, burn;
	int ret;
	int64_t want;
};

static const struct runway_case runways[] = {
	/* 182.40 at 7.38/h: 182.40 / 7.38 = 24.7154 h = 88975.6 s, rounded
	   down: 88975 s (24h42m55s). */
	{ 1824000, 73800, 0, 88975 },
	{ 100000, 100000, 0, 3600 },
	{ 0, 73800, 0, 0 },
	{ -5000, 73800, 0, 0 },
	{ 0, 0, 0, 0 },
	{ 1824000, 0, 1, INT64_MAX },
	{ 1824000, -1, -1, -7 },
	/* 1 minor unit at 1/h lasts an hour. */
	{ 1, 1, 0, 3600 },
};

START_TEST(test_runway)
{
	const struct runway_case *c = &runways[_i];
	int64_t secs = -7;

	ck_assert_int_eq(billing_runway(c->balance, c->burn, &secs), c->ret);
	ck_assert_int_eq(secs, c->want);
}
END_TEST

struct format_case {
	money_t m;
	const char *currency;
	const char *display;
	const char *exact;
};

static const struct format_case formats[] = {
	{ 11375000, "CNY", "1,137.50 CNY", "1137.50" },
	{ 0, "CNY", "0.00 CNY", "0.00" },
	{ 26900, "CNY", "2.69 CNY", "2.69" },
	/* 0.4484 -> 0.45 (44.84 cents, half up); 0.4449 -> 0.44. */
	{ 4484, "CNY", "0.45 CNY", "0.4484" },
	{ 4449, "USD", "0.44 USD", "0.4449" },
	{ 4450, "USD", "0.45 USD", "0.445" },
	{ -11375000, "CNY", "-1,137.50 CNY", "-1137.50" },
	{ -4450, "CNY", "-0.45 CNY", "-0.445" },
	/* -0.0049 shows as 0.00, not -0.00. */
	{ -49, "CNY", "0.00 CNY", "-0.0049" },
	{ 1, NULL, "0.00", "0.0001" },
	{ 600000, "", "60.00", "60.00" },
	{ 5000, NULL, "0.50", "0.50" },
	{ 10, NULL, "0.00", "0.001" },
	{ 12345, NULL, "1.23", "1.2345" },
	/* 999.995 -> 1,000.00 */
	{ 9999950, "EUR", "1,000.00 EUR", "999.995" },
	{ 1000000000000LL, NULL, "100,000,000.00", "100000000.00" },
	{ INT64_MAX, NULL, "922,337,203,685,477.58", "922337203685477.5807" },
	{ INT64_MIN, NULL, "-922,337,203,685,477.58", "-922337203685477.5808" },
};

START_TEST(test_format)
{
	const struct format_case *c = &formats[_i];
	char *s = billing_format(c->m, c->currency), *cause = NULL;
	money_t back;

	ck_assert_str_eq(s, c->display);
	free(s);
	s = billing_format_exact(c->m);
	ck_assert_str_eq(s, c->exact);
	if (c->m >= 0 && c->m <= BILLING_AMOUNT_MAX) {
		ck_assert_msg(
		    billing_parse_amount(s, &back, &cause) == 0, "%s", cause);
		ck_assert_int_eq(back, c->m);
	}
	free(s);
}
END_TEST

/* Amounts for spreadsheets: the currency's decimals, more only if needed. */
static const struct {
	money_t m;
	const char *currency, *want;
} majors[] = {
	{ 92000, "CNY", "9.20" },
	{ 49765, "CNY", "4.9765" },
	{ 4480, "USD", "0.448" },
	{ 0, "EUR", "0.00" },
	{ 1200000, "JPY", "120" },
	{ 1205000, "JPY", "120.5" },
	{ 15000, "KWD", "1.500" },
	{ 15000, "CLF", "1.5000" },
	{ 10000, "XAU", "1" },
	{ -4450, "CNY", "-0.445" },
	{ 1, "JPY", "0.0001" },
	/* A stored non-ISO code: the usual 2. */
	{ 26900, "RMB", "2.69" },
};

START_TEST(test_format_major)
{
	char *s = billing_format_major(majors[_i].m, majors[_i].currency);

	ck_assert_str_eq(s, majors[_i].want);
	free(s);
}
END_TEST

START_TEST(test_format_price)
{
	static const struct {
		money_t price;
		enum billing_per per;
		const char *want;
	} cases[] = {
		{ 26900, BILL_PER_HOUR, "2.69/h" },
		{ 500, BILL_PER_MINUTE, "0.05/min" },
		{ 10, BILL_PER_SECOND, "0.001/s" },
		{ 600000, BILL_PER_DAY, "60.00/day" },
	};
	enum billing_per per;
	char *s, *cause = NULL;
	money_t back;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		s = billing_format_price(cases[i].price, cases[i].per);
		ck_assert_str_eq(s, cases[i].want);
		ck_assert_int_eq(
		    billing_parse_price(s, &back, &per, &cause), 0);
		ck_assert_int_eq(back, cases[i].price);
		ck_assert_int_eq(per, cases[i].per);
		free(s);
	}
	/* Hourly prices: 0.05/min = 3.00/h, 0.001/s = 3.60/h, 60/day =
	   2.50/h, 1/day = 0.041666.. -> 0.0417 (rounded up). */
	{
		struct billing_rule r;

		rule_make(&r, 500, BILL_PER_MINUTE, BILL_SECOND, 0, 0);
		ck_assert_int_eq(billing_hourly_price(&r), 30000);
		rule_make(&r, 10, BILL_PER_SECOND, BILL_SECOND, 0, 0);
		ck_assert_int_eq(billing_hourly_price(&r), 36000);
		rule_make(&r, 600000, BILL_PER_DAY, BILL_SECOND, 0, 0);
		ck_assert_int_eq(billing_hourly_price(&r), 25000);
		rule_make(&r, 10000, BILL_PER_DAY, BILL_SECOND, 0, 0);
		ck_assert_int_eq(billing_hourly_price(&r), 417);
	}
}
END_TEST

/*
 * The hand-written parsers on 100000 generated strings: each either
 * succeeds with a value in range that formats and parses back, or fails
 * with a cause naming the text (and, under ASan, never reads astray).
 */
START_TEST(test_parse_generated)
{
	static const char *tokens[] = { "0", "1", "9", "2.69", "0.0001",
		"12345", "99999999", ".", ",", "-", "+", " ", "/", "h", "min",
		"s", "day", "d", "m", "w", "e", "1h", "30m", "GB", "hour" };
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	char text[64], *cause, *back_text;
	enum billing_per per;
	money_t v, back;
	int64_t d;
	size_t ntok, i, len;
	int k;

	for (k = 0; k < 100000; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		text[0] = '\0';
		ntok = (size_t)(x % 6);
		/* At most 5 tokens of at most 8 bytes: never truncated. */
		for (i = 0, len = 0; i < ntok; i++)
			len += xstrlcpy(text + len,
			    tokens[(x >> (8 + 8 * i)) %
				(sizeof tokens / sizeof tokens[0])],
			    sizeof text - len);

		cause = NULL;
		if (billing_parse_amount(text, &v, &cause) == 0) {
			back_text = billing_format_exact(v);
			if (v < 0 || v > BILLING_AMOUNT_MAX ||
			    billing_parse_amount(back_text, &back, &cause) !=
				0 ||
			    back != v)
				ck_abort_msg(
				    "amount '%s' -> %lld", text, (long long)v);
			free(back_text);
		} else if (cause == NULL || strstr(cause, text) == NULL)
			ck_abort_msg("amount '%s': cause %s", text, cause);
		free(cause);

		cause = NULL;
		if (billing_parse_price(text, &v, &per, &cause) == 0) {
			back_text = billing_format_price(v, per);
			if (v < 0 || v > BILLING_AMOUNT_MAX ||
			    billing_parse_price(
				back_text, &back, &per, &cause) != 0 ||
			    back != v)
				ck_abort_msg(
				    "price '%s' -> %lld", text, (long long)v);
			free(back_text);
		} else if (cause == NULL || strstr(cause, text) == NULL)
			ck_abort_msg("price '%s': cause %s", text, cause);
		free(cause);

		cause = NULL;
		if (billing_parse_duration(text, &d, &cause) == 0) {
			if (d < 0 || d > BILLING_DURATION_MAX)
				ck_abort_msg("duration '%s' -> %lld", text,
				    (long long)d);
		} else if (cause == NULL || strstr(cause, text) == NULL)
			ck_abort_msg("duration '%s': cause %s", text, cause);
		free(cause);
	}
}
END_TEST

#define LOOP(tc, fn, table)                                                    \
	tcase_add_loop_test(tc, fn, 0, (int)(sizeof table / sizeof table[0]))

int
main(void)
{
	Suite *s = suite_create("billing");
	TCase *tc = tcase_create("core");
	TCase *props = tcase_create("properties");
	SRunner *sr;
	int failed;

	LOOP(tc, test_parse_amount, amounts);
	LOOP(tc, test_parse_price, prices);
	LOOP(tc, test_add, adds);
	LOOP(tc, test_parse_other_price, other_prices);
	LOOP(tc, test_parse_duration, durations);
	tcase_add_test(tc, test_parse_unit_currency);
	tcase_add_test(tc, test_rule_validate);
	LOOP(tc, test_run_cost, runs);
	LOOP(tc, test_other_cost, other_costs);
	LOOP(tc, test_window, windows);
	LOOP(tc, test_window_error, window_errors);
	LOOP(tc, test_explain, explains);
	tcase_add_test(tc, test_explain_error);
	LOOP(tc, test_history, histories);
	tcase_add_test(tc, test_history_error);
	LOOP(tc, test_explain_prices, explain_prices_cases);
	tcase_add_test(tc, test_explain_unknown_prices);
	tcase_add_test(tc, test_currencies);
	tcase_add_test(tc, test_monthly);
	LOOP(tc, test_runway, runways);
	LOOP(tc, test_format, formats);
	tcase_add_test(tc, test_format_price);
	LOOP(tc, test_format_major, majors);
	suite_add_tcase(s, tc);

	tcase_set_timeout(props, 100);
	tcase_add_test(props, test_monotonic);
	tcase_add_test(props, test_unit_order);
	tcase_add_test(props, test_partition);
	tcase_add_test(props, test_history_partition);
	tcase_add_test(props, test_windows_one_pass);
	tcase_add_test(props, test_window_stable);
	tcase_add_test(props, test_parse_generated);
	suite_add_tcase(s, props);

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
