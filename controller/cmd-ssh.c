/*
 * Open an interactive OpenSSH session to an instance: the system ssh with
 * the instance's identity and a known_hosts file written from gpufleet's
 * pinned keys (HostKeyAlias=NAME), so ssh and gpufleet always agree on
 * trust. An instance without a pin is contacted first so that the policy
 * decides, exactly as for exec.
 *
 * ssh runs as a child, its stdin, stdout and stderr untouched, and its
 * exit status is gpufleet's. When it exits 255 (ssh's own failure, a
 * refused host key among them) gpufleet checks the key itself and, if it
 * changed, says to run `gpufleet hostkey accept NAME`: ssh's advice to run
 * ssh-keygen -R does not apply to a file gpufleet rewrites from its pins.
 *
 * An instance behind a jump host goes through it with a ProxyCommand of
 * `ssh -W` that pins the jump's key the same way.
 */

#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "hostkey.h"
#include "keyring.h"
#include "log.h"
#include "misc.h"
#include "remote.h"
#include "sshexport.h"
#include "status.h"
#include "xmalloc.h"

static int cmd_ssh_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static int run_ssh(char **, int *);
static void on_interrupt(int);

/* Ctrl-C or Ctrl-\ reached gpufleet (and ssh) while ssh ran. */
static volatile sig_atomic_t interrupted;
/* ssh's pid while it runs (SIGTERM and SIGHUP are passed on to it). */
static volatile sig_atomic_t child;
static volatile sig_atomic_t pending; /* came before child was set */
static void on_terminate(int);
static void changed_hint(struct cmd_ctx *, const char *);
static char *proxy_command(const char *, const struct instance *,
    const struct instance *, const char *, const char *);
static char *cfg_arg(const char *, int *);

const struct cmd_entry cmd_ssh_entry = {
	.name = "ssh",
	.usage = "NAME [--argv] [-- COMMAND [ARG...]]",
	.summary = "log in to an instance with OpenSSH (pinned host key)",
	.help =
	    "Runs the system ssh with the instance's user, port and identity,"
	    "\nStrictHostKeyChecking=yes and a known_hosts file that gpufleet "
	    "keeps\nin sync with its pinned keys; BatchMode=yes only when "
	    "stdin is not a\nterminal. The exit status is ssh's. If the host "
	    "key changed, gpufleet\nsays so after ssh's warning: run "
	    "`gpufleet hostkey accept NAME` once the\nmachine is known to be "
	    "replaced (not ssh-keygen -R). As with ssh and exec, "
	    "the words after --\nare joined into one line for the remote "
	    "shell; with --argv each ARG\nreaches the command exactly. "
	    "GPUFLEET_SSH names another ssh binary.\n"
	    "An instance with a jump host is reached through it (ProxyCommand "
	    "ssh -W),\nthe jump's key pinned the same way.\n\n"
	    "Examples:\n"
	    "  gpufleet ssh a100-1\n"
	    "  gpufleet ssh a100-1 -- tail -f train.log\n",
	.exec = cmd_ssh_exec,
};

enum { OPT_ARGV = 256 };

