/*
 * How an instance is stopped: its stop method, `remote:COMMAND` (run by the
 * watcher on the instance) or `local:COMMAND` (run on the controller's
 * machine), each of kind `stop` (the disk is kept) or `release` (the
 * instance and its data are gone). An instance without a method of its
 * own takes its provider's: the config's [provider.NAME], else a built-in
 * default (documented in config/providers.ini). Placeholders {name} {host}
 * {port} {provider} {instance_id} are substituted shell-quoted; $VARS are left
 * for the shell.
 */
#ifndef GPUFLEET_STOPMETHOD_H
#define GPUFLEET_STOPMETHOD_H

#include <stdint.h>

#include "config.h"
#include "instance.h"

#define STOPMETHOD_MAX_LEN 1024

enum stopmethod_where { STOP_NONE, STOP_REMOTE, STOP_LOCAL };

/* An instance's effective method. */
struct stopmethod {
	enum stopmethod_where where;
	char *command;	  /* as written (placeholders unsubstituted), or NULL */
	const char *kind; /* "stop" or "release" */
	int allow_release; /* the instance's allow_release */
	char from[80];	   /* "instance", "provider autodl", "none" */
};

/* The stored per-instance settings, as `set` stages them. */
struct stopmethod_fields {
	char *command; /* NULL: the provider's default; "none": none */
	char *kind;    /* NULL: the method's own kind */
	int allow_release;
	int changed;
};

int stopmethod_parse(
    const char *, enum stopmethod_where *, const char **, char **);
int stopmethod_default(
    const char *, enum stopmethod_where *, const char **, const char **);
void stopmethod_resolve(const struct instance *,
    const struct stopmethod_fields *, const struct config *,
    struct stopmethod *);
char *stopmethod_expand(const char *, const struct instance *);
char *stopmethod_format(const struct stopmethod *);
int stopmethod_field(
    struct stopmethod_fields *, const char *, const char *, int *, char **);
void stopmethod_fields_clear(struct stopmethod_fields *);
void stopmethod_clear(struct stopmethod *);

#endif
