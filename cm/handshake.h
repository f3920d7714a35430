/* SPDX-License-Identifier: MIT */
/* handshake.h -- the versioned private data of connect, accept, reject */
#ifndef RDMAMSG_HANDSHAKE_H
#define RDMAMSG_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

/* version 2 adds F_XFER control messages (rendezvous, request/response:
 * lib/proto.h) and writes with immediate, which a version-1 peer would
 * take for application data.  Version 3 adds the goodbye (W_BYE) of a
 * clean close, a third control credit kept for it, little-endian transfer
 * headers, and the passive side's in-band grant: its accept announces
 * its receive depth, but the active side's credits start at 0 and come
 * in the passive side's first credit update once established. */
#define RDMAMSG_HS_MAGIC     0x524d /* "RM" */
#define RDMAMSG_HS_VERSION   3
#define RDMAMSG_HS_MAX_DEPTH 4096
#define RDMAMSG_HS_LEN	     20 /* fixed part; application bytes follow */
#define RDMAMSG_HS_USER	     32 /* application bytes of a REQ, ACC, REJ */
/* the longest handshake: an accept with a DC sender block (below) */
#define RDMAMSG_HS_MAX                                             \
	(RDMAMSG_HS_LEN + RDMAMSG_HS_DC_LEN + RDMAMSG_HS_DC_USER + \
	 RDMAMSG_HS_DCSRC_MAX)

/*
 * Sessions (issue 15, reconnect-and-replay; version 3, new kinds, which a
 * peer without them refuses as a malformed handshake):
 * - HS_SREQ: a first request that names a session, for the policy
 *   RDMAMSG_FAILOVER_REPLAY: the 8-byte session id at offset 20, then at
 *   most RDMAMSG_HS_SESSION_USER application bytes (the IB CM REQ carries
 *   56 bytes of private data);
 * - HS_RREQ: a reconnect of session sid: the id at 20, then the count of
 *   data fragments the requester received on the session (8 bytes), no
 *   application bytes;
 * - HS_RACC: its accept: the acceptor's count at 20, no application bytes.
 * The counts are implicit sequence numbers: RC delivers every fragment of
 * one connection once and in order, so both sides count the data
 * fragments of the session and replay from the peer's count (lane.h).
 */
enum {
	HS_REQ = 1,
	HS_ACC = 2,
	HS_REJ = 3,
	HS_SREQ = 4,
	HS_RREQ = 5,
	HS_RACC = 6
};

/* A DC connection (lib/lane_dc.c): bit 7 of the kind byte, and a 16-byte
 * block after the fixed part, before the application bytes: the sender's
 * DCT number (4), DC access key (8), endpoint tag (4), big-endian.  Its
 * application bytes are then at most RDMAMSG_HS_DC_USER, so that the REQ
 * stays within 56 bytes.  The session kinds carry it after their session
 * fields (a DC session's new lanes have new tags): HS_SREQ then has at
 * most RDMAMSG_DC_SESSION_USER application bytes, HS_RREQ is 52 bytes,
 * HS_RACC 44. */
#define RDMAMSG_HS_F_DC	   0x80
#define RDMAMSG_HS_DC_LEN  16
#define RDMAMSG_HS_DC_USER (RDMAMSG_HS_USER - RDMAMSG_HS_DC_LEN)

/* DC senders proved (RDMAMSG_HS_CAP_DCSRC, lib/lane_dc.c): every peer of
 * a context learns its DCT's one access key, and an endpoint's tag is no
 * secret, so the receiver checks that a DC message tagged for an
 * endpoint came from one of the DCIs of that endpoint's peer (wc.src_qp,
 * the sending DCI's number, as mlx5 reports it for a DCT's receive).  The
 * accepting side tells its DCIs in its HS_ACC or HS_RACC, and a random
 * 64-bit nonce for the connection: the DC sender block, after the
 * application bytes (a peer from before it reads nothing there, IB pads
 * private data): the nonce (8), the count of the DCIs of its port (1,
 * 1..16), their numbers (3 each), big-endian.  The connecting side,
 * whose request has no room for its DCIs (56 bytes), sends them with
 * the nonce as its lane's first DC message (lane_dc.c: the hello).  Both
 * only where both sides offered the capability. */
