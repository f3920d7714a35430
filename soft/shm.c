/* SPDX-License-Identifier: MIT */
/* shm.c -- host-global registry, per-QP segments and peer liveness */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "softrdma.h"

#define SOFT_REG_MAGIC 0x736f66747265670aull
/* 2: 65,536 QPs and MRs, registry id; 3: bells; 4: MRs' memfds (peermap.c);
 * 5: key entries' sequence counts (soft_key_read); 6: a slot's header
 * split, its first part before the payload (soft/slot.h); 7: a ring
 * SEND's offset in the slot's first line (SOFT_SLOT_RING_OFF); 8: and its
 * fill count, the slot published before all of it is in; 9: a plain
 * store's ACK (soft_seg_hdr.cancel), a context's fence_wake; 10: the
 * tops of the QP and MR slots ever used; 11: a context's armed_cqs and a
 * segment's cq_wbits (data.c peer_wake); 12: XRC domains (xrc.c) */
#define SOFT_REG_VERSION 12
#define SOFT_SEG_MAGIC	 0x736f667473656731ull

struct soft_reg *soft_reg;
int32_t soft_self_pid;
/* 1: this process registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED
 * (gmb_register): a context of any process that starts to wait on events
 * reaches our CPUs with a barrier (soft_ctx_fence_wake), so until then our
 * wake-ups of it skip their fence (data.c peer_wake) */
int soft_gmb;
int soft_test_ack_stop; /* SOFTRDMA_TEST_ACK_STOP (data.c rx_ack) */
uint64_t soft_self_start;
static int reg_users;
pthread_mutex_t soft_reg_local_lock = PTHREAD_MUTEX_INITIALIZER;
/* the context slot the first attach took, for its soft_reg_ctx_alloc */
static int reg_claimed = -1;

/* soft_warn -- one line on stderr, prefixed like libibverbs' warnings */
void soft_warn(const char *fmt, ...)
{
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "softrdma: %s\n", line);
}

/* soft_prefix -- shm name prefix: $SOFTRDMA_SHM_PREFIX or softrdma-<uid> */
static void soft_name(char *buf, size_t len, const char *what, uint32_t n)
{
	const char *p = getenv("SOFTRDMA_SHM_PREFIX");
	char def[64];

	if (!p || !*p || strchr(p, '/')) {
		snprintf(def, sizeof(def), "softrdma-%u", (unsigned)geteuid());
		p = def;
	}
	if (n)
		snprintf(buf, len, "/%s-%s-%u", p, what, n);
	else
		snprintf(buf, len, "/%s-%s", p, what);
}

/* soft_now_ns -- monotonic clock (vDSO, no syscall) */
uint64_t soft_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* soft_pid_stat -- start time of pid, 0 when gone or a zombie */
uint64_t soft_pid_start(int32_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	p += 2;
	if (*p == 'Z' || *p == 'X')
		return 0;
	/* field 3 is the state; start time is field 22 */
	for (i = 3; i < 22 && p; i++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p || sscanf(p, "%llu", &start) != 1)
		return 0;
	return start ? start : 1;
}

/* soft_pid_alive -- pid runs and is the process that registered */
int soft_pid_alive(int32_t pid, uint64_t start)
{
	uint64_t s;

	if (pid <= 0)
		return 0;
	if (pid == soft_self_pid && start == soft_self_start)
		return 1;
	if (kill(pid, 0) < 0 && errno != EPERM)
		return 0;
	s = soft_pid_start(pid);
	return s && (!start || s == start);
}

/* entry_repair -- a key entry left odd (stripe lock held): key_repair */
static void entry_repair(struct soft_reg_mr *e)
{
	if (!(atomic_load_explicit(&e->seq, memory_order_relaxed) & 1))
		return;
	e->access = 0;
	e->addr = e->va = e->len = 0;
	e->qpn = 0;
	e->mr_key = 0;
	e->map_fd = 0;
	soft_key_write_end(e);
}

/*
 * key_repair -- m's holder died: if m is a key stripe, an entry of it the
 * holder was writing (odd seq) is torn.  It is made whole as one that
 * grants nothing: identity (key, kind, owner, PD) kept, so its owner can
 * still invalidate, bind again or free it; range, access, binding and
 * mapping cleared, as an invalidated window's.  Then seq is even again
 * and its readers (soft_key_read) go on.
 */
static void key_repair(pthread_mutex_t *m)
{
	struct soft_reg *r = soft_reg;
	uint32_t i, top;

	if (!r || m < &r->key_lock[0] || m >= &r->key_lock[SOFT_NSTRIPES])
		return;
	top = __atomic_load_n(&r->mr_top, __ATOMIC_RELAXED);
	for (i = (uint32_t)(m - &r->key_lock[0]); i < top && i < SOFT_MAX_MR;
	     i += SOFT_NSTRIPES)
		entry_repair(&r->mr[i]);
}

/* soft_stripe_lock -- lock a robust process-shared mutex (a key stripe's
 * entries repaired when its holder died) */
void soft_stripe_lock(pthread_mutex_t *m)
{
	if (pthread_mutex_lock(m) == EOWNERDEAD) {
		key_repair(m);
		pthread_mutex_consistent(m);
	}
}

/*
 * soft_key_stuck -- soft_key_read found entry slot being written for all
 * its tries.  A writer that is alive (the stripe taken): -1, the key is
 * being changed.  One that died: its stripe recovered here (key_repair),
 * and the entry read under the lock.  Never blocks.
 */
int soft_key_stuck(uint32_t slot, struct soft_reg_mr *out)
{
	pthread_mutex_t *m = &soft_reg->key_lock[slot % SOFT_NSTRIPES];
	struct soft_reg_mr *e = &soft_reg->mr[slot];
	int r = pthread_mutex_trylock(m);

	if (r == EOWNERDEAD) {
		key_repair(m);
		pthread_mutex_consistent(m);
	} else if (r) {
		return -1;
	}
	/* an odd seq with the lock free: no writer of ours left it (the
	 * registry is peer-writable); the entry is repaired the same way */
	entry_repair(e);
	*out = *e;
	pthread_mutex_unlock(m);
	return 0;
}

static int reg_init_mutex(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return 0;
}

/* reg_create -- create and initialise a fresh registry; fd is open */
static void *reg_create(int fd)
{
	struct soft_reg *r;
	int i;

	if (ftruncate(fd, sizeof(*r)) < 0)
		return NULL;
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED)
		return NULL;
	if (getrandom(r->id, sizeof(r->id), 0) != sizeof(r->id)) {
		munmap(r, sizeof(*r));
		return NULL;
	}
	reg_init_mutex(&r->lock);
	for (i = 0; i < SOFT_NSTRIPES; i++) {
		reg_init_mutex(&r->key_lock[i]);
		reg_init_mutex(&r->atomic_lock[i]);
	}
	r->version = SOFT_REG_VERSION;
	__atomic_store_n(&r->magic, SOFT_REG_MAGIC, __ATOMIC_RELEASE);
	return r;
}

