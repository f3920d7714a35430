/* SPDX-License-Identifier: MIT */
/*
 * cm_eintr.c -- signals during rdma_cm's blocking calls, as the kernel
 * serves them.  rdma_get_cm_event on a blocking channel is a write() to
 * /dev/infiniband/rdma_cm whose ucma_get_event sleeps in
 * wait_event_interruptible: a signal whose handler lacks SA_RESTART makes
 * it fail with EINTR and consumes nothing (the next call returns the
 * event); with SA_RESTART the call restarts unseen.  rdma_get_request and
 * the synchronous calls wait in rdma_get_cm_event (librdmacm's
 * ucma_complete) and fail the same way.  An O_NONBLOCK channel answers
 * EAGAIN at once.  The signal is sent to the process (kill), not to the
 * thread: it must reach the program's thread, never softrdma's.
 *
 * A poker thread (tests/sigpoke.h) signals the process every 20 ms; when
 * the waiter is still blocked after its deadline it makes the event the
 * waiter waits for, so a waiter that swallows the signal fails instead of
 * hanging.  alarm() bounds the whole run.  Also: a fork while a thread
 * waits (test_fork).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include "../tap.h"
#include "../sigpoke.h"
#include "cm_util.h"

/* resolve -- queue ADDR_RESOLVED on the id's channel */
static void resolve(void *arg)
{
	struct sockaddr_in dst = cmt_sin(1);

	if (rdma_resolve_addr(arg, NULL, (struct sockaddr *)&dst, 2000))
		diag("rdma_resolve_addr: %s", strerror(errno));
}

/* test_get_event -- rdma_get_cm_event interrupted, restarted, O_NONBLOCK */
static void test_get_event(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id = NULL;
	struct poker p = {.event = resolve};
	int r, e, fl;

	if (!ok(ch && !rdma_create_id(ch, &id, NULL, RDMA_PS_TCP),
		"a channel and an id"))
		return;
	p.arg = id;

	/* no SA_RESTART: -1/EINTR, nothing consumed */
	sigpoke_handler(0);
	poker_run(&p, 3000, 3000);
	r = rdma_get_cm_event(ch, &ev);
	e = errno;
	poker_stop(&p);
	ok(r == -1 && e == EINTR,
	   "no SA_RESTART: rdma_get_cm_event fails with EINTR (got %d, %s)", r,
	   r ? strerror(e) : "an event");
	ok(sigpoke_hits > 0, "the program's handler ran");
	if (!r) {
		rdma_ack_cm_event(ev);
	} else {
		resolve(id);
		alarm(30);
		r = rdma_get_cm_event(ch, &ev);
		ok(!r && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED,
		   "the next call gets the event");
		if (!r)
			rdma_ack_cm_event(ev);
	}

	/* SA_RESTART: the wait goes on unseen */
	rdma_destroy_id(id);
	id = NULL;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("rdma_create_id");
	p.arg = id;
	sigpoke_handler(1);
	poker_run(&p, 300, 400);
	alarm(30);
	r = rdma_get_cm_event(ch, &ev);
	e = errno;
	poker_stop(&p);
	ok(!r && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED && sigpoke_hits > 0,
	   "SA_RESTART: restarted, the event comes (%d, %s, %d signals)", r,
	   r ? strerror(e) : rdma_event_str(ev->event), (int)sigpoke_hits);
	if (!r)
		rdma_ack_cm_event(ev);

	/* O_NONBLOCK: EAGAIN at once, then the event */
	fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	r = rdma_get_cm_event(ch, &ev);
	e = errno;
	ok(r == -1 && e == EAGAIN, "O_NONBLOCK: EAGAIN with nothing queued");
	rdma_destroy_id(id);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("rdma_create_id");
	resolve(id);
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED,
	   "O_NONBLOCK: the event after it");
	if (ev)
		rdma_ack_cm_event(ev);
	fcntl(ch->fd, F_SETFL, fl);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

struct client {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	uint16_t port;
};

/* client_connect -- a connection request to the listener */
static void client_connect(void *arg)
{
	struct client *c = arg;
	struct rdma_conn_param cp;

	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x1234; /* no QP */
	if (cmt_resolve(c->id, c->ch, c->port) || rdma_connect(c->id, &cp))
		diag("client: %s", strerror(errno));
}

