/* SPDX-License-Identifier: MIT */
/*
 * dc.c -- endpoints over DC (rdmamsg_ep_attr_set_transport DC, issue 16).
 *
 * One server context accepts DC endpoints from NPROC client processes x
 * NEP endpoints each (1,000; 100 under RDMAMSG_TEST_SCALE=small): every
 * endpoint sends 8 B, 1,000 B and 20,000 B (fragmented: eager 8 KiB)
 * messages that the server echoes, verified in order (a receive depth of
 * 4: credits run short); every 25th also a
 * request (response verified) and a 200 KiB message by rendezvous (the
 * server pulls it with RDMA READ through its DCIs and echoes it the same
 * way).  The server's QPs (its DCIs and DCT, rdmamsg_ctx_dc_stats) are
 * reported and must be a handful.  A client that uses a wrong DC access
 * key (RDMAMSG_TEST_DC_BAD_KEY=1): its message is dropped by the server's
 * DCT and counted as a key violation, and its endpoint goes down with
 * -ECONNRESET.  With RDMAMSG_NO_DC=1: RDMAMSG_CAP_DC and the DC connect
 * give -ENOTSUP, RC still works.  Bad arguments give -EINVAL.
 */
#include "config.h"

#include <sys/resource.h>

#include "../tap.h"
#include "util.h"

#define NPROC	 4
#define NEP_MAX	 250
#define NMSG	 3
#define LARGE	 (200 * 1024)
#define REQ_LEN	 100
#define EAGER	 8192
#define SRV_BUFS 8192
/* a receive depth of 4 (two data credits per update, two control credits
 * on an SRQ) once stalled about 3 of the 40 rendezvous echoes: the client
 * owed data credits but held only its goodbye's control credit, the
 * server, out of data credits, owed it control credits (msg.c) */
#ifndef RDEPTH
#define RDEPTH 4
#endif

static int nep = NEP_MAX;
static const size_t msg_len[NMSG] = {8, 1000, 20000};

/* fill -- byte j of message k of endpoint i */
static unsigned char pat(int i, int k, size_t j)
{
	return (unsigned char)(i * 31 + k * 7 + j + (j >> 8));
}

static void fill(unsigned char *m, int i, int k, size_t len)
{
	for (size_t j = 0; j < len; j++)
		m[j] = pat(i, k, j);
}

static int check(const unsigned char *m, int i, int k, size_t len)
{
	for (size_t j = 0; j < len; j++)
		if (m[j] != pat(i, k, j))
			return 0;
	return 1;
}

/* dc_attr -- DC endpoint attributes on srq */
static struct rdmamsg_ep_attr *dc_attr(struct rdmamsg_srq *srq)
{
	struct rdmamsg_ep_attr *a = test_ep_attr(EAGER, 65536);

	rdmamsg_ep_attr_set_recv_depth(a, RDEPTH);
	rdmamsg_ep_attr_set_send_depth(a, 16);
	rdmamsg_ep_attr_set_peer_timeout(a, 0);
	rdmamsg_ep_attr_set_connect_timeout(a, 60000);
	if (srq && rdmamsg_ep_attr_set_srq(a, srq))
		bail_out("set_srq");
	if (rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC))
		bail_out("set_transport");
	return a;
}

static struct rdmamsg_srq *mk_srq(struct rdmamsg_ctx *ctx, unsigned int n)
{
	struct rdmamsg_srq_attr sa = {.max_bufs = n, .buf_size = EAGER};
	struct rdmamsg_srq *srq;

	if (rdmamsg_srq_create(ctx, &sa, &srq))
		return NULL;
	return srq;
}

/* ---- server (child) ------------------------------------------------ */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_srq *srq;
	struct rdmamsg_ep_attr *attr;
	int open, failures;
};

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv *s = arg;
	int ret;

	(void)imm;
	ret = flags & RDMAMSG_RECV_LARGE
		      ? rdmamsg_send_large(ep, data, len, NULL)
		      : rdmamsg_send(ep, data, len, NULL);
	if (ret)
		s->failures++;
}

