/* libFuzzer entry: selectors (selector_parse, then matching). */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *tags[] = { "a100", "train" };
	struct instance in[2];
	struct selector *sel;
	char *text, *cause = NULL;
	int picked[2];

	text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	memset(in, 0, sizeof in);
	in[0].name = "a100-1";
	in[0].provider = "lambda";
	in[0].tags = tags;
	in[0].ntags = 2;
	in[1].name = "h100-x.2";
	in[1].provider = "";
	if (selector_parse(text, &sel, &cause) == 0) {
		selector_match(sel, &in[0]);
		if (selector_select(sel, in, 2, picked, &cause) != 0)
			free(cause);
		selector_free(sel);
	} else
		free(cause);
	free(text);
	return 0;
}
