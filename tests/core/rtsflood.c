/* SPDX-License-Identifier: MIT */
/*
 * rtsflood.c -- a peer cannot make a receiver queue rendezvous
 * announcements without bound.  The peer is a raw librdmacm/libibverbs
 * client (rawpeer.h, as in hostile.c) against an rdmamsg server (a
 * child, default receive depth): it announces one transfer per credit
 * it was granted, each in pieces whose first (64 bytes) is all it ever
 * announces, so none of the server's reads ever completes.
 *
 * Asserted: each announcement keeps its credit until its FIN goes, so
 * while they wait the server gives back no data credit (the peer is
 * held back: before, every receive buffer's credit went back at once and
 * the peer could go on announcing); an announcement past the window (a
 * peer ignoring its credits: the ring's buffers are posted again all the
 * same) closes the connection with -EPROTO; the server never had more
 * transfers queued than its window, and ends with every object closed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include "../tap.h"
#include "util.h"
#include "internal.h"
#include "proto.h"
#include "handshake.h"
#include "xfer.h"
#include "rawpeer.h"

#define SRC_OFF (RAWPEER_SEND_OFF + 4096) /* the announced bytes */
#define SRC_LEN ((size_t)64 << 10)
#define PIECE	64
#define MEM	(SRC_OFF + SRC_LEN)
#define HOLD_MS 1000

/* ---- the rdmamsg server (child) ------------------------------------ */

static struct rdmamsg_ep *srv_ep;
static int srv_wfd, srv_done;
static uint32_t srv_max_pulls;

/* pulls_of -- the transfers ep has queued or reading */
static uint32_t pulls_of(const struct rdmamsg_ep *ep)
{
	const struct rdmamsg__list *l;
	uint32_t n = 0;

	if (!ep->xf)
		return 0;
	for (l = ep->xf->pulls.next; l != &ep->xf->pulls; l = l->next)
		n++;
	return n;
}

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	srv_done = 1;
}

/* srv_disc -- report {status, most transfers queued}, close */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	int32_t r[2] = {status, (int32_t)srv_max_pulls};

	(void)arg;
	if (write(srv_wfd, r, sizeof(r)) != sizeof(r))
		_exit(92);
	srv_ep = NULL;
	rdmamsg_ep_close(ep, srv_closed);
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_disconnect = srv_disc,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (rdmamsg_conn_req_accept(req, NULL, &srv_cbs, NULL, &srv_ep))
		_exit(93);
}

static int server(int wfd, void *arg)
{
	struct rdmamsg_listener *lst;
	struct rdmamsg_ctx *ctx;
	long long end;

	(void)arg;
	srv_wfd = wfd;
	if (rdmamsg_ctx_create(NULL, &ctx))
		return 10;
	if (test_listen_report(ctx, srv_req, NULL, &lst, wfd))
		return 11;
	end = test_now_ms() + 60000;
	while (!srv_done && test_now_ms() < end) {
		test_idle(ctx, 5);
		if (srv_ep && pulls_of(srv_ep) > srv_max_pulls)
			srv_max_pulls = pulls_of(srv_ep);
	}
	rdmamsg_listener_close(lst, NULL);
	test_idle(ctx, 100);
	if (rdmamsg_ctx_destroy(&ctx))
		return 12;
	return srv_done ? 0 : 13;
}

/* ---- the raw peer (this process) ----------------------------------- */

static uint32_t returned; /* data credits the server gave back */

/* p_poll -- the next completion within ms: its status, or -1; a receive
 * is counted (its credits) and posted again */
static int p_poll(struct rawpeer *p, int ms, struct ibv_wc *wc)
{
	int st = rawpeer_poll(p, ms, wc);

	if (st == IBV_WC_SUCCESS && !(wc->wr_id & RAWPEER_SEND)) {
		const struct rdmamsg__wire *h =
			(const void *)(p->mem + wc->wr_id * RAWPEER_RXLEN);

		returned += le16toh(h->credits);
		rawpeer_post_rx(p, (uint32_t)wc->wr_id);
	}
	return st;
}

/* announce -- transfer id of SRC_LEN bytes, in pieces of which only the
 * first is ever announced; the send's status */
static int announce(struct rawpeer *p, uint64_t id)
{
	struct rdmamsg__wire *h = (void *)(p->mem + RAWPEER_SEND_OFF);
	struct rdmamsg__xhdr x;
	struct ibv_wc wc;
	int st;

	memset(h, 0, sizeof(*h));
	h->type = W_DATA;
	h->flags = F_FIRST | F_LAST | F_XFER;
	h->total = htole32(RDMAMSG_XHDR);
	memset(&x, 0, sizeof(x));
	x.kind = X_RTS;
	x.inner = X_MSG;
	x.flags = XF_PIECE;
	x.status = PIECE;
	x.id = id;
	x.addr = (uint64_t)(uintptr_t)(p->mem + SRC_OFF);
	x.len = SRC_LEN;
	x.rkey = p->mr->rkey;
	rdmamsg__xhdr_encode(&x, h + 1);
	if (rawpeer_send(p, RDMAMSG_HDR + RDMAMSG_XHDR))
		return -2;
	do {
		st = p_poll(p, 5000, &wc);
	} while (st == IBV_WC_SUCCESS && !(wc.wr_id & RAWPEER_SEND));
	return st;
}

/* srv_report -- the server's {status, most queued}, or 0 */
static int srv_report(int rfd, int32_t r[2], int ms)
{
	struct pollfd f = {.fd = rfd, .events = POLLIN};

	r[0] = r[1] = 0;
	return poll(&f, 1, ms) == 1 &&
	       read(rfd, r, 2 * sizeof(*r)) == 2 * sizeof(*r);
}

int main(void)
{
	struct rawpeer p;
	struct ibv_wc wc;
	long long end;
	char addr[64];
	unsigned int port;
	int32_t r[2];
	uint32_t i, window;
	int ret, st = 0, rfd;
	pid_t spid;

	test_setup("rtsflood");
	signal(SIGPIPE, SIG_IGN);
	spid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));
	port = (unsigned int)atoi(strchr(addr, ':') + 1);
	ret = rawpeer_connect(&p, port, MEM, HS_REQ, 0, 0);
	window = p.credits;
	ok(ret == 0 && window >= 2, "raw peer connected (%d; %u credits)", ret,
	   window);
	if (ret)
		bail_out("no connection");
	for (i = 0; i < window && !st; i++)
		st = announce(&p, i + 1);
	ok(!st, "%u announcements, one per credit (%d)", window, st);
	end = test_now_ms() + HOLD_MS;
	while (test_now_ms() < end)
		p_poll(&p, 10, &wc);
	is_int(returned, 0,
	       "no data credit comes back while their reads wait: the peer "
	       "is held back");
	st = announce(&p, window + 1);
	ok(srv_report(rfd, r, 10000), "the server reports (send %d)", st);
	is_int(r[0], -EPROTO,
	       "an announcement past the window closes with -EPROTO");
	ok(r[1] > 0 && (uint32_t)r[1] <= window,
	   "at most the window queued (%d of %u)", r[1], window);
	ret = rawpeer_event(&p, RDMA_CM_EVENT_DISCONNECTED, 10000, NULL, NULL);
	is_int(ret, 0, "the raw peer is disconnected");
	rdma_disconnect(p.id);
	while (p_poll(&p, 10, &wc) >= 0)
		;
	rawpeer_free(&p);
	is_int(test_wait_child(spid), 0, "server exits cleanly");
	close(rfd);
	return done_testing();
}
