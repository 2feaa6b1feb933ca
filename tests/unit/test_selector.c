/* The selector grammar, one row per case. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selector.h"

/* The fleet every case selects from. */
static struct instance fleet[5];

static void
fleet_setup(void)
{
	static const struct {
		const char *name, *provider, *tags;
		const char *state; /* the ledger's last word, "": none */
	} rows[] = {
		{ "a100-1", "autodl", "train,a100", "running" },
		{ "a100-2", "autodl", "a100", "stopped" },
		{ "h100-1", "runpod", "train", "unknown" },
		{ "h100-2", "vast", "", "" },
		{ "box", "", "dev", "running" },
	};
	size_t i;
	char *tags, *t, *save;

	for (i = 0; i < 5; i++) {
		instance_init(&fleet[i]);
		fleet[i].name = strdup(rows[i].name);
		free(fleet[i].provider);
		fleet[i].provider = strdup(rows[i].provider);
		snprintf(
		    fleet[i].state, sizeof fleet[i].state, "%s", rows[i].state);
		tags = strdup(rows[i].tags);
		for (t = strtok_r(tags, ",", &save); t != NULL;
		     t = strtok_r(NULL, ",", &save))
			instance_add_tag(&fleet[i], t);
		free(tags);
	}
}

static void
fleet_teardown(void)
{
	size_t i;

	for (i = 0; i < 5; i++)
		instance_clear(&fleet[i]);
}

struct sel_case {
	const char *selector;
	const char *expect; /* picked names, or NULL for an error */
	const char *error;  /* a word the error must contain */
};

static const struct sel_case cases[] = {
	{ "all", "a100-1 a100-2 h100-1 h100-2 box", NULL },
	{ "a100-1", "a100-1", NULL },
	{ "a100-*", "a100-1 a100-2", NULL },
	{ "*-1", "a100-1 h100-1", NULL },
	{ "h100-?", "h100-1 h100-2", NULL },
	{ "[ab]*", "a100-1 a100-2 box", NULL },
	{ "@train", "a100-1 h100-1", NULL },
	{ "@a100,@dev", "a100-1 a100-2 box", NULL },
	{ "provider:autodl", "a100-1 a100-2", NULL },
	{ "provider:vast,box", "h100-2 box", NULL },
	{ "!@train", "a100-2 h100-2 box", NULL },
	{ "!a100-*,!box", "h100-1 h100-2", NULL },
	{ "all,!provider:autodl", "h100-1 h100-2 box", NULL },
	{ "@train,!h100-1", "a100-1", NULL },
	{ "a100-1,a100-1", "a100-1", NULL },
	{ "state:running", "a100-1 box", NULL },
	{ "state:stopped", "a100-2", NULL },
	/* An empty ledger is unknown too. */
	{ "state:unknown", "h100-1 h100-2", NULL },
	{ "!state:running", "a100-2 h100-1 h100-2", NULL },
	{ "provider:autodl,!state:stopped", "a100-1", NULL },
	{ "@train,state:stopped", "a100-1 a100-2 h100-1", NULL },
	{ "state:stopped,!a100-2", NULL, "matches no instance" },
	{ "state:released", NULL,
	    "selector 'state:released': state 'released' is not running, "
	    "stopped or unknown" },
	{ "state:", NULL, "state '' is not running" },
	{ "state:Running", NULL, "state 'Running' is not running" },
	{ "!all", NULL, "matches no instance" },
	{ "nosuch", NULL, "nosuch" },
	{ "a100-1,nosuch", NULL, "nosuch" },
	{ "!nosuch", NULL, "nosuch" },
	{ "zz-*", NULL, "matches no instance" },
	{ "@nosuchtag", NULL, "matches no instance" },
	{ "provider:nowhere", NULL, "matches no instance" },
	{ "", NULL, "empty" },
	{ "a,,b", NULL, "empty term" },
	{ "a,", NULL, "empty term" },
	{ ",a", NULL, "empty term" },
	{ "!", NULL, "empty term" },
	{ "@", NULL, "tag" },
	{ "@bad tag", NULL, "tag" },
	{ "provider:", NULL, "provider" },
	{ "provider:a:b", NULL, "provider" },
	{ "a b", NULL, "name" },
	{ "a;b", NULL, "name" },
	{ "a$*", NULL, "not a name" },
	{ "!!a100-1", NULL, "name" },
};

START_TEST(test_select)
{
	const struct sel_case *c = &cases[_i];
	struct selector *sel = NULL;
	char *cause = NULL, got[256] = "";
	int picked[5], r;
	size_t i;

	r = selector_parse(c->selector, &sel, &cause);
	if (r == 0) {
		r = selector_select(sel, fleet, 5, picked, &cause);
		selector_free(sel);
	}
	if (c->expect == NULL) {
		ck_assert_msg(r < 0, "'%s' did not fail", c->selector);
		ck_assert_ptr_nonnull(cause);
		ck_assert_msg(strstr(cause, c->error) != NULL,
		    "'%s': error '%s' lacks '%s'", c->selector, cause,
		    c->error);
		free(cause);
		return;
	}
	ck_assert_msg(r > 0, "'%s' failed: %s", c->selector, cause);
	for (i = 0; i < 5; i++) {
		if (!picked[i])
			continue;
		size_t len = strlen(got);
		snprintf(got + len, sizeof got - len, "%s%s",
		    len != 0 ? " " : "", fleet[i].name);
	}
	ck_assert_str_eq(got, c->expect);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("selector");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, fleet_setup, fleet_teardown);
	tcase_add_loop_test(tc, test_select, 0, sizeof cases / sizeof cases[0]);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
