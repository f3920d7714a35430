/* SPDX-License-Identifier: MIT */
/*
 * large_args.c -- bad input around large messages.  What the allocation
 * callback (rdmamsg_ep_attr_set_recv_alloc) hands back is checked before
 * a large message is pulled there: a destination outside its region, or
 * a region of another context (whose key the endpoint's device refuses),
 * refuses that message (the sender's on_send gets -EINVAL) and the
 * connection stays up; a good one receives the message.
 * rdmamsg_send_mr() of 0 bytes (nothing for the peer to read) is -EINVAL
 * and sends nothing; the connection stays up and carries a send_mr after
 * it.  Two contexts of this process, a third for the foreign region.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"

#define BIG (2u << 20) /* above the default 1 MiB maximum: large */

enum { DEST_OUTSIDE, DEST_FOREIGN, DEST_GOOD };

static struct rdmamsg_mr *own_mr, *foreign_mr;
static unsigned char dest[2 * BIG], src[BIG];
static int mode, send_status, sends, recvs;
static size_t recv_len;

/* srv_alloc -- the destination mode names */
static int srv_alloc(struct rdmamsg_ep *ep, size_t len, void **data,
		     struct rdmamsg_mr **mr, void *arg)
{
	(void)ep;
	(void)arg;
	switch (mode) {
	case DEST_OUTSIDE: /* starts inside, ends past the region */
		*data = dest + sizeof(dest) - len / 2;
		*mr = own_mr;
		break;
	case DEST_FOREIGN:
		*data = dest;
		*mr = foreign_mr;
		break;
	default:
		*data = dest;
		*mr = own_mr;
	}
	return 0;
}

/* srv_recv -- count what arrives */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)data;
	(void)imm;
	(void)flags;
	(void)arg;
	recvs++;
	recv_len = len;
}

/* cli_send -- the large send's outcome */
static void cli_send(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	(void)ep;
	(void)op_ctx;
	(void)arg;
	send_status = status;
	sends++;
}

/* one -- send src large with the callback in mode m: its on_send status */
static int one(struct test_side *srv, struct test_side *cli, int m)
{
	int before = sends;

	mode = m;
	send_status = 1;
	if (rdmamsg_send(cli->ep, src, BIG, NULL))
		return 1;
	TEST_RUN2_WHILE(srv, cli, sends == before, 10000);
	return send_status;
}

int main(void)
{
	static const struct rdmamsg_ep_cbs srv_cbs = {
		.on_connect = test_side_on_connect,
		.on_disconnect = test_side_on_disconnect,
		.on_recv = srv_recv,
	};
	static const struct rdmamsg_ep_cbs cli_cbs = {
		.on_connect = test_side_on_connect,
		.on_disconnect = test_side_on_disconnect,
		.on_send = cli_send,
	};
	struct test_side srv = {0}, cli = {0};
	struct rdmamsg_mr *src_mr;
	struct rdmamsg_ctx *other;
	int before;
	enum rdmamsg_ep_state st;
	char addr[64];

	test_setup("large_args");
	srv.ctx = test_ctx();
	cli.ctx = test_ctx();
	other = test_ctx();
	is_int(rdmamsg_mr_reg(srv.ctx, dest, sizeof(dest), 0, &own_mr), 0,
	       "the server's region");
	is_int(rdmamsg_mr_reg(other, dest, sizeof(dest), 0, &foreign_mr), 0,
	       "the same bytes registered on another context");
	if (rdmamsg_ep_attr_new(&srv.attr) ||
	    rdmamsg_ep_attr_set_recv_alloc(srv.attr, srv_alloc))
		bail_out("attributes");
	srv.cbs = &srv_cbs;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0, "listen");
	is_int(rdmamsg_connect(cli.ctx, addr, NULL, &cli_cbs, &cli, &cli.ep), 0,
	       "connect");
	test_run2(&srv, &cli, &cli.up, 10000);
	is_int(cli.status, 0, "connected");
	memset(src, 0x5a, sizeof(src));

	is_int(one(&srv, &cli, DEST_OUTSIDE), -EINVAL,
	       "a destination past its region: refused with -EINVAL");
	is_int(one(&srv, &cli, DEST_FOREIGN), -EINVAL,
	       "a region of another context: refused with -EINVAL");
	is_int(recvs, 0, "nothing delivered");
	ok(!cli.disc && !srv.disc, "the connection stayed up");
	rdmamsg_ep_get_state(cli.ep, &st);
	is_int(st, RDMAMSG_EP_CONNECTED, "client still connected");
	is_int(one(&srv, &cli, DEST_GOOD), 0, "a good destination: sent");
	ok(recvs == 1 && recv_len == BIG && dest[0] == 0x5a &&
		   dest[BIG - 1] == 0x5a,
	   "and received there");

	is_int(rdmamsg_mr_reg(cli.ctx, src, BIG, RDMAMSG_ACCESS_REMOTE_READ,
			      &src_mr),
	       0, "the client's source region");
	is_int(rdmamsg_send_mr(cli.ep, src_mr, 0, 0, NULL), -EINVAL,
	       "send_mr of 0 bytes: -EINVAL");
	is_int(rdmamsg_send_mr(cli.ep, src_mr, BIG, 0, NULL), -EINVAL,
	       "send_mr of 0 bytes at the region's end: -EINVAL");
	TEST_RUN2_WHILE(&srv, &cli, !cli.disc && !srv.disc, 500);
	ok(!cli.disc && !srv.disc, "the connection stayed up");
	is_int(sends, 3, "no on_send for them");
	before = sends;
	mode = DEST_GOOD;
	send_status = 1;
	dest[0] = 0;
	is_int(rdmamsg_send_mr(cli.ep, src_mr, 0, BIG, NULL), 0,
	       "send_mr of the whole region");
	TEST_RUN2_WHILE(&srv, &cli, sends == before, 10000);
	is_int(send_status, 0, "sent");
	ok(recvs == 2 && recv_len == BIG && dest[0] == 0x5a, "and received");

	ok(test_side_close2(&srv, &cli, 30000), "everything closed");
	is_int(rdmamsg_mr_dereg(&src_mr), 0, "source deregistered");
	is_int(rdmamsg_mr_dereg(&own_mr), 0, "region deregistered");
	is_int(rdmamsg_mr_dereg(&foreign_mr), 0, "foreign region deregistered");
	rdmamsg_ep_attr_delete(&srv.attr);
	is_int(rdmamsg_ctx_destroy(&other), 0, "third context destroyed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	return done_testing();
}
