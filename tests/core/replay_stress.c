/* SPDX-License-Identifier: MIT */
/*
 * replay_stress.c -- reconnect-and-replay under a mixed load both ways
 * (RDMAMSG_FAILOVER_REPLAY, rdmamsg_connect(3) "Reconnect and replay").
 *
 * One process, one context, a listener on two ports (two paths to one
 * peer).  Both ends of the session send at once a stream of messages of
 * mixed sizes (small ones, and bursts of tiny ones that go packed; ones
 * above the eager size, fragmented; ones above the message maximum, by
 * rendezvous), requests and responses of the same mix (answered at once
 * or later, some across an outage) and one-sided operations (writes,
 * reads, fetch-and-adds, writes with immediate).  The connection is cut
 * (rdmamsg_ep_test_break) again and again at deterministic points of the
 * load, on either end: from the test's loop after a number of sends, and
 * from inside on_recv (amid a pack), on_request, a response callback,
 * on_send, the completion of a write with immediate and the connector's
 * FAILOVER_DONE (a replay pending), so that the failure lands between
 * the completions of one poll, between the fragments of a message,
 * inside a pack and in the middle of a replay.  Then a write with
 * immediate right behind a message whose on_recv cuts its receiver.  All
 * of it again with both ends on one shared receive queue, and over DC
 * where the fabric has it (there without writes with immediate, which DC
 * endpoints do not offer).
 *
 * Asserted (the man pages' promises): every message delivered exactly
 * once, in order, its bytes right, except a rendezvous whose read a cut
 * broke, whose sender's on_send says -ECONNRESET (and then it is never
 * delivered); on_send exactly once per message, 0 for every message up
 * to the message maximum; every request seen at most once by its
 * responder and its response_cb run exactly once, with its answer or
 * (a rendezvous read cut) -ECONNRESET; every one-sided operation
 * completed exactly once with 0 or -ECONNRESET, a read's bytes right, a
 * fetch-and-add target counting every add reported done once and no
 * more than the others, a write with immediate reported done seen once
 * by the peer's on_write_imm; rendezvous sends and one-sided operations
 * during an outage -ENOTCONN, the rest queued; neither end ever
 * disconnected; one failover per cut; the SRQ whole again; all within a
 * bound no healthy run meets (a healthy one takes about 0.1 s); then both
 * ends close and the context is destroyed with nothing left (valgrind:
 * RDMAMSG_TEST_VALGRIND=1).
 */
#include "config.h"

#include "../tap.h"
#include "util.h"

#define EAGER	 1024
#define MAX_MSG	 (4 * EAGER)
#define MAX_RNDV (24 << 10)
/* requests and responses stay eager (queued in an outage): below the
 * message maximum by more than their header */
#define REQ_MAX	    (MAX_MSG - 64)
#define RQ_BIG	    (12 << 10) /* the largest, by rendezvous */
#define REGION	    8192       /* each side's regions for one-sided work */
#define NCUT_MAX    64
#define REQ_EVERY   11	/* a request after every 11th message */
#define OP_EVERY    29	/* a one-sided operation after every 29th */
#define BURST_EVERY 750 /* messages BURST_AT.. of every 750 are a burst */
#define BURST_AT    300
#define BURST_LEN   120
#define MARK	    0x5a5a5a5a5a5a5a5aull /* wimm_behind()'s message */
#define RD_LEN	    (REGION / 2 - 64)	  /* a read: below the fadd word */

/* where a cut is made (rdmamsg_ep_test_break) */
enum site {
	AT_LOOP, /* the test's loop, after k sends of the side */
	AT_RECV, /* on_recv of message k of the side's stream */
	AT_REQ,	 /* on_request of request k of the side */
	AT_RESP, /* response_cb of request k of the side */
	AT_SENT, /* on_send of message k of the side */
	AT_DONE, /* the connector's FAILOVER_DONE: the replay is due */
	AT_WIMM, /* the completion of write with immediate k of the side */
	NSITES
};

/* zero -- ok() that x is 0, saying x */
#define zero(x, fmt, ...) \
	ok((x) == 0, fmt " (%llu)", __VA_ARGS__, (unsigned long long)(x))

static const char *const site_name[NSITES] = {
	"loop",	   "on_recv", "on_request",    "response_cb",
	"on_send", "done",    "write_imm done"};

struct cut {
	enum site site;
	int side;   /* whose stream's k */
	int victim; /* 0: the connector's end, 1: the acceptor's */
	uint64_t k;
	int done;
};

struct side {
	int idx; /* 0: connector, 1: acceptor */
	struct rdmamsg_ep *ep;
	/* its stream */
	uint64_t sent, n;  /* accepted by rdmamsg_send, to send */
	uint8_t *sent_cnt; /* on_send per message */
	int *sent_status;  /* its status */
	uint64_t reports, lost, outage_sends, rndv_enotconn;
	/* the peer's stream, as received */
	uint8_t *got;
	uint64_t rx, last, bad, dup, order;
	int have_last;
	/* requests made and answered */
	uint64_t nreq, resp, resp_reset, resp_bad, req_enotconn;
	uint8_t *answered;
	/* requests received */
	uint8_t *seen;
	uint64_t req_dup;
	struct rdmamsg_req **later; /* answered from the loop */
	uint64_t *later_id;
	size_t nlater;
	/* one-sided */
	uint64_t ops, ops_done, ops_ok, ops_reset, ops_bad, ops_enotconn;
	uint64_t fadd_ok, fadd_reset;
	uint64_t nwimm;	    /* writes with immediate made */
	int *wimm_status;   /* each one's completion (1: none yet) */
	uint8_t *wimm_seen; /* the peer's on_write_imm for each */
	uint64_t wimm_bad;  /* on_write_imm of no such write */
	int wimm_due;	    /* one to make, when a credit allows */
	int marks;	    /* wimm_behind()'s messages received */
	struct rdmamsg_mr *lmr, *tmr;
	struct rdmamsg_rmr *peer_t; /* the peer's target region */
	uint8_t *ldata, *tdata;
	int writable, ndisc, connected, closed, failed_ev;
	int nev, ev[4 * NCUT_MAX + 64];
};

