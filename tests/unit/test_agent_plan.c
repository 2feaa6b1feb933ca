/*
 * The watcher's files and commands: the plan's validation (one row per
 * field and range of agent/WATCH.md), plan_set's compare-and-swap and the
 * modes of what it creates, the journal (epoch, seq, unparsable lines, the
 * report's cursor and caps), and the commands' environment and gate.
 */

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"

/* The example plan of agent/WATCH.md, with one member replaced. */
#define PLAN_HEAD "{\"version\":1,\"generation\":7,\"written_at\":1764640000,"
#define PLAN_STOP                                                              \
	"\"stop\":{\"command\":\"/usr/bin/shutdown\",\"kind\":\"stop\","       \
	"\"allow_release\":false}"
#define DEADLINE                                                               \
	"{\"id\":\"d-3f2a9c01\",\"at\":1764640800,\"action\":\"stop\","        \
	"\"warn_minutes\":5,\"before_stop\":\"python save.py\","               \
	"\"before_stop_timeout_s\":600,\"before_must_succeed\":false}"
#define AUTOSTOP                                                               \
	"{\"id\":\"a-77c1e0d2\",\"idle_s\":1800,\"gpu_below\":5,"              \
	"\"gpu_mem_mib\":1024,\"wait_for\":[\"sessions\",\"jobs\"],"           \
	"\"stalled_s\":0,\"max_runtime_s\":0,\"progress\":"                    \
	"\"~/.gpufleet/progress\",\"nvidia_smi\":null}"
#define EXAMPLE                                                                \
	PLAN_HEAD "\"written_by\":\"gpufleet 0.1.0\",\"instance\":\"a100-1\"," \
		  "\"check_interval_s\":60,\"stop_confirm_s\":600," PLAN_STOP  \
		  ",\"deadlines\":[" DEADLINE "],\"autostop\":" AUTOSTOP "}"

struct plan_case {
	const char *text;
	const char *cause; /* NULL: valid */
};

