/* SPDX-License-Identifier: MIT */
/*
 * loop.c -- the loop adapter: one epoll fd holds the completion channel, the
 * CM event channel, a timerfd and an eventfd.  In libev mode one ev_io
 * watches it; in fd mode the caller polls it.  This is the only file that
 * calls ev_*.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h> /* __rdtsc: pass_clock */
#endif

#include <ev.h>

#include "internal.h"
#include "dispatch.h"

struct rdmamsg__loop {
	ev_io io;
	ev_prepare prep; /* just before libev blocks: arm */
	ev_idle idle;	 /* arm said work is pending: don't block */
	struct rdmamsg_ctx *ctx;
};

/* a busy-polling caller's look at the channels (CM events, async events,
 * a timer that the due check below missed) where the watch (watch.c) does
 * not tell it when they became readable: rare enough to cost no system
 * call per message; every RDMAMSG__LOOK_HS_NS instead while an endpoint
 * resolves or connects (ctx->cm_waits); only every RDMAMSG__WATCH_LOOK_NS,
 * a safety net, while the watch is ON and no endpoint connects */
#define EPOLL_EVERY_NS 1000000ull

enum { SRC_CC = 1, SRC_CM, SRC_TIMER, SRC_WAKE, SRC_ASYNC };

/* set_now -- ctx->now, which peers read while we write it (an RDMA READ
 * of alive_mr, ep.c): one store of all 8 bytes, also where a plain one
 * would be two (32-bit CPUs) */
static inline void set_now(struct rdmamsg_ctx *ctx, uint64_t now)
{
	__atomic_store_n(&ctx->now, now, __ATOMIC_RELAXED);
}

/* pass_clock -- the pass's clock (ctx->now).  Where the CPU has a time
 * stamp counter it is read first, and CLOCK_MONOTONIC again only once it
 * has moved PASS_CLOCK_CYCLES since the last reading: a caller spinning
 * on progress pays the counter (8 ns on the bench VM) instead of
 * clock_gettime (18 ns, half of an idle pass) on most passes, and ctx->now
 * is never staler than those cycles (about a microsecond: timers are in
 * milliseconds, the channels' look EPOLL_EVERY_NS).  A counter that went
 * back (another CPU's) reads the clock too. */
#if defined(__x86_64__) || defined(__i386__)
#define PASS_CLOCK_CYCLES 4096u
static inline void pass_clock(struct rdmamsg_ctx *ctx)
{
	uint64_t t = __rdtsc();

	if (t - ctx->now_tsc < PASS_CLOCK_CYCLES)
		return;
	ctx->now_tsc = t;
	set_now(ctx, rdmamsg__now_ns());
}
#else
static inline void pass_clock(struct rdmamsg_ctx *ctx)
{
	set_now(ctx, rdmamsg__now_ns());
}
#endif

/* set_nonblock -- channel fds must never block a progress pass */
static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* ep_add -- watch fd for readability under tag */
static int ep_add(int epfd, int fd, int tag)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u32 = (uint32_t)tag;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

/* io_cb -- libev: the epoll fd is readable */
static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdmamsg__loop *lp = w->data;

	(void)loop;
	(void)revents;
	lp->ctx->force_epoll = 1;
	rdmamsg_ctx_progress(lp->ctx);
}

/* idle_cb -- libev: the pass that arm() asked for, without blocking */
static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct rdmamsg__loop *lp = w->data;

	(void)revents;
	ev_ref(loop); /* it was started unreferenced */
	ev_idle_stop(loop, w);
	rdmamsg_ctx_progress(lp->ctx);
}

/* prepare_cb -- libev is about to block: arm the CQs (poll, arm, poll);
 * work that the fd would not announce makes this iteration not block */
static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct rdmamsg__loop *lp = w->data;

	(void)revents;
	if (ev_is_active(&lp->idle) || rdmamsg_ctx_arm(lp->ctx) == 0)
		return;
	/* an idle watcher keeps the loop from blocking without keeping it
	 * alive: it runs after this iteration's poll, with timeout 0 */
	ev_idle_start(loop, &lp->idle);
	ev_unref(loop);
}

