/*
 * Cron expressions: parse rows, hand-written next-fire rows for the DST
 * rules, and next-fire chains across the 2026-2028 offset changes of five
 * zones checked against a brute-force minute-by-minute reference.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"

struct parse_case {
	const char *expr;
	const char *want; /* "minutes|hours|days|months|weekdays|flags" */
	const char *cause;
};

/*
 * want lists each field's values ("*" for all of them, else numbers and
 * a-b ranges separated by commas), then the flags as a number.
 */
static const struct parse_case parse_cases[] = {
	{ "* * * * *", "*|*|*|*|*|3", NULL },
	{ "*/15 * * * *", "0,15,30,45|*|*|*|*|3", NULL },
	{ "1-30/2 * * * *", "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29|*|*|*|*|3",
	    NULL },
	{ "0-59/60 0 * * *", "0|0|*|*|*|3", NULL },
	{ "0 9 * * mon-fri", "0|9|*|*|1-5|1", NULL },
	{ "0 9 * * MON-Fri", "0|9|*|*|1-5|1", NULL },
	{ "0 0 * * 0", "0|0|*|*|0|1", NULL },
	{ "0 0 * * 7", "0|0|*|*|0|1", NULL },
	{ "0 0 * * 5-7", "0|0|*|*|0,5,6|1", NULL },
	{ "0 0 * * sat-sun", "0|0|*|*|0,6|1", NULL },
	{ "0 0 * * mon-sun", "0|0|*|*|0-6|1", NULL },
	{ "0 0 * * sun", "0|0|*|*|0|1", NULL },
	{ "0 0 * * */2", "0|0|*|*|0,2,4,6|1", NULL },
	{ "0 0 * * 0-7/7", "0|0|*|*|0|1", NULL },
	{ "0 0 1 jan,JUL *", "0|0|1|1,7|*|2", NULL },
	{ "0 0 * jan-dec/3 *", "0|0|*|1,4,7,10|*|3", NULL },
	{ "0 0 1-31/10 * *", "0|0|1,11,21,31|*|*|2", NULL },
	{ "0 0 */1 * *", "0|0|*|*|*|2", NULL },
	{ "0 0 13 * fri", "0|0|13|*|5|0", NULL },
	{ "59 23 31 12 *", "59|23|31|12|*|2", NULL },
	{ "5,10-12,*/20 * * * *", "0,5,10,11,12,20,40|*|*|*|*|3", NULL },
	{ "  0\t0  * *   *  ", "0|0|*|*|*|3", NULL },
	{ "@hourly", "0|*|*|*|*|3", NULL },
	{ "@daily", "0|0|*|*|*|3", NULL },
	{ "@midnight", "0|0|*|*|*|3", NULL },
	{ "@weekly", "0|0|*|*|0|1", NULL },
	{ "@monthly", "0|0|1|*|*|2", NULL },
	{ "@yearly", "0|0|1|1|*|2", NULL },
	{ "@annually", "0|0|1|1|*|2", NULL },
	{ " @Daily ", "0|0|*|*|*|3", NULL },

	{ "0 25 * * *", NULL, "cron: hour '25' is out of range 0-23" },
	{ "* * * *", NULL,
	    "cron: needs 5 fields (minute hour day month weekday), got 4" },
	{ "* * * * * *", NULL,
	    "cron: needs 5 fields (minute hour day month weekday), got 6" },
	{ "", NULL,
	    "cron: needs 5 fields (minute hour day month weekday), got 0" },
	{ "  ", NULL,
	    "cron: needs 5 fields (minute hour day month weekday), got 0" },
	{ "60 * * * *", NULL, "cron: minute '60' is out of range 0-59" },
	{ "0 0 0 * *", NULL, "cron: day '0' is out of range 1-31" },
	{ "0 0 32 * *", NULL, "cron: day '32' is out of range 1-31" },
	{ "0 0 * 13 *", NULL, "cron: month '13' is out of range 1-12" },
	{ "0 0 * 0 *", NULL, "cron: month '0' is out of range 1-12" },
	{ "0 0 * * 8", NULL, "cron: weekday '8' is out of range 0-7" },
	{ "0 0-24 * * *", NULL, "cron: hour '24' is out of range 0-23" },
	{ "99999999999 * * * *", NULL,
	    "cron: minute '99999999999' is out of range 0-59" },
	{ "0 0 * foo *", NULL,
	    "cron: month 'foo' is not a number or a month name" },
	{ "0 0 * * fr", NULL,
	    "cron: weekday 'fr' is not a number or a day name" },
	{ "0 0 * * jan", NULL,
	    "cron: weekday 'jan' is not a number or a day name" },
	{ "0 0 * * monday", NULL,
	    "cron: weekday 'monday' is not a number or a day name" },
	{ "0 0 * mon *", NULL,
	    "cron: month 'mon' is not a number or a month name" },
	{ "x * * * *", NULL, "cron: minute 'x' is not a number" },
	{ "mon * * * *", NULL, "cron: minute 'mon' is not a number" },
	{ "5x * * * *", NULL, "cron: minute '5x' is not a number" },
	{ "0 0 ? * *", NULL, "cron: day '?' is not a number" },
	{ "0 0 L * *", NULL, "cron: day 'L' is not a number" },
	{ "0 0 * * 1#2", NULL,
	    "cron: weekday '1#2' is not a number or a day name" },
	{ "*/0 * * * *", NULL, "cron: minute '*/0' has a step of 0" },
	{ "0 1-5/0 * * *", NULL, "cron: hour '1-5/0' has a step of 0" },
	{ "*/61 * * * *", NULL, "cron: minute step '61' is out of range 1-60" },
	{ "0 0 * * */8", NULL, "cron: weekday step '8' is out of range 1-7" },
	{ "*/x * * * *", NULL, "cron: minute step 'x' is not a number" },
	{ "*/ * * * *", NULL, "cron: minute '*/' is missing a step" },
	{ "1,,2 * * * *", NULL, "cron: minute '1,,2' has an empty list item" },
	{ ",1 * * * *", NULL, "cron: minute ',1' has an empty list item" },
	{ "0 1, * * *", NULL, "cron: hour '1,' has an empty list item" },
	{ "5/10 * * * *", NULL,
	    "cron: minute '5/10' has a step without a range (write 5-59/10)" },
	{ "0 0 * * mon/2", NULL,
	    "cron: weekday 'mon/2' has a step without a range (write 1-6/2)" },
	{ "*5 * * * *", NULL, "cron: minute '*5' has trailing '5'" },
	{ "1-2-3 * * * *", NULL, "cron: minute '1-2-3' has trailing '-3'" },
	{ "*/2/3 * * * *", NULL, "cron: minute '*/2/3' has trailing '/3'" },
	{ "*-5 * * * *", NULL, "cron: minute '*-5' has trailing '-5'" },
	{ "30-10 * * * *", NULL, "cron: minute '30-10' is a reversed range" },
	{ "0 0 * * fri-mon", NULL,
	    "cron: weekday 'fri-mon' is a reversed range" },
	{ "1- * * * *", NULL, "cron: minute '1-' is missing a number" },
	{ "-5 * * * *", NULL, "cron: minute '-5' is missing a number" },
	{ "@reboot", NULL,
	    "cron: unknown '@reboot' (use @hourly, @daily, @midnight, "
	    "@weekly, @monthly, @yearly or @annually)" },
	{ "@", NULL,
	    "cron: unknown '@' (use @hourly, @daily, @midnight, @weekly, "
	    "@monthly, @yearly or @annually)" },
	{ "@daily 5", NULL, "cron: '@daily' takes no other fields" },
	{ "0 0 * * *\n", NULL,
	    "cron: expression has a non-printable character (0x0a)" },
};

