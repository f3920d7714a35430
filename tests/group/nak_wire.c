/* SPDX-License-Identifier: MIT */
/*
 * nak_wire.c -- a selective NAK's wire form (lib/proto.h,
 * rdmamsg__mc_decode): what a subscriber sends is accepted, with its
 * bitmap where lib/group.c reads it; every malformed one (a count of 0 or
 * above RDMAMSG_MC_NAK_BITS, a length that does not match the count, the
 * first bit clear, a spare bit set, seq + count wrapping, MCF_SEL where
 * only NAKs have it) is refused, before anything is read past the
 * datagram.  The plain and address-carrying NAKs of older peers are still
 * accepted.  A BATCH of whole messages: accepted as a publisher packs it,
 * each malformed one (a count of 0 or above RDMAMSG_MC_BATCH_MAX, a
 * length past the datagram or above the maximum, bytes left over, seq +
 * count past the last sequence number, a flag or an offset) refused.
 * A bare datagram's sender and sequence number: the source address of an
 * IPv6 (or InfiniBand) GRH and of RoCE v2's IPv4 header, none from 40
 * bytes that are neither; the sequence number nearest the expected one,
 * across a 2^32 boundary either way, none before 0 or at UINT64_MAX.
 * A subscriber's LEAVE: accepted with exactly the id, refused with a
 * flag, a count or another length; a type unknown yet refused.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "proto.h"

static uint8_t
	d[RDMAMSG_MC_HDR + 8 + RDMAMSG_MC_ADDR + RDMAMSG_MC_NAK_BITS / 8 + 8];

/* nak -- a NAK of type with flags, seq, total and a payload of the id,
 * the address (MCF_ADDR) and nb bitmap bytes (bm, or zeros): its length */
static size_t nak(int type, uint16_t flags, uint64_t seq, uint32_t total,
		  const uint8_t *bm, size_t nb)
{
	struct rdmamsg__mc_wire h;
	size_t len = RDMAMSG_MC_HDR + 8;
	uint64_t to = htole64(42);

	memset(d, 0, sizeof(d));
	memset(&h, 0, sizeof(h));
	h.type = (uint8_t)type;
	h.flags = flags;
	h.pub = 7;
	h.seq = seq;
	h.total = total;
	rdmamsg__mc_encode(&h, d);
	memcpy(d + RDMAMSG_MC_HDR, &to, 8);
	if (flags & MCF_ADDR) {
		memset(d + len, 0xa5, RDMAMSG_MC_ADDR);
		len += RDMAMSG_MC_ADDR;
	}
	if (bm)
		memcpy(d + len, bm, nb);
	return len + nb;
}

static int dec(size_t len, struct rdmamsg__mc_wire *h)
{
	return rdmamsg__mc_decode(d, len, 65536, h);
}

/* batch -- a BATCH of n messages (lens[i] bytes of 'a' + i), seq, flags
 * and off as given, total: count: its length */
static size_t batch(uint64_t seq, uint32_t count, uint16_t flags, uint32_t off,
		    const uint32_t *lens, uint32_t n)
{
	struct rdmamsg__mc_wire h;
	size_t len = RDMAMSG_MC_HDR;
	uint32_t i, v;

	memset(d, 0, sizeof(d));
	memset(&h, 0, sizeof(h));
	h.type = MC_BATCH;
	h.flags = flags;
	h.pub = 7;
	h.seq = seq;
	h.total = count;
	h.off = off;
	rdmamsg__mc_encode(&h, d);
	for (i = 0; i < n; i++) {
		v = htole32(lens[i]);
		memcpy(d + len, &v, 4);
		len += 4;
		if (lens[i] <= 64)
			memset(d + len, 'a' + (int)i, lens[i]);
		len += lens[i] <= 64 ? lens[i] : 0;
	}
	return len;
}

