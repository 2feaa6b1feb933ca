/*
 * Building the watcher's plan (controller/plan.c) from the read-back plan
 * and one change: fired deadlines dropped, others kept, the settings
 * refreshed, the generation that was read carried.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "plan.h"
#include "planwrite.h"
#include "xmalloc.h"

#define DL(id, at)                                                             \
	"{\"id\":\"" id "\",\"at\":" at ",\"action\":\"stop\","                \
	"\"warn_minutes\":5,\"before_stop\":null,"                             \
	"\"before_stop_timeout_s\":600,\"before_must_succeed\":false}"
#define AS "{\"id\":\"a-1\",\"idle_s\":1800,\"gpu_below\":5}"

static const struct {
	const char *readback; /* or NULL */
	const char *fired;    /* comma-separated ids */
	enum plan_change_kind kind;
	const char *cancel_id;
	const char *want_ids; /* the deadlines written, comma-separated */
	const char *want_as;  /* the policy's id, or NULL */
	size_t kept, dropped, removed;
	const char *error; /* part of the reason, or NULL */
} cases[] = {
	{ NULL, "", PLAN_ADD, NULL, "d-new", NULL, 0, 0, 0, NULL },
	{ "{\"version\":1,\"generation\":3,\"deadlines\":[]}", "", PLAN_ADD,
	    NULL, "d-new", NULL, 0, 0, 0, NULL },
	/* A fired deadline is never written again; the others stay. */
	{ "{\"deadlines\":[" DL("d-1", "100") "," DL("d-2", "200") "]}", "d-1",
	    PLAN_ADD, NULL, "d-2,d-new", NULL, 1, 1, 0, NULL },
	{ "{\"deadlines\":[" DL("d-1", "100") "," DL("d-2", "200") "]}",
	    "d-1,d-2", PLAN_CANCEL_ALL, NULL, "", NULL, 0, 2, 0, NULL },
	{ "{\"deadlines\":[" DL("d-1", "100") "," DL("d-2", "200") "]}", "",
	    PLAN_CANCEL_ALL, NULL, "", NULL, 0, 0, 2, NULL },
	{ "{\"deadlines\":[" DL("d-1", "100") "," DL("d-2", "200") "]}", "",
	    PLAN_CANCEL_ID, "d-2", "d-1", NULL, 1, 0, 1, NULL },
	{ "{\"deadlines\":[" DL("d-1", "100") "]}", "", PLAN_CANCEL_ID, "d-9",
	    "d-1", NULL, 1, 0, 0, NULL },
	/* The policy is kept by deadline changes, set and dropped by its own.
	 */
	{ "{\"deadlines\":[" DL("d-1", "100") "],\"autostop\":" AS "}", "",
	    PLAN_ADD, NULL, "d-1,d-new", "a-1", 1, 0, 0, NULL },
	{ "{\"deadlines\":[" DL("d-1", "100") "],\"autostop\":" AS "}", "",
	    PLAN_CANCEL_ALL, NULL, "", "a-1", 0, 0, 1, NULL },
	{ "{\"deadlines\":[" DL("d-1", "100") "],\"autostop\":" AS "}", "",
	    PLAN_AUTOSTOP, NULL, "d-1", "a-new", 1, 0, 0, NULL },
	{ "{\"deadlines\":[" DL("d-1", "100") "],\"autostop\":" AS "}", "",
	    PLAN_AUTOSTOP_OFF, NULL, "d-1", NULL, 1, 0, 0, NULL },
	/* What is not a valid deadline (it came from the instance) is left. */
	{ "{\"deadlines\":[7,{\"id\":\"d-x\"},{\"id\":\"bad id\",\"at\":1,"
	  "\"action\":\"stop\"},{\"id\":\"d-y\",\"at\":1,\"action\":\"boom\"},"
	  "{\"id\":\"d-z\",\"at\":1,\"action\":\"local\",\"extra\":1}]}",
	    "", PLAN_ADD, NULL, "d-z,d-new", NULL, 1, 4, 0, NULL },
	{ "{\"deadlines\":\"many\"}", "", PLAN_ADD, NULL, "d-new", NULL, 0, 0,
	    0, NULL },
	{ "[1]", "", PLAN_ADD, NULL, NULL, NULL, 0, 0, 0, "not an object" },
	{ "{\"deadlines\":[" DL("d-new", "100") "]}", "", PLAN_ADD, NULL, NULL,
	    NULL, 0, 0, 0, "already armed" },
	/* A fired id in the read-back plan is dropped before the new one. */
	{ "{\"deadlines\":[" DL("d-new", "100") "]}", "d-new", PLAN_ADD, NULL,
	    "d-new", NULL, 0, 1, 0, NULL },
};

