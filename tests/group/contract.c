/* SPDX-License-Identifier: MIT */
/*
 * contract.c -- what a multicast group promises its users (rdmamsg_group_
 * join(3)), one context, a publisher and a subscriber group at one
 * address: messages of 0 bytes and of exactly the maximum size delivered,
 * one byte more refused with -EMSGSIZE; and, in reliable mode, a message
 * larger than the subscriber's maximum size reported lost to it (not asked
 * for again forever: the publisher, which waits for it, would stall at its
 * window), the messages after it delivered in order; a reliable publisher
 * that closes right after a burst whose tail a subscriber missed (its
 * receive queue full) still gets the tail to it, or reported lost: it
 * heartbeats while it lingers.  A reliable subscriber that closes says
 * so: the publisher no longer waits for it (nor counts it) at once, not
 * 5 s later.  An idle publisher's count of receivers is current.  A
 * default-mode publisher's last heartbeat, lost with the tail of a burst,
 * goes again: the subscriber reports the tail lost.  A reliable publisher
 * with a minimum of receivers waits for them: a subscriber that missed its
 * heartbeat at the join still gets every message from the first.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "../core/util.h"

#define WINDOW 64
#define NMSG   400

struct member {
	struct rdmamsg_group *g;
	uint64_t only; /* a subscriber: counts this publisher's only (0: all) */
	int joined, status, closed;
	uint64_t received, lost, loss_calls, bad, next, published, pub_err;
	size_t last_len;
};

static void m_join(struct rdmamsg_group *g, int st, void *arg)
{
	struct member *m = arg;

	(void)g;
	m->status = st;
	m->joined = 1;
}

static void m_msg(struct rdmamsg_group *g, const struct rdmamsg_group_msg *msg,
		  void *arg)
{
	struct member *m = arg;
	const unsigned char *d = msg->data;
	size_t i;

	(void)g;
	if (m->only && msg->publisher != m->only)
		return;
	if (msg->seq != m->next)
		m->bad++;
	for (i = 0; i < msg->len; i++)
		if (d[i] != (unsigned char)(msg->seq + i))
			m->bad++;
	m->next = msg->seq + 1;
	m->last_len = msg->len;
	m->received++;
}

static void m_loss(struct rdmamsg_group *g, uint64_t pub, uint64_t first,
		   uint64_t count, void *arg)
{
	struct member *m = arg;

	(void)g;
	if (m->only && pub != m->only)
		return;
	if (first != m->next)
		m->bad++;
	m->next = first + count;
	m->lost += count;
	m->loss_calls++;
}

static void m_pub(struct rdmamsg_group *g, void *op_ctx, int st, void *arg)
{
	struct member *m = arg;

	(void)g;
	(void)op_ctx;
	if (st)
		m->pub_err++;
	m->published++;
}

static void m_closed(struct rdmamsg_group *g, void *arg)
{
	(void)g;
	((struct member *)arg)->closed = 1;
}

static const struct rdmamsg_group_cbs cbs = {
	.on_join = m_join,
	.on_message = m_msg,
	.on_loss = m_loss,
	.on_publish = m_pub,
};

/* join_min -- m joins addr as role (reliable with window if not 0), with
 * the largest message max, rdepth receives (0: the default), batching
 * on or off, publishing once min_rcv subscribers are heard */
static void join_min(struct rdmamsg_ctx *ctx, struct member *m,
		     const char *addr, unsigned int role, uint32_t window,
		     size_t max, uint32_t rdepth, int batch, uint32_t min_rcv)
{
	struct rdmamsg_group_attr *a = NULL;

	memset(m, 0, sizeof(*m));
	ok(!rdmamsg_group_attr_new(&a) &&
		   !rdmamsg_group_attr_set_role(a, role) &&
		   !rdmamsg_group_attr_set_reliable(a, window) &&
		   !rdmamsg_group_attr_set_min_receivers(a, min_rcv) &&
		   !rdmamsg_group_attr_set_max_msg_size(a, max) &&
		   (!rdepth || !rdmamsg_group_attr_set_recv_depth(a, rdepth)) &&
		   !rdmamsg_group_attr_set_batch(a, batch) &&
		   !rdmamsg_group_join(ctx, addr, a, &cbs, m, &m->g),
	   "join %s (role %u, window %u, max %zu)", addr, role, window, max);
	rdmamsg_group_attr_delete(&a);
	test_run_until(ctx, &m->joined, 10000);
	is_int(m->status, 0, "joined");
}

