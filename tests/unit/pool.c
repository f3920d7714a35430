/* SPDX-License-Identifier: MIT */
/*
 * pool.c -- unit test of lib/pool.c through its internal API, against a
 * fake verbs table that registers memory in the test's own bookkeeping:
 * size classes, buffers inside their registration with its lkey and not
 * overlapping, get/put reuse, the limit (-ENOMEM, nothing leaked or
 * counted), sizes above the largest class (-EMSGSIZE), a failed
 * registration, idle slabs of another class given back at the limit,
 * which end of a free list each kind of get takes, and fini deregistering
 * everything.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "dispatch.h"
#include "tap.h"

/* ---- what pool.c needs from the rest of the library ----------------- */

int rdmamsg__log_level = -1; /* quiet */

void rdmamsg__log(int level, const char *func, const char *fmt, ...)
{
	(void)level;
	(void)func;
	(void)fmt;
}

int rdmamsg__errno(int fallback)
{
	return errno > 0 ? -errno : -fallback;
}

/* ---- the fake device: registrations in a table ---------------------- */

#define MAXREG 256

static struct ibv_mr regs[MAXREG];
static int live[MAXREG];
static int nlive, fail_next_reg;
static size_t reg_bytes;
static uint32_t next_key = 100;

static struct ibv_mr *fake_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
				  int access)
{
	int i;

	(void)pd;
	if (fail_next_reg) {
		fail_next_reg = 0;
		errno = EFAULT;
		return NULL;
	}
	for (i = 0; i < MAXREG && live[i]; i++)
		;
	if (i == MAXREG || !(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL;
		return NULL;
	}
	memset(&regs[i], 0, sizeof(regs[i]));
	regs[i].addr = addr;
	regs[i].length = len;
	regs[i].lkey = regs[i].rkey = next_key++;
	live[i] = 1;
	nlive++;
	reg_bytes += len;
	return &regs[i];
}

static int fake_dereg_mr(struct ibv_mr *mr)
{
	int i = (int)(mr - regs);

	if (i < 0 || i >= MAXREG || !live[i])
		return EINVAL;
	live[i] = 0;
	nlive--;
	reg_bytes -= mr->length;
	return 0;
}

static struct rdmamsg__ops fake_ops = {
	.name = "fake",
	.reg_mr = fake_reg_mr,
	.dereg_mr = fake_dereg_mr,
};

static struct rdmamsg_ctx ctx;

/* inside -- the buffer lies in a live registration with its lkey */
static int inside(const struct rdmamsg_buf *b)
{
	int i;

	for (i = 0; i < MAXREG; i++) {
		const char *lo = regs[i].addr;

		if (live[i] && b->data - RDMAMSG_HEADROOM >= lo &&
		    b->data + b->cap <= lo + regs[i].length)
			return b->lkey == regs[i].lkey;
	}
	return 0;
}

static void setup(size_t limit)
{
	memset(&ctx, 0, sizeof(ctx));
	ctx.ops = &fake_ops;
	ctx.pd = (struct ibv_pd
			  *)&ctx; /* any non-NULL PD: the fake ignores it */
	if (rdmamsg__pool_init(&ctx, limit, 0))
		bail_out("pool_init");
}

static void test_classes(void)
{
	static const size_t sizes[] = {1,    63,   64,	    65,		  1000,
				       4096, 4097, 1 << 20, (1 << 20) + 1};
	struct rdmamsg_buf *b, *c;
	size_t i;
	int good = 1;

	setup((size_t)256 << 20);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t want = 64;

		while (want < sizes[i])
			want *= 2;
		if (rdmamsg__buf_get(&ctx, sizes[i], BUF_LIB, &b)) {
			good = 0;
			continue;
		}
		if (b->cap != want || !inside(b) || b->state != BUF_LIB)
			good = 0;
		memset(b->data - RDMAMSG_HEADROOM, 0xa5,
		       b->cap + RDMAMSG_HEADROOM);
		rdmamsg__buf_put(b);
	}
	ok(good, "each size gets the smallest power-of-two class >= 64 B, "
		 "inside its registration, headroom and all writable");
	is_int(ctx.pool.in_use, 0, "nothing in use after the puts");
	is_int(ctx.pool.registered, reg_bytes,
	       "registered bytes agree with the device's");
	b = (struct rdmamsg_buf *)1;
	is_int(rdmamsg__buf_get(&ctx, ((size_t)64 << 20) + 1, BUF_LIB, &b),
	       -EMSGSIZE, "above the largest class: -EMSGSIZE");
	ok(b == (struct rdmamsg_buf *)1, "its output untouched");
	/* get/put: a put buffer serves the next get of its class */
	if (rdmamsg__buf_get(&ctx, 100, BUF_USER, &b))
		bail_out("get");
	rdmamsg__buf_put(b);
	ok(!rdmamsg__buf_get(&ctx, 128, BUF_LIB, &c) && c->cap == 128,
	   "a put buffer is reused before the pool grows");
	rdmamsg__buf_put(c);
	rdmamsg__pool_fini(&ctx);
	ok(nlive == 0 && reg_bytes == 0, "fini deregisters every slab");
}

