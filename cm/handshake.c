/* SPDX-License-Identifier: MIT */
/*
 * handshake.c -- the versioned private data carried by connect, accept and
 * reject: magic, protocol version, message kind, the library's own
 * parameters (credits, buffer sizes) and up to 32 application bytes, all
 * big-endian.  A peer speaking another version is refused with
 * RDMAMSG_REJECT_VERSION.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "handshake.h"

/* put16 -- big-endian 16-bit store */
static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* put32 -- big-endian 32-bit store */
static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

/* get16 -- big-endian 16-bit load */
static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

/* get32 -- big-endian 32-bit load */
static uint32_t get32(const uint8_t *p)
{
	return ((uint32_t)get16(p) << 16) | get16(p + 2);
}

/* put64 -- big-endian 64-bit store */
static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

/* get64 -- big-endian 64-bit load */
static uint64_t get64(const uint8_t *p)
{
	return ((uint64_t)get32(p) << 32) | get32(p + 4);
}

/* our_version -- RDMAMSG_HS_VERSION, or a test's override */
static uint8_t our_version(void)
{
	const char *v = getenv("RDMAMSG_TEST_PROTO_VERSION");

	return v ? (uint8_t)atoi(v) : RDMAMSG_HS_VERSION;
}

/* user_max -- the application bytes a message of this kind may carry:
 * the IB CM REQ has 56 bytes of private data, which the session id and
 * the DC block share with them */
static uint8_t user_max(uint8_t kind, uint8_t dc, uint16_t alt_lid)
{
	uint8_t alt = alt_lid ? RDMAMSG_HS_ALT_LEN : 0;

	if (kind == HS_RREQ || kind == HS_RACC)
		return 0;
	if (kind == HS_SREQ)
		return (uint8_t)(RDMAMSG_HS_SESSION_USER -
				 (dc ? RDMAMSG_HS_DC_LEN : 0) - alt);
	return (uint8_t)((dc ? RDMAMSG_HS_DC_USER : RDMAMSG_HS_USER) - alt);
}

/* has_dcsrc -- hs is an accept of a DC connection whose sender offers
 * RDMAMSG_HS_CAP_DCSRC: it carries the DC sender block */
static int has_dcsrc(const struct rdmamsg__hs *hs)
{
	return hs->dc && (hs->kind == HS_ACC || hs->kind == HS_RACC) &&
	       (hs->caps & RDMAMSG_HS_CAP_DCSRC);
}

/* rdmamsg__hs_encode -- serialize hs into out */
size_t rdmamsg__hs_encode(const struct rdmamsg__hs *hs, uint8_t *out)
{
	uint8_t umax = user_max(hs->kind, hs->dc, hs->alt_lid);
	uint8_t ulen = hs->user_len > umax ? umax : hs->user_len;
	size_t off = RDMAMSG_HS_LEN;

	put16(out, RDMAMSG_HS_MAGIC);
	out[2] = our_version();
	out[3] = (uint8_t)(hs->kind | (hs->dc ? RDMAMSG_HS_F_DC : 0) |
			   (hs->alt_lid ? RDMAMSG_HS_F_ALT : 0));
	put16(out + 4, hs->depth);
	out[6] = hs->ctl;
	out[7] = ulen;
	put32(out + 8, hs->eager);
	put32(out + 12, hs->max_msg);
	put32(out + 16, hs->kind == HS_REJ ? hs->reason : hs->caps);
	if (hs->kind == HS_SREQ || hs->kind == HS_RREQ) {
		put64(out + off, hs->sid);
		off += 8;
	}
	if (hs->kind == HS_RREQ || hs->kind == HS_RACC) {
		put64(out + off, hs->delivered);
		off += 8;
	}
	if (hs->alt_lid) {
		put16(out + off, hs->alt_lid);
		put16(out + off + 2, 0);
		off += RDMAMSG_HS_ALT_LEN;
	}
	if (hs->dc) {
		put32(out + off, hs->dc_dctn);
		put64(out + off + 4, hs->dc_key);
		put32(out + off + 12, hs->dc_tag);
		off += RDMAMSG_HS_DC_LEN;
	}
	if (ulen)
		memcpy(out + off, hs->user, ulen);
	off += ulen;
	if (has_dcsrc(hs)) {
		uint8_t i, n = hs->dc_ndci > RDMAMSG_HS_DCSRC_DCIS
				       ? RDMAMSG_HS_DCSRC_DCIS
				       : hs->dc_ndci;

		put64(out + off, hs->dc_nonce);
		out[off + 8] = n;
		off += 9;
		for (i = 0; i < n; i++, off += 3) {
			out[off] = (uint8_t)(hs->dc_dci[i] >> 16);
			put16(out + off + 1, (uint16_t)hs->dc_dci[i]);
		}
	}
	return off;
}