/* rdmamsg__loop_init -- make the epoll set and, in libev mode, the watcher */
int rdmamsg__loop_init(struct rdmamsg_ctx *ctx, struct ev_loop *loop)
{
	int ret;

	rdmamsg__watch_init(ctx);
	ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ctx->epfd < 0)
		return -errno;
	ctx->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (ctx->tfd < 0) {
		ret = -errno;
		goto err_close_epfd;
	}
	ctx->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ctx->efd < 0) {
		ret = -errno;
		goto err_close_tfd;
	}
	ret = set_nonblock(ctx->cc->fd);
	if (!ret)
		ret = set_nonblock(ctx->ech->fd);
	if (!ret)
		ret = ep_add(ctx->epfd, ctx->cc->fd, SRC_CC);
	if (!ret)
		ret = ep_add(ctx->epfd, ctx->ech->fd, SRC_CM);
	if (!ret)
		ret = ep_add(ctx->epfd, ctx->tfd, SRC_TIMER);
	if (!ret)
		ret = ep_add(ctx->epfd, ctx->efd, SRC_WAKE);
	if (ret)
		goto err_close_efd;
	/* device async events (QP fatal, CQ error): optional, a provider
	 * whose async fd cannot be polled just goes without */
	if (set_nonblock(ctx->verbs->async_fd) ||
	    ep_add(ctx->epfd, ctx->verbs->async_fd, SRC_ASYNC))
		LOG_INFO("async events of %s not watched", ctx->devname);
	if (loop) {
		ctx->lp = calloc(1, sizeof(*ctx->lp));
		if (!ctx->lp) {
			ret = -ENOMEM;
			goto err_close_efd;
		}
		ctx->lp->ctx = ctx;
		ctx->loop = loop;
		ev_io_init(&ctx->lp->io, io_cb, ctx->epfd, EV_READ);
		ctx->lp->io.data = ctx->lp;
		ev_io_start(loop, &ctx->lp->io);
		/* idle until an endpoint or listener exists */
		ev_unref(loop);
		ev_prepare_init(&ctx->lp->prep, prepare_cb);
		ctx->lp->prep.data = ctx->lp;
		ev_prepare_start(loop, &ctx->lp->prep);
		ev_unref(loop); /* never keeps the loop alive */
		ev_idle_init(&ctx->lp->idle, idle_cb);
		ctx->lp->idle.data = ctx->lp;
	}
	return 0;

err_close_efd:
	close(ctx->efd);
err_close_tfd:
	close(ctx->tfd);
err_close_epfd:
	close(ctx->epfd);
	return ret;
}

/* rdmamsg__loop_fini -- stop the watcher and close the fds */
void rdmamsg__loop_fini(struct rdmamsg_ctx *ctx)
{
	if (ctx->lp) {
		if (ctx->handles == 0)
			ev_ref(ctx->loop);
		ev_io_stop(ctx->loop, &ctx->lp->io);
		ev_ref(ctx->loop);
		ev_prepare_stop(ctx->loop, &ctx->lp->prep);
		if (ev_is_active(&ctx->lp->idle)) {
			ev_ref(ctx->loop);
			ev_idle_stop(ctx->loop, &ctx->lp->idle);
		}
		free(ctx->lp);
		ctx->lp = NULL;
	}
	rdmamsg__watch_fini(ctx);
	close(ctx->efd);
	close(ctx->tfd);
	close(ctx->epfd);
}

/* rdmamsg__loop_ref -- one more object keeps the loop running */
void rdmamsg__loop_ref(struct rdmamsg_ctx *ctx)
{
	if (ctx->handles++ == 0 && ctx->lp)
		ev_ref(ctx->loop);
}

/* rdmamsg__loop_unref -- one object fewer keeps the loop running */
void rdmamsg__loop_unref(struct rdmamsg_ctx *ctx)
{
	if (--ctx->handles == 0 && ctx->lp)
		ev_unref(ctx->loop);
}

/* kick -- make the fd readable so the next pass comes soon (any thread) */
static void kick(struct rdmamsg_ctx *ctx)
{
	uint64_t one = 1;

	/* a busy-polling pass sees this without reading the channels */
	__atomic_store_n(&ctx->kicked, 1, __ATOMIC_RELEASE);
	if (write(ctx->efd, &one, sizeof(one)) < 0) {
		/* counter saturated: already readable */
	}
}

/* rdmamsg__loop_kick -- the library wants a pass soon */
void rdmamsg__loop_kick(struct rdmamsg_ctx *ctx)
{
	__atomic_fetch_add(&ctx->kicks, 1, __ATOMIC_RELAXED);
	kick(ctx);
}

