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
#include <sys/ioctl.h>
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
 * with the file behind it: an fd of the owner's (a dup softrdma keeps
 * while registrations in that file live), the file offset of the MR's
 * first byte and the file's identity.  A peer that copies into or out of
 * it (the initiator of a WRITE, READ or atomic, the responder pulling a
 * large SEND) takes that fd with pidfd_getfd(2), which the kernel allows
 * exactly where it allows process_vm_readv (ptrace attach rights), maps
 * the file once and copies with memcpy; anything that fails falls back to
 * process_vm_*.  What the peer may touch is still decided by the
 * registry's checks, under the key's stripe lock, before every copy: the
 * mapping is only ever used at the file offsets of the registry entry
 * just checked, and only while that entry names the very file mapped, so
 * a deregistered or re-registered range is never reached through it.  The
 * seal keeps the file from shrinking under the mapping (no SIGBUS in our
 * copy, whatever the owner does).  Memory the owner unmaps while it is
 * registered stays reachable, as pinned pages do on an HCA.
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

/* /proc/<pid>/maps' PROCMAP_QUERY (Linux 6.11, include/uapi/linux/fs.h):
 * the mapping holding an address, without reading the whole text */
struct soft_procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset;
	uint64_t inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define SOFT_PROCMAP_QUERY  _IOWR('f', 17, struct soft_procmap_query)
#define SOFT_PROCMAP_READ   0x01 /* PROCMAP_QUERY_VMA_READABLE */
#define SOFT_PROCMAP_WRITE  0x02 /* PROCMAP_QUERY_VMA_WRITABLE */
#define SOFT_PROCMAP_SHARED 0x08 /* PROCMAP_QUERY_VMA_SHARED */

/* a file some of our registrations lie in, and the fd kept for peers */
struct pub_file {
	dev_t dev;
	uint64_t ino;
	uint64_t size; /* at least (sealed against shrinking) */
	int fd;
	int refs;
};

pthread_mutex_t soft_pub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pub_file *pubs; /* under soft_pub_lock */
static int npubs, pubs_cap;
static int maps_fd = -1; /* /proc/<maps_pid>/maps, open while MRs live */
static int32_t maps_pid;
static uint64_t nregs; /* MRs of this process */

/* a file of a peer's, mapped here whole (or found not mappable: mem
 * NULL); key: the registration it was last used for */
struct soft_map {
	int32_t pid;
	uint64_t start;
	uint32_t fd; /* the owner's fd + 1, as published */
	uint64_t ino, dev;
	uint32_t key;
	void *mem;
	uint64_t size;
};

/* a context's mappings, by (owner, file) in sets of SOFT_MAP_WAYS: a
 * peer's pool has a file per 1 MiB slab, and files that shared one entry
 * were mapped again on every other use (a publisher placing into 3
 * subscribers' 4,096 receives each: 99 files, 373 mappings in 30,000
 * messages, each mapping then faulted in page by page) */
#define SOFT_MAPS     1024
#define SOFT_MAP_WAYS 4
struct soft_maps {
	struct soft_map m[SOFT_MAPS];
	uint32_t pass;	  /* progress passes */
	uint64_t checked; /* ns: the last check of them all */
};

/* soft_map_off -- SOFTRDMA_NO_MAP=1: neither publish nor map (before and
 * after from one build), nor where process_vm_* is forced off */
int soft_map_off(void)
{
	static _Atomic int off = -1;

	return soft_env_flag_or(&off, "SOFTRDMA_NO_MAP", soft_novm_env);
}

/* soft_push_off -- SOFTRDMA_NO_PUSH=1: SENDs never placed by their sender
 * (data.c fast_push), always through the copy ring; or where nothing is
 * mapped */
int soft_push_off(void)
{
	static _Atomic int off = -1;

	return soft_env_flag_or(&off, "SOFTRDMA_NO_PUSH", soft_map_off);
}

