/* SPDX-License-Identifier: MIT */
/* util.h -- helpers shared by the core tests */
#ifndef RDMAMSG_TEST_UTIL_H
#define RDMAMSG_TEST_UTIL_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rdmamsg.h"

/* test_now_ms -- monotonic milliseconds */
static inline long long test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* test_log -- library messages become TAP diagnostics */
static inline void test_log(int level, const char *func, const char *msg,
			    void *arg)
{
	(void)arg;
	printf("# [%d %s] %s\n", level, func, msg);
	fflush(stdout);
}

/* test_setup -- private softrdma namespace, logging to diagnostics */
static inline void test_setup(const char *name)
{
	char prefix[64];
	const char *lvl = getenv("RDMAMSG_TEST_LOG");

	snprintf(prefix, sizeof(prefix), "rmt-%s-%d", name, (int)getpid());
	setenv("SOFTRDMA_SHM_PREFIX", prefix, 1);
	rdmamsg_log_set_function(test_log, NULL);
	rdmamsg_log_set_level(lvl ? atoi(lvl) : RDMAMSG_LOG_WARNING);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* test_ctx -- a context in fd mode on softrdma, or skip the test */
static inline struct rdmamsg_ctx *test_ctx_or_skip(void)
{
	struct rdmamsg_ctx *ctx = NULL;
	int ret = rdmamsg_ctx_create(NULL, &ctx);

	if (ret)
		skip_all("no context on this fabric: %s",
			 rdmamsg_strerror(ret));
	return ctx;
}

/* test_run_until -- drive ctx in fd mode until *flag or ms elapse */
static inline int test_run_until(struct rdmamsg_ctx *ctx, volatile int *flag,
				 int ms)
{
	long long end = test_now_ms() + ms;
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(ctx, &pfd.fd);
	pfd.events = POLLIN;
	while (!*flag && test_now_ms() < end) {
		if (rdmamsg_ctx_arm(ctx) == 0)
			poll(&pfd, 1, 50);
		rdmamsg_ctx_progress(ctx);
	}
	return *flag;
}

/* test_wait_child -- the child's exit status (or 128+signal) */
static inline int test_wait_child(pid_t pid)
{
	int st = 0;

	if (waitpid(pid, &st, 0) < 0)
		return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

#endif /* RDMAMSG_TEST_UTIL_H */
