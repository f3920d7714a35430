/* SPDX-License-Identifier: MIT */
/*
 * earlydreq.c -- the peer's DREQ reaches an accepted endpoint that is not
 * up: its RTU was lost (SOFTRDMA_TEST_LOSE_RTU=1 in the client, soft/
 * README.md), so the server's id is still in REP_SENT, where the IB CM
 * takes a DREQ (cm_dreq_handler: DREQ_RCVD, DISCONNECTED without
 * ESTABLISHED) and holds the DREP until the endpoint answers it
 * (rdma_disconnect) or destroys its id.  The client is a raw
 * librdmacm/libibverbs peer (rawpeer.h) that disconnects as soon as it
 * is ESTABLISHED, against an rdmamsg server (a child) that keeps its
 * endpoints open HOLD_MS after on_connect, longer than softrdma's DREQ
 * timeout (2 s; the kernel's retries take about a minute):
 *
 * - the DREQ while the endpoint connects: on_connect(-ECONNRESET), the
 *   state RDMAMSG_EP_DISCONNECTED, no on_disconnect, and the client's
 *   DISCONNECTED comes with the DREP (status 0) well within a second,
 *   not at its DREQ's timeout (-ETIMEDOUT);
 * - the DREQ after the endpoint's connect timeout (CONN_MS) failed it
 *   (on_connect(-ETIMEDOUT), the endpoint DOWN, its id still in
 *   REP_SENT): the DREP as promptly;
 * - both endpoints close once, later, at once.
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

#define CONN_MS 500
#define HOLD_MS 3000
#define DREP_MS 1000 /* well under softrdma's DREQ timeout, 2 s */

/* ---- the rdmamsg server (child) ------------------------------------ */

struct sconn {
	struct rdmamsg_ep *ep;
	int idx, conn_status, conns, discs, state, closes;
	long long t_accept, t_conn, t_close;
};

static struct sconn conns[4];
static int nconns, srv_failures, srv_wfd;
static struct rdmamsg_ep_attr *srv_attr;

/* srv_closed -- report {index, on_connect status, on_connect calls,
 * on_disconnect calls, state in on_connect, ms from accept to on_connect,
 * ms from close call to close callback, close callbacks} */
static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	struct sconn *c = arg;
	int64_t r[8];

	(void)ep;
	c->closes++;
	r[0] = c->idx;
	r[1] = c->conn_status;
	r[2] = c->conns;
	r[3] = c->discs;
	r[4] = c->state;
	r[5] = c->t_conn - c->t_accept;
	r[6] = test_now_ms() - c->t_close;
	r[7] = c->closes;
	if (write(srv_wfd, r, sizeof(r)) != sizeof(r))
		_exit(92);
}

