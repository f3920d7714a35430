/* SPDX-License-Identifier: MIT */
/*
 * bulk.c -- unit test of lib/bulk.c: the non-temporal copy puts every
 * byte where a memcpy would and nothing past it, for every length from 0
 * to 700 and around the 64-byte lines, at every alignment of source and
 * destination within a line; and the policy: cached while cached copies
 * run fast (a single slow one, as when preempted, changes nothing), two
 * slow ones in a row (below 8 GB/s) turn the next 256 large copies
 * non-temporal, after which a cached copy looks again (one slow one then
 * suffices); small copies never count; the RDMAMSG_BULK_NT settings fix the choice.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tap.h"

int rdmamsg__log_level = -1; /* quiet */

void rdmamsg__log(int level, const char *func, const char *fmt, ...)
{
	(void)level;
	(void)func;
	(void)fmt;
}

#define KB64 ((size_t)64 << 10)

/* copies -- copy_nt of n bytes from src offset so to dst offset dso into
 * a guarded buffer: 0 when it matches memcpy's and the guards hold */
static int copies(size_t n, size_t so, size_t dso)
{
	static unsigned char src[4096 + 128], dst[4096 + 256], want[4096 + 256];
	size_t i;

	for (i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i * 7 + n);
	memset(dst, 0xa5, sizeof(dst));
	memset(want, 0xa5, sizeof(want));
	memcpy(want + 64 + dso, src + so, n);
	rdmamsg__copy_nt(dst + 64 + dso, src + so, n);
	return memcmp(dst, want, sizeof(dst));
}

static void copy_nt(void)
{
	size_t n, so, dso, bad = 0, runs = 0;
	static const size_t big[] = {1023, 1024, 1025, 2047, 4000, 4096};

	for (n = 0; n <= 700; n++)
		for (so = 0; so < 64; so += 7)
			for (dso = 0; dso < 64; dso += 5, runs++)
				bad += copies(n, so, dso) != 0;
	for (n = 0; n < sizeof(big) / sizeof(big[0]); n++)
		for (so = 0; so < 64; so++)
			for (dso = 0; dso < 64; dso += 3, runs++)
				bad += copies(big[n], so, dso) != 0;
	ok(!bad,
	   "copy_nt: %zu copies (0 .. 700 bytes and six of 1 to 4 KiB, every "
	   "alignment) as memcpy's, nothing past them (%zu not)",
	   runs, bad);
}

/* note -- a copy of n bytes at gbps (bytes per ns), as bulk_copy would */
static void note(struct rdmamsg__bulk *b, size_t n, unsigned int gbps)
{
	int nt = rdmamsg__bulk_nt(b, n);

	rdmamsg__bulk_note(b, n, nt ? 0 : n / gbps, nt);
}

static void policy(void)
{
	struct rdmamsg__bulk b;
	int i, nts = 0;

	unsetenv("RDMAMSG_BULK_NT");
	rdmamsg__bulk_init(&b);
	ok(!rdmamsg__bulk_nt(&b, KB64), "auto: cached at first");
	for (i = 0; i < 1000; i++)
		note(&b, KB64, 30);
	ok(!rdmamsg__bulk_nt(&b, KB64), "1000 fast copies: still cached");
	note(&b, KB64, 3);
	note(&b, KB64, 30);
	note(&b, KB64, 3);
	ok(!rdmamsg__bulk_nt(&b, KB64),
	   "slow, fast, slow (a preempted copy): still cached");
	note(&b, 4096, 1);
	note(&b, 4096, 1);
	note(&b, 4096, 1);
	ok(!rdmamsg__bulk_nt(&b, KB64), "small copies do not count");
	note(&b, KB64, 3);
	ok(rdmamsg__bulk_nt(&b, KB64),
	   "two slow copies in a row: non-temporal");
	ok(!rdmamsg__bulk_nt(&b, KB64 - 1), "(not below 64 KiB)");
	for (i = 0; i < 1000 && rdmamsg__bulk_nt(&b, KB64); i++, nts++)
		note(&b, KB64, 30);
	is_int(nts, 256, "256 non-temporal copies, then a cached one");
	note(&b, KB64, 3);
	ok(rdmamsg__bulk_nt(&b, KB64),
	   "still slow (one look is enough): non-temporal again");
	for (i = 0; i < 256; i++)
		note(&b, KB64, 30);
	note(&b, KB64, 30);
	note(&b, KB64, 3);
	note(&b, KB64, 30);
	ok(!rdmamsg__bulk_nt(&b, KB64), "fast again: cached");

	rdmamsg__bulk_init(&b);
	note(&b, KB64, 8);
	note(&b, KB64, 8);
	ok(!rdmamsg__bulk_nt(&b, KB64), "8 GB/s twice: cached");
	note(&b, KB64, 7);
	note(&b, KB64, 7);
	ok(rdmamsg__bulk_nt(&b, KB64), "7 GB/s twice: non-temporal");

	setenv("RDMAMSG_BULK_NT", "0", 1);
	rdmamsg__bulk_init(&b);
	for (i = 0; i < 10; i++)
		note(&b, KB64, 1);
	ok(!rdmamsg__bulk_nt(&b, 1 << 20), "RDMAMSG_BULK_NT=0: always cached");
	setenv("RDMAMSG_BULK_NT", "1", 1);
	rdmamsg__bulk_init(&b);
	ok(rdmamsg__bulk_nt(&b, KB64) && !rdmamsg__bulk_nt(&b, KB64 - 1),
	   "RDMAMSG_BULK_NT=1: non-temporal from 64 KiB");
	setenv("RDMAMSG_BULK_NT", "yes", 1);
	rdmamsg__bulk_init(&b);
	ok(b.mode == RDMAMSG__BULK_AUTO, "RDMAMSG_BULK_NT=yes: auto");
	unsetenv("RDMAMSG_BULK_NT");
}

/* copy -- bulk_copy moves the bytes whichever way it goes */
static void copy(void)
{
	size_t n = (1 << 20) + 77, i;
	unsigned char *s = malloc(n), *d = malloc(n + 1);
	struct rdmamsg__bulk b;
	int bad = 0, k;

	if (!s || !d)
		bail_out("no memory");
	for (i = 0; i < n; i++)
		s[i] = (unsigned char)(i ^ (i >> 9));
	for (k = 0; k < 2; k++) {
		setenv("RDMAMSG_BULK_NT", k ? "1" : "0", 1);
		rdmamsg__bulk_init(&b);
		memset(d, 0, n + 1);
		rdmamsg__bulk_copy(&b, d + 1, s, n);
		bad += memcmp(d + 1, s, n) != 0 || d[0];
	}
	unsetenv("RDMAMSG_BULK_NT");
	is_int(bad, 0, "bulk_copy of 1 MiB + 77 to an odd address, both ways");
	free(s);
	free(d);
}

int main(void)
{
	copy_nt();
	policy();
	copy();
	return done_testing();
}
