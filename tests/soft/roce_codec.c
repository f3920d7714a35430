// SPDX-License-Identifier: MIT
/*
 * roce_codec.c -- the RoCE v2 codec (soft/roce.c) against known answers:
 * header bytes written by hand from the IBA layout, an ICRC computed by an
 * independent CRC-32 (Python's zlib over the masked pseudo header), every
 * opcode encoded and decoded back, hostile inputs refused, segmentation.
 *
 * With --pcap FILE it writes, instead, an Ethernet/IP/UDP 4791 capture
 * with one packet of every opcode and header kind (IPv4 and IPv6), and
 * one last packet whose ICRC is deliberately wrong, for
 * tests/soft/roce_tshark.sh; one line per packet on stdout: "N OPCODE PSN
 * GOOD|BAD", and the XRC SRQ number after an XRC request's.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "roce.h"
#include "tap.h"

static uint8_t payload[ROCE_MAX_PMTU];

/* every opcode we speak, one of each */
static const uint8_t all_ops[] = {
	ROCE_RC | ROCE_SEND_FIRST,	 ROCE_RC | ROCE_SEND_MIDDLE,
	ROCE_RC | ROCE_SEND_LAST,	 ROCE_RC | ROCE_SEND_LAST_IMM,
	ROCE_RC | ROCE_SEND_ONLY,	 ROCE_RC | ROCE_SEND_ONLY_IMM,
	ROCE_RC | ROCE_SEND_LAST_INV,	 ROCE_RC | ROCE_SEND_ONLY_INV,
	ROCE_RC | ROCE_WRITE_FIRST,	 ROCE_RC | ROCE_WRITE_MIDDLE,
	ROCE_RC | ROCE_WRITE_LAST,	 ROCE_RC | ROCE_WRITE_LAST_IMM,
	ROCE_RC | ROCE_WRITE_ONLY,	 ROCE_RC | ROCE_WRITE_ONLY_IMM,
	ROCE_RC | ROCE_READ_REQ,	 ROCE_RC | ROCE_READ_RESP_FIRST,
	ROCE_RC | ROCE_READ_RESP_MIDDLE, ROCE_RC | ROCE_READ_RESP_LAST,
	ROCE_RC | ROCE_READ_RESP_ONLY,	 ROCE_RC | ROCE_ACK,
	ROCE_RC | ROCE_ATOMIC_ACK,	 ROCE_RC | ROCE_CMP_SWAP,
	ROCE_RC | ROCE_FETCH_ADD,	 ROCE_RC | ROCE_ATOMIC_WRITE,
	ROCE_UC | ROCE_SEND_FIRST,	 ROCE_UC | ROCE_SEND_MIDDLE,
	ROCE_UC | ROCE_SEND_LAST,	 ROCE_UC | ROCE_SEND_LAST_IMM,
	ROCE_UC | ROCE_SEND_ONLY,	 ROCE_UC | ROCE_SEND_ONLY_IMM,
	ROCE_UC | ROCE_WRITE_FIRST,	 ROCE_UC | ROCE_WRITE_MIDDLE,
	ROCE_UC | ROCE_WRITE_LAST,	 ROCE_UC | ROCE_WRITE_LAST_IMM,
	ROCE_UC | ROCE_WRITE_ONLY,	 ROCE_UC | ROCE_WRITE_ONLY_IMM,
	ROCE_UD | ROCE_SEND_ONLY,	 ROCE_UD | ROCE_SEND_ONLY_IMM,
};
#define NOPS (sizeof(all_ops) / sizeof(all_ops[0]))

/* XRC's (IBA 9.2 table 38, 101xxxxx): RC's operations but ATOMIC_WRITE */
static const uint8_t xrc_ops[] = {
	ROCE_XRC | ROCE_SEND_FIRST,	  ROCE_XRC | ROCE_SEND_MIDDLE,
	ROCE_XRC | ROCE_SEND_LAST,	  ROCE_XRC | ROCE_SEND_LAST_IMM,
	ROCE_XRC | ROCE_SEND_ONLY,	  ROCE_XRC | ROCE_SEND_ONLY_IMM,
	ROCE_XRC | ROCE_SEND_LAST_INV,	  ROCE_XRC | ROCE_SEND_ONLY_INV,
	ROCE_XRC | ROCE_WRITE_FIRST,	  ROCE_XRC | ROCE_WRITE_MIDDLE,
	ROCE_XRC | ROCE_WRITE_LAST,	  ROCE_XRC | ROCE_WRITE_LAST_IMM,
	ROCE_XRC | ROCE_WRITE_ONLY,	  ROCE_XRC | ROCE_WRITE_ONLY_IMM,
	ROCE_XRC | ROCE_READ_REQ,	  ROCE_XRC | ROCE_READ_RESP_FIRST,
	ROCE_XRC | ROCE_READ_RESP_MIDDLE, ROCE_XRC | ROCE_READ_RESP_LAST,
	ROCE_XRC | ROCE_READ_RESP_ONLY,	  ROCE_XRC | ROCE_ACK,
	ROCE_XRC | ROCE_ATOMIC_ACK,	  ROCE_XRC | ROCE_CMP_SWAP,
	ROCE_XRC | ROCE_FETCH_ADD,
};
#define NXOPS (sizeof(xrc_ops) / sizeof(xrc_ops[0]))