/* srv_conn -- the outcome: kept open HOLD_MS (the main loop closes it) */
static void srv_conn(struct rdmamsg_ep *ep, int status, int reason,
		     const void *pdata, size_t len, void *arg)
{
	struct sconn *c = arg;
	enum rdmamsg_ep_state st;

	(void)reason;
	(void)pdata;
	(void)len;
	c->conns++;
	c->t_conn = test_now_ms();
	c->conn_status = status;
	c->state = rdmamsg_ep_get_state(ep, &st) ? -1 : (int)st;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct sconn *c = arg;

	(void)ep;
	(void)status;
	c->discs++;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_conn,
	.on_disconnect = srv_disc,
};

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
	c->idx = nconns++;
	c->t_accept = test_now_ms();
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
	    rdmamsg_ep_attr_set_connect_timeout(srv_attr, CONN_MS))
		return 11;
	if (rdmamsg_listen(ctx, "127.0.0.1:0", srv_req, NULL, &lst) ||
	    rdmamsg_listener_get_port(lst, &port))
		return 12;
	test_write_port(wfd, port);
	while (!readable(ctl_pipe[0])) {
		test_idle(ctx, 10);
		for (i = 0; i < nconns; i++) {
			struct sconn *c = &conns[i];

			if (c->conns && !c->t_close &&
			    test_now_ms() - c->t_conn >= HOLD_MS) {
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

/* ---- the raw client (this process) --------------------------------- */

static int srv_rfd;

/* srv_report -- the server's next record (after a close callback) */
static int srv_report(int64_t r[8], int ms)
{
	struct pollfd f = {.fd = srv_rfd, .events = POLLIN};

	memset(r, 0, 8 * sizeof(*r));
	return poll(&f, 1, ms) == 1 &&
	       read(srv_rfd, r, 8 * sizeof(*r)) == 8 * sizeof(*r);
}

/* disc_event -- the next CM event within ms: DISCONNECTED's status in
 * *status and 0, its type if another, -1 if none */
static int disc_event(struct rawpeer *p, int ms, int *status)
{
	struct pollfd f = {.fd = p->ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int got;

	if (poll(&f, 1, ms) != 1 || rdma_get_cm_event(p->ch, &ev))
		return -1;
	got = ev->event;
	*status = ev->status;
	rdma_ack_cm_event(ev);
	return got == RDMA_CM_EVENT_DISCONNECTED ? 0 : got;
}

/* scenario -- connect (the RTU lost), wait ms, disconnect: the server's
 * DREP within DREP_MS; then its report, expected on_connect status */
static void scenario(unsigned int port, int wait_ms, int expect,
		     const char *name)
{
	struct rawpeer p;
	long long t0, t_disc = -1;
	int64_t r[8];
	int ret, ev, st = 1;

	ret = rawpeer_establish(&p, port, RAWPEER_SEND_OFF + 4096, HS_REQ, 0, 0,
				NULL);
	ok(ret == 0, "%s: ESTABLISHED, the RTU lost (%d)", name, ret);
	if (ret) {
		rawpeer_free(&p);
		return;
	}
	if (wait_ms)
		usleep((useconds_t)wait_ms * 1000);
	t0 = test_now_ms();
	ret = rdma_disconnect(p.id);
	ev = disc_event(&p, 10000, &st);
	if (ev == 0)
		t_disc = test_now_ms() - t0;
	ok(ret == 0 && ev == 0 && st == 0 && t_disc < DREP_MS,
	   "%s: the server answers our DREQ at once: DISCONNECTED (%d, event "
	   "%d) with the DREP (status %d, not -ETIMEDOUT) in %lld ms",
	   name, ret, ev, st, t_disc);
	ok(srv_report(r, HOLD_MS + 10000), "%s: the server reports", name);
	ok(r[1] == expect && r[2] == 1 && r[3] == 0,
	   "%s: on_connect(%d) once (%lld, %lld calls), no on_disconnect "
	   "(%lld)",
	   name, expect, (long long)r[1], (long long)r[2], (long long)r[3]);
	ok(r[4] == RDMAMSG_EP_DISCONNECTED,
	   "%s: the endpoint is DISCONNECTED in on_connect (%lld)", name,
	   (long long)r[4]);
	if (expect == -ETIMEDOUT)
		ok(r[5] >= CONN_MS - 100 && r[5] < CONN_MS + 2000,
		   "%s: at the connect timeout, %d ms (%lld ms)", name, CONN_MS,
		   (long long)r[5]);
	else
		ok(r[5] < CONN_MS,
		   "%s: at the DREQ, before the connect "
		   "timeout (%lld ms)",
		   name, (long long)r[5]);
	ok(r[7] == 1 && r[6] < 1000,
	   "%s: a close later finishes at once (%lld ms), its callback once "
	   "(%lld)",
	   name, (long long)r[6], (long long)r[7]);
	rawpeer_free(&p);
}

int main(void)
{
	char addr[64];
	unsigned int port;
	pid_t spid;

	test_setup("earlydreq");
	signal(SIGPIPE, SIG_IGN);
	if (pipe(ctl_pipe))
		bail_out("pipe");
	spid = test_fork_server(server, NULL, &srv_rfd, addr, sizeof(addr));
	close(ctl_pipe[0]);
	port = (unsigned int)atoi(strchr(addr, ':') + 1);
	/* this process's RTUs are lost; the server sends none */
	setenv("SOFTRDMA_TEST_LOSE_RTU", "1", 1);

	scenario(port, 0, -ECONNRESET, "DREQ while connecting");
	scenario(port, CONN_MS + 300, -ETIMEDOUT,
		 "DREQ after the connect timeout");

	if (write(ctl_pipe[1], "q", 1) != 1)
		bail_out("write");
	is_int(test_wait_child(spid), 0, "server exits cleanly");
	close(srv_rfd);
	return done_testing();
}
