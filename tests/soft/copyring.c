/* SPDX-License-Identifier: MIT */
/*
 * copyring.c -- SENDs too long for a slot and up to SOFT_RING_MAX cross
 * through the sender's copy ring (issue 13): every size around the
 * limits, one and two SGEs, the ring full (the SGE list goes instead:
 * the first DEPTH are posted while the receiver is stopped) and
 * wrapping; every message arrives once, in order, intact, to a receiver
 * in another process.  Then the same with those up to SOFT_MAX_INLINE
 * posted inline (IBV_SEND_INLINE), the source scribbled over as each
 * post returns (the longer ones fill the ring: some inline ones find it
 * full, and their bytes are copied aside):
 * the first DEPTH, posted while the receiver is stopped, are served by
 * the sender itself (serve_remote) once the receiver has been still for
 * a liveness period, and must take the bytes captured at the post, not
 * the caller's buffers.  The ring is sized by the send queue (DEPTH
 * SENDs of SOFT_RING_MAX); a deep window goes past SOFT_RING_MIN, and
 * wraps; one message at a time always finds room, after the last one,
 * and goes back to the ring's start once past SOFT_RING_MIN.  A SEND
 * through the ring is one slot line (its offset there, the tail not
 * written), and one at a time the receiver takes it as a slot's copied
 * bytes: acknowledged by its cumulative count, no verdict in the slot.
 * A long one goes in in pieces after its slot is published (data.c
 * fast_ring): all of it is in before the post returns, and a receiver
 * takes none that is not all in (one whose count says half, the rest
 * scribbled over, as if its sender were still writing it), nor trusts a
 * count past the SEND's length.
 */
#include "config.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../soft/softrdma.h" /* the slot's flags: which path it took */
#include "../tap.h"
#include "common.h"

/* a send queue past SOFT_RING_SIZE's SENDs of SOFT_RING_MAX: the ring,
 * at its largest, can be full */
#define DEPTH 256
#define SLOT  (128u << 10) /* per WQE, in both buffers */
#define NMSG  1200
/* written into a free slot's tail before each post (post_one writes the
 * tail; a SEND through the ring does not, slot.h) */
#define TAIL_MARK 0x5a5a5a5a5a5a5a5aull

/* mostly near the ring's limit: DEPTH of them need twice the ring */
static const uint32_t sizes[] = {
	SOFT_SLOT_PAYLOAD + 1,
	SOFT_RING_MAX,
	SOFT_RING_MAX - 1,
	SOFT_RING_MAX + 1,
	8,
	SOFT_RING_MAX,
	90000,
	SOFT_SLOT_PAYLOAD,
	SOFT_RING_MAX - 1000,
	SOFT_RING_MAX,
	4096,
	SOFT_RING_MAX,
};

/* fill_pass's: the first two forged, the others one at a time around
 * the size that goes in pieces (SOFT_RING_PIPE) */
static const uint32_t fill_sizes[] = {
	SOFT_RING_MAX,	SOFT_RING_MAX,	    SOFT_RING_PIPE - 1,
	SOFT_RING_PIPE, SOFT_RING_PIPE + 1, 3 * SOFT_RING_PIPE + 7,
};
#define NFILL  (sizeof(fill_sizes) / sizeof(fill_sizes[0]))
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* this pass: inline or not, how many messages, how many outstanding at
 * most (set before the fork) */
static int inl;
static uint32_t nmsg = NMSG;
static uint32_t window = DEPTH;
static int filling; /* fill_pass: fill_sizes */

/* msg_len -- message msg's length (the inline pass: every third one of
 * SOFT_MAX_INLINE, so that some come when the ring is full) */
static uint32_t msg_len(uint32_t msg)
{
	if (filling)
		return fill_sizes[msg];
	return inl && msg % 3 == 0 ? SOFT_MAX_INLINE : sizes[msg % NSIZES];
}

/* msg_inline -- is message msg posted inline (in the inline pass, those
 * up to SOFT_MAX_INLINE) */
static int msg_inline(uint32_t msg)
{
	return inl && msg_len(msg) <= SOFT_MAX_INLINE;
}

