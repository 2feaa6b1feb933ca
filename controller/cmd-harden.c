/*
 * Report how exposed each selected instance is: whether sshd accepts
 * passwords (from `sshd -T` on the config of the sshd serving the session
 * where the login user may run it, else the config files), the authorized_keys
 * entries that are not gpufleet's keys, and private keys in the remote home
 * that anyone can read. With --fix it first does what is safe and reversible
 * (locks the login password as `passwd --lock` does, takes group and world read
 * off private keys) and reports each fix; the rest stays report-only.
 */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actionlog.h"
#include "cmd.h"
#include "engine.h"
#include "keys.h"
#include "log.h"
#include "misc.h"
#include "passwd.h"
#include "remote.h"
#include "status.h"
#include "vis.h"
#include "xmalloc.h"

#define HARDEN_OUT_MAX (256 * 1024)

static int cmd_harden_exec(
    const struct cmd_entry *, struct cmd_ctx *, int, char **);
static void on_output(struct engine_host *, int, const char *, size_t, void *);
static char *probe_script(const char *, int);
static void finding(const char *, ...) __attribute__((format(printf, 1, 2)));
static int report_kbdint(const char *, const char *, const char *, json_t *);
static int report_host(struct remote *, size_t, struct misc_buf *,
    const struct passwd_host *, json_t *);
static int report_lock(const char *, const struct passwd_host *, json_t *);
static void record_fixes(struct remote *, struct misc_buf *);

const struct cmd_entry cmd_harden_entry = {
	.name = "harden",
	.usage = "SELECTOR [--fix] [--json]",
	.summary =
	    "report password login, unmanaged keys, readable private keys",
	.help = "Per instance, reports (and changes nothing):\n"
		"  - whether sshd accepts password logins: `sshd -T` on the "
		"config of the\n"
		"    sshd serving the session (its -f FILE, else the default) "
		"where the\n"
		"    login user may run it, else PasswordAuthentication in "
		"that FILE, or\n"
		"    in /etc/ssh/sshd_config.d/*.conf and /etc/ssh/sshd_config "
		"(OpenSSH's\n"
		"    default is yes), and keyboard-interactive login "
		"(KbdInteractive-\n"
		"    Authentication or ChallengeResponseAuthentication) with "
		"UsePAM yes,\n"
		"    which asks for the password too;\n"
		"  - authorized_keys entries that are not keys gpufleet "
		"manages (each line's\n"
		"    key read as sshd reads it, not a key quoted in an "
		"option);\n"
		"  - private keys in the remote home readable by anyone.\n"
		"--fix first applies what is safe and reversible, each fix "
		"reported:\n"
		"  - locks the login user's password as `gpufleet passwd "
		"--lock` does\n"
		"    (key login checked before and after; undone if it "
		"stops working);\n"
		"  - takes group and world read off private keys (regular "
		"files, never\n"
		"    through a symlink, that start as PEM or OpenSSH private "
		"keys) in\n"
		"    ~/.ssh and the top of the remote home (chmod go-r).\n"
		"  The sshd settings and unmanaged keys stay report-only.\n"
		"--json: one object per instance; with --fix also "
		"\"fixed_keys\" (path,\n"
		"mode before, mode after) and \"password_lock\" (ok, method, "
		"outcome).\n"
		"Exit status 1 when any instance has a finding (after the "
		"fixes) or fails.\n",
	.exec = cmd_harden_exec,
};

