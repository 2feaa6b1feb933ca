/*
 * libFuzzer entry: the agent's JSON reader and the plan validation on top
 * of it. What parses must write back (agent/jsonw.c) to text that parses
 * again to the same text: the reader and the writer agree.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jsonr v, again;
	struct jsonw w, w2;
	struct plan p;
	char *cause = NULL;

	if (jsonr_parse((const char *)data, size, &v, &cause) == 0) {
		jsonw_init(&w);
		jsonr_write(&w, NULL, &v);
		if (jsonr_parse(w.out.data, w.out.len, &again, NULL) != 0)
			abort();
		jsonw_init(&w2);
		jsonr_write(&w2, NULL, &again);
		if (w.out.len != w2.out.len ||
		    memcmp(w.out.data, w2.out.data, w.out.len) != 0)
			abort();
		jsonw_free(&w);
		jsonw_free(&w2);
		jsonr_free(&again);
	} else if (cause == NULL)
		abort();
	jsonr_free(&v);
	free(cause);
	cause = NULL;
	if (plan_parse((const char *)data, size, &p, &cause) != 0 &&
	    cause == NULL)
		abort();
	plan_free(&p);
	free(cause);
	return 0;
}
