/* SPDX-License-Identifier: MIT */
/*
 * replay.c -- reconnect-and-replay of an established session
 * (RDMAMSG_FAILOVER_REPLAY, rdmamsg.h, issue 15).
 *
 * 1. One process, a listener on two ports (two paths to one peer): a
 *    stream of messages of mixed sizes (fragmented ones among them) and
 *    requests, cut several times mid-stream (rdmamsg_ep_test_break, on
 *    the connecting and on the accepting side in turn, one cut while
 *    sends wait in the backlog): every message arrives exactly once, in
 *    order, its bytes verified; every request is answered exactly once;
 *    an RDMA write in flight at a cut completes with -ECONNRESET; sends
 *    made during the outage queue; the path events and counters cover
 *    each cut, and the time to resume is printed.
 * 2. The peer process killed: on_disconnect with -ECONNREFUSED (nobody
 *    listens any more) after FAILOVER_FAILED; nothing replayed.
 * 3. A restarted peer on the same address: the reconnect is refused
 *    (RDMAMSG_REJECT_SESSION), on_disconnect -ECONNRESET, and the new
 *    process saw no request and no message.
 * 4. Bad input: policies, bounds, private data, the test hook.
 * 5. Sends during an outage: the backlog fills, then -EAGAIN, and
 *    on_writable once the session is back; nothing lost or doubled.  A
 *    close during an outage: requests made in it get their response_cb
 *    once, -ECANCELED, before the close callback; a send above the
 *    message maximum (a rendezvous) is -ENOTCONN in it, not -EMSGSIZE.
 * 6. Part 1 again with both endpoints receiving through one shared
 *    receive queue (the connector's and the acceptor's windows on it):
 *    the same guarantees, and every window goes back to the SRQ.
 * 7. Part 6 over DC (both endpoints DC, the context's DCT on that SRQ;
 *    each reconnect opens new DC lanes, new tags): the same guarantees.
 * 8. A rendezvous (rdmamsg_send_mr) whose receiver is reading at a cut:
 *    its sender's on_send comes once, with the error the receiver
 *    reports (-ECONNRESET); the messages after it arrive.  A request
 *    or a response by rendezvous that its receiver refuses (above its
 *    large maximum): the request's response_cb once, with -EMSGSIZE.
 */
#include "config.h"

#include "../tap.h"
#include "util.h"

#define EAGER	1024
#define MAX_MSG (4 * EAGER)
#define CUTS	6
#define WR_LEN	(4u << 20) /* the writes at the cuts */

static volatile sig_atomic_t stop;
static struct cli *the_cli;	    /* the stream's connector */
static struct rdmamsg_srq *the_srq; /* both sides receive through it */
static int the_dc;		    /* the connector's transport is DC */

/* msg_len -- the length of message seq: 8 .. 3.5 eager buffers, so that
 * about one in eight is fragmented */
static size_t msg_len(uint64_t seq)
{
	uint64_t h = seq * 2654435761u;

	if ((h >> 7) % 8 == 0)
		return EAGER + (h % (5 * EAGER / 2));
	return 8 + (h % 300);
}

/* fill -- message seq: its number, then bytes that depend on it */
static void fill(uint8_t *p, uint64_t seq, size_t len)
{
	size_t i;

	memcpy(p, &seq, 8);
	for (i = 8; i < len; i++)
		p[i] = (uint8_t)(seq * 31 + i);
}

struct srv {
	struct rdmamsg_ep *ep;
	uint64_t next, bad, dup, n;
	uint64_t reqs;
	unsigned int linger; /* 0: 60 s */
	int nev, down, ndisc, disc_status;
	int ev[64];
};

/* srv_recv -- each message once, in order, with its bytes */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv *s = arg;
	uint8_t want[MAX_MSG];
	uint64_t seq = UINT64_MAX;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len >= 8)
		memcpy(&seq, data, 8);
	if (seq < s->next) {
		s->dup++;
		return;
	}
	if (seq != s->next || len != msg_len(seq)) {
		s->bad++;
	} else {
		fill(want, seq, len);
		if (memcmp(want, data, len))
			s->bad++;
	}
	s->next = seq + 1;
	s->n++;
}

/* srv_request -- answer with the request's number plus one */
static void srv_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
			void *data, size_t len, void *arg)
{
	struct srv *s = arg;
	uint64_t v = 0;

	(void)ep;
	if (len == 8)
		memcpy(&v, data, 8);
	v++;
	s->reqs++;
	if (rdmamsg_respond(req, &v, 8))
		s->bad++;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct srv *s = arg;

	(void)ep;
	s->ndisc++;
	s->disc_status = status;
}

static void srv_path(struct rdmamsg_ep *ep, enum rdmamsg_path_event event,
		     unsigned int path, int status, void *arg)
{
	struct srv *s = arg;

	(void)ep;
	(void)path;
	(void)status;
	if (s->nev < 64)
		s->ev[s->nev] = (int)event;
	s->nev++;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

/* srv_req -- accept without a policy (the request names the session) */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep_attr *a = test_ep_attr(EAGER, MAX_MSG);

	(void)lst;
	(void)pdata;
	(void)len;
	rdmamsg_ep_attr_set_on_request(a, srv_request);
	rdmamsg_ep_attr_set_path_cb(a, srv_path);
	rdmamsg_ep_attr_set_session_linger(a, s->linger ? s->linger : 60000);
	rdmamsg_ep_attr_set_srq(a, the_srq);
	/* below MAX_MSG: a session's ends ignore it (stream()) */
	rdmamsg_ep_attr_set_rndv_threshold(a, 2 * EAGER);
	if (rdmamsg_conn_req_accept(req, a, &srv_cbs, s, &s->ep))
		s->bad++;
	rdmamsg_ep_attr_delete(&a);
}

struct cli {
	int connected, status, closed, writable, ndisc, disc_status;
	int nev, done_ev, failed_ev, last_ev_status;
	int nest_on; /* cut again at this FAILOVER_DONE (a replay pending) */
	uint64_t sends_ok, sends_bad;
	uint64_t resp_ok, resp_bad, wr_done, wr_reset, wr_ok, wr_other;
	int ev[256];
	long long start_ms[256]; /* when each FAILOVER_START came */
	int nstart;
	uint8_t answered[4096];
};

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	c->status = status;
	c->connected++;
}

