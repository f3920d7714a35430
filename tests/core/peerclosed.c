/* SPDX-License-Identifier: MIT */
/*
 * peerclosed.c -- the side that reads the peer's goodbye (PEER_CLOSED,
 * lib/lane.h) leaves the disconnect to the peer.  The peer is a raw
 * librdmacm/libibverbs client (softrdma through the ordinary API, as in
 * hostile.c) with a valid handshake: it sends 3 messages and the goodbye
 * (W_BYE), then a credit update after the goodbye has completed, and
 * then either never disconnects or disconnects 100 ms later.  Against an
 * rdmamsg server (a child) whose close timeout is CLOSE_MS:
 *
 * - the server hears on_disconnect(0) at the goodbye, with the 3 messages
 *   delivered before it; inside it a send is refused (-ENOTCONN) and the
 *   state is RDMAMSG_EP_DISCONNECTED;
 * - its connection stays up: the peer's send after the goodbye completes
 *   with success (the server's QP is not in error);
 * - a peer that never disconnects is disconnected by the server after
 *   its close timeout (from the goodbye), not at once;
 * - a close inside on_disconnect waits for that bound (peer silent), or
 *   for the peer's disconnect (100 ms), not the bound; its close callback
 *   runs once;
 * - an endpoint left open goes down at the bound, and a close after that
 *   finishes at once.
 */
#include "config.h"

#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include "../tap.h"
#include "util.h"
#include "internal.h"
#include "proto.h"
#include "handshake.h"
#include "rawpeer.h"

#define CLOSE_MS 1500
#define EAGER	 RAWPEER_EAGER
#define NDATA	 3

/* ---- the rdmamsg server (child) ------------------------------------ */

enum { S_STAY, S_CLOSE }; /* left open, or closed inside on_disconnect */

struct sconn {
	struct rdmamsg_ep *ep;
	int idx, mode, disc_status, send_ret, state, closes, bad;
	uint64_t nrecv;
	long long t_bye, t_close, t_closed;
};

static struct sconn conns[8];
static int nconns, srv_failures, srv_wfd;
static struct rdmamsg_ep_attr *srv_attr;

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct sconn *c = arg;
	uint64_t seq;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len != sizeof(seq))
		c->bad++;
	else {
		memcpy(&seq, data, sizeof(seq));
		c->bad += seq != c->nrecv;
	}
	c->nrecv++;
}

/* srv_closed -- report {index, mode, on_disconnect status, send in
 * PEER_CLOSED, state, received, bad, ms from goodbye to close callback,
 * ms from close call to close callback, close callbacks} */
static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	struct sconn *c = arg;
	int64_t r[10];

	(void)ep;
	c->closes++;
	c->t_closed = test_now_ms();
	r[0] = c->idx;
	r[1] = c->mode;
	r[2] = c->disc_status;
	r[3] = c->send_ret;
	r[4] = c->state;
	r[5] = (int64_t)c->nrecv;
	r[6] = c->bad;
	r[7] = c->t_closed - c->t_bye;
	r[8] = c->t_closed - c->t_close;
	r[9] = c->closes;
	if (write(srv_wfd, r, sizeof(r)) != sizeof(r))
		_exit(92);
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct sconn *c = arg;
	enum rdmamsg_ep_state st;

	c->t_bye = test_now_ms();
	c->disc_status = status;
	c->send_ret = rdmamsg_send(ep, "late", 4, NULL);
	c->state = rdmamsg_ep_get_state(ep, &st) ? -1 : (int)st;
	if (c->mode == S_CLOSE) {
		c->t_close = test_now_ms();
		if (rdmamsg_ep_close(ep, srv_closed))
			srv_failures++;
	}
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

/* srv_req -- the first connection is left open, the others closed from
 * on_disconnect */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct sconn *c;

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (nconns == (int)(sizeof(conns) / sizeof(conns[0]))) {
		rdmamsg_conn_req_reject(req, 0, NULL, 0);
		srv_failures++;
		return;
	}
	c = &conns[nconns];
	c->idx = nconns;
	c->mode = nconns ? S_CLOSE : S_STAY;
	nconns++;
	if (rdmamsg_conn_req_accept(req, srv_attr, &srv_cbs, c, &c->ep))
		srv_failures++;
}

static int ctl_pipe[2] = {-1, -1}; /* test -> server: quit */

static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

