/* SPDX-License-Identifier: MIT */
/*
 * scale_probe.c -- what N endpoints on one server context cost: connects
 * per second (-c client processes, each with at most -w connects in
 * flight; the endpoints split evenly among them), and the
 * server's registered memory and RSS per endpoint once all N are up.
 * Every endpoint exchanges one message with the server (echoed, checked).
 *
 * usage: scale_probe [-n ENDPOINTS] [-c CLIENTS] [-w WINDOW]
 *                    [-l POOL_LIMIT_MIB] [-s] [-q SRQS] [-t CONNECT_MS] [-v]
 * (-s: the server's endpoints share one SRQ (-q K: K SRQs, endpoints
 * spread round-robin) of 3 buffers per endpoint plus a quarter more, at
 * most 32,767 (mlx5's and softrdma's max_srq_wr); every endpoint of both
 * sides with a receive depth of 2 and an eager size of 256 bytes; the
 * line then adds srv_srq_reg_per_ep, the SRQ's registered bytes per
 * endpoint; -t: the endpoints' connect timeout with -s, both sides, for
 * runs on a loaded machine; -v: progress on stderr every second)
 * (-d: DC endpoints (rdmamsg_ep_attr_set_transport, implies -s; each
 * client process has an SRQ too); the line then adds srv_qps, the
 * server's QPs: its DCIs and DCT, or one RC QP per endpoint without -d)
 * (-l sets both contexts' pool limit; the library's default of 64 MiB
 * holds about 35 endpoints today, each preallocating its receive ring)
 * Prints one line: "scale N=... clients=... up=... connects_per_s=... srv_reg_per_ep=...
 * srv_rss_per_ep=... cli_reg_per_ep=... cli_rss_per_ep=... errors=..."
 * (bytes); exits 0 when all N connected and echoed, 1 otherwise.  A
 * benchmark (tools/bench-scale.sh), not a test: nothing here is timed
 * against a limit.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rdmamsg.h"

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* rss -- this process's resident set, bytes */
static long long rss(void)
{
	char line[256];
	long long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

static size_t registered(struct rdmamsg_ctx *ctx)
{
	size_t reg = 0, used = 0;

	rdmamsg_ctx_query_pool(ctx, &reg, &used);
	return reg;
}

/* drive -- one pass of the context, blocking up to ms when idle */
static void drive(struct rdmamsg_ctx *ctx, int ms)
{
	struct pollfd p;

	rdmamsg_ctx_get_fd(ctx, &p.fd);
	p.events = POLLIN;
	if (rdmamsg_ctx_arm(ctx) == 0)
		poll(&p, 1, ms);
	rdmamsg_ctx_progress(ctx);
}

/* ---- server (child) ----------------------------------------------- */

static int use_dc; /* -d */
static int verbose, s_up, s_gone, s_errors, s_stop, use_srq, s_acc;
static struct rdmamsg_ep_attr *srq_attrs[16]; /* -q: one per SRQ */
static size_t pool_limit;
static struct rdmamsg_ep_attr *ep_attr; /* NULL: defaults */
static unsigned int connect_ms;		/* -t (with -s); 0: the default */

/* small_attr -- with -s: receive depth 2, eager 256 (both sides) */
static struct rdmamsg_ep_attr *small_attr(void)
{
	struct rdmamsg_ep_attr *a;

	if (rdmamsg_ep_attr_new(&a))
		return NULL;
	rdmamsg_ep_attr_set_eager_size(a, 256);
	rdmamsg_ep_attr_set_max_msg_size(a, 4096);
	rdmamsg_ep_attr_set_recv_depth(a, 2);
	rdmamsg_ep_attr_set_send_depth(a, 4);
	if (use_dc && rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC)) {
		rdmamsg_ep_attr_delete(&a);
		return NULL;
	}
	if (connect_ms && rdmamsg_ep_attr_set_connect_timeout(a, connect_ms)) {
		rdmamsg_ep_attr_delete(&a);
		return NULL;
	}
	return a;
}

/* make_ctx -- a context in fd mode with the pool limit asked for */
static int make_ctx(struct rdmamsg_ctx **ctx)
{
	struct rdmamsg_ctx_attr *a;
	int ret;

	if (!pool_limit)
		return rdmamsg_ctx_create(NULL, ctx);
	ret = rdmamsg_ctx_attr_new(&a);
	if (ret)
		return ret;
	ret = rdmamsg_ctx_attr_set_pool_limit(a, pool_limit);
	if (!ret)
		ret = rdmamsg_ctx_create(a, ctx);
	rdmamsg_ctx_attr_delete(&a);
	return ret;
}