/*
 * reg_trusted -- may we use this existing registry?  Whoever can write it
 * can read our keys and addresses, redirect our QPs and fill its tables:
 * only one that our euid owns and nobody else may open is used.
 */
static int reg_trusted(int fd, const char *name)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return 0;
	if (st.st_uid == geteuid() && !(st.st_mode & 077))
		return 1;
	SOFT_WARN("/dev/shm%s is owned by uid %u with mode %04o, not by uid %u "
		  "with mode 0600: not used (remove it, or set "
		  "SOFTRDMA_SHM_PREFIX)",
		  name, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
		  (unsigned)geteuid());
	return 0;
}

/* reg_open -- map an existing registry once its creator finished */
static struct soft_reg *reg_open(int fd)
{
	struct soft_reg *r;
	struct stat st;
	int i;

	for (i = 0; i < 1000; i++) {
		if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(*r))
			break;
		usleep(1000);
	}
	if ((size_t)st.st_size < sizeof(*r))
		return NULL;
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED)
		return NULL;
	for (i = 0; i < 1000; i++) {
		if (__atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) ==
			    SOFT_REG_MAGIC &&
		    r->version == SOFT_REG_VERSION)
			return r;
		if (r->magic == SOFT_REG_MAGIC)
			break; /* another softrdma's layout */
		usleep(1000);
	}
	munmap(r, sizeof(*r));
	return NULL;
}

/* gmb_register -- soft_gmb: membarrier(2) registered for the global
 * barriers of other processes (soft_ctx_fence_wake), once per process; a
 * forked child is not registered */
static void gmb_register(void)
{
	soft_gmb = !syscall(SYS_membarrier,
			    MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0);
}

/* atfork_child -- a forked child is a new registry user */
static void atfork_child(void)
{
	soft_self_pid = getpid();
	soft_tid_cached = 0; /* the thread that forked is another here */
	soft_self_start = soft_pid_start(soft_self_pid);
	soft_gmb = 0;
	gmb_register(); /* one thread now: no grace period to wait */
}

static void atfork_once(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

static int reg_ctx_take(struct soft_reg *r);
static int bias_register(void);

/*
 * soft_shm_make -- a shared-memory object made whole under no name and
 * named in one step (O_TMPFILE, then linkat): whoever opens the name
 * finds it finished, and a maker that stops or dies half-way leaves
 * nothing that bears it.  Made under its name instead, an opener that
 * found it unfinished waited a second, took it for a dead maker's,
 * removed the name and made another: two processes went on in two
 * registries handing out the same QPNs (tests/soft/regrace).
 */
void *soft_shm_make(const char *name, const char *what, size_t len,
		    void *(*make)(int fd))
{
	char path[160], fdpath[40];
	const char *stop = getenv("SOFTRDMA_TEST_MAKE_STOP");
	void *p;
	int fd, e;

	fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	p = make(fd);
	if (!p) {
		e = errno == EEXIST ? ENOMEM : errno;
		close(fd);
		errno = e;
		return NULL;
	}
	/* tests: stopped between making it and naming it */
	if (stop && !strcmp(stop, what))
		raise(SIGSTOP);
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc's link does not */
	if (linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH) < 0 &&
	    (errno == EEXIST ||
	     linkat(AT_FDCWD, fdpath, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0)) {
		e = errno;
		munmap(p, len);
		close(fd);
		errno = e;
		return NULL;
	}
	close(fd);
	return p;
}

/*
 * soft_reg_attach -- map the host registry (once per process).  Its
 * first context's slot is taken in the same hold of the lock that finds
 * the registry live: a process counts as a user from there on, so that
 * another's last detach (or the agent's reap) cannot remove the registry
 * between our attach and our slot, leaving us alone in a nameless one
 * whose QPNs and keys the host's next registry hands out again.
 */
int soft_reg_attach(void)
{
	char name[128];
	struct soft_reg *r = NULL;
	int fd, tries;

	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, atfork_once);
	pthread_mutex_lock(&soft_reg_local_lock);
	if (reg_users++) {
		pthread_mutex_unlock(&soft_reg_local_lock);
		return 0;
	}
	soft_self_pid = getpid();
	soft_tid_cached = 0; /* the thread that forked is another here */
	soft_self_start = soft_pid_start(soft_self_pid);
	soft_name(name, sizeof(name), "registry", 0);
	for (tries = 0; tries < 100 && !r; tries++) {
		r = soft_shm_make(name, "registry", sizeof(*r), reg_create);
		if (!r && errno != EEXIST) {
			/* no O_TMPFILE: made under its name, which an open
			 * meanwhile finds unfinished (reg_open waits) */
			fd = shm_open(name,
				      O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
				      0600);
			if (fd >= 0) {
				r = reg_create(fd);
				close(fd);
				if (!r) {
					shm_unlink(name);
					continue;
				}
			} else if (errno != EEXIST) {
				break;
			}
		}
		if (!r) { /* another's, named: join it */
			fd = shm_open(name, O_RDWR | O_CLOEXEC | O_NOFOLLOW,
				      0600);
			if (fd < 0)
				continue;
			if (!reg_trusted(fd, name)) {
				close(fd);
				errno = EACCES;
				break;
			}
			r = reg_open(fd);
			close(fd);
			if (!r) {
				/* its creator died half-way: start over */
				shm_unlink(name);
				continue;
			}
		}
		soft_stripe_lock(&r->lock);
		if (r->unlinked) {
			pthread_mutex_unlock(&r->lock);
			munmap(r, sizeof(*r));
			r = NULL;
			continue;
		}
		reg_claimed = reg_ctx_take(r);
		pthread_mutex_unlock(&r->lock);
	}
	if (!r) {
		reg_users--;
		pthread_mutex_unlock(&soft_reg_local_lock);
		if (errno != EACCES)
			errno = ENODEV;
		return -1;
	}
	soft_reg = r;
	pthread_mutex_unlock(&soft_reg_local_lock);
	bias_register(); /* or at the first biased lock, which falls back */
	if (!soft_gmb)
		gmb_register();
	/* tests/soft/regrace: stopped between the attach and the slot's use */
	if (getenv("SOFTRDMA_TEST_ATTACH_STOP"))
		raise(SIGSTOP);
	return 0;
}

/* soft_reg_id -- the registry's random id (zeros when none is attached) */
void soft_reg_id(uint8_t id[16])
{
	struct soft_reg *r = soft_reg;

	if (r)
		memcpy(id, r->id, sizeof(r->id));
	else
		memset(id, 0, sizeof(r->id));
}

/*
 * soft_exit_lock -- lock a mutex at exit, or give up after ~100 ms.  exit()
 * may run in a signal handler of a thread that holds the lock, or while
 * another process holding a registry lock is stopped: exit must not block.
 */
