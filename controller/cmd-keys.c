/*
 * The SSH keys gpufleet manages, and their rotation: `keys gen` makes a key,
 * `keys ls` shows the keys with the instances using them, `keys status` the
 * key and rotation state of each instance, and `keys rotate` replaces the
 * key of each selected instance by a fresh one in an order that cannot lock
 * the user out (see rotate_host_steps below).
 */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "engine.h"
#include "gpufleet/authkeys.h"
#include "keys.h"
#include "log.h"
#include "remote.h"
#include "status.h"
#include "xmalloc.h"

#define OUT_MAX (256 * 1024)

struct rot {
	struct keys_rotation row;
	int have_row;
	struct keys_key newk;
	ssh_key newkey;
	ssh_key oldkey;
	int done;      /* nothing more for this run */
	int failed;    /* done, with error */
	int untouched; /* dry run, or nothing done */
	char *error;   /* why it failed */
	char *out;     /* output of the last remote command, capped */
	size_t outlen;
	size_t outcap;
};

struct rotate_run {
	struct remote *rm;
	struct rot *rots;
	const char *passphrase; /* keys.c's one copy, or NULL */
	const char *type;
	int keep_old;
	int shared;
	int json;
	time_t now;
	struct keys_key shared_key;
	ssh_key shared_sshkey;
	struct agent_bin ab;	/* the agent, which edits authorized_keys */
	const char *stdin_data; /* for run_phase, or NULL */
	size_t stdin_len;
};

/* One edit of a host's authorized_keys (see keys_authkeys_command). */
struct edit {
	const char *add;
	const char *like;
	const char *del;
};

static int cmd_keys_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int keys_gen(struct cmd_ctx *, int, char **);
static int keys_ls(struct cmd_ctx *, int, char **);
static int keys_status(struct cmd_ctx *, int, char **);
static int keys_rotate(struct cmd_ctx *, int, char **);
static int keys_check(struct cmd_ctx *, int, char **);
static int keys_gc(struct cmd_ctx *, int, char **);
static int keys_revoke(struct cmd_ctx *, const char *, const char *, int);
static int open_run(
    struct cmd_ctx *, const char *, struct rotate_run *, ssh_key **, char **);
