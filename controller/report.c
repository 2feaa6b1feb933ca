/* Parsing and checking the agent's JSON report. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "report.h"
#include "xmalloc.h"

static int get_obj(json_t *, const char *, json_t **, char **);
static int get_int(json_t *, const char *, int, int64_t *, char **);
static int get_num(json_t *, const char *, double *, char **);
static int get_str(json_t *, const char *, int, char **, char **);
static int get_int_in(
    json_t *, const char *, int64_t, int64_t, int64_t *, char **);
static int get_num_in(
    json_t *, const char *, double, double, double *, char **);
static int get_time(json_t *, const char *, int, int64_t, int64_t *, char **);
static int parse_host(json_t *, struct report *, int64_t, char **);
static int parse_gpu(json_t *, struct report_gpu *, char **);
static int check_starts(const struct report *, char **);
static int parse_gpus(json_t *, struct report *, char **);
static int parse_progress(json_t *, struct report *, int64_t, char **);
static void read_authorized_keys(json_t *, struct report *);
static int check_hex16(const char *);
static void parse_journal(json_t *, int64_t, struct report_watcher *);
static size_t parse_entries(
    json_t *, int64_t, size_t, struct report_entry **, size_t *, size_t *);

/*
 * Bounds of the values an instance may report. Anything outside is a broken
 * or hostile agent: the report is refused, naming the field, before any of
 * it reaches the ledger, the samples or the screen.
 */
#define TIME_MIN   946684800LL	/* 2000-01-01T00:00:00Z */
#define TIME_AHEAD 86400	/* the instance's clock may run a day fast */
#define KIB_MAX	   (1LL << 40)	/* 1 PiB of memory */
#define BYTES_MAX  (1LL << 60)	/* network counters: 1 EiB */
#define COUNT_MAX  1000000	/* CPUs, sessions */
#define PID_MAX	   4194304	/* the kernel's PID_MAX_LIMIT */
#define MIB_MAX	   1073741824.0 /* GPU memory: 1 PiB */
#define TEMP_MIN   -100.0
#define TEMP_MAX   300.0
#define POWER_MAX  100000.0 /* watts */
#define LOAD_MAX   1000000.0
#define SEQ_MAX	   (1LL << 53) /* what a JSON number holds exactly */
#define PLAN_MAX   65536       /* the agent's plan set takes at most this */
#define TEXT_MAX   1024	       /* the watcher's error */

/* The journal's events (agent/WATCH.md); others are stored as "unknown". */
static const char *const journal_events[] = { "journal", "started", "plan",
	"armed", "cancelled", "warned", "firing", "before_stop", "skipped",
	"stopping", "stop_result", "stopped", "stop_retry", "stop_failed",
	"local_due", "idle", "busy", "gpu_unreadable", "failed", "exiting",
	"job_started", "job_ended", "notify", "held", "released",
	"release_ignored", "hold_expired", "hold_kept" };

static void parse_notify(json_t *, struct report_watcher *);
static int printable(const char *);

static int
get_obj(json_t *o, const char *key, json_t **out, char **cause)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_object(v)) {
		xasprintf(cause, "'%s' is missing or not an object", key);
		return -1;
	}
	*out = v;
	return 0;
}

/* An integer field; with nullable, null (or absent) gives 0. */
static int
get_int(json_t *o, const char *key, int nullable, int64_t *out, char **cause)
{
	json_t *v = json_object_get(o, key);

	if ((v == NULL || json_is_null(v)) && nullable) {
		*out = 0;
		return 0;
	}
	if (!json_is_integer(v)) {
		xasprintf(cause, "'%s' is missing or not an integer", key);
		return -1;
	}
	*out = json_integer_value(v);
	return 0;
}

/* A number field; null or absent gives NAN. */
static int
get_num(json_t *o, const char *key, double *out, char **cause)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL || json_is_null(v)) {
		*out = NAN;
		return 0;
	}
	if (!json_is_number(v)) {
		xasprintf(cause, "'%s' is not a number", key);
		return -1;
	}
	*out = json_number_value(v);
	if (!isfinite(*out)) {
		xasprintf(cause, "'%s' is not finite", key);
		return -1;
	}
	return 0;
}