int soft_exit_lock(pthread_mutex_t *m)
{
	int i, r;

	for (i = 0; i < 100; i++) {
		r = pthread_mutex_trylock(m);
		if (r == EOWNERDEAD) {
			key_repair(m);
			pthread_mutex_consistent(m);
		}
		if (!r || r == EOWNERDEAD)
			return 0;
		if (r != EBUSY)
			break;
		usleep(1000);
	}
	return -1;
}

static void chan_unlink_all(struct soft_reg *r, uint32_t idx);
static void chan_cache_clear(void);

/* srq_unlink_all -- the SRQ segments a context slot has named */
static void srq_unlink_all(struct soft_reg *r, uint32_t idx)
{
	uint32_t n, hi = r->ctx[idx].srq_hi;

	if (hi > SOFT_MAX_SRQ_IDS)
		hi = SOFT_MAX_SRQ_IDS;
	for (n = 1; n <= hi; n++)
		soft_srq_seg_unlink(idx, n);
	r->ctx[idx].srq_hi = 0;
}

/* The last liveness answer of a sweep: entries come in runs of one pid. */
struct reg_alive_cache {
	int32_t pid;
	uint64_t start;
	int alive;
};

/* reg_alive -- soft_pid_alive, asked once per run of equal owners */
static int reg_alive(struct reg_alive_cache *c, int32_t pid, uint64_t start)
{
	if (c->pid != pid || c->start != start) {
		c->pid = pid;
		c->start = start;
		c->alive = soft_pid_alive(pid, start);
	}
	return c->alive;
}

/* reg_sweep -- free entries of dead processes; registry lock held.  At
 * exit a key stripe that cannot be had leaves its entry to later sweeps */
static int reg_sweep(struct soft_reg *r, int at_exit)
{
	int i, live = 0;
	struct reg_alive_cache c = {0, 0, 0};

	for (i = 0; i < SOFT_MAX_CTX; i++) {
		int32_t pid = atomic_load(&r->ctx[i].pid);

		if (!pid)
			continue;
		if (soft_pid_alive(pid, r->ctx[i].start)) {
			live++;
		} else {
			srq_unlink_all(r, (uint32_t)i);
			chan_unlink_all(r, (uint32_t)i);
			atomic_store(&r->ctx[i].pid, 0);
		}
	}
	for (i = 0; i < (int)r->qp_top && i < SOFT_MAX_QP; i++) {
		if (!r->qp[i].qpn ||
		    reg_alive(&c, r->qp[i].pid, r->qp[i].start))
			continue;
		soft_seg_unlink(r->qp[i].qpn);
		r->qp[i].qpn = 0;
	}
	for (i = 0; i < (int)r->mr_top && i < SOFT_MAX_MR; i++) {
		if (!r->mr[i].key ||
		    reg_alive(&c, r->mr[i].pid, r->mr[i].start))
			continue;
		if (!at_exit)
			soft_stripe_lock(&r->key_lock[i % SOFT_NSTRIPES]);
		else if (soft_exit_lock(&r->key_lock[i % SOFT_NSTRIPES]))
			continue;
		soft_key_write_begin(&r->mr[i]);
		r->mr[i].key = 0;
		soft_key_write_end(&r->mr[i]);
		pthread_mutex_unlock(&r->key_lock[i % SOFT_NSTRIPES]);
	}
	return live;
}

/* reg_last_out -- sweep the dead; with no live user left, remove the
 * registry's name (an attach that finds it unlinked starts a new one);
 * registry lock held.  Once only: a second last user (one whose context
 * went before the first one's detach, its own detach after) would remove
 * the name of the next registry, and whoever came then made a third */
static void reg_last_out(struct soft_reg *r, int at_exit)
{
	char name[128];

	if (r->unlinked)
		return;
	if (!reg_sweep(r, at_exit)) {
		soft_name(name, sizeof(name), "registry", 0);
		r->unlinked = 1;
		shm_unlink(name);
	}
}

/* soft_reg_detach -- drop one user; the host's last user unlinks all */
void soft_reg_detach(void)
{
	struct soft_reg *r;

	pthread_mutex_lock(&soft_reg_local_lock);
	if (--reg_users) {
		pthread_mutex_unlock(&soft_reg_local_lock);
		return;
	}
	r = soft_reg;
	soft_reg = NULL;
	chan_cache_clear(); /* keys start again with the next registry */
	/* tests/soft/regrace: stopped after its context went, before this */
	if (getenv("SOFTRDMA_TEST_DETACH_STOP"))
		raise(SIGSTOP);
	soft_stripe_lock(&r->lock);
	reg_last_out(r, 0);
	pthread_mutex_unlock(&r->lock);
	munmap(r, sizeof(*r));
	pthread_mutex_unlock(&soft_reg_local_lock);
}

/*
 * soft_reg_reap -- free what dead processes left in the host registry
 * and remove it when nobody uses it: the agent's last act, a second
 * after its last client went (a killed one too), as an HCA's resources
 * go with the process that held them.  Else a process killed outright
 * (SIGKILL, timeout -k) left its QPs' segments, channels and the
 * registry in /dev/shm until the next process of the host.  Only the
 * registry of our prefix (the names a sweep removes are ours); never
 * blocks on a lock held by a stopped process.
 */
void soft_reg_reap(void)
{
	char name[128];
	struct soft_reg *r;
	int fd;

	soft_name(name, sizeof(name), "registry", 0);
	fd = shm_open(name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	r = reg_trusted(fd, name) ? reg_open(fd) : NULL;
	close(fd);
	if (!r)
		return;
	if (!soft_exit_lock(&r->lock)) {
		reg_last_out(r, 1);
		pthread_mutex_unlock(&r->lock);
	}
	munmap(r, sizeof(*r));
}

/* reg_ctx_take -- a free context slot, ours from now on; -1 if none;
 * registry lock held */
static int reg_ctx_take(struct soft_reg *r)
{
	int i, idx = -1;

	reg_sweep(r, 0);
	for (i = 0; i < SOFT_MAX_CTX; i++) {
		if (!atomic_load(&r->ctx[i].pid)) {
			idx = i;
			break;
		}
	}
	if (idx >= 0) {
		r->ctx[idx].start = soft_self_start;
		r->ctx[idx].srq_hi = 0;
		atomic_store(&r->ctx[idx].armed, 0);
		atomic_store(&r->ctx[idx].armed_cqs, 0);
		atomic_store(&r->ctx[idx].fence_wake, 0);
		/* a previous owner's bells: nobody's now */
		for (i = 0; i < SOFT_BELLS / 64; i++)
			atomic_store(&r->bells[idx].w[i], 0);
		atomic_store(&r->ctx[idx].pid, soft_self_pid);
	}
	return idx;
}

/* soft_reg_ctx_alloc -- a registry slot for one device context: the one
 * the attach took, or another */
int soft_reg_ctx_alloc(void)
{
	struct soft_reg *r = soft_reg;
	int idx = __atomic_exchange_n(&reg_claimed, -1, __ATOMIC_ACQ_REL);

	if (idx < 0) {
		soft_stripe_lock(&r->lock);
		idx = reg_ctx_take(r);
		pthread_mutex_unlock(&r->lock);
	}
	if (idx < 0)
		errno = ENOMEM;
	return idx;
}

/*
 * soft_ctx_fence_wake -- from now on the producers that give ctx's QPs
 * work fence before they look at its armed bits and bells (data.c
 * peer_wake); before, one whose process registered (soft_gmb) looked at
 * nothing.  The global membarrier after the flag is the fence they left
 * out: a producer's work stored before it reached that CPU is seen by our
 * look after the arm (or the bells' take) that follows; one stored after
 * it comes before that producer's look at the flag, which is 1.  Once per
 * context, by its owner (a forked child's copy waits on nothing).
 */
void soft_ctx_fence_wake(struct soft_context *ctx)
{
	struct soft_reg_ctx *c = &soft_reg->ctx[ctx->reg_idx];

	if (ctx->owner_pid != soft_self_pid ||
	    atomic_load_explicit(&c->fence_wake, memory_order_relaxed))
		return;
	atomic_store(&c->fence_wake, 1);
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0))
		usleep(1000); /* refused here: stores drain long before */
}

