/* Reading a platform's "ssh -p PORT USER@HOST" login line (loginline.h). */

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "instance.h"
#include "loginline.h"
#include "xmalloc.h"

/* What a value-taking option or an -o keyword means to gpufleet. */
enum ll_kind {
	LL_PORT,
	LL_USER,
	LL_HOSTNAME,
	LL_IDENTITY,
	LL_JUMP,
	LL_IGNORE,  /* no effect on where or how gpufleet connects */
	LL_REFUSE,  /* changes it, and gpufleet cannot do the same */
	LL_NOTLOGIN /* the line is not a login at all */
};

struct ll_option {
	const char *name;
	enum ll_kind kind;
	const char *what; /* for LL_REFUSE and LL_NOTLOGIN */
};

/* ssh's one-letter options that take a value (ssh(1)). */
static const struct ll_option ll_valued[] = {
	{ "p", LL_PORT, NULL },
	{ "l", LL_USER, NULL },
	{ "i", LL_IDENTITY, NULL },
	{ "J", LL_JUMP, NULL },
	{ "o", LL_IGNORE, NULL }, /* handled by keyword */
	{ "b", LL_REFUSE, "bind address" },
	{ "B", LL_REFUSE, "bind interface" },
	{ "c", LL_IGNORE, NULL },
	{ "D", LL_IGNORE, NULL },
	{ "e", LL_IGNORE, NULL },
	{ "E", LL_IGNORE, NULL },
	{ "F", LL_REFUSE, "an ssh_config file; see gpufleet import" },
	{ "I", LL_REFUSE, "PKCS#11 key" },
	{ "L", LL_IGNORE, NULL },
	{ "m", LL_IGNORE, NULL },
	{ "O", LL_NOTLOGIN, "control command" },
	{ "P", LL_IGNORE, NULL },
	{ "Q", LL_NOTLOGIN, "query" },
	{ "R", LL_IGNORE, NULL },
	{ "S", LL_IGNORE, NULL },
	{ "W", LL_REFUSE, "stdio forwarding" },
	{ "w", LL_REFUSE, "tunnel device" },
};

/* ssh's one-letter flags: skipped, but for these. */
static const char ll_flags[] = "1246AaCfGgKkMNnqsTtVvXxYy";
static const struct ll_option ll_bad_flags[] = {
	{ "G", LL_NOTLOGIN, "print configuration" },
	{ "V", LL_NOTLOGIN, "version" },
	{ "s", LL_REFUSE, "subsystem" },
};