static void srv_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
			void *data, size_t len, void *arg)
{
	unsigned char r[REQ_LEN];

	(void)ep;
	if (len != REQ_LEN) {
		rdmamsg_req_drop(req);
		((struct srv *)arg)->failures++;
		return;
	}
	for (size_t j = 0; j < len; j++)
		r[j] = (unsigned char)~((unsigned char *)data)[j];
	if (rdmamsg_respond(req, r, len))
		((struct srv *)arg)->failures++;
}

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct srv *)arg)->open--;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	rdmamsg_ep_close(ep, srv_closed);
	(void)arg;
}

static void srv_conn(struct rdmamsg_ep *ep, int status, int reason,
		     const void *pdata, size_t len, void *arg)
{
	(void)reason;
	(void)pdata;
	(void)len;
	if (status) {
		((struct srv *)arg)->failures++;
		rdmamsg_ep_close(ep, srv_closed);
	}
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_conn,
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, s->attr, &srv_cbs, s, &ep) == 0) {
		s->open++;
	} else {
		s->failures++;
		rdmamsg_conn_req_reject(req, 1, NULL, 0);
	}
}

static int ctl[2]; /* test -> server: 'p' report, 'q' quit */

/* what the server reports */
enum { R_OPEN, R_QPS, R_DCIS, R_DCTS, R_EPS, R_DROPS, R_VIOL, R_FAIL, R_N };

static int server(int wfd, void *arg)
{
	struct srv s;
	struct pollfd p;
	char cmd;

	(void)arg;
	close(ctl[1]);
	memset(&s, 0, sizeof(s));
	if (rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	s.srq = mk_srq(s.ctx, SRV_BUFS);
	if (!s.srq)
		return 16;
	/* RC attributes on purpose: a DC request is accepted as DC */
	s.attr = test_ep_attr(EAGER, 65536);
	rdmamsg_ep_attr_set_recv_depth(s.attr, RDEPTH);
	rdmamsg_ep_attr_set_send_depth(s.attr, 16);
	rdmamsg_ep_attr_set_peer_timeout(s.attr, 0);
	rdmamsg_ep_attr_set_srq(s.attr, s.srq);
	rdmamsg_ep_attr_set_on_request(s.attr, srv_request);
	if (test_listen_report(s.ctx, srv_req, &s, &s.lst, wfd))
		return 11;
	p.fd = ctl[0];
	p.events = POLLIN;
	for (;;) {
		if (poll(&p, 1, 0) == 1) {
			struct rdmamsg_dc_stats st;
			uint64_t r[R_N];

			if (read(ctl[0], &cmd, 1) != 1 || cmd == 'q')
				break;
			memset(&st, 0, sizeof(st));
			rdmamsg_ctx_dc_stats(s.ctx, &st);
			r[R_OPEN] = (uint64_t)s.open;
			r[R_QPS] = st.qps;
			r[R_DCIS] = st.dcis;
			r[R_DCTS] = st.dcts;
			r[R_EPS] = st.endpoints;
			r[R_DROPS] = st.tag_drops;
			r[R_VIOL] = st.key_violations;
			r[R_FAIL] = (uint64_t)s.failures;
			if (write(wfd, r, sizeof(r)) != sizeof(r))
				return 12;
		}
		test_idle(s.ctx, 5);
	}
	rdmamsg_listener_close(s.lst, NULL);
	for (int i = 0; i < 2000 && s.open; i++)
		test_idle(s.ctx, 10);
	if (s.open)
		return 13;
	if (test_srq_close(s.ctx, s.srq, 10000))
		return 15;
	rdmamsg_ep_attr_delete(&s.attr);
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 14;
	return 0;
}

/* ---- clients (children) -------------------------------------------- */

struct cep {
	struct rdmamsg_ep *ep;
	int idx, up, status, closed, disc, disc_status;
	int echoed, large_ok, resp_ok, bad, want_large;
};

static void c_connect(struct rdmamsg_ep *ep, int status, int reason,
		      const void *pdata, size_t len, void *arg)
{
	struct cep *e = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	e->up = 1;
	e->status = status;
}

static void c_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		   unsigned int flags, void *arg)
{
	struct cep *e = arg;

	(void)ep;
	(void)imm;
	if (flags & RDMAMSG_RECV_LARGE) {
		if (len == LARGE && check(data, e->idx, NMSG, len))
			e->large_ok++;
		else
			e->bad++;
		return;
	}
	if (e->echoed >= NMSG || len != msg_len[e->echoed] ||
	    !check(data, e->idx, e->echoed, len))
		e->bad++;
	e->echoed++;
}

