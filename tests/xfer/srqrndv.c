/* SPDX-License-Identifier: MIT */
/*
 * srqrndv.c -- rendezvous both ways between a server whose endpoints
 * share an SRQ and several clients, two of them on an SRQ of their own,
 * two on their own rings.  The server's endpoints advertise a receive
 * depth but, passive on an SRQ, guarantee one data credit and lend the
 * rest from a small surplus (srq.c: a sixteenth of max_bufs, here 4 for
 * all of them, or none), so a client may have fewer credits than the depth its
 * bound on announcements (rndv.c window_full) goes by, and each
 * announcement keeps its credit at the receiver until its FIN goes
 * (rts_hold).  Were every credit of both sides of a connection held by
 * announcements, each side's FINs would wait for the other's.  Each side
 * of each connection sends NMSG messages, three of four by rendezvous,
 * the fourth eager between them, retrying after -EAGAIN, all at once.
 * Asserted: the SRQ lent fewer credits than the windows advertised; every
 * message arrives once, in order, intact; every on_send comes once, with
 * 0; nothing is disconnected; everything closes clean.
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"
#include "pattern.h"

#define NCLI	 4
#define NMSG_MAX 200
#define LARGE	 ((size_t)16 << 10)
#define SMALL	 100
#define EAGER	 1024
#define THRESH	 4096
/* a passive endpoint's guaranteed window on an SRQ: 1 data credit and
 * the 2 control ones; its full one: the receive depth and those 2 */
#define WIN_MIN	   3
#define WIN(depth) ((depth) + 2)

struct conn {
	struct rdmamsg_ep *ep;
	uint32_t next; /* the next message to send */
	unsigned int sent, recvd;
	int bad_send, bad_recv, send_err;
	int up, status, disc, closed;
	unsigned char done[NMSG_MAX]; /* on_send came for message i */
};

static struct conn sc[NCLI], cl[NCLI];
static struct rdmamsg_ep_attr *sattr;
static int naccepted, accept_err;
static volatile int lclosed;
static unsigned int nmsg;
static unsigned char buf[LARGE];

/* msg_len -- message seq's length */
static size_t msg_len(uint32_t seq)
{
	return seq % 4 == 3 ? SMALL : LARGE;
}

/* push -- send c's messages until the connection says -EAGAIN */
static void push(struct conn *c)
{
	int ret;

	while (c->up && !c->status && c->next < nmsg && !c->send_err) {
		fill(buf, msg_len(c->next), c->next);
		ret = rdmamsg_send(c->ep, buf, msg_len(c->next),
				   (void *)(uintptr_t)c->next);
		if (ret == -EAGAIN)
			return;
		if (ret) {
			c->send_err = ret;
			return;
		}
		c->next++;
	}
}

static void on_connect(struct rdmamsg_ep *ep, int status, int reason,
		       const void *pdata, size_t len, void *arg)
{
	struct conn *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	c->up = 1;
	c->status = status;
}

static void on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)status;
	((struct conn *)arg)->disc = 1;
}

static void on_close(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct conn *)arg)->closed = 1;
}

static void on_send(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct conn *c = arg;

	(void)ep;
	/* eager sends complete when sent, rendezvous ones at their FIN:
	 * each once, in any order */
	if (status || (uintptr_t)op >= nmsg || c->done[(uintptr_t)op]++)
		c->bad_send++;
	c->sent++;
}

static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	struct conn *c = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len != msg_len(c->recvd) || !same(data, len, c->recvd))
		c->bad_recv++;
	c->recvd++;
}

static void on_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	push(arg);
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = on_connect,
	.on_disconnect = on_disconnect,
	.on_send = on_send,
	.on_recv = on_recv,
	.on_writable = on_writable,
};

/* on_lclose -- the listener's close callback */
static void on_lclose(struct rdmamsg_listener *l, void *arg)
{
	(void)l;
	(void)arg;
	lclosed = 1;
}

/* on_req -- the server accepts each client into the next sc[] on the
 * SRQ (sattr); an accepted endpoint is up at once */
