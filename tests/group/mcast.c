/* SPDX-License-Identifier: MIT */
/*
 * mcast.c -- multicast groups: one publisher and three subscriber
 * processes on one host; messages of mixed sizes (8 B .. 64 KiB, so
 * fragmented and reassembled), each delivered once, in order, content
 * verified, from one publisher id with consecutive sequence numbers.  A
 * second round drops every 7th datagram at one subscriber (the test hook
 * RDMAMSG_TEST_MC_DROP): it must report every loss exactly (received +
 * reported == published, the counters agree with the callbacks), the
 * others lose nothing.  Then the documented errors.
 *
 * Messages per round: 20,000 (600 under valgrind); RDMAMSG_TEST_MC_MSGS=N
 * sets N.  RDMAMSG_TEST_MC_LONG=1 is the long run (tests/group/
 * mcast-long.sh): 1,000,000 messages (or N), the first round only.
 *
 * The library has no flow control yet (default mode): the test paces the
 * publisher itself, from the subscribers' progress reported on pipes, so
 * that no receive queue overflows.
 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "../tap.h"
#include "../core/util.h"

#define NSUB	 3
#define WINDOW	 32 /* messages ahead of the slowest subscriber */
#define MAXMSG	 (64u << 10)
#define FLOW_TAG 7 /* the tag of flows()'s tagged subscriber */

static const char *group_addr = "239.1.2.14";
static unsigned int nmsgs;
static uint32_t rwindow;       /* reliable mode's window; 0: default mode */
static uint32_t rdepth = 4096; /* the subscribers' receive depth */
static uint32_t sdepth = 256;  /* the publisher's send depth */

struct sub_result;
static struct sub_result *results; /* shared with the children */

/* msg_size -- the size of message seq: 8 B .. 64 KiB, fragmented often */
static size_t msg_size(uint64_t seq)
{
	/* 4065 .. 4096: one bare datagram each (lib/proto.h) */
	static const size_t sz[] = {8,	  64,	200, 1000, 4063,  4064, 4065,
				    4096, 9000, 8,   333,  20000, 8128};

	if (seq % 97 == 13)
		return MAXMSG;
	return sz[seq % (sizeof(sz) / sizeof(sz[0]))];
}

/* fill -- the contents of message seq */
static void fill(uint64_t seq, unsigned char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(seq * 131 + i * 7 + (i >> 8));
	if (len >= 8)
		memcpy(p, &seq, 8);
}

/* ---- subscriber (a child process) ---------------------------------- */

struct sub_result {
	uint64_t received, lost, loss_calls, bad, order, pubs;
	uint64_t st_received, st_lost, st_gaps, naks, dups, lost_frags;
	int join_status, closed, destroy;
};

struct sub {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_group *g;
	int wfd, joined, closed;
	uint64_t pub, next; /* the publisher, the seq expected */
	struct sub_result r;
	unsigned char *buf;
};

static void report(struct sub *s)
{
	uint64_t acc = s->r.received + s->r.lost;

	if (write(s->wfd, &acc, sizeof(acc)) != sizeof(acc))
		_exit(91);
}

static void sub_join(struct rdmamsg_group *g, int status, void *arg)
{
	struct sub *s = arg;

	(void)g;
	s->r.join_status = status;
	s->joined = status ? -1 : 1;
}

static void sub_msg(struct rdmamsg_group *g, const struct rdmamsg_group_msg *m,
		    void *arg)
{
	struct sub *s = arg;

	(void)g;
	if (!s->pub)
		s->pub = m->publisher;
	if (m->publisher != s->pub)
		s->r.bad++;
	if (m->seq != s->next)
		s->r.order++;
	s->next = m->seq + 1;
	if (m->len != msg_size(m->seq)) {
		s->r.bad++;
	} else {
		fill(m->seq, s->buf, m->len);
		if (memcmp(s->buf, m->data, m->len))
			s->r.bad++;
	}
	s->r.received++;
	if ((s->r.received + s->r.lost) % 16 == 0 ||
	    s->r.received + s->r.lost >= nmsgs)
		report(s);
}

static void sub_loss(struct rdmamsg_group *g, uint64_t pub, uint64_t first,
		     uint64_t count, void *arg)
{
	struct sub *s = arg;

	(void)g;
	if (!s->pub)
		s->pub = pub;
	if (pub != s->pub || first != s->next || !count)
		s->r.order++;
	s->next = first + count;
	s->r.lost += count;
	s->r.loss_calls++;
	report(s);
}

static void sub_closed(struct rdmamsg_group *g, void *arg)
{
	struct sub *s = arg;

	(void)g;
	s->closed++;
}

static int subscriber(int wfd, void *arg)
{
	struct rdmamsg_group_cbs cbs = {.on_join = sub_join,
					.on_message = sub_msg,
					.on_loss = sub_loss};
	struct rdmamsg_group_attr *a;
	struct rdmamsg_group_stats st;
	struct sub s;
	long long end;
	int done = 0;

	memset(&s, 0, sizeof(s));
	s.wfd = wfd;
	s.buf = malloc(MAXMSG);
	if ((uintptr_t)arg & 0x100)
		setenv("RDMAMSG_TEST_MC_DROP", rwindow ? "20" : "7", 1);
	/* 0x200: tagged FLOW_TAG, for a publisher's tagged flow control;
	 * 0x400: a receive depth of 64, whatever rdepth says */
	s.ctx = test_ctx();
	if (rdmamsg_group_attr_new(&a) ||
	    rdmamsg_group_attr_set_role(a, RDMAMSG_GROUP_SUBSCRIBER) ||
	    rdmamsg_group_attr_set_recv_depth(
		    a, (uintptr_t)arg & 0x400 ? 64 : rdepth) ||
	    rdmamsg_group_attr_set_max_msg_size(a, MAXMSG) ||
	    rdmamsg_group_attr_set_heartbeat(a, 20) ||
	    rdmamsg_group_attr_set_reliable(a, rwindow) ||
	    rdmamsg_group_attr_set_tag(a,
				       (uintptr_t)arg & 0x200 ? FLOW_TAG : 0))
		return 80;
	if (rdmamsg_group_join(s.ctx, group_addr, a, &cbs, &s, &s.g))
		return 81;
	rdmamsg_group_attr_delete(&a);
	test_run_until(s.ctx, &s.joined, 60000);
	if (s.joined != 1)
		return 82;
	report(&s); /* 0: joined */
	end = test_now_ms() + 600000;
	while (!done && test_now_ms() < end) {
		test_idle(s.ctx, 5);
		done = s.r.received + s.r.lost >= nmsgs;
	}
	rdmamsg_group_query(s.g, &st);
	s.r.st_received = st.msgs_received;
	s.r.st_lost = st.msgs_lost;
	s.r.st_gaps = st.gaps;
	s.r.pubs = st.publishers;
	s.r.naks = st.naks_sent;
	s.r.dups = st.duplicates;
	s.r.lost_frags = st.lost_fragments;
	if (rdmamsg_group_close(s.g, sub_closed) ||
	    rdmamsg_group_close(s.g, sub_closed) != -EALREADY)
		s.r.bad++;
	test_run_until(s.ctx, &s.closed, 60000);
	s.r.closed = s.closed;
	s.r.destroy = rdmamsg_ctx_destroy(&s.ctx);
	free(s.buf);
	results[(uintptr_t)arg & 0xff] = s.r;
	return 0;
}

/* ---- publisher (this process) --------------------------------------- */

struct pub {
	int joined, closed;
	uint64_t completed, failed, order;
	uint64_t next_done;
};

static void pub_join(struct rdmamsg_group *g, int status, void *arg)
{
	struct pub *p = arg;

	(void)g;
	p->joined = status ? -1 : 1;
}

static void pub_done(struct rdmamsg_group *g, void *op_ctx, int status,
		     void *arg)
{
	struct pub *p = arg;

	(void)g;
	if ((uint64_t)(uintptr_t)op_ctx != p->next_done)
		p->order++;
	p->next_done = (uint64_t)(uintptr_t)op_ctx + 1;
	if (status)
		p->failed++;
	p->completed++;
}

static void pub_closed(struct rdmamsg_group *g, void *arg)
{
	struct pub *p = arg;

	(void)g;
	p->closed++;
}

/* wait_subs -- the publisher's context runs until each of the n
 * subscribers has closed its pipe, then reaps it: 1 if all exited 0 */
static int wait_subs(struct rdmamsg_ctx *ctx, int *rfd, const pid_t *pid, int n)
{
	int i, all = 1;

	for (i = 0; i < n; i++) {
		struct pollfd pf = {.fd = rfd[i], .events = POLLIN};
		uint64_t v;

		for (;;) {
			while (poll(&pf, 1, 0) == 0)
				test_idle(ctx, 5);
			if (read(rfd[i], &v, sizeof(v)) <= 0 &&
			    errno != EAGAIN && errno != EINTR)
				break;
			if (pf.revents & POLLHUP)
				break;
		}
		if (test_wait_child(pid[i]) != 0)
			all = 0;
		close(rfd[i]);
	}
	return all;
}

/* spawn_subs -- n subscriber processes, subscriber i given arg[i]; each
 * has joined (said 0 on its pipe) on return, its pipe non-blocking; acc[i]
 * (when acc) holds what it said */
static void spawn_subs(int n, const uintptr_t *arg, pid_t *pid, int *rfd,
		       uint64_t *acc)
{
	uint64_t v;
	int i;

	for (i = 0; i < n; i++) {
		pid[i] = test_fork(subscriber, (void *)arg[i], &rfd[i]);
		if (read(rfd[i], &v, sizeof(v)) != sizeof(v))
			bail_out("subscriber %d did not join", i);
		if (acc)
			acc[i] = v;
		fcntl(rfd[i], F_SETFL, O_NONBLOCK);
	}
}

/* wait_receivers -- run ctx until the reliable publisher g has heard n
 * subscribers' status messages (10 s at most); how many it knows */
static uint64_t wait_receivers(struct rdmamsg_ctx *ctx, struct rdmamsg_group *g,
			       uint64_t n)
{
	struct rdmamsg_group_stats st;
	long long end = test_now_ms() + 10000;

	do {
		test_idle(ctx, 5);
		rdmamsg_group_query(g, &st);
	} while (st.receivers < n && test_now_ms() < end);
	return st.receivers;
}

/* round -- one publisher, NSUB subscribers (drop_at: the one that drops
 * one datagram in 7 -- in 20 in reliable mode --, or -1); window: reliable
 * mode's, or 0 */