/* -o keywords (ssh_config(5)), matched without case. */
static const struct ll_option ll_keywords[] = {
	{ "Port", LL_PORT, NULL },
	{ "User", LL_USER, NULL },
	{ "HostName", LL_HOSTNAME, NULL },
	{ "IdentityFile", LL_IDENTITY, NULL },
	{ "ProxyJump", LL_JUMP, NULL },
	{ "ProxyCommand", LL_REFUSE, "a command to connect through" },
	{ "HostKeyAlias", LL_REFUSE, "host key name" },
	{ "CertificateFile", LL_REFUSE, "certificate" },
	{ "PKCS11Provider", LL_REFUSE, "PKCS#11 key" },
	{ "SecurityKeyProvider", LL_REFUSE, "security key" },
	{ "BindAddress", LL_REFUSE, "bind address" },
	{ "BindInterface", LL_REFUSE, "bind interface" },
	{ "CanonicalizeHostname", LL_REFUSE, "host name rewriting" },
	{ "CanonicalDomains", LL_REFUSE, "host name rewriting" },
	{ "RemoteCommand", LL_REFUSE, "remote command" },
	{ "SessionType", LL_REFUSE, "session type" },
	{ "Tunnel", LL_REFUSE, "tunnel device" },
	{ "TunnelDevice", LL_REFUSE, "tunnel device" },
	{ "Include", LL_REFUSE, "an ssh_config file; see gpufleet import" },
	{ "Match", LL_REFUSE, "ssh_config matching" },
	{ "Host", LL_REFUSE, "ssh_config matching" },
	{ "AddKeysToAgent", LL_IGNORE, NULL },
	{ "AddressFamily", LL_IGNORE, NULL },
	{ "BatchMode", LL_IGNORE, NULL },
	{ "CheckHostIP", LL_IGNORE, NULL },
	{ "Ciphers", LL_IGNORE, NULL },
	{ "ClearAllForwardings", LL_IGNORE, NULL },
	{ "Compression", LL_IGNORE, NULL },
	{ "ConnectionAttempts", LL_IGNORE, NULL },
	{ "ConnectTimeout", LL_IGNORE, NULL },
	{ "ControlMaster", LL_IGNORE, NULL },
	{ "ControlPath", LL_IGNORE, NULL },
	{ "ControlPersist", LL_IGNORE, NULL },
	{ "DynamicForward", LL_IGNORE, NULL },
	{ "EnableEscapeCommandline", LL_IGNORE, NULL },
	{ "EscapeChar", LL_IGNORE, NULL },
	{ "ExitOnForwardFailure", LL_IGNORE, NULL },
	{ "FingerprintHash", LL_IGNORE, NULL },
	{ "ForkAfterAuthentication", LL_IGNORE, NULL },
	{ "ForwardAgent", LL_IGNORE, NULL },
	{ "ForwardX11", LL_IGNORE, NULL },
	{ "ForwardX11Timeout", LL_IGNORE, NULL },
	{ "ForwardX11Trusted", LL_IGNORE, NULL },
	{ "GatewayPorts", LL_IGNORE, NULL },
	{ "GlobalKnownHostsFile", LL_IGNORE, NULL },
	{ "GSSAPIAuthentication", LL_IGNORE, NULL },
	{ "GSSAPIDelegateCredentials", LL_IGNORE, NULL },
	{ "HashKnownHosts", LL_IGNORE, NULL },
	{ "HostKeyAlgorithms", LL_IGNORE, NULL },
	{ "IdentitiesOnly", LL_IGNORE, NULL },
	{ "IdentityAgent", LL_IGNORE, NULL },
	{ "IPQoS", LL_IGNORE, NULL },
	{ "KbdInteractiveAuthentication", LL_IGNORE, NULL },
	{ "KexAlgorithms", LL_IGNORE, NULL },
	{ "LocalForward", LL_IGNORE, NULL },
	{ "LogLevel", LL_IGNORE, NULL },
	{ "LogVerbose", LL_IGNORE, NULL },
	{ "MACs", LL_IGNORE, NULL },
	{ "NoHostAuthenticationForLocalhost", LL_IGNORE, NULL },
	{ "NumberOfPasswordPrompts", LL_IGNORE, NULL },
	{ "ObscureKeystrokeTiming", LL_IGNORE, NULL },
	{ "PasswordAuthentication", LL_IGNORE, NULL },
	{ "PermitLocalCommand", LL_IGNORE, NULL },
	{ "PreferredAuthentications", LL_IGNORE, NULL },
	{ "PubkeyAcceptedAlgorithms", LL_IGNORE, NULL },
	{ "PubkeyAcceptedKeyTypes", LL_IGNORE, NULL },
	{ "PubkeyAuthentication", LL_IGNORE, NULL },
	{ "RekeyLimit", LL_IGNORE, NULL },
	{ "RemoteForward", LL_IGNORE, NULL },
	{ "RequestTTY", LL_IGNORE, NULL },
	{ "SendEnv", LL_IGNORE, NULL },
	{ "ServerAliveCountMax", LL_IGNORE, NULL },
	{ "ServerAliveInterval", LL_IGNORE, NULL },
	{ "SetEnv", LL_IGNORE, NULL },
	{ "StdinNull", LL_IGNORE, NULL },
	{ "StrictHostKeyChecking", LL_IGNORE, NULL },
	{ "TCPKeepAlive", LL_IGNORE, NULL },
	{ "UpdateHostKeys", LL_IGNORE, NULL },
	{ "UserKnownHostsFile", LL_IGNORE, NULL },
	{ "VerifyHostKeyDNS", LL_IGNORE, NULL },
	{ "VisualHostKey", LL_IGNORE, NULL },
	{ "XAuthLocation", LL_IGNORE, NULL },
};

