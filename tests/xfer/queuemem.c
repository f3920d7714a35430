/* SPDX-License-Identifier: MIT */
/*
 * queuemem.c -- messages queued for want of credits go once the credits
 * come back, whatever the pool holds then: a sender whose QPs carry
 * nothing inline (RDMAMSG_TEST_MAX_INLINE=0, a device without
 * max_inline_data, or any message above a device's inline size) puts a
 * send's header in the copy buffer of its send ring's slot, taken from the
 * pool on the slot's first use.  The sender uses its two credits, queues
 * a copied message, a zero-copy one and two that are packed, and then its
 * application takes every pool buffer left; the receiver returns the
 * credits.  Each queued message is in a registered buffer with room for
 * the header in front (pool.c), so it goes from there: all arrive, intact
 * and in order, every on_send comes with 0, nothing leaks.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "../core/util.h"

#define POOL ((size_t)4 << 20)
#define MAXB 100000
#define NMSG 6

static struct test_side srv, cli;
static struct rdmamsg_buf *bufs[MAXB];
static int nheld, got, got_bad, sent, sent_bad;
/* the messages' lengths, in the order sent */
static const size_t lens[NMSG] = {100, 100, 2000, 3000, 50, 50};

/* fill -- message i's bytes */
static void fill(unsigned char *p, int i)
{
	size_t k;

	for (k = 0; k < lens[i]; k++)
		p[k] = (unsigned char)(i * 37 + k * 11);
}

static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	unsigned char want[3000];

	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	if (got >= NMSG || len != lens[got])
		got_bad++;
	else if (fill(want, got), memcmp(data, want, len))
		got_bad++;
	got++;
}

static void on_send(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	(void)ep;
	(void)arg;
	if (status || (uintptr_t)op != (uintptr_t)sent)
		sent_bad++;
	sent++;
}

static const struct rdmamsg_ep_cbs snd_cbs = {
	.on_connect = test_side_on_connect,
	.on_disconnect = test_side_on_disconnect,
	.on_send = on_send,
};

static const struct rdmamsg_ep_cbs rcv_cbs = {
	.on_connect = test_side_on_connect,
	.on_disconnect = test_side_on_disconnect,
	.on_recv = on_recv,
};

int main(void)
{
	unsigned char m[3000];
	struct rdmamsg_ctx_attr *ca;
	struct rdmamsg_ep_attr *ra;
	struct rdmamsg_buf *zb;
	size_t reg = 0, used = 0, sz;
	void *zd;
	char addr[64];
	int i;

	test_setup("queuemem");
	if (rdmamsg_ctx_attr_new(&ca) || rdmamsg_ep_attr_new(&ra))
		bail_out("attributes");
	rdmamsg_ctx_attr_set_pool_limit(ca, POOL);
	setenv("RDMAMSG_TEST_MAX_INLINE", "0", 1);
	is_int(rdmamsg_ctx_create(ca, &cli.ctx), 0,
	       "sender: a 4 MiB pool, nothing inline");
	unsetenv("RDMAMSG_TEST_MAX_INLINE");
	rdmamsg_ctx_attr_delete(&ca);
	is_int(rdmamsg_ep_attr_set_recv_depth(ra, 2), 0,
	       "receiver's depth 2: two credits");
	srv.ctx = test_ctx();
	srv.cbs = &rcv_cbs;
	srv.attr = ra;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0, "listen");
	is_int(rdmamsg_connect(cli.ctx, addr, NULL, &snd_cbs, &cli, &cli.ep), 0,
	       "connect");
	TEST_RUN2_WHILE(&srv, &cli, !cli.up || !srv.up, 10000);
	ok(cli.up && cli.status == 0 && srv.up && srv.status == 0, "connected");

	/* the receiver does not run: its credits stay with it */
	for (i = 0; i < NMSG; i++) {
		fill(m, i);
		if (i == 3) {
			if (rdmamsg_buf_alloc(cli.ctx, lens[i], &zb) ||
			    rdmamsg_buf_get_data(zb, &zd))
				bail_out("a buffer for the zero-copy send");
			memcpy(zd, m, lens[i]);
			ok(rdmamsg_send_buf(cli.ep, zb, lens[i],
					    (void *)(uintptr_t)i) == 0,
			   "message %d (%zu bytes, zero-copy) taken", i,
			   lens[i]);
			continue;
		}
		ok(rdmamsg_send(cli.ep, m, lens[i], (void *)(uintptr_t)i) == 0,
		   "message %d (%zu bytes) taken", i, lens[i]);
	}
	for (sz = 1; sz <= POOL; sz <<= 1)
		while (nheld < MAXB &&
		       rdmamsg_buf_alloc(cli.ctx, sz, &bufs[nheld]) == 0)
			nheld++;
	ok(nheld > 0 && nheld < MAXB,
	   "the sender's application holds the rest of its pool (%d "
	   "buffers)",
	   nheld);
	TEST_RUN2_WHILE(&srv, &cli, got < NMSG || sent < NMSG, 5000);
	is_int(got, NMSG, "every message arrived, the pool still held");
	is_int(got_bad, 0, "intact, in order");
	is_int(sent, NMSG, "every on_send came");
	is_int(sent_bad, 0, "in order, with 0");
	for (i = 0; i < nheld; i++)
		rdmamsg_buf_free(bufs[i]);
	ok(!cli.disc && !srv.disc, "still connected");
	ok(test_side_close2(&srv, &cli, 10000), "everything closed");
	is_int(rdmamsg_ctx_query_pool(cli.ctx, &reg, &used), 0, "pool query");
	is_int((long long)used, 0, "no pool buffer left handed out");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "sender's context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0,
	       "receiver's context destroyed");
	rdmamsg_ep_attr_delete(&ra);
	return done_testing();
}
