/* SPDX-License-Identifier: MIT */
/*
 * dc_forge.c -- a DC peer cannot speak for another peer's endpoint.
 *
 * Every DC peer of a server learns the server context's one DCT access
 * key, and the endpoint tag its messages carry as the immediate is
 * guessable.  Two clients B (the victim) and A (the attacker) connect
 * over DC to one server; A's lane tags its messages with the server
 * endpoint of B (RDMAMSG_TEST_DC_TAG_DELTA=-1, set only while A's
 * context handles its connection: the server's endpoints are made one
 * after the other, so B's tag is A's slot index less one).  The server
 * must drop what A sends, count it (rdmamsg_dc_stats.tag_drops), deliver
 * nothing of it to B's endpoint, and keep carrying B's own messages both
 * ways (cm/handshake.h RDMAMSG_HS_CAP_DCSRC: the sender's DCI is checked
 * against those its peer named).  All in one process, three contexts.
 */
#include "config.h"

#include "../tap.h"
#include "util.h"

#define EAGER 1024

struct sep {
	struct rdmamsg_ep *ep;
	int up, closed;
	int got, from_a, bad;
};

struct cli {
	struct rdmamsg_ep *ep;
	int up, status, closed, echoed, bad;
};

static struct rdmamsg_ctx *sctx, *bctx, *actx;
static struct sep sep[2];
static int nsep;
static struct rdmamsg_ep_attr *sattr;

static void s_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		   unsigned int flags, void *arg)
{
	struct sep *s = arg;

	(void)imm;
	(void)flags;
	s->got++;
	if (len >= 2 && !memcmp(data, "A:", 2))
		s->from_a++;
	else if (len < 2 || memcmp(data, "B:", 2))
		s->bad++;
	/* echo: the peer checks it got its own message back */
	if (rdmamsg_send(ep, data, len, NULL))
		s->bad++;
}

static void s_conn(struct rdmamsg_ep *ep, int status, int reason,
		   const void *pdata, size_t len, void *arg)
{
	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	((struct sep *)arg)->up = status ? -1 : 1;
}

static void s_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct sep *)arg)->closed = 1;
}

static void s_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	rdmamsg_ep_close(ep, s_closed);
	(void)arg;
}

static const struct rdmamsg_ep_cbs s_cbs = {
	.on_connect = s_conn,
	.on_recv = s_recv,
	.on_disconnect = s_disc,
};

static void s_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		  const void *pdata, size_t len, void *arg)
{
	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (nsep >= 2 || rdmamsg_conn_req_accept(req, sattr, &s_cbs, &sep[nsep],
						 &sep[nsep].ep))
		rdmamsg_conn_req_reject(req, 1, NULL, 0);
	else
		nsep++;
}

static void c_conn(struct rdmamsg_ep *ep, int status, int reason,
		   const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	c->up = 1;
	c->status = status;
}

static void c_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		   unsigned int flags, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len >= 2 && !memcmp(data, "B:", 2))
		c->echoed++;
	else
		c->bad++;
}

static void c_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs c_cbs = {
	.on_connect = c_conn,
	.on_recv = c_recv,
};

/* pass -- one progress pass of each context; A's with the forging hook,
 * so that only A's own lane (made at its connect response) forges */
static void pass(void)
{
	rdmamsg_ctx_progress(sctx);
	rdmamsg_ctx_progress(bctx);
	setenv("RDMAMSG_TEST_DC_TAG_DELTA", "-1", 1);
	rdmamsg_ctx_progress(actx);
	unsetenv("RDMAMSG_TEST_DC_TAG_DELTA");
}

/* pump -- passes until *flag >= want, 30 s at most */
static int pump(const int *flag, int want)
{
	long long end = test_now_ms() + 30000;

	while (*flag < want && test_now_ms() < end) {
		pass();
		usleep(100);
	}
	return *flag >= want;
}

/* settle -- passes for ms */
static void settle(int ms)
{
	long long end = test_now_ms() + ms;

	while (test_now_ms() < end) {
		pass();
		usleep(100);
	}
}

static struct rdmamsg_srq *mk_srq(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg_srq_attr sa = {.max_bufs = 256, .buf_size = EAGER};
	struct rdmamsg_srq *srq;

	if (rdmamsg_srq_create(ctx, &sa, &srq))
		bail_out("SRQ");
	return srq;
}

static struct rdmamsg_ep_attr *dc_attr(struct rdmamsg_srq *srq)
{
	struct rdmamsg_ep_attr *a = test_ep_attr(EAGER, 4096);

	rdmamsg_ep_attr_set_recv_depth(a, 8);
	rdmamsg_ep_attr_set_peer_timeout(a, 0);
	rdmamsg_ep_attr_set_srq(a, srq);
	rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC);
	return a;
}

