/* SPDX-License-Identifier: MIT */
/*
 * forge.c -- a hostile peer forges ring slots, segment headers and
 * registry entries against a victim QP (issue 9): the victim survives,
 * never copies its own memory into a receive buffer or a slot, fails the
 * offending connection as an HCA would, and its other connections work.
 * The layout words of the victim's own QP and SRQ segments (where its
 * receive mirror and outbox lie) are the peer's to read and can be
 * written by it: the victim never takes an address from them.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../soft/softrdma.h" /* slot, segment and registry layout */
#include "../tap.h"
#include "common.h"

#define SECRET_LEN 65536
#define RBUF	   16384
#define NRECV	   2
#define LATE_OFF   8192 /* the late receive of a layout case, in the first */

enum kase {
	K_SELF_PID,    /* SGE list naming the victim's secret, pid = victim */
	K_LONG_INLINE, /* 8208 copied bytes in a 960-byte payload */
	K_MANY_SGE,    /* nsge 1000 */
	K_WRAP_SGE,    /* SGE lengths that wrap to len */
	K_NO_SGE,      /* len 4096, nsge 0 */
	K_BAD_OPCODE,  /* opcode 99 */
	K_BAD_FLAGS,   /* unknown flag bits */
	K_READ_SECRET, /* chunked-READ request on a local-only MR */
	K_BAD_CHUNK,   /* chunked SEND, then an oversized chunk */
	K_RING_RANGE,  /* SEND from the copy ring, past its end */
	K_RING_HDR,    /* segment header with a copy ring beyond the mapping */
	K_RING_COPIED, /* SEND both in the copy ring and in the slot */
	K_REG_CTX,     /* registry entry with ctx_idx out of range */
	K_REG_SELF,    /* registry entry and header claiming the victim's pid */
	K_SEG_NSLOTS,  /* segment header with a ring larger than the mapping */
	K_OUTBOX,      /* the victim's receive outbox: far ahead, huge length */
	K_RQ_LAYOUT,   /* the victim's QP segment: mirror and outbox moved */
	K_SRQ_LAYOUT,  /* the victim's SRQ segment: the same */
	K_N,
};

static const char *const kname[K_N] = {
	"pid of the victim",
	"8208-byte inline",
	"1000 SGEs",
	"SGE lengths wrap",
	"no SGE for 4 KiB",
	"opcode 99",
	"unknown flags",
	"READ of a local MR",
	"oversized chunk",
	"copy ring offset past its end",
	"copy ring beyond the mapping",
	"copy ring and copied at once",
	"registry ctx_idx",
	"registry claims the victim's pid",
	"ring beyond the mapping",
	"forged receive outbox",
	"forged receive queue layout",
	"forged SRQ layout",
};

/* the victim's receive layout is forged, then it posts and is sent to */
static int layout(int k)
{
	return k == K_RQ_LAYOUT || k == K_SRQ_LAYOUT;
}

/* the connection is refused at RTR (nothing is ever read from the peer) */
static int refused(int k)
{
	return k == K_REG_CTX || k == K_REG_SELF || k == K_SEG_NSLOTS;
}

struct cmd {
	int32_t kase; /* -1: quit */
	int32_t vpid;
	uint32_t vqpn;
	uint32_t secret_rkey;
	uint64_t secret_addr;
};

struct rep {
	uint32_t fqpn;
	uint32_t status; /* the victim's verdict in our slot */
	uint32_t kind;	 /* final slot state */
	uint32_t leaked; /* payload holds secret bytes */
};

static char *secret; /* allocated before fork: the forger has the address */
static struct ibv_srq *srq; /* the victim's, for K_SRQ_LAYOUT */

static int has_secret(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i + 8 <= n; i++)
		if (!memcmp(p + i, "SECRET!!", 8))
			return 1;
	return 0;
}

