/* SPDX-License-Identifier: MIT */
/*
 * cm_registry.c -- softrdma's host registry (issue 9):
 * - another uid pre-creates the registry with mode 0666 (a squatter that
 *   would read our keys and fill our tables): we refuse it (EACCES), and
 *   so we do a registry of ours that group or others may open;
 * - two processes in different mount namespaces (different /dev/shm, so
 *   different registries) pass the CM handshake on loopback but could
 *   exchange nothing: the connection fails as an unreachable path does
 *   (UNREACHABLE, -ETIMEDOUT) and the listener reports no request.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <infiniband/verbs.h>

#include "../tap.h"
#include "cm_util.h"

#define PREFIX "cmreg-test"
#define REG    "/" PREFIX "-registry"

/* open_dev -- open softrdma's device; NULL with errno on failure */
static struct ibv_context *open_dev(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = NULL;

	if (l && l[0])
		c = ibv_open_device(l[0]);
	else
		errno = ENODEV;
	if (l) {
		int e = errno;

		ibv_free_device_list(l);
		errno = e;
	}
	return c;
}

/* squat -- a process of uid (gid) creates the registry name, mode */
static int squat(uid_t uid, mode_t mode)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid) {
		int fd;

		if (uid &&
		    (setresgid(uid, uid, uid) || setresuid(uid, uid, uid)))
			_exit(2);
		umask(0);
		fd = shm_open(REG, O_RDWR | O_CREAT | O_EXCL, mode);
		if (fd < 0 || ftruncate(fd, 64 << 20))
			_exit(3);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* test_squatter -- foreign or open registries are never used */
static void test_squatter(void)
{
	struct ibv_context *c;
	struct stat st;
	int fd;

	ok(!squat(65534, 0666), "uid 65534 creates the registry, mode 0666");
	errno = 0;
	c = open_dev();
	ok(!c && errno == EACCES, "a foreign registry is refused: EACCES");
	if (c)
		ibv_close_device(c);
	fd = shm_open(REG, O_RDONLY, 0);
	ok(fd >= 0 && !fstat(fd, &st) && st.st_uid == 65534 &&
		   (st.st_mode & 0777) == 0666,
	   "it was left alone (not reused, not changed)");
	if (fd >= 0)
		close(fd);
	shm_unlink(REG);

	ok(!squat(0, 0666), "our own uid, but mode 0666");
	errno = 0;
	c = open_dev();
	ok(!c && errno == EACCES, "a registry others may open is refused");
	if (c)
		ibv_close_device(c);
	shm_unlink(REG);

	c = open_dev();
	ok(c != NULL, "with the name free: a registry of our own");
	fd = shm_open(REG, O_RDONLY, 0);
	ok(fd >= 0 && !fstat(fd, &st) && st.st_uid == geteuid() &&
		   !(st.st_mode & 077),
	   "created by us, mode 0600");
	if (fd >= 0)
		close(fd);
	if (c)
		ibv_close_device(c);
}

/* far_client -- in a mount namespace of its own with a /dev/shm of its
 * own, connect to the port read from pfd; exit 0 if the connection fails
 * as an unreachable path does */
static int far_client(int pfd)
{
	struct rdma_event_channel *ch;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint16_t port;
	int ret = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (unshare(CLONE_NEWNS) ||
	    mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) ||
	    mount("cmreg-far", "/dev/shm", "tmpfs", 0, "mode=1777"))
		return 10;
	if (read(pfd, &port, sizeof(port)) != sizeof(port))
		return 11;
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(id, ch, port))
		return 12;
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x999;
	if (rdma_connect(id, &cp))
		return 13;
	ev = cmt_wait(ch, 20000);
	if (!ev || ev->event != RDMA_CM_EVENT_UNREACHABLE ||
	    ev->status != -ETIMEDOUT) {
		fprintf(stderr, "# far client: %s %d\n",
			ev ? rdma_event_str(ev->event) : "no event",
			ev ? ev->status : 0);
		ret = 14;
	}
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return ret;
}

/* test_namespaces -- peers with different /dev/shm do not connect */
static void test_namespaces(void)
{
	struct rdma_event_channel *ch;
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l;
	int p[2], st;
	uint16_t port;
	pid_t pid;

	/* the child must not inherit our registry mapping: fork first */
	if (pipe(p))
		bail_out("pipe");
	pid = fork();
	if (!pid) {
		close(p[1]);
		_exit(far_client(p[0]));
	}
	close(p[0]);
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 8))
		bail_out("listener");
	port = ntohs(rdma_get_src_port(l));
	if (write(p[1], &port, sizeof(port)) != sizeof(port))
		bail_out("write");
	close(p[1]);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "another /dev/shm: UNREACHABLE, -ETIMEDOUT (status %d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	ev = cmt_wait(ch, 200);
	ok(!ev, "the listener reported no request");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_destroy_id(l), "destroy listener");
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	if (geteuid())
		skip_all("needs root (setresuid, unshare, mount)");
	setenv("SOFTRDMA_SHM_PREFIX", PREFIX, 1);
	shm_unlink(REG);
	test_squatter();
	test_namespaces();
	return done_testing();
}