/* vma_text -- vma_of from the text of /proc/self/maps (before 6.11) */
static int vma_text(uintptr_t addr, size_t len, uint64_t *off, dev_t *dev,
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

/* maps_text -- SOFTRDMA_TEST_MAPS_TEXT=1: read the text, as before 6.11 */
static int maps_text(void)
{
	static _Atomic int text = -1;

	return soft_env_flag(&text, "SOFTRDMA_TEST_MAPS_TEXT");
}

/* maps_open -- maps_fd, ours (not a forked parent's); soft_pub_lock held */
static void maps_open(void)
{
	if (maps_fd >= 0 && maps_pid != soft_self_pid) {
		close(maps_fd); /* a forked child's: its parent's maps */
		maps_fd = -1;
	}
	if (maps_fd < 0) {
		maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
		maps_pid = soft_self_pid;
	}
}

/* vma_of -- the MAP_SHARED file mapping holding [addr, addr+len): file
 * offset of addr, device and inode; 0 or -1.  soft_pub_lock held. */
static int vma_of(uintptr_t addr, size_t len, uint64_t *off, dev_t *dev,
		  uint64_t *ino)
{
	struct soft_procmap_query q;

	if (maps_text())
		return vma_text(addr, len, off, dev, ino);
	maps_open();
	memset(&q, 0, sizeof(q));
	q.size = sizeof(q);
	q.query_addr = addr;
	if (maps_fd < 0 || ioctl(maps_fd, SOFT_PROCMAP_QUERY, &q)) {
		if (maps_fd >= 0 && errno == ENOENT)
			return -1; /* nothing mapped there */
		return vma_text(addr, len, off, dev, ino);
	}
	if (!(q.vma_flags & SOFT_PROCMAP_SHARED) || !q.inode ||
	    addr < q.vma_start || len > q.vma_end - addr)
		return -1;
	*off = q.vma_offset + (addr - q.vma_start);
	*dev = makedev(q.dev_major, q.dev_minor);
	*ino = q.inode;
	return 0;
}

/* file_ok -- fd is the file (dev, ino), sealed against shrinking, not
 * against writing, and holds [off, off+len); its size in *size */
static int file_ok(int fd, dev_t dev, uint64_t ino, uint64_t off, uint64_t len,
		   uint64_t *size)
{
	struct stat st;
	int seals;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_dev != dev ||
	    (uint64_t)st.st_ino != ino || st.st_size < 0)
		return 0;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) ||
	    (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
		return 0;
	*size = (uint64_t)st.st_size;
	return off <= *size && len <= *size - off;
}

/* is_pub -- fd is one kept for a published file; soft_pub_lock held */
static int is_pub(int fd)
{
	int i;

	for (i = 0; i < npubs; i++)
		if (pubs[i].fd == fd)
			return 1;
	return 0;
}

/* fd_of -- a dup (close-on-exec) of one of our fds that refers to the
 * file (dev, ino) and passes file_ok (its size in *size); -1 if none.
 * soft_pub_lock held.  The scan looks at fds that other threads of the
 * program own: one may close fd n and open another file under its number
 * between the look and the dup, so the dup is looked at again (it is
 * ours: nobody else closes it). */
static int fd_of(dev_t dev, uint64_t ino, uint64_t off, uint64_t len,
		 uint64_t *size)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int ret = -1, fd;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char *end;
		long n = strtol(de->d_name, &end, 10);

		if (*end || n < 0 || n > INT32_MAX || n == dirfd(d) ||
		    is_pub((int)n))
			continue;
		if (!file_ok((int)n, dev, ino, off, len, size))
			continue;
		fd = fcntl((int)n, F_DUPFD_CLOEXEC, 0);
		if (fd >= 0 && file_ok(fd, dev, ino, off, len, size)) {
			ret = fd;
			break;
		}
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
	return ret;
}

/* pubs_max -- how many files publication may keep open: a quarter of the
 * fd limit */
static int pubs_max(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 256;
	return (int)(rl.rlim_cur / 4 < 65536 ? rl.rlim_cur / 4 : 65536);
}

/* pub_take -- the fd kept for file (dev, ino), one more registration in
 * it ([off, off+len) checked); -1: none.  soft_pub_lock held. */
static int pub_take(dev_t dev, uint64_t ino, uint64_t off, uint64_t len)
{
	struct pub_file *p;
	uint64_t size;
	int i, fd;

	for (i = 0; i < npubs; i++) {
		p = &pubs[i];
		if (p->dev != dev || p->ino != ino)
			continue;
		/* the size seen last, else the file's now (it may grow) */
		if ((off > p->size || len > p->size - off) &&
		    !file_ok(p->fd, dev, ino, off, len, &p->size))
			return -1;
		p->refs++;
		return p->fd;
	}
	if (npubs == pubs_cap) {
		int cap = pubs_cap ? 2 * pubs_cap : 16;

		if (cap > pubs_max())
			return -1;
		p = realloc(pubs, (size_t)cap * sizeof(*p));
		if (!p)
			return -1;
		pubs = p;
		pubs_cap = cap;
	}
	fd = fd_of(dev, ino, off, len, &size);
	if (fd < 0)
		return -1;
	pubs[npubs++] = (struct pub_file){dev, ino, size, fd, 1};
	return fd;
}

