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
 * and in order, every on_send comes with 0, nothing leaks.  Then
 * (run_frag) a message of five fragments queued the same way: its first
 * goes from its own buffer, the others need copy buffers and wait; once
 * the application frees its buffers (outside any callback), the loop
 * must not block with them waiting (rdmamsg_ctx_arm(): nothing else
 * announces the memory): the rest goes at once.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "../core/util.h"

#define POOL  ((size_t)4 << 20)
#define MAXB  100000
#define NMSG  6
#define EAGER 1024
#define FRAGS 5

static struct test_side srv, cli;
static struct rdmamsg_buf *bufs[MAXB];
static int nheld, got, got_bad, sent, sent_bad;
/* the messages' lengths, in the order sent */
static const size_t lens[NMSG] = {100, 100, 2000, 3000, 50, 50};
/* run_frag's: two to take the credits, then one of FRAGS fragments */
static const size_t flens[3] = {100, 100, FRAGS *EAGER};
static const size_t *want_lens = lens;
static int want_n = NMSG;

/* fill -- message i's len bytes */
static void fill(unsigned char *p, int i, size_t len)
{
	size_t k;

	for (k = 0; k < len; k++)
		p[k] = (unsigned char)(i * 37 + k * 11);
}

static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	unsigned char want[FRAGS * EAGER];

	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	if (got >= want_n || len != want_lens[got])
		got_bad++;
	else if (fill(want, got, len), memcmp(data, want, len))
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

/* hold_pool -- the sender's application takes what its pool has left */
static void hold_pool(void)
{
	size_t sz;

	for (sz = 1; sz <= POOL; sz <<= 1)
		while (nheld < MAXB &&
		       rdmamsg_buf_alloc(cli.ctx, sz, &bufs[nheld]) == 0)
			nheld++;
}

/* free_pool -- and gives it back */
static void free_pool(void)
{
	int i;

	for (i = 0; i < nheld; i++)
		rdmamsg_buf_free(bufs[i]);
	nheld = 0;
}

/* connect_pair -- the sender (nothing inline, a 4 MiB pool, this eager
 * size) connected to a receiver of depth 2 */
static void connect_pair(struct rdmamsg_ep_attr **ra, size_t eager)
{
	struct rdmamsg_ctx_attr *ca;
	struct rdmamsg_ep_attr *sa;
	char addr[64];

	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	got = got_bad = sent = sent_bad = nheld = 0;
	if (rdmamsg_ctx_attr_new(&ca) || rdmamsg_ep_attr_new(ra))
		bail_out("attributes");
	sa = test_ep_attr(eager, 65536);
	rdmamsg_ep_attr_set_rndv_threshold(sa, 32768);
	rdmamsg_ctx_attr_set_pool_limit(ca, POOL);
	setenv("RDMAMSG_TEST_MAX_INLINE", "0", 1);
	is_int(rdmamsg_ctx_create(ca, &cli.ctx), 0,
	       "sender: a 4 MiB pool, nothing inline");
	unsetenv("RDMAMSG_TEST_MAX_INLINE");
	rdmamsg_ctx_attr_delete(&ca);
	is_int(rdmamsg_ep_attr_set_recv_depth(*ra, 2), 0,
	       "receiver's depth 2: two credits");
	srv.ctx = test_ctx();
	srv.cbs = &rcv_cbs;
	srv.attr = *ra;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0, "listen");
	is_int(rdmamsg_connect(cli.ctx, addr, sa, &snd_cbs, &cli, &cli.ep), 0,
	       "connect");
	TEST_RUN2_WHILE(&srv, &cli, !cli.up || !srv.up, 10000);
	ok(cli.up && cli.status == 0 && srv.up && srv.status == 0, "connected");
	rdmamsg_ep_attr_delete(&sa);
}

/* close_pair -- everything closed and destroyed, the pool all back */
static void close_pair(struct rdmamsg_ep_attr **ra)
{
	size_t reg = 0, used = 0;

	ok(!cli.disc && !srv.disc, "still connected");
	ok(test_side_close2(&srv, &cli, 10000), "everything closed");
	is_int(rdmamsg_ctx_query_pool(cli.ctx, &reg, &used), 0, "pool query");
	is_int((long long)used, 0, "no pool buffer left handed out");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "sender's context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0,
	       "receiver's context destroyed");
	rdmamsg_ep_attr_delete(ra);
}

/* run_whole -- queued messages of one fragment each, from their own
 * buffers while the pool is held */
static void run_whole(void)
{
	unsigned char m[3000];
	struct rdmamsg_ep_attr *ra;
	struct rdmamsg_buf *zb;
	void *zd;
	int i;

	diag("queued messages of one fragment");
	want_lens = lens;
	want_n = NMSG;
	connect_pair(&ra, 8192);
	/* the receiver does not run: its credits stay with it */
	for (i = 0; i < NMSG; i++) {
		fill(m, i, lens[i]);
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
	hold_pool();
	ok(nheld > 0 && nheld < MAXB,
	   "the sender's application holds the rest of its pool (%d "
	   "buffers)",
	   nheld);
	TEST_RUN2_WHILE(&srv, &cli, got < NMSG || sent < NMSG, 5000);
	is_int(got, NMSG, "every message arrived, the pool still held");
	is_int(got_bad, 0, "intact, in order");
	is_int(sent, NMSG, "every on_send came");
	is_int(sent_bad, 0, "in order, with 0");
	free_pool();
	close_pair(&ra);
}

/* run_frag -- a queued message of FRAGS fragments, the pool held and
 * then freed outside any callback */
static void run_frag(void)
{
	static unsigned char m[FRAGS * EAGER];
	struct rdmamsg_ep_attr *ra;
	long long t0, waited;
	int i;

	diag("a queued message of %d fragments", FRAGS);
	want_lens = flens;
	want_n = 3;
	connect_pair(&ra, EAGER);
	for (i = 0; i < 3; i++) {
		fill(m, i, flens[i]);
		ok(rdmamsg_send(cli.ep, m, flens[i], (void *)(uintptr_t)i) == 0,
		   "message %d (%zu bytes) taken", i, flens[i]);
	}
	hold_pool();
	ok(nheld > 0 && nheld < MAXB, "the sender's pool held (%d buffers)",
	   nheld);
	TEST_RUN2_WHILE(&srv, &cli, got < 2, 5000);
	TEST_RUN2_WHILE(&srv, &cli, got < 3, 200);
	is_int(got, 2, "the fragmented one waits for pool memory");
	free_pool();
	t0 = test_now_ms();
	TEST_RUN2_WHILE(&srv, &cli, got < 3 || sent < 3, 5000);
	waited = test_now_ms() - t0;
	is_int(got, 3, "it arrived once memory came back");
	ok(waited < 1000, "at once, not at a later wake-up (%lld ms)", waited);
	is_int(got_bad, 0, "intact, in order");
	is_int(sent, 3, "every on_send came");
	is_int(sent_bad, 0, "in order, with 0");
	close_pair(&ra);
}

int main(void)
{
	test_setup("queuemem");
	run_whole();
	run_frag();
	return done_testing();
}
