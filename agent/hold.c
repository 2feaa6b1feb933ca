/*
 * Held stops (agent/WATCH.md "Held stops"): a deadline with a "hold"
 * waits, after its before-stop and before its stop, for the controller
 * to bring the results home and write D/release-ID. This file holds the
 * release file's format (its check and its atomic write, the `release`
 * command) and the watcher's journal entries for a hold.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "../controller/xmalloc.h"

static const char *const hold_bys[] = { "pulled", "pull_failed", "user",
	"cancelled", NULL };

static int hold_by_ok(const char *);
static int hold_id_ok(const char *);

/* Whether by is a release's "by". */
static int
hold_by_ok(const char *by)
{
	size_t i;

	for (i = 0; hold_bys[i] != NULL; i++)
		if (strcmp(by, hold_bys[i]) == 0)
			return 1;
	return 0;
}

/* Whether id is a deadline id: 1-64 of [A-Za-z0-9._-]. */
static int
hold_id_ok(const char *id)
{
	size_t n = strlen(id);

	return n > 0 && n <= PLAN_ID_MAX &&
	    strspn(id,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789._-") == n;
}

/*
 * Check a release document for deadline id: {"version":1,"id":ID,
 * "by":"pulled"|"pull_failed"|"user"|"cancelled"}. 0 with by (its "by") filled,
 * or -1 with *cause (caller frees).
 */
int
hold_release_parse(const char *text, size_t len, const char *id, char *by,
    size_t bysize, char **cause)
{
	static const char *const keys[] = { "version", "id", "by", NULL };
	struct jsonr root;
	const char *s;
	int r = -1;

	if (len > HOLD_RELEASE_MAX) {
		xasprintf(cause, "more than %d bytes", HOLD_RELEASE_MAX);
		return -1;
	}
	if (plan_doc(text, len, keys, &root, cause) != 0)
		goto out;
	if ((s = jsonr_str(&root, "id")) == NULL || strcmp(s, id) != 0) {
		plan_bad(cause, "", "id", "is not this deadline's");
		goto out;
	}
	if ((s = jsonr_str(&root, "by")) == NULL || !hold_by_ok(s)) {
		plan_bad(cause, "", "by",
		    "must be \"pulled\", \"pull_failed\", \"user\" or "
		    "\"cancelled\"");
		goto out;
	}
	snprintf(by, bysize, "%s", s);
	r = 0;
out:
	jsonr_free(&root);
	return r;
}

/*
 * Read dir/release-ID: 1 with by filled when it is a valid release, 0
 * when there is none, -1 with *cause when it is not valid.
 */
int
hold_release_read(
    const char *dir, const char *id, char *by, size_t bysize, char **cause)
{
	struct buf b = { NULL, 0, 0 };
	char *path;
	int r = -1;

	xasprintf(&path, "%s/release-%s", dir, id);
	if (buf_read_file(&b, path, HOLD_RELEASE_MAX + 1) != 0) {
		if (errno == ENOENT)
			r = 0;
		else
			xasprintf(cause, "cannot read it: %s", strerror(errno));
	} else if (hold_release_parse(b.data, b.len, id, by, bysize, cause) ==
	    0)
		r = 1;
	buf_free(&b);
	free(path);
	return r;
}

/* Remove dir/release-ID (done with, or not valid). */
void
hold_release_remove(const char *dir, const char *id)
{
	char *path;

	xasprintf(&path, "%s/release-%s", dir, id);
	unlink(path);
	free(path);
}

/*
 * gpufleet-agent release [--dir D] --id ID --by BY: write D/release-ID
 * (temporary file, fsync, rename), which lets the watcher's held stop
 * of ID go on. Returns the exit status.
 */
int
hold_main(int argc, char **argv)
{
	const char *dir = "~/.cache/gpufleet", *id = NULL, *by = NULL;
	char *full, *text, *name, *cause = NULL;
	int i, r;

	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--dir") == 0)
			dir = argv[i + 1];
		else if (strcmp(argv[i], "--id") == 0)
			id = argv[i + 1];
		else if (strcmp(argv[i], "--by") == 0)
			by = argv[i + 1];
		else
			break;
	}
	if (i < argc || id == NULL || by == NULL || !hold_id_ok(id) ||
	    !hold_by_ok(by)) {
		fprintf(stderr,
		    "usage: gpufleet-agent release [--dir DIR] --id ID "
		    "--by pulled|pull_failed|user|cancelled\n");
		return REPORT_EXIT_USAGE;
	}
	full = report_expand_home(dir);
	xasprintf(&name, "release-%s", id);
	xasprintf(
	    &text, "{\"version\":1,\"id\":\"%s\",\"by\":\"%s\"}\n", id, by);
	r = 0;
	if (plan_mkdir(full, &cause) != 0 ||
	    plan_write_named(full, name, text, strlen(text), &cause) != 0) {
		fprintf(stderr, "gpufleet-agent: release: %s\n", cause);
		r = PLAN_EXIT_WRITE;
	} else
		printf("{\"ok\":true}\n");
	free(cause);
	free(name);
	free(text);
	free(full);
	fflush(stdout);
	return r;
}
