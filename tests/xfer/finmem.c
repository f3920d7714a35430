/* SPDX-License-Identifier: MIT */
/*
 * finmem.c -- the FIN that ends a rendezvous goes out whatever the pool
 * holds: a receiver whose context has the smallest pool (1 MiB, taken
 * whole by the receive ring's size class: no slab of a small class fits
 * beside it) pulls 3 MiB messages into the heap, and each sender's
 * on_send comes, with 0, while the receiver keeps the connection; then
 * the receiver's application holds every pool buffer of every class too
 * (no copy buffer for a send's header either), and the next FIN still
 * goes.  Every message arrives intact and in order.  Twice: with the
 * QPs' inline bytes (the FIN goes inline from the heap), and with none
 * (RDMAMSG_TEST_MAX_INLINE=0, a device without max_inline_data: it goes
 * from the endpoint's registered control buffer, its header in that
 * buffer's headroom).  Then (run_close) that FIN waits in the backlog
 * when the receiver closes: the close cancels the backlog, and the FIN
 * still goes before the goodbye, with a control buffer of its own.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "../core/util.h"
#include "pattern.h"

#define POOL  ((size_t)1 << 20)
#define LARGE ((size_t)3 << 20)
#define NMSG  3
#define MAXB  100000

static struct test_side srv, cli;
static int sent, sent_bad, recvd, recv_bad;
static struct rdmamsg_buf *bufs[MAXB];
static int nheld;   /* of bufs */
static int in_recv; /* on_recv sends SMALLN messages, then holds the pool */
static int sent_status;

#define SMALLN 16

/* hold_pool -- the receiver's application takes what its pool has left,
 * of every class */
static void hold_pool(void)
{
	size_t sz;

	for (sz = 1; sz <= POOL; sz <<= 1)
		while (nheld < MAXB &&
		       rdmamsg_buf_alloc(srv.ctx, sz, &bufs[nheld]) == 0)
			nheld++;
}

/* on_send -- the sender's completion: in order, with 0 */
static void on_send(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	(void)ep;
	(void)arg;
	if (status || (uintptr_t)op != (uintptr_t)sent + 1)
		sent_bad++;
	sent_status = status;
	sent++;
}

/* on_recv -- the receiver's message: message recvd's bytes */
static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	if (len != LARGE || !same(data, len, (uint32_t)recvd))
		recv_bad++;
	recvd++;
	if (in_recv) {
		char m[100] = {0};
		int i;

		/* the peer's window takes a few, the rest queue: the
		 * FIN waits behind them */
		for (i = 0; i < SMALLN; i++)
			if (rdmamsg_send(ep, m, sizeof(m), NULL))
				recv_bad++;
		hold_pool();
	}
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

/* run -- the scenario, the receiver's QPs with inl inline bytes (NULL:
 * the device's) */
static void run(const char *inl)
{
	static unsigned char big[LARGE];
	struct rdmamsg_ctx_attr *ca;
	size_t reg = 0, used = 0;
	char addr[64];
	int i;

	diag("receiver's inline bytes: %s", inl ? inl : "the device's");
	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	sent = sent_bad = recvd = recv_bad = 0;
	if (rdmamsg_ctx_attr_new(&ca))
		bail_out("rdmamsg_ctx_attr_new");
	is_int(rdmamsg_ctx_attr_set_pool_limit(ca, POOL), 0,
	       "the smallest pool limit");
	if (inl)
		setenv("RDMAMSG_TEST_MAX_INLINE", inl, 1);
	is_int(rdmamsg_ctx_create(ca, &srv.ctx), 0, "receiver: a 1 MiB pool");
	unsetenv("RDMAMSG_TEST_MAX_INLINE");
	rdmamsg_ctx_attr_delete(&ca);
	cli.ctx = test_ctx();
	srv.cbs = &srv_cbs;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0, "listen");
	is_int(rdmamsg_connect(cli.ctx, addr, NULL, &cli_cbs, &cli, &cli.ep), 0,
	       "connect");
	TEST_RUN2_WHILE(&srv, &cli, !cli.up || !srv.up, 10000);
	ok(cli.up && cli.status == 0 && srv.up && srv.status == 0, "connected");

	for (i = 0; i < NMSG; i++) {
		if (i == NMSG - 1) {
			hold_pool();
			ok(nheld < MAXB,
			   "the receiver's pool held whole (%d "
			   "buffers)",
			   nheld);
		}
		fill(big, sizeof(big), (uint32_t)i);
		ok(rdmamsg_send(cli.ep, big, sizeof(big),
				(void *)(uintptr_t)(i + 1)) == 0,
		   "3 MiB message %d sent", i);
		TEST_RUN2_WHILE(&srv, &cli, sent < i + 1 && !cli.disc, 10000);
		ok(recvd == i + 1, "message %d delivered", i);
		ok(sent == i + 1, "its on_send came (the FIN went): %d", sent);
		if (sent < i + 1)
			break;
	}
	is_int(sent_bad, 0, "every on_send with 0, in order");
	is_int(recv_bad, 0, "every message intact, in order");
	ok(!cli.disc && !srv.disc, "the connection stayed up");
	is_int(rdmamsg_ctx_query_pool(srv.ctx, &reg, &used), 0, "pool query");
	ok(reg <= POOL, "the receiver's pool within its limit (%zu bytes)",
	   reg);
	for (i = 0; i < nheld; i++)
		rdmamsg_buf_free(bufs[i]);
	nheld = 0;
	ok(test_side_close2(&srv, &cli, 10000), "everything closed");
	is_int(sent, NMSG, "no on_send twice, none at close");
	is_int(rdmamsg_ctx_query_pool(srv.ctx, &reg, &used), 0, "pool query");
	is_int((long long)used, 0, "no pool buffer left handed out");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "sender's context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0,
	       "receiver's context destroyed");
}

