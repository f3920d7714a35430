/* SPDX-License-Identifier: MIT */
/*
 * pool.c -- registered memory: slabs carved into power-of-two size classes,
 * grown on demand up to the context's limit, never registered on the data
 * path.  Every buffer has RDMAMSG_HEADROOM bytes in front of its data for
 * the wire header, so a filled buffer goes out as one SGE.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "dispatch.h"

#define SLAB_TARGET (1u << 20) /* small classes share 1 MiB slabs */
#define HUGE_PAGE   (2u << 20)
/* the pool keeps this much registered when idle; idle slabs beyond it go
 * back to the system when an endpoint closes */
#define POOL_IDLE ((size_t)8 << 20)

/* class_of -- the smallest class holding size bytes, or -1: the bit
 * length of size - 1 (one instruction, where walking the classes took
 * some 50 at 64 KiB on every buffer taken) */
static int class_of(size_t size)
{
	int c;

	if (size <= ((size_t)1 << RDMAMSG_MIN_CLASS_SHIFT))
		return 0;
	c = 64 - __builtin_clzll((unsigned long long)(size - 1)) -
	    RDMAMSG_MIN_CLASS_SHIFT;
	return c < RDMAMSG_NCLASSES ? c : -1;
}

/* class_stride -- bytes one buffer of class c takes in its slab */
static size_t class_stride(int c)
{
	return RDMAMSG_HEADROOM + ((size_t)1 << (c + RDMAMSG_MIN_CLASS_SHIFT));
}

/* rdmamsg__pool_init -- an empty pool */
int rdmamsg__pool_init(struct rdmamsg_ctx *ctx, size_t limit, int huge)
{
	memset(&ctx->pool, 0, sizeof(ctx->pool));
	ctx->pool.limit = limit;
	ctx->pool.huge = huge;
	return 0;
}

/*
 * rdmamsg__shared_mem -- len bytes of a memfd called name, sealed against
 * shrinking, mapped shared; *fd is the file (the caller closes it once
 * the memory is registered: a provider that shares registrations between
 * processes of a host, as softrdma does, finds it then).  A peer on the
 * host may then map the memory (with the access the registration grants)
 * instead of copying through a system call; on an HCA it is memory as
 * any other.  Where there is no such file, anonymous memory of the same
 * pages (huge with MFD_HUGETLB) and *fd -1; NULL when neither can be had.
 */
