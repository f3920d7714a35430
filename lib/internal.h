/* SPDX-License-Identifier: MIT */
/* internal.h -- declarations shared by librdmamsg's files */
#ifndef RDMAMSG_INTERNAL_H
#define RDMAMSG_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "idtab.h"
#include "lane.h"
#include "proto.h"
#include "rdmamsg.h"

/* the device ports DC lanes may use (lane_dc.c: a DCT and DCIs each) */
#define RDMAMSG__DC_PORTS 4

/* Every public entry point carries this mark (built -fvisibility=hidden). */
#define RDMAMSG_EXPORT __attribute__((visibility("default")))

#define RDMAMSG_LIKELY(x)   __builtin_expect(!!(x), 1)
#define RDMAMSG_UNLIKELY(x) __builtin_expect(!!(x), 0)

struct rdmamsg__ops;
struct rdmamsg__loop;
struct io_uring_cqe;
struct io_uring_sqe;

/* ---- intrusive doubly linked list ---------------------------------- */

/* struct rdmamsg__list is in lane.h */

/* list_init -- an empty list (or an unlinked node) */
static inline void list_init(struct rdmamsg__list *l)
{
	l->next = l->prev = l;
}

/* list_empty -- true when l has no nodes (or node is unlinked) */
static inline int list_empty(const struct rdmamsg__list *l)
{
	return l->next == l;
}

/* list_add_tail -- append n to l */
static inline void list_add_tail(struct rdmamsg__list *l,
				 struct rdmamsg__list *n)
{
	n->prev = l->prev;
	n->next = l;
	l->prev->next = n;
	l->prev = n;
}

/* list_del -- unlink n and leave it as an empty list */
static inline void list_del(struct rdmamsg__list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	list_init(n);
}

#define container_of(p, type, member) \
	((type *)(void *)((char *)(p)-offsetof(type, member)))
#define list_for_each_safe(pos, tmp, head)                               \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
	     (pos) = (tmp), (tmp) = (pos)->next)

/* ---- logging ------------------------------------------------------- */

extern int rdmamsg__log_level;

