/*
 * Unit tests for sshconfig.c: reading ssh_config(5) files as `ssh ALIAS`
 * (OpenSSH 9.2) would see them. Fixtures live in tests/data/sshconfig; the
 * fixture home is tests/data/sshconfig/home, so relative Includes resolve
 * under home/.ssh. Edge cases that are easier written inline go through a
 * temporary file. In expected strings @D@ stands for the fixture directory,
 * @H@ for the fixture home and @F@ for the temporary file.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sshconfig.h"
#include "xmalloc.h"

struct host_case {
	const char *file; /* fixture name, or config text for snippets */
	const char *alias;
	const char *hostname;
	int port;
	const char *user;
	const char *identity;
	const char *proxy;
};

struct list_case {
	const char *file;
	const char *aliases; /* "a|b|c" in order */
	const char *notes;   /* one per line */
};

struct error_case {
	const char *file; /* fixture path, or config text for snippets */
	const char *cause;
};

static const char *data_dir(void);
static char *subst(const char *, const char *);
static char *fixture(const char *);
static char *home_dir(void);
static char *write_temp(const char *, size_t);
static void remove_temp(char *);
static char *join_aliases(const struct sshconfig *);
static char *join_notes(const struct sshconfig *);
static const struct sshconfig_host *find_host(
    const struct sshconfig *, const char *);
static void check_host(const struct sshconfig *, const struct host_case *);
static void assert_str_or_null(const char *, const char *, const char *);
static Suite *sshconfig_suite(void);

static const struct host_case host_cases[] = {
	/* Basic blocks. */
	{ "basic.conf", "web", "10.0.0.5", 2222, "alice", "@H@/.ssh/id_web",
	    NULL },
	{ "basic.conf", "db", "db.internal", 0, "bob", NULL, NULL },
	/* Keyword case, Key=Value, Key = Value, quoting, comments. */
	{ "forms.conf", "eq1", "eq1.example", 2200, "carol", NULL, NULL },
	{ "forms.conf", "eq2", "quoted host", 22, "dave", NULL, NULL },
	{ "forms.conf", "quoted-alias", "ab cd", 0, "single q",
	    "@H@/keys/my key", NULL },
	{ "forms.conf", "spaced alias", "ab cd", 0, "single q",
	    "@H@/keys/my key", NULL },
	{ "forms.conf", "odd", "x#not-a-comment", 0, "=eq", "@H@", NULL },
	/* First obtained value wins; Host * at the end fills the gaps. */
	{ "defaults.conf", "alpha", "alpha.example.com", 2201, "alpha-user",
	    "@H@/.ssh/id_alpha", NULL },
	{ "defaults.conf", "beta", "beta.example.com", 2201, "beta-user",
	    "@H@/.ssh/id_beta.example.com", NULL },
	{ "defaults.conf", "gamma", NULL, 22, "ubuntu", "@H@/.ssh/id_gamma",
	    NULL },
	{ "neverapplies.conf", "lonely", NULL, 0, "star", NULL, NULL },
	/* Lines before any Host apply to all. */
	{ "global.conf", "one", "one.example", 2000, "early", NULL, NULL },
	{ "global.conf", "two", NULL, 2000, "early", NULL, NULL },
	/* Negation, multiple aliases per line, the shared proxy slot. */
	{ "negation.conf", "gpu-1", NULL, 2022, "gpu", NULL,
	    "ProxyJump bastion.example:2222" },
	{ "negation.conf", "gpu-2", NULL, 0, "gpu", NULL,
	    "ProxyJump bastion.example:2222" },
	{ "negation.conf", "gpu-secure", NULL, 2022, "gpu", NULL,
	    "ProxyCommand ssh -W %h:%p jump  # kept verbatim" },
	{ "proxy.conf", "nojump", NULL, 0, NULL, NULL, NULL },
	{ "proxy.conf", "cmd", NULL, 0, NULL, NULL,
	    "ProxyCommand nc -X connect -x proxy:8080 %h %p" },
	{ "proxy.conf", "nocmd", NULL, 0, NULL, NULL, NULL },
	{ "proxy.conf", "chain", NULL, 0, NULL, NULL,
	    "ProxyJump alice@hop1,hop2:2200" },
	{ "proxy.conf", "plain", NULL, 0, NULL, NULL, "ProxyJump fallback" },
	/* Match all applies; Match exec is not run, so never applies. */
	{ "patterns.conf", "real", NULL, 2022, "everyone", NULL, NULL },
	{ "patterns.conf", "late", NULL, 0, "everyone", NULL, NULL },
	/* Match all then Include: the included aliases take effect. */
	{ "matchall.conf", "vast-h100", "ssh4.vast.ai", 12345, "root", NULL,
	    NULL },
	{ "matchall.conf", "laptop", "192.168.1.2", 0, "fallback", NULL, NULL },
	/* Include: glob, relative path, ~/, conditional. */
	{ "include.conf", "inc-a", "a.example", 2100, NULL, NULL, NULL },
	{ "include.conf", "inc-b", NULL, 2100, "b-user", NULL, NULL },
	{ "include.conf", "main", NULL, 2100, "main-user", "@H@/.ssh/id_main",
	    NULL },
	{ "include.conf", "inc-c", NULL, 2100, NULL, NULL, NULL },
	{ "include.conf", "other", "other.example", 2100, NULL, NULL, NULL },
};