static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	struct conn *c;
	int ret;

	(void)l;
	(void)pdata;
	(void)len;
	(void)arg;
	if (naccepted == NCLI) {
		accept_err = -ENOSPC;
		rdmamsg_conn_req_reject(req, 0, NULL, 0);
		return;
	}
	c = &sc[naccepted];
	ret = rdmamsg_conn_req_accept(req, sattr, &cbs, c, &c->ep);
	if (ret) {
		accept_err = ret;
		return;
	}
	naccepted++;
}

/* all_done -- every message of every connection arrived, every on_send
 * came, or something failed */
static int all_done(void)
{
	int i;

	for (i = 0; i < NCLI; i++) {
		if (sc[i].disc || cl[i].disc || sc[i].send_err ||
		    cl[i].send_err)
			return 1;
		if (sc[i].recvd < nmsg || cl[i].recvd < nmsg ||
		    sc[i].sent < nmsg || cl[i].sent < nmsg)
			return 0;
	}
	return 1;
}

/* count -- how many of NCLI connections' field at off are nonzero, on
 * side v */
static int count(const struct conn *v, size_t off)
{
	int i, n = 0;

	for (i = 0; i < NCLI; i++)
		n += *(const int *)(const void *)((const char *)&v[i] + off) !=
		     0;
	return n;
}

/* run -- server endpoints of receive depth ds on a shared SRQ of sbufs
 * buffers (a sixteenth of them may be lent: srq.c), NCLI clients of
 * depth dc (the first half on an SRQ of their own) */
