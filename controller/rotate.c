/*
 * Key rotation. The order cannot lock the user out: the new key is added
 * and proven on a fresh login before the inventory switches to it, and
 * the old key is removed only after that switch is recorded. Each step is
 * recorded (synchronous=FULL) before the next starts, so a rerun after a
 * crash continues each host from its step; every remote edit is
 * idempotent, so repeating a step that was done but not recorded is safe.
 *
 * Also here, as they log in the same way (only one key, always a fresh
 * connection): revoking a key, and the check for keys put back.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keys.h"
#include "gpufleet/authkeys.h"
#include "misc.h"
#include "rotate.h"
#include "status.h"
#include "xmalloc.h"

#define OUT_MAX (256 * 1024)

/* One host's rotation as it goes. */
struct rot {
	struct rotate_host *res;
	struct keys_rotation row;
	int have_row;
	struct keys_key newk;
	ssh_key newkey;
	ssh_key oldkey;
	int done; /* nothing more for this run */
};

struct run {
	struct remote *rm;
	struct rot *rots;
	const struct rotate_opts *opts;
	struct rotate_result *res;
	struct keys_key shared_key;
	ssh_key shared_sshkey;
	struct rotate_phase ph; /* out: each host's last command output */
};

static void run_init(struct run *, struct remote *, const struct rotate_opts *,
    struct rotate_result *);
