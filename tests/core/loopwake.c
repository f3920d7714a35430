/* SPDX-License-Identifier: MIT */
/*
 * loopwake.c -- the loop adapter's promises to the loop that drives it
 * (rdmamsg_ctx_create(3), "Driving the context"; rdmamsg(7), Threading):
 * the wakeup callback runs in the loop thread after rdmamsg_ctx_wakeup()
 * and only then, also while another thread calls it without pause;
 * rdmamsg_ctx_stop() from a callback ends rdmamsg_ctx_run() and nothing
 * after it; signals without SA_RESTART do not end rdmamsg_ctx_run(), a
 * handler's rdmamsg_ctx_wakeup() reaches it (signals_in_run); in libev mode the context neither spins an idle loop nor
 * keeps ev_run() alive once its last object has closed; a peer's flood
 * keeps no rdmamsg_ctx_progress() call long (flood_fair), nor does a storm
 * of connection requests (connect_storm); the protocol holds with an
 * edge-triggered epoll too (edge_triggered).
 */
#include "config.h"

#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>

#include "../tap.h"
#include "util.h"

static int wakeups;	      /* wakeup callbacks run */
static pthread_t loop_thread; /* the thread that drives the contexts */
static int off_thread;	      /* wakeup callbacks run by another thread */
static uint64_t woke_seq;  /* the waker's count as the last callback saw it */
static uint64_t waker_seq; /* the waker's calls so far (atomic) */
static int stop_in_recv;   /* on_recv_cb calls rdmamsg_ctx_stop() */
static int stop_in_wakeup; /* on_wakeup calls rdmamsg_ctx_stop() */

/* on_wakeup -- count wakeup callbacks, note the thread and the waker's
 * progress */
static void on_wakeup(struct rdmamsg_ctx *ctx, void *arg)
{
	(void)ctx;
	(void)arg;
	wakeups++;
	if (!pthread_equal(pthread_self(), loop_thread))
		off_thread++;
	woke_seq = __atomic_load_n(&waker_seq, __ATOMIC_ACQUIRE);
	if (stop_in_wakeup)
		rdmamsg_ctx_stop(ctx);
}

/* on_recv_cb -- count the messages; stop the run if asked to */
static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	struct test_side *s = arg;

	(void)data;
	(void)flags;
	if (len != 8 || imm != (uint32_t)s->got)
		s->bad++;
	s->got++;
	if (!s->ep)
		s->ep = ep;
	if (stop_in_recv)
		rdmamsg_ctx_stop(s->ctx);
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_disconnect = test_side_on_disconnect,
};

/* make_ctx -- a context with the counting wakeup callback, in libev mode
 * when loop is given */
static struct rdmamsg_ctx *make_ctx(struct ev_loop *loop)
{
	struct rdmamsg_ctx_attr *a;
	struct rdmamsg_ctx *ctx = NULL;

	rdmamsg_ctx_attr_new(&a);
	rdmamsg_ctx_attr_set_wakeup_cb(a, on_wakeup, NULL);
	rdmamsg_ctx_attr_set_loop(a, loop);
	if (rdmamsg_ctx_create(a, &ctx))
		bail_out("no context");
	rdmamsg_ctx_attr_delete(&a);
	return ctx;
}

/* pair -- srv listens, cli connects; both driven in fd mode */
static void pair(struct test_side *srv, struct test_side *cli)
{
	char addr[64];

	srv->cbs = &cbs;
	if (test_side_listen(srv, NULL, addr, sizeof(addr)) ||
	    rdmamsg_connect(cli->ctx, addr, NULL, &cbs, cli, &cli->ep))
		bail_out("no connection");
	test_run2(srv, cli, &cli->up, 5000);
	TEST_RUN2_WHILE(srv, cli, !srv->ep, 5000);
	if (cli->status || !srv->ep)
		bail_out("not connected");
}

/* send_n -- n messages from s to peer, numbered on from *next */
static void send_n(struct test_side *s, struct test_side *peer, uint64_t *next,
		   uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		uint64_t v = (*next)++;

		while (rdmamsg_send_imm(s->ep, &v, 8, (uint32_t)v, NULL) ==
		       -EAGAIN) {
			rdmamsg_ctx_progress(s->ctx);
			rdmamsg_ctx_progress(peer->ctx);
		}
	}
}

