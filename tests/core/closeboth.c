/* SPDX-License-Identifier: MIT */
/*
 * closeboth.c -- two endpoints close at the same time while messages go
 * by rendezvous both ways.  A close waits for the rendezvous its peer was
 * told of, and a closing endpoint refuses the announcements it receives:
 * neither waits for the other, so both closes end long before the close
 * timeout.  Every accepted send completes once (0, -ECANCELED or
 * -ECONNRESET); a message is delivered at most once, in order, and only if
 * its sender was told 0.  A send refused with -EAGAIN (the copies ahead
 * of the reader, RDMAMSG_COPY_AHEAD, or the pool) is sent again at
 * on_writable, as a caller must, until the close: what was not accepted
 * by then is not sent, and the checks count the accepted ones.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"

#define NMSG	 200
#define SIZE	 40000 /* above RDMAMSG_RNDV_THRESH_DEFAULT */
#define CLOSE_MS 60000

struct side {
	struct test_side t;
	uint8_t st[NMSG]; /* 1 ok, 2 cancelled, 3 reset, 4 other */
	uint64_t completions, twice, next, bad, late;
	uint64_t nsent, eagain; /* sends accepted; refused with -EAGAIN */
	uint32_t seen[NMSG];	/* delivered here, by the peer's number */
	int closing, all_sent, send_err;
};

static struct side a, b;

static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	struct side *s = arg;
	uint64_t n;

	(void)imm;
	(void)flags;
	if (s->t.ep == NULL)
		s->t.ep = ep;
	if (s->closing)
		s->late++; /* no on_recv after rdmamsg_ep_close() */
	if (len != SIZE) {
		s->bad++;
		return;
	}
	memcpy(&n, data, sizeof(n));
	if (n >= NMSG || n != s->next)
		s->bad++;
	else
		s->seen[n]++;
	s->next = n + 1;
}

static void on_send_cb(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct side *s = arg;
	uintptr_t i = (uintptr_t)op;

	(void)ep;
	if (i >= NMSG)
		return;
	if (s->st[i])
		s->twice++;
	s->st[i] = status == 0		   ? 1
		   : status == -ECANCELED  ? 2
		   : status == -ECONNRESET ? 3
					   : 4;
	s->completions++;
}

static void send_more(struct side *s);

/* on_writable_cb -- room again after -EAGAIN: the rest of the messages */
static void on_writable_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	send_more(arg);
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_send = on_send_cb,
	.on_writable = on_writable_cb,
	.on_disconnect = test_side_on_disconnect,
};

static struct rdmamsg_ep_attr *attr;

static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	struct side *s = arg;

	(void)l;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, attr, &cbs, s, &s->t.ep))
		s->bad++;
}

/* send_more -- the next of NMSG numbered messages (most wait in the
 * backlog) until all are accepted, an error, or -EAGAIN (on_writable
 * follows) */
static void send_more(struct side *s)
{
	static char m[SIZE];
	uint64_t i;
	int rc;

	while (!s->all_sent && !s->send_err && !s->closing) {
		i = s->nsent;
		memset(m, (int)i, sizeof(m));
		memcpy(m, &i, sizeof(i));
		rc = rdmamsg_send(s->t.ep, m, sizeof(m), (void *)(uintptr_t)i);
		if (rc == -EAGAIN) {
			s->eagain++;
			return;
		}
		if (rc) {
			s->send_err = rc;
			return;
		}
		s->all_sent = ++s->nsent == NMSG;
	}
}

