/* Finding the agent binary and the remote commands that run or deploy it. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deploy.h"
#include "misc.h"
#include "xmalloc.h"

#ifndef GPUFLEET_LIBEXECDIR
#define GPUFLEET_LIBEXECDIR "/usr/local/libexec/gpufleet"
#endif

#define AGENT_MAX_BYTES (64 * 1024 * 1024)

static int read_file(const char *, char **, size_t *);
static char *report_args(const struct instance *, const char *);

static int
read_file(const char *path, char **data, size_t *len)
{
	struct stat st;
	ssize_t n;
	size_t off = 0;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > AGENT_MAX_BYTES) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	*data = xmalloc((size_t)st.st_size + 1);
	while (off < (size_t)st.st_size) {
		n = read(fd, *data + off, (size_t)st.st_size - off);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			free(*data);
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	close(fd);
	*len = off;
	return 0;
}

/*
 * Load the agent: $GPUFLEET_AGENT, else gpufleet-agent beside this
 * executable (a build directory), else ../libexec/gpufleet/ from it (an
 * install under any prefix, moved or not), else the libexec directory
 * the build was configured for.
 */
int
deploy_load(struct agent_bin *ab, char **cause)
{
	const char *env = getenv("GPUFLEET_AGENT");
	char self[PATH_MAX], *slash, *cand[4] = { NULL, NULL, NULL, NULL };
	char *tried;
	uint64_t h = 1469598103934665603ULL;
	ssize_t n;
	size_t i;
	int k, nc = 0;

	memset(ab, 0, sizeof *ab);
	if (env != NULL && *env != '\0')
		cand[nc++] = xstrdup(env);
	else {
		n = readlink("/proc/self/exe", self, sizeof self - 1);
		if (n > 0) {
			self[n] = '\0';
			if ((slash = strrchr(self, '/')) != NULL) {
				*slash = '\0';
				xasprintf(
				    &cand[nc++], "%s/gpufleet-agent", self);
				xasprintf(&cand[nc++],
				    "%s/../libexec/gpufleet/gpufleet-agent",
				    self);
			}
		}
		cand[nc++] = xstrdup(GPUFLEET_LIBEXECDIR "/gpufleet-agent");
	}
	for (k = 0; k < nc && ab->path == NULL; k++) {
		if (read_file(cand[k], &ab->data, &ab->len) == 0)
			ab->path = xstrdup(cand[k]);
	}
	if (ab->path == NULL) {
		tried = xstrdup(cand[0]);
		for (k = 1; k < nc; k++) {
			slash = tried;
			xasprintf(&tried, "%s, %s", slash, cand[k]);
			free(slash);
		}
		xasprintf(cause,
		    "cannot find the agent binary (tried %s); set "
		    "GPUFLEET_AGENT",
		    tried);
		free(tried);
	}
	for (k = 0; k < nc; k++)
		free(cand[k]);
	if (ab->path == NULL)
		return -1;
	/* FNV-1a 64: names the content; the upload itself is size-checked. */
	for (i = 0; i < ab->len; i++) {
		h ^= (unsigned char)ab->data[i];
		h *= 1099511628211ULL;
	}
	snprintf(ab->hash, sizeof ab->hash, "%016llx", (unsigned long long)h);
	return 0;
}

void
deploy_free(struct agent_bin *ab)
{
	free(ab->path);
	free(ab->data);
	memset(ab, 0, sizeof *ab);
}

/*
 * The command that runs script with sh whatever the login shell is (sshd
 * hands the command to it, and fish, for one, does not read POSIX syntax):
 * sh -c 'SCRIPT', quoted so that POSIX shells and fish both read one word,
 * each ' as '\'' and each backslash as '\\'. Caller frees.
 */
char *
deploy_sh_command(const char *script)
{
	char *q = misc_quote_any_shell(script), *cmd;

	xasprintf(&cmd, "sh -c %s", q);
	free(q);
	return cmd;
}

/*
 * A command running the agent with agent_args (quoted for sh; "$d" is
 * REMOTE_DIR) where it is deployed, else exiting DEPLOY_EXIT_MISSING; with
 * upload, one that uploads it first (the binary arrives on stdin) and then
 * runs it: a POSIX sh script, for deploy_sh_command. remote_dir is
 * validated to need no quoting (an optional leading ~/ must stay unquoted
 * to expand). Caller frees.
 */