/* soft_reg_ctx_free -- release a context's slot */
void soft_reg_ctx_free(int idx)
{
	soft_stripe_lock(&soft_reg->lock);
	/* only our own: a forked child never frees its parent's slot */
	if (atomic_load(&soft_reg->ctx[idx].pid) == soft_self_pid) {
		chan_unlink_all(soft_reg, (uint32_t)idx);
		atomic_store(&soft_reg->ctx[idx].armed, 0);
		atomic_store(&soft_reg->ctx[idx].pid, 0);
	}
	pthread_mutex_unlock(&soft_reg->lock);
}

/* soft_reg_pd_id -- a host-unique protection domain id */
uint32_t soft_reg_pd_id(void)
{
	uint32_t id;

	soft_stripe_lock(&soft_reg->lock);
	id = ++soft_reg->next_pd_id;
	if (!id)
		id = ++soft_reg->next_pd_id;
	pthread_mutex_unlock(&soft_reg->lock);
	return id;
}

/* reg_free_qp -- a free QP slot, searched round-robin from the hint */
static int reg_free_qp(struct soft_reg *r)
{
	uint32_t i, s;

	for (i = 0; i < SOFT_MAX_QP; i++) {
		s = (r->qp_hint + i) % SOFT_MAX_QP;
		if (!r->qp[s].qpn) {
			r->qp_hint = (s + 1) % SOFT_MAX_QP;
			if (s >= r->qp_top)
				r->qp_top = s + 1;
			return (int)s;
		}
	}
	return -1;
}

/* reg_free_mr -- a free MR slot, searched round-robin from the hint */
static int reg_free_mr(struct soft_reg *r)
{
	uint32_t i, s;

	for (i = 0; i < SOFT_MAX_MR; i++) {
		s = (r->mr_hint + i) % SOFT_MAX_MR;
		if (!r->mr[s].key) {
			r->mr_hint = (s + 1) % SOFT_MAX_MR;
			if (s >= r->mr_top)
				__atomic_store_n(&r->mr_top, s + 1,
						 __ATOMIC_RELAXED);
			return (int)s;
		}
	}
	return -1;
}

/* soft_reg_qp_alloc -- allocate a host-unique QPN (never 0 or 1) */
int soft_reg_qp_alloc(uint32_t pd_id, int ctx_idx, uint32_t type, uint32_t *qpn)
{
	struct soft_reg *r = soft_reg;
	int slot = -1;
	uint32_t gen;

	soft_stripe_lock(&r->lock);
	slot = reg_free_qp(r);
	if (slot < 0) {
		reg_sweep(r, 0);
		slot = reg_free_qp(r);
	}
	if (slot < 0) {
		pthread_mutex_unlock(&r->lock);
		errno = ENOMEM;
		return -1;
	}
	gen = r->qp_gen++ % SOFT_QP_GENS + 1;
	r->qp[slot].qpn = gen << SOFT_QP_SLOT_BITS | (uint32_t)slot;
	r->qp[slot].pid = soft_self_pid;
	r->qp[slot].start = soft_self_start;
	r->qp[slot].pd_id = pd_id;
	r->qp[slot].ctx_idx = (uint32_t)ctx_idx;
	r->qp[slot].qp_type = type;
	atomic_store(&r->qp[slot].state, IBV_QPS_RESET);
	atomic_store(&r->qp[slot].access, 0);
	atomic_store(&r->qp[slot].dest_rd_atom, 0);
	*qpn = r->qp[slot].qpn;
	pthread_mutex_unlock(&r->lock);
	return slot;
}

/* soft_reg_qp_free -- release a QPN */
void soft_reg_qp_free(int slot)
{
	soft_stripe_lock(&soft_reg->lock);
	if (soft_reg->qp[slot].pid == soft_self_pid)
		soft_reg->qp[slot].qpn = 0;
	pthread_mutex_unlock(&soft_reg->lock);
}

/* soft_reg_qp_lookup -- copy the registry entry of qpn; -1 if none */
int soft_reg_qp_lookup(uint32_t qpn, struct soft_reg_qp *out)
{
	uint32_t slot = qpn & (SOFT_MAX_QP - 1);
	int ret = -1;

	soft_stripe_lock(&soft_reg->lock);
	if (qpn && soft_reg->qp[slot].qpn == qpn) {
		*out = soft_reg->qp[slot];
		ret = (int)slot;
	}
	pthread_mutex_unlock(&soft_reg->lock);
	return ret;
}