static void run_free(struct run *);
static void note(struct run *, enum log_level, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static int record(struct run *, size_t, int, const char *, char **);
static int record_effect(struct run *, size_t, int, char **);
static void fail_host(struct run *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static void phase_output(
    struct engine_host *, int, const char *, size_t, void *);
static void use_keys(struct run *, const int *, ssh_key *);
static void run_phase(struct run *, int *, ssh_key *, char **);
static void edit_phase(struct run *, int *, ssh_key *, struct rotate_edit *);
static int host_current_key(struct remote *, const char *, size_t, ssh_key *,
    char **, int64_t *, char **);
static ssh_key *current_keys(struct run *);
static void load_host(struct run *, size_t);
static void load_continued(struct run *, size_t);
static void load_new(struct run *, size_t);
static int make_key(struct run *, size_t);
static int is_remote(enum rotate_script);
static void run_step(struct run *, const struct rotate_step *);
static void remote_step(struct run *, const struct rotate_step *, int *);
static int step_done(struct run *, const struct rotate_step *, size_t, char **);
static void finish_step(struct run *, const struct rotate_step *, size_t);
static void revert(struct run *, int *, char **);
static void drop_reverted(struct run *, size_t, int64_t);
static void retire_old_key(struct run *, size_t);
static void revoke_edit(
    struct run *, ssh_key *, const char *, const char *, const char *, int *);
static void revoke_prove(
    struct run *, ssh_key *, const char *, const char *, int *);

/*
 * The rotation, one row per step, in order: each row's `to` is the next
 * row's `from`. Step 1 starts hosts with no rotation under way (their
 * step is KEYS_STEP_NONE); a host that is done or failed drops out.
 */
static const struct rotate_step steps[] = {
	{ KEYS_STEP_NONE, KEYS_STEP_INTENT, NULL, ROTATE_NEW_KEY },
	{ KEYS_STEP_INTENT, KEYS_STEP_ADDED, "step 2 (add the new key)",
	    ROTATE_ADD },
	{ KEYS_STEP_ADDED, KEYS_STEP_VERIFIED, "step 3", ROTATE_LOGIN },
	{ KEYS_STEP_VERIFIED, KEYS_STEP_SWITCHED, "step 4", ROTATE_SWITCH },
	{ KEYS_STEP_SWITCHED, KEYS_STEP_REMOVED, "step 5 (remove the old key)",
	    ROTATE_REMOVE },
	{ KEYS_STEP_REMOVED, KEYS_STEP_REFUSED, "step 6", ROTATE_REFUSED },
	{ KEYS_STEP_REFUSED, KEYS_STEP_RETIRED, NULL, ROTATE_RETIRE },
};

/* The step a host whose recorded step is step takes next, or NULL. */
const struct rotate_step *
rotate_step_from(int step)
{
	size_t i;

	for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		if (steps[i].from == step)
			return &steps[i];
	}
	return NULL;
}

/*
 * The test hook at the end of step N (0: right after a new key's files
 * are written, before its row commits); see misc_test_point.
 */
void
rotate_test_crash(int step)
{
	char point[16];

	snprintf(point, sizeof point, "%d", step);
	misc_test_point(point);
}

/* A run over rm's hosts, each with an empty result in res. */
static void
run_init(struct run *run, struct remote *rm, const struct rotate_opts *opts,
    struct rotate_result *res)
{
	size_t i;

	memset(run, 0, sizeof *run);
	run->rm = rm;
	run->opts = opts;
	run->res = res;
	res->n = rm->n;
	res->hosts = xcalloc(rm->n, sizeof *res->hosts);
	run->rots = xcalloc(rm->n, sizeof *run->rots);
	run->ph.rm = rm;
	run->ph.out = xcalloc(rm->n, sizeof *run->ph.out);
	run->ph.out_max = OUT_MAX;
	for (i = 0; i < rm->n; i++) {
		run->rots[i].res = &res->hosts[i];
		res->hosts[i].name = rm->hosts[i].in->name;
	}
}

/* Copy each host's step and new key into its result, and free the run. */
static void
run_free(struct run *run)
{
	size_t i;

	for (i = 0; i < run->rm->n; i++) {
		struct rot *r = &run->rots[i];
		r->res->step = r->row.step;
		if (r->newk.name != NULL)
			r->res->key = xstrdup(r->newk.name);
		if (r->newk.fingerprint != NULL)
			r->res->fingerprint = xstrdup(r->newk.fingerprint);
		keys_rotation_clear(&r->row);
		keys_key_clear(&r->newk);
		ssh_key_free(r->newkey);
		ssh_key_free(r->oldkey);
		free(run->ph.out[i].data);
	}
	free(run->rots);
	free(run->ph.out);
	ssh_key_free(run->shared_sshkey);
	keys_key_clear(&run->shared_key);
}

/* Free what a rotate_* function put in res. */
void
rotate_result_free(struct rotate_result *res)
{
	size_t i;

	for (i = 0; i < res->n; i++) {
		struct rotate_host *h = &res->hosts[i];
		free(h->key);
		free(h->fingerprint);
		free(h->error);
		free(h->old_path);
		free(h->old_fingerprint);
		free(h->found);
	}
	for (i = 0; i < res->nnotes; i++)
		free(res->notes[i].msg);
	free(res->hosts);
	free(res->notes);
	memset(res, 0, sizeof *res);
}

/* Add a line for the caller to log. */
static void
note(struct run *run, enum log_level level, const char *fmt, ...)
{
	struct rotate_result *res = run->res;
	va_list ap;

	res->notes =
	    xreallocarray(res->notes, res->nnotes + 1, sizeof *res->notes);
	res->notes[res->nnotes].level = level;
	va_start(ap, fmt);
	xvasprintf(&res->notes[res->nnotes].msg, fmt, ap);
	va_end(ap);
	res->nnotes++;
}

/*
 * Record host i's step (and state) durably in its own IMMEDIATE
 * transaction before anything else happens, with what reaching that step
 * changes in the database. Where that fails the row keeps its step.
 */
static int
record(struct run *run, size_t i, int step, const char *state, char **cause)
{
	struct rot *r = &run->rots[i];
	struct inventory *inv = run->rm->inv;
	char *prev_state = r->row.state;
	int prev = r->row.step, rc;

	r->row.step = step;
	r->row.state = xstrdup(state);
	if ((rc = inventory_begin(inv, cause)) != 0)
		goto fail;
	if ((step != prev && (rc = record_effect(run, i, step, cause)) != 0) ||
	    (rc = keys_rotation_put(inv, &r->row, cause)) != 0 ||
	    (rc = inventory_commit(inv, cause)) != 0) {
		if (inv->in_txn)
			inventory_rollback(inv);
		goto fail;
	}
	free(prev_state);
	return 0;
fail:
	free(r->row.state);
	r->row.state = prev_state;
	r->row.step = prev;
	return rc;
}

/*
 * What reaching step changes besides the rotation's row: the new key's
 * row (1), the instance's key (4), the old key listed as taken off (6).
 */
static int
record_effect(struct run *run, size_t i, int step, char **cause)
{
	struct rot *r = &run->rots[i];
	struct inventory *inv = run->rm->inv;
	int rc = 0;

	switch (step) {
	case KEYS_STEP_INTENT:
		if (r->newk.id == 0 &&
		    (rc = keys_add(inv, &r->newk, cause)) != 0)
			return rc;
		r->row.new_key_id = r->newk.id;
		break;
	case KEYS_STEP_SWITCHED:
		rc = keys_set_instance_key(
		    inv, run->rm->hosts[i].in->id, &r->newk, cause);
		break;
	case KEYS_STEP_REFUSED:
		rc = keys_retire_blob(inv, r->row.instance_id, r->row.old_type,
		    r->row.old_blob, "rotated", cause);
		break;
	}
	return rc;
}

/* Mark a host failed for this run, recording why (its step stays). */
static void
fail_host(struct run *run, size_t i, const char *fmt, ...)
{
	struct rot *r = &run->rots[i];
	char *msg, *cause = NULL;
	va_list ap;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	free(r->res->error);
	r->res->error = msg;
	r->res->failed = r->done = 1;
	if (r->have_row) {
		free(r->row.error);
		r->row.error = xstrdup(msg);
		if (record(run, i, r->row.step, "failed", &cause) != 0) {
			note(run, LOG_ERROR, "%s: %s",
			    run->rm->hosts[i].in->name, cause);
			free(cause);
		}
	}
}

/* Keep a host's command output (capped) for its result. */
static void
phase_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct rotate_phase *ph = arg;

	(void)is_stderr;
	misc_buf_add(&ph->out[h - ph->rm->hosts], data, len, ph->out_max - 1);
}

/*
 * Run the engine on a fresh connection for each host with want[i] set,
 * logging in with the keys (and password) its engine_host holds, running
 * cmds[i]. Always a new login (settings.fresh, and no session is held): a
 * reused session would "verify" a key that does not work. Each host's
 * result is in ph->rm->hosts[i], what it printed in ph->out[i].
 */