static void round_(int drop_at, uint32_t window)
{
	struct rdmamsg_group_cbs cbs = {.on_join = pub_join,
					.on_publish = pub_done};
	struct rdmamsg_group_attr *a;
	struct rdmamsg_group_stats st;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_group *g;
	struct sub_result r[NSUB];
	uint64_t acc[NSUB], sent = 0, minacc;
	unsigned char *buf = malloc(MAXMSG);
	uintptr_t arg[NSUB];
	int rfd[NSUB], i, bad_pub = 0, ret;
	pid_t pid[NSUB];
	struct pub p;
	long long end;

	memset(&p, 0, sizeof(p));
	memset(results, 0, NSUB * sizeof(*results));
	rwindow = window;
	diag("%s mode, %s", window ? "reliable" : "default",
	     drop_at < 0 ? "no drops" : "one subscriber drops datagrams");
	for (i = 0; i < NSUB; i++)
		arg[i] = (uintptr_t)(i | (i == drop_at ? 0x100 : 0));
	spawn_subs(NSUB, arg, pid, rfd, acc);
	ctx = test_ctx();
	rdmamsg_group_attr_new(&a);
	rdmamsg_group_attr_set_role(a, RDMAMSG_GROUP_PUBLISHER);
	rdmamsg_group_attr_set_max_msg_size(a, MAXMSG);
	rdmamsg_group_attr_set_heartbeat(a, 20);
	rdmamsg_group_attr_set_reliable(a, window);
	rdmamsg_group_attr_set_send_depth(a, sdepth);
	ok(!rdmamsg_group_join(ctx, group_addr, a, &cbs, &p, &g),
	   "publisher joins %s", group_addr);
	rdmamsg_group_attr_delete(&a);
	ok(test_run_until(ctx, &p.joined, 60000) == 1, "publisher joined");
	if (window) {
		/* the subscribers' status messages: flow control knows them */
		uint64_t known = wait_receivers(ctx, g, NSUB);

		ok(known == NSUB, "reliable: %llu subscribers known",
		   (unsigned long long)known);
	}
	end = test_now_ms() + 600000;
	while (sent < nmsgs && test_now_ms() < end) {
		for (i = 0; i < NSUB; i++) {
			uint64_t v;

			while (read(rfd[i], &v, sizeof(v)) == sizeof(v))
				acc[i] = v;
		}
		minacc = acc[0];
		for (i = 1; i < NSUB; i++)
			if (acc[i] < minacc)
				minacc = acc[i];
		/* the default mode has no flow control: the test paces; a
		 * window larger than the run: the test keeps within the
		 * slowest subscriber's reorder slots (never the library's
		 * window, so only a repair could stop the publisher) */
		if ((window && window < nmsgs) ||
		    sent - minacc < (window ? 4 * WINDOW : WINDOW)) {
			size_t len = msg_size(sent);

			fill(sent, buf, len);
			ret = rdmamsg_group_publish(g, buf, len,
						    (void *)(uintptr_t)sent);
			if (ret == 0) {
				sent++;
				continue;
			}
			if (ret != -EAGAIN)
				bad_pub++;
		}
		test_idle(ctx, 1);
	}
	ok(sent == nmsgs && !bad_pub, "%llu of %u messages published",
	   (unsigned long long)sent, nmsgs);
	rdmamsg_group_query(g, &st);
	ok(st.msgs_published == nmsgs, "stats: %llu published, mtu %u",
	   (unsigned long long)st.msgs_published, st.mtu);
	/* heartbeats go on until the subscribers are done */
	ok(wait_subs(ctx, rfd, pid, NSUB), "the %d subscribers exit 0", NSUB);
	memcpy(r, results, sizeof(r));
	for (i = 0; i < NSUB; i++) {
		ok(r[i].received + r[i].lost == nmsgs,
		   "subscriber %d: %llu received + %llu reported lost == %u "
		   "published",
		   i, (unsigned long long)r[i].received,
		   (unsigned long long)r[i].lost, nmsgs);
		ok(!r[i].bad && !r[i].order,
		   "subscriber %d: one publisher, in order, contents verified "
		   "(%llu bad, %llu out of order)",
		   i, (unsigned long long)r[i].bad,
		   (unsigned long long)r[i].order);
		ok(r[i].st_received == r[i].received &&
			   r[i].st_lost == r[i].lost &&
			   r[i].st_gaps == r[i].loss_calls && r[i].pubs == 1,
		   "subscriber %d: counters agree with the callbacks", i);
		if (i == drop_at && window)
			ok(r[i].lost == 0 && r[i].naks > 0,
			   "subscriber %d drops one datagram in 20: nothing "
			   "lost, %llu NAKs, %llu duplicates dropped",
			   i, (unsigned long long)r[i].naks,
			   (unsigned long long)r[i].dups);
		else if (i == drop_at)
			ok(r[i].lost > 0 && r[i].received > 0,
			   "subscriber %d drops one datagram in 7: %llu "
			   "losses reported in %llu gaps",
			   i, (unsigned long long)r[i].lost,
			   (unsigned long long)r[i].loss_calls);
		if (i == drop_at && !window)
			/* the rest of a message whose fragment was lost is
			 * not a duplicate: nothing came twice */
			ok(r[i].dups == 0 && r[i].lost_frags > 0,
			   "subscriber %d: %llu fragments of lost messages "
			   "dropped, %llu duplicates",
			   i, (unsigned long long)r[i].lost_frags,
			   (unsigned long long)r[i].dups);
		else if (!window)
			ok(r[i].dups == 0 && r[i].lost_frags == 0,
			   "subscriber %d: no duplicate, no fragment of a "
			   "lost message (%llu, %llu)",
			   i, (unsigned long long)r[i].dups,
			   (unsigned long long)r[i].lost_frags);
		else if (window && drop_at >= 0)
			/* repairs for the one that drops go to it alone
			 * (unicast); multicast ones (serving this one too)
			 * only when this one NAKed at the same time (a
			 * receive queue overrun on a loaded machine): at
			 * most a window of the largest messages per NAK.
			 * Go-back-N by multicast gave it about as many
			 * duplicates as the publisher's repairs */
			ok(r[i].lost == 0 &&
				   r[i].dups <=
					   nmsgs / 100 +
						   r[i].naks * window *
							   (MAXMSG / 1024 + 1),
			   "subscriber %d lost nothing, %llu duplicates "
			   "dropped, %llu NAKs",
			   i, (unsigned long long)r[i].dups,
			   (unsigned long long)r[i].naks);
		else
			ok(r[i].lost == 0, "subscriber %d lost nothing", i);
		ok(r[i].closed == 1 && r[i].destroy == 0,
		   "subscriber %d: closed once, context destroyed (nothing "
		   "left in use)",
		   i);
	}
	rdmamsg_group_query(g, &st);
	if (window && drop_at >= 0)
		ok(st.naks_received > 0 && st.repairs > 0,
		   "publisher: %llu NAKs received, %llu repairs, %llu "
		   "flow-control stalls",
		   (unsigned long long)st.naks_received,
		   (unsigned long long)st.repairs,
		   (unsigned long long)st.flow_control_stalls);
	if (window && drop_at >= 0) {
		ok(st.repairs == st.repairs_unicast + st.repairs_multicast &&
			   st.repairs_unicast > 0,
		   "publisher: repairs %llu = %llu by unicast + %llu by "
		   "multicast",
		   (unsigned long long)st.repairs,
		   (unsigned long long)st.repairs_unicast,
		   (unsigned long long)st.repairs_multicast);
		/* a repair waits for room only when the poll budget ends
		 * a pass before its completions are in (softrdma completes
		 * a UD send at post): how many publishes met one is the
		 * scheduler's choice, so it is reported, and bounded */
		ok(st.published_in_repair <= st.msgs_published,
		   "publisher: %llu of %llu messages published while a "
		   "repair was under way",
		   (unsigned long long)st.published_in_repair,
		   (unsigned long long)st.msgs_published);
		/* selective: only the messages missed go again (about one
		 * in 10 here, their repairs lost too sometimes); go-back-N
		 * sent everything after each gap again, more than nmsgs */
		ok(st.repairs <= nmsgs / 3,
		   "selective repair: %llu messages sent again for %u "
		   "published",
		   (unsigned long long)st.repairs, nmsgs);
	}
	ok(!rdmamsg_group_close(g, pub_closed), "publisher closes");
	ok(rdmamsg_group_close(g, pub_closed) == -EALREADY,
	   "close twice: -EALREADY");
	ok(rdmamsg_group_publish(g, buf, 8, NULL) == -EPIPE,
	   "publish after close: -EPIPE");
	test_run_until(ctx, &p.closed, 60000);
	ok(p.closed && p.completed == nmsgs && !p.failed && !p.order,
	   "every publish completed once, in order (%llu, %llu failed)",
	   (unsigned long long)p.completed, (unsigned long long)p.failed);
	ok(rdmamsg_ctx_destroy(&ctx) == 0, "publisher's context destroyed");
	free(buf);
}

/* ---- bad input ------------------------------------------------------ */

