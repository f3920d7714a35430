/* SPDX-License-Identifier: MIT */
/*
 * watch.c -- a busy-polling context learns that a channel became readable
 * from its watch (lib/watch.c: an io_uring's multishot poll of the epoll
 * fd, whose deferred work sets a bit in shared memory), not from a look
 * at the epoll fd once a millisecond.  Two contexts of this process, one
 * thread; this program's epoll_wait() and syscall() come before libc's
 * for librdmamsg, and count its calls.
 *
 * - busy: after a millisecond of passes without a wait both watches are
 *   ON; 200 ms of messages make at most the safety net's few epoll_wait
 *   calls (a look every millisecond would make some 400);
 * - a connection request reaches a busy server whose periodic look never
 *   comes (its next_epoll held at the end of time): only the watch can
 *   tell it;
 * - a caller that blocks turns the watch OFF: the wake-ups of its waits
 *   cost no io_uring_enter; a millisecond of spinning turns it ON again;
 * - another thread that progresses the context: the ring serves only its
 *   maker (IORING_SETUP_SINGLE_ISSUER), so the watch gives up (FAILED)
 *   and the periodic looks come back, messages still delivered;
 * - RDMAMSG_NO_WATCH=1: FAILED from the start, a look every millisecond
 *   (200 ms of messages: at least 100 epoll_wait calls), and the request
 *   of the second check is not seen without the periodic look: that
 *   check can fail;
 * - a kernel that refuses io_uring_setup, and one that makes the ring but
 *   refuses its first io_uring_enter (this program's syscall() says so):
 *   FAILED, a look every millisecond, messages delivered;
 * - the contexts destroyed, no file descriptor is left (against the count
 *   after RDMAMSG_NO_WATCH's contexts, which run first: softrdma keeps
 *   some of its own once loaded), the refused rings' included.
 * Where the kernel refuses such a ring (before 6.1, a seccomp filter) the
 * checks of the watch are skipped, and RDMAMSG_NO_WATCH's still run.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

#include <linux/io_uring.h>

#include "../tap.h"
#include "util.h"
#include "internal.h"

static unsigned long n_epoll, n_enter;
/* syscall() refuses this one with ENOSYS (0: none) */
static long refused;
/* the epoll fds whose epoll_wait calls count: the contexts' (softrdma's
 * CM thread waits on one of its own) */
static int counted[3] = {-1, -1, -1};

/* epoll_wait -- librdmamsg's, counted (epoll_pwait does the same) */
__attribute__((visibility("default"))) int epoll_wait(int epfd,
						      struct epoll_event *evs,
						      int max, int timeout)
{
	int i;

	for (i = 0; i < 3; i++)
		if (__atomic_load_n(&counted[i], __ATOMIC_RELAXED) == epfd)
			__atomic_add_fetch(&n_epoll, 1, __ATOMIC_RELAXED);
	return epoll_pwait(epfd, evs, max, timeout, NULL);
}

/* syscall -- librdmamsg's io_uring_enter, counted */
__attribute__((visibility("default"))) long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	long a[6];
	va_list ap;
	int i;

	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == __NR_io_uring_enter)
		__atomic_add_fetch(&n_enter, 1, __ATOMIC_RELAXED);
	if (nr == __atomic_load_n(&refused, __ATOMIC_RELAXED)) {
		errno = ENOSYS;
		return -1;
	}
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* count -- one of the counts, now */
static unsigned long count(unsigned long *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* count_fds -- epoll_wait calls on these contexts' epoll fds count */
static void count_fds(struct rdmamsg_ctx *a, struct rdmamsg_ctx *b,
		      struct rdmamsg_ctx *c)
{
	struct rdmamsg_ctx *ctx[3] = {a, b, c};
	int i, fd;

	for (i = 0; i < 3; i++) {
		rdmamsg_ctx_get_fd(ctx[i], &fd);
		__atomic_store_n(&counted[i], fd, __ATOMIC_RELAXED);
	}
}

/* uring_usable -- the kernel makes a ring as lib/watch.c asks for one */
static int uring_usable(void)
{
	struct io_uring_params p;
	long fd;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		  IORING_SETUP_TASKRUN_FLAG;
	fd = syscall(__NR_io_uring_setup, 2, &p);
	if (fd < 0)
		return 0;
	close((int)fd);
	return 1;
}

/* open_fds -- file descriptors open in this process */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		bail_out("/proc/self/fd");
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ., .. and the DIR's own */
}

/* struct pair -- a server context with a listener, a client context
 * connected to it, and a second client's context (c2) */
