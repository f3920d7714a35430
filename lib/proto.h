/* SPDX-License-Identifier: MIT */
/*
 * proto.h -- the wire format of rdmamsg's data path, all little-endian:
 * the message header in front of every send, the header of the
 * rendezvous and request/response control messages, and the region export
 * blob.  The handshake's private data (big-endian, as the IB CM carries
 * it) lives in cm/handshake.h.
 *
 * Every value a peer supplies goes through one of the pure checks below
 * before any arithmetic or use as a length or index: no verbs, no
 * sockets, no endpoint state, so that the fuzzers (tests/fuzz) drive
 * exactly what the library runs.
 */
#ifndef RDMAMSG_PROTO_H
#define RDMAMSG_PROTO_H

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * Every message or fragment starts with this header.  credits/ctl return
 * receive buffers to the peer (piggybacked flow control); total is the
 * whole message's length on its first fragment.  W_BYE is the in-band
 * goodbye of a clean close (protocol version 3): a connection that ends
 * without it was reset.
 */
struct rdmamsg__wire {
	uint8_t type;
	uint8_t flags;
	uint16_t credits;
	uint32_t imm;
	uint32_t total;
	uint8_t ctl;
	uint8_t pad[3];
};

_Static_assert(sizeof(struct rdmamsg__wire) == 16, "wire header size");

#define RDMAMSG_HDR ((uint32_t)sizeof(struct rdmamsg__wire))

/*
 * W_PACK (still version 3, sent only to a peer whose handshake offered
 * RDMAMSG_HS_CAP_PACK: an older peer counts it as malformed): several
 * whole messages in one send, each counting as a message of its own at
 * the receiver (on_recv each, in order) while the send takes one
 * receive buffer and one data credit.  The header's flags and imm are 0,
 * total is the count of records (1 .. RDMAMSG_PACK_RECS); the payload is
 * exactly that many records, each a struct rdmamsg__prec and its len
 * bytes, padded with zeros to a multiple of 8 (rdmamsg__prec_span), so
 * that every message starts 8-byte aligned.  A record's len is at most
 * RDMAMSG__PACK_MAX, its flags F_IMM or 0 (no fragment, no transfer-layer
 * message goes packed), imm 0 without F_IMM.  A session (replay) keeps
 * and replays a packed send as the one fragment it is.
 */
enum {
	W_DATA = 1,
	W_CREDIT = 2,
	W_KEEPALIVE = 3,
	W_RTS = 4,
	W_BYE = 5,
	W_PACK = 6
};
/*
 * A W_KEEPALIVE may carry this, and only this (still version 3, sent only
 * to a peer whose handshake offered RDMAMSG_HS_CAP_ALIVE): where its
 * sender's clock is, 8 bytes (8-byte aligned) its event loop rewrites on
 * every pass, readable with rkey, and how often (tick_ms, 0 for never)
 * the sender reads the peer's clock, so that the peer's loop passes at
 * least that often.  The peer reads it (RDMA READ) while it hears
 * nothing: a changed value proves the sender's process alive even when
 * its own sends wait behind long one-sided work (lib/ep.c).
 */
struct rdmamsg__alive_wire {
	uint64_t addr;
	uint32_t rkey;
	uint32_t tick_ms;
};

/* the shortest tick a peer may ask for (a third of the shortest peer
 * timeout, rdmamsg_ep_attr_set_peer_timeout; lib/ep.c asks for a sixth) */
#define RDMAMSG_ALIVE_TICK_MIN 10u

_Static_assert(sizeof(struct rdmamsg__alive_wire) == 16, "alive size");

#define RDMAMSG_ALIVE_LEN ((uint32_t)sizeof(struct rdmamsg__alive_wire))

/* F_XFER: a control message of the rendezvous/request layer */
enum { F_FIRST = 1, F_LAST = 2, F_IMM = 4, F_XFER = 8 };

/* one message of a W_PACK send; its bytes follow */
struct rdmamsg__prec {
	uint16_t len;
	uint8_t flags; /* F_IMM or 0 */
	uint8_t pad;
	uint32_t imm;
};