static int server(int wfd, void *arg)
{
	struct rdmamsg_listener *lst;
	struct rdmamsg_ctx *ctx;
	uint16_t port;
	int i;

	(void)arg;
	close(ctl_pipe[1]);
	srv_wfd = wfd;
	if (rdmamsg_ctx_create(NULL, &ctx))
		return 10;
	if (rdmamsg_ep_attr_new(&srv_attr) ||
	    rdmamsg_ep_attr_set_close_timeout(srv_attr, CLOSE_MS))
		return 11;
	if (rdmamsg_listen(ctx, "127.0.0.1:0", srv_req, NULL, &lst) ||
	    rdmamsg_listener_get_port(lst, &port))
		return 12;
	test_write_port(wfd, port);
	while (!readable(ctl_pipe[0])) {
		test_idle(ctx, 10);
		/* the endpoint left open: closed well after the bound */
		for (i = 0; i < nconns; i++) {
			struct sconn *c = &conns[i];

			if (c->mode == S_STAY && c->t_bye && !c->t_close &&
			    test_now_ms() - c->t_bye >= 2 * CLOSE_MS) {
				c->t_close = test_now_ms();
				if (rdmamsg_ep_close(c->ep, srv_closed))
					srv_failures++;
			}
		}
	}
	rdmamsg_listener_close(lst, NULL);
	rdmamsg_ep_attr_delete(&srv_attr);
	test_idle(ctx, 100);
	for (i = 0; i < nconns; i++)
		if (conns[i].closes != 1)
			srv_failures++;
	if (rdmamsg_ctx_destroy(&ctx))
		return 13;
	return srv_failures ? 14 : 0;
}

/* ---- the raw peer (this process) ----------------------------------- */

/* p_poll -- the next completion within ms: its status, or -1; receives
 * (a credit update of the server's) are posted again */
static int p_poll(struct rawpeer *p, int ms, struct ibv_wc *wc)
{
	int st = rawpeer_poll(p, ms, wc);

	if (st == IBV_WC_SUCCESS && !(wc->wr_id & RAWPEER_SEND))
		rawpeer_post_rx(p, (uint32_t)wc->wr_id);
	return st;
}

/* p_send_done -- the status of the next send completion within ms */
static int p_send_done(struct rawpeer *p, int ms)
{
	struct ibv_wc wc;
	int st;

	do {
		st = p_poll(p, ms, &wc);
	} while (st == IBV_WC_SUCCESS && !(wc.wr_id & RAWPEER_SEND));
	return st;
}

/* p_send -- a header of type (and a payload of len bytes after it) */
static int p_send(struct rawpeer *p, uint8_t type, const void *payload,
		  uint32_t len)
{
	struct rdmamsg__wire *h = (void *)(p->mem + RAWPEER_SEND_OFF);

	memset(h, 0, sizeof(*h));
	h->type = type;
	if (type == W_DATA)
		h->flags = F_FIRST | F_LAST;
	if (len)
		memcpy(h + 1, payload, len);
	return rawpeer_send(p, RDMAMSG_HDR + len);
}

static int srv_rfd;

/* srv_report -- the server's next record (after a close callback) */
static int srv_report(int64_t r[10], int ms)
{
	struct pollfd f = {.fd = srv_rfd, .events = POLLIN};

	memset(r, 0, 10 * sizeof(*r));
	return poll(&f, 1, ms) == 1 &&
	       read(srv_rfd, r, 10 * sizeof(*r)) == 10 * sizeof(*r);
}

enum { P_SILENT, P_SILENT_CLOSE, P_DISC_CLOSE };

/* scenario -- one connection: NDATA messages, the goodbye, a send after
 * it; then silence, or a disconnect 100 ms later */