void rdmamsg__log(int level, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define RDMAMSG_LOG(level, ...)                                       \
	do {                                                          \
		if (RDMAMSG_UNLIKELY((level) <= rdmamsg__log_level))  \
			rdmamsg__log((level), __func__, __VA_ARGS__); \
	} while (0)
#define LOG_ERR(...)  RDMAMSG_LOG(RDMAMSG_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) RDMAMSG_LOG(RDMAMSG_LOG_WARNING, __VA_ARGS__)
#define LOG_NOTE(...) RDMAMSG_LOG(RDMAMSG_LOG_NOTICE, __VA_ARGS__)
#define LOG_INFO(...) RDMAMSG_LOG(RDMAMSG_LOG_INFO, __VA_ARGS__)
#define LOG_DBG(...)  RDMAMSG_LOG(RDMAMSG_LOG_DEBUG, __VA_ARGS__)

/* ---- timers -------------------------------------------------------- */

/*
 * One-shot timers in a binary min-heap per context, ordered by due time and
 * then by start order (equal due times fire first-started first).  The heap
 * is intrusive (each timer holds its own links), so starting a timer never
 * allocates: start and stop are O(log n), the next due time is O(1).
 */
struct rdmamsg__timer {
	struct rdmamsg__timer *left, *right, *parent;
	uint64_t due_ns;
	uint64_t seq;
	void (*fn)(struct rdmamsg__timer *t);
	int active;
};

struct rdmamsg__timers {
	struct rdmamsg__timer *min;
	uint32_t n;
	uint64_t seq;
};

/* rdmamsg__now_ns -- CLOCK_MONOTONIC in nanoseconds (inline: progress
 * passes read it, loop.c pass_clock) */
static inline uint64_t rdmamsg__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* rdmamsg__timers_due -- due time of h's earliest timer, 0 if none
 * (inline: every progress pass looks) */
static inline uint64_t rdmamsg__timers_due(const struct rdmamsg__timers *h)
{
	return h->min ? h->min->due_ns : 0;
}

void rdmamsg__timers_init(struct rdmamsg__timers *h);
void rdmamsg__timer_init(struct rdmamsg__timer *t,
			 void (*fn)(struct rdmamsg__timer *t));
void rdmamsg__timer_start(struct rdmamsg_ctx *ctx, struct rdmamsg__timer *t,
			  unsigned int ms);
void rdmamsg__timer_start_at(struct rdmamsg_ctx *ctx, struct rdmamsg__timer *t,
			     uint64_t due_ns);
void rdmamsg__timer_stop(struct rdmamsg_ctx *ctx, struct rdmamsg__timer *t);
uint64_t rdmamsg__timer_next_due(const struct rdmamsg_ctx *ctx);
void rdmamsg__timers_run(struct rdmamsg_ctx *ctx);
void rdmamsg__timers_run_at(struct rdmamsg_ctx *ctx, uint64_t now_ns);

/* a context's copies of large rendezvous sources (bulk.c) */
enum {
	RDMAMSG__BULK_AUTO,   /* cached while cached copies run fast */
	RDMAMSG__BULK_CACHED, /* RDMAMSG_BULK_NT=0 */
	RDMAMSG__BULK_NT,     /* RDMAMSG_BULK_NT=1 */
};

struct rdmamsg__bulk {
	int mode;
	uint32_t slow;	  /* slow cached copies in a row */
	uint32_t nt_left; /* non-temporal copies before a cached one */
};

void rdmamsg__bulk_init(struct rdmamsg__bulk *b);
int rdmamsg__bulk_nt(const struct rdmamsg__bulk *b, size_t n);
void rdmamsg__bulk_note(struct rdmamsg__bulk *b, size_t n, uint64_t ns, int nt);
void rdmamsg__bulk_copy(struct rdmamsg__bulk *b, void *dst, const void *src,
			size_t n);
void rdmamsg__copy_nt(void *dst, const void *src, size_t n);

/* ---- memory pool --------------------------------------------------- */

/* Bytes in front of every buffer's data: the wire header goes there. */
#define RDMAMSG_HEADROOM	64
#define RDMAMSG_MIN_CLASS_SHIFT 6  /* 64 B */
#define RDMAMSG_MAX_CLASS_SHIFT 26 /* 64 MiB */
#define RDMAMSG_NCLASSES	(RDMAMSG_MAX_CLASS_SHIFT - RDMAMSG_MIN_CLASS_SHIFT + 1)

enum { BUF_FREE = 0, BUF_USER = 1, BUF_LIB = 2 };

struct rdmamsg__slab {
	struct rdmamsg__slab *next;
	void *mem;
	size_t len;
	struct ibv_mr *mr;
	struct rdmamsg_buf *descs;
	size_t ndescs;
	size_t nused; /* buffers handed out */
	int cls;
	int huge;
};

struct rdmamsg_buf {
	struct rdmamsg_buf *next; /* free list, backlog */
	struct rdmamsg_buf *prev; /* free list (pool.c) */
	struct rdmamsg_ctx *ctx;
	struct rdmamsg__slab *slab;
	char *data;
	size_t cap;
	uint32_t lkey;
	uint8_t cls;
	uint8_t state;
	/* backlog entry: a message waiting for credits */
	uint8_t has_imm;
	uint8_t reported;
	uint32_t imm;
	size_t len, off;
	void *op_ctx;
};

struct rdmamsg__pool {
	/* each class's free buffers, last freed first, and its other end */
	struct rdmamsg_buf *free[RDMAMSG_NCLASSES];
	struct rdmamsg_buf *free_tail[RDMAMSG_NCLASSES];
	struct rdmamsg__slab *slabs;
	size_t limit, registered, in_use;
	int huge;
};

int rdmamsg__pool_init(struct rdmamsg_ctx *ctx, size_t limit, int huge);
void *rdmamsg__shared_mem(const char *name, size_t len, unsigned int flags,
			  int *fd);
void rdmamsg__pool_fini(struct rdmamsg_ctx *ctx);
int rdmamsg__buf_get(struct rdmamsg_ctx *ctx, size_t size, int owner,
		     struct rdmamsg_buf **buf);
int rdmamsg__buf_get_for_peer(struct rdmamsg_ctx *ctx, size_t size,
			      struct rdmamsg_buf **buf);
void rdmamsg__buf_put(struct rdmamsg_buf *buf);
void rdmamsg__pool_shrink(struct rdmamsg_ctx *ctx);
int rdmamsg__buf_heap(struct rdmamsg_ctx *ctx, size_t size,
		      struct rdmamsg_buf **buf);
/* a registered control buffer (pool.c): cls of its descriptor */
#define RDMAMSG__CLS_CTL 0xff
int rdmamsg__buf_ctl_new(struct rdmamsg_ctx *ctx, size_t size,
			 struct rdmamsg_buf **buf);
int rdmamsg__buf_ctl_take(struct rdmamsg_buf *b);
void rdmamsg__buf_ctl_drop(struct rdmamsg_buf *b);

/* ---- the per-context interface (iface.c) ---------------------------- */

#define RDMAMSG_POLL_BATCH   32 /* completions polled at once */
#define RDMAMSG_RX_BATCH_MAX 16 /* data receives reposted together */

/*
 * One completion queue per context, shared by every lane: the wr_id of
 * each work request names its lane (lane.h's layout: a short tag of the
 * lane's slot in the id table below, with generation bits, so a
 * completion of a freed lane finds nothing) and the lane's own part (send
 * sequence, receive buffer index).  The CQ grows (ibv_resize_cq) as lanes
 * reserve room for all their work requests.
 */
struct rdmamsg__icq {
	struct ibv_cq *cq;
	/* cq made by ibv_create_cq_ex (cq is ibv_cq_ex_to_cq of it), or NULL */
	struct ibv_cq_ex *cqx;
	uint32_t size;	      /* capacity */
	uint32_t reserved;    /* live lanes' work requests */
	uint32_t stale;	      /* freed lanes', until seen empty */
	unsigned int unacked; /* CQ events not yet acknowledged */
	int event;	      /* a CQ event came: the arm is spent */
	int armed;	      /* requested notification not yet spent */
};

/* qp_num -> lane, open addressing (an SRQ receive names its buffer, not
 * its lane: the lane comes from wc.qp_num) */
struct rdmamsg__qpmap {
	uint32_t *keys; /* qp_num + 1; 0: empty */
	void **vals;
	uint32_t cap, n; /* cap: a power of two, or 0 */
};

int rdmamsg__qpmap_add(struct rdmamsg__qpmap *m, uint32_t qpn, void *p);
void rdmamsg__qpmap_del(struct rdmamsg__qpmap *m, uint32_t qpn);
void rdmamsg__qpmap_fini(struct rdmamsg__qpmap *m);

/* rdmamsg__qpmap_find -- the lane of qpn, or NULL */
static inline void *rdmamsg__qpmap_find(const struct rdmamsg__qpmap *m,
					uint32_t qpn)
{
	uint32_t i, k = qpn + 1;

	if (!m->cap)
		return NULL;
	for (i = (k * 2654435761u) & (m->cap - 1); m->keys[i];
	     i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == k)
			return m->vals[i];
	return NULL;
}

struct rdmamsg__iface {
	struct rdmamsg__icq **cqs; /* one; more only past max_cqe entries */
	uint32_t ncq;
	uint32_t max_cqe; /* 0: the device's (RDMAMSG_TEST_MAX_CQE caps it) */
	int no_cqx;	  /* CQs by ibv_create_cq: the device has no
			   * create_cq_ex (or RDMAMSG_TEST_NO_CQ_EX) */
	int polling;
	uint64_t seq;	    /* stamps: drains, progress passes (iface.c) */
	uint64_t drained;   /* the stamp of the last drain that emptied it */
	uint64_t pass;	    /* the stamp of the current progress pass */
	uint64_t stale_wcs; /* completions of freed lanes dropped */
	struct rdmamsg__idt eps;   /* lanes, by wr_id tag (the name stays) */
	struct rdmamsg__idt srqs;  /* SRQ receives name their SRQ (srq.c) */
	struct rdmamsg__qpmap qps; /* qp_num -> lane on an SRQ */
	/* receive WRs for a lane's repost, chained and pointing at their
	 * sges once (iface_init): a post fills in buffer and wr_id only
	 * (lane_rc.c; posting never calls out, so lanes share them) */
	struct ibv_recv_wr rwr[RDMAMSG_POLL_BATCH];
	struct ibv_sge rsge[RDMAMSG_POLL_BATCH];
	/* completions that rdmamsg__iface_arm() polled after arming: the
	 * next drain hands them over first (arm runs outside a pass and
	 * never calls a lane) */
	struct ibv_wc stash[RDMAMSG_POLL_BATCH];
	uint32_t nstash;
	int events; /* some CQ's event came in (icq.event): spend them */
	/* messages that packs delivered in the drain stamped packed_seq: a
	 * drain's budget counts them too (a pack is one completion, up to
	 * 128 messages) */
	uint64_t packed_seq;
	uint32_t packed;
};

/* ---- context ------------------------------------------------------- */

enum rdmamsg__obj_type { OBJ_EP = 1, OBJ_LISTENER, OBJ_CONN_REQ, OBJ_GROUP };

struct rdmamsg__cmobj {
	int type;
};

/* an object whose close ends from the next progress pass (a listener, an
 * SRQ): on ctx->closes, step runs its callback, then frees it (loop.c) */
struct rdmamsg__closing {
	struct rdmamsg__list link;
	void (*step)(struct rdmamsg__closing *c);
};

struct rdmamsg_ctx_attr {
	struct ev_loop *loop;
	enum rdmamsg_fabric fabric;
	char *device;
	size_t pool_limit;
	int huge;
	unsigned int listen_backlog, max_pending;
	void (*wakeup_cb)(struct rdmamsg_ctx *ctx, void *arg);
	void *wakeup_arg;
};

/* watch.c: a busy-polling caller sees a readable channel without a
 * system call (an io_uring's multishot poll of the epoll fd) */
enum rdmamsg__watch_state {
	RDMAMSG__WATCH_UNTRIED, /* no ring yet */
	RDMAMSG__WATCH_ON,	/* the bit read every pass */
	RDMAMSG__WATCH_OFF,    /* a ring, the bit not read: the caller blocks */
	RDMAMSG__WATCH_FAILED, /* no ring for good: periodic looks */
};

struct rdmamsg__watch {
	enum rdmamsg__watch_state state;
	/* the word a pass tests RDMAMSG__WATCH_BIT of: the ring's flags
	 * while ON, else a constant 0 */
	const unsigned int *flags;
	const unsigned int *ring_flags; /* the ring's flags word */
	int fd;				/* the ring (-1: none) */
	void *ring;
	struct io_uring_sqe *sqes;
	size_t ring_len, sqes_len;
	unsigned int *sq_tail, *sq_array, *cq_head, *cq_tail;
	unsigned int sq_mask, cq_mask;
	struct io_uring_cqe *cqes;
};

/* a busy pass's look at the channels while the watch is ON: a safety net
 * only (what the watch would miss: nothing known) */
#define RDMAMSG__WATCH_LOOK_NS 100000000ull

/* a busy pass's look at the channels while an endpoint waits for CM
 * events (ctx->cm_waits; loop.c looks every millisecond otherwise, or
 * when the watch says): a handshake, and the first message, which waits
 * for the passive side to be up, wait up to that, not the millisecond.
 * Also while the watch is ON (loop.c look_every). */
#define RDMAMSG__LOOK_HS_NS 20000ull

struct rdmamsg_ctx {
	const struct rdmamsg__ops *ops;
	void *dl;
	enum rdmamsg_fabric fabric;
	struct ibv_context **devs;
	/* the device's context of rdma_cm (one of devs, shared by every
	 * context of the process: its ids' id->verbs) and this context's own
	 * (ibv_open_device), on which everything of ours is made: its CQs,
	 * QPs, PD and MRs.  rdma_cm only connects (conn_param.qp_num,
	 * rdma_init_qp_attr), so that no two contexts share a device
	 * context's locks and progress: one context per thread scales. */
	struct ibv_context *cm_verbs;
	struct ibv_context *verbs;
	char devname[64];
	struct ibv_device_attr dattr;
	/* the ports' least max_msg_sz, at the first one-sided operation
	 * (rma.c msg_max; 0: not asked yet) */
	uint32_t max_msg;
	uint32_t max_inline;
	/* test hook: control buffers are not registered (pool.c) */
	int test_no_ctl;
	struct rdmamsg__bulk bulk; /* rendezvous source copies (bulk.c) */
	struct ibv_pd *pd;
	/* the context's QPs (RC, UD, DC) are made on qp_pd: a parent domain of
	 * pd with thread domain td (ctx.c qp_domain), or pd itself (td NULL) */
	struct ibv_pd *qp_pd;
	struct ibv_td *td;
	struct ibv_comp_channel *cc;
	struct rdma_event_channel *ech;
	struct rdmamsg__pool pool;
	int listen_backlog;
	unsigned int max_pending; /* unfinished handshakes at once */
	unsigned int pending_hs;  /* requests + passive eps not yet up */

	/* loop adapter */
	int epfd, tfd, efd;
	struct ev_loop *loop;
	struct rdmamsg__loop *lp;
	int handles; /* endpoints + listeners: keep the loop alive */
	int stop;
	int pending; /* work left for the next progress pass */
	/* cached at the start of a progress pass (loop.c pass_clock: a
	 * microsecond old at most), and the time stamp counter then */
	uint64_t now, now_tsc;
	/* now, registered for remote read once the first endpoint names it
	 * to a peer that reads it (RDMAMSG_HS_CAP_ALIVE, ep.c) */
	struct ibv_mr *alive_mr;
	/* a busy pass looks at the channels from then on (loop.c) */
	uint64_t next_epoll;
	int force_epoll;
	/* endpoints resolving or connecting (ep.c cm_wait) */
	unsigned int cm_waits;
	/* ifc.pass of the last pass that looked at the channels (0: none) */
	uint64_t looked;
	/* until then a receiver polls before it blocks: rdmamsg_ctx_arm()
	 * says -EBUSY (rdmamsg_group_attr_set_poll_us; 0: blocks at once) */
	uint64_t poll_until;
	int kicked; /* the eventfd was written (any thread): look now */
	/* rdmamsg_ctx_arm() said 0 (the caller blocks) since the last
	 * periodic look at the channels */
	int slept;
	struct rdmamsg__watch watch;
	void (*wakeup_cb)(struct rdmamsg_ctx *ctx, void *arg);
	void *wakeup_arg;
	/* rdmamsg_ctx_wakeup() was called (any thread) since the wakeup
	 * callback last ran: the library's own kicks run no callback */
	int woken;
	uint64_t kicks; /* the library's own eventfd writes (for the tests) */

	struct rdmamsg__iface ifc;
	struct rdmamsg__timers timers;
	struct rdmamsg__list polls;    /* endpoints with completions to flush */
	struct rdmamsg__list xwait;    /* endpoints whose xfer layer waits */
	struct rdmamsg__list deferred; /* endpoints to step */
	struct rdmamsg__list closes; /* listeners, SRQs: close callbacks due */
	int in_progress;
	size_t xwait_used; /* pool.in_use when xwait's last found none */
	struct rdmamsg__list eps;
	struct rdmamsg__list listeners;
	struct rdmamsg__list mrs; /* rdmamsg_mr_reg'd regions (mr.c) */
	void *umr;    /* UMR machinery, probed on first use (mr_iov.c) */
	int dc_state; /* RDMAMSG_CAP_DC: 0 not probed, 1 there, -1 absent */
	struct rdmamsg__dc *dc; /* DC lanes' DCIs and DCT (lane_dc.c) */
	/* its DCTs' numbers, one per port with DC lanes (0: none) */
	uint32_t dc_dctn[RDMAMSG__DC_PORTS];
	uint32_t dc_ndct;	   /* how many */
	struct rdmamsg__list srqs; /* open SRQs (srq.c) */
};

/* ---- shared receive queues (srq.c) --------------------------------- */

/*
 * An SRQ receive's wr_id (lane.h): bit 63 clear, tag index 0 (the
 * interface), the tag's generation bits the low 11 bits of the SRQ's
 * generation in ctx->ifc.srqs, own bits 31..24 its index there, bits
 * 23..0 the buffer's index in bufs.
 */
#define RDMAMSG_SRQ_MAX	       255 /* SRQs per context */
#define RDMAMSG_SRQ_SLOT_SHIFT 24
#define RDMAMSG_RX_IDX_MASK    ((1u << RDMAMSG_SRQ_SLOT_SHIFT) - 1)

struct rdmamsg_srq {
	struct rdmamsg_ctx *ctx;
	struct ibv_srq *srq;
	uint64_t handle;    /* in ctx->ifc.srqs */
	uint64_t wrid_base; /* wr_id without the buffer index */
	size_t buf_size;
	uint32_t max_bufs, nbufs, posted, limit;
	uint32_t reserved;	/* the endpoints' guaranteed windows */
	uint32_t extra;		/* data credits granted beyond them */
	uint32_t withheld;	/* data credits endpoints withhold for want */
	unsigned int refs, nep; /* endpoints made with it; holding a window */
	struct rdmamsg_buf **bufs; /* max_bufs slots; the first nbufs used */
	uint32_t *idle;		   /* consumed, not reposted (post failed) */
	uint32_t nidle;
	uint64_t limit_events;
	int closing;
	void (*close_cb)(struct rdmamsg_srq *srq, void *arg);
	void *close_arg;
	struct rdmamsg__closing close_step;
	struct rdmamsg__list link;
};

int rdmamsg__srq_reserve(struct rdmamsg_srq *srq, uint32_t w);
void rdmamsg__srq_release(struct rdmamsg_srq *srq, uint32_t w);
void rdmamsg__srq_want(struct rdmamsg_ep *ep, uint32_t x);
void rdmamsg__srq_unlend(struct rdmamsg_ep *ep);
uint32_t rdmamsg__srq_credit(struct rdmamsg_ep *ep);
uint32_t rdmamsg__srq_grant(struct rdmamsg_ep *ep);
void rdmamsg__srq_put(struct rdmamsg_srq *srq);
int rdmamsg__srq_post(struct rdmamsg_srq *srq, const uint32_t *idx, uint32_t n);
struct rdmamsg_srq *rdmamsg__srq_of_wrid(struct rdmamsg_ctx *ctx,
					 uint64_t wr_id);
void rdmamsg__srq_limit_event(struct rdmamsg_ctx *ctx, void *ibsrq);
void rdmamsg__srq_refill(struct rdmamsg_srq *srq);
struct rdmamsg__lane;
void rdmamsg__srq_drop_early(struct rdmamsg__lane *lane);

/* rdmamsg__wrid_is_srq -- a receive posted to an SRQ (tag index 0) */
static inline int rdmamsg__wrid_is_srq(uint64_t wr_id)
{
	return !(wr_id & RDMAMSG__WRID_SEND) &&
	       !(rdmamsg__wrid_lane(wr_id) & RDMAMSG__WRID_TAG_INDEX);
}

/* loop.c: the loop adapter (the only file with ev_* calls) */
int rdmamsg__loop_init(struct rdmamsg_ctx *ctx, struct ev_loop *loop);
void rdmamsg__loop_fini(struct rdmamsg_ctx *ctx);
void rdmamsg__loop_ref(struct rdmamsg_ctx *ctx);
void rdmamsg__loop_unref(struct rdmamsg_ctx *ctx);
void rdmamsg__loop_kick(struct rdmamsg_ctx *ctx);
int rdmamsg__loop_timerfd_set(struct rdmamsg_ctx *ctx, uint64_t due_ns);

/* watch.c */
void rdmamsg__watch_init(struct rdmamsg_ctx *ctx);
void rdmamsg__watch_fini(struct rdmamsg_ctx *ctx);
void rdmamsg__watch_busy(struct rdmamsg_ctx *ctx);
void rdmamsg__watch_sleep(struct rdmamsg_ctx *ctx);
void rdmamsg__watch_spend(struct rdmamsg_ctx *ctx);

/* the bit the kernel sets in the ring's flags: IORING_SQ_TASKRUN */
#define RDMAMSG__WATCH_BIT (1u << 2)

/* rdmamsg__watch_fired -- a channel became readable since the watch's
 * last spend (only while ON) */
static inline unsigned int rdmamsg__watch_fired(const struct rdmamsg_ctx *ctx)
{
	return __atomic_load_n(ctx->watch.flags, __ATOMIC_RELAXED) &
	       RDMAMSG__WATCH_BIT;
}

/* dispatch.c */
int rdmamsg__dispatch_open(struct rdmamsg_ctx *ctx, enum rdmamsg_fabric want);
void rdmamsg__dispatch_close(struct rdmamsg_ctx *ctx);

/* ---- endpoints ----------------------------------------------------- */

/* control credits: keep-alives use all but the last, which is kept for
 * the goodbye of a clean close; a credit update may take it (the peer
 * returns two owed on its own: msg.c) */
#define RDMAMSG_CTL_CREDITS 3
/* on an SRQ an endpoint grants its peer two (one update or keep-alive at
 * a time, plus the goodbye's): every buffer counts there (srq.c) */
#define RDMAMSG_CTL_CREDITS_SRQ 2
/* rdmamsg__ep_own_ctl -- the control credits ep grants its peer */
#define rdmamsg__ep_own_ctl(ep) \
	((ep)->p.srq ? RDMAMSG_CTL_CREDITS_SRQ : RDMAMSG_CTL_CREDITS)

struct rdmamsg__ep_params {
	unsigned int connect_ms, close_ms, peer_ms;
	uint32_t eager, recv_depth, send_depth, backlog;
	/* the receive window may grow to this (ep.c grow_window); set with
	 * recv_depth unless rdmamsg_ep_attr_set_recv_depth_max said */
	uint32_t recv_depth_max;
	int recv_depth_max_set;
	size_t max_msg;
	int linger;		 /* close sends the backlog first */
	struct rdmamsg_srq *srq; /* receives through it; NULL: own ring */
	uint64_t srq_handle;	 /* srq's id in its context's ifc.srqs: a
				  * freed one no longer matches it */
	uint8_t pdata_len;
	uint8_t pdata[RDMAMSG_PRIVATE_DATA_MAX];
	/* large messages, requests, one-sided (xfer.c) */
	size_t max_large;
	size_t rndv_thresh; /* rendezvous above; 0: RDMAMSG_RNDV_THRESH or
			     * the default (msg.c) */
	int (*recv_alloc)(struct rdmamsg_ep *ep, size_t len, void **data,
			  struct rdmamsg_mr **mr, void *arg);
	void (*on_request)(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
			   void *data, size_t len, void *arg);
	void (*on_write_imm)(struct rdmamsg_ep *ep, uint32_t imm, size_t len,
			     void *arg);
	/* path failover (ep.c; rdmamsg.h) */
	enum rdmamsg_failover failover;
	enum rdmamsg_transport transport; /* RC or DC (lane_dc.c) */
	void (*path_cb)(struct rdmamsg_ep *ep, enum rdmamsg_path_event event,
			unsigned int path, int status, void *arg);
	unsigned int reconnect_ms, reconnect_tries, linger_ms;
	enum rdmamsg_apm apm; /* automatic path migration (apm.c) */
	uint8_t ack_timeout;  /* the QP's local ACK timeout; 0: default */
};

struct rdmamsg_ep_attr {
	struct rdmamsg__ep_params p;
};

void rdmamsg__ep_params_default(struct rdmamsg__ep_params *p);

struct rdmamsg__slot {
	void *op_ctx;
	struct rdmamsg_buf *buf; /* freed when the slot completes */
	uint8_t report;		 /* 1: on_send; 2: xfer operation (xfer.c) */
};

/* the wr_id bits of an endpoint's tag (lane.h: bits 62..32) */
#define RDMAMSG_WRID_TAG_BITS (((1ull << 31) - 1) << 32)

struct rdmamsg_ep {
	struct rdmamsg__cmobj obj;
	struct rdmamsg_ctx *ctx;
	struct rdma_cm_id *id;
	struct rdmamsg__lane *ln; /* its lane (lane.h); NULL before the QP */
	enum rdmamsg__ep_st st;	  /* the endpoint's state (lane.h) */
	int passive;
	struct rdmamsg_ep_cbs cbs;
	void *arg;
	struct rdmamsg__ep_params p;

	/* negotiated */
	uint32_t frag;
	size_t max_msg;
	uint32_t eager_max;  /* rdmamsg_send's eager limit: frag, or lower */
	size_t rndv;	     /* rdmamsg_send's rendezvous above this (msg.c) */
	size_t copy_ahead;   /* its copies not yet read: at most this many
			      * bytes (RDMAMSG_COPY_AHEAD); 0: the pool's */
	size_t rndv_piece;   /* ... copied in pieces of at least this many
			      * (RDMAMSG_RNDV_PIECE, rndv.c); 0: whole */
	uint32_t max_inline; /* the lane's, cached at bind */
	uint32_t peer_depth;
	/* the most data credits the peer may grant: its depth, or the window
	 * it may grow to (RDMAMSG_HS_CAP_GROW) */
	uint32_t peer_depth_max;
	uint32_t peer_ctl;  /* control credits the peer grants (handshake) */
	uint32_t caps;	    /* RDMAMSG_HS_CAP_* we offer (msg.c) */
	uint32_t peer_caps; /* ... and the peer offered (handshake) */
	uint32_t pack_max;  /* queued messages up to this go packed (0: none) */
	int peer_local;	    /* the peer's GID is one of this device's (ep.c) */
	uint32_t credit_due; /* a credit update once this many are owed */

	/* send side */
	struct rdmamsg__slot *slots;
	struct rdmamsg_buf **sbufs;
	uint32_t nsbuf;
	uint32_t sq_mask;
	uint64_t sq_head, sq_tail;
	uint32_t unsignaled, sig_every;
	uint64_t sig_next; /* one past the last signalled send's seq */
	int32_t credits;
	uint32_t ctl_credits;
	uint32_t to_return, ctl_to_return;
	/* on a shared receive queue: control buffers taken, not reposted
	 * (msg.c's ep_rx_shared) */
	uint32_t ctl_pending;
	uint64_t returned_total, received_total;
	struct rdmamsg_buf *bl_head, *bl_tail;
	uint32_t bl_count;
	size_t bl_bytes; /* of its messages (not packs): msg.c bl_full() */
	int bl_stuck;	 /* pump() could not post (msg.c pump_stuck) */
	int want_writable;

	/* receive side */
	struct rdmamsg_buf **rxb; /* receive buffers, lent to the lane
				   * (with an SRQ: the SRQ's, shared) */
	uint32_t nrx;		  /* its ring (with an SRQ: its window) */
	uint32_t nrx_max;	  /* ... as it may grow: rxb's length */
	/* the data credits granted to the peer now, and the most they may
	 * grow to (its own ring only: msg.c grow_window) */
	uint32_t rx_win, rx_win_max;
	int rx_packed; /* a pack came since the peer last ran out (msg.c) */
	struct rdmamsg_srq *srq; /* NULL: its own ring */
	uint32_t srq_extra;	 /* data credits lent beyond its first */
	uint32_t srq_withheld;	 /* data credits it waits for (srq.c) */
	struct rdmamsg_buf **rx_cur_slot; /* the ring slot of rx_cur */
	struct rdmamsg_buf *rx_asm;
	size_t rx_asm_off;
	struct rdmamsg_buf *rx_cur;
	struct rdmamsg_buf *rx_repl;
	int in_recv;
	int rx_kept;
	int rx_cur_is_asm;    /* 0 ring, 1 reassembled, 2 detached, 3 packed */
	const void *rx_pdata; /* a packed message's bytes, and length */
	uint32_t rx_plen;
	int writable_due;
	/* messages held behind an ordered rendezvous (rndv.c) keep their
	 * data credit until delivered: due to be withheld, and withheld */
	uint32_t rx_hold_due, rx_withheld;

	/* liveness */
	uint64_t last_rx, last_tx;
	/* the peer's clock (RDMAMSG_HS_CAP_ALIVE, ep.c): where it is, the
	 * last value read of it and when that read completed (ours: the
	 * context's alive_mr) */
	uint64_t alive_raddr, alive_val, alive_val_ns;
	uint32_t alive_rkey, alive_tick; /* the peer's tick_ms (proto.h) */
	uint8_t alive_named, alive_peer, alive_rd, alive_have, alive_moved;
	struct rdmamsg__timer conn_timer, ka_timer, close_timer, ring_timer;
	int granted;	/* passive: receive buffers posted and granted */
	int hs_pending; /* counts in ctx->pending_hs */

	struct rdmamsg__list xwait_link;
	struct rdmamsg__list defer_link;
	struct rdmamsg__list link;

	/* teardown */
	int closing;
	int lingering; /* close waits for the backlog to go out */
	int bye_posted, bye_seen;
	uint64_t bye_seq;
	int close_timed_out;
	int disc_seen; /* DISCONNECTED event (or never connected) */
	int down_reported;
	int connect_reported;
	void (*close_cb)(struct rdmamsg_ep *ep, void *arg);

	/* one-sided, rendezvous, requests: made on first use (xfer.c) */
	struct rdmamsg__xfer *xf;

	/* path failover (ep.c): the peer's addresses, the one in use */
	struct sockaddr_storage *paths;
	struct rdmamsg_path_stats pstats;
	uint64_t path_down_ns; /* when the first path of this run failed */

	/* automatic path migration (apm.c): the path in use and the
	 * alternate (local port, address vector), the offers (LIDs, 0: none) */
	struct rdmamsg__apm {
		uint8_t port, alt_port;
		struct ibv_ah_attr ah, alt_ah;
		uint16_t my_alt_lid;   /* offered in the handshake */
		uint16_t peer_alt_lid; /* the peer's offer */
	} apm;

	/* session: reconnect-and-replay (ep.c, lane.h); sid 0: none */
	uint64_t sid;
	struct rdmamsg__kept **kept;	/* copies of data fragments, a ring */
	uint32_t kept_mask;		/* its size - 1 (>= the peer's depth) */
	uint32_t kept_depth, kept_frag; /* what it was sized for */
	uint64_t tx_frags;	    /* data fragments posted on the session */
	uint64_t rx_frags;	    /* data fragments received on it */
	uint64_t rp_next, rp_end;   /* fragments to post again */
	struct rdmamsg_buf rp_mark; /* the backlog's head while they go */
	int reconn;		    /* an outage: reconnecting */
	int reconn_due;		    /* its lane and id go in ep_step */
	int fail_status;	    /* what took the connection down */
	unsigned int tries_left;
	unsigned int backoff_ms; /* the wait before the next attempt */
	int backoff;		 /* conn_timer: that wait, not an attempt */
	uint64_t reconn_due_ns;	 /* the reconnect's deadline */
};

/* a data fragment kept until the peer has it (ep.c), allocated on the
 * slot's first use: its header and bytes as they were posted, contiguous,
 * so that an inline post takes both from here (msg.c post_frag_sig) and
 * the copy is the only one the send makes; posted again, the header's
 * credits are those of the new post */
struct rdmamsg__kept {
	uint32_t len;
	uint32_t pad;		/* the bytes start 8-byte aligned */
	struct rdmamsg__wire h; /* type (W_DATA or W_PACK), flags, imm, total */
	char data[];		/* kept_frag bytes */
};

struct rdmamsg__kept *rdmamsg__ep_kept_alloc(struct rdmamsg_ep *ep,
					     struct rdmamsg__kept **kp);
int rdmamsg__ep_session_init(struct rdmamsg_ep *ep);
int rdmamsg__ep_replay_from(struct rdmamsg_ep *ep, uint64_t delivered);
void rdmamsg__ep_reconn_reset(struct rdmamsg_ep *ep);
void rdmamsg__ep_detach(struct rdmamsg_ep *ep);
void rdmamsg__ep_reconn_failed(struct rdmamsg_ep *ep, int status);
int rdmamsg__ep_replay_pump(struct rdmamsg_ep *ep);

struct rdmamsg_listener {
	struct rdmamsg__cmobj obj;
	struct rdmamsg_ctx *ctx;
	struct rdma_cm_id *id;
	void (*on_conn_req)(struct rdmamsg_listener *lst,
			    struct rdmamsg_conn_req *req, const void *pdata,
			    size_t pdata_len, void *arg);
	void *arg;
	int closing;
	void (*close_cb)(struct rdmamsg_listener *lst, void *arg);
	struct rdmamsg__list reqs;
	struct rdmamsg__closing close_step;
	struct rdmamsg__list link;
};

struct rdmamsg__hs;

struct rdmamsg_conn_req {
	struct rdmamsg__cmobj obj;
	struct rdmamsg_listener *lst;
	struct rdma_cm_id *id;
	uint32_t peer_depth, peer_eager, peer_ctl, peer_caps;
	uint64_t peer_max_msg;
	uint64_t sid; /* the session it names (HS_SREQ), 0: none */
	struct rdmamsg__list link;
	uint16_t alt_lid; /* the client's APM offer (0: none) */
	/* a DC request: the client's DCT, access key, endpoint tag */
	int dc;
	uint32_t dc_dctn, dc_tag;
	uint64_t dc_key;
};

/* ep.c */
int rdmamsg__ep_new(struct rdmamsg_ctx *ctx, const struct rdmamsg_ep_attr *attr,
		    const struct rdmamsg_ep_cbs *cbs, void *arg,
		    struct rdmamsg_ep **ep);
int rdmamsg__ep_setup_qp(struct rdmamsg_ep *ep);
int rdmamsg__ep_bind(struct rdmamsg_ep *ep,
		     const struct rdmamsg__lane_ops *ops);
void rdmamsg__ep_unbind(struct rdmamsg_ep *ep);
int rdmamsg__ep_rx_fill(struct rdmamsg_ep *ep);
void rdmamsg__ep_bye_recv(struct rdmamsg_ep *ep);
void rdmamsg__ep_peer_disconnected(struct rdmamsg_ep *ep);
void rdmamsg__ep_negotiate(struct rdmamsg_ep *ep, uint32_t peer_depth,
			   uint32_t peer_eager, uint64_t peer_max_msg);
/* msg.c: the protocol thresholds (RDMAMSG_RNDV_THRESH, negotiated); the
 * default rendezvous threshold to a peer on this host over shared memory
 * (msg.c RNDV_LOCAL_SHM says why) */
#define RDMAMSG__RNDV_LOCAL_SHM (20 * 1024)
int rdmamsg__ep_proto_params(struct rdmamsg_ep *ep);
uint32_t rdmamsg__ep_rx_batch(const struct rdmamsg_ep *ep);
void rdmamsg__ep_proto_set(struct rdmamsg_ep *ep);
/* msg.c: hand a whole message in a detached buffer to on_recv (1: kept),
 * and give back the data credit of a message held in order (rndv.c) */
int rdmamsg__ep_deliver(struct rdmamsg_ep *ep, struct rdmamsg_buf *b,
			size_t len, uint32_t imm, unsigned int flags);
void rdmamsg__ep_rx_unhold(struct rdmamsg_ep *ep);
/* rdmamsg__mw_cap -- the device binds type 2 memory windows (and
 * RDMAMSG_NO_MW does not say otherwise): pool slabs then allow binding
 * (pool.c), rendezvous sources are exposed through them (rndv.c) */
static inline int rdmamsg__mw_cap(const struct rdmamsg_ctx *ctx)
{
	const char *e = getenv("RDMAMSG_NO_MW");

	if (e && *e && strcmp(e, "0"))
		return 0;
	return ctx->dattr.max_mw > 0 &&
	       (ctx->dattr.device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A |
					       IBV_DEVICE_MEM_WINDOW_TYPE_2B));
}
int rdmamsg__rndv_ep_mw(const struct rdmamsg_ep *ep);
void rdmamsg__ep_connected(struct rdmamsg_ep *ep, const void *pdata,
			   size_t len);
