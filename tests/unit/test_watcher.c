/*
 * Storing what the watcher reported (controller/watcher.c) in a real
 * SQLite inventory: each journal entry once, with its effects once (a
 * stop requested at the journaled time on the controller's clock, booked
 * once evidence confirms it, an alert, a due local stop), only for ids
 * gpufleet armed (any other is a rejected claim), the cursor, the fired
 * ids, an older agent; the notifications new entries queue.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "armed.h"
#include "config.h"
#include "job.h"
#include "ledger.h"
#include "localstop.h"
#include "notify.h"
#include "watcher.h"

#define NOW  1796000000LL
#define SKEW 100 /* the instance's clock runs 100 s ahead */
#define E(seq, t, rest)                                                        \
	"{\"epoch\":\"00000000000000aa\",\"seq\":" #seq ",\"time\":" #t        \
	",\"event\":" rest "}"

static struct inventory *inv;
static struct instance in;
static char dir[64];

static void
setup(void)
{
	char path[96], *cause = NULL;

	snprintf(dir, sizeof dir, "/tmp/gpufleet-watcher.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	instance_init(&in);
	in.name = strdup("a1");
	in.host = strdup("10.0.0.1");
	in.created_at = 1;
	ck_assert_int_eq(inventory_add(inv, &in, &cause), 0);
	/* What gpufleet armed there (at 1, so no time is clamped). */
	ck_assert_int_eq(armed_plan(inv, in.id,
			     "{\"deadlines\":[{\"id\":\"d-1\",\"at\":5},"
			     "{\"id\":\"d-2\",\"at\":5},{\"id\":\"d-3\","
			     "\"at\":5},{\"id\":\"d-4\",\"at\":5,"
			     "\"action\":\"local\"}],\"autostop\":{\"id\":"
			     "\"a-1\"}}",
			     0, 1, 0, &cause),
	    0);
	ck_assert_int_eq(
	    armed_job(inv, in.id, "j-7-1795827310", 1, 0, 0, &cause), 0);
}

static void
teardown(void)
{
	char cmd[96];

	instance_clear(&in);
	inventory_close(inv);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static long long
q(const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;

	ck_assert_int_eq(
	    sqlite3_prepare_v2(inv->db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Store a report read at now whose watcher section is section (or NULL). */
static void
store_at(const char *section, int64_t now)
{
	struct report rep;
	json_t *o;
	char *cause = NULL;

	memset(&rep, 0, sizeof rep);
	rep.time = now + SKEW;
	if (section != NULL) {
		o = json_loads(section, 0, NULL);
		ck_assert_ptr_nonnull(o);
		report_parse_watcher(o, now + SKEW, &rep.watcher);
		json_decref(o);
	}
	ck_assert_int_eq(watcher_store(inv, &in, now, SKEW, &rep, &cause), 0);
	report_watcher_free(&rep.watcher);
}

/* Store a report at NOW whose watcher section is section (or NULL). */
static void
store(const char *section)
{
	store_at(section, NOW);
}

#define SECTION(journal)                                                       \
	"{\"state\":\"running\",\"pid\":42,\"generation\":3,\"plan\":"         \
	"{\"version\":1,\"generation\":3},\"journal_epoch\":"                  \
	"\"00000000000000aa\",\"journal\":[" journal "]}"

START_TEST(test_once)
{
	const char *s = SECTION(E(1, 1796000050, "\"journal\"") "," E(
	    2, 1796000060, "\"firing\",\"id\":\"d-1\"") "," E(3, 1796000070,
	    "\"stopping\",\"id\":\"d-1\"") "," E(4, 1796000080,
	    "\"stopped\",\"id\":\"d-1\""));
	char *cursor = NULL, *cause = NULL, **ids;
	size_t n;

	store(s);
	ck_assert_int_eq(q("SELECT count(*) FROM journal"), 4);
	/* One stop requested, at the stopping entry's time on the
	   controller's clock; the books wait for evidence. */
	ck_assert_int_eq(q("SELECT count(*) FROM ledger"), 0);
	ck_assert_int_eq(q("SELECT requested_at FROM stop_request WHERE "
			   "fire_id = 'd-1' AND state = 'requested' AND "
			   "cause = 'shutdown'"),
	    1796000070 - SKEW);
	ck_assert_int_eq(
	    q("SELECT t FROM journal WHERE seq = 3"), 1796000070 - SKEW);
	/* The same entries again (a cursor lost): nothing twice. */
	store(s);
	ck_assert_int_eq(q("SELECT count(*) FROM journal"), 4);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request"), 1);
	/* Evidence: a container that started after the request. */
	ck_assert_int_eq(
	    ledger_observe(inv, &in, NOW, 1796000075 - SKEW, 0, 1, &cause), 0);
	ck_assert_int_eq(q("SELECT t FROM ledger WHERE state = 'stopped' AND "
			   "source = 'performed' AND note = 'stop d-1 "
			   "(shutdown)'"),
	    1796000070 - SKEW);
	ck_assert_int_eq(q("SELECT t FROM ledger WHERE state = 'running' AND "
			   "note = 'running again'"),
	    1796000075 - SKEW);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request WHERE state = "
			   "'confirmed' AND confirmed_by = 'restart'"),
	    1);
	ck_assert_int_eq(watcher_cursor(inv, in.id, &cursor, &cause), 0);
	ck_assert_str_eq(cursor, "00000000000000aa:4");
	free(cursor);
	ck_assert_int_eq(watcher_fired_ids(inv, in.id, &ids, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ids[0], "d-1");
	watcher_ids_free(ids, n);
	ck_assert_int_eq(q("SELECT skew FROM watcher_state"), SKEW);
	ck_assert_int_eq(q("SELECT generation FROM watcher_state"), 3);
}
END_TEST

/*
 * A job's start and end in the journal fill the job table once, on the
 * controller's clock; what the agent's job ls says later wins; an entry
 * that does not check out changes nothing.
 */
START_TEST(test_jobs)
{
	const char *s = SECTION(E(1, 1796000050, "\"journal\"") "," E(2,
	    1796000060,
	    "\"job_started\",\"job\":7,\"name\":\"train\",\"pid\":42,"
	    "\"started\":1796000059,\"then\":\"stop\",\"fire_id\":"
	    "\"j-7-1796000059\"") "," E(3, 1796000070,
	    "\"job_ended\",\"job\":7,\"name\":\"train\",\"state\":"
	    "\"killed\",\"exit\":null,\"signal\":\"TERM\",\"reason\":null,"
	    "\"started\":1796000059,\"ended\":1796000069,\"duration_s\":10,"
	    "\"then\":\"stop\",\"fire_id\":\"j-7-1796000059\",\"last_line\":"
	    "\"epoch 3\"") "," E(4, 1796000080,
	    "\"job_ended\",\"job\":8,\"name\":\"x\",\"state\":\"done\","
	    "\"started\":1796000059,\"fire_id\":\"j-8-1\""));
	struct job_row *rows;
	size_t n;
	char *cause = NULL;
	json_t *ls;

	store(s);
	store(s);
	ck_assert_int_eq(q("SELECT count(*) FROM job"), 1);
	ck_assert_int_eq(job_list(inv, in.id, &rows, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(rows[0].job, 7);
	ck_assert_str_eq(rows[0].name, "train");
	ck_assert_str_eq(rows[0].end.state, "killed");
	ck_assert_str_eq(rows[0].end.signal, "TERM");
	ck_assert_int_eq(rows[0].end.has_exit, 0);
	ck_assert_int_eq(rows[0].started, 1796000059 - SKEW);
	ck_assert_int_eq(rows[0].ended, 1796000069 - SKEW);
	ck_assert_str_eq(rows[0].then, "stop");
	ck_assert_str_eq(rows[0].last_line, "epoch 3");
	ck_assert_int_eq(rows[0].pid, 42);
	job_rows_free(rows, n);
	/* job ls: the same job, and one the journal has not told yet. */
	ls =
	    json_loads("{\"jobs\":[{\"job\":9,\"name\":\"b\",\"command\":"
		       "\"sleep 9\",\"state\":\"running\",\"started\":"
		       "1796000090,\"ended\":null,\"exit\":null,\"signal\":"
		       "null,\"reason\":null,\"pid\":50,\"then\":null,"
		       "\"fire_id\":\"j-9-1796000090\",\"last_line\":null},"
		       "{\"job\":7,\"name\":\"train\",\"command\":\"python "
		       "t.py\",\"state\":\"killed\",\"started\":1796000059,"
		       "\"ended\":1796000069,\"exit\":null,\"signal\":\"TERM\","
		       "\"pid\":42,\"then\":\"stop\",\"fire_id\":"
		       "\"j-7-1796000059\",\"last_line\":\"epoch 4\"},"
		       "{\"job\":0,\"fire_id\":\"j-0-1\"}]}",
		0, NULL);
	ck_assert_ptr_nonnull(ls);
	ck_assert_int_eq(
	    job_store_ls(inv, in.id, NOW, SKEW, NOW, ls, &cause), 0);
	json_decref(ls);
	ck_assert_int_eq(q("SELECT count(*) FROM job"), 2);
	ck_assert_int_eq(job_list(inv, in.id, &rows, &n, &cause), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(rows[0].job, 9);
	ck_assert_str_eq(rows[0].end.state, "running");
	ck_assert_str_eq(rows[0].command, "sleep 9");
	ck_assert_str_eq(rows[1].command, "python t.py");
	ck_assert_str_eq(rows[1].last_line, "epoch 4");
	job_rows_free(rows, n);
	ck_assert_int_eq(job_as_of(inv, in.id), NOW);
}
END_TEST

/*
 * A job's end stored (the daemon read job_ended) before run records the
 * job it started, or before a job ls answer read earlier is stored: the
 * end stays. A row run records first is running, and the end read later
 * replaces it.
 */
START_TEST(test_end_kept)
{
	struct job_row row, *rows;
	size_t n;
	char *cause = NULL;
	json_t *ls;

	store(SECTION(E(1, 1796000050, "\"journal\"") "," E(2, 1796000070,
	    "\"job_ended\",\"job\":7,\"name\":\"train\",\"state\":"
	    "\"failed\",\"exit\":3,\"started\":1796000059,\"ended\":"
	    "1796000069,\"fire_id\":\"j-7-1796000059\",\"last_line\":"
	    "\"boom\"")));
	memset(&row, 0, sizeof row);
	row.job = 7;
	row.name = (char *)"train";
	row.command = (char *)"python train.py";
	row.then = (char *)"stop";
	row.fire_id = (char *)"j-7-1796000059";
	row.pid = 42;
	snprintf(row.end.state, sizeof row.end.state, "running");
	row.started = 1796000059 - SKEW;
	ck_assert_int_eq(job_record(inv, in.id, &row, NOW, &cause), 0);
	ls = json_loads("{\"jobs\":[{\"job\":7,\"name\":\"train\","
			"\"command\":\"python train.py\",\"state\":"
			"\"running\",\"started\":1796000059,\"pid\":42,"
			"\"fire_id\":\"j-7-1796000059\",\"last_line\":"
			"\"epoch 1\"}]}",
	    0, NULL);
	ck_assert_ptr_nonnull(ls);
	ck_assert_int_eq(
	    job_store_ls(inv, in.id, NOW, SKEW, NOW, ls, &cause), 0);
	json_decref(ls);
	ck_assert_int_eq(job_list(inv, in.id, &rows, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(rows[0].end.state, "failed");
	ck_assert_int_eq(rows[0].end.exit, 3);
	ck_assert_int_eq(rows[0].ended, 1796000069 - SKEW);
	ck_assert_str_eq(rows[0].last_line, "boom");
	/* What run knows that the journal did not say is kept. */
	ck_assert_str_eq(rows[0].command, "python train.py");
	ck_assert_str_eq(rows[0].then, "stop");
	ck_assert_int_eq(rows[0].pid, 42);
	job_rows_free(rows, n);
	/* Recorded first: running, then the end. */
	row.job = 8;
	row.fire_id = (char *)"j-8-1796000080";
	row.started = 1796000080 - SKEW;
	ck_assert_int_eq(job_record(inv, in.id, &row, NOW, &cause), 0);
	ck_assert_int_eq(
	    q("SELECT count(*) FROM job WHERE job = 8 AND state = 'running'"),
	    1);
	store(SECTION(E(3, 1796000090,
	    "\"job_ended\",\"job\":8,\"name\":\"train\",\"state\":"
	    "\"succeeded\",\"exit\":0,\"started\":1796000080,\"ended\":"
	    "1796000089,\"fire_id\":\"j-8-1796000080\"")));
	ck_assert_int_eq(
	    q("SELECT count(*) FROM job WHERE job = 8 AND state = 'succeeded'"),
	    1);
}
END_TEST

/*
 * `jobs` marks lost only the running jobs stored before its job ls was
 * sent that the answer does not list: one run recorded since may have
 * started after the instance listed its jobs.
 */
START_TEST(test_lost_since)
{
	struct job_row row;
	char *cause = NULL;
	json_t *ls;

	memset(&row, 0, sizeof row);
	row.job = 3;
	row.name = (char *)"old";
	row.fire_id = (char *)"j-3-1795999000";
	snprintf(row.end.state, sizeof row.end.state, "running");
	row.started = 1795999000 - SKEW;
	ck_assert_int_eq(job_record(inv, in.id, &row, NOW - 900, &cause), 0);
	row.job = 4;
	row.name = (char *)"new";
	row.fire_id = (char *)"j-4-1796000001";
	row.started = 1796000001 - SKEW;
	/* Recorded by a run after the job ls below was sent (at NOW). */
	ck_assert_int_eq(job_record(inv, in.id, &row, NOW + 1, &cause), 0);
	ls = json_loads("{\"jobs\":[]}", 0, NULL);
	ck_assert_int_eq(
	    job_store_ls(inv, in.id, NOW + 2, SKEW, NOW, ls, &cause), 0);
	json_decref(ls);
	ck_assert_int_eq(q("SELECT count(*) FROM job WHERE job = 3 AND state = "
			   "'lost' AND reason LIKE 'its directory is gone%'"),
	    1);
	ck_assert_int_eq(
	    q("SELECT count(*) FROM job WHERE job = 4 AND state = 'running'"),
	    1);
	/* The next job ls that does not list it either: lost. */
	ls = json_loads("{\"jobs\":[]}", 0, NULL);
	ck_assert_int_eq(
	    job_store_ls(inv, in.id, NOW + 60, SKEW, NOW + 59, ls, &cause), 0);
	json_decref(ls);
	ck_assert_int_eq(
	    q("SELECT count(*) FROM job WHERE job = 4 AND state = 'lost'"), 1);
}
END_TEST

/*
 * Unreachable after the stop was requested: confirmed, stopped from the
 * request, not unknown, not an outage.
 */
START_TEST(test_outage_after_stop)
{
	char *cause = NULL;

	ck_assert_int_eq(ledger_add(inv, in.id, NOW - 500, "running",
			     "observed", "first seen running", &cause),
	    0);
	ck_assert_int_eq(ledger_add(inv, in.id, NOW - 50, "unknown", "observed",
			     "unreachable", &cause),
	    0);
	ck_assert_int_eq(
	    ledger_incident(inv, in.id, NOW - 50, "outage_start", NULL, &cause),
	    0);
	store(SECTION(E(5, 1796000000, "\"stopping\",\"id\":\"d-2\"")));
	ck_assert_int_eq(
	    ledger_observe(inv, &in, NOW + 60, 0, 0, 0, &cause), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM ledger WHERE state = "
			   "'unknown'"),
	    0);
	ck_assert_int_eq(q("SELECT count(*) FROM incident"), 0);
	ck_assert_int_eq(
	    q("SELECT t FROM ledger WHERE state = 'stopped'"), NOW - SKEW);
	/* It answers again with the container it had: not stopped. */
	ck_assert_int_eq(
	    ledger_observe(inv, &in, NOW + 120, NOW - 600, 0, 1, &cause), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM ledger WHERE state = "
			   "'stopped'"),
	    0);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request WHERE state = "
			   "'requested'"),
	    1);
}
END_TEST

START_TEST(test_alert_and_local)
{
	struct watcher_alert *a;
	size_t n;
	char *cause = NULL;

	store(SECTION(E(1, 1796000040, "\"stopping\",\"id\":\"d-3\"")));
	ck_assert_int_eq(q("SELECT count(*) FROM ledger"), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request"), 1);
	store(SECTION(E(2, 1796000050,
	    "\"stop_failed\",\"id\":\"d-3\","
	    "\"reason\":\"still running\"") "," E(3, 1796000060,
	    "\"local_due\",\"id\":\"d-4\"")));
	ck_assert_int_eq(watcher_alerts(inv, in.id, &a, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(a[0].kind, "stop_failed");
	ck_assert_str_eq(a[0].deadline, "d-3");
	watcher_alerts_free(a, n);
	/* It never stopped: never in the ledger, the run goes on. */
	ck_assert_int_eq(q("SELECT count(*) FROM ledger"), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request WHERE state = "
			   "'failed' AND detail = 'still running'"),
	    1);
	ck_assert_int_eq(q("SELECT count(*) FROM local_stop WHERE deadline = "
			   "'d-4' AND started_at IS NULL"),
	    1);
	/* Due, but the instance has no local method: claimed, failed, once. */
	localstop_run_due(inv, NULL, NOW);
	ck_assert_int_eq(q("SELECT status FROM local_stop"), 1);
	ck_assert_int_eq(q("SELECT count(*) FROM ledger WHERE state = "
			   "'stopped'"),
	    0);
	ck_assert_int_eq(watcher_alerts_clear(inv, in.id, NOW, &cause), 0);
	ck_assert_int_eq(watcher_alerts(inv, in.id, &a, &n, &cause), 0);
	ck_assert_uint_eq(n, 0);
	watcher_alerts_free(a, n);
}
END_TEST

/*
 * An instance may change the books only for what gpufleet armed there
 * (LEDGER.md): forged ids are rejected claims (an alert each, nothing
 * else); an armed id's time is clamped to [when it was armed, now]; a
 * stop_failed does not undo a stop confirmed by evidence.
 */
START_TEST(test_claims)
{
	struct watcher_alert *a;
	size_t n, nids;
	char *cause = NULL, **ids;

	ck_assert_int_eq(armed_plan(inv, in.id,
			     "{\"deadlines\":[{\"id\":\"d-9\",\"at\":5},"
			     "{\"id\":\"d-8\",\"at\":1796010000,\"action\":"
			     "\"local\"}]}",
			     0, NOW - 100, 0, &cause),
	    0);
	store(
	    SECTION(E(1, 1796000040, "\"stopping\",\"id\":\"forged-1\"") "," E(
		2, 1796000041, "\"stopped\",\"id\":\"forged-2\"") "," E(3,
		1796000042, "\"local_due\",\"id\":\"forged-3\"") "," E(4,
		1796000043, "\"stop_failed\",\"id\":\"forged-4\"") "," E(5,
		1796000044, "\"local_due\",\"id\":\"d-1\"") "," E(6, 946684800,
		"\"stopping\",\"id\":\"d-9\"")));
	ck_assert_int_eq(q("SELECT count(*) FROM journal"), 6);
	ck_assert_int_eq(q("SELECT count(*) FROM ledger"), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM local_stop"), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request"), 1);
	/* Dated 2000: clamped to when d-9 was armed. */
	ck_assert_int_eq(q("SELECT requested_at FROM stop_request WHERE "
			   "fire_id = 'd-9'"),
	    NOW - 100);
	/* A local stop its time has not come for: nothing to run. */
	store(SECTION(E(8, 1796000045, "\"local_due\",\"id\":\"d-8\"")));
	ck_assert_int_eq(q("SELECT count(*) FROM local_stop"), 0);
	/* Rejected entries decide nothing: not fired, not due. */
	ck_assert_int_eq(q("SELECT count(*) FROM journal WHERE rejected"), 6);
	ck_assert_int_eq(watcher_fired_ids(inv, in.id, &ids, &nids, &cause), 0);
	ck_assert_uint_eq(nids, 1); /* d-9 */
	ck_assert_str_eq(ids[0], "d-9");
	watcher_ids_free(ids, nids);
	ck_assert_int_eq(watcher_alerts(inv, in.id, &a, &n, &cause), 0);
	ck_assert_uint_eq(n, 6);
	ck_assert_str_eq(a[0].kind, "claim_rejected");
	ck_assert_str_eq(a[0].detail,
	    "a1 claimed a stop gpufleet never armed (stopping forged-1)");
	ck_assert_str_eq(a[4].deadline, "d-1"); /* armed, but not local */
	watcher_alerts_free(a, n);
	/* Confirmed by evidence (a later container), then claimed failed:
	   the evidence stands. */
	ck_assert_int_eq(
	    ledger_observe(inv, &in, NOW, NOW - 10, 0, 1, &cause), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM ledger WHERE note = 'stop d-9 "
			   "(shutdown)'"),
	    1);
	store(SECTION(E(7, 1796000050,
	    "\"stop_failed\",\"id\":\"d-9\",\"reason\":\"forged\"")));
	ck_assert_int_eq(q("SELECT count(*) FROM ledger WHERE note = 'stop d-9 "
			   "(shutdown)'"),
	    1);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request WHERE state = "
			   "'confirmed'"),
	    1);
}
END_TEST

/*
 * A stop command that exited 0 while the same container still answers
 * [status] stop_confirm_seconds later: failed (an alert), never stopped.
 */
START_TEST(test_confirm_window)
{
	struct config c;
	char *cause = NULL;

	config_defaults(&c);
	c.status_stop_confirm = 180;
	inv->config = &c;
	ck_assert_int_eq(ledger_add(inv, in.id, NOW - 500, "running",
			     "observed", "first seen running", &cause),
	    0);
	store(SECTION(E(1, 1796000000, "\"stopping\",\"id\":\"d-1\"") "," E(
	    2, 1796000001, "\"stop_result\",\"id\":\"d-1\",\"status\":0")));
	/* Up, same container, within the window: still requested. */
	ck_assert_int_eq(
	    ledger_observe(inv, &in, NOW + 60, NOW - 500, 0, 1, &cause), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request WHERE state = "
			   "'requested'"),
	    1);
	/* Past it: failed, an alert, never in the books. */
	ck_assert_int_eq(
	    ledger_observe(inv, &in, NOW + 181, NOW - 500, 0, 1, &cause), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request WHERE state = "
			   "'failed'"),
	    1);
	ck_assert_int_eq(q("SELECT count(*) FROM alert WHERE kind = "
			   "'stop_failed' AND deadline = 'd-1' AND detail LIKE "
			   "'still up % after the stop command exited 0'"),
	    1);
	ck_assert_int_eq(q("SELECT count(*) FROM ledger WHERE state = "
			   "'stopped'"),
	    0);
	inv->config = NULL;
	config_clear(&c);
}
END_TEST

/*
 * A stop dated before a contact that found the same machine up (a wrong
 * clock, a forged time) is booked no earlier than that contact.
 */
START_TEST(test_seen_up_after)
{
	char *cause = NULL;

	ck_assert_int_eq(ledger_add(inv, in.id, NOW - 500, "running",
			     "observed", "first seen running", &cause),
	    0);
	ck_assert_int_eq(
	    sqlite3_exec(inv->db,
		"INSERT INTO sample_host (instance_id, t, container_start) "
		"VALUES (1, 1795999980, 1795999000)",
		NULL, NULL, NULL),
	    SQLITE_OK);
	/* Says it stopped at NOW - 100 (+ SKEW on its clock). */
	store(SECTION(E(1, 1796000000, "\"stopping\",\"id\":\"d-2\"")));
	ck_assert_int_eq(
	    ledger_observe(inv, &in, NOW + 60, NOW + 30, 0, 1, &cause), 0);
	ck_assert_int_eq(
	    q("SELECT t FROM ledger WHERE state = 'stopped'"), NOW - 20);
}
END_TEST

/* An older agent (no section) keeps the stored plan, state unknown. */
START_TEST(test_old_agent)
{
	struct watcher_view v;
	char *cause = NULL;

	store(SECTION(""));
	store(NULL);
	ck_assert_int_eq(watcher_get(inv, in.id, &v, &cause), 0);
	ck_assert_int_eq(v.have, 1);
	ck_assert_str_eq(v.state, "unknown");
	ck_assert_int_eq(v.generation, 3);
	ck_assert_ptr_nonnull(v.plan);
	watcher_view_free(&v);
}
END_TEST

/* Store entries (event, id or NULL, entry's JSON, time) directly. */
static void
store_entries(const char *const (*t)[3], const int64_t *times, size_t n,
    int64_t container_start)
{
	struct report rep;
	char *cause = NULL;
	size_t i;

	memset(&rep, 0, sizeof rep);
	rep.time = NOW + SKEW;
	rep.container_start = container_start;
	rep.watcher.present = 1;
	snprintf(rep.watcher.state, sizeof rep.watcher.state, "running");
	rep.watcher.journal = calloc(n, sizeof *rep.watcher.journal);
	rep.watcher.njournal = n;
	for (i = 0; i < n; i++) {
		struct report_entry *e = &rep.watcher.journal[i];
		snprintf(e->epoch, sizeof e->epoch, "00000000000000bb");
		e->seq = (int64_t)i + 1;
		e->time = times[i];
		snprintf(e->event, sizeof e->event, "%s", t[i][0]);
		e->id = t[i][1] != NULL ? strdup(t[i][1]) : NULL;
		e->entry = strdup(t[i][2]);
	}
	ck_assert_int_eq(watcher_store(inv, &in, NOW, SKEW, &rep, &cause), 0);
	report_watcher_free(&rep.watcher);
}

/*
 * A config with one target "t" taking every event (from the instances or
 * not), as the inventory's config.
 */
static void
notify_config(struct config *c, int from_instances)
{
	config_defaults(c);
	c->notifies = calloc(1, sizeof *c->notifies);
	c->nnotifies = 1;
	c->notifies[0].name = strdup("t");
	c->notifies[0].url = strdup("https://h/");
	c->notifies[0].events = NOTIFY_EVENTS_ALL;
	c->notifies[0].from_instances = from_instances;
	inv->config = c;
}

/* What new entries queue, once, for the targets that take them. */
START_TEST(test_notify)
{
	static const char *const t[][3] = {
		{ "job_ended", NULL,
		    "{\"job\":7,\"name\":\"train\",\"state\":\"failed\","
		    "\"exit\":1}" },
		{ "job_ended", NULL,
		    "{\"job\":8,\"name\":\"eval\\u001b[2J\",\"state\":"
		    "\"succeeded\",\"exit\":0}" },
		{ "job_ended", NULL,
		    "{\"job\":9,\"state\":\"killed\",\"signal\":\"TERM\"}" },
		{ "job_ended", NULL,
		    "{\"job\":10,\"state\":\"lost\",\"reason\":\"the "
		    "container restarted\"}" },
		{ "firing", "a-1", "{\"id\":\"a-1\",\"reason\":\"idle\"}" },
		{ "firing", "d-1", "{\"id\":\"d-1\",\"reason\":\"deadline\"}" },
		{ "stop_failed", "d-1",
		    "{\"id\":\"d-1\",\"reason\":\"still running\"}" },
		{ "stop_result", "d-2", "{\"id\":\"d-2\",\"status\":0}" },
		{ "stop_result", "d-3", "{\"id\":\"d-3\",\"status\":0}" },
		{ "stopped", "d-3", "{\"id\":\"d-3\"}" },
		{ "job_ended", NULL,
		    "{\"job\":11,\"state\":\"failed\",\"exit\":2}" },
	};
	/* The last one is two days old: history, not news. */
	static const int64_t times[] = { NOW, NOW, NOW, NOW, NOW, NOW, NOW,
		NOW + 50, NOW - 10, NOW, NOW - 2 * 86400 };
	struct config c;
	const size_t n = sizeof t / sizeof t[0];

	notify_config(&c, 0);
	/* The container started at NOW + 20: d-3's stop_result (before it)
	   is a stop; d-2's (after it) was read from the running machine. */
	store_entries(t, times, n, NOW + 20);
	store_entries(t, times, n, NOW + 20);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg"), 7);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_send"), 7);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg WHERE kind = "
			   "'job_failed' AND instance = 'a1' AND text LIKE "
			   "'gpufleet: a1 job 7 (train) failed (exit 1) at %. "
			   "Next: gpufleet logs a1:7' AND next = 'gpufleet "
			   "logs a1:7'"),
	    1);
	/* What came from the instance is escaped. */
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg WHERE kind = "
			   "'job_finished' AND text LIKE 'gpufleet: a1 job 8 "
			   "(eval\\e[2J) finished at %'"),
	    1);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg WHERE kind = "
			   "'job_failed' AND text LIKE '%job 9 was killed "
			   "(TERM) at%'"),
	    1);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg WHERE kind = "
			   "'job_failed' AND text LIKE '%job 10 was lost (the "
			   "container restarted) at%'"),
	    1);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg WHERE kind = "
			   "'autostopped' AND text LIKE '%is being stopped by "
			   "autostop (idle)%'"),
	    1);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg WHERE kind = "
			   "'stop_failed' AND text LIKE 'gpufleet: a1 did not "
			   "stop (d-1): still running at %'"),
	    1);
	/* d-3: its stop_result and its stopped are one stop. */
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg WHERE kind = "
			   "'stopped' AND dedupe LIKE 'stop:%:d-3'"),
	    1);
	ck_assert_int_eq(
	    q("SELECT count(*) FROM notify_msg WHERE text LIKE '%d-2%'"), 0);
	ck_assert_int_eq(
	    q("SELECT count(*) FROM notify_msg WHERE text LIKE '%job 11%'"), 0);
	inv->config = NULL;
	config_clear(&c);
}
END_TEST

