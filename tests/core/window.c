/* SPDX-License-Identifier: MIT */
/*
 * window.c -- the receive window that grows (rdmamsg_ep_attr_set_
 * recv_depth_max, lib/msg.c grow_window), end to end on two contexts: a
 * client without a send backlog spends every credit it has in bursts of
 * 4 KiB messages, the server catching up between them.  With the
 * defaults the server's window doubles from 32 to 128 and stops there,
 * each burst as large as the window the last one left; a depth set alone
 * stays a fixed window; a maximum that is not a doubling of the depth
 * (8 to 24) ends at it.  Every message arrives once, in order, intact;
 * the client's own window, which nothing used, stays at its depth, and
 * before the handshake there is none (-ENOTCONN).
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

#define ROUNDS 8
#define SIZE   4096

struct side {
	struct test_side t; /* first: test_side's helpers take it */
	uint64_t want;	    /* the next sequence number */
};

/* fill -- message seq: its number, then bytes that depend on it */
static void fill(uint8_t *m, uint64_t seq)
{
	size_t i;

	memcpy(m, &seq, 8);
	for (i = 8; i < SIZE; i++)
		m[i] = (uint8_t)(seq * 7 + i);
}

/* on_recv_cb -- in order and intact */
static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	static uint8_t m[SIZE];
	struct side *s = arg;

	(void)imm;
	(void)flags;
	fill(m, s->want);
	if (len != SIZE || memcmp(data, m, SIZE))
		s->t.bad++;
	s->want++;
	s->t.got++;
	if (s->t.ep == NULL)
		s->t.ep = ep;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_disconnect = test_side_on_disconnect,
};

/* run -- one connection, the server's attributes depth and max (0: not
 * set), bursts[] the credits each burst found; the server's window at
 * the end in *now and *max */
static void run(struct rdmamsg_ctx *sctx, struct rdmamsg_ctx *cctx,
		const char *name, uint32_t depth, uint32_t dmax,
		uint64_t *bursts, uint32_t *now, uint32_t *max)
{
	static struct side srv, cli;
	static uint8_t m[SIZE];
	struct rdmamsg_ep_attr *ca;
	uint32_t cnow = 0, cmax = 0;
	uint64_t seq = 0, k;
	long long end;
	char addr[64];
	int r, ret;

	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	srv.t.ctx = sctx;
	cli.t.ctx = cctx;
	srv.t.cbs = &cbs;
	if (rdmamsg_ep_attr_new(&srv.t.attr) || rdmamsg_ep_attr_new(&ca) ||
	    (depth && rdmamsg_ep_attr_set_recv_depth(srv.t.attr, depth)) ||
	    (dmax && rdmamsg_ep_attr_set_recv_depth_max(srv.t.attr, dmax)) ||
	    rdmamsg_ep_attr_set_send_backlog(ca, 0))
		bail_out("attributes");
	if (test_side_listen(&srv.t, NULL, addr, sizeof(addr)) ||
	    rdmamsg_connect(cctx, addr, ca, &cbs, &cli, &cli.t.ep))
		bail_out("listen, connect");
	rdmamsg_ep_attr_delete(&ca);
	ret = rdmamsg_ep_get_window(cli.t.ep, &cnow, &cmax);
	ok(ret == -ENOTCONN, "%s: no window before the handshake (%d)", name,
	   ret);
	test_run2(&srv.t, &cli.t, &cli.t.up, 5000);
	ok(cli.t.status == 0, "%s: connected (%d)", name, cli.t.status);

	/* the passive side grants its credits in-band: the first message
	 * waits for them */
	fill(m, seq);
	end = test_now_ms() + 5000;
	while ((ret = rdmamsg_send(cli.t.ep, m, SIZE, NULL)) == -EAGAIN &&
	       test_now_ms() < end)
		test_run2(&srv.t, &cli.t, &cli.t.disc, 1);
	ok(ret == 0, "%s: first message (%d)", name, ret);
	seq = 1;
	test_catch_up(&srv.t, &cli.t, seq);

	/* bursts: the sender spends its credits, then the receiver runs */
	for (r = 0; r < ROUNDS; r++) {
		for (k = 0;; k++, seq++) {
			fill(m, seq);
			ret = rdmamsg_send(cli.t.ep, m, SIZE, NULL);
			if (ret)
				break;
		}
		bursts[r] = k;
		if (ret != -EAGAIN || !k)
			break;
		test_catch_up(&srv.t, &cli.t, seq);
	}
	ok(r == ROUNDS, "%s: %d bursts of %d (the last ended with %d)", name, r,
	   ROUNDS, ret);
	ok(srv.t.got == seq && srv.t.bad == 0,
	   "%s: every message arrived once, in order, intact (%llu of %llu)",
	   name, (unsigned long long)srv.t.got, (unsigned long long)seq);
	ret = rdmamsg_ep_get_window(srv.t.ep, now, max);
	ok(ret == 0, "%s: the server's window %u of at most %u", name, *now,
	   *max);
	ret = rdmamsg_ep_get_window(cli.t.ep, &cnow, &cmax);
	ok(ret == 0 && cnow == 32 && cmax == 128,
	   "%s: the client's window, unused, at its depth (%u of %u)", name,
	   cnow, cmax);
	ok(test_side_close2(&srv.t, &cli.t, 5000), "%s: closed", name);
	rdmamsg_ep_attr_delete(&srv.t.attr);
}

