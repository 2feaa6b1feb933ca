/*
 * Reading an OpenSSH client configuration (ssh_config(5)) for
 * `gpufleet import`.
 *
 * The file, with its Includes expanded in place, is parsed once into a flat
 * list of records: Host and Match lines, the options we report, and a begin
 * and end marker around each included file. Each concrete alias is then
 * evaluated by walking that list as `ssh -G ALIAS` does (OpenSSH 9.2
 * readconf.c): a Host or Match line switches the active flag, the first
 * value obtained for an option wins, a file included while inactive never
 * matches, and the includer's active flag is restored after it.
 *
 * Match takes all, host, originalhost, user, localuser, canonical and
 * final, each negated with '!'. Like ssh, a config with any "Match final"
 * is walked twice, the second time with Host lines and "Match host"
 * seeing the host name the first walk found and canonical/final true;
 * hostname canonicalisation itself is not done (CanonicalizeHostname is
 * ignored). Criteria that would need the network or a command (exec,
 * localnetwork, tagged, anything newer) are noted and their block never
 * applies.
 */

#include <sys/stat.h>

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sshconfig.h"
#include "xmalloc.h"

/* As READCONF_MAX_DEPTH: the top file is depth 0, Includes go to 16. */
#define SSHCONFIG_MAX_DEPTH 16

#define SC_WHITESPACE " \t\r\n"

enum sc_key {
	SC_K_HOST,
	SC_K_MATCH,
	SC_K_INCLUDE,
	SC_K_HOSTNAME,
	SC_K_PORT,
	SC_K_USER,
	SC_K_IDENTITY,
	SC_K_PROXYJUMP,
	SC_K_PROXYCOMMAND,
	SC_K_USERKNOWN,
	SC_K_GLOBALKNOWN,
};

enum sc_kind {
	SC_HOST,
	SC_MATCH,
	SC_OPTION,
	SC_INCLUDE_BEGIN,
	SC_INCLUDE_END,
};

/*
 * One parsed line. Host records own their patterns (argv); option records
 * own value (the dequoted argument, or the raw rest of the line for
 * ProxyJump and ProxyCommand). file points into the parser's file list.
 */
struct sc_rec {
	enum sc_kind kind;
	enum sc_key key;
	char **argv;
	size_t argc;
	char *value;
	int port;
	const char *file;
	int line;
};

struct sc_parser {
	const char *home;
	struct sshconfig *out;
	struct sc_rec *recs;
	size_t nrecs;
	size_t recsize;
	char **files;
	size_t nfiles;
	int want_final; /* a Match line says final: walk twice */
	char *localuser;
};

struct sc_buf {
	char *s;
	size_t len;
	size_t size;
};

static const struct sc_keyword {
	const char *name;
	enum sc_key key;
} sc_keywords[] = {
	{ "Host", SC_K_HOST },
	{ "Match", SC_K_MATCH },
	{ "Include", SC_K_INCLUDE },
	{ "HostName", SC_K_HOSTNAME },
	{ "Port", SC_K_PORT },
	{ "User", SC_K_USER },
	{ "IdentityFile", SC_K_IDENTITY },
	{ "ProxyJump", SC_K_PROXYJUMP },
	{ "ProxyCommand", SC_K_PROXYCOMMAND },
	{ "UserKnownHostsFile", SC_K_USERKNOWN },
	{ "GlobalKnownHostsFile", SC_K_GLOBALKNOWN },
};

static int sc_read_file(
    struct sc_parser *, const char *, int, int, const char *, int, char **);
static int sc_parse_line(
    struct sc_parser *, char *, const char *, int, int, char **);
static int sc_host_line(
    struct sc_parser *, char **, size_t, const char *, int, char **);
static int sc_match_line(
    struct sc_parser *, char **, size_t, const char *, int, char **);
static int sc_include_line(
    struct sc_parser *, char **, size_t, const char *, int, int, char **);
static int sc_option_line(struct sc_parser *, const struct sc_keyword *,
    char **, size_t, const char *, const char *, int, char **);
static int sc_split(const char *, char ***, size_t *);
static void sc_free_argv(char **, size_t);
static int sc_parse_port(const char *);
static int sc_match(const char *, const char *);
static const struct sc_keyword *sc_lookup(const char *);
static struct sc_rec *sc_add_rec(
    struct sc_parser *, enum sc_kind, const char *, int);
static const char *sc_add_file(struct sc_parser *, const char *);
static void sc_add_alias(struct sshconfig *, const char *, const char *, int);
static void sc_add_note(struct sshconfig *, const char *, ...)
    __attribute__((format(printf, 2, 3)));
static void sc_error(char **, const char *, ...)
    __attribute__((format(printf, 2, 3)));
