/* Storing status samples, folding old ones into 5-minute aggregates. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "notify.h"
#include "samples.h"
#include "status.h"
#include "timeparse.h"
#include "vis.h"
#include "xmalloc.h"

#define BUCKET 300

/*
 * A report read at now (the controller's clock) whose progress file is
 * older than stale_s on the instance's clock, while the instance answers:
 * queue `stalled`, once per stale streak (keyed by the file's mtime, so a
 * file that moves and goes stale again is news again). No progress file,
 * no message: nothing says the instance should make progress.
 */
int
samples_notify_stalled(struct inventory *inv, const struct instance *in,
    int64_t now, const struct report *r, int64_t stale_s, char **cause)
{
	char *what, *key, *next, *line, *age;
	int64_t a;
	size_t l;
	int rc;

	if (!r->has_progress || r->progress_text == NULL)
		return 0;
	if ((a = r->time - r->progress_mtime) <= stale_s)
		return 0;
	l = strcspn(r->progress_text, "\n");
	line = vis_buf(r->progress_text, l > 60 ? 60 : l);
	age = timeparse_duration(a);
	xasprintf(&what,
	    "is stalled: its progress file is unchanged for %s "
	    "(\"%s\")",
	    age, line);
	xasprintf(&key, "stalled:%lld:%lld", (long long)in->id,
	    (long long)r->progress_mtime);
	xasprintf(&next, "gpufleet status %s", in->name);
	rc = notifyqueue_add(
	    inv, NOTIFY_STALLED, in->name, now, what, next, key, cause);
	free(what);
	free(key);
	free(next);
	free(line);
	free(age);
	return rc;
}

/*
 * Store one report of an instance seen at time t (the controller's clock),
 * inside the caller's transaction.
 */
int
samples_store(struct inventory *inv, int64_t id, int64_t t,
    const struct report *r, char **cause)
{
	const char *what = "storing a sample";
	size_t i;
	int ret;

	if ((ret = db_exec(inv,
		 "INSERT OR REPLACE INTO sample_host (instance_id, t, "
		 "container_start, load1, mem_available_kib, net_rx_bytes, "
		 "net_tx_bytes, sessions) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		 what, cause, "IINdIIIi", id, t, (int64_t)r->container_start,
		 r->load[0], (int64_t)r->mem_available_kib,
		 (int64_t)r->net_rx_bytes, (int64_t)r->net_tx_bytes,
		 r->sessions)) < 0)
		return ret;
	for (i = 0; i < r->ngpus; i++) {
		const struct report_gpu *g = &r->gpus[i];
		if ((ret = db_exec(inv,
			 "INSERT OR REPLACE INTO sample_gpu (instance_id, t, "
			 "gpu, util, mem_used_mib, mem_total_mib, temp_c, "
			 "power_w, nprocs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			 what, cause, "IIidddddi", id, t, g->index, g->util_gpu,
			 g->mem_used_mib, g->mem_total_mib, g->temp_c,
			 g->power_w, (int)g->nprocs)) < 0)
			return ret;
	}
	return 0;
}

/* Record the controller's view of an instance: state, error, report. */
int
samples_last_status(struct inventory *inv, int64_t id, int64_t t,
    const char *state, const char *error, const char *report, char **cause)
{
	return db_exec(inv,
	    "INSERT OR REPLACE INTO last_status (instance_id, t, state, error, "
	    "report) VALUES (?, ?, ?, ?, ?)",
	    "storing status", cause, "IIttt", id, t, state, error, report);
}

/*
 * Fold raw samples older than raw_hours into 5-minute aggregates (only
 * whole buckets, merged with what a bucket already holds), and drop
 * aggregates older than agg_days. Inside the caller's transaction.
 */
