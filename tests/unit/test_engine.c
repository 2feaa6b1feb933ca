/* The engine's pure parts: the retry backoff, the handshake window. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine.h"

static const struct {
	int fails;
	unsigned int rnd;
	int64_t want;
} backoff_cases[] = {
	{ 0, 0, 0 },	   /* never failed: no wait */
	{ -1, 999, 0 },	   /* nonsense counts as never */
	{ 1, 0, 500 },	   /* 1 s, jitter 0.5 */
	{ 1, 500, 1000 },  /* 1 s, jitter 1.0 */
	{ 1, 999, 1499 },  /* 1 s, jitter 1.499 */
	{ 1, 1500, 1000 }, /* rnd is taken mod 1000 */
	{ 2, 500, 2000 },  /* doubling */
	{ 3, 500, 4000 },
	{ 9, 500, 256000 },	  /* 2^8 s */
	{ 10, 500, 300000 },	  /* capped at 5 min */
	{ 10, 0, 150000 },	  /* cap, jitter 0.5 */
	{ 1000000, 999, 449700 }, /* huge counts stay capped */
	{ 2147483647, 500, 300000 },
};

START_TEST(test_backoff)
{
	ck_assert_int_eq(
	    engine_backoff_ms(backoff_cases[_i].fails, backoff_cases[_i].rnd),
	    backoff_cases[_i].want);
}
END_TEST

/*
 * One step of the window: a phase's delay and whole span for a connection
 * started at started_ms, acknowledged at now_ms, and the size it leaves.
 */
static const struct {
	const char *what;
	int phase;
	int64_t delay, span, started, now;
	size_t want;
} window_steps[] = {
	{ "first banner: the best so far, grow", 0, 4, 4, 100, 110, 17 },
	{ "a banner as fast: grow", 0, 4, 5, 100, 111, 18 },
	{ "within twice the best and the slack: grow", 0, 33, 33, 100, 112,
	    19 },
	{ "slower, not far: stay", 0, 60, 60, 100, 113, 19 },
	{ "far slower: halve", 0, 500, 500, 105, 120, 9 },
	{ "far slower, started before the cut: stay", 0, 900, 900, 110, 121,
	    9 },
	{ "far slower again, started after it: floor", 0, 900, 900, 125, 130,
	    8 },
	{ "the key exchange has its own best: grow", 1, 20, 20, 126, 140, 9 },
	{ "a far slower key exchange: floor", 1, 2000, 2000, 131, 150, 8 },
	{ "a negative delay counts as none: grow", 1, -5, -5, 151, 160, 9 },
	{ "an unknown phase: ignored", 2, 99999, 99999, 161, 170, 9 },
	/* the least span of phase 0 is still 4 ms: a long one adds nothing */
	{ "a long span alone: grow by one", 0, 4, 400, 171, 180, 10 },
	{ "a span shorter than the delay counts as the delay", 1, 0, -1, 181,
	    190, 11 },
};

/* The steps above, in order, on one window. */
START_TEST(test_window_steps)
{
	struct engine_window w;
	size_t i;

	engine_window_init(&w);
	ck_assert_uint_eq(engine_window_size(&w), ENGINE_WINDOW_INIT);
	for (i = 0; i < sizeof window_steps / sizeof window_steps[0]; i++) {
		engine_window_ack(&w, window_steps[i].phase,
		    window_steps[i].delay, window_steps[i].span,
		    window_steps[i].started, window_steps[i].now);
		ck_assert_msg(engine_window_size(&w) == window_steps[i].want,
		    "%s: window %zu, wanted %zu", window_steps[i].what,
		    engine_window_size(&w), window_steps[i].want);
	}
}
END_TEST

/*
 * Far-away hosts, one banner each: the least takes 200 ms, 2 of them the
 * server's. A server-side delay far over the best is a crowd only if the
 * whole phase is far longer too: one that the network's share dwarfs is
 * no reason to shrink.
 */
START_TEST(test_window_far_cut)
{
	struct engine_window w;

	engine_window_init(&w);
	engine_window_ack(&w, 0, 2, 200, 200, 400);
	ck_assert_uint_eq(engine_window_size(&w), ENGINE_WINDOW_INIT + 1 + 8);
	engine_window_ack(&w, 0, 150, 350, 201, 410); /* within 4x the span */
	ck_assert_uint_eq(engine_window_size(&w), ENGINE_WINDOW_INIT + 1 + 8);
	engine_window_ack(&w, 0, 150, 1000, 202, 420); /* far over it too */
	ck_assert_uint_eq(
	    engine_window_size(&w), (ENGINE_WINDOW_INIT + 1 + 8) / 2);
}
END_TEST

/*
 * Acknowledge rounds of handshakes as the loop would (each connection in
 * the window acks its banner and its key exchange, each phase with the
 * same server-side delay and span), checking the window grows at least
 * by factor per round; return how many rounds until it holds n.
 */
static int
window_rounds(struct engine_window *w, int64_t span0, int64_t span1,
    size_t factor, size_t n)
{
	size_t k, size;
	int64_t now = 1000;
	int rounds = 0;

	while (engine_window_size(w) < n && rounds < 100) {
		size = engine_window_size(w);
		for (k = 0; k < size; k++) {
			now += 1;
			engine_window_ack(w, 0, 6, span0, now - 100, now);
			engine_window_ack(w, 1, 20, span1, now - 100, now);
		}
		ck_assert_uint_ge(engine_window_size(w), factor * size);
		rounds++;
	}
	return rounds;
}

/*
 * Near hosts (a shared local server: phases take little more than the
 * server's delay): the window at least doubles per round, so 500 hosts
 * are all in flight by the fourth round; a crowded server shrinks it to
 * the floor, not below.
 */
START_TEST(test_window_near_hosts)
{
	struct engine_window w;
	size_t acks;
	int64_t now = 100000;

	engine_window_init(&w);
	ck_assert_int_le(window_rounds(&w, 6, 20, 2, 500), 4);
	for (acks = 0; acks < 64; acks++) {
		now += 1000;
		engine_window_ack(&w, 0, 5000, 5000, now - 1, now);
	}
	ck_assert_uint_eq(engine_window_size(&w), ENGINE_WINDOW_MIN);
}
END_TEST

/*
 * Far-away hosts (100 ms round trip: the banner comes a round trip after
 * the connect, the key exchange takes two more): the same server-side
 * delays, but the network's wait opens the window much faster, so that
 * distance costs no extra rounds: 200 hosts are in flight after the first
 * round and 500 after the second.
 */
START_TEST(test_window_far_hosts)
{
	struct engine_window w;

	engine_window_init(&w);
	ck_assert_int_eq(window_rounds(&w, 200, 200, 10, 200), 1);
	engine_window_init(&w);
	ck_assert_int_le(window_rounds(&w, 200, 200, 10, 500), 2);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_backoff, 0,
	    sizeof backoff_cases / sizeof backoff_cases[0]);
	tcase_add_test(tc, test_window_steps);
	tcase_add_test(tc, test_window_near_hosts);
	tcase_add_test(tc, test_window_far_hosts);
	tcase_add_test(tc, test_window_far_cut);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
