/* SPDX-License-Identifier: MIT */
/*
 * multi.c -- many endpoints on one context (they share the completion and
 * CM channels): NEP connections to one server, every one streaming its own
 * sequence, both sides blocking in poll() when idle.  The server checks
 * each connection's order and answers with its count; the server side runs
 * under rdmamsg_ctx_run().
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

#define NEP 8

struct conn {
	struct rdmamsg_ep *ep;
	uint64_t next, bad, sent, answer;
	int connected, status, answered, closed;
	struct cli *c;
};

struct cli {
	struct rdmamsg_ctx *ctx;
	struct conn conns[NEP];
	uint64_t n;
	int answered, closed, connected;
};

/* ---- server ---- */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	int open, failures, accepted;
};

struct sconn {
	struct srv *s;
	uint64_t next, bad;
};

static uint64_t nmsg;

/* srv_recv -- on_recv: handle one message */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct sconn *sc = arg;
	uint64_t seq;

	(void)imm;
	(void)flags;
	memcpy(&seq, data, sizeof(seq));
	if (len != 16 || seq != sc->next)
		sc->bad++;
	sc->next = seq + 1;
	if (sc->next == nmsg) {
		uint64_t r[2] = {sc->next, sc->bad};

		if (rdmamsg_send(ep, r, sizeof(r), NULL))
			sc->s->failures++;
	}
}

/* srv_close_cb -- close callback: note it */
static void srv_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	struct sconn *sc = arg;

	(void)ep;
	if (--sc->s->open == 0 && sc->s->accepted == NEP)
		rdmamsg_listener_close(sc->s->lst, NULL);
	free(sc);
}

/* srv_disc -- on_disconnect: note it (and close) */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, srv_close_cb);
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

/* srv_req -- on_conn_req: accept or refuse */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct sconn *sc = calloc(1, sizeof(*sc));
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	sc->s = s;
	if (rdmamsg_conn_req_accept(req, NULL, &srv_cbs, sc, &ep)) {
		s->failures++;
		free(sc);
		return;
	}
	s->open++;
	s->accepted++;
}

/* server -- the child: serve until the client leaves */
static int server(int wfd, void *arg)
{
	struct srv s;

	(void)arg;
	memset(&s, 0, sizeof(s));
	if (rdmamsg_ctx_create(NULL, &s.ctx) ||
	    test_listen_report(s.ctx, srv_req, &s, &s.lst, wfd))
		return 10;
	/* returns when the listener and every endpoint are closed */
	if (rdmamsg_ctx_run(s.ctx))
		return 11;
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 12;
	return s.failures ? 13 : 0;
}

/* ---- client ---- */

static void send_more(struct conn *k)
{
	char msg[16];

	memset(msg, 0, sizeof(msg));
	while (k->sent < k->c->n) {
		memcpy(msg, &k->sent, 8);
		if (rdmamsg_send(k->ep, msg, sizeof(msg), NULL))
			return;
		k->sent++;
	}
}

/* cli_connect -- on_connect: record the outcome */
static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct conn *k = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	k->connected = 1;
	k->status = status;
	if (++k->c->connected == NEP) {
		int i;

		for (i = 0; i < NEP; i++)
			send_more(&k->c->conns[i]);
	}
}

/* cli_writable -- on_writable: send more */
static void cli_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	send_more(arg);
}

/* cli_recv -- on_recv: handle one message */
static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct conn *k = arg;
	uint64_t r[2];

	(void)ep;
	(void)imm;
	(void)flags;
	if (len == sizeof(r)) {
		memcpy(r, data, sizeof(r));
		k->answer = r[0];
		k->bad = r[1];
	}
	k->answered = 1;
	k->c->answered++;
}

/* cli_close_cb -- close callback: note it */
static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	struct conn *k = arg;

	(void)ep;
	k->closed = 1;
	k->c->closed++;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_writable = cli_writable,
};

int main(void)
{
	static struct cli c;
	char addr[64];
	int rfd, i, bad = 0, short_ = 0, failed = 0;
	pid_t pid;
	long long t0;

	test_setup("multi");
	c.ctx = test_ctx();
	c.n = nmsg = tap_small() ? 2000 : 20000;
	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));
	for (i = 0; i < NEP; i++) {
		c.conns[i].c = &c;
		if (rdmamsg_connect(c.ctx, addr, NULL, &cli_cbs, &c.conns[i],
				    &c.conns[i].ep))
			failed++;
	}
	is_int(failed, 0, "all connects started");
	t0 = test_now_ms();
	while (c.answered < NEP && test_now_ms() - t0 < 60000)
		test_idle(c.ctx, 100);
	is_int(c.connected, NEP, "all connected");
	is_int(c.answered, NEP, "every connection was answered");
	for (i = 0; i < NEP; i++) {
		bad += (int)c.conns[i].bad;
		short_ += c.conns[i].answer != c.n;
	}
	is_int(short_, 0, "each server side got all its messages");
	is_int(bad, 0, "each in order, none lost or duplicated");
	diag("%d x %llu messages in %lld ms", NEP, (unsigned long long)c.n,
	     test_now_ms() - t0);
	for (i = 0; i < NEP; i++)
		rdmamsg_ep_close(c.conns[i].ep, cli_close_cb);
	t0 = test_now_ms();
	while (c.closed < NEP && test_now_ms() - t0 < 10000)
		test_idle(c.ctx, 100);
	is_int(c.closed, NEP, "all closed");
	is_int(test_wait_child(pid), 0,
	       "server's rdmamsg_ctx_run returned with everything closed");
	is_int(rdmamsg_ctx_destroy(&c.ctx), 0, "context destroyed");
	close(rfd);
	return done_testing();
}
