/* Managed SSH keys: files, the inventory's key tables, rotation state. */

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpufleet/authkeys.h"
#include "db.h"
#include "keys.h"
#include "log.h"
#include "misc.h"
#include "notify.h"
#include "status.h"
#include "xmalloc.h"

static void read_key_row(sqlite3_stmt *, struct keys_key *);
static int notify_reinjected(struct inventory *, int64_t, const char *,
    const char *, const char *, int64_t, char **);
static int get_key(struct inventory *, const char *, int64_t, const char *,
    struct keys_key *, char **);

#define KEY_COLUMNS                                                            \
	"id, name, key_type, path, pubkey, key_base64, fingerprint, "          \
	"created_at, deleted_at"

void
keys_key_clear(struct keys_key *k)
{
	free(k->name);
	free(k->type);
	free(k->path);
	free(k->pubkey);
	free(k->blob);
	free(k->fingerprint);
	memset(k, 0, sizeof *k);
}

void
keys_free_array(struct keys_key *k, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		keys_key_clear(&k[i]);
	free(k);
}

void
keys_rotation_clear(struct keys_rotation *r)
{
	free(r->old_path);
	free(r->old_blob);
	free(r->old_type);
	free(r->state);
	free(r->error);
	memset(r, 0, sizeof *r);
}

/* The keys directory, $XDG_DATA_HOME/gpufleet/keys. Caller frees. */
char *
keys_dir(void)
{
	return misc_xdg_path("XDG_DATA_HOME", ".local/share", "gpufleet/keys");
}

/*
 * Create dir and its parents, each new one 0700 whatever the umask; an
 * existing keys directory open to group or others is refused.
 */
int
keys_make_dir(const char *dir, char **cause)
{
	struct stat sb;

	if (misc_mkdirs(dir, cause) != 0)
		return -GF_EUSAGE;
	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		xasprintf(cause, "%s is not a directory", dir);
		return -GF_EUSAGE;
	}
	if ((sb.st_mode & 077) != 0) {
		xasprintf(cause,
		    "keys directory %s is mode %03o, open to others; "
		    "chmod 700 it",
		    dir, (unsigned)(sb.st_mode & 0777));
		return -GF_EUSAGE;
	}
	return 0;
}

/*
 * Write a new private key file: created 0600 with O_EXCL (an existing file
 * is never overwritten), mode forced to 0600 whatever the umask, synced.
 */
