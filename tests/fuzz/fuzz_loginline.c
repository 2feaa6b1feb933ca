/*
 * libFuzzer entry: login lines (loginline_parse), and the same text split
 * into words and read as argv (loginline_parse_words).
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loginline.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct loginline ll;
	char *text, *cause = NULL, **words;
	size_t n;

	text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	if (loginline_parse(text, &ll, &cause) == 0) {
		if (ll.host == NULL || (ll.port < 0 || ll.port > 65535))
			abort();
		loginline_clear(&ll);
	} else
		free(cause);
	cause = NULL;
	if (loginline_split(text, &words, &n, &cause) == 0) {
		if (loginline_parse_words(words, n, &ll, &cause) == 0)
			loginline_clear(&ll);
		else
			free(cause);
		loginline_free_words(words, n);
	} else
		free(cause);
	free(text);
	return 0;
}
