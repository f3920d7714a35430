/*
 * copy_pingpong -- what moving SIZE bytes between two cores costs, the
 * ways a shared-memory transport can move them
 *
 * A sender thread and a responder thread on two CPUs take turns through
 * one shared cache line: the sender hands over SIZE bytes of its source
 * buffer, the responder copies them into its own buffer and answers.
 * How the bytes go:
 *   ring    the sender copies them into a ring, the responder out of it
 *           (softrdma's copy ring); the ring's offset moves on by SIZE
 *           each time and starts again at 0 past WINDOW bytes (-w 0:
 *           always at offset 0); with -p PIECE the sender hands over
 *           first and copies in PIECE bytes at a time, counting them in
 *           a line of their own, and the responder copies each piece
 *           out as the count covers it (softrdma's SENDs in pieces)
 *   direct  the responder copies out of the source itself (a mapped
 *           registration: softrdma's peermap.c)
 *   pvr     the responder reads the source with process_vm_readv (a
 *           registration of private memory; UCX's cma)
 *   push    the sender copies them straight into the responder's buffer
 *           (softrdma's fast_push into a mapped receive), which moves on
 *           as the ring does: receives posted in turn over WINDOW bytes
 *           (-w 0: one buffer, reposted each time)
 * With -f the sender writes its source before each hand-off, as an
 * application producing each message does; without, the source never
 * changes (perftest's and ucx_perftest's buffers), and the responder may
 * find the lines it read last time still valid in its own cache.  With
 * -r the responder reads each message where it landed (its buffer; push:
 * the receive it was placed in), as an application that consumes its
 * messages does; without, only what moving them takes is timed.
 *
 * Usage: copy_pingpong [-m ring|direct|pvr|push] [-s SIZE] [-w WINDOW]
 *                      [-f] [-r] [-p PIECE] [-n ROUNDTRIPS] [-c CPU0,CPU1]
 * Prints: "copy MODE SIZE WINDOW FRESH US PIECE READS" (one hand-off and
 * its answer, microseconds, the average after a warm-up of a tenth;
 * PIECE 0: whole; READS 1 with -r)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

enum mode { M_RING, M_DIRECT, M_PVR, M_PUSH };

static struct {
	enum mode mode;
	size_t size, window, piece;
	long rounds;
	int reads;	       /* -r */
	volatile uint64_t sum; /* what -r read */
	int cpu[2];
	uint8_t *ring, *src, *dst;
	pid_t pid;
	_Alignas(64) _Atomic long go;
	_Alignas(64) _Atomic long back;
	_Alignas(64) _Atomic size_t filled; /* -p: bytes in the ring so far */
} g = {.mode = M_RING,
       .size = 65536,
       .window = 256 << 10,
       .rounds = 20000,
       .cpu = {0, 1}};

/* ring_off -- where hand-off i lies in the ring */
static size_t ring_off(long i)
{
	return g.window ? ((size_t)i * g.size) % g.window : 0;
}

/* consume -- read n bytes as an application reading its message does */
static void consume(const uint8_t *p, size_t n)
{
	uint64_t sum = 0, w;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		sum += w;
	}
	g.sum = sum; /* read: not optimised away */
}

/* responder -- copy each hand-off out, answer it */
static void *responder(void *arg)
{
	long i;

	(void)arg;
	(void)pin_cpu(g.cpu[1]); /* a failure: anywhere */
	for (i = 1; i <= g.rounds; i++) {
		while (atomic_load_explicit(&g.go, memory_order_acquire) != i)
			;
		if (g.mode == M_RING && g.piece) {
			const uint8_t *r = g.ring + ring_off(i);
			size_t done = 0, f;

			while (done < g.size) {
				f = atomic_load_explicit(&g.filled,
							 memory_order_acquire);
				if (f > done) {
					memcpy(g.dst + done, r + done,
					       f - done);
					done = f;
				}
			}
		} else if (g.mode == M_RING) {
			memcpy(g.dst, g.ring + ring_off(i), g.size);
		} else if (g.mode == M_DIRECT) {
			memcpy(g.dst, g.src, g.size);
		} else if (g.mode == M_PUSH) {
			; /* in place already */
		} else {
			struct iovec l = {g.dst, g.size}, r = {g.src, g.size};

			if (process_vm_readv(g.pid, &l, 1, &r, 1, 0) !=
			    (ssize_t)g.size) {
				perror("copy_pingpong: process_vm_readv");
				exit(1);
			}
		}
		if (g.reads)
			consume(g.dst + (g.mode == M_PUSH ? ring_off(i) : 0),
				g.size);
		atomic_store_explicit(&g.back, i, memory_order_release);
	}
	return NULL;
}