static const struct plan_case plan_cases[] = {
	{ EXAMPLE, NULL },
	{ "{\"version\":1}", NULL },
	{ "{\"version\":1,\"stop\":null,\"deadlines\":[],\"autostop\":null}",
	    NULL },
	{ "{}", "version: missing" },
	{ "{\"version\":2}", "version: must be an integer 1-1" },
	{ "[]", "must be an object" },
	{ "{\"version\":1,\"extra\":1}", "extra: unknown key" },
	{ "{\"version\":1,\"version\":1}", "duplicate key" },
	{ "{\"version\":1,\"check_interval_s\":0}",
	    "check_interval_s: must be an integer 1-3600" },
	{ "{\"version\":1,\"check_interval_s\":3601}", "check_interval_s" },
	{ "{\"version\":1,\"check_interval_s\":1.5}", "only integers" },
	{ "{\"version\":1,\"stop_confirm_s\":86401}", "stop_confirm_s" },
	{ "{\"version\":1,\"generation\":-1}", "generation" },
	{ "{\"version\":1,\"written_by\":3}", "written_by: must be a string" },
	{ "{\"version\":1,\"stop\":{\"command\":\"x\"}}", "stop.kind" },
	{ "{\"version\":1,\"stop\":{\"command\":\"\",\"kind\":\"stop\"}}",
	    "stop.command: must be a non-empty string" },
	{ "{\"version\":1,\"stop\":{\"command\":\"x\",\"kind\":\"halt\"}}",
	    "stop.kind: must be \"stop\" or \"release\"" },
	{ "{\"version\":1,\"stop\":{\"command\":\"x\",\"kind\":\"stop\","
	  "\"allow_release\":1}}",
	    "stop.allow_release: must be true or false" },
	{ "{\"version\":1,\"stop\":{\"command\":\"x\",\"kind\":\"stop\","
	  "\"cmd\":1}}",
	    "stop.cmd: unknown key" },
	{ "{\"version\":1,\"stop\":\"x\"}", "stop: must be an object or null" },
	{ "{\"version\":1,\"deadlines\":{}}", "deadlines: must be an array" },
	{ "{\"version\":1,\"deadlines\":[1]}",
	    "deadlines[0]: must be an object" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"action\":\"stop\"}]}",
	    "deadlines[0].at: missing" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a b\",\"at\":1,"
	  "\"action\":\"stop\"}]}",
	    "deadlines[0].id: may hold only" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"\",\"at\":1,"
	  "\"action\":\"stop\"}]}",
	    "deadlines[0].id: must be 1-64" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"halt\"}]}",
	    "deadlines[0].action" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"local\",\"warn_minutes\":1441}]}",
	    "deadlines[0].warn_minutes: must be an integer 0-1440" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"before_stop_timeout_s\":0}]}",
	    "deadlines[0].before_stop_timeout_s" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"before_stop\":\"\"}]}",
	    "deadlines[0].before_stop: must be a non-empty string or null" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"warn\":5}]}",
	    "deadlines[0].warn: unknown key" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\"},{\"id\":\"a\",\"at\":2,\"action\":\"stop\"}]}",
	    "deadlines[1].id: is not unique" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"unless_busy\":true}]}",
	    NULL },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"unless_busy\":1}]}",
	    "deadlines[0].unless_busy: must be true or false" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"unless_busy\":null}]}",
	    "deadlines[0].unless_busy: must be true or false" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"unless-busy\":true}]}",
	    "deadlines[0].unless-busy: unknown key" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":"
	  "\"s-3f2a9c01-1764640800-"
	  "a123456789a123456789a123456789a123456789ab\","
	  "\"at\":1,\"action\":\"stop\"}]}",
	    NULL },
	{ "{\"version\":1,\"deadlines\":[{\"id\":"
	  "\"s-3f2a9c01-1764640800-"
	  "a123456789a123456789a123456789a123456789abX\","
	  "\"at\":1,\"action\":\"stop\"}]}",
	    "deadlines[0].id: must be 1-64 characters" },
	{ "{\"version\":1,\"autostop\":{\"id\":"
	  "\"a23456789a123456789a123456789a123456789XY\",\"idle_s\":1}}",
	    "autostop.id: must be 1-40 characters" },
	{ "{\"version\":1,\"autostop\":{\"id\":\"a\"}}",
	    "autostop.idle_s: missing" },
	{ "{\"version\":1,\"autostop\":{\"id\":\"a\",\"idle_s\":0}}",
	    "autostop.idle_s" },
	{ "{\"version\":1,\"autostop\":{\"id\":\"a\",\"idle_s\":1,"
	  "\"gpu_below\":101}}",
	    "autostop.gpu_below: must be an integer 0-100" },
	{ "{\"version\":1,\"autostop\":{\"id\":\"a\",\"idle_s\":1,"
	  "\"wait_for\":[\"sessions\",\"sessions\"]}}",
	    "autostop.wait_for" },
	{ "{\"version\":1,\"autostop\":{\"id\":\"a\",\"idle_s\":1,"
	  "\"wait_for\":[\"users\"]}}",
	    "autostop.wait_for" },
	{ "{\"version\":1,\"autostop\":{\"id\":\"a\",\"idle_s\":1,"
	  "\"wait_for\":\"jobs\"}}",
	    "autostop.wait_for: must be an array" },
	{ "{\"version\":1,\"autostop\":{\"id\":\"a\",\"idle_s\":1,"
	  "\"idle\":1}}",
	    "autostop.idle: unknown key" },
	{ "{\"version\":1,\"autostop\":{\"id\":\"a\",\"idle_s\":1,"
	  "\"stalled_s\":-1}}",
	    "autostop.stalled_s" },
	{ "{\"version\":1} x", "trailing" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"hold\":{\"for\":\"pull\"}}]}",
	    NULL },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"hold\":{\"for\":\"pull\",\"wait\":5,\"must\":"
	  "true}}]}",
	    NULL },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"hold\":{\"for\":\"push\"}}]}",
	    "deadlines[0].hold.for: must be \"pull\"" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"hold\":{\"wait\":5}}]}",
	    "deadlines[0].hold.for: must be \"pull\"" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"hold\":{\"for\":\"pull\",\"wait\":0}}]}",
	    "deadlines[0].hold.wait: must be an integer 1-2592000" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"hold\":{\"for\":\"pull\",\"wait\":2592001}}]}",
	    "deadlines[0].hold.wait: must be an integer 1-2592000" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"hold\":{\"for\":\"pull\",\"must\":1}}]}",
	    "deadlines[0].hold.must: must be true or false" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"hold\":{\"for\":\"pull\",\"local_dir\":\"x\"}}"
	  "]}",
	    "deadlines[0].hold.local_dir: unknown key" },
	{ "{\"version\":1,\"deadlines\":[{\"id\":\"a\",\"at\":1,"
	  "\"action\":\"stop\",\"hold\":true}]}",
	    "deadlines[0].hold: must be an object" },
};

