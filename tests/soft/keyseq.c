/* SPDX-License-Identifier: MIT */
/*
 * keyseq.c -- READs through another process's type 2 window check its key
 * without the key's stripe lock (a sequence count, soft_key_read in
 * soft/softrdma.h).  Two parts:
 *
 * - the owner binds and invalidates a window in a loop, each bind over
 *   bytes of its own, while the reader READs through the newest rkey and
 *   now and then an older one: no READ passes through a key whose
 *   invalidation had completed before it was posted, none fails through
 *   one whose invalidation had not begun when it completed, and every
 *   READ that passes returns the bytes of its bind (once over a sealed
 *   memfd, which the reader maps, once over heap memory, process_vm_*);
 * - the owner stops itself half-way through an invalidation
 *   (SOFTRDMA_TEST_KEY_STOP, soft/mw.c) and is killed there: a READ
 *   through the key fails at once rather than spinning, and after the
 *   robust mutex's recovery (another process's bind in the same stripe)
 *   the entry is whole again and READs through that stripe pass.
 */
#define _GNU_SOURCE
#include "config.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"
#include "../../soft/softrdma.h" /* registry layout: the entry's seq */

#define GENS  1500 /* binds of the hammer */
#define PIECE 256  /* bytes each bind covers, never reused */

/* what the owner tells the reader, in memory both map */
struct board {
	_Atomic uint32_t cur;  /* newest bound generation (0: none yet) */
	_Atomic uint32_t done; /* the owner has finished */
	uint64_t base;	       /* address of generation 0's piece */
	_Atomic uint32_t rkey[GENS + 1];
	_Atomic uint8_t inv_start[GENS + 1]; /* LOCAL_INV posted */
	_Atomic uint8_t inv_done[GENS + 1];  /* ... and completed */
};

struct xinfo {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
};

static struct board *bd;
static int use_memfd;

/* region -- len bytes of a sealed memfd mapped shared, or of the heap */
static uint8_t *region(size_t len)
{
	int fd;
	void *p;

	if (!use_memfd)
		return calloc(1, len);
	fd = memfd_create("keyseq", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)len) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK))
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p; /* fd stays open (peermap.c) */
}

/* an owner child's objects: context, region (MW_BIND), window, QP */
struct owner {
	struct tctx c;
	uint8_t *buf;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_qp *qp;
};

/* bind2 -- a type 2 bind of o's window over [addr, addr+len) for remote
 * READ, completed; 0 or -1 */
static int bind2(struct owner *o, uint32_t rkey, uint64_t addr, uint64_t len)
{
	struct ibv_wc wc;

	if (t_bind2(o->qp, o->mw, rkey, o->mr, addr, len,
		    IBV_ACCESS_REMOTE_READ) ||
	    t_wait(o->c.cq, &wc, 1, 30000) != 1 || wc.status != IBV_WC_SUCCESS)
		return -1;
	return 0;
}

/* local_inv -- LOCAL_INV of rkey on o's QP, completed; 0 or -1 */
static int local_inv(struct owner *o, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x1e;
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = rkey;
	if (ibv_post_send(o->qp, &wr, &bad) ||
	    t_wait(o->c.cq, &wc, 1, 30000) != 1 || wc.status != IBV_WC_SUCCESS)
		return -1;
	return 0;
}

/* owner_setup -- context, MR of len bytes (MW_BIND), window, QP connected
 * to the peer's (pipe exchange); 0 or an exit code */
static int owner_setup(struct owner *o, size_t len, int rfd, int wfd)
{
	struct xinfo me, peer;

	o->buf = region(len);
	if (!o->buf || t_open(&o->c, 16))
		return 10;
	o->mr = ibv_reg_mr(o->c.pd, o->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	o->qp = t_rc_qp(&o->c, 8, NULL);
	o->mw = ibv_alloc_mw(o->c.pd, IBV_MW_TYPE_2);
	if (!o->mr || !o->qp || !o->mw)
		return 11;
	memset(&me, 0, sizeof(me));
	me.qpn = o->qp->qp_num;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_connect(o->qp, peer.qpn, IBV_ACCESS_REMOTE_READ, 12, 7, 14, 7))
		return 12;
	return 0;
}

