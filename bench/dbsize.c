/*
 * How big the inventory grows under a month of one-minute status polling
 * of 50 instances with 2 GPUs each, through the real storage and rollup
 * code (samples_store, samples_rollup) with a simulated clock.
 * Usage: dbsize DB [INSTANCES] [DAYS] [GPUS]
 */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "inventory.h"
#include "report.h"
#include "samples.h"

static long long
file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

int
main(int argc, char **argv)
{
	struct inventory *inv;
	struct instance in;
	struct report r;
	struct report_gpu gpus[8];
	int64_t *ids, t0 = 1793491200, t; /* 2026-11-01 */
	int n = argc > 2 ? atoi(argv[2]) : 50;
	int days = argc > 3 ? atoi(argv[3]) : 30;
	int ngpu = argc > 4 ? atoi(argv[4]) : 2;
	char *cause = NULL, wal[4096];
	int i, g;
	clock_t c0 = clock();

	if (argc < 2 || n < 1 || days < 1 || ngpu < 1 || ngpu > 8) {
		fprintf(stderr, "usage: dbsize DB [INSTANCES] [DAYS] [GPUS]\n");
		return 2;
	}
	if (inventory_open(argv[1], &inv, &cause) != 0) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	ids = calloc(n, sizeof *ids);
	inventory_begin(inv, &cause);
	for (i = 0; i < n; i++) {
		instance_init(&in);
		asprintf(&in.name, "gpu-%d", i);
		in.host = strdup("10.0.0.1");
		in.created_at = t0;
		if (inventory_add(inv, &in, &cause) != 0) {
			fprintf(stderr, "%s\n", cause);
			return 1;
		}
		ids[i] = in.id;
		instance_clear(&in);
	}
	inventory_commit(inv, &cause);

	memset(&r, 0, sizeof r);
	memset(gpus, 0, sizeof gpus);
	r.gpus = gpus;
	r.ngpus = ngpu;
	for (t = t0; t < t0 + (int64_t)days * 86400; t += 60) {
		if (inventory_begin(inv, &cause) != 0)
			goto fail;
		for (i = 0; i < n; i++) {
			r.time = t;
			r.container_start = t0;
			r.load[0] = (t / 60 + i) % 800 / 100.0;
			r.mem_available_kib = 100000000 + (t % 1000);
			r.net_rx_bytes = t * 1000;
			r.net_tx_bytes = t * 100;
			r.sessions = (t / 3600 + i) % 3;
			for (g = 0; g < ngpu; g++) {
				gpus[g].index = g;
				gpus[g].util_gpu = (t / 60 * 7 + i + g) % 101;
				gpus[g].mem_used_mib = 40000 + (t / 60 % 40000);
				gpus[g].mem_total_mib = 81920;
				gpus[g].temp_c = 40 + (t / 60 % 40);
				gpus[g].power_w = 100 + (t / 60 % 300);
			}
			if (samples_store(inv, ids[i], t, &r, &cause) != 0)
				goto fail;
		}
		if (samples_rollup(inv, t, 48, 90, &cause) != 0 ||
		    inventory_commit(inv, &cause) != 0)
			goto fail;
	}
	sqlite3_exec(
	    inv->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
	snprintf(wal, sizeof wal, "%s-wal", argv[1]);
	printf("%d instances x %d GPUs, one sample a minute for %d days: "
	       "database %.1f MiB (WAL %.1f MiB), %.0f s of CPU\n",
	    n, ngpu, days, file_size(argv[1]) / 1048576.0,
	    file_size(wal) / 1048576.0,
	    (double)(clock() - c0) / CLOCKS_PER_SEC);
	inventory_close(inv);
	free(ids);
	return 0;
fail:
	fprintf(stderr, "%s\n", cause);
	return 1;
}