static void
change_init(
    struct plan_change *c, enum plan_change_kind kind, const char *cancel_id)
{
	memset(c, 0, sizeof *c);
	c->kind = kind;
	snprintf(c->deadline.id, sizeof c->deadline.id, "d-new");
	c->deadline.at = 1764640800;
	c->deadline.warn_minutes = 5;
	c->deadline.before_stop_timeout_s = 600;
	c->cancel_id = cancel_id;
	snprintf(c->autostop.id, sizeof c->autostop.id, "a-new");
	c->autostop.idle_s = 1800;
	c->autostop.gpu_below = 5;
	c->autostop.gpu_mem_mib = 1024;
	c->autostop.wait_sessions = c->autostop.wait_jobs = 1;
	c->instance = "a100-1";
	c->stop_command = "/usr/bin/shutdown";
	c->stop_kind = "stop";
	c->check_interval_s = 60;
	c->stop_confirm_s = 600;
	c->written_by = "gpufleet test";
	c->now = 1764640000;
}

/* The ids of the plan's deadlines, comma-separated. Caller frees. */
static char *
ids_of(json_t *plan)
{
	json_t *d;
	size_t i;
	char *s = xstrdup(""), *t;

	json_array_foreach(json_object_get(plan, "deadlines"), i, d)
	{
		xasprintf(&t, "%s%s%s", s, i ? "," : "",
		    json_string_value(json_object_get(d, "id")));
		free(s);
		s = t;
	}
	return s;
}

START_TEST(test_build)
{
	struct plan_change c;
	struct plan_result res;
	char *fired_buf = xstrdup(cases[_i].fired), *fired[8], *out = NULL;
	char *cause = NULL, *p, *ids;
	size_t nfired = 0;
	json_t *plan, *as;
	int r;

	for (p = strtok(fired_buf, ","); p != NULL; p = strtok(NULL, ","))
		fired[nfired++] = p;
	change_init(&c, cases[_i].kind, cases[_i].cancel_id);
	r = plan_build(cases[_i].readback, 3, (const char *const *)fired,
	    nfired, &c, &out, &res, &cause);
	if (cases[_i].error != NULL) {
		ck_assert_int_eq(r, -1);
		ck_assert_ptr_null(out);
		ck_assert_ptr_nonnull(strstr(cause, cases[_i].error));
		free(cause);
		free(fired_buf);
		return;
	}
	ck_assert_int_eq(r, 0);
	plan = json_loads(out, 0, NULL);
	ck_assert_ptr_nonnull(plan);
	ids = ids_of(plan);
	ck_assert_str_eq(ids, cases[_i].want_ids);
	as = json_object_get(plan, "autostop");
	if (cases[_i].want_as == NULL)
		ck_assert(json_is_null(as));
	else
		ck_assert_str_eq(json_string_value(json_object_get(as, "id")),
		    cases[_i].want_as);
	ck_assert_uint_eq(res.kept, cases[_i].kept);
	ck_assert_uint_eq(res.dropped, cases[_i].dropped);
	ck_assert_uint_eq(res.removed, cases[_i].removed);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(plan, "generation")), 3);
	free(ids);
	json_decref(plan);
	free(out);
	free(fired_buf);
}
END_TEST

