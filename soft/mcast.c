/* SPDX-License-Identifier: MIT */
/* mcast.c -- multicast groups: the host table, attach/detach, fan-out */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"
#include "ud.h"

SOFT_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				 uint16_t lid);
SOFT_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				 uint16_t lid);

/*
 * Multicast groups: one table per host in its own shm object, named per
 * user like the registry, created 0600 with O_EXCL and checked for owner
 * and mode when opened.  The process that empties it unlinks it (flag
 * "unlinked" under the lock, so that nobody attaches to a dead table).
 */
#define MC_MAGIC 0x736f66746d636173ull

struct mc_member {
	uint32_t qpn;
	uint32_t ctx_idx;
	int32_t pid;
	uint32_t pad;
	uint64_t start;
};

struct mc_group {
	uint8_t mgid[16];
	uint32_t n;
	uint32_t pad;
	struct mc_member m[SOFT_MCAST_QP_ATT];
};

struct mc_table {
	uint64_t magic;
	uint32_t unlinked;
	uint32_t total;
	uint32_t ngroups;
	/* changes with every change of membership (from a random start):
	 * a sender's copy of a group's members (struct soft_mc_cache)
	 * stays good while it does not */
	_Atomic uint32_t gen;
	pthread_mutex_t lock;
	struct mc_group g[SOFT_MCAST_GRP];
};

/* a sending QP's copy of the members of the group it sent to last */
struct soft_mc_cache {
	uint8_t mgid[16];
	uint32_t gen, n;
	struct mc_member m[SOFT_MCAST_QP_ATT];
};

static struct mc_table *mc_tab;
pthread_mutex_t soft_mc_local = PTHREAD_MUTEX_INITIALIZER;

static void mc_name(char *buf, size_t len)
{
	const char *p = getenv("SOFTRDMA_SHM_PREFIX");

	if (!p || !*p || strchr(p, '/'))
		snprintf(buf, len, "/softrdma-%u-mcast", (unsigned)getuid());
	else
		snprintf(buf, len, "/%s-mcast", p);
}

/* mc_map_fd -- map an opened table after checking owner, mode and size */
static struct mc_table *mc_map_fd(int fd, int fresh)
{
	struct mc_table *t;
	struct stat st;
	int i;

	if (fresh && ftruncate(fd, sizeof(*t)) < 0)
		return NULL;
	for (i = 0; i < 1000; i++) {
		if (fstat(fd, &st) < 0)
			return NULL;
		if ((size_t)st.st_size >= sizeof(*t))
			break;
		usleep(1000);
	}
	if (st.st_uid != getuid() || (st.st_mode & 077) ||
	    (size_t)st.st_size != sizeof(*t))
		return NULL;
	t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (t == MAP_FAILED)
		return NULL;
	if (fresh) {
		soft_robust_init(&t->lock);
		atomic_store(&t->gen, (uint32_t)soft_now_ns() ^
					      (uint32_t)soft_self_pid << 12);
		__atomic_store_n(&t->magic, MC_MAGIC, __ATOMIC_RELEASE);
		return t;
	}
	for (i = 0; i < 1000; i++) {
		if (__atomic_load_n(&t->magic, __ATOMIC_ACQUIRE) == MC_MAGIC)
			return t;
		usleep(1000);
	}
	munmap(t, sizeof(*t));
	return NULL;
}

static void *mc_make(int fd)
{
	return mc_map_fd(fd, 1);
}

/*
 * mc_lock -- the host table, locked and live; NULL when there is none and
 * create is 0, or it cannot be had.  soft_mc_local is held on return (also on
 * NULL: the caller unlocks it with mc_unlock).
 */
static struct mc_table *mc_lock(int create)
{
	char name[128];
	int tries, fd, r;