/* The mask of a want list ("*" is lo-hi). */
static uint64_t
want_bits(const char *s, size_t n, int lo, int hi)
{
	uint64_t bits = 0;
	char buf[256], *p, *end;
	long a, b;

	if (n == 1 && s[0] == '*') {
		for (a = lo; a <= hi; a++)
			bits |= 1ULL << a;
		return bits;
	}
	ck_assert_uint_lt(n, sizeof buf);
	memcpy(buf, s, n);
	buf[n] = '\0';
	for (p = buf; *p != '\0';) {
		a = strtol(p, &end, 10);
		b = a;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (; a <= b; a++)
			bits |= 1ULL << a;
		p = *end == ',' ? end + 1 : end;
	}
	return bits;
}

START_TEST(test_parse)
{
	const struct parse_case *pc = &parse_cases[_i];
	static const int lo[5] = { 0, 0, 1, 1, 0 },
			 hi[5] = { 59, 23, 31, 12, 6 };
	struct cron c;
	char *cause = NULL;
	uint64_t want[5];
	const char *s, *bar;
	int r, i;

	r = cron_parse(pc->expr, &c, &cause);
	if (pc->want == NULL) {
		ck_assert_msg(r == -1, "'%s' accepted", pc->expr);
		ck_assert_str_eq(cause, pc->cause);
		free(cause);
		return;
	}
	ck_assert_msg(r == 0, "'%s' refused: %s", pc->expr, cause);
	for (s = pc->want, i = 0; i < 5; i++, s = bar + 1) {
		bar = strchr(s, '|');
		want[i] = want_bits(s, bar - s, lo[i], hi[i]);
	}
	ck_assert_uint_eq(c.minutes, want[0]);
	ck_assert_uint_eq(c.hours, want[1]);
	ck_assert_uint_eq(c.days, want[2]);
	ck_assert_uint_eq(c.months, want[3]);
	ck_assert_uint_eq(c.weekdays, want[4]);
	ck_assert_int_eq(c.flags, (int)strtol(s, NULL, 10));
}
END_TEST