/* soft_reg_mr_alloc -- allocate a key and publish the MR */
int soft_reg_mr_alloc(const struct soft_reg_mr *mr, uint32_t *key)
{
	struct soft_reg *r = soft_reg;
	int slot = -1;
	uint32_t gen;
	pthread_mutex_t *m;

	soft_stripe_lock(&r->lock);
	slot = reg_free_mr(r);
	if (slot < 0) {
		reg_sweep(r, 0);
		slot = reg_free_mr(r);
	}
	if (slot < 0) {
		pthread_mutex_unlock(&r->lock);
		errno = ENOMEM;
		return -1;
	}
	m = &r->key_lock[slot % SOFT_NSTRIPES];
	soft_stripe_lock(m);
	soft_key_write_begin(&r->mr[slot]);
	memcpy(&r->mr[slot], mr, offsetof(struct soft_reg_mr, seq));
	if (mr->kind == SOFT_KEY_MR) {
		gen = r->mr_gen++ % SOFT_MR_GENS + 1;
		r->mr[slot].key = gen << SOFT_MR_SLOT_BITS | (uint32_t)slot;
	} else {
		gen = r->mr_gen++ % SOFT_MW_GENS + 1;
		r->mr[slot].key = SOFT_KEY_MW_BIT |
				  gen << (SOFT_MR_SLOT_BITS + 8) |
				  (uint32_t)slot << 8 | (gen & 0xff);
	}
	r->mr[slot].pid = soft_self_pid;
	r->mr[slot].start = soft_self_start;
	*key = r->mr[slot].key;
	soft_key_write_end(&r->mr[slot]);
	pthread_mutex_unlock(m);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

/* soft_reg_mr_free -- unpublish; waits for one-sided ops in flight */
void soft_reg_mr_free(uint32_t key)
{
	uint32_t slot = soft_key_slot(key);
	pthread_mutex_t *m = &soft_reg->key_lock[slot % SOFT_NSTRIPES];

	soft_stripe_lock(&soft_reg->lock);
	soft_stripe_lock(m);
	if (soft_reg->mr[slot].key == key &&
	    soft_reg->mr[slot].pid == soft_self_pid) {
		soft_key_write_begin(&soft_reg->mr[slot]);
		soft_reg->mr[slot].key = 0;
		soft_key_write_end(&soft_reg->mr[slot]);
	}
	pthread_mutex_unlock(m);
	pthread_mutex_unlock(&soft_reg->lock);
}

/* seg_create -- a new 0600 shm object of len bytes, mapped; a stale one of
 * that name (from a killed process) is replaced */
static void *seg_create(const char *name, size_t len)
{
	void *p;
	int fd;

	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		shm_unlink(name); /* stale, from a killed process */
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
			      0600);
	}
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)len) < 0) {
		close(fd);
		shm_unlink(name);
		return NULL;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		shm_unlink(name);
		return NULL;
	}
	return p;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ  22 /* Linux 5.14 */
#define MADV_POPULATE_WRITE 23
#endif

/*
 * soft_populate -- fault in now every page that [p, p+len) touches
 * (whatever else shares its first or last page comes in with it), as an
 * HCA's queues are allocated and pinned when it creates them, not at the
 * first message through each page: the first 256 messages through a QP
 * met a fault every four 1 KiB slots on each side, and the first CQEs
 * one every 64 (2 us a write fault on the bench VM: most of a short run).
 * WRITE: memory we write; else a peer's, which we read.  Before Linux
 * 5.14 (no MADV_POPULATE_*) the pages come on first use, as before.
 */
void soft_populate(void *p, size_t len, int write)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(pg - 1);
	uintptr_t e = ((uintptr_t)p + len + pg - 1) & ~(pg - 1);
	int err = errno;

	if (len)
		madvise((void *)a, e - a,
			write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
	errno = err;
}

/* soft_seg_create -- create the shm segment of a QP */
void *soft_seg_create(uint32_t qpn, size_t len)
{
	char name[128];
	void *p;

	soft_name(name, sizeof(name), "qp", qpn);
	p = seg_create(name, len);
	if (p)
		((struct soft_seg_hdr *)p)->magic = SOFT_SEG_MAGIC;
	return p;
}

/* srq_name -- the name of SRQ segment id of context slot ctx_idx */
static void srq_name(char *buf, size_t len, uint32_t ctx_idx, uint32_t id)
{
	char what[32];

	snprintf(what, sizeof(what), "srq-%u", (unsigned)ctx_idx);
	soft_name(buf, len, what, id);
}

/* soft_reg_srq_id -- record that context slot ctx_idx named SRQ id, so
 * that the segment is removed once its process is gone */
void soft_reg_srq_id(uint32_t ctx_idx, uint32_t id)
{
	soft_stripe_lock(&soft_reg->lock);
	if (soft_reg->ctx[ctx_idx].srq_hi < id)
		soft_reg->ctx[ctx_idx].srq_hi = id;
	pthread_mutex_unlock(&soft_reg->lock);
}

/* soft_srq_seg_create -- create the shm segment of an SRQ */
void *soft_srq_seg_create(uint32_t ctx_idx, uint32_t id, size_t len)
{
	char name[128];
	void *p;

	srq_name(name, sizeof(name), ctx_idx, id);
	p = seg_create(name, len);
	if (p)
		((struct soft_srq_hdr *)p)->magic = SOFT_SEG_MAGIC + 1;
	return p;
}

/* soft_srq_seg_map -- map another process's SRQ segment */
void *soft_srq_seg_map(uint32_t ctx_idx, uint32_t id, size_t *len)
{
	char name[128];
	struct stat st;
	void *p;
	int fd;

	srq_name(name, sizeof(name), ctx_idx, id);
	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 ||
	    (size_t)st.st_size < sizeof(struct soft_srq_hdr)) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	if (((struct soft_srq_hdr *)p)->magic != SOFT_SEG_MAGIC + 1) {
		munmap(p, (size_t)st.st_size);
		return NULL;
	}
	*len = (size_t)st.st_size;
	return p;
}

/* soft_srq_seg_unlink -- remove an SRQ's segment name */
void soft_srq_seg_unlink(uint32_t ctx_idx, uint32_t id)
{
	char name[128];

	srq_name(name, sizeof(name), ctx_idx, id);
	shm_unlink(name);
}

/*
 * soft_srq_ref_map -- SRQ segment ID of context CTX_IDX, whose owner is
 * (PID, START), mapped into *r with its geometry checked: a power-of-two
 * ring of at most what a segment holds, its WQEs and completions inside
 * the mapping.  0, or -1 (nothing mapped).
 */
int soft_srq_ref_map(uint32_t ctx_idx, uint32_t id, int32_t pid, uint64_t start,
		     struct soft_srq_ref *r)
{
	struct soft_srq_hdr *sh;
	uint64_t stride;
	size_t len;

	memset(r, 0, sizeof(*r));
	sh = soft_srq_seg_map(ctx_idx, id, &len);
	if (!sh)
		return -1;
	r->n = sh->entries;
	r->sge = sh->sge;
	r->rq_off = sh->rq_off;
	r->cq_off = sh->cq_off;
	r->pd_id = sh->pd_id;
	r->xrcd_id = sh->xrcd_id;
	stride = 8 + 16 * (uint64_t)r->sge;
	if (len < sizeof(*sh) || sh->pid != pid || sh->start != start ||
	    !r->n || (r->n & (r->n - 1)) || r->n > 2 * SOFT_MAX_SRQ_WR + 2 ||
	    r->sge > SOFT_MAX_SGE || r->rq_off < sizeof(*sh) ||
	    r->rq_off > len || r->cq_off > len ||
	    (len - r->rq_off) / stride < r->n ||
	    (len - r->cq_off) / sizeof(struct soft_shm_srq_cqe) < r->n) {
		munmap(sh, len);
		memset(r, 0, sizeof(*r));
		return -1;
	}
	r->sh = sh;
	r->len = len;
	r->ctx = ctx_idx;
	r->pid = pid;
	r->start = start;
	return 0;
}

