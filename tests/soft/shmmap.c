/* SPDX-License-Identifier: MIT */
/* shmmap.c -- a peer's MR in a sealed memfd is mapped, not copied through
 * process_vm_*: WRITE, READ, atomics and large SENDs against it and against
 * an ordinary MR, every byte checked; a re-registered range refuses the
 * old rkey and the offsets it no longer covers; a forked child; the
 * mapping goes when its owner dies */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

#define MB	(1u << 20)
#define SMALL	(64u << 10) /* the range re-registered */
#define CTR	(MB - 8)    /* A's atomic counter */
#define NATOMIC 2000
#define ACCESS_R                                            \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* what the target tells the initiator */
struct info {
	uint64_t ino; /* A's memfd */
	uint64_t a, b;
	uint32_t rkey_a, rkey_b;
};

/* a check the initiator asks of the target: buffer, range, pattern
 * (from byte pat of it) */
struct chk {
	uint32_t which; /* 0: A, 1: B */
	uint32_t seed;
	uint64_t off, len, pat;
};

/* pattern seed's byte i (seed 0: zeros) */
static uint8_t pat(size_t i, unsigned seed)
{
	return seed ? (uint8_t)(i * 13 + seed * 7 + 1 + i / 251) : 0;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = pat(i, seed);
}

/* check -- n bytes at p are pattern seed from its byte from */
static int check(const uint8_t *p, size_t n, unsigned seed, size_t from)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != pat(from + i, seed))
			return 0;
	return 1;
}

/* sealed -- len bytes of a memfd sealed against shrinking, mapped shared */
static uint8_t *sealed(size_t len, uint64_t *ino)
{
	int fd = memfd_create("shmmap", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct stat st;
	void *p = MAP_FAILED;

	if (fd < 0)
		return NULL;
	if (!ftruncate(fd, (off_t)len) &&
	    !fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) && !fstat(fd, &st)) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		*ino = (uint64_t)st.st_ino;
	}
	/* the fd stays open: softrdma finds the file through it at
	 * registration (rdmamsg's pool closes it after) */
	return p == MAP_FAILED ? NULL : p;
}

/* mapped -- how many mappings of the file of inode ino this process has */
static int mapped(uint64_t ino)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	unsigned long long i;
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %llu", &i) == 1 && i == ino)
			n++;
	fclose(f);
	return n;
}

/* is_mapped -- count is want, where peers can map at all (else skipped:
 * softrdma copies with process_vm_* then, which the rest checks) */
static void is_mapped(int count, int want, const char *name)
{
	if (!t_can_map())
		ok(1, "%s # SKIP no pidfd_open here (valgrind 3.19?)", name);
	else if (!ok(count == want, "%s", name))
		diag("  %d mappings, want %d", count, want);
}

/* pair -- a new QP here, connected to a new one of the peer ('q') */
static struct ibv_qp *pair(struct tctx *t, int rfd, int wfd)
{
	struct ibv_qp *qp = t_rc_qp(t, 64, NULL);
	uint32_t me, peer;
	char k;

	if (!qp)
		return NULL;
	me = qp->qp_num;
	t_xsend(wfd, "q", 1);
	t_xsend(wfd, &me, 4);
	t_xrecv(rfd, &peer, 4);
	if (t_connect(qp, peer, ACCESS_R, 1, 7, 14, 7))
		return NULL;
	t_xrecv(rfd, &k, 1);
	return qp;
}

/* op -- one signalled WR of one SGE (an atomic: add / compare cmp, swap
 * swp); its completion status, -1: none */
static int op(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode o,
	      void *buf, uint32_t len, uint32_t lkey, uint64_t raddr,
	      uint32_t rkey, uint64_t cmp, uint64_t swp)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_wc wc;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = o;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (o == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    o == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp;
		wr.wr.atomic.swap = swp;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(qp, &wr, &bad) || t_wait(cq, &wc, 1, 10000) != 1)
		return -1;
	return wc.status;
}