static const struct list_case list_cases[] = {
	{ "basic.conf", "web|db", "" },
	{ "forms.conf", "eq1|eq2|quoted-alias|spaced alias|odd", "" },
	{ "defaults.conf", "alpha|beta|gamma",
	    "@D@/defaults.conf:21: skipped pattern '*' (wildcard)\n" },
	{ "global.conf", "one|two", "" },
	{ "negation.conf", "gpu-1|gpu-2|gpu-secure",
	    "@D@/negation.conf:1: skipped pattern '*' (wildcard)\n"
	    "@D@/negation.conf:1: skipped pattern '!gpu-secure' (negated)\n"
	    "@D@/negation.conf:7: skipped pattern '!gpu-2' (negated)\n"
	    "@D@/negation.conf:7: skipped pattern 'gpu-*' (wildcard)\n" },
	{ "proxy.conf", "nojump|cmd|nocmd|chain|plain",
	    "@D@/proxy.conf:11: skipped pattern '*' (wildcard)\n" },
	{ "patterns.conf", "real|late",
	    "@D@/patterns.conf:1: skipped pattern '*.corp' (wildcard)\n"
	    "@D@/patterns.conf:1: skipped pattern 'web?' (wildcard)\n"
	    "@D@/patterns.conf:4: Match block never applies here (Match exec "
	    "is not evaluated by gpufleet)\n" },
	{ "matchall.conf", "laptop|vast-h100",
	    "@D@/matchall.conf:5: skipped pattern '*' (wildcard)\n" },
	{ "matchinclude.conf", "vast-h100",
	    "@H@/.ssh/matchall-vast.conf:1: alias 'vast-h100' never takes "
	    "effect (negated or conditionally included)\n" },
	{ "neverapplies.conf", "lonely",
	    "@D@/neverapplies.conf:2: skipped pattern '!lonely' (negated)\n"
	    "@D@/neverapplies.conf:4: skipped pattern '*' (wildcard)\n"
	    "@D@/neverapplies.conf:2: alias 'lonely' never takes effect "
	    "(negated "
	    "or conditionally included)\n" },
	{ "include.conf", "inc-a|inc-b|main|inc-c|other",
	    "@H@/.ssh/conf.d/20-second.conf:3: skipped pattern '*' (wildcard)\n"
	    "@H@/.ssh/cond.conf:2: alias 'inc-c' never takes effect (negated "
	    "or "
	    "conditionally included)\n" },
};

/* Where each alias was declared: file:line of its first Host line. */
static const struct error_case origin_cases[] = {
	{ "basic.conf web", "@D@/basic.conf:2" },
	{ "defaults.conf alpha", "@D@/defaults.conf:2" },
	{ "forms.conf spaced alias", "@D@/forms.conf:11" },
	{ "include.conf inc-a", "@H@/.ssh/conf.d/10-first.conf:1" },
	{ "include.conf main", "@D@/include.conf:2" },
	{ "include.conf inc-c", "@H@/.ssh/cond.conf:2" },
};

static const struct error_case error_cases[] = {
	{ "@D@/does-not-exist.conf",
	    "@D@/does-not-exist.conf: No such file or directory" },
	{ "@D@", "@D@: Is a directory" },
	{ "@H@/.ssh/loop.conf",
	    "@H@/.ssh/loop.conf:1: Include nesting too deep" },
	{ "@D@/badport.conf", "@D@/badport.conf:2: bad port '70000'" },
	{ "@D@/noport.conf", "@D@/noport.conf:2: Port needs a value" },
	{ "@D@/unterminated.conf",
	    "@D@/unterminated.conf:2: unterminated quote" },
};

