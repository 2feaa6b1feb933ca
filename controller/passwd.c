/*
 * Locking or replacing the login user's password on instances.
 *
 * A lock is ordered so that it cannot lock a user out: a fresh login with
 * the user's key only (that it works is the check before anything
 * changes) reads how the running sshd treats locked accounts and locks the
 * password the way that keeps key login: `passwd -l` (a "!" before the
 * hash) where sshd uses PAM, else `usermod -p '*'` (sshd without PAM
 * refuses a "!"-locked account even by key; on an image without usermod,
 * busybox's, '*' goes through `chpasswd -e`). That session is kept open.
 * Then a second fresh key-only login reads the shadow entry back; if it
 * fails, the old hash is written back at once over the first session
 * (`chpasswd -e`, the hash on its stdin). The old hash is only ever in
 * this process's memory, wiped when the run is over, never stored.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actionlog.h"
#include "log.h"
#include "misc.h"
#include "passwd.h"
#include "status.h"
#include "xmalloc.h"

#define PASSWD_OUT_MAX	  (16 * 1024)
#define PASSWD_RANDOM_LEN 20

struct pwrun {
	struct remote *rm;
	struct engine_host *hosts; /* the array of the run: rm's or a copy */
	struct misc_buf *out;	   /* rm->n */
};

static void on_output(struct engine_host *, int, const char *, size_t, void *);
static int copy_hostkey(struct engine_host *, const char *, const char *,
    const char *, enum engine_fail *, char **, void *);
static const char *copy_hostkey_type(struct engine_host *, void *);
static char *script(const char *);
static void pwrun_start(struct pwrun *, struct remote *, struct passwd_host *);
static void out_reset(struct misc_buf *, size_t);
static void out_free(struct misc_buf *, size_t);
static const char *out_line(const struct misc_buf *, const char *);
static void run(struct pwrun *, struct engine_host *, int, int);
static struct engine_host *copies(struct remote *, const int *);
static void copies_free(struct engine_host *, size_t);
static int prelude_answer(
    struct pwrun *, size_t, struct passwd_host *, const char *);
static char *line_dup(const char *);
static char *no_answer(const struct engine_host *);
static const char *state_of(const struct misc_buf *, char *, size_t);
static void outcome_add(struct passwd_host *, const char *);
static void verify_lock(struct pwrun *, struct passwd_host *, char **);
static void try_password(
    struct pwrun *, struct passwd_host *, const char *, int *);
static char *random_password(void);
static void wipe(char *);

/*
 * The start of every script (the sbin directories, where passwd, usermod,
 * chpasswd and sshd live, last in PATH): the login user ("user NAME"), and S,
 * the prefix that gives root's rights (empty for root, `sudo -n` where sudo
 * needs no password); else "norights NAME" and nothing changes. field()
 * sets f to the user's shadow password field, state() prints whether it
 * reads as locked.
 */
static const char prelude[] =
    "PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin\n"
    "u=$(id -un 2>/dev/null) || u=\n"
    "[ -n \"$u\" ] || { echo 'error cannot tell the login user (id -un)'; "
    "exit 0; }\n"
    "S=\n"
    "if [ \"$(id -u)\" != 0 ]; then\n"
    "\tif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null "
    "2>&1 </dev/null; then\n"
    "\t\tS='sudo -n'\n"
    "\telse\n"
    "\t\techo \"norights $u\"\n"
    "\t\texit 0\n"
    "\tfi\n"
    "fi\n"
    "echo \"user $u\"\n"
    "field() {\n"
    "\tf=$($S awk -F: -v u=\"$u\" '$1 == u { print \"=\" $2; exit }' "
    "/etc/shadow 2>/dev/null </dev/null) || f=\n"
    "\tcase $f in =*) f=${f#=};; *) f=; return 1;; esac\n"
    "}\n"
    "state() {\n"
    "\tif ! field; then echo 'state unreadable'\n"
    "\telse case $f in '!'*|'*'*) echo 'state locked';; *) echo 'state "
    "unlocked';; esac\n"
    "\tfi\n"
    "\tf=\n"
    "}\n";

