/* SPDX-License-Identifier: MIT */
/* mw.c -- memory windows: type 1 and 2 binds, invalidation, errors */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

static struct tctx t;
static struct ibv_cq *acq, *bcq;
static char *abuf, *bbuf;
static struct ibv_mr *amr, *bmr, *bmr_nobind;

#define BUFSZ 8192
#define NO_WC 999 /* one_wc: nothing completed */

/* pair -- a -> b connected QPs on their own CQs, every access on b */
static void pair(struct ibv_qp **a, struct ibv_qp **b)
{
	struct ibv_qp_init_attr ia;
	int acc = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_REMOTE_ATOMIC;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
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

/* one_wc -- the next completion of cq (status -1 if none in 2 s) */
static struct ibv_wc one_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	if (t_wait(cq, &wc, 1, 30000) != 1)
		wc.status = (enum ibv_wc_status)NO_WC;
	return wc;
}

/* no_wc -- nothing completes on cq within 200 ms (a refused post
 * completes nothing: one_wc would wait its 30 s out) */
static int no_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	return t_wait(cq, &wc, 1, 200) == 0;
}

/* write_status -- RDMA WRITE len bytes of abuf to (raddr, rkey) on a */
static int write_status(struct ibv_qp *a, uint64_t raddr, uint32_t rkey,
			uint32_t len)
{
	if (t_post(a, IBV_WR_RDMA_WRITE, abuf, len, amr->lkey, 7, 0, raddr,
		   rkey))
		return -2;
	return one_wc(acq).status;
}