static struct side S[2];
static struct cut cuts[NCUT_MAX];
static int ncuts, cuts_made;
static uint64_t n_msgs, n_reqs_max;
static int fails_inside;	    /* test_break refused inside a callback */
static struct rdmamsg_srq *the_srq; /* both ends receive through it */
static int the_dc; /* the session is DC: no write with immediate there */

/* in_burst -- message seq is one of a burst of tiny ones, sent at once
 * into a full window: they wait, and go packed, many to a fragment */
static int in_burst(uint64_t seq)
{
	return seq % BURST_EVERY >= BURST_AT &&
	       seq % BURST_EVERY < BURST_AT + BURST_LEN;
}

/* kind/length of message seq of side s: small (packed when it waits),
 * above the eager size (fragments), above the message maximum
 * (rendezvous); deterministic */
static size_t msg_len(int s, uint64_t seq)
{
	uint64_t h = (seq + 1) * 2654435761u + (uint64_t)s * 40503u;
	unsigned int c = (unsigned int)((h >> 9) % 32);

	if (in_burst(seq))
		return 8 + seq % 8;
	if (c < 3)
		return MAX_MSG + 1 + (h % (MAX_RNDV - MAX_MSG));
	if (c < 10)
		return EAGER + 1 + (h % (MAX_MSG - EAGER));
	return 8 + (h % 400);
}

/* fill -- bytes of item seq of stream tag (a message, request or
 * response of one side): its number, then bytes that depend on both */
static void fill(uint8_t *p, unsigned int tag, uint64_t seq, size_t len)
{
	uint64_t v = seq | ((uint64_t)tag << 56);
	size_t i;

	memcpy(p, &v, 8);
	for (i = 8; i < len; i++)
		p[i] = (uint8_t)(seq * 31 + i * 7 + tag * 101);
}

/* check -- fill()'s bytes */
static int check(const uint8_t *p, unsigned int tag, uint64_t seq, size_t len)
{
	uint64_t v;
	size_t i;

	if (len < 8)
		return 0;
	memcpy(&v, p, 8);
	if (v != (seq | ((uint64_t)tag << 56)))
		return 0;
	for (i = 8; i < len; i++)
		if (p[i] != (uint8_t)(seq * 31 + i * 7 + tag * 101))
			return 0;
	return 1;
}

/* req_len -- request r of side s: small, fragmented, or (one in eight)
 * by rendezvous */
static size_t req_len(int s, uint64_t r)
{
	uint64_t h = (r + 7) * 2246822519u + (uint64_t)s * 977u;

	if (h % 8 == 1)
		return MAX_MSG + 1 + (h >> 8) % (RQ_BIG - MAX_MSG);
	return h % 4 == 0 ? EAGER + 1 + (h >> 8) % (REQ_MAX - EAGER)
			  : 8 + (h >> 8) % 200;
}

/* resp_len -- its response: the same mix */
static size_t resp_len(int s, uint64_t r)
{
	uint64_t h = (r + 3) * 3266489917u + (uint64_t)s * 131u;

	if (h % 8 == 5)
		return MAX_MSG + 1 + (h >> 8) % (RQ_BIG - MAX_MSG);
	return h % 3 == 0 ? EAGER + 1 + (h >> 8) % (REQ_MAX - EAGER)
			  : 8 + (h >> 8) % 300;
}

/* both_up -- both ends connected: a cut now is one failover */
static int both_up(void)
{
	enum rdmamsg_ep_state a = RDMAMSG_EP_CLOSING, b = RDMAMSG_EP_CLOSING;

	if (!S[0].ep || !S[1].ep)
		return 0;
	rdmamsg_ep_get_state(S[0].ep, &a);
	rdmamsg_ep_get_state(S[1].ep, &b);
	return a == RDMAMSG_EP_CONNECTED && b == RDMAMSG_EP_CONNECTED;
}

/* state_of -- the public state of a side's end */
static enum rdmamsg_ep_state state_of(struct side *me)
{
	enum rdmamsg_ep_state st = RDMAMSG_EP_CLOSING;

	rdmamsg_ep_get_state(me->ep, &st);
	return st;
}

/* maybe_cut -- site reached with k for side's stream: make the cut
 * armed there, if the next due is there and both ends are up */