static void cli_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	c->ndisc++;
	c->disc_status = status;
}

static void cli_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->writable = 1;
}

static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->closed = 1;
}

static void cli_path(struct rdmamsg_ep *ep, enum rdmamsg_path_event event,
		     unsigned int path, int status, void *arg)
{
	struct cli *c = arg;

	if (c->nev < 256)
		c->ev[c->nev] = (int)event;
	if (event == RDMAMSG_FAILOVER_START && c->nstart < 256)
		c->start_ms[c->nstart++] = test_now_ms();
	c->nev++;
	c->last_ev_status = status;
	if (event == RDMAMSG_FAILOVER_DONE) {
		struct rdmamsg_path_stats ps;

		c->done_ev++;
		if (c->done_ev == c->nest_on && rdmamsg_ep_test_break(ep) != 0)
			c->failed_ev += 100; /* fails the test */
		if (!rdmamsg_ep_get_path_stats(ep, &ps))
			diag("failover %d: on path %u, %.3f ms from the "
			     "failure to resumed traffic",
			     c->done_ev, path, ps.last_failover_ns / 1e6);
	}
	if (event == RDMAMSG_FAILOVER_FAILED)
		c->failed_ev++;
}

/* cli_resp -- request i answered (with i + 1), exactly once */
static void cli_resp(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		     void *req_arg)
{
	(void)ep;
	struct cli *c = the_cli;
	uint64_t i = (uint64_t)(uintptr_t)req_arg, v = 0;

	if (len == 8)
		memcpy(&v, data, 8);
	if (status || v != i + 1 || i >= sizeof(c->answered) ||
	    c->answered[i]++) {
		c->resp_bad++;
		return;
	}
	c->resp_ok++;
}

/* cli_wr -- the write in flight at a cut */
static void cli_wr(struct rdmamsg_ep *ep, int status, uint64_t value,
		   void *op_ctx)
{
	struct cli *c = the_cli;

	(void)ep;
	(void)value;
	(void)op_ctx;
	c->wr_done++;
	if (status == -ECONNRESET)
		c->wr_reset++;
	else if (status == 0)
		c->wr_ok++;
	else {
		c->wr_other++;
		diag("write: %s", rdmamsg_strerror(status));
	}
}

/* cli_sent -- each message reported once, in order, with 0 (a session
 * keeps what may have to go again) */
static void cli_sent(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	if (status || (uint64_t)(uintptr_t)op_ctx != c->sends_ok + 1)
		c->sends_bad++;
	else
		c->sends_ok++;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_disconnect = cli_disc,
	.on_writable = cli_writable,
};

static const struct rdmamsg_ep_cbs cli_cbs_sent = {
	.on_connect = cli_connect,
	.on_disconnect = cli_disc,
	.on_writable = cli_writable,
	.on_send = cli_sent,
};

/* replay_attr -- the connector's attributes */
static struct rdmamsg_ep_attr *replay_attr(void)
{
	struct rdmamsg_ep_attr *a = test_ep_attr(EAGER, MAX_MSG);

	rdmamsg_ep_attr_set_failover(a, RDMAMSG_FAILOVER_REPLAY);
	rdmamsg_ep_attr_set_path_cb(a, cli_path);
	rdmamsg_ep_attr_set_reconnect(a, 60000, 16);
	rdmamsg_ep_attr_set_srq(a, the_srq);
	rdmamsg_ep_attr_set_rndv_threshold(a, 2 * EAGER); /* ignored */
	if (the_dc)
		rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC);
	return a;
}

/* wait_state -- drive ctx until ep is in state st */
static int wait_state(struct rdmamsg_ctx *ctx, struct rdmamsg_ep *ep,
		      enum rdmamsg_ep_state st)
{
	long long end = test_now_ms() + 60000;
	enum rdmamsg_ep_state now = RDMAMSG_EP_CLOSING;

	while (test_now_ms() < end) {
		rdmamsg_ep_get_state(ep, &now);
		if (now == st)
			return 1;
		test_idle(ctx, 1);
	}
	return 0;
}

