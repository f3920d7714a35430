/* SPDX-License-Identifier: MIT */
/*
 * rail_peer.c -- one side of an rdmamsg session between two hosts of the
 * namespace fabric with two rails (tests/netns/rail-hosts.sh), through
 * the public API only.
 *
 *   rail_peer server PORT ADDR1 ADDR2 COUNT
 *	listens on ADDR1:PORT and ADDR2:PORT (one per rail), says
 *	"listening", accepts sessions ("accepted"), checks every message (a
 *	number counting from 0, the size and the bytes that number has:
 *	none lost, none twice, order kept) and every request (numbered
 *	from 0 in the order they were issued: none lost, none twice, order
 *	kept) and answers each with its number plus one; "delivered K at NS"
 *	for the first message after its K-th FAILOVER_DONE.  Ends when its
 *	session is closed by the peer (or on SIGTERM) with "server: sessions
 *	S messages M requests R bad B dup D disc N status S failovers F ..."
 *	(bad: a message or request out of place or wrong, dup: one
 *	delivered twice); exit 0 when nothing was bad or doubled and, with
 *	COUNT > 0, COUNT messages arrived before a clean close.
 *
 *   rail_peer client ADDRS COUNT INFLIGHT REQS RECONNECT_MS [CUTS]
 *	connects to the address list ADDRS ("a:p,b:p") with
 *	RDMAMSG_FAILOVER_REPLAY (reconnect within RECONNECT_MS, 1,000
 *	tries, each connect attempt within 10 s) and streams COUNT messages of mixed sizes (8 B .. 20,000 B,
 *	fragmented ones among them) and REQS requests spread over it, at
 *	most INFLIGHT outstanding, and INFLIGHT outstanding from each
 *	"ready K" (below) to the K-th failover, so that a cut finds them in
 *	flight (more than REQS in all then); each answered exactly once,
 *	with its number plus one.  Path events are printed with
 *	CLOCK_REALTIME stamps: "path_down N path P status S at NS inflight
 *	R", "failover_done N path P at NS after MS ms inflight R" (R: the
 *	requests outstanding then), "resumed N at NS" (the first response
 *	after failover N: traffic flows again).  For the test's CUTS cuts
 *	(default 2, at most 64) it says "ready K" at (4K - 1) / (4 (CUTS +
 *	1)) of the stream and holds the stream (not the requests) at K /
 *	(CUTS + 1) until the K-th failover is done (K = 1 .. CUTS);
 *	"streaming" once 1,000 messages went.
 *	Then it closes (sending what is queued first) and prints "client:
 *	sent ... answered ... failovers ... late L" (L: responses the
 *	library dropped as late, rdmamsg_ep_get_late_responses: a request
 *	answered twice on the wire, as no request here has a timeout); exit
 *	0 when every request was answered once and right, none late, also
 *	through the close; on a disconnect "disconnected STATUS (N)" and
 *	exit 3.
 *
 * With RAIL_PEER_APM=1 in the environment (tests/netns/apm-hosts.sh,
 * softrdma's IB mode) both sides use automatic path migration
 * (RDMAMSG_APM_AUTO) instead of reconnect-and-replay: the client is given
 * one address, and each RDMAMSG_PATH_MIGRATED counts as a failover (the
 * server says "server path event 5 ..."; the client "migrated N port P
 * at NS inflight R", or "mig_failed port P status S at NS").  The
 * summaries add "migrations M mig_fails F" (rdmamsg_ep_get_path_stats).
 * A migration waits for the primary path's retries to run out (about
 * 8.6 s with rdma_cm's ACK timeout): the peer timeout is 60 s in this
 * mode.  The library's notices go to stderr with a CLOCK_REALTIME stamp
 * (RAIL_PEER_LOG=N: up to level N instead, 4 for debug; in either mode).
 *
 * RAIL_PEER_DC=1 (both roles, replay mode): the session is DC
 * (RDMAMSG_TRANSPORT_DC, chosen by the client), both sides receiving
 * through an SRQ of their context (a DC endpoint needs one); each
 * reconnect then opens new DC lanes on the new path's port.
 *
 * RAIL_PEER_ACK_TIMEOUT=EXP (both roles, either mode): the QP's local ACK
 * timeout exponent (rdmamsg_ep_attr_set_ack_timeout; 0 or unset: the
 * default), so that tools/bench-failover.sh compares the two mechanisms
 * at the same retry timeout.
 *
 * RAIL_PEER_FAULT=KIND checks the checks (rail-hosts.sh): the client
 * numbers its messages (msg-) or requests (req-) wrongly at the middle of
 * the stream, as a lossy, duplicating or reordering library would
 * deliver them (KIND msg-skip, msg-dup, msg-swap, req-skip, req-dup,
 * req-swap), or the server drops request 100 unanswered (no-answer):
 * each must end in a nonzero exit.  RAIL_PEER_DRAIN_MS=MS: how long the
 * client waits for the last answers once everything is sent (default
 * 120,000: past any failover).
 *
 * Deadlines are generous (minutes): the test, not this program, decides
 * what is too slow; SIGTERM ends either role within 20 ms.  SIGUSR1 makes
 * the client's stream end where it is: what was sent and issued is the
 * whole (its answers still awaited), then the close as at the end
 * (rail-hosts.sh's bystander session, run for as long as a cut takes).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdmamsg.h>

#define EAGER	4096
#define MAXMSG	65536
#define MAXCUTS 64
/* APM: a migration waits for the primary's retries to run out, (7 + 1) x
 * rdma_cm's 1.07 s ACK timeout, and the peer is silent meanwhile: a peer
 * timeout well past that (the default 10 s is not) */