/*
 * The sshd this session descends from: sx its binary and cf the -f config
 * of the first ancestor that is an sshd (its argv[0], or its title's first
 * word: never a shell whose argv holds this script) and has one; else sx the
 * sshd in PATH (or /usr/sbin/sshd) and cf empty, its default config. sshd_t
 * prints `sshd -T` of that config for this connection (-C from
 * SSH_CONNECTION: Match blocks apply, and a config with Match LocalPort
 * and the like is not refused), with $S's rights.
 */
const char passwd_sshd_lookup[] =
    "q=$PPID sx= cf= i=0\n"
    "while [ \"$i\" -lt 16 ] && [ \"${q:-0}\" -gt 1 ] 2>/dev/null; do\n"
    "\tc=$(tr '\\000' ' ' <\"/proc/$q/cmdline\" 2>/dev/null)\n"
    "\tcase ${c%% *} in\n"
    "\tsshd:|sshd|*/sshd) ;;\n"
    "\t*) c= ;;\n"
    "\tesac\n"
    "\tcase $c in\n"
    "\t*' -f '*)\n"
    "\t\tcf=$(printf '%s\\n' \"$c\" | awk '{ for (i = 1; i < NF; i++) "
    "if ($i == \"-f\") { print $(i + 1); exit } }')\n"
    "\t\tsx=$(printf '%s\\n' \"$c\" | awk '{ for (i = 1; i <= NF; i++) "
    "if ($i ~ /^\\/.*sshd$/) { print $i; exit } }')\n"
    "\t\tbreak;;\n"
    "\tesac\n"
    "\tq=$(awk '$1 == \"PPid:\" { print $2 }' \"/proc/$q/status\" "
    "2>/dev/null)\n"
    "\ti=$((i + 1))\n"
    "done\n"
    "[ -n \"$sx\" ] || sx=$(command -v sshd 2>/dev/null || echo "
    "/usr/sbin/sshd)\n"
    "sshd_t() {\n"
    "\tif [ -n \"$cf\" ]; then set -- -f \"$cf\"; else set --; fi\n"
    "\tif [ -n \"${SSH_CONNECTION:-}\" ]; then\n"
    "\t\tset -- \"$@\" -C \"$(printf '%s\\n' \"$SSH_CONNECTION\" | awk "
    "-v u=\"$(id -un)\" '{ print \"user=\" u \",host=\" $1 \",addr=\" $1 "
    "\",laddr=\" $3 \",lport=\" $4 }')\"\n"
    "\tfi\n"
    "\t${S:-} \"$sx\" -T \"$@\" 2>/dev/null </dev/null\n"
    "}\n";

/*
 * Lock: whether the sshd this session descends from uses PAM (`sshd -T` on
 * its config, passwd_sshd_lookup's; else that file or /etc/ssh's; else
 * OpenSSH's default no), then "already" or "old HASH" and "method M", then
 * the state.
 */
static const char lock_body[] =
    "t=$(sshd_t)\n"
    "p=$(printf '%s\\n' \"$t\" | awk '$1 == \"usepam\" { print "
    "tolower($2); exit }')\n"
    "if [ -z \"$p\" ]; then\n"
    "\tfor c in ${cf:-/etc/ssh/sshd_config.d/*.conf "
    "/etc/ssh/sshd_config}; do\n"
    "\t\t[ -r \"$c\" ] || continue\n"
    "\t\tp=$(awk 'tolower($1) == \"match\" { exit } tolower($1) == "
    "\"usepam\" { print tolower($2); exit }' \"$c\")\n"
    "\t\t[ -z \"$p\" ] || break\n"
    "\tdone\n"
    "fi\n"
    "echo \"usepam ${p:-no}\"\n"
    "field || { echo \"error cannot read the shadow entry of $u\"; exit 0; "
    "}\n"
    "case $f in '!'*|'*'*) f=; echo already; state; exit 0;; esac\n"
    "printf 'old %s\\n' \"$f\"\n"
    "f=\n"
    "if [ \"$p\" = yes ]; then\n"
    "\techo 'method passwd -l'\n"
    "\te=$($S passwd -l \"$u\" 2>&1 >/dev/null </dev/null) || { echo "
    "\"error passwd -l: $e\" | head -n 1; exit 0; }\n"
    "elif command -v usermod >/dev/null 2>&1; then\n"
    "\techo \"method usermod -p '*'\"\n"
    "\te=$($S usermod -p '*' \"$u\" 2>&1 >/dev/null </dev/null) || { "
    "echo \"error usermod: $e\" | head -n 1; exit 0; }\n"
    "else\n"
    "\techo \"method chpasswd -e '*'\"\n"
    "\te=$(printf '%s:*\\n' \"$u\" | $S chpasswd -e 2>&1 >/dev/null) || "
    "{ echo \"error chpasswd -e: $e\" | head -n 1; exit 0; }\n"
    "fi\n"
    "state\n";