/* owner_close -- what owner_setup made but the region */
static void owner_close(struct owner *o)
{
	ibv_dealloc_mw(o->mw);
	ibv_destroy_qp(o->qp);
	ibv_dereg_mr(o->mr);
	t_close(&o->c);
}

/* hammer_owner -- bind generation g over its own piece (filled with g's
 * byte), let it live a few microseconds, invalidate it; GENS times */
static int hammer_owner(int rfd, int wfd)
{
	struct owner o;
	uint32_t g, rkey;
	char go;
	int ret;

	ret = owner_setup(&o, (size_t)(GENS + 1) * PIECE, rfd, wfd);
	if (ret)
		return ret;
	bd->base = (uintptr_t)o.buf;
	rkey = o.mw->rkey;
	for (g = 1; g <= GENS; g++) {
		uint8_t *p = o.buf + (size_t)g * PIECE;
		struct timespec ts = {0, (long)(g % 7) * 2000};

		memset(p, (int)(g & 0xff), PIECE);
		rkey = ibv_inc_rkey(rkey);
		if (bind2(&o, rkey, (uintptr_t)p, PIECE))
			return 13;
		atomic_store(&bd->rkey[g], rkey);
		atomic_store(&bd->cur, g);
		if (g % 7)
			nanosleep(&ts, NULL);
		atomic_store(&bd->inv_start[g], 1);
		if (local_inv(&o, rkey))
			return 14;
		atomic_store(&bd->inv_done[g], 1);
	}
	atomic_store(&bd->done, 1);
	/* the reader's last READ has completed: only then does the window's
	 * QP go (a READ still in flight to a destroyed QP would time out,
	 * RETRY_EXC_ERR, as on an HCA: not what this test counts) */
	if (read(rfd, &go, 1) < 0)
		return 15;
	owner_close(&o);
	return 0;
}

/* reconnect -- a READ that failed left qp in error: back to RTS */
static int reconnect(struct ibv_qp *qp, uint32_t dqpn)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE) ||
	       t_connect(qp, dqpn, 0, 12, 7, 14, 7);
}

/* read_once -- one READ of n bytes at raddr through rkey into buf; its
 * completion status (-1: none in 30 s) */
static int read_once(struct tctx *p, struct ibv_qp *qp, struct ibv_mr *mr,
		     uint8_t *buf, uint32_t n, uint64_t raddr, uint32_t rkey)
{
	struct ibv_wc wc;

	if (t_post(qp, IBV_WR_RDMA_READ, buf, n, mr->lkey, 7, IBV_SEND_SIGNALED,
		   raddr, rkey))
		return -1;
	if (t_wait(p->cq, &wc, 1, 30000) != 1)
		return -1;
	return (int)wc.status;
}

/* reader_qp -- a QP of p connected to the child's (pipe exchange), whose
 * QPN goes in *dqpn */
static struct ibv_qp *reader_qp(struct tctx *p, int rfd, int wfd,
				uint32_t *dqpn)
{
	struct xinfo me, peer;
	struct ibv_qp *qp = t_rc_qp(p, 8, NULL);

	if (!qp)
		bail_out("qp");
	memset(&me, 0, sizeof(me));
	me.qpn = qp->qp_num;
	t_xrecv(rfd, &peer, sizeof(peer));
	t_xsend(wfd, &me, sizeof(me));
	if (t_connect(qp, peer.qpn, 0, 12, 7, 14, 7))
		bail_out("connect");
	*dqpn = peer.qpn;
	return qp;
}