static const struct option harden_options[] = {
	{ "fix", no_argument, NULL, 'f' },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void
on_output(struct engine_host *h, int is_stderr, const char *data, size_t len,
    void *arg)
{
	struct remote *rm = h->user;
	struct misc_buf *o = &((struct misc_buf *)arg)[h - rm->hosts];

	if (!is_stderr)
		misc_buf_add(o, data, len, HARDEN_OUT_MAX);
}

/*
 * The probe, one POSIX sh script: "password VALUE SOURCE", "kbdint VALUE
 * SOURCE" (KbdInteractiveAuthentication, else its old name
 * ChallengeResponseAuthentication), "usepam VALUE SOURCE", then "key LINE"
 * per authorized_keys line, then "readable PATH" per exposed private key.
 * With fix, first "fixed MODE MODE PATH" (or "unfixed PATH") per private
 * key in ~/.ssh or the top of the home that lost its group and world read:
 * regular files only (find -P never follows a symlink, the start points
 * included), each read for a PEM or OpenSSH private key's first line.
 * Caller frees.
 */
static char *
probe_script(const char *akpath, int fix)
{
	static const char fixes[] =
	    "find \"$HOME\" \"$HOME/.ssh\" -maxdepth 1 -type f \\( -perm -040 "
	    "-o -perm -004 \\) ! -name '*.pub' 2>/dev/null |\n"
	    "while IFS= read -r f; do\n"
	    "\t[ -f \"$f\" ] && [ ! -L \"$f\" ] || continue\n"
	    "\thead -c 8192 -- \"$f\" 2>/dev/null | grep -q -e '-----BEGIN "
	    "[A-Z0-9 ]*PRIVATE KEY-----' || continue\n"
	    "\tm=$(stat -c %a -- \"$f\" 2>/dev/null)\n"
	    "\tif chmod go-r -- \"$f\" 2>/dev/null; then\n"
	    "\t\techo \"fixed $m $(stat -c %a -- \"$f\" 2>/dev/null) $f\"\n"
	    "\telse\n"
	    "\t\techo \"unfixed $f\"\n"
	    "\tfi\n"
	    "done\n";
	static const char body[] =
	    "t= src=\n"
	    "t=$(sshd_t) && src=\"sshd -T${cf:+ -f $cf}\"\n"
	    "[ -n \"$t\" ] || { t= src=; }\n"
	    "# opt KEYWORD DEFAULT: its value and where it came from; the "
	    "first\n"
	    "# value counts, as in sshd.\n"
	    "opt() {\n"
	    "\tif [ -n \"$src\" ]; then\n"
	    "\t\tv=$(printf '%s\\n' \"$t\" | awk -v k=\"$1\" '$1 == k { "
	    "print tolower($2); exit }')\n"
	    "\t\t[ -n \"$v\" ] && { echo \"$v $src\"; return; }\n"
	    "\telse\n"
	    "\t\tfor f in ${cf:-/etc/ssh/sshd_config.d/*.conf "
	    "/etc/ssh/sshd_config}; do\n"
	    "\t\t\t[ -r \"$f\" ] || continue\n"
	    "\t\t\tv=$(awk -v k=\"$1\" 'tolower($1) == \"match\" { exit } "
	    "tolower($1) == k { print tolower($2); exit }' \"$f\")\n"
	    "\t\t\t[ -n \"$v\" ] && { echo \"$v $f\"; return; }\n"
	    "\t\tdone\n"
	    "\tfi\n"
	    "\techo \"$2 default\"\n"
	    "}\n"
	    "echo \"password $(opt passwordauthentication yes)\"\n"
	    "k=$(opt kbdinteractiveauthentication '')\n"
	    "case $k in ' '*) k=$(opt challengeresponseauthentication yes);; "
	    "esac\n"
	    "echo \"kbdint $k\"\n"
	    "echo \"usepam $(opt usepam no)\"\n"
	    "[ ! -f \"$ak\" ] || sed 's/^/key /' -- \"$ak\"\n"
	    "echo\n"
	    "find \"$HOME\" -maxdepth 3 -type f \\( -name 'id_*' -o -name "
	    "'*.pem' -o -name '*.key' \\) ! -name '*.pub' -perm -004 "
	    "2>/dev/null | sed 's/^/readable /'\n"
	    "exit 0\n";
	char *qpath = misc_quote_path(akpath), *script, *q, *cmd;

	xasprintf(&script, "ak=%s\n%s%s%s", qpath, fix ? fixes : "",
	    passwd_sshd_lookup, body);
	q = misc_shell_quote(script);
	xasprintf(&cmd, "sh -c %s", q);
	free(q);
	free(script);
	free(qpath);
	return cmd;
}

/*
 * Keyboard-interactive login with UsePAM yes asks for the password too:
 * one finding (printed, or set in j) or none. kbd and pam are "VALUE
 * SOURCE" from the probe, or NULL.
 */
/* Print one finding line; it quotes the host's own text, so escaped. */
static void
finding(const char *fmt, ...)
{
	va_list ap;
	char *msg, *safe;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	msg[strcspn(msg, "\n")] = '\0';
	safe = vis_str(msg);
	printf("%s\n", safe);
	free(safe);
	free(msg);
}

static int
report_kbdint(const char *name, const char *kbd, const char *pam, json_t *j)
{
	size_t kl = kbd != NULL ? strcspn(kbd, " ") : 0;
	size_t pl = pam != NULL ? strcspn(pam, " ") : 0;
	int on = kl == 3 && strncmp(kbd, "yes", 3) == 0 && pl == 3 &&
	    strncmp(pam, "yes", 3) == 0;

	if (j != NULL)
		json_object_set_new(j, "kbd_interactive_pam", json_boolean(on));
	else if (on)
		finding("%s: password login: keyboard-interactive with UsePAM "
			"yes (%s; %s)\n",
		    name, kbd[kl] != '\0' ? kbd + kl + 1 : "?",
		    pam[pl] != '\0' ? pam + pl + 1 : "?");
	return on;
}

/* Print one host's findings; returns how many. */
static int
report_host(struct remote *rm, size_t i, struct misc_buf *o,
    const struct passwd_host *lock, json_t *arr)
{
	const char *name = rm->hosts[i].in->name, *opts, *type, *blob, *comment;
	char *line, *save = NULL, *buf, *cause = NULL, *copy, *kbd = NULL;
	char *pam = NULL;
	json_t *j = NULL, *unmanaged = NULL, *readable = NULL, *fixed = NULL;
	int findings = 0, m;

	if (arr != NULL) {
		j = json_object();
		json_object_set_new(j, "name", json_string(name));
		unmanaged = json_array();
		readable = json_array();
		fixed = json_array();
	}
	if (lock != NULL)
		findings += report_lock(name, lock, j);
	copy = xstrdup(o->data != NULL ? o->data : "");
	for (line = strtok_r(copy, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "password ", 9) == 0) {
			char *v = line + 9, *src = strchr(v, ' ');
			if (src != NULL)
				*src++ = '\0';
			if (strcmp(v, "no") != 0) {
				findings++;
				if (j == NULL)
					finding("%s: password login: %s (%s)\n",
					    name, v, src != NULL ? src : "?");
			}
			if (j != NULL) {
				json_object_set_new(j,
				    "password_authentication", json_string(v));
				json_object_set_new(j, "password_source",
				    json_string(src != NULL ? src : ""));
			}
		} else if (strncmp(line, "kbdint ", 7) == 0) {
			free(kbd);
			kbd = xstrdup(line + 7);
		} else if (strncmp(line, "usepam ", 7) == 0) {
			free(pam);
			pam = xstrdup(line + 7);
		} else if (strncmp(line, "key ", 4) == 0) {
			/* The line's key as sshd reads it, never an option. */
			if (keys_parse_line(line + 4, &buf, &opts, &type, &blob,
				&comment) == 0) {
				m = keys_is_managed_blob(rm->inv, blob, &cause);
				free(cause);
				cause = NULL;
				if (m == 0) {
					findings++;
					if (j == NULL)
						finding(
						    "%s: key not managed by "
						    "gpufleet: %s %.16s... "
						    "%s\n",
						    name, type, blob, comment);
					else
						json_array_append_new(unmanaged,
						    json_string(line + 4));
				}
			}
			free(buf);
		} else if (strncmp(line, "fixed ", 6) == 0) {
			char *m0 = line + 6, *m1, *path;
			if ((m1 = strchr(m0, ' ')) == NULL ||
			    (path = strchr(m1 + 1, ' ')) == NULL)
				continue;
			*m1++ = '\0';
			*path++ = '\0';
			if (j == NULL)
				finding("%s: fixed: private key %s was "
					"readable by others, mode %s -> "
					"%s\n",
				    name, path, m0, m1);
			else
				json_array_append_new(fixed,
				    json_pack("{s:s, s:s, s:s}", "path", path,
					"mode_before", m0, "mode_after", m1));
		} else if (strncmp(line, "unfixed ", 8) == 0) {
			findings++;
			if (j == NULL)
				finding("%s: could not fix: private key %s "
					"readable by others (chmod go-r "
					"failed)\n",
				    name, line + 8);
		} else if (strncmp(line, "readable ", 9) == 0) {
			findings++;
			if (j == NULL)
				finding("%s: private key readable by anyone: "
					"%s\n",
				    name, line + 9);
			else
				json_array_append_new(
				    readable, json_string(line + 9));
		}
	}
	free(copy);
	findings += report_kbdint(name, kbd, pam, j);
	free(kbd);
	free(pam);
	if (j != NULL) {
		json_object_set_new(j, "unmanaged_keys", unmanaged);
		json_object_set_new(j, "readable_private_keys", readable);
		if (lock != NULL)
			json_object_set_new(j, "fixed_keys", fixed);
		else
			json_decref(fixed);
		json_object_set_new(j, "error", json_null());
		json_array_append_new(arr, j);
	} else if (findings == 0)
		finding("%s: ok\n", name);
	return findings;
}

