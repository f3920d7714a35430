/* SPDX-License-Identifier: MIT */
/*
 * timer.c -- unit test of lib/timer.c, the timer heap: firing order, equal
 * due times, stop and restart, and many timers against a reference model
 * (the library's timerfd is replaced by a stub that records its setting)
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tap.h"

static uint64_t fd_due;	 /* what the timerfd was last set to */
static unsigned fd_sets; /* how many times it was set */

/* rdmamsg__loop_timerfd_set -- the stub: remember the setting */
int rdmamsg__loop_timerfd_set(struct rdmamsg_ctx *ctx, uint64_t due_ns)
{
	(void)ctx;
	fd_due = due_ns;
	fd_sets++;
	return 0;
}

static struct rdmamsg_ctx ctx;

struct tt {
	struct rdmamsg__timer t;
	int id;
	uint64_t due; /* the model's copy; 0 when idle */
	uint64_t seq;
};

#define MAXT 10000
static struct tt tts[MAXT];
static int fired[MAXT * 2];
static int nfired;
static uint64_t model_seq;

static void on_fire(struct rdmamsg__timer *t)
{
	struct tt *x = (struct tt *)t;

	if (nfired < MAXT * 2)
		fired[nfired] = x->id;
	nfired++;
	x->due = 0;
}

/* xrand -- a fixed pseudo-random sequence (xorshift) */
static uint64_t xs = 88172645463325252ull;
static uint64_t xrand(void)
{
	xs ^= xs << 13;
	xs ^= xs >> 7;
	xs ^= xs << 17;
	return xs;
}

static void setup(int n)
{
	int i;

	memset(&ctx, 0, sizeof(ctx));
	rdmamsg__timers_init(&ctx.timers);
	for (i = 0; i < n; i++) {
		rdmamsg__timer_init(&tts[i].t, on_fire);
		tts[i].id = i;
		tts[i].due = 0;
	}
	nfired = 0;
	fd_due = 0;
	fd_sets = 0;
	model_seq = 0;
}

static void start(int i, uint64_t due)
{
	rdmamsg__timer_start_at(&ctx, &tts[i].t, due);
	tts[i].due = due;
	tts[i].seq = model_seq++;
}

static void stop(int i)
{
	rdmamsg__timer_stop(&ctx, &tts[i].t);
	tts[i].due = 0;
}

/* check_node -- heap order and links below t; returns the node count */
static long check_node(const struct rdmamsg__timer *t, int *bad)
{
	long n = 1;

	if (t->left) {
		if (t->left->parent != t || t->left->due_ns < t->due_ns)
			*bad = 1;
		n += check_node(t->left, bad);
	}
	if (t->right) {
		if (t->right->parent != t || t->right->due_ns < t->due_ns)
			*bad = 1;
		if (!t->left)
			*bad = 1; /* not a complete tree */
		n += check_node(t->right, bad);
	}
	return n;
}

/* model_min -- index of the timer the model says fires next, -1 if none */
static int model_min(int n)
{
	int i, m = -1;

	for (i = 0; i < n; i++) {
		if (!tts[i].due)
			continue;
		if (m < 0 || tts[i].due < tts[m].due ||
		    (tts[i].due == tts[m].due && tts[i].seq < tts[m].seq))
			m = i;
	}
	return m;
}

/* consistent -- the heap agrees with the model and the timerfd */
static int consistent(int n)
{
	int m = model_min(n), bad = 0, i, active = 0;
	long count = 0;

	for (i = 0; i < n; i++)
		active += tts[i].due != 0;
	if (ctx.timers.min) {
		if (ctx.timers.min->parent)
			bad = 1;
		count = check_node(ctx.timers.min, &bad);
	}
	if (bad || count != active || ctx.timers.n != (uint32_t)active)
		return 0;
	if (m < 0)
		return ctx.timers.min == NULL &&
		       rdmamsg__timer_next_due(&ctx) == 0 && fd_due == 0;
	return ctx.timers.min == &tts[m].t &&
	       rdmamsg__timer_next_due(&ctx) == tts[m].due &&
	       fd_due == tts[m].due;
}

static void test_order(void)
{
	const int n = 200;
	int i, sorted = 1;

	setup(n);
	for (i = 0; i < n; i++)
		start(i, 1000 + xrand() % 500);
	ok(consistent(n), "order: heap and timerfd agree after %d starts", n);
	rdmamsg__timers_run_at(&ctx, 1000 + 499);
	is_int(nfired, n, "order: every timer due fired once");
	for (i = 1; i < n && i < nfired; i++)
		if (tts[fired[i]].t.due_ns < tts[fired[i - 1]].t.due_ns)
			sorted = 0;
	ok(sorted, "order: fired earliest first");
	ok(consistent(n) && fd_due == 0, "order: empty heap disarms the fd");

	/* only what is due fires */
	setup(3);
	start(0, 300);
	start(1, 100);
	start(2, 200);
	rdmamsg__timers_run_at(&ctx, 199);
	ok(nfired == 1 && fired[0] == 1, "order: run at 199 fires only 100");
	ok(consistent(3) && fd_due == 200, "order: fd set to the next, 200");
	rdmamsg__timers_run_at(&ctx, 1000);
	ok(nfired == 3 && fired[1] == 2 && fired[2] == 0,
	   "order: then 200 and 300");
}