/* test_hammer -- READs against binds and invalidations in a loop */
static void test_hammer(int memfd)
{
	struct tctx p;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t buf[PIECE];
	uint32_t dqpn;
	unsigned passed = 0, refused = 0, stale = 0, late = 0, early = 0,
		 torn = 0, other = 0, n = 0, last = 0, per = 0;
	int rfd, wfd, st = -1;
	pid_t pid;

	use_memfd = memfd;
	memset(bd, 0, sizeof(*bd));
	pid = t_spawn(hammer_owner, &rfd, &wfd);
	if (pid < 0 || t_open(&p, 16))
		bail_out("setup");
	mr = ibv_reg_mr(p.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("reader setup");
	qp = reader_qp(&p, rfd, wfd, &dqpn);
	/* at most 4 READs per generation (the second through the one
	 * before), however the two processes are scheduled */
	while (!atomic_load(&bd->done)) {
		uint32_t g = atomic_load(&bd->cur), rkey;
		int before, s, k;

		if (g != last) {
			last = g;
			per = 0;
		}
		if (!g || per >= 4) {
			sched_yield();
			continue;
		}
		if (++per == 2 && g > 1)
			g--;
		n++;
		rkey = atomic_load(&bd->rkey[g]);
		before = atomic_load(&bd->inv_done[g]);
		s = read_once(&p, qp, mr, buf, PIECE,
			      bd->base + (uint64_t)g * PIECE, rkey);
		if (s == IBV_WC_SUCCESS) {
			passed++;
			late += before; /* invalidated before the post */
			for (k = 0; k < PIECE; k++)
				torn += buf[k] != (uint8_t)(g & 0xff);
		} else if (s == IBV_WC_REM_ACCESS_ERR) {
			refused++;
			stale += before;
			/* refused while its invalidation had not begun */
			early += !atomic_load(&bd->inv_start[g]);
			if (reconnect(qp, dqpn))
				bail_out("reconnect");
		} else {
			other++;
			diag("READ of generation %u: %s", g,
			     ibv_wc_status_str((enum ibv_wc_status)s));
			if (reconnect(qp, dqpn))
				bail_out("reconnect");
		}
	}
	t_xsend(wfd, "d", 1); /* no READ in flight: the owner may go */
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "%s owner: %d binds and "
	   "invalidations (exit %d)",
	   memfd ? "memfd" : "heap", GENS,
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	diag("%u READs: %u passed, %u refused (%u after the invalidation "
	     "completed)",
	     n, passed, refused, stale);
	ok(passed > 0 && stale > 0,
	   "%s: READs passed and READs through "
	   "invalidated keys were refused",
	   memfd ? "memfd" : "heap");
	is_int((int)late, 0,
	       "no READ passed through a key whose "
	       "invalidation had completed before its post");
	is_int((int)early, 0, "no READ failed through a key still valid");
	is_int((int)torn, 0,
	       "every READ that passed returned its bind's "
	       "bytes");
	is_int((int)other, 0, "no other completion status");
	close(rfd);
	close(wfd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&p);
}

/* offer -- bind o's window over 4096 bytes of its region filled with byte, tell the
 * parent (rkey, address), wait for its go; 0 or -1 */
static int offer(struct owner *o, int byte, int rfd, int wfd, uint32_t *rkey)
{
	struct xinfo me;
	char go;

	memset(o->buf, byte, 4096);
	me.qpn = o->qp->qp_num;
	me.rkey = ibv_inc_rkey(o->mw->rkey);
	me.addr = (uintptr_t)o->buf;
	if (bind2(o, me.rkey, me.addr, 4096))
		return -1;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &go, 1);
	*rkey = me.rkey;
	return 0;
}

/* dying_owner -- bind a window, let the parent READ through it, then
 * invalidate it with SOFTRDMA_TEST_KEY_STOP=2: stopped half-way */
static int dying_owner(int rfd, int wfd)
{
	struct owner o;
	uint32_t rkey;
	int ret;

	setenv("SOFTRDMA_TEST_KEY_STOP", "2", 1);
	ret = owner_setup(&o, 4096, rfd, wfd);
	if (ret)
		return ret;
	if (offer(&o, 0x3c, rfd, wfd, &rkey))
		return 13;
	local_inv(&o, rkey); /* stops inside */
	return 14;
}

/* stripe_owner -- a window in stripe *want's slot stripe, bound over
 * bytes of 0x7e: its bind takes the stripe's lock */
