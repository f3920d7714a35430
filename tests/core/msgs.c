/* SPDX-License-Identifier: MIT */
/*
 * msgs.c -- every size from 0 to 2048 bytes and every power of two (and its
 * neighbours) up to the 1 MiB maximum, through 1 KiB eager buffers (so most
 * are fragmented); immediate values; zero-copy sends; -EMSGSIZE above the
 * maximum.  The server (child) keeps received buffers (rdmamsg_recv_keep:
 * the very buffer, or a copy for a message up to the packing limit, which
 * may have come packed with others), checks they stay intact while more
 * traffic flows, and echoes them back zero-copy in batches of WINDOW.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

#define WINDOW 4
#define EAGER  1024
#define MAXMSG (1u << 20)

struct held {
	struct rdmamsg_buf *buf;
	size_t len;
	uint32_t imm, sum;
	unsigned int flags;
};

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct held fifo[WINDOW];
	int n, done, closed, lclosed, failures, kept, copied, packed;
};

/* sum -- a checksum of len bytes */
static uint32_t sum(const unsigned char *p, size_t len)
{
	uint32_t s = 0;
	size_t i;

	for (i = 0; i < len; i++)
		s = s * 31 + p[i];
	return s;
}

/* fill -- the pattern of message seq */
static void fill(unsigned char *p, size_t len, uint32_t seq)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(seq * 13 + i * 7 + (i >> 8));
}

/* flush_fifo -- check every held buffer and echo it zero-copy */
static void flush_fifo(struct rdmamsg_ep *ep, struct srv *s)
{
	int i;

	for (i = 0; i < s->n; i++) {
		struct held *h = &s->fifo[i];
		void *d;
		int ret;

		rdmamsg_buf_get_data(h->buf, &d);
		if (sum(d, h->len) != h->sum) {
			printf("# server: a kept buffer changed (len %zu, "
			       "slot %d)\n",
			       h->len, i);
			s->failures++;
		}
		if (h->flags & RDMAMSG_RECV_IMM)
			ret = rdmamsg_send_buf_imm(ep, h->buf, h->len, h->imm,
						   NULL);
		else
			ret = rdmamsg_send_buf(ep, h->buf, h->len, NULL);
		if (ret) {
			printf("# server: echo failed: %d\n", ret);
			s->failures++;
			rdmamsg_buf_free(h->buf);
		}
	}
	s->n = 0;
}

/* srv_recv -- keep (or copy) and queue for the echo */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv *s = arg;
	struct held *h = &s->fifo[s->n++];
	void *d;

	h->len = len;
	h->imm = imm;
	h->flags = flags;
	h->sum = sum(data, len);
	if (rdmamsg_recv_keep(ep, &h->buf) == 0) {
		size_t lim = 0;

		/* the buffer that holds it, unless it may have come packed
		 * with others: then a copy of it */
		rdmamsg_buf_get_data(h->buf, &d);
		if (rdmamsg_ep_get_pack_limit(ep, &lim) ||
		    (d != data && len > lim) || sum(d, len) != h->sum)
			s->failures++;
		if (d != data)
			s->packed++;
		s->kept++;
	} else if (rdmamsg_buf_alloc(s->ctx, len ? len : 1, &h->buf) == 0) {
		rdmamsg_buf_get_data(h->buf, &d);
		memcpy(d, data, len);
		s->copied++;
	} else {
		s->failures++;
		s->n--;
		return;
	}
	/* the callback's data pointer may be reused after return; kept
	 * buffers must not: scribble on nothing, check later */
	if (s->n == WINDOW)
		flush_fifo(ep, s);
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
	struct srv *s = arg;
	int i;

	(void)status;
	for (i = 0; i < s->n; i++)
		rdmamsg_buf_free(s->fifo[i].buf);
	s->n = 0;
	rdmamsg_ep_close(ep, srv_close_cb);
	s->done = 1;
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

/* server -- child */
static int server(int wfd, void *arg)
{
	struct srv s;

	(void)arg;
	memset(&s, 0, sizeof(s));
	if (rdmamsg_ctx_create(NULL, &s.ctx))
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
	printf("# server: %d kept (%d of them packed: a copy), %d copied\n",
	       s.kept, s.packed, s.copied);
	return s.failures ? 14 : 0;
}

struct cli {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	size_t *sizes;
	uint32_t next, bad, got, sent, want;
	int wdone;
	int connected, status, closed, send_fail, done_cb;
};

/* has_imm -- even messages carry an immediate value */
static int has_imm(uint32_t seq)
{
	return seq % 2 == 0;
}

/* cli_recv -- each echo must be the message it answers */
static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct cli *c = arg;
	uint32_t seq = c->next++;
	static unsigned char ref[MAXMSG];

	(void)ep;
	if (++c->got >= c->want)
		c->wdone = 1;
	fill(ref, c->sizes[seq], seq);
	if (len != c->sizes[seq] || memcmp(ref, data, len) ||
	    !!(flags & RDMAMSG_RECV_IMM) != has_imm(seq) ||
	    (has_imm(seq) && imm != seq * 2654435761u)) {
		if (c->bad++ < 5)
			printf("# echo %u: len %zu (want %zu) flags %u imm "
			       "%u\n",
			       seq, len, c->sizes[seq], flags, imm);
	}
}