/* Read back: the state only (the fresh login is the check). */
static const char show_body[] = "state\n";

/* Undo a lock: the old hash comes on stdin, for chpasswd -e. */
static const char revert_body[] =
    "IFS= read -r h || [ -n \"$h\" ] || { echo 'error no hash'; exit 0; }\n"
    "e=$(printf '%s:%s\\n' \"$u\" \"$h\" | $S chpasswd -e 2>&1 >/dev/null) "
    "|| { h=; echo \"error chpasswd -e: $e\" | head -n 1; exit 0; }\n"
    "h=\n"
    "echo reverted\n"
    "state\n";

/* A new password, on stdin, through chpasswd (never in any argv). */
static const char random_body[] =
    "IFS= read -r h || [ -n \"$h\" ] || { echo 'error no password'; exit "
    "0; }\n"
    "echo 'method chpasswd'\n"
    "e=$(printf '%s:%s\\n' \"$u\" \"$h\" | $S chpasswd 2>&1 >/dev/null) "
    "|| { h=; echo \"error chpasswd: $e\" | head -n 1; exit 0; }\n"
    "h=\n"
    "echo changed\n"
    "state\n";

static void
on_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct pwrun *pr = arg;

	if (!is_stderr)
		misc_buf_add(
		    &pr->out[h - pr->hosts], data, len, PASSWD_OUT_MAX);
}

/* A copy of rm->hosts[i] checks its host key as the original does. */
static int
copy_hostkey(struct engine_host *h, const char *type, const char *b64,
    const char *fp, enum engine_fail *fail, char **msg, void *arg)
{
	struct pwrun *pr = arg;
	struct remote *rm = pr->rm;

	return rm->ops.hostkey(
	    &rm->hosts[h - pr->hosts], type, b64, fp, fail, msg, rm->ops.arg);
}

static const char *
copy_hostkey_type(struct engine_host *h, void *arg)
{
	struct pwrun *pr = arg;
	struct remote *rm = pr->rm;

	return rm->ops.hostkey_type(&rm->hosts[h - pr->hosts], rm->ops.arg);
}

/* `sh -c` of the prelude and body. Caller frees. */
static char *
script(const char *body)
{
	char *s, *q, *cmd;

	xasprintf(&s, "%s%s%s", prelude,
	    body == lock_body ? passwd_sshd_lookup : "", body);
	q = misc_shell_quote(s);
	xasprintf(&cmd, "sh -c %s", q);
	free(q);
	free(s);
	return cmd;
}

/*
 * Empty the n buffers, wiping what they held. Each has room for all it
 * may keep, so nothing it holds is ever left behind by a realloc.
 */
static void
out_reset(struct misc_buf *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (out[i].data == NULL) {
			out[i].size = PASSWD_OUT_MAX + 1;
			out[i].data = xmalloc(out[i].size);
		}
		explicit_bzero(out[i].data, out[i].size);
		out[i].len = 0;
		out[i].truncated = 0;
	}
}

static void
out_free(struct misc_buf *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (out[i].data != NULL)
			explicit_bzero(out[i].data, out[i].size);
		free(out[i].data);
	}
	free(out);
}

