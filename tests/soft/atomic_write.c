/* SPDX-License-Identifier: MIT */
/* atomic_write.c -- RDMA atomic write (IBV_WR_ATOMIC_WRITE): the device
 * flag, ibv_wr_atomic_write and ibv_post_send, 8-byte placement at the
 * responder (same process, another process, a stopped one), and the
 * access, alignment and bad-input errors rxe gives */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

/* the kernel's IB_UVERBS_DEVICE_ATOMIC_WRITE (libibverbs 44 lacks it) */
#define DEV_ATOMIC_WRITE (1ull << 40)

static struct ibv_qp *aw_qp(struct tctx *t, enum ibv_qp_type type, uint64_t ops)
{
	struct ibv_qp_init_attr_ex qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = type;
	qa.send_cq = qa.recv_cq = t->cq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 2;
	qa.pd = t->pd;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.send_ops_flags = ops;
	return ibv_create_qp_ex(t->ctx, &qa);
}

/* aw -- one signaled atomic write through the qp_ex builder */
static int aw(struct ibv_qp *qp, uint64_t wr_id, uint32_t rkey, uint64_t raddr,
	      uint64_t v)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);

	ibv_wr_start(x);
	x->wr_id = wr_id;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(x, rkey, raddr, &v);
	v = 0; /* the 8 bytes were taken at posting */
	return ibv_wr_complete(x);
}

