/* SPDX-License-Identifier: MIT */
/*
 * fork.c -- a process forked after its parent opened softrdma.  The child
 * inherits the parent's context; rdma-core leaves its use undefined
 * without ibv_fork_init, but closing it in the child must not touch the
 * parent's registry state (its context slot, QPs, keys, segments) nor
 * wait for a progress thread that did not come along.  A device the
 * child opens is a context of its own: a message from the parent wakes
 * the child blocked on its completion channel.
 */
#include "config.h"

#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

static struct tctx pt;
static struct ibv_qp *pqp;
static struct ibv_mr *pmr;

/* child -- drop what it inherited, then receive on a context of its own */
static int child(int rfd, int wfd)
{
	struct ibv_comp_channel *ch;
	struct ibv_cq *ecq_ev;
	struct ibv_cq *ecq;
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct pollfd pfd;
	uint32_t qpn;
	char buf[64];
	void *cq_ctx;

	/* the inherited objects: closed here, still the parent's there */
	if (ibv_req_notify_cq(pt.cq, 0) != EIO)
		return 1;
	if (ibv_destroy_qp(pqp) || ibv_dereg_mr(pmr))
		return 2;
	t_close(&pt);
	if (t_open(&t, 16))
		return 3;
	ch = ibv_create_comp_channel(t.ctx);
	ecq = ch ? ibv_create_cq(t.ctx, 16, NULL, ch, 0) : NULL;
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!ecq || !mr)
		return 4;
	ibv_destroy_cq(t.cq);
	t.cq = ecq;
	qp = t_rc_qp(&t, 16, NULL);
	if (!qp)
		return 4;
	t_xrecv(rfd, &qpn, sizeof(qpn));
	if (t_connect(qp, qpn, 0, 1, 7, 14, 7))
		return 5;
	memset(buf, 0, sizeof(buf));
	t_post_recv(qp, buf, sizeof(buf), mr->lkey, 9);
	if (ibv_req_notify_cq(ecq, 0))
		return 6;
	qpn = qp->qp_num;
	t_xsend(wfd, &qpn, sizeof(qpn));
	/* blocked on the channel: the parent's SEND must wake it */
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 30000) != 1)
		return 7; /* not woken */
	if (ibv_get_cq_event(ch, &ecq_ev, &cq_ctx) || ecq_ev != ecq)
		return 8; /* woken without the event */
	ibv_ack_cq_events(ecq, 1);
	if (ibv_poll_cq(ecq, 1, &wc) != 1)
		return 9; /* the event without the completion */
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 9 || wc.byte_len != 5 ||
	    memcmp(buf, "hello", 5))
		return 10;
	t_xsend(wfd, &qpn, sizeof(qpn)); /* done: the parent may go on */
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	ibv_destroy_comp_channel(ch);
	return 0;
}

/* others_asleep -- wait (5 s at most) until every other thread of this
 * process sleeps in the kernel.  fork() copies a lock another thread
 * holds, held: glibc's malloc takes care of its own, GCC 12's ASan
 * allocator does not (no fork handler), and softrdma's progress thread,
 * started by the arm just before, allocates while it starts (ASan's
 * thread set-up).  A child forked then deadlocks at its first allocation
 * of that size.  Once asleep, the thread's passes allocate nothing. */
static int others_asleep(void)
{
	int tries = 5000;
	pid_t self = (pid_t)syscall(SYS_gettid);
	char path[300], buf[256], *p;
	struct dirent *e;
	int busy;
	DIR *d;

	do {
		busy = 0;
		d = opendir("/proc/self/task");
		if (!d)
			return 0;
		while ((e = readdir(d))) {
			FILE *f;

			if (e->d_name[0] == '.' || atoi(e->d_name) == self)
				continue;
			snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
				 e->d_name);
			f = fopen(path, "r");
			if (!f)
				continue;
			p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')')
						       : NULL;
			fclose(f);
			if (!p || p[1] != ' ' || p[2] != 'S')
				busy = 1;
		}
		closedir(d);
		if (busy)
			usleep(1000);
	} while (busy && --tries > 0);
	return !busy;
}

int main(void)
{
	struct ibv_wc wc;
	char buf[64] = "hello";
	uint32_t qpn;
	int rfd, wfd, st = 0, n;
	pid_t pid;

	t_isolate("fork");
	if (t_open(&pt, 16))
		bail_out("open");
	pmr = ibv_reg_mr(pt.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	pqp = t_rc_qp(&pt, 16, NULL);
	/* an armed CQ: the context has a progress thread */
	if (!pmr || !pqp || ibv_req_notify_cq(pt.cq, 0))
		bail_out("setup");
	if (!others_asleep())
		diag("the progress thread is still busy: forking anyway");
	pid = t_spawn(child, &rfd, &wfd);
	if (pid < 0)
		bail_out("fork");
	qpn = pqp->qp_num;
	t_xsend(wfd, &qpn, sizeof(qpn));
	t_xrecv(rfd, &qpn, sizeof(qpn));
	ok(t_connect(pqp, qpn, 0, 1, 7, 14, 7) == 0,
	   "the parent's QP survives the child closing its inherited copy");
	t_post(pqp, IBV_WR_SEND, buf, 5, pmr->lkey, 1, IBV_SEND_SIGNALED, 0, 0);
	n = t_wait(pt.cq, &wc, 1, 30000);
	ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1,
	   "SEND from the parent to the child's own context completes");
	/* the child's "done" (it may have failed instead: its status says
	 * where) */
	if (read(rfd, &qpn, sizeof(qpn)) != (ssize_t)sizeof(qpn))
		diag("the child went without its done");
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "child: inherited context refuses to arm (EIO), closes without "
	   "touching ours; its own context is woken by our SEND (exit %d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	ibv_destroy_qp(pqp);
	ibv_dereg_mr(pmr);
	t_close(&pt);
	close(rfd);
	close(wfd);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
