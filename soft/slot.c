/* SPDX-License-Identifier: MIT */
/* slot.c -- decode and check a ring slot written by the peer */
#include "config.h"

#include <string.h>

#include "slot.h"

_Static_assert(sizeof(struct soft_slot) == SOFT_SLOT_SIZE, "slot layout");
_Static_assert(offsetof(struct soft_slot, payload) == SOFT_SLOT_HDR &&
		       offsetof(struct soft_slot, nsge) ==
			       SOFT_SLOT_SIZE - SOFT_SLOT_TAIL &&
		       SOFT_SLOT_HDR % 8 == 0,
	       "slot header: the payload 8-aligned, the tail last");
_Static_assert(SOFT_SLOT_MAX_SGE * sizeof(struct soft_remote_sge) ==
			       SOFT_SLOT_KEYS &&
		       SOFT_SLOT_KEYS + SOFT_SLOT_MAX_SGE * 4 <=
			       SOFT_SLOT_PAYLOAD,
	       "SGE list and its keys fit the payload");

/*
 * soft_slot_decode -- the checks an HCA makes on a request packet: known
 * opcode and flags, a length within the device's message size, copied
 * data within the slot, an SGE list within the payload whose count and
 * lengths add up to the message length (no wrap).  Every field is read
 * exactly once, into m.
 */
int soft_slot_decode(const void *p, size_t size, struct soft_msg *m)
{
	struct soft_slot h;
	uint64_t total = 0;
	size_t room; /* the payload's bytes within size */
	uint32_t i;

	/* no memset of the whole snapshot: the SGE array is written only
	 * up to nsge (this runs once per message) */
	m->nsge = 0;
	m->cmp = 0;
	m->swap = 0;
	if (!p || size < SOFT_SLOT_HDR)
		return SOFT_NAK_INV_REQ;
	memcpy(&h, p, SOFT_SLOT_HDR);
	if (size >= SOFT_SLOT_SIZE) {
		size = SOFT_SLOT_SIZE;
		memcpy((char *)&h + SOFT_SLOT_SIZE - SOFT_SLOT_TAIL,
		       (const char *)p + SOFT_SLOT_SIZE - SOFT_SLOT_TAIL,
		       SOFT_SLOT_TAIL);
	} else {
		memset((char *)&h + SOFT_SLOT_SIZE - SOFT_SLOT_TAIL, 0,
		       SOFT_SLOT_TAIL);
	}
	room = size - SOFT_SLOT_HDR < SOFT_SLOT_PAYLOAD ? size - SOFT_SLOT_HDR
							: SOFT_SLOT_PAYLOAD;
	m->opcode = h.opcode;
	m->flags = h.flags;
	m->len = h.len;
	m->imm = h.imm;
	m->rkey = h.rkey;
	m->raddr = h.raddr;
	if (m->flags & ~(uint32_t)SOFT_SF_ALL)
		return SOFT_NAK_INV_REQ;
	if (m->len > SOFT_SLOT_MAX_MSG)
		return SOFT_NAK_INV_REQ;
	/* SEND_WITH_INV: a plain SEND carrying the rkey in imm */
	if ((m->flags & SOFT_SF_INV) &&
	    (m->opcode != SOFT_OP_SEND || (m->flags & SOFT_SF_IMM)))
		return SOFT_NAK_INV_REQ;
	switch (m->opcode) {
	case SOFT_OP_WRITE_IMM:
		/* the data went ahead (process_vm), or is in the slot, or
		 * comes in chunks */
		if (!(m->flags & SOFT_SF_IMM) || (m->flags & SOFT_SF_RING) ||
		    (m->flags & SOFT_SF_COPIED && m->flags & SOFT_SF_CHUNKED))
			break;
		if (m->flags & SOFT_SF_COPIED)
			return m->len <= room ? 0 : SOFT_NAK_INV_REQ;
		return 0;
	case SOFT_OP_WRITE:
		if (m->flags == SOFT_SF_CHUNKED)
			return 0;
		if (m->flags == SOFT_SF_COPIED)
			return m->len <= room ? 0 : SOFT_NAK_INV_REQ;
		break;
	case SOFT_OP_READ:
		return m->flags == SOFT_SF_CHUNKED ? 0 : SOFT_NAK_INV_REQ;
	case SOFT_OP_CMP_SWP:
	case SOFT_OP_FETCH_ADD:
	case SOFT_OP_ATOMIC_WRITE:
		if (m->flags || m->len != 8 || (m->raddr & 7) || room < 16)
			return SOFT_NAK_INV_REQ;
		memcpy(&m->cmp, (const char *)p + SOFT_SLOT_HDR, 8);
		memcpy(&m->swap, (const char *)p + SOFT_SLOT_HDR + 8, 8);
		return 0;
	case SOFT_OP_SEND:
		goto send;
	default:
		break;
	}
	return SOFT_NAK_INV_REQ;
send:
	/* SEND: copied, chunked, in the copy ring (its bounds are the
	 * responder's to check: it knows the ring), or an SGE list of the
	 * sender's memory */
	if (!!(m->flags & SOFT_SF_COPIED) + !!(m->flags & SOFT_SF_CHUNKED) +
		    !!(m->flags & SOFT_SF_RING) >
	    1)
		return SOFT_NAK_INV_REQ;
	if ((m->flags & SOFT_SF_KEYS) &&
	    (m->flags & (SOFT_SF_COPIED | SOFT_SF_CHUNKED | SOFT_SF_RING)))
		return SOFT_NAK_INV_REQ;
	if (m->flags & SOFT_SF_RING) {
		/* its offset: the responder checks it against the ring */
		if (room < SOFT_SLOT_RING_OFF + 8)
			return SOFT_NAK_INV_REQ;
		memcpy(&m->raddr,
		       (const char *)p + SOFT_SLOT_HDR + SOFT_SLOT_RING_OFF, 8);
		return 0;
	}
	if (m->flags & SOFT_SF_COPIED)
		return m->len <= room ? 0 : SOFT_NAK_INV_REQ;
	if (m->flags & SOFT_SF_CHUNKED)
		return 0;
	m->nsge = h.nsge;
	if (m->nsge > SOFT_SLOT_MAX_SGE || (m->len && !m->nsge) ||
	    (size_t)m->nsge * sizeof(struct soft_remote_sge) > room)
		return SOFT_NAK_INV_REQ;
	memcpy(m->sge, (const char *)p + SOFT_SLOT_HDR,
	       (size_t)m->nsge * sizeof(struct soft_remote_sge));
	if (m->flags & SOFT_SF_KEYS) {
		if (SOFT_SLOT_KEYS + (size_t)m->nsge * 4 > room)
			return SOFT_NAK_INV_REQ;
		memcpy(m->key, (const char *)p + SOFT_SLOT_HDR + SOFT_SLOT_KEYS,
		       (size_t)m->nsge * 4);
	}
	for (i = 0; i < m->nsge; i++) {
		if (!m->sge[i].len || m->sge[i].len > SOFT_SLOT_MAX_MSG)
			return SOFT_NAK_INV_REQ;
		total += m->sge[i].len;
	}
	return total == m->len ? 0 : SOFT_NAK_INV_REQ;
}