/* post_inv -- LOCAL_INV or SEND_WITH_INV of rkey on qp */
static int post_inv(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t rkey)
{
	struct ibv_sge sge = {(uintptr_t)abuf, 16, amr->lkey};
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x1a;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = rkey;
	if (op == IBV_WR_SEND_WITH_INV) {
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static void test_alloc(void)
{
	struct ibv_mw *m1, *m2;

	m1 = ibv_alloc_mw(t.pd, IBV_MW_TYPE_1);
	m2 = ibv_alloc_mw(t.pd, IBV_MW_TYPE_2);
	ok(m1 && m2, "alloc type 1 and type 2 windows");
	if (!m1 || !m2)
		bail_out("alloc_mw");
	ok(m1->rkey && m2->rkey && m1->rkey != m2->rkey, "distinct rkeys");
	is_int(m1->type, IBV_MW_TYPE_1, "type 1");
	is_int(m2->type, IBV_MW_TYPE_2, "type 2");
	ok(m1->pd == t.pd && m1->context == t.ctx, "pd and context");
	ok(m1->rkey != amr->rkey && m1->rkey != bmr->rkey,
	   "window rkeys differ from MR keys");
	errno = 0;
	ok(!ibv_alloc_mw(t.pd, (enum ibv_mw_type)3) && errno == EINVAL,
	   "type 3: EINVAL");
	is_int(ibv_dealloc_pd(t.pd), EBUSY, "dealloc_pd with windows: EBUSY");
	is_int(ibv_dealloc_mw(m1), 0, "dealloc type 1");
	is_int(ibv_dealloc_mw(m2), 0, "dealloc type 2");
}

static void test_type1(void)
{
	struct ibv_qp *a, *b;
	struct ibv_mw *mw;
	struct ibv_mw_bind bind;
	struct ibv_wc wc;
	struct ibv_pd *pd2;
	struct ibv_mr *mr2;
	uint32_t old, r1;
	uint64_t base = (uintptr_t)bbuf + 1024;

	pair(&a, &b);
	mw = ibv_alloc_mw(t.pd, IBV_MW_TYPE_1);
	if (!mw)
		bail_out("alloc_mw");
	old = mw->rkey;
	memset(&bind, 0, sizeof(bind));
	bind.wr_id = 0x51;
	bind.send_flags = IBV_SEND_SIGNALED;
	bind.bind_info.mr = bmr;
	bind.bind_info.addr = base;
	bind.bind_info.length = 512;
	bind.bind_info.mw_access_flags =
		IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	is_int(ibv_bind_mw(b, mw, &bind), 0, "ibv_bind_mw");
	ok(mw->rkey != old && (mw->rkey & ~0xffu) == (old & ~0xffu),
	   "bind turned the rkey's tag (ibv_inc_rkey)");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_SUCCESS, "bind completes");
	is_int(wc.opcode, IBV_WC_BIND_MW, "opcode BIND_MW");
	is_int(wc.wr_id, 0x51, "bind wr_id");
	r1 = mw->rkey;

	memset(abuf, 0x5a, 64);
	memset(bbuf, 0, BUFSZ);
	is_int(write_status(a, base + 100, r1, 64), IBV_WC_SUCCESS,
	       "RDMA WRITE through the window");
	ok(bbuf[1124] == 0x5a && bbuf[1187] == 0x5a && !bbuf[1188] &&
		   !bbuf[1123],
	   "data landed at the window's address");
	memset(abuf, 0x77, 64);
	is_int(write_status(a, base + 512 - 64, r1, 64), IBV_WC_SUCCESS,
	       "write at the window's last bytes");
	ok(bbuf[1024 + 511] == 0x77, "last byte written");

	is_int(ibv_dereg_mr(bmr), EINVAL, "dereg of an MR with a bound window");
	is_int(ibv_rereg_mr(bmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND),
	       IBV_REREG_MR_ERR_CMD, "rereg of an MR with a bound window");

	/* rebinding turns the key: the old one stops working */
	is_int(ibv_bind_mw(b, mw, &bind), 0, "rebind");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "rebind completes");
	ok(mw->rkey != r1, "new rkey");
	is_int(write_status(a, base, mw->rkey, 8), IBV_WC_SUCCESS,
	       "new rkey works");
	is_int(write_status(a, base, r1, 8), IBV_WC_REM_ACCESS_ERR,
	       "old rkey: REM_ACCESS_ERR");
	is_int(t_qp_state(a), IBV_QPS_ERR, "initiator QP in ERR");
	unpair(a, b);

	pair(&a, &b);
	is_int(write_status(a, base + 512 - 8, mw->rkey, 16),
	       IBV_WC_REM_ACCESS_ERR, "write past the window's end");
	unpair(a, b);
	pair(&a, &b);
	is_int(write_status(a, base - 8, mw->rkey, 8), IBV_WC_REM_ACCESS_ERR,
	       "write before the window (inside the MR)");
	unpair(a, b);
	pair(&a, &b);
	is_int(write_status(a, (uintptr_t)bbuf, bmr->rkey, 8),
	       IBV_WC_REM_ACCESS_ERR,
	       "MR's own rkey (no remote access on the MR)");
	unpair(a, b);

	/* read-only window refuses writes */
	pair(&a, &b);
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	is_int(ibv_bind_mw(b, mw, &bind), 0, "bind read-only");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "read-only bind completes");
	memset(bbuf + 1024, 0x33, 32);
	if (t_post(a, IBV_WR_RDMA_READ, abuf, 32, amr->lkey, 8, 0, base,
		   mw->rkey))
		bail_out("post read");
	is_int(one_wc(acq).status, IBV_WC_SUCCESS, "RDMA READ through window");
	ok(abuf[0] == 0x33 && abuf[31] == 0x33, "read the window's bytes");
	is_int(write_status(a, base, mw->rkey, 8), IBV_WC_REM_ACCESS_ERR,
	       "write to a read-only window");
	unpair(a, b);

	/* zero-length bind: unbound */
	pair(&a, &b);
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	is_int(ibv_bind_mw(b, mw, &bind), 0, "bind again");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "bind completes");
	bind.bind_info.length = 0;
	bind.bind_info.addr = 0;
	bind.bind_info.mw_access_flags = 0;
	is_int(ibv_bind_mw(b, mw, &bind), 0, "zero-length bind (unbind)");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "unbind completes");
	is_int(ibv_rereg_mr(bmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND),
	       0, "rereg once the window is unbound");
	is_int(write_status(a, base, mw->rkey, 8), IBV_WC_REM_ACCESS_ERR,
	       "unbound window: REM_ACCESS_ERR");
	unpair(a, b);

	/* ibv_bind_mw's immediate errors */
	pair(&a, &b);
	bind.bind_info.mr = NULL;
	bind.bind_info.length = 64;
	is_int(ibv_bind_mw(b, mw, &bind), EINVAL, "no MR but a length: EINVAL");
	bind.bind_info.mr = bmr;
	bind.bind_info.addr = base;
	bind.bind_info.mw_access_flags =
		IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED;
	is_int(ibv_bind_mw(b, mw, &bind), EINVAL,
	       "zero-based type 1 window: EINVAL");
	pd2 = ibv_alloc_pd(t.ctx);
	mr2 = pd2 ? ibv_reg_mr(pd2, bbuf, BUFSZ,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
		  : NULL;
	if (!mr2)
		bail_out("pd2");
	bind.bind_info.mr = mr2;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	is_int(ibv_bind_mw(b, mw, &bind), EPERM, "MR of another PD: EPERM");
	ibv_dereg_mr(mr2);
	ibv_dealloc_pd(pd2);
	ok(no_wc(bcq), "no completion for refused binds");

	/* bind errors complete with MW_BIND_ERR */
	bind.bind_info.mr = bmr_nobind;
	bind.bind_info.addr = (uintptr_t)bmr_nobind->addr;
	bind.bind_info.length = 64;
	is_int(ibv_bind_mw(b, mw, &bind), 0, "post bind to MR w/o MW_BIND");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_MW_BIND_ERR, "MR without MW_BIND: BIND_ERR");
	is_int(t_qp_state(b), IBV_QPS_ERR, "QP in ERR after a bind error");
	unpair(a, b);
	pair(&a, &b);
	bind.bind_info.mr = bmr;
	bind.bind_info.addr = base;
	bind.bind_info.length = BUFSZ;
	is_int(ibv_bind_mw(b, mw, &bind), 0, "post bind beyond the MR");
	is_int(one_wc(bcq).status, IBV_WC_MW_BIND_ERR,
	       "window beyond the MR: BIND_ERR");
	unpair(a, b);
	pair(&a, &b);
	bind.bind_info.length = 64;
	bind.bind_info.mw_access_flags = 1u << 30;
	is_int(ibv_bind_mw(b, mw, &bind), 0, "post bind with unknown access");
	is_int(one_wc(bcq).status, IBV_WC_MW_BIND_ERR,
	       "unknown access flag: BIND_ERR");
	unpair(a, b);

	/* LOCAL_INV never invalidates a type 1 window nor a user MR */
	pair(&a, &b);
	is_int(post_inv(b, IBV_WR_LOCAL_INV, mw->rkey), 0, "post LOCAL_INV");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_LOC_QP_OP_ERR,
	       "LOCAL_INV of a type 1 window: LOC_QP_OP_ERR");
	is_int(wc.opcode, IBV_WC_LOCAL_INV, "opcode LOCAL_INV");
	unpair(a, b);
	pair(&a, &b);
	is_int(post_inv(b, IBV_WR_LOCAL_INV, bmr->rkey), 0, "post LOCAL_INV");
	is_int(one_wc(bcq).status, IBV_WC_LOC_QP_OP_ERR,
	       "LOCAL_INV of an MR: LOC_QP_OP_ERR");
	unpair(a, b);

	is_int(ibv_dealloc_mw(mw), 0, "dealloc type 1");
}