struct sc_state;
static int sc_match_list(const char *, const char *, int);
static int sc_match_block(const struct sc_rec *, const struct sc_state *);
static void sc_walk(struct sc_parser *, struct sc_state *);
static void sc_evaluate(struct sc_parser *, struct sshconfig_host *);
static char *sc_expand(const char *, const char *, const char *const *, int);
static char *sc_identity(const char *, const char *, const char *);
static void sc_known_hosts(
    struct sc_parser *, const struct sc_state *, struct sshconfig_host *);
static void sc_buf_add(struct sc_buf *, const char *, size_t);
static void sc_parser_init(
    struct sc_parser *, const char *, struct sshconfig *);
static void sc_parser_free(struct sc_parser *);

/*
 * Read the ssh_config at path, with home standing for ~ (and ~/.ssh being
 * where relative Include paths live), into out. On success returns 0 and
 * out holds the concrete aliases and notes; the caller frees it with
 * sshconfig_free. On failure returns -1 with out empty and *cause set to an
 * allocated one-line message naming the file (and line); caller frees it.
 */
int
sshconfig_read(
    const char *path, const char *home, struct sshconfig *out, char **cause)
{
	struct sc_parser p;
	size_t i;

	sc_parser_init(&p, home, out);

	if (sc_read_file(&p, path, 0, 1, NULL, 0, cause) != 0) {
		sc_parser_free(&p);
		sshconfig_free(out);
		return -1;
	}
	for (i = 0; i < out->nhosts; i++)
		sc_evaluate(&p, &out->hosts[i]);
	sc_parser_free(&p);
	return 0;
}

/* Config files parsed once, for sshconfig_lookup of any host name. */
struct sshconfig_set {
	struct sc_parser p;
	struct sshconfig declared; /* what parsing adds: not asked for */
};

/*
 * Parse the config files in paths, read one after the other (ssh's user
 * then system file; a missing one is skipped), with home standing for ~.
 * Returns the set (caller frees with sshconfig_unload), or NULL with
 * *cause set (caller frees).
 */
struct sshconfig_set *
sshconfig_load(
    const char *const *paths, size_t npaths, const char *home, char **cause)
{
	struct sshconfig_set *set = xcalloc(1, sizeof *set);
	size_t i;

	sc_parser_init(&set->p, home, &set->declared);
	for (i = 0; i < npaths; i++) {
		if (sc_read_file(&set->p, paths[i], 0, 0, NULL, 0, cause) !=
		    0) {
			sshconfig_unload(set);
			return NULL;
		}
	}
	return set;
}

/* Free a set sshconfig_load returned. */
void
sshconfig_unload(struct sshconfig_set *set)
{
	if (set == NULL)
		return;
	sc_parser_free(&set->p);
	sshconfig_free(&set->declared);
	free(set);
}

/*
 * Evaluate the settings of one host name as `ssh -G HOST` does from a
 * loaded set: out then holds that one host (alias: host), whether or not
 * a Host line names it. Caller frees out with sshconfig_free.
 */
void
sshconfig_lookup(
    struct sshconfig_set *set, const char *host, struct sshconfig *out)
{
	struct sshconfig notes;

	memset(out, 0, sizeof *out);
	memset(&notes, 0, sizeof notes);
	out->hosts = xcalloc(1, sizeof *out->hosts);
	out->nhosts = 1;
	out->hosts[0].alias = xstrdup(host);
	out->hosts[0].file = xstrdup("");
	set->p.out = &notes; /* "never takes effect": not declared, not asked */
	sc_evaluate(&set->p, &out->hosts[0]);
	set->p.out = &set->declared;
	sshconfig_free(&notes);
}

/* Free what sshconfig_read filled in and leave the structure empty. */
void
sshconfig_free(struct sshconfig *cfg)
{
	struct sshconfig_host *h;
	size_t i, j;

	if (cfg == NULL)
		return;
	for (i = 0; i < cfg->nhosts; i++) {
		h = &cfg->hosts[i];
		free(h->alias);
		free(h->hostname);
		free(h->user);
		free(h->identity);
		free(h->proxy);
		free(h->file);
		for (j = 0; j < h->nknown_hosts; j++)
			free(h->known_hosts[j]);
		free(h->known_hosts);
	}
	free(cfg->hosts);
	for (i = 0; i < cfg->nnotes; i++)
		free(cfg->notes[i]);
	free(cfg->notes);
	memset(cfg, 0, sizeof *cfg);
}

/*
 * Read one file's lines into the record list. from/fromline name the
 * Include line that led here (NULL for the top file); named is 0 for a
 * glob match, which may vanish or be a directory without error.
 */
