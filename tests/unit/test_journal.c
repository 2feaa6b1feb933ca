/*
 * The report's watcher section and its journal entries
 * (controller/report.c): everything from an instance is untrusted, so
 * each entry is checked alone and the section never refuses the report.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "report.h"
#include "xmalloc.h"

#define NOW 1764590400LL /* 2025-12-01T12:00:00Z */
#define EP  "\"epoch\":\"5f0c3a9e1b2d4c6a\""

static const struct {
	const char *json;
	const char *event; /* stored event, or NULL: refused */
	const char *id;	   /* stored id, or NULL */
	const char *error; /* part of the reason when refused */
} entry_cases[] = {
	{ "{" EP ",\"seq\":12,\"time\":1764590000,\"event\":\"warned\","
	  "\"id\":\"d-3f2a9c01\",\"users\":2}",
	    "warned", "d-3f2a9c01", NULL },
	{ "{" EP ",\"seq\":1,\"time\":1764590000,\"event\":\"journal\"}",
	    "journal", NULL, NULL },
	{ "{" EP ",\"seq\":3,\"time\":1764590000,\"event\":\"firing\","
	  "\"id\":\"a-77c1e0d2@1764500000\",\"reason\":\"idle\"}",
	    "firing", "a-77c1e0d2@1764500000", NULL },
	/* A name this build does not know is kept as "unknown". */
	{ "{" EP ",\"seq\":4,\"time\":1764590000,\"event\":\"teleported\"}",
	    "unknown", NULL, NULL },
	{ "{" EP ",\"seq\":4,\"time\":1764590000,\"event\":\"stop_failed_"
	  "and_more_than_sixteen\"}",
	    "unknown", NULL, NULL },
	{ "{" EP ",\"seq\":5,\"time\":1764590000,\"event\":\"armed\","
	  "\"id\":null}",
	    "armed", NULL, NULL },
	/* Garbage. */
	{ "[1,2]", NULL, NULL, "not an object" },
	{ "\"stopping\"", NULL, NULL, "not an object" },
	{ "{\"seq\":1,\"time\":1764590000,\"event\":\"plan\"}", NULL, NULL,
	    "'epoch'" },
	{ "{\"epoch\":\"5f0c3a9e1b2d4c6\",\"seq\":1,\"time\":1764590000,"
	  "\"event\":\"plan\"}",
	    NULL, NULL, "'epoch'" },
	{ "{\"epoch\":\"5f0c3a9e1b2d4c6z\",\"seq\":1,\"time\":1764590000,"
	  "\"event\":\"plan\"}",
	    NULL, NULL, "'epoch'" },
	{ "{\"epoch\":7,\"seq\":1,\"time\":1764590000,\"event\":\"plan\"}",
	    NULL, NULL, "'epoch'" },
	{ "{" EP ",\"time\":1764590000,\"event\":\"plan\"}", NULL, NULL,
	    "'seq'" },
	{ "{" EP ",\"seq\":0,\"time\":1764590000,\"event\":\"plan\"}", NULL,
	    NULL, "'seq'" },
	{ "{" EP ",\"seq\":-3,\"time\":1764590000,\"event\":\"plan\"}", NULL,
	    NULL, "'seq'" },
	{ "{" EP ",\"seq\":\"1\",\"time\":1764590000,\"event\":\"plan\"}", NULL,
	    NULL, "'seq'" },
	{ "{" EP ",\"seq\":9007199254740993,\"time\":1764590000,"
	  "\"event\":\"plan\"}",
	    NULL, NULL, "'seq'" },
	/* Times outside 2000 .. a day from now. */
	{ "{" EP ",\"seq\":1,\"time\":946684799,\"event\":\"plan\"}", NULL,
	    NULL, "'time'" },
	{ "{" EP ",\"seq\":1,\"time\":1764676801,\"event\":\"plan\"}", NULL,
	    NULL, "'time'" },
	{ "{" EP ",\"seq\":1,\"event\":\"plan\"}", NULL, NULL, "'time'" },
	{ "{" EP ",\"seq\":1,\"time\":1764590000}", NULL, NULL, "'event'" },
	{ "{" EP ",\"seq\":1,\"time\":1764590000,\"event\":42}", NULL, NULL,
	    "'event'" },
	/* Ids: 1-64 of [A-Za-z0-9._@-], nothing else. */
	{ "{" EP ",\"seq\":1,\"time\":1764590000,\"event\":\"armed\","
	  "\"id\":\"\"}",
	    NULL, NULL, "'id'" },
	{ "{" EP ",\"seq\":1,\"time\":1764590000,\"event\":\"armed\","
	  "\"id\":\"d-1; rm -rf /\"}",
	    NULL, NULL, "'id'" },
	{ "{" EP ",\"seq\":1,\"time\":1764590000,\"event\":\"armed\","
	  "\"id\":\"d-\\u001b[31m\"}",
	    NULL, NULL, "'id'" },
	{ "{" EP ",\"seq\":1,\"time\":1764590000,\"event\":\"armed\","
	  "\"id\":\"d-1\\u0000x\"}",
	    NULL, NULL, "'id'" },
	{ "{" EP ",\"seq\":1,\"time\":1764590000,\"event\":\"armed\","
	  "\"id\":\"0123456789012345678901234567890123456789012345678901234567"
	  "890123\"}",
	    "armed",
	    "0123456789012345678901234567890123456789012345678901234567890123",
	    NULL },
	{ "{" EP ",\"seq\":1,\"time\":1764590000,\"event\":\"armed\","
	  "\"id\":\"0123456789012345678901234567890123456789012345678901234567"
	  "8901234\"}",
	    NULL, NULL, "'id'" },
	{ "{" EP ",\"seq\":1,\"time\":1764590000,\"event\":\"armed\","
	  "\"id\":17}",
	    NULL, NULL, "'id'" },
};