/* a packet of OPCODE with every field it carries set to something */
static void sample(struct roce_pkt *p, uint8_t opcode, uint32_t n)
{
	unsigned int fl = roce_op_flags(opcode);

	memset(p, 0, sizeof(*p));
	p->bth.opcode = opcode;
	p->bth.se = (fl & ROCE_F_LAST) && (fl & ROCE_F_REQ);
	p->bth.ackreq = (fl & ROCE_F_LAST) && (fl & ROCE_F_REQ);
	p->bth.pkey = ROCE_DEFAULT_PKEY;
	p->bth.dqpn = 0x11 + n;
	p->bth.psn = (0xfffff0 + n * 3) & ROCE_PSN_MASK;
	p->deth.qkey = 0x11111111;
	p->deth.sqpn = 0x22;
	p->xrc_srqn = 0xa5a5a5 - n;
	p->reth.va = 0x00007f0012345678ull;
	p->reth.rkey = 0xabcd;
	p->reth.len = 8192;
	p->atmeth.va = 0x00007f0012340000ull;
	p->atmeth.rkey = 0xabce;
	p->atmeth.swap_add = 0x0102030405060708ull;
	p->atmeth.compare = 0x1112131415161718ull;
	p->aeth.syndrome = ROCE_AETH_ACK | 0x1f;
	p->aeth.msn = 0x000100 + n;
	p->atmack = 0x2122232425262728ull;
	p->imm = 0xdeadbeef;
	p->ieth = 0xabcf;
	if (fl & ROCE_F_PAYLOAD) {
		/* first and middle packets are full: use a 256-byte MTU */
		p->payload = payload;
		p->payload_len = (fl & ROCE_F_LAST) ? 1 + n % 7 : 256;
		if (opcode == (ROCE_RC | ROCE_ATOMIC_WRITE)) {
			p->payload_len = 8; /* its one size */
			p->reth.len = 8;
		}
	}
}

static int same(const struct roce_pkt *a, const struct roce_pkt *b)
{
	unsigned int fl = roce_op_flags(a->bth.opcode);
	const struct roce_bth *x = &a->bth, *y = &b->bth;

	if (x->opcode != y->opcode || x->se != y->se ||
	    x->migreq != y->migreq || x->pkey != y->pkey ||
	    x->dqpn != y->dqpn || x->psn != y->psn || x->ackreq != y->ackreq ||
	    x->fecn != y->fecn || x->becn != y->becn ||
	    a->payload_len != b->payload_len)
		return 0;
	if ((fl & ROCE_F_DETH) && memcmp(&a->deth, &b->deth, sizeof(a->deth)))
		return 0;
	if ((fl & ROCE_F_XRCETH) && a->xrc_srqn != b->xrc_srqn)
		return 0;
	if ((fl & ROCE_F_RETH) && memcmp(&a->reth, &b->reth, sizeof(a->reth)))
		return 0;
	if ((fl & ROCE_F_ATMETH) &&
	    (a->atmeth.va != b->atmeth.va || a->atmeth.rkey != b->atmeth.rkey ||
	     a->atmeth.swap_add != b->atmeth.swap_add ||
	     a->atmeth.compare != b->atmeth.compare))
		return 0;
	if ((fl & ROCE_F_AETH) && (a->aeth.syndrome != b->aeth.syndrome ||
				   a->aeth.msn != b->aeth.msn))
		return 0;
	if ((fl & ROCE_F_ATMACK) && a->atmack != b->atmack)
		return 0;
	if ((fl & ROCE_F_IMMDT) && a->imm != b->imm)
		return 0;
	if ((fl & ROCE_F_IETH) && a->ieth != b->ieth)
		return 0;
	return !a->payload_len ||
	       !memcmp(a->payload, b->payload, a->payload_len);
}

