/*
 * Files to and from instances: rsync over OpenSSH with gpufleet's own
 * ssh_config (sshexport.c: pinned host keys, current keys), written for
 * each run to a private temporary directory. An instance without rsync
 * gets a tar stream over an ssh exec channel instead, unpacked under a
 * temporary name and renamed into place, so no half-written file ever
 * has its final name.
 *
 * xfer_run is synchronous: it runs up to req->fanout transfers at once as
 * child processes and returns when all have ended. Callers on an event
 * loop run it in a child process of their own.
 */
#ifndef GPUFLEET_XFER_H
#define GPUFLEET_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "fleet.h"
#include "instance.h"

#define XFER_PARTIAL_DIR ".gpufleet-partial"
#define XFER_TMP_PREFIX	 ".gpufleet-xfer."

enum xfer_dir { XFER_PUSH, XFER_PULL };

struct xfer_req {
	enum xfer_dir dir;
	const char *const *paths; /* push: local; pull: remote */
	size_t npaths;
	const char *dest; /* push: REMOTE_DIR; pull: LOCAL_DIR (NAME/ below) */
	int fanout;	  /* transfers at once, >= 1 */
	int dry_run;
	int delete;   /* rsync --delete */
	int timeout;  /* rsync --timeout: seconds without I/O, 0: none */
	int progress; /* draw per-instance progress lines on stderr */
};

struct xfer_host {
	char *name;
	int ok;
	int tar;     /* rsync missing on the instance: a tar stream was used */
	char *error; /* why it failed, escaped for a terminal; NULL if ok */
	uint64_t bytes; /* file content transferred */
	uint64_t files; /* regular files transferred */
	int64_t duration_ms;
};

struct xfer_result {
	struct xfer_host *hosts; /* one per instance, in selection order */
	size_t n;
	size_t nfailed;
	uint64_t bytes;
	uint64_t files;
	int64_t duration_ms;
	int interrupted; /* SIGINT or SIGTERM stopped the run */
};

struct xfer_progress {
	uint64_t bytes;
	int percent; /* 0-100 */
};

struct xfer_stats {
	uint64_t files; /* "Number of regular files transferred" */
	uint64_t bytes; /* "Total transferred file size" */
};

int xfer_run(struct fleet *, struct instance *, size_t, const struct xfer_req *,
    struct xfer_result *, char **);
void xfer_result_free(struct xfer_result *);
char **xfer_rsync_argv(
    const struct xfer_req *, const char *, const char *, const char *);
void xfer_argv_free(char **);
char *xfer_remote_path(const char *);
char *xfer_tar_push_script(const char *);
char *xfer_tar_pull_script(const struct xfer_req *);
int xfer_parse_progress(const char *, struct xfer_progress *);
int xfer_parse_stats(const char *, struct xfer_stats *);
char *xfer_reason(const char *);
char *xfer_size(uint64_t);
int xfer_check_path(const char *, char **);
int xfer_have_rsync(void);

#endif
