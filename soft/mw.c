/* SPDX-License-Identifier: MIT */
/* mw.c -- memory windows: alloc, bind (type 1 and 2), invalidation */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "softrdma.h"

/*
 * A window is an entry of the host registry's key table (kind MW1 or
 * MW2), so a remote RDMA operation finds and checks its rkey exactly as
 * an MR's: the entry holds the window's access, range and, for a type 2
 * window, the QP it is bound to.  All of a window's state lives in that
 * entry, changed under its key stripe lock with its sequence count odd
 * (soft_key_read: another process's initiator checks it with no lock, and
 * a request checked before an invalidation may finish its copy after it,
 * as past an HCA's check; data.c remote_op), and any process may
 * invalidate (SEND_WITH_INV).  Semantics
 * and errors follow rxe (rxe_mw.c): bind errors complete with
 * IBV_WC_MW_BIND_ERR, local invalidation errors with IBV_WC_LOC_QP_OP_ERR.
 */

#define SOFT_MW_ACCESS                                       \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
	 IBV_ACCESS_ZERO_BASED)

/* every window of this process, for soft_mw_bound_to */
static struct soft_list mw_list = {&mw_list, &mw_list};
pthread_mutex_t soft_mw_lock = PTHREAD_MUTEX_INITIALIZER;

static inline struct soft_mw *to_smw(struct ibv_mw *mw)
{
	return soft_container_of(mw, struct soft_mw, mw);
}

static inline pthread_mutex_t *slot_lock(uint32_t slot)
{
	return &soft_reg->key_lock[slot % SOFT_NSTRIPES];
}

/* tests/soft/keyseq: SOFTRDMA_TEST_KEY_STOP=n stops the process (SIGSTOP)
 * in its n-th window bind or invalidation, the entry half-written.  -1
 * until the first bind looks; atomic, as binds of one process's contexts
 * may run on threads of their own */
static _Atomic int key_stop = -1;

/* key_stop_due -- this bind or invalidation is the one SOFTRDMA_TEST_KEY_STOP
 * names (counted down once per call, whichever thread makes it) */
static __attribute__((noinline, cold)) int key_stop_due(int n)
{
	if (n < 0) {
		const char *v = getenv("SOFTRDMA_TEST_KEY_STOP");
		int want = v && atoi(v) > 0 ? atoi(v) : 0;

		/* the first to look sets it; a thread that lost the race has
		 * its value (or what has been counted down from it) in n */
		if (atomic_compare_exchange_strong_explicit(
			    &key_stop, &n, want, memory_order_relaxed,
			    memory_order_relaxed))
			n = want;
	}
	while (n > 0 && !atomic_compare_exchange_weak_explicit(
				&key_stop, &n, n - 1, memory_order_relaxed,
				memory_order_relaxed))
		;
	return n == 1;
}

/* write_begin -- soft_key_write_begin for a bind or an invalidation */
static void write_begin(struct soft_reg_mr *e)
{
	int n;

	soft_key_write_begin(e);
	n = atomic_load_explicit(&key_stop, memory_order_relaxed);
	if (__builtin_expect(n != 0, 0) && key_stop_due(n)) {
		e->len = 0; /* torn: the old range is half gone */
		raise(SIGSTOP);
	}
}

/* soft_alloc_mw -- a window of type 1 or 2 (the alloc_mw context op) */
struct ibv_mw *soft_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct soft_reg_mr e;
	struct soft_mw *mw;
	uint32_t key;

	if (!pd || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
		errno = EINVAL;
		return NULL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&e, 0, sizeof(e));
	e.kind = type == IBV_MW_TYPE_1 ? SOFT_KEY_MW1 : SOFT_KEY_MW2;
	e.pd_id = to_spd(pd)->pd_id;
	if (soft_reg_mr_alloc(&e, &key)) {
		free(mw);
		return NULL;
	}
	mw->mw.context = pd->context;
	mw->mw.pd = pd;
	mw->mw.rkey = key;
	mw->mw.handle = key;
	mw->mw.type = type;
	mw->pd = to_spd(pd);
	mw->slot = soft_key_slot(key);
	__atomic_add_fetch(&mw->pd->refcnt, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&soft_mw_lock);
	soft_list_add(&mw_list, &mw->link);
	pthread_mutex_unlock(&soft_mw_lock);
	return &mw->mw;
}

