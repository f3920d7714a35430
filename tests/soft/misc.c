/* SPDX-License-Identifier: MIT */
/* misc.c -- ibv_rereg_mr, ibv_resize_cq, create flags, inline grant, and
 * the device attributes and cmd_fd that programs rely on */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

static struct tctx t;
static struct ibv_cq *acq, *bcq;
static char *abuf, *bbuf, *cbuf;
static struct ibv_mr *amr;

#define BUFSZ 4096
#define NO_WC 999

static void pair(struct ibv_qp **a, struct ibv_qp **b)
{
	struct ibv_qp_init_attr ia;
	int acc = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.sq_sig_all = 1;
	ia.send_cq = ia.recv_cq = acq;
	*a = ibv_create_qp(t.pd, &ia);
	ia.send_cq = ia.recv_cq = bcq;
	*b = ibv_create_qp(t.pd, &ia);
	if (!*a || !*b)
		bail_out("create_qp");
	if (t_connect(*a, (*b)->qp_num, acc, 12, 7, 14, 7) ||
	    t_connect(*b, (*a)->qp_num, acc, 12, 7, 14, 7))
		bail_out("connect");
}

static void unpair(struct ibv_qp *a, struct ibv_qp *b)
{
	struct ibv_wc wc[16];

	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	while (ibv_poll_cq(acq, 16, wc) > 0)
		;
	while (ibv_poll_cq(bcq, 16, wc) > 0)
		;
}

static int one_status(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	return t_wait(cq, &wc, 1, 30000) == 1 ? (int)wc.status : NO_WC;
}

static int write_status(struct ibv_qp *a, uint64_t raddr, uint32_t rkey)
{
	if (t_post(a, IBV_WR_RDMA_WRITE, abuf, 8, amr->lkey, 1, 0, raddr, rkey))
		return -2;
	return one_status(acq);
}

/* rereg_err -- ibv_rereg_mr's result and errno, as result * 1000 + errno */
static int rereg_err(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
		     void *addr, size_t len, int access)
{
	int r;

	errno = 0;
	r = ibv_rereg_mr(mr, flags, pd, addr, len, access);
	return r ? r * 1000 - errno : 0;
}