#define APM_PEER_MS 60000
/* the client's connect timeout, each reconnect attempt's too: what a
 * reconnect on a live path may take at most (rail-hosts.sh's bound) */
#define CONNECT_MS 10000

static volatile sig_atomic_t term;
static volatile sig_atomic_t finish; /* SIGUSR1: end the stream here */
static int apm;			     /* RAIL_PEER_APM=1: APM, not replay */
static int dc;			     /* RAIL_PEER_DC=1: a DC session */
static struct rdmamsg_srq *srq;	     /* with dc: both roles receive on it */
static unsigned int ack_exp;	     /* RAIL_PEER_ACK_TIMEOUT: 0, the default */
static long long drain_ms = 120000;  /* RAIL_PEER_DRAIN_MS */

/* RAIL_PEER_FAULT: the checks checked (rail-hosts.sh) */
enum fault { F_NONE, F_SKIP, F_DUP, F_SWAP };
static enum fault msg_fault, req_fault; /* the client's numbering */
static int no_answer;			/* the server drops request 100 */

/* faulty -- the number the i-th message or request carries: i, or with a
 * fault at mid, one skipped, one twice or two swapped there */
static uint64_t faulty(enum fault f, uint64_t i, uint64_t mid)
{
	switch (f) {
	case F_SKIP:
		return i >= mid ? i + 1 : i;
	case F_DUP:
		return i > mid ? i - 1 : i;
	case F_SWAP:
		return i == mid ? mid + 1 : i == mid + 1 ? mid : i;
	default:
		return i;
	}
}

static void on_term(int sig)
{
	if (sig == SIGUSR1)
		finish = 1;
	else
		term = 1;
}

/* msg_size -- the size of message seq: 8 B .. 20,000 B */
static size_t msg_size(uint64_t seq)
{
	static const size_t sz[] = {8,	  64,	200, 1000, 4000, 4079,
				    4080, 9000, 8,   333,  8,	 16};

	if (seq % 97 == 13)
		return 20000;
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

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned long long real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull +
	       (unsigned long long)ts.tv_nsec;
}

/* wait_fd -- sleep on the context's fd (armed) for up to ms */
static void wait_fd(struct rdmamsg_ctx *ctx, int ms)
{
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(ctx, &pfd.fd);
	pfd.events = POLLIN;
	if (rdmamsg_ctx_arm(ctx) == 0)
		poll(&pfd, 1, ms);
	rdmamsg_ctx_progress(ctx);
}

/* srq_closed -- the SRQ's close callback: it ran */
static void srq_closed(struct rdmamsg_srq *q, void *arg)
{
	(void)q;
	*(int *)arg = 1;
}

