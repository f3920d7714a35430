/* SPDX-License-Identifier: MIT */
/* verbs.c -- PD, MR, event queues, completion channels, CQ, async events */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "softrdma.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

SOFT_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context);
SOFT_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd);
SOFT_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				      size_t length, int access);
SOFT_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					   size_t length, uint64_t iova,
					   int access);
SOFT_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					    size_t length, uint64_t iova,
					    unsigned int access);
SOFT_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			     void *addr, size_t length, int access);
SOFT_EXPORT int ibv_dereg_mr(struct ibv_mr *mr);
SOFT_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(
	struct ibv_context *context);
SOFT_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel);
SOFT_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
					 void *cq_context,
					 struct ibv_comp_channel *channel,
					 int comp_vector);
SOFT_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe);
SOFT_EXPORT int ibv_destroy_cq(struct ibv_cq *cq);
SOFT_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel,
				 struct ibv_cq **cq, void **cq_context);
SOFT_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents);
SOFT_EXPORT int ibv_get_async_event(struct ibv_context *context,
				    struct ibv_async_event *event);
SOFT_EXPORT void ibv_ack_async_event(struct ibv_async_event *event);

/* Event queue: a FIFO of fixed-size elements behind a semaphore eventfd */
struct soft_evq {
	int fd;
	pthread_mutex_t m;
	size_t elem, cap, head, count;
	char *buf;
};

/* soft_evq_new -- an empty queue with a pollable fd */
struct soft_evq *soft_evq_new(size_t elem)
{
	struct soft_evq *q = calloc(1, sizeof(*q));

	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (q->fd < 0) {
		free(q);
		return NULL;
	}
	pthread_mutex_init(&q->m, NULL);
	q->elem = elem;
	return q;
}

/* soft_evq_free -- close the fd and free pending elements */
void soft_evq_free(struct soft_evq *q)
{
	if (!q)
		return;
	close(q->fd);
	pthread_mutex_destroy(&q->m);
	free(q->buf);
	free(q);
}

int soft_evq_fd(struct soft_evq *q)
{
	return q->fd;
}

/* soft_evq_push -- append one element and make the fd readable */
void soft_evq_push(struct soft_evq *q, const void *elem)
{
	uint64_t one = 1;
	ssize_t r;

	pthread_mutex_lock(&q->m);
	if (q->count == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 16, i;
		char *nb = malloc(ncap * q->elem);

		if (!nb) {
			pthread_mutex_unlock(&q->m);
			return;
		}
		for (i = 0; i < q->count; i++)
			memcpy(nb + i * q->elem,
			       q->buf + ((q->head + i) % q->cap) * q->elem,
			       q->elem);
		free(q->buf);
		q->buf = nb;
		q->cap = ncap;
		q->head = 0;
	}
	memcpy(q->buf + ((q->head + q->count) % q->cap) * q->elem, elem,
	       q->elem);
	q->count++;
	pthread_mutex_unlock(&q->m);
	r = write(q->fd, &one, sizeof(one));
	(void)r;
}

/* soft_evq_pop -- wait (per the fd's blocking mode) and take one element */
int soft_evq_pop(struct soft_evq *q, void *elem)
{
	uint64_t v;

	for (;;) {
		if (read(q->fd, &v, sizeof(v)) != sizeof(v))
			return -1;
		pthread_mutex_lock(&q->m);
		if (q->count) {
			memcpy(elem, q->buf + q->head * q->elem, q->elem);
			q->head = (q->head + 1) % q->cap;
			q->count--;
			pthread_mutex_unlock(&q->m);
			return 0;
		}
		/* a token left by a purged element */
		pthread_mutex_unlock(&q->m);
	}
}

/* soft_evq_purge -- drop queued elements for which match() is true */
void soft_evq_purge(struct soft_evq *q, int (*match)(const void *, void *),
		    void *arg)
{
	size_t i, n = 0;

	pthread_mutex_lock(&q->m);
	for (i = 0; i < q->count; i++) {
		char *e = q->buf + ((q->head + i) % q->cap) * q->elem;

		if (match(e, arg))
			continue;
		if (n != i)
			memmove(q->buf + ((q->head + n) % q->cap) * q->elem, e,
				q->elem);
		n++;
	}
	q->count = n;
	pthread_mutex_unlock(&q->m);
}