/* fetch_adds -- n FETCH_ADD 1 at (addr, rkey) on qp, one at a time;
 * how many succeeded */
static int fetch_adds(struct ibv_qp *qp, struct ibv_cq *cq, uint64_t *res,
		      uint32_t lkey, uint64_t addr, uint32_t rkey, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (op(qp, cq, IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8, lkey, addr,
		       rkey, 1, 0) != IBV_WC_SUCCESS)
			break;
	return i;
}

/* serve_atomics -- the target's own FETCH_ADDs on its counter, through a
 * QP pair of its own, while the initiator adds to it too ('a') */
static int serve_atomics(struct tctx *t, struct ibv_mr *mr, uint8_t *a)
{
	struct ibv_qp *x = t_rc_qp(t, 64, NULL), *y = t_rc_qp(t, 64, NULL);
	uint64_t *res = (uint64_t *)(void *)(a + CTR - 8);
	int n = -1;

	if (x && y && !t_connect(x, y->qp_num, ACCESS_R, 1, 7, 14, 7) &&
	    !t_connect(y, x->qp_num, ACCESS_R, 1, 7, 14, 7))
		n = fetch_adds(x, t->cq, res, mr->lkey, (uintptr_t)a + CTR,
			       mr->rkey, NATOMIC);
	if (x)
		ibv_destroy_qp(x);
	if (y)
		ibv_destroy_qp(y);
	return n;
}

/* target -- the child: A (a sealed memfd) and B (heap) registered for
 * remote access; serves the initiator's requests until it says 'x' */
static int target(int rfd, int wfd)
{
	struct ibv_qp *qps[32];
	struct ibv_mr *mra, *mrb;
	struct tctx t;
	struct info in;
	struct ibv_wc wc;
	uint8_t *a, *b;
	int nqp = 0, r, i;
	char cmd;

	memset(&in, 0, sizeof(in));
	a = sealed(MB, &in.ino);
	b = calloc(1, MB);
	if (!a || !b || t_open(&t, 256))
		return 1;
	mra = ibv_reg_mr(t.pd, a, MB, IBV_ACCESS_LOCAL_WRITE | ACCESS_R);
	mrb = ibv_reg_mr(t.pd, b, MB, IBV_ACCESS_LOCAL_WRITE | ACCESS_R);
	if (!mra || !mrb)
		return 1;
	fill(a + MB / 2, MB / 4, 3); /* for the initiator's READs */
	fill(b + MB / 2, MB / 4, 4);
	in.a = (uintptr_t)a;
	in.b = (uintptr_t)b;
	in.rkey_a = mra->rkey;
	in.rkey_b = mrb->rkey;
	t_xsend(wfd, &in, sizeof(in));
	for (;;) {
		t_xrecv(rfd, &cmd, 1);
		if (cmd == 'q' && nqp < 32) { /* a new QP pair */
			uint32_t peer, me;

			qps[nqp] = t_rc_qp(&t, 64, NULL);
			me = qps[nqp] ? qps[nqp]->qp_num : 0;
			t_xrecv(rfd, &peer, 4);
			t_xsend(wfd, &me, 4);
			if (qps[nqp] &&
			    !t_connect(qps[nqp], peer, ACCESS_R, 1, 7, 14, 7))
				nqp++;
			t_xsend(wfd, "k", 1);
		} else if (cmd == 'c') { /* bytes as the initiator says */
			struct chk c;

			t_xrecv(rfd, &c, sizeof(c));
			r = c.off <= MB && c.len <= MB - c.off &&
			    check((c.which ? b : a) + c.off, c.len, c.seed,
				  c.pat);
			t_xsend(wfd, &r, sizeof(r));
		} else if (cmd == 's') { /* receive a SEND into B, check it */
			struct chk c;

			t_xrecv(rfd, &c, sizeof(c));
			r = nqp && c.len <= MB &&
			    !t_post_recv(qps[nqp - 1], b, (uint32_t)c.len,
					 mrb->lkey, 7);
			t_xsend(wfd, "k", 1);
			r = r && t_wait(t.cq, &wc, 1, 10000) == 1 &&
			    wc.status == IBV_WC_SUCCESS &&
			    wc.byte_len == c.len && check(b, c.len, c.seed, 0);
			t_xsend(wfd, &r, sizeof(r));
			/* the sender's memfd (inode c.pat) is mapped here: it
			 * was pulled without process_vm_readv */
			r = mapped(c.pat);
			t_xsend(wfd, &r, sizeof(r));
		} else if (cmd == 'a') {
			r = serve_atomics(&t, mra, a);
			t_xsend(wfd, &r, sizeof(r));
		} else if (cmd == 'r') { /* A again, a smaller range */
			ibv_dereg_mr(mra);
			mra = ibv_reg_mr(t.pd, a, SMALL,
					 IBV_ACCESS_LOCAL_WRITE | ACCESS_R);
			in.rkey_a = mra ? mra->rkey : 0;
			t_xsend(wfd, &in.rkey_a, 4);
		} else {
			break;
		}
	}
	for (i = 0; i < nqp; i++)
		ibv_destroy_qp(qps[i]);
	ibv_dereg_mr(mra);
	ibv_dereg_mr(mrb);
	t_close(&t);
	free(b);
	return 0;
}

