/*
 * Billing presets: named price rules read from config/providers.ini (built
 * in) and the user's own providers.ini, and the record of which preset an
 * instance's price came from (table instance_preset).
 */
#ifndef GPUFLEET_PRESET_H
#define GPUFLEET_PRESET_H

#include <stddef.h>
#include <stdint.h>

#include "inventory.h"

/* The keys a preset may set on an instance, in the order they apply. */
#define PRESET_NFIELDS 10

struct preset {
	char *name;
	char *file; /* where it was read (PRESET_BUILTIN or a path) */
	int line;   /* of its first key */
	char *source;
	char *date;		      /* YYYY-MM-DD */
	char *values[PRESET_NFIELDS]; /* as written, or NULL */
	int lines[PRESET_NFIELDS];    /* where each was given */
};

/* What an instance's price came from (instance_preset). */
struct preset_origin {
	char *name;
	char *date;
	char *source;
	char *file;
	int64_t applied_at;
};

#define PRESET_BUILTIN "config/providers.ini (built in)"

extern const char *const preset_fields[PRESET_NFIELDS];

char *preset_user_path(void);
int preset_load(const char *, struct preset **, size_t *, char **);
void preset_free(struct preset *, size_t);
const struct preset *preset_find(
    const struct preset *, size_t, const char *, char **);
const char *preset_value(const struct preset *, const char *);
char **preset_assignments(const struct preset *, size_t *);
int preset_origin_get(
    struct inventory *, int64_t, struct preset_origin *, int *, char **);
int preset_origin_put(
    struct inventory *, int64_t, const struct preset *, int64_t, char **);
int preset_origin_forget(struct inventory *, int64_t, char **);
void preset_origin_clear(struct preset_origin *);

#endif