static void test_equal(void)
{
	const int n = 50;
	int i, fifo = 1;

	setup(n);
	for (i = 0; i < n; i++)
		start(i, 500);
	/* restarting 0 for the same time puts it behind the others */
	start(0, 500);
	ok(consistent(n), "equal: heap consistent");
	rdmamsg__timers_run_at(&ctx, 500);
	is_int(nfired, n, "equal: all fired");
	for (i = 0; i < n - 1; i++)
		if (fired[i] != i + 1)
			fifo = 0;
	ok(fifo && fired[n - 1] == 0, "equal: fired in start order");
}

/* restarter -- a callback that starts timers itself */
static void restarter(struct rdmamsg__timer *t)
{
	struct tt *x = (struct tt *)t;

	on_fire(t);
	if (x->id == 0 && nfired < 5)
		start(0, t->due_ns + 10); /* periodic, every 10 */
	if (x->id == 0 && nfired == 1)
		stop(1); /* cancels a timer due in the same pass */
}

static void test_stop_restart(void)
{
	setup(4);
	rdmamsg__timer_stop(&ctx, &tts[0].t);
	ok(consistent(4) && fd_sets == 0, "stop: an idle timer is a no-op");
	start(0, 100);
	start(1, 200);
	start(2, 300);
	stop(0);
	ok(consistent(4) && fd_due == 200, "stop: the first moves the fd on");
	stop(2);
	ok(consistent(4) && fd_due == 200, "stop: a later one leaves it");
	start(1, 50);
	ok(consistent(4) && fd_due == 50, "restart: earlier moves the fd");
	start(1, 400);
	start(3, 350);
	ok(consistent(4) && fd_due == 350, "restart: later lets another lead");
	stop(1);
	stop(3);
	ok(consistent(4) && !ctx.timers.min && fd_due == 0,
	   "stop: all stopped, fd disarmed");
	rdmamsg__timers_run_at(&ctx, 1000);
	is_int(nfired, 0, "stop: a stopped timer never fires");

	/* callbacks that start and stop timers while the heap runs */
	setup(2);
	tts[0].t.fn = restarter;
	tts[1].t.fn = restarter;
	start(0, 100);
	start(1, 105);
	rdmamsg__timers_run_at(&ctx, 125);
	/* 0 fires at 100, 110, 120; 1 was stopped by the first firing */
	ok(nfired == 3 && fired[0] == 0 && fired[1] == 0 && fired[2] == 0,
	   "run: a periodic timer fires for each period due, 1 cancelled");
	ok(consistent(2) && fd_due == 130, "run: next period armed at 130");
	stop(0);
}

static void test_many(void)
{
	int n = tap_small() ? 1000 : MAXT;
	int ops = n * 10, i, good = 1, last = -1, sorted = 1, active = 0;
	uint64_t now = 0;

	setup(n);
	for (i = 0; i < ops && good; i++) {
		int k = (int)(xrand() % (uint64_t)n);
		uint64_t r = xrand();

		if (r % 3 == 0)
			stop(k);
		else
			start(k, now + 1 + (r >> 8) % 100000);
		if (i % 97 == 0 || n <= 1000)
			good = consistent(n);
	}
	ok(good && consistent(n), "many: %d random starts/stops on %d timers",
	   ops, n);
	/* fire in slices: each slice fires exactly what the model says */
	for (i = 0; i < n; i++)
		active += tts[i].due != 0;
	nfired = 0;
	while (ctx.timers.min && good) {
		int before = nfired, j;

		now += 997;
		rdmamsg__timers_run_at(&ctx, now);
		for (j = before; j < nfired && j < MAXT * 2; j++) {
			if (last >= 0 &&
			    tts[fired[j]].t.due_ns < tts[last].t.due_ns)
				sorted = 0;
			if (tts[fired[j]].t.due_ns > now)
				good = 0;
			last = fired[j];
		}
		good = good && consistent(n);
	}
	ok(good, "many: nothing fires early, heap consistent after each run");
	ok(sorted, "many: fired earliest first");
	is_int(nfired, active, "many: every running timer fired exactly once");
}

int main(void)
{
	test_order();
	test_equal();
	test_stop_restart();
	test_many();
	return done_testing();
}
