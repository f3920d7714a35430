/* SPDX-License-Identifier: MIT */
/* push.c -- SENDs of 4 KiB to 8 KiB and 64 bytes placed by their sender
 * straight into the responder's receive buffer when it lies in a sealed
 * memfd (data.c fast_push), also while the responder does not poll: each
 * completes at once, arrives once, in order, byte for byte, with its
 * immediate; sizes outside the window and a receive in private memory go
 * through the copy ring, with the same results, and so does a SEND
 * chained to one that the ring takes (two posted as one chain); so does
 * everything with
 * SOFTRDMA_NO_PUSH=1 (push-off.sh), SOFTRDMA_TEST_NOVM=1 (novm.sh) or
 * under valgrind */
#include "config.h"

#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

uint64_t softrdma_qp_placed(struct ibv_qp *qp);

#define NBUF  13	  /* a receive each */
#define BUFSZ (12u << 10) /* each receive: the largest SEND fits */
#define IMM   0x5eed1234u

/* one message: its length, whether it carries IMM, the receive it goes
 * into (its memory: 1 the memfd, 0 private), placed when pushes can,
 * posted in one chain with the message after it */
struct msg {
	uint32_t len;
	int imm, shared, placed, chain;
};

static const struct msg msgs[] = {
	{5000, 0, 1, 1, 0}, /* responder asleep: placed */
	{7000, 1, 1, 1, 0}, /* placed, with its immediate */
	{3000, 0, 1, 0, 0}, /* below the window: the ring */
	{8192, 0, 1, 1, 0}, /* rdmamsg's largest eager message, without */
	{8256, 0, 1, 1, 0}, /* and with a 64-byte header: the window's top */
	{8257, 0, 1, 0, 0}, /* past it: the ring */
	{4096, 0, 1, 1, 0}, /* the window's bottom */
	{8192, 0, 1, 0, 1}, /* chained to one the ring takes: the ring */
	{1800, 1, 1, 0, 0},
	{8192, 0, 1, 1, 1}, /* chained to one in the window: placed, */
	{7800, 0, 1, 0, 0}, /* not that one while the first's CQE waits */
	{6000, 0, 0, 0, 0}, /* private memory: the ring, and a back-off */
	{6000, 0, 1, 0, 0}, /* the back-off: the ring */
};
#define NMSG (sizeof(msgs) / sizeof(msgs[0]))

/* memfd_buf -- len bytes of a memfd sealed against shrinking, mapped
 * shared; its fd stays open so that the registration publishes it */