/*
 * The rest of the first line of o that starts with word (and a space, or
 * ends there), or NULL. The text is o's, up to the newline.
 */
static const char *
out_line(const struct misc_buf *o, const char *word)
{
	size_t wl = strlen(word);
	const char *p = o->data;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, word, wl) == 0 &&
		    (p[wl] == ' ' || p[wl] == '\n' || p[wl] == '\0'))
			return p[wl] == ' ' ? p + wl + 1 : p + wl;
		if ((p = strchr(p, '\n')) != NULL)
			p++;
	}
	return NULL;
}

/* A copy of out_line's line, up to its newline. Caller frees. */
static char *
line_dup(const char *p)
{
	return xstrndup(p, strcspn(p, "\n"));
}

/*
 * Run hosts (rm->hosts or copies of them; those with skip set stay out):
 * fresh logins or not, sessions kept for the next run or not.
 */
static void
run(struct pwrun *pr, struct engine_host *hosts, int fresh, int keep)
{
	struct remote *rm = pr->rm;
	struct engine_settings set;
	struct engine_ops ops;
	struct engine *e;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		engine_host_clear(&hosts[i]);
		hosts[i].fail = EF_NONE;
		hosts[i].exit_status = -1;
	}
	out_reset(pr->out, rm->n);
	memset(&set, 0, sizeof set);
	set.command = "false";
	set.fanout = rm->fleet->config->fanout;
	set.handshake_window = rm->fleet->config->handshake_window;
	set.connect_timeout = rm->fleet->config->connect_timeout;
	set.setup_timeout = rm->fleet->config->setup_timeout;
	set.command_timeout = 120;
	set.fresh = fresh;
	set.keep_open = keep;
	ops = rm->ops;
	if (hosts != rm->hosts) {
		ops.hostkey = copy_hostkey;
		ops.hostkey_type = copy_hostkey_type;
	}
	ops.output = on_output;
	ops.done = NULL;
	ops.finished = NULL;
	ops.arg = pr;
	pr->hosts = hosts;
	if ((e = remote_engine(rm)) == NULL) {
		for (i = 0; i < rm->n; i++) {
			if (!hosts[i].skip) {
				hosts[i].fail = EF_SSH;
				hosts[i].fail_msg =
				    xstrdup("cannot start the event loop");
			}
		}
		return;
	}
	engine_run(e, hosts, rm->n, &set, &ops);
	remote_run_done(rm);
}

/*
 * Copies of rm's hosts for fresh logins while rm's sessions stay open;
 * those with want[i] 0 are skipped. Free with copies_free.
 */
static struct engine_host *
copies(struct remote *rm, const int *want)
{
	struct engine_host *c = xcalloc(rm->n, sizeof *c);
	size_t i;

	for (i = 0; i < rm->n; i++) {
		c[i].in = rm->hosts[i].in;
		memcpy(c[i].keys, rm->hosts[i].keys, sizeof c[i].keys);
		c[i].nkeys = rm->hosts[i].nkeys;
		c[i].keys_error = rm->hosts[i].keys_error;
		c[i].user = rm;
		c[i].exit_status = -1;
		c[i].skip = !want[i];
	}
	return c;
}

static void
copies_free(struct engine_host *c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		engine_forget(&c[i]);
		engine_host_clear(&c[i]);
		free((char *)c[i].command);
	}
	free(c);
}

/* Why host h gave no answer: its failure, or its exit status. Caller frees. */
static char *
no_answer(const struct engine_host *h)
{
	char *s;

	if (h->fail != EF_NONE)
		return xstrdup(h->fail_msg != NULL ? h->fail_msg : "failed");
	if (h->exit_signal != NULL)
		xasprintf(&s, "the script was killed by SIG%s", h->exit_signal);
	else
		xasprintf(&s, "the script exited %d", h->exit_status);
	return s;
}