#define RDMAMSG_HS_DCSRC_DCIS 16
#define RDMAMSG_HS_DCSRC_MAX  (8 + 1 + 3 * RDMAMSG_HS_DCSRC_DCIS)

/* An APM offer (lib/apm.c): bit 6 of the kind byte, and a 4-byte block
 * after the fixed part and the session fields: the LID of the sender's
 * alternate port (2, big-endian, a unicast LID) and 2 zero bytes.  In any
 * kind but a reject, never with a DC block; the application bytes are
 * then 4 fewer. */
#define RDMAMSG_HS_F_ALT   0x40
#define RDMAMSG_HS_ALT_LEN 4

/* Capabilities (still version 3): in every kind but a reject, the word
 * at offset 16 (a reject's reason) holds the features its sender takes;
 * a peer from before them sends 0 there and reads nothing, so a feature
 * is used only when both sides offered it.  Unknown bits are ignored. */
#define RDMAMSG_HS_CAP_PACK  0x1 /* W_PACK sends (lib/proto.h) */
#define RDMAMSG_HS_CAP_INV   0x2 /* FIN as SEND_WITH_INV (XF_INV, lib/rndv.c) */
#define RDMAMSG_HS_CAP_PIECE 0x4 /* X_PIECE (XF_PIECE, lib/rndv.c) */
#define RDMAMSG_HS_CAP_ALIVE 0x8 /* a W_KEEPALIVE names a clock (lib/proto.h) */
#define RDMAMSG_HS_CAP_DCSRC 0x10 /* DC senders proved (above) */
#define RDMAMSG_HS_CAP_GROW  0x20 /* a growing receive window (below) */

/* The receive window (lib/msg.c grow_window): bits 16 to 28 of the caps
 * word name the most data credits their sender may grant, its window's
 * maximum (its depth at least, RDMAMSG_HS_MAX_DEPTH at most; 0: its
 * depth).  A side that offered RDMAMSG_HS_CAP_GROW takes credits up to
 * the peer's maximum, where one from before it takes the depth only; so
 * a window grows past the depth only toward a peer that offered it. */
#define RDMAMSG_HS_GROW_SHIFT 16
#define RDMAMSG_HS_GROW_MASK  0x1fffu

struct rdmamsg__hs {
	uint8_t version;
	uint8_t kind;
	uint16_t depth;	  /* receive buffers = credits for the peer */
	uint8_t ctl;	  /* control credits */
	uint32_t eager;	  /* receive buffer size */
	uint32_t max_msg; /* largest message accepted */
	uint32_t reason;  /* HS_REJ: application or RDMAMSG_REJECT_* */
	uint32_t caps;	  /* any other kind: RDMAMSG_HS_CAP_* */
	const uint8_t *user;
	uint8_t user_len;
	uint64_t sid;	    /* HS_SREQ, HS_RREQ: the session (not 0) */
	uint64_t delivered; /* HS_RREQ, HS_RACC: data fragments received */
	/* HS_REQ/HS_ACC of a DC connection (RDMAMSG_HS_F_DC) */
	uint8_t dc;
	uint32_t dc_dctn, dc_tag;
	uint64_t dc_key;
	/* HS_ACC/HS_RACC of a DC connection with RDMAMSG_HS_CAP_DCSRC: the
	 * sender block (dc_ndci 0: none) */
	uint64_t dc_nonce;
	uint8_t dc_ndci;
	uint32_t dc_dci[RDMAMSG_HS_DCSRC_DCIS];
	/* an APM offer (RDMAMSG_HS_F_ALT): the alternate port's LID */
	uint16_t alt_lid;
};

/* rdmamsg__hs_encode -- serialize into out (RDMAMSG_HS_MAX bytes) */
size_t rdmamsg__hs_encode(const struct rdmamsg__hs *hs, uint8_t *out);

/* rdmamsg__hs_decode -- parse; 0, or an RDMAMSG_REJECT_* reason */
int rdmamsg__hs_decode(const void *in, size_t len, struct rdmamsg__hs *hs);

#endif /* RDMAMSG_HANDSHAKE_H */