static void s_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		   unsigned int flags, void *arg)
{
	(void)imm;
	(void)flags;
	(void)arg;
	if (rdmamsg_send(ep, data, len, NULL))
		s_errors++;
}

static void s_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	s_gone++;
}

static void s_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, s_closed);
}

static void s_connect(struct rdmamsg_ep *ep, int status, int reason,
		      const void *pdata, size_t len, void *arg)
{
	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	if (status) {
		fprintf(stderr, "scale_probe: server: connect: %s\n",
			rdmamsg_strerror(status));
		s_errors++;
		rdmamsg_ep_close(ep, s_closed);
		return;
	}
	s_up++;
}

static const struct rdmamsg_ep_cbs s_cbs = {
	.on_connect = s_connect,
	.on_recv = s_recv,
	.on_disconnect = s_disc,
};

static void s_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		  const void *pdata, size_t len, void *arg)
{
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	int ret = rdmamsg_conn_req_accept(
		req, use_srq ? srq_attrs[s_acc++ % use_srq] : NULL, &s_cbs,
		NULL, &ep);

	if (ret) {
		fprintf(stderr, "scale_probe: server: accept: %s\n",
			rdmamsg_strerror(ret));
		s_errors++;
	}
}

static void on_term(int sig)
{
	(void)sig;
	s_stop = 1;
}

/* server -- listen, report the port, then the costs once n are up */
static int server(int n, int wfd, int rfd)
{
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_srq *srq[16] = {NULL};
	struct rdmamsg_srq_stats st = {0};
	int i;
	long long r0, r1, out[5];
	size_t g0, g1;
	uint16_t port = 0;

	signal(SIGTERM, on_term);
	if (make_ctx(&ctx))
		return 1;
	if (use_srq) {
		/* room for every guaranteed window (one data and two
		 * control credits) and a quarter more shared as extras, at
		 * most what mlx5 and softrdma hold */
		unsigned int per = (unsigned int)(n / use_srq + 1);
		struct rdmamsg_srq_attr qa = {
			.max_bufs = per * 3 + per / 4 + 8,
			.buf_size = 256,
		};

		if (qa.max_bufs > 32767)
			qa.max_bufs = 32767;

		for (i = 0; i < use_srq; i++)
			if (!(srq_attrs[i] = small_attr()) ||
			    rdmamsg_srq_create(ctx, &qa, &srq[i]) ||
			    rdmamsg_ep_attr_set_srq(srq_attrs[i], srq[i])) {
				fprintf(stderr,
					"scale_probe: server: SRQ of %u "
					"buffers refused\n",
					qa.max_bufs);
				return 1;
			}
	}
	if (rdmamsg_listen(ctx, "127.0.0.1:0", s_req, NULL, &lst) ||
	    rdmamsg_listener_get_port(lst, &port))
		return 1;
	r0 = rss();
	g0 = registered(ctx);
	if (write(wfd, &port, sizeof(port)) != sizeof(port))
		return 1;
	while (s_up < n && !s_stop)
		drive(ctx, 100);
	r1 = rss();
	g1 = registered(ctx);
	out[0] = (long long)(g1 - g0);
	out[1] = r1 - r0;
	out[2] = s_errors;
	out[3] = 0;
	out[4] = s_up; /* RC: a QP per endpoint */
	if (use_dc) {
		struct rdmamsg_dc_stats dst;

		out[4] = rdmamsg_ctx_dc_stats(ctx, &dst) ? -1
							 : (long long)dst.qps;
	}
	for (i = 0; i < use_srq; i++) {
		rdmamsg_srq_query(srq[i], &st);
		out[3] += (long long)st.registered;
	}
	if (write(wfd, out, sizeof(out)) != sizeof(out))
		return 1;
	/* until the client closed them all (or gave up) */
	while (s_gone < s_up && !s_stop) {
		struct pollfd p = {.fd = rfd, .events = POLLIN};

		drive(ctx, 100);
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLHUP) &&
		    s_gone >= s_up)
			break;
	}
	rdmamsg_listener_close(lst, NULL);
	drive(ctx, 10);
	for (i = 0; i < use_srq; i++) {
		rdmamsg_srq_close(srq[i], NULL, NULL);
		rdmamsg_ep_attr_delete(&srq_attrs[i]);
	}
	drive(ctx, 10); /* the SRQs' close callbacks, from the loop */
	rdmamsg_ctx_destroy(&ctx);
	return s_errors ? 1 : 0;
}

/* ---- client ---------------------------------------------------------- */