int
keys_write_private(const char *path, const char *data, size_t len, char **cause)
{
	ssize_t n;
	size_t off = 0;
	int fd;

	fd = open(
	    path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1) {
		xasprintf(cause, "cannot create %s: %s", path, strerror(errno));
		return errno == EEXIST ? -GF_EUSAGE : -GF_EDB;
	}
	if (fchmod(fd, 0600) != 0)
		goto fail;
	while (off < len) {
		n = write(fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto fail;
		off += (size_t)n;
	}
	if (fsync(fd) != 0)
		goto fail;
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	return 0;
fail:
	xasprintf(cause, "cannot write %s: %s", path, strerror(errno));
	if (fd != -1)
		close(fd);
	unlink(path);
	return -GF_EDB;
}

/* A key name: 1-64 of A-Z a-z 0-9 . _ -, not starting with a dot. */
int
keys_check_name(const char *name, char **cause)
{
	size_t n = strlen(name);

	if (n == 0 || n > 64 || name[0] == '.' || name[0] == '-' ||
	    strspn(name,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		"0123456789._-") != n) {
		xasprintf(cause,
		    "bad key name '%s' (1-64 of A-Z a-z 0-9 . _ -, "
		    "not starting with . or -)",
		    name);
		return -GF_EUSAGE;
	}
	return 0;
}

/* The public key comment, gpufleet:NAME:YYYY-MM-DD (UTC). Caller frees. */
char *
keys_comment(const char *name, time_t when)
{
	struct tm tm;
	char date[16], *s;

	gmtime_r(&when, &tm);
	strftime(date, sizeof date, "%Y-%m-%d", &tm);
	xasprintf(&s, "gpufleet:%s:%s", name, date);
	return s;
}

/* Parse --type: ed25519 (default), ecdsa (P-256) or rsa (3072 bits). */
int
keys_parse_type(
    const char *s, enum ssh_keytypes_e *type, int *bits, char **cause)
{
	if (s == NULL || strcmp(s, "ed25519") == 0) {
		*type = SSH_KEYTYPE_ED25519;
		*bits = 0;
	} else if (strcmp(s, "ecdsa") == 0) {
		*type = SSH_KEYTYPE_ECDSA_P256;
		*bits = 256;
	} else if (strcmp(s, "rsa") == 0) {
		*type = SSH_KEYTYPE_RSA;
		*bits = 3072;
	} else {
		xasprintf(
		    cause, "unknown key type '%s' (ed25519, ecdsa, rsa)", s);
		return -GF_EUSAGE;
	}
	return 0;
}

static char *keys_pass; /* the one copy of the [keys] passphrase */
static int keys_pass_read;

/*
 * The passphrase for gpufleet's keys: the first line of the file named by
 * GPUFLEET_KEYS_PASSPHRASE_FILE or else the config's [keys]
 * passphrase_file, typed on the terminal if that is "ask" (once per run),
 * or NULL (keys unencrypted; *cause set on an error). keys.c keeps the one
 * copy until keys_passphrase_clear (or exit).
 */
const char *
keys_passphrase(const struct config *config, char **cause)
{
	static int registered;
	const char *file = getenv("GPUFLEET_KEYS_PASSPHRASE_FILE");
	char *why = NULL;

	if (file == NULL && config != NULL)
		file = config->keys_passphrase_file;

	*cause = NULL;
	if (keys_pass_read)
		return keys_pass;
	if (file == NULL || *file == '\0')
		return NULL;
	misc_secret_hold();
	if (strcmp(file, "ask") == 0)
		keys_pass = misc_read_secret(
		    NULL, "Passphrase for gpufleet's keys: ", &why);
	else
		keys_pass = misc_read_secret(file, NULL, &why);
	if (keys_pass == NULL) {
		misc_secret_release();
		if (strcmp(file, "ask") == 0)
			xasprintf(cause,
			    "[keys] passphrase_file is 'ask' but there is "
			    "no terminal to ask on");
		else
			xasprintf(
			    cause, "GPUFLEET_KEYS_PASSPHRASE_FILE: %s", why);
		free(why);
		return NULL;
	}
	if (strcmp(file, "ask") == 0 && *keys_pass == '\0') {
		free(keys_pass);
		keys_pass = NULL;
		misc_secret_release();
		xasprintf(cause, "empty passphrase");
		return NULL;
	}
	keys_pass_read = 1;
	if (!registered) {
		atexit(keys_passphrase_clear);
		registered = 1;
	}
	return keys_pass;
}

/* Wipe the [keys] passphrase (a later keys_passphrase reads it again). */
void
keys_passphrase_clear(void)
{
	if (!keys_pass_read)
		return;
	explicit_bzero(keys_pass, strlen(keys_pass));
	free(keys_pass);
	keys_pass = NULL;
	keys_pass_read = 0;
	misc_secret_release();
}

/* The type name, base64 blob and SHA256 fingerprint of a key. */
int
keys_describe(ssh_key key, char **type, char **blob, char **fp, char **cause)
{
	unsigned char *hash = NULL;
	size_t hlen = 0;
	char *b64 = NULL, *f;

	if (ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK ||
	    ssh_get_publickey_hash(
		key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) != 0) {
		ssh_string_free_char(b64);
		xasprintf(cause, "cannot export a public key");
		return -GF_EUSAGE;
	}
	f = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
	ssh_clean_pubkey_hash(&hash);
	*type = xstrdup(ssh_key_type_to_char(ssh_key_type(key)));
	*blob = xstrdup(b64);
	*fp = xstrdup(f != NULL ? f : "");
	ssh_string_free_char(b64);
	ssh_string_free_char(f);
	return 0;
}

/*
 * Generate a key NAME in dir: the private key DIR/NAME (0600, O_EXCL,
 * encrypted when passphrase is not NULL) and DIR/NAME.pub. Fills k (caller
 * clears) and, if keyp is not NULL, the key itself (caller frees).
 */
int
keys_generate(const char *dir, const char *typename, const char *name,
    const char *passphrase, time_t now, struct keys_key *k, ssh_key *keyp,
    char **cause)
{
	enum ssh_keytypes_e type;
	ssh_key key = NULL;
	char *priv = NULL, *comment = NULL, *pubpath = NULL, *line = NULL;
	int bits, r;

	memset(k, 0, sizeof *k);
	if ((r = keys_parse_type(typename, &type, &bits, cause)) != 0 ||
	    (r = keys_check_name(name, cause)) != 0 ||
	    (r = keys_make_dir(dir, cause)) != 0)
		return r;
	if (ssh_pki_generate(type, bits, &key) != SSH_OK) {
		xasprintf(cause, "cannot generate a %s key",
		    typename != NULL ? typename : "ed25519");
		return -GF_EUSAGE;
	}
	if (ssh_pki_export_privkey_base64(key, passphrase, NULL, NULL, &priv) !=
	    SSH_OK) {
		xasprintf(cause, "cannot export the new private key");
		r = -GF_EUSAGE;
		goto out;
	}
	xasprintf(&k->path, "%s/%s", dir, name);
	xasprintf(&pubpath, "%s/%s.pub", dir, name);
	if ((r = keys_describe(
		 key, &k->type, &k->blob, &k->fingerprint, cause)) != 0)
		goto out;
	comment = keys_comment(name, now);
	xasprintf(&line, "%s %s %s\n", k->type, k->blob, comment);
	if ((r = keys_write_private(k->path, priv, strlen(priv), cause)) != 0)
		goto out;
	if ((r = keys_write_private(pubpath, line, strlen(line), cause)) != 0) {
		unlink(k->path);
		goto out;
	}
	line[strlen(line) - 1] = '\0';
	k->pubkey = line;
	line = NULL;
	k->name = xstrdup(name);
	k->created_at = now;
out:
	if (priv != NULL) {
		explicit_bzero(priv, strlen(priv));
		ssh_string_free_char(priv);
	}
	free(comment);
	free(pubpath);
	free(line);
	if (r != 0)
		keys_key_clear(k);
	if (r == 0 && keyp != NULL)
		*keyp = key;
	else
		ssh_key_free(key);
	return r;
}

/* Load a private key file, never prompting. Caller frees *keyp. */
int
keys_load(const char *path, const char *passphrase, ssh_key *keyp, char **cause)
{
	*keyp = NULL;
	if (ssh_pki_import_privkey_file(path, passphrase, NULL, NULL, keyp) !=
	    SSH_OK) {
		xasprintf(cause,
		    "cannot load key %s (missing, or encrypted: set "
		    "GPUFLEET_KEYS_PASSPHRASE_FILE)",
		    path);
		return -GF_EUSAGE;
	}
	return 0;
}

/* Is s a plausible base64 key blob (safe to put in single quotes)? */
int
keys_valid_blob(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < 16384 &&
	    strspn(s,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		"0123456789+/=") == n;
}

/*
 * The remote edit of authorized_keys: the agent's `authkeys` subcommand
 * (agent/akedit.c, which reads lines with the one parser both sides
 * share), run from where status deploys it, or uploaded first when upload
 * is set (the binary on stdin). add is "TYPE BLOB COMMENT" to have (taking
 * the options of the line holding like, if any), del a blob to remove; the
 * agent prints "changed" or "unchanged". Wrapped in sh -c, so the login
 * shell need not be POSIX. Caller frees.
 */
char *
keys_authkeys_command(const struct instance *in, const struct agent_bin *ab,
    const char *add, const char *like, const char *del, int upload)
{
	const struct {
		const char *flag, *value;
	} opts[] = { { "--add", add }, { "--like", like },
		{ "--remove", del } };
	char *qpath = misc_quote_path(in->authorized_keys_file), *args, *t;
	char *q, *agent, *cmd;
	size_t i;

	xasprintf(&args, "authkeys %s", qpath);
	for (i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		if (opts[i].value == NULL)
			continue;
		q = misc_shell_quote(opts[i].value);
		xasprintf(&t, "%s %s %s", args, opts[i].flag, q);
		free(q);
		free(args);
		args = t;
	}
	/* A new file gets its SELinux context, as the old script did. */
	xasprintf(&t,
	    "%s && { ! command -v restorecon >/dev/null 2>&1 || restorecon -F "
	    "-- %s 2>/dev/null || :; }",
	    args, qpath);
	free(args);
	agent = deploy_agent_command(in, ab, t, upload);
	free(t);
	cmd = deploy_sh_command(agent);
	free(agent);
	free(qpath);
	return cmd;
}

static void
read_key_row(sqlite3_stmt *st, struct keys_key *k)
{
	k->id = sqlite3_column_int64(st, 0);
	k->name = db_text(st, 1);
	k->type = db_text(st, 2);
	k->path = db_text(st, 3);
	k->pubkey = db_text(st, 4);
	k->blob = db_text(st, 5);
	k->fingerprint = db_text(st, 6);
	k->created_at = sqlite3_column_int64(st, 7);
	k->deleted_at = sqlite3_column_int64(st, 8);
}

/* Record a new managed key; sets k->id. */
int
keys_add(struct inventory *inv, struct keys_key *k, char **cause)
{
	sqlite3_stmt *st;
	int rc, r;

	if ((r = db_prepare(inv, &st,
		 "INSERT INTO managed_key (name, key_type, path, pubkey, "
		 "key_base64, fingerprint, created_at) VALUES "
		 "(?, ?, ?, ?, ?, ?, ?)",
		 "recording a key", cause, "ttttttI", k->name, k->type, k->path,
		 k->pubkey, k->blob, k->fingerprint, (int64_t)k->created_at)) !=
	    0)
		return r;
	if (((rc = sqlite3_step(st)) & 0xff) == SQLITE_CONSTRAINT) {
		sqlite3_finalize(st);
		xasprintf(cause, "a key named '%s' exists already", k->name);
		return -GF_EUSAGE;
	}
	if ((r = db_finish(inv, st, rc, "recording a key", cause)) < 0)
		return r;
	k->id = sqlite3_last_insert_rowid(inv->db);
	return 0;
}

/*
 * The managed key whose column (in sql) is name, or id when name is NULL:
 * 0, 1 if none, or -GF_EDB. Caller clears k.
 */
static int
get_key(struct inventory *inv, const char *sql, int64_t id, const char *name,
    struct keys_key *k, char **cause)
{
	sqlite3_stmt *st;
	int rc, r;

	memset(k, 0, sizeof *k);
	if (name != NULL)
		r = db_prepare(
		    inv, &st, sql, "reading a key", cause, "t", name);
	else
		r = db_prepare(inv, &st, sql, "reading a key", cause, "I", id);
	if (r != 0)
		return r;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		read_key_row(st, k);
	if ((r = db_finish(inv, st, rc, "reading a key", cause)) < 0)
		return r;
	return r == 1 ? 0 : 1;
}

/* A managed key by id: 0, 1 if none, or -GF_EDB. Caller clears k. */
int
keys_get(struct inventory *inv, int64_t id, struct keys_key *k, char **cause)
{
	return get_key(inv,
	    "SELECT " KEY_COLUMNS " FROM managed_key WHERE id = ?", id, NULL, k,
	    cause);
}

/* A managed key by name: 0, 1 if none, or -GF_EDB. Caller clears k. */
int
keys_get_by_name(
    struct inventory *inv, const char *name, struct keys_key *k, char **cause)
{
	return get_key(inv,
	    "SELECT " KEY_COLUMNS " FROM managed_key WHERE name = ?", 0, name,
	    k, cause);
}

/* Every managed key, oldest first. Caller frees with keys_free_array. */
int
keys_list(struct inventory *inv, struct keys_key **out, size_t *n, char **cause)
{
	struct keys_key *list = NULL;
	sqlite3_stmt *st;
	size_t cnt = 0;
	int rc, r;

	*out = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT " KEY_COLUMNS " FROM managed_key ORDER BY id",
		 "listing keys", cause, "")) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		list = xreallocarray(list, cnt + 1, sizeof *list);
		memset(&list[cnt], 0, sizeof list[cnt]);
		read_key_row(st, &list[cnt++]);
	}
	if ((r = db_finish(inv, st, rc, "listing keys", cause)) < 0) {
		keys_free_array(list, cnt);
		return r;
	}
	*out = list;
	*n = cnt;
	return 0;
}