/* soft_async_event -- queue an async event on the context's async_fd */
void soft_async_event(struct soft_context *ctx, enum ibv_event_type type,
		      void *obj)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_type = type;
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		ev.element.cq = obj;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		ev.element.srq = obj;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		ev.element.port_num = 1;
		break;
	case IBV_EVENT_DEVICE_FATAL:
		break;
	default:
		ev.element.qp = obj;
		break;
	}
	soft_evq_push(ctx->async, &ev);
}

/* soft_port_event -- a port's event (IB mode: ports 1 and 2, apm.c) */
void soft_port_event(struct soft_context *ctx, enum ibv_event_type type,
		     uint32_t port)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_type = type;
	ev.element.port_num = (int)port;
	soft_evq_push(ctx->async, &ev);
}

/* ibv_get_async_event -- next async event (blocks per async_fd mode) */
int ibv_get_async_event(struct ibv_context *context,
			struct ibv_async_event *event)
{
	struct soft_context *ctx;

	if (!context || !event) {
		errno = EINVAL;
		return -1;
	}
	ctx = to_sctx(context);
	if (soft_evq_pop(ctx->async, event))
		return -1;
	soft_lock(&ctx->lock);
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		to_scq(event->element.cq)->async_reported++;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		to_ssrq(event->element.srq)->async_reported++;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		to_sqp(event->element.qp)->async_reported++;
		break;
	default:
		break;
	}
	soft_unlock(&ctx->lock);
	return 0;
}

/* ibv_ack_async_event -- lets destroy of the event's object proceed */
void ibv_ack_async_event(struct ibv_async_event *event)
{
	pthread_mutex_t *m = NULL;
	pthread_cond_t *c = NULL;
	uint32_t *n = NULL;

	if (!event)
		return;
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		m = &event->element.cq->mutex;
		c = &event->element.cq->cond;
		n = &event->element.cq->async_events_completed;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		m = &event->element.srq->mutex;
		c = &event->element.srq->cond;
		n = &event->element.srq->events_completed;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		m = &event->element.qp->mutex;
		c = &event->element.qp->cond;
		n = &event->element.qp->events_completed;
		break;
	default:
		return;
	}
	pthread_mutex_lock(m);
	++*n;
	pthread_cond_signal(c);
	pthread_mutex_unlock(m);
}

struct purge_arg {
	void *obj;
};

static int async_match(const void *e, void *arg)
{
	const struct ibv_async_event *ev = e;

	return ev->element.qp == ((struct purge_arg *)arg)->obj;
}

/* soft_async_purge -- drop unread events of a destroyed object */
static void soft_async_purge(struct soft_context *ctx, void *obj)
{
	struct purge_arg a = {obj};

	soft_evq_purge(ctx->async, async_match, &a);
}

/* ibv_alloc_pd -- a protection domain with a host-unique id */
struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct soft_pd *pd;

	if (!context) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = context;
	pd->pd_id = soft_reg_pd_id();
	pd->pd.handle = pd->pd_id;
	return &pd->pd;
}

/* ibv_dealloc_pd -- EBUSY while objects use it */
int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct soft_pd *p;

	if (!pd)
		return EINVAL;
	p = to_spd(pd);
	if (p->refcnt)
		return EBUSY;
	free(p);
	return 0;
}

/* Process-local lkey table, indexed like the registry */
static struct soft_mr *mr_table[SOFT_MAX_MR];

struct soft_mr *soft_mr_lookup(uint32_t key)
{
	struct soft_mr *mr = mr_table[key & (SOFT_MAX_MR - 1)];

	return mr && mr->mr.lkey == key ? mr : NULL;
}

#define SOFT_ACCESS_ALL                                                      \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                 \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING |                  \
	 IBV_ACCESS_OPTIONAL_RANGE)

static int mr_access_ok(unsigned int access);