/* stream -- part 1; with an SRQ, part 6; over DC (which needs one), 7 */
static void stream(int srq, int dc)
{
	struct rdmamsg_srq_attr sa = {1024, EAGER};
	struct rdmamsg_srq_stats ss;
	struct rdmamsg_ctx *ctx = test_ctx();
	struct rdmamsg_listener *l1, *l2;
	struct rdmamsg_path_stats ps, sps;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ep *ep;
	struct rdmamsg_mr *lmr, *smr;
	struct rdmamsg_rmr *rmr;
	struct srv s;
	static struct cli c;
	static uint8_t lbuf[WR_LEN], sbuf[WR_LEN];
	uint8_t buf[MAX_MSG], blob[64];
	uint64_t n = tap_small() ? 4000 : 100000, sent = 0, nreq = 0;
	uint64_t cut_at[CUTS];
	uint16_t p1, p2;
	char addr[64];
	int cuts = 0, i, ret, outage_sends = 0;
	long long end;

	memset(&s, 0, sizeof(s));
	memset(&c, 0, sizeof(c));
	the_cli = &c;
	if (srq && rdmamsg_srq_create(ctx, &sa, &the_srq))
		bail_out("srq");
	the_dc = dc;
	/* the third reconnect is cut again as it comes up: before the
	 * acceptor's grant, with what the peer lacks still to go */
	c.nest_on = 3;
	if (rdmamsg_listen(ctx, "127.0.0.1:0", srv_req, &s, &l1) ||
	    rdmamsg_listener_get_port(l1, &p1) ||
	    rdmamsg_listen(ctx, "127.0.0.1:0", srv_req, &s, &l2) ||
	    rdmamsg_listener_get_port(l2, &p2))
		bail_out("listen");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u,127.0.0.1:%u", p1, p2);
	a = replay_attr();
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs_sent, &c, &ep), 0,
	       "connect with RDMAMSG_FAILOVER_REPLAY over two paths");
	rdmamsg_ep_attr_delete(&a);
	ok(test_run_until(ctx, &c.connected, 60000) && c.status == 0,
	   "connected");
	ok(wait_state(ctx, ep, RDMAMSG_EP_CONNECTED), "up");
	if (!s.ep)
		bail_out("no accepted endpoint");
	{
		/* both ends of the session send in fragments up to the
		 * message maximum, whatever their threshold (2 * EAGER),
		 * through no window: a pull in flight would not be
		 * replayed (msg.c rdmamsg__ep_proto_set) */
		struct rdmamsg_protocols pc = {0}, psv = {0};
		int got = !rdmamsg_ep_get_protocols(ep, &pc) &&
			  !rdmamsg_ep_get_protocols(s.ep, &psv);

		ok(got && pc.rndv_threshold == pc.max_msg &&
			   psv.rndv_threshold == psv.max_msg &&
			   !pc.rndv_window && !psv.rndv_window,
		   "fragments up to the maximum on both ends (connector "
		   "%zu of %zu, acceptor %zu of %zu), windows %d/%d",
		   pc.rndv_threshold, pc.max_msg, psv.rndv_threshold,
		   psv.max_msg, pc.rndv_window, psv.rndv_window);
	}
	if (the_srq) {
		ret = rdmamsg_srq_query(the_srq, &ss);
		ok(!ret && ss.endpoints == 2 && ss.bufs > 0,
		   "both endpoints on the SRQ (%u buffers)", ss.bufs);
	}

	/* a region of the server's for the write in flight at a cut */
	if (rdmamsg_mr_reg(ctx, lbuf, sizeof(lbuf), 0, &lmr) ||
	    rdmamsg_mr_reg(ctx, sbuf, sizeof(sbuf), RDMAMSG_ACCESS_REMOTE_WRITE,
			   &smr) ||
	    rdmamsg_mr_export(smr, blob, sizeof(blob)) < 0 ||
	    rdmamsg_rmr_import(blob, sizeof(blob), &rmr))
		bail_out("regions");

	for (i = 0; i < CUTS; i++)
		cut_at[i] = n * (uint64_t)(i + 1) / (CUTS + 1);
	end = test_now_ms() + 600000;
	while ((sent < n || s.n < n || c.resp_ok + c.resp_bad < nreq ||
		c.sends_ok + c.sends_bad < n) &&
	       test_now_ms() < end && !c.ndisc && !s.ndisc) {
		enum rdmamsg_ep_state st;

		rdmamsg_ep_get_state(ep, &st);
		if (cuts < CUTS && sent >= cut_at[cuts] &&
		    st == RDMAMSG_EP_CONNECTED && s.ep) {
			enum rdmamsg_ep_state sst;

			rdmamsg_ep_get_state(s.ep, &sst);
			if (sst == RDMAMSG_EP_CONNECTED) {
				/* even cuts on the connecting side, after
				 * a write (it may have completed); odd ones
				 * on the accepting side, before a write
				 * that its QP in error never executes */
				if (cuts % 2 == 0)
					ok(rdmamsg_write(ep, lmr, 0, rmr, 0,
							 WR_LEN, cli_wr,
							 NULL) == 0,
					   "write posted");
				ret = rdmamsg_ep_test_break(cuts % 2 ? s.ep
								     : ep);
				ok(ret == 0, "cut %d at message %llu", cuts,
				   (unsigned long long)sent);
				if (cuts % 2)
					ok(rdmamsg_write(ep, lmr, 0, rmr, 0,
							 WR_LEN, cli_wr,
							 NULL) == 0,
					   "write posted to a peer cut off");
				cuts++;
				/* sends during the outage queue */
				if (cuts == 1) {
					rdmamsg_ep_get_state(ep, &st);
					ok(st == RDMAMSG_EP_CONNECTING,
					   "reconnecting: CONNECTING");
				}
				continue;
			}
		}
		if (sent < n) {
			size_t len = msg_len(sent);

			fill(buf, sent, len);
			ret = rdmamsg_send(ep, buf, len,
					   (void *)(uintptr_t)(sent + 1));
			if (ret == 0) {
				rdmamsg_ep_get_state(ep, &st);
				if (st != RDMAMSG_EP_CONNECTED)
					outage_sends++;
				sent++;
				if (sent % 97 == 0 &&
				    nreq < sizeof(c.answered)) {
					uint64_t v = nreq, id;

					if (rdmamsg_request(
						    ep, &v, 8, 0, cli_resp,
						    (void *)(uintptr_t)nreq,
						    &id) == 0)
						nreq++;
				}
				continue;
			}
			if (ret != -EAGAIN) {
				ok(0, "send %llu: %s", (unsigned long long)sent,
				   rdmamsg_strerror(ret));
				break;
			}
		}
		c.writable = 0;
		rdmamsg_ctx_progress(ctx);
		if (sent < n)
			test_run_until(ctx, &c.writable, 5);
	}
	is_int(cuts, CUTS, "all cuts made");
	is_int(c.ndisc, 0, "the connector never went down");
	is_int(s.ndisc, 0, "the acceptor never went down");
	ok(s.n == n, "%llu of %llu messages delivered", (unsigned long long)s.n,
	   (unsigned long long)n);
	is_int(s.dup, 0, "none delivered twice");
	is_int(s.bad, 0, "in order, bytes right");
	ok(outage_sends > 0, "%d sends queued during outages", outage_sends);
	ok(c.sends_ok == n, "on_send: %llu of %llu, once each, in order, 0",
	   (unsigned long long)c.sends_ok, (unsigned long long)n);
	is_int((int)c.sends_bad, 0, "no on_send twice or with an error");
	ok(nreq > 0 && c.resp_ok == nreq, "%llu of %llu requests answered",
	   (unsigned long long)c.resp_ok, (unsigned long long)nreq);
	is_int((int)c.resp_bad, 0, "no request answered twice or wrong");
	ok(s.reqs >= nreq, "the acceptor saw every request");
	is_int((int)c.wr_done, CUTS, "each write at a cut completed once");
	is_int((int)c.wr_other, 0, "... with 0 or -ECONNRESET");
	/* an RC acceptor's cut puts its QP in error, so the write never
	 * executes; a DC acceptor's puts only its lane's DCI in error: its
	 * context's DCT, shared, still takes the write (0 or -ECONNRESET) */
	if (!dc)
		ok(c.wr_reset >= CUTS / 2,
		   "those posted to a peer cut off: -ECONNRESET (%llu)",
		   (unsigned long long)c.wr_reset);
	diag("writes at the cuts: %llu done before the cut, %llu in flight "
	     "(-ECONNRESET)",
	     (unsigned long long)c.wr_ok, (unsigned long long)c.wr_reset);
	for (i = 0, ret = 1; i < CUTS + 1; i++)
		if (c.ev[3 * i] != RDMAMSG_PATH_DOWN ||
		    c.ev[3 * i + 1] != RDMAMSG_FAILOVER_START ||
		    c.ev[3 * i + 2] != RDMAMSG_FAILOVER_DONE)
			ret = 0;
	ok(ret && c.nev == 3 * (CUTS + 1),
	   "each cut: PATH_DOWN, FAILOVER_START, FAILOVER_DONE (%d events)",
	   c.nev);
	is_int(c.connected, 1, "on_connect ran once");
	is_int(c.done_ev, CUTS + 1,
	       "FAILOVER_DONE on every cut (one cut again as it came up)");
	is_int(c.failed_ev, 0, "no FAILOVER_FAILED");
	rdmamsg_ep_get_path_stats(ep, &ps);
	rdmamsg_ep_get_path_stats(s.ep, &sps);
	ok(ps.failovers == CUTS + 1 && ps.path_downs == CUTS + 1,
	   "connector stats: %llu failovers, %llu path downs",
	   (unsigned long long)ps.failovers, (unsigned long long)ps.path_downs);
	ok(ps.last_failover_ns > 0, "time to resume recorded");
	diag("connector: last failover %.3f ms (failure to resumed "
	     "traffic); acceptor: %.3f ms",
	     ps.last_failover_ns / 1e6, sps.last_failover_ns / 1e6);
	ok(sps.failovers >= CUTS && sps.failovers <= CUTS + 1,
	   "acceptor stats: %llu failovers", (unsigned long long)sps.failovers);
	ok(s.nev >= 2 * CUTS && s.ev[0] == RDMAMSG_PATH_DOWN &&
		   s.ev[1] == RDMAMSG_FAILOVER_DONE,
	   "acceptor path events: PATH_DOWN, FAILOVER_DONE (%d)", s.nev);

	is_int(rdmamsg_ep_close(ep, cli_close_cb), 0, "close");
	ok(test_run_until(ctx, &c.closed, 60000), "closed");
	end = test_now_ms() + 60000;
	while (!s.ndisc && test_now_ms() < end)
		test_idle(ctx, 5);
	is_int(s.disc_status, 0, "the acceptor saw a clean close");
	if (s.ep)
		rdmamsg_ep_close(s.ep, NULL);
	test_idle(ctx, 50);
	rdmamsg_rmr_free(&rmr);
	rdmamsg_mr_dereg(&lmr);
	rdmamsg_mr_dereg(&smr);
	rdmamsg_listener_close(l1, NULL);
	rdmamsg_listener_close(l2, NULL);
	test_idle(ctx, 50);
	if (the_srq) {
		/* each reconnect took its window again, each lane gone gave
		 * its back; every buffer is posted again */
		rdmamsg_srq_query(the_srq, &ss);
		ok(ss.endpoints == 0 && ss.reserved == 0 &&
			   ss.posted == ss.bufs,
		   "the SRQ: no endpoint, nothing reserved, all %u buffers "
		   "posted (%u)",
		   ss.bufs, ss.posted);
		is_int(test_srq_close(ctx, the_srq, 10000), 0,
		       "the SRQ closed");
		the_srq = NULL;
		the_dc = 0;
	}
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
}

