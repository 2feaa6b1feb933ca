/* The instance record: defaults, field validation, JSON form. */

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "instance.h"
#include "timeparse.h"
#include "xmalloc.h"

#define NAME_MAX_LEN  63
#define HOST_MAX_LEN  253
#define USER_MAX_LEN  32
#define PATH_MAX_LEN  4096
#define NOTES_MAX_LEN 1024

static int check_ident(const char *, const char *, char **);
static int check_text(const char *, const char *, size_t, char **);
static int check_remote_path(const char *, const char *, char **);
static int set_string(char **, const char *);
static int set_since(struct instance *, const char *, char **);
static int tag_cmp(const void *, const void *);
static json_t *json_time(int64_t);

/* Fill in the defaults of a new instance. */
void
instance_init(struct instance *in)
{
	memset(in, 0, sizeof *in);
	in->port = INSTANCE_DEFAULT_PORT;
	in->user = xstrdup(INSTANCE_DEFAULT_USER);
	in->provider = xstrdup("");
	in->region = xstrdup("");
	in->remote_dir = xstrdup(INSTANCE_DEFAULT_REMOTE_DIR);
	in->authorized_keys_file = xstrdup(INSTANCE_DEFAULT_AUTHKEYS);
	in->notes = xstrdup("");
	in->platform_id = xstrdup("");
}

void
instance_clear(struct instance *in)
{
	size_t i;

	free(in->name);
	free(in->host);
	free(in->user);
	free(in->provider);
	free(in->region);
	for (i = 0; i < in->ntags; i++)
		free(in->tags[i]);
	free(in->tags);
	free(in->identity);
	free(in->remote_dir);
	free(in->authorized_keys_file);
	free(in->notes);
	free(in->platform_id);
	free(in->source);
	free(in->jump);
	memset(in, 0, sizeof *in);
}

void
instance_free_array(struct instance *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		instance_clear(&list[i]);
	free(list);
}

/* Check a name-like word: [A-Za-z0-9][A-Za-z0-9._-]{0,62}. */
static int
check_ident(const char *what, const char *s, char **cause)
{
	size_t i, len = strlen(s);

	if (len == 0) {
		xasprintf(cause, "%s is empty", what);
		return -1;
	}
	if (len > NAME_MAX_LEN) {
		xasprintf(cause, "%s '%.70s...' is longer than %d characters",
		    what, s, NAME_MAX_LEN);
		return -1;
	}
	if (!isascii((unsigned char)s[0]) || !isalnum((unsigned char)s[0])) {
		xasprintf(cause, "%s '%s' must start with a letter or digit",
		    what, s);
		return -1;
	}
	for (i = 1; i < len; i++) {
		unsigned char c = s[i];
		if (isascii(c) &&
		    (isalnum(c) || c == '.' || c == '_' || c == '-'))
			continue;
		xasprintf(cause,
		    "%s '%s' may only contain letters, digits, "
		    "'.', '_' and '-'",
		    what, s);
		return -1;
	}
	return 0;
}

/* Check an instance name; "all" is taken by the selector grammar. */
int
instance_check_name(const char *s, char **cause)
{
	if (check_ident("name", s, cause) != 0)
		return -1;
	if (strcmp(s, "all") == 0) {
		xasprintf(cause,
		    "name 'all' is reserved (it selects every "
		    "instance)");
		return -1;
	}
	return 0;
}

int
instance_check_tag(const char *s, char **cause)
{
	return check_ident("tag", s, cause);
}

/* Check a host name or address: DNS characters, or an IPv6 literal. */
int
instance_check_host(const char *s, char **cause)
{
	size_t i, len = strlen(s);
	int colons = 0;

	if (len == 0) {
		xasprintf(cause, "host is empty");
		return -1;
	}
	if (len > HOST_MAX_LEN) {
		xasprintf(cause, "host '%.60s...' is too long", s);
		return -1;
	}
	if (s[0] == '-' || s[0] == '.') {
		xasprintf(cause, "host '%s' must not start with '%c'", s, s[0]);
		return -1;
	}
	for (i = 0; i < len; i++) {
		unsigned char c = s[i];
		if (c == ':')
			colons++;
		if (isascii(c) &&
		    (isalnum(c) || c == '.' || c == '-' || c == '_' ||
			c == ':'))
			continue;
		if (c == '%' && colons > 0 && i + 1 < len)
			continue;
		xasprintf(cause,
		    "host '%s' contains '%s%c'; only letters, "
		    "digits, '.', '-', '_' and IPv6 ':' are allowed",
		    s, c < 0x20 || c >= 0x7f ? "\\x" : "",
		    c < 0x20 || c >= 0x7f ? '?' : c);
		return -1;
	}
	if (colons == 1) {
		xasprintf(cause,
		    "host '%s' has a single ':'; write a port as "
		    "HOST:PORT or IPv6 as [ADDR]:PORT",
		    s);
		return -1;
	}
	return 0;
}

