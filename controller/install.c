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
	int done; /* failed, or nothing more to do */
	struct misc_buf out;
	ssh_key saved[ENGINE_MAX_KEYS]; /* the host's own keys, tried first */
	int nsaved;
};

struct run {
	struct remote *rm;
	struct inst *x;
	const struct install_opts *opts;
	const char *stdin_data;
	size_t stdin_len;
};

static void fail_host(struct run *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static void on_output(struct engine_host *, int, const char *, size_t, void *);
static void phase(struct run *, const int *, int, char **);
static void edit(struct run *, const int *, int);
static int host_ok(struct run *, size_t);
static char *host_error(struct run *, size_t);
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

/* Keep a host's command output (capped) for its error. */
static void
on_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct run *run = arg;

	(void)is_stderr;
	misc_buf_add(&run->x[h - run->rm->hosts].out, data, len, OUT_MAX - 1);
}

/*
 * Run cmds[i] on each host with want[i] set, on a fresh connection: with
 * newkey, logging in with the new key alone; else with the host's own keys
 * and then its password.
 */
static void
phase(struct run *run, const int *want, int newkey, char **cmds)
{
	struct remote *rm = run->rm;
	struct engine_settings set;
	size_t i;
	int any = 0;

	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		struct inst *x = &run->x[i];

		engine_forget(h);
		h->skip = !want[i];
		if (!want[i])
			continue;
		any = 1;
		engine_host_clear(h);
		h->fail = EF_NONE;
		h->keys_error = NULL;
		if (newkey) {
			h->keys[0] = x->key;
			h->nkeys = 1;
			h->password = NULL;
		} else {
			memcpy(h->keys, x->saved, sizeof h->keys);
			h->nkeys = x->nsaved;
			h->password = run->opts->passwords[i];
		}
		h->command = cmds[i];
		x->out.len = 0;
		x->out.truncated = 0;
		if (x->out.data != NULL)
			x->out.data[0] = '\0';
	}
	if (!any)
		return;
	memset(&set, 0, sizeof set);
	set.fresh = 1;
	set.command = "true";
	set.fanout = rm->fleet->config->fanout;
	set.connect_timeout = rm->fleet->config->connect_timeout;
	set.setup_timeout = rm->fleet->config->setup_timeout;
	set.command_timeout = 120;
	set.stdin_data = run->stdin_data;
	set.stdin_len = run->stdin_len;
	/* Ctrl-C fails the hosts, so the key is taken off and dropped. */
	set.handle_sigint = 1;
	rm->ops.output = on_output;
	rm->ops.done = NULL;
	rm->ops.arg = run;
	if (remote_run(rm, &set) != 0) {
		for (i = 0; i < rm->n; i++) {
			if (!want[i])
				continue;
			rm->hosts[i].fail = EF_SSH;
			free(rm->hosts[i].fail_msg);
			rm->hosts[i].fail_msg =
			    xstrdup("cannot start the event loop");
		}
	}
	for (i = 0; i < rm->n; i++) {
		engine_forget(&rm->hosts[i]);
		rm->hosts[i].command = NULL;
		rm->hosts[i].password = NULL;
	}
}

/*
 * Add (or, with del, remove) each wanted host's new key in its
 * authorized_keys by password: the agent's authkeys where it is deployed,
 * else uploaded first on a second login, as rotation does.
 */
