/* SPDX-License-Identifier: MIT */
/* mcast.c -- UD multicast: one sender, three receiver processes, limits */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

uint64_t softrdma_qp_drops(struct ibv_qp *qp, int why);

#define QKEY   0x01234567u
#define MTU    4096
#define RBUF   (40 + MTU)
#define WIN    256 /* receives each receiver keeps posted */
#define BATCH  128 /* datagrams per batch; every receiver acks each */
#define NRECV  3
#define MC_QPN 0xffffffu

static const uint32_t sizes[] = {4, 100, 1024, MTU};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int per_size(void)
{
	return tap_small() ? 256 : 10000;
}

/* the MGID of 239.1.2.3 as librdmacm maps it on RoCE (IPv4-mapped) */
static void mgid_of(union ibv_gid *g, uint8_t last)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = 239;
	g->raw[13] = 1;
	g->raw[14] = 2;
	g->raw[15] = last;
}

static void pattern(unsigned char *p, uint32_t len, uint32_t seq)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(seq * 31 + i * 7 + len);
	if (len >= 4)
		memcpy(p, &seq, 4);
}

static int pattern_ok(const unsigned char *p, uint32_t len, uint32_t seq)
{
	unsigned char b[MTU];

	pattern(b, len, seq);
	return !memcmp(p, b, len);
}

struct ud {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;
};

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, int depth,
			    uint32_t flags)
{
	struct ibv_qp_init_attr_ex x;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	memset(&x, 0, sizeof(x));
	x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	x.create_flags = flags;
	x.pd = pd;
	x.send_cq = x.recv_cq = cq;
	x.qp_type = IBV_QPT_UD;
	x.cap.max_send_wr = (uint32_t)depth;
	x.cap.max_recv_wr = (uint32_t)depth;
	x.cap.max_send_sge = x.cap.max_recv_sge = 1;
	qp = ibv_create_qp_ex(pd->context, &x);
	if (!qp)
		return NULL;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		goto fail;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		goto fail;
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto fail;
	return qp;
fail:
	ibv_destroy_qp(qp);
	return NULL;
}

static int ud_open(struct ud *u, int depth, uint32_t flags)
{
	struct ibv_device **l = ibv_get_device_list(NULL);

	memset(u, 0, sizeof(*u));
	if (!l || !l[0])
		return -1;
	u->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!u->ctx)
		return -1;
	u->pd = ibv_alloc_pd(u->ctx);
	u->cq = ibv_create_cq(u->ctx, 2 * depth + 16, NULL, NULL, 0);
	u->buf = calloc((size_t)depth + 1, RBUF);
	if (!u->pd || !u->cq || !u->buf)
		return -1;
	u->mr = ibv_reg_mr(u->pd, u->buf, ((size_t)depth + 1) * RBUF,
			   IBV_ACCESS_LOCAL_WRITE);
	u->qp = ud_qp(u->pd, u->cq, depth, flags);
	return u->mr && u->qp ? 0 : -1;
}

static void ud_close(struct ud *u)
{
	if (u->qp)
		ibv_destroy_qp(u->qp);
	if (u->mr)
		ibv_dereg_mr(u->mr);
	if (u->cq)
		ibv_destroy_cq(u->cq);
	if (u->pd)
		ibv_dealloc_pd(u->pd);
	if (u->ctx)
		ibv_close_device(u->ctx);
	free(u->buf);
}

static int post_slot(struct ibv_qp *qp, struct ud *u, uint32_t slot)
{
	return t_post_recv(qp, u->buf + (size_t)slot * RBUF, RBUF, u->mr->lkey,
			   slot);
}

/*
 * rx_check -- one receive completion against the expected datagram: the
 * sequence, size, data, source QP and the GRH (IPv4 header, MGID as
 * destination).  Returns 0 when right.
 */
static int rx_check(struct ud *u, const struct ibv_wc *wc, uint32_t seq,
		    uint32_t len, uint32_t src_qp, const union ibv_gid *mgid)
{
	const unsigned char *p = u->buf + (size_t)wc->wr_id * RBUF;

	if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV ||
	    wc->byte_len != 40 + len || wc->src_qp != src_qp ||
	    !(wc->wc_flags & IBV_WC_GRH) || wc->wr_id >= WIN)
		return -1;
	if (p[20] != 0x45 || memcmp(p + 36, mgid->raw + 12, 4))
		return -2;
	if (!pattern_ok(p + 40, len, seq))
		return -3;
	return 0;
}