/* The length cap: 256 characters pass, 257 do not. */
START_TEST(test_parse_long)
{
	char buf[CRON_MAX_LEN + 2], *cause = NULL;
	struct cron c;

	memset(buf, ' ', sizeof buf);
	memcpy(buf, "0 0 * * *", 9);
	buf[CRON_MAX_LEN] = '\0';
	ck_assert_int_eq(cron_parse(buf, &c, &cause), 0);
	buf[CRON_MAX_LEN] = ' ';
	buf[CRON_MAX_LEN + 1] = '\0';
	ck_assert_int_eq(cron_parse(buf, &c, &cause), -1);
	ck_assert_str_eq(
	    cause, "cron: expression is longer than 256 characters");
	free(cause);
}
END_TEST

/* Zone names: the system's, real zones, and names refused before lookup. */
START_TEST(test_check_tz)
{
	char name[300], *cause = NULL;

	unsetenv("TZDIR");
	ck_assert_int_eq(cron_check_tz(NULL, &cause), 0);
	ck_assert_int_eq(cron_check_tz("", &cause), 0);
	ck_assert_int_eq(cron_check_tz("Asia/Kolkata", &cause), 0);
	ck_assert_int_eq(cron_check_tz("Etc/GMT+5", &cause), 0);
	ck_assert_int_eq(cron_check_tz("America/Port-au-Prince", &cause), 0);
	ck_assert_int_eq(cron_check_tz("Europe/Berlin\n", &cause), -1);
	ck_assert_str_eq(
	    cause, "cron: time zone name has a non-printable character (0x0a)");
	free(cause);
	memset(name, 'a', sizeof name);
	name[sizeof name - 1] = '\0';
	ck_assert_int_eq(cron_check_tz(name, &cause), -1);
	ck_assert_str_eq(
	    cause, "cron: time zone name is longer than 255 characters");
	free(cause);
	ck_assert_int_eq(cron_check_tz("Europe/../Asia/Tokyo", &cause), -1);
	ck_assert_str_eq(
	    cause, "cron: 'Europe/../Asia/Tokyo' is not a time zone name");
	free(cause);
}
END_TEST

