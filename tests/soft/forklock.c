/* SPDX-License-Identifier: MIT */
/*
 * forklock.c -- fork() while another thread holds one of softrdma's
 * process-private locks.  A busy thread runs one verb in a loop; it is
 * parked inside it, holding the lock it is about to release
 * (tests/park.h), and meanwhile the main thread forks.  The child opens
 * a device of its own, creates a CQ and a QP and registers memory.  fork() must wait for the lock (softrdma's prepare handler) so
 * that the child finds every lock free; before soft/fork.c the child hung
 * for good.  The verbs park the thread on three locks: ibv_open_device
 * on the registry's local lock, ibv_create_qp on the QPN table,
 * ibv_reg_mr on the list of shareable registrations.
 *
 * Last, the one lock whose holder may not let it go: the busy thread
 * brings a UD QP up on the network path (SOFTRDMA_NET=1, in a network
 * namespace of our own) and forks the host's agent holding the network
 * path's lock, parked just before that fork (this program's fork), while
 * the main thread forks.  The child must bring a UD QP up on a network
 * path of its own.  (Before glibc 2.36 the agent's fork then waits for
 * glibc's fork lock, held by the main thread's fork through our
 * handlers, which must go on without the network path's lock; 2.36 lets
 * that lock go while a handler runs, so here either way works.)
 */
#define _GNU_SOURCE
#include "config.h"

#include "../tap.h"
#include "../park.h"
#include "common.h"

enum verb { V_OPEN, V_QP, V_MR, V_NET };

static struct tctx pt;
static enum verb busy_verb;
static atomic_int fork_armed;

/* fork -- softrdma's forks of the host's agent come here first: the busy
 * thread, once armed, parks before it forks */
__attribute__((visibility("default"))) pid_t fork(void)
{
	static pid_t (*real_fork)(void);
	int park = park_me && atomic_exchange(&fork_armed, 0);

	if (!real_fork)
		real_fork = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
	if (park) {
		atomic_store(&park_parked, 1);
		usleep(300000);
	}
	return real_fork();
}

/* ud_up -- a UD QP on t, up (on the network path: the agent, if none) */
static struct ibv_qp *ud_up(struct tctx *t)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = t->cq;
	a.qp_type = IBV_QPT_UD;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	qp = ibv_create_qp(t->pd, &a);
	if (qp && t_ud_up(qp, 0x11111111)) {
		ibv_destroy_qp(qp);
		qp = NULL;
	}
	return qp;
}

/* busy -- run the verb until stopped */
static void *busy(void *arg)
{
	char buf[64];

	(void)arg;
	park_me = 1;
	while (!atomic_load(&park_stop)) {
		if (busy_verb == V_OPEN) {
			struct tctx t;

			if (!t_open(&t, 4))
				t_close(&t);
		} else if (busy_verb == V_QP || busy_verb == V_NET) {
			struct ibv_qp *qp = busy_verb == V_QP
						    ? t_rc_qp(&pt, 4, NULL)
						    : ud_up(&pt);

			if (qp)
				ibv_destroy_qp(qp);
		} else {
			struct ibv_mr *mr = ibv_reg_mr(pt.pd, buf, sizeof(buf),
						       IBV_ACCESS_LOCAL_WRITE);

			if (mr)
				ibv_dereg_mr(mr);
		}
	}
	return NULL;
}

/* child -- a device of its own, with a QP and a registration (and a UD
 * QP on the network path: NET) */
static int child(int net)
{
	struct tctx t;
	struct ibv_qp *qp, *ud = NULL;
	struct ibv_mr *mr;
	char buf[64];

	if (t_open(&t, 16))
		return 1;
	qp = t_rc_qp(&t, 16, NULL);
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!qp || !mr)
		return 2;
	if (net && !(ud = ud_up(&t)))
		return 3;
	if (ud)
		ibv_destroy_qp(ud);
	ibv_dereg_mr(mr);
	ibv_destroy_qp(qp);
	t_close(&t);
	return 0;
}

static int child_plain(void)
{
	return child(0);
}

static int child_net(void)
{
	return child(1);
}

/* run -- fork while the busy thread holds a lock in verb v; the child's
 * value (park_fork) */
static int run(enum verb v)
{
	busy_verb = v;
	park_reset();
	atomic_store(v == V_NET ? &fork_armed : &park_armed, 1);
	return park_run(busy, v == V_NET ? child_net : child_plain);
}

int main(void)
{
	static const char *const what[] = {"ibv_open_device", "ibv_create_qp",
					   "ibv_reg_mr"};
	int v, netns;

	alarm(120); /* a fork that deadlocks fails here */
	netns = !t_own_netns();
	if (netns)
		setenv("SOFTRDMA_NET", "1", 1);
	t_isolate("forklock");
	if (t_open(&pt, 16))
		bail_out("open");
	if (!park_in("libsoftrdma"))
		bail_out("libsoftrdma not found among the loaded objects");
	for (v = V_OPEN; v <= V_MR; v++) {
		int r = run((enum verb)v);

		ok(r == 0,
		   "forked while a thread held a lock in %s: the child opens "
		   "a device, creates a QP, registers memory (%s %d)",
		   what[v], r < 0 ? "hung" : "returned", r);
	}
	if (!netns) {
		skip_one("no user and network namespace here");
	} else {
		int r = run(V_NET);

		ok(r == 0,
		   "forked while a thread forked the host's agent holding the "
		   "network path's lock: the child brings a UD QP up there too "
		   "(%s %d)",
		   r < 0 ? "hung" : "returned", r);
	}
	t_close(&pt);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