static void test_local(void)
{
	struct tctx t;
	struct ibv_device_attr_ex da;
	struct ibv_qp *a, *b, *c;
	struct ibv_mr *mr, *ro;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	uint64_t *buf = aligned_alloc(64, 4096), v;
	uint64_t src = 0x1122334455667788ull;
	int i, n;

	memset(buf, 0, 4096);
	if (t_open(&t, 64))
		bail_out("open");
	memset(&da, 0, sizeof(da));
	is_int(ibv_query_device_ex(t.ctx, NULL, &da), 0, "query_device_ex");
	ok(da.device_cap_flags_ex & DEV_ATOMIC_WRITE,
	   "device_cap_flags_ex has the atomic write bit (1 << 40)");
	mr = ibv_reg_mr(t.pd, buf, 2048,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ro = ibv_reg_mr(t.pd, (char *)buf + 2048, 2048,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
				IBV_ACCESS_REMOTE_READ);
	errno = 0;
	ok(!aw_qp(&t, IBV_QPT_UD, IBV_QP_EX_WITH_ATOMIC_WRITE) &&
		   errno == EOPNOTSUPP,
	   "UD QP with WITH_ATOMIC_WRITE -> EOPNOTSUPP");
	errno = 0;
	ok(!aw_qp(&t, IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_WRITE) &&
		   errno == EOPNOTSUPP,
	   "UC QP with WITH_ATOMIC_WRITE -> EOPNOTSUPP");
	/* READ and the other atomics are RC operations too (rxe's and
	 * mlx5's supported send ops per QP type) */
	errno = 0;
	ok(!aw_qp(&t, IBV_QPT_UD,
		  IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) &&
		   errno == EOPNOTSUPP,
	   "UD QP with WITH_ATOMIC_CMP_AND_SWP -> EOPNOTSUPP");
	errno = 0;
	ok(!aw_qp(&t, IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) &&
		   errno == EOPNOTSUPP,
	   "UC QP with WITH_ATOMIC_FETCH_AND_ADD -> EOPNOTSUPP");
	errno = 0;
	ok(!aw_qp(&t, IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ) &&
		   errno == EOPNOTSUPP,
	   "UC QP with WITH_RDMA_READ -> EOPNOTSUPP");
	errno = 0;
	ok(!aw_qp(&t, IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE) &&
		   errno == EOPNOTSUPP,
	   "UD QP with WITH_RDMA_WRITE -> EOPNOTSUPP");
	c = aw_qp(&t, IBV_QPT_UC,
		  IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			  IBV_QP_EX_WITH_RDMA_WRITE |
			  IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
	ok(c != NULL, "UC QP with its sends and writes");
	if (c)
		ibv_destroy_qp(c);
	a = aw_qp(&t, IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE);
	b = aw_qp(&t, IBV_QPT_RC, IBV_QP_EX_WITH_SEND);
	ok(a && b, "RC QPs with WITH_ATOMIC_WRITE");
	if (!a || !b)
		bail_out("qp");
	t_connect(a, b->qp_num, 0, 1, 7, 14, 7);
	t_connect(b, a->qp_num, IBV_ACCESS_REMOTE_WRITE, 1, 7, 14, 7);

	/* through the builder: the 8 bytes land, nothing around them */
	memset(buf, 0xee, 64);
	is_int(aw(a, 1, mr->rkey, (uintptr_t)&buf[2], src), 0, "wr_complete");
	ok(t_wait(t.cq, &wc, 1, 30000) == 1, "one completion");
	ok(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE &&
		   wc.wr_id == 1,
	   "success, opcode IBV_WC_ATOMIC_WRITE (status %d opcode %d)",
	   wc.status, wc.opcode);
	memcpy(&v, &buf[1], 8);
	ok(buf[2] == src && v == 0xeeeeeeeeeeeeeeeeull &&
		   buf[3] == 0xeeeeeeeeeeeeeeeeull,
	   "8 bytes placed, neighbours untouched");

	/* through ibv_post_send: the 8 bytes come from the one SGE */
	v = 42;
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)&v;
	sge.length = 8;
	sge.lkey = 0;
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr.wr_id = 2;
	wr.wr.rdma.rkey = mr->rkey;
	wr.wr.rdma.remote_addr = (uintptr_t)&buf[5];
	is_int(ibv_post_send(a, &wr, &bad), 0, "post_send ATOMIC_WRITE inline");
	ok(t_wait(t.cq, &wc, 1, 30000) == 1 && !wc.status && buf[5] == 42,
	   "post_send atomic write placed");
	sge.length = 4;
	is_int(ibv_post_send(a, &wr, &bad), EINVAL, "4-byte SGE -> EINVAL");
	ok(bad == &wr, "bad_wr is the WR");
	sge.length = 8;
	wr.num_sge = 0;
	is_int(ibv_post_send(a, &wr, &bad), EINVAL, "no SGE -> EINVAL");
	wr.num_sge = 1;
	/* one SGE announced but no list: refused, never read */
	wr.sg_list = NULL;
	is_int(ibv_post_send(a, &wr, &bad), EINVAL,
	       "ATOMIC_WRITE, num_sge 1 and no sg_list -> EINVAL");
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.rkey = mr->rkey;
	wr.wr.atomic.remote_addr = (uintptr_t)&buf[5];
	wr.wr.atomic.compare_add = 1;
	is_int(ibv_post_send(a, &wr, &bad), EINVAL,
	       "FETCH_AND_ADD, num_sge 1 and no sg_list -> EINVAL");
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	is_int(ibv_post_send(a, &wr, &bad), EINVAL,
	       "CMP_AND_SWP, num_sge 1 and no sg_list -> EINVAL");
	ok(bad == &wr && buf[5] == 42, "bad_wr is the WR, nothing changed");
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	wr.sg_list = &sge;

	/* 100 in batches of 10, in order: the last value of each stays */
	for (i = 0; i < 100; i++) {
		if (aw(a, 100 + (uint64_t)i, mr->rkey, (uintptr_t)&buf[7],
		       (uint64_t)i * 3))
			break;
		if (i % 10 < 9)
			continue;
		for (n = i - 9; n <= i; n++)
			if (t_wait(t.cq, &wc, 1, 30000) != 1 || wc.status ||
			    wc.wr_id != 100 + (uint64_t)n)
				break;
		if (n <= i || buf[7] != (uint64_t)i * 3)
			break;
	}
	ok(i == 100, "100 atomic writes in order, the last of each batch kept");

	/* no remote write on the MR: remote access error, QP to ERR */
	is_int(aw(a, 3, ro->rkey, (uintptr_t)buf + 2048, 1), 0, "post");
	n = t_wait(t.cq, &wc, 1, 30000);
	ok(n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR,
	   "MR without remote write -> REM_ACCESS_ERR (%d)", wc.status);
	ok(buf[256] == 0, "nothing written");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);

	/* misaligned address: invalid request (rxe: misaligned atomic) */
	a = aw_qp(&t, IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE);
	b = aw_qp(&t, IBV_QPT_RC, IBV_QP_EX_WITH_SEND);
	t_connect(a, b->qp_num, 0, 1, 7, 14, 7);
	t_connect(b, a->qp_num, IBV_ACCESS_REMOTE_WRITE, 1, 7, 14, 7);
	memset(buf, 0, 64);
	aw(a, 4, mr->rkey, (uintptr_t)buf + 4, ~0ull);
	aw(a, 5, mr->rkey, (uintptr_t)&buf[4], ~0ull);
	n = t_wait(t.cq, &wc, 1, 30000);
	ok(n == 1 && wc.status == IBV_WC_REM_INV_REQ_ERR && wc.wr_id == 4,
	   "misaligned -> REM_INV_REQ_ERR (%d)", wc.status);
	ok(t_wait(t.cq, &wc, 1, 30000) == 1 &&
		   wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 5,
	   "the next WR is flushed");
	ok(!buf[0] && !buf[1] && !buf[4], "nothing written");
	is_int(t_qp_state(a), IBV_QPS_ERR, "requester in ERR");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);

	/* responder QP without remote write access */
	a = aw_qp(&t, IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE);
	c = aw_qp(&t, IBV_QPT_RC, IBV_QP_EX_WITH_SEND);
	t_connect(a, c->qp_num, 0, 1, 7, 14, 7);
	t_connect(c, a->qp_num,
		  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, 1, 7, 14,
		  7);
	aw(a, 6, mr->rkey, (uintptr_t)&buf[6], 9);
	n = t_wait(t.cq, &wc, 1, 30000);
	ok(n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && !buf[6],
	   "responder QP without remote write -> REM_ACCESS_ERR (%d)",
	   wc.status);
	ibv_destroy_qp(a);
	ibv_destroy_qp(c);
	ibv_dereg_mr(ro);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

