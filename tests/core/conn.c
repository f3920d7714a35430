/* SPDX-License-Identifier: MIT */
/*
 * conn.c -- connect, accept, reject (reason and private data arrive), no
 * listener, connect timeout, incompatible protocol version, and the bad
 * inputs of the endpoint and listener calls.  Server in a child process.
 */
#include "config.h"

#include "../tap.h"
#include "util.h"

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_conn_req *ignored;
	struct rdmamsg_conn_req *later;
	struct rdmamsg_ep *ep, *ep2;
	int done, closed, lclosed, failures, ndisc, nclosed;
};

/* srv_recv -- echo every message with its immediate value plus one */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)arg;
	if (!(flags & RDMAMSG_RECV_IMM))
		imm = 0;
	if (rdmamsg_send_imm(ep, data, len, imm + 1, NULL))
		((struct srv *)arg)->failures++;
}

/* srv_close_cb -- the accepted endpoint is gone */
static void srv_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	struct srv *s = arg;

	(void)ep;
	if (++s->nclosed == 2)
		s->closed = 1;
}

/* srv_disconnect -- the client left: close our side */
static void srv_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct srv *s = arg;

	if (status != 0) {
		printf("# server: disconnect status %d\n", status);
		s->failures++;
	}
	rdmamsg_ep_close(ep, srv_close_cb);
	if (++s->ndisc == 2)
		s->done = 1;
}

/* srv_connect -- the accepted endpoint is up */
static void srv_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	if (status) {
		printf("# server: accepted endpoint failed %d\n", status);
		s->failures++;
	}
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_connect,
	.on_recv = srv_recv,
	.on_disconnect = srv_disconnect,
};

/* srv_req -- decide by the client's private data */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep_attr *attr;

	(void)lst;
	if (len == 6 && !memcmp(pdata, "reject", 6)) {
		/* bad inputs first: they must leave the request alone */
		if (rdmamsg_conn_req_reject(req, 70000, NULL, 0) != -EINVAL ||
		    rdmamsg_conn_req_reject(req, -1, NULL, 0) != -EINVAL ||
		    rdmamsg_conn_req_reject(req, 1, "x", 33) != -EINVAL ||
		    rdmamsg_conn_req_reject(req, 1, NULL, 3) != -EINVAL ||
		    rdmamsg_conn_req_accept(req, NULL, NULL, s, &s->ep) !=
			    -EINVAL ||
		    rdmamsg_conn_req_accept(req, NULL, &srv_cbs, s, NULL) !=
			    -EINVAL) {
			printf("# server: a bad reject/accept was taken\n");
			s->failures++;
		}
		if (rdmamsg_conn_req_reject(req, 42, "go away", 7))
			s->failures++;
		return;
	}
	if (len == 5 && !memcmp(pdata, "later", 5)) {
		/* decided outside this callback, from the wake-up callback */
		s->later = req;
		rdmamsg_ctx_wakeup(s->ctx);
		return;
	}
	if (len == 6 && !memcmp(pdata, "ignore", 6)) {
		s->ignored = req; /* the listener rejects it when it closes */
		return;
	}
	if (len == 6 && !memcmp(pdata, "accept", 6)) {
		rdmamsg_ep_attr_new(&attr);
		rdmamsg_ep_attr_set_private_data(attr, "welcome", 7);
		if (rdmamsg_conn_req_accept(req, attr, &srv_cbs, s, &s->ep))
			s->failures++;
		rdmamsg_ep_attr_delete(&attr);
		return;
	}
	if (len) {
		printf("# server: unexpected private data (%zu bytes)\n", len);
		s->failures++;
	}
	rdmamsg_conn_req_reject(req, 1, NULL, 0);
}

/* lst_close_cb -- the listener is gone */
static void lst_close_cb(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	((struct srv *)arg)->lclosed = 1;
}

