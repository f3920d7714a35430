/* SPDX-License-Identifier: MIT */
/*
 * rdmamsg_hdr.c -- fuzz target: every check rdmamsg runs on a header a
 * peer sent (lib/proto.h): the message header against the received length,
 * returned credits against the grant, first fragments, the rendezvous and
 * request/response header, the region export blob, and the clock a
 * keep-alive names (rdmamsg__alive_check).  The first input
 * byte picks the decoder; the rest is the peer's bytes.  The checks are
 * pure (no verbs, no sockets); an accepted input must satisfy what the
 * library relies on afterwards.  A packed send's records (W_PACK) are
 * checked as a whole, then walked as the receiver walks them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* must -- an invariant the library relies on after a check passed */
static void must(int cond)
{
	if (!cond)
		abort();
}

/* get32 -- 4 input bytes (zero past the end) */
static uint32_t get32(const uint8_t *p, size_t n)
{
	uint32_t v = 0;

	memcpy(&v, p, n < 4 ? n : 4);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 5) {
	case 0: { /* message header: received length, our eager size,
		   * packing negotiated (bit 0 of data[0] / 5); a W_PACK's
		   * records are the input after the header */
		struct rdmamsg__wire h;
		uint32_t byte_len, eager;
		int pack = (data[0] / 5) & 1;

		if (size < 1 + 8 + sizeof(h))
			return 0;
		byte_len = get32(data + 1, 4);
		eager = get32(data + 5, 4) % (1u << 21);
		memcpy(&h, data + 9, sizeof(h));
		if (rdmamsg__wire_check(&h, byte_len, eager, pack) == 0) {
			must(byte_len >= RDMAMSG_HDR);
			must(byte_len - RDMAMSG_HDR <= eager);
			must(h.type >= W_DATA && h.type <= W_PACK &&
			     h.type != W_RTS);
			if (h.type == W_KEEPALIVE)
				must(byte_len == RDMAMSG_HDR ||
				     byte_len ==
					     RDMAMSG_HDR + RDMAMSG_ALIVE_LEN);
			else if (h.type != W_DATA && h.type != W_PACK)
				must(byte_len == RDMAMSG_HDR);
			if (h.type == W_PACK)
				must(pack && le32toh(h.total) >= 1 &&
				     le32toh(h.total) <= RDMAMSG_PACK_RECS);
		}
		if (h.type == W_KEEPALIVE) {
			/* the clock a keep-alive names: its payload is the
			 * input after the header */
			uint64_t addr;
			uint32_t rkey, tick;

			if (rdmamsg__alive_check(
				    data + 9 + sizeof(h),
				    (uint32_t)(size - 9 - sizeof(h)), &addr,
				    &rkey, &tick) == 0)
				must(size - 9 - sizeof(h) ==
					     RDMAMSG_ALIVE_LEN &&
				     !(addr & 7) &&
				     (!tick || tick >= RDMAMSG_ALIVE_TICK_MIN));
			break;
		}
		if (h.type == W_PACK) {
			const uint8_t *p = data + 9 + sizeof(h);
			uint32_t len = (uint32_t)(size - 9 - sizeof(h));
			uint32_t i, n = le32toh(h.total), off = 0;
			struct rdmamsg__prec r;

			if (rdmamsg__pack_check(p, len, n) != 0)
				break;
			/* walking it as rx_pack does stays inside it */
			for (i = 0; i < n; i++) {
				must(off + RDMAMSG_PREC <= len);
				rdmamsg__prec_get(p + off, &r);
				must(r.len <= RDMAMSG__PACK_MAX);
				off += rdmamsg__prec_span(r.len);
				must(off <= len);
			}
			must(off == len && n >= 1 && n <= RDMAMSG_PACK_RECS);
		}
		break;
	}
	case 1: { /* credits: have + add must stay within the grant */
		uint32_t have = get32(data + 1, size - 1);
		uint32_t add = size > 5 ? get32(data + 5, size - 5) : 0;
		uint32_t max = size > 9 ? get32(data + 9, size - 9) : 0;

		if (rdmamsg__credit_check(have, add, max) == 0)
			must((uint64_t)have + add <= max);
		break;
	}
	case 2: { /* first fragment: total against the largest message */
		uint32_t total = get32(data + 1, size - 1);
		uint32_t len = size > 5 ? get32(data + 5, size - 5) : 0;
		uint64_t max = (uint64_t)1 << 26;

		if (rdmamsg__frag_check(total, len, max) == 0)
			must(total <= max && len <= total);
		break;
	}
	case 3: { /* transfer header of a message of size - 1 bytes */
		struct rdmamsg__xhdr x, y;
		uint8_t out[RDMAMSG_XHDR];

		if (rdmamsg__xhdr_decode(data + 1, size - 1, &x) == 0) {
			must(x.kind >= X_RTS && x.kind <= X_PIECE);
			if (x.kind == X_RTS) {
				must(x.len > 0 && x.addr + x.len >= x.addr);
				must(x.inner == X_MSG || x.inner == X_REQ ||
				     x.inner == X_RESP);
				/* a first piece is less than the whole */
				must(x.flags & XF_PIECE
					     ? x.status > 0 &&
						       (uint64_t)x.status <
							       x.len
					     : x.status == 0);
			}
			if (x.kind == X_PIECE)
				must(x.len > 0 && x.addr + x.len >= x.addr);
			if (x.kind == X_FIN)
				must(x.status <= 0 && x.status >= -4095);
			/* what we accept we would encode the same way */
			rdmamsg__xhdr_encode(&x, out);
			must(rdmamsg__xhdr_decode(out, RDMAMSG_XHDR, &y) == 0 ||
			     size - 1 != RDMAMSG_XHDR);
		}
		break;
	}
	default: { /* region export blob */
		uint64_t addr, len;
		uint32_t rkey, access;

		if (rdmamsg__export_decode(data + 1, size - 1, 7, &addr, &len,
					   &rkey, &access) == 0)
			must(len > 0 && addr + len >= addr && !(access & ~7u));
		break;
	}
	}
	return 0;
}
