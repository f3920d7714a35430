/* SPDX-License-Identifier: MIT */
/*
 * closecb.c -- rdmamsg_ep_close() from inside a callback that the
 * connection's end runs before on_disconnect: after the close only on_send
 * and the close callback may run (rdmamsg_connect(3)), so on_disconnect
 * must not follow.
 *
 * 1. The peer closes (its goodbye): a request outstanding completes with
 *    -ECONNRESET and its callback closes the endpoint.
 * 2. A session (RDMAMSG_FAILOVER_REPLAY) whose reconnect fails: a request
 *    made before the cut completes with the session's error and its
 *    callback closes the endpoint.
 *
 * Both sides live in one context of this process, driven in fd mode.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

struct side {
	struct rdmamsg_ep *ep;
	struct rdmamsg_req *held;
	int up, status, closed, ndisc, disc_after_close;
	int resp_calls, resp_status, close_ret, closing;
};

static struct side srv, cli;

/* srv_request -- keep the request unanswered */
static void srv_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
			void *data, size_t len, void *arg)
{
	(void)ep;
	(void)data;
	(void)len;
	(void)arg;
	srv.held = req;
}

/* on_connect -- record the outcome */
static void on_connect(struct rdmamsg_ep *ep, int status, int reason,
		       const void *pdata, size_t len, void *arg)
{
	struct side *s = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	s->up = 1;
	s->status = status;
}

/* on_disconnect -- count it, and whether the endpoint was closed first */
static void on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct side *s = arg;

	(void)ep;
	(void)status;
	s->ndisc++;
	s->disc_after_close += s->closing;
}

/* on_close -- the close callback */
static void on_close(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct side *)arg)->closed++;
}

/* resp_close -- the request's one callback closes its endpoint */
static void resp_close(struct rdmamsg_ep *ep, int status, void *data,
		       size_t len, void *req_arg)
{
	struct side *s = req_arg;

	(void)data;
	(void)len;
	s->resp_calls++;
	s->resp_status = status;
	s->closing = 1;
	s->close_ret = rdmamsg_ep_close(ep, on_close);
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = on_connect,
	.on_disconnect = on_disconnect,
};

/* srv_req -- accept with srv_request, a session's linger of 10 s */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct rdmamsg_ep_attr *a;

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (rdmamsg_ep_attr_new(&a))
		bail_out("rdmamsg_ep_attr_new");
	rdmamsg_ep_attr_set_on_request(a, srv_request);
	rdmamsg_ep_attr_set_session_linger(a, 10000);
	if (rdmamsg_conn_req_accept(req, a, &cbs, &srv, &srv.ep))
		srv.status = -1;
	rdmamsg_ep_attr_delete(&a);
}

/* nm -- a test name: what, then s */
static const char *nm(const char *what, const char *s)
{
	static char buf[128];

	snprintf(buf, sizeof(buf), "%s: %s", what, s);
	return buf;
}

/* run_while -- drive ctx while cond holds, ms at most */
#define run_while(ctx, cond, ms)                       \
	do {                                           \
		long long end_ = test_now_ms() + (ms); \
                                                       \
		while ((cond) && test_now_ms() < end_) \
			test_idle((ctx), 5);           \
	} while (0)

/* scenario -- connect (a session with replay), a request the server
 * keeps, then the peer's close (1) or a cut the session cannot survive
 * (2) */
static void scenario(struct rdmamsg_ctx *ctx, int session, const char *what)
{
	struct rdmamsg_listener *lst;
	struct rdmamsg_ep_attr *a = NULL;
	char addr[64];
	uint16_t port = 0;
	uint64_t id;

	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	if (rdmamsg_listen(ctx, "127.0.0.1:0", srv_req, NULL, &lst) ||
	    rdmamsg_listener_get_port(lst, &port))
		bail_out("listen");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	if (session) {
		if (rdmamsg_ep_attr_new(&a))
			bail_out("rdmamsg_ep_attr_new");
		rdmamsg_ep_attr_set_failover(a, RDMAMSG_FAILOVER_REPLAY);
		rdmamsg_ep_attr_set_reconnect(a, 500, 2);
	}
	is_int(rdmamsg_connect(ctx, addr, a, &cbs, &cli, &cli.ep), 0,
	       nm(what, "connect"));
	rdmamsg_ep_attr_delete(&a);
	run_while(ctx, !cli.up || !srv.up, 10000);
	ok(cli.status == 0 && srv.status == 0, "%s: connected", what);
	is_int(rdmamsg_request(cli.ep, "q", 1, 0, resp_close, &cli, &id), 0,
	       nm(what, "request"));
	run_while(ctx, !srv.held, 10000);
	ok(srv.held != NULL, "%s: the server keeps it", what);
	rdmamsg_req_drop(srv.held);
	if (session) {
		/* cut, and nobody to reconnect to: the session ends */
		is_int(rdmamsg_ep_test_break(cli.ep), 0, nm(what, "cut"));
		rdmamsg_listener_close(lst, NULL);
		lst = NULL;
	}
	srv.closing = 1;
	rdmamsg_ep_close(srv.ep, on_close);
	run_while(ctx, !cli.closed || !srv.closed, 20000);
	is_int(cli.resp_calls, 1, nm(what, "the request completed once"));
	ok(cli.resp_status < 0, "%s: with an error (%d)", what,
	   cli.resp_status);
	is_int(cli.close_ret, 0, nm(what, "closed from inside its callback"));
	is_int(cli.closed, 1, nm(what, "close callback once"));
	is_int(cli.disc_after_close, 0,
	       nm(what, "no on_disconnect after the close"));
	is_int(srv.closed, 1, nm(what, "the server side closed"));
	if (lst)
		rdmamsg_listener_close(lst, NULL);
	test_idle(ctx, 20);
}

int main(void)
{
	struct rdmamsg_ctx *ctx;

	test_setup("closecb");
	ctx = test_ctx();
	scenario(ctx, 0, "peer's goodbye");
	scenario(ctx, 1, "session lost");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	return done_testing();
}