/* An integer field in [lo, hi]; null or absent gives 0. */
static int
get_int_in(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
    char **cause)
{
	if (get_int(o, key, 1, out, cause) != 0)
		return -1;
	if (json_is_integer(json_object_get(o, key)) &&
	    (*out < lo || *out > hi)) {
		xasprintf(cause, "'%s' %lld is out of range (%lld to %lld)",
		    key, (long long)*out, (long long)lo, (long long)hi);
		return -1;
	}
	return 0;
}

/* A number field in [lo, hi]; null or absent gives NAN. */
static int
get_num_in(
    json_t *o, const char *key, double lo, double hi, double *out, char **cause)
{
	if (get_num(o, key, out, cause) != 0)
		return -1;
	if (!isnan(*out) && (*out < lo || *out > hi)) {
		xasprintf(cause, "'%s' %g is out of range (%g to %g)", key,
		    *out, lo, hi);
		return -1;
	}
	return 0;
}

/*
 * A time field: Unix seconds from 2000-01-01 to a day after now; with
 * nullable, null or absent gives 0 (unknown).
 */
static int
get_time(json_t *o, const char *key, int nullable, int64_t now, int64_t *out,
    char **cause)
{
	if (get_int(o, key, nullable, out, cause) != 0)
		return -1;
	if (*out == 0 && nullable && !json_is_integer(json_object_get(o, key)))
		return 0;
	if (*out < TIME_MIN || *out > now + TIME_AHEAD) {
		xasprintf(cause,
		    "'%s' %lld is out of range (2000-01-01 to a day from now)",
		    key, (long long)*out);
		return -1;
	}
	return 0;
}

/* A string field (copied); with nullable, null or absent gives NULL. */
static int
get_str(json_t *o, const char *key, int nullable, char **out, char **cause)
{
	json_t *v = json_object_get(o, key);

	if ((v == NULL || json_is_null(v)) && nullable) {
		*out = NULL;
		return 0;
	}
	if (!json_is_string(v)) {
		xasprintf(cause, "'%s' is missing or not a string", key);
		return -1;
	}
	*out = xstrndup(json_string_value(v), json_string_length(v));
	return 0;
}

static int
parse_host(json_t *h, struct report *r, int64_t now, char **cause)
{
	json_t *load;
	int64_t v;
	size_t i;

	if (get_str(h, "hostname", 0, &r->hostname, cause) != 0 ||
	    get_str(h, "kernel", 1, &r->kernel, cause) != 0 ||
	    get_time(h, "boot_time", 1, now, &r->boot_time, cause) != 0 ||
	    get_time(h, "container_start", 1, now, &r->container_start,
		cause) != 0 ||
	    get_int_in(h, "mem_total_kib", 0, KIB_MAX, &r->mem_total_kib,
		cause) != 0 ||
	    get_int_in(h, "mem_available_kib", 0, KIB_MAX,
		&r->mem_available_kib, cause) != 0 ||
	    get_int_in(h, "net_rx_bytes", 0, BYTES_MAX, &r->net_rx_bytes,
		cause) != 0 ||
	    get_int_in(
		h, "net_tx_bytes", 0, BYTES_MAX, &r->net_tx_bytes, cause) != 0)
		return -1;
	if (get_int_in(h, "cpus", 0, COUNT_MAX, &v, cause) != 0)
		return -1;
	r->cpus = (int)v;
	if (get_int_in(h, "sessions", 0, COUNT_MAX, &v, cause) != 0)
		return -1;
	r->sessions = (int)v;
	load = json_object_get(h, "load");
	for (i = 0; i < 3; i++) {
		json_t *x =
		    json_is_array(load) ? json_array_get(load, i) : NULL;
		r->load[i] = json_is_number(x) ? json_number_value(x) : NAN;
		if (!isnan(r->load[i]) &&
		    !(r->load[i] >= 0 && r->load[i] <= LOAD_MAX)) {
			xasprintf(cause, "'load' %g is out of range (0 to %g)",
			    r->load[i], LOAD_MAX);
			return -1;
		}
	}
	return 0;
}