/* The whole plan, byte for byte: settings refreshed, stale stop replaced. */
START_TEST(test_exact)
{
	struct plan_change c;
	struct plan_result res;
	char *out = NULL, *cause = NULL;
	const char *readback =
	    "{\"version\":1,\"generation\":7,\"stop\":{\"command\":\"old\","
	    "\"kind\":\"release\",\"allow_release\":true},\"check_interval_s\":"
	    "5,\"deadlines\":[]}";

	change_init(&c, PLAN_AUTOSTOP, NULL);
	c.autostop.wait_sessions = 0;
	c.autostop.stalled_s = 900;
	c.autostop.progress = "~/p";
	ck_assert_int_eq(
	    plan_build(readback, 7, NULL, 0, &c, &out, &res, &cause), 0);
	ck_assert_str_eq(out,
	    "{\"version\":1,\"generation\":7,\"written_at\":1764640000,"
	    "\"written_by\":\"gpufleet test\",\"instance\":\"a100-1\","
	    "\"check_interval_s\":60,\"stop_confirm_s\":600,\"stop\":{"
	    "\"command\":\"/usr/bin/shutdown\",\"kind\":\"stop\","
	    "\"allow_release\":false},\"deadlines\":[],\"autostop\":{\"id\":"
	    "\"a-new\",\"idle_s\":1800,\"gpu_below\":5,\"gpu_mem_mib\":1024,"
	    "\"wait_for\":[\"jobs\"],\"stalled_s\":900,\"max_runtime_s\":0,"
	    "\"progress\":\"~/p\",\"nvidia_smi\":null}}");
	free(out);
	/* No remote method: stop is null; a new deadline in full. */
	change_init(&c, PLAN_ADD, NULL);
	c.stop_command = NULL;
	c.deadline.local = 1;
	c.deadline.before_stop = "python save.py";
	c.deadline.before_must_succeed = 1;
	ck_assert_int_eq(
	    plan_build(NULL, 0, NULL, 0, &c, &out, &res, &cause), 0);
	ck_assert_str_eq(out,
	    "{\"version\":1,\"generation\":0,\"written_at\":1764640000,"
	    "\"written_by\":\"gpufleet test\",\"instance\":\"a100-1\","
	    "\"check_interval_s\":60,\"stop_confirm_s\":600,\"stop\":null,"
	    "\"deadlines\":[{\"id\":\"d-new\",\"at\":1764640800,\"action\":"
	    "\"local\",\"warn_minutes\":5,\"before_stop\":\"python save.py\","
	    "\"before_stop_timeout_s\":600,\"before_must_succeed\":true}],"
	    "\"autostop\":null}");
	free(out);
}
END_TEST

#define SID64 "s-3f2a9c01-1764640800-a123456789a123456789a123456789a123456789ab"

/*
 * unless_busy and ids of up to 64 characters survive the read-back (a
 * schedule's occurrence, s-TAG-UNIXTIME, kept by a shutdown); a new
 * deadline carries it, and one without it is written as before.
 */
START_TEST(test_unless_busy)
{
	struct plan_change c;
	struct plan_result res;
	char *out = NULL, *cause = NULL;
	const char *readback =
	    "{\"deadlines\":[{\"id\":\"" SID64 "\",\"at\":100,\"action\":"
	    "\"stop\",\"unless_busy\":true},{\"id\":\"" SID64 "X\",\"at\":1,"
	    "\"action\":\"stop\"},{\"id\":\"d-2\",\"at\":1,\"action\":"
	    "\"stop\",\"unless_busy\":1},{\"id\":\"d-3\",\"at\":1,"
	    "\"action\":\"stop\",\"unless_busy\":false}]}";

	ck_assert_uint_eq(strlen(SID64), PLAN_DEADLINE_ID_MAX);
	change_init(&c, PLAN_ADD, NULL);
	c.deadline.unless_busy = 1;
	ck_assert_int_eq(
	    plan_build(readback, 2, NULL, 0, &c, &out, &res, &cause), 0);
	ck_assert_uint_eq(res.kept, 2);
	ck_assert_uint_eq(res.dropped, 2); /* 65 characters; not a bool */
	ck_assert_ptr_nonnull(strstr(out,
	    "\"deadlines\":[{\"id\":\"" SID64 "\",\"at\":100,\"action\":"
	    "\"stop\",\"warn_minutes\":0,\"before_stop\":null,"
	    "\"before_stop_timeout_s\":600,\"before_must_succeed\":false,"
	    "\"unless_busy\":true},{\"id\":\"d-3\",\"at\":1,\"action\":"
	    "\"stop\",\"warn_minutes\":0,\"before_stop\":null,"
	    "\"before_stop_timeout_s\":600,\"before_must_succeed\":false},"
	    "{\"id\":\"d-new\",\"at\":1764640800,\"action\":\"stop\","
	    "\"warn_minutes\":5,\"before_stop\":null,"
	    "\"before_stop_timeout_s\":600,\"before_must_succeed\":false,"
	    "\"unless_busy\":true}]"));
	free(out);
	/* A 64-character id is armed whole. */
	change_init(&c, PLAN_ADD, NULL);
	snprintf(c.deadline.id, sizeof c.deadline.id, "%s", SID64);
	ck_assert_int_eq(
	    plan_build(NULL, 0, NULL, 0, &c, &out, &res, &cause), 0);
	ck_assert_ptr_nonnull(strstr(out, "{\"id\":\"" SID64 "\","));
	free(out);
}
END_TEST

