/* SPDX-License-Identifier: MIT */
/* umr.c -- mlx5dv indirect mkeys and UMR work requests (list, interleaved) */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <infiniband/mlx5dv.h>

#include "softrdma.h"

SOFT_EXPORT int mlx5dv_query_device(struct ibv_context *ctx,
				    struct mlx5dv_context *attrs);
SOFT_EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(
	struct mlx5dv_mkey_init_attr *a);
SOFT_EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *dv);
SOFT_EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(
	struct ibv_qp_ex *q);
SOFT_EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context,
					    struct ibv_qp_init_attr_ex *qp_attr,
					    struct mlx5dv_qp_init_attr *mattr);
SOFT_EXPORT unsigned int softrdma_umr_max_entries(void);

/*
 * An indirect mkey (mlx5dv_create_mkey) is an entry of the host
 * registry's key table of kind SOFT_KEY_UMR: its key is both lkey and
 * rkey, zero-based (mlx5dv_wr_post(3): "the addr field ... is an offset
 * in the total data"), and until a UMR work request gives it a layout it
 * has no length, so any access to it fails.  The layout lives in the
 * owner's memory (struct soft_umr_tab); the registry entry publishes its
 * address (va), its entry count (mr_key), its total length (len) and its
 * access.  A peer's initiator reads it with process_vm_readv under the
 * key's stripe lock (which the owner takes to change or destroy it),
 * checks it as anything peer-writable, and checks every piece it touches
 * against that piece's MR registry entry (key, owner, PD, access, range)
 * at every access: an indirect key grants no more than its pieces do.
 *
 * UMR work requests are staged by mlx5dv_wr_mr_list /
 * mlx5dv_wr_mr_interleaved on an RC QP created by mlx5dv_create_qp with
 * MLX5DV_QP_EX_WITH_MR_LIST / _MR_INTERLEAVED, with libmlx5's errors
 * (ibv_wr_complete returns them, nothing is posted): no IBV_SEND_INLINE
 * in wr_flags EOPNOTSUPP, access flags outside local write / remote
 * read / write / atomic EINVAL, more entries than the mkey holds (one
 * less for a pattern, whose repeat block takes one) ENOMEM.  A UMR WQE of
 * softrdma is not bounded by max_inline_data as mlx5's is.  softrdma checks more than mlx5 does
 * at posting (stricter, documented): a zero length, a repeat count of 0,
 * a total above 2^62, an lkey that is not an MR of the mkey's PD or a
 * piece outside its MR give EINVAL.  The UMR executes in send queue order
 * and completes with IBV_WC_DRIVER1 (MLX5DV_WC_UMR); IBV_WR_LOCAL_INV on
 * the mkey takes its layout away again.
 */

#define SOFT_UMR_MAX_ENTRIES 1024u
#define SOFT_UMR_MAX_TOTAL   (1ull << 62)
#define SOFT_UMR_IOV_BATCH   256u
/* staged UMRs of one mkey not executed yet: as many batches of as many
 * QPs may hold one each; past that the oldest (most likely abandoned by
 * an ibv_wr_abort or a refused batch) gives way */
#define SOFT_UMR_MAX_PENDING 64u
#define SOFT_UMR_ACCESS                                     \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define SOFT_UMR_OPS \
	(MLX5DV_QP_EX_WITH_MR_LIST | MLX5DV_QP_EX_WITH_MR_INTERLEAVED)

/* one piece (list: stride 0, repeat 1) */
struct soft_umr_ent {
	uint32_t key;
	uint32_t len;
	uint64_t addr;	 /* iova in the piece's MR */
	uint64_t stride; /* interleaved: bytes_count + bytes_skip */
};

struct soft_umr_tab {
	uint32_t n;
	uint32_t repeat;
	uint64_t round; /* bytes of one repetition */
	uint64_t total;
	uint32_t access;
	uint32_t pad;
	struct soft_umr_ent e[];
};

/* a layout staged by mlx5dv_wr_mr_*, not yet executed; its WR names it
 * by seq */
struct soft_umr_pend {
	struct soft_umr_pend *next;
	uint64_t seq;
	struct soft_umr_tab *tab;
};

struct soft_mkey {
	struct mlx5dv_mkey dv;
	struct soft_pd *pd;
	uint32_t slot;
	uint16_t num_desc;
	struct soft_umr_tab *tab;      /* the layout in force (stripe lock) */
	struct soft_umr_pend *pending; /* staged, oldest first (stripe lock) */
	uint32_t npending;
};

