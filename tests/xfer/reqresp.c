/* SPDX-License-Identifier: MIT */
/*
 * reqresp.c -- request/response between processes: 100,000 round trips
 * (5,000 under valgrind) with 256 outstanding and every response matched
 * to its request; responses and requests larger than the eager size
 * (fragmented, and by rendezvous); timeouts of a server that never
 * answers; cancellation; late responses dropped and counted; requests
 * outstanding at close cancelled; bad input.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"

enum { OP_ECHO = 1, OP_BIG, OP_IGNORE, OP_HOLD, OP_FLUSH, OP_SUM };

struct rq {
	uint64_t op, seq, arg;
};

#define WINDOW	 256
#define MID_SIZE ((size_t)24 << 10) /* > eager (8 KiB): fragmented */
#define BIG_SIZE ((size_t)4 << 20)  /* > max message (1 MiB): rendezvous */

/* pat -- the byte at i of a response of seed s */
static char pat(size_t i, uint64_t s)
{
	return (char)((i * 131) ^ (i >> 8) ^ s);
}

/* ---- server (child) ------------------------------------------------ */

static struct rdmamsg_req *held[64];
static int nheld, srv_failures, srv_done, srv_lclosed;

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	srv_done = 1;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, srv_closed);
}

static void srv_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
			void *data, size_t len, void *arg)
{
	struct rq q;
	char *buf;
	size_t i, n;
	uint64_t h = 0;
	int j;

	(void)ep;
	(void)arg;
	if (len < sizeof(q)) {
		srv_failures++;
		rdmamsg_req_drop(req);
		return;
	}
	memcpy(&q, data, sizeof(q));
	switch (q.op) {
	case OP_ECHO:
		if (rdmamsg_respond(req, data, len))
			srv_failures++;
		break;
	case OP_BIG:
		n = (size_t)q.arg;
		buf = malloc(n);
		for (i = 0; i < n; i++)
			buf[i] = pat(i, q.seq);
		if (rdmamsg_respond(req, buf, n))
			srv_failures++;
		free(buf);
		break;
	case OP_IGNORE:
		rdmamsg_req_drop(req);
		break;
	case OP_HOLD:
		if (nheld < 64)
			held[nheld++] = req;
		else
			rdmamsg_req_drop(req);
		break;
	case OP_FLUSH:
		for (j = 0; j < nheld; j++)
			if (rdmamsg_respond(held[j], "late", 4))
				srv_failures++;
		nheld = 0;
		if (rdmamsg_respond(req, "flushed", 7))
			srv_failures++;
		break;
	case OP_SUM:
		for (i = 0; i < len; i++)
			h = h * 31 + (unsigned char)((char *)data)[i];
		if (rdmamsg_respond(req, &h, sizeof(h)))
			srv_failures++;
		break;
	default:
		srv_failures++;
		rdmamsg_req_drop(req);
	}
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_disconnect = srv_disc,
};

static struct rdmamsg_ep_attr *srv_attr;

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (rdmamsg_conn_req_accept(req, srv_attr, &srv_cbs, NULL, &ep))
		srv_failures++;
}

static void lst_closed(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	(void)arg;
	srv_lclosed = 1;
}

static int server(int wfd, void *arg)
{
	struct rdmamsg_listener *lst;
	struct rdmamsg_ctx *sctx;

	(void)arg;
	if (rdmamsg_ctx_create(NULL, &sctx))
		return 10;
	rdmamsg_ep_attr_new(&srv_attr);
	rdmamsg_ep_attr_set_on_request(srv_attr, srv_request);
	if (test_listen_report(sctx, srv_req, NULL, &lst, wfd))
		return 11;
	test_run_until(sctx, &srv_done, 300000);
	if (!srv_done)
		return 12;
	rdmamsg_listener_close(lst, lst_closed);
	test_run_until(sctx, &srv_lclosed, 60000);
	rdmamsg_ep_attr_delete(&srv_attr);
	if (rdmamsg_ctx_destroy(&sctx))
		return 13;
	return srv_failures ? 14 : 0;
}

/* ---- client -------------------------------------------------------- */

static struct rdmamsg_ctx *ctx;
static struct rdmamsg_ep *ep;
static int connected, cstatus, closed;
static uint64_t nrt, issued, answered, mismatched, failed_rt;
static int flag;

static void run(int ms)
{
	flag = 0;
	test_run_until(ctx, &flag, ms);
}

static void echo_cb(struct rdmamsg_ep *e, int status, void *data, size_t len,
		    void *req_arg);

/* echo_more -- keep WINDOW echo requests outstanding */
static void echo_more(void)
{
	char msg[sizeof(struct rq) + 32];
	struct rq q;
	uint64_t id;

	memset(msg, 0x5a, sizeof(msg));
	while (issued < nrt && issued - answered < WINDOW) {
		q.op = OP_ECHO;
		q.seq = issued;
		q.arg = issued * 0x9E3779B97F4A7C15ull;
		memcpy(msg, &q, sizeof(q));
		if (rdmamsg_request(ep, msg, sizeof(q) + issued % 32, 10000,
				    echo_cb, (void *)(uintptr_t)issued, &id))
			return;
		issued++;
	}
}