static void maybe_cut(enum site site, int side, uint64_t k)
{
	struct cut *c;
	int ret;

	if (cuts_made >= ncuts)
		return;
	c = &cuts[cuts_made];
	if (c->site != site || c->side != side || k < c->k)
		return;
	if (site == AT_DONE ? state_of(&S[c->victim]) != RDMAMSG_EP_CONNECTED
			    : !both_up())
		return;
	ret = rdmamsg_ep_test_break(S[c->victim].ep);
	if (ret) {
		fails_inside++;
		diag("cut %d (%s): %s", cuts_made, site_name[site],
		     rdmamsg_strerror(ret));
	}
	c->done = 1;
	cuts_made++;
}

/* on_recv -- the peer's stream: once each, in order, bytes right */
static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	struct side *me = arg;
	int peer = !me->idx;
	uint64_t v = UINT64_MAX, seq;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len >= 8)
		memcpy(&v, data, 8);
	seq = v & ((1ull << 56) - 1);
	if (len == 8 && v == MARK) {
		/* wimm_behind(): the receiver's connection fails here,
		 * before it polls what came behind */
		me->marks++;
		if (rdmamsg_ep_test_break(me->ep))
			me->bad++;
		return;
	}
	if (len < 8 || (v >> 56) != (uint64_t)peer || seq >= n_msgs ||
	    len != msg_len(peer, seq) || !check(data, peer, seq, len)) {
		if (me->bad < 5)
			diag("side %d: bad message: len %zu tag %llu seq %llu "
			     "(its len %zu)",
			     me->idx, len, (unsigned long long)(v >> 56),
			     (unsigned long long)seq,
			     seq < n_msgs ? msg_len(peer, seq) : 0);
		me->bad++;
		return;
	}
	if (me->got[seq]++)
		me->dup++;
	if (me->have_last && seq <= me->last)
		me->order++;
	me->last = seq;
	me->have_last = 1;
	me->rx++;
	maybe_cut(AT_RECV, peer, seq);
}

/* on_send -- once per message, in order of the stream's numbers */
static void on_send(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	struct side *me = arg;
	uint64_t seq = (uint64_t)(uintptr_t)op_ctx - 1;

	(void)ep;
	if (seq >= n_msgs) {
		me->bad++;
		return;
	}
	me->sent_cnt[seq]++;
	me->sent_status[seq] = status;
	me->reports++;
	me->lost += status != 0;
	maybe_cut(AT_SENT, me->idx, seq);
}

/* on_resp -- request r of side s: answered once, with its bytes */
static void on_resp(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		    void *req_arg)
{
	uintptr_t a = (uintptr_t)req_arg;
	struct side *me = &S[a & 1];
	uint64_t r = a >> 1;

	(void)ep;
	if (r >= n_reqs_max || me->answered[r]++) {
		me->resp_bad++;
		return;
	}
	/* a read of a request or response by rendezvous cut: no answer */
	if (status == -ECONNRESET &&
	    (req_len(me->idx, r) > REQ_MAX || resp_len(me->idx, r) > REQ_MAX)) {
		me->resp_reset++;
		return;
	}
	if (status || len != resp_len(me->idx, r) ||
	    !check(data, 0x20 | me->idx, r, len)) {
		diag("side %d request %llu: %s, %zu bytes", me->idx,
		     (unsigned long long)r, rdmamsg_strerror(status), len);
		me->resp_bad++;
		return;
	}
	me->resp++;
	maybe_cut(AT_RESP, me->idx, r);
}

/* answer -- the response to the peer's request r */
static int answer(struct side *me, struct rdmamsg_req *req, uint64_t r)
{
	static uint8_t buf[RQ_BIG];
	int peer = !me->idx;
	size_t len = resp_len(peer, r);

	fill(buf, 0x20 | peer, r, len);
	return rdmamsg_respond(req, buf, len);
}

/* big_in_outage -- len goes by rendezvous, which an outage refuses */
static int big_in_outage(struct side *me, size_t len)
{
	return len > REQ_MAX && state_of(me) == RDMAMSG_EP_CONNECTING;
}

/* on_request -- the peer's request r: seen once; odd ones answered from
 * the loop later (maybe across an outage) */
static void on_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
		       void *data, size_t len, void *arg)
{
	struct side *me = arg;
	int peer = !me->idx;
	uint64_t v = UINT64_MAX, r;
	int ret;

	(void)ep;
	if (len >= 8)
		memcpy(&v, data, 8);
	r = v & ((1ull << 56) - 1);
	if ((v >> 56) != (uint64_t)(0x10 | peer) || r >= n_reqs_max ||
	    len != req_len(peer, r) || !check(data, 0x10 | peer, r, len)) {
		me->bad++;
		rdmamsg_req_drop(req);
		return;
	}
	if (me->seen[r]++)
		me->req_dup++;
	maybe_cut(AT_REQ, peer, r);
	if (r % 2 && me->nlater < n_reqs_max) {
		me->later_id[me->nlater] = r;
		me->later[me->nlater++] = req;
		return;
	}
	ret = answer(me, req, r);
	if (ret) {
		/* -EAGAIN: the backlog is full; -ENOTCONN: a rendezvous in
		 * an outage; answered later */
		if (ret != -EAGAIN &&
		    !(ret == -ENOTCONN && big_in_outage(me, resp_len(peer, r))))
			me->bad++;
		me->later_id[me->nlater] = r;
		me->later[me->nlater++] = req;
	}
}

/* on_op -- a one-sided operation of side (op_ctx: side | kind << 1 |
 * the write with immediate's number << 3) */
