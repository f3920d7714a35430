/* SPDX-License-Identifier: MIT */
/* bench.h -- the clock and the CPU pinning of the benchmark programs */
#ifndef RDMAMSG_TOOLS_BENCH_H
#define RDMAMSG_TOOLS_BENCH_H

#include <errno.h>
#include <sched.h>
#include <stdint.h>
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

#endif