static void test_known_bytes(void)
{
	/* RC SEND_ONLY_IMM, SE, pad 1, pkey ffff, QP 0x000011, AckReq, PSN
	 * 0x123456; ImmDt deadbeef; 3 payload bytes */
	static const uint8_t want[] = {
		0x05, 0x90, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11,
		0x80, 0x12, 0x34, 0x56, 0xde, 0xad, 0xbe, 0xef,
		'a',  'b',  'c',  0x00, 0x00, 0x00, 0x00, 0x00,
	};
	/* RC RDMA WRITE_ONLY: RETH va, rkey, len */
	static const uint8_t want_reth[] = {
		0x0a, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x00,
		0x00, 0x00, 0x07, 0x00, 0x00, 0x7f, 0x00, 0x12, 0x34,
		0x56, 0x78, 0x00, 0x00, 0xab, 0xcd, 0x00, 0x00, 0x00,
		0x04, 'w',  'x',  'y',	'z',  0,    0,	  0,	0,
	};
	/* RC RNR NAK (timer 14), MSN 5: AETH 0x2e000005 */
	static const uint8_t want_rnr[] = {
		0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x13, 0x00, 0x00,
		0x00, 0x09, 0x2e, 0x00, 0x00, 0x05, 0,	  0,	0,    0,
	};
	/* UD SEND_ONLY: DETH qkey 0x11111111, src QP 0x000022 */
	static const uint8_t want_ud[] = {
		0x64, 0x20, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
		0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x22,
		'u',  'd',  0x00, 0x00, 0,    0,    0,	  0,
	};
	/* RC ATOMIC_WRITE (0x1d, rxe's IB_OPCODE_RC_ATOMIC_WRITE), AckReq:
	 * RETH va, rkey, len 8, then the 8 bytes, no pad */
	static const uint8_t want_aw[] = {
		0x1d, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x14, 0x80, 0x00,
		0x00, 0x0b, 0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x56, 0x78,
		0x00, 0x00, 0xab, 0xcd, 0x00, 0x00, 0x00, 0x08, 1,    2,
		3,    4,    5,	  6,	7,    8,    0,	  0,	0,    0,
	};
	struct roce_pkt p, d;
	uint8_t buf[128];
	ssize_t n;

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC | ROCE_SEND_ONLY_IMM;
	p.bth.se = 1;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 0x11;
	p.bth.ackreq = 1;
	p.bth.psn = 0x123456;
	p.imm = 0xdeadbeef;
	p.payload = (const uint8_t *)"abc";
	p.payload_len = 3;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want) && !memcmp(buf, want, sizeof(want)),
	   "SEND_ONLY_IMM: bytes as the IBA lays them out (%zd)", n);
	ok(roce_decode(want, sizeof(want), &d) == 0 && d.bth.pad == 1 &&
		   d.payload_len == 3 && !memcmp(d.payload, "abc", 3) &&
		   d.imm == 0xdeadbeef && d.bth.psn == 0x123456 && d.bth.se &&
		   d.bth.ackreq && d.bth.dqpn == 0x11,
	   "SEND_ONLY_IMM: decoded back");

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC | ROCE_WRITE_ONLY;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 0x12;
	p.bth.psn = 7;
	p.reth.va = 0x00007f0012345678ull;
	p.reth.rkey = 0xabcd;
	p.reth.len = 4;
	p.payload = (const uint8_t *)"wxyz";
	p.payload_len = 4;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want_reth) && !memcmp(buf, want_reth, sizeof(want_reth)),
	   "WRITE_ONLY: RETH bytes");

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC | ROCE_ACK;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 0x13;
	p.bth.psn = 9;
	p.aeth.syndrome = ROCE_AETH_RNR_NAK | 14;
	p.aeth.msn = 5;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want_rnr) && !memcmp(buf, want_rnr, sizeof(want_rnr)),
	   "RNR NAK: AETH bytes");
	ok(roce_decode(want_rnr, sizeof(want_rnr), &d) == 0 &&
		   roce_aeth_type(d.aeth.syndrome) == ROCE_AETH_RNR_NAK &&
		   roce_aeth_value(d.aeth.syndrome) == 14 && d.aeth.msn == 5,
	   "RNR NAK: type and timer decoded");

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_UD | ROCE_SEND_ONLY;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 1;
	p.deth.qkey = 0x11111111;
	p.deth.sqpn = 0x22;
	p.payload = (const uint8_t *)"ud";
	p.payload_len = 2;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want_ud) && !memcmp(buf, want_ud, sizeof(want_ud)),
	   "UD SEND_ONLY: DETH bytes, pad 2 %s",
	   n > 1 && buf[1] == 0x20 ? "in BTH" : "MISSING");
	/* the DETH's reserved byte: the IB mode's SL 5 and LNH local */
	p.deth.resv = ROCE_DETH_IB_LOCAL | 5;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want_ud) && buf[16] == 0x15 && buf[17] == 0 &&
		   !memcmp(buf + 18, want_ud + 18, sizeof(want_ud) - 18) &&
		   roce_decode(buf, (size_t)n, &d) == 0 &&
		   d.deth.resv == 0x15 && d.deth.sqpn == 0x22 &&
		   roce_decode(want_ud, sizeof(want_ud), &d) == 0 &&
		   d.deth.resv == 0,
	   "UD SEND_ONLY: the DETH's reserved byte (IB mode: SL, no GRH) "
	   "in byte 4 of the DETH, decoded apart from the source QP");

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC | ROCE_ATOMIC_WRITE;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 0x14;
	p.bth.ackreq = 1;
	p.bth.psn = 11;
	p.reth.va = 0x00007f0012345678ull;
	p.reth.rkey = 0xabcd;
	p.reth.len = 8;
	p.payload = (const uint8_t *)"\1\2\3\4\5\6\7\10";
	p.payload_len = 8;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want_aw) && !memcmp(buf, want_aw, sizeof(want_aw)),
	   "ATOMIC_WRITE: opcode 0x1d, RETH and 8 bytes (%zd)", n);
	ok(roce_decode(want_aw, sizeof(want_aw), &d) == 0 &&
		   d.reth.va == 0x00007f0012345678ull &&
		   d.reth.rkey == 0xabcd && d.reth.len == 8 &&
		   d.payload_len == 8 &&
		   !memcmp(d.payload, "\1\2\3\4\5\6\7\10", 8) &&
		   !strcmp(roce_op_name(d.bth.opcode), "ATOMIC_WRITE") &&
		   (roce_op_flags(ROCE_UC | ROCE_ATOMIC_WRITE) == 0),
	   "ATOMIC_WRITE: decoded back; RC only");
}

/*
 * IPv4 ICRC known answer.  The reference value was computed outside this
 * code with Python's zlib: ~crc32(ff*8 + masked IP/UDP/BTH + rest) over
 * the packet below, whose IP header has TOS 0, TTL 64, id 0, DF.
 */
#define ROCE_TEST_ICRC_V4 0x30b4290eu

static void test_icrc_known(void)
{
	static const uint8_t hdr[] = {
		/* IPv4: 10.231.0.1 -> 10.231.0.2, total 20+8+12+4+4 = 48 */
		0x45,
		0x00,
		0x00,
		0x30,
		0x00,
		0x00,
		0x40,
		0x00,
		0x40,
		0x11,
		0x00,
		0x00,
		10,
		231,
		0,
		1,
		10,
		231,
		0,
		2,
		/* UDP 49152 -> 4791, length 28, checksum 0 */
		0xc0,
		0x00,
		0x12,
		0xb7,
		0x00,
		0x1c,
		0x00,
		0x00,
		/* BTH RC SEND_ONLY QP 0x11 PSN 0x123456 AckReq */
		0x04,
		0x00,
		0xff,
		0xff,
		0x00,
		0x00,
		0x00,
		0x11,
		0x80,
		0x12,
		0x34,
		0x56,
		/* payload */
		'p',
		'i',
		'n',
		'g',
		/* ICRC */
		0,
		0,
		0,
		0,
	};
	uint8_t pkt[sizeof(hdr)];
	uint32_t icrc = 0;

	memcpy(pkt, hdr, sizeof(hdr));
	ok(roce_icrc_calc(pkt, sizeof(pkt), &icrc) == 0, "ICRC computed");
	ok(icrc == ROCE_TEST_ICRC_V4,
	   "ICRC of an IPv4 packet: %08x (want %08x)", icrc, ROCE_TEST_ICRC_V4);
	ok(roce_icrc_set(pkt, sizeof(pkt)) == 0 &&
		   roce_icrc_check(pkt, sizeof(pkt)) == 0,
	   "ICRC set, then checked");
	/* the variant fields do not change it */
	pkt[1] = 0x88;	/* TOS */
	pkt[8] = 3;	/* TTL */
	pkt[10] = 0x12; /* IP checksum */
	pkt[26] = 0x55; /* UDP checksum */
	pkt[32] = 0xc0; /* BTH FECN, BECN */
	ok(roce_icrc_check(pkt, sizeof(pkt)) == 0,
	   "ICRC ignores TOS, TTL, checksums and resv8a");
	/* the invariant fields do */
	pkt[14] ^= 1; /* IP id */
	ok(roce_icrc_check(pkt, sizeof(pkt)) == -EBADMSG,
	   "ICRC covers the IP id");
	pkt[14] ^= 1;
	pkt[41] ^= 0x80; /* payload */
	ok(roce_icrc_check(pkt, sizeof(pkt)) == -EBADMSG,
	   "ICRC covers the payload");
	pkt[41] ^= 0x80;
	pkt[35] ^= 1; /* dest QP */
	ok(roce_icrc_check(pkt, sizeof(pkt)) == -EBADMSG,
	   "ICRC covers the dest QP");
	pkt[35] ^= 1;
	ok(roce_icrc_check(pkt, sizeof(pkt)) == 0, "and back");
	ok(roce_icrc_check(pkt, sizeof(pkt) - 1) == -EINVAL,
	   "IP length disagreeing with the buffer: -EINVAL");
	ok(roce_icrc_check(pkt, 20) == -EINVAL, "no UDP: -EINVAL");
}

