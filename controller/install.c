/*
 * Installing a managed key by password (see install.h for the order). The
 * password is only ever handed to the engine (engine_host.password) for the
 * logins that edit authorized_keys; the proof logs in with the new key
 * alone, on a fresh connection, so a reused session or the password cannot
 * stand in for a key that does not work.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "install.h"
#include "keys.h"
#include "misc.h"
#include "password.h"
#include "rotate.h"
#include "status.h"
#include "xmalloc.h"

#define OUT_MAX (64 * 1024)

/* One host's install as it goes. */
struct inst {
	struct install_host *res;
	struct keys_key k;
	ssh_key key;
	int done;			/* failed, or nothing more to do */
	ssh_key saved[ENGINE_MAX_KEYS]; /* the host's own keys, tried first */
	int nsaved;
};

struct run {
	struct remote *rm;
	struct inst *x;
	const struct install_opts *opts;
	struct rotate_phase ph; /* out: each host's last command output */
};

static void fail_host(struct run *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static void phase(struct run *, const int *, int, char **);
static void edit(struct run *, const int *, int);
static void login_as(struct run *, const int *, int);
static void forget_passwords(struct run *);
static int make_key(struct run *, size_t);
static void drop_key(struct run *, size_t);
static int switch_key(struct run *, size_t, char **);
static int purge(struct fleet *, int64_t, char **);

/* Mark host i failed for this run with a message. */
static void
fail_host(struct run *run, size_t i, const char *fmt, ...)
{
	struct inst *x = &run->x[i];
	va_list ap;

	va_start(ap, fmt);
	free(x->res->error);
	xvasprintf(&x->res->error, fmt, ap);
	va_end(ap);
	x->res->failed = x->done = 1;
}

/*
 * Run cmds[i] on each host with want[i] set, on a fresh connection: with
 * newkey, logging in with the new key alone; else with the host's own keys
 * and then its password.
 */
static void
phase(struct run *run, const int *want, int newkey, char **cmds)
{
	login_as(run, want, newkey);
	rotate_phase_run(&run->ph, want, cmds);
	forget_passwords(run);
}

/*
 * Add (or, with del, remove) each wanted host's new key in its
 * authorized_keys by password, with rotation's edit.
 */
static void
edit(struct run *run, const int *want, int del)
{
	struct rotate_edit *ed = xcalloc(run->rm->n, sizeof *ed);
	size_t i;

	for (i = 0; i < run->rm->n; i++) {
		if (del)
			ed[i].del = run->x[i].k.blob;
		else
			ed[i].add = run->x[i].k.pubkey;
	}
	login_as(run, want, 0);
	rotate_phase_edit(&run->ph, want, run->opts->ab, ed);
	forget_passwords(run);
	free(ed);
}

/*
 * Set how each host with want[i] set logs in: with newkey, the new key
 * alone; else its own keys and then its password.
 */
static void
login_as(struct run *run, const int *want, int newkey)
{
	size_t i;

	for (i = 0; i < run->rm->n; i++) {
		struct engine_host *h = &run->rm->hosts[i];
		struct inst *x = &run->x[i];
		if (!want[i])
			continue;
		if (newkey) {
			h->keys[0] = x->key;
			h->nkeys = 1;
			h->password = NULL;
		} else {
			memcpy(h->keys, x->saved, sizeof h->keys);
			h->nkeys = x->nsaved;
			h->password = run->opts->passwords[i];
		}
	}
}

/* The password is handed to the engine only for a phase. */
static void
forget_passwords(struct run *run)
{
	size_t i;

	for (i = 0; i < run->rm->n; i++)
		run->rm->hosts[i].password = NULL;
}

/*
 * Step 1: make host i's key NAME-DATE (its files only: the row comes with
 * the switch, so a run killed before it leaves files `keys gc` removes). 0
 * or -1 (failed; also while a rotation of the host is unfinished: it would
 * fight this one).
 */
static int
make_key(struct run *run, size_t i)
{
	const struct install_opts *opts = run->opts;
	struct remote *rm = run->rm;
	struct inst *x = &run->x[i];
	const char *host = rm->hosts[i].in->name;
	char *cause = NULL, *name = NULL, *dir = keys_dir();
	struct keys_rotation row;
	int rc = -1, r;

	if ((r = keys_rotation_get(
		 rm->inv, rm->hosts[i].in->id, &row, &cause)) < 0) {
		fail_host(run, i, "%s", cause);
		goto out;
	}
	if (r == 0 && row.state != NULL && strcmp(row.state, "done") != 0 &&
	    strcmp(row.state, "reverted") != 0) {
		fail_host(run, i,
		    "a key rotation of %s is unfinished (step %d, %s): run "
		    "`gpufleet keys rotate %s` first",
		    host, row.step, row.state, host);
		keys_rotation_clear(&row);
		goto out;
	}
	keys_rotation_clear(&row);
	if (keys_dated_name(rm->inv, dir, host, opts->now, &name) != 0) {
		fail_host(run, i, "cannot name a key for %s", host);
		goto out;
	}
	if (keys_generate(dir, opts->type, name, opts->passphrase, opts->now,
		&x->k, &x->key, &cause) != 0) {
		fail_host(run, i, "%s", cause);
		goto out;
	}
	rc = 0;
out:
	free(cause);
	free(name);
	free(dir);
	return rc;
}

/* A key that host i will not use: its files go (it has no row yet). */
static void
drop_key(struct run *run, size_t i)
{
	struct inst *x = &run->x[i];
	char *pub, *prev;
	const char *bad = NULL;

	if (x->k.path == NULL)
		return;
	xasprintf(&pub, "%s.pub", x->k.path);
	if (unlink(x->k.path) != 0 && errno != ENOENT)
		bad = x->k.path;
	else if (unlink(pub) != 0 && errno != ENOENT)
		bad = pub;
	if (bad != NULL) {
		/* fail_host frees the error it replaces: keep it for this. */
		prev = x->res->error;
		x->res->error = NULL;
		fail_host(run, i, "%s; and cannot remove %s: %s",
		    prev != NULL ? prev : "failed", bad, strerror(errno));
		free(prev);
	}
	free(pub);
}

/* Step 4: the key is recorded and host i switched to it, in one go. */
static int
switch_key(struct run *run, size_t i, char **cause)
{
	struct inventory *inv = run->rm->inv;
	int r;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = keys_add(inv, &run->x[i].k, cause)) != 0 ||
	    (r = keys_set_instance_key(
		 inv, run->rm->hosts[i].in->id, &run->x[i].k, cause)) != 0 ||
	    (r = inventory_commit(inv, cause)) != 0) {
		if (inv->in_txn)
			inventory_rollback(inv);
		return r;
	}
	return 0;
}