struct pair {
	struct test_side srv, cli;
	struct rdmamsg_ctx *c2;
	char addr[64];
};

/* spin -- busy passes of both sides for ms, the client sending "hello"
 * whenever it may; the messages sent */
static uint64_t spin(struct pair *p, int ms)
{
	long long end = test_now_ms() + ms;
	uint64_t sent = 0;

	while (test_now_ms() < end) {
		if (rdmamsg_send(p->cli.ep, "hello", 5, NULL) == 0)
			sent++;
		rdmamsg_ctx_progress(p->cli.ctx);
		rdmamsg_ctx_progress(p->srv.ctx);
	}
	return sent;
}

/* open_pair -- three contexts, whose epoll_wait calls count; srv
 * listening, cli connected to it; 5 ms of busy passes then */
static void open_pair(struct pair *p)
{
	memset(p, 0, sizeof(*p));
	p->srv.ctx = test_ctx();
	p->cli.ctx = test_ctx();
	p->c2 = test_ctx();
	count_fds(p->srv.ctx, p->cli.ctx, p->c2);
	p->srv.cbs = &test_hello_cbs;
	if (test_side_listen(&p->srv, NULL, p->addr, sizeof(p->addr)) ||
	    rdmamsg_connect(p->cli.ctx, p->addr, NULL, &test_hello_cbs, &p->cli,
			    &p->cli.ep))
		bail_out("listen, connect");
	TEST_RUN2_WHILE(&p->srv, &p->cli, !p->cli.up || !p->srv.up, 10000);
	if (!p->cli.up || p->cli.status || !p->srv.up || p->srv.status)
		bail_out("not connected");
	spin(p, 5);
}

/* close_pair -- the connection closed, the three contexts destroyed */
static void close_pair(struct pair *p)
{
	ok(test_side_close2(&p->srv, &p->cli, 5000), "closed");
	ok(!rdmamsg_ctx_destroy(&p->c2) && !rdmamsg_ctx_destroy(&p->cli.ctx) &&
		   !rdmamsg_ctx_destroy(&p->srv.ctx),
	   "contexts destroyed");
}

/* messages -- 200 ms of busy messages: the library's epoll_wait calls
 * meanwhile; every message delivered intact (the rest of them taken
 * busy too: a wait would turn the watches OFF) */
static unsigned long messages(struct pair *p, const char *what)
{
	long long end;
	uint64_t got0, sent;
	unsigned long e0;

	spin(p, 5); /* the watches turn ON within a millisecond */
	e0 = count(&n_epoll);
	got0 = p->srv.got;
	sent = spin(p, 200);
	e0 = count(&n_epoll) - e0;
	end = test_now_ms() + 5000;
	while (p->srv.got - got0 < sent && test_now_ms() < end) {
		rdmamsg_ctx_progress(p->cli.ctx);
		rdmamsg_ctx_progress(p->srv.ctx);
	}
	ok(sent > 0 && p->srv.got - got0 == sent && !p->srv.bad,
	   "%s: %llu messages sent busy, all delivered intact", what,
	   (unsigned long long)sent);
	return e0;
}

/* request_unlooked -- a second client's (p->c2's) connection request to
 * p's busy server, whose periodic look is held off: 1 once accepted
 * within ms */
static int request_unlooked(struct pair *p, int ms)
{
	static struct test_side c2;
	long long end;
	struct rdmamsg_ep *first = p->srv.ep;
	int accepted = 0;

	memset(&c2, 0, sizeof(c2));
	c2.ctx = p->c2;
	if (rdmamsg_connect(p->c2, p->addr, NULL, &test_hello_cbs, &c2, &c2.ep))
		bail_out("connect");
	end = test_now_ms() + ms;
	while (!accepted && test_now_ms() < end) {
		p->srv.ctx->next_epoll = UINT64_MAX;
		rdmamsg_ctx_progress(p->srv.ctx);
		rdmamsg_ctx_progress(p->c2);
		accepted = p->srv.ep != first;
	}
	/* now with the periodic looks: connected busy, then closed */
	p->srv.ctx->next_epoll = 0;
	end = test_now_ms() + 10000;
	while ((!c2.up || !p->srv.up) && test_now_ms() < end) {
		rdmamsg_ctx_progress(p->srv.ctx);
		rdmamsg_ctx_progress(p->c2);
	}
	if (!c2.up || c2.status)
		bail_out("second client not connected");
	/* the second server endpoint reports to p->srv too (on_req) */
	rdmamsg_ep_close(c2.ep, test_side_on_close);
	p->srv.disc = 0;
	test_run2(&p->srv, &c2, &p->srv.disc, 5000);
	rdmamsg_ep_close(p->srv.ep, test_side_on_close);
	test_run2(&p->srv, &c2, &c2.closed, 5000);
	test_run2(&p->srv, &c2, &p->srv.closed, 5000);
	if (!c2.closed || !p->srv.closed)
		bail_out("second connection not closed");
	p->srv.ep = first;
	p->srv.disc = p->srv.closed = 0;
	return accepted;
}

