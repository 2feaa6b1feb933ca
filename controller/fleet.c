/* The process's one database connection, event loop and engine. */

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "fleet.h"
#include "status.h"
#include "xmalloc.h"

/* A fleet over the database at db_path; nothing is opened yet. */
void
fleet_init(struct fleet *f, const char *db_path, struct config *config)
{
	memset(f, 0, sizeof *f);
	f->db_path = db_path;
	f->config = config;
}

/*
 * With db_must_exist: fail when nothing is at db_path, rather than making
 * directories and an empty database there for a command that only reads.
 * Returns 0, or a negative status with *cause set.
 */
int
fleet_check_db(const struct fleet *f, char **cause)
{
	if (!f->db_must_exist || access(f->db_path, F_OK) == 0 ||
	    errno != ENOENT)
		return 0;
	xasprintf(cause,
	    "no inventory at %s (gpufleet add or import creates one there)",
	    f->db_path);
	return -GF_EDB;
}

/*
 * The database, opened on first use and kept for the fleet's life.
 * Returns 0, or a negative status with *cause set.
 */
int
fleet_inventory(struct fleet *f, struct inventory **inv, char **cause)
{
	int r;

	if (f->inv == NULL &&
	    ((r = fleet_check_db(f, cause)) != 0 ||
		(r = inventory_open(f->db_path, &f->inv, cause)) != 0))
		return r;
	f->inv->config = f->config;
	*inv = f->inv;
	return 0;
}

/*
 * The engine on the fleet's loop, made on first use (the loop too, when
 * nobody gave one). NULL if libevent cannot make a loop.
 */
struct engine *
fleet_engine(struct fleet *f)
{
	if (f->base == NULL && (f->base = event_base_new()) == NULL)
		return NULL;
	if (f->engine == NULL) {
		f->engine = engine_new(f->base, NULL);
		if (f->engine != NULL && f->config != NULL)
			engine_set_agent_timeout(
			    f->engine, f->config->agent_timeout);
	}
	return f->engine;
}

/*
 * Close what the fleet opened; every host that held a session must have
 * been forgotten (remote_close does that).
 */
void
fleet_free(struct fleet *f)
{
	engine_free(f->engine);
	if (f->base != NULL)
		event_base_free(f->base);
	inventory_close(f->inv);
	memset(f, 0, sizeof *f);
}