/* forge_slot -- write the hostile message into slot 0 of our ring */
static void forge_slot(struct soft_slot *s, int k, const struct cmd *c)
{
	struct soft_remote_sge *r = (void *)s->payload;

	memset(s, 0, sizeof(*s));
	s->opcode = SOFT_OP_SEND;
	s->pid = c->vpid; /* always the victim's: it must never matter */
	switch (k) {
	case K_SELF_PID:
		s->len = 4096;
		s->nsge = 1;
		r[0].addr = c->secret_addr;
		r[0].len = 4096;
		break;
	case K_LONG_INLINE:
		s->len = 8208;
		s->flags = SOFT_SF_COPIED;
		break;
	case K_MANY_SGE:
		s->len = 4096;
		s->nsge = 1000;
		break;
	case K_WRAP_SGE:
		s->len = 4096;
		s->nsge = 2;
		r[0].addr = c->secret_addr;
		r[0].len = UINT64_MAX;
		r[1].addr = c->secret_addr;
		r[1].len = 4097;
		break;
	case K_NO_SGE:
		s->len = 4096;
		break;
	case K_BAD_OPCODE:
		s->opcode = 99;
		s->len = 16;
		s->flags = SOFT_SF_COPIED;
		break;
	case K_BAD_FLAGS:
		s->len = 16;
		s->flags = SOFT_SF_COPIED | 0x200; /* no such flag */
		break;
	case K_READ_SECRET:
		s->opcode = SOFT_OP_READ;
		s->flags = SOFT_SF_CHUNKED;
		s->len = 4096;
		s->rkey = c->secret_rkey;
		s->raddr = c->secret_addr;
		break;
	case K_BAD_CHUNK:
		s->len = 4096;
		s->flags = SOFT_SF_CHUNKED;
		break;
	case K_RING_RANGE:
		s->len = 4096;
		s->flags = SOFT_SF_RING;
		{
			uint64_t off = SOFT_RING_SIZE - 100;

			memcpy(s->payload + SOFT_SLOT_RING_OFF, &off, 8);
		}
		break;
	case K_RING_HDR: /* a sane offset into a ring the victim refused */
		s->len = 4096;
		s->flags = SOFT_SF_RING;
		break;
	case K_RING_COPIED:
		s->len = 16;
		s->flags = SOFT_SF_RING | SOFT_SF_COPIED;
		break;
	default: /* refused at RTR: a plausible SEND of the victim's memory */
		s->len = 4096;
		s->nsge = 1;
		r[0].addr = c->secret_addr;
		r[0].len = 4096;
		break;
	}
	atomic_store(&s->state, SOFT_SLOT_STATE(0, SOFT_SLOT_READY));
}

/* wait_kind -- until slot state is one of two kinds (2 s at most) */
static uint32_t wait_kind(struct soft_slot *s, uint32_t a, uint32_t b)
{
	uint32_t k = 0;
	int i;

	for (i = 0; i < 2000; i++) {
		k = (uint32_t)(atomic_load(&s->state) & 0xff);
		if (k == a || k == b)
			break;
		usleep(1000);
	}
	return k;
}

/* srq_seg_map -- the one SRQ segment of this run (the victim's), mapped
 * writable, its size in *len (NULL: none) */
static struct soft_srq_hdr *srq_seg_map(size_t *len)
{
	char pre[128], name[400];
	struct dirent *e;
	struct stat st;
	DIR *d = opendir("/dev/shm");
	void *p = MAP_FAILED;
	int fd = -1;