START_TEST(test_plan_parse)
{
	const struct plan_case *c = &plan_cases[_i];
	struct plan p;
	char *cause = NULL;
	int r;

	r = plan_parse(c->text, strlen(c->text), &p, &cause);
	if (c->cause == NULL)
		ck_assert_msg(r == 0, "row %d: %s", _i, cause);
	else {
		ck_assert_msg(r == -1, "row %d accepted", _i);
		ck_assert_msg(strstr(cause, c->cause) != NULL,
		    "row %d: [%s] lacks [%s]", _i, cause, c->cause);
		ck_assert_ptr_null(strchr(cause, '\n'));
	}
	plan_free(&p);
	free(cause);
}
END_TEST

/* The example's values, and the defaults of a minimal plan. */
START_TEST(test_plan_values)
{
	static const char minimal[] =
	    "{\"version\":1,\"deadlines\":[{\"id\":\"x\",\"at\":5,"
	    "\"action\":\"local\"},{\"id\":\"y\",\"at\":6,\"action\":"
	    "\"stop\",\"unless_busy\":true,\"hold\":{\"for\":\"pull\","
	    "\"must\":true}}],\"autostop\":{\"id\":\"a\","
	    "\"idle_s\":9}}";
	struct plan p;
	char *cause = NULL;

	ck_assert_int_eq(plan_parse(EXAMPLE, strlen(EXAMPLE), &p, &cause), 0);
	ck_assert_int_eq(p.generation, 7);
	ck_assert_str_eq(p.stop_command, "/usr/bin/shutdown");
	ck_assert_int_eq(p.stop_release, 0);
	ck_assert_uint_eq(p.ndeadlines, 1);
	ck_assert_str_eq(p.deadlines[0].id, "d-3f2a9c01");
	ck_assert_int_eq(p.deadlines[0].at, 1764640800);
	ck_assert_int_eq(p.deadlines[0].warn_minutes, 5);
	ck_assert_str_eq(p.deadlines[0].before_stop, "python save.py");
	ck_assert_int_eq(p.deadlines[0].unless_busy, 0);
	ck_assert_int_eq(p.deadlines[0].hold, 0);
	ck_assert_int_eq(p.has_autostop, 1);
	ck_assert_int_eq(p.autostop.idle_s, 1800);
	ck_assert_ptr_null(p.autostop.nvidia_smi);
	plan_free(&p);

	ck_assert_int_eq(plan_parse(minimal, strlen(minimal), &p, &cause), 0);
	ck_assert_int_eq(p.check_interval_s, 60);
	ck_assert_int_eq(p.stop_confirm_s, 600);
	ck_assert_ptr_null(p.stop_command);
	ck_assert_int_eq(p.deadlines[0].local, 1);
	ck_assert_int_eq(p.deadlines[0].warn_minutes, 0);
	ck_assert_int_eq(p.deadlines[0].before_stop_timeout_s, 600);
	ck_assert_int_eq(p.deadlines[0].unless_busy, 0);
	ck_assert_int_eq(p.deadlines[1].unless_busy, 1);
	ck_assert_int_eq(p.deadlines[0].hold, 0);
	ck_assert_int_eq(p.deadlines[1].hold, 1);
	ck_assert_int_eq(p.deadlines[1].hold_wait_s, 7200);
	ck_assert_int_eq(p.deadlines[1].hold_must, 1);
	ck_assert_int_eq(p.autostop.gpu_below, 5);
	ck_assert_int_eq(p.autostop.gpu_mem_mib, 1024);
	ck_assert_int_eq(p.autostop.wait_sessions, 1);
	ck_assert_int_eq(p.autostop.wait_jobs, 1);
	ck_assert_str_eq(p.autostop.progress, "~/.gpufleet/progress");
	plan_free(&p);
}
END_TEST

