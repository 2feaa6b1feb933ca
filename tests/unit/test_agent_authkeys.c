/*
 * The one authorized_keys parser (agent/authkeys.c) on a table of
 * real-world lines, the edit the agent makes with it (agent/akedit.c) on
 * table-driven file contents, and the built agent's `authkeys` and the
 * controller's command for it run by a local sh on real files.
 */

#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "deploy.h"
#include "gpufleet/authkeys.h"
#include "instance.h"
#include "keys.h"
#include "xmalloc.h"

/* Real public keys (ssh-keygen), and an sk- key blob built by hand. */
#define ED                                                                     \
	"AAAAC3NzaC1lZDI1NTE5AAAAIDEvK1fpksulwHA6JHVHY3aoM90PEdEB4zeL2VO0T9P6"
#define ED2                                                                    \
	"AAAAC3NzaC1lZDI1NTE5AAAAIF1hn2DMMbB0x9e4vnDBXyb1Rf9K0HbnG0cQA3gnQXbh"
#define ED3                                                                    \
	"AAAAC3NzaC1lZDI1NTE5AAAAIKzr5gB0rQ9z5Ejm3QkYyH7l6SbHq0nRBQmCq2ssLjT+"
#define EC256                                                                  \
	"AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBM4vELU/"         \
	"v7nJQKzS/"                                                            \
	"+kboN7T4GRufbSVjkSd++aNS1uTZWI0l9pUd0JhH+n+SHXJJccVmMxY+"             \
	"ULDxIKgbrExVU8="
#define EC256_BADBITS                                                          \
	"AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBM4vELU/"         \
	"v7nJQKzS/"                                                            \
	"+kboN7T4GRufbSVjkSd++aNS1uTZWI0l9pUd0JhH+n+SHXJJccVmMxY+"             \
	"ULDxIKgbrExVU9="
#define SK                                                                     \
	"AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAIPMn2R35a+gjvqSlKkWvp+"   \
	"63At7INq+i+5RWjEIEUX1kAAAABHNzaDo="
/* A real certificate (ssh-keygen -s). */
#define CERT                                                                   \
	"AAAAIHNzaC1lZDI1NTE5LWNlcnQtdjAxQG9wZW5zc2guY29tAAAAIHbGYDIH/"        \
	"JYSsgOJPQPOxlpMKWRTeaVKk04Vb5Wyo5hiAAAAIPxNHiOAcZTwqLtviEIj2+"        \
	"1Oy7vmomu+"                                                           \
	"Y9SPeqiVPxxPAAAAAAAAAAAAAAABAAAAAmlkAAAACAAAAAR1c2VyAAAAAAAAAAD/////" \
	"/////"                                                                \
	"wAAAAAAAACCAAAAFXBlcm1pdC1YMTEtZm9yd2FyZGluZwAAAAAAAAAXcGVybWl0LWFnZ" \
	"W50LWZvcndhcmRpbmcAAAAAAAAAFnBlcm1pdC1wb3J0LWZvcndhcmRpbmcAAAAAAAAAC" \
	"nBlcm1pdC1wdHkAAAAAAAAADnBlcm1pdC11c2VyLXJjAAAAAAAAAAAAAAAzAAAAC3Nza" \
	"C1lZDI1NTE5AAAAIKuw3xAovG1+p59ONCxGAop0jleiJ+"                        \
	"HjTYp72gOaCDKmAAAAUwAAAAtzc2gtZWQyNTUxOQAAAEBpjyNITi+6/"              \
	"r5Ci6T4wKu4Vw9qw+"                                                    \
	"SmAhqprq0MpWecWJCXAqyiMOxyRS3o2kqhQNfukL9N6VflQtB5LCH51akO"

/*
 * Other spellings sshd reads (each checked with ssh-keygen -lf): RSA and
 * ED are real keys; the rest are built from them (see each group).
 */
/* ED with an \\f or a CR inside its base64, which sshd's decoder skips. */
#define ED_FF                                                                  \
	"AAAAC3NzaC1lZDI1NTE5\fAAAAIDEvK1fpksulwHA6JHVHY3aoM90PEdEB4zeL2VO0T9" \
	"P6"
#define ED_CR                                                                  \
	"AAAAC3NzaC1lZDI1NTE5AAAAIDEv\rK1fpksulwHA6JHVHY3aoM90PEdEB4zeL2VO0T9" \
	"P6"
/*
 * RSA, then as sshd also reads it: e as 00 01 00 01, n with two more
 * leading zeros, type names "RSA" and "rsa-sha2-256" in the blob. Not
 * keys: n negative (its 00 dropped), n of 1023 bits.
 */
#define RSA                                                                    \
	"AAAAB3NzaC1yc2EAAAADAQABAAAAgQCcIIP/lJ0nEDRoen1Wn/"                   \
	"kJW53pnvk5oaXpoKmSFgzqHvcV7Nww/"                                      \
	"z2GmpDApbbh5M46PQVDEXej2eQgCRM29umZL22vXbbHxT/"                       \
	"Y7rDMUgYPW10xsfx4MU4x5NvRVeiWe7x/mDSL2ab6yffIZzKRlxZCPMOuvtzWOiI/"    \
	"q9OT1dzffQ=="
