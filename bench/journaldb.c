/*
 * How big the inventory's journal gets when INSTANCES watchers report for
 * DAYS, one of them hostile, through the real store code (watcher_store,
 * watcher_prune) with a simulated clock. Each normal instance journals a
 * day of an autostop's life (26 entries: idle and busy, then firing,
 * stopping and its result, the machine started again the next day); the
 * hostile one sends, every day, 4 reports of 64 entries of 16,000 bytes,
 * each under a new epoch, one in 8 a stop of an id gpufleet never armed.
 * The size depends on the entries, not on the empty polls between them,
 * so each instance's day is one report; pruning runs after each day.
 * Usage: journaldb DB [INSTANCES] [DAYS] [RETENTION_DAYS]
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "armed.h"
#include "inventory.h"
#include "report.h"
#include "watcher.h"

#define T0 1793491200LL /* 2026-11-01 */

static long long
file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

static long long
count(struct inventory *inv, const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;

	if (sqlite3_prepare_v2(inv->db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Store one report's watcher section (a JSON object, stolen) at now. */
static int
store(struct inventory *inv, const struct instance *in, int64_t now,
    json_t *sec, char **cause)
{
	struct report rep;
	int r;

	memset(&rep, 0, sizeof rep);
	rep.time = now;
	report_parse_watcher(sec, now, &rep.watcher);
	json_decref(sec);
	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = watcher_store(inv, in, now, 0, &rep, cause)) != 0) {
		inventory_rollback(inv);
		report_watcher_free(&rep.watcher);
		return r;
	}
	report_watcher_free(&rep.watcher);
	return inventory_commit(inv, cause);
}

/* An entry of epoch: seq, time, event, id and, if key, a long string. */
static json_t *
entry(const char *epoch, long long seq, int64_t t, const char *event,
    const char *id, const char *key, const char *pad)
{
	json_t *o = json_pack("{s:s,s:I,s:I,s:s}", "epoch", epoch, "seq",
	    (json_int_t)seq, "time", (json_int_t)t, "event", event);

	if (id != NULL)
		json_object_set_new(o, "id", json_string(id));
	if (key != NULL)
		json_object_set_new(o, key, json_string(pad));
	return o;
}

static json_t *
section(const char *epoch, json_t *journal)
{
	return json_pack("{s:s,s:i,s:i,s:s,s:o}", "state", "running", "pid", 42,
	    "generation", 1, "journal_epoch", epoch, "journal", journal);
}

int
main(int argc, char **argv)
{
	struct inventory *inv;
	struct instance *in;
	long long *seq;
	int n = argc > 2 ? atoi(argv[2]) : 200;
	int days = argc > 3 ? atoi(argv[3]) : 365;
	int keep = argc > 4 ? atoi(argv[4]) : 90;
	char *cause = NULL, epoch[17], fire[64], *pad, *evidence;
	json_t *j;
	int64_t day, now;
	int i, k, e;
	clock_t c0 = clock();

	if (argc < 2 || n < 2 || days < 1 || keep < 1) {
		fprintf(stderr,
		    "usage: journaldb DB [INSTANCES] [DAYS] "
		    "[RETENTION_DAYS]\n");
		return 2;
	}
	if (inventory_open(argv[1], &inv, &cause) != 0)
		goto fail;
	in = calloc((size_t)n, sizeof *in);
	seq = calloc((size_t)n, sizeof *seq);
	for (i = 0; i < n; i++) {
		instance_init(&in[i]);
		if (asprintf(&in[i].name, "inst-%d", i) < 0)
			return 1;
		in[i].host = strdup("10.0.0.1");
		in[i].created_at = T0;
		if (inventory_add(inv, &in[i], &cause) != 0 ||
		    armed_plan(inv, in[i].id,
			"{\"version\":1,\"autostop\":{\"id\":\"a-1\"}}", 0, T0,
			0, &cause) != 0)
			goto fail;
	}
	pad = malloc(16000);
	memset(pad, 'x', 15999);
	pad[15999] = '\0';
	evidence = malloc(300);
	memset(evidence, 'e', 299);
	evidence[299] = '\0';
	for (day = 0; day < days; day++) {
		now = T0 + day * 86400 + 3600;
		/* The hostile one: inst-0. */
		for (k = 0; k < 4; k++) {
			snprintf(epoch, sizeof epoch, "%016llx",
			    (unsigned long long)(day * 4 + k + 1));
			j = json_array();
			for (e = 1; e <= 64; e++) {
				snprintf(fire, sizeof fire, "forged-%d", e);
				json_array_append_new(j,
				    entry(epoch, e, now,
					e % 8 == 0 ? "stopping" : "busy",
					e % 8 == 0 ? fire : NULL, "pad", pad));
			}
			if (store(inv, &in[0], now, section(epoch, j),
				&cause) != 0)
				goto fail;
		}
		for (i = 1; i < n; i++) {
			snprintf(epoch, sizeof epoch, "%016llx",
			    (unsigned long long)(0xa000000 + i));
			snprintf(fire, sizeof fire, "a-1@%lld",
			    (long long)(now - 3600));
			j = json_array();
			for (e = 0; e < 20; e++)
				json_array_append_new(j,
				    entry(epoch, ++seq[i], now + e * 60,
					e % 2 ? "busy" : "idle", "a-1", NULL,
					NULL));
			json_array_append_new(j,
			    entry(epoch, ++seq[i], now + 1300, "firing", fire,
				"evidence", evidence));
			json_array_append_new(j,
			    entry(epoch, ++seq[i], now + 1301, "stopping", fire,
				NULL, NULL));
			json_array_append_new(j,
			    entry(epoch, ++seq[i], now + 1302, "stop_result",
				fire, "output", evidence));
			json_array_append_new(j,
			    entry(epoch, ++seq[i], now + 1303, "exiting", NULL,
				NULL, NULL));
			json_array_append_new(j,
			    entry(epoch, ++seq[i], now + 1304, "started", NULL,
				NULL, NULL));
			json_array_append_new(j,
			    entry(epoch, ++seq[i], now + 1305, "plan", NULL,
				NULL, NULL));
			if (store(inv, &in[i], now + 1400, section(epoch, j),
				&cause) != 0)
				goto fail;
		}
		if (inventory_begin(inv, &cause) != 0 ||
		    watcher_prune(
			inv, now + 1400 - (int64_t)keep * 86400, &cause) != 0 ||
		    inventory_commit(inv, &cause) != 0)
			goto fail;
	}
	sqlite3_exec(
	    inv->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
	printf("%d instances (inst-0 hostile) for %d days, journal kept %d "
	       "days: database %.1f MiB, %.0f s of CPU\n",
	    n, days, keep, file_size(argv[1]) / 1048576.0,
	    (double)(clock() - c0) / CLOCKS_PER_SEC);
	printf("journal rows %lld (%.1f MiB of entries; inst-0: %lld rows, "
	       "%.1f MiB), stop_request %lld, alert %lld (journal_flood "
	       "%lld, claim_rejected %lld), action_log %lld, job %lld\n",
	    count(inv, "SELECT count(*) FROM journal"),
	    count(inv, "SELECT sum(length(entry)) FROM journal") / 1048576.0,
	    count(inv, "SELECT count(*) FROM journal WHERE instance_id = 1"),
	    count(inv,
		"SELECT sum(length(entry)) FROM journal WHERE instance_id = "
		"1") /
		1048576.0,
	    count(inv, "SELECT count(*) FROM stop_request"),
	    count(inv, "SELECT count(*) FROM alert"),
	    count(inv,
		"SELECT count(*) FROM alert WHERE kind = "
		"'journal_flood'"),
	    count(inv,
		"SELECT count(*) FROM alert WHERE kind = "
		"'claim_rejected'"),
	    count(inv, "SELECT count(*) FROM action_log"),
	    count(inv, "SELECT count(*) FROM job"));
	inventory_close(inv);
	return 0;
fail:
	fprintf(stderr, "journaldb: %s\n", cause != NULL ? cause : "failed");
	return 1;
}
