/* Stop methods: the provider defaults, parsing, placeholders, storage. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "misc.h"
#include "status.h"
#include "stopmethod.h"
#include "xmalloc.h"

static int check_command(const char *, char **);

/* The provider defaults; config/providers.ini documents the same values. */
static const struct {
	const char *provider;
	const char *method;
	const char *kind;
} defaults[] = {
	{ "autodl", "remote:/usr/bin/shutdown", "stop" },
	{ "runpod", "remote:runpodctl stop pod $RUNPOD_POD_ID", "stop" },
	{ "vast",
	    "remote:vastai stop instance $CONTAINER_ID --api-key "
	    "$CONTAINER_API_KEY",
	    "stop" },
	{ "featurize", "remote:featurize instance release $UUID", "release" },
};

/* A command may not be empty, too long or hold control characters. */
static int
check_command(const char *cmd, char **cause)
{
	const unsigned char *p;

	if (*cmd == '\0') {
		*cause = xstrdup("stop_command: the command after "
				 "'remote:' or 'local:' is empty");
		return -1;
	}
	if (strlen(cmd) > STOPMETHOD_MAX_LEN) {
		xasprintf(cause, "stop_command is longer than %d bytes",
		    STOPMETHOD_MAX_LEN);
		return -1;
	}
	for (p = (const unsigned char *)cmd; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			*cause = xstrdup("stop_command holds a control "
					 "character (a newline?)");
			return -1;
		}
	}
	return 0;
}

/*
 * Parse a method: "remote:COMMAND", "local:COMMAND" or "none"; *command
 * points into value (NULL for none).
 */
int
stopmethod_parse(const char *value, enum stopmethod_where *where,
    const char **command, char **cause)
{
	*command = NULL;
	if (strcmp(value, "none") == 0) {
		*where = STOP_NONE;
		return 0;
	}
	if (strncmp(value, "remote:", 7) == 0) {
		*where = STOP_REMOTE;
		*command = value + 7;
	} else if (strncmp(value, "local:", 6) == 0) {
		*where = STOP_LOCAL;
		*command = value + 6;
	} else {
		xasprintf(cause,
		    "stop_command must be 'remote:COMMAND', "
		    "'local:COMMAND' or 'none'");
		return -1;
	}
	return check_command(*command, cause);
}

/* A provider's default method and kind; 0 when it has none. */
int
stopmethod_default(const char *provider, enum stopmethod_where *where,
    const char **command, const char **kind)
{
	size_t i;
	char *cause = NULL;

	for (i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
		if (strcmp(provider, defaults[i].provider) != 0)
			continue;
		/* The built-in methods parse (test_stopmethod checks). */
		if (stopmethod_parse(
			defaults[i].method, where, command, &cause) != 0)
			abort();
		*kind = defaults[i].kind;
		return 1;
	}
	*where = STOP_NONE;
	*command = NULL;
	*kind = "stop";
	return 0;
}

/*
 * The effective method of an instance with its stored settings f and the
 * config cf (NULL: none): the instance's own, else its provider's from
 * cf's [provider.NAME], else the built-in default; f->kind overrides the
 * kind.
 */
void
stopmethod_resolve(const struct instance *in, const struct stopmethod_fields *f,
    const struct config *cf, struct stopmethod *m)
{
	const struct config_stop *cs = config_stop(cf, in->provider);
	const char *cmd = NULL, *kind = "stop", *value = f->command;
	char *cause = NULL;

	memset(m, 0, sizeof *m);
	if (value != NULL)
		snprintf(m->from, sizeof m->from, "instance");
	else if (cs != NULL && cs->command != NULL) {
		value = cs->command;
		snprintf(m->from, sizeof m->from, "config [provider.%s]",
		    in->provider);
	}
	if (value == NULL) {
		if (stopmethod_default(in->provider, &m->where, &cmd, &kind))
			snprintf(m->from, sizeof m->from, "provider %s",
			    in->provider);
		else
			snprintf(m->from, sizeof m->from,
			    "none: provider %s has no default",
			    *in->provider != '\0' ? in->provider : "(none)");
	} else if (stopmethod_parse(value, &m->where, &cmd, &cause) != 0) {
		/* Stored by `set`, so valid; a hand edit: none. */
		free(cause);
		m->where = STOP_NONE;
		cmd = NULL;
	}
	if (f->command == NULL && cs != NULL && cs->kind != NULL)
		kind = cs->kind;
	m->command = cmd != NULL ? xstrdup(cmd) : NULL;
	if (f->kind != NULL)
		m->kind = strcmp(f->kind, "release") == 0 ? "release" : "stop";
	else
		m->kind = strcmp(kind, "release") == 0 ? "release" : "stop";
	m->allow_release = f->allow_release;
}

