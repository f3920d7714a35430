/* SPDX-License-Identifier: MIT */
/* softrdma.h -- internal declarations shared by softrdma's files */
#ifndef SOFTRDMA_H
#define SOFTRDMA_H

#include <infiniband/verbs.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "qpops.h"
#include "slot.h"

/* Every standard entry point softrdma defines carries this mark. */
#define SOFT_EXPORT __attribute__((visibility("default")))

#define soft_container_of(ptr, type, member) \
	((type *)((char *)(ptr)-offsetof(type, member)))

/*
 * Device limits.  They are what query_device reports and what the verbs
 * enforce.
 */
#define SOFT_MAX_SGE 32
/* inline data: what rdmamsg's eager sends (8 KiB and a header) take,
 * and up to what the copy ring carries in one piece (SOFT_RING_MAX); a
 * QP reserves nothing per WQE for it (data.c ring_take, net.c inl_take) */
#define SOFT_MAX_INLINE	 16384
#define SOFT_MAX_QP_WR	 16384
#define SOFT_MAX_CQE	 ((1 << 22) - 1) /* as mlx5; libfabric.sh */
#define SOFT_MAX_SRQ_WR	 32767 /* as mlx5 reports; the segment holds it */
#define SOFT_MAX_SRQ	 4096  /* SRQs alive in a process (srq.c) */
#define SOFT_MAX_CQ	 16384 /* CQs alive in a process (verbs.c) */
#define SOFT_MAX_PD	 65536 /* PDs alive in a process (verbs.c) */
#define SOFT_MAX_MR_SIZE (1ull << 40) /* max_mr_size (verbs.c) */
#define SOFT_MAX_RD_ATOM 128
#define SOFT_MAX_MSG_SZ	 (1u << 30)
#define SOFT_GID_TBL_LEN 16
#define SOFT_IB_PORTS	 2 /* SOFTRDMA_LINK=ib: ports per device (apm.c) */
#define SOFT_ROCE_PORTS	 4 /* RoCE between hosts: interfaces with a port */
/* device_cap_flags_ex bit of RDMA atomic write (the kernel's
 * IB_UVERBS_DEVICE_ATOMIC_WRITE; not in libibverbs 44's headers) */
#define SOFT_DEVICE_ATOMIC_WRITE (1ull << 40)
/*
 * Registry slots.  qpn = gen << 16 | slot stays within 24 bits, gen 1..254
 * (never 0 or 1, never the multicast QPN 0xffffff); key = gen << 16 | slot
 * with gen 1..65535, so a slot's next key differs from its last ones.
 */
#define SOFT_QP_SLOT_BITS 16
#define SOFT_MAX_QP	  (1 << SOFT_QP_SLOT_BITS)
#define SOFT_QP_GENS	  254
#define SOFT_MR_SLOT_BITS 16
#define SOFT_MAX_MR	  (1 << SOFT_MR_SLOT_BITS)
#define SOFT_MR_GENS	  32767 /* MR key: gen << 16 | slot, bit 31 clear */
#define SOFT_MW_GENS	  127 /* window: 1 << 31 | gen << 24 | slot << 8 | tag */
#define SOFT_MAX_CTX	  1024
/* activity doorbell: bells per context (one per QP; beyond, swept) */
#define SOFT_BELLS	 16384
#define SOFT_BELL_NONE	 UINT32_MAX
#define SOFT_SWEEP_MAX	 8 /* QPs a context sweeps before it uses bells */
#define SOFT_NSTRIPES	 64
#define SOFT_LIVENESS_NS 10000000ull /* peer pid check period: 10 ms */
/* an RC QP's copy ring: a SEND too long for its slot, up to
 * SOFT_RING_MAX bytes, crosses through it with no system call: the
 * sender copies it in at post, the responder out, each on its own core,
 * in place of process_vm_readv's page pinning (64 KiB: ib_send_lat 1.62
 * against 4.94 us, ib_send_bw -t 128 30.5 against 13.5 GB/s).  Its size
 * is the QP's send queue of such SENDs, SOFT_RING_MIN to SOFT_RING_SIZE
 * (qp.c); the peer's is read from its segment, at most SOFT_RING_SIZE.
 * One that never empties starts again past SOFT_RING_WRAP (ring_take) */
#define SOFT_RING_SIZE	    (8u << 20)
#define SOFT_RING_MIN	    (256u << 10)
#define SOFT_RING_MAX	    (64u << 10)
#define SOFT_RING_WRAP	    (2u << 20)
#define SOFT_CHECK_POLLS    16 /* polls in flight between clock reads */
#define SOFT_TIMEOUT_CAP_NS 1000000000ull /* transport timeout cap: 1 s */
/* a ring SEND of SOFT_RING_PIPE bytes or more goes in in pieces of a
 * quarter, at least SOFT_RING_PIECE_MIN, its slot published after the
 * first (data.c fast_ring, slot.h SOFT_SLOT_RING_FILL); a responder waits
 * SOFT_RING_SPINS pauses for the next piece before it leaves the SEND to
 * a later pass (its sender preempted, or gone) */
#define SOFT_RING_PIPE	    (16u << 10)
#define SOFT_RING_PIECE_MIN (8u << 10)
#define SOFT_RING_SPINS	    256
/* SENDs of SOFT_PUSH_MIN to SOFT_PUSH_MAX bytes (8 KiB and a header of up
 * to 64 bytes: rdmamsg's largest eager message) are placed by their sender
 * straight into the responder's receive buffer where it can (data.c
 * fast_push); after a receive buffer it cannot reach, the next
 * SOFT_PUSH_BACKOFF go through the ring without trying */
#define SOFT_PUSH_MIN	  (4u << 10)
#define SOFT_PUSH_MAX	  ((8u << 10) + 64)
#define SOFT_PUSH_BACKOFF 1024

/* Ring slots (slot.h): 64-byte header then payload */
#define SOFT_SEG_HDR 4096

/* Host-global registry (POSIX shm) */
struct soft_reg_ctx {
	_Atomic int32_t pid;   /* 0: free */
	uint32_t srq_hi;       /* its SRQ segments: srq-<slot>-<1..srq_hi> */
	uint64_t start;	       /* owner's start time (pid reuse guard) */
	_Atomic uint32_t wake; /* futex word of the progress thread */
	/* who waits on this context's CQs (SOFT_ARMED_*): bit 0, a CQ whose
	 * waiter its progress thread serves (futex); bit 1 + c, a waiter
	 * asleep on completion channel cell c, woken by a byte written to
	 * the channel's FIFO (chan_key[c], verbs.c).  A producer claims a
	 * channel's bit (fetch-and) before it writes: one byte per arm */
	_Atomic uint32_t armed;
	/* the wake slots (soft_cq.wbit) of its armed CQs: a producer wakes
	 * it for a QP only when one of that QP's CQs is armed (cq_wbits),
	 * as an HCA raises an event only for the CQ it completes on */
	_Atomic uint64_t armed_cqs;
	_Atomic uint32_t always_wake; /* its thread serves the rings */
	_Atomic uint32_t sleeping;    /* its thread is in (or entering) the
				       * futex wait: wakers call the kernel */
	/* 1 from the first time it waits on events, rings bells or serves
	 * rings (soft_ctx_fence_wake, for good): a producer that gave one
	 * of its QPs work fences before it looks at armed and the bells.
	 * Until then, a producer whose process takes global membarriers
	 * (soft_gmb) looks at nothing (data.c peer_wake) */
	_Atomic uint32_t fence_wake;
	/* the channel FIFO of each cell (<prefix>-ch-<key> in /dev/shm),
	 * 0: none */
	_Atomic uint32_t chan_key[8];
};
#define SOFT_CHAN_CELLS	   8
#define SOFT_ARMED_THREAD  1u
#define SOFT_ARMED_CHAN(c) (2u << (c))
#define SOFT_ARMED_CHANS   (((1u << SOFT_CHAN_CELLS) - 1) << 1)

/*
 * A context's activity doorbell: bit b set means "QP b of this context
 * (its bell, soft_seg_hdr.bell) may have work".  Whoever gives a QP work
 * from outside its context's lock (a peer publishing a slot or serving
 * its receive queue, a responder committing a slot) sets the bit after
 * the work is visible; the context's progress takes the words it has
 * handed out (exchange with 0) and visits only those QPs.  One atomic OR
 * per ring: a producer that dies mid-ring leaves nothing half-made.
 */
struct soft_reg_bells {
	_Atomic uint64_t w[SOFT_BELLS / 64];
};

struct soft_reg_qp {
	uint32_t qpn; /* 0: free */
	int32_t pid;
	uint64_t start;
	uint32_t pd_id;
	uint32_t ctx_idx;
	_Atomic uint32_t state;	 /* enum ibv_qp_state */
	_Atomic uint32_t access; /* qp_access_flags */
	uint32_t qp_type;
	/* DC (dc.c): MLX5DV_DCTYPE_* of an IBV_QPT_DRIVER QP, a DCT's access
	 * key and its key violations (counted by initiators) */
	uint32_t dc_type;
	_Atomic uint32_t dc_viol;
	uint32_t dc_key_lo, dc_key_hi;
	/* an RC responder's max_dest_rd_atomic: 0 refuses READs and atomics
	 * (initiators check it, data.c remote_op) */
	_Atomic uint32_t dest_rd_atom;
	/* an XRC target QP: its XRCD's id (soft_reg_xrcd.id, xrc.c), and
	 * the handles ibv_open_qp gave out for it, not yet destroyed */
	uint32_t xrcd_id;
	_Atomic uint32_t xrc_opens;
};

struct soft_reg_mr {
	uint32_t key; /* 0: free */
	uint32_t access;
	int32_t pid;
	uint32_t pd_id;
	uint64_t addr; /* iova */
	uint64_t va;   /* process address of iova */
	uint64_t len;
	uint64_t start;
	uint32_t qpn;	 /* a type 2 window: the QP it is bound to */
	uint32_t kind;	 /* SOFT_KEY_MR, SOFT_KEY_MW1, SOFT_KEY_MW2 */
	uint32_t mr_key; /* a bound window: its MR's key */
	/* an MR in a shared mapping of a sealed memfd (peermap.c): the
	 * owner's fd + 1 of the file (0: none), the file offset of va, the
	 * file's device and inode */
	uint32_t map_fd;
	uint64_t map_off, map_ino, map_dev;
	/* the entry's sequence count (soft_key_read): odd while written */
	_Atomic uint32_t seq;
	uint32_t pad;
};

/* soft_op_rd_atomic -- a READ or an atomic (an atomic write too): answered
 * by a response of its own and counted against max_rd_atomic (rxe's
 * WR_ATOMIC_OR_READ_MASK and WR_ATOMIC_WRITE_MASK) */
static inline int soft_op_rd_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_WRITE;
}

/* soft_wc_opcode -- the send completion's opcode of a WR's */
static inline enum ibv_wc_opcode soft_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_DRIVER1:
		return IBV_WC_DRIVER1; /* MLX5DV_WC_UMR */
	default:
		return IBV_WC_SEND;
	}
}

/*
 * Keys.  An MR's key is gen << 16 | slot (bit 31 clear).  A window's rkey
 * keeps its slot above the 8-bit tag that ibv_inc_rkey() turns:
 * 1 << 31 | gen << 24 | slot << 8 | tag.  MRs and windows share the
 * registry's key table, so remote access checks either the same way.
 */
