/* SPDX-License-Identifier: MIT */
/*
 * rxbatch.c -- receive buffers reposted in batches (lib/lane_rc.c,
 * rdmamsg__ep_rx_batch in lib/msg.c): at receive depths around the
 * batch's bounds, bursts that spend every credit before the receiver
 * runs, then a ping-pong.  Every message arrives once, in order, intact;
 * no burst finds the sender without credits once the receiver has caught
 * up (the buffers a batch keeps back are less than a quarter of the
 * window, and never all of it), and the ping-pong never stalls.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

#define ROUNDS 20
#define PINGS  200

struct side {
	struct test_side t; /* first: test_side's helpers take it */
	uint64_t want;	    /* the next sequence number */
	int echo;
};

/* on_recv_cb -- sequence numbers in order, as payload and immediate; the
 * server echoes in ping-pong */
static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	struct side *s = arg;
	uint64_t v = 0;

	(void)flags;
	if (len == 8)
		memcpy(&v, data, 8);
	if (len != 8 || v != s->want || imm != (uint32_t)s->want)
		s->t.bad++;
	s->want++;
	s->t.got++;
	if (s->t.ep == NULL)
		s->t.ep = ep;
	if (s->echo && rdmamsg_send_imm(ep, &v, 8, imm, NULL))
		s->t.bad++;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_disconnect = test_side_on_disconnect,
};

/* depth -- one connection of d receive buffers each way; the client
 * queues nothing (no send backlog): a send without credits is refused */
static void depth(struct rdmamsg_ctx *sctx, struct rdmamsg_ctx *cctx,
		  uint32_t d)
{
	static struct side srv, cli;
	struct rdmamsg_ep_attr *ca;
	uint64_t seq = 0, min = UINT64_MAX, k;
	long long end;
	char addr[64];
	int r, ret;

	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	srv.t.ctx = sctx;
	cli.t.ctx = cctx;
	srv.t.cbs = &cbs;
	if (rdmamsg_ep_attr_new(&srv.t.attr) || rdmamsg_ep_attr_new(&ca) ||
	    rdmamsg_ep_attr_set_recv_depth(srv.t.attr, d) ||
	    rdmamsg_ep_attr_set_recv_depth(ca, d) ||
	    rdmamsg_ep_attr_set_send_backlog(ca, 0))
		bail_out("receive depth attributes");
	if (test_side_listen(&srv.t, NULL, addr, sizeof(addr)) ||
	    rdmamsg_connect(cctx, addr, ca, &cbs, &cli, &cli.t.ep))
		bail_out("listen, connect");
	rdmamsg_ep_attr_delete(&ca);
	test_run2(&srv.t, &cli.t, &cli.t.up, 5000);
	ok(cli.t.status == 0, "depth %u: connected (%d)", d, cli.t.status);

	/* the passive side grants its credits in-band: the first message
	 * waits for them */
	end = test_now_ms() + 5000;
	while ((ret = rdmamsg_send_imm(cli.t.ep, &seq, 8, 0, NULL)) ==
		       -EAGAIN &&
	       test_now_ms() < end)
		test_run2(&srv.t, &cli.t, &cli.t.disc, 1);
	ok(ret == 0, "depth %u: first message (%d)", d, ret);
	seq = 1;
	test_catch_up(&srv.t, &cli.t, seq);

	/* bursts: the sender spends its credits, then the receiver runs */
	for (r = 0; r < ROUNDS; r++) {
		for (k = 0;; k++, seq++) {
			ret = rdmamsg_send_imm(cli.t.ep, &seq, 8, (uint32_t)seq,
					       NULL);
			if (ret)
				break;
		}
		if (ret != -EAGAIN || !k)
			break;
		if (k < min)
			min = k;
		test_catch_up(&srv.t, &cli.t, seq);
	}
	ok(r == ROUNDS, "depth %u: %d bursts of %d (the last ended with %d)", d,
	   r, ROUNDS, ret);
	ok(min <= d && 4 * min > 3 * (uint64_t)d,
	   "depth %u: every burst had more than 3/4 of the window (at least "
	   "%llu)",
	   d, (unsigned long long)min);
	ok(srv.t.got == seq,
	   "depth %u: every message arrived once (%llu of "
	   "%llu)",
	   d, (unsigned long long)srv.t.got, (unsigned long long)seq);
	ok(srv.t.bad == 0, "depth %u: in order, intact", d);

	/* ping-pong: the replies carry the credits back */
	srv.echo = 1;
	cli.want = seq;
	for (r = 0; r < PINGS; r++, seq++) {
		if (rdmamsg_send_imm(cli.t.ep, &seq, 8, (uint32_t)seq, NULL))
			break;
		TEST_RUN2_WHILE(&srv.t, &cli.t, cli.want <= seq, 5000);
		if (cli.want <= seq)
			break;
	}
	ok(r == PINGS, "depth %u: %d round trips of %d", d, r, PINGS);
	ok(srv.t.bad + cli.t.bad == 0, "depth %u: replies in order, intact", d);

	/* a burst after the ping-pong, whose receives left some buffers
	 * waiting for a batch */
	srv.echo = 0;
	for (k = 0;; k++, seq++)
		if (rdmamsg_send_imm(cli.t.ep, &seq, 8, (uint32_t)seq, NULL))
			break;
	test_catch_up(&srv.t, &cli.t, seq);
	ok(k <= d && 4 * k > 3 * (uint64_t)d,
	   "depth %u: a burst after it had more than 3/4 of the window (%llu)",
	   d, (unsigned long long)k);
	ok(srv.t.got == seq && srv.t.bad == 0,
	   "depth %u: and arrived whole (%llu of %llu)", d,
	   (unsigned long long)srv.t.got, (unsigned long long)seq);

	ok(test_side_close2(&srv.t, &cli.t, 5000), "depth %u: closed", d);
	rdmamsg_ep_attr_delete(&srv.t.attr);
}

int main(void)
{
	static const uint32_t depths[] = {2,  3,  4,  7,  8,  11, 12,
					  15, 16, 24, 32, 64, 128};
	struct rdmamsg_ctx *sctx, *cctx;
	size_t i;

	test_setup("rxbatch");
	sctx = test_ctx();
	is_int(rdmamsg_ctx_create(NULL, &cctx), 0, "second context");
	for (i = 0; i < sizeof(depths) / sizeof(depths[0]); i++)
		depth(sctx, cctx, depths[i]);
	is_int(rdmamsg_ctx_destroy(&cctx), 0, "second context destroyed");
	is_int(rdmamsg_ctx_destroy(&sctx), 0, "first context destroyed");
	return done_testing();
}
