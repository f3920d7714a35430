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
 * buffer's headroom).
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

/* on_send -- the sender's completion: in order, with 0 */
static void on_send(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	(void)ep;
	(void)arg;
	if (status || (uintptr_t)op != (uintptr_t)sent + 1)
		sent_bad++;
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
	size_t reg = 0, used = 0, sz;
	char addr[64];
	int i, n = 0;

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
			/* the application takes what the pool has left,
			 * of every class */
			for (sz = 1; sz <= POOL; sz <<= 1)
				while (n < MAXB &&
				       rdmamsg_buf_alloc(srv.ctx, sz,
							 &bufs[n]) == 0)
					n++;
			ok(n < MAXB,
			   "the receiver's pool held whole (%d "
			   "buffers)",
			   n);
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
	for (i = 0; i < n; i++)
		rdmamsg_buf_free(bufs[i]);
	ok(test_side_close2(&srv, &cli, 10000), "everything closed");
	is_int(sent, NMSG, "no on_send twice, none at close");
	is_int(rdmamsg_ctx_query_pool(srv.ctx, &reg, &used), 0, "pool query");
	is_int((long long)used, 0, "no pool buffer left handed out");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "sender's context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0,
	       "receiver's context destroyed");
}

int main(void)
{
	test_setup("finmem");
	run(NULL);
	run("0");
	return done_testing();
}