/* receiver -- attach, keep WIN receives posted, check every datagram */
static int receiver(int rfd, int wfd)
{
	struct ud u;
	struct ibv_wc wc[32];
	union ibv_gid mgid;
	uint32_t src_qp, seq, i, s, got, n_tot, last;
	int r, k, bad = 0;
	uint64_t drops;

	mgid_of(&mgid, 3);
	if (ud_open(&u, WIN, 0) || ibv_attach_mcast(u.qp, &mgid, 0))
		return 100;
	for (i = 0; i < WIN; i++)
		if (post_slot(u.qp, &u, i))
			return 101;
	t_xsend(wfd, &u.qp->qp_num, 4);
	t_xrecv(rfd, &src_qp, 4);
	n_tot = (uint32_t)per_size();
	/* batches of BATCH datagrams; ack each once it is in and reposted */
	for (s = 0; s < NSIZES; s++) {
		for (seq = 0; seq < n_tot; seq += BATCH) {
			last = seq + BATCH < n_tot ? seq + BATCH : n_tot;
			for (got = seq; got < last;) {
				r = t_wait(u.cq, wc, 1, 20000);
				if (r != 1)
					return 102;
				k = rx_check(&u, wc, got, sizes[s], src_qp,
					     &mgid);
				if (k && bad++ < 5)
					diag("receiver: datagram %u size %u "
					     "wrong (%d)",
					     got, sizes[s], k);
				if (post_slot(u.qp, &u, (uint32_t)wc[0].wr_id))
					return 103;
				got++;
			}
			t_xsend(wfd, &got, 4);
		}
	}
	/* loopback blocking phase: datagrams from the blocking QP arrive */
	t_xrecv(rfd, &seq, 4);
	for (i = 0; i < seq; i++) {
		if (t_wait(u.cq, wc, 1, 20000) != 1 ||
		    wc[0].status != IBV_WC_SUCCESS)
			return 104;
		post_slot(u.qp, &u, (uint32_t)wc[0].wr_id);
	}
	drops = softrdma_qp_drops(u.qp, -1);
	t_xsend(wfd, &drops, 8);
	r = ibv_detach_mcast(u.qp, &mgid, 0);
	t_xsend(wfd, &r, sizeof(r));
	t_xrecv(rfd, &seq, 4);
	/* detached: what the sender sent since never came */
	if (t_wait(u.cq, wc, 1, 20) != 0)
		bad++;
	ud_close(&u);
	return bad ? 1 : 0;
}

/* send_batch -- datagrams seq..last-1 of one size to the group */
static int send_batch(struct ud *u, struct ibv_qp *qp, struct ibv_ah *ah,
		      uint32_t len, uint32_t seq, uint32_t last)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	uint32_t i;

	for (i = seq; i < last; i++) {
		pattern(u->buf, len, i);
		sge.addr = (uintptr_t)u->buf;
		sge.length = len;
		sge.lkey = u->mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = MC_QPN;
		wr.wr.ud.remote_qkey = QKEY;
		if (ibv_post_send(qp, &wr, &bad))
			return -1;
		/* the buffer is reused: the send must be complete */
		if (t_wait(u->cq, &wc, 1, 20000) != 1 ||
		    wc.status != IBV_WC_SUCCESS || wc.wr_id != i)
			return -1;
	}
	return 0;
}

/* lo_drain -- the sender's own attached QP: check what it got */
static int lo_drain(struct ud *lo, uint32_t want, uint32_t len, uint32_t *seq,
		    uint32_t src_qp, const union ibv_gid *mgid)
{
	struct ibv_wc wc;
	uint32_t i;

	for (i = 0; i < want; i++) {
		if (t_wait(lo->cq, &wc, 1, 20000) != 1)
			return -1;
		if (len && rx_check(lo, &wc, *seq, len, src_qp, mgid))
			return -1;
		(*seq)++;
		post_slot(lo->qp, lo, (uint32_t)wc.wr_id);
	}
	return 0;
}