/* soft_dealloc_mw -- unbind and free a window (the dealloc_mw op) */
int soft_dealloc_mw(struct ibv_mw *ibmw)
{
	struct soft_mw *mw;
	struct soft_reg_mr *e;

	if (!ibmw)
		return EINVAL;
	mw = to_smw(ibmw);
	e = &soft_reg->mr[mw->slot];
	soft_stripe_lock(&soft_reg->lock);
	soft_stripe_lock(slot_lock(mw->slot));
	if (e->pid == soft_self_pid && e->kind != SOFT_KEY_MR) {
		soft_key_write_begin(e);
		e->key = 0;
		soft_key_write_end(e);
	}
	pthread_mutex_unlock(slot_lock(mw->slot));
	pthread_mutex_unlock(&soft_reg->lock);
	pthread_mutex_lock(&soft_mw_lock);
	soft_list_del(&mw->link);
	pthread_mutex_unlock(&soft_mw_lock);
	__atomic_sub_fetch(&mw->pd->refcnt, 1, __ATOMIC_RELAXED);
	free(mw);
	return 0;
}

/* soft_bind_mw -- bind a type 1 window: a BIND_MW WR (the bind_mw op) */
int soft_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		 struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr, *bad;
	const struct ibv_mw_bind_info *bi;
	int ret;

	if (!qp || !mw || !mw_bind || mw->type != IBV_MW_TYPE_1 ||
	    mw->context != qp->context)
		return EINVAL;
	bi = &mw_bind->bind_info;
	if (!bi->mr && (bi->addr || bi->length))
		return EINVAL;
	if (bi->mr && bi->mr->pd != mw->pd)
		return EPERM;
	/* o10-36.2.2: a type 1 window is never zero based */
	if (bi->mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return EINVAL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = *bi;
	ret = qp->context->ops.post_send(qp, &wr, &bad);
	if (ret)
		return ret;
	/* as rxe: the new rkey now; an error completion leaves it to undo */
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

/* soft_mw_check_wr -- post-time checks of BIND_MW / LOCAL_INV WRs */
int soft_mw_check_wr(struct soft_qp *qp, struct ibv_send_wr *wr)
{
	const struct ibv_mw_bind_info *bi;

	if (wr->opcode != IBV_WR_BIND_MW)
		return 0;
	bi = &wr->bind_mw.bind_info;
	if (!wr->bind_mw.mw ||
	    wr->bind_mw.mw->context != qp->qpx.qp_base.context ||
	    (!bi->mr && (bi->addr || bi->length)))
		return EINVAL;
	return 0;
}

/* bind_check -- rxe_check_bind_mw: may this WR bind the window? */
static int bind_check(struct soft_qp *qp, struct soft_mw *mw,
		      const struct soft_reg_mr *e, struct soft_mr *mr,
		      const struct ibv_mw_bind_info *bi)
{
	uint32_t access = bi->mw_access_flags;

	if (access & ~(uint32_t)SOFT_MW_ACCESS)
		return -1;
	/* C10-72: the QP, the window and the MR share a PD */
	if (qp->pd != mw->pd || (mr && mr->pd != mw->pd))
		return -1;
	if (mw->mw.type == IBV_MW_TYPE_1) {
		if (access & IBV_ACCESS_ZERO_BASED)
			return -1;
	} else {
		/* o10-37.2.30: only a free type 2 window; o10-37.2.40 */
		if (e->qpn || !mr)
			return -1;
	}
	if (!mr)
		return 0;
	/* C10-73, C10-74 */
	if (!(mr->access & IBV_ACCESS_MW_BIND) ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(mr->access & IBV_ACCESS_LOCAL_WRITE)))
		return -1;
	/* C10-75: inside the MR */
	if (bi->addr < mr->iova || bi->addr - mr->iova > mr->mr.length ||
	    bi->length > mr->mr.length - (bi->addr - mr->iova))
		return -1;
	return 0;
}