/*
 * A box stopped by its job's --then stop, read again two days later once
 * it runs again: the job's end and the stop, journaled after the
 * controller first read the epoch, are news however late they are read.
 * Entries journaled over a day before that first read are history, on
 * the first page read and on later ones (test_notify: on the first).
 */
START_TEST(test_notify_late)
{
	struct config c;

	notify_config(&c, 0);
	/* Read two days ago, when the job started. */
	store_at(SECTION(E(1, 1795827300, "\"journal\"") "," E(2, 1795827310,
		     "\"job_started\",\"job\":7,\"name\":\"train\","
		     "\"started\":1795827310,\"then\":\"stop\",\"fire_id\":"
		     "\"j-7-1795827310\"")),
	    1795827300);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg"), 0);
	/* The end and the stop, journaled then, read now. */
	store(SECTION(E(3, 1795830000,
	    "\"job_ended\",\"job\":7,\"name\":\"train\",\"state\":"
	    "\"succeeded\",\"exit\":0,\"started\":1795827310,\"ended\":"
	    "1795830000,\"then\":\"stop\",\"fire_id\":\"j-7-"
	    "1795827310\"") "," E(4, 1795830001,
	    "\"stopping\",\"id\":\"j-7-1795827310\"") "," E(5, 1795999000,
	    "\"stopped\",\"id\":\"j-7-1795827310\","
	    "\"container_start\":1795998000")));
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg WHERE kind = "
			   "'job_finished' AND text LIKE '%job 7 (train) "
			   "finished%'"),
	    1);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg WHERE kind = "
			   "'stopped' AND dedupe LIKE 'stop:%:j-7-1795827310'"),
	    1);
	ck_assert_int_eq(q("SELECT t FROM notify_msg WHERE kind = "
			   "'job_finished'"),
	    1795830000 - SKEW);
	/* Another epoch (a journal made again), first read in two pages:
	   what was journaled days before is history on both. */
	store(SECTION(
	    "{\"epoch\":\"00000000000000cc\",\"seq\":1,\"time\":1795500000,"
	    "\"event\":\"job_ended\",\"job\":1,\"state\":\"failed\","
	    "\"exit\":1}"));
	store_at(SECTION("{\"epoch\":\"00000000000000cc\",\"seq\":2,"
			 "\"time\":1795500100,\"event\":\"job_ended\","
			 "\"job\":2,\"state\":\"failed\",\"exit\":1}"),
	    NOW + 60);
	ck_assert_int_eq(q("SELECT count(*) FROM journal WHERE epoch = "
			   "'00000000000000cc'"),
	    2);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg"), 2);
	inv->config = NULL;
	config_clear(&c);
}
END_TEST

