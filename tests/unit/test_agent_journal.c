/*
 * The watcher's journal read without reading all of it (agent/journal.c):
 * the entries after a cursor found by bisecting the file, the last seq
 * from its tail, a replay that starts from the state cached in
 * D/journal.state and never applies an entry twice; torn and overlong
 * lines are skipped as before. The journal rotated into segments: every
 * reader reads across them, none is removed before the controller
 * acknowledged it, and what is acknowledged goes, so the files stay small.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "agent.h"

#define EPOCH "5f0c3a9e1b2d4c6a"
#define N     20000

static char dir[64], path[96], spath[96];

static void
setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/gpufleet-journal.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/journal.jsonl", dir);
	snprintf(spath, sizeof spath, "%s/journal.state", dir);
}

static void
teardown(void)
{
	char cmd[96];

	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/*
 * A journal of n entries as the watcher writes it ("busy" of a-1 but
 * every 1000th, "stopping" of d-1), a torn line, an overlong one and a
 * line of another epoch among them.
 */
static void
write_journal(const char *epoch, int n)
{
	FILE *f = fopen(path, "w");
	char *big;
	int i;

	ck_assert_ptr_nonnull(f);
	big = malloc(JSONR_MAXSIZE + 10);
	memset(big, 'x', JSONR_MAXSIZE + 9);
	big[JSONR_MAXSIZE + 9] = '\0';
	fprintf(f,
	    "{\"epoch\":\"%s\",\"seq\":1,\"time\":1,\"event\":\"journal\"}\n",
	    epoch);
	for (i = 2; i <= n; i++) {
		if (i == 777)
			fprintf(f, "{\"epoch\":\"%s\",\"seq\":77\n", epoch);
		if (i == 5555)
			fprintf(f, "{\"pad\":\"%s\"}\n", big);
		if (i == 9999)
			fprintf(f,
			    "{\"epoch\":\"00000000000000ff\",\"seq\":1,"
			    "\"time\":1,\"event\":\"busy\"}\n");
		fprintf(f,
		    "{\"epoch\":\"%s\",\"seq\":%d,\"time\":%d,\"event\":\"%s\","
		    "\"id\":\"%s\",\"reason\":\"gpu_util\"}\n",
		    epoch, i, i, i % 1000 == 0 ? "stopping" : "busy",
		    i % 1000 == 0 ? "d-1" : "a-1");
	}
	free(big);
	ck_assert_int_eq(fclose(f), 0);
}

/* The report's journal keys after epoch:seq, as JSON. */
static json_t *
report_after(const char *epoch, long long seq)
{
	struct jsonw w;
	json_t *o;

	jsonw_init(&w);
	jsonw_object_begin(&w, NULL);
	journal_report(&w, dir, epoch, seq);
	jsonw_object_end(&w);
	o = json_loadb(w.out.data, w.out.len, 0, NULL);
	jsonw_free(&w);
	ck_assert_ptr_nonnull(o);
	return o;
}