/* srv_wakeup -- accept the request put aside by srv_req */
static void srv_wakeup(struct rdmamsg_ctx *ctx, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep_attr *attr;

	(void)ctx;
	if (!s->later)
		return;
	rdmamsg_ep_attr_new(&attr);
	rdmamsg_ep_attr_set_private_data(attr, "later", 5);
	if (rdmamsg_conn_req_accept(s->later, attr, &srv_cbs, s, &s->ep2))
		s->failures++;
	rdmamsg_ep_attr_delete(&attr);
	s->later = NULL;
}

/* server -- the child: listen, serve two accepted clients, exit */
static int server(int wfd, void *arg)
{
	struct rdmamsg_ctx_attr *ca;
	struct srv s;
	uint16_t port = 0;
	int ret;

	(void)arg;
	memset(&s, 0, sizeof(s));
	rdmamsg_ctx_attr_new(&ca);
	rdmamsg_ctx_attr_set_wakeup_cb(ca, srv_wakeup, &s);
	ret = rdmamsg_ctx_create(ca, &s.ctx);
	rdmamsg_ctx_attr_delete(&ca);
	if (ret)
		return 10;
	if (rdmamsg_listen(s.ctx, "127.0.0.1:0", srv_req, &s, &s.lst))
		return 11;
	if (rdmamsg_listener_get_port(s.lst, &port) || !port)
		return 12;
	test_write_port(wfd, port);
	test_run_until(s.ctx, &s.done, 60000);
	if (!s.done)
		return 13;
	rdmamsg_listener_close(s.lst, lst_close_cb);
	test_run_until(s.ctx, &s.closed, 60000);
	test_run_until(s.ctx, &s.lclosed, 60000);
	if (!s.closed || !s.lclosed)
		return 14;
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 15;
	return s.failures ? 16 : 0;
}

struct cli {
	int connected, status, reason, closed, got, disc;
	char pdata[64];
	size_t pdata_len;
	uint32_t imm;
	char msg[64];
	size_t len;
};

/* cli_connect -- record the outcome */
static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	c->connected = 1;
	c->status = status;
	c->reason = reason;
	c->pdata_len = len;
	if (len)
		memcpy(c->pdata, pdata, len < 64 ? len : 64);
}

/* cli_recv -- keep the echo */
static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	c->got = 1;
	c->imm = (flags & RDMAMSG_RECV_IMM) ? imm : 0;
	c->len = len;
	memcpy(c->msg, data, len < 64 ? len : 64);
}

/* cli_disc -- the connection went down */
static void cli_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)status;
	((struct cli *)arg)->disc = 1;
}

/* cli_close_cb -- freed */
static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_disconnect = cli_disc,
};

/* attempt -- one connect with pdata; returns the endpoint */
static struct rdmamsg_ep *attempt(struct rdmamsg_ctx *ctx, const char *addr,
				  const char *pdata, unsigned int tmo,
				  struct cli *c)
{
	struct rdmamsg_ep_attr *attr;
	struct rdmamsg_ep *ep = NULL;
	int ret;

	memset(c, 0, sizeof(*c));
	rdmamsg_ep_attr_new(&attr);
	rdmamsg_ep_attr_set_private_data(attr, pdata, strlen(pdata));
	if (tmo)
		rdmamsg_ep_attr_set_connect_timeout(attr, tmo);
	ret = rdmamsg_connect(ctx, addr, attr, &cli_cbs, c, &ep);
	rdmamsg_ep_attr_delete(&attr);
	if (ret) {
		c->connected = 1;
		c->status = ret;
		return NULL;
	}
	test_run_until(ctx, &c->connected, 60000);
	return ep;
}

/* close_wait -- close ep and wait for its callback */
static void close_wait(struct rdmamsg_ctx *ctx, struct rdmamsg_ep *ep,
		       struct cli *c)
{
	if (!ep)
		return;
	c->closed = 0;
	is_int(rdmamsg_ep_close(ep, cli_close_cb), 0, "close");
	test_run_until(ctx, &c->closed, 60000);
	ok(c->closed, "close callback ran");
}