static void scenario(unsigned int port, int kind, const char *name)
{
	struct rawpeer p;
	long long t0, t_disc = -1;
	int64_t r[10];
	uint64_t seq;
	int ret, st, ev;

	ret = rawpeer_connect(&p, port, RAWPEER_SEND_OFF + 4096, HS_REQ, 0, 0);
	ok(ret == 0 && p.credits >= NDATA && p.ctl >= 2,
	   "%s: raw peer connected (%d; %u credits, %u control)", name, ret,
	   p.credits, p.ctl);
	if (ret) {
		rawpeer_free(&p);
		return;
	}
	for (seq = 0, st = 0; seq < NDATA && !st; seq++)
		st = p_send(&p, W_DATA, &seq, sizeof(seq)) ||
		     p_send_done(&p, 5000) != IBV_WC_SUCCESS;
	ok(!st, "%s: %d messages sent", name, NDATA);
	st = p_send(&p, W_BYE, NULL, 0) ? -2 : p_send_done(&p, 5000);
	t0 = test_now_ms();
	ok(st == IBV_WC_SUCCESS, "%s: goodbye sent (status %d)", name, st);
	/* 100 ms for the server to read it; its disconnect must not come */
	ev = rawpeer_event(&p, RDMA_CM_EVENT_DISCONNECTED, 100, NULL, NULL);
	if (ev == 0)
		t_disc = test_now_ms() - t0;
	st = p_send(&p, W_CREDIT, NULL, 0) ? -2 : p_send_done(&p, 5000);
	ok(ev == -1 && st == IBV_WC_SUCCESS,
	   "%s: the server's connection stays up after the goodbye: no "
	   "disconnect (%d), a send after it completes (status %d)",
	   name, ev, st);
	if (kind == P_DISC_CLOSE && t_disc < 0) {
		rdma_disconnect(p.id);
		ev = rawpeer_event(&p, RDMA_CM_EVENT_DISCONNECTED, 10000, NULL,
				   NULL);
		ok(ev == 0, "%s: we disconnect after 100 ms (%d)", name, ev);
	} else {
		if (t_disc < 0) {
			ev = rawpeer_event(&p, RDMA_CM_EVENT_DISCONNECTED,
					   CLOSE_MS + 10000, NULL, NULL);
			if (ev == 0)
				t_disc = test_now_ms() - t0;
		}
		ok(t_disc >= CLOSE_MS - 200 && t_disc < CLOSE_MS + 5000,
		   "%s: the server disconnects at its close timeout, %d "
		   "ms, after the goodbye (%lld ms)",
		   name, CLOSE_MS, t_disc);
		rdma_disconnect(p.id);
	}
	ok(srv_report(r, 2 * CLOSE_MS + 10000), "%s: the server reports", name);
	ok(r[2] == 0 && r[5] == NDATA && r[6] == 0,
	   "%s: on_disconnect(0) at the goodbye (%lld), with the %d "
	   "messages before it delivered (%lld, %lld bad)",
	   name, (long long)r[2], NDATA, (long long)r[5], (long long)r[6]);
	ok(r[3] == -ENOTCONN && r[4] == RDMAMSG_EP_DISCONNECTED,
	   "%s: then a send is refused (%lld: -ENOTCONN) and the state "
	   "is DISCONNECTED (%lld)",
	   name, (long long)r[3], (long long)r[4]);
	ok(r[9] == 1, "%s: the close callback ran once (%lld)", name,
	   (long long)r[9]);
	if (kind == P_SILENT)
		ok(r[1] == S_STAY && r[8] < CLOSE_MS,
		   "%s: a close once down (after the bound) finishes at once "
		   "(%lld ms)",
		   name, (long long)r[8]);
	else if (kind == P_SILENT_CLOSE)
		ok(r[1] == S_CLOSE && r[7] >= CLOSE_MS - 200 &&
			   r[7] < CLOSE_MS + 5000,
		   "%s: a close inside on_disconnect waits for the bound "
		   "(%lld ms)",
		   name, (long long)r[7]);
	else
		ok(r[1] == S_CLOSE && r[7] >= 90 && r[7] < CLOSE_MS - 200,
		   "%s: a close inside on_disconnect ends with our "
		   "disconnect, not the bound (%lld ms)",
		   name, (long long)r[7]);
	while (p_poll(&p, 10, &(struct ibv_wc){0}) >= 0)
		;
	rawpeer_free(&p);
}

int main(void)
{
	char addr[64];
	unsigned int port;
	pid_t spid;

	test_setup("peerclosed");
	signal(SIGPIPE, SIG_IGN);
	if (pipe(ctl_pipe))
		bail_out("pipe");
	spid = test_fork_server(server, NULL, &srv_rfd, addr, sizeof(addr));
	close(ctl_pipe[0]);
	port = (unsigned int)atoi(strchr(addr, ':') + 1);

	scenario(port, P_SILENT, "left open, peer silent");
	scenario(port, P_SILENT_CLOSE, "closed at once, peer silent");
	scenario(port, P_DISC_CLOSE, "closed at once, peer disconnects");

	if (write(ctl_pipe[1], "q", 1) != 1)
		bail_out("write");
	is_int(test_wait_child(spid), 0, "server exits cleanly");
	close(srv_rfd);
	return done_testing();
}
