/*
 * The watcher's journal, D/journal.jsonl (agent/WATCH.md "The journal"):
 * one JSON object per line, appended with O_APPEND in one write(2) each and
 * fsynced. The file's epoch is in its first valid line; seq goes on from
 * the last valid line of that epoch. Readers skip lines that do not parse
 * (a crash mid-write) and lines of another epoch.
 *
 * Only the watcher appends (it holds D/watcher.pid's lock), so seq grows
 * along the file: a reader finds the entries after a cursor by bisecting
 * the file, and the writer its last seq from the file's tail. Replaying
 * the whole journal into the judge's state is what starting the watcher
 * and each report need; D/journal.state caches that state at an offset
 * (below, journal_replay) so that only what was appended since is read.
 *
 * Segments: past JOURNAL_SEGMENT_BYTES the watcher renames journal.jsonl
 * to journal-SEQ.jsonl (SEQ, 20 digits, the seq of its last entry) and
 * goes on in a new journal.jsonl; the journal is the segments in SEQ
 * order, then journal.jsonl. The rename is atomic and the new file is
 * made after it: a crash in between leaves every entry in a segment, and
 * journal_open learns the epoch and seq from the segments. Readers that
 * list the files hold D/journal.lock shared while they read; the watcher
 * rotates only when it gets it exclusive at once (else at a later entry).
 * A segment is removed once the controller has acknowledged all of it
 * (D/journal.ack, the cursor of its last report) and its last entry is
 * JOURNAL_KEEP_S old, if the state cached at the rotation covers it.
 */

#include <sys/file.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "gpufleet/version.h"
#include "../controller/xmalloc.h"

/* Lines longer than this are skipped by readers (none is written). */
#define JOURNAL_LINE_MAX JSONR_MAXSIZE
/* Bisecting stops at this many bytes; the rest is read line by line. */
#define JOURNAL_SEEK_SPAN (64 * 1024)
/* The tail read first for the last seq (then twice as much, ...). */
#define JOURNAL_TAIL_SPAN (64 * 1024)
/* A replay that read this much past the cached state caches it again. */
#define JOURNAL_STATE_EVERY (256 * 1024)
/* The most fire ids a cached state may hold. */
#define JOURNAL_STATE_FIRES 100000

/*
 * D/journal.state: this header, then nfires struct judge_fire as this
 * build lays them out. It is a cache: one that does not match this build
 * (version, sizes), the journal (epoch, the entry that ends at offset has
 * seq) or its own length is ignored and the journal replayed from the
 * start.
 */
struct journal_state_head {
	char magic[8]; /* "gfjstat1" */
	char version[32];
	uint32_t fire_size;
	uint32_t nfires;
	char epoch[JOURNAL_EPOCH_LEN + 1];
	long long seq;
	long long offset;
};

struct journal_last {
	char epoch[JOURNAL_EPOCH_LEN + 1];
	long long seq;
};

/* One file of the journal: a segment, or the active journal.jsonl. */
struct journal_file {
	char *path;
	long long last; /* a segment's last seq (its name); LLONG_MAX active */
};

/* The journal's files in order, and the shared lock held over them. */
struct journal_files {
	struct journal_file *f;
	size_t n;
	int lock; /* D/journal.lock, or -1 */
};

static long long journal_segment_seq(const char *);
static int journal_file_cmp(const void *, const void *);
static void journal_files_list(const char *, struct journal_files *, int);
static void journal_files_free(struct journal_files *);
static void journal_files_epoch(const struct journal_files *, char *);
static long long journal_knob(const char *, long long, long long);
static long long journal_ack_seq(const char *, const char *);
static void journal_ack(const char *, const char *, long long);
static void journal_prune(struct journal *, time_t);
static void journal_sync_dir(const char *);

/* journal_scan_all's wrapper of the caller's callback: was it stopped. */
struct journal_stop {
	journal_fn fn;
	void *arg;
	int stop;
};

static void journal_new_epoch(char *);
static int journal_stop_fn(const char *, size_t, const struct jsonr *, void *);
static int journal_last_fn(const char *, size_t, const struct jsonr *, void *);
static int journal_first_fn(const char *, size_t, const struct jsonr *, void *);
static int journal_after_fn(const char *, size_t, const struct jsonr *, void *);
static int journal_line(const char *, size_t, char *, journal_fn, void *);
/* Before a line is parsed: 0 skips it unparsed. */
typedef int (*journal_pre)(const char *, size_t, void *);

static int journal_scan_fd(
    int, off_t, char *, journal_fn, journal_pre, void *, off_t *);