static void bad_input(void)
{
	struct rdmamsg_group_cbs cbs = {.on_join = pub_join};
	struct rdmamsg_group_attr *a;
	struct rdmamsg_ctx *ctx = test_ctx();
	struct rdmamsg_group *g = NULL, *s = NULL, *e = NULL;
	struct pub p, q, r;
	char big[64];
	uint64_t id = 0;
	int ret;

	memset(&p, 0, sizeof(p));
	memset(&q, 0, sizeof(q));
	memset(&r, 0, sizeof(r));
	memset(big, 0, sizeof(big));
	ok(rdmamsg_group_join(ctx, "10.231.0.1", NULL, &cbs, &p, &g) == -EINVAL,
	   "join a unicast address: -EINVAL");
	ok(rdmamsg_group_join(ctx, "[::1]", NULL, &cbs, &p, &g) == -EINVAL,
	   "join an IPv6 unicast address: -EINVAL");
	ok(rdmamsg_group_join(ctx, "239.1.2", NULL, &cbs, &p, &g) == -EINVAL,
	   "join a malformed address: -EINVAL");
	ok(rdmamsg_group_join(ctx, NULL, NULL, &cbs, &p, &g) == -EINVAL &&
		   rdmamsg_group_join(NULL, "239.1.2.3", NULL, &cbs, &p, &g) ==
			   -EINVAL &&
		   rdmamsg_group_join(ctx, "239.1.2.3", NULL, &cbs, &p, NULL) ==
			   -EINVAL,
	   "NULL arguments: -EINVAL");
	g = NULL;
	ok(rdmamsg_group_join(ctx, "239.1.2.3", NULL, NULL, &p, &g) ==
			   -EINVAL &&
		   !g,
	   "NULL callbacks: -EINVAL, no group");
	ok(!rdmamsg_group_attr_new(&a), "attr");
	ok(rdmamsg_group_attr_set_role(a, 0) == -EINVAL &&
		   rdmamsg_group_attr_set_role(a, 4) == -EINVAL &&
		   rdmamsg_group_attr_set_max_msg_size(a, 0) == -EINVAL &&
		   rdmamsg_group_attr_set_max_msg_size(a, SIZE_MAX) ==
			   -EINVAL &&
		   rdmamsg_group_attr_set_recv_depth(a, 1) == -EINVAL &&
		   rdmamsg_group_attr_set_send_depth(a, 1u << 30) == -EINVAL &&
		   rdmamsg_group_attr_set_heartbeat(a, 0) == -EINVAL,
	   "bad attributes: -EINVAL");
	ok(!rdmamsg_group_attr_set_bind_addr(a, "239.9.9.9") &&
		   rdmamsg_group_join(ctx, "239.1.2.3", a, &cbs, &p, &g) ==
			   -EINVAL,
	   "a multicast bind address: -EINVAL");
	/* a bind address of no interface here: refused at once, no group */
	s = NULL;
	ret = rdmamsg_group_attr_set_bind_addr(a, "10.231.254.253");
	if (!ret)
		ret = rdmamsg_group_join(ctx, "239.1.2.18", a, &cbs, &q, &s);
	ok(ret < 0 && !s, "join from an address not on this host: %d, no group",
	   ret);
	rdmamsg_group_attr_set_bind_addr(a, NULL);
	rdmamsg_group_attr_set_max_msg_size(a, 64);
	ok(!rdmamsg_group_join(ctx, "[ff0e::db8:14]", a, &cbs, &p, &g),
	   "join an IPv6 group (publisher and subscriber)");
	ok(rdmamsg_group_publish(g, big, 8, NULL) == -ENOTCONN,
	   "publish before the join finished: -ENOTCONN");
	ok(test_run_until(ctx, &p.joined, 60000) == 1, "joined");
	ok(rdmamsg_group_publish(g, big, 65, NULL) == -EMSGSIZE &&
		   rdmamsg_group_publish(g, big, SIZE_MAX, NULL) == -EMSGSIZE,
	   "a message above the maximum: -EMSGSIZE");
	ok(rdmamsg_group_publish(g, NULL, 8, NULL) == -EINVAL,
	   "NULL data: -EINVAL");
	ok(!rdmamsg_group_get_id(g, &id) && id, "a non-zero publisher id");
	rdmamsg_group_attr_set_role(a, RDMAMSG_GROUP_SUBSCRIBER);
	ok(!rdmamsg_group_join(ctx, "239.1.2.15", a, &cbs, &q, &s),
	   "a subscriber-only group");
	ok(test_run_until(ctx, &q.joined, 60000) == 1, "joined");
	ok(rdmamsg_group_publish(s, big, 8, NULL) == -EPERM,
	   "publish on a subscriber-only group: -EPERM");
	{
		/* a largest message of more datagrams than the send depth:
		 * known once the path MTU is, so on_join says it */
		struct rdmamsg_group *tg = NULL;
		struct pub t;

		memset(&t, 0, sizeof(t));
		rdmamsg_group_attr_set_role(a, RDMAMSG_GROUP_PUBLISHER);
		rdmamsg_group_attr_set_max_msg_size(a, 16u << 20);
		rdmamsg_group_attr_set_send_depth(a, 16);
		ok(!rdmamsg_group_join(ctx, "239.1.2.20", a, &cbs, &t, &tg),
		   "a publisher whose send depth is too small");
		test_run_until(ctx, &t.joined, 60000);
		ok(t.joined == -1, "its join fails in on_join");
		rdmamsg_group_close(tg, pub_closed);
		test_run_until(ctx, &t.closed, 60000);
		ok(t.closed == 1, "and it closes");
	}
	rdmamsg_group_attr_delete(&a);
	ok(!rdmamsg_group_close(g, pub_closed) &&
		   rdmamsg_group_close(g, pub_closed) == -EALREADY,
	   "close twice: -EALREADY");
	ok(!rdmamsg_group_close(s, NULL), "close without a callback");
	/* closed before its join came back (no progress in between): it
	 * has no QP nor lane yet, and goes as cleanly */
	ok(!rdmamsg_group_join(ctx, "239.1.2.19", NULL, &cbs, &r, &e) &&
		   !rdmamsg_group_close(e, pub_closed),
	   "a group closed before its join came back");
	ok(rdmamsg_ctx_destroy(&ctx) == -EBUSY, "a context with groups: busy");
	test_run_until(ctx, &p.closed, 60000);
	test_run_until(ctx, &r.closed, 60000);
	test_idle(ctx, 50);
	ok(p.closed == 1, "close callback once");
	ok(r.closed == 1 && r.joined != 1,
	   "closed before joining: close callback once, never joined "
	   "(closed %d, joined %d)",
	   r.closed, r.joined);
	ok(rdmamsg_ctx_destroy(&ctx) == 0, "context destroyed");
}

/* ---- a stopped subscriber (reliable mode) ----------------------------- */

/* drain -- the latest progress report of each subscriber */
static void drain(const int *rfd, uint64_t *acc, int n)
{
	uint64_t v;
	int i;

	for (i = 0; i < n; i++)
		while (read(rfd[i], &v, sizeof(v)) == sizeof(v))
			acc[i] = v;
}

/* publish_for -- publish messages [from, to) with retries for at most ms;
 * how far it got */
static uint64_t publish_for(struct rdmamsg_ctx *ctx, struct rdmamsg_group *g,
			    unsigned char *buf, uint64_t from, uint64_t to,
			    long long ms)
{
	long long end = test_now_ms() + ms;
	uint64_t i = from;

	while (i < to && test_now_ms() < end) {
		size_t len = msg_size(i);
		int ret;

		fill(i, buf, len);
		ret = rdmamsg_group_publish(g, buf, len, (void *)(uintptr_t)i);
		if (ret == 0) {
			i++;
			continue;
		}
		if (ret != -EAGAIN)
			break;
		test_idle(ctx, 1);
	}
	return i;
}

/* publish_n -- publish_for a minute */
static uint64_t publish_n(struct rdmamsg_ctx *ctx, struct rdmamsg_group *g,
			  unsigned char *buf, uint64_t from, uint64_t to)
{
	return publish_for(ctx, g, buf, from, to, 60000);
}

/*
 * stopped -- two subscribers; one is stopped (SIGSTOP) while the publisher
 * goes on far past its window (and its receive queue).  Reliable mode:
 * the publisher is held only until the stopped one's status messages are
 * overdue, the other loses nothing, and the stopped one, continued,
 * reports what could no longer be repaired and gets the rest.  Default
 * mode: the publisher is not held at all (the test paces it by the
 * running subscriber alone), the running one loses nothing, the stopped
 * one, continued, gets what its queue held and reports the rest lost.
 */
static void stopped(uint32_t window)
{
	struct rdmamsg_group_cbs cbs = {.on_join = pub_join,
					.on_publish = pub_done};
	unsigned int saved = nmsgs;
	struct rdmamsg_group_attr *a;
	struct rdmamsg_group_stats st;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_group *g;
	unsigned char *buf = malloc(MAXMSG);
	uint64_t acc[2] = {0, 0}, sent;
	int rfd[2];
	pid_t pid[2];
	struct pub p;
	long long end;

	memset(&p, 0, sizeof(p));
	memset(results, 0, NSUB * sizeof(*results));
	nmsgs = 400;
	rwindow = window;
	if (window)
		rdepth = 64;
	diag("%s mode, one subscriber stopped",
	     window ? "reliable" : "default");
	spawn_subs(2, (const uintptr_t[]){0, window ? 1 : 0x401}, pid, rfd,
		   acc);
	ctx = test_ctx();
	rdmamsg_group_attr_new(&a);
	rdmamsg_group_attr_set_role(a, RDMAMSG_GROUP_PUBLISHER);
	rdmamsg_group_attr_set_max_msg_size(a, MAXMSG);
	/* 300 ms: a subscriber silent for 5 s is no longer waited for (a
	 * loaded machine may pause the running one for less) */
	rdmamsg_group_attr_set_heartbeat(a, 300);
	rdmamsg_group_attr_set_reliable(a, rwindow);
	ok(!rdmamsg_group_join(ctx, group_addr, a, &cbs, &p, &g) &&
		   test_run_until(ctx, &p.joined, 60000) == 1,
	   "stopped: publisher joined");
	rdmamsg_group_attr_delete(&a);
	if (window)
		wait_receivers(ctx, g, 2);
	else
		test_idle(ctx, 400); /* a heartbeat: they know us */
	sent = publish_n(ctx, g, buf, 0, 64);
	end = test_now_ms() + 30000;
	do {
		test_idle(ctx, 5);
		drain(rfd, acc, 2);
	} while ((acc[0] < 64 || acc[1] < 64) && test_now_ms() < end);
	ok(sent == 64 && acc[0] == 64 && acc[1] == 64,
	   "64 messages reached both subscribers");
	kill(pid[1], SIGSTOP);
	if (window) {
		sent = publish_n(ctx, g, buf, 64, nmsgs);
	} else {
		/* paced by the running one: WINDOW messages ahead at most */
		end = test_now_ms() + 60000;
		while (sent < nmsgs && test_now_ms() < end) {
			drain(rfd, acc, 1);
			if (sent - acc[0] < WINDOW)
				sent = publish_for(ctx, g, buf, sent, sent + 1,
						   1000);
			else
				test_idle(ctx, 1);
		}
	}
	rdmamsg_group_query(g, &st);
	kill(pid[1], SIGCONT);
	if (window)
		ok(sent == nmsgs && st.receivers == 1,
		   "the publisher went on past its window of %u without the "
		   "stopped subscriber (%llu of %u published, %llu stalls)",
		   rwindow, (unsigned long long)sent, nmsgs,
		   (unsigned long long)st.flow_control_stalls);
	else
		ok(sent == nmsgs && !st.receivers,
		   "the publisher went on without the stopped subscriber "
		   "(%llu of %u published while it was stopped)",
		   (unsigned long long)sent, nmsgs);
	ok(wait_subs(ctx, rfd, pid, 2), "both subscribers exit 0");
	ok(results[0].received == nmsgs && !results[0].lost &&
		   !results[0].bad && !results[0].order,
	   "the running subscriber got all %u, in order, verified", nmsgs);
	ok(results[1].lost > 0 &&
		   results[1].received + results[1].lost == nmsgs &&
		   !results[1].bad && !results[1].order,
	   "the stopped one: %llu received + %llu reported lost == %u, in "
	   "order, verified",
	   (unsigned long long)results[1].received,
	   (unsigned long long)results[1].lost, nmsgs);
	rdmamsg_group_query(g, &st);
	if (window)
		ok(st.naks_received > 0, "publisher: %llu NAKs, %llu repairs",
		   (unsigned long long)st.naks_received,
		   (unsigned long long)st.repairs);
	else
		ok(!st.naks_received && !st.repairs,
		   "default mode: no NAK, no repair");
	ok(!rdmamsg_group_close(g, pub_closed) &&
		   test_run_until(ctx, &p.closed, 60000) == 1,
	   "publisher closed");
	ok(p.completed == nmsgs && !p.failed && !p.order,
	   "every publish completed once");
	ok(!rdmamsg_ctx_destroy(&ctx), "context destroyed");
	free(buf);
	nmsgs = saved;
	rwindow = 0;
	rdepth = 4096;
}