static void
edit(struct run *run, const int *want, int del)
{
	struct remote *rm = run->rm;
	const struct agent_bin *ab = run->opts->ab;
	char **cmds = xcalloc(rm->n, sizeof *cmds);
	int *missing = xcalloc(rm->n, sizeof *missing), any = 0, up;
	size_t i;

	for (up = 0; up < 2; up++) {
		for (i = 0; i < rm->n; i++) {
			const int *w = up ? missing : want;
			struct inst *x = &run->x[i];
			if (!w[i])
				continue;
			cmds[i] = keys_authkeys_command(rm->hosts[i].in, ab,
			    del ? NULL : x->k.pubkey, NULL,
			    del ? x->k.blob : NULL, up);
		}
		if (up) {
			if (!any)
				break;
			run->stdin_data = ab->data;
			run->stdin_len = ab->len;
		}
		phase(run, up ? missing : want, 0, cmds);
		run->stdin_data = NULL;
		run->stdin_len = 0;
		for (i = 0; i < rm->n; i++) {
			free(cmds[i]);
			cmds[i] = NULL;
			if (up || !want[i] || rm->hosts[i].fail != EF_NONE ||
			    rm->hosts[i].exit_signal != NULL ||
			    rm->hosts[i].exit_status != DEPLOY_EXIT_MISSING)
				continue;
			missing[i] = any = 1;
		}
	}
	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		struct inst *x = &run->x[i];
		if (missing[i] && h->fail == EF_NONE &&
		    h->exit_signal == NULL &&
		    h->exit_status >= DEPLOY_EXIT_WRITE &&
		    h->exit_status <= DEPLOY_EXIT_ARCH) {
			/* Say why the agent could not be put there. */
			char *why =
			    deploy_explain(h->exit_status, x->out.data, h->in);
			free(x->out.data);
			x->out.data = why;
			x->out.len = strlen(why);
			x->out.size = x->out.len + 1;
		}
	}
	free(cmds);
	free(missing);
}

/* Did host i's last command run and exit 0? */
static int
host_ok(struct run *run, size_t i)
{
	struct engine_host *h = &run->rm->hosts[i];

	return h->fail == EF_NONE && h->exit_signal == NULL &&
	    h->exit_status == 0;
}

/* Why host i's last run failed, one line. Caller frees. */
static char *
host_error(struct run *run, size_t i)
{
	struct engine_host *h = &run->rm->hosts[i];
	struct inst *x = &run->x[i];
	char *s, *p;

	if (h->fail != EF_NONE)
		return xstrdup(h->fail_msg != NULL ? h->fail_msg
						   : engine_fail_code(h->fail));
	for (p = x->out.data; p != NULL && *p != '\0'; p++) {
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	}
	while (x->out.len > 0 && x->out.data[x->out.len - 1] == ' ')
		x->out.data[--x->out.len] = '\0';
	if (h->exit_signal != NULL)
		xasprintf(&s, "killed by signal %s", h->exit_signal);
	else
		xasprintf(&s, "exit %d%s%s", h->exit_status,
		    x->out.len != 0 ? ": " : "",
		    x->out.len != 0 ? x->out.data : "");
	return s;
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
	char *cause = NULL, *t = NULL, *name = NULL, *dir = keys_dir();
	char base[32];
	struct tm tm;
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
	gmtime_r(&opts->now, &tm);
	strftime(base, sizeof base, "%Y%m%d-%H%M%S", &tm);
	xasprintf(&t, "%s-%s", host, base);
	if (keys_check_name(t, &cause) != 0 ||
	    keys_unique_name(rm->inv, dir, t, &name) != 0) {
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
	free(t);
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
		if (!want[i] || host_ok(&run, i))
			continue;
		e = host_error(&run, i);
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
		if (!want[i] || host_ok(&run, i))
			continue;
		why[i] = host_error(&run, i);
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
			if (host_ok(&run, i))
				fail_host(&run, i,
				    "%s; the key was taken off again", prev);
			else {
				e = host_error(&run, i);
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
		if (x->res->failed && !(undo[i] && !host_ok(&run, i)))
			drop_key(&run, i);
		rm->hosts[i].password = NULL;
		memcpy(rm->hosts[i].keys, x->saved, sizeof x->saved);
		rm->hosts[i].nkeys = x->nsaved;
		if (x->key != NULL)
			ssh_key_free(x->key);
		keys_key_clear(&x->k);
		free(x->out.data);
		free(why[i]);
	}
	keys_unlock(rm->inv);
	free(run.x);
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