/* ibv_reg_mr_iova2 -- register memory and publish its key */
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	struct soft_reg_mr e;
	struct soft_mr *mr;
	uint32_t key;

	if (!pd || !length || !mr_access_ok(access)) {
		errno = EINVAL;
		return NULL;
	}
	if (!addr) {
		errno = EFAULT;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&e, 0, sizeof(e));
	e.access = access;
	e.pd_id = to_spd(pd)->pd_id;
	e.addr = iova;
	e.va = (uintptr_t)addr;
	e.len = length;
	if (soft_reg_mr_alloc(&e, &key)) {
		free(mr);
		return NULL;
	}
	mr->mr.context = pd->context;
	mr->mr.pd = pd;
	mr->mr.addr = addr;
	mr->mr.length = length;
	mr->mr.handle = key;
	mr->mr.lkey = key;
	mr->mr.rkey = key;
	mr->iova = iova;
	mr->access = access;
	mr->pd = to_spd(pd);
	__atomic_add_fetch(&mr->pd->refcnt, 1, __ATOMIC_RELAXED);
	mr_table[key & (SOFT_MAX_MR - 1)] = mr;
	return &mr->mr;
}

/* ibv_reg_mr -- register memory, iova = address */
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
				(unsigned)access);
}

/* ibv_reg_mr_iova -- register memory at a chosen iova */
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

/* mr_access_ok -- what ib_check_mr_access lets through */
static int mr_access_ok(unsigned int access)
{
	return !(access & ~(unsigned)SOFT_ACCESS_ALL) &&
	       !((access &
		  (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		 !(access & IBV_ACCESS_LOCAL_WRITE)) &&
	       !(access & IBV_ACCESS_ZERO_BASED);
}

/*
 * ibv_rereg_mr -- change an MR's translation, PD and/or access in place;
 * its keys stay.  Input that libibverbs itself rejects gives
 * IBV_REREG_MR_ERR_INPUT, what the kernel would reject
 * IBV_REREG_MR_ERR_CMD; errno says why.  The registry entry changes
 * under its key stripe lock: remote operations in flight finish against
 * the old registration first.
 */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
		 size_t length, int access)
{
	struct soft_mr *m;
	struct soft_pd *npd;
	struct soft_reg_mr *e;
	pthread_mutex_t *lk;
	uint32_t slot;

	if (!mr || (flags & ~(IBV_REREG_MR_FLAGS_SUPPORTED)) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	m = soft_container_of(mr, struct soft_mr, mr);
	if (!flags || soft_mr_lookup(mr->lkey) != m ||
	    ((flags & IBV_REREG_MR_CHANGE_ACCESS) &&
	     !mr_access_ok((unsigned)access)) ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && pd->context != mr->context)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	/* windows bound to it keep the old translation: not while bound */
	if (soft_mw_bound_to(mr->lkey)) {
		errno = EBUSY;
		return IBV_REREG_MR_ERR_CMD;
	}
	npd = flags & IBV_REREG_MR_CHANGE_PD ? to_spd(pd) : m->pd;
	slot = soft_key_slot(mr->lkey);
	lk = &soft_reg->key_lock[slot % SOFT_NSTRIPES];
	e = &soft_reg->mr[slot];
	soft_stripe_lock(lk);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		e->addr = (uintptr_t)addr;
		e->va = (uintptr_t)addr;
		e->len = length;
		m->iova = (uintptr_t)addr;
		mr->addr = addr;
		mr->length = length;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		e->access = (uint32_t)access;
		m->access = (uint32_t)access;
	}
	e->pd_id = npd->pd_id;
	pthread_mutex_unlock(lk);
	if (npd != m->pd) {
		__atomic_add_fetch(&npd->refcnt, 1, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&m->pd->refcnt, 1, __ATOMIC_RELAXED);
		m->pd = npd;
		mr->pd = pd;
	}
	return 0;
}

/* ibv_dereg_mr -- unpublish; returns after one-sided ops on it finished */
int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct soft_mr *m;

	if (!mr)
		return EINVAL;
	m = soft_container_of(mr, struct soft_mr, mr);
	/* IBA 10.6.7.2.6, as rxe: not while windows are bound to it */
	if (soft_mw_bound_to(mr->lkey))
		return EINVAL;
	soft_reg_mr_free(mr->lkey);
	if (mr_table[mr->lkey & (SOFT_MAX_MR - 1)] == m)
		mr_table[mr->lkey & (SOFT_MAX_MR - 1)] = NULL;
	__atomic_sub_fetch(&m->pd->refcnt, 1, __ATOMIC_RELAXED);
	free(m);
	return 0;
}