static void join_ex(struct rdmamsg_ctx *ctx, struct member *m, const char *addr,
		    unsigned int role, uint32_t window, size_t max,
		    uint32_t rdepth, int batch)
{
	join_min(ctx, m, addr, role, window, max, rdepth, batch, 0);
}

static void join(struct rdmamsg_ctx *ctx, struct member *m, const char *addr,
		 unsigned int role, uint32_t window, size_t max)
{
	join_ex(ctx, m, addr, role, window, max, 0, 1);
}

/* publish -- message seq of len bytes, retried after progress while the
 * group says -EAGAIN (up to 20 s): 0 or the error */
static int publish(struct rdmamsg_ctx *ctx, struct member *p, uint64_t seq,
		   size_t len)
{
	static unsigned char buf[64 << 10];
	long long end = test_now_ms() + 20000;
	size_t i;
	int ret;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(seq + i);
	while ((ret = rdmamsg_group_publish(p->g, buf, len, NULL)) == -EAGAIN &&
	       test_now_ms() < end)
		test_idle(ctx, 1);
	return ret;
}

/* closing -- both close; until both close callbacks ran */
static void closing(struct rdmamsg_ctx *ctx, struct member *p, struct member *s)
{
	ok(!rdmamsg_group_close(p->g, m_closed) &&
		   !rdmamsg_group_close(s->g, m_closed),
	   "close both");
	test_run_until(ctx, &p->closed, 10000);
	test_run_until(ctx, &s->closed, 10000);
	ok(p->closed && s->closed, "both closed");
}

/* sizes -- 0 bytes and exactly the maximum go, one more is -EMSGSIZE */
static void sizes(struct rdmamsg_ctx *ctx, uint32_t window)
{
	struct member p, s;
	long long end;
	int ret;

	diag("sizes, window %u", window);
	join(ctx, &s, "239.1.2.90", RDMAMSG_GROUP_SUBSCRIBER, window, 20000);
	join(ctx, &p, "239.1.2.90", RDMAMSG_GROUP_PUBLISHER, window, 20000);
	test_idle(ctx, 300); /* the subscriber hears of the publisher */
	is_int(publish(ctx, &p, 0, 0), 0, "0 bytes published");
	is_int(publish(ctx, &p, 1, 20000), 0, "exactly the maximum published");
	ret = publish(ctx, &p, 2, 20001);
	is_int(ret, -EMSGSIZE, "the maximum + 1: -EMSGSIZE");
	is_int(publish(ctx, &p, 2, 7), 0, "then 7 bytes");
	end = test_now_ms() + 10000;
	while (s.received + s.lost < 3 && test_now_ms() < end)
		test_idle(ctx, 10);
	is_int(s.received, 3, "all three received");
	is_int(s.lost, 0, "none lost");
	is_int(s.bad, 0, "in order, contents right");
	is_int(p.published, 3, "three on_publish");
	is_int(p.pub_err, 0, "all sent");
	closing(ctx, &p, &s);
}

/* too_big -- a reliable subscriber whose maximum is below a message's
 * size: reported lost, the rest delivered, the publisher not held */
static void too_big(struct rdmamsg_ctx *ctx)
{
	struct member p, s;
	struct rdmamsg_group_stats st;
	long long end;
	uint64_t i, sent = 0;

	diag("a message above the subscriber's maximum, reliable");
	join(ctx, &s, "239.1.2.91", RDMAMSG_GROUP_SUBSCRIBER, WINDOW, 1000);
	join(ctx, &p, "239.1.2.91", RDMAMSG_GROUP_PUBLISHER, WINDOW, 9000);
	test_idle(ctx, 300);
	for (i = 0; i < NMSG; i++) {
		/* 2000 bytes: in a batch or a headed datagram; 9000:
		 * fragments; 4090: a bare datagram (lib/proto.h) */
		size_t len = i == 5	? 2000
			     : i == 9	? 9000
			     : i == 200 ? 4090
					: 100;

		if (publish(ctx, &p, i, len))
			break;
		sent++;
	}
	is_int(sent, NMSG, "the publisher is not held by it");
	end = test_now_ms() + 20000;
	while (s.received + s.lost < sent && test_now_ms() < end)
		test_idle(ctx, 10);
	is_int(s.lost, 3, "the three reported lost");
	is_int(s.received, sent - 3, "the others received");
	is_int(s.bad, 0, "in order, contents right");
	rdmamsg_group_query(s.g, &st);
	is_int(st.msgs_lost, 3, "msgs_lost counts them");
	is_int(st.msgs_received, sent - 3, "msgs_received the others");
	closing(ctx, &p, &s);
}