/* The entries after any cursor are those, in order, up to the cap. */
START_TEST(test_after)
{
	static const long long cursors[] = { 1, 2, 776, 777, 5554, 5555, 9998,
		9999, 12345, N - 300, N - 1, N, N + 5 };
	json_t *o, *a;
	size_t i, k, want;

	write_journal(EPOCH, N);
	for (k = 0; k < sizeof cursors / sizeof cursors[0]; k++) {
		o = report_after(EPOCH, cursors[k]);
		a = json_object_get(o, "journal");
		want = cursors[k] >= N ? 0
		    : N - cursors[k] > JOURNAL_REPORT_ENTRIES
		    ? JOURNAL_REPORT_ENTRIES
		    : (size_t)(N - cursors[k]);
		ck_assert_uint_eq(json_array_size(a), want);
		for (i = 0; i < json_array_size(a); i++)
			ck_assert_int_eq(json_integer_value(json_object_get(
					     json_array_get(a, i), "seq")),
			    cursors[k] + 1 + (long long)i);
		ck_assert_int_eq(
		    json_is_true(json_object_get(o, "journal_more")),
		    N - cursors[k] > JOURNAL_REPORT_ENTRIES);
		ck_assert_str_eq(
		    json_string_value(json_object_get(o, "journal_epoch")),
		    EPOCH);
		json_decref(o);
	}
	/* Far behind: the stops past the page read ahead. */
	o = report_after(EPOCH, 1);
	a = json_object_get(o, "journal_urgent");
	ck_assert_uint_eq(json_array_size(a), N / 1000);
	for (i = 0; i < json_array_size(a); i++) {
		ck_assert_str_eq(json_string_value(json_object_get(
				     json_array_get(a, i), "event")),
		    "stopping");
		ck_assert_int_eq(json_integer_value(json_object_get(
				     json_array_get(a, i), "seq")),
		    1000 * (long long)(i + 1));
	}
	json_decref(o);
	o = report_after(EPOCH, N - 2500);
	a = json_object_get(o, "journal_urgent");
	ck_assert_uint_eq(json_array_size(a), 3); /* 18000 on */
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_array_get(a, 0), "seq")),
	    N - 2000);
	json_decref(o);
	o = report_after(EPOCH, N - 10);
	ck_assert_uint_eq(
	    json_array_size(json_object_get(o, "journal_urgent")), 0);
	json_decref(o);
	/* Another epoch's cursor: from the start. */
	o = report_after("00000000000000ff", 9000);
	a = json_object_get(o, "journal");
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_array_get(a, 0), "seq")),
	    1);
	json_decref(o);
}
END_TEST

/* The writer goes on from the last seq, read from the tail. */
START_TEST(test_open)
{
	struct journal j;
	struct jsonw w;
	FILE *f;
	char *cause = NULL;

	write_journal(EPOCH, N);
	/* A torn last line does not count. */
	f = fopen(path, "a");
	fprintf(f, "{\"epoch\":\"%s\",\"seq\":%d,\"ti", EPOCH, N + 1);
	fclose(f);
	ck_assert_int_eq(journal_open(&j, dir, 100, &cause), 0);
	ck_assert_str_eq(j.epoch, EPOCH);
	ck_assert_int_eq(j.seq, N);
	journal_close(&j);
	/* A journal with one line. */
	unlink(path);
	ck_assert_int_eq(journal_open(&j, dir, 100, &cause), 0);
	ck_assert_int_eq(j.seq, 1);
	journal_begin(&j, &w, 101, "exiting");
	ck_assert_int_eq(journal_end(&j, &w, &cause), 0);
	jsonw_free(&w);
	journal_close(&j);
	ck_assert_int_eq(journal_open(&j, dir, 102, &cause), 0);
	ck_assert_int_eq(j.seq, 2);
	journal_close(&j);
}
END_TEST