/* batches -- a BATCH accepted as packed, each malformed one refused */
static void batches(void)
{
	const uint32_t three[] = {8, 0, 64}, big[] = {65537}, one[] = {5};
	struct rdmamsg__mc_wire h;
	const uint8_t *r;
	size_t len;

	len = batch(100, 3, 0, 0, three, 3);
	ok(!dec(len, &h) && h.type == MC_BATCH && h.seq == 100 && h.total == 3,
	   "a batch of 3 messages (8, 0, 64 bytes): accepted");
	r = d + RDMAMSG_MC_HDR;
	ok(rdmamsg__mc_rec(r) == 8 && r[4] == 'a' &&
		   rdmamsg__mc_rec(r + 12) == 0 &&
		   rdmamsg__mc_rec(r + 16) == 64 && r[20] == 'c' &&
		   r[83] == 'c' && len == RDMAMSG_MC_HDR + 84,
	   "its messages where lib/group.c reads them");
	len = batch(UINT64_MAX - 3, 3, 0, 0, three, 3);
	ok(!dec(len, &h), "a batch ending just below UINT64_MAX: accepted");
	len = batch(7, 1, 0, 0, one, 1);
	ok(!dec(len, &h) && h.total == 1, "a batch of one: accepted");

	len = batch(100, 0, 0, 0, NULL, 0);
	ok(dec(len, &h) == -EPROTO, "a batch of 0: -EPROTO");
	len = batch(100, RDMAMSG_MC_BATCH_MAX + 1, 0, 0, three, 3);
	ok(dec(len, &h) == -EPROTO, "a count above %u: -EPROTO",
	   RDMAMSG_MC_BATCH_MAX);
	len = batch(100, 4, 0, 0, three, 3);
	ok(dec(len, &h) == -EPROTO, "a count above the messages: -EPROTO");
	len = batch(100, 2, 0, 0, three, 3);
	ok(dec(len, &h) == -EPROTO, "bytes after the last message: -EPROTO");
	len = batch(100, 3, 0, 0, three, 3);
	ok(dec(len - 1, &h) == -EPROTO, "the last message cut: -EPROTO");
	len = batch(100, 3, 0, 0, three, 3);
	ok(dec(RDMAMSG_MC_HDR + 2, &h) == -EPROTO,
	   "a length field cut: -EPROTO");
	len = batch(100, 1, 0, 0, big, 1);
	ok(dec(len, &h) == -EPROTO,
	   "a length above the maximum (and past the datagram): -EPROTO");
	len = batch(UINT64_MAX - 2, 3, 0, 0, three, 3);
	ok(dec(len, &h) == -EPROTO,
	   "a batch reaching UINT64_MAX (or wrapping): -EPROTO");
	len = batch(100, 3, MCF_FIN, 0, three, 3);
	ok(dec(len, &h) == -EPROTO, "a flag: -EPROTO");
	len = batch(100, 3, 0, 8, three, 3);
	ok(dec(len, &h) == -EPROTO, "an offset: -EPROTO");
}