static const struct error_case snippet_errors[] = {
	{ "Host x\n\tPort\n", "@F@:2: Port needs a value" },
	{ "Host x\n\tPort   \t\n", "@F@:2: Port needs a value" },
	{ "Host x\n\tPort=\n", "@F@:2: Port needs a value" },
	{ "Port \"\"\n", "@F@:1: Port needs a value" },
	{ "Port # comment only\n", "@F@:1: Port needs a value" },
	{ "Port 0\n", "@F@:1: bad port '0'" },
	{ "Port 65536\n", "@F@:1: bad port '65536'" },
	{ "Port -22\n", "@F@:1: bad port '-22'" },
	{ "Port +22\n", "@F@:1: bad port '+22'" },
	{ "Port 22x\n", "@F@:1: bad port '22x'" },
	{ "Port ssh\n", "@F@:1: bad port 'ssh'" },
	{ "Port 99999999999999999999999\n",
	    "@F@:1: bad port '99999999999999999999999'" },
	{ "Host a\nHost b\n\tPort 22 23\n", "@F@:3: Port takes one value" },
	{ "Host nevermatched\n\tPort 1x\n", "@F@:2: bad port '1x'" },
	{ "HostName\n", "@F@:1: HostName needs a value" },
	{ "user\n", "@F@:1: User needs a value" },
	{ "IdentityFile\n", "@F@:1: IdentityFile needs a value" },
	{ "ProxyJump\n", "@F@:1: ProxyJump needs a value" },
	{ "ProxyCommand \"\"\n", "@F@:1: ProxyCommand needs a value" },
	{ "Host\n", "@F@:1: Host needs a value" },
	{ "Match\n", "@F@:1: Match needs a value" },
	{ "Match all host x\n",
	    "@F@:1: Match all cannot be combined with "
	    "other criteria" },
	{ "Match host x all\n",
	    "@F@:1: Match all cannot be combined with "
	    "other criteria" },
	{ "Match host\n", "@F@:1: Match host needs an argument" },
	{ "Match originalhost x user\n",
	    "@F@:1: Match user needs an argument" },
	{ "Include\n", "@F@:1: Include needs a value" },
	{ "SomeUnknownOption\n", "@F@:1: SomeUnknownOption needs a value" },
	{ "Host a \"\"\n", "@F@:1: Host has an empty pattern" },
	{ "Include \"\"\n", "@F@:1: Include has an empty path" },
	{ "Host x\n\tHostName \"open\n", "@F@:2: unterminated quote" },
	{ "Host 'x\n", "@F@:1: unterminated quote" },
	{ "Unknown \"open\n", "@F@:1: unterminated quote" },
	{ "User a b\n", "@F@:1: User takes one value" },
	{ "Include /\n", "@F@:1: /: Is a directory" },
};