#define LL_NITEMS(a) (sizeof(a) / sizeof((a)[0]))
#define LL_JUMP_HINT                                                           \
	"is not read from the login line: add the jump host as its own "       \
	"instance and use --jump NAME"

/* What the words said so far; hostname is -o HostName, host the target's. */
struct ll_state {
	struct loginline *ll;
	char *host;
	char *hostname;
};

static const struct ll_option *ll_find(
    const struct ll_option *, size_t, const char *, int);
static void ll_ignored(struct loginline *, const char *, const char *);
static int ll_set(char **, const char *, const char *, char **);
static int ll_set_port(struct loginline *, const char *, const char *, char **);
static int ll_apply(struct ll_state *, const struct ll_option *, const char *,
    const char *, char **);
static int ll_option_o(struct ll_state *, const char *, char **);
static int ll_target(struct ll_state *, const char *, char **);
static int ll_uri(const char *, char **, char **, int *, char **);
static int ll_check_word(const char *, char **);

static const struct ll_option *
ll_find(const struct ll_option *list, size_t n, const char *name, int nocase)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if ((nocase ? strcasecmp(list[i].name, name)
			    : strcmp(list[i].name, name)) == 0)
			return &list[i];
	}
	return NULL;
}

/* Remember a skipped option, once, as "-v" or "-o StrictHostKeyChecking". */
static void
ll_ignored(struct loginline *ll, const char *prefix, const char *name)
{
	char *item, *s;
	const char *p;
	size_t len;

	xasprintf(&item, "%s%s", prefix, name);
	len = strlen(item);
	for (p = ll->ignored; p != NULL && *p != '\0';) {
		if (strncmp(p, item, len) == 0 &&
		    (p[len] == '\0' || p[len] == ','))
			goto out;
		if ((p = strchr(p, ',')) == NULL)
			break;
		p += 2;
	}
	if (ll->ignored == NULL)
		ll->ignored = xstrdup(item);
	else {
		xasprintf(&s, "%s, %s", ll->ignored, item);
		free(ll->ignored);
		ll->ignored = s;
	}
out:
	free(item);
}

/* Set a string once: the same value again is fine, another one is not. */
static int
ll_set(char **dst, const char *value, const char *what, char **cause)
{
	if (*dst != NULL && strcmp(*dst, value) != 0) {
		xasprintf(cause, "the login line gives two %ss: '%s' and '%s'",
		    what, *dst, value);
		return -1;
	}
	if (*dst == NULL)
		*dst = xstrdup(value);
	return 0;
}

static int
ll_set_port(
    struct loginline *ll, const char *value, const char *opt, char **cause)
{
	char *why = NULL;
	int port;

	if (instance_parse_port(value, &port, &why) != 0) {
		xasprintf(cause, "%s: %s", opt, why);
		free(why);
		return -1;
	}
	if (ll->port != 0 && ll->port != port) {
		xasprintf(cause, "the login line gives two ports: %d and %d",
		    ll->port, port);
		return -1;
	}
	ll->port = port;
	return 0;
}

/* Act on one option with its value; opt is how it was written. */
static int
ll_apply(struct ll_state *st, const struct ll_option *o, const char *opt,
    const char *value, char **cause)
{
	struct loginline *ll = st->ll;

	switch (o->kind) {
	case LL_PORT:
		return ll_set_port(ll, value, opt, cause);
	case LL_USER:
		if (instance_check_user(value, cause) != 0)
			return -1;
		return ll_set(&ll->user, value, "user", cause);
	case LL_HOSTNAME:
		if (instance_check_host(value, cause) != 0)
			return -1;
		return ll_set(&st->hostname, value, "HostName", cause);
	case LL_IDENTITY:
		if (*value == '\0') {
			xasprintf(cause, "%s: the key file is empty", opt);
			return -1;
		}
		return ll_set(&ll->identity, value, "identity", cause);
	case LL_JUMP:
		xasprintf(cause, "%s (ProxyJump) " LL_JUMP_HINT, opt);
		return -1;
	case LL_IGNORE:
		ll_ignored(ll, opt[1] == 'o' ? "-o " : "",
		    opt[1] == 'o' ? o->name : opt);
		return 0;
	case LL_REFUSE:
		xasprintf(cause,
		    "%s (%s) changes how ssh connects and gpufleet cannot "
		    "do the same: remove it from the login line",
		    opt, o->what);
		return -1;
	case LL_NOTLOGIN:
		xasprintf(
		    cause, "%s (%s) makes this not a login line", opt, o->what);
		return -1;
	}
	return -1;
}