_Static_assert(sizeof(struct rdmamsg__prec) == 8, "packed record size");

#define RDMAMSG_PREC	  ((uint32_t)sizeof(struct rdmamsg__prec))
#define RDMAMSG_PACK_RECS 128u	/* the most records a W_PACK carries */
#define RDMAMSG__PACK_MAX 1024u /* the longest message packed (rdmamsg.h) */

/* rdmamsg__prec_span -- the bytes a record of len takes in a W_PACK */
static inline uint32_t rdmamsg__prec_span(uint32_t len)
{
	return RDMAMSG_PREC + ((len + 7u) & ~7u);
}

/* rdmamsg__prec_get -- the record at p, in host order */
static inline void rdmamsg__prec_get(const void *p, struct rdmamsg__prec *r)
{
	memcpy(r, p, RDMAMSG_PREC);
	r->len = le16toh(r->len);
	r->imm = le32toh(r->imm);
}

/* rdmamsg__pack_check -- a W_PACK's payload of len bytes, count records
 * (the header's total), before anything of it is delivered: 0, or
 * -EPROTO; each length is checked against what is left before use */
static inline int rdmamsg__pack_check(const void *payload, uint32_t len,
				      uint32_t count)
{
	const uint8_t *p = payload;
	struct rdmamsg__prec r;
	uint32_t i, span;

	if (!count || count > RDMAMSG_PACK_RECS)
		return -EPROTO;
	for (i = 0; i < count; i++) {
		if (len < RDMAMSG_PREC)
			return -EPROTO;
		rdmamsg__prec_get(p, &r);
		if (r.len > RDMAMSG__PACK_MAX || (r.flags & ~F_IMM) || r.pad ||
		    (!(r.flags & F_IMM) && r.imm))
			return -EPROTO;
		span = rdmamsg__prec_span(r.len);
		if (span > len)
			return -EPROTO;
		p += span;
		len -= span;
	}
	return len ? -EPROTO : 0;
}

/* rdmamsg__wire_check -- a received header against the bytes that came
 * (byte_len), our receive buffer size (eager) and whether packing was
 * negotiated (pack): 0, or -EPROTO */
static inline int rdmamsg__wire_check(const struct rdmamsg__wire *h,
				      uint32_t byte_len, uint32_t eager,
				      int pack)
{
	if (byte_len < RDMAMSG_HDR || byte_len - RDMAMSG_HDR > eager)
		return -EPROTO;
	if (h->pad[0] | h->pad[1] | h->pad[2])
		return -EPROTO;
	switch (h->type) {
	case W_DATA:
		if (h->flags & ~(F_FIRST | F_LAST | F_IMM | F_XFER))
			return -EPROTO;
		if ((h->flags & (F_XFER | F_IMM)) == (F_XFER | F_IMM))
			return -EPROTO;
		return 0;
	case W_PACK:
		/* the records themselves: rdmamsg__pack_check */
		if (!pack || h->flags || h->imm || !h->total ||
		    le32toh(h->total) > RDMAMSG_PACK_RECS ||
		    byte_len - RDMAMSG_HDR < RDMAMSG_PREC)
			return -EPROTO;
		return 0;
	case W_KEEPALIVE:
		/* header only, or naming a clock: rdmamsg__alive_check */
		if ((byte_len != RDMAMSG_HDR &&
		     byte_len != RDMAMSG_HDR + RDMAMSG_ALIVE_LEN) ||
		    h->flags || h->imm || h->total)
			return -EPROTO;
		return 0;
	case W_CREDIT:
	case W_BYE:
		/* header only: nothing else is defined */
		if (byte_len != RDMAMSG_HDR || h->flags || h->imm || h->total)
			return -EPROTO;
		return 0;
	default:
		return -EPROTO;
	}
}

/* rdmamsg__alive_check -- a clock named in a W_KEEPALIVE's payload (len
 * bytes), in host order into addr/rkey/tick_ms: 0, or -EPROTO */
