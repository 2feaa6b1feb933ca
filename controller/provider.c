/* The provider table: listing providers and writing their settings. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "provider.h"
#include "status.h"
#include "xmalloc.h"

/* Every provider, by name. *out (free with provider_free) gets *n rows. */
int
provider_list(
    struct inventory *inv, struct provider_info **out, size_t *n, char **cause)
{
	sqlite3_stmt *st;
	struct provider_info *v = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if ((rc = db_prepare(inv, &st,
		 "SELECT name, currency, balance, balance_at, low_balance, "
		 "release_after_days FROM provider ORDER BY name",
		 "providers", cause, "")) != 0)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct provider_info *p;
		v = xreallocarray(v, len + 1, sizeof *v);
		p = &v[len++];
		memset(p, 0, sizeof *p);
		p->name = db_text(st, 0);
		snprintf(p->currency, sizeof p->currency, "%s",
		    sqlite3_column_text(st, 1));
		p->has_balance = sqlite3_column_type(st, 2) != SQLITE_NULL;
		p->balance = sqlite3_column_int64(st, 2);
		p->balance_at = sqlite3_column_int64(st, 3);
		p->has_low = sqlite3_column_type(st, 4) != SQLITE_NULL;
		p->low = sqlite3_column_int64(st, 4);
		p->release_after_days = sqlite3_column_int(st, 5);
		p->runway = -1;
	}
	if ((rc = db_finish(inv, st, rc, "providers", cause)) < 0) {
		provider_free(v, len);
		return rc;
	}
	*out = v;
	*n = len;
	return 0;
}

/* The provider called name in v, or NULL. */
const struct provider_info *
provider_find(const struct provider_info *v, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	}
	return NULL;
}

void
provider_free(struct provider_info *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

/*
 * Add a provider (add nonzero; its currency defaults to CNY) or change one,
 * in one transaction; a clear error where it exists or does not.
 */
int
provider_write(struct inventory *inv, const char *name, int add,
    const struct provider_change *c, char **cause)
{
	sqlite3_stmt *st;
	int r;

	if ((r = inventory_begin(inv, cause)) != 0)
		return r;
	if ((r = db_prepare(inv, &st,
		 add ? "INSERT INTO provider (name, currency) VALUES (?1, "
		       "coalesce(?2, 'CNY'))"
		     : "UPDATE provider SET currency = coalesce(?2, currency) "
		       "WHERE name = ?1",
		 "providers", cause, "tt", name, c->currency)) != 0)
		goto fail;
	r = sqlite3_step(st);
	if ((r & 0xff) == SQLITE_CONSTRAINT) {
		sqlite3_finalize(st);
		xasprintf(
		    cause, "provider '%s' exists (use provider set)", name);
		r = -GF_EUSAGE;
		goto fail;
	}
	if ((r = db_finish(inv, st, r, "providers", cause)) < 0)
		goto fail;
	if (sqlite3_changes(inv->db) == 0) {
		xasprintf(cause, "no provider '%s' (use provider add)", name);
		r = -GF_EUSAGE;
		goto fail;
	}
	if ((r = db_exec(inv,
		 "UPDATE provider SET "
		 "balance = CASE WHEN ?2 THEN ?3 ELSE balance END, "
		 "balance_at = CASE WHEN ?2 THEN ?4 ELSE balance_at END, "
		 "low_balance = CASE WHEN ?5 THEN ?6 ELSE low_balance END, "
		 "release_after_days = CASE WHEN ?7 THEN ?8 ELSE "
		 "release_after_days END WHERE name = ?1",
		 "providers", cause, "tiIIiIiI", name, c->set_balance,
		 c->balance, c->balance_at, c->set_low, c->low, c->set_release,
		 (int64_t)c->release_after_days)) < 0)
		goto fail;
	return inventory_commit(inv, cause);
fail:
	inventory_rollback(inv);
	return r;
}