void
rotate_phase_run(struct rotate_phase *ph, const int *want, char **cmds)
{
	struct remote *rm = ph->rm;
	struct engine_settings set;
	size_t i;
	int any = 0;

	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		engine_forget(h);
		h->skip = !want[i];
		if (!want[i])
			continue;
		any = 1;
		engine_host_clear(h);
		h->fail = EF_NONE;
		h->keys_error = NULL;
		h->command = cmds[i];
		ph->out[i].len = 0;
		ph->out[i].truncated = 0;
		if (ph->out[i].data != NULL)
			ph->out[i].data[0] = '\0';
	}
	if (!any)
		return;
	memset(&set, 0, sizeof set);
	set.fresh = 1;
	set.command = "true";
	set.fanout = rm->fleet->config->fanout;
	set.handshake_window = rm->fleet->config->handshake_window;
	set.connect_timeout = rm->fleet->config->connect_timeout;
	set.setup_timeout = rm->fleet->config->setup_timeout;
	set.command_timeout = 120;
	set.stdin_data = ph->stdin_data;
	set.stdin_len = ph->stdin_len;
	set.handle_sigint = ph->handle_sigint;
	rm->ops.output = phase_output;
	rm->ops.done = NULL;
	rm->ops.arg = ph;
	if (remote_run(rm, &set) != 0) {
		for (i = 0; i < rm->n; i++) {
			if (want[i]) {
				rm->hosts[i].fail = EF_SSH;
				free(rm->hosts[i].fail_msg);
				rm->hosts[i].fail_msg =
				    xstrdup("cannot start the event loop");
			}
		}
	}
	for (i = 0; i < rm->n; i++) {
		engine_forget(&rm->hosts[i]);
		rm->hosts[i].command = NULL;
	}
}

/*
 * Edit authorized_keys on each host with want[i] set, logging in as for
 * rotate_phase_run: the agent's authkeys (ab) where it is deployed, else
 * uploaded first on a second login (as status deploys it). The result is
 * as for rotate_phase_run.
 */
void
rotate_phase_edit(struct rotate_phase *ph, const int *want,
    const struct agent_bin *ab, const struct rotate_edit *ed)
{
	struct remote *rm = ph->rm;
	char **cmds = xcalloc(rm->n, sizeof *cmds);
	int *missing = xcalloc(rm->n, sizeof *missing), any = 0;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		if (want[i])
			cmds[i] = keys_authkeys_command(rm->hosts[i].in, ab,
			    ed[i].add, ed[i].like, ed[i].del, 0);
	}
	rotate_phase_run(ph, want, cmds);
	for (i = 0; i < rm->n; i++) {
		free(cmds[i]);
		cmds[i] = NULL;
		if (!want[i] || rm->hosts[i].fail != EF_NONE ||
		    rm->hosts[i].exit_signal != NULL ||
		    rm->hosts[i].exit_status != DEPLOY_EXIT_MISSING)
			continue;
		missing[i] = any = 1;
		cmds[i] = keys_authkeys_command(
		    rm->hosts[i].in, ab, ed[i].add, ed[i].like, ed[i].del, 1);
	}
	if (any) {
		ph->stdin_data = ab->data;
		ph->stdin_len = ab->len;
		rotate_phase_run(ph, missing, cmds);
		ph->stdin_data = NULL;
		ph->stdin_len = 0;
	}
	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		struct misc_buf *out = &ph->out[i];
		free(cmds[i]);
		if (missing[i] && h->fail == EF_NONE &&
		    h->exit_signal == NULL &&
		    h->exit_status >= DEPLOY_EXIT_WRITE &&
		    h->exit_status <= DEPLOY_EXIT_ARCH) {
			/* Say why the agent could not be put there. */
			char *why =
			    deploy_explain(h->exit_status, out->data, h->in);
			free(out->data);
			out->data = why;
			out->len = strlen(why);
			out->size = out->len + 1;
		}
	}
	free(cmds);
	free(missing);
}

/* Did host i's last command run and exit 0? */
int
rotate_phase_ok(struct rotate_phase *ph, size_t i)
{
	struct engine_host *h = &ph->rm->hosts[i];

	return h->fail == EF_NONE && h->exit_signal == NULL &&
	    h->exit_status == 0;
}

/* Why host i's last run failed, one line. Caller frees. */
char *
rotate_phase_error(struct rotate_phase *ph, size_t i)
{
	struct engine_host *h = &ph->rm->hosts[i];
	struct misc_buf *out = &ph->out[i];
	char *s, *p;

	if (h->fail != EF_NONE)
		return xstrdup(h->fail_msg != NULL ? h->fail_msg
						   : engine_fail_code(h->fail));
	for (p = out->data; p != NULL && *p != '\0'; p++) {
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	}
	while (out->len > 0 && out->data[out->len - 1] == ' ')
		out->data[--out->len] = '\0';
	if (h->exit_signal != NULL)
		xasprintf(&s, "killed by signal %s", h->exit_signal);
	else
		xasprintf(&s, "exit %d%s%s", h->exit_status,
		    out->len != 0 ? ": " : "", out->len != 0 ? out->data : "");
	return s;
}

