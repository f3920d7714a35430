/* SPDX-License-Identifier: MIT */
/* basic.c -- device, PD, MR, CQ, channel, QP state machine, loopback */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

static void test_device(void)
{
	struct ibv_device **l;
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_device_attr_ex dax;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct ibv_gid_entry ge;
	int n = -1;

	l = ibv_get_device_list(&n);
	ok(l && n == 1 && l[0] && !l[1], "one device listed");
	ok(!strcmp(ibv_get_device_name(l[0]), "softrdma0"), "named softrdma0");
	ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	ok(ctx != NULL, "open_device");
	is_int(ibv_query_device(ctx, &da), 0, "query_device");
	is_int(da.atomic_cap, IBV_ATOMIC_HCA, "atomic_cap HCA");
	ok(da.max_sge == 32 && da.max_qp_wr >= 1024 && da.max_srq > 0,
	   "honest caps");
	is_int(ibv_query_device_ex(ctx, NULL, &dax), 0, "query_device_ex");
	is_int(dax.orig_attr.max_cqe, da.max_cqe, "ex matches");
	is_int(ibv_query_port(ctx, 1, &pa), 0, "query_port");
	is_int(pa.state, IBV_PORT_ACTIVE, "port active");
	is_int(pa.link_layer, IBV_LINK_LAYER_ETHERNET, "RoCE link layer");
	is_int(pa.active_mtu, IBV_MTU_4096, "mtu 4096");
	is_int(pa.max_msg_sz, 1u << 30, "max_msg_sz 1 GiB");
	ok(ibv_query_port(ctx, 2, &pa) != 0, "port 2 does not exist");
	is_int(ibv_query_gid(ctx, 1, 0, &gid), 0, "gid 0");
	ok(gid.raw[0] == 0xfe && gid.raw[1] == 0x80, "gid 0 link-local");
	is_int(ibv_query_gid(ctx, 1, 1, &gid), 0, "gid 1");
	ok(gid.raw[10] == 0xff && gid.raw[11] == 0xff && gid.raw[12] == 127 &&
		   gid.raw[15] == 1,
	   "gid 1 is ::ffff:127.0.0.1");
	is_int(ibv_query_gid_ex(ctx, 1, 1, &ge, 0), 0, "query_gid_ex");
	is_int(ge.gid_type, IBV_GID_TYPE_ROCE_V2, "RoCE v2");
	is_int(ibv_query_gid_ex(ctx, 1, 15, &ge, 0), ENODATA, "empty entry");
	ok(ctx->async_fd >= 0, "async_fd");
	is_int(ibv_close_device(ctx), 0, "close_device");
}