/* outage_close -- part 5: a close during the outage ends it; the
 * accepting side waits out its linger, then on_disconnect -ETIMEDOUT;
 * requests made during the outage complete with -ECANCELED before the
 * close callback */
/* one_session -- a listener on ctx and a session to it, up; backlog: the
 * connector's send backlog (0: the default) */
static struct rdmamsg_ep *one_session(struct rdmamsg_ctx *ctx, struct srv *s,
				      struct cli *c, unsigned int backlog,
				      struct rdmamsg_listener **l)
{
	struct rdmamsg_ep_attr *a = replay_attr();
	struct rdmamsg_ep *ep = NULL;
	char addr[64];
	uint16_t p;

	if (rdmamsg_listen(ctx, "127.0.0.1:0", srv_req, s, l) ||
	    rdmamsg_listener_get_port(*l, &p))
		bail_out("listen");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", p);
	if (backlog)
		rdmamsg_ep_attr_set_send_backlog(a, backlog);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, c, &ep), 0, "connect");
	rdmamsg_ep_attr_delete(&a);
	if (!ep)
		bail_out("no session");
	ok(test_run_until(ctx, &c->connected, 60000) && c->status == 0,
	   "connected");
	ok(wait_state(ctx, ep, RDMAMSG_EP_CONNECTED) && s->ep, "up");
	return ep;
}

/* out_resp -- a request of the closed outage: once, -ECANCELED, before
 * the close callback */
static int out_calls, out_canceled, out_late;
static void out_resp(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		     void *req_arg)
{
	struct cli *c = req_arg;

	(void)ep;
	(void)data;
	(void)len;
	out_calls++;
	out_canceled += status == -ECANCELED;
	out_late += c->closed;
}

static void outage_close(void)
{
	struct rdmamsg_ctx *ctx = test_ctx();
	struct rdmamsg_listener *l;
	struct rdmamsg_ep *ep;
	struct srv s;
	static struct cli c;
	uint8_t buf[64];
	static uint8_t big[MAX_MSG + 1];
	uint64_t id;
	int i, queued = 0;

	memset(&s, 0, sizeof(s));
	memset(&c, 0, sizeof(c));
	s.linger = 300;
	ep = one_session(ctx, &s, &c, 0, &l);
	is_int(rdmamsg_ep_test_break(ep), 0, "cut");
	for (i = 0; i < 10; i++) {
		fill(buf, (uint64_t)i, sizeof(buf));
		queued += rdmamsg_send(ep, buf, sizeof(buf), NULL) == 0;
	}
	is_int(queued, 10, "sends queue during the outage");
	is_int(rdmamsg_send(ep, big, sizeof(big), NULL), -ENOTCONN,
	       "one above the message maximum (a rendezvous): -ENOTCONN");
	is_int(rdmamsg_send(ep, big, SIZE_MAX, NULL), -EMSGSIZE,
	       "above the large maximum: -EMSGSIZE");
	for (i = 0; i < 3; i++)
		queued += rdmamsg_request(ep, buf, 8, i ? 60000 : 0, out_resp,
					  &c, &id) == 0;
	is_int(queued, 13, "requests queue during the outage");
	is_int(rdmamsg_ep_close(ep, cli_close_cb), 0, "close during it");
	ok(test_run_until(ctx, &c.closed, 60000), "closed");
	is_int(out_calls, 3, "each request's callback ran once");
	is_int(out_canceled, 3, "with -ECANCELED");
	is_int(out_late, 0, "before the close callback");
	is_int(c.ndisc, 0, "no on_disconnect after the close");
	ok(test_run_until(ctx, &s.ndisc, 60000), "the acceptor gave up");
	is_int(s.disc_status, -ETIMEDOUT, "-ETIMEDOUT after its linger");
	is_int((int)s.n, 0, "nothing delivered from the closed outage");
	if (s.ep)
		rdmamsg_ep_close(s.ep, NULL);
	rdmamsg_listener_close(l, NULL);
	test_idle(ctx, 50);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
}