/* Unix seconds of "YYYY-MM-DDTHH:MM:SSZ". */
static int64_t
utc(const char *iso)
{
	struct tm tm;
	char *end;

	memset(&tm, 0, sizeof tm);
	end = strptime(iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
	ck_assert_msg(end != NULL && *end == '\0', "bad time %s", iso);
	return (int64_t)timegm(&tm);
}

struct next_case {
	const char *expr;
	const char *tz;
	const char *after;
	const char *want; /* NULL: fails with cause */
	const char *cause;
};

/* The DST rules by hand, and the zones without DST. */
static const struct next_case next_cases[] = {
	/* Berlin springs forward at 01:00 UTC: 02:30 does not exist. */
	{ "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
	    "2026-03-29T01:00:00Z", NULL },
	{ "30 2 * * *", "Europe/Berlin", "2026-03-29T01:00:00Z",
	    "2026-03-30T00:30:00Z", NULL },
	{ "*/15 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00Z",
	    "2026-03-29T01:00:00Z", NULL },
	{ "*/15 2 * * *", "Europe/Berlin", "2026-03-29T01:00:00Z",
	    "2026-03-30T00:00:00Z", NULL },
	{ "0 3 * * *", "Europe/Berlin", "2026-03-29T00:59:59Z",
	    "2026-03-29T01:00:00Z", NULL },
	/* Berlin falls back at 01:00 UTC: 02:30 happens twice. */
	{ "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
	    "2026-10-25T00:30:00Z", NULL },
	{ "30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z",
	    "2026-10-26T01:30:00Z", NULL },
	{ "30 2 * * *", "Europe/Berlin", "2026-10-25T01:00:00Z",
	    "2026-10-26T01:30:00Z", NULL },
	{ "0 * * * *", "Europe/Berlin", "2026-10-25T00:00:00Z",
	    "2026-10-25T02:00:00Z", NULL },
	{ "30 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z",
	    "2027-03-28T01:00:00Z", NULL },
	{ "30 2 * * *", "Europe/Berlin", "2028-10-28T12:00:00Z",
	    "2028-10-29T00:30:00Z", NULL },
	/* New York: 02:00 EST -> 03:00 EDT; 02:00 EDT -> 01:00 EST. */
	{ "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
	    "2026-03-08T07:00:00Z", NULL },
	{ "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
	    "2026-11-01T05:30:00Z", NULL },
	{ "30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z",
	    "2026-11-02T06:30:00Z", NULL },
	/* Sydney: 02:00 AEST -> 03:00 AEDT; 03:00 AEDT -> 02:00 AEST. */
	{ "30 2 * * *", "Australia/Sydney", "2026-10-03T00:00:00Z",
	    "2026-10-03T16:00:00Z", NULL },
	{ "30 2 * * *", "Australia/Sydney", "2026-04-04T00:00:00Z",
	    "2026-04-04T15:30:00Z", NULL },
	{ "30 2 * * *", "Australia/Sydney", "2026-04-04T15:30:00Z",
	    "2026-04-05T16:30:00Z", NULL },
	/* No DST; Kolkata is +05:30. */
	{ "0 9 * * *", "Asia/Kolkata", "2026-01-01T00:00:00Z",
	    "2026-01-01T03:30:00Z", NULL },
	{ "@yearly", "Asia/Kolkata", "2026-06-01T00:00:00Z",
	    "2026-12-31T18:30:00Z", NULL },
	{ "0 2 * * *", "Asia/Shanghai", "2026-01-01T00:00:00Z",
	    "2026-01-01T18:00:00Z", NULL },
	/* Strictly after; days; the system's zone (UTC in this test). */
	{ "0 0 * * *", NULL, "2026-02-10T00:00:00Z", "2026-02-11T00:00:00Z",
	    NULL },
	{ "0 0 * * *", "", "2026-02-09T23:59:59Z", "2026-02-10T00:00:00Z",
	    NULL },
	{ "0 0 13 * mon", "UTC", "2026-02-10T00:00:00Z", "2026-02-13T00:00:00Z",
	    NULL },
	{ "0 0 13 * mon", "UTC", "2026-02-13T00:00:00Z", "2026-02-16T00:00:00Z",
	    NULL },
	{ "0 0 */1 * mon", "UTC", "2026-02-10T00:00:00Z",
	    "2026-02-11T00:00:00Z", NULL },
	{ "0 0 * * 7", "UTC", "2026-02-10T00:00:00Z", "2026-02-15T00:00:00Z",
	    NULL },
	{ "0 9 * * mon-fri", "UTC", "2026-02-13T10:00:00Z",
	    "2026-02-16T09:00:00Z", NULL },
	{ "0 0 29 2 *", "UTC", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z",
	    NULL },
	{ "0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z",
	    NULL },
	{ "0 0 31 2 *", "UTC", "2026-01-01T00:00:00Z", NULL,
	    "cron: the expression never fires (no matching day in 8 years)" },
	{ "0 0 30 2 *", "Europe/Berlin", "2026-01-01T00:00:00Z", NULL,
	    "cron: the expression never fires (no matching day in 8 years)" },
	{ "0 0 * * *", "Mars/Olympus", "2026-01-01T00:00:00Z", NULL,
	    "cron: unknown time zone 'Mars/Olympus' (not in "
	    "/usr/share/zoneinfo)" },
	{ "0 0 * * *", "Europe", "2026-01-01T00:00:00Z", NULL,
	    "cron: unknown time zone 'Europe' (not in /usr/share/zoneinfo)" },
	{ "0 0 * * *", "zone.tab", "2026-01-01T00:00:00Z", NULL,
	    "cron: unknown time zone 'zone.tab' (not in /usr/share/zoneinfo)" },
	{ "0 0 * * *", "../../../etc/passwd", "2026-01-01T00:00:00Z", NULL,
	    "cron: '../../../etc/passwd' is not a time zone name" },
	{ "0 0 * * *", "/usr/share/zoneinfo/UTC", "2026-01-01T00:00:00Z", NULL,
	    "cron: '/usr/share/zoneinfo/UTC' is not a time zone name" },
	{ "0 0 * * *", "CET-1CEST,M3.5.0,M10.5.0/3", "2026-01-01T00:00:00Z",
	    NULL,
	    "cron: 'CET-1CEST,M3.5.0,M10.5.0/3' is not a time zone name" },
};

START_TEST(test_next)
{
	const struct next_case *nc = &next_cases[_i];
	struct cron c;
	char *cause = NULL;
	int64_t got = 0;
	int r;

	setenv("TZ", "UTC", 1);
	tzset();
	unsetenv("TZDIR");
	ck_assert_int_eq(cron_parse(nc->expr, &c, &cause), 0);
	r = cron_next(&c, nc->tz, utc(nc->after), &got, &cause);
	ck_assert_str_eq(getenv("TZ"), "UTC");
	if (nc->want == NULL) {
		ck_assert_msg(r == -1, "'%s' after %s gave %lld", nc->expr,
		    nc->after, (long long)got);
		ck_assert_str_eq(cause, nc->cause);
		free(cause);
		return;
	}
	ck_assert_msg(r == 0, "'%s' after %s: %s", nc->expr, nc->after, cause);
	ck_assert_msg(got == utc(nc->want),
	    "'%s' in %s after %s gave %lld, want %s", nc->expr, nc->tz,
	    nc->after, (long long)got, nc->want);
}
END_TEST

/* With TZ unset cron_next leaves it unset. */
START_TEST(test_tz_restored)
{
	struct cron c;
	char *cause = NULL;
	int64_t got;

	unsetenv("TZ");
	tzset();
	ck_assert_int_eq(cron_parse("30 2 * * *", &c, &cause), 0);
	ck_assert_int_eq(cron_next(&c, "Europe/Berlin",
			     utc("2026-03-28T12:00:00Z"), &got, &cause),
	    0);
	ck_assert_ptr_null(getenv("TZ"));
	ck_assert_int_eq(got, utc("2026-03-29T01:00:00Z"));
}
END_TEST

/*
 * The brute-force reference. For each zone, windows of 4 days around each
 * UTC-offset change of 2026-2028 (found by scanning, independently of
 * cron.c) and around a few fixed dates; for each expression the reference
 * walks every minute of the window and lists the firings, and cron_next,
 * chained from the window's start and started at times around the change,
 * must give exactly those.
 */
static const char *const ref_zones[] = { "Europe/Berlin", "America/New_York",
	"Australia/Sydney", "Asia/Shanghai", "Asia/Kolkata" };
static const int ref_changes[] = { 6, 6, 6, 0, 0 };

static const char *const ref_exprs[] = { "30 2 * * *", "0 * * * *",
	"*/15 1-3 * * *", "0 0 1 * *", "0 9 * * mon-fri", "0 0 13 * fri",
	"59 23 31 12 *", "* * * * *", "30 1 * * *", "45 1,2 * * sun",
	"0,30 0-3 * * *" };

static const char *const ref_fixed[] = { "2027-01-01T00:00:00Z",
	"2028-01-01T00:00:00Z", "2028-02-29T00:00:00Z",
	"2026-11-13T00:00:00Z" };

#define REF_HALF    (2 * 86400)
#define REF_WARM    86400
#define REF_MAXFIRE (4 * 1440 + 1)

/* The UTC offset at t in the current zone. */
static long
ref_offset(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm) == NULL)
		ck_abort_msg("localtime_r(%lld) failed", (long long)t);
	return tm.tm_gmtoff;
}

