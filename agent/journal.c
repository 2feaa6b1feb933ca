/*
 * The watcher's journal, D/journal.jsonl (agent/WATCH.md "The journal"):
 * one JSON object per line, appended with O_APPEND in one write(2) each and
 * fsynced. The file's epoch is in its first valid line; seq goes on from
 * the last valid line of that epoch. Readers skip lines that do not parse
 * (a crash mid-write) and lines of another epoch.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "../controller/xmalloc.h"

/* Lines longer than this are skipped by readers (none is written). */
#define JOURNAL_LINE_MAX JSONR_MAXSIZE

struct journal_last {
	char epoch[JOURNAL_EPOCH_LEN + 1];
	long long seq;
};

static void journal_new_epoch(char *);
static int journal_last_fn(const char *, size_t, const struct jsonr *, void *);
static int journal_first_fn(const char *, size_t, const struct jsonr *, void *);
static int journal_after_fn(const char *, size_t, const struct jsonr *, void *);
static int journal_line(const char *, size_t, char *, journal_fn, void *);

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
	struct buf b = { NULL, 0, 0 };
	char chunk[16384], *nl;
	size_t start;
	ssize_t n;
	int fd, skipping = 0, stop = 0;

	*epoch = '\0';
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
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

			if (!skipping)
				stop = journal_line(
				    b.data + start, ll, epoch, fn, arg);
			skipping = 0;
			start += ll + 1;
		}
		memmove(b.data, b.data + start, b.len - start);
		b.len -= start;
		if (b.len > JOURNAL_LINE_MAX) {
			b.len = 0; /* a line too long: skip to its end */
			skipping = 1;
		}
	}
	if (!stop && !skipping && b.len > 0)
		journal_line(b.data, b.len, epoch, fn, arg);
	close(fd);
	buf_free(&b);
	return 0;
}

/*
 * Open (creating it 0600) dir/journal.jsonl for appending: learn its epoch
 * and last seq, or begin it with a "journal" line. 0, or -1 with cause.
 */
int
journal_open(struct journal *j, const char *dir, time_t now, char **cause)
{
	struct journal_last l;
	struct jsonw w;
	int r;

	memset(j, 0, sizeof *j);
	j->fd = -1;
	xasprintf(&j->path, "%s/journal.jsonl", dir);
	j->fd = open(j->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (j->fd == -1) {
		xasprintf(
		    cause, "cannot open %s: %s", j->path, strerror(errno));
		return -1;
	}
	memset(&l, 0, sizeof l);
	if (journal_scan(j->path, l.epoch, journal_last_fn, &l) != 0) {
		xasprintf(
		    cause, "cannot read %s: %s", j->path, strerror(errno));
		return -1;
	}
	if (l.epoch[0] != '\0') {
		memcpy(j->epoch, l.epoch, sizeof j->epoch);
		j->seq = l.seq;
		return 0;
	}
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
};

/* journal_scan callback: add the entries after the cursor, to the caps. */
static int
journal_after_fn(const char *line, size_t len, const struct jsonr *e, void *arg)
{
	struct journal_after *a = arg;
	long long seq;

	if (jsonr_int(e, "seq", &seq) != 0 || seq <= a->after)
		return 0;
	if (a->count >= JOURNAL_REPORT_ENTRIES ||
	    a->bytes + len > JOURNAL_REPORT_BYTES) {
		a->more = 1;
		return 1;
	}
	jsonw_raw(a->w, NULL, line, len);
	a->count++;
	a->bytes += len;
	return 0;
}

/*
 * Write the report's journal_epoch, journal and journal_more for the
 * journal in dir: the entries after seq when the cursor's epoch is the
 * journal's (NULL or another: from the start).
 */
void
journal_report(struct jsonw *w, const char *dir, const char *cursor_epoch,
    long long cursor_seq)
{
	struct journal_after a;
	char epoch[JOURNAL_EPOCH_LEN + 1], *path;
	int r;

	xasprintf(&path, "%s/journal.jsonl", dir);
	memset(&a, 0, sizeof a);
	a.w = w;
	r = journal_scan(path, epoch, journal_first_fn, NULL);
	if (r != 0 || epoch[0] == '\0') {
		jsonw_null(w, REPORT_KEY_JOURNAL_EPOCH);
		jsonw_array_begin(w, REPORT_KEY_JOURNAL);
		jsonw_array_end(w);
		jsonw_bool(w, REPORT_KEY_JOURNAL_MORE, 0);
		free(path);
		return;
	}
	jsonw_string(w, REPORT_KEY_JOURNAL_EPOCH, epoch);
	if (cursor_epoch != NULL && strcmp(cursor_epoch, epoch) == 0)
		a.after = cursor_seq;
	jsonw_array_begin(w, REPORT_KEY_JOURNAL);
	journal_scan(path, epoch, journal_after_fn, &a);
	jsonw_array_end(w);
	jsonw_bool(w, REPORT_KEY_JOURNAL_MORE, a.more);
	free(path);
}