/* Read the outcome of a prelude run on host i; 0: it got through. */
static int
prelude_answer(
    struct pwrun *pr, size_t i, struct passwd_host *res, const char *what)
{
	struct engine_host *h = &pr->hosts[i];
	const struct misc_buf *o = &pr->out[i];
	const char *p;
	char *why, *u;

	if ((h->fail != EF_NONE || h->exit_status != 0) &&
	    out_line(o, "method") != NULL) {
		why = no_answer(h);
		xasprintf(&res->outcome,
		    "failed: the session ended while the password was being "
		    "changed (%s): check the account on the console",
		    why);
		free(why);
		return -1;
	}
	if (h->fail != EF_NONE || h->exit_status != 0) {
		why = no_answer(h);
		xasprintf(&res->outcome,
		    "failed: no key login on a fresh connection (%s); "
		    "nothing changed",
		    why);
		free(why);
		return -1;
	}
	if ((p = out_line(o, "norights")) != NULL) {
		u = line_dup(p);
		xasprintf(&res->outcome,
		    "failed: %s is not root and cannot sudo without a "
		    "password, so cannot %s its password; nothing changed "
		    "(log in as root or give %s passwordless sudo; or, as "
		    "root there, run `passwd -l %s` where sshd has UsePAM "
		    "yes, else `usermod -p '*' %s`)",
		    u, what, u, u, u);
		free(u);
		return -1;
	}
	if ((p = out_line(o, "error")) != NULL) {
		u = line_dup(p);
		xasprintf(&res->outcome, "failed: %s", u);
		free(u);
		return -1;
	}
	if (out_line(o, "user") == NULL) {
		res->outcome = xstrdup("failed: the script said nothing");
		return -1;
	}
	return 0;
}

/* The state line of host i's answer, "locked", "unlocked", ... or "?". */
static const char *
state_of(const struct misc_buf *o, char *buf, size_t len)
{
	const char *p = out_line(o, "state");

	if (p == NULL)
		return "?";
	snprintf(buf, len, "%.*s", (int)strcspn(p, "\n"), p);
	return buf;
}

/*
 * After the lock on the hosts in changed (and the already locked): a
 * fresh key-only login reads the state back; where that login fails the
 * old hash (old[i]) goes back over the session the lock kept open.
 */
static void
verify_lock(struct pwrun *pr, struct passwd_host *res, char **old)
{
	struct remote *rm = pr->rm;
	struct engine_host *vh;
	int *want = xcalloc(rm->n, sizeof *want), nrevert = 0;
	char st[32], *why, *tmp, *hash;
	size_t i;

	for (i = 0; i < rm->n; i++)
		want[i] = res[i].ok;
	vh = copies(rm, want);
	for (i = 0; i < rm->n; i++)
		vh[i].command = script(show_body);
	run(pr, vh, 1, 0);
	for (i = 0; i < rm->n; i++) {
		rm->hosts[i].skip = 1;
		if (!want[i])
			continue;
		if (vh[i].fail != EF_NONE || vh[i].exit_status != 0 ||
		    out_line(&pr->out[i], "user") == NULL) {
			why = vh[i].fail == EF_NONE &&
				out_line(&pr->out[i], "user") == NULL &&
				vh[i].exit_status == 0
			    ? xstrdup("no answer")
			    : no_answer(&vh[i]);
			res[i].ok = 0;
			if (old[i] == NULL) {
				free(res[i].outcome);
				xasprintf(&res[i].outcome,
				    "failed: key login on a fresh connection "
				    "(%s)",
				    why);
				free(why);
				continue;
			}
			xasprintf(&tmp,
			    "failed: key login stopped working after %s (%s)",
			    res[i].method, why);
			free(why);
			free(res[i].outcome);
			res[i].outcome = tmp;
			rm->hosts[i].skip = 0;
			nrevert++;
			continue;
		}
		if (strcmp(state_of(&pr->out[i], st, sizeof st), "locked") !=
		    0) {
			res[i].ok = 0;
			free(res[i].outcome);
			xasprintf(&res[i].outcome,
			    "failed: after %s the shadow entry reads %s",
			    res[i].method != NULL ? res[i].method : "the lock",
			    st);
		}
	}
	copies_free(vh, rm->n);
	free(want);
	if (nrevert == 0)
		return;
	/* The sessions the lock kept: only a new channel, no login. */
	for (i = 0; i < rm->n; i++) {
		if (rm->hosts[i].skip)
			continue;
		xasprintf(&hash, "%s\n", old[i]);
		rm->hosts[i].command = script(revert_body);
		rm->hosts[i].stdin_data = hash;
		rm->hosts[i].stdin_len = strlen(hash);
	}
	run(pr, rm->hosts, 0, 0);
	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		if (h->skip)
			continue;
		wipe((char *)h->stdin_data);
		h->stdin_data = NULL;
		h->stdin_len = 0;
		free((char *)h->command);
		h->command = NULL;
		if (h->fail == EF_NONE && h->exit_status == 0 &&
		    out_line(&pr->out[i], "reverted") != NULL) {
			res[i].reverted = 1;
			xasprintf(&tmp,
			    "%s; the old password hash was written back (state "
			    "%s)",
			    res[i].outcome,
			    state_of(&pr->out[i], st, sizeof st));
		} else {
			why = out_line(&pr->out[i], "error") != NULL
			    ? line_dup(out_line(&pr->out[i], "error"))
			    : no_answer(h);
			xasprintf(&tmp,
			    "%s; writing the old hash back FAILED too (%s): "
			    "log in with the console and check the account",
			    res[i].outcome, why);
			free(why);
		}
		free(res[i].outcome);
		res[i].outcome = tmp;
	}
}

