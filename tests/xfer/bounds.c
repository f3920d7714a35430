/* SPDX-License-Identifier: MIT */
/*
 * bounds.c -- what a new user hits at the edges: every public call taking
 * a length refuses any length (SIZE_MAX included) before arithmetic;
 * rdmamsg_request/rdmamsg_respond's -EAGAIN (pool short) is followed by
 * on_writable and the retry works; listening on an address that is not on
 * the host is -ENODEV; the new attributes check their arguments; a clean
 * close reads as 0 at the peer.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"

/* ---- server (child) ------------------------------------------------ */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	int done, closed, failures;
};

/* srv_request -- refuse impossible lengths, then answer (echo) */
static void srv_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
			void *data, size_t len, void *arg)
{
	struct srv *s = arg;
	char big[64];

	(void)ep;
	memset(big, 0, sizeof(big));
	if (rdmamsg_respond(req, big, SIZE_MAX) != -EMSGSIZE ||
	    rdmamsg_respond(req, big, SIZE_MAX - 40) != -EMSGSIZE ||
	    rdmamsg_respond(req, big, SIZE_MAX - 100000) != -EMSGSIZE) {
		printf("# server: a respond of SIZE_MAX was taken\n");
		s->failures++;
	}
	if (rdmamsg_respond(req, data, len)) {
		printf("# server: respond failed\n");
		s->failures++;
	}
}

#define BIG ((size_t)64 << 20) /* the documented largest message */
#define MIB ((size_t)1 << 20)

/* srv_recv -- "stall": stop progressing for a while (a slow peer); a
 * message of BIG bytes: check every byte, say so */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	const unsigned char *p = data;
	size_t i;

	(void)imm;
	(void)flags;
	(void)arg;
	if (len == 5 && !memcmp(data, "stall", 5))
		usleep(1500 * 1000);
	if (len == 5 && !memcmp(data, "1MiB!", 5)) {
		unsigned char *m = malloc(MIB);

		for (i = 0; m && i < MIB; i++)
			m[i] = (unsigned char)(i * 13 + i / 8192);
		if (!m || rdmamsg_send(ep, m, MIB, NULL))
			((struct srv *)arg)->failures++;
		free(m);
	}
	if (len == BIG) {
		for (i = 0;
		     i < len && p[i] == (unsigned char)(i * 7 + i / 4096); i++)
			;
		rdmamsg_send(ep, i == len ? "big-ok" : "big-bad", 6, NULL);
	}
}

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct srv *)arg)->closed++;
}

/* srv_disc -- the client closed: cleanly, so the status is 0 */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct srv *s = arg;

	if (status) {
		printf("# server: disconnect status %d\n", status);
		s->failures++;
	}
	rdmamsg_ep_close(ep, srv_closed);
	s->done = 1;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	rdmamsg_ep_attr_new(&a);
	rdmamsg_ep_attr_set_on_request(a, srv_request);
	rdmamsg_ep_attr_set_max_msg_size(a, BIG);
	if (rdmamsg_conn_req_accept(req, a, &srv_cbs, s, &ep))
		s->failures++;
	rdmamsg_ep_attr_delete(&a);
}

static int server(int wfd, void *arg)
{
	struct srv s;
	int t;

	(void)arg;
	memset(&s, 0, sizeof(s));
	if (rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	if (test_listen_report(s.ctx, srv_req, &s, &s.lst, wfd))
		return 11;
	test_run_until(s.ctx, &s.done, 60000);
	s.done = 0;
	test_run_until(s.ctx, &s.done, 60000); /* the second client */
	rdmamsg_listener_close(s.lst, NULL);
	/* both endpoints closed (the first one's close alone let a loaded
	 * run destroy the context while the second was still closing) */
	for (t = 0; s.closed < 2 && t < 500; t++)
		test_idle(s.ctx, 10);
	test_idle(s.ctx, 20);
	if (!s.done || s.closed != 2)
		return 12;
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 13;
	return s.failures ? 14 : 0;
}

/* ---- client -------------------------------------------------------- */

struct cli {
	int up, status, writable, resp, resp_status, closed, big, mib, disc;
	size_t resp_len;
};

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	c->up = 1;
	c->status = status;
}