static void test_roundtrip(void)
{
	uint8_t buf[ROCE_MAX_HDR_LEN + 64 + ROCE_MAX_PMTU];
	struct roce_pkt p, d;
	unsigned int i, bad = 0, badlen = 0;
	ssize_t n;

	for (i = 0; i < NOPS; i++) {
		sample(&p, all_ops[i], i);
		n = roce_encode(&p, buf, sizeof(buf));
		if (n < 0 || roce_decode(buf, (size_t)n, &d) || !same(&p, &d)) {
			printf("# %s (0x%02x): %zd\n", roce_op_name(all_ops[i]),
			       all_ops[i], n);
			bad++;
		}
		if (n > 0 && (size_t)n != roce_hdr_len(all_ops[i]) +
						  p.payload_len +
						  roce_pad(p.payload_len) + 4)
			badlen++;
	}
	ok(!bad, "%zu opcodes encode and decode back", NOPS);
	ok(!badlen, "encoded length = headers + payload + pad + ICRC");
	for (i = 0, bad = 0, badlen = 0; i < NXOPS; i++) {
		unsigned int fl = roce_op_flags(xrc_ops[i]);

		sample(&p, xrc_ops[i], i);
		n = roce_encode(&p, buf, sizeof(buf));
		if (n < 0 || roce_decode(buf, (size_t)n, &d) || !same(&p, &d) ||
		    !(fl & ROCE_F_XRCETH) != !(fl & ROCE_F_REQ)) {
			printf("# XRC %s (0x%02x): %zd\n",
			       roce_op_name(xrc_ops[i]), xrc_ops[i], n);
			bad++;
		}
		/* the same packet as RC's but for the XRCETH of a request */
		if (n > 0 &&
		    roce_hdr_len(xrc_ops[i]) !=
			    roce_hdr_len((uint8_t)(xrc_ops[i] & 0x1f)) +
				    (fl & ROCE_F_REQ ? ROCE_XRCETH_LEN : 0))
			badlen++;
	}
	ok(!bad,
	   "%zu XRC opcodes encode and decode back, the XRCETH on "
	   "requests only",
	   NXOPS);
	ok(!badlen, "an XRC header is RC's, plus 4 bytes on a request");
	ok(roce_hdr_len(ROCE_RC | ROCE_WRITE_ONLY_IMM) == 32 &&
		   roce_hdr_len(ROCE_RC | ROCE_CMP_SWAP) == 40 &&
		   roce_hdr_len(ROCE_RC | ROCE_ATOMIC_ACK) == 24 &&
		   roce_hdr_len(ROCE_UD | ROCE_SEND_ONLY_IMM) == 24 &&
		   roce_hdr_len(ROCE_RC | ROCE_SEND_ONLY_INV) == 16 &&
		   roce_hdr_len(ROCE_RC | ROCE_ATOMIC_WRITE) == 28,
	   "header lengths of RETH+ImmDt, AtomicETH, AETH+AtomicAckETH, "
	   "DETH+ImmDt, IETH, ATOMIC_WRITE's RETH");
}