/* the dv side of a QP created by mlx5dv_create_qp */
struct soft_dvqp {
	struct mlx5dv_qp_ex dv;
	struct soft_qp *qp;
	uint64_t ops;
};

/* this process's mkeys, by registry slot; read and changed under the
 * slot's stripe lock */
static struct soft_mkey *mkey_table[SOFT_MAX_MR];
static uint64_t umr_seq;

static pthread_mutex_t *slot_lock(uint32_t slot)
{
	return &soft_reg->key_lock[slot % SOFT_NSTRIPES];
}

/* mkey_of -- this process's mkey of key; stripe lock held by the caller */
static struct soft_mkey *mkey_of(uint32_t key)
{
	struct soft_mkey *k = mkey_table[soft_key_slot(key)];

	return k && k->dv.lkey == key ? k : NULL;
}

static int ctx_is_soft(struct ibv_context *c)
{
	return c && c->device;
}

/* mlx5dv_query_device -- what softrdma emulates.  Indirect mkeys and UMR
 * are probed by mlx5dv_create_mkey, as on mlx5.  DC (dc.c): asked for
 * MLX5DV_CONTEXT_MASK_DC_ODP_CAPS and MLX5DV_CONTEXT_MASK_DCI_STREAMS,
 * it answers both (as an mlx5 with DC does): no ODP over DC, no DCI
 * streams (log_num_concurent and log_num_errored 0); other optional
 * fields are not reported (their comp_mask bits cleared) */
int mlx5dv_query_device(struct ibv_context *ctx, struct mlx5dv_context *attrs)
{
	uint64_t in;

	if (!ctx || !attrs)
		return EINVAL;
	if (!ctx_is_soft(ctx))
		return EOPNOTSUPP;
	in = attrs->comp_mask;
	attrs->version = 0;
	attrs->flags = MLX5DV_CONTEXT_FLAGS_CQE_V1;
	attrs->comp_mask = 0;
	if (in & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS) {
		attrs->dc_odp_caps = 0;
		attrs->comp_mask |= MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
	}
	if (in & MLX5DV_CONTEXT_MASK_DCI_STREAMS) {
		attrs->dci_streams_caps.max_log_num_concurent = 0;
		attrs->dci_streams_caps.max_log_num_errored = 0;
		attrs->comp_mask |= MLX5DV_CONTEXT_MASK_DCI_STREAMS;
	}
	return 0;
}

/* softrdma_umr_max_entries -- the most entries an indirect mkey holds */
unsigned int softrdma_umr_max_entries(void)
{
	return SOFT_UMR_MAX_ENTRIES;
}

/* mlx5dv_create_mkey -- an indirect mkey of max_entries (rounded up to a
 * multiple of 4, as mlx5, and reported back) */
struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *a)
{
	struct soft_reg_mr e;
	struct soft_mkey *k;
	uint32_t key, n;

	if (!a || !a->pd) {
		errno = EINVAL;
		return NULL;
	}
	if (!ctx_is_soft(a->pd->context)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->create_flags != MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT) {
		errno = EOPNOTSUPP; /* signature, crypto: not emulated */
		return NULL;
	}
	n = ((uint32_t)a->max_entries + 3u) & ~3u;
	if (!a->max_entries || n > SOFT_UMR_MAX_ENTRIES) {
		errno = EINVAL;
		return NULL;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&e, 0, sizeof(e));
	e.kind = SOFT_KEY_UMR;
	e.pd_id = to_spd(a->pd)->pd_id;
	if (soft_reg_mr_alloc(&e, &key)) {
		free(k);
		return NULL;
	}
	k->dv.lkey = key;
	k->dv.rkey = key;
	k->pd = to_spd(a->pd);
	k->slot = soft_key_slot(key);
	k->num_desc = (uint16_t)n;
	__atomic_add_fetch(&k->pd->refcnt, 1, __ATOMIC_RELAXED);
	soft_stripe_lock(slot_lock(k->slot));
	mkey_table[k->slot] = k;
	pthread_mutex_unlock(slot_lock(k->slot));
	a->max_entries = (uint16_t)n;
	return &k->dv;
}