/*
 * -o KEYWORD=VALUE, -o "KEYWORD VALUE" or -o "KEYWORD = VALUE", as ssh
 * reads them: the keyword without case, the value maybe in double quotes.
 */
static int
ll_option_o(struct ll_state *st, const char *arg, char **cause)
{
	const struct ll_option *o;
	char *key, *value, *opt;
	size_t klen, vlen;
	const char *p;
	int r = -1;

	klen = strcspn(arg, " \t=");
	key = xstrndup(arg, klen);
	p = arg + klen;
	p += strspn(p, " \t");
	if (*p == '=')
		p++;
	p += strspn(p, " \t");
	vlen = strlen(p);
	while (vlen > 0 && (p[vlen - 1] == ' ' || p[vlen - 1] == '\t'))
		vlen--;
	if (vlen >= 2 && p[0] == '"' && p[vlen - 1] == '"') {
		p++;
		vlen -= 2;
	}
	value = xstrndup(p, vlen);
	xasprintf(&opt, "-o %s", key);
	if (klen == 0) {
		xasprintf(cause, "-o '%s' has no keyword", arg);
		goto out;
	}
	if ((o = ll_find(ll_keywords, LL_NITEMS(ll_keywords), key, 1)) ==
	    NULL) {
		xasprintf(cause,
		    "-o %s is not an ssh option gpufleet knows to be harmless: "
		    "remove it from the login line",
		    key);
		goto out;
	}
	if (*value == '\0' && o->kind != LL_IGNORE) {
		xasprintf(cause, "-o %s has no value", o->name);
		goto out;
	}
	free(opt);
	xasprintf(&opt, "-o %s", o->name);
	r = ll_apply(st, o, opt, value, cause);
out:
	free(opt);
	free(key);
	free(value);
	return r;
}

/*
 * Parse ssh://[USER@]HOST[:PORT] (RFC 4248 without path or parameters).
 * Fills *user (or NULL) and *host, caller frees; *port is left alone when
 * none is given.
 */
static int
ll_uri(const char *uri, char **user, char **host, int *port, char **cause)
{
	const char *rest = uri + 6;
	size_t len = strcspn(rest, "/");
	char *s;
	int r;

	if ((rest[len] == '/' && rest[len + 1] != '\0') ||
	    strcspn(rest, ";?#") < len) {
		xasprintf(cause,
		    "'%s' has a path or parameters; give "
		    "ssh://[USER@]HOST[:PORT]",
		    uri);
		return -1;
	}
	if (len == 0) {
		xasprintf(cause, "'%s' has no host", uri);
		return -1;
	}
	s = xstrndup(rest, len);
	r = instance_parse_hostspec(s, user, host, port, cause);
	free(s);
	return r;
}

/* The destination word: [USER@]HOST (or HOST:PORT, [V6]:PORT, ssh://). */
static int
ll_target(struct ll_state *st, const char *word, char **cause)
{
	char *user = NULL, *host = NULL, *ps;
	int port = 0, r;

	if (strncmp(word, "ssh://", 6) == 0)
		r = ll_uri(word, &user, &host, &port, cause);
	else
		r = instance_parse_hostspec(word, &user, &host, &port, cause);
	if (r != 0)
		return -1;
	st->host = host;
	if (user != NULL && ll_set(&st->ll->user, user, "user", cause) != 0)
		r = -1;
	if (r == 0 && port != 0) {
		xasprintf(&ps, "%d", port);
		r = ll_set_port(st->ll, ps, word, cause);
		free(ps);
	}
	free(user);
	return r;
}