/* ibv_create_comp_channel -- a pollable completion event channel */
struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct soft_comp_channel *ch;

	if (!context) {
		errno = EINVAL;
		return NULL;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->q = soft_evq_new(sizeof(struct soft_cq *));
	if (!ch->q) {
		free(ch);
		return NULL;
	}
	ch->ch.context = context;
	ch->ch.fd = soft_evq_fd(ch->q);
	ch->ch.refcnt = 0;
	return &ch->ch;
}

/* ibv_destroy_comp_channel -- EBUSY while CQs use it */
int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct soft_comp_channel *ch;

	if (!channel)
		return EINVAL;
	ch = soft_container_of(channel, struct soft_comp_channel, ch);
	if (channel->refcnt)
		return EBUSY;
	soft_evq_free(ch->q);
	free(ch);
	return 0;
}

static int cq_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr);
static int cq_next_poll(struct ibv_cq_ex *cqx);
static void cq_end_poll(struct ibv_cq_ex *cqx);

static struct ibv_wc *cqx_cur(struct ibv_cq_ex *cqx)
{
	struct soft_cq *cq = soft_container_of(cqx, struct soft_cq, cqx);

	return &cq->q[cq->head].wc;
}

static enum ibv_wc_opcode cq_read_opcode(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->opcode;
}

static uint32_t cq_read_vendor_err(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->vendor_err;
}

static uint32_t cq_read_byte_len(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->byte_len;
}

static __be32 cq_read_imm_data(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->imm_data;
}

static uint32_t cq_read_qp_num(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->qp_num;
}

static uint32_t cq_read_src_qp(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->src_qp;
}

static unsigned int cq_read_wc_flags(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->wc_flags;
}

static uint32_t cq_read_slid(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->slid;
}

static uint8_t cq_read_sl(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->sl;
}

static uint8_t cq_read_dlid_path_bits(struct ibv_cq_ex *c)
{
	return cqx_cur(c)->dlid_path_bits;
}

#define SOFT_WC_EX_FLAGS                                                       \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |                        \
	 IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | \
	 IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS)

/* cq_create -- common part of ibv_create_cq and ibv_create_cq_ex */
static struct soft_cq *cq_create(struct ibv_context *context, int cqe,
				 void *cq_context,
				 struct ibv_comp_channel *channel,
				 int comp_vector)
{
	struct soft_context *ctx;
	struct soft_cq *cq;
	uint32_t n = 1;

	if (!context || cqe < 1 || cqe > SOFT_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors ||
	    (channel && channel->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	ctx = to_sctx(context);
	while (n < (uint32_t)cqe + 1)
		n <<= 1;
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->size = n - 1;
	cq->q = calloc(cq->size, sizeof(*cq->q));
	if (!cq->q) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->ctx = ctx;
	cq->cqx.context = context;
	cq->cqx.channel = channel;
	cq->cqx.cq_context = cq_context;
	cq->cqx.cqe = (int)cq->size;
	pthread_mutex_init(&cq->cqx.mutex, NULL);
	pthread_cond_init(&cq->cqx.cond, NULL);
	cq->cqx.start_poll = cq_start_poll;
	cq->cqx.next_poll = cq_next_poll;
	cq->cqx.end_poll = cq_end_poll;
	cq->cqx.read_opcode = cq_read_opcode;
	cq->cqx.read_vendor_err = cq_read_vendor_err;
	cq->cqx.read_byte_len = cq_read_byte_len;
	cq->cqx.read_imm_data = cq_read_imm_data;
	cq->cqx.read_qp_num = cq_read_qp_num;
	cq->cqx.read_src_qp = cq_read_src_qp;
	cq->cqx.read_wc_flags = cq_read_wc_flags;
	cq->cqx.read_slid = cq_read_slid;
	cq->cqx.read_sl = cq_read_sl;
	cq->cqx.read_dlid_path_bits = cq_read_dlid_path_bits;
	if (channel)
		__atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_RELAXED);
	soft_lock(&ctx->lock);
	soft_list_add(&ctx->cqs, &cq->link);
	soft_unlock(&ctx->lock);
	return cq;
}

/* ibv_create_cq -- a CQ of at least cqe entries */
struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
			     void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector)
{
	struct soft_cq *cq =
		cq_create(context, cqe, cq_context, channel, comp_vector);

	return cq ? ibv_cq_ex_to_cq(&cq->cqx) : NULL;
}

