/* SPDX-License-Identifier: MIT */
/*
 * fork.c -- softrdma across fork(): the child finds none of this
 * process's locks held.
 *
 * A process-private lock that another thread holds at fork() (the
 * progress thread, the CM's or the network path's thread, or a thread of
 * the program inside a verb) stays held for good in the child, where
 * that thread does not exist: a child that opens a device of its own
 * (soft/README.md, "fork()") then hangs in its first ibv_open_device,
 * ibv_create_qp or ibv_reg_mr.  So every such lock is taken before
 * fork(), in the order below, and released after it on both sides, as
 * glibc does with malloc's arenas.  Locks in shared memory (the
 * registry's, its key stripes, the multicast table's) need none of this:
 * their holder goes on in the parent and releases them for the child
 * too.
 *
 * The order follows the code's nestings, outer first: a lock taken while
 * another is held comes after it, and so does one taken while a shared
 * lock is held that is itself taken under an earlier one (a key stripe
 * under soft_mw_lock; soft_pub_lock under a key stripe in
 * ibv_rereg_mr).  The last three are leaves: nothing is taken while one
 * of them is held.
 *
 * Before all of these, the CM's locks (cm.c), then the ports' (port.c:
 * its registry of contexts and their watcher), both in hooks of their
 * modules: the CM opens its device under its locks, and device open and
 * close take the ports' lock under none of those below, nor take any of
 * them under it.
 *
 * One holder of soft_net_mtx may not let it go: a thread forking the
 * host's agent (agent.c) holds it, and before glibc 2.36 its fork()
 * waits for glibc's fork lock, which ours holds until our handlers are
 * done.  Then we go on without that lock, and the child, where its
 * holder does not exist, makes it anew (the network path was only being
 * started: tests/soft/forklock).
 */
#include "config.h"

#include <pthread.h>
#include <unistd.h>

#include "softrdma.h"

static pthread_mutex_t *const fork_locks[] = {
	&soft_reg_local_lock,  /* device open and close; the registry's */
	&soft_mw_lock,	       /* memory windows; key stripes */
	&soft_net_mtx,	       /* the network path; the next one */
	&soft_flt_mtx,	       /* its fault injection */
	&soft_mc_local,	       /* multicast groups; their host table */
	&soft_qp_table_lock,   /* our QPNs */
	&soft_chan_cache_lock, /* completion channels' FIFOs */
	&soft_pub_lock,	       /* shareable registrations */
};

#define NLOCKS (sizeof(fork_locks) / sizeof(fork_locks[0]))

static int net_left; /* soft_net_mtx not taken: its holder forks the agent */

/* fork_lock -- take m; soft_net_mtx only while no thread forks the host's
 * agent (0: not taken) */
static int fork_lock(pthread_mutex_t *m)
{
	if (m != &soft_net_mtx) {
		pthread_mutex_lock(m);
		return 1;
	}
	while (pthread_mutex_trylock(m)) {
		if (atomic_load(&soft_agent_spawning))
			return 0;
		usleep(100);
	}
	return 1;
}

/* fork_prepare -- take them all (none in the thread forking the host's
 * agent: it holds soft_net_mtx, and the agent uses none of them) */
static void fork_prepare(void)
{
	size_t i;

	if (soft_agent_forking)
		return;
	soft_cm_fork_prepare();
	soft_port_fork_prepare();
	for (i = 0; i < NLOCKS; i++)
		if (!fork_lock(fork_locks[i]))
			net_left = 1;
}

/* fork_release -- release them, last first; the child makes anew the one
 * left to its holder, who did not come along */
static void fork_release(int child)
{
	size_t i = NLOCKS;

	while (i--) {
		if (fork_locks[i] != &soft_net_mtx || !net_left)
			pthread_mutex_unlock(fork_locks[i]);
		else if (child)
			pthread_mutex_init(fork_locks[i], NULL);
	}
	net_left = 0;
}

/* fork_parent -- resume */
static void fork_parent(void)
{
	if (soft_agent_forking)
		return;
	fork_release(0);
	soft_port_fork_parent();
	soft_cm_fork_parent();
}

/* fork_child -- resume; the ports, the CM and the network path forget
 * their threads, which did not come along (the ports their parent's
 * contexts, and the network path its parent's sockets and agent
 * connection) */
static void fork_child(void)
{
	if (soft_agent_forking)
		return;
	fork_release(1);
	soft_port_fork_child();
	soft_cm_fork_child();
	soft_net_fork_child();
}

/* fork_load -- library load: register the handlers */
__attribute__((constructor)) static void fork_load(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