/* bare -- what a subscriber takes of a bare datagram (lib/proto.h) */
static void bare(void)
{
	static const uint8_t v4[16] = {0, 0, 0,	   0,	 0,  0,	  0, 0,
				       0, 0, 0xff, 0xff, 10, 231, 0, 1};
	uint8_t grh[40], src[16];
	uint64_t seq = 1;

	memset(grh, 0, sizeof(grh));
	grh[0] = 0x60;
	memset(grh + 8, 0xfe, 16);
	memset(grh + 24, 0xff, 16);
	ok(!rdmamsg__mc_grh_src(grh, src) && src[0] == 0xfe && src[15] == 0xfe,
	   "an IPv6 GRH: its source GID");
	memset(grh, 0, sizeof(grh));
	grh[20] = 0x45;
	memcpy(grh + 32, "\x0a\xe7\x00\x01", 4);
	memcpy(grh + 36, "\xef\x01\x02\x03", 4);
	ok(!rdmamsg__mc_grh_src(grh, src) && !memcmp(src, v4, 16),
	   "RoCE v2 over IPv4: the IPv4-mapped source address");
	memset(grh, 0, sizeof(grh));
	ok(rdmamsg__mc_grh_src(grh, src) == -EPROTO, "40 zero bytes: -EPROTO");
	grh[0] = 0x45;
	ok(rdmamsg__mc_grh_src(grh, src) == -EPROTO,
	   "an IPv4 header where the GRH starts: -EPROTO");

	ok(!rdmamsg__mc_seq(100, 100, &seq) && seq == 100,
	   "the sequence number expected");
	ok(!rdmamsg__mc_seq(100, 130, &seq) && seq == 130 &&
		   !rdmamsg__mc_seq(100, 70, &seq) && seq == 70,
	   "one after it, one before it");
	ok(!rdmamsg__mc_seq(0xfffffff0ull, 5, &seq) && seq == 0x100000005ull,
	   "after a 2^32 boundary");
	ok(!rdmamsg__mc_seq(0x100000005ull, 0xfffffff0u, &seq) &&
		   seq == 0xfffffff0ull,
	   "before a 2^32 boundary");
	ok(rdmamsg__mc_seq(5, 0xfffffff0u, &seq) == -EPROTO &&
		   seq == 0xfffffff0ull,
	   "one before 0: -EPROTO, nothing written");
	ok(rdmamsg__mc_seq(UINT64_MAX - 1, (uint32_t)UINT64_MAX, &seq) ==
		   -EPROTO,
	   "UINT64_MAX: -EPROTO");
	ok(!rdmamsg__mc_seq(UINT64_MAX - 1, (uint32_t)(UINT64_MAX - 1), &seq) &&
		   seq == UINT64_MAX - 1,
	   "the last sequence number: accepted");
}

