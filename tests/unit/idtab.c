/* SPDX-License-Identifier: MIT */
/*
 * idtab.c -- unit test of lib/idtab.c: ids find their object in O(1), a
 * deleted (stale) id and forged ids find nothing, slots are reused with a
 * new generation, the maximum holds (-ENOSPC), bad input is refused with
 * nothing changed, and many ids against a reference model
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "idtab.h"
#include "tap.h"

#define N 20000

static int objs[N];
static uint64_t ids[N];

static void test_basic(void)
{
	struct rdmamsg__idt t;
	uint64_t a = 0, b = 0, c = 0, keep = 77;
	int x, y;

	rdmamsg__idt_init(&t, 0);
	ok(rdmamsg__idt_find(&t, 0) == NULL && rdmamsg__idt_find(&t, 1) == NULL,
	   "empty table finds nothing");
	is_int(rdmamsg__idt_add(&t, NULL, &a), -EINVAL, "NULL object refused");
	is_int(rdmamsg__idt_add(&t, &x, NULL), -EINVAL, "NULL id refused");
	ok(a == 0 && t.used == 0, "nothing changed by the refusals");
	is_int(rdmamsg__idt_add(&t, &x, &a), 0, "add x");
	is_int(rdmamsg__idt_add(&t, &y, &b), 0, "add y");
	ok(a && b && a != b, "two distinct non-zero ids");
	ok(rdmamsg__idt_find(&t, a) == &x && rdmamsg__idt_find(&t, b) == &y,
	   "each id finds its object");
	is_int(rdmamsg__idt_del(&t, a), 0, "delete x");
	ok(rdmamsg__idt_find(&t, a) == NULL, "the deleted id finds nothing");
	is_int(rdmamsg__idt_del(&t, a), -ENOENT, "deleting it again: -ENOENT");
	is_int(rdmamsg__idt_add(&t, &y, &c), 0, "add again");
	ok((uint32_t)c == (uint32_t)a && c != a,
	   "the slot is reused with a new generation");
	ok(rdmamsg__idt_find(&t, a) == NULL && rdmamsg__idt_find(&t, c) == &y,
	   "the stale id does not find the slot's new object");
	/* forged ids: index 0, out of range, wrong generation */
	ok(rdmamsg__idt_find(&t, (uint64_t)1 << 32) == NULL &&
		   rdmamsg__idt_find(&t, ((uint64_t)1 << 32) | 0xffffffffu) ==
			   NULL &&
		   rdmamsg__idt_find(&t, b ^ ((uint64_t)1 << 40)) == NULL &&
		   rdmamsg__idt_find(&t, UINT64_MAX) == NULL,
	   "forged ids find nothing");
	is_int(rdmamsg__idt_del(&t, UINT64_MAX), -ENOENT,
	       "deleting a forged id: -ENOENT");
	is_int(t.used, 2, "two live ids");
	/* was_issued: a deleted id yes (a late response), a live one, a
	 * future generation and forged indexes no (a protocol error) */
	ok(rdmamsg__idt_was_issued(&t, a), "the deleted id was issued");
	ok(!rdmamsg__idt_was_issued(&t, c) && !rdmamsg__idt_was_issued(&t, b),
	   "live ids are not 'issued and gone'");
	ok(!rdmamsg__idt_was_issued(&t, c + ((uint64_t)1 << 32)) &&
		   !rdmamsg__idt_was_issued(&t, (uint32_t)c) &&
		   !rdmamsg__idt_was_issued(&t, (uint64_t)1 << 32) &&
		   !rdmamsg__idt_was_issued(&t, UINT64_MAX),
	   "never-issued ids (future generation, generation 0, index 0, out "
	   "of range) are not");
	rdmamsg__idt_fini(&t);

	rdmamsg__idt_init(&t, 3);
	ok(!rdmamsg__idt_add(&t, &x, &a) && !rdmamsg__idt_add(&t, &x, &b) &&
		   !rdmamsg__idt_add(&t, &x, &c),
	   "max 3: three ids");
	is_int(rdmamsg__idt_add(&t, &y, &keep), -ENOSPC, "a fourth: -ENOSPC");
	is_int(keep, 77, "its id untouched");
	rdmamsg__idt_del(&t, b);
	is_int(rdmamsg__idt_add(&t, &y, &keep), 0, "one freed: room again");
	ok(t.cap <= 4, "never more slots than the maximum (%u)", t.cap);
	rdmamsg__idt_fini(&t);
}

/* xrand -- a fixed pseudo-random sequence (xorshift) */
static uint64_t xs = 2463534242ull;
static uint64_t xrand(void)
{
	xs ^= xs << 13;
	xs ^= xs >> 7;
	xs ^= xs << 17;
	return xs;
}

static void test_many(void)
{
	int n = tap_small() ? 2000 : N, i, good = 1, live = 0;
	uint64_t *stale = calloc((size_t)n * 10, sizeof(*stale));
	size_t nstale = 0, k;
	struct rdmamsg__idt t;

	if (!stale)
		bail_out("calloc");
	rdmamsg__idt_init(&t, (uint32_t)n);
	for (i = 0; i < n * 10; i++) {
		int j = (int)(xrand() % (uint64_t)n);

		if (ids[j]) {
			if (rdmamsg__idt_del(&t, ids[j]))
				good = 0;
			stale[nstale++] = ids[j];
			ids[j] = 0;
			live--;
		} else {
			if (rdmamsg__idt_add(&t, &objs[j], &ids[j]))
				good = 0;
			live++;
		}
	}
	ok(good, "%d random adds and deletes on %d objects", n * 10, n);
	is_int(t.used, live, "live count agrees");
	for (i = 0; i < n; i++)
		if (ids[i] && rdmamsg__idt_find(&t, ids[i]) != &objs[i])
			good = 0;
	ok(good, "every live id finds its object");
	for (k = 0; k < nstale; k++)
		if (rdmamsg__idt_find(&t, stale[k]))
			good = 0;
	ok(good, "none of %zu deleted ids finds anything", nstale);
	/* fill to the maximum */
	for (i = 0; i < n; i++)
		if (!ids[i] && rdmamsg__idt_add(&t, &objs[i], &ids[i]))
			good = 0;
	ok(good && t.used == (uint32_t)n, "filled to the maximum, %d", n);
	is_int(rdmamsg__idt_add(&t, &objs[0], &ids[0]), -ENOSPC,
	       "then -ENOSPC");
	for (i = 0; i < n; i++)
		if (rdmamsg__idt_del(&t, ids[i]))
			good = 0;
	ok(good && t.used == 0, "all deleted");
	rdmamsg__idt_fini(&t);
	free(stale);
}

int main(void)
{
	test_basic();
	test_many();
	return done_testing();
}