static void test_hostile(void)
{
	uint8_t buf[512];
	struct roce_pkt p, d;
	unsigned int op, known = 0, i;
	ssize_t n;

	for (op = 0; op < 256; op++)
		known += roce_op_flags((uint8_t)op) != 0;
	ok(known == NOPS + NXOPS,
	   "exactly the %zu opcodes we speak are known (%u)", NOPS + NXOPS,
	   known);
	ok(roce_op_flags(ROCE_XRC | ROCE_ATOMIC_WRITE) == 0 &&
		   roce_op_flags(ROCE_XRC | 0x15) == 0 &&
		   roce_op_flags(0x80 | ROCE_SEND_ONLY) == 0 &&
		   roce_op_flags(0xc0 | ROCE_SEND_ONLY) == 0,
	   "XRC ATOMIC_WRITE, XRC 0x15, CNP's 0x80 base, 0xc0: unknown");
	ok(roce_op_flags(ROCE_UC | ROCE_READ_REQ) == 0 &&
		   roce_op_flags(ROCE_UD | ROCE_SEND_FIRST) == 0 &&
		   roce_op_flags(ROCE_UC | ROCE_SEND_ONLY_INV) == 0 &&
		   roce_op_flags(0x40 | ROCE_SEND_ONLY) == 0 &&
		   roce_op_flags(ROCE_RC | 0x15) == 0,
	   "UC READ, UD SEND_FIRST, UC INV, RD, RESYNC: unknown");

	sample(&p, ROCE_RC | ROCE_WRITE_ONLY_IMM, 3);
	n = roce_encode(&p, buf, sizeof(buf));
	for (i = 0, known = 0; i < (unsigned int)n; i++)
		known += roce_decode(buf, i, &d) == 0;
	/* 36 bytes is a whole packet without payload; nothing else is */
	ok(known == 1 && roce_decode(buf, 36, &d) == 0 && !d.payload_len,
	   "a WRITE_ONLY_IMM cut short decodes only as the empty one");
	for (i = 0, known = 0; i < 32 + 4; i++)
		known += roce_decode(buf, i, &d) == 0;
	ok(known == 0, "truncated below headers + ICRC: refused");
	ok(roce_decode(buf, 3, &d) == -EBADMSG, "3 bytes: -EBADMSG");

	sample(&p, ROCE_RC | ROCE_SEND_ONLY, 0);
	p.payload_len = 4;
	n = roce_encode(&p, buf, sizeof(buf));
	buf[1] |= 0x01;
	ok(roce_decode(buf, (size_t)n, &d) == -EINVAL, "TVer 1: -EINVAL");
	buf[1] &= 0xf0;
	buf[1] |= 0x30;
	ok(roce_decode(buf, (size_t)n, &d) == 0 && d.payload_len == 1,
	   "pad 3 of 4 bytes: 1 payload byte");
	ok(roce_decode(buf, ROCE_BTH_LEN + 4, &d) == -EBADMSG,
	   "pad larger than the payload: -EBADMSG");
	ok(roce_decode(buf, (size_t)n - 1, &d) == -EBADMSG,
	   "payload not whole words: -EBADMSG");
	/* P_Key: the default partition only (rxe_recv.c check_keys) */
	sample(&p, ROCE_UD | ROCE_SEND_ONLY, 0);
	p.bth.pkey = 0x8001;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n > 0 && roce_decode(buf, (size_t)n, &d) == -EACCES,
	   "P_Key 0x8001 (another partition): -EACCES");
	buf[2] = 0x7f; /* a limited member of the default partition */
	buf[3] = 0xff;
	ok(roce_decode(buf, (size_t)n, &d) == 0 && d.bth.pkey == 0x7fff,
	   "P_Key 0x7fff (default partition, limited): accepted");
	buf[2] = 0;
	buf[3] = 0;
	ok(roce_decode(buf, (size_t)n, &d) == -EACCES, "P_Key 0: -EACCES");

	sample(&p, ROCE_RC | ROCE_SEND_FIRST, 0);
	n = roce_encode(&p, buf, sizeof(buf));
	buf[1] |= 0x10;
	ok(roce_decode(buf, (size_t)n, &d) == -EINVAL,
	   "pad on a FIRST packet: -EINVAL");

	sample(&p, ROCE_RC | ROCE_ACK, 0);
	n = roce_encode(&p, buf, sizeof(buf));
	memset(buf + n, 0, 8);
	ok(roce_decode(buf, (size_t)n + 4, &d) == -EINVAL,
	   "payload on an ACK: -EINVAL");
	p.payload = payload;
	p.payload_len = 4;
	ok(roce_encode(&p, buf, sizeof(buf)) == -EINVAL,
	   "encode: payload on an ACK: -EINVAL");

	sample(&p, ROCE_RC | ROCE_SEND_ONLY, 0);
	p.bth.psn = 1u << 24;
	ok(roce_encode(&p, buf, sizeof(buf)) == -EINVAL,
	   "encode: PSN of 25 bits: -EINVAL");
	p.bth.psn = 0;
	p.bth.dqpn = 1u << 24;
	ok(roce_encode(&p, buf, sizeof(buf)) == -EINVAL,
	   "encode: QPN of 25 bits: -EINVAL");
	p.bth.dqpn = 1;
	ok(roce_encode(&p, buf, 12) == -EMSGSIZE, "encode: no room: -EMSGSIZE");
	p.bth.opcode = 0x40;
	ok(roce_encode(&p, buf, sizeof(buf)) == -EINVAL,
	   "encode: unknown opcode: -EINVAL");
	p.bth.opcode = ROCE_RC | ROCE_SEND_ONLY;
	p.payload_len = ROCE_MAX_PMTU + 1;
	ok(roce_encode(&p, buf, sizeof(buf)) == -EMSGSIZE,
	   "encode: payload over 4096: -EMSGSIZE");
}

static void test_seg(void)
{
	uint8_t op;

	ok(roce_mtu_bytes(1) == 256 && roce_mtu_bytes(3) == 1024 &&
		   roce_mtu_bytes(5) == 4096 && roce_mtu_bytes(0) == 0 &&
		   roce_mtu_bytes(6) == 0,
	   "ibv_mtu 1..5 = 256..4096 bytes, others 0");
	ok(roce_npkts(0, 1024) == 1 && roce_npkts(1, 1024) == 1 &&
		   roce_npkts(1024, 1024) == 1 && roce_npkts(1025, 1024) == 2 &&
		   roce_npkts(1ull << 31, 4096) == 524288 &&
		   roce_npkts(5, 0) == 0,
	   "packet counts");
	ok(roce_seg_len(2500, 1024, 0) == 1024 &&
		   roce_seg_len(2500, 1024, 2) == 452 &&
		   roce_seg_len(2500, 1024, 3) == 0,
	   "payload per packet");
	op = ROCE_RC | ROCE_WRITE_ONLY_IMM;
	ok(roce_seg_opcode(op, 0, 1) == op &&
		   roce_seg_opcode(op, 0, 3) == (ROCE_RC | ROCE_WRITE_FIRST) &&
		   roce_seg_opcode(op, 1, 3) == (ROCE_RC | ROCE_WRITE_MIDDLE) &&
		   roce_seg_opcode(op, 2, 3) ==
			   (ROCE_RC | ROCE_WRITE_LAST_IMM) &&
		   roce_seg_opcode(op, 3, 3) == -EINVAL,
	   "WRITE_ONLY_IMM segments into FIRST, MIDDLE, LAST_IMM");
	ok(roce_seg_opcode(ROCE_UC | ROCE_SEND_ONLY, 1, 2) ==
			   (ROCE_UC | ROCE_SEND_LAST) &&
		   roce_seg_opcode(ROCE_RC | ROCE_SEND_ONLY_INV, 1, 2) ==
			   (ROCE_RC | ROCE_SEND_LAST_INV) &&
		   roce_seg_opcode(ROCE_RC | ROCE_READ_RESP_ONLY, 1, 3) ==
			   (ROCE_RC | ROCE_READ_RESP_MIDDLE),
	   "UC SEND, SEND_INV and READ responses segment");
	ok(roce_seg_opcode(ROCE_UD | ROCE_SEND_ONLY, 0, 2) == -EINVAL &&
		   roce_seg_opcode(ROCE_RC | ROCE_ACK, 0, 1) == -EINVAL &&
		   roce_seg_opcode(ROCE_RC | ROCE_SEND_FIRST, 0, 2) == -EINVAL,
	   "UD over one MTU, ACK, a non-ONLY opcode: -EINVAL");
	ok(roce_rnr_timer_ns(0) == 655360000ull &&
		   roce_rnr_timer_ns(1) == 10000 &&
		   roce_rnr_timer_ns(12) == 640000 &&
		   roce_rnr_timer_ns(31) == 491520000ull &&
		   roce_rnr_timer_ns(32) == 0,
	   "RNR timer codes: 0 = 655.36 ms, 1 = 10 us, 12 = 0.64 ms, "
	   "31 = 491.52 ms");
	ok(roce_timeout_ns(0) == 0 && roce_timeout_ns(1) == 8192 &&
		   roce_timeout_ns(14) == 67108864ull &&
		   roce_timeout_ns(31) == 4096ull << 31 &&
		   roce_timeout_ns(32) == 0,
	   "ACK timeout: 4.096 us * 2^timeout, 0 = infinite");
	ok(roce_psn_add(0xffffff, 2) == 1 && roce_psn_cmp(1, 0xffffff) > 0 &&
		   roce_psn_cmp(0xffffff, 1) < 0 && roce_psn_cmp(5, 5) == 0,
	   "PSN arithmetic wraps at 2^24");
}