/* mlx5dv_destroy_mkey -- unpublish; waits for operations in flight */
int mlx5dv_destroy_mkey(struct mlx5dv_mkey *dv)
{
	struct soft_mkey *k;

	if (!dv)
		return EINVAL;
	k = soft_container_of(dv, struct soft_mkey, dv);
	soft_stripe_lock(slot_lock(k->slot));
	if (mkey_table[k->slot] == k)
		mkey_table[k->slot] = NULL;
	pthread_mutex_unlock(slot_lock(k->slot));
	soft_reg_mr_free(dv->lkey);
	__atomic_sub_fetch(&k->pd->refcnt, 1, __ATOMIC_RELAXED);
	free(k->tab);
	while (k->pending) {
		struct soft_umr_pend *p = k->pending;

		k->pending = p->next;
		free(p->tab);
		free(p);
	}
	free(k);
	return 0;
}

/* piece_local -- a piece checked against this process's MR table */
static int piece_local(struct soft_pd *pd, uint32_t key, uint64_t addr,
		       uint64_t len, uint32_t need, uint8_t **va)
{
	struct soft_mr *mr = soft_mr_lookup(key);

	if (!mr || mr->pd != pd || (need && !(mr->access & need)) ||
	    addr < mr->iova || addr - mr->iova > mr->mr.length ||
	    len > mr->mr.length - (addr - mr->iova))
		return -1;
	if (va)
		*va = (uint8_t *)mr->mr.addr + (addr - mr->iova);
	return 0;
}

/* piece_remote -- a piece of owner pid checked against the registry (one
 * consistent copy of its entry, soft_key_read) */
static int piece_remote(int32_t pid, uint32_t pd_id, uint32_t key,
			uint64_t addr, uint64_t len, uint32_t need,
			uint8_t **va)
{
	struct soft_reg_mr m;

	if (!key || soft_key_read(soft_key_slot(key), &m) || m.key != key ||
	    m.kind != SOFT_KEY_MR || m.pid != pid || m.pd_id != pd_id ||
	    !(m.access & need) || addr < m.addr || addr - m.addr > m.len ||
	    len > m.len - (addr - m.addr))
		return -1;
	*va = (uint8_t *)(uintptr_t)(m.va + (addr - m.addr));
	return 0;
}

/* tab_ok -- a layout (maybe a peer's) that is self-consistent */
static int tab_ok(const struct soft_umr_tab *t, uint32_t n, uint64_t total)
{
	uint64_t round = 0;
	uint32_t i;

	if (t->n != n || !n || n > SOFT_UMR_MAX_ENTRIES || !t->repeat)
		return 0;
	for (i = 0; i < n; i++) {
		if (!t->e[i].len)
			return 0;
		round += t->e[i].len;
	}
	return round == t->round && round <= SOFT_UMR_MAX_TOTAL / t->repeat &&
	       round * t->repeat == t->total && t->total == total;
}

/*
 * walk -- the pieces of [off, off + len) of layout t, as iovecs: each
 * piece checked (owner self: our MR table; else the registry), batched
 * SOFT_UMR_IOV_BATCH at a time into fn.  0, or -1 at the first piece that
 * is refused (nothing of that batch or later moves).
 */
struct walk_ctx {
	int32_t pid;	    /* owner */
	struct soft_pd *pd; /* owner self */
	uint32_t pd_id;
	uint32_t need;
	int (*fn)(struct walk_ctx *w, const struct iovec *r, uint32_t n);
	/* the local side of a remote operation */
	const struct iovec *liov;
	int niov;
	uint64_t loff;
	int write;
	/* local SGE resolution */
	struct iovec *out;
	uint32_t nout;
};

static int walk(struct walk_ctx *w, const struct soft_umr_tab *t, uint64_t off,
		uint64_t len)
{
	struct iovec r[SOFT_UMR_IOV_BATCH];
	uint32_t n = 0, i;
	uint64_t rep;

	if (off > t->total || len > t->total - off)
		return -1;
	rep = off / t->round;
	off -= rep * t->round;
	for (; len && rep < t->repeat; rep++) {
		for (i = 0; i < t->n && len; i++) {
			const struct soft_umr_ent *e = &t->e[i];
			uint64_t c, a;
			uint8_t *va;

			if (off >= e->len) {
				off -= e->len;
				continue;
			}
			c = e->len - off < len ? e->len - off : len;
			a = e->addr + rep * e->stride + off;
			if (w->pd ? piece_local(w->pd, e->key, a, c, w->need,
						&va)
				  : piece_remote(w->pid, w->pd_id, e->key, a, c,
						 w->need, &va))
				return -1;
			r[n].iov_base = va;
			r[n].iov_len = c;
			if (++n == SOFT_UMR_IOV_BATCH) {
				if (w->fn(w, r, n))
					return -1;
				n = 0;
			}
			len -= c;
			off = 0;
		}
	}
	return n ? w->fn(w, r, n) : 0;
}