struct release_case {
	const char *text;
	const char *by;	   /* NULL: refused */
	const char *cause; /* what the refusal says */
};

/* D/release-ID's check: the deadline's id and a known "by", nothing else. */
static const struct release_case release_cases[] = {
	{ "{\"version\":1,\"id\":\"d-1\",\"by\":\"pulled\"}", "pulled", NULL },
	{ "{\"version\":1,\"id\":\"d-1\",\"by\":\"user\"}\n", "user", NULL },
	{ "{\"version\":1,\"id\":\"d-1\",\"by\":\"pull_failed\"}",
	    "pull_failed", NULL },
	{ "{\"version\":1,\"id\":\"d-1\",\"by\":\"cancelled\"}", "cancelled",
	    NULL },
	{ "{\"version\":1,\"id\":\"d-2\",\"by\":\"pulled\"}", NULL,
	    "id: is not this deadline's" },
	{ "{\"version\":1,\"id\":\"d-1\",\"by\":\"me\"}", NULL, "by: must be" },
	{ "{\"version\":2,\"id\":\"d-1\",\"by\":\"user\"}", NULL,
	    "version: must be an integer 1-1" },
	{ "{\"version\":1,\"id\":\"d-1\",\"by\":\"user\",\"x\":1}", NULL,
	    "x: unknown key" },
	{ "release d-1", NULL, "" },
	{ "", NULL, "" },
	{ "[]", NULL, "must be an object" },
};

START_TEST(test_release_parse)
{
	const struct release_case *c = &release_cases[_i];
	char by[16] = "", *cause = NULL;
	int r;

	r = hold_release_parse(
	    c->text, strlen(c->text), "d-1", by, sizeof by, &cause);
	if (c->by != NULL) {
		ck_assert_msg(r == 0, "row %d: %s", _i, cause);
		ck_assert_str_eq(by, c->by);
	} else {
		ck_assert_msg(r == -1, "row %d accepted", _i);
		ck_assert_ptr_nonnull(cause);
		ck_assert_msg(strstr(cause, c->cause) != NULL,
		    "row %d: [%s] lacks [%s]", _i, cause, c->cause);
		ck_assert_ptr_null(strchr(cause, '\n'));
	}
	free(cause);
}
END_TEST

/* A fresh directory under a temporary one; caller frees. */
static char *
tmpdir(void)
{
	char tmpl[] = "/tmp/gpufleet-plan.XXXXXX", *dir;

	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	dir = malloc(strlen(tmpl) + 16);
	snprintf(dir, strlen(tmpl) + 16, "%s/a/b", tmpl);
	return dir;
}