static void echo_cb(struct rdmamsg_ep *e, int status, void *data, size_t len,
		    void *req_arg)
{
	uint64_t seq = (uint64_t)(uintptr_t)req_arg;
	struct rq q;

	(void)e;
	answered++;
	if (status) {
		failed_rt++;
		return;
	}
	if (len != sizeof(q) + seq % 32) {
		mismatched++;
		return;
	}
	memcpy(&q, data, sizeof(q));
	if (q.seq != seq || q.arg != seq * 0x9E3779B97F4A7C15ull)
		mismatched++;
	echo_more();
}

/* generic completion record */
struct done {
	int calls, status;
	size_t len;
	int content_ok;
	uint64_t seed;
	long long at;
	uint64_t value;
};

static void rec_cb(struct rdmamsg_ep *e, int status, void *data, size_t len,
		   void *req_arg)
{
	struct done *d = req_arg;
	size_t i;

	(void)e;
	d->calls++;
	d->status = status;
	d->len = len;
	d->at = test_now_ms();
	d->content_ok = 1;
	if (!status && d->seed)
		for (i = 0; i < len; i++)
			if (((char *)data)[i] != pat(i, d->seed))
				d->content_ok = 0;
	if (!status && len == 8)
		memcpy(&d->value, data, 8);
}

static void cli_connect(struct rdmamsg_ep *e, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	(void)e;
	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	connected = 1;
	cstatus = status;
}

static void cli_closed(struct rdmamsg_ep *e, void *arg)
{
	(void)e;
	(void)arg;
	closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
};

/* all_called -- every record in d[0..n) has been called */
static int all_called(const struct done *d, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!d[i].calls)
			return 0;
	return 1;
}

#define WAIT(cond, ms)                                  \
	do {                                            \
		long long end_ = test_now_ms() + (ms);  \
		while (!(cond) && test_now_ms() < end_) \
			run(20);                        \
	} while (0)

