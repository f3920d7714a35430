/* SPDX-License-Identifier: MIT */
/*
 * srq.c -- shared receive queues: bad inputs; N endpoints on one SRQ (both
 * sides on an SRQ) exchanging verified messages; 100 senders into one SRQ
 * with a slow receiver (rnr_retry 0: an RNR would be an error) with no
 * loss and the SRQ's memory bounded by the windows; one endpoint closing
 * while the others go on; reconnect churn that does not grow the SRQ.
 * Server and client are two contexts of this process.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

#define MAXC 128
/* an endpoint's full window on an SRQ: receive depth + 2 control credits;
 * its guaranteed one: 1 data + 2 control (the rest lent from the surplus) */
#define WIN(depth) ((depth) + 2)
#define WIN_MIN	   3
/* lent beyond the guaranteed windows: at most a sixteenth of the server
 * SRQ's 1,024 buffers (srq.c) */
#define LENT_MAX (1024 / 16)

struct cconn {
	struct rdmamsg_ep *ep;
	unsigned int id;
	uint64_t sent, target;
	uint64_t reply_n, reply_bad;
	int connected, status, replied, closed, disc, disc_status, skip;
};

struct sconn {
	struct rdmamsg_ep *ep;
	unsigned int id;
	uint64_t next, bad;
	int closed;
};

static struct rdmamsg_ctx *sctx, *cctx;
static struct rdmamsg_ep_attr *sattr; /* what the server accepts with */
static struct cconn cc[MAXC];
static int accepted, accept_err, sclosed, sbad_msgs;
static char addr[64];

/* fill -- the content of message seq of connection id, len bytes */
static void fill(unsigned char *p, size_t len, unsigned int id, uint64_t seq)
{
	size_t k;

	memcpy(p, &seq, 8);
	memcpy(p + 8, &id, 4);
	for (k = 12; k < len; k++)
		p[k] = (unsigned char)(id * 31 + seq * 7 + k);
}

/* msg_len -- 16 .. 215 bytes, varying */
static size_t msg_len(uint64_t seq)
{
	return 16 + (size_t)(seq * 37 % 200);
}

/* ---- server ---- */

static void srv_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	sclosed++;
	free(arg);
}

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct sconn *s = arg;
	unsigned char want[256];
	uint64_t seq;
	unsigned int id;

	(void)imm;
	(void)flags;
	if (len < 12 || len > sizeof(want)) {
		s->bad++;
		return;
	}
	memcpy(&seq, data, 8);
	memcpy(&id, (char *)data + 8, 4);
	if (seq == UINT64_MAX) {
		/* the end: answer with what arrived */
		uint64_t r[2] = {s->next, s->bad};

		if (rdmamsg_send(ep, r, sizeof(r), NULL))
			sbad_msgs++;
		return;
	}
	if (s->next == 0)
		s->id = id;
	fill(want, len, s->id, s->next);
	if (id != s->id || seq != s->next || len != msg_len(seq) ||
	    memcmp(want, data, len))
		s->bad++;
	s->next = seq + 1;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, srv_close_cb);
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct sconn *s = calloc(1, sizeof(*s));
	int ret;

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	ret = rdmamsg_conn_req_accept(req, sattr, &srv_cbs, s, &s->ep);
	if (ret) {
		accept_err = ret;
		free(s);
		rdmamsg_conn_req_reject(req, 0, NULL, 0);
		return;
	}
	accepted++;
}

/* ---- client ---- */

static void send_more(struct cconn *c)
{
	unsigned char m[256];

	while (c->connected && !c->status && !c->closed &&
	       c->sent < c->target) {
		size_t len = msg_len(c->sent);

		fill(m, len, c->id, c->sent);
		if (rdmamsg_send(c->ep, m, len, NULL))
			return;
		c->sent++;
	}
	if (c->sent == c->target && c->target) {
		uint64_t end[2] = {UINT64_MAX, 0};

		if (rdmamsg_send(c->ep, end, 16, NULL) == 0)
			c->target = 0; /* asked once */
	}
}

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cconn *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	c->connected = 1;
	c->status = status;
	if (!status)
		send_more(c);
}

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct cconn *c = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len != 16) {
		c->reply_bad = 1;
		return;
	}
	memcpy(&c->reply_n, data, 8);
	memcpy(&c->reply_bad, (char *)data + 8, 8);
	c->replied = 1;
}

