/* SPDX-License-Identifier: MIT */
/*
 * pieces.c -- rdmamsg_send()'s copies above RDMAMSG_RNDV_PIECE go in
 * pieces (lib/rndv.c), invisibly to the receiver.
 *
 * Two contexts of this process, rendezvous above 4 KiB, pieces of at
 * least 16 KiB (RDMAMSG_RNDV_PIECE=16k; a bad value: connect -EINVAL).
 * Messages at every boundary of the piece count +-1 byte (two halves
 * from 16 KiB, two pieces of 16 KiB at 32 KiB, the most, eight, from
 * 128 KiB, up to 4 MiB), each after a
 * small one: the server sees them all through on_recv, once, in order,
 * byte for byte, with the flags of an eager message; the client bound
 * one window per piece (counted on its QP) and invalidated all but the
 * first itself (LOCAL_INV; the FIN invalidates the first).  With
 * RDMAMSG_RNDV_PIECE=0 every message binds one window.
 *
 * A slow receiver: a 1 MiB message sent while the server does not run
 * goes in pieces, every announcement posted at once, where the client has
 * a credit for each (receive depth 32), else whole (depth 4: no piece's
 * announcement ever waits in the backlog, which a close cancels); the
 * next, behind it unread, goes whole; run later, each arrives whole,
 * once, in order.  The client closes right
 * after such a message: the close ends well within the close timeout,
 * and the server has the message whole.
 *
 * A garbled piece announcement (its length beyond what the RTS announced,
 * or its address not where the one before ended, rewritten on the
 * client's post_send): the server closes the connection with -EPROTO and
 * delivers nothing of it; the client's on_send reports an error, once.
 * The boundaries again with the copies non-temporal (RDMAMSG_BULK_NT=1),
 * whole and in pieces: the same bytes arrive.
 * ASan and valgrind (RDMAMSG_TEST_VALGRIND=1) see nothing leak.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"
#include "pattern.h"
#include "internal.h"
#include "dispatch.h"
#include "xfer.h"

#define PIECE  16384
#define MAXMSG (4 * 1024 * 1024)
#define SMALL  40
#define NSIZES 14

static const size_t sizes[NSIZES] = {
	PIECE - 1,   PIECE,	    PIECE + 1,	   2 * PIECE - 1,
	2 * PIECE,   2 * PIECE + 1, 3 * PIECE + 7, 8 * PIECE - 1,
	8 * PIECE,   8 * PIECE + 1, 9 * PIECE - 1, 16 * PIECE + 1,
	1024 * 1024, MAXMSG,
};

static unsigned char *pat;

/* what the server saw */
static uint32_t next_seq; /* the immediate it expects next */
static unsigned int nrecv, order_bad, data_bad, flags_bad;
static int srv_disc_status = 1;

/* the client's on_send calls and their errors */
static unsigned int acked, ack_err;

/* counters behind the provider's post_send: windows bound and
 * invalidated locally on the client's QP; garble: rewrite the client's
 * piece announcements (1: length, 2: address) */
static int (*real_post)(struct ibv_qp *, struct ibv_send_wr *,
			struct ibv_send_wr **);
static struct ibv_qp *cli_qp;
static unsigned int nbind, nlinv, nsend, garbled;
static int garble;

/* pieces -- how many pieces a copy of len bytes goes in (rndv.c's
 * pieces_take(), for the boundaries this test crosses) */
static unsigned int pieces(size_t len, size_t piece)
{
	size_t n, size;

	if (!piece || len < piece)
		return 1;
	n = len / piece < 2 ? 2 : len / piece < 8 ? len / piece : 8;
	size = ((len + n - 1) / n + 63) & ~(size_t)63;
	return (unsigned int)((len + size - 1) / size);
}

/* garble_piece -- a SEND of the client's carrying an X_PIECE: its
 * announcement broken as garble says */
static void garble_piece(const struct ibv_send_wr *w)
{
	struct rdmamsg__xhdr x;
	unsigned char *p;

	if (w->num_sge != 1 ||
	    w->sg_list[0].length != RDMAMSG_HDR + RDMAMSG_XHDR)
		return;
	p = (unsigned char *)(uintptr_t)w->sg_list[0].addr + RDMAMSG_HDR;
	if (rdmamsg__xhdr_decode(p, RDMAMSG_XHDR, &x) || x.kind != X_PIECE)
		return;
	if (garble == 1)
		x.len += MAXMSG;
	else
		x.addr += 64;
	rdmamsg__xhdr_encode(&x, p);
	garbled++;
}

static int count_post(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad)
{
	const struct ibv_send_wr *w;

	for (w = wr; w && qp == cli_qp; w = w->next) {
		if (w->opcode == IBV_WR_BIND_MW)
			nbind++;
		else if (w->opcode == IBV_WR_LOCAL_INV)
			nlinv++;
		else if (w->opcode == IBV_WR_SEND)
			nsend++;
		if (garble && w->opcode == IBV_WR_SEND)
			garble_piece(w);
	}
	return real_post(qp, wr, bad);
}

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)arg;
	nrecv++;
	order_bad += imm != next_seq;
	next_seq = imm + 1;
	data_bad += !same(data, len, imm);
	/* an eager message's flags: the immediate only */
	flags_bad += flags != RDMAMSG_RECV_IMM;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	srv_disc_status = status;
	test_side_on_disconnect(ep, status, arg);
}