/* range_text -- soft_map_range_ok from the text of /proc/self/maps (its
 * lines in address order): 1, 0, or -1 when it cannot be read */
static int range_text(uintptr_t addr, uintptr_t end, int write)
{
	char *line = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/self/maps", "re");
	int ret = 0;

	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		uint64_t lo, hi;
		char perm[8];

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &lo, &hi,
			   perm) != 3 ||
		    hi <= addr)
			continue;
		if (lo > addr || perm[0] != 'r' || (write && perm[1] != 'w'))
			break; /* a hole, or not accessible so */
		addr = (uintptr_t)hi;
		if (addr >= end) {
			ret = 1;
			break;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * soft_map_range_ok -- [addr, addr+len) is mapped, readable, and writable
 * if write: what pinning it for an HCA needs (ib_umem_get pins with
 * FOLL_WRITE for a writable registration, without FOLL_FORCE since Linux
 * 6.2), so that a registration the kernel refuses with EFAULT is refused
 * here too rather than crash the process that copies into it later.  1
 * or 0; 1 when the maps cannot be read at all (nothing to go by).
 */
int soft_map_range_ok(const void *addr, size_t len, int write)
{
	uintptr_t a = (uintptr_t)addr, end = a + len;
	struct soft_procmap_query q;
	int ret = 1;

	if (maps_text())
		return range_text(a, end, write) != 0;
	pthread_mutex_lock(&soft_pub_lock);
	maps_open();
	while (a < end) {
		memset(&q, 0, sizeof(q));
		q.size = sizeof(q);
		q.query_addr = a;
		if (maps_fd < 0 || ioctl(maps_fd, SOFT_PROCMAP_QUERY, &q)) {
			if (maps_fd >= 0 && errno == ENOENT)
				ret = 0; /* nothing mapped at a */
			else
				ret = range_text(a, end, write) != 0;
			break;
		}
		if (q.vma_start > a || !(q.vma_flags & SOFT_PROCMAP_READ) ||
		    (write && !(q.vma_flags & SOFT_PROCMAP_WRITE))) {
			ret = 0;
			break;
		}
		a = (uintptr_t)q.vma_end;
	}
	if (!nregs && maps_fd >= 0) { /* kept only while MRs live */
		close(maps_fd);
		maps_fd = -1;
	}
	pthread_mutex_unlock(&soft_pub_lock);
	return ret;
}

/*
 * soft_map_publish -- at registration: when [addr, addr+len) lies in one
 * shared mapping of a sealed memfd, fill e's map fields and return the fd
 * kept for it; -1: not shareable, e untouched.  Every registration gives
 * it back with soft_map_unpublish.  Slow path: a PROCMAP_QUERY, and for a file not seen
 * before a look at our fds.
 */
int soft_map_publish(const void *addr, size_t len, struct soft_reg_mr *e)
{
	uint64_t off = 0, ino = 0;
	dev_t dev = 0;
	int fd = -1;

	pthread_mutex_lock(&soft_pub_lock);
	nregs++;
	if (!soft_map_off() && !vma_of((uintptr_t)addr, len, &off, &dev, &ino))
		fd = pub_take(dev, ino, off, len);
	pthread_mutex_unlock(&soft_pub_lock);
	if (fd < 0)
		return -1;
	e->map_fd = (uint32_t)fd + 1;
	e->map_off = off;
	e->map_ino = ino;
	e->map_dev = (uint64_t)dev;
	return fd;
}

/* soft_map_unpublish -- a registration went (fd: the one soft_map_publish
 * returned for it): the file's fd goes with the file's last one, and
 * /proc/self/maps with the process's last */
void soft_map_unpublish(int fd)
{
	int i;

	pthread_mutex_lock(&soft_pub_lock);
	if (nregs && !--nregs && maps_fd >= 0) {
		close(maps_fd);
		maps_fd = -1;
	}
	for (i = 0; fd >= 0 && i < npubs; i++) {
		if (pubs[i].fd != fd)
			continue;
		if (!--pubs[i].refs) {
			close(fd);
			pubs[i] = pubs[--npubs];
		}
		break;
	}
	pthread_mutex_unlock(&soft_pub_lock);
}

/* same_file -- the registry entry e names the file m maps */
static int same_file(const struct soft_map *m, const struct soft_reg_mr *e)
{
	return m->pid == e->pid && m->start == e->start && m->fd == e->map_fd &&
	       m->ino == e->map_ino && m->dev == e->map_dev;
}

/* map_drop -- forget a mapping */
static void map_drop(struct soft_map *m)
{
	if (m->mem)
		munmap(m->mem, (size_t)m->size);
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

/* map_new -- map the whole file behind e, or leave m not mappable */
static void map_new(struct soft_map *m, const struct soft_reg_mr *e)
{
	uint64_t size;
	void *p;
	int fd;

	m->pid = e->pid;
	m->start = e->start;
	m->fd = e->map_fd;
	m->ino = e->map_ino;
	m->dev = e->map_dev;
	m->key = e->key;
	fd = peer_fd(e);
	if (fd < 0)
		return;
	if (file_ok(fd, (dev_t)e->map_dev, e->map_ino, e->map_off, e->len,
		    &size) &&
	    size && size <= SIZE_MAX / 2) {
		p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 fd, 0);
		if (p != MAP_FAILED) {
			m->mem = p;
			m->size = size;
		}
	}
	close(fd);
}

/*
 * soft_map_get -- where the peer MR e (a snapshot of its registry entry,
 * taken under its stripe lock and checked: a plain MR of a peer in
 * another process, with a file) has its first byte mapped here; the
 * mapping holds its e->len bytes.  NULL: copy with process_vm_*.
 * Context lock held.
 */
uint8_t *soft_map_get(struct soft_context *ctx, const struct soft_reg_mr *e)
{
	struct soft_map *m = NULL, *set;
	uint32_t h, w;

	if (!e->map_fd || e->pid == soft_self_pid || soft_map_off())
		return NULL; /* our own memory is reached where it is */
	if (!ctx->maps) {
		ctx->maps = calloc(1, sizeof(*ctx->maps));
		if (!ctx->maps)
			return NULL;
	}
	h = ((uint32_t)e->pid * 0x9e3779b1u ^ (uint32_t)e->map_ino) *
	    0x85ebca6bu;
	set = &ctx->maps->m[(h >> 16) % (SOFT_MAPS / SOFT_MAP_WAYS) *
			    SOFT_MAP_WAYS];
	for (w = 0; w < SOFT_MAP_WAYS && !m; w++)
		if (set[w].pid && same_file(&set[w], e))
			m = &set[w];
	for (w = 0; w < SOFT_MAP_WAYS && !m; w++)
		if (!set[w].pid)
			m = &set[w];
	if (!m) /* all taken by other files: one goes, in turn */
		m = &set[ctx->maps->pass % SOFT_MAP_WAYS];
	if (!m->pid || !same_file(m, e) ||
	    (m->mem && (e->map_off > m->size ||
			e->len > m->size - e->map_off))) { /* it grew */
		map_drop(m);
		map_new(m, e);
	}
	if (!m->mem || e->map_off > m->size || e->len > m->size - e->map_off)
		return NULL;
	m->key = e->key;
	return (uint8_t *)m->mem + e->map_off;
}

/* soft_map_need -- the table made now, so that every pass calls
 * soft_map_sweep (an XRC SRQ's outbox is drained there); 0 or -1; lock
 * held */
int soft_map_need(struct soft_context *ctx)
{
	if (!ctx->maps)
		ctx->maps = calloc(1, sizeof(*ctx->maps));
	return ctx->maps ? 0 : -1;
}

/* soft_map_sweep -- at every progress pass: once a second (looked at every
 * 64 passes, and at every pass of the progress thread), mappings whose
 * last registration went (a later use maps the file again), or whose
 * owner died, go, and with them the memory they kept; those not mappable
 * are tried again.  Each registration is read whole (soft_key_read: its
 * owner may be rewriting it); one being changed for too long drops its
 * mapping too.  Context lock held. */
void soft_map_sweep(struct soft_context *ctx)
{
	struct soft_maps *t = ctx->maps;
	struct soft_reg_mr now;
	struct soft_map *m;
	uint64_t ns;
	int i;

	if (ctx->nxsrq) /* XRC SRQs ride on this call (xrc.c) */
		soft_xrc_drain(ctx);
	if ((++t->pass & 63) && !ctx->in_thread)
		return;
	ns = soft_now_ns();
	if (ns - t->checked < 1000000000ull)
		return;
	t->checked = ns;
	for (i = 0; i < SOFT_MAPS; i++) {
		m = &t->m[i];
		if (!m->pid)
			continue;
		if (!m->mem || soft_key_read(soft_key_slot(m->key), &now) ||
		    now.key != m->key || !same_file(m, &now) ||
		    !soft_pid_alive(m->pid, m->start))
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