/* check -- what sender s was told against what receiver r got */
static void check(const char *name, const struct side *s, const struct side *r)
{
	uint64_t ok_ = 0, gone = 0, wrong = 0, i;

	for (i = 0; i < NMSG; i++) {
		if (i >= s->nsent && s->st[i])
			wrong++; /* completed, never accepted */
		if (s->st[i] == 1)
			ok_++;
		else if (s->st[i] == 2 || s->st[i] == 3)
			gone++;
		if (r->seen[i] > 1 || (r->seen[i] && s->st[i] != 1))
			wrong++;
	}
	ok(s->completions == s->nsent && !s->twice && ok_ + gone == s->nsent,
	   "%s: every accepted send completed once with 0, -ECANCELED or "
	   "-ECONNRESET (%llu ok, %llu not, of %llu)",
	   name, (unsigned long long)ok_, (unsigned long long)gone,
	   (unsigned long long)s->nsent);
	ok(!wrong && !r->bad && !r->late,
	   "%s: delivered at most once, in order, before the close, and only "
	   "when reported sent (%llu wrong, %llu bad, %llu late)",
	   name, (unsigned long long)wrong, (unsigned long long)r->bad,
	   (unsigned long long)r->late);
}

int main(void)
{
	struct rdmamsg_listener *lst;
	uint16_t port;
	char addr[64];
	long long t0, ms;
	int i;

	test_setup("closeboth");
	a.t.ctx = test_ctx();
	is_int(rdmamsg_ctx_create(NULL, &b.t.ctx), 0, "second context");
	is_int(rdmamsg_ep_attr_new(&attr), 0, "attributes");
	is_int(rdmamsg_ep_attr_set_close_timeout(attr, CLOSE_MS), 0,
	       "close timeout 60 s");
	is_int(rdmamsg_listen(a.t.ctx, "127.0.0.1:0", on_req, &a, &lst), 0,
	       "listen");
	rdmamsg_listener_get_port(lst, &port);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	is_int(rdmamsg_connect(b.t.ctx, addr, attr, &cbs, &b, &b.t.ep), 0,
	       "connect");
	test_run2(&a.t, &b.t, &b.t.up, 30000);
	is_int(b.t.status, 0, "connected");
	test_run2(&a.t, &b.t, &a.t.up, 30000);
	ok(a.t.up && a.t.ep, "accepted");

	send_more(&a);
	send_more(&b);
	ok(!a.send_err && !b.send_err && (a.all_sent || a.eagain) &&
		   (b.all_sent || b.eagain),
	   "both sides send %d messages of %d B, or up to -EAGAIN (errors %d, "
	   "%d)",
	   NMSG, SIZE, a.send_err, b.send_err);
	/* a few passes: announcements and reads in flight both ways */
	for (i = 0; i < 3; i++) {
		rdmamsg_ctx_progress(a.t.ctx);
		rdmamsg_ctx_progress(b.t.ctx);
	}
	a.closing = b.closing = 1;
	ok(a.completions < a.nsent && b.completions < b.nsent,
	   "at the close, sends in flight both ways (a %llu of %llu accepted, "
	   "b %llu of %llu; -EAGAIN %llu and %llu times, sent again at "
	   "on_writable)",
	   (unsigned long long)(a.nsent - a.completions),
	   (unsigned long long)a.nsent,
	   (unsigned long long)(b.nsent - b.completions),
	   (unsigned long long)b.nsent, (unsigned long long)a.eagain,
	   (unsigned long long)b.eagain);
	t0 = test_now_ms();
	is_int(rdmamsg_ep_close(a.t.ep, test_side_on_close), 0, "a closes");
	is_int(rdmamsg_ep_close(b.t.ep, test_side_on_close), 0,
	       "b closes in the same pass");
	test_run2(&a.t, &b.t, &a.t.closed, CLOSE_MS + 10000);
	test_run2(&a.t, &b.t, &b.t.closed, CLOSE_MS + 10000);
	ms = test_now_ms() - t0;
	ok(a.t.closed && b.t.closed, "both closed");
	ok(ms < CLOSE_MS / 2,
	   "neither waited for the other: %lld ms, the close timeout is %d", ms,
	   CLOSE_MS);
	check("a to b", &a, &b);
	check("b to a", &b, &a);

	rdmamsg_ep_attr_delete(&attr);
	rdmamsg_listener_close(lst, NULL);
	test_idle(a.t.ctx, 50);
	is_int(rdmamsg_ctx_destroy(&b.t.ctx), 0, "second context destroyed");
	is_int(rdmamsg_ctx_destroy(&a.t.ctx), 0, "first context destroyed");
	return done_testing();
}
