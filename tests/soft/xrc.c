/* SPDX-License-Identifier: MIT */
/* xrc.c -- XRC on softrdma: domains (private, one per file across
 * processes, O_CREAT / O_EXCL, EBUSY while used), XRC SRQ numbers, an
 * initiator's SENDs through one target QP into two SRQs of its domain
 * (data, qp_num the target's, src_qp the initiator's, immediate), an SRQ
 * of another domain or no SRQ (IBV_WC_REM_INV_REQ_ERR), an empty SRQ (RNR
 * retries exhausted), a SEND into an SRQ of another process, ibv_open_qp
 * there, bad arguments refused as rdma-core and the kernel refuse them,
 * nothing left in /dev/shm */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

#define BUF 4096

static char path[64];
static pid_t path_owner;

/* path_rm -- at exit, passed or bailed out: the domain file goes (its
 * maker's exit only, not a forked child's) */
static void path_rm(void)
{
	if (getpid() == path_owner)
		unlink(path);
}

struct child_res {
	int recv_ok;	 /* the SEND landed in the child's SRQ, intact */
	uint32_t qp_num; /* as its completion said */
	uint32_t src_qp;
	int open_ok;	/* ibv_open_qp of the parent's target */
	int open_bad;	/* ... refused from another domain: EINVAL */
	int open_state; /* the state a handle queries */
	int close_busy; /* close_xrcd while the handle is open: EBUSY */
	int destroy_ok; /* the handle destroyed */
	int excl;	/* O_CREAT | O_EXCL on the shared file: EINVAL */
	int hidden_ok;	/* a SEND through the target its creator destroyed */
	uint32_t srqn;	/* (to the parent) */
};

/* tgt_qp -- an XRC target of x */
static struct ibv_qp *tgt_qp(struct tctx *t, struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_RECV;
	a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	a.xrcd = x;
	errno = 0;
	return ibv_create_qp_ex(t->ctx, &a);
}

/* ini_qp -- an XRC initiator on t's PD and CQ */
static struct ibv_qp *ini_qp_ops(struct tctx *t, uint64_t send_ops)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_SEND;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = t->pd;
	a.send_cq = t->cq;
	a.cap.max_send_wr = 16;
	a.cap.max_send_sge = 1;
	if (send_ops) { /* an ibv_qp_ex of those operations */
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = send_ops;
	}
	errno = 0;
	return ibv_create_qp_ex(t->ctx, &a);
}

static struct ibv_qp *ini_qp(struct tctx *t)
{
	return ini_qp_ops(t, 0);
}

/* tgt_up -- a target to RTR towards the initiator ini_qpn: RC's masks,
 * which XRC_TGT shares up to RTR, then RC's RTS, which it refuses (it
 * takes no RETRY_CNT, RNR_RETRY nor MAX_QP_RD_ATOMIC): 0 when so */
static int tgt_up(struct ibv_qp *qp, uint32_t ini_qpn, const union ibv_gid *g)
{
	int r = t_connect_gid(qp, ini_qpn, g, IBV_ACCESS_REMOTE_WRITE, 1, 7, 14,
			      7);

	return r == EINVAL && t_qp_state(qp) == IBV_QPS_RTR ? 0 : -1;
}

/* ini_up -- an initiator to RTS towards the target tgt_qpn */
static int ini_up(struct ibv_qp *qp, uint32_t tgt_qpn, const union ibv_gid *g,
		  int rnr_retry)
{
	struct ibv_qp_attr a;
	int r;

	r = t_qp_init(qp, 0);
	if (r)
		return r;
	t_rtr_attr(&a, tgt_qpn, g);
	/* the XRC_INI column: no MAX_DEST_RD_ATOMIC, no MIN_RNR_TIMER */
	r = ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MIN_RNR_TIMER);
	if (r != EINVAL)
		return -1;
	r = ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
	if (r)
		return r;
	return t_qp_rts(qp, rnr_retry, 14, 7);
}

/* xsend -- one signalled SEND (with immediate imm unless 0) of len bytes
 * at buf to XRC SRQ srqn */
static int xsend(struct ibv_qp *qp, void *buf, uint32_t len, uint32_t lkey,
		 uint32_t srqn, uint64_t wr_id, uint32_t imm)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)buf;
	sge.length = len;
	sge.lkey = lkey;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htobe32(imm);
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.qp_type.xrc.remote_srqn = srqn;
	return ibv_post_send(qp, &wr, &bad);
}

/* xsend_inv -- one signalled SEND_WITH_INV of rkey, len bytes at buf, to
 * XRC SRQ srqn */
