/* SPDX-License-Identifier: MIT */
/*
 * rma_edge.c -- one-sided operations at their edges, in one process
 * (two contexts): every imported export, however malformed, is either
 * refused with -EINVAL or usable without a crash; an export whose access
 * flags were forged to grant a write is refused by the owner's device
 * (-EACCES, memory unchanged, the endpoint down with -EACCES); operations
 * in flight when the endpoint is closed complete exactly once, before the
 * close callback; every write with immediate is seen exactly once with
 * its immediate and length, also of length 0; zero-length writes and
 * reads at the regions' ends complete, past them they are -ERANGE; a
 * message sent after a write finds the write's data in place; a write or
 * read above the device's largest message is refused with -EMSGSIZE; on
 * a DC endpoint a write with immediate is -ENOTSUP (and a write goes);
 * writes, reads and atomics posted to a peer that died each complete once
 * with an error, the endpoint going down once.
 */
#include "config.h"

#include <stdint.h>
#include <sys/mman.h>

#include "../tap.h"
#include "../core/util.h"

#define LEN 4096

static int ncb, opdone, last_status, close_seen, cb_after_close;
static int nimm, imm_bad;
static uint32_t imm_next;

static void on_op(struct rdmamsg_ep *ep, int status, uint64_t value,
		  void *op_ctx)
{
	(void)ep;
	(void)value;
	(void)op_ctx;
	ncb++;
	opdone = 1;
	last_status = status;
	if (close_seen)
		cb_after_close++;
}

static void on_wimm(struct rdmamsg_ep *ep, uint32_t imm, size_t len, void *arg)
{
	(void)ep;
	(void)arg;
	if (imm != imm_next || len != imm_next % 7)
		imm_bad++;
	imm_next++;
	nimm++;
}

static void on_closed(struct rdmamsg_ep *ep, void *arg)
{
	struct test_side *s = arg;

	(void)ep;
	close_seen = 1;
	s->closed = 1;
}

static int disc_status;

static void cli_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	disc_status = status;
	test_side_on_disconnect(ep, status, arg);
}

static char *srv_mem;
static int nrecv, recv_stale;

/* srv_recv -- a message sent after a write: the write's bytes are there */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)data;
	(void)len;
	(void)flags;
	(void)arg;
	if (srv_mem[LEN - 1] != (char)imm || srv_mem[0] != (char)imm)
		recv_stale++;
	nrecv++;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = srv_recv,
	.on_disconnect = test_side_on_disconnect,
};

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = test_side_on_connect,
	.on_disconnect = cli_disc,
};

/* ---- a peer that dies (forked) ------------------------------------ */

static struct rdmamsg_mr *dmr;
static int dead_done;

/* dsrv_connect -- send the client our export */
static void dsrv_connect(struct rdmamsg_ep *ep, int status, int reason,
			 const void *pdata, size_t len, void *arg)
{
	uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];

	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	if (status || rdmamsg_mr_export(dmr, ex, sizeof(ex)) ||
	    rdmamsg_send(ep, ex, sizeof(ex), NULL))
		_exit(20);
}

/* dsrv_recv -- "die": leave at once, closing nothing */
static void dsrv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		      uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	if (len == 3 && !memcmp(data, "die", 3))
		_exit(0);
}

static const struct rdmamsg_ep_cbs dsrv_cbs = {
	.on_connect = dsrv_connect,
	.on_recv = dsrv_recv,
};

static void dsrv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		     const void *pdata, size_t len, void *arg)
{
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (rdmamsg_conn_req_accept(req, NULL, &dsrv_cbs, NULL, &ep))
		_exit(21);
}

/* dying_server -- a target that exits without closing when told */
static int dying_server(int wfd, void *arg)
{
	struct rdmamsg_listener *lst;
	struct rdmamsg_ctx *ctx;
	int never = 0;

	(void)arg;
	if (rdmamsg_ctx_create(NULL, &ctx) ||
	    rdmamsg_mr_alloc(ctx, LEN,
			     RDMAMSG_ACCESS_REMOTE_READ |
				     RDMAMSG_ACCESS_REMOTE_WRITE |
				     RDMAMSG_ACCESS_REMOTE_ATOMIC,
			     &dmr) ||
	    test_listen_report(ctx, dsrv_req, NULL, &lst, wfd))
		return 22;
	test_run_until(ctx, &never, 30000);
	return 23;
}

static struct rdmamsg_rmr *drmr;
static int dcli_up, dcli_disc, dcli_disc_status, dcli_closed;