/* rdmamsg__hs_decode -- parse and check a peer's private data */
int rdmamsg__hs_decode(const void *in, size_t len, struct rdmamsg__hs *hs)
{
	const uint8_t *p = in;
	size_t off = RDMAMSG_HS_LEN;
	int alt;

	memset(hs, 0, sizeof(*hs));
	if (!p || len < RDMAMSG_HS_LEN || get16(p) != RDMAMSG_HS_MAGIC)
		return RDMAMSG_REJECT_HANDSHAKE;
	hs->version = p[2];
	hs->kind = p[3] & (uint8_t) ~(RDMAMSG_HS_F_DC | RDMAMSG_HS_F_ALT);
	hs->dc = !!(p[3] & RDMAMSG_HS_F_DC);
	alt = !!(p[3] & RDMAMSG_HS_F_ALT);
	hs->depth = get16(p + 4);
	hs->ctl = p[6];
	hs->user_len = p[7];
	hs->eager = get32(p + 8);
	hs->max_msg = get32(p + 12);
	if (hs->kind == HS_REJ)
		hs->reason = get32(p + 16);
	else
		hs->caps = get32(p + 16);
	if (hs->kind < HS_REQ || hs->kind > HS_RACC)
		return RDMAMSG_REJECT_HANDSHAKE;
	/* a DC block in a request or accept of any kind, never a reject */
	if (hs->dc && hs->kind == HS_REJ)
		return RDMAMSG_REJECT_HANDSHAKE;
	/* an APM offer in anything but a reject, never with DC */
	if (alt && (hs->kind == HS_REJ || hs->dc))
		return RDMAMSG_REJECT_HANDSHAKE;
	/* session fields and the DC block first (their lengths are fixed),
	 * then the application bytes; every length checked before it is
	 * read */
	if (hs->kind == HS_SREQ || hs->kind == HS_RREQ) {
		if (len < off + 8)
			return RDMAMSG_REJECT_HANDSHAKE;
		hs->sid = get64(p + off);
		off += 8;
		if (!hs->sid)
			return RDMAMSG_REJECT_HANDSHAKE;
	}
	if (hs->kind == HS_RREQ || hs->kind == HS_RACC) {
		if (len < off + 8)
			return RDMAMSG_REJECT_HANDSHAKE;
		hs->delivered = get64(p + off);
		off += 8;
	}
	if (alt) {
		if (len < off + RDMAMSG_HS_ALT_LEN)
			return RDMAMSG_REJECT_HANDSHAKE;
		hs->alt_lid = get16(p + off);
		/* a unicast LID, the reserved bytes zero */
		if (!hs->alt_lid || hs->alt_lid >= 0xc000 || get16(p + off + 2))
			return RDMAMSG_REJECT_HANDSHAKE;
		off += RDMAMSG_HS_ALT_LEN;
	}
	if (hs->dc) {
		if (len < off + RDMAMSG_HS_DC_LEN)
			return RDMAMSG_REJECT_HANDSHAKE;
		hs->dc_dctn = get32(p + off);
		hs->dc_key = get64(p + off + 4);
		hs->dc_tag = get32(p + off + 12);
		off += RDMAMSG_HS_DC_LEN;
	}
	if (hs->user_len > user_max(hs->kind, hs->dc, hs->alt_lid) ||
	    off + (size_t)hs->user_len > len)
		return RDMAMSG_REJECT_HANDSHAKE;
	hs->user = hs->user_len ? p + off : NULL;
	off += hs->user_len;
	/* the DC sender block: 1 to 16 DCIs of 24 bits, none 0 */
	if (has_dcsrc(hs)) {
		uint8_t i;

		if (len < off + 9)
			return RDMAMSG_REJECT_HANDSHAKE;
		hs->dc_nonce = get64(p + off);
		hs->dc_ndci = p[off + 8];
		off += 9;
		if (!hs->dc_ndci || hs->dc_ndci > RDMAMSG_HS_DCSRC_DCIS ||
		    len < off + 3 * (size_t)hs->dc_ndci)
			return RDMAMSG_REJECT_HANDSHAKE;
		for (i = 0; i < hs->dc_ndci; i++, off += 3) {
			hs->dc_dci[i] =
				(uint32_t)p[off] << 16 | get16(p + off + 1);
			if (!hs->dc_dci[i])
				return RDMAMSG_REJECT_HANDSHAKE;
		}
	}
	/* a reject must be understood whatever its version */
	if (hs->kind != HS_REJ && hs->version != RDMAMSG_HS_VERSION)
		return RDMAMSG_REJECT_VERSION;
	if (hs->kind != HS_REJ &&
	    (hs->depth < 2 || hs->depth > RDMAMSG_HS_MAX_DEPTH ||
	     hs->ctl < RDMAMSG_CTL_CREDITS_SRQ ||
	     hs->ctl > RDMAMSG_CTL_CREDITS || hs->eager < 64 ||
	     hs->max_msg < hs->eager))
		return RDMAMSG_REJECT_HANDSHAKE;
	return 0;
}
