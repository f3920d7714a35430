/* SPDX-License-Identifier: MIT */
/*
 * goodbye.c -- the in-band goodbye: a peer killed with SIGKILL reads as
 * on_disconnect(-ECONNRESET), every time; a peer that closes reads as 0,
 * every time.  Linger: with it, a close sends every queued message first;
 * without it, the queued ones are cancelled (-ECANCELED) and every message
 * is either received or cancelled, never both, never lost.  The same with
 * messages that go by rendezvous: the close waits for the FINs of those
 * the peer was told of (it pulls them before it reads the goodbye).  A
 * send refused with -EAGAIN (the copies ahead of the reader,
 * RDMAMSG_COPY_AHEAD, or the pool) is sent again at on_writable, as a
 * caller must.
 */
#include "config.h"

#include "../tap.h"
#include "util.h"

#define ROUNDS 25
#define NMSG   1000

/* ---- server (child) ------------------------------------------------ */

struct conn {
	uint64_t nrecv;
};

static int srv_wfd = -1;

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_ep_attr *attr;
	int wfd, failures;
};

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct conn *c = arg;

	(void)imm;
	(void)flags;
	c->nrecv++;
	if (len == 4 && !memcmp(data, "ping", 4))
		rdmamsg_send(ep, "pong", 4, NULL);
	else
		usleep(100); /* behind its peer: a close finds work queued */
}

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	free(arg);
}

/* srv_disc -- report {status, messages received} to the test */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct conn *c = arg;
	int64_t r[2] = {status, (int64_t)c->nrecv};

	if (write(srv_wfd, r, sizeof(r)) != sizeof(r))
		_exit(92);
	rdmamsg_ep_close(ep, srv_closed);
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep *ep;
	struct conn *c = calloc(1, sizeof(*c));

	(void)lst;
	(void)pdata;
	(void)len;
	if (!c || rdmamsg_conn_req_accept(req, s->attr, &srv_cbs, c, &ep)) {
		free(c);
		s->failures++;
	}
}

static int ctl[2];

static int server(int wfd, void *arg)
{
	struct srv s;
	struct pollfd p;
	uint16_t port;

	(void)arg;
	close(ctl[1]);
	memset(&s, 0, sizeof(s));
	srv_wfd = wfd;
	if (rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	/* 4 credits: a client announces 3 rendezvous at most (the peer's
	 * window less one, rndv.c window_full), and the small messages sent
	 * between them take the fourth, so a close finds announcements
	 * queued behind them, not yet announced */
	if (rdmamsg_ep_attr_new(&s.attr) ||
	    rdmamsg_ep_attr_set_recv_depth(s.attr, 4))
		return 12;
	if (rdmamsg_listen(s.ctx, "127.0.0.1:0", srv_req, &s, &s.lst) ||
	    rdmamsg_listener_get_port(s.lst, &port))
		return 11;
	test_write_port(wfd, port);
	p.fd = ctl[0];
	p.events = POLLIN;
	while (poll(&p, 1, 0) == 0)
		test_idle(s.ctx, 20);
	rdmamsg_listener_close(s.lst, NULL);
	rdmamsg_ep_attr_delete(&s.attr);
	test_idle(s.ctx, 200);
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 13;
	return s.failures ? 14 : 0;
}

/* ---- clients (children) -------------------------------------------- */

struct cli {
	int up, status, pong, closed, writable;
	uint64_t sent_ok, cancelled, other, eagain;
};

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
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

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)imm;
	(void)flags;
	if (len == 4 && !memcmp(data, "pong", 4))
		((struct cli *)arg)->pong = 1;
}

static void cli_sent(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)op;
	if (status == 0)
		c->sent_ok++;
	else if (status == -ECANCELED)
		c->cancelled++;
	else
		c->other++;
}

/* cli_writable -- on_writable: room again for what -EAGAIN refused */
static void cli_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->writable = 1;
}

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_send = cli_sent,
	.on_writable = cli_writable,
};

