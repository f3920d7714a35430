/* SPDX-License-Identifier: MIT */
/*
 * rma_wake.c -- the completion of a one-sided operation wakes a loop that
 * blocks on the context's fd: the CQ's completion channel signals it (as on
 * hardware), with no eventfd write from the library (its count of them,
 * ctx->kicks, does not move; the wakeup callback runs only after
 * rdmamsg_ctx_wakeup(), so it cannot tell).  RDMA
 * write, read and fetch-and-add, each posted from outside the loop with
 * the client's CQ armed and idle, and a write queued behind a send.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"
#include "internal.h"

#define LEN 4096

static int kicks, done, op_status, srv_got;
static uint64_t kicks0; /* the client context's ctx->kicks at the start */
static uint64_t op_value;

static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	if (len == 5 && !memcmp(data, "first", 5))
		srv_got++;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_disconnect = test_side_on_disconnect,
};

/* on_kick -- the client context's wakeup callback */
static void on_kick(struct rdmamsg_ctx *ctx, void *arg)
{
	(void)ctx;
	(void)arg;
	kicks++;
}

static void on_op(struct rdmamsg_ep *ep, int status, uint64_t value,
		  void *op_ctx)
{
	(void)ep;
	(void)op_ctx;
	op_status = status;
	op_value = value;
	done = 1;
}

/* quiesce -- progress ctx until arming it succeeds (nothing pending) */
static int quiesce(struct rdmamsg_ctx *ctx)
{
	int i;

	for (i = 0; i < 1000; i++) {
		if (rdmamsg_ctx_arm(ctx) == 0)
			return 1;
		rdmamsg_ctx_progress(ctx);
	}
	return 0;
}

/* wait_op -- without driving ctx, its fd must become readable; then
 * progress until the operation completes and ctx is idle again */
static int wait_op(struct rdmamsg_ctx *ctx)
{
	struct pollfd p;
	int readable, i;

	rdmamsg_ctx_get_fd(ctx, &p.fd);
	p.events = POLLIN;
	readable = poll(&p, 1, 10000) == 1;
	for (i = 0; i < 100 && !done; i++) {
		if (rdmamsg_ctx_arm(ctx) == 0)
			poll(&p, 1, 100);
		rdmamsg_ctx_progress(ctx);
	}
	/* an eventfd write, if any, is read (and counted) by now */
	quiesce(ctx);
	return readable;
}

/* wait_op2 -- block on both fds (never timing out) until the operation
 * completes; returns the number of poll()s that timed out */
static int wait_op2(struct test_side *a, struct test_side *b)
{
	struct pollfd p[2];
	int timeouts = 0, i;

	rdmamsg_ctx_get_fd(a->ctx, &p[0].fd);
	rdmamsg_ctx_get_fd(b->ctx, &p[1].fd);
	p[0].events = p[1].events = POLLIN;
	for (i = 0; i < 1000 && !done; i++) {
		if (rdmamsg_ctx_arm(a->ctx) == 0 &&
		    rdmamsg_ctx_arm(b->ctx) == 0 && poll(p, 2, 10000) == 0)
			timeouts++;
		rdmamsg_ctx_progress(a->ctx);
		rdmamsg_ctx_progress(b->ctx);
	}
	quiesce(a->ctx);
	quiesce(b->ctx);
	return timeouts;
}