static void c_resp(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		   void *arg)
{
	struct cep *e = arg;
	unsigned char m[REQ_LEN];

	(void)ep;
	fill(m, e->idx, 99, REQ_LEN);
	if (status || len != REQ_LEN) {
		e->bad++;
		return;
	}
	for (size_t j = 0; j < len; j++)
		if (((unsigned char *)data)[j] != (unsigned char)~m[j]) {
			e->bad++;
			return;
		}
	e->resp_ok++;
}

static void c_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	((struct cep *)arg)->disc = 1;
	((struct cep *)arg)->disc_status = status;
}

static void c_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cep *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs c_cbs = {
	.on_connect = c_connect,
	.on_recv = c_recv,
	.on_disconnect = c_disc,
};

static char addr[64];
static int go[NPROC][2]; /* test -> client: close now */

static int count(const struct cep *e, int n, int what)
{
	int c = 0;

	for (int j = 0; j < n; j++)
		c += what == 0	 ? e[j].up
		     : what == 1 ? e[j].closed
				 : (e[j].disc || e[j].status ||
				    (e[j].echoed >= NMSG &&
				     e[j].large_ok >= e[j].want_large &&
				     e[j].resp_ok >= e[j].want_large));
	return c;
}

/* client -- nep DC endpoints: connect all, send the messages, wait for
 * every echo (and response), report {connected, failures, bad}, wait for
 * the test, close all */
static int client(int wfd, void *arg)
{
	int me = (int)(intptr_t)arg;
	static struct cep e[NEP_MAX];
	static unsigned char m[LARGE];
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_srq *srq;
	struct rdmamsg_ep_attr *a;
	uint64_t r[3] = {0, 0, 0};
	char b;
	int i, k;

	for (i = 0; i < NPROC; i++)
		close(go[i][1]);
	close(ctl[0]);
	close(ctl[1]);
	if (rdmamsg_ctx_create(NULL, &ctx))
		return 20;
	srq = mk_srq(ctx, 8192);
	if (!srq)
		return 26;
	a = dc_attr(srq);
	memset(e, 0, sizeof(e));
	for (i = 0; i < nep; i++) {
		e[i].idx = me * nep + i;
		e[i].want_large = e[i].idx % 25 == 0;
		if (rdmamsg_connect(ctx, addr, a, &c_cbs, &e[i], &e[i].ep))
			return 21;
	}
	for (i = 0; i < 6000 && count(e, nep, 0) < nep; i++)
		test_idle(ctx, 10);
	for (i = 0; i < nep; i++) {
		if (!e[i].up || e[i].status) {
			r[1]++;
			continue;
		}
		r[0]++;
		for (k = 0; k < NMSG; k++) {
			fill(m, e[i].idx, k, msg_len[k]);
			if (rdmamsg_send(e[i].ep, m, msg_len[k], NULL))
				r[1]++;
		}
		if (e[i].want_large) {
			uint64_t rid;
			int ret;

			fill(m, e[i].idx, NMSG, LARGE);
			ret = rdmamsg_send_large(e[i].ep, m, LARGE, NULL);
			if (ret) {
				printf("# endpoint %d: send_large: %d\n",
				       e[i].idx, ret);
				r[1]++;
			}
			fill(m, e[i].idx, 99, REQ_LEN);
			ret = rdmamsg_request(e[i].ep, m, REQ_LEN, 0, c_resp,
					      &e[i], &rid);
			if (ret) {
				printf("# endpoint %d: request: %d\n", e[i].idx,
				       ret);
				r[1]++;
			}
		}
	}
	for (i = 0; i < 6000 && count(e, nep, 2) < nep; i++)
		test_idle(ctx, 10);
	for (i = 0; i < nep; i++)
		if (!e[i].status && e[i].up &&
		    (e[i].echoed != NMSG || e[i].bad || e[i].disc ||
		     e[i].large_ok != e[i].want_large ||
		     e[i].resp_ok != e[i].want_large)) {
			printf("# endpoint %d: %d echoes, %d bad, down %d "
			       "(%d), "
			       "large %d/%d, response %d\n",
			       e[i].idx, e[i].echoed, e[i].bad, e[i].disc,
			       e[i].disc_status, e[i].large_ok, e[i].want_large,
			       e[i].resp_ok);
			r[2]++;
		}
	if (r[2]) {
		struct rdmamsg_dc_stats st;

		rdmamsg_ctx_dc_stats(ctx, &st);
		printf("# client %d: DC %u QPs, %llu tag drops, %llu waits, "
		       "%llu DCI resets\n",
		       me, st.qps, (unsigned long long)st.tag_drops,
		       (unsigned long long)st.dci_waits,
		       (unsigned long long)st.dci_resets);
	}
	if (write(wfd, r, sizeof(r)) != sizeof(r) ||
	    read(go[me][0], &b, 1) != 1)
		return 22;
	for (i = 0; i < nep; i++)
		rdmamsg_ep_close(e[i].ep, c_closed);
	for (i = 0; i < 3000 && count(e, nep, 1) < nep; i++)
		test_idle(ctx, 10);
	if (count(e, nep, 1) < nep)
		return 23;
	test_srq_close(ctx, srq, 10000);
	rdmamsg_ep_attr_delete(&a);
	if (rdmamsg_ctx_destroy(&ctx))
		return 25;
	return 0;
}

