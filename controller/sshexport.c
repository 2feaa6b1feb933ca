/* The fleet as an ssh_config, and the copy kept in ~/.ssh/gpufleet.conf. */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "hostkey.h"
#include "keys.h"
#include "log.h"
#include "misc.h"
#include "remote.h"
#include "sshconfig.h"
#include "sshexport.h"
#include "status.h"
#include "xmalloc.h"

/*
 * The installed file starts with these two lines; the second names the
 * inventory (realpath) it was written from. Only such a file is rewritten
 * or removed, and only by a gpufleet using that inventory.
 */
#define HEADER	  SSHCONFIG_EXPORT_HEADER
#define HEADER_DB "# inventory: "
#define CONF_MAX  (16 * 1024 * 1024)

static char *absolute(const char *);
static char *cfg_word(const char *);
static void comment_text(FILE *, const char *);
static int conf_state(const char *, const char *, char **, char **);
static int write_atomic(const char *, const char *, char **);
static int render_all(struct fleet *, const char *, char **, size_t *, char **);
static char *db_name(struct fleet *, char **);

/* path made absolute (~/ expanded, a relative path against the cwd). */
static char *
absolute(const char *path)
{
	char *p = misc_expand_home(path), *s, cwd[PATH_MAX];

	if (*p == '/' || getcwd(cwd, sizeof cwd) == NULL)
		return p;
	xasprintf(&s, "%s/%s", cwd, p);
	free(p);
	return s;
}

/*
 * A path as one ssh_config argument: double-quoted, each % doubled (the
 * file options expand %-tokens). NULL for what ssh_config cannot hold
 * unchanged: control characters, '"', '\' (read differently by OpenSSH
 * versions), or "${" (expanded from the environment). Caller frees.
 */
char *
sshexport_cfg_path(const char *path)
{
	const char *p;
	char *s, *q;

	for (p = path; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '"' ||
		    *p == '\\' || (p[0] == '$' && p[1] == '{'))
			return NULL;
	}
	q = s = xmalloc(2 * strlen(path) + 3);
	*q++ = '"';
	for (p = path; *p != '\0'; p++) {
		if (*p == '%')
			*q++ = '%';
		*q++ = *p;
	}
	*q++ = '"';
	*q = '\0';
	return s;
}

/*
 * A validated inventory word (host, user) as an ssh_config argument: %
 * doubled (HostName expands %h), the rest as it is. Caller frees.
 */
static char *
cfg_word(const char *word)
{
	const char *p;
	char *s, *q;

	q = s = xmalloc(2 * strlen(word) + 1);
	for (p = word; *p != '\0'; p++) {
		if (*p == '%')
			*q++ = '%';
		*q++ = *p;
	}
	*q = '\0';
	return s;
}

/* Text for a comment line: anything but printable ASCII as '?'. */
static void
comment_text(FILE *f, const char *s)
{
	for (; *s != '\0'; s++)
		fputc(*s >= 0x20 && *s < 0x7f ? *s : '?', f);
}

/*
 * The ssh_config of the instances in list (released ones skipped), which
 * it updates in place (the ssh_config they follow, their current key). db
 * is NULL for the text printed on stdout, else the inventory named in the
 * installed file's header. Returns 0 with *text set (caller frees), or a
 * negative status with *cause.
 */