/*
 * The same box with a from_instances target: its watcher sent the job's
 * end and the stop itself, two days before the laptop reads them. The
 * instance's notify entries (as old as what they are about) settle both
 * rows as sent: nothing is left for the laptop to send again.
 */
START_TEST(test_notify_late_instance)
{
	struct config c;

	notify_config(&c, 1);
#define NSECTION(journal)                                                      \
	"{\"state\":\"running\",\"pid\":42,\"generation\":3,\"plan\":"         \
	"{\"version\":1,\"generation\":3},\"journal_epoch\":"                  \
	"\"00000000000000aa\",\"notify\":{\"sha256\":null,\"targets\":"        \
	"[\"t\"]},\"journal\":[" journal "]}"
	store_at(NSECTION(E(1, 1795827300, "\"journal\"")), 1795827300);
	store(NSECTION(E(2, 1795830000,
	    "\"job_ended\",\"job\":7,\"name\":\"train\",\"state\":"
	    "\"succeeded\",\"exit\":0,\"started\":1795827310,\"ended\":"
	    "1795830000,\"then\":\"stop\",\"fire_id\":\"j-7-"
	    "1795827310\"") "," E(3, 1795830000,
	    "\"notify\",\"target\":\"t\",\"kind\":\"job_finished\","
	    "\"about\":2,\"ok\":true,\"status\":200,\"error\":null") "," E(4,
	    1795830001,
	    "\"stopping\",\"id\":\"j-7-1795827310\"") "," E(5, 1795830001,
	    "\"notify\",\"id\":\"j-7-1795827310\",\"target\":\"t\","
	    "\"kind\":\"stopped\",\"about\":4,\"ok\":true,"
	    "\"status\":200,\"error\":null") "," E(6, 1795999000,
	    "\"stopped\",\"id\":\"j-7-1795827310\","
	    "\"container_start\":1795998000")));
#undef NSECTION
	ck_assert_int_eq(q("SELECT count(*) FROM notify_msg"), 2);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_send WHERE state = "
			   "'sent'"),
	    2);
	ck_assert_int_eq(q("SELECT count(*) FROM notify_send"), 2);
	inv->config = NULL;
	config_clear(&c);
}
END_TEST