int
samples_rollup(struct inventory *inv, int64_t now, int raw_hours, int agg_days,
    char **cause)
{
	static const char *const drops[] = {
		"DELETE FROM sample_gpu WHERE t < ?",
		"DELETE FROM sample_host WHERE t < ?",
		"DELETE FROM sample_gpu_5m WHERE t < ?",
	};
	size_t i;
	int64_t cutoff = (now - (int64_t)raw_hours * 3600) / BUCKET * BUCKET;
	int64_t agg_cutoff = now - (int64_t)agg_days * 86400;
	int r;

	if ((r = db_exec(inv,
		 "INSERT INTO sample_gpu_5m (instance_id, t, gpu, n, "
		 "util_mean, "
		 "util_max, mem_mean, mem_max, mem_total_mib, temp_max, "
		 "power_mean) "
		 "SELECT instance_id, (t / 300) * 300 AS b, gpu, count(*), "
		 "avg(util), max(util), avg(mem_used_mib), max(mem_used_mib), "
		 "max(mem_total_mib), max(temp_c), avg(power_w) FROM "
		 "sample_gpu "
		 "WHERE t < ?1 GROUP BY instance_id, b, gpu "
		 "ON CONFLICT (instance_id, t, gpu) DO UPDATE SET "
		 "util_mean = (coalesce(util_mean, 0) * n + "
		 "  coalesce(excluded.util_mean, 0) * excluded.n) / "
		 "  (n + excluded.n), "
		 "util_max = max(coalesce(util_max, 0), "
		 "  coalesce(excluded.util_max, 0)), "
		 "mem_mean = (coalesce(mem_mean, 0) * n + "
		 "  coalesce(excluded.mem_mean, 0) * excluded.n) / "
		 "  (n + excluded.n), "
		 "mem_max = max(coalesce(mem_max, 0), "
		 "  coalesce(excluded.mem_max, 0)), "
		 "mem_total_mib = excluded.mem_total_mib, "
		 "temp_max = max(coalesce(temp_max, 0), "
		 "  coalesce(excluded.temp_max, 0)), "
		 "power_mean = (coalesce(power_mean, 0) * n + "
		 "  coalesce(excluded.power_mean, 0) * excluded.n) / "
		 "  (n + excluded.n), "
		 "n = n + excluded.n",
		 "folding samples", cause, "I", cutoff)) < 0)
		return r;
	/* Then drop what was folded, and aggregates past their time. */
	for (i = 0; i < sizeof drops / sizeof drops[0]; i++) {
		if ((r = db_exec(inv, drops[i], "expiring samples", cause, "I",
			 i < 2 ? cutoff : agg_cutoff)) < 0)
			return r;
	}
	return 0;
}

/*
 * Utilization and memory per GPU between since and until, oldest first:
 * aggregates, then raw samples. *out (caller frees) gets *n points.
 */
int
samples_history(struct inventory *inv, int64_t id, int64_t since, int64_t until,
    struct history_point **out, size_t *n, char **cause)
{
	sqlite3_stmt *st;
	struct history_point *p = NULL;
	size_t len = 0;
	int rc, r;

	*out = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT t, gpu, n, util_mean, util_max, mem_mean, mem_max, "
		 "mem_total_mib FROM sample_gpu_5m WHERE instance_id = ?1 AND "
		 "t >= ?2 AND t <= ?3 UNION ALL SELECT t, gpu, 1, util, util, "
		 "mem_used_mib, mem_used_mib, mem_total_mib FROM sample_gpu "
		 "WHERE "
		 "instance_id = ?1 AND t >= ?2 AND t <= ?3 ORDER BY 2, 1",
		 "reading history", cause, "III", id, since, until)) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct history_point *h;
		p = xreallocarray(p, len + 1, sizeof *p);
		h = &p[len++];
		h->t = sqlite3_column_int64(st, 0);
		h->gpu = sqlite3_column_int(st, 1);
		h->n = sqlite3_column_int(st, 2);
#define COL(i)                                                                 \
	(sqlite3_column_type(st, i) == SQLITE_NULL                             \
		? NAN                                                          \
		: sqlite3_column_double(st, i))
		h->util_mean = COL(3);
		h->util_max = COL(4);
		h->mem_mean = COL(5);
		h->mem_max = COL(6);
		h->mem_total = COL(7);
#undef COL
	}
	if ((r = db_finish(inv, st, rc, "reading history", cause)) < 0) {
		free(p);
		return r;
	}
	*out = p;
	*n = len;
	return 0;
}