static void test_type2(void)
{
	struct ibv_qp *a, *b, *c, *d;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t rk;
	uint64_t base = (uintptr_t)bbuf + 2048;

	pair(&a, &b);
	mw = ibv_alloc_mw(t.pd, IBV_MW_TYPE_2);
	if (!mw)
		bail_out("alloc_mw");
	rk = ibv_inc_rkey(mw->rkey);
	is_int(t_bind2(b, mw, rk, bmr, base, 256, IBV_ACCESS_REMOTE_WRITE), 0,
	       "post type 2 bind");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_SUCCESS, "type 2 bind completes");
	is_int(wc.opcode, IBV_WC_BIND_MW, "opcode BIND_MW");
	memset(abuf, 0x42, 16);
	memset(bbuf, 0, BUFSZ);
	is_int(write_status(a, base + 8, rk, 16), IBV_WC_SUCCESS,
	       "write through the type 2 window");
	ok(bbuf[2056] == 0x42 && bbuf[2071] == 0x42 && !bbuf[2072],
	   "data at the window");
	is_int(write_status(a, base, mw->rkey, 8), IBV_WC_REM_ACCESS_ERR,
	       "the pre-bind rkey does not work");
	is_int(t_qp_state(b), IBV_QPS_ERR,
	       "the responder's QP in ERR after the access violation");
	/* the window stays bound to the old b */
	unpair(a, b);
	pair(&a, &b);
	is_int(t_bind2(b, mw, ibv_inc_rkey(rk), bmr, base, 256,
		       IBV_ACCESS_REMOTE_WRITE),
	       0, "post bind of a bound type 2 window");
	is_int(one_wc(bcq).status, IBV_WC_MW_BIND_ERR,
	       "binding a bound type 2 window: BIND_ERR");
	unpair(a, b);
	pair(&a, &b);
	is_int(post_inv(b, IBV_WR_LOCAL_INV, rk), 0, "post LOCAL_INV");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "LOCAL_INV frees it");
	unpair(a, b);

	/* bound to b: another QP of the same PD and process may not use it */
	pair(&a, &b);
	pair(&c, &d);
	rk = ibv_inc_rkey(rk);
	is_int(t_bind2(b, mw, rk, bmr, base, 256, IBV_ACCESS_REMOTE_WRITE), 0,
	       "bind to QP b");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "bind completes");
	is_int(write_status(a, base, rk, 8), IBV_WC_SUCCESS, "a -> b works");
	is_int(write_status(c, base, rk, 8), IBV_WC_REM_ACCESS_ERR,
	       "c -> d (not the bound QP): REM_ACCESS_ERR");
	unpair(c, d);
	unpair(a, b);

	/* the window survives its QP errors; LOCAL_INV frees it */
	pair(&a, &b);
	is_int(write_status(a, base, rk, 8), IBV_WC_REM_ACCESS_ERR,
	       "a new QP b' is not the bound QP");
	unpair(a, b);
	pair(&a, &b);
	is_int(post_inv(a, IBV_WR_LOCAL_INV, rk), 0, "post LOCAL_INV");
	wc = one_wc(acq);
	is_int(wc.status, IBV_WC_SUCCESS, "LOCAL_INV completes");
	is_int(wc.opcode, IBV_WC_LOCAL_INV, "opcode LOCAL_INV");
	is_int(post_inv(a, IBV_WR_LOCAL_INV, rk ^ 0x55), 0,
	       "post LOCAL_INV of a wrong tag");
	is_int(one_wc(acq).status, IBV_WC_LOC_QP_OP_ERR,
	       "wrong tag: LOC_QP_OP_ERR");
	unpair(a, b);

	/* zero based: remote addresses are offsets into the window */
	pair(&a, &b);
	rk = ibv_inc_rkey(rk);
	is_int(t_bind2(b, mw, rk, bmr, base, 256,
		       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED),
	       0, "zero-based bind");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "zero-based bind completes");
	memset(abuf, 0x24, 8);
	is_int(write_status(a, 16, rk, 8), IBV_WC_SUCCESS,
	       "write at offset 16");
	ok(bbuf[2048 + 16] == 0x24 && bbuf[2048 + 23] == 0x24, "at base + 16");
	is_int(write_status(a, 256 - 4, rk, 8), IBV_WC_REM_ACCESS_ERR,
	       "offset past the zero-based window");
	unpair(a, b); /* both in ERR */
	pair(&a, &b);
	is_int(post_inv(b, IBV_WR_LOCAL_INV, rk), 0, "LOCAL_INV on b");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "LOCAL_INV completes");
	unpair(a, b);

	/* SEND_WITH_INV: the responder invalidates */
	pair(&a, &b);
	rk = ibv_inc_rkey(rk);
	is_int(t_bind2(b, mw, rk, bmr, base, 256, IBV_ACCESS_REMOTE_WRITE), 0,
	       "bind for SEND_WITH_INV");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "bind completes");
	t_post_recv(b, bbuf, 64, bmr->lkey, 0x77);
	is_int(post_inv(a, IBV_WR_SEND_WITH_INV, rk), 0, "post SEND_WITH_INV");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_SUCCESS, "receive completes");
	is_int(wc.opcode, IBV_WC_RECV, "opcode RECV");
	ok(wc.wc_flags & IBV_WC_WITH_INV, "IBV_WC_WITH_INV");
	is_int(wc.invalidated_rkey, rk, "invalidated_rkey");
	is_int(wc.byte_len, 16, "byte_len");
	wc = one_wc(acq);
	is_int(wc.status, IBV_WC_SUCCESS, "send completes");
	is_int(wc.opcode, IBV_WC_SEND, "opcode SEND");
	is_int(write_status(a, base, rk, 8), IBV_WC_REM_ACCESS_ERR,
	       "invalidated window: REM_ACCESS_ERR");
	unpair(a, b);

	/* SEND_WITH_INV of an rkey the responder cannot invalidate */
	pair(&a, &b);
	t_post_recv(b, bbuf, 64, bmr->lkey, 0x78);
	is_int(post_inv(a, IBV_WR_SEND_WITH_INV, bmr->rkey), 0,
	       "post SEND_WITH_INV of an MR key");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_REM_INV_REQ_ERR,
	       "responder: REM_INV_REQ_ERR (as rxe)");
	is_int(one_wc(acq).status, IBV_WC_REM_INV_REQ_ERR,
	       "requester: REM_INV_REQ_ERR");
	unpair(a, b);

	/* SEND_WITH_INV of a type 2 window bound to another QP of the
	 * responder's (o10-37.2.26: the QP it arrives on must be the
	 * window's): refused, and the window stays valid on its QP */
	pair(&a, &b);
	pair(&c, &d);
	rk = ibv_inc_rkey(rk);
	is_int(t_bind2(d, mw, rk, bmr, base, 256, IBV_ACCESS_REMOTE_WRITE), 0,
	       "bind on another QP");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "bind completes");
	t_post_recv(b, bbuf, 64, bmr->lkey, 0x79);
	is_int(post_inv(a, IBV_WR_SEND_WITH_INV, rk), 0,
	       "post SEND_WITH_INV of a window bound to another QP");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_REM_INV_REQ_ERR, "responder: REM_INV_REQ_ERR");
	ok(!(wc.wc_flags & IBV_WC_WITH_INV), "no IBV_WC_WITH_INV");
	is_int(one_wc(acq).status, IBV_WC_REM_INV_REQ_ERR,
	       "requester: REM_INV_REQ_ERR");
	memset(abuf, 0x5a, 8);
	is_int(write_status(c, base, rk, 8), IBV_WC_SUCCESS,
	       "the window still works on its own QP");
	ok(bbuf[2048] == 0x5a, "its write landed");
	is_int(post_inv(d, IBV_WR_LOCAL_INV, rk), 0, "LOCAL_INV on its QP");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "LOCAL_INV completes");
	unpair(c, d);
	unpair(a, b);

	/* SEND_WITH_INV whose receive fails (too short): the message is
	 * not received, so the window is not invalidated (rxe invalidates
	 * in do_complete, on a successful receive only) */
	pair(&a, &b);
	pair(&c, &d);
	rk = ibv_inc_rkey(rk);
	is_int(t_bind2(b, mw, rk, bmr, base, 256, IBV_ACCESS_REMOTE_WRITE), 0,
	       "bind for a failing SEND_WITH_INV");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "bind completes");
	t_post_recv(b, bbuf, 8, bmr->lkey, 0x7a);
	is_int(post_inv(a, IBV_WR_SEND_WITH_INV, rk), 0,
	       "post SEND_WITH_INV of 16 bytes into 8");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_LOC_LEN_ERR, "responder: LOC_LEN_ERR");
	ok(!(wc.wc_flags & IBV_WC_WITH_INV), "no IBV_WC_WITH_INV");
	is_int(one_wc(acq).status, IBV_WC_REM_INV_REQ_ERR,
	       "requester: REM_INV_REQ_ERR");
	is_int(t_bind2(d, mw, ibv_inc_rkey(rk), bmr, base, 256,
		       IBV_ACCESS_REMOTE_WRITE),
	       0, "post a bind of the window elsewhere");
	is_int(one_wc(bcq).status, IBV_WC_MW_BIND_ERR,
	       "still bound to its QP: BIND_ERR (not invalidated)");
	unpair(c, d);
	pair(&c, &d);
	is_int(post_inv(d, IBV_WR_LOCAL_INV, rk), 0, "LOCAL_INV it");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "LOCAL_INV completes");
	unpair(c, d);
	unpair(a, b);

	/* type 2 binding errors */
	pair(&a, &b);
	is_int(t_bind2(b, mw, rk, NULL, 0, 0, IBV_ACCESS_REMOTE_WRITE), 0,
	       "post type 2 bind without an MR");
	is_int(one_wc(bcq).status, IBV_WC_MW_BIND_ERR,
	       "type 2 without an MR: BIND_ERR");
	unpair(a, b);
	pair(&a, &b);
	is_int(t_bind2(b, NULL, rk, bmr, base, 8, 0), EINVAL,
	       "BIND_MW without a window: EINVAL");
	is_int(t_bind2(b, mw, rk, NULL, base, 8, 0), EINVAL,
	       "no MR but a range: EINVAL");
	ok(no_wc(bcq), "refused posts complete nothing");

	/* dealloc of a bound window revokes it */
	rk = ibv_inc_rkey(rk);
	is_int(t_bind2(b, mw, rk, bmr, base, 256, IBV_ACCESS_REMOTE_WRITE), 0,
	       "bind before dealloc");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS, "bind completes");
	is_int(write_status(a, base, rk, 8), IBV_WC_SUCCESS, "write works");
	is_int(ibv_dealloc_mw(mw), 0, "dealloc a bound window");
	is_int(write_status(a, base, rk, 8), IBV_WC_REM_ACCESS_ERR,
	       "deallocated window: REM_ACCESS_ERR");
	is_int(ibv_dereg_mr(bmr) == 0 ? 0 : -1, 0,
	       "MR deregisters once its window is gone");
	bmr = ibv_reg_mr(t.pd, bbuf, BUFSZ,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!bmr)
		bail_out("reg_mr");
	unpair(a, b);
}