static int journal_urgent(const char *, size_t);
static int journal_event_in(const char *, size_t, const char *const *);
static long long journal_seq_ending(int, off_t, const char *);
static int journal_replay_pre(const char *, size_t, void *);
static int journal_after_pre(const char *, size_t, void *);
static int journal_seq_fn(const char *, size_t, const struct jsonr *, void *);
static long long journal_seq_from(int, off_t, off_t, const char *, off_t *);
static off_t journal_seek(const char *, const char *, long long);
static long long journal_last_seq(const char *, const char *);
static int journal_replay_fn(
    const char *, size_t, const struct jsonr *, void *);
static int journal_state_load(const char *, const struct journal_files *,
    const char *, struct judge_state *, size_t *, off_t *);
static int journal_state_save(
    const char *, const char *, long long, off_t, const struct judge_state *);

/* The SEQ of a segment's file name journal-SEQ.jsonl, or -1. */
static long long
journal_segment_seq(const char *name)
{
	static const char pre[] = "journal-", suf[] = ".jsonl";
	long long seq = 0;
	size_t i;

	if (strlen(name) != sizeof pre - 1 + 20 + sizeof suf - 1 ||
	    memcmp(name, pre, sizeof pre - 1) != 0 ||
	    strcmp(name + sizeof pre - 1 + 20, suf) != 0)
		return -1;
	for (i = sizeof pre - 1; i < sizeof pre - 1 + 20; i++) {
		if (name[i] < '0' || name[i] > '9' ||
		    seq > (LLONG_MAX - 9) / 10)
			return -1;
		seq = seq * 10 + (name[i] - '0');
	}
	return seq;
}

static int
journal_file_cmp(const void *a, const void *b)
{
	const struct journal_file *x = a, *y = b;

	return x->last < y->last ? -1 : x->last > y->last;
}

/*
 * The files of dir's journal in order, the active one last (listed even
 * when it does not exist); with lock, D/journal.lock held shared until
 * journal_files_free, so that no rotation happens while they are read.
 */
static void
journal_files_list(const char *dir, struct journal_files *f, int lock)
{
	struct dirent *de;
	char *lp;
	long long seq;
	DIR *d;

	memset(f, 0, sizeof *f);
	f->lock = -1;
	if (lock) {
		xasprintf(&lp, "%s/journal.lock", dir);
		f->lock = open(lp, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
		while (f->lock != -1 && flock(f->lock, LOCK_SH) == -1 &&
		    errno == EINTR)
			;
		free(lp);
	}
	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if ((seq = journal_segment_seq(de->d_name)) < 0)
				continue;
			f->f = xreallocarray(f->f, f->n + 1, sizeof *f->f);
			xasprintf(&f->f[f->n].path, "%s/%s", dir, de->d_name);
			f->f[f->n++].last = seq;
		}
		closedir(d);
	}
	if (f->n > 1)
		qsort(f->f, f->n, sizeof *f->f, journal_file_cmp);
	f->f = xreallocarray(f->f, f->n + 1, sizeof *f->f);
	xasprintf(&f->f[f->n].path, "%s/journal.jsonl", dir);
	f->f[f->n++].last = LLONG_MAX;
}

/* Free the list and release its lock. */
static void
journal_files_free(struct journal_files *f)
{
	size_t i;

	for (i = 0; i < f->n; i++)
		free(f->f[i].path);
	free(f->f);
	if (f->lock != -1)
		close(f->lock);
	memset(f, 0, sizeof *f);
	f->lock = -1;
}

/* The journal's epoch: its first valid line's ("" when none). */
static void
journal_files_epoch(const struct journal_files *f, char *epoch)
{
	size_t i;

	*epoch = '\0';
	for (i = 0; i < f->n && *epoch == '\0'; i++)
		journal_scan_at(f->f[i].path, 0, epoch, journal_first_fn, NULL);
}

/*
 * journal_scan over every file of dir's journal, segments first: 0, or
 * -1 with errno when there is none (ENOENT).
 */