/* Whether the local wall time w (seconds, as if UTC) matches c. */
static int
ref_matches(const struct cron *c, int64_t w)
{
	time_t tt = (time_t)w;
	struct tm tm;
	int dom, dow;

	if (gmtime_r(&tt, &tm) == NULL)
		ck_abort_msg("gmtime_r(%lld) failed", (long long)w);
	if (!((c->minutes >> tm.tm_min) & 1) ||
	    !((c->hours >> tm.tm_hour) & 1) ||
	    !((c->months >> (tm.tm_mon + 1)) & 1))
		return 0;
	dom = (c->days >> tm.tm_mday) & 1;
	dow = (c->weekdays >> tm.tm_wday) & 1;
	if ((c->flags & CRON_DAY_STAR) || (c->flags & CRON_WEEKDAY_STAR))
		return dom && dow;
	return dom || dow;
}

/*
 * Every firing in (from, to], minute by minute: a minute fires if its wall
 * time matches and is later than every wall time seen before (so a repeated
 * time fires only the first time), or if wall times skipped by a jump just
 * before it match. Returns the count.
 */
static int
ref_walk(const struct cron *c, int64_t from, int64_t to, int64_t *fires)
{
	int64_t t, wall, prev, maxwall, w;
	int n = 0, fire;

	t = (from - REF_WARM) / 60 * 60;
	prev = t - 60 + ref_offset(t - 60);
	maxwall = prev;
	for (; t <= to; t += 60) {
		wall = t + ref_offset(t);
		fire = wall > maxwall && ref_matches(c, wall);
		for (w = prev + 60; w < wall && !fire; w += 60)
			fire = ref_matches(c, w);
		if (wall > maxwall)
			maxwall = wall;
		prev = wall;
		if (fire && t > from) {
			if (n == REF_MAXFIRE)
				ck_abort_msg("too many firings");
			fires[n++] = t;
		}
	}
	return n;
}