struct c_ep {
	struct rdmamsg_ep *ep;
	int up, echoed, closed, failed;
};

static int c_up, c_echoed, c_closed, c_failed, c_inflight;

static void c_connect(struct rdmamsg_ep *ep, int status, int reason,
		      const void *pdata, size_t len, void *arg)
{
	struct c_ep *c = arg;
	uint64_t v = (uint64_t)(uintptr_t)c;

	(void)pdata;
	(void)len;
	c_inflight--;
	if (status) {
		fprintf(stderr, "scale_probe: connect %d: %s (reason %d)\n",
			c_up + c_failed, rdmamsg_strerror(status), reason);
		c->failed = 1;
		c_failed++;
		return;
	}
	c->up = 1;
	c_up++;
	status = rdmamsg_send(ep, &v, sizeof(v), NULL);
	if (status) {
		fprintf(stderr, "scale_probe: send: %s\n",
			rdmamsg_strerror(status));
		c_failed++;
	}
}

static void c_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		   unsigned int flags, void *arg)
{
	struct c_ep *c = arg;
	uint64_t v;

	(void)ep;
	(void)imm;
	(void)flags;
	memcpy(&v, data, sizeof(v));
	if (len == sizeof(v) && v == (uint64_t)(uintptr_t)c && !c->echoed) {
		c->echoed = 1;
		c_echoed++;
	} else {
		fprintf(stderr, "scale_probe: a wrong echo\n");
		c_failed++;
	}
}

static void c_closed_cb(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct c_ep *)arg)->closed = 1;
	c_closed++;
}

static const struct rdmamsg_ep_cbs c_cbs = {
	.on_connect = c_connect,
	.on_recv = c_recv,
};

/* what one client process reports to the parent */
struct c_res {
	long long t_done, reg, rss;
	int up, echoed, failed, next;
};

/* client -- one client process: connect n endpoints (at most window in
 * flight), one echo each, report, wait until the parent says go (every
 * client is up and the server has measured), close them all */
static int client(int n, int window, const char *addr, int wfd, int gofd)
{
	struct rdmamsg_ctx *ctx;
	struct c_ep *eps;
	struct c_res res;
	long long t0, tv, r0;
	size_t g0;
	int i, next = 0;
	char go;

	memset(&res, 0, sizeof(res));
	eps = calloc((size_t)n, sizeof(*eps));
	if (!eps || make_ctx(&ctx))
		return 1;
	if (use_dc) {
		/* DC endpoints receive on their context's SRQ */
		struct rdmamsg_srq_attr qa = {
			.max_bufs = (unsigned int)(n * 4 + n / 4 + 8) > 32767
					    ? 32767
					    : (unsigned int)(n * 4 + n / 4 + 8),
			.buf_size = 256,
		};
		struct rdmamsg_srq *srq;

		if (rdmamsg_srq_create(ctx, &qa, &srq) ||
		    rdmamsg_ep_attr_set_srq(ep_attr, srq)) {
			fprintf(stderr, "scale_probe: client: no SRQ\n");
			return 1;
		}
	}
	r0 = rss();
	g0 = registered(ctx);
	t0 = tv = now_us();
	/* stop at the first refusal to make more (a resource limit), and
	 * report how far it got */
	while ((next < n || c_inflight > 0) && c_failed == 0) {
		while (next < n && c_inflight < window) {
			int ret = rdmamsg_connect(ctx, addr, ep_attr, &c_cbs,
						  &eps[next], &eps[next].ep);

			if (ret) {
				fprintf(stderr, "scale_probe: connect: %s\n",
					rdmamsg_strerror(ret));
				c_failed++;
				break;
			}
			next++;
			c_inflight++;
		}
		drive(ctx, 100);
		if (verbose && now_us() - tv >= 1000000) {
			tv = now_us();
			fprintf(stderr,
				"scale_probe: client %d: %.1f s: %d up, %d in "
				"flight, %d failed\n",
				(int)getpid(), (tv - t0) / 1e6, c_up,
				c_inflight, c_failed);
		}
	}
	res.t_done = now_us();
	while (c_echoed < c_up && c_failed == 0)
		drive(ctx, 100);
	res.rss = rss() - r0;
	res.reg = (long long)(registered(ctx) - g0);
	res.up = c_up;
	res.echoed = c_echoed;
	res.failed = c_failed;
	res.next = next;
	if (write(wfd, &res, sizeof(res)) != sizeof(res))
		return 1;
	if (read(gofd, &go, 1) < 0)
		return 1;
	for (i = 0; i < next; i++)
		if (eps[i].ep)
			rdmamsg_ep_close(eps[i].ep, c_closed_cb);
	while (c_closed < next)
		drive(ctx, 100);
	rdmamsg_ctx_destroy(&ctx);
	free(eps);
	return c_up == n && c_echoed == n && !c_failed ? 0 : 1;
}

