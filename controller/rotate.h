/*
 * Key rotation, revocation and the check for re-injected keys, on the
 * instances a struct remote holds. Nothing here prints: each host gets a
 * struct rotate_host, and what a user should be warned of on the way is a
 * note, both for the caller to render.
 *
 * The rotation is one table of steps (rotate_step_from): every host whose
 * recorded step is a row's `from` takes that row together with the others,
 * and the row's `to` is recorded (BEGIN IMMEDIATE, synchronous=FULL) before
 * the next row starts, so a rerun after a crash continues each host from
 * its step (see rotate.c for why the order cannot lock the user out).
 */
#ifndef GPUFLEET_ROTATE_H
#define GPUFLEET_ROTATE_H

#include <libssh/libssh.h>
#include <stddef.h>
#include <time.h>

#include "deploy.h"
#include "log.h"
#include "remote.h"

/* What a step does on the host (or, for the local ones, in the database). */
enum rotate_script {
	ROTATE_NEW_KEY, /* make the new key; the intent is recorded with it */
	ROTATE_ADD,	/* add the new key with the old line's options */
	ROTATE_LOGIN,	/* a fresh login with only the new key runs true */
	ROTATE_SWITCH,	/* the inventory switches to the new key */
	ROTATE_REMOVE,	/* remove the old key by its blob */
	ROTATE_REFUSED, /* a fresh login with only the old key is refused */
	ROTATE_RETIRE,	/* delete the old private key once unused */
};

struct rotate_step {
	int from; /* the recorded step (enum keys_step) it starts from */
	int to;	  /* the step it records once done */
	const char *what; /* how its failures start, or NULL */
	enum rotate_script script;
};

struct rotate_opts {
	const char *type;	    /* the new keys' type; NULL: ed25519 */
	const char *passphrase;	    /* keys.c's one copy, or NULL */
	const struct agent_bin *ab; /* edits authorized_keys; NULL: dry run */
	int keep_old;
	int shared; /* one new key for all the selected hosts */
	int dry_run;
	time_t now;
};

/*
 * A run of one command per host, each on a fresh login with the keys (and
 * password) its engine_host holds: key rotation and install share it. What
 * host i's last command printed is kept in out[i] (caller's, rm->n of
 * them; caller frees their data), capped at out_max bytes.
 */
struct rotate_phase {
	struct remote *rm;
	struct misc_buf *out;
	size_t out_max;
	const char *stdin_data; /* set by rotate_phase_edit, or NULL */
	size_t stdin_len;
	int handle_sigint; /* Ctrl-C fails the hosts */
};

/* One edit of a host's authorized_keys (see keys_authkeys_command). */
struct rotate_edit {
	const char *add;
	const char *like;
	const char *del;
};

/* What --dry-run would do to a host. */
enum rotate_plan {
	ROTATE_PLAN_NONE,
	ROTATE_PLAN_CONTINUE, /* go on after the recorded step, to key */
	ROTATE_PLAN_REPLACE,  /* replace old_path (old_fingerprint) */
};

struct rotate_host {
	const char *name; /* the instance's, borrowed from the remote */
	int failed;	  /* with error */
	int untouched; /* nothing done: a dry run, or the key was not there */
	int step;      /* the rotation's recorded step */
	char *key;     /* the new key's name, or NULL */
	char *fingerprint;     /* the new key's, or NULL */
	char *error;	       /* why it failed, or NULL */
	enum rotate_plan plan; /* --dry-run */
	char *old_path;
	char *old_fingerprint;
	char *found; /* keys check: the keys taken off that are back, or NULL */
};

/* A line to log, in the order it arose. */
struct rotate_note {
	enum log_level level;
	char *msg;
};

struct rotate_result {
	struct rotate_host *hosts; /* one per host of the remote, its order */
	size_t n;
	struct rotate_note *notes;
	size_t nnotes;
};

const struct rotate_step *rotate_step_from(int);
void rotate_test_crash(int);
int rotate_keys(struct remote *, const struct rotate_opts *,
    struct rotate_result *, char **);
int rotate_revoke(struct remote *, const struct rotate_opts *, const char *,
    const char *, const char *, struct rotate_result *, char **);
void rotate_check(struct remote *, const char *, struct rotate_result *);
void rotate_result_free(struct rotate_result *);
void rotate_phase_run(struct rotate_phase *, const int *, char **);
void rotate_phase_edit(struct rotate_phase *, const int *,
    const struct agent_bin *, const struct rotate_edit *);
int rotate_phase_ok(struct rotate_phase *, size_t);
char *rotate_phase_error(struct rotate_phase *, size_t);

#endif