static const struct host_case snippet_hosts[] = {
	/* A missing Include is skipped, as ssh does; the rest is read. */
	{ "Include /nonexistent-gpufleet-test/x.conf\nHost x\n\tUser u\n", "x",
	    NULL, 0, "u", NULL, NULL },
	{ "Host x\nInclude nope.conf\n\tUser u\n", "x", NULL, 0, "u", NULL,
	    NULL },
	{ "Frobnicate yes\nSendEnv LANG LC_*\nHost x\n\tUser u\n", "x", NULL, 0,
	    "u", NULL, NULL },
	{ "Host x\r\n\tUser u\r\n\tPort 2222\r\n", "x", NULL, 2222, "u", NULL,
	    NULL },
	{ "Host x\n\tPort 65535\n", "x", NULL, 65535, NULL, NULL, NULL },
	{ "Host x\n\tPort 1\n", "x", NULL, 1, NULL, NULL, NULL },
	{ "Host x\n\tPort 022\n", "x", NULL, 22, NULL, NULL, NULL },
	{ "  # indented comment\n\n\t\nHost x\t# c\n  User u#tail\n", "x", NULL,
	    0, "u#tail", NULL, NULL },
	{ "Host x\n\tUser=u\n", "x", NULL, 0, "u", NULL, NULL },
	{ "Host x\n\tUser = u\n", "x", NULL, 0, "u", NULL, NULL },
	{ "Host x\n\tUser==u\n", "x", NULL, 0, "=u", NULL, NULL },
	{ "Host x\n\tUser a\\\"b\n", "x", NULL, 0, "a\"b", NULL, NULL },
	{ "Host x\n\tUser \"a # b\"\n", "x", NULL, 0, "a # b", NULL, NULL },
	{ "Host x\n\tuSeR mixed\n\thOSTnAME H\n", "x", "h", 0, "mixed", NULL,
	    NULL },
	{ "Host x\n\tHostName %h.%%.%p\n", "x", "x.%.%p", 0, NULL, NULL, NULL },
	{ "Host x\n\tHostName real\n\tIdentityFile ~/k_%h_%u_%r_%%h\n", "x",
	    "real", 0, NULL, "@H@/k_real_%u_%r_%%h", NULL },
	{ "Host x\n\tIdentityFile ~user/k\n", "x", NULL, 0, NULL, "~user/k",
	    NULL },
	{ "Host x\n\tIdentityFile /abs/~/k\n", "x", NULL, 0, NULL, "/abs/~/k",
	    NULL },
	{ "Host x\n\tIdentityFile none\n\tIdentityFile k2\n", "x", NULL, 0,
	    NULL, "k2", NULL },
	{ "Host x\n\tProxyJump NONE\n\tProxyCommand nc %h %p\n", "x", NULL, 0,
	    NULL, NULL, NULL },
	{ "Host x\n\tProxyCommand=  sh -c \"a # b\"\n", "x", NULL, 0, NULL,
	    NULL, "ProxyCommand sh -c \"a # b\"" },
	{ "Host x\n\tProxyJump = j1,j2\t# why\n", "x", NULL, 0, NULL, NULL,
	    "ProxyJump j1,j2" },
	{ "Host X\n\tUser upper\nHost x\n\tUser lower\n", "x", NULL, 0, "lower",
	    NULL, NULL },
	{ "Host x\n\tInclude nomatch-*.conf\n\tUser after\n", "x", NULL, 0,
	    "after", NULL, NULL },
	{ "Host a?c\n\tUser q\nHost abc\n", "abc", NULL, 0, "q", NULL, NULL },
	{ "Host *b*c*\n\tUser star\nHost abbbc\n", "abbbc", NULL, 0, "star",
	    NULL, NULL },
	{ "Host *x\n\tUser star\nHost abbbc\n", "abbbc", NULL, 0, NULL, NULL,
	    NULL },
	{ "Host !x *\n\tUser neg\nHost x y\n", "x", NULL, 0, NULL, NULL, NULL },
	{ "Host !x *\n\tUser neg\nHost x y\n", "y", NULL, 0, "neg", NULL,
	    NULL },
	{ "Host x\nMatch all\n\tUser m\nHost *\n\tUser star\n", "x", NULL, 0,
	    "m", NULL, NULL },
	/* Match host sees the HostName so far; originalhost the alias. */
	{ "Host x\n\tHostName Real.Example\nMatch host real.example\n"
	  "\tPort 77\nMatch originalhost X\n\tUser ou\n",
	    "x", "real.example", 77, "ou", NULL, NULL },
	{ "Match host x\n\tPort 5\nHost x\n\tHostName elsewhere\n", "x",
	    "elsewhere", 5, NULL, NULL, NULL },
	{ "Host x\n\tHostName elsewhere\nMatch host x\n\tPort 5\n", "x",
	    "elsewhere", 0, NULL, NULL, NULL },
	{ "Host x\n\tHostName %h.lan\nMatch host x.lan,!y*\n\tPort 6\n", "x",
	    "x.lan", 6, NULL, NULL, NULL },
	{ "Match !host x\n\tUser notx\nHost x y\n", "x", NULL, 0, NULL, NULL,
	    NULL },
	{ "Match !host x\n\tUser notx\nHost x y\n", "y", NULL, 0, "notx", NULL,
	    NULL },
	/* Every criterion must hold. */
	{ "Match originalhost x host y\n\tUser both\nHost x\n", "x", NULL, 0,
	    NULL, NULL, NULL },
	{ "Match originalhost x localuser *\n\tUser both\nHost x\n", "x", NULL,
	    0, "both", NULL, NULL },
	{ "Match !localuser *\n\tUser nobody\nHost x\n", "x", NULL, 0, NULL,
	    NULL, NULL },
	/* Match user sees the User so far (or the local user). */
	{ "Match user *\n\tPort 8\nHost x\n", "x", NULL, 8, NULL, NULL, NULL },
	{ "Host x\n\tUser bob\nMatch user bob\n\tPort 9\n", "x", NULL, 9, "bob",
	    NULL, NULL },
	{ "Match user bob\n\tPort 9\nHost x\n\tUser bob\n", "x", NULL, 0, "bob",
	    NULL, NULL },
	/* Match final: a second walk, Host lines seeing the host name. */
	{ "Match user bob\n\tPort 9\nHost x\n\tUser bob\nMatch final\n", "x",
	    NULL, 9, "bob", NULL, NULL },
	{ "Host a\n\tHostName real.example\nMatch final host real.example\n"
	  "\tPort 1001\nHost real.example\n\tUser finaluser\n",
	    "a", "real.example", 1001, "finaluser", NULL, NULL },
	{ "Match canonical\n\tPort 3\nHost x\n", "x", NULL, 0, NULL, NULL,
	    NULL },
	/* exec is not run: its block never applies. */
	{ "Match exec true\n\tUser e\nHost x\n", "x", NULL, 0, NULL, NULL,
	    NULL },
	{ "Match !exec false\n\tUser e\nHost x\n", "x", NULL, 0, NULL, NULL,
	    NULL },
};