/* srq_close -- close the SRQ, driving ctx until its callback (from the
 * loop) ran, 10 s at most: the context can then be destroyed */
static void srq_close(struct rdmamsg_ctx *ctx)
{
	long long end = now_ms() + 10000;
	int closed = 0;

	if (rdmamsg_srq_close(srq, srq_closed, &closed))
		return;
	while (!closed && now_ms() < end)
		wait_fd(ctx, 5);
}

static long long number(const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	return errno || end == s || *end ? -1 : v;
}

/* ---- server ---------------------------------------------------------- */

struct pend {
	struct rdmamsg_req *req;
	uint64_t v;
};

struct srv {
	struct rdmamsg_ep *ep;
	uint64_t count, next, n, bad, dup, reqs; /* reqs: the next one due */
	int sessions, ndisc, disc_status;
	int failovers, delivered; /* FAILOVER_DONE events, "delivered" lines */
	struct pend *pend;	  /* responses waiting for room */
	size_t npend, cap;
	unsigned char *want;
};

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv *s = arg;
	uint64_t seq = UINT64_MAX;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len >= 8)
		memcpy(&seq, data, 8);
	if (seq < s->next) {
		if (s->dup++ < 5)
			fprintf(stderr,
				"rail_peer: message %" PRIu64
				" twice (next %" PRIu64 ")\n",
				seq, s->next);
		return;
	}
	if (seq != s->next || len != msg_size(seq)) {
		if (s->bad++ < 5)
			fprintf(stderr,
				"rail_peer: message %" PRIu64 " of %zu B where "
				"%" PRIu64 " was due\n",
				seq, len, s->next);
	} else {
		fill(seq, s->want, len);
		if (memcmp(s->want, data, len) && s->bad++ < 5)
			fprintf(stderr,
				"rail_peer: message %" PRIu64 ": wrong bytes\n",
				seq);
	}
	s->next = seq + 1;
	s->n++;
	if (s->delivered < s->failovers) {
		/* the first message delivered on the new path */
		s->delivered = s->failovers;
		printf("delivered %d at %llu message %" PRIu64 "\n",
		       s->delivered, real_ns(), seq);
		fflush(stdout);
	}
}

static void srv_path(struct rdmamsg_ep *ep, enum rdmamsg_path_event event,
		     unsigned int path, int status, void *arg)
{
	struct srv *s = arg;

	(void)ep;
	(void)path;
	if (event == RDMAMSG_FAILOVER_DONE || event == RDMAMSG_PATH_MIGRATED)
		s->failovers++;
	printf("server path event %d status %d at %llu\n", (int)event, status,
	       real_ns());
	fflush(stdout);
}

/* srv_answer -- respond to req (its number plus one); 0 or an error */
static int srv_answer(struct rdmamsg_req *req, uint64_t v)
{
	v++;
	return rdmamsg_respond(req, &v, 8);
}

static void srv_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
			void *data, size_t len, void *arg)
{
	struct srv *s = arg;
	uint64_t v = 0;

	(void)ep;
	if (len != 8) {
		s->bad++;
		rdmamsg_req_drop(req);
		return;
	}
	memcpy(&v, data, 8);
	/* out of place, it is answered all the same: the client counts
	 * what it gets */
	if (v < s->reqs && s->dup++ < 5)
		fprintf(stderr,
			"rail_peer: request %" PRIu64 " twice (next %" PRIu64
			")\n",
			v, s->reqs);
	if (v > s->reqs && s->bad++ < 5)
		fprintf(stderr,
			"rail_peer: request %" PRIu64 " where %" PRIu64
			" was due\n",
			v, s->reqs);
	if (v >= s->reqs)
		s->reqs = v + 1;
	if (no_answer && v == 100) {
		rdmamsg_req_drop(req);
		return;
	}
	if (!s->npend && srv_answer(req, v) == 0)
		return;
	/* no room now (or older ones wait): answered from the loop */
	if (s->npend == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		void *p = realloc(s->pend, cap * sizeof(*s->pend));

		if (!p) {
			s->bad++;
			rdmamsg_req_drop(req);
			return;
		}
		s->pend = p;
		s->cap = cap;
	}
	s->pend[s->npend].req = req;
	s->pend[s->npend].v = v;
	s->npend++;
}

