/* SPDX-License-Identifier: MIT */
/* common.c -- helpers for the softrdma verbs tests */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

static char prefix[96];

/* t_isolate -- private shm names for this test run */
void t_isolate(const char *name)
{
	snprintf(prefix, sizeof(prefix), "t-%s-%d", name, (int)getpid());
	setenv("SOFTRDMA_SHM_PREFIX", prefix, 1);
}

/* t_shm_count -- /dev/shm entries of this run */
int t_shm_count(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	size_t n = strlen(prefix);
	int c = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, n))
			c++;
	closedir(d);
	return c;
}

/* t_fd_count -- open fds of this process */
int t_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int c = 0;

	if (!d)
		return -1;
	while (readdir(d))
		c++;
	closedir(d);
	return c - 3; /* ".", "..", the DIR's own fd */
}

/* t_open -- device context, PD and one CQ */
int t_open(struct tctx *t, int cqe)
{
	struct ibv_device **l = ibv_get_device_list(NULL);

	memset(t, 0, sizeof(*t));
	if (!l || !l[0])
		return -1;
	t->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!t->ctx)
		return -1;
	t->pd = ibv_alloc_pd(t->ctx);
	t->cq = ibv_create_cq(t->ctx, cqe, NULL, NULL, 0);
	return t->pd && t->cq ? 0 : -1;
}

void t_close(struct tctx *t)
{
	if (t->cq)
		ibv_destroy_cq(t->cq);
	if (t->pd)
		ibv_dealloc_pd(t->pd);
	if (t->ctx)
		ibv_close_device(t->ctx);
	memset(t, 0, sizeof(*t));
}

/* t_side_open -- share's context or a new one, a CQ, len bytes and MR */
int t_side_open(struct tside *s, const struct tctx *share, int cqe, size_t len)
{
	memset(s, 0, sizeof(*s));
	if (share)
		s->t = *share;
	else if (t_open(&s->t, 16))
		return -1;
	s->own = !share;
	s->cq = ibv_create_cq(s->t.ctx, cqe, NULL, NULL, 0);
	s->buf = calloc(1, len);
	if (!s->cq || !s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->t.pd, s->buf, len, IBV_ACCESS_LOCAL_WRITE);
	return s->mr ? 0 : -1;
}

/* t_side_close -- what t_side_open made (the context if its own) */
void t_side_close(struct tside *s)
{
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->own)
		t_close(&s->t);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

/* t_side_qp -- an RC QP on s's CQ for both queues, with cap */
struct ibv_qp *t_side_qp(struct tside *s, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap = *cap;
	ia.send_cq = ia.recv_cq = s->cq;
	errno = 0;
	qp = ibv_create_qp(s->t.pd, &ia);
	*cap = ia.cap;
	return qp;
}

/* t_side_connect -- each side's QP towards the other's */
int t_side_connect(struct tside *a, struct tside *b)
{
	if (t_connect(a->qp, b->qp->qp_num, 0, 12, 7, 14, 7) ||
	    t_connect(b->qp, a->qp->qp_num, 0, 12, 7, 14, 7))
		return -1;
	return 0;
}

/* t_fill -- byte i of seed's pattern at p[i] */
void t_fill(char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (char)(seed * 31 + i * 7 + 1);
}

/* t_filled -- 1 if p holds n bytes of seed's pattern */
int t_filled(const char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (char)(seed * 31 + i * 7 + 1))
			return 0;
	return 1;
}

/* t_rc_qp -- an RC QP on t's CQ */
struct ibv_qp *t_rc_qp(struct tctx *t, int depth, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = t->cq;
	a.recv_cq = t->cq;
	a.srq = srq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = (uint32_t)depth;
	a.cap.max_recv_wr = (uint32_t)depth;
	a.cap.max_send_sge = 4;
	a.cap.max_recv_sge = 4;
	a.cap.max_inline_data = 64;
	return ibv_create_qp(t->pd, &a);
}

/* t_connect -- RESET->INIT->RTR->RTS towards dest_qpn on this host */
int t_connect(struct ibv_qp *qp, uint32_t dest_qpn, int access,
	      int min_rnr_timer, int rnr_retry, int timeout, int retry_cnt)
{
	union ibv_gid g;

	/* GID index 1 is ::ffff:127.0.0.1, one of this host's */
	if (ibv_query_gid(qp->context, 1, 1, &g))
		return -1;
	return t_connect_gid(qp, dest_qpn, &g, access, min_rnr_timer, rnr_retry,
			     timeout, retry_cnt);
}

