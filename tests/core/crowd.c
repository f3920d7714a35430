/* SPDX-License-Identifier: MIT */
/*
 * crowd.c -- many clients on one server with default attributes (but a
 * connect timeout of 60 s, long enough for a loaded machine).
 *
 * CROWD_STORM: a connect storm, 200 clients (4 processes x 50) x 10
 * cycles: every connect succeeds, none is refused as "no listener".
 * Otherwise: 500 clients (5 processes x 100) on one server whose context
 * and endpoints all use the defaults: all connect, exchange verified
 * messages, nobody is cut off for want of pool memory, the pool stays
 * under its limit, and once they are gone it shrinks back to its idle
 * size.
 */
#include "config.h"

#include "../tap.h"
#include "util.h"

#ifdef CROWD_STORM
#define NPROC	4
#define NEP_MAX 50
#define CYCLES	10
#define NMSG	1
#else
#define NPROC	5
#define NEP_MAX 100
#define CYCLES	1
#define NMSG	4
#endif

/* endpoints per client process: fewer under valgrind */
static int nep = NEP_MAX;
#define MSG_LEN 1000

/* ---- server (child) ------------------------------------------------ */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_ep_attr *attr; /* the defaults, but a long connect */
	int open, failures, enobufs;
};

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv *s = arg;

	(void)imm;
	(void)flags;
	if (rdmamsg_send(ep, data, len, NULL))
		s->failures++;
}

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct srv *)arg)->open--;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct srv *s = arg;

	if (status == -ENOBUFS)
		s->enobufs++;
	rdmamsg_ep_close(ep, srv_closed);
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
	if (rdmamsg_conn_req_accept(req, s->attr, &srv_cbs, s, &ep) == 0)
		s->open++;
	else
		s->failures++;
}

static int ctl[2]; /* test -> server: 'p' report the pool, 'q' quit */

static int server(int wfd, void *arg)
{
	struct srv s;
	struct pollfd p;
	char cmd;

	(void)arg;
	close(ctl[1]);
	memset(&s, 0, sizeof(s));
	/* default context attributes; default endpoint attributes but for
	 * the connect timeout (see client()) */
	if (rdmamsg_ctx_create(NULL, &s.ctx) || rdmamsg_ep_attr_new(&s.attr) ||
	    rdmamsg_ep_attr_set_connect_timeout(s.attr, 60000))
		return 10;
	if (test_listen_report(s.ctx, srv_req, &s, &s.lst, wfd))
		return 11;
	p.fd = ctl[0];
	p.events = POLLIN;
	for (;;) {
		if (poll(&p, 1, 0) == 1) {
			uint64_t r[4];
			size_t reg, used;

			if (read(ctl[0], &cmd, 1) != 1 || cmd == 'q')
				break;
			rdmamsg_ctx_query_pool(s.ctx, &reg, &used);
			r[0] = reg;
			r[1] = used;
			r[2] = (uint64_t)s.open;
			r[3] = (uint64_t)s.enobufs;
			if (write(wfd, r, sizeof(r)) != sizeof(r))
				return 12;
		}
		test_idle(s.ctx, 5);
	}
	rdmamsg_listener_close(s.lst, NULL);
	test_idle(s.ctx, 100);
	if (s.open)
		return 13;
	rdmamsg_ep_attr_delete(&s.attr);
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 14;
	return s.failures ? 15 : 0;
}

/* ---- clients (children) -------------------------------------------- */

struct cep {
	struct rdmamsg_ep *ep;
	int idx, up, status, reason, closed, disc;
	unsigned int echoed, bad;
};

static void c_connect(struct rdmamsg_ep *ep, int status, int reason,
		      const void *pdata, size_t len, void *arg)
{
	struct cep *e = arg;

	(void)ep;
	(void)pdata;
	(void)len;
	e->up = 1;
	e->status = status;
	e->reason = reason;
}

/* fill -- message k of endpoint i */
static void fill(char *m, int i, unsigned int k)
{
	memset(m, 'a' + (i + (int)k) % 26, MSG_LEN);
	memcpy(m, &i, sizeof(i));
	memcpy(m + sizeof(i), &k, sizeof(k));
}

