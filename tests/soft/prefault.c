/* SPDX-License-Identifier: MIT */
/*
 * prefault.c -- what softrdma sets up before the first message, as an HCA
 * has it ready when the verbs call returns, rather than in the middle of
 * the first traffic:
 *
 * - membarrier(2) is registered for the process when softrdma opens its
 *   first device (the biased context lock's revokers need it): a
 *   MEMBARRIER_CMD_PRIVATE_EXPEDITED is EPERM before and works after,
 *   with no hinted call made yet (registering with other threads alive
 *   costs the kernel an RCU grace period, 10-20 ms, which the first
 *   hinted lock used to pay with a message in flight);
 * - a new RC QP's queues (header, slots, receive queue mirror, CQEs) are
 *   all resident in its segment, its copy ring not at all (only the
 *   traffic that needs it touches it), for a few send and receive
 *   depths.
 *
 * Skipped where the kernel has no membarrier or no MADV_POPULATE_WRITE
 * (Linux 5.14): softrdma then leaves the pages to their first use.
 */
#include "config.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../soft/softrdma.h" /* the segment's header */
#include "../tap.h"
#include "common.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static long membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

/* populate_works -- the kernel has MADV_POPULATE_WRITE */
static int populate_works(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int works;

	if (p == MAP_FAILED)
		return 0;
	works = madvise(p, (size_t)pg, MADV_POPULATE_WRITE) == 0;
	munmap(p, (size_t)pg);
	return works;
}

/* resident -- pages of [from, to) (page numbers) of the mapping at p that
 * are in memory */
static size_t resident(void *p, size_t from, size_t to)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char v[512];
	size_t n = 0, i, k;

	while (from < to) {
		k = to - from < sizeof(v) ? to - from : sizeof(v);
		if (mincore((char *)p + from * (size_t)pg, k * (size_t)pg, v))
			return (size_t)-1;
		for (i = 0; i < k; i++)
			n += v[i] & 1;
		from += k;
	}
	return n;
}

static void test_queues(struct tctx *t, uint32_t send_wr, uint32_t recv_wr)
{
	struct ibv_qp_init_attr a = {
		.send_cq = t->cq,
		.recv_cq = t->cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = send_wr,
			.max_recv_wr = recv_wr,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};
	long pg = sysconf(_SC_PAGESIZE);
	const struct soft_seg_hdr *h;
	struct ibv_qp *qp = ibv_create_qp(t->pd, &a);
	size_t q, all, n, len;
	void *p;

	if (!qp) {
		ok(0, "create an RC QP of %u/%u WRs", send_wr, recv_wr);
		return;
	}
	p = t_seg_map(qp->qp_num, &len);
	if (!p) {
		ok(0, "map the segment of QP %u", qp->qp_num);
		goto out;
	}
	h = p;
	all = (len + (size_t)pg - 1) / (size_t)pg;
	q = h->ring_off / (size_t)pg;
	ok(h->ring_off && h->ring_off % (size_t)pg == 0 && q < all,
	   "%u/%u WRs: the copy ring starts on a page (%zu of %zu)", send_wr,
	   recv_wr, q, all);
	n = resident(p, 0, q);
	ok(n == q, "%u/%u WRs: all %zu pages of the queues resident (%zu)",
	   send_wr, recv_wr, q, n);
	n = resident(p, q, all);
	ok(n == 0, "%u/%u WRs: none of the ring's %zu pages (%zu)", send_wr,
	   recv_wr, all - q, n);
	munmap(p, len);
out:
	ibv_destroy_qp(qp);
}

int main(void)
{
	struct tctx t;
	long cmds;

	t_isolate("prefault");
	cmds = membarrier(MEMBARRIER_CMD_QUERY);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
		skip_one("no private expedited membarrier (%ld)", cmds);
		skip_one("no private expedited membarrier");
		if (t_open(&t, 64))
			bail_out("open");
	} else {
		errno = 0;
		ok(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) < 0 &&
			   errno == EPERM,
		   "membarrier: not registered before softrdma opens");
		if (t_open(&t, 64))
			bail_out("open");
		ok(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0,
		   "membarrier: registered once it has, before any hint");
	}
	if (!populate_works()) {
		int i;

		for (i = 0; i < 6; i++)
			skip_one("no MADV_POPULATE_WRITE (Linux 5.14)");
	} else {
		test_queues(&t, 16, 16);
		test_queues(&t, 256, 256);
	}
	t_close(&t);
	return done_testing();
}
