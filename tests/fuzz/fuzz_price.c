/*
 * libFuzzer entry: prices and the other values of `set` (billing_parse_*,
 * instance_parse_port/hostspec/set_field). The first byte picks the
 * parser.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "instance.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum billing_per per;
	enum billing_unit unit;
	char *text, *cause = NULL, *user = NULL, *host = NULL, cur[8];
	money_t m;
	int64_t d;
	struct instance in;
	char *eq;
	int port, r = 0;

	if (size == 0)
		return 0;
	text = malloc(size);
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	switch (data[0] % 10) {
	case 0:
		r = billing_parse_amount(text, &m, &cause);
		break;
	case 1:
		r = billing_parse_price(text, &m, &per, &cause);
		break;
	case 2:
		r = billing_parse_stopped_price(text, &m, &cause);
		break;
	case 3:
		r = billing_parse_egress_price(text, &m, &cause);
		break;
	case 4:
		r = billing_parse_duration(text, &d, &cause);
		break;
	case 5:
		r = billing_parse_unit(text, &unit, &cause);
		break;
	case 6:
		r = billing_parse_currency(text, cur, sizeof cur, &cause);
		break;
	case 7:
		r = instance_parse_port(text, &port, &cause);
		break;
	case 8:
		r = instance_parse_hostspec(text, &user, &host, &port, &cause);
		break;
	case 9:
		/* FIELD=VALUE, as `gpufleet set` takes it. */
		instance_init(&in);
		if ((eq = strchr(text, '=')) != NULL) {
			*eq = '\0';
			r = instance_set_field(&in, text, eq + 1, &cause);
		}
		instance_clear(&in);
		break;
	}
	if (r != 0)
		free(cause);
	free(user);
	free(host);
	free(text);
	return 0;
}