/* test_xrc_bytes -- XRC requests as IBA 9.2 orders their headers: BTH,
 * XRCETH, then RETH or AtomicETH, then ImmDt; responses without it */
static void test_xrc_bytes(void)
{
	/* XRC SEND_ONLY (0xa4), AckReq, QP 0x21, PSN 2; XRCETH SRQ 0x123456
	 * (its reserved byte 0); 4 payload bytes */
	static const uint8_t want_send[] = {
		0xa4, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x21,
		0x80, 0x00, 0x00, 0x02, 0x00, 0x12, 0x34, 0x56,
		'x',  'r',  'c',  '!',	0,    0,    0,	  0,
	};
	/* XRC WRITE_ONLY_IMM (0xab): XRCETH, RETH, ImmDt, 1 byte + pad 3 */
	static const uint8_t want_wimm[] = {
		0xab, 0x30, 0xff, 0xff, 0x00, 0x00, 0x00, 0x22, 0x00,
		0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00,
		0x7f, 0x00, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0xab,
		0xcd, 0x00, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef,
		'q',  0,    0,	  0,	0,    0,    0,	  0,
	};
	/* XRC FETCH_ADD (0xb4): XRCETH, AtomicETH */
	static const uint8_t want_fadd[] = {
		0xb4, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x23, 0x00, 0x00,
		0x00, 0x04, 0x00, 0xff, 0xff, 0xff, 0x00, 0x00, 0x7f, 0x00,
		0x12, 0x34, 0x00, 0x00, 0x00, 0x00, 0xab, 0xce, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0,    0,    0,	  0,
	};
	/* XRC ACK (0xb1): BTH and AETH, no XRCETH */
	static const uint8_t want_ack[] = {
		0xb1, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00,
		0x00, 0x05, 0x00, 0x00, 0x00, 0x09, 0,	  0,	0,    0,
	};
	struct roce_pkt p, d;
	uint8_t buf[128];
	ssize_t n;

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_XRC | ROCE_SEND_ONLY;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 0x21;
	p.bth.ackreq = 1;
	p.bth.psn = 2;
	p.xrc_srqn = 0x123456;
	p.payload = (const uint8_t *)"xrc!";
	p.payload_len = 4;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want_send) && !memcmp(buf, want_send, n),
	   "XRC SEND_ONLY: BTH, XRCETH, payload (%zd)", n);
	ok(roce_decode(want_send, sizeof(want_send), &d) == 0 &&
		   d.xrc_srqn == 0x123456 && d.payload_len == 4 &&
		   !memcmp(d.payload, "xrc!", 4),
	   "XRC SEND_ONLY: decoded back");

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_XRC | ROCE_WRITE_ONLY_IMM;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 0x22;
	p.bth.psn = 3;
	p.xrc_srqn = 7;
	p.reth.va = 0x00007f0012345678ull;
	p.reth.rkey = 0xabcd;
	p.reth.len = 1;
	p.imm = 0xdeadbeef;
	p.payload = (const uint8_t *)"q";
	p.payload_len = 1;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want_wimm) && !memcmp(buf, want_wimm, n),
	   "XRC WRITE_ONLY_IMM: BTH, XRCETH, RETH, ImmDt (%zd)", n);
	ok(roce_decode(want_wimm, sizeof(want_wimm), &d) == 0 &&
		   d.xrc_srqn == 7 && d.reth.rkey == 0xabcd &&
		   d.reth.len == 1 && d.imm == 0xdeadbeef &&
		   d.payload_len == 1 && d.payload[0] == 'q',
	   "XRC WRITE_ONLY_IMM: decoded back");

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_XRC | ROCE_FETCH_ADD;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 0x23;
	p.bth.psn = 4;
	p.xrc_srqn = ROCE_SRQN_MASK;
	p.atmeth.va = 0x00007f0012340000ull;
	p.atmeth.rkey = 0xabce;
	p.atmeth.swap_add = 5;
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want_fadd) && !memcmp(buf, want_fadd, n),
	   "XRC FETCH_ADD: BTH, XRCETH, AtomicETH (%zd)", n);

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_XRC | ROCE_ACK;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 0x24;
	p.bth.psn = 5;
	p.aeth.msn = 9;
	p.xrc_srqn = 0x99; /* not sent: a response has no XRCETH */
	n = roce_encode(&p, buf, sizeof(buf));
	ok(n == sizeof(want_ack) && !memcmp(buf, want_ack, n),
	   "XRC ACK: BTH and AETH, no XRCETH");

	/* the XRCETH's reserved byte is ignored; its SRQN is 24 bits */
	memcpy(buf, want_send, sizeof(want_send));
	buf[12] = 0xff;
	ok(roce_decode(buf, sizeof(want_send), &d) == 0 &&
		   d.xrc_srqn == 0x123456,
	   "XRCETH reserved byte set: ignored");
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_XRC | ROCE_SEND_ONLY;
	p.bth.pkey = 0xffff;
	p.xrc_srqn = 1u << 24;
	ok(roce_encode(&p, buf, sizeof(buf)) == -EINVAL,
	   "encode: XRC SRQ number of 25 bits: -EINVAL");
	p.xrc_srqn = 1;
	ok(roce_encode(&p, buf, ROCE_BTH_LEN + ROCE_XRCETH_LEN + 3) ==
		   -EMSGSIZE,
	   "encode: no room for the ICRC after the XRCETH: -EMSGSIZE");

	/* cut short: below BTH + XRCETH + ICRC nothing decodes */
	memcpy(buf, want_send, sizeof(want_send));
	ok(roce_decode(buf, ROCE_BTH_LEN + ROCE_ICRC_LEN, &d) == -EBADMSG &&
		   roce_decode(buf,
			       ROCE_BTH_LEN + ROCE_XRCETH_LEN + ROCE_ICRC_LEN -
				       1,
			       &d) == -EBADMSG,
	   "XRC SEND_ONLY without room for its XRCETH: -EBADMSG");
	ok(roce_decode(want_fadd, sizeof(want_fadd) - 4, &d) == -EBADMSG,
	   "XRC FETCH_ADD without its whole AtomicETH: -EBADMSG");
	ok(roce_decode(want_wimm, sizeof(want_wimm) - 2, &d) == -EBADMSG,
	   "XRC WRITE_ONLY_IMM cut into its payload word: -EBADMSG");
	memcpy(buf, want_ack, sizeof(want_ack));
	memset(buf + sizeof(want_ack), 0, 4);
	ok(roce_decode(buf, sizeof(want_ack) + 4, &d) == -EINVAL,
	   "XRC ACK with 4 bytes more (an XRCETH or payload): -EINVAL");

	ok(roce_seg_opcode(ROCE_XRC | ROCE_SEND_ONLY_IMM, 0, 3) ==
			   (ROCE_XRC | ROCE_SEND_FIRST) &&
		   roce_seg_opcode(ROCE_XRC | ROCE_SEND_ONLY_IMM, 1, 3) ==
			   (ROCE_XRC | ROCE_SEND_MIDDLE) &&
		   roce_seg_opcode(ROCE_XRC | ROCE_SEND_ONLY_IMM, 2, 3) ==
			   (ROCE_XRC | ROCE_SEND_LAST_IMM) &&
		   roce_seg_opcode(ROCE_XRC | ROCE_READ_RESP_ONLY, 2, 3) ==
			   (ROCE_XRC | ROCE_READ_RESP_LAST),
	   "XRC SEND_ONLY_IMM and READ responses segment as RC's");
}

