/* SPDX-License-Identifier: MIT */
/* timer.c -- one-shot timers (connect, close, keep-alive) on one timerfd */
#include "config.h"

#include <time.h>

#include "internal.h"

/* rdmamsg__now_ns -- CLOCK_MONOTONIC in nanoseconds */
uint64_t rdmamsg__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* rdmamsg__timer_init -- an idle timer that calls fn when it fires */
void rdmamsg__timer_init(struct rdmamsg__timer *t,
			 void (*fn)(struct rdmamsg__timer *t))
{
	list_init(&t->link);
	t->fn = fn;
	t->active = 0;
	t->due_ns = 0;
}

/* rearm -- point the timerfd at the earliest timer */
static void rearm(struct rdmamsg_ctx *ctx)
{
	uint64_t due = 0;

	if (!list_empty(&ctx->timers))
		due = container_of(ctx->timers.next, struct rdmamsg__timer,
				   link)
			      ->due_ns;
	rdmamsg__loop_timerfd_set(ctx, due);
}

/* rdmamsg__timer_start -- (re)start t to fire in ms milliseconds */
void rdmamsg__timer_start(struct rdmamsg_ctx *ctx, struct rdmamsg__timer *t,
			  unsigned int ms)
{
	struct rdmamsg__list *pos;
	int first;

	if (t->active)
		list_del(&t->link);
	t->due_ns = rdmamsg__now_ns() + (uint64_t)ms * 1000000ull;
	t->active = 1;
	/* few timers per context: a sorted list is enough */
	for (pos = ctx->timers.next; pos != &ctx->timers; pos = pos->next)
		if (container_of(pos, struct rdmamsg__timer, link)->due_ns >
		    t->due_ns)
			break;
	list_add_tail(pos, &t->link);
	first = ctx->timers.next == &t->link;
	if (first)
		rearm(ctx);
}

/* rdmamsg__timer_stop -- cancel t if it is running */
void rdmamsg__timer_stop(struct rdmamsg_ctx *ctx, struct rdmamsg__timer *t)
{
	int first;

	if (!t->active)
		return;
	first = ctx->timers.next == &t->link;
	list_del(&t->link);
	t->active = 0;
	if (first)
		rearm(ctx);
}

/* rdmamsg__timers_run -- fire every timer that is due */
void rdmamsg__timers_run(struct rdmamsg_ctx *ctx)
{
	uint64_t now = rdmamsg__now_ns();
	int fired = 0;

	while (!list_empty(&ctx->timers)) {
		struct rdmamsg__timer *t = container_of(
			ctx->timers.next, struct rdmamsg__timer, link);

		if (t->due_ns > now)
			break;
		list_del(&t->link);
		t->active = 0;
		fired = 1;
		t->fn(t);
	}
	if (fired)
		rearm(ctx);
}
