/* SPDX-License-Identifier: MIT */
/*
 * kill.c -- the peer is SIGKILLed while traffic flows: the survivor gets
 * on_disconnect within its configured peer timeout, every send it made
 * completes exactly once, and closing works.
 */
#include "config.h"

#include "../tap.h"
#include "peer.h"

#define PEER_MS 600

struct cli {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	uint64_t sent, done, dup;
	unsigned char *seen;
	int connected, status, disc, disc_status, closed, stop;
};

/* cli_connect -- on_connect: record the outcome */
static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	c->connected = 1;
	c->status = status;
}

/* cli_sent -- on_send: count each completion */
static void cli_sent(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct cli *c = arg;
	uintptr_t i = (uintptr_t)op;

	(void)ep;
	(void)status;
	if (c->seen[i]++)
		c->dup++;
	c->done++;
}

/* cli_disc -- on_disconnect: note it (and close) */
static void cli_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	c->disc = 1;
	c->disc_status = status;
}

/* cli_close_cb -- close callback: note it */
static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	c->closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_send = cli_sent,
	.on_disconnect = cli_disc,
};

#define MAXOPS 2000000

int main(void)
{
	struct srv_cfg cfg = {0};
	struct rdmamsg_ep_attr *a;
	struct cli c;
	char addr[64], msg[64];
	long long t0, t_kill, t_disc;
	int rfd, slack;
	pid_t pid;

	test_setup("kill");
	/* detection comes at most a keep-alive tick (PEER_MS / 3) after the
	 * timeout on an idle machine; a loaded one (valgrind, parallel tests)
	 * may hold the loop back for seconds, so the bound only tells the
	 * keep-alive timer from something far slower */
	slack = 10000;
	memset(&c, 0, sizeof(c));
	c.ctx = test_ctx();
	c.seen = calloc(MAXOPS, 1);
	pid = test_fork_server(srv_main, &cfg, &rfd, addr, sizeof(addr));
	rdmamsg_ep_attr_new(&a);
	rdmamsg_ep_attr_set_peer_timeout(a, PEER_MS);
	is_int(rdmamsg_connect(c.ctx, addr, a, &cli_cbs, &c, &c.ep), 0,
	       "connect");
	rdmamsg_ep_attr_delete(&a);
	test_run_until(c.ctx, &c.connected, 60000);
	is_int(c.status, 0, "connected");

	/* traffic for a while, then the peer dies mid-stream */
	memset(msg, 0, sizeof(msg));
	t0 = test_now_ms();
	t_kill = 0;
	while (!c.disc && test_now_ms() - t0 < 10000 && c.sent < MAXOPS) {
		if (!t_kill && test_now_ms() - t0 > 200) {
			kill(pid, SIGKILL);
			t_kill = test_now_ms();
		}
		memcpy(msg, &c.sent, 8);
		if (rdmamsg_send(c.ep, msg, sizeof(msg),
				 (void *)(uintptr_t)c.sent) == 0)
			c.sent++;
		else
			test_idle(c.ctx, 1);
		rdmamsg_ctx_progress(c.ctx);
	}
	test_run_until(c.ctx, &c.disc, 60000);
	t_disc = test_now_ms();
	ok(c.disc, "on_disconnect after the peer died (status %d: %s)",
	   c.disc_status, rdmamsg_strerror(c.disc_status));
	ok(t_kill && t_disc - t_kill <= PEER_MS + slack,
	   "within the %d ms peer timeout (+%d ms): %lld ms", PEER_MS, slack,
	   t_disc - t_kill);
	is_int(test_wait_child(pid), 128 + SIGKILL, "the peer was killed");
	is_int(rdmamsg_send(c.ep, msg, 8, NULL), -ENOTCONN,
	       "sends fail with -ENOTCONN afterwards");
	is_int(rdmamsg_ep_close(c.ep, cli_close_cb), 0, "close");
	test_run_until(c.ctx, &c.closed, 60000);
	ok(c.closed, "close callback");
	is_int(c.done, c.sent, "every send completed (ok or error)");
	is_int(c.dup, 0, "...exactly once");
	diag("%llu sends before the disconnect", (unsigned long long)c.sent);
	close(rfd);

	/* a peer that stops answering (SIGSTOP: its connection stays open)
	 * is found by the keep-alives */
	memset(c.seen, 0, MAXOPS);
	c.connected = c.disc = c.closed = 0;
	c.sent = c.done = c.dup = 0;
	pid = test_fork_server(srv_main, &cfg, &rfd, addr, sizeof(addr));
	rdmamsg_ep_attr_new(&a);
	rdmamsg_ep_attr_set_peer_timeout(a, PEER_MS);
	rdmamsg_connect(c.ctx, addr, a, &cli_cbs, &c, &c.ep);
	rdmamsg_ep_attr_delete(&a);
	test_run_until(c.ctx, &c.connected, 60000);
	is_int(c.status, 0, "connected to a second peer");
	for (c.sent = 0; c.sent < 30; c.sent++)
		rdmamsg_send(c.ep, msg, 8, (void *)(uintptr_t)c.sent);
	kill(pid, SIGSTOP); /* mid-traffic: a flush never waits for it */
	t_kill = test_now_ms();
	test_run_until(c.ctx, &c.disc, PEER_MS * 4);
	t_disc = test_now_ms();
	ok(c.disc, "on_disconnect for the stopped peer");
	is_int(c.disc_status, -ETIMEDOUT, "status -ETIMEDOUT");
	/* the silence may have begun before the stop (an idle peer only
	 * sends keep-alives), so only the upper bound is certain */
	ok(t_disc - t_kill <= PEER_MS + slack,
	   "within the %d ms peer timeout (+%d ms): %lld ms", PEER_MS, slack,
	   t_disc - t_kill);
	rdmamsg_ep_close(c.ep, cli_close_cb);
	test_run_until(c.ctx, &c.closed, 60000);
	ok(c.closed, "closed without the peer's help");
	is_int(c.done, c.sent, "every send completed exactly once");
	is_int(c.dup, 0, "no duplicate completion");
	kill(pid, SIGKILL);
	test_wait_child(pid);
	close(rfd);
	is_int(rdmamsg_ctx_destroy(&c.ctx), 0, "context destroyed");
	free(c.seen);
	return done_testing();
}