static int
sc_read_file(struct sc_parser *p, const char *path, int depth, int named,
    const char *from, int fromline, char **cause)
{
	FILE *f;
	struct stat sb;
	const char *name;
	char *line = NULL;
	size_t linesize = 0;
	int lineno = 0, err = 0, r = -1;

	if (depth > SSHCONFIG_MAX_DEPTH) {
		sc_error(
		    cause, "%s:%d: Include nesting too deep", from, fromline);
		return -1;
	}
	if ((f = fopen(path, "r")) == NULL) {
		/* An Include of a missing file is skipped, as ssh does. */
		if ((!named || from != NULL) && errno == ENOENT)
			return 0;
		if (from == NULL)
			sc_error(cause, "%s: %s", path, strerror(errno));
		else
			sc_error(cause, "%s:%d: %s: %s", from, fromline, path,
			    strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &sb) == -1)
		err = errno;
	else if (S_ISDIR(sb.st_mode))
		err = EISDIR;
	if (err != 0) {
		fclose(f);
		if (!named && err == EISDIR)
			return 0;
		if (from == NULL)
			sc_error(cause, "%s: %s", path, strerror(err));
		else
			sc_error(cause, "%s:%d: %s: %s", from, fromline, path,
			    strerror(err));
		return -1;
	}

	if (from != NULL && getline(&line, &linesize, f) != -1 &&
	    strcmp(line, SSHCONFIG_EXPORT_HEADER) == 0) {
		/* gpufleet's own export: its values came from here. */
		free(line);
		fclose(f);
		return 0;
	}
	rewind(f);
	name = sc_add_file(p, path);
	if (depth > 0)
		sc_add_rec(p, SC_INCLUDE_BEGIN, name, 0);
	while (getline(&line, &linesize, f) != -1) {
		if (lineno == INT_MAX) {
			sc_error(cause, "%s: too many lines", name);
			goto out;
		}
		lineno++;
		if (sc_parse_line(p, line, name, lineno, depth, cause) != 0)
			goto out;
	}
	if (ferror(f)) {
		sc_error(cause, "%s: %s", name, strerror(errno));
		goto out;
	}
	if (depth > 0)
		sc_add_rec(p, SC_INCLUDE_END, name, lineno);
	r = 0;
out:
	free(line);
	fclose(f);
	return r;
}

/*
 * Parse one line: split off the keyword (ending at whitespace or one '='),
 * tokenise the rest as OpenSSH's argv_split does and dispatch. Anything
 * after a NUL byte in the line is ignored, as OpenSSH does.
 */
static int
sc_parse_line(struct sc_parser *p, char *line, const char *file, int lineno,
    int depth, char **cause)
{
	const struct sc_keyword *k;
	char *kw, *rest, **argv = NULL, sep;
	size_t len, argc = 0;
	int r = -1;

	len = strlen(line);
	while (len > 0 && strchr(SC_WHITESPACE "\f", line[len - 1]) != NULL)
		line[--len] = '\0';

	kw = line + strspn(line, SC_WHITESPACE);
	if (*kw == '\0' || *kw == '#')
		return 0;
	len = strcspn(kw, SC_WHITESPACE "=");
	if (len == 0)
		return 0; /* a line starting with '=': no keyword */
	sep = kw[len];
	kw[len] = '\0';
	rest = kw + len + (sep != '\0');
	rest += strspn(rest, SC_WHITESPACE);
	if (sep != '=' && *rest == '=') {
		rest++;
		rest += strspn(rest, SC_WHITESPACE);
	}

	k = sc_lookup(kw);
	if (*rest == '\0') {
		sc_error(cause, "%s:%d: %.100s needs a value", file, lineno,
		    k != NULL ? k->name : kw);
		return -1;
	}
	if (sc_split(rest, &argv, &argc) != 0) {
		sc_error(cause, "%s:%d: unterminated quote", file, lineno);
		return -1;
	}

	if (k == NULL) {
		r = 0; /* one of the many keywords we do not need */
		goto out;
	}
	switch (k->key) {
	case SC_K_HOST:
		r = sc_host_line(p, argv, argc, file, lineno, cause);
		argv = NULL; /* now owned by the record */
		argc = 0;
		break;
	case SC_K_MATCH:
		r = sc_match_line(p, argv, argc, file, lineno, cause);
		argv = NULL; /* now owned by the record */
		argc = 0;
		break;
	case SC_K_INCLUDE:
		r = sc_include_line(p, argv, argc, file, lineno, depth, cause);
		break;
	default:
		r = sc_option_line(p, k, argv, argc, rest, file, lineno, cause);
		break;
	}
out:
	sc_free_argv(argv, argc);
	return r;
}

