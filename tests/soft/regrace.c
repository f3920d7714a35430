/* SPDX-License-Identifier: MIT */
/*
 * regrace.c -- a process that has joined the host registry but not yet
 * taken its context's slot is a user all the same: another process's
 * last close (or the agent's reap) must not remove the registry under it.
 * Else it went on alone in a registry without a name, whose QPNs, keys
 * and channels the host's next registry hands out again, and its exit
 * removed the name of that next one.  The child stops itself at that
 * point (SOFTRDMA_TEST_ATTACH_STOP, soft/shm.c) while the parent closes
 * the host's only context.
 *
 * And a process that stops while it makes the host's registry (the
 * first to open a context; SOFTRDMA_TEST_MAKE_STOP=registry) neither
 * holds up another's open nor loses what it made to it: the other one
 * used to wait a second for the registry to be finished, take it for one
 * whose maker died, remove its name and make its own, and the two
 * processes then went on in two registries with the same QPNs
 * (tests/soft/manyqp under valgrind on a loaded machine: each side's QPs
 * connected to its own).
 *
 * And the registry's name is removed once: a process whose context went
 * before another's last close, and whose own detach came after it
 * (SOFTRDMA_TEST_DETACH_STOP), removed the name again, by then the name
 * of the next registry that the other process had made meanwhile.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

/* open_first -- a context on the first device (softrdma's), or NULL */
static struct ibv_context *open_first(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx =
		list && list[0] ? ibv_open_device(list[0]) : NULL;

	if (list)
		ibv_free_device_list(list);
	return ctx;
}

/* registry_named -- does this run's registry have its name in /dev/shm? */
static int registry_named(void)
{
	char path[256];

	snprintf(path, sizeof(path), "/dev/shm/%s-registry",
		 getenv("SOFTRDMA_SHM_PREFIX"));
	return access(path, F_OK) == 0;
}

/* registry_mapped_named -- the registry that has the name is the one
 * this process maps (a mapping of that inode; a registry made with no
 * name, O_TMPFILE, keeps showing an anonymous path in the maps) */
static int registry_mapped_named(void)
{
	char path[256], line[512];
	unsigned long long ino;
	struct stat st;
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/dev/shm/%s-registry",
		 getenv("SOFTRDMA_SHM_PREFIX"));
	if (stat(path, &st) || !(f = fopen("/proc/self/maps", "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %llu", &ino) == 1 &&
		    ino == (unsigned long long)st.st_ino)
			found = 1;
	fclose(f);
	return found;
}

/* resume -- let a stopped child go on to its end: its exit code, or -1 */
static int resume(pid_t pid)
{
	int st;

	kill(pid, SIGCONT);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* open_check -- a child's exit code: open a context, and once it is
 * open, 0 when check() holds, 1 when not, 2 when there is no context */
static int open_check(int (*check)(void))
{
	struct ibv_context *ctx = open_first();
	int held;

	if (!ctx)
		return 2;
	held = check();
	ibv_close_device(ctx);
	return held ? 0 : 1;
}

/* maker -- open the host's first context, stopping while the registry is
 * made; exit 0 when, once it runs again, it is in the named registry */
static int maker(int rfd, int wfd)
{
	(void)rfd;
	(void)wfd;
	setenv("SOFTRDMA_TEST_MAKE_STOP", "registry", 1);
	return open_check(registry_mapped_named);
}

/* leaver -- open a context; once told, close it, stopping between the
 * context's end and the detach from the registry */
static int leaver(int rfd, int wfd)
{
	struct ibv_context *ctx;
	char go;

	ctx = open_first();
	t_xsend(wfd, ctx ? "y" : "n", 1);
	if (!ctx)
		return 2;
	t_xrecv(rfd, &go, 1);
	setenv("SOFTRDMA_TEST_DETACH_STOP", "1", 1);
	ibv_close_device(ctx);
	return 0;
}

/* joiner -- open a context, stopping between the attach and the slot;
 * exit 0 when the registry it joined still has its name once it runs */
static int joiner(int rfd, int wfd)
{
	char go;

	(void)wfd;
	t_xrecv(rfd, &go, 1);
	setenv("SOFTRDMA_TEST_ATTACH_STOP", "1", 1);
	return open_check(registry_named);
}

int main(void)
{
	struct ibv_context *ctx;
	int rfd, wfd, st;
	char go;
	pid_t pid;

	t_isolate("regrace");
	/* forked before we open anything: the child is a registry user of
	 * its own, not one that inherited ours */
	pid = t_spawn(joiner, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	ctx = open_first();
	ok(ctx != NULL, "parent: a context (the registry made)");
	if (!ctx)
		bail_out("no device");
	t_xsend(wfd, "g", 1);
	ok(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st),
	   "child stopped after joining the registry, before using its slot");
	ibv_close_device(ctx);
	ok(registry_named(),
	   "parent's close, the only context: the registry stays (the child "
	   "is a user)");
	st = resume(pid);
	ok(st == 0,
	   "child: its context in the registry that has the name (exit %d)",
	   st);
	close(rfd);
	close(wfd);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");

	/* the maker stops while it makes the registry, nobody else in it */
	pid = t_spawn(maker, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	ok(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st),
	   "maker stopped while it makes the registry");
	ctx = open_first();
	ok(ctx != NULL && registry_mapped_named(),
	   "another process opens a context meanwhile, in the named registry");
	st = resume(pid);
	ok(st == 0,
	   "maker, running again: its context in the same registry (exit %d)",
	   st);
	if (ctx)
		ibv_close_device(ctx);
	close(rfd);
	close(wfd);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");

	/* two last users: the leaver's context goes, then ours, then its
	 * detach from the registry, after we made the next one */
	pid = t_spawn(leaver, &rfd, &wfd); /* before our open: see joiner */
	if (pid < 0)
		bail_out("pipe or fork");
	t_xrecv(rfd, &go, 1);
	ctx = open_first();
	ok(go == 'y' && ctx != NULL, "leaver and we have a context each");
	t_xsend(wfd, "g", 1);
	ok(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st),
	   "leaver's context closed, its detach not yet run");
	ibv_close_device(ctx);
	ok(!registry_named(), "our close, the last context: the name goes");
	ctx = open_first();
	ok(ctx != NULL && registry_mapped_named(),
	   "a new context: in a new registry, named");
	st = resume(pid);
	ok(st == 0, "leaver exits 0 (%d)", st);
	ok(registry_mapped_named(),
	   "the leaver's detach left the new registry its name");
	if (ctx)
		ibv_close_device(ctx);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	close(rfd);
	close(wfd);
	return done_testing();
}