int t_qp_init(struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = access;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
}

int t_qp_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

void t_rtr_attr(struct ibv_qp_attr *a, uint32_t dest_qpn,
		const union ibv_gid *dgid)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = dest_qpn;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.sgid_index = 1;
	a->ah_attr.grh.hop_limit = 1;
	a->ah_attr.grh.dgid = *dgid;
	a->ah_attr.port_num = 1;
}

/* t_connect_gid -- t_connect towards (dgid, dest_qpn) */
int t_connect_gid(struct ibv_qp *qp, uint32_t dest_qpn,
		  const union ibv_gid *dgid, int access, int min_rnr_timer,
		  int rnr_retry, int timeout, int retry_cnt)
{
	struct ibv_qp_attr a;
	int r;

	r = t_qp_init(qp, access);
	if (r)
		return r;
	t_rtr_attr(&a, dest_qpn, dgid);
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = (uint8_t)min_rnr_timer;
	r = ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER);
	if (r)
		return r;
	return t_qp_rts(qp, rnr_retry, timeout, retry_cnt);
}

/* t_qp_rts -- RTR->RTS with the retries and timeout given */
int t_qp_rts(struct ibv_qp *qp, int rnr_retry, int timeout, int retry_cnt)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)timeout;
	a.retry_cnt = (uint8_t)retry_cnt;
	a.rnr_retry = (uint8_t)rnr_retry;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

long long t_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int t_ud_up(struct ibv_qp *qp, uint32_t qkey)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = qkey;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

int t_find_gid(struct ibv_context *ctx, const uint8_t *pfx, size_t n)
{
	struct ibv_port_attr pa;
	union ibv_gid g;
	int i;

	if (ibv_query_port(ctx, 1, &pa))
		return -1;
	for (i = 0; i < pa.gid_tbl_len; i++)
		if (!ibv_query_gid(ctx, 1, i, &g) && !memcmp(g.raw, pfx, n))
			return i;
	return -1;
}

int t_uc_up(struct ibv_qp *qp, uint32_t dqpn, int access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = access;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	ibv_query_gid(qp->context, 1, 1, &a.ah_attr.grh.dgid);
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* t_wait -- poll cq until n completions or ms elapse */
int t_wait(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms)
{
	long long end = t_now_ms() + ms;
	int got = 0, r;

	while (got < n) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			return got;
		got += r;
		if (!r && t_now_ms() > end)
			break;
	}
	return got;
}

/* t_xrcd -- see common.h */
struct ibv_xrcd *t_xrcd(struct ibv_context *c, int fd, int oflags)
{
	struct ibv_xrcd_init_attr a;

	memset(&a, 0, sizeof(a));
	a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	a.fd = fd;
	a.oflags = oflags;
	errno = 0;
	return ibv_open_xrcd(c, &a);
}

/* t_xsrq -- see common.h */
struct ibv_srq *t_xsrq(struct tctx *t, struct ibv_xrcd *x, struct ibv_cq *cq,
		       uint32_t mask, uint32_t max_wr)
{
	struct ibv_srq_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.comp_mask = mask;
	a.srq_type = IBV_SRQT_XRC;
	a.attr.max_wr = max_wr;
	a.attr.max_sge = 1;
	a.pd = t->pd;
	a.xrcd = x;
	a.cq = cq;
	errno = 0;
	return ibv_create_srq_ex(t->ctx, &a);
}

/* t_post -- one WR with one SGE */
int t_post(struct ibv_qp *qp, enum ibv_wr_opcode op, void *buf, uint32_t len,
	   uint32_t lkey, uint64_t wr_id, int flags, uint64_t raddr,
	   uint32_t rkey)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = (unsigned)flags;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

int t_post_recv(struct ibv_qp *qp, void *buf, uint32_t len, uint32_t lkey,
		uint64_t wr_id)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_recv(qp, &wr, &bad);
}

int t_post_srq_recv(struct ibv_srq *srq, void *buf, uint32_t len, uint32_t lkey,
		    uint64_t wr_id)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_srq_recv(srq, &wr, &bad);
}