/* Record a Host line, noting skipped patterns and adding concrete aliases. */
static int
sc_host_line(struct sc_parser *p, char **argv, size_t argc, const char *file,
    int lineno, char **cause)
{
	struct sc_rec *rec;
	size_t i;

	for (i = 0; i < argc; i++) {
		if (*argv[i] == '\0') {
			sc_error(cause, "%s:%d: Host has an empty pattern",
			    file, lineno);
			sc_free_argv(argv, argc);
			return -1;
		}
	}
	for (i = 0; i < argc; i++) {
		if (*argv[i] == '!')
			sc_add_note(p->out,
			    "%s:%d: skipped pattern '%s' "
			    "(negated)",
			    file, lineno, argv[i]);
		else if (strpbrk(argv[i], "*?") != NULL)
			sc_add_note(p->out,
			    "%s:%d: skipped pattern '%s' "
			    "(wildcard)",
			    file, lineno, argv[i]);
		else
			sc_add_alias(p->out, argv[i], file, lineno);
	}
	rec = sc_add_rec(p, SC_HOST, file, lineno);
	rec->argv = argv;
	rec->argc = argc;
	return 0;
}

/*
 * Record a Match line. Its criteria are checked as ssh does: "all" alone
 * or after canonical/final, an argument for each criterion that takes one.
 * A criterion we cannot evaluate is noted; sc_match_block then never
 * applies its block.
 */
static int
sc_match_line(struct sc_parser *p, char **argv, size_t argc, const char *file,
    int lineno, char **cause)
{
	struct sc_rec *rec;
	const char *a;
	size_t i, nother = 0;
	int known;

	for (i = 0; i < argc; i++) {
		a = argv[i] + (argv[i][0] == '!');
		if (strcasecmp(a, "canonical") == 0 ||
		    strcasecmp(a, "final") == 0) {
			if (strcasecmp(a, "final") == 0)
				p->want_final = 1;
			continue;
		}
		if (strcasecmp(a, "all") == 0) {
			if (nother > 0 || i + 1 < argc) {
				sc_error(cause,
				    "%s:%d: Match all cannot be combined with "
				    "other criteria",
				    file, lineno);
				goto fail;
			}
			continue;
		}
		nother++;
		known = strcasecmp(a, "host") == 0 ||
		    strcasecmp(a, "originalhost") == 0 ||
		    strcasecmp(a, "user") == 0 ||
		    strcasecmp(a, "localuser") == 0;
		/* Every other criterion ssh has takes an argument too. */
		if (known && (i + 1 == argc || *argv[i + 1] == '\0')) {
			sc_error(cause, "%s:%d: Match %.100s needs an argument",
			    file, lineno, a);
			goto fail;
		}
		if (!known)
			sc_add_note(p->out,
			    "%s:%d: Match block never applies here (Match "
			    "%.100s is not evaluated by gpufleet)",
			    file, lineno, a);
		i++;
	}
	rec = sc_add_rec(p, SC_MATCH, file, lineno);
	rec->argv = argv;
	rec->argc = argc;
	return 0;
fail:
	sc_free_argv(argv, argc);
	return -1;
}

/*
 * Read the files an Include line names, in place. Relative paths are under
 * ~/.ssh, as for a user's configuration; an argument with glob characters
 * may match nothing, a plain path may be missing (ssh skips it: an Include
 * of ~/.ssh/gpufleet.conf stays valid after ssh-config --uninstall), but
 * one that exists must be readable.
 */
static int
sc_include_line(struct sc_parser *p, char **argv, size_t argc, const char *file,
    int lineno, int depth, char **cause)
{
	glob_t gl;
	char *path;
	size_t i, j;
	int isglob, r;

	for (i = 0; i < argc; i++) {
		if (*argv[i] == '\0') {
			sc_error(cause, "%s:%d: Include has an empty path",
			    file, lineno);
			return -1;
		}
		if (argv[i][0] == '~' &&
		    (argv[i][1] == '\0' || argv[i][1] == '/'))
			xasprintf(&path, "%s%s", p->home, argv[i] + 1);
		else if (argv[i][0] == '/' || argv[i][0] == '~')
			path = xstrdup(argv[i]);
		else
			xasprintf(&path, "%s/.ssh/%s", p->home, argv[i]);
		isglob = strpbrk(argv[i], "*?[") != NULL;

		if (!isglob && *path != '~') {
			r = sc_read_file(
			    p, path, depth + 1, 1, file, lineno, cause);
			free(path);
			if (r != 0)
				return -1;
			continue;
		}

		memset(&gl, 0, sizeof gl);
		r = glob(
		    path, GLOB_TILDE | (isglob ? 0 : GLOB_NOCHECK), NULL, &gl);
		if (r == GLOB_NOMATCH) {
			free(path);
			continue;
		}
		if (r != 0) {
			sc_error(cause, "%s:%d: glob failed for %s", file,
			    lineno, path);
			globfree(&gl);
			free(path);
			return -1;
		}
		free(path);
		for (j = 0; j < gl.gl_pathc; j++) {
			if (sc_read_file(p, gl.gl_pathv[j], depth + 1, !isglob,
				file, lineno, cause) != 0) {
				globfree(&gl);
				return -1;
			}
		}
		globfree(&gl);
	}
	return 0;
}

/*
 * Check and record one of the options we report. rest is the raw text
 * after the keyword, which ProxyJump and ProxyCommand take as their value.
 */