static void test_distinct(void)
{
	enum { M = 3000 };
	static struct rdmamsg_buf *bs[M];
	int i, good = 1, n;
	size_t in_use = 0;

	setup((size_t)64 << 20);
	for (n = 0; n < M; n++) {
		if (rdmamsg__buf_get(&ctx, 1000, BUF_LIB, &bs[n]))
			break;
		/* every buffer marks its own bytes */
		memset(bs[n]->data, n & 0xff, bs[n]->cap);
		in_use += bs[n]->cap + RDMAMSG_HEADROOM;
	}
	is_int(n, M, "3000 buffers of 1 KiB");
	for (i = 0; i < n; i++) {
		size_t k;

		if (!inside(bs[i]))
			good = 0;
		for (k = 0; k < bs[i]->cap; k++)
			if ((unsigned char)bs[i]->data[k] != (i & 0xff))
				good = 0;
	}
	ok(good, "none overlaps another, each inside its registration");
	is_int(ctx.pool.in_use, in_use, "in_use counts them");
	for (i = 0; i < n; i++)
		rdmamsg__buf_put(bs[i]);
	is_int(ctx.pool.in_use, 0, "all returned");
	rdmamsg__pool_fini(&ctx);
	ok(nlive == 0, "fini deregisters every slab");
}

static void test_limit(void)
{
	struct rdmamsg_buf *b[64], *x = NULL, *big = NULL;
	size_t reg;
	int i, n, ret = 0;

	/* room for 2 MiB: fill it with 64 KiB buffers */
	setup((size_t)2 << 20);
	for (n = 0; n < 64; n++) {
		ret = rdmamsg__buf_get(&ctx, 65536, BUF_LIB, &b[n]);
		if (ret)
			break;
	}
	is_int(ret, -ENOMEM, "at the limit: -ENOMEM");
	ok(n > 0 && ctx.pool.registered <= ((size_t)2 << 20),
	   "%d buffers, registered %zu <= the limit", n, ctx.pool.registered);
	reg = ctx.pool.registered;
	is_int(rdmamsg__buf_get(&ctx, 65536, BUF_LIB, &x), -ENOMEM,
	       "again -ENOMEM");
	ok(x == NULL && ctx.pool.registered == reg && reg_bytes == reg,
	   "nothing registered by the failures");
	rdmamsg__buf_put(b[--n]);
	ok(!rdmamsg__buf_get(&ctx, 65536, BUF_LIB, &b[n]),
	   "one put: one get succeeds again");
	n++;
	for (i = 0; i < n; i++)
		rdmamsg__buf_put(b[i]);
	/* every 64 KiB slab is idle now: a 1 MiB class needs their room */
	ok(!rdmamsg__buf_get(&ctx, (size_t)1 << 20, BUF_LIB, &big),
	   "idle slabs of another class make room at the limit");
	ok(ctx.pool.registered <= ((size_t)2 << 20) &&
		   ctx.pool.registered == reg_bytes,
	   "still within the limit (%zu)", ctx.pool.registered);
	if (big)
		rdmamsg__buf_put(big);
	rdmamsg__pool_fini(&ctx);
	ok(nlive == 0, "fini deregisters every slab");

	/* a registration that fails: an error, nothing kept */
	setup((size_t)8 << 20);
	fail_next_reg = 1;
	x = NULL;
	ret = rdmamsg__buf_get(&ctx, 100, BUF_LIB, &x);
	ok(ret < 0 && x == NULL, "failed registration: error %d", ret);
	ok(ctx.pool.registered == 0 && nlive == 0, "nothing counted or kept");
	ok(!rdmamsg__buf_get(&ctx, 100, BUF_LIB, &x) && inside(x),
	   "the next get registers and succeeds");
	rdmamsg__buf_put(x);
	rdmamsg__pool_fini(&ctx);
	ok(nlive == 0, "fini deregisters every slab");
}

