/* Reading config.ini with inih, with file:line in every complaint. */

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <ini.h>

#include "config.h"
#include "billing.h"
#include "cron.h"
#include "engine.h"
#include "instance.h"
#include "misc.h"
#include "notify.h"
#include "stopmethod.h"
#include "vis.h"
#include "xmalloc.h"

struct parse_state {
	struct config *config;
	struct config_input in;
};

static int handler(void *, const char *, const char *, const char *);
static int parse_int(const char *, int, int, int *);
static int parse_seconds(const char *, int, int, int *);
static void set_optional(char **, const char *);
static void set_path(char **, const char *);
static int set_other(
    struct parse_state *, const char *, const char *, const char *);
static int set_notify(
    struct parse_state *, const char *, const char *, const char *);
static int check_notifies(struct parse_state *);
static int set_provider(
    struct parse_state *, const char *, const char *, const char *);

void
config_defaults(struct config *c)
{
	memset(c, 0, sizeof *c);
	c->user = xstrdup(INSTANCE_DEFAULT_USER);
	c->connect_timeout = 10;
	c->setup_timeout = 30;
	c->command_timeout = 0;
	c->agent_timeout = 10;
	c->fanout = 256;
	c->hostkey_policy = HOSTKEY_ACCEPT_NEW;
	c->handshake_window = ENGINE_WINDOW_AUTO;
	c->status_raw_hours = 48;
	c->status_agg_days = 90;
	c->status_journal_days = 90;
	c->status_idle_util = 5;
	c->status_stale_minutes = 30;
	c->status_stop_confirm = 180;
	c->status_timeout = 20;
	c->daemon_poll_interval = 60;
	c->daemon_stop_grace = 20;
	c->daemon_runs_keep_days = 14;
	c->db_backup_keep = 7;
	snprintf(c->daemon_listen.addr, sizeof c->daemon_listen.addr, "%s",
	    CONFIG_LISTEN_ADDR);
	c->daemon_listen.port = CONFIG_LISTEN_PORT;
	c->notify_host_down_after = 600;
	c->notify_release_warn = 2 * 86400;
}

void
config_clear(struct config *c)
{
	size_t i;

	free(c->path);
	free(c->user);
	free(c->identity);
	free(c->progress_file);
	free(c->nvidia_smi);
	free(c->keys_passphrase_file);
	free(c->schedule_tz);
	free(c->daemon_token_file);
	for (i = 0; i < c->nstops; i++) {
		free(c->stops[i].provider);
		free(c->stops[i].command);
		free(c->stops[i].kind);
	}
	free(c->stops);
	for (i = 0; i < c->nnotifies; i++) {
		free(c->notifies[i].name);
		free(c->notifies[i].url);
		free(c->notifies[i].url_file);
		free(c->notifies[i].secret_file);
		free(c->notifies[i].ca_file);
	}
	free(c->notifies);
	memset(c, 0, sizeof *c);
}

/* The default config path. Caller frees. */
char *
config_default_path(void)
{
	return misc_xdg_path(
	    "XDG_CONFIG_HOME", ".config", "gpufleet/config.ini");
}

static int
parse_int(const char *s, int min, int max, int *out)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end != '\0' || errno == ERANGE || v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