/* test_get_request -- a synchronous listener's rdma_get_request */
static void test_get_request(void)
{
	struct sockaddr_in sin = cmt_sin(0);
	struct client c = {.ch = rdma_create_event_channel()};
	struct poker p = {.event = client_connect, .arg = &c};
	struct rdma_cm_id *l = NULL, *req = NULL;
	int r, e;

	if (!ok(c.ch && !rdma_create_id(NULL, &l, NULL, RDMA_PS_TCP) &&
			!rdma_bind_addr(l, (struct sockaddr *)&sin) &&
			!rdma_listen(l, 4) &&
			!rdma_create_id(c.ch, &c.id, NULL, RDMA_PS_TCP),
		"a synchronous listener and a client"))
		return;
	c.port = ntohs(rdma_get_src_port(l));
	sigpoke_handler(0);
	poker_run(&p, 3000, 3000);
	r = rdma_get_request(l, &req);
	e = errno;
	poker_stop(&p);
	ok(r == -1 && e == EINTR,
	   "no SA_RESTART: rdma_get_request fails with EINTR (got %d, %s)", r,
	   r ? strerror(e) : "a request");
	if (r) {
		client_connect(&c);
		alarm(30);
		r = rdma_get_request(l, &req);
	}
	ok(!r && req, "the next call gets the request");
	if (!r)
		rdma_reject(req, NULL, 0);
	rdma_destroy_id(c.id);
	if (!r)
		rdma_destroy_id(req);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(c.ch);
}

#define NIDS 40

static struct rdma_cm_id *ids[NIDS];
static int seen[NIDS], nseen, eintrs, bad;
static pthread_mutex_t seen_m = PTHREAD_MUTEX_INITIALIZER;

/* taker -- get events until all NIDS came, going on after EINTR */
static void *taker(void *arg)
{
	struct rdma_cm_event *ev;
	sigset_t s;
	int i, r;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	for (;;) {
		pthread_mutex_lock(&seen_m);
		r = nseen == NIDS;
		pthread_mutex_unlock(&seen_m);
		if (r)
			break;
		if (rdma_get_cm_event(arg, &ev)) {
			pthread_mutex_lock(&seen_m);
			if (errno == EINTR)
				eintrs++;
			else
				bad++;
			pthread_mutex_unlock(&seen_m);
			continue;
		}
		pthread_mutex_lock(&seen_m);
		for (i = 0; i < NIDS && ids[i] != ev->id; i++)
			;
		if (i == NIDS || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
			bad++;
		else
			seen[i]++;
		nseen++;
		pthread_mutex_unlock(&seen_m);
		rdma_ack_cm_event(ev);
	}
	return NULL;
}

/* test_two_waiters -- two threads wait on one channel while signals
 * interrupt them: every event is delivered once, none lost */
static void test_two_waiters(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct poker p = {.event = NULL};
	pthread_t th[2];
	sigset_t s, old;
	int i, once = 1;

	sigpoke_handler(0);
	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, &old); /* the takers get them */
	if (!ch || pthread_create(&th[0], NULL, taker, ch) ||
	    pthread_create(&th[1], NULL, taker, ch))
		bail_out("channel, threads");
	poker_run(&p, 20000, 20000);
	for (i = 0; i < NIDS; i++) {
		if (rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP))
			bail_out("rdma_create_id");
		resolve(ids[i]);
		if (i % 4 == 0)
			usleep(5000);
	}
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	poker_stop(&p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (i = 0; i < NIDS; i++)
		once = once && seen[i] == 1;
	ok(once && nseen == NIDS && !bad,
	   "two waiters, signals: each of %d events once (%d taken, %d bad)",
	   NIDS, nseen, bad);
	ok(eintrs > 0, "the waiters saw EINTR (%d)", eintrs);
	for (i = 0; i < NIDS; i++)
		rdma_destroy_id(ids[i]);
	rdma_destroy_event_channel(ch);
}

/* the waiter's returns (1 while it waits) and errnos, polled by the test */
static _Atomic int dead_ret = 1, dead_errno, again_ret = 1, again_errno;

/* dead_waiter -- block on a channel that is destroyed under it; once
 * out, call again as a CM thread's loop does after EINTR */
static void *dead_waiter(void *arg)
{
	struct rdma_cm_event *ev;
	int r;

	r = rdma_get_cm_event(arg, &ev);
	dead_errno = errno;
	dead_ret = r;
	r = rdma_get_cm_event(arg, &ev);
	again_errno = errno;
	again_ret = r;
	return NULL;
}

/* test_destroyed -- a waiter on a channel destroyed under it stays
 * blocked (librdmacm's sleeps on in ucma_get_event, the file held by its
 * write) until a signal without SA_RESTART ends its wait: -1/EINTR; a
 * call after that is librdmacm's write() to the closed fd: EBADF */