/* soft_srq_ref_unmap -- forget a mapped SRQ (none: nothing) */
void soft_srq_ref_unmap(struct soft_srq_ref *r)
{
	if (r->sh)
		munmap(r->sh, r->len);
	memset(r, 0, sizeof(*r));
}

/* soft_seg_map -- map another QP's segment */
void *soft_seg_map(uint32_t qpn, size_t *len)
{
	char name[128];
	struct stat st;
	void *p;
	int fd;

	soft_name(name, sizeof(name), "qp", qpn);
	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < SOFT_SEG_HDR) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	if (((struct soft_seg_hdr *)p)->magic != SOFT_SEG_MAGIC ||
	    ((struct soft_seg_hdr *)p)->qpn != qpn) {
		munmap(p, (size_t)st.st_size);
		return NULL;
	}
	*len = (size_t)st.st_size;
	return p;
}

/* soft_seg_unlink -- remove a QP segment's name */
void soft_seg_unlink(uint32_t qpn)
{
	char name[128];

	soft_name(name, sizeof(name), "qp", qpn);
	shm_unlink(name);
}

/*
 * Channel FIFOs a producer writes to: open ones kept, by key (a key is
 * never reused while the registry lives; the cache empties with it, and
 * a key's entry goes when its channel is destroyed in this process or
 * its context slot is swept: soft_chan_forget).
 * A FIFO is opened read-write, so that a write never raises SIGPIPE
 * once its channel has gone; and non-blocking: a full FIFO is readable
 * already.  A thread that finds the cache taken (or a forked child whose
 * parent held it) opens and closes its own.
 */
#define CHAN_CACHE 16
static struct {
	uint32_t key;
	int fd;
} chan_cache[CHAN_CACHE];
pthread_mutex_t soft_chan_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* soft_chan_path -- the file of channel key: /dev/shm/<prefix>-ch-<key> */
void soft_chan_path(char *buf, size_t len, uint32_t key)
{
	char name[128];

	soft_name(name, sizeof(name), "ch", key);
	snprintf(buf, len, "/dev/shm%s", name);
}

/* chan_open -- open channel key's FIFO for a kick, -1 if it is gone */
static int chan_open(uint32_t key)
{
	char path[160];
	struct stat st;
	int fd;

	soft_chan_path(path, sizeof(path), key);
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISFIFO(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		return -1;
	}
	return fd;
}

/* chan_cache_clear -- forget every FIFO (the registry is going) */
static void chan_cache_clear(void)
{
	int i;

	pthread_mutex_lock(&soft_chan_cache_lock);
	for (i = 0; i < CHAN_CACHE; i++) {
		if (chan_cache[i].key)
			close(chan_cache[i].fd);
		chan_cache[i].key = 0;
	}
	pthread_mutex_unlock(&soft_chan_cache_lock);
}

/* soft_chan_forget -- channel key is destroyed: the FIFO this process
 * kept open to kick it goes too (else the cache holds the deleted FIFO's
 * fd until its slot is taken by another key or the registry goes) */
void soft_chan_forget(uint32_t key)
{
	unsigned int i = key % CHAN_CACHE;

	pthread_mutex_lock(&soft_chan_cache_lock);
	if (key && chan_cache[i].key == key) {
		close(chan_cache[i].fd);
		chan_cache[i].key = 0;
	}
	pthread_mutex_unlock(&soft_chan_cache_lock);
}

/* chan_kick -- make channel key's fd readable: one byte into its FIFO */
static void chan_kick(uint32_t key)
{
	static const char b = 1;
	unsigned int i = key % CHAN_CACHE;
	ssize_t r;
	int fd;

	if (pthread_mutex_trylock(&soft_chan_cache_lock)) {
		fd = chan_open(key);
		if (fd >= 0) {
			r = write(fd, &b, 1);
			(void)r;
			close(fd);
		}
		return;
	}
	if (chan_cache[i].key != key) {
		fd = chan_open(key);
		if (fd >= 0) {
			if (chan_cache[i].key)
				close(chan_cache[i].fd);
			chan_cache[i].key = key;
			chan_cache[i].fd = fd;
		}
	}
	if (chan_cache[i].key == key) {
		r = write(chan_cache[i].fd, &b, 1);
		(void)r;
	}
	pthread_mutex_unlock(&soft_chan_cache_lock);
}

/* chan_unlink_all -- the FIFOs a context slot has named */
static void chan_unlink_all(struct soft_reg *r, uint32_t idx)
{
	char path[160];
	uint32_t key;
	int c;

	for (c = 0; c < SOFT_CHAN_CELLS; c++) {
		key = atomic_exchange(&r->ctx[idx].chan_key[c], 0);
		if (key) {
			soft_chan_path(path, sizeof(path), key);
			unlink(path);
			soft_chan_forget(key);
		}
	}
}

/*
 * soft_wake_ctx -- work for a context was published (a peer's slot, a
 * commit, a completion in an outbox): wake whoever waits on it.  A
 * waiter asleep on a completion channel is woken directly, through the
 * channel's fd (its ibv_get_cq_event then runs the progress itself); the
 * progress thread only for CQs without such a channel (or when it serves
 * the rings).  The caller's work is visible before its (seq_cst) look at
 * armed; the waiter sets its bit before its own look at the work.
 */
void soft_wake_ctx(uint32_t ctx_idx)
{
	struct soft_reg_ctx *c = &soft_reg->ctx[ctx_idx];
	uint32_t a = atomic_load(&c->armed), bit;
	int i;

	if (a & SOFT_ARMED_CHANS) {
		for (i = 0; i < SOFT_CHAN_CELLS; i++) {
			bit = SOFT_ARMED_CHAN(i);
			/* claim the arm: only one producer writes for it */
			if ((a & bit) &&
			    (atomic_fetch_and(&c->armed, ~bit) & bit)) {
				uint32_t key = atomic_load_explicit(
					&c->chan_key[i], memory_order_acquire);

				if (key)
					chan_kick(key);
			}
		}
	}
	if ((a & SOFT_ARMED_THREAD) ||
	    atomic_load_explicit(&c->always_wake, memory_order_relaxed))
		soft_wake_thread(ctx_idx);
}

/* soft_wake_waiting -- after what we left for context ctx_idx (an outbox
 * entry, a count), wake it if it waits: armed, or always woken */
void soft_wake_waiting(uint32_t ctx_idx)
{
	struct soft_reg_ctx *c = &soft_reg->ctx[ctx_idx];

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&c->armed, memory_order_relaxed) ||
	    atomic_load_explicit(&c->always_wake, memory_order_relaxed))
		soft_wake_ctx(ctx_idx);
}