void rdmamsg__ep_connect_failed(struct rdmamsg_ep *ep, int status, int reason,
				const void *pdata, size_t len);
void rdmamsg__ep_down(struct rdmamsg_ep *ep, int status);
void rdmamsg__ep_defer(struct rdmamsg_ep *ep);
void rdmamsg__ep_step(struct rdmamsg_ep *ep);
void rdmamsg__ep_free(struct rdmamsg_ep *ep);
int rdmamsg__ep_set_state(struct rdmamsg_ep *ep, enum rdmamsg__ep_st to);

/* the copies ahead of the peer that RDMAMSG_COPY_AHEAD (ep->copy_ahead)
 * always lets wait, whatever their bytes */
#define RDMAMSG__COPY_MIN 2

/* rdmamsg__copies_full -- with n copies of bytes waiting, one of len more
 * would pass ep->copy_ahead: msg.c's send backlog and rndv.c's rendezvous
 * copies not yet read, each counted on its own */
static inline int rdmamsg__copies_full(const struct rdmamsg_ep *ep, uint64_t n,
				       uint64_t bytes, size_t len)
{
	return ep->copy_ahead && n >= RDMAMSG__COPY_MIN &&
	       bytes + len > ep->copy_ahead;
}

/* rdmamsg__ep_shm_peer -- the peer is a process on this host that the
 * fabric reaches through shared memory (softrdma): its reads and ours are
 * copies between the two cores, where an HCA's would be DMA (msg.c's
 * rendezvous threshold, rndv.c's read bound and source buffers) */
