/* SPDX-License-Identifier: MIT */
/* verbs.c -- PD, MR, event queues, completion channels, CQ, async events */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "softrdma.h"
#include "net.h"

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

/*
 * soft_evq_pop -- wait (per the fd's blocking mode) and take one element;
 * taken(elem) runs under the queue's lock, so that a purge that finds the
 * element gone also finds what taken() counted
 */
int soft_evq_pop(struct soft_evq *q, void *elem, void (*taken)(void *elem))
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
			taken(elem);
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

/* async_object -- the kind of object an async event names (its
 * element): which member soft_async_event sets, whose count its taker
 * raises (async_taken) and whose destroy its ack releases */
enum async_object { ASYNC_DEVICE, ASYNC_CQ, ASYNC_SRQ, ASYNC_QP };

static enum async_object async_object(enum ibv_event_type type)
{
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		return ASYNC_CQ;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return ASYNC_SRQ;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return ASYNC_QP;
	default:
		return ASYNC_DEVICE; /* a port's or the device's: no ack waits */
	}
}

/* soft_async_event -- queue an async event on the context's async_fd */
void soft_async_event(struct soft_context *ctx, enum ibv_event_type type,
		      void *obj)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_type = type;
	switch (async_object(type)) {
	case ASYNC_CQ:
		ev.element.cq = obj;
		break;
	case ASYNC_SRQ:
		ev.element.srq = obj;
		break;
	case ASYNC_QP:
		ev.element.qp = obj;
		break;
	case ASYNC_DEVICE:
		if (type != IBV_EVENT_DEVICE_FATAL)
			ev.element.port_num = 1; /* a port's */
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

/* async_taken -- an event handed out: its object's destroy waits for
 * the ack (counted under the queue's lock: see soft_evq_pop) */
static void async_taken(void *e)
{
	struct ibv_async_event *event = e;

	switch (async_object(event->event_type)) {
	case ASYNC_CQ:
		to_scq(event->element.cq)->async_reported++;
		break;
	case ASYNC_SRQ:
		to_ssrq(event->element.srq)->async_reported++;
		break;
	case ASYNC_QP:
		to_sqp(event->element.qp)->async_reported++;
		break;
	case ASYNC_DEVICE:
		break;
	}
}

/* ibv_get_async_event -- next async event (blocks per async_fd mode) */
int ibv_get_async_event(struct ibv_context *context,
			struct ibv_async_event *event)
{
	if (!context || !event) {
		errno = EINVAL;
		return -1;
	}
	return soft_evq_pop(to_sctx(context)->async, event, async_taken);
}

/* ibv_ack_async_event -- lets destroy of the event's object proceed */
void ibv_ack_async_event(struct ibv_async_event *event)
{
	pthread_mutex_t *m = NULL;
	pthread_cond_t *c = NULL;
	uint32_t *n = NULL;

	if (!event)
		return;
	switch (async_object(event->event_type)) {
	case ASYNC_CQ:
		m = &event->element.cq->mutex;
		c = &event->element.cq->cond;
		n = &event->element.cq->async_events_completed;
		break;
	case ASYNC_SRQ:
		m = &event->element.srq->mutex;
		c = &event->element.srq->cond;
		n = &event->element.srq->events_completed;
		break;
	case ASYNC_QP:
		m = &event->element.qp->mutex;
		c = &event->element.qp->cond;
		n = &event->element.qp->events_completed;
		break;
	case ASYNC_DEVICE:
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

/* PDs and CQs alive in this process, at most max_pd and max_cq (a
 * parent domain is no PD of the device's) */
static uint32_t pd_live, cq_live;

/* ibv_alloc_pd -- a protection domain with a host-unique id */
struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct soft_pd *pd;

	if (!context) {
		errno = EINVAL;
		return NULL;
	}
	if (soft_count_take(&pd_live, SOFT_MAX_PD)) {
		errno = ENOMEM; /* max_pd are */
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		soft_count_drop(&pd_live);
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = context;
	pd->pd_id = soft_reg_pd_id();
	pd->pd.handle = pd->pd_id;
	return &pd->pd;
}

/* ibv_dealloc_pd -- EBUSY while objects (parent domains among them) use
 * it, a parent domain while its QPs and CQs do (its MRs and SRQs count on
 * its PD); a parent domain lets go of its PD and TD */
int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct soft_pd *p;

	if (!pd)
		return EINVAL;
	p = soft_container_of(pd, struct soft_pd, pd);
	if (__atomic_load_n(&p->refcnt, __ATOMIC_RELAXED))
		return EBUSY;
	if (p->prot) {
		__atomic_sub_fetch(&p->prot->refcnt, 1, __ATOMIC_RELAXED);
		if (p->td)
			__atomic_sub_fetch(&p->td->refcnt, 1, __ATOMIC_RELAXED);
	} else {
		soft_count_drop(&pd_live); /* a parent domain takes none */
	}
	free(p);
	return 0;
}

struct ibv_td *soft_alloc_td(struct ibv_context *context,
			     struct ibv_td_init_attr *attr);
int soft_dealloc_td(struct ibv_td *td);
struct ibv_pd *soft_alloc_parent_domain(
	struct ibv_context *context, struct ibv_parent_domain_init_attr *attr);

/* soft_alloc_td -- ibv_alloc_td: a thread domain (no comp_mask bits are
 * defined: any is EINVAL) */
struct ibv_td *soft_alloc_td(struct ibv_context *context,
			     struct ibv_td_init_attr *attr)
{
	struct soft_td *td;

	if (!attr || attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->td.context = context;
	return &td->td;
}

/* soft_dealloc_td -- ibv_dealloc_td: EBUSY while a parent domain has it */
int soft_dealloc_td(struct ibv_td *td)
{
	struct soft_td *t = soft_container_of(td, struct soft_td, td);

	if (__atomic_load_n(&t->refcnt, __ATOMIC_RELAXED))
		return EBUSY;
	free(t);
	return 0;
}

/*
 * soft_alloc_parent_domain -- ibv_alloc_parent_domain: a PD (attr->pd, a
 * parent domain's being its protection domain) with, optionally, a thread
 * domain.  Objects made on it belong to the PD; with a TD, a QP's posts and
 * a CQ's polls take softrdma's context lock in biased mode (softrdma.h,
 * soft_bias_enter).  Custom allocators are not supported (EOPNOTSUPP:
 * softrdma's queues live in shared memory of its own).
 */
struct ibv_pd *soft_alloc_parent_domain(
	struct ibv_context *context, struct ibv_parent_domain_init_attr *attr)
{
	struct soft_pd *p, *prot;

	if (!attr || !attr->pd || attr->pd->context != context ||
	    (attr->td && attr->td->context != context) ||
	    (attr->comp_mask &
	     ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			 IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT))) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	prot = to_spd(attr->pd);
	p->prot = prot;
	p->pd_id = prot->pd_id;
	p->pd.context = context;
	p->pd.handle = prot->pd.handle;
	__atomic_add_fetch(&prot->refcnt, 1, __ATOMIC_RELAXED);
	if (attr->td) {
		p->td = soft_container_of(attr->td, struct soft_td, td);
		__atomic_add_fetch(&p->td->refcnt, 1, __ATOMIC_RELAXED);
	}
	return &p->pd;
}

/* Process-local lkey table, indexed like the registry */
struct soft_mr *soft_mr_tab[SOFT_MAX_MR];

#define SOFT_ACCESS_ALL                                                      \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                 \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING |                  \
	 IBV_ACCESS_OPTIONAL_RANGE)

/* IB_UVERBS_ACCESS_FLUSH_GLOBAL and _PERSISTENT (Linux 6.2; libibverbs
 * 44's headers do not name them yet) */
#define SOFT_ACCESS_FLUSH ((1u << 8) | (1u << 9))

static int mr_access_check(unsigned int access);
static int mr_iova_err(const void *addr, size_t length, uint64_t iova);

/* mr_writable -- the access writes the memory: ib_umem_get pins it with
 * FOLL_WRITE (ib_access_writable) */
static int mr_writable(unsigned int access)
{
	return !!(access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND));
}