/* cli_sent -- on_send: count completions */
static void cli_sent(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)op;
	if (status)
		c->send_fail++;
	c->done_cb++;
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
	.on_recv = cli_recv,
	.on_send = cli_sent,
};

/* send_one -- message seq: copied when odd, zero-copy when even */
static int send_one(struct cli *c, uint32_t seq)
{
	static unsigned char tmp[MAXMSG];
	size_t len = c->sizes[seq];
	struct rdmamsg_buf *b;
	void *d;
	int ret;

	if (seq % 4 < 2) {
		fill(tmp, len, seq);
		/* an empty message may come without data (NULL) */
		if (has_imm(seq))
			return rdmamsg_send_imm(c->ep, len ? tmp : NULL, len,
						seq * 2654435761u, NULL);
		return rdmamsg_send(c->ep, len ? tmp : NULL, len, NULL);
	}
	ret = rdmamsg_buf_alloc(c->ctx, len ? len : 1, &b);
	if (ret)
		return ret;
	rdmamsg_buf_get_data(b, &d);
	fill(d, len, seq);
	if (has_imm(seq))
		ret = rdmamsg_send_buf_imm(c->ep, b, len, seq * 2654435761u,
					   NULL);
	else
		ret = rdmamsg_send_buf(c->ep, b, len, NULL);
	if (ret)
		rdmamsg_buf_free(b);
	return ret;
}

int main(void)
{
	struct cli c;
	struct rdmamsg_ep_attr *a;
	size_t n = 0, sz, reg, used;
	char addr[64];
	struct rdmamsg_buf *big;
	int rfd, fails = 0;
	pid_t pid;
	uint32_t i;

	test_setup("msgs");
	memset(&c, 0, sizeof(c));
	c.ctx = test_ctx();
	c.sizes = calloc(4096, sizeof(*c.sizes));
	for (sz = 0; sz <= (tap_small() ? 300 : 2048); sz++)
		c.sizes[n++] = sz;
	for (sz = 4096; sz <= MAXMSG; sz *= 2) {
		c.sizes[n++] = sz - 1;
		c.sizes[n++] = sz;
		if (sz < MAXMSG)
			c.sizes[n++] = sz + 1;
	}
	while (n % WINDOW)
		c.sizes[n++] = 3;

	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));
	a = test_ep_attr(EAGER, MAXMSG);
	/* rdmamsg_send() goes up to the large maximum (rendezvous): at the
	 * smallest, the maximum message is the limit checked below */
	rdmamsg_ep_attr_set_max_large_size(a, 4096);
	is_int(rdmamsg_connect(c.ctx, addr, a, &cli_cbs, &c, &c.ep), 0,
	       "connect");
	rdmamsg_ep_attr_delete(&a);
	test_run_until(c.ctx, &c.connected, 60000);
	is_int(c.status, 0, "connected");

	is_int(rdmamsg_send(c.ep, "x", MAXMSG + 1, NULL), -EMSGSIZE,
	       "one byte above the maximum: -EMSGSIZE");
	is_int(rdmamsg_buf_alloc(c.ctx, MAXMSG + 1, &big), 0,
	       "a buffer above the maximum");
	is_int(rdmamsg_send_buf(c.ep, big, MAXMSG + 1, NULL), -EMSGSIZE,
	       "zero-copy above the maximum: -EMSGSIZE, buffer stays ours");
	is_int(rdmamsg_buf_free(big), 0, "...and can be freed");
	for (i = 0; i < n; i += WINDOW) {
		uint32_t k;

		for (k = 0; k < WINDOW; k++) {
			int ret;

			do {
				ret = send_one(&c, i + k);
				if (ret == -EAGAIN)
					rdmamsg_ctx_progress(c.ctx);
			} while (ret == -EAGAIN);
			if (ret)
				fails++;
		}
		c.want = i + WINDOW;
		c.wdone = c.got >= c.want;
		test_run_until(c.ctx, &c.wdone, 60000);
	}
	is_int(fails, 0, "every send accepted");
	ok(c.got >= n, "all %zu echoes arrived (%u)", n, c.got);
	diag("%zu messages of 0 .. %u bytes", n, MAXMSG);
	is_int(c.bad, 0, "every echo matches: size, bytes, immediate value");
	is_int(c.send_fail, 0, "no send failed");
	rdmamsg_ctx_query_pool(c.ctx, &reg, &used);
	ok(reg <= (64u << 20), "pool stays under its limit (%zu)", reg);

	is_int(rdmamsg_ep_close(c.ep, cli_close_cb), 0, "close");
	test_run_until(c.ctx, &c.closed, 60000);
	ok(c.closed, "closed");
	is_int(c.done_cb, n, "every send completed exactly once");
	is_int(test_wait_child(pid), 0, "server: kept buffers intact");
	rdmamsg_ctx_query_pool(c.ctx, &reg, &used);
	is_int(used, 0, "every pool buffer came back");
	is_int(rdmamsg_ctx_destroy(&c.ctx), 0, "context destroyed");
	free(c.sizes);
	close(rfd);
	return done_testing();
}