/* The managed key an instance uses: 0 with *key_id, 1 if none, or -GF_EDB. */
int
keys_instance_key(
    struct inventory *inv, int64_t instance_id, int64_t *key_id, char **cause)
{
	const char *what = "reading an instance's key";
	sqlite3_stmt *st;
	int rc, r;

	*key_id = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT key_id FROM instance_key WHERE instance_id = ?", what,
		 cause, "I", instance_id)) != 0)
		return r;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		*key_id = sqlite3_column_int64(st, 0);
	if ((r = db_finish(inv, st, rc, what, cause)) < 0)
		return r;
	return r == 1 ? 0 : 1;
}

/*
 * The active instances using a key, "a,b,c" (or ""), however it came to
 * them: assigned by name or rotated in (instance_key), their identity set
 * to its file, or the config's default identity being its file. Caller
 * frees.
 */
char *
keys_instances_using(struct inventory *inv, int64_t key_id)
{
	sqlite3_stmt *st;
	char *s = xstrdup(""), *t;

	if (db_prepare(inv, &st,
		"SELECT i.name FROM instance i, managed_key m WHERE m.id = ?1 "
		"AND i.released_at IS NULL AND (i.id IN (SELECT instance_id "
		"FROM instance_key WHERE key_id = ?1) OR i.identity = m.path "
		"OR (i.identity IS NULL AND m.path = ?2)) ORDER BY i.name",
		NULL, NULL, "It", key_id,
		inv->config != NULL ? inv->config->identity : NULL) != 0)
		return s;
	while (sqlite3_step(st) == SQLITE_ROW) {
		xasprintf(&t, "%s%s%s", s, *s != '\0' ? "," : "",
		    (const char *)sqlite3_column_text(st, 0));
		free(s);
		s = t;
	}
	sqlite3_finalize(st);
	return s;
}

