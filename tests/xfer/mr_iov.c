/* SPDX-License-Identifier: MIT */
/*
 * mr_iov.c -- regions over non-contiguous memory (rdmamsg_mr_reg_iov,
 * rdmamsg_mr_reg_strided): with UMR (softrdma emulates it) a list of 64
 * non-adjacent pieces and a strided layout, each exported as one region,
 * written and read by a peer in one operation each, byte for byte, gaps
 * untouched; out of bounds refused; with UMR forced off
 * (RDMAMSG_NO_UMR=1) the documented fallback: an SGE list as the local
 * region, -ENOTSUP for exports and for more pieces than the SGE list.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"

#define NPIECE 64
#define PIECE  47
#define GAP    29
#define AREA   (NPIECE * (PIECE + GAP))
#define BLOCK  24
#define STRIDE 64
#define COUNT  100
#define SAREA  (STRIDE * COUNT)
#define RWA    (RDMAMSG_ACCESS_REMOTE_READ | RDMAMSG_ACCESS_REMOTE_WRITE)

static unsigned char pat(size_t i, int seed)
{
	return (unsigned char)(i * 31 + (size_t)seed * 7 + 1);
}

/* ---- server (child): owns the two regions ------------------------- */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_mr *list, *strided;
	unsigned char *area, *sarea;
	int nconn, nclosed, lclosed, failures;
};

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct srv *)arg)->nclosed++;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, srv_closed);
}

static void srv_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	uint8_t ex[2 * RDMAMSG_MR_EXPORT_SIZE];

	(void)reason;
	(void)pdata;
	(void)len;
	if (status || rdmamsg_mr_export(s->list, ex, RDMAMSG_MR_EXPORT_SIZE) ||
	    rdmamsg_mr_export(s->strided, ex + RDMAMSG_MR_EXPORT_SIZE,
			      RDMAMSG_MR_EXPORT_SIZE) ||
	    rdmamsg_send(ep, ex, sizeof(ex), NULL))
		s->failures++;
}

/* piece_of -- which piece byte i of the area is in (-1: a gap) */
static int piece_of(size_t i)
{
	return i % (PIECE + GAP) < PIECE ? (int)(i / (PIECE + GAP)) : -1;
}

/* srv_recv -- "check": are the pieces what the client wrote (seed 1 in
 * the list, seed 2 in the blocks) and the gaps untouched? */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv *s = arg;
	unsigned char r = 1;
	size_t i;

	(void)imm;
	(void)flags;
	if (len == 200) { /* rdmamsg_send_mr from the client's pieces */
		for (i = 0; i < len; i++)
			if (((unsigned char *)data)[i] !=
			    (unsigned char)(i + 1))
				r = 0;
		if (rdmamsg_send(ep, &r, 1, NULL))
			s->failures++;
		return;
	}
	if (len != 5 || memcmp(data, "check", 5))
		return;
	for (i = 0; i < AREA; i++) {
		int p = piece_of(i);

		if (s->area[i] !=
		    (p < 0 ? 0xee
			   : pat((size_t)p * PIECE + i % (PIECE + GAP), 1)))
			r = 0;
	}
	for (i = 0; i < SAREA; i++)
		if (s->sarea[i] !=
		    (i % STRIDE < BLOCK
			     ? pat(i / STRIDE * BLOCK + i % STRIDE, 2)
			     : 0xdd))
			r = 0;
	if (rdmamsg_send(ep, &r, 1, NULL))
		s->failures++;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_connect,
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, NULL, &srv_cbs, s, &ep))
		s->failures++;
	s->nconn++;
}

static void lst_closed(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	((struct srv *)arg)->lclosed = 1;
}

