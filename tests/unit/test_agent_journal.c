/*
 * The watcher's journal read without reading all of it (agent/journal.c):
 * the entries after a cursor found by bisecting the file, the last seq
 * from its tail, a replay that starts from the state cached in
 * D/journal.state and never applies an entry twice; torn and overlong
 * lines are skipped as before.
 */
#include <check.h>
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

int
main(void)
{
	Suite *s = suite_create("agent_journal");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_after);
	tcase_add_test(tc, test_open);
	tcase_add_test(tc, test_replay_state);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