static void cli_sent(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	(void)ep;
	(void)op_ctx;
	(void)arg;
	acked++;
	ack_err += status != 0;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = test_side_on_connect,
	.on_send = cli_sent,
	.on_disconnect = test_side_on_disconnect,
};

/* pair -- contexts, listener and a connection (the server's endpoint
 * with receive depth depth), posts on the client's QP counted */
static void pair(struct test_side *srv, struct test_side *cli,
		 unsigned int depth)
{
	struct rdmamsg_ep_attr *a = test_ep_attr(8192, MAXMSG);
	char addr[64];

	memset(srv, 0, sizeof(*srv));
	memset(cli, 0, sizeof(*cli));
	srv->cbs = &srv_cbs;
	srv->attr = test_ep_attr(8192, MAXMSG);
	rdmamsg_ep_attr_set_recv_depth(srv->attr, depth);
	rdmamsg_ep_attr_set_rndv_threshold(a, 4096);
	rdmamsg_ep_attr_set_rndv_threshold(srv->attr, 4096);
	srv->ctx = test_ctx();
	is_int(rdmamsg_ctx_create(NULL, &cli->ctx), 0, "second context");
	if (cli->ctx->verbs->ops.post_send != count_post) {
		real_post = cli->ctx->verbs->ops.post_send;
		cli->ctx->verbs->ops.post_send = count_post;
	}
	is_int(test_side_listen(srv, NULL, addr, sizeof(addr)), 0, "listen");
	is_int(rdmamsg_connect(cli->ctx, addr, a, &cli_cbs, cli, &cli->ep), 0,
	       "connect");
	test_run2(srv, cli, &cli->up, 60000);
	is_int(cli->status, 0, "connected");
	test_run2(srv, cli, &srv->up, 60000);
	ok(srv->ep != NULL, "accepted");
	cli_qp = cli->ep->ln->qp;
	rdmamsg_ep_attr_delete(&a);
	rdmamsg_ep_attr_delete(&srv->attr);
	next_seq = 1;
	nrecv = order_bad = data_bad = flags_bad = acked = ack_err = 0;
	nbind = nlinv = nsend = garbled = 0;
	srv_disc_status = 1;
}