/*
 * mr_range_err -- what the driver and ib_umem_get make of the range:
 * EINVAL above max_mr_size (irdma, zxdh; what mlx5 cannot map) or past
 * the end of the address space, EFAULT where it cannot pin the pages (not
 * mapped, or not writable while the access is: ib_access_writable), 0.
 * An HCA never sees such a registration; softrdma, which copies into it
 * later, would crash the process that does.
 */
static int mr_range_err(const void *addr, size_t length, unsigned int access)
{
	if (length > SOFT_MAX_MR_SIZE ||
	    (uintptr_t)addr + length < (uintptr_t)addr)
		return EINVAL;
	return soft_map_range_ok(addr, length, mr_writable(access)) ? 0
								    : EFAULT;
}

/* ibv_reg_mr_iova2 -- register memory and publish its key */
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	struct soft_reg_mr e;
	struct soft_mr *mr;
	uint32_t key;
	int err = mr_iova_err(addr, length, iova);

	if (!err)
		err = mr_access_check(access);
	if (!pd || !length || err) {
		errno = err ? err : EINVAL;
		return NULL;
	}
	if (!addr) {
		errno = EFAULT;
		return NULL;
	}
	err = mr_range_err(addr, length, access);
	if (err) {
		errno = err;
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
	mr->map_fd = soft_map_publish(addr, length, &e);
	if (soft_reg_mr_alloc(&e, &key)) {
		soft_map_unpublish(mr->map_fd);
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
	soft_mr_tab[key & (SOFT_MAX_MR - 1)] = mr;
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

/*
 * mr_access_check -- ib_check_mr_access: 0, EINVAL, or EOPNOTSUPP for
 * ON_DEMAND, as the device offers no ODP (odp_caps 0), and for the flush
 * bits, as it offers no IB_DEVICE_FLUSH_GLOBAL/PERSISTENT (bits the
 * kernel knows: IB_ACCESS_SUPPORTED; the optional range is ignored)
 */
static int mr_access_check(unsigned int access)
{
	if ((access & ~(unsigned)(SOFT_ACCESS_ALL | SOFT_ACCESS_FLUSH)) ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE)) ||
	    (access & IBV_ACCESS_ZERO_BASED))
		return EINVAL;
	if (access & (IBV_ACCESS_ON_DEMAND | SOFT_ACCESS_FLUSH))
		return EOPNOTSUPP;
	return 0;
}