/* Blank out (spaces) the journal line that holds needle. */
static void
blank(const char *needle)
{
	FILE *f = fopen(path, "r+");
	char *text, *at, *end;
	long size;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	text = malloc((size_t)size + 1);
	rewind(f);
	ck_assert_int_eq(fread(text, 1, (size_t)size, f), (size_t)size);
	text[size] = '\0';
	ck_assert_ptr_nonnull(at = strstr(text, needle));
	while (at > text && at[-1] != '\n')
		at--;
	end = strchr(at, '\n');
	memset(at, ' ', (size_t)(end - at));
	rewind(f);
	ck_assert_int_eq(fwrite(text, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	free(text);
}

/* d-1's stop attempts after a replay. */
static int
attempts(void)
{
	struct judge_state js = { NULL, 0, 0 };
	struct judge_fire *f;
	char epoch[JOURNAL_EPOCH_LEN + 1];
	int n;

	ck_assert_int_eq(journal_replay(dir, epoch, &js), 0);
	f = judge_find(&js, "d-1", 0);
	n = f != NULL ? f->attempts : -1;
	judge_state_free(&js);
	return n;
}

/*
 * A replay caches its state; the next one starts there and applies what
 * was appended since once; a cache that does not match the journal (a
 * new epoch, a journal cut short) is ignored.
 */
START_TEST(test_replay_state)
{
	FILE *f;

	write_journal(EPOCH, N);
	ck_assert_int_eq(access(spath, F_OK), -1);
	ck_assert_int_eq(attempts(), N / 1000);
	ck_assert_int_eq(access(spath, F_OK), 0);
	/* The cache is what is read: an early entry blanked out since
	   still counts. */
	blank("\"seq\":1000,");
	ck_assert_int_eq(attempts(), N / 1000);
	f = fopen(path, "a");
	fprintf(f,
	    "{\"epoch\":\"%s\",\"seq\":%d,\"time\":1,\"event\":\"stopping\","
	    "\"id\":\"d-1\"}\n",
	    EPOCH, N + 1);
	fclose(f);
	ck_assert_int_eq(attempts(), N / 1000 + 1);
	ck_assert_int_eq(attempts(), N / 1000 + 1);
	/* A new journal: the cache is not its state. */
	write_journal("00000000000000bb", 3000);
	ck_assert_int_eq(attempts(), 3);
	/* Cut short below the cached offset: replayed from the start. */
	write_journal(EPOCH, N);
	ck_assert_int_eq(attempts(), N / 1000);
	write_journal(EPOCH, 2500);
	ck_assert_int_eq(attempts(), 2);
}
END_TEST

/* As the watcher does (watch_log): append entry i, apply it, rotate. */
static void
append(struct journal *j, struct judge_state *js, int i)
{
	struct jsonw w;
	struct jsonr e;
	char *cause = NULL;

	journal_begin(j, &w, 1000 + i, i % 100 == 0 ? "stopping" : "busy");
	jsonw_string(&w, "id", i % 100 == 0 ? "d-1" : "a-1");
	jsonw_string(&w, "reason", "gpu_util");
	ck_assert_int_eq(journal_end(j, &w, &cause), 0);
	ck_assert_int_eq(jsonr_parse(w.out.data, w.out.len, &e, NULL), 0);
	judge_replay(js, &e);
	jsonr_free(&e);
	jsonw_free(&w);
	journal_rotate(j, js, 2000000000);
}

/* The journal's files in dir: how many, and their bytes in *bytes. */
static int
files(long long *bytes)
{
	struct dirent *de;
	char p[512];
	FILE *f;
	DIR *d = opendir(dir);
	int n = 0;

	*bytes = 0;
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "journal-", 8) != 0 &&
		    strcmp(de->d_name, "journal.jsonl") != 0)
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
		ck_assert_ptr_nonnull(f = fopen(p, "r"));
		fseek(f, 0, SEEK_END);
		*bytes += ftell(f);
		fclose(f);
		n++;
	}
	closedir(d);
	return n;
}

/* journal_scan_all callback: count the entries and check their order. */
static int
count_fn(const char *line, size_t len, const struct jsonr *e, void *arg)
{
	long long *n = arg, seq;

	(void)line;
	(void)len;
	ck_assert_int_eq(jsonr_int(e, "seq", &seq), 0);
	ck_assert_int_eq(seq, *n + 1);
	(*n)++;
	return 0;
}

/* The entries of the whole journal, segments and all, in seq order. */
static long long
entries(void)
{
	char epoch[JOURNAL_EPOCH_LEN + 1];
	long long n = 0;

	ck_assert_int_eq(journal_scan_all(dir, epoch, count_fn, &n), 0);
	return n;
}

/*
 * Past the segment size the journal goes on in a new file; with no
 * acknowledgement every entry is kept, and every reader reads across
 * the segments: the report from any cursor, the replay, the writer's
 * seq after a crash between the rename and the new file.
 */