/* unpair -- close what is open, destroy both contexts */
static void unpair(struct test_side *srv, struct test_side *cli)
{
	ok(test_side_close2(srv, cli, 60000), "everything closed");
	is_int(rdmamsg_ctx_destroy(&cli->ctx), 0, "client context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv->ctx), 0, "server context destroyed");
}

/* send_k -- message seq of len bytes, retried (the server running)
 * while the copies ahead or the backlog are full */
static int send_k(struct test_side *cli, struct test_side *srv, size_t len,
		  uint32_t seq)
{
	int ret;

	fill(pat, len, seq);
	do {
		ret = rdmamsg_send_imm(cli->ep, pat, len, seq, NULL);
		if (ret == -EAGAIN) {
			rdmamsg_ctx_progress(cli->ctx);
			rdmamsg_ctx_progress(srv->ctx);
		}
	} while (ret == -EAGAIN);
	return ret;
}

/* boundaries -- every size between small messages, each pair once the
 * one before has arrived (its credits back: pieces need one each) */
static void boundaries(size_t piece)
{
	static struct test_side srv, cli;
	unsigned int i, want_binds = 0, want_linv = 0, bad = 0;
	uint32_t seq = 1;

	pair(&srv, &cli, 32);
	for (i = 0; i < NSIZES; i++) {
		unsigned int b0 = nbind;

		bad += send_k(&cli, &srv, SMALL, seq++) != 0;
		bad += send_k(&cli, &srv, sizes[i], seq++) != 0;
		/* the window per piece is bound within the send */
		if (nbind - b0 != pieces(sizes[i], piece))
			diag("%zu bytes: %u windows bound, %u pieces expected",
			     sizes[i], nbind - b0, pieces(sizes[i], piece));
		bad += nbind - b0 != pieces(sizes[i], piece);
		want_binds += pieces(sizes[i], piece);
		want_linv += pieces(sizes[i], piece) - 1;
		/* the credits back for the next one's announcements, its
		 * copy read (one behind another goes whole) */
		run_for(&srv, &cli, &acked, seq - 1);
	}
	bad += send_k(&cli, &srv, SMALL, seq++) != 0;
	ok(!bad, "piece %zu: every send taken, a window per piece", piece);
	run_for(&srv, &cli, &nrecv, seq - 1);
	run_for(&srv, &cli, &acked, seq - 1);
	ok(nrecv == seq - 1, "piece %zu: all %u messages arrived once (%u)",
	   piece, seq - 1, nrecv);
	ok(!order_bad && !data_bad && !flags_bad,
	   "piece %zu: in order (%u), byte for byte (%u), eager flags (%u)",
	   piece, order_bad, data_bad, flags_bad);
	ok(acked == seq - 1 && !ack_err, "piece %zu: on_send once each (%u)",
	   piece, acked);
	ok(nbind == want_binds && nlinv == want_linv,
	   "piece %zu: %u windows bound (%u), %u invalidated by LOCAL_INV (%u)",
	   piece, nbind, want_binds, nlinv, want_linv);
	unpair(&srv, &cli);
}

/* slow_receiver -- 1 MiB messages while the server (receive depth
 * depth) does not run: with a credit for every announcement they go in
 * pieces, all announced at once, else whole; then everything arrives;
 * with close set the client closes at once instead */
static void slow_receiver(unsigned int depth, int close)
{
	static struct test_side srv, cli;
	const size_t len = 1024 * 1024;
	unsigned int want = close ? 1 : 2, np;
	uint32_t seq;
	long long t0;

	pair(&srv, &cli, depth);
	np = depth > pieces(len, PIECE) ? pieces(len, PIECE) : 1;
	for (seq = 1; seq <= want; seq++) {
		fill(pat, len, seq);
		ok(rdmamsg_send_imm(cli.ep, pat, len, seq, NULL) == 0,
		   "slow receiver (depth %u): 1 MiB message %u taken", depth,
		   seq);
	}
	/* the second, behind the first still unread, goes whole */
	ok(nbind == np + want - 1 && nsend == np + want - 1,
	   "slow receiver (depth %u): %u windows bound, %u announcements "
	   "sent (%u, then 1)",
	   depth, nbind, nsend, np);
	if (close) {
		t0 = test_now_ms();
		rdmamsg_ep_close(cli.ep, test_side_on_close);
		test_run2(&srv, &cli, &cli.closed, 60000);
		ok(cli.closed && test_now_ms() - t0 < 1500,
		   "closed mid-transfer: the close ends (%lld ms)",
		   test_now_ms() - t0);
		run_for(&srv, &cli, &nrecv, want);
	} else {
		run_for(&srv, &cli, &nrecv, want);
		run_for(&srv, &cli, &acked, want);
	}
	ok(nrecv == want && !order_bad && !data_bad && !flags_bad,
	   "slow receiver (depth %u%s): %u of %u arrived, in order, whole",
	   depth, close ? ", sender closed" : "", nrecv, want);
	ok(acked == want && !ack_err,
	   "slow receiver (depth %u): on_send once each (%u)", depth, acked);
	unpair(&srv, &cli);
}

/* garbled -- a piece announcement broken on the way (how): the server
 * closes with -EPROTO, delivers nothing, the client's on_send errs */
static void garbled_piece(int how)
{
	static struct test_side srv, cli;
	const size_t len = 256 * 1024;

	pair(&srv, &cli, 32);
	garble = how;
	fill(pat, len, 1);
	ok(rdmamsg_send_imm(cli.ep, pat, len, 1, NULL) == 0,
	   "garbled %d: the send is taken", how);
	garble = 0;
	ok(garbled > 0, "garbled %d: %u announcements rewritten", how, garbled);
	test_run2(&srv, &cli, &srv.disc, 20000);
	ok(srv_disc_status == -EPROTO,
	   "garbled %d: the server closed the connection with -EPROTO (%d)",
	   how, srv_disc_status);
	run_for(&srv, &cli, &acked, 1);
	ok(nrecv == 0, "garbled %d: nothing delivered (%u)", how, nrecv);
	ok(acked == 1 && ack_err == 1, "garbled %d: on_send once, an error",
	   how);
	unpair(&srv, &cli);
}

int main(void)
{
	static struct test_side srv, cli;
	struct rdmamsg_ep *ep = NULL;

	test_setup("pieces");
	pat = malloc(MAXMSG);
	if (!pat)
		bail_out("no memory");

	srv.ctx = test_ctx();
	setenv("RDMAMSG_RNDV_PIECE", "1x", 1);
	ok(rdmamsg_connect(srv.ctx, "127.0.0.1:9", NULL, &cli_cbs, &cli, &ep) ==
			   -EINVAL &&
		   ep == NULL,
	   "RDMAMSG_RNDV_PIECE=1x: connect -EINVAL, no endpoint");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "context destroyed");

	setenv("RDMAMSG_RNDV_PIECE", "16k", 1);
	boundaries(PIECE);
	slow_receiver(4, 0);
	slow_receiver(32, 0);
	slow_receiver(32, 1);
	garbled_piece(1);
	garbled_piece(2);
	setenv("RDMAMSG_RNDV_PIECE", "0", 1);
	boundaries(0);
	/* the copies of 64 KiB and more non-temporal (lib/bulk.c), whole
	 * and in pieces: the same bytes arrive */
	setenv("RDMAMSG_BULK_NT", "1", 1);
	boundaries(0);
	setenv("RDMAMSG_RNDV_PIECE", "16k", 1);
	boundaries(PIECE);
	unsetenv("RDMAMSG_BULK_NT");
	unsetenv("RDMAMSG_RNDV_PIECE");
	free(pat);
	done_testing();
}
