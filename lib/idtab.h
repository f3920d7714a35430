/* SPDX-License-Identifier: MIT */
/*
 * idtab.h -- a table of handles: small 64-bit ids for pointers, found in
 * O(1), with a generation so that an id that was deleted (a late
 * response, a stale completion, a peer's replayed rendezvous id) never
 * finds the object that reused its slot.  Private.
 *
 * An id is (generation << 32) | index.  Index 0 is never used, so id 0
 * means "none"; generations are never 0.  Free slots form a LIFO list,
 * so a busy table touches few cache lines; the table grows by doubling up
 * to the maximum given at init and never shrinks (ids stay short).
 *
 * Users: request and rendezvous ids (lib/xfer.c, lib/req.c, lib/rndv.c),
 * and the per-context interface routing completions by wr_id to their
 * endpoint.
 */
#ifndef RDMAMSG_IDTAB_H
#define RDMAMSG_IDTAB_H

#include <stdint.h>

struct rdmamsg__idt_entry {
	void *p;       /* NULL when free */
	uint32_t gen;  /* generation of the id now (or next) in the slot */
	uint32_t next; /* free list: next free index, 0 ends it */
};

struct rdmamsg__idt {
	struct rdmamsg__idt_entry *e;
	uint32_t cap;	    /* slots allocated, index 0 included */
	uint32_t max;	    /* most live ids */
	uint32_t free_head; /* 0: no free slot */
	uint32_t used;	    /* live ids */
};

#define RDMAMSG__IDT_MAX ((uint32_t)1 << 30)

/* rdmamsg__idt_init -- an empty table for at most max ids (0: the most) */
void rdmamsg__idt_init(struct rdmamsg__idt *t, uint32_t max);
/* rdmamsg__idt_fini -- free the slots (the objects are the caller's) */
void rdmamsg__idt_fini(struct rdmamsg__idt *t);
/* rdmamsg__idt_add -- an id for p: 0, -EINVAL (p NULL), -ENOSPC (max ids
 * live), -ENOMEM; *id untouched on failure */
int rdmamsg__idt_add(struct rdmamsg__idt *t, void *p, uint64_t *id);
/* rdmamsg__idt_del -- forget id: 0, or -ENOENT (unknown or stale) */
int rdmamsg__idt_del(struct rdmamsg__idt *t, uint64_t id);

/* rdmamsg__idt_was_issued -- whether id was handed out once and has since
 * been deleted (timed out, cancelled, done): its slot's generation has
 * moved past it.  An id that is neither live nor this was never issued
 * (a peer's forgery, a protocol error). */
int rdmamsg__idt_was_issued(const struct rdmamsg__idt *t, uint64_t id);

/* rdmamsg__idt_find -- what id names, or NULL (unknown, stale, any value
 * a peer may have forged) */
static inline void *rdmamsg__idt_find(const struct rdmamsg__idt *t, uint64_t id)
{
	uint32_t i = (uint32_t)id;

	if (i == 0 || i >= t->cap || t->e[i].gen != (uint32_t)(id >> 32))
		return NULL;
	return t->e[i].p;
}

#endif /* RDMAMSG_IDTAB_H */