static int
sc_option_line(struct sc_parser *p, const struct sc_keyword *k, char **argv,
    size_t argc, const char *rest, const char *file, int lineno, char **cause)
{
	struct sc_rec *rec;
	char *value;
	size_t len;
	int port = 0;

	if (argc == 0 || *argv[0] == '\0') {
		sc_error(
		    cause, "%s:%d: %s needs a value", file, lineno, k->name);
		return -1;
	}
	if (k->key == SC_K_USERKNOWN || k->key == SC_K_GLOBALKNOWN) {
		/* Several files; the record keeps a copy of the list. */
		rec = sc_add_rec(p, SC_OPTION, file, lineno);
		rec->key = k->key;
		rec->argv = xreallocarray(NULL, argc, sizeof *rec->argv);
		for (rec->argc = 0; rec->argc < argc; rec->argc++)
			rec->argv[rec->argc] = xstrdup(argv[rec->argc]);
		return 0;
	}
	if (k->key == SC_K_PROXYJUMP || k->key == SC_K_PROXYCOMMAND) {
		value = xstrdup(rest + strspn(rest, SC_WHITESPACE "="));
		if (k->key == SC_K_PROXYJUMP) {
			value[strcspn(value, "#")] = '\0';
			len = strlen(value);
			while (len > 0 && strchr(" \t", value[len - 1]) != NULL)
				value[--len] = '\0';
		}
	} else {
		if (argc > 1) {
			sc_error(cause, "%s:%d: %s takes one value", file,
			    lineno, k->name);
			return -1;
		}
		if (k->key == SC_K_PORT &&
		    (port = sc_parse_port(argv[0])) == -1) {
			sc_error(cause, "%s:%d: bad port '%.100s'", file,
			    lineno, argv[0]);
			return -1;
		}
		value = xstrdup(argv[0]);
	}
	rec = sc_add_rec(p, SC_OPTION, file, lineno);
	rec->key = k->key;
	rec->value = value;
	rec->port = port;
	return 0;
}

/*
 * Split s into arguments as OpenSSH's argv_split does: on spaces and tabs,
 * with single and double quotes, backslash escapes of quotes, backslash and
 * (unquoted) space, stopping at a '#' that starts an argument. Returns -1
 * on an unterminated quote; otherwise the caller frees *argvp.
 */
static int
sc_split(const char *s, char ***argvp, size_t *argcp)
{
	char **argv = NULL, *arg;
	size_t argc = 0, i, j;
	char quote;

	*argvp = NULL;
	*argcp = 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] == ' ' || s[i] == '\t')
			continue;
		if (s[i] == '#')
			break;
		argv = xreallocarray(argv, argc + 1, sizeof *argv);
		arg = argv[argc++] = xmalloc(strlen(s + i) + 1);
		quote = '\0';
		for (j = 0; s[i] != '\0'; i++) {
			if (s[i] == '\\' &&
			    (s[i + 1] == '\'' || s[i + 1] == '"' ||
				s[i + 1] == '\\' ||
				(quote == '\0' && s[i + 1] == ' ')))
				arg[j++] = s[++i];
			else if (quote == '\0' && (s[i] == ' ' || s[i] == '\t'))
				break;
			else if (quote == '\0' && (s[i] == '"' || s[i] == '\''))
				quote = s[i];
			else if (quote != '\0' && s[i] == quote)
				quote = '\0';
			else
				arg[j++] = s[i];
		}
		arg[j] = '\0';
		if (quote != '\0') {
			sc_free_argv(argv, argc);
			return -1;
		}
		if (s[i] == '\0')
			break;
	}
	*argvp = argv;
	*argcp = argc;
	return 0;
}

static void
sc_free_argv(char **argv, size_t argc)
{
	size_t i;

	for (i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
}

/* Parse a decimal port 1..65535; returns -1 if it is not one. */
static int
sc_parse_port(const char *s)
{
	char *end;
	long v;

	if (strspn(s, "0123456789") != strlen(s))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > 65535)
		return -1;
	return (int)v;
}

/*
 * Match s against a pattern with '*' (any run) and '?' (any one
 * character), case-sensitively as OpenSSH's match_pattern. Iterative, so
 * hostile patterns cannot make it take exponential time.
 */
static int
sc_match(const char *s, const char *pat)
{
	const char *star = NULL, *mark = NULL;

	while (*s != '\0') {
		if (*pat == '*') {
			star = pat++;
			mark = s;
		} else if (*pat != '\0' && (*pat == '?' || *pat == *s)) {
			pat++;
			s++;
		} else if (star != NULL) {
			pat = star + 1;
			s = ++mark;
		} else
			return 0;
	}
	while (*pat == '*')
		pat++;
	return *pat == '\0';
}