static int xsend_inv(struct ibv_qp *qp, void *buf, uint32_t len, uint32_t lkey,
		     uint32_t srqn, uint64_t wr_id, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.invalidate_rkey = rkey;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.qp_type.xrc.remote_srqn = srqn;
	return ibv_post_send(qp, &wr, &bad);
}

/* local_wr -- one signalled BIND_MW of mw (a new rkey, len bytes of mr
 * at its start, remote write), or LOCAL_INV of rkey when mw is NULL */
static int local_wr(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr,
		    uint32_t len, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (mw) {
		wr.opcode = IBV_WR_BIND_MW;
		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = rkey;
		wr.bind_mw.bind_info.mr = mr;
		wr.bind_mw.bind_info.addr = (uintptr_t)mr->addr;
		wr.bind_mw.bind_info.length = len;
		wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	} else {
		wr.opcode = IBV_WR_LOCAL_INV;
		wr.invalidate_rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* done1 -- the one completion wr_id on cq: its opcode and status */
static int done1(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode op)
{
	struct ibv_wc wc;

	return t_wait(cq, &wc, 1, 5000) == 1 && wc.wr_id == wr_id &&
	       wc.opcode == op && wc.status == IBV_WC_SUCCESS;
}

/*
 * test_inv -- memory window operations on an XRC_SEND QP, as mlx5 and rxe
 * take them: SEND_WITH_INV through the target invalidates a window of the
 * SRQ's PD and its receive says so (IBV_WC_WITH_INV, invalidated_rkey);
 * BIND_MW, LOCAL_INV and ibv_bind_mw (type 1) run on the initiator's PD;
 * LOCAL_INV and SEND_WITH_INV staged through ibv_qp_ex too; an rkey that
 * cannot be invalidated (an MR's) completes the receive with
 * IBV_WC_REM_INV_REQ_ERR and the initiator's SEND the same (NAKed)
 */
static void test_inv(struct tctx *t, struct ibv_qp *tgt, struct ibv_cq *c1,
		     struct ibv_srq *s1, uint32_t n1, char *buf,
		     struct ibv_mr *mr, const union ibv_gid *g)
{
	struct ibv_qp *ini = ini_qp_ops(
		t, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV |
			   IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV);
	struct ibv_qp_ex *qx = ini ? ibv_qp_to_qp_ex(ini) : NULL;
	struct ibv_mw *mw = ibv_alloc_mw(t->pd, IBV_MW_TYPE_2);
	struct ibv_mw *mw1 = ibv_alloc_mw(t->pd, IBV_MW_TYPE_1);
	struct ibv_mr *bmr =
		ibv_reg_mr(t->pd, buf + 3 * BUF, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_MW_BIND);
	struct ibv_send_wr bad_wr, *bad = NULL;
	struct ibv_mw_bind b1;
	struct ibv_wc wc;
	uint32_t k, k1;
	int n;

	ok(ini && mw && mw1 && bmr && !ini_up(ini, tgt->qp_num, g, 7),
	   "an initiator, windows of types 1 and 2 of the SRQ's PD");
	if (!ini || !mw || !mw1 || !bmr)
		goto out;
	t_fill(buf, 700, 5);
	ok(!t_post_srq_recv(s1, buf + 2 * BUF, BUF, mr->lkey, 41) &&
		   !xsend_inv(ini, buf, 700, mr->lkey, n1, 40, mw->rkey),
	   "SEND_WITH_INV of the window's rkey posted");
	n = t_wait(t->cq, &wc, 1, 5000);
	ok(n == 1 && wc.wr_id == 40 && wc.status == IBV_WC_SUCCESS &&
		   wc.opcode == IBV_WC_SEND,
	   "it completes (%s)", n == 1 ? ibv_wc_status_str(wc.status) : "-");
	n = t_wait(c1, &wc, 1, 5000);
	ok(n == 1 && wc.wr_id == 41 && wc.status == IBV_WC_SUCCESS &&
		   wc.opcode == IBV_WC_RECV && wc.byte_len == 700 &&
		   wc.wc_flags == IBV_WC_WITH_INV &&
		   wc.invalidated_rkey == mw->rkey &&
		   wc.qp_num == tgt->qp_num && wc.src_qp == ini->qp_num &&
		   t_filled(buf + 2 * BUF, 700, 5),
	   "its receive: IBV_WC_WITH_INV, invalidated_rkey, the data intact");
	memset(&bad_wr, 0, sizeof(bad_wr));
	bad_wr.opcode = IBV_WR_BIND_MW; /* naming no window */
	bad_wr.send_flags = IBV_SEND_SIGNALED;
	ok(ibv_post_send(ini, &bad_wr, &bad) == EINVAL && bad == &bad_wr &&
		   t_wait(t->cq, &wc, 1, 50) == 0,
	   "BIND_MW naming no window: EINVAL, nothing completes");
	k = ibv_inc_rkey(mw->rkey);
	ok(!local_wr(ini, mw, bmr, 512, k, 44) &&
		   done1(t->cq, 44, IBV_WC_BIND_MW),
	   "BIND_MW of the type 2 window on the initiator: IBV_WC_BIND_MW");
	ok(!local_wr(ini, NULL, NULL, 0, k, 45) &&
		   done1(t->cq, 45, IBV_WC_LOCAL_INV),
	   "LOCAL_INV of its rkey: IBV_WC_LOCAL_INV");
	memset(&b1, 0, sizeof(b1));
	b1.wr_id = 46;
	b1.send_flags = IBV_SEND_SIGNALED;
	b1.bind_info.mr = bmr;
	b1.bind_info.addr = (uintptr_t)bmr->addr;
	b1.bind_info.length = 512;
	b1.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	k1 = mw1->rkey;
	ok(!ibv_bind_mw(ini, mw1, &b1) && mw1->rkey != k1 &&
		   done1(t->cq, 46, IBV_WC_BIND_MW),
	   "ibv_bind_mw of the type 1 window through the initiator");
	k = ibv_inc_rkey(k);
	ok(qx && !local_wr(ini, mw, bmr, 512, k, 47) &&
		   done1(t->cq, 47, IBV_WC_BIND_MW),
	   "the type 2 window bound again");
	if (qx) {
		ibv_wr_start(qx);
		qx->wr_id = 48;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_local_inv(qx, k);
		ok(!ibv_wr_complete(qx) && done1(t->cq, 48, IBV_WC_LOCAL_INV),
		   "ibv_wr_local_inv of its rkey: IBV_WC_LOCAL_INV");
		ok(!t_post_srq_recv(s1, buf + 2 * BUF, BUF, mr->lkey, 50),
		   "a receive");
		ibv_wr_start(qx);
		qx->wr_id = 49;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send_inv(qx, k);
		ibv_wr_set_xrc_srqn(qx, n1);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 300);
		ok(!ibv_wr_complete(qx) && done1(t->cq, 49, IBV_WC_SEND),
		   "ibv_wr_send_inv of it (free again) to SRQ 1: it completes");
		n = t_wait(c1, &wc, 1, 5000);
		ok(n == 1 && wc.wr_id == 50 && wc.status == IBV_WC_SUCCESS &&
			   wc.byte_len == 300 &&
			   wc.wc_flags == IBV_WC_WITH_INV &&
			   wc.invalidated_rkey == k,
		   "its receive: IBV_WC_WITH_INV, that rkey");
	}
	ok(!t_post_srq_recv(s1, buf + 2 * BUF, BUF, mr->lkey, 43) &&
		   !xsend_inv(ini, buf, 700, mr->lkey, n1, 42, mr->rkey),
	   "SEND_WITH_INV of an MR's rkey posted");
	n = t_wait(t->cq, &wc, 1, 5000);
	ok(n == 1 && wc.wr_id == 42 && wc.status == IBV_WC_REM_INV_REQ_ERR,
	   "the SEND: IBV_WC_REM_INV_REQ_ERR");
	n = t_wait(c1, &wc, 1, 5000);
	ok(n == 1 && wc.wr_id == 43 && wc.status == IBV_WC_REM_INV_REQ_ERR,
	   "its receive: IBV_WC_REM_INV_REQ_ERR");
out:
	ok((!mw || !ibv_dealloc_mw(mw)) && (!mw1 || !ibv_dealloc_mw(mw1)) &&
		   (!bmr || !ibv_dereg_mr(bmr)) &&
		   (!ini || !ibv_destroy_qp(ini)),
	   "windows, MR and initiator freed");
}

/* child -- another process: the parent's domain (by its file), an XRC SRQ
 * of its own that the parent's initiator fills through the parent's
 * target, and ibv_open_qp of that target */
static int child(int rfd, int wfd)
{
	struct child_res res;
	struct ibv_xrcd *x, *px;
	struct ibv_srq *srq;
	struct ibv_qp_open_attr oa;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_qp *h;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct tctx t;
	uint32_t tgt;
	char *buf = calloc(1, BUF);
	int fd, n;

	memset(&res, 0, sizeof(res));
	t_xrecv(rfd, &tgt, sizeof(tgt));
	fd = open(path, O_RDONLY);
	if (!buf || fd < 0 || t_open(&t, 16))
		return 1;
	x = t_xrcd(t.ctx, fd, 0); /* exists: no O_CREAT needed */
	px = t_xrcd(t.ctx, -1, O_CREAT);
	res.excl = !t_xrcd(t.ctx, fd, O_CREAT | O_EXCL) && errno == EINVAL;
	cq = ibv_create_cq(t.ctx, 8, NULL, NULL, 0);
	mr = ibv_reg_mr(t.pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	srq = x && cq ? t_xsrq(&t, x, cq, T_XSRQ_MASK, 16) : NULL;
	if (!x || !px || !cq || !mr || !srq ||
	    ibv_get_srq_num(srq, &res.srqn) ||
	    t_post_srq_recv(srq, buf, BUF, mr->lkey, 77))
		return 2;
	t_xsend(wfd, &res, sizeof(res)); /* our SRQ's number */
	n = t_wait(cq, &wc, 1, 5000);
	res.recv_ok = n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 77 &&
		      wc.opcode == IBV_WC_RECV && wc.byte_len == 1000 &&
		      t_filled(buf, 1000, 9);
	res.qp_num = wc.qp_num;
	res.src_qp = wc.src_qp;
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
		       IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = tgt;
	oa.qp_type = IBV_QPT_XRC_RECV;
	oa.xrcd = px;
	errno = 0;
	res.open_bad = !ibv_open_qp(t.ctx, &oa) && errno == EINVAL;
	oa.xrcd = x;
	h = ibv_open_qp(t.ctx, &oa);
	res.open_ok = h && h->qp_num == tgt && h->qp_type == IBV_QPT_XRC_RECV;
	if (h && !ibv_query_qp(h, &qa, IBV_QP_STATE, &qi))
		res.open_state = qa.qp_state;
	if (t_post_srq_recv(srq, buf, BUF, mr->lkey, 78))
		return 4;
	t_xsend(wfd, &res, sizeof(res)); /* the handle is open */
	n = t_wait(cq, &wc, 1, 5000);
	res.hidden_ok = n == 1 && wc.status == IBV_WC_SUCCESS &&
			wc.wr_id == 78 && wc.qp_num == tgt;
	ibv_destroy_srq(srq);
	res.close_busy = ibv_close_xrcd(x) == EBUSY;
	res.destroy_ok = h && !ibv_destroy_qp(h);
	if (ibv_close_xrcd(x) || ibv_close_xrcd(px))
		return 3;
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	t_close(&t);
	close(fd);
	free(buf);
	t_xsend(wfd, &res, sizeof(res));
	return 0;
}

/* test_args -- what rdma-core and the kernel refuse */
static void test_args(struct tctx *t, int fd)
{
	struct ibv_xrcd_init_attr a;
	struct ibv_xrcd *x;
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp_open_attr oa;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.comp_mask = IBV_XRCD_INIT_ATTR_FD;
	a.fd = -1;
	a.oflags = O_CREAT;
	errno = 0;
	ok(!ibv_open_xrcd(t->ctx, &a) && errno == EINVAL,
	   "open_xrcd without OFLAGS in comp_mask: EINVAL");
	a.comp_mask = IBV_XRCD_INIT_ATTR_RESERVED;
	errno = 0;
	ok(!ibv_open_xrcd(t->ctx, &a) && errno == EOPNOTSUPP,
	   "open_xrcd with an unknown comp_mask bit: EOPNOTSUPP");
	ok(!t_xrcd(t->ctx, 1000, O_CREAT) && errno == EBADF,
	   "open_xrcd of a closed fd: EBADF");
	ok(!t_xrcd(t->ctx, fd, 0) && errno == EAGAIN,
	   "no domain for the file yet and no O_CREAT: EAGAIN (kernel)");
	x = t_xrcd(t->ctx, -1, 0);
	ok(x != NULL, "fd -1: a private domain, O_CREAT or not");
	if (x)
		is_int(ibv_close_xrcd(x), 0, "close it");
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.pd = t->pd;
	errno = 0;
	ok(!ibv_create_qp_ex(t->ctx, &qa) && errno == EINVAL,
	   "target without a domain: EINVAL");
	qa.qp_type = IBV_QPT_XRC_SEND;
	errno = 0;
	ok(!ibv_create_qp_ex(t->ctx, &qa) && errno == EINVAL,
	   "initiator without a send CQ: EINVAL");
	qa.send_cq = t->cq;
	qa.cap.max_send_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND_WITH_INV |
			    IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
			    IBV_QP_EX_WITH_ATOMIC_WRITE;
	errno = 0;
	ok(!ibv_create_qp_ex(t->ctx, &qa) && errno == EOPNOTSUPP,
	   "initiator with the atomic write among its send ops: EOPNOTSUPP");
	qa.send_ops_flags &= ~(uint64_t)IBV_QP_EX_WITH_ATOMIC_WRITE;
	qp = ibv_create_qp_ex(t->ctx, &qa);
	ok(qp && !ibv_destroy_qp(qp),
	   "... with the windows' operations: created");
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM;
	oa.qp_type = IBV_QPT_XRC_RECV;
	errno = 0;
	ok(!ibv_open_qp(t->ctx, &oa) && errno == EINVAL,
	   "open_qp without a domain: EINVAL");
}

/* ib_paths -- in the IB mode (a process of its own: the mode is read once
 * a process), an initiator's paths by LID: to a port of this host taken,
 * to a LID no port has refused with EOPNOTSUPP without SOFTRDMA_NET
 * (another host's: a QP of that number here must not be reached; with it,
 * the network path: tests/netns/xrc-hosts.sh), as its alternate path too;
 * bits of what failed */
static int ib_paths(void)
{
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;
	struct ibv_xrcd *x;
	struct ibv_qp *tgt, *ini, *far;
	struct tctx t;
	int fails = 0;

	setenv("SOFTRDMA_LINK", "ib", 1);
	if (t_open(&t, 16) || ibv_query_port(t.ctx, 1, &pa) || !pa.lid)
		return 0xff;
	x = t_xrcd(t.ctx, -1, O_CREAT);
	tgt = x ? tgt_qp(&t, x) : NULL;
	ini = ini_qp(&t);
	far = ini_qp(&t);
	if (!tgt || !ini || !far || t_qp_init(ini, 0) || t_qp_init(far, 0))
		return 0xff;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = tgt->qp_num;
	a.ah_attr.dlid = pa.lid;
	a.ah_attr.port_num = 1;
#define RTR_MASK                                                        \
	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | \
	 IBV_QP_RQ_PSN)
	if (ibv_modify_qp(ini, &a, RTR_MASK))
		fails |= 1;
	a.ah_attr.dlid = (uint16_t)(pa.lid ^ 0x100);
	if (ibv_modify_qp(far, &a, RTR_MASK) != EOPNOTSUPP ||
	    t_qp_state(far) != IBV_QPS_INIT)
		fails |= 2;
	/* the alternate path, loaded at RTR: another host's LID refused */
	a.ah_attr.dlid = pa.lid;
	a.alt_ah_attr.dlid = (uint16_t)(pa.lid ^ 0x100);
	a.alt_ah_attr.port_num = 1;
	a.alt_port_num = 1;
	if (ibv_modify_qp(far, &a, RTR_MASK | IBV_QP_ALT_PATH) != EOPNOTSUPP)
		fails |= 4;
#undef RTR_MASK
	ibv_destroy_qp(far);
	ibv_destroy_qp(ini);
	ibv_destroy_qp(tgt);
	if (ibv_close_xrcd(x))
		fails |= 8;
	t_close(&t);
	return fails;
}

int main(void)
{
	struct tctx t;
	struct ibv_xrcd *x, *x2, *xo;
	struct ibv_srq *s1, *s2, *so, *s3;
	struct ibv_cq *c1, *c2, *co;
	struct ibv_qp *tgt, *ini, *ini2, *ini3, *far;
	struct ibv_device_attr da;
	struct ibv_qp_attr qa;
	struct ibv_mr *mr;
	struct ibv_wc wc[4];
	union ibv_gid g, fg;
	struct child_res res;
	uint32_t n1 = 0, n2 = 0, n3 = 0, no = 0;
	char *buf;
	pid_t pid;
	int fd, rfd, wfd, n;

	/* without the network path: another host's XRC paths are refused
	 * (with it they are carried: tests/netns/xrc-hosts.sh) */
	unsetenv("SOFTRDMA_NET");
	t_isolate("xrc");
	/* first: a child that has not opened the device yet reads the mode */
	n = t_fork_reap(ib_paths);
	if (!ok(n >= 0 && n < 256 && !(n & ~6),
		"IB mode: an initiator's path by LID to this host taken"))
		diag("  its exit status %d", n);
	ok(n >= 0 && n < 256 && !(n & 6),
	   "IB mode, no SOFTRDMA_NET: a DLID no port of this host has "
	   "(another host's), as primary or alternate path: EOPNOTSUPP, the "
	   "QP left in INIT");
	snprintf(path, sizeof(path), "/tmp/xrc-test-%d", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		bail_out("domain file");
	path_owner = getpid();
	atexit(path_rm);
	pid = t_spawn(child, &rfd, &wfd);
	buf = calloc(1, 4 * BUF);
	if (pid < 0 || !buf || t_open(&t, 64) || ibv_query_gid(t.ctx, 1, 1, &g))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 4 * BUF, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("mr");
	ok(!ibv_query_device(t.ctx, &da) &&
		   (da.device_cap_flags & IBV_DEVICE_XRC),
	   "IBV_DEVICE_XRC advertised");
	test_args(&t, fd);

	/* domains */
	x = t_xrcd(t.ctx, fd, O_CREAT);
	ok(x != NULL, "open the file's domain (O_CREAT)");
	ok(!t_xrcd(t.ctx, fd, O_CREAT | O_EXCL) && errno == EINVAL,
	   "O_CREAT | O_EXCL while it exists: EINVAL (kernel)");
	x2 = t_xrcd(t.ctx, fd, 0);
	ok(x2 != NULL, "opened again without O_CREAT");
	xo = t_xrcd(t.ctx, -1, O_CREAT);
	ok(xo != NULL, "a private domain");
	if (!x || !x2 || !xo)
		bail_out("domains");

	/* SRQs */
	c1 = ibv_create_cq(t.ctx, 8, NULL, NULL, 0);
	c2 = ibv_create_cq(t.ctx, 8, NULL, NULL, 0);
	co = ibv_create_cq(t.ctx, 8, NULL, NULL, 0);
	ok(!t_xsrq(&t, x, c1, T_XSRQ_MASK & ~IBV_SRQ_INIT_ATTR_CQ, 16) &&
		   errno == EINVAL,
	   "XRC SRQ without a CQ: EINVAL");
	ok(!t_xsrq(&t, x, c1, T_XSRQ_MASK & ~IBV_SRQ_INIT_ATTR_XRCD, 16) &&
		   errno == EINVAL,
	   "XRC SRQ without a domain: EINVAL");
	s1 = t_xsrq(&t, x, c1, T_XSRQ_MASK, 16);
	s2 = t_xsrq(&t, x2, c2, T_XSRQ_MASK,
		    16); /* the same domain, other handle */
	so = t_xsrq(&t, xo, co, T_XSRQ_MASK, 16);
	if (!c1 || !c2 || !co || !s1 || !s2 || !so)
		bail_out("srqs");
	n = ibv_get_srq_num(s1, &n1) || ibv_get_srq_num(s2, &n2) ||
	    ibv_get_srq_num(so, &no);
	ok(!n && n1 && n1 != n2 && n2 != no && n1 != no && n1 <= 0xffffff &&
		   n2 <= 0xffffff && no <= 0xffffff,
	   "three SRQ numbers, distinct (%u %u %u)", n1, n2, no);
	is_int(ibv_close_xrcd(x), EBUSY, "close a domain an SRQ uses: EBUSY");

	/* QPs: one target, initiators to it */
	tgt = tgt_qp(&t, x);
	ini = ini_qp(&t);
	ini2 = ini_qp(&t);
	ini3 = ini_qp(&t);
	if (!tgt || !ini || !ini2 || !ini3)
		bail_out("qps %d", errno);
	ok(tgt->qp_type == IBV_QPT_XRC_RECV && !tgt->pd && !tgt->send_cq,
	   "target: XRC_RECV, no PD, no CQ");
	is_int(tgt_up(tgt, ini->qp_num, &g), 0,
	       "target to RTR (XRC_TGT masks: RC's RTS refused)");
	is_int(ini_up(ini, tgt->qp_num, &g, 7), 0,
	       "initiator to RTS (XRC_INI masks)");
	is_int(ini_up(ini2, tgt->qp_num, &g, 0), 0,
	       "initiator 2 (rnr_retry 0)");
	is_int(ini_up(ini3, tgt->qp_num, &g, 7), 0, "initiator 3");
	far = ini_qp(&t);
	memset(&fg, 0, sizeof(fg));
	fg.raw[0] = 0x20; /* 2001:db8::1, no GID of this host */
	fg.raw[1] = 0x01;
	fg.raw[2] = 0x0d;
	fg.raw[3] = 0xb8;
	fg.raw[15] = 1;
	ok(far && ini_up(far, tgt->qp_num, &fg, 7) == -1,
	   "no SOFTRDMA_NET: an initiator towards another host's GID: "
	   "INIT->RTR refused");
	t_rtr_attr(&qa, tgt->qp_num, &fg);
	ok(far && ibv_modify_qp(far, &qa,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN) ==
			   EOPNOTSUPP,
	   "... with EOPNOTSUPP (XRC between hosts needs the network "
	   "path)");
	if (far)
		ibv_destroy_qp(far);

	/* two SRQs of the domain behind one target */
	t_fill(buf, 1000, 1);
	t_fill(buf + BUF, 3000, 2);
	ok(!t_post_srq_recv(s1, buf + 2 * BUF, BUF, mr->lkey, 11) &&
		   !t_post_srq_recv(s2, buf + 3 * BUF, BUF, mr->lkey, 22),
	   "a receive in each SRQ");
	ok(!xsend(ini, buf, 1000, mr->lkey, n1, 1, 0) &&
		   !xsend(ini, buf + BUF, 3000, mr->lkey, n2, 2, 0xabcd),
	   "a SEND to each SRQ");
	n = t_wait(t.cq, wc, 2, 5000);
	ok(n == 2 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 1 &&
		   wc[1].status == IBV_WC_SUCCESS && wc[1].wr_id == 2 &&
		   wc[0].opcode == IBV_WC_SEND && wc[0].qp_num == ini->qp_num,
	   "both SENDs complete on the initiator's CQ");
	n = t_wait(c1, wc, 1, 5000);
	ok(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 11 &&
		   wc[0].opcode == IBV_WC_RECV && wc[0].byte_len == 1000 &&
		   !(wc[0].wc_flags & IBV_WC_WITH_IMM) &&
		   t_filled(buf + 2 * BUF, 1000, 1),
	   "SRQ 1's CQ: its receive, the data intact");
	ok(n == 1 && wc[0].qp_num == tgt->qp_num && wc[0].src_qp == ini->qp_num,
	   "qp_num the target's, src_qp the initiator's (%u %u)", wc[0].qp_num,
	   wc[0].src_qp);
	n = t_wait(c2, wc, 1, 5000);
	ok(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 22 &&
		   wc[0].byte_len == 3000 &&
		   (wc[0].wc_flags & IBV_WC_WITH_IMM) &&
		   be32toh(wc[0].imm_data) == 0xabcd &&
		   t_filled(buf + 3 * BUF, 3000, 2) &&
		   wc[0].qp_num == tgt->qp_num,
	   "SRQ 2's CQ: the other SEND, with its immediate");
	is_int(t_wait(c1, wc, 1, 50) + t_wait(c2, wc, 1, 50), 0,
	       "nothing more");
	test_inv(&t, tgt, c1, s1, n1, buf, mr, &g);

	/* an empty SRQ: RNR, retries exhausted */
	ok(!xsend(ini2, buf, 100, mr->lkey, n1, 3, 0), "SEND to an empty SRQ");
	n = t_wait(t.cq, wc, 1, 5000);
	ok(n == 1 && wc[0].wr_id == 3 &&
		   wc[0].status == IBV_WC_RNR_RETRY_EXC_ERR,
	   "rnr_retry 0: IBV_WC_RNR_RETRY_EXC_ERR (%s)",
	   n == 1 ? ibv_wc_status_str(wc[0].status) : "none");

	/* an SRQ destroyed after an initiator reached it */
	s3 = t_xsrq(&t, x, c1, T_XSRQ_MASK, 16);
	ok(s3 && !ibv_get_srq_num(s3, &n3) &&
		   !t_post_srq_recv(s3, buf + 2 * BUF, BUF, mr->lkey, 44) &&
		   !xsend(ini3, buf, 10, mr->lkey, n3, 7, 0) &&
		   t_wait(t.cq, wc, 1, 5000) == 1 &&
		   wc[0].status == IBV_WC_SUCCESS &&
		   t_wait(c1, wc, 1, 5000) == 1 && wc[0].wr_id == 44,
	   "a third SRQ reached");
	ok(s3 && !ibv_destroy_srq(s3) &&
		   !xsend(ini3, buf, 10, mr->lkey, n3, 8, 0) &&
		   t_wait(t.cq, wc, 1, 5000) == 1 &&
		   wc[0].status == IBV_WC_REM_INV_REQ_ERR,
	   "destroyed, its number is refused: IBV_WC_REM_INV_REQ_ERR");
	ibv_destroy_qp(ini3);
	ini3 = ini_qp(&t);
	ok(ini3 && !ini_up(ini3, tgt->qp_num, &g, 7), "initiator 3 again");

	/* an SRQ of another domain, and a number no SRQ has */
	ok(!t_post_srq_recv(so, buf, 100, mr->lkey, 33) &&
		   !xsend(ini3, buf, 100, mr->lkey, no, 4, 0),
	   "SEND to an SRQ of another domain");
	n = t_wait(t.cq, wc, 1, 5000);
	ok(n == 1 && wc[0].wr_id == 4 && wc[0].status == IBV_WC_REM_INV_REQ_ERR,
	   "IBV_WC_REM_INV_REQ_ERR (%s)",
	   n == 1 ? ibv_wc_status_str(wc[0].status) : "none");
	is_int(t_wait(co, wc, 1, 50), 0, "its receive untouched");
	ok(!xsend(ini, buf, 100, mr->lkey, 0x7ff001, 5, 0),
	   "SEND to an SRQ number nobody has");
	n = t_wait(t.cq, wc, 1, 5000);
	ok(n == 1 && wc[0].wr_id == 5 && wc[0].status == IBV_WC_REM_INV_REQ_ERR,
	   "IBV_WC_REM_INV_REQ_ERR");

	/* a third SRQ in another process, reached through our target */
	ibv_destroy_qp(ini); /* in ERR since its last SEND */
	ini = ini_qp(&t);
	ok(ini &&
		   !ibv_modify_qp(
			   tgt,
			   &(struct ibv_qp_attr){.qp_state = IBV_QPS_RESET},
			   IBV_QP_STATE) &&
		   !tgt_up(tgt, ini->qp_num, &g) &&
		   !ini_up(ini, tgt->qp_num, &g, 7),
	   "target reset and connected to a new initiator");
	t_xsend(wfd, &tgt->qp_num, sizeof(tgt->qp_num));
	t_xrecv(rfd, &res, sizeof(res));
	n3 = res.srqn;
	t_fill(buf, 1000, 9);
	ok(!xsend(ini, buf, 1000, mr->lkey, n3, 6, 0),
	   "SEND to the other process's SRQ (%u)", n3);
	n = t_wait(t.cq, wc, 1, 5000);
	ok(n == 1 && wc[0].wr_id == 6 && wc[0].status == IBV_WC_SUCCESS,
	   "it completes");
	t_xrecv(rfd, &res, sizeof(res)); /* its handle of our target open */
	is_int(ibv_destroy_qp(tgt), 0,
	       "destroy the target while another process has it open");
	ok(!xsend(ini, buf, 500, mr->lkey, n3, 9, 0) &&
		   t_wait(t.cq, wc, 1, 5000) == 1 && wc[0].wr_id == 9 &&
		   wc[0].status == IBV_WC_SUCCESS,
	   "it lives on for that handle: a SEND through it completes");
	t_xrecv(rfd, &res, sizeof(res));
	ok(res.hidden_ok, "there: that SEND landed, naming the target");
	ok(res.recv_ok, "it landed in that SRQ, intact");
	ok(res.qp_num == tgt->qp_num && res.src_qp == ini->qp_num,
	   "its completion names our target and initiator");
	ok(res.excl, "there: O_CREAT | O_EXCL on the file: EINVAL");
	ok(res.open_bad, "there: open_qp in another domain: EINVAL");
	ok(res.open_ok, "there: ibv_open_qp of our target");
	is_int(res.open_state, IBV_QPS_RTR, "the handle queries RTR");
	ok(res.close_busy, "there: close_xrcd while the handle is open: EBUSY");
	ok(res.destroy_ok, "there: the handle destroyed");
	is_int(t_reap(pid), 0, "the other process exits 0");

	/* teardown: EBUSY until the last user is gone (the hidden target
	 * goes with its domain's close, its handle closed) */
	ok(!ibv_destroy_qp(ini) && !ibv_destroy_qp(ini2) &&
		   !ibv_destroy_qp(ini3),
	   "destroy the initiators");
	ok(!ibv_destroy_srq(s1) && !ibv_destroy_srq(s2) && !ibv_destroy_srq(so),
	   "destroy the SRQs");
	s3 = t_xsrq(&t, x, c1, T_XSRQ_MASK, 16);
	ok(s3 && ibv_destroy_cq(c1) == EBUSY,
	   "an XRC SRQ's CQ is busy while it lives");
	if (s3)
		ibv_destroy_srq(s3);
	ok(!ibv_close_xrcd(x) && !ibv_close_xrcd(x2) && !ibv_close_xrcd(xo),
	   "close the domains");
	x = t_xrcd(t.ctx, fd, 0);
	ok(!x && errno == EAGAIN, "the file's domain is gone with its last "
				  "close");
	ok(!ibv_destroy_cq(c1) && !ibv_destroy_cq(c2) && !ibv_destroy_cq(co),
	   "destroy the CQs");
	ibv_dereg_mr(mr);
	t_close(&t);
	close(fd);
	close(rfd);
	close(wfd);
	free(buf);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