static void c_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		   unsigned int flags, void *arg)
{
	struct cep *e = arg;
	char m[MSG_LEN];

	(void)ep;
	(void)imm;
	(void)flags;
	fill(m, e->idx, e->echoed);
	if (len != MSG_LEN || memcmp(m, data, MSG_LEN))
		e->bad++;
	e->echoed++;
}

static void c_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)status;
	((struct cep *)arg)->disc = 1;
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

/* n_up, n_closed -- endpoints whose connect finished, that are freed */
static int n_up(const struct cep *e)
{
	int n = 0;

	for (int j = 0; j < nep; j++)
		n += e[j].up;
	return n;
}

static int n_closed(const struct cep *e)
{
	int n = 0;

	for (int j = 0; j < nep; j++)
		n += e[j].closed;
	return n;
}

/* client -- nep endpoints, CYCLES times: connect all, exchange NMSG
 * verified messages each, (wait for the test), close all.  Reports
 * {connected, refused as no listener, other failures, bad echoes} */
static int client(int wfd, void *arg)
{
	int me = (int)(intptr_t)arg;
	static struct cep e[NEP_MAX];
	struct rdmamsg_ctx *ctx;
	uint64_t r[4] = {0, 0, 0, 0};
	struct rdmamsg_ep_attr *a;
	char m[MSG_LEN], b;
	int cyc, i;

	for (i = 0; i < NPROC; i++)
		close(go[i][1]);
	close(ctl[0]);
	close(ctl[1]);
	/* the defaults, but for a connect timeout that a loaded machine
	 * (500 connects to one server under ASan or valgrind) does not reach:
	 * the default 5 s is a policy, not what this test is about; 27 of
	 * 500 timed out once in CI's ASan run beside other suites */
	if (rdmamsg_ctx_create(NULL, &ctx) || rdmamsg_ep_attr_new(&a) ||
	    rdmamsg_ep_attr_set_connect_timeout(a, 60000))
		return 20;
	for (cyc = 0; cyc < CYCLES; cyc++) {
		memset(e, 0, sizeof(e));
		for (i = 0; i < nep; i++) {
			e[i].idx = me * nep + i;
			if (rdmamsg_connect(ctx, addr, a, &c_cbs, &e[i],
					    &e[i].ep))
				return 21;
		}
		for (i = 0; i < 7000 && n_up(e) < nep; i++)
			test_idle(ctx, 10);
		for (i = 0; i < nep; i++) {
			if (!e[i].up || e[i].status) {
				if (e[i].status == -ECONNREFUSED &&
				    e[i].reason == RDMAMSG_REJECT_NO_LISTENER)
					r[1]++;
				else if (r[2]++ < 3) {
					printf("# client %d, endpoint %d: %s, "
					       "status %d, reason %d\n",
					       me, i,
					       e[i].up ? "failed" : "no answer",
					       e[i].status, e[i].reason);
					fflush(stdout);
				}
				continue;
			}
			r[0]++;
			for (unsigned int k = 0; k < NMSG; k++) {
				fill(m, e[i].idx, k);
				if (rdmamsg_send(e[i].ep, m, MSG_LEN, NULL))
					r[2]++;
			}
		}
		for (i = 0; i < 3000; i++) {
			int done = 1;

			for (int j = 0; j < nep; j++)
				if (!e[j].status && e[j].up &&
				    e[j].echoed < NMSG && !e[j].disc)
					done = 0;
			if (done)
				break;
			test_idle(ctx, 10);
		}
		for (i = 0; i < nep; i++)
			if (!e[i].status && e[i].up &&
			    (e[i].echoed != NMSG || e[i].disc))
				r[3]++;
		if (CYCLES == 1) {
			/* all up: the test looks at the server now */
			if (write(wfd, r, sizeof(r)) != sizeof(r) ||
			    read(go[me][0], &b, 1) != 1)
				return 22;
		}
		for (i = 0; i < nep; i++)
			rdmamsg_ep_close(e[i].ep, c_closed);
		for (i = 0; i < 3000 && n_closed(e) < nep; i++)
			test_idle(ctx, 10);
		if (n_closed(e) < nep)
			return 23;
	}
	if (CYCLES != 1 && write(wfd, r, sizeof(r)) != sizeof(r))
		return 24;
	rdmamsg_ep_attr_delete(&a);
	if (rdmamsg_ctx_destroy(&ctx))
		return 25;
	return 0;
}

