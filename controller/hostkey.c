/* Pinned host keys: lookup, pinning, the policy check, known_hosts export. */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "db.h"
#include "hostkey.h"
#include "knownhosts.h"
#include "log.h"
#include "misc.h"
#include "notify.h"
#include "sshconfig.h"
#include "status.h"
#include "xmalloc.h"

/* What the user's known_hosts files list for a host. */
enum { KH_NONE, KH_MATCH, KH_OTHER, KH_REVOKED };

static int known_hosts_check(
    const struct instance *, const char *, const char *, char **);
static char *listed_fingerprint(const char *, const char *);
static struct sshconfig_set *ssh_config_set(const char *, const char *);
static void known_hosts_read(const struct instance *, struct knownhosts *);
static int known_hosts_ours(const char *, char **);
static void notify_changed(struct inventory *, const struct instance *,
    const struct hostkey *, const char *);
static int insert_pin(struct inventory *, int, int64_t, const char *,
    const char *, const char *, const char *, char **);
static int pin_first(struct inventory *, int64_t, const char *, const char *,
    const char *, const char *, struct hostkey *, char **);

void
hostkey_clear(struct hostkey *k)
{
	free(k->type);
	free(k->base64);
	free(k->fingerprint);
	free(k->source);
	memset(k, 0, sizeof *k);
}

/* The pinned key of an instance: 0 found, 1 none, or -GF_EDB. */
int
hostkey_get(struct inventory *inv, int64_t id, struct hostkey *k, char **cause)
{
	const char *what = "reading host key";
	sqlite3_stmt *st;
	int rc, r;

	memset(k, 0, sizeof *k);
	if ((r = db_prepare(inv, &st,
		 "SELECT key_type, key_base64, fingerprint, source, first_seen "
		 "FROM host_key WHERE instance_id = ?",
		 what, cause, "I", id)) != 0)
		return r;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		k->type = db_text(st, 0);
		k->base64 = db_text(st, 1);
		k->fingerprint = db_text(st, 2);
		k->source = db_text(st, 3);
		k->first_seen = sqlite3_column_int64(st, 4);
	}
	if ((r = db_finish(inv, st, rc, what, cause)) < 0)
		return r;
	return r == 1 ? 0 : 1;
}

/*
 * Insert the pin inside the caller's transaction (replace: over the one
 * there is); on failure roll back and fill *cause. Returns 0 or -GF_EDB.
 */
static int
insert_pin(struct inventory *inv, int replace, int64_t id, const char *type,
    const char *base64, const char *fp, const char *source, char **cause)
{
	int r;

	r = db_exec(inv,
	    replace
		? "INSERT OR REPLACE INTO host_key (instance_id, key_type, "
		  "key_base64, fingerprint, source, first_seen) VALUES "
		  "(?, ?, ?, ?, ?, ?)"
		: "INSERT INTO host_key (instance_id, key_type, key_base64, "
		  "fingerprint, source, first_seen) VALUES "
		  "(?, ?, ?, ?, ?, ?)",
	    "pinning host key", cause, "IttttI", id, type, base64, fp, source,
	    (int64_t)time(NULL));
	if (r == 0)
		return 0;
	inventory_rollback(inv);
	return -GF_EDB;
}

/* Pin (or re-pin) the host key of an instance, in its own transaction. */
int
hostkey_pin(struct inventory *inv, int64_t id, const char *type,
    const char *base64, const char *fp, const char *source, char **cause)
{
	int r;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = insert_pin(inv, 1, id, type, base64, fp, source, cause)) != 0)
		return r;
	return inventory_commit(inv, cause);
}

/*
 * Pin a key seen for the first time, unless another process pinned one
 * meanwhile: the read and the insert are one BEGIN IMMEDIATE transaction,
 * so of two first contacts at once the second sees the first's pin.
 * Returns 1 when pinned, 0 when a key was already pinned (filled into *k,
 * which the caller clears), or -GF_EDB.
 */
static int
pin_first(struct inventory *inv, int64_t id, const char *type,
    const char *base64, const char *fp, const char *source, struct hostkey *k,
    char **cause)
{
	int r;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = hostkey_get(inv, id, k, cause)) <= 0) {
		inventory_rollback(inv);
		return r;
	}
	if ((r = insert_pin(inv, 0, id, type, base64, fp, source, cause)) != 0)
		return r;
	if ((r = inventory_commit(inv, cause)) != 0)
		return r;
	return 1;
}

/* Forget the pinned key; the next contact decides by policy. */
int
hostkey_forget(struct inventory *inv, int64_t id, char **cause)
{
	return db_exec(inv, "DELETE FROM host_key WHERE instance_id = ?",
	    "forgetting host key", cause, "I", id);
}