/* srv_flush -- answer what waited for room, in order */
static void srv_flush(struct srv *s)
{
	size_t i = 0, j;

	while (i < s->npend && !srv_answer(s->pend[i].req, s->pend[i].v))
		i++;
	for (j = i; j < s->npend; j++)
		s->pend[j - i] = s->pend[j];
	s->npend -= i;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct srv *s = arg;

	(void)ep;
	s->ndisc++;
	s->disc_status = status;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep_attr *a = NULL;

	(void)lst;
	(void)pdata;
	(void)len;
	if (s->ep || rdmamsg_ep_attr_new(&a) ||
	    rdmamsg_ep_attr_set_eager_size(a, EAGER) ||
	    rdmamsg_ep_attr_set_max_msg_size(a, MAXMSG) ||
	    rdmamsg_ep_attr_set_recv_depth(a, 64) ||
	    rdmamsg_ep_attr_set_send_backlog(a, 65536) ||
	    rdmamsg_ep_attr_set_on_request(a, srv_request) ||
	    rdmamsg_ep_attr_set_path_cb(a, srv_path) ||
	    (apm && (rdmamsg_ep_attr_set_apm(a, RDMAMSG_APM_AUTO) ||
		     rdmamsg_ep_attr_set_peer_timeout(a, APM_PEER_MS))) ||
	    (!apm && rdmamsg_ep_attr_set_session_linger(a, 120000)) ||
	    rdmamsg_ep_attr_set_ack_timeout(a, ack_exp) ||
	    rdmamsg_ep_attr_set_srq(a, srq) ||
	    rdmamsg_conn_req_accept(req, a, &srv_cbs, s, &s->ep)) {
		fprintf(stderr, "rail_peer: a second session, or no accept\n");
		s->bad++;
		rdmamsg_conn_req_reject(req, 1, NULL, 0);
	} else {
		s->sessions++;
		printf("accepted\n");
		fflush(stdout);
	}
	rdmamsg_ep_attr_delete(&a);
}

/* dc_srq -- with RAIL_PEER_DC=1 the context's SRQ; 0, or 1 on failure */
static int dc_srq(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg_srq_attr sa = {1024, EAGER};
	int rc;

	if (!dc)
		return 0;
	rc = rdmamsg_srq_create(ctx, &sa, &srq);
	if (rc)
		fprintf(stderr, "rail_peer: no SRQ: %s\n",
			rdmamsg_strerror(rc));
	return rc != 0;
}

