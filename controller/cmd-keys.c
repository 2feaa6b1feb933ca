/*
 * The SSH keys gpufleet manages, and their rotation: `keys gen` makes a key,
 * `keys ls` shows the keys with the instances using them, `keys status` the
 * key and rotation state of each instance, and `keys rotate` replaces the
 * key of each selected instance by a fresh one in an order that cannot lock
 * the user out; `keys check` and `keys rotate --revoke` find and remove keys
 * taken off. `keys install` gives instances a managed key by logging in
 * with a password (install.c's, as `add --password` does). Rotation,
 * revoke and check are rotate.c's: this file reads their arguments and
 * shows their results.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "db.h"
#include "install.h"
#include "keys.h"
#include "log.h"
#include "password.h"
#include "remote.h"
#include "rotate.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_keys_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int keys_gen(struct cmd_ctx *, int, char **);
static int keys_ls(struct cmd_ctx *, int, char **);
static int keys_status(struct cmd_ctx *, int, char **);
static int keys_rotate(struct cmd_ctx *, int, char **);
static int keys_check(struct cmd_ctx *, int, char **);
static int keys_gc(struct cmd_ctx *, int, char **);
static int keys_install(struct cmd_ctx *, int, char **);
static int keys_revoke(struct cmd_ctx *, const char *, const char *, int);
static int open_keyed(
    struct cmd_ctx *, const char *, const char **, struct remote **, char **);
static char *age_string(int64_t, time_t);
static void print_notes(const struct rotate_result *);
static void print_json(const struct rotate_host *, int);
static int print_rotation(const struct rotate_result *, int, int, const char *);

const struct cmd_entry cmd_keys_entry = {
	.name = "keys",
	.usage = "gen|ls|status|rotate|check|gc|install [options]",
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
	    "        each instance's key, the state of its last rotation and "
	    "what\n"
	    "        `passwd` (or `harden --fix`) last did to its password, "
	    "and when;\n"
	    "        a rotation whose process is gone is `interrupted`: "
	    "`keys rotate`\n"
	    "        again finishes it\n"
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
	    "starts)\n"
	    "  keys install SELECTOR [--password | --password-file F] "
	    "[--ask-each] [--json]\n"
	    "        log in with a password (typed once without echo for all; "
	    "--ask-each:\n"
	    "        once per instance; --password-file: F's first line, - "
	    "for stdin) and\n"
	    "        give each instance a key of its own: made and recorded, "
	    "added to\n"
	    "        authorized_keys (other lines kept byte for byte), the "
	    "host key\n"
	    "        checked or pinned, proven on a fresh login with only "
	    "that key, and\n"
	    "        only then used. A key that does not log in is taken off "
	    "again.\n\n"
	    "A passphrase for new keys: the first line of the file named by "
	    "[keys]\npassphrase_file in the config (or the environment "
	    "variable\nGPUFLEET_KEYS_PASSPHRASE_FILE, which overrides it); "
	    "\"ask\": "
	    "asked once per\nrun on the terminal.\n",
	.exec = cmd_keys_exec,
};

enum {
	OPT_JSON = 256,
	OPT_DRY_RUN,
	OPT_KEEP_OLD,
	OPT_SHARED,
	OPT_REVOKE,
	OPT_PASSWORD,
	OPT_PASSWORD_FILE,
	OPT_ASK_EACH
};

static const struct option keys_options[] = {
	{ "type", required_argument, NULL, 't' },
	{ "name", required_argument, NULL, 'n' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
	{ "keep-old", no_argument, NULL, OPT_KEEP_OLD },
	{ "shared", no_argument, NULL, OPT_SHARED },
	{ "revoke", required_argument, NULL, OPT_REVOKE },
	{ "password", no_argument, NULL, OPT_PASSWORD },
	{ "password-file", required_argument, NULL, OPT_PASSWORD_FILE },
	{ "ask-each", no_argument, NULL, OPT_ASK_EACH },
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
		    e, "needs gen, ls, status, rotate, check, gc or install");
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
	if (strcmp(sub, "install") == 0)
		return keys_install(ctx, argc - 1, argv + 1);
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
	pass = keys_passphrase(ctx->fleet->config, &cause);
	if (cause != NULL)
		return cmd_fail(GF_EUSAGE, cause);
	if ((status = cmd_open(ctx, &inv)) != 0)
		goto out;
	dir = keys_dir();
	if (name == NULL) {
		gmtime_r(&now, &tm);
		strftime(base, sizeof base, "key-%Y%m%d-%H%M%S", &tm);
		if (keys_unique_name(inv, dir, base, &gen) != 0) {
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
		rotate_test_crash(KEYS_STEP_NONE);
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

/*
 * The last thing `passwd` (or `harden --fix`) did to name's password, from
 * the action log: "locked (usermod -p '*') 2026-12-02T13:50:01Z", or "-".
 * Caller frees.
 */