static const struct option ssh_options[] = { { "argv", no_argument, NULL,
						 OPT_ARGV },
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/*
 * The ProxyCommand that reaches target through jump: the same ssh with the
 * jump's pinned key (HostKeyAlias=its name), user, port and identity, then
 * -W to the target. qkh and qid are already ssh_config arguments
 * (sshexport_cfg_path: the inner ssh splits and %-expands them). Each word
 * is quoted for the user's shell and every % doubled again (the outer ssh
 * expands % tokens in the command). Caller frees.
 */
static char *
proxy_command(const char *ssh, const struct instance *jump,
    const struct instance *target, const char *qkh, const char *qid)
{
	char *words[24], *q, *cmd = NULL, *t, *out, *p;
	size_t len;
	int n = 0, k;

	words[n++] = xstrdup(ssh);
	xasprintf(&words[n++], "-oHostKeyAlias=%s", jump->name);
	xasprintf(&words[n++], "-oUserKnownHostsFile=%s", qkh);
	words[n++] = xstrdup("-oGlobalKnownHostsFile=/dev/null");
	words[n++] = xstrdup("-oStrictHostKeyChecking=yes");
	words[n++] = xstrdup("-oUpdateHostKeys=no");
	words[n++] = xstrdup("-oProxyCommand=none");
	words[n++] = xstrdup("-oControlPath=none");
	xasprintf(&words[n++], "-p%d", jump->port);
	xasprintf(&words[n++], "-l%s", jump->user);
	if (qid != NULL) {
		xasprintf(&words[n++], "-oIdentityFile=%s", qid);
		words[n++] = xstrdup("-oIdentitiesOnly=yes");
	}
	words[n++] = xstrdup("-W");
	if (strchr(target->host, ':') != NULL)
		xasprintf(&words[n++], "[%s]:%d", target->host, target->port);
	else
		xasprintf(&words[n++], "%s:%d", target->host, target->port);
	words[n++] = xstrdup(jump->host);
	for (k = 0; k < n; k++) {
		q = misc_quote_any_shell(words[k]);
		if (cmd == NULL)
			cmd = q;
		else {
			xasprintf(&t, "%s %s", cmd, q);
			free(cmd);
			free(q);
			cmd = t;
		}
		free(words[k]);
	}
	len = strlen(cmd);
	for (p = cmd; *p != '\0'; p++)
		len += *p == '%';
	out = p = xmalloc(len + 1);
	for (k = 0; cmd[k] != '\0'; k++) {
		if (cmd[k] == '%')
			*p++ = '%';
		*p++ = cmd[k];
	}
	*p = '\0';
	free(cmd);
	return out;
}

/*
 * A local path as an ssh option's value (ssh splits UserKnownHostsFile at
 * spaces and expands % and ${} in file options), ~/ expanded. NULL, with
 * an error printed and *status set, for a path ssh cannot be given.
 */
static char *
cfg_arg(const char *path, int *status)
{
	char *p = misc_expand_home(path), *q;

	if ((q = sshexport_cfg_path(p)) == NULL) {
		error(
		    "cannot give ssh the path %s (a quote, backslash, control "
		    "character or ${ in it)",
		    p);
		*status = GF_EUSAGE;
	}
	free(p);
	return q;
}

static int
cmd_ssh_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct engine_settings set;
	struct remote *rm = NULL;
	const struct instance *in, *jin = NULL;
	const char *ssh = getenv("GPUFLEET_SSH");
	char *cause = NULL, *kh = NULL, *opt_alias, *opt_kh, *port, *id;
	char *command = NULL, **args, *name, *proxy, *qkh, *qid = NULL;
	char *qjid = NULL;
	int ch, status, r, dashdash = 0, k, n = 0, ws, exact = 0;

	for (k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--") == 0) {
			dashdash = k;
			break;
		}
	}
	while ((ch = cmd_getopt(e, dashdash ? dashdash : argc, argv, "h",
		    ssh_options, &status)) != -1) {
		if (ch == -2)
			return status;
		if (ch == OPT_ARGV)
			exact = 1;
	}
	if ((dashdash ? dashdash : argc) - optind != 1)
		return cmd_usage_error(e, "needs exactly one NAME");
	if (instance_check_name(argv[optind], &cause) != 0)
		return cmd_fail(GF_EUSAGE, cause);
	if ((r = remote_open(ctx->fleet, argv[optind], &rm, &cause)) != 0)
		return cmd_fail(-r, cause);
	in = &rm->list[0];
	if (rm->hosts[0].fail != EF_NONE) {
		error("%s: %s", in->name, rm->hosts[0].fail_msg);
		remote_close(rm);
		return GF_EHOSTS;
	}
	if (rm->hosts[0].jump != NULL)
		jin = rm->hosts[0].jump->in;
	if (rm->pinned_type[0] == NULL ||
	    (jin != NULL &&
		rm->jpinned[rm->hosts[0].jump - rm->jhosts] == NULL)) {
		memset(&set, 0, sizeof set);
		set.fanout = 1;
		set.connect_timeout = ctx->fleet->config->connect_timeout;
		set.setup_timeout = ctx->fleet->config->setup_timeout;
		if (remote_run(rm, &set) != 0 || rm->hosts[0].fail != EF_NONE) {
			error("%s: %s", in->name,
			    rm->hosts[0].fail_msg != NULL
				? rm->hosts[0].fail_msg
				: "cannot connect");
			remote_close(rm);
			return GF_EHOSTS;
		}
	}
	if ((r = hostkey_sync(rm->inv, &cause)) != 0) {
		remote_close(rm);
		return cmd_fail(-r, cause);
	}
	kh = hostkey_known_hosts_path(rm->inv);
	status = GF_OK;
	qkh = cfg_arg(kh, &status);
	free(kh);
	id = in->identity != NULL ? in->identity : ctx->fleet->config->identity;
	if (qkh != NULL && id != NULL)
		qid = cfg_arg(id, &status);
	if (jin != NULL && status == GF_OK) {
		id = jin->identity != NULL ? jin->identity
					   : ctx->fleet->config->identity;
		if (id != NULL)
			qjid = cfg_arg(id, &status);
	}
	if (status != GF_OK) {
		free(qkh);
		free(qid);
		remote_close(rm);
		return status;
	}

	args = xcalloc(32, sizeof *args);
	args[n++] = xstrdup(ssh != NULL && *ssh != '\0' ? ssh : "ssh");
	xasprintf(&opt_alias, "HostKeyAlias=%s", in->name);
	xasprintf(&opt_kh, "UserKnownHostsFile=%s", qkh);
	xasprintf(&port, "%d", in->port);
	args[n++] = xstrdup("-o");
	args[n++] = opt_alias;
	args[n++] = xstrdup("-o");
	args[n++] = opt_kh;
	args[n++] = xstrdup("-o");
	args[n++] = xstrdup("GlobalKnownHostsFile=/dev/null");
	args[n++] = xstrdup("-o");
	args[n++] = xstrdup("StrictHostKeyChecking=yes");
	args[n++] = xstrdup("-o");
	args[n++] = xstrdup("UpdateHostKeys=no");
	if (!isatty(STDIN_FILENO)) {
		args[n++] = xstrdup("-o");
		args[n++] = xstrdup("BatchMode=yes");
	}
	args[n++] = xstrdup("-p");
	args[n++] = port;
	args[n++] = xstrdup("-l");
	args[n++] = xstrdup(in->user);
	if (qid != NULL) {
		args[n++] = xstrdup("-o");
		xasprintf(&args[n++], "IdentityFile=%s", qid);
		args[n++] = xstrdup("-o");
		args[n++] = xstrdup("IdentitiesOnly=yes");
	}
	if (jin != NULL) {
		proxy = proxy_command(ssh != NULL && *ssh != '\0' ? ssh : "ssh",
		    jin, in, qkh, qjid);
		args[n++] = xstrdup("-o");
		xasprintf(&args[n++], "ProxyCommand=%s", proxy);
		free(proxy);
	}
	args[n++] = xstrdup(in->host);
	if (dashdash && dashdash + 1 < argc) {
		command = exact
		    ? misc_quote_argv(argc - dashdash - 1, argv + dashdash + 1)
		    : misc_join_argv(argc - dashdash - 1, argv + dashdash + 1);
		args[n++] = xstrdup("--");
		args[n++] = command;
	}
	args[n] = NULL;
	free(qkh);
	free(qid);
	free(qjid);
	name = xstrdup(in->name);
	remote_close(rm);
	fflush(stdout);
	fflush(stderr);
	r = run_ssh(args, &ws);
	if (r != 0)
		error("cannot run %s: %s", args[0], strerror(errno));
	for (k = 0; k < n; k++)
		free(args[k]);
	free(args);
	if (r != 0)
		status = GF_EHOSTS;
	else if (WIFSIGNALED(ws))
		status = 128 + WTERMSIG(ws);
	else {
		status = WEXITSTATUS(ws);
		if (status == 255 && !interrupted)
			changed_hint(ctx, name);
	}
	free(name);
	return status;
}