int
sshexport_render(struct inventory *inv, const struct config *config,
    struct instance *sel, size_t nsel, const char *db, char **text,
    char **cause)
{
	struct hostkey k;
	struct instance *list;
	char **proxy, *kh, *qkh = NULL, *qid, *id, *tags, *host, *user;
	size_t i, j, n, len;
	int r = 0, pinned;
	FILE *f;

	*text = NULL;
	/*
	 * A ProxyJump names the jump's Host block (its pinned key): a jump
	 * host not selected is written too, after the selection.
	 */
	list = xcalloc(2 * nsel + 1, sizeof *list);
	memcpy(list, sel, nsel * sizeof *list);
	for (n = nsel, i = 0; i < nsel; i++) {
		if (sel[i].jump == NULL || sel[i].released_at != 0)
			continue;
		for (j = 0; j < n; j++) {
			if (list[j].released_at == 0 &&
			    strcmp(list[j].name, sel[i].jump) == 0)
				break;
		}
		if (j < n)
			continue;
		memset(
		    &list[n], 0, sizeof list[n]); /* inventory_get fills it */
		if (inventory_get(inv, sel[i].jump, &list[n], cause) != 0) {
			/* Taken out of service: ssh cannot reach it. */
			instance_clear(&list[n]);
			free(*cause);
			*cause = NULL;
			continue;
		}
		n++;
	}
	id = hostkey_known_hosts_path(inv);
	kh = absolute(id);
	free(id);
	if ((qkh = sshexport_cfg_path(kh)) == NULL) {
		xasprintf(cause,
		    "cannot name %s in an ssh_config (a quote, backslash, "
		    "control character or ${ in the path)",
		    kh);
		free(kh);
		return -GF_EUSAGE;
	}
	proxy = xcalloc(n + 1, sizeof *proxy);
	remote_follow_ssh_config(list, n, proxy);
	if ((f = open_memstream(text, &len)) == NULL)
		fatal("open_memstream: %s", strerror(errno));
	if (db != NULL)
		fprintf(f,
		    HEADER HEADER_DB
		    "%s\n"
		    "# gpufleet rewrites this file when addresses or keys "
		    "change;\n"
		    "# `gpufleet ssh-config --uninstall` removes it. Use it "
		    "from ~/.ssh/config\n"
		    "# with this line at the top: " SSHEXPORT_INCLUDE "\n",
		    db);
	else
		fprintf(f,
		    "# gpufleet inventory: Include this file from "
		    "~/.ssh/config\n");
	fprintf(f, "# Host keys: gpufleet's pins in %s\n", kh);
	for (i = 0; i < n && r == 0; i++) {
		struct instance *in = &list[i];
		if (in->released_at != 0)
			continue;
		if ((r = keys_apply_current(inv, in, cause)) < 0)
			break;
		r = 0;
		id = in->identity != NULL ? in->identity : config->identity;
		qid = NULL;
		if (id != NULL) {
			id = absolute(id);
			if ((qid = sshexport_cfg_path(id)) == NULL) {
				xasprintf(cause,
				    "%s: cannot name its key %s in an "
				    "ssh_config (a quote, backslash, control "
				    "character or ${ in the path)",
				    in->name, id);
				free(id);
				r = -GF_EUSAGE;
				break;
			}
			free(id);
		}
		if ((r = hostkey_get(inv, in->id, &k, cause)) < 0) {
			free(qid);
			break;
		}
		pinned = r == 0;
		r = 0;
		hostkey_clear(&k);

		fprintf(f, "\nHost %s\n", in->name);
		tags = tags_join(in, ",");
		if (*in->provider != '\0' || *tags != '\0') {
			fprintf(f, "    # provider=");
			comment_text(f, in->provider);
			fprintf(f, " tags=");
			comment_text(f, tags);
			fputc('\n', f);
		}
		free(tags);
		if (!pinned)
			fprintf(f,
			    "    # no host key pinned yet: ssh refuses this "
			    "host until `gpufleet status %s`\n"
			    "    # (or `gpufleet hostkey accept %s`) pins "
			    "one\n",
			    in->name, in->name);
		host = cfg_word(in->host);
		user = cfg_word(in->user);
		fprintf(f, "    HostName %s\n    Port %d\n    User %s\n", host,
		    in->port, user);
		free(host);
		free(user);
		/*
		 * Behind a jump host: the jump's own Host block in this file
		 * (ssh passes -F on to the hop), so its pinned key is
		 * checked too.
		 */
		for (j = 0; in->jump != NULL && j < n; j++) {
			if (list[j].released_at == 0 &&
			    strcmp(list[j].name, in->jump) == 0)
				break;
		}
		if (in->jump != NULL && j < n)
			fprintf(f, "    ProxyJump %s\n", in->jump);
		else if (in->jump != NULL)
			fprintf(f,
			    "    # its jump host %s is not in service: no "
			    "ProxyJump (ssh tries it directly)\n",
			    in->jump);
		if (proxy[i] != NULL) {
			fprintf(f, "    # not exported: ");
			comment_text(f, proxy[i]);
			fputc('\n', f);
		}
		if (qid != NULL)
			fprintf(f,
			    "    IdentityFile %s\n    IdentitiesOnly yes\n",
			    qid);
		free(qid);
		fprintf(f,
		    "    HostKeyAlias %s\n"
		    "    UserKnownHostsFile %s\n"
		    "    GlobalKnownHostsFile /dev/null\n"
		    "    StrictHostKeyChecking yes\n"
		    "    UpdateHostKeys no\n",
		    in->name, qkh);
	}
	if (fclose(f) != 0)
		fatal("open_memstream: %s", strerror(errno));
	for (i = 0; i < n; i++)
		free(proxy[i]);
	free(proxy);
	/* The selection's entries were updated in place; the jumps added go. */
	memcpy(sel, list, nsel * sizeof *list);
	for (i = nsel; i < n; i++)
		instance_clear(&list[i]);
	free(list);
	free(qkh);
	free(kh);
	if (r != 0) {
		free(*text);
		*text = NULL;
	}
	return r;
}