	pthread_mutex_lock(&soft_mc_local);
	for (tries = 0; tries < 100; tries++) {
		if (!mc_tab) {
			int fresh = 0;

			mc_name(name, sizeof(name)); /* not on every send */
			fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
			if (fd < 0 && errno == ENOENT && create) {
				/* made whole, then named (soft_shm_make) */
				mc_tab =
					soft_shm_make(name, "mcast",
						      sizeof(*mc_tab), mc_make);
				if (mc_tab || errno == EEXIST)
					continue; /* lock it, or join it */
				fd = shm_open(name,
					      O_RDWR | O_CREAT | O_EXCL |
						      O_CLOEXEC,
					      0600);
				fresh = fd >= 0;
				if (fd < 0 && errno == EEXIST)
					continue;
			}
			if (fd < 0)
				return NULL;
			mc_tab = mc_map_fd(fd, fresh);
			close(fd);
			if (!mc_tab) {
				/* ours and half made by a creator that died,
				 * or fresh and unusable: remove, start over */
				shm_unlink(name);
				if (fresh)
					return NULL;
				continue;
			}
		}
		r = pthread_mutex_lock(&mc_tab->lock);
		if (r == EOWNERDEAD)
			pthread_mutex_consistent(&mc_tab->lock);
		else if (r)
			return NULL;
		if (!mc_tab->unlinked)
			return mc_tab;
		pthread_mutex_unlock(&mc_tab->lock);
		munmap(mc_tab, sizeof(*mc_tab));
		mc_tab = NULL;
	}
	return NULL;
}

/* mc_unlock -- unlock; an empty table is removed from the host */
static void mc_unlock(struct mc_table *t)
{
	char name[128];

	if (t) {
		if (!t->total) {
			t->unlinked = 1;
			mc_name(name, sizeof(name));
			shm_unlink(name);
		}
		pthread_mutex_unlock(&t->lock);
		if (t->unlinked) {
			munmap(t, sizeof(*t));
			mc_tab = NULL;
		}
	}
	pthread_mutex_unlock(&soft_mc_local);
}

/* mc_remove -- drop member i of group g; empty groups are freed */
static void mc_remove(struct mc_table *t, struct mc_group *g, uint32_t i)
{
	atomic_fetch_add(&t->gen, 1);
	g->m[i] = g->m[g->n - 1];
	g->n--;
	t->total--;
	if (!g->n) {
		memset(g->mgid, 0, sizeof(g->mgid));
		t->ngroups--;
	}
}

/* mc_sweep -- reclaim members of dead processes; fix bad counts */
static void mc_sweep(struct mc_table *t)
{
	uint32_t gi, i, total = 0, ng = 0;

	atomic_fetch_add(&t->gen, 1);
	for (gi = 0; gi < SOFT_MCAST_GRP; gi++) {
		struct mc_group *g = &t->g[gi];

		if (g->n > SOFT_MCAST_QP_ATT)
			g->n = SOFT_MCAST_QP_ATT;
		for (i = 0; i < g->n;) {
			if (soft_pid_alive(g->m[i].pid, g->m[i].start)) {
				i++;
				continue;
			}
			g->m[i] = g->m[g->n - 1];
			g->n--;
		}
		if (g->n)
			ng++;
		else
			memset(g->mgid, 0, sizeof(g->mgid));
		total += g->n;
	}
	t->total = total;
	t->ngroups = ng;
}

static struct mc_group *mc_find(struct mc_table *t, const uint8_t *mgid)
{
	uint32_t gi;

	for (gi = 0; gi < SOFT_MCAST_GRP; gi++)
		if (t->g[gi].n && t->g[gi].n <= SOFT_MCAST_QP_ATT &&
		    !memcmp(t->g[gi].mgid, mgid, 16))
			return &t->g[gi];
	return NULL;
}

/* soft_mcast_forget_qp -- a destroyed QP leaves every group */
void soft_mcast_forget_qp(uint32_t qpn)
{
	struct mc_table *t = mc_lock(0);
	uint32_t gi, i;

	if (t) {
		for (gi = 0; gi < SOFT_MCAST_GRP; gi++) {
			struct mc_group *g = &t->g[gi];

			for (i = 0; i < g->n && i < SOFT_MCAST_QP_ATT;)
				if (g->m[i].qpn == qpn &&
				    g->m[i].pid == soft_self_pid)
					mc_remove(t, g, i);
				else
					i++;
		}
	}
	mc_unlock(t);
	soft_net_mcast_detach(qpn, NULL);
}