/* piecewise -- hand-off i first, then its bytes into the ring piece by
 * piece, each counted once it is in */
static void piecewise(long i)
{
	uint8_t *r = g.ring + ring_off(i);
	size_t done, n;

	atomic_store_explicit(&g.filled, 0, memory_order_relaxed);
	atomic_store_explicit(&g.go, i, memory_order_release);
	for (done = 0; done < g.size; done += n) {
		n = g.size - done < g.piece ? g.size - done : g.piece;
		memcpy(r + done, g.src + done, n);
		atomic_store_explicit(&g.filled, done + n,
				      memory_order_release);
	}
}

int main(int argc, char **argv)
{
	const char *names[] = {"ring", "direct", "pvr", "push"};
	int fresh = 0, opt;
	long i, warm;
	uint64_t t0 = 0;
	pthread_t t;

	while ((opt = getopt(argc, argv, "m:s:w:frn:c:p:")) != -1) {
		switch (opt) {
		case 'm':
			for (i = 0; i < 4 && strcmp(optarg, names[i]); i++)
				;
			if (i == 4)
				goto usage;
			g.mode = (enum mode)i;
			break;
		case 's':
			g.size = strtoul(optarg, NULL, 0);
			break;
		case 'w':
			g.window = strtoul(optarg, NULL, 0);
			break;
		case 'f':
			fresh = 1;
			break;
		case 'r':
			g.reads = 1;
			break;
		case 'p':
			g.piece = strtoul(optarg, NULL, 0);
			if (!g.piece)
				goto usage;
			break;
		case 'n':
			g.rounds = strtol(optarg, NULL, 0);
			break;
		case 'c':
			if (cpu_pair(optarg, &g.cpu[0], &g.cpu[1]))
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (g.size < 1 || g.size > (64u << 20) || g.window > (1u << 30) ||
	    (g.window && g.window < g.size) || g.rounds < 10)
		goto usage;
	g.window -= g.window % g.size; /* whole hand-offs */
	g.pid = getpid();
	g.ring = aligned_alloc(4096, g.window ? g.window : g.size);
	g.src = aligned_alloc(4096, g.size);
	/* push: the responder's receives, WINDOW bytes of them */
	g.dst = aligned_alloc(4096,
			      g.mode == M_PUSH && g.window ? g.window : g.size);
	if (!g.ring || !g.src || !g.dst) {
		perror("copy_pingpong: memory");
		return 1;
	}
	memset(g.ring, 1, g.window ? g.window : g.size);
	memset(g.src, 2, g.size);
	memset(g.dst, 3, g.mode == M_PUSH && g.window ? g.window : g.size);
	if (pthread_create(&t, NULL, responder, NULL)) {
		perror("copy_pingpong: thread");
		return 1;
	}
	(void)pin_cpu(g.cpu[0]);
	warm = g.rounds / 10;
	for (i = 1; i <= g.rounds; i++) {
		if (i == warm + 1)
			t0 = now_ns();
		if (fresh)
			memset(g.src, (int)i, g.size);
		if (g.mode == M_RING && g.piece) {
			piecewise(i); /* hands over first */
		} else {
			if (g.mode == M_RING)
				memcpy(g.ring + ring_off(i), g.src, g.size);
			else if (g.mode == M_PUSH)
				memcpy(g.dst + ring_off(i), g.src, g.size);
			atomic_store_explicit(&g.go, i, memory_order_release);
		}
		while (atomic_load_explicit(&g.back, memory_order_acquire) != i)
			;
	}
	printf("copy %s %zu %zu %d %.3f %zu %d\n", names[g.mode], g.size,
	       g.window, fresh,
	       (double)(now_ns() - t0) / 1000.0 / (double)(g.rounds - warm),
	       g.piece, g.reads);
	pthread_join(t, NULL);
	free(g.ring);
	free(g.src);
	free(g.dst);
	return 0;
usage:
	fprintf(stderr,
		"usage: %s [-m ring|direct|pvr|push] [-s SIZE] [-w WINDOW] "
		"[-f] "
		"[-r] [-p PIECE] [-n ROUNDTRIPS >= 10] [-c CPU0,CPU1]\n",
		argv[0]);
	return 2;
}