/* rdmamsg__loop_timerfd_set -- fire at due_ns (CLOCK_MONOTONIC); 0 disarms */
int rdmamsg__loop_timerfd_set(struct rdmamsg_ctx *ctx, uint64_t due_ns)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	if (due_ns) {
		its.it_value.tv_sec = (time_t)(due_ns / 1000000000ull);
		its.it_value.tv_nsec = (long)(due_ns % 1000000000ull);
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	if (timerfd_settime(ctx->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		return -errno;
	return 0;
}

/* comp_events -- read the CQ events the arms can still raise: an arm
 * raises one, so once every armed CQ has raised its own there is nothing
 * left to read, and no read to fail with EAGAIN (an event for a CQ whose
 * arm rdmamsg__iface_arm did not note would be read by a later pass: the
 * fd stays readable) */
static void comp_events(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	struct ibv_cq *cq;
	void *cq_ctx;
	uint32_t c, left = 0;

	for (c = 0; c < ifc->ncq; c++)
		left += ifc->cqs[c]->armed && !ifc->cqs[c]->event;
	while (left && ctx->ops->get_cq_event(ctx->cc, &cq, &cq_ctx) == 0) {
		struct rdmamsg__icq *q = cq_ctx;

		(void)cq;
		q->unacked++;
		left -= q->armed && !q->event;
		q->event = 1;
		ifc->events = 1;
	}
}

/*
 * Device events.  Each context has a device context of its own
 * (ctx->verbs), so its async event fd names only its own QPs, CQs and SRQs,
 * and ports, whose events every device context gets.
 */

/* port_err -- a port of the device went down (a pulled cable, a dead
 * switch port): each session on it fails now, as at its retry exhaustion,
 * and reconnects on another path, instead of waiting for its retries to
 * run out (seconds) or its peer timeout; a session's reconnect attempt
 * (or its handshake) on it is abandoned, as a failed attempt, and the
 * next path tried, instead of waiting for the connect timeout.
 * Endpoints on other ports, those without a session (they keep today's
 * behaviour: the link may be back before their transport gives up) and
 * those with an alternate path loaded (the HCA migrates them) are left
 * alone.  The port is the one rdma_cm bound the connection to
 * (cm_id->port_num: an attempt still resolving its address has none
 * yet), or the one APM moved it to, as on hardware. */
static void port_err(struct rdmamsg_ctx *ctx, uint8_t port)
{
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ctx->eps) {
		struct rdmamsg_ep *ep =
			container_of(pos, struct rdmamsg_ep, link);

		if (!ep->sid)
			continue;
		if (ep->st == EPS_UP && !ep->pstats.apm &&
		    rdmamsg__apm_port(ep) == port) {
			LOG_NOTE("endpoint %p: port %u of %s down", (void *)ep,
				 (unsigned int)port, ctx->devname);
			rdmamsg__ep_down(ep, -ENETDOWN);
		} else if (ep->reconn && !ep->reconn_due && ep->id &&
			   ep->id->port_num == port &&
			   (ep->st == EPS_RESOLVING ||
			    ep->st == EPS_CONNECTING)) {
			LOG_NOTE("endpoint %p: port %u of %s down: the "
				 "reconnect on it abandoned",
				 (void *)ep, (unsigned int)port, ctx->devname);
			rdmamsg__ep_connect_failed(ep, -ENETDOWN, 0, NULL, 0);
		}
	}
}

/* async_one -- one device event for this context */
static void async_one(struct rdmamsg_ctx *ctx, enum ibv_event_type t,
		      void *elem)
{
	struct rdmamsg__list *pos, *tmp;
	int st, found = 0;

	switch (t) {
	case IBV_EVENT_PORT_ERR:
		port_err(ctx, (uint8_t)(uintptr_t)elem);
		return;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
		st = -ECONNRESET;
		break;
	case IBV_EVENT_CQ_ERR:
		st = -EREMOTEIO;
		break;
	case IBV_EVENT_DEVICE_FATAL:
		st = -ENODEV;
		break;
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		rdmamsg__srq_limit_event(ctx, elem);
		return;
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
		rdmamsg__apm_event(ctx, t, elem);
		return;
	default:
		return;
	}
	if (elem && t == IBV_EVENT_CQ_ERR) {
		if (!rdmamsg__iface_cq(ctx, elem))
			return;
		elem = NULL; /* a shared CQ: every endpoint */
	}
	list_for_each_safe (pos, tmp, &ctx->eps) {
		struct rdmamsg_ep *ep =
			container_of(pos, struct rdmamsg_ep, link);

		if (!elem || (ep->ln && (void *)ep->ln->qp == elem)) {
			if (!found++)
				LOG_WARN("async event %d on %s", (int)t,
					 ctx->devname);
			rdmamsg__ep_down(ep, st);
		}
	}
}

/* async_events -- read the device's events: a fatal QP or CQ error takes
 * its endpoint down at once (instead of at the peer timeout), a port
 * error the sessions on that port, a path migration goes to apm.c */
static void async_events(struct rdmamsg_ctx *ctx)
{
	struct ibv_async_event ev;

	while (ctx->ops->get_async_event(ctx->verbs, &ev) == 0) {
		enum ibv_event_type t = ev.event_type;
		void *elem = NULL;

		switch (t) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_PATH_MIG:
		case IBV_EVENT_PATH_MIG_ERR:
			elem = ev.element.qp;
			break;
		case IBV_EVENT_CQ_ERR:
			elem = ev.element.cq;
			break;
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			elem = ev.element.srq;
			break;
		case IBV_EVENT_PORT_ERR: /* the number, carried as a pointer */
			elem = (void *)(uintptr_t)ev.element.port_num;
			break;
		default:
			break;
		}
		ctx->ops->ack_async_event(&ev);
		async_one(ctx, t, elem);
	}
}