static inline int rdmamsg__ep_shm_peer(const struct rdmamsg_ep *ep)
{
	return ep->peer_local && ep->ctx->fabric == RDMAMSG_FABRIC_SOFT;
}

/* rdmamsg__ep_can_send -- the one test before any send, request,
 * rendezvous or one-sided operation: -ENOTCONN unless UP */
static inline int rdmamsg__ep_can_send(const struct rdmamsg_ep *ep)
{
	return RDMAMSG_LIKELY(rdmamsg__ep_st_can_send(ep->st)) ? 0 : -ENOTCONN;
}

/* rdmamsg__ep_delivers -- messages received go to on_recv: UP, or a
 * session in an outage (not closing): what it counted received is never
 * sent again, so it is delivered now or never (rdmamsg_connect(3)) */
static inline int rdmamsg__ep_delivers(const struct rdmamsg_ep *ep)
{
	return ep->st == EPS_UP || (ep->reconn && !ep->closing);
}

/* iface.c */
void rdmamsg__iface_init(struct rdmamsg_ctx *ctx);
void rdmamsg__iface_fini(struct rdmamsg_ctx *ctx);
int rdmamsg__iface_attach(struct rdmamsg__lane *lane, uint32_t need);
int rdmamsg__iface_grow(struct rdmamsg__lane *lane, uint32_t need);
void rdmamsg__iface_detach(struct rdmamsg__lane *lane);
void rdmamsg__iface_ready(struct rdmamsg__lane *lane);
void rdmamsg__iface_hold(struct rdmamsg__lane *lane, const struct ibv_wc *wc,
			 uint32_t n);
