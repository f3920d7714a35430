/* SPDX-License-Identifier: MIT */
/*
 * limits.c -- an endpoint whose queue pair needs more than the device
 * reports (ibv_query_device's max_qp_wr, max_sge, max_cqe) is not made: the
 * connect or the accept fails with -ENOMEM and a log line that names the
 * limit, nothing is left behind, and depths within the limit connect.
 * The smaller device is the test hooks RDMAMSG_TEST_MAX_QP_WR and
 * RDMAMSG_TEST_MAX_SGE (lib/ctx.c), RDMAMSG_TEST_MAX_CQE (lib/iface.c) on
 * one context of two.  An SRQ past max_srq_wr is -EINVAL, logged.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

static int logged_qp_wr, logged_sge, logged_cqe, logged_srq_wr;

/* on_log -- test_log, and which device limit an error named */
static void on_log(int level, const char *func, const char *msg, void *arg)
{
	if (level <= RDMAMSG_LOG_ERROR && strstr(msg, "(max_qp_wr)"))
		logged_qp_wr++;
	if (level <= RDMAMSG_LOG_ERROR && strstr(msg, "(max_sge)"))
		logged_sge++;
	if (level <= RDMAMSG_LOG_ERROR && strstr(msg, "completion entries"))
		logged_cqe++;
	if (level <= RDMAMSG_LOG_ERROR && strstr(msg, "(max_srq_wr)"))
		logged_srq_wr++;
	test_log(level, func, msg, arg);
}

/* on_recv_cb -- count the messages */
static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	struct test_side *s = arg;

	(void)ep;
	(void)data;
	(void)imm;
	(void)flags;
	if (len != 8)
		s->bad++;
	s->got++;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_disconnect = test_side_on_disconnect,
};

static int accept_ret, accepts;

/* on_req -- accept into s->ep with s->attr, recording the result; a
 * failed accept is rejected */
static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	struct test_side *s = arg;

	(void)l;
	(void)pdata;
	(void)len;
	accepts++;
	accept_ret = rdmamsg_conn_req_accept(req, s->attr, s->cbs, s, &s->ep);
	/* a failed accept leaves the request ours to answer */
	if (accept_ret)
		rdmamsg_conn_req_reject(req, 0, NULL, 0);
}

/* ctx_with -- a context made with env=val in the environment */
static struct rdmamsg_ctx *ctx_with(const char *env, const char *val)
{
	struct rdmamsg_ctx *ctx;

	setenv(env, val, 1);
	ctx = test_ctx();
	unsetenv(env);
	return ctx;
}

/* refused -- cli connects to addr with attr and fails with -ENOMEM,
 * logged; its endpoint closes */
static void refused(struct test_side *srv, struct test_side *cli,
		    const char *addr, struct rdmamsg_ep_attr *attr, int *logged,
		    const char *what)
{
	int before = *logged, ret;

	cli->up = cli->closed = 0;
	cli->status = 0;
	ret = rdmamsg_connect(cli->ctx, addr, attr, &cbs, cli, &cli->ep);
	if (!ret)
		test_run2(srv, cli, &cli->up, 5000);
	ok(ret == -ENOMEM || (cli->up && cli->status == -ENOMEM),
	   "%s: -ENOMEM (%d, %d)", what, ret, cli->status);
	ok(*logged > before, "%s: the log names the device's limit", what);
	if (!ret) {
		rdmamsg_ep_close(cli->ep, test_side_on_close);
		test_run2(srv, cli, &cli->closed, 5000);
		ok(cli->closed, "%s: the endpoint closes", what);
	}
}

/* connects -- cli connects with attr, one message goes to srv, and both
 * endpoints close */
static void connects(struct test_side *srv, struct test_side *cli,
		     const char *addr, struct rdmamsg_ep_attr *attr,
		     const char *what)
{
	uint64_t v = 42;

	cli->up = cli->closed = srv->closed = srv->disc = 0;
	cli->status = -1;
	srv->got = 0;
	srv->ep = NULL;
	is_int(rdmamsg_connect(cli->ctx, addr, attr, &cbs, cli, &cli->ep), 0,
	       "connect");
	test_run2(srv, cli, &cli->up, 5000);
	is_int(cli->status, 0, what);
	if (cli->status)
		return;
	is_int(rdmamsg_send(cli->ep, &v, 8, NULL), 0, "send");
	TEST_RUN2_WHILE(srv, cli, srv->got < 1, 5000);
	is_int(srv->got, 1, "the message arrived");
	rdmamsg_ep_close(cli->ep, test_side_on_close);
	test_run2(srv, cli, &srv->disc, 5000);
	if (srv->ep)
		rdmamsg_ep_close(srv->ep, test_side_on_close);
	test_run2(srv, cli, &cli->closed, 5000);
	test_run2(srv, cli, &srv->closed, 5000);
	ok(cli->closed && srv->closed, "both endpoints closed");
}

