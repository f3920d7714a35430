/* SPDX-License-Identifier: MIT */
/*
 * failover.c -- path failover at connect (rdmamsg.h, issue 15): an
 * address list whose first path has nobody listening connects on the
 * second, with the path events in order and the counters; messages then
 * arrive once and in order; every path failing reports each path and
 * FAILOVER_FAILED before on_connect; a refusal by the peer is no path
 * fault (no failover); a close from a path callback ends it cleanly; and
 * the bad inputs (lists, policies, an accept with a policy) change
 * nothing.  One process: the listener and the client share a context.
 */
#include "config.h"

#include "../tap.h"
#include "util.h"

#define NMSG 1000

struct srv {
	struct rdmamsg_ep *ep;
	uint64_t next, bad, n;
	int accept_bad, closed;
	int ignore; /* leave requests unanswered (a path that hangs) */
	int nheld;
};

/* srv_recv -- check the sequence in the first 8 bytes */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv *s = arg;
	uint64_t seq = UINT64_MAX;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len == sizeof(seq))
		memcpy(&seq, data, sizeof(seq));
	if (seq != s->next)
		s->bad++;
	s->next = seq + 1;
	s->n++;
}

/* srv_close_cb -- the accepted endpoint is gone */
static void srv_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct srv *)arg)->closed = 1;
}

/* srv_disc -- the client left: close our side */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	rdmamsg_ep_close(ep, srv_close_cb);
	((struct srv *)arg)->ep = NULL;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

/* srv_req -- "reject": refuse with reason 42; otherwise accept, after
 * checking that an accept with a failover policy is refused and leaves
 * the request pending */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep_attr *attr;

	(void)lst;
	if (s->ignore) {
		s->nheld++; /* the listener's close rejects it */
		return;
	}
	if (len == 6 && !memcmp(pdata, "reject", 6)) {
		rdmamsg_conn_req_reject(req, 42, NULL, 0);
		return;
	}
	rdmamsg_ep_attr_new(&attr);
	rdmamsg_ep_attr_set_failover(attr, RDMAMSG_FAILOVER_RECONNECT);
	if (rdmamsg_conn_req_accept(req, attr, &srv_cbs, s, &s->ep) != -EINVAL)
		s->accept_bad++;
	/* nor the replay policy: the accepting side follows its connector */
	rdmamsg_ep_attr_set_failover(attr, RDMAMSG_FAILOVER_REPLAY);
	if (rdmamsg_conn_req_accept(req, attr, &srv_cbs, s, &s->ep) != -EINVAL)
		s->accept_bad++;
	rdmamsg_ep_attr_set_failover(attr, RDMAMSG_FAILOVER_OFF);
	s->next = s->n = 0;
	if (rdmamsg_conn_req_accept(req, attr, &srv_cbs, s, &s->ep))
		s->accept_bad++;
	rdmamsg_ep_attr_delete(&attr);
}

#define MAX_EV 16

struct cli {
	int connected, status, reason, closed, nev, close_on;
	int ev[MAX_EV], path[MAX_EV], evst[MAX_EV];
};

/* cli_connect -- the outcome */
static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)pdata;
	(void)len;
	c->status = status;
	c->reason = reason;
	c->connected = 1;
}

/* cli_close_cb -- our endpoint is gone */
static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->closed = 1;
}

/* cli_path -- record each path event; close on close_on if asked */
static void cli_path(struct rdmamsg_ep *ep, enum rdmamsg_path_event event,
		     unsigned int path, int status, void *arg)
{
	struct cli *c = arg;

	if (c->nev < MAX_EV) {
		c->ev[c->nev] = (int)event;
		c->path[c->nev] = (int)path;
		c->evst[c->nev] = status;
	}
	c->nev++;
	if (c->close_on && (int)event == c->close_on)
		rdmamsg_ep_close(ep, cli_close_cb);
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
};

/* dead_port -- a port nobody listens on, held until *fd is closed (no
 * test running beside this one can listen there) */
static unsigned int dead_port(int *fd)
{
	uint16_t port = test_hold_port(0, fd);

	if (!port)
		bail_out("a port to hold");
	return port;
}

/* fo_attr -- attributes with the reconnect policy and the path callback */
static struct rdmamsg_ep_attr *fo_attr(const char *pdata)
{
	struct rdmamsg_ep_attr *a;

	if (rdmamsg_ep_attr_new(&a))
		bail_out("attr");
	rdmamsg_ep_attr_set_failover(a, RDMAMSG_FAILOVER_RECONNECT);
	rdmamsg_ep_attr_set_path_cb(a, cli_path);
	rdmamsg_ep_attr_set_connect_timeout(a, 20000);
	if (pdata)
		rdmamsg_ep_attr_set_private_data(a, pdata, strlen(pdata));
	return a;
}