/* soft_wake_thread -- poke the progress thread of a context */
void soft_wake_thread(uint32_t ctx_idx)
{
	struct soft_reg_ctx *c = &soft_reg->ctx[ctx_idx];

	/* a thread that is running sees the new value before it sleeps
	 * (thread_main): only a sleeping one needs the kernel */
	atomic_fetch_add(&c->wake, 1);
	if (atomic_load(&c->sleeping))
		syscall(SYS_futex, (uint32_t *)&c->wake, FUTEX_WAKE, INT_MAX,
			NULL, NULL, 0);
}

__thread uint32_t soft_tid_cached __attribute__((tls_model("initial-exec")));
__thread int soft_internal __attribute__((tls_model("initial-exec")));

uint32_t soft_tid_slow(void)
{
	soft_tid_cached = (uint32_t)syscall(SYS_gettid);
	return soft_tid_cached;
}

static int bias_take(soft_lock_t *l);
static int bias_revoke(soft_lock_t *l, int try);

/*
 * lock_spin -- the context lock is held by a running thread's pass, most
 * often: wait for it a while on the CPU before sleeping in the kernel.
 * Two threads that each poll their own rdmamsg context (all of a
 * process's contexts share the CM's device context) otherwise paid a
 * FUTEX_LOCK_PI, a context switch and a FUTEX_UNLOCK_PI for nearly every
 * pass (10-14 microseconds a message in ping-pong, against about one).  Not on a biased word (bias_take's, then a revocation), nor
 * behind sleepers (FUTEX_WAITERS: the kernel's queue is first in line);
 * at most SOFT_LOCK_SPINS looks, so that a holder that the scheduler took
 * off the CPU (or a SCHED_FIFO waiter on its CPU) still gets the
 * kernel's priority inheritance soon.  1: taken.
 */
static int lock_spin(soft_lock_t *l)
{
	uint32_t v, z;
	int n;

	for (n = 0; n < SOFT_LOCK_SPINS; n++) {
		v = atomic_load_explicit(&l->v, memory_order_relaxed);
		if (!v) {
			z = 0;
			if (atomic_compare_exchange_weak_explicit(
				    &l->v, &z, soft_tid(), memory_order_acquire,
				    memory_order_relaxed))
				return 1;
			continue;
		}
		if ((v & FUTEX_TID_MASK) == SOFT_LOCK_BIASED ||
		    (v & FUTEX_WAITERS))
			return 0;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	return 0;
}

/* lock_wait -- the context lock is held: spin a while (lock_spin), then
 * sleep in the kernel, which lends our priority to its owner
 * (FUTEX_LOCK_PI) */
static void lock_wait(soft_lock_t *l)
{
	uint32_t z;

	if (lock_spin(l))
		goto taken;
	for (;;) {
		if (bias_take(l)) {
			bias_revoke(l, 0);
			return;
		}
		if (!syscall(SYS_futex, (uint32_t *)&l->v,
			     FUTEX_LOCK_PI_PRIVATE, 0, NULL, NULL, 0)) {
			soft_tsan_acquire_at(&l->v);
			goto taken;
		}
		if (errno == EINTR || errno == EAGAIN)
			continue;
		/* ESRCH: the word rests biased (no thread has it): the
		 * loop's top takes it.  ENOSYS: no PI futexes here, take it
		 * when free */
		z = 0;
		if (errno == ENOSYS &&
		    atomic_compare_exchange_strong_explicit(
			    &l->v, &z, soft_tid(), memory_order_acquire,
			    memory_order_relaxed))
			goto taken;
		sched_yield();
	}
taken:
	/* handed over by a trylock that backed off from a bias owner in
	 * its section (bias_revoke): wait for that section too */
	if (soft_lock_biased(l))
		bias_revoke(l, 0);
}

/* soft_lock_slow -- lock_wait, an application thread's counted in
 * waiting: meanwhile polls of empty CQs stay out of its way
 * (soft_ctx_enter_poll) */
void soft_lock_slow(soft_lock_t *l)
{
	if (soft_internal) {
		lock_wait(l);
		return;
	}
	atomic_fetch_add_explicit(&l->waiting, 1, memory_order_relaxed);
	lock_wait(l);
	atomic_fetch_sub_explicit(&l->waiting, 1, memory_order_relaxed);
}

/* bias_register -- membarrier(2) registered for bias_barrier, once per
 * process (a forked child again); 0 when it is.  With other threads in the
 * process the kernel waits an RCU grace period (10-20 ms here): so the
 * first attach asks (soft_reg_attach, most often before any thread),
 * not the first biased lock, which comes with a context's first traffic */
static int bias_register(void)
{
	static int32_t registered;

	if (__atomic_load_n(&registered, __ATOMIC_RELAXED) == soft_self_pid)
		return 0;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
		    0, 0))
		return -1;
	__atomic_store_n(&registered, soft_self_pid, __ATOMIC_RELAXED);
	return 0;
}

/* bias_barrier -- membarrier(2): every thread of the process has passed
 * a full fence (what the bias owner's sections leave out); 0 when done */
static int bias_barrier(void)
{
	return (int)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0,
			    0);
}

/* bias_keep -- SOFTRDMA_TEST_BIAS_KEEP=1 (tests): a bias never goes off,
 * so that every lock of another thread revokes it (tests/soft/hints) */
static int bias_keep(void)
{
	static _Atomic int v = -1;

	return soft_env_flag(&v, "SOFTRDMA_TEST_BIAS_KEEP");
}

/*
 * bias_revoke -- we swapped the biased word for our tid: make the owner's
 * mark visible and wait until it has left its section (spin, then sleep,
 * so that a waiter of SCHED_FIFO lets a preempted owner run).  TRY: back
 * off instead of waiting (a trylock: two owners each in a section and
 * trying the other's context would wait for each other): the word
 * released, 1.  A bias given in the process we forked from, or taken from
 * its owner too often, goes off.  0: the lock is ours.
 */
static int bias_revoke(soft_lock_t *l, int try)
{
	struct timespec ts = {0, 20000};
	uint32_t t;
	int n = 0;

	if (atomic_load_explicit(&l->bias, memory_order_relaxed) == soft_tid())
		return 0; /* the owner itself, unhinted: not in a section */
	if (l->bias_pid != soft_self_pid) {
		/* a fork: the owner's sections ended with it */
		atomic_store_explicit(&l->bias, SOFT_BIAS_OFF,
				      memory_order_relaxed);
		return 0;
	}
	if (++l->revokes >= l->revoke_max && !bias_keep())
		atomic_store_explicit(&l->bias, SOFT_BIAS_OFF,
				      memory_order_relaxed);
	if (bias_barrier())
		abort(); /* registered in soft_bias_lock: cannot fail */
	while (atomic_load_explicit(&l->bias_in, memory_order_acquire)) {
		if (try) {
			/* the word rests biased again; a thread that queued
			 * on it meanwhile gets it and revokes in its turn
			 * (soft_lock_slow) */
			t = soft_tid();
			if (!atomic_compare_exchange_strong_explicit(
				    &l->v, &t, SOFT_LOCK_BIASED,
				    memory_order_release, memory_order_relaxed))
				soft_unlock_wake(l);
			return 1;
		}
		if (++n < 200)
			sched_yield();
		else
			nanosleep(&ts, NULL);
	}
	return 0;
}