static void test_rereg(void)
{
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct ibv_pd *pd2;
	uint32_t lkey, rkey;
	int la = IBV_ACCESS_LOCAL_WRITE;
	int ra = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	mr = ibv_reg_mr(t.pd, bbuf, BUFSZ, la);
	if (!mr)
		bail_out("reg_mr");
	lkey = mr->lkey;
	rkey = mr->rkey;

	/* access */
	pair(&a, &b);
	is_int(write_status(a, (uintptr_t)bbuf, rkey), IBV_WC_REM_ACCESS_ERR,
	       "local-only MR refuses a remote write");
	unpair(a, b);
	pair(&a, &b);
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, ra),
	       0, "rereg access: add REMOTE_WRITE");
	ok(mr->lkey == lkey && mr->rkey == rkey, "keys unchanged");
	memset(abuf, 0x11, 8);
	is_int(write_status(a, (uintptr_t)bbuf + 8, rkey), IBV_WC_SUCCESS,
	       "remote write now allowed");
	ok(bbuf[8] == 0x11 && bbuf[15] == 0x11, "data landed");
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, la),
	       0, "rereg access: drop REMOTE_WRITE");
	is_int(write_status(a, (uintptr_t)bbuf, rkey), IBV_WC_REM_ACCESS_ERR,
	       "remote write refused again");
	unpair(a, b);

	/* translation */
	pair(&a, &b);
	is_int(ibv_rereg_mr(mr,
			    IBV_REREG_MR_CHANGE_TRANSLATION |
				    IBV_REREG_MR_CHANGE_ACCESS,
			    NULL, cbuf, 1024, ra),
	       0, "rereg translation to another buffer");
	ok(mr->addr == cbuf && mr->length == 1024, "mr addr and length");
	memset(abuf, 0x22, 8);
	memset(cbuf, 0, BUFSZ);
	is_int(write_status(a, (uintptr_t)cbuf + 1016, rkey), IBV_WC_SUCCESS,
	       "write at the new range's end");
	ok(cbuf[1016] == 0x22 && cbuf[1023] == 0x22, "data in the new buffer");
	is_int(write_status(a, (uintptr_t)bbuf, rkey), IBV_WC_REM_ACCESS_ERR,
	       "old range: REM_ACCESS_ERR");
	unpair(a, b);
	pair(&a, &b);
	is_int(t_post_recv(b, bbuf, 8, lkey, 3), 0, "post recv at old range");
	t_post(a, IBV_WR_SEND, abuf, 8, amr->lkey, 4, 0, 0, 0);
	is_int(one_status(bcq), IBV_WC_LOC_PROT_ERR,
	       "receive into the old range: LOC_PROT_ERR");
	is_int(one_status(acq), IBV_WC_REM_OP_ERR, "sender: REM_OP_ERR");
	unpair(a, b);

	/* PD */
	pd2 = ibv_alloc_pd(t.ctx);
	if (!pd2)
		bail_out("alloc_pd");
	pair(&a, &b);
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0,
	       "rereg to another PD");
	ok(mr->pd == pd2, "mr->pd updated");
	is_int(ibv_dealloc_pd(pd2), EBUSY, "new PD busy");
	is_int(write_status(a, (uintptr_t)cbuf, rkey), IBV_WC_REM_ACCESS_ERR,
	       "QP of the old PD: REM_ACCESS_ERR");
	unpair(a, b);
	pair(&a, &b);
	t_post(a, IBV_WR_SEND, cbuf, 8, lkey, 5, 0, 0, 0);
	is_int(one_status(acq), IBV_WC_LOC_PROT_ERR,
	       "local use from the old PD: LOC_PROT_ERR");
	unpair(a, b);
	pair(&a, &b);
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, t.pd, NULL, 0, 0), 0,
	       "rereg back");
	is_int(write_status(a, (uintptr_t)cbuf, rkey), IBV_WC_SUCCESS,
	       "works again");
	is_int(ibv_dealloc_pd(pd2), 0, "second PD free again");
	unpair(a, b);

	/* errors (libibverbs' checks: ERR_INPUT; the kernel's: ERR_CMD) */
	is_int(rereg_err(mr, 1 << 5, NULL, NULL, 0, 0),
	       IBV_REREG_MR_ERR_INPUT * 1000 - EINVAL, "unknown flag");
	is_int(rereg_err(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 64,
			 0),
	       IBV_REREG_MR_ERR_INPUT * 1000 - EINVAL,
	       "translation without address");
	is_int(rereg_err(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, bbuf, 0, 0),
	       IBV_REREG_MR_ERR_INPUT * 1000 - EINVAL,
	       "translation with length 0");
	is_int(rereg_err(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, la),
	       IBV_REREG_MR_ERR_INPUT * 1000 - EINVAL,
	       "access without CHANGE_ACCESS");
	is_int(rereg_err(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0),
	       IBV_REREG_MR_ERR_INPUT * 1000 - EINVAL,
	       "CHANGE_PD without a PD");
	is_int(rereg_err(mr, 0, NULL, NULL, 0, 0),
	       IBV_REREG_MR_ERR_CMD * 1000 - EINVAL, "no flag");
	is_int(rereg_err(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			 IBV_ACCESS_REMOTE_WRITE),
	       IBV_REREG_MR_ERR_CMD * 1000 - EINVAL,
	       "REMOTE_WRITE without LOCAL_WRITE");
	is_int(rereg_err(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			 IBV_ACCESS_ZERO_BASED | la),
	       IBV_REREG_MR_ERR_CMD * 1000 - EINVAL, "ZERO_BASED access");
	ok(mr->addr == cbuf && mr->length == 1024 && mr->pd == t.pd,
	   "failed rereg changed nothing");
	is_int(ibv_dereg_mr(mr), 0, "dereg");
}

