/* SPDX-License-Identifier: MIT */
/*
 * pool_reuse.c -- pool memory one size class grew serves another later: with
 * an 8 MiB pool limit on both sides, a burst of 64 KiB messages fills the
 * pool with 64 KiB slabs; once it drained, 1 MiB messages must still go out
 * (idle slabs are released to make room) and arrive intact, and the pool
 * stays under its limit.  Before the fix the 1 MiB send got -EAGAIN forever
 * with nothing in flight, and on_writable never came.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

#define EAGER  1024
#define MAXMSG (1u << 20)
#define LIMIT  ((size_t)8 << 20)
#define MID    (64u << 10)
#define NBURST 400
#define NBIG   6

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	uint32_t n;
	int done, closed, lclosed, failures;
	size_t max_reg;
};

/* fill -- the pattern of message seq */
static void fill(unsigned char *p, size_t len, uint32_t seq)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(seq * 13 + i * 7 + (i >> 8));
}

/* pool_ctx -- a context whose pool may register LIMIT bytes */
static struct rdmamsg_ctx *pool_ctx(void)
{
	struct rdmamsg_ctx_attr *a;
	struct rdmamsg_ctx *ctx = NULL;

	if (rdmamsg_ctx_attr_new(&a))
		return NULL;
	rdmamsg_ctx_attr_set_pool_limit(a, LIMIT);
	if (rdmamsg_ctx_create(a, &ctx))
		ctx = NULL;
	rdmamsg_ctx_attr_delete(&a);
	return ctx;
}

/* srv_recv -- message n must carry pattern n */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	static unsigned char ref[MAXMSG];
	struct srv *s = arg;
	size_t reg, used;

	(void)ep;
	(void)imm;
	(void)flags;
	fill(ref, len, s->n);
	if (memcmp(ref, data, len)) {
		printf("# server: message %u (%zu bytes) corrupt\n", s->n, len);
		s->failures++;
	}
	s->n++;
	rdmamsg_ctx_query_pool(s->ctx, &reg, &used);
	if (reg > s->max_reg)
		s->max_reg = reg;
}

/* srv_close_cb -- close callback: note it */
static void srv_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct srv *)arg)->closed = 1;
}

/* lst_close_cb -- listener close callback: note it */
static void lst_close_cb(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	((struct srv *)arg)->lclosed = 1;
}

/* srv_disc -- the client is done */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	rdmamsg_ep_close(ep, srv_close_cb);
	((struct srv *)arg)->done = 1;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

/* srv_req -- accept */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep_attr *a = test_ep_attr(EAGER, MAXMSG);
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, a, &srv_cbs, s, &ep))
		s->failures++;
	rdmamsg_ep_attr_delete(&a);
}

/* server -- child: check every message, then exit with the verdict */
static int server(int wfd, void *arg)
{
	struct srv s;

	(void)arg;
	memset(&s, 0, sizeof(s));
	s.ctx = pool_ctx();
	if (!s.ctx)
		return 10;
	if (test_listen_report(s.ctx, srv_req, &s, &s.lst, wfd))
		return 11;
	test_run_until(s.ctx, &s.done, 120000);
	rdmamsg_listener_close(s.lst, lst_close_cb);
	test_run_until(s.ctx, &s.closed, 60000);
	test_run_until(s.ctx, &s.lclosed, 60000);
	if (!s.done || !s.closed || !s.lclosed)
		return 12;
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 13;
	printf("# server: %u messages, pool at most %zu bytes\n", s.n,
	       s.max_reg);
	if (s.max_reg > LIMIT)
		return 15;
	return s.failures ? 14 : 0;
}

static unsigned char tmp[MAXMSG];

struct cli {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	uint32_t sent, done_cb;
	int connected, status, closed, send_fail, writable, drained;
};

/* cli_sent -- on_send: count completions */
static void cli_sent(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)op;
	if (status)
		c->send_fail++;
	if (++c->done_cb == c->sent)
		c->drained = 1;
}

/* cli_writable -- on_writable: note it */
static void cli_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->writable = 1;
}

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

/* send_wait -- send message c->sent of len bytes; -EAGAIN waits for
 * on_writable (bounded), anything else is the answer */
static int send_wait(struct cli *c, size_t len, int ms)
{
	long long end = test_now_ms() + ms;
	int ret;

	fill(tmp, len, c->sent);
	for (;;) {
		c->writable = 0;
		ret = rdmamsg_send(c->ep, tmp, len, NULL);
		if (ret != -EAGAIN)
			break;
		if (test_now_ms() >= end)
			return -ETIMEDOUT;
		test_run_until(c->ctx, &c->writable,
			       (int)(end - test_now_ms()));
	}
	if (ret == 0)
		c->sent++;
	return ret;
}