/*
 * A fresh login to each host with res[i].ok, by password only: pw, or
 * (pw NULL) the host's new res[i].secret. works[i] is 1 (it logged in), 0
 * (refused) or -1 (could not tell: the host failed otherwise).
 */
static void
try_password(
    struct pwrun *pr, struct passwd_host *res, const char *pw, int *works)
{
	struct remote *rm = pr->rm;
	struct engine_host *ph;
	int *want = xcalloc(rm->n, sizeof *want);
	size_t i;

	for (i = 0; i < rm->n; i++)
		want[i] = res[i].ok && (pw != NULL || res[i].secret != NULL);
	ph = copies(rm, want);
	for (i = 0; i < rm->n; i++) {
		ph[i].nkeys = 0;
		ph[i].password = pw != NULL ? pw : res[i].secret;
		ph[i].command = xstrdup("true");
	}
	run(pr, ph, 1, 0);
	for (i = 0; i < rm->n; i++) {
		if (!want[i])
			works[i] = -1;
		else if (ph[i].fail == EF_NONE && ph[i].exit_status == 0)
			works[i] = 1;
		else if (ph[i].fail == EF_AUTH)
			works[i] = 0;
		else {
			works[i] = -1;
			debug_f("%s: password login: %s", ph[i].in->name,
			    ph[i].fail_msg != NULL ? ph[i].fail_msg : "?");
		}
		ph[i].password = NULL;
	}
	copies_free(ph, rm->n);
	free(want);
}

/* Append ", TEXT" to host i's outcome. */
static void
outcome_add(struct passwd_host *r, const char *text)
{
	char *tmp;

	xasprintf(&tmp, "%s, %s", r->outcome, text);
	free(r->outcome);
	r->outcome = tmp;
}

/*
 * Start a run over rm: each res[i] empty (nothing known of either
 * password), an output buffer per host, secrets kept out of core dumps.
 */
static void
pwrun_start(struct pwrun *pr, struct remote *rm, struct passwd_host *res)
{
	size_t i;

	memset(pr, 0, sizeof *pr);
	pr->rm = rm;
	pr->out = xcalloc(rm->n, sizeof *pr->out);
	misc_secret_hold();
	for (i = 0; i < rm->n; i++) {
		memset(&res[i], 0, sizeof res[i]);
		res[i].old_refused = res[i].new_works = -1;
	}
}