/* close_tail -- a publisher (reliable with window, or not: 0) closes at
 * once after a burst whose tail the subscriber's receive queue (16) had
 * no room for: the subscriber learns of the tail (a reliable publisher's
 * heartbeats while it lingers, the last heartbeat) and gets it repaired,
 * or reported lost: never silently missing */
static void close_tail(struct rdmamsg_ctx *ctx, uint32_t window)
{
	struct member p, s;
	struct rdmamsg_group_stats st;
	long long end;
	uint64_t i, sent = 0;
	static unsigned char buf[100];

	diag("a publisher (window %u) closes after a burst the subscriber "
	     "missed the tail of",
	     window);
	join_ex(ctx, &s, "239.1.2.92", RDMAMSG_GROUP_SUBSCRIBER, window, 1000,
		16, 1);
	join_ex(ctx, &p, "239.1.2.92", RDMAMSG_GROUP_PUBLISHER, window, 1000, 0,
		0);
	test_idle(ctx, 300);
	/* no progress in between: the subscriber reposts no receive */
	for (i = 0; i < 200; i++) {
		size_t k;

		for (k = 0; k < sizeof(buf); k++)
			buf[k] = (unsigned char)(i + k);
		if (rdmamsg_group_publish(p.g, buf, sizeof(buf), NULL))
			break;
		sent++;
	}
	is_int(sent, 200, "200 published in a burst");
	ok(!rdmamsg_group_close(p.g, m_closed), "the publisher closes");
	/* a publisher gone silent is given up after 5 s: 12 s is plenty */
	end = test_now_ms() + 12000;
	while ((s.received + s.lost < sent || !p.closed) && test_now_ms() < end)
		test_idle(ctx, 10);
	ok(p.closed, "the publisher closed");
	rdmamsg_group_query(s.g, &st);
	diag("received %llu, lost %llu, naks %llu",
	     (unsigned long long)s.received, (unsigned long long)s.lost,
	     (unsigned long long)st.naks_sent);
	ok(st.naks_sent || s.lost,
	   "the subscriber had missed some: asked for, or reported lost");
	is_int(s.received + s.lost, sent,
	       "received + reported lost == published");
	is_int(s.bad, 0, "in order, contents right");
	is_int(p.published, sent, "every on_publish once");
	s.closed = 0;
	ok(!rdmamsg_group_close(s.g, m_closed), "the subscriber closes");
	test_run_until(ctx, &s.closed, 10000);
	ok(s.closed, "closed");
}

/* run3 -- drive the contexts of a (not NULL ones) for ms */
static void run3(struct rdmamsg_ctx *a, struct rdmamsg_ctx *b,
		 struct rdmamsg_ctx *c, int ms)
{
	long long end = test_now_ms() + ms;

	do {
		rdmamsg_ctx_progress(a);
		if (b)
			rdmamsg_ctx_progress(b);
		if (c)
			rdmamsg_ctx_progress(c);
		usleep(200);
	} while (test_now_ms() < end);
}

/* receivers -- what the publisher's group_query says of its receivers */
static uint64_t receivers(const struct member *p)
{
	struct rdmamsg_group_stats st;

	memset(&st, 0xff, sizeof(st));
	if (rdmamsg_group_query(p->g, &st))
		return UINT64_MAX;
	return st.receivers;
}

/* publish_run -- message seq of len bytes, retried after a pass of a and
 * b (b may be NULL) while the group says -EAGAIN, for up to ms: 0 or the
 * error */