static void on_op(struct rdmamsg_ep *ep, int status, uint64_t value,
		  void *op_ctx)
{
	uintptr_t a = (uintptr_t)op_ctx;
	struct side *me = &S[a & 1];
	unsigned int kind = (unsigned int)(a >> 1 & 3);

	(void)ep;
	(void)value;
	me->ops_done++;
	if (kind == 3) {
		me->wimm_status[a >> 3] = status;
		/* its receiver may not have polled it yet: cut it now */
		if (!status)
			maybe_cut(AT_WIMM, me->idx, a >> 3);
	}
	if (status == 0) {
		me->ops_ok++;
		if (kind == 2)
			me->fadd_ok++;
		/* a read: the peer's fixed bytes */
		if (kind == 1 &&
		    !check(me->ldata + REGION / 2, 0x30 | !me->idx, 0, RD_LEN))
			me->ops_bad++;
	} else if (status == -ECONNRESET) {
		me->ops_reset++;
		if (kind == 2)
			me->fadd_reset++;
	} else {
		diag("side %d op %u: %s", me->idx, kind,
		     rdmamsg_strerror(status));
		me->ops_bad++;
	}
}

/* on_write_imm -- the peer's write with immediate imm (its number) */
static void on_write_imm(struct rdmamsg_ep *ep, uint32_t imm, size_t len,
			 void *arg)
{
	struct side *peer = &S[!((struct side *)arg)->idx];

	(void)ep;
	if (imm >= peer->nwimm || len != REGION / 4) {
		peer->wimm_bad++;
		return;
	}
	peer->wimm_seen[imm]++;
}

static void on_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct side *)arg)->writable = 1;
}

static void on_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	diag("side %d: on_disconnect %s", ((struct side *)arg)->idx,
	     rdmamsg_strerror(status));
	((struct side *)arg)->ndisc++;
}

static void on_connect(struct rdmamsg_ep *ep, int status, int reason,
		       const void *pdata, size_t len, void *arg)
{
	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	((struct side *)arg)->connected = status ? -1 : 1;
}

static void on_path(struct rdmamsg_ep *ep, enum rdmamsg_path_event event,
		    unsigned int path, int status, void *arg)
{
	struct side *me = arg;

	(void)ep;
	(void)path;
	(void)status;
	if (me->nev < (int)(sizeof(me->ev) / sizeof(me->ev[0])))
		me->ev[me->nev++] = (int)event;
	if (event == RDMAMSG_FAILOVER_FAILED)
		me->failed_ev++;
	if (event == RDMAMSG_FAILOVER_DONE && me->idx == 0)
		maybe_cut(AT_DONE, 0, UINT64_MAX);
}

static void on_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct side *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = on_connect,
	.on_recv = on_recv,
	.on_send = on_send,
	.on_writable = on_writable,
	.on_disconnect = on_disc,
};

/* side_attr -- the attributes of both ends */
static struct rdmamsg_ep_attr *side_attr(void)
{
	struct rdmamsg_ep_attr *a = test_ep_attr(EAGER, MAX_MSG);

	rdmamsg_ep_attr_set_on_request(a, on_request);
	rdmamsg_ep_attr_set_on_write_imm(a, on_write_imm);
	rdmamsg_ep_attr_set_path_cb(a, on_path);
	rdmamsg_ep_attr_set_max_large_size(a, MAX_RNDV);
	rdmamsg_ep_attr_set_recv_depth(a, 16);
	rdmamsg_ep_attr_set_send_backlog(a, 256);
	rdmamsg_ep_attr_set_srq(a, the_srq);
	return a;
}

/* on_conn_req -- accept the session (the acceptor sets no policy) */
static void on_conn_req(struct rdmamsg_listener *lst,
			struct rdmamsg_conn_req *req, const void *pdata,
			size_t len, void *arg)
{
	struct rdmamsg_ep_attr *a = side_attr();

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	rdmamsg_ep_attr_set_path_cb(a, on_path);
	rdmamsg_ep_attr_set_session_linger(a, 120000);
	if (S[1].ep || rdmamsg_conn_req_accept(req, a, &cbs, &S[1], &S[1].ep))
		S[1].bad++;
	rdmamsg_ep_attr_delete(&a);
}

/* wimm_try -- the write with immediate due, if the peer has a credit
 * for it (-EAGAIN otherwise: tried again) and the connection is up */
static void wimm_try(struct side *me)
{
	void *oc = (void *)(uintptr_t)(me->nwimm << 3 | 3 << 1 | me->idx);
	int ret;

	if (!me->wimm_due || state_of(me) != RDMAMSG_EP_CONNECTED)
		return;
	ret = rdmamsg_write_imm(me->ep, me->lmr, 0, me->peer_t, 0, REGION / 4,
				(uint32_t)me->nwimm, on_op, oc);
	if (ret == -EAGAIN)
		return;
	me->wimm_due = 0;
	if (ret) {
		diag("side %d write_imm: %s", me->idx, rdmamsg_strerror(ret));
		me->ops_bad++;
		return;
	}
	me->wimm_status[me->nwimm++] = 1;
	me->ops++;
}