/*
 * Is a key still needed: used by an instance (as its managed key or as
 * its identity file), or the old or new key of a
 * rotation not yet past step 6? 1 yes, 0 no, or -GF_EDB.
 */
int
keys_in_use(struct inventory *inv, int64_t key_id, char **cause)
{
	const char *what = "checking a key's use";
	sqlite3_stmt *st;
	int rc, r, used = 0;

	if ((r = db_prepare(inv, &st,
		 "SELECT (SELECT count(*) FROM instance_key WHERE key_id = ?1) "
		 "+ (SELECT count(*) FROM instance i, managed_key m WHERE "
		 "m.id = ?1 AND i.identity = m.path) "
		 "+ (SELECT count(*) FROM key_rotation WHERE step < 6 AND "
		 "state != 'done' AND (old_key_id = ?1 OR new_key_id = ?1))",
		 what, cause, "I", key_id)) != 0)
		return r;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		used = sqlite3_column_int64(st, 0) > 0;
	else if (rc == SQLITE_DONE)
		rc = SQLITE_ERROR;
	if ((r = db_finish(inv, st, rc, what, cause)) < 0)
		return r;
	return used;
}

/*
 * Make an instance use a managed key: instance_key and the instance's
 * identity, so `gpufleet ssh` and the ssh-config export follow it.
 */
int
keys_set_instance_key(struct inventory *inv, int64_t instance_id,
    const struct keys_key *k, char **cause)
{
	const char *what = "switching an instance's key";
	int r;

	if ((r = db_exec(inv,
		 "INSERT OR REPLACE INTO instance_key (instance_id, key_id, "
		 "since) VALUES (?, ?, strftime('%s','now'))",
		 what, cause, "II", instance_id, k->id)) != 0)
		return r;
	return db_exec(inv, "UPDATE instance SET identity = ? WHERE id = ?",
	    what, cause, "tI", k->path, instance_id);
}

/* An instance no longer uses a managed key (its identity is another file). */
int
keys_clear_instance_key(
    struct inventory *inv, int64_t instance_id, char **cause)
{
	return db_exec(inv, "DELETE FROM instance_key WHERE instance_id = ?",
	    "switching an instance's key", cause, "I", instance_id);
}

/* The live managed key whose private key is path: 0, 1 if none, -GF_EDB. */
static int
key_by_path(
    struct inventory *inv, const char *path, int64_t *key_id, char **cause)
{
	const char *what = "looking up a key file";
	sqlite3_stmt *st;
	int rc, r;

	*key_id = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT id FROM managed_key WHERE path = ? AND deleted_at IS "
		 "NULL ORDER BY id DESC LIMIT 1",
		 what, cause, "t", path)) != 0)
		return r;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		*key_id = sqlite3_column_int64(st, 0);
	if ((r = db_finish(inv, st, rc, what, cause)) < 0)
		return r;
	return *key_id != 0 ? 0 : 1;
}

/*
 * What an identity value (add --identity, set identity=) names. A value
 * without '/' that is a managed key's name is that key, even when a file
 * of that name is in the working directory (./NAME names the file). Any
 * other value is a key file, made absolute; a bare name that is neither a
 * managed key nor a file here is refused, as it would fail at the first
 * login. Fills *path (caller frees; NULL for "", the config's default)
 * and *key_id (the managed key, by name or by its file, or 0). Returns 0,
 * or -GF_EUSAGE or -GF_EDB with *cause.
 */