int main(void)
{
	static struct done big[12], ign[20], hold[10], tmo[5], fin[5], fl, sum;
	struct rq q;
	char addr[64];
	uint64_t id, ids[10], late = 0;
	long long t0, t1;
	int rfd, i, n, ok_all;
	char *buf;
	uint64_t h = 0;
	pid_t pid;

	test_setup("reqresp");
	nrt = tap_small() ? 5000 : 100000;
	ctx = test_ctx();
	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));
	is_int(rdmamsg_connect(ctx, addr, NULL, &cli_cbs, NULL, &ep), 0,
	       "connect");
	WAIT(connected, 10000);
	is_int(cstatus, 0, "connected");

	/* bad input */
	q.op = OP_ECHO;
	is_int(rdmamsg_request(NULL, &q, sizeof(q), 0, rec_cb, NULL, &id),
	       -EINVAL, "request(NULL ep): -EINVAL");
	is_int(rdmamsg_request(ep, &q, sizeof(q), 0, NULL, NULL, &id), -EINVAL,
	       "request without callback: -EINVAL");
	is_int(rdmamsg_request(ep, NULL, 8, 0, rec_cb, NULL, &id), -EINVAL,
	       "request(NULL data, 8 bytes): -EINVAL");
	is_int(rdmamsg_request(ep, &q, sizeof(q), 0, rec_cb, NULL, NULL),
	       -EINVAL, "request without id: -EINVAL");
	is_int(rdmamsg_request(ep, &q, ((size_t)1 << 30) + 1, 0, rec_cb, NULL,
			       &id),
	       -EMSGSIZE, "request above the large maximum: -EMSGSIZE");
	is_int(rdmamsg_respond(NULL, "x", 1), -EINVAL,
	       "respond(NULL): -EINVAL");
	is_int(rdmamsg_req_drop(NULL), -EINVAL, "req_drop(NULL): -EINVAL");
	is_int(rdmamsg_request_cancel(ep, 12345), -ENOENT,
	       "cancel of an unknown id: -ENOENT");

	/* round trips under concurrency */
	t0 = test_now_ms();
	echo_more();
	WAIT(answered == nrt, 240000);
	t1 = test_now_ms();
	is_int(answered, nrt, "every request answered");
	is_int(failed_rt, 0, "none failed");
	is_int(mismatched, 0, "every response matched its request");
	diag("%llu round trips, %d outstanding, in %lld ms (%.0f/s)",
	     (unsigned long long)nrt, WINDOW, t1 - t0,
	     (double)nrt * 1000.0 / (double)(t1 - t0 ? t1 - t0 : 1));

	/* responses larger than the eager size, and a large request */
	for (i = 0; i < 12; i++) {
		q.op = OP_BIG;
		q.seq = (uint64_t)i + 1;
		q.arg = i < 8 ? MID_SIZE + (uint64_t)i : BIG_SIZE + (uint64_t)i;
		big[i].seed = q.seq;
		is_int(rdmamsg_request(ep, &q, sizeof(q), 30000, rec_cb,
				       &big[i], &id),
		       0,
		       i < 8 ? "request a fragmented response"
			     : "request a rendezvous response");
	}
	buf = malloc(BIG_SIZE);
	q.op = OP_SUM;
	memcpy(buf, &q, sizeof(q));
	for (i = (int)sizeof(q); i < (int)BIG_SIZE; i++)
		buf[i] = (char)(i * 7);
	for (i = 0; i < (int)BIG_SIZE; i++)
		h = h * 31 + (unsigned char)buf[i];
	is_int(rdmamsg_request(ep, buf, BIG_SIZE, 30000, rec_cb, &sum, &id), 0,
	       "a request larger than the maximum message (rendezvous)");
	free(buf);
	WAIT(all_called(big, 12) && sum.calls, 30000);
	ok_all = 1;
	for (i = 0; i < 12; i++)
		if (big[i].calls != 1 || big[i].status ||
		    big[i].len != (i < 8 ? MID_SIZE : BIG_SIZE) + (size_t)i ||
		    !big[i].content_ok)
			ok_all = 0;
	ok(ok_all, "large responses intact (8 x 24 KiB, 4 x 4 MiB)");
	ok(sum.calls == 1 && !sum.status && sum.value == h,
	   "large request intact (server's checksum)");

	/* a server that never answers: timeouts */
	t0 = test_now_ms();
	for (i = 0; i < 20; i++) {
		q.op = OP_IGNORE;
		is_int(rdmamsg_request(ep, &q, sizeof(q), 50 + (i % 4) * 10,
				       rec_cb, &ign[i], &id),
		       0, "request that is never answered");
	}
	WAIT(all_called(ign, 20), 5000);
	ok_all = 1;
	for (i = 0; i < 20; i++)
		if (ign[i].calls != 1 || ign[i].status != -ETIMEDOUT ||
		    ign[i].at - t0 < 50 + (i % 4) * 10)
			ok_all = 0;
	ok(ok_all, "each timed out once, not before its timeout");

	/* cancellation; the held ones are answered later (late) */
	for (i = 0; i < 10; i++) {
		q.op = OP_HOLD;
		is_int(rdmamsg_request(ep, &q, sizeof(q), 0, rec_cb, &hold[i],
				       &ids[i]),
		       0, "request the server holds");
	}
	for (i = 0; i < 10; i++)
		is_int(rdmamsg_request_cancel(ep, ids[i]), 0, "cancel");
	is_int(rdmamsg_request_cancel(ep, ids[0]), -ENOENT,
	       "cancel twice: -ENOENT");
	ok(!hold[0].calls, "the callback does not run inside cancel");
	WAIT(all_called(hold, 10), 5000);
	ok_all = 1;
	for (i = 0; i < 10; i++)
		if (hold[i].calls != 1 || hold[i].status != -ECANCELED)
			ok_all = 0;
	ok(ok_all, "each cancelled request completed once with -ECANCELED");
	for (i = 0; i < 5; i++) {
		q.op = OP_HOLD;
		is_int(rdmamsg_request(ep, &q, sizeof(q), 30, rec_cb, &tmo[i],
				       &id),
		       0, "held request with a short timeout");
	}
	WAIT(all_called(tmo, 5), 5000);
	n = 0;
	for (i = 0; i < 5; i++)
		n += tmo[i].calls == 1 && tmo[i].status == -ETIMEDOUT;
	is_int(n, 5, "they time out");
	q.op = OP_FLUSH;
	is_int(rdmamsg_request(ep, &q, sizeof(q), 5000, rec_cb, &fl, &id), 0,
	       "ask the server to answer what it holds");
	WAIT(fl.calls, 5000);
	ok(fl.calls == 1 && fl.status == 0 && fl.len == 7, "flushed");
	is_int(rdmamsg_ep_get_late_responses(ep, &late), 0,
	       "get_late_responses");
	is_int(late, 15, "15 late responses dropped and counted");
	ok_all = 1;
	for (i = 0; i < 10; i++)
		ok_all &= hold[i].calls == 1;
	ok(ok_all, "no callback ran again for a late response");

	/* outstanding at close: cancelled, exactly once */
	for (i = 0; i < 5; i++) {
		q.op = OP_HOLD;
		is_int(rdmamsg_request(ep, &q, sizeof(q), 0, rec_cb, &fin[i],
				       &id),
		       0, "request left outstanding");
	}
	run(50);
	is_int(rdmamsg_ep_close(ep, cli_closed), 0, "close");
	is_int(rdmamsg_request(ep, &q, sizeof(q), 0, rec_cb, &fl, &id),
	       -ENOTCONN, "request after close: -ENOTCONN");
	WAIT(closed, 5000);
	ok(closed, "closed");
	n = 0;
	for (i = 0; i < 5; i++)
		n += fin[i].calls == 1 && fin[i].status == -ECANCELED;
	is_int(n, 5, "outstanding requests got -ECANCELED once");
	is_int(test_wait_child(pid), 0, "server checks pass");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	close(rfd);
	return done_testing();
}