static char *memfd_buf(size_t len)
{
	int fd = memfd_create("push", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p = MAP_FAILED;

	if (fd < 0)
		return NULL;
	if (!ftruncate(fd, (off_t)len) &&
	    !fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK))
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* pair -- our RC QP connected to the peer's over the pipes */
static struct ibv_qp *pair(struct tctx *t, int rfd, int wfd)
{
	struct ibv_qp *qp = t_rc_qp(t, 64, NULL);
	uint32_t me, peer;

	if (!qp)
		return NULL;
	me = qp->qp_num;
	t_xsend(wfd, &me, 4);
	t_xrecv(rfd, &peer, 4);
	if (t_connect(qp, peer, 0, 1, 7, 14, 7))
		return NULL;
	return qp;
}

/* responder -- posts a receive per message, then for each message: says
 * ready, waits (not polling) until the sender has sent, and only then
 * polls its completion and checks it; reports 1 per message that
 * arrived right, then whether anything more arrived */
static int responder(int rfd, int wfd)
{
	struct tctx t;
	struct ibv_mr *ms, *mp;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	char *sh = memfd_buf(NBUF * BUFSZ), *pv = calloc(NBUF, BUFSZ), k;
	uint32_t i;
	int good, extra;

	if (!sh || !pv || t_open(&t, 64))
		return 1;
	ms = ibv_reg_mr(t.pd, sh, NBUF * BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	mp = ibv_reg_mr(t.pd, pv, NBUF * BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	qp = ms && mp ? pair(&t, rfd, wfd) : NULL;
	if (!qp)
		return 1;
	for (i = 0; i < NMSG; i++) {
		char *b = (msgs[i].shared ? sh : pv) + (i % NBUF) * BUFSZ;

		if (t_post_recv(qp, b, BUFSZ,
				msgs[i].shared ? ms->lkey : mp->lkey, 100 + i))
			return 1;
	}
	for (i = 0; i < NMSG; i++) {
		char *b = (msgs[i].shared ? sh : pv) + (i % NBUF) * BUFSZ;

		t_xsend(wfd, "r", 1);
		t_xrecv(rfd, &k, 1); /* sent (and, if placed, completed) */
		good = t_wait(t.cq, &wc, 1, 10000) == 1 &&
		       wc.status == IBV_WC_SUCCESS &&
		       wc.opcode == IBV_WC_RECV && wc.wr_id == 100 + i &&
		       wc.byte_len == msgs[i].len &&
		       !!(wc.wc_flags & IBV_WC_WITH_IMM) == msgs[i].imm &&
		       (!msgs[i].imm || wc.imm_data == htobe32(IMM)) &&
		       t_filled(b, msgs[i].len, 7 + i);
		if (!good)
			fprintf(stderr,
				"push: message %u: status %d wr_id %llu len "
				"%u\n",
				i, wc.status, (unsigned long long)wc.wr_id,
				wc.byte_len);
		t_xsend(wfd, &good, sizeof(good));
	}
	extra = t_wait(t.cq, &wc, 1, 50);
	t_xsend(wfd, &extra, sizeof(extra));
	ibv_destroy_qp(qp);
	ibv_dereg_mr(ms);
	ibv_dereg_mr(mp);
	t_close(&t);
	munmap(sh, NBUF * BUFSZ);
	free(pv);
	return 0;
}

int main(void)
{
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char *buf, k;
	int rfd, wfd, st, good, extra, off = 0, maps = t_can_map(), nosend = 0;
	uint64_t placed;
	const char *e = getenv("SOFTRDMA_NO_PUSH"),
		   *nm = getenv("SOFTRDMA_NO_MAP"),
		   *nv = getenv("SOFTRDMA_TEST_NOVM");
	uint32_t i;
	pid_t pid;

	/* what turns placing off: asked, nothing mapped, no pidfd_open */
	off = (e && e[0] == '1') || (nm && nm[0] == '1') ||
	      (nv && nv[0] == '1') || !maps;
	t_isolate("push");
	pid = t_spawn(responder, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	buf = malloc(2 * BUFSZ); /* a chain's two messages */
	if (!buf || t_open(&t, 64))
		bail_out("setup");
	mr = ibv_reg_mr(t.pd, buf, 2 * BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	qp = mr ? pair(&t, rfd, wfd) : NULL;
	if (!qp)
		bail_out("QP pair");
	for (i = 0; i < NMSG; i++) {
		const struct msg *m = &msgs[i];
		struct ibv_send_wr wr[2], *bad;
		struct ibv_sge sge[2];
		uint32_t j, nwr = m->chain ? 2 : 1, want = 0;

		t_xrecv(rfd, &k, 1); /* its receive is posted; it sleeps */
		if (i && msgs[i - 1].chain)
			goto sent; /* posted with the one before */
		memset(wr, 0, sizeof(wr));
		for (j = 0; j < nwr; j++) {
			const struct msg *mj = &msgs[i + j];

			t_fill(buf + j * BUFSZ, mj->len, 7 + i + j);
			sge[j] = (struct ibv_sge){(uintptr_t)(buf + j * BUFSZ),
						  mj->len, mr->lkey};
			wr[j].wr_id = i + j;
			wr[j].sg_list = &sge[j];
			wr[j].num_sge = 1;
			wr[j].opcode =
				mj->imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
			wr[j].imm_data = htobe32(IMM);
			wr[j].send_flags = IBV_SEND_SIGNALED;
			wr[j].next = j + 1 < nwr ? &wr[j + 1] : NULL;
			want += mj->placed && !off;
		}
		placed = softrdma_qp_placed(qp);
		if (ibv_post_send(qp, wr, &bad))
			nosend++;
		for (j = 0; j < nwr; j++) /* captured at post either way */
			memset(buf + j * BUFSZ, 0xee, msgs[i + j].len);
		for (j = 0; j < nwr; j++)
			if (msgs[i + j].placed && !off)
				/* complete now, though the responder does
				 * not poll */
				ok(t_wait(t.cq, &wc, 1, 5000) == 1 &&
					   wc.status == IBV_WC_SUCCESS &&
					   wc.wr_id == i + j,
				   "%u B: placed and complete while the "
				   "responder sleeps",
				   msgs[i + j].len);
		placed = softrdma_qp_placed(qp) - placed;
		if (nwr > 1)
			ok(placed == want, "%u B and the next: %u placed (%u)",
			   m->len, want, (unsigned)placed);
		else if (want)
			ok(placed == 1, "%u B: counted as placed", m->len);
		else
			ok(!placed, "%u B: not placed%s", m->len,
			   off && m->placed ? " (pushes off here)" : "");
	sent:
		t_xsend(wfd, "s", 1);
		t_xrecv(rfd, &good, sizeof(good));
		ok(good, "%u B: received once, intact, in order", m->len);
		if (!m->placed || off)
			ok(t_wait(t.cq, &wc, 1, 10000) == 1 &&
				   wc.status == IBV_WC_SUCCESS && wc.wr_id == i,
			   "%u B: the send completes", m->len);
	}
	is_int(nosend, 0, "every post taken");
	t_xrecv(rfd, &extra, sizeof(extra));
	is_int(extra, 0, "nothing more arrived");
	is_int(t_wait(t.cq, &wc, 1, 50), 0, "no send completed twice");
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "responder exited cleanly");
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	is_int(t_shm_count(), 0, "no shared memory left");
	return done_testing();
}