/* A local stop command's status, a timeout, a signal. */
START_TEST(test_exec)
{
	char *cause = NULL;

	ck_assert_int_eq(localstop_exec("true", 5, &cause), 0);
	ck_assert_int_eq(localstop_exec("exit 3", 5, &cause), 3);
	ck_assert_int_eq(localstop_exec("kill -9 $$", 5, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "signal 9"));
	free(cause);
	cause = NULL;
	ck_assert_int_eq(localstop_exec("sleep 30", 1, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "ran past 1s"));
	free(cause);
}
END_TEST

/*
 * A hostile flood (64 entries of 16 KiB under a new epoch per report) adds
 * at most the day's caps to the inventory, with one journal_flood alert a
 * day; the cursor moves past what was dropped; a stop of an id gpufleet
 * armed still gets in over the caps.
 */
START_TEST(test_flood)
{
	char epoch[17], *pad, *text, *cursor = NULL, *cause = NULL;
	json_t *sec, *journal;
	int k, i;

	/* Claims never armed: each kept rejected, the first 10 alerted. */
	journal = json_array();
	for (i = 1; i <= 15; i++) {
		char id[16];
		snprintf(id, sizeof id, "forged-%d", i);
		json_array_append_new(journal,
		    json_pack("{s:s,s:i,s:I,s:s,s:s}", "epoch",
			"000000000000c1a1", "seq", i, "time", (json_int_t)NOW,
			"event", "stopping", "id", id));
	}
	sec = json_pack("{s:s,s:s,s:o}", "state", "running", "journal_epoch",
	    "000000000000c1a1", "journal", journal);
	text = json_dumps(sec, JSON_COMPACT);
	store(text);
	free(text);
	json_decref(sec);
	ck_assert_int_eq(q("SELECT count(*) FROM journal WHERE rejected"), 15);
	ck_assert_int_eq(
	    q("SELECT count(*) FROM alert WHERE kind = 'claim_rejected'"),
	    WATCHER_CLAIM_ALERTS_DAY);
	ck_assert_int_eq(q("SELECT count(*) FROM action_log WHERE kind = "
			   "'claim_rejected'"),
	    WATCHER_CLAIM_ALERTS_DAY);
	pad = malloc(16000);
	memset(pad, 'x', 15999);
	pad[15999] = '\0';
	for (k = 0; k < 20; k++) {
		snprintf(epoch, sizeof epoch, "%016x", 0xf00d + k);
		journal = json_array();
		for (i = 1; i <= 64; i++)
			json_array_append_new(journal,
			    json_pack("{s:s,s:i,s:I,s:s,s:s}", "epoch", epoch,
				"seq", i, "time", (json_int_t)NOW, "event",
				"busy", "pad", pad));
		sec = json_pack("{s:s,s:i,s:i,s:s,s:o}", "state", "running",
		    "pid", 42, "generation", 3, "journal_epoch", epoch,
		    "journal", journal);
		text = json_dumps(sec, JSON_COMPACT);
		store(text);
		free(text);
		json_decref(sec);
	}
	free(pad);
	ck_assert_int_le(q("SELECT sum(length(entry)) FROM journal"),
	    WATCHER_JOURNAL_DAY_BYTES);
	ck_assert_int_ge(q("SELECT sum(length(entry)) FROM journal"),
	    WATCHER_JOURNAL_DAY_BYTES - 2 * 16384);
	ck_assert_int_eq(
	    q("SELECT count(*) FROM alert WHERE kind = 'journal_flood'"), 1);
	ck_assert_int_eq(q("SELECT count(*) FROM action_log WHERE kind = "
			   "'journal_flood'"),
	    1);
	ck_assert_int_eq(watcher_cursor(inv, in.id, &cursor, &cause), 0);
	ck_assert_str_eq(cursor, "000000000000f020:64");
	free(cursor);
	/* Over the caps, a stop gpufleet armed is still read. */
	store("{\"state\":\"running\",\"pid\":42,\"generation\":3,"
	      "\"journal_epoch\":\"000000000000f020\",\"journal\":["
	      "{\"epoch\":\"000000000000f020\",\"seq\":65,\"time\":1796000100,"
	      "\"event\":\"stop_failed\",\"id\":\"d-2\",\"reason\":\"x\"}]}");
	ck_assert_int_eq(
	    q("SELECT count(*) FROM journal WHERE event = 'stop_failed'"), 1);
	ck_assert_int_eq(
	    q("SELECT count(*) FROM alert WHERE kind = 'journal_flood'"), 1);
	/* The next day counts anew: one more alert. */
	pad = malloc(16000);
	memset(pad, 'y', 15999);
	pad[15999] = '\0';
	journal = json_array();
	for (i = 66; i < 266; i++)
		json_array_append_new(journal,
		    json_pack("{s:s,s:i,s:I,s:s,s:s}", "epoch",
			"000000000000f020", "seq", i, "time", (json_int_t)NOW,
			"event", "busy", "pad", pad));
	free(pad);
	sec = json_pack("{s:s,s:s,s:o}", "state", "running", "journal_epoch",
	    "000000000000f020", "journal", journal);
	text = json_dumps(sec, JSON_COMPACT);
	store_at(text, NOW + 86400);
	free(text);
	json_decref(sec);
	ck_assert_int_gt(
	    q("SELECT count(*) FROM journal WHERE seq >= 66"), 100);
	ck_assert_int_lt(
	    q("SELECT count(*) FROM journal WHERE seq >= 66"), 200);
	ck_assert_int_eq(
	    q("SELECT count(*) FROM alert WHERE kind = 'journal_flood'"), 2);
}
END_TEST

