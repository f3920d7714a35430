/* SPDX-License-Identifier: MIT */
/*
 * lane.c -- unit test of lib/lane.h: the endpoint state machine's
 * properties (every state reachable, close possible from every live state
 * and always ending CLOSED, CLOSED terminal, sends only when UP, the
 * connection up only in UP, DRAINING and PEER_CLOSED, no way back from
 * DOWN, the
 * public view), the wr_id layout (round trip, the
 * fields never overlap) and routing by wr_id through the id table (a
 * freed owner's completions find nothing)
 */
#include "config.h"

#include <stdint.h>

#include "lane.h"
#include "tap.h"

/* reach -- bit set of the states reachable from s (s included) */
static unsigned int reach(enum rdmamsg__ep_st s)
{
	unsigned int seen = 1u << s, prev = 0;
	int f, t;

	while (seen != prev) {
		prev = seen;
		for (f = 0; f < EPS_COUNT; f++)
			for (t = 0; t < EPS_COUNT; t++)
				if ((seen >> f & 1) &&
				    rdmamsg__ep_st_legal(
					    (enum rdmamsg__ep_st)f,
					    (enum rdmamsg__ep_st)t))
					seen |= 1u << t;
	}
	return seen;
}

static void test_states(void)
{
	const unsigned int all = (1u << EPS_COUNT) - 1;
	int s, t, good;

	ok(reach(EPS_IDLE) == all, "every state is reachable from IDLE");
	good = 1;
	for (s = 0; s < EPS_COUNT; s++)
		if (!(reach((enum rdmamsg__ep_st)s) >> EPS_CLOSED & 1))
			good = 0;
	ok(good, "CLOSED is reachable from every state");
	good = 1;
	for (t = 0; t < EPS_COUNT; t++)
		if (rdmamsg__ep_st_legal(EPS_CLOSED, (enum rdmamsg__ep_st)t))
			good = 0;
	ok(good, "CLOSED is terminal");
	good = 1;
	for (s = 0; s < EPS_COUNT; s++)
		if (rdmamsg__ep_st_legal((enum rdmamsg__ep_st)s,
					 (enum rdmamsg__ep_st)s))
			good = 0;
	ok(good, "no state moves to itself");
	good = 1;
	for (s = 0; s < EPS_COUNT; s++)
		if (s != EPS_DRAINING && s != EPS_FLUSHING && s != EPS_CLOSED &&
		    !rdmamsg__ep_st_legal((enum rdmamsg__ep_st)s,
					  EPS_DRAINING) &&
		    !rdmamsg__ep_st_legal((enum rdmamsg__ep_st)s, EPS_FLUSHING))
			good = 0;
	ok(good, "close (-> DRAINING or FLUSHING) is legal from every live "
		 "state");
	good = 1;
	for (s = 0; s < EPS_COUNT; s++)
		if ((s != EPS_UP && s != EPS_PEER_CLOSED) !=
		    !rdmamsg__ep_st_legal((enum rdmamsg__ep_st)s, EPS_DRAINING))
			good = 0;
	ok(good && !rdmamsg__ep_st_legal(EPS_UP, EPS_FLUSHING) &&
		   !rdmamsg__ep_st_legal(EPS_PEER_CLOSED, EPS_FLUSHING),
	   "DRAINING (a close on a live connection) only from UP and "
	   "PEER_CLOSED, and they close only through it");
	good = 1;
	for (s = 0; s < EPS_COUNT; s++)
		if ((s == EPS_UP) !=
		    rdmamsg__ep_st_legal((enum rdmamsg__ep_st)s,
					 EPS_PEER_CLOSED))
			good = 0;
	ok(good && rdmamsg__ep_st_legal(EPS_PEER_CLOSED, EPS_DOWN) &&
		   !(reach(EPS_PEER_CLOSED) >> EPS_UP & 1),
	   "PEER_CLOSED (the peer's goodbye read) only from UP, on to DOWN, "
	   "never back to UP");
	good = 1;
	for (s = 0; s < EPS_COUNT; s++)
		if (s != EPS_FLUSHING &&
		    rdmamsg__ep_st_legal((enum rdmamsg__ep_st)s, EPS_CLOSED))
			good = 0;
	ok(good, "CLOSED only after FLUSHING (the close callback runs once)");
	good = 1;
	for (s = 0; s < EPS_COUNT; s++)
		if (rdmamsg__ep_st_lane_up((enum rdmamsg__ep_st)s) !=
		    (s == EPS_UP || s == EPS_DRAINING || s == EPS_PEER_CLOSED))
			good = 0;
	ok(good, "the connection counts as up exactly in UP, DRAINING and "
		 "PEER_CLOSED");
	good = 1;
	for (s = 0; s < EPS_COUNT; s++)
		if (s != EPS_CONNECTING &&
		    rdmamsg__ep_st_legal((enum rdmamsg__ep_st)s, EPS_UP))
			good = 0;
	ok(good, "UP only from CONNECTING");
	ok(!(reach(EPS_DOWN) >> EPS_UP & 1) &&
		   !(reach(EPS_DOWN) >> EPS_CONNECTING & 1),
	   "no way back to CONNECTING or UP from DOWN (no reconnect yet)");
	ok(!(reach(EPS_DRAINING) >> EPS_DOWN & 1) &&
		   !(reach(EPS_FLUSHING) >> EPS_DOWN & 1),
	   "a failure while closing does not leave the close");
	good = 1;
	for (s = 0; s < EPS_COUNT; s++) {
		enum rdmamsg__ep_st st = (enum rdmamsg__ep_st)s;

		if (rdmamsg__ep_st_can_send(st) != (s == EPS_UP) ||
		    (rdmamsg__ep_st_public(st) == RDMAMSG_EP_CONNECTED) !=
			    (s == EPS_UP))
			good = 0;
	}
	ok(good, "sends allowed, and CONNECTED reported, exactly in UP");
	ok(rdmamsg__ep_st_public(EPS_IDLE) == RDMAMSG_EP_CONNECTING &&
		   rdmamsg__ep_st_public(EPS_RESOLVING) ==
			   RDMAMSG_EP_CONNECTING &&
		   rdmamsg__ep_st_public(EPS_CONNECTING) ==
			   RDMAMSG_EP_CONNECTING &&
		   rdmamsg__ep_st_public(EPS_DOWN) == RDMAMSG_EP_DISCONNECTED &&
		   rdmamsg__ep_st_public(EPS_PEER_CLOSED) ==
			   RDMAMSG_EP_DISCONNECTED &&
		   rdmamsg__ep_st_public(EPS_DRAINING) == RDMAMSG_EP_CLOSING &&
		   rdmamsg__ep_st_public(EPS_FLUSHING) == RDMAMSG_EP_CLOSING &&
		   rdmamsg__ep_st_public(EPS_CLOSED) == RDMAMSG_EP_CLOSING,
	   "the public view of each state");
	ok(!rdmamsg__ep_st_legal(EPS_COUNT, EPS_UP) &&
		   !rdmamsg__ep_st_legal(EPS_IDLE, EPS_COUNT) &&
		   !rdmamsg__ep_st_legal((enum rdmamsg__ep_st) - 1, EPS_UP),
	   "out-of-range states are never legal");
}