/* ---- flow-control strategies (reliable mode) ------------------------ */

/*
 * flow -- two reliable subscribers, 0 running (tagged FLOW_TAG) and 1
 * stopped (SIGSTOP) before anything is published, so that it stays at
 * position 0; the publisher's heartbeat period of 1 s keeps the stopped
 * one waited for (if its strategy waits for it) for 10 s.  MIN: held at
 * the window for 3 s, then, 1 continued, both get everything.  MAX and
 * TAGGED(FLOW_TAG): everything is published while 1 is still counted
 * (not yet forgotten); 1, continued, reports what is no longer kept.
 */
static void flow(enum rdmamsg_group_flow strategy, const char *name)
{
	struct rdmamsg_group_cbs cbs = {.on_join = pub_join,
					.on_publish = pub_done};
	unsigned int saved = nmsgs;
	struct rdmamsg_group_attr *a;
	struct rdmamsg_group_stats st;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_group *g;
	unsigned char *buf = malloc(MAXMSG);
	uint64_t sent, heard;
	int rfd[2], all;
	pid_t pid[2];
	struct pub p;

	memset(&p, 0, sizeof(p));
	memset(results, 0, NSUB * sizeof(*results));
	nmsgs = tap_small() ? 64 : 200;
	rwindow = 16;
	rdepth = 64;
	diag("reliable mode, flow control %s, one subscriber stopped", name);
	/* subscriber 0 tagged FLOW_TAG */
	spawn_subs(2, (const uintptr_t[]){0x200, 1}, pid, rfd, NULL);
	ctx = test_ctx();
	rdmamsg_group_attr_new(&a);
	rdmamsg_group_attr_set_role(a, RDMAMSG_GROUP_PUBLISHER);
	rdmamsg_group_attr_set_max_msg_size(a, MAXMSG);
	rdmamsg_group_attr_set_heartbeat(a, 1000);
	rdmamsg_group_attr_set_reliable(a, rwindow);
	ok(!rdmamsg_group_attr_set_flow_control(
		   a, strategy,
		   strategy == RDMAMSG_GROUP_FLOW_TAGGED ? FLOW_TAG : 0),
	   "%s: strategy set", name);
	ok(!rdmamsg_group_join(ctx, group_addr, a, &cbs, &p, &g) &&
		   test_run_until(ctx, &p.joined, 60000) == 1,
	   "%s: publisher joined", name);
	rdmamsg_group_attr_delete(&a);
	heard = wait_receivers(ctx, g, 2);
	kill(pid[1], SIGSTOP);
	ok(heard == 2, "%s: the publisher heard both subscribers", name);
	if (strategy == RDMAMSG_GROUP_FLOW_MIN) {
		sent = publish_for(ctx, g, buf, 0, nmsgs, 3000);
		ok(sent == rwindow,
		   "%s: held at the window by the stopped one (%llu of %u "
		   "published in 3 s, window %u)",
		   name, (unsigned long long)sent, nmsgs, rwindow);
		kill(pid[1], SIGCONT);
		sent = publish_n(ctx, g, buf, sent, nmsgs);
	} else {
		sent = publish_n(ctx, g, buf, 0, nmsgs);
		rdmamsg_group_query(g, &st);
		ok(sent == nmsgs && st.receivers == 2,
		   "%s: all %u published, the stopped one still counted "
		   "(%llu published, %llu subscribers)",
		   name, nmsgs, (unsigned long long)sent,
		   (unsigned long long)st.receivers);
		kill(pid[1], SIGCONT);
	}
	all = wait_subs(ctx, rfd, pid, 2);
	ok(all && sent == nmsgs, "%s: both subscribers exit 0", name);
	ok(results[0].received == nmsgs && !results[0].lost &&
		   !results[0].bad && !results[0].order,
	   "%s: the running one got all %u, in order, verified", name, nmsgs);
	if (strategy == RDMAMSG_GROUP_FLOW_MIN)
		ok(results[1].received == nmsgs && !results[1].lost &&
			   !results[1].bad && !results[1].order,
		   "%s: the stopped one, continued, got all %u too", name,
		   nmsgs);
	else
		ok(results[1].lost > 0 &&
			   results[1].received + results[1].lost == nmsgs &&
			   !results[1].bad && !results[1].order,
		   "%s: the stopped one: %llu received + %llu reported lost "
		   "== %u, in order, verified",
		   name, (unsigned long long)results[1].received,
		   (unsigned long long)results[1].lost, nmsgs);
	ok(!rdmamsg_group_close(g, pub_closed) &&
		   test_run_until(ctx, &p.closed, 60000) == 1 &&
		   p.completed == nmsgs && !p.failed && !p.order,
	   "%s: publisher closed, every publish completed once", name);
	ok(!rdmamsg_ctx_destroy(&ctx), "%s: context destroyed", name);
	free(buf);
	nmsgs = saved;
	rwindow = 0;
	rdepth = 4096;
}

static void flows(void)
{
	struct rdmamsg_group_attr *a;

	rdmamsg_group_attr_new(&a);
	ok(rdmamsg_group_attr_set_flow_control(NULL, 0, 0) == -EINVAL &&
		   rdmamsg_group_attr_set_flow_control(
			   a, RDMAMSG_GROUP_FLOW_MIN, 5) == -EINVAL &&
		   rdmamsg_group_attr_set_flow_control(
			   a, RDMAMSG_GROUP_FLOW_MAX, 5) == -EINVAL &&
		   rdmamsg_group_attr_set_flow_control(
			   a, RDMAMSG_GROUP_FLOW_TAGGED, 0) == -EINVAL &&
		   rdmamsg_group_attr_set_flow_control(
			   a, (enum rdmamsg_group_flow)99, 0) == -EINVAL &&
		   rdmamsg_group_attr_set_tag(NULL, 1) == -EINVAL,
	   "flow control: bad strategies and tags are -EINVAL");
	rdmamsg_group_attr_delete(&a);
	flow(RDMAMSG_GROUP_FLOW_MIN, "min");
	flow(RDMAMSG_GROUP_FLOW_MAX, "max");
	flow(RDMAMSG_GROUP_FLOW_TAGGED, "tagged");
}

/* ---- late join, leave ------------------------------------------------ */

struct late {
	int joined, closed;
	uint64_t first, received, lost, bad, next;
	size_t len; /* of every message (0: 8) */
};

static void late_join(struct rdmamsg_group *g, int status, void *arg)
{
	struct late *l = arg;

	(void)g;
	l->joined = status ? -1 : 1;
}

static void late_msg(struct rdmamsg_group *g, const struct rdmamsg_group_msg *m,
		     void *arg)
{
	static unsigned char want[8192];
	struct late *l = arg;
	size_t len = l->len ? l->len : 8;

	(void)g;
	if (!l->received)
		l->first = m->seq;
	/* in order, the loss reports included */
	if ((l->received || l->lost) && m->seq != l->next)
		l->bad++;
	l->next = m->seq + 1;
	if (len <= sizeof(want))
		fill(m->seq, want, len);
	if (m->len != len || len > sizeof(want) || memcmp(m->data, want, len))
		l->bad++;
	l->received++;
}

static void late_loss(struct rdmamsg_group *g, uint64_t pub, uint64_t first,
		      uint64_t count, void *arg)
{
	struct late *l = arg;

	(void)g;
	(void)pub;
	if ((l->received || l->lost) && first != l->next)
		l->bad++;
	l->next = first + count;
	l->lost += count;
}

static void late_closed(struct rdmamsg_group *g, void *arg)
{
	struct late *l = arg;

	(void)g;
	l->closed++;
}

/* both -- drive two contexts for ms */
static void both(struct rdmamsg_ctx *a, struct rdmamsg_ctx *b, int ms)
{
	long long end = test_now_ms() + ms;

	while (test_now_ms() < end) {
		rdmamsg_ctx_progress(a);
		rdmamsg_ctx_progress(b);
		usleep(200);
	}
}

/* publish_len -- publish messages [from, to) of len bytes (fill) */
static int publish_len(struct rdmamsg_group *g, struct rdmamsg_ctx *a,
		       struct rdmamsg_ctx *b, uint64_t from, uint64_t to,
		       size_t len)
{
	static unsigned char buf[8192];
	uint64_t i;
	int ret, tries = 0;

	if (len > sizeof(buf))
		return -EINVAL;
	for (i = from; i < to;) {
		fill(i, buf, len);
		ret = rdmamsg_group_publish(g, buf, len, NULL);
		if (ret == -EAGAIN && tries++ < 100000) {
			both(a, b, 1);
			continue;
		}
		if (ret)
			return ret;
		i++;
		if (i % 8 == 0)
			both(a, b, 2); /* the subscriber keeps up */
	}
	return 0;
}

/* publish8 -- publish messages [from, to) of 8 bytes (their seq) */
static int publish8(struct rdmamsg_group *g, struct rdmamsg_ctx *a,
		    struct rdmamsg_ctx *b, uint64_t from, uint64_t to)
{
	return publish_len(g, a, b, from, to, 8);
}