/* send_some -- up to burst items of a side's load; 0 when it waits */
static int send_some(struct side *me, int burst)
{
	static uint8_t buf[MAX_RNDV];
	int did = 0, ret;

	/* answers held back, oldest first */
	while (me->nlater) {
		ret = answer(me, me->later[0], me->later_id[0]);
		if (ret == -EAGAIN ||
		    (ret == -ENOTCONN &&
		     big_in_outage(me, resp_len(!me->idx, me->later_id[0]))))
			break;
		if (ret) {
			diag("side %d: respond: %s", me->idx,
			     rdmamsg_strerror(ret));
			me->bad++;
		}
		me->nlater--;
		memmove(me->later, me->later + 1,
			me->nlater * sizeof(me->later[0]));
		memmove(me->later_id, me->later_id + 1,
			me->nlater * sizeof(me->later_id[0]));
		did++;
	}
	wimm_try(me);
	if (in_burst(me->sent))
		burst = BURST_LEN;
	while (burst-- > 0 && me->sent < me->n) {
		uint64_t seq = me->sent;
		size_t len = msg_len(me->idx, seq);
		enum rdmamsg_ep_state st = state_of(me);

		fill(buf, (unsigned int)me->idx, seq, len);
		ret = rdmamsg_send(me->ep, buf, len,
				   (void *)(uintptr_t)(seq + 1));
		if (ret == -EAGAIN)
			return did;
		if (ret == -ENOTCONN && len > MAX_MSG &&
		    st == RDMAMSG_EP_CONNECTING) {
			me->rndv_enotconn++; /* a rendezvous waits for the
					      * connection */
			return did;
		}
		if (ret) {
			diag("side %d send %llu (%zu bytes): %s", me->idx,
			     (unsigned long long)seq, len,
			     rdmamsg_strerror(ret));
			me->bad++;
			me->n = me->sent; /* gives up this stream */
			return did;
		}
		if (st != RDMAMSG_EP_CONNECTED)
			me->outage_sends++;
		me->sent++;
		did++;
		maybe_cut(AT_LOOP, me->idx, me->sent);
		if (me->sent % REQ_EVERY == 0 && me->nreq < n_reqs_max) {
			uint64_t r = me->nreq, id;
			size_t rl = req_len(me->idx, r);

			fill(buf, 0x10 | me->idx, r, rl);
			ret = rdmamsg_request(
				me->ep, buf, rl, 0, on_resp,
				(void *)(uintptr_t)(r << 1 | me->idx), &id);
			if (ret == 0)
				me->nreq++;
			else if (ret == -ENOTCONN && big_in_outage(me, rl))
				me->req_enotconn++; /* the next time */
			else if (ret != -EAGAIN)
				me->bad++;
		}
		if (me->sent % OP_EVERY == 0) {
			unsigned int kind =
				(unsigned int)(me->sent / OP_EVERY) % 4;
			void *oc = (void *)(uintptr_t)(me->nwimm << 3 |
						       kind << 1 | me->idx);

			st = state_of(me);
			if (kind == 0)
				ret = rdmamsg_write(me->ep, me->lmr, 0,
						    me->peer_t, 0, REGION / 2,
						    on_op, oc);
			else if (kind == 1)
				ret = rdmamsg_read(me->ep, me->lmr, REGION / 2,
						   me->peer_t, REGION / 2,
						   RD_LEN, on_op, oc);
			else if (kind == 2)
				ret = rdmamsg_atomic_fadd(me->ep, me->peer_t,
							  REGION - 8, 1, on_op,
							  oc);
			else {
				me->wimm_due = !the_dc; /* wimm_try() */
				ret = 0;
			}
			if (kind == 3)
				; /* counted when made */
			else if (ret == 0)
				me->ops++;
			else if (ret == -ENOTCONN && st != RDMAMSG_EP_CONNECTED)
				me->ops_enotconn++;
			else if (ret != -EAGAIN) {
				diag("side %d op %u: %s", me->idx, kind,
				     rdmamsg_strerror(ret));
				me->ops_bad++;
			}
		}
	}
	return did;
}

/* wimm_behind -- a message, and a write with immediate right behind it;
 * the message's on_recv fails the receiver's connection, with the
 * write's arrival still to poll: the writer's completion says 0 (the
 * data is in place), so the receiver's on_write_imm must run, once
 * (rdmamsg_write(3)), whatever the outage that follows; 1 when it made
 * that cut */
static int wimm_behind(struct rdmamsg_ctx *ctx)
{
	struct side *me = &S[0], *peer = &S[1];
	uint64_t v = MARK, w, n0 = me->ops_done;
	long long end = test_now_ms() + 60000;
	int ret;

	if (the_dc)
		return 0; /* no writes with immediate on DC endpoints */
	while (!both_up() && test_now_ms() < end)
		test_idle(ctx, 1);
	test_idle(ctx, 20); /* credits back: both posts go at once */
	w = me->nwimm;
	me->wimm_status[w] = 1;
	ret = rdmamsg_send(me->ep, &v, 8, NULL);
	if (!ret)
		ret = rdmamsg_write_imm(
			me->ep, me->lmr, 0, me->peer_t, 0, REGION / 4,
			(uint32_t)w, on_op,
			(void *)(uintptr_t)(w << 3 | 3 << 1 | me->idx));
	is_int(ret, 0, "a message, a write with immediate behind it");
	if (ret)
		return 0;
	me->nwimm++;
	me->ops++;
	while ((me->ops_done == n0 || !both_up()) && test_now_ms() < end)
		test_idle(ctx, 1);
	test_idle(ctx, 20);
	is_int(peer->marks, 1, "the message's on_recv cut its receiver");
	ok(me->wimm_status[w] != 0 || me->wimm_seen[w] == 1,
	   "the write %s: its receiver's on_write_imm ran %d times",
	   me->wimm_status[w] ? rdmamsg_strerror(me->wimm_status[w]) : "done",
	   me->wimm_seen[w]);
	return 1;
}