int main(void)
{
	static struct test_side srv, cli;
	static char smem[LEN], cmem[LEN];
	uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];
	struct rdmamsg_ctx_attr *ca;
	struct rdmamsg_mr *smr = NULL, *cmr = NULL;
	struct rdmamsg_rmr *rmr = NULL;
	uint64_t counter = 40;
	char addr[64];
	int ret;

	test_setup("rma_wake");
	srv.ctx = test_ctx();
	if (rdmamsg_ctx_attr_new(&ca) ||
	    rdmamsg_ctx_attr_set_wakeup_cb(ca, on_kick, NULL))
		bail_out("context attributes");
	is_int(rdmamsg_ctx_create(ca, &cli.ctx), 0,
	       "client context with a wakeup callback");
	rdmamsg_ctx_attr_delete(&ca);

	memset(smem, 's', sizeof(smem));
	memcpy(smem + LEN - 8, &counter, 8);
	memset(cmem, 'c', sizeof(cmem));
	is_int(rdmamsg_mr_reg(srv.ctx, smem, LEN,
			      RDMAMSG_ACCESS_REMOTE_READ |
				      RDMAMSG_ACCESS_REMOTE_WRITE |
				      RDMAMSG_ACCESS_REMOTE_ATOMIC,
			      &smr),
	       0, "server region registered");
	is_int(rdmamsg_mr_reg(cli.ctx, cmem, LEN, 0, &cmr), 0,
	       "client region registered");
	if (!smr || !cmr || rdmamsg_mr_export(smr, ex, sizeof(ex)) ||
	    rdmamsg_rmr_import(ex, sizeof(ex), &rmr))
		bail_out("export/import");

	srv.cbs = &cbs;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0, "listen");
	is_int(rdmamsg_connect(cli.ctx, addr, NULL, &cbs, &cli, &cli.ep), 0,
	       "connect");
	test_run2(&srv, &cli, &cli.up, 10000);
	is_int(cli.status, 0, "connected");
	if (cli.status || !cli.ep)
		bail_out("no connection");
	ok(quiesce(srv.ctx) && quiesce(cli.ctx), "both contexts idle");

	/* RDMA write of the first half */
	kicks = done = 0;
	kicks0 = cli.ctx->kicks;
	ret = rdmamsg_write(cli.ep, cmr, 0, rmr, 0, LEN / 2, on_op, NULL);
	is_int(ret, 0, "write posted");
	ok(wait_op(cli.ctx), "write: the completion made the fd readable");
	ok(done && op_status == 0, "write completed (status %d)", op_status);
	ok(!memcmp(smem, cmem, LEN / 2), "write: data in place");
	is_int(cli.ctx->kicks - kicks0, 0,
	       "write: no eventfd write woke the loop");

	/* RDMA read of the untouched part */
	ok(quiesce(cli.ctx), "idle again");
	kicks = done = 0;
	kicks0 = cli.ctx->kicks;
	ret = rdmamsg_read(cli.ep, cmr, LEN / 2, rmr, LEN / 2, LEN / 4, on_op,
			   NULL);
	is_int(ret, 0, "read posted");
	ok(wait_op(cli.ctx), "read: the completion made the fd readable");
	ok(done && op_status == 0, "read completed (status %d)", op_status);
	ok(!memcmp(cmem + LEN / 2, smem + LEN / 2, LEN / 4),
	   "read: data in place");
	is_int(cli.ctx->kicks - kicks0, 0,
	       "read: no eventfd write woke the loop");

	/* fetch-and-add on the last 8 bytes */
	ok(quiesce(cli.ctx), "idle again");
	kicks = done = 0;
	kicks0 = cli.ctx->kicks;
	ret = rdmamsg_atomic_fadd(cli.ep, rmr, LEN - 8, 2, on_op, NULL);
	is_int(ret, 0, "fetch-and-add posted");
	ok(wait_op(cli.ctx), "fadd: the completion made the fd readable");
	ok(done && op_status == 0 && op_value == 40,
	   "fadd completed with the old value (status %d, value %llu)",
	   op_status, (unsigned long long)op_value);
	memcpy(&counter, smem + LEN - 8, 8);
	is_int(counter, 42, "fadd: the counter added");
	is_int(cli.ctx->kicks - kicks0, 0,
	       "fadd: no eventfd write woke the loop");

	/* a write queued behind a message: it completes after the send, when
	 * the server took the message; both loops block on their fds */
	ok(quiesce(cli.ctx) && quiesce(srv.ctx), "idle again");
	kicks = done = 0;
	kicks0 = cli.ctx->kicks;
	memset(cmem, 'd', LEN / 2);
	ret = rdmamsg_send(cli.ep, "first", 5, NULL);
	is_int(ret, 0, "a message posted");
	ret = rdmamsg_write(cli.ep, cmr, 0, rmr, 0, LEN / 2, on_op, NULL);
	is_int(ret, 0, "a write posted behind it");
	is_int(wait_op2(&cli, &srv), 0, "behind a send: no poll() timed out");
	ok(done && op_status == 0, "write completed (status %d)", op_status);
	/* the write completing means the message before it was acknowledged,
	 * as an HCA acknowledges it: its completion may still wait in the
	 * server's CQ, so the server runs until it delivers (bounded) */
	test_run2(&srv, &cli, &srv_got, 10000);
	ok(srv_got == 1 && !memcmp(smem, cmem, LEN / 2),
	   "message received, data in place");
	is_int(cli.ctx->kicks - kicks0, 0,
	       "behind a send: no eventfd write woke the loop");

	/* the wakeup callback does run for a real wake-up: the check
	 * above can fail */
	kicks = 0;
	rdmamsg_ctx_wakeup(cli.ctx);
	quiesce(cli.ctx);
	is_int(kicks, 1, "rdmamsg_ctx_wakeup() runs the wakeup callback");

	ok(test_side_close2(&srv, &cli, 10000), "everything closed");
	is_int(rdmamsg_rmr_free(&rmr), 0, "import freed");
	is_int(rdmamsg_mr_dereg(&cmr), 0, "client region deregistered");
	is_int(rdmamsg_mr_dereg(&smr), 0, "server region deregistered");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	return done_testing();
}