static int
parse_gpu(json_t *g, struct report_gpu *gpu, char **cause)
{
	json_t *procs, *p;
	int64_t v;
	size_t i;

	if (!json_is_object(g)) {
		xasprintf(cause, "a GPU entry is not an object");
		return -1;
	}
	if (get_int(g, "index", 0, &v, cause) != 0)
		return -1;
	if (v < 0 || v > 1024) {
		xasprintf(
		    cause, "GPU index %lld is out of range", (long long)v);
		return -1;
	}
	gpu->index = (int)v;
	if (get_str(g, "uuid", 1, &gpu->uuid, cause) != 0 ||
	    get_str(g, "name", 1, &gpu->name, cause) != 0 ||
	    get_num_in(g, "util_gpu", 0, 100, &gpu->util_gpu, cause) != 0 ||
	    get_num_in(g, "util_mem", 0, 100, &gpu->util_mem, cause) != 0 ||
	    get_num_in(g, "mem_used_mib", 0, MIB_MAX, &gpu->mem_used_mib,
		cause) != 0 ||
	    get_num_in(g, "mem_total_mib", 0, MIB_MAX, &gpu->mem_total_mib,
		cause) != 0 ||
	    get_num_in(g, "temp_c", TEMP_MIN, TEMP_MAX, &gpu->temp_c, cause) !=
		0 ||
	    get_num_in(g, "power_w", 0, POWER_MAX, &gpu->power_w, cause) != 0 ||
	    get_num_in(g, "power_limit_w", 0, POWER_MAX, &gpu->power_limit_w,
		cause) != 0)
		return -1;
	procs = json_object_get(g, "processes");
	if (procs == NULL || json_is_null(procs))
		return 0;
	if (!json_is_array(procs)) {
		xasprintf(cause, "'processes' is not an array");
		return -1;
	}
	gpu->procs = xcalloc(json_array_size(procs) + 1, sizeof *gpu->procs);
	json_array_foreach(procs, i, p)
	{
		struct report_proc *rp = &gpu->procs[gpu->nprocs];
		if (!json_is_object(p) ||
		    get_int(p, "pid", 0, &v, cause) != 0) {
			if (*cause == NULL)
				xasprintf(cause,
				    "a process entry is not an "
				    "object");
			return -1;
		}
		gpu->nprocs++;
		if (v < 0 || v > PID_MAX) {
			xasprintf(cause, "'pid' %lld is out of range (0 to %d)",
			    (long long)v, PID_MAX);
			return -1;
		}
		rp->pid = (long)v;
		if (get_str(p, "name", 1, &rp->name, cause) != 0 ||
		    get_num_in(p, "mem_mib", 0, MIB_MAX, &rp->mem_mib, cause) !=
			0)
			return -1;
	}
	return 0;
}

/*
 * Parse a report read at time now (the controller's clock, which bounds the
 * times in it). On failure *cause says what is wrong (caller frees) and r
 * holds nothing to free.
 */
/* The container and the machine started before the report was made. */
static int
check_starts(const struct report *r, char **why)
{
	int c = r->container_start > r->time;

	if (!c && r->boot_time <= r->time)
		return 0;
	xasprintf(why, "'%s' %lld is after the report's time %lld",
	    c ? "container_start" : "boot_time",
	    (long long)(c ? r->container_start : r->boot_time),
	    (long long)r->time);
	return -1;
}

static int
parse_gpus(json_t *doc, struct report *r, char **why)
{
	json_t *gpus = json_object_get(doc, "gpus"), *g;
	size_t i;

	if (!json_is_array(gpus)) {
		*why = xstrdup("'gpus' is missing or not an array");
		return -1;
	}
	if (json_array_size(gpus) > 1024) {
		*why = xstrdup("too many GPUs");
		return -1;
	}
	r->gpus = xcalloc(json_array_size(gpus) + 1, sizeof *r->gpus);
	json_array_foreach(gpus, i, g)
	{
		r->ngpus++;
		if (parse_gpu(g, &r->gpus[i], why) != 0)
			return -1;
	}
	return 0;
}

static int
parse_progress(json_t *doc, struct report *r, int64_t now, char **why)
{
	json_t *prog = json_object_get(doc, "progress");

	if (prog == NULL || json_is_null(prog))
		return 0;
	if (!json_is_object(prog)) {
		*why = xstrdup("'progress' is not an object");
		return -1;
	}
	r->has_progress = 1;
	if (get_str(prog, "text", 0, &r->progress_text, why) != 0 ||
	    get_int_in(prog, "mtime", 0, now + TIME_AHEAD, &r->progress_mtime,
		why) != 0)
		return -1;
	r->progress_truncated =
	    json_is_true(json_object_get(prog, "truncated"));
	return 0;
}

