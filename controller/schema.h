/*
 * The inventory's schema, versioned with PRAGMA user_version: step i takes
 * a database from version i to i + 1.
 */
#ifndef GPUFLEET_SCHEMA_H
#define GPUFLEET_SCHEMA_H

const char *const *schema_steps(int *);

#endif
