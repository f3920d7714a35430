/* SPDX-License-Identifier: MIT */
/* bench.h -- the clock and the CPU pinning of the benchmark programs */
#ifndef RDMAMSG_TOOLS_BENCH_H
#define RDMAMSG_TOOLS_BENCH_H

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

/* now_ns -- monotonic time in nanoseconds */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * ticks -- a clock for times of single messages: the TSC where it is
 * invariant (x86, CPUID 0x80000007 EDX bit 8), else now_ns.  A time taken
 * between two readings carries a part of them: a clock_gettime() is a
 * vDSO call of about 20 ns here, a TSC read about 9, and the ping-pong
 * peers read the TSC (perftest's get_cycles, ucx_perftest's
 * ucs_get_time).  ticks_ns gives nanoseconds per tick: the TSC's
 * measured against CLOCK_MONOTONIC over 20 ms, once; 1 for now_ns.
 */
static inline int ticks_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned int a, b, c, d;

	return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
#else
	return 0;
#endif
}

static inline uint64_t ticks(int tsc)
{
#if defined(__x86_64__) || defined(__i386__)
	if (tsc)
		return __rdtsc();
#endif
	(void)tsc;
	return now_ns();
}

/* tsc_at -- a TSC reading *c and the monotonic time *t it was taken at:
 * the middle of two clock readings around it, taken again while they lie
 * more than 50 us apart (a preemption between them would put up to its
 * length into the 20 ms that ticks_ns measures: CI once saw the TSC 24 %
 * off under valgrind) */
static inline void tsc_at(uint64_t *c, uint64_t *t)
{
	uint64_t a, b;
	int i = 0;

	do {
		a = now_ns();
		*c = ticks(1);
		b = now_ns();
	} while (b - a > 50000 && ++i < 100);
	*t = a + (b - a) / 2;
}

static inline double ticks_ns(int tsc)
{
	uint64_t t0, c0, t1, c1;

	if (!tsc)
		return 1.0;
	tsc_at(&c0, &t0);
	do
		t1 = now_ns();
	while (t1 - t0 < 20000000ull);
	tsc_at(&c1, &t1);
	return c1 > c0 ? (double)(t1 - t0) / (double)(c1 - c0) : 1.0;
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
