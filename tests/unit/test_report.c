/*
 * The controller's parser of agent reports (controller/report.c): values
 * out of range are refused naming the field, one row per case; a value at
 * its bound is taken.
 */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "xmalloc.h"

#define NOW 1764590400LL /* 2025-12-01T12:00:00Z */

struct range_case {
	const char *top;  /* top-level fields after schema */
	const char *host; /* host fields after hostname */
	const char *gpu;  /* fields of one GPU after index, or NULL: none */
	const char *want; /* substring of the error, or NULL: parses */
};

static const struct range_case cases[] = {
	{ "\"time\":1764590400", "", NULL, NULL },
	{ "\"time\":946684800", "", NULL, NULL },
	{ "\"time\":1764676800", "", NULL, NULL }, /* now + 1 day */
	{ "\"time\":1764676801", "", NULL,
	    "'time' 1764676801 is out of range" },
	{ "\"time\":946684799", "", NULL, "'time' 946684799 is out of range" },
	{ "\"time\":-9223372036854775808", "", NULL, "'time'" },
	{ "\"time\":9223372036854775807", "", NULL, "'time'" },
	{ "\"time\":1764590400", ",\"container_start\":-1000", NULL,
	    "'container_start' -1000 is out of range" },
	{ "\"time\":1764590400", ",\"container_start\":0", NULL,
	    "'container_start' 0 is out of range" },
	{ "\"time\":1764590400", ",\"container_start\":9223372036854775807",
	    NULL, "'container_start'" },
	{ "\"time\":1764590400", ",\"container_start\":null", NULL, NULL },
	{ "\"time\":1764590400", ",\"container_start\":1764500000", NULL,
	    NULL },
	/* Started after the report was made: a wrong or hostile clock. */
	{ "\"time\":1764500000", ",\"container_start\":1764590400", NULL,
	    "'container_start' 1764590400 is after the report's time "
	    "1764500000" },
	{ "\"time\":1764500000", ",\"container_start\":1764500000", NULL,
	    NULL },
	{ "\"time\":1764500000", ",\"boot_time\":1764500001", NULL,
	    "'boot_time' 1764500001 is after the report's time" },
	{ "\"time\":1764590400", ",\"boot_time\":-1", NULL, "'boot_time'" },
	{ "\"time\":1764590400", ",\"mem_total_kib\":-1", NULL,
	    "'mem_total_kib' -1 is out of range" },
	{ "\"time\":1764590400", ",\"mem_available_kib\":9223372036854775807",
	    NULL, "'mem_available_kib'" },
	{ "\"time\":1764590400", ",\"net_tx_bytes\":-5", NULL,
	    "'net_tx_bytes' -5" },
	{ "\"time\":1764590400", ",\"net_rx_bytes\":9223372036854775807", NULL,
	    "'net_rx_bytes'" },
	{ "\"time\":1764590400", ",\"net_tx_bytes\":1152921504606846976", NULL,
	    NULL },
	{ "\"time\":1764590400", ",\"cpus\":-1", NULL, "'cpus' -1" },
	{ "\"time\":1764590400", ",\"sessions\":-9223372036854775808", NULL,
	    "'sessions'" },
	{ "\"time\":1764590400", ",\"load\":[-1,0,0]", NULL, "'load' -1" },
	{ "\"time\":1764590400", ",\"load\":[1e300,0,0]", NULL, "'load'" },
	{ "\"time\":1764590400", "", "\"util_gpu\":100,\"util_mem\":0", NULL },
	{ "\"time\":1764590400", "", "\"util_gpu\":101",
	    "'util_gpu' 101 is out of range" },
	{ "\"time\":1764590400", "", "\"util_mem\":-0.5", "'util_mem'" },
	{ "\"time\":1764590400", "", "\"mem_used_mib\":-1", "'mem_used_mib'" },
	{ "\"time\":1764590400", "", "\"mem_total_mib\":1e300",
	    "'mem_total_mib'" },
	{ "\"time\":1764590400", "", "\"temp_c\":1e9", "'temp_c'" },
	{ "\"time\":1764590400", "", "\"power_w\":-3", "'power_w'" },
	{ "\"time\":1764590400", "", "\"power_limit_w\":1e12",
	    "'power_limit_w'" },
	{ "\"time\":1764590400", "",
	    "\"processes\":[{\"pid\":-1,\"name\":\"p\",\"mem_mib\":1}]",
	    "'pid' -1 is out of range" },
	{ "\"time\":1764590400", "",
	    "\"processes\":[{\"pid\":9223372036854775807}]", "'pid'" },
	{ "\"time\":1764590400", "",
	    "\"processes\":[{\"pid\":7,\"mem_mib\":-2}]", "'mem_mib'" },
	{ "\"time\":1764590400", "",
	    "\"processes\":[{\"pid\":4194304,\"mem_mib\":2}]", NULL },
	{ "\"time\":1764590400,\"progress\":{\"text\":\"x\",\"mtime\":-"
	  "9223372036854775808}",
	    "", NULL, "'mtime'" },
	{ "\"time\":1764590400,\"progress\":{\"text\":\"x\",\"mtime\":"
	  "9223372036854775807}",
	    "", NULL, "'mtime'" },
	{ "\"time\":1764590400,\"progress\":{\"text\":\"x\",\"mtime\":"
	  "1764590000}",
	    "", NULL, NULL },
};

START_TEST(test_ranges)
{
	const struct range_case *c = &cases[_i];
	struct report r;
	char *doc, *cause = NULL;
	int rc;

	xasprintf(&doc,
	    "{\"schema\":1,%s,\"host\":{\"hostname\":\"h\"%s},"
	    "\"gpus\":[%s%s%s%s]}",
	    c->top, c->host, c->gpu != NULL ? "{\"index\":0" : "",
	    c->gpu != NULL && *c->gpu != '\0' ? "," : "",
	    c->gpu != NULL ? c->gpu : "", c->gpu != NULL ? "}" : "");
	rc = report_parse(doc, strlen(doc), NOW, &r, &cause);
	if (c->want == NULL) {
		ck_assert_msg(rc == 0, "%s: %s", doc, cause);
		report_free(&r);
	} else {
		ck_assert_msg(rc == -1, "%s parsed", doc);
		ck_assert_ptr_nonnull(cause);
		ck_assert_msg(strstr(cause, c->want) != NULL,
		    "%s: '%s' lacks '%s'", doc, cause, c->want);
		ck_assert_msg(
		    strncmp(cause, "bad agent report: ", 18) == 0, "%s", cause);
	}
	free(cause);
	free(doc);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("report");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(
	    tc, test_ranges, 0, (int)(sizeof cases / sizeof cases[0]));
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
