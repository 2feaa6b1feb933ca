/*
 * The login user's password as a credential: lock it so that a leaked
 * console password no longer opens SSH (key login checked before and
 * after, the change undone where key login stopped working), or set a new
 * random one per instance for a platform's web console, shown once or
 * written to a new 0600 file. Neither is ever stored by gpufleet; what was
 * done goes to `events` and `keys status`.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "log.h"
#include "misc.h"
#include "passwd.h"
#include "password.h"
#include "remote.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

static int cmd_passwd_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int write_out(
    int, const char *, struct remote *, const struct passwd_host *, char **);
static void print_host(
    const char *, const struct passwd_host *, int, const char *, json_t *);

const struct cmd_entry cmd_passwd_entry = {
	.name = "passwd",
	.usage = "SELECTOR --lock|--random [--password|--password-file FILE] "
		 "[--out FILE] [--json]",
	.summary = "lock the login password, or set a new random one",
	.help =
	    "  --lock          lock the login user's password, so that only "
	    "keys open SSH.\n"
	    "                  A fresh login with the key alone comes first "
	    "(nothing changes\n"
	    "                  if it fails); it reads the running sshd's "
	    "UsePAM and locks\n"
	    "                  with `passwd -l` where sshd uses PAM, else "
	    "`usermod -p '*'`\n"
	    "                  (sshd without PAM refuses a \"!\"-locked "
	    "account even by key;\n"
	    "                  without usermod, as on busybox, `chpasswd -e` "
	    "with '*').\n"
	    "                  Then a second fresh key login reads the "
	    "shadow entry back;\n"
	    "                  if that login fails, the old hash is written "
	    "back at once\n"
	    "                  over the first session (held in memory "
	    "only, never stored).\n"
	    "  --random        set a new random password per instance "
	    "(through chpasswd's\n"
	    "                  stdin, never in an argv) and check that it "
	    "logs in with\n"
	    "                  password authentication.  Shown once, or "
	    "written to --out.\n"
	    "  --password      ask on the terminal for the old password, to "
	    "prove that it\n"
	    "                  is refused afterwards (a fresh password "
	    "login).\n"
	    "  --password-file FILE\n"
	    "                  the old password: the first line of FILE (- "
	    "for stdin).\n"
	    "  --out FILE      --random: write \"NAME PASSWORD\" lines to "
	    "FILE, a new file\n"
	    "                  made 0600 (it must not exist), instead of "
	    "showing them.\n"
	    "  --json          one JSON array: name, ok, method, outcome, "
	    "old_password_refused,\n"
	    "                  new_password_works (true, false or null: not "
	    "tried) and, for\n"
	    "                  --random without --out, password.\n"
	    "The login user must be root or have passwordless sudo.  Every "
	    "run is recorded in\n"
	    "`gpufleet events` and shown by `gpufleet keys status` (what, "
	    "when, how; never\n"
	    "a password).  Exit status 1 when any instance fails.  Once the "
	    "run has\nstarted, Ctrl-C takes effect only at the end: a lock is "
	    "checked (or undone)\nand new passwords shown or written first.\n",
	.exec = cmd_passwd_exec,
};

static const struct option passwd_options[] = {
	{ "lock", no_argument, NULL, 'l' },
	{ "random", no_argument, NULL, 'r' },
	{ "password", no_argument, NULL, 'p' },
	{ "password-file", required_argument, NULL, 'P' },
	{ "out", required_argument, NULL, 'o' },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Write each set password to fd as "NAME PASSWORD" lines, then close it. */
static int
write_out(int fd, const char *path, struct remote *rm,
    const struct passwd_host *res, char **cause)
{
	char *line;
	size_t i, len, off;
	ssize_t w;
	int r = 0;

	for (i = 0; i < rm->n && r == 0; i++) {
		if (res[i].secret == NULL)
			continue;
		xasprintf(&line, "%s %s\n", rm->list[i].name, res[i].secret);
		len = strlen(line);
		for (off = 0; off < len;) {
			if ((w = write(fd, line + off, len - off)) < 0) {
				if (errno == EINTR)
					continue;
				xasprintf(cause, "cannot write %s: %s", path,
				    strerror(errno));
				r = -1;
				break;
			}
			off += (size_t)w;
		}
		explicit_bzero(line, len);
		free(line);
	}
	if (r == 0 && fsync(fd) != 0) {
		xasprintf(cause, "cannot write %s: %s", path, strerror(errno));
		r = -1;
	}
	if (close(fd) != 0 && r == 0) {
		xasprintf(cause, "cannot write %s: %s", path, strerror(errno));
		r = -1;
	}
	return r;
}

static json_t *
tristate(int v)
{
	return v < 0 ? json_null() : json_boolean(v);
}