int main(void)
{
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst = NULL, *lst2 = NULL;
	struct rdmamsg_ep *ep = NULL;
	struct rdmamsg_ep_attr *attr;
	enum rdmamsg_ep_state st;
	struct cli c;
	char addr[64];
	unsigned int port;
	uint16_t p2, hp;
	size_t max;
	long long t0;
	int rfd, ret, hold;
	pid_t pid;

	test_setup("conn");
	/* the server is forked before this process opens softrdma: a child
	 * must not inherit the parent's device state */
	pid = test_fork(server, NULL, &rfd);
	ctx = test_ctx();

	/* bad inputs that need no peer */
	is_int(rdmamsg_connect(NULL, "127.0.0.1:1", NULL, &cli_cbs, &c, &ep),
	       -EINVAL, "connect NULL ctx");
	is_int(rdmamsg_connect(ctx, NULL, NULL, &cli_cbs, &c, &ep), -EINVAL,
	       "connect NULL addr");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", NULL, NULL, &c, &ep),
	       -EINVAL, "connect NULL callbacks");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", NULL, &cli_cbs, &c, NULL),
	       -EINVAL, "connect NULL out");
	is_int(rdmamsg_connect(ctx, "127.0.0.1", NULL, &cli_cbs, &c, &ep),
	       -EINVAL, "address without port");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:0", NULL, &cli_cbs, &c, &ep),
	       -EINVAL, "port 0");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:99999", NULL, &cli_cbs, &c, &ep),
	       -EINVAL, "port 99999");
	is_int(rdmamsg_connect(ctx, "[::1", NULL, &cli_cbs, &c, &ep), -EINVAL,
	       "broken IPv6 literal");
	ok(ep == NULL, "no endpoint came out of the failures");
	is_int(rdmamsg_listen(ctx, "127.0.0.1:0", NULL, NULL, &lst), -EINVAL,
	       "listen without callback");
	is_int(rdmamsg_listen(NULL, "127.0.0.1:0", NULL, NULL, &lst), -EINVAL,
	       "listen NULL ctx");
	is_int(rdmamsg_listen(ctx, "nonsense", NULL, NULL, &lst), -EINVAL,
	       "listen bad address");
	is_int(rdmamsg_listener_close(NULL, NULL), -EINVAL,
	       "listener_close(NULL)");
	is_int(rdmamsg_listener_get_port(NULL, &p2), -EINVAL, "get_port(NULL)");
	is_int(rdmamsg_conn_req_accept(NULL, NULL, &cli_cbs, NULL, &ep),
	       -EINVAL, "accept(NULL)");
	is_int(rdmamsg_conn_req_reject(NULL, 1, NULL, 0), -EINVAL,
	       "reject(NULL)");
	is_int(rdmamsg_ep_close(NULL, NULL), -EINVAL, "ep_close(NULL)");
	is_int(rdmamsg_ep_get_state(NULL, &st), -EINVAL, "get_state(NULL)");
	is_int(rdmamsg_send(NULL, "x", 1, NULL), -EINVAL, "send(NULL)");
	is_int(rdmamsg_send_buf(NULL, NULL, 1, NULL), -EINVAL,
	       "send_buf(NULL)");
	is_int(rdmamsg_recv_keep(NULL, NULL), -EINVAL, "recv_keep(NULL)");
	rdmamsg_ep_attr_new(&attr);
	is_int(rdmamsg_ep_attr_set_eager_size(attr, 10), -EINVAL,
	       "eager size 10");
	is_int(rdmamsg_ep_attr_set_max_msg_size(attr, 100), -EINVAL,
	       "max message below eager size");
	is_int(rdmamsg_ep_attr_set_max_msg_size(attr, (size_t)1 << 40), -EINVAL,
	       "max message 1 TiB");
	is_int(rdmamsg_ep_attr_set_recv_depth(attr, 1), -EINVAL,
	       "recv depth 1");
	is_int(rdmamsg_ep_attr_set_send_depth(attr, 100000), -EINVAL,
	       "send depth 100000");
	is_int(rdmamsg_ep_attr_set_connect_timeout(attr, 0), -EINVAL,
	       "connect timeout 0");
	is_int(rdmamsg_ep_attr_set_private_data(attr, "x", 33), -EINVAL,
	       "33 bytes of private data");
	is_int(rdmamsg_ep_attr_set_private_data(attr, NULL, 3), -EINVAL,
	       "private data NULL with length");
	is_int(rdmamsg_ep_attr_set_send_backlog(NULL, 1), -EINVAL,
	       "backlog NULL attr");
	rdmamsg_ep_attr_delete(&attr);

	/* our own listener: port 0 picks one; the same port twice fails */
	is_int(rdmamsg_listen(ctx, "127.0.0.1:0", (void *)srv_req, NULL, &lst),
	       0, "listen on port 0");
	is_int(rdmamsg_listener_get_port(lst, &p2), 0, "get_port");
	ok(p2 != 0, "bound to port %u", p2);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", p2);
	is_int(rdmamsg_listen(ctx, addr, (void *)srv_req, NULL, &lst2),
	       -EADDRINUSE, "second listener on that port");
	is_int(rdmamsg_listener_close(lst, NULL), 0, "listener_close");
	is_int(rdmamsg_listener_get_port(lst, &p2), -ENOTCONN,
	       "listener_get_port on a closing listener");
	is_int(rdmamsg_listener_close(lst, NULL), -EALREADY,
	       "listener_close twice");
	rdmamsg_ctx_progress(ctx);

	/* nobody listens there any more (held, so that no test running beside
	 * this one listens there; another free port if it was taken) */
	test_idle(ctx, 50);
	if (!(hp = test_hold_port(p2, &hold)) &&
	    !(hp = test_hold_port(0, &hold)))
		bail_out("a port to hold");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", hp);
	ep = attempt(ctx, addr, "accept", 30000, &c);
	is_int(c.status, -ECONNREFUSED, "no listener: -ECONNREFUSED");
	is_int(c.reason, RDMAMSG_REJECT_NO_LISTENER, "reason NO_LISTENER");
	rdmamsg_ep_get_state(ep, &st);
	is_int(st, RDMAMSG_EP_DISCONNECTED, "state DISCONNECTED");
	is_int(rdmamsg_send(ep, "x", 1, NULL), -ENOTCONN,
	       "send on a failed endpoint");
	close_wait(ctx, ep, &c);
	close(hold);

	port = test_read_port(rfd);
	ok(port != 0, "server listens on %u", port);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);

	ep = attempt(ctx, addr, "reject", 0, &c);
	is_int(c.status, -ECONNREFUSED, "rejected: -ECONNREFUSED");
	is_int(c.reason, 42, "the application's reason arrives");
	ok(c.pdata_len == 7 && !memcmp(c.pdata, "go away", 7),
	   "the reject's private data arrives");
	close_wait(ctx, ep, &c);

	t0 = test_now_ms();
	ep = attempt(ctx, addr, "ignore", 300, &c);
	is_int(c.status, -ETIMEDOUT, "undecided request: -ETIMEDOUT");
	ok(test_now_ms() - t0 < 10000,
	   "by the 300 ms timeout, not something slower (%lld ms)",
	   test_now_ms() - t0);
	close_wait(ctx, ep, &c);

	setenv("RDMAMSG_TEST_PROTO_VERSION", "9", 1);
	ep = attempt(ctx, addr, "accept", 0, &c);
	unsetenv("RDMAMSG_TEST_PROTO_VERSION");
	is_int(c.status, -EPROTO, "version 9 client: -EPROTO");
	is_int(c.reason, RDMAMSG_REJECT_VERSION, "reason VERSION");
	close_wait(ctx, ep, &c);

	/* a connecting endpoint refuses what needs a connection */
	memset(&c, 0, sizeof(c));
	is_int(rdmamsg_connect(ctx, addr, NULL, &cli_cbs, &c, &ep), 0,
	       "connect (no private data: the server refuses it)");
	rdmamsg_ep_get_state(ep, &st);
	is_int(st, RDMAMSG_EP_CONNECTING, "state CONNECTING");
	is_int(rdmamsg_send(ep, "x", 1, NULL), -ENOTCONN,
	       "send while connecting");
	is_int(rdmamsg_ep_get_max_msg_size(ep, &max), -ENOTCONN,
	       "max message size unknown before the handshake");
	is_int(rdmamsg_ep_get_max_msg_size(NULL, &max), -EINVAL,
	       "get_max_msg_size(NULL)");
	test_run_until(ctx, &c.connected, 60000);
	is_int(c.status, -ECONNREFUSED, "refused");
	close_wait(ctx, ep, &c);

	ep = attempt(ctx, addr, "later", 0, &c);
	is_int(c.status, 0, "accepted outside the request callback");
	ok(c.pdata_len == 5 && !memcmp(c.pdata, "later", 5),
	   "with that accept's private data");
	close_wait(ctx, ep, &c);

	ep = attempt(ctx, addr, "accept", 0, &c);
	is_int(c.status, 0, "accepted");
	ok(c.pdata_len == 7 && !memcmp(c.pdata, "welcome", 7),
	   "the accept's private data arrives");
	rdmamsg_ep_get_state(ep, &st);
	is_int(st, RDMAMSG_EP_CONNECTED, "state CONNECTED");
	is_int(rdmamsg_ep_get_max_msg_size(ep, &max), 0, "max message size");
	is_int(max, 1 << 20, "default maximum 1 MiB");
	is_int(rdmamsg_send(ep, NULL, 5, NULL), -EINVAL, "send NULL data");
	is_int(rdmamsg_send_imm(ep, NULL, 5, 1, NULL), -EINVAL,
	       "send_imm NULL data");
	is_int(rdmamsg_send_imm(NULL, "x", 1, 1, NULL), -EINVAL,
	       "send_imm NULL endpoint");
	is_int(rdmamsg_send_buf_imm(ep, NULL, 1, 1, NULL), -EINVAL,
	       "send_buf_imm NULL buffer");
	{
		struct rdmamsg_buf *b;
		void *d;

		rdmamsg_buf_alloc(ctx, 100, &b);
		rdmamsg_buf_get_data(b, &d);
		is_int(rdmamsg_send_buf(ep, b, 200, NULL), -EINVAL,
		       "zero-copy length above the buffer's size");
		is_int(rdmamsg_buf_get_data(b, &d), 0,
		       "the buffer is still the caller's");
		rdmamsg_buf_free(b);
		is_int(rdmamsg_send_buf(ep, b, 10, NULL), -EINVAL,
		       "zero-copy of a freed buffer");
	}
	{
		/* rdmamsg_send() takes up to the large maximum (by
		 * rendezvous above its threshold) */
		struct rdmamsg_protocols pr;

		rdmamsg_ep_get_protocols(ep, &pr);
		ok(pr.max_large >= max &&
			   rdmamsg_send(ep, "x", pr.max_large + 1, NULL) ==
				   -EMSGSIZE,
		   "send above the maximum");
	}
	is_int(rdmamsg_send_imm(ep, "hello", 5, 41, NULL), 0, "send hello");
	test_run_until(ctx, &c.got, 60000);
	ok(c.got && c.len == 5 && !memcmp(c.msg, "hello", 5), "echo arrives");
	is_int(c.imm, 42, "immediate value went through both ways");
	{
		struct rdmamsg_buf *b;

		is_int(rdmamsg_recv_keep(ep, &b), -EINVAL,
		       "recv_keep outside on_recv");
	}
	c.closed = 0;
	is_int(rdmamsg_ep_close(ep, cli_close_cb), 0, "close");
	is_int(rdmamsg_ep_close(ep, cli_close_cb), -EALREADY, "close twice");
	is_int(rdmamsg_send(ep, "x", 1, NULL), -ENOTCONN, "send after close");
	test_run_until(ctx, &c.closed, 60000);
	ok(c.closed, "closed");

	ret = test_wait_child(pid);
	is_int(ret, 0, "server exits cleanly");
	close(rfd);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	return done_testing();
}