struct ibv_cq_ex *soft_create_cq_ex(struct ibv_context *context,
				    struct ibv_cq_init_attr_ex *attr);

/* soft_create_cq_ex -- extended CQ (the create_cq_ex context op) */
struct ibv_cq_ex *soft_create_cq_ex(struct ibv_context *context,
				    struct ibv_cq_init_attr_ex *attr)
{
	struct soft_cq *cq;

	if (!attr || attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
						   IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->wc_flags & ~(uint64_t)SOFT_WC_EX_FLAGS) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cqe > (uint32_t)SOFT_MAX_CQE) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_create(context, (int)attr->cqe, attr->cq_context, attr->channel,
		       (int)attr->comp_vector);
	if (!cq)
		return NULL;
	cq->wc_flags = attr->wc_flags;
	return &cq->cqx;
}

/* ibv_resize_cq -- change the capacity (not below what it holds) */
int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	struct soft_cq *c;
	struct soft_cqe *nq;
	uint32_t n = 1, i;

	if (!cq)
		return EINVAL;
	c = to_scq(cq);
	if (cqe < 1 || cqe > SOFT_MAX_CQE)
		return EINVAL;
	while (n < (uint32_t)cqe + 1)
		n <<= 1;
	soft_lock(&c->ctx->lock);
	if (n - 1 < c->count) {
		soft_unlock(&c->ctx->lock);
		return EINVAL;
	}
	nq = calloc(n - 1, sizeof(*nq));
	if (!nq) {
		soft_unlock(&c->ctx->lock);
		return ENOMEM;
	}
	for (i = 0; i < c->count; i++)
		nq[i] = c->q[(c->head + i) % c->size];
	free(c->q);
	c->q = nq;
	c->head = 0;
	c->size = n - 1;
	c->cqx.cqe = (int)c->size;
	soft_unlock(&c->ctx->lock);
	return 0;
}

static int chan_match(const void *e, void *arg)
{
	return *(void *const *)e == ((struct purge_arg *)arg)->obj;
}

/* ibv_destroy_cq -- EBUSY while QPs use it; waits for event acks */
int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct soft_cq *c;
	struct soft_context *ctx;
	struct purge_arg a;

	if (!cq)
		return EINVAL;
	c = to_scq(cq);
	ctx = c->ctx;
	soft_lock(&ctx->lock);
	if (c->refcnt) {
		soft_unlock(&ctx->lock);
		return EBUSY;
	}
	if (c->armed) {
		c->armed = 0;
		if (!--ctx->narmed)
			soft_ctx_armed(ctx, 0);
	}
	soft_list_del(&c->link);
	soft_unlock(&ctx->lock);
	a.obj = c;
	if (cq->channel)
		soft_evq_purge(soft_container_of(cq->channel,
						 struct soft_comp_channel, ch)
				       ->q,
			       chan_match, &a);
	soft_async_purge(ctx, cq);
	pthread_mutex_lock(&cq->mutex);
	while (cq->comp_events_completed != c->comp_reported ||
	       cq->async_events_completed != c->async_reported)
		pthread_cond_wait(&cq->cond, &cq->mutex);
	pthread_mutex_unlock(&cq->mutex);
	if (cq->channel)
		__atomic_sub_fetch(&cq->channel->refcnt, 1, __ATOMIC_RELAXED);
	free(c->q);
	free(c);
	return 0;
}

/* soft_req_notify_cq -- arm for the next (solicited) completion */
int soft_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int soft_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	struct soft_cq *c = to_scq(cq);
	struct soft_context *ctx = c->ctx;

	if (ctx->owner_pid != soft_self_pid)
		return EIO; /* inherited across fork: its thread is not here */
	soft_lock(&ctx->lock);
	if (!c->armed && !ctx->narmed++)
		soft_ctx_armed(ctx, 1);
	if (c->armed != 1)
		c->armed = solicited_only ? 2 : 1;
	soft_unlock(&ctx->lock);
	/* the progress thread sweeps once more now that we are armed */
	soft_thread_start(ctx);
	soft_wake_ctx((uint32_t)ctx->reg_idx);
	return 0;
}