/* mw_bind -- execute a BIND_MW WR; returns its completion status */
static enum ibv_wc_status mw_bind(struct soft_qp *qp, struct ibv_send_wr *wr)
{
	const struct ibv_mw_bind_info *bi = &wr->bind_mw.bind_info;
	struct soft_mw *mw = to_smw(wr->bind_mw.mw);
	struct soft_reg_mr *e = &soft_reg->mr[mw->slot];
	struct soft_mr *mr = NULL;
	enum ibv_wc_status st = IBV_WC_MW_BIND_ERR;

	if (bi->length) {
		if (!bi->mr)
			return IBV_WC_MW_BIND_ERR;
		mr = soft_mr_lookup(bi->mr->lkey);
		if (!mr || &mr->mr != bi->mr)
			return IBV_WC_MW_BIND_ERR;
	}
	soft_stripe_lock(slot_lock(mw->slot));
	if (e->pid != soft_self_pid || e->kind == SOFT_KEY_MR ||
	    bind_check(qp, mw, e, mr, bi))
		goto out;
	write_begin(e);
	e->key = (e->key & ~0xffu) | (wr->bind_mw.rkey & 0xffu);
	if (mr) {
		e->access = bi->mw_access_flags;
		e->addr = bi->mw_access_flags & IBV_ACCESS_ZERO_BASED
				  ? 0
				  : bi->addr;
		e->va = (uintptr_t)mr->mr.addr + (bi->addr - mr->iova);
		e->len = bi->length;
		e->mr_key = mr->mr.lkey;
		e->qpn = mw->mw.type == IBV_MW_TYPE_2 ? qp->qpx.qp_base.qp_num
						      : 0;
	} else {
		/* a zero-length type 1 bind: the window grants nothing */
		e->access = 0;
		e->addr = e->va = e->len = 0;
		e->mr_key = 0;
	}
	soft_key_write_end(e);
	st = IBV_WC_SUCCESS;
out:
	pthread_mutex_unlock(slot_lock(mw->slot));
	return st;
}

/*
 * invalidate -- rxe_invalidate_mw: free the type 2 window whose rkey is
 * rkey and that belongs to (pid, pd_id), and, if bound to a QP, to qpn.
 * Returns 0, or -1 (no such window, a type 1 window, an MR key).
 */
static int invalidate(uint32_t rkey, int32_t pid, uint32_t pd_id, uint32_t qpn)
{
	uint32_t slot = soft_key_slot(rkey);
	struct soft_reg_mr *e = &soft_reg->mr[slot];
	int ret = -1;

	/* MRs registered by the user are never invalidated (rxe) */
	if (!(rkey & SOFT_KEY_MW_BIT))
		return -1;
	soft_stripe_lock(slot_lock(slot));
	/* o10-37.2.26: never a type 1 window */
	if (e->key == rkey && e->kind == SOFT_KEY_MW2 && e->pid == pid &&
	    e->pd_id == pd_id && (!qpn || !e->qpn || e->qpn == qpn)) {
		write_begin(e);
		e->access = 0;
		e->addr = e->va = e->len = 0;
		e->mr_key = 0;
		e->qpn = 0;
		soft_key_write_end(e);
		ret = 0;
	}
	pthread_mutex_unlock(slot_lock(slot));
	return ret;
}

/* soft_mw_local_op -- execute BIND_MW or LOCAL_INV; completion status.
 * A LOCAL_INV tries a window first: asking umr.c first took the key's
 * stripe lock once more for every window (an entry is of one kind, so
 * the order changes no outcome). */
enum ibv_wc_status soft_mw_local_op(struct soft_qp *qp, struct ibv_send_wr *wr)
{
	enum ibv_wc_status st;

	if (wr->opcode == IBV_WR_BIND_MW)
		return mw_bind(qp, wr);
	if (!invalidate(wr->invalidate_rkey, soft_self_pid, qp->pd->pd_id, 0))
		return IBV_WC_SUCCESS;
	if (!soft_umr_local_inv(qp, wr->invalidate_rkey, &st))
		return st; /* an indirect mkey (umr.c) */
	return IBV_WC_LOC_QP_OP_ERR;
}