/*
 * Install a new managed key on every host of rm by password (see
 * install.h). Fills res (caller frees with install_result_free); returns
 * 0, or a negative status with *cause set when nothing could start.
 */
int
install_keys(struct remote *rm, const struct install_opts *opts,
    struct install_result *res, char **cause)
{
	struct run run;
	int *want, *undo, r, anyundo = 0;
	char **why, **cmds;
	size_t i;

	memset(res, 0, sizeof *res);
	if ((r = keys_lock(rm->inv, cause)) != 0)
		return r;
	res->n = rm->n;
	res->hosts = xcalloc(rm->n, sizeof *res->hosts);
	memset(&run, 0, sizeof run);
	run.rm = rm;
	run.opts = opts;
	run.x = xcalloc(rm->n, sizeof *run.x);
	run.ph.rm = rm;
	run.ph.out = xcalloc(rm->n, sizeof *run.ph.out);
	run.ph.out_max = OUT_MAX;
	/* Ctrl-C fails the hosts, so the key is taken off and dropped. */
	run.ph.handle_sigint = 1;
	want = xcalloc(rm->n, sizeof *want);
	undo = xcalloc(rm->n, sizeof *undo);
	why = xcalloc(rm->n, sizeof *why);
	cmds = xcalloc(rm->n, sizeof *cmds);
	for (i = 0; i < rm->n; i++) {
		struct inst *x = &run.x[i];
		x->res = &res->hosts[i];
		x->res->name = rm->hosts[i].in->name;
		memcpy(x->saved, rm->hosts[i].keys, sizeof x->saved);
		x->nsaved = rm->hosts[i].nkeys;
		/* 1: the key's files, before any host sees it. */
		make_key(&run, i);
	}
	rotate_test_crash(1);