static int server(const char *port, const char *a1, const char *a2,
		  long long count)
{
	struct rdmamsg_listener *l1 = NULL, *l2 = NULL;
	struct rdmamsg_path_stats ps;
	struct rdmamsg_ctx *ctx;
	struct srv s;
	char addr[128];
	int rc;

	memset(&s, 0, sizeof(s));
	s.count = (uint64_t)count;
	s.want = malloc(MAXMSG);
	if (!s.want)
		return 1;
	rc = rdmamsg_ctx_create(NULL, &ctx);
	if (rc) {
		fprintf(stderr, "rail_peer: no context: %s\n",
			rdmamsg_strerror(rc));
		return 1;
	}
	if (dc_srq(ctx))
		return 1;
	snprintf(addr, sizeof(addr), "%s:%s", a1, port);
	rc = rdmamsg_listen(ctx, addr, srv_req, &s, &l1);
	if (!rc) {
		snprintf(addr, sizeof(addr), "%s:%s", a2, port);
		rc = rdmamsg_listen(ctx, addr, srv_req, &s, &l2);
	}
	if (rc) {
		fprintf(stderr, "rail_peer: listen on %s: %s\n", addr,
			rdmamsg_strerror(rc));
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	while (!term && !s.ndisc) {
		wait_fd(ctx, 20);
		if (s.npend)
			srv_flush(&s);
	}
	memset(&ps, 0, sizeof(ps));
	if (s.ep)
		rdmamsg_ep_get_path_stats(s.ep, &ps);
	printf("server: sessions %d messages %" PRIu64 " requests %" PRIu64
	       " bad %" PRIu64 " dup %" PRIu64 " disc %d status %d "
	       "failovers %d migrations %" PRIu64 " mig_fails %" PRIu64 "\n",
	       s.sessions, s.n, s.reqs, s.bad, s.dup, s.ndisc, s.disc_status,
	       s.failovers, ps.migrations, ps.mig_fails);
	fflush(stdout);
	rc = s.bad || s.dup || s.npend ||
	     (s.count && (s.n != s.count || !s.ndisc || s.disc_status));
	if (s.ep)
		rdmamsg_ep_close(s.ep, NULL);
	rdmamsg_listener_close(l1, NULL);
	rdmamsg_listener_close(l2, NULL);
	for (int i = 0; i < 10; i++)
		wait_fd(ctx, 5);
	free(s.pend);
	free(s.want);
	if (srq)
		srq_close(ctx);
	rdmamsg_ctx_destroy(&ctx);
	return rc;
}

/* ---- client ---------------------------------------------------------- */

struct cli {
	int connected, status, closed, writable, ndisc, disc_status;
	int failovers, resumed; /* FAILOVER_DONE events, "resumed" lines */
	uint64_t reqs, issued, answered, resp_bad, twice, late;
	unsigned char *seen; /* a byte per request issued: answered */
	size_t nseen;
};

static struct cli *the_cli;

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)pdata;
	(void)len;
	c->status = status;
	c->connected = 1;
	if (status)
		fprintf(stderr, "rail_peer: connect: %s (reason %d)\n",
			rdmamsg_strerror(status), reason);
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

/* cli_closed -- the endpoint is gone: the responses dropped as late
 * until now, a response to a request already answered among them */
static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	struct cli *c = arg;

	rdmamsg_ep_get_late_responses(ep, &c->late);
	c->closed = 1;
}

/* outstanding -- requests issued and not yet answered */
static uint64_t outstanding(const struct cli *c)
{
	return c->issued - c->answered - c->resp_bad;
}

static void cli_path(struct rdmamsg_ep *ep, enum rdmamsg_path_event event,
		     unsigned int path, int status, void *arg)
{
	struct cli *c = arg;
	struct rdmamsg_path_stats ps;

	switch (event) {
	case RDMAMSG_PATH_DOWN:
		printf("path_down %d path %u status %d at %llu inflight "
		       "%" PRIu64 "\n",
		       c->failovers + 1, path, status, real_ns(),
		       outstanding(c));
		break;
	case RDMAMSG_FAILOVER_DONE:
		c->failovers++;
		rdmamsg_ep_get_path_stats(ep, &ps);
		printf("failover_done %d path %u at %llu after %.1f ms "
		       "inflight %" PRIu64 "\n",
		       c->failovers, path, real_ns(), ps.last_failover_ns / 1e6,
		       outstanding(c));
		break;
	case RDMAMSG_PATH_MIGRATED:
		c->failovers++;
		printf("migrated %d port %u at %llu inflight %" PRIu64 "\n",
		       c->failovers, path, real_ns(), outstanding(c));
		break;
	case RDMAMSG_PATH_MIG_FAILED:
		printf("mig_failed port %u status %d at %llu\n", path, status,
		       real_ns());
		break;
	case RDMAMSG_FAILOVER_FAILED:
		printf("failover_failed path %u status %d (%s) at %llu\n", path,
		       status, rdmamsg_strerror(status), real_ns());
		break;
	default:
		printf("failover_start path %u at %llu\n", path, real_ns());
		break;
	}
	fflush(stdout);
}