/*
 * soft_mw_remote_inv -- SEND_WITH_INV at its target QP (qpn, of process
 * pid in PD pd_id): invalidate rkey.  Returns the receive completion's
 * status: IBV_WC_SUCCESS (set IBV_WC_WITH_INV), or as rxe's responder
 * (RESPST_ERR_INVALIDATE_RKEY) IBV_WC_REM_INV_REQ_ERR, the request then
 * NAKed as an invalid request.
 */
enum ibv_wc_status soft_mw_remote_inv(uint32_t rkey, int32_t pid,
				      uint32_t pd_id, uint32_t qpn)
{
	return invalidate(rkey, pid, pd_id, qpn) ? IBV_WC_REM_INV_REQ_ERR
						 : IBV_WC_SUCCESS;
}

/*
 * soft_rkey_target -- the responder's check of an rkey of this process for
 * a remote operation on QP qp: [raddr, raddr+len) with access need, as an
 * MR (its PD, access and range) or as a window (type 1, or type 2 bound to
 * qp: its PD, access and range, then the MR it is bound to).  Both paths
 * use it: the shared-memory responder (data.c) and the network responder
 * (net.c), so a window is checked the same way between hosts as on one.
 * On success *va is the local address and the key's stripe lock is held
 * (*lk), so that a dereg, unbind or invalidation waits for the copy;
 * returns 0, or -1 (nothing held): the request is NAKed as a remote
 * access error.
 */
int soft_rkey_target(const struct soft_qp *qp, const struct soft_pd *pd,
		     uint32_t rkey, uint64_t raddr, uint64_t len, uint32_t need,
		     uint8_t **va, pthread_mutex_t **lk)
{
	uint32_t slot = soft_key_slot(rkey);
	struct soft_reg_mr *m = &soft_reg->mr[slot];
	struct soft_mr *mr;
	uint64_t a;

	*lk = slot_lock(slot);
	soft_stripe_lock(*lk);
	if (!rkey || m->key != rkey || m->kind == SOFT_KEY_MR) {
		mr = soft_mr_lookup(rkey);
		if (!rkey || !mr || m->key != rkey || mr->pd != pd ||
		    !(mr->access & need) ||
		    !(qp->attr.qp_access_flags & need) || raddr < mr->iova ||
		    raddr - mr->iova > mr->mr.length ||
		    len > mr->mr.length - (raddr - mr->iova))
			goto refused;
		*va = (uint8_t *)mr->mr.addr + (raddr - mr->iova);
		return 0;
	}
	/* a window: its range, then the MR it is bound to */
	mr = soft_mr_lookup(m->mr_key);
	if (!mr || m->pid != soft_self_pid || m->pd_id != pd->pd_id ||
	    !(m->access & need) || !(qp->attr.qp_access_flags & need) ||
	    (m->qpn && m->qpn != qp->qpx.qp_base.qp_num) || raddr < m->addr ||
	    raddr - m->addr > m->len || len > m->len - (raddr - m->addr))
		goto refused;
	a = m->va + (raddr - m->addr);
	if (a < (uintptr_t)mr->mr.addr ||
	    a - (uintptr_t)mr->mr.addr > mr->mr.length ||
	    len > mr->mr.length - (a - (uintptr_t)mr->mr.addr))
		goto refused;
	*va = (uint8_t *)(uintptr_t)a;
	return 0;
refused:
	pthread_mutex_unlock(*lk);
	return -1;
}

/* soft_mw_bound_to -- a window of this process is bound to MR mr_key */
int soft_mw_bound_to(uint32_t mr_key)
{
	struct soft_list *l;
	int bound = 0;

	pthread_mutex_lock(&soft_mw_lock);
	for (l = mw_list.next; l != &mw_list && !bound; l = l->next) {
		struct soft_mw *mw = soft_container_of(l, struct soft_mw, link);
		struct soft_reg_mr *e = &soft_reg->mr[mw->slot];

		soft_stripe_lock(slot_lock(mw->slot));
		bound = e->pid == soft_self_pid && e->kind != SOFT_KEY_MR &&
			e->len && e->mr_key == mr_key;
		pthread_mutex_unlock(slot_lock(mw->slot));
	}
	pthread_mutex_unlock(&soft_mw_lock);
	return bound;
}
