/* SPDX-License-Identifier: MIT */
/*
 * qpex.c -- ibv_qp_ex wr_* posting, ibv_cq_ex polling, bad input; a batch
 * that does not fit the send queue is posted not at all (ibv_wr_post(3):
 * "no work is executed to the queue until ibv_wr_complete() returns
 * success"), and wr_start to wr_complete/wr_abort is the QP's critical
 * section (the provider locks)
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

static void test_qpex(void)
{
	struct tctx t;
	struct ibv_cq_init_attr_ex ca;
	struct ibv_cq_ex *cqx;
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *x;
	struct ibv_mr *mr;
	struct ibv_poll_cq_attr pa = {0};
	char *buf = calloc(1, 65536);
	char inl[32] = "inline payload";
	int n = 0, ret, recvs = 0, sends = 0;
	uint32_t lens = 0;

	if (t_open(&t, 64))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 65536,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	memset(&ca, 0, sizeof(ca));
	ca.cqe = 64;
	ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM |
		      IBV_WC_EX_WITH_IMM;
	cqx = ibv_create_cq_ex(t.ctx, &ca);
	ok(cqx != NULL, "create_cq_ex");
	ca.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	errno = 0;
	ok(!ibv_create_cq_ex(t.ctx, &ca) && errno == EOPNOTSUPP,
	   "timestamps unsupported -> EOPNOTSUPP");
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(cqx);
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 2;
	qa.cap.max_inline_data = 32;
	qa.pd = t.pd;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
			    IBV_QP_EX_WITH_SEND_WITH_IMM;
	a = ibv_create_qp_ex(t.ctx, &qa);
	ok(a != NULL, "create_qp_ex with send ops flags");
	x = ibv_qp_to_qp_ex(a);
	ok(x != NULL, "ibv_qp_to_qp_ex");
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	b = ibv_create_qp_ex(t.ctx, &qa);
	ok(b && !ibv_qp_to_qp_ex(b), "plain QP has no qp_ex");
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	errno = 0;
	ok(!ibv_create_qp_ex(t.ctx, &qa) && errno == EOPNOTSUPP,
	   "unsupported comp_mask -> EOPNOTSUPP");
	t_connect(a, b->qp_num, 0, 1, 7, 14, 7);
	t_connect(b, a->qp_num, IBV_ACCESS_REMOTE_WRITE, 1, 7, 14, 7);
	t_post_recv(b, buf + 4096, 1024, mr->lkey, 1);
	t_post_recv(b, buf + 8192, 1024, mr->lkey, 2);
	memset(buf, 'q', 100);
	ibv_wr_start(x);
	x->wr_id = 10;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf, 100);
	x->wr_id = 11;
	ibv_wr_send_imm(x, htobe32(42));
	ibv_wr_set_inline_data(x, inl, sizeof(inl));
	memset(inl, 0, sizeof(inl)); /* inline data was copied */
	x->wr_id = 12;
	ibv_wr_rdma_write(x, mr->rkey, (uintptr_t)buf + 16384);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf, 50);
	ret = ibv_wr_complete(x);
	is_int(ret, 0, "wr_complete");
	while (n < 5 && lens < 1000000) {
		lens++;
		if (ibv_start_poll(cqx, &pa))
			continue;
		do {
			n++;
			if (cqx->status != IBV_WC_SUCCESS)
				continue;
			if (ibv_wc_read_opcode(cqx) & IBV_WC_RECV) {
				recvs++;
				if (cqx->wr_id == 1)
					ok(ibv_wc_read_byte_len(cqx) == 100,
					   "cq_ex byte_len 100");
				if (cqx->wr_id == 2)
					ok(ibv_wc_read_imm_data(cqx) ==
							   htobe32(42) &&
						   ibv_wc_read_byte_len(cqx) ==
							   32,
					   "cq_ex imm and inline length");
				ok(ibv_wc_read_qp_num(cqx) == b->qp_num,
				   "cq_ex qp_num");
			} else {
				sends++;
			}
		} while (!ibv_next_poll(cqx));
		ibv_end_poll(cqx);
	}
	is_int(recvs, 2, "two receives");
	is_int(sends, 3, "three send-side completions");
	ok(!strcmp(buf + 8192, "inline payload"), "inline data arrived");
	ok(buf[16384] == 'q' && buf[16384 + 49] == 'q' && !buf[16384 + 50],
	   "rdma write landed");
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, buf, 33);
	is_int(ibv_wr_complete(x), EINVAL, "inline above max -> EINVAL");
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_abort(x);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	is_int(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0, "destroy cq_ex");
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