/* asks -- the target checks its bytes: 1 when they are pattern seed from
 * its byte from */
static int asks(int rfd, int wfd, uint32_t which, uint64_t off, uint64_t len,
		uint32_t seed, uint64_t from)
{
	struct chk c = {which, seed, off, len, from};
	int r = 0;

	t_xsend(wfd, "c", 1);
	t_xsend(wfd, &c, sizeof(c));
	t_xrecv(rfd, &r, sizeof(r));
	return r;
}

/* refused -- a WR the target must refuse: REM_ACCESS_ERR on a fresh pair,
 * which the error leaves in ERR */
static int refused(struct tctx *t, int rfd, int wfd, enum ibv_wr_opcode o,
		   void *buf, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_qp *qp = pair(t, rfd, wfd);
	int st;

	if (!qp)
		return 0;
	st = op(qp, t->cq, o, buf, o == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 4096,
		lkey, raddr, rkey, 1, 0);
	ibv_destroy_qp(qp);
	return st == IBV_WC_REM_ACCESS_ERR;
}

/* forked -- a child of the initiator: its own context reaches A through
 * a mapping of its own (next to the one it inherited) */
static int forked(int rfd, int wfd, const struct info *in)
{
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint8_t *buf = calloc(1, 2 * 4096);
	int good = 0, had = mapped(in->ino);

	if (!buf || t_open(&t, 64))
		_exit(2);
	mr = ibv_reg_mr(t.pd, buf, 2 * 4096, IBV_ACCESS_LOCAL_WRITE);
	qp = mr ? pair(&t, rfd, wfd) : NULL;
	fill(buf, 4096, 6);
	if (qp &&
	    op(qp, t.cq, IBV_WR_RDMA_WRITE, buf, 4096, mr->lkey, in->a + 16384,
	       in->rkey_a, 0, 0) == IBV_WC_SUCCESS &&
	    op(qp, t.cq, IBV_WR_RDMA_READ, buf + 4096, 4096, mr->lkey,
	       in->a + 16384, in->rkey_a, 0, 0) == IBV_WC_SUCCESS &&
	    check(buf + 4096, 4096, 6, 0) &&
	    asks(rfd, wfd, 0, 16384, 4096, 6, 0))
		good = mapped(in->ino) > had || !t_can_map() ? 0 : 3;
	else
		good = 4;
	if (qp)
		ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	_exit(good);
}

