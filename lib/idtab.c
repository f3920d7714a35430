/* SPDX-License-Identifier: MIT */
/* idtab.c -- handles: 64-bit ids with generations for pointers (idtab.h) */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "idtab.h"

/* rdmamsg__idt_init -- an empty table for at most max ids (0: the most) */
void rdmamsg__idt_init(struct rdmamsg__idt *t, uint32_t max)
{
	t->e = NULL;
	t->cap = 0;
	t->max = max && max < RDMAMSG__IDT_MAX ? max : RDMAMSG__IDT_MAX;
	t->free_head = 0;
	t->used = 0;
}

/* rdmamsg__idt_fini -- free the slots (the objects are the caller's) */
void rdmamsg__idt_fini(struct rdmamsg__idt *t)
{
	free(t->e);
	rdmamsg__idt_init(t, t->max);
}

/* grow -- double the slots (at most max + 1, index 0 included) */
static int grow(struct rdmamsg__idt *t)
{
	uint32_t ncap = t->cap ? t->cap * 2 : 64, k;
	struct rdmamsg__idt_entry *e;

	if (ncap > t->max + 1)
		ncap = t->max + 1;
	if (ncap <= t->cap)
		return -ENOSPC;
	e = realloc(t->e, (size_t)ncap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	if (!t->cap) {
		e[0].p = NULL;
		e[0].gen = 0; /* never matches: generations start at 1 */
		e[0].next = 0;
		t->cap = 1;
	}
	/* new slots go on the free list in index order */
	for (k = t->cap; k < ncap; k++) {
		e[k].p = NULL;
		e[k].gen = 1;
		e[k].next = k + 1 < ncap ? k + 1 : 0;
	}
	t->free_head = t->cap;
	t->e = e;
	t->cap = ncap;
	return 0;
}

/* rdmamsg__idt_add -- an id for p */
int rdmamsg__idt_add(struct rdmamsg__idt *t, void *p, uint64_t *id)
{
	uint32_t i;
	int ret;

	if (!p || !id)
		return -EINVAL;
	if (t->used >= t->max)
		return -ENOSPC;
	if (!t->free_head) {
		ret = grow(t);
		if (ret)
			return ret;
	}
	i = t->free_head;
	t->free_head = t->e[i].next;
	t->e[i].p = p;
	t->e[i].next = 0;
	t->used++;
	*id = ((uint64_t)t->e[i].gen << 32) | i;
	return 0;
}

/* rdmamsg__idt_del -- forget id; the slot's generation moves on */
int rdmamsg__idt_del(struct rdmamsg__idt *t, uint64_t id)
{
	uint32_t i = (uint32_t)id;

	if (!rdmamsg__idt_find(t, id))
		return -ENOENT;
	t->e[i].p = NULL;
	if (++t->e[i].gen == 0)
		t->e[i].gen = 1;
	t->e[i].next = t->free_head;
	t->free_head = i;
	t->used--;
	return 0;
}

/* rdmamsg__idt_was_issued -- id's generation is below its slot's */
int rdmamsg__idt_was_issued(const struct rdmamsg__idt *t, uint64_t id)
{
	uint32_t i = (uint32_t)id, gen = (uint32_t)(id >> 32);

	return i != 0 && i < t->cap && gen != 0 && gen < t->e[i].gen;
}