/* bad_key -- one DC endpoint whose sends carry a wrong access key:
 * reports {connected, down status, send status} */
static int bad_key(int wfd, void *arg)
{
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_srq *srq;
	struct rdmamsg_ep_attr *a;
	struct cep e;
	int64_t r[3] = {0, 1, 1};
	char m[64];
	int i;

	(void)arg;
	for (i = 0; i < NPROC; i++)
		close(go[i][1]);
	close(ctl[0]);
	close(ctl[1]);
	setenv("RDMAMSG_TEST_DC_BAD_KEY", "1", 1);
	if (rdmamsg_ctx_create(NULL, &ctx))
		return 30;
	srq = mk_srq(ctx, 64);
	if (!srq)
		return 31;
	a = dc_attr(srq);
	memset(&e, 0, sizeof(e));
	if (rdmamsg_connect(ctx, addr, a, &c_cbs, &e, &e.ep))
		return 32;
	for (i = 0; i < 6000 && !e.up; i++)
		test_idle(ctx, 10);
	r[0] = e.up && !e.status;
	memset(m, 'k', sizeof(m));
	if (r[0]) {
		r[2] = rdmamsg_send(e.ep, m, sizeof(m), NULL);
		for (i = 0; i < 6000 && !e.disc; i++)
			test_idle(ctx, 10);
		r[1] = e.disc ? e.disc_status : 1;
	}
	if (write(wfd, r, sizeof(r)) != sizeof(r))
		return 33;
	rdmamsg_ep_close(e.ep, c_closed);
	for (i = 0; i < 3000 && !e.closed; i++)
		test_idle(ctx, 10);
	test_srq_close(ctx, srq, 10000);
	rdmamsg_ep_attr_delete(&a);
	return rdmamsg_ctx_destroy(&ctx) ? 34 : 0;
}

static int srv_query(int srfd, uint64_t q[R_N])
{
	return write(ctl[1], "p", 1) == 1 &&
	       read(srfd, q, R_N * sizeof(*q)) == R_N * sizeof(*q);
}

