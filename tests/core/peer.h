/* SPDX-License-Identifier: MIT */
/* peer.h -- a configurable receiving server (child) for the core tests */
#ifndef RDMAMSG_TEST_PEER_H
#define RDMAMSG_TEST_PEER_H

#include <stdint.h>

#include "util.h"

struct srv_cfg {
	unsigned int slow_every; /* sleep in every Nth on_recv ... */
	unsigned int slow_us;	 /* ... for this long */
	unsigned int stall_ms;	 /* do not progress at first */
	unsigned int first_ms;	 /* sleep this long in the first on_recv */
	unsigned int recv_depth;
	int report; /* write the received count to the pipe */
};

struct srv_state {
	const struct srv_cfg *cfg;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	uint64_t next, bad, n;
	int done, closed, lclosed, failures;
};

/* srv_recv -- count, check the sequence in the first 8 bytes, dawdle */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv_state *s = arg;
	uint64_t seq;

	(void)ep;
	(void)imm;
	(void)flags;
	s->n++;
	if (len >= sizeof(seq)) {
		memcpy(&seq, data, sizeof(seq));
		if (seq != s->next)
			s->bad++;
		s->next = seq + 1;
	}
	if (s->cfg->slow_every && s->n % s->cfg->slow_every == 0)
		usleep(s->cfg->slow_us);
	if (s->n == 1 && s->cfg->first_ms)
		usleep(s->cfg->first_ms * 1000);
}

/* srv_close_cb -- close callback: note it */
static void srv_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct srv_state *)arg)->closed = 1;
}

/* srv_lst_close_cb -- listener close callback: note it */
static void srv_lst_close_cb(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	((struct srv_state *)arg)->lclosed = 1;
}

/* srv_disc -- the client went away: close */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct srv_state *s = arg;

	(void)status;
	rdmamsg_ep_close(ep, srv_close_cb);
	s->done = 1;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

/* srv_req -- accept with the configured receive depth */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv_state *s = arg;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	rdmamsg_ep_attr_new(&a);
	if (s->cfg->recv_depth)
		rdmamsg_ep_attr_set_recv_depth(a, s->cfg->recv_depth);
	if (rdmamsg_conn_req_accept(req, a, &srv_cbs, s, &ep))
		s->failures++;
	rdmamsg_ep_attr_delete(&a);
}

/* srv_main -- child: serve one client until it leaves */
static int srv_main(int wfd, void *arg)
{
	struct srv_state s;

	memset(&s, 0, sizeof(s));
	s.cfg = arg;
	if (rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	if (test_listen_report(s.ctx, srv_req, &s, &s.lst, wfd))
		return 11;
	if (s.cfg->stall_ms) {
		/* accept, then stop progressing for a while */
		test_idle(s.ctx, 300);
		usleep(s.cfg->stall_ms * 1000);
	}
	test_run_until(s.ctx, &s.done, 60000);
	rdmamsg_listener_close(s.lst, srv_lst_close_cb);
	test_run_until(s.ctx, &s.closed, 60000);
	test_run_until(s.ctx, &s.lclosed, 60000);
	if (!s.done || !s.closed || !s.lclosed)
		return 12;
	if (s.cfg->report) {
		uint64_t r[2] = {s.n, s.bad};

		if (write(wfd, r, sizeof(r)) != (ssize_t)sizeof(r))
			return 13;
	}
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 14;
	return s.failures ? 15 : 0;
}

#endif /* RDMAMSG_TEST_PEER_H */
