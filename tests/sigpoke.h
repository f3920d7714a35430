/* SPDX-License-Identifier: MIT */
/*
 * sigpoke.h -- a poker thread for the tests of signals during blocking
 * calls (tests/soft/eintr.c, tests/cm/cm_eintr.c): with SIGUSR1 blocked in
 * itself, it signals the process every 20 ms for a while; if the waiter
 * is still blocked at its deadline it makes the event the waiter waits
 * for, so a waiter that swallows the signal fails instead of hanging.
 * The program's SIGUSR1 handler counts the signals in sigpoke_hits.
 */
#ifndef RDMAMSG_TESTS_SIGPOKE_H
#define RDMAMSG_TESTS_SIGPOKE_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* SIGUSR1's count: lock-free atomics are signal-safe, and the handler may
 * run on several threads at once */
static _Atomic int sigpoke_hits;
static _Atomic int sigpoke_done; /* the poker's stop, set by the waiter */

/* sigpoke_count -- SIGUSR1's handler: count the signal */
static void sigpoke_count(int sig)
{
	(void)sig;
	atomic_fetch_add_explicit(&sigpoke_hits, 1, memory_order_relaxed);
}

/* sigpoke_handler -- SIGUSR1's handler, with or without SA_RESTART; the
 * count back to 0 */
static inline void sigpoke_handler(int restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sigpoke_count;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigpoke_hits = 0;
}

struct poker {
	pthread_t thr;
	int sig_ms;   /* how long to signal */
	int event_ms; /* when to make the event (if still waited for) */
	void (*event)(void *); /* NULL: none */
	void *arg;
};

static inline long long sigpoke_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* sigpoke_main -- signal the process until done or sig_ms, then the
 * event */
static void *sigpoke_main(void *arg)
{
	struct poker *p = arg;
	long long t0 = sigpoke_now_ms();
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	while (!sigpoke_done && sigpoke_now_ms() - t0 < p->event_ms) {
		if (sigpoke_now_ms() - t0 < p->sig_ms)
			kill(getpid(), SIGUSR1);
		usleep(20000);
	}
	if (!sigpoke_done && p->event)
		p->event(p->arg);
	return NULL;
}

/* poker_run -- start P: signals for SIG_MS, its event at EVENT_MS */
static inline void poker_run(struct poker *p, int sig_ms, int event_ms)
{
	p->sig_ms = sig_ms;
	p->event_ms = event_ms;
	sigpoke_done = 0;
	if (pthread_create(&p->thr, NULL, sigpoke_main, p))
		bail_out("pthread_create");
}

/* poker_stop -- the waiter returned: stop P and join it */
static inline void poker_stop(struct poker *p)
{
	sigpoke_done = 1;
	pthread_join(p->thr, NULL);
}

#endif
