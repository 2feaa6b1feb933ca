/*
 * gpufleet-agent authkeys: the controller's edits of authorized_keys (add
 * a key, remove one by its blob), read with the one parser of
 * gpufleet/authkeys.h so that the controller and the instance agree on
 * which line holds which key.
 *
 * Every line that is not the key to remove stays byte for byte, in order
 * (blank lines, comments, options, CRLF, a missing final newline: a newline
 * is added before an appended key only where it is missing). Nothing is
 * written when nothing would change. The new file is written beside the old
 * one with its mode and owner, checked by parsing it again, synced and
 * renamed over it, and the directory synced; a symlink, a non-regular or a
 * read-only file is refused, never replaced. Prints "changed" or
 * "unchanged".
 */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/authkeys.h"
#include "../controller/xmalloc.h"

/* Largest authorized_keys file the agent edits. */
#define AKEDIT_MAX (16 * 1024 * 1024)

static int line_key(const char *, unsigned char **, size_t *);
static unsigned char *blob_key(const char *, size_t *);
static int same_key(
    const unsigned char *, size_t, const unsigned char *, size_t);
static int make_dir(const char *);
static int write_all(int, const char *, size_t);
static int read_current(const char *, struct stat *, int *, struct buf *);
static int replace_file(const char *, const char *, const struct stat *, int,
    const struct buf *, const struct akedit *);

/*
 * The canonical form (authkeys_canon) of the key on a line ("TYPE BLOB
 * ..."), into *c (caller frees) and *cl: 0, or -1 if it holds none.
 */
static int
line_key(const char *line, unsigned char **c, size_t *cl)
{
	struct authkeys_line l;

	if (authkeys_parse_canon(line, strlen(line), &l, c, cl) != AUTHKEYS_KEY)
		return -1;
	return 0;
}

/* The canonical form of a blob, or NULL (and 0) if none or no key. */
static unsigned char *
blob_key(const char *blob, size_t *cl)
{
	unsigned char *c;

	*cl = 0;
	if (blob == NULL || authkeys_canon(blob, strlen(blob), &c, cl) != 0)
		return NULL;
	return c;
}

/* Is the canonical form c (cl bytes) the key k (NULL: none)? */
static int
same_key(const unsigned char *c, size_t cl, const unsigned char *k, size_t kl)
{
	return k != NULL && cl == kl && memcmp(c, k, cl) == 0;
}

/*
 * The edited text of old into out (emptied first): lines holding e->del
 * dropped, and e->add appended where no line holds its key, with the
 * options of the first line holding e->like. Keys are matched by their
 * canonical form, so every spelling of e->del goes. Returns 1 if the text
 * changed, else 0; -1 if e->add holds no key.
 */
int
akedit_apply(
    const char *old, size_t len, const struct akedit *e, struct buf *out)
{
	struct authkeys_line l;
	unsigned char *add = NULL, *del, *like, *c;
	const char *opts = NULL, *line;
	size_t off, next, ll, optslen = 0, addl = 0, dell, likel, cl;
	int have = 0, changed = 0, r;

	out->len = 0;
	buf_add(out, "", 0);
	if (e->add != NULL && line_key(e->add, &add, &addl) != 0)
		return -1;
	del = blob_key(e->del, &dell);
	like = blob_key(e->like, &likel);
	for (off = 0; off < len; off = next) {
		line = old + off;
		next = authkeys_next_line(old, len, off, &ll);
		r = authkeys_parse_canon(line, ll, &l, &c, &cl);
		if (r != AUTHKEYS_KEY) {
			buf_add(out, line, next - off);
			continue;
		}
		if (same_key(c, cl, del, dell))
			changed = 1;
		else {
			if (same_key(c, cl, add, addl))
				have = 1;
			buf_add(out, line, next - off);
		}
		if (opts == NULL && same_key(c, cl, like, likel)) {
			opts = line + l.options.off;
			optslen = l.options.len;
		}
		free(c);
	}
	if (add != NULL && !have) {
		if (out->len > 0 && out->data[out->len - 1] != '\n')
			buf_add(out, "\n", 1);
		if (optslen > 0) {
			buf_add(out, opts, optslen);
			buf_add(out, " ", 1);
		}
		buf_addstr(out, e->add);
		buf_add(out, "\n", 1);
		changed = 1;
	}
	free(add);
	free(del);
	free(like);
	return changed;
}

/*
 * Does text hold no line with e->del's key (in any spelling) and a line
 * with e->add's key?
 */
int
akedit_done(const char *text, size_t len, const struct akedit *e)
{
	struct authkeys_line l;
	unsigned char *add = NULL, *del, *c;
	size_t off, next, ll, addl = 0, dell, cl;
	int have = e->add == NULL, gone = 1;

	if (e->add != NULL && line_key(e->add, &add, &addl) != 0)
		return 0;
	del = blob_key(e->del, &dell);
	for (off = 0; off < len && gone; off = next) {
		next = authkeys_next_line(text, len, off, &ll);
		if (authkeys_parse_canon(text + off, ll, &l, &c, &cl) !=
		    AUTHKEYS_KEY)
			continue;
		if (same_key(c, cl, del, dell))
			gone = 0;
		if (same_key(c, cl, add, addl))
			have = 1;
		free(c);
	}
	free(add);
	free(del);
	return gone && have;
}