/* batch -- n signalled RDMA WRITEs of 8 bytes from buf to peer's
 * buf + 4096 + 8 * i through x, values base + i; ibv_wr_complete's result */
static int batch(struct ibv_qp_ex *x, struct ibv_mr *mr, uint64_t *buf, int n,
		 uint64_t base)
{
	int i;

	ibv_wr_start(x);
	for (i = 0; i < n; i++) {
		buf[i] = base + (uint64_t)i;
		x->wr_id = base + (uint64_t)i;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(x, mr->rkey, (uintptr_t)(buf + 512 + i));
		ibv_wr_set_sge(x, mr->lkey, (uintptr_t)(buf + i), 8);
	}
	return ibv_wr_complete(x);
}

/* starter -- a second thread's ibv_wr_start on the QP: it gets in only
 * once the first thread's batch is done */
struct starter {
	struct ibv_qp_ex *x;
	volatile int in;
};

static void *starter_run(void *arg)
{
	struct starter *st = arg;

	ibv_wr_start(st->x);
	st->in = 1;
	ibv_wr_abort(st->x);
	return NULL;
}

/* test_whole -- on an RC and a UC QP of send depth 4: a batch of 6 is
 * ENOMEM with nothing sent, one of 4 goes whole; another thread's
 * wr_start waits for the batch in progress */