static uint8_t pattern(uint32_t msg, uint32_t j)
{
	return (uint8_t)(msg * 131u + j * 7u + (j >> 9));
}

/* receiver -- take nmsg messages in order; report how many were right */
static int receiver(int rfd, int wfd)
{
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	uint32_t qpn, peer, msg, j, len;
	int i, good = 0, bad_len = 0, bad_data = 0, n;
	/* zeroed: bytes the sender places here itself (serve_remote's
	 * process_vm_writev) are not seen by valgrind in this process */
	uint8_t *buf = calloc(DEPTH, SLOT);

	if (!buf || t_open(&t, 2 * DEPTH))
		return 1;
	mr = ibv_reg_mr(t.pd, buf, (size_t)DEPTH * SLOT,
			IBV_ACCESS_LOCAL_WRITE);
	qp = t_rc_qp(&t, DEPTH, NULL);
	if (!mr || !qp)
		return 1;
	qpn = qp->qp_num;
	t_xsend(wfd, &qpn, sizeof(qpn));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_connect(qp, peer, 0, 1, 7, 14, 7))
		return 1;
	for (i = 0; i < DEPTH; i++)
		if (t_post_recv(qp, buf + (size_t)i * SLOT, SLOT, mr->lkey,
				(uint64_t)i))
			return 1;
	t_xsend(wfd, &qpn, sizeof(qpn));
	for (msg = 0; msg < nmsg;) {
		n = t_wait(t.cq, &wc, 1, 20000);
		if (n != 1 || wc.status != IBV_WC_SUCCESS)
			break;
		len = msg_len(msg);
		if (wc.byte_len != len) {
			bad_len++;
		} else {
			for (j = 0; j < len; j++)
				if (buf[wc.wr_id * SLOT + j] != pattern(msg, j))
					break;
			if (j == len)
				good++;
			else
				bad_data++;
		}
		memset(buf + wc.wr_id * SLOT, 0, SLOT);
		t_post_recv(qp, buf + wc.wr_id * SLOT, SLOT, mr->lkey,
			    wc.wr_id);
		msg++;
	}
	t_xsend(wfd, &good, sizeof(good));
	t_xsend(wfd, &bad_len, sizeof(bad_len));
	t_xsend(wfd, &bad_data, sizeof(bad_data));
	t_xrecv(rfd, &i, sizeof(i)); /* the sender is done */
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	return 0;
}

/* post_msg -- message msg from buffer slot b, in one SGE or two */
static int post_msg(struct ibv_qp *qp, uint8_t *b, uint32_t lkey, uint32_t msg)
{
	uint32_t len = msg_len(msg), j, cut = len / 3;
	struct ibv_sge sge[2];
	struct ibv_send_wr wr, *bad = NULL;
	int ret;

	for (j = 0; j < len; j++)
		b[j] = pattern(msg, j);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = msg;
	wr.sg_list = sge;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	sge[0] = (struct ibv_sge){(uintptr_t)b, len, lkey};
	wr.num_sge = 1;
	if (msg % 2 && cut) { /* the second piece from elsewhere */
		sge[0].length = cut;
		memmove(b + SLOT / 2, b + cut, len - cut);
		sge[1] = (struct ibv_sge){(uintptr_t)(b + SLOT / 2), len - cut,
					  lkey};
		wr.num_sge = 2;
	}
	if (msg_inline(msg))
		wr.send_flags |= IBV_SEND_INLINE;
	ret = ibv_post_send(qp, &wr, &bad);
	if (msg_inline(msg)) /* the bytes are the WQE's now */
		memset(b, 0xee, SLOT);
	return ret;
}

/* a sender with its receiver in a child process */
struct sender {
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct soft_slot *slots; /* our own segment's: how each message went */
	uint8_t *buf;
	pid_t child;
	int rfd, wfd;
};

/* sender_up -- QP, buffers and the receiver, connected (inl: the inline
 * pass's max_inline_data) */