/*
 * A held deadline (shutdown --in/--at --pull) keeps its hold through the
 * read-back, one whose hold is not an object is dropped, and a new one
 * carries it; no local path is ever in it.
 */
START_TEST(test_hold)
{
	struct plan_change c;
	struct plan_result res;
	char *out = NULL, *cause = NULL;
	const char *readback =
	    "{\"deadlines\":[{\"id\":\"d-1\",\"at\":100,\"action\":"
	    "\"stop\",\"hold\":{\"for\":\"pull\",\"wait\":60,\"must\":true}},"
	    "{\"id\":\"d-2\",\"at\":1,\"action\":\"stop\",\"hold\":true},"
	    "{\"id\":\"d-3\",\"at\":1,\"action\":\"stop\",\"hold\":{"
	    "\"for\":\"pull\",\"wait\":0}}]}";

	change_init(&c, PLAN_ADD, NULL);
	c.deadline.hold = 1;
	c.deadline.hold_wait_s = 7200;
	ck_assert_int_eq(
	    plan_build(readback, 2, NULL, 0, &c, &out, &res, &cause), 0);
	ck_assert_uint_eq(res.kept, 1);
	ck_assert_uint_eq(res.dropped, 2);
	ck_assert_ptr_nonnull(strstr(out,
	    "\"deadlines\":[{\"id\":\"d-1\",\"at\":100,\"action\":\"stop\","
	    "\"warn_minutes\":0,\"before_stop\":null,"
	    "\"before_stop_timeout_s\":600,\"before_must_succeed\":false,"
	    "\"hold\":{\"for\":\"pull\",\"wait\":60,\"must\":true}},"
	    "{\"id\":\"d-new\",\"at\":1764640800,\"action\":\"stop\","
	    "\"warn_minutes\":5,\"before_stop\":null,"
	    "\"before_stop_timeout_s\":600,\"before_must_succeed\":false,"
	    "\"hold\":{\"for\":\"pull\",\"wait\":7200,\"must\":false}}]"));
	free(out);
}
END_TEST

/* A read-back plan of n deadlines d-0 .. d-(n-1). Caller frees. */
static char *
plan_of(int n)
{
	json_t *o = json_pack("{s:[]}", "deadlines");
	char id[16], *rb;
	int i;

	for (i = 0; i < n; i++) {
		snprintf(id, sizeof id, "d-%d", i);
		json_array_append_new(json_object_get(o, "deadlines"),
		    json_pack("{s:s, s:i, s:s}", "id", id, "at", 100, "action",
			"stop"));
	}
	rb = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return rb;
}

/* A plan holds PLAN_MAX_DEADLINES; one more is refused. */
START_TEST(test_full)
{
	struct plan_change c;
	struct plan_result res;
	char *out = NULL, *cause = NULL, *rb = plan_of(PLAN_MAX_DEADLINES);

	change_init(&c, PLAN_ADD, NULL);
	ck_assert_int_eq(
	    plan_build(rb, 1, NULL, 0, &c, &out, &res, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "64 deadlines"));
	free(cause);
	cause = NULL;
	/* With one fired, there is room. */
	{
		const char *fired[] = { "d-5" };
		ck_assert_int_eq(
		    plan_build(rb, 1, fired, 1, &c, &out, &res, &cause), 0);
		ck_assert_uint_eq(res.kept, PLAN_MAX_DEADLINES - 1);
		free(out);
	}
	free(rb);
}
END_TEST