/*
 * mr_iova_err -- the kernel's ib_uverbs_reg_mr: the iova has the
 * address's offset in its page (EINVAL, the first check it makes), and
 * the region [iova, iova + length) does not wrap past 2^64 (EINVAL, as
 * ib_umem_get for the address): a remote address past the wrap would
 * reach no byte of it.  0 when fine.
 */
static int mr_iova_err(const void *addr, size_t length, uint64_t iova)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);

	if ((((uintptr_t)addr ^ iova) & (pg - 1)) || iova + length < iova)
		return EINVAL;
	return 0;
}

/*
 * ibv_rereg_mr -- change an MR's translation, PD and/or access in place;
 * its keys stay.  Input that libibverbs itself rejects gives
 * IBV_REREG_MR_ERR_INPUT, what the kernel would reject
 * IBV_REREG_MR_ERR_CMD; errno says why, and the MR is as it was (the
 * man page's "MR shouldn't be used" allows no more: the program's next
 * call is ibv_dereg_mr, which works).  The registry entry changes
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
	int err;

	if (!mr || (flags & ~(IBV_REREG_MR_FLAGS_SUPPORTED)) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	m = soft_container_of(mr, struct soft_mr, mr);
	/* in the order of the kernel's ib_uverbs_rereg_mr */
	err = !flags || soft_mr_lookup(mr->lkey) != m ? EINVAL : 0;
	if (!err && (flags & IBV_REREG_MR_CHANGE_ACCESS))
		err = mr_access_check((unsigned)access);
	if (!err && (flags & IBV_REREG_MR_CHANGE_PD) &&
	    pd->context != mr->context)
		err = EINVAL;
	/* the new range is pinned as a registration's */
	if (!err && (flags & IBV_REREG_MR_CHANGE_TRANSLATION))
		err = mr_range_err(addr, length,
				   flags & IBV_REREG_MR_CHANGE_ACCESS
					   ? (unsigned)access
					   : m->access);
	/* the old range, pinned read-only, pinned again for writing: a
	 * read-only mapping cannot become writable (mlx5 up to 5.11
	 * replaced the umem, ib_umem_get with the new access, on a rereg
	 * that is not a PD change alone; our copy into it would crash) */
	if (!err && !(flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
	    (flags & IBV_REREG_MR_CHANGE_ACCESS) &&
	    mr_writable((unsigned)access) && !mr_writable(m->access))
		err = mr_range_err(mr->addr, mr->length, (unsigned)access);
	if (err) {
		errno = err;
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
	soft_key_write_begin(e);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		/* the file behind the new range, if any: peers' mappings of
		 * the old one no longer match the entry */
		soft_map_unpublish(m->map_fd);
		e->map_fd = 0;
		m->map_fd = soft_map_publish(addr, length, e);
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
	soft_key_write_end(e);
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
	soft_map_unpublish(m->map_fd);
	if (soft_mr_tab[mr->lkey & (SOFT_MAX_MR - 1)] == m)
		soft_mr_tab[mr->lkey & (SOFT_MAX_MR - 1)] = NULL;
	__atomic_sub_fetch(&m->pd->refcnt, 1, __ATOMIC_RELAXED);
	free(m);
	return 0;
}

/*
 * Completion channels.  The fd is a FIFO's read end (/dev/shm/<prefix>-
 * ch-<key>, opened read-write: it never sees EOF) whose bytes are hints:
 * events are queued in the channel.  A CQ of the channel armed by
 * ibv_req_notify_cq sets the channel's bit in the context's registry
 * word; a producer in another process (or another context) that publishes
 * work for the context claims the bit and writes one byte, so the waiter
 * sleeping in poll(), epoll or a blocking ibv_get_cq_event wakes directly,
 * not through the progress thread; ibv_get_cq_event runs the progress
 * that turns the work into completions and events.  Without a free cell
 * (SOFT_CHAN_CELLS per context) or a FIFO the channel is a pipe and its
 * CQs are served by the progress thread, as all were before.
 */

/* getenv_nodirect -- SOFTRDMA_NO_DIRECT_WAKE=1: every channel is a pipe
 * served by the progress thread, as before the direct wake (tests and
 * before/after figures from one build) */
static int getenv_nodirect(void)
{
	static _Atomic int v = -1;

	return soft_env_flag(&v, "SOFTRDMA_NO_DIRECT_WAKE");
}

static inline struct soft_comp_channel *cq_chan(struct soft_cq *cq)
{
	return cq->cqx.channel ? soft_container_of(cq->cqx.channel,
						   struct soft_comp_channel, ch)
			       : NULL;
}

/* cq_wslot -- count cq in (ON) or out of the armed CQs of its wake slot:
 * the registry's bit is set while one is armed, and set before the arm's
 * look at the work (a seq_cst RMW, as the armed bits: peer_wake in
 * data.c); context lock held */
static void cq_wslot(struct soft_cq *cq, int on)
{
	struct soft_context *ctx = cq->ctx;
	uint32_t *n = &ctx->wslot_armed[__builtin_ctzll(cq->wbit)];
	_Atomic uint64_t *bits = &soft_reg->ctx[ctx->reg_idx].armed_cqs;

	if (ctx->owner_pid != soft_self_pid)
		return; /* a forked child's: never published */
	if (on && !(*n)++)
		atomic_fetch_or(bits, cq->wbit);
	else if (!on && !--*n)
		atomic_fetch_and(bits, ~cq->wbit);
}

/* cq_disarm -- cq's arm is spent or gone; context lock held */
static void cq_disarm(struct soft_cq *cq)
{
	struct soft_context *ctx = cq->ctx;
	struct soft_comp_channel *ch = cq_chan(cq);

	cq->armed = 0;
	cq_wslot(cq, 0);
	soft_hint_set(&ctx->narmed, ctx->narmed - 1);
	if (cq->arm_direct) {
		if (!--ch->narmed)
			soft_ctx_armed(ctx, SOFT_ARMED_CHAN(ch->cell), 0);
	} else {
		soft_hint_set(&ctx->narmed_thread, ctx->narmed_thread - 1);
		if (!ctx->narmed_thread)
			soft_ctx_armed(ctx, SOFT_ARMED_THREAD, 0);
	}
}

/* chan_hint -- a byte of ours into the FIFO: an event waits; ch->m held */
static void chan_hint(struct soft_comp_channel *ch)
{
	static const char b;
	ssize_t r;

	if (ch->hint || ch->quiet || !ch->count)
		return;
	r = write(ch->wfd, &b, 1);
	(void)r; /* EAGAIN: full, so readable already */
	ch->hint = 1;
}

/* chan_push -- queue an event for cq (soft_cq_push, context lock held) */
static void chan_push(struct soft_comp_channel *ch, struct ibv_cq *cq)
{
	pthread_mutex_lock(&ch->m);
	if (ch->count == ch->cap) {
		size_t ncap = ch->cap ? ch->cap * 2 : 16, i;
		struct ibv_cq **nb = malloc(ncap * sizeof(*nb));

		if (!nb) {
			pthread_mutex_unlock(&ch->m);
			return;
		}
		for (i = 0; i < ch->count; i++)
			nb[i] = ch->ev[(ch->head + i) % ch->cap];
		free(ch->ev);
		ch->ev = nb;
		ch->cap = ncap;
		ch->head = 0;
	}
	ch->ev[(ch->head + ch->count) % ch->cap] = cq;
	ch->count++;
	chan_hint(ch);
	pthread_mutex_unlock(&ch->m);
}

/* chan_take -- hand out the oldest event, under ch->m: ibv_destroy_cq
 * waits for the ack of what was handed out before its purge */
static void chan_take(struct soft_comp_channel *ch, struct ibv_cq **cq)
{
	*cq = ch->ev[ch->head];
	ch->head = (ch->head + 1) % ch->cap;
	ch->count--;
	to_scq(*cq)->comp_reported++;
}

/* chan_pop -- take the oldest event; 0: none, 1: taken, the last, 2:
 * taken, more queued.  end_quiet: the caller's serving pass is over */
static int chan_pop(struct soft_comp_channel *ch, struct ibv_cq **cq,
		    int end_quiet)
{
	int got = 0;

	pthread_mutex_lock(&ch->m);
	if (end_quiet)
		ch->quiet--;
	if (ch->count) {
		chan_take(ch, cq);
		got = ch->count ? 2 : 1;
	}
	chan_hint(ch); /* events still queued keep the fd readable */
	pthread_mutex_unlock(&ch->m);
	return got;
}

/* chan_purge -- drop the queued events of cq (its bytes stay: hints) */
static void chan_purge(struct soft_comp_channel *ch, struct ibv_cq *cq)
{
	size_t i, n = 0;

	pthread_mutex_lock(&ch->m);
	for (i = 0; i < ch->count; i++) {
		struct ibv_cq *e = ch->ev[(ch->head + i) % ch->cap];

		if (e != cq)
			ch->ev[(ch->head + n++) % ch->cap] = e;
	}
	ch->count = n;
	pthread_mutex_unlock(&ch->m);
}

/* chan_open -- the channel's FIFO, on a free cell of ctx if there is one
 * (a cell is taken by its key in the registry: the context slot is ours);
 * without a cell it is unlinked at once.  0, or -1 with errno */
static int chan_open(struct soft_context *ctx, struct soft_comp_channel *ch)
{
	_Atomic uint32_t *keys = soft_reg->ctx[ctx->reg_idx].chan_key;
	char path[160];
	uint32_t zero;
	int c = SOFT_CHAN_CELLS, fd, wfd, e;

	ch->cell = -1;
	ch->key = soft_reg_pd_id(); /* host-unique while the registry lives */
	if (ctx->owner_pid == soft_self_pid && !getenv_nodirect())
		for (c = 0; c < SOFT_CHAN_CELLS; c++) {
			zero = 0;
			if (atomic_compare_exchange_strong(&keys[c], &zero,
							   ch->key))
				break;
		}
	soft_chan_path(path, sizeof(path), ch->key);
	/* keys restart with each registry: a FIFO already at our key's path
	 * is an earlier registry's, left by a killed process; replaced, as
	 * seg_create replaces a stale segment */
	if (mkfifo(path, 0600) &&
	    (errno != EEXIST || unlink(path) || mkfifo(path, 0600)))
		goto free_cell;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		goto unlink;
	/* ours: hints in, stale bytes out, whatever the fd's mode */
	wfd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (wfd < 0) {
		e = errno;
		close(fd);
		errno = e;
		goto unlink;
	}
	ch->ch.fd = fd;
	ch->wfd = wfd;
	ch->reg_idx = ctx->reg_idx;
	ch->owner = soft_self_pid;
	if (c < SOFT_CHAN_CELLS)
		ch->cell = c;
	else
		unlink(path); /* nobody else writes to it */
	return 0;
unlink:
	e = errno;
	unlink(path);
	errno = e;
free_cell:
	if (c < SOFT_CHAN_CELLS)
		atomic_store(&keys[c], 0);
	return -1;
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
	if (chan_open(to_sctx(context), ch)) {
		free(ch);
		return NULL;
	}
	pthread_mutex_init(&ch->m, NULL);
	ch->ch.context = context;
	ch->ch.refcnt = 0;
	return &ch->ch;
}

/* ibv_destroy_comp_channel -- EBUSY while CQs use it */
int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct soft_comp_channel *ch;
	char path[160];
	uint32_t key;

	if (!channel)
		return EINVAL;
	ch = soft_container_of(channel, struct soft_comp_channel, ch);
	if (channel->refcnt)
		return EBUSY;
	/* the cell, unless the context has gone (closing it unlinked the
	 * FIFO) or this is a forked child's copy; the context may be closed
	 * already: not touched */
	if (ch->cell >= 0 && ch->owner == soft_self_pid && soft_reg) {
		key = ch->key;
		if (atomic_compare_exchange_strong(
			    &soft_reg->ctx[ch->reg_idx].chan_key[ch->cell],
			    &key, 0)) {
			soft_chan_path(path, sizeof(path), ch->key);
			unlink(path);
		}
	}
	soft_chan_forget(ch->key); /* a kick of ours kept its FIFO open */
	close(ch->wfd);
	close(channel->fd);
	pthread_mutex_destroy(&ch->m);
	free(ch->ev);
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
	if (soft_count_take(&cq_live, SOFT_MAX_CQ)) {
		errno = ENOMEM; /* max_cq are */
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (cq) {
		cq->size = n - 1;
		cq->q = calloc(cq->size, sizeof(*cq->q));
	}
	if (!cq || !cq->q) {
		free(cq);
		soft_count_drop(&cq_live);
		errno = ENOMEM;
		return NULL;
	}
	soft_populate(cq->q, cq->size * sizeof(*cq->q), 1);
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
	cq->wbit = 1ull << (ctx->cq_seq++ % 64);
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
	/* EOPNOTSUPP, as rdma-core's tests/test_cqex.py asks of a flag
	 * (IGNORE_OVERRUN) a provider does not have */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* a parent domain of this context (mlx5: EINVAL for a plain PD) */
	if (attr->cqe > (uint32_t)SOFT_MAX_CQE ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	     (!attr->parent_domain || attr->parent_domain->context != context ||
	      !soft_container_of(attr->parent_domain, struct soft_pd, pd)
		       ->prot))) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_create(context, (int)attr->cqe, attr->cq_context, attr->channel,
		       (int)attr->comp_vector);
	if (!cq)
		return NULL;
	cq->wc_flags = attr->wc_flags;
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)
		cq->pdom = soft_pdom_get(attr->parent_domain);
	cq->single = ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
		      (attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) ||
		     ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
		      soft_pd_td(attr->parent_domain));
	return &cq->cqx;
}

