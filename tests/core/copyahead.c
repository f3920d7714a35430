/* SPDX-License-Identifier: MIT */
/*
 * copyahead.c -- the send backlog holds at most RDMAMSG_COPY_AHEAD bytes
 * of copied messages (unset: 1 MiB; "0": only its message limit), at
 * least two: a sender out of credits gets -EAGAIN once that much waits,
 * not after 1,024 copies, then on_writable, and every message arrives
 * once, in order.  The server sleeps in its first on_recv, so that
 * nothing it receives returns a credit while the client fills the
 * backlog: what the client gets taken before its first -EAGAIN is its
 * credits (at most the server's receive depth) plus the backlog.
 */
#include "config.h"

#include "../tap.h"
#include "peer.h"

#define DEPTH 16   /* the server's receive buffers: our credits at most */
#define MSG   4096 /* copied into the backlog (above the packing limit) */

struct cli {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	uint64_t sent, n, taken, done_ok, done_err, eagain, writable;
	int connected, status, closed, finished, failures;
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

/* cli_sent -- each send completes once */
static void cli_sent(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)op;
	if (status)
		c->done_err++;
	else
		c->done_ok++;
	if (c->done_ok + c->done_err == c->n)
		c->finished = 1;
}

/* pump -- send until pushed back; the first push-back's count is taken */
static void pump(struct cli *c)
{
	static char msg[MSG];

	while (c->sent < c->n) {
		int ret;

		memcpy(msg, &c->sent, 8);
		ret = rdmamsg_send(c->ep, msg, sizeof(msg), NULL);
		if (ret == -EAGAIN) {
			if (!c->eagain++)
				c->taken = c->sent;
			break;
		}
		if (ret) {
			c->failures++;
			break;
		}
		c->sent++;
	}
}

/* cli_writable -- on_writable: send more */
static void cli_writable(struct rdmamsg_ep *ep, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	c->writable++;
	pump(c);
}

/* cli_close_cb -- close callback: note it */
static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_send = cli_sent,
	.on_writable = cli_writable,
};

/* one_run -- with RDMAMSG_COPY_AHEAD=env (NULL: unset), the sends taken
 * before the first -EAGAIN lie in [lo, hi]; all arrive */
static void one_run(const char *env, uint64_t lo, uint64_t hi)
{
	struct srv_cfg cfg = {
		.first_ms = 1500, .recv_depth = DEPTH, .report = 1};
	const char *name = env ? env : "unset";
	uint64_t r[2] = {0, 0};
	struct cli c;
	char addr[64];
	int rfd;
	pid_t pid;

	if (env)
		setenv("RDMAMSG_COPY_AHEAD", env, 1);
	else
		unsetenv("RDMAMSG_COPY_AHEAD");
	memset(&c, 0, sizeof(c));
	c.ctx = test_ctx();
	c.n = tap_small() ? 1500 : 4000;
	pid = test_fork_server(srv_main, &cfg, &rfd, addr, sizeof(addr));
	ok(rdmamsg_connect(c.ctx, addr, NULL, &cli_cbs, &c, &c.ep) == 0,
	   "%s: connect", name);
	test_run_until(c.ctx, &c.connected, 60000);
	ok(c.status == 0, "%s: connected", name);
	pump(&c);
	ok(c.eagain && c.taken >= lo && c.taken <= hi,
	   "%s: %llu sends of %d B taken before the first -EAGAIN (%llu .. "
	   "%llu)",
	   name, (unsigned long long)c.taken, MSG, (unsigned long long)lo,
	   (unsigned long long)hi);
	test_run_until(c.ctx, &c.finished, 60000);
	ok(c.sent == c.n, "%s: all sent", name);
	ok(c.done_ok == c.n, "%s: all completed successfully", name);
	ok(c.failures == 0, "%s: no unexpected error", name);
	ok(c.writable > 0 && c.writable <= c.eagain,
	   "%s: on_writable after -EAGAIN (%llu of %llu)", name,
	   (unsigned long long)c.writable, (unsigned long long)c.eagain);
	ok(rdmamsg_ep_close(c.ep, cli_close_cb) == 0, "%s: close", name);
	test_run_until(c.ctx, &c.closed, 60000);
	ok(read(rfd, r, sizeof(r)) == (ssize_t)sizeof(r), "%s: server reported",
	   name);
	ok(r[0] == c.n, "%s: the server received every message", name);
	ok(r[1] == 0, "%s: in order, no duplicate", name);
	ok(test_wait_child(pid) == 0, "%s: server exits cleanly", name);
	ok(rdmamsg_ctx_destroy(&c.ctx) == 0, "%s: context destroyed", name);
	close(rfd);
}

int main(void)
{
	test_setup("copyahead");
	/* 64 KiB: 16 copies of 4 KiB wait, with at most DEPTH credits */
	one_run("64k", 16, 16 + DEPTH);
	/* the default, 1 MiB: 256 copies */
	one_run(NULL, 256, 256 + DEPTH);
	/* no byte bound: the backlog's message limit, 1,024 */
	one_run("0", 1024, 1024 + DEPTH);
	return done_testing();
}