/* One host's line (or JSON object); show: print the password too. */
static void
print_host(const char *name, const struct passwd_host *r, int show,
    const char *out, json_t *arr)
{
	char *safe;
	json_t *o;

	if (arr != NULL) {
		o = json_object();
		json_object_set_new(o, "name", json_string(name));
		json_object_set_new(o, "ok", json_boolean(r->ok));
		json_object_set_new(o, "method",
		    r->method != NULL ? json_string(r->method) : json_null());
		json_object_set_new(o, "outcome",
		    json_string(r->outcome != NULL ? r->outcome : ""));
		json_object_set_new(
		    o, "old_password_refused", tristate(r->old_refused));
		json_object_set_new(
		    o, "new_password_works", tristate(r->new_works));
		if (show && r->secret != NULL)
			json_object_set_new(
			    o, "password", json_string(r->secret));
		json_array_append_new(arr, o);
		return;
	}
	safe = vis_str(r->outcome != NULL ? r->outcome : "?");
	printf("%s: %s\n", name, safe);
	free(safe);
	if (r->secret == NULL)
		return;
	if (show)
		printf("%s: password: %s\n", name, r->secret);
	else if (out != NULL)
		printf("%s: password written to %s\n", name, out);
}

static int
cmd_passwd_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct remote *rm = NULL;
	struct passwd_host *res = NULL;
	const char *pwfile = NULL, *out = NULL;
	char *oldpw = NULL, *cause = NULL, *what;
	json_t *arr = NULL;
	size_t i;
	int ch, status, r, lock = 0, rnd = 0, ask = 0, json = 0, fd = -1;
	int nbad;

	while ((ch = cmd_getopt(e, argc, argv, "h", passwd_options, &status)) !=
	    -1) {
		switch (ch) {
		case -2:
			return status;
		case 'l':
			lock = 1;
			break;
		case 'r':
			rnd = 1;
			break;
		case 'p':
			ask = 1;
			break;
		case 'P':
			pwfile = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'j':
			json = 1;
			break;
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs one SELECTOR");
	if (lock + rnd != 1)
		return cmd_usage_error(e, "needs one of --lock and --random");
	if (ask && pwfile != NULL)
		return cmd_usage_error(
		    e, "--password and --password-file: give one");
	if (out != NULL && !rnd)
		return cmd_usage_error(e, "--out goes with --random");
	if (out != NULL) {
		/* A new file, made 0600, before anything changes. */
		fd = open(out,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd == -1) {
			xasprintf(&cause, "cannot create %s: %s", out,
			    errno == EEXIST ? "it exists (--out makes a new "
					      "file)"
					    : strerror(errno));
			return cmd_fail(GF_EUSAGE, cause);
		}
	}
	misc_secret_hold();
	if ((r = remote_open(ctx->fleet, argv[optind], &rm, &cause)) != 0) {
		status = cmd_fail(-r, cause);
		goto out;
	}
	if (ask || pwfile != NULL) {
		if (rm->n == 1)
			xasprintf(&what, "%s@%s (the old one)",
			    rm->list[0].user, rm->list[0].host);
		else
			xasprintf(
			    &what, "the %zu instances (the old one)", rm->n);
		oldpw = password_read(pwfile, what, &cause);
		free(what);
		if (oldpw == NULL) {
			status = cmd_fail(GF_EUSAGE, cause);
			goto out;
		}
	}
	res = xcalloc(rm->n, sizeof *res);
	/* From here to the end, Ctrl-C waits: a lock is checked (or undone),
	 * a new password shown or written, before it acts. */
	misc_signals_defer();
	if (lock)
		nbad = passwd_lock(rm, oldpw, res);
	else
		nbad = passwd_random(rm, oldpw, res);
	passwd_record(rm, lock ? "passwd_lock" : "passwd_random",
	    lock ? "passwd --lock" : "passwd --random", res);
	status = nbad > 0 ? GF_EHOSTS : GF_OK;
	if (fd != -1) {
		r = write_out(fd, out, rm, res, &cause);
		fd = -1;
		if (r != 0) {
			/* Set but not saved: show them rather than lose them.
			 */
			error("%s; the passwords follow instead", cause);
			free(cause);
			cause = NULL;
			out = NULL;
			status = GF_EHOSTS;
		}
	}
	if (json)
		arr = json_array();
	for (i = 0; i < rm->n; i++)
		print_host(
		    rm->list[i].name, &res[i], rnd && out == NULL, out, arr);
	if (arr != NULL)
		json_print(arr, stdout);
	fflush(stdout);
out:
	if (fd != -1) {
		close(fd);
		unlink(out);
	}
	for (i = 0; res != NULL && i < rm->n; i++)
		passwd_host_clear(&res[i]);
	free(res);
	password_free(oldpw);
	misc_secret_release();
	remote_close(rm);
	misc_signals_resume();
	return status;
}