struct ibv_srq *t_srq_filled(struct tctx *t, uint32_t max_wr, char *buf,
			     uint32_t len, int n, uint32_t lkey, uint32_t limit)
{
	struct ibv_srq_init_attr sa;
	struct ibv_srq_attr la;
	struct ibv_srq *srq;
	int i;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = max_wr;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(t->pd, &sa);
	for (i = 0; srq && i < n; i++)
		if (t_post_srq_recv(srq, buf + (size_t)i * len, len, lkey,
				    (uint64_t)i))
			goto fail;
	memset(&la, 0, sizeof(la));
	la.srq_limit = limit;
	if (srq && limit && ibv_modify_srq(srq, &la, IBV_SRQ_LIMIT))
		goto fail;
	return srq;
fail:
	ibv_destroy_srq(srq);
	return NULL;
}

int t_async(struct ibv_context *ctx, int ms, struct ibv_async_event *ev)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	struct ibv_async_event e;

	if (poll(&p, 1, ms) != 1 || ibv_get_async_event(ctx, &e))
		return -1;
	ibv_ack_async_event(&e);
	if (ev)
		*ev = e;
	return (int)e.event_type;
}

int t_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

void t_xsend(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		exit(3);
}

void t_xrecv(int fd, void *p, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read(fd, (char *)p + got, n - got);
		if (r <= 0)
			exit(3);
		got += (size_t)r;
	}
}

pid_t t_spawn(int (*fn)(int rfd, int wfd), int *rfd, int *wfd)
{
	int p2c[2], c2p[2];
	pid_t pid;

	if (pipe(p2c) || pipe(c2p))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		close(p2c[1]);
		close(c2p[0]);
		_exit(fn(p2c[0], c2p[1]));
	}
	close(p2c[0]);
	close(c2p[1]);
	*rfd = c2p[0];
	*wfd = p2c[1];
	return pid;
}

int t_pid_gone(pid_t pid)
{
	char path[64], buf[512], *s;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	s = strrchr(buf, ')');
	return s && (s[2] == 'Z' || s[2] == 'X');
}

int t_reap(pid_t pid)
{
	int st, i;

	for (i = 0; i < 6000; i++) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st)
					     : 1000 + WTERMSIG(st);
		if (w < 0)
			return -2;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

int t_fork_reap(int (*fn)(void))
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -3;
	if (!pid)
		exit(fn());
	return t_reap(pid);
}

/* t_bind2 -- post a signalled type 2 bind of mw on qp (wr_id 0xb2) */
int t_bind2(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey,
	    struct ibv_mr *mr, uint64_t addr, uint64_t len, int access)
{
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xb2;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = (unsigned)access;
	return ibv_post_send(qp, &wr, &bad);
}

/* t_reg_map -- the host registry of this run, len bytes mapped (NULL: none
 * yet, or no mapping) */
void *t_reg_map(size_t len)
{
	char name[160];
	void *p;
	int fd;

	snprintf(name, sizeof(name), "/%s-registry",
		 getenv("SOFTRDMA_SHM_PREFIX"));
	fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/* t_seg_map -- QP qpn's shm segment of this run, mapped writable, its
 * size in *len (NULL: none, or no mapping) */
void *t_seg_map(uint32_t qpn, size_t *len)
{
	char name[160];
	struct stat st;
	void *p;
	int fd;

	snprintf(name, sizeof(name), "/%s-qp-%u", getenv("SOFTRDMA_SHM_PREFIX"),
		 (unsigned)qpn);
	fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	close(fd);
	*len = (size_t)st.st_size;
	return p == MAP_FAILED ? NULL : p;
}

/* t_can_map -- the kernel (or valgrind) offers pidfd_open(2), which a
 * peer needs to map a shareable registration (valgrind 3.19 has none:
 * softrdma then copies with process_vm_* or its queues) */
int t_can_map(void)
{
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* put -- write s to path */
static int put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* t_own_netns -- a user and network namespace of our own, lo up */
int t_own_netns(void)
{
	struct ifreq ifr;
	char m[64];
	uid_t uid = getuid();
	gid_t gid = getgid();
	int fd, r;

	if (unshare(CLONE_NEWUSER | CLONE_NEWNET))
		return -1;
	snprintf(m, sizeof(m), "0 %u 1", (unsigned int)uid);
	if (put("/proc/self/uid_map", m))
		return -1;
	(void)put("/proc/self/setgroups", "deny");
	snprintf(m, sizeof(m), "0 %u 1", (unsigned int)gid);
	if (put("/proc/self/gid_map", m))
		return -1;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	r = ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	r = r || ioctl(fd, SIOCSIFFLAGS, &ifr);
	close(fd);
	return r ? -1 : 0;
}