/*
 * The ssh_config files path and then /etc/ssh/ssh_config, parsed, with
 * home for ~: kept for the process (first contacts of a fleet imported
 * from one big ssh_config parse it once), parsed again when either file
 * changes (size, mtime, inode; a change only in a file they Include is
 * seen by the next process).
 * One that does not parse stands for none: ssh's defaults.
 */
static struct sshconfig_set *
ssh_config_set(const char *path, const char *home)
{
	static struct {
		char *path, *home;
		struct stat st[2];
		struct sshconfig_set *set;
	} cache[4];
	static unsigned next;
	const char *paths[2] = { path, "/etc/ssh/ssh_config" };
	struct stat st[2];
	char *cause = NULL;
	unsigned i, j;

	for (j = 0; j < 2; j++) {
		if (stat(paths[j], &st[j]) != 0)
			memset(&st[j], 0, sizeof st[j]);
	}
	for (i = 0; i < sizeof cache / sizeof cache[0]; i++) {
		if (cache[i].set == NULL || strcmp(cache[i].path, path) != 0 ||
		    strcmp(cache[i].home, home) != 0)
			continue;
		for (j = 0; j < 2; j++) {
			if (cache[i].st[j].st_size != st[j].st_size ||
			    cache[i].st[j].st_ino != st[j].st_ino ||
			    cache[i].st[j].st_mtim.tv_sec !=
				st[j].st_mtim.tv_sec ||
			    cache[i].st[j].st_mtim.tv_nsec !=
				st[j].st_mtim.tv_nsec)
				break;
		}
		if (j == 2)
			return cache[i].set;
		break; /* changed: parsed again in the same slot */
	}
	if (i == sizeof cache / sizeof cache[0])
		i = next++ % (sizeof cache / sizeof cache[0]);
	free(cache[i].path);
	free(cache[i].home);
	sshconfig_unload(cache[i].set);
	cache[i].path = xstrdup(path);
	cache[i].home = xstrdup(home);
	memcpy(cache[i].st, st, sizeof st);
	if ((cache[i].set = sshconfig_load(paths, 2, home, &cause)) == NULL) {
		debug_f("%s (reading the default known_hosts files)", cause);
		free(cause);
		cache[i].set = sshconfig_load(paths, 0, home, &cause);
	}
	return cache[i].set;
}

/*
 * Read what the user's known_hosts files list for the instance: the files
 * ssh_config names for it (its own ssh_config if imported, else
 * ~/.ssh/config, then /etc/ssh/ssh_config, as ssh -G), for its HOST:PORT.
 */
static void
known_hosts_read(const struct instance *in, struct knownhosts *kh)
{
	const char *home = getenv("HOME");
	struct sshconfig sc;
	char *user_cfg, *name;
	size_t i;

	if (home == NULL)
		home = "/";
	xasprintf(&user_cfg, "%s/.ssh/config", home);
	sshconfig_lookup(
	    ssh_config_set(in->source != NULL ? in->source : user_cfg, home),
	    in->source != NULL ? in->name : in->host, &sc);
	free(user_cfg);
	name = knownhosts_name(in->host, in->port);
	for (i = 0; i < sc.hosts[0].nknown_hosts; i++)
		knownhosts_read(sc.hosts[0].known_hosts[i], name, kh);
	sshconfig_free(&sc);
	free(name);
}

/*
 * The type of the first key the user's known_hosts files list for the
 * instance (not revoked, not a CA), for the host key algorithm to ask for
 * first, as ssh does; or NULL. Caller frees.
 */
char *
hostkey_listed_type(const struct instance *in)
{
	struct knownhosts kh = { NULL, 0 };
	char *type = NULL;
	size_t i;

	known_hosts_read(in, &kh);
	for (i = 0; i < kh.nkeys && type == NULL; i++) {
		if (kh.keys[i].marker == KNOWNHOSTS_PLAIN)
			type = xstrdup(kh.keys[i].type);
	}
	knownhosts_free(&kh);
	return type;
}

/*
 * What the user's known_hosts files say of the key a host presented.
 * KH_OTHER and KH_REVOKED fill *note with the listed key
 * ("TYPE SHA256:... (FILE:LINE)"); caller frees.
 */