/* inih callback: returns 0 (an error at this line) on a bad key or value. */
/* The integer settings: section, key, range and where they go. */
static const struct config_int {
	const char *section, *key;
	int min, max;
	size_t off;
} config_ints[] = {
	{ "ssh", "connect_timeout", 1, 3600,
	    offsetof(struct config, connect_timeout) },
	{ "ssh", "setup_timeout", 1, 3600,
	    offsetof(struct config, setup_timeout) },
	{ "ssh", "command_timeout", 0, 604800,
	    offsetof(struct config, command_timeout) },
	{ "ssh", "fanout", 1, 65536, offsetof(struct config, fanout) },
	{ "ssh", "agent_timeout", 1, 3600,
	    offsetof(struct config, agent_timeout) },
	{ "status", "raw_retention_hours", 1, 24 * 365,
	    offsetof(struct config, status_raw_hours) },
	{ "status", "aggregate_retention_days", 1, 3650,
	    offsetof(struct config, status_agg_days) },
	{ "status", "journal_retention_days", 1, 3650,
	    offsetof(struct config, status_journal_days) },
	{ "status", "idle_util_percent", 0, 100,
	    offsetof(struct config, status_idle_util) },
	{ "status", "stale_progress_minutes", 1, 100000,
	    offsetof(struct config, status_stale_minutes) },
	{ "status", "stop_confirm_seconds", 1, 86400,
	    offsetof(struct config, status_stop_confirm) },
	{ "status", "timeout", 5, 3600,
	    offsetof(struct config, status_timeout) },
	{ "daemon", "poll_interval", 1, 86400,
	    offsetof(struct config, daemon_poll_interval) },
	{ "daemon", "stop_grace", 0, 3600,
	    offsetof(struct config, daemon_stop_grace) },
	{ "daemon", "runs_keep_days", 0, 36500,
	    offsetof(struct config, daemon_runs_keep_days) },
	{ "db", "backup_keep", 1, 10000,
	    offsetof(struct config, db_backup_keep) },
};

/* Replace *dst by value, or NULL when value is empty. */
static void
set_optional(char **dst, const char *value)
{
	free(*dst);
	*dst = *value != '\0' ? xstrdup(value) : NULL;
}

/* Like set_optional, a leading ~/ for $HOME. */
static void
set_path(char **dst, const char *value)
{
	free(*dst);
	*dst = *value != '\0' ? misc_expand_home(value) : NULL;
}

/*
 * The settings that are not integers. Returns 1 when set, 0 on an error
 * (ps->in.error set), -1 when section.key is not one of them.
 */
static int
set_other(struct parse_state *ps, const char *section, const char *key,
    const char *value)
{
	struct config *c = ps->config;
	char *why = NULL;

	if (strcmp(section, "defaults") == 0 && strcmp(key, "user") == 0) {
		if (instance_check_user(value, &why) != 0) {
			xasprintf(&ps->in.error, "%s: %s", key, why);
			free(why);
			return 0;
		}
		free(c->user);
		c->user = xstrdup(value);
		return 1;
	}
	if (strcmp(section, "defaults") == 0 && strcmp(key, "identity") == 0) {
		set_optional(&c->identity, value);
		return 1;
	}
	if (strcmp(section, "ssh") == 0 &&
	    strcmp(key, "host_key_policy") == 0) {
		if (strcmp(value, "accept-new") == 0)
			c->hostkey_policy = HOSTKEY_ACCEPT_NEW;
		else if (strcmp(value, "strict") == 0)
			c->hostkey_policy = HOSTKEY_STRICT;
		else {
			xasprintf(&ps->in.error,
			    "host_key_policy '%s' must be accept-new or strict",
			    value);
			return 0;
		}
		return 1;
	}
	if (strcmp(section, "ssh") == 0 &&
	    strcmp(key, "handshake_window") == 0) {
		if (strcmp(value, "auto") == 0)
			c->handshake_window = ENGINE_WINDOW_AUTO;
		else if (strcmp(value, "off") == 0)
			c->handshake_window = ENGINE_WINDOW_OFF;
		else if (parse_int(value, 1, 65536, &c->handshake_window) !=
		    0) {
			xasprintf(&ps->in.error,
			    "handshake_window '%s' must be auto, off or a "
			    "number from 1 to 65536",
			    value);
			return 0;
		}
		return 1;
	}
	if (strcmp(section, "status") == 0 &&
	    (strcmp(key, "progress_file") == 0 ||
		strcmp(key, "nvidia_smi") == 0)) {
		if (strpbrk(value, " \t'\"\\$`;&|<>(){}*?[]!#") != NULL) {
			xasprintf(&ps->in.error,
			    "%s '%s' may not contain blanks or shell "
			    "characters",
			    key, value);
			return 0;
		}
		set_optional(
		    key[0] == 'p' ? &c->progress_file : &c->nvidia_smi, value);
		return 1;
	}
	if (strcmp(section, "keys") == 0 &&
	    strcmp(key, "passphrase_file") == 0) {
		set_optional(&c->keys_passphrase_file, value);
		return 1;
	}
	if (strcmp(section, "schedule") == 0 && strcmp(key, "tz") == 0) {
		if (cron_check_tz(value, &why) != 0) {
			xasprintf(&ps->in.error, "tz: %s", why);
			free(why);
			return 0;
		}
		set_optional(&c->schedule_tz, value);
		return 1;
	}
	if (strcmp(section, "daemon") == 0 && strcmp(key, "listen") == 0) {
		if (config_parse_listen(value, &c->daemon_listen, &why) != 0) {
			xasprintf(&ps->in.error, "listen: %s", why);
			free(why);
			return 0;
		}
		return 1;
	}
	if (strcmp(section, "daemon") == 0 && strcmp(key, "token_file") == 0) {
		set_path(&c->daemon_token_file, value);
		return 1;
	}
	if (strcmp(section, "notify") == 0 &&
	    strcmp(key, "host_down_after") == 0) {
		if (parse_seconds(value, 1, 30 * 86400,
			&c->notify_host_down_after) != 0) {
			xasprintf(&ps->in.error,
			    "host_down_after '%s' must be a duration from 1s "
			    "to 30d (10m, 1h30m)",
			    value);
			return 0;
		}
		return 1;
	}
	if (strcmp(section, "notify") == 0 &&
	    strcmp(key, "release_warn") == 0) {
		if (parse_seconds(
			value, 1, 30 * 86400, &c->notify_release_warn) != 0) {
			xasprintf(&ps->in.error,
			    "release_warn '%s' must be a duration from 1s to "
			    "30d (2d, 12h)",
			    value);
			return 0;
		}
		return 1;
	}
	return -1;
}