static void test_resize(void)
{
	struct ibv_qp *a, *b;
	struct ibv_cq *cq;
	struct ibv_wc wc[16];
	struct ibv_qp_init_attr ia;
	int i, n;

	cq = ibv_create_cq(t.ctx, 3, NULL, NULL, 0);
	if (!cq)
		bail_out("create_cq");
	ok(cq->cqe >= 3, "cqe >= 3");
	is_int(ibv_resize_cq(cq, 1), 0, "resize down to 1");
	ok(cq->cqe >= 1, "cqe >= 1");
	is_int(ibv_resize_cq(cq, 7), 0, "resize up to 7");
	ok(cq->cqe >= 7, "cqe >= 7");
	is_int(ibv_resize_cq(cq, 0), EINVAL, "resize to 0: EINVAL");
	is_int(ibv_resize_cq(cq, -1), EINVAL, "resize to -1: EINVAL");
	is_int(ibv_resize_cq(cq, 1 << 30), EINVAL, "above max_cqe: EINVAL");
	is_int(ibv_resize_cq(NULL, 4), EINVAL, "NULL CQ: EINVAL");

	/* completions in the CQ survive a resize, in order */
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.sq_sig_all = 1;
	ia.send_cq = ia.recv_cq = cq;
	a = ibv_create_qp(t.pd, &ia);
	ia.send_cq = ia.recv_cq = bcq;
	b = ibv_create_qp(t.pd, &ia);
	if (!a || !b ||
	    t_connect(a, b->qp_num, IBV_ACCESS_REMOTE_WRITE, 12, 7, 14, 7) ||
	    t_connect(b, a->qp_num, IBV_ACCESS_REMOTE_WRITE, 12, 7, 14, 7))
		bail_out("qps");
	n = cq->cqe - 1;
	for (i = 0; i < n; i++)
		t_post(a, IBV_WR_RDMA_WRITE, abuf, 8, amr->lkey,
		       100 + (uint64_t)i, 0, (uintptr_t)abuf + 64, amr->rkey);
	/* amr has no remote access: the first write fails, the rest flush */
	is_int(ibv_resize_cq(cq, 1), EINVAL,
	       "resize below the completions held: EINVAL");
	is_int(ibv_resize_cq(cq, 31), 0, "resize up with completions held");
	ok(cq->cqe >= 31, "cqe >= 31");
	i = t_wait(cq, wc, n, 30000);
	is_int(i, n, "every completion kept");
	for (i = 0; i < n; i++)
		if (wc[i].wr_id != 100 + (uint64_t)i)
			break;
	is_int(i, n, "in order");
	is_int(wc[0].status, IBV_WC_REM_ACCESS_ERR, "first: REM_ACCESS_ERR");
	is_int(wc[n - 1].status, IBV_WC_WR_FLUSH_ERR, "last: flushed");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	while (ibv_poll_cq(bcq, 16, wc) > 0)
		;
	is_int(ibv_destroy_cq(cq), 0, "destroy resized CQ");
}

/* create_qp -- an RC QP with these caps and create flags; errno on NULL */
static struct ibv_qp *create_qp(uint32_t sge, uint32_t inl, int use_flags,
				uint32_t flags, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = sge;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = inl;
	ia.send_cq = ia.recv_cq = acq;
	ia.pd = t.pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	if (use_flags) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
		ia.create_flags = flags;
	}
	errno = 0;
	qp = ibv_create_qp_ex(t.ctx, &ia);
	if (cap)
		*cap = ia.cap;
	return qp;
}