/* SOFT_KEY_UMR: an mlx5dv indirect mkey (umr.c) */
enum { SOFT_KEY_MR = 0, SOFT_KEY_MW1 = 1, SOFT_KEY_MW2 = 2, SOFT_KEY_UMR = 3 };
#define SOFT_KEY_MW_BIT 0x80000000u

static inline uint32_t soft_key_slot(uint32_t key)
{
	return (key & SOFT_KEY_MW_BIT ? key >> 8 : key) & (SOFT_MAX_MR - 1);
}

/*
 * An XRC domain (xrc.c): one per file (its st_dev and st_ino) on the
 * host, as the kernel keeps one per inode per device, or one of no file
 * (ino 0, never found by another open).  id: 0 free, else gen << 8 |
 * slot.  It lives while a holder (a process, its open count) lives.
 */
#define SOFT_MAX_XRCD  256
#define SOFT_XRCD_HOLD 16
struct soft_reg_xrcd {
	uint64_t dev, ino;
	uint32_t id;
	uint32_t pad;
	struct {
		int32_t pid;
		uint32_t n;
		uint64_t start;
	} hold[SOFT_XRCD_HOLD];
};

struct soft_reg {
	uint64_t magic;
	uint32_t version;
	uint32_t unlinked;
	uint8_t id[16]; /* random at creation: the CM compares its peers' */
	pthread_mutex_t lock;
	uint32_t qp_gen, mr_gen, next_pd_id;
	_Atomic uint32_t port_down; /* IB mode: bit p, port p's link is down
				     * (softrdma_port_set_state; apm.c) */
	uint32_t qp_hint, mr_hint;  /* where the next free-slot search starts */
	/* no slot at or above these was ever used: what walks every entry
	 * (sweeps, exits, key_repair) stops there, so that a young registry
	 * is read, and given pages by tmpfs, as far as it was used, not 10
	 * MiB of it at every process's first sweep */
	uint32_t qp_top, mr_top;
	pthread_mutex_t key_lock[SOFT_NSTRIPES];
	pthread_mutex_t atomic_lock[SOFT_NSTRIPES];
	struct soft_reg_ctx ctx[SOFT_MAX_CTX];
	struct soft_reg_qp qp[SOFT_MAX_QP];
	struct soft_reg_mr mr[SOFT_MAX_MR];
	struct soft_reg_bells bells[SOFT_MAX_CTX];
	uint32_t xrcd_gen;
	struct soft_reg_xrcd xrcd[SOFT_MAX_XRCD];
};

struct soft_seg_hdr {
	uint64_t magic;
	uint32_t qpn;
	uint32_t nslots;
	int32_t pid;
	uint32_t ctx_idx;
	uint64_t start;
	_Atomic uint32_t dest_qpn; /* whom the slots are for */
	/*
	 * Receive side, reachable by the initiator (progress without the
	 * responder's CPU): a mirror of the posted receive WQEs and an outbox
	 * of receive completions the initiator produced; whoever holds
	 * rx_lock consumes slots and WQEs.  All of it is peer-writable: the
	 * initiator checks it against the mapping and the registry, the
	 * responder against its private copy of the queue.
	 */
	uint32_t rq_entries; /* 0: not mirrored (SRQ) */
	uint32_t rq_sge;
	uint32_t rnr_timer; /* min_rnr_timer, for an initiator's RNR NAK */
	uint32_t srq_id;    /* on an SRQ: its segment srq-<ctx_idx>-<srq_id> */
	_Atomic uint32_t epoch; /* bumped at every reset: slots start anew */
	uint32_t bell; /* our bit in our context's doorbell (SOFT_BELL_NONE) */
	uint64_t rq_off, cq_off;
	uint64_t cq_wbits; /* its send and receive CQs' wake slots */
	/* written on every poll of the owner: a line of its own, apart from
	 * what the peer reads on every poll (dest_qpn) */
	_Alignas(64) _Atomic uint32_t rx_lock;
	/* our rnr_retry, for a responder that sends an RNR-NAKed message of
	 * ours again for us while we do not run (data.c rx_retry_due) */
	uint32_t rnr_retry;
	_Atomic uint64_t rq_prod; /* WQEs posted */
	_Atomic uint64_t rq_cons; /* WQEs consumed, either side */
	/* IB mode (apm.c): migrations asked for by hand, the MigReq an
	 * armed peer follows */
	_Atomic uint32_t mig_req;
	/* RC: the copy ring (SENDs of SOFT_SLOT_PAYLOAD to SOFT_RING_MAX
	 * bytes are copied into it at post), ring_size bytes at ring_off */
	uint32_t ring_size;
	uint64_t ring_off;
	/* the initiator's serve_remote, under rx_lock: SOFT_SERVED(its
	 * epoch, its messages delivered so far), so that a responder that
	 * did not run meanwhile skips the slots served for it, which the
	 * initiator may have reused since (data.c rx_catch_up) */
	_Atomic uint64_t served;
	/* rq_cons as the responder last drained the outbox (data.c
	 * rx_drain): an initiator places a SEND after one it placed only
	 * once the responder took that one (fast_push) */
	_Atomic uint64_t rq_drained;
	/* SOFT_TRIES(msgno, n): we sent message msgno again n times after
	 * RNR NAKs; 0: none since the last reset (rx_retry_due) */
	_Atomic uint64_t rnr_tries;
	/* the responder's cumulative ACK of our copied SENDs (rx_ack, a
	 * plain store under its rx_lock): every message numbered below it
	 * was delivered.  cancel, set by us before we withdraw a slot: it
	 * stores no ACK after it saw it (data.c tx_freeze) */
	_Alignas(64) _Atomic uint64_t acked;
	_Atomic uint64_t cancel;
	uint8_t pad3[48];
};
#define SOFT_TRIES(msgno, n) (((uint64_t)(msgno) + 1) << 8 | ((n)&0xff))
#define SOFT_SERVED_BITS     40 /* messages, modulo; the epoch's low 24 above */
#define SOFT_SERVED_MASK     ((1ull << SOFT_SERVED_BITS) - 1)
#define SOFT_SERVED_NONE     UINT64_MAX /* no word taken yet (served_seen) */
#define SOFT_SERVED(epoch, n) \
	((uint64_t)(epoch) << SOFT_SERVED_BITS | ((n)&SOFT_SERVED_MASK))

/*
 * An SRQ's segment: its posted receives and an outbox of the receive
 * completions initiators produced, each naming the QP it was for.  Who
 * consumes its WQEs holds lock (the responder: 1, an initiator: 2) and,
 * first, the rx_lock of the QP the message came on.  Peer-writable, as
 * the QP segment.
 */
struct soft_srq_hdr {
	uint64_t magic;
	int32_t pid;
	uint32_t entries; /* power of two, indexed by absolute WQE number */
	uint64_t start;
	uint32_t sge;
	/* an XRC SRQ (xrc.c): its XRCD's id and its PD's (0: a basic SRQ,
	 * which no XRC initiator reaches) */
	uint32_t xrcd_id;
	uint64_t rq_off, cq_off;
	uint32_t pd_id;
	uint32_t pad;
	_Alignas(64) _Atomic uint32_t lock;
	/* the armed srq_limit, 0: none; an initiator that takes the WQE
	 * leaving fewer wakes the owner's progress thread, which raises
	 * SRQ_LIMIT_REACHED (soft_srq_kick) */
	_Atomic uint32_t limit;
	_Atomic uint64_t prod; /* WQEs posted */
	_Atomic uint64_t cons; /* WQEs consumed, either side */
	uint8_t pad2[40];
};

/*
 * An SRQ's outbox entry (struct soft_shm_srq_cqe), written by whoever
 * took its WQE.  SOFT_CQE_HELD: taken by a network target of another
 * process or context of this host (qpn, the target, and src_qp already
 * final) for a message still arriving (xrc.c soft_xsrq_hold): not
 * complete yet: the owner's drain reports those after it (data.c
 * srq_drain).  SOFT_CQE_TAKEN: reported already, by that drain, or by a
 * network target of the owner that took its WQE past a HELD one (srq.c
 * take_past_held): the drain passes it.  SOFT_CQE_STATUS(st): completed with
 * status st (xrc.c soft_xsrq_release), where no other flag says it.
 */
#define SOFT_CQE_HELD	       0x200u
#define SOFT_CQE_TAKEN	       0x400u
#define SOFT_CQE_STATUS(st)    (((st)&0xffu) << 16)
#define SOFT_CQE_STATUS_OF(fl) (((fl) >> 16) & 0xffu)
struct soft_shm_srq_cqe {
	uint32_t byte_len;
	uint32_t imm;
	uint32_t flags; /* SOFT_SF_IMM, SOFT_SF_SOLICITED, SOFT_CQE_PROT,
			 * SOFT_CQE_HELD, SOFT_CQE_STATUS */
	uint32_t opcode;
	uint32_t qpn;	 /* the responder QP it was for */
	uint32_t src_qp; /* a DCT's: the DCI it came from */
};

/* a receive WQE as mirrored in the segment (stride 8 + 16 * rq_sge) */
struct soft_shm_rwqe {
	uint32_t num_sge;
	/* an RC QP's own queue: its WQE's arrived (data.c rx_arrived),
	 * modulo 2^32, lowered by whoever NAKs the message it was too late
	 * for (rx_late, serve_remote); unused on an SRQ */
	uint32_t arrived;
	struct ibv_sge sge[];
};

/* a receive completion the initiator produced for the responder; with
 * SOFT_CQE_PROT its WQE named memory it has not registered for local
 * write (IBV_WC_LOC_PROT_ERR) */
#define SOFT_CQE_PROT 0x100u
struct soft_shm_cqe {
	uint32_t byte_len;
	uint32_t imm;
	uint32_t flags;	 /* SOFT_SF_IMM, SOFT_SF_SOLICITED, SOFT_CQE_PROT */
	uint32_t opcode; /* SOFT_OP_SEND / SOFT_OP_WRITE_IMM */
};

/* Process-local objects */
struct soft_device {
	struct ibv_device dev;
	const void *not_mlx5; /* where libmlx5 keeps its ops pointer */
};

struct soft_list {
	struct soft_list *next, *prev;
};

struct soft_evq;  /* event queue behind an eventfd */
struct soft_maps; /* peers' MRs mapped by a context (peermap.c) */

/*
 * soft_lock_t -- a context's lock: never taken twice by one thread, held
 * for short sweeps; one compare-and-swap to take it and one to release it
 * when uncontended (a pthread mutex costs about 50 instructions a pair
 * more, three pairs a message), a priority-inheriting futex otherwise:
 * the word holds its owner's thread id, so a thread of higher priority
 * that waits for it (the network path's receive thread, SCHED_FIFO, which
 * stands for the HCA: soft/net.c) lends its priority to a holder the
 * scheduler had taken off the CPU, and ACKs never wait for the
 * application's poller to be run again.
 */