/* Words a user pasted: no control characters (they would reach a terminal). */
static int
ll_check_word(const char *w, char **cause)
{
	const unsigned char *p;

	for (p = (const unsigned char *)w; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			xasprintf(cause,
			    "the login line contains a control character "
			    "(0x%02x)",
			    *p);
			return -1;
		}
	}
	return 0;
}

/*
 * Is this argument a login line rather than [USER@]HOST[:PORT]? It starts
 * with the word ssh (or a path to it, as loginline_parse_words takes) or
 * with ssh://.
 */
int
loginline_is_line(const char *s)
{
	size_t len;

	s += strspn(s, " \t");
	if (strncmp(s, "ssh://", 6) == 0)
		return 1;
	len = strcspn(s, " \t");
	return len >= 3 && strncmp(s + len - 3, "ssh", 3) == 0 &&
	    (len == 3 || s[len - 4] == '/');
}

void
loginline_free_words(char **words, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(words[i]);
	free(words);
}

/*
 * Split a pasted line into words as sh would: blanks separate, '...' is
 * literal, "..." keeps blanks with \ escaping \ " $ `, and \ outside quotes
 * escapes the next character (\ and a newline join two lines). Expansions,
 * redirections, pipes and command lists are refused: a login line has none.
 * Fills *words (caller frees with loginline_free_words) and *n.
 */
int
loginline_split(const char *line, char ***words, size_t *n, char **cause)
{
	char **w = NULL, *cur = xmalloc(strlen(line) + 1);
	size_t nw = 0, len = 0;
	const char *p;
	int inword = 0;

	*words = NULL;
	*n = 0;
	for (p = line;; p++) {
		unsigned char c = *p;
		if (c == '\0' || c == ' ' || c == '\t' || c == '\n' ||
		    c == '\r') {
			if (inword) {
				w = xreallocarray(w, nw + 1, sizeof *w);
				w[nw++] = xstrndup(cur, len);
				len = 0;
				inword = 0;
			}
			if (c == '\0')
				break;
			continue;
		}
		if (c < 0x20 || c == 0x7f) {
			xasprintf(cause,
			    "the login line contains a control character "
			    "(0x%02x)",
			    c);
			goto fail;
		}
		if (c == '\\' &&
		    (p[1] == '\n' || (p[1] == '\r' && p[2] == '\n'))) {
			/* A continued line, as sh joins it. */
			p += p[1] == '\r' ? 2 : 1;
			continue;
		}
		inword = 1;
		if (c == '\'') {
			const char *end = strchr(p + 1, '\'');
			if (end == NULL) {
				xasprintf(cause,
				    "the login line has a ' without its "
				    "closing '");
				goto fail;
			}
			memcpy(cur + len, p + 1, end - p - 1);
			len += end - p - 1;
			p = end;
		} else if (c == '"') {
			for (p++; *p != '"'; p++) {
				if (*p == '\0') {
					xasprintf(cause,
					    "the login line has a \" without "
					    "its closing \"");
					goto fail;
				}
				if (*p == '$' || *p == '`') {
					xasprintf(cause,
					    "the login line has '%c' inside "
					    "\"...\"; a login line needs no "
					    "expansion",
					    *p);
					goto fail;
				}
				if (*p == '\\' && p[1] != '\0' &&
				    strchr("\\\"$`", p[1]) != NULL)
					p++;
				cur[len++] = *p;
			}
		} else if (c == '\\') {
			if (p[1] == '\0') {
				xasprintf(cause, "the login line ends in \\");
				goto fail;
			}
			cur[len++] = *++p;
		} else if (strchr(";|&<>$`()", c) != NULL ||
		    (c == '#' && len == 0)) {
			xasprintf(cause,
			    "the login line has '%c' outside quotes: give "
			    "just the ssh command",
			    c);
			goto fail;
		} else
			cur[len++] = c;
	}
	free(cur);
	*words = w;
	*n = nw;
	return 0;
fail:
	free(cur);
	loginline_free_words(w, nw);
	return -1;
}

