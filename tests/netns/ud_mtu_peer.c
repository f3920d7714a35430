/* SPDX-License-Identifier: MIT */
/*
 * ud_mtu_peer.c -- the largest UD datagram is the port's active MTU, on a
 * host of the namespace fabric (SOFTRDMA_NET=1), run by
 * tests/netns/ud-hosts.sh:
 *
 *   ud_mtu_peer MTU        TAP on stdout
 *
 * The port must be ACTIVE with active MTU MTU (bytes: 1024 on the
 * fabric's 1500-byte links).  A UD QP sends MTU bytes to another UD QP of
 * this host through GID index 2 (the host's fabric address): received
 * whole.  Then MTU + 1 bytes: the WR completes with IBV_WC_LOC_LEN_ERR
 * and the QP goes to ERR (rxe's get_mtu for UD is the port's MTU; as
 * softrdma answers above 4096 on one host), and nothing arrives.
 */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tap.h"
#include "../soft/common.h"

#define QKEY 0x11111111u
#define RBUF (40 + 4096)

/* ud_post -- a UD SEND of len bytes from buf */
static int ud_post(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t dqpn,
		   uint8_t *buf, uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dqpn;
	wr.wr.ud.remote_qkey = QKEY;
	return ibv_post_send(qp, &wr, &bad);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr got;
	struct ibv_qp_init_attr gi;
	struct ibv_ah_attr aa;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge rsge;
	struct ibv_wc wc[4];
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *rx, *tx;
	struct ibv_ah *ah;
	uint8_t *buf;
	uint32_t mtu, i;
	int n;

	if (argc != 2)
		bail_out("usage: ud_mtu_peer MTU");
	mtu = (uint32_t)strtoul(argv[1], NULL, 0);
	list = ibv_get_device_list(NULL);
	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])))
		bail_out("no device");
	ok(!ibv_query_port(ctx, 1, &pa) && pa.state == IBV_PORT_ACTIVE &&
		   pa.active_mtu >= IBV_MTU_256 &&
		   pa.active_mtu <= IBV_MTU_4096 &&
		   128u << pa.active_mtu == mtu,
	   "port 1 ACTIVE, active MTU %u", mtu);
	buf = calloc(1, 2 * RBUF + 8192);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	mr = buf && pd ? ibv_reg_mr(pd, buf, 2 * RBUF + 8192,
				    IBV_ACCESS_LOCAL_WRITE)
		       : NULL;
	if (!cq || !mr)
		bail_out("PD, CQ, MR");
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	rx = ibv_create_qp(pd, &qa);
	tx = ibv_create_qp(pd, &qa);
	if (!rx || !tx || t_ud_up(rx, QKEY) || t_ud_up(tx, QKEY))
		bail_out("UD QPs");
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.sgid_index = 2;
	aa.grh.hop_limit = 64;
	if (ibv_query_gid(ctx, 1, 2, &aa.grh.dgid))
		bail_out("GID 2");
	ah = ibv_create_ah(pd, &aa);
	if (!ah)
		bail_out("AH");
	for (i = 0; i < 2; i++) {
		rsge.addr = (uintptr_t)(buf + i * RBUF);
		rsge.length = RBUF;
		rsge.lkey = mr->lkey;
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = 100 + i;
		rwr.sg_list = &rsge;
		rwr.num_sge = 1;
		if (ibv_post_recv(rx, &rwr, &rbad))
			bail_out("post_recv");
	}
	for (i = 0; i < mtu + 1; i++)
		buf[2 * RBUF + i] = (uint8_t)(i * 7 + 1);
	ok(!ud_post(tx, ah, rx->qp_num, buf + 2 * RBUF, mtu, mr->lkey, 1),
	   "post a datagram of MTU bytes");
	n = t_wait(cq, wc, 2, 10000);
	ok(n == 2 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS &&
		   (wc[0].wr_id == 100 ? wc[0] : wc[1]).byte_len == 40 + mtu &&
		   !memcmp(buf + 40, buf + 2 * RBUF, mtu),
	   "sent and received whole");
	ok(!ud_post(tx, ah, rx->qp_num, buf + 2 * RBUF, mtu + 1, mr->lkey, 2),
	   "post a datagram of MTU + 1 bytes");
	n = t_wait(cq, wc, 2, 300);
	ok(n == 1 && wc[0].wr_id == 2 && wc[0].status == IBV_WC_LOC_LEN_ERR,
	   "it completes with IBV_WC_LOC_LEN_ERR, nothing arrives (%d: %s)", n,
	   n > 0 ? ibv_wc_status_str(wc[0].status) : "-");
	ok(!ibv_query_qp(tx, &got, IBV_QP_STATE, &gi) &&
		   got.qp_state == IBV_QPS_ERR,
	   "the sending QP is in ERR");
	ibv_destroy_ah(ah);
	ibv_destroy_qp(tx);
	ibv_destroy_qp(rx);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(buf);
	return done_testing();
}