/* other_thread -- progress the pair from a thread that did not make the
 * rings */
static void *other_thread(void *arg)
{
	struct pair *p = arg;

	rdmamsg_ctx_wakeup(p->srv.ctx); /* the epoll fd readable: fired */
	spin(p, 50);
	return NULL;
}

/* no_watch -- contexts without a watch (why: RDMAMSG_NO_WATCH=1, or
 * the system call refused): a look every millisecond; with request, the
 * request of the watch's check is not seen without it */
static void no_watch(const char *why, int request)
{
	struct pair p;
	unsigned long e;

	open_pair(&p);
	ok(p.srv.ctx->watch.state == RDMAMSG__WATCH_FAILED &&
		   p.cli.ctx->watch.state == RDMAMSG__WATCH_FAILED,
	   "%s: no watch", why);
	e = messages(&p, why);
	ok(e >= 100,
	   "%s: %lu epoll_wait calls in 200 ms (a look every millisecond)", why,
	   e);
	if (request) {
		ok(!request_unlooked(&p, 300),
		   "%s: the request is not seen without the periodic look",
		   why);
	}
	close_pair(&p);
}

/* watch -- the watch's checks (the kernel makes its ring) */
static void watch(void)
{
	struct rdmamsg_ctx *sctx, *cctx;
	struct pair p;
	unsigned long e, n;
	pthread_t t;

	open_pair(&p);
	sctx = p.srv.ctx;
	cctx = p.cli.ctx;
	ok(sctx->watch.state == RDMAMSG__WATCH_ON &&
		   cctx->watch.state == RDMAMSG__WATCH_ON,
	   "busy: both watches ON (%d, %d)", sctx->watch.state,
	   cctx->watch.state);
	e = messages(&p, "watch ON");
	ok(e <= 12,
	   "watch ON: %lu epoll_wait calls in 200 ms (the safety net's few)",
	   e);
	ok(request_unlooked(&p, 10000),
	   "watch ON: a connection request seen without the periodic look");

	/* OFF while the caller blocks */
	test_idle(sctx, 20);
	test_idle(cctx, 20);
	ok(sctx->watch.state == RDMAMSG__WATCH_OFF &&
		   cctx->watch.state == RDMAMSG__WATCH_OFF,
	   "blocking: the watches OFF");
	n = count(&n_enter);
	p.srv.got = 0;
	while (rdmamsg_send(p.cli.ep, "hello", 5, NULL) == -EAGAIN)
		rdmamsg_ctx_progress(cctx);
	TEST_RUN2_WHILE(&p.srv, &p.cli, p.srv.got < 1, 5000);
	n = count(&n_enter) - n;
	ok(p.srv.got == 1 && n == 0,
	   "blocking: a message woke the server, no io_uring_enter (%lu)", n);
	n = count(&n_enter);
	spin(&p, 5);
	n = count(&n_enter) - n;
	ok(sctx->watch.state == RDMAMSG__WATCH_ON && n <= 20,
	   "spinning again: ON again (%lu io_uring_enter: a context's resume "
	   "and the events since, not one a pass)",
	   n);

	/* another thread */
	if (pthread_create(&t, NULL, other_thread, &p) || pthread_join(t, NULL))
		bail_out("thread");
	is_int(sctx->watch.state, RDMAMSG__WATCH_FAILED,
	       "another thread: its watch gave up");
	messages(&p, "another thread's after");
	close_pair(&p);
}

int main(void)
{
	int fds;

	test_setup("watch");
	setenv("RDMAMSG_NO_WATCH", "1", 1);
	no_watch("RDMAMSG_NO_WATCH", 1);
	unsetenv("RDMAMSG_NO_WATCH");
	fds = open_fds();
	refused = __NR_io_uring_setup;
	no_watch("io_uring_setup refused", 0);
	refused = 0;
	if (uring_usable()) {
		refused = __NR_io_uring_enter;
		no_watch("io_uring_enter refused", 0);
		refused = 0;
		watch();
	} else {
		diag("the kernel makes no io_uring with deferred task work");
		skip_one("the watch's checks (no ring)");
	}
	is_int(open_fds(), fds, "no file descriptor left");
	return done_testing();
}