START_TEST(test_segments_unacked)
{
	struct judge_state js = { NULL, 0, 0 };
	struct journal j;
	json_t *o, *a;
	long long bytes, k;
	char *cause = NULL, seg[256];
	int i;

	setenv(JOURNAL_SEGMENT_ENV, "4096", 1);
	setenv(JOURNAL_KEEP_ENV, "0", 1);
	ck_assert_int_eq(journal_open(&j, dir, 1000, &cause), 0);
	for (i = 2; i <= 1500; i++)
		append(&j, &js, i);
	ck_assert_int_gt(files(&bytes), 20);
	ck_assert_int_eq(entries(), 1500);
	ck_assert_int_eq(attempts(), 15);
	/* From cursors in old segments, at their edges, in the active one. */
	for (k = 1; k <= 1500; k += 97) {
		o = report_after(j.epoch, k);
		a = json_object_get(o, "journal");
		ck_assert_uint_eq(json_array_size(a),
		    1500 - k < JOURNAL_REPORT_ENTRIES ? (size_t)(1500 - k)
						      : JOURNAL_REPORT_ENTRIES);
		for (i = 0; i < (int)json_array_size(a); i++)
			ck_assert_int_eq(
			    json_integer_value(json_object_get(
				json_array_get(a, (size_t)i), "seq")),
			    k + 1 + i);
		json_decref(o);
	}
	/* The report's cursor acknowledges; no rotation since: all kept. */
	ck_assert_int_eq(entries(), 1500);
	/* A crash after the rename, before the new file: nothing lost, the
	   epoch and seq go on. */
	journal_close(&j);
	snprintf(seg, sizeof seg, "%s/journal-%020d.jsonl", dir, 1500);
	ck_assert_int_eq(rename(path, seg), 0);
	ck_assert_int_eq(journal_open(&j, dir, 1000, &cause), 0);
	ck_assert_int_eq(j.seq, 1500);
	append(&j, &js, 1501);
	ck_assert_int_eq(entries(), 1501);
	journal_close(&j);
	judge_state_free(&js);
}
END_TEST

/*
 * Acknowledged segments go (past the keep time): the files stay under a
 * bound however many entries are written, and the replay still counts
 * every stop (the state cached at the rotation); not yet kept long
 * enough, they stay.
 */
START_TEST(test_segments_acked)
{
	struct judge_state js = { NULL, 0, 0 };
	struct journal j;
	long long bytes, most = 0;
	char *cause = NULL;
	int i;

	setenv(JOURNAL_SEGMENT_ENV, "4096", 1);
	setenv(JOURNAL_KEEP_ENV, "0", 1);
	ck_assert_int_eq(journal_open(&j, dir, 1000, &cause), 0);
	for (i = 2; i <= 4000; i++) {
		append(&j, &js, i);
		if (i % 100 == 0)
			json_decref(report_after(j.epoch, j.seq));
		if (i % 10 == 0 && (files(&bytes), bytes > most))
			most = bytes;
	}
	/* 100 entries unacknowledged at most, a segment of slack (of the
	   380 KB written). */
	ck_assert_int_lt(most, 24 * 1024);
	ck_assert_int_eq(attempts(), 40);
	/* Kept 10 years: acknowledged or not, nothing goes. */
	setenv(JOURNAL_KEEP_ENV, "315360000", 1);
	files(&bytes);
	for (i = 4001; i <= 5000; i++) {
		append(&j, &js, i);
		if (i % 100 == 0)
			json_decref(report_after(j.epoch, j.seq));
	}
	ck_assert_int_ge(files(&most), 1000 * 90 / 4096);
	ck_assert_int_gt(most, bytes + 1000 * 90);
	ck_assert_int_eq(attempts(), 50);
	journal_close(&j);
	judge_state_free(&js);
	unsetenv(JOURNAL_SEGMENT_ENV);
	unsetenv(JOURNAL_KEEP_ENV);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_journal");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	/* Thousands of fsynced appends: no bound on a loaded machine's disk. */
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_after);
	tcase_add_test(tc, test_open);
	tcase_add_test(tc, test_replay_state);
	tcase_add_test(tc, test_segments_unacked);
	tcase_add_test(tc, test_segments_acked);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