int main(int argc, char **argv)
{
	int n = 100, window = 64, nclients = 1, opt, i, p1[2], p2[2], p3[2],
	    p4[2], st = 0, up = 0, echoed = 0, failed = 0;
	long long t0, t1 = 0, reg = 0, rs = 0, srv[5] = {0, -1, 0, 0, 0};
	char addr[64];
	uint16_t port = 0;
	pid_t pid, cpid[64];
	char *end;

	while ((opt = getopt(argc, argv, "n:w:l:sq:t:c:vd")) != -1) {
		switch (opt) {
		case 'd':
			use_dc = 1;
			if (!use_srq)
				use_srq = 1;
			break;
		case 'n':
			n = atoi(optarg);
			break;
		case 'w':
			window = atoi(optarg);
			break;
		case 'l':
			pool_limit = (size_t)strtoull(optarg, NULL, 0) << 20;
			break;
		case 'c':
			nclients = atoi(optarg);
			if (nclients < 1 || nclients > 64)
				return 2;
			break;
		case 'v':
			verbose = 1;
			break;
		case 's':
			use_srq = 1;
			break;
		case 'q':
			use_srq = atoi(optarg);
			if (use_srq < 1 || use_srq > 16)
				return 2;
			break;
		case 't':
			connect_ms = (unsigned int)strtoul(optarg, &end, 10);
			if (*end || !connect_ms || connect_ms > 600000)
				return 2;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-n ENDPOINTS] [-c CLIENTS] "
				"[-w WINDOW] [-l POOL_LIMIT_MIB] [-s] "
				"[-q SRQS] [-t CONNECT_MS] [-v] [-d]\n",
				argv[0]);
			return 2;
		}
	}
	if (n <= 0 || window <= 0 || nclients > n || pipe(p1) || pipe(p2) ||
	    pipe(p3) || pipe(p4))
		return 2;
	if (use_srq && !(ep_attr = small_attr()))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		close(p1[0]);
		close(p2[1]);
		_exit(server(n, p1[1], p2[0]));
	}
	close(p1[1]);
	close(p2[0]);
	if (read(p1[0], &port, sizeof(port)) != sizeof(port))
		return 1;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	t0 = now_us();
	for (i = 0; i < nclients; i++) {
		int k = n / nclients + (i < n % nclients);

		cpid[i] = fork();
		if (cpid[i] < 0)
			return 2;
		if (cpid[i] == 0) {
			close(p3[0]);
			close(p4[1]);
			_exit(client(k, window, addr, p3[1], p4[0]));
		}
	}
	close(p3[1]);
	close(p4[0]);
	for (i = 0; i < nclients; i++) {
		struct c_res r;

		if (read(p3[0], &r, sizeof(r)) != (ssize_t)sizeof(r)) {
			failed++;
			continue;
		}
		up += r.up;
		echoed += r.echoed;
		failed += r.failed;
		reg += r.reg;
		rs += r.rss;
		if (r.t_done > t1)
			t1 = r.t_done;
	}
	if (up == n && read(p1[0], srv, sizeof(srv)) != (ssize_t)sizeof(srv))
		srv[2] = -1;
	close(p4[1]); /* go: the clients close their endpoints */
	for (i = 0; i < nclients; i++) {
		waitpid(cpid[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			failed += !failed;
	}
	close(p2[1]);
	if (up < n)
		kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	printf("scale N=%d clients=%d up=%d echoed=%d connects_per_s=%.0f "
	       "srv_reg_per_ep=%lld srv_rss_per_ep=%lld cli_reg_per_ep=%lld "
	       "cli_rss_per_ep=%lld srv_srq_reg_per_ep=%lld srv_qps=%lld "
	       "errors=%d\n",
	       n, nclients, up, echoed,
	       t1 > t0 ? up * 1e6 / (double)(t1 - t0) : 0.0,
	       up ? srv[0] / up : 0, up ? srv[1] / up : 0, up ? reg / up : 0,
	       up ? rs / up : 0, up ? srv[3] / up : 0, srv[4],
	       failed + (int)srv[2]);
	if (ep_attr)
		rdmamsg_ep_attr_delete(&ep_attr);
	return up == n && echoed == n && !failed && !srv[2] ? 0 : 1;
}