/* finished -- every item of both loads has its outcome */
static int finished(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct side *me = &S[i], *peer = &S[!i];

		if (me->sent < me->n || me->reports < me->sent ||
		    me->resp + me->resp_reset + me->resp_bad < me->nreq ||
		    me->nlater || me->ops_done < me->ops ||
		    peer->rx + me->lost < me->sent)
			return 0;
	}
	return cuts_made >= ncuts;
}

/* plan -- the cuts: every site, both streams, both victims, spread over
 * the load */
static void plan(void)
{
	int i;

	ncuts = tap_small() ? 14 : 56;
	for (i = 0; i < ncuts; i++) {
		struct cut *c = &cuts[i];

		c->site = (enum site)(i % NSITES);
		c->side = (i / NSITES) % 2;
		c->victim = (i + i / NSITES / 2) % 2;
		if (c->site == AT_DONE) {
			/* the connector, as its reconnect comes up */
			c->side = 0;
			c->victim = 0;
		}
		c->k = (uint64_t)(i + 1) * n_msgs / (uint64_t)(ncuts + 2);
		/* requests and their answers come every REQ_EVERY messages,
		 * fewer when rendezvous ones meet an outage */
		if (c->site == AT_REQ || c->site == AT_RESP)
			c->k /= REQ_EVERY + 2;
		/* on_recv of a message amid a burst: inside a pack, with more
		 * of the pack after it */
		if (c->site == AT_RECV)
			c->k = (c->k / BURST_EVERY) * BURST_EVERY + BURST_AT +
			       BURST_LEN / 2;
		if (c->site == AT_WIMM) {
			/* the write's receiver; one in four OP_EVERY
			 * messages is a write with immediate, some wait */
			c->victim = !c->side;
			c->k /= 12 * OP_EVERY;
		}
	}
}

/* stress -- the load and its cuts; srq: both ends receive through one
 * shared receive queue */