int main(void)
{
	struct cli c;
	struct rdmamsg_ep_attr *a;
	size_t reg, used, max_reg = 0;
	char addr[64];
	int rfd, ret, eagain = 0, big_fail = 0;
	pid_t pid;
	uint32_t i;

	test_setup("pool_reuse");
	memset(&c, 0, sizeof(c));
	c.ctx = pool_ctx();
	if (!c.ctx)
		bail_out("no context with a pool limit");

	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));
	a = test_ep_attr(EAGER, MAXMSG);
	is_int(rdmamsg_connect(c.ctx, addr, a, &cli_cbs, &c, &c.ep), 0,
	       "connect");
	rdmamsg_ep_attr_delete(&a);
	test_run_until(c.ctx, &c.connected, 60000);
	is_int(c.status, 0, "connected");

	/* a burst of 64 KiB messages: queued until the pool is full */
	for (i = 0; i < NBURST; i++) {
		ret = send_wait(&c, MID, 10000);
		if (ret)
			break;
		rdmamsg_ctx_query_pool(c.ctx, &reg, &used);
		if (reg > max_reg)
			max_reg = reg;
	}
	ok(ret == 0, "%u 64 KiB messages accepted (%d)", c.sent, ret);
	rdmamsg_ctx_query_pool(c.ctx, &reg, &used);
	diag("after the burst: %zu registered, %zu in use", reg, used);
	c.drained = c.done_cb == c.sent;
	test_run_until(c.ctx, &c.drained, 60000);
	ok(c.drained, "the burst drained (%u of %u)", c.done_cb, c.sent);

	/* now another class: must not wait forever for memory */
	for (i = 0; i < NBIG; i++) {
		ret = send_wait(&c, MAXMSG, 10000);
		if (ret) {
			if (big_fail++ < 3)
				diag("1 MiB message %u: %s", i,
				     rdmamsg_strerror(ret));
		}
		rdmamsg_ctx_query_pool(c.ctx, &reg, &used);
		if (reg > max_reg)
			max_reg = reg;
		if (ret == -EAGAIN)
			eagain++;
	}
	is_int(big_fail, 0, "every 1 MiB message accepted");
	c.drained = c.done_cb == c.sent;
	test_run_until(c.ctx, &c.drained, 60000);
	ok(c.drained, "all sends completed (%u of %u)", c.done_cb, c.sent);
	is_int(c.send_fail, 0, "no send failed");
	ok(max_reg <= LIMIT, "pool stayed under its limit (%zu <= %zu)",
	   max_reg, LIMIT);

	/* with every buffer taken by the caller, nothing of this endpoint is
	 * in flight: the send reports -ENOMEM, never a hopeless -EAGAIN.
	 * The library may still be finishing a transfer whose on_send ran
	 * (a rendezvous source's window is invalidated after it, and its
	 * buffer freed): first the pool's use settles */
	{
		struct rdmamsg_buf *held[64];
		int nh = 0, k, still = 0;
		size_t r2, u2, prev = SIZE_MAX;
		long long end = test_now_ms() + 10000;

		while (still < 3 && test_now_ms() < end) {
			volatile int never = 0;

			test_run_until(c.ctx, &never, 10);
			rdmamsg_ctx_query_pool(c.ctx, &r2, &u2);
			still = u2 == prev ? still + 1 : 0;
			prev = u2;
		}
		while (nh < 64 &&
		       rdmamsg_buf_alloc(c.ctx, MAXMSG, &held[nh]) == 0)
			nh++;
		ok(nh > 0 && nh < 64, "the caller took the pool (%d MiB)", nh);
		ret = rdmamsg_send(c.ep, tmp, MAXMSG, NULL);
		is_int(ret, -ENOMEM,
		       "no memory and nothing in flight: -ENOMEM");
		for (k = 0; k < nh; k++)
			rdmamsg_buf_free(held[k]);
		ret = send_wait(&c, MAXMSG, 10000);
		is_int(ret, 0, "after freeing, a 1 MiB send goes again");
		c.drained = c.done_cb == c.sent;
		test_run_until(c.ctx, &c.drained, 60000);
		ok(c.drained, "and completes");
	}

	is_int(rdmamsg_ep_close(c.ep, cli_close_cb), 0, "close");
	test_run_until(c.ctx, &c.closed, 60000);
	ok(c.closed, "closed");
	is_int(test_wait_child(pid), 0,
	       "server: every message intact, pool under its limit");
	rdmamsg_ctx_query_pool(c.ctx, &reg, &used);
	is_int(used, 0, "every pool buffer came back");
	is_int(rdmamsg_ctx_destroy(&c.ctx), 0, "context destroyed");
	close(rfd);
	return done_testing();
}