/* cli_resp -- request i answered with i + 1, exactly once */
static void cli_resp(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		     void *req_arg)
{
	struct cli *c = the_cli;
	uint64_t i = (uint64_t)(uintptr_t)req_arg, v = 0;

	(void)ep;
	if (len == 8)
		memcpy(&v, data, 8);
	if (status || v != i + 1 || i >= c->issued) {
		if (c->resp_bad++ < 5)
			fprintf(stderr,
				"rail_peer: request %" PRIu64
				": %s, value %" PRIu64 "\n",
				i, rdmamsg_strerror(status), v);
		return;
	}
	if (c->seen[i]++) {
		c->twice++;
		return;
	}
	c->answered++;
	if (c->resumed < c->failovers) {
		/* traffic flows again on the new path */
		c->resumed = c->failovers;
		printf("resumed %d at %llu\n", c->resumed, real_ns());
		fflush(stdout);
	}
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_disconnect = cli_disc,
	.on_writable = cli_writable,
};

/* grow_seen -- room for twice as many requests; 0 or -1 */
static int grow_seen(struct cli *c)
{
	unsigned char *p = realloc(c->seen, 2 * c->nseen);

	if (!p) {
		fprintf(stderr, "rail_peer: no memory for requests\n");
		return -1;
	}
	memset(p + c->nseen, 0, c->nseen);
	c->seen = p;
	c->nseen *= 2;
	return 0;
}

static int client(const char *addrs, long long count, long long inflight,
		  long long reqs, long long reconnect_ms, int cuts)
{
	struct rdmamsg_ep_attr *a = NULL;
	struct rdmamsg_path_stats ps;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	struct cli c;
	unsigned char *buf = malloc(MAXMSG);
	uint64_t sent = 0, n = (uint64_t)count, gate[MAXCUTS], ready[MAXCUTS];
	uint64_t due;
	int printed = 0, streaming = 0, draining = 0, k, rc;
	long long end;

	memset(&c, 0, sizeof(c));
	the_cli = &c;
	c.reqs = (uint64_t)reqs;
	c.nseen = (size_t)reqs + 1024;
	c.seen = calloc(c.nseen, 1);
	if (!buf || !c.seen)
		return 1;
	for (k = 0; k < cuts; k++) {
		gate[k] = n * (uint64_t)(k + 1) / (uint64_t)(cuts + 1);
		ready[k] = gate[k] - n / (4 * (uint64_t)(cuts + 1));
	}
	rc = rdmamsg_ctx_create(NULL, &ctx);
	if (rc) {
		fprintf(stderr, "rail_peer: no context: %s\n",
			rdmamsg_strerror(rc));
		return 1;
	}
	if (rdmamsg_ep_attr_new(&a) ||
	    rdmamsg_ep_attr_set_eager_size(a, EAGER) ||
	    rdmamsg_ep_attr_set_max_msg_size(a, MAXMSG) ||
	    rdmamsg_ep_attr_set_recv_depth(a, 64) ||
	    rdmamsg_ep_attr_set_send_backlog(a,
					     (unsigned int)inflight + 4096) ||
	    rdmamsg_ep_attr_set_connect_timeout(a, CONNECT_MS) ||
	    rdmamsg_ep_attr_set_linger(a, 1) ||
	    rdmamsg_ep_attr_set_close_timeout(a, 120000) ||
	    (apm ? rdmamsg_ep_attr_set_apm(a, RDMAMSG_APM_AUTO) ||
			     rdmamsg_ep_attr_set_peer_timeout(a, APM_PEER_MS)
		 : rdmamsg_ep_attr_set_failover(a, RDMAMSG_FAILOVER_REPLAY) ||
			     rdmamsg_ep_attr_set_reconnect(
				     a, (unsigned int)reconnect_ms, 1000)) ||
	    rdmamsg_ep_attr_set_ack_timeout(a, ack_exp) || dc_srq(ctx) ||
	    rdmamsg_ep_attr_set_srq(a, srq) ||
	    (dc && rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC)) ||
	    rdmamsg_ep_attr_set_path_cb(a, cli_path)) {
		fprintf(stderr, "rail_peer: bad endpoint attributes\n");
		return 1;
	}
	rc = rdmamsg_connect(ctx, addrs, a, &cli_cbs, &c, &ep);
	rdmamsg_ep_attr_delete(&a);
	if (rc) {
		fprintf(stderr, "rail_peer: connect %s: %s\n", addrs,
			rdmamsg_strerror(rc));
		return 1;
	}
	end = now_ms() + 120000;
	while (!c.connected && !term && now_ms() < end)
		wait_fd(ctx, 20);
	if (!c.connected || c.status)
		return 1;
	rdmamsg_ep_get_path_stats(ep, &ps);
	printf("connected apm %u\n", ps.apm);
	fflush(stdout);
	end = now_ms() + 1200000;
	while (!term && !c.ndisc && now_ms() < end &&
	       (sent < n || c.issued < c.reqs || outstanding(&c))) {
		uint64_t limit;
		int busy = 0, i;

		if (finish && sent < n) { /* the stream is what went */
			n = sent;
			c.reqs = c.issued;
		}
		limit = n;
		/* requests: REQS spread over the stream, at most inflight
		 * outstanding; as many as that from each "ready K" to the
		 * K-th failover, so that the cut finds them in flight */
		due = sent == n ? c.reqs : c.reqs * sent / n;
		while ((c.issued < due || printed > c.failovers) &&
		       outstanding(&c) < (uint64_t)inflight) {
			uint64_t v = faulty(req_fault, c.issued, c.reqs / 2),
				 id;

			if (c.issued == c.nseen && grow_seen(&c))
				goto out;
			rc = rdmamsg_request(ep, &v, 8, 0, cli_resp,
					     (void *)(uintptr_t)v, &id);
			if (rc == -EAGAIN)
				break;
			if (rc) {
				fprintf(stderr, "rail_peer: request: %s\n",
					rdmamsg_strerror(rc));
				goto out;
			}
			c.issued++;
			busy = 1;
		}
		/* messages, held at a cut's gate until its failover */
		for (k = 0; k < cuts; k++)
			if (c.failovers < k + 1 && gate[k] < limit)
				limit = gate[k];
		for (i = 0; i < 256 && sent < limit; i++) {
			uint64_t seq = faulty(msg_fault, sent, n / 2);
			size_t len = msg_size(seq);

			fill(seq, buf, len);
			rc = rdmamsg_send(ep, buf, len, NULL);
			if (rc == -EAGAIN)
				break;
			if (rc) {
				fprintf(stderr,
					"rail_peer: send %" PRIu64 ": %s\n",
					sent, rdmamsg_strerror(rc));
				goto out;
			}
			sent++;
			busy = 1;
		}
		if (!streaming && sent >= 1000) {
			streaming = 1;
			printf("streaming\n");
			fflush(stdout);
		}
		while (printed < cuts && sent >= ready[printed]) {
			printed++;
			printf("ready %d sent %" PRIu64 " at %llu\n", printed,
			       sent, real_ns());
			fflush(stdout);
		}
		/* all sent: the answers due within the drain time */
		if (!draining && sent == n && c.issued >= c.reqs) {
			draining = 1;
			if (now_ms() + drain_ms < end)
				end = now_ms() + drain_ms;
		}
		c.writable = 0;
		if (busy)
			rdmamsg_ctx_progress(ctx);
		else
			wait_fd(ctx, 2);
	}
