/*
 * cacheline_pingpong -- two-process latency floor over one shared cache line
 *
 * A parent and a forked child bounce a counter through one cache line of a
 * MAP_SHARED mapping, busy-polling.  Half of a round trip is the fastest
 * one-way hand-off that any shared-memory transport (softrdma's rings, UCX
 * posix, libfabric shm) can achieve between two processes of this host.
 *
 * Usage: cacheline_pingpong [-n ROUNDTRIPS] [-b BATCH] [-c CPU0,CPU1]
 * Prints: "cacheline SAMPLES MEDIAN_US AVG_US MIN_US" (one-way, microseconds)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

struct shared {
	_Alignas(64) volatile uint64_t line;
	char pad[64 - sizeof(uint64_t)];
};

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() __asm__ __volatile__("" ::: "memory")
#endif

/* pin -- bind the calling process to CPU cpu (-1: anywhere); a failure
 * leaves it where it was */
static void pin(int cpu)
{
	if (cpu >= 0)
		(void)pin_cpu(cpu);
}

/* cmp_u64 -- qsort order for uint64_t */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* wait_for -- spin until the line holds value v, yielding now and then */
static void wait_for(struct shared *sh, uint64_t v)
{
	unsigned spins = 0;

	while (sh->line != v) {
		cpu_relax();
		/* Two spinners on one oversubscribed core would starve each
		 * other for a whole time slice; yield once in a while. */
		if (++spins == 1u << 16) {
			spins = 0;
			sched_yield();
		}
	}
}

int main(int argc, char **argv)
{
	long rounds = 100000, batch = 100;
	int cpu0 = -1, cpu1 = -1, opt;
	struct shared *sh;
	uint64_t *samples, sum = 0;
	long nsamples, i, j;
	pid_t child;
	int status;

	while ((opt = getopt(argc, argv, "n:b:c:")) != -1) {
		switch (opt) {
		case 'n':
			rounds = strtol(optarg, NULL, 0);
			break;
		case 'b':
			batch = strtol(optarg, NULL, 0);
			break;
		case 'c':
			if (cpu_pair(optarg, &cpu0, &cpu1)) {
				fprintf(stderr,
					"-c wants CPU0,CPU1, each 0 to %d\n",
					CPU_SETSIZE - 1);
				return 2;
			}
			break;
		default:
			fprintf(stderr,
				"usage: %s [-n ROUNDTRIPS] [-b BATCH] "
				"[-c CPU0,CPU1]\n",
				argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || batch < 1 || batch > rounds) {
		fprintf(stderr, "need 1 <= BATCH <= ROUNDTRIPS\n");
		return 2;
	}
	nsamples = rounds / batch;
	samples = calloc((size_t)nsamples, sizeof(*samples));
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!samples || sh == MAP_FAILED) {
		perror("cacheline_pingpong: memory");
		return 1;
	}
	sh->line = 0;

	child = fork();
	if (child < 0) {
		perror("cacheline_pingpong: fork");
		return 1;
	}
	if (child == 0) {
		/* Responder: answer every odd value with the next even one. */
		pin(cpu1);
		for (i = 0; i < nsamples * batch + batch; i++) {
			wait_for(sh, 2 * (uint64_t)i + 1);
			sh->line = 2 * (uint64_t)i + 2;
		}
		_exit(0);
	}

	pin(cpu0);
	/* One warm-up batch, then timed batches. */
	for (i = -1; i < nsamples; i++) {
		uint64_t t0 = now_ns();

		for (j = 0; j < batch; j++) {
			uint64_t v = sh->line;

			sh->line = v + 1;
			wait_for(sh, v + 2);
		}
		if (i >= 0)
			samples[i] = now_ns() - t0;
	}
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "cacheline_pingpong: responder failed\n");
		return 1;
	}

	qsort(samples, (size_t)nsamples, sizeof(*samples), cmp_u64);
	for (i = 0; i < nsamples; i++)
		sum += samples[i];
	/* One-way = round trip / 2, per round trip of a batch. */
	printf("cacheline %ld %.3f %.3f %.3f\n", nsamples,
	       (double)samples[nsamples / 2] / (2.0 * batch) / 1000.0,
	       (double)sum / (double)nsamples / (2.0 * batch) / 1000.0,
	       (double)samples[0] / (2.0 * batch) / 1000.0);
	free(samples);
	munmap(sh, sizeof(*sh));
	return 0;
}