/* A schedule deadline wanted by the sync: s-TAG-AT, warn 0. */
static struct plan_deadline
want_dl(const char *tag, long long at)
{
	struct plan_deadline d;

	memset(&d, 0, sizeof d);
	snprintf(d.id, sizeof d.id, "s-%s-%lld", tag, at);
	d.at = at;
	d.before_stop_timeout_s = 600;
	return d;
}

/*
 * The sync: read-back s- deadlines replaced by the wanted ones (fired
 * left out), except one whose occurrence has come while its schedule
 * still applies; other deadlines untouched, and cancel-all leaves s- ones.
 */
START_TEST(test_sync)
{
	struct plan_change c;
	struct plan_result res;
	struct plan_deadline want[3];
	const char *tags[] = { "aaaa0001" };
	const char *fired[] = { "s-aaaa0001-1764670000" };
	char *out = NULL, *cause = NULL, *ids;
	json_t *plan;
	const char *readback = "{\"deadlines\":[" DL("d-1", "100") "," DL(
	    "s-aaaa0001-100", "100") "," DL("s-aaaa0001-1764650000",
	    "1764650000") "," DL("s-bbbb0002-50",
	    "50") "," DL("s-aaaa0001-1764640500", "1764640500") "]}";

	want[0] = want_dl("aaaa0001", 1764650000);
	want[1] = want_dl("aaaa0001", 1764660000);
	want[2] = want_dl("aaaa0001", 1764670000);
	change_init(&c, PLAN_SYNC, NULL);
	c.sync.on = 1;
	c.sync.want = want;
	c.sync.nwant = 3;
	c.sync.tags = tags;
	c.sync.ntags = 1;
	ck_assert_int_eq(
	    plan_build(readback, 4, fired, 1, &c, &out, &res, &cause), 0);
	plan = json_loads(out, 0, NULL);
	ids = ids_of(plan);
	ck_assert_str_eq(ids,
	    "d-1,s-aaaa0001-100,s-aaaa0001-1764650000,s-aaaa0001-1764660000");
	ck_assert_uint_eq(res.kept, 1);
	ck_assert_uint_eq(res.synced, 3);
	ck_assert(!plan_sync_equal(readback, out));
	ck_assert(plan_sync_equal(out, out));
	free(ids);
	json_decref(plan);

	/* Built again over what was written: nothing changes. */
	{
		char *again = NULL;
		ck_assert_int_eq(
		    plan_build(out, 5, fired, 1, &c, &again, &res, &cause), 0);
		ck_assert(plan_sync_equal(out, again));
		free(again);
	}

	/* The schedule no longer applies: every s- deadline goes. */
	c.sync.ntags = 0;
	c.sync.nwant = 0;
	c.kind = PLAN_CANCEL_ALL;
	free(out);
	ck_assert_int_eq(
	    plan_build(readback, 4, NULL, 0, &c, &out, &res, &cause), 0);
	plan = json_loads(out, 0, NULL);
	ids = ids_of(plan);
	ck_assert_str_eq(ids, "");
	ck_assert_uint_eq(res.removed, 1);
	free(ids);
	json_decref(plan);
	free(out);

	/* Cancel-all with the schedule still applying: s- ones stay. */
	c.sync.ntags = 1;
	c.sync.nwant = 2;
	ck_assert_int_eq(
	    plan_build(readback, 4, NULL, 0, &c, &out, &res, &cause), 0);
	plan = json_loads(out, 0, NULL);
	ids = ids_of(plan);
	ck_assert_str_eq(
	    ids, "s-aaaa0001-100,s-aaaa0001-1764650000,s-aaaa0001-1764660000");
	free(ids);
	json_decref(plan);
	free(out);
}
END_TEST

/* A read-back plan of one schedule deadline s-aaaa0001-1764650000. */
static char *
sync_plan_of(long long at, int warn)
{
	char *s;

	xasprintf(&s,
	    "{\"deadlines\":[{\"id\":\"s-aaaa0001-1764650000\",\"at\":%lld,"
	    "\"action\":\"stop\",\"warn_minutes\":%d,\"before_stop\":null,"
	    "\"before_stop_timeout_s\":600,\"before_must_succeed\":false}]}",
	    at, warn);
	return s;
}

struct tolerance_case {
	const char *name;
	long long readback_at, want_at;
	long long written_at; /* the at in the plan built */
	int equal;	      /* plan_sync_equal(readback, built) */
};