/* ---- pcap writer ---- */

static void le32(FILE *f, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
			(uint8_t)(v >> 24)};

	fwrite(b, 1, 4, f);
}

static int write_pcap(const char *path)
{
	static uint8_t frame[14 + 48 + ROCE_MAX_HDR_LEN + 64 + ROCE_MAX_PMTU];
	FILE *f = fopen(path, "wb");
	struct roce_pkt p;
	struct roce_ip ip;
	unsigned int i, k = 0;
	int fam, v6;

	if (!f)
		return 1;
	le32(f, 0xa1b2c3d4);
	le32(f, 2 | 4u << 16); /* version 2.4 */
	le32(f, 0);
	le32(f, 0);
	le32(f, 65535);
	le32(f, 1); /* Ethernet */
	for (v6 = 0; v6 < 2; v6++) {
		for (i = 0; i <= NOPS + NXOPS; i++) {
			size_t hl, eth = 14;
			ssize_t n;
			int bad = v6 && i == NOPS + NXOPS;

			if (i == NOPS + NXOPS && !v6)
				continue;
			fam = v6 ? AF_INET6 : AF_INET;
			/* the last, bad packet: an RC SEND_ONLY */
			sample(&p,
			       i < NOPS		  ? all_ops[i]
			       : i < NOPS + NXOPS ? xrc_ops[i - NOPS]
						  : ROCE_RC | ROCE_SEND_ONLY,
			       i);
			memset(&ip, 0, sizeof(ip));
			ip.family = fam;
			ip.ttl = 64;
			ip.sport = 0xc000 + i;
			ip.dport = ROCE_UDP_PORT;
			if (v6) {
				ip.src[0] = ip.dst[0] = 0xfd;
				ip.src[15] = 1;
				ip.dst[15] = 2;
			} else {
				memcpy(ip.src, (uint8_t[]){10, 231, 0, 1}, 4);
				memcpy(ip.dst, (uint8_t[]){10, 231, 0, 2}, 4);
			}
			hl = roce_ip_udp_len(fam);
			n = roce_encode(&p, frame + eth + hl,
					sizeof(frame) - eth - hl);
			if (n < 0 ||
			    roce_ip_udp(&ip, frame + eth, sizeof(frame) - eth,
					(size_t)n) != (ssize_t)hl)
				return 1;
			if (roce_icrc_check(frame + eth, hl + (size_t)n))
				return 1;
			if (bad)
				frame[eth + hl + (size_t)n - 1] ^= 0x5a;
			memcpy(frame, "\x02\0\0\0\0\x02\x02\0\0\0\0\x01", 12);
			frame[12] = v6 ? 0x86 : 0x08;
			frame[13] = v6 ? 0xdd : 0x00;
			le32(f, 1700000000 + k);
			le32(f, 0);
			le32(f, (uint32_t)(eth + hl + (size_t)n));
			le32(f, (uint32_t)(eth + hl + (size_t)n));
			fwrite(frame, 1, eth + hl + (size_t)n, f);
			k++;
			printf("%u 0x%02x %u %s", k, p.bth.opcode, p.bth.psn,
			       bad ? "BAD" : "GOOD");
			if (roce_op_flags(p.bth.opcode) & ROCE_F_XRCETH)
				printf(" %u", p.xrc_srqn);
			printf("\n");
		}
	}
	return fclose(f) != 0;
}

/* crc_bits -- the same CRC one bit at a time: no table, no folding */
static uint32_t crc_bits(uint32_t crc, const uint8_t *p, size_t len)
{
	int k;

	while (len--) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return crc;
}