void rdmamsg__iface_release(struct rdmamsg__lane *lane);
void rdmamsg__iface_replay(struct rdmamsg__lane *lane);
int rdmamsg__iface_poll(struct rdmamsg_ctx *ctx);

/* rdmamsg__iface_packed -- a pack's count messages were delivered: the
 * drain running counts them against its budget (no cost to a drain that
 * delivers none: the count is reset here, by the drain's stamp) */
static inline void rdmamsg__iface_packed(struct rdmamsg_ctx *ctx,
					 uint32_t count)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;

	if (ifc->packed_seq != ifc->seq) {
		ifc->packed_seq = ifc->seq;
		ifc->packed = 0;
	}
	ifc->packed += count;
}

/* rdmamsg__iface_stamp -- a point in time for rdmamsg__iface_poll_after */
static inline uint64_t rdmamsg__iface_stamp(struct rdmamsg_ctx *ctx)
{
	return ++ctx->ifc.seq;
}

/* rdmamsg__iface_poll_after -- drain the CQs unless a drain that began
 * after stamp (rdmamsg__iface_stamp) emptied them already: callers that
 * need "everything that arrived before this point" (a keep-alive tick, a
 * close step, a DISCONNECTED event) share one drain instead of each
 * making its own.  A drain costs O(QPs) on a provider that progresses in
 * poll_cq (softrdma sweeps the context's QPs), so one per endpoint made
 * 10,000 endpoints' keep-alive ticks O(n^2) and stalled connects. */