/* The authorized_keys entries, one per line; what is not a string is skipped.
 */
static void
read_authorized_keys(json_t *doc, struct report *r)
{
	json_t *ak = json_object_get(doc, "authorized_keys"), *keys, *k;
	size_t aklen = 1, off = 0, n, i;

	keys = json_is_object(ak) ? json_object_get(ak, "keys") : NULL;
	if (!json_is_array(keys))
		return;
	json_array_foreach(keys, i, k)
	{
		if (json_is_string(k))
			aklen += json_string_length(k) + 1;
	}
	r->authorized_keys = xcalloc(1, aklen);
	json_array_foreach(keys, i, k)
	{
		if (!json_is_string(k))
			continue;
		n = strlen(json_string_value(k)); /* up to a NUL in it */
		memcpy(r->authorized_keys + off, json_string_value(k), n);
		off += n;
		r->authorized_keys[off++] = '\n';
	}
}

int
report_parse(
    const char *buf, size_t len, int64_t now, struct report *r, char **cause)
{
	json_error_t jerr;
	json_t *doc = NULL, *host;
	int64_t schema;
	char *why = NULL;

	memset(r, 0, sizeof *r);
	if (len == 0) {
		xasprintf(cause, "empty agent report");
		return -1;
	}
	if (len > REPORT_MAX_BYTES) {
		xasprintf(cause, "agent report is larger than %d bytes",
		    REPORT_MAX_BYTES);
		return -1;
	}
	doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (doc == NULL) {
		xasprintf(cause, "agent report is not JSON (%s at byte %d)",
		    jerr.text, jerr.position);
		return -1;
	}
	if (!json_is_object(doc)) {
		why = xstrdup("not a JSON object");
		goto fail;
	}
	if (get_int(doc, "schema", 0, &schema, &why) != 0)
		goto fail;
	if (schema != REPORT_SCHEMA) {
		xasprintf(&why,
		    "schema %lld, this gpufleet reads schema %d "
		    "(agent and controller versions differ)",
		    (long long)schema, REPORT_SCHEMA);
		goto fail;
	}
	if (get_time(doc, "time", 0, now, &r->time, &why) != 0 ||
	    get_str(doc, "agent_version", 1, &r->agent_version, &why) != 0 ||
	    get_obj(doc, "host", &host, &why) != 0 ||
	    parse_host(host, r, now, &why) != 0 ||
	    get_str(doc, "gpu_error", 1, &r->gpu_error, &why) != 0 ||
	    get_str(doc, "driver_version", 1, &r->driver_version, &why) != 0 ||
	    get_str(doc, "cuda_version", 1, &r->cuda_version, &why) != 0)
		goto fail;
	if (check_starts(r, &why) != 0 || parse_gpus(doc, r, &why) != 0 ||
	    parse_progress(doc, r, now, &why) != 0)
		goto fail;
	read_authorized_keys(doc, r);
	if (json_object_get(doc, "watcher") != NULL)
		report_parse_watcher(
		    json_object_get(doc, "watcher"), now, &r->watcher);
	json_decref(doc);
	return 0;
fail:
	xasprintf(cause, "bad agent report: %s", why);
	free(why);
	json_decref(doc);
	report_free(r);
	return -1;
}

void
report_free(struct report *r)
{
	size_t i, j;

	for (i = 0; i < r->ngpus; i++) {
		for (j = 0; j < r->gpus[i].nprocs; j++)
			free(r->gpus[i].procs[j].name);
		free(r->gpus[i].procs);
		free(r->gpus[i].uuid);
		free(r->gpus[i].name);
	}
	free(r->gpus);
	free(r->agent_version);
	free(r->hostname);
	free(r->kernel);
	free(r->gpu_error);
	free(r->driver_version);
	free(r->cuda_version);
	free(r->progress_text);
	free(r->authorized_keys);
	report_watcher_free(&r->watcher);
	memset(r, 0, sizeof *r);
}