/* test_qp_ex -- the ibv_qp_ex wr_bind_mw / wr_local_inv / wr_send_inv */
static void test_qp_ex(void)
{
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *qx;
	struct ibv_mw *mw;
	struct ibv_mw_bind_info bi;
	struct ibv_wc wc;
	uint32_t rk;
	int acc = IBV_ACCESS_REMOTE_WRITE;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.sq_sig_all = 1;
	ia.pd = t.pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW |
			    IBV_QP_EX_WITH_LOCAL_INV |
			    IBV_QP_EX_WITH_SEND_WITH_INV;
	ia.send_cq = ia.recv_cq = acq;
	a = ibv_create_qp_ex(t.ctx, &ia);
	ia.send_cq = ia.recv_cq = bcq;
	b = ibv_create_qp_ex(t.ctx, &ia);
	ok(a && b, "create QPs with the window send ops");
	if (!a || !b)
		return;
	/* a UD QP posts no window WRs (rxe, mlx5), nor does softrdma's UC */
	ia.qp_type = IBV_QPT_UD;
	errno = 0;
	ok(!ibv_create_qp_ex(t.ctx, &ia) && errno == EOPNOTSUPP,
	   "UD QP with the window send ops: EOPNOTSUPP");
	ia.qp_type = IBV_QPT_UC;
	errno = 0;
	ok(!ibv_create_qp_ex(t.ctx, &ia) && errno == EOPNOTSUPP,
	   "UC QP with the window send ops: EOPNOTSUPP");
	ia.qp_type = IBV_QPT_RC;
	if (t_connect(a, b->qp_num, acc, 12, 7, 14, 7) ||
	    t_connect(b, a->qp_num, acc, 12, 7, 14, 7))
		bail_out("connect");
	mw = ibv_alloc_mw(t.pd, IBV_MW_TYPE_2);
	if (!mw)
		bail_out("alloc_mw");
	rk = ibv_inc_rkey(mw->rkey);
	memset(&bi, 0, sizeof(bi));
	bi.mr = bmr;
	bi.addr = (uintptr_t)bbuf;
	bi.length = 128;
	bi.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	qx = ibv_qp_to_qp_ex(b);
	ibv_wr_start(qx);
	qx->wr_id = 0x61;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qx, mw, rk, &bi);
	is_int(ibv_wr_complete(qx), 0, "wr_bind_mw posts");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_SUCCESS, "wr_bind_mw completes");
	is_int(wc.opcode, IBV_WC_BIND_MW, "opcode BIND_MW");
	is_int(write_status(a, (uintptr_t)bbuf, rk, 8), IBV_WC_SUCCESS,
	       "write through the window");

	t_post_recv(b, bbuf + 1024, 64, bmr->lkey, 0x62);
	qx = ibv_qp_to_qp_ex(a);
	ibv_wr_start(qx);
	qx->wr_id = 0x63;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(qx, rk);
	ibv_wr_set_sge(qx, amr->lkey, (uintptr_t)abuf, 8);
	is_int(ibv_wr_complete(qx), 0, "wr_send_inv posts");
	wc = one_wc(bcq);
	ok(wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV) &&
		   wc.invalidated_rkey == rk,
	   "receive reports the invalidation");
	is_int(one_wc(acq).status, IBV_WC_SUCCESS, "wr_send_inv completes");

	qx = ibv_qp_to_qp_ex(b);
	ibv_wr_start(qx);
	qx->wr_id = 0x64;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(qx, rk);
	is_int(ibv_wr_complete(qx), 0, "wr_local_inv posts");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_SUCCESS,
	       "wr_local_inv of a free type 2 window succeeds (as rxe)");
	is_int(wc.opcode, IBV_WC_LOCAL_INV, "opcode LOCAL_INV");
	is_int(write_status(a, (uintptr_t)bbuf, rk, 8), IBV_WC_REM_ACCESS_ERR,
	       "invalidated: REM_ACCESS_ERR");
	ibv_dealloc_mw(mw);
	unpair(a, b);
}

