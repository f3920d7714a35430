/* SPDX-License-Identifier: MIT */
/* handshake.c -- private-data handshake: encode/decode round trip, limits,
 * malformed input, version mismatch (unit test of cm/handshake.c) */
#include "config.h"

#include "../tap.h"
#include "internal.h"
#include "handshake.h"

/* plain_req -- a request with the library's usual parameters */
static void plain_req(struct rdmamsg__hs *hs)
{
	memset(hs, 0, sizeof(*hs));
	hs->kind = HS_REQ;
	hs->depth = 64;
	hs->ctl = RDMAMSG_CTL_CREDITS;
	hs->eager = 8192;
	hs->max_msg = 1 << 20;
}

int main(void)
{
	struct rdmamsg__hs in, out;
	uint8_t buf[RDMAMSG_HS_MAX + 8];
	size_t len;

	plain_req(&in);
	in.user = (const uint8_t *)"hello";
	in.user_len = 5;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(len, RDMAMSG_HS_LEN + 5, "encoded length");
	ok(len <= 56, "fits the 56 bytes IB allows in a connect request");
	is_int(rdmamsg__hs_decode(buf, len, &out), 0, "decodes");
	is_int(out.kind, HS_REQ, "kind");
	is_int(out.depth, 64, "credits");
	is_int(out.eager, 8192, "eager size");
	is_int(out.max_msg, 1 << 20, "max message");
	ok(out.user_len == 5 && !memcmp(out.user, "hello", 5), "user bytes");
	is_int(out.version, RDMAMSG_HS_VERSION, "version");

	/* trailing padding (IB pads private data) is ignored */
	memset(buf + len, 0, 8);
	is_int(rdmamsg__hs_decode(buf, len + 8, &out), 0, "padding ignored");

	is_int(rdmamsg__hs_decode(NULL, 0, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "no private data");
	is_int(rdmamsg__hs_decode(buf, RDMAMSG_HS_LEN - 1, &out),
	       RDMAMSG_REJECT_HANDSHAKE, "short");
	buf[0] ^= 0xff;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "bad magic");
	buf[0] ^= 0xff;
	buf[7] = 30; /* user_len beyond the data */
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "user length overruns");
	buf[7] = 5;
	buf[2] = RDMAMSG_HS_VERSION + 1;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_VERSION,
	       "other version");
	buf[3] = HS_REJ;
	is_int(rdmamsg__hs_decode(buf, len, &out), 0,
	       "a reject is read whatever its version");
	buf[2] = RDMAMSG_HS_VERSION;
	buf[3] = 9;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "unknown kind");
	buf[3] = HS_ACC;
	buf[4] = 0;
	buf[5] = 1; /* depth 1 */
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "depth below 2");

	in.kind = HS_REJ;
	in.reason = RDMAMSG_REJECT_CLOSED;
	in.user_len = 0;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(rdmamsg__hs_decode(buf, len, &out), 0, "reject decodes");
	is_int(out.reason, RDMAMSG_REJECT_CLOSED, "reason survives");
	ok(out.user == NULL, "no user bytes");

	/* sessions (reconnect-and-replay): the first request names it */
	in.kind = HS_SREQ;
	in.reason = 0;
	in.sid = 0x0102030405060708ull;
	in.user = (const uint8_t *)"0123456789abcdefghijklmnopqrstuv";
	in.user_len = 32;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(len, RDMAMSG_HS_LEN + 8 + RDMAMSG_HS_SESSION_USER,
	       "session request: 8-byte id, application bytes cut to 24");
	ok(len <= 56, "fits the 56 bytes of a connect request");
	is_int(rdmamsg__hs_decode(buf, len, &out), 0, "decodes");
	ok(out.kind == HS_SREQ && out.sid == in.sid, "kind and session id");
	ok(out.user_len == RDMAMSG_HS_SESSION_USER &&
		   !memcmp(out.user, in.user, RDMAMSG_HS_SESSION_USER),
	   "application bytes after the id");
	is_int(rdmamsg__hs_decode(buf, RDMAMSG_HS_LEN + 7, &out),
	       RDMAMSG_REJECT_HANDSHAKE, "session id cut short");
	buf[7] = RDMAMSG_HS_SESSION_USER + 1;
	is_int(rdmamsg__hs_decode(buf, sizeof(buf), &out),
	       RDMAMSG_REJECT_HANDSHAKE, "more than 24 application bytes");
	buf[7] = RDMAMSG_HS_SESSION_USER;
	memset(buf + RDMAMSG_HS_LEN, 0, 8);
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "session id 0");
	/* a reconnect carries the id and a count, no application bytes */
	in.kind = HS_RREQ;
	in.delivered = 0xfedcba9876543210ull;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(len, RDMAMSG_HS_LEN + 16, "reconnect: id and count only");
	is_int(rdmamsg__hs_decode(buf, len, &out), 0, "decodes");
	ok(out.sid == in.sid && out.delivered == in.delivered && !out.user_len,
	   "id and count survive (big-endian, 64 bits)");
	is_int(rdmamsg__hs_decode(buf, len - 1, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "count cut short");
	buf[7] = 1;
	is_int(rdmamsg__hs_decode(buf, sizeof(buf), &out),
	       RDMAMSG_REJECT_HANDSHAKE, "a reconnect with application bytes");
	in.kind = HS_RACC;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(len, RDMAMSG_HS_LEN + 8, "its accept: the count only");
	is_int(rdmamsg__hs_decode(buf, len, &out), 0, "decodes");
	ok(out.kind == HS_RACC && out.delivered == in.delivered && !out.sid,
	   "count survives");
	is_int(rdmamsg__hs_decode(buf, len - 1, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "count cut short");
	buf[3] = HS_RACC + 1;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "a kind past the last");

	/* an APM offer: the alternate port's LID, 4 application bytes fewer */
	plain_req(&in);
	in.user = (const uint8_t *)"0123456789abcdefghijklmnopqrstuv";
	in.user_len = 32;
	in.alt_lid = 0x1234;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(len, RDMAMSG_HS_LEN + RDMAMSG_HS_ALT_LEN + 28,
	       "APM offer: a 4-byte block, application bytes cut to 28");
	ok(len <= 56, "fits the 56 bytes of a connect request");
	is_int(buf[3], HS_REQ | RDMAMSG_HS_F_ALT, "flagged in the kind byte");
	is_int(rdmamsg__hs_decode(buf, len, &out), 0, "decodes");
	ok(out.kind == HS_REQ && out.alt_lid == 0x1234 && !out.dc &&
		   out.user_len == 28 && !memcmp(out.user, in.user, 28),
	   "kind, LID and application bytes survive");
	is_int(rdmamsg__hs_decode(buf, RDMAMSG_HS_LEN + 3, &out),
	       RDMAMSG_REJECT_HANDSHAKE, "offer cut short");
	buf[7] = 29;
	is_int(rdmamsg__hs_decode(buf, sizeof(buf), &out),
	       RDMAMSG_REJECT_HANDSHAKE, "more than 28 application bytes");
	buf[7] = 28;
	buf[RDMAMSG_HS_LEN + 3] = 1;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "reserved bytes not zero");
	buf[RDMAMSG_HS_LEN + 3] = 0;
	buf[RDMAMSG_HS_LEN] = 0;
	buf[RDMAMSG_HS_LEN + 1] = 0;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "LID 0");
	buf[RDMAMSG_HS_LEN] = 0xc0;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "a multicast LID");
	buf[RDMAMSG_HS_LEN] = 0x12;
	buf[RDMAMSG_HS_LEN + 1] = 0x34;
	buf[3] = HS_REJ | RDMAMSG_HS_F_ALT;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "no offer in a reject");
	buf[3] = HS_REQ | RDMAMSG_HS_F_ALT | RDMAMSG_HS_F_DC;
	is_int(rdmamsg__hs_decode(buf, sizeof(buf), &out),
	       RDMAMSG_REJECT_HANDSHAKE, "never with a DC block");
	in.kind = HS_SREQ;
	in.sid = 7;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(len, RDMAMSG_HS_LEN + 8 + RDMAMSG_HS_ALT_LEN + 20,
	       "session request with an offer: application bytes cut to 20");
	ok(len <= 56 && !rdmamsg__hs_decode(buf, len, &out) && out.sid == 7 &&
		   out.alt_lid == 0x1234 && out.user_len == 20,
	   "fits and decodes");
	in.kind = HS_RREQ;
	in.delivered = 99;
	len = rdmamsg__hs_encode(&in, buf);
	ok(len == RDMAMSG_HS_LEN + 16 + RDMAMSG_HS_ALT_LEN &&
		   !rdmamsg__hs_decode(buf, len, &out) && out.sid == 7 &&
		   out.delivered == 99 && out.alt_lid == 0x1234,
	   "a reconnect carries an offer after its id and count");
	in.kind = HS_REQ;
	in.alt_lid = 0;
	len = rdmamsg__hs_encode(&in, buf);
	ok(buf[3] == HS_REQ && len == RDMAMSG_HS_LEN + 32,
	   "no offer: no flag, no block, 32 application bytes");

	/* a DC session: the DC block after the session fields (new lanes,
	 * new tags at each reconnect), all within 56 bytes */
	in.kind = HS_SREQ;
	in.sid = 7;
	in.dc = 1;
	in.dc_dctn = 0x123456;
	in.dc_key = 0x0102030405060708ull;
	in.dc_tag = 0x1234;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(len, RDMAMSG_HS_LEN + 8 + RDMAMSG_HS_DC_LEN + 8,
	       "DC session request: application bytes cut to 8");
	ok(len <= 56 && !rdmamsg__hs_decode(buf, len, &out) && out.sid == 7 &&
		   out.dc && out.dc_tag == 0x1234 && out.user_len == 8 &&
		   !memcmp(out.user, in.user, 8),
	   "fits and decodes");
	buf[7] = 9;
	is_int(rdmamsg__hs_decode(buf, sizeof(buf), &out),
	       RDMAMSG_REJECT_HANDSHAKE, "more than 8 application bytes");
	in.kind = HS_RREQ;
	in.delivered = 99;
	len = rdmamsg__hs_encode(&in, buf);
	ok(len == RDMAMSG_HS_LEN + 16 + RDMAMSG_HS_DC_LEN && len <= 56 &&
		   !rdmamsg__hs_decode(buf, len, &out) && out.sid == 7 &&
		   out.delivered == 99 && out.dc_dctn == 0x123456 &&
		   out.dc_key == in.dc_key && out.dc_tag == 0x1234,
	   "DC reconnect: id, count and DC block (52 bytes)");
	is_int(rdmamsg__hs_decode(buf, len - 1, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "DC block cut short");
	in.kind = HS_RACC;
	len = rdmamsg__hs_encode(&in, buf);
	ok(len == RDMAMSG_HS_LEN + 8 + RDMAMSG_HS_DC_LEN &&
		   !rdmamsg__hs_decode(buf, len, &out) && out.kind == HS_RACC &&
		   out.delivered == 99 && out.dc_tag == 0x1234,
	   "its accept: count and DC block");
	buf[3] = HS_REJ | RDMAMSG_HS_F_DC;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "no DC block in a reject");

	/* the DC sender block (RDMAMSG_HS_CAP_DCSRC): an accept's DCIs and
	 * nonce after its application bytes, within the 196 bytes of a REP */
	in.kind = HS_ACC;
	in.caps = RDMAMSG_HS_CAP_DCSRC;
	in.user_len = RDMAMSG_HS_DC_USER;
	in.dc_nonce = 0x1122334455667788ull;
	in.dc_ndci = RDMAMSG_HS_DCSRC_DCIS;
	for (int i = 0; i < RDMAMSG_HS_DCSRC_DCIS; i++)
		in.dc_dci[i] = 0xabcd00u + (uint32_t)i * 0x10101u;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(len, RDMAMSG_HS_MAX, "DC accept with 16 DCIs: the longest");
	ok(len <= 196, "fits the 196 bytes IB allows in a connect reply");
	ok(!rdmamsg__hs_decode(buf, len, &out) && out.dc &&
		   out.dc_nonce == in.dc_nonce &&
		   out.dc_ndci == RDMAMSG_HS_DCSRC_DCIS &&
		   !memcmp(out.dc_dci, in.dc_dci, sizeof(in.dc_dci)) &&
		   out.user_len == RDMAMSG_HS_DC_USER &&
		   !memcmp(out.user, in.user, RDMAMSG_HS_DC_USER),
	   "decodes: nonce, DCIs, application bytes before them");
	is_int(rdmamsg__hs_decode(buf, len - 1, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "sender block cut short");
	buf[len - 49] = 17;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "17 DCIs refused");
	buf[len - 49] = 0;
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "no DCI refused");
	buf[len - 49] = RDMAMSG_HS_DCSRC_DCIS;
	memset(buf + len - 3, 0, 3);
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_HANDSHAKE,
	       "DCI number 0 refused");
	/* a peer without the capability sends none and reads none: the
	 * same bytes without the capability bit decode as before */
	len = rdmamsg__hs_encode(&in, buf);
	buf[19] &= (uint8_t)~RDMAMSG_HS_CAP_DCSRC;
	ok(!rdmamsg__hs_decode(buf, len, &out) && !out.dc_ndci &&
		   out.user_len == RDMAMSG_HS_DC_USER,
	   "without the capability the block is padding");
	in.kind = HS_RACC;
	in.user_len = 0;
	in.dc_ndci = 4;
	len = rdmamsg__hs_encode(&in, buf);
	ok(len == RDMAMSG_HS_LEN + 8 + RDMAMSG_HS_DC_LEN + 9 + 12 &&
		   !rdmamsg__hs_decode(buf, len, &out) && out.dc_ndci == 4 &&
		   out.dc_dci[3] == in.dc_dci[3] && out.delivered == 99,
	   "a reconnect's accept carries it too");
	in.kind = HS_REQ;
	len = rdmamsg__hs_encode(&in, buf);
	ok(len == RDMAMSG_HS_LEN + RDMAMSG_HS_DC_LEN &&
		   !rdmamsg__hs_decode(buf, len, &out) && !out.dc_ndci,
	   "a request has none (no room in 56 bytes: the hello)");
	in.caps = 0;
	in.dc_ndci = 0;
	in.dc = 0;

	setenv("RDMAMSG_TEST_PROTO_VERSION", "7", 1);
	in.kind = HS_REQ;
	len = rdmamsg__hs_encode(&in, buf);
	is_int(buf[2], 7, "test override of the version");
	is_int(rdmamsg__hs_decode(buf, len, &out), RDMAMSG_REJECT_VERSION,
	       "and it is refused");
	return done_testing();
}