/* release writes D/release-ID as the watcher reads it; none, garbage. */
START_TEST(test_release_file)
{
	char *dir = tmpdir(),
	     *argv[] = { "release", "--dir", dir, "--id", "d-1", "--by", "user",
		     NULL };
	char by[16] = "", *cause = NULL, path[256];
	struct stat sb;
	FILE *f;

	ck_assert_int_eq(
	    hold_release_read(dir, "d-1", by, sizeof by, &cause), 0);
	ck_assert_int_eq(hold_main(7, argv), 0);
	snprintf(path, sizeof path, "%s/release-d-1", dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	ck_assert_int_eq(
	    hold_release_read(dir, "d-1", by, sizeof by, &cause), 1);
	ck_assert_str_eq(by, "user");
	hold_release_remove(dir, "d-1");
	ck_assert_int_eq(
	    hold_release_read(dir, "d-1", by, sizeof by, &cause), 0);

	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs("garbage\n", f);
	fclose(f);
	ck_assert_int_eq(
	    hold_release_read(dir, "d-1", by, sizeof by, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	free(cause);

	argv[6] = "nobody"; /* usage */
	ck_assert_int_eq(hold_main(7, argv), 2);
	argv[6] = "user";
	argv[4] = "d 1";
	ck_assert_int_eq(hold_main(7, argv), 2);
	free(dir);
}
END_TEST

/* Compare-and-swap on the generation; the modes of what it creates. */
START_TEST(test_plan_set)
{
	static const char v1[] = "{\"version\":1,\"generation\":99}";
	static const char bad[] = "{\"version\":1,\"stop\":3}";
	struct stat sb;
	struct plan p;
	struct buf raw = { NULL, 0, 0 };
	char *dir = tmpdir(), *cause = NULL, path[256];
	long long gen = -1;

	umask(022);
	ck_assert_int_eq(plan_set(dir, 0, v1, strlen(v1), &gen, &cause), 0);
	ck_assert_int_eq(gen, 1);
	ck_assert_int_eq(stat(dir, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0700);
	snprintf(path, sizeof path, "%s/plan.json", dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	snprintf(path, sizeof path, "%s/plan.lock", dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);

	/* The input's generation is replaced, after "version". */
	ck_assert_int_eq(plan_load(dir, &p, &raw, &cause), 0);
	ck_assert_str_eq(raw.data, "{\"version\":1,\"generation\":1}\n");
	plan_free(&p);
	buf_free(&raw);

	/* A writer that read generation 0 is refused and changes nothing. */
	ck_assert_int_eq(plan_set(dir, 0, v1, strlen(v1), &gen, &cause),
	    PLAN_EXIT_GENERATION);
	ck_assert_int_eq(gen, 1);
	ck_assert_int_eq(plan_set(dir, 2, v1, strlen(v1), &gen, &cause),
	    PLAN_EXIT_GENERATION);
	ck_assert_int_eq(plan_set(dir, 1, v1, strlen(v1), &gen, &cause), 0);
	ck_assert_int_eq(gen, 2);

	/* Invalid: refused before anything is touched. */
	ck_assert_int_eq(plan_set(dir, 2, bad, strlen(bad), &gen, &cause),
	    PLAN_EXIT_INVALID);
	ck_assert_ptr_nonnull(strstr(cause, "stop: must be an object"));
	free(cause);
	cause = NULL;
	ck_assert_int_eq(plan_load(dir, &p, NULL, &cause), 0);
	ck_assert_int_eq(p.generation, 2);
	plan_free(&p);
	free(dir);
}
END_TEST

/* Append a raw line to the journal file, as a crash might leave it. */
static void
append_raw(const char *dir, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof path, "%s/journal.jsonl", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "a"));
	fputs(text, f);
	fclose(f);
}

/* Append one "note" entry with a number. */
static void
append_note(struct journal *j, long long n)
{
	struct jsonw w;

	journal_begin(j, &w, 1000 + n, "note");
	jsonw_int(&w, "n", n);
	ck_assert_int_eq(journal_end(j, &w, NULL), 0);
	jsonw_free(&w);
}

/* The report's journal section for a cursor, parsed back. */
static void
report_journal(
    const char *dir, const char *epoch, long long seq, struct jsonr *v)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_object_begin(&w, NULL);
	journal_report(&w, dir, epoch, seq);
	jsonw_object_end(&w);
	ck_assert_int_eq(jsonr_parse(w.out.data, w.out.len, v, NULL), 0);
	jsonw_free(&w);
}

START_TEST(test_journal)
{
	struct journal j;
	struct jsonr v;
	struct stat sb;
	char *dir = tmpdir(), *cause = NULL, epoch[17], path[256];
	const struct jsonr *a;
	long long seq;
	int i;

	ck_assert_int_eq(plan_mkdir(dir, &cause), 0);
	report_journal(dir, NULL, 0, &v);
	ck_assert_int_eq(jsonr_get(&v, "journal_epoch")->type, JSONR_NULL);
	jsonr_free(&v);

	ck_assert_int_eq(journal_open(&j, dir, 1000, &cause), 0);
	ck_assert_int_eq(j.seq, 1); /* the "journal" line */
	memcpy(epoch, j.epoch, sizeof epoch);
	ck_assert_uint_eq(strspn(epoch, "0123456789abcdef"), 16);
	append_note(&j, 2);
	journal_close(&j);
	snprintf(path, sizeof path, "%s/journal.jsonl", dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);

	/* A torn line, a line of another epoch: skipped; seq goes on. */
	append_raw(dir, "{\"epoch\":\"");
	append_raw(dir,
	    "\n{\"epoch\":\"ffffffffffffffff\",\"seq\":50,"
	    "\"time\":1,\"event\":\"x\"}\n");
	ck_assert_int_eq(journal_open(&j, dir, 1000, &cause), 0);
	ck_assert_str_eq(j.epoch, epoch);
	ck_assert_int_eq(j.seq, 2);
	append_note(&j, 3);
	for (i = 4; i < 300; i++)
		append_note(&j, i);
	journal_close(&j);

	/* After the cursor: entries 3.., at most 256, and "more". */
	report_journal(dir, epoch, 2, &v);
	ck_assert_str_eq(jsonr_str(&v, "journal_epoch"), epoch);
	a = jsonr_get(&v, "journal");
	ck_assert_uint_eq(a->n, 256);
	ck_assert_int_eq(jsonr_int(&a->items[0], "seq", &seq), 0);
	ck_assert_int_eq(seq, 3);
	ck_assert_int_eq(jsonr_get(&v, "journal_more")->i, 1);
	jsonr_free(&v);
	report_journal(dir, epoch, 290, &v);
	a = jsonr_get(&v, "journal");
	ck_assert_uint_eq(a->n, 9);
	ck_assert_int_eq(jsonr_get(&v, "journal_more")->i, 0);
	jsonr_free(&v);

	/* Another epoch's cursor: from the start. */
	report_journal(dir, "0000000000000000", 290, &v);
	a = jsonr_get(&v, "journal");
	ck_assert_int_eq(jsonr_int(&a->items[0], "seq", &seq), 0);
	ck_assert_int_eq(seq, 1);
	ck_assert_str_eq(jsonr_str(&a->items[0], "event"), "journal");
	jsonr_free(&v);
	free(dir);
}
END_TEST

/* Variables from PID 1's environment, only where the watcher lacks them. */
START_TEST(test_shell_env)
{
	const char *data = getenv("GPUFLEET_TEST_DATA");
	char proc[512], **env;
	int seen[6] = { 0 };
	size_t i;

	ck_assert_ptr_nonnull(data);
	snprintf(proc, sizeof proc, "%s/agent/proc/environ", data);
	setenv("UUID", "mine", 1);
	unsetenv("CONTAINER_ID");
	unsetenv("CONTAINER_API_KEY");
	unsetenv("RUNPOD_POD_ID");
	unsetenv("RUNPOD_API_KEY");
	env = shell_env(proc);
	for (i = 0; env[i] != NULL; i++) {
		seen[0] += strcmp(env[i], "CONTAINER_ID=4242") == 0;
		seen[1] += strcmp(env[i], "CONTAINER_API_KEY=vast-key") == 0;
		seen[2] += strcmp(env[i], "RUNPOD_POD_ID=pod-7") == 0;
		seen[3] += strncmp(env[i], "UUID=", 5) == 0;
		seen[4] += strcmp(env[i], "UUID=mine") == 0;
		seen[5] += strncmp(env[i], "OTHER=", 6) == 0 ||
		    strncmp(env[i], "RUNPOD_API_KEY", 14) == 0 ||
		    strcmp(env[i], "PATH=/fixture/bin") == 0;
	}
	ck_assert_int_eq(seen[0], 1);
	ck_assert_int_eq(seen[1], 1);
	ck_assert_int_eq(seen[2], 1);
	ck_assert_int_eq(seen[3], 1);
	ck_assert_int_eq(seen[4], 1);
	ck_assert_int_eq(seen[5], 0);
	shell_env_free(env);
}
END_TEST

/* Run a command: its status, the last SHELL_TAIL bytes of its output. */
START_TEST(test_shell_run)
{
	char *argv[] = { "/bin/sh", "-c",
		"i=0; while [ $i -lt 300 ]; do printf 0123456789; "
		"i=$((i+1)); done; echo; pwd; echo err >&2; exit 3",
		NULL };
	extern char **environ;
	struct shell sh;
	char *cause = NULL;

	setenv("HOME", "/tmp", 1);
	ck_assert_int_eq(shell_start(&sh, argv, environ, NULL, &cause), 0);
	shell_release(&sh);
	shell_wait(&sh, 60000, NULL);
	ck_assert(sh.reaped);
	ck_assert(WIFEXITED(sh.status));
	ck_assert_int_eq(WEXITSTATUS(sh.status), 3);
	ck_assert_uint_eq(sh.tail_len, SHELL_TAIL);
	ck_assert(memcmp(sh.tail + SHELL_TAIL - 10, "/tmp\nerr\n", 9) == 0 ||
	    memcmp(sh.tail + SHELL_TAIL - 9, "/tmp\nerr\n", 9) == 0);
	ck_assert_int_eq(sh.timed_out, 0);
	shell_close(&sh);
}
END_TEST

/* A gate closed without release runs nothing; a timeout kills. */
START_TEST(test_shell_gate)
{
	char mark[] = "/tmp/gpufleet-gate.XXXXXX", cmd[128];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	char *sleeper[] = { "/bin/sh", "-c", "sleep 60", NULL };
	extern char **environ;
	struct shell sh;
	int fd;

	ck_assert_int_ne(fd = mkstemp(mark), -1);
	close(fd);
	unlink(mark);
	snprintf(cmd, sizeof cmd, "touch %s", mark);
	ck_assert_int_eq(shell_start(&sh, argv, environ, NULL, NULL), 0);
	shell_close(&sh); /* the watcher died before journaling */
	ck_assert(sh.reaped);
	ck_assert(WIFEXITED(sh.status));
	ck_assert_int_eq(WEXITSTATUS(sh.status), 127);
	ck_assert_int_eq(access(mark, F_OK), -1);

	ck_assert_int_eq(shell_start(&sh, sleeper, environ, NULL, NULL), 0);
	ck_assert_int_ge(shell_pid_start("/proc", sh.pid), 0);
	shell_release(&sh);
	shell_wait(&sh, 100, NULL);
	ck_assert(sh.reaped);
	ck_assert_int_eq(sh.timed_out, 1);
	ck_assert(WIFSIGNALED(sh.status));
	shell_close(&sh);
	ck_assert_int_eq(shell_pid_start("/proc", sh.pid), -1);
}

/* A zombie is not a running stop command. */
START_TEST(test_pid_zombie)
{
	pid_t pid = fork();
	char path[64];

	ck_assert_int_ne(pid, -1);
	if (pid == 0)
		_exit(0);
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	/* Until it has exited it is alive; then a zombie until reaped. */
	while (shell_pid_start("/proc", pid) != -1)
		usleep(1000);
	ck_assert_int_eq(access(path, F_OK), 0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}
END_TEST

/* GPUFLEET_AGENT_CONTAINER_START names the file container_start is in. */
START_TEST(test_container_start_knob)
{
	char path[] = "/tmp/gpufleet-cs.XXXXXX";
	int fd;

	ck_assert_int_ne(fd = mkstemp(path), -1);
	ck_assert_int_eq(write(fd, "1764640000\n", 11), 11);
	close(fd);
	setenv("GPUFLEET_AGENT_CONTAINER_START", path, 1);
	ck_assert_int_eq(host_container_start_now("/proc"), 1764640000);
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, "soon\n", 5), 5);
	close(fd);
	ck_assert_int_eq(host_container_start_now("/proc"), -1);
	unlink(path);
	ck_assert_int_eq(host_container_start_now("/proc"), -1);
	unsetenv("GPUFLEET_AGENT_CONTAINER_START");
	ck_assert_int_ge(host_container_start_now("/proc"), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_plan");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_plan_parse, 0,
	    (int)(sizeof plan_cases / sizeof plan_cases[0]));
	tcase_add_test(tc, test_plan_values);
	tcase_add_loop_test(tc, test_release_parse, 0,
	    sizeof release_cases / sizeof release_cases[0]);
	tcase_add_test(tc, test_release_file);
	tcase_add_test(tc, test_plan_set);
	tcase_add_test(tc, test_journal);
	tcase_add_test(tc, test_shell_env);
	tcase_add_test(tc, test_shell_run);
	tcase_add_test(tc, test_shell_gate);
	tcase_add_test(tc, test_container_start_knob);
	tcase_add_test(tc, test_pid_zombie);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