static inline int rdmamsg__iface_poll_after(struct rdmamsg_ctx *ctx,
					    uint64_t stamp)
{
	if (ctx->ifc.drained > stamp)
		return 0;
	return rdmamsg__iface_poll(ctx);
}
void rdmamsg__iface_progress(struct rdmamsg_ctx *ctx);
int rdmamsg__iface_arm(struct rdmamsg_ctx *ctx);
struct rdmamsg__icq *rdmamsg__iface_cq(struct rdmamsg_ctx *ctx, const void *cq);

/* lane_rc.c: SRQ receives, routed to their RC or DC lane */
uint32_t rdmamsg__lane_srq_wcs(struct rdmamsg_ctx *ctx, const struct ibv_wc *wc,
			       uint32_t n);

/* msg.c */
extern const struct rdmamsg__lane_cbs rdmamsg__ep_lane_cbs;
extern const struct rdmamsg__lane_cbs rdmamsg__ep_lane_cbs_shared;
void rdmamsg__ep_poll(struct rdmamsg_ep *ep);
void rdmamsg__ep_xwait(struct rdmamsg_ep *ep);
void rdmamsg__ep_xwait_all(struct rdmamsg_ctx *ctx);
void rdmamsg__ep_flush(struct rdmamsg_ep *ep);
int rdmamsg__ep_send_ctl(struct rdmamsg_ep *ep, int type);
int rdmamsg__ep_send_alive(struct rdmamsg_ep *ep, const void *w, uint32_t len);
void rdmamsg__ep_alive_rx(struct rdmamsg_ep *ep, const void *payload,
			  uint32_t len);
