/* SPDX-License-Identifier: MIT */
/*
 * ticks.c -- unit test of tools/bench.h's ticks clock (rdmamsg_perf -t
 * lat times each round trip with it): without the TSC it is now_ns; with
 * it, an interval in ticks times ticks_ns is the interval CLOCK_MONOTONIC
 * measures around it (the best of five tries, to 2 %: a preemption
 * between two readings only widens the monotonic one)
 */
#include "config.h"

#include <stdint.h>
#include <time.h>

#include "../tools/bench.h"
#include "tap.h"

/* try_once -- |TSC ticks * ns - monotonic| / monotonic over a 20 ms
 * sleep */
static double try_once(double ns)
{
	struct timespec d = {0, 20000000};
	uint64_t a0, c0, c1, a1;
	double got, want;

	a0 = now_ns();
	c0 = ticks(1);
	nanosleep(&d, NULL);
	c1 = ticks(1);
	a1 = now_ns();
	got = (double)(c1 - c0) * ns;
	want = (double)(a1 - a0);
	return got > want ? (got - want) / want : (want - got) / want;
}

int main(void)
{
	double ns, err = 1e9, e;
	uint64_t a, b;
	int tsc = ticks_tsc(), i;

	ok(ticks_ns(0) == 1.0, "without the TSC: a tick is a nanosecond");
	a = ticks(0);
	b = now_ns();
	ok(b >= a && b - a < 1000000000ull,
	   "without the TSC: ticks is CLOCK_MONOTONIC (%llu, %llu)",
	   (unsigned long long)a, (unsigned long long)b);
	if (!tsc) {
		skip_one("no invariant TSC");
		skip_one("no invariant TSC");
		return done_testing();
	}
	ns = ticks_ns(tsc);
	ok(ns > 0.05 && ns < 20,
	   "the TSC: %.4f ns a tick (a clock of 50 MHz to 20 GHz)", ns);
	for (i = 0; i < 5; i++)
		if ((e = try_once(ns)) < err)
			err = e;
	ok(err < 0.02,
	   "the TSC: a sleep measured as by the clock (off by %.4f)", err);
	return done_testing();
}