/* Check a login name: POSIX-ish, not starting with '-'. */
int
instance_check_user(const char *s, char **cause)
{
	size_t i, len = strlen(s);

	if (len == 0) {
		xasprintf(cause, "user is empty");
		return -1;
	}
	if (len > USER_MAX_LEN || s[0] == '-') {
		xasprintf(cause, "user '%.40s' is not a valid login name", s);
		return -1;
	}
	for (i = 0; i < len; i++) {
		unsigned char c = s[i];
		if (isascii(c) &&
		    (isalnum(c) || c == '_' || c == '.' || c == '-'))
			continue;
		if (c == '$' && i == len - 1 && i > 0)
			continue;
		xasprintf(cause,
		    "user '%s' may only contain letters, digits, "
		    "'.', '_' and '-'",
		    s);
		return -1;
	}
	return 0;
}

/* Parse a TCP port: digits only, 1 to 65535. */
int
instance_parse_port(const char *s, int *port, char **cause)
{
	char *end;
	long v;

	if (*s == '\0' || !isdigit((unsigned char)*s)) {
		xasprintf(cause, "port '%s' is not a number", s);
		return -1;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end != '\0') {
		xasprintf(cause, "port '%s' is not a number", s);
		return -1;
	}
	if (errno == ERANGE || v < 1 || v > 65535) {
		xasprintf(cause, "port '%s' is out of range (1-65535)", s);
		return -1;
	}
	*port = (int)v;
	return 0;
}

/*
 * Parse [USER@]HOST[:PORT] with IPv6 as [ADDR] or [ADDR]:PORT (a bare
 * address with several colons is taken whole as the host). Fills *user
 * (NULL when absent) and *host, caller frees; *port is left alone when no
 * port is given.
 */
int
instance_parse_hostspec(
    const char *spec, char **user, char **host, int *port, char **cause)
{
	const char *at, *h, *end, *colon;
	char *u = NULL, *hs = NULL, *ps = NULL;
	int r = -1;

	*user = *host = NULL;
	if ((at = strrchr(spec, '@')) != NULL) {
		u = xstrndup(spec, at - spec);
		if (instance_check_user(u, cause) != 0)
			goto out;
		h = at + 1;
	} else
		h = spec;

	if (*h == '[') {
		if ((end = strchr(h, ']')) == NULL) {
			xasprintf(
			    cause, "host spec '%s' has '[' without ']'", spec);
			goto out;
		}
		hs = xstrndup(h + 1, end - h - 1);
		if (strchr(hs, ':') == NULL) {
			xasprintf(cause,
			    "'[%s]' in '%s' is not an IPv6 "
			    "address",
			    hs, spec);
			goto out;
		}
		if (end[1] == ':')
			ps = xstrdup(end + 2);
		else if (end[1] != '\0') {
			xasprintf(cause, "unexpected '%s' after ']' in '%s'",
			    end + 1, spec);
			goto out;
		}
	} else if ((colon = strchr(h, ':')) != NULL &&
	    strchr(colon + 1, ':') == NULL) {
		hs = xstrndup(h, colon - h);
		ps = xstrdup(colon + 1);
	} else
		hs = xstrdup(h);

	if (instance_check_host(hs, cause) != 0)
		goto out;
	if (ps != NULL && instance_parse_port(ps, port, cause) != 0)
		goto out;
	*user = u;
	*host = hs;
	u = hs = NULL;
	r = 0;
out:
	free(u);
	free(hs);
	free(ps);
	return r;
}

/* Check free text: no control characters, bounded length. */
static int
check_text(const char *what, const char *s, size_t max, char **cause)
{
	const unsigned char *p;

	if (strlen(s) > max) {
		xasprintf(cause, "%s is longer than %zu bytes", what, max);
		return -1;
	}
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			xasprintf(cause,
			    "%s contains a control character "
			    "(0x%02x)",
			    what, *p);
			return -1;
		}
	}
	return 0;
}

/*
 * Check a path that is used inside remote shell commands: an optional
 * leading "~/" and then only characters that need no quoting.
 */
