/* SPDX-License-Identifier: MIT */
/* common.h -- helpers for the softrdma verbs tests */
#ifndef SOFT_TEST_COMMON_H
#define SOFT_TEST_COMMON_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tctx {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

/* one side of a two-QP test: a context (its own, or another side's), a
 * CQ, one buffer under one MR, an RC QP */
struct tside {
	struct tctx t;
	int own; /* t opened by t_side_open */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

/* t_isolate -- private shm names for this test run */
void t_isolate(const char *name);
/* t_shm_count -- /dev/shm entries of this run (leak check) */
int t_shm_count(void);
/* t_own_netns -- a user and network namespace of our own, lo up (before
 * any thread: unshare) */
int t_own_netns(void);
/* t_open -- device context, PD and one CQ */
int t_open(struct tctx *t, int cqe);
void t_close(struct tctx *t);
/* t_rc_qp -- an RC QP on t's CQ */
struct ibv_qp *t_rc_qp(struct tctx *t, int depth, struct ibv_srq *srq);
/* t_connect -- RESET->INIT->RTR->RTS towards dest_qpn */
int t_connect(struct ibv_qp *qp, uint32_t dest_qpn, int access,
	      int min_rnr_timer, int rnr_retry, int timeout, int retry_cnt);
/* t_qp_init -- RESET->INIT on port 1 with access */
int t_qp_init(struct ibv_qp *qp, int access);
/* t_qp_err -- to ERR from any state (ibv_modify_qp's return) */
int t_qp_err(struct ibv_qp *qp);
/* t_qp_rts -- RTR->RTS with rnr_retry, timeout and retry_cnt (SQ PSN 0,
 * one read or atomic in flight) */
int t_qp_rts(struct ibv_qp *qp, int rnr_retry, int timeout, int retry_cnt);
/* t_rtr_attr -- *a zeroed, then INIT->RTR's towards (dgid, dest_qpn): MTU
 * 1024, an AV through GID 1 of port 1 */
void t_rtr_attr(struct ibv_qp_attr *a, uint32_t dest_qpn,
		const union ibv_gid *dgid);
/* t_connect_gid -- the same towards (dgid, dest_qpn) */
int t_connect_gid(struct ibv_qp *qp, uint32_t dest_qpn,
		  const union ibv_gid *dgid, int access, int min_rnr_timer,
		  int rnr_retry, int timeout, int retry_cnt);
/* t_ud_up -- RESET->INIT->RTR->RTS for a UD QP with qkey, port 1 */
int t_ud_up(struct ibv_qp *qp, uint32_t qkey);
/* t_uc_up -- RESET->INIT->RTR->RTS for a UC QP towards dqpn on this
 * host's ::ffff:127.0.0.1 (GID 1), with access flags */
int t_uc_up(struct ibv_qp *qp, uint32_t dqpn, int access);
/* t_find_gid -- the index of port 1's first GID that starts with the n
 * bytes at pfx, or -1 */
int t_find_gid(struct ibv_context *ctx, const uint8_t *pfx, size_t n);
/* t_now_ms -- CLOCK_MONOTONIC in milliseconds */
long long t_now_ms(void);
/* t_wait -- poll cq until n completions or ms elapse; returns count */
int t_wait(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms);
/* t_post_send -- one SEND-style WR with one SGE */
int t_post(struct ibv_qp *qp, enum ibv_wr_opcode op, void *buf, uint32_t len,
	   uint32_t lkey, uint64_t wr_id, int flags, uint64_t raddr,
	   uint32_t rkey);
int t_post_recv(struct ibv_qp *qp, void *buf, uint32_t len, uint32_t lkey,
		uint64_t wr_id);
/* t_post_srq_recv -- one receive of one SGE on srq; ibv_post_srq_recv's
 * result */
int t_post_srq_recv(struct ibv_srq *srq, void *buf, uint32_t len, uint32_t lkey,
		    uint64_t wr_id);
/* t_xrcd -- ibv_open_xrcd of fd (-1: a private domain) with oflags;
 * errno 0 unless it failed */
struct ibv_xrcd *t_xrcd(struct ibv_context *c, int fd, int oflags);
/* the attributes an XRC SRQ needs (t_xsrq) */
#define T_XSRQ_MASK                                      \
	(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | \
	 IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ)
/* t_xsrq -- an XRC SRQ of x on t's PD completing on cq, max_wr receives
 * of one SGE, made with comp_mask mask (T_XSRQ_MASK: all it needs);
 * errno 0 unless it failed */
struct ibv_srq *t_xsrq(struct tctx *t, struct ibv_xrcd *x, struct ibv_cq *cq,
		       uint32_t mask, uint32_t max_wr);
/* t_srq_filled -- an SRQ of max_wr WQEs (one SGE each) holding n
 * receives of len bytes at buf + i * len (wr_id i), its limit armed at
 * limit (0: none); NULL if any of it failed */
struct ibv_srq *t_srq_filled(struct tctx *t, uint32_t max_wr, char *buf,
			     uint32_t len, int n, uint32_t lkey,
			     uint32_t limit);
/* t_async -- the next async event of ctx within ms, acked (a copy in *ev
 * unless NULL): its type, or -1 */
int t_async(struct ibv_context *ctx, int ms, struct ibv_async_event *ev);
int t_qp_state(struct ibv_qp *qp);
/* t_fd_count -- open fds of this process */
int t_fd_count(void);
/* pipe exchange between forked peers */
void t_xsend(int fd, const void *p, size_t n);
void t_xrecv(int fd, void *p, size_t n);
/* t_spawn -- fork a child running fn(rfd, wfd) on two pipes; the parent's
 * ends in *rfd (what the child writes) and *wfd; -1 on failure */
pid_t t_spawn(int (*fn)(int rfd, int wfd), int *rfd, int *wfd);
/* t_pid_gone -- PID has exited, or is a zombie its parent has not reaped
 * yet (softrdma counts it gone too: soft/shm.c soft_pid_start), which
 * kill(PID, 0) does not tell */
int t_pid_gone(pid_t pid);
/* t_reap -- PID's exit status within 60 s (1000 + the signal that ended
 * it; -1: it did not end, killed; -2: no such child) */
int t_reap(pid_t pid);
/* t_fork_reap -- fork (stdout flushed first); the child ends by exit(fn())
 * (destructors and atexit run, as a program's would); t_reap's value, or
 * -3 if fork failed */
int t_fork_reap(int (*fn)(void));
/* t_side_open -- share's context (NULL: one of its own), a CQ of cqe
 * entries and len zeroed bytes registered for local write; 0 or -1 */
int t_side_open(struct tside *s, const struct tctx *share, int cqe, size_t len);
void t_side_close(struct tside *s);
/* t_side_qp -- an RC QP on s's CQ with cap (what was granted written
 * back); NULL with errno set (0 before the call) */
struct ibv_qp *t_side_qp(struct tside *s, struct ibv_qp_cap *cap);
/* t_side_connect -- a's and b's QPs connected to each other; 0 or -1 */
int t_side_connect(struct tside *a, struct tside *b);
/* t_fill -- n bytes of seed's pattern; t_filled -- p holds them */
void t_fill(char *p, size_t n, unsigned seed);
int t_filled(const char *p, size_t n, unsigned seed);
/* t_bind2 -- post a signalled type 2 bind of mw over [addr, addr+len) of mr
 * with access (wr_id 0xb2); ibv_post_send's result */
int t_bind2(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey,
	    struct ibv_mr *mr, uint64_t addr, uint64_t len, int access);
/* t_reg_map -- the host registry of this run (len: its size), mapped */
void *t_reg_map(size_t len);
/* t_seg_map -- QP qpn's segment of this run, writable, its size in *len */
void *t_seg_map(uint32_t qpn, size_t *len);
/* t_can_map -- peers can map shareable registrations here (pidfd_open) */
int t_can_map(void);

#endif