static void run(struct test_side *s, struct test_side *c, unsigned int ds,
		unsigned int dc, unsigned int sbufs)
{
	struct rdmamsg_srq_attr sqa = {.max_bufs = sbufs, .buf_size = EAGER};
	struct rdmamsg_srq_attr cqa = {.max_bufs = 256, .buf_size = EAGER};
	struct rdmamsg_ep_attr *ca, *cs;
	struct rdmamsg_srq *ssrq, *csrq;
	struct rdmamsg_srq_stats st;
	struct rdmamsg_listener *lst;
	unsigned int got_s = 0, got_c = 0, sent_s = 0, sent_c = 0;
	int bad = 0, i;
	uint16_t port = 0;
	char addr[64];
	long long end;

	memset(sc, 0, sizeof(sc));
	memset(cl, 0, sizeof(cl));
	naccepted = accept_err = 0;
	lclosed = 0;
	if (rdmamsg_srq_create(s->ctx, &sqa, &ssrq) ||
	    rdmamsg_srq_create(c->ctx, &cqa, &csrq))
		bail_out("SRQs");
	sattr = test_ep_attr(EAGER, (size_t)1 << 20);
	ca = test_ep_attr(EAGER, (size_t)1 << 20);
	cs = test_ep_attr(EAGER, (size_t)1 << 20);
	if (rdmamsg_ep_attr_set_recv_depth(sattr, ds) ||
	    rdmamsg_ep_attr_set_srq(sattr, ssrq) ||
	    rdmamsg_ep_attr_set_rndv_threshold(sattr, THRESH) ||
	    rdmamsg_ep_attr_set_recv_depth(ca, dc) ||
	    rdmamsg_ep_attr_set_rndv_threshold(ca, THRESH) ||
	    rdmamsg_ep_attr_set_recv_depth(cs, dc) ||
	    rdmamsg_ep_attr_set_rndv_threshold(cs, THRESH) ||
	    rdmamsg_ep_attr_set_srq(cs, csrq))
		bail_out("endpoint attributes");
	if (rdmamsg_listen(s->ctx, "127.0.0.1:0", on_req, NULL, &lst) ||
	    rdmamsg_listener_get_port(lst, &port))
		bail_out("listen");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	for (i = 0; i < NCLI; i++) {
		if (rdmamsg_connect(c->ctx, addr, i < NCLI / 2 ? cs : ca, &cbs,
				    &cl[i], &cl[i].ep))
			bail_out("connect");
		/* one at a time: sc[i] is cl[i]'s peer */
		TEST_RUN2_WHILE(s, c, !cl[i].up || !sc[i].up, 10000);
	}
	ok(count(cl, offsetof(struct conn, up)) == NCLI &&
		   count(sc, offsetof(struct conn, up)) == NCLI &&
		   !count(cl, offsetof(struct conn, status)) &&
		   !count(sc, offsetof(struct conn, status)) &&
		   naccepted == NCLI && !accept_err,
	   "depths %u (server, SRQ) and %u: %d clients connected", ds, dc,
	   NCLI);
	is_int(rdmamsg_srq_query(ssrq, &st), 0, "server SRQ queried");
	ok(st.reserved < NCLI * WIN(ds) && st.reserved >= NCLI * WIN_MIN,
	   "depths %u and %u: the SRQ holds %u buffers for windows of %u "
	   "advertised (fewer credits lent)",
	   ds, dc, st.reserved, NCLI * WIN(ds));

	end = test_now_ms() + 60000;
	while (!all_done() && test_now_ms() < end) {
		for (i = 0; i < NCLI; i++) {
			push(&sc[i]);
			push(&cl[i]);
		}
		test_run2(s, c, &(int){0}, 5);
	}
	for (i = 0; i < NCLI; i++) {
		got_s += sc[i].recvd;
		got_c += cl[i].recvd;
		sent_s += sc[i].sent;
		sent_c += cl[i].sent;
		bad += sc[i].bad_recv + cl[i].bad_recv + sc[i].bad_send +
		       cl[i].bad_send;
		if (sc[i].recvd < nmsg || cl[i].recvd < nmsg)
			diag("connection %d: server got %u, client %u, "
			     "server's on_send %u, client's %u",
			     i, sc[i].recvd, cl[i].recvd, sc[i].sent,
			     cl[i].sent);
	}
	ok(got_s == NCLI * nmsg && got_c == NCLI * nmsg,
	   "depths %u and %u: every message arrived both ways (%u, %u of "
	   "%u)",
	   ds, dc, got_s, got_c, NCLI * nmsg);
	ok(sent_s == NCLI * nmsg && sent_c == NCLI * nmsg,
	   "depths %u and %u: every on_send came (%u, %u)", ds, dc, sent_s,
	   sent_c);
	ok(!bad,
	   "depths %u and %u: intact, in order, each on_send once with 0 "
	   "(%d wrong)",
	   ds, dc, bad);
	ok(!count(sc, offsetof(struct conn, send_err)) &&
		   !count(cl, offsetof(struct conn, send_err)) &&
		   !count(sc, offsetof(struct conn, disc)) &&
		   !count(cl, offsetof(struct conn, disc)),
	   "depths %u and %u: no send error, still connected", ds, dc);

	for (i = 0; i < NCLI; i++)
		rdmamsg_ep_close(cl[i].ep, on_close);
	TEST_RUN2_WHILE(s, c, count(sc, offsetof(struct conn, disc)) < NCLI,
			10000);
	for (i = 0; i < NCLI; i++)
		rdmamsg_ep_close(sc[i].ep, on_close);
	rdmamsg_listener_close(lst, on_lclose);
	TEST_RUN2_WHILE(s, c,
			count(sc, offsetof(struct conn, closed)) < NCLI ||
				count(cl, offsetof(struct conn, closed)) < NCLI,
			10000);
	TEST_RUN2_WHILE(s, c, !lclosed, 10000);
	ok(count(sc, offsetof(struct conn, closed)) == NCLI &&
		   count(cl, offsetof(struct conn, closed)) == NCLI && lclosed,
	   "depths %u and %u: every endpoint and the listener closed", ds, dc);
	is_int(test_srq_close(s->ctx, ssrq, 10000), 0, "server SRQ closed");
	is_int(test_srq_close(c->ctx, csrq, 10000), 0, "client SRQ closed");
	rdmamsg_ep_attr_delete(&sattr);
	rdmamsg_ep_attr_delete(&ca);
	rdmamsg_ep_attr_delete(&cs);
}

int main(void)
{
	struct test_side s, c;

	test_setup("srqrndv");
	memset(&s, 0, sizeof(s));
	memset(&c, 0, sizeof(c));
	nmsg = tap_small() ? 40 : NMSG_MAX;
	s.ctx = test_ctx();
	c.ctx = test_ctx();
	run(&s, &c, 8, 2, 64);	/* 4 lent among 4 endpoints */
	run(&s, &c, 16, 4, 64); /* the same, deeper */
	run(&s, &c, 8, 2, 15);	/* none lent: one data credit each */
	is_int(rdmamsg_ctx_destroy(&c.ctx), 0, "client context destroyed");
	is_int(rdmamsg_ctx_destroy(&s.ctx), 0, "server context destroyed");
	return done_testing();
}