static void sender_up(struct sender *x, const char *what)
{
	uint32_t qpn, peer;
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = DEPTH,
			.max_recv_wr = DEPTH,
			.max_send_sge = 4,
			.max_recv_sge = 4,
			.max_inline_data = inl ? SOFT_MAX_INLINE : 64},
	};

	x->buf = malloc((size_t)DEPTH * SLOT);
	if (!x->buf || t_open(&x->t, 2 * DEPTH))
		bail_out("open");
	x->mr = ibv_reg_mr(x->t.pd, x->buf, (size_t)DEPTH * SLOT,
			   IBV_ACCESS_LOCAL_WRITE);
	qa.send_cq = qa.recv_cq = x->t.cq;
	x->qp = ibv_create_qp(x->t.pd, &qa);
	if (!x->mr || !x->qp)
		bail_out("setup");
	x->child = t_spawn(receiver, &x->rfd, &x->wfd);
	if (x->child < 0)
		bail_out("fork");
	t_xrecv(x->rfd, &peer, sizeof(peer));
	qpn = x->qp->qp_num;
	t_xsend(x->wfd, &qpn, sizeof(qpn));
	ok(!t_connect(x->qp, peer, 0, 1, 7, 14, 7), "%s: connected", what);
	t_xrecv(x->rfd, &peer, sizeof(peer));
	x->slots =
		(struct soft_slot *)((char *)to_sqp(x->qp)->seg + SOFT_SEG_HDR);
}

/* sender_down -- the receiver's counts (good, wrong lengths, wrong
 * bytes), its exit, and all of ours gone */
static void sender_down(struct sender *x, const char *what, int counts[3])
{
	int st = 0;

	t_xrecv(x->rfd, &counts[0], sizeof(counts[0]));
	t_xrecv(x->rfd, &counts[1], sizeof(counts[1]));
	t_xrecv(x->rfd, &counts[2], sizeof(counts[2]));
	t_xsend(x->wfd, &counts[0], sizeof(counts[0]));
	waitpid(x->child, &st, 0);
	ok(WIFEXITED(st) && !WEXITSTATUS(st), "%s: receiver exits cleanly",
	   what);
	close(x->rfd);
	close(x->wfd);
	ibv_destroy_qp(x->qp);
	ibv_dereg_mr(x->mr);
	t_close(&x->t);
	free(x->buf);
}

/* stop -- the receiver stopped, for certain */
static void stop(pid_t child)
{
	int st;

	kill(child, SIGSTOP);
	waitpid(child, &st, WUNTRACED);
}