static void late_joiner(void)
{
	struct rdmamsg_group_cbs pc = {.on_join = late_join};
	struct rdmamsg_group_cbs sc = {.on_join = late_join,
				       .on_message = late_msg,
				       .on_loss = late_loss};
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx();
	struct rdmamsg_group *pg, *sg;
	struct rdmamsg_group_attr *at;
	struct rdmamsg_group_stats st;
	struct late pl, sl;
	long long end;

	memset(&pl, 0, sizeof(pl));
	memset(&sl, 0, sizeof(sl));
	rdmamsg_group_attr_new(&at);
	rdmamsg_group_attr_set_heartbeat(at, 10);
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_PUBLISHER);
	ok(!rdmamsg_group_join(a, "239.1.2.16", at, &pc, &pl, &pg) &&
		   test_run_until(a, &pl.joined, 60000) == 1,
	   "late join: publisher joined");
	ok(!publish8(pg, a, b, 0, 100), "100 messages before anyone listens");
	both(a, b, 50);
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_SUBSCRIBER);
	ok(!rdmamsg_group_join(b, "239.1.2.16", at, &sc, &sl, &sg) &&
		   test_run_until(b, &sl.joined, 60000) == 1,
	   "a subscriber joins late");
	rdmamsg_group_attr_delete(&at);
	both(a, b, 100); /* it hears a heartbeat: seq 100 comes next */
	ok(!publish8(pg, a, b, 100, 300), "200 more messages");
	ok(!rdmamsg_group_close(pg, late_closed), "the publisher leaves");
	end = test_now_ms() + 10000;
	while (sl.received < 200 && test_now_ms() < end)
		both(a, b, 5);
	both(a, b, 50);
	ok(sl.received == 200 && sl.first == 100 && !sl.lost && !sl.bad,
	   "the late joiner gets 100 .. 299 in order, no loss from before it "
	   "joined (%llu from %llu, %llu lost, %llu bad)",
	   (unsigned long long)sl.received, (unsigned long long)sl.first,
	   (unsigned long long)sl.lost, (unsigned long long)sl.bad);
	rdmamsg_group_query(sg, &st);
	ok(st.publishers == 1 && st.msgs_received == 200 && !st.gaps &&
		   !st.duplicates && !st.malformed,
	   "its counters: one publisher, 200 messages, no gap, nothing "
	   "dropped");
	ok(pl.closed == 1, "publisher closed once");
	ok(!rdmamsg_group_close(sg, late_closed), "the subscriber leaves");
	both(a, b, 20);
	test_run_until(b, (volatile int *)&sl.closed, 60000);
	ok(sl.closed == 1, "subscriber closed once");
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b),
	   "both contexts destroyed");
}

/* ---- a subscriber's poll before it blocks ---------------------------- */

/* arms_until_block -- rdmamsg_ctx_arm() calls on b (with a progress pass
 * after each refusal) until one says blocking is safe; -1 if none did */
static long arms_until_block(struct rdmamsg_ctx *b)
{
	long n;

	for (n = 1; n <= 10000000; n++) {
		if (rdmamsg_ctx_arm(b) == 0)
			return n;
		rdmamsg_ctx_progress(b);
	}
	return -1;
}

/* recv_one -- drive a and b until l has n messages; 0, or -ETIMEDOUT */
static int recv_one(struct rdmamsg_ctx *a, struct rdmamsg_ctx *b,
		    const struct late *l, uint64_t n)
{
	long long end = test_now_ms() + 10000;

	while (l->received < n && test_now_ms() < end) {
		rdmamsg_ctx_progress(a);
		rdmamsg_ctx_progress(b);
	}
	return l->received == n && !l->bad ? 0 : -ETIMEDOUT;
}

/* poll_one -- a subscriber on b with poll_us (UINT_MAX: the attribute's
 * default) gets a message from a publisher on a, then gap_ms later BURST
 * more, published before it polls; the arms it takes to block right after
 * (1: at once), -1 if it never did */
static long poll_one(struct rdmamsg_ctx *a, struct rdmamsg_ctx *b,
		     const char *addr, unsigned int poll_us, int gap_ms,
		     int burst, int *bad_attr)
{
	struct rdmamsg_group_cbs pc = {.on_join = late_join};
	struct rdmamsg_group_cbs sc = {.on_join = late_join,
				       .on_message = late_msg,
				       .on_loss = late_loss};
	struct rdmamsg_group *pg, *sg;
	struct rdmamsg_group_attr *at;
	struct late pl, sl;
	long arms = -1;

	memset(&pl, 0, sizeof(pl));
	memset(&sl, 0, sizeof(sl));
	rdmamsg_group_attr_new(&at);
	*bad_attr = rdmamsg_group_attr_set_poll_us(at, 100001) != -EINVAL ||
		    rdmamsg_group_attr_set_poll_us(NULL, 0) != -EINVAL;
	rdmamsg_group_attr_set_heartbeat(at, 60000); /* nothing else comes */
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_PUBLISHER);
	if (rdmamsg_group_join(a, addr, at, &pc, &pl, &pg))
		goto out_attr;
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_SUBSCRIBER);
	if (poll_us != UINT_MAX)
		rdmamsg_group_attr_set_poll_us(at, poll_us);
	if (rdmamsg_group_join(b, addr, at, &sc, &sl, &sg))
		goto out_pub;
	if (test_run_until(a, &pl.joined, 60000) != 1 ||
	    test_run_until(b, &sl.joined, 60000) != 1 ||
	    publish8(pg, a, b, 0, 1) || recv_one(a, b, &sl, 1))
		goto out_sub;
	if (gap_ms)
		usleep((useconds_t)gap_ms * 1000);
	if (!publish8(pg, a, b, 1, 1 + (uint64_t)burst) &&
	    !recv_one(a, b, &sl, 1 + (uint64_t)burst))
		arms = arms_until_block(b);
out_sub:
	rdmamsg_group_close(sg, late_closed);
	test_run_until(b, (volatile int *)&sl.closed, 60000);
out_pub:
	rdmamsg_group_close(pg, late_closed);
	test_run_until(a, (volatile int *)&pl.closed, 60000);
out_attr:
	rdmamsg_group_attr_delete(&at);
	return arms;
}

/*
 * poll_before_block -- a subscriber that has just received, soon after
 * its previous receive, is refused the arm (rdmamsg_ctx_arm -EBUSY) while
 * its poll lasts, then may block; it blocks at once with 0 (the
 * attribute, or RDMAMSG_GROUP_POLL_US=0 for the default) and when its
 * messages come further apart than its poll
 */
static void poll_before_block(void)
{
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx();
	long arms;
	int bad;

	arms = poll_one(a, b, "239.1.2.24", 100000, 0, 1, &bad);
	ok(!bad, "poll_us above 100000, or no attributes: -EINVAL");
	/* 100 ms of arms refused (each after a sched_yield) */
	ok(arms > 3, "poll 100 ms: %ld arms to block after a message", arms);
	arms = poll_one(a, b, "239.1.2.24", 0, 0, 1, &bad);
	ok(arms >= 1 && arms <= 3, "poll 0: %ld arms to block (at once)", arms);
	arms = poll_one(a, b, "239.1.2.24", 1000, 20, 1, &bad);
	ok(arms >= 1 && arms <= 3,
	   "poll 1 ms, messages 20 ms apart: %ld arms to block (at once)",
	   arms);
	/* two that came before it polled, however long after the one
	 * before: a stream (it counted only one receive per poll, so a
	 * subscriber that took a stream's datagrams in one poll blocked) */
	arms = poll_one(a, b, "239.1.2.24", 100000, 150, 2, &bad);
	ok(arms > 3,
	   "poll 100 ms, two messages in one poll 150 ms after the last: "
	   "%ld arms to block",
	   arms);
	setenv("RDMAMSG_GROUP_POLL_US", "0", 1);
	arms = poll_one(a, b, "239.1.2.24", UINT_MAX, 0, 1, &bad);
	ok(arms >= 1 && arms <= 3,
	   "RDMAMSG_GROUP_POLL_US=0 as the default: %ld arms to block", arms);
	setenv("RDMAMSG_GROUP_POLL_US", "100000", 1);
	arms = poll_one(a, b, "239.1.2.24", UINT_MAX, 0, 1, &bad);
	ok(arms > 3, "RDMAMSG_GROUP_POLL_US=100000: %ld arms to block", arms);
	unsetenv("RDMAMSG_GROUP_POLL_US");
	test_idle(a, 20);
	test_idle(b, 20);
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b),
	   "both contexts destroyed");
}

/* ---- bare datagrams: 4 KiB messages in one datagram each ------------- */

/*
 * bare -- messages of a path MTU (4096 B: too long for a datagram with
 * the group's header) go one datagram each, without the header; a
 * subscriber knows their publisher, and one that joins while they
 * stream starts at the next heartbeat (not earlier: it knows no
 * publisher yet), loses nothing after it; a publisher with batching off
 * sends them as two fragments, which subscribers take as well
 */
static void bare(void)
{
	struct rdmamsg_group_cbs pc = {.on_join = late_join};
	struct rdmamsg_group_cbs sc = {.on_join = late_join,
				       .on_message = late_msg,
				       .on_loss = late_loss};
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx();
	struct rdmamsg_group *pg, *og, *sg, *lg;
	struct rdmamsg_group_attr *at;
	struct rdmamsg_group_stats st, s0;
	struct late pl, ol, sl, ll;
	const size_t len = 4096;
	uint64_t dg;
	long long end;

	memset(&pl, 0, sizeof(pl));
	memset(&ol, 0, sizeof(ol));
	memset(&sl, 0, sizeof(sl));
	memset(&ll, 0, sizeof(ll));
	sl.len = ll.len = len;
	rdmamsg_group_attr_new(&at);
	rdmamsg_group_attr_set_heartbeat(at, 10);
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_SUBSCRIBER);
	ok(!rdmamsg_group_join(b, "239.1.2.23", at, &sc, &sl, &sg) &&
		   test_run_until(b, &sl.joined, 60000) == 1,
	   "bare: a subscriber joined");
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_PUBLISHER);
	ok(!rdmamsg_group_join(a, "239.1.2.23", at, &pc, &pl, &pg) &&
		   test_run_until(a, &pl.joined, 60000) == 1,
	   "the publisher joined");
	both(a, b, 50); /* its first heartbeat heard */
	rdmamsg_group_query(pg, &s0);
	ok(!publish_len(pg, a, b, 0, 200, len), "200 messages of %zu B", len);
	rdmamsg_group_query(pg, &st);
	dg = st.datagrams_sent - s0.datagrams_sent -
	     (st.heartbeats_sent - s0.heartbeats_sent);
	ok(st.mtu < len && dg == 200,
	   "a datagram each (%llu datagrams, %u B a fragment)",
	   (unsigned long long)dg, st.mtu);
	/* a subscriber joins while they stream (no idle moment) */
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_SUBSCRIBER);
	ok(!rdmamsg_group_join(b, "239.1.2.23", at, &sc, &ll, &lg),
	   "a subscriber joins while they stream");
	ok(!publish_len(pg, a, b, 200, 600, len) && ll.joined == 1,
	   "400 more, it joined meanwhile");
	end = test_now_ms() + 10000;
	while ((sl.received < 600 || ll.received + ll.first < 600) &&
	       test_now_ms() < end)
		both(a, b, 5);
	ok(sl.received == 600 && !sl.lost && !sl.bad && !sl.first,
	   "the first subscriber got 0 .. 599 in order, contents checked "
	   "(%llu, %llu lost, %llu bad)",
	   (unsigned long long)sl.received, (unsigned long long)sl.lost,
	   (unsigned long long)sl.bad);
	ok(ll.received && ll.first > 200 && ll.first + ll.received == 600 &&
		   !ll.lost && !ll.bad,
	   "the late one got %llu .. 599, no loss reported, none bad (%llu, "
	   "%llu lost, %llu bad)",
	   (unsigned long long)ll.first, (unsigned long long)ll.received,
	   (unsigned long long)ll.lost, (unsigned long long)ll.bad);
	rdmamsg_group_query(sg, &st);
	ok(st.publishers == 1 && st.msgs_received == 600 && !st.gaps &&
		   !st.duplicates && !st.malformed && !st.lost_fragments,
	   "its counters: one publisher, 600 messages, nothing dropped");
	ok(!rdmamsg_group_close(pg, late_closed), "the publisher leaves");
	/* batching off: the version-1 wire, two fragments a message */
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_PUBLISHER);
	rdmamsg_group_attr_set_batch(at, 0);
	ok(!rdmamsg_group_join(a, "239.1.2.23", at, &pc, &ol, &og) &&
		   test_run_until(a, &ol.joined, 60000) == 1,
	   "a publisher without batches joined");
	rdmamsg_group_attr_delete(&at);
	both(a, b, 50);
	sl.received = sl.lost = 0;
	rdmamsg_group_query(og, &s0);
	ok(!publish_len(og, a, b, 0, 100, len), "100 messages of %zu B", len);
	rdmamsg_group_query(og, &st);
	dg = st.datagrams_sent - s0.datagrams_sent -
	     (st.heartbeats_sent - s0.heartbeats_sent);
	end = test_now_ms() + 10000;
	while (sl.received < 100 && test_now_ms() < end)
		both(a, b, 5);
	ok(dg == 200 && sl.received == 100 && !sl.first && !sl.lost && !sl.bad,
	   "two datagrams each (%llu), all taken in order (%llu, %llu bad)",
	   (unsigned long long)dg, (unsigned long long)sl.received,
	   (unsigned long long)sl.bad);
	ok(!rdmamsg_group_close(og, late_closed), "it leaves");
	ok(!rdmamsg_group_close(sg, late_closed) &&
		   !rdmamsg_group_close(lg, late_closed),
	   "the subscribers leave");
	end = test_now_ms() + 10000;
	while ((pl.closed + ol.closed < 2 || sl.closed + ll.closed < 2) &&
	       test_now_ms() < end)
		both(a, b, 5);
	ok(pl.closed == 1 && ol.closed == 1 && sl.closed == 1 && ll.closed == 1,
	   "each closed once");
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b),
	   "both contexts destroyed");
}