static void stress(int srq, int dc)
{
	struct rdmamsg_srq_attr sa = {1024, EAGER};
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *l1, *l2;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_path_stats ps, sps;
	uint8_t blob[RDMAMSG_MR_EXPORT_SIZE];
	char addr[64];
	uint16_t p1, p2;
	long long start, end;
	int i, ret, nc;

	ctx = test_ctx();
	the_dc = dc;
	memset(S, 0, sizeof(S));
	memset(cuts, 0, sizeof(cuts));
	cuts_made = fails_inside = 0;
	the_srq = NULL;
	if (srq && rdmamsg_srq_create(ctx, &sa, &the_srq))
		bail_out("srq");
	n_msgs = tap_small() ? 1500 : 6000;
	n_reqs_max = n_msgs / REQ_EVERY + 1;
	plan();
	for (i = 0; i < 2; i++) {
		struct side *me = &S[i];

		me->idx = i;
		me->n = n_msgs;
		me->sent_cnt = calloc(n_msgs, 1);
		me->sent_status = calloc(n_msgs, sizeof(int));
		me->got = calloc(n_msgs, 1);
		me->answered = calloc(n_reqs_max, 1);
		me->seen = calloc(n_reqs_max, 1);
		me->later = calloc(n_reqs_max, sizeof(*me->later));
		me->later_id = calloc(n_reqs_max, sizeof(*me->later_id));
		me->wimm_status = calloc(n_msgs / OP_EVERY + 2, sizeof(int));
		me->wimm_seen = calloc(n_msgs / OP_EVERY + 2, 1);
		if (!me->sent_cnt || !me->sent_status || !me->got ||
		    !me->answered || !me->seen || !me->later || !me->later_id ||
		    !me->wimm_status || !me->wimm_seen)
			bail_out("memory");
		if (rdmamsg_mr_alloc(ctx, REGION, 0, &me->lmr) ||
		    rdmamsg_mr_alloc(ctx, REGION,
				     RDMAMSG_ACCESS_REMOTE_READ |
					     RDMAMSG_ACCESS_REMOTE_WRITE |
					     RDMAMSG_ACCESS_REMOTE_ATOMIC,
				     &me->tmr))
			bail_out("regions");
		{
			void *p;
			size_t len;

			if (rdmamsg_mr_get_data(me->lmr, &p, &len))
				bail_out("region");
			me->ldata = p;
			if (rdmamsg_mr_get_data(me->tmr, &p, &len))
				bail_out("region");
			me->tdata = p;
		}
		/* the bytes a write carries; the bytes a read finds */
		fill(me->ldata, 0x40 | i, 0, REGION / 2);
		fill(me->tdata + REGION / 2, 0x30 | i, 0, RD_LEN);
		memset(me->tdata + REGION - 8, 0, 8);
	}
	/* the fetch-and-add word is outside what reads check */
	for (i = 0; i < 2; i++) {
		if (rdmamsg_mr_export(S[!i].tmr, blob, sizeof(blob)) < 0 ||
		    rdmamsg_rmr_import(blob, sizeof(blob), &S[i].peer_t))
			bail_out("export");
	}

	if (rdmamsg_listen(ctx, "127.0.0.1:0", on_conn_req, NULL, &l1) ||
	    rdmamsg_listener_get_port(l1, &p1) ||
	    rdmamsg_listen(ctx, "127.0.0.1:0", on_conn_req, NULL, &l2) ||
	    rdmamsg_listener_get_port(l2, &p2))
		bail_out("listen");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u,127.0.0.1:%u", p1, p2);
	a = side_attr();
	rdmamsg_ep_attr_set_failover(a, RDMAMSG_FAILOVER_REPLAY);
	if (dc)
		rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC);
	rdmamsg_ep_attr_set_reconnect(a, 120000, 1000);
	is_int(rdmamsg_connect(ctx, addr, a, &cbs, &S[0], &S[0].ep), 0,
	       "a session over two paths");
	rdmamsg_ep_attr_delete(&a);
	ok(test_run_until(ctx, &S[0].connected, 60000) && S[0].connected == 1,
	   "connected");
	for (end = test_now_ms() + 60000; test_now_ms() < end && !both_up();)
		test_idle(ctx, 1);
	if (!both_up())
		bail_out("not up");
	{
		struct rdmamsg_protocols pc = {0};

		ret = rdmamsg_ep_get_protocols(S[0].ep, &pc);
		ok(!ret && pc.max_msg == MAX_MSG,
		   "message maximum %zu: above it, rendezvous", pc.max_msg);
	}

	/* the load, both ways at once; the bound is far above a healthy
	 * run's time on a loaded machine (and under valgrind) */
	start = test_now_ms();
	end = start + (tap_small() ? 600000 : 200000);
	while (!finished() && test_now_ms() < end && !S[0].ndisc &&
	       !S[1].ndisc && !S[0].failed_ev && !S[1].failed_ev) {
		int did = send_some(&S[0], 8) + send_some(&S[1], 8);

		S[0].writable = S[1].writable = 0;
		rdmamsg_ctx_progress(ctx);
		/* a cut whose site the load no longer reaches: from here */
		if (S[0].sent == S[0].n && S[1].sent == S[1].n &&
		    cuts_made < ncuts && cuts[cuts_made].site != AT_LOOP) {
			cuts[cuts_made].site = AT_LOOP;
			cuts[cuts_made].k = 0;
		}
		if (S[0].sent == S[0].n && S[1].sent == S[1].n)
			maybe_cut(AT_LOOP, cuts[cuts_made].side, UINT64_MAX);
		if (!did) {
			volatile int w = 0;

			test_run_until(ctx, &w, 1);
		}
	}
	diag("the load took %lld ms", test_now_ms() - start);
	ok(cuts_made == ncuts, "all %d cuts made (%d)", ncuts, cuts_made);
	is_int(fails_inside, 0, "every cut found its end up");
	ok(finished(), "every item has its outcome (no stall)");
	for (i = 0; i < 2; i++) {
		struct side *me = &S[i], *peer = &S[!i];
		uint64_t j, twice = 0, err = 0, lost = 0, missing = 0,
			    extra = 0, large_err = 0;

		for (j = 0; j < me->sent; j++) {
			int st = me->sent_status[j];

			twice += me->sent_cnt[j] != 1;
			if (st && msg_len(i, j) <= MAX_MSG)
				err++;
			if (st &&
			    (msg_len(i, j) <= MAX_MSG || st != -ECONNRESET))
				large_err++;
			lost += st != 0;
			if (!st && peer->got[j] != 1 && missing++ < 10)
				diag("side %d: message %llu (%zu bytes) not "
				     "delivered (last %llu)",
				     i, (unsigned long long)j, msg_len(i, j),
				     (unsigned long long)peer->last);
			if (st && peer->got[j])
				extra++;
		}
		diag("side %d: %llu messages, %llu lost rendezvous, %llu "
		     "sends queued in outages, %llu rendezvous waited, %llu "
		     "requests, %llu one-sided (%llu reset, %llu refused)",
		     i, (unsigned long long)me->sent, (unsigned long long)lost,
		     (unsigned long long)me->outage_sends,
		     (unsigned long long)me->rndv_enotconn,
		     (unsigned long long)me->nreq, (unsigned long long)me->ops,
		     (unsigned long long)me->ops_reset,
		     (unsigned long long)me->ops_enotconn);
		ok(me->sent == n_msgs, "side %d: all %llu messages sent", i,
		   (unsigned long long)n_msgs);
		zero(twice, "side %d: on_send once per message", i);
		zero(err,
		     "side %d: on_send 0 for every message up to the "
		     "maximum",
		     i);
		zero(large_err,
		     "side %d: a rendezvous fails only with -ECONNRESET", i);
		zero(missing,
		     "side %d: every message reported sent delivered once", i);
		zero(extra, "side %d: no message reported failed delivered", i);
		zero(peer->dup, "side %d's stream: no duplicate", i);
		zero(peer->order, "side %d's stream: in order", i);
		zero(peer->bad, "side %d: received bytes right", !i);
		for (j = 0, twice = 0; j < me->nreq; j++)
			twice += me->answered[j] != 1;
		ok(me->nreq > 0 && me->resp + me->resp_reset == me->nreq &&
			   !twice,
		   "side %d: %llu requests, response_cb once each: %llu "
		   "answered, %llu cut reads (-ECONNRESET), %llu refused "
		   "in outages",
		   i, (unsigned long long)me->nreq,
		   (unsigned long long)me->resp,
		   (unsigned long long)me->resp_reset,
		   (unsigned long long)me->req_enotconn);
		zero(me->resp_bad, "side %d: no response twice, late or wrong",
		     i);
		zero(peer->req_dup,
		     "side %d's requests: each seen once by the peer", i);
		zero(me->bad, "side %d: no call failed", i);
		ok(me->ops > 0 && me->ops_done == me->ops,
		   "side %d: %llu one-sided operations, each completed", i,
		   (unsigned long long)me->ops);
		zero(me->ops_bad,
		     "side %d: ... with 0 or -ECONNRESET, reads right", i);
		{
			uint64_t v;

			memcpy(&v, peer->tdata + REGION - 8, 8);
			ok(v >= me->fadd_ok &&
				   v <= me->fadd_ok + me->fadd_reset,
			   "side %d: the fetch-and-add target %llu: each "
			   "reported done ran once (%llu, %llu reset)",
			   i, (unsigned long long)v,
			   (unsigned long long)me->fadd_ok,
			   (unsigned long long)me->fadd_reset);
		}
		for (j = 0, twice = 0, err = 0; j < me->nwimm; j++) {
			twice += me->wimm_seen[j] > 1;
			err += me->wimm_status[j] == 0 && me->wimm_seen[j] != 1;
		}
		ok(!twice && !err && !me->wimm_bad,
		   "side %d: %llu writes with immediate: the peer saw each "
		   "done one once, none twice (%llu twice, %llu done unseen)",
		   i, (unsigned long long)me->nwimm, (unsigned long long)twice,
		   (unsigned long long)err);
		zero(me->ndisc, "side %d never went down", i);
		zero(me->failed_ev, "side %d: no FAILOVER_FAILED", i);
	}
	ok(S[0].outage_sends + S[1].outage_sends > 0,
	   "sends queued during outages");
	nc = ncuts + wimm_behind(ctx);
	/* the last cut's reconnect done (the load may end before it) */
	for (end = test_now_ms() + 60000; test_now_ms() < end && !both_up();)
		test_idle(ctx, 1);
	ok(both_up(), "both ends up again");
	rdmamsg_ep_get_path_stats(S[0].ep, &ps);
	rdmamsg_ep_get_path_stats(S[1].ep, &sps);
	ok(ps.failovers == (uint64_t)nc,
	   "connector: %llu failovers for %d cuts (%llu path downs)",
	   (unsigned long long)ps.failovers, nc,
	   (unsigned long long)ps.path_downs);
	/* a cut of the connector as it comes up may precede the acceptor's
	 * own resumption */
	ok(sps.failovers <= (uint64_t)nc &&
		   sps.failovers + (uint64_t)(ncuts / NSITES + 1) >=
			   (uint64_t)nc,
	   "acceptor: %llu failovers", (unsigned long long)sps.failovers);

	is_int(rdmamsg_ep_close(S[0].ep, on_closed), 0, "close the connector");
	is_int(rdmamsg_ep_close(S[1].ep, on_closed), 0, "close the acceptor");
	test_run_until(ctx, &S[0].closed, 30000);
	ok(test_run_until(ctx, &S[1].closed, 30000) && S[0].closed,
	   "both closed");
	rdmamsg_listener_close(l1, NULL);
	rdmamsg_listener_close(l2, NULL);
	test_idle(ctx, 20);
	for (i = 0; i < 2; i++) {
		struct side *me = &S[i];

		rdmamsg_rmr_free(&me->peer_t);
		rdmamsg_mr_dereg(&me->lmr);
		rdmamsg_mr_dereg(&me->tmr);
		free(me->sent_cnt);
		free(me->sent_status);
		free(me->got);
		free(me->answered);
		free(me->seen);
		free(me->later);
		free(me->later_id);
		free(me->wimm_status);
		free(me->wimm_seen);
	}
	if (the_srq) {
		struct rdmamsg_srq_stats ss;

		/* each reconnect took its window again, each connection gone
		 * gave its back; every buffer is posted again */
		ret = rdmamsg_srq_query(the_srq, &ss);
		ok(!ret && ss.endpoints == 0 && ss.reserved == 0 &&
			   ss.posted == ss.bufs,
		   "the SRQ: no endpoint, nothing reserved, all %u buffers "
		   "posted (%u)",
		   ss.bufs, ss.posted);
		is_int(test_srq_close(ctx, the_srq, 10000), 0,
		       "the SRQ closed");
		the_srq = NULL;
	}
	ret = rdmamsg_ctx_destroy(&ctx);
	is_int(ret, 0, "context destroyed");
}

/* has_dc -- the fabric has the DC transport */
static int has_dc(void)
{
	struct rdmamsg_ctx *ctx = test_ctx();
	uint64_t v;
	int ret = rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v) == 0;

	rdmamsg_ctx_destroy(&ctx);
	return ret;
}

int main(void)
{
	test_setup("replay_stress");
	stress(0, 0);
	diag("again, both ends on a shared receive queue");
	stress(1, 0);
	if (has_dc()) {
		diag("again, over DC (on the SRQ)");
		stress(1, 1);
	} else {
		diag("no DC on this fabric: the DC run skipped");
	}
	return done_testing();
}