START_TEST(test_entry)
{
	struct report_entry e;
	json_t *o = json_loads(
	    entry_cases[_i].json, JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL);
	char *why = NULL;
	int r;

	ck_assert_ptr_nonnull(o);
	r = report_entry_check(o, NOW, &e, &why);
	if (entry_cases[_i].event == NULL) {
		ck_assert_int_eq(r, -1);
		ck_assert_ptr_nonnull(why);
		ck_assert_msg(strstr(why, entry_cases[_i].error) != NULL,
		    "'%s' lacks '%s'", why, entry_cases[_i].error);
		free(why);
	} else {
		ck_assert_int_eq(r, 0);
		ck_assert_str_eq(e.event, entry_cases[_i].event);
		if (entry_cases[_i].id == NULL)
			ck_assert_ptr_null(e.id);
		else
			ck_assert_str_eq(e.id, entry_cases[_i].id);
		ck_assert_str_eq(e.epoch, "5f0c3a9e1b2d4c6a");
		ck_assert_ptr_nonnull(e.entry);
		report_entry_free(&e);
	}
	json_decref(o);
}
END_TEST

/* An entry over REPORT_ENTRY_MAX bytes is refused, one at it is kept. */
START_TEST(test_entry_oversized)
{
	struct report_entry e;
	char *big, *why = NULL;
	json_t *o;
	size_t base;

	o = json_pack("{s:s, s:i, s:I, s:s, s:s}", "epoch", "5f0c3a9e1b2d4c6a",
	    "seq", 1, "time", (json_int_t)1764590000, "event", "stop_result",
	    "output", "");
	big = json_dumps(o, JSON_COMPACT);
	base = strlen(big);
	free(big);
	big = xcalloc(1, REPORT_ENTRY_MAX + 2);
	memset(big, 'x', REPORT_ENTRY_MAX - base);
	json_object_set_new(o, "output", json_string(big));
	ck_assert_int_eq(report_entry_check(o, NOW, &e, &why), 0);
	ck_assert_uint_eq(strlen(e.entry), REPORT_ENTRY_MAX);
	report_entry_free(&e);
	memset(big, 'x', REPORT_ENTRY_MAX - base + 1);
	json_object_set_new(o, "output", json_string(big));
	ck_assert_int_eq(report_entry_check(o, NOW, &e, &why), -1);
	ck_assert_ptr_nonnull(strstr(why, "larger than"));
	free(why);
	free(big);
	json_decref(o);
}
END_TEST

