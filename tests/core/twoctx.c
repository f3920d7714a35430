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

int main(void)
{
	static struct test_side srv, cli;
	char addr[64];
	uint64_t i, n;
	int ret, closed;

	test_setup("twoctx");
	srv.ctx = test_ctx();
	is_int(rdmamsg_ctx_create(NULL, &cli.ctx), 0, "second context");
	srv.cbs = &cbs;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0,
	       "listen on the first");
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
	TEST_RUN2_WHILE(&srv, &cli, srv.got < n, 10000);
	is_int(srv.got, n, "all received by the other context");
	is_int(srv.bad, 0, "in order");
	closed = test_side_close2(&srv, &cli, 5000);
	ok(srv.disc, "the server side saw the close");
	ok(closed, "everything closed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "second context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "first context destroyed");
	return done_testing();
}