/* The password lock of harden --fix: a fix, or a finding (returns 1). */
static int
report_lock(const char *name, const struct passwd_host *r, json_t *j)
{
	if (j != NULL)
		json_object_set_new(j, "password_lock",
		    json_pack("{s:b, s:s?, s:s}", "ok", r->ok, "method",
			r->method, "outcome",
			r->outcome != NULL ? r->outcome : ""));
	else if (r->ok && r->changed)
		finding("%s: fixed: password %s\n", name, r->outcome);
	else if (r->ok)
		finding("%s: password %s\n", name, r->outcome);
	else
		finding("%s: could not lock the password: %s\n", name,
		    r->outcome != NULL ? r->outcome : "?");
	return !r->ok;
}

/* One action_log row of the private keys that --fix made private. */
static void
record_fixes(struct remote *rm, struct misc_buf *outs)
{
	json_t *names = json_array(), *result = json_object();
	char *cause = NULL, *copy, *line, *save, *what, *tmp, *m1, *path;
	size_t i;

	for (i = 0; i < rm->n; i++) {
		what = NULL;
		copy = xstrdup(outs[i].data != NULL ? outs[i].data : "");
		save = NULL;
		for (line = strtok_r(copy, "\n", &save); line != NULL;
		     line = strtok_r(NULL, "\n", &save)) {
			if (strncmp(line, "fixed ", 6) != 0 ||
			    (m1 = strchr(line + 6, ' ')) == NULL ||
			    (path = strchr(m1 + 1, ' ')) == NULL)
				continue;
			*m1++ = '\0';
			*path++ = '\0';
			xasprintf(&tmp, "%s%schmod go-r %s (%s -> %s)",
			    what != NULL ? what : "", what != NULL ? ", " : "",
			    path, line + 6, m1);
			free(what);
			what = tmp;
		}
		free(copy);
		if (what == NULL)
			continue;
		json_array_append_new(names, json_string(rm->list[i].name));
		json_object_set_new(
		    result, rm->list[i].name, json_string(what));
		free(what);
	}
	if (json_array_size(names) > 0 &&
	    actionlog_add(rm->inv, (int64_t)time(NULL), "harden_fix", NULL,
		names, "private keys readable by others", result, NULL,
		&cause) != 0) {
		error("%s", cause);
		free(cause);
	}
	json_decref(names);
	json_decref(result);
}