/* responder: registers 64 bytes, reports them back when asked */
static int responder(int rfd, int wfd)
{
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint64_t *buf = aligned_alloc(64, 64), addr;
	uint32_t qpn;
	char c;

	memset(buf, 0, 64);
	if (t_open(&t, 16))
		return 1;
	qp = aw_qp(&t, IBV_QPT_RC, IBV_QP_EX_WITH_SEND);
	mr = ibv_reg_mr(t.pd, buf, 64,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!qp || !mr)
		return 2;
	addr = (uintptr_t)buf;
	t_xsend(wfd, &qp->qp_num, 4);
	t_xsend(wfd, &mr->rkey, 4);
	t_xsend(wfd, &addr, 8);
	t_xrecv(rfd, &qpn, 4);
	if (t_connect(qp, qpn, IBV_ACCESS_REMOTE_WRITE, 1, 7, 14, 7))
		return 3;
	t_xsend(wfd, "r", 1);
	t_xrecv(rfd, &c, 1); /* never polls its CQ in between */
	t_xsend(wfd, buf, 64);
	t_xrecv(rfd, &c, 1);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	return 0;
}

static void test_process(int stop)
{
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	uint64_t got[8], addr;
	uint32_t qpn, rkey;
	int rfd, wfd, st, n = 0;
	pid_t pid;
	char c;

	if (t_open(&t, 16))
		bail_out("open");
	qp = aw_qp(&t, IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE);
	pid = t_spawn(responder, &rfd, &wfd);
	if (!qp || pid < 0)
		bail_out("spawn");
	t_xrecv(rfd, &qpn, 4);
	t_xrecv(rfd, &rkey, 4);
	t_xrecv(rfd, &addr, 8);
	t_xsend(wfd, &qp->qp_num, 4);
	t_connect(qp, qpn, 0, 1, 7, 14, 7);
	t_xrecv(rfd, &c, 1);
	if (stop)
		kill(pid, SIGSTOP);
	aw(qp, 1, rkey, addr + 8, 0xa5a5a5a5a5a5a5a5ull);
	aw(qp, 2, rkey, addr + 56, 7);
	n = t_wait(t.cq, &wc, 1, 10000);
	n += t_wait(t.cq, &wc, 1, 10000) == 1 && wc.status == IBV_WC_SUCCESS &&
	     wc.opcode == IBV_WC_ATOMIC_WRITE;
	ok(n == 2, "%s responder: both atomic writes complete",
	   stop ? "SIGSTOPped" : "running");
	if (stop)
		kill(pid, SIGCONT);
	t_xsend(wfd, "c", 1);
	t_xrecv(rfd, got, 64);
	ok(got[0] == 0 && got[1] == 0xa5a5a5a5a5a5a5a5ull && got[2] == 0 &&
		   got[6] == 0 && got[7] == 7,
	   "the responder's memory holds both values, nothing else");
	t_xsend(wfd, "q", 1);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && !WEXITSTATUS(st), "responder exited 0");
	close(rfd);
	close(wfd);
	ibv_destroy_qp(qp);
	t_close(&t);
}

int main(void)
{
	const char *novm = getenv("SOFTRDMA_TEST_NOVM");

	t_isolate("atomic_write");
	test_local();
	test_process(0);
	/* with process_vm refused the responder places it itself */
	if (!novm || strcmp(novm, "1"))
		test_process(1);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
