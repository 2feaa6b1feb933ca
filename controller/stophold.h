/*
 * Held stops (agent/WATCH.md "Held stops"): `shutdown --in/--at --pull`
 * arms a deadline whose stop waits, on the instance, for the results to
 * come home. The pulls (remote paths, local directories) stay here, in
 * stop_hold, keyed by instance and deadline; the watcher journals "held";
 * the daemon (or the user) runs the pull and writes the release over SSH
 * (`gpufleet-agent release`). One pull per hold: a failed one that must
 * succeed waits for the user (`shutdown --pull-held` again, or
 * `shutdown --release`).
 */
#ifndef GPUFLEET_STOPHOLD_H
#define GPUFLEET_STOPHOLD_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "fleet.h"
#include "inventory.h"

struct stophold {
	int64_t instance_id;
	char *name; /* the instance's */
	char *deadline;
	json_t *pulls; /* [{"remote","local"}...] */
	int must;
	int64_t held_at; /* 0: not held yet */
	char state[16];	 /* armed, pulling, released, failed */
	char *detail;	 /* or NULL */
};

int stophold_save(
    struct inventory *, int64_t, const char *, json_t *, int, int64_t, char **);
int stophold_held(struct inventory *, int64_t, const char *, int64_t, char **);
int stophold_list(
    struct inventory *, int64_t, struct stophold **, size_t *, char **);
void stophold_free(struct stophold *, size_t);
int stophold_claim(struct inventory *, const struct stophold *, int, char **);
int stophold_unclaim(struct inventory *, int64_t, char **);
int stophold_finish(struct inventory *, const struct stophold *, const char *,
    const char *, char **);
int stophold_pull(struct fleet *, const struct stophold *, uint64_t *, char **);
int stophold_release(
    struct fleet *, const char *, const char *, const char *, char **);
json_t *stophold_json(struct inventory *, int64_t);
char *stophold_line(const char *, json_t *);

#endif
