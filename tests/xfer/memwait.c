/* SPDX-License-Identifier: MIT */
/*
 * memwait.c -- a rendezvous whose FIN waits for pool memory ends as soon
 * as memory comes back: the receiver's pool is held whole by the
 * application (rdmamsg_buf_alloc until -ENOMEM), a large message arrives
 * (pulled into the heap, delivered), and its FIN finds no pool buffer
 * while nothing else of the endpoint is in flight; once the application
 * frees its buffers (outside any callback), rdmamsg_ctx_arm() must not
 * let the loop block with the FIN still waiting: the sender's on_send
 * follows at once, not at some unrelated later wake-up.  Two contexts of
 * this process, driven in fd mode (arm, poll, progress).  A FIN goes
 * inline from the heap when the pool is short, or from a control buffer
 * the endpoint registers once where the QP has too few inline bytes
 * (tests/xfer/finmem), so the receiver's QPs get 32 inline bytes here
 * (RDMAMSG_TEST_MAX_INLINE, fewer than a FIN's 64) and registering that
 * buffer fails (RDMAMSG_TEST_NO_CTL_BUF): the one case where it does
 * wait.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"

#define POOL  ((size_t)4 << 20)
#define LARGE ((size_t)3 << 20)
#define MAXB  100000

static struct test_side srv, cli;
static int sent, sent_status, recvd;
static struct rdmamsg_buf *bufs[MAXB];

/* on_send -- the sender's completion */
static void on_send(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	(void)ep;
	(void)op;
	(void)arg;
	sent++;
	sent_status = status;
}

/* on_recv -- the receiver's message */
static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	(void)ep;
	(void)data;
	(void)imm;
	(void)flags;
	(void)arg;
	if (len == LARGE)
		recvd++;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = test_side_on_connect,
	.on_disconnect = test_side_on_disconnect,
	.on_send = on_send,
};

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = test_side_on_connect,
	.on_disconnect = test_side_on_disconnect,
	.on_recv = on_recv,
};

int main(void)
{
	static char big[LARGE];
	struct rdmamsg_ctx_attr *ca;
	char addr[64];
	long long t0, waited;
	int n = 0, i;

	test_setup("memwait");
	if (rdmamsg_ctx_attr_new(&ca))
		bail_out("rdmamsg_ctx_attr_new");
	rdmamsg_ctx_attr_set_pool_limit(ca, POOL);
	setenv("RDMAMSG_TEST_MAX_INLINE", "32", 1);
	setenv("RDMAMSG_TEST_NO_CTL_BUF", "1", 1);
	is_int(rdmamsg_ctx_create(ca, &srv.ctx), 0, "receiver: a 4 MiB pool");
	unsetenv("RDMAMSG_TEST_MAX_INLINE");
	unsetenv("RDMAMSG_TEST_NO_CTL_BUF");
	rdmamsg_ctx_attr_delete(&ca);
	cli.ctx = test_ctx();
	srv.cbs = &srv_cbs;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0, "listen");
	is_int(rdmamsg_connect(cli.ctx, addr, NULL, &cli_cbs, &cli, &cli.ep), 0,
	       "connect");
	TEST_RUN2_WHILE(&srv, &cli, !cli.up || !srv.up, 10000);
	ok(cli.up && cli.status == 0 && srv.up && srv.status == 0, "connected");
	while (n < MAXB && rdmamsg_buf_alloc(srv.ctx, 1, &bufs[n]) == 0)
		n++;
	ok(n > 0 && n < MAXB, "the receiver's pool held whole (%d buffers)", n);
	is_int(rdmamsg_send(cli.ep, big, sizeof(big), NULL), 0,
	       "a 3 MiB message");
	TEST_RUN2_WHILE(&srv, &cli, !recvd, 10000);
	is_int(recvd, 1, "delivered (pulled into the heap)");
	TEST_RUN2_WHILE(&srv, &cli, !sent, 200);
	is_int(sent, 0, "its FIN waits for pool memory");
	for (i = 0; i < n; i++)
		rdmamsg_buf_free(bufs[i]);
	t0 = test_now_ms();
	test_run2(&srv, &cli, &sent, 5000);
	waited = test_now_ms() - t0;
	is_int(sent, 1, "on_send once memory came back");
	is_int(sent_status, 0, "with 0");
	ok(waited < 1000, "at once, not at a later wake-up (%lld ms)", waited);
	ok(test_side_close2(&srv, &cli, 10000), "everything closed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "sender's context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0,
	       "receiver's context destroyed");
	return done_testing();
}