/* Whether s is 1 to 64 of [A-Za-z0-9._@-]: a deadline or policy id. */
int
report_check_id(const char *s)
{
	size_t n = strspn(s,
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789._@-");

	return n >= 1 && n <= 64 && s[n] == '\0';
}

/* Whether s is 16 hex digits: a journal epoch. */
static int
check_hex16(const char *s)
{
	return strlen(s) == 16 && strspn(s, "0123456789abcdefABCDEF") == 16;
}

/*
 * Check one journal entry read at time now (the controller's clock) and
 * copy it into e. Returns -1 with *why (caller frees) for an entry that
 * cannot be stored: not an object, a bad epoch, seq or time, an id that
 * is not an id, more than REPORT_ENTRY_MAX bytes. An event this build
 * does not know is kept as "unknown".
 */
int
report_entry_check(json_t *o, int64_t now, struct report_entry *e, char **why)
{
	json_t *v;
	size_t i;

	memset(e, 0, sizeof *e);
	if (!json_is_object(o)) {
		*why = xstrdup("a journal entry is not an object");
		return -1;
	}
	v = json_object_get(o, "epoch");
	if (!json_is_string(v) || !check_hex16(json_string_value(v))) {
		*why = xstrdup("'epoch' is not 16 hex digits");
		return -1;
	}
	memcpy(e->epoch, json_string_value(v), 17);
	if (get_int_in(o, "seq", 1, SEQ_MAX, &e->seq, why) != 0)
		return -1;
	if (e->seq == 0) {
		*why = xstrdup("'seq' is missing");
		return -1;
	}
	if (get_time(o, "time", 0, now, &e->time, why) != 0)
		return -1;
	v = json_object_get(o, "event");
	if (!json_is_string(v)) {
		*why = xstrdup("'event' is missing or not a string");
		return -1;
	}
	snprintf(e->event, sizeof e->event, "unknown");
	for (i = 0; i < sizeof journal_events / sizeof journal_events[0]; i++) {
		if (strcmp(json_string_value(v), journal_events[i]) == 0)
			snprintf(
			    e->event, sizeof e->event, "%s", journal_events[i]);
	}
	v = json_object_get(o, "id");
	if (v != NULL && !json_is_null(v)) {
		if (!json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v) ||
		    !report_check_id(json_string_value(v))) {
			*why = xstrdup("'id' is not an id");
			return -1;
		}
		e->id = xstrdup(json_string_value(v));
	}
	e->entry = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (e->entry == NULL || strlen(e->entry) > REPORT_ENTRY_MAX) {
		xasprintf(why, "a journal entry is larger than %d bytes",
		    REPORT_ENTRY_MAX);
		report_entry_free(e);
		return -1;
	}
	return 0;
}

void
report_entry_free(struct report_entry *e)
{
	free(e->id);
	free(e->entry);
	memset(e, 0, sizeof *e);
}

/* The section's journal: the entries that pass the checks, in order. */
static void
parse_journal(json_t *w, int64_t now, struct report_watcher *rw)
{
	rw->journal_more = json_is_true(json_object_get(w, "journal_more"));
	if (parse_entries(json_object_get(w, "journal"), now,
		REPORT_ENTRIES_MAX, &rw->journal, &rw->njournal,
		&rw->nskipped) > 0)
		rw->journal_more = 1;
	if (rw->journal_more)
		parse_entries(json_object_get(w, "journal_urgent"), now,
		    REPORT_URGENT_MAX, &rw->urgent, &rw->nurgent,
		    &rw->nskipped);
}

/*
 * The checked entries of array j (at most max) into *out (*n of them);
 * those refused counted in *skipped. Returns how many were left out for
 * max.
 */
static size_t
parse_entries(json_t *j, int64_t now, size_t max, struct report_entry **out,
    size_t *n, size_t *skipped)
{
	json_t *o;
	size_t i;
	char *why;

	if (!json_is_array(j))
		return 0;
	*out = xcalloc(json_array_size(j) + 1, sizeof **out);
	json_array_foreach(j, i, o)
	{
		why = NULL;
		if (*n == max)
			return json_array_size(j) - i;
		if (report_entry_check(o, now, &(*out)[*n], &why) == 0)
			(*n)++;
		else
			(*skipped)++;
		free(why);
	}
	return 0;
}