/* only_after_wakeup -- connecting, messages and closing endpoints and a
 * listener (steps the library defers to the next pass) run no wakeup
 * callback; rdmamsg_ctx_wakeup() calls do, once per batch */
static void only_after_wakeup(void)
{
	static struct test_side srv, cli;
	uint64_t sent = 0;
	struct pollfd p;
	int w0;

	srv.ctx = make_ctx(NULL);
	cli.ctx = make_ctx(NULL);
	pair(&srv, &cli);
	send_n(&cli, &srv, &sent, 10);
	TEST_RUN2_WHILE(&srv, &cli, srv.got < 10, 5000);
	is_int(srv.got, 10, "messages delivered");
	ok(test_side_close2(&srv, &cli, 5000), "endpoints and listener closed");
	test_idle(srv.ctx, 20);
	test_idle(cli.ctx, 20);
	is_int(wakeups, 0, "no wakeup callback without rdmamsg_ctx_wakeup()");

	w0 = wakeups;
	rdmamsg_ctx_wakeup(srv.ctx);
	rdmamsg_ctx_wakeup(srv.ctx);
	rdmamsg_ctx_get_fd(srv.ctx, &p.fd);
	p.events = POLLIN;
	is_int(rdmamsg_ctx_arm(srv.ctx), -EBUSY, "arm after a wakeup: -EBUSY");
	is_int(poll(&p, 1, 0), 1, "the fd is readable");
	rdmamsg_ctx_progress(srv.ctx);
	is_int(wakeups - w0, 1, "two wake-ups, one batch: one callback");
	is_int(rdmamsg_ctx_arm(srv.ctx), 0, "armed again");
	is_int(poll(&p, 1, 0), 0, "the fd is quiet again");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
}

#define WAKES 20000

/* waker -- call rdmamsg_ctx_wakeup() WAKES times without pause */
static void *waker(void *arg)
{
	uint64_t i;

	for (i = 1; i <= WAKES; i++) {
		__atomic_store_n(&waker_seq, i, __ATOMIC_RELEASE);
		rdmamsg_ctx_wakeup(arg);
		if (i % 1000 == 0)
			sched_yield();
	}
	return NULL;
}

/* late_waker -- one rdmamsg_ctx_wakeup() from another thread, once the
 * loop sleeps */
static void *late_waker(void *arg)
{
	usleep(100000);
	rdmamsg_ctx_wakeup(arg);
	return NULL;
}

/* cross_thread -- another thread calls rdmamsg_ctx_wakeup() while this one
 * blocks and progresses as documented and messages flow: every callback
 * runs here, and one runs after the last call (no wake-up lost) */