#define RSA_E0                                                                 \
	"AAAAB3NzaC1yc2EAAAAEAAEAAQAAAIEAnCCD/5SdJxA0aHp9Vp/"                  \
	"5CVud6Z75OaGl6aCpkhYM6h73FezcMP89hpqQwKW24eTOOj0FQxF3o9nkIAkTNvbpmS9" \
	"tr122x8U/"                                                            \
	"2O6wzFIGD1tdMbH8eDFOMeTb0VXolnu8f5g0i9mm+"                            \
	"sn3yGcykZcWQjzDrr7c1joiP6vTk9Xc330="
#define RSA_N00                                                                \
	"AAAAB3NzaC1yc2EAAAADAQABAAAAgwAAAJwgg/"                               \
	"+UnScQNGh6fVaf+Qlbneme+TmhpemgqZIWDOoe9xXs3DD/"                       \
	"PYaakMCltuHkzjo9BUMRd6PZ5CAJEzb26Zkvba9dtsfFP9jusMxSBg9bXTGx/"        \
	"HgxTjHk29FV6JZ7vH+YNIvZpvrJ98hnMpGXFkI8w66+3NY6Ij+r05PV3N99"
#define RSA_SHORT                                                              \
	"AAAAA1JTQQAAAAMBAAEAAACBAJwgg/"                                       \
	"+UnScQNGh6fVaf+Qlbneme+TmhpemgqZIWDOoe9xXs3DD/"                       \
	"PYaakMCltuHkzjo9BUMRd6PZ5CAJEzb26Zkvba9dtsfFP9jusMxSBg9bXTGx/"        \
	"HgxTjHk29FV6JZ7vH+YNIvZpvrJ98hnMpGXFkI8w66+3NY6Ij+r05PV3N99"
#define RSA_SHA2                                                               \
	"AAAADHJzYS1zaGEyLTI1NgAAAAMBAAEAAACBAJwgg/"                           \
	"+UnScQNGh6fVaf+Qlbneme+TmhpemgqZIWDOoe9xXs3DD/"                       \
	"PYaakMCltuHkzjo9BUMRd6PZ5CAJEzb26Zkvba9dtsfFP9jusMxSBg9bXTGx/"        \
	"HgxTjHk29FV6JZ7vH+YNIvZpvrJ98hnMpGXFkI8w66+3NY6Ij+r05PV3N99"
#define RSA_NEG                                                                \
	"AAAAB3NzaC1yc2EAAAADAQABAAAAgJwgg/"                                   \
	"+UnScQNGh6fVaf+Qlbneme+TmhpemgqZIWDOoe9xXs3DD/"                       \
	"PYaakMCltuHkzjo9BUMRd6PZ5CAJEzb26Zkvba9dtsfFP9jusMxSBg9bXTGx/"        \
	"HgxTjHk29FV6JZ7vH+YNIvZpvrJ98hnMpGXFkI8w66+3NY6Ij+r05PV3N99"
#define RSA_1023                                                               \
	"AAAAB3NzaC1yc2EAAAADAQABAAAAgE4QQf/KTpOIGjQ9PqtP/"                    \
	"IStzvTPfJzQ0vTQVMkLBnUPe4r2bhh/"                                      \
	"nsNNSGBS23DyZx0egqGIu9Hs8hAEiZt7dMyXtteu22Pin+x3WGYpAwetrpjY/"        \
	"jwYpxjybeiq9Es93j/MGkXs031k++QzmUjLiyEeYddfbmsdER/V6cnq7m++"
/*
 * ED as sshd also reads it: type name "ed25519", or "ssh-ed25519\\0" (a
 * NUL may end a string), the latter's padding split by \\v. Not keys: a
 * NUL inside the name, a byte after the key, a 33-byte key, a character
 * after the padding, padding bits set.
 */
#define ED_SHORT                                                               \
	"AAAAB2VkMjU1MTkAAAAgMS8rV+mSy6XAcDokdUdjdqgz3Q8R0QHjN4vZU7RP0/o="
#define ED_NUL                                                                 \
	"AAAADHNzaC1lZDI1NTE5AAAAACAxLytX6ZLLpcBwOiR1R2N2qDPdDxHRAeM3i9lTtE/"  \
	"T+g=="
#define ED_NULMID                                                              \
	"AAAADXNzaC1lZAAgMjU1MTkAAAAgMS8rV+"                                   \
	"mSy6XAcDokdUdjdqgz3Q8R0QHjN4vZU7RP0/o="
#define ED_TRAIL                                                               \
	"AAAAC3NzaC1lZDI1NTE5AAAAIDEvK1fpksulwHA6JHVHY3aoM90PEdEB4zeL2VO0T9P6" \
	"AA=="
#define ED_33                                                                  \
	"AAAAC3NzaC1lZDI1NTE5AAAAITEvK1fpksulwHA6JHVHY3aoM90PEdEB4zeL2VO0T9P6" \
	"eA=="
#define ED_PAD_BAD                                                             \
	"AAAADHNzaC1lZDI1NTE5AAAAACAxLytX6ZLLpcBwOiR1R2N2qDPdDxHRAeM3i9lTtE/"  \
	"T+g==A"
#define ED_BITS                                                                \
	"AAAADHNzaC1lZDI1NTE5AAAAACAxLytX6ZLLpcBwOiR1R2N2qDPdDxHRAeM3i9lTtE/"  \
	"T+h=="
#define ED_NUL_PADSP                                                           \
	"AAAADHNzaC1lZDI1NTE5AAAAACAxLytX6ZLLpcBwOiR1R2N2qDPdDxHRAeM3i9lTtE/"  \
	"T+g=\v="
