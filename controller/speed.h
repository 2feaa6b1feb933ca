/*
 * What gpufleet speed measured: upload and download throughput and round
 * trip time per instance over its SSH connection, the newest SPEED_KEEP
 * runs kept per instance, and their medians per platform (provider) for
 * advise and cost --by provider.
 */
#ifndef GPUFLEET_SPEED_H
#define GPUFLEET_SPEED_H

#include <stddef.h>
#include <stdint.h>

#include "instance.h"
#include "inventory.h"

#define SPEED_KEEP	  50		  /* runs kept per instance */
#define SPEED_SIZE_MIN	  (1LL << 20)	  /* --size 1M ... */
#define SPEED_SIZE_MAX	  (1LL << 30)	  /* ... to 1G */
#define SPEED_NO_PROVIDER "(no provider)" /* provider "" */

struct speed_result {
	double up_Bps;	 /* bytes per second, > 0 */
	double down_Bps; /* bytes per second, > 0 */
	double rtt_ms;	 /* >= 0 */
	int64_t size;	 /* bytes each way */
};

struct speed_summary {
	char *provider; /* SPEED_NO_PROVIDER for "" */
	struct speed_result median;
	size_t runs;
};

double speed_median(double *, size_t);
char *speed_format_rate(double);
char *speed_format_rtt(double);
char *speed_format_summary(const struct speed_summary *);
int speed_store(
    struct inventory *, int64_t, int64_t, const struct speed_result *, char **);
int speed_by_provider(struct inventory *, const struct instance *, size_t,
    struct speed_summary **, size_t *, char **);
void speed_summary_free(struct speed_summary *, size_t);

#endif