	snprintf(pre, sizeof(pre), "%s-srq-", getenv("SOFTRDMA_SHM_PREFIX"));
	while (d && fd < 0 && (e = readdir(d)))
		if (!strncmp(e->d_name, pre, strlen(pre))) {
			snprintf(name, sizeof(name), "/%s", e->d_name);
			fd = shm_open(name, O_RDWR, 0);
		}
	if (d)
		closedir(d);
	if (fd >= 0 && !fstat(fd, &st)) {
		*len = (size_t)st.st_size;
		p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	}
	if (fd >= 0)
		close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/* forge_layout -- move the victim's receive mirror and outbox (its QP's
 * segment, or its SRQ's) past any mapping, with more SGEs a WQE than
 * there are: 0, or -1 when the segment is not found */
static int forge_layout(int k, uint32_t vqpn)
{
	struct soft_seg_hdr *v;
	struct soft_srq_hdr *q;
	size_t len;

	if (k == K_RQ_LAYOUT) {
		v = t_seg_map(vqpn, &len);
		if (!v)
			return -1;
		v->rq_off = v->cq_off = 1ull << 46;
		v->rq_sge = 1u << 30;
		munmap(v, len);
		return 0;
	}
	q = srq_seg_map(&len);
	if (!q)
		return -1;
	q->rq_off = q->cq_off = 1ull << 46;
	q->sge = 1u << 30;
	q->entries = 1u << 31;
	munmap(q, len);
	return 0;
}

/* forger -- the child: one QP per case, forged before or after connect */
static int forger(int rfd, int wfd)
{
	struct tctx t;
	struct cmd c;
	struct rep rp;
	struct soft_reg *reg;
	struct soft_seg_hdr *h;
	struct soft_slot *s;
	struct ibv_qp *qp;
	size_t len;
	uint32_t slot;

	memset(secret, 'F', SECRET_LEN); /* our copy of the address */
	if (t_open(&t, 64))
		return 1;
	reg = t_reg_map(
		sizeof(struct soft_reg)); /* exists once a context is open */
	if (!reg)
		return 1;
	for (;;) {
		t_xrecv(rfd, &c, sizeof(c));
		if (c.kase < 0)
			break;
		memset(&rp, 0, sizeof(rp));
		qp = t_rc_qp(&t, 16, NULL);
		if (!qp)
			return 2;
		rp.fqpn = qp->qp_num;
		h = t_seg_map(qp->qp_num, &len);
		if (!h)
			return 3;
		s = (struct soft_slot *)((char *)h + SOFT_SEG_HDR);
		slot = qp->qp_num & (SOFT_MAX_QP - 1);
		if (c.kase == K_REG_CTX) {
			reg->qp[slot].ctx_idx = 0x7fffffff;
		} else if (c.kase == K_REG_SELF) {
			uint32_t vs = c.vqpn & (SOFT_MAX_QP - 1);

			reg->qp[slot].pid = reg->qp[vs].pid;
			reg->qp[slot].start = reg->qp[vs].start;
			h->pid = reg->qp[vs].pid;
			h->start = reg->qp[vs].start;
		} else if (c.kase == K_SEG_NSLOTS) {
			h->nslots = 1u << 20;
		} else if (c.kase == K_RING_HDR) {
			h->ring_size = 1u << 30;
		}
		if (refused(c.kase))
			forge_slot(s, c.kase, &c);
		t_xsend(wfd, &rp, sizeof(rp));
		/* the victim connected to us; we connect back and forge */
		t_xrecv(rfd, &c, sizeof(c));
		if (t_connect(qp, c.vqpn, 0, 1, 7, 1, 1))
			return 4;
		if (c.kase == K_OUTBOX) {
			/* the victim's own segment: its receive outbox */
			size_t vlen;
			struct soft_seg_hdr *v = t_seg_map(c.vqpn, &vlen);
			struct soft_shm_cqe *o;

			if (!v)
				return 5;
			o = (void *)((char *)v + v->cq_off);
			o->byte_len = 0x7fffffff;
			o->opcode = SOFT_OP_SEND;
			atomic_store(&v->rq_cons, 1ull << 40);
			munmap(v, vlen);
		} else if (layout(c.kase)) {
			int i;
			struct ibv_wc wc[NRECV + 1];

			if (forge_layout(c.kase, c.vqpn))
				return 5;
			t_xsend(wfd, &rp, sizeof(rp));
			t_xrecv(rfd, &c, sizeof(c)); /* it posted again */
			for (i = 0; i <= NRECV; i++)
				if (t_post(qp, IBV_WR_SEND, secret, 16, 0,
					   (uint64_t)i,
					   IBV_SEND_SIGNALED | IBV_SEND_INLINE,
					   0, 0))
					return 6;
			if (t_wait(t.cq, wc, NRECV + 1, 30000) != NRECV + 1)
				return 7;
			for (i = 0; i <= NRECV; i++)
				if (wc[i].status != IBV_WC_SUCCESS)
					return 8;
		} else if (!refused(c.kase)) {
			forge_slot(s, c.kase, &c);
			if (c.kase == K_BAD_CHUNK &&
			    wait_kind(s, SOFT_SLOT_XFER, SOFT_SLOT_DONE) ==
				    SOFT_SLOT_XFER) {
				s->chunk_len = 5000;
				memset(s->payload, 'F', SOFT_SLOT_PAYLOAD);
				atomic_store(&s->chunk_seq, 1);
			}
			wait_kind(s, SOFT_SLOT_DONE, SOFT_SLOT_DONE);
		}
		rp.status = s->status;
		rp.kind = (uint32_t)(atomic_load(&s->state) & 0xff);
		rp.leaked = (uint32_t)has_secret((char *)s->payload,
						 SOFT_SLOT_PAYLOAD);
		t_xsend(wfd, &rp, sizeof(rp));
		t_xrecv(rfd, &c, sizeof(c)); /* the victim is done */
		if (c.kase == K_REG_SELF) {  /* our entry back, to free it */
			reg->qp[slot].pid = (int32_t)getpid();
			h->pid = (int32_t)getpid();
		}
		munmap(h, len);
		ibv_destroy_qp(qp);
		t_xsend(wfd, &rp, sizeof(rp));
	}
	munmap(reg, sizeof(*reg));
	t_close(&t);
	return 0;
}

/* drain_async -- count QP_REQ_ERR events of qp (async_fd non-blocking) */
static int drain_async(struct ibv_context *ctx, struct ibv_qp *qp)
{
	struct ibv_async_event ev;
	int n = 0;

	while (!ibv_get_async_event(ctx, &ev)) {
		if (ev.event_type == IBV_EVENT_QP_REQ_ERR &&
		    ev.element.qp == qp)
			n++;
		ibv_ack_async_event(&ev);
	}
	return n;
}

/* post_recv -- a receive for case k's victim QP: on its SRQ, or its own */
static int post_recv(struct ibv_qp *qp, int k, char *buf, uint32_t len,
		     uint32_t lkey, uint64_t wr_id)
{
	return k == K_SRQ_LAYOUT ? t_post_srq_recv(srq, buf, len, lkey, wr_id)
				 : t_post_recv(qp, buf, len, lkey, wr_id);
}

/* one_case -- a fresh connection to the forger, one forgery */
static void one_case(struct tctx *t, struct ibv_mr *rmr, char *rbuf,
		     struct ibv_mr *smr, int rfd, int wfd, int k)
{
	struct cmd c;
	struct rep rp;
	struct ibv_qp *qp;
	struct ibv_wc wc[NRECV + 1];
	int i, n, good = 0, flushed = 0, other = 0;

