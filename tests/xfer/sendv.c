/* SPDX-License-Identifier: MIT */
/*
 * sendv.c -- rdmamsg_sendv(): one message from several pieces.  Bad input
 * gets its error and sends nothing; messages of 1 to RDMAMSG_IOV_MAX
 * pieces (empty pieces, NULL bases of empty pieces, totals of 0 bytes, one
 * fragment and several) arrive whole, in order, byte for byte, and every
 * accepted send reports on_send once with its op_ctx.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"

#define BIG   70000 /* above the eager size: several fragments */
#define NMSGS 40

static int bad_sends;
static uint64_t sent_ok, got, bad, acked;
static unsigned char want[NMSGS][BIG], scratch[BIG];
static size_t want_len[NMSGS];

/* fill -- message k's bytes */
static void fill(unsigned char *p, size_t len, unsigned int k)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(k * 37 + i * 11 + (i >> 8));
}

static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	struct test_side *s = arg;

	(void)imm;
	(void)flags;
	if (!s->ep)
		s->ep = ep;
	if (got >= NMSGS || len != want_len[got] ||
	    (len && memcmp(data, want[got], len)))
		bad++;
	got++;
}

static void on_send_cb(struct rdmamsg_ep *ep, int status, void *op_ctx,
		       void *arg)
{
	(void)ep;
	(void)arg;
	if (status || (uintptr_t)op_ctx != acked + 1)
		bad_sends++;
	acked++;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_send = on_send_cb,
	.on_disconnect = test_side_on_disconnect,
};

/* sendv_k -- message k of len bytes cut into n pieces (every third piece
 * empty with a NULL base), sent and waited for */
static int sendv_k(struct test_side *cli, struct test_side *srv, unsigned int k,
		   size_t len, int n)
{
	static struct iovec iov[RDMAMSG_IOV_MAX];
	size_t off = 0;
	int i, ret;

	want_len[k] = len;
	fill(want[k], len, k);
	memcpy(scratch, want[k], len);
	for (i = 0; i < n; i++) {
		size_t piece = i % 3 == 2 ? 0 : (len - off) / (size_t)(n - i);

		if (i == n - 1)
			piece = len - off;
		iov[i].iov_base = piece ? scratch + off : NULL;
		iov[i].iov_len = piece;
		off += piece;
	}
	do {
		ret = rdmamsg_sendv(cli->ep, iov, n,
				    (void *)(uintptr_t)(sent_ok + 1));
		if (ret == -EAGAIN) {
			rdmamsg_ctx_progress(cli->ctx);
			rdmamsg_ctx_progress(srv->ctx);
		}
	} while (ret == -EAGAIN);
	if (ret)
		return ret;
	sent_ok++;
	/* the pieces may be reused at once */
	memset(scratch, 0xee, len);
	TEST_RUN2_WHILE(cli, srv, got <= k, 60000);
	return got > k ? 0 : -ETIMEDOUT;
}

int main(void)
{
	static struct test_side srv, cli;
	static unsigned char tiny[4];
	struct iovec iov[2];
	char addr[64];
	size_t max = 0;
	struct rdmamsg_protocols pr;
	unsigned int k = 0;
	int n[] = {2, 3, 17, 64, RDMAMSG_IOV_MAX};
	size_t lens[] = {0, 1, 100, 4096, BIG};
	int closed;

	test_setup("sendv");
	srv.ctx = test_ctx();
	is_int(rdmamsg_ctx_create(NULL, &cli.ctx), 0, "second context");
	srv.cbs = &cbs;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0, "listen");
	iov[0].iov_base = tiny;
	iov[0].iov_len = sizeof(tiny);
	iov[1] = iov[0];
	is_int(rdmamsg_connect(cli.ctx, addr, NULL, &cbs, &cli, &cli.ep), 0,
	       "connect");
	is_int(rdmamsg_sendv(cli.ep, iov, 2, NULL), -ENOTCONN,
	       "before the handshake: -ENOTCONN");
	test_run2(&srv, &cli, &cli.up, 60000);
	is_int(cli.status, 0, "connected");
	test_run2(&srv, &cli, &srv.up, 100);
	rdmamsg_ep_get_max_msg_size(cli.ep, &max);

	/* bad input: an error, nothing sent */
	is_int(rdmamsg_sendv(NULL, iov, 2, NULL), -EINVAL, "NULL ep");
	is_int(rdmamsg_sendv(cli.ep, NULL, 2, NULL), -EINVAL, "NULL iov");
	is_int(rdmamsg_sendv(cli.ep, iov, 0, NULL), -EINVAL, "no piece");
	is_int(rdmamsg_sendv(cli.ep, iov, -1, NULL), -EINVAL,
	       "a negative count");
	is_int(rdmamsg_sendv(cli.ep, iov, RDMAMSG_IOV_MAX + 1, NULL), -EINVAL,
	       "above RDMAMSG_IOV_MAX");
	iov[1].iov_base = NULL;
	is_int(rdmamsg_sendv(cli.ep, iov, 2, NULL), -EINVAL,
	       "a NULL base with a length");
	iov[1].iov_base = tiny;
	iov[1].iov_len = SIZE_MAX - 1;
	is_int(rdmamsg_sendv(cli.ep, iov, 2, NULL), -EMSGSIZE,
	       "a total that overflows");
	/* rdmamsg_send() goes up to the large maximum (by rendezvous): a
	 * total above it is refused before a byte is read */
	is_int(rdmamsg_ep_get_protocols(cli.ep, &pr), 0, "protocols");
	iov[1].iov_len = pr.max_large;
	ok(max < pr.max_large &&
		   rdmamsg_sendv(cli.ep, iov, 2, NULL) == -EMSGSIZE,
	   "a total above the large maximum (%zu): -EMSGSIZE", pr.max_large);
	iov[1].iov_len = sizeof(tiny);
	test_run2(&srv, &cli, &srv.disc, 200);
	is_int(got, 0, "nothing arrived from the refused sends");
	is_int(acked, 0, "no on_send for them");

	/* one message per (pieces, size) pair, and single pieces */
	for (unsigned int a = 0; a < sizeof(n) / sizeof(n[0]); a++)
		for (unsigned int b = 0; b < sizeof(lens) / sizeof(lens[0]);
		     b++) {
			int ret = sendv_k(&cli, &srv, k, lens[b], n[a]);

			if (ret) {
				diag("%d pieces, %zu bytes: %s", n[a], lens[b],
				     rdmamsg_strerror(ret));
				break;
			}
			k++;
		}
	for (unsigned int b = 0; b < sizeof(lens) / sizeof(lens[0]); b++)
		if (!sendv_k(&cli, &srv, k, lens[b], 1))
			k++;
	ok(k == 30, "30 messages of 1 to %d pieces sent (%u)", RDMAMSG_IOV_MAX,
	   k);
	is_int(got, k, "each arrived as one message");
	is_int(bad, 0, "whole, in order, byte for byte");
	TEST_RUN2_WHILE(&cli, &srv, acked < sent_ok, 60000);
	is_int(acked, sent_ok, "on_send once for every accepted send");
	is_int(bad_sends, 0, "with status 0 and its op_ctx, in order");

	closed = test_side_close2(&srv, &cli, 60000);
	ok(srv.disc, "the server side saw the close");
	ok(closed, "everything closed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "second context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "first context destroyed");
	return done_testing();
}
