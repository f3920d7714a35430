/* SPDX-License-Identifier: MIT */
/* peermap.c -- shareable registrations: published by their owner, mapped
 * by the peers that copy into and out of them */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "softrdma.h"

/*
 * An MR whose bytes lie in one MAP_SHARED mapping of a memfd sealed
 * against shrinking (rdmamsg's pool allocates its slabs so) is published
 * with the file behind it: an fd of the owner's (a dup softrdma keeps for
 * the registration's life), the file offset of its first byte and the
 * file's identity.  A peer that copies into or out of it (the initiator of
 * a WRITE, READ or atomic, the responder pulling a large SEND) takes that
 * fd with pidfd_getfd(2), which the kernel allows exactly where it allows
 * process_vm_readv (ptrace attach rights), maps the file once and copies
 * with memcpy; anything that fails falls back to process_vm_*.  What the
 * peer may touch is still decided by the registry's checks, under the
 * key's stripe lock, before every copy; a mapping is used only while the
 * registry entry is the very one it was made for (key, owner, range,
 * file), so a deregistered or re-registered range is never reached
 * through it.  The seal keeps the file from shrinking under the mapping
 * (no SIGBUS in our copy, whatever the owner does).  Memory the owner
 * unmaps while it is registered stays reachable, as pinned pages do on an
 * HCA.
 */

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* a peer's MR, mapped here (or found not mappable: mem NULL) */
struct soft_map {
	struct soft_reg_mr e; /* the registry entry it was made for */
	void *mem;	      /* the mapping, mem_len bytes */
	size_t mem_len;
	uint8_t *base; /* where e.va is */
};

/* a context's mappings, direct-mapped by (owner, key slot) */
#define SOFT_MAPS 64
struct soft_maps {
	struct soft_map m[SOFT_MAPS];
	uint32_t pass;	  /* progress passes */
	uint64_t checked; /* ns: the last check of them all */
};

static _Atomic int map_fds; /* fds this process keeps for publication */

/* soft_map_off -- SOFTRDMA_NO_MAP=1: neither publish nor map (before and
 * after from one build), nor where process_vm_* is forced off */
int soft_map_off(void)
{
	static int off = -1;

	if (off < 0) {
		const char *e = getenv("SOFTRDMA_NO_MAP");

		off = (e && e[0] == '1') || soft_novm_env();
	}
	return off;
}

/* vma_of -- the MAP_SHARED file mapping holding [addr, addr+len): file
 * offset of addr, device and inode; 0 or -1 */
static int vma_of(uintptr_t addr, size_t len, uint64_t *off, dev_t *dev,
		  uint64_t *ino)
{
	char *line = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/self/maps", "re");
	int ret = -1;

	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		uint64_t lo, hi, pgoff, inode;
		unsigned int maj, mi;
		char perm[8];

		if (sscanf(line,
			   "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64
			   " %x:%x %" SCNu64,
			   &lo, &hi, perm, &pgoff, &maj, &mi, &inode) != 7)
			continue;
		if (addr < lo || addr >= hi)
			continue;
		if (len <= hi - addr && perm[3] == 's' && inode) {
			*off = pgoff + (addr - lo);
			*dev = makedev(maj, mi);
			*ino = inode;
			ret = 0;
		}
		break;
	}
	free(line);
	fclose(f);
	return ret;
}

/* file_ok -- fd is the sealed file (dev, ino) and holds [off, off+len)
 * for good: sealed against shrinking, writable through a shared map */
static int file_ok(int fd, dev_t dev, uint64_t ino, uint64_t off, uint64_t len)
{
	struct stat st;
	int seals;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_dev != dev ||
	    (uint64_t)st.st_ino != ino)
		return 0;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) ||
	    (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
		return 0;
	return st.st_size >= 0 && off <= (uint64_t)st.st_size &&
	       len <= (uint64_t)st.st_size - off;
}

/* fd_of -- a dup (close-on-exec) of one of our fds that refers to the
 * file (dev, ino) and passes file_ok; -1 if none */
static int fd_of(dev_t dev, uint64_t ino, uint64_t off, uint64_t len)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int fd, ret = -1;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char *end;
		long n = strtol(de->d_name, &end, 10);

		if (*end || n < 0 || n > INT32_MAX || n == dirfd(d))
			continue;
		fd = (int)n;
		if (file_ok(fd, dev, ino, off, len)) {
			ret = fcntl(fd, F_DUPFD_CLOEXEC, 0);
			break;
		}
	}
	closedir(d);
	return ret;
}

/* fds_cap -- how many fds publication may keep: a quarter of the limit */
static int fds_cap(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 256;
	return (int)(rl.rlim_cur / 4 < 65536 ? rl.rlim_cur / 4 : 65536);
}

/*
 * soft_map_publish -- at registration: when [addr, addr+len) lies in one
 * shared mapping of a sealed memfd, fill e's map fields and return the fd
 * kept for it (close it with soft_map_unpublish); -1: not shareable, e
 * untouched.  Slow path (a read of /proc/self/maps and of our fds).
 */