/*
 * test_crc -- roce_crc32 (by folding with carry-less multiplication from
 * 64 bytes where the CPU has it, else eight bytes a step, the tail a byte
 * at a time) against the bitwise CRC: every length to 1,100 bytes, at
 * every alignment, from any state, chained in pieces, and whole packets
 */
static void test_crc(void)
{
	static uint8_t buf[9100];
	uint64_t r = 0x9e3779b97f4a7c15ull;
	unsigned int i, len, bad = 0, bad_split = 0;
	uint32_t c0, a, b;
	size_t off, cut;

	for (i = 0; i < sizeof(buf); i++) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		buf[i] = (uint8_t)r;
	}
	for (len = 0; len <= 1100; len++) {
		off = len % 16;
		r = r * 6364136223846793005ull + 1;
		c0 = (uint32_t)(r >> 32);
		a = roce_crc32(c0, buf + off, len);
		b = crc_bits(c0, buf + off, len);
		bad += a != b;
		cut = len / 3;
		a = roce_crc32(roce_crc32(c0, buf + off, cut), buf + off + cut,
			       len - cut);
		bad_split += a != b;
	}
	ok(!bad,
	   "CRC-32 of 0..1100 bytes at every alignment: as bit by bit "
	   "(%u differ)",
	   bad);
	ok(!bad_split, "and in two pieces (%u differ)", bad_split);
	bad = 0;
	for (len = 4096; len <= 9000; len += 613) {
		a = roce_crc32(0xffffffffu, buf + 3, len);
		bad += a != crc_bits(0xffffffffu, buf + 3, len);
	}
	ok(!bad, "CRC-32 of 4 KiB to 9 KB: as bit by bit (%u differ)", bad);
}

/* test_icrc_gso -- the ICRC of a packet sent as GSO segment k (IPv4
 * identification k): the delta turns one for identification 0 into it,
 * and a receiver that rebuilds the headers with 0 accepts it for any k a
 * GSO send makes, none past them, no corrupted one; IPv6 as before */
static void test_icrc_gso(void)
{
	static const uint32_t lens[] = {4, 1000, 1024, 4096};
	unsigned int li, k, bad = 0, wrong = 0, corrupt = 0, far = 0;
	uint8_t ref[20 + 8 + ROCE_BTH_LEN + ROCE_MAX_PMTU + 4];
	uint8_t pkt[sizeof(ref)];
	struct roce_ip ip;

	for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		size_t ib = ROCE_BTH_LEN + lens[li] + ROCE_ICRC_LEN;
		size_t len = 28 + ib;

		memset(&ip, 0, sizeof(ip));
		ip.family = AF_INET;
		ip.src[0] = 10, ip.src[1] = 231, ip.src[3] = 1;
		ip.dst[0] = 10, ip.dst[1] = 231, ip.dst[3] = 2;
		ip.sport = 49152;
		ip.dport = ROCE_UDP_PORT;
		ip.ttl = 64;
		memset(ref + 28, 0, ib);
		ref[28] = ROCE_RC | ROCE_WRITE_MIDDLE;
		memcpy(ref + 28 + ROCE_BTH_LEN, payload, lens[li]);
		for (k = 0; k < 70; k++) {
			uint32_t want;

			/* what the wire carries for segment k */
			ip.id = (uint16_t)k;
			memcpy(pkt, ref, len);
			roce_ip_udp_hdr(&ip, pkt, len, ib);
			roce_icrc_set(pkt, len);
			roce_icrc_calc(pkt, len, &want);
			/* made with identification 0, then the delta */
			ip.id = 0;
			roce_ip_udp_hdr(&ip, pkt, len, ib);
			roce_icrc_set(pkt, len);
			roce_icrc_xor(pkt, len, roce_icrc_id_delta(len, k));
			bad += memcmp(pkt + len - 4,
				      (uint8_t[]){(uint8_t)want,
						  (uint8_t)(want >> 8),
						  (uint8_t)(want >> 16),
						  (uint8_t)(want >> 24)},
				      4) != 0;
			/* the receiver's view: identification 0 */
			if (k < ROCE_GSO_MAX_SEGS) {
				wrong += roce_icrc_check_seg(pkt, len, k) != 0;
				wrong += roce_icrc_check_seg(pkt, len, 0) != 0;
				wrong += roce_icrc_check_seg(pkt, len, 7) != 0;
			} else {
				far += roce_icrc_check_seg(pkt, len, k) !=
				       -EBADMSG;
			}
			pkt[28 + ROCE_BTH_LEN] ^= 4;
			corrupt += roce_icrc_check_seg(pkt, len, k) != -EBADMSG;
		}
	}
	ok(!bad,
	   "ICRC for IPv4 id k = ICRC for 0 ^ delta(k), 70 ids, 4 sizes "
	   "(%u differ)",
	   bad);
	ok(!wrong, "segments 0-63 accepted with their id rebuilt as 0 (%u not)",
	   wrong);
	ok(!far, "ids past a GSO send's refused (%u accepted)", far);
	ok(!corrupt,
	   "a corrupted segment refused whatever its id (%u accepted)",
	   corrupt);
	ok(roce_icrc_id_delta(100, 0) == 0, "no change, no delta");
}

/* test_pkey -- the P_Keys our QPs (the default partition, full member)
 * take: the same 15-bit key, either membership (rxe's pkey_match) */
static void test_pkey(void)
{
	ok(roce_pkey_ours(0xffff) && roce_pkey_ours(0x7fff),
	   "P_Key 0xFFFF and its limited member 0x7FFF are ours");
	ok(!roce_pkey_ours(0x0000) && !roce_pkey_ours(0x8000) &&
		   !roce_pkey_ours(0x1234) && !roce_pkey_ours(0xfffe),
	   "P_Keys of other partitions (0x0000, 0x8000, 0x1234, 0xFFFE) "
	   "are not");
}

int main(int argc, char **argv)
{
	unsigned int i;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	if (argc == 3 && !strcmp(argv[1], "--pcap"))
		return write_pcap(argv[2]);
	test_known_bytes();
	test_icrc_known();
	test_icrc_gso();
	test_roundtrip();
	test_hostile();
	test_seg();
	test_xrc_bytes();
	test_crc();
	test_pkey();
	return done_testing();
}