static void test_wrid(void)
{
	static const uint32_t lanes[] = {0, 1, 2, 4095, (1u << 31) - 1};
	static const uint64_t owns[] = {0, 1, 0xfffffffeull, 0xffffffffull};
	size_t i, j;
	int good = 1, send;

	for (send = 0; send < 2; send++)
		for (i = 0; i < sizeof(lanes) / sizeof(lanes[0]); i++)
			for (j = 0; j < sizeof(owns) / sizeof(owns[0]); j++) {
				uint64_t w =
					rdmamsg__wrid(send, lanes[i], owns[j]);

				if (rdmamsg__wrid_lane(w) != lanes[i] ||
				    rdmamsg__wrid_own(w) != owns[j] ||
				    !(w & RDMAMSG__WRID_SEND) != !send)
					good = 0;
			}
	ok(good, "wr_id: direction, lane and own value round-trip");
	ok((RDMAMSG__WRID_SEND &
	    (RDMAMSG__WRID_LANE_MASK << RDMAMSG__WRID_LANE_SHIFT)) == 0 &&
		   ((RDMAMSG__WRID_LANE_MASK << RDMAMSG__WRID_LANE_SHIFT) &
		    RDMAMSG__WRID_OWN_MASK) == 0 &&
		   (RDMAMSG__WRID_SEND |
		    (RDMAMSG__WRID_LANE_MASK << RDMAMSG__WRID_LANE_SHIFT) |
		    RDMAMSG__WRID_OWN_MASK) == UINT64_MAX,
	   "wr_id: the fields cover 64 bits without overlapping");
	ok(rdmamsg__wrid(0, (1u << 31) | 5, 0) == rdmamsg__wrid(0, 5, 0) &&
		   rdmamsg__wrid_lane(rdmamsg__wrid(1, 7, UINT64_MAX)) == 7,
	   "wr_id: out-of-range parts are masked, never spill over");
	ok(rdmamsg__wrid_tag(((uint64_t)3 << 32) | 9) ==
			   (3u << RDMAMSG__WRID_TAG_GEN_SHIFT | 9) &&
		   rdmamsg__wrid_tag(((uint64_t)0x801 << 32) | 9) ==
			   rdmamsg__wrid_tag(((uint64_t)1 << 32) | 9) &&
		   rdmamsg__wrid_tag(((uint64_t)1 << 32) | 9) !=
			   rdmamsg__wrid_tag(((uint64_t)2 << 32) | 9) &&
		   (rdmamsg__wrid_tag(UINT64_MAX) & ~RDMAMSG__WRID_LANE_MASK) ==
			   0,
	   "wr_id tag: index plus the generation's low bits, in 31 bits");
}