int soft_map_publish(const void *addr, size_t len, struct soft_reg_mr *e)
{
	uint64_t off = 0, ino = 0;
	dev_t dev = 0;
	int fd;

	if (soft_map_off() || atomic_load(&map_fds) >= fds_cap() ||
	    vma_of((uintptr_t)addr, len, &off, &dev, &ino))
		return -1;
	fd = fd_of(dev, ino, off, len);
	if (fd < 0)
		return -1;
	atomic_fetch_add(&map_fds, 1);
	e->map_fd = (uint32_t)fd + 1;
	e->map_off = off;
	e->map_ino = ino;
	e->map_dev = (uint64_t)dev;
	return fd;
}

/* soft_map_unpublish -- the registration went: its fd too */
void soft_map_unpublish(int fd)
{
	if (fd < 0)
		return;
	close(fd);
	atomic_fetch_sub(&map_fds, 1);
}

/* same_entry -- the registry entry a is the one b was made for */
static int same_entry(const struct soft_reg_mr *a, const struct soft_reg_mr *b)
{
	return a->key == b->key && a->pid == b->pid && a->start == b->start &&
	       a->va == b->va && a->len == b->len && a->map_fd == b->map_fd &&
	       a->map_off == b->map_off && a->map_ino == b->map_ino &&
	       a->map_dev == b->map_dev;
}

/* map_drop -- forget a mapping */
static void map_drop(struct soft_map *m)
{
	if (m->mem)
		munmap(m->mem, m->mem_len);
	memset(m, 0, sizeof(*m));
}

/* peer_fd -- a dup of the owner's fd; -1 where the kernel refuses (ptrace
 * rights, as process_vm_*) or the owner has gone */
static int peer_fd(const struct soft_reg_mr *e)
{
	int pidfd, fd;

	pidfd = (int)syscall(SYS_pidfd_open, (pid_t)e->pid, 0);
	if (pidfd < 0)
		return -1;
	/* the pidfd names the process with that pid now: ours only when it
	 * started when the registration says */
	fd = soft_pid_alive(e->pid, e->start)
		     ? (int)syscall(SYS_pidfd_getfd, pidfd, (int)e->map_fd - 1,
				    0)
		     : -1;
	close(pidfd);
	return fd;
}

/* map_new -- map the file behind e, or leave m not mappable */
static void map_new(struct soft_map *m, const struct soft_reg_mr *e)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), at, lead;
	int fd;
	void *p;

	m->e = *e;
	if (!e->len || e->len > SIZE_MAX / 2)
		return;
	fd = peer_fd(e);
	if (fd < 0)
		return;
	at = e->map_off & ~(pg - 1);
	lead = e->map_off - at;
	if (file_ok(fd, (dev_t)e->map_dev, e->map_ino, e->map_off, e->len) &&
	    at <= (uint64_t)INT64_MAX) {
		p = mmap(NULL, (size_t)(lead + e->len), PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, (off_t)at);
		if (p != MAP_FAILED) {
			m->mem = p;
			m->mem_len = (size_t)(lead + e->len);
			m->base = (uint8_t *)p + lead;
		}
	}
	close(fd);
}

/*
 * soft_map_get -- where the peer MR e (a snapshot of its registry entry,
 * taken under its stripe lock and checked: a plain MR of a peer in
 * another process, with a file) has its first byte mapped here; NULL: copy
 * with process_vm_*.
 * The mapping covers exactly e->len bytes.  Context lock held.
 */
uint8_t *soft_map_get(struct soft_context *ctx, const struct soft_reg_mr *e)
{
	struct soft_map *m;

	if (!e->map_fd || e->pid == soft_self_pid || soft_map_off())
		return NULL; /* our own memory is reached where it is */
	if (!ctx->maps) {
		ctx->maps = calloc(1, sizeof(*ctx->maps));
		if (!ctx->maps)
			return NULL;
	}
	m = &ctx->maps->m[((uint32_t)e->pid * 31u + soft_key_slot(e->key)) %
			  SOFT_MAPS];
	if (m->e.key && same_entry(&m->e, e))
		return m->base;
	map_drop(m);
	map_new(m, e);
	return m->base;
}

/* soft_map_sweep -- at every progress pass: once a second (looked at every
 * 64 passes, and at every pass of the progress thread), mappings whose
 * registration went, or whose owner died, go, and with them the memory
 * they kept; those not mappable are tried again.  Context lock held. */
void soft_map_sweep(struct soft_context *ctx)
{
	struct soft_maps *t = ctx->maps;
	struct soft_reg_mr now;
	struct soft_map *m;
	uint64_t ns;
	int i;

	if ((++t->pass & 63) && !ctx->in_thread)
		return;
	ns = soft_now_ns();
	if (ns - t->checked < 1000000000ull)
		return;
	t->checked = ns;
	for (i = 0; i < SOFT_MAPS; i++) {
		m = &t->m[i];
		if (!m->e.key)
			continue;
		now = soft_reg->mr[soft_key_slot(m->e.key)];
		if (!m->mem || !same_entry(&now, &m->e) ||
		    !soft_pid_alive(m->e.pid, m->e.start))
			map_drop(m);
	}
}

/* soft_map_fini -- the context closes: every mapping goes */
void soft_map_fini(struct soft_context *ctx)
{
	int i;

	if (!ctx->maps)
		return;
	for (i = 0; i < SOFT_MAPS; i++)
		map_drop(&ctx->maps->m[i]);
	free(ctx->maps);
	ctx->maps = NULL;
}