static void cli_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	send_more(arg);
}

static void cli_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct cconn *c = arg;

	(void)ep;
	c->disc = 1;
	c->disc_status = status;
}

static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cconn *)arg)->closed = 2;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_writable = cli_writable,
	.on_disconnect = cli_disc,
};

/* pump -- drive both contexts (the server once every slow passes) until
 * done(arg) or 120 s */
static int pump(int (*done)(int n), int n, int slow)
{
	long long end = test_now_ms() + 120000;
	int i = 0;

	while (!done(n) && test_now_ms() < end) {
		rdmamsg_ctx_progress(cctx);
		if (++i % slow == 0)
			rdmamsg_ctx_progress(sctx);
	}
	return done(n);
}

static int all_replied(int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!cc[i].skip && !cc[i].replied && !cc[i].status &&
		    !cc[i].disc)
			return 0;
	return 1;
}

static int all_closed(int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (cc[i].ep && cc[i].closed != 2)
			return 0;
	return sclosed >= accepted;
}

static int all_connected(int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!cc[i].connected)
			return 0;
	return 1;
}

/* run -- n connections (client attr ca), msgs each; the server one pass
 * in slow; close connection 0 after its first messages when close0 */
static void run(const char *name, int n, uint64_t msgs,
		struct rdmamsg_ep_attr *ca, int slow, int close0)
{
	int i, bad_conn = 0, ok_data = 1, ok_err = 1;

	memset(cc, 0, sizeof(cc));
	accepted = sclosed = 0;
	for (i = 0; i < n; i++) {
		cc[i].id = (unsigned int)i + 1;
		cc[i].target = msgs;
		if (rdmamsg_connect(cctx, addr, ca, &cli_cbs, &cc[i],
				    &cc[i].ep))
			bail_out("%s: connect %d", name, i);
	}
	if (close0) {
		/* connection 0 sends a little, then closes while the others
		 * keep going */
		cc[0].target = 20;
		cc[0].skip = 1;
		pump(all_connected, n, slow);
		while (cc[0].sent < 20 && !cc[0].status) {
			rdmamsg_ctx_progress(cctx);
			rdmamsg_ctx_progress(sctx);
		}
		cc[0].closed = 1;
		rdmamsg_ep_close(cc[0].ep, cli_close_cb);
	}
	pump(all_replied, n, slow);
	for (i = 0; i < n; i++) {
		if (cc[i].skip)
			continue;
		if ((cc[i].status || !cc[i].replied) && bad_conn++ < 3)
			printf("# %s: connection %d: connected %d, status %d, "
			       "%llu replies\n",
			       name, i, cc[i].connected, cc[i].status,
			       (unsigned long long)cc[i].reply_n);
		if (cc[i].reply_n != msgs || cc[i].reply_bad)
			ok_data = 0;
		if (cc[i].disc)
			ok_err = 0;
	}
	ok(!bad_conn, "%s: %d connections answered", name, n);
	ok(ok_data, "%s: %llu messages each arrived intact, in order", name,
	   (unsigned long long)msgs);
	ok(ok_err && !sbad_msgs, "%s: no connection failed (no RNR error)",
	   name);
}

/* close_all -- both sides closed, every endpoint freed */
static void close_all(const char *name, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (cc[i].ep && !cc[i].closed) {
			cc[i].closed = 1;
			rdmamsg_ep_close(cc[i].ep, cli_close_cb);
		}
	ok(pump(all_closed, n, 1), "%s: every endpoint closed", name);
}

static int srq_freed;

static void srq_close_cb(struct rdmamsg_srq *srq, void *arg)
{
	(void)srq;
	(*(int *)arg)++;
}

static int srq_closed(int n)
{
	return srq_freed >= n;
}

static int closed_ep(int n)
{
	(void)n;
	return cc[0].closed == 2;
}