static void dcli_connect(struct rdmamsg_ep *ep, int status, int reason,
			 const void *pdata, size_t len, void *arg)
{
	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	dcli_up = status ? -1 : 1;
}

static void dcli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		      uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	if (!drmr && rdmamsg_rmr_import(data, len, &drmr))
		drmr = NULL;
}

static void dcli_disc_cb(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)arg;
	dcli_disc++;
	dcli_disc_status = status;
}

static void dcli_closed_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	dcli_closed = 1;
}

static const struct rdmamsg_ep_cbs dcli_cbs = {
	.on_connect = dcli_connect,
	.on_recv = dcli_recv,
	.on_disconnect = dcli_disc_cb,
};

static int nbad;

static void dead_op(struct rdmamsg_ep *ep, int status, uint64_t value,
		    void *op_ctx)
{
	(void)ep;
	(void)value;
	(void)op_ctx;
	dead_done++;
	if (!status)
		nbad++;
}

/* peer_dies -- operations posted to a peer that has died each complete
 * once with an error; the endpoint goes down once */
static void peer_dies(struct rdmamsg_ctx *ctx, struct rdmamsg_mr *lmr)
{
	struct rdmamsg_ep *ep = NULL;
	int rfd, posted = 0, i, zero = 0;
	char addr[64];
	pid_t pid;

	pid = test_fork_server(dying_server, NULL, &rfd, addr, sizeof(addr));
	if (rdmamsg_connect(ctx, addr, NULL, &dcli_cbs, NULL, &ep))
		bail_out("connect to the dying peer");
	for (i = 0; i < 1000 && (!dcli_up || !drmr); i++)
		test_run_until(ctx, &zero, 10);
	if (dcli_up != 1 || !drmr)
		bail_out("no export from the dying peer");
	if (rdmamsg_send(ep, "die", 3, NULL))
		bail_out("send");
	/* gone before this side hears of it: not progressed meanwhile */
	is_int(test_wait_child(pid), 0, "the peer exited");
	for (i = 0; i < 4; i++) {
		posted += rdmamsg_write(ep, lmr, 0, drmr, 0, 64, dead_op,
					NULL) == 0;
		posted += rdmamsg_read(ep, lmr, 64, drmr, 64, 64, dead_op,
				       NULL) == 0;
		posted += rdmamsg_atomic_fadd(ep, drmr, 128, 1, dead_op,
					      NULL) == 0;
	}
	for (i = 0; i < 3000 && (dead_done < posted || !dcli_disc); i++)
		test_run_until(ctx, &zero, 10);
	test_run_until(ctx, &zero, 100);
	ok(posted > 0, "operations posted to the dead peer (%d)", posted);
	is_int(dead_done, posted, "each completed once");
	is_int(nbad, 0, "none with success");
	is_int(dcli_disc, 1, "the endpoint went down once");
	ok(dcli_disc_status < 0, "with an error (%d)", dcli_disc_status);
	is_int(rdmamsg_write(ep, lmr, 0, drmr, 0, 8, dead_op, NULL), -ENOTCONN,
	       "then: -ENOTCONN");
	rdmamsg_ep_close(ep, dcli_closed_cb);
	test_run_until(ctx, &dcli_closed, 10000);
	ok(dcli_closed, "closed");
	rdmamsg_rmr_free(&drmr);
	close(rfd);
}

/* up -- connect cli to srv (listening at addr) */
static void up(struct test_side *srv, struct test_side *cli, const char *addr)
{
	cli->up = cli->status = cli->disc = cli->closed = 0;
	srv->up = srv->status = srv->disc = srv->closed = 0;
	srv->ep = cli->ep = NULL;
	if (rdmamsg_connect(cli->ctx, addr, NULL, &cli_cbs, cli, &cli->ep))
		bail_out("connect");
	test_run2(srv, cli, &cli->up, 10000);
	test_run2(srv, cli, &srv->up, 10000);
	if (cli->status || !cli->ep || !srv->ep)
		bail_out("no connection");
}

/* fuzz_import -- random and bit-flipped exports: -EINVAL or a region
 * whose bounds hold (addr + len does not wrap, len not 0) */