static void test_objects(void)
{
	struct tctx t;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct pollfd pfd;
	char *buf = malloc(4096);

	ok(t_open(&t, 16) == 0, "open ctx/pd/cq");
	ok(t.cq->cqe >= 16, "cq rounds up (%d)", t.cq->cqe);
	errno = 0;
	ok(!ibv_create_cq(t.ctx, 0, NULL, NULL, 0) && errno == EINVAL,
	   "cqe 0 -> EINVAL");
	ok(!ibv_create_cq(t.ctx, 1 << 30, NULL, NULL, 0) && errno == EINVAL,
	   "cqe over max -> EINVAL");
	ch = ibv_create_comp_channel(t.ctx);
	ok(ch && ch->fd >= 0, "comp channel with fd");
	cq = ibv_create_cq(t.ctx, 4, (void *)0x1234, ch, 0);
	ok(cq != NULL, "cq on channel");
	is_int(ibv_destroy_comp_channel(ch), EBUSY, "channel busy");
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	is_int(poll(&pfd, 1, 0), 0, "channel fd not readable");
	is_int(ibv_resize_cq(cq, 100), 0, "resize_cq");
	ok(cq->cqe >= 100, "resized");
	is_int(ibv_destroy_cq(cq), 0, "destroy cq");
	is_int(ibv_destroy_comp_channel(ch), 0, "destroy channel");

	mr = ibv_reg_mr(t.pd, buf, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ok(mr && mr->lkey && mr->rkey == mr->lkey, "reg_mr");
	errno = 0;
	ok(!ibv_reg_mr(t.pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE) &&
		   errno == EINVAL,
	   "REMOTE_WRITE without LOCAL_WRITE -> EINVAL");
	is_int(ibv_dealloc_pd(t.pd), EBUSY, "pd busy while MR lives");
	is_int(ibv_dereg_mr(mr), 0, "dereg_mr");
	t_close(&t);
	free(buf);
}

/*
 * test_rereg_access -- ibv_rereg_mr's access change alone pins the MR's
 * range again when the new access writes and the old did not: read-only
 * memory (ro, one page) refuses it with EFAULT, as at registration, and
 * the MR stays as it was (access, PD); made writable, the change is taken
 */
static void test_rereg_access(struct tctx *t, char *ro, size_t len)
{
	static const int writes[] = {
		IBV_ACCESS_LOCAL_WRITE,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
		IBV_ACCESS_MW_BIND,
	};
	struct ibv_pd *pd2 = ibv_alloc_pd(t->ctx);
	struct ibv_mr *mr;
	size_t i;
	int r;

	mr = ibv_reg_mr(t->pd, ro, len, IBV_ACCESS_REMOTE_READ);
	ok(mr != NULL && pd2 != NULL,
	   "read-only memory, read access: registered");
	if (!mr || !pd2)
		return;
	for (i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		errno = 0;
		r = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				 writes[i]);
		ok(r == IBV_REREG_MR_ERR_CMD && errno == EFAULT,
		   "rereg of read-only memory to access %#x -> EFAULT (%d, %s)",
		   writes[i], r, strerror(errno));
	}
	errno = 0;
	r = ibv_rereg_mr(mr,
			 IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_PD,
			 pd2, NULL, 0, IBV_ACCESS_LOCAL_WRITE);
	ok(r == IBV_REREG_MR_ERR_CMD && errno == EFAULT,
	   "with a PD change too -> EFAULT, (%d, %s)", r, strerror(errno));
	ok(mr->pd == t->pd && mr->addr == ro && mr->length == len,
	   "the failed rereg changed nothing");
	is_int(ibv_dealloc_pd(pd2), 0, "the other PD was not taken");
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			    IBV_ACCESS_REMOTE_READ),
	       0, "rereg of read-only memory, read access only");
	mprotect(ro, len, PROT_READ | PROT_WRITE);
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
	       0, "made writable: rereg to write access");
	/* writable already: the range was pinned for writing */
	mprotect(ro, len, PROT_READ);
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			    IBV_ACCESS_LOCAL_WRITE),
	       0, "from write access to write access: no new pin");
	is_int(ibv_dereg_mr(mr), 0, "dereg_mr");
}

/*
 * test_reg_range -- a registration is pinned (ib_umem_get): memory not
 * mapped, or not writable for a writable registration, is EFAULT; a range
 * past the end of the address space EINVAL; the same for the new range
 * of ibv_rereg_mr.  One accepted would crash the process copying into it.
 */