static int server(int wfd, void *arg)
{
	struct iovec iov[NPIECE];
	enum rdmamsg_mr_layout lay = RDMAMSG_MR_LAYOUT_CONTIG;
	struct srv s;
	int done = 0, i;

	(void)arg;
	memset(&s, 0, sizeof(s));
	if (rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	s.area = malloc(AREA);
	s.sarea = malloc(SAREA);
	if (!s.area || !s.sarea)
		return 11;
	memset(s.area, 0xee, AREA);
	memset(s.sarea, 0xdd, SAREA);
	for (i = 0; i < SAREA; i++)
		if (i % STRIDE < BLOCK)
			s.sarea[i] = pat(
				(size_t)(i / STRIDE * BLOCK + i % STRIDE), 3);
	for (i = 0; i < NPIECE; i++) {
		iov[i].iov_base = s.area + (size_t)i * (PIECE + GAP);
		iov[i].iov_len = PIECE;
	}
	if (rdmamsg_mr_reg_iov(s.ctx, iov, NPIECE, RWA, &s.list) ||
	    rdmamsg_mr_reg_strided(s.ctx, s.sarea, BLOCK, STRIDE, COUNT,
				   RWA | RDMAMSG_ACCESS_REMOTE_ATOMIC,
				   &s.strided))
		return 12;
	if (rdmamsg_mr_get_layout(s.list, &lay) || lay != RDMAMSG_MR_LAYOUT_UMR)
		return 13;
	if (test_listen_report(s.ctx, srv_req, &s, &s.lst, wfd))
		return 14;
	while (!done) {
		test_run_until(s.ctx, &done, 100);
		done = s.nconn == 2 && s.nclosed == 2;
	}
	rdmamsg_listener_close(s.lst, lst_closed);
	test_run_until(s.ctx, &s.lclosed, 60000);
	if (rdmamsg_mr_dereg(&s.list) || rdmamsg_mr_dereg(&s.strided))
		return 15;
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 16;
	free(s.area);
	free(s.sarea);
	return s.failures ? 17 : 0;
}

/* ---- client ------------------------------------------------------- */

struct cli {
	struct rdmamsg_ep *ep;
	int connected, status, exports, checked, disc, closed;
	unsigned char check;
	uint8_t ex[2 * RDMAMSG_MR_EXPORT_SIZE];
};

static int op_done, op_status;
static uint64_t op_value;

static void op_cb(struct rdmamsg_ep *ep, int status, uint64_t value,
		  void *op_ctx)
{
	(void)ep;
	(void)op_ctx;
	op_value = value;
	op_done++;
	op_status = status;
}

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	c->connected = 1;
	c->status = status;
}

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len == sizeof(c->ex)) {
		memcpy(c->ex, data, len);
		c->exports = 1;
	} else if (len == 1) {
		c->check = *(unsigned char *)data;
		c->checked = 1;
	}
}

static void cli_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)status;
	((struct cli *)arg)->disc++;
}

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)arg;
	(void)ep;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_disconnect = cli_disc,
};

/* op -- run one operation to completion; its status (-ETIMEDOUT: none) */
static int op(struct rdmamsg_ctx *ctx, int posted)
{
	if (posted)
		return posted;
	op_done = 0;
	while (!op_done)
		if (!test_run_until(ctx, &op_done, 60000))
			return -ETIMEDOUT;
	return op_status;
}

static void up(struct rdmamsg_ctx *ctx, const char *addr, struct cli *c)
{
	memset(c, 0, sizeof(*c));
	if (rdmamsg_connect(ctx, addr, NULL, &cli_cbs, c, &c->ep))
		bail_out("connect");
	test_run_until(ctx, &c->exports, 60000);
	if (!c->exports || c->status)
		bail_out("no exports");
}