static void cli_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->writable++;
}

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->closed = 1;
}

static void cli_response(struct rdmamsg_ep *ep, int status, void *data,
			 size_t len, void *req_arg)
{
	struct cli *c = req_arg;

	(void)ep;
	(void)data;
	c->resp++;
	c->resp_status = status;
	c->resp_len = len;
}

#define NHOLD 4096
static struct rdmamsg_buf *hold[NHOLD];
static unsigned int nhold;

/* mib_ok -- the server's 1 MiB pattern */
static int mib_ok(const unsigned char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len && p[i] == (unsigned char)(i * 13 + i / 8192); i++)
		;
	return len == MIB && i == len;
}

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct cli *c = arg;
	struct rdmamsg_buf *kb;
	void *kd;

	(void)imm;
	(void)flags;
	if (len == MIB) {
		/* reassembled though the pool was full; then kept */
		c->mib = mib_ok(data, len) ? 1 : -1;
		while (nhold)
			rdmamsg_buf_free(hold[--nhold]);
		if (rdmamsg_recv_keep(ep, &kb) ||
		    rdmamsg_buf_get_data(kb, &kd) || !mib_ok(kd, MIB))
			c->mib = -2;
		else
			rdmamsg_buf_free(kb);
		return;
	}
	if (len == 6 && !memcmp(data, "big-ok", 6))
		((struct cli *)arg)->big = 1;
	else if (len == 6)
		((struct cli *)arg)->big = -1;
}

static void cli_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	printf("# client: disconnected %d\n", status);
	((struct cli *)arg)->disc = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_writable = cli_writable,
	.on_disconnect = cli_disc,
};