static char *
password_state(struct inventory *inv, const char *name)
{
	sqlite3_stmt *st;
	json_t *res;
	const char *o = NULL;
	char *cause = NULL, *text = NULL, *when, *s = NULL;
	int64_t t = 0;
	int rc;

	if (db_prepare(inv, &st,
		"SELECT t, result FROM action_log WHERE kind IN "
		"('passwd_lock', 'passwd_random') AND result IS NOT NULL AND "
		"EXISTS "
		"(SELECT 1 FROM json_each(instances) WHERE value = ?) ORDER "
		"BY t DESC, id DESC LIMIT 1",
		"cannot read the action log", &cause, "t", name) != 0) {
		free(cause);
		return xstrdup("?");
	}
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		t = sqlite3_column_int64(st, 0);
		text = db_text(st, 1);
	}
	db_finish(inv, st, rc, "cannot read the action log", &cause);
	free(cause);
	res = text != NULL ? json_loads(text, 0, NULL) : NULL;
	o = json_string_value(json_object_get(res, name));
	if (o != NULL) {
		when = instance_format_time(t);
		xasprintf(&s, "%.*s %s",
		    strncmp(o, "failed", 6) == 0 ? 6 : (int)strcspn(o, ","), o,
		    when);
		free(when);
	}
	json_decref(res);
	free(text);
	return s != NULL ? s : xstrdup("-");
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
	int64_t kid, holder;
	char *cause = NULL, *step, *pw, *stopped = NULL, *tmp;
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
	/* A "running" row with no live rotation was killed mid-way. */
	if (keys_lock_holder(inv, &holder, &cause) != 0) {
		instance_free_array(list, n);
		inventory_close(inv);
		return cmd_fail(GF_EDB, cause);
	}
	t = table_new(5, "NAME", "KEY", "ROTATION", "PASSWORD", "ERROR");
	for (i = 0; i < n; i++) {
		memset(&k, 0, sizeof k);
		if (keys_instance_key(inv, list[i].id, &kid, &cause) == 0)
			keys_get(inv, kid, &k, &cause);
		free(cause);
		cause = NULL;
		r = keys_rotation_get(inv, list[i].id, &rot, &cause);
		free(cause);
		cause = NULL;
		if (r == 0 && holder == 0 &&
		    strcmp(rot.state, "running") == 0) {
			xasprintf(&step, "interrupted, step %d/7", rot.step);
			tmp = stopped;
			xasprintf(&stopped, "%s%s%s", tmp != NULL ? tmp : "",
			    tmp != NULL ? "," : "", list[i].name);
			free(tmp);
		} else if (r == 0)
			xasprintf(&step, "%s, step %d/7", rot.state, rot.step);
		else
			step = xstrdup("-");
		pw = password_state(inv, list[i].name);
		table_add(t, list[i].name,
		    k.name != NULL
			? k.name
			: (list[i].identity != NULL ? list[i].identity
						    : "(default)"),
		    step, pw,
		    r == 0 && rot.error != NULL && *rot.error != '\0'
			? rot.error
			: "-");
		free(step);
		free(pw);
		keys_key_clear(&k);
		keys_rotation_clear(&rot);
	}
	table_print(t, stdout);
	table_free(t);
	if (stopped != NULL)
		printf("interrupted: the rotation that ran it is gone; "
		       "`gpufleet keys rotate %s` finishes it\n",
		    stopped);
	free(stopped);
	instance_free_array(list, n);
	inventory_close(inv);
	return GF_OK;
}
/* Log what the run said to warn of, in its order. */
static void
print_notes(const struct rotate_result *res)
{
	size_t i;

	for (i = 0; i < res->nnotes; i++)
		log_msg(res->notes[i].level, NULL, "%s", res->notes[i].msg);
}