/* soft_cq_room -- whether one more completion fits */
int soft_cq_room(struct soft_cq *cq)
{
	return cq->count < cq->size;
}

/* soft_cq_push -- add a completion; ctx lock held */
/*
 * soft_cq_clean -- drop the completions of QP qpn still in cq, keeping the
 * others in order: a QP moved to RESET takes its CQEs with it, as mlx5's
 * and rxe's do (a program restating a QP from ERR must not poll the old
 * flushes).  Context lock held.
 */
void soft_cq_clean(struct soft_cq *cq, uint32_t qpn)
{
	uint32_t i, n = 0;

	if (cq->cqx_polling) /* an ibv_start_poll in progress: leave it */
		return;
	for (i = 0; i < cq->count; i++) {
		struct soft_cqe *e = &cq->q[(cq->head + i) % cq->size];

		if (e->wc.qp_num == qpn)
			continue;
		if (n != i)
			cq->q[(cq->head + n) % cq->size] = *e;
		n++;
	}
	cq->count = n;
}

void soft_cq_push(struct soft_cq *cq, const struct ibv_wc *wc, int solicited)
{
	struct soft_context *ctx = cq->ctx;

	if (cq->count == cq->size) {
		if (!cq->overflowed) {
			cq->overflowed = 1;
			soft_async_event(ctx, IBV_EVENT_CQ_ERR,
					 ibv_cq_ex_to_cq(&cq->cqx));
		}
		return;
	}
	cq->q[(cq->head + cq->count) % cq->size].wc = *wc;
	cq->count++;
	if (cq->armed &&
	    (cq->armed == 1 || solicited || wc->status != IBV_WC_SUCCESS)) {
		cq->armed = 0;
		if (!--ctx->narmed)
			soft_ctx_armed(ctx, 0);
		if (cq->cqx.channel) {
			struct ibv_cq *p = ibv_cq_ex_to_cq(&cq->cqx);

			soft_evq_push(
				soft_container_of(cq->cqx.channel,
						  struct soft_comp_channel, ch)
					->q,
				&p);
		}
	}
}

/* ibv_get_cq_event -- next completion event of a channel */
int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
		     void **cq_context)
{
	struct soft_comp_channel *ch;
	struct ibv_cq *c;

	if (!channel || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	ch = soft_container_of(channel, struct soft_comp_channel, ch);
	if (soft_evq_pop(ch->q, &c))
		return -1;
	pthread_mutex_lock(&c->mutex);
	to_scq(c)->comp_reported++;
	pthread_mutex_unlock(&c->mutex);
	*cq = c;
	*cq_context = c->cq_context;
	return 0;
}

/* ibv_ack_cq_events -- acknowledge events returned by ibv_get_cq_event */
void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (!cq)
		return;
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* cq_ex polling: the context lock is held from start_poll to end_poll */
static void cqx_load(struct soft_cq *cq)
{
	struct ibv_wc *wc = &cq->q[cq->head].wc;

	cq->cqx.status = wc->status;
	cq->cqx.wr_id = wc->wr_id;
}

static int cq_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct soft_cq *cq = soft_container_of(cqx, struct soft_cq, cqx);

	if (attr && attr->comp_mask)
		return EINVAL;
	soft_lock(&cq->ctx->lock);
	soft_progress(cq->ctx);
	if (!cq->count) {
		soft_unlock(&cq->ctx->lock);
		return ENOENT;
	}
	cq->cqx_polling = 1;
	cqx_load(cq);
	return 0;
}

static void cqx_consume(struct soft_cq *cq)
{
	if (!cq->cqx_polling)
		return;
	cq->head = (cq->head + 1) % cq->size;
	cq->count--;
	cq->cqx_polling = 0;
}

static int cq_next_poll(struct ibv_cq_ex *cqx)
{
	struct soft_cq *cq = soft_container_of(cqx, struct soft_cq, cqx);

	cqx_consume(cq);
	if (!cq->count)
		return ENOENT;
	cq->cqx_polling = 1;
	cqx_load(cq);
	return 0;
}

static void cq_end_poll(struct ibv_cq_ex *cqx)
{
	struct soft_cq *cq = soft_container_of(cqx, struct soft_cq, cqx);

	cqx_consume(cq);
	soft_unlock(&cq->ctx->lock);
}