/* check_fn -- first pass: every piece is checked before anything moves */
static int check_fn(struct walk_ctx *w, const struct iovec *r, uint32_t n)
{
	(void)w;
	(void)r;
	(void)n;
	return 0;
}

/* copy_fn -- move the bytes of r between the local iovecs and the owner */
static int copy_fn(struct walk_ctx *w, const struct iovec *r, uint32_t n)
{
	struct iovec l[SOFT_MAX_SGE + 2];
	uint64_t want = 0, off = w->loff, left;
	uint32_t i, nl = 0;
	ssize_t got;

	for (i = 0; i < n; i++)
		want += r[i].iov_len;
	left = want;
	for (i = 0; i < (uint32_t)w->niov && left && nl < SOFT_MAX_SGE + 2;
	     i++) {
		uint64_t c;

		if (off >= w->liov[i].iov_len) {
			off -= w->liov[i].iov_len;
			continue;
		}
		c = w->liov[i].iov_len - off < left ? w->liov[i].iov_len - off
						    : left;
		l[nl].iov_base = (uint8_t *)w->liov[i].iov_base + off;
		l[nl].iov_len = c;
		nl++;
		left -= c;
		off = 0;
	}
	if (left)
		return -1;
	if (w->pid == soft_self_pid) {
		uint64_t lo = 0, ro = 0;
		uint32_t li = 0, ri = 0;

		while (ri < n && li < nl) {
			uint64_t c = l[li].iov_len - lo < r[ri].iov_len - ro
					     ? l[li].iov_len - lo
					     : r[ri].iov_len - ro;
			uint8_t *lp = (uint8_t *)l[li].iov_base + lo,
				*rp = (uint8_t *)r[ri].iov_base + ro;

			if (w->write)
				memmove(rp, lp, c);
			else
				memmove(lp, rp, c);
			lo += c;
			ro += c;
			if (lo == l[li].iov_len) {
				li++;
				lo = 0;
			}
			if (ro == r[ri].iov_len) {
				ri++;
				ro = 0;
			}
		}
	} else {
		if (soft_novm_env()) {
			errno = EPERM;
			return -1;
		}
		got = w->write ? process_vm_writev(w->pid, l, nl, r, n, 0)
			       : process_vm_readv(w->pid, l, nl, r, n, 0);
		if (got != (ssize_t)want)
			return -1;
	}
	w->loff += want;
	return 0;
}

/* read_tab -- the layout of a peer's mkey entry m (stripe lock held); a
 * malloc'd copy, or NULL */
static struct soft_umr_tab *read_tab(const struct soft_reg_mr *m)
{
	uint32_t n = m->mr_key;
	size_t sz;
	struct soft_umr_tab *t;
	struct iovec l, r;

	if (!n || n > SOFT_UMR_MAX_ENTRIES || soft_novm_env())
		return NULL;
	sz = sizeof(*t) + (size_t)n * sizeof(t->e[0]);
	t = malloc(sz);
	if (!t)
		return NULL;
	l.iov_base = t;
	l.iov_len = sz;
	r.iov_base = (void *)(uintptr_t)m->va;
	r.iov_len = sz;
	if (process_vm_readv(m->pid, &l, 1, &r, 1, 0) != (ssize_t)sz ||
	    !tab_ok(t, n, m->len)) {
		free(t);
		return NULL;
	}
	return t;
}

/* atom_fn -- an atomic's 8 bytes: one piece, aligned in the owner's
 * memory (kept in w->out), else -1 */
static int atom_fn(struct walk_ctx *w, const struct iovec *r, uint32_t n)
{
	if (n != 1 || r[0].iov_len != 8 || ((uintptr_t)r[0].iov_base & 7) ||
	    !w->nout)
		return -1;
	w->out[0] = r[0];
	w->nout = 0;
	return 0;
}

/* umr_atomic -- the atomic of wr on the owner's 8 bytes at va
 * (soft_atomic_exec, as on a plain MR), the prior value into liov[0]; wc
 * status: the owner's memory out of reach is REM_OP_ERR, as a layout
 * read_tab could not read, a refused write a transport failure */