void *rdmamsg__shared_mem(const char *name, size_t len, unsigned int flags,
			  int *fd)
{
	void *p;

	*fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);
	if (*fd >= 0) {
		if (!ftruncate(*fd, (off_t)len) &&
		    !fcntl(*fd, F_ADD_SEALS,
			   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
			p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
				 *fd, 0);
			if (p != MAP_FAILED)
				return p;
		}
		close(*fd);
		*fd = -1;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS |
			 (flags & MFD_HUGETLB ? MAP_HUGETLB : 0),
		 -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* slab_mem -- memory for a slab (rdmamsg__shared_mem: *fd open for a
 * memfd, else -1), of huge pages when asked and to be had */
static void *slab_mem(struct rdmamsg__pool *pool, size_t *len, int *huge,
		      int *fd)
{
	void *p;

	*huge = 0;
	if (pool->huge) {
		size_t hl = (*len + HUGE_PAGE - 1) & ~((size_t)HUGE_PAGE - 1);

		p = rdmamsg__shared_mem("rdmamsg-pool", hl, MFD_HUGETLB, fd);
		if (p) {
			*len = hl;
			*huge = 1;
			return p;
		}
		LOG_INFO("no huge pages for a %zu-byte slab; normal pages",
			 *len);
	}
	return rdmamsg__shared_mem("rdmamsg-pool", *len, 0, fd);
}

/* slab_idle -- whether no buffer of the slab is handed out */
static int slab_idle(const struct rdmamsg__slab *slab)
{
	return slab->nused == 0;
}

/* free_push -- b on its class's free list, first (taken first by
 * rdmamsg__buf_get: its lines are likely still in this core's cache) */
static void free_push(struct rdmamsg__pool *pool, struct rdmamsg_buf *b)
{
	b->prev = NULL;
	b->next = pool->free[b->cls];
	if (b->next)
		b->next->prev = b;
	else
		pool->free_tail[b->cls] = b;
	pool->free[b->cls] = b;
}

/* free_unlink -- take b off its class's free list */
static void free_unlink(struct rdmamsg__pool *pool, struct rdmamsg_buf *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		pool->free[b->cls] = b->next;
	if (b->next)
		b->next->prev = b->prev;
	else
		pool->free_tail[b->cls] = b->prev;
	b->next = b->prev = NULL;
}

/* slab_release -- unlink an idle slab's buffers, deregister and free it */
static void slab_release(struct rdmamsg_ctx *ctx, struct rdmamsg__slab *slab)
{
	struct rdmamsg__pool *pool = &ctx->pool;
	size_t i;

	for (i = 0; i < slab->ndescs; i++)
		free_unlink(pool, &slab->descs[i]); /* idle: all are free */
	pool->registered -= slab->len;
	LOG_DBG("pool released %zu bytes (class %zu B), %zu registered",
		slab->len, class_stride(slab->cls) - RDMAMSG_HEADROOM,
		pool->registered);
	ctx->ops->dereg_mr(slab->mr);
	munmap(slab->mem, slab->len);
	free(slab->descs);
	free(slab);
}

/* pool_reclaim -- release idle slabs of other classes than c until need
 * more bytes fit under the limit; only on the grow-at-limit slow path, so
 * memory a burst of one size grew can serve another size later */
static void pool_reclaim(struct rdmamsg_ctx *ctx, int c, size_t need)
{
	struct rdmamsg__pool *pool = &ctx->pool;
	struct rdmamsg__slab **pp = &pool->slabs, *slab;

	while ((slab = *pp) && pool->registered + need > pool->limit) {
		if (slab->cls != c && slab_idle(slab)) {
			*pp = slab->next;
			slab_release(ctx, slab);
		} else {
			pp = &slab->next;
		}
	}
}

/* rdmamsg__pool_shrink -- release idle slabs while the pool holds more
 * than its idle size: memory a crowd of endpoints used goes back to the
 * system (and is unpinned, on hardware) after they close */
void rdmamsg__pool_shrink(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__pool *pool = &ctx->pool;
	struct rdmamsg__slab **pp = &pool->slabs, *slab;
	size_t keep = pool->limit < POOL_IDLE ? pool->limit : POOL_IDLE;

	while ((slab = *pp) && pool->registered > keep) {
		if (slab_idle(slab)) {
			*pp = slab->next;
			slab_release(ctx, slab);
		} else {
			pp = &slab->next;
		}
	}
}

/* pool_grow -- add one slab of class c; -ENOMEM at the limit */
static int pool_grow(struct rdmamsg_ctx *ctx, int c)
{
	struct rdmamsg__pool *pool = &ctx->pool;
	size_t stride = class_stride(c), len, n, i;
	struct rdmamsg__slab *slab;
	int ret, fd;

	n = stride >= SLAB_TARGET ? 1 : SLAB_TARGET / stride;
	len = n * stride;
	if (pool->registered + len > pool->limit)
		pool_reclaim(ctx, c, len);
	if (pool->registered + len > pool->limit) {
		/* a smaller slab may still fit under the limit */
		if (pool->registered + stride > pool->limit)
			return -ENOMEM;
		n = (pool->limit - pool->registered) / stride;
		len = n * stride;
	}
	slab = calloc(1, sizeof(*slab));
	if (!slab)
		return -ENOMEM;
	slab->descs = calloc(n, sizeof(*slab->descs));
	if (!slab->descs) {
		ret = -ENOMEM;
		goto err_free_slab;
	}
	slab->ndescs = n;
	slab->cls = c;
	slab->len = len;
	slab->mem = slab_mem(pool, &slab->len, &slab->huge, &fd);
	if (!slab->mem) {
		ret = -ENOMEM;
		goto err_free_descs;
	}
	/* local access only: the pool holds every client's messages, and a
	 * peer that learns or guesses a key must reach none of them.  What a
	 * peer may read (rendezvous sources) or write (exported regions) has
	 * a registration of its own (mr.c) or a memory window bound over
	 * just its bytes for one transfer (rndv.c): MW_BIND grants a peer
	 * nothing by itself. */
	slab->mr = ctx->ops->reg_mr(
		ctx->pd, slab->mem, slab->len,
		IBV_ACCESS_LOCAL_WRITE |
			(rdmamsg__mw_cap(ctx) ? IBV_ACCESS_MW_BIND : 0));
	if (fd >= 0)
		close(fd); /* the mapping keeps the file */
	if (!slab->mr) {
		ret = rdmamsg__errno(ENOMEM);
		LOG_ERR("registering a %zu-byte slab failed: %d", slab->len,
			ret);
		goto err_unmap;
	}
	for (i = 0; i < n; i++) {
		struct rdmamsg_buf *b = &slab->descs[i];

		b->ctx = ctx;
		b->slab = slab;
		b->data = (char *)slab->mem + i * stride + RDMAMSG_HEADROOM;
		b->cap = stride - RDMAMSG_HEADROOM;
		b->lkey = slab->mr->lkey;
		b->cls = (uint8_t)c;
		b->state = BUF_FREE;
		free_push(pool, b);
	}
	pool->registered += slab->len;
	slab->next = pool->slabs;
	pool->slabs = slab;
	LOG_DBG("pool grew by %zu bytes (class %zu B), %zu registered",
		slab->len, stride - RDMAMSG_HEADROOM, pool->registered);
	return 0;

err_unmap:
	munmap(slab->mem, slab->len);
err_free_descs:
	free(slab->descs);
err_free_slab:
	free(slab);
	return ret;
}

/* rdmamsg__pool_fini -- deregister and free every slab */
void rdmamsg__pool_fini(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__slab *slab, *next;

	for (slab = ctx->pool.slabs; slab; slab = next) {
		next = slab->next;
		ctx->ops->dereg_mr(slab->mr);
		munmap(slab->mem, slab->len);
		free(slab->descs);
		free(slab);
	}
	memset(&ctx->pool, 0, sizeof(ctx->pool));
}

/* buf_take -- a buffer of at least size bytes for owner: the one freed
 * last, or with OLDEST the one freed longest ago */
static inline int buf_take(struct rdmamsg_ctx *ctx, size_t size, int owner,
			   int oldest, struct rdmamsg_buf **buf)
{
	struct rdmamsg__pool *pool = &ctx->pool;
	struct rdmamsg_buf *b;
	int c, ret;

	c = class_of(size ? size : 1);
	if (c < 0)
		return -EMSGSIZE;
	if (RDMAMSG_UNLIKELY(!pool->free[c])) {
		ret = pool_grow(ctx, c);
		if (ret)
			return ret;
	}
	b = oldest ? pool->free_tail[c] : pool->free[c];
	free_unlink(pool, b);
	b->state = (uint8_t)owner;
	b->slab->nused++;
	pool->in_use += b->cap + RDMAMSG_HEADROOM;
	*buf = b;
	return 0;
}

/* rdmamsg__buf_get -- a buffer of at least size bytes for owner, the one
 * freed last: whoever fills or receives into it finds its lines in this
 * core's cache */
int rdmamsg__buf_get(struct rdmamsg_ctx *ctx, size_t size, int owner,
		     struct rdmamsg_buf **buf)
{
	return buf_take(ctx, size, owner, 0, buf);
}

/*
 * rdmamsg__buf_get_for_peer -- a library buffer of at least size bytes
 * that we fill and a process on this host then reads in place (a
 * rendezvous source to a peer on softrdma): the one freed longest ago.
 * The one freed last was, for a source, just read by the peer, and
 * rewriting lines the other core has just read takes them back from it
 * one by one; older ones have left its cache (softrdma's copy ring moves
 * on for the same reason, soft/data.c ring_take).  rdmamsg_perf -t bw --size 65536 --window 128 --busy, the
 * two sides pinned to the two cores of a VM that passes a line between
 * them in 0.06 us, medians of 8 alternated rounds: 11,070 -> 14,845 MB/s.
 */
int rdmamsg__buf_get_for_peer(struct rdmamsg_ctx *ctx, size_t size,
			      struct rdmamsg_buf **buf)
{
	return buf_take(ctx, size, BUF_LIB, 1, buf);
}

/* rdmamsg__buf_heap -- an unregistered buffer of size bytes from the heap,
 * for what needs no registration (reassembly) when the pool has no room:
 * a connection is slowed by a full pool, never cut off */
int rdmamsg__buf_heap(struct rdmamsg_ctx *ctx, size_t size,
		      struct rdmamsg_buf **buf)
{
	struct rdmamsg_buf *b;

	if (size > SIZE_MAX - sizeof(*b) - RDMAMSG_HEADROOM)
		return -ENOMEM;
	b = malloc(sizeof(*b) + RDMAMSG_HEADROOM + size);
	if (!b)
		return -ENOMEM;
	memset(b, 0, sizeof(*b));
	b->ctx = ctx;
	b->slab = NULL; /* rdmamsg__buf_put frees it */
	b->data = (char *)(b + 1) + RDMAMSG_HEADROOM;
	b->cap = size;
	b->state = BUF_LIB;
	*buf = b;
	return 0;
}

/*
 * A control buffer: outside the pool and its limit, registered once for
 * the life of its owner and lent again and again, for what must go out
 * when the pool has nothing and the QP has no inline room for it (a
 * rendezvous FIN, xfer.c).  Its page is its own (a provider may mark a
 * registration's pages don't-fork: ctx.c's ctx_alloc), and a send takes
 * the wire header from its headroom (msg.c's buf_sges), so it needs no
 * pool memory at all.  Lent: its bytes are a posted send's until that
 * completes (rdmamsg__buf_put).
 */
struct ctl_buf {
	struct rdmamsg_buf b; /* first: a buffer's address is the ctl_buf's */
	struct ibv_mr *mr;
	void *mem; /* the page */
	uint8_t lent;
	uint8_t orphan; /* the owner dropped it while lent */
};

/* ctl_free -- a control buffer goes: registration, page, descriptor */
static void ctl_free(struct ctl_buf *c)
{
	c->b.ctx->ops->dereg_mr(c->mr);
	free(c->mem);
	free(c);
}

/* rdmamsg__buf_ctl_new -- a control buffer of size bytes (after the
 * headroom), registered for local access: 0 or a negative errno */
int rdmamsg__buf_ctl_new(struct rdmamsg_ctx *ctx, size_t size,
			 struct rdmamsg_buf **buf)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t a = pg > 0 ? (size_t)pg : 4096;
	size_t len;
	struct ctl_buf *c;
	int ret;

	if (size > a - RDMAMSG_HEADROOM)
		return -EINVAL; /* a few bytes of control, never more */
	if (ctx->test_no_ctl)
		return -ENOMEM;
	len = RDMAMSG_HEADROOM + size;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (posix_memalign(&c->mem, a, a)) {
		ret = -ENOMEM;
		goto err_free_desc;
	}
	memset(c->mem, 0, len);
	errno = 0;
	c->mr = ctx->ops->reg_mr(ctx->pd, c->mem, len, 0);
	if (!c->mr) {
		ret = rdmamsg__errno(ENOMEM);
		goto err_free_mem;
	}
	c->b.ctx = ctx;
	c->b.slab = NULL;
	c->b.cls = RDMAMSG__CLS_CTL;
	c->b.data = (char *)c->mem + RDMAMSG_HEADROOM;
	c->b.cap = size;
	c->b.lkey = c->mr->lkey;
	c->b.state = BUF_LIB;
	*buf = &c->b;
	return 0;

err_free_mem:
	free(c->mem);
err_free_desc:
	free(c);
	return ret;
}