/* close_wait -- close ep and run until its close callback */
static void close_wait(struct rdmamsg_ctx *ctx, struct rdmamsg_ep *ep,
		       struct cli *c)
{
	c->closed = 0;
	is_int(rdmamsg_ep_close(ep, cli_close_cb), 0, "close");
	ok(test_run_until(ctx, &c->closed, 60000), "closed");
}

/* stream -- send NMSG numbered messages on ep and wait until s got
 * each once, in order */
static void stream(struct rdmamsg_ctx *ctx, struct rdmamsg_ep *ep,
		   struct srv *s)
{
	long long end;
	uint64_t i;
	int ret, sent = 0;

	s->n = s->next = s->bad = 0;
	for (i = 0; i < NMSG;) {
		ret = rdmamsg_send(ep, &i, sizeof(i), NULL);
		if (ret == -EAGAIN) {
			rdmamsg_ctx_progress(ctx);
			continue;
		}
		if (ret)
			break;
		i++;
		sent++;
	}
	is_int(sent, NMSG, "messages sent");
	end = test_now_ms() + 30000;
	while (s->n < (uint64_t)sent && test_now_ms() < end)
		test_idle(ctx, 5);
	is_int(s->n, NMSG, "each message arrived");
	is_int(s->bad, 0, "once and in order");
}

/* wait_srv_closed -- run until the server side's endpoint closed */
static void wait_srv_closed(struct rdmamsg_ctx *ctx, struct srv *s)
{
	long long end = test_now_ms() + 20000;

	while (!s->closed && test_now_ms() < end)
		test_idle(ctx, 5);
	ok(s->closed, "the server side closed");
	s->closed = 0;
}

/* bad_input -- refused lists and attributes make nothing */
static void bad_input(struct rdmamsg_ctx *ctx, unsigned int d1, unsigned int d2)
{
	struct rdmamsg_ep_attr *a = fo_attr(NULL), *off;
	struct rdmamsg_path_stats ps;
	struct rdmamsg_ep *ep = NULL;
	struct cli c;
	char addr[512];
	size_t n = 0;
	int i;

	memset(&c, 0, sizeof(c));
	is_int(rdmamsg_ep_attr_set_failover(NULL, RDMAMSG_FAILOVER_OFF),
	       -EINVAL, "set_failover(NULL)");
	is_int(rdmamsg_ep_attr_set_failover(a, (enum rdmamsg_failover)7),
	       -EINVAL, "set_failover(7)");
	is_int(rdmamsg_ep_attr_set_failover(a, (enum rdmamsg_failover) - 1),
	       -EINVAL, "set_failover(-1)");
	is_int(rdmamsg_ep_attr_set_path_cb(NULL, cli_path), -EINVAL,
	       "set_path_cb(NULL)");
	is_int(rdmamsg_ep_get_path_stats(NULL, &ps), -EINVAL,
	       "get_path_stats(NULL)");

	rdmamsg_ep_attr_new(&off);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u,127.0.0.1:%u", d1, d2);
	is_int(rdmamsg_connect(ctx, addr, off, &cli_cbs, &c, &ep), -EINVAL,
	       "a list without the reconnect policy");
	is_int(rdmamsg_connect(ctx, addr, NULL, &cli_cbs, &c, &ep), -EINVAL,
	       "a list with default attributes");
	rdmamsg_ep_attr_delete(&off);

	{
		/* before, between and after two good entries */
		static const char *const bad[][3] = {
			{"", ",,", ""},
			{"", ",", ","},
			{",", ",", ""},
			{"", ",", ",127.0.0.1"},
			{"", ",", ",127.0.0.1:0"},
			{"", ",", ",127.0.0.1:99999"},
			{"", ",", ",[::1:1"},
			{"", ";", ""},
			{"", ", ", ""},
			{"", ",", ",127.0.0.1: 1"},
			{"", ",", ",127.0.0.1:+1"},
			{"", ",", ",127.0.0.1:1x"},
			{"", ",", ",[127.0.0.1]:1"},
		};

		for (i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
			snprintf(addr, sizeof(addr),
				 "%s127.0.0.1:%u%s127.0.0.1:%u%s", bad[i][0],
				 d1, bad[i][1], d2, bad[i][2]);
			is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep),
			       -EINVAL, addr);
		}
	}
	/* an entry too long for any address, between two good ones */
	snprintf(addr, sizeof(addr), "127.0.0.1:%u,%0300u,127.0.0.1:%u", d1, 1u,
		 d2);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), -EINVAL,
	       "an entry of 300 characters");
	/* RDMAMSG_MAX_PATHS entries are taken, one more is not */
	for (i = 0; i <= RDMAMSG_MAX_PATHS; i++)
		n += (size_t)snprintf(addr + n, sizeof(addr) - n,
				      "%s127.0.0.1:%u", i ? "," : "", d1);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), -EINVAL,
	       "RDMAMSG_MAX_PATHS + 1 paths");
	ok(ep == NULL, "nothing made");
	*strrchr(addr, ',') = '\0';
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), 0,
	       "RDMAMSG_MAX_PATHS paths");
	if (ep) {
		is_int(rdmamsg_ep_get_path_stats(ep, &ps), 0, "get_path_stats");
		is_int(ps.npaths, RDMAMSG_MAX_PATHS, "npaths");
		is_int(ps.path, 0, "on the first path");
		close_wait(ctx, ep, &c);
		ok(!c.connected, "closed before any outcome: no on_connect");
	}
	rdmamsg_ep_attr_delete(&a);
}

