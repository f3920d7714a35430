/* SPDX-License-Identifier: MIT */
/* slot.h -- the shared-memory ring slot (wire format) and its decoder */
#ifndef SOFT_SLOT_H
#define SOFT_SLOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Every field of a slot lives in memory the peer can write at any time:
 * the responder takes one snapshot of it with soft_slot_decode() and uses
 * only that snapshot, never the slot again (except the payload bytes of a
 * copied message, read once, bounded by the checked length).
 */
#define SOFT_SLOT_SIZE	  1024
#define SOFT_SLOT_HDR	  24 /* state to flags: where the payload starts */
#define SOFT_SLOT_TAIL	  40 /* the header's rest, after the payload */
#define SOFT_SLOT_PAYLOAD (SOFT_SLOT_SIZE - SOFT_SLOT_HDR - SOFT_SLOT_TAIL)
#define SOFT_SLOT_MAX_SGE 32	       /* == SOFT_MAX_SGE */
#define SOFT_SLOT_MAX_MSG (1ull << 30) /* == SOFT_MAX_MSG_SZ */

/* slot states (low byte of state; the message number is above it); a
 * copied SEND the responder takes on its fast path stays READY and is
 * acknowledged by the counter in the segment header instead (data.c,
 * rx_ack) */
enum {
	SOFT_SLOT_READY = 1,
	SOFT_SLOT_BUSY = 2,
	SOFT_SLOT_RNR = 3,
	SOFT_SLOT_DONE = 4,
	SOFT_SLOT_CANCEL = 5,
	SOFT_SLOT_XFER = 6, /* data moves chunk by chunk through the payload */
};
#define SOFT_SLOT_STATE(msgno, kind) ((((uint64_t)(msgno) + 1) << 8) | (kind))

/* opcodes: the last five only when process_vm_* is refused */
enum {
	SOFT_OP_SEND = 1,
	SOFT_OP_WRITE_IMM = 2,
	SOFT_OP_WRITE = 3,
	SOFT_OP_READ = 4,
	SOFT_OP_CMP_SWP = 5,
	SOFT_OP_FETCH_ADD = 6,
	SOFT_OP_ATOMIC_WRITE = 7, /* 8 bytes in cmp, placed at once */
};
enum {
	SOFT_SF_IMM = 1,
	SOFT_SF_SOLICITED = 2,
	SOFT_SF_COPIED = 4,  /* the data is in the payload */
	SOFT_SF_CHUNKED = 8, /* the data crosses in payload-sized chunks */
	SOFT_SF_INV = 16,    /* SEND_WITH_INV: imm is the rkey to invalidate */
	SOFT_SF_RING = 32,   /* SEND: the data is in the sender's copy ring,
			      * at the byte offset in the payload's first 8
			      * bytes (the first line: SOFT_SLOT_RING_OFF) */
	SOFT_SF_KEYS = 64,   /* SEND, SGE list: each SGE's lkey follows the
			      * list, at SOFT_SLOT_KEYS of the payload */
	SOFT_SF_STAMP = 256, /* to a QP on an SRQ: srq_prod is set */
	SOFT_SF_ALL = 127 | SOFT_SF_STAMP,
	/* never in a READY slot: one its initiator made DONE at once, the
	 * verdict (status) the responder's HCA gives a request that breaks
	 * its access rules, so that the responder finds the NAK in its
	 * place in the stream and goes to ERR (data.c rx_slots) */
	SOFT_SF_DENIED = 128,
};
/* where a ring SEND's offset is: the payload's start, so that such a SEND
 * is one slot line too (its bytes are in the ring, read once) */
#define SOFT_SLOT_RING_OFF 0
/* and its fill count: how many of its bytes are in the ring so far.  A
 * long one is published before they all are (SOFT_RING_PIPE), and the
 * responder copies each piece while the sender writes the next */
#define SOFT_SLOT_RING_FILL 8
/* where an SGE list's lkeys are: after the longest list */
#define SOFT_SLOT_KEYS (SOFT_SLOT_MAX_SGE * 16)
/* responder verdicts written back into the slot */
enum {
	SOFT_ACK = 0,
	SOFT_NAK_INV_REQ = 1,
	SOFT_NAK_REM_OP = 2,
	SOFT_NAK_REM_ACCESS = 3,
};

/*
 * The first cache line holds what a copied SEND needs (state, opcode,
 * imm, len, flags) and the first 40 bytes of its payload: a small SEND
 * is one line for the sender to write and the responder to read, not
 * two; so is a SEND through the copy ring, whose offset is there too.
 * The rest of the header is the slot's last 40 bytes, which such a SEND
 * leaves as they were (data.c, post_send_fast: none of it is read for a
 * copied or ring SEND; a verdict's status and an RNR's timer are the
 * responder's to write before its state), but for srq_prod when the
 * responder is on an SRQ.
 */
struct soft_slot {
	_Atomic uint64_t state;
	uint32_t opcode;
	uint32_t imm; /* network order, as posted */
	uint32_t len;
	uint32_t flags;
	uint8_t payload[SOFT_SLOT_PAYLOAD];
	uint32_t nsge;
	uint32_t status; /* SOFT_ACK / SOFT_NAK_*, written by the responder */
	int32_t pid;	 /* informational only: never used to copy */
	uint32_t rnr_timer;	    /* responder's min_rnr_timer on RNR NAK */
	_Atomic uint32_t chunk_seq; /* XFER: even: producer's turn */
	uint32_t chunk_len;
	uint32_t rkey; /* WRITE / READ / atomics / atomic write */
	/* SOFT_SF_STAMP: the responder's SRQ's free WQEs (posted, not
	 * consumed; modulo 2^32) when the slot went READY; with none, a SEND
	 * or WRITE_IMM is RNR NAKed, as the HCA NAKed it when it came
	 * (data.c srq_stamp, rx_late) */
	uint32_t srq_prod;
	uint64_t raddr;
};

struct soft_remote_sge {
	uint64_t addr;
	uint64_t len;
};

/* a decoded, checked snapshot of a slot */
struct soft_msg {
	uint32_t opcode;
	uint32_t flags;
	uint32_t len;
	uint32_t imm;
	uint32_t nsge;
	uint32_t rkey;
	uint64_t raddr;
	uint64_t cmp, swap; /* atomics */
	struct soft_remote_sge sge[SOFT_SLOT_MAX_SGE];
	uint32_t key[SOFT_SLOT_MAX_SGE]; /* SOFT_SF_KEYS: the sender's lkeys */
};

/*
 * soft_slot_decode -- snapshot and check the slot image at p (size bytes
 * of it readable: the header's tail only in a whole slot, else taken as
 * zeros); 0, or the SOFT_NAK_* verdict for a malformed slot.
 * Pure: no system call, no global state.
 */
int soft_slot_decode(const void *p, size_t size, struct soft_msg *m);

#endif /* SOFT_SLOT_H */