int main(void)
{
	struct rdmamsg_ctx *sctx, *cctx;
	uint64_t b[ROUNDS];
	uint32_t now = 0, max = 0;
	int i, bad;

	test_setup("window");
	sctx = test_ctx();
	is_int(rdmamsg_ctx_create(NULL, &cctx), 0, "second context");
	is_int(rdmamsg_ep_get_window(NULL, &now, &max), -EINVAL,
	       "rdmamsg_ep_get_window(NULL): -EINVAL");

	/* the defaults: 32, growing to 128 */
	memset(b, 0, sizeof(b));
	run(sctx, cctx, "defaults", 0, 0, b, &now, &max);
	diag("bursts: %llu %llu %llu %llu %llu %llu %llu %llu",
	     (unsigned long long)b[0], (unsigned long long)b[1],
	     (unsigned long long)b[2], (unsigned long long)b[3],
	     (unsigned long long)b[4], (unsigned long long)b[5],
	     (unsigned long long)b[6], (unsigned long long)b[7]);
	ok(b[0] <= 32 && 4 * b[0] > 3 * 32,
	   "defaults: the first burst had the depth's 32 credits (%llu)",
	   (unsigned long long)b[0]);
	ok(b[1] <= 64 && 4 * b[1] > 3 * 64,
	   "defaults: the window used whole, the next had 64 (%llu)",
	   (unsigned long long)b[1]);
	for (bad = 0, i = 2; i < ROUNDS; i++)
		bad += b[i] > 128 || 4 * b[i] <= 3 * 128;
	ok(!bad, "defaults: then 128 each time, never more");
	ok(now == 128 && max == 128, "defaults: the server's window 128 (%u)",
	   now);

	/* a depth set alone: a fixed window */
	memset(b, 0, sizeof(b));
	run(sctx, cctx, "depth 32", 32, 0, b, &now, &max);
	for (bad = 0, i = 0; i < ROUNDS; i++)
		bad += b[i] > 32 || 4 * b[i] <= 3 * 32;
	ok(!bad && now == 32 && max == 32,
	   "depth 32 set alone: every burst 32 credits, the window 32");

	/* 8 growing to 24: 16, then the 8 left */
	memset(b, 0, sizeof(b));
	run(sctx, cctx, "depth 8, max 24", 8, 24, b, &now, &max);
	ok(b[0] <= 8 && b[1] <= 16 && 4 * b[1] > 3 * 16,
	   "depth 8, max 24: bursts of 8, then 16 (%llu, %llu)",
	   (unsigned long long)b[0], (unsigned long long)b[1]);
	for (bad = 0, i = 2; i < ROUNDS; i++)
		bad += b[i] > 24 || 4 * b[i] <= 3 * 24;
	ok(!bad && now == 24 && max == 24,
	   "depth 8, max 24: then 24, the window 24 (%u)", now);

	is_int(rdmamsg_ctx_destroy(&cctx), 0, "second context destroyed");
	is_int(rdmamsg_ctx_destroy(&sctx), 0, "first context destroyed");
	return done_testing();
}
