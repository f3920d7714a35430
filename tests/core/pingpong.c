/* SPDX-License-Identifier: MIT */
/*
 * pingpong.c -- round trips of one small message between two processes in
 * fd mode, blocking in poll() between messages (every wake-up must arrive:
 * no poll timeout hides a lost one).  RDMAMSG_PP_N sets the count,
 * RDMAMSG_PP_BUSY=1 spins on rdmamsg_ctx_progress instead of blocking (for
 * callgrind: instructions per round trip).
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

struct pp {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_ep *ep;
	uint64_t got;
	int connected, status, done, closed, lclosed, failures, flag;
};

static int busy;

/* wait_flag -- block (or spin) until *flag */
static void wait_flag(struct pp *p, volatile int *flag, int ms)
{
	long long end = test_now_ms() + ms;

	if (!busy) {
		test_run_until(p->ctx, flag, ms);
		return;
	}
	while (!*flag && test_now_ms() < end)
		rdmamsg_ctx_progress(p->ctx);
}

/* srv_recv -- on_recv: handle one message */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct pp *p = arg;

	(void)imm;
	(void)flags;
	if (rdmamsg_send(ep, data, len, NULL))
		p->failures++;
}

/* srv_close_cb -- close callback: note it */
static void srv_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct pp *)arg)->closed = 1;
}

/* lst_close_cb -- listener close callback: note it */
static void lst_close_cb(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	((struct pp *)arg)->lclosed = 1;
}

/* srv_disc -- on_disconnect: note it (and close) */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	rdmamsg_ep_close(ep, srv_close_cb);
	((struct pp *)arg)->done = 1;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

/* srv_req -- on_conn_req: accept or refuse */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct pp *p = arg;

	(void)lst;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, NULL, &srv_cbs, p, &p->ep))
		p->failures++;
}

/* server -- echo until the client leaves */
static int server(int wfd, void *arg)
{
	struct pp p;

	(void)arg;
	memset(&p, 0, sizeof(p));
	if (rdmamsg_ctx_create(NULL, &p.ctx) ||
	    test_listen_report(p.ctx, srv_req, &p, &p.lst, wfd))
		return 10;
	wait_flag(&p, &p.done, 120000);
	rdmamsg_listener_close(p.lst, lst_close_cb);
	wait_flag(&p, &p.closed, 5000);
	wait_flag(&p, &p.lclosed, 5000);
	if (!p.done || !p.closed || !p.lclosed || rdmamsg_ctx_destroy(&p.ctx))
		return 11;
	return p.failures ? 12 : 0;
}

/* cli_recv -- on_recv: handle one message */
static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct pp *p = arg;

	(void)ep;
	(void)data;
	(void)len;
	(void)imm;
	(void)flags;
	p->got++;
	p->flag = 1;
}

/* cli_connect -- on_connect: record the outcome */
static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct pp *p = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	p->connected = 1;
	p->status = status;
}

/* cli_close_cb -- close callback: note it */
static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct pp *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
};

int main(void)
{
	const char *ns = getenv("RDMAMSG_PP_N");
	uint64_t n, i, sent = 0;
	struct pp p;
	char addr[64], msg[8] = "ping";
	long long t0, t1;
	int rfd;
	pid_t pid;

	test_setup("pingpong");
	busy = getenv("RDMAMSG_PP_BUSY") != NULL;
	n = ns ? strtoull(ns, NULL, 0) : tap_small() ? 1000 : 20000;
	memset(&p, 0, sizeof(p));
	p.ctx = test_ctx();
	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));
	is_int(rdmamsg_connect(p.ctx, addr, NULL, &cli_cbs, &p, &p.ep), 0,
	       "connect");
	wait_flag(&p, &p.connected, 10000);
	is_int(p.status, 0, "connected");
	t0 = test_now_ms();
	for (i = 0; i < n; i++) {
		p.flag = 0;
		if (rdmamsg_send(p.ep, msg, sizeof(msg), NULL))
			break;
		sent++;
		wait_flag(&p, &p.flag, 5000);
		if (!p.flag)
			break;
	}
	t1 = test_now_ms();
	is_int(p.got, n, "every ping came back, none waited for a timeout");
	diag("%llu round trips in %lld ms: %.1f us each (%s)",
	     (unsigned long long)p.got, t1 - t0,
	     (t1 - t0) * 1000.0 / (double)(p.got ? p.got : 1),
	     busy ? "busy polling" : "blocking in poll()");
	is_int(sent, n, "all sent");
	rdmamsg_ep_close(p.ep, cli_close_cb);
	wait_flag(&p, &p.closed, 5000);
	ok(p.closed, "closed");
	is_int(test_wait_child(pid), 0, "server exits cleanly");
	is_int(rdmamsg_ctx_destroy(&p.ctx), 0, "context destroyed");
	close(rfd);
	return done_testing();
}