/* The clock skew wobbles between contacts: within 30 s it is the same. */
static const struct tolerance_case tolerance_cases[] = {
	{ "the same at", 1764650000, 1764650000, 1764650000, 1 },
	{ "1 s later (skew wobble): the old at kept", 1764650000, 1764650001,
	    1764650000, 1 },
	{ "30 s later: still kept", 1764650000, 1764650030, 1764650000, 1 },
	{ "30 s earlier: still kept", 1764650000, 1764649970, 1764650000, 1 },
	{ "31 s later: rewritten", 1764650000, 1764650031, 1764650031, 0 },
	{ "31 s earlier: rewritten", 1764650000, 1764649969, 1764649969, 0 },
	{ "an hour off (the instance's clock was set): rewritten", 1764650000,
	    1764653600, 1764653600, 0 },
};

START_TEST(test_sync_tolerance)
{
	const struct tolerance_case *t = &tolerance_cases[_i];
	struct plan_change c;
	struct plan_result res;
	struct plan_deadline want;
	const char *tags[] = { "aaaa0001" };
	char *rb = sync_plan_of(t->readback_at, 0), *out = NULL, *cause = NULL;
	json_t *plan, *d;

	want = want_dl("aaaa0001", 1764650000);
	want.at = t->want_at;
	change_init(&c, PLAN_SYNC, NULL);
	c.now = 1764640000; /* before the occurrence: it is replaced */
	c.sync.on = 1;
	c.sync.want = &want;
	c.sync.nwant = 1;
	c.sync.tags = tags;
	c.sync.ntags = 1;
	ck_assert_int_eq(plan_build(rb, 3, NULL, 0, &c, &out, &res, &cause), 0);
	plan = json_loads(out, 0, NULL);
	d = json_array_get(json_object_get(plan, "deadlines"), 0);
	ck_assert_msg(
	    json_integer_value(json_object_get(d, "at")) == t->written_at,
	    "%s: at %lld, want %lld", t->name,
	    (long long)json_integer_value(json_object_get(d, "at")),
	    t->written_at);
	ck_assert_msg(plan_sync_equal(rb, out) == t->equal,
	    "%s: plan_sync_equal is not %d", t->name, t->equal);
	json_decref(plan);
	free(out);
	free(rb);
}
END_TEST

/*
 * plan_sync_equal: the at of each within the tolerance, every other member
 * exactly.
 */
START_TEST(test_sync_equal_tolerance)
{
	char *a = sync_plan_of(1764650000, 0), *b = sync_plan_of(1764650012, 0),
	     *far = sync_plan_of(1764650031, 0),
	     *warn = sync_plan_of(1764650000, 5);

	ck_assert(plan_sync_equal(a, b));
	ck_assert(plan_sync_equal(b, a));
	ck_assert(!plan_sync_equal(a, far));
	ck_assert(!plan_sync_equal(far, a));
	ck_assert(!plan_sync_equal(a, warn));
	ck_assert(!plan_sync_equal(a, "{\"deadlines\":[]}"));
	ck_assert(!plan_sync_equal("{\"deadlines\":[]}", a));
	free(a);
	free(b);
	free(far);
	free(warn);
}
END_TEST

/* Other deadlines win: the wanted s- ones fill what is left of 64. */
START_TEST(test_sync_full)
{
	struct plan_change c;
	struct plan_result res;
	struct plan_deadline want[10];
	json_t *plan;
	char *out = NULL, *cause = NULL, *rb = plan_of(60);
	int i;

	for (i = 0; i < 10; i++)
		want[i] = want_dl("aaaa0001", 1764650000LL + i);
	change_init(&c, PLAN_ADD, NULL);
	c.sync.on = 1;
	c.sync.want = want;
	c.sync.nwant = 10;
	ck_assert_int_eq(plan_build(rb, 1, NULL, 0, &c, &out, &res, &cause), 0);
	plan = json_loads(out, 0, NULL);
	ck_assert_uint_eq(
	    json_array_size(json_object_get(plan, "deadlines")), 64);
	ck_assert_uint_eq(res.synced, 3); /* 60 + d-new + 3 */
	ck_assert_uint_eq(res.sync_cut, 7);
	ck_assert_str_eq(
	    json_string_value(json_object_get(
		json_array_get(json_object_get(plan, "deadlines"), 63), "id")),
	    "s-aaaa0001-1764650002");
	json_decref(plan);
	/* A manual deadline is still armed over a plan full of s- ones. */
	{
		char *full = out, *again = NULL;
		change_init(&c, PLAN_ADD, NULL);
		snprintf(c.deadline.id, sizeof c.deadline.id, "d-more");
		c.sync.on = 1;
		c.sync.want = want;
		c.sync.nwant = 10;
		ck_assert_int_eq(
		    plan_build(full, 2, NULL, 0, &c, &again, &res, &cause), 0);
		ck_assert_uint_eq(res.synced, 2);
		ck_assert_ptr_nonnull(strstr(again, "\"d-more\""));
		free(again);
		free(full);
	}
	free(rb);
}
END_TEST