static enum ibv_wc_status umr_atomic(int32_t pid, uint64_t va,
				     const struct ibv_send_wr *wr,
				     const struct iovec *liov)
{
	uint8_t *p = pid == soft_self_pid ? (uint8_t *)(uintptr_t)va : NULL;

	switch (soft_atomic_exec(pid, va, p,
				 wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP,
				 wr->wr.atomic.compare_add, wr->wr.atomic.swap,
				 liov[0].iov_base)) {
	case 0:
		return IBV_WC_SUCCESS;
	case SOFT_ATOMIC_NOREAD:
		return IBV_WC_REM_OP_ERR;
	default:
		return IBV_WC_RETRY_EXC_ERR;
	}
}

/*
 * soft_umr_remote -- RDMA WRITE, READ or atomic (wr) of len bytes at
 * raddr of the peer's indirect key rkey (the QP's access and an atomic's
 * alignment already checked): every piece is checked first, then the
 * bytes move.  An atomic's 8 bytes must lie in one piece, aligned in the
 * owner's memory (softrdma's rule: an atomic does not cross a KLM entry;
 * the mlx5 sources do not say what the HCA does), else an invalid request.  A peer's layout is read with process_vm_readv: where
 * that is refused (Yama, SOFTRDMA_TEST_NOVM) the operation fails with
 * IBV_WC_REM_OP_ERR (the chunked fallback does not serve indirect keys).
 */
enum ibv_wc_status soft_umr_remote(struct soft_qp *qp, uint32_t need,
				   uint32_t rkey, uint64_t raddr,
				   const struct iovec *liov, int niov,
				   uint64_t len, const struct ibv_send_wr *wr)
{
	uint32_t slot = soft_key_slot(rkey);
	struct soft_reg_mr *m = &soft_reg->mr[slot];
	struct walk_ctx w;
	struct soft_umr_tab *t = NULL, *own = NULL;
	struct soft_mkey *k;
	enum ibv_wc_status st = IBV_WC_REM_ACCESS_ERR;
	struct iovec at;

	memset(&w, 0, sizeof(w));
	w.need = need;
	w.liov = liov;
	w.niov = niov;
	w.write = need == IBV_ACCESS_REMOTE_WRITE;
	soft_stripe_lock(slot_lock(slot));
	if (m->key != rkey || m->kind != SOFT_KEY_UMR ||
	    m->pid != qp->peer_pid || m->pd_id != qp->peer_pd_id ||
	    !(m->access & need))
		goto out;
	w.pid = m->pid;
	w.pd_id = m->pd_id;
	if (m->pid == soft_self_pid) {
		k = mkey_of(rkey);
		if (!k || !k->tab || !(k->tab->access & need))
			goto out;
		t = k->tab;
		w.pd = k->pd;
	} else {
		t = own = read_tab(m);
		if (!t) {
			st = IBV_WC_REM_OP_ERR;
			goto out;
		}
	}
	w.fn = check_fn;
	if (walk(&w, t, raddr, len))
		goto out;
	if (need == IBV_ACCESS_REMOTE_ATOMIC) {
		w.fn = atom_fn;
		w.out = &at;
		w.nout = 1;
		st = walk(&w, t, raddr, len)
			     ? IBV_WC_REM_INV_REQ_ERR
			     : umr_atomic(w.pid, (uintptr_t)at.iov_base, wr,
					  liov);
		goto out;
	}
	w.fn = copy_fn;
	st = walk(&w, t, raddr, len) ? IBV_WC_RETRY_EXC_ERR : IBV_WC_SUCCESS;
out:
	pthread_mutex_unlock(slot_lock(slot));
	free(own);
	return st;
}

/* out_fn -- local SGE: the pieces as iovecs (at most w->nout) */
static int out_fn(struct walk_ctx *w, const struct iovec *r, uint32_t n)
{
	if (n > w->nout)
		return -1;
	memcpy(w->out, r, n * sizeof(*r));
	w->out += n;
	w->nout -= n;
	return 0;
}

/*
 * soft_umr_local_sge -- an SGE whose lkey is one of our indirect mkeys:
 * its range must lie in one piece (one iovec; a range across pieces is
 * refused, IBV_WC_LOC_PROT_ERR: not emulated).  0 or -1.
 */