static void fuzz_import(const uint8_t *good)
{
	uint8_t ex[RDMAMSG_MR_EXPORT_SIZE + 8];
	unsigned int i, bad = 0, taken = 0;
	struct rdmamsg_rmr *r;
	size_t sz;

	srand(7);
	for (i = 0; i < 50000; i++) {
		size_t len = (size_t)rand() % (sizeof(ex) + 1), j;

		memcpy(ex, good, RDMAMSG_MR_EXPORT_SIZE);
		if (i & 1)
			for (j = 0; j < sizeof(ex); j++)
				ex[j] = (uint8_t)rand();
		else
			for (j = 0; j < 1 + (size_t)rand() % 4; j++)
				ex[(size_t)rand() % RDMAMSG_MR_EXPORT_SIZE] ^=
					(uint8_t)(1u << (rand() % 8));
		r = NULL;
		if (rdmamsg_rmr_import(ex, len, &r) == 0) {
			taken++;
			if (!r || rdmamsg_rmr_get_size(r, &sz) || !sz)
				bad++;
			rdmamsg_rmr_free(&r);
		} else if (r) {
			bad++;
		}
	}
	diag("%u of 50000 fuzzed exports imported", taken);
	is_int(bad, 0, "fuzzed imports: -EINVAL or a sane region");
}