int
journal_scan_all(const char *dir, char *epoch, journal_fn fn, void *arg)
{
	struct journal_files f;
	size_t i;
	int fd, r = -1, stop = 0;

	*epoch = '\0';
	journal_files_list(dir, &f, 1);
	for (i = 0; i < f.n && !stop; i++) {
		struct journal_stop st = { fn, arg, 0 };

		if ((fd = open(f.f[i].path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		r = journal_scan_fd(
		    fd, 0, epoch, journal_stop_fn, NULL, &st, NULL);
		stop = st.stop;
		close(fd);
	}
	journal_files_free(&f);
	if (r != 0 && errno == 0)
		errno = ENOENT;
	return r;
}

/* A knob from the environment (a number from min on), else def. */
static long long
journal_knob(const char *name, long long def, long long min)
{
	const char *s = getenv(name);
	char *end;
	long long v;

	if (s == NULL || *s == '\0')
		return def;
	errno = 0;
	v = strtoll(s, &end, 10);
	return errno != 0 || *end != '\0' || v < min ? def : v;
}

/* The seq D/journal.ack acknowledges in the journal of epoch, or 0. */
static long long
journal_ack_seq(const char *dir, const char *epoch)
{
	char *path, text[64], *end;
	long long seq = 0;
	ssize_t n;
	int fd;

	xasprintf(&path, "%s/journal.ack", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
		n = read(fd, text, sizeof text - 1);
		close(fd);
		if (n > JOURNAL_EPOCH_LEN + 1) {
			text[n] = '\0';
			if (memcmp(text, epoch, JOURNAL_EPOCH_LEN) == 0 &&
			    text[JOURNAL_EPOCH_LEN] == ' ') {
				errno = 0;
				seq = strtoll(
				    text + JOURNAL_EPOCH_LEN + 1, &end, 10);
				if (errno != 0 || *end != '\n' || seq < 0)
					seq = 0;
			}
		}
	}
	free(path);
	return seq;
}

/*
 * Record in D/journal.ack that the controller has every entry of epoch
 * up to seq (the cursor of its report), when that is news: written aside
 * and renamed over.
 */
static void
journal_ack(const char *dir, const char *epoch, long long seq)
{
	char *path, *tmp, text[64];
	int fd, len, ok;

	if (seq <= 0 || seq <= journal_ack_seq(dir, epoch))
		return;
	len = snprintf(text, sizeof text, "%s %lld\n", epoch, seq);
	xasprintf(&path, "%s/journal.ack", dir);
	xasprintf(&tmp, "%s.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ok = fd != -1 && write(fd, text, (size_t)len) == len;
	if (fd != -1)
		close(fd);
	if (!ok || rename(tmp, path) != 0)
		unlink(tmp);
	free(tmp);
	free(path);
}

/* fsync a directory (a rename in it), as far as it can be. */
static void
journal_sync_dir(const char *dir)
{
	int fd;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		(void)fsync(fd);
		close(fd);
	}
}

/*
 * Past JOURNAL_SEGMENT_BYTES, make the active file a segment and begin a
 * new one, cache js (the state up to the last entry) at the segment's end
 * and remove the segments that may go. Called by the watcher after each
 * entry, holding the journal; a reader holding the lock puts it off.
 */
void
journal_rotate(struct journal *j, const struct judge_state *js, time_t now)
{
	struct stat st;
	char *lp, *seg = NULL, *spath;
	int fd, lock, sfd;

	if (j->fd == -1 || fstat(j->fd, &st) != 0 ||
	    st.st_size <
		journal_knob(JOURNAL_SEGMENT_ENV, JOURNAL_SEGMENT_BYTES, 1) ||
	    j->seq <= 0)
		return;
	xasprintf(&lp, "%s/journal.lock", j->dir);
	lock = open(lp, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
	free(lp);
	if (lock == -1)
		return;
	if (flock(lock, LOCK_EX | LOCK_NB) != 0)
		goto out;
	xasprintf(&seg, "%s/journal-%020lld.jsonl", j->dir, j->seq);
	if (rename(j->path, seg) != 0)
		goto out;
	fd = open(j->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd == -1) { /* go on in the old file */
		(void)rename(seg, j->path);
		goto out;
	}
	close(j->fd);
	j->fd = fd;
	journal_sync_dir(j->dir);
	/* What is pruned must stay in the state cached: the last entry
	   ends the segment (no torn write after it), and the cache holds. */
	xasprintf(&spath, "%s/journal.state", j->dir);
	if ((sfd = open(seg, O_RDONLY | O_CLOEXEC)) != -1 &&
	    journal_seq_ending(sfd, st.st_size, j->epoch) == j->seq &&
	    journal_state_save(spath, j->epoch, j->seq, st.st_size, js) == 0)
		journal_prune(j, now);
	if (sfd != -1)
		close(sfd);
	free(spath);
out:
	free(seg);
	close(lock);
}

/*
 * Remove the segments the controller has acknowledged whole whose last
 * entry is JOURNAL_KEEP_S old (by the file's time).
 */
static void
journal_prune(struct journal *j, time_t now)
{
	struct journal_files f;
	struct stat st;
	long long ack = journal_ack_seq(j->dir, j->epoch);
	long long keep = journal_knob(JOURNAL_KEEP_ENV, JOURNAL_KEEP_S, 0);
	size_t i;

	journal_files_list(j->dir, &f, 0);
	for (i = 0; i + 1 < f.n; i++) {
		if (f.f[i].last > ack || f.f[i].last > j->seq)
			break;
		if (stat(f.f[i].path, &st) == 0 &&
		    (long long)st.st_mtime + keep <= (long long)now)
			unlink(f.f[i].path);
	}
	journal_files_free(&f);
}

/* 16 random hex digits. */
static void
journal_new_epoch(char *epoch)
{
	unsigned char r[8];
	size_t i;
	int fd;

	memset(r, 0, sizeof r);
	if ((fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) != -1) {
		if (read(fd, r, sizeof r) != (ssize_t)sizeof r)
			memset(r, 0, sizeof r);
		close(fd);
	}
	for (i = 0; i < sizeof r; i++)
		r[i] ^= (unsigned char)(getpid() >> (i % 4 * 8)) ^
		    (unsigned char)(time(NULL) >> (i * 4));
	for (i = 0; i < sizeof r; i++)
		snprintf(epoch + 2 * i, 3, "%02x", r[i]);
}

/* journal_scan callback: the caller's, remembering that it stopped. */
static int
journal_stop_fn(const char *line, size_t len, const struct jsonr *e, void *arg)
{
	struct journal_stop *st = arg;

	return st->stop = st->fn(line, len, e, st->arg);
}

/* journal_scan callback: remember the highest seq. */
static int
journal_last_fn(const char *line, size_t len, const struct jsonr *e, void *arg)
{
	struct journal_last *l = arg;
	long long seq;

	(void)line;
	(void)len;
	if (jsonr_int(e, "seq", &seq) == 0 && seq > l->seq)
		l->seq = seq;
	return 0;
}

/* journal_scan callback: stop at the first entry (the epoch is known). */
static int
journal_first_fn(const char *line, size_t len, const struct jsonr *e, void *arg)
{
	(void)line;
	(void)len;
	(void)e;
	(void)arg;
	return 1;
}

/*
 * Hand one line to fn if it parses as an entry of the epoch (or, epoch
 * empty, sets it); returns what fn returns, 0 for a skipped line.
 */
static int
journal_line(
    const char *line, size_t len, char *epoch, journal_fn fn, void *arg)
{
	struct jsonr e;
	const char *ep;
	long long seq;
	int r = 0;

	if (jsonr_parse(line, len, &e, NULL) != 0 || e.type != JSONR_OBJECT)
		goto out;
	ep = jsonr_str(&e, "epoch");
	if (ep == NULL || strlen(ep) != JOURNAL_EPOCH_LEN ||
	    jsonr_int(&e, "seq", &seq) != 0 || jsonr_str(&e, "event") == NULL)
		goto out;
	if (*epoch == '\0')
		memcpy(epoch, ep, JOURNAL_EPOCH_LEN + 1);
	if (strcmp(ep, epoch) != 0)
		goto out;
	r = fn(line, len, &e, arg);
out:
	jsonr_free(&e);
	return r;
}

/*
 * Call fn for each valid entry of the journal at path in order, until it
 * returns non-zero; epoch (JOURNAL_EPOCH_LEN + 1 bytes) gets the journal's
 * epoch, "" when it has none. Returns 0, or -1 with errno when the file
 * cannot be read (ENOENT: no journal).
 */
int
journal_scan(const char *path, char *epoch, journal_fn fn, void *arg)
{
	*epoch = '\0';
	return journal_scan_at(path, 0, epoch, fn, arg);
}

/*
 * journal_scan from the first line that starts at or after offset, for
 * the journal of epoch (learnt from the first valid line when ""). 0 or
 * -1 with errno.
 */
int
journal_scan_at(
    const char *path, off_t offset, char *epoch, journal_fn fn, void *arg)
{
	int fd, r;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	r = journal_scan_fd(fd, offset, epoch, fn, NULL, arg, NULL);
	close(fd);
	return r;
}

/*
 * The scan of journal_scan_at on fd, lines pre (unless NULL) says no to
 * left unparsed; *end (unless NULL) gets the offset just after the last
 * whole line read. 0 or -1 with errno.
 */
static int
journal_scan_fd(int fd, off_t offset, char *epoch, journal_fn fn,
    journal_pre pre, void *arg, off_t *end)
{
	struct buf b = { NULL, 0, 0 };
	char chunk[16384], *nl;
	size_t start;
	ssize_t n;
	off_t pos;
	int skipping = 0, stop = 0;

	/* From the byte before: a line starts at offset if it is '\n'. */
	pos = offset > 0 ? offset - 1 : 0;
	skipping = offset > 0;
	if (lseek(fd, pos, SEEK_SET) == -1)
		return -1;
	while (!stop) {
		n = read(fd, chunk, sizeof chunk);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		buf_add(&b, chunk, (size_t)n);
		start = 0;
		while (!stop &&
		    (nl = memchr(b.data + start, '\n', b.len - start)) !=
			NULL) {
			size_t ll = (size_t)(nl - (b.data + start));

			if (!skipping &&
			    (pre == NULL || pre(b.data + start, ll, arg)))
				stop = journal_line(
				    b.data + start, ll, epoch, fn, arg);
			skipping = 0;
			start += ll + 1;
			pos += (off_t)(ll + 1);
		}
		memmove(b.data, b.data + start, b.len - start);
		b.len -= start;
		if (b.len > JOURNAL_LINE_MAX) {
			pos += (off_t)b.len;
			b.len = 0; /* a line too long: skip to its end */
			skipping = 1;
		}
	}
	if (end != NULL)
		*end = pos;
	if (!stop && !skipping && b.len > 0 &&
	    (pre == NULL || pre(b.data, b.len, arg)))
		journal_line(b.data, b.len, epoch, fn, arg);
	buf_free(&b);
	return 0;
}

struct journal_seq {
	long long seq;
};

struct journal_replayed {
	struct judge_state *js;
};

/* journal_scan callback: the first entry's seq. */
static int
journal_seq_fn(const char *line, size_t len, const struct jsonr *e, void *arg)
{
	struct journal_seq *q = arg;

	(void)line;
	(void)len;
	return jsonr_int(e, "seq", &q->seq) == 0;
}

/*
 * The seq of the first entry of epoch that starts at or after from and
 * before limit, with in *next the offset after it; -1 when there is none.
 */
static long long
journal_seq_from(
    int fd, off_t from, off_t limit, const char *epoch, off_t *next)
{
	struct journal_seq q = { -1 };
	char ep[JOURNAL_EPOCH_LEN + 1];
	off_t end;

	memcpy(ep, epoch, sizeof ep);
	if (journal_scan_fd(fd, from, ep, journal_seq_fn, NULL, &q, &end) !=
		0 ||
	    end > limit)
		return -1;
	*next = end;
	return q.seq;
}

/*
 * Where to read the entries after seq of the journal at path (of epoch)
 * from: an offset at or before the first of them, found by bisecting
 * (seq grows along the file) down to JOURNAL_SEEK_SPAN bytes.
 */
static off_t
journal_seek(const char *path, const char *epoch, long long seq)
{
	struct stat st;
	off_t lo = 0, hi, mid, next;
	long long s;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return 0;
	}
	hi = st.st_size;
	while (hi - lo > JOURNAL_SEEK_SPAN) {
		mid = lo + (hi - lo) / 2;
		if ((s = journal_seq_from(fd, mid, hi, epoch, &next)) < 0)
			break; /* no whole entry there: read from lo */
		if (s <= seq)
			lo = next;
		else
			hi = mid;
	}
	close(fd);
	return lo;
}

/*
 * The last seq of the journal at path (of epoch), read from its tail, or
 * 0 when it has no entry of epoch.
 */
static long long
journal_last_seq(const char *path, const char *epoch)
{
	struct journal_last l;
	struct stat st;
	off_t span = JOURNAL_TAIL_SPAN, from;

	if (stat(path, &st) != 0)
		return 0;
	for (;;) {
		from = st.st_size > span ? st.st_size - span : 0;
		memset(&l, 0, sizeof l);
		memcpy(l.epoch, epoch, sizeof l.epoch);
		if (journal_scan_at(path, from, l.epoch, journal_last_fn, &l) !=
			0 ||
		    l.seq > 0 || from == 0)
			return l.seq;
		span *= 2;
	}
}

/*
 * Open (creating it 0600) dir/journal.jsonl for appending: learn its epoch
 * and last seq, or begin it with a "journal" line. 0, or -1 with cause.
 */
int
journal_open(struct journal *j, const char *dir, time_t now, char **cause)
{
	struct journal_files f;
	struct journal_last l;
	struct jsonw w;
	int r;

	memset(j, 0, sizeof *j);
	j->fd = -1;
	j->dir = xstrdup(dir);
	xasprintf(&j->path, "%s/journal.jsonl", dir);
	j->fd = open(j->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (j->fd == -1) {
		xasprintf(
		    cause, "cannot open %s: %s", j->path, strerror(errno));
		return -1;
	}
	memset(&l, 0, sizeof l);
	if (journal_scan(j->path, l.epoch, journal_first_fn, NULL) != 0) {
		xasprintf(
		    cause, "cannot read %s: %s", j->path, strerror(errno));
		return -1;
	}
	/* The segments' epoch and seq go on (a new file after a rotation,
	   or a crash in one). */
	journal_files_list(dir, &f, 0);
	journal_files_epoch(&f, l.epoch);
	if (l.epoch[0] != '\0') {
		memcpy(j->epoch, l.epoch, sizeof j->epoch);
		j->seq = journal_last_seq(j->path, l.epoch);
		if (j->seq == 0 && f.n > 1)
			j->seq = f.f[f.n - 2].last;
		journal_files_free(&f);
		return 0;
	}
	journal_files_free(&f);
	journal_new_epoch(j->epoch);
	j->seq = 0;
	journal_begin(j, &w, now, "journal");
	r = journal_end(j, &w, cause);
	jsonw_free(&w);
	return r;
}

/* Start an entry in w: epoch, the next seq, time and event. */
void
journal_begin(struct journal *j, struct jsonw *w, time_t now, const char *event)
{
	jsonw_init(w);
	jsonw_object_begin(w, NULL);
	jsonw_string(w, "epoch", j->epoch);
	jsonw_int(w, "seq", j->seq + 1);
	jsonw_int(w, "time", (long long)now);
	jsonw_string(w, "event", event);
}

/*
 * Finish the entry in w and append it as one line, fsynced; w (the line)
 * is the caller's to free. 0, or -1 with cause (the seq is not used up).
 */
int
journal_end(struct journal *j, struct jsonw *w, char **cause)
{
	ssize_t n;
	int r = -1;

	jsonw_object_end(w);
	buf_add(&w->out, "\n", 1);
	do
		n = write(j->fd, w->out.data, w->out.len);
	while (n == -1 && errno == EINTR);
	if (n == (ssize_t)w->out.len && fsync(j->fd) == 0) {
		j->seq++;
		r = 0;
	} else if (n > 0 && n < (ssize_t)w->out.len &&
	    write(j->fd, "\n", 1) != 1)
		(void)0; /* end the torn line, so that the next one parses */
	if (r != 0 && cause != NULL)
		xasprintf(cause, "cannot append to %s: %s", j->path,
		    n == -1 ? strerror(errno) : "short write");
	return r;
}

/* Close the journal. */
void
journal_close(struct journal *j)
{
	if (j->fd != -1)
		close(j->fd);
	free(j->dir);
	free(j->path);
	memset(j, 0, sizeof *j);
	j->fd = -1;
}

struct journal_after {
	long long after;
	size_t count;
	size_t bytes;
	int more;
	struct jsonw *w;
	size_t ucount; /* past the page: the stops read ahead, in u */
	size_t ubytes;
	struct jsonw *u;
	int stop; /* u is full */
};

/*
 * Whether the line is an entry of an event that decides the books (a
 * stop's), by its text.
 */
static int
journal_urgent(const char *line, size_t len)
{
	static const char *const urgent[] = { "firing", "skipped", "stopping",
		"stop_result", "stopped", "stop_retry", "stop_failed",
		"local_due", "held", "released", "cancelled", NULL };

	return journal_event_in(line, len, urgent);
}

/*
 * Whether the line's event is one of names (NULL-terminated), by its
 * text: the first "event":"NAME" in it, as the watcher writes it (a
 * string value holding that text has its quotes escaped).
 */
static int
journal_event_in(const char *line, size_t len, const char *const *names)
{
	static const char key[] = "\"event\":\"";
	const char *p = memmem(line, len, key, sizeof key - 1), *end;
	size_t i, n;

	if (p == NULL)
		return 0;
	p += sizeof key - 1;
	if ((end = memchr(p, '"', len - (size_t)(p - line))) == NULL)
		return 0;
	n = (size_t)(end - p);
	for (i = 0; names[i] != NULL; i++)
		if (strlen(names[i]) == n && memcmp(names[i], p, n) == 0)
			return 1;
	return 0;
}

/* journal_scan prefilter: past the page, only the stops are parsed. */
static int
journal_after_pre(const char *line, size_t len, void *arg)
{
	struct journal_after *a = arg;

	return !a->more || journal_urgent(line, len);
}

/*
 * journal_scan callback: add the entries after the cursor to the page, to
 * the caps; past them, the stops to u, to theirs.
 */
static int
journal_after_fn(const char *line, size_t len, const struct jsonr *e, void *arg)
{
	struct journal_after *a = arg;
	long long seq;

	if (jsonr_int(e, "seq", &seq) != 0 || seq <= a->after)
		return 0;
	if (!a->more &&
	    (a->count >= JOURNAL_REPORT_ENTRIES ||
		a->bytes + len > JOURNAL_REPORT_BYTES))
		a->more = 1;
	if (!a->more) {
		jsonw_raw(a->w, NULL, line, len);
		a->count++;
		a->bytes += len;
		return 0;
	}
	if (!journal_urgent(line, len))
		return 0;
	if (a->ucount >= JOURNAL_URGENT_ENTRIES ||
	    a->ubytes + len > JOURNAL_URGENT_BYTES)
		return a->stop = 1;
	jsonw_raw(a->u, NULL, line, len);
	a->ucount++;
	a->ubytes += len;
	return 0;
}

/*
 * Write the report's journal_epoch, journal, journal_more and
 * journal_urgent for the journal in dir: the entries after seq when the
 * cursor's epoch is the journal's (NULL or another: from the start), to
 * the page's caps; when more are left, the stops among them read ahead
 * (agent/WATCH.md "In the report"). The cursor, of the journal's epoch,
 * is the controller's acknowledgement (journal_ack).
 */
void
journal_report(struct jsonw *w, const char *dir, const char *cursor_epoch,
    long long cursor_seq)
{
	struct journal_after a;
	struct journal_files f;
	struct jsonw u;
	char epoch[JOURNAL_EPOCH_LEN + 1];
	size_t i;
	int fd, first = 1;

	memset(&a, 0, sizeof a);
	a.w = w;
	a.u = &u;
	journal_files_list(dir, &f, 1);
	journal_files_epoch(&f, epoch);
	if (epoch[0] == '\0') {
		jsonw_null(w, REPORT_KEY_JOURNAL_EPOCH);
		jsonw_array_begin(w, REPORT_KEY_JOURNAL);
		jsonw_array_end(w);
		jsonw_bool(w, REPORT_KEY_JOURNAL_MORE, 0);
		jsonw_raw(w, REPORT_KEY_JOURNAL_URGENT, "[]", 2);
		journal_files_free(&f);
		return;
	}
	jsonw_string(w, REPORT_KEY_JOURNAL_EPOCH, epoch);
	if (cursor_epoch != NULL && strcmp(cursor_epoch, epoch) == 0) {
		a.after = cursor_seq;
		journal_ack(dir, epoch, cursor_seq);
	}
	jsonw_init(&u);
	jsonw_array_begin(&u, NULL);
	jsonw_array_begin(w, REPORT_KEY_JOURNAL);
	/* The segments wholly at or before the cursor are not opened; the
	   first one read is bisected to it. */
	for (i = 0; i < f.n && !a.stop; i++) {
		if (f.f[i].last <= a.after ||
		    (fd = open(f.f[i].path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		journal_scan_fd(fd,
		    first && a.after > 0
			? journal_seek(f.f[i].path, epoch, a.after)
			: 0,
		    epoch, journal_after_fn, journal_after_pre, &a, NULL);
		first = 0;
		close(fd);
	}
	journal_files_free(&f);
	jsonw_array_end(w);
	jsonw_array_end(&u);
	jsonw_bool(w, REPORT_KEY_JOURNAL_MORE, a.more);
	jsonw_raw(w, REPORT_KEY_JOURNAL_URGENT, u.out.data, u.out.len);
	jsonw_free(&u);
}

/* journal_scan callback: replay into a judge_state. */
static int
journal_replay_fn(
    const char *line, size_t len, const struct jsonr *e, void *arg)
{
	struct journal_replayed *rp = arg;

	(void)line;
	(void)len;
	judge_replay(rp->js, e);
	return 0;
}

/*
 * Load the state cached at spath into js (empty) if it matches this build
 * and the journal of files f, of epoch: 0 with *file and *offset, where
 * the rest of the journal begins, or -1 (js left empty).
 */
static int
journal_state_load(const char *spath, const struct journal_files *f,
    const char *epoch, struct judge_state *js, size_t *file, off_t *offset)
{
	struct journal_state_head h;
	struct stat st;
	size_t want, k;
	int fd, jfd = -1, r = -1;

	if ((fd = open(spath, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	if (read(fd, &h, sizeof h) != (ssize_t)sizeof h ||
	    memcmp(h.magic, "gfjstat1", 8) != 0 ||
	    strncmp(h.version, GPUFLEET_VERSION, sizeof h.version) != 0 ||
	    h.fire_size != sizeof(struct judge_fire) ||
	    h.nfires > JOURNAL_STATE_FIRES || h.epoch[JOURNAL_EPOCH_LEN] ||
	    strcmp(h.epoch, epoch) != 0 || h.offset <= 0 || h.seq <= 0 ||
	    fstat(fd, &st) != 0 ||
	    st.st_size != (off_t)(sizeof h + (size_t)h.nfires * h.fire_size))
		goto out;
	/* The entry that ends at offset, in the file whose entries reach
	   seq, must be seq, of this epoch. */
	for (k = 0; k + 1 < f->n && f->f[k].last < h.seq; k++)
		;
	if ((jfd = open(f->f[k].path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    journal_seq_ending(jfd, h.offset, epoch) != h.seq)
		goto out;
	js->f = xreallocarray(NULL, h.nfires ? h.nfires : 1, sizeof *js->f);
	want = (size_t)h.nfires * sizeof *js->f;
	if (read(fd, js->f, want) != (ssize_t)want) {
		judge_state_free(js);
		goto out;
	}
	js->n = h.nfires;
	*file = k;
	*offset = h.offset;
	r = 0;
out:
	if (jfd != -1)
		close(jfd);
	close(fd);
	return r;
}

/*
 * The seq of the entry of epoch whose line ends at offset (its newline
 * the byte before), or -1.
 */
static long long
journal_seq_ending(int fd, off_t offset, const char *epoch)
{
	struct journal_seq q = { -1 };
	struct stat st;
	char ep[JOURNAL_EPOCH_LEN + 1], *line;
	size_t want;
	off_t from;
	ssize_t n;

	if (offset <= 0 || fstat(fd, &st) != 0 || st.st_size < offset)
		return -1;
	want = offset > JOURNAL_LINE_MAX + 1 ? JOURNAL_LINE_MAX + 1
					     : (size_t)offset;
	from = offset - (off_t)want;
	line = xmalloc(want);
	if (pread(fd, line, want, from) == (ssize_t)want &&
	    line[want - 1] == '\n') {
		for (n = (ssize_t)want - 2; n >= 0 && line[n] != '\n'; n--)
			;
		memcpy(ep, epoch, sizeof ep);
		if (n >= 0 || from == 0)
			journal_line(line + n + 1, want - 2 - (size_t)n, ep,
			    journal_seq_fn, &q);
	}
	free(line);
	return q.seq;
}

/*
 * journal_scan prefilter of a replay: the events judge_replay has nothing
 * to do with, the bulk of a long journal, are left unparsed.
 */
static int
journal_replay_pre(const char *line, size_t len, void *arg)
{
	static const char *const idle[] = { "idle", "busy", "gpu_unreadable",
		"notify", NULL };

	(void)arg;
	return !journal_event_in(line, len, idle);
}

/*
 * Cache js, the state of the journal of epoch up to the entry seq that
 * ends at offset (of the file whose entries reach seq), at spath (written
 * aside, then renamed over). 0, or -1 when it is not.
 */
static int
journal_state_save(const char *spath, const char *epoch, long long seq,
    off_t offset, const struct judge_state *js)
{
	struct journal_state_head h;
	char *tmp;
	size_t len = js->n * sizeof *js->f;
	int fd, ok;

	if (js->n > JOURNAL_STATE_FIRES)
		return -1;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, "gfjstat1", 8);
	snprintf(h.version, sizeof h.version, "%s", GPUFLEET_VERSION);
	h.fire_size = sizeof *js->f;
	h.nfires = (uint32_t)js->n;
	memcpy(h.epoch, epoch, sizeof h.epoch);
	h.seq = seq;
	h.offset = offset;
	xasprintf(&tmp, "%s.%ld", spath, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ok = fd != -1 && write(fd, &h, sizeof h) == (ssize_t)sizeof h &&
	    (len == 0 || write(fd, js->f, len) == (ssize_t)len);
	if (fd != -1)
		close(fd);
	if (!ok || rename(tmp, spath) != 0) {
		unlink(tmp);
		ok = 0;
	}
	free(tmp);
	return ok ? 0 : -1;
}

/*
 * Replay the journal of dir into js (empty), its segments then
 * journal.jsonl: from the state cached in D/journal.state when it
 * matches, then what was appended since; the state is cached again when
 * that was JOURNAL_STATE_EVERY bytes or more. epoch gets the journal's
 * ("" when none). 0, or -1 with errno when the journal cannot be read
 * (ENOENT: none).
 */
int
journal_replay(const char *dir, char *epoch, struct judge_state *js)
{
	struct journal_replayed rp = { js };
	struct journal_files f;
	struct stat st;
	char *spath;
	size_t k, from_file = 0;
	off_t from = 0, end = 0, read_bytes = 0;
	long long seq;
	int fd = -1, r = -1, opened = 0;

	*epoch = '\0';
	xasprintf(&spath, "%s/journal.state", dir);
	journal_files_list(dir, &f, 1);
	journal_files_epoch(&f, epoch);
	if (*epoch != '\0' &&
	    journal_state_load(spath, &f, epoch, js, &from_file, &from) != 0) {
		from_file = 0;
		from = 0;
	}
	for (k = from_file; k < f.n; k++) {
		if (fd != -1)
			close(fd);
		fd = -1;
		if ((fd = open(f.f[k].path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		opened = 1;
		if ((r = journal_scan_fd(fd, k == from_file ? from : 0, epoch,
			 journal_replay_fn, journal_replay_pre, &rp, &end)) !=
		    0)
			break;
		read_bytes += end - (k == from_file ? from : 0);
	}
	/* Only at the end of journal.jsonl, not over a line still being
	   written (the file is longer); the last line, maybe left unparsed,
	   names the state's seq. */
	if (r == 0 && fd != -1 && k == f.n && *epoch != '\0' &&
	    read_bytes >= JOURNAL_STATE_EVERY && fstat(fd, &st) == 0 &&
	    st.st_size == end && (seq = journal_seq_ending(fd, end, epoch)) > 0)
		(void)journal_state_save(spath, epoch, seq, end, js);
	if (fd != -1)
		close(fd);
	if (!opened) {
		r = -1;
		errno = ENOENT;
	}
	journal_files_free(&f);
	free(spath);
	return r;
}