/* outage_backlog -- sends during an outage fill the send backlog and no
 * further (-EAGAIN); on_writable comes once the session is back, and
 * what was queued arrives once, in order, before what follows */
static void outage_backlog(void)
{
	struct rdmamsg_ctx *ctx = test_ctx();
	struct rdmamsg_listener *l;
	struct rdmamsg_ep *ep;
	enum rdmamsg_ep_state st = RDMAMSG_EP_CLOSING;
	struct srv s;
	static struct cli c;
	static uint8_t buf[MAX_MSG];
	uint64_t seq = 0, queued;
	long long end;
	int ret;

	memset(&s, 0, sizeof(s));
	memset(&c, 0, sizeof(c));
	ep = one_session(ctx, &s, &c, 40, &l);
	is_int(rdmamsg_ep_test_break(ep), 0, "cut");
	do {
		fill(buf, seq, msg_len(seq));
		ret = rdmamsg_send(ep, buf, msg_len(seq), NULL);
	} while (ret == 0 && ++seq < 1000);
	queued = seq;
	is_int(ret, -EAGAIN, "the backlog full: -EAGAIN");
	is_int((int)queued, 40, "as many queued as the backlog holds");
	rdmamsg_ep_get_state(ep, &st);
	is_int(st, RDMAMSG_EP_CONNECTING, "still reconnecting");
	ok(test_run_until(ctx, &c.writable, 60000), "on_writable came");
	rdmamsg_ep_get_state(ep, &st);
	is_int(st, RDMAMSG_EP_CONNECTED, "after the reconnect");
	while (seq < queued + 200 && !c.ndisc) {
		fill(buf, seq, msg_len(seq));
		ret = rdmamsg_send(ep, buf, msg_len(seq), NULL);
		if (ret == 0) {
			seq++;
			continue;
		}
		if (ret != -EAGAIN)
			break;
		c.writable = 0;
		test_run_until(ctx, &c.writable, 5);
	}
	is_int(ret, 0, "200 more sent");
	for (end = test_now_ms() + 60000; s.n < seq && test_now_ms() < end;)
		test_idle(ctx, 1);
	ok(s.n == seq, "%llu of %llu messages delivered",
	   (unsigned long long)s.n, (unsigned long long)seq);
	is_int((int)s.dup, 0, "none twice");
	is_int((int)s.bad, 0, "in order, bytes right");
	is_int(c.ndisc + s.ndisc, 0, "neither side went down");
	is_int(rdmamsg_ep_close(ep, cli_close_cb), 0, "close");
	ok(test_run_until(ctx, &c.closed, 60000), "closed");
	if (s.ep)
		rdmamsg_ep_close(s.ep, NULL);
	rdmamsg_listener_close(l, NULL);
	test_idle(ctx, 50);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
}

/* ---- a peer in another process ------------------------------------- */

struct child {
	int go_fd;	   /* >= 0: the port to listen on comes through it */
	unsigned int port; /* 0: any */
	int conn_reqs, msgs;
	int stall; /* stop once listening: a peer that never answers */
};

static void child_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)data;
	(void)len;
	(void)imm;
	(void)flags;
	((struct child *)arg)->msgs++;
}

static const struct rdmamsg_ep_cbs child_cbs = {
	.on_recv = child_recv,
};

static void child_req(struct rdmamsg_listener *lst,
		      struct rdmamsg_conn_req *req, const void *pdata,
		      size_t len, void *arg)
{
	struct child *ch = arg;
	struct rdmamsg_ep_attr *a = test_ep_attr(EAGER, MAX_MSG);
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	ch->conn_reqs++;
	if (rdmamsg_conn_req_accept(req, a, &child_cbs, ch, &ep))
		rdmamsg_conn_req_reject(req, 1, NULL, 0);
	rdmamsg_ep_attr_delete(&a);
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* child_main -- listen (on ch->port if given), report the port, serve
 * until SIGTERM; exit 0, or 1 when a restarted peer (port given) saw a
 * request or a message */
static int child_main(int wfd, void *arg)
{
	struct child *ch = arg;
	struct rdmamsg_listener *lst = NULL;
	struct rdmamsg_ctx *ctx;
	char addr[64];
	uint16_t port = 0;
	long long end = test_now_ms() + 20000;

	signal(SIGTERM, on_term);
	if (ch->go_fd >= 0) {
		/* a restarted peer: forked before the parent had a context
		 * (under valgrind a child checks what it inherited for
		 * leaks), told the port once the first peer is gone */
		ch->port = test_read_port(ch->go_fd);
		if (!ch->port)
			return 4;
	}
	ctx = test_ctx();
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ch->port);
	/* the port a killed peer left may take a moment to be free */
	while (rdmamsg_listen(ctx, addr, child_req, ch, &lst) &&
	       test_now_ms() < end && !stop)
		usleep(20000);
	if (!lst || rdmamsg_listener_get_port(lst, &port))
		return 3;
	test_write_port(wfd, port);
	close(wfd);
	if (ch->stall)
		/* a listener that never answers: stopped before its first
		 * progress (peers, P_STALLED) */
		raise(SIGSTOP);
	test_run_until(ctx, (volatile int *)&stop, 120000);
	rdmamsg_listener_close(lst, NULL);
	test_idle(ctx, 20);
	rdmamsg_ctx_destroy(&ctx);
	if (ch->go_fd >= 0)
		return ch->conn_reqs || ch->msgs ? 1 : 0;
	return 0;
}