/*
 * Biased mode (the thread-domain and single-threaded hints, issue 13): a
 * context whose hinted QPs and CQs one thread uses is biased towards that
 * thread (bias: its tid).  Between its hinted posts and polls the word
 * rests at SOFT_LOCK_BIASED instead of 0, and those calls take no lock:
 * they mark bias_in with a plain store and check that the word still
 * rests there (soft_bias_enter), with no atomic read-modify-write and no
 * fence.  Everyone else finds the word not 0 and goes the slow way
 * (soft_lock_slow, soft_trylock_slow): it swaps the word for its tid and
 * revokes (bias_revoke, shm.c): a membarrier(2) makes the owner's mark
 * visible, or makes the owner's next look see the word taken, and it waits
 * for the mark to go (a trylock puts the word back and fails instead);
 * its unlock leaves the word 0, and the owner's next hinted call biases
 * it again.  Rare lockers (the progress thread serving
 * an armed CQ, a modify, the network receive thread) pay that system call;
 * frequent ones turn the bias off for good (SOFT_BIAS_REVOKES; a second
 * thread's hinted calls, a second owner, SOFT_BIAS_AUTO).  The hints
 * only choose which calls try it: the tid check keeps it right whatever
 * the caller does, and unhinted lockers of an unbiased word pay nothing.
 * SOFT_LOCK_BIASED names no thread: the kernel's FUTEX_LOCK_PI finds no
 * owner for it (ESRCH) and never sleeps on it.
 */
#define SOFT_LOCK_BIASED  0x20000000u /* the word: free, for the owner */
#define SOFT_BIAS_OFF	  UINT32_MAX  /* bias: none any more */
#define SOFT_BIAS_REVOKES 4096	      /* others' takes before it goes off */
/* the same for a bias that only calls without hints asked for (a plain
 * ibv_post_send/ibv_post_recv/ibv_poll_cq on RC): a program that posts
 * and polls from several threads pays few revocations */
#define SOFT_BIAS_AUTO	16
#define SOFT_BIAS_LOOKS 256 /* others' locks between looks at its owner */
/* looks at a held word before its waiter sleeps (soft_lock_slow), a
 * pause between two: 25 us on this project's EPYC VMs (25 ns a pause),
 * some 40 on Intel cores since Skylake; a poller's pass holds it well
 * under 1 us (tools/rdmamsg_pingpong -t: 100 looks instead, 1.2 us
 * one-way; 1,000, 0.85; 5,000, 0.73) */
#define SOFT_LOCK_SPINS 1000
/* polls of an empty CQ in a row that leave the context to other threads
 * (soft_ctx_enter_poll) before one waits for its turn (some 0.2-0.3 ms):
 * threads that post without a break would otherwise keep a poller's
 * passes out for good.  A ping-pong's poller never comes near: at 64 or
 * 1,024, tools/soft_pingpong -t -1 slept in the kernel hundreds or
 * thousands of times a run (waiting for a thread the kernel was handing
 * the word to) */
#define SOFT_POLL_BACKOFFS 16384
/* and every SOFT_POLL_YIELD of them a sched_yield(), so that a thread the
 * scheduler keeps from its CPU (the one in the context, or waiting for
 * it) runs: without it, a thread that polls while others post spun away
 * its time instead (valgrind, which runs one thread at a time:
 * tests/soft/mthreads' one-context run took 30 s and failed, 18-21 s
 * with it, 18 s before the back-off) */
#define SOFT_POLL_YIELD 64

typedef struct {
	_Atomic uint32_t v;	  /* 0 free, SOFT_LOCK_BIASED, else the holder's
			     * tid (| FUTEX_WAITERS) */
	_Atomic uint32_t bias;	  /* 0: none yet, SOFT_BIAS_OFF, a tid */
	_Atomic uint32_t bias_in; /* the bias owner is in a biased section */
	int32_t bias_pid;	  /* the process the bias was given in */
	uint32_t revokes;	  /* others' takes since (word held) */
	uint32_t looks;		  /* others' locks since (word held) */
	/* revocations before the bias goes off, as the call that gave it
	 * asked: SOFT_BIAS_REVOKES hinted, SOFT_BIAS_AUTO plain (word held) */
	uint32_t revoke_max;
	/* application threads in soft_lock_slow (soft_internal ones are
	 * not counted): a poll with nothing to read lets them go first
	 * (soft_ctx_others) */
	_Atomic uint32_t waiting;
} soft_lock_t;

void soft_lock_slow(soft_lock_t *l);
int soft_trylock_slow(soft_lock_t *l);
int soft_trylock_owned(soft_lock_t *l);
void soft_unlock_wake(soft_lock_t *l);
void soft_bias_lock(soft_lock_t *l, uint32_t revoke_max);

/* this thread's id (0 until first asked; reset in a forked child);
 * static TLS (initial-exec): the dynamic TLS of a dlopen()ed library
 * crashes LeakSanitizer's thread tracer */
extern __thread uint32_t soft_tid_cached
	__attribute__((tls_model("initial-exec")));
/* this thread is one of softrdma's own (the progress thread, the
 * network's, the CM's, the port watcher): its locks are an HCA's work,
 * which an application's poll waits for (soft_ctx_others) */
extern __thread int soft_internal __attribute__((tls_model("initial-exec")));
/* this thread is forking the host's agent (agent.c ag_spawn), under the
 * network path's lock: the fork handlers (fork.c) take no lock (a thread
 * holding one may wait for ours; the agent uses none of them) */
extern __thread int soft_agent_forking
	__attribute__((tls_model("initial-exec")));
/* how many threads are forking the host's agent now (the network path's
 * and its receive thread's may both; fork.c) */
extern _Atomic int soft_agent_spawning;
/* the process-private locks that fork.c takes across fork(), in its
 * order; the CM's are taken first, by its hooks (cm.c) */
extern pthread_mutex_t soft_reg_local_lock, soft_mw_lock, soft_net_mtx,
	soft_flt_mtx, soft_mc_local, soft_qp_table_lock, soft_chan_cache_lock,
	soft_pub_lock;
void soft_cm_fork_prepare(void);
void soft_cm_fork_parent(void);
void soft_cm_fork_child(void);
/* soft_net_fork_child -- a forked child forgets its parent's network path
 * (net.c), so that its own starts afresh */
void soft_net_fork_child(void);
/* soft_port_fork_* -- port.c's lock held across fork() (after the
 * CM's); a forked child forgets its parent's ports' watcher and
 * contexts, so that its own starts afresh */
void soft_port_fork_prepare(void);
void soft_port_fork_parent(void);
void soft_port_fork_child(void);
uint32_t soft_tid_slow(void);

static inline uint32_t soft_tid(void)
{
	uint32_t t = soft_tid_cached;

	return t ? t : soft_tid_slow();
}

/* soft_lock_biased -- another live thread holds l's bias (word held) */
static inline int soft_lock_biased(soft_lock_t *l)
{
	uint32_t b = atomic_load_explicit(&l->bias, memory_order_relaxed);

	return b && b != SOFT_BIAS_OFF && b != soft_tid_cached;
}

static inline void soft_lock_init(soft_lock_t *l)
{
	atomic_init(&l->v, 0);
	atomic_init(&l->bias, 0);
	atomic_init(&l->bias_in, 0);
	l->bias_pid = 0;
	l->revokes = 0;
	l->looks = 0;
	l->revoke_max = SOFT_BIAS_REVOKES;
	atomic_init(&l->waiting, 0);
}

static inline void soft_lock(soft_lock_t *l)
{
	uint32_t z = 0;

	if (!atomic_compare_exchange_strong_explicit(&l->v, &z, soft_tid(),
						     memory_order_acquire,
						     memory_order_relaxed))
		soft_lock_slow(l);
}

/* soft_trylock -- 0 when taken (as pthread_mutex_trylock); a bias owner in
 * its section makes it back off */
static inline int soft_trylock(soft_lock_t *l)
{
	uint32_t z = 0;

	if (atomic_compare_exchange_strong_explicit(&l->v, &z, soft_tid(),
						    memory_order_acquire,
						    memory_order_relaxed))
		return 0;
	return soft_trylock_slow(l);
}

static inline void soft_unlock(soft_lock_t *l)
{
	uint32_t t = soft_tid();

	if (!atomic_compare_exchange_strong_explicit(
		    &l->v, &t, 0, memory_order_release, memory_order_relaxed))
		soft_unlock_wake(l); /* waiters: the kernel hands it over */
}

/*
 * soft_bias_enter -- the lock for a post or poll: 1 when this thread
 * holds the bias and the word rests biased (no lock taken), else 0 with
 * the word taken (soft_bias_lock: the first such caller gets the bias,
 * with SOFT_BIAS_REVOKES for a hinted call, SINGLE, else SOFT_BIAS_AUTO;
 * chosen there, not before every look at the bias).
 * End with soft_bias_exit(l, what this returned).  soft_bias_mark is its
 * first half: 1 the same, else 0 with nothing taken.
 */
static inline __attribute__((always_inline)) int soft_bias_mark(soft_lock_t *l)
{
	/* the tid as cached, 0 before this thread's first lock: bias is
	 * never 0 while the word rests biased, so 0 fails below */
	if (atomic_load_explicit(&l->bias, memory_order_relaxed) ==
	    soft_tid_cached) {
		atomic_store_explicit(&l->bias_in, 1, memory_order_relaxed);
		/* the hardware fence is the revoker's membarrier */
		atomic_signal_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&l->v, memory_order_acquire) ==
		    SOFT_LOCK_BIASED)
			return 1;
		atomic_store_explicit(&l->bias_in, 0, memory_order_release);
	}
	return 0;
}

static inline __attribute__((always_inline)) int soft_bias_enter(soft_lock_t *l,
								 int single)
{
	if (__builtin_expect(soft_bias_mark(l), 1))
		return 1;
	soft_bias_lock(l, single ? SOFT_BIAS_REVOKES : SOFT_BIAS_AUTO);
	return 0;
}

/* soft_bias_exit -- the end of what soft_bias_enter began: the owner
 * leaves the word biased again */
static inline void soft_bias_exit(soft_lock_t *l, int biased)
{
	uint32_t t;

	if (biased) {
		atomic_store_explicit(&l->bias_in, 0, memory_order_release);
		return;
	}
	t = soft_tid();
	if (atomic_load_explicit(&l->bias, memory_order_relaxed) != t ||
	    !atomic_compare_exchange_strong_explicit(
		    &l->v, &t, SOFT_LOCK_BIASED, memory_order_release,
		    memory_order_relaxed))
		soft_unlock(l);
}