/* srv_query -- the server's {registered, in use, open, -ENOBUFS} */
static int srv_query(int srfd, uint64_t q[4])
{
	return write(ctl[1], "p", 1) == 1 &&
	       read(srfd, q, 4 * sizeof(*q)) == 4 * sizeof(*q);
}

int main(void)
{
	uint64_t r[4], tot[4] = {0, 0, 0, 0}, q[4];
	int rfd[NPROC], srfd, i;
	pid_t spid, pid[NPROC];

	test_setup(CYCLES > 1 ? "storm" : "crowd");
	if (getenv("RDMAMSG_TEST_SCALE") &&
	    !strcmp(getenv("RDMAMSG_TEST_SCALE"), "small"))
		nep = NEP_MAX / 10;
	if (pipe(ctl))
		bail_out("pipe");
	for (i = 0; i < NPROC; i++)
		if (pipe(go[i]))
			bail_out("pipe");
	spid = test_fork_server(server, NULL, &srfd, addr, sizeof(addr));
	close(ctl[0]);
	for (i = 0; i < NPROC; i++)
		pid[i] = test_fork(client, (void *)(intptr_t)i, &rfd[i]);
	for (i = 0; i < NPROC; i++) {
		memset(r, 0, sizeof(r));
		if (read(rfd[i], r, sizeof(r)) != sizeof(r))
			r[2] = nep * CYCLES;
		for (int k = 0; k < 4; k++)
			tot[k] += r[k];
	}
	printf("# %d clients x %d cycles: %llu connected, %llu no listener, "
	       "%llu other failures, %llu bad exchanges\n",
	       NPROC * nep, CYCLES, (unsigned long long)tot[0],
	       (unsigned long long)tot[1], (unsigned long long)tot[2],
	       (unsigned long long)tot[3]);
	is_int(tot[1], 0, "no connect refused as \"no listener\"");
	is_int(tot[0], NPROC * nep * CYCLES, "every connect succeeded");
	is_int(tot[2], 0, "no other failure");
	is_int(tot[3], 0, "every message echoed intact");
	if (CYCLES == 1) {
		ok(srv_query(srfd, q), "server reports its pool");
		printf("# server with %llu endpoints: %llu bytes registered, "
		       "%llu in use (%llu per endpoint)\n",
		       (unsigned long long)q[2], (unsigned long long)q[0],
		       (unsigned long long)q[1],
		       (unsigned long long)(q[2] ? q[1] / q[2] : 0));
		is_int(q[2], NPROC * nep, "all endpoints open on the server");
		ok(q[0] <= ((uint64_t)256 << 20),
		   "within the default pool limit");
		is_int(q[3], 0, "nobody cut off with -ENOBUFS");
		for (i = 0; i < NPROC; i++)
			if (write(go[i][1], "g", 1) != 1)
				bail_out("write");
	}
	for (i = 0; i < NPROC; i++) {
		ok(test_wait_child(pid[i]) == 0, "client %d exits cleanly", i);
		close(rfd[i]);
	}
	/* the server sees every disconnect, then its pool shrinks */
	for (i = 0; i < 200; i++) {
		if (!srv_query(srfd, q) || q[2] == 0)
			break;
		usleep(50 * 1000);
	}
	is_int(q[2], 0, "every endpoint closed on the server");
	ok(q[0] <= ((uint64_t)8 << 20),
	   "the server's pool is back to its idle size (%llu bytes)",
	   (unsigned long long)q[0]);
	if (write(ctl[1], "q", 1) != 1)
		bail_out("write");
	is_int(test_wait_child(spid), 0, "server exits cleanly");
	close(srfd);
	{
		/* children leave with _exit(): this process's softrdma exit
		 * handler reclaims what they left */
		struct rdmamsg_ctx *ctx;

		is_int(rdmamsg_ctx_create(NULL, &ctx), 0, "a last context");
		is_int(rdmamsg_ctx_destroy(&ctx), 0, "destroyed");
	}
	return done_testing();
}