int soft_umr_local_sge(const struct soft_pd *pd, const struct ibv_sge *sge,
		       unsigned int need, struct iovec *iov)
{
	uint32_t slot = soft_key_slot(sge->lkey);
	struct soft_mkey *k;
	struct walk_ctx w;
	int ret = -1;

	if (!(sge->lkey & SOFT_KEY_MW_BIT))
		return -1;
	memset(&w, 0, sizeof(w));
	w.need = need;
	w.fn = out_fn;
	w.out = iov;
	w.nout = 1;
	w.pid = soft_self_pid;
	soft_stripe_lock(slot_lock(slot));
	k = mkey_of(sge->lkey);
	if (k && k->tab && k->pd == pd && (!need || (k->tab->access & need))) {
		w.pd = k->pd;
		ret = walk(&w, k->tab, sge->addr, sge->length);
	}
	pthread_mutex_unlock(slot_lock(slot));
	return ret;
}

/* publish -- the registry entry of k describes t (NULL: no layout) */
static void publish(struct soft_mkey *k, struct soft_umr_tab *t)
{
	struct soft_reg_mr *m = &soft_reg->mr[k->slot];

	if (m->key != k->dv.lkey || m->pid != soft_self_pid)
		return;
	soft_key_write_begin(m);
	m->access = t ? t->access : 0;
	m->addr = 0;
	m->va = (uintptr_t)t;
	m->len = t ? t->total : 0;
	m->mr_key = t ? t->n : 0;
	soft_key_write_end(m);
}

/* soft_umr_exec -- a staged UMR WR in send queue order; wc status */
enum ibv_wc_status soft_umr_exec(struct soft_qp *qp, struct ibv_send_wr *wr)
{
	uint32_t key = wr->wr.rdma.rkey, slot = soft_key_slot(key), i;
	enum ibv_wc_status st = IBV_WC_LOC_PROT_ERR;
	struct soft_umr_tab *t = NULL, *old = NULL;
	struct soft_umr_pend **pp, *p = NULL;
	struct soft_mkey *k;

	soft_stripe_lock(slot_lock(slot));
	k = mkey_of(key);
	if (!k || k->pd != qp->pd)
		goto out;
	/* its own staged layout, whatever was staged since (another UMR
	 * of this mkey in the batch or on another QP) */
	for (pp = &k->pending; *pp; pp = &(*pp)->next)
		if ((*pp)->seq == wr->wr.rdma.remote_addr)
			break;
	p = *pp;
	if (!p)
		goto out;
	*pp = p->next;
	k->npending--;
	t = p->tab;
	for (i = 0; i < t->n; i++) {
		const struct soft_umr_ent *e = &t->e[i];

		if (piece_local(k->pd, e->key, e->addr,
				(uint64_t)(t->repeat - 1) * e->stride + e->len,
				0, NULL)) {
			old = t; /* refused: it goes */
			goto out;
		}
	}
	old = k->tab;
	k->tab = t;
	publish(k, t);
	st = IBV_WC_SUCCESS;
out:
	pthread_mutex_unlock(slot_lock(slot));
	free(old);
	free(p);
	return st;
}

/* soft_umr_wr_ok -- a DRIVER1 WR that mlx5dv_wr_mr_* staged */
int soft_umr_wr_ok(struct soft_qp *qp, const struct ibv_send_wr *wr)
{
	return qp->dv && (((struct soft_dvqp *)qp->dv)->ops & SOFT_UMR_OPS) &&
	       !wr->num_sge;
}

/* soft_umr_local_inv -- IBV_WR_LOCAL_INV of one of our mkeys: it loses its
 * layout; -1 when key is none of ours */
int soft_umr_local_inv(struct soft_qp *qp, uint32_t key, enum ibv_wc_status *st)
{
	uint32_t slot = soft_key_slot(key);
	struct soft_umr_tab *old = NULL;
	struct soft_mkey *k;

	if (!(key & SOFT_KEY_MW_BIT))
		return -1;
	soft_stripe_lock(slot_lock(slot));
	k = mkey_of(key);
	if (k) {
		*st = k->pd == qp->pd ? IBV_WC_SUCCESS : IBV_WC_LOC_QP_OP_ERR;
		if (k->pd == qp->pd) {
			old = k->tab;
			k->tab = NULL;
			publish(k, NULL);
		}
	}
	pthread_mutex_unlock(slot_lock(slot));
	free(old);
	return k ? 0 : -1;
}

static struct soft_dvqp *dvqp(struct mlx5dv_qp_ex *q)
{
	return soft_container_of(q, struct soft_dvqp, dv);
}

