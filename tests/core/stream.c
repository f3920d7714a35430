/* SPDX-License-Identifier: MIT */
/*
 * stream.c -- 1,000,000 small messages (100,000 under valgrind) from a
 * client to a server in another process: in order, no loss, no duplicate.
 * The client is driven by libev and the server by a plain poll() loop over
 * rdmamsg_ctx_get_fd/arm/progress, or the other way round (STREAM_CLIENT_EV).
 */
#include "config.h"

#include <ev.h>
#include <stdint.h>

#include "../tap.h"
#include "util.h"

#ifndef STREAM_CLIENT_EV
#define STREAM_CLIENT_EV 1
#endif

static uint64_t nmsg;

struct peer {
	struct rdmamsg_ctx *ctx;
	struct ev_loop *loop;
	struct rdmamsg_listener *lst;
	struct rdmamsg_ep *ep;
	uint64_t next, bad, sent, eagain, writable;
	int connected, done, closed, lclosed, status, failures;
};

/* make_ctx -- a context in libev mode (own loop) or fd mode */
static int make_ctx(struct peer *p, int use_ev)
{
	struct rdmamsg_ctx_attr *attr;
	int ret;

	rdmamsg_ctx_attr_new(&attr);
	if (use_ev) {
		p->loop = ev_loop_new(EVFLAG_AUTO);
		rdmamsg_ctx_attr_set_loop(attr, p->loop);
	}
	ret = rdmamsg_ctx_create(attr, &p->ctx);
	rdmamsg_ctx_attr_delete(&attr);
	return ret;
}

/* drive -- run the peer's loop until *flag or ms pass */
static void drive(struct peer *p, volatile int *flag, int ms)
{
	long long end = test_now_ms() + ms;

	if (!p->loop) {
		test_run_until(p->ctx, flag, ms);
		return;
	}
	while (!*flag && test_now_ms() < end)
		ev_run(p->loop, EVRUN_ONCE);
}

/* srv_recv -- check the sequence; the last one is answered */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct peer *p = arg;
	uint64_t seq;

	(void)imm;
	(void)flags;
	if (len < sizeof(seq)) {
		p->bad++;
		return;
	}
	memcpy(&seq, data, sizeof(seq));
	if (seq != p->next)
		p->bad++;
	p->next = seq + 1;
	if (p->next == nmsg) {
		uint64_t r[2] = {p->next, p->bad};

		if (rdmamsg_send(ep, r, sizeof(r), NULL))
			p->failures++;
	}
}

/* srv_close_cb / lst_close_cb -- freed */
static void srv_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct peer *)arg)->closed = 1;
}

/* lst_close_cb -- listener close callback: note it */
static void lst_close_cb(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	((struct peer *)arg)->lclosed = 1;
}

/* srv_disc -- the client closed */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct peer *p = arg;

	if (status)
		p->failures++;
	rdmamsg_ep_close(ep, srv_close_cb);
	p->done = 1;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

/* srv_req -- accept the one client */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct peer *p = arg;

	(void)lst;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, NULL, &srv_cbs, p, &p->ep))
		p->failures++;
}

/* server -- child process */
static int server(int wfd, void *arg)
{
	struct peer p;

	(void)arg;
	memset(&p, 0, sizeof(p));
	if (make_ctx(&p, !STREAM_CLIENT_EV))
		return 10;
	if (test_listen_report(p.ctx, srv_req, &p, &p.lst, wfd))
		return 11;
	drive(&p, &p.done, 120000);
	if (!p.done)
		return 12;
	rdmamsg_listener_close(p.lst, lst_close_cb);
	drive(&p, &p.closed, 5000);
	drive(&p, &p.lclosed, 5000);
	if (!p.closed || !p.lclosed)
		return 13;
	if (rdmamsg_ctx_destroy(&p.ctx))
		return 14;
	if (p.loop) {
		ev_run(p.loop, 0); /* must return: the loop is empty */
		ev_loop_destroy(p.loop);
	}
	if (p.bad || p.next != nmsg) {
		printf("# server: %llu out of order, last %llu\n",
		       (unsigned long long)p.bad, (unsigned long long)p.next);
		return 15;
	}
	return p.failures ? 16 : 0;
}

/* send_more -- send until the library pushes back */
static void send_more(struct peer *p)
{
	char msg[16];

	memset(msg, 0, sizeof(msg));
	while (p->sent < nmsg) {
		int ret;

		memcpy(msg, &p->sent, sizeof(p->sent));
		ret = rdmamsg_send(p->ep, msg, 8 + p->sent % 8, NULL);
		if (ret == -EAGAIN) {
			p->eagain++;
			return;
		}
		if (ret) {
			p->failures++;
			return;
		}
		p->sent++;
	}
}

/* cli_connect -- up: start sending */
static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct peer *p = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	p->connected = 1;
	p->status = status;
	if (!status)
		send_more(p);
}

/* cli_writable -- room again */
static void cli_writable(struct rdmamsg_ep *ep, void *arg)
{
	struct peer *p = arg;

	(void)ep;
	p->writable++;
	send_more(p);
}

/* cli_recv -- the server's verdict */
static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct peer *p = arg;
	uint64_t r[2];

	(void)ep;
	(void)imm;
	(void)flags;
	if (len == sizeof(r)) {
		memcpy(r, data, sizeof(r));
		p->next = r[0];
		p->bad = r[1];
	}
	p->done = 1;
}

/* cli_close_cb -- close callback: note it */
static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct peer *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_writable = cli_writable,
};

int main(void)
{
	struct peer p;
	char addr[64];
	long long t0, t1;
	int rfd;
	pid_t pid;

	test_setup("stream");
	nmsg = tap_small() ? 100000 : 1000000;
	memset(&p, 0, sizeof(p));
	if (make_ctx(&p, STREAM_CLIENT_EV))
		bail_out("no context");
	diag("client in %s mode, server in %s mode",
	     STREAM_CLIENT_EV ? "libev" : "fd",
	     STREAM_CLIENT_EV ? "fd" : "libev");
	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));

	t0 = test_now_ms();
	is_int(rdmamsg_connect(p.ctx, addr, NULL, &cli_cbs, &p, &p.ep), 0,
	       "connect");
	drive(&p, &p.connected, 10000);
	is_int(p.status, 0, "connected");
	drive(&p, &p.done, 120000);
	t1 = test_now_ms();
	ok(p.done, "server answered");
	is_int(p.sent, nmsg, "all messages sent");
	is_int(p.next, nmsg, "server received all of them");
	is_int(p.bad, 0, "in order, no loss, no duplicate");
	is_int(p.failures, 0, "no unexpected send error");
	diag("%llu messages in %lld ms (%.0f msg/s), %llu -EAGAIN, %llu "
	     "writable",
	     (unsigned long long)nmsg, t1 - t0,
	     nmsg * 1000.0 / (double)(t1 - t0 ? t1 - t0 : 1),
	     (unsigned long long)p.eagain, (unsigned long long)p.writable);
	ok(p.writable >= (p.eagain ? 1 : 0), "every push-back got a writable");

	is_int(rdmamsg_ep_close(p.ep, cli_close_cb), 0, "close");
	drive(&p, &p.closed, 5000);
	ok(p.closed, "close callback");
	is_int(test_wait_child(pid), 0, "server checks pass and it exits");
	is_int(rdmamsg_ctx_destroy(&p.ctx), 0, "context destroyed");
	if (p.loop) {
		ev_run(p.loop, 0);
		ok(1, "the loop is empty: ev_run returned");
		ev_loop_destroy(p.loop);
	}
	close(rfd);
	return done_testing();
}