/* plan set's answers, as the second pass reads them (expected gen 7). */
static const struct {
	int status;
	const char *out, *err;
	int r, written;
	long long generation;
	const char *watcher;
	const char *error; /* the reason, whole; NULL: none */
} answers[] = {
	{ 0, "{\"generation\":8,\"watcher\":\"started\",\"pid\":4242}\n", "", 0,
	    1, 8, "started", NULL },
	{ 0, "{\"generation\":8,\"watcher\":\"none\",\"pid\":null}", NULL, 0, 1,
	    8, "none", NULL },
	{ 3, "{\"error\":\"generation\",\"generation\":9}\n", "", 0, 0, 0, "",
	    "the plan changed on the instance since it was read (generation 7 "
	    "-> 9: another gpufleet wrote it); nothing changed, run it again" },
	{ 3, "garbage", "", 0, 0, 0, "",
	    "the plan changed on the instance since it was read (generation 7 "
	    "-> -1: another gpufleet wrote it); nothing changed, run it "
	    "again" },
	{ 4, "", "plan: deadlines[0].at: missing\nmore\n", 0, 0, 0, "",
	    "the agent refused the plan: plan: deadlines[0].at: missing" },
	{ 5, "", "cannot write D/plan.json: No space left on device\n", 0, 0, 0,
	    "",
	    "the plan could not be written: cannot write D/plan.json: No "
	    "space left on device" },
	{ 6, "{\"generation\":8,\"watcher\":\"none\",\"pid\":null}",
	    "fork: Resource temporarily unavailable\n", 0, 1, 8, "none",
	    "the plan was written (generation 8) but the watcher did not "
	    "start: fork: Resource temporarily unavailable" },
	{ 0, "not json", "", 0, 0, 0, "", "plan set answered no generation" },
	{ 0, NULL, NULL, 0, 0, 0, "", "plan set answered no generation" },
	/* Not plan set's own status: the caller explains it. */
	{ 86, "", "", -1, 0, 0, "", NULL },
	{ 126, "", "Permission denied", -1, 0, 0, "", NULL },
};

START_TEST(test_answer)
{
	struct planwrite_host h;
	const char *out = answers[_i].out;

	memset(&h, 0, sizeof h);
	h.expect = 7;
	ck_assert_int_eq(planwrite_answer(&h, answers[_i].status, out,
			     out != NULL ? strlen(out) : 0, answers[_i].err),
	    answers[_i].r);
	ck_assert_int_eq(h.written, answers[_i].written);
	ck_assert_int_eq(h.generation, answers[_i].generation);
	ck_assert_str_eq(h.watcher, answers[_i].watcher);
	if (answers[_i].error == NULL)
		ck_assert_ptr_null(h.error);
	else
		ck_assert_str_eq(h.error, answers[_i].error);
	free(h.error);
}
END_TEST

#define N(a) ((int)(sizeof a / sizeof a[0]))

int
main(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_build, 0, N(cases));
	tcase_add_test(tc, test_exact);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_unless_busy);
	tcase_add_test(tc, test_hold);
	tcase_add_test(tc, test_sync);
	tcase_add_test(tc, test_sync_full);
	tcase_add_loop_test(tc, test_sync_tolerance, 0, N(tolerance_cases));
	tcase_add_test(tc, test_sync_equal_tolerance);
	tcase_add_loop_test(tc, test_answer, 0, N(answers));
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