out:
	rdmamsg_ep_get_path_stats(ep, &ps);
	if (draining && outstanding(&c))
		fprintf(stderr,
			"rail_peer: %" PRIu64 " requests never answered "
			"(%lld ms after the last)\n",
			outstanding(&c), drain_ms);
	if (c.ndisc) {
		printf("disconnected %s (%d)\n",
		       rdmamsg_strerror(c.disc_status), c.disc_status);
		fflush(stdout);
	}
	printf("client: sent %" PRIu64 " requests %" PRIu64 " answered %" PRIu64
	       " bad %" PRIu64 " twice %" PRIu64 " failovers %d path_downs "
	       "%" PRIu64 " attempts %" PRIu64 " migrations %" PRIu64
	       " mig_fails %" PRIu64 " apm %u\n",
	       sent, c.issued, c.answered, c.resp_bad, c.twice, c.failovers,
	       ps.path_downs, ps.attempts, ps.migrations, ps.mig_fails, ps.apm);
	fflush(stdout);
	rc = c.ndisc ? 3
		     : sent != n || c.issued < c.reqs ||
			       c.answered != c.issued || c.resp_bad || c.twice;
	rdmamsg_ep_close(ep, cli_closed);
	end = now_ms() + 120000;
	while (!c.closed && !term && now_ms() < end)
		wait_fd(ctx, 20);
	/* a response twice may come as late as the close */
	printf("client: closed %d twice %" PRIu64 " late %" PRIu64 "\n",
	       c.closed, c.twice, c.late);
	if (!rc && (!c.closed || c.twice || c.late))
		rc = 1;
	if (srq)
		srq_close(ctx);
	rdmamsg_ctx_destroy(&ctx);
	free(c.seen);
	free(buf);
	return rc;
}