static char addr[64];

enum { M_KILL, M_CLOSE, M_LINGER, M_PLAIN, M_LINGER_RNDV, M_PLAIN_RNDV };

/* client -- connect, ping; then per mode: wait to be killed, close, or
 * queue NMSG messages (100 B, or 40,000 B by rendezvous alternating with
 * 100 B) and close (with or without linger) */
static int client(int wfd, void *arg)
{
	int mode = (int)(intptr_t)arg;
	struct rdmamsg_ep_attr *a = NULL;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	struct cli c;
	char m[100];
	/* above the rendezvous threshold (RDMAMSG_RNDV_THRESH_DEFAULT) */
	static char big[40000];
	uint64_t r[4];
	int i, rc;

	close(ctl[0]);
	close(ctl[1]);
	memset(&c, 0, sizeof(c));
	if (rdmamsg_ctx_create(NULL, &ctx))
		return 20;
	if (mode == M_LINGER || mode == M_LINGER_RNDV) {
		rdmamsg_ep_attr_new(&a);
		rdmamsg_ep_attr_set_linger(a, 1);
	}
	if (rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep))
		return 21;
	rdmamsg_ep_attr_delete(&a);
	if (!test_run_until(ctx, &c.up, 60000) || c.status)
		return 22;
	if (rdmamsg_send(ep, "ping", 4, NULL))
		return 23;
	if (!test_run_until(ctx, &c.pong, 60000))
		return 24;
	c.sent_ok = 0;
	if (mode == M_KILL) {
		if (write(wfd, "k", 1) != 1)
			return 25;
		for (;;)
			pause();
	}
	if (mode >= M_LINGER) {
		/* far more than the credits: most wait in the backlog */
		int rndv = mode == M_LINGER_RNDV || mode == M_PLAIN_RNDV;

		for (i = 0; i < NMSG;) {
			/* by rendezvous every other one: the announcements
			 * alone would never wait for credits */
			int large = rndv && !(i & 1);

			memset(large ? big : m, i,
			       large ? sizeof(big) : sizeof(m));
			rc = rdmamsg_send(ep, large ? big : m,
					  large ? sizeof(big) : sizeof(m),
					  NULL);
			if (rc == -EAGAIN) { /* again once there is room */
				c.eagain++;
				c.writable = 0;
				if (!test_run_until(ctx, &c.writable, 60000))
					return 31;
				continue;
			}
			if (rc)
				return 26;
			i++;
		}
	}
	if (rdmamsg_ep_close(ep, cli_closed))
		return 27;
	if (!test_run_until(ctx, &c.closed, 60000))
		return 28;
	r[0] = c.sent_ok;
	r[1] = c.cancelled;
	r[2] = c.other;
	r[3] = c.eagain;
	if (write(wfd, r, sizeof(r)) != sizeof(r))
		return 29;
	if (rdmamsg_ctx_destroy(&ctx))
		return 30;
	return 0;
}

static int srv_rfd;

/* srv_report -- the server's next {status, received}; status 1: none */
static void srv_report(int64_t r[2])
{
	struct pollfd p = {.fd = srv_rfd, .events = POLLIN};

	r[0] = 1;
	r[1] = -1;
	if (poll(&p, 1, 20000) != 1 ||
	    read(srv_rfd, r, 2 * sizeof(*r)) != 2 * sizeof(*r))
		r[0] = 1;
}

/* run_close -- one client of mode that closes; its {ok, cancelled,
 * other, -EAGAIN met} in r, the server's report in s */
static int run_close(int mode, uint64_t r[4], int64_t s[2])
{
	int rfd, st;
	pid_t pid = test_fork(client, (void *)(intptr_t)mode, &rfd);

	memset(r, 0, 4 * sizeof(*r));
	st = read(rfd, r, 4 * sizeof(*r)) == 4 * sizeof(*r);
	close(rfd);
	srv_report(s);
	return test_wait_child(pid) == 0 && st;
}