struct soft_context {
	struct verbs_context vctx; /* ibv_context is its last member */
	soft_lock_t lock; /* everything below and all objects' queues */
	int reg_idx;
	int32_t owner_pid; /* the process that opened it (fork: see soft/README.md) */
	uint32_t srq_next; /* SRQ segment ids handed out */
	struct soft_list qps, cqs, srqs;
	struct soft_evq *async;
	pthread_t thread;
	int thread_started;
	_Atomic int thread_stop;
	/* narmed, narmed_thread: written under the lock with relaxed
	 * stores (soft_hint_set), read by thread_main without it */
	int narmed;	   /* CQs armed */
	int narmed_thread; /* of them, those the progress thread serves */
	/* CQs made, the next one's wake slot; CQs armed per slot (the
	 * registry's armed_cqs bit is set while its count is not 0) */
	uint32_t cq_seq;
	uint32_t wslot_armed[64];
	/* a send waits for its RNR timer (tx_qp): the progress thread
	 * passes until it is sent again, as the HCA retransmits it without
	 * the program (soft_hint_set, like narmed) */
	int rnr_wait;
	_Atomic int thread_nap; /* the thread's wait is a long one */
	int in_thread; /* the progress thread is sweeping (lock held) */
	uint32_t npd;
	uint64_t outstanding; /* send WQEs waiting on a peer (lock held) */
	int serve_rings;      /* process_vm may be refused: the thread serves */
	uint32_t port_seen;   /* IB mode: port_down as last reported (apm.c) */
	/* activity doorbell (data.c): the QPs progress visits are those
	 * rung in soft_reg->bells[reg_idx] and those on hot (timers, work
	 * in flight, no bell); bell_qp[b] is the QP of bell b.  A context
	 * of a few QPs sweeps them all instead (cheaper than the list) */
	struct soft_list hot;
	int bells_on;	    /* more than sweep_max QPs: bells and hot list */
	uint32_t sweep_max; /* SOFTRDMA_SWEEP_MAX (default 8) */
	uint32_t nqp;
	struct soft_qp **bell_qp;
	uint32_t bell_cap, bell_hi; /* bell_qp's size; bells handed out */
	uint32_t *bell_free, nbell_free;
	uint32_t bell_pass;
	/* the application thread whose poll holds the word (not biased),
	 * else 0 (soft_ctx_enter_poll; relaxed stores, lock held) */
	uint32_t poller;
	uint64_t last_sweep;	/* ns: the last safety sweep (data.c) */
	struct soft_maps *maps; /* peers' MRs mapped here (peermap.c) */
	/* XRC SRQs made here: initiators of any process fill their
	 * outboxes, which the pass drains (xrc.c soft_xrc_drain, called
	 * from soft_map_sweep: a context with one has maps) */
	uint32_t nxsrq;
};

