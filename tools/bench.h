/* SPDX-License-Identifier: MIT */
/* bench.h -- the clock and the CPU pinning of the benchmark programs */
#ifndef RDMAMSG_TOOLS_BENCH_H
#define RDMAMSG_TOOLS_BENCH_H

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* now_ns -- monotonic time in nanoseconds */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* pin_cpu -- bind the calling thread (a process's only one: the process)
 * to CPU cpu; 0, or -1 with errno (EINVAL: not 0 .. CPU_SETSIZE - 1) */
static inline int pin_cpu(long cpu)
{
	cpu_set_t set;

	if (cpu < 0 || cpu >= CPU_SETSIZE) {
		errno = EINVAL;
		return -1;
	}
	CPU_ZERO(&set);
	CPU_SET((size_t)cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* cpu_pair -- "CPU0,CPU1" (a -c option) into *a and *b; 0, or -1 when
 * it is not two CPUs pin_cpu takes */
static inline int cpu_pair(const char *s, int *a, int *b)
{
	if (sscanf(s, "%d,%d", a, b) != 2)
		return -1;
	if (*a < 0 || *a >= CPU_SETSIZE || *b < 0 || *b >= CPU_SETSIZE)
		return -1;
	return 0;
}

#endif