static inline int rdmamsg__alive_check(const void *payload, uint32_t len,
				       uint64_t *addr, uint32_t *rkey,
				       uint32_t *tick_ms)
{
	struct rdmamsg__alive_wire w;

	if (len != RDMAMSG_ALIVE_LEN)
		return -EPROTO;
	memcpy(&w, payload, sizeof(w));
	*addr = le64toh(w.addr);
	*rkey = le32toh(w.rkey);
	*tick_ms = le32toh(w.tick_ms);
	if ((*addr & 7) || (*tick_ms && *tick_ms < RDMAMSG_ALIVE_TICK_MIN))
		return -EPROTO;
	return 0;
}

/* rdmamsg__credit_check -- may add credits come on top of have without
 * exceeding max (what the peer ever granted)?  0, or -EPROTO; no
 * arithmetic that can wrap */
static inline int rdmamsg__credit_check(uint32_t have, uint32_t add,
					uint32_t max)
{
	if (have > max || add > max - have)
		return -EPROTO;
	return 0;
}

/* rdmamsg__frag_check -- a first fragment announcing total bytes, with len
 * bytes in it, against the largest message we accept: 0 or -EPROTO */
static inline int rdmamsg__frag_check(uint32_t total, uint32_t len,
				      uint64_t max_msg)
{
	if (total > max_msg || len > total)
		return -EPROTO;
	return 0;
}

/*
 * Control messages of the rendezvous/request layer travel as eager data
 * messages flagged F_XFER: they use data credits and the backlog like any
 * message.  Each starts with this header; a request's or response's
 * payload follows it.
 */
struct rdmamsg__xhdr {
	uint8_t kind;  /* X_* */
	uint8_t inner; /* X_RTS: what the pulled bytes are (X_MSG ...) */
	uint8_t flags; /* X_RTS: XF_*; X_FIN: XF_INV or 0 */
	uint8_t pad;
	int32_t status; /* X_FIN: 0 or the receiver's refusal; X_RTS with
			 * XF_PIECE: the first piece's length */
	uint64_t id;	/* X_RTS/X_FIN/X_PIECE: sender's transfer id */
	uint64_t req;	/* X_REQ/X_RESP, inner X_REQ/X_RESP: request id */
	uint64_t addr;	/* X_RTS, X_PIECE: source */
	uint64_t len;
	uint32_t rkey;
	uint32_t imm;
};

_Static_assert(sizeof(struct rdmamsg__xhdr) == 48, "transfer header size");

#define RDMAMSG_XHDR ((uint32_t)sizeof(struct rdmamsg__xhdr))

enum { X_MSG = 0, X_RTS = 1, X_FIN = 2, X_REQ = 3, X_RESP = 4, X_PIECE = 5 };
/* XF_ORDER: an X_RTS of rdmamsg_send() and friends (or of a request or
 * response): delivered in order with the messages around it, and, up to
 * the negotiated maximum message size, as an eager message would be.
 * XF_INV (only to a peer that offered RDMAMSG_HS_CAP_INV): on an X_RTS,
 * rkey is a type 2 window the FIN is to invalidate; on that X_FIN, it
 * came as IBV_WR_SEND_WITH_INV of rkey (repeated in the FIN's rkey).
 * XF_PIECE (still version 3, only to a peer that offered
 * RDMAMSG_HS_CAP_PIECE): the X_RTS announces len bytes of which only the
 * first status (1 .. len - 1) are readable now, through rkey; each X_PIECE
 * that follows makes the next len bytes readable, at addr (where the one
 * before ended), through a window of its own (rkey), until len is
 * reached.  The sender copies a message in pieces and the receiver reads
 * each while the next is copied (lib/rndv.c).  The FIN invalidates the
 * first window only. */
enum { XF_IMM = 1, XF_ORDER = 2, XF_INV = 4, XF_PIECE = 8 };