/* peers -- parts 2 and 3: the peer killed, and nobody listens on its
 * port (mode P_GONE), a new process does (P_RESTART), or one does whose
 * process then stops (P_STALLED: after two refused attempts; the next
 * is still unanswered at the reconnect's deadline, which cuts it short:
 * the session ends with the refusal the attempts before it met, not with
 * that attempt's timeout, rdmamsg.h).  With backoff (part 2 again): a
 * reconnect given 1,000 tries in 6 s to a peer that is gone makes only a
 * few attempts, the backoff between refused ones growing (rdmamsg.h:
 * 10 ms doubling up to 1 s: at most 14 attempts in 6 s, and once the
 * waits reached 640 ms a gap at least that long; without a backoff the
 * attempts follow each other as fast as they are refused, about 60 in
 * 6 s here) */
enum { P_GONE, P_RESTART, P_STALLED };
static void peers(int mode, int backoff)
{
	const int restart = mode != P_GONE;
	struct rdmamsg_path_stats ps;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ep *ep;
	struct child ch, ch2;
	static struct cli c;
	pid_t pid, pid2 = -1;
	unsigned int port;
	char addr[64];
	uint8_t buf[64];
	int rfd, rfd2 = -1, gp[2] = {-1, -1}, i;

	memset(&c, 0, sizeof(c));
	memset(&ch, 0, sizeof(ch));
	memset(&ch2, 0, sizeof(ch2));
	ch.go_fd = -1;
	pid = test_fork(child_main, &ch, &rfd);
	port = test_read_port(rfd);
	close(rfd);
	if (!port)
		bail_out("peer did not listen");
	if (restart) {
		if (pipe(gp))
			bail_out("pipe");
		ch2.go_fd = gp[0];
		ch2.stall = mode == P_STALLED;
		pid2 = test_fork(child_main, &ch2, &rfd2);
		close(gp[0]);
	}
	ctx = test_ctx();
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	a = replay_attr();
	if (mode == P_STALLED)
		/* every attempt may wait longer than the reconnect: the
		 * one the stopped process leaves unanswered is cut short */
		rdmamsg_ep_attr_set_connect_timeout(a, 30000);
	if (backoff || mode == P_STALLED)
		rdmamsg_ep_attr_set_reconnect(a, 6000, 1000);
	else
		rdmamsg_ep_attr_set_reconnect(a, 60000, 4);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), 0,
	       "connect to the peer process");
	rdmamsg_ep_attr_delete(&a);
	ok(test_run_until(ctx, &c.connected, 60000) && c.status == 0,
	   "connected");
	for (i = 0; i < 100; i++) {
		fill(buf, (uint64_t)i, sizeof(buf));
		rdmamsg_send(ep, buf, sizeof(buf), NULL);
	}
	test_idle(ctx, 50);
	/* the peer dies (a restarted one then listens on its port) */
	kill(pid, SIGKILL);
	is_int(test_wait_child(pid), 128 + SIGKILL, "peer killed");
	if (mode == P_STALLED) {
		long long end = test_now_ms() + 60000;

		/* two attempts refused (nobody listens) before the new
		 * process takes the port and stops */
		do {
			test_idle(ctx, 1);
			rdmamsg_ep_get_path_stats(ep, &ps);
		} while (ps.attempts < 3 && !c.ndisc && test_now_ms() < end);
		ok(ps.attempts >= 3 && !c.ndisc,
		   "stalled: %llu attempts, the session still waits",
		   (unsigned long long)ps.attempts);
	}
	if (restart) {
		test_write_port(gp[1], port);
		close(gp[1]);
		ok(test_read_port(rfd2) == port, "a new peer on the same port");
		close(rfd2);
	}
	ok(test_run_until(ctx, &c.ndisc, 60000), "on_disconnect came");
	is_int(c.ndisc, 1, "once");
	if (mode == P_STALLED)
		is_int(c.disc_status, -ECONNREFUSED,
		       "-ECONNREFUSED: the refusals before the attempt the "
		       "deadline cut short");
	else
		is_int(c.disc_status, restart ? -ECONNRESET : -ECONNREFUSED,
		       restart ? "-ECONNRESET: the session is unknown there"
			       : "-ECONNREFUSED: nobody listens");
	is_int(c.failed_ev, 1, "FAILOVER_FAILED before it");
	is_int(c.done_ev, 0, "no FAILOVER_DONE");
	is_int(rdmamsg_ep_get_path_stats(ep, &ps), 0, "path stats");
	if (mode == P_STALLED) {
		ok(ps.attempts >= 3, "%llu attempts, the last one unanswered",
		   (unsigned long long)ps.attempts);
	} else if (backoff) {
		long long gap = 0;

		for (i = 1; i < c.nstart; i++)
			if (c.start_ms[i] - c.start_ms[i - 1] > gap)
				gap = c.start_ms[i] - c.start_ms[i - 1];
		ok(ps.attempts >= 2 && ps.attempts <= 14,
		   "1,000 tries in 6 s: %llu attempts (a backoff between them)",
		   (unsigned long long)ps.attempts);
		ok(gap >= 600, "the longest wait between two attempts: %lld ms",
		   gap);
	} else {
		ok(restart ? ps.attempts >= 1 && ps.attempts <= 4
			   : ps.attempts == 4,
		   "4 tries: %llu attempts (FAILOVER_START events)",
		   (unsigned long long)ps.attempts);
	}
	rdmamsg_ep_close(ep, cli_close_cb);
	ok(test_run_until(ctx, &c.closed, 60000), "closed");
	if (mode == P_STALLED) {
		/* it never runs again: the attempt the deadline cut short
		 * still waits in its queue, and what it would make of that
		 * is no part of this case */
		kill(pid2, SIGKILL);
		is_int(test_wait_child(pid2), 128 + SIGKILL,
		       "the stalled peer is killed");
	} else if (restart) {
		kill(pid2, SIGTERM);
		is_int(test_wait_child(pid2), 0,
		       "the new peer saw no request and no message");
	}
	test_idle(ctx, 20);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
}

/* has_dc -- whether this fabric has DC (RDMAMSG_CAP_DC) */
static int has_dc(void)
{
	struct rdmamsg_ctx *ctx = test_ctx();
	uint64_t v;
	int ret = rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v) == 0;

	rdmamsg_ctx_destroy(&ctx);
	return ret;
}