static void test_reg_range(void)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	long pg = sysconf(_SC_PAGESIZE);
	struct ibv_mr *mr;
	struct tctx t;
	char *p;

	ok(t_open(&t, 4) == 0, "open");
	p = mmap(NULL, (size_t)pg * 4, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		bail_out("mmap");
	/* pages: 0 rw, 1 ro, 2 unmapped, 3 rw */
	mprotect(p + pg, (size_t)pg, PROT_READ);
	munmap(p + 2 * pg, (size_t)pg);
	errno = 0;
	ok(!ibv_reg_mr(t.pd, p + 2 * pg, (size_t)pg, 0) && errno == EFAULT,
	   "unmapped memory -> EFAULT");
	errno = 0;
	ok(!ibv_reg_mr(t.pd, p, (size_t)pg * 4, 0) && errno == EFAULT,
	   "a range with a hole -> EFAULT");
	errno = 0;
	ok(!ibv_reg_mr(t.pd, p + pg, (size_t)pg, IBV_ACCESS_LOCAL_WRITE) &&
		   errno == EFAULT,
	   "read-only memory, LOCAL_WRITE -> EFAULT");
	errno = 0;
	ok(!ibv_reg_mr(t.pd, p, (size_t)pg * 2, rw) && errno == EFAULT,
	   "writable then read-only, REMOTE_WRITE -> EFAULT");
	errno = 0;
	ok(!ibv_reg_mr(t.pd, (void *)(~(uintptr_t)0 - (uintptr_t)pg + 1),
		       (size_t)pg * 2, 0) &&
		   errno == EINVAL,
	   "past the end of the address space -> EINVAL");
	mr = ibv_reg_mr(t.pd, p, (size_t)pg * 2, IBV_ACCESS_REMOTE_READ);
	ok(mr != NULL, "writable then read-only, read access: registered");
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr(t.pd, p, (size_t)pg, rw);
	ok(mr != NULL, "writable memory, REMOTE_WRITE: registered");
	if (mr) {
		errno = 0;
		ok(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
				p + 2 * pg, (size_t)pg,
				0) == IBV_REREG_MR_ERR_CMD &&
			   errno == EFAULT,
		   "rereg to unmapped memory -> EFAULT");
		errno = 0;
		ok(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
				p + pg, (size_t)pg,
				0) == IBV_REREG_MR_ERR_CMD &&
			   errno == EFAULT,
		   "writable MR rereg to read-only memory -> EFAULT");
		ok(mr->addr == p, "the MR is unchanged");
		is_int(ibv_rereg_mr(mr,
				    IBV_REREG_MR_CHANGE_TRANSLATION |
					    IBV_REREG_MR_CHANGE_ACCESS,
				    NULL, p + pg, (size_t)pg,
				    IBV_ACCESS_REMOTE_READ),
		       0, "rereg to read-only memory, read access");
		is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
				    p + 3 * pg, (size_t)pg, 0),
		       0, "rereg to mapped memory");
		is_int(ibv_dereg_mr(mr), 0, "dereg_mr");
	}
	test_rereg_access(&t, p + pg, (size_t)pg);
	munmap(p, (size_t)pg * 2);
	munmap(p + 3 * pg, (size_t)pg);
	t_close(&t);
}