/* pass -- one sender/receiver pair through every size; inl says how */
static void pass(const char *what)
{
	struct sender x;
	struct ibv_wc wc[DEPTH];
	struct soft_slot *slots;
	uint32_t posted = 0, completed = 0, msg, len;
	int n, i, counts[3];
	int errs = 0, ring_ok = 1, ringed = 0, fits = 0, stopped = 1;
	uint64_t off, last_off = 0, ring_hi = 0; /* ring offsets seen */
	/* inl_full: inline SENDs that found the ring full */
	uint32_t wraps = 0, inl_full = 0;
	uint32_t served = 0; /* completed while the receiver was stopped */
	/* ring SENDs that left the slot's tail as it was (one line written)
	 * and, one at a time, those the receiver acknowledged by its
	 * cumulative count, the slot never written back */
	uint32_t one_line = 0, acked = 0;

	sender_up(&x, what);
	slots = x.slots;
	ok(to_sqp(x.qp)->ring_size == SOFT_RING_SIZE,
	   "%s: a ring of %u bytes, at most the send queue's SENDs of "
	   "SOFT_RING_MAX",
	   what, to_sqp(x.qp)->ring_size);
	stop(x.child); /* nothing is taken while the first go out */
	while (completed < nmsg) {
		while (posted < nmsg && posted - completed < window) {
			/* the slot is free: a mark in its tail */
			slots[posted & (DEPTH - 1)].raddr = TAIL_MARK;
			if (post_msg(x.qp,
				     x.buf + (size_t)(posted % DEPTH) * SLOT,
				     x.mr->lkey, posted))
				bail_out("post");
			/* the slot is ours until the WQE completes */
			msg = posted++;
			len = msg_len(msg);
			fits += len > SOFT_SLOT_PAYLOAD && len <= SOFT_RING_MAX;
			if (slots[msg & (DEPTH - 1)].flags & SOFT_SF_RING) {
				ringed++;
				one_line += slots[msg & (DEPTH - 1)].raddr ==
					    TAIL_MARK;
				if (len <= SOFT_SLOT_PAYLOAD ||
				    len > SOFT_RING_MAX)
					ring_ok = 0;
				memcpy(&off,
				       slots[msg & (DEPTH - 1)].payload +
					       SOFT_SLOT_RING_OFF,
				       8);
				wraps += off < last_off;
				last_off = off;
				if (off + len > ring_hi)
					ring_hi = off + len;
			} else if (msg_inline(msg) && len > SOFT_SLOT_PAYLOAD) {
				inl_full++;
			}
		}
		/* inline: still stopped until the first are served */
		if (stopped && posted >= window && (!inl || completed)) {
			kill(x.child, SIGCONT);
			stopped = 0;
		}
		n = t_wait(x.t.cq, wc, (int)(posted - completed), 20000);
		if (n <= 0) {
			for (i = 0; i < DEPTH; i++)
				diag("slot %d: state %#llx flags %#x len %u", i,
				     (unsigned long long)slots[i].state,
				     slots[i].flags, slots[i].len);
			break;
		}
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].wr_id != completed)
				errs++;
			/* one at a time, nothing posted since: its slot */
			if (window == 1 &&
			    (slots[completed & (DEPTH - 1)].flags &
			     SOFT_SF_RING) &&
			    (slots[completed & (DEPTH - 1)].state & 0xff) ==
				    SOFT_SLOT_READY)
				acked++;
			completed++;
		}
		if (stopped)
			served += (uint32_t)n;
	}
	ok(completed == nmsg, "%s: every send completed (%u)", what, completed);
	ok(!errs, "%s: in order, successfully (%d errors)", what, errs);
	if (inl)
		ok(served > 0,
		   "%s: %u served by the sender while the receiver "
		   "was stopped",
		   what, served);
	ok(ring_ok, "%s: only sizes from %u to %u bytes went through the ring",
	   what, SOFT_SLOT_PAYLOAD + 1, SOFT_RING_MAX);
	ok(one_line == (uint32_t)ringed,
	   "%s: %u of %d ring SENDs wrote their slot's first line only "
	   "(the offset there, the tail untouched)",
	   what, one_line, ringed);
	if (window == 1) {
		/* some, at least: a receiver descheduled for a liveness
		 * period is served by the sender, which writes a verdict */
		ok(acked > 0,
		   "%s: %u of %d ring SENDs acknowledged by the receiver's "
		   "cumulative count, no verdict in the slot",
		   what, acked, ringed);
		ok(ringed == fits,
		   "%s: the ring carried all %d of the %d messages it may",
		   what, ringed, fits);
		/* moving on, not rewriting the lines just read out, but
		 * within SOFT_RING_MIN of the start (data.c ring_take) */
		ok(ring_hi > SOFT_RING_MAX &&
			   ring_hi <= SOFT_RING_MIN + SOFT_RING_MAX &&
			   wraps > 0,
		   "%s: each after the last, back at the start past %u bytes "
		   "(%u times, used to %llu bytes)",
		   what, SOFT_RING_MIN, wraps, (unsigned long long)ring_hi);
	} else {
		/* the first DEPTH, and some later, need more than the ring */
		ok(ringed > 0 && ringed < fits,
		   "%s: the ring carried %d of the %d messages it may (the "
		   "others found it full)",
		   what, ringed, fits);
		ok(wraps > 0 && ring_hi > SOFT_RING_MIN,
		   "%s: it wrapped %u times, used to %llu bytes", what, wraps,
		   (unsigned long long)ring_hi);
	}
	if (inl)
		ok(inl_full > 0,
		   "%s: %u inline SENDs found the ring full (copied aside)",
		   what, inl_full);
	sender_down(&x, what, counts);
	ok(counts[0] == (int)nmsg,
	   "%s: every message received intact, in order (%d)", what, counts[0]);
	ok(!counts[1], "%s: no wrong length (%d)", what, counts[1]);
	ok(!counts[2], "%s: no wrong byte (%d)", what, counts[2]);
}