static const char *
data_dir(void)
{
	const char *d = getenv("GPUFLEET_TEST_DATA");

	return d != NULL ? d : "tests/data";
}

/* Replace @D@, @H@ and @F@ in tmpl. Caller frees. */
static char *
subst(const char *tmpl, const char *tmpfile)
{
	char *out = xstrdup(""), *next, *d, *h;
	const char *rep;

	xasprintf(&d, "%s/sshconfig", data_dir());
	xasprintf(&h, "%s/sshconfig/home", data_dir());
	while (*tmpl != '\0') {
		rep = NULL;
		if (strncmp(tmpl, "@D@", 3) == 0)
			rep = d;
		else if (strncmp(tmpl, "@H@", 3) == 0)
			rep = h;
		else if (strncmp(tmpl, "@F@", 3) == 0 && tmpfile != NULL)
			rep = tmpfile;
		if (rep != NULL) {
			xasprintf(&next, "%s%s", out, rep);
			tmpl += 3;
		} else {
			xasprintf(&next, "%s%c", out, *tmpl);
			tmpl++;
		}
		free(out);
		out = next;
	}
	free(d);
	free(h);
	return out;
}

static char *
fixture(const char *name)
{
	char *path;

	xasprintf(&path, "%s/sshconfig/%s", data_dir(), name);
	return path;
}

static char *
home_dir(void)
{
	return fixture("home");
}