static void cross_thread(void)
{
	static struct test_side srv, cli;
	uint64_t sent = 0;
	long long end;
	pthread_t th;
	struct pollfd p[2];

	wakeups = 0;
	srv.ctx = make_ctx(NULL);
	cli.ctx = make_ctx(NULL);
	pair(&srv, &cli);
	rdmamsg_ctx_get_fd(srv.ctx, &p[0].fd);
	rdmamsg_ctx_get_fd(cli.ctx, &p[1].fd);
	p[0].events = p[1].events = POLLIN;
	if (pthread_create(&th, NULL, waker, srv.ctx))
		bail_out("no thread");
	end = test_now_ms() + 20000;
	while (woke_seq < WAKES && test_now_ms() < end) {
		if (sent < 2000)
			send_n(&cli, &srv, &sent, 1);
		/* block only when both say so: a lost wake-up sleeps 20 s */
		if (rdmamsg_ctx_arm(srv.ctx) == 0 &&
		    rdmamsg_ctx_arm(cli.ctx) == 0)
			poll(p, 2, (int)(end - test_now_ms()));
		rdmamsg_ctx_progress(srv.ctx);
		rdmamsg_ctx_progress(cli.ctx);
	}
	pthread_join(th, NULL);
	is_int(woke_seq, WAKES, "a callback ran after the last wake-up");
	ok(wakeups >= 1 && wakeups <= WAKES, "%d callbacks for %d wake-ups",
	   wakeups, WAKES);
	is_int(off_thread, 0, "every callback ran in the loop thread");
	is_int(srv.bad, 0, "messages intact meanwhile");
	ok(test_side_close2(&srv, &cli, 5000), "closed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
}

/* stop_in_callback -- rdmamsg_ctx_stop() from a callback (the wakeup
 * callback) makes rdmamsg_ctx_run() return with the endpoint still open;
 * a later run is not stopped by it */
static void stop_in_callback(void)
{
	static struct test_side srv, cli;

	srv.ctx = make_ctx(NULL);
	cli.ctx = make_ctx(NULL);
	pair(&srv, &cli);
	rdmamsg_ctx_wakeup(srv.ctx);
	stop_in_wakeup = 1;
	alarm(20); /* a run that never returns fails the test */
	is_int(rdmamsg_ctx_run(srv.ctx), 0, "run returns 0 after stop");
	alarm(0);
	stop_in_wakeup = 0;
	ok(!srv.disc && !cli.disc, "the connection is still up");
	ok(test_side_close2(&srv, &cli, 5000), "closed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
}

static struct rdmamsg_ctx *sig_ctx; /* the context on_sig wakes */
static volatile sig_atomic_t sig_hits;
static _Atomic int sig_done; /* the poker's stop, set by the main thread */

/* on_sig -- count; the fifth wakes the loop (the one signal-safe call) */
static void on_sig(int sig)
{
	(void)sig;
	if (++sig_hits == 5)
		rdmamsg_ctx_wakeup(sig_ctx);
}

/* sig_poker -- signal the process every 20 ms (SIGUSR1 blocked here,
 * softrdma's threads block all: the loop thread takes it) */
static void *sig_poker(void *arg)
{
	sigset_t set;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	while (!sig_done) {
		kill(getpid(), SIGUSR1);
		usleep(20000);
	}
	return NULL;
}

/* signals_in_run -- signals whose handler lacks SA_RESTART interrupt
 * rdmamsg_ctx_run()'s poll(); the run goes on through them (EINTR is not
 * an error: rdmamsg_ctx_create(3)) and a handler's rdmamsg_ctx_wakeup()
 * reaches the wakeup callback, whose rdmamsg_ctx_stop() ends it */
static void signals_in_run(void)
{
	static struct test_side srv, cli;
	struct sigaction sa;
	pthread_t th;
	int r;

	srv.ctx = make_ctx(NULL);
	cli.ctx = make_ctx(NULL);
	pair(&srv, &cli);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sig_ctx = srv.ctx;
	sig_hits = 0;
	sig_done = 0;
	wakeups = 0;
	stop_in_wakeup = 1;
	alarm(20); /* a run that never returns fails the test */
	if (pthread_create(&th, NULL, sig_poker, NULL))
		bail_out("no thread");
	r = rdmamsg_ctx_run(srv.ctx);
	sig_done = 1;
	pthread_join(th, NULL);
	alarm(0);
	stop_in_wakeup = 0;
	sa.sa_handler = SIG_IGN;
	sigaction(SIGUSR1, &sa, NULL);
	is_int(r, 0, "signals without SA_RESTART: run returns 0 when stopped");
	ok(sig_hits >= 5 && wakeups == 1,
	   "it ran through 4 signals, the 5th's wake-up stopped it (%d, %d)",
	   (int)sig_hits, wakeups);
	ok(!srv.disc && !cli.disc, "the connection is still up");
	ok(test_side_close2(&srv, &cli, 5000), "closed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
}

/* et_wait -- drive a and b from an edge-triggered epoll set over their
 * fds (as mio and other edge-triggered loops do) until *n reaches want:
 * block only once both arms said 0; 1 when a wait slept 5 s through work
 * (a lost wake-up) */
static int et_wait(int epfd, struct test_side *a, struct test_side *b,
		   volatile uint64_t *n, uint64_t want)
{
	struct epoll_event ev[2];

	while (*n < want) {
		if (rdmamsg_ctx_arm(a->ctx) == 0 &&
		    rdmamsg_ctx_arm(b->ctx) == 0 &&
		    epoll_wait(epfd, ev, 2, 5000) == 0)
			return 1;
		rdmamsg_ctx_progress(a->ctx);
		rdmamsg_ctx_progress(b->ctx);
	}
	return 0;
}

/* edge_triggered -- the arm/wait/progress protocol loses no wake-up when
 * the caller's epoll watches the fds edge-triggered: messages each way,
 * one at a time and in bursts, and a cross-thread wake-up */
static void edge_triggered(void)
{
	static struct test_side srv, cli;
	struct epoll_event e = {.events = EPOLLIN | EPOLLET};
	uint64_t to_srv = 0, to_cli = 0, i;
	int epfd, fd, stalls = 0, w0;
	pthread_t th;

	srv.ctx = make_ctx(NULL);
	cli.ctx = make_ctx(NULL);
	pair(&srv, &cli);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	rdmamsg_ctx_get_fd(srv.ctx, &fd);
	e.data.fd = fd;
	epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
	rdmamsg_ctx_get_fd(cli.ctx, &fd);
	e.data.fd = fd;
	epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
	for (i = 0; i < 600 && !stalls; i++) {
		uint64_t k = 1 + (i % 5 == 0 ? 40 : 0);

		send_n(&cli, &srv, &to_srv, k);
		stalls += et_wait(epfd, &srv, &cli, &srv.got, to_srv);
		send_n(&srv, &cli, &to_cli, 1);
		stalls += et_wait(epfd, &srv, &cli, &cli.got, to_cli);
	}
	is_int(stalls, 0, "edge-triggered: no wait slept through a message");
	is_int(srv.got, to_srv, "edge-triggered: every message to the server");
	is_int(cli.got, to_cli, "edge-triggered: every message to the client");
	is_int(srv.bad + cli.bad, 0, "edge-triggered: in order");

	w0 = wakeups;
	woke_seq = 0;
	__atomic_store_n(&waker_seq, 0, __ATOMIC_RELAXED);
	pthread_create(&th, NULL, waker, srv.ctx);
	{
		/* woke_seq is what the callback saw: wait for the last */
		volatile uint64_t *seen = &woke_seq;

		stalls += et_wait(epfd, &srv, &cli, seen, WAKES);
	}
	pthread_join(th, NULL);
	is_int(stalls, 0, "edge-triggered: a callback after the last wake-up");
	ok(wakeups > w0, "edge-triggered: %d callbacks", wakeups - w0);
	close(epfd);
	ok(test_side_close2(&srv, &cli, 5000), "edge-triggered: closed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
}

#define FLOOD_MS 1500 /* the flooder sends for this long */

static int flooder_ready; /* the flooder's endpoint is up */

/* flooder_req -- the flooder accepts one connection, sends no credit back
 * faster than the peer allows (4096 of them) */
static void flooder_req(struct rdmamsg_listener *l,
			struct rdmamsg_conn_req *req, const void *pdata,
			size_t len, void *arg)
{
	struct test_side *s = arg;

	(void)l;
	(void)pdata;
	(void)len;
	if (s->ep || rdmamsg_conn_req_accept(req, NULL, &cbs, s, &s->ep))
		rdmamsg_conn_req_reject(req, 0, NULL, 0);
	else
		flooder_ready = 1;
}

/* flooder -- a process that sends 8-byte messages as fast as its peer's
 * credits let it, for FLOOD_MS, then waits for the peer to close */
static int flooder(int wfd, void *arg)
{
	static struct test_side s;
	struct rdmamsg_listener *lst;
	uint64_t v = 0;
	long long end;
	int ret;

	(void)arg;
	if (rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	if (test_listen_report(s.ctx, flooder_req, &s, &lst, wfd))
		return 11;
	if (!test_run_until(s.ctx, &flooder_ready, 10000) ||
	    !test_run_until(s.ctx, &s.up, 10000))
		return 12;
	end = test_now_ms() + FLOOD_MS;
	while (test_now_ms() < end && !s.disc) {
		ret = rdmamsg_send_imm(s.ep, &v, 8, (uint32_t)v, NULL);
		if (ret == -EAGAIN)
			rdmamsg_ctx_progress(s.ctx);
		else if (ret)
			return 13;
		else
			v++;
	}
	test_run_until(s.ctx, &s.disc, 20000);
	rdmamsg_ep_close(s.ep, test_side_on_close);
	rdmamsg_listener_close(lst, NULL);
	test_run_until(s.ctx, &s.closed, 10000);
	test_idle(s.ctx, 50);
	if (!s.closed || rdmamsg_ctx_destroy(&s.ctx))
		return 14;
	return 0;
}

/* on_flood -- the flooded endpoint's messages, in order, each taking the
 * receiver a few microseconds: the flooder outruns it, so the CQ is never
 * empty while the flood lasts */
static void on_flood(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct timespec t0, t;

	on_recv_cb(ep, data, len, imm, flags, arg);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec <
	       3000);
}

static const struct rdmamsg_ep_cbs flood_cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_flood,
	.on_disconnect = test_side_on_disconnect,
};

static uint64_t pongs; /* echoes back at the second endpoint's client */

/* on_echo -- the flooded context echoes its second endpoint's messages */
static void on_echo(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	(void)flags;
	(void)arg;
	if (len == 8)
		rdmamsg_send_imm(ep, data, 8, imm, NULL);
}

/* on_pong -- the second endpoint's client counts the echoes */
static void on_pong(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	(void)ep;
	(void)data;
	(void)len;
	(void)imm;
	(void)flags;
	(void)arg;
	pongs++;
}

static const struct rdmamsg_ep_cbs echo_cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_echo,
	.on_disconnect = test_side_on_disconnect,
};

static const struct rdmamsg_ep_cbs pong_cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_pong,
	.on_disconnect = test_side_on_disconnect,
};

/* flood_fair -- a peer that floods one endpoint of a context (packed
 * small messages, every credit of a deep receive queue, faster than the
 * receiver takes them) starves nothing in the caller's loop: each
 * rdmamsg_ctx_progress() call is bounded (a pass has a budget), so the
 * caller's own timer in the same poll() is served, and the context's
 * other endpoint goes on.  Its round trips share the CQ with the flood
 * and wait behind what is in it (first in, first out, as on an HCA): how
 * many complete during the flood is reported, not judged. */
static void flood_fair(void)
{
	static struct test_side fl, srv, cli;
	struct rdmamsg_ep_attr *a = test_ep_attr(8192, 65536);
	struct itimerspec its = {{0, 10000000}, {0, 10000000}};
	uint64_t pings = 0, flood0, exp, g0, most = 0, during;
	long long t, last, end, max_pass = 0, max_turn = 0;
	struct pollfd p[3];
	char addr[64];
	pid_t pid;
	int rfd, tfd;

	pid = test_fork_server(flooder, NULL, &rfd, addr, sizeof(addr));
	srv.ctx = make_ctx(NULL);
	cli.ctx = make_ctx(NULL);
	fl.ctx = srv.ctx;
	/* every credit the flooder can get: many completions per pass */
	rdmamsg_ep_attr_set_recv_depth(a, 4096);
	is_int(rdmamsg_connect(srv.ctx, addr, a, &flood_cbs, &fl, &fl.ep), 0,
	       "flood: connect to the flooder");
	rdmamsg_ep_attr_delete(&a);
	srv.cbs = &echo_cbs;
	if (test_side_listen(&srv, NULL, addr, sizeof(addr)) ||
	    rdmamsg_connect(cli.ctx, addr, NULL, &pong_cbs, &cli, &cli.ep))
		bail_out("no second endpoint");
	test_run2(&srv, &cli, &cli.up, 5000);
	test_run_until(srv.ctx, &fl.up, 5000);
	ok(fl.up && !fl.status && cli.up && !cli.status,
	   "flood: both endpoints up");
	/* wait for the flood to start */
	end = test_now_ms() + 5000;
	while (fl.got < 1000 && test_now_ms() < end)
		rdmamsg_ctx_progress(srv.ctx);
	flood0 = fl.got;

	/* 1 s of the documented loop over both contexts' fds and the
	 * caller's own 10 ms timer */
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	timerfd_settime(tfd, 0, &its, NULL);
	rdmamsg_ctx_get_fd(srv.ctx, &p[0].fd);
	rdmamsg_ctx_get_fd(cli.ctx, &p[1].fd);
	p[2].fd = tfd;
	p[0].events = p[1].events = p[2].events = POLLIN;
	last = test_now_ms();
	end = last + 1000;
	while (test_now_ms() < end) {
		/* one round trip at a time on the second endpoint */
		if (pongs == pings &&
		    rdmamsg_send_imm(cli.ep, &pings, 8, (uint32_t)pings,
				     NULL) == 0)
			pings++;
		if (rdmamsg_ctx_arm(srv.ctx) == 0 &&
		    rdmamsg_ctx_arm(cli.ctx) == 0)
			poll(p, 3, 100);
		else
			poll(&p[2], 1, 0);
		/* the caller's turn: its timer is served now */
		if (p[2].revents & POLLIN && read(tfd, &exp, sizeof(exp)) < 0)
			diag("timerfd: %s", strerror(errno));
		t = test_now_ms();
		if (t - last > max_turn)
			max_turn = t - last;
		last = t;
		g0 = fl.got;
		rdmamsg_ctx_progress(srv.ctx);
		if (fl.got - g0 > most)
			most = fl.got - g0;
		if (test_now_ms() - t > max_pass)
			max_pass = test_now_ms() - t;
		rdmamsg_ctx_progress(cli.ctx);
	}
	close(tfd);
	during = pongs;
	diag("in 1 s: %llu flooded messages, at most %llu in a pass, "
	     "longest pass %lld ms, longest wait for a turn %lld ms, "
	     "%llu round trips on the other endpoint",
	     (unsigned long long)(fl.got - flood0), (unsigned long long)most,
	     max_pass, max_turn, (unsigned long long)during);
	ok(fl.got - flood0 > 10000, "flood: the flood went on");
	/* the budget: 2,048 completions, or as many messages of packs (the
	 * last full batch may take it past by 32 packs of 128) */
	ok(most <= 2048 + 32 * 128, "flood: at most %llu messages in a pass",
	   (unsigned long long)most);
	ok(max_turn < (tap_small() ? 5000 : 1000),
	   "flood: the caller's own timer got its turns");
	TEST_RUN2_WHILE(&srv, &cli, pongs < pings, 20000);
	is_int(pongs, pings, "flood: the other endpoint's round trips done");
	is_int(fl.bad, 0, "flood: in order");
	rdmamsg_ep_close(fl.ep, test_side_on_close);
	test_run_until(srv.ctx, &fl.closed, 20000);
	ok(fl.closed, "flood: flooded endpoint closed");
	is_int(test_wait_child(pid), 0, "flood: the flooder exits cleanly");
	close(rfd);
	ok(test_side_close2(&srv, &cli, 5000), "flood: closed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
}

static int group_closed; /* group_run's group closed */

/* on_group_closed -- group_run's close callback */
static void on_group_closed(struct rdmamsg_group *g, void *arg)
{
	(void)g;
	(void)arg;
	group_closed = 1;
}

/* group_run -- a multicast group alone keeps rdmamsg_ctx_run() going
 * (until stopped), and run returns once its close callback ran */
static void group_run(void)
{
	static const struct rdmamsg_group_cbs gcbs;
	struct rdmamsg_group *g;
	struct rdmamsg_ctx *ctx = make_ctx(NULL);
	long long t0;
	pthread_t th;
	int w0 = wakeups;

	is_int(rdmamsg_group_join(ctx, "239.1.2.91", NULL, &gcbs, NULL, &g), 0,
	       "group: joined");
	stop_in_wakeup = 1;
	pthread_create(&th, NULL, late_waker, ctx);
	t0 = test_now_ms();
	alarm(20);
	is_int(rdmamsg_ctx_run(ctx), 0, "group: run returns 0 when stopped");
	alarm(0);
	pthread_join(th, NULL);
	stop_in_wakeup = 0;
	ok(test_now_ms() - t0 >= 90 && wakeups - w0 == 1,
	   "group: run lasted until the wake-up stopped it (%lld ms)",
	   test_now_ms() - t0);
	is_int(rdmamsg_group_close(g, on_group_closed), 0, "group: close");
	alarm(20);
	is_int(rdmamsg_ctx_run(ctx), 0, "group: run returns by itself");
	alarm(0);
	ok(group_closed, "group: once its close callback ran");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "group: context destroyed");
	wakeups = w0;
}

#define STORM 200 /* connection requests at once */

static int reqs, reqs_in_pass; /* requests taken; in the current pass */
static struct test_side storm_srv[STORM]; /* the accepted endpoints' */

/* on_storm_req -- accept every request, counting them */
static void on_storm_req(struct rdmamsg_listener *l,
			 struct rdmamsg_conn_req *req, const void *pdata,
			 size_t len, void *arg)
{
	struct rdmamsg_ep **eps = arg;

	(void)l;
	(void)pdata;
	(void)len;
	if (reqs >= STORM ||
	    rdmamsg_conn_req_accept(req, NULL, &cbs, &storm_srv[reqs],
				    &eps[reqs]))
		rdmamsg_conn_req_reject(req, 0, NULL, 0);
	reqs++;
	reqs_in_pass++;
}

static int storm_closed, storm_lclosed;

/* on_storm_close -- count the closed endpoints */
static void on_storm_close(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	storm_closed++;
}

/* on_storm_lclose -- the listener's close callback (its argument is the
 * array of accepted endpoints, no struct test_side) */
static void on_storm_lclose(struct rdmamsg_listener *l, void *arg)
{
	(void)l;
	(void)arg;
	storm_lclosed = 1;
}

/* connect_storm -- STORM connection requests queued at once are taken a
 * bounded number per rdmamsg_ctx_progress() call, the rest in the passes
 * after it (arm says -EBUSY meanwhile), and every one gets in */
static void connect_storm(void)
{
	static struct rdmamsg_ep *sep[STORM], *cep[STORM];
	static struct test_side cs[STORM];
	struct test_side srv = {0}, cli = {0};
	int i, up = 0, most = 0, busy = 1;
	uint16_t port = 0;
	char addr[64];
	long long end;

	srv.ctx = make_ctx(NULL);
	cli.ctx = make_ctx(NULL);
	if (rdmamsg_listen(srv.ctx, "127.0.0.1:0", on_storm_req, sep,
			   &srv.lst) ||
	    rdmamsg_listener_get_port(srv.lst, &port))
		bail_out("no listener");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	for (i = 0; i < STORM; i++) {
		cs[i].ctx = cli.ctx;
		if (rdmamsg_connect(cli.ctx, addr, NULL, &cbs, &cs[i], &cep[i]))
			bail_out("connect %d", i);
	}
	/* only the clients run: their requests queue at the listener */
	end = test_now_ms() + 1000;
	while (test_now_ms() < end)
		rdmamsg_ctx_progress(cli.ctx);
	end = test_now_ms() + 20000;
	while (test_now_ms() < end) {
		reqs_in_pass = 0;
		rdmamsg_ctx_progress(srv.ctx);
		if (reqs_in_pass > most)
			most = reqs_in_pass;
		if (reqs_in_pass && reqs < STORM &&
		    rdmamsg_ctx_arm(srv.ctx) != -EBUSY)
			busy = 0;
		rdmamsg_ctx_progress(cli.ctx);
		for (up = 0, i = 0; i < STORM; i++)
			up += cs[i].up && !cs[i].status;
		if (up == STORM)
			break;
	}
	diag("%d requests, at most %d in a pass", reqs, most);
	is_int(up, STORM, "storm: every connection up");
	ok(most <= 64, "storm: at most 64 requests in a pass (%d)", most);
	ok(busy, "storm: arm says -EBUSY while requests wait");
	for (i = 0; i < STORM; i++) {
		rdmamsg_ep_close(cep[i], on_storm_close);
		if (sep[i])
			rdmamsg_ep_close(sep[i], on_storm_close);
	}
	rdmamsg_listener_close(srv.lst, on_storm_lclose);
	TEST_RUN2_WHILE(&srv, &cli, storm_closed < 2 * STORM || !storm_lclosed,
			20000);
	is_int(storm_closed, 2 * STORM, "storm: every endpoint closed");
	ok(storm_lclosed, "storm: the listener closed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
}

static int iterations; /* libev loop iterations (a check watcher) */
static int timer_fired;

/* on_check -- count the loop's iterations */
static void on_check(struct ev_loop *loop, ev_check *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	iterations++;
}

/* on_timer -- the program's own watcher: note that it ran, end the run
 * (the open endpoints keep it alive) */
static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	timer_fired = 1;
	ev_timer_stop(loop, w);
	ev_break(loop, EVBREAK_ONE);
}

/* ev_run_for -- run loop until a timer of ms ends it: 1 if ev_run()
 * lasted until that timer (was not ended by the library) */
static int ev_run_for(struct ev_loop *loop, int ms)
{
	ev_timer t;

	timer_fired = 0;
	ev_timer_init(&t, on_timer, ms / 1000.0, 0.);
	ev_timer_start(loop, &t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &t);
	return timer_fired;
}

/* libev_mode -- two contexts in one libev loop that the program drives
 * with ev_run() itself */
static void libev_mode(void)
{
	static struct test_side srv, cli;
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	uint64_t sent = 0;
	char addr[64];
	ev_check chk;
	long long t0;

	srv.ctx = make_ctx(loop);
	cli.ctx = make_ctx(loop);
	ev_check_init(&chk, on_check);
	ev_check_start(loop, &chk);
	ev_unref(loop); /* counts, keeps nothing alive */
	srv.cbs = &cbs;
	if (test_side_listen(&srv, NULL, addr, sizeof(addr)) ||
	    rdmamsg_connect(cli.ctx, addr, NULL, &cbs, &cli, &cli.ep))
		bail_out("no connection");
	while (!cli.up || !srv.ep)
		ev_run(loop, EVRUN_ONCE);
	is_int(cli.status, 0, "libev: connected");

	/* idle, connected: the loop blocks */
	iterations = 0;
	ok(ev_run_for(loop, 200), "libev: ev_run() lasts while idle");
	ok(iterations < 20, "libev: %d iterations in 200 ms idle", iterations);

	/* another thread's wake-up while ev_run() sleeps: the callback runs
	 * in this thread and stops the run */
	{
		pthread_t th;
		int w0 = wakeups;

		stop_in_wakeup = 1;
		pthread_create(&th, NULL, late_waker, srv.ctx);
		ok(!ev_run_for(loop, 10000),
		   "libev: a wake-up from another thread ended the sleep");
		pthread_join(th, NULL);
		stop_in_wakeup = 0;
		is_int(wakeups - w0, 1, "libev: its callback ran once");
		is_int(off_thread, 0, "libev: in the loop thread");
		wakeups = w0;
	}

	/* a callback stops the run: this ev_run() returns, and the next one
	 * is not ended again by the library */
	send_n(&cli, &srv, &sent, 1);
	stop_in_recv = 1;
	alarm(20);
	ev_run(loop, 0);
	alarm(0);
	stop_in_recv = 0;
	is_int(srv.got, 1, "libev: stopped by the receive callback");
	send_n(&cli, &srv, &sent, 5);
	ok(ev_run_for(loop, 200), "libev: a later ev_run() is not stopped");
	is_int(srv.got, 6, "libev: the later messages arrived");

	/* everything closed: ev_run() returns without ev_break() */
	rdmamsg_ep_close(cli.ep, test_side_on_close);
	rdmamsg_ep_close(srv.ep, test_side_on_close);
	rdmamsg_listener_close(srv.lst, test_side_on_lclose);
	t0 = test_now_ms();
	alarm(20);
	ev_run(loop, 0);
	alarm(0);
	ok(cli.closed && srv.closed && srv.lclosed,
	   "libev: ev_run() returned once all closed");
	ok(test_now_ms() - t0 < 5000, "libev: in %lld ms", test_now_ms() - t0);
	is_int(wakeups, 0, "libev: no wakeup callback");
	ev_ref(loop);
	ev_check_stop(loop, &chk);
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "libev: server destroyed");
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "libev: client destroyed");
	ev_loop_destroy(loop);
}

int main(void)
{
	/* softrdma: no timed progress-thread passes to hide a lost wake-up
	 * (other fabrics ignore it) */
	setenv("SOFTRDMA_TEST_NOSWEEP", "1", 1);
	test_setup("loopwake");
	loop_thread = pthread_self();
	flood_fair(); /* first: it forks, before this process has threads */
	only_after_wakeup();
	cross_thread();
	stop_in_callback();
	signals_in_run();
	edge_triggered();
	group_run();
	connect_storm();
	wakeups = 0;
	libev_mode();
	return done_testing();
}