/* Each host with want[i] set logs in with keys[i] only. */
static void
use_keys(struct run *run, const int *want, ssh_key *keys)
{
	size_t i;

	for (i = 0; i < run->rm->n; i++) {
		if (!want[i])
			continue;
		run->rm->hosts[i].keys[0] = keys[i];
		run->rm->hosts[i].nkeys = 1;
	}
}

/* Run cmds[i] on each host with want[i] set, logging in with keys[i] only. */
static void
run_phase(struct run *run, int *want, ssh_key *keys, char **cmds)
{
	use_keys(run, want, keys);
	rotate_phase_run(&run->ph, want, cmds);
}

/* Edit authorized_keys on each host with want[i] set, with keys[i] only. */
static void
edit_phase(struct run *run, int *want, ssh_key *keys, struct rotate_edit *ed)
{
	use_keys(run, want, keys);
	rotate_phase_edit(&run->ph, want, run->opts->ab, ed);
}

/*
 * The key host i logs in with now: its managed key, else the first key file
 * the keyring loaded for it (never an ssh-agent key: its refusal could not be
 * checked). Fills *key and *path (caller frees both) and *kid (0 when the
 * key is not managed); returns 0, or -1 with *cause set.
 */
static int
host_current_key(struct remote *rm, const char *pass, size_t i, ssh_key *key,
    char **path, int64_t *kid, char **cause)
{
	struct engine_host *h = &rm->hosts[i];
	struct keys_key k;
	const char *p = NULL;
	char *why = NULL;
	size_t j;
	int n, rc;

	*key = NULL;
	*path = NULL;
	if ((rc = keys_instance_key(rm->inv, h->in->id, kid, cause)) < 0)
		return -1;
	if (rc == 0) {
		if ((rc = keys_get(rm->inv, *kid, &k, cause)) != 0) {
			if (rc == 1)
				xasprintf(cause, "managed key %lld is missing",
				    (long long)*kid);
			return -1;
		}
		if (keys_load(k.path, pass, key, cause) != 0) {
			keys_key_clear(&k);
			return -1;
		}
		*path = k.path;
		k.path = NULL;
		keys_key_clear(&k);
		return 0;
	}
	*kid = 0;
	for (n = 0; n < h->nkeys && p == NULL; n++) {
		for (j = 0; h->keys[n] != NULL && j < rm->keyring.n; j++) {
			if (rm->keyring.items[j].key == h->keys[n]) {
				p = rm->keyring.items[j].path;
				break;
			}
		}
	}
	if (p == NULL) {
		xasprintf(cause,
		    "no key file for this instance (%s); an ssh-agent key "
		    "cannot be rotated",
		    h->keys_error != NULL ? h->keys_error : "only ssh-agent");
		return -1;
	}
	if (keys_load(p, NULL, key, &why) != 0 &&
	    keys_load(p, rm->keyring.passphrase, key, cause) != 0) {
		free(why);
		return -1;
	}
	free(why);
	*path = xstrdup(p);
	return 0;
}

/*
 * The key each host logs in with now, or NULL where the host failed (with
 * the reason). Caller frees the array and its keys.
 */
static ssh_key *
current_keys(struct run *run)
{
	struct remote *rm = run->rm;
	ssh_key *keys = xcalloc(rm->n, sizeof *keys);
	char *path, *why = NULL;
	int64_t kid;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		if (rm->hosts[i].fail != EF_NONE) {
			fail_host(run, i, "%s", rm->hosts[i].fail_msg);
			continue;
		}
		if (host_current_key(rm, run->opts->passphrase, i, &keys[i],
			&path, &kid, &why) != 0) {
			fail_host(run, i, "current key: %s", why);
			free(why);
			why = NULL;
			continue;
		}
		free(path);
	}
	return keys;
}

/*
 * Load host i's rotation: a failed or interrupted one continues from its
 * recorded step; otherwise a new one starts (from KEYS_STEP_NONE).
 */
static void
load_host(struct run *run, size_t i)
{
	struct remote *rm = run->rm;
	struct engine_host *h = &rm->hosts[i];
	struct rot *r = &run->rots[i];
	char *cause = NULL;
	int rc;

	if (h->fail != EF_NONE) {
		fail_host(run, i, "%s", h->fail_msg);
		return;
	}
	rc = keys_rotation_get(rm->inv, h->in->id, &r->row, &cause);
	if (rc < 0) {
		fail_host(
		    run, i, "%s", cause != NULL ? cause : "database error");
		free(cause);
		return;
	}
	if (rc == 0 && strcmp(r->row.state, "done") != 0 &&
	    strcmp(r->row.state, "reverted") != 0) {
		load_continued(run, i);
		return;
	}
	if (rc == 0 && strcmp(r->row.state, "reverted") == 0 &&
	    !run->opts->dry_run)
		drop_reverted(run, i, r->row.new_key_id);
	keys_rotation_clear(&r->row);
	load_new(run, i);
}