/* rdmamsg__buf_ctl_take -- lend control buffer b: 0, or -ENOMEM while
 * its last send has not completed */
int rdmamsg__buf_ctl_take(struct rdmamsg_buf *b)
{
	struct ctl_buf *c = (struct ctl_buf *)b;

	if (c->lent)
		return -ENOMEM;
	c->lent = 1;
	b->state = BUF_LIB;
	b->next = NULL;
	b->len = b->off = 0;
	return 0;
}

/* rdmamsg__buf_ctl_drop -- its owner lets b go: now, or when its send
 * completes (an endpoint's transfer state goes before its send slots
 * and backlog are emptied: ep.c's rdmamsg__ep_free) */
void rdmamsg__buf_ctl_drop(struct rdmamsg_buf *b)
{
	struct ctl_buf *c = (struct ctl_buf *)b;

	if (c->lent)
		c->orphan = 1;
	else
		ctl_free(c);
}

/* buf_put_other -- rdmamsg__buf_put of a buffer outside the pool: a
 * control buffer is free to lend again (or goes, dropped), a heap
 * buffer (rdmamsg__buf_heap's) is freed */
static __attribute__((noinline)) void buf_put_other(struct rdmamsg_buf *b)
{
	struct ctl_buf *c = (struct ctl_buf *)b;

	if (b->cls != RDMAMSG__CLS_CTL) {
		free(b);
		return;
	}
	c->lent = 0;
	if (c->orphan)
		ctl_free(c);
}