	/* 2: add it by password (the host key is checked, or pinned). */
	for (i = 0; i < rm->n; i++)
		want[i] = !run.x[i].done;
	edit(&run, want, 0);
	for (i = 0; i < rm->n; i++) {
		char *e;
		/* The edit is atomic: a command that failed changed nothing. */
		if (!want[i] || rotate_phase_ok(&run.ph, i))
			continue;
		e = rotate_phase_error(&run.ph, i);
		fail_host(&run, i, "adding the key: %s", e);
		free(e);
	}
	rotate_test_crash(2);

	/* 3: a fresh login with only the new key. */
	for (i = 0; i < rm->n; i++) {
		want[i] = !run.x[i].done;
		cmds[i] = "true";
	}
	phase(&run, want, 1, cmds);
	for (i = 0; i < rm->n; i++) {
		if (!want[i] || rotate_phase_ok(&run.ph, i))
			continue;
		why[i] = rotate_phase_error(&run.ph, i);
		fail_host(&run, i,
		    "a fresh login with only the new key failed: %s", why[i]);
		undo[i] = 1;
	}
	rotate_test_crash(3);

	/* Where it failed after the key may be there: take it off again. */
	for (i = 0; i < rm->n; i++)
		anyundo |= undo[i];
	if (anyundo) {
		edit(&run, undo, 1);
		for (i = 0; i < rm->n; i++) {
			char *e, *prev;
			if (!undo[i])
				continue;
			prev = run.x[i].res->error;
			run.x[i].res->error = NULL;
			if (rotate_phase_ok(&run.ph, i))
				fail_host(&run, i,
				    "%s; the key was taken off again", prev);
			else {
				e = rotate_phase_error(&run.ph, i);
				fail_host(&run, i,
				    "%s; taking it off again failed too (%s): "
				    "remove the line ending %s from %s there",
				    prev, e, run.x[i].k.name,
				    rm->hosts[i].in->authorized_keys_file);
				free(e);
			}
			free(prev);
		}
	}

	/* 4: the inventory switches to it. */
	for (i = 0; i < rm->n; i++) {
		struct inst *x = &run.x[i];
		char *c = NULL;
		if (x->done)
			continue;
		if (switch_key(&run, i, &c) != 0) {
			fail_host(&run, i,
			    "recording the key: %s; it is in %s and logs in: "
			    "run `gpufleet keys install %s` again",
			    c != NULL ? c : "database error",
			    rm->hosts[i].in->authorized_keys_file,
			    rm->hosts[i].in->name);
			free(c);
			continue;
		}
		x->res->key = xstrdup(x->k.name);
		x->res->fingerprint = xstrdup(x->k.fingerprint);
		x->res->path = xstrdup(x->k.path);
		x->done = 1;
	}

	for (i = 0; i < rm->n; i++) {
		struct inst *x = &run.x[i];
		/* A key that failed and was not left on the host goes. */
		if (x->res->failed &&
		    !(undo[i] && !rotate_phase_ok(&run.ph, i)))
			drop_key(&run, i);
		rm->hosts[i].password = NULL;
		memcpy(rm->hosts[i].keys, x->saved, sizeof x->saved);
		rm->hosts[i].nkeys = x->nsaved;
		if (x->key != NULL)
			ssh_key_free(x->key);
		keys_key_clear(&x->k);
		free(run.ph.out[i].data);
		free(why[i]);
	}
	keys_unlock(rm->inv);
	free(run.x);
	free(run.ph.out);
	free(want);
	free(undo);
	free(why);
	free(cmds);
	return 0;
}

