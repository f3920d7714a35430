/* SPDX-License-Identifier: MIT */
/*
 * close.c -- rdmamsg_ep_close() with operations in flight: every accepted
 * send (copied, zero-copy, fragmented, queued in the backlog) completes
 * exactly once, before the close callback, with 0 or -ECANCELED; no
 * callback comes after it; pool memory all comes back.  Also closing while
 * still connecting.
 */
#include "config.h"

#include "../tap.h"
#include "peer.h"

#define NOPS 4096

struct cli {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	unsigned char seen[NOPS];
	uint64_t accepted, ok_, canceled, other, dup, after_close;
	int connected, status, closed, connect_calls;
};

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
	c->connect_calls++;
	c->status = status;
}

/* cli_sent -- on_send: count each completion */
static void cli_sent(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct cli *c = arg;
	uintptr_t i = (uintptr_t)op;

	(void)ep;
	if (c->closed)
		c->after_close++;
	if (i >= NOPS || c->seen[i]++)
		c->dup++;
	if (status == 0)
		c->ok_++;
	else if (status == -ECANCELED)
		c->canceled++;
	else
		c->other++;
}

/* cli_close_cb -- close callback: note it */
static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->closed++;
}

/* ignore_req -- leave the request undecided */
static void ignore_req(struct rdmamsg_listener *lst,
		       struct rdmamsg_conn_req *req, const void *pdata,
		       size_t len, void *arg)
{
	(void)lst;
	(void)req;
	(void)pdata;
	(void)len;
	(void)arg;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_send = cli_sent,
};

int main(void)
{
	struct srv_cfg cfg = {.stall_ms = 700, .recv_depth = 8};
	static char big[100000];
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_buf *b;
	static struct cli c;
	size_t reg, used;
	char addr[64];
	int rfd, ret;
	uint64_t i;
	pid_t pid;

	test_setup("close");
	c.ctx = test_ctx();

	/* close while connecting (to our own listener, which never
	 * decides): no on_connect, one close callback */
	{
		struct rdmamsg_listener *lst;
		uint16_t port;

		is_int(rdmamsg_listen(c.ctx, "127.0.0.1:0", ignore_req, NULL,
				      &lst),
		       0, "a listener that never decides");
		rdmamsg_listener_get_port(lst, &port);
		snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
		is_int(rdmamsg_connect(c.ctx, addr, NULL, &cli_cbs, &c, &c.ep),
		       0, "connect");
		test_idle(c.ctx, 50);
		rdmamsg_listener_close(lst, NULL);
	}
	is_int(rdmamsg_ep_close(c.ep, cli_close_cb), 0,
	       "close right away (still connecting)");
	ok(!c.closed, "the close callback is not run from inside close");
	test_idle(c.ctx, 300);
	is_int(c.closed, 1, "close callback ran once");
	is_int(c.connect_calls, 0, "on_connect never ran for it");
	c.closed = 0;
	pid = test_fork_server(srv_main, &cfg, &rfd, addr, sizeof(addr));

	/* now a real connection to a server that stops progressing */
	rdmamsg_ep_attr_new(&a);
	rdmamsg_ep_attr_set_send_backlog(a, 32);
	rdmamsg_ep_attr_set_close_timeout(a, 500);
	ret = rdmamsg_connect(c.ctx, addr, a, &cli_cbs, &c, &c.ep);
	is_int(ret, 0, "connect again");
	rdmamsg_ep_attr_delete(&a);
	if (ret) /* c.ep is the endpoint closed above */
		bail_out("no server at %s", addr);
	test_run_until(c.ctx, &c.connected, 60000);
	is_int(c.status, 0, "connected");
	for (i = 0; i < NOPS; i++) {
		switch (i % 4) {
		case 0:
			ret = rdmamsg_send(c.ep, big, 32, (void *)i);
			break;
		case 1:
			ret = rdmamsg_send_imm(c.ep, big, 9000, 7, (void *)i);
			break;
		case 2:
			ret = rdmamsg_buf_alloc(c.ctx, 3000, &b);
			if (ret)
				break;
			ret = rdmamsg_send_buf(c.ep, b, 3000, (void *)i);
			if (ret)
				rdmamsg_buf_free(b);
			break;
		default:
			ret = rdmamsg_send(c.ep, big, sizeof(big), (void *)i);
		}
		if (ret == -EAGAIN)
			break;
		if (ret) {
			diag("send %llu: %s", (unsigned long long)i,
			     rdmamsg_strerror(ret));
			break;
		}
		c.accepted++;
	}
	ok(c.accepted > 8 && c.accepted < NOPS,
	   "%llu sends accepted before -EAGAIN",
	   (unsigned long long)c.accepted);
	is_int(rdmamsg_ep_close(c.ep, cli_close_cb), 0,
	       "close with them in flight");
	is_int(c.ok_ + c.canceled + c.other, 0,
	       "no completion from inside close");
	test_run_until(c.ctx, &c.closed, 60000);
	is_int(c.closed, 1, "close callback ran once");
	is_int(c.ok_ + c.canceled + c.other, c.accepted,
	       "every accepted send completed before it");
	is_int(c.dup, 0, "exactly once each");
	is_int(c.other, 0, "with 0 or -ECANCELED");
	diag("%llu done, %llu canceled", (unsigned long long)c.ok_,
	     (unsigned long long)c.canceled);
	test_idle(c.ctx, 200);
	is_int(c.after_close, 0, "no callback after the close callback");
	rdmamsg_ctx_query_pool(c.ctx, &reg, &used);
	is_int(used, 0, "all pool buffers came back");
	is_int(test_wait_child(pid), 0, "server saw the close and exits");
	is_int(rdmamsg_ctx_destroy(&c.ctx), 0, "context destroyed");
	close(rfd);
	return done_testing();
}