/* rdmamsg__buf_put -- return a buffer to its class's free list */
void rdmamsg__buf_put(struct rdmamsg_buf *b)
{
	struct rdmamsg__pool *pool = &b->ctx->pool;

	if (RDMAMSG_UNLIKELY(!b->slab)) {
		buf_put_other(b);
		return;
	}

	b->state = BUF_FREE;
	b->slab->nused--;
	free_push(pool, b);
	pool->in_use -= b->cap + RDMAMSG_HEADROOM;
}

/* rdmamsg_buf_alloc -- a registered buffer for the caller */
RDMAMSG_EXPORT int rdmamsg_buf_alloc(struct rdmamsg_ctx *ctx, size_t size,
				     struct rdmamsg_buf **buf)
{
	if (!ctx || !buf || size == 0)
		return -EINVAL;
	return rdmamsg__buf_get(ctx, size, BUF_USER, buf);
}

/* rdmamsg_buf_free -- give a caller's buffer back */
RDMAMSG_EXPORT int rdmamsg_buf_free(struct rdmamsg_buf *buf)
{
	if (!buf || buf->state != BUF_USER)
		return -EINVAL;
	buf->state = BUF_LIB;
	rdmamsg__buf_put(buf);
	return 0;
}

/* rdmamsg_buf_get_data -- where the buffer's bytes start */
RDMAMSG_EXPORT int rdmamsg_buf_get_data(const struct rdmamsg_buf *buf,
					void **data)
{
	if (!buf || !data || buf->state != BUF_USER)
		return -EINVAL;
	*data = buf->data;
	return 0;
}

/* rdmamsg_buf_get_size -- the buffer's capacity */
RDMAMSG_EXPORT int rdmamsg_buf_get_size(const struct rdmamsg_buf *buf,
					size_t *size)
{
	if (!buf || !size || buf->state != BUF_USER)
		return -EINVAL;
	*size = buf->cap;
	return 0;
}

/* rdmamsg_ctx_query_pool -- registered and handed-out bytes */
RDMAMSG_EXPORT int rdmamsg_ctx_query_pool(const struct rdmamsg_ctx *ctx,
					  size_t *registered, size_t *in_use)
{
	if (!ctx || !registered || !in_use)
		return -EINVAL;
	*registered = ctx->pool.registered;
	*in_use = ctx->pool.in_use;
	return 0;
}