int main(void)
{
	static struct test_side srv, cli;
	static char smem[LEN], cmem[LEN], want[LEN];
	uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];
	struct rdmamsg_mr *smr = NULL, *cmr = NULL;
	struct rdmamsg_rmr *rmr = NULL;
	struct rdmamsg_ep_attr *sa;
	uint32_t acc;
	char addr[64];
	int i, j, zero = 0;

	test_setup("rma_edge");
	srv.ctx = test_ctx();
	cli.ctx = test_ctx();
	memset(smem, 's', sizeof(smem));
	memset(cmem, 'c', sizeof(cmem));
	is_int(rdmamsg_mr_reg(srv.ctx, smem, LEN,
			      RDMAMSG_ACCESS_REMOTE_READ |
				      RDMAMSG_ACCESS_REMOTE_WRITE,
			      &smr),
	       0, "server region registered");
	is_int(rdmamsg_mr_reg(cli.ctx, cmem, LEN, 0, &cmr), 0,
	       "client region registered");
	if (!smr || !cmr || rdmamsg_mr_export(smr, ex, sizeof(ex)))
		bail_out("export");
	fuzz_import(ex);

	if (rdmamsg_ep_attr_new(&sa) ||
	    rdmamsg_ep_attr_set_on_write_imm(sa, on_wimm))
		bail_out("attributes");
	srv.cbs = &cbs;
	srv.attr = sa;
	is_int(test_side_listen(&srv, NULL, addr, sizeof(addr)), 0, "listen");

	/* writes with immediate, lengths 0 to 6: each seen exactly once */
	up(&srv, &cli, addr);
	if (rdmamsg_rmr_import(ex, sizeof(ex), &rmr))
		bail_out("import");
	for (i = 0; i < 64; i++) {
		opdone = 0;
		if (rdmamsg_write_imm(cli.ep, cmr, 0, rmr, 0, (size_t)i % 7,
				      (uint32_t)i, on_op, NULL))
			bail_out("write_imm %d", i);
		test_run2(&srv, &cli, &opdone, 5000);
		if (!opdone || last_status)
			break;
	}
	test_run2(&srv, &cli, &zero, 200);
	is_int(nimm, 64, "64 writes with immediate seen");
	is_int(imm_bad, 0, "each with its immediate and length");

	/* zero-length write and read at the regions' very ends */
	ncb = 0;
	is_int(rdmamsg_write(cli.ep, cmr, LEN, rmr, LEN, 0, on_op, NULL), 0,
	       "zero-length write at the end");
	is_int(rdmamsg_read(cli.ep, cmr, LEN, rmr, LEN, 0, on_op, NULL), 0,
	       "zero-length read at the end");
	is_int(rdmamsg_write(cli.ep, cmr, LEN + 1, rmr, 0, 0, on_op, NULL),
	       -ERANGE, "zero length past the local end: -ERANGE");
	is_int(rdmamsg_read(cli.ep, cmr, 0, rmr, LEN + 1, 0, on_op, NULL),
	       -ERANGE, "zero length past the remote end: -ERANGE");
	for (j = 0; j < 50 && ncb < 2; j++)
		test_run2(&srv, &cli, &zero, 10);
	ok(ncb == 2 && last_status == 0 && !cli.disc,
	   "both complete with 0, the endpoint up");

	/* above the device's largest message (ibv_query_port's max_msg_sz:
	 * 1 GiB on softrdma, as on mlx5) but within both regions: refused
	 * locally, nothing posted, the endpoint still up */
	{
		size_t big = ((size_t)1 << 30) + 4096;
		uint8_t fx[RDMAMSG_MR_EXPORT_SIZE];
		struct rdmamsg_rmr *frmr = NULL;
		struct rdmamsg_mr *bmr = NULL;
		uint64_t flen = (uint64_t)1 << 31;
		void *p = mmap(NULL, big, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
			       0);

		if (p == MAP_FAILED || rdmamsg_mr_reg(cli.ctx, p, big, 0, &bmr))
			bail_out("a region of 1 GiB + 4 KiB");
		memcpy(fx, ex, sizeof(fx));
		memcpy(fx + 24, &flen, 8); /* claims 2 GiB */
		if (rdmamsg_rmr_import(fx, sizeof(fx), &frmr))
			bail_out("import");
		ncb = 0;
		is_int(rdmamsg_write(cli.ep, bmr, 0, frmr, 0,
				     ((size_t)1 << 30) + 1, on_op, NULL),
		       -EMSGSIZE, "write of 1 GiB + 1: -EMSGSIZE");
		is_int(rdmamsg_read(cli.ep, bmr, 0, frmr, 0, big, on_op, NULL),
		       -EMSGSIZE, "read of 1 GiB + 4 KiB: -EMSGSIZE");
		test_run2(&srv, &cli, &zero, 100);
		is_int(ncb, 0, "no callback");
		opdone = 0;
		is_int(rdmamsg_write(cli.ep, cmr, 0, rmr, 0, 8, on_op, NULL), 0,
		       "the endpoint still takes a write");
		test_run2(&srv, &cli, &opdone, 5000);
		ok(opdone && last_status == 0 && !cli.disc,
		   "which completes; the endpoint is up");
		rdmamsg_rmr_free(&frmr);
		rdmamsg_mr_dereg(&bmr);
		munmap(p, big);
	}

	/* a message sent after a write is received after its data */
	srv_mem = smem;
	for (i = 0; i < 32; i++) {
		memset(cmem, 'A' + i, LEN);
		opdone = 0;
		if (rdmamsg_write(cli.ep, cmr, 0, rmr, 0, LEN, on_op, NULL) ||
		    rdmamsg_send_imm(cli.ep, "m", 1, (uint32_t)('A' + i), NULL))
			bail_out("write + send");
		test_run2(&srv, &cli, &opdone, 5000);
		for (j = 0; j < 5000 && nrecv < i + 1; j++)
			test_run2(&srv, &cli, &zero, 1);
	}
	is_int(nrecv, 32, "32 messages after writes");
	is_int(recv_stale, 0, "each saw its write's data");

	/* ops in flight at close: each completes once, before on_close */
	ncb = 0;
	for (i = 0; i < 8; i++)
		if (rdmamsg_write(cli.ep, cmr, 0, rmr, 0, LEN, on_op, NULL) ||
		    rdmamsg_read(cli.ep, cmr, 0, rmr, 0, LEN, on_op, NULL))
			bail_out("post");
	is_int(rdmamsg_ep_close(cli.ep, on_closed), 0, "close with 16 ops");
	test_run2(&srv, &cli, &cli.closed, 10000);
	test_run2(&srv, &cli, &zero, 200);
	is_int(ncb, 16, "every operation completed once");
	is_int(cb_after_close, 0, "none after the close callback");
	test_run2(&srv, &cli, &srv.disc, 10000);
	rdmamsg_ep_close(srv.ep, test_side_on_close);
	test_run2(&srv, &cli, &srv.closed, 10000);

	/* a forged export: read-only made read-write */
	up(&srv, &cli, addr);
	rdmamsg_rmr_free(&rmr);
	rdmamsg_mr_dereg(&smr);
	is_int(rdmamsg_mr_reg(srv.ctx, smem, LEN, RDMAMSG_ACCESS_REMOTE_READ,
			      &smr),
	       0, "read-only region");
	if (rdmamsg_mr_export(smr, ex, sizeof(ex)))
		bail_out("export");
	memcpy(&acc, ex + 4, 4);
	acc |= RDMAMSG_ACCESS_REMOTE_WRITE | RDMAMSG_ACCESS_REMOTE_ATOMIC;
	memcpy(ex + 4, &acc, 4);
	is_int(rdmamsg_rmr_import(ex, sizeof(ex), &rmr), 0,
	       "import the forged export");
	memcpy(want, smem, LEN);
	ncb = 0;
	opdone = 0;
	is_int(rdmamsg_write(cli.ep, cmr, 0, rmr, 0, 64, on_op, NULL), 0,
	       "forged write accepted locally");
	test_run2(&srv, &cli, &opdone, 5000);
	test_run2(&srv, &cli, &cli.disc, 5000);
	is_int(last_status, -EACCES, "the device refused it: -EACCES");
	ok(!memcmp(smem, want, LEN), "the region is unchanged");
	is_int(disc_status, -EACCES, "endpoint down with -EACCES");
	rdmamsg_ep_close(cli.ep, test_side_on_close);
	test_run2(&srv, &cli, &srv.disc, 10000);
	rdmamsg_ep_close(srv.ep, test_side_on_close);
	test_run2(&srv, &cli, &cli.closed, 10000);
	test_run2(&srv, &cli, &srv.closed, 10000);

	/* a DC endpoint: no write with immediate (-ENOTSUP), writes go */
	{
		struct rdmamsg_srq_attr qa = {.max_bufs = 64, .buf_size = 8192};
		struct rdmamsg_srq *ssrq = NULL, *csrq = NULL;
		struct rdmamsg_ep_attr *ca = NULL;
		uint64_t v;

		if (rdmamsg_ctx_query_caps(cli.ctx, RDMAMSG_CAP_DC, &v)) {
			skip_one("no DC here");
			skip_one("no DC here");
			skip_one("no DC here");
			rdmamsg_listener_close(srv.lst, test_side_on_lclose);
			test_run2(&srv, &cli, &srv.lclosed, 5000);
			goto no_dc;
		}
		if (rdmamsg_srq_create(srv.ctx, &qa, &ssrq) ||
		    rdmamsg_srq_create(cli.ctx, &qa, &csrq) ||
		    rdmamsg_ep_attr_set_srq(sa, ssrq) ||
		    rdmamsg_ep_attr_new(&ca) ||
		    rdmamsg_ep_attr_set_transport(ca, RDMAMSG_TRANSPORT_DC) ||
		    rdmamsg_ep_attr_set_srq(ca, csrq))
			bail_out("DC setup");
		cli.up = cli.status = cli.disc = cli.closed = 0;
		srv.up = srv.status = srv.disc = srv.closed = 0;
		srv.ep = cli.ep = NULL;
		if (rdmamsg_connect(cli.ctx, addr, ca, &cli_cbs, &cli, &cli.ep))
			bail_out("DC connect");
		test_run2(&srv, &cli, &cli.up, 10000);
		test_run2(&srv, &cli, &srv.up, 10000);
		if (cli.status || !srv.ep)
			bail_out("no DC connection");
		rdmamsg_rmr_free(&rmr);
		rdmamsg_mr_dereg(&smr);
		if (rdmamsg_mr_reg(srv.ctx, smem, LEN,
				   RDMAMSG_ACCESS_REMOTE_WRITE, &smr) ||
		    rdmamsg_mr_export(smr, ex, sizeof(ex)) ||
		    rdmamsg_rmr_import(ex, sizeof(ex), &rmr))
			bail_out("region");
		test_run2(&srv, &cli, &zero, 100); /* credits come */
		ncb = nimm = 0;
		is_int(rdmamsg_write_imm(cli.ep, cmr, 0, rmr, 0, 8, 1, on_op,
					 NULL),
		       -ENOTSUP, "DC: write with immediate is -ENOTSUP");
		opdone = 0;
		memset(cmem, 'D', 8);
		if (rdmamsg_write(cli.ep, cmr, 0, rmr, 0, 8, on_op, NULL))
			bail_out("DC write");
		test_run2(&srv, &cli, &opdone, 5000);
		test_run2(&srv, &cli, &zero, 100);
		ok(ncb == 1 && last_status == 0 && nimm == 0 &&
			   !memcmp(smem, "DDDDDDDD", 8),
		   "DC: a write goes, one callback, nothing else heard");
		ok(test_side_close2(&srv, &cli, 10000), "DC endpoints closed");
		rdmamsg_ep_attr_delete(&ca);
		if (test_srq_close(srv.ctx, ssrq, 5000) ||
		    test_srq_close(cli.ctx, csrq, 5000))
			bail_out("srq close");
	}
no_dc:
	peer_dies(cli.ctx, cmr);
	rdmamsg_ep_attr_delete(&sa);
	is_int(rdmamsg_rmr_free(&rmr), 0, "import freed");
	is_int(rdmamsg_mr_dereg(&cmr), 0, "client region deregistered");
	is_int(rdmamsg_mr_dereg(&smr), 0, "server region deregistered");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	return done_testing();
}
