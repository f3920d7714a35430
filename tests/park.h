/* SPDX-License-Identifier: MIT */
/*
 * park.h -- hold a thread inside a library, owning one of its locks,
 * while the main thread forks (the fork tests: tests/soft/forklock,
 * tests/core/forkctx).
 *
 * The program's own pthread_mutex_unlock is reached first by the
 * library's calls (it is exported: the build hides symbols by default).
 * A thread that set park_me, once park_armed is set, sleeps 300 ms before
 * it releases a lock that lives in the library's image (a process-private
 * one; locks in shared memory or in allocated objects live elsewhere),
 * with park_parked set meanwhile; after the release it waits until
 * park_forked is set, asleep: GCC 12's ASan allocator has no fork
 * handler, so a thread allocating during the fork would leave the
 * allocator's lock held in the child.  Include it in one file only,
 * after defining _GNU_SOURCE, and after tap.h.
 */
#ifndef RDMAMSG_TEST_PARK_H
#define RDMAMSG_TEST_PARK_H

#include <dlfcn.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int park_armed, park_forked, park_stop;
static atomic_uintptr_t park_parked; /* the lock held, while parked */
static __thread int park_me;
static uintptr_t park_lo, park_hi; /* the library's image */

__attribute__((visibility("default"))) int pthread_mutex_unlock(
	pthread_mutex_t *m)
{
	static int (*real)(pthread_mutex_t *);
	uintptr_t a = (uintptr_t)m;
	int park = park_me && a >= park_lo && a < park_hi &&
		   atomic_exchange(&park_armed, 0);
	int r;

	if (!real)
		real = (int (*)(pthread_mutex_t *))dlsym(
			RTLD_NEXT, "pthread_mutex_unlock");
	if (park) {
		atomic_store(&park_parked, a);
		usleep(300000);
	}
	r = real(m);
	while (park && !atomic_load(&park_forked))
		usleep(1000);
	return r;
}

/* park_find -- dl_iterate_phdr: the address range of the object whose
 * name holds ARG */
static int park_find(struct dl_phdr_info *info, size_t size, void *arg)
{
	int i;

	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, (const char *)arg))
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type != PT_LOAD)
			continue;
		if (!park_lo || lo < park_lo)
			park_lo = lo;
		if (lo + p->p_memsz > park_hi)
			park_hi = lo + p->p_memsz;
	}
	return 1;
}

/* park_in -- park in the loaded library whose file name holds NAME; 0 if
 * none is loaded */
static inline int park_in(const char *name)
{
	park_lo = park_hi = 0;
	dl_iterate_phdr(park_find, (void *)name);
	return park_hi != 0;
}

/* park_wait -- until the armed thread is parked (5 s at most); 0 if not */
static inline int park_wait(void)
{
	int i;

	for (i = 0; i < 5000 && !atomic_load(&park_parked); i++)
		usleep(1000);
	return atomic_load(&park_parked) != 0;
}

/* park_fork -- fork; the child runs fn and reports what it returns
 * through a pipe, then ends by SIGKILL: what it inherited from the
 * parked thread mid-call, on a stack that did not come along, is not its
 * to free (valgrind would count it lost at its exit).  The parent then
 * lets the parked thread go on.  fn's value, 128 if the child died
 * without a report, or -1 if it gave none within 10 s (then it is
 * killed). */
static inline int park_fork(int (*fn)(void))
{
	struct pollfd pfd;
	unsigned char r;
	int p[2], st, ret = -1;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		r = (unsigned char)fn();
		if (write(p[1], &r, 1) != 1)
			_exit(127);
		kill(getpid(), SIGKILL);
	}
	atomic_store(&park_forked, 1);
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 10000) == 1)
		ret = read(p[0], &r, 1) == 1 ? r : 128;
	close(p[0]);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return ret;
}

/* park_reset -- before the next round (then arm it) */
static inline void park_reset(void)
{
	atomic_store(&park_armed, 0);
	atomic_store(&park_forked, 0);
	atomic_store(&park_parked, 0);
	atomic_store(&park_stop, 0);
}

/* park_run -- one round: the busy thread (looping until park_stop) is
 * started and parked, the main thread forks (park_fork with child), then
 * the busy thread is stopped; what park_fork returns */
static inline int park_run(void *(*busy)(void *), int (*child)(void))
{
	pthread_t th;
	int ret;

	if (pthread_create(&th, NULL, busy, NULL))
		bail_out("pthread_create");
	if (!park_wait())
		bail_out("the busy thread never parked");
	ret = park_fork(child);
	atomic_store(&park_stop, 1);
	pthread_join(th, NULL);
	return ret;
}

#endif