int
keys_resolve_identity(struct inventory *inv, const char *value, char **path,
    int64_t *key_id, char **cause)
{
	struct keys_key k;
	struct stat sb;
	int r;

	*path = NULL;
	*key_id = 0;
	if (*value == '\0')
		return 0;
	if (strchr(value, '/') == NULL && *value != '~' &&
	    strcmp(value, ".") != 0 && strcmp(value, "..") != 0) {
		if ((r = keys_get_by_name(inv, value, &k, cause)) < 0)
			return r;
		if (r == 0 && k.deleted_at != 0) {
			xasprintf(cause,
			    "managed key '%s' was deleted; pick another "
			    "(gpufleet keys ls)",
			    value);
			keys_key_clear(&k);
			return -GF_EUSAGE;
		}
		if (r == 0) {
			if (stat(value, &sb) == 0)
				warn_msg("identity '%s' is the managed key %s; "
					 "./%s names the file here",
				    value, value, value);
			*path = k.path;
			*key_id = k.id;
			k.path = NULL;
			keys_key_clear(&k);
			return 0;
		}
		if (stat(value, &sb) != 0) {
			xasprintf(cause,
			    "identity '%s' is neither a managed key (gpufleet "
			    "keys ls) nor a file here; write a path such as "
			    "./%s or ~/.ssh/%s",
			    value, value, value);
			return -GF_EUSAGE;
		}
	}
	*path = instance_local_path(value);
	if ((r = key_by_path(inv, *path, key_id, cause)) < 0) {
		free(*path);
		*path = NULL;
		return r;
	}
	return 0;
}

/* Record that a key's private file is gone. */
int
keys_mark_deleted(struct inventory *inv, int64_t id, time_t when, char **cause)
{
	return db_exec(inv,
	    "UPDATE managed_key SET deleted_at = ? WHERE id = ?",
	    "retiring a key", cause, "II", (int64_t)when, id);
}

/* The rotation row of an instance: 0, 1 if none, or -GF_EDB. */
int
keys_rotation_get(struct inventory *inv, int64_t instance_id,
    struct keys_rotation *r, char **cause)
{
	const char *what = "reading a rotation";
	sqlite3_stmt *st;
	int rc, ret;

	memset(r, 0, sizeof *r);
	if ((ret = db_prepare(inv, &st,
		 "SELECT old_key_id, old_path, old_type, old_base64, "
		 "new_key_id, step, state, error, keep_old FROM key_rotation "
		 "WHERE instance_id = ?",
		 what, cause, "I", instance_id)) != 0)
		return ret;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		r->instance_id = instance_id;
		r->old_key_id = sqlite3_column_int64(st, 0);
		r->old_path = db_text(st, 1);
		r->old_type = db_text(st, 2);
		r->old_blob = db_text(st, 3);
		r->new_key_id = sqlite3_column_int64(st, 4);
		r->step = sqlite3_column_int(st, 5);
		r->state = db_text(st, 6);
		r->error = db_text(st, 7);
		r->keep_old = sqlite3_column_int(st, 8);
	}
	if ((ret = db_finish(inv, st, rc, what, cause)) < 0)
		return ret;
	return ret == 1 ? 0 : 1;
}

/* Write the rotation row of an instance (inside the caller's transaction). */
int
keys_rotation_put(
    struct inventory *inv, const struct keys_rotation *r, char **cause)
{
	return db_exec(inv,
	    "INSERT OR REPLACE INTO key_rotation (instance_id, old_key_id, "
	    "old_path, old_type, old_base64, new_key_id, step, state, error, "
	    "keep_old, updated_at) VALUES "
	    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, strftime('%s','now'))",
	    "recording a rotation step", cause, "INtttIitti", r->instance_id,
	    r->old_key_id, r->old_path, r->old_type, r->old_blob, r->new_key_id,
	    r->step, r->state, r->error, r->keep_old);
}

/* synchronous=FULL on this connection: intent records must survive power loss.
 */
int
keys_sync_full(struct inventory *inv, char **cause)
{
	return db_exec(inv, "PRAGMA synchronous = FULL",
	    "PRAGMA synchronous = FULL", cause, "");
}

/*
 * The pid of the live process that holds the rotation lock in *pid, or 0
 * when none does (no lock, or its holder is gone: a killed rotation).
 */
int
keys_lock_holder(struct inventory *inv, int64_t *pid, char **cause)
{
	const char *what = "reading the rotation lock";
	sqlite3_stmt *st;
	int r, rc;

	*pid = 0;
	if ((r = db_prepare(inv, &st, "SELECT pid FROM key_lock WHERE id = 1",
		 what, cause, "")) != 0)
		return r;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		*pid = sqlite3_column_int64(st, 0);
	if ((r = db_finish(inv, st, rc, what, cause)) < 0)
		return r;
	if (*pid != 0 && kill((pid_t)*pid, 0) != 0 && errno != EPERM)
		*pid = 0;
	return 0;
}

/*
 * Take the rotation lock of this database for this process: refused while
 * another live process holds it; a lock of a dead process is taken over.
 */
int
keys_lock(struct inventory *inv, char **cause)
{
	const char *what = "taking the rotation lock";
	sqlite3_stmt *st;
	int64_t pid = 0, since = 0;
	int r, rc;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = db_prepare(inv, &st,
		 "SELECT pid, started_at FROM key_lock WHERE id = 1", what,
		 cause, "")) != 0)
		goto fail;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		pid = sqlite3_column_int64(st, 0);
		since = sqlite3_column_int64(st, 1);
	}
	if ((r = db_finish(inv, st, rc, what, cause)) < 0)
		goto fail;
	if (pid != 0 && pid != (int64_t)getpid() &&
	    (kill((pid_t)pid, 0) == 0 || errno == EPERM)) {
		inventory_rollback(inv);
		xasprintf(cause,
		    "another key rotation (pid %lld, since %lld) is running "
		    "on %s; not starting a second one",
		    (long long)pid, (long long)since, inv->path);
		return -GF_EUSAGE;
	}
	if (pid != 0 && pid != (int64_t)getpid())
		info("taking over the rotation lock of pid %lld, which is gone",
		    (long long)pid);
	if ((r = db_exec(inv,
		 "INSERT OR REPLACE INTO key_lock (id, pid, started_at) VALUES "
		 "(1, ?, strftime('%s','now'))",
		 what, cause, "I", (int64_t)getpid())) != 0)
		goto fail;
	return inventory_commit(inv, cause);