/* ibv_resize_cq -- change the capacity: cqe not below the completions it
 * holds (ibv_resize_cq(3); rxe_cq_chk_attr compares cqe itself, before
 * any rounding up).  The new queue is allocated and faulted in before
 * the context lock, the old one freed after it: the lock is held only to
 * move what the CQ holds, not for as long as a large queue takes. */
int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	struct soft_cq *c;
	struct soft_cqe *nq, *old;
	uint32_t n = 1, i;

	if (!cq)
		return EINVAL;
	c = to_scq(cq);
	if (cqe < 1 || cqe > SOFT_MAX_CQE)
		return EINVAL;
	while (n < (uint32_t)cqe + 1)
		n <<= 1;
	nq = calloc(n - 1, sizeof(*nq));
	if (!nq)
		return ENOMEM;
	soft_populate(nq, (n - 1) * sizeof(*nq), 1);
	soft_lock(&c->ctx->lock);
	if ((uint32_t)cqe < c->count) {
		soft_unlock(&c->ctx->lock);
		free(nq);
		return EINVAL;
	}
	for (i = 0; i < c->count; i++)
		nq[i] = c->q[(c->head + i) % c->size];
	old = c->q;
	c->q = nq;
	c->head = 0;
	c->size = n - 1;
	c->cqx.cqe = (int)c->size;
	soft_unlock(&c->ctx->lock);
	free(old);
	return 0;
}