/* drain_fd -- consume a timerfd/eventfd counter */
static void drain_fd(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: spurious wake-up */
	}
}

/* look_every -- a busy pass's interval between its looks at the channels.
 * A handshake's short looks stay while the watch is ON, though it tells
 * of CM events too: a handshake is short, and a thread that never makes a
 * system call can keep the process's other threads (softrdma's CM thread,
 * which delivers the events) off a scheduler that is not fair, valgrind's
 * default one (tests/lib.sh valgrind_cmd). */
static uint64_t look_every(const struct rdmamsg_ctx *ctx)
{
	if (ctx->cm_waits)
		return RDMAMSG__LOOK_HS_NS;
	if (ctx->watch.state == RDMAMSG__WATCH_ON)
		return RDMAMSG__WATCH_LOOK_NS;
	return EPOLL_EVERY_NS;
}

/* channels -- a pass's look at the epoll set: CM, completion-channel,
 * timer, async and wake-up events; *timers set when timers are due.  Out
 * of line: a busy-polling pass comes here when the watch fired, or once
 * a millisecond without it.  A periodic look that finds the caller spun
 * through the whole period (no rdmamsg_ctx_arm() said 0 since the last
 * look) turns the watch on. */
static __attribute__((noinline)) void channels(struct rdmamsg_ctx *ctx,
					       int *timers)
{
	struct epoll_event evs[8];
	int n, i;

	if (rdmamsg__watch_fired(ctx))
		rdmamsg__watch_spend(ctx);
	else if (!ctx->force_epoll && !ctx->slept && ctx->looked &&
		 ctx->watch.state != RDMAMSG__WATCH_ON)
		rdmamsg__watch_busy(ctx);
	ctx->slept = 0;
	ctx->force_epoll = 0;
	ctx->looked = ctx->ifc.pass;
	ctx->next_epoll = ctx->now + look_every(ctx);
	n = epoll_wait(ctx->epfd, evs, 8, 0);
	for (i = 0; i < n; i++) {
		switch (evs[i].data.u32) {
		case SRC_CC:
			comp_events(ctx);
			break;
		case SRC_CM:
			rdmamsg__cm_process(ctx);
			break;
		case SRC_TIMER:
			drain_fd(ctx->tfd);
			*timers = 1;
			break;
		case SRC_ASYNC:
			async_events(ctx);
			break;
		case SRC_WAKE:
			drain_fd(ctx->efd);
			/* after the drain: a wake-up whose write it missed
			 * has its flag seen now or its fd readable next */
			if (ctx->wakeup_cb &&
			    __atomic_exchange_n(&ctx->woken, 0,
						__ATOMIC_ACQ_REL))
				ctx->wakeup_cb(ctx, ctx->wakeup_arg);
			break;
		}
	}
}

/* after -- a pass's work once the completions are in: due timers, the
 * close callbacks due (listeners, SRQs) and the endpoints' deferred
 * steps (out of line: rare) */