static int
cmd_harden_exec(
    const struct cmd_entry *e, struct cmd_ctx *ctx, int argc, char **argv)
{
	struct remote *rm = NULL;
	struct engine_settings set;
	struct misc_buf *outs = NULL;
	struct keys_key k;
	ssh_key *managed = NULL;
	struct passwd_host *locks = NULL;
	char **failed = NULL;
	json_t *arr = NULL, *j;
	char *cause = NULL;
	const char *pass;
	size_t i;
	int64_t kid;
	int ch, status, r, json = 0, fix = 0, bad = 0;

	while ((ch = cmd_getopt(e, argc, argv, "h", harden_options, &status)) !=
	    -1) {
		if (ch == -2)
			return status;
		if (ch == 'f')
			fix = 1;
		else
			json = 1;
	}
	if (argc - optind != 1)
		return cmd_usage_error(e, "needs one SELECTOR");
	pass = keys_passphrase(ctx->fleet->config, &cause);
	if (cause != NULL)
		return cmd_fail(GF_EUSAGE, cause);
	if ((r = remote_open(ctx->fleet, argv[optind], &rm, &cause)) != 0) {
		keys_passphrase_clear();
		return cmd_fail(-r, cause);
	}
	outs = xcalloc(rm->n, sizeof *outs);
	managed = xcalloc(rm->n, sizeof *managed);
	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		h->command = probe_script(h->in->authorized_keys_file, fix);
		/* Log in with the managed key where there is one. */
		if (keys_instance_key(rm->inv, h->in->id, &kid, &cause) == 0 &&
		    keys_get(rm->inv, kid, &k, &cause) == 0) {
			if (keys_load(k.path, pass, &managed[i], &cause) == 0) {
				h->keys[0] = managed[i];
				h->nkeys = 1;
			}
			keys_key_clear(&k);
		}
		free(cause);
		cause = NULL;
	}
	memset(&set, 0, sizeof set);
	set.command = "true";
	set.fanout = ctx->fleet->config->fanout;
	set.handshake_window = ctx->fleet->config->handshake_window;
	set.connect_timeout = ctx->fleet->config->connect_timeout;
	set.setup_timeout = ctx->fleet->config->setup_timeout;
	set.command_timeout = 120;
	set.handle_sigint = 1;
	rm->ops.output = on_output;
	rm->ops.arg = outs;
	remote_run(rm, &set);
	/* Why each host failed the probe (a later lock run resets it). */
	failed = xcalloc(rm->n, sizeof *failed);
	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		free((char *)h->command);
		h->command = NULL;
		if (h->fail != EF_NONE || h->exit_status != 0)
			failed[i] = xstrdup(
			    h->fail_msg != NULL ? h->fail_msg : "probe failed");
	}
	if (fix) {
		record_fixes(rm, outs);
		/* The same lock as passwd --lock, on the hosts that answered.
		 */
		locks = xcalloc(rm->n, sizeof *locks);
		for (i = 0; i < rm->n; i++)
			rm->hosts[i].skip = failed[i] != NULL;
		misc_signals_defer(); /* as passwd --lock: until the end */
		passwd_lock(rm, NULL, locks);
		passwd_record(rm, "passwd_lock", "harden --fix", locks);
	}
	if (json)
		arr = json_array();
	for (i = 0; i < rm->n; i++) {
		struct engine_host *h = &rm->hosts[i];
		if (failed[i] != NULL) {
			bad = 1;
			if (arr != NULL) {
				j = json_object();
				json_object_set_new(
				    j, "name", json_string(h->in->name));
				json_object_set_new(
				    j, "error", json_string(failed[i]));
				json_array_append_new(arr, j);
			} else
				cmd_print_failed(h->in->name, failed[i]);
			continue;
		}
		if (report_host(rm, i, &outs[i],
			locks != NULL ? &locks[i] : NULL, arr) > 0)
			bad = 1;
	}
	if (arr != NULL)
		json_print(arr, stdout);
	status = bad ? GF_EHOSTS : GF_OK;
	for (i = 0; i < rm->n; i++) {
		free(outs[i].data);
		free(failed[i]);
		rm->hosts[i].skip = 0;
		ssh_key_free(managed[i]);
		if (locks != NULL)
			passwd_host_clear(&locks[i]);
	}
	free(locks);
	free(failed);
	free(outs);
	free(managed);
	keys_passphrase_clear();
	remote_close(rm);
	misc_signals_resume();
	return status;
}
