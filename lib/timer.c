/* SPDX-License-Identifier: MIT */
/*
 * timer.c -- one-shot timers (connect, close, keep-alive) on one timerfd
 *
 * The timers of a context form an intrusive binary min-heap: a complete
 * binary tree linked through the timers themselves, the earliest at the
 * root.  The position of the n-th node is spelled by the bits of n below
 * its top bit (0 = left, 1 = right), so the last slot is found in
 * O(log n) without an array, and starting a timer never allocates.
 * Equal due times fire in the order they were started (seq).
 */
#include "config.h"

#include <time.h>

#include "internal.h"

/* rdmamsg__timers_init -- an empty heap (all zero is one too) */
void rdmamsg__timers_init(struct rdmamsg__timers *h)
{
	h->min = NULL;
	h->n = 0;
	h->seq = 0;
}

/* rdmamsg__timer_init -- an idle timer that calls fn when it fires */
void rdmamsg__timer_init(struct rdmamsg__timer *t,
			 void (*fn)(struct rdmamsg__timer *t))
{
	t->left = t->right = t->parent = NULL;
	t->fn = fn;
	t->active = 0;
	t->due_ns = 0;
	t->seq = 0;
}

/* before -- a fires before b */
static int before(const struct rdmamsg__timer *a,
		  const struct rdmamsg__timer *b)
{
	if (a->due_ns != b->due_ns)
		return a->due_ns < b->due_ns;
	return a->seq < b->seq;
}

/* slot -- the link that holds (or will hold) the n-th node, n >= 1 */
static struct rdmamsg__timer **slot(struct rdmamsg__timers *h, uint32_t n,
				    struct rdmamsg__timer **parent)
{
	struct rdmamsg__timer **link = &h->min;
	int bit = 31;

	*parent = NULL;
	while (bit > 0 && !(n & (1u << bit)))
		bit--;
	/* walk the bits below the top one, most significant first */
	while (bit-- > 0) {
		*parent = *link;
		link = (n & (1u << bit)) ? &(*link)->right : &(*link)->left;
	}
	return link;
}

/* swap_up -- exchange child with its parent p in the tree */
static void swap_up(struct rdmamsg__timers *h, struct rdmamsg__timer *p,
		    struct rdmamsg__timer *c)
{
	struct rdmamsg__timer *cl = c->left, *cr = c->right;
	struct rdmamsg__timer *gp = p->parent, *sib;

	if (p->left == c) {
		sib = p->right;
		c->left = p;
		c->right = sib;
	} else {
		sib = p->left;
		c->right = p;
		c->left = sib;
	}
	if (sib)
		sib->parent = c;
	c->parent = gp;
	if (!gp)
		h->min = c;
	else if (gp->left == p)
		gp->left = c;
	else
		gp->right = c;
	p->parent = c;
	p->left = cl;
	p->right = cr;
	if (cl)
		cl->parent = p;
	if (cr)
		cr->parent = p;
}

/* sift -- restore the heap order around t (moved or inserted) */
static void sift(struct rdmamsg__timers *h, struct rdmamsg__timer *t)
{
	struct rdmamsg__timer *m;

	while (t->parent && before(t, t->parent))
		swap_up(h, t->parent, t);
	for (;;) {
		m = t;
		if (t->left && before(t->left, m))
			m = t->left;
		if (t->right && before(t->right, m))
			m = t->right;
		if (m == t)
			break;
		swap_up(h, t, m);
	}
}

/* heap_insert -- add t as the last node and sift it up */
static void heap_insert(struct rdmamsg__timers *h, struct rdmamsg__timer *t)
{
	struct rdmamsg__timer *parent;
	struct rdmamsg__timer **link = slot(h, h->n + 1, &parent);

	t->left = t->right = NULL;
	t->parent = parent;
	*link = t;
	h->n++;
	sift(h, t);
}

/* heap_remove -- unlink t; the last node takes its place and is sifted */
static void heap_remove(struct rdmamsg__timers *h, struct rdmamsg__timer *t)
{
	struct rdmamsg__timer *parent, *last, **link;

	link = slot(h, h->n, &parent);
	last = *link;
	*link = NULL;
	h->n--;
	if (last != t) {
		last->left = t->left;
		last->right = t->right;
		last->parent = t->parent;
		if (last->left)
			last->left->parent = last;
		if (last->right)
			last->right->parent = last;
		if (!t->parent)
			h->min = last;
		else if (t->parent->left == t)
			t->parent->left = last;
		else
			t->parent->right = last;
		sift(h, last);
	}
	t->left = t->right = t->parent = NULL;
}

/* rearm -- point the timerfd at the earliest timer if that changed */
static void rearm(struct rdmamsg_ctx *ctx, uint64_t was)
{
	uint64_t due = rdmamsg__timer_next_due(ctx);

	if (due != was)
		rdmamsg__loop_timerfd_set(ctx, due);
}

/* rdmamsg__timer_next_due -- due time of the earliest timer, 0 if none */
uint64_t rdmamsg__timer_next_due(const struct rdmamsg_ctx *ctx)
{
	return rdmamsg__timers_due(&ctx->timers);
}

/* rdmamsg__timer_start_at -- (re)start t to fire at due_ns (monotonic) */
void rdmamsg__timer_start_at(struct rdmamsg_ctx *ctx, struct rdmamsg__timer *t,
			     uint64_t due_ns)
{
	uint64_t was = rdmamsg__timer_next_due(ctx);

	if (t->active)
		heap_remove(&ctx->timers, t);
	/* 0 means "no timer" to the timerfd */
	t->due_ns = due_ns ? due_ns : 1;
	t->seq = ctx->timers.seq++;
	t->active = 1;
	heap_insert(&ctx->timers, t);
	rearm(ctx, was);
}

/* rdmamsg__timer_start -- (re)start t to fire in ms milliseconds */
void rdmamsg__timer_start(struct rdmamsg_ctx *ctx, struct rdmamsg__timer *t,
			  unsigned int ms)
{
	rdmamsg__timer_start_at(ctx, t,
				rdmamsg__now_ns() + (uint64_t)ms * 1000000ull);
}

/* rdmamsg__timer_stop -- cancel t if it is running */
void rdmamsg__timer_stop(struct rdmamsg_ctx *ctx, struct rdmamsg__timer *t)
{
	uint64_t was;

	if (!t->active)
		return;
	was = rdmamsg__timer_next_due(ctx);
	heap_remove(&ctx->timers, t);
	t->active = 0;
	rearm(ctx, was);
}

/* rdmamsg__timers_run_at -- fire every timer due at now_ns, earliest first */
void rdmamsg__timers_run_at(struct rdmamsg_ctx *ctx, uint64_t now_ns)
{
	uint64_t was = rdmamsg__timer_next_due(ctx);
	struct rdmamsg__timer *t;

	/* a callback may start or stop timers; one restarted for now_ns or
	 * earlier fires in this pass too, after those already due */
	while ((t = ctx->timers.min) && t->due_ns <= now_ns) {
		heap_remove(&ctx->timers, t);
		t->active = 0;
		t->fn(t);
	}
	/* the timerfd fired: set it again even if the earliest is unchanged */
	if (rdmamsg__timer_next_due(ctx) != was || was <= now_ns)
		rdmamsg__loop_timerfd_set(ctx, rdmamsg__timer_next_due(ctx));
}

/* rdmamsg__timers_run -- fire every timer that is due now */
void rdmamsg__timers_run(struct rdmamsg_ctx *ctx)
{
	rdmamsg__timers_run_at(ctx, rdmamsg__now_ns());
}