struct xinfo {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
};

/* owner -- the child of test_mproc: binds a type 2 window on its QP,
 * lets the parent write through it, and sees the parent's SEND_WITH_INV
 * invalidate it; exit status 0 when every check of its side passed */
static int owner(int rfd, int wfd)
{
	struct tctx c;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	struct xinfo me, peer;
	char *buf = calloc(1, 4096), go;
	int res = 0;

	if (!buf || t_open(&c, 16))
		return 10;
	mr = ibv_reg_mr(c.pd, buf, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	qp = t_rc_qp(&c, 8, NULL);
	mw = ibv_alloc_mw(c.pd, IBV_MW_TYPE_2);
	if (!mr || !qp || !mw)
		return 11;
	memset(&me, 0, sizeof(me));
	me.qpn = qp->qp_num;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_connect(qp, peer.qpn, IBV_ACCESS_REMOTE_WRITE, 12, 7, 14, 7))
		return 12;
	me.rkey = ibv_inc_rkey(mw->rkey);
	me.addr = (uintptr_t)buf + 512;
	{
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_BIND_MW;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = me.rkey;
		wr.bind_mw.bind_info.mr = mr;
		wr.bind_mw.bind_info.addr = me.addr;
		wr.bind_mw.bind_info.length = 64;
		wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (ibv_post_send(qp, &wr, &bad) ||
		    t_wait(c.cq, &wc, 1, 30000) != 1 || wc.status)
			return 13;
	}
	t_post_recv(qp, buf, 64, mr->lkey, 0x99);
	t_xsend(wfd, &me, sizeof(me));
	if (t_wait(c.cq, &wc, 1, 20000) != 1 || wc.status || wc.wr_id != 0x99 ||
	    !(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != me.rkey)
		res |= 1;
	if (buf[512] != 0x5a || buf[519] != 0x5a || buf[520])
		res |= 2;
	t_xsend(wfd, &res, sizeof(res));
	t_xrecv(rfd, &go, 1);
	ibv_dealloc_mw(mw);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&c);
	free(buf);
	return res;
}