/* no_dc -- RDMAMSG_NO_DC=1 in this process: DC refused, RC works */
static void no_dc(void)
{
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_srq *srq;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_dc_stats st;
	struct cep e;
	struct rdmamsg_ep *ep = NULL;
	unsigned char m[8];
	uint64_t v = 7;
	int i;

	setenv("RDMAMSG_NO_DC", "1", 1);
	if (rdmamsg_ctx_create(NULL, &ctx))
		bail_out("ctx");
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v), -ENOTSUP,
	       "RDMAMSG_NO_DC=1: RDMAMSG_CAP_DC is -ENOTSUP");
	is_int(rdmamsg_ctx_dc_stats(ctx, &st), -ENOTSUP,
	       "RDMAMSG_NO_DC=1: rdmamsg_ctx_dc_stats is -ENOTSUP");
	srq = mk_srq(ctx, 64);
	ok(srq != NULL, "an SRQ");
	a = dc_attr(srq);
	is_int(rdmamsg_connect(ctx, addr, a, &c_cbs, &e, &ep), -ENOTSUP,
	       "RDMAMSG_NO_DC=1: a DC connect is -ENOTSUP");
	ok(ep == NULL, "nothing made");
	rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_RC);
	memset(&e, 0, sizeof(e));
	e.idx = 4242;
	is_int(rdmamsg_connect(ctx, addr, a, &c_cbs, &e, &e.ep), 0,
	       "RC connect on the same context");
	for (i = 0; i < 6000 && !e.up; i++)
		test_idle(ctx, 10);
	is_int(e.status, 0, "RC endpoint connected");
	fill(m, e.idx, 0, sizeof(m));
	is_int(rdmamsg_send(e.ep, m, sizeof(m), NULL), 0, "RC send");
	for (i = 0; i < 6000 && !e.echoed; i++)
		test_idle(ctx, 10);
	ok(e.echoed == 1 && !e.bad, "RC message echoed intact");
	rdmamsg_ep_close(e.ep, c_closed);
	for (i = 0; i < 3000 && !e.closed; i++)
		test_idle(ctx, 10);
	ok(e.closed, "RC endpoint closed");
	test_srq_close(ctx, srq, 10000);
	rdmamsg_ep_attr_delete(&a);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	unsetenv("RDMAMSG_NO_DC");
}

/* bad_args -- refused before anything is made */
static void bad_args(void)
{
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_srq *srq;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ep *ep = NULL;
	struct cep e;
	char pd[RDMAMSG_DC_PRIVATE_DATA_MAX + 1];
	uint64_t v = 0;

	if (rdmamsg_ctx_create(NULL, &ctx))
		bail_out("ctx");
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v), 0,
	       "softrdma offers DC");
	is_int(rdmamsg_ep_attr_set_transport(NULL, RDMAMSG_TRANSPORT_DC),
	       -EINVAL, "set_transport(NULL) is -EINVAL");
	a = dc_attr(NULL);
	is_int(rdmamsg_ep_attr_set_transport(a, (enum rdmamsg_transport)7),
	       -EINVAL, "an unknown transport is -EINVAL");
	is_int(rdmamsg_connect(ctx, addr, a, &c_cbs, &e, &ep), -EINVAL,
	       "DC without an SRQ is -EINVAL");
	srq = mk_srq(ctx, 64);
	rdmamsg_ep_attr_set_srq(a, srq);
	memset(pd, 1, sizeof(pd));
	rdmamsg_ep_attr_set_private_data(a, pd, sizeof(pd));
	is_int(rdmamsg_connect(ctx, addr, a, &c_cbs, &e, &ep), -EINVAL,
	       "DC with 17 bytes of private data is -EINVAL");
	ok(ep == NULL, "nothing made");
	test_srq_close(ctx, srq, 10000);
	rdmamsg_ep_attr_delete(&a);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
}