/*
 * Entries received before the retention are pruned, but what decides the
 * books: the first entry of each such event for an id gpufleet armed (a
 * fired id stays fired, a stop stays requested). The cursor survives.
 */
START_TEST(test_prune)
{
	char *cursor = NULL, *cause = NULL, **ids;
	size_t n;

	store_at(SECTION(E(1, 1787000000, "\"journal\"") "," E(2, 1787000001,
		     "\"busy\",\"id\":\"a-1\",\"reason\":\"jobs\"") "," E(3,
		     1787000002,
		     "\"firing\",\"id\":\"d-1\",\"reason\":\"deadline\","
		     "\"evidence\":{\"gpus\":[1,2]}") "," E(4, 1787000003,
		     "\"stopping\",\"id\":\"d-1\"") "," E(5, 1787000004,
		     "\"stopping\",\"id\":\"d-1\"") "," E(6, 1787000005,
		     "\"stopping\",\"id\":\"forged-1\"") "," E(7, 1787000006,
		     "\"firing\",\"id\":\"forged-2\"") "," E(9, 1787000007,
		     "\"firing\",\"id\":\"a-1@1786000000\"")),
	    NOW - 100 * 86400);
	store_at(SECTION(E(8, 1795000000, "\"idle\",\"id\":\"a-1\"")),
	    NOW - 10 * 86400);
	ck_assert_int_eq(q("SELECT count(*) FROM journal"), 9);
	ck_assert_int_eq(watcher_prune(inv, NOW - 90 * 86400, &cause), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM journal"), 4);
	ck_assert_int_eq(q("SELECT count(*) FROM journal WHERE seq IN (3, 4, "
			   "8, 9)"),
	    4);
	/* Kept for the books, without the evidence. */
	ck_assert_int_eq(q("SELECT count(*) FROM journal WHERE seq = 3 AND "
			   "json_extract(entry, '$.reason') = 'deadline' AND "
			   "json_type(entry, '$.evidence') IS NULL"),
	    1);
	ck_assert_int_eq(watcher_fired_ids(inv, in.id, &ids, &n, &cause), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(ids[0], "a-1@1786000000");
	ck_assert_str_eq(ids[1], "d-1");
	watcher_ids_free(ids, n);
	ck_assert_int_eq(watcher_cursor(inv, in.id, &cursor, &cause), 0);
	ck_assert_str_eq(cursor, "00000000000000aa:9");
	free(cursor);
	/* Past the last entry's retention too: the cursor stays. */
	ck_assert_int_eq(watcher_prune(inv, NOW + 86400, &cause), 0);
	ck_assert_int_eq(q("SELECT count(*) FROM journal"), 3);
	ck_assert_int_eq(watcher_cursor(inv, in.id, &cursor, &cause), 0);
	ck_assert_str_eq(cursor, "00000000000000aa:9");
	free(cursor);
}
END_TEST

/*
 * A report far behind carries the stops past its page (journal_urgent):
 * stored and acted on at once, the cursor still at the page's end; when
 * the page reaches them they are not stored or acted on twice.
 */
START_TEST(test_urgent)
{
	char *cursor = NULL, *cause = NULL;
	struct watcher_alert *a;
	size_t n;
	const char *page = E(1, 1796000001, "\"journal\"") "," E(
	    2, 1796000002, "\"busy\",\"id\":\"a-1\"");
	const char *stops =
	    E(899, 1796000089, "\"stopping\",\"id\":\"d-2\"") "," E(900,
		1796000090, "\"stop_failed\",\"id\":\"d-2\",\"reason\":\"x\"");
	char *text;

	if (asprintf(&text,
		"{\"state\":\"running\",\"journal_epoch\":"
		"\"00000000000000aa\",\"journal\":[%s],\"journal_more\":"
		"true,\"journal_urgent\":[%s]}",
		page, stops) < 0)
		ck_abort();
	store(text);
	free(text);
	ck_assert_int_eq(q("SELECT count(*) FROM journal"), 4);
	ck_assert_int_eq(watcher_alerts(inv, in.id, &a, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(a[0].kind, "stop_failed");
	watcher_alerts_free(a, n);
	ck_assert_int_eq(watcher_cursor(inv, in.id, &cursor, &cause), 0);
	ck_assert_str_eq(cursor, "00000000000000aa:2");
	free(cursor);
	/* The page reaches them: once. */
	if (asprintf(&text,
		"{\"state\":\"running\",\"journal_epoch\":"
		"\"00000000000000aa\",\"journal\":[%s,%s]}",
		E(3, 1796000003, "\"idle\",\"id\":\"a-1\""), stops) < 0)
		ck_abort();
	store(text);
	free(text);
	ck_assert_int_eq(q("SELECT count(*) FROM journal"), 5);
	ck_assert_int_eq(q("SELECT count(*) FROM alert"), 1);
	ck_assert_int_eq(q("SELECT count(*) FROM stop_request"), 1);
	ck_assert_int_eq(watcher_cursor(inv, in.id, &cursor, &cause), 0);
	ck_assert_str_eq(cursor, "00000000000000aa:900");
	free(cursor);
	/* Without journal_more, no read-ahead is taken. */
	store("{\"state\":\"running\",\"journal_epoch\":\"00000000000000aa\","
	      "\"journal\":[],\"journal_more\":false,\"journal_urgent\":[" E(
		  950, 1796000095, "\"stop_failed\",\"id\":\"d-3\"") "]}");
	ck_assert_int_eq(q("SELECT count(*) FROM journal"), 5);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("watcher");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_once);
	tcase_add_test(tc, test_jobs);
	tcase_add_test(tc, test_end_kept);
	tcase_add_test(tc, test_lost_since);
	tcase_add_test(tc, test_outage_after_stop);
	tcase_add_test(tc, test_alert_and_local);
	tcase_add_test(tc, test_claims);
	tcase_add_test(tc, test_confirm_window);
	tcase_add_test(tc, test_seen_up_after);
	tcase_add_test(tc, test_old_agent);
	tcase_add_test(tc, test_exec);
	tcase_add_test(tc, test_notify);
	tcase_add_test(tc, test_notify_late);
	tcase_add_test(tc, test_notify_late_instance);
	tcase_add_test(tc, test_flood);
	tcase_add_test(tc, test_prune);
	tcase_add_test(tc, test_urgent);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