static void
on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* gpufleet told to stop (kill, a closed terminal): ssh stops too. */
static void
on_terminate(int sig)
{
	int saved = errno;

	interrupted = 1;
	if (child > 0)
		kill((pid_t)child, sig);
	else
		pending = sig;
	errno = saved;
}

/*
 * Run ssh as a child and wait for it (*ws: its wait status). Ctrl-C and
 * Ctrl-\ are ssh's to handle (gpufleet only notes them); SIGTERM and
 * SIGHUP sent to gpufleet alone are passed on, so ssh is never left behind;
 * when ssh stops on its own (~^Z) gpufleet stops with it, so the shell's job
 * control sees the job stopped. Returns 0, or -1 with errno (fork, or exec of
 * args[0], failed).
 */
static int
run_ssh(char **args, int *ws)
{
	struct sigaction sa, oint, oquit, oterm, ohup;
	int p[2], err = 0, st;
	ssize_t got;
	pid_t pid, w;

	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_interrupt;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &oint);
	sigaction(SIGQUIT, &sa, &oquit);
	sa.sa_handler = on_terminate;
	sigaction(SIGTERM, &sa, &oterm);
	sigaction(SIGHUP, &sa, &ohup);
	if ((pid = fork()) == -1) {
		err = errno;
		close(p[0]);
		close(p[1]);
		goto out;
	}
	if (pid == 0) {
		sigaction(SIGINT, &oint, NULL);
		sigaction(SIGQUIT, &oquit, NULL);
		sigaction(SIGTERM, &oterm, NULL);
		sigaction(SIGHUP, &ohup, NULL);
		close(p[0]);
		execvp(args[0], args);
		err = errno;
		got = write(p[1], &err, sizeof err);
		_exit(got == sizeof err ? 127 : 126);
	}
	child = pid;
	if (pending != 0)
		kill(pid, pending);
	close(p[1]);
	while ((got = read(p[0], &err, sizeof err)) == -1 && errno == EINTR)
		;
	close(p[0]);
	if (got != sizeof err)
		err = 0;
	for (;;) {
		if ((w = waitpid(pid, ws, WUNTRACED)) == -1) {
			if (errno == EINTR)
				continue;
			if (err == 0)
				err = errno;
			break;
		}
		if (!WIFSTOPPED(*ws))
			break;
		/*
		 * Stopped with gpufleet by the terminal (both continued by
		 * now): nothing to do. Stopped alone: stop too, then go on.
		 */
		w = waitpid(pid, &st, WNOHANG | WCONTINUED);
		if (w == pid && WIFCONTINUED(st))
			continue;
		if (w == pid) {
			*ws = st;
			break;
		}
		raise(WSTOPSIG(*ws));
		kill(pid, SIGCONT);
	}
	child = 0;