/* an XRC domain handle (xrc.c) */
struct soft_xrcd {
	struct ibv_xrcd xrcd;
	struct soft_context *ctx;
	uint32_t id;   /* its registry id (soft_reg_xrcd.id) */
	uint32_t slot; /* its registry slot */
	int refcnt;    /* SRQs and target QPs on it here (ctx lock) */
	/* what a target QP, which has no PD and no CQ, is made with */
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

/*
 * soft_ctx_enter, soft_ctx_exit -- the context lock around a post or
 * poll (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_start_poll to
 * ibv_end_poll), biased (soft_bias_enter): a program that posts and polls
 * from one thread takes no locked instruction, hints or not; SINGLE (a
 * thread domain's QP, a single-threaded CQ) gives the bias the long
 * budget (SOFT_BIAS_REVOKES), a plain object the short one
 * (SOFT_BIAS_AUTO)
 */
static inline __attribute__((always_inline)) int soft_ctx_enter(
	struct soft_context *ctx, int single)
{
	return soft_bias_enter(&ctx->lock, single);
}

static inline __attribute__((always_inline)) void soft_ctx_exit(
	struct soft_context *ctx, int biased)
{
	soft_bias_exit(&ctx->lock, biased);
}

/*
 * soft_ctx_others -- another application thread is in the context (its
 * poll holds the word, or it owns the bias and is in a biased section) or
 * waits for its turn: a look without the lock, as a hint
 * (soft_ctx_enter_poll).  softrdma's own threads are not counted
 * (soft_internal: their passes and placements are an HCA's work, which a
 * poll waits for, so that one thread's poll after what it knows happened
 * (a peer's word that it took a message) still sees its completion), nor
 * a bias owner out of its section (taken by revocation: an owner that
 * stopped polling, or exited, never keeps another thread's polls out).
 */
static inline int soft_ctx_others(struct soft_context *ctx)
{
	soft_lock_t *l = &ctx->lock;
	uint32_t v = atomic_load_explicit(&l->v, memory_order_relaxed),
		 p = __atomic_load_n(&ctx->poller, __ATOMIC_RELAXED);

	if ((v & FUTEX_TID_MASK) == SOFT_LOCK_BIASED &&
	    atomic_load_explicit(&l->bias_in, memory_order_relaxed))
		return 1;
	return (p && p != soft_tid_cached) ||
	       atomic_load_explicit(&l->waiting, memory_order_relaxed);
}

/*
 * soft_ctx_enter_poll -- soft_ctx_enter for a poll of the CQ whose count
 * COUNT is: -1, with no lock, when that CQ is empty and another
 * application thread is in the context or waits for it
 * (soft_ctx_others).  The poll then finds nothing, as one a moment
 * earlier would have, without waiting for the other: an HCA's poll reads
 * its own CQ, and two threads that each poll their own CQ of one context
 * (a thread per connection, one device opened) otherwise queue on the
 * lock at every poll, the one passing again and again while the other's
 * turn never comes (it slept in the kernel after SOFT_LOCK_SPINS looks:
 * tools/soft_pingpong -t -1 -n 200000, 0.8 to 4.4 us one-way and 14,884
 * futex calls, since 0.63 to 0.67 us and 32).  The other's pass serves
 * this CQ's QPs as well.  What the CQ holds is always taken (the count,
 * read without the lock: soft_cq_count_set), so that a poll after
 * ibv_req_notify_cq, which the arm's lock orders after every completion
 * that raised no event, never misses one.  After SOFT_POLL_BACKOFFS such
 * polls in a row (BACKOFFS counts them, a hint: relaxed, not locked) the
 * next one waits for its turn as before, so that a pass comes even while
 * other threads keep the context with posts.  End with
 * soft_ctx_exit_poll.
 */
static inline __attribute__((always_inline)) int soft_ctx_enter_poll(
	struct soft_context *ctx, int single, const uint32_t *count,
	uint32_t *backoffs)
{
	uint32_t b;

	if (soft_bias_mark(&ctx->lock))
		return 1;
	if (!__atomic_load_n(count, __ATOMIC_RELAXED) && soft_ctx_others(ctx)) {
		b = __atomic_load_n(backoffs, __ATOMIC_RELAXED);
		if (b < SOFT_POLL_BACKOFFS) {
			__atomic_store_n(backoffs, b + 1, __ATOMIC_RELAXED);
			if (!((b + 1) % SOFT_POLL_YIELD))
				sched_yield();
			return -1;
		}
	}
	soft_bias_lock(&ctx->lock, single ? SOFT_BIAS_REVOKES : SOFT_BIAS_AUTO);
	__atomic_store_n(&ctx->poller, soft_tid_cached, __ATOMIC_RELAXED);
	if (__atomic_load_n(backoffs, __ATOMIC_RELAXED))
		__atomic_store_n(backoffs, 0, __ATOMIC_RELAXED);
	return 0;
}

static inline __attribute__((always_inline)) void soft_ctx_exit_poll(
	struct soft_context *ctx, int biased)
{
	if (!biased)
		__atomic_store_n(&ctx->poller, 0, __ATOMIC_RELAXED);
	soft_bias_exit(&ctx->lock, biased);
}

/*
 * soft_hint_set, soft_hint_get -- a count kept under the context lock that
 * the progress thread reads without it, as a hint (narmed): a stale look
 * costs it one turn of its loop, as a look just before the change would
 * (the change's soft_wake_thread, or its next wait's end, brings it
 * back); relaxed, so that the look is never torn (as cheap as plain)
 */
static inline void soft_hint_set(int *p, int v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static inline int soft_hint_get(const int *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* a thread domain (ibv_alloc_td): objects of it are used by one thread at
 * a time, the caller's promise */
struct soft_td {
	struct ibv_td td;
	int refcnt; /* parent domains on it */
};

/* a protection domain, or a parent domain (ibv_alloc_parent_domain): a PD
 * for everything created on it, whose objects count on prot */
struct soft_pd {
	struct ibv_pd pd;
	uint32_t pd_id;
	int refcnt; /* MRs, QPs, SRQs, parent domains; a parent domain's:
		     * its QPs and CQs */
	struct soft_pd *prot; /* a parent domain's protection domain */
	struct soft_td *td;   /* a parent domain's thread domain, or NULL */
};

struct soft_mr {
	struct ibv_mr mr;
	uint64_t iova;
	uint32_t access;
	int map_fd; /* the fd kept for its publication (peermap.c), -1 */
	struct soft_pd *pd;
};

struct soft_mw {
	struct ibv_mw mw;
	struct soft_pd *pd;
	uint32_t slot;	       /* its registry entry */
	struct soft_list link; /* all windows of the process */
};

/*
 * A completion channel: its fd is the read end of a FIFO (a pipe when no
 * cell is free); its bytes are hints, the events live in ev.  Invariant
 * (under m): events queued => hint, and hint => a byte of ours is in the
 * FIFO, so the fd polls readable while an event waits.  A producer in
 * another process that finds cell's bit armed writes a byte too (a kick):
 * ibv_get_cq_event then runs the context's progress itself.
 */
struct soft_comp_channel {
	struct ibv_comp_channel ch;
	pthread_mutex_t m;
	struct ibv_cq **ev; /* queued events (CQs), a ring */
	size_t cap, head, count;
	int wfd;   /* our write end */
	int hint;  /* a byte of ours is in the FIFO */
	int quiet; /* a get_cq_event is serving: it pops what comes */
	int cell;  /* its cell in the registry (-1: none, the thread) */
	uint32_t key;
	int reg_idx;   /* its context's slot */
	int32_t owner; /* the process that made it */
	int narmed;    /* its CQs armed (context lock) */
};

struct soft_cqe {
	struct ibv_wc wc;
	int solicited;
};

struct soft_cq {
	struct ibv_cq_ex cqx;
	struct soft_context *ctx;
	struct soft_list link;
	struct soft_cqe *q;
	uint32_t size; /* slots = cqe + 1 */
	uint32_t head, count;
	/* polls in a row that found it empty and left the context to
	 * other threads (soft_ctx_enter_poll; relaxed) */
	uint32_t backoffs;
	/* the caller's array of a poll that found the CQ empty, while its
	 * pass runs (data.c soft_poll_cq): completions go straight into it
	 * while the ring stays empty (cq_take); direct_left 0: none */
	struct ibv_wc *direct;
	uint32_t direct_left;
	int armed;	/* 0, 1: next, 2: solicited */
	int arm_direct; /* armed through its channel's cell (verbs.c) */
	uint64_t wbit;	/* its wake slot: 1 << (its number % 64) */
	int overflowed;
	int refcnt;
	uint32_t comp_reported, async_reported;
	uint64_t wc_flags; /* cq_ex */
	int cqx_polling;
	int cqx_biased;	      /* start_poll's soft_ctx_enter, for end_poll */
	struct soft_pd *pdom; /* IBV_CQ_INIT_ATTR_MASK_PD's, or NULL */
	/* IBV_CREATE_CQ_ATTR_SINGLE_THREADED, or a parent domain's TD: its
	 * polls, plain and extended, give the context lock's bias the long
	 * budget (soft_ctx_enter) */
	int single;
};

/* soft_cq_count_set -- a CQ's count changes (lock held): one store that a
 * poll's look without the lock (soft_ctx_enter_poll) never sees torn */
static inline __attribute__((always_inline)) void soft_cq_count_set(
	struct soft_cq *cq, uint32_t v)
{
	__atomic_store_n(&cq->count, v, __ATOMIC_RELAXED);
}

struct soft_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	/* an SRQ's WQE that UD/UC QPs take (soft_srq.stamp): when it was
	 * posted, soft_now_us(); else 0 */
	uint32_t posted_us;
	/* an RC QP's own WQE: how many of the peer's messages had come when
	 * it was posted (data.c rx_arrived); a message before them did not
	 * find it (rx_late) */
	uint64_t arrived;
	struct ibv_sge sge[SOFT_MAX_SGE];
};

struct soft_srq {
	struct ibv_srq srq;
	struct soft_context *ctx;
	struct soft_list link;
	struct soft_pd *pd;
	struct soft_rwqe *rq;
	uint32_t size, max_wr, max_sge, limit;
	uint64_t head, tail;
	int refcnt;
	uint32_t async_reported;
	uint32_t srqn;
	struct soft_srq_hdr *shm; /* NULL: reached only by its own process */
	size_t shm_len;
	uint32_t shm_id;
	/* shm's mirror (shm_n WQEs of max_sge SGEs) and outbox, set at
	 * creation: the header's offsets are initiator-writable */
	uint32_t shm_n;
	char *shm_rq;
	struct soft_shm_srq_cqe *shm_cq;
	/* the UD and UC QPs that take from it: while there is one, its
	 * WQEs carry their post time, as the messages of those QPs their
	 * arrival (ud.c deliver) */
	int stamp;
	/* an XRC SRQ (xrc.c): its domain, the CQ its receives complete on
	 * and its number (ibv_get_srq_num); NULL, NULL, 0 for a basic one */
	struct soft_xrcd *xrcd;
	struct soft_cq *xcq;
	uint32_t xsrqn;
	/* HELD completions (SOFT_CQE_HELD) the last drain left, and when
	 * their holders' life is next looked at (data.c srq_drain) */
	uint32_t nheld;
	uint64_t held_check;
};

enum { SOFT_WQE_RING = 1, SOFT_WQE_DONE = 2 };

struct soft_swqe {
	uint64_t wr_id;
	uint32_t wc_opcode;
	uint32_t byte_len;
	uint32_t kind;	 /* SOFT_WQE_* */
	uint32_t status; /* for SOFT_WQE_DONE */
	int signaled;
	uint64_t msgno;	   /* for SOFT_WQE_RING: its slot sequence number */
	uint32_t op;	   /* SOFT_OP_* of the slot */
	uint32_t niov;	   /* its local iovecs, in qp->sq_iov */
	uint64_t ring_end; /* its data in the copy ring: ring_head after it */
	/* an inline SEND that found the copy ring full: its bytes, copied at
	 * post into memory of its own, freed when it completes */
	void *spill;
};

/* the responder's side of a message moving in chunks (process_vm refused) */
struct soft_rx_xfer {
	int active;
	int has_wqe;
	int solicited;
	uint32_t op;
	uint32_t len;
	uint32_t rkey;
	uint64_t raddr;
	uint64_t off;
	uint64_t msgno;
	struct soft_rwqe wqe;
	struct ibv_wc wc;
};

struct soft_wr_stage; /* ibv_qp_ex builder */
struct soft_dc;	      /* DC state (dc.c) */
struct soft_ud;	      /* UD/UC state (ud.c) */

struct soft_qp {
	struct ibv_qp_ex qpx;
	struct soft_context *ctx;
	const struct soft_qp_ops *ops; /* its kind's data path (qpops.h) */
	struct soft_list link;
	struct soft_pd *pd;
	struct soft_cq *scq, *rcq;
	struct soft_srq *srq;
	enum ibv_qp_type type;
	int sq_sig_all;
	/* on a parent domain with a TD: one thread posts (the bias's long
	 * budget, soft_ctx_enter) */
	int single;
	struct soft_pd *pdom; /* the parent domain it was made on, or NULL */
	struct ibv_qp_cap cap;
	struct ibv_qp_attr attr; /* last values set by modify_qp */
	enum ibv_qp_state state;
	int reg_slot;
	uint32_t async_reported;
	uint64_t send_ops_flags;
	/* send side: own outbound segment, slot i = SQ entry i */
	struct soft_seg_hdr *seg;
	size_t seg_len;
	struct soft_slot *slots;
	struct soft_swqe *sq;
	uint32_t sq_size, sq_mask;
	uint64_t sq_head, sq_tail;
	/* RC: 1 + the SQ index of the newest signalled WQE (data.c
	 * ack_needed): while one is in flight, the responder's ACK is
	 * looked at on every pass */
	uint64_t sig_head;
	uint64_t tx_msgno; /* two-sided messages published so far */
	/* RC: the responder's ACK as a flush froze it (data.c tx_freeze),
	 * valid while ack_frozen; until the next reset */
	uint64_t ack_freeze;
	int ack_frozen;
	uint8_t *ring;	    /* RC: the copy ring in seg, ring_size bytes */
	uint32_t ring_size; /* a power of 2, set at create */
	uint64_t ring_head, ring_tail; /* bytes taken, bytes given back */
	uint32_t rnr_count;
	uint64_t rnr_since;  /* ns */
	uint64_t dead_since; /* ns, 0: peer believed alive */
	/* responder: the peer's message we last RNR NAKed (its number + 1)
	 * and when (ns; rx_rnr, rx_retry_due) */
	uint64_t rnr_nak_msg, rnr_nak_ns;
	uint64_t next_check; /* ns: next peer liveness check */
	uint32_t unchecked;  /* polls since the clock was last read */
	/* the peer (dest_qp_num) */
	uint32_t dest_qpn;
	struct soft_seg_hdr *peer;
	size_t peer_len;
	struct soft_slot *peer_slots;
	uint32_t peer_mask;
	uint64_t peer_cons;
	uint64_t served_seen; /* seg->served as rx_slots last took it */
	uint64_t ring_stall;  /* 1 + the msgno of a ring SEND whose pieces
			       * stopped coming: not waited for again */
	int32_t peer_pid;
	uint64_t peer_start;
	uint32_t peer_ctx_idx;
	uint64_t peer_cq_wbits; /* its CQs' wake slots (peer_wake) */
	/* its context's registry entry, &soft_reg->ctx[peer_ctx_idx] (set
	 * at connect: peer_wake reads it on every post and ACK) */
	struct soft_reg_ctx *peer_rc;
	uint32_t peer_pd_id;
	int peer_reg_slot;
	int peer_same_ctx; /* the peer QP is ours, on this context */
	uint32_t peer_rq_n, peer_rq_sge; /* its RQ mirror, checked at connect */
	uint32_t peer_epoch; /* its incarnation whose slots peer_cons counts */
	uint64_t peer_rq_off, peer_cq_off;
	const uint8_t *peer_ring; /* its copy ring, checked at connect */
	uint32_t peer_ring_size;
	struct soft_srq_hdr *peer_srq; /* its SRQ's segment, checked */
	size_t peer_srq_len;
	uint32_t peer_srq_n, peer_srq_sge;
	uint64_t peer_srq_rq_off, peer_srq_cq_off;
	/* receive side */
	struct soft_rwqe *rq;
	uint32_t rq_size;
	uint64_t rq_head, rq_tail;
	/* rq's mirror in seg (rq_size WQEs of cap.max_recv_sge SGEs) and its
	 * outbox, where initiators take and complete our WQEs; NULL: none
	 * (on an SRQ).  Set at creation: the segment header's offsets are
	 * for the peer, which can write them */
	char *rq_shm;
	const struct soft_shm_cqe *rq_outbox;
	/* ibv_qp_ex builder */
	struct soft_wr_stage *stage;
	int stage_err;
	void *dv;	    /* mlx5dv_create_qp: its mlx5dv_qp_ex (umr.c) */
	int is_ex;	    /* created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
	int sq_err_pending; /* a WR failed: later ones flush */
	/* RC: WRs posted in SQD, run in order when the QP leaves SQD */
	struct soft_held *held, **held_tail;
	uint32_t nheld;
	int sqd_notify; /* SQD entered with sends in flight: event when done */
	uint32_t check_tick;
	/* RC: local iovecs of send WQEs, sq_iov_n per WQE */
	struct iovec *sq_iov;
	uint32_t sq_iov_n;
	int novm;     /* process_vm_* refused towards the peer: chunks */
	int no_serve; /* process_vm_writev refused: the responder serves */
	uint64_t wait_msgno, wait_since; /* head message untouched since */
	uint64_t map_alive; /* ns: the peer was last found alive (peer_map) */
	/* the peer's ACK at the last liveness look of tx_qp and of peer_map:
	 * one that moved since needs no system call (data.c peer_answered) */
	uint64_t alive_acked, map_acked;
	/* fast_push: the message after the last one it placed; SENDs left
	 * to the ring before it tries again; SENDs it placed (ever) */
	uint64_t push_next;
	uint32_t push_skip;
	uint64_t pushed;
	int drain_bad;	/* the initiator's outbox lied: no more from it */
	int rx_stopped; /* the peer's stream broke: nothing after it arrives */
	struct soft_rx_xfer rx;
	struct soft_ud *ud;	/* UD and UC QPs: their data path (ud.c) */
	struct soft_dc *dc;	/* DCI and DCT, XRC INI and TGT (dc.c) */
	struct soft_xrcd *xrcd; /* an XRC target's domain (xrc.c) */
	/* an XRC target: 1, a handle of ibv_open_qp (no queues, no
	 * segment of its own: it names the target by number); 2, a
	 * creator's target whose handle was destroyed while others had it
	 * open: it lives on, hidden, until they are closed (xrc.c) */
	int xrc_handle;
	struct soft_net_qp *net; /* RC to another host: net.c (issue 12) */
	/* APM (IB mode, apm.c) */
	uint8_t alt_valid;   /* an alternate path is loaded */
	uint8_t path_down;   /* the primary path's link is down: no traffic */
	uint8_t mig_unacked; /* between hosts: migrated, nothing from the
			      * peer on the new path since (apm.c, net.c) */
	uint32_t mig_seen;   /* the peer's mig_req last acted on */
	/* activity doorbell (data.c) */
	uint32_t bell;	    /* ours (SOFT_BELL_NONE: visited every pass) */
	uint32_t peer_bell; /* the peer's, read at connect */
	_Atomic uint64_t *peer_bw; /* its word in the registry (NULL: none) */
	uint64_t peer_bm;	   /* and its bit there */
	struct soft_list hot_link;
	int hot;   /* on ctx->hot (always 1 while the context sweeps) */
	int again; /* asked for while hot: the pass keeps it (progress) */
	uint32_t visited; /* the ctx->bell_pass that last visited it */
	/* multicast groups it is attached to: ibv_destroy_qp is EBUSY
	 * meanwhile (mcast.c; here, the hot fields above keep their
	 * places) */
	uint32_t nmcast;
};

/* list helpers */
static inline void soft_list_init(struct soft_list *l)
{
	l->next = l->prev = l;
}

static inline void soft_list_add(struct soft_list *head, struct soft_list *n)
{
	n->next = head;
	n->prev = head->prev;
	head->prev->next = n;
	head->prev = n;
}

static inline void soft_list_del(struct soft_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	soft_list_init(n);
}

/* soft_qp_hot -- visit qp at the next progress (local work or state);
 * lock held.  Asked while it is on the list, during its own visit too (a
 * lock its receive side could not take, a budget spent): the pass that
 * visits it keeps it there for the next (data.c, progress) */
static inline void soft_qp_hot(struct soft_qp *qp)
{
	if (qp->hot) {
		qp->again = 1;
		return;
	}
	qp->hot = 1;
	soft_list_add(&qp->ctx->hot, &qp->hot_link);
}

/* soft_sq_room -- send WRs max_send_wr leaves beside USED queued (the
 * kinds' sq_room, qpops.h) */
static inline uint32_t soft_sq_room(const struct soft_qp *qp, uint64_t used)
{
	return used < qp->cap.max_send_wr ? qp->cap.max_send_wr - (uint32_t)used
					  : 0;
}

static inline struct soft_context *to_sctx(struct ibv_context *c)
{
	return soft_container_of(c, struct soft_context, vctx.context);
}

static inline struct soft_qp *to_sqp(struct ibv_qp *qp)
{
	return soft_container_of(qp, struct soft_qp, qpx.qp_base);
}

static inline struct soft_cq *to_scq(struct ibv_cq *cq)
{
	return soft_container_of((struct ibv_cq_ex *)cq, struct soft_cq, cqx);
}

static inline struct soft_srq *to_ssrq(struct ibv_srq *srq)
{
	return soft_container_of(srq, struct soft_srq, srq);
}

/* to_spd -- the protection domain of pd (a parent domain's is its
 * protection domain, as in mlx5's to_mpd) */
static inline struct soft_pd *to_spd(struct ibv_pd *pd)
{
	struct soft_pd *p = soft_container_of(pd, struct soft_pd, pd);

	return p->prot ? p->prot : p;
}

/* soft_pd_td -- pd is a parent domain with a thread domain: what is made
 * on it is used by one thread at a time */
static inline int soft_pd_td(struct ibv_pd *pd)
{
	return soft_container_of(pd, struct soft_pd, pd)->td != NULL;
}

/* soft_pdom_get -- pd if it is a parent domain, counted (its QPs and CQs
 * make its ibv_dealloc_pd EBUSY, as mlx5's), else NULL */
static inline struct soft_pd *soft_pdom_get(struct ibv_pd *pd)
{
	struct soft_pd *p = soft_container_of(pd, struct soft_pd, pd);

	if (!p->prot)
		return NULL;
	__atomic_add_fetch(&p->refcnt, 1, __ATOMIC_RELAXED);
	return p;
}

/* soft_pdom_put -- what soft_pdom_get counted goes */
static inline void soft_pdom_put(struct soft_pd *p)
{
	if (p)
		__atomic_sub_fetch(&p->refcnt, 1, __ATOMIC_RELAXED);
}

/* shm.c: registry, segments, liveness */
extern struct soft_reg *soft_reg;
extern int32_t soft_self_pid;

/*
 * Key entries are written under their stripe lock (key_lock[slot %
 * SOFT_NSTRIPES], robust: a writer may die holding it) and read without
 * it, as a sequence count (the kernel's seqlock): the writer makes seq
 * odd, writes, makes it even; a reader copies the entry between two reads
 * of an even seq that agree.  A writer that died mid-write leaves seq odd:
 * readers give up after SOFT_KEY_TRIES tries (soft_key_stuck), and the
 * next locker of the stripe (EOWNERDEAD) repairs the entry (shm.c).
 */
#define SOFT_KEY_TRIES 256

/* soft_key_write_begin -- under the stripe lock: readers now retry */
static inline void soft_key_write_begin(struct soft_reg_mr *e)
{
	uint32_t s = atomic_load_explicit(&e->seq, memory_order_relaxed);

	atomic_store_explicit(&e->seq, s | 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

/* soft_key_write_end -- the entry is whole again (even seq, released) */
static inline void soft_key_write_end(struct soft_reg_mr *e)
{
	uint32_t s = atomic_load_explicit(&e->seq, memory_order_relaxed);

	atomic_store_explicit(&e->seq, (s | 1) + 1, memory_order_release);
}

int soft_key_stuck(uint32_t slot, struct soft_reg_mr *out);

/*
 * soft_key_read -- a consistent copy of key entry slot, no lock taken:
 * 0, or -1 when a writer holds it too long (the key is being changed: an
 * access through it fails as an HCA fails one).  The copy (all but seq)
 * is word by word with relaxed atomic loads (racing a writer is expected,
 * not undefined); the acquire fence orders them before the second read of
 * seq.
 */
static inline int soft_key_read(uint32_t slot, struct soft_reg_mr *out)
{
	typedef uint64_t __attribute__((may_alias)) soft_word;
	const struct soft_reg_mr *e = &soft_reg->mr[slot];
	const soft_word *src = (const soft_word *)e;
	soft_word *dst = (soft_word *)out;
	uint32_t s, n, i;

	for (n = 0; n < SOFT_KEY_TRIES; n++) {
		s = atomic_load_explicit(&e->seq, memory_order_acquire);
		if (!(s & 1)) {
#pragma GCC unroll 16
			for (i = 0; i < offsetof(struct soft_reg_mr, seq) /
						sizeof(*src);
			     i++)
				dst[i] = __atomic_load_n(&src[i],
							 __ATOMIC_RELAXED);
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load_explicit(&e->seq,
						 memory_order_relaxed) == s)
				return 0;
		}
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	return soft_key_stuck(slot, out);
}

extern int soft_gmb;
extern int soft_test_ack_stop;
void soft_ctx_fence_wake(struct soft_context *ctx);

/* soft_ctx_armed -- publish whether ctx waits on events; a forked child
 * never writes the flag of a context its parent opened */
static inline void soft_ctx_armed(struct soft_context *ctx, uint32_t bit,
				  int on)
{
	if (ctx->owner_pid != soft_self_pid)
		return;
	if (on) {
		soft_ctx_fence_wake(ctx); /* producers' wakes from now on */
		atomic_fetch_or(&soft_reg->ctx[ctx->reg_idx].armed, bit);
	} else {
		atomic_fetch_and(&soft_reg->ctx[ctx->reg_idx].armed, ~bit);
	}
}
extern uint64_t soft_self_start;
int soft_reg_attach(void);
void soft_reg_detach(void);
void soft_reg_reap(void);
void soft_reg_id(uint8_t id[16]);
void soft_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * SOFT_WARN -- a warning on stderr (as libibverbs and its providers give
 * theirs), at most 10 times per call site, so a hostile peer cannot flood.
 */
#define SOFT_WARN(...)                                       \
	do {                                                 \
		static _Atomic int soft_warned_;             \
		if (atomic_fetch_add(&soft_warned_, 1) < 10) \
			soft_warn(__VA_ARGS__);              \
	} while (0)
int soft_reg_ctx_alloc(void);
void soft_reg_ctx_free(int idx);
int soft_reg_qp_alloc(uint32_t pd_id, int ctx_idx, uint32_t type,
		      uint32_t *qpn);
void soft_reg_qp_free(int slot);
int soft_reg_qp_lookup(uint32_t qpn, struct soft_reg_qp *out);
int soft_reg_mr_alloc(const struct soft_reg_mr *mr, uint32_t *key);
void soft_reg_mr_free(uint32_t key);
uint32_t soft_reg_pd_id(void);
void soft_stripe_lock(pthread_mutex_t *m);
int soft_pid_alive(int32_t pid, uint64_t start);
int soft_exit_lock(pthread_mutex_t *m);
uint64_t soft_pid_start(int32_t pid);
uint64_t soft_now_ns(void);
/* soft_now_us -- the monotonic clock in microseconds, modulo 2^32 (an
 * hour's wrap: compared as a signed difference) */
static inline uint32_t soft_now_us(void)
{
	return (uint32_t)(soft_now_ns() / 1000);
}
/* soft_shm_make -- make(fd) maps and fills a new object of len bytes,
 * which then gets the shm name `name` at once, whole (shm.c); NULL with
 * errno EEXIST: another has the name (open that); another errno: none
 * made (no O_TMPFILE here: make it under its name).  `what` names it for
 * SOFTRDMA_TEST_MAKE_STOP. */
void *soft_shm_make(const char *name, const char *what, size_t len,
		    void *(*make)(int fd));
void *soft_seg_create(uint32_t qpn, size_t len);
void *soft_seg_map(uint32_t qpn, size_t *len);
void soft_populate(void *p, size_t len, int write);
void soft_seg_unlink(uint32_t qpn);
#define SOFT_MAX_SRQ_IDS 4096
void *soft_srq_seg_create(uint32_t ctx_idx, uint32_t id, size_t len);
void *soft_srq_seg_map(uint32_t ctx_idx, uint32_t id, size_t *len);
void soft_srq_seg_unlink(uint32_t ctx_idx, uint32_t id);

/* an SRQ segment of another process or context (a DCT's, or an XRC
 * SRQ), mapped and checked (soft_srq_ref_map): the header's words as read
 * once (the segment is its peers' to write), which every later use goes
 * by, and its owner */
struct soft_srq_ref {
	struct soft_srq_hdr *sh; /* NULL: none mapped */
	size_t len;
	uint32_t n, sge, pd_id, xrcd_id;
	uint64_t rq_off, cq_off;
	uint32_t ctx;  /* the owner's registry context */
	uint32_t srqn; /* an XRC SRQ's number, 0: a DCT's SRQ */
	int32_t pid;
	uint64_t start;
};
int soft_srq_ref_map(uint32_t ctx_idx, uint32_t id, int32_t pid, uint64_t start,
		     struct soft_srq_ref *r);
void soft_srq_ref_unmap(struct soft_srq_ref *r);
int soft_srq_ref_next(const struct soft_srq_ref *r, struct ibv_sge *sge,
		      uint32_t *num, uint64_t *idx, uint64_t *prod);

/* soft_srq_ref_cqe -- the outbox entry of r's WQE number idx */
static inline struct soft_shm_srq_cqe *soft_srq_ref_cqe(
	const struct soft_srq_ref *r, uint64_t idx)
{
	return (struct soft_shm_srq_cqe
			*)(void *)((char *)r->sh + r->cq_off +
				   (idx & (r->n - 1)) *
					   sizeof(struct soft_shm_srq_cqe));
}
void soft_reg_srq_id(uint32_t ctx_idx, uint32_t id);
void soft_wake_ctx(uint32_t ctx_idx);
void soft_wake_waiting(uint32_t ctx_idx);
void soft_wake_thread(uint32_t ctx_idx);

/* soft_srq_kick -- an initiator took the WQE before CONS of the SRQ of
 * context CTX_IDX whose segment is H, with PROD posted: below the armed
 * limit, the owner's progress thread is woken to drain the SRQ and raise
 * IBV_EVENT_SRQ_LIMIT_REACHED, as its HCA raises it when it takes the
 * WQE, though the owner only waits in ibv_get_async_event */
static inline void soft_srq_kick(struct soft_srq_hdr *h, uint64_t prod,
				 uint64_t cons, uint32_t ctx_idx)
{
	uint32_t lim = atomic_load_explicit(&h->limit, memory_order_relaxed);

	if (lim && prod - cons < lim)
		soft_wake_thread(ctx_idx);
}

void soft_chan_path(char *buf, size_t len, uint32_t key);
void soft_chan_forget(uint32_t key);
void soft_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ns);

/* device.c */
int soft_gid_count(void);
int soft_gid_local(const union ibv_gid *g);
int soft_gid_get(uint32_t port, uint32_t idx, union ibv_gid *g);
int soft_gid_index(uint32_t port, const union ibv_gid *g);
int soft_gid_find(const union ibv_gid *g, uint32_t *port);
int soft_gid_check(uint32_t port, uint32_t idx);
extern int soft_link_ib /* SOFTRDMA_LINK=ib: InfiniBand ports, APM */
	__attribute__((visibility("hidden")));
int soft_port_ok(uint32_t port);
uint16_t soft_port_lid(uint32_t port);
int soft_lid_port(uint16_t lid);
int soft_gid_port(const union ibv_gid *g);
int soft_ah_local(const struct ibv_ah_attr *ah);

/* apm.c: IB ports' link state and automatic path migration */
int soft_port_up(uint32_t port);
void soft_port_poll(struct soft_context *ctx);
int soft_apm_check_values(struct soft_qp *qp, const struct ibv_qp_attr *a,
			  int mask, enum ibv_qp_state cur,
			  enum ibv_qp_state next);
void soft_apm_mig(struct soft_qp *qp, enum ibv_mig_state want,
		  enum ibv_qp_state cur);
/* soft_apm_check -- IB mode: follow the links; 1 while the path is down */
int soft_apm_check(struct soft_qp *qp);
/* soft_apm_timeout -- between hosts: the requester's retries ran out on
 * the primary path; 1 when it migrated (retry on the new path), 0 when
 * the WQE fails (RETRY_EXC_ERR; PATH_MIG_ERR first if it was armed) */
int soft_apm_timeout(struct soft_qp *qp);
/* soft_apm_follow -- between hosts: a packet came on the alternate path;
 * 1 when the QP migrated (it was armed) */
int soft_apm_follow(struct soft_qp *qp);
/* soft_apm_migreq -- between hosts: the MigReq bit of the QP's packets */
int soft_apm_migreq(const struct soft_qp *qp);

/* iblink.c: the IB mode between hosts (SOFTRDMA_LINK=ib, SOFTRDMA_NET=1) */
extern int soft_ib_net /* the ports are on rails to other hosts */
	__attribute__((visibility("hidden")));
int soft_ib_net_init(uint16_t *lids);
int soft_ib_lid_addr(uint32_t port, uint16_t dlid, uint32_t *addr);
uint16_t soft_ib_addr_lid(uint32_t addr);
uint32_t soft_ib_addr_port(uint32_t addr);
const char *soft_ib_rail_if(uint32_t port);
uint32_t soft_ib_if_down(void);
struct sockaddr;
uint8_t soft_ib_sa_port(const struct sockaddr *sa);
void soft_ib_cm_av(struct ibv_ah_attr *ah);
int soft_ib_path_addr(const struct soft_qp *qp, int alt, int *family,
		      uint8_t *dst);
int soft_ib_net_in(struct soft_qp *qp, int family, const uint8_t *src,
		   int migreq, int cur_family, const uint8_t *cur);

/* port.c: the RoCE ports follow their interfaces (SOFTRDMA_NET=1) */
void soft_port_bind(char (*ifn)[16 /* IF_NAMESIZE */], int n,
		    uint8_t *gid_port);
uint32_t soft_port_count(void);
uint32_t soft_port_ifindex(uint32_t port);
enum ibv_mtu soft_port_mtu_of(int ip_mtu);
int soft_port_eth(uint32_t port, struct ibv_port_attr *a);
void soft_port_ctx_add(struct soft_context *ctx);
void soft_port_ctx_del(struct soft_context *ctx);

/* verbs.c: events, CQ */
struct soft_evq *soft_evq_new(size_t elem);
void soft_evq_free(struct soft_evq *q);
int soft_evq_fd(struct soft_evq *q);
void soft_evq_push(struct soft_evq *q, const void *elem);
int soft_evq_pop(struct soft_evq *q, void *elem, void (*taken)(void *elem));
void soft_evq_purge(struct soft_evq *q, int (*match)(const void *, void *),
		    void *arg);
void soft_async_event(struct soft_context *ctx, enum ibv_event_type type,
		      void *obj);
void soft_port_event(struct soft_context *ctx, enum ibv_event_type type,
		     uint32_t port);
void soft_cq_clean(struct soft_cq *cq, uint32_t qpn);
void soft_cq_push(struct soft_cq *cq, const struct ibv_wc *wc, int solicited);
int soft_cq_room(struct soft_cq *cq);

/* data.c: data path */
void soft_progress(struct soft_context *ctx);
/* activity doorbell (see struct soft_reg_bells); lock held for these */
void soft_bell_alloc(struct soft_qp *qp);
void soft_bell_free(struct soft_qp *qp);
/* soft_bell_ring -- qp `bell` of context ctx_idx may have work: after the
 * work is visible (any thread, any process; no lock) */
static inline void soft_bell_ring_nofence(uint32_t ctx_idx, uint32_t bell)
{
	_Atomic uint64_t *w;
	uint64_t m;

	if (ctx_idx >= SOFT_MAX_CTX || bell >= SOFT_BELLS)
		return;
	w = &soft_reg->bells[ctx_idx].w[bell / 64];
	m = 1ull << (bell % 64);
	if (!(atomic_load_explicit(w, memory_order_relaxed) & m))
		atomic_fetch_or_explicit(w, m, memory_order_seq_cst);
}

static inline void soft_bell_ring(uint32_t ctx_idx, uint32_t bell)
{
	/* the work's stores before the look at the bit: a bit seen set is
	 * one the consumer has not taken yet, and its exchange comes after */
	atomic_thread_fence(memory_order_seq_cst);
	soft_bell_ring_nofence(ctx_idx, bell);
}
int soft_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		   struct ibv_send_wr **bad);
int soft_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad);
int soft_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad);
int soft_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
void soft_qp_to_error(struct soft_qp *qp);
void soft_qp_flush(struct soft_qp *qp);
/* soft_sq_release -- the QP left SQD: run the WRs posted meanwhile, in
 * order (flushed if it went to ERR); lock held */