static void test_state_machine(void)
{
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_init_attr ca;

	ok(t_open(&t, 16) == 0, "open");
	memset(&ca, 0, sizeof(ca));
	ca.send_cq = t.cq;
	ca.recv_cq = t.cq;
	ca.qp_type = IBV_QPT_RC;
	ca.cap.max_send_wr = 4;
	ca.cap.max_recv_wr = 4;
	ca.cap.max_send_sge = 33;
	errno = 0;
	ok(!ibv_create_qp(t.pd, &ca) && errno == EINVAL, "max_send_sge 33");
	ca.cap.max_send_sge = 1;
	ca.cap.max_inline_data = 16385; /* SOFT_MAX_INLINE + 1 */
	ok(!ibv_create_qp(t.pd, &ca) && errno == EINVAL, "inline 16385");
	qp = t_rc_qp(&t, 8, NULL);
	ok(qp && qp->qp_num > 1, "create_qp qpn %u", qp ? qp->qp_num : 0);
	is_int(t_qp_state(qp), IBV_QPS_RESET, "RESET");
	is_int(ibv_destroy_cq(t.cq), EBUSY, "cq busy");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "RESET->RTR");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT), EINVAL,
	       "INIT without PKEY/ACCESS");
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
				     IBV_QP_ACCESS_FLAGS | IBV_QP_TIMEOUT),
	       EINVAL, "INIT with a foreign attribute");
	a.port_num = 2;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
				     IBV_QP_ACCESS_FLAGS),
	       EINVAL, "port 2");
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
				     IBV_QP_ACCESS_FLAGS),
	       0, "RESET->INIT");
	is_int(t_qp_state(qp), IBV_QPS_INIT, "INIT");
	{
		struct ibv_send_wr wr, *bad = NULL;

		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_SEND;
		is_int(ibv_post_send(qp, &wr, &bad), EINVAL,
		       "post_send in INIT");
		ok(bad == &wr, "bad_wr set");
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = 1;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER),
	       EINVAL, "RoCE RTR without GRH");
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 1;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC),
	       EINVAL, "RTR without MIN_RNR_TIMER");
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER),
	       0, "INIT->RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN),
	       EINVAL, "RTS without MAX_QP_RD_ATOMIC");
	a.retry_cnt = 8;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC),
	       EINVAL, "retry_cnt 8");
	a.retry_cnt = 7;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC),
	       0, "RTR->RTS");
	memset(&a, 0, sizeof(a));
	is_int(ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_CAP, &ia), 0,
	       "query_qp");
	is_int(a.qp_state, IBV_QPS_RTS, "RTS");
	is_int(a.timeout, 14, "timeout kept");
	is_int(a.min_rnr_timer, 12, "min_rnr_timer kept");
	is_int(a.dest_qp_num, qp->qp_num, "dest_qp_num kept");
	is_int(a.qp_access_flags, IBV_ACCESS_REMOTE_WRITE, "access kept");
	ok(a.cap.max_send_wr >= 8 && ia.cap.max_inline_data == 64, "caps");
	a.qp_state = IBV_QPS_SQD;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "RTS->SQD");
	a.qp_state = IBV_QPS_RTS;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "SQD->RTS");
	a.qp_state = IBV_QPS_INIT;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "RTS->INIT");
	a.qp_state = IBV_QPS_ERR;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "RTS->ERR");
	is_int(t_qp_state(qp), IBV_QPS_ERR, "ERR");
	a.qp_state = IBV_QPS_RTS;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "ERR->RTS");
	a.qp_state = IBV_QPS_RESET;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "ERR->RESET");
	is_int(ibv_destroy_qp(qp), 0, "destroy_qp");
	t_close(&t);
}

