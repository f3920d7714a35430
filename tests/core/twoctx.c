/* SPDX-License-Identifier: MIT */
/*
 * twoctx.c -- two contexts in one process (one thread) talk to each other:
 * they share the device (and its async event fd) but nothing else; both
 * are driven in fd mode from one poll() over their two fds.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

static struct rdmamsg_listener *lst;
static int lclosed;

/* on_recv_cb -- count in-order sequence numbers; the server echoes */
static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	struct test_side *s = arg;

	(void)flags;
	if (len != 8 || imm != (uint32_t)s->got)
		s->bad++;
	s->got++;
	if (s->ep == NULL)
		s->ep = ep;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_disconnect = test_side_on_disconnect,
};

/* on_req -- accept into the server side */
static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	struct test_side *s = arg;

	(void)l;
	(void)pdata;
	(void)len;
	rdmamsg_conn_req_accept(req, NULL, &cbs, s, &s->ep);
}

/* on_lclose -- listener close callback: note it */
static void on_lclose(struct rdmamsg_listener *l, void *arg)
{
	(void)l;
	(void)arg;
	lclosed = 1;
}

int main(void)
{
	static struct test_side srv, cli;
	uint16_t port;
	char addr[64];
	uint64_t i, n;
	int ret;

	test_setup("twoctx");
	srv.ctx = test_ctx();
	is_int(rdmamsg_ctx_create(NULL, &cli.ctx), 0, "second context");
	is_int(rdmamsg_listen(srv.ctx, "127.0.0.1:0", on_req, &srv, &lst), 0,
	       "listen on the first");
	rdmamsg_listener_get_port(lst, &port);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	is_int(rdmamsg_connect(cli.ctx, addr, NULL, &cbs, &cli, &cli.ep), 0,
	       "connect from the second");
	test_run2(&srv, &cli, &cli.up, 5000);
	is_int(cli.status, 0, "connected");
	n = tap_small() ? 2000 : 20000;
	for (i = 0; i < n; i++) {
		do {
			ret = rdmamsg_send_imm(cli.ep, &i, 8, (uint32_t)i,
					       NULL);
			if (ret == -EAGAIN) {
				rdmamsg_ctx_progress(srv.ctx);
				rdmamsg_ctx_progress(cli.ctx);
			}
		} while (ret == -EAGAIN);
		if (ret)
			break;
	}
	is_int(i, n, "all sent");
	{
		volatile int done = 0;
		long long end = test_now_ms() + 10000;

		while (srv.got < n && test_now_ms() < end)
			test_run2(&srv, &cli, &done, 10);
	}
	is_int(srv.got, n, "all received by the other context");
	is_int(srv.bad, 0, "in order");
	rdmamsg_ep_close(cli.ep, test_side_on_close);
	test_run2(&srv, &cli, &srv.disc, 5000);
	ok(srv.disc, "the server side saw the close");
	rdmamsg_ep_close(srv.ep, test_side_on_close);
	rdmamsg_listener_close(lst, on_lclose);
	test_run2(&srv, &cli, &cli.closed, 5000);
	test_run2(&srv, &cli, &srv.closed, 5000);
	test_run2(&srv, &cli, &lclosed, 5000);
	ok(cli.closed && srv.closed && lclosed, "everything closed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "second context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "first context destroyed");
	return done_testing();
}