/* test_route -- completions find their owner through the id table; one of
 * an owner that was freed finds nothing, also after its slot was reused */
static void test_route(void)
{
	struct rdmamsg__idt t;
	int a, b, c, good = 1;
	uint64_t ha, hb, hc, wa, wb;
	uint32_t k;

	rdmamsg__idt_init(&t, RDMAMSG__WRID_TAG_INDEX);
	if (rdmamsg__idt_add(&t, &a, &ha) || rdmamsg__idt_add(&t, &b, &hb))
		bail_out("idt_add");
	wa = rdmamsg__wrid(0, rdmamsg__wrid_tag(ha), 17);
	wb = rdmamsg__wrid(1, rdmamsg__wrid_tag(hb), 0xfffffffful);
	ok(rdmamsg__wrid_route(&t, wa) == &a &&
		   rdmamsg__wrid_route(&t, wb) == &b,
	   "route: receive and send wr_ids find their owners");
	rdmamsg__idt_del(&t, ha);
	ok(rdmamsg__wrid_route(&t, wa) == NULL,
	   "route: a freed owner's wr_id finds nothing");
	if (rdmamsg__idt_add(&t, &c, &hc))
		bail_out("idt_add");
	ok((uint32_t)hc == (uint32_t)ha && rdmamsg__wrid_route(&t, wa) == NULL,
	   "route: nor once its slot holds another owner");
	ok(rdmamsg__wrid_route(
		   &t, rdmamsg__wrid(0, rdmamsg__wrid_tag(hc), 1)) == &c,
	   "route: the new owner's wr_ids find it");
	/* the tag keeps 11 bits of the generation: the slot's next 2046
	 * owners are told apart, the 2048th owner after a's matches a's tag,
	 * which is why the interface also checks wc.qp_num */
	for (k = 0; k < 2046 && good; k++) {
		rdmamsg__idt_del(&t, hc);
		if (rdmamsg__idt_add(&t, &c, &hc) ||
		    rdmamsg__wrid_route(&t, wa) != NULL)
			good = 0;
	}
	ok(good, "route: 2046 more owners of the slot, still nothing");
	rdmamsg__idt_del(&t, hc);
	if (rdmamsg__idt_add(&t, &c, &hc))
		bail_out("idt_add");
	ok(rdmamsg__wrid_route(&t, wa) == &c,
	   "route: the generation bits wrap after 2048 owners (qp_num "
	   "decides)");
	ok(rdmamsg__wrid_route(&t, 0) == NULL &&
		   rdmamsg__wrid_route(&t, rdmamsg__wrid(0, 0, 5)) == NULL &&
		   rdmamsg__wrid_route(&t, rdmamsg__wrid(1, 4000, 5)) == NULL &&
		   rdmamsg__wrid_route(&t, UINT64_MAX) == NULL,
	   "route: index 0, out of range and forged wr_ids find nothing");
	rdmamsg__idt_fini(&t);
}

int main(void)
{
	test_states();
	test_wrid();
	test_route();
	return done_testing();
}