/* stage -- check and stage one UMR WR; the error goes to wr_complete */
static void stage(struct mlx5dv_qp_ex *mq, struct mlx5dv_mkey *dv,
		  uint32_t access, uint32_t repeat, uint16_t n,
		  const struct ibv_sge *sge,
		  const struct mlx5dv_mr_interleaved *il, uint64_t op)
{
	struct soft_dvqp *d = dvqp(mq);
	struct soft_qp *qp = d->qp;
	struct ibv_qp_ex *q = &qp->qpx;
	struct soft_umr_tab *t;
	struct soft_umr_pend *p, **pp, *drop = NULL;
	struct soft_mkey *k;
	struct ibv_send_wr *wr;
	uint32_t max, i;
	uint64_t round = 0;

	if (qp->stage_err)
		return;
	if (!dv || !(d->ops & op)) {
		qp->stage_err = EINVAL;
		return;
	}
	k = soft_container_of(dv, struct soft_mkey, dv);
	if (!(q->wr_flags & IBV_SEND_INLINE)) {
		qp->stage_err = EOPNOTSUPP;
		return;
	}
	if (access & ~(uint32_t)SOFT_UMR_ACCESS || k->pd != qp->pd ||
	    (n && !(sge || il)) || !repeat) {
		qp->stage_err = EINVAL;
		return;
	}
	/* mlx5 keeps one descriptor for the repeat block of a pattern */
	max = k->num_desc - (il ? 1u : 0u);
	if (n > max) {
		qp->stage_err = ENOMEM;
		return;
	}
	if (!n) {
		qp->stage_err = EINVAL;
		return;
	}
	t = malloc(sizeof(*t) + (size_t)n * sizeof(t->e[0]));
	if (!t) {
		qp->stage_err = ENOMEM;
		return;
	}
	t->n = n;
	t->repeat = repeat;
	t->access = access;
	t->pad = 0;
	for (i = 0; i < n; i++) {
		struct soft_umr_ent *e = &t->e[i];

		e->key = il ? il[i].lkey : sge[i].lkey;
		e->addr = il ? il[i].addr : sge[i].addr;
		e->len = il ? il[i].bytes_count : sge[i].length;
		e->stride =
			il ? (uint64_t)il[i].bytes_count + il[i].bytes_skip : 0;
		round += e->len;
		/* the whole piece (all repetitions) inside its MR; (repeat -
		 * 1) * stride reaches 2^65 and is checked before it is used:
		 * wrapped, it named a small span inside the MR */
		if (!e->len ||
		    (repeat > 1 &&
		     e->stride > (UINT64_MAX - e->len) / (repeat - 1)) ||
		    e->addr > UINT64_MAX - (uint64_t)(repeat - 1) * e->stride -
				      e->len ||
		    piece_local(k->pd, e->key, e->addr,
				(uint64_t)(repeat - 1) * e->stride + e->len, 0,
				NULL)) {
			free(t);
			qp->stage_err = EINVAL;
			return;
		}
	}
	if (round > SOFT_UMR_MAX_TOTAL / repeat) {
		free(t);
		qp->stage_err = EINVAL;
		return;
	}
	t->round = round;
	t->total = round * repeat;
	p = malloc(sizeof(*p));
	wr = p ? soft_stage_wr(q, IBV_WR_DRIVER1) : NULL;
	if (!wr) {
		if (!p)
			qp->stage_err = ENOMEM;
		free(p);
		free(t);
		return;
	}
	p->next = NULL;
	p->tab = t;
	p->seq = __atomic_add_fetch(&umr_seq, 1, __ATOMIC_RELAXED);
	soft_stripe_lock(slot_lock(k->slot));
	if (k->npending == SOFT_UMR_MAX_PENDING) {
		drop = k->pending;
		k->pending = drop->next;
		k->npending--;
	}
	for (pp = &k->pending; *pp; pp = &(*pp)->next)
		;
	*pp = p;
	k->npending++;
	wr->wr.rdma.remote_addr = p->seq;
	pthread_mutex_unlock(slot_lock(k->slot));
	if (drop) {
		free(drop->tab);
		free(drop);
	}
	wr->wr.rdma.rkey = k->dv.lkey;
	wr->send_flags &= ~(unsigned int)IBV_SEND_INLINE;
}

static void wr_mr_list(struct mlx5dv_qp_ex *mq, struct mlx5dv_mkey *mkey,
		       uint32_t access, uint16_t n, struct ibv_sge *sge)
{
	stage(mq, mkey, access, 1, n, sge, NULL, MLX5DV_QP_EX_WITH_MR_LIST);
}