void rdmamsg__ep_alive_ack(struct rdmamsg_ep *ep);
int rdmamsg__alive_read(struct rdmamsg_ep *ep, uint64_t raddr, uint32_t rkey,
			void (*cb)(struct rdmamsg_ep *ep, int status,
				   uint64_t value, void *op_ctx));
int rdmamsg__ep_send_bye(struct rdmamsg_ep *ep);
int rdmamsg__ep_send_grant(struct rdmamsg_ep *ep);
int rdmamsg__ep_no_pool_memory(struct rdmamsg_ep *ep, int ret);
void rdmamsg__ep_cancel_backlog(struct rdmamsg_ep *ep, int status);
void rdmamsg__ep_complete_slots(struct rdmamsg_ep *ep, uint64_t upto,
				int status);

/* xfer.c: hooks of the layer beside eager messages */
#define RDMAMSG_SLOT_XFER 2
#define RDMAMSG_SLOT_PACK 3 /* on_send for each message of a pack (msg.c) */
int rdmamsg__ep_send_x(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf,
		       size_t len);
void rdmamsg__xfer_slot_done(struct rdmamsg_ep *ep, uint32_t idx, int status);
void rdmamsg__xfer_recv(struct rdmamsg_ep *ep, const void *data, size_t len);
void rdmamsg__xfer_write_imm(struct rdmamsg_ep *ep, uint32_t imm, size_t len);
void rdmamsg__xfer_unsent(struct rdmamsg_ep *ep, const void *data, size_t len,
			  int status);