/* mcast_check -- common argument checks of attach/detach */
static int mcast_check(struct ibv_qp *qp, const union ibv_gid *gid)
{
	if (!qp || !gid || to_sqp(qp)->type != IBV_QPT_UD ||
	    !soft_ud_gid_is_mcast(gid->raw))
		return EINVAL;
	return 0;
}

/* ibv_attach_mcast -- add a UD QP to a multicast group of this host */
int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	struct mc_table *t;
	struct mc_group *g;
	uint32_t i, gi;
	int ret = 0;

	(void)lid; /* RoCE: any LID */
	ret = mcast_check(qp, gid);
	if (ret)
		goto out;
	t = mc_lock(1);
	if (!t) {
		mc_unlock(t);
		ret = ENOMEM;
		goto out;
	}
	mc_sweep(t);
	g = mc_find(t, gid->raw);
	if (g) {
		for (i = 0; i < g->n; i++)
			if (g->m[i].qpn == qp->qp_num &&
			    g->m[i].pid == soft_self_pid)
				goto unlock; /* attached already */
		if (g->n >= SOFT_MCAST_QP_ATT) {
			ret = ENOMEM;
			goto unlock;
		}
	} else {
		if (t->ngroups >= SOFT_MCAST_GRP) {
			ret = ENOMEM;
			goto unlock;
		}
		for (gi = 0; gi < SOFT_MCAST_GRP && t->g[gi].n; gi++)
			;
		if (gi == SOFT_MCAST_GRP) {
			ret = ENOMEM;
			goto unlock;
		}
		g = &t->g[gi];
	}
	if (t->total >= SOFT_MCAST_TOTAL) {
		ret = ENOMEM;
		goto unlock;
	}
	if (!g->n) {
		memcpy(g->mgid, gid->raw, 16);
		t->ngroups++;
	}
	g->m[g->n].qpn = qp->qp_num;
	g->m[g->n].ctx_idx = (uint32_t)to_sqp(qp)->ctx->reg_idx;
	g->m[g->n].pid = soft_self_pid;
	g->m[g->n].start = soft_self_start;
	g->n++;
	t->total++;
	atomic_fetch_add(&t->gen, 1);
	__atomic_add_fetch(&to_sqp(qp)->nmcast, 1, __ATOMIC_RELAXED);
unlock:
	mc_unlock(t);
	if (!ret)
		soft_net_mcast_attach(to_sqp(qp), gid->raw);
out:
	if (ret)
		errno = ret;
	return ret;
}

/* ibv_detach_mcast -- remove a QP from a group it joined */
int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	struct mc_table *t;
	struct mc_group *g;
	uint32_t i;
	int ret;

	(void)lid;
	ret = mcast_check(qp, gid);
	if (ret)
		goto out;
	t = mc_lock(0);
	ret = EINVAL;
	if (t) {
		mc_sweep(t);
		g = mc_find(t, gid->raw);
		for (i = 0; g && i < g->n; i++) {
			if (g->m[i].qpn == qp->qp_num &&
			    g->m[i].pid == soft_self_pid) {
				mc_remove(t, g, i);
				__atomic_sub_fetch(&to_sqp(qp)->nmcast, 1,
						   __ATOMIC_RELAXED);
				ret = 0;
				break;
			}
		}
	}
	mc_unlock(t);
	if (!ret)
		soft_net_mcast_detach(qp->qp_num, gid->raw);
out:
	if (ret)
		errno = ret;
	return ret;
}

/*
 * mc_fini -- at exit, leave the groups this process still belongs to and
 * drop those of dead processes, so that a table that only killed processes
 * used does not outlive them; never blocks for long (soft_exit_lock)
 */