int main(void)
{
	struct rdmamsg_listener *lst, *hlst;
	struct rdmamsg_path_stats ps;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	unsigned int d1, d2;
	int h1, h2;
	uint16_t port = 0, hport = 0;
	struct srv s, hang;
	struct cli c;
	char addr[256];

	test_setup("failover");
	ctx = test_ctx();
	memset(&s, 0, sizeof(s));
	d1 = dead_port(&h1);
	d2 = dead_port(&h2);
	if (rdmamsg_listen(ctx, "127.0.0.1:0", srv_req, &s, &lst) ||
	    rdmamsg_listener_get_port(lst, &port))
		bail_out("listen");
	memset(&hang, 0, sizeof(hang));
	hang.ignore = 1;
	if (rdmamsg_listen(ctx, "127.0.0.1:0", srv_req, &hang, &hlst) ||
	    rdmamsg_listener_get_port(hlst, &hport))
		bail_out("listen");

	bad_input(ctx, d1, d2);

	/* the first path has nobody listening: the second one connects */
	memset(&c, 0, sizeof(c));
	a = fo_attr(NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u,127.0.0.1:%u", d1, port);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), 0,
	       "connect over two paths");
	ok(test_run_until(ctx, &c.connected, 60000), "on_connect came");
	is_int(c.status, 0, "connected");
	is_int(s.accept_bad, 0, "accept with a policy -EINVAL, then accepted");
	is_int(c.nev, 3, "three path events");
	is_int(c.ev[0], RDMAMSG_PATH_DOWN, "PATH_DOWN");
	is_int(c.path[0], 0, "of path 0");
	is_int(c.evst[0], -ECONNREFUSED, "nobody listens: -ECONNREFUSED");
	is_int(c.ev[1], RDMAMSG_FAILOVER_START, "FAILOVER_START");
	is_int(c.path[1], 1, "to path 1");
	is_int(c.ev[2], RDMAMSG_FAILOVER_DONE, "FAILOVER_DONE");
	is_int(c.path[2], 1, "on path 1");
	rdmamsg_ep_get_path_stats(ep, &ps);
	is_int(ps.npaths, 2, "stats: npaths");
	is_int(ps.path, 1, "stats: path");
	is_int(ps.path_downs, 1, "stats: path_downs");
	is_int(ps.failovers, 1, "stats: failovers");
	is_int(ps.failover_fails, 0, "stats: failover_fails");
	ok(ps.last_failover_ns > 0, "stats: failover time %llu ns",
	   (unsigned long long)ps.last_failover_ns);
	stream(ctx, ep, &s);
	close_wait(ctx, ep, &c);
	rdmamsg_ep_attr_delete(&a);
	wait_srv_closed(ctx, &s);

	/* the first path answers nothing: its attempt times out (its lane,
	 * receives posted, goes), the second path connects and carries the
	 * stream */
	memset(&c, 0, sizeof(c));
	a = fo_attr(NULL);
	rdmamsg_ep_attr_set_connect_timeout(a, 5000);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u,127.0.0.1:%u", hport, port);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), 0,
	       "connect, the first path hangs");
	ok(test_run_until(ctx, &c.connected, 60000), "on_connect came");
	is_int(c.status, 0, "connected");
	ok(hang.nheld >= 1, "the first path got the request");
	is_int(c.nev, 3, "three path events");
	is_int(c.ev[0], RDMAMSG_PATH_DOWN, "PATH_DOWN");
	is_int(c.evst[0], -ETIMEDOUT, "timed out");
	is_int(c.ev[2], RDMAMSG_FAILOVER_DONE, "FAILOVER_DONE");
	is_int(c.path[2], 1, "on path 1");
	stream(ctx, ep, &s);
	close_wait(ctx, ep, &c);
	rdmamsg_ep_attr_delete(&a);
	wait_srv_closed(ctx, &s);

	/* a first path to an address of no RDMA device (TEST-NET-1) */
	memset(&c, 0, sizeof(c));
	a = fo_attr(NULL);
	snprintf(addr, sizeof(addr), "192.0.2.1:%u,127.0.0.1:%u", port, port);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), 0,
	       "connect, first path on no device");
	ok(test_run_until(ctx, &c.connected, 60000), "on_connect came");
	is_int(c.status, 0, "connected");
	rdmamsg_ep_get_path_stats(ep, &ps);
	is_int(ps.path, 1, "on path 1");
	is_int(ps.path_downs, 1, "stats: path_downs");
	is_int(ps.failovers, 1, "stats: failovers");
	/* reported from the loop, or skipped inside the call (no event) */
	ok((c.nev == 3 && c.ev[0] == RDMAMSG_PATH_DOWN &&
	    (c.evst[0] == -ECONNREFUSED || c.evst[0] == -EHOSTUNREACH ||
	     c.evst[0] == -ETIMEDOUT)) ||
		   c.nev == 1,
	   "PATH_DOWN for a path's fault (%d events, status %d)", c.nev,
	   c.evst[0]);
	ok(c.nev >= 1 && c.nev <= MAX_EV &&
		   c.ev[c.nev - 1] == RDMAMSG_FAILOVER_DONE &&
		   c.path[c.nev - 1] == 1,
	   "FAILOVER_DONE on path 1");
	close_wait(ctx, ep, &c);
	rdmamsg_ep_attr_delete(&a);
	wait_srv_closed(ctx, &s);

	/* every path fails: each is reported, then FAILOVER_FAILED, then
	 * on_connect with the last path's status */
	memset(&c, 0, sizeof(c));
	a = fo_attr(NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u,127.0.0.1:%u", d1, d2);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), 0,
	       "connect over two dead paths");
	ok(test_run_until(ctx, &c.connected, 60000), "on_connect came");
	is_int(c.status, -ECONNREFUSED, "-ECONNREFUSED");
	is_int(c.reason, RDMAMSG_REJECT_NO_LISTENER, "reason NO_LISTENER");
	is_int(c.nev, 4, "four path events");
	is_int(c.ev[0], RDMAMSG_PATH_DOWN, "PATH_DOWN 0");
	is_int(c.ev[1], RDMAMSG_FAILOVER_START, "FAILOVER_START 1");
	is_int(c.ev[2], RDMAMSG_PATH_DOWN, "PATH_DOWN 1");
	is_int(c.path[2], 1, "of path 1");
	is_int(c.ev[3], RDMAMSG_FAILOVER_FAILED, "FAILOVER_FAILED");
	is_int(c.evst[3], -ECONNREFUSED, "with the last status");
	rdmamsg_ep_get_path_stats(ep, &ps);
	is_int(ps.path_downs, 2, "stats: path_downs");
	is_int(ps.failovers, 0, "stats: failovers");
	is_int(ps.failover_fails, 1, "stats: failover_fails");
	close_wait(ctx, ep, &c);
	rdmamsg_ep_attr_delete(&a);

	/* the peer's refusal is not the path's fault: no failover */
	memset(&c, 0, sizeof(c));
	a = fo_attr("reject");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u,127.0.0.1:%u", port, port);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), 0,
	       "connect to a peer that refuses");
	ok(test_run_until(ctx, &c.connected, 60000), "on_connect came");
	is_int(c.status, -ECONNREFUSED, "-ECONNREFUSED");
	is_int(c.reason, 42, "the application's reason");
	is_int(c.nev, 0, "no path event");
	rdmamsg_ep_get_path_stats(ep, &ps);
	is_int(ps.path, 0, "still path 0");
	close_wait(ctx, ep, &c);
	rdmamsg_ep_attr_delete(&a);

	/* a close from the path callback ends the attempt: no on_connect */
	memset(&c, 0, sizeof(c));
	c.close_on = RDMAMSG_PATH_DOWN;
	a = fo_attr(NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u,127.0.0.1:%u", d1, port);
	is_int(rdmamsg_connect(ctx, addr, a, &cli_cbs, &c, &ep), 0,
	       "connect, closed on PATH_DOWN");
	ok(test_run_until(ctx, &c.closed, 60000), "closed from the callback");
	is_int(c.nev, 1, "only PATH_DOWN");
	ok(!c.connected, "no on_connect");
	rdmamsg_ep_attr_delete(&a);

	rdmamsg_listener_close(lst, NULL);
	rdmamsg_listener_close(hlst, NULL);
	test_idle(ctx, 50);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	close(h1);
	close(h2);
	return done_testing();
}