/* test_order -- rdmamsg__buf_get hands out the buffer freed last (its
 * lines in this core's cache), rdmamsg__buf_get_for_peer the one freed
 * longest ago (a rendezvous source: not the lines a peer has just read);
 * a slab given back takes its buffers off both ends */
static void test_order(void)
{
	struct rdmamsg_buf *b[64], *x = NULL, *y = NULL, *big = NULL;
	int i, n, cls, inorder = 1;

	setup((size_t)1 << 20); /* one slab of 64 KiB buffers */
	for (n = 0; n < 64; n++)
		if (rdmamsg__buf_get(&ctx, 65536, BUF_LIB, &b[n]))
			break;
	ok(n > 2 && n < 64, "%d buffers of 64 KiB within 1 MiB", n);
	cls = b[0]->cls; /* b[] go with their slab below */
	for (i = 0; i < n; i++)
		rdmamsg__buf_put(b[i]);
	for (i = 0; i < n; i++)
		if (rdmamsg__buf_get_for_peer(&ctx, 65536, &x) || x != b[i])
			inorder = 0;
	ok(inorder, "for a peer: the buffer freed longest ago first, then "
		    "in the order they were freed");
	is_int(rdmamsg__buf_get_for_peer(&ctx, 65536, &x), -ENOMEM,
	       "every one taken: -ENOMEM at the limit");
	for (i = 0; i < n; i++)
		rdmamsg__buf_put(b[i]);
	ok(!rdmamsg__buf_get(&ctx, 65536, BUF_LIB, &x) && x == b[n - 1],
	   "otherwise the one freed last");
	ok(!rdmamsg__buf_get_for_peer(&ctx, 65536, &y) && y == b[0],
	   "and for a peer still the oldest");
	rdmamsg__buf_put(y);
	ok(!rdmamsg__buf_get_for_peer(&ctx, 65536, &y) && y == b[1],
	   "one put back is the newest: the next oldest instead");
	rdmamsg__buf_put(y);
	rdmamsg__buf_put(x);
	is_int(ctx.pool.in_use, 0, "nothing in use");
	/* the idle 64 KiB slab makes room for a 512 KiB buffer, then that
	 * one's for a 64 KiB buffer again: both ends of each list let go */
	ok(!rdmamsg__buf_get(&ctx, (size_t)512 << 10, BUF_LIB, &big) &&
		   inside(big),
	   "an idle slab given back for another class");
	ok(!ctx.pool.free[cls] && !ctx.pool.free_tail[cls],
	   "its buffers are off both ends of their list");
	rdmamsg__buf_put(big);
	ok(!rdmamsg__buf_get_for_peer(&ctx, 65536, &x) && inside(x),
	   "and back: a buffer for a peer in a live registration");
	rdmamsg__buf_put(x);
	rdmamsg__pool_fini(&ctx);
	ok(nlive == 0, "fini deregisters every slab");
}

int main(void)
{
	test_classes();
	test_distinct();
	test_limit();
	test_order();
	return done_testing();
}