/* Continue host i's rotation from its recorded step: load both keys. */
static void
load_continued(struct run *run, size_t i)
{
	struct rot *r = &run->rots[i];
	const char *pass = run->opts->passphrase;
	char *cause = NULL, *why = NULL;

	r->have_row = 1;
	if (keys_get(run->rm->inv, r->row.new_key_id, &r->newk, &cause) != 0) {
		fail_host(
		    run, i, "%s", cause != NULL ? cause : "database error");
		free(cause);
		return;
	}
	if (run->opts->dry_run) {
		r->res->plan = ROTATE_PLAN_CONTINUE;
		r->res->untouched = r->done = 1;
		return;
	}
	if (keys_load(r->newk.path, pass, &r->newkey, &cause) != 0) {
		fail_host(run, i, "%s", cause);
		free(cause);
		return;
	}
	if (r->row.step < KEYS_STEP_REFUSED &&
	    keys_load(r->row.old_path, NULL, &r->oldkey, &why) != 0 &&
	    keys_load(r->row.old_path, pass, &r->oldkey, &cause) != 0) {
		fail_host(run, i, "old key: %s", cause);
		free(cause);
	}
	free(why);
}

/* A new rotation of host i: the old key is the one the host uses now. */
static void
load_new(struct run *run, size_t i)
{
	struct remote *rm = run->rm;
	struct rot *r = &run->rots[i];
	char *cause = NULL, *fp = NULL, *oldpath = NULL;
	int64_t kid;

	if (host_current_key(rm, run->opts->passphrase, i, &r->oldkey, &oldpath,
		&kid, &cause) != 0) {
		fail_host(run, i, "current key: %s", cause);
		free(cause);
		return;
	}
	r->row.instance_id = rm->hosts[i].in->id;
	r->row.old_key_id = kid;
	r->row.old_path = oldpath;
	if (keys_describe(r->oldkey, &r->row.old_type, &r->row.old_blob, &fp,
		&cause) != 0) {
		fail_host(run, i, "%s", cause);
		free(cause);
		return;
	}
	r->row.keep_old = run->opts->keep_old;
	if (run->opts->dry_run) {
		r->res->plan = ROTATE_PLAN_REPLACE;
		r->res->old_path = xstrdup(r->row.old_path);
		r->res->old_fingerprint = fp;
		r->res->untouched = r->done = 1;
		return;
	}
	free(fp);
}

/*
 * Step 1's work before its record: the new key of host i, made on disk
 * (with --shared, only for the first host; the others reuse it). 0, or -1
 * with the host failed.
 */
static int
make_key(struct run *run, size_t i)
{
	const struct rotate_opts *opts = run->opts;
	struct remote *rm = run->rm;
	struct rot *r = &run->rots[i];
	const char *host = rm->hosts[i].in->name;
	char *cause = NULL, *name = NULL, *dir = NULL;
	int rc = -1;

	if (opts->shared && run->shared_sshkey != NULL) {
		if (keys_get(rm->inv, run->shared_key.id, &r->newk, &cause) !=
		    0) {
			fail_host(run, i, "%s",
			    cause != NULL ? cause : "database error");
			goto out;
		}
		r->newkey = ssh_key_dup(run->shared_sshkey);
		rc = 0;
		goto out;
	}
	dir = keys_dir();
	if (keys_dated_name(rm->inv, dir, opts->shared ? "shared" : host,
		opts->now, &name) != 0) {
		fail_host(run, i, "cannot name a key for %s", host);
		goto out;
	}
	if (keys_generate(dir, opts->type, name, opts->passphrase, opts->now,
		&r->newk, &r->newkey, &cause) != 0) {
		fail_host(run, i, "%s", cause);
		goto out;
	}
	rotate_test_crash(KEYS_STEP_NONE);
	rc = 0;
out:
	free(cause);
	free(name);
	free(dir);
	return rc;
}

/* Does this step act on the host (else only in the database)? */
static int
is_remote(enum rotate_script script)
{
	return script == ROTATE_ADD || script == ROTATE_LOGIN ||
	    script == ROTATE_REMOVE || script == ROTATE_REFUSED;
}

/*
 * Take every host whose recorded step is s->from through step s, all at
 * once; in host order, each that did it records s->to before the next
 * host's record (and the next step) happens.
 */
static void
run_step(struct run *run, const struct rotate_step *s)
{
	struct remote *rm = run->rm;
	int *want = xcalloc(rm->n, sizeof *want);
	int *undo = xcalloc(rm->n, sizeof *undo);
	char **why = xcalloc(rm->n, sizeof *why);
	size_t i;
	int rc, any = 0;

	for (i = 0; i < rm->n; i++) {
		want[i] =
		    !run->rots[i].done && run->rots[i].row.step == s->from;
	}
	if (is_remote(s->script))
		remote_step(run, s, want);
	for (i = 0; i < rm->n; i++) {
		if (!want[i])
			continue;
		if ((rc = step_done(run, s, i, &why[i])) == 0)
			finish_step(run, s, i);
		undo[i] = rc == 1;
		any |= undo[i];
	}
	if (any)
		revert(run, undo, why);
	free(want);
	free(undo);
	free(why);
}

