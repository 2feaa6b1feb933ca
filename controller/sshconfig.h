/*
 * Reading an OpenSSH client configuration (ssh_config(5)) for
 * `gpufleet import`: which concrete Host aliases it declares and what
 * HostName, Port, User and IdentityFile each one ends up with; and, for
 * host key checks, which known_hosts files ssh would read for a host.
 */
#ifndef GPUFLEET_SSHCONFIG_H
#define GPUFLEET_SSHCONFIG_H

#include <stddef.h>

/*
 * The first line of the file `gpufleet ssh-config --install` writes. An
 * included file that starts with it is skipped: it is gpufleet's own
 * export of the inventory, and reading it back would pin the values it
 * was written from (an edit of the user's Host block would never be seen).
 */
#define SSHCONFIG_EXPORT_HEADER                                                \
	"# gpufleet ssh-config: written by gpufleet, do not edit\n"

struct sshconfig_host {
	char *alias;	    /* the concrete Host alias */
	char *hostname;	    /* HostName, or NULL: the alias itself */
	int port;	    /* Port, or 0 when not set */
	char *user;	    /* User, or NULL */
	char *identity;	    /* first IdentityFile, ~ expanded, or NULL */
	char *proxy;	    /* "ProxyJump X" / "ProxyCommand X", or NULL */
	char *file;	    /* file of the Host line that declared it */
	char **known_hosts; /* UserKnownHostsFile then GlobalKnownHostsFile
			       files, ~ expanded (defaults as ssh's) */
	size_t nknown_hosts;
	int line; /* its line number */
};

struct sshconfig {
	struct sshconfig_host *hosts;
	size_t nhosts;
	char **notes; /* skipped patterns, Match blocks */
	size_t nnotes;
};

int sshconfig_read(const char *, const char *, struct sshconfig *, char **);
struct sshconfig_set;
struct sshconfig_set *sshconfig_load(
    const char *const *, size_t, const char *, char **);
void sshconfig_lookup(struct sshconfig_set *, const char *, struct sshconfig *);
void sshconfig_unload(struct sshconfig_set *);
int sshconfig_match_hosts(const char *, const char *);
void sshconfig_free(struct sshconfig *);

#endif