/* bias_take -- the word rests biased (a failed FUTEX_LOCK_PI may have
 * added FUTEX_WAITERS): take it as ours; 1 when swapped */
static int bias_take(soft_lock_t *l)
{
	uint32_t v = atomic_load_explicit(&l->v, memory_order_relaxed);

	return (v & FUTEX_TID_MASK) == SOFT_LOCK_BIASED &&
	       atomic_compare_exchange_strong_explicit(&l->v, &v, soft_tid(),
						       memory_order_acquire,
						       memory_order_relaxed);
}

/* soft_trylock_slow -- soft_trylock found the word not 0: biased, revoke
 * without waiting; held, 1 */
int soft_trylock_slow(soft_lock_t *l)
{
	return bias_take(l) ? bias_revoke(l, 1) : 1;
}

/* soft_trylock_owned -- soft_trylock, but a word resting biased for
 * another thread is busy too: that thread polls the context (its owner),
 * and is not made to leave its bias (a membarrier each time) */
int soft_trylock_owned(soft_lock_t *l)
{
	uint32_t v = atomic_load_explicit(&l->v, memory_order_relaxed);

	if ((v & FUTEX_TID_MASK) == SOFT_LOCK_BIASED &&
	    atomic_load_explicit(&l->bias, memory_order_relaxed) != soft_tid())
		return 1;
	return soft_trylock(l);
}

/*
 * soft_bias_lock -- soft_bias_enter without the bias: take the word (which
 * revokes another owner's bias), and the bias becomes ours when the
 * context has none yet (the first thread to post or poll on it) or its
 * owner has exited, and membarrier(2) is there for its revokers
 * (registered once per process).  A live owner keeps it: a second thread
 * posting or polling on the context locks the word as any other locker,
 * a revocation each time the owner left it biased, until it goes off
 * (REVOKE_MAX of them, as the call that gave the bias asked:
 * SOFT_BIAS_REVOKES for a hinted call, SOFT_BIAS_AUTO for a plain one;
 * SOFT_BIAS_AUTO from the first hinted call of a second thread on).
 */
void soft_bias_lock(soft_lock_t *l, uint32_t revoke_max)
{
	uint32_t b;

	soft_lock(l);
	b = atomic_load_explicit(&l->bias, memory_order_relaxed);
	if (b == SOFT_BIAS_OFF || b == soft_tid())
		return;
	if (b && l->bias_pid == soft_self_pid) {
		/* The owner is in no section (the word is ours), but it may
		 * be between its look at bias and its mark (soft_bias_enter),
		 * where it would mark bias_in after our revocation and find
		 * the word biased for us: two in the context, and its mark's
		 * removal would hide ours from a revoker.  So the bias moves
		 * only from a thread that has exited; a live owner keeps it,
		 * and we lock as others do (until SOFT_BIAS_REVOKES).
		 * Whether it has exited is a system call (tgkill), asked at
		 * the first such lock and then once every SOFT_BIAS_LOOKS:
		 * not on each post and poll of a second hinted thread, with
		 * the word held across it (a peer's serve_local kept out) */
		int e, alive;

		/* a hinted call of ours: a second thread that means to own
		 * the context too (two rdmamsg contexts of one process, on
		 * one device context), not a rare locker; the bias cannot be
		 * either's, so it goes after a few revocations, not 4,096
		 * membarriers */
		if (revoke_max == SOFT_BIAS_REVOKES &&
		    l->revoke_max > SOFT_BIAS_AUTO)
			l->revoke_max = SOFT_BIAS_AUTO;
		if (l->looks++ % SOFT_BIAS_LOOKS)
			return;
		e = errno;
		alive = syscall(SYS_tgkill, soft_self_pid, (pid_t)b, 0) == 0 ||
			errno != ESRCH;
		errno = e;
		if (!alive)
			atomic_store_explicit(&l->bias, soft_tid(),
					      memory_order_relaxed);
		return;
	}
	if (bias_register()) {
		atomic_store_explicit(&l->bias, SOFT_BIAS_OFF,
				      memory_order_relaxed);
		return;
	}
	l->bias_pid = soft_self_pid;
	l->revokes = 0;
	l->looks = 0;
	l->revoke_max = revoke_max;
	atomic_store_explicit(&l->bias, soft_tid(), memory_order_relaxed);
}

/* soft_unlock_wake -- a thread sleeps on the context lock: the kernel
 * hands it to the first in line */
void soft_unlock_wake(soft_lock_t *l)
{
	soft_tsan_release_at(&l->v);
	syscall(SYS_futex, (uint32_t *)&l->v, FUTEX_UNLOCK_PI_PRIVATE, 0, NULL,
		NULL, 0);
}

/* soft_futex_wait -- sleep while *word == val, at most ns */
void soft_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_nsec = (long)(ns % 1000000000ull)};

	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

/*
 * soft_fini -- at exit (or dlclose), drop what this process still has in
 * the registry: QP segments, keys, context slots; the host's last user
 * also removes the registry.  Objects left open must not leak shm names.
 * It never blocks: when the registry lock cannot be had (held by the
 * thread that called exit() from a signal handler, or by a stopped
 * process) the entries stay, and other processes' sweeps free them once
 * this process is gone.
 */
__attribute__((destructor)) static void soft_fini(void)
{
	struct soft_reg *r = soft_reg;
	int i;

	if (!r || getpid() != soft_self_pid || soft_exit_lock(&r->lock))
		return;
	for (i = 0; i < (int)r->qp_top && i < SOFT_MAX_QP; i++) {
		if (r->qp[i].qpn && r->qp[i].pid == soft_self_pid) {
			soft_seg_unlink(r->qp[i].qpn);
			r->qp[i].qpn = 0;
		}
	}
	for (i = 0; i < (int)r->mr_top && i < SOFT_MAX_MR; i++)
		if (r->mr[i].key && r->mr[i].pid == soft_self_pid)
			r->mr[i].key = 0;
	for (i = 0; i < SOFT_MAX_CTX; i++) {
		if (atomic_load(&r->ctx[i].pid) == soft_self_pid) {
			srq_unlink_all(r, (uint32_t)i);
			chan_unlink_all(r, (uint32_t)i);
			atomic_store(&r->ctx[i].pid, 0);
		}
	}
	reg_last_out(r, 1);
	pthread_mutex_unlock(&r->lock);
}