int main(void)
{
	const uint8_t bm10[2] = {0x05, 0x02}; /* bits 0, 2, 9 of 10 */
	struct rdmamsg__mc_wire h;
	uint8_t big[RDMAMSG_MC_NAK_BITS / 8 + 1];
	const uint8_t *bm;
	size_t len;

	len = nak(MC_NAK, MCF_SEL | MCF_ADDR, 100, 10, bm10, 2);
	ok(!dec(len, &h) && h.seq == 100 && h.total == 10 &&
		   h.flags == (MCF_SEL | MCF_ADDR),
	   "a selective NAK with an address: accepted");
	bm = d + RDMAMSG_MC_HDR + 8 + RDMAMSG_MC_ADDR;
	ok(rdmamsg__mc_nak_bit(bm, 0) && !rdmamsg__mc_nak_bit(bm, 1) &&
		   rdmamsg__mc_nak_bit(bm, 2) && rdmamsg__mc_nak_bit(bm, 9) &&
		   !rdmamsg__mc_nak_bit(bm, 8),
	   "its bitmap: messages 100, 102 and 109 asked for");
	len = nak(MC_NAK, MCF_SEL, 5, 1, (const uint8_t *)"\1", 1);
	ok(!dec(len, &h) && h.total == 1, "one bit, no address: accepted");
	memset(big, 0, sizeof(big));
	big[0] = 1;
	len = nak(MC_NAK, MCF_SEL, UINT64_MAX - RDMAMSG_MC_NAK_BITS,
		  RDMAMSG_MC_NAK_BITS, big, RDMAMSG_MC_NAK_BITS / 8);
	ok(!dec(len, &h),
	   "%u bits ending at the last sequence number: "
	   "accepted",
	   RDMAMSG_MC_NAK_BITS);

	/* malformed: refused */
	len = nak(MC_NAK, MCF_SEL, 5, 0, NULL, 0);
	ok(dec(len, &h) == -EPROTO, "a count of 0: -EPROTO");
	len = nak(MC_NAK, MCF_SEL, 5, RDMAMSG_MC_NAK_BITS + 1, big,
		  sizeof(big));
	ok(dec(len, &h) == -EPROTO, "a count above %u: -EPROTO",
	   RDMAMSG_MC_NAK_BITS);
	len = nak(MC_NAK, MCF_SEL, 5, 0xffffffffu, big, sizeof(big));
	ok(dec(len, &h) == -EPROTO,
	   "a count of 2^32 - 1 (its byte count would wrap): -EPROTO");
	len = nak(MC_NAK, MCF_SEL | MCF_ADDR, 100, 10, bm10, 1);
	ok(dec(len, &h) == -EPROTO, "a bitmap shorter than its count: -EPROTO");
	len = nak(MC_NAK, MCF_SEL | MCF_ADDR, 100, 10, big, 3);
	ok(dec(len, &h) == -EPROTO, "a bitmap longer than its count: -EPROTO");
	len = nak(MC_NAK, MCF_SEL, 100, 10, bm10, 2);
	ok(dec(len + RDMAMSG_MC_ADDR, &h) == -EPROTO,
	   "an address without MCF_ADDR: -EPROTO");
	len = nak(MC_NAK, MCF_SEL, 100, 10, (const uint8_t *)"\4\2", 2);
	ok(dec(len, &h) == -EPROTO, "the first bit clear: -EPROTO");
	len = nak(MC_NAK, MCF_SEL, 100, 10, (const uint8_t *)"\1\4", 2);
	ok(dec(len, &h) == -EPROTO, "a spare bit set: -EPROTO");
	len = nak(MC_NAK, MCF_SEL, UINT64_MAX - 9, 10, bm10, 2);
	ok(dec(len, &h) == -EPROTO, "seq + count wrapping: -EPROTO");
	len = nak(MC_NAK, MCF_SEL | 0x10, 100, 10, bm10, 2);
	ok(dec(len, &h) == -EPROTO, "an unknown flag: -EPROTO");
	len = nak(MC_STATUS, MCF_SEL, 100, 0, NULL, 0);
	ok(dec(len, &h) == -EPROTO, "MCF_SEL on a status message: -EPROTO");
	len = nak(MC_NAK, 0, 100, 10, NULL, 0);
	ok(dec(len, &h) == -EPROTO, "a count on a plain NAK: -EPROTO");

	/* older peers' NAKs */
	len = nak(MC_NAK, 0, 100, 0, NULL, 0);
	ok(!dec(len, &h) && !h.flags, "a plain NAK: accepted");
	len = nak(MC_NAK, MCF_ADDR, 100, 0, NULL, 0);
	ok(!dec(len, &h) && h.flags == MCF_ADDR,
	   "an address-carrying NAK: accepted");
	len = nak(MC_STATUS, 0, 100, 3, NULL, 0);
	ok(!dec(len, &h) && h.total == 3, "a status message (tag 3): accepted");

	/* a subscriber's goodbye */
	len = nak(MC_LEAVE, 0, 100, 0, NULL, 0);
	ok(!dec(len, &h) && h.type == MC_LEAVE && h.seq == 100 && h.pub == 7,
	   "a LEAVE: accepted");
	len = nak(MC_LEAVE, MCF_ADDR, 100, 0, NULL, 0);
	ok(dec(len, &h) == -EPROTO, "a LEAVE with a flag: -EPROTO");
	len = nak(MC_LEAVE, 0, 100, 3, NULL, 0);
	ok(dec(len, &h) == -EPROTO, "a LEAVE with a count: -EPROTO");
	len = nak(MC_LEAVE, 0, 100, 0, NULL, 0);
	ok(dec(len - 1, &h) == -EPROTO && dec(len + 1, &h) == -EPROTO,
	   "a LEAVE without exactly the id as payload: -EPROTO");
	len = nak(MC_LEAVE + 1, 0, 100, 0, NULL, 0);
	ok(dec(len, &h) == -EPROTO, "a type after LEAVE: -EPROTO (unknown)");
	batches();
	bare();
	return done_testing();
}