/* rdmamsg__xhdr_encode -- x in wire order into out (RDMAMSG_XHDR bytes) */
static inline void rdmamsg__xhdr_encode(const struct rdmamsg__xhdr *x,
					void *out)
{
	struct rdmamsg__xhdr w = *x;

	w.pad = 0;
	w.status = (int32_t)htole32((uint32_t)x->status);
	w.id = htole64(x->id);
	w.req = htole64(x->req);
	w.addr = htole64(x->addr);
	w.len = htole64(x->len);
	w.rkey = htole32(x->rkey);
	w.imm = htole32(x->imm);
	memcpy(out, &w, RDMAMSG_XHDR);
}

/* rdmamsg__xhdr_decode -- parse and check a transfer header of a message
 * of len bytes: 0, or -EPROTO for anything a correct peer never sends */
static inline int rdmamsg__xhdr_decode(const void *in, size_t len,
				       struct rdmamsg__xhdr *x)
{
	if (len < RDMAMSG_XHDR)
		return -EPROTO;
	memcpy(x, in, RDMAMSG_XHDR);
	x->status = (int32_t)le32toh((uint32_t)x->status);
	x->id = le64toh(x->id);
	x->req = le64toh(x->req);
	x->addr = le64toh(x->addr);
	x->len = le64toh(x->len);
	x->rkey = le32toh(x->rkey);
	x->imm = le32toh(x->imm);
	if (x->pad)
		return -EPROTO;
	switch (x->kind) {
	case X_RTS:
		if (len != RDMAMSG_XHDR || !x->len ||
		    (x->flags & ~(XF_IMM | XF_ORDER | XF_INV | XF_PIECE)) ||
		    x->addr + x->len < x->addr)
			return -EPROTO;
		/* a first piece is a part: 1 .. len - 1 bytes */
		if ((x->flags & XF_PIECE)
			    ? x->status <= 0 || (uint64_t)x->status >= x->len
			    : x->status != 0)
			return -EPROTO;
		if (x->inner == X_MSG)
			return x->req ? -EPROTO : 0;
		if (x->inner == X_REQ || x->inner == X_RESP)
			return x->flags & ~(XF_ORDER | XF_INV | XF_PIECE)
				       ? -EPROTO
				       : 0;
		return -EPROTO;
	case X_PIECE:
		/* where it lies in its transfer is the receiver's check */
		if (len != RDMAMSG_XHDR || x->inner || x->flags || x->status ||
		    x->req || x->imm || !x->len || x->addr + x->len < x->addr)
			return -EPROTO;
		return 0;
	case X_FIN:
		/* a refusal is a negative errno */
		if (len != RDMAMSG_XHDR || x->inner || (x->flags & ~XF_INV) ||
		    (!(x->flags & XF_INV) && x->rkey) || x->status > 0 ||
		    x->status < -4095)
			return -EPROTO;
		return 0;
	case X_REQ:
	case X_RESP:
		if (x->inner || x->flags || x->status || x->id || x->addr ||
		    x->len || x->rkey || x->imm)
			return -EPROTO;
		return 0;
	default:
		return -EPROTO;
	}
}

/* The region export blob: "RMX1", access flags, rkey, reserved, address,
 * length. */
#define RDMAMSG_EXPORT_MAGIC 0x31584d52u /* "RMX1" little-endian */
#define RDMAMSG_EXPORT_BYTES 32

/* rdmamsg__export_decode -- parse a peer's export blob of len bytes;
 * access must be within allowed: 0, or -EINVAL */
static inline int rdmamsg__export_decode(const void *buf, size_t len,
					 uint32_t allowed, uint64_t *addr,
					 uint64_t *rlen, uint32_t *rkey,
					 uint32_t *access)
{
	const uint8_t *p = buf;
	uint32_t magic;

	if (!buf || len < RDMAMSG_EXPORT_BYTES)
		return -EINVAL;
	memcpy(&magic, p, 4);
	memcpy(access, p + 4, 4);
	memcpy(rkey, p + 8, 4);
	memcpy(addr, p + 16, 8);
	memcpy(rlen, p + 24, 8);
	*access = le32toh(*access);
	*rkey = le32toh(*rkey);
	*addr = le64toh(*addr);
	*rlen = le64toh(*rlen);
	if (le32toh(magic) != RDMAMSG_EXPORT_MAGIC || (*access & ~allowed) ||
	    !*rlen || *addr + *rlen < *addr)
		return -EINVAL;
	return 0;
}