/* A duration (2w3d1h30m90s, billing_parse_duration) in [min, max] s. */
static int
parse_seconds(const char *value, int min, int max, int *out)
{
	char *why = NULL;
	int64_t v;

	if (billing_parse_duration(value, &v, &why) != 0) {
		free(why);
		return -1;
	}
	if (v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

/* The [notify.NAME] target of that name, or NULL. */
const struct config_notify *
config_notify(const struct config *c, const char *name)
{
	size_t i;

	for (i = 0; c != NULL && i < c->nnotifies; i++) {
		if (strcmp(c->notifies[i].name, name) == 0)
			return &c->notifies[i];
	}
	return NULL;
}

/* One key of a [notify.NAME] section. */
static int
set_notify(struct parse_state *ps, const char *name, const char *key,
    const char *value)
{
	struct config *c = ps->config;
	struct config_notify *n =
	    (struct config_notify *)config_notify(c, name);
	char *why = NULL;
	int v;

	if (*name == '\0' || strlen(name) > 64 ||
	    strspn(name,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789._-") != strlen(name)) {
		xasprintf(&ps->in.error,
		    "bad target name in [notify.%s] (letters, digits, . _ -)",
		    name);
		return 0;
	}
	if (n == NULL) {
		c->notifies = xreallocarray(
		    c->notifies, c->nnotifies + 1, sizeof *c->notifies);
		n = &c->notifies[c->nnotifies++];
		memset(n, 0, sizeof *n);
		n->name = xstrdup(name);
		n->format = NOTIFY_FORMAT_JSON;
		n->events = NOTIFY_EVENTS_ALL;
		n->timeout = 10;
		n->retries = 5;
		n->line = ps->in.line;
	}
	if (strcmp(key, "url") == 0) {
		if (notify_url_check(value, &why) != 0) {
			xasprintf(&ps->in.error, "url: %s", why);
			free(why);
			return 0;
		}
		set_optional(&n->url, value);
	} else if (strcmp(key, "url_file") == 0)
		set_path(&n->url_file, value);
	else if (strcmp(key, "secret_file") == 0)
		set_path(&n->secret_file, value);
	else if (strcmp(key, "ca_file") == 0)
		set_path(&n->ca_file, value);
	else if (strcmp(key, "format") == 0) {
		if ((v = notify_format_parse(value)) < 0) {
			xasprintf(&ps->in.error,
			    "format '%s' must be json, slack, discord, feishu, "
			    "dingtalk or ntfy",
			    value);
			return 0;
		}
		n->format = v;
	} else if (strcmp(key, "events") == 0) {
		if (notify_events_parse(value, &n->events, &why) != 0) {
			xasprintf(&ps->in.error, "events: %s", why);
			free(why);
			return 0;
		}
	} else if (strcmp(key, "min_interval") == 0) {
		if (parse_seconds(value, 0, 86400, &n->min_interval) != 0) {
			xasprintf(&ps->in.error,
			    "min_interval '%s' must be a duration up to 1d "
			    "(0, 3s, 1m)",
			    value);
			return 0;
		}
		n->min_interval_set = 1;
	} else if (strcmp(key, "timeout") == 0) {
		if (parse_seconds(value, 1, 600, &n->timeout) != 0) {
			xasprintf(&ps->in.error,
			    "timeout '%s' must be a duration from 1s to 10m",
			    value);
			return 0;
		}
	} else if (strcmp(key, "retries") == 0) {
		if (parse_int(value, 0, 100, &n->retries) != 0) {
			xasprintf(&ps->in.error,
			    "retries = '%s' is not a number from 0 to 100",
			    value);
			return 0;
		}
	} else if (strcmp(key, "from_instances") == 0) {
		if (strcmp(value, "yes") == 0)
			n->from_instances = 1;
		else if (strcmp(value, "no") == 0)
			n->from_instances = 0;
		else {
			xasprintf(&ps->in.error,
			    "from_instances '%s' must be yes or no", value);
			return 0;
		}
	} else {
		xasprintf(&ps->in.error,
		    "unknown key '%s' in [notify.%s] (known: url, url_file, "
		    "format, secret_file, events, min_interval, ca_file, "
		    "timeout, retries, from_instances)",
		    key, name);
		return 0;
	}
	return 1;
}

/*
 * What a target needs once its section is read: a URL (one of url and
 * url_file), and DingTalk's own limit of 20 messages a minute as its
 * default spacing.
 */
static int
check_notifies(struct parse_state *ps)
{
	struct config_notify *n;
	size_t i;

	for (i = 0; i < ps->config->nnotifies; i++) {
		n = &ps->config->notifies[i];
		ps->in.error_line = n->line;
		if ((n->url == NULL) == (n->url_file == NULL)) {
			xasprintf(&ps->in.error,
			    "[notify.%s] needs one of url and url_file",
			    n->name);
			return -1;
		}
		if (n->secret_file != NULL &&
		    n->format != NOTIFY_FORMAT_FEISHU &&
		    n->format != NOTIFY_FORMAT_DINGTALK) {
			xasprintf(&ps->in.error,
			    "[notify.%s]: secret_file is for the feishu and "
			    "dingtalk formats only",
			    n->name);
			return -1;
		}
		if (!n->min_interval_set && n->format == NOTIFY_FORMAT_DINGTALK)
			n->min_interval = NOTIFY_DINGTALK_INTERVAL;
	}
	return 0;
}

/* The [provider.NAME] override of a provider, or NULL. */
const struct config_stop *
config_stop(const struct config *c, const char *provider)
{
	size_t i;

	for (i = 0; c != NULL && i < c->nstops; i++) {
		if (strcmp(c->stops[i].provider, provider) == 0)
			return &c->stops[i];
	}
	return NULL;
}

/* A key of a [provider.NAME] section: stop_command or stop_kind. */
static int
set_provider(struct parse_state *ps, const char *name, const char *key,
    const char *value)
{
	struct config *c = ps->config;
	struct config_stop *cs = (struct config_stop *)config_stop(c, name);
	enum stopmethod_where where;
	const char *cmd;
	char *why = NULL;

	if (*name == '\0' ||
	    strspn(name,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789._-") != strlen(name)) {
		xasprintf(
		    &ps->in.error, "bad provider name in [provider.%s]", name);
		return 0;
	}
	if (strcmp(key, "stop_command") == 0 &&
	    stopmethod_parse(value, &where, &cmd, &why) != 0) {
		xasprintf(&ps->in.error, "%s", why);
		free(why);
		return 0;
	}
	if (strcmp(key, "stop_kind") == 0 && strcmp(value, "stop") != 0 &&
	    strcmp(value, "release") != 0) {
		xasprintf(
		    &ps->in.error, "stop_kind must be 'stop' or 'release'");
		return 0;
	}
	if (strcmp(key, "stop_command") != 0 && strcmp(key, "stop_kind") != 0) {
		xasprintf(&ps->in.error,
		    "unknown key '%s' in [provider.%s] (known: stop_command, "
		    "stop_kind)",
		    key, name);
		return 0;
	}
	if (cs == NULL) {
		c->stops =
		    xreallocarray(c->stops, c->nstops + 1, sizeof *c->stops);
		cs = &c->stops[c->nstops++];
		memset(cs, 0, sizeof *cs);
		cs->provider = xstrdup(name);
	}
	set_optional(key[5] == 'c' ? &cs->command : &cs->kind, value);
	return 1;
}

static int
handler(void *arg, const char *section, const char *key, const char *value)
{
	static const char *const sections[] = { "defaults", "ssh", "status",
		"keys", "schedule", "daemon", "notify", "db" };
	struct parse_state *ps = arg;
	size_t i;
	int r;

	if (ps->in.error != NULL)
		return 1;
	ps->in.error_line = ps->in.line;
	if (*section == '\0') {
		xasprintf(&ps->in.error, "key '%s' outside any [section]", key);
		return 0;
	}
	if (strncmp(section, "provider.", 9) == 0)
		return set_provider(ps, section + 9, key, value);
	if (strncmp(section, "notify.", 7) == 0)
		return set_notify(ps, section + 7, key, value);
	for (i = 0; i < sizeof sections / sizeof sections[0]; i++) {
		if (strcmp(section, sections[i]) == 0)
			break;
	}
	if (i == sizeof sections / sizeof sections[0]) {
		xasprintf(&ps->in.error,
		    "unknown section [%s] (known: [defaults], [ssh], [status], "
		    "[keys], [schedule], [daemon], [notify], [db], "
		    "[provider.NAME], "
		    "[notify.NAME])",
		    section);
		return 0;
	}
	for (i = 0; i < sizeof config_ints / sizeof config_ints[0]; i++) {
		const struct config_int *ci = &config_ints[i];
		if (strcmp(section, ci->section) != 0 ||
		    strcmp(key, ci->key) != 0)
			continue;
		if (parse_int(value, ci->min, ci->max,
			(int *)((char *)ps->config + ci->off)) != 0) {
			xasprintf(&ps->in.error,
			    "%s = '%s' is not a valid number in range", key,
			    value);
			return 0;
		}
		return 1;
	}
	if ((r = set_other(ps, section, key, value)) >= 0)
		return r;
	xasprintf(&ps->in.error, "unknown key '%s' in [%s]", key, section);
	return 0;
}

/*
 * inih's line reader over a struct config_input: one line, counting lines
 * for error messages. A line
 * longer than inih's buffer would reach inih in pieces, the rest read as
 * lines of their own (a long comment ending "fanout = 1" would set it), so
 * it ends the parse with an error at that line. So does a NUL or another
 * control byte (but tab and CR): a binary file is not taken for a config
 * with odd lines, and its bytes never reach a message.
 */
char *
config_ini_read(char *buf, int size, void *arg)
{
	struct config_input *ps = arg;
	int ch, n = 0;

	while (n < size - 1 && (ch = getc(ps->f)) != EOF) {
		if ((ch < 0x20 && ch != '\t' && ch != '\r' && ch != '\n') ||
		    ch == 0x7f) {
			if (ps->error == NULL) {
				xasprintf(&ps->error,
				    "byte 0x%02x at column %d: not a text "
				    "file",
				    ch, n + 1);
				ps->error_line = ps->line + 1;
			}
			return NULL;
		}
		buf[n++] = (char)ch;
		if (ch == '\n')
			break;
	}
	if (n == 0)
		return NULL;
	buf[n] = '\0';
	ps->line++;
	if (buf[n - 1] == '\n')
		return buf;
	if ((ch = getc(ps->f)) == EOF || ch == '\n')
		return buf; /* the last line, or one that just fits */
	ungetc(ch, ps->f);
	if (ps->error == NULL) {
		xasprintf(&ps->error,
		    "line longer than %d bytes, the most a line "
		    "may hold",
		    size - 1);
		ps->error_line = ps->line;
	}
	return NULL;
}

/*
 * The message for a parse that failed: inih's own error line (a syntax
 * error) or the first complaint, as "path:line: why", escaped. Returns -1.
 */
int
config_ini_error(
    const struct config_input *in, int line, const char *path, char **cause)
{
	char *msg;

	if (in->error == NULL || (line != 0 && line < in->error_line))
		xasprintf(&msg, "%s:%d: syntax error", path, line);
	else
		xasprintf(&msg, "%s:%d: %s", path, in->error_line, in->error);
	/* Keys and values quoted back may hold any byte. */
	*cause = vis_str(msg);
	free(msg);
	return -1;
}

/*
 * Read the config at path over the defaults already in c. A missing file is
 * fine unless it was named explicitly.
 */
int
config_load(struct config *c, const char *path, int explicit, char **cause)
{
	struct parse_state ps;
	int line;

	memset(&ps, 0, sizeof ps);
	ps.config = c;
	if (access(path, F_OK) != 0 && !explicit)
		return 0;
	if ((ps.in.f = fopen(path, "r")) == NULL) {
		xasprintf(
		    cause, "cannot read config %s: %s", path, strerror(errno));
		return -1;
	}
	line = ini_parse_stream(config_ini_read, &ps.in, handler, &ps);
	fclose(ps.in.f);
	if (line == 0 && ps.in.error == NULL)
		check_notifies(&ps);
	if (line != 0 || ps.in.error != NULL) {
		config_ini_error(&ps.in, line, path, cause);
		free(ps.in.error);
		return -1;
	}
	free(c->path);
	c->path = xstrdup(path);
	return 0;
}

/*
 * Parse ADDR:PORT (127.0.0.1:9464, [::1]:9464) or "none" into *l. ADDR
 * is a numeric address: a name would need a resolver.
 */
int
config_parse_listen(const char *s, struct config_listen *l, char **cause)
{
	struct in6_addr a6;
	struct in_addr a4;
	const char *colon, *host = s;
	char addr[sizeof l->addr], *safe;
	size_t hlen;
	int port;

	memset(l, 0, sizeof *l);
	if (strcmp(s, "none") == 0) {
		l->none = 1;
		return 0;
	}
	if ((colon = strrchr(s, ':')) == NULL)
		goto bad;
	hlen = colon - s;
	if (*s == '[') {
		if (hlen < 2 || s[hlen - 1] != ']')
			goto bad;
		host++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= sizeof addr)
		goto bad;
	memcpy(addr, host, hlen);
	addr[hlen] = '\0';
	if (*s == '[' ? inet_pton(AF_INET6, addr, &a6) != 1
		      : inet_pton(AF_INET, addr, &a4) != 1)
		goto bad;
	if (parse_int(colon + 1, 1, 65535, &port) != 0)
		goto bad;
	memcpy(l->addr, addr, hlen + 1);
	l->port = port;
	return 0;
bad:
	safe = vis_str(s);
	xasprintf(cause,
	    "'%s' must be ADDR:PORT (127.0.0.1:9464, [::1]:9464, "
	    "0.0.0.0:9464: a numeric address and a port from 1 to 65535) or "
	    "none",
	    safe);
	free(safe);
	return -1;
}

/* Whether l is a loopback address: 127.0.0.0/8 or ::1. */
int
config_listen_loopback(const struct config_listen *l)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (strchr(l->addr, ':') != NULL)
		return inet_pton(AF_INET6, l->addr, &a6) == 1 &&
		    IN6_IS_ADDR_LOOPBACK(&a6);
	return inet_pton(AF_INET, l->addr, &a4) == 1 &&
	    (ntohl(a4.s_addr) >> 24) == 127;
}

/* l as the user writes it: "127.0.0.1:9464", "[::1]:80". Caller frees. */
char *
config_listen_string(const struct config_listen *l)
{
	char *s;

	if (l->none)
		return xstrdup("none");
	if (strchr(l->addr, ':') != NULL)
		xasprintf(&s, "[%s]:%d", l->addr, l->port);
	else
		xasprintf(&s, "%s:%d", l->addr, l->port);
	return s;
}