/* Find a keyword we act on, case-insensitively; NULL for any other. */
static const struct sc_keyword *
sc_lookup(const char *kw)
{
	size_t i;

	for (i = 0; i < sizeof sc_keywords / sizeof sc_keywords[0]; i++) {
		if (strcasecmp(kw, sc_keywords[i].name) == 0)
			return &sc_keywords[i];
	}
	return NULL;
}

/* Append a zeroed record; the pointer is valid until the next one. */
static struct sc_rec *
sc_add_rec(struct sc_parser *p, enum sc_kind kind, const char *file, int line)
{
	struct sc_rec *rec;

	if (p->nrecs == p->recsize) {
		p->recsize = p->recsize == 0 ? 64 : p->recsize * 2;
		p->recs = xreallocarray(p->recs, p->recsize, sizeof *p->recs);
	}
	rec = &p->recs[p->nrecs++];
	memset(rec, 0, sizeof *rec);
	rec->kind = kind;
	rec->file = file;
	rec->line = line;
	return rec;
}

/* Keep a copy of a file name for the records that point to it. */
static const char *
sc_add_file(struct sc_parser *p, const char *path)
{
	p->files = xreallocarray(p->files, p->nfiles + 1, sizeof *p->files);
	p->files[p->nfiles] = xstrdup(path);
	return p->files[p->nfiles++];
}

/* Add a concrete alias unless an earlier Host line declared it already. */
static void
sc_add_alias(
    struct sshconfig *cfg, const char *alias, const char *file, int line)
{
	struct sshconfig_host *h;
	size_t i;

	for (i = 0; i < cfg->nhosts; i++) {
		if (strcmp(cfg->hosts[i].alias, alias) == 0)
			return;
	}
	cfg->hosts =
	    xreallocarray(cfg->hosts, cfg->nhosts + 1, sizeof *cfg->hosts);
	h = &cfg->hosts[cfg->nhosts++];
	memset(h, 0, sizeof *h);
	h->alias = xstrdup(alias);
	h->file = xstrdup(file);
	h->line = line;
}

/* Append a formatted note to cfg. */
static void
sc_add_note(struct sshconfig *cfg, const char *fmt, ...)
{
	va_list ap;

	cfg->notes =
	    xreallocarray(cfg->notes, cfg->nnotes + 1, sizeof *cfg->notes);
	va_start(ap, fmt);
	xvasprintf(&cfg->notes[cfg->nnotes++], fmt, ap);
	va_end(ap);
}

/* Set *cause to a formatted message, if the caller wants one. */
static void
sc_error(char **cause, const char *fmt, ...)
{
	va_list ap;

	if (cause == NULL)
		return;
	va_start(ap, fmt);
	xvasprintf(cause, fmt, ap);
	va_end(ap);
}

/* What one walk of the records has found so far for an alias. */
struct sc_state {
	const char *alias;
	const char *host; /* what Host lines match: alias, or in the final
			     walk the host name the first one found */
	int final;
	const char *localuser;
	const char *hostname, *user, *identity;
	const struct sc_rec *proxy;
	const struct sc_rec *known[2]; /* UserKnownHostsFile, Global... */
	int port;
	int applied; /* a Host line declaring alias was active */
};

/*
 * Match s against a comma-separated list of patterns, each negated with
 * '!', as OpenSSH's match_pattern_list: 1 if a pattern matches and no
 * negated one does. lower compares s in lower case (host names).
 */
static int
sc_match_list(const char *s, const char *list, int lower)
{
	char *copy, *pat, *next, *ls = xstrdup(s), *c;
	int got = 0, negated;

	if (lower) {
		for (c = ls; *c != '\0'; c++) {
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		}
	}
	copy = xstrdup(list);
	for (pat = copy; pat != NULL; pat = next) {
		if ((next = strchr(pat, ',')) != NULL)
			*next++ = '\0';
		if ((negated = *pat == '!'))
			pat++;
		if (lower) {
			for (c = pat; *c != '\0'; c++) {
				if (*c >= 'A' && *c <= 'Z')
					*c = (char)(*c - 'A' + 'a');
			}
		}
		if (!sc_match(ls, pat))
			continue;
		if (negated) {
			got = 0;
			break;
		}
		got = 1;
	}
	free(copy);
	free(ls);
	return got;
}

/*
 * Match a host name against a comma-separated pattern list as OpenSSH's
 * match_hostname: without case, 1 if a pattern matches and no negated
 * one does.
 */
int
sshconfig_match_hosts(const char *host, const char *list)
{
	return sc_match_list(host, list, 1);
}

/*
 * Whether a Match line applies in this walk. Every criterion must hold;
 * one we do not evaluate (noted when parsed) makes the block not apply.
 */