/* mkdir -p, each new directory 0700: 0 or -1. */
static int
make_dir(const char *dir)
{
	char *d = xstrdup(dir), *p;
	int r = 0;

	for (p = d + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(d, 0700) == 0)
			r = chmod(d, 0700);
		else if (errno != EEXIST)
			r = -1;
		*p = c;
		if (r != 0 || c == '\0')
			break;
	}
	free(d);
	return r;
}

static int
write_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Read the current file (lstat in *sb, *exists) into old, refusing a
 * symbolic link, a non-regular file or one over AKEDIT_MAX. Returns 0 or
 * the exit status, with the reason on stderr.
 */
static int
read_current(const char *path, struct stat *sb, int *exists, struct buf *old)
{
	if (lstat(path, sb) == 0)
		*exists = 1;
	else if (errno == ENOENT) {
		*exists = 0;
		return 0;
	} else {
		fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
		return AKEDIT_EXIT_READ;
	}
	if (S_ISLNK(sb->st_mode)) {
		fprintf(stderr,
		    "%s is a symbolic link; refusing to replace it (make it a "
		    "plain file)\n",
		    path);
		return AKEDIT_EXIT_FILE;
	}
	if (!S_ISREG(sb->st_mode)) {
		fprintf(stderr, "%s is not a regular file\n", path);
		return AKEDIT_EXIT_FILE;
	}
	if (buf_read_file(old, path, AKEDIT_MAX + 1) != 0) {
		fprintf(
		    stderr, "%s is not readable: %s\n", path, strerror(errno));
		return AKEDIT_EXIT_READ;
	}
	if (old->len > AKEDIT_MAX) {
		fprintf(
		    stderr, "%s is larger than %d bytes\n", path, AKEDIT_MAX);
		return AKEDIT_EXIT_READ;
	}
	return 0;
}

/*
 * Write out to a temporary file in dir (the old file's owner and mode
 * where it exists), sync it, read it back and check it, then rename it
 * over path and sync dir. Returns 0 or the exit status.
 */
static int
replace_file(const char *path, const char *dir, const struct stat *sb,
    int exists, const struct buf *out, const struct akedit *e)
{
	struct buf check;
	char *tmp;
	int fd, r, status = AKEDIT_EXIT_WRITE;

	memset(&check, 0, sizeof check);
	xasprintf(
	    &tmp, "%s/.gpufleet-authorized_keys.%ld", dir, (long)getpid());
	unlink(tmp);
	fd = open(
	    tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1) {
		fprintf(
		    stderr, "cannot write in %s: %s\n", dir, strerror(errno));
		free(tmp);
		return AKEDIT_EXIT_WRITE;
	}
	/* As cp -p: the owner where allowed, and the mode. */
	if ((exists && fchown(fd, sb->st_uid, sb->st_gid) != 0 &&
		errno != EPERM) ||
	    (exists && fchmod(fd, sb->st_mode & 07777) != 0) ||
	    write_all(fd, out->data, out->len) != 0 || fsync(fd) != 0) {
		fprintf(stderr, "cannot write %s: %s\n", tmp, strerror(errno));
		close(fd);
		goto out;
	}
	r = close(fd);
	if (r != 0) {
		fprintf(stderr, "cannot write %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	if (buf_read_file(&check, tmp, AKEDIT_MAX + 1) != 0 ||
	    check.len != out->len ||
	    memcmp(check.data, out->data, out->len) != 0 ||
	    !akedit_done(check.data, check.len, e)) {
		fprintf(stderr,
		    "the new %s did not come out as written; not changed\n",
		    path);
		goto out;
	}
	if (rename(tmp, path) != 0) {
		fprintf(stderr, "cannot rename into %s: %s\n", path,
		    strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		fsync(fd);
		close(fd);
	}
	status = 0;
out:
	if (tmp != NULL) {
		unlink(tmp);
		free(tmp);
	}
	buf_free(&check);
	return status;
}

/*
 * Apply e to the file at path (see the top of this file). Returns the
 * exit status: 0 (after printing changed/unchanged), or AKEDIT_EXIT_* with
 * a one-line reason on stderr.
 */
int
akedit_file(const char *path, const struct akedit *e)
{
	struct buf old, out;
	struct stat sb;
	char *dir, *slash;
	int exists, status;

	memset(&old, 0, sizeof old);
	memset(&out, 0, sizeof out);
	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) == NULL) {
		free(dir);
		dir = xstrdup(".");
	} else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if ((status = read_current(path, &sb, &exists, &old)) != 0)
		goto out;
	if (akedit_apply(old.data != NULL ? old.data : "", old.len, e, &out) <=
	    0) {
		printf("unchanged\n");
		goto out;
	}
	if (exists && access(path, W_OK) != 0) {
		fprintf(stderr, "%s is read-only; not changed\n", path);
		status = AKEDIT_EXIT_READ;
		goto out;
	}
	if (!exists && make_dir(dir) != 0) {
		fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
		status = AKEDIT_EXIT_MKDIR;
		goto out;
	}
	if ((status = replace_file(path, dir, &sb, exists, &out, e)) == 0)
		printf("changed\n");
out:
	free(dir);
	buf_free(&old);
	buf_free(&out);
	return status;
}