/* ibv_destroy_cq -- EBUSY while QPs use it; waits for event acks */
int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct soft_cq *c;
	struct soft_context *ctx;

	if (!cq)
		return EINVAL;
	c = to_scq(cq);
	ctx = c->ctx;
	soft_lock(&ctx->lock);
	if (c->refcnt) {
		soft_unlock(&ctx->lock);
		return EBUSY;
	}
	if (c->armed)
		cq_disarm(c);
	soft_list_del(&c->link);
	soft_unlock(&ctx->lock);
	if (cq_chan(c))
		chan_purge(cq_chan(c), cq);
	soft_async_purge(ctx, cq);
	pthread_mutex_lock(&cq->mutex);
	while (cq->comp_events_completed != c->comp_reported ||
	       cq->async_events_completed != c->async_reported)
		pthread_cond_wait(&cq->cond, &cq->mutex);
	pthread_mutex_unlock(&cq->mutex);
	if (cq->channel)
		__atomic_sub_fetch(&cq->channel->refcnt, 1, __ATOMIC_RELAXED);
	soft_pdom_put(c->pdom);
	free(c->q);
	free(c);
	soft_count_drop(&cq_live);
	return 0;
}

/*
 * soft_req_notify_cq -- arm for the next (solicited) completion.  A CQ on
 * a channel with a cell sets the channel's bit, then runs one progress
 * pass (work published before the bit was seen by nobody: its completion
 * comes now, and raises the event, as the thread's pass did); other CQs
 * have the progress thread woken for that pass.
 */