void
install_result_free(struct install_result *res)
{
	size_t i;

	for (i = 0; i < res->n; i++) {
		free(res->hosts[i].key);
		free(res->hosts[i].fingerprint);
		free(res->hosts[i].path);
		free(res->hosts[i].error);
	}
	free(res->hosts);
	memset(res, 0, sizeof *res);
}

/*
 * `add --password`/`--password-file FILE` (file NULL: ask on the terminal):
 * the password, the agent that edits authorized_keys and the keys'
 * passphrase, all before the inventory is touched. 0, or -GF_EUSAGE with
 * *cause set; first is cleared with install_first_free either way.
 */
int
install_first_prepare(struct fleet *fleet, const char *file,
    const struct instance *in, struct install_first *first, char **cause)
{
	char *what;

	memset(first, 0, sizeof *first);
	first->opts.now = time(NULL);
	first->opts.passphrase = keys_passphrase(fleet->config, cause);
	if (*cause != NULL)
		return -GF_EUSAGE;
	if (deploy_load(&first->ab, cause) != 0)
		return -GF_EUSAGE;
	first->opts.ab = &first->ab;
	xasprintf(&what, "%s@%s", in->user, in->host);
	first->password = password_read(file, what, cause);
	free(what);
	return first->password != NULL ? 0 : -GF_EUSAGE;
}

void
install_first_free(struct install_first *first)
{
	password_free(first->password);
	first->password = NULL;
	deploy_free(&first->ab);
	keys_passphrase_clear();
}

/*
 * `add --password`: the instance just added (its row committed) gets its
 * own managed key by password. When that fails it is purged again, so
 * nothing is left of it: returns -GF_EHOSTS (or another negative status)
 * with *cause saying why. On success fills *path with the key it now uses
 * (caller frees).
 */
int
install_added(struct fleet *fleet, const struct instance *in,
    struct install_first *first, char **path, char **cause)
{
	struct install_opts opts = first->opts;
	struct install_result res;
	struct remote *rm = NULL;
	char *c = NULL;
	int r;

	*path = NULL;
	opts.passwords = &first->password;
	if ((r = remote_open(fleet, in->name, &rm, cause)) != 0)
		goto purge;
	if (rm->n != 1) {
		xasprintf(
		    cause, "%s: not found again after adding it", in->name);
		r = -GF_EDB;
		goto purge;
	}
	if ((r = install_keys(rm, &opts, &res, cause)) != 0)
		goto purge;
	if (res.hosts[0].failed) {
		*cause = res.hosts[0].error;
		res.hosts[0].error = NULL;
		install_result_free(&res);
		r = -GF_EHOSTS;
		goto purge;
	}
	*path = res.hosts[0].path;
	res.hosts[0].path = NULL;
	install_result_free(&res);
	remote_close(rm);
	return 0;

purge:
	remote_close(rm);
	if (purge(fleet, in->id, &c) != 0) {
		char *t;
		xasprintf(&t,
		    "%s; and removing it again failed (%s): run `gpufleet rm "
		    "--purge %s`",
		    *cause != NULL ? *cause : "failed", c, in->name);
		free(*cause);
		*cause = t;
		free(c);
	}
	return r;
}

/* Delete a half-added instance and what was recorded about it. */
static int
purge(struct fleet *fleet, int64_t id, char **cause)
{
	struct inventory *inv;
	int r;

	if ((r = fleet_inventory(fleet, &inv, cause)) != 0 ||
	    (r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = inventory_purge(inv, id, cause)) != 0 ||
	    (r = inventory_commit(inv, cause)) != 0) {
		if (inv->in_txn)
			inventory_rollback(inv);
		return r;
	}
	return 0;
}