/*
 * Multicast groups (lib/group.c): every UD datagram to a group starts
 * with this header.  DATA carries one fragment of message seq of
 * publisher pub: total is the whole message's length, off the fragment's
 * place in it (fragments of a message go out in order, back to back).
 * HEARTBEAT (no payload) says that the publisher's next message will be
 * seq: subscribers learn of publishers, and of losses at the tail, from
 * it; MCF_FIN marks the last one, sent as the publisher leaves; with
 * MCF_LOW (reliable mode) seq is instead the oldest message the
 * publisher can still repair.  A reliable publisher's periodic heartbeats
 * carry MCF_ADDR and its unicast address as payload: its GID (16 bytes)
 * and QP number (4), where NAKs and status messages go.
 * Reliable mode, unicast from a subscriber (pub: the subscriber's id) to
 * a publisher, whose id is the 8-byte payload: NAK asks for the messages
 * from seq on again (with MCF_ADDR, the subscriber's unicast address
 * follows the 8 bytes, as in a heartbeat: the repair may come unicast);
 * STATUS says that the subscriber has everything before seq (flow
 * control), total its tag (0: none) for a publisher's tagged flow control.
 * LEAVE (still version 1; flags, total, off 0, seq its position) says
 * that the subscriber closes: the publisher no longer waits for it, at
 * once rather than after the silence that ages a subscriber out (a lost
 * LEAVE still ages out).  Old peers: a publisher from before LEAVE counts
 * one as malformed and drops it (an unknown type), then ages the
 * subscriber out as before.
 * Selective NAK (MCF_SEL, still version 1): total is a count of bits,
 * 1 .. RDMAMSG_MC_NAK_BITS, and a bitmap of (total + 7) / 8 bytes ends the
 * payload (after the id and, with MCF_ADDR, the address): bit i (byte
 * i / 8, bit i % 8, least significant first) set asks for message seq + i
 * again, the others are not asked for; bit 0 is set, the spare bits of
 * the last byte are clear, seq + total does not wrap.  A plain NAK
 * (no MCF_SEL, total 0) asks for everything from seq on (go-back-N).
 * Old peers: a publisher from before MCF_SEL counts a selective NAK as
 * malformed, so a subscriber whose selective NAKs to a publisher brought
 * no repair for half a second (since its first) sends every fourth NAK
 * plain (no flag at all), which every version-1 publisher takes.
 * BATCH (still version 1) carries total whole messages, seq .. seq +
 * total - 1, 1 .. RDMAMSG_MC_BATCH_MAX of them (flags and off 0, seq +
 * total not past UINT64_MAX): per message a 4-byte length (at most the
 * maximum message size) and its bytes, back to back, filling the payload
 * exactly.  A publisher packs small messages published while its
 * earlier datagrams are still in flight; the first one after an idle
 * moment, repairs and messages that do not fit go as DATA.  Old peers: a
 * subscriber from before BATCH counts one as malformed, so it reports
 * its messages lost (default mode) or asks for them again and gets them
 * as DATA (reliable mode); a publisher's batching can be turned off
 * (rdmamsg_group_attr_set_batch) for groups with such subscribers.
 * Bare DATA (still version 1): a message too long for a datagram with
 * this header but not for a bare one (path MTU - 32 < length <= path
 * MTU: 4 KiB on a 4096 MTU) goes alone, without the header, as a SEND
 * with immediate data: the immediate is the low 32 bits of its sequence
 * number (big-endian, as verbs carry it), the rest comes from what the
 * subscriber knows of the sender: the publisher whose last headed
 * datagram came from the same source address (the GRH's) and QP number
 * (rdmamsg__mc_grh_src, rdmamsg__mc_seq).  A publisher is heard of by a
 * headed datagram first: its heartbeat at the join, and every heartbeat
 * period one while it sends bare ones.  Old peers: as for BATCH (a bare
 * datagram is malformed to them; off with rdmamsg_group_attr_set_batch).
 */