int main(void)
{
	struct rdmamsg_ctx_attr *ca;
	struct rdmamsg_ep_attr *ea;
	struct rdmamsg_listener *lst = NULL;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	struct rdmamsg_rmr *rmr = NULL;
	struct rdmamsg_buf *zb;
	struct cli c;
	char addr[64], buf[128];
	void *zd;
	uint64_t id;
	unsigned int i;
	int rfd, ret;
	pid_t pid;

	test_setup("bounds");
	/* the server first: a child must not inherit this process's device */
	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));

	/* argument checks of the attributes this issue added */
	is_int(rdmamsg_ctx_attr_new(&ca), 0, "ctx attr");
	is_int(rdmamsg_ctx_attr_set_listen_backlog(ca, 0), -EINVAL,
	       "listen backlog 0");
	is_int(rdmamsg_ctx_attr_set_listen_backlog(ca, 70000), -EINVAL,
	       "listen backlog 70000");
	is_int(rdmamsg_ctx_attr_set_listen_backlog(NULL, 10), -EINVAL,
	       "listen backlog NULL");
	is_int(rdmamsg_ctx_attr_set_listen_backlog(ca, 4096), 0,
	       "listen backlog 4096");
	is_int(rdmamsg_ctx_attr_set_max_pending(ca, 0), -EINVAL,
	       "max pending 0");
	is_int(rdmamsg_ctx_attr_set_max_pending(NULL, 5), -EINVAL,
	       "max pending NULL");
	is_int(rdmamsg_ctx_attr_set_max_pending(ca, 64), 0, "max pending 64");
	is_int(rdmamsg_ep_attr_new(&ea), 0, "ep attr");
	is_int(rdmamsg_ep_attr_set_linger(NULL, 1), -EINVAL, "linger NULL");
	is_int(rdmamsg_ep_attr_set_linger(ea, 1), 0, "linger on");
	rdmamsg_ep_attr_delete(&ea);

	/* a small pool: the test exhausts it on purpose */
	is_int(rdmamsg_ctx_attr_set_pool_limit(ca, 2 << 20), 0, "pool 2 MiB");
	if (rdmamsg_ctx_create(ca, &ctx))
		bail_out("no context");
	rdmamsg_ctx_attr_delete(&ca);

	is_int(rdmamsg_listen(ctx, "10.231.255.254:0", (void *)srv_req, NULL,
			      &lst),
	       -ENODEV, "listen on an address not on this host: -ENODEV");
	ok(lst == NULL, "no listener made");

	memset(&c, 0, sizeof(c));
	is_int(rdmamsg_connect(ctx, addr, NULL, &cli_cbs, &c, &ep), 0,
	       "connect");
	test_run_until(ctx, &c.up, 60000);
	is_int(c.status, 0, "connected");

	/* lengths no arithmetic may see */
	memset(buf, 'b', sizeof(buf));
	is_int(rdmamsg_request(ep, buf, SIZE_MAX, 1000, cli_response, &c, &id),
	       -EMSGSIZE, "request of SIZE_MAX bytes");
	is_int(rdmamsg_request(ep, buf, SIZE_MAX - 40, 1000, cli_response, &c,
			       &id),
	       -EMSGSIZE, "request of SIZE_MAX - 40 bytes");
	is_int(rdmamsg_request(ep, buf, SIZE_MAX - 1000000, 1000, cli_response,
			       &c, &id),
	       -EMSGSIZE, "request of SIZE_MAX - 10^6 bytes");
	is_int(rdmamsg_send(ep, buf, SIZE_MAX, NULL), -EMSGSIZE,
	       "send of SIZE_MAX bytes");
	is_int(rdmamsg_send_imm(ep, buf, SIZE_MAX - 8, 1, NULL), -EMSGSIZE,
	       "send_imm of SIZE_MAX - 8 bytes");
	is_int(rdmamsg_send_large(ep, buf, SIZE_MAX, NULL), -EMSGSIZE,
	       "send_large of SIZE_MAX bytes");
	is_int(rdmamsg_buf_alloc(ctx, SIZE_MAX, &zb), -EMSGSIZE,
	       "buf_alloc of SIZE_MAX bytes");
	is_int(rdmamsg_rmr_import(buf, 31, &rmr), -EINVAL,
	       "import of a short blob");
	is_int(rdmamsg_rmr_import(buf, SIZE_MAX, &rmr), -EINVAL,
	       "import of junk claiming SIZE_MAX bytes");
	ok(rmr == NULL, "nothing imported");
	{
		struct rdmamsg_mr *mr = NULL;

		is_int(rdmamsg_mr_reg(ctx, buf, SIZE_MAX,
				      RDMAMSG_ACCESS_REMOTE_READ, &mr),
		       -EINVAL, "mr_reg of SIZE_MAX bytes (wraps)");
		ok(mr == NULL, "nothing registered");
	}

	/* the server refuses SIZE_MAX responses, then answers */
	is_int(rdmamsg_request(ep, "ping", 4, 5000, cli_response, &c, &id), 0,
	       "request");
	test_run_until(ctx, &c.resp, 60000);
	ok(c.resp == 1 && c.resp_status == 0 && c.resp_len == 4,
	   "response arrives (%d, %d, %zu)", c.resp, c.resp_status, c.resp_len);

	/* -EAGAIN from a short pool is followed by on_writable: the peer
	 * stalls, so a zero-copy send stays in flight; the pool is then
	 * exhausted, so the request finds no buffer */
	is_int(rdmamsg_send(ep, "stall", 5, NULL), 0, "the server stalls");
	is_int(rdmamsg_buf_alloc(ctx, 1000, &zb), 0, "a zero-copy buffer");
	rdmamsg_buf_get_data(zb, &zd);
	memset(zd, 'z', 1000);
	is_int(rdmamsg_send_buf(ep, zb, 1000, NULL), 0,
	       "a zero-copy send in flight");
	for (i = 4096; i >= 64; i /= 4)
		while (nhold < NHOLD &&
		       rdmamsg_buf_alloc(ctx, i, &hold[nhold]) == 0)
			nhold++;
	ok(nhold > 0 && nhold < NHOLD, "pool exhausted with %u buffers", nhold);
	c.writable = 0;
	c.resp = 0;
	{
		/* several pieces are gathered into a pool buffer first: a
		 * short pool is -EAGAIN there too, as for rdmamsg_send() */
		struct iovec iov[2] = {{buf, 50}, {buf + 50, 50}};

		is_int(rdmamsg_sendv(ep, iov, 2, NULL), -EAGAIN,
		       "sendv on an exhausted pool: -EAGAIN");
	}
	ret = rdmamsg_request(ep, buf, 100, 10000, cli_response, &c, &id);
	is_int(ret, -EAGAIN, "request on an exhausted pool: -EAGAIN");
	for (i = 0; i < nhold; i++)
		rdmamsg_buf_free(hold[i]);
	test_run_until(ctx, &c.writable, 60000);
	ok(c.writable >= 1, "on_writable follows the -EAGAIN");
	is_int(rdmamsg_request(ep, buf, 100, 10000, cli_response, &c, &id), 0,
	       "the request goes out now");
	test_run_until(ctx, &c.resp, 60000);
	ok(c.resp == 1 && c.resp_status == 0 && c.resp_len == 100,
	   "and is answered");

	/* a fragmented message that the full pool cannot reassemble: the
	 * connection survives, the message arrives whole */
	nhold = 0;
	for (i = 4096; i >= 64; i /= 4)
		while (nhold < NHOLD &&
		       rdmamsg_buf_alloc(ctx, i, &hold[nhold]) == 0)
			nhold++;
	ok(nhold > 0, "pool exhausted again (%u buffers)", nhold);
	is_int(rdmamsg_send(ep, "1MiB!", 5, NULL), 0, "ask for 1 MiB");
	test_run_until(ctx, &c.mib, 60000);
	is_int(c.mib, 1, "1 MiB arrived intact on a full pool, and was kept");
	ok(!c.disc, "no -ENOBUFS: still connected");
	while (nhold)
		rdmamsg_buf_free(hold[--nhold]);

	is_int(rdmamsg_ep_close(ep, cli_closed), 0, "close");
	test_run_until(ctx, &c.closed, 60000);
	ok(c.closed, "closed");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "small-pool context destroyed");

	/* the documented largest message on a context with the defaults */
	{
		unsigned char *big = malloc(BIG);
		size_t k;

		if (!big || rdmamsg_ctx_create(NULL, &ctx))
			bail_out("no memory or context");
		for (k = 0; k < BIG; k++)
			big[k] = (unsigned char)(k * 7 + k / 4096);
		ea = test_ep_attr(8192, BIG);
		memset(&c, 0, sizeof(c));
		is_int(rdmamsg_connect(ctx, addr, ea, &cli_cbs, &c, &ep), 0,
		       "connect with a 64 MiB maximum");
		rdmamsg_ep_attr_delete(&ea);
		test_run_until(ctx, &c.up, 60000);
		is_int(c.status, 0, "connected");
		is_int(rdmamsg_send(ep, big, BIG, NULL), 0,
		       "a 64 MiB send on the default pool");
		free(big);
		test_run_until(ctx, &c.big, 60000);
		is_int(c.big, 1, "the peer got all 64 MiB intact");
		is_int(rdmamsg_ep_close(ep, cli_closed), 0, "close");
		test_run_until(ctx, &c.closed, 60000);
		ok(c.closed, "closed");
	}
	is_int(test_wait_child(pid), 0,
	       "server: SIZE_MAX responses refused, clean close read as 0");
	close(rfd);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	return done_testing();
}