static int
check_remote_path(const char *what, const char *s, char **cause)
{
	const char *p = s;

	if (*s == '\0') {
		xasprintf(cause, "%s is empty", what);
		return -1;
	}
	if (strncmp(p, "~/", 2) == 0)
		p += 2;
	else if (*p != '/') {
		xasprintf(cause, "%s '%s' must be absolute or start with ~/",
		    what, s);
		return -1;
	}
	for (; *p != '\0'; p++) {
		unsigned char c = *p;
		if (isascii(c) && (isalnum(c) || strchr("/._+-", c) != NULL))
			continue;
		xasprintf(cause,
		    "%s '%s' may only contain letters, digits "
		    "and '/._+-' (after an optional leading ~/)",
		    what, s);
		return -1;
	}
	if (strlen(s) > PATH_MAX_LEN) {
		xasprintf(cause, "%s is too long", what);
		return -1;
	}
	return 0;
}

static int
set_string(char **dst, const char *value)
{
	free(*dst);
	*dst = xstrdup(value);
	return 0;
}

/*
 * Make a local path absolute against the working directory, without
 * leading "./" ("~/..." is left for the reader to expand). Caller frees.
 */
char *
instance_local_path(const char *path)
{
	char cwd[PATH_MAX], *s;

	if (path[0] == '/' || path[0] == '~' || getcwd(cwd, sizeof cwd) == NULL)
		return xstrdup(path);
	while (path[0] == '.' && path[1] == '/' && path[2] != '\0') {
		path += 2;
		path += strspn(path, "/");
	}
	xasprintf(&s, "%s/%s", cwd, path);
	return s;
}

/* The valid FIELD names of `set`, comma-separated, for error messages. */
const char *
instance_field_names(void)
{
	return "name, host, port, user, provider, region, identity, "
	       "remote_dir, authorized_keys_file, notes, platform_id, jump, "
	       "since";
}

/*
 * Whether NAME may be in's jump host (syntax and self only; that it exists
 * and is not itself behind a jump is the inventory's, see inventory.h).
 */
int
instance_check_jump(const struct instance *in, const char *name, char **cause)
{
	if (instance_check_name(name, cause) != 0)
		return -1;
	if (in->name != NULL && strcmp(in->name, name) == 0) {
		xasprintf(cause, "%s cannot be its own jump host", name);
		return -1;
	}
	return 0;
}

/*
 * since=TIME: the rental began then, before the instance was added (the
 * books may go back to it: LEDGER.md); at most INSTANCE_SINCE_MAX before
 * now, not after it; empty clears it.
 */
static int
set_since(struct instance *in, const char *value, char **cause)
{
	int64_t now = (int64_t)time(NULL), t;

	if (*value == '\0') {
		in->since = 0;
		return 0;
	}
	if (timeparse(value, now, &t, cause) != 0)
		return -1;
	if (t > now || t < now - INSTANCE_SINCE_MAX) {
		xasprintf(cause,
		    "since '%s' must be in the last %d days, not in the "
		    "future",
		    value, INSTANCE_SINCE_MAX / 86400);
		return -1;
	}
	in->since = t;
	return 0;
}

/* Validate and set one field by name. */
int
instance_set_field(
    struct instance *in, const char *field, const char *value, char **cause)
{
	char *tmp;

	if (strcmp(field, "name") == 0) {
		if (instance_check_name(value, cause) != 0)
			return -1;
		return set_string(&in->name, value);
	}
	if (strcmp(field, "host") == 0) {
		if (instance_check_host(value, cause) != 0)
			return -1;
		return set_string(&in->host, value);
	}
	if (strcmp(field, "port") == 0)
		return instance_parse_port(value, &in->port, cause);
	if (strcmp(field, "user") == 0) {
		if (instance_check_user(value, cause) != 0)
			return -1;
		return set_string(&in->user, value);
	}
	if (strcmp(field, "provider") == 0 || strcmp(field, "region") == 0) {
		if (*value != '\0' && check_ident(field, value, cause) != 0)
			return -1;
		return set_string(
		    field[0] == 'p' ? &in->provider : &in->region, value);
	}
	if (strcmp(field, "identity") == 0) {
		if (check_text("identity", value, PATH_MAX_LEN, cause) != 0)
			return -1;
		free(in->identity);
		in->identity =
		    *value == '\0' ? NULL : instance_local_path(value);
		return 0;
	}
	if (strcmp(field, "remote_dir") == 0 ||
	    strcmp(field, "authorized_keys_file") == 0) {
		if (check_remote_path(field, value, cause) != 0)
			return -1;
		return set_string(field[0] == 'r' ? &in->remote_dir
						  : &in->authorized_keys_file,
		    value);
	}
	if (strcmp(field, "platform_id") == 0) {
		if (*value != '\0' &&
		    check_ident("platform_id", value, cause) != 0)
			return -1;
		return set_string(&in->platform_id, value);
	}
	if (strcmp(field, "jump") == 0) {
		if (*value == '\0') {
			free(in->jump);
			in->jump = NULL;
			return 0;
		}
		if (instance_check_jump(in, value, cause) != 0)
			return -1;
		return set_string(&in->jump, value);
	}
	if (strcmp(field, "since") == 0)
		return set_since(in, value, cause);
	if (strcmp(field, "notes") == 0 || strcmp(field, "note") == 0) {
		if (check_text("notes", value, NOTES_MAX_LEN, cause) != 0)
			return -1;
		return set_string(&in->notes, value);
	}
	tmp = xstrdup(field);
	xasprintf(cause, "unknown field '%s' (valid fields: %s)", tmp,
	    instance_field_names());
	free(tmp);
	return -1;
}

