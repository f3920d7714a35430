/* SPDX-License-Identifier: MIT */
/*
 * bulk.c -- copies of large message sources into registered memory that
 * a peer then reads (a copied rendezvous: rndv.c copy_in, pieces_send)
 *
 * A plain memcpy leaves the copy in this core's cache, which is where a
 * NIC's DMA read, or a reader on a core close by, finds it fastest.  A
 * reader on another die (an AMD EPYC's other CCD, another socket; the
 * vCPUs of a VM that its host placed so) keeps the lines it read in its
 * own cache, and the next copy into the same buffer must take each of
 * them back across the dies before writing it: such a copy of 1 MiB runs
 * at 2.7-2.9 GB/s where it ran at 30-40 (softrdma, rdmamsg_perf -t bw,
 * the cache-line floor 0.155 us against 0.032; doc/performance.md
 * "Session 55").  Non-temporal stores write whole lines without taking
 * them: 19-21.7 GB/s there, but 10-17 where the cached copy makes 30-40.
 *
 * So a context times its cached copies of BULK_MIN bytes or more: after
 * BULK_SLOW_RUN of them in a row below BULK_SLOW_BPNS bytes per
 * nanosecond, its next BULK_NT_RUN such copies are non-temporal, then a
 * cached one looks again (one slow look is enough then).  A context's
 * first copies into pool memory not yet touched are slow too (page
 * faults: softrdma maps pages as they are touched, where a registration
 * on a NIC pins them first): such a run costs BULK_NT_RUN copies at the
 * streamed rate, once.  RDMAMSG_BULK_NT=0 keeps every copy cached,
 * =1 makes every large one non-temporal (x86-64 only; elsewhere memcpy).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define BULK_MIN       ((size_t)64 << 10)
#define BULK_SLOW_BPNS 8 /* 8 GB/s: a cached copy slower than a streamed one */
#define BULK_SLOW_RUN  2 /* (one may just have been preempted) */
#define BULK_NT_RUN    256

/* rdmamsg__copy_nt -- n bytes from src to dst with non-temporal stores
 * (the whole lines of dst; its ragged ends and small copies cached),
 * visible before any later store (sfence) */
void rdmamsg__copy_nt(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	char *d = dst;
	const char *s = src;
	size_t head = (size_t)(-(uintptr_t)d & 63);

	if (n < 256) {
		memcpy(d, s, n);
		return;
	}
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));

		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	_mm_sfence();
	memcpy(d, s, n);
#else
	memcpy(dst, src, n);
#endif
}

/* rdmamsg__bulk_init -- cached copies until they prove slow (or as
 * RDMAMSG_BULK_NT says) */
void rdmamsg__bulk_init(struct rdmamsg__bulk *b)
{
	const char *e = getenv("RDMAMSG_BULK_NT");

	memset(b, 0, sizeof(*b));
	b->mode = RDMAMSG__BULK_AUTO;
	if (e && !strcmp(e, "0"))
		b->mode = RDMAMSG__BULK_CACHED;
	else if (e && !strcmp(e, "1"))
		b->mode = RDMAMSG__BULK_NT;
	else if (e && *e && strcmp(e, "auto"))
		LOG_WARN("RDMAMSG_BULK_NT=%s: not 0, 1 or auto; auto", e);
}

/* rdmamsg__bulk_nt -- the next copy of n bytes goes non-temporal */
int rdmamsg__bulk_nt(const struct rdmamsg__bulk *b, size_t n)
{
	if (n < BULK_MIN || b->mode == RDMAMSG__BULK_CACHED)
		return 0;
	return b->mode == RDMAMSG__BULK_NT || b->nt_left;
}

/* rdmamsg__bulk_note -- a copy of n bytes took ns (cached or not): the
 * policy's next state */
void rdmamsg__bulk_note(struct rdmamsg__bulk *b, size_t n, uint64_t ns, int nt)
{
	if (n < BULK_MIN || b->mode != RDMAMSG__BULK_AUTO)
		return;
	if (nt) {
		b->nt_left--;
		return;
	}
	if (ns <= n / BULK_SLOW_BPNS) {
		b->slow = 0;
		return;
	}
	if (++b->slow < BULK_SLOW_RUN)
		return;
	/* the cached copy after the run looks again: one slow is enough */
	b->slow = BULK_SLOW_RUN - 1;
	b->nt_left = BULK_NT_RUN;
}

/* rdmamsg__bulk_copy -- n bytes from src into dst, which a peer reads
 * next, as the policy says */
void rdmamsg__bulk_copy(struct rdmamsg__bulk *b, void *dst, const void *src,
			size_t n)
{
	uint64_t t;

	if (rdmamsg__bulk_nt(b, n)) {
		rdmamsg__copy_nt(dst, src, n);
		rdmamsg__bulk_note(b, n, 0, 1);
		return;
	}
	if (n < BULK_MIN || b->mode != RDMAMSG__BULK_AUTO) {
		memcpy(dst, src, n);
		return;
	}
	t = rdmamsg__now_ns();
	memcpy(dst, src, n);
	rdmamsg__bulk_note(b, n, rdmamsg__now_ns() - t, 0);
}