static __attribute__((noinline)) void after(struct rdmamsg_ctx *ctx, int timers)
{
	struct rdmamsg__list *pos, *tmp, deferred;

	/* due timers always make the timerfd readable; the pass's clock is
	 * read again first: the callbacks above may have run long, and a
	 * timer that judges by it (a peer's silence) must not stamp what it
	 * reads now with the time the pass began */
	if (timers) {
		set_now(ctx, rdmamsg__now_ns());
		rdmamsg__timers_run(ctx);
	}

	/* state machines that asked for a step (closes, callbacks) */
	list_for_each_safe (pos, tmp, &ctx->closes) {
		struct rdmamsg__closing *c =
			container_of(pos, struct rdmamsg__closing, link);

		list_del(pos);
		c->step(c);
	}
	list_init(&deferred);
	if (!list_empty(&ctx->deferred)) {
		deferred = ctx->deferred;
		deferred.next->prev = &deferred;
		deferred.prev->next = &deferred;
		list_init(&ctx->deferred);
	}
	list_for_each_safe (pos, tmp, &deferred) {
		list_del(pos);
		rdmamsg__ep_step(
			container_of(pos, struct rdmamsg_ep, defer_link));
	}
}

/* rdmamsg_ctx_progress -- do all ready work without blocking */
RDMAMSG_EXPORT int rdmamsg_ctx_progress(struct rdmamsg_ctx *ctx)
{
	int timers = 0;
	uint64_t due;

	if (!ctx)
		return -EINVAL;
	if (ctx->in_progress)
		return 0; /* called from a callback: the outer pass goes on */
	ctx->in_progress = 1;
	pass_clock(ctx);
	ctx->ifc.pass = rdmamsg__iface_stamp(ctx);
	ctx->pending = 0;
	/* a caller spinning on progress (busy polling) needs the channels
	 * only now and then: the CQs are polled directly below (never
	 * armed while it spins: rdmamsg_ctx_arm), due timers are seen from
	 * the heap, a kick from the flag it sets; CM and async events from
	 * the watch's bit (watch.c), or within EPOLL_EVERY_NS without it
	 * (RDMAMSG__LOOK_HS_NS during a handshake).  One that woke from the
	 * fd (libev, or arm() saw it readable) always looks. */
	due = rdmamsg__timers_due(&ctx->timers);
	if (RDMAMSG_UNLIKELY(due && due <= ctx->now))
		timers = 1; /* the timerfd may lag: its slack */
	if (RDMAMSG_UNLIKELY(__atomic_load_n(&ctx->kicked, __ATOMIC_ACQUIRE))) {
		__atomic_store_n(&ctx->kicked, 0, __ATOMIC_RELAXED);
		ctx->force_epoll = 1;
	}
	if (ctx->force_epoll || ctx->now >= ctx->next_epoll ||
	    RDMAMSG_UNLIKELY(rdmamsg__watch_fired(ctx)))
		channels(ctx, &timers);

	/* completions: one CQ, only the endpoints that had some */
	rdmamsg__iface_progress(ctx);
	if (RDMAMSG_UNLIKELY(!list_empty(&ctx->xwait)))
		rdmamsg__ep_xwait_all(ctx); /* sessions waiting for memory */
	if (RDMAMSG_UNLIKELY(timers || !list_empty(&ctx->closes) ||
			     !list_empty(&ctx->deferred)))
		after(ctx, timers);

	/* work left for the next pass needs no kick: rdmamsg_ctx_arm()
	 * (and in libev mode the prepare watcher that calls it) says -EBUSY
	 * for it, and a caller that spins comes back anyway */
	ctx->in_progress = 0;
	return 0;
}

/* polling -- a receiver's poll before it blocks (ctx->poll_until, set by
 * a group's receives): 1 while it lasts, after giving the CPU to whoever
 * else can run (a receiver that spins alone on a shared CPU delays the
 * sender it waits for) */
static __attribute__((noinline)) int polling(struct rdmamsg_ctx *ctx)
{
	if (rdmamsg__now_ns() >= ctx->poll_until) {
		ctx->poll_until = 0;
		return 0;
	}
	sched_yield();
	return 1;
}