int main(void)
{
	uint64_t r[3], tot[3] = {0, 0, 0}, q[R_N];
	int64_t br[3];
	int rfd[NPROC], srfd, bfd, i;
	pid_t spid, pid[NPROC], bpid;
	struct rlimit rl;

	test_setup("dc");
	if (getenv("RDMAMSG_TEST_SCALE") &&
	    !strcmp(getenv("RDMAMSG_TEST_SCALE"), "small"))
		nep = NEP_MAX / 10;
	/* the server holds an rdma_cm id per endpoint */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (pipe(ctl))
		bail_out("pipe");
	for (i = 0; i < NPROC; i++)
		if (pipe(go[i]))
			bail_out("pipe");
	spid = test_fork_server(server, NULL, &srfd, addr, sizeof(addr));
	close(ctl[0]);
	bad_args();
	for (i = 0; i < NPROC; i++)
		pid[i] = test_fork(client, (void *)(intptr_t)i, &rfd[i]);
	for (i = 0; i < NPROC; i++) {
		memset(r, 0, sizeof(r));
		if (read(rfd[i], r, sizeof(r)) != sizeof(r))
			r[1] = (uint64_t)nep;
		for (int k = 0; k < 3; k++)
			tot[k] += r[k];
	}
	printf("# %d DC endpoints: %llu connected, %llu failures, %llu with "
	       "a bad exchange\n",
	       NPROC * nep, (unsigned long long)tot[0],
	       (unsigned long long)tot[1], (unsigned long long)tot[2]);
	is_int(tot[0], NPROC * nep, "every DC endpoint connected");
	is_int(tot[1], 0, "no failure");
	is_int(tot[2], 0, "every message, response and rendezvous verified");
	ok(srv_query(srfd, q), "server reports");
	printf("# server: %llu DC endpoints open over %llu QPs (%llu DCIs, "
	       "%llu DCT)\n",
	       (unsigned long long)q[R_OPEN], (unsigned long long)q[R_QPS],
	       (unsigned long long)q[R_DCIS], (unsigned long long)q[R_DCTS]);
	is_int(q[R_OPEN], NPROC * nep, "all endpoints open on the server");
	is_int(q[R_EPS], NPROC * nep, "all of them DC lanes");
	ok(q[R_QPS] >= 2 && q[R_QPS] <= 17,
	   "the server uses a handful of QPs (%llu) for %d endpoints",
	   (unsigned long long)q[R_QPS], NPROC * nep);
	is_int(q[R_DCTS], 1, "one DCT");
	is_int(q[R_DROPS], 0, "no message dropped for its tag");
	is_int(q[R_FAIL], 0, "no server-side failure");
	for (i = 0; i < NPROC; i++)
		if (write(go[i][1], "g", 1) != 1)
			bail_out("write");
	for (i = 0; i < NPROC; i++) {
		ok(test_wait_child(pid[i]) == 0, "client %d exits cleanly", i);
		close(rfd[i]);
	}

	/* a wrong access key */
	bpid = test_fork(bad_key, NULL, &bfd);
	if (read(bfd, br, sizeof(br)) != sizeof(br))
		br[0] = -1;
	is_int(br[0], 1, "bad-key client connected (its handshake is fine)");
	is_int(br[2], 0, "its send was posted");
	is_int(br[1], -ECONNRESET,
	       "the wrong key takes its endpoint down with -ECONNRESET");
	is_int(test_wait_child(bpid), 0, "bad-key client exits cleanly");
	close(bfd);
	ok(srv_query(srfd, q), "server reports");
	ok(q[R_VIOL] >= 1, "the server's DCT counted the key violation (%llu)",
	   (unsigned long long)q[R_VIOL]);
	is_int(q[R_FAIL], 0, "no server-side failure");

	no_dc();

	for (i = 0; i < 2000; i++) {
		if (!srv_query(srfd, q) || q[R_OPEN] == 0)
			break;
		usleep(10 * 1000);
	}
	is_int(q[R_OPEN], 0, "every endpoint closed on the server");
	if (write(ctl[1], "q", 1) != 1)
		bail_out("write");
	is_int(test_wait_child(spid), 0, "server exits cleanly");
	close(srfd);
	{
		struct rdmamsg_ctx *ctx;

		is_int(rdmamsg_ctx_create(NULL, &ctx), 0, "a last context");
		is_int(rdmamsg_ctx_destroy(&ctx), 0, "destroyed");
	}
	return done_testing();
}