fail:
	inventory_rollback(inv);
	return r;
}

/* Release this process's rotation lock. */
void
keys_unlock(struct inventory *inv)
{
	db_exec(inv, "DELETE FROM key_lock WHERE pid = ?", NULL, NULL, "I",
	    (int64_t)getpid());
}

/* Remember that a key was taken off an instance (in the caller's write). */
int
keys_retire_blob(struct inventory *inv, int64_t instance_id, const char *type,
    const char *blob, const char *reason, char **cause)
{
	return db_exec(inv,
	    "INSERT OR REPLACE INTO retired_key (instance_id, key_type, "
	    "key_base64, reason, retired_at) VALUES (?, ?, ?, ?, "
	    "strftime('%s','now'))",
	    "recording a retired key", cause, "Ittt", instance_id, type, blob,
	    reason);
}

/*
 * Queue key_reinjected for one key found back on instance (named name):
 * once per instance, key and retirement (a key retired again after its
 * removal is news again).
 */
static int
notify_reinjected(struct inventory *inv, int64_t instance_id, const char *name,
    const char *desc, const char *id, int64_t retired_at, char **cause)
{
	char *what, *next, *key;
	int r;

	xasprintf(&what,
	    "has a key gpufleet took off back in its authorized_keys "
	    "(re-added by the platform?): %s",
	    desc);
	xasprintf(&next,
	    "gpufleet keys rotate %s --revoke OLD.pub (a file "
	    "holding that key)",
	    name);
	xasprintf(&key, "key_reinjected:%lld:%s:%lld", (long long)instance_id,
	    id, (long long)retired_at);
	r = notifyqueue_add(inv, NOTIFY_KEY_REINJECTED, name,
	    (int64_t)time(NULL), what, next, key, cause);
	free(what);
	free(next);
	free(key);
	return r;
}

/*
 * Keys taken off an instance that are back in its authorized_keys text
 * (platforms re-add console keys at container start): returns how many,
 * with *found "TYPE SHA256:... (rotated), ..." (caller frees), or -GF_EDB.
 * Each is queued as a key_reinjected notification, in the caller's
 * transaction (status, exec and keys check all call this).
 */
int
keys_reinjected(struct inventory *inv, int64_t instance_id, const char *text,
    char **found, char **cause)
{
	struct hit {
		char *desc, *id;
		int64_t retired_at;
	} *hits = NULL;
	sqlite3_stmt *st;
	const char *blob;
	char *s = xstrdup(""), *t, *type, *b64, *fp, *why, *name = NULL;
	ssh_key key;
	int n = 0, i, rc, r;

	*found = NULL;
	if ((r = db_prepare(inv, &st,
		 "SELECT r.key_type, r.key_base64, r.reason, r.retired_at, "
		 "i.name FROM retired_key r JOIN instance i ON i.id = "
		 "r.instance_id WHERE r.instance_id = ? ORDER BY r.retired_at",
		 "reading retired keys", cause, "I", instance_id)) != 0) {
		free(s);
		return r;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		blob = (const char *)sqlite3_column_text(st, 1);
		/* The key of a line, as sshd reads it; never an option. */
		if (!keys_text_has_blob(text, strlen(text), blob))
			continue;
		fp = why = NULL;
		key = NULL;
		if (ssh_pki_import_pubkey_base64(blob,
			ssh_key_type_from_name(
			    (const char *)sqlite3_column_text(st, 0)),
			&key) == SSH_OK &&
		    keys_describe(key, &type, &b64, &fp, &why) == 0) {
			free(type);
			free(b64);
		}
		free(why);
		ssh_key_free(key);
		hits = xreallocarray(hits, n + 1, sizeof *hits);
		xasprintf(&hits[n].desc, "%s %s (%s)",
		    (const char *)sqlite3_column_text(st, 0),
		    fp != NULL ? fp : "?",
		    (const char *)sqlite3_column_text(st, 2));
		hits[n].id = fp != NULL ? fp : xstrdup(blob);
		hits[n].retired_at = sqlite3_column_int64(st, 3);
		if (name == NULL)
			name =
			    xstrdup((const char *)sqlite3_column_text(st, 4));
		xasprintf(&t, "%s%s%s", s, n > 0 ? ", " : "", hits[n].desc);
		free(s);
		s = t;
		n++;
	}
	r = db_finish(inv, st, rc, "reading retired keys", cause);
	/* Queued once the read is done: the insert must not race it. */
	for (i = 0; i < n; i++) {
		if (r >= 0)
			r = notify_reinjected(inv, instance_id, name,
			    hits[i].desc, hits[i].id, hits[i].retired_at,
			    cause);
		free(hits[i].desc);
		free(hits[i].id);
	}
	free(hits);
	free(name);
	if (r < 0) {
		free(s);
		return r;
	}
	if (n > 0)
		*found = s;
	else
		free(s);
	return n;
}

/*
 * Point an instance loaded for a run at its managed key, if it has one:
 * after a rotation the key in an imported ssh_config is the old one.
 * Returns 1 if changed, 0 if the instance has no managed key, or -GF_EDB.
 */