int main(void)
{
	struct rdmamsg_ctx *ctx, *ctx2;
	struct rdmamsg_mr *lmr, *mine, *sge_mr, *bad;
	struct rdmamsg_rmr *rlist, *rstr;
	enum rdmamsg_mr_layout lay;
	struct cli c, c2;
	struct iovec iov[4];
	unsigned char *lmem, *p0, *p1, *p2;
	char addr[64];
	uint64_t v = 0, want, got;
	size_t i, total = NPIECE * PIECE, stotal = BLOCK * COUNT, len;
	int rfd, good;
	pid_t pid;

	test_setup("mr_iov");
	unsetenv("RDMAMSG_NO_UMR");
	ctx = test_ctx();
	lmem = calloc(1, 16384);
	if (rdmamsg_mr_reg(ctx, lmem, 16384, 0, &lmr))
		bail_out("reg");
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_UMR, &v), 0,
	       "RDMAMSG_CAP_UMR on softrdma");
	is_int((int)v, 1, "value 1");
	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));
	up(ctx, addr, &c);
	is_int(rdmamsg_rmr_import(c.ex, RDMAMSG_MR_EXPORT_SIZE, &rlist), 0,
	       "import the list region's export");
	is_int(rdmamsg_rmr_import(c.ex + RDMAMSG_MR_EXPORT_SIZE,
				  RDMAMSG_MR_EXPORT_SIZE, &rstr),
	       0, "import the strided region's export");
	rdmamsg_rmr_get_size(rlist, &len);
	is_int((int)len, (int)total, "the list region is 64 x 47 bytes");
	rdmamsg_rmr_get_size(rstr, &len);
	is_int((int)len, (int)stotal, "the strided one 100 x 24 bytes");

	/* the peer reads and writes each in one operation */
	for (i = 0; i < total; i++)
		lmem[i] = pat(i, 1);
	is_int(op(ctx,
		  rdmamsg_write(c.ep, lmr, 0, rlist, 0, total, op_cb, NULL)),
	       0, "one rdmamsg_write over the 64 pieces");
	is_int(op(ctx,
		  rdmamsg_read(c.ep, lmr, 4096, rlist, 0, total, op_cb, NULL)),
	       0, "one rdmamsg_read of them back");
	ok(!memcmp(lmem + 4096, lmem, total), "byte for byte");
	is_int(op(ctx,
		  rdmamsg_read(c.ep, lmr, 8192, rstr, 0, stotal, op_cb, NULL)),
	       0, "one rdmamsg_read of the 100 strided blocks");
	for (i = 0, good = 1; i < stotal; i++)
		good &= lmem[8192 + i] == pat(i, 3);
	ok(good, "every block's bytes, none of the gaps'");
	for (i = 0; i < stotal; i++)
		lmem[8192 + i] = pat(i, 2);
	is_int(op(ctx,
		  rdmamsg_write(c.ep, lmr, 8192, rstr, 0, stotal, op_cb, NULL)),
	       0, "one rdmamsg_write into the strided blocks");
	is_int(rdmamsg_send(c.ep, "check", 5, NULL), 0, "ask the owner");
	test_run_until(ctx, &c.checked, 60000);
	ok(c.checked && c.check == 1,
	   "owner: every piece and block holds what was written, every gap "
	   "is untouched");
	/* atomics on the strided region, exported with remote atomic access
	 * (mlx5dv_wr_mr_interleaved takes it): 8 bytes inside one block,
	 * the prior value back */
	memcpy(&want, lmem + 8192 + BLOCK, 8);
	is_int(op(ctx, rdmamsg_atomic_fadd(c.ep, rstr, BLOCK, 1, op_cb, NULL)),
	       0, "rdmamsg_atomic_fadd at the strided region's second block");
	ok(op_value == want, "the prior value back");
	is_int(op(ctx, rdmamsg_atomic_cas(c.ep, rstr, BLOCK, want + 1, 5, op_cb,
					  NULL)),
	       0, "rdmamsg_atomic_cas there");
	ok(op_value == want + 1, "the added value back");
	is_int(op(ctx,
		  rdmamsg_read(c.ep, lmr, 8192, rstr, BLOCK, 8, op_cb, NULL)),
	       0, "read the 8 bytes back");
	memcpy(&got, lmem + 8192, 8);
	ok(got == 5, "they hold the swapped value (%llu)",
	   (unsigned long long)got);
	is_int(rdmamsg_write(c.ep, lmr, 0, rlist, 1, total, op_cb, NULL),
	       -ERANGE, "one byte past the list region: -ERANGE");

	/* a region of ours over two pieces as the local side */
	p0 = malloc(100);
	p1 = malloc(100);
	p2 = malloc(100);
	iov[0].iov_base = p0;
	iov[0].iov_len = 60;
	iov[1].iov_base = p1;
	iov[1].iov_len = 100;
	iov[2].iov_base = p2;
	iov[2].iov_len = 40;
	is_int(rdmamsg_mr_reg_iov(ctx, iov, 3, RDMAMSG_ACCESS_REMOTE_READ,
				  &mine),
	       0, "register three pieces of ours");
	lay = RDMAMSG_MR_LAYOUT_CONTIG;
	rdmamsg_mr_get_layout(mine, &lay);
	is_int(lay, RDMAMSG_MR_LAYOUT_UMR, "layout: UMR");
	is_int(op(ctx,
		  rdmamsg_read(c.ep, mine, 10, rlist, 3, 150, op_cb, NULL)),
	       0, "read into our pieces 1-2 (an SGE list of two)");
	ok(!memcmp(p0 + 10, lmem + 3, 50) && !memcmp(p1, lmem + 53, 100),
	   "scattered into our pieces");
	is_int(rdmamsg_read(c.ep, mine, 0, rlist, 0, 200, op_cb, NULL),
	       -ENOTSUP, "a range over three pieces of ours: -ENOTSUP");
	for (i = 0; i < 200; i++)
		(i < 60	   ? p0
		 : i < 160 ? p1
			   : p2)[i < 60	   ? i
				 : i < 160 ? i - 60
					   : i - 160] = (unsigned char)(i + 1);
	c.checked = 0;
	is_int(rdmamsg_send_mr(c.ep, mine, 0, 200, NULL), 0,
	       "rdmamsg_send_mr of our three pieces (the peer pulls them "
	       "through the UMR key)");
	test_run_until(ctx, &c.checked, 60000);
	ok(c.checked && c.check == 1, "the peer got the 200 bytes in order");

	/* bad arguments */
	iov[3] = iov[0];
	iov[3].iov_len = 0;
	is_int(rdmamsg_mr_reg_iov(ctx, iov, 4, 0, &bad), -EINVAL,
	       "a zero-length piece: -EINVAL");
	is_int(rdmamsg_mr_reg_iov(ctx, iov, 0, 0, &bad), -EINVAL,
	       "no piece: -EINVAL");
	is_int(rdmamsg_mr_reg_iov(ctx, iov, 1025, 0, &bad), -EINVAL,
	       "1025 pieces: -EINVAL");
	is_int(rdmamsg_mr_reg_strided(ctx, p0, 24, 16, 4, 0, &bad), -EINVAL,
	       "stride below block: -EINVAL");
	is_int(rdmamsg_mr_reg_strided(ctx, p0, 8, SIZE_MAX / 4, 8, 0, &bad),
	       -EINVAL, "a strided span that wraps: -EINVAL");

	/* UMR forced off: the SGE fallback */
	setenv("RDMAMSG_NO_UMR", "1", 1);
	ctx2 = test_ctx();
	is_int(rdmamsg_ctx_query_caps(ctx2, RDMAMSG_CAP_UMR, &v), -ENOTSUP,
	       "RDMAMSG_NO_UMR=1: RDMAMSG_CAP_UMR -ENOTSUP");
	is_int(rdmamsg_mr_reg_iov(ctx2, iov, 3, RWA, &sge_mr), 0,
	       "the same three pieces register");
	lay = RDMAMSG_MR_LAYOUT_CONTIG;
	rdmamsg_mr_get_layout(sge_mr, &lay);
	is_int(lay, RDMAMSG_MR_LAYOUT_SGE, "layout: SGE list");
	{
		uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];

		is_int(rdmamsg_mr_export(sge_mr, ex, sizeof(ex)), -ENOTSUP,
		       "its export: -ENOTSUP (no one key for a peer)");
	}
	up(ctx2, addr, &c2);
	rdmamsg_rmr_free(&rlist);
	rdmamsg_rmr_import(c2.ex, RDMAMSG_MR_EXPORT_SIZE, &rlist);
	memset(p1, 0x42, 100);
	memset(p2, 0x43, 40);
	is_int(op(ctx2,
		  rdmamsg_write(c2.ep, sge_mr, 60, rlist, 0, 140, op_cb, NULL)),
	       0, "write from pieces 1-2 as an SGE list");
	is_int(rdmamsg_send_mr(c2.ep, sge_mr, 0, 10, NULL), -ENOTSUP,
	       "rdmamsg_send_mr of it: -ENOTSUP");
	is_int(rdmamsg_write(c2.ep, sge_mr, 0, rlist, 0, 200, op_cb, NULL),
	       -ENOTSUP, "three pieces in one write: -ENOTSUP");
	memset(lmem, 0, 200);
	is_int(op(ctx, rdmamsg_read(c.ep, lmr, 0, rlist, 0, 140, op_cb, NULL)),
	       0, "read it back through the UMR context");
	for (i = 0, good = 1; i < 140; i++)
		good &= lmem[i] == (i < 100 ? 0x42 : 0x43);
	ok(good, "the SGE list's bytes landed");

	rdmamsg_ep_close(c.ep, cli_closed);
	rdmamsg_ep_close(c2.ep, cli_closed);
	test_idle(ctx, 200);
	test_idle(ctx2, 200);
	is_int(test_wait_child(pid), 0, "owner's checks pass");
	rdmamsg_rmr_free(&rlist);
	rdmamsg_rmr_free(&rstr);
	is_int(rdmamsg_mr_dereg(&mine), 0, "dereg our UMR region");
	is_int(rdmamsg_mr_dereg(&sge_mr), 0, "dereg the SGE region");
	rdmamsg_mr_dereg(&lmr);
	is_int(rdmamsg_ctx_destroy(&ctx2), 0, "destroy the no-UMR context");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "destroy the UMR context");
	free(p0);
	free(p1);
	free(p2);
	free(lmem);
	close(rfd);
	return done_testing();
}