	memset(rbuf, 0, RBUF * NRECV);
	qp = t_rc_qp(t, 16, k == K_SRQ_LAYOUT ? srq : NULL);
	if (!qp)
		bail_out("victim QP");
	memset(&c, 0, sizeof(c));
	c.kase = k;
	c.vpid = (int32_t)getpid();
	c.vqpn = qp->qp_num;
	c.secret_addr = (uintptr_t)secret;
	c.secret_rkey = smr->rkey;
	t_xsend(wfd, &c, sizeof(c));
	t_xrecv(rfd, &rp, sizeof(rp));
	/* the rkey of the secret is local-only: REMOTE_READ on the QP only */
	if (t_connect(qp, rp.fqpn,
		      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE, 1, 7, 1,
		      1))
		bail_out("victim connect");
	for (i = 0; i < NRECV; i++)
		if (post_recv(qp, k, rbuf + (size_t)i * RBUF, RBUF, rmr->lkey,
			      (uint64_t)i))
			bail_out("post_recv");
	t_xsend(wfd, &c, sizeof(c));
	if (layout(k)) {
		/* forged: one more WQE to publish (the mirror), then SENDs to
		 * all three */
		t_xrecv(rfd, &rp, sizeof(rp));
		if (post_recv(qp, k, rbuf + LATE_OFF, 64, rmr->lkey, NRECV))
			bail_out("post_recv");
		t_xsend(wfd, &c, sizeof(c));
	}
	if (refused(k)) {
		/* our SEND cannot reach a refused peer: retry exhaustion */
		t_post(qp, IBV_WR_SEND, rbuf + NRECV * RBUF - 64, 16, rmr->lkey,
		       99, IBV_SEND_SIGNALED, 0, 0);
	}
	/* poll (the victim's progress) until what the case expects came */
	if (k == K_READ_SECRET)
		n = t_wait(t->cq, wc, 1, 300);
	else
		n = t_wait(t->cq, wc,
			   refused(k) || layout(k)
				   ? NRECV + 1
				   : (k == K_SELF_PID ? 1 : NRECV),
			   30000);
	t_xrecv(rfd, &rp, sizeof(rp));
	for (i = 0; i < n; i++) {
		if (wc[i].wr_id == 99)
			other = wc[i].status == IBV_WC_RETRY_EXC_ERR;
		else if (wc[i].status == IBV_WC_SUCCESS)
			good++;
		else if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
			flushed++;
	}
	ok(!has_secret(rbuf, RBUF * NRECV) && !rp.leaked,
	   "%s: no secret byte left the victim", kname[k]);
	if (k == K_SELF_PID) {
		/* read from the connected peer only: its own bytes */
		ok(good == 1 && rbuf[0] == 'F' && rbuf[4095] == 'F',
		   "%s: data came from the peer's memory", kname[k]);
	} else if (k == K_READ_SECRET) {
		ok(rp.status == SOFT_NAK_REM_ACCESS &&
			   rp.kind == SOFT_SLOT_DONE,
		   "%s: remote access NAK (%u)", kname[k], rp.status);
		/* a responder's access violation, as on an HCA (rxe's
		 * do_class_ac_error) and between hosts: its QP to ERR */
		ok(t_qp_state(qp) == IBV_QPS_ERR, "%s: victim QP to ERR",
		   kname[k]);
	} else if (k == K_OUTBOX) {
		ok(n == NRECV && wc[0].wr_id == 0 &&
			   wc[0].status == IBV_WC_LOC_LEN_ERR &&
			   wc[1].wr_id == 1 &&
			   wc[1].status == IBV_WC_WR_FLUSH_ERR,
		   "%s: bounded by what was posted, length checked: "
		   "LOC_LEN_ERR, then flushed",
		   kname[k]);
		ok(t_qp_state(qp) == IBV_QPS_ERR, "%s: victim QP to ERR",
		   kname[k]);
	} else if (layout(k)) {
		for (i = 0; i < n && wc[i].status == IBV_WC_SUCCESS &&
			    wc[i].wr_id == (uint64_t)i && wc[i].byte_len == 16;
		     i++)
			;
		ok(i == NRECV + 1 && n == NRECV + 1 && rbuf[0] == 'F' &&
			   rbuf[15] == 'F' && rbuf[RBUF] == 'F' &&
			   rbuf[LATE_OFF] == 'F' && rbuf[LATE_OFF + 15] == 'F',
		   "%s: its own layout kept, all three SENDs delivered (%d/%d)",
		   kname[k], i, n);
		ok(t_qp_state(qp) == IBV_QPS_RTS, "%s: victim QP still RTS",
		   kname[k]);
	} else if (refused(k)) {
		ok(other, "%s: peer refused, send fails RETRY_EXC_ERR",
		   kname[k]);
		ok(rp.kind == SOFT_SLOT_READY,
		   "%s: the forged slot was never touched", kname[k]);
	} else {
		ok(rp.status == SOFT_NAK_INV_REQ && rp.kind == SOFT_SLOT_DONE,
		   "%s: invalid request NAK (%u)", kname[k], rp.status);
		ok(good == 0 && flushed == NRECV,
		   "%s: victim QP to ERR, receives flushed (%d/%d)", kname[k],
		   good, flushed);
		ok(drain_async(t->ctx, qp) == 1,
		   "%s: IBV_EVENT_QP_REQ_ERR raised", kname[k]);
	}
	drain_async(t->ctx, qp);
	while (ibv_poll_cq(t->cq, NRECV + 1, wc) > 0)
		;
	t_xsend(wfd, &c, sizeof(c));
	t_xrecv(rfd, &rp, sizeof(rp));
	ibv_destroy_qp(qp);
}

/* other_pair -- the victim's other connection still carries data */
static void other_pair(struct tctx *t, struct ibv_mr *rmr, char *rbuf)
{
	struct ibv_qp *a = t_rc_qp(t, 16, NULL), *b = t_rc_qp(t, 16, NULL);
	struct ibv_wc wc[2];
	int n;

	if (!a || !b || t_connect(a, b->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(b, a->qp_num, 0, 1, 7, 14, 7))
		bail_out("pair");
	memset(rbuf, 'o', 3000);
	memset(rbuf + RBUF, 0, 3000);
	t_post_recv(b, rbuf + RBUF, 3000, rmr->lkey, 1);
	t_post(a, IBV_WR_SEND, rbuf, 3000, rmr->lkey, 2, IBV_SEND_SIGNALED, 0,
	       0);
	n = t_wait(t->cq, wc, 2, 30000);
	ok(n == 2 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS && rbuf[RBUF] == 'o' &&
		   rbuf[RBUF + 2999] == 'o',
	   "the victim's other connection still works");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
}

int main(void)
{
	struct tctx t;
	struct ibv_mr *rmr, *smr;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct cmd c;
	char *rbuf;
	pid_t child;
	int rfd, wfd, k, st = 0, i;

	t_isolate("forge");
	signal(SIGPIPE, SIG_IGN);
	secret = malloc(SECRET_LEN);
	rbuf = malloc(RBUF * NRECV);
	if (!secret || !rbuf)
		bail_out("malloc");
	child = t_spawn(forger, &rfd, &wfd);
	if (child < 0)
		bail_out("fork");
	for (i = 0; i + 8 <= SECRET_LEN; i += 8)
		memcpy(secret + i, "SECRET!!", 8);
	if (t_open(&t, 64))
		bail_out("open");
	fcntl(t.ctx->async_fd, F_SETFL,
	      fcntl(t.ctx->async_fd, F_GETFL) | O_NONBLOCK);
	rmr = ibv_reg_mr(t.pd, rbuf, RBUF * NRECV, IBV_ACCESS_LOCAL_WRITE);
	smr = ibv_reg_mr(t.pd, secret, SECRET_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!rmr || !smr)
		bail_out("reg_mr");
	srq = ibv_create_srq(t.pd, &sa);
	if (!srq)
		bail_out("create_srq");
	for (k = 0; k < K_N; k++)
		one_case(&t, rmr, rbuf, smr, rfd, wfd, k);
	other_pair(&t, rmr, rbuf);
	memset(&c, 0, sizeof(c));
	c.kase = -1;
	t_xsend(wfd, &c, sizeof(c));
	waitpid(child, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forger exited cleanly (%d)",
	   st);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(rmr);
	t_close(&t);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	free(secret);
	free(rbuf);
	return done_testing();
}