static void test_loopback(void)
{
	struct tctx t;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct ibv_wc wc[4];
	char *buf = calloc(1, 8192);
	int n;

	ok(t_open(&t, 64) == 0, "open");
	a = t_rc_qp(&t, 16, NULL);
	b = t_rc_qp(&t, 16, NULL);
	mr = ibv_reg_mr(t.pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE);
	ok(a && b && mr, "two QPs and an MR");
	is_int(t_connect(a, b->qp_num, 0, 12, 7, 14, 7), 0, "connect a");
	is_int(t_connect(b, a->qp_num, 0, 12, 7, 14, 7), 0, "connect b");
	is_int(t_post_recv(b, buf + 4096, 4096, mr->lkey, 77), 0, "post_recv");
	strcpy(buf, "hello softrdma");
	is_int(t_post(a, IBV_WR_SEND, buf, 15, mr->lkey, 5, IBV_SEND_SIGNALED,
		      0, 0),
	       0, "post_send");
	n = t_wait(t.cq, wc, 2, 30000);
	is_int(n, 2, "two completions");
	if (n == 2) {
		struct ibv_wc *r =
			wc[0].opcode == IBV_WC_RECV ? &wc[0] : &wc[1];
		struct ibv_wc *s = r == &wc[0] ? &wc[1] : &wc[0];

		is_int(r->status, IBV_WC_SUCCESS, "recv ok");
		is_int(r->wr_id, 77, "recv wr_id");
		is_int(r->byte_len, 15, "recv byte_len");
		is_int(r->qp_num, b->qp_num, "recv qp_num");
		is_int(r->src_qp, a->qp_num, "recv src_qp");
		is_int(s->status, IBV_WC_SUCCESS, "send ok");
		is_int(s->opcode, IBV_WC_SEND, "send opcode");
		is_int(s->wr_id, 5, "send wr_id");
	}
	ok(!strcmp(buf + 4096, "hello softrdma"), "data arrived");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

/* chan_key -- the key of this run's one channel FIFO in /dev/shm, 0 if
 * there is not exactly one */
static unsigned chan_key(void)
{
	char pre[96];
	struct dirent *d;
	unsigned key = 0, n = 0;
	DIR *dir = opendir("/dev/shm");

	snprintf(pre, sizeof(pre), "%s-ch-", getenv("SOFTRDMA_SHM_PREFIX"));
	while (dir && (d = readdir(dir)))
		if (!strncmp(d->d_name, pre, strlen(pre))) {
			key = (unsigned)strtoul(d->d_name + strlen(pre), NULL,
						10);
			n++;
		}
	if (dir)
		closedir(dir);
	return n == 1 ? key : 0;
}

/*
 * test_stale_channel -- channel keys restart with each registry, so a
 * FIFO that a killed process left may sit at the path of the next
 * channel's key: that channel replaces it (it failed with EEXIST) and
 * carries a completion event
 */
static void test_stale_channel(void)
{
	struct tctx t, on_ch;
	struct ibv_comp_channel *ch;
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_cq *cq = NULL, *ev_cq;
	struct ibv_mr *mr = NULL;
	struct ibv_wc wc;
	struct pollfd pfd;
	struct stat st;
	char path[160] = "", *buf = calloc(1, 64);
	unsigned key;
	void *ev_ctx;
	ino_t stale;
	int n;

	ok(t_open(&t, 16) == 0, "open");
	ch = ibv_create_comp_channel(t.ctx);
	key = chan_key();
	ok(ch && key, "a channel, its FIFO in /dev/shm (key %u)", key);
	if (!ch || !key)
		goto out;
	is_int(ibv_destroy_comp_channel(ch), 0, "destroyed");
	snprintf(path, sizeof(path), "/dev/shm/%s-ch-%u",
		 getenv("SOFTRDMA_SHM_PREFIX"), key + 1);
	ok(!mkfifo(path, 0600) && !stat(path, &st),
	   "a stale FIFO at the next key's path");
	stale = st.st_ino;
	ch = ibv_create_comp_channel(t.ctx);
	ok(ch != NULL, "the next channel is created (%s)",
	   ch ? "ok" : strerror(errno));
	if (!ch)
		goto out;
	ok(!stat(path, &st) && st.st_ino != stale && S_ISFIFO(st.st_mode),
	   "on a FIFO of its own");
	cq = ibv_create_cq(t.ctx, 4, NULL, ch, 0);
	on_ch = t;
	on_ch.cq = cq;
	a = t_rc_qp(&on_ch, 4, NULL);
	b = t_rc_qp(&t, 4, NULL);
	mr = ibv_reg_mr(t.pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);
	ok(cq && a && b && mr && !t_connect(a, b->qp_num, 0, 12, 7, 14, 7) &&
		   !t_connect(b, a->qp_num, 0, 12, 7, 14, 7) &&
		   !t_post_recv(b, buf + 32, 32, mr->lkey, 2) &&
		   !ibv_req_notify_cq(cq, 0) &&
		   !t_post(a, IBV_WR_SEND, buf, 8, mr->lkey, 1,
			   IBV_SEND_SIGNALED, 0, 0),
	   "a send, its CQ armed");
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	is_int(poll(&pfd, 1, 30000), 1, "the channel's fd is readable");
	n = ibv_get_cq_event(ch, &ev_cq, &ev_ctx) ? 0 : 1;
	ok(n && ev_cq == cq, "its event names the CQ");
	if (n)
		ibv_ack_cq_events(ev_cq, 1);
	is_int(cq ? t_wait(cq, &wc, 1, 30000) : -1, 1, "the completion");
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
	is_int(ibv_destroy_comp_channel(ch), 0, "destroyed");
out:
	if (ch && !key)
		ibv_destroy_comp_channel(ch);
	if (*path && !ch)
		unlink(path); /* the stale FIFO the failed channel left */
	t_close(&t);
	free(buf);
}

int main(void)
{
	int fds;

	t_isolate("basic");
	fds = t_fd_count();
	test_device();
	test_objects();
	test_reg_range();
	test_state_machine();
	test_loopback();
	test_stale_channel();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	is_int(t_fd_count(), fds, "no fd left open");
	return done_testing();
}