/*
 * Lock the login user's password on every host of rm (see the top of the
 * file); oldpw (or NULL), a password to prove refused afterwards. Hosts
 * with skip set are left alone (their res[i].outcome stays NULL). res:
 * rm->n results, the caller clears them with passwd_host_clear. Returns how
 * many hosts failed.
 */
int
passwd_lock(struct remote *rm, const char *oldpw, struct passwd_host *res)
{
	struct pwrun pr;
	char **old = xcalloc(rm->n, sizeof *old), st[32];
	int *works = xcalloc(rm->n, sizeof *works), nbad = 0;
	int *skip = xcalloc(rm->n, sizeof *skip);
	const char *p;
	size_t i;

	pwrun_start(&pr, rm, res);
	for (i = 0; i < rm->n; i++) {
		if ((skip[i] = rm->hosts[i].skip) == 0)
			rm->hosts[i].command = script(lock_body);
	}
	/* The login that checks the key also locks, and stays open. */
	run(&pr, rm->hosts, 1, 1);
	for (i = 0; i < rm->n; i++) {
		free((char *)rm->hosts[i].command);
		rm->hosts[i].command = NULL;
		if (skip[i] || prelude_answer(&pr, i, &res[i], "lock") != 0)
			continue;
		if (out_line(&pr.out[i], "already") != NULL) {
			res[i].ok = 1;
			xasprintf(&res[i].outcome, "already locked");
			continue;
		}
		if ((p = out_line(&pr.out[i], "method")) != NULL)
			res[i].method = line_dup(p);
		if ((p = out_line(&pr.out[i], "old")) != NULL) {
			old[i] = line_dup(p);
			res[i].changed = 1;
		}
		if (res[i].method == NULL || old[i] == NULL) {
			res[i].outcome = xstrdup("failed: the script said "
						 "nothing of the lock");
			continue;
		}
		res[i].ok = 1;
		xasprintf(&res[i].outcome, "locked (%s)", res[i].method);
		if (strcmp(state_of(&pr.out[i], st, sizeof st), "locked") != 0)
			debug_f("%s: after the lock the state reads %s",
			    rm->hosts[i].in->name, st);
	}
	misc_test_point("passwd:1");
	out_reset(pr.out, rm->n);
	verify_lock(&pr, res, old);
	misc_test_point("passwd:2");
	for (i = 0; i < rm->n; i++) {
		wipe(old[i]);
		if (res[i].ok)
			outcome_add(&res[i],
			    "key login ok on a fresh connection, shadow entry "
			    "locked");
	}
	free(old);
	if (oldpw != NULL) {
		try_password(&pr, res, oldpw, works);
		for (i = 0; i < rm->n; i++) {
			if (!res[i].ok)
				continue;
			res[i].old_refused = works[i] < 0 ? -1 : !works[i];
			if (works[i] == 1) {
				res[i].ok = 0;
				outcome_add(
				    &res[i], "but the password STILL logs in");
			} else if (works[i] == 0)
				outcome_add(&res[i], "password refused");
			else
				outcome_add(&res[i],
				    "password login could not be tried");
		}
	}
	misc_test_point("passwd:3");
	for (i = 0; i < rm->n; i++) {
		engine_forget(&rm->hosts[i]);
		rm->hosts[i].skip = skip[i];
		if (!res[i].ok && !skip[i])
			nbad++;
	}
	free(skip);
	free(works);
	out_free(pr.out, rm->n);
	misc_secret_release();
	return nbad;
}

/* A random password: letters and digits, none easily confused. Caller wipes. */
static char *
random_password(void)
{
	static const char set[] = "abcdefghijkmnopqrstuvwxyz"
				  "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
	char *p = xmalloc(PASSWD_RANDOM_LEN + 1);
	size_t i;

	for (i = 0; i < PASSWD_RANDOM_LEN; i++)
		p[i] = set[arc4random_uniform(sizeof set - 1)];
	p[i] = '\0';
	return p;
}

/*
 * Set a new random password on every host of rm, then check it with a
 * fresh password login (and that oldpw, if not NULL, is refused). Each
 * res[i].secret is the new password where it was set. Returns how many
 * hosts failed.
 */