/* check_linger -- a client of mode closes with linger: every queued
 * message is sent, and the server received them all, then the goodbye */
static void check_linger(int mode, const char *name)
{
	uint64_t r[4];
	int64_t s[2];

	ok(run_close(mode, r, s), "%s: client closed", name);
	ok(r[0] == NMSG && r[1] == 0 && r[2] == 0,
	   "%s: every queued message sent (%llu ok, %llu cancelled, %llu "
	   "other; -EAGAIN %llu times)",
	   name, (unsigned long long)r[0], (unsigned long long)r[1],
	   (unsigned long long)r[2], (unsigned long long)r[3]);
	ok(s[0] == 0 && s[1] == NMSG + 1,
	   "%s: the server received them all, then the goodbye (%lld, %lld)",
	   name, (long long)s[0], (long long)s[1]);
}

/* check_plain -- a client of mode closes without linger: the queued
 * messages are cancelled, each message is sent or cancelled, and the
 * server got exactly the ones not cancelled */
static void check_plain(int mode, const char *name)
{
	uint64_t r[4];
	int64_t s[2];

	ok(run_close(mode, r, s), "%s: client closed", name);
	ok(r[1] > 0 && r[2] == 0 && r[0] + r[1] == NMSG,
	   "%s: queued messages cancelled (%llu ok, %llu cancelled, %llu "
	   "other; -EAGAIN %llu times)",
	   name, (unsigned long long)r[0], (unsigned long long)r[1],
	   (unsigned long long)r[2], (unsigned long long)r[3]);
	ok(s[0] == 0 && (uint64_t)s[1] == r[0] + 1,
	   "%s: the server got exactly the ones not cancelled (%lld, %lld)",
	   name, (long long)s[0], (long long)s[1]);
}

int main(void)
{
	int i, rfd, nreset = 0, nclean = 0, st;
	uint64_t r[4];
	int64_t s[2];
	pid_t spid;

	test_setup("goodbye");
	if (pipe(ctl))
		bail_out("pipe");
	/* every process makes its own softrdma context: none is inherited */
	spid = test_fork_server(server, NULL, &srv_rfd, addr, sizeof(addr));
	close(ctl[0]);

	for (i = 0; i < ROUNDS; i++) {
		char b;
		pid_t pid = test_fork(client, (void *)(intptr_t)M_KILL, &rfd);

		if (read(rfd, &b, 1) != 1)
			break;
		kill(pid, SIGKILL);
		st = test_wait_child(pid);
		close(rfd);
		srv_report(s);
		if (st == 128 + SIGKILL && s[0] == -ECONNRESET)
			nreset++;
		else
			printf("# round %d: client %d, server status %lld\n", i,
			       st, (long long)s[0]);
	}
	is_int(nreset, ROUNDS, "a SIGKILLed peer is -ECONNRESET, every time");

	for (i = 0; i < ROUNDS; i++) {
		if (run_close(M_CLOSE, r, s) && s[0] == 0)
			nclean++;
		else
			printf("# round %d: server status %lld\n", i,
			       (long long)s[0]);
	}
	is_int(nclean, ROUNDS, "a peer that closes is 0, every time");

	check_linger(M_LINGER, "linger");
	check_plain(M_PLAIN, "plain close");
	check_linger(M_LINGER_RNDV, "linger, rendezvous");
	check_plain(M_PLAIN_RNDV, "plain close, rendezvous");

	if (write(ctl[1], "q", 1) != 1)
		bail_out("write");
	is_int(test_wait_child(spid), 0, "server exits cleanly");
	close(srv_rfd);
	{
		/* children leave with _exit(): softrdma's exit handler of this
		 * process reclaims what they (and the killed ones) left */
		struct rdmamsg_ctx *ctx;

		is_int(rdmamsg_ctx_create(NULL, &ctx), 0, "a last context");
		is_int(rdmamsg_ctx_destroy(&ctx), 0, "destroyed");
	}
	return done_testing();
}