struct rdmamsg__mc_wire {
	uint32_t magic; /* RDMAMSG_MC_MAGIC */
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint64_t pub;
	uint64_t seq;
	uint32_t total;
	uint32_t off;
};

_Static_assert(sizeof(struct rdmamsg__mc_wire) == 32, "mc header size");

#define RDMAMSG_MC_HDR	   ((uint32_t)sizeof(struct rdmamsg__mc_wire))
#define RDMAMSG_MC_MAGIC   0x31434d52u /* "RMC1" little-endian */
#define RDMAMSG_MC_VERSION 1
#define RDMAMSG_MC_MAX_MSG (16u << 20)

enum {
	MC_DATA = 1,
	MC_HEARTBEAT = 2,
	MC_NAK = 3,
	MC_STATUS = 4,
	MC_BATCH = 5,
	MC_LEAVE = 6,
};
enum { MCF_FIN = 1, MCF_LOW = 2, MCF_ADDR = 4, MCF_SEL = 8 };
#define RDMAMSG_MC_ADDR	     20	  /* an MCF_ADDR address: GID, QP number */
#define RDMAMSG_MC_NAK_BITS  4096 /* the most a selective NAK's bitmap has */
#define RDMAMSG_MC_BATCH_MAX 1024 /* the most messages a BATCH carries */
#define RDMAMSG_MC_REC	     4	  /* a BATCH message's length field */

/* rdmamsg__mc_rec -- the length of the BATCH message at p (its length
 * field; the bytes follow) */