static char *age_string(int64_t, time_t);
static int unique_name(struct inventory *, const char *, const char *, char **);
static void crash_hook(int);
static int record(struct rotate_run *, size_t, int, const char *, char **);
static void fail_host(struct rotate_run *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static void on_output(struct engine_host *, int, const char *, size_t, void *);
static void run_phase(struct rotate_run *, int *, ssh_key *, char **);
static void edit_phase(struct rotate_run *, int *, ssh_key *, struct edit *);
static char *host_error(struct rotate_run *, size_t);
static int host_current_key(struct remote *, const char *, size_t, ssh_key *,
    char **, int64_t *, char **);
static int prepare_host(struct rotate_run *, size_t, int);
static void step_add(struct rotate_run *);
static void step_verify(struct rotate_run *);
static void step_switch(struct rotate_run *);
static void step_remove(struct rotate_run *);
static void step_refused(struct rotate_run *);
static void step_retire(struct rotate_run *);
static void rotate_free(struct rotate_run *);
static void drop_reverted(struct rotate_run *, size_t, int64_t);

const struct cmd_entry cmd_keys_entry = {
	.name = "keys",
	.usage = "gen|ls|status|rotate|check|gc [options]",
	.summary = "manage the SSH keys of instances and rotate them",
	.help =
	    "  keys gen [--type ed25519|ecdsa|rsa] [--name NAME]\n"
	    "        make a key in $XDG_DATA_HOME/gpufleet/keys (0700; key "
	    "0600)\n"
	    "  keys ls [--json]\n"
	    "        keys, their fingerprints, ages and the instances using "
	    "them, and\n"
	    "        orphans: key files whose record never committed (a "
	    "kill in between)\n"
	    "        or made for a rotation that was reverted\n"
	    "  keys gc\n"
	    "        delete the orphan key files\n"
	    "  keys status [SELECTOR]\n"
	    "        each instance's key and the state of its last rotation\n"
	    "  keys rotate SELECTOR [--type T] [--dry-run] [--json] "
	    "[--keep-old] [--shared]\n"
	    "        give each instance a fresh key (one per instance; "
	    "--shared: one\n"
	    "        for all selected). Per host, each step recorded before "
	    "the next:\n"
	    "        1 new key made; 2 added to authorized_keys (with the old "
	    "line's\n"
	    "        options); 3 a fresh "
	    "login with\n"
	    "        only the new key; 4 the inventory switches; 5 the old "
	    "key removed\n"
	    "        (any spelling); 6 a login with only the old key is "
	    "refused; 7 the\n"
	    "        old private key deleted once unused (kept with "
	    "--keep-old).\n"
	    "        If step 3 fails the new key is removed again and the old "
	    "one stays.\n"
	    "        Rerun after a crash or failure: each host continues from "
	    "its step.\n"
	    "  keys rotate SELECTOR --revoke PUBKEY_FILE\n"
	    "        remove a compromised key (any spelling) from each "
	    "instance, after\n"
	    "        logging in there with the key gpufleet uses (which must "
	    "differ);\n"
	    "        \"revoked\" once a fresh login reads the file again "
	    "and no line has it\n"
	    "  keys check SELECTOR\n"
	    "        warn where a key rotated out or revoked is back in "
	    "authorized_keys\n"
	    "        (platforms re-add console keys when a container "
	    "starts)\n\n"
	    "A passphrase for new keys: the first line of the file named by "
	    "[keys]\npassphrase_file in the config (or the environment "
	    "variable\nGPUFLEET_KEYS_PASSPHRASE_FILE, which overrides it); "
	    "\"ask\": "
	    "asked once per\nrun on the terminal.\n",
	.exec = cmd_keys_exec,
};

enum { OPT_JSON = 256, OPT_DRY_RUN, OPT_KEEP_OLD, OPT_SHARED, OPT_REVOKE };

static const struct option keys_options[] = {
	{ "type", required_argument, NULL, 't' },
	{ "name", required_argument, NULL, 'n' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
	{ "keep-old", no_argument, NULL, OPT_KEEP_OLD },
	{ "shared", no_argument, NULL, OPT_SHARED },
	{ "revoke", required_argument, NULL, OPT_REVOKE },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int
cmd_keys_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	const char *sub;

	if (argc < 2)
		return cmd_usage_error(
		    e, "needs gen, ls, status, rotate, check or gc");
	sub = argv[1];
	if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0)
		return cmd_help(stdout, "keys");
	if (strcmp(sub, "gen") == 0)
		return keys_gen(ctx, argc - 1, argv + 1);
	if (strcmp(sub, "ls") == 0)
		return keys_ls(ctx, argc - 1, argv + 1);
	if (strcmp(sub, "status") == 0)
		return keys_status(ctx, argc - 1, argv + 1);
	if (strcmp(sub, "rotate") == 0)
		return keys_rotate(ctx, argc - 1, argv + 1);
	if (strcmp(sub, "check") == 0)
		return keys_check(ctx, argc - 1, argv + 1);
	if (strcmp(sub, "gc") == 0)
		return keys_gc(ctx, argc - 1, argv + 1);
	return cmd_usage_error(e, "unknown subcommand '%s'", sub);
}

/* "3d", "5h", "12m" or "40s" since t. Caller frees. */
static char *
age_string(int64_t t, time_t now)
{
	int64_t d = (int64_t)now - t;
	char *s;

	if (d < 0)
		d = 0;
	if (d >= 86400)
		xasprintf(&s, "%lldd", (long long)(d / 86400));
	else if (d >= 3600)
		xasprintf(&s, "%lldh", (long long)(d / 3600));
	else if (d >= 60)
		xasprintf(&s, "%lldm", (long long)(d / 60));
	else
		xasprintf(&s, "%llds", (long long)d);
	return s;
}

/*
 * A key name from base that neither the inventory nor the keys directory
 * has yet: base, base-2, base-3... Caller frees *name.
 */
static int
unique_name(
    struct inventory *inv, const char *dir, const char *base, char **name)
{
	struct keys_key k;
	char *n, *path, *cause = NULL;
	int i, r;

	for (i = 1; i < 1000; i++) {
		if (i == 1)
			n = xstrdup(base);
		else
			xasprintf(&n, "%s-%d", base, i);
		xasprintf(&path, "%s/%s", dir, n);
		r = keys_get_by_name(inv, n, &k, &cause);
		keys_key_clear(&k);
		free(cause);
		cause = NULL;
		if (r == 1 && access(path, F_OK) != 0) {
			free(path);
			*name = n;
			return 0;
		}
		free(path);
		free(n);
	}
	return -1;
}

/* keys gen: make one managed key. */
static int
keys_gen(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_keys_entry;
	struct inventory *inv = NULL;
	struct keys_key k;
	const char *type = NULL, *name = NULL;
	char *dir = NULL, *cause = NULL, *gen = NULL, base[64];
	const char *pass;
	enum ssh_keytypes_e t;
	time_t now = time(NULL);
	struct tm tm;
	int ch, status, bits, r, locked = 0;

	memset(&k, 0, sizeof k);
	while ((ch = cmd_getopt(
		    e, argc, argv, "t:n:h", keys_options, &status)) != -1) {
		switch (ch) {
		case -2:
			return status;
		case 't':
			type = optarg;
			break;
		case 'n':
			name = optarg;
			break;
		default:
			return cmd_usage_error(e, "gen takes --type, --name");
		}
	}
	if (optind != argc)
		return cmd_usage_error(e, "gen takes no arguments");
	if (keys_parse_type(type, &t, &bits, &cause) != 0 ||
	    (name != NULL && keys_check_name(name, &cause) != 0))
		return cmd_fail(GF_EUSAGE, cause);
	pass = keys_passphrase(&cause);
	if (cause != NULL)
		return cmd_fail(GF_EUSAGE, cause);
	if ((status = cmd_open(ctx, &inv)) != 0)
		goto out;
	dir = keys_dir();
	if (name == NULL) {
		gmtime_r(&now, &tm);
		strftime(base, sizeof base, "key-%Y%m%d-%H%M%S", &tm);
		if (unique_name(inv, dir, base, &gen) != 0) {
			status =
			    cmd_fail(GF_EUSAGE, xstrdup("no free key name"));
			goto out;
		}
		name = gen;
	}
	if ((r = keys_lock(inv, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	locked = 1;
	if ((r = keys_generate(dir, type, name, pass, now, &k, NULL, &cause)) ==
	    0)
		crash_hook(KEYS_STEP_NONE);
	if (r != 0 || (r = keys_add(inv, &k, &cause)) != 0) {
		if (k.path != NULL && r != 0) {
			unlink(k.path);
			free(dir);
			xasprintf(&dir, "%s.pub", k.path);
			unlink(dir);
		}
		status = cmd_fail(-r, cause);
		goto out;
	}
	printf("%s %s %s\n", k.name, k.fingerprint, k.path);
	status = GF_OK;
out:
	keys_key_clear(&k);
	keys_passphrase_clear();
	free(gen);
	free(dir);
	if (locked)
		keys_unlock(inv);
	inventory_close(inv);
	return status;
}

/* keys ls: every managed key with its instances. */
static int
keys_ls(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_keys_entry;
	struct inventory *inv = NULL;
	struct keys_key *list = NULL;
	struct table *t;
	json_t *arr, *o;
	struct keys_orphan *orphans = NULL;
	size_t n = 0, i, norphans = 0;
	char *cause = NULL, *users, *age, *dir;
	time_t now = time(NULL);
	int ch, status, json = 0, r;

	while ((ch = cmd_getopt(e, argc, argv, "h", keys_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		if (ch != OPT_JSON)
			return cmd_usage_error(e, "ls takes --json");
		json = 1;
	}
	if (optind != argc)
		return cmd_usage_error(e, "ls takes no arguments");
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = keys_list(inv, &list, &n, &cause)) != 0) {
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	dir = keys_dir();
	if ((r = keys_orphans(inv, dir, &orphans, &norphans, &cause)) != 0) {
		free(dir);
		keys_free_array(list, n);
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	free(dir);
	arr = json_array();
	t = table_new(
	    6, "NAME", "TYPE", "FINGERPRINT", "AGE", "STATE", "INSTANCES");
	for (i = 0; i < n; i++) {
		users = keys_instances_using(inv, list[i].id);
		age = age_string(list[i].created_at, now);
		if (json) {
			o = json_object();
			json_object_set_new(
			    o, "name", json_string(list[i].name));
			json_object_set_new(
			    o, "type", json_string(list[i].type));
			json_object_set_new(
			    o, "fingerprint", json_string(list[i].fingerprint));
			json_object_set_new(
			    o, "path", json_string(list[i].path));
			json_object_set_new(
			    o, "public_key", json_string(list[i].pubkey));
			json_object_set_new(
			    o, "created_at", json_integer(list[i].created_at));
			json_object_set_new(o, "deleted",
			    json_boolean(list[i].deleted_at != 0));
			json_object_set_new(o, "instances", json_string(users));
			json_array_append_new(arr, o);
		} else
			table_add(t, list[i].name, list[i].type,
			    list[i].fingerprint, age,
			    list[i].deleted_at != 0 ? "deleted" : "present",
			    *users != '\0' ? users : "-");
		free(users);
		free(age);
	}
	for (i = 0; i < norphans; i++) {
		struct keys_orphan *x = &orphans[i];
		if (json) {
			o = json_object();
			json_object_set_new(o, "name", json_string(x->name));
			json_object_set_new(o, "path", json_string(x->path));
			json_object_set_new(o, "orphan", json_string(x->why));
			json_array_append_new(arr, o);
			continue;
		}
		age = age_string(x->mtime, now);
		table_add(t, x->name, "-", "-", age, "orphan", "-");
		free(age);
	}
	if (json)
		json_print(arr, stdout); /* frees arr */
	else {
		table_print(t, stdout);
		json_decref(arr);
	}
	if (norphans > 0)
		warn_msg(
		    "%zu orphan key%s (%s%s); remove with gpufleet keys gc",
		    norphans, norphans == 1 ? "" : "s", orphans[0].why,
		    norphans > 1 ? ", ..." : "");
	table_free(t);
	keys_free_array(list, n);
	keys_orphans_free(orphans, norphans);
	inventory_close(inv);
	return GF_OK;
}

/* keys gc: delete the orphan key files keys ls shows. */
static int
keys_gc(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_keys_entry;
	struct inventory *inv = NULL;
	struct keys_orphan *o = NULL;
	size_t n = 0, i;
	char *dir, *cause = NULL;
	int ch, status, r, bad = 0;

	while ((ch = cmd_getopt(e, argc, argv, "h", keys_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		return cmd_usage_error(e, "gc takes no options");
	}
	if (optind != argc)
		return cmd_usage_error(e, "gc takes no arguments");
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	/* No rotation or gen may be between writing a key and its row. */
	if ((r = keys_lock(inv, &cause)) != 0) {
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	dir = keys_dir();
	if ((r = keys_orphans(inv, dir, &o, &n, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	if (n == 0)
		fprintf(stderr, "gpufleet: keys gc: no orphan key files\n");
	for (i = 0; i < n; i++) {
		if (keys_remove_orphan(inv, &o[i], &cause) != 0) {
			error("%s", cause);
			free(cause);
			cause = NULL;
			bad = 1;
			continue;
		}
		printf("removed %s (%s)\n", o[i].name, o[i].why);
	}
	status = bad ? GF_EDB : GF_OK;
out:
	keys_orphans_free(o, n);
	free(dir);
	keys_unlock(inv);
	inventory_close(inv);
	return status;
}

/* keys status: each selected instance's key and rotation state. */
static int
keys_status(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_keys_entry;
	struct inventory *inv = NULL;
	struct instance *list = NULL;
	struct keys_rotation rot;
	struct keys_key k;
	struct table *t;
	size_t n = 0, i;
	int64_t kid;
	char *cause = NULL, *step;
	int ch, status, r;

	while ((ch = cmd_getopt(e, argc, argv, "h", keys_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		return cmd_usage_error(e, "status takes no options");
	}
	if (argc - optind > 1)
		return cmd_usage_error(e, "status takes one SELECTOR");
	if ((status = cmd_open(ctx, &inv)) != 0)
		return status;
	if ((r = inventory_select(inv, optind < argc ? argv[optind] : "all",
		 &list, &n, &cause)) != 0) {
		inventory_close(inv);
		return cmd_fail(-r, cause);
	}
	t = table_new(4, "NAME", "KEY", "ROTATION", "ERROR");
	for (i = 0; i < n; i++) {
		memset(&k, 0, sizeof k);
		if (keys_instance_key(inv, list[i].id, &kid, &cause) == 0)
			keys_get(inv, kid, &k, &cause);
		free(cause);
		cause = NULL;
		r = keys_rotation_get(inv, list[i].id, &rot, &cause);
		free(cause);
		cause = NULL;
		if (r == 0)
			xasprintf(&step, "%s, step %d/7", rot.state, rot.step);
		else
			step = xstrdup("-");
		table_add(t, list[i].name,
		    k.name != NULL
			? k.name
			: (list[i].identity != NULL ? list[i].identity
						    : "(default)"),
		    step,
		    r == 0 && rot.error != NULL && *rot.error != '\0'
			? rot.error
			: "-");
		free(step);
		keys_key_clear(&k);
		keys_rotation_clear(&rot);
	}
	table_print(t, stdout);
	table_free(t);
	instance_free_array(list, n);
	inventory_close(inv);
	return GF_OK;
}

/*
 * The test hook: GPUFLEET_TEST_CRASH_AT=N kills us right after step N; 0
 * right after a new key's files are written, before its row commits.
 */
static void
crash_hook(int step)
{
	const char *s = getenv("GPUFLEET_TEST_CRASH_AT");

	if (s != NULL && *s != '\0' && strtol(s, NULL, 10) == step)
		raise(SIGKILL);
}

/*
 * Record a host's step (and state) durably in its own IMMEDIATE
 * transaction before anything else happens.
 */
static int
record(
    struct rotate_run *run, size_t i, int step, const char *state, char **cause)
{
	struct rot *r = &run->rots[i];
	int rc;

	r->row.step = step;
	free(r->row.state);
	r->row.state = xstrdup(state);
	if ((rc = inventory_begin(run->rm->inv, cause)) != 0)
		return rc;
	if ((step == KEYS_STEP_REFUSED &&
		(rc = keys_retire_blob(run->rm->inv, r->row.instance_id,
		     r->row.old_type, r->row.old_blob, "rotated", cause)) !=
		    0) ||
	    (rc = keys_rotation_put(run->rm->inv, &r->row, cause)) != 0) {
		inventory_rollback(run->rm->inv);
		return rc;
	}
	return inventory_commit(run->rm->inv, cause);
}

/* Mark a host failed for this run, recording why (its step stays). */
static void
fail_host(struct rotate_run *run, size_t i, const char *fmt, ...)
{
	struct rot *r = &run->rots[i];
	char *msg, *cause = NULL;
	va_list ap;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	free(r->error);
	r->error = msg;
	r->failed = r->done = 1;
	if (r->have_row) {
		free(r->row.error);
		r->row.error = xstrdup(msg);
		if (record(run, i, r->row.step, "failed", &cause) != 0) {
			error("%s: %s", run->rm->hosts[i].in->name, cause);
			free(cause);
		}
	}
}

static void
on_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct rotate_run *run = arg;
	struct rot *r = &run->rots[h - run->rm->hosts];

	(void)is_stderr;
	if (len > OUT_MAX - 1 - r->outlen)
		len = OUT_MAX - 1 - r->outlen;
	if (r->outlen + len + 1 > r->outcap) {
		r->outcap = (r->outlen + len + 1) * 2;
		r->out = xreallocarray(r->out, 1, r->outcap);
	}
	memcpy(r->out + r->outlen, data, len);
	r->outlen += len;
	r->out[r->outlen] = '\0';
}

/*
 * Run the engine on a fresh connection for each host with want[i] set,
 * authenticating with keys[i] only, running cmds[i]. Always a new login
 * (settings.fresh, and no session is held): a reused session would
 * "verify" a key that does not work.
 */
static void
run_phase(struct rotate_run *run, int *want, ssh_key *keys, char **cmds)
{
	struct remote *rm = run->rm;
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
		h->keys[0] = keys[i];
		h->nkeys = 1;
		h->keys_error = NULL;
		h->command = cmds[i];
		run->rots[i].outlen = 0;
		if (run->rots[i].out != NULL)
			run->rots[i].out[0] = '\0';
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
	rm->ops.output = on_output;
	rm->ops.done = NULL;
	rm->ops.arg = run;
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
 * Edit authorized_keys on each host with want[i] set, logging in with
 * keys[i] only: the agent's authkeys where it is deployed, else uploaded
 * first on a second login (as status deploys it). The result is in
 * rm->hosts[i] and run->rots[i].out as for run_phase.
 */
static void
edit_phase(struct rotate_run *run, int *want, ssh_key *keys, struct edit *ed)
{
	struct remote *rm = run->rm;
	char **cmds = xcalloc(rm->n, sizeof *cmds);
	int *missing = xcalloc(rm->n, sizeof *missing), any = 0;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		if (want[i])
			cmds[i] = keys_authkeys_command(rm->hosts[i].in,
			    &run->ab, ed[i].add, ed[i].like, ed[i].del, 0);
	}
	run_phase(run, want, keys, cmds);
	for (i = 0; i < rm->n; i++) {
		free(cmds[i]);
		cmds[i] = NULL;
		if (!want[i] || rm->hosts[i].fail != EF_NONE ||
		    rm->hosts[i].exit_signal != NULL ||
		    rm->hosts[i].exit_status != DEPLOY_EXIT_MISSING)
			continue;
		missing[i] = any = 1;
		cmds[i] = keys_authkeys_command(rm->hosts[i].in, &run->ab,
		    ed[i].add, ed[i].like, ed[i].del, 1);
	}
	if (any) {
		run->stdin_data = run->ab.data;
		run->stdin_len = run->ab.len;
		run_phase(run, missing, keys, cmds);
		run->stdin_data = NULL;
		run->stdin_len = 0;
	}
	for (i = 0; i < rm->n; i++) {
		free(cmds[i]);
		if (missing[i] && rm->hosts[i].fail == EF_NONE &&
		    rm->hosts[i].exit_signal == NULL &&
		    rm->hosts[i].exit_status >= DEPLOY_EXIT_WRITE &&
		    rm->hosts[i].exit_status <= DEPLOY_EXIT_ARCH) {
			/* Say why the agent could not be put there. */
			char *why = deploy_explain(rm->hosts[i].exit_status,
			    run->rots[i].out, rm->hosts[i].in);
			free(run->rots[i].out);
			run->rots[i].out = why;
			run->rots[i].outlen = strlen(why);
			run->rots[i].outcap = run->rots[i].outlen + 1;
		}
	}
	free(cmds);
	free(missing);
}

/* Why a host's last run failed, one line. Caller frees. */
static char *
host_error(struct rotate_run *run, size_t i)
{
	struct engine_host *h = &run->rm->hosts[i];
	struct rot *r = &run->rots[i];
	char *s, *p;

	if (h->fail != EF_NONE)
		return xstrdup(h->fail_msg != NULL ? h->fail_msg
						   : engine_fail_code(h->fail));
	for (p = r->out; p != NULL && *p != '\0'; p++) {
		if (*p == '\n')
			*p = ' ';
	}
	while (r->outlen > 0 && r->out[r->outlen - 1] == ' ')
		r->out[--r->outlen] = '\0';
	if (h->exit_signal != NULL)
		xasprintf(&s, "killed by signal %s", h->exit_signal);
	else
		xasprintf(&s, "exit %d%s%s", h->exit_status,
		    r->outlen != 0 ? ": " : "", r->outlen != 0 ? r->out : "");
	return s;
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
 * Load or start the rotation of host i: its row (continuing a failed or
 * interrupted one from its step), the old key it logs in with now, and
 * the new key (made here and recorded with step 1 for a new rotation).
 */
static int
prepare_host(struct rotate_run *run, size_t i, int dry_run)
{
	struct remote *rm = run->rm;
	struct engine_host *h = &rm->hosts[i];
	struct rot *r = &run->rots[i];
	char *cause = NULL, *t = NULL, *fp = NULL, *name = NULL, *dir = NULL,
	     *oldpath = NULL, *why = NULL, base[96];
	struct tm tm;
	int64_t kid;
	int rc;

	if (h->fail != EF_NONE) {
		fail_host(run, i, "%s", h->fail_msg);
		return 0;
	}
	rc = keys_rotation_get(rm->inv, h->in->id, &r->row, &cause);
	if (rc < 0)
		goto dbfail;
	if (rc == 0 && strcmp(r->row.state, "done") != 0 &&
	    strcmp(r->row.state, "reverted") != 0) {
		/* Continue a rotation from its recorded step. */
		r->have_row = 1;
		if ((rc = keys_get(
			 rm->inv, r->row.new_key_id, &r->newk, &cause)) != 0)
			goto dbfail;
		if (dry_run) {
			printf("%s: would continue the rotation to %s after "
			       "step %d\n",
			    h->in->name, r->newk.name, r->row.step);
			r->untouched = r->done = 1;
			return 0;
		}
		if (keys_load(r->newk.path, run->passphrase, &r->newkey,
			&cause) != 0) {
			fail_host(run, i, "%s", cause);
			free(cause);
			return 0;
		}
		if (r->row.step < KEYS_STEP_REFUSED &&
		    keys_load(r->row.old_path, NULL, &r->oldkey, &why) != 0 &&
		    keys_load(r->row.old_path, run->passphrase, &r->oldkey,
			&cause) != 0) {
			fail_host(run, i, "old key: %s", cause);
			free(cause);
			free(why);
			return 0;
		}
		free(why);
		return 0;
	}
	if (rc == 0 && strcmp(r->row.state, "reverted") == 0 && !dry_run)
		drop_reverted(run, i, r->row.new_key_id);
	keys_rotation_clear(&r->row);

	/* A new rotation: the old key is the one the host uses now. */
	if (host_current_key(rm, run->passphrase, i, &r->oldkey, &oldpath, &kid,
		&cause) != 0) {
		fail_host(run, i, "current key: %s", cause);
		goto out;
	}
	r->row.instance_id = h->in->id;
	r->row.old_key_id = kid;
	r->row.old_path = oldpath;
	oldpath = NULL;
	if (keys_describe(r->oldkey, &r->row.old_type, &r->row.old_blob, &fp,
		&cause) != 0) {
		fail_host(run, i, "%s", cause);
		free(cause);
		goto out;
	}
	r->row.keep_old = run->keep_old;
	if (dry_run) {
		printf("%s: would replace %s (%s) with a new %s key\n",
		    h->in->name, r->row.old_path, fp,
		    run->type != NULL ? run->type : "ed25519");
		r->untouched = r->done = 1;
		goto out;
	}

	/* Step 1: the new key, on disk, then the intent, durably. */
	if (run->shared && run->shared_sshkey != NULL) {
		r->newk.id = run->shared_key.id;
		if ((rc = keys_get(
			 rm->inv, run->shared_key.id, &r->newk, &cause)) != 0)
			goto dbfail;
		r->newkey = ssh_key_dup(run->shared_sshkey);
	} else {
		gmtime_r(&run->now, &tm);
		strftime(base, sizeof base, "%Y%m%d-%H%M%S", &tm);
		xasprintf(
		    &t, "%s-%s", run->shared ? "shared" : h->in->name, base);
		dir = keys_dir();
		if (keys_check_name(t, &cause) != 0 ||
		    unique_name(rm->inv, dir, t, &name) != 0) {
			fail_host(
			    run, i, "cannot name a key for %s", h->in->name);
			goto out;
		}
		if ((rc = keys_generate(dir, run->type, name, run->passphrase,
			 run->now, &r->newk, &r->newkey, &cause)) != 0) {
			fail_host(run, i, "%s", cause);
			goto out;
		}
		crash_hook(KEYS_STEP_NONE);
	}
	if ((rc = inventory_begin(rm->inv, &cause)) != 0)
		goto dbfail;
	if (r->newk.id == 0 &&
	    (rc = keys_add(rm->inv, &r->newk, &cause)) != 0) {
		inventory_rollback(rm->inv);
		goto dbfail;
	}
	r->row.new_key_id = r->newk.id;
	r->row.step = KEYS_STEP_INTENT;
	r->row.state = xstrdup("running");
	if ((rc = keys_rotation_put(rm->inv, &r->row, &cause)) != 0) {
		inventory_rollback(rm->inv);
		goto dbfail;
	}
	if ((rc = inventory_commit(rm->inv, &cause)) != 0)
		goto dbfail;
	r->have_row = 1;
	if (run->shared && run->shared_sshkey == NULL) {
		run->shared_key.id = r->newk.id;
		run->shared_sshkey = ssh_key_dup(r->newkey);
	}
	crash_hook(KEYS_STEP_INTENT);
	goto out;
dbfail:
	fail_host(run, i, "%s", cause != NULL ? cause : "database error");
out:
	free(cause);
	free(t);
	free(fp);
	free(name);
	free(dir);
	free(oldpath);
	return 0;
}

/* Step 2: add the new key, logging in with the old one. */
static void
step_add(struct rotate_run *run)
{
	struct remote *rm = run->rm;
	int *want = xcalloc(rm->n, sizeof *want);
	ssh_key *keys = xcalloc(rm->n, sizeof *keys);
	struct edit *ed = xcalloc(rm->n, sizeof *ed);
	char *cause = NULL, *why;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (r->done || r->row.step != KEYS_STEP_INTENT)
			continue;
		want[i] = 1;
		keys[i] = r->oldkey;
		/* The new key takes the old line's options (from=, ...). */
		ed[i].add = r->newk.pubkey;
		ed[i].like = r->row.old_blob;
	}
	edit_phase(run, want, keys, ed);
	for (i = 0; i < rm->n; i++) {
		if (!want[i])
			continue;
		if (rm->hosts[i].fail != EF_NONE ||
		    rm->hosts[i].exit_status != 0) {
			why = host_error(run, i);
			fail_host(run, i, "step 2 (add the new key): %s", why);
			free(why);
		} else if (record(run, i, KEYS_STEP_ADDED, "running", &cause) !=
		    0) {
			fail_host(run, i, "%s", cause);
			free(cause);
			cause = NULL;
		} else
			crash_hook(KEYS_STEP_ADDED);
	}
	free(want);
	free(keys);
	free(ed);
}

/*
 * Step 3: a fresh login with only the new key. Where it fails, the new key
 * line is removed again (logging in with the old key) and the host is
 * reported failed; the old key was never touched.
 */
static void
step_verify(struct rotate_run *run)
{
	struct remote *rm = run->rm;
	int *want = xcalloc(rm->n, sizeof *want);
	int *undo = xcalloc(rm->n, sizeof *undo);
	ssh_key *keys = xcalloc(rm->n, sizeof *keys);
	char **cmds = xcalloc(rm->n, sizeof *cmds), *cause = NULL;
	char **why = xcalloc(rm->n, sizeof *why);
	struct edit *ed = xcalloc(rm->n, sizeof *ed);
	size_t i;

	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (r->done || r->row.step != KEYS_STEP_ADDED)
			continue;
		want[i] = 1;
		keys[i] = r->newkey;
		cmds[i] = xstrdup("true");
	}
	run_phase(run, want, keys, cmds);
	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (!want[i])
			continue;
		free(cmds[i]);
		cmds[i] = NULL;
		if (rm->hosts[i].fail == EF_NONE &&
		    rm->hosts[i].exit_status == 0) {
			if (record(run, i, KEYS_STEP_VERIFIED, "running",
				&cause) != 0) {
				fail_host(run, i, "%s", cause);
				free(cause);
				cause = NULL;
			} else
				crash_hook(KEYS_STEP_VERIFIED);
			continue;
		}
		why[i] = host_error(run, i);
		undo[i] = 1;
		keys[i] = r->oldkey;
		ed[i].del = r->newk.blob;
	}
	edit_phase(run, undo, keys, ed);
	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (!undo[i])
			continue;
		if (rm->hosts[i].fail == EF_NONE &&
		    rm->hosts[i].exit_status == 0) {
			/* Back to before step 1; a rerun starts afresh. */
			free(r->row.error);
			xasprintf(&r->row.error,
			    "the new key did not log in (%s); removed it "
			    "again, the old key stays",
			    why[i]);
			if (record(run, i, r->row.step, "reverted", &cause) !=
			    0) {
				error("%s", cause);
				free(cause);
				cause = NULL;
			}
			r->error = xstrdup(r->row.error);
			r->failed = r->done = 1;
			drop_reverted(run, i, r->newk.id);
		} else {
			char *uw = host_error(run, i);
			fail_host(run, i,
			    "step 3: the new key did not log in (%s), and "
			    "removing it again failed (%s); the old key still "
			    "works",
			    why[i], uw);
			free(uw);
		}
		free(why[i]);
	}
	free(want);
	free(undo);
	free(keys);
	free(cmds);
	free(why);
	free(ed);
}

/*
 * A rotation of host i to key_id was reverted: delete that key if nothing
 * else needs it (a --shared key may be in use elsewhere). Where that fails
 * the key stays an orphan that keys ls shows and keys gc removes.
 */
static void
drop_reverted(struct rotate_run *run, size_t i, int64_t key_id)
{
	char *dir = keys_dir(), *cause = NULL;

	if (keys_drop_reverted(run->rm->inv, dir, key_id, &cause) < 0) {
		warn_msg("%s: cannot delete the key of the reverted rotation: "
			 "%s (see gpufleet keys gc)",
		    run->rm->hosts[i].in->name, cause);
		free(cause);
	}
	free(dir);
}

/* Step 4: the inventory switches to the new key (no remote action). */
static void
step_switch(struct rotate_run *run)
{
	struct remote *rm = run->rm;
	char *cause = NULL;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (r->done || r->row.step != KEYS_STEP_VERIFIED)
			continue;
		r->row.step = KEYS_STEP_SWITCHED;
		free(r->row.state);
		r->row.state = xstrdup("running");
		if (inventory_begin(rm->inv, &cause) != 0 ||
		    keys_set_instance_key(
			rm->inv, rm->hosts[i].in->id, &r->newk, &cause) != 0 ||
		    keys_rotation_put(rm->inv, &r->row, &cause) != 0 ||
		    inventory_commit(rm->inv, &cause) != 0) {
			if (rm->inv->in_txn)
				inventory_rollback(rm->inv);
			r->row.step = KEYS_STEP_VERIFIED;
			fail_host(run, i, "step 4: %s", cause);
			free(cause);
			cause = NULL;
			continue;
		}
		crash_hook(KEYS_STEP_SWITCHED);
	}
}

/* Step 5: remove the old key by its blob, logging in with the new one. */
static void
step_remove(struct rotate_run *run)
{
	struct remote *rm = run->rm;
	int *want = xcalloc(rm->n, sizeof *want);
	ssh_key *keys = xcalloc(rm->n, sizeof *keys);
	struct edit *ed = xcalloc(rm->n, sizeof *ed);
	char *cause = NULL, *why;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (r->done || r->row.step != KEYS_STEP_SWITCHED)
			continue;
		want[i] = 1;
		keys[i] = r->newkey;
		ed[i].add = r->newk.pubkey;
		ed[i].like = r->row.old_blob;
		if (!authkeys_same_key(r->row.old_blob, strlen(r->row.old_blob),
			r->newk.blob, strlen(r->newk.blob)))
			ed[i].del = r->row.old_blob;
	}
	edit_phase(run, want, keys, ed);
	for (i = 0; i < rm->n; i++) {
		if (!want[i])
			continue;
		if (rm->hosts[i].fail != EF_NONE ||
		    rm->hosts[i].exit_status != 0) {
			why = host_error(run, i);
			fail_host(
			    run, i, "step 5 (remove the old key): %s", why);
			free(why);
		} else if (record(run, i, KEYS_STEP_REMOVED, "running",
			       &cause) != 0) {
			fail_host(run, i, "%s", cause);
			free(cause);
			cause = NULL;
		} else
			crash_hook(KEYS_STEP_REMOVED);
	}
	free(want);
	free(keys);
	free(ed);
}

/* Step 6: a fresh login with only the old key must be refused. */
static void
step_refused(struct rotate_run *run)
{
	struct remote *rm = run->rm;
	int *want = xcalloc(rm->n, sizeof *want);
	ssh_key *keys = xcalloc(rm->n, sizeof *keys);
	char **cmds = xcalloc(rm->n, sizeof *cmds), *cause = NULL, *why;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (r->done || r->row.step != KEYS_STEP_REMOVED)
			continue;
		want[i] = 1;
		keys[i] = r->oldkey;
		cmds[i] = "true";
	}
	run_phase(run, want, keys, cmds);
	for (i = 0; i < rm->n; i++) {
		if (!want[i])
			continue;
		if (rm->hosts[i].fail == EF_NONE)
			fail_host(run, i,
			    "step 6: the old key still logs in (another "
			    "authorized_keys file, or re-injected by the "
			    "platform?)");
		else if (rm->hosts[i].fail != EF_AUTH) {
			why = host_error(run, i);
			fail_host(run, i,
			    "step 6: cannot confirm the old key is refused: "
			    "%s",
			    why);
			free(why);
		} else if (record(run, i, KEYS_STEP_REFUSED, "running",
			       &cause) != 0) {
			fail_host(run, i, "%s", cause);
			free(cause);
			cause = NULL;
		} else
			crash_hook(KEYS_STEP_REFUSED);
	}
	free(want);
	free(keys);
	free(cmds);
}

/*
 * Step 7: delete the old private key if gpufleet made it, no instance uses
 * it and no rotation still needs it (unless --keep-old). A key gpufleet did
 * not make (the user's own) is never deleted.
 */
static void
step_retire(struct rotate_run *run)
{
	struct remote *rm = run->rm;
	struct keys_key old;
	char *cause = NULL, *pub;
	size_t i;
	int used;

	for (i = 0; i < rm->n; i++) {
		struct rot *r = &run->rots[i];
		if (r->done || r->row.step != KEYS_STEP_REFUSED)
			continue;
		if (record(run, i, KEYS_STEP_RETIRED, "done", &cause) != 0) {
			fail_host(run, i, "%s", cause);
			free(cause);
			cause = NULL;
			continue;
		}
		r->done = 1;
		if (r->row.old_key_id == 0 || r->row.keep_old)
			goto next;
		used = keys_in_use(rm->inv, r->row.old_key_id, &cause);
		if (used != 0 ||
		    keys_get(rm->inv, r->row.old_key_id, &old, &cause) != 0) {
			free(cause);
			cause = NULL;
			goto next;
		}
		if (old.deleted_at == 0) {
			xasprintf(&pub, "%s.pub", old.path);
			if ((unlink(old.path) == 0 || errno == ENOENT) &&
			    keys_mark_deleted(
				rm->inv, old.id, time(NULL), &cause) == 0)
				unlink(pub);
			free(pub);
			free(cause);
			cause = NULL;
		}
		keys_key_clear(&old);
	next:
		crash_hook(KEYS_STEP_RETIRED);
	}
}

static void
rotate_free(struct rotate_run *run)
{
	size_t i;

	for (i = 0; run->rots != NULL && i < run->rm->n; i++) {
		keys_rotation_clear(&run->rots[i].row);
		keys_key_clear(&run->rots[i].newk);
		ssh_key_free(run->rots[i].newkey);
		ssh_key_free(run->rots[i].oldkey);
		free(run->rots[i].error);
		free(run->rots[i].out);
	}
	free(run->rots);
	ssh_key_free(run->shared_sshkey);
	keys_key_clear(&run->shared_key);
	deploy_free(&run->ab);
	keys_passphrase_clear();
}

/*
 * keys rotate. The order cannot lock the user out: the new key is added
 * and proven on a fresh login before the inventory switches to it, and
 * the old key is removed only after that switch is recorded. Each step is
 * recorded (synchronous=FULL) before the next starts, so a rerun after a
 * crash continues each host from its step; every remote edit is
 * idempotent, so repeating a step that was done but not recorded is safe.
 */
static int
keys_rotate(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_keys_entry;
	struct rotate_run run;
	struct remote *rm = NULL;
	enum ssh_keytypes_e t;
	char *cause = NULL;
	size_t i, nok = 0, nfail = 0;
	json_t *o;
	const char *revoke = NULL;
	int ch, status, bits, dry_run = 0, locked = 0, r;

	memset(&run, 0, sizeof run);
	while ((ch = cmd_getopt(e, argc, argv, "t:h", keys_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case 't':
			run.type = optarg;
			break;
		case OPT_JSON:
			run.json = 1;
			break;
		case OPT_DRY_RUN:
			dry_run = 1;
			break;
		case OPT_KEEP_OLD:
			run.keep_old = 1;
			break;
		case OPT_SHARED:
			run.shared = 1;
			break;
		case OPT_REVOKE:
			revoke = optarg;
			break;
		default:
			return cmd_usage_error(e, "rotate: unknown option");
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "rotate needs one SELECTOR");
	if (revoke != NULL)
		return keys_revoke(ctx, argv[optind], revoke, run.json);
	if (keys_parse_type(run.type, &t, &bits, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	run.passphrase = keys_passphrase(&cause);
	if (cause != NULL)
		return cmd_fail(GF_EUSAGE, cause);
	run.now = time(NULL);
	if (!dry_run && deploy_load(&run.ab, &cause) != 0) {
		rotate_free(&run);
		return cmd_fail(GF_EUSAGE, cause);
	}
	if ((r = remote_open(ctx->fleet, argv[optind], &rm, &cause)) != 0) {
		rotate_free(&run);
		return cmd_fail(-r, cause);
	}
	run.rm = rm;
	if (!dry_run) {
		if ((r = keys_sync_full(rm->inv, &cause)) != 0 ||
		    (r = keys_lock(rm->inv, &cause)) != 0) {
			status = cmd_fail(-r, cause);
			goto out;
		}
		locked = 1;
	}
	run.rots = xcalloc(rm->n, sizeof *run.rots);
	for (i = 0; i < rm->n; i++)
		prepare_host(&run, i, dry_run);
	if (!dry_run) {
		step_add(&run);
		step_verify(&run);
		step_switch(&run);
		step_remove(&run);
		step_refused(&run);
		step_retire(&run);
	}
	for (i = 0; i < rm->n; i++) {
		struct rot *rt = &run.rots[i];
		const char *name = rm->hosts[i].in->name;
		if (rt->untouched)
			continue;
		if (!rt->failed && rt->row.step == KEYS_STEP_RETIRED)
			nok++;
		else
			nfail++;
		if (run.json) {
			o = json_object();
			json_object_set_new(o, "name", json_string(name));
			json_object_set_new(o, "ok", json_boolean(!rt->failed));
			json_object_set_new(
			    o, "step", json_integer(rt->row.step));
			json_object_set_new(o, "key",
			    rt->newk.name != NULL ? json_string(rt->newk.name)
						  : json_null());
			json_object_set_new(o, "fingerprint",
			    rt->newk.fingerprint != NULL
				? json_string(rt->newk.fingerprint)
				: json_null());
			json_object_set_new(o, "error",
			    rt->error != NULL ? json_string(rt->error)
					      : json_null());
			json_dumpf(
			    o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
			fputc('\n', stdout);
			json_decref(o);
		} else if (rt->failed)
			cmd_print_failed(name, rt->error);
		else
			printf("%s: rotated to %s (%s)\n", name, rt->newk.name,
			    rt->newk.fingerprint);
	}
	fflush(stdout);
	if (!dry_run)
		fprintf(stderr,
		    "gpufleet: keys rotate: %zu host%s: %zu rotated, "
		    "%zu failed\n",
		    rm->n, rm->n == 1 ? "" : "s", nok, nfail);
	status = nfail == 0 ? GF_OK : GF_EHOSTS;
out:
	if (locked)
		keys_unlock(rm->inv);
	rotate_free(&run);
	remote_close(rm);
	return status;
}

/*
 * Open the selected instances for a run that logs in with each one's
 * current key: *keys (caller frees the array and its keys) holds it, or
 * NULL where the host already failed (rots[i].failed, with the reason).
 */
static int
open_run(struct cmd_ctx *ctx, const char *selector, struct rotate_run *run,
    ssh_key **keys, char **cause)
{
	struct remote *rm;
	char *path, *why = NULL;
	int64_t kid;
	size_t i;
	int r;

	run->passphrase = keys_passphrase(cause);
	if (*cause != NULL)
		return -GF_EUSAGE;
	if ((r = remote_open(ctx->fleet, selector, &run->rm, cause)) != 0)
		return r;
	rm = run->rm;
	run->rots = xcalloc(rm->n, sizeof *run->rots);
	*keys = xcalloc(rm->n, sizeof **keys);
	for (i = 0; i < rm->n; i++) {
		if (rm->hosts[i].fail != EF_NONE) {
			fail_host(run, i, "%s", rm->hosts[i].fail_msg);
			continue;
		}
		if (host_current_key(rm, run->passphrase, i, &(*keys)[i], &path,
			&kid, &why) != 0) {
			fail_host(run, i, "current key: %s", why);
			free(why);
			why = NULL;
			continue;
		}
		free(path);
	}
	return 0;
}

/* keys check: rotated-out or revoked keys back in authorized_keys. */
static int
keys_check(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_keys_entry;
	struct rotate_run run;
	struct remote *rm;
	ssh_key *keys = NULL;
	char **cmds, *cause = NULL, *found, *why;
	int *want, ch, status, r, bad = 0;
	size_t i;

	while ((ch = cmd_getopt(e, argc, argv, "h", keys_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		return cmd_usage_error(e, "check takes no options");
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "check needs one SELECTOR");
	memset(&run, 0, sizeof run);
	if ((r = open_run(ctx, argv[optind], &run, &keys, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	rm = run.rm;
	want = xcalloc(rm->n, sizeof *want);
	cmds = xcalloc(rm->n, sizeof *cmds);
	for (i = 0; i < rm->n; i++) {
		if (run.rots[i].failed)
			continue;
		want[i] = 1;
		cmds[i] =
		    keys_cat_script(rm->hosts[i].in->authorized_keys_file);
	}
	run_phase(&run, want, keys, cmds);
	for (i = 0; i < rm->n; i++) {
		const char *name = rm->hosts[i].in->name;
		struct rot *rt = &run.rots[i];
		free(cmds[i]);
		if (want[i] &&
		    (rm->hosts[i].fail != EF_NONE ||
			rm->hosts[i].exit_status != 0)) {
			why = host_error(&run, i);
			fail_host(
			    &run, i, "cannot read authorized_keys: %s", why);
			free(why);
		}
		if (rt->failed) {
			cmd_print_failed(name, rt->error);
			bad = 1;
			continue;
		}
		r = keys_reinjected(rm->inv, rm->hosts[i].in->id,
		    rt->outlen != 0 ? rt->out : "", &found, &cause);
		if (r < 0) {
			cmd_print_failed(name, cause);
			free(cause);
			cause = NULL;
			bad = 1;
		} else if (r > 0) {
			printf("%s: warning: a key taken off is back in "
			       "authorized_keys: %s\n",
			    name, found);
			warn_msg("%s: a key taken off is back in "
				 "authorized_keys (re-injected by the "
				 "platform?): %s",
			    name, found);
			free(found);
			bad = 1;
		} else
			printf("%s: ok\n", name);
	}
	free(want);
	free(cmds);
	status = bad ? GF_EHOSTS : GF_OK;
out:
	for (i = 0; keys != NULL && run.rm != NULL && i < run.rm->n; i++)
		ssh_key_free(keys[i]);
	free(keys);
	rm = run.rm;
	rotate_free(&run);
	remote_close(rm);
	return status;
}

/*
 * keys rotate --revoke: remove a compromised key by its blob from each
 * instance. The edit runs on a fresh login with the key gpufleet uses
 * there (so another key is proven to work first); a host whose only key
 * is the revoked one is refused. Then another fresh login reads the file
 * back, and the host is "revoked" only if no line's key is the blob.
 */
static int
keys_revoke(
    struct cmd_ctx *ctx, const char *selector, const char *file, int json)
{
	struct rotate_run run;
	struct remote *rm;
	ssh_key pub = NULL, *keys = NULL;
	char **cmds = NULL, *cause = NULL, *type = NULL, *blob = NULL,
	     *fp = NULL, *why, *ctype, *cblob, *cfp;
	int *want = NULL, status, r, nfail = 0;
	struct edit *ed = NULL;
	size_t i;
	json_t *o;

	memset(&run, 0, sizeof run);
	if (ssh_pki_import_pubkey_file(file, &pub) != SSH_OK ||
	    keys_describe(pub, &type, &blob, &fp, &cause) != 0) {
		ssh_key_free(pub);
		free(cause);
		xasprintf(&cause, "cannot read a public key from %s", file);
		return cmd_fail(GF_EUSAGE, cause);
	}
	ssh_key_free(pub);
	if (deploy_load(&run.ab, &cause) != 0) {
		status = cmd_fail(GF_EUSAGE, cause);
		goto out;
	}
	if ((r = open_run(ctx, selector, &run, &keys, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	rm = run.rm;
	if ((r = keys_sync_full(rm->inv, &cause)) != 0 ||
	    (r = keys_lock(rm->inv, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	want = xcalloc(rm->n, sizeof *want);
	cmds = xcalloc(rm->n, sizeof *cmds);
	ed = xcalloc(rm->n, sizeof *ed);
	for (i = 0; i < rm->n; i++) {
		if (run.rots[i].failed)
			continue;
		if (keys_describe(keys[i], &ctype, &cblob, &cfp, &cause) == 0) {
			if (authkeys_same_key(
				cblob, strlen(cblob), blob, strlen(blob)))
				fail_host(&run, i,
				    "gpufleet logs in here with %s itself; "
				    "rotate first (keys rotate %s)",
				    fp, rm->hosts[i].in->name);
			free(ctype);
			free(cblob);
			free(cfp);
		}
		free(cause);
		cause = NULL;
		if (run.rots[i].failed)
			continue;
		want[i] = 1;
		ed[i].del = blob;
	}
	edit_phase(&run, want, keys, ed);
	for (i = 0; i < rm->n; i++) {
		struct rot *rt = &run.rots[i];
		if (!want[i])
			continue;
		if (rm->hosts[i].fail != EF_NONE ||
		    rm->hosts[i].exit_status != 0) {
			why = host_error(&run, i);
			fail_host(&run, i, "cannot remove the key: %s", why);
			free(why);
			want[i] = 0;
			continue;
		}
		rt->untouched =
		    rt->outlen == 0 || strncmp(rt->out, "unchanged", 9) == 0;
		if (inventory_begin(rm->inv, &cause) != 0 ||
		    keys_retire_blob(rm->inv, rm->hosts[i].in->id, type, blob,
			"revoked", &cause) != 0 ||
		    inventory_commit(rm->inv, &cause) != 0) {
			if (rm->inv->in_txn)
				inventory_rollback(rm->inv);
			fail_host(&run, i, "%s", cause);
			free(cause);
			cause = NULL;
			want[i] = 0;
			continue;
		}
		cmds[i] =
		    keys_cat_script(rm->hosts[i].in->authorized_keys_file);
	}
	/*
	 * The proof: a fresh login with the current key still works, and no
	 * line of the file it reads holds the key, by the same parser.
	 */
	run_phase(&run, want, keys, cmds);
	for (i = 0; i < rm->n; i++) {
		struct rot *rt = &run.rots[i];
		const char *name = rm->hosts[i].in->name;
		free(cmds[i]);
		if (want[i] &&
		    (rm->hosts[i].fail != EF_NONE ||
			rm->hosts[i].exit_status != 0)) {
			why = host_error(&run, i);
			fail_host(&run, i,
			    "revoked, but the login check after it failed: %s",
			    why);
			free(why);
		} else if (want[i] &&
		    keys_text_has_blob(
			rt->out != NULL ? rt->out : "", rt->outlen, blob))
			fail_host(&run, i,
			    "%s is still in %s after its removal (re-added at "
			    "once?)",
			    fp, rm->hosts[i].in->authorized_keys_file);
		nfail += rt->failed;
		if (json) {
			o = json_object();
			json_object_set_new(o, "name", json_string(name));
			json_object_set_new(o, "ok", json_boolean(!rt->failed));
			json_object_set_new(o, "removed",
			    json_boolean(!rt->failed && !rt->untouched));
			json_object_set_new(o, "error",
			    rt->error != NULL ? json_string(rt->error)
					      : json_null());
			json_dumpf(
			    o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
			fputc('\n', stdout);
			json_decref(o);
		} else if (rt->failed)
			cmd_print_failed(name, rt->error);
		else
			printf("%s: %s %s\n", name,
			    rt->untouched ? "not present:" : "revoked", fp);
	}
	fflush(stdout);
	keys_unlock(rm->inv);
	status = nfail == 0 ? GF_OK : GF_EHOSTS;
out:
	for (i = 0; keys != NULL && run.rm != NULL && i < run.rm->n; i++)
		ssh_key_free(keys[i]);
	free(keys);
	free(want);
	free(cmds);
	free(ed);
	free(type);
	free(blob);
	free(fp);
	rm = run.rm;
	rotate_free(&run);
	remote_close(rm);
	return status;
}