static void test_destroyed(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	long long t0;
	pthread_t th;

	sigpoke_handler(0);
	if (!ch || pthread_create(&th, NULL, dead_waiter, ch))
		bail_out("channel, thread");
	usleep(100000); /* let it block */
	rdma_destroy_event_channel(ch);
	usleep(100000);
	ok(dead_ret == 1, "the waiter on the destroyed channel still waits");
	t0 = cmt_now_ms();
	while (dead_ret == 1 && cmt_now_ms() - t0 < 3000) {
		pthread_kill(th, SIGUSR1);
		usleep(20000);
	}
	ok(dead_ret == -1 && dead_errno == EINTR,
	   "a signal ends its wait with EINTR (%d, %s)", dead_ret,
	   dead_ret == 1 ? "still blocked" : strerror(dead_errno));
	t0 = cmt_now_ms();
	while (dead_ret != 1 && again_ret == 1 && cmt_now_ms() - t0 < 2000)
		usleep(10000);
	ok(again_ret == -1 && again_errno == EBADF,
	   "a call after the destroy fails with EBADF (%d, %s)", again_ret,
	   again_ret == 1 ? "blocked" : strerror(again_errno));
	if (again_ret != 1)
		pthread_join(th, NULL);
	else
		pthread_detach(th);
}

struct refuser {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *req;
};

/* refuse -- the listener takes the request it held and rejects it */
static void refuse(void *arg)
{
	struct refuser *r = arg;
	struct rdma_cm_event *ev;

	if (r->req)
		return;
	ev = cmt_expect(r->ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	if (!ev)
		return;
	r->req = ev->id;
	rdma_ack_cm_event(ev);
	rdma_reject(r->req, NULL, 0);
}

/* test_sync_connect -- rdma_connect of an id without a channel waits
 * for the reply in rdma_get_cm_event (librdmacm's ucma_complete): a
 * listener that holds the request unanswered, a signal: -1/EINTR */
static void test_sync_connect(void)
{
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_conn_param cp;
	struct rdma_cm_id *l = NULL, *c = NULL;
	struct refuser rf = {.ch = rdma_create_event_channel()};
	struct poker p = {.event = refuse, .arg = &rf};
	int r, e;

	if (!ok(rf.ch && !rdma_create_id(rf.ch, &l, NULL, RDMA_PS_TCP) &&
			!rdma_bind_addr(l, (struct sockaddr *)&sin) &&
			!rdma_listen(l, 4) &&
			!rdma_create_id(NULL, &c, NULL, RDMA_PS_TCP),
		"a listener and an id without a channel"))
		return;
	sin.sin_port = rdma_get_src_port(l);
	r = rdma_resolve_addr(c, NULL, (struct sockaddr *)&sin, 2000) ||
	    rdma_resolve_route(c, 2000);
	ok(!r, "synchronous resolve_addr and resolve_route");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x1234; /* no QP */
	sigpoke_handler(0);
	poker_run(&p, 3000, 3000);
	/* the request reaches the listener, which holds it */
	r = rdma_connect(c, &cp);
	e = errno;
	poker_stop(&p);
	ok(r == -1 && e == EINTR,
	   "no SA_RESTART: a synchronous rdma_connect fails with EINTR "
	   "(got %d, %s)",
	   r, r ? strerror(e) : "connected");
	refuse(&rf);
	ok(rf.req != NULL, "the listener held the request");
	rdma_destroy_id(c);
	if (rf.req)
		rdma_destroy_id(rf.req);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(rf.ch);
}

static _Atomic int fw_ret = 1; /* the waiter's return, 1 until it has one */
static struct rdma_cm_event *fw_ev;

/* fork_waiter -- one blocking rdma_get_cm_event */
static void *fork_waiter(void *arg)
{
	fw_ret = rdma_get_cm_event(arg, (struct rdma_cm_event **)&fw_ev);
	return NULL;
}

/* fork_child -- a channel and an id of the child's own get their event */
static int fork_child(void)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	alarm(20);
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return 1;
	resolve(id);
	if (rdma_get_cm_event(ch, &ev) ||
	    ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
		return 2;
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* test_fork -- fork while another thread waits in rdma_get_cm_event:
 * the child's own CM works (no lock held across the wait), and the
 * parent's waiter gets its event afterwards */
static void test_fork(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	long long t0;
	pthread_t th;
	pid_t pid;
	int st = -1;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    pthread_create(&th, NULL, fork_waiter, ch))
		bail_out("channel, id, thread");
	usleep(100000); /* let it block */
	pid = fork();
	if (!pid)
		_exit(fork_child());
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "fork during a wait: the child's CM works (status %d)", st);
	resolve(id);
	t0 = cmt_now_ms();
	while (fw_ret == 1 && cmt_now_ms() - t0 < 5000)
		usleep(10000);
	ok(fw_ret == 0 && fw_ev->event == RDMA_CM_EVENT_ADDR_RESOLVED,
	   "the parent's waiter gets its event");
	if (fw_ret == 1)
		bail_out("the waiter is stuck");
	pthread_join(th, NULL);
	if (!fw_ret)
		rdma_ack_cm_event(fw_ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	alarm(60);
	test_get_event();
	alarm(60);
	test_get_request();
	alarm(60);
	test_sync_connect();
	alarm(60);
	test_two_waiters();
	alarm(60);
	test_fork();
	alarm(60);
	test_destroyed();
	return done_testing();
}