static inline uint32_t rdmamsg__mc_rec(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

/*
 * rdmamsg__mc_grh_src -- the source address in the 40 bytes a UD receive
 * buffer starts with (untrusted: a peer wrote them) as 16 bytes in src:
 * an InfiniBand or IPv6 GRH's SGID, or for RoCE v2 over IPv4 (the IPv4
 * header in the last 20 bytes) the IPv4-mapped source address.  0, or
 * -EPROTO when neither header is there.
 */
static inline int rdmamsg__mc_grh_src(const uint8_t *grh, uint8_t *src)
{
	static const uint8_t v4[12] = {0, 0, 0, 0, 0,	 0,
				       0, 0, 0, 0, 0xff, 0xff};

	if ((grh[0] >> 4) == 6) {
		memcpy(src, grh + 8, 16);
		return 0;
	}
	if (grh[20] == 0x45) { /* IPv4, no options */
		memcpy(src, v4, 12);
		memcpy(src + 12, grh + 32, 4);
		return 0;
	}
	return -EPROTO;
}

/*
 * rdmamsg__mc_seq -- the sequence number whose low 32 bits are low, the
 * nearest to next (at most 2^31 - 1 before it, 2^31 after): 0 and *seq,
 * or -EPROTO for one before 0 or at UINT64_MAX (no message has it)
 */
static inline int rdmamsg__mc_seq(uint64_t next, uint32_t low, uint64_t *seq)
{
	int32_t d = (int32_t)(low - (uint32_t)next);

	if (d < 0 ? (uint64_t) - (int64_t)d > next
		  : next > UINT64_MAX - 1 - (uint64_t)d)
		return -EPROTO;
	*seq = next + (uint64_t)(int64_t)d;
	return 0;
}

/* rdmamsg__mc_nak_bit -- bit i of a selective NAK's bitmap bm */
static inline int rdmamsg__mc_nak_bit(const uint8_t *bm, uint32_t i)
{
	return (bm[i / 8] >> (i % 8)) & 1;
}

/* rdmamsg__mc_encode -- h in wire order into out (RDMAMSG_MC_HDR bytes) */
static inline void rdmamsg__mc_encode(const struct rdmamsg__mc_wire *h,
				      void *out)
{
	struct rdmamsg__mc_wire w;

	w.magic = htole32(RDMAMSG_MC_MAGIC);
	w.version = RDMAMSG_MC_VERSION;
	w.type = h->type;
	w.flags = htole16(h->flags);
	w.pub = htole64(h->pub);
	w.seq = htole64(h->seq);
	w.total = htole32(h->total);
	w.off = htole32(h->off);
	memcpy(out, &w, sizeof(w));
}

/*
 * rdmamsg__mc_decode -- a datagram of len bytes (after the GRH) into h;
 * max_msg: the largest message we take.  0, or -EPROTO (not ours, or a
 * header that contradicts itself or the length); the payload is the
 * len - RDMAMSG_MC_HDR bytes after the header, at h->off of the message.
 */
static inline int rdmamsg__mc_decode(const void *buf, size_t len,
				     uint32_t max_msg,
				     struct rdmamsg__mc_wire *h)
{
	const uint8_t *bm;
	size_t pay, addr, nb;

	if (!buf || len < RDMAMSG_MC_HDR)
		return -EPROTO;
	memcpy(h, buf, sizeof(*h));
	h->magic = le32toh(h->magic);
	h->flags = le16toh(h->flags);
	h->pub = le64toh(h->pub);
	h->seq = le64toh(h->seq);
	h->total = le32toh(h->total);
	h->off = le32toh(h->off);
	if (h->magic != RDMAMSG_MC_MAGIC || h->version != RDMAMSG_MC_VERSION ||
	    !h->pub)
		return -EPROTO;
	pay = len - RDMAMSG_MC_HDR;
	switch (h->type) {
	case MC_DATA:
		if (h->flags || h->total > max_msg || h->seq == UINT64_MAX)
			return -EPROTO;
		if (!h->total)
			return pay || h->off ? -EPROTO : 0;
		if (!pay || h->off >= h->total || pay > h->total - h->off)
			return -EPROTO;
		return 0;
	case MC_HEARTBEAT:
		if (h->total || h->off ||
		    (h->flags & ~(MCF_FIN | MCF_LOW | MCF_ADDR)))
			return -EPROTO;
		if (pay != ((h->flags & MCF_ADDR) ? RDMAMSG_MC_ADDR : 0))
			return -EPROTO;
		return 0;
	case MC_NAK:
		if (h->off || (h->flags & ~(MCF_ADDR | MCF_SEL)))
			return -EPROTO;
		addr = (h->flags & MCF_ADDR) ? RDMAMSG_MC_ADDR : 0u;
		if (!(h->flags & MCF_SEL))
			return h->total || pay != 8 + addr ? -EPROTO : 0;
		/* the count first, then the length it implies */
		if (!h->total || h->total > RDMAMSG_MC_NAK_BITS ||
		    h->seq > UINT64_MAX - h->total)
			return -EPROTO;
		nb = (h->total + 7) / 8;
		if (pay != 8 + addr + nb)
			return -EPROTO;
		bm = (const uint8_t *)buf + RDMAMSG_MC_HDR + 8 + addr;
		if (!(bm[0] & 1) ||
		    (h->total % 8 && (bm[nb - 1] >> (h->total % 8))))
			return -EPROTO;
		return 0;
	case MC_STATUS: /* a status message's total is its sender's tag */
		if (h->off || h->flags || pay != 8)
			return -EPROTO;
		return 0;
	case MC_LEAVE:
		if (h->off || h->flags || h->total || pay != 8)
			return -EPROTO;
		return 0;
	case MC_BATCH: {
		const uint8_t *r = (const uint8_t *)buf + RDMAMSG_MC_HDR;
		uint32_t i, n;

		if (h->off || h->flags || !h->total ||
		    h->total > RDMAMSG_MC_BATCH_MAX ||
		    h->seq > UINT64_MAX - h->total)
			return -EPROTO;
		/* each length before it is used, then the bytes it names */
		for (i = 0; i < h->total; i++) {
			if (pay < RDMAMSG_MC_REC)
				return -EPROTO;
			n = rdmamsg__mc_rec(r);
			pay -= RDMAMSG_MC_REC;
			if (n > max_msg || n > pay)
				return -EPROTO;
			pay -= n;
			r += RDMAMSG_MC_REC + n;
		}
		return pay ? -EPROTO : 0;
	}
	default:
		return -EPROTO;
	}
}

#endif /* RDMAMSG_PROTO_H */