/* test_mproc -- a window of another process, as remote peers see it */
static void test_mproc(void)
{
	struct tctx p;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct xinfo me, peer;
	char buf[64];
	int rfd, wfd, res = -1, st = -1;
	pid_t pid;

	pid = t_spawn(owner, &rfd, &wfd);
	if (pid < 0)
		bail_out("fork");
	if (t_open(&p, 16))
		bail_out("open");
	mr = ibv_reg_mr(p.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	qp = t_rc_qp(&p, 8, NULL);
	if (!mr || !qp)
		bail_out("parent setup");
	memset(&me, 0, sizeof(me));
	me.qpn = qp->qp_num;
	t_xrecv(rfd, &peer, sizeof(peer));
	t_xsend(wfd, &me, sizeof(me));
	if (t_connect(qp, peer.qpn, 0, 12, 7, 14, 7))
		bail_out("connect");
	t_xrecv(rfd, &peer, sizeof(peer));
	memset(buf, 0x5a, 8);
	t_post(qp, IBV_WR_RDMA_WRITE, buf, 8, mr->lkey, 1, IBV_SEND_SIGNALED,
	       peer.addr, peer.rkey);
	ok(t_wait(p.cq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS,
	   "write through another process's window");
	sge = (struct ibv_sge){(uintptr_t)buf, 8, mr->lkey};
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.invalidate_rkey = peer.rkey;
	is_int(ibv_post_send(qp, &wr, &bad), 0, "post SEND_WITH_INV");
	ok(t_wait(p.cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.wr_id == 2,
	   "SEND_WITH_INV to the other process completes");
	t_xrecv(rfd, &res, sizeof(res));
	is_int(res, 0, "owner: data, IBV_WC_WITH_INV and the rkey");
	t_post(qp, IBV_WR_RDMA_WRITE, buf, 8, mr->lkey, 3, IBV_SEND_SIGNALED,
	       peer.addr, peer.rkey);
	ok(t_wait(p.cq, &wc, 1, 30000) == 1 &&
		   wc.status == IBV_WC_REM_ACCESS_ERR,
	   "the invalidated window refuses the next write");
	t_xsend(wfd, "x", 1);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "owner exits 0");
	close(rfd);
	close(wfd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&p);
}

/*
 * test_pdom -- a QP on a parent domain binds the windows of its PD, type 1
 * and type 2, and a window of the parent domain is one of the PD's
 * (ibv_alloc_parent_domain(3): it "can be used instead of a PD"); a window
 * of another PD is still refused
 */
static void test_pdom(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_qp_init_attr ia;
	struct ibv_mw_bind bind;
	struct ibv_qp *a, *b;
	struct ibv_pd *pdom, *pd2;
	struct ibv_mw *w1, *w2, *w3, *w4;
	struct ibv_wc wc;
	uint32_t rk;
	uint64_t base = (uintptr_t)bbuf + 4096;
	int acc = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	memset(&pa, 0, sizeof(pa));
	pa.pd = t.pd;
	pdom = ibv_alloc_parent_domain(t.ctx, &pa);
	ok(pdom != NULL, "parent domain of the PD");
	if (!pdom)
		return;
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
	ia.sq_sig_all = 1;
	ia.send_cq = ia.recv_cq = acq;
	a = ibv_create_qp(t.pd, &ia);
	ia.send_cq = ia.recv_cq = bcq;
	b = ibv_create_qp(pdom, &ia); /* the binder, on the parent domain */
	if (!a || !b || t_connect(a, b->qp_num, acc, 12, 7, 14, 7) ||
	    t_connect(b, a->qp_num, acc, 12, 7, 14, 7))
		bail_out("parent domain pair");
	w1 = ibv_alloc_mw(t.pd, IBV_MW_TYPE_1);
	w2 = ibv_alloc_mw(t.pd, IBV_MW_TYPE_2);
	w3 = ibv_alloc_mw(pdom, IBV_MW_TYPE_2);
	if (!w1 || !w2 || !w3)
		bail_out("alloc_mw");

	memset(&bind, 0, sizeof(bind));
	bind.wr_id = 0x61;
	bind.send_flags = IBV_SEND_SIGNALED;
	bind.bind_info.mr = bmr;
	bind.bind_info.addr = base;
	bind.bind_info.length = 256;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	is_int(ibv_bind_mw(b, w1, &bind), 0,
	       "type 1 bind by a QP on the parent domain");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_SUCCESS, "type 1 bind completes");
	memset(abuf, 0x61, 16);
	memset(bbuf, 0, BUFSZ);
	is_int(write_status(a, base, w1->rkey, 16), IBV_WC_SUCCESS,
	       "write through the type 1 window");
	ok(bbuf[4096] == 0x61 && bbuf[4111] == 0x61 && !bbuf[4112],
	   "data at the type 1 window");

	rk = ibv_inc_rkey(w2->rkey);
	is_int(t_bind2(b, w2, rk, bmr, base + 256, 256,
		       IBV_ACCESS_REMOTE_WRITE),
	       0, "post type 2 bind on the parent domain's QP");
	wc = one_wc(bcq);
	is_int(wc.status, IBV_WC_SUCCESS, "type 2 bind completes");
	memset(abuf, 0x62, 16);
	is_int(write_status(a, base + 256, rk, 16), IBV_WC_SUCCESS,
	       "write through the type 2 window");
	ok(bbuf[4352] == 0x62 && bbuf[4367] == 0x62 && !bbuf[4368],
	   "data at the type 2 window");

	/* a window allocated on the parent domain, the MR on the PD */
	rk = ibv_inc_rkey(w3->rkey);
	is_int(t_bind2(b, w3, rk, bmr, base + 512, 256,
		       IBV_ACCESS_REMOTE_WRITE),
	       0, "post bind of the parent domain's window");
	is_int(one_wc(bcq).status, IBV_WC_SUCCESS,
	       "the parent domain's window binds an MR of its PD");
	memset(abuf, 0x63, 16);
	is_int(write_status(a, base + 512, rk, 16), IBV_WC_SUCCESS,
	       "write through it");
	ok(bbuf[4608] == 0x63 && !bbuf[4624], "data at that window");

	/* a window of another PD: C10-72 */
	pd2 = ibv_alloc_pd(t.ctx);
	w4 = pd2 ? ibv_alloc_mw(pd2, IBV_MW_TYPE_2) : NULL;
	if (!w4)
		bail_out("second PD");
	is_int(t_bind2(b, w4, ibv_inc_rkey(w4->rkey), bmr, base, 256,
		       IBV_ACCESS_REMOTE_WRITE),
	       0, "post bind of another PD's window");
	is_int(one_wc(bcq).status, IBV_WC_MW_BIND_ERR,
	       "another PD's window: MW_BIND_ERR");
	unpair(a, b);
	is_int(ibv_dealloc_mw(w1), 0, "dealloc type 1");
	is_int(ibv_dealloc_mw(w2), 0, "dealloc type 2");
	is_int(ibv_dealloc_mw(w3), 0, "dealloc the parent domain's window");
	is_int(ibv_dealloc_mw(w4), 0, "dealloc the other PD's window");
	is_int(ibv_dealloc_pd(pd2), 0, "dealloc the other PD");
	is_int(ibv_dealloc_pd(pdom), 0, "dealloc the parent domain");
}

int main(void)
{
	t_isolate("mw");
	test_mproc();
	if (t_open(&t, 16))
		bail_out("open");
	acq = ibv_create_cq(t.ctx, 64, NULL, NULL, 0);
	bcq = ibv_create_cq(t.ctx, 64, NULL, NULL, 0);
	abuf = calloc(1, BUFSZ);
	bbuf = calloc(1, BUFSZ);
	if (!abuf || !bbuf)
		bail_out("calloc");
	amr = ibv_reg_mr(t.pd, abuf, BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(t.pd, bbuf, BUFSZ,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	bmr_nobind = ibv_reg_mr(t.pd, bbuf, 256, IBV_ACCESS_LOCAL_WRITE);
	if (!acq || !bcq || !amr || !bmr || !bmr_nobind)
		bail_out("setup");
	test_alloc();
	test_type1();
	test_type2();
	test_qp_ex();
	test_pdom();
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	ibv_dereg_mr(bmr_nobind);
	ibv_destroy_cq(acq);
	ibv_destroy_cq(bcq);
	t_close(&t);
	free(abuf);
	free(bbuf);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