out:
	sigaction(SIGINT, &oint, NULL);
	sigaction(SIGQUIT, &oquit, NULL);
	sigaction(SIGTERM, &oterm, NULL);
	sigaction(SIGHUP, &ohup, NULL);
	errno = err;
	return err != 0 ? -1 : 0;
}

/*
 * After ssh failed: if the instance now presents a key other than the
 * pinned one, say what to run. Other failures are ssh's to report.
 */
static void
changed_hint(struct cmd_ctx *ctx, const char *name)
{
	struct engine_settings set;
	struct remote *rm = NULL;
	char *cause = NULL;

	if (remote_open(ctx->fleet, name, &rm, &cause) != 0) {
		free(cause);
		return;
	}
	if (rm->hosts[0].fail == EF_NONE && rm->pinned_type[0] != NULL) {
		memset(&set, 0, sizeof set);
		set.fanout = 1;
		set.connect_timeout = ctx->fleet->config->connect_timeout;
		set.setup_timeout = ctx->fleet->config->setup_timeout;
		remote_run(rm, &set);
		if (rm->hosts[0].fail == EF_HOSTKEY_CHANGED)
			error("%s (ssh's `ssh-keygen -R` advice does not "
			      "apply: gpufleet writes that known_hosts file "
			      "from its pins)",
			    rm->hosts[0].fail_msg);
	}
	remote_close(rm);
}