static int
tag_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
instance_has_tag(const struct instance *in, const char *tag)
{
	size_t i;

	for (i = 0; i < in->ntags; i++) {
		if (strcmp(in->tags[i], tag) == 0)
			return 1;
	}
	return 0;
}

/*
 * What the ledger last said of the instance: running, stopped, released,
 * or unknown (also when it says nothing).
 */
const char *
instance_state(const struct instance *in)
{
	return in->state[0] != '\0' ? in->state : "unknown";
}

/*
 * Stopped, its ledger says, yet it answered a status pass since (at the
 * second of the stop or later).
 */
int
instance_still_billing(const struct instance *in)
{
	return strcmp(in->state, "stopped") == 0 &&
	    in->up_at >= in->state_since;
}

/* Add a tag, keeping the set sorted; returns 1 if it was new. */
int
instance_add_tag(struct instance *in, const char *tag)
{
	if (instance_has_tag(in, tag))
		return 0;
	in->tags = xreallocarray(in->tags, in->ntags + 1, sizeof *in->tags);
	in->tags[in->ntags++] = xstrdup(tag);
	qsort(in->tags, in->ntags, sizeof *in->tags, tag_cmp);
	return 1;
}

/* Remove a tag; returns 1 if it was there. */
int
instance_remove_tag(struct instance *in, const char *tag)
{
	size_t i;

	for (i = 0; i < in->ntags; i++) {
		if (strcmp(in->tags[i], tag) != 0)
			continue;
		free(in->tags[i]);
		memmove(&in->tags[i], &in->tags[i + 1],
		    (in->ntags - i - 1) * sizeof *in->tags);
		in->ntags--;
		return 1;
	}
	return 0;
}

/* Format Unix seconds as ISO 8601 UTC. Caller frees. */
char *
instance_format_time(int64_t t)
{
	char buf[32];
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL ||
	    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return xstrdup("?");
	return xstrdup(buf);
}

static json_t *
json_time(int64_t t)
{
	char *s;
	json_t *j;

	if (t == 0)
		return json_null();
	s = instance_format_time(t);
	j = json_string(s);
	free(s);
	return j;
}

/* The documented JSON form of an instance (see README, "JSON output"). */
json_t *
instance_to_json(const struct instance *in)
{
	json_t *o, *tags;
	size_t i;

	tags = json_array();
	for (i = 0; i < in->ntags; i++)
		json_array_append_new(tags, json_string(in->tags[i]));
	o = json_object();
	json_object_set_new(o, "name", json_string(in->name));
	json_object_set_new(o, "host", json_string(in->host));
	json_object_set_new(o, "port", json_integer(in->port));
	json_object_set_new(o, "user", json_string(in->user));
	json_object_set_new(o, "provider", json_string(in->provider));
	json_object_set_new(o, "region", json_string(in->region));
	json_object_set_new(o, "tags", tags);
	json_object_set_new(o, "identity",
	    in->identity != NULL ? json_string(in->identity) : json_null());
	json_object_set_new(o, "remote_dir", json_string(in->remote_dir));
	json_object_set_new(
	    o, "authorized_keys_file", json_string(in->authorized_keys_file));
	json_object_set_new(o, "notes", json_string(in->notes));
	json_object_set_new(o, "platform_id",
	    json_string(in->platform_id != NULL ? in->platform_id : ""));
	json_object_set_new(o, "source",
	    in->source != NULL ? json_string(in->source) : json_null());
	json_object_set_new(
	    o, "jump", in->jump != NULL ? json_string(in->jump) : json_null());
	json_object_set_new(o, "created_at", json_time(in->created_at));
	json_object_set_new(o, "released_at", json_time(in->released_at));
	json_object_set_new(o, "since", json_time(in->since));
	return o;
}

/* USER@HOST:PORT, with an IPv6 host in brackets. Caller frees. */
char *
instance_target(const struct instance *in)
{
	char *s;
	int v6 = strchr(in->host, ':') != NULL;

	xasprintf(&s, "%s@%s%s%s:%d", in->user, v6 ? "[" : "", in->host,
	    v6 ? "]" : "", in->port);
	return s;
}