char *
deploy_agent_command(const struct instance *in, const struct agent_bin *ab,
    const char *agent_args, int upload)
{
	char *s;

	if (!upload) {
		xasprintf(&s,
		    "d=%s; a=\"$d/gpufleet-agent-%s\"; "
		    "if [ -x \"$a\" ]; then \"$a\" %s; exit $?; fi; exit %d",
		    in->remote_dir, ab->hash, agent_args, DEPLOY_EXIT_MISSING);
		return s;
	}
	xasprintf(&s,
	    "case $(uname -m) in x86_64|amd64) ;; *) echo \"the host is "
	    "$(uname -m); the agent is built for x86_64\" >&2; exit %d;; "
	    "esac; "
	    "umask 077; d=%s; a=\"$d/gpufleet-agent-%s\"; "
	    "t=\"$d/.gpufleet-agent-%s.$$\"; "
	    "mkdir -p \"$d\" || exit %d; "
	    "cat >\"$t\" || { rm -f \"$t\"; exit %d; }; "
	    "[ \"$(wc -c <\"$t\")\" -eq %zu ] || { rm -f \"$t\"; "
	    "echo \"upload truncated\" >&2; exit %d; }; "
	    "chmod 700 \"$t\" && mv -f \"$t\" \"$a\" || { rm -f \"$t\"; "
	    "exit %d; }; "
	    "\"$a\" %s",
	    DEPLOY_EXIT_ARCH, in->remote_dir, ab->hash, ab->hash,
	    DEPLOY_EXIT_WRITE, DEPLOY_EXIT_WRITE, ab->len, DEPLOY_EXIT_SHORT,
	    DEPLOY_EXIT_WRITE, agent_args);
	return s;
}

/*
 * The command that starts the agent's command runner (gpufleet-agent
 * serve) where the agent is deployed, else exits DEPLOY_EXIT_MISSING.
 * Caller frees.
 */
char *
deploy_serve_command(const struct instance *in, const struct agent_bin *ab)
{
	char *s = deploy_agent_command(in, ab, "serve", 0), *cmd;

	cmd = deploy_sh_command(s);
	free(s);
	return cmd;
}

/* The agent's report arguments for an instance. Caller frees. */
static char *
report_args(const struct instance *in, const char *args)
{
	char *s;

	xasprintf(&s, "report --dir \"$d\" --authorized-keys %s %s",
	    in->authorized_keys_file, args);
	return s;
}

/* The one round trip of a status: run the agent if it is there. */
char *
deploy_run_command(
    const struct instance *in, const struct agent_bin *ab, const char *args)
{
	char *a = report_args(in, args), *s, *cmd;

	s = deploy_agent_command(in, ab, a, 0);
	cmd = deploy_sh_command(s);
	free(s);
	free(a);
	return cmd;
}

/* Upload (the binary arrives on stdin) and run. Caller frees. */
char *
deploy_upload_command(
    const struct instance *in, const struct agent_bin *ab, const char *args)
{
	char *a = report_args(in, args), *s, *cmd;

	s = deploy_agent_command(in, ab, a, 1);
	cmd = deploy_sh_command(s);
	free(s);
	free(a);
	return cmd;
}

/*
 * Why a deploy-and-run failed, in one line, from its exit status and the
 * first line of its stderr. Caller frees.
 */
char *
deploy_explain(int status, const char *err, const struct instance *in)
{
	char *s,
	    *line = xstrndup(
		err != NULL ? err : "", err != NULL ? strcspn(err, "\n") : 0);

	switch (status) {
	case DEPLOY_EXIT_ARCH:
		xasprintf(&s, "cannot run the agent: %s", line);
		break;
	case DEPLOY_EXIT_WRITE:
		xasprintf(&s, "cannot write the agent to %s: %s",
		    in->remote_dir, *line != '\0' ? line : "no write access");
		break;
	case DEPLOY_EXIT_SHORT:
		xasprintf(&s,
		    "agent upload to %s arrived truncated (disk "
		    "full?)",
		    in->remote_dir);
		break;
	case 126:
		xasprintf(&s,
		    "cannot execute the agent in %s (mounted "
		    "noexec?): %s",
		    in->remote_dir, line);
		break;
	default:
		xasprintf(&s, "agent failed with status %d: %s", status,
		    *line != '\0' ? line : "no message");
		break;
	}
	free(line);
	return s;
}