void soft_sq_release(struct soft_qp *qp);
/* soft_sq_drop_held -- RESET or destroy: forget them, no completions */
void soft_sq_drop_held(struct soft_qp *qp);
/* soft_sq_drop -- RESET or destroy: the posted send WQEs go, no
 * completions (their inline copies freed) */
void soft_sq_drop(struct soft_qp *qp);
/* soft_sqd_check -- in SQD with nothing left in flight: SQ_DRAINED once */
void soft_sqd_check(struct soft_qp *qp);
void soft_qp_connect(struct soft_qp *qp);
void soft_qp_disconnect(struct soft_qp *qp);
/* how long a reset waits for an rx lock held (soft_rx_lock_wait) */
#define SOFT_RX_LOCK_WAIT_NS 1000000000ull
int soft_rx_lock_wait(struct soft_seg_hdr *h, uint32_t v, int32_t pid,
		      uint64_t start);
/* soft_qp_ack_reset -- the ACK back to 0 under the responder's rx lock */
void soft_qp_ack_reset(struct soft_qp *qp);
void soft_thread_start(struct soft_context *ctx);
void soft_thread_start_locked(struct soft_context *ctx);
void soft_thread_stop(struct soft_context *ctx);
/* the process's MRs by key slot (verbs.c); soft_mr_lookup is inline:
 * every post and every message received asks it */