static const struct {
	const char *json;
	const char *state;
	int64_t generation;
	int64_t pid;
	size_t njournal, nskipped;
	int has_plan, has_error, more;
	const char *epoch;
} section_cases[] = {
	{ "{\"state\":\"running\",\"pid\":4242,\"current\":true,\"error\":null,"
	  "\"generation\":7,\"plan\":{\"version\":1,\"generation\":7},"
	  "\"journal_epoch\":\"5f0c3a9e1b2d4c6a\",\"journal\":[{" EP
	  ",\"seq\":2,\"time\":1764590000,\"event\":\"armed\",\"id\":\"d-1\"}],"
	  "\"journal_more\":false}",
	    "running", 7, 4242, 1, 0, 1, 0, 0, "5f0c3a9e1b2d4c6a" },
	{ "{\"state\":\"none\",\"pid\":null,\"generation\":0,\"plan\":null,"
	  "\"journal_epoch\":null,\"journal\":[],\"journal_more\":false}",
	    "none", 0, 0, 0, 0, 0, 0, 0, "" },
	/* Bad entries are left out, good ones kept; more is kept. */
	{ "{\"state\":\"down\",\"generation\":3,\"journal\":[7,{" EP
	  ",\"seq\":2,\"time\":1764590000,\"event\":\"armed\"},{" EP
	  ",\"seq\":3,\"time\":1,\"event\":\"armed\"}],\"journal_more\":true}",
	    "down", 3, 0, 1, 2, 0, 0, 1, "" },
	/* A state not known, a pid out of range: unknown, no pid. */
	{ "{\"state\":\"dancing\",\"pid\":99999999,\"generation\":1}",
	    "unknown", 1, 0, 0, 0, 0, 0, 0, "" },
	/* A bad generation is -1 (no plan is written over it) and says so. */
	{ "{\"state\":\"running\",\"generation\":-4}", "running", -1, 0, 0, 0,
	    0, 1, 0, "" },
	{ "{\"state\":\"running\",\"generation\":\"7\"}", "running", -1, 0, 0,
	    0, 0, 1, 0, "" },
	{ "{\"state\":\"running\"}", "running", -1, 0, 0, 0, 0, 1, 0, "" },
	{ "[]", "unknown", -1, 0, 0, 0, 0, 1, 0, "" },
	{ "null", "unknown", -1, 0, 0, 0, 0, 1, 0, "" },
	/* A bad epoch reads as none; a plan that is not an object as none. */
	{ "{\"state\":\"none\",\"generation\":0,\"journal_epoch\":\"xyz\","
	  "\"plan\":[1]}",
	    "none", 0, 0, 0, 0, 0, 0, 0, "" },
};

START_TEST(test_section)
{
	struct report_watcher w;
	json_t *o = json_loads(section_cases[_i].json, JSON_DECODE_ANY, NULL);

	ck_assert_ptr_nonnull(o);
	report_parse_watcher(o, NOW, &w);
	ck_assert_int_eq(w.present, 1);
	ck_assert_str_eq(w.state, section_cases[_i].state);
	ck_assert_int_eq(w.generation, section_cases[_i].generation);
	ck_assert_int_eq(w.pid, section_cases[_i].pid);
	ck_assert_uint_eq(w.njournal, section_cases[_i].njournal);
	ck_assert_uint_eq(w.nskipped, section_cases[_i].nskipped);
	ck_assert_int_eq(w.plan != NULL, section_cases[_i].has_plan);
	ck_assert_int_eq(w.error != NULL, section_cases[_i].has_error);
	ck_assert_int_eq(w.journal_more, section_cases[_i].more);
	ck_assert_str_eq(w.epoch, section_cases[_i].epoch);
	report_watcher_free(&w);
	json_decref(o);
}
END_TEST

/* More than REPORT_ENTRIES_MAX entries: the rest waits (journal_more). */
START_TEST(test_section_cap)
{
	struct report_watcher w;
	json_t *o = json_pack("{s:s, s:i, s:[]}", "state", "running",
		   "generation", 1, "journal"),
	       *a = json_object_get(o, "journal");
	int i;

	for (i = 1; i <= REPORT_ENTRIES_MAX + 5; i++)
		json_array_append_new(a,
		    json_pack("{s:s, s:i, s:I, s:s}", "epoch",
			"5f0c3a9e1b2d4c6a", "seq", i, "time",
			(json_int_t)1764590000, "event", "busy"));
	report_parse_watcher(o, NOW, &w);
	ck_assert_uint_eq(w.njournal, REPORT_ENTRIES_MAX);
	ck_assert_int_eq(w.journal_more, 1);
	ck_assert_int_eq(
	    w.journal[REPORT_ENTRIES_MAX - 1].seq, REPORT_ENTRIES_MAX);
	report_watcher_free(&w);
	json_decref(o);
}
END_TEST

/* A whole report without the section (an older agent): not present. */
START_TEST(test_no_section)
{
	const char *doc = "{\"schema\":1,\"time\":1764590400,"
			  "\"host\":{\"hostname\":\"h\"},\"gpus\":[]}";
	struct report r;
	char *cause = NULL;

	ck_assert_int_eq(report_parse(doc, strlen(doc), NOW, &r, &cause), 0);
	ck_assert_int_eq(r.watcher.present, 0);
	report_free(&r);
}
END_TEST

#define N(a) ((int)(sizeof a / sizeof a[0]))

int
main(void)
{
	Suite *s = suite_create("journal");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_entry, 0, N(entry_cases));
	tcase_add_test(tc, test_entry_oversized);
	tcase_add_loop_test(tc, test_section, 0, N(section_cases));
	tcase_add_test(tc, test_section_cap);
	tcase_add_test(tc, test_no_section);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
