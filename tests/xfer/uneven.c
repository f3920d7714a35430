/* SPDX-License-Identifier: MIT */
/*
 * uneven.c -- honest peers with receive windows of any depth move many
 * rendezvous messages in both directions at once: the receiver of an
 * announcement keeps its credit until its FIN goes (rndv.c rts_hold), so
 * a sender never announces more than the peer's window less one
 * (window_full): were every credit of both sides held, each side's FINs
 * would wait for the other's.  Pairs: a deep window (256) against a
 * shallow one (2), and two shallow ones; each side sends NMSG messages,
 * three of four by rendezvous, the fourth eager between them, retrying
 * after -EAGAIN.  Asserted: every message arrives once, in order, intact;
 * every on_send comes once, with 0; the connection stays up and closes
 * clean.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"
#include "pattern.h"

#define NMSG  300
#define LARGE ((size_t)64 << 10)
#define SMALL 100

struct side {
	struct test_side t;
	uint32_t next; /* the next message to send */
	volatile unsigned int sent, recvd;
	int bad_send, bad_recv, send_err;
	unsigned char done[NMSG]; /* on_send came for message i */
};

static struct side a, b;
static unsigned char buf[LARGE];

/* msg_len -- message seq's length */
static size_t msg_len(uint32_t seq)
{
	return seq % 4 == 3 ? SMALL : LARGE;
}

/* push -- send side s's messages until the connection says -EAGAIN */
static void push(struct side *s)
{
	int ret;

	while (s->next < NMSG && !s->send_err) {
		fill(buf, msg_len(s->next), s->next);
		ret = rdmamsg_send(s->t.ep, buf, msg_len(s->next),
				   (void *)(uintptr_t)s->next);
		if (ret == -EAGAIN)
			return;
		if (ret) {
			s->send_err = ret;
			return;
		}
		s->next++;
	}
}

static void on_send(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct side *s = arg;

	(void)ep;
	/* eager sends complete when sent, rendezvous ones at their FIN:
	 * each once, in any order */
	if (status || (uintptr_t)op >= NMSG || s->done[(uintptr_t)op]++)
		s->bad_send++;
	s->sent++;
}

static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	struct side *s = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len != msg_len(s->recvd) || !same(data, len, s->recvd))
		s->bad_recv++;
	s->recvd++;
}

static void on_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	push(arg);
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_disconnect = test_side_on_disconnect,
	.on_send = on_send,
	.on_recv = on_recv,
	.on_writable = on_writable,
};

/* pair -- a (the listener's side) with a receive depth of da, b with db */
static void pair(unsigned int da, unsigned int db)
{
	struct rdmamsg_ep_attr *aa, *ab;
	char addr[64];
	long long end;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.t.ctx = test_ctx();
	b.t.ctx = test_ctx();
	if (rdmamsg_ep_attr_new(&aa) || rdmamsg_ep_attr_new(&ab) ||
	    rdmamsg_ep_attr_set_recv_depth(aa, da) ||
	    rdmamsg_ep_attr_set_recv_depth(ab, db))
		bail_out("endpoint attributes");
	a.t.cbs = &cbs;
	a.t.attr = aa;
	if (test_side_listen(&a.t, NULL, addr, sizeof(addr)))
		bail_out("listen");
	/* test_side_on_req accepts with the test_side as the argument: it
	 * is the first member of struct side */
	if (rdmamsg_connect(b.t.ctx, addr, ab, &cbs, &b, &b.t.ep))
		bail_out("connect");
	TEST_RUN2_WHILE(&a.t, &b.t, !a.t.up || !b.t.up, 10000);
	ok(a.t.up && !a.t.status && b.t.up && !b.t.status,
	   "depths %u and %u: connected", da, db);
	end = test_now_ms() + 60000;
	while ((a.recvd < NMSG || b.recvd < NMSG || a.sent < NMSG ||
		b.sent < NMSG) &&
	       !a.t.disc && !b.t.disc && !a.send_err && !b.send_err &&
	       test_now_ms() < end) {
		push(&a);
		push(&b);
		test_run2(&a.t, &b.t, &(int){0}, 5);
	}
	ok(a.recvd == NMSG && b.recvd == NMSG,
	   "depths %u and %u: every message arrived both ways (%u, %u of "
	   "%d)",
	   da, db, a.recvd, b.recvd, NMSG);
	ok(a.sent == NMSG && b.sent == NMSG,
	   "depths %u and %u: every on_send came (%u, %u)", da, db, a.sent,
	   b.sent);
	ok(!a.bad_recv && !b.bad_recv && !a.bad_send && !b.bad_send,
	   "depths %u and %u: intact, in order, each on_send once with 0 "
	   "(%d %d %d %d)",
	   da, db, a.bad_recv, b.bad_recv, a.bad_send, b.bad_send);
	ok(!a.send_err && !b.send_err && !a.t.disc && !b.t.disc,
	   "depths %u and %u: no send error (%d, %d), still connected", da, db,
	   a.send_err, b.send_err);
	ok(test_side_close2(&a.t, &b.t, 10000), "depths %u and %u: closed", da,
	   db);
	rdmamsg_ep_attr_delete(&aa);
	rdmamsg_ep_attr_delete(&ab);
	is_int(rdmamsg_ctx_destroy(&a.t.ctx), 0, "context destroyed");
	is_int(rdmamsg_ctx_destroy(&b.t.ctx), 0, "context destroyed");
}

int main(void)
{
	test_setup("uneven");
	pair(256, 2);
	pair(2, 256);
	pair(2, 2);
	return done_testing();
}
