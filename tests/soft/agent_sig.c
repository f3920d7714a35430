/* SPDX-License-Identifier: MIT */
/*
 * agent_sig.c -- the host's agent (SOFTRDMA_NET=1, soft/agent.c) is forked
 * from the program, by whichever thread first needs the network: the
 * program's thread with its signal mask and handlers, or softrdma's net
 * thread with every signal blocked.  The daemon keeps neither: no
 * signal blocked, no handler of the program's (it runs none of the
 * program's code on a signal), so SIGTERM ends it.
 *
 * It runs in a network namespace of its own (a user namespace's), so
 * that its agent is the only one there and no other test's.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

/* on_sig -- the program's handler: the agent must not run it */
static void on_sig(int sig)
{
	(void)sig;
}

/* agent_inode -- the inode of the agent's listening socket, 0 if none */
static unsigned long agent_inode(void)
{
	FILE *f = fopen("/proc/net/unix", "r");
	char line[512];
	unsigned long ino = 0;

	if (!f)
		return 0;
	while (!ino && fgets(line, sizeof(line), f))
		if (strstr(line, "@softrdma-roce") &&
		    sscanf(line, "%*s %*s %*s %*s %*s %*s %lu", &ino) != 1)
			ino = 0;
	fclose(f);
	return ino;
}

/* agent_pid -- the process that holds socket inode ino, not us */
static pid_t agent_pid(unsigned long ino)
{
	char want[64], path[600], link[64];
	struct dirent *p, *d;
	DIR *proc, *fds;
	pid_t pid = 0;
	ssize_t n;

	snprintf(want, sizeof(want), "socket:[%lu]", ino);
	proc = opendir("/proc");
	while (proc && !pid && (p = readdir(proc))) {
		if (p->d_name[0] < '1' || p->d_name[0] > '9' ||
		    atoi(p->d_name) == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
		fds = opendir(path);
		while (fds && !pid && (d = readdir(fds))) {
			snprintf(path, sizeof(path), "/proc/%s/fd/%s",
				 p->d_name, d->d_name);
			n = readlink(path, link, sizeof(link) - 1);
			if (n > 0) {
				link[n] = 0;
				if (!strcmp(link, want))
					pid = atoi(p->d_name);
			}
		}
		if (fds)
			closedir(fds);
	}
	if (proc)
		closedir(proc);
	return pid;
}

/* sigfield -- a Sig* mask of /proc/pid/status, or ~0 if unreadable */
static unsigned long long sigfield(pid_t pid, const char *name)
{
	char path[64], line[256];
	unsigned long long v = ~0ull;
	size_t len = strlen(name);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return v;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, len) && line[len] == ':')
			v = strtoull(line + len + 1, NULL, 16);
	fclose(f);
	return v;
}

int main(void)
{
	struct ibv_qp_init_attr a;
	struct sigaction sa;
	sigset_t set;
	struct ibv_qp *qp;
	struct tctx t;
	unsigned long ino = 0;
	pid_t pid = 0;
	const char *vg;
	int i;

	alarm(60);
	if (t_own_netns())
		skip_all("no user and network namespace here");
	/* the program's handlers and mask, as the agent's fork sees them */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	setenv("SOFTRDMA_NET", "1", 1);
	t_isolate("agentsig");
	if (t_open(&t, 16))
		bail_out("open");
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = t.cq;
	a.qp_type = IBV_QPT_UD;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	qp = ibv_create_qp(t.pd, &a);
	ok(qp && !t_ud_up(qp, 0x11111111), "a UD QP up (the agent starts)");
	for (i = 0; i < 200 && !pid; i++) {
		ino = ino ? ino : agent_inode();
		pid = ino ? agent_pid(ino) : 0;
		if (!pid)
			usleep(10000);
	}
	if (!ok(pid > 0, "the agent runs (pid %d)", (int)pid))
		return done_testing();
	is_int(sigfield(pid, "SigBlk"), 0, "the agent blocks no signal");
	/* under valgrind the agent is valgrind's too, which catches every
	 * signal itself: /proc cannot tell the program's handlers apart */
	vg = getenv("RDMAMSG_TEST_VALGRIND");
	if (vg && vg[0] == '1')
		skip_one("under valgrind, SigCgt is valgrind's");
	else
		is_int(sigfield(pid, "SigCgt"), 0,
		       "the agent has no program handler");
	kill(pid, SIGTERM);
	for (i = 0; i < 200 && !t_pid_gone(pid); i++)
		usleep(10000);
	ok(t_pid_gone(pid), "SIGTERM ends the agent");
	if (!t_pid_gone(pid))
		kill(pid, SIGKILL);
	ibv_destroy_qp(qp);
	t_close(&t);
	return done_testing();
}