static uint64_t drops(void)
{
	struct rdmamsg_dc_stats st;

	memset(&st, 0, sizeof(st));
	rdmamsg_ctx_dc_stats(sctx, &st);
	return st.tag_drops;
}

int main(void)
{
	struct rdmamsg_srq *ssrq, *bsrq, *asrq;
	struct rdmamsg_ep_attr *ba, *aa;
	struct rdmamsg_listener *lst;
	struct cli b, a;
	char addr[64];
	uint64_t d0, v;
	uint16_t port;
	int i;

	test_setup("dc_forge");
	sctx = test_ctx();
	bctx = test_ctx();
	actx = test_ctx();
	if (rdmamsg_ctx_query_caps(sctx, RDMAMSG_CAP_DC, &v)) {
		ok(1, "# SKIP no DC here");
		return done_testing();
	}
	ssrq = mk_srq(sctx);
	bsrq = mk_srq(bctx);
	asrq = mk_srq(actx);
	sattr = dc_attr(ssrq);
	ba = dc_attr(bsrq);
	aa = dc_attr(asrq);
	if (rdmamsg_listen(sctx, "127.0.0.1:0", s_req, NULL, &lst) ||
	    rdmamsg_listener_get_port(lst, &port))
		bail_out("listen");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);

	/* the victim first: its server endpoint takes the lower slot */
	memset(&b, 0, sizeof(b));
	memset(&a, 0, sizeof(a));
	is_int(rdmamsg_connect(bctx, addr, ba, &c_cbs, &b, &b.ep), 0,
	       "B connects over DC");
	ok(pump(&b.up, 1) && !b.status && pump(&sep[0].up, 1),
	   "B connected (%d)", b.status);
	is_int(rdmamsg_send(b.ep, "B:1", 3, NULL), 0, "B sends");
	ok(pump(&b.echoed, 1), "B's message echoed");
	is_int(sep[0].got, 1, "B's server endpoint got B's message");

	is_int(rdmamsg_connect(actx, addr, aa, &c_cbs, &a, &a.ep), 0,
	       "A connects over DC");
	ok(pump(&a.up, 1) && !a.status && pump(&sep[1].up, 1),
	   "A connected (%d)", a.status);

	/* A tags its message with B's server endpoint */
	d0 = drops();
	is_int(rdmamsg_send(a.ep, "A:forged", 8, NULL), 0, "A sends");
	for (i = 0; i < 3000 && drops() < d0 + 1 && !sep[0].from_a; i++)
		pass();
	settle(200);
	is_int(sep[0].from_a, 0, "B's server endpoint got nothing of A's");
	ok(drops() >= d0 + 1,
	   "the server dropped and counted A's forged messages (%llu)",
	   (unsigned long long)(drops() - d0));
	is_int(sep[1].got, 0, "A's own server endpoint got nothing either");
	is_int(a.bad + a.echoed, 0, "A got nothing back");

	/* honest traffic goes on */
	is_int(rdmamsg_send(b.ep, "B:2", 3, NULL), 0, "B sends again");
	ok(pump(&b.echoed, 2), "B's second message echoed");
	is_int(sep[0].got, 2, "B's server endpoint: B's two messages only");
	is_int(sep[0].bad + b.bad, 0, "every message intact");

	/* clean up: nothing left */
	rdmamsg_ep_close(a.ep, c_closed);
	rdmamsg_ep_close(b.ep, c_closed);
	ok(pump(&a.closed, 1) && pump(&b.closed, 1), "clients closed");
	rdmamsg_listener_close(lst, NULL);
	for (i = 0; i < nsep; i++)
		if (!sep[i].closed)
			rdmamsg_ep_close(sep[i].ep, s_closed);
	for (i = 0; i < nsep; i++)
		ok(pump(&sep[i].closed, 1), "server endpoint %d closed", i);
	settle(50);
	is_int(test_srq_close(sctx, ssrq, 10000), 0, "server SRQ closed");
	is_int(test_srq_close(bctx, bsrq, 10000), 0, "B's SRQ closed");
	is_int(test_srq_close(actx, asrq, 10000), 0, "A's SRQ closed");
	rdmamsg_ep_attr_delete(&sattr);
	rdmamsg_ep_attr_delete(&ba);
	rdmamsg_ep_attr_delete(&aa);
	is_int(rdmamsg_ctx_destroy(&sctx), 0, "server context destroyed");
	is_int(rdmamsg_ctx_destroy(&bctx), 0, "B's context destroyed");
	is_int(rdmamsg_ctx_destroy(&actx), 0, "A's context destroyed");
	return done_testing();
}