/* log_fn -- the library's notices on stderr (with RAIL_PEER_APM=1) */
static void log_fn(int level, const char *func, const char *msg, void *arg)
{
	(void)arg;
	fprintf(stderr, "rail_peer: log %d %s: %s at %llu\n", level, func, msg,
		real_ns());
}

/* set_fault -- RAIL_PEER_FAULT: msg-skip, msg-dup, msg-swap, req-skip,
 * req-dup, req-swap (the client) or no-answer (the server); 0 or -1 */
static int set_fault(const char *f)
{
	static const char *const kinds[] = {"skip", "dup", "swap"};
	enum fault *which = NULL;
	unsigned int i;

	if (!strcmp(f, "no-answer")) {
		no_answer = 1;
		return 0;
	}
	if (!strncmp(f, "msg-", 4))
		which = &msg_fault;
	else if (!strncmp(f, "req-", 4))
		which = &req_fault;
	for (i = 0; which && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(f + 4, kinds[i])) {
			*which = (enum fault)(F_SKIP + i);
			return 0;
		}
	return -1;
}

static int usage(void)
{
	fprintf(stderr, "usage: rail_peer server PORT ADDR1 ADDR2 COUNT\n"
			"       rail_peer client ADDRS COUNT INFLIGHT REQS "
			"RECONNECT_MS [CUTS]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	apm = getenv("RAIL_PEER_APM") && !strcmp(getenv("RAIL_PEER_APM"), "1");
	dc = getenv("RAIL_PEER_DC") && !strcmp(getenv("RAIL_PEER_DC"), "1");
	if (getenv("RAIL_PEER_DRAIN_MS")) {
		drain_ms = number(getenv("RAIL_PEER_DRAIN_MS"));
		if (drain_ms <= 0)
			return usage();
	}
	if (getenv("RAIL_PEER_FAULT") && *getenv("RAIL_PEER_FAULT") &&
	    set_fault(getenv("RAIL_PEER_FAULT")))
		return usage();
	if (getenv("RAIL_PEER_ACK_TIMEOUT")) {
		long long e = number(getenv("RAIL_PEER_ACK_TIMEOUT"));

		if (e < 0 || e > 31)
			return usage();
		ack_exp = (unsigned int)e;
	}
	if (apm || getenv("RAIL_PEER_LOG")) {
		rdmamsg_log_set_function(log_fn, NULL);
		rdmamsg_log_set_level(getenv("RAIL_PEER_LOG")
					      ? atoi(getenv("RAIL_PEER_LOG"))
					      : RDMAMSG_LOG_NOTICE);
	}
	if (argc == 6 && !strcmp(argv[1], "server")) {
		long long count = number(argv[5]);

		if (number(argv[2]) <= 0 || count < 0)
			return usage();
		return server(argv[2], argv[3], argv[4], count);
	}
	if ((argc == 7 || argc == 8) && !strcmp(argv[1], "client")) {
		long long count = number(argv[3]), inflight = number(argv[4]),
			  reqs = number(argv[5]), rms = number(argv[6]);
		long long cuts = argc == 8 ? number(argv[7]) : 2;

		if (count <= 0 || count > 10000000000LL || inflight <= 0 ||
		    inflight > 1000000 || reqs < 0 || reqs > 100000000 ||
		    rms <= 0 || rms > 3600000 || cuts < 0 || cuts > MAXCUTS)
			return usage();
		return client(argv[2], count, inflight, reqs, rms, (int)cuts);
	}
	return usage();
}