static void test_qp_caps(void)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_qp_cap cap;
	struct ibv_qp *qp, *b;
	char data[128];
	struct ibv_sge sge = {(uintptr_t)data, 0, 0};
	struct ibv_send_wr wr, *bad;

	qp = create_qp(1, 0, 1, 0, NULL);
	ok(qp != NULL, "create flags 0 accepted");
	if (qp)
		ibv_destroy_qp(qp);
	ok(!create_qp(1, 0, 1, IBV_QP_CREATE_SCATTER_FCS, NULL) &&
		   errno == EOPNOTSUPP,
	   "SCATTER_FCS: EOPNOTSUPP (as rxe)");
	ok(!create_qp(1, 0, 1, 1u << 20, NULL) && errno == EINVAL,
	   "unknown create flag: EINVAL");

	/* inline grant: max(sge * 16, inline), as rxe */
	qp = create_qp(1, 0, 0, 0, &cap);
	ok(qp && cap.max_inline_data == 16 && cap.max_send_sge == 1,
	   "1 SGE, no inline asked: 16 bytes inline granted");
	if (qp)
		ibv_destroy_qp(qp);
	qp = create_qp(2, 100, 0, 0, &cap);
	ok(qp && cap.max_inline_data == 100 && cap.max_send_sge == 6,
	   "inline 100 with 2 SGEs: 100 bytes and 6 SGEs granted");
	if (!qp)
		return;
	memset(&qa, 0, sizeof(qa));
	ibv_query_qp(qp, &qa, IBV_QP_CAP, &ia);
	is_int(ia.cap.max_inline_data, 100, "query_qp reports the grant");
	b = create_qp(1, 0, 0, 0, NULL);
	if (!b || t_connect(qp, b->qp_num, 0, 12, 7, 14, 7) ||
	    t_connect(b, qp->qp_num, 0, 12, 7, 14, 7))
		bail_out("connect");
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_INLINE;
	sge.length = 101;
	is_int(ibv_post_send(qp, &wr, &bad), EINVAL,
	       "inline above the grant: EINVAL");
	ibv_destroy_qp(qp);
	ibv_destroy_qp(b);
	qp = create_qp(1, 16385, 0, 0, NULL); /* SOFT_MAX_INLINE + 1 */
	ok(!qp && errno == EINVAL, "inline above max: EINVAL");
}

static void test_device(void)
{
	struct ibv_device_attr_ex ax;
	struct ibv_device **l;
	struct ibv_context *c;
	struct pollfd p;
	int fd, nfd, d;

	memset(&ax, 0, sizeof(ax));
	is_int(ibv_query_device_ex(t.ctx, NULL, &ax), 0, "query_device_ex");
	is_int(ax.phys_port_cnt_ex, ax.orig_attr.phys_port_cnt,
	       "phys_port_cnt_ex = phys_port_cnt");
	is_int(ax.phys_port_cnt_ex, 1, "one port");
	ok(ax.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW,
	   "MEM_WINDOW capability");
	ok(ax.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B,
	   "MEM_WINDOW_TYPE_2B capability");
	ok(ax.orig_attr.max_mw > 0, "max_mw");

	fd = t.ctx->cmd_fd;
	ok(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC,
	   "cmd_fd is a valid close-on-exec fd");
	p.fd = fd;
	p.events = POLLIN;
	is_int(poll(&p, 1, 0), 0, "cmd_fd never reads ready");
	d = dup(fd);
	errno = 0;
	ok(!ibv_import_device(d) && errno == EOPNOTSUPP,
	   "ibv_import_device: EOPNOTSUPP (as rxe)");
	close(d);

	nfd = t_fd_count();
	l = ibv_get_device_list(NULL);
	c = l ? ibv_open_device(l[0]) : NULL;
	ibv_free_device_list(l);
	ok(c && c->cmd_fd >= 0 && c->cmd_fd != fd, "a second context's cmd_fd");
	if (c)
		ibv_close_device(c);
	is_int(t_fd_count(), nfd, "close_device closes cmd_fd");
}

int main(void)
{
	t_isolate("misc");
	if (t_open(&t, 16))
		bail_out("open");
	acq = ibv_create_cq(t.ctx, 64, NULL, NULL, 0);
	bcq = ibv_create_cq(t.ctx, 64, NULL, NULL, 0);
	abuf = calloc(1, BUFSZ);
	bbuf = calloc(1, BUFSZ);
	cbuf = calloc(1, BUFSZ);
	if (!acq || !bcq || !abuf || !bbuf || !cbuf)
		bail_out("setup");
	amr = ibv_reg_mr(t.pd, abuf, BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	if (!amr)
		bail_out("reg_mr");
	test_rereg();
	test_resize();
	test_qp_caps();
	test_device();
	ibv_dereg_mr(amr);
	ibv_destroy_cq(acq);
	ibv_destroy_cq(bcq);
	t_close(&t);
	free(abuf);
	free(bbuf);
	free(cbuf);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