void rdmamsg__xfer_flush(struct rdmamsg_ep *ep);
void rdmamsg__xfer_reconn_reset(struct rdmamsg_ep *ep);
int rdmamsg__xfer_unsettled(const struct rdmamsg_ep *ep);
void rdmamsg__xfer_down(struct rdmamsg_ep *ep, int status);
void rdmamsg__xfer_free(struct rdmamsg_ep *ep);

/* apm.c: automatic path migration of RC endpoints */
uint16_t rdmamsg__apm_offer(struct rdmamsg_ep *ep, size_t user_room);
void rdmamsg__apm_up(struct rdmamsg_ep *ep);
uint8_t rdmamsg__apm_port(const struct rdmamsg_ep *ep);
void rdmamsg__apm_event(struct rdmamsg_ctx *ctx, enum ibv_event_type type,
			struct ibv_qp *qp);

/* lane_dc.c: DC lanes (lane.h) */
struct rdmamsg__dc;
int rdmamsg__dc_check(struct rdmamsg_ctx *ctx,
		      const struct rdmamsg__ep_params *p);
void rdmamsg__dc_fini(struct rdmamsg_ctx *ctx);
void rdmamsg__dc_srq_free(struct rdmamsg_ctx *ctx, struct rdmamsg_srq *srq);
struct rdmamsg__lane *rdmamsg__dc_srq_lane(struct rdmamsg_ctx *ctx,
					   const struct rdmamsg_srq *srq,
					   const struct ibv_wc *wc);
void rdmamsg__lane_dc_local(const struct rdmamsg__lane *lane, uint32_t *dctn,
			    uint64_t *key, uint32_t *tag);
int rdmamsg__lane_dc_peer(struct rdmamsg__lane *lane, struct rdma_cm_id *id,
			  uint32_t dctn, uint64_t key, uint32_t tag);
uint32_t rdmamsg__lane_dc_src_local(struct rdmamsg__lane *lane, int hello,
				    uint64_t *nonce, uint32_t *dci);
int rdmamsg__lane_dc_src_peer(struct rdmamsg__lane *lane, uint64_t nonce,
			      const uint32_t *dci, uint32_t n);

/* rdmamsg__dc_is_dct -- a receive of the context's DCT (routed by its
 * immediate, lane_dc.c, not by its QP) */
static inline int rdmamsg__dc_is_dct(const struct rdmamsg_ctx *ctx,
				     uint32_t qpn)
{
	uint32_t i;

	if (RDMAMSG_LIKELY(!ctx->dc_ndct))
		return 0;
	for (i = 0; i < RDMAMSG__DC_PORTS; i++)
		if (ctx->dc_dctn[i] && qpn == ctx->dc_dctn[i])
			return 1;
	return 0;
}

/* cm/conn.c */
void rdmamsg__cm_process(struct rdmamsg_ctx *ctx);
int rdmamsg__cm_start_connect(struct rdmamsg_ep *ep,
			      const struct sockaddr *dst);

/* cm/addr.c */
int rdmamsg__addr_parse(const char *addr, struct sockaddr_storage *ss);

/* progress helpers (ctx.c) */
void rdmamsg__ctx_defer(struct rdmamsg_ctx *ctx, struct rdmamsg__list *link);
int rdmamsg__errno(int fallback);

/* mr.c: ibv access flags for RDMAMSG_ACCESS_* (local write always) */
int rdmamsg__verbs_access(unsigned int access);

/* mr_iov.c: RDMAMSG_CAP_UMR (probed once) and teardown */
int rdmamsg__umr_cap(struct rdmamsg_ctx *ctx);
void rdmamsg__umr_fini(struct rdmamsg_ctx *ctx);

#endif /* RDMAMSG_INTERNAL_H */