static int
known_hosts_check(const struct instance *in, const char *type,
    const char *base64, char **note)
{
	struct knownhosts kh = { NULL, 0 };
	const struct knownhosts_key *k, *other = NULL;
	char *fp;
	size_t i;
	int r = KH_NONE;

	*note = NULL;
	known_hosts_read(in, &kh);
	for (i = 0; i < kh.nkeys; i++) {
		k = &kh.keys[i];
		if (k->marker == KNOWNHOSTS_CA)
			continue; /* host certificates are not used */
		if (strcmp(k->type, type) != 0 ||
		    strcmp(k->base64, base64) != 0) {
			if (k->marker == KNOWNHOSTS_PLAIN && other == NULL)
				other = k;
			continue;
		}
		if (k->marker == KNOWNHOSTS_REVOKED) {
			xasprintf(note, "%s:%d", k->file, k->line);
			r = KH_REVOKED;
			break;
		}
		r = KH_MATCH;
	}
	if (r == KH_NONE && other != NULL) {
		fp = listed_fingerprint(other->type, other->base64);
		xasprintf(note, "%s %s (%s:%d)", other->type, fp, other->file,
		    other->line);
		free(fp);
		r = KH_OTHER;
	}
	knownhosts_free(&kh);
	return r;
}

/*
 * The SHA256 fingerprint of a key given as type and base64, or a word
 * saying it does not parse. Caller frees.
 */
static char *
listed_fingerprint(const char *type, const char *base64)
{
	unsigned char *hash = NULL;
	ssh_key key = NULL;
	size_t len = 0;
	char *fp, *out;

	if (ssh_pki_import_pubkey_base64(
		base64, ssh_key_type_from_name(type), &key) != SSH_OK ||
	    ssh_get_publickey_hash(
		key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) != 0) {
		ssh_key_free(key);
		return xstrdup("(a key that does not parse)");
	}
	fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
	out = xstrdup(fp != NULL ? fp : "(no fingerprint)");
	ssh_string_free_char(fp);
	ssh_clean_pubkey_hash(&hash);
	ssh_key_free(key);
	return out;
}

/*
 * Queue the hostkey_changed notification of instance in presenting fp
 * where k is pinned: once per presented key. A failure is logged (the
 * refusal to connect is what matters).
 */
static void
notify_changed(struct inventory *inv, const struct instance *in,
    const struct hostkey *k, const char *fp)
{
	char *what, *key, *next, *cause = NULL;

	xasprintf(&what,
	    "host key changed to %s (pinned: %s); gpufleet refuses to connect",
	    fp, k->fingerprint);
	xasprintf(&key, "hostkey:%lld:%s", (long long)in->id, fp);
	xasprintf(&next, "gpufleet hostkey show %s", in->name);
	if (notifyqueue_add(inv, NOTIFY_HOSTKEY_CHANGED, in->name,
		(int64_t)time(NULL), what, next, key, &cause) != 0) {
		error("%s", cause);
		free(cause);
	}
	free(what);
	free(key);
	free(next);
}

/*
 * Apply the policy to the key a host presented. Returns 0 to trust it
 * (pinning it when new), or -1 with *fail and *msg set.
 */
int
hostkey_verify(struct inventory *inv, enum hostkey_policy policy,
    const struct instance *in, const char *type, const char *base64,
    const char *fp, enum engine_fail *fail, char **msg)
{
	struct hostkey k;
	char *cause = NULL;
	const char *source = NULL;
	char *note;
	int r, same, kh;

	r = hostkey_get(inv, in->id, &k, &cause);
	if (r == 1) {
		kh = known_hosts_check(in, type, base64, &note);
		if (kh == KH_REVOKED) {
			*fail = EF_HOSTKEY_CHANGED;
			xasprintf(msg,
			    "host key %s %s of %s (%s port %d) is marked "
			    "@revoked in %s; refusing to connect, nothing "
			    "pinned",
			    type, fp, in->name, in->host, in->port, note);
			free(note);
			return -1;
		}
		if (kh == KH_OTHER) {
			*fail = EF_HOSTKEY_CHANGED;
			xasprintf(msg,
			    "HOST KEY CHANGED for %s (%s port %d): your "
			    "known_hosts lists %s, presented %s %s; refusing "
			    "to connect, nothing pinned. If the machine was "
			    "really replaced, run: gpufleet hostkey accept %s",
			    in->name, in->host, in->port, note, type, fp,
			    in->name);
			free(note);
			return -1;
		}
		if (kh == KH_MATCH)
			source = "known_hosts";
		else if (policy == HOSTKEY_ACCEPT_NEW)
			source = "first-use";
		else {
			*fail = EF_HOSTKEY_UNKNOWN;
			xasprintf(msg,
			    "unknown host key %s %s for %s and the policy is "
			    "strict; to trust it run: gpufleet hostkey accept "
			    "%s",
			    type, fp, in->name, in->name);
			return -1;
		}
		/* The known_hosts file is rewritten once after the run. */
		r = pin_first(
		    inv, in->id, type, base64, fp, source, &k, &cause);
		if (r == 1) {
			debug_f("%s: pinned %s %s (%s)", in->name, type, fp,
			    source);
			return 0;
		}
	}
	if (r < 0) {
		*fail = EF_SSH;
		*msg = cause;
		return -1;
	}
	same = strcmp(k.type, type) == 0 && strcmp(k.base64, base64) == 0;
	if (!same) {
		notify_changed(inv, in, &k, fp);
		*fail = EF_HOSTKEY_CHANGED;
		xasprintf(msg,
		    "HOST KEY CHANGED for %s (%s port %d): "
		    "pinned %s %s, presented %s %s; refusing to "
		    "connect. If the machine was really replaced, run: "
		    "gpufleet hostkey accept %s",
		    in->name, in->host, in->port, k.type, k.fingerprint, type,
		    fp, in->name);
	}
	hostkey_clear(&k);
	return same ? 0 : -1;
}