static void wr_mr_interleaved(struct mlx5dv_qp_ex *mq, struct mlx5dv_mkey *mkey,
			      uint32_t access, uint32_t repeat, uint16_t n,
			      struct mlx5dv_mr_interleaved *data)
{
	stage(mq, mkey, access, repeat, n, NULL, data,
	      MLX5DV_QP_EX_WITH_MR_INTERLEAVED);
}

/* wr_set_dc_addr -- mlx5dv_wr_set_dc_addr on a DCI (dc.c) */
static void wr_set_dc_addr(struct mlx5dv_qp_ex *mq, struct ibv_ah *ah,
			   uint32_t dctn, uint64_t key)
{
	soft_dc_set_addr(&dvqp(mq)->qp->qpx, ah, dctn, key);
}

/* mlx5dv_qp_ex_from_ibv_qp_ex -- the dv ops of a QP mlx5dv_create_qp
 * made; NULL for other QPs (libmlx5 would hand back garbage) */
struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *q)
{
	struct soft_qp *qp;

	if (!q)
		return NULL;
	qp = soft_container_of(q, struct soft_qp, qpx);
	return qp->dv ? &((struct soft_dvqp *)qp->dv)->dv : NULL;
}

/*
 * mlx5dv_create_qp -- an RC QP whose send ops may include
 * MLX5DV_QP_EX_WITH_MR_LIST / _MR_INTERLEAVED (which, as on mlx5, need
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS in qp_attr), or, with
 * MLX5DV_QP_INIT_ATTR_MASK_DC, a DCT or DCI (IBV_QPT_DRIVER, dc.c; another
 * dc_type EINVAL).  The create flags DISABLE_SCATTER_TO_CQE and
 * ALLOW_SCATTER_TO_CQE are hints taken as they are; DCI streams and the
 * other mlx5dv create flags and send ops are not emulated: EOPNOTSUPP.
 */
struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *qp_attr,
				struct mlx5dv_qp_init_attr *mattr)
{
	struct soft_dvqp *d;
	struct ibv_qp *ibqp;
	uint64_t ops = 0;
	uint32_t dc = 0;

	if (!context || !qp_attr) {
		errno = EINVAL;
		return NULL;
	}
	if (!ctx_is_soft(context)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (mattr) {
		if (mattr->comp_mask &
		    ~(uint64_t)(MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS |
				MLX5DV_QP_INIT_ATTR_MASK_DC |
				MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS)) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		/* where small receives land (the CQE or the buffer) changes
		 * nothing here: both hints are taken, not both at once */
		if (mattr->comp_mask &
		    MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) {
			if (mattr->create_flags &
			    ~(uint32_t)(MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE |
					MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE)) {
				errno = EOPNOTSUPP;
				return NULL;
			}
			if ((mattr->create_flags &
			     MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE) &&
			    (mattr->create_flags &
			     MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE)) {
				errno = EINVAL;
				return NULL;
			}
		}
		if (mattr->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC) {
			dc = mattr->dc_init_attr.dc_type;
			if (dc != MLX5DV_DCTYPE_DCT &&
			    dc != MLX5DV_DCTYPE_DCI) {
				errno = EINVAL;
				return NULL;
			}
		}
		if (mattr->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS)
			ops = mattr->send_ops_flags;
		if (ops & ~(uint64_t)SOFT_UMR_OPS) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		if (ops &&
		    !(qp_attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
			errno = EINVAL;
			return NULL;
		}
		if (ops && (qp_attr->qp_type != IBV_QPT_RC || dc)) {
			errno = EOPNOTSUPP; /* UMR on a DCI: not emulated */
			return NULL;
		}
	}
	if (!dc && qp_attr->qp_type == IBV_QPT_DRIVER) {
		errno = EINVAL; /* a driver QP of mlx5 is a DC QP */
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	ibqp = dc ? soft_dc_create(context, qp_attr, dc == MLX5DV_DCTYPE_DCT,
				   mattr->dc_init_attr.dct_access_key)
		  : ibv_create_qp_ex(context, qp_attr);
	if (!ibqp) {
		free(d);
		return NULL;
	}
	d->qp = to_sqp(ibqp);
	d->ops = ops;
	d->dv.wr_mr_list = wr_mr_list;
	d->dv.wr_mr_interleaved = wr_mr_interleaved;
	d->dv.wr_set_dc_addr = wr_set_dc_addr;
	d->qp->dv = d;
	return ibqp;
}