/* bad_input -- part 4 */
static void bad_input(void)
{
	struct rdmamsg_ctx *ctx = test_ctx();
	struct rdmamsg_ep_attr *a = test_ep_attr(EAGER, MAX_MSG);
	struct rdmamsg_ep *ep = NULL;
	uint8_t pd[32] = {0};
	static struct cli c;
	int hfd;
	uint16_t dead = test_hold_port(0, &hfd);
	char addr[64];

	is_int(rdmamsg_ep_attr_set_failover(a, (enum rdmamsg_failover)3),
	       -EINVAL, "unknown policy: -EINVAL");
	is_int(rdmamsg_ep_attr_set_reconnect(NULL, 1, 1), -EINVAL,
	       "reconnect: NULL attr");
	is_int(rdmamsg_ep_attr_set_reconnect(a, 0, 1), -EINVAL,
	       "reconnect: 0 ms");
	is_int(rdmamsg_ep_attr_set_reconnect(a, 3600001, 1), -EINVAL,
	       "reconnect: too long");
	is_int(rdmamsg_ep_attr_set_reconnect(a, 1, 0), -EINVAL,
	       "reconnect: 0 tries");
	is_int(rdmamsg_ep_attr_set_reconnect(a, 1, 1001), -EINVAL,
	       "reconnect: too many tries");
	is_int(rdmamsg_ep_attr_set_reconnect(a, 3600000, 1000), 0,
	       "reconnect: the limits");
	is_int(rdmamsg_ep_attr_set_session_linger(a, 0), -EINVAL, "linger: 0");
	is_int(rdmamsg_ep_attr_set_session_linger(a, 3600001), -EINVAL,
	       "linger: too long");
	is_int(rdmamsg_ep_attr_set_session_linger(NULL, 1), -EINVAL,
	       "linger: NULL attr");
	is_int(rdmamsg_ep_test_break(NULL), -EINVAL, "test_break(NULL)");
	is_int(rdmamsg_ep_attr_set_failover(a, RDMAMSG_FAILOVER_REPLAY), 0,
	       "REPLAY");
	rdmamsg_ep_attr_set_private_data(a, pd, RDMAMSG_HS_SESSION_USER + 1);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", dead);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), -EINVAL,
	       "REPLAY with 25 bytes of private data: -EINVAL");
	ok(ep == NULL, "nothing made");
	rdmamsg_ep_attr_set_private_data(a, pd, RDMAMSG_HS_SESSION_USER);
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1,nohost", a, &cli_cbs, &c, &ep),
	       -EINVAL, "REPLAY with a bad address list: -EINVAL");
	if (has_dc()) {
		struct rdmamsg_srq_attr sa = {64, EAGER};
		struct rdmamsg_srq *srq;

		if (rdmamsg_srq_create(ctx, &sa, &srq))
			bail_out("srq");
		rdmamsg_ep_attr_set_srq(a, srq);
		rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC);
		rdmamsg_ep_attr_set_private_data(a, pd,
						 RDMAMSG_DC_SESSION_USER + 1);
		is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep),
		       -EINVAL,
		       "REPLAY over DC with 9 bytes of private data: -EINVAL");
		ok(ep == NULL, "nothing made");
		rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_RC);
		rdmamsg_ep_attr_set_srq(a, NULL);
		rdmamsg_ep_attr_set_private_data(a, pd,
						 RDMAMSG_HS_SESSION_USER);
		test_srq_close(ctx, srq, 10000);
	}
	/* a connector that never got up: test_break refuses, close works */
	rdmamsg_ep_attr_set_connect_timeout(a, 60000);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), 0,
	       "REPLAY with 24 bytes of private data");
	is_int(rdmamsg_ep_test_break(ep), -ENOTCONN,
	       "test_break before connected: -ENOTCONN");
	ok(test_run_until(ctx, &c.connected, 60000), "on_connect");
	is_int(c.status, -ECONNREFUSED, "refused at connect: no session yet");
	rdmamsg_ep_close(ep, cli_close_cb);
	ok(test_run_until(ctx, &c.closed, 60000), "closed");
	rdmamsg_ep_attr_delete(&a);
	close(hfd);
	test_idle(ctx, 20);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
}

/* ---- part 8: a rendezvous at a cut ---------------------------------- */

#define RV_LEN (12u << 10)

struct rv {
	struct rdmamsg_ep *ep; /* the acceptor's */
	int pulling;	       /* the allocation callback ran */
	int cut;	       /* its rdmamsg_ep_test_break() */
	int large, small, bad, ndisc;
	int sent[4], sent_status[4], closed;
	int reqs, resp, resp_status; /* on_request; response_cb */
	size_t resp_len;	     /* of the response on_request sends */
};

static struct rv *the_rv;

/* rv_alloc -- the acceptor starts pulling (the library's memory) and
 * its connection fails */
static int rv_alloc(struct rdmamsg_ep *ep, size_t len, void **data,
		    struct rdmamsg_mr **mr, void *arg)
{
	(void)len;
	(void)data;
	(void)mr;
	(void)arg;
	/* the connection fails now: the read this pull posts next is
	 * flushed, as one in flight at a cut */
	the_rv->cut = rdmamsg_ep_test_break(ep);
	the_rv->pulling = 1;
	return 0;
}

/* rv_recv -- the large message (its bytes right) or the small ones */
static void rv_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	struct rv *r = arg;
	const uint8_t *p = data;
	size_t i;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len == RV_LEN) {
		for (i = 0; i < len; i += 4093)
			if (p[i] != (uint8_t)(i * 7))
				r->bad++;
		r->large++;
	} else if (len == 8) {
		r->small++;
	} else {
		r->bad++;
	}
}

static void rv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)status;
	((struct rv *)arg)->ndisc++;
}

/* rv_request -- answer with resp_len bytes */
static void rv_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
		       void *data, size_t len, void *arg)
{
	static uint8_t big[64 << 10];
	struct rv *r = arg;

	(void)ep;
	(void)data;
	(void)len;
	r->reqs++;
	if (rdmamsg_respond(req, big, r->resp_len))
		r->bad++;
}

/* rv_resp -- the request's one answer */
static void rv_resp(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		    void *req_arg)
{
	struct rv *r = req_arg;

	(void)ep;
	(void)data;
	(void)len;
	r->resp++;
	r->resp_status = status;
}

static const struct rdmamsg_ep_cbs rv_srv_cbs = {
	.on_recv = rv_recv,
	.on_disconnect = rv_disc,
};