/* Offset changes in [from, to) of the current zone, to the second. */
static int
ref_changes_in(int64_t from, int64_t to, int64_t *out, int max)
{
	int64_t t, lo, hi, mid;
	int n = 0;

	for (t = from; t + 3600 <= to; t += 3600) {
		if (ref_offset(t) == ref_offset(t + 3600))
			continue;
		for (lo = t, hi = t + 3600; hi - lo > 1;) {
			mid = lo + (hi - lo) / 2;
			if (ref_offset(mid) == ref_offset(lo))
				lo = mid;
			else
				hi = mid;
		}
		ck_assert_int_lt(n, max);
		out[n++] = hi;
	}
	return n;
}

/* Check cron_next against the reference in the window around centre. */
static void
ref_window(const char *zone, int64_t centre)
{
	static const int64_t starts[] = { -86400, -7201, -3601, -3600, -1801,
		-60, -1, 0, 1, 59, 1799, 3599, 3600, 5400, 86399 };
	static int64_t fires[REF_MAXFIRE];
	int64_t from = centre - REF_HALF, to = centre + REF_HALF, x, got;
	struct cron c;
	char *cause = NULL;
	size_t e, s;
	int n, i;

	for (e = 0; e < sizeof ref_exprs / sizeof ref_exprs[0]; e++) {
		ck_assert_int_eq(cron_parse(ref_exprs[e], &c, &cause), 0);
		setenv("TZ", zone, 1);
		tzset();
		n = ref_walk(&c, from, to, fires);
		for (x = from, i = 0;; i++) {
			if (cron_next(&c, zone, x, &got, &cause) != 0)
				ck_abort_msg("%s: %s", ref_exprs[e], cause);
			if (got > to)
				break;
			if (i >= n || got != fires[i])
				ck_abort_msg("%s '%s' after %lld: got %lld, "
					     "reference %lld",
				    zone, ref_exprs[e], (long long)x,
				    (long long)got,
				    i < n ? (long long)fires[i] : -1LL);
			x = got;
		}
		ck_assert_msg(i == n,
		    "%s '%s' near %lld: %d firings, reference %d", zone,
		    ref_exprs[e], (long long)centre, i, n);
		for (s = 0; s < sizeof starts / sizeof starts[0]; s++) {
			x = centre + starts[s];
			ck_assert_int_eq(
			    cron_next(&c, zone, x, &got, &cause), 0);
			for (i = 0; i < n && fires[i] <= x; i++)
				;
			if (i < n)
				ck_assert_msg(got == fires[i],
				    "%s '%s' after %lld: got %lld, reference "
				    "%lld",
				    zone, ref_exprs[e], (long long)x,
				    (long long)got, (long long)fires[i]);
			else
				ck_assert_msg(got > to,
				    "%s '%s' after %lld: got %lld, reference "
				    "none before %lld",
				    zone, ref_exprs[e], (long long)x,
				    (long long)got, (long long)to);
		}
	}
}

START_TEST(test_reference)
{
	const char *zone = ref_zones[_i];
	int64_t changes[16];
	size_t f;
	int n, k;

	setenv("TZ", zone, 1);
	tzset();
	n = ref_changes_in(utc("2026-01-01T00:00:00Z"),
	    utc("2029-01-01T00:00:00Z"), changes, 16);
	ck_assert_int_eq(n, ref_changes[_i]);
	for (k = 0; k < n; k++)
		ref_window(zone, changes[k]);
	for (f = 0; f < sizeof ref_fixed / sizeof ref_fixed[0]; f++)
		ref_window(zone, utc(ref_fixed[f]));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("cron");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_parse, 0, sizeof parse_cases / sizeof parse_cases[0]);
	tcase_add_loop_test(
	    tc, test_next, 0, sizeof next_cases / sizeof next_cases[0]);
	tcase_add_test(tc, test_parse_long);
	tcase_add_test(tc, test_check_tz);
	tcase_add_test(tc, test_tz_restored);
	tcase_add_loop_test(
	    tc, test_reference, 0, sizeof ref_zones / sizeof ref_zones[0]);
	tcase_set_timeout(tc, 100);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
