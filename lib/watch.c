/* SPDX-License-Identifier: MIT */
/*
 * watch.c -- a busy-polling caller learns that one of the context's
 * channels became readable without a system call.
 *
 * A caller that spins on rdmamsg_ctx_progress() never blocks on the
 * context's epoll fd, and asking that fd (epoll_wait with no timeout) is a
 * system call; loop.c asked once a millisecond.  The watch is an io_uring
 * of the context with one request: a multishot poll of the epoll fd.  Made
 * with IORING_SETUP_DEFER_TASKRUN and IORING_SETUP_TASKRUN_FLAG, a wake-up
 * of the epoll fd (any channel that became readable: CM, completion,
 * timer, wake-up and async events) makes the kernel set one bit,
 * IORING_SQ_TASKRUN, in the ring's shared memory, and nothing else: it
 * interrupts nobody, and the request's work waits for this context's
 * thread.  A pass reads the bit (rdmamsg__watch_fired, one load); only
 * when it is set does it ask the ring (io_uring_enter, which runs that
 * work: the poll's completion, the poll left armed) and then the epoll
 * fd.  The bit is cleared before the work runs, so a wake-up after it sets
 * it again: none is lost.
 *
 * One explicit state (ctx->watch.state):
 * - UNTRIED: no ring yet; the first period a caller spins through makes
 *   one (rdmamsg__watch_busy);
 * - ON: the bit is read every pass, and loop.c's periodic look is only a
 *   safety net (RDMAMSG__WATCH_LOOK_NS);
 * - OFF: the ring is kept, its bit not read: the caller blocks on the fd
 *   (rdmamsg_ctx_arm() said 0), and the wake-ups that end its waits cost
 *   no extra call; the poll's work waits, once, for the next ON;
 * - FAILED: no ring, for good (a kernel before 6.1, a seccomp filter,
 *   RDMAMSG_NO_WATCH=1, or another thread that the ring does not serve:
 *   IORING_SETUP_SINGLE_ISSUER); loop.c looks every millisecond as before.
 *
 * Portable to hardware and any loop: the ring watches the same epoll fd
 * that rdmamsg_ctx_get_fd() hands out, nothing of any provider.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* the bit's stand-in while there is no ring: always clear */
static const unsigned int no_flags;

#if defined(__linux__) && defined(__has_include)
#if __has_include(<linux/io_uring.h>)
#include <linux/io_uring.h>
#endif
#endif

#if defined(IORING_SETUP_DEFER_TASKRUN) && defined(IORING_POLL_ADD_MULTI)
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>

/* the poll's user_data */
#define WATCH_POLL 1
/* the ring's sizes: one request in flight, a few of its completions */
#define WATCH_SQ 2

_Static_assert(RDMAMSG__WATCH_BIT == IORING_SQ_TASKRUN,
	       "internal.h's copy of the bit");

/* enter -- io_uring_enter: submit n, run the deferred work */
static int enter(struct rdmamsg__watch *w, unsigned int n)
{
	int r = (int)syscall(__NR_io_uring_enter, w->fd, n, 0,
			     IORING_ENTER_GETEVENTS, NULL, 0);

	return r < 0 ? -errno : r;
}

/* submit_poll -- the multishot poll of the epoll fd into the SQ (not yet
 * entered) */