static void test_traffic(void)
{
	struct ud tx, lo;
	struct ibv_qp *blk;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	union ibv_gid mgid;
	uint32_t qpn[NRECV], s, seq, last, acked, n_tot, lseq;
	uint64_t drops;
	int rfd[NRECV], wfd[NRECV], status, i, bad_lo = 0, failed = 0;
	pid_t pid[NRECV];

	mgid_of(&mgid, 3);
	for (i = 0; i < NRECV; i++) {
		pid[i] = t_spawn(receiver, &rfd[i], &wfd[i]);
		if (pid[i] < 0)
			bail_out("fork");
	}
	if (ud_open(&tx, WIN, 0))
		bail_out("sender setup");
	if (ud_open(&lo, WIN, 0))
		bail_out("loopback receiver setup");
	blk = ud_qp(tx.pd, tx.cq, 16, IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);
	ok(blk != NULL, "UD QP with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB");
	ok(!ibv_attach_mcast(lo.qp, &mgid, 0),
	   "the sender's own process attaches a QP too");
	for (i = 0; i < WIN; i++)
		post_slot(lo.qp, &lo, (uint32_t)i);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = 1;
	aa.grh.dgid = mgid;
	ah = ibv_create_ah(tx.pd, &aa);
	ok(ah != NULL, "AH for the MGID");
	for (i = 0; i < NRECV; i++) {
		t_xrecv(rfd[i], &qpn[i], 4);
		t_xsend(wfd[i], &tx.qp->qp_num, 4);
	}
	n_tot = (uint32_t)per_size();
	for (s = 0; s < NSIZES && !failed; s++) {
		lseq = 0;
		for (seq = 0; seq < n_tot && !failed; seq = last) {
			last = seq + BATCH < n_tot ? seq + BATCH : n_tot;
			if (send_batch(&tx, tx.qp, ah, sizes[s], seq, last)) {
				failed = 1;
				break;
			}
			if (lo_drain(&lo, last - seq, sizes[s], &lseq,
				     tx.qp->qp_num, &mgid))
				bad_lo++;
			for (i = 0; i < NRECV; i++) {
				t_xrecv(rfd[i], &acked, 4);
				if (acked != last)
					failed = 1;
			}
		}
		ok(!failed, "%u datagrams of %u bytes to %d receivers, acked",
		   n_tot, sizes[s], NRECV);
	}
	is_int(bad_lo, 0, "the sender's own attached QP got every datagram");
	/* the blocking QP's datagrams reach the others, not its own context */
	if (!failed && send_batch(&tx, blk, ah, 64, 0, 10))
		failed = 1;
	for (i = 0; i < NRECV; i++) {
		seq = 10;
		t_xsend(wfd[i], &seq, 4);
	}
	ok(t_wait(lo.cq, &wc, 1, 50) == 0,
	   "BLOCK_SELF_MCAST_LB: nothing loops back to the sender's process");
	for (i = 0; i < NRECV; i++) {
		t_xrecv(rfd[i], &drops, 8);
		is_int(drops, 0, "a receiver dropped nothing");
	}
	for (i = 0; i < NRECV; i++) {
		t_xrecv(rfd[i], &status, sizeof(status));
		is_int(status, 0, "a receiver detached");
	}
	/* positive control: the other QP still loops back; the detached
	 * receivers must not get it */
	lseq = 0;
	ok(!send_batch(&tx, tx.qp, ah, 64, 0, 1) &&
		   !lo_drain(&lo, 1, 64, &lseq, tx.qp->qp_num, &mgid),
	   "without the flag the sender's process receives");
	for (i = 0; i < NRECV; i++)
		t_xsend(wfd[i], &seq, 4);
	for (i = 0; i < NRECV; i++) {
		waitpid(pid[i], &status, 0);
		ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "receiver %d got exactly what was sent (status %d)", i,
		   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		close(rfd[i]);
		close(wfd[i]);
	}
	/* detached: no more delivery */
	ok(!ibv_detach_mcast(lo.qp, &mgid, 0), "detach");
	ok(!send_batch(&tx, tx.qp, ah, 64, 0, 1) &&
		   t_wait(lo.cq, &wc, 1, 50) == 0,
	   "a detached QP receives nothing");
	/* the sender keeps a copy of the members while nothing changes:
	 * a QP that joins after its last send gets the next one */
	lseq = 0;
	ok(!ibv_attach_mcast(lo.qp, &mgid, 0) &&
		   !send_batch(&tx, tx.qp, ah, 64, 0, 1) &&
		   !lo_drain(&lo, 1, 64, &lseq, tx.qp->qp_num, &mgid),
	   "a QP attached again after the sender's last send receives");
	ibv_destroy_ah(ah);
	ibv_destroy_qp(blk);
	ok(!ibv_detach_mcast(lo.qp, &mgid, 0), "detach before destroy");
	ud_close(&lo);
	ud_close(&tx);
}