/* ---- the receive depth: what a subscriber that does not poll takes --- */

#define DEPTH_N	   2100 /* three of the packed pool buffers at a 4 KiB MTU */
#define DEPTH_OVER 50
#define DEPTH_MORE 10

struct depth_result {
	uint64_t received, first, bad, dgrams; /* while it did not poll */
	uint64_t received_all, lost, gaps, msgs_lost, malformed;
};

static int depth_go[2]; /* the parent's word to the subscriber */

/* depth_wait -- a byte from fd within ms: 0, or -1 */
static int depth_wait(int fd, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	char c;

	if (poll(&pfd, 1, ms) != 1 || read(fd, &c, 1) != 1)
		return -1;
	return 0;
}

/* depth_sub -- the subscriber: once it knows the publisher, it stops
 * polling until told, then takes what its receives held, then the rest */
static int depth_sub(int wfd, void *arg)
{
	struct rdmamsg_group_cbs sc = {.on_join = late_join,
				       .on_message = late_msg,
				       .on_loss = late_loss};
	struct rdmamsg_ctx *b = test_ctx();
	struct rdmamsg_group *sg;
	struct rdmamsg_group_attr *at;
	struct rdmamsg_group_stats st, s0;
	struct depth_result r;
	struct late l;
	long long end;

	(void)arg;
	memset(&l, 0, sizeof(l));
	memset(&r, 0, sizeof(r));
	l.len = 4096;
	if (rdmamsg_group_attr_new(&at) ||
	    rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_SUBSCRIBER) ||
	    rdmamsg_group_attr_set_recv_depth(at, DEPTH_N) ||
	    rdmamsg_group_join(b, "239.1.2.27", at, &sc, &l, &sg))
		return 80;
	rdmamsg_group_attr_delete(&at);
	if (test_run_until(b, &l.joined, 60000) != 1)
		return 81;
	if (write(wfd, "j", 1) != 1)
		return 82;
	end = test_now_ms() + 60000;
	do { /* the publisher's join heartbeat */
		test_idle(b, 5);
		rdmamsg_group_query(sg, &s0);
	} while (!s0.publishers && test_now_ms() < end);
	if (write(wfd, "p", 1) != 1 || depth_wait(depth_go[0], 120000))
		return 83;
	end = test_now_ms() + 10000;
	while (l.received < DEPTH_N && test_now_ms() < end)
		test_idle(b, 5);
	test_idle(b, 20);
	rdmamsg_group_query(sg, &st);
	r.received = l.received;
	r.first = l.first;
	r.bad = l.bad;
	r.dgrams = st.datagrams_received - s0.datagrams_received;
	if (write(wfd, "d", 1) != 1)
		return 84;
	end = test_now_ms() + 10000;
	while (l.received < DEPTH_N + DEPTH_MORE && test_now_ms() < end)
		test_idle(b, 5);
	test_idle(b, 20);
	rdmamsg_group_query(sg, &st);
	r.received_all = l.received;
	r.lost = l.lost;
	r.bad += l.bad;
	r.gaps = st.gaps;
	r.msgs_lost = st.msgs_lost;
	r.malformed = st.malformed;
	if (rdmamsg_group_close(sg, late_closed) ||
	    test_run_until(b, (volatile int *)&l.closed, 60000) != 1 ||
	    rdmamsg_ctx_destroy(&b))
		return 85;
	if (write(wfd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		return 86;
	return 0;
}

/*
 * depth_exact -- a subscriber process with 2,100 receives (three of the
 * packed pool buffers they lie in at a 4 KiB MTU) that does not poll
 * while 2,150 messages of 4 KiB go out (a datagram each, filling its
 * slot) takes exactly 2,100 of them, in order and intact, and every one
 * of the 50 the fabric dropped for want of a receive is reported, once,
 * when the next messages show the gap (one receive fewer posted fails
 * both)
 */
static void depth_exact(void)
{
	struct rdmamsg_group_cbs pc = {.on_join = pub_join,
				       .on_publish = pub_done};
	struct rdmamsg_ctx *a = test_ctx();
	struct rdmamsg_group *pg;
	struct rdmamsg_group_attr *at;
	struct rdmamsg_group_stats st;
	struct depth_result r;
	struct pub pl;
	static unsigned char buf[4096];
	uint64_t i, total = DEPTH_N + DEPTH_OVER;
	long long end;
	int rfd, ret = 0, status = -1;
	pid_t pid;

	memset(&pl, 0, sizeof(pl));
	memset(&r, 0, sizeof(r));
	if (pipe(depth_go))
		bail_out("pipe: %s", strerror(errno));
	pid = test_fork(depth_sub, NULL, &rfd);
	close(depth_go[0]);
	ok(!depth_wait(rfd, 60000), "depth: a subscriber with %u receives",
	   DEPTH_N);
	rdmamsg_group_attr_new(&at);
	/* no heartbeat but the join's: none takes a receive meanwhile */
	rdmamsg_group_attr_set_heartbeat(at, 60000);
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_PUBLISHER);
	ok(!rdmamsg_group_join(a, "239.1.2.27", at, &pc, &pl, &pg) &&
		   test_run_until(a, &pl.joined, 60000) == 1 &&
		   !depth_wait(rfd, 60000),
	   "the publisher joined, the subscriber heard of it");
	rdmamsg_group_attr_delete(&at);
	end = test_now_ms() + 60000;
	for (i = 0; i < total && test_now_ms() < end;) {
		fill(i, buf, sizeof(buf));
		ret = rdmamsg_group_publish(pg, buf, sizeof(buf),
					    (void *)(uintptr_t)i);
		if (ret == -EAGAIN) {
			test_idle(a, 1);
			continue;
		}
		if (ret)
			break;
		i++;
	}
	while (pl.completed < total && test_now_ms() < end)
		test_idle(a, 1); /* every send complete: placed or dropped */
	rdmamsg_group_query(pg, &st);
	ok(!ret && pl.completed == total && !pl.failed && !pl.order &&
		   st.datagrams_sent - st.heartbeats_sent == total,
	   "%llu messages of 4 KiB while it does not poll, a datagram each "
	   "(%llu)",
	   (unsigned long long)pl.completed,
	   (unsigned long long)(st.datagrams_sent - st.heartbeats_sent));
	if (write(depth_go[1], "g", 1) != 1)
		bail_out("write: %s", strerror(errno));
	ok(!depth_wait(rfd, 60000), "it took what it had");
	for (i = total; i < total + DEPTH_MORE && !ret; i++) {
		fill(i, buf, sizeof(buf));
		ret = rdmamsg_group_publish(pg, buf, sizeof(buf),
					    (void *)(uintptr_t)i);
		test_idle(a, 5);
	}
	ok(!ret, "%u more, the subscriber polling", DEPTH_MORE);
	ok(read(rfd, &r, sizeof(r)) == (ssize_t)sizeof(r) &&
		   (status = test_wait_child(pid)) == 0,
	   "the subscriber left");
	ok(r.received == DEPTH_N && !r.first && !r.bad && r.dgrams == DEPTH_N,
	   "it took exactly its depth, 0 .. %u in order, contents checked "
	   "(%llu, %llu datagrams, %llu bad)",
	   DEPTH_N - 1, (unsigned long long)r.received,
	   (unsigned long long)r.dgrams, (unsigned long long)r.bad);
	ok(r.received_all == DEPTH_N + DEPTH_MORE && r.lost == DEPTH_OVER &&
		   r.gaps == 1 && r.msgs_lost == DEPTH_OVER && !r.malformed,
	   "the %u dropped reported in one gap, the rest taken (%llu "
	   "received, %llu lost in %llu gaps)",
	   DEPTH_OVER, (unsigned long long)r.received_all,
	   (unsigned long long)r.lost, (unsigned long long)r.gaps);
	close(rfd);
	close(depth_go[1]);
	ok(!rdmamsg_group_close(pg, pub_closed) &&
		   test_run_until(a, (volatile int *)&pl.closed, 60000) == 1,
	   "the publisher left");
	ok(!rdmamsg_ctx_destroy(&a), "context destroyed");
}

/* ---- batches: small messages published while others are in flight --- */