int
keys_apply_current(struct inventory *inv, struct instance *in, char **cause)
{
	struct keys_key k;
	int64_t kid;
	int r;

	if ((r = keys_instance_key(inv, in->id, &kid, cause)) != 0)
		return r == 1 ? 0 : r;
	if ((r = keys_get(inv, kid, &k, cause)) != 0)
		return r == 1 ? 0 : r;
	free(in->identity);
	in->identity = k.path;
	k.path = NULL;
	keys_key_clear(&k);
	return 1;
}

/* A command printing the authorized_keys file (nothing if missing). Caller
 * frees. */
char *
keys_cat_script(const char *path)
{
	char *qpath = misc_quote_path(path), *qs, *script, *cmd;

	xasprintf(&script, "ak=%s; [ ! -e \"$ak\" ] || cat -- \"$ak\"", qpath);
	qs = misc_shell_quote(script);
	xasprintf(&cmd, "sh -c %s", qs);
	free(qs);
	free(script);
	free(qpath);
	return cmd;
}

/*
 * Is blob one of gpufleet's keys, in any spelling sshd reads as it
 * (authkeys_canon)? 1 yes, 0 no, or -GF_EDB.
 */
int
keys_is_managed_blob(struct inventory *inv, const char *blob, char **cause)
{
	sqlite3_stmt *st;
	const char *k;
	unsigned char *c, *kc;
	size_t cl, kcl;
	int r, found = 0;

	if (authkeys_canon(blob, strlen(blob), &c, &cl) != 0)
		return 0;
	if ((r = db_prepare(inv, &st, "SELECT key_base64 FROM managed_key",
		 "reading keys", cause, "")) != 0) {
		free(c);
		return r;
	}
	while (!found && (r = sqlite3_step(st)) == SQLITE_ROW) {
		k = (const char *)sqlite3_column_text(st, 0);
		if (k != NULL && authkeys_canon(k, strlen(k), &kc, &kcl) == 0) {
			found = kcl == cl && memcmp(kc, c, cl) == 0;
			free(kc);
		}
	}
	free(c);
	if ((r = db_finish(
		 inv, st, found ? SQLITE_DONE : r, "reading keys", cause)) < 0)
		return r;
	return found;
}

/*
 * Has gpufleet taken keys off this instance (so they may come back)? 1 yes,
 * 0 no or unknown (the database failed).
 */
int
keys_has_retired(struct inventory *inv, int64_t instance_id)
{
	return db_exec(inv,
		   "SELECT 1 FROM retired_key WHERE instance_id = ? LIMIT 1",
		   NULL, NULL, "I", instance_id) == 1;
}

/*
 * Split an authorized_keys line as sshd reads it (gpufleet/authkeys.h):
 * its options ("" if none), key type, blob and comment, pointers into a
 * copy the caller frees with *buf. 0, or -1 if no key is on it.
 */
int
keys_parse_line(const char *line, char **buf, const char **options,
    const char **type, const char **blob, const char **comment)
{
	struct authkeys_line l;
	char *s = xstrdup(line);

	*buf = s;
	if (authkeys_parse(s, strlen(s), &l) != AUTHKEYS_KEY)
		return -1;
	/*
	 * Each part ends at a space, a tab or the line's end (a blob may hold
	 * a CR, \v or \f, which sshd's decoder skips): cut there.
	 */
	if (l.options.len != 0)
		s[l.options.off + l.options.len] = '\0';
	s[l.type.off + l.type.len] = '\0';
	s[l.blob.off + l.blob.len] = '\0';
	s[l.comment.off + l.comment.len] = '\0';
	*options = l.options.len != 0 ? s + l.options.off : "";
	*type = s + l.type.off;
	*blob = s + l.blob.off;
	*comment = s + l.comment.off;
	return 0;
}

/*
 * Does any line of text hold the key with this blob, in any spelling sshd
 * reads as it (authkeys_canon)? 1 or 0.
 */
int
keys_text_has_blob(const char *text, size_t len, const char *blob)
{
	unsigned char *c;
	size_t off, next, ll, cl;
	int found = 0;

	if (authkeys_canon(blob, strlen(blob), &c, &cl) != 0)
		return 0;
	for (off = 0; off < len && !found; off = next) {
		next = authkeys_next_line(text, len, off, &ll);
		found = authkeys_line_has_key(text + off, ll, c, cl);
	}
	free(c);
	return found;
}

/*
 * Warn, naming the instance, where a key gpufleet took off is back in the
 * authorized_keys text read from it (status and exec call this on their
 * normal contact). Returns what keys_reinjected does.
 */
int
keys_warn_reinjected(struct inventory *inv, const struct instance *in,
    const char *text, char **cause)
{
	char *found = NULL;
	int r;

	r = keys_reinjected(inv, in->id, text, &found, cause);
	if (r > 0)
		warn_msg("%s: a key gpufleet took off is back in %s (re-added "
			 "by the platform?): %s; see gpufleet keys check %s",
		    in->name, in->authorized_keys_file, found, in->name);
	free(found);
	return r;
}

void
keys_orphans_free(struct keys_orphan *o, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(o[i].name);
		free(o[i].path);
	}
	free(o);
}

static void
add_orphan(struct keys_orphan **o, size_t *n, const char *name,
    const char *path, int64_t id, const char *why, time_t mtime)
{
	struct keys_orphan *x;

	*o = xreallocarray(*o, *n + 1, sizeof **o);
	x = &(*o)[(*n)++];
	x->name = xstrdup(name);
	x->path = xstrdup(path);
	x->key_id = id;
	x->why = why;
	x->mtime = mtime;
}

