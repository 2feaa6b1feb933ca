/* The user's known_hosts files: the keys they list for one host. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libssh/libssh.h>

#include "knownhosts.h"
#include "sshconfig.h"
#include "xmalloc.h"

#define KH_SPACE " \t"

/* Any valid key: libssh checks a hashed name only on a line that parses. */
#define KH_ANY_KEY                                                             \
	"ssh-ed25519 "                                                         \
	"AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"

static int kh_hashed_match(const char *, const char *);
static char *kh_field(const char **);

/*
 * The name known_hosts lists a host under: "host" on port 22, else
 * "[host]:port", in lower case. Caller frees.
 */
char *
knownhosts_name(const char *host, int port)
{
	char *name, *c;

	if (port == 22 || port == 0)
		name = xstrdup(host);
	else
		xasprintf(&name, "[%s]:%d", host, port);
	for (c = name; *c != '\0'; c++) {
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	}
	return name;
}

/*
 * Whether a hashed name field ("|1|salt|hmac", HMAC-SHA1 of the name keyed
 * with the salt) is name; libssh does the arithmetic.
 */
static int
kh_hashed_match(const char *field, const char *name)
{
	struct ssh_knownhosts_entry *entry = NULL;
	char *line;
	int r;

	if (strchr(field, ',') != NULL)
		return 0; /* a hashed name stands alone */
	xasprintf(&line, "%s %s", field, KH_ANY_KEY);
	r = ssh_known_hosts_parse_line(name, line, &entry) == SSH_OK;
	ssh_knownhosts_entry_free(entry);
	free(line);
	return r;
}

/* Split off the next blank-separated field of *s, or NULL. Caller frees. */
static char *
kh_field(const char **s)
{
	const char *p = *s + strspn(*s, KH_SPACE);
	size_t len = strcspn(p, KH_SPACE);

	if (len == 0)
		return NULL;
	*s = p + len;
	return xstrndup(p, len);
}

/*
 * Parse one known_hosts line (no newline) for the host known as name
 * (knownhosts_name's form). Returns 1 when the line lists a key for it,
 * filling out's marker, type and base64 (caller frees them; file and line
 * are left NULL and 0); 0 for a line that does not (a comment, another
 * host, a negated pattern that matches, garbage).
 */
int
knownhosts_parse_line(
    const char *line, const char *name, struct knownhosts_key *out)
{
	enum knownhosts_marker marker = KNOWNHOSTS_PLAIN;
	char *f = NULL, *hosts = NULL, *type = NULL, *b64 = NULL;
	const char *s = line;
	int r = 0;

	memset(out, 0, sizeof *out);
	s += strspn(s, KH_SPACE);
	if (*s == '#' || *s == '\0')
		return 0;
	if (*s == '@') {
		f = kh_field(&s);
		if (strcmp(f, "@revoked") == 0)
			marker = KNOWNHOSTS_REVOKED;
		else if (strcmp(f, "@cert-authority") == 0)
			marker = KNOWNHOSTS_CA;
		else
			goto out; /* a marker ssh does not know: skipped too */
	}
	if ((hosts = kh_field(&s)) == NULL || (type = kh_field(&s)) == NULL ||
	    (b64 = kh_field(&s)) == NULL)
		goto out;
	if (strspn(type, "0123456789") == strlen(type))
		goto out; /* SSH-1 "bits exponent modulus" */
	if (strspn(b64,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		"0123456789+/=") != strlen(b64))
		goto out;
	if (hosts[0] == '|') {
		if (!kh_hashed_match(hosts, name))
			goto out;
	} else if (sshconfig_match_hosts(name, hosts) != 1)
		goto out;
	out->marker = marker;
	out->type = type;
	out->base64 = b64;
	type = b64 = NULL;
	r = 1;
out:
	free(f);
	free(hosts);
	free(type);
	free(b64);
	return r;
}

/*
 * Add the keys the known_hosts file at path lists for name to kh. Returns
 * 0, or -1 when the file cannot be read (missing is the common case).
 */
int
knownhosts_read(const char *path, const char *name, struct knownhosts *kh)
{
	struct knownhosts_key k;
	char line[KNOWNHOSTS_LINE_MAX + 2];
	int lineno = 0, c, whole;
	size_t len;
	FILE *f;

	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (kh->nkeys < KNOWNHOSTS_KEYS_MAX &&
	    fgets(line, sizeof line, f) != NULL) {
		lineno++;
		len = strlen(line);
		whole = len > 0 && line[len - 1] == '\n';
		if (!whole && len == sizeof line - 1) {
			/* Over-long: skip to its end, never keep it. */
			while ((c = getc(f)) != EOF && c != '\n')
				;
			continue;
		}
		line[strcspn(line, "\r\n")] = '\0';
		if (knownhosts_parse_line(line, name, &k) != 1)
			continue;
		k.file = xstrdup(path);
		k.line = lineno;
		kh->keys =
		    xreallocarray(kh->keys, kh->nkeys + 1, sizeof *kh->keys);
		kh->keys[kh->nkeys++] = k;
	}
	fclose(f);
	return 0;
}

/* Free what knownhosts_read added and leave kh empty. */
void
knownhosts_free(struct knownhosts *kh)
{
	size_t i;

	for (i = 0; i < kh->nkeys; i++) {
		free(kh->keys[i].type);
		free(kh->keys[i].base64);
		free(kh->keys[i].file);
	}
	free(kh->keys);
	memset(kh, 0, sizeof *kh);
}