#define KNOWN_HOSTS_HEADER "# written by gpufleet from its pinned host keys"

/*
 * May gpufleet replace the file at path? Only when there is none, or it is
 * a regular file that gpufleet wrote (its first line is gpufleet's header).
 */
static int
known_hosts_ours(const char *path, char **cause)
{
	char line[128];
	struct stat st;
	int fd, ours;
	ssize_t n;

	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		xasprintf(cause, "cannot write %s: %s", path, strerror(errno));
		return -GF_EUSAGE;
	}
	ours = 0;
	if (S_ISREG(st.st_mode) &&
	    (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) != -1) {
		n = read(fd, line, sizeof line - 1);
		close(fd);
		line[n > 0 ? n : 0] = '\0';
		ours = strncmp(line, KNOWN_HOSTS_HEADER,
			   strlen(KNOWN_HOSTS_HEADER)) == 0;
	}
	if (!ours) {
		xasprintf(cause,
		    "not replacing %s: gpufleet did not write it (move it "
		    "away to let gpufleet keep its pinned keys there)",
		    path);
		return -GF_EUSAGE;
	}
	return 0;
}

/*
 * Write every pinned key as "NAME TYPE BASE64" lines, for OpenSSH with
 * HostKeyAlias=NAME. Written to a new temporary file (never through a
 * link) and renamed over path, mode 0600, only if path is gpufleet's own.
 */
int
hostkey_write_known_hosts(struct inventory *inv, const char *path, char **cause)
{
	sqlite3_stmt *st;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if ((rc = known_hosts_ours(path, cause)) != 0)
		return rc;
	if ((f = open_memstream(&text, &len)) == NULL)
		fatal("open_memstream: %s", strerror(errno));
	fprintf(f, KNOWN_HOSTS_HEADER "; use with HostKeyAlias=NAME\n");
	rc = db_prepare(inv, &st,
	    "SELECT i.name, k.key_type, k.key_base64 FROM host_key k JOIN "
	    "instance i ON i.id = k.instance_id WHERE i.released_at IS NULL "
	    "ORDER BY i.name",
	    "listing host keys", cause, "");
	if (rc == 0) {
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			fprintf(f, "%s %s %s\n", sqlite3_column_text(st, 0),
			    sqlite3_column_text(st, 1),
			    sqlite3_column_text(st, 2));
		rc = db_finish(inv, st, rc, "listing host keys", cause);
	}
	if (fclose(f) != 0)
		fatal("open_memstream: %s", strerror(errno));
	if (rc != 0) {
		free(text);
		return -GF_EDB;
	}
	rc = misc_write_atomic(path, text, len, cause) != 0 ? -GF_EUSAGE : 0;
	free(text);
	return rc;
}

/*
 * The known_hosts file kept beside the database, under a name of its own
 * (a database in ~/.ssh must not take the user's known_hosts). Caller
 * frees.
 */
char *
hostkey_known_hosts_path(struct inventory *inv)
{
	const char *slash = strrchr(inv->path, '/');
	char *path;

	if (slash == NULL)
		return xstrdup("gpufleet_known_hosts");
	xasprintf(&path, "%.*s/gpufleet_known_hosts", (int)(slash - inv->path),
	    inv->path);
	return path;
}

/* Rewrite the known_hosts file beside the database from the pins. */
int
hostkey_sync(struct inventory *inv, char **cause)
{
	char *path = hostkey_known_hosts_path(inv);
	int r;

	r = hostkey_write_known_hosts(inv, path, cause);
	free(path);
	return r;
}