/* run_close -- a FIN that waits in the backlog (behind the messages the
 * receive callback sent past the peer's window of 2) from the control
 * buffer (no inline bytes, the pool held whole) when the receiver closes:
 * the close cancels what is queued, and the FIN still goes before the
 * goodbye (the peer's message was delivered): the sender's on_send comes
 * with 0, well within the receiver's close timeout */
static void run_close(void)
{
	static unsigned char big[LARGE];
	struct rdmamsg_ctx_attr *ca;
	struct rdmamsg_ep_attr *sa, *cattr;
	size_t reg = 0, used = 0;
	long long t0;
	char addr[64];
	int i;

	diag("receiver's inline bytes: 0; it closes with the FIN queued");
	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	sent = sent_bad = recvd = recv_bad = 0;
	sent_status = 1;
	if (rdmamsg_ctx_attr_new(&ca) || rdmamsg_ep_attr_new(&sa) ||
	    rdmamsg_ep_attr_new(&cattr))
		bail_out("attributes");
	rdmamsg_ctx_attr_set_pool_limit(ca, POOL);
	setenv("RDMAMSG_TEST_MAX_INLINE", "0", 1);
	is_int(rdmamsg_ctx_create(ca, &srv.ctx), 0, "receiver: a 1 MiB pool");
	unsetenv("RDMAMSG_TEST_MAX_INLINE");
	rdmamsg_ctx_attr_delete(&ca);
	is_int(rdmamsg_ep_attr_set_close_timeout(sa, 3000), 0,
	       "receiver's close timeout 3 s");
	is_int(rdmamsg_ep_attr_set_recv_depth(cattr, 2), 0,
	       "sender's receive depth 2");
	cli.ctx = test_ctx();
	srv.cbs = &srv_cbs;
	srv.attr = sa;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0, "listen");
	is_int(rdmamsg_connect(cli.ctx, addr, cattr, &cli_cbs, &cli, &cli.ep),
	       0, "connect");
	TEST_RUN2_WHILE(&srv, &cli, !cli.up || !srv.up, 10000);
	ok(cli.up && cli.status == 0 && srv.up && srv.status == 0, "connected");

	fill(big, sizeof(big), 0);
	in_recv = 1;
	is_int(rdmamsg_send(cli.ep, big, sizeof(big), (void *)(uintptr_t)1), 0,
	       "3 MiB message sent");
	/* only the receiver runs: the sender returns no credit */
	test_run_until(srv.ctx, &recvd, 10000);
	in_recv = 0;
	ok(recvd == 1 && !recv_bad, "delivered, %d messages sent back", SMALLN);
	ok(nheld > 0 && nheld < MAXB, "the receiver's pool held whole (%d)",
	   nheld);
	is_int(sent, 0, "no on_send yet: the FIN waits behind them");
	t0 = test_now_ms();
	is_int(rdmamsg_ep_close(srv.ep, test_side_on_close), 0,
	       "the receiver closes");
	TEST_RUN2_WHILE(&srv, &cli, !srv.closed, 10000);
	ok(srv.closed, "the receiver's endpoint closed");
	is_int(sent, 1, "the sender's on_send came");
	is_int(sent_status, 0, "with 0: the message was delivered");
	ok(test_now_ms() - t0 < 2000, "before the close timeout (%lld ms)",
	   test_now_ms() - t0);
	for (i = 0; i < nheld; i++)
		rdmamsg_buf_free(bufs[i]);
	nheld = 0;
	TEST_RUN2_WHILE(&srv, &cli, !cli.disc, 10000);
	ok(cli.disc, "the sender saw the disconnect");
	rdmamsg_ep_close(cli.ep, test_side_on_close);
	rdmamsg_listener_close(srv.lst, test_side_on_lclose);
	TEST_RUN2_WHILE(&srv, &cli, !cli.closed || !srv.lclosed, 10000);
	ok(cli.closed && srv.lclosed, "everything closed");
	is_int(rdmamsg_ctx_query_pool(srv.ctx, &reg, &used), 0, "pool query");
	is_int((long long)used, 0, "no pool buffer left handed out");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "sender's context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0,
	       "receiver's context destroyed");
	rdmamsg_ep_attr_delete(&sa);
	rdmamsg_ep_attr_delete(&cattr);
}

int main(void)
{
	test_setup("finmem");
	run(NULL);
	run("0");
	run_close();
	return done_testing();
}
