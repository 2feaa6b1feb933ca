/*
 * Schedules (controller/schedule.c) in a real SQLite inventory, with the
 * clock passed in: the store (add, duplicate name, tag, get, list,
 * pause/resume, remove), the missed-run cases of schedule_due, the test
 * clock both ways, and the zone chain (the schedule's, [schedule] tz, the
 * system's).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "db.h"
#include "fleet.h"
#include "schedrun.h"
#include "schedule.h"
#include "status.h"

/* 2026-12-01T00:00:00Z, a Tuesday. */
#define T0 1796083200LL

static struct inventory *inv;
static char dir[64];

static void
setup(void)
{
	char path[96], *cause = NULL;

	setenv("TZ", "UTC", 1);
	tzset();
	unsetenv("GPUFLEET_TEST_CRON_MINUTE");
	snprintf(dir, sizeof dir, "/tmp/gpufleet-schedule.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
}

static void
teardown(void)
{
	char cmd[96];

	inventory_close(inv);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A schedule value (not stored) with cron expr, considered until cu. */
static struct schedule
sched(const char *expr, const char *tz, int64_t cu)
{
	struct schedule s;

	memset(&s, 0, sizeof s);
	s.cron = (char *)expr;
	s.tz = (char *)tz;
	s.considered_until = cu;
	return s;
}

START_TEST(store)
{
	struct schedule s, got, *list;
	size_t n;
	char *cause = NULL;

	memset(&s, 0, sizeof s);
	s.name = strdup("nightly");
	s.selector = strdup("@train");
	s.cron = strdup("0 2 * * *");
	s.tz = strdup("Asia/Shanghai");
	s.action = SCHED_SHUTDOWN;
	s.unless_busy = 1;
	s.catchup_s = 3600;
	s.warn_minutes = 10;
	s.created_at = T0;
	ck_assert_int_eq(schedule_add(inv, &s, &cause), 0);
	ck_assert_uint_eq(strlen(s.tag), 8);
	ck_assert_uint_eq(strspn(s.tag, "0123456789abcdef"), 8);
	ck_assert_int_eq(schedule_add(inv, &s, &cause), -GF_EUSAGE);
	ck_assert_str_eq(cause, "a schedule named 'nightly' already exists");
	free(cause);
	cause = NULL;

	ck_assert_int_eq(schedule_get(inv, "nightly", &got, &cause), 0);
	ck_assert_str_eq(got.tag, s.tag);
	ck_assert_str_eq(got.tz, "Asia/Shanghai");
	ck_assert_int_eq(got.action, SCHED_SHUTDOWN);
	ck_assert_int_eq(got.unless_busy, 1);
	ck_assert_int_eq(got.warn_minutes, 10);
	ck_assert_ptr_null(got.command);
	ck_assert_int_eq(got.considered_until, T0);
	schedule_clear(&got);

	free(s.name);
	s.name = strdup("df");
	s.action = SCHED_EXEC;
	s.command = strdup("[\"df\",\"-h\"]");
	free(s.tz);
	s.tz = NULL;
	ck_assert_int_eq(schedule_add(inv, &s, &cause), 0);
	ck_assert_int_eq(schedule_list(inv, &list, &n, &cause), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(list[0].name, "df");
	ck_assert_str_eq(list[0].command, "[\"df\",\"-h\"]");
	ck_assert_ptr_null(list[0].tz);
	ck_assert_str_eq(list[1].name, "nightly");
	ck_assert_str_ne(list[0].tag, list[1].tag);
	schedule_list_free(list, n);

	/* Resuming skips what fell while paused. */
	ck_assert_int_eq(schedule_set_paused(inv, "df", 1, T0 + 50, &cause), 0);
	ck_assert_int_eq(schedule_get(inv, "df", &got, &cause), 0);
	ck_assert_int_eq(got.paused, 1);
	ck_assert_int_eq(got.considered_until, T0);
	schedule_clear(&got);
	ck_assert_int_eq(
	    schedule_set_paused(inv, "df", 0, T0 + 100, &cause), 0);
	ck_assert_int_eq(schedule_get(inv, "df", &got, &cause), 0);
	ck_assert_int_eq(got.paused, 0);
	ck_assert_int_eq(got.considered_until, T0 + 100);
	schedule_clear(&got);

	ck_assert_int_eq(schedule_remove(inv, "df", &cause), 0);
	ck_assert_int_eq(schedule_remove(inv, "df", &cause), -GF_EUSAGE);
	ck_assert_str_eq(cause, "no schedule df");
	free(cause);
	cause = NULL;
	ck_assert_int_eq(schedule_get(inv, "df", &got, &cause), -GF_EUSAGE);
	ck_assert_str_eq(cause, "no schedule df");
	free(cause);
	schedule_clear(&s);
}
END_TEST

/* One row of the missed-run table: every 5 minutes from T0. */
static const struct due_case {
	const char *what;
	int64_t cu, now;
	int due;
	int64_t occ;
	long nmissed;
	int64_t first;
} due_cases[] = {
	{ "nothing due yet", T0 + 1, T0 + 299, 0, 0, 0, 0 },
	{ "one due, just now", T0 + 1, T0 + 300, 1, T0 + 300, 0, 0 },
	{ "one due, a while ago", T0 + 1, T0 + 420, 1, T0 + 300, 0, 0 },
	{ "several missed: newest only", T0 + 1, T0 + 1000, 1, T0 + 900, 2,
	    T0 + 300 },
	{ "considered_until at an occurrence excludes it", T0 + 300, T0 + 599,
	    0, 0, 0, 0 },
	{ "considered_until at one, the next due", T0 + 300, T0 + 600, 1,
	    T0 + 600, 0, 0 },
	{ "a day missed", T0, T0 + 86400, 1, T0 + 86400, 287, T0 + 300 },
	{ "now before considered_until", T0 + 900, T0 + 10, 0, 0, 0, 0 },
};

START_TEST(due)
{
	const struct due_case *dc = &due_cases[_i];
	struct schedule s = sched("*/5 * * * *", NULL, dc->cu);
	int64_t occ = -1, first = -1;
	long nmissed = -1;
	char *cause = NULL;

	ck_assert_msg(schedule_due(&s, NULL, dc->now, &occ, &nmissed, &first,
			  &cause) == dc->due,
	    "%s", dc->what);
	ck_assert_msg(occ == dc->occ, "%s: occ %lld", dc->what, (long long)occ);
	ck_assert_msg(
	    nmissed == dc->nmissed, "%s: nmissed %ld", dc->what, nmissed);
	ck_assert_msg(
	    first == dc->first, "%s: first %lld", dc->what, (long long)first);
}
END_TEST

/* A year of every minute: the count stops at the cap, the newest is right. */
START_TEST(due_cap)
{
	struct schedule s =
	    sched("* * * * *", "Europe/Berlin", T0 - 366 * 86400);
	int64_t occ, first;
	long nmissed;
	char *cause = NULL;

	ck_assert_int_eq(
	    schedule_due(&s, NULL, T0 + 59, &occ, &nmissed, &first, &cause), 1);
	ck_assert_int_eq(occ, T0);
	ck_assert_int_eq(nmissed, SCHEDULE_MISSED_CAP);
	ck_assert_int_eq(first, T0 - 366 * 86400 + 60);

	/* Just under the cap: counted exactly. */
	s.considered_until = T0 - SCHEDULE_MISSED_CAP * 60LL;
	ck_assert_int_eq(
	    schedule_due(&s, NULL, T0, &occ, &nmissed, &first, &cause), 1);
	ck_assert_int_eq(occ, T0);
	ck_assert_int_eq(nmissed, SCHEDULE_MISSED_CAP - 1);
	ck_assert_int_eq(first, T0 - (SCHEDULE_MISSED_CAP - 1) * 60LL);
}
END_TEST

START_TEST(due_paused)
{
	struct schedule s = sched("*/5 * * * *", NULL, T0);
	int64_t occ, first;
	long nmissed;
	char *cause = NULL;

	s.paused = 1;
	ck_assert_int_eq(
	    schedule_due(&s, NULL, T0 + 600, &occ, &nmissed, &first, &cause),
	    0);
}
END_TEST

/*
 * A daemon read a schedule, then `schedule pause` committed before its
 * claim: the claim sees the pause (inside its transaction) and nothing
 * runs. (Were it claimed, the spawn hook kills this process: no child.)
 */
START_TEST(pause_before_claim)
{
	struct schedule s, got;
	struct schedrun_child c;
	struct config conf;
	struct fleet f;
	int64_t now = (int64_t)time(NULL);
	char path[96], *cause = NULL;

	memset(&s, 0, sizeof s);
	s.name = (char *)"tick";
	s.selector = (char *)"all";
	s.cron = (char *)"* * * * *";
	s.action = SCHED_EXEC;
	s.command = (char *)"[\"true\"]";
	s.catchup_s = 3600;
	s.created_at = now - 120;
	ck_assert_int_eq(schedule_add(inv, &s, &cause), 0);
	free(s.tag);
	ck_assert_int_eq(schedule_get(inv, "tick", &got, &cause), 0);
	ck_assert_int_eq(got.paused, 0);
	ck_assert_int_eq(schedule_set_paused(inv, "tick", 1, now, &cause), 0);

	config_defaults(&conf);
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	fleet_init(&f, path, &conf);
	f.inv = inv;
	setenv("XDG_STATE_HOME", dir, 1);
	setenv("GPUFLEET_TEST_SPAWN_CRASH", "1", 1);
	ck_assert_int_eq(
	    schedrun_consider(&f, &got, now, NULL, NULL, &c, &cause), 0);
	unsetenv("GPUFLEET_TEST_SPAWN_CRASH");
	ck_assert_int_eq(
	    db_exec(inv, "SELECT 1 FROM schedule_run", "reading", &cause, ""),
	    0);
	schedule_clear(&got);
	ck_assert_int_eq(schedule_get(inv, "tick", &got, &cause), 0);
	ck_assert_int_eq(got.considered_until, now - 120);
	schedule_clear(&got);
	config_clear(&conf);
}
END_TEST

/* The test clock: a cron minute lasts 6 real seconds from T0 on. */
START_TEST(test_clock)
{
	struct schedule s = sched("*/2 * * * *", NULL, 0);
	int64_t next, occ, first, t;
	long nmissed;
	char *cause = NULL;

	ck_assert_int_eq(schedule_clock(T0 + 6), T0 + 6);
	setenv("GPUFLEET_TEST_CRON_MINUTE", "6@1796083200", 1);
	ck_assert_int_eq(schedule_clock(T0), T0);
	ck_assert_int_eq(schedule_clock(T0 + 6), T0 + 60);
	ck_assert_int_eq(schedule_clock(T0 + 7), T0 + 70);
	ck_assert_int_eq(schedule_clock(T0 - 6), T0 - 60);
	ck_assert_int_eq(schedule_real(T0 + 60), T0 + 6);
	ck_assert_int_eq(schedule_real(T0 - 60), T0 - 6);
	ck_assert_int_eq(schedule_real(T0 + 61), T0 + 7);
	for (t = T0 - 100; t < T0 + 100; t++) {
		ck_assert_int_ge(schedule_clock(schedule_real(t)), t);
		ck_assert_int_le(schedule_real(schedule_clock(t)), t);
	}

	ck_assert_int_eq(schedule_next(&s, NULL, T0, &next, &cause), 0);
	ck_assert_int_eq(next, T0 + 12);
	ck_assert_int_eq(schedule_next(&s, NULL, T0 + 12, &next, &cause), 0);
	ck_assert_int_eq(next, T0 + 24);

	s.considered_until = T0;
	ck_assert_int_eq(
	    schedule_due(&s, NULL, T0 + 11, &occ, &nmissed, &first, &cause), 0);
	ck_assert_int_eq(
	    schedule_due(&s, NULL, T0 + 40, &occ, &nmissed, &first, &cause), 1);
	ck_assert_int_eq(occ, T0 + 36);
	ck_assert_int_eq(nmissed, 2);
	ck_assert_int_eq(first, T0 + 12);
	s.considered_until = occ;
	ck_assert_int_eq(
	    schedule_due(&s, NULL, T0 + 47, &occ, &nmissed, &first, &cause), 0);
	ck_assert_int_eq(
	    schedule_due(&s, NULL, T0 + 48, &occ, &nmissed, &first, &cause), 1);
	ck_assert_int_eq(occ, T0 + 48);

	setenv("GPUFLEET_TEST_CRON_MINUTE", "nonsense", 1);
	ck_assert_int_eq(schedule_clock(T0 + 6), T0 + 6);
}
END_TEST

/* 02:00 daily in the schedule's zone, else [schedule] tz, else TZ. */
START_TEST(zone_chain)
{
	struct schedule s = sched("0 2 * * *", "Asia/Shanghai", 0);
	struct config c;
	int64_t next;
	char *cause = NULL;

	config_defaults(&c);
	c.schedule_tz = strdup("Asia/Kolkata");
	ck_assert_str_eq(schedule_zone(&s, &c), "Asia/Shanghai");
	ck_assert_int_eq(schedule_next(&s, &c, T0, &next, &cause), 0);
	ck_assert_int_eq(next, T0 + 18 * 3600); /* 02:00 CST 2 Dec */

	s.tz = NULL;
	ck_assert_str_eq(schedule_zone(&s, &c), "Asia/Kolkata");
	ck_assert_int_eq(schedule_next(&s, &c, T0, &next, &cause), 0);
	ck_assert_int_eq(next, T0 + 20 * 3600 + 1800); /* 02:00 IST */

	ck_assert_ptr_null(schedule_zone(&s, NULL));
	ck_assert_int_eq(schedule_next(&s, NULL, T0, &next, &cause), 0);
	ck_assert_int_eq(next, T0 + 2 * 3600); /* TZ=UTC */
	setenv("TZ", "America/New_York", 1);
	tzset();
	ck_assert_int_eq(schedule_next(&s, NULL, T0, &next, &cause), 0);
	ck_assert_int_eq(next, T0 + 7 * 3600); /* 02:00 EST 1 Dec */
	config_clear(&c);
}
END_TEST

/* [schedule] tz is checked when the config is loaded. */
START_TEST(config_tz)
{
	struct config c;
	char path[96], *cause = NULL;
	FILE *f;

	snprintf(path, sizeof path, "%s/config.ini", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs("[schedule]\ntz = Mars/Olympus\n", f);
	fclose(f);
	config_defaults(&c);
	ck_assert_int_ne(config_load(&c, path, 1, &cause), 0);
	ck_assert_ptr_nonnull(strstr(cause, "'Mars/Olympus'"));
	free(cause);
	cause = NULL;
	config_clear(&c);

	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs("[schedule]\ntz = Asia/Kolkata\n", f);
	fclose(f);
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, path, 1, &cause), 0);
	ck_assert_str_eq(c.schedule_tz, "Asia/Kolkata");
	config_clear(&c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("schedule");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, store);
	tcase_add_loop_test(
	    tc, due, 0, (int)(sizeof due_cases / sizeof due_cases[0]));
	tcase_add_test(tc, due_cap);
	tcase_add_test(tc, due_paused);
	tcase_add_test(tc, pause_before_claim);
	tcase_add_test(tc, test_clock);
	tcase_add_test(tc, zone_chain);
	tcase_add_test(tc, config_tz);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