static int
sc_match_block(const struct sc_rec *rec, const struct sc_state *st)
{
	const char *a, *arg, *vals[1];
	char *host;
	size_t i;
	int negated, ok, result = 1;

	for (i = 0; i < rec->argc; i++) {
		a = rec->argv[i];
		if ((negated = *a == '!'))
			a++;
		if (strcasecmp(a, "all") == 0)
			ok = 1;
		else if (strcasecmp(a, "canonical") == 0 ||
		    strcasecmp(a, "final") == 0)
			ok = st->final;
		else {
			arg = i + 1 < rec->argc ? rec->argv[++i] : "";
			if (strcasecmp(a, "host") == 0) {
				vals[0] = st->alias;
				host = st->hostname != NULL
				    ? sc_expand(st->hostname, "h", vals, 0)
				    : xstrdup(st->alias);
				ok = sc_match_list(host, arg, 1);
				free(host);
			} else if (strcasecmp(a, "originalhost") == 0)
				ok = sc_match_list(st->alias, arg, 1);
			else if (strcasecmp(a, "user") == 0)
				ok = sc_match_list(
				    st->user != NULL ? st->user : st->localuser,
				    arg, 0);
			else if (strcasecmp(a, "localuser") == 0)
				ok = sc_match_list(st->localuser, arg, 0);
			else
				return 0; /* not evaluated: noted */
		}
		if (ok == negated)
			result = 0;
	}
	return result;
}

/* One walk over the records, as one pass of ssh's config reading. */
static void
sc_walk(struct sc_parser *p, struct sc_state *st)
{
	struct {
		int active;
		int never;
	} stack[SSHCONFIG_MAX_DEPTH + 1];
	const struct sc_rec *rec;
	const char *pat;
	size_t sp = 0, i, j;
	int active = 1, never = 0, declares, negated;

	for (i = 0; i < p->nrecs; i++) {
		rec = &p->recs[i];
		switch (rec->kind) {
		case SC_HOST:
			active = 0;
			if (never)
				break;
			declares = 0;
			for (j = 0; j < rec->argc; j++) {
				if (strcmp(rec->argv[j], st->alias) == 0)
					declares = 1;
			}
			for (j = 0; j < rec->argc; j++) {
				pat = rec->argv[j];
				if ((negated = *pat == '!'))
					pat++;
				if (!sc_match(st->host, pat))
					continue;
				if (negated) {
					active = 0;
					break;
				}
				active = 1;
			}
			if (declares && active)
				st->applied = 1;
			break;
		case SC_MATCH:
			active = !never && sc_match_block(rec, st);
			break;
		case SC_INCLUDE_BEGIN:
			if (sp < sizeof stack / sizeof stack[0]) {
				stack[sp].active = active;
				stack[sp].never = never;
				sp++;
			}
			if (!active)
				never = 1;
			break;
		case SC_INCLUDE_END:
			if (sp > 0) {
				sp--;
				active = stack[sp].active;
				never = stack[sp].never;
			}
			break;
		case SC_OPTION:
			if (!active)
				break;
			switch (rec->key) {
			case SC_K_HOSTNAME:
				if (st->hostname == NULL)
					st->hostname = rec->value;
				break;
			case SC_K_PORT:
				if (st->port == 0)
					st->port = rec->port;
				break;
			case SC_K_USER:
				if (st->user == NULL)
					st->user = rec->value;
				break;
			case SC_K_IDENTITY:
				if (st->identity == NULL &&
				    strcasecmp(rec->value, "none") != 0)
					st->identity = rec->value;
				break;
			case SC_K_PROXYJUMP:
			case SC_K_PROXYCOMMAND:
				if (st->proxy == NULL)
					st->proxy = rec;
				break;
			case SC_K_USERKNOWN:
			case SC_K_GLOBALKNOWN:
				j = rec->key == SC_K_GLOBALKNOWN;
				if (st->known[j] == NULL)
					st->known[j] = rec;
				break;
			default:
				break;
			}
			break;
		}
	}
}

/*
 * Fill in the effective settings of one alias, as `ssh -G ALIAS` would
 * see them, and note an alias whose own Host line can never take effect.
 */
static void
sc_evaluate(struct sc_parser *p, struct sshconfig_host *h)
{
	struct sc_state st;
	const char *vals[1];
	char *host = NULL, *c;

	memset(&st, 0, sizeof st);
	st.alias = st.host = h->alias;
	st.localuser = p->localuser;
	sc_walk(p, &st);
	if (p->want_final) {
		/* ssh's second pass: Host lines see the host name found. */
		vals[0] = h->alias;
		if (st.hostname != NULL)
			host = sc_expand(st.hostname, "h", vals, 0);
		st.host = host != NULL ? host : h->alias;
		st.final = 1;
		sc_walk(p, &st);
	}

	if (st.hostname != NULL) {
		/* ssh lowercases the name it connects to; so do we. */
		vals[0] = h->alias;
		h->hostname = sc_expand(st.hostname, "h", vals, 0);
		for (c = h->hostname; *c != '\0'; c++) {
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		}
	}
	h->port = st.port;
	if (st.user != NULL)
		h->user = xstrdup(st.user);
	if (st.identity != NULL)
		h->identity = sc_identity(st.identity, p->home,
		    h->hostname != NULL ? h->hostname : h->alias);
	if (st.proxy != NULL && strcasecmp(st.proxy->value, "none") != 0) {
		xasprintf(&h->proxy, "%s %s",
		    st.proxy->key == SC_K_PROXYJUMP ? "ProxyJump"
						    : "ProxyCommand",
		    st.proxy->value);
	}
	sc_known_hosts(p, &st, h);
	if (!st.applied)
		sc_add_note(p->out,
		    "%s:%d: alias '%s' never takes effect "
		    "(negated or conditionally included)",
		    h->file, h->line, h->alias);
	free(host);
}