int main(void)
{
	static struct test_side srv, cli;
	struct rdmamsg_ep_attr *a;
	char addr[64];
	int n;

	test_setup("limits");
	rdmamsg_log_set_function(on_log, NULL);
	srv.ctx = test_ctx();
	srv.cbs = &cbs;
	if (test_side_listen(&srv, on_req, addr, sizeof(addr)))
		bail_out("listen");

	/* a client whose device holds 100 WRs a queue pair */
	cli.ctx = ctx_with("RDMAMSG_TEST_MAX_QP_WR", "100");
	a = test_ep_attr(1024, 65536);
	rdmamsg_ep_attr_set_send_depth(a, 128);
	rdmamsg_ep_attr_set_recv_depth(a, 32);
	refused(&srv, &cli, addr, a, &logged_qp_wr,
		"send depth 128 on a device of 100 WRs");
	rdmamsg_ep_attr_set_send_depth(a, 64);
	rdmamsg_ep_attr_set_recv_depth(a, 128);
	refused(&srv, &cli, addr, a, &logged_qp_wr,
		"receive depth 128 on a device of 100 WRs");
	is_int(accepts, 0, "the server never heard of them");
	rdmamsg_ep_attr_set_recv_depth(a, 32);
	connects(&srv, &cli, addr, a, "send depth 64, receive depth 32: up");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0,
	       "client context destroyed: nothing left");

	/* a server on such a device refuses to accept */
	is_int(rdmamsg_listener_close(srv.lst, test_side_on_lclose), 0,
	       "listener closed");
	test_run_until(srv.ctx, &srv.lclosed, 5000);
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	srv.ctx = ctx_with("RDMAMSG_TEST_MAX_QP_WR", "100");
	if (test_side_listen(&srv, on_req, addr, sizeof(addr)))
		bail_out("listen");
	cli.ctx = test_ctx();
	n = logged_qp_wr;
	accept_ret = 0;
	cli.up = 0;
	cli.status = 0;
	is_int(rdmamsg_connect(cli.ctx, addr, NULL, &cbs, &cli, &cli.ep), 0,
	       "connect with the default depths (128 sends)");
	test_run2(&srv, &cli, &cli.up, 5000);
	is_int(accept_ret, -ENOMEM, "accept on a device of 100 WRs: -ENOMEM");
	ok(logged_qp_wr > n, "the server's log names max_qp_wr");
	ok(cli.up && cli.status == -ECONNREFUSED, "the client is refused (%d)",
	   cli.status);
	rdmamsg_ep_close(cli.ep, test_side_on_close);
	cli.closed = 0;
	test_run2(&srv, &cli, &cli.closed, 5000);
	ok(cli.closed, "client endpoint closed");
	rdmamsg_ep_attr_set_send_depth(a, 64);
	srv.attr = a;
	connects(&srv, &cli, addr, a, "accepting with send depth 64: up");
	srv.attr = NULL;
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");

	/* a device of 100 CQ entries: a lane needs 129 + 35 */
	cli.ctx = ctx_with("RDMAMSG_TEST_MAX_CQE", "100");
	rdmamsg_ep_attr_set_send_depth(a, 128);
	refused(&srv, &cli, addr, a, &logged_cqe,
		"send depth 128 on a device of 100 CQ entries");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");

	/* a device of one scatter/gather entry: no RC lane */
	cli.ctx = ctx_with("RDMAMSG_TEST_MAX_SGE", "1");
	refused(&srv, &cli, addr, a, &logged_sge,
		"a device of 1 SGE a work request");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");

	/* an SRQ of more buffers than the device's SRQs hold (softrdma's
	 * and mlx5's max_srq_wr: 32767; rdmamsg's own limit: 2^20) */
	{
		struct rdmamsg_srq_attr sa = {.max_bufs = 1u << 20,
					      .buf_size = 1024};
		struct rdmamsg_srq *srq = NULL;

		is_int(rdmamsg_srq_create(srv.ctx, &sa, &srq), -EINVAL,
		       "an SRQ of 2^20 buffers: -EINVAL");
		ok(!srq && logged_srq_wr == 1,
		   "nothing made, the log names max_srq_wr");
	}

	rdmamsg_ep_attr_delete(&a);
	rdmamsg_listener_close(srv.lst, test_side_on_lclose);
	srv.lclosed = 0;
	test_run_until(srv.ctx, &srv.lclosed, 5000);
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	return done_testing();
}