int soft_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int soft_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	struct soft_cq *c = to_scq(cq);
	struct soft_context *ctx = c->ctx;
	struct soft_comp_channel *ch = cq_chan(c);
	int direct, sends;

	if (ctx->owner_pid != soft_self_pid)
		return EIO; /* inherited across fork: its thread is not here */
	soft_lock(&ctx->lock);
	if (!c->armed) {
		/* solicited only: the thread, which raises no event for an
		 * unsolicited message, where a kick would make the fd readable
		 * with no event to read */
		c->arm_direct = ch && ch->cell >= 0 && !solicited_only;
		cq_wslot(c, 1);
		soft_hint_set(&ctx->narmed, ctx->narmed + 1);
		if (c->arm_direct) {
			ch->narmed++;
		} else {
			soft_hint_set(&ctx->narmed_thread,
				      ctx->narmed_thread + 1);
			if (ctx->narmed_thread == 1)
				soft_ctx_armed(ctx, SOFT_ARMED_THREAD, 1);
		}
	}
	if (c->armed != 1)
		c->armed = solicited_only ? 2 : 1;
	direct = c->arm_direct;
	if (direct) {
		/* again if a kick took it: the bit before the look at work */
		soft_ctx_armed(ctx, SOFT_ARMED_CHAN(ch->cell), 1);
		soft_progress(ctx);
	}
	soft_thread_start_locked(ctx); /* timers, the safety net */
	sends = ctx->outstanding != 0; /* under the lock: posts change it */
	soft_unlock(&ctx->lock);
	/* the progress thread sweeps once more now that we are armed; a
	 * direct waiter's thread only if sends wait while it naps long (its
	 * timers then run every millisecond, thread_main) */
	if (!direct || (sends && atomic_load(&ctx->thread_nap)))
		soft_wake_thread((uint32_t)ctx->reg_idx);
	if (soft_net_enabled())
		soft_net_sleeping(); /* no poll from us: the network's thread */
	return 0;
}