int
passwd_random(struct remote *rm, const char *oldpw, struct passwd_host *res)
{
	struct pwrun pr;
	int *works = xcalloc(rm->n, sizeof *works), nbad = 0;
	char *in, st[32];
	size_t i;

	pwrun_start(&pr, rm, res);
	for (i = 0; i < rm->n; i++) {
		res[i].secret = random_password();
		xasprintf(&in, "%s\n", res[i].secret);
		rm->hosts[i].command = script(random_body);
		rm->hosts[i].stdin_data = in;
		rm->hosts[i].stdin_len = strlen(in);
		rm->hosts[i].skip = 0;
	}
	run(&pr, rm->hosts, 1, 0);
	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		wipe((char *)h->stdin_data);
		h->stdin_data = NULL;
		h->stdin_len = 0;
		free((char *)h->command);
		h->command = NULL;
		if (prelude_answer(&pr, i, &res[i], "set") != 0 ||
		    out_line(&pr.out[i], "changed") == NULL) {
			if (res[i].outcome == NULL)
				res[i].outcome =
				    xstrdup("failed: chpasswd said nothing");
			wipe(res[i].secret);
			res[i].secret = NULL;
			continue;
		}
		res[i].ok = res[i].changed = 1;
		res[i].method = xstrdup("chpasswd");
		xasprintf(&res[i].outcome, "set (chpasswd), shadow entry %s",
		    state_of(&pr.out[i], st, sizeof st));
	}
	if (oldpw != NULL) {
		try_password(&pr, res, oldpw, works);
		for (i = 0; i < rm->n; i++) {
			if (!res[i].ok)
				continue;
			res[i].old_refused = works[i] < 0 ? -1 : !works[i];
			outcome_add(&res[i],
			    works[i] == 0	? "old password refused"
				: works[i] == 1 ? "but the OLD password STILL "
						  "logs in"
						: "old password could not be "
						  "tried");
			if (works[i] == 1)
				res[i].ok = 0;
		}
	}
	/* The new one, each host its own. */
	for (i = 0; i < rm->n; i++)
		works[i] = -1;
	try_password(&pr, res, NULL, works);
	for (i = 0; i < rm->n; i++) {
		if (res[i].secret == NULL)
			continue;
		res[i].new_works = works[i];
		outcome_add(&res[i],
		    works[i] == 1	? "new password logs in"
			: works[i] == 0 ? "but sshd REFUSED the new password"
					: "new password login could not be "
					  "tried");
		if (works[i] == 0)
			res[i].ok = 0;
	}
	for (i = 0; i < rm->n; i++) {
		engine_forget(&rm->hosts[i]);
		if (!res[i].ok)
			nbad++;
	}
	free(works);
	out_free(pr.out, rm->n);
	misc_secret_release();
	return nbad;
}

/*
 * One action_log row for a run: kind ("passwd_lock", "passwd_random"),
 * why (the command that asked), per host its outcome. No secret goes in.
 */
void
passwd_record(struct remote *rm, const char *kind, const char *why,
    const struct passwd_host *res)
{
	json_t *names = json_array(), *result = json_object();
	char *cause = NULL;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		if (res[i].outcome == NULL)
			continue;
		json_array_append_new(names, json_string(rm->list[i].name));
		json_object_set_new(
		    result, rm->list[i].name, json_string(res[i].outcome));
	}
	if (json_array_size(names) == 0) {
		json_decref(names);
		json_decref(result);
		return;
	}
	if (actionlog_add(rm->inv, (int64_t)time(NULL), kind, NULL, names, why,
		result, NULL, &cause) != 0) {
		error("%s", cause);
		free(cause);
	}
	json_decref(names);
	json_decref(result);
}

/* Wipe and free a secret string (NULL is fine). */
static void
wipe(char *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

void
passwd_host_clear(struct passwd_host *r)
{
	free(r->method);
	free(r->outcome);
	wipe(r->secret);
	memset(r, 0, sizeof *r);
}