/*
 * Read the words of an ssh command line (words[0] is ssh) into *ll, which
 * the caller clears. Options may come before and after the destination, as
 * ssh takes them; anything else after it would be a remote command.
 */
int
loginline_parse_words(
    char *const *words, size_t n, struct loginline *ll, char **cause)
{
	struct ll_state st;
	const struct ll_option *o;
	const char *w, *base;
	char opt[3], *value;
	size_t i, j;
	int r = -1, dashdash = 0;

	memset(ll, 0, sizeof *ll);
	memset(&st, 0, sizeof st);
	st.ll = ll;
	if (n == 0) {
		xasprintf(cause, "the login line is empty");
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (ll_check_word(words[i], cause) != 0)
			goto out;
	}
	base = strrchr(words[0], '/');
	base = base != NULL ? base + 1 : words[0];
	if (strcmp(base, "ssh") != 0) {
		xasprintf(
		    cause, "a login line starts with ssh, not '%s'", words[0]);
		goto out;
	}
	for (i = 1; i < n; i++) {
		w = words[i];
		if (dashdash || w[0] != '-' || w[1] == '\0') {
			if (st.host != NULL) {
				xasprintf(cause,
				    "'%s' after the host would be a remote "
				    "command: give just the login line",
				    w);
				goto out;
			}
			if (ll_target(&st, w, cause) != 0)
				goto out;
			continue;
		}
		if (strcmp(w, "--") == 0) {
			dashdash = 1;
			continue;
		}
		for (j = 1; w[j] != '\0'; j++) {
			opt[0] = '-';
			opt[1] = w[j];
			opt[2] = '\0';
			o = ll_find(
			    ll_valued, LL_NITEMS(ll_valued), opt + 1, 0);
			if (o != NULL) {
				if (w[j + 1] != '\0')
					value = (char *)w + j + 1;
				else if (i + 1 < n)
					value = words[++i];
				else {
					xasprintf(cause,
					    "%s in the login line needs a "
					    "value",
					    opt);
					goto out;
				}
				if (w[j] == 'o'
					? ll_option_o(&st, value, cause)
					: ll_apply(&st, o, opt, value, cause))
					goto out;
				break;
			}
			if (w[j] == '-' || strchr(ll_flags, w[j]) == NULL) {
				xasprintf(cause,
				    "'%s' in the login line is not an ssh "
				    "option",
				    w);
				goto out;
			}
			o = ll_find(
			    ll_bad_flags, LL_NITEMS(ll_bad_flags), opt + 1, 0);
			if (o != NULL) {
				if (ll_apply(&st, o, opt, "", cause) != 0)
					goto out;
			} else
				ll_ignored(ll, "", opt);
		}
	}
	if (st.host == NULL) {
		xasprintf(cause, "the login line names no host");
		goto out;
	}
	ll->host = st.hostname != NULL ? st.hostname : st.host;
	if (st.hostname != NULL)
		free(st.host);
	st.host = st.hostname = NULL;
	r = 0;
out:
	free(st.host);
	free(st.hostname);
	if (r != 0)
		loginline_clear(ll);
	return r;
}

/*
 * Read a login line given as one string: "ssh ..." or ssh://... . Fills
 * *ll, which the caller clears.
 */
int
loginline_parse(const char *line, struct loginline *ll, char **cause)
{
	char **words, *argv[2];
	size_t n;
	int r;

	memset(ll, 0, sizeof *ll);
	if (loginline_split(line, &words, &n, cause) != 0)
		return -1;
	if (n == 1 && strncmp(words[0], "ssh://", 6) == 0) {
		argv[0] = (char *)"ssh";
		argv[1] = words[0];
		r = loginline_parse_words(argv, 2, ll, cause);
	} else
		r = loginline_parse_words(words, n, ll, cause);
	loginline_free_words(words, n);
	return r;
}

void
loginline_clear(struct loginline *ll)
{
	free(ll->user);
	free(ll->host);
	free(ll->identity);
	free(ll->ignored);
	memset(ll, 0, sizeof *ll);
}