/* soft_cq_room -- whether one more completion fits */
int soft_cq_room(struct soft_cq *cq)
{
	return cq->count < cq->size;
}

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
	soft_cq_count_set(cq, n);
}

/* cq_event -- the arm is spent: the event (out of line: a busy poller
 * never arms, and pays nothing for it) */
__attribute__((noinline, cold)) static void cq_event(struct soft_cq *cq)
{
	cq_disarm(cq);
	if (cq_chan(cq))
		chan_push(cq_chan(cq), ibv_cq_ex_to_cq(&cq->cqx));
}

/*
 * cq_overrun -- wc did not fit: the CQ's error event (once per CQ), and
 * the QP whose completion it was goes to ERR with a local work queue
 * catastrophic error, as an HCA's: rxe's responder takes a failed
 * rxe_cq_post to RESPST_ERR_CQ_OVERFLOW (class G) and rxe_qp_error, mlx5
 * raises the CQ error and puts each QP that posts to the overrun CQ in
 * ERR with IB_EVENT_QP_FATAL (IB 11.6.3).  A QP already in ERR (its
 * flushes overflowing too) raises nothing more.  A DCT (any_src) goes to
 * ERR silently: mlx5_core hands a DCT no event but DCT_DRAINED
 * (is_event_type_allowed), so its WQ catastrophic error reaches no one;
 * it answers nothing from then on.  Out of line: the full CQ is the
 * unlikely branch of cq_take and soft_cq_push.
 */
static __attribute__((noinline, cold)) void cq_overrun(struct soft_cq *cq,
						       const struct ibv_wc *wc)
{
	struct soft_context *ctx = cq->ctx;
	struct soft_qp *qp;

	if (!cq->overflowed) {
		cq->overflowed = 1;
		soft_async_event(ctx, IBV_EVENT_CQ_ERR,
				 ibv_cq_ex_to_cq(&cq->cqx));
	}
	qp = soft_qp_local_in(ctx, wc->qp_num);
	if (!qp || qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET)
		return;
	if (!qp->ops->any_src)
		soft_async_event(ctx, IBV_EVENT_QP_FATAL, &qp->qpx.qp_base);
	soft_qp_to_error(qp);
}