static int publish_run(struct rdmamsg_ctx *a, struct rdmamsg_ctx *b,
		       struct member *p, uint64_t seq, size_t len, int ms)
{
	static unsigned char buf[1000];
	long long end = test_now_ms() + ms;
	size_t i;
	int ret;

	for (i = 0; i < len && i < sizeof(buf); i++)
		buf[i] = (unsigned char)(seq + i);
	while ((ret = rdmamsg_group_publish(p->g, buf, len, NULL)) == -EAGAIN &&
	       test_now_ms() < end)
		run3(a, b, NULL, 0);
	return ret;
}

/* wait_receivers -- run a, b and c until the reliable publisher p counts
 * n receivers (up to ms): what it counts then */
static uint64_t wait_receivers(struct rdmamsg_ctx *a, struct rdmamsg_ctx *b,
			       struct rdmamsg_ctx *c, const struct member *p,
			       uint64_t n, int ms)
{
	long long end = test_now_ms() + ms;

	while (receivers(p) != n && test_now_ms() < end)
		run3(a, b, c, 5);
	return receivers(p);
}

/*
 * leave_fast -- a reliable publisher (flow control: the slowest) and two
 * subscribers, each on a context of its own; one stops (its context not
 * run) and holds the publisher at its window, then closes: its goodbye
 * drops it from the publisher's receivers at once, far sooner than the
 * 5 s after which a silent one is no longer waited for, and the
 * publisher goes on at full rate with the other.
 */
static void leave_fast(void)
{
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx(), *c = test_ctx();
	struct member p, s1, s2;
	uint64_t sent = 0, i, n;
	long long t0, took;

	diag("a reliable subscriber that closes is no longer waited for");
	join(b, &s1, "239.1.2.95", RDMAMSG_GROUP_SUBSCRIBER, WINDOW, 1000);
	join(c, &s2, "239.1.2.95", RDMAMSG_GROUP_SUBSCRIBER, WINDOW, 1000);
	join(a, &p, "239.1.2.95", RDMAMSG_GROUP_PUBLISHER, WINDOW, 1000);
	is_int(wait_receivers(a, b, c, &p, 2, 5000), 2,
	       "the publisher waits for both subscribers");
	/* c no longer runs: s2 stays where it is */
	while (!publish_run(a, b, &p, sent, 100, 500))
		sent++;
	is_int(sent, WINDOW, "held at its window by the stopped subscriber");
	ok(!rdmamsg_group_close(s2.g, m_closed), "the stopped one closes");
	t0 = test_now_ms();
	while (!s2.closed && test_now_ms() < t0 + 3000)
		run3(a, b, c, 1);
	ok(s2.closed, "it closed");
	n = wait_receivers(a, b, NULL, &p, 1, 1000);
	took = test_now_ms() - t0;
	ok(n == 1 && took < 1500,
	   "the publisher counts one receiver %lld ms after the close (a "
	   "silent one: 5 s)",
	   took);
	t0 = test_now_ms();
	for (i = 0; i < 200; i++, sent++)
		if (publish_run(a, b, &p, sent, 100, 20000))
			break;
	took = test_now_ms() - t0;
	ok(i == 200 && took < 2500,
	   "200 more published in %lld ms, not held for the one that left",
	   took);
	t0 = test_now_ms();
	while (s1.received + s1.lost < sent && test_now_ms() < t0 + 10000)
		run3(a, b, NULL, 5);
	ok(s1.received == sent && !s1.lost && !s1.bad,
	   "the other got all %llu, in order (%llu received, %llu lost)",
	   (unsigned long long)sent, (unsigned long long)s1.received,
	   (unsigned long long)s1.lost);
	ok(!rdmamsg_group_close(p.g, m_closed) &&
		   !rdmamsg_group_close(s1.g, m_closed),
	   "close the others");
	t0 = test_now_ms();
	while ((!p.closed || !s1.closed) && test_now_ms() < t0 + 10000)
		run3(a, b, NULL, 5);
	ok(p.closed && s1.closed, "closed");
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b) &&
		   !rdmamsg_ctx_destroy(&c),
	   "contexts destroyed");
}