static void batches(void)
{
	struct rdmamsg_group_cbs pc = {.on_join = pub_join,
				       .on_publish = pub_done};
	struct rdmamsg_group_cbs sc = {.on_join = late_join,
				       .on_message = late_msg,
				       .on_loss = late_loss};
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx(), *c = test_ctx();
	struct rdmamsg_group *pg, *sg, *lg, *ug;
	struct rdmamsg_group_attr *at;
	struct rdmamsg_group_stats st, s0;
	struct late sl, ll;
	struct pub p, pu;
	const uint64_t n = 1000;
	long long end;
	uint64_t i, d;
	int bad = 0;

	memset(&p, 0, sizeof(p));
	memset(&pu, 0, sizeof(pu));
	memset(&sl, 0, sizeof(sl));
	memset(&ll, 0, sizeof(ll));
	rdmamsg_group_attr_new(&at);
	ok(rdmamsg_group_attr_set_batch(NULL, 1) == -EINVAL &&
		   rdmamsg_group_attr_set_batch(at, 2) == -EINVAL &&
		   rdmamsg_group_attr_set_batch(at, -1) == -EINVAL,
	   "rdmamsg_group_attr_set_batch: NULL, 2, -1: -EINVAL");
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_SUBSCRIBER);
	ok(!rdmamsg_group_join(b, "239.1.2.21", at, &sc, &sl, &sg) &&
		   test_run_until(b, &sl.joined, 60000) == 1,
	   "batches: a subscriber joined");
	/* the other loses one datagram in 3: a batch's messages at once */
	setenv("RDMAMSG_TEST_MC_DROP", "3", 1);
	ok(!rdmamsg_group_join(c, "239.1.2.21", at, &sc, &ll, &lg) &&
		   test_run_until(c, &ll.joined, 60000) == 1,
	   "a subscriber that drops one datagram in 3 joined");
	unsetenv("RDMAMSG_TEST_MC_DROP");
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_PUBLISHER);
	ok(!rdmamsg_group_join(a, "239.1.2.21", at, &pc, &p, &pg) &&
		   test_run_until(a, &p.joined, 60000) == 1,
	   "the publisher joined");
	/* its first heartbeat heard: nothing before it is a loss */
	end = test_now_ms() + 10000;
	do {
		rdmamsg_ctx_progress(a);
		test_idle(b, 1);
		test_idle(c, 1);
		rdmamsg_group_query(sg, &st);
		rdmamsg_group_query(lg, &s0);
	} while ((!st.publishers || !s0.publishers) && test_now_ms() < end);
	/* no progress meanwhile: the first message goes (or joins the
	 * batch behind the heartbeat), the others wait in the batch, which
	 * goes each time it holds 64 */
	rdmamsg_group_query(pg, &s0);
	for (i = 0; i < n; i++)
		if (rdmamsg_group_publish(pg, &i, 8, (void *)(uintptr_t)i))
			bad++;
	rdmamsg_group_query(pg, &st);
	d = st.datagrams_sent - s0.datagrams_sent;
	ok(!bad && d >= n / 64 && d <= n / 64 + 1,
	   "%llu messages of 8 B without progress: %llu datagrams (%d "
	   "refused)",
	   (unsigned long long)n, (unsigned long long)d, bad);
	end = test_now_ms() + 60000;
	while ((sl.received + sl.lost < n || ll.received + ll.lost < n ||
		p.completed < n) &&
	       test_now_ms() < end) {
		rdmamsg_ctx_progress(a);
		test_idle(b, 1);
		test_idle(c, 1);
	}
	ok(p.completed == n && !p.failed && !p.order,
	   "each publish completed once, in order (%llu, %llu failed)",
	   (unsigned long long)p.completed, (unsigned long long)p.failed);
	ok(sl.received == n && !sl.lost && !sl.bad && sl.first == 0,
	   "the subscriber got 0 .. %llu in order, contents checked (%llu, "
	   "%llu lost, %llu bad)",
	   (unsigned long long)n - 1, (unsigned long long)sl.received,
	   (unsigned long long)sl.lost, (unsigned long long)sl.bad);
	rdmamsg_group_query(sg, &st);
	ok(st.msgs_received == n && !st.gaps && !st.duplicates &&
		   !st.malformed && !st.lost_fragments,
	   "its counters: %llu messages, no gap, nothing dropped",
	   (unsigned long long)st.msgs_received);
	rdmamsg_group_query(lg, &st);
	ok(ll.lost > 0 && ll.received + ll.lost == n && !ll.bad &&
		   st.msgs_lost == ll.lost && !st.duplicates &&
		   !st.lost_fragments && !st.malformed,
	   "the lossy one: %llu received + %llu reported lost == %llu, in "
	   "order, no duplicate, no fragment of a lost message",
	   (unsigned long long)ll.received, (unsigned long long)ll.lost,
	   (unsigned long long)n);
	/* batching off: a datagram per message */
	rdmamsg_group_attr_set_batch(at, 0);
	ok(!rdmamsg_group_join(a, "239.1.2.21", at, &pc, &pu, &ug) &&
		   test_run_until(a, &pu.joined, 60000) == 1,
	   "a publisher without batches joined");
	rdmamsg_group_attr_delete(&at);
	rdmamsg_group_query(ug, &s0);
	for (i = 0, bad = 0; i < 100; i++)
		if (rdmamsg_group_publish(ug, &i, 8, (void *)(uintptr_t)i))
			bad++;
	rdmamsg_group_query(ug, &st);
	ok(!bad && st.datagrams_sent - s0.datagrams_sent == 100,
	   "without batches: 100 messages, %llu datagrams",
	   (unsigned long long)(st.datagrams_sent - s0.datagrams_sent));
	ok(!rdmamsg_group_close(pg, pub_closed) &&
		   !rdmamsg_group_close(ug, pub_closed) &&
		   test_run_until(a, (volatile int *)&pu.closed, 60000) == 1 &&
		   test_run_until(a, (volatile int *)&p.closed, 60000) == 1,
	   "the publishers leave");
	ok(pu.completed == 100 && !pu.failed && !pu.order,
	   "each of the 100 completed once, in order");
	ok(!rdmamsg_group_close(sg, late_closed) &&
		   !rdmamsg_group_close(lg, late_closed) &&
		   test_run_until(b, (volatile int *)&sl.closed, 60000) == 1 &&
		   test_run_until(c, (volatile int *)&ll.closed, 60000) == 1,
	   "the subscribers leave");
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b) &&
		   !rdmamsg_ctx_destroy(&c),
	   "the contexts destroyed");
}

/* ---- a repair leaves the publisher room -------------------------------- */

/* repair_room -- a subscriber that does not poll during a burst keeps the
 * 16 datagrams its receives hold and NAKs the rest; the repair takes half
 * of the publisher's send queue of 16 a pass (the completions of what a
 * pass posts are polled by the next), so a publish made right after the
 * NAK went in goes out beside the repair; everything arrives once, in
 * order */
static void repair_room(void)
{
	struct rdmamsg_group_cbs pc = {.on_join = pub_join,
				       .on_publish = pub_done};
	struct rdmamsg_group_cbs sc = {.on_join = late_join,
				       .on_message = late_msg,
				       .on_loss = late_loss};
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx();
	struct rdmamsg_group *pg, *sg;
	struct rdmamsg_group_attr *at;
	struct rdmamsg_group_stats st, s0;
	const uint64_t burst = 200, n = burst + 1;
	struct late sl;
	struct pub p;
	long long end;
	uint64_t i;
	int ret = 0, tries = 0;

	memset(&p, 0, sizeof(p));
	memset(&sl, 0, sizeof(sl));
	rdmamsg_group_attr_new(&at);
	rdmamsg_group_attr_set_reliable(at, 1024);
	rdmamsg_group_attr_set_heartbeat(at, 10);
	rdmamsg_group_attr_set_batch(at, 0);
	rdmamsg_group_attr_set_recv_depth(at, 16);
	rdmamsg_group_attr_set_send_depth(at, 16);
	rdmamsg_group_attr_set_max_msg_size(at, 1024);
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_SUBSCRIBER);
	ok(!rdmamsg_group_join(b, "239.1.2.22", at, &sc, &sl, &sg) &&
		   test_run_until(b, &sl.joined, 60000) == 1,
	   "repair room: a subscriber with 16 receives joined");
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_PUBLISHER);
	ok(!rdmamsg_group_join(a, "239.1.2.22", at, &pc, &p, &pg) &&
		   test_run_until(a, &p.joined, 60000) == 1,
	   "a publisher with a send queue of 16 joined");
	rdmamsg_group_attr_delete(&at);
	end = test_now_ms() + 10000;
	do {
		both(a, b, 5);
		rdmamsg_group_query(pg, &st);
	} while (st.receivers < 1 && test_now_ms() < end);
	ok(st.receivers == 1, "the publisher knows the subscriber");
	/* the burst, the subscriber not polling */
	for (i = 0; i < burst && tries < 100000;) {
		ret = rdmamsg_group_publish(pg, &i, 8, (void *)(uintptr_t)i);
		if (ret == -EAGAIN) {
			rdmamsg_ctx_progress(a);
			tries++;
			continue;
		}
		if (ret)
			break;
		i++;
	}
	ok(i == burst, "%llu messages while the subscriber slept (%d)",
	   (unsigned long long)i, ret);
	/* it wakes: its 16, the heartbeat's position, its NAK */
	rdmamsg_group_query(pg, &s0);
	end = test_now_ms() + 10000;
	do {
		rdmamsg_ctx_progress(b);
		rdmamsg_ctx_progress(a);
		rdmamsg_group_query(pg, &st);
	} while (st.naks_received == s0.naks_received && test_now_ms() < end);
	i = burst;
	ret = rdmamsg_group_publish(pg, &i, 8, (void *)(uintptr_t)i);
	rdmamsg_group_query(pg, &st);
	ok(!ret && st.naks_received > s0.naks_received &&
		   st.published_in_repair == s0.published_in_repair + 1 &&
		   st.repairs > s0.repairs && st.repairs < burst - 16,
	   "a publish right after the NAK went out during the repair "
	   "(%d; %llu repaired so far, %llu published during repairs)",
	   ret, (unsigned long long)(st.repairs - s0.repairs),
	   (unsigned long long)st.published_in_repair);
	end = test_now_ms() + 60000;
	while ((sl.received + sl.lost < n || p.completed < n) &&
	       test_now_ms() < end) {
		rdmamsg_ctx_progress(a);
		rdmamsg_ctx_progress(b);
	}
	ok(sl.received == n && !sl.lost && !sl.bad && sl.first == 0,
	   "the subscriber got 0 .. %llu once each, in order (%llu, %llu "
	   "lost, %llu bad)",
	   (unsigned long long)burst, (unsigned long long)sl.received,
	   (unsigned long long)sl.lost, (unsigned long long)sl.bad);
	ok(p.completed == n && !p.failed && !p.order,
	   "each publish completed once, in order (%llu)",
	   (unsigned long long)p.completed);
	ok(!rdmamsg_group_close(pg, pub_closed) &&
		   !rdmamsg_group_close(sg, late_closed) &&
		   test_run_until(a, (volatile int *)&p.closed, 60000) == 1 &&
		   test_run_until(b, (volatile int *)&sl.closed, 60000) == 1,
	   "both leave");
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b),
	   "both contexts destroyed");
}