/* One host's line of keys rotate --json (revoke: with "removed"). */
static void
print_json(const struct rotate_host *h, int revoke)
{
	json_t *o = json_object();

	json_object_set_new(o, "name", json_string(h->name));
	json_object_set_new(o, "ok", json_boolean(!h->failed));
	if (revoke)
		json_object_set_new(
		    o, "removed", json_boolean(!h->failed && !h->untouched));
	else {
		json_object_set_new(o, "step", json_integer(h->step));
		json_object_set_new(o, "key",
		    h->key != NULL ? json_string(h->key) : json_null());
		json_object_set_new(o, "fingerprint",
		    h->fingerprint != NULL ? json_string(h->fingerprint)
					   : json_null());
	}
	json_object_set_new(
	    o, "error", h->error != NULL ? json_string(h->error) : json_null());
	json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	json_decref(o);
}

/*
 * Show a rotation's result: what a dry run would do, then each host's
 * outcome and (not for a dry run) the count on stderr. Returns the exit
 * status.
 */
static int
print_rotation(
    const struct rotate_result *res, int json, int dry_run, const char *type)
{
	size_t i, nok = 0, nfail = 0;

	print_notes(res);
	for (i = 0; i < res->n; i++) {
		const struct rotate_host *h = &res->hosts[i];
		if (h->plan == ROTATE_PLAN_CONTINUE)
			printf("%s: would continue the rotation to %s after "
			       "step %d\n",
			    h->name, h->key, h->step);
		else if (h->plan == ROTATE_PLAN_REPLACE)
			printf("%s: would replace %s (%s) with a new %s key\n",
			    h->name, h->old_path, h->old_fingerprint,
			    type != NULL ? type : "ed25519");
	}
	for (i = 0; i < res->n; i++) {
		const struct rotate_host *h = &res->hosts[i];
		if (h->untouched)
			continue;
		if (!h->failed && h->step == KEYS_STEP_RETIRED)
			nok++;
		else
			nfail++;
		if (json)
			print_json(h, 0);
		else if (h->failed)
			cmd_print_failed(h->name, h->error);
		else
			printf("%s: rotated to %s (%s)\n", h->name, h->key,
			    h->fingerprint);
	}
	fflush(stdout);
	if (!dry_run)
		fprintf(stderr,
		    "gpufleet: keys rotate: %zu host%s: %zu rotated, "
		    "%zu failed\n",
		    res->n, res->n == 1 ? "" : "s", nok, nfail);
	return nfail == 0 ? GF_OK : GF_EHOSTS;
}

/*
 * keys rotate: a fresh key for each selected instance, in the order
 * rotate.c keeps, which cannot lock the user out.
 */