/*
 * The remote half of step s on the hosts with want[i] set, each logging
 * in with only the key the step proves or needs: the old one to add the
 * new key and to check it is refused, the new one to log in and to
 * remove the old key.
 */
static void
remote_step(struct run *run, const struct rotate_step *s, int *want)
{
	struct remote *rm = run->rm;
	ssh_key *keys = xcalloc(rm->n, sizeof *keys);
	struct rotate_edit *ed = xcalloc(rm->n, sizeof *ed);
	char **cmds = xcalloc(rm->n, sizeof *cmds);
	int with_new = s->script == ROTATE_LOGIN || s->script == ROTATE_REMOVE;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (!want[i])
			continue;
		keys[i] = with_new ? r->newkey : r->oldkey;
		cmds[i] = "true";
		/* The new key takes the old line's options (from=, ...). */
		ed[i].add = r->newk.pubkey;
		ed[i].like = r->row.old_blob;
		if (s->script == ROTATE_REMOVE &&
		    !authkeys_same_key(r->row.old_blob, strlen(r->row.old_blob),
			r->newk.blob, strlen(r->newk.blob)))
			ed[i].del = r->row.old_blob;
	}
	if (s->script == ROTATE_ADD || s->script == ROTATE_REMOVE)
		edit_phase(run, want, keys, ed);
	else
		run_phase(run, want, keys, cmds);
	free(keys);
	free(ed);
	free(cmds);
}

/*
 * Did step s do what it must on host i? 0 if so; -1 if not (the host is
 * failed); 1 if the new key did not log in and must be taken off again,
 * with *why (caller frees).
 */
static int
step_done(struct run *run, const struct rotate_step *s, size_t i, char **why)
{
	struct engine_host *h = &run->rm->hosts[i];
	char *e;

	switch (s->script) {
	case ROTATE_NEW_KEY:
		return make_key(run, i);
	case ROTATE_ADD:
	case ROTATE_REMOVE:
		if (h->fail == EF_NONE && h->exit_status == 0)
			return 0;
		e = rotate_phase_error(&run->ph, i);
		fail_host(run, i, "%s: %s", s->what, e);
		free(e);
		return -1;
	case ROTATE_LOGIN:
		if (h->fail == EF_NONE && h->exit_status == 0)
			return 0;
		*why = rotate_phase_error(&run->ph, i);
		return 1;
	case ROTATE_REFUSED:
		if (h->fail == EF_AUTH)
			return 0;
		if (h->fail == EF_NONE) {
			fail_host(run, i,
			    "%s: the old key still logs in (another "
			    "authorized_keys file, or re-injected by the "
			    "platform?)",
			    s->what);
			return -1;
		}
		e = rotate_phase_error(&run->ph, i);
		fail_host(run, i,
		    "%s: cannot confirm the old key is refused: %s", s->what,
		    e);
		free(e);
		return -1;
	case ROTATE_SWITCH:
	case ROTATE_RETIRE:
		break;
	}
	return 0;
}

/* Host i did step s: record it, then what follows the record. */
static void
finish_step(struct run *run, const struct rotate_step *s, size_t i)
{
	struct rot *r = &run->rots[i];
	const char *state = s->to == KEYS_STEP_RETIRED ? "done" : "running";
	char *cause = NULL;

	if (record(run, i, s->to, state, &cause) != 0) {
		/* A step done in the database alone failed in its record. */
		if (!is_remote(s->script) && s->what != NULL)
			fail_host(run, i, "%s: %s", s->what, cause);
		else
			fail_host(run, i, "%s",
			    cause != NULL ? cause : "database error");
		free(cause);
		return;
	}
	switch (s->script) {
	case ROTATE_NEW_KEY:
		r->have_row = 1;
		if (run->opts->shared && run->shared_sshkey == NULL) {
			run->shared_key.id = r->newk.id;
			run->shared_sshkey = ssh_key_dup(r->newkey);
		}
		break;
	case ROTATE_RETIRE:
		r->done = 1;
		retire_old_key(run, i);
		break;
	default:
		break;
	}
	rotate_test_crash(s->to);
}

/*
 * The new key did not log in on the hosts with undo[i] set (why[i] says
 * how; freed here): remove its line again, logging in with the old key,
 * which was never touched, and report the host failed.
 */
static void
revert(struct run *run, int *undo, char **why)
{
	struct remote *rm = run->rm;
	ssh_key *keys = xcalloc(rm->n, sizeof *keys);
	struct rotate_edit *ed = xcalloc(rm->n, sizeof *ed);
	char *cause = NULL, *uw;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		keys[i] = run->rots[i].oldkey;
		ed[i].del = run->rots[i].newk.blob;
	}
	edit_phase(run, undo, keys, ed);
	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (!undo[i])
			continue;
		if (rm->hosts[i].fail != EF_NONE ||
		    rm->hosts[i].exit_status != 0) {
			uw = rotate_phase_error(&run->ph, i);
			fail_host(run, i,
			    "step 3: the new key did not log in (%s), and "
			    "removing it again failed (%s); the old key still "
			    "works",
			    why[i], uw);
			free(uw);
			free(why[i]);
			continue;
		}
		/* Back to before step 1; a rerun starts afresh. */
		free(r->row.error);
		xasprintf(&r->row.error,
		    "the new key did not log in (%s); removed it again, the "
		    "old key stays",
		    why[i]);
		if (record(run, i, r->row.step, "reverted", &cause) != 0) {
			note(run, LOG_ERROR, "%s", cause);
			free(cause);
			cause = NULL;
		}
		r->res->error = xstrdup(r->row.error);
		r->res->failed = r->done = 1;
		drop_reverted(run, i, r->newk.id);
		free(why[i]);
	}
	free(keys);
	free(ed);
}