/*
 * receivers_idle -- a reliable publisher that publishes nothing still
 * counts only the subscribers it heard from lately: one whose context
 * stops running is no longer counted after 5 s (it used to be counted
 * until the publisher published again), and counted again once heard.
 */
static void receivers_idle(void)
{
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx();
	struct member p, s;
	uint64_t i;
	long long end;

	diag("an idle publisher's receivers count is current");
	join(b, &s, "239.1.2.96", RDMAMSG_GROUP_SUBSCRIBER, WINDOW, 1000);
	join(a, &p, "239.1.2.96", RDMAMSG_GROUP_PUBLISHER, WINDOW, 1000);
	is_int(wait_receivers(a, b, NULL, &p, 1, 5000), 1,
	       "the publisher counts the subscriber");
	for (i = 0; i < 10; i++)
		if (publish_run(a, b, &p, i, 100, 5000))
			break;
	end = test_now_ms() + 5000;
	while (s.received < 10 && test_now_ms() < end)
		run3(a, b, NULL, 5);
	is_int(s.received, 10, "10 messages received");
	/* the subscriber's context stops: silent, without a goodbye */
	run3(a, NULL, NULL, 6000);
	is_int(receivers(&p), 0,
	       "6 s later the idle publisher counts none (silent for > 5 s)");
	is_int(wait_receivers(a, b, NULL, &p, 1, 3000), 1,
	       "counted again once it runs again");
	ok(!rdmamsg_group_close(p.g, m_closed) &&
		   !rdmamsg_group_close(s.g, m_closed),
	   "close both");
	end = test_now_ms() + 10000;
	while ((!p.closed || !s.closed) && test_now_ms() < end)
		run3(a, b, NULL, 5);
	ok(p.closed && s.closed, "both closed");
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b),
	   "contexts destroyed");
}

/*
 * fin_lost -- default mode: a publisher closes at once after a burst
 * whose tail the subscriber's receive queue (16) had no room for, and
 * the subscriber's context does not run until the publisher's last
 * heartbeat went (lost too: the queue is still full).  The last
 * heartbeat goes again while the publisher lingers: the subscriber
 * learns of the tail and reports it lost (it used to hear of nothing
 * after the 16 its queue held: messages neither received nor reported).
 */
static void fin_lost(void)
{
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx();
	struct rdmamsg_group_stats st;
	struct member p, s;
	static unsigned char buf[100];
	uint64_t i, sent = 0, hb;
	long long end;

	diag("default mode: the last heartbeat after a lost tail, lost too");
	join_ex(b, &s, "239.1.2.97", RDMAMSG_GROUP_SUBSCRIBER, 0, 1000, 16, 1);
	join_ex(a, &p, "239.1.2.97", RDMAMSG_GROUP_PUBLISHER, 0, 1000, 0, 0);
	run3(a, b, NULL, 300); /* the subscriber hears of the publisher */
	for (i = 0; i < 200; i++) {
		size_t k;

		for (k = 0; k < sizeof(buf); k++)
			buf[k] = (unsigned char)(i + k);
		if (rdmamsg_group_publish(p.g, buf, sizeof(buf), NULL))
			break;
		sent++;
	}
	is_int(sent, 200, "200 published in a burst");
	rdmamsg_group_query(p.g, &st);
	hb = st.heartbeats_sent;
	ok(!rdmamsg_group_close(p.g, m_closed), "the publisher closes");
	/* only the publisher runs until its last heartbeat went */
	end = test_now_ms() + 3000;
	do {
		run3(a, NULL, NULL, 0);
		if (p.closed)
			break; /* (freed) */
		rdmamsg_group_query(p.g, &st);
	} while (st.heartbeats_sent == hb && test_now_ms() < end);
	ok(p.closed || st.heartbeats_sent > hb, "its last heartbeat went");
	end = test_now_ms() + 5000;
	while ((s.received + s.lost < sent || !p.closed) && test_now_ms() < end)
		run3(a, b, NULL, 5);
	ok(p.closed, "the publisher closed");
	diag("received %llu, lost %llu", (unsigned long long)s.received,
	     (unsigned long long)s.lost);
	ok(s.received < sent, "the subscriber's queue held only some");
	is_int(s.received + s.lost, sent,
	       "received + reported lost == published");
	is_int(s.bad, 0, "in order, contents right");
	ok(!rdmamsg_group_close(s.g, m_closed), "the subscriber closes");
	test_run_until(b, &s.closed, 10000);
	ok(s.closed, "closed");
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b),
	   "contexts destroyed");
}

