/* SPDX-License-Identifier: MIT */
/*
 * slow.c -- a slow receiver: the server sleeps in its receive callback; the
 * sender runs out of credits, fills its bounded backlog, gets -EAGAIN and
 * on_writable, and nothing is lost or duplicated; its pool stays bounded.
 *
 * The backlog's byte bound: it holds at most RDMAMSG_COPY_AHEAD bytes of
 * copied messages (unset: 1 MiB; "0": only its message limit), at least
 * two.  The server sleeps in its first on_recv, so that nothing it
 * receives returns a credit while the client fills the backlog: the 4 KiB
 * sends taken before the first -EAGAIN are the client's credits (at most
 * the server's receive depth) plus the backlog's 16 (64k), 256 (unset)
 * or 1,024 (0); then on_writable, and every message arrives once, in
 * order.
 */
#include "config.h"

#include "../tap.h"
#include "peer.h"

#define DEPTH 16   /* the server's receive buffers: our credits at most */
#define MSG   4096 /* the byte bound's sends: copied into the backlog */

struct cli {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	uint64_t sent, n, taken, done_ok, done_err, eagain, writable;
	size_t max_reg, size; /* size 0: 64 B, every 16th 20,000 B */
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

/* pump -- send until pushed back, watching the pool; the first
 * push-back's count of sends is taken */
static void pump(struct cli *c)
{
	static char msg[20000];
	size_t reg, used;

	memset(msg, 0, sizeof(msg));
	while (c->sent < c->n) {
		int ret;

		memcpy(msg, &c->sent, 8);
		/* every 16th message is fragmented (8 KiB eager size) */
		ret = rdmamsg_send(c->ep, msg,
				   c->size	  ? c->size
				   : c->sent % 16 ? 64
						  : sizeof(msg),
				   (void *)(uintptr_t)c->sent);
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
	rdmamsg_ctx_query_pool(c->ctx, &reg, &used);
	if (reg > c->max_reg)
		c->max_reg = reg;
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

/* copy_bound -- with RDMAMSG_COPY_AHEAD=env (NULL: unset), the MSG-byte
 * sends taken before the first -EAGAIN lie in [lo, hi]; all arrive */
static void copy_bound(const char *env, uint64_t lo, uint64_t hi)
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
	c.size = MSG;
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
	ok(c.sent == c.n && c.done_ok == c.n && !c.failures,
	   "%s: all sent, all completed successfully", name);
	ok(c.writable > 0 && c.writable <= c.eagain,
	   "%s: on_writable after -EAGAIN (%llu of %llu)", name,
	   (unsigned long long)c.writable, (unsigned long long)c.eagain);
	ok(rdmamsg_ep_close(c.ep, cli_close_cb) == 0, "%s: close", name);
	test_run_until(c.ctx, &c.closed, 60000);
	ok(read(rfd, r, sizeof(r)) == (ssize_t)sizeof(r) && r[0] == c.n &&
		   r[1] == 0,
	   "%s: the server received every message, in order, once", name);
	ok(test_wait_child(pid) == 0, "%s: server exits cleanly", name);
	ok(rdmamsg_ctx_destroy(&c.ctx) == 0, "%s: context destroyed", name);
	close(rfd);
}

int main(void)
{
	struct srv_cfg cfg = {.slow_every = 50,
			      .slow_us = 1000,
			      .recv_depth = 16,
			      .report = 1};
	struct rdmamsg_ep_attr *a;
	struct cli c;
	uint64_t r[2] = {0, 0};
	char addr[64];
	int rfd;
	pid_t pid;

	test_setup("slow");
	memset(&c, 0, sizeof(c));
	c.ctx = test_ctx();
	c.n = tap_small() ? 5000 : 20000;
	pid = test_fork_server(srv_main, &cfg, &rfd, addr, sizeof(addr));
	rdmamsg_ep_attr_new(&a);
	rdmamsg_ep_attr_set_send_backlog(a, 64);
	is_int(rdmamsg_connect(c.ctx, addr, a, &cli_cbs, &c, &c.ep), 0,
	       "connect");
	rdmamsg_ep_attr_delete(&a);
	test_run_until(c.ctx, &c.connected, 60000);
	is_int(c.status, 0, "connected");
	pump(&c);
	test_run_until(c.ctx, &c.finished, 60000);
	ok(c.finished, "every send completed");
	is_int(c.sent, c.n, "all sent");
	is_int(c.done_ok, c.n, "all completed successfully (no RNR failure)");
	is_int(c.failures, 0, "no unexpected error");
	ok(c.eagain > 0, "the sender was pushed back (%llu x -EAGAIN)",
	   (unsigned long long)c.eagain);
	ok(c.writable > 0 && c.writable <= c.eagain,
	   "and told when it could go on (%llu x on_writable)",
	   (unsigned long long)c.writable);
	ok(c.max_reg <= (8u << 20),
	   "its pool stayed bounded (at most %zu bytes registered)", c.max_reg);
	is_int(rdmamsg_ep_close(c.ep, cli_close_cb), 0, "close");
	test_run_until(c.ctx, &c.closed, 60000);
	ok(c.closed, "closed");
	ok(read(rfd, r, sizeof(r)) == (ssize_t)sizeof(r), "server reported");
	is_int(r[0], c.n, "the server received every message");
	is_int(r[1], 0, "in order, no duplicate");
	is_int(test_wait_child(pid), 0, "server exits cleanly");
	is_int(rdmamsg_ctx_destroy(&c.ctx), 0, "context destroyed");
	close(rfd);

	/* the byte bound: 16 copies of 4 KiB in 64 KiB, 256 in the
	 * default 1 MiB, none but the 1,024-message limit with 0 */
	copy_bound("64k", 16, 16 + DEPTH);
	copy_bound(NULL, 256, 256 + DEPTH);
	copy_bound("0", 1024, 1024 + DEPTH);
	return done_testing();
}
