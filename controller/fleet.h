/*
 * What a process managing the fleet holds once: the configuration, the
 * database, the event loop and the SSH engine on it. main builds one for
 * the CLI; a daemon builds its own. Everything that reaches instances
 * (remote.c and below) takes a struct fleet, never the CLI's context.
 */
#ifndef GPUFLEET_FLEET_H
#define GPUFLEET_FLEET_H

#include "config.h"
#include "engine.h"
#include "inventory.h"

struct event_base;

struct fleet {
	const char *db_path;	 /* borrowed */
	int db_must_exist;	 /* named by the user, command only reads */
	struct config *config;	 /* borrowed */
	struct inventory *inv;	 /* fleet_inventory opens it once */
	struct event_base *base; /* fleet_engine makes both */
	struct engine *engine;
};

void fleet_init(struct fleet *, const char *, struct config *);
int fleet_check_db(const struct fleet *, char **);
int fleet_inventory(struct fleet *, struct inventory **, char **);
struct engine *fleet_engine(struct fleet *);
void fleet_free(struct fleet *);

#endif