/* detach_range -- qp out of the groups mgid_of(0) with byte 14 0..n-1 */
static int detach_range(struct ibv_qp *qp, int n)
{
	union ibv_gid g;
	int i, bad = 0;

	for (i = 0; i < n; i++) {
		mgid_of(&g, 0);
		g.raw[14] = (uint8_t)i;
		bad |= ibv_detach_mcast(qp, &g, 0);
	}
	return bad;
}

/* holder -- attach one QP, report, wait to be killed */
static int holder(int rfd, int wfd)
{
	struct ud u;
	union ibv_gid g;
	int r;

	mgid_of(&g, 9);
	if (ud_open(&u, 4, 0))
		return 100;
	r = ibv_attach_mcast(u.qp, &g, 0);
	t_xsend(wfd, &r, sizeof(r));
	t_xrecv(rfd, &r, sizeof(r)); /* never comes: SIGKILL */
	return 0;
}

static void test_limits(void)
{
	struct ud u;
	struct ibv_device_attr da;
	struct ibv_qp *qps[64], *rc;
	struct ibv_qp_init_attr ra;
	union ibv_gid g, uni;
	char name[160];
	int i, j, r, ok_all, rfd, wfd, status, fd;
	pid_t pid;

	if (ud_open(&u, 4, 0))
		bail_out("setup");
	ok(!ibv_query_device(u.ctx, &da) && da.max_mcast_grp == 256 &&
		   da.max_mcast_qp_attach == 64 &&
		   da.max_total_mcast_qp_attach == 4096,
	   "query_device: max_mcast_grp 256, max_mcast_qp_attach 64, "
	   "max_total_mcast_qp_attach 4096");
	mgid_of(&g, 1);
	memset(&uni, 0, sizeof(uni));
	uni.raw[10] = uni.raw[11] = 0xff;
	uni.raw[12] = 10;
	is_int(ibv_attach_mcast(NULL, &g, 0), EINVAL, "attach NULL QP: EINVAL");
	is_int(ibv_attach_mcast(u.qp, NULL, 0), EINVAL,
	       "attach NULL GID: EINVAL");
	is_int(ibv_attach_mcast(u.qp, &uni, 0), EINVAL,
	       "attach a unicast GID: EINVAL");
	memset(&ra, 0, sizeof(ra));
	ra.send_cq = ra.recv_cq = u.cq;
	ra.qp_type = IBV_QPT_RC;
	ra.cap.max_send_wr = ra.cap.max_recv_wr = 1;
	ra.cap.max_send_sge = ra.cap.max_recv_sge = 1;
	rc = ibv_create_qp(u.pd, &ra);
	is_int(ibv_attach_mcast(rc, &g, 0), EINVAL, "attach an RC QP: EINVAL");
	ibv_destroy_qp(rc);
	is_int(ibv_detach_mcast(u.qp, &g, 0), EINVAL,
	       "detach from a group never joined: EINVAL");
	/* a table left half made (its creator died): replaced */
	snprintf(name, sizeof(name), "/%s-mcast",
		 getenv("SOFTRDMA_SHM_PREFIX"));
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	ok(fd >= 0 && write(fd, "junk", 4) == 4, "a stale 4-byte table");
	if (fd >= 0)
		close(fd);
	is_int(ibv_attach_mcast(u.qp, &g, 0), 0,
	       "attach (stale table replaced)");
	is_int(ibv_attach_mcast(u.qp, &g, 0), 0, "attach again: 0");
	is_int(ibv_detach_mcast(u.qp, &g, 0), 0, "detach");
	is_int(ibv_detach_mcast(u.qp, &g, 0), EINVAL, "detach again: EINVAL");
	/* max_mcast_grp */
	ok_all = 1;
	for (i = 0; i < 256; i++) {
		mgid_of(&g, 0);
		g.raw[14] = (uint8_t)i;
		ok_all &= !ibv_attach_mcast(u.qp, &g, 0);
	}
	ok(ok_all, "one QP in 256 groups");
	g.raw[13] = 7;
	is_int(ibv_attach_mcast(u.qp, &g, 0), ENOMEM, "a 257th group: ENOMEM");
	ok(errno == ENOMEM, "errno ENOMEM");
	ok(!detach_range(u.qp, 256), "out of the 256 groups");
	/* max_mcast_qp_attach and max_total_mcast_qp_attach */
	for (i = 0; i < 64; i++)
		qps[i] = ud_qp(u.pd, u.cq, 1, 0);
	ok_all = 1;
	for (i = 0; i < 64; i++) {
		for (j = 0; j < 64; j++) {
			mgid_of(&g, 0);
			g.raw[14] = (uint8_t)j;
			ok_all &= qps[i] && !ibv_attach_mcast(qps[i], &g, 0);
		}
	}
	ok(ok_all, "64 QPs in each of 64 groups (4096 attachments)");
	mgid_of(&g, 0);
	is_int(ibv_attach_mcast(u.qp, &g, 0), ENOMEM,
	       "a 65th QP in a group: ENOMEM");
	g.raw[14] = 200;
	is_int(ibv_attach_mcast(u.qp, &g, 0), ENOMEM,
	       "a 4097th attachment: ENOMEM");
	/* the kernel's uverbs_free_qp: not while attached */
	is_int(ibv_destroy_qp(qps[0]), EBUSY,
	       "destroying a QP still attached: EBUSY");
	mgid_of(&g, 0);
	is_int(ibv_attach_mcast(u.qp, &g, 0), ENOMEM,
	       "... and it keeps its places");
	ok(!detach_range(qps[0], 64), "detached from its 64 groups");
	is_int(ibv_destroy_qp(qps[0]), 0, "then destroyed");
	is_int(ibv_attach_mcast(u.qp, &g, 0), 0,
	       "a detached QP's places are free");
	ibv_detach_mcast(u.qp, &g, 0);
	ok_all = 1;
	for (i = 1; i < 64; i++)
		ok_all &= !detach_range(qps[i], 64) && !ibv_destroy_qp(qps[i]);
	ok(ok_all, "the other 63 detached and destroyed");
	/* a dead process's attachment is reclaimed */
	mgid_of(&g, 9);
	for (i = 0; i < 63; i++) {
		qps[i] = ud_qp(u.pd, u.cq, 1, 0);
		ibv_attach_mcast(qps[i], &g, 0);
	}
	pid = t_spawn(holder, &rfd, &wfd);
	r = -1;
	if (pid > 0)
		t_xrecv(rfd, &r, sizeof(r));
	is_int(r, 0, "another process fills the group's 64th place");
	is_int(ibv_attach_mcast(u.qp, &g, 0), ENOMEM, "group full: ENOMEM");
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	close(rfd);
	close(wfd);
	is_int(ibv_attach_mcast(u.qp, &g, 0), 0,
	       "once it is killed its place is reclaimed");
	ok_all = 1;
	for (i = 0; i < 63; i++)
		ok_all &= !ibv_detach_mcast(qps[i], &g, 0) &&
			  !ibv_destroy_qp(qps[i]);
	ok(ok_all, "the group's 63 detached and destroyed");
	ibv_detach_mcast(u.qp, &g, 0);
	ud_close(&u);
}

int main(void)
{
	t_isolate("mcast");
	test_traffic();
	test_limits();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