/* soft_cq_push -- add a completion; ctx lock held */
void soft_cq_push(struct soft_cq *cq, const struct ibv_wc *wc, int solicited)
{
	if (cq->count == cq->size) {
		cq_overrun(cq, wc);
		return;
	}
	cq->q[(cq->head + cq->count) % cq->size].wc = *wc;
	soft_cq_count_set(cq, cq->count + 1);
	if (cq->armed &&
	    (cq->armed == 1 || solicited || wc->status != IBV_WC_SUCCESS))
		cq_event(cq);
}

/*
 * chan_serve -- bytes out, then the context's progress: a kick's work
 * becomes completions, and an armed CQ's event.  With no event, the
 * channel's bit again (a producer claimed it), then one more look at the
 * work; the bytes go before all that (a kick read after it would be work
 * nobody looks at).  ch->count is read under the context lock: events
 * are queued under it.
 * want: pop one event for the caller (1 if one came; no byte for it).
 */
static int chan_serve(struct soft_comp_channel *ch, struct ibv_cq **cq,
		      int want)
{
	struct soft_context *ctx = to_sctx(ch->ch.context);
	char buf[64];
	int got = 0, idle;

	pthread_mutex_lock(&ch->m);
	ch->quiet++; /* what this pass queues is hinted at its end */
	while (read(ch->wfd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		;
	ch->hint = 0;
	pthread_mutex_unlock(&ch->m);
	soft_lock(&ctx->lock);
	soft_progress(ctx);
	pthread_mutex_lock(&ch->m);
	idle = !ch->count;
	pthread_mutex_unlock(&ch->m);
	if (ch->cell >= 0 && ch->narmed && idle) {
		/* nothing for the caller: it may sleep next, so producers
		 * must see the bit again (not while it has events to handle:
		 * each kick then would be a write for a waiter that is awake)
		 * and one more look at the work after it */
		soft_ctx_armed(ctx, SOFT_ARMED_CHAN(ch->cell), 1);
		soft_progress(ctx);
	}
	soft_unlock(&ctx->lock);
	pthread_mutex_lock(&ch->m);
	ch->quiet--;
	if (want && ch->count) {
		chan_take(ch, cq);
		got = 1;
	}
	chan_hint(ch);
	pthread_mutex_unlock(&ch->m);
	return got;
}

/*
 * ibv_get_cq_event -- next completion event of a channel.  A queued event
 * first; when none is left behind it, the bytes go and the progress runs
 * (a kick's work becomes completions, an armed CQ's event among them);
 * with nothing, wait on the fd as its mode says (O_NONBLOCK: EAGAIN), and
 * look again after each byte.
 */
int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
		     void **cq_context)
{
	struct soft_comp_channel *ch;
	struct ibv_cq *c = NULL;
	char b;
	ssize_t n;
	int got, mine;

	if (!channel || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	ch = soft_container_of(channel, struct soft_comp_channel, ch);
	mine = ch->owner == soft_self_pid &&
	       to_sctx(channel->context)->owner_pid == soft_self_pid;
	for (;;) {
		got = chan_pop(ch, &c, 0);
		if (got == 2 || (got && !mine))
			break; /* more queued: their byte stays */
		if (mine)
			got = chan_serve(ch, &c, !got) || got;
		if (got)
			break;
		n = read(channel->fd, &b, 1);
		if (n <= 0) {
			if (!n)
				errno = EIO;
			return -1;
		}
		pthread_mutex_lock(&ch->m);
		ch->hint = 0; /* it may have been ours */
		pthread_mutex_unlock(&ch->m);
	}
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

/* cq_start_poll -- the context lock as ibv_poll_cq takes it
 * (soft_ctx_enter_poll: ENOENT at once for an empty CQ while another
 * application thread is in the context), held until end_poll */
static int cq_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct soft_cq *cq = soft_container_of(cqx, struct soft_cq, cqx);
	int biased;

	if (attr && attr->comp_mask)
		return EINVAL;
	biased = soft_ctx_enter_poll(cq->ctx, cq->single, &cq->count,
				     &cq->backoffs);
	if (biased < 0)
		return ENOENT;
	soft_progress(cq->ctx);
	if (!cq->count) {
		soft_ctx_exit_poll(cq->ctx, biased);
		return ENOENT;
	}
	cq->cqx_biased = biased;
	cq->cqx_polling = 1;
	cqx_load(cq);
	return 0;
}

static void cqx_consume(struct soft_cq *cq)
{
	if (!cq->cqx_polling)
		return;
	cq->head = (cq->head + 1) % cq->size;
	soft_cq_count_set(cq, cq->count - 1);
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
	soft_ctx_exit_poll(cq->ctx, cq->cqx_biased);
}