int main(void)
{
	struct rdmamsg_srq_attr qa = {.max_bufs = 1024, .buf_size = 1024};
	struct rdmamsg_srq *ssrq, *csrq, *tiny, *other;
	struct rdmamsg_srq_stats st, st0;
	struct rdmamsg_listener *lst;
	struct rdmamsg_ep_attr *ca, *bad;
	struct rdmamsg_ep *ep;
	uint16_t port;
	int small = tap_small(), n, churn, i, grew = 0;
	uint64_t max_bufs = 0;

	test_setup("srq");
	sctx = test_ctx();
	cctx = test_ctx();

	/* ---- bad inputs ---- */
	is_int(rdmamsg_srq_create(NULL, &qa, &ssrq), -EINVAL,
	       "create: NULL ctx");
	is_int(rdmamsg_srq_create(sctx, NULL, &ssrq), -EINVAL,
	       "create: NULL attr");
	is_int(rdmamsg_srq_create(sctx, &qa, NULL), -EINVAL,
	       "create: NULL result");
	{
		struct rdmamsg_srq_attr b = {.max_bufs = 0, .buf_size = 1024};

		is_int(rdmamsg_srq_create(sctx, &b, &ssrq), -EINVAL,
		       "create: no buffers");
		b.max_bufs = 64;
		b.buf_size = 10;
		is_int(rdmamsg_srq_create(sctx, &b, &ssrq), -EINVAL,
		       "create: buffers below 64 bytes");
		b.buf_size = (size_t)1 << 30;
		is_int(rdmamsg_srq_create(sctx, &b, &ssrq), -EINVAL,
		       "create: buffers above 1 MiB");
	}
	is_int(rdmamsg_srq_create(sctx, &qa, &ssrq), 0, "server SRQ");
	is_int(rdmamsg_srq_create(cctx, &qa, &csrq), 0, "client SRQ");
	is_int(rdmamsg_ep_attr_set_srq(NULL, ssrq), -EINVAL,
	       "set_srq: NULL attr");
	is_int(rdmamsg_srq_query(NULL, &st), -EINVAL, "query: NULL srq");
	is_int(rdmamsg_srq_query(ssrq, NULL), -EINVAL, "query: NULL stats");
	is_int(rdmamsg_srq_close(NULL, NULL, NULL), -EINVAL, "close: NULL");
	rdmamsg_srq_query(ssrq, &st);
	ok(st.bufs == 0 && st.posted == 0 && st.endpoints == 0,
	   "a new SRQ holds no memory yet");

	if (rdmamsg_listen(sctx, "127.0.0.1:0", srv_req, NULL, &lst) ||
	    rdmamsg_listener_get_port(lst, &port))
		bail_out("listen");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);

	bad = test_ep_attr(1024, 65536);
	rdmamsg_ep_attr_set_srq(bad, ssrq);
	is_int(rdmamsg_connect(cctx, addr, bad, &cli_cbs, &cc[0], &ep), -EINVAL,
	       "connect with an SRQ of another context");
	rdmamsg_ep_attr_set_srq(bad, csrq);
	rdmamsg_ep_attr_set_eager_size(bad, 2048);
	is_int(rdmamsg_connect(cctx, addr, bad, &cli_cbs, &cc[0], &ep), -EINVAL,
	       "connect with an eager size above the SRQ's buffers");
	is_int(rdmamsg_ep_attr_set_srq(bad, NULL), 0, "set_srq NULL: own ring");

	/* a closing SRQ: refused to new endpoints, freed with its last */
	is_int(rdmamsg_srq_create(cctx, &qa, &other), 0, "third SRQ");
	rdmamsg_ep_attr_set_eager_size(bad, 1024);
	rdmamsg_ep_attr_set_srq(bad, other);
	memset(cc, 0, sizeof(cc));
	cc[0].target = 0;
	is_int(rdmamsg_connect(cctx, addr, bad, &cli_cbs, &cc[0], &cc[0].ep), 0,
	       "an endpoint on the third SRQ");
	srq_freed = 0;
	is_int(rdmamsg_srq_close(other, srq_close_cb, &srq_freed), 0,
	       "close the SRQ while an endpoint uses it");
	is_int(srq_freed, 0, "not freed while used");
	is_int(rdmamsg_srq_close(other, srq_close_cb, &srq_freed), -EALREADY,
	       "close twice: -EALREADY");
	is_int(rdmamsg_ep_attr_set_srq(ca = test_ep_attr(1024, 65536), other),
	       -EINVAL, "set_srq with a closing SRQ");
	is_int(rdmamsg_connect(cctx, addr, bad, &cli_cbs, &cc[1], &ep), -EINVAL,
	       "connect with a closing SRQ");
	pump(all_connected, 1, 1);
	rdmamsg_ep_close(cc[0].ep, cli_close_cb);
	pump(closed_ep, 1, 1);
	ok(pump(srq_closed, 1, 1),
	   "freed (close callback) after its last endpoint");
	rdmamsg_ctx_progress(cctx);
	is_int(srq_freed, 1, "its close callback ran once");
	/* bad still names it: refused, never read (valgrind, ASan) */
	ep = NULL;
	is_int(rdmamsg_connect(cctx, addr, bad, &cli_cbs, &cc[1], &ep), -EINVAL,
	       "connect with an SRQ closed and freed");
	ok(ep == NULL, "no endpoint made");
	rdmamsg_ep_attr_delete(&bad);
	test_idle(sctx, 50);

	/* ---- N endpoints, both sides on an SRQ ---- */
	n = small ? 8 : 32;
	sattr = test_ep_attr(1024, 65536);
	/* a server passing once in 25 under ASan beside other suites: the
	 * default 5 s connect timeout is a policy, not what is tested here */
	rdmamsg_ep_attr_set_connect_timeout(sattr, 60000);
	rdmamsg_ep_attr_set_connect_timeout(ca, 60000);
	rdmamsg_ep_attr_set_recv_depth(sattr, 8);
	rdmamsg_ep_attr_set_srq(sattr, ssrq);
	rdmamsg_ep_attr_set_recv_depth(ca, 8);
	rdmamsg_ep_attr_set_srq(ca, csrq);
	run("shared", n, small ? 50 : 300, ca, 1, 0);
	rdmamsg_srq_query(ssrq, &st);
	ok(st.endpoints == (unsigned int)n &&
		   st.reserved >= (unsigned int)n * WIN_MIN &&
		   st.reserved <= (unsigned int)n * WIN_MIN + LENT_MAX &&
		   st.reserved <= (unsigned int)n * WIN(8),
	   "server SRQ: %u endpoints, %u buffers held (guaranteed "
	   "windows + at most %u lent)",
	   st.endpoints, st.reserved, LENT_MAX);
	/* lent credits given back leave their buffers allocated (posted
	 * for the next borrower): at most the peak of held ones */
	ok(st.bufs >= st.reserved &&
		   st.bufs <= (unsigned int)n * WIN_MIN + LENT_MAX &&
		   st.posted == st.bufs,
	   "server SRQ: %u buffers (at most %u), all posted (%u) when idle",
	   st.bufs, (unsigned int)n * WIN_MIN + LENT_MAX, st.posted);
	rdmamsg_srq_query(csrq, &st);
	ok(st.endpoints == (unsigned int)n && st.posted == st.bufs,
	   "client SRQ: %u endpoints, %u of %u posted", st.endpoints, st.posted,
	   st.bufs);
	close_all("shared", n);
	rdmamsg_srq_query(ssrq, &st);
	ok(st.endpoints == 0 && st.reserved == 0 && st.posted == st.bufs,
	   "windows back to the SRQ, buffers still posted");

	/* ---- 100 senders, one SRQ, a slow receiver; one closes early ---- */
	n = small ? 20 : 100;
	rdmamsg_ep_attr_set_recv_depth(sattr, 4);
	rdmamsg_ep_attr_set_srq(ca, NULL);
	rdmamsg_ep_attr_set_send_backlog(ca, 0);
	run("slow", n, small ? 30 : 200, ca, 25, 1);
	rdmamsg_srq_query(ssrq, &st);
	ok(st.reserved >= (unsigned int)(n - 1) * WIN_MIN &&
		   st.reserved <= (unsigned int)n * WIN_MIN + LENT_MAX &&
		   st.reserved <= (unsigned int)n * WIN(4),
	   "slow: %u buffers held (guaranteed windows + at most %u lent)",
	   st.reserved, LENT_MAX);
	ok(st.bufs <= (unsigned int)n * WIN(4),
	   "slow: SRQ memory bounded: %u buffers (%zu bytes) for %d senders",
	   st.bufs, st.registered, n);
	close_all("slow", n);

	/* ---- reconnect churn does not grow the SRQ ---- */
	rdmamsg_srq_query(ssrq, &st0);
	churn = small ? 5 : 30;
	for (i = 0; i < churn; i++) {
		run("churn", 4, 10, ca, 1, 0);
		close_all("churn", 4);
		rdmamsg_srq_query(ssrq, &st);
		if (st.bufs != st0.bufs)
			grew = 1;
		if (st.bufs > max_bufs)
			max_bufs = st.bufs;
	}
	ok(!grew, "churn: %d reconnect rounds, SRQ stays at %u buffers", churn,
	   st0.bufs);

	/* ---- a full SRQ refuses the window ---- */
	{
		struct rdmamsg_srq_attr ta = {.max_bufs = 8, .buf_size = 1024};

		is_int(rdmamsg_srq_create(sctx, &ta, &tiny), 0, "tiny SRQ");
		rdmamsg_ep_attr_set_recv_depth(sattr, 2);
		rdmamsg_ep_attr_set_srq(sattr, tiny);
		accept_err = 0;
		memset(cc, 0, sizeof(cc));
		accepted = sclosed = 0;
		/* two guaranteed windows of WIN_MIN and their extras
		 * fill 8 buffers; the third window does not fit */
		for (i = 0; i < 3; i++)
			rdmamsg_connect(cctx, addr, ca, &cli_cbs, &cc[i],
					&cc[i].ep);
		pump(all_connected, 3, 1);
		ok(cc[0].status == 0 && cc[1].status == 0 &&
			   cc[2].status == -ECONNREFUSED,
		   "third window on an 8-buffer SRQ refused (%d %d %d)",
		   cc[0].status, cc[1].status, cc[2].status);
		is_int(accept_err, -ENOBUFS, "accept: -ENOBUFS");
		rdmamsg_srq_query(tiny, &st);
		ok(st.reserved <= 8 && st.bufs <= 8 && st.posted == st.bufs &&
			   st.reserved >= 2 * WIN_MIN,
		   "tiny: %u of 8 buffers held, %u allocated, all posted",
		   st.reserved, st.bufs);
		close_all("tiny", 3);
	}

	rdmamsg_ep_attr_delete(&sattr);
	rdmamsg_ep_attr_delete(&ca);
	rdmamsg_listener_close(lst, NULL);
	test_idle(sctx, 50);
	is_int(rdmamsg_ctx_destroy(&sctx), -EBUSY,
	       "context with an open SRQ: -EBUSY");
	srq_freed = 0;
	is_int(rdmamsg_srq_close(ssrq, srq_close_cb, &srq_freed), 0,
	       "close the server SRQ");
	rdmamsg_srq_close(csrq, srq_close_cb, &srq_freed);
	rdmamsg_srq_close(tiny, srq_close_cb, &srq_freed);
	/* no endpoint uses them, yet the callbacks come from the loop,
	 * never inside the call (rdmamsg(7)); till then the SRQs are the
	 * context's, as a closing endpoint is */
	is_int(srq_freed, 0, "unused SRQs: no callback inside the close");
	is_int(rdmamsg_ctx_arm(sctx), -EBUSY,
	       "a close callback due: rdmamsg_ctx_arm says -EBUSY");
	is_int(rdmamsg_ctx_destroy(&sctx), -EBUSY,
	       "close callback due: rdmamsg_ctx_destroy says -EBUSY");
	rdmamsg_srq_query(ssrq, &st);
	is_int(st.endpoints, 0, "the closing SRQ is still there to query");
	rdmamsg_ctx_progress(sctx);
	is_int(srq_freed, 2, "the server's two callbacks after one pass");
	rdmamsg_ctx_progress(cctx);
	is_int(srq_freed, 3, "the client's after one pass");
	rdmamsg_ctx_progress(sctx);
	rdmamsg_ctx_progress(cctx);
	is_int(srq_freed, 3, "each callback ran once");
	is_int(rdmamsg_ctx_destroy(&sctx), 0, "server context destroyed");
	is_int(rdmamsg_ctx_destroy(&cctx), 0, "client context destroyed");
	return done_testing();
}