extern struct soft_mr *soft_mr_tab[SOFT_MAX_MR];
static inline struct soft_mr *soft_mr_lookup(uint32_t key)
{
	struct soft_mr *mr = soft_mr_tab[key & (SOFT_MAX_MR - 1)];

	return mr && mr->mr.lkey == key ? mr : NULL;
}
void soft_mr_table_set(uint32_t key, struct soft_mr *mr);

/*
 * soft_count_take -- one object more of a kind of which at most max may be
 * alive (*live of them are): 0, or -1 when max are, the count as it was
 * (the kernel's object pools, rxe_pool_get, and mlx5's firmware refuse
 * the one past the device's limit with ENOMEM).  soft_count_drop gives
 * the place back.
 */
static inline int soft_count_take(uint32_t *live, uint32_t max)
{
	uint32_t n = __atomic_load_n(live, __ATOMIC_RELAXED);

	do {
		if (n >= max)
			return -1;
	} while (!__atomic_compare_exchange_n(
		live, &n, n + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return 0;
}
static inline void soft_count_drop(uint32_t *live)
{
	__atomic_sub_fetch(live, 1, __ATOMIC_RELAXED);
}

/* soft_atomic_sge_bad -- an atomic's SGE rules (RC on one host or
 * between hosts, DC): CMP_AND_SWP and FETCH_AND_ADD return the old value
 * into one SGE of at least 8 bytes, never inline; ATOMIC_WRITE takes
 * exactly 8 bytes from one SGE or inline in the WQE.  1: post fails with
 * EINVAL */
static inline int soft_atomic_sge_bad(const struct ibv_send_wr *wr)
{
	if (wr->num_sge != 1 || !wr->sg_list)
		return 1;
	if (wr->opcode == IBV_WR_ATOMIC_WRITE)
		return wr->sg_list[0].length != 8;
	return wr->sg_list[0].length < 8 || (wr->send_flags & IBV_SEND_INLINE);
}

/* soft_iov_gather -- n bytes of an iovec list from offset off into dst
 * (every path's, the RC fast path's too) */
static inline void soft_iov_gather(const struct iovec *iov, uint32_t niov,
				   uint64_t off, void *dst, uint64_t n)
{
	uint8_t *d = dst;
	uint32_t i;

	if (niov == 1 && off + n <= iov[0].iov_len) { /* the usual case */
		memcpy(d, (const uint8_t *)iov[0].iov_base + off, n);
		return;
	}
	for (i = 0; i < niov && n; i++) {
		uint64_t l = iov[i].iov_len, c;

		if (off >= l) {
			off -= l;
			continue;
		}
		c = l - off < n ? l - off : n;
		memcpy(d, (const uint8_t *)iov[i].iov_base + off, c);
		d += c;
		n -= c;
		off = 0;
	}
}

/* soft_iov_scatter -- n bytes from src into an iovec list at offset off */
static inline void soft_iov_scatter(const struct iovec *iov, uint32_t niov,
				    uint64_t off, const void *src, uint64_t n)
{
	const uint8_t *p = src;
	uint32_t i;

	if (niov == 1 && off + n <= iov[0].iov_len) { /* the usual case */
		memcpy((uint8_t *)iov[0].iov_base + off, p, n);
		return;
	}
	for (i = 0; i < niov && n; i++) {
		uint64_t l = iov[i].iov_len, c;

		if (off >= l) {
			off -= l;
			continue;
		}
		c = l - off < n ? l - off : n;
		memcpy((uint8_t *)iov[i].iov_base + off, p, c);
		p += c;
		n -= c;
		off = 0;
	}
}

/* data.c: an SGE checked against the local MR table, for an MR of pd; 0
 * or -1 */
int soft_local_sge(const struct soft_pd *pd, const struct ibv_sge *sge,
		   unsigned int need, struct iovec *iov);

/* data.c: process_vm_* forced off by tests (as Yama refuses it) */
int soft_novm_env(void);

/*
 * soft_env_flag_or -- the environment variable NAME starts with '1', or
 * ALSO (if not NULL) says so: found once, by whichever thread asks first,
 * and kept in *CACHE (-1 until then), so that every later call is one
 * load.  Threads that race for it find the same value; relaxed atomics
 * make that race a defined one (the process's contexts may be used by
 * threads of their own).
 */
static inline int soft_env_flag_or(_Atomic int *cache, const char *name,
				   int (*also)(void))
{
	int v = atomic_load_explicit(cache, memory_order_relaxed);

	if (v < 0) {
		const char *e = getenv(name);

		v = (e && e[0] == '1') || (also && also());
		atomic_store_explicit(cache, v, memory_order_relaxed);
	}
	return v;
}

/* soft_env_flag -- soft_env_flag_or of NAME alone */
static inline int soft_env_flag(_Atomic int *cache, const char *name)
{
	return soft_env_flag_or(cache, name, NULL);
}

/* soft_env_str -- the environment variable NAME (NULL if unset), found
 * once as soft_env_flag_or finds its flag: *CACHE starts at (char *)-1 */
static inline const char *soft_env_str(_Atomic(const char *) *cache,
				       const char *name)
{
	const char *v = atomic_load_explicit(cache, memory_order_relaxed);

	if (v == (const char *)-1) {
		v = getenv(name);
		atomic_store_explicit(cache, v, memory_order_relaxed);
	}
	return v;
}

/*
 * ThreadSanitizer builds (SOFT_TSAN) only: orders that softrdma keeps and
 * TSan cannot see, told to it.  Nothing in other builds.
 * - soft_tsan_acquire_at / soft_tsan_release_at: the context lock handed
 *   over by the kernel (shm.c: FUTEX_UNLOCK_PI to a FUTEX_LOCK_PI sleeper)
 *   orders the two holders' sections as the word's atomics do, but TSan
 *   sees no system call order.
 * - soft_tsan_acquire / soft_tsan_release: the release and acquire of an
 *   RC QP's shared segment words (slot states, ACKs, pushed completions),
 *   on one address per pair of QP numbers.  Two QPs of one process each
 *   map the other's segment at an address of their own, and TSan pairs a
 *   release with an acquire only at one address: without this, what a
 *   sender placed for a receiver on another context looked unordered to
 *   it (README, "ThreadSanitizer").  A release comes before each such
 *   word is published, an acquire after one is seen.
 */
#if defined(__SANITIZE_THREAD__)
#define SOFT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SOFT_TSAN 1
#endif
#endif
#ifdef SOFT_TSAN
#include <sanitizer/tsan_interface.h>
#define soft_tsan_acquire_at(p) __tsan_acquire(p)
#define soft_tsan_release_at(p) __tsan_release(p)
extern char soft_tsan_pairs[4096];
static inline void *soft_tsan_pair(const struct soft_qp *qp)
{
	return &soft_tsan_pairs[(qp->qpx.qp_base.qp_num ^ qp->dest_qpn) &
				(sizeof(soft_tsan_pairs) - 1)];
}
#define soft_tsan_acquire(qp) __tsan_acquire(soft_tsan_pair(qp))
#define soft_tsan_release(qp) __tsan_release(soft_tsan_pair(qp))
#else
#define soft_tsan_acquire_at(p) ((void)(p))
#define soft_tsan_release_at(p) ((void)(p))
#define soft_tsan_acquire(qp)	((void)(qp))
#define soft_tsan_release(qp)	((void)(qp))
#endif

/* soft_atomic_exec -- an atomic on pid's 8 bytes under their stripe lock
 * (data.c); 0 or one of these */
#define SOFT_ATOMIC_NOREAD  1 /* nothing read, nothing changed */
#define SOFT_ATOMIC_NOWRITE 2 /* read, the write refused */
enum ibv_wc_status soft_aw_place(int32_t pid, uint64_t va, uint8_t *p,
				 uint64_t v);
int soft_atomic_exec(int32_t pid, uint64_t va, uint8_t *p, int cas,
		     uint64_t add, uint64_t swap, void *res);

uint32_t soft_sweep_max(void);

/* peermap.c: MRs in sealed memfds, published and mapped by peers */
int soft_map_off(void);
int soft_push_off(void);
int soft_map_publish(const void *addr, size_t len, struct soft_reg_mr *e);
int soft_map_range_ok(const void *addr, size_t len, int write);
void soft_map_unpublish(int fd);
uint8_t *soft_map_get(struct soft_context *ctx, const struct soft_reg_mr *e);
void soft_map_sweep(struct soft_context *ctx);
int soft_map_need(struct soft_context *ctx);
void soft_map_fini(struct soft_context *ctx);

/* mw.c: memory windows */
struct ibv_mw *soft_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int soft_dealloc_mw(struct ibv_mw *mw);
int soft_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		 struct ibv_mw_bind *mw_bind);
int soft_mw_check_wr(struct soft_qp *qp, struct ibv_send_wr *wr);
enum ibv_wc_status soft_mw_local_op(struct soft_qp *qp, struct ibv_send_wr *wr);
enum ibv_wc_status soft_mw_remote_inv(uint32_t rkey, int32_t pid,
				      uint32_t pd_id, uint32_t qpn);
int soft_mw_bound_to(uint32_t mr_key);
int soft_rkey_target(const struct soft_qp *qp, const struct soft_pd *pd,
		     uint32_t rkey, uint64_t raddr, uint64_t len, uint32_t need,
		     uint8_t **va, pthread_mutex_t **lk);

/* soft_atomic_lock -- the stripe lock every atomic on (pid, va) takes,
 * whoever carries it out and however it reaches the memory */
static inline pthread_mutex_t *soft_atomic_lock(int32_t pid, uint64_t va)
{
	return &soft_reg->atomic_lock[((uint64_t)pid * 31 + (va >> 3)) %
				      SOFT_NSTRIPES];
}

/* umr.c: mlx5dv indirect mkeys */
enum ibv_wc_status soft_umr_remote(struct soft_qp *qp, uint32_t need,
				   uint32_t rkey, uint64_t raddr,
				   const struct iovec *liov, int niov,
				   uint64_t len, const struct ibv_send_wr *wr);
int soft_umr_local_sge(const struct soft_pd *pd, const struct ibv_sge *sge,
		       unsigned int need, struct iovec *iov);
enum ibv_wc_status soft_umr_exec(struct soft_qp *qp, struct ibv_send_wr *wr);
int soft_umr_wr_ok(struct soft_qp *qp, const struct ibv_send_wr *wr);
int soft_umr_local_inv(struct soft_qp *qp, uint32_t key,
		       enum ibv_wc_status *st);

/* dc.c: mlx5dv DC transport (DCI, DCT) */
struct ibv_qp *soft_dc_create(struct ibv_context *context,
			      struct ibv_qp_init_attr_ex *attr, int dct,
			      uint64_t key);
void soft_dc_set_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t dctn,
		      uint64_t key);