/*
 * A rotation of host i to key_id was reverted: delete that key if nothing
 * else needs it (a --shared key may be in use elsewhere). Where that fails
 * the key stays an orphan that keys ls shows and keys gc removes.
 */
static void
drop_reverted(struct run *run, size_t i, int64_t key_id)
{
	char *dir = keys_dir(), *cause = NULL;

	if (keys_drop_reverted(run->rm->inv, dir, key_id, &cause) < 0) {
		note(run, LOG_WARN,
		    "%s: cannot delete the key of the reverted rotation: %s "
		    "(see gpufleet keys gc)",
		    run->rm->hosts[i].in->name, cause);
		free(cause);
	}
	free(dir);
}

/*
 * Step 7, once recorded: delete host i's old private key if gpufleet made
 * it, no instance uses it and no rotation still needs it (unless the
 * rotation keeps it). A key gpufleet did not make (the user's own) is
 * never deleted.
 */
static void
retire_old_key(struct run *run, size_t i)
{
	struct rot *r = &run->rots[i];
	struct inventory *inv = run->rm->inv;
	struct keys_key old;
	char *cause = NULL, *pub;

	if (r->row.old_key_id == 0 || r->row.keep_old)
		return;
	if (keys_in_use(inv, r->row.old_key_id, &cause) != 0 ||
	    keys_get(inv, r->row.old_key_id, &old, &cause) != 0) {
		free(cause);
		return;
	}
	if (old.deleted_at == 0) {
		xasprintf(&pub, "%s.pub", old.path);
		if ((unlink(old.path) == 0 || errno == ENOENT) &&
		    keys_mark_deleted(inv, old.id, time(NULL), &cause) == 0)
			unlink(pub);
		free(pub);
		free(cause);
	}
	keys_key_clear(&old);
}

/*
 * Rotate the key of each host of rm (see the top of this file), or with
 * opts->dry_run only say what would be done. Fills res (caller frees with
 * rotate_result_free) and returns 0, or a negative status with *cause set
 * and res empty where the database cannot be made ready (another rotation
 * holds it).
 */
int
rotate_keys(struct remote *rm, const struct rotate_opts *opts,
    struct rotate_result *res, char **cause)
{
	const struct rotate_step *s;
	struct run run;
	size_t i;
	int r;

	memset(res, 0, sizeof *res);
	if (!opts->dry_run &&
	    ((r = keys_sync_full(rm->inv, cause)) != 0 ||
		(r = keys_lock(rm->inv, cause)) != 0))
		return r;
	run_init(&run, rm, opts, res);
	for (i = 0; i < rm->n; i++)
		load_host(&run, i);
	if (!opts->dry_run) {
		for (s = rotate_step_from(KEYS_STEP_NONE); s != NULL;
		     s = rotate_step_from(s->to))
			run_step(&run, s);
		keys_unlock(rm->inv);
	}
	run_free(&run);
	return 0;
}

/*
 * Revoke the key (type, base64 blob, fingerprint fp) on each host of rm,
 * logging in with the key gpufleet uses there, so another key is proven to
 * work first; a host whose only key is the revoked one is refused. Then
 * another fresh login reads the file back, and the host has no error only
 * if no line's key is the blob (untouched: it was not there). Fills res
 * as rotate_keys does.
 */
int
rotate_revoke(struct remote *rm, const struct rotate_opts *opts,
    const char *type, const char *blob, const char *fp,
    struct rotate_result *res, char **cause)
{
	struct run run;
	ssh_key *keys;
	int *want, r;
	size_t i;

	memset(res, 0, sizeof *res);
	run_init(&run, rm, opts, res);
	keys = current_keys(&run);
	want = xcalloc(rm->n, sizeof *want);
	if ((r = keys_sync_full(rm->inv, cause)) == 0 &&
	    (r = keys_lock(rm->inv, cause)) == 0) {
		revoke_edit(&run, keys, type, blob, fp, want);
		revoke_prove(&run, keys, blob, fp, want);
		keys_unlock(rm->inv);
	}
	for (i = 0; i < rm->n; i++)
		ssh_key_free(keys[i]);
	free(keys);
	free(want);
	run_free(&run);
	if (r != 0)
		rotate_result_free(res);
	return r;
}

/*
 * Remove the revoked blob on each host that has a current key other than
 * it, and list it as taken off there; want[i] is set for the hosts to
 * prove it on.
 */