static void test_whole(enum ibv_qp_type type, const char *name)
{
	struct tctx t;
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *x;
	struct ibv_mr *mr;
	struct ibv_wc wc[8];
	struct starter st;
	pthread_t th;
	uint64_t *buf = calloc(1, 8192);
	int i, n, good = 1;

	if (!buf || t_open(&t, 64))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 8192,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = type;
	qa.send_cq = qa.recv_cq = t.cq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.pd = t.pd;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
	a = ibv_create_qp_ex(t.ctx, &qa);
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	b = ibv_create_qp_ex(t.ctx, &qa);
	x = a ? ibv_qp_to_qp_ex(a) : NULL;
	if (!mr || !a || !b || !x)
		bail_out("%s: QPs", name);
	if (type == IBV_QPT_RC) {
		t_connect(a, b->qp_num, 0, 1, 7, 14, 7);
		t_connect(b, a->qp_num, IBV_ACCESS_REMOTE_WRITE, 1, 7, 14, 7);
	} else if (t_uc_up(a, b->qp_num, 0) ||
		   t_uc_up(b, a->qp_num, IBV_ACCESS_REMOTE_WRITE)) {
		bail_out("%s: up", name);
	}
	ok(batch(x, mr, buf, 6, 100) == ENOMEM,
	   "%s: a batch of 6 on a send queue of 4: ENOMEM", name);
	n = t_wait(t.cq, wc, 8, 200);
	ok(n == 0, "%s: none of it completes", name);
	for (i = 0; i < 6; i++)
		good &= buf[512 + i] == 0;
	ok(good, "%s: none of it was written", name);
	ok(batch(x, mr, buf, 4, 200) == 0, "%s: a batch of 4: posted", name);
	n = t_wait(t.cq, wc, 4, 5000);
	ok(n == 4, "%s: four completions", name);
	for (i = 0; i < n; i++)
		good &= wc[i].status == IBV_WC_SUCCESS &&
			wc[i].wr_id == 200 + (uint64_t)i;
	for (i = 0; i < 4; i++)
		good &= buf[512 + i] == 200 + (uint64_t)i;
	ok(good, "%s: in order, each written once", name);

	ibv_wr_start(x);
	st.x = x;
	st.in = 0;
	if (pthread_create(&th, NULL, starter_run, &st))
		bail_out("pthread_create");
	usleep(50000);
	ok(!st.in, "%s: another thread's wr_start waits for the batch", name);
	ibv_wr_abort(x);
	pthread_join(th, NULL);
	ok(st.in, "%s: ... and gets in after wr_abort", name);
	ok(batch(x, mr, buf, 1, 300) == 0, "%s: the QP posts again", name);
	ok(t_wait(t.cq, wc, 1, 5000) == 1, "%s: its completion", name);

	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

static void test_bad_input(void)
{
	struct tctx t;
	struct ibv_device fake;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	struct ibv_qp_attr a;
	struct ibv_port_attr pa;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	void *cctx;
	int fl;
	char buf[64];

	memset(&fake, 0, sizeof(fake));
	errno = 0;
	ok(!ibv_open_device(&fake) && errno == ENODEV, "foreign device");
	if (t_open(&t, 4))
		bail_out("open");
	is_int(ibv_query_port(t.ctx, 0, &pa), EINVAL, "port 0");
	errno = 0;
	ok(!ibv_reg_mr(t.pd, buf, 0, 0) && errno == EINVAL, "zero-length MR");
	ok(!ibv_reg_mr(t.pd, buf, 64, 1 << 30) && errno == EINVAL,
	   "unknown access flag");
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 1;
	errno = 0;
	ok(!ibv_create_qp(t.pd, &ia) && errno == EINVAL, "QP without CQs");
	ia.send_cq = ia.recv_cq = t.cq;
	ia.cap.max_send_wr = 1 << 20;
	ok(!ibv_create_qp(t.pd, &ia) && errno == EINVAL, "max_send_wr huge");
	ia.cap.max_send_wr = 1;
	ia.qp_type = IBV_QPT_XRC_RECV;
	errno = 0;
	ok(!ibv_create_qp(t.pd, &ia) && errno == EINVAL,
	   "XRC target without a domain (tests/soft/xrc)");
	ia.qp_type = IBV_QPT_XRC_SEND;
	qp = ibv_create_qp(t.pd, &ia);
	ok(qp && qp->qp_type == IBV_QPT_XRC_SEND && !ibv_destroy_qp(qp),
	   "XRC initiator: a PD and a send CQ");
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(t.pd, &ia);
	ok(qp != NULL, "small QP");
	is_int(t_post_recv(qp, buf, 8, 0, 1), EINVAL, "post_recv in RESET");
	is_int(ibv_modify_qp(qp, NULL, IBV_QP_STATE), EINVAL, "NULL attr");
	memset(&a, 0, sizeof(a));
	a.qp_state = (enum ibv_qp_state)42;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "bogus state");
	is_int(ibv_destroy_qp(qp), 0, "destroy");
	ch = ibv_create_comp_channel(t.ctx);
	cq = ibv_create_cq(t.ctx, 4, NULL, ch, 0);
	fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	errno = 0;
	ok(ibv_get_cq_event(ch, &cq, &cctx) == -1 && errno == EAGAIN,
	   "non-blocking channel: EAGAIN");
	ok(ibv_create_cq(t.ctx, 4, NULL, NULL, 5) == NULL && errno == EINVAL,
	   "comp_vector out of range");
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	t_close(&t);
}

int main(void)
{
	t_isolate("qpex");
	test_qpex();
	test_whole(IBV_QPT_RC, "RC");
	test_whole(IBV_QPT_UC, "UC");
	test_bad_input();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