/*
 * Read the report's watcher section. Nothing in it refuses the report:
 * what does not check out reads as state "unknown" with an error (a bad
 * generation as -1, so no plan is written over it), and entries that do
 * not check out are left out (nskipped).
 */
int
report_parse_watcher(json_t *w, int64_t now, struct report_watcher *rw)
{
	static const char *const states[] = { "running", "started", "down",
		"none" };
	json_t *v;
	char *why = NULL;
	size_t i;

	memset(rw, 0, sizeof *rw);
	rw->present = 1;
	snprintf(rw->state, sizeof rw->state, "unknown");
	if (!json_is_object(w)) {
		rw->error = xstrdup("the watcher section is not an object");
		rw->generation = -1;
		return -1;
	}
	v = json_object_get(w, "state");
	for (i = 0; json_is_string(v) && i < 4; i++) {
		if (strcmp(json_string_value(v), states[i]) == 0)
			snprintf(rw->state, sizeof rw->state, "%s", states[i]);
	}
	if (get_int_in(w, "pid", 1, PID_MAX, &rw->pid, &why) != 0)
		rw->pid = 0;
	free(why);
	why = NULL;
	rw->current = json_is_true(json_object_get(w, "current"));
	v = json_object_get(w, "error");
	if (json_is_string(v))
		rw->error = xstrndup(json_string_value(v),
		    json_string_length(v) < TEXT_MAX ? json_string_length(v)
						     : TEXT_MAX);
	v = json_object_get(w, "generation");
	rw->generation = json_is_integer(v) && json_integer_value(v) >= 0 &&
		json_integer_value(v) <= SEQ_MAX
	    ? json_integer_value(v)
	    : -1;
	v = json_object_get(w, "plan");
	if (json_is_object(v)) {
		rw->plan = json_dumps(v, JSON_COMPACT);
		if (rw->plan != NULL && strlen(rw->plan) > PLAN_MAX) {
			free(rw->plan);
			rw->plan = NULL;
			rw->generation = -1;
		}
	}
	v = json_object_get(w, "journal_epoch");
	if (json_is_string(v) && check_hex16(json_string_value(v)))
		memcpy(rw->epoch, json_string_value(v), 17);
	parse_notify(json_object_get(w, "notify"), rw);
	parse_journal(w, now, rw);
	if (rw->generation < 0 && rw->error == NULL)
		rw->error = xstrdup("the watcher's generation or plan is "
				    "not valid");
	return 0;
}

/* Whether s is printable ASCII without blanks. */
static int
printable(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

/*
 * What the watcher section says of D/notify.json: null (none), or its
 * SHA-256 and target names (printable, at most REPORT_NOTIFY_MAX); an
 * unreadable one counts as present with no target, so it is written again.
 */
static void
parse_notify(json_t *v, struct report_watcher *rw)
{
	const char *s;
	json_t *t;
	size_t i;

	if (!json_is_object(v))
		return;
	rw->notify_present = 1;
	s = json_string_value(json_object_get(v, "sha256"));
	if (s != NULL && strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64)
		memcpy(rw->notify_sha, s, 65);
	json_array_foreach(json_object_get(v, "targets"), i, t)
	{
		s = json_string_value(t);
		if (s == NULL || rw->notify_ntargets >= REPORT_NOTIFY_MAX ||
		    *s == '\0' || strlen(s) > 64 || !printable(s))
			continue;
		rw->notify_targets[rw->notify_ntargets++] = xstrdup(s);
	}
}

/* Whether the report says D/notify.json holds target name. */
int
report_notify_has(const struct report_watcher *rw, const char *name)
{
	size_t i;

	for (i = 0; i < rw->notify_ntargets; i++)
		if (strcmp(rw->notify_targets[i], name) == 0)
			return 1;
	return 0;
}

void
report_watcher_free(struct report_watcher *rw)
{
	size_t i;

	for (i = 0; i < rw->notify_ntargets; i++)
		free(rw->notify_targets[i]);

	for (i = 0; i < rw->njournal; i++)
		report_entry_free(&rw->journal[i]);
	free(rw->journal);
	for (i = 0; i < rw->nurgent; i++)
		report_entry_free(&rw->urgent[i]);
	free(rw->urgent);
	free(rw->error);
	free(rw->plan);
	memset(rw, 0, sizeof *rw);
}