/*
 * EC256's point as an sk- key, and with the webauthn type name (the same
 * key to sshd); EC256 with a NUL ending its curve name. Not a key: EC256
 * with the short name "ECDSA" in the blob (sshd finds no curve for it).
 */
#define SK_EC                                                                  \
	"AAAAInNrLWVjZHNhLXNoYTItbmlzdHAyNTZAb3BlbnNzaC5jb20AAAAIbmlzdHAyNTYA" \
	"AABBBM4vELU/v7nJQKzS/"                                                \
	"+kboN7T4GRufbSVjkSd++aNS1uTZWI0l9pUd0JhH+n+SHXJJccVmMxY+"             \
	"ULDxIKgbrExVU8AAAAEc3NoOg=="
#define WEBAUTHN                                                               \
	"AAAAK3dlYmF1dGhuLXNrLWVjZHNhLXNoYTItbmlzdHAyNTZAb3BlbnNzaC5jb20AAAAI" \
	"bmlzdHAyNTYAAABBBM4vELU/v7nJQKzS/"                                    \
	"+kboN7T4GRufbSVjkSd++aNS1uTZWI0l9pUd0JhH+n+SHXJJccVmMxY+"             \
	"ULDxIKgbrExVU8AAAAEc3NoOg=="
#define EC_CURVENUL                                                            \
	"AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAJbmlzdHAyNTYAAAAAQQTOLxC1P7+"      \
	"5yUCs0v/pG6De0+Bkbn20lY5EnfvmjUtbk2ViNJfaVHdCYR/p/"                   \
	"kh1ySXHFZjMWPlCw8SCoG6xMVVP"
#define EC_SHORT                                                               \
	"AAAABUVDRFNBAAAACG5pc3RwMjU2AAAAQQTOLxC1P7+5yUCs0v/"                  \
	"pG6De0+Bkbn20lY5EnfvmjUtbk2ViNJfaVHdCYR/p/"                           \
	"kh1ySXHFZjMWPlCw8SCoG6xMVVP"
/* Not keys: CERT cut short, and with a byte after its signature. */
#define CERT_TRUNC                                                             \
	"AAAAIHNzaC1lZDI1NTE5LWNlcnQtdjAxQG9wZW5zc2guY29tAAAAICUqoJMRl4GV0HCe" \
	"wGeG8VttqLGoq4MPiDSKIwCv6odHAAAAIDEvK1fpksulwHA6JHVHY3aoM90PEdEB"
#define CERT_TRAIL                                                             \
	"AAAAIHNzaC1lZDI1NTE5LWNlcnQtdjAxQG9wZW5zc2guY29tAAAAIHbGYDIH/"        \
	"JYSsgOJPQPOxlpMKWRTeaVKk04Vb5Wyo5hiAAAAIPxNHiOAcZTwqLtviEIj2+"        \
	"1Oy7vmomu+"                                                           \
	"Y9SPeqiVPxxPAAAAAAAAAAAAAAABAAAAAmlkAAAACAAAAAR1c2VyAAAAAAAAAAD/////" \
	"/////"                                                                \
	"wAAAAAAAACCAAAAFXBlcm1pdC1YMTEtZm9yd2FyZGluZwAAAAAAAAAXcGVybWl0LWFnZ" \
	"W50LWZvcndhcmRpbmcAAAAAAAAAFnBlcm1pdC1wb3J0LWZvcndhcmRpbmcAAAAAAAAAC" \
	"nBlcm1pdC1wdHkAAAAAAAAADnBlcm1pdC11c2VyLXJjAAAAAAAAAAAAAAAzAAAAC3Nza" \
	"C1lZDI1NTE5AAAAIKuw3xAovG1+p59ONCxGAop0jleiJ+"                        \
	"HjTYp72gOaCDKmAAAAUwAAAAtzc2gtZWQyNTUxOQAAAEBpjyNITi+6/"              \
	"r5Ci6T4wKu4Vw9qw+"                                                    \
	"SmAhqprq0MpWecWJCXAqyiMOxyRS3o2kqhQNfukL9N6VflQtB5LCH51akOAA=="

#define LEAKED_OPTS                                                            \
	"command=\"echo use ssh-keygen; exec sh -c "                           \
	"\\\"$SSH_ORIGINAL_COMMAND\\\"\""

static char *tmpdir(void);
static char *slurp(const char *);
static void spit(const char *, const char *);
static int run_sh(const char *, char **);

static char *
tmpdir(void)
{
	char *d = xstrdup("/tmp/test_authkeys.XXXXXX");

	ck_assert_ptr_nonnull(mkdtemp(d));
	return d;
}

static char *
slurp(const char *path)
{
	struct buf b;

	memset(&b, 0, sizeof b);
	ck_assert_int_eq(buf_read_file(&b, path, 0), 0);
	buf_add(&b, "", 0);
	return b.data;
}