/* Write len bytes to a new file in a new temporary directory. */
static char *
write_temp(const char *text, size_t len)
{
	const char *tmp = getenv("TMPDIR");
	char *dir, *path;
	FILE *f;

	xasprintf(&dir, "%s/sshconfig-test.XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	xasprintf(&path, "%s/config", dir);
	free(dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* Remove a file made by write_temp and its directory. */
static void
remove_temp(char *path)
{
	char *slash;

	unlink(path);
	if ((slash = strrchr(path, '/')) != NULL) {
		*slash = '\0';
		rmdir(path);
	}
	free(path);
}

static char *
join_aliases(const struct sshconfig *cfg)
{
	char *out = xstrdup(""), *next;
	size_t i;

	for (i = 0; i < cfg->nhosts; i++) {
		xasprintf(&next, "%s%s%s", out, i == 0 ? "" : "|",
		    cfg->hosts[i].alias);
		free(out);
		out = next;
	}
	return out;
}

static char *
join_notes(const struct sshconfig *cfg)
{
	char *out = xstrdup(""), *next;
	size_t i;

	for (i = 0; i < cfg->nnotes; i++) {
		xasprintf(&next, "%s%s\n", out, cfg->notes[i]);
		free(out);
		out = next;
	}
	return out;
}

static const struct sshconfig_host *
find_host(const struct sshconfig *cfg, const char *alias)
{
	size_t i;

	for (i = 0; i < cfg->nhosts; i++) {
		if (strcmp(cfg->hosts[i].alias, alias) == 0)
			return &cfg->hosts[i];
	}
	return NULL;
}

static void
assert_str_or_null(const char *what, const char *got, const char *want)
{
	char *w;

	if (want == NULL) {
		ck_assert_msg(
		    got == NULL, "%s: want NULL, got '%s'", what, got);
		return;
	}
	w = subst(want, NULL);
	ck_assert_msg(got != NULL, "%s: want '%s', got NULL", what, w);
	ck_assert_msg(
	    strcmp(got, w) == 0, "%s: want '%s', got '%s'", what, w, got);
	free(w);
}

/* Assert every field of one alias. */
static void
check_host(const struct sshconfig *cfg, const struct host_case *c)
{
	const struct sshconfig_host *h;

	h = find_host(cfg, c->alias);
	ck_assert_msg(h != NULL, "alias '%s' missing", c->alias);
	assert_str_or_null("hostname", h->hostname, c->hostname);
	ck_assert_int_eq(h->port, c->port);
	assert_str_or_null("user", h->user, c->user);
	assert_str_or_null("identity", h->identity, c->identity);
	assert_str_or_null("proxy", h->proxy, c->proxy);
}

START_TEST(test_hosts)
{
	const struct host_case *c = &host_cases[_i];
	struct sshconfig cfg;
	char *path = fixture(c->file), *home = home_dir(), *cause = NULL;

	ck_assert_msg(sshconfig_read(path, home, &cfg, &cause) == 0, "%s: %s",
	    c->file, cause);
	check_host(&cfg, c);
	sshconfig_free(&cfg);
	free(path);
	free(home);
}
END_TEST

START_TEST(test_lists)
{
	const struct list_case *c = &list_cases[_i];
	struct sshconfig cfg;
	char *path = fixture(c->file), *home = home_dir(), *cause = NULL;
	char *aliases, *notes, *want;

	ck_assert_msg(sshconfig_read(path, home, &cfg, &cause) == 0, "%s: %s",
	    c->file, cause);
	aliases = join_aliases(&cfg);
	ck_assert_str_eq(aliases, c->aliases);
	notes = join_notes(&cfg);
	want = subst(c->notes, NULL);
	ck_assert_str_eq(notes, want);
	sshconfig_free(&cfg);
	free(aliases);
	free(notes);
	free(want);
	free(path);
	free(home);
}
END_TEST

START_TEST(test_origins)
{
	const struct error_case *c = &origin_cases[_i];
	const struct sshconfig_host *h;
	struct sshconfig cfg;
	char *file, *alias, *path, *home = home_dir(), *cause = NULL, *got;
	char *want;

	file = xstrdup(c->file);
	alias = strchr(file, ' ');
	*alias++ = '\0';
	path = fixture(file);
	ck_assert_int_eq(sshconfig_read(path, home, &cfg, &cause), 0);
	h = find_host(&cfg, alias);
	ck_assert_ptr_nonnull(h);
	xasprintf(&got, "%s:%d", h->file, h->line);
	want = subst(c->cause, NULL);
	ck_assert_str_eq(got, want);
	sshconfig_free(&cfg);
	free(got);
	free(want);
	free(file);
	free(path);
	free(home);
}
END_TEST

START_TEST(test_errors)
{
	const struct error_case *c = &error_cases[_i];
	struct sshconfig cfg;
	char *path = subst(c->file, NULL), *want = subst(c->cause, NULL);
	char *home = home_dir(), *cause = NULL;

	ck_assert_int_eq(sshconfig_read(path, home, &cfg, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	ck_assert_str_eq(cause, want);
	ck_assert_ptr_null(cfg.hosts);
	ck_assert_uint_eq(cfg.nhosts, 0);
	ck_assert_ptr_null(cfg.notes);
	ck_assert_uint_eq(cfg.nnotes, 0);
	free(cause);
	free(path);
	free(want);
	free(home);
}
END_TEST

START_TEST(test_snippet_errors)
{
	const struct error_case *c = &snippet_errors[_i];
	struct sshconfig cfg;
	char *path = write_temp(c->file, strlen(c->file));
	char *want = subst(c->cause, path), *home = home_dir(), *cause = NULL;

	ck_assert_int_eq(sshconfig_read(path, home, &cfg, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	ck_assert_str_eq(cause, want);
	free(cause);
	free(want);
	free(home);
	remove_temp(path);
}
END_TEST

START_TEST(test_snippet_hosts)
{
	const struct host_case *c = &snippet_hosts[_i];
	struct sshconfig cfg;
	char *path = write_temp(c->file, strlen(c->file));
	char *home = home_dir(), *cause = NULL;

	ck_assert_msg(
	    sshconfig_read(path, home, &cfg, &cause) == 0, "%s", cause);
	check_host(&cfg, c);
	sshconfig_free(&cfg);
	free(home);
	remove_temp(path);
}
END_TEST

/* Includes nest 16 deep; a 17th level is an error naming the Include line. */
START_TEST(test_include_depth)
{
	int levels = _i == 0 ? 16 : 17, i;
	char *dir, *path, *text, *home = home_dir(), *cause = NULL, *want;
	struct sshconfig cfg;
	FILE *f;

	path = write_temp("", 0);
	dir = xstrdup(path);
	*strrchr(dir, '/') = '\0';
	for (i = 0; i <= levels; i++) {
		free(path);
		xasprintf(&path, "%s/n%d", dir, i);
		if (i < levels)
			xasprintf(&text, "Include %s/n%d\n", dir, i + 1);
		else
			xasprintf(&text, "Host deepest\n\tUser bottom\n");
		ck_assert_ptr_nonnull(f = fopen(path, "w"));
		fputs(text, f);
		ck_assert_int_eq(fclose(f), 0);
		free(text);
	}
	free(path);
	xasprintf(&path, "%s/n0", dir);
	if (levels == 16) {
		ck_assert_msg(
		    sshconfig_read(path, home, &cfg, &cause) == 0, "%s", cause);
		ck_assert_uint_eq(cfg.nhosts, 1);
		ck_assert_str_eq(cfg.hosts[0].user, "bottom");
		sshconfig_free(&cfg);
	} else {
		ck_assert_int_eq(sshconfig_read(path, home, &cfg, &cause), -1);
		xasprintf(&want, "%s/n16:1: Include nesting too deep", dir);
		ck_assert_str_eq(cause, want);
		free(want);
		free(cause);
	}
	for (i = 0; i <= levels; i++) {
		free(path);
		xasprintf(&path, "%s/n%d", dir, i);
		unlink(path);
	}
	free(path);
	xasprintf(&path, "%s/config", dir);
	remove_temp(path);
	free(dir);
	free(home);
}
END_TEST

/* NUL bytes end a line's text, as in OpenSSH; the next line still counts. */
START_TEST(test_nul_bytes)
{
	static const char text[] = "Host x\n\tUser u\0garbage\n\tPort 22\0 j\n"
				   "\0\0\0\nHost y\n";
	struct sshconfig cfg;
	char *path = write_temp(text, sizeof text - 1), *home = home_dir();
	char *cause = NULL, *aliases;

	ck_assert_msg(
	    sshconfig_read(path, home, &cfg, &cause) == 0, "%s", cause);
	aliases = join_aliases(&cfg);
	ck_assert_str_eq(aliases, "x|y");
	free(aliases);
	ck_assert_str_eq(cfg.hosts[0].user, "u");
	ck_assert_int_eq(cfg.hosts[0].port, 22);
	sshconfig_free(&cfg);
	free(home);
	remove_temp(path);
}
END_TEST

/* A megabyte-long value survives; a megabyte-long bare word is an error. */
START_TEST(test_long_lines)
{
	size_t n = 1024 * 1024, i;
	struct sshconfig cfg;
	char *text, *path, *home = home_dir(), *cause = NULL, *want;

	text = xmalloc(n + 64);
	i = (size_t)snprintf(text, 64, "Host big\n\tHostName ");
	memset(text + i, 'h', n);
	memcpy(text + i + n, "\n", 2);
	path = write_temp(text, strlen(text));
	ck_assert_msg(
	    sshconfig_read(path, home, &cfg, &cause) == 0, "%s", cause);
	ck_assert_uint_eq(strlen(cfg.hosts[0].hostname), n);
	sshconfig_free(&cfg);
	remove_temp(path);

	memset(text, 'k', n);
	path = write_temp(text, n);
	ck_assert_int_eq(sshconfig_read(path, home, &cfg, &cause), -1);
	text[100] = '\0';
	xasprintf(&want, "%s:1: %s needs a value", path, text);
	ck_assert_str_eq(cause, want);
	free(want);
	free(cause);
	remove_temp(path);
	free(text);
	free(home);
}
END_TEST

/* Random soups of config tokens and bytes either parse or fail cleanly. */
START_TEST(test_garbage)
{
	static const char *const tokens[] = { "Host", "host", "Match", "Port",
		"User", "HostName", "IdentityFile", "ProxyJump", "ProxyCommand",
		"none", "*", "?", "!", "!x", "x", "~", "~/", "%h", "%d", "%",
		"%%", "\"", "'", "\\", "#", "=", " ", "\t", "\n", "\r", "\n",
		"22", "99999", "a b", "\0", "\xff", "\x01" };
	static char buf[4096];
	unsigned long seed = 12345;
	struct sshconfig cfg;
	char *path, *home = home_dir(), *cause;
	size_t len, t, n, round;
	int r;

	for (round = 0; round < 300; round++) {
		len = 0;
		for (n = 0; n < 200; n++) {
			seed = seed * 6364136223846793005UL +
			    1442695040888963407UL;
			t = (seed >> 33) % (sizeof tokens / sizeof tokens[0]);
			if (tokens[t][0] == '\0')
				buf[len++] = '\0';
			else {
				memcpy(buf + len, tokens[t], strlen(tokens[t]));
				len += strlen(tokens[t]);
			}
		}
		path = write_temp(buf, len);
		cause = NULL;
		r = sshconfig_read(path, home, &cfg, &cause);
		if (r == 0) {
			ck_assert_ptr_null(cause);
			sshconfig_free(&cfg);
		} else {
			ck_assert_int_eq(r, -1);
			ck_assert_ptr_nonnull(cause);
			ck_assert_ptr_null(strchr(cause, '\n'));
			free(cause);
		}
		remove_temp(path);
	}
	free(home);
}
END_TEST

START_TEST(test_free_twice)
{
	struct sshconfig cfg;
	char *path = fixture("basic.conf"), *home = home_dir(), *cause = NULL;

	ck_assert_int_eq(sshconfig_read(path, home, &cfg, &cause), 0);
	sshconfig_free(&cfg);
	ck_assert_uint_eq(cfg.nhosts, 0);
	sshconfig_free(&cfg);
	sshconfig_free(NULL);
	free(path);
	free(home);
}
END_TEST

#define NROWS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The known_hosts files ssh -G would read for a host name, as one line. */
static const struct {
	const char *config;
	const char *host;
	const char *want; /* files joined by '|' */
} known_cases[] = {
	{ "", "h",
	    "/H/.ssh/known_hosts|/H/.ssh/known_hosts2|"
	    "/etc/ssh/ssh_known_hosts|/etc/ssh/ssh_known_hosts2" },
	{ "Host 127.0.0.1\n UserKnownHostsFile ~/a /b/%h\n"
	  "GlobalKnownHostsFile none\n",
	    "127.0.0.1", "/H/a|/b/127.0.0.1" },
	{ "Host 127.0.0.1\n UserKnownHostsFile ~/a\n", "10.0.0.1",
	    "/H/.ssh/known_hosts|/H/.ssh/known_hosts2|"
	    "/etc/ssh/ssh_known_hosts|/etc/ssh/ssh_known_hosts2" },
	{ "Host !127.0.0.1 *\n GlobalKnownHostsFile /g\n"
	  "Host *\n GlobalKnownHostsFile /second\n UserKnownHostsFile none\n",
	    "10.0.0.1", "/g" },
	{ "Host !127.0.0.1 *\n GlobalKnownHostsFile /g\n"
	  "Host *\n GlobalKnownHostsFile /second\n UserKnownHostsFile none\n",
	    "127.0.0.1", "/second" },
};

START_TEST(test_known_hosts)
{
	char *path =
	    write_temp(known_cases[_i].config, strlen(known_cases[_i].config));
	const char *paths[2] = { path, "/nonexistent/ssh_config" };
	struct sshconfig_set *set;
	struct sshconfig sc;
	char *cause = NULL, *got = xstrdup(""), *next;
	size_t i;

	set = sshconfig_load(paths, 2, "/H", &cause);
	ck_assert_ptr_nonnull(set);
	sshconfig_lookup(set, known_cases[_i].host, &sc);
	sshconfig_unload(set);
	ck_assert_uint_eq(sc.nhosts, 1);
	for (i = 0; i < sc.hosts[0].nknown_hosts; i++) {
		xasprintf(&next, "%s%s%s", got, i == 0 ? "" : "|",
		    sc.hosts[0].known_hosts[i]);
		free(got);
		got = next;
	}
	ck_assert_str_eq(got, known_cases[_i].want);
	free(got);
	sshconfig_free(&sc);
	remove_temp(path);
}
END_TEST

static Suite *
sshconfig_suite(void)
{
	Suite *s = suite_create("sshconfig");
	TCase *tc;

	tc = tcase_create("fixtures");
	tcase_add_loop_test(tc, test_hosts, 0, NROWS(host_cases));
	tcase_add_loop_test(tc, test_lists, 0, NROWS(list_cases));
	tcase_add_loop_test(tc, test_origins, 0, NROWS(origin_cases));
	tcase_add_loop_test(tc, test_errors, 0, NROWS(error_cases));
	tcase_add_test(tc, test_free_twice);
	suite_add_tcase(s, tc);

	tc = tcase_create("snippets");
	tcase_add_loop_test(tc, test_snippet_errors, 0, NROWS(snippet_errors));
	tcase_add_loop_test(tc, test_snippet_hosts, 0, NROWS(snippet_hosts));
	tcase_add_loop_test(tc, test_include_depth, 0, 2);
	tcase_add_loop_test(tc, test_known_hosts, 0, NROWS(known_cases));
	suite_add_tcase(s, tc);

	tc = tcase_create("garbage");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_nul_bytes);
	tcase_add_test(tc, test_long_lines);
	tcase_add_test(tc, test_garbage);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(sshconfig_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
