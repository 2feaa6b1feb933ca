/*
 * The progress file a job may keep up to date (one line such as "epoch
 * 3/10 loss 0.41" rewritten in place): its first REPORT_PROGRESS_MAX bytes
 * and its modification time.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "gpufleet/report.h"
#include "../controller/xmalloc.h"

static size_t progress_cut(const char *, size_t);

/*
 * Length of text without a UTF-8 sequence cut short at its end, so a cap
 * that falls inside a character does not show as U+FFFD.
 */
static size_t
progress_cut(const char *text, size_t len)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t i, need;

	for (i = 1; i <= 3 && i <= len; i++) {
		unsigned char c = p[len - i];

		if ((c & 0xc0) == 0x80)
			continue; /* a continuation byte: look further back */
		if (c >= 0xf0)
			need = 4;
		else if (c >= 0xe0)
			need = 3;
		else if (c >= 0xc0)
			need = 2;
		else
			return len;
		return need > i ? len - i : len;
	}
	return len;
}

/*
 * Read the progress file at path: absent or unreadable (or not a regular
 * file) leaves pr->present 0.
 */
void
progress_read(struct progress *pr, const char *path)
{
	struct stat sb;
	char chunk[4096];
	ssize_t n;
	int fd;

	memset(pr, 0, sizeof *pr);
	pr->path = xstrdup(path);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) == -1)
		return;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return;
	}
	/* One byte more than the cap tells whether there is more. */
	while (pr->text.len <= REPORT_PROGRESS_MAX) {
		size_t want = REPORT_PROGRESS_MAX + 1 - pr->text.len;

		if (want > sizeof chunk)
			want = sizeof chunk;
		n = read(fd, chunk, want);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			close(fd);
			buf_free(&pr->text);
			return;
		}
		if (n == 0)
			break;
		buf_add(&pr->text, chunk, (size_t)n);
	}
	close(fd);
	if (pr->text.data == NULL)
		buf_add(&pr->text, "", 0);
	if (pr->text.len > REPORT_PROGRESS_MAX) {
		pr->truncated = 1;
		pr->text.len = progress_cut(pr->text.data, REPORT_PROGRESS_MAX);
		pr->text.data[pr->text.len] = '\0';
	}
	pr->mtime = (long long)sb.st_mtime;
	pr->present = 1;
}

/* Write "progress": an object, or null when there is no file. */
void
progress_write(struct jsonw *w, const struct progress *pr)
{
	if (!pr->present) {
		jsonw_null(w, REPORT_KEY_PROGRESS);
		return;
	}
	jsonw_object_begin(w, REPORT_KEY_PROGRESS);
	jsonw_string(w, REPORT_KEY_PROGRESS_PATH, pr->path);
	jsonw_stringn(w, REPORT_KEY_PROGRESS_TEXT, pr->text.data, pr->text.len);
	jsonw_bool(w, REPORT_KEY_PROGRESS_TRUNCATED, pr->truncated);
	jsonw_int(w, REPORT_KEY_PROGRESS_MTIME, pr->mtime);
	jsonw_object_end(w);
}

/* Free what pr holds. */
void
progress_free(struct progress *pr)
{
	free(pr->path);
	buf_free(&pr->text);
	memset(pr, 0, sizeof *pr);
}
