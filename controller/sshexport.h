/*
 * The fleet as an ssh_config for OpenSSH's own tools (ssh, scp, sftp,
 * rsync -e ssh, VS Code Remote-SSH): one Host block per instance with the
 * current key and gpufleet's pinned host key (HostKeyAlias NAME against the
 * known_hosts file written from the pins, StrictHostKeyChecking yes).
 *
 * `ssh-config --install` writes it to ~/.ssh/gpufleet.conf under a header
 * naming the inventory; sshexport_refresh, run after every command, then
 * rewrites that file when its content would change. A file without the
 * header, or written from another inventory, is never touched.
 */
#ifndef GPUFLEET_SSHEXPORT_H
#define GPUFLEET_SSHEXPORT_H

#include <stddef.h>

#include "config.h"
#include "fleet.h"
#include "instance.h"
#include "inventory.h"

#define SSHEXPORT_INCLUDE "Include ~/.ssh/gpufleet.conf"

int sshexport_render(struct inventory *, const struct config *,
    struct instance *, size_t, const char *, char **, char **);
char *sshexport_cfg_path(const char *);
char *sshexport_path(char **);
int sshexport_install(struct fleet *, char **, int *, size_t *, char **);
int sshexport_uninstall(struct fleet *, char **, int *, char **);
void sshexport_refresh(struct fleet *);

#endif