static void
revoke_edit(struct run *run, ssh_key *keys, const char *type, const char *blob,
    const char *fp, int *want)
{
	struct remote *rm = run->rm;
	struct inventory *inv = rm->inv;
	struct rotate_edit *ed = xcalloc(rm->n, sizeof *ed);
	char *cause = NULL, *why, *ctype, *cblob, *cfp;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		if (run->rots[i].res->failed)
			continue;
		if (keys_describe(keys[i], &ctype, &cblob, &cfp, &cause) == 0) {
			if (authkeys_same_key(
				cblob, strlen(cblob), blob, strlen(blob)))
				fail_host(run, i,
				    "gpufleet logs in here with %s itself; "
				    "rotate first (keys rotate %s)",
				    fp, rm->hosts[i].in->name);
			free(ctype);
			free(cblob);
			free(cfp);
		}
		free(cause);
		cause = NULL;
		if (run->rots[i].res->failed)
			continue;
		want[i] = 1;
		ed[i].del = blob;
	}
	edit_phase(run, want, keys, ed);
	for (i = 0; i < rm->n; i++) {
		struct rot *rt = &run->rots[i];
		if (!want[i])
			continue;
		if (rm->hosts[i].fail != EF_NONE ||
		    rm->hosts[i].exit_status != 0) {
			why = rotate_phase_error(&run->ph, i);
			fail_host(run, i, "cannot remove the key: %s", why);
			free(why);
			want[i] = 0;
			continue;
		}
		rt->res->untouched = run->ph.out[i].len == 0 ||
		    strncmp(run->ph.out[i].data, "unchanged", 9) == 0;
		if (inventory_begin(inv, &cause) != 0 ||
		    keys_retire_blob(inv, rm->hosts[i].in->id, type, blob,
			"revoked", &cause) != 0 ||
		    inventory_commit(inv, &cause) != 0) {
			if (inv->in_txn)
				inventory_rollback(inv);
			fail_host(run, i, "%s", cause);
			free(cause);
			cause = NULL;
			want[i] = 0;
		}
	}
	free(ed);
}

/*
 * The proof of a revoke on the hosts with want[i] set: a fresh login with
 * the current key still works, and no line of the file it reads holds the
 * key, by the same parser.
 */
static void
revoke_prove(
    struct run *run, ssh_key *keys, const char *blob, const char *fp, int *want)
{
	struct remote *rm = run->rm;
	char **cmds = xcalloc(rm->n, sizeof *cmds), *why;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		if (want[i])
			cmds[i] = keys_cat_script(
			    rm->hosts[i].in->authorized_keys_file);
	}
	run_phase(run, want, keys, cmds);
	for (i = 0; i < rm->n; i++) {
		struct misc_buf *out = &run->ph.out[i];
		free(cmds[i]);
		if (!want[i])
			continue;
		if (rm->hosts[i].fail != EF_NONE ||
		    rm->hosts[i].exit_status != 0) {
			why = rotate_phase_error(&run->ph, i);
			fail_host(run, i,
			    "revoked, but the login check after it failed: %s",
			    why);
			free(why);
		} else if (keys_text_has_blob(
			       out->data != NULL ? out->data : "", out->len,
			       blob))
			fail_host(run, i,
			    "%s is still in %s after its removal (re-added at "
			    "once?)",
			    fp, rm->hosts[i].in->authorized_keys_file);
	}
	free(cmds);
}

/*
 * keys check: read authorized_keys on each host of rm, logging in with its
 * current key (decrypted with passphrase), and set found where a key taken
 * off (rotated out or revoked) is back. Fills res (caller frees).
 */
void
rotate_check(
    struct remote *rm, const char *passphrase, struct rotate_result *res)
{
	struct rotate_opts opts;
	struct run run;
	ssh_key *keys;
	char **cmds, *cause = NULL, *why;
	int *want, r;
	size_t i;

	memset(&opts, 0, sizeof opts);
	opts.passphrase = passphrase;
	memset(res, 0, sizeof *res);
	run_init(&run, rm, &opts, res);
	keys = current_keys(&run);
	want = xcalloc(rm->n, sizeof *want);
	cmds = xcalloc(rm->n, sizeof *cmds);
	for (i = 0; i < rm->n; i++) {
		if (run.rots[i].res->failed)
			continue;
		want[i] = 1;
		cmds[i] =
		    keys_cat_script(rm->hosts[i].in->authorized_keys_file);
	}
	run_phase(&run, want, keys, cmds);
	for (i = 0; i < rm->n; i++) {
		struct rot *rt = &run.rots[i];
		free(cmds[i]);
		ssh_key_free(keys[i]);
		if (want[i] &&
		    (rm->hosts[i].fail != EF_NONE ||
			rm->hosts[i].exit_status != 0)) {
			why = rotate_phase_error(&run.ph, i);
			fail_host(
			    &run, i, "cannot read authorized_keys: %s", why);
			free(why);
		}
		if (rt->res->failed)
			continue;
		r = keys_reinjected(rm->inv, rm->hosts[i].in->id,
		    run.ph.out[i].len != 0 ? run.ph.out[i].data : "",
		    &rt->res->found, &cause);
		if (r < 0) {
			fail_host(
			    &run, i, "%s", cause != NULL ? cause : "failed");
			free(cause);
			cause = NULL;
		}
	}
	free(keys);
	free(want);
	free(cmds);
	run_free(&run);
}
