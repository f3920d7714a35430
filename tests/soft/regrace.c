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
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

/* registry_named -- does this run's registry have its name in /dev/shm? */
static int registry_named(void)
{
	char path[256];

	snprintf(path, sizeof(path), "/dev/shm/%s-registry",
		 getenv("SOFTRDMA_SHM_PREFIX"));
	return access(path, F_OK) == 0;
}

/* joiner -- open a context, stopping between the attach and the slot;
 * exit 0 when the registry it joined still has its name once it runs */
static int joiner(int rfd, int wfd)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	char go;
	int named;

	(void)wfd;
	t_xrecv(rfd, &go, 1);
	setenv("SOFTRDMA_TEST_ATTACH_STOP", "1", 1);
	list = ibv_get_device_list(NULL);
	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (!ctx)
		return 2;
	named = registry_named();
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return named ? 0 : 1;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	int rfd, wfd, st;
	pid_t pid;

	t_isolate("regrace");
	/* forked before we open anything: the child is a registry user of
	 * its own, not one that inherited ours */
	pid = t_spawn(joiner, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	list = ibv_get_device_list(NULL);
	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
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
	kill(pid, SIGCONT);
	if (waitpid(pid, &st, 0) != pid)
		st = -1;
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "child: its context in the registry that has the name (exit %d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	ibv_free_device_list(list);
	close(rfd);
	close(wfd);
	return done_testing();
}