/* sends -- a SEND of len bytes (pattern seed) from buf, received by the
 * target into B and checked there; *pulled: the target maps the file of
 * inode ino afterwards.  1 when every byte arrived */
static int sends(struct tctx *t, struct ibv_qp *qp, int rfd, int wfd,
		 uint8_t *buf, uint32_t lkey, uint32_t len, uint32_t seed,
		 uint64_t ino, int *pulled)
{
	struct chk c = {1, seed, 0, len, ino};
	char k;
	int r = 0, st;

	fill(buf, len, seed);
	t_xsend(wfd, "s", 1);
	t_xsend(wfd, &c, sizeof(c));
	t_xrecv(rfd, &k, 1);
	st = op(qp, t->cq, IBV_WR_SEND, buf, len, lkey, 0, 0, 0, 0);
	t_xrecv(rfd, &r, sizeof(r));
	t_xrecv(rfd, pulled, sizeof(*pulled));
	return st == IBV_WC_SUCCESS && r;
}

int main(void)
{
	struct tctx t;
	struct info in;
	struct ibv_qp *qp;
	struct ibv_mr *mr, *pm;
	uint8_t *buf, *p;
	uint64_t pino = 0, *res;
	uint32_t small;
	int rfd, wfd, st, r, i, n, gone;
	pid_t pid, kid;

	t_isolate("shmmap");
	pid = t_spawn(target, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	t_xrecv(rfd, &in, sizeof(in));
	buf = calloc(1, 2 * MB);
	p = sealed(MB, &pino); /* our own shareable send buffer */
	if (!buf || !p || t_open(&t, 256))
		bail_out("setup");
	mr = ibv_reg_mr(t.pd, buf, 2 * MB, IBV_ACCESS_LOCAL_WRITE);
	pm = ibv_reg_mr(t.pd, p, MB, IBV_ACCESS_LOCAL_WRITE);
	qp = mr && pm ? pair(&t, rfd, wfd) : NULL;
	if (!qp)
		bail_out("QP pair");
	is_int(mapped(in.ino), 0, "the target's memfd is not mapped yet");

	/* WRITE and READ, both MRs */
	fill(buf, MB / 4, 1);
	is_int(op(qp, t.cq, IBV_WR_RDMA_WRITE, buf, MB / 4, mr->lkey, in.a,
		  in.rkey_a, 0, 0),
	       IBV_WC_SUCCESS, "WRITE 256 KiB into the memfd MR");
	ok(asks(rfd, wfd, 0, 0, MB / 4, 1, 0), "every byte there");
	is_mapped(mapped(in.ino), 1, "by mapping the target's memfd");
	fill(buf, MB / 4, 2);
	is_int(op(qp, t.cq, IBV_WR_RDMA_WRITE, buf, MB / 4, mr->lkey, in.b,
		  in.rkey_b, 0, 0),
	       IBV_WC_SUCCESS, "WRITE 256 KiB into the heap MR");
	ok(asks(rfd, wfd, 1, 0, MB / 4, 2, 0), "every byte there");
	is_int(op(qp, t.cq, IBV_WR_RDMA_READ, buf, MB / 4, mr->lkey,
		  in.a + MB / 2, in.rkey_a, 0, 0),
	       IBV_WC_SUCCESS, "READ 256 KiB from the memfd MR");
	ok(check(buf, MB / 4, 3, 0), "every byte read");
	is_int(op(qp, t.cq, IBV_WR_RDMA_READ, buf, MB / 4, mr->lkey,
		  in.b + MB / 2, in.rkey_b, 0, 0),
	       IBV_WC_SUCCESS, "READ 256 KiB from the heap MR");
	ok(check(buf, MB / 4, 4, 0), "every byte read");
	/* odd length and address, up to the byte before the counter */
	fill(buf, 4097, 8);
	is_int(op(qp, t.cq, IBV_WR_RDMA_WRITE, buf, 4097, mr->lkey,
		  in.a + CTR - 4097, in.rkey_a, 0, 0),
	       IBV_WC_SUCCESS, "WRITE 4,097 B up to the counter");
	ok(asks(rfd, wfd, 0, CTR - 4097, 4097, 8, 0), "every byte there");
	ok(asks(rfd, wfd, 0, CTR - 4097 - 64, 64, 0, 0) &&
		   asks(rfd, wfd, 0, CTR, 8, 0, 0),
	   "the bytes around it untouched");
	is_int(op(qp, t.cq, IBV_WR_RDMA_WRITE, buf, 8, mr->lkey, in.a + MB - 4,
		  in.rkey_a, 0, 0),
	       IBV_WC_REM_ACCESS_ERR,
	       "WRITE past the MR's end: REM_ACCESS_ERR");
	ibv_destroy_qp(qp);
	qp = pair(&t, rfd, wfd);

	/* atomics: ours through the mapping and the target's own at once */
	res = (uint64_t *)(void *)(buf + 2 * MB - 8);
	t_xsend(wfd, "a", 1);
	n = fetch_adds(qp, t.cq, res, mr->lkey, in.a + CTR, in.rkey_a, NATOMIC);
	t_xrecv(rfd, &r, sizeof(r));
	is_int(n, NATOMIC, "our FETCH_ADDs");
	is_int(r, NATOMIC, "the target's own FETCH_ADDs, meanwhile");
	ok(op(qp, t.cq, IBV_WR_ATOMIC_CMP_AND_SWP, res, 8, mr->lkey, in.a + CTR,
	      in.rkey_a, 2 * NATOMIC, 0x1234) == IBV_WC_SUCCESS &&
		   *res == 2 * NATOMIC,
	   "CMP_SWP found %d: none lost", 2 * NATOMIC);
	ok(op(qp, t.cq, IBV_WR_ATOMIC_CMP_AND_SWP, res, 8, mr->lkey, in.a + CTR,
	      in.rkey_a, 2 * NATOMIC, 0x99) == IBV_WC_SUCCESS &&
		   *res == 0x1234,
	   "CMP_SWP that does not match");
	is_int(op(qp, t.cq, IBV_WR_RDMA_READ, buf, 8, mr->lkey, in.a + CTR,
		  in.rkey_a, 0, 0),
	       IBV_WC_SUCCESS, "READ the counter");
	ok(*(uint64_t *)(void *)buf == 0x1234, "swapped once");
	ok(fetch_adds(qp, t.cq, res, mr->lkey, in.b + CTR, in.rkey_b, 10) ==
			   10 &&
		   *res == 9,
	   "FETCH_ADD on the heap MR");

	/* SENDs: from our memfd the target maps it; from the heap not.  A
	 * target that has not run for 10 ms (a loaded machine) finds the
	 * SEND placed by us, as its HCA would have placed it (serve_remote,
	 * process_vm_writev): then it has nothing to map, and we try again */
	for (i = 0, st = 1; i < 3; i++) {
		st = st && sends(&t, qp, rfd, wfd, p, pm->lkey, MB / 2,
				 9 + (uint32_t)i, pino, &r);
		if (r)
			break;
		diag("  try %d: placed by the sender, not pulled", i + 1);
	}
	ok(st, "SEND 512 KiB from a memfd: every byte received");
	is_mapped(r, 1, "the target mapped our memfd to pull it");
	ok(sends(&t, qp, rfd, wfd, p + 100, pm->lkey, 40000, 13, pino, &r),
	   "SEND 40,000 B from the memfd at an odd offset");
	ok(sends(&t, qp, rfd, wfd, buf + 3, mr->lkey, 40000, 10, pino, &r),
	   "SEND 40,000 B from the heap: every byte received");

	/* A deregistered and registered again, 64 KiB of it */
	t_xsend(wfd, "r", 1);
	t_xrecv(rfd, &small, 4);
	ok(small && small != in.rkey_a, "A again: a new rkey");
	fill(buf, 4096, 11);
	ok(refused(&t, rfd, wfd, IBV_WR_RDMA_WRITE, buf, mr->lkey, in.a,
		   in.rkey_a),
	   "WRITE with the old rkey: REM_ACCESS_ERR");
	ok(refused(&t, rfd, wfd, IBV_WR_RDMA_WRITE, buf, mr->lkey, in.a + SMALL,
		   small),
	   "WRITE past the new range: REM_ACCESS_ERR");
	ok(refused(&t, rfd, wfd, IBV_WR_RDMA_WRITE, buf, mr->lkey,
		   in.a + SMALL - 2048, small),
	   "WRITE across the new range's end: REM_ACCESS_ERR");
	ok(asks(rfd, wfd, 0, 0, MB / 4, 1, 0), "none of them wrote a byte");
	ok(refused(&t, rfd, wfd, IBV_WR_RDMA_READ, buf, mr->lkey, in.a + MB / 2,
		   in.rkey_a),
	   "READ with the old rkey: REM_ACCESS_ERR");
	ok(refused(&t, rfd, wfd, IBV_WR_RDMA_READ, buf, mr->lkey, in.a + SMALL,
		   small),
	   "READ past the new range: REM_ACCESS_ERR");
	ok(refused(&t, rfd, wfd, IBV_WR_ATOMIC_FETCH_AND_ADD, res, mr->lkey,
		   in.a + CTR, in.rkey_a),
	   "FETCH_ADD with the old rkey: REM_ACCESS_ERR");
	ibv_destroy_qp(qp);
	qp = pair(&t, rfd, wfd);
	fill(buf, 8192, 5);
	is_int(op(qp, t.cq, IBV_WR_RDMA_WRITE, buf, 8192, mr->lkey, in.a + 4096,
		  small, 0, 0),
	       IBV_WC_SUCCESS, "WRITE with the new rkey");
	ok(asks(rfd, wfd, 0, 4096, 8192, 5, 0), "every byte there");
	ok(asks(rfd, wfd, 0, 0, 4096, 1, 0) &&
		   asks(rfd, wfd, 0, 12288, 4096, 1, 12288),
	   "and none around it");

	/* a forked child with a context of its own */
	in.rkey_a = small;
	kid = fork();
	if (kid == 0)
		forked(rfd, wfd, &in);
	st = -1;
	waitpid(kid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "forked child: WRITE, READ, through a mapping of its own");
	fill(buf, 4096, 12);
	is_int(op(qp, t.cq, IBV_WR_RDMA_WRITE, buf, 4096, mr->lkey,
		  in.a + 32768, small, 0, 0),
	       IBV_WC_SUCCESS, "WRITE after the fork");
	ok(asks(rfd, wfd, 0, 32768, 4096, 12, 0), "every byte there");

	/* the target dies while we map its memfd: WRITEs fail (it is found
	 * dead within 10 ms, as process_vm_* would find it) and the mapping
	 * goes within a second or so */
	is_mapped(mapped(in.ino) > 0, 1, "still mapped");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	usleep(20000);
	r = op(qp, t.cq, IBV_WR_RDMA_WRITE, buf, 4096, mr->lkey, in.a, small, 0,
	       0);
	is_int(r, IBV_WC_RETRY_EXC_ERR,
	       "WRITE to a dead target: RETRY_EXC_ERR");
	gone = 0;
	for (i = 0; i < 500 && !gone; i++) {
		struct ibv_wc wc;

		ibv_poll_cq(t.cq, 1, &wc);
		gone = mapped(in.ino) == 0;
		if (!gone)
			usleep(10000);
	}
	ok(gone, "its memfd unmapped within 5 s");

	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(pm);
	t_close(&t);
	munmap(p, MB);
	free(buf);
	close(rfd);
	close(wfd);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