/* rdmamsg_ctx_arm -- 0 when blocking on the fd is safe, -EBUSY otherwise */
RDMAMSG_EXPORT int rdmamsg_ctx_arm(struct rdmamsg_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	if (ctx->in_progress || ctx->pending || !list_empty(&ctx->polls) ||
	    !list_empty(&ctx->deferred) || !list_empty(&ctx->closes))
		return -EBUSY;
	/* what waits for pool memory (a FIN, a pull, a queued fragment's
	 * header: msg.c pump_stuck): memory came back since they last tried
	 * (rdmamsg_buf_free(), a buffer freed after that pass), and no
	 * completion or event would say so */
	if (RDMAMSG_UNLIKELY(!list_empty(&ctx->xwait)) &&
	    ctx->pool.in_use < ctx->xwait_used)
		return -EBUSY;
	/* no CQ armed while it polls: no sender's wake-up to pay for */
	if (RDMAMSG_UNLIKELY(ctx->poll_until) && polling(ctx))
		return -EBUSY;
	/* CQs are armed only here, when the caller is about to block (a
	 * busy-polling caller never arms them: no provider wakes a waiter
	 * that is not there); arm, then poll: what came in between */
	if (rdmamsg__iface_arm(ctx))
		return -EBUSY;
	/* a pass may have skipped the channels (busy polling): readable ones
	 * are work, and the next pass must look at them.  Not again when the
	 * last pass looked and no kick came since: what became readable after
	 * that look came as if after this call, and ends the caller's wait */
	if (!ctx->looked || ctx->looked != ctx->ifc.pass ||
	    __atomic_load_n(&ctx->kicked, __ATOMIC_ACQUIRE)) {
		struct epoll_event ev;

		if (epoll_wait(ctx->epfd, &ev, 1, 0) > 0) {
			ctx->force_epoll = 1;
			return -EBUSY;
		}
	}
	/* every CQ is armed (a completion from here on makes the channel
	 * readable) and channel fds are level triggered in the epoll set, so
	 * nothing can be lost from here on; whatever ends the caller's wait,
	 * the next pass looks at the channels (it does not know it waited).
	 * The watch's bit is not read while the caller blocks. */
	ctx->force_epoll = 1;
	ctx->slept = 1;
	rdmamsg__watch_sleep(ctx);
	return 0;
}

/* rdmamsg_ctx_get_fd -- the one pollable fd */
RDMAMSG_EXPORT int rdmamsg_ctx_get_fd(const struct rdmamsg_ctx *ctx, int *fd)
{
	if (!ctx || !fd)
		return -EINVAL;
	*fd = ctx->epfd;
	return 0;
}

/* rdmamsg_ctx_wakeup -- wake the loop from any thread */
RDMAMSG_EXPORT int rdmamsg_ctx_wakeup(struct rdmamsg_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	/* before the write that makes the fd readable: the pass that reads
	 * it sees the flag */
	__atomic_store_n(&ctx->woken, 1, __ATOMIC_RELEASE);
	kick(ctx);
	return 0;
}

/* rdmamsg_ctx_stop -- make rdmamsg_ctx_run() return */
RDMAMSG_EXPORT int rdmamsg_ctx_stop(struct rdmamsg_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	ctx->stop = 1;
	/* the ev_run() running now ends (rdmamsg_ctx_run's or the caller's
	 * own); nothing of it stays to end a later one */
	if (ctx->lp)
		ev_break(ctx->loop, EVBREAK_ONE);
	return 0;
}

/* rdmamsg_ctx_run -- drive the context until nothing is left or stopped */
RDMAMSG_EXPORT int rdmamsg_ctx_run(struct rdmamsg_ctx *ctx)
{
	struct pollfd pfd;

	if (!ctx)
		return -EINVAL;
	/* from a callback the outer pass holds the context: progress would
	 * do nothing and arm say -EBUSY, so the loop below would spin */
	if (ctx->in_progress) {
		LOG_ERR("rdmamsg_ctx_run() from a callback of its context");
		return -EBUSY;
	}
	ctx->stop = 0;
	if (ctx->lp) {
		ev_run(ctx->loop, 0);
		ctx->stop = 0;
		return 0;
	}
	pfd.fd = ctx->epfd;
	pfd.events = POLLIN;
	while (!ctx->stop && ctx->handles > 0) {
		if (rdmamsg_ctx_arm(ctx) == 0 && poll(&pfd, 1, -1) < 0 &&
		    errno != EINTR)
			return -errno;
		rdmamsg_ctx_progress(ctx);
	}
	ctx->stop = 0;
	return 0;
}