/* ~/.ssh/gpufleet.conf, or NULL (with *cause if cause) without HOME. */
char *
sshexport_path(char **cause)
{
	const char *home = getenv("HOME");
	char *path;

	if (home == NULL || *home != '/') {
		if (cause != NULL)
			xasprintf(cause, "HOME is not set to an absolute path");
		return NULL;
	}
	xasprintf(&path, "%s/.ssh/gpufleet.conf", home);
	return path;
}

/*
 * Whose is the file at path? 0: there is none; 1: gpufleet's, written
 * from the inventory db (its content in *content, caller frees); -1: not
 * to be touched, with *cause (if cause) saying why.
 */
static int
conf_state(const char *path, const char *db, char **content, char **cause)
{
	struct stat st;
	char *buf = NULL, *line2, *mine = NULL;
	size_t len = 0;
	ssize_t got;
	int fd, r = -1;

	*content = NULL;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		if (cause != NULL)
			xasprintf(cause, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > CONF_MAX ||
	    (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		goto foreign;
	buf = xmalloc((size_t)st.st_size + 1);
	while (len < (size_t)st.st_size &&
	    (got = read(fd, buf + len, (size_t)st.st_size - len)) > 0)
		len += (size_t)got;
	close(fd);
	buf[len] = '\0';
	if (strncmp(buf, HEADER, strlen(HEADER)) != 0)
		goto foreign;
	line2 = buf + strlen(HEADER);
	xasprintf(&mine, HEADER_DB "%s\n", db);
	if (strncmp(line2, mine, strlen(mine)) != 0) {
		if (cause != NULL &&
		    strncmp(line2, HEADER_DB, strlen(HEADER_DB)) == 0) {
			line2 += strlen(HEADER_DB);
			line2[strcspn(line2, "\n")] = '\0';
			xasprintf(cause,
			    "%s was written from the inventory %s, not %s "
			    "(use --db with that one to change it)",
			    path, line2, db);
		} else if (cause != NULL)
			xasprintf(cause, "%s has a header gpufleet cannot read",
			    path);
		goto out;
	}
	*content = buf;
	buf = NULL;
	r = 1;
	goto out;
foreign:
	if (cause != NULL)
		xasprintf(cause,
		    "not replacing %s: gpufleet did not write it (move it "
		    "away to let gpufleet keep the fleet's Host blocks there)",
		    path);
out:
	free(mine);
	free(buf);
	return r;
}

/*
 * Write text to path through a new temporary file (0600, never through a
 * link) renamed over it; the directory is created 0700 if missing.
 */
static int
write_atomic(const char *path, const char *text, char **cause)
{
	char *dir, *slash;

	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (misc_mkdirs(dir, cause) != 0) {
			free(dir);
			return -GF_EUSAGE;
		}
	}
	free(dir);
	if (misc_write_atomic(path, text, strlen(text), cause) != 0)
		return -GF_EUSAGE;
	return 0;
}

/* The installed file's text for every instance in service. */
static int
render_all(struct fleet *fleet, const char *db, char **text, size_t *nhosts,
    char **cause)
{
	struct inventory *inv;
	struct instance *list = NULL;
	size_t n = 0, i;
	int r;

	if ((r = fleet_inventory(fleet, &inv, cause)) != 0 ||
	    (r = inventory_list(inv, 0, &list, &n, cause)) != 0)
		return r;
	r = sshexport_render(inv, fleet->config, list, n, db, text, cause);
	if (nhosts != NULL) {
		for (*nhosts = i = 0; i < n; i++)
			*nhosts += list[i].released_at == 0;
	}
	instance_free_array(list, n);
	return r;
}

/* The inventory's path as the header names it, or NULL with *cause. */
static char *
db_name(struct fleet *fleet, char **cause)
{
	char *db, *p;

	if ((db = realpath(fleet->db_path, NULL)) == NULL) {
		if (cause != NULL)
			xasprintf(
			    cause, "%s: %s", fleet->db_path, strerror(errno));
		return NULL;
	}
	for (p = db; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			if (cause != NULL)
				xasprintf(cause,
				    "the inventory's path has a control "
				    "character");
			free(db);
			return NULL;
		}
	}
	return db;
}

