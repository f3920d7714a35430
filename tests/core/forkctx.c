/* SPDX-License-Identifier: MIT */
/*
 * forkctx.c -- fork() while another thread holds one of librdmamsg's
 * process-wide locks: the one that loads softrdma (rdmamsg_ctx_create
 * takes it first) and the list of contexts that device events are handed
 * through (taken last by rdmamsg_ctx_create, first by
 * rdmamsg_ctx_destroy).  A busy thread creates and destroys contexts; it
 * is parked inside one call, holding the lock it is about to release
 * (tests/park.h), while the main thread forks.  The child must create a
 * context of its own and destroy it; before librdmamsg's fork handlers
 * it waited for the lock for good.
 */
#define _GNU_SOURCE
#include "config.h"

#include <pthread.h>

#include "../tap.h"
#include "../park.h"
#include "util.h"

enum where { W_CREATE, W_DESTROY };

static enum where park_where;

/* busy -- contexts made and destroyed until stopped; the first round arms
 * the park in the call named by park_where */
static void *busy(void *arg)
{
	struct rdmamsg_ctx *ctx;
	int first = 1;

	(void)arg;
	park_me = 1;
	while (!atomic_load(&park_stop)) {
		if (first && park_where == W_CREATE)
			atomic_store(&park_armed, 1);
		if (rdmamsg_ctx_create(NULL, &ctx))
			break;
		if (first && park_where == W_DESTROY)
			atomic_store(&park_armed, 1);
		first = 0;
		rdmamsg_ctx_destroy(&ctx);
	}
	return NULL;
}

/* child -- a context of its own */
static int child(void)
{
	struct rdmamsg_ctx *ctx;

	if (rdmamsg_ctx_create(NULL, &ctx))
		return 1;
	rdmamsg_ctx_destroy(&ctx);
	return 0;
}

/* run -- fork while the busy thread is parked in W; the child's value
 * (park_fork) */
static int run(enum where w)
{
	park_where = w;
	park_reset();
	return park_run(busy, child);
}

int main(void)
{
	struct rdmamsg_ctx *ctx;
	int r;

	test_setup("forkctx");
	ctx = test_ctx(); /* softrdma loaded, a context on the list */
	if (!park_in("librdmamsg"))
		bail_out("librdmamsg not found among the loaded objects");
	r = run(W_CREATE);
	ok(r == 0,
	   "forked while a thread held the softrdma loader's lock: the child "
	   "creates and destroys a context (%s %d)",
	   r < 0 ? "hung" : "returned", r);
	r = run(W_DESTROY);
	ok(r == 0,
	   "forked while a thread held the contexts' list: the child creates "
	   "and destroys a context (%s %d)",
	   r < 0 ? "hung" : "returned", r);
	rdmamsg_ctx_destroy(&ctx);
	return done_testing();
}