/* rv_req -- accept with the allocation callback */
static void rv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	struct rv *r = arg;
	struct rdmamsg_ep_attr *a = test_ep_attr(EAGER, MAX_MSG);

	(void)lst;
	(void)pdata;
	(void)len;
	rdmamsg_ep_attr_set_session_linger(a, 60000);
	rdmamsg_ep_attr_set_recv_alloc(a, rv_alloc);
	rdmamsg_ep_attr_set_on_request(a, rv_request);
	rdmamsg_ep_attr_set_max_large_size(a, 16 << 10);
	if (rdmamsg_conn_req_accept(req, a, &rv_srv_cbs, r, &r->ep))
		r->bad++;
	rdmamsg_ep_attr_delete(&a);
}

/* rv_sent -- on_send of op 1 (the rendezvous) or 2 (a message) */
static void rv_sent(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	struct rv *r = arg;
	uintptr_t i = (uintptr_t)op_ctx;

	(void)ep;
	if (i < 4) {
		r->sent[i]++;
		r->sent_status[i] = status;
	}
}

static void rv_disc_cli(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)status;
	((struct rv *)arg)->ndisc += 100;
}

static void rv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct rv *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs rv_cli_cbs = {
	.on_send = rv_sent,
	.on_disconnect = rv_disc_cli,
};

/* rndv_cut -- part 8 */
static void rndv_cut(void)
{
	struct rdmamsg_ctx *ctx = test_ctx();
	struct rdmamsg_listener *l;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ep *ep = NULL;
	struct rdmamsg_mr *mr;
	static struct rv r;
	uint8_t *p;
	void *vp;
	uint64_t v = 42;
	char addr[64];
	uint16_t port;
	size_t i;
	int connected = 0;
	long long end;

	memset(&r, 0, sizeof(r));
	the_rv = &r;
	if (rdmamsg_listen(ctx, "127.0.0.1:0", rv_req, &r, &l) ||
	    rdmamsg_listener_get_port(l, &port))
		bail_out("listen");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	the_srq = NULL;
	the_dc = 0;
	a = replay_attr();
	rdmamsg_ep_attr_set_path_cb(a, NULL); /* cli_path's argument is a cli */
	rdmamsg_ep_attr_set_on_request(a, rv_request);
	is_int(rdmamsg_connect(ctx, addr, a, &rv_cli_cbs, &r, &ep), 0,
	       "part 8: connect");
	rdmamsg_ep_attr_delete(&a);
	if (!ep)
		bail_out("no session");
	for (end = test_now_ms() + 60000; test_now_ms() < end && !connected;) {
		enum rdmamsg_ep_state st = RDMAMSG_EP_CLOSING;

		rdmamsg_ep_get_state(ep, &st);
		connected = st == RDMAMSG_EP_CONNECTED && r.ep;
		test_idle(ctx, 1);
	}
	ok(connected, "up");
	if (rdmamsg_mr_alloc(ctx, RV_LEN, RDMAMSG_ACCESS_REMOTE_READ, &mr))
		bail_out("region");
	if (rdmamsg_mr_get_data(mr, &vp, &i))
		bail_out("region data");
	p = vp;
	for (i = 0; i < RV_LEN; i++)
		p[i] = (uint8_t)(i * 7);
	is_int(rdmamsg_send_mr(ep, mr, 0, RV_LEN, (void *)(uintptr_t)1), 0,
	       "a rendezvous of 12 KiB");
	ok(test_run_until(ctx, &r.pulling, 60000), "the acceptor pulls it");
	is_int(r.cut, 0,
	       "cut as it took its destination (its read is "
	       "posted on the failed connection)");
	is_int(rdmamsg_send(ep, &v, 8, (void *)(uintptr_t)2), 0,
	       "a message behind it");
	for (end = test_now_ms() + 60000;
	     test_now_ms() < end && (!r.sent[1] || r.small < 1);)
		test_idle(ctx, 1);
	is_int(r.sent[1], 1, "the rendezvous' on_send came once");
	ok((r.sent_status[1] == 0 && r.large == 1) ||
		   (r.sent_status[1] == -ECONNRESET && r.large == 0),
	   "with %s, delivered %d times", rdmamsg_strerror(r.sent_status[1]),
	   r.large);
	is_int(r.small, 1, "the message behind it delivered once");
	is_int(r.bad, 0, "bytes right");
	is_int(r.ndisc, 0, "neither side went down");

	/* the acceptor takes no message above 16 KiB: it refuses a request
	 * of 64 KiB, and a response of 64 KiB to its own request */
	{
		static uint8_t big[64 << 10];
		uint64_t id;
		int k;

		for (k = 0; k < 2; k++) {
			r.resp = r.reqs = 0;
			r.resp_status = 1;
			r.resp_len = sizeof(big);
			is_int(rdmamsg_request(k ? r.ep : ep, big,
					       k ? 8 : sizeof(big), 0, rv_resp,
					       &r, &id),
			       0,
			       k ? "a request whose response is 64 KiB"
				 : "a request of 64 KiB");
			for (end = test_now_ms() + 60000;
			     test_now_ms() < end && !r.resp;)
				test_idle(ctx, 1);
			test_idle(ctx, 20);
			is_int(r.resp, 1, "response_cb came once");
			is_int(r.resp_status, -EMSGSIZE, "with -EMSGSIZE");
			ok(r.reqs == k, "on_request %d times", r.reqs);
		}
		is_int(r.ndisc, 0, "neither side went down");
	}
	is_int(rdmamsg_ep_close(ep, rv_closed), 0, "close");
	ok(test_run_until(ctx, &r.closed, 30000), "closed");
	rdmamsg_mr_dereg(&mr);
	if (r.ep)
		rdmamsg_ep_close(r.ep, NULL);
	rdmamsg_listener_close(l, NULL);
	test_idle(ctx, 50);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
}

int main(void)
{
	test_setup("replay");
	bad_input();
	stream(0, 0);
	stream(1, 0);
	if (has_dc())
		stream(1, 1);
	else
		diag("no DC on this fabric: part 7 skipped");
	outage_close();
	outage_backlog();
	rndv_cut();
	peers(P_GONE, 0);
	peers(P_RESTART, 0);
	peers(P_GONE, 1);
	peers(P_STALLED, 0);
	return done_testing();
}