/*
 * Write ~/.ssh/gpufleet.conf (*path, caller frees) from the fleet's
 * inventory; *changed is 0 when it was up to date, *nhosts the number of
 * Host blocks. The known_hosts file it names is rewritten too.
 */
int
sshexport_install(struct fleet *fleet, char **path, int *changed,
    size_t *nhosts, char **cause)
{
	struct inventory *inv;
	char *db = NULL, *old = NULL, *text = NULL;
	int r;

	*changed = 0;
	if ((*path = sshexport_path(cause)) == NULL)
		return -GF_EUSAGE;
	if ((r = fleet_inventory(fleet, &inv, cause)) != 0)
		return r;
	if ((db = db_name(fleet, cause)) == NULL)
		return -GF_EUSAGE;
	if (conf_state(*path, db, &old, cause) < 0) {
		r = -GF_EUSAGE;
		goto out;
	}
	if ((r = render_all(fleet, db, &text, nhosts, cause)) != 0)
		goto out;
	if ((r = hostkey_sync(inv, cause)) != 0)
		goto out;
	if (old == NULL || strcmp(old, text) != 0) {
		if ((r = write_atomic(*path, text, cause)) != 0)
			goto out;
		*changed = 1;
	}
out:
	free(db);
	free(old);
	free(text);
	return r;
}

/* Remove ~/.ssh/gpufleet.conf if gpufleet wrote it from this inventory. */
int
sshexport_uninstall(
    struct fleet *fleet, char **path, int *removed, char **cause)
{
	char *db, *old = NULL;
	int r;

	*removed = 0;
	if ((*path = sshexport_path(cause)) == NULL)
		return -GF_EUSAGE;
	if ((db = db_name(fleet, cause)) == NULL)
		return -GF_EUSAGE;
	r = conf_state(*path, db, &old, cause);
	free(db);
	free(old);
	if (r < 0)
		return -GF_EUSAGE;
	if (r == 0)
		return 0;
	if (unlink(*path) != 0) {
		xasprintf(
		    cause, "cannot remove %s: %s", *path, strerror(errno));
		return -GF_EUSAGE;
	}
	*removed = 1;
	return 0;
}

/*
 * After a command: if ~/.ssh/gpufleet.conf is installed from this
 * inventory, rewrite it (and the known_hosts file) when the fleet's Host
 * blocks changed. Costs one lstat when nothing is installed; a failure is
 * a warning, never the command's.
 */
void
sshexport_refresh(struct fleet *fleet)
{
	struct inventory *inv;
	char *path, *db = NULL, *old = NULL, *text = NULL, *cause = NULL;
	struct stat st;

	if ((path = sshexport_path(NULL)) == NULL)
		return;
	if (lstat(path, &st) != 0 || (db = db_name(fleet, NULL)) == NULL ||
	    conf_state(path, db, &old, NULL) != 1)
		goto out;
	if (render_all(fleet, db, &text, NULL, &cause) != 0 ||
	    strcmp(old, text) == 0)
		goto out;
	if (fleet_inventory(fleet, &inv, &cause) != 0 ||
	    hostkey_sync(inv, &cause) != 0 ||
	    write_atomic(path, text, &cause) != 0)
		goto out;
	debug_f("rewrote %s", path);
out:
	if (cause != NULL) {
		warn_msg("not updating %s: %s", path, cause);
		free(cause);
	}
	free(text);
	free(old);
	free(db);
	free(path);
}