/*
 * missed_join -- a reliable subscriber whose receive queue (16) a
 * default-mode publisher filled while its context did not run misses the
 * heartbeat of a reliable publisher that joins then.  With min_rcv 0 the
 * publisher publishes 50 messages at once, into the full queue: the
 * subscriber first hears of it at its next heartbeat and starts there, as
 * a late joiner (none of the 50 received, none reported lost).  With
 * min_rcv 1 the publisher is refused (-EAGAIN) until it hears from the
 * subscriber, which then gets all 50 from the first.
 */
static void missed_join(const char *addr, uint32_t min_rcv)
{
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx(), *c = test_ctx();
	struct rdmamsg_group_stats st;
	static unsigned char buf[100];
	struct member p, s, f;
	uint64_t i, sent = 0;
	long long end;
	int ret;

	diag("a subscriber misses the join of a publisher (min receivers %u)",
	     min_rcv);
	join_ex(b, &s, addr, RDMAMSG_GROUP_SUBSCRIBER, WINDOW, 1000, 16, 1);
	join_ex(c, &f, addr, RDMAMSG_GROUP_PUBLISHER, 0, 1000, 0, 0);
	for (i = 0; i < 20; i++)
		if (rdmamsg_group_publish(f.g, buf, sizeof(buf), NULL))
			break;
	is_int(i, 20, "the queue filler published 20");
	run3(c, NULL, NULL, 50);
	join_min(a, &p, addr, RDMAMSG_GROUP_PUBLISHER, WINDOW, 1000, 0, 1,
		 min_rcv);
	ok(!rdmamsg_group_get_id(p.g, &s.only), "the publisher's id");
	if (min_rcv) {
		memset(&st, 0, sizeof(st));
		ret = rdmamsg_group_publish(p.g, buf, sizeof(buf), NULL);
		is_int(ret, -EAGAIN, "refused before a subscriber is heard");
		ok(!rdmamsg_group_query(p.g, &st) && st.flow_control_stalls &&
			   !st.receivers,
		   "a stall, no receiver");
		for (; sent < 50; sent++)
			if (publish_run(a, b, &p, sent, 100, 10000))
				break;
	} else {
		for (; sent < 50; sent++)
			if (publish_run(a, NULL, &p, sent, 100, 10000))
				break;
	}
	is_int(sent, 50, "50 published");
	end = test_now_ms() + 5000;
	while (s.received + s.lost < sent && test_now_ms() < end)
		run3(a, b, c, 5);
	run3(a, b, c, 300); /* the publisher's heartbeats: 3 periods */
	diag("received %llu, lost %llu", (unsigned long long)s.received,
	     (unsigned long long)s.lost);
	if (min_rcv)
		ok(s.received == sent && !s.lost && !s.bad,
		   "every message from the first, in order");
	else
		ok(!s.received && !s.lost,
		   "without: a late start, at the next heartbeat");
	ok(!rdmamsg_group_close(p.g, m_closed) &&
		   !rdmamsg_group_close(f.g, m_closed) &&
		   !rdmamsg_group_close(s.g, m_closed),
	   "close all");
	end = test_now_ms() + 10000;
	while ((!p.closed || !f.closed || !s.closed) && test_now_ms() < end)
		run3(a, b, c, 5);
	ok(p.closed && f.closed && s.closed, "closed");
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b) &&
		   !rdmamsg_ctx_destroy(&c),
	   "contexts destroyed");
}

int main(void)
{
	struct rdmamsg_ctx *ctx;

	test_setup("group-contract");
	ctx = test_ctx();
	sizes(ctx, 0);
	sizes(ctx, WINDOW);
	too_big(ctx);
	close_tail(ctx, 1024);
	close_tail(ctx, 0);
	leave_fast();
	receivers_idle();
	fin_lost();
	missed_join("239.1.2.98", 0);
	missed_join("239.1.2.99", 1);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	return done_testing();
}