/*
 * The known_hosts files ssh would read for h: UserKnownHostsFile's, then
 * GlobalKnownHostsFile's, each defaulting as ssh's; "none" names none.
 */
static void
sc_known_hosts(
    struct sc_parser *p, const struct sc_state *st, struct sshconfig_host *h)
{
	static const char *const defaults[2][2] = {
		{ "~/.ssh/known_hosts", "~/.ssh/known_hosts2" },
		{ "/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2" },
	};
	const char *host = h->hostname != NULL ? h->hostname : h->alias;
	const char *const *v;
	size_t i, j, n;

	for (i = 0; i < 2; i++) {
		if (st->known[i] != NULL) {
			v = (const char *const *)st->known[i]->argv;
			n = st->known[i]->argc;
		} else {
			v = defaults[i];
			n = 2;
		}
		for (j = 0; j < n; j++) {
			if (strcasecmp(v[j], "none") == 0)
				continue;
			h->known_hosts = xreallocarray(h->known_hosts,
			    h->nknown_hosts + 1, sizeof *h->known_hosts);
			h->known_hosts[h->nknown_hosts++] =
			    sc_identity(v[j], p->home, host);
		}
	}
}

/*
 * Expand %-escapes in s: %k for each character k of keys becomes the
 * matching vals entry. "%%" becomes "%" unless keep is set, when it stays
 * "%%" so the result is still a template; other escapes are left as they
 * are. Caller frees.
 */
static char *
sc_expand(const char *s, const char *keys, const char *const *vals, int keep)
{
	struct sc_buf b = { NULL, 0, 0 };
	const char *k;

	sc_buf_add(&b, "", 0);
	while (*s != '\0') {
		if (*s != '%' || s[1] == '\0') {
			sc_buf_add(&b, s++, 1);
			continue;
		}
		if (s[1] == '%') {
			sc_buf_add(&b, s, keep ? 2 : 1);
			s += 2;
			continue;
		}
		if ((k = strchr(keys, s[1])) != NULL)
			sc_buf_add(&b, vals[k - keys], strlen(vals[k - keys]));
		else
			sc_buf_add(&b, s, 2);
		s += 2;
	}
	return b.s;
}

/*
 * Expand an IdentityFile: a leading ~ or ~/ becomes home, %d home and %h
 * the host name; "%%", %u, %r and the rest stay for the user of the path.
 * Caller frees.
 */
static char *
sc_identity(const char *value, const char *home, const char *host)
{
	const char *vals[2];
	char *tilde, *out;

	if (value[0] == '~' && (value[1] == '\0' || value[1] == '/'))
		xasprintf(&tilde, "%s%s", home, value + 1);
	else
		tilde = xstrdup(value);
	vals[0] = home;
	vals[1] = host;
	out = sc_expand(tilde, "dh", vals, 1);
	free(tilde);
	return out;
}

/* Append n bytes of s to a NUL-terminated buffer. */
static void
sc_buf_add(struct sc_buf *b, const char *s, size_t n)
{
	if (b->size - b->len <= n) {
		while (b->size - b->len <= n)
			b->size = b->size == 0 ? 64 : b->size * 2;
		b->s = xreallocarray(b->s, b->size, 1);
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

/* Start a parser reading into an empty out, ~ standing for home. */
static void
sc_parser_init(struct sc_parser *p, const char *home, struct sshconfig *out)
{
	struct passwd *pw;
	const char *env;

	memset(out, 0, sizeof *out);
	memset(p, 0, sizeof *p);
	p->home = home;
	p->out = out;
	if ((pw = getpwuid(getuid())) != NULL)
		p->localuser = xstrdup(pw->pw_name);
	else
		p->localuser =
		    xstrdup((env = getenv("USER")) != NULL ? env : "");
}

static void
sc_parser_free(struct sc_parser *p)
{
	size_t i;

	for (i = 0; i < p->nrecs; i++) {
		sc_free_argv(p->recs[i].argv, p->recs[i].argc);
		free(p->recs[i].value);
	}
	free(p->recs);
	for (i = 0; i < p->nfiles; i++)
		free(p->files[i]);
	free(p->files);
	free(p->localuser);
}