/*
 * Key files gpufleet made that nothing will use: files in dir with no
 * live database row (the row never committed: a kill between the two), and
 * keys made for rotations that were all reverted and used by no instance.
 * Caller frees with keys_orphans_free. 0 or -GF_EDB.
 */
int
keys_orphans(struct inventory *inv, const char *dir, struct keys_orphan **out,
    size_t *n, char **cause)
{
	struct keys_orphan *o = NULL;
	sqlite3_stmt *st = NULL;
	struct dirent *de;
	struct stat sb;
	char *base, *path, *why = NULL;
	size_t cnt = 0, i, len;
	DIR *d;
	int rc, r, known;

	*out = NULL;
	*n = 0;
	if ((r = db_prepare(inv, &st,
		 "SELECT id, name, path, created_at FROM managed_key m WHERE "
		 "deleted_at IS NULL AND id NOT IN (SELECT key_id FROM "
		 "instance_key) AND path NOT IN (SELECT identity FROM instance "
		 "WHERE identity IS NOT NULL) AND id IN (SELECT new_key_id "
		 "FROM key_rotation "
		 "WHERE state = 'reverted') AND id NOT IN (SELECT new_key_id "
		 "FROM key_rotation WHERE state != 'reverted') AND id NOT IN "
		 "(SELECT old_key_id FROM key_rotation WHERE state != "
		 "'reverted' AND old_key_id IS NOT NULL) ORDER BY id",
		 "finding orphan keys", cause, "")) != 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		add_orphan(&o, &cnt, (const char *)sqlite3_column_text(st, 1),
		    (const char *)sqlite3_column_text(st, 2),
		    sqlite3_column_int64(st, 0), "made for a reverted rotation",
		    (time_t)sqlite3_column_int64(st, 3));
	if ((r = db_finish(inv, st, rc, "finding orphan keys", cause)) < 0) {
		keys_orphans_free(o, cnt);
		return r;
	}
	if ((d = opendir(dir)) == NULL) {
		*out = o;
		*n = cnt;
		return 0;
	}
	if ((r = db_prepare(inv, &st,
		 "SELECT 1 FROM managed_key WHERE path = ? AND deleted_at IS "
		 "NULL",
		 "finding orphan keys", cause, "")) != 0) {
		closedir(d);
		keys_orphans_free(o, cnt);
		return r;
	}
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (len > 4 && strcmp(de->d_name + len - 4, ".pub") == 0)
			base = xstrndup(de->d_name, len - 4);
		else
			base = xstrdup(de->d_name);
		if (keys_check_name(base, &why) != 0) {
			free(why);
			why = NULL;
			free(base);
			continue;
		}
		xasprintf(&path, "%s/%s", dir, base);
		for (i = 0; i < cnt && strcmp(o[i].path, path) != 0; i++)
			;
		db_rebind(st, "t", path);
		known = sqlite3_step(st) == SQLITE_ROW;
		if (i == cnt && !known)
			add_orphan(&o, &cnt, base, path, 0,
			    "no database row (interrupted before it was "
			    "recorded)",
			    lstat(path, &sb) == 0 ? sb.st_mtime : 0);
		free(path);
		free(base);
	}
	sqlite3_finalize(st);
	closedir(d);
	*out = o;
	*n = cnt;
	return 0;
}

/* Delete an orphan's files (and mark its row deleted, if it has one). */
int
keys_remove_orphan(
    struct inventory *inv, const struct keys_orphan *o, char **cause)
{
	char *pub;
	int r = 0;

	xasprintf(&pub, "%s.pub", o->path);
	if ((unlink(o->path) != 0 && errno != ENOENT) ||
	    (unlink(pub) != 0 && errno != ENOENT)) {
		xasprintf(
		    cause, "cannot remove %s: %s", o->path, strerror(errno));
		r = -GF_EDB;
	} else if (o->key_id != 0)
		r = keys_mark_deleted(inv, o->key_id, time(NULL), cause);
	free(pub);
	return r;
}

/*
 * After a rotation to key_id was reverted: delete the key if that left it
 * an orphan (no instance uses it, no other rotation needs it). 1 if
 * deleted, 0 if kept, or -GF_EDB.
 */
int
keys_drop_reverted(
    struct inventory *inv, const char *dir, int64_t key_id, char **cause)
{
	struct keys_orphan *o;
	size_t n, i;
	int r;

	if ((r = keys_orphans(inv, dir, &o, &n, cause)) != 0)
		return r;
	for (i = 0; i < n && o[i].key_id != key_id; i++)
		;
	r = i < n ? keys_remove_orphan(inv, &o[i], cause) : 0;
	if (r == 0 && i < n)
		r = 1;
	keys_orphans_free(o, n);
	return r;
}

/*
 * A key name from base that neither the inventory nor the keys directory
 * dir has yet: base, base-2, base-3... Returns 0 with *name set (caller
 * frees), or -1 when none is free.
 */
int
keys_unique_name(
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

/*
 * A name for a key made now for prefix (an instance's name, or "shared"):
 * PREFIX-YYYYmmdd-HHMMSS in UTC, made unique as keys_unique_name does.
 * Returns 0 with *name set (caller frees), or -1 when there is none.
 */
int
keys_dated_name(struct inventory *inv, const char *dir, const char *prefix,
    time_t now, char **name)
{
	char stamp[32], *base, *cause = NULL;
	struct tm tm;
	int r;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
	xasprintf(&base, "%s-%s", prefix, stamp);
	if ((r = keys_check_name(base, &cause)) == 0)
		r = keys_unique_name(inv, dir, base, name);
	free(cause);
	free(base);
	return r != 0 ? -1 : 0;
}