/* fill -- a ring SEND's fill count in its slot (SOFT_SLOT_RING_FILL) */
static _Atomic uint64_t *fill(struct soft_slot *s)
{
	return (_Atomic uint64_t *)(void *)(s->payload + SOFT_SLOT_RING_FILL);
}

/*
 * fill_pass -- two SENDs of SOFT_RING_MAX into an empty ring (pieces),
 * each posted while the receiver is stopped.  The first is made to look
 * half in (its count set back, its second half scribbled over): the
 * receiver runs 200 ms and must not take it; put back whole, it arrives
 * intact.  The second's count is set past its length: taken as whole.
 * Nothing of ours runs meanwhile (no verbs call: no serve_remote).  Then
 * sizes around SOFT_RING_PIPE, in two SGEs or one, each into an empty
 * ring.
 */
static void fill_pass(void)
{
	struct sender x;
	struct ibv_wc wc;
	struct soft_slot *slots;
	uint32_t msg, len = SOFT_RING_MAX, half = SOFT_RING_MAX / 2;
	uint64_t off, acked;
	uint8_t *save = malloc(half), *r;
	int counts[3];

	filling = 1;
	inl = 0;
	nmsg = NFILL;
	if (!save)
		bail_out("memory");
	sender_up(&x, "fill");
	slots = x.slots;

	stop(x.child);
	if (post_msg(x.qp, x.buf, x.mr->lkey, 0))
		bail_out("post");
	ok((slots[0].flags & SOFT_SF_RING) &&
		   atomic_load(fill(&slots[0])) == len,
	   "fill: a SEND of %u bytes through the ring, all in when the post "
	   "returns (%llu)",
	   len, (unsigned long long)atomic_load(fill(&slots[0])));
	memcpy(&off, slots[0].payload + SOFT_SLOT_RING_OFF, 8);
	r = to_sqp(x.qp)->ring + off;
	memcpy(save, r + half, half);
	memset(r + half, 0xee, half);
	atomic_store(fill(&slots[0]), half);
	acked = atomic_load(&to_sqp(x.qp)->seg->acked);
	kill(x.child, SIGCONT);
	usleep(200000);
	ok(atomic_load(&to_sqp(x.qp)->seg->acked) == acked,
	   "fill: one that is half in is not taken (200 ms)");
	memcpy(r + half, save, half);
	atomic_store(fill(&slots[0]), len);
	ok(t_wait(x.t.cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.wr_id == 0,
	   "fill: all in, it is taken");

	stop(x.child);
	if (post_msg(x.qp, x.buf + SLOT, x.mr->lkey, 1))
		bail_out("post");
	atomic_store(fill(&slots[1]), (uint64_t)len + 4096);
	kill(x.child, SIGCONT);
	ok(t_wait(x.t.cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.wr_id == 1,
	   "fill: a count past the length is taken as the whole");
	for (msg = 2; msg < NFILL; msg++)
		if (post_msg(x.qp, x.buf + (size_t)msg * SLOT, x.mr->lkey,
			     msg) ||
		    t_wait(x.t.cq, &wc, 1, 20000) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			break;
	ok(msg == NFILL, "fill: %u more, around %u bytes, completed", msg - 2,
	   SOFT_RING_PIPE);

	sender_down(&x, "fill", counts);
	ok(counts[0] == (int)NFILL && !counts[1] && !counts[2],
	   "fill: all arrived once, intact (%d good, %d wrong lengths, %d "
	   "wrong bytes)",
	   counts[0], counts[1], counts[2]);
	free(save);
	filling = 0;
}

int main(void)
{
	t_isolate("copyring");
	pass("registered");
	window = 1;
	pass("one at a time");
	window = DEPTH;
	inl = 1;
	nmsg = 4 * DEPTH; /* the served ones, the ring wrapped */
	pass("inline");
	fill_pass();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
