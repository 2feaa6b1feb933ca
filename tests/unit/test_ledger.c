/* The ledger: intervals from state changes, and what status observes. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"

struct iv_case {
	const char *events; /* "t:state[/source] ...", stated by default */
	int64_t end;
	const char *want; /* "start-end:R|S|U ...", R+ resumes the run */
};

static const struct iv_case iv_cases[] = {
	{ "", 100, "" },
	{ "10:running", 100, "10-100:R" },
	{ "10:running 40:stopped", 100, "10-40:R 40-100:S" },
	{ "10:running 40:stopped 60:running", 50, "10-40:R 40-50:S" },
	{ "10:running 40:released", 100, "10-40:R" },
	{ "10:running 40:unknown 70:running", 100, "10-40:R 40-70:U 70-100:R" },
	/* Seen again after an outage: the run goes on (billing.h). */
	{ "10:running/observed 40:unknown/observed 70:running/observed", 100,
	    "10-40:R 40-70:U 70-100:R+" },
	{ "10:running/observed 40:unknown/observed 70:running/observed "
	  "80:stopped/stated 90:running/observed",
	    100, "10-40:R 40-70:U 70-80:R+ 80-90:S 90-100:R" },
	/* Two changes at the same second: the later one holds. */
	{ "10:running 10:stopped", 100, "10-100:S" },
	/* Runs stay separate (each start is billed); stops merge. */
	{ "10:running 20:running", 30, "10-20:R 20-30:R" },
	{ "10:stopped 20:stopped", 30, "10-30:S" },
	{ "200:running", 100, "" },
};

START_TEST(test_intervals)
{
	const struct iv_case *c = &iv_cases[_i];
	struct ledger_event ev[8];
	struct billing_interval iv[8];
	char *copy = strdup(c->events), *tok, *save, got[256] = "";
	size_t n = 0, k, i;

	for (tok = strtok_r(copy, " ", &save); tok != NULL;
	     tok = strtok_r(NULL, " ", &save)) {
		ev[n].t = strtoll(tok, NULL, 10);
		snprintf(ev[n].source, sizeof ev[n].source, "%s",
		    strchr(tok, '/') != NULL ? strchr(tok, '/') + 1 : "stated");
		if (strchr(tok, '/') != NULL)
			*strchr(tok, '/') = '\0';
		snprintf(ev[n].state, sizeof ev[n].state, "%s",
		    strchr(tok, ':') + 1);
		n++;
	}
	free(copy);
	k = ledger_intervals(ev, n, c->end, iv);
	for (i = 0; i < k; i++) {
		size_t len = strlen(got);
		snprintf(got + len, sizeof got - len, "%s%lld-%lld:%c%s",
		    i ? " " : "", (long long)iv[i].start, (long long)iv[i].end,
		    iv[i].state == BILL_RUNNING	      ? 'R'
			: iv[i].state == BILL_STOPPED ? 'S'
						      : 'U',
		    iv[i].resumes ? "+" : "");
	}
	ck_assert_str_eq(got, c->want);
}
END_TEST