static int stripe_owner(int rfd, int wfd)
{
	struct owner o;
	struct ibv_mw *spare[4 * SOFT_NSTRIPES];
	uint32_t rkey;
	uint32_t want;
	int ret, i;

	t_xrecv(rfd, &want, sizeof(want));
	ret = owner_setup(&o, 4096, rfd, wfd);
	if (ret)
		return ret;
	for (i = 0; i < 4 * SOFT_NSTRIPES &&
		    soft_key_slot(o.mw->rkey) % SOFT_NSTRIPES != want;
	     i++) {
		spare[i] = o.mw;
		o.mw = ibv_alloc_mw(o.c.pd, IBV_MW_TYPE_2);
		if (!o.mw)
			return 15;
	}
	if (soft_key_slot(o.mw->rkey) % SOFT_NSTRIPES != want)
		return 16;
	if (offer(&o, 0x7e, rfd, wfd, &rkey))
		return 13;
	while (i--)
		ibv_dealloc_mw(spare[i]);
	owner_close(&o);
	return 0;
}

/* test_dying -- a writer killed half-way through an entry */
static void test_dying(void)
{
	struct tctx p;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct soft_reg *r;
	struct soft_reg_mr *e;
	struct xinfo peer;
	struct timespec t0, t1;
	uint8_t buf[64];
	uint32_t slot, want, dqpn;
	int rfd, wfd, st = -1, s, k, bad = 0;
	pid_t pid;

	use_memfd = 1;
	if (t_open(&p, 16))
		bail_out("open");
	r = t_reg_map(sizeof(
		struct soft_reg)); /* while our context keeps the registry */
	pid = t_spawn(dying_owner, &rfd, &wfd);
	if (!r || pid < 0)
		bail_out("setup");
	mr = ibv_reg_mr(p.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	qp = reader_qp(&p, rfd, wfd, &dqpn);
	t_xrecv(rfd, &peer, sizeof(peer));
	slot = soft_key_slot(peer.rkey);
	e = &r->mr[slot];
	s = read_once(&p, qp, mr, buf, 64, peer.addr, peer.rkey);
	ok(s == IBV_WC_SUCCESS && buf[0] == 0x3c && buf[63] == 0x3c,
	   "READ through the bound window");
	t_xsend(wfd, "g", 1);
	waitpid(pid, &st, WUNTRACED);
	ok(WIFSTOPPED(st), "owner stopped half-way through LOCAL_INV");
	ok(atomic_load(&e->seq) & 1, "its entry is being written (odd seq)");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	s = read_once(&p, qp, mr, buf, 64, peer.addr, peer.rkey);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	is_int(s, IBV_WC_REM_ACCESS_ERR,
	       "READ through the key being changed: remote access error");
	ok(t1.tv_sec - t0.tv_sec < 5, "... at once, no spinning");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	ok(WIFSIGNALED(st), "owner killed holding the stripe lock");
	close(rfd);
	close(wfd);
	ibv_destroy_qp(qp);

	/* another owner's bind in the same stripe: EOWNERDEAD, repaired */
	want = slot % SOFT_NSTRIPES;
	pid = t_spawn(stripe_owner, &rfd, &wfd);
	if (pid < 0)
		bail_out("fork");
	t_xsend(wfd, &want, sizeof(want));
	qp = reader_qp(&p, rfd, wfd, &dqpn);
	t_xrecv(rfd, &peer, sizeof(peer));
	ok(!(atomic_load(&e->seq) & 1) && !e->len && !e->access,
	   "the torn entry is whole again (even seq) and grants nothing");
	is_int(soft_key_slot(peer.rkey) % SOFT_NSTRIPES, (int)want,
	       "the new window shares the stripe");
	memset(buf, 0, sizeof(buf));
	s = read_once(&p, qp, mr, buf, 64, peer.addr, peer.rkey);
	for (k = 0; k < 64; k++)
		bad += buf[k] != 0x7e;
	ok(s == IBV_WC_SUCCESS && !bad, "READ through that stripe passes");
	t_xsend(wfd, "g", 1);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "second owner exits 0 "
	   "(%d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	close(rfd);
	close(wfd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&p);
	munmap(r, sizeof(*r));
}

int main(void)
{
	t_isolate("keyseq");
	bd = mmap(NULL, sizeof(*bd), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (bd == MAP_FAILED)
		bail_out("mmap");
	test_hammer(1);
	test_hammer(0);
	test_dying();
	munmap(bd, sizeof(*bd));
	done_testing();
}