/*
 * The command with {name} {host} {port} {provider} {instance_id} replaced
 * by the instance's values, each shell-quoted; anything else, $VARS
 * included, is left as written. Caller frees.
 */
char *
stopmethod_expand(const char *command, const struct instance *in)
{
	struct misc_buf b = { NULL, 0, 0, 0 };
	char port[16], id[24], *q;
	const char *p, *val;
	size_t n;

	snprintf(port, sizeof port, "%d", in->port);
	snprintf(id, sizeof id, "%lld", (long long)in->id);
	for (p = command; *p != '\0'; p += n) {
		val = NULL;
		n = 1;
		if (strncmp(p, "{name}", 6) == 0)
			val = in->name, n = 6;
		else if (strncmp(p, "{host}", 6) == 0)
			val = in->host, n = 6;
		else if (strncmp(p, "{port}", 6) == 0)
			val = port, n = 6;
		else if (strncmp(p, "{provider}", 10) == 0)
			val = in->provider, n = 10;
		else if (strncmp(p, "{instance_id}", 13) == 0)
			val = id, n = 13;
		if (val == NULL) {
			misc_buf_add(&b, p, 1, 0);
			continue;
		}
		q = misc_shell_quote(val);
		misc_buf_add(&b, q, strlen(q), 0);
		free(q);
	}
	return b.data != NULL ? b.data : xstrdup("");
}

/* "remote:CMD (stop)", or "none". Caller frees. */
char *
stopmethod_format(const struct stopmethod *m)
{
	char *s;

	if (m->where == STOP_NONE)
		return xstrdup("none");
	xasprintf(&s, "%s:%s (%s)",
	    m->where == STOP_REMOTE ? "remote" : "local", m->command, m->kind);
	return s;
}

/*
 * Stage one `set` field: stop_command, stop_kind or allow_release; *known
 * says whether field is one of them. Returns -1 with *cause if the value
 * is not valid.
 */
int
stopmethod_field(struct stopmethod_fields *f, const char *field,
    const char *value, int *known, char **cause)
{
	enum stopmethod_where where;
	const char *cmd;

	*known = 1;
	if (strcmp(field, "stop_command") == 0) {
		free(f->command);
		f->command = NULL;
		f->changed = 1;
		if (*value == '\0' || strcmp(value, "default") == 0)
			return 0;
		if (stopmethod_parse(value, &where, &cmd, cause) != 0)
			return -1;
		f->command = xstrdup(value);
		return 0;
	}
	if (strcmp(field, "stop_kind") == 0) {
		free(f->kind);
		f->kind = NULL;
		f->changed = 1;
		if (*value == '\0' || strcmp(value, "default") == 0)
			return 0;
		if (strcmp(value, "stop") != 0 &&
		    strcmp(value, "release") != 0) {
			xasprintf(cause,
			    "stop_kind must be 'stop', 'release' or "
			    "'default'");
			return -1;
		}
		f->kind = xstrdup(value);
		return 0;
	}
	if (strcmp(field, "allow_release") == 0) {
		f->changed = 1;
		if (strcmp(value, "yes") == 0)
			f->allow_release = 1;
		else if (strcmp(value, "no") == 0)
			f->allow_release = 0;
		else {
			xasprintf(cause, "allow_release must be 'yes' or 'no'");
			return -1;
		}
		return 0;
	}
	*known = 0;
	return 0;
}

void
stopmethod_fields_clear(struct stopmethod_fields *f)
{
	free(f->command);
	free(f->kind);
	memset(f, 0, sizeof *f);
}

void
stopmethod_clear(struct stopmethod *m)
{
	free(m->command);
	memset(m, 0, sizeof *m);
}