static void submit_poll(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__watch *w = &ctx->watch;
	struct io_uring_sqe *sqe = w->sqes;
	unsigned int tail = *w->sq_tail;

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_POLL_ADD;
	sqe->fd = ctx->epfd;
	sqe->poll32_events = POLLIN;
	sqe->len = IORING_POLL_ADD_MULTI;
	sqe->user_data = WATCH_POLL;
	w->sq_array[tail & w->sq_mask] = 0;
	__atomic_store_n(w->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* reap -- the completions posted: 1 when the poll ended (a completion
 * without IORING_CQE_F_MORE) and must be submitted again */
static int reap(struct rdmamsg__watch *w)
{
	unsigned int head = *w->cq_head;
	unsigned int tail = __atomic_load_n(w->cq_tail, __ATOMIC_ACQUIRE);
	int ended = 0;

	for (; head != tail; head++) {
		const struct io_uring_cqe *c = &w->cqes[head & w->cq_mask];

		if (c->user_data == WATCH_POLL &&
		    !(c->flags & IORING_CQE_F_MORE))
			ended = 1;
	}
	__atomic_store_n(w->cq_head, head, __ATOMIC_RELEASE);
	return ended;
}

/* unmake -- close the ring, if any */
static void unmake(struct rdmamsg__watch *w)
{
	if (w->ring)
		munmap(w->ring, w->ring_len);
	if (w->sqes)
		munmap(w->sqes, w->sqes_len);
	if (w->fd >= 0)
		close(w->fd);
	w->ring = NULL;
	w->sqes = NULL;
	w->fd = -1;
	w->flags = &no_flags;
	w->ring_flags = NULL;
}

/* fail -- no ring from now on: loop.c's periodic look */
static void fail(struct rdmamsg_ctx *ctx, const char *what, int err)
{
	LOG_DBG("busy passes look at the channels every millisecond: %s: %s",
		what, strerror(-err));
	unmake(&ctx->watch);
	ctx->watch.state = RDMAMSG__WATCH_FAILED;
}

/* make -- the ring, its poll submitted and entered: 0 or -errno */
static int make(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__watch *w = &ctx->watch;
	struct io_uring_params p;
	char *r;
	int ret;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		  IORING_SETUP_TASKRUN_FLAG;
	w->fd = (int)syscall(__NR_io_uring_setup, WATCH_SQ, &p);
	if (w->fd < 0) {
		w->fd = -1;
		return -errno;
	}
	if (!(p.features & IORING_FEAT_SINGLE_MMAP))
		return -ENOTSUP; /* kernels with DEFER_TASKRUN all have it */
	w->ring_len = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	if (w->ring_len < p.cq_off.cqes + p.cq_entries * sizeof(*w->cqes))
		w->ring_len = p.cq_off.cqes + p.cq_entries * sizeof(*w->cqes);
	r = mmap(NULL, w->ring_len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_POPULATE, w->fd, IORING_OFF_SQ_RING);
	if (r == MAP_FAILED)
		return -errno;
	w->ring = r;
	w->sqes_len = p.sq_entries * sizeof(*w->sqes);
	w->sqes = mmap(NULL, w->sqes_len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, w->fd, IORING_OFF_SQES);
	if (w->sqes == MAP_FAILED) {
		w->sqes = NULL;
		return -errno;
	}
	w->sq_tail = (unsigned int *)(r + p.sq_off.tail);
	w->sq_array = (unsigned int *)(r + p.sq_off.array);
	w->sq_mask = *(unsigned int *)(r + p.sq_off.ring_mask);
	w->cq_head = (unsigned int *)(r + p.cq_off.head);
	w->cq_tail = (unsigned int *)(r + p.cq_off.tail);
	w->cq_mask = *(unsigned int *)(r + p.cq_off.ring_mask);
	w->cqes = (struct io_uring_cqe *)(r + p.cq_off.cqes);
	submit_poll(ctx);
	ret = enter(w, 1);
	if (ret < 0)
		return ret;
	w->ring_flags = (const unsigned int *)(r + p.sq_off.flags);
	return ret == 1 ? 0 : -EIO;
}

/* rdmamsg__watch_spend -- the bit was set (or the watch resumes): run the
 * poll's deferred work, take its completions, submit it again if it
 * ended; the caller then looks at the epoll fd itself */
void rdmamsg__watch_spend(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__watch *w = &ctx->watch;
	int ret;

	ret = enter(w, 0);
	if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
		/* -EEXIST: another thread progresses the context now */
		fail(ctx, "io_uring_enter", ret);
		return;
	}
	if (!reap(w))
		return;
	submit_poll(ctx);
	ret = enter(w, 1);
	if (ret != 1)
		fail(ctx, "io_uring_enter (poll)", ret < 0 ? ret : -EIO);
}

/* rdmamsg__watch_busy -- the caller spun through a whole period without
 * blocking: read the bit from now on (made at the first such period) */
void rdmamsg__watch_busy(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__watch *w = &ctx->watch;
	const char *e;
	int ret;

	switch (w->state) {
	case RDMAMSG__WATCH_UNTRIED:
		e = getenv("RDMAMSG_NO_WATCH");
		if (e && *e && strcmp(e, "0")) {
			fail(ctx, "RDMAMSG_NO_WATCH", -ENOTSUP);
			return;
		}
		ret = make(ctx);
		if (ret) {
			fail(ctx, "io_uring", ret);
			return;
		}
		break;
	case RDMAMSG__WATCH_OFF:
		/* the wake-ups while it was off left the poll's work */
		rdmamsg__watch_spend(ctx);
		if (w->state == RDMAMSG__WATCH_FAILED)
			return;
		break;
	default:
		return;
	}
	w->state = RDMAMSG__WATCH_ON;
	w->flags = w->ring_flags;
}
#else /* no io_uring with deferred task work in these headers */
void rdmamsg__watch_spend(struct rdmamsg_ctx *ctx)
{
	(void)ctx;
}

void rdmamsg__watch_busy(struct rdmamsg_ctx *ctx)
{
	ctx->watch.state = RDMAMSG__WATCH_FAILED;
}

static void unmake(struct rdmamsg__watch *w)
{
	w->flags = &no_flags;
}
#endif

/* rdmamsg__watch_init -- no ring yet */
void rdmamsg__watch_init(struct rdmamsg_ctx *ctx)
{
	memset(&ctx->watch, 0, sizeof(ctx->watch));
	ctx->watch.state = RDMAMSG__WATCH_UNTRIED;
	ctx->watch.fd = -1;
	ctx->watch.flags = &no_flags;
}

/* rdmamsg__watch_sleep -- the caller blocks on the fd: the bit is not
 * read (the ring stays: its wake-ups cost nothing until the next ON) */
void rdmamsg__watch_sleep(struct rdmamsg_ctx *ctx)
{
	if (ctx->watch.state == RDMAMSG__WATCH_ON)
		ctx->watch.state = RDMAMSG__WATCH_OFF;
	ctx->watch.flags = &no_flags;
}

/* rdmamsg__watch_fini -- close the ring */
void rdmamsg__watch_fini(struct rdmamsg_ctx *ctx)
{
	unmake(&ctx->watch);
}