/* XRC (xrc.c): the pass's drain of the context's XRC SRQs; an XRC
 * QP's create (from soft_create_qp_ex) and its domain's release */
void soft_xrc_drain(struct soft_context *ctx);
struct ibv_qp *soft_xrc_create_qp(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr);
void soft_xrc_qp_gone(struct soft_qp *qp);
int soft_xrc_srq_init(struct soft_srq *srq, struct ibv_srq_init_attr_ex *attr);
void soft_xrc_srq_fini(struct soft_srq *srq);
int soft_xrc_srq_target(uint32_t srqn, uint32_t *ctx_idx, uint32_t *id);
int soft_xsrq_map(uint32_t srqn, uint32_t xrcd_id, struct soft_srq_ref *r);
int soft_remote_move(int32_t pid, uint64_t start, uint32_t pd_id, uint32_t key,
		     uint64_t addr, uint64_t len, uint32_t need, int write,
		     void *buf);
int soft_remote_atomic(int32_t pid, uint64_t start, uint32_t pd_id,
		       uint32_t key, uint64_t addr, enum ibv_wr_opcode op,
		       uint64_t cmp, uint64_t swap, uint64_t *orig);
int soft_xsrq_ok(const struct soft_srq_ref *r, uint32_t xrcd_id);
int soft_xsrq_hold(struct soft_srq_ref *r, uint32_t qpn, uint32_t src_qp,
		   struct soft_rwqe *w, uint64_t *idx);
void soft_xsrq_release(const struct soft_srq_ref *r, uint64_t idx,
		       const struct ibv_wc *wc, int solicited);
int soft_xrc_close(struct soft_qp *qp);
int soft_xrc_modify(struct soft_qp *qp, struct ibv_qp_attr *attr, int mask);
/* the context's XRC verbs (xrc.c, set in device.c) */
struct ibv_xrcd *soft_open_xrcd(struct ibv_context *context,
				struct ibv_xrcd_init_attr *attr);
int soft_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_qp *soft_open_qp(struct ibv_context *context,
			    struct ibv_qp_open_attr *attr);
int soft_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
/* dc.c: an XRC initiator's data path, set by soft_xrc_create_qp */
int soft_xrc_ini(struct soft_qp *qp);
/* qp.c: a QP made as RC becomes another kind (DC, XRC); lock held */
void soft_qp_retype(struct soft_qp *qp, enum ibv_qp_type type,
		    const struct soft_qp_ops *ops);
extern const struct soft_qp_ops soft_xini_ops, soft_xtgt_ops;
/* the same to another host (RoCE v2, net.c): set at INIT->RTR */
extern const struct soft_qp_ops soft_xini_net_ops, soft_xtgt_net_ops;
/* data.c: a DCT's SRQ: the receive completions initiators produced */
void soft_srq_drain(struct soft_srq *srq);
/* data.c: a UD/UC QP's SRQ WQEs: its lock (-1 busy), release, consume */
int soft_srq_hold(struct soft_srq *srq);
void soft_srq_release(struct soft_srq *srq);
void soft_srq_consume(struct soft_srq *srq);
/* ud.c: what an address handle was created with */
const struct ibv_ah_attr *soft_ah_attr(struct ibv_ah *ah);

/* qp.c */
void soft_qp_ex_init(struct soft_qp *qp);
/* soft_stage_last_wr -- the WR staged last (NULL: the builder's error) */
struct ibv_send_wr *soft_stage_last_wr(struct ibv_qp_ex *q);
/* soft_stage_wr -- a new staged WR of the ibv_qp_ex builder (NULL: the
 * builder's error is set) */
struct ibv_send_wr *soft_stage_wr(struct ibv_qp_ex *q, enum ibv_wr_opcode op);
int soft_qp_is_local(uint32_t qpn);
struct soft_qp *soft_qp_lock_local(uint32_t qpn, int defer);
struct soft_qp *soft_qp_local_in(struct soft_context *ctx, uint32_t qpn);
void soft_qp_set_state(struct soft_qp *qp, enum ibv_qp_state s);

/* srq limit event check (verbs.c) */
uint64_t soft_srq_posted(const struct soft_srq *srq);
int soft_srq_room(struct soft_srq *srq);
void soft_srq_check_limit(struct soft_srq *srq);
int soft_srq_take(struct soft_srq *srq, struct soft_rwqe *out);

#endif /* SOFTRDMA_H */