static void
spit(const char *path, const char *data)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	fputs(data, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* Run a command with sh -c, its stdout+stderr in *out. */
static int
run_sh(const char *cmd, char **out)
{
	char *full, buf[4096];
	FILE *p;
	size_t n;
	int st;

	xasprintf(&full, "%s 2>&1", cmd);
	p = popen(full, "r");
	ck_assert_ptr_nonnull(p);
	n = fread(buf, 1, sizeof buf - 1, p);
	buf[n] = '\0';
	st = pclose(p);
	free(full);
	*out = xstrdup(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A line, what it is, and its parts (NULL: absent or not a key). */
struct parse_case {
	const char *line;
	int r;
	const char *options;
	const char *type;
	const char *blob;
	const char *comment;
};

static const struct parse_case parse_cases[] = {
	{ "ssh-ed25519 " ED " c@d", AUTHKEYS_KEY, "", "ssh-ed25519", ED,
	    "c@d" },
	{ "ssh-ed25519 " ED, AUTHKEYS_KEY, "", "ssh-ed25519", ED, "" },
	/* The comment is the rest of the line, spaces and all. */
	{ "ssh-ed25519 " ED "  my key  (laptop)", AUTHKEYS_KEY, "",
	    "ssh-ed25519", ED, "my key  (laptop)" },
	/* Quoted options holding spaces, ssh- and \" escapes. */
	{ LEAKED_OPTS " ssh-ed25519 " ED " leaked", AUTHKEYS_KEY, LEAKED_OPTS,
	    "ssh-ed25519", ED, "leaked" },
	/* An option quoting another key's line: the key is the real one. */
	{ "command=\"ssh-ed25519 " ED2 " gpufleet:x\" ssh-ed25519 " ED " evil",
	    AUTHKEYS_KEY, "command=\"ssh-ed25519 " ED2 " gpufleet:x\"",
	    "ssh-ed25519", ED, "evil" },
	{ "environment=\"A=ssh-rsa " ED2 "\",command=\"" ED2
	  "\" ssh-ed25519 " ED,
	    AUTHKEYS_KEY,
	    "environment=\"A=ssh-rsa " ED2 "\",command=\"" ED2 "\"",
	    "ssh-ed25519", ED, "" },
	{ "cert-authority,principals=\"alice,bob\" ssh-ed25519 " ED " ca",
	    AUTHKEYS_KEY, "cert-authority,principals=\"alice,bob\"",
	    "ssh-ed25519", ED, "ca" },
	{ "restrict,pty ecdsa-sha2-nistp256 " EC256 " r", AUTHKEYS_KEY,
	    "restrict,pty", "ecdsa-sha2-nistp256", EC256, "r" },
	{ "from=\"10.0.0.0/8,!10.1.*\",no-port-forwarding ssh-ed25519 " ED,
	    AUTHKEYS_KEY, "from=\"10.0.0.0/8,!10.1.*\",no-port-forwarding",
	    "ssh-ed25519", ED, "" },
	{ "no-pty ssh-ed25519 " ED " x", AUTHKEYS_KEY, "no-pty", "ssh-ed25519",
	    ED, "x" },
	/* \" outside quotes never opens one (sshd's rule). */
	{ "command=\\\"x ssh-ed25519 " ED, AUTHKEYS_KEY, "command=\\\"x",
	    "ssh-ed25519", ED, "" },
	/* CR before LF, tabs, leading blanks. */
	{ "ssh-ed25519 " ED " c\r", AUTHKEYS_KEY, "", "ssh-ed25519", ED, "c" },
	{ "ssh-ed25519 " ED "\r", AUTHKEYS_KEY, "", "ssh-ed25519", ED, "" },
	{ "ssh-ed25519 " ED " c\r\n", AUTHKEYS_KEY, "", "ssh-ed25519", ED,
	    "c" },
	{ "\tssh-ed25519\t" ED "\tc d", AUTHKEYS_KEY, "", "ssh-ed25519", ED,
	    "c d" },
	{ "  no-pty\t\tssh-ed25519 " ED, AUTHKEYS_KEY, "no-pty", "ssh-ed25519",
	    ED, "" },
	/* Certificates, sk- keys, short names. */
	{ "ssh-ed25519-cert-v01@openssh.com " CERT " user", AUTHKEYS_KEY, "",
	    "ssh-ed25519-cert-v01@openssh.com", CERT, "user" },
	{ "sk-ssh-ed25519@openssh.com " SK " y", AUTHKEYS_KEY, "",
	    "sk-ssh-ed25519@openssh.com", SK, "y" },
	{ "no-touch-required sk-ssh-ed25519@openssh.com " SK, AUTHKEYS_KEY,
	    "no-touch-required", "sk-ssh-ed25519@openssh.com", SK, "" },
	{ "ED25519 " ED " s", AUTHKEYS_KEY, "", "ED25519", ED, "s" },
	{ "ed25519 " ED, AUTHKEYS_KEY, "", "ed25519", ED, "" },
	/*
	 * The blob runs to a space or tab whatever else it holds, and sshd's
	 * decoder skips a CR, \v or \f in it.
	 */
	{ "ssh-ed25519 " ED "\r comment", AUTHKEYS_KEY, "", "ssh-ed25519",
	    ED "\r", "comment" },
	{ "ssh-ed25519 " ED "\v", AUTHKEYS_KEY, "", "ssh-ed25519", ED "\v",
	    "" },
	{ "no-pty ssh-ed25519 " ED_FF " f", AUTHKEYS_KEY, "no-pty",
	    "ssh-ed25519", ED_FF, "f" },
	{ "ssh-ed25519 " ED_CR " r", AUTHKEYS_KEY, "", "ssh-ed25519", ED_CR,
	    "r" },
	{ "ssh-ed25519 " ED_NUL_PADSP " p", AUTHKEYS_KEY, "", "ssh-ed25519",
	    ED_NUL_PADSP, "p" },
	{ "ssh-ed25519 " ED "\v\fx", AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	/* Other spellings of one key (the blob read field by field). */
	{ "ssh-rsa " RSA " r", AUTHKEYS_KEY, "", "ssh-rsa", RSA, "r" },
	{ "ssh-rsa " RSA_E0 " r", AUTHKEYS_KEY, "", "ssh-rsa", RSA_E0, "r" },
	{ "ssh-rsa " RSA_N00, AUTHKEYS_KEY, "", "ssh-rsa", RSA_N00, "" },
	{ "ssh-rsa " RSA_SHORT, AUTHKEYS_KEY, "", "ssh-rsa", RSA_SHORT, "" },
	{ "rsa-sha2-512 " RSA_SHA2, AUTHKEYS_KEY, "", "rsa-sha2-512", RSA_SHA2,
	    "" },
	{ "ssh-ed25519 " ED_SHORT, AUTHKEYS_KEY, "", "ssh-ed25519", ED_SHORT,
	    "" },
	{ "ssh-ed25519 " ED_NUL, AUTHKEYS_KEY, "", "ssh-ed25519", ED_NUL, "" },
	{ "sk-ecdsa-sha2-nistp256@openssh.com " SK_EC, AUTHKEYS_KEY, "",
	    "sk-ecdsa-sha2-nistp256@openssh.com", SK_EC, "" },
	{ "webauthn-sk-ecdsa-sha2-nistp256@openssh.com " WEBAUTHN " w",
	    AUTHKEYS_KEY, "", "webauthn-sk-ecdsa-sha2-nistp256@openssh.com",
	    WEBAUTHN, "w" },
	{ "ecdsa-sha2-nistp256 " EC_CURVENUL, AUTHKEYS_KEY, "",
	    "ecdsa-sha2-nistp256", EC_CURVENUL, "" },
	/* Blobs sshd refuses (ssh-keygen -lf: "not a public key file"). */
	{ "ssh-rsa " RSA_NEG, AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-rsa " RSA_1023, AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519 " ED_NULMID, AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519 " ED_TRAIL, AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519 " ED_33, AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519 " ED_PAD_BAD, AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519 " ED_BITS, AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ecdsa-sha2-nistp256 " EC_SHORT, AUTHKEYS_BAD, NULL, NULL, NULL,
	    NULL },
	{ "ssh-ed25519-cert-v01@openssh.com " CERT_TRUNC, AUTHKEYS_BAD, NULL,
	    NULL, NULL, NULL },
	{ "ssh-ed25519-cert-v01@openssh.com " CERT_TRAIL, AUTHKEYS_BAD, NULL,
	    NULL, NULL, NULL },
	/* Blank and comment lines. */
	{ "", AUTHKEYS_EMPTY, NULL, NULL, NULL, NULL },
	{ " \t ", AUTHKEYS_EMPTY, NULL, NULL, NULL, NULL },
	{ "\r", AUTHKEYS_EMPTY, NULL, NULL, NULL, NULL },
	{ "# ssh-ed25519 " ED " commented out", AUTHKEYS_EMPTY, NULL, NULL,
	    NULL, NULL },
	{ "   #x", AUTHKEYS_EMPTY, NULL, NULL, NULL, NULL },
	/* Garbage: no key sshd would read. */
	{ "garbage", AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519", AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519 ", AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519 AAAA x", AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519 AAAAC3NzaOTHER x", AUTHKEYS_BAD, NULL, NULL, NULL,
	    NULL },
	{ "ssh-ed25519 " ED "!! x", AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-rsa " ED " wrong type", AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ecdsa-sha2-nistp384 " EC256, AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ECDSA " EC256, AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ecdsa-sha2-nistp256 " EC256_BADBITS, AUTHKEYS_BAD, NULL, NULL, NULL,
	    NULL },
	{ "command=\"unterminated ssh-ed25519 " ED, AUTHKEYS_BAD, NULL, NULL,
	    NULL, NULL },
	{ "no-pty", AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "no-pty ssh-ed25519", AUTHKEYS_BAD, NULL, NULL, NULL, NULL },
	{ "ssh-ed25519-cert-v01@openssh.com " ED, AUTHKEYS_BAD, NULL, NULL,
	    NULL, NULL },
};

/* Expect a span of line to read want (NULL: absent). */
static void
expect_span(const char *line, struct authkeys_span sp, const char *want,
    const char *what)
{
	ck_assert_msg(
	    sp.len == strlen(want) && memcmp(line + sp.off, want, sp.len) == 0,
	    "%s: %s is '%.*s', not '%s'", line, what, (int)sp.len,
	    line + sp.off, want);
}

START_TEST(test_parse)
{
	const struct parse_case *c = &parse_cases[_i];
	struct authkeys_line l;
	int r = authkeys_parse(c->line, strlen(c->line), &l);

	ck_assert_msg(r == c->r, "%s: %d, not %d", c->line, r, c->r);
	if (r != AUTHKEYS_KEY)
		return;
	expect_span(c->line, l.options, c->options, "options");
	expect_span(c->line, l.type, c->type, "type");
	expect_span(c->line, l.blob, c->blob, "blob");
	expect_span(c->line, l.comment, c->comment, "comment");
}
END_TEST

/* A very long line: 1 MiB of quoted options, then the key. */
START_TEST(test_parse_long)
{
	size_t n = 1 << 20, len;
	char *line = xmalloc(n + 200);
	struct authkeys_line l;

	memcpy(line, "command=\"", 9);
	memset(line + 9, 'x', n);
	memcpy(line + 9 + n, " y\" ssh-ed25519 " ED " long", 16 + 68 + 6);
	len = 9 + n + 16 + 68 + 5;
	line[len] = '\0';
	ck_assert_int_eq(authkeys_parse(line, len, &l), AUTHKEYS_KEY);
	ck_assert_uint_eq(l.options.len, 9 + n + 3);
	expect_span(line, l.blob, ED, "blob");
	expect_span(line, l.comment, "long", "comment");
	/* Only a NUL ends it early: the rest is not read. */
	line[20] = '\0';
	ck_assert_int_eq(authkeys_parse(line, len, &l), AUTHKEYS_BAD);
	free(line);
}
END_TEST

/* Two blobs, and whether sshd reads them as one key. */
struct same_case {
	const char *a;
	const char *b;
	int same;
};

static const struct same_case same_cases[] = {
	{ ED, ED, 1 },
	{ ED, ED_FF, 1 },
	{ ED, ED_CR, 1 },
	{ ED, ED "\v", 1 },
	{ ED, ED_SHORT, 1 },
	{ ED, ED_NUL, 1 },
	{ ED_NUL_PADSP, ED, 1 },
	{ RSA, RSA_E0, 1 },
	{ RSA, RSA_N00, 1 },
	{ RSA_E0, RSA_N00, 1 },
	{ RSA, RSA_SHORT, 1 },
	{ RSA, RSA_SHA2, 1 },
	{ SK_EC, WEBAUTHN, 1 },
	{ EC256, EC_CURVENUL, 1 },
	{ CERT, CERT, 1 },
	{ ED, ED2, 0 },
	{ EC256, SK_EC, 0 },
	{ CERT, ED, 0 },
	{ RSA, RSA_NEG, 0 },
	{ ED, ED_TRAIL, 0 },
	{ ED, "AAAA", 0 },
};

START_TEST(test_same_key)
{
	const struct same_case *c = &same_cases[_i];

	ck_assert_msg(authkeys_same_key(
			  c->a, strlen(c->a), c->b, strlen(c->b)) == c->same,
	    "case %d: not %d", _i, c->same);
	ck_assert_int_eq(
	    authkeys_same_key(c->b, strlen(c->b), c->a, strlen(c->a)), c->same);
}
END_TEST

/* The same key on several lines of a text, found by the controller too. */
START_TEST(test_text_has_blob)
{
	const char *text = "# x\r\n" LEAKED_OPTS " ssh-ed25519 " ED2
			   " leaked\r\nssh-ed25519 " ED3 " other\n";

	ck_assert_int_eq(keys_text_has_blob(text, strlen(text), ED2), 1);
	ck_assert_int_eq(keys_text_has_blob(text, strlen(text), ED3), 1);
	ck_assert_int_eq(keys_text_has_blob(text, strlen(text), ED), 0);
	/* A blob inside an option is not the line's key. */
	text = "command=\"ssh-ed25519 " ED "\" ssh-ed25519 " ED2 "\n";
	ck_assert_int_eq(keys_text_has_blob(text, strlen(text), ED), 0);
	/* Any spelling sshd reads as the key, in the blob or its text. */
	text = "ssh-ed25519 " ED3 "\nssh-rsa " RSA_E0 " r\r\n";
	ck_assert_int_eq(keys_text_has_blob(text, strlen(text), RSA), 1);
	text = "ssh-ed25519 " ED "\v\n";
	ck_assert_int_eq(keys_text_has_blob(text, strlen(text), ED), 1);
	text = "ssh-ed25519 " ED_FF " x\n";
	ck_assert_int_eq(keys_text_has_blob(text, strlen(text), ED), 1);
	ck_assert_int_eq(keys_text_has_blob(text, strlen(text), ED2), 0);
}
END_TEST

/*
 * The edit: before, the line to add (or NULL), the blob whose options it
 * takes, the blob to remove (or NULL), the text after ("=": unchanged).
 */
struct edit_case {
	const char *before;
	const char *add;
	const char *like;
	const char *del;
	const char *after;
};

#define NEW  "ssh-ed25519 " ED2 " gpufleet:n:2026-11-30"
#define OLDK "ssh-ed25519 " ED " me@laptop"

static const struct edit_case edit_cases[] = {
	/* Append to a file ending in a newline. */
	{ OLDK "\n", NEW, NULL, NULL, OLDK "\n" NEW "\n" },
	/* Missing final newline: one is added before the new line only. */
	{ OLDK, NEW, NULL, NULL, OLDK "\n" NEW "\n" },
	/* Already there (with options or not): nothing changes. */
	{ OLDK "\n" NEW "\n", NEW, NULL, NULL, "=" },
	{ OLDK "\nno-pty " NEW "\n", NEW, ED, NULL, "=" },
	{ "", NEW, NULL, NULL, NEW "\n" },
	/* Options, comments, blank lines and CRs kept byte for byte. */
	{ "# keys\n\ncommand=\"echo a b\",no-pty " OLDK "\r\n\n" OLDK
	  "\nssh-ed25519 " ED3 " x@y\n\n",
	    NEW, NULL, ED, "# keys\n\n\nssh-ed25519 " ED3 " x@y\n\n" NEW "\n" },
	/* Removal by the key, never by comment or option. */
	{ "ssh-ed25519 " ED3 " " ED "\ncommand=\"" ED "\" ssh-ed25519 " ED3
	  "\n" OLDK "\n",
	    NULL, NULL, ED,
	    "ssh-ed25519 " ED3 " " ED "\ncommand=\"" ED "\" ssh-ed25519 " ED3
	    "\n" },
	/* The leaked key behind a quoted command and on a CRLF line. */
	{ "ssh-ed25519 " ED3 " keep\n" LEAKED_OPTS " ssh-ed25519 " ED
	  " leaked\nssh-ed25519 " ED " leaked\r\n# end",
	    NULL, NULL, ED, "ssh-ed25519 " ED3 " keep\n# end" },
	/* Every spelling sshd reads as the key goes, the rest stays. */
	{ "ssh-ed25519 " ED "\r comment\nssh-ed25519 " ED "\v\n"
	  "no-pty ssh-ed25519 " ED_FF " f\nssh-ed25519 " ED_SHORT
	  "\nssh-ed25519 " ED3 " keep\nssh-ed25519 " ED_TRAIL " not a key\n",
	    NULL, NULL, ED,
	    "ssh-ed25519 " ED3 " keep\nssh-ed25519 " ED_TRAIL " not a key\n" },
	{ "ssh-rsa " RSA_E0 " planted\nssh-ed25519 " ED3
	  " keep\nssh-rsa " RSA_N00 "\r\nrsa-sha2-256 " RSA_SHORT
	  "\nssh-rsa " RSA_NEG "\n",
	    NULL, NULL, RSA,
	    "ssh-ed25519 " ED3 " keep\nssh-rsa " RSA_NEG "\n" },
	/* A key there in another spelling is not added again. */
	{ "ssh-rsa " RSA_E0 " x\n", "ssh-rsa " RSA " n", NULL, NULL, "=" },
	/* The options of the old key's line in another spelling. */
	{ "restrict ssh-ed25519 " ED_FF "\n", NEW, ED, ED,
	    "restrict " NEW "\n" },
	/* Removal keeps a missing final newline of a kept last line. */
	{ OLDK "\nssh-ed25519 " ED3 " x", NULL, NULL, ED,
	    "ssh-ed25519 " ED3 " x" },
	{ "ssh-ed25519 " ED3 " x\n" OLDK, NULL, NULL, ED,
	    "ssh-ed25519 " ED3 " x\n" },
	/* Nothing to remove. */
	{ "ssh-ed25519 " ED3 " x\n", NULL, NULL, ED, "=" },
	/* Step 2: the new key takes the old line's options. */
	{ "from=\"127.0.0.1\",command=\"echo "
	  "hi\",restrict,no-port-forwarding " OLDK "\r\n",
	    NEW, ED, NULL,
	    "from=\"127.0.0.1\",command=\"echo "
	    "hi\",restrict,no-port-forwarding " OLDK
	    "\r\nfrom=\"127.0.0.1\",command=\"echo hi\",restrict,"
	    "no-port-forwarding " NEW "\n" },
	/* Step 5: add (kept as is if there) and remove at once. */
	{ "no-pty " OLDK "\nno-pty " NEW "\n", NEW, ED, ED,
	    "no-pty " NEW "\n" },
	{ "no-pty " OLDK "\n", NEW, ED, ED, "no-pty " NEW "\n" },
	{ NEW "\n", NEW, ED, ED, "=" },
};

START_TEST(test_edit)
{
	const struct edit_case *c = &edit_cases[_i];
	struct akedit e = { c->add, c->like, c->del };
	const char *want = strcmp(c->after, "=") == 0 ? c->before : c->after;
	struct buf out;
	int r;

	memset(&out, 0, sizeof out);
	r = akedit_apply(c->before, strlen(c->before), &e, &out);
	ck_assert_msg(r == (strcmp(c->after, "=") != 0), "case %d: %d", _i, r);
	ck_assert_msg(
	    strcmp(out.data, want) == 0, "case %d: got '%s'", _i, out.data);
	ck_assert_int_eq(akedit_done(out.data, out.len, &e), 1);
	buf_free(&out);
}
END_TEST

/* The built agent on a real file: exit status, output, file, mode. */
static int
agent_edit(const char *ak, const char *args, char **out)
{
	char *cmd;
	int rc;

	xasprintf(&cmd, "'%s' authkeys '%s' %s", GPUFLEET_AGENT_BIN, ak, args);
	rc = run_sh(cmd, out);
	free(cmd);
	return rc;
}

START_TEST(test_agent_file)
{
	char *d = tmpdir(), *dir, *ak, *target, *out, *got;
	struct stat sb;
	time_t old = 1000000000;
	struct timespec ts[2] = { { old, 0 }, { old, 0 } };

	xasprintf(&dir, "%s/ssh", d);
	xasprintf(&ak, "%s/authorized_keys", dir);
	xasprintf(&target, "%s/real", d);

	/* No file: created 0600 in a new 0700 directory. */
	ck_assert_int_eq(agent_edit(ak, "--add '" NEW "'", &out), 0);
	ck_assert_str_eq(out, "changed\n");
	free(out);
	got = slurp(ak);
	ck_assert_str_eq(got, NEW "\n");
	free(got);
	ck_assert_int_eq(stat(ak, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	ck_assert_int_eq(stat(dir, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0700);

	/* The mode is kept; a rerun writes nothing (same mtime). */
	spit(ak, "no-pty " OLDK "\r\n");
	ck_assert_int_eq(chmod(ak, 0640), 0);
	ck_assert_int_eq(
	    agent_edit(ak, "--add '" NEW "' --like " ED " --remove " ED, &out),
	    0);
	ck_assert_str_eq(out, "changed\n");
	free(out);
	got = slurp(ak);
	ck_assert_str_eq(got, "no-pty " NEW "\n");
	free(got);
	ck_assert_int_eq(stat(ak, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0640);
	ck_assert_int_eq(utimensat(AT_FDCWD, ak, ts, 0), 0);
	ck_assert_int_eq(
	    agent_edit(ak, "--add '" NEW "' --like " ED " --remove " ED, &out),
	    0);
	ck_assert_str_eq(out, "unchanged\n");
	free(out);
	ck_assert_int_eq(stat(ak, &sb), 0);
	ck_assert_int_eq(sb.st_mtime, old);

	/* Usage errors: an add with options or no key, a bad blob. */
	ck_assert_int_eq(agent_edit(ak, "--add 'no-pty " NEW "'", &out), 2);
	free(out);
	ck_assert_int_eq(agent_edit(ak, "--remove 'a b'", &out), 2);
	free(out);
	ck_assert_int_eq(agent_edit(ak, "--add garbage", &out), 2);
	free(out);

	/* A symlink: refused, its target untouched. */
	ck_assert_int_eq(unlink(ak), 0);
	spit(target, OLDK "\n");
	ck_assert_int_eq(symlink(target, ak), 0);
	ck_assert_int_eq(agent_edit(ak, "--remove " ED, &out), 4);
	ck_assert_ptr_nonnull(strstr(out, "symbolic link"));
	free(out);
	got = slurp(target);
	ck_assert_str_eq(got, OLDK "\n");
	free(got);
	ck_assert_int_eq(unlink(ak), 0);

	/* Not a regular file. */
	ck_assert_int_eq(mkdir(ak, 0700), 0);
	ck_assert_int_eq(agent_edit(ak, "--remove " ED, &out), 4);
	ck_assert_ptr_nonnull(strstr(out, "not a regular file"));
	free(out);
	ck_assert_int_eq(rmdir(ak), 0);

	/* Read-only: refused, never replaced (root may write anything). */
	spit(ak, OLDK "\n");
	ck_assert_int_eq(chmod(ak, 0400), 0);
	if (geteuid() != 0) {
		ck_assert_int_eq(agent_edit(ak, "--remove " ED, &out), 5);
		ck_assert_ptr_nonnull(strstr(out, "read-only"));
		free(out);
		got = slurp(ak);
		ck_assert_str_eq(got, OLDK "\n");
		free(got);
	}
	free(ak);
	free(dir);
	free(target);
	free(d);
}
END_TEST

/*
 * The controller's command, run by sh: exits DEPLOY_EXIT_MISSING until
 * the agent is in REMOTE_DIR, uploads it from stdin, then edits.
 */
START_TEST(test_controller_command)
{
	struct agent_bin ab;
	struct instance in;
	char *d = tmpdir(), *ak, *cmd, *out, *got, *full, *cause = NULL;
	int rc;

	setenv("GPUFLEET_AGENT", GPUFLEET_AGENT_BIN, 1);
	ck_assert_int_eq(deploy_load(&ab, &cause), 0);
	instance_init(&in);
	xasprintf(&ak, "%s/authorized_keys", d);
	free(in.authorized_keys_file);
	in.authorized_keys_file = xstrdup(ak);
	free(in.remote_dir);
	xasprintf(&in.remote_dir, "%s/agent", d);
	spit(ak,
	    "ssh-ed25519 " ED3 " keep\n" LEAKED_OPTS " ssh-ed25519 " ED
	    " leaked\nssh-ed25519 " ED " leaked\r\n");

	cmd = keys_authkeys_command(&in, &ab, NULL, NULL, ED, 0);
	rc = run_sh(cmd, &out);
	ck_assert_int_eq(rc, DEPLOY_EXIT_MISSING);
	free(out);
	free(cmd);

	cmd = keys_authkeys_command(&in, &ab, NULL, NULL, ED, 1);
	xasprintf(&full, "%s <'%s'", cmd, GPUFLEET_AGENT_BIN);
	rc = run_sh(full, &out);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
	ck_assert_str_eq(out, "changed\n");
	free(out);
	free(full);
	free(cmd);
	got = slurp(ak);
	ck_assert_str_eq(got, "ssh-ed25519 " ED3 " keep\n");
	free(got);

	/* Deployed now: the plain command edits, and a rerun changes nothing.
	 */
	cmd = keys_authkeys_command(&in, &ab, NEW, ED3, NULL, 0);
	ck_assert_int_eq(run_sh(cmd, &out), 0);
	ck_assert_str_eq(out, "changed\n");
	free(out);
	ck_assert_int_eq(run_sh(cmd, &out), 0);
	ck_assert_str_eq(out, "unchanged\n");
	free(out);
	free(cmd);
	got = slurp(ak);
	ck_assert_str_eq(got, "ssh-ed25519 " ED3 " keep\n" NEW "\n");
	free(got);

	instance_clear(&in);
	deploy_free(&ab);
	free(ak);
	free(d);
}
END_TEST

static Suite *
authkeys_suite(void)
{
	Suite *s = suite_create("authkeys");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_parse, 0,
	    (int)(sizeof parse_cases / sizeof parse_cases[0]));
	tcase_add_test(tc, test_parse_long);
	tcase_add_loop_test(tc, test_same_key, 0,
	    (int)(sizeof same_cases / sizeof same_cases[0]));
	tcase_add_test(tc, test_text_has_blob);
	tcase_add_loop_test(
	    tc, test_edit, 0, (int)(sizeof edit_cases / sizeof edit_cases[0]));
	tcase_add_test(tc, test_agent_file);
	tcase_add_test(tc, test_controller_command);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(authkeys_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
