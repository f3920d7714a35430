/* SPDX-License-Identifier: MIT */
/*
 * forklock.c -- fork() while another thread holds one of softrdma's
 * process-private locks.  A busy thread runs one verb in a loop; it is
 * parked inside it, holding the lock it is about to release (this
 * program's pthread_mutex_unlock, which softrdma's calls reach first,
 * sleeps there for 300 ms), and meanwhile the main thread forks.  The
 * child opens a device of its own, creates a CQ and a QP and registers
 * memory.  fork() must wait for the lock (softrdma's prepare handler) so
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

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

enum verb { V_OPEN, V_QP, V_MR, V_NET };

static struct tctx pt;
static enum verb busy_verb;
static atomic_int stop, armed, fork_armed, forked;
static atomic_uintptr_t parked; /* the lock the busy thread holds, or 0 */
static __thread int is_busy;
static uintptr_t soft_lo, soft_hi; /* libsoftrdma's image */
static int (*real_unlock)(pthread_mutex_t *);

/* pthread_mutex_unlock -- softrdma's unlocks come here first: the busy
 * thread, once armed, parks before releasing a lock that lives in
 * libsoftrdma's image (a process-private one; the shared ones live in
 * /dev/shm), then waits until the main thread has forked (exported:
 * the build hides symbols by default) */
__attribute__((visibility("default"))) int pthread_mutex_unlock(
	pthread_mutex_t *m)
{
	uintptr_t a = (uintptr_t)m;
	int park = is_busy && a >= soft_lo && a < soft_hi &&
		   atomic_exchange(&armed, 0);
	int r;

	if (!real_unlock)
		real_unlock = (int (*)(pthread_mutex_t *))dlsym(
			RTLD_NEXT, "pthread_mutex_unlock");
	if (park) {
		atomic_store(&parked, a);
		usleep(300000);
	}
	r = real_unlock(m);
	/* asleep while the child is made: GCC 12's ASan allocator has no
	 * fork handler, so a thread allocating then would leave its lock
	 * held in the child */
	while (park && !atomic_load(&forked))
		usleep(1000);
	return r;
}

/* fork -- softrdma's forks of the host's agent come here first: the busy
 * thread, once armed, parks before it forks */
__attribute__((visibility("default"))) pid_t fork(void)
{
	static pid_t (*real_fork)(void);
	int park = is_busy && atomic_exchange(&fork_armed, 0);

	if (!real_fork)
		real_fork = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
	if (park) {
		atomic_store(&parked, 1);
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

/* find_soft -- dl_iterate_phdr: the address range of libsoftrdma */
static int find_soft(struct dl_phdr_info *info, size_t size, void *arg)
{
	int i;

	(void)size;
	(void)arg;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libsoftrdma"))
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type != PT_LOAD)
			continue;
		if (!soft_lo || lo < soft_lo)
			soft_lo = lo;
		if (lo + p->p_memsz > soft_hi)
			soft_hi = lo + p->p_memsz;
	}
	return 1;
}

/* busy -- run the verb until stopped */
static void *busy(void *arg)
{
	char buf[64];

	(void)arg;
	is_busy = 1;
	while (!atomic_load(&stop)) {
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

/* run -- fork while the busy thread holds a lock in verb v; the child's
 * exit status, or -1 if it did not finish in 10 s */
static int run(enum verb v)
{
	pthread_t th;
	int i, st = 0, ret = -1;
	pid_t pid;

	busy_verb = v;
	atomic_store(&stop, 0);
	atomic_store(&forked, 0);
	atomic_store(&parked, 0);
	atomic_store(v == V_NET ? &fork_armed : &armed, 1);
	if (pthread_create(&th, NULL, busy, NULL))
		bail_out("pthread_create");
	for (i = 0; i < 5000 && !atomic_load(&parked); i++)
		usleep(1000);
	if (!atomic_load(&parked))
		bail_out("the busy thread never reached its lock");
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (!pid)
		_exit(child(v == V_NET));
	atomic_store(&forked, 1);
	for (i = 0; i < 1000; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			ret = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
			break;
		}
		usleep(10000);
	}
	if (ret < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	return ret;
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
	dl_iterate_phdr(find_soft, NULL);
	if (!soft_hi)
		bail_out("libsoftrdma not found among the loaded objects");
	for (v = V_OPEN; v <= V_MR; v++) {
		int r = run((enum verb)v);

		ok(r == 0,
		   "forked while a thread held a lock in %s: the child opens "
		   "a device, creates a QP, registers memory (%s %d)",
		   what[v], r < 0 ? "hung" : "exit", r);
	}
	if (!netns) {
		skip_one("no user and network namespace here");
	} else {
		int r = run(V_NET);

		ok(r == 0,
		   "forked while a thread forked the host's agent holding the "
		   "network path's lock: the child brings a UD QP up there too "
		   "(%s %d)",
		   r < 0 ? "hung" : "exit", r);
	}
	t_close(&pt);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