/* ---- on_publish: once a message, in order, without waiting for more --- */

struct cpub {
	struct pub p;	   /* first: pub_done's argument */
	uint64_t at_close; /* publishes completed when close_cb came */
};

static void cpub_closed(struct rdmamsg_group *g, void *arg)
{
	struct cpub *c = arg;

	(void)g;
	c->at_close = c->p.completed;
	c->p.closed++;
}

/* pub_until -- drive the publisher's context alone (nothing published
 * meanwhile) until want publishes completed, for at most 1 s (less than
 * the heartbeat period: no heartbeat posts what waits) */
static void pub_until(struct rdmamsg_ctx *a, const struct pub *p, uint64_t want)
{
	long long end = test_now_ms() + 1000;

	while (p->completed < want && test_now_ms() < end)
		test_idle(a, 1);
}

/* publish_burst -- messages [from, to) of len bytes, no progress between
 * them: 0, or the first refusal */
static int publish_burst(struct rdmamsg_group *g, uint64_t from, uint64_t to,
			 size_t len)
{
	static unsigned char buf[8192];
	uint64_t i;
	int ret;

	for (i = from; i < to; i++) {
		fill(i, buf, len);
		ret = rdmamsg_group_publish(g, buf, len, (void *)(uintptr_t)i);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * completions -- sends are signalled one in a chain: each publish still
 * completes once, in order, and a paced publisher's last message (one
 * alone, or the tail after a signalled one) completes without another
 * publish after it; a close with sends queued and posted completes each
 * before close_cb
 */
static void completions(void)
{
	struct rdmamsg_group_cbs pc = {.on_join = pub_join,
				       .on_publish = pub_done};
	struct rdmamsg_group_cbs sc = {.on_join = late_join,
				       .on_message = late_msg,
				       .on_loss = late_loss};
	struct rdmamsg_ctx *a = test_ctx(), *b = test_ctx();
	static const uint64_t burst[] = {1, 2, 33, 200};
	struct rdmamsg_group *pg, *sg;
	struct rdmamsg_group_attr *at;
	const size_t len = 4096;
	struct late sl;
	struct cpub c;
	uint64_t n = 0;
	long long end;
	unsigned int i;

	memset(&c, 0, sizeof(c));
	memset(&sl, 0, sizeof(sl));
	sl.len = len;
	rdmamsg_group_attr_new(&at);
	rdmamsg_group_attr_set_heartbeat(at, 5000);
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_SUBSCRIBER);
	ok(!rdmamsg_group_join(b, "239.1.2.25", at, &sc, &sl, &sg) &&
		   test_run_until(b, &sl.joined, 60000) == 1,
	   "completions: a subscriber joined");
	rdmamsg_group_attr_set_role(at, RDMAMSG_GROUP_PUBLISHER);
	ok(!rdmamsg_group_join(a, "239.1.2.25", at, &pc, &c.p, &pg) &&
		   test_run_until(a, &c.p.joined, 60000) == 1,
	   "completions: the publisher joined");
	rdmamsg_group_attr_delete(&at);
	both(a, b, 50); /* its first heartbeat (the join's) heard */
	/* bursts of 1, 2, 33 (a chain and one) and 200, then nothing */
	for (i = 0; i < sizeof(burst) / sizeof(burst[0]); i++) {
		int ret = publish_burst(pg, n, n + burst[i], len);

		n += burst[i];
		pub_until(a, &c.p, n);
		ok(!ret && c.p.completed == n && !c.p.failed && !c.p.order,
		   "%llu message(s), then nothing: each completed once, in "
		   "order, without another publish (%llu of %llu, %llu failed)",
		   (unsigned long long)burst[i],
		   (unsigned long long)c.p.completed, (unsigned long long)n,
		   (unsigned long long)c.p.failed);
	}
	end = test_now_ms() + 10000;
	while (sl.received < n && test_now_ms() < end)
		both(a, b, 5);
	ok(sl.received == n && !sl.first && !sl.lost && !sl.bad,
	   "the subscriber got 0 .. %llu in order, contents checked (%llu, "
	   "%llu lost, %llu bad)",
	   (unsigned long long)n - 1, (unsigned long long)sl.received,
	   (unsigned long long)sl.lost, (unsigned long long)sl.bad);
	/* a close right after a burst: some posted, some queued */
	ok(!publish_burst(pg, n, n + 100, len) &&
		   !rdmamsg_group_close(pg, cpub_closed) &&
		   test_run_until(a, (volatile int *)&c.p.closed, 60000) == 1,
	   "a close with 100 sends in flight");
	n += 100;
	ok(c.p.closed == 1 && c.at_close == n && c.p.completed == n &&
		   !c.p.order,
	   "each completed once, in order, before close_cb (%llu of %llu; "
	   "%llu failed)",
	   (unsigned long long)c.at_close, (unsigned long long)n,
	   (unsigned long long)c.p.failed);
	ok(!rdmamsg_group_close(sg, late_closed) &&
		   test_run_until(b, (volatile int *)&sl.closed, 60000) == 1,
	   "completions: the subscriber leaves");
	ok(!rdmamsg_ctx_destroy(&a) && !rdmamsg_ctx_destroy(&b),
	   "completions: both contexts destroyed");
}

/* ---- a reliable publisher gone without a word ------------------------- */

/* gone_pub -- a child: a reliable publisher that sends 40 messages and
 * exits without closing (no last heartbeat, no repairs) */
static int gone_pub(int wfd, void *arg)
{
	struct rdmamsg_group_cbs cbs = {.on_join = pub_join};
	struct rdmamsg_group_attr *a;
	struct rdmamsg_ctx *ctx = test_ctx();
	struct rdmamsg_group *g;
	struct pub p;
	uint64_t i;
	char go;

	(void)arg;
	memset(&p, 0, sizeof(p));
	rdmamsg_group_attr_new(&a);
	rdmamsg_group_attr_set_role(a, RDMAMSG_GROUP_PUBLISHER);
	rdmamsg_group_attr_set_reliable(a, 64);
	/* each message posted at once: a batch would wait for progress */
	rdmamsg_group_attr_set_batch(a, 0);
	if (rdmamsg_group_join(ctx, "239.1.2.19", a, &cbs, &p, &g) ||
	    test_run_until(ctx, &p.joined, 60000) != 1)
		return 70;
	rdmamsg_group_attr_delete(&a);
	if (write(wfd, "j", 1) != 1 || read(wfd, &go, 1) != 1)
		return 71;
	/* no progress from here on: nothing is repaired */
	for (i = 0; i < 40; i++)
		if (rdmamsg_group_publish(g, &i, 8, NULL))
			return 72;
	usleep(300000);
	/* it crashes: no close, no last heartbeat (and no leak check) */
	kill(getpid(), SIGKILL);
	return 73;
}

static void gone(void)
{
	struct rdmamsg_group_cbs sc = {.on_join = late_join,
				       .on_message = late_msg,
				       .on_loss = late_loss};
	struct rdmamsg_group_attr *a;
	struct rdmamsg_ctx *ctx = test_ctx();
	struct rdmamsg_group *g;
	struct late l;
	int sv[2];
	long long end;
	pid_t pid;
	char c;

	memset(&l, 0, sizeof(l));
	rdmamsg_group_attr_new(&a);
	rdmamsg_group_attr_set_role(a, RDMAMSG_GROUP_SUBSCRIBER);
	rdmamsg_group_attr_set_reliable(a, 64);
	rdmamsg_group_attr_set_heartbeat(a, 20);
	setenv("RDMAMSG_TEST_MC_DROP", "3", 1);
	ok(!rdmamsg_group_join(ctx, "239.1.2.19", a, &sc, &l, &g) &&
		   test_run_until(ctx, &l.joined, 60000) == 1,
	   "gone: a reliable subscriber that drops one datagram in 3 joined");
	unsetenv("RDMAMSG_TEST_MC_DROP");
	rdmamsg_group_attr_delete(&a);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		bail_out("socketpair");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		_exit(gone_pub(sv[1], NULL));
	}
	close(sv[1]);
	ok(read(sv[0], &c, 1) == 1 && write(sv[0], "g", 1) == 1,
	   "the publisher joined");
	end = test_now_ms() + 20000;
	while (l.received + l.lost < 39 && test_now_ms() < end)
		test_idle(ctx, 10);
	test_idle(ctx, 100);
	ok(test_wait_child(pid) == 128 + SIGKILL,
	   "the publisher died (SIGKILL) without closing");
	close(sv[0]);
	ok(l.lost > 0 && l.received + l.lost >= 39 &&
		   l.received + l.lost <= 40 && !l.bad,
	   "what the gone publisher can no longer repair is reported: %llu "
	   "received + %llu lost (the last message is unknown if its "
	   "datagram was the one lost)",
	   (unsigned long long)l.received, (unsigned long long)l.lost);
	ok(!rdmamsg_group_close(g, late_closed) &&
		   test_run_until(ctx, (volatile int *)&l.closed, 60000) == 1,
	   "subscriber closed");
	ok(!rdmamsg_ctx_destroy(&ctx), "context destroyed");
}

int main(void)
{
	test_setup("mcast");
	results = mmap(NULL, NSUB * sizeof(*results), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (results == MAP_FAILED)
		bail_out("mmap");
	nmsgs = tap_small() ? 600 : 20000;
	/* the long run: RDMAMSG_TEST_MC_MSGS=1000000 */
	if (getenv("RDMAMSG_TEST_MC_MSGS")) {
		char *e;
		unsigned long n =
			strtoul(getenv("RDMAMSG_TEST_MC_MSGS"), &e, 10);

		if (*e || n < 100 || n > 100000000)
			bail_out("RDMAMSG_TEST_MC_MSGS: 100 .. 100000000");
		nmsgs = (unsigned int)n;
	}
	if (getenv("RDMAMSG_TEST_MC_LONG")) {
		if (!getenv("RDMAMSG_TEST_MC_MSGS"))
			nmsgs = 1000000;
		alarm(1200 + nmsgs / 100);
		round_(-1, 0);
		return done_testing();
	}
	alarm(1200 + nmsgs / 100);
	round_(-1, 0);
	round_(1, 0);
	round_(1, 64);
	/* a window larger than the run: only a repair could stop the
	 * publisher, and must not */
	{
		unsigned int n = nmsgs;

		nmsgs = 2000;
		sdepth = 32; /* more than half full: repairs wait */
		round_(1, 4096);
		sdepth = 256;
		nmsgs = n;
	}
	stopped(16);
	stopped(0);
	flows();
	late_joiner();
	bare();
	depth_exact();
	poll_before_block();
	batches();
	repair_room();
	completions();
	gone();
	bad_input();
	return done_testing();
}