static int
count(struct inventory *inv, const char *sql)
{
	sqlite3_stmt *st;
	int v = -1;

	ck_assert_int_eq(
	    sqlite3_prepare_v2(inv->db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

/*
 * A container start before the rental began (when the instance was added,
 * or its since) bills from then, and the note says it was clamped.
 */
START_TEST(test_first_sighting_clamped)
{
	char dir[] = "/tmp/gpufleet-ledger.XXXXXX", path[64], *cause = NULL;
	struct inventory *inv;
	struct instance in, b;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	instance_init(&in);
	in.name = strdup("a1");
	in.host = strdup("10.0.0.1");
	in.created_at = 1796000000;
	ck_assert_int_eq(inventory_add(inv, &in, &cause), 0);
	/* 2000-01-02 on first contact. */
	ck_assert_int_eq(
	    ledger_observe(inv, &in, 1796000100, 946771200, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT t FROM ledger WHERE note LIKE 'first "
			     "seen running (its container start "
			     "2000-01-02T00:00:00Z is before the rental "
			     "began: clamped)'"),
	    1796000000);
	/* Added with --since: the books go back to it, not further. */
	instance_init(&b);
	b.name = strdup("b1");
	b.host = strdup("10.0.0.2");
	b.created_at = 1796000000;
	b.since = 1795900000;
	ck_assert_int_eq(inventory_add(inv, &b, &cause), 0);
	ck_assert_int_eq(
	    ledger_observe(inv, &b, 1796000100, 1795950000, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT t FROM ledger WHERE instance_id = 2 AND "
			     "note = 'first seen running'"),
	    1795950000);
	ck_assert_int_eq(ledger_check_time(1795900000 - 86400, ledger_begin(&b),
			     1796000100, &cause),
	    0);
	instance_clear(&in);
	instance_clear(&b);
	inventory_close(inv);
	snprintf(path, sizeof path, "rm -rf %s", dir);
	ck_assert_int_eq(system(path), 0);
}
END_TEST

/* Sightings, a restart nobody asked for, an outage and the way back. */
START_TEST(test_observe)
{
	char dir[] = "/tmp/gpufleet-ledger.XXXXXX", path[64], *cause = NULL;
	struct inventory *inv;
	struct instance in;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	instance_init(&in);
	in.name = strdup("a1");
	in.host = strdup("10.0.0.1");
	in.created_at = 1;
	ck_assert_int_eq(inventory_add(inv, &in, &cause), 0);

	/* First sighting: running since the container started. */
	ck_assert_int_eq(ledger_observe(inv, &in, 1000, 900, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT t FROM ledger WHERE state = "
			     "'running' AND source = 'observed'"),
	    900);
	ck_assert_int_eq(
	    sqlite3_exec(inv->db,
		"INSERT INTO sample_host "
		"(instance_id, t, container_start) VALUES (1, 1000, 900)",
		NULL, NULL, NULL),
	    SQLITE_OK);
	/* Same container: nothing new. */
	ck_assert_int_eq(ledger_observe(inv, &in, 1060, 900, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv, "SELECT count(*) FROM ledger"), 1);
	/* The container start moved and nobody stopped it: a restart. */
	ck_assert_int_eq(ledger_observe(inv, &in, 1200, 1150, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT t FROM incident WHERE kind = "
			     "'restart'"),
	    1150);
	/* Unreachable: unknown from then on, an outage. */
	ck_assert_int_eq(ledger_observe(inv, &in, 1300, 0, 0, 0, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT t FROM ledger WHERE state = "
			     "'unknown'"),
	    1300);
	ck_assert_int_eq(ledger_observe(inv, &in, 1360, 0, 0, 0, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT count(*) FROM ledger WHERE state "
			     "= 'unknown'"),
	    1);
	/* Back: running again, the outage ends. */
	ck_assert_int_eq(ledger_observe(inv, &in, 1400, 1150, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT count(*) FROM incident WHERE "
			     "kind = 'outage_end'"),
	    1);
	ck_assert_int_eq(count(inv, "SELECT count(*) FROM ledger"), 3);
	/* Stopped by gpufleet, started again: running from the new
	   container's start. */
	ck_assert_int_eq(ledger_add(inv, in.id, 1500, "stopped", "performed",
			     "stop d-1 (shutdown)", &cause),
	    0);
	ck_assert_int_eq(ledger_observe(inv, &in, 1700, 1650, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT t FROM ledger WHERE note = 'running "
			     "again' AND state = 'running'"),
	    1650);
	ck_assert_int_eq(count(inv, "SELECT count(*) FROM ledger"), 5);
	/* Marked stopped, started from the platform's console. */
	ck_assert_int_eq(
	    ledger_add(inv, in.id, 1800, "stopped", "stated", NULL, &cause), 0);
	ck_assert_int_eq(ledger_observe(inv, &in, 1900, 1850, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT t FROM ledger WHERE note = 'running "
			     "again (started outside gpufleet)'"),
	    1850);
	/* Booked stopped, yet the same container answers: it bills. */
	ck_assert_int_eq(
	    ledger_add(inv, in.id, 2000, "stopped", "stated", NULL, &cause), 0);
	ck_assert_int_eq(ledger_observe(inv, &in, 2100, 1850, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv,
			     "SELECT t FROM ledger WHERE note = 'answers "
			     "while booked stopped: running'"),
	    2100);
	/* The laptop's clock moved back: a row dated after now decides
	   nothing, and nothing is booked per poll because of it. */
	ck_assert_int_eq(ledger_observe(inv, &in, 2200, 0, 0, 0, &cause), 0);
	ck_assert_int_eq(count(inv, "SELECT count(*) FROM ledger"), 10);
	ck_assert_int_eq(ledger_observe(inv, &in, 2150, 1850, 0, 1, &cause), 0);
	ck_assert_int_eq(ledger_observe(inv, &in, 2160, 1850, 0, 1, &cause), 0);
	ck_assert_int_eq(count(inv, "SELECT count(*) FROM ledger"), 10);
	ck_assert_int_eq(count(inv,
			     "SELECT count(*) FROM incident WHERE "
			     "kind = 'outage_end'"),
	    1);
	instance_clear(&in);
	inventory_close(inv);
	snprintf(path, sizeof path, "rm -rf %s", dir);
	ck_assert_int_eq(system(path), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ledger");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_intervals, 0, sizeof iv_cases / sizeof iv_cases[0]);
	tcase_add_test(tc, test_observe);
	tcase_add_test(tc, test_first_sighting_clamped);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