__attribute__((destructor)) static void mc_fini(void)
{
	char name[128];
	struct mc_table *t = mc_tab;
	uint32_t gi, i;
	int fd;

	if (!soft_self_pid || getpid() != soft_self_pid)
		return;
	mc_name(name, sizeof(name));
	if (!t) {
		fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0)
			return;
		t = mc_map_fd(fd, 0);
		close(fd);
		if (!t)
			return;
	}
	if (soft_exit_lock(&t->lock))
		goto unmap;
	if (!t->unlinked) {
		for (gi = 0; gi < SOFT_MCAST_GRP; gi++) {
			struct mc_group *g = &t->g[gi];

			for (i = 0; i < g->n && i < SOFT_MCAST_QP_ATT;)
				if (g->m[i].pid == soft_self_pid)
					mc_remove(t, g, i);
				else
					i++;
		}
		mc_sweep(t);
		if (!t->total) {
			t->unlinked = 1;
			shm_unlink(name);
		}
	}
	pthread_mutex_unlock(&t->lock);
unmap:
	if (t != mc_tab)
		munmap(t, sizeof(*t));
}

/*
 * mc_members -- the members of group mgid, from the sender's copy while
 * the table's generation says nothing changed (no lock shared with other
 * processes, no search on every datagram), else read again under the
 * table's lock (none when the host has no table); NULL only when there
 * is no memory for the copy
 */
static const struct soft_mc_cache *mc_members(struct soft_mc_cache **cache,
					      const uint8_t *mgid)
{
	struct soft_mc_cache *c = *cache;
	struct mc_table *t;
	struct mc_group *g;

	pthread_mutex_lock(&soft_mc_local);
	t = mc_tab;
	if (c && t && !__atomic_load_n(&t->unlinked, __ATOMIC_ACQUIRE) &&
	    atomic_load_explicit(&t->gen, memory_order_acquire) == c->gen &&
	    !memcmp(c->mgid, mgid, 16)) {
		pthread_mutex_unlock(&soft_mc_local);
		return c;
	}
	pthread_mutex_unlock(&soft_mc_local);
	if (!c) {
		c = calloc(1, sizeof(*c)); /* a QP's first multicast send */
		if (!c)
			return NULL;
		*cache = c;
	}
	c->n = 0;
	t = mc_lock(0);
	if (t) {
		c->gen = atomic_load(&t->gen);
		memcpy(c->mgid, mgid, 16);
		g = mc_find(t, mgid);
		if (g) {
			c->n = g->n;
			memcpy(c->m, g->m, c->n * sizeof(c->m[0]));
		}
		pthread_mutex_unlock(&t->lock);
	} else {
		memset(c->mgid, 0, sizeof(c->mgid)); /* no table: look again */
		c->gen = 0;
	}
	pthread_mutex_unlock(&soft_mc_local);
	return c;
}

/* soft_mcast_cache_free -- a destroyed QP's copy of a group's members */
void soft_mcast_cache_free(struct soft_mc_cache **cache)
{
	free(*cache);
	*cache = NULL;
}

/*
 * soft_mcast_send -- one datagram to every QP attached to mgid (with
 * block, not to the QPs of this process); returns the members it was
 * given to (a blocked self, or one gone, not counted).
 * cache: the sending QP's copy of the members; ctx: the sending QP's
 * context, locked (members' posted receives are placed into from it).
 */
uint32_t soft_mcast_send(struct soft_ud *u, struct soft_context *ctx,
			 struct soft_mc_cache **cache, const uint8_t *mgid,
			 int block, struct ud_cell *h, const struct iovec *iov,
			 int niov)
{
	const struct soft_mc_cache *c = mc_members(cache, mgid);
	struct soft_ud_src src = {.ctx = ctx};
	struct ud_peer *p;
	uint32_t i, n = c ? c->n : 0, ctx_idx, sent = 0;

	for (i = 0; i < n; i++) {
		/* "self": the QPs of the sending process */
		if (block && c->m[i].pid == soft_self_pid &&
		    c->m[i].start == soft_self_start)
			continue;
		p = soft_ud_peer(u, c->m[i].qpn, IBV_QPT_UD, &ctx_idx);
		if (p) {
			soft_ud_enqueue(p, h, iov, niov, ctx_idx, 0, &src);
			sent++;
		}
	}
	return sent;
}