static int
keys_rotate(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_keys_entry;
	struct rotate_opts opts;
	struct rotate_result res;
	struct agent_bin ab;
	struct remote *rm = NULL;
	enum ssh_keytypes_e t;
	char *cause = NULL;
	const char *revoke = NULL;
	int ch, status, bits, json = 0, r;

	memset(&opts, 0, sizeof opts);
	memset(&ab, 0, sizeof ab);
	while ((ch = cmd_getopt(e, argc, argv, "t:h", keys_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case 't':
			opts.type = optarg;
			break;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_DRY_RUN:
			opts.dry_run = 1;
			break;
		case OPT_KEEP_OLD:
			opts.keep_old = 1;
			break;
		case OPT_SHARED:
			opts.shared = 1;
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
		return keys_revoke(ctx, argv[optind], revoke, json);
	if (keys_parse_type(opts.type, &t, &bits, &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	opts.passphrase = keys_passphrase(ctx->fleet->config, &cause);
	if (cause != NULL)
		return cmd_fail(GF_EUSAGE, cause);
	opts.now = time(NULL);
	if (!opts.dry_run) {
		if (deploy_load(&ab, &cause) != 0) {
			status = cmd_fail(GF_EUSAGE, cause);
			goto out;
		}
		opts.ab = &ab;
	}
	if ((r = remote_open(ctx->fleet, argv[optind], &rm, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	if ((r = rotate_keys(rm, &opts, &res, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	status = print_rotation(&res, json, opts.dry_run, opts.type);
	rotate_result_free(&res);
out:
	deploy_free(&ab);
	keys_passphrase_clear();
	remote_close(rm);
	return status;
}

/*
 * The passphrase of managed keys, then the selected instances, for a run
 * that logs in with each one's current key.
 */
static int
open_keyed(struct cmd_ctx *ctx, const char *selector, const char **pass,
    struct remote **rm, char **cause)
{
	*pass = keys_passphrase(ctx->fleet->config, cause);
	if (*cause != NULL)
		return -GF_EUSAGE;
	return remote_open(ctx->fleet, selector, rm, cause);
}

/* keys check: rotated-out or revoked keys back in authorized_keys. */
static int
keys_check(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_keys_entry;
	struct rotate_result res;
	struct remote *rm = NULL;
	const char *pass;
	char *cause = NULL;
	int ch, status, r, bad = 0;
	size_t i;

	while ((ch = cmd_getopt(e, argc, argv, "h", keys_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		return cmd_usage_error(e, "check takes no options");
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "check needs one SELECTOR");
	if ((r = open_keyed(ctx, argv[optind], &pass, &rm, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	rotate_check(rm, pass, &res);
	for (i = 0; i < res.n; i++) {
		const struct rotate_host *h = &res.hosts[i];
		if (h->failed) {
			cmd_print_failed(h->name, h->error);
			bad = 1;
		} else if (h->found != NULL) {
			printf("%s: warning: a key taken off is back in "
			       "authorized_keys: %s\n",
			    h->name, h->found);
			warn_msg("%s: a key taken off is back in "
				 "authorized_keys (re-injected by the "
				 "platform?): %s",
			    h->name, h->found);
			bad = 1;
		} else
			printf("%s: ok\n", h->name);
	}
	rotate_result_free(&res);
	status = bad ? GF_EHOSTS : GF_OK;
out:
	keys_passphrase_clear();
	remote_close(rm);
	return status;
}

/*
 * keys rotate --revoke: remove a compromised key by its blob from each
 * instance, on a login with another key, and report it revoked only once
 * a fresh login reads the file back without it.
 */
static int
keys_revoke(
    struct cmd_ctx *ctx, const char *selector, const char *file, int json)
{
	struct rotate_opts opts;
	struct rotate_result res;
	struct agent_bin ab;
	struct remote *rm = NULL;
	ssh_key pub = NULL;
	char *cause = NULL, *type = NULL, *blob = NULL, *fp = NULL;
	int status, r, nfail = 0;
	size_t i;

	memset(&opts, 0, sizeof opts);
	memset(&ab, 0, sizeof ab);
	if (ssh_pki_import_pubkey_file(file, &pub) != SSH_OK ||
	    keys_describe(pub, &type, &blob, &fp, &cause) != 0) {
		ssh_key_free(pub);
		free(cause);
		xasprintf(&cause, "cannot read a public key from %s", file);
		return cmd_fail(GF_EUSAGE, cause);
	}
	ssh_key_free(pub);
	if (deploy_load(&ab, &cause) != 0) {
		status = cmd_fail(GF_EUSAGE, cause);
		goto out;
	}
	opts.ab = &ab;
	if ((r = open_keyed(ctx, selector, &opts.passphrase, &rm, &cause)) !=
		0 ||
	    (r = rotate_revoke(rm, &opts, type, blob, fp, &res, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	for (i = 0; i < res.n; i++) {
		const struct rotate_host *h = &res.hosts[i];
		nfail += h->failed;
		if (json)
			print_json(h, 1);
		else if (h->failed)
			cmd_print_failed(h->name, h->error);
		else
			printf("%s: %s %s\n", h->name,
			    h->untouched ? "not present:" : "revoked", fp);
	}
	fflush(stdout);
	rotate_result_free(&res);
	status = nfail == 0 ? GF_OK : GF_EHOSTS;
out:
	deploy_free(&ab);
	keys_passphrase_clear();
	free(type);
	free(blob);
	free(fp);
	remote_close(rm);
	return status;
}

/*
 * keys install: a managed key of its own for each selected instance,
 * installed by logging in with a password (one for all, or --ask-each).
 */
static int
keys_install(struct cmd_ctx *ctx, int argc, char **argv)
{
	const struct cmd_entry *e = &cmd_keys_entry;
	struct install_opts opts;
	struct install_result res;
	struct agent_bin ab;
	struct remote *rm = NULL;
	const char *file = NULL;
	char *cause = NULL, **pw = NULL, *what;
	size_t i, n = 0, nok = 0;
	int ch, status, json = 0, each = 0, r;

	memset(&opts, 0, sizeof opts);
	memset(&ab, 0, sizeof ab);
	while ((ch = cmd_getopt(e, argc, argv, "h", keys_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_PASSWORD:
			break;
		case OPT_PASSWORD_FILE:
			file = optarg;
			break;
		case OPT_ASK_EACH:
			each = 1;
			break;
		default:
			return cmd_usage_error(e, "install: unknown option");
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "install needs one SELECTOR");
	if (each && file != NULL)
		return cmd_usage_error(e,
		    "install: --ask-each asks on the terminal; it takes no "
		    "--password-file");
	opts.now = time(NULL);
	opts.passphrase = keys_passphrase(ctx->fleet->config, &cause);
	if (cause != NULL)
		return cmd_fail(GF_EUSAGE, cause);
	if (deploy_load(&ab, &cause) != 0) {
		status = cmd_fail(GF_EUSAGE, cause);
		goto out;
	}
	opts.ab = &ab;
	if ((r = remote_open(ctx->fleet, argv[optind], &rm, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	n = rm->n;
	pw = xcalloc(n, sizeof *pw);
	for (i = 0; i < n; i++) {
		if (i > 0 && !each) {
			pw[i] = pw[0];
			continue;
		}
		if (each)
			xasprintf(&what, "%s (%s@%s)", rm->list[i].name,
			    rm->list[i].user, rm->list[i].host);
		else if (n == 1)
			xasprintf(
			    &what, "%s@%s", rm->list[0].user, rm->list[0].host);
		else
			xasprintf(&what, "the %zu instances", n);
		pw[i] = password_read(file, what, &cause);
		free(what);
		if (pw[i] == NULL) {
			status = cmd_fail(GF_EUSAGE, cause);
			goto out;
		}
	}
	opts.passwords = pw;
	if ((r = install_keys(rm, &opts, &res, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	for (i = 0; i < res.n; i++) {
		const struct install_host *h = &res.hosts[i];
		json_t *o;
		if (!h->failed)
			nok++;
		if (json) {
			o = json_object();
			json_object_set_new(o, "name", json_string(h->name));
			json_object_set_new(o, "ok", json_boolean(!h->failed));
			json_object_set_new(o, "key",
			    h->key != NULL ? json_string(h->key) : json_null());
			json_object_set_new(o, "fingerprint",
			    h->fingerprint != NULL ? json_string(h->fingerprint)
						   : json_null());
			json_object_set_new(o, "error",
			    h->error != NULL ? json_string(h->error)
					     : json_null());
			json_dumpf(
			    o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
			fputc('\n', stdout);
			json_decref(o);
		} else if (h->failed)
			cmd_print_failed(h->name, h->error);
		else
			printf("%s: installed %s (%s)\n", h->name, h->key,
			    h->fingerprint);
	}
	fflush(stdout);
	fprintf(stderr,
	    "gpufleet: keys install: %zu host%s: %zu installed, %zu failed\n",
	    res.n, res.n == 1 ? "" : "s", nok, res.n - nok);
	status = nok == res.n ? GF_OK : GF_EHOSTS;
	install_result_free(&res);
out:
	for (i = 0; pw != NULL && i < n; i++) {
		if (i == 0 || each)
			password_free(pw[i]);
	}
	free(pw);
	deploy_free(&ab);
	keys_passphrase_clear();
	remote_close(rm);
	return status;
}
