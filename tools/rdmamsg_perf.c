/* SPDX-License-Identifier: MIT */
/*
 * rdmamsg_perf.c -- latency, bandwidth and message rate of rdmamsg endpoints
 *
 * One program is both ends: "rdmamsg_perf -s" serves, "rdmamsg_perf -c HOST
 * -t lat|bw|rate" measures.  The client says what it measures in the
 * connection's private data.  A bandwidth or rate round ends with a message
 * carrying an immediate value that asks the server for an acknowledgement, so
 * the client's clock covers delivery, not just posting.
 *
 * Three ways to drive the context: block on the context's fd (the default:
 * rdmamsg_ctx_arm(), poll(), rdmamsg_ctx_progress()), --busy (spin on
 * rdmamsg_ctx_progress(); an idle server blocks in poll() instead of
 * spinning), and --ev (a libev loop this program owns).  Busy polling pays
 * only with a spare core per process: on a machine with few cores the two
 * spinning peers take the CPU from each other.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>

#include "rdmamsg.h"

#include "bench.h"

#define PERF_MAGIC	  0x52504631u /* "RPF1" */
#define PERF_DEFAULT_PORT 18600
#define PERF_IMM_ACK	  1 /* "acknowledge this round" */
#define PERF_MAX_SIZES	  32
#define PERF_MAX_MSG	  (64u << 20) /* the library's largest message */
#define PERF_DEFAULT_MSG  (1u << 20)  /* the endpoints' default maximum */
/* an idle server spins this long after the last event, then blocks */
#define PERF_SPIN_NS	     (200 * 1000 * 1000ull)
#define PERF_SPIN_LOOK	     1024 /* busy passes per look at the clock */
#define PERF_CONNECT_WAIT_NS (30 * 1000 * 1000 * 1000ull)
/* a send that cannot go out for this long fails the test */
#define PERF_STALL_NS (10 * 1000 * 1000 * 1000ull)

enum perf_test { PERF_LAT = 0, PERF_BW = 1, PERF_RATE = 2, PERF_MCAST = 3 };
enum perf_drive { DRIVE_FD = 0, DRIVE_BUSY = 1, DRIVE_EV = 2 };

/* the connect private data: what the client measures (network order) */
struct perf_hello {
	uint32_t magic;
	uint32_t test;
	uint32_t max_size;
	uint32_t reserved;
};

struct perf_opts {
	int server;
	int serve_forever;
	const char *host;
	const char *bind;
	unsigned int port;
	enum perf_test test;
	size_t sizes[PERF_MAX_SIZES];
	unsigned int nsizes;
	unsigned long iters;	   /* 0: the test's default */
	unsigned long warmup;	   /* ULONG_MAX: the test's default */
	unsigned long outstanding; /* --window (bw, rate); 0: unbounded */
	long cpu;		   /* --cpu; -1: not pinned */
	enum perf_drive drive;
	int verbose;
	int zcopy;  /* the client sends with rdmamsg_send_buf() */
	int nocopy; /* it sends its one registered buffer, not copied */
	int srq;    /* endpoints receive through a shared receive queue */
	int dc;	    /* the client's endpoint is DC (implies srq) */
	size_t rndv_thresh; /* --rndv-thresh; 0: the library's */
	int info;	    /* --info: print the protocols, measure nothing */
	/* multicast (-P/-L): the group, the role, reliable window, pace */
	const char *group;
	int publisher;
	unsigned long window;
	unsigned long pace;    /* messages per second; 0: as fast as it goes */
	unsigned long linger;  /* ms in the group after the last message;
			       * ULONG_MAX: 1000 */
	unsigned long rdepth;  /* receive depth of the endpoints or of a
				* subscriber; 0: the default (mc_depth) */
	unsigned long poll_us; /* (subscriber) rdmamsg_group_attr_set_poll_us;
				* ULONG_MAX: the library's default */
	unsigned long min_rcv; /* (reliable publisher) subscribers to hear
				* from before the first message */
};

struct perf {
	struct perf_opts o;
	struct ev_loop *loop; /* DRIVE_EV only */
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_srq *srq; /* --srq */
	int fd;
	int active; /* an event happened since the last look */
	int done;
	int status; /* the exit status */

	/* server */
	struct rdmamsg_listener *lst;
	unsigned int nconns;
	unsigned int served;
	void *reply;		     /* --nocopy: lat replies from here */
	struct rdmamsg_mr *reply_mr; /* ... registered once */

	/* client */
	struct rdmamsg_ep *ep;
	int conn_status; /* 1 while connecting, then on_connect's status */
	int conn_reason;
	int down; /* on_disconnect seen */
	int down_status;
	uint64_t replies;
	size_t last_len;
	uint64_t writable;
	unsigned long max_out; /* --window: most messages outstanding seen */
};

/* one accepted connection on the server */
struct perf_conn {
	struct perf *p;
	struct rdmamsg_ep *ep;
	enum perf_test test;
	uint64_t msgs;
	uint64_t bytes;
	uint64_t errors;
	unsigned int acks_owed;
};

static const char *const test_names[] = {"lat", "bw", "rate", "mcast"};

/* perf_log -- the library's log messages go to stderr */
static void perf_log(int level, const char *func, const char *msg, void *arg)
{
	static const char *const names[] = {"error", "warning", "notice",
					    "info", "debug"};

	(void)arg;
	fprintf(stderr, "rdmamsg %s: %s: %s\n",
		level >= 0 && level <= 4 ? names[level] : "?", func, msg);
}

/* perf_wait_fd -- block on the context's fd unless work is pending, then
 * do the work */
static int perf_wait_fd(struct perf *p, int timeout_ms)
{
	struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
	int rc;

	rc = rdmamsg_ctx_arm(p->ctx);
	if (rc == 0) {
		if (poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR)
			return -errno;
	} else if (rc != -EBUSY) {
		return rc;
	}
	return rdmamsg_ctx_progress(p->ctx);
}

/* perf_wait -- one step of the chosen drive: spin once, or block until
 * something happens */
static int perf_wait(struct perf *p)
{
	switch (p->o.drive) {
	case DRIVE_FD:
		return perf_wait_fd(p, 1000);
	case DRIVE_EV:
		ev_run(p->loop, EVRUN_ONCE);
		return 0;
	case DRIVE_BUSY:
	default:
		return rdmamsg_ctx_progress(p->ctx);
	}
}

/* perf_srq_closed -- the SRQ's close callback: it ran */
static void perf_srq_closed(struct rdmamsg_srq *srq, void *arg)
{
	(void)srq;
	*(int *)arg = 1;
}

/* ------------------------------------------------------------------------
 * Server
 * --------------------------------------------------------------------- */

/* srv_send_acks -- send the acknowledgements the client asked for */
static void srv_send_acks(struct perf_conn *c)
{
	int rc;

	while (c->acks_owed > 0) {
		rc = rdmamsg_send(c->ep, "a", 1, NULL);
		if (rc == -EAGAIN)
			return; /* on_writable calls again */
		if (rc < 0) {
			c->errors++;
			return;
		}
		c->acks_owed--;
	}
}

/* srv_on_recv -- echo (lat) or count (bw, rate) one message */
static void srv_on_recv(struct rdmamsg_ep *ep, void *data, size_t len,
			uint32_t imm, unsigned int flags, void *arg)
{
	struct perf_conn *c = arg;

	c->p->active = 1;
	c->msgs++;
	c->bytes += len;
	if (c->test == PERF_LAT) {
		/* --nocopy: a reply as long, from our one registered
		 * buffer, as ucx_perftest's and perftest's responders
		 * send theirs; otherwise the message itself, copied */
		if ((c->p->reply_mr && len <= PERF_DEFAULT_MSG
			     ? rdmamsg_send_nocopy(ep, c->p->reply, len, NULL)
			     : rdmamsg_send(ep, data, len, NULL)) < 0)
			c->errors++;
	} else if ((flags & RDMAMSG_RECV_IMM) && imm == PERF_IMM_ACK) {
		c->acks_owed++;
		srv_send_acks(c);
	}
}

/* srv_on_writable -- credits are back: send the acknowledgements owed */
static void srv_on_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	srv_send_acks(arg);
}

/* srv_listener_closed -- the last client is gone and so is the listener */
static void srv_listener_closed(struct rdmamsg_listener *lst, void *arg)
{
	struct perf *p = arg;

	(void)lst;
	p->lst = NULL;
	p->done = 1;
}

/* srv_close_if_done -- close the listener once no client is left to serve */
static void srv_close_if_done(struct perf *p)
{
	if (!p->o.serve_forever && p->nconns == 0 && p->lst)
		rdmamsg_listener_close(p->lst, srv_listener_closed);
}

/* srv_conn_closed -- free a connection; the single-client server stops when
 * its client is gone */
static void srv_conn_closed(struct rdmamsg_ep *ep, void *arg)
{
	struct perf_conn *c = arg;
	struct perf *p = c->p;

	(void)ep;
	if (p->o.verbose)
		fprintf(stderr,
			"rdmamsg_perf: %s client gone: %" PRIu64
			" messages, %" PRIu64 " bytes, %" PRIu64 " errors\n",
			test_names[c->test], c->msgs, c->bytes, c->errors);
	if (c->errors)
		p->status = 1;
	free(c);
	p->nconns--;
	p->active = 1;
	srv_close_if_done(p);
}

/* srv_on_connect -- a connection that failed after accept is closed */
static void srv_on_connect(struct rdmamsg_ep *ep, int status, int reason,
			   const void *pdata, size_t pdata_len, void *arg)
{
	(void)reason;
	(void)pdata;
	(void)pdata_len;
	if (status == 0)
		return;
	fprintf(stderr, "rdmamsg_perf: accepted connection failed: %s\n",
		rdmamsg_strerror(status));
	((struct perf_conn *)arg)->errors++;
	rdmamsg_ep_close(ep, srv_conn_closed);
}

/* srv_on_disconnect -- the client went away: close our side */
static void srv_on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct perf_conn *c = arg;

	if (status < 0) {
		fprintf(stderr, "rdmamsg_perf: client lost: %s\n",
			rdmamsg_strerror(status));
		c->errors++;
	}
	rdmamsg_ep_close(ep, srv_conn_closed);
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_on_connect,
	.on_recv = srv_on_recv,
	.on_writable = srv_on_writable,
	.on_disconnect = srv_on_disconnect,
};

/* print_protocols -- the sizes at which rdmamsg_send() changes protocol
 * on the client's connection (as ucx_info -e prints UCX's thresholds) */
static void print_protocols(struct perf *p)
{
	const char *e = getenv("RDMAMSG_RNDV_THRESH");
	const char *by = "the connection's default";
	struct rdmamsg_protocols pr;
	size_t pack = 0;

	if (rdmamsg_ep_get_protocols(p->ep, &pr) ||
	    rdmamsg_ep_get_pack_limit(p->ep, &pack))
		return;
	printf("# protocols: inline <= %zu B, eager copy/zero-copy <= %zu B, "
	       "fragments <= %zu B, rendezvous (RDMA READ, %s) <= %zu B; "
	       "maximum message %zu B; queued messages <= %zu B packed%s\n",
	       pr.max_inline, pr.eager, pr.rndv_threshold,
	       pr.rndv_window ? "memory window per transfer"
			      : "registration per transfer",
	       pr.max_large, pr.max_msg, pack,
	       pack ? "" : " (the peer does not pack)");
	if (p->o.rndv_thresh)
		by = "--rndv-thresh";
	else if (e && *e)
		by = "RDMAMSG_RNDV_THRESH";
	printf("# rendezvous threshold %zu B: %s; the peer is %s\n",
	       pr.rndv_threshold, by,
	       pr.peer_local ? "on this host" : "on another host");
}

/* srv_on_conn_req -- accept a client whose hello makes sense */
static void srv_on_conn_req(struct rdmamsg_listener *lst,
			    struct rdmamsg_conn_req *req, const void *pdata,
			    size_t pdata_len, void *arg)
{
	struct perf *p = arg;
	struct rdmamsg_ep_attr *attr = NULL;
	struct perf_hello h;
	struct perf_conn *c;
	uint32_t max_size;
	int rc;

	(void)lst;
	p->active = 1;
	if (pdata_len < sizeof(h)) {
		rdmamsg_conn_req_reject(req, 1, NULL, 0);
		return;
	}
	memcpy(&h, pdata, sizeof(h));
	max_size = ntohl(h.max_size);
	if (ntohl(h.magic) != PERF_MAGIC || ntohl(h.test) > PERF_RATE ||
	    max_size > PERF_MAX_MSG) {
		rdmamsg_conn_req_reject(req, 1, NULL, 0);
		return;
	}
	if (!p->o.serve_forever && p->served > 0) {
		rdmamsg_conn_req_reject(req, 2, NULL, 0); /* busy */
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		goto err_reject;
	c->p = p;
	c->test = (enum perf_test)ntohl(h.test);
	if (max_size > PERF_DEFAULT_MSG || p->srq || p->o.rndv_thresh ||
	    p->o.rdepth) {
		rc = rdmamsg_ep_attr_new(&attr);
		if (rc < 0)
			goto err_free_conn;
		if (max_size > PERF_DEFAULT_MSG)
			rc = rdmamsg_ep_attr_set_max_msg_size(attr, max_size);
		if (rc == 0 && p->o.rdepth)
			rc = rdmamsg_ep_attr_set_recv_depth(
				attr, (unsigned int)p->o.rdepth);
		if (rc == 0 && p->o.rndv_thresh)
			rc = rdmamsg_ep_attr_set_rndv_threshold(
				attr, p->o.rndv_thresh);
		if (rc == 0 && p->srq)
			rc = rdmamsg_ep_attr_set_srq(attr, p->srq);
		if (rc < 0)
			goto err_delete_attr;
	}
	rc = rdmamsg_conn_req_accept(req, attr, &srv_cbs, c, &c->ep);
	if (rc < 0) {
		fprintf(stderr, "rdmamsg_perf: accept: %s\n",
			rdmamsg_strerror(rc));
		goto err_delete_attr;
	}
	rdmamsg_ep_attr_delete(&attr);
	p->nconns++;
	p->served++;
	return;

err_delete_attr:
	rdmamsg_ep_attr_delete(&attr);
err_free_conn:
	free(c);
err_reject:
	rdmamsg_conn_req_reject(req, 3, NULL, 0);
}

static volatile sig_atomic_t srv_signalled;

/* srv_on_signal -- SIGINT/SIGTERM: finish the current clients, then exit */
static void srv_on_signal(int sig)
{
	(void)sig;
	srv_signalled = 1;
}

/* srv_stop -- serve no new client; the listener closes with the last one */
static void srv_stop(struct perf *p)
{
	p->o.serve_forever = 0;
	srv_close_if_done(p);
}

/* srv_drive -- busy-poll while clients are active, block in poll() after
 * PERF_SPIN_NS of silence.  The clock is read once per PERF_SPIN_LOOK
 * passes, not every pass: a clock_gettime costs as much as an idle pass,
 * and a pass that reads it looks at the endpoint that much later (the
 * client's loops read none between polls, nor do ucx_perftest's) */
static int srv_drive(struct perf *p)
{
	uint64_t idle_since = now_ns();
	unsigned int passes = 0;
	int rc = 0;

	while (!p->done && rc >= 0) {
		if (srv_signalled == 1) {
			srv_signalled = 2;
			srv_stop(p);
		}
		if (p->o.drive != DRIVE_BUSY) {
			rc = perf_wait(p);
			continue;
		}
		rc = rdmamsg_ctx_progress(p->ctx);
		if (++passes % PERF_SPIN_LOOK)
			continue;
		if (p->active) {
			p->active = 0;
			idle_since = now_ns();
		} else if (now_ns() - idle_since > PERF_SPIN_NS) {
			rc = perf_wait_fd(p, 1000);
		}
	}
	return rc;
}

/* run_server -- listen, serve one client (or all, with --loop) */
static int run_server(struct perf *p)
{
	struct sigaction sa;
	char addr[300];
	uint16_t port = 0;
	int rc;

	if (p->o.nocopy) {
		rc = rdmamsg_mr_alloc(p->ctx, PERF_DEFAULT_MSG,
				      RDMAMSG_ACCESS_REMOTE_READ, &p->reply_mr);
		if (rc < 0) {
			fprintf(stderr, "rdmamsg_perf: the reply buffer: %s\n",
				rdmamsg_strerror(rc));
			return 1;
		}
		rdmamsg_mr_get_data(p->reply_mr, &p->reply, NULL);
	}
	snprintf(addr, sizeof(addr),
		 strchr(p->o.bind, ':') ? "[%s]:%u" : "%s:%u", p->o.bind,
		 p->o.port);
	rc = rdmamsg_listen(p->ctx, addr, srv_on_conn_req, p, &p->lst);
	if (rc < 0) {
		fprintf(stderr, "rdmamsg_perf: listen on %s: %s\n", addr,
			rdmamsg_strerror(rc));
		if (p->reply_mr)
			rdmamsg_mr_dereg(&p->reply_mr);
		return 1;
	}
	rdmamsg_listener_get_port(p->lst, &port);
	/* Without SA_RESTART, so that a signal ends a blocking poll(); a
	 * second signal kills as usual. */
	sa.sa_handler = srv_on_signal;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("# rdmamsg_perf: listening on port %u\n", port);
	fflush(stdout);
	rc = srv_drive(p);
	if (p->reply_mr && rdmamsg_mr_dereg(&p->reply_mr) < 0)
		rc = rc < 0 ? rc : -EBUSY;
	if (rc < 0) {
		fprintf(stderr, "rdmamsg_perf: %s\n", rdmamsg_strerror(rc));
		return 1;
	}
	return p->status;
}

/* ------------------------------------------------------------------------
 * Client
 * --------------------------------------------------------------------- */

/* cli_on_connect -- record the outcome of the connection attempt */
static void cli_on_connect(struct rdmamsg_ep *ep, int status, int reason,
			   const void *pdata, size_t pdata_len, void *arg)
{
	struct perf *p = arg;

	(void)ep;
	(void)pdata;
	(void)pdata_len;
	p->conn_status = status;
	p->conn_reason = reason;
}

/* cli_on_recv -- a reply (lat) or an acknowledgement (bw, rate) */
static void cli_on_recv(struct rdmamsg_ep *ep, void *data, size_t len,
			uint32_t imm, unsigned int flags, void *arg)
{
	struct perf *p = arg;

	(void)ep;
	(void)data;
	(void)imm;
	(void)flags;
	p->replies++;
	p->last_len = len;
}

/* cli_on_writable -- counted: how often the sender ran out of credits */
static void cli_on_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct perf *)arg)->writable++;
}

/* cli_on_disconnect -- the server went away */
static void cli_on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct perf *p = arg;

	(void)ep;
	p->down = 1;
	p->down_status = status ? status : -ECONNRESET;
}

/* cli_closed -- the endpoint is freed */
static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	struct perf *p = arg;

	(void)ep;
	p->ep = NULL;
	p->done = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_on_connect,
	.on_recv = cli_on_recv,
	.on_writable = cli_on_writable,
	.on_disconnect = cli_on_disconnect,
};

/* cli_close -- close the endpoint and wait until it is freed */
static void cli_close(struct perf *p)
{
	if (!p->ep)
		return;
	p->done = 0;
	if (rdmamsg_ep_close(p->ep, cli_closed) < 0)
		return;
	while (!p->done)
		if (perf_wait(p) < 0)
			break;
}

/* cli_connect -- connect; retry while nothing listens yet (a server started
 * a moment ago), for up to PERF_CONNECT_WAIT_NS */
static int cli_connect(struct perf *p, const struct rdmamsg_ep_attr *attr)
{
	uint64_t deadline = now_ns() + PERF_CONNECT_WAIT_NS;
	struct timespec pause = {0, 100 * 1000 * 1000};
	char addr[300];
	int rc;

	snprintf(addr, sizeof(addr),
		 strchr(p->o.host, ':') ? "[%s]:%u" : "%s:%u", p->o.host,
		 p->o.port);
	for (;;) {
		p->conn_status = 1;
		rc = rdmamsg_connect(p->ctx, addr, attr, &cli_cbs, p, &p->ep);
		if (rc < 0) {
			fprintf(stderr, "rdmamsg_perf: connect %s: %s\n", addr,
				rdmamsg_strerror(rc));
			return rc;
		}
		while (p->conn_status == 1) {
			rc = perf_wait(p);
			if (rc < 0)
				return rc;
		}
		if (p->conn_status == 0)
			return 0;
		rc = p->conn_status;
		cli_close(p);
		/* nothing listens there (yet), no route (yet), or a server
		 * too busy to answer in time */
		if (!((rc == -ECONNREFUSED &&
		       p->conn_reason == RDMAMSG_REJECT_NO_LISTENER) ||
		      rc == -EHOSTUNREACH || rc == -ETIMEDOUT) ||
		    now_ns() > deadline)
			break;
		nanosleep(&pause, NULL);
	}
	if (rc == -ECONNREFUSED && p->conn_reason == 2)
		fprintf(stderr, "rdmamsg_perf: %s: server busy\n", addr);
	else
		fprintf(stderr, "rdmamsg_perf: connect %s: %s (reason %d)\n",
			addr, rdmamsg_strerror(rc), p->conn_reason);
	return rc;
}

/* perf_stalled -- say that a send made no progress for PERF_STALL_NS */
static int perf_stalled(size_t len, int rc)
{
	fprintf(stderr,
		"rdmamsg_perf: a %zu-byte send could not go out for %llu s: "
		"%s\n",
		len, PERF_STALL_NS / 1000000000ull, rdmamsg_strerror(rc));
	return rc;
}

/* cli_send_zcopy -- send a pool buffer without a copy; it is the library's
 * once the send is accepted, so each message takes a fresh one */
static int cli_send_zcopy(struct perf *p, size_t len, int ack)
{
	struct rdmamsg_buf *b = NULL;
	uint64_t t0 = 0;
	int rc;

	for (;;) {
		rc = b ? 0 : rdmamsg_buf_alloc(p->ctx, len ? len : 1, &b);
		if (rc == 0)
			rc = ack ? rdmamsg_send_buf_imm(p->ep, b, len,
							PERF_IMM_ACK, NULL)
				 : rdmamsg_send_buf(p->ep, b, len, NULL);
		if (rc == 0)
			return 0;
		if (rc != -EAGAIN && rc != -ENOMEM)
			break;
		/* no credits, or the pool is full of messages in flight */
		if (!t0)
			t0 = now_ns();
		else if (now_ns() - t0 > PERF_STALL_NS) {
			rc = perf_stalled(len, rc);
			break;
		}
		rc = perf_wait(p);
		if (rc == 0 && p->down)
			rc = p->down_status;
		if (rc < 0)
			break;
	}
	if (b)
		rdmamsg_buf_free(b); /* a failed send leaves it ours */
	return rc;
}

/* cli_send -- send one message, waiting for credits as long as needed */
static int cli_send(struct perf *p, const void *buf, size_t len, int ack)
{
	uint64_t t0 = 0;
	int rc;

	if (p->o.zcopy)
		return cli_send_zcopy(p, len, ack);
	for (;;) {
		if (p->o.nocopy)
			rc = ack ? rdmamsg_send_nocopy_imm(p->ep, buf, len,
							   PERF_IMM_ACK, NULL)
				 : rdmamsg_send_nocopy(p->ep, buf, len, NULL);
		else if (ack)
			rc = rdmamsg_send_imm(p->ep, buf, len, PERF_IMM_ACK,
					      NULL);
		else
			rc = rdmamsg_send(p->ep, buf, len, NULL);
		if (rc != -EAGAIN)
			return rc;
		if (!t0)
			t0 = now_ns();
		else if (now_ns() - t0 > PERF_STALL_NS)
			return perf_stalled(len, rc);
		rc = perf_wait(p);
		if (rc < 0)
			return rc;
		if (p->down)
			return p->down_status;
	}
}

/* cli_wait_replies -- wait until the count of replies reaches want */
static int cli_wait_replies(struct perf *p, uint64_t want)
{
	int rc;

	while (p->replies < want) {
		if (p->down)
			return p->down_status;
		rc = perf_wait(p);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* cmp_u64 -- qsort order */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* cli_lat -- ping-pong iters messages of size bytes; print one-way times */
static int cli_lat(struct perf *p, const char *buf, size_t size,
		   unsigned long iters, unsigned long warmup, uint64_t *rtt)
{
	int tsc = ticks_tsc(), rc;
	double sum = 0, median, ns = ticks_ns(tsc);
	unsigned long i;
	uint64_t t0;

	for (i = 0; i < warmup + iters; i++) {
		t0 = ticks(tsc);
		rc = cli_send(p, buf, size, 0);
		if (rc == 0)
			rc = cli_wait_replies(p, p->replies + 1);
		if (rc < 0)
			return rc;
		if (i >= warmup)
			rtt[i - warmup] = ticks(tsc) - t0;
		if (p->last_len != size) {
			fprintf(stderr,
				"rdmamsg_perf: reply of %zu bytes to %zu\n",
				p->last_len, size);
			return -EPROTO;
		}
	}
	qsort(rtt, iters, sizeof(*rtt), cmp_u64);
	for (i = 0; i < iters; i++)
		sum += (double)rtt[i];
	median = iters % 2 ? (double)rtt[iters / 2]
			   : ((double)rtt[iters / 2 - 1] + rtt[iters / 2]) / 2;
	/* one-way = RTT / 2; ticks -> ns -> us, to the ns (the 8 B rows
	 * differ in tens of ns) */
	printf("%8zu %8lu %10.3f %10.3f %10.3f\n", size, iters,
	       median * ns / 2000, sum / (double)iters * ns / 2000,
	       (double)rtt[(iters * 99 + 99) / 100 - 1] * ns / 2000);
	fflush(stdout);
	return 0;
}

/* cli_round -- send iters messages, the last asking for an acknowledgement;
 * give the time until it came.  With --window N, every ceil(N/2)-th message
 * also asks for one, and message i goes out only once the acknowledgements
 * received cover all but fewer than N of the messages before it: at most N
 * are outstanding (sent, not yet acknowledged by the server's reply) */
static int cli_round(struct perf *p, const char *buf, size_t size,
		     unsigned long iters, uint64_t *ns)
{
	unsigned long i, win = p->o.outstanding;
	unsigned long step = win ? (win + 1) / 2 : iters;
	uint64_t base = p->replies, asked = 0, t0 = now_ns();
	int rc, ack;

	for (i = 0; i < iters; i++) {
		/* each acknowledgement but the last covers step messages */
		while (win && i - (p->replies - base) * step >= win) {
			rc = cli_wait_replies(p, p->replies + 1);
			if (rc < 0)
				return rc;
		}
		if (win && i - (p->replies - base) * step + 1 > p->max_out)
			p->max_out = i - (p->replies - base) * step + 1;
		ack = i + 1 == iters || (i + 1) % step == 0;
		rc = cli_send(p, buf, size, ack);
		if (rc < 0)
			return rc;
		asked += (uint64_t)ack;
	}
	rc = cli_wait_replies(p, base + asked);
	if (rc < 0)
		return rc;
	*ns = now_ns() - t0;
	return 0;
}

/* cli_stream -- bw and rate: a warm-up round, then the measured one */
static int cli_stream(struct perf *p, const char *buf, size_t size,
		      unsigned long iters, unsigned long warmup)
{
	uint64_t ns;
	double secs;
	int rc;

	if (warmup > 0) {
		rc = cli_round(p, buf, size, warmup, &ns);
		if (rc < 0)
			return rc;
	}
	p->max_out = 0;
	rc = cli_round(p, buf, size, iters, &ns);
	if (rc < 0)
		return rc;
	secs = (double)ns / 1e9;
	if (p->o.test == PERF_BW)
		printf("%8zu %8lu %12.2f %10.3f\n", size, iters,
		       (double)size * (double)iters / secs / 1e6,
		       (double)size * (double)iters * 8 / secs / 1e9);
	else
		printf("%8zu %8lu %12.0f %10.3f\n", size, iters,
		       (double)iters / secs, (double)iters / secs / 1e6);
	if (p->o.outstanding)
		printf("# window %lu: at most %lu outstanding\n",
		       p->o.outstanding, p->max_out);
	fflush(stdout);
	return 0;
}

/* run_client -- connect and run the test for every size */
static int run_client(struct perf *p)
{
	static const size_t lat_sizes[] = {8, 64, 512, 4096, 65536};
	static const size_t bw_sizes[] = {1024, 4096, 65536};
	static const size_t rate_sizes[] = {8};
	struct rdmamsg_ep_attr *attr = NULL;
	struct rdmamsg_mr *mr = NULL;
	struct perf_hello h;
	unsigned long iters, warmup;
	uint64_t *rtt = NULL;
	const char *dev = "?";
	size_t max_size = 0;
	char *buf = NULL;
	void *src; /* what it sends: buf, or --nocopy's region */
	unsigned int i;
	int rc;

	if (p->o.nsizes == 0) {
		const size_t *s = p->o.test == PERF_LAT	 ? lat_sizes
				  : p->o.test == PERF_BW ? bw_sizes
							 : rate_sizes;
		size_t n = p->o.test == PERF_LAT  ? 5
			   : p->o.test == PERF_BW ? 3
						  : 1;

		for (i = 0; i < n; i++)
			p->o.sizes[i] = s[i];
		p->o.nsizes = (unsigned int)n;
	}
	for (i = 0; i < p->o.nsizes; i++)
		if (p->o.sizes[i] > max_size)
			max_size = p->o.sizes[i];
	iters = p->o.iters		 ? p->o.iters
		: p->o.test == PERF_RATE ? 100000
					 : 10000;
	warmup = p->o.warmup != ULONG_MAX ? p->o.warmup
		 : iters / 10 < 1000	  ? iters / 10
					  : 1000;

	rc = -ENOMEM;
	buf = malloc(max_size ? max_size : 1);
	if (!buf)
		goto err;
	memset(buf, 0xa5, max_size);
	src = buf;
	if (p->o.test == PERF_LAT) {
		rtt = calloc(iters, sizeof(*rtt));
		if (!rtt)
			goto err_free_buf;
	}
	h.magic = htonl(PERF_MAGIC);
	h.test = htonl((uint32_t)p->o.test);
	h.max_size = htonl((uint32_t)max_size);
	h.reserved = 0;
	rc = rdmamsg_ep_attr_new(&attr);
	if (rc < 0)
		goto err_free_rtt;
	rc = rdmamsg_ep_attr_set_private_data(attr, &h, sizeof(h));
	if (rc == 0 && max_size > PERF_DEFAULT_MSG)
		rc = rdmamsg_ep_attr_set_max_msg_size(attr, max_size);
	if (rc == 0 && p->srq)
		rc = rdmamsg_ep_attr_set_srq(attr, p->srq);
	if (rc == 0 && p->o.dc)
		rc = rdmamsg_ep_attr_set_transport(attr, RDMAMSG_TRANSPORT_DC);
	if (rc == 0 && p->o.rndv_thresh)
		rc = rdmamsg_ep_attr_set_rndv_threshold(attr, p->o.rndv_thresh);
	if (rc == 0 && p->o.rdepth)
		rc = rdmamsg_ep_attr_set_recv_depth(attr,
						    (unsigned int)p->o.rdepth);
	if (rc < 0)
		goto err_delete_attr;
	rc = cli_connect(p, attr);
	if (rc < 0)
		goto err_delete_attr;
	print_protocols(p);
	if (p->o.info)
		goto err_delete_attr; /* rc is 0: done */
	/* --nocopy: every message comes from one registered buffer that
	 * the library made (rdmamsg_mr_alloc), as UCX's perftest sends from
	 * one buffer that ucp_mem_map() allocated */
	if (p->o.nocopy) {
		rc = rdmamsg_mr_alloc(p->ctx, max_size ? max_size : 1,
				      RDMAMSG_ACCESS_REMOTE_READ, &mr);
		if (rc < 0) {
			fprintf(stderr,
				"rdmamsg_perf: registering %zu bytes: %s\n",
				max_size, rdmamsg_strerror(rc));
			goto err_delete_attr;
		}
		rdmamsg_mr_get_data(mr, &src, NULL);
		memcpy(src, buf, max_size);
	}

	rdmamsg_ctx_get_device_name(p->ctx, &dev);
	printf("# rdmamsg_perf %s: %s:%u over %s, %s%s\n",
	       test_names[p->o.test], p->o.host, p->o.port, dev,
	       p->o.drive == DRIVE_FD	? "blocking on the fd"
	       : p->o.drive == DRIVE_EV ? "libev loop"
					: "busy polling",
	       p->o.zcopy    ? ", zero-copy sends"
	       : p->o.nocopy ? ", sends from a registered buffer"
			     : "");
	if (p->o.test == PERF_LAT)
		printf("# one-way latency = round trip / 2, in microseconds\n"
		       "%8s %8s %10s %10s %10s\n",
		       "size", "iters", "median_us", "avg_us", "p99_us");
	else if (p->o.test == PERF_BW)
		printf("%8s %8s %12s %10s\n", "size", "iters", "MB/s", "Gb/s");
	else
		printf("%8s %8s %12s %10s\n", "size", "iters", "msgs/s",
		       "Mmsgs/s");
	fflush(stdout);
	for (i = 0; i < p->o.nsizes && rc == 0; i++) {
		if (p->o.test == PERF_LAT)
			rc = cli_lat(p, src, p->o.sizes[i], iters, warmup, rtt);
		else
			rc = cli_stream(p, src, p->o.sizes[i], iters, warmup);
	}
	if (rc < 0)
		fprintf(stderr, "rdmamsg_perf: %s test: %s\n",
			test_names[p->o.test], rdmamsg_strerror(rc));
err_delete_attr:
	rdmamsg_ep_attr_delete(&attr);
	cli_close(p);
	if (mr && rdmamsg_mr_dereg(&mr) < 0 && rc == 0)
		rc = -EBUSY;
err_free_rtt:
	free(rtt);
err_free_buf:
	free(buf);
err:
	return rc < 0 ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * Multicast: -P GROUP publishes, -L GROUP subscribes
 *
 * Each message starts with a struct perf_mc stamp.  The publisher times
 * each size from its first publish to the last on_publish(); the
 * subscriber takes the one-way latency of every message from the stamp
 * (one host, or namespaces of one host: one CLOCK_MONOTONIC) and stops once
 * it has accounted (received + reported lost) for every message of every
 * size, or after 5 s with nothing new.  With --warmup N (both sides), N
 * untimed messages of one full datagram each go first (their stamp's size
 * is PERF_MC_WARM): the subscribers' receive rings and buffers are touched
 * once before the clock runs, as in a member that has been up a while.
 * --------------------------------------------------------------------- */

#define PERF_MC_IDLE_NS	  (5 * 1000 * 1000 * 1000ull)
#define PERF_MC_WARM	  0xffffffffu /* a warm-up message's size index */
#define PERF_MC_WARM_IDLE 500	      /* ms after the warm-up: drained */
#define PERF_MC_MIN_MAX	  4096	      /* max_msg: a datagram's payload */
#define PERF_MC_DEPTH	  4096	      /* default mode's receive depth */
#define PERF_MC_SLACK	  128	      /* receives above a reliable window */

struct perf_mc {
	uint64_t ns;	/* publish time */
	uint32_t size;	/* index into the sizes */
	uint32_t check; /* ~size: a cheap consistency check */
};

struct perf_mcast {
	struct perf *p;
	struct rdmamsg_group *g;
	int joined; /* 0 joining, 1 joined, negative errno */
	int closed;
	uint64_t done, failed; /* on_publish() seen */
	uint64_t got[PERF_MAX_SIZES], lost, bad, warm, last_ns;
	uint64_t *lat[PERF_MAX_SIZES]; /* one-way, ns; iters each */
	/* when the first and the last of each size came (subscriber) */
	uint64_t first_ns[PERF_MAX_SIZES], last_ns_sz[PERF_MAX_SIZES];
	/* the counters when the warm-up ended (publisher) or the first
	 * timed message came (subscriber): mc_stats prints what followed */
	struct rdmamsg_group_stats st0;
	int timed;
};

static void mc_on_join(struct rdmamsg_group *g, int status, void *arg)
{
	struct perf_mcast *m = arg;

	(void)g;
	m->joined = status ? status : 1;
}

static void mc_on_message(struct rdmamsg_group *g,
			  const struct rdmamsg_group_msg *msg, void *arg)
{
	struct perf_mcast *m = arg;
	uint64_t now = now_ns();
	struct perf_mc h;

	m->last_ns = now;
	if (msg->len < sizeof(h)) {
		m->bad++;
		return;
	}
	memcpy(&h, msg->data, sizeof(h));
	if (h.size == PERF_MC_WARM && h.check == ~h.size) {
		m->warm++;
		return;
	}
	if (!m->timed) {
		m->timed = 1;
		rdmamsg_group_query(g, &m->st0);
		/* (counted already: this one is timed) */
		m->st0.msgs_received--;
		m->st0.bytes_received -= msg->len;
	}
	if (h.size >= m->p->o.nsizes || h.check != ~h.size ||
	    msg->len != m->p->o.sizes[h.size] ||
	    m->got[h.size] >= m->p->o.iters) {
		m->bad++;
		return;
	}
	if (!m->got[h.size])
		m->first_ns[h.size] = now;
	m->last_ns_sz[h.size] = now;
	m->lat[h.size][m->got[h.size]++] = now >= h.ns ? now - h.ns : 0;
}

static void mc_on_loss(struct rdmamsg_group *g, uint64_t pub, uint64_t first,
		       uint64_t count, void *arg)
{
	struct perf_mcast *m = arg;

	(void)g;
	(void)pub;
	(void)first;
	m->lost += count;
	m->last_ns = now_ns();
}

static void mc_on_publish(struct rdmamsg_group *g, void *op_ctx, int status,
			  void *arg)
{
	struct perf_mcast *m = arg;

	(void)g;
	(void)op_ctx;
	m->done++;
	if (status)
		m->failed++;
}

/* mc_stats -- the group's counters since the warm-up as a comment line:
 * datagrams and control traffic per message, what held the publisher,
 * what the subscriber dropped or asked for again */
static void mc_stats(const struct perf_mcast *m)
{
	const struct rdmamsg_group_stats *a = &m->st0;
	struct rdmamsg_group_stats st;

	memset(&st, 0, sizeof(st));
	if (rdmamsg_group_query(m->g, &st))
		return;
	st.msgs_published -= a->msgs_published;
	st.msgs_received -= a->msgs_received;
	st.datagrams_sent -= a->datagrams_sent;
	st.datagrams_received -= a->datagrams_received;
	st.heartbeats_sent -= a->heartbeats_sent;
	st.flow_control_stalls -= a->flow_control_stalls;
	st.naks_sent -= a->naks_sent;
	st.naks_received -= a->naks_received;
	st.repairs -= a->repairs;
	st.repairs_unicast -= a->repairs_unicast;
	st.duplicates -= a->duplicates;
	st.gaps -= a->gaps;
	st.msgs_lost -= a->msgs_lost;
	printf("# stats: published %" PRIu64 " received %" PRIu64
	       " datagrams sent %" PRIu64 " received %" PRIu64
	       " heartbeats %" PRIu64 " stalls %" PRIu64 " naks sent %" PRIu64
	       " received %" PRIu64 " repairs %" PRIu64 " (unicast %" PRIu64
	       ") duplicates %" PRIu64 " gaps %" PRIu64 " lost %" PRIu64
	       " receivers %" PRIu64 "\n",
	       st.msgs_published, st.msgs_received, st.datagrams_sent,
	       st.datagrams_received, st.heartbeats_sent,
	       st.flow_control_stalls, st.naks_sent, st.naks_received,
	       st.repairs, st.repairs_unicast, st.duplicates, st.gaps,
	       st.msgs_lost, st.receivers);
	fflush(stdout);
}

static void mc_on_closed(struct rdmamsg_group *g, void *arg)
{
	struct perf_mcast *m = arg;

	(void)g;
	m->closed = 1;
}

/* mc_idle -- drive the context for ms */
static int mc_idle(struct perf_mcast *m, unsigned long ms)
{
	uint64_t end = now_ns() + ms * 1000000ull;
	int rc = 0;

	while (rc >= 0 && now_ns() < end)
		rc = perf_wait(m->p);
	return rc < 0 ? rc : 0;
}

/* mc_put -- publish len bytes of buf with h, stamped now, in front: 1
 * published, 0 refused for the window (progress waited for: try again),
 * or a negative error */
static int mc_put(struct perf_mcast *m, char *buf, size_t len,
		  struct perf_mc *h)
{
	int rc;

	h->ns = now_ns();
	memcpy(buf, h, sizeof(*h));
	rc = rdmamsg_group_publish(m->g, buf, len, NULL);
	if (rc != -EAGAIN)
		return rc < 0 ? rc : 1;
	if (now_ns() - h->ns > PERF_STALL_NS)
		return -ETIMEDOUT;
	rc = perf_wait(m->p);
	return rc < 0 ? rc : 0;
}

/* mc_warmup -- the untimed warm-up: o->warmup messages of one full
 * datagram each, all completed, then a pause for the subscribers to
 * drain them */
static int mc_warmup(struct perf_mcast *m, char *buf)
{
	unsigned long n = m->p->o.warmup, k;
	struct rdmamsg_group_stats st;
	struct perf_mc h;
	uint64_t t;
	size_t len;
	int rc;

	if (n == ULONG_MAX || !n)
		return 0;
	memset(&st, 0, sizeof(st));
	rdmamsg_group_query(m->g, &st);
	len = st.mtu >= sizeof(h) && st.mtu <= PERF_MC_MIN_MAX
		      ? st.mtu
		      : PERF_MC_MIN_MAX;
	h.size = PERF_MC_WARM;
	h.check = ~h.size;
	for (k = 0; k < n;) {
		rc = mc_put(m, buf, len, &h);
		if (rc < 0)
			return rc;
		k += (unsigned long)rc;
	}
	t = now_ns();
	while (m->done < n) {
		if (now_ns() - t > PERF_STALL_NS)
			return -ETIMEDOUT;
		rc = perf_wait(m->p);
		if (rc < 0)
			return rc;
	}
	m->done = 0;
	m->failed = 0;
	m->timed = 1;
	rdmamsg_group_query(m->g, &m->st0);
	printf("# warm-up: %lu messages of %zu B\n", n, len);
	return mc_idle(m, PERF_MC_WARM_IDLE);
}

/* mc_subscribers -- a reliable publisher with --subscribers N: until it
 * hears from N (the library refuses publishes until then anyway; this
 * keeps the wait out of the timed rows) */
static int mc_subscribers(struct perf_mcast *m)
{
	struct rdmamsg_group_stats st;
	uint64_t t = now_ns();
	int rc;

	if (!m->p->o.min_rcv)
		return 0;
	for (;;) {
		memset(&st, 0, sizeof(st));
		rdmamsg_group_query(m->g, &st);
		if (st.receivers >= m->p->o.min_rcv)
			break;
		if (now_ns() - t > PERF_STALL_NS) {
			fprintf(stderr,
				"rdmamsg_perf: %" PRIu64 " of %lu subscribers "
				"heard from in %llu s\n",
				st.receivers, m->p->o.min_rcv,
				PERF_STALL_NS / 1000000000ull);
			return -ETIMEDOUT;
		}
		rc = perf_wait(m->p);
		if (rc < 0)
			return rc;
	}
	printf("# %" PRIu64 " subscribers heard from\n", st.receivers);
	return 0;
}

/* mc_publish -- iters messages of each size; one line per size */
static int mc_publish(struct perf_mcast *m, char *buf)
{
	const struct perf_opts *o = &m->p->o;
	uint64_t sent = 0, t0, t;
	struct perf_mc h;
	unsigned int i;
	unsigned long k;
	int rc;

	rc = mc_subscribers(m);
	if (rc == 0)
		rc = mc_warmup(m, buf);
	if (rc < 0)
		return rc;

	printf("%8s %8s %12s %10s %10s\n", "size", "iters", "msgs/s", "Mmsgs/s",
	       "MB/s");
	for (i = 0; i < o->nsizes; i++) {
		t0 = now_ns();
		for (k = 0; k < o->iters;) {
			if (o->pace &&
			    (double)(now_ns() - t0) * (double)o->pace / 1e9 <
				    (double)k) {
				rdmamsg_ctx_progress(m->p->ctx);
				continue;
			}
			h.size = i;
			h.check = ~i;
			rc = mc_put(m, buf, o->sizes[i], &h);
			if (rc < 0)
				return rc;
			k += (unsigned long)rc;
			sent += (uint64_t)rc;
		}
		while (m->done < sent) {
			rc = perf_wait(m->p);
			if (rc < 0)
				return rc;
		}
		t = now_ns() - t0;
		printf("%8zu %8lu %12.0f %10.3f %10.1f\n", o->sizes[i],
		       o->iters, (double)o->iters * 1e9 / (double)t,
		       (double)o->iters * 1e3 / (double)t,
		       (double)o->iters * (double)o->sizes[i] * 1e3 /
			       (double)t);
		fflush(stdout);
	}
	return m->failed ? -EIO : 0;
}

/* mc_linger -- stay in the group for the linger time: its idle heartbeats
 * name our last sequence number, so that a subscriber that fell behind
 * and dropped the tail (and our last heartbeat with it) learns of the
 * datagrams it lost */
static int mc_linger(struct perf_mcast *m)
{
	return mc_idle(m, m->p->o.linger == ULONG_MAX ? 1000 : m->p->o.linger);
}

/* mc_subscribe -- receive until every message is accounted for; one line
 * per size */
static int mc_subscribe(struct perf_mcast *m)
{
	const struct perf_opts *o = &m->p->o;
	uint64_t want = (uint64_t)o->iters * o->nsizes, got;

	if (o->warmup != ULONG_MAX)
		want += o->warmup;
	unsigned int i;
	int rc;

	printf("# subscribed\n");
	fflush(stdout);
	m->last_ns = 0;
	for (;;) {
		got = m->lost + m->bad + m->warm;
		for (i = 0; i < o->nsizes; i++)
			got += m->got[i];
		if (got >= want ||
		    (m->last_ns && now_ns() - m->last_ns > PERF_MC_IDLE_NS))
			break;
		rc = perf_wait(m->p);
		if (rc < 0)
			return rc;
	}
	printf("%8s %8s %8s %10s %10s %10s\n", "size", "iters", "received",
	       "median_us", "avg_us", "p99_us");
	for (i = 0; i < o->nsizes; i++) {
		uint64_t n = m->got[i], sum = 0, j;

		for (j = 0; j < n; j++)
			sum += m->lat[i][j];
		qsort(m->lat[i], n, sizeof(uint64_t), cmp_u64);
		printf("%8zu %8lu %8" PRIu64 " %10.2f %10.2f %10.2f\n",
		       o->sizes[i], o->iters, n,
		       n ? (double)m->lat[i][n / 2] / 1e3 : 0.0,
		       n ? (double)sum / (double)n / 1e3 : 0.0,
		       n ? (double)m->lat[i][n * 99 / 100] / 1e3 : 0.0);
	}
	/* the rate they came at, from the first to the last of a size */
	for (i = 0; i < o->nsizes; i++) {
		uint64_t n = m->got[i], t = m->last_ns_sz[i] - m->first_ns[i];

		printf("# received %zu B at %.0f msgs/s\n", o->sizes[i],
		       n > 1 && t ? (double)(n - 1) * 1e9 / (double)t : 0.0);
	}
	printf("# lost %" PRIu64 ", malformed %" PRIu64 "\n", m->lost, m->bad);
	return m->bad ? -EPROTO : 0;
}

/*
 * mc_depth -- a subscriber's receive depth unless --recv-depth says: in
 * reliable mode, when every message fits one datagram, its window and
 * some slack (heartbeats, receives waiting to be posted again), which is
 * all that flow control lets through: more receives only spread the
 * copies over more memory (4 KiB at window 1,024: 4,096 receives cost
 * the publisher and 3 subscribers 6.0 us of CPU a message, 1,152 cost
 * 4.6); else PERF_MC_DEPTH, for bursts a default-mode publisher does not
 * hold back
 */
static uint32_t mc_depth(const struct perf_opts *o, size_t max_size)
{
	if (o->rdepth)
		return (uint32_t)o->rdepth;
	if (o->window && max_size <= PERF_MC_MIN_MAX &&
	    o->window + PERF_MC_SLACK <= PERF_MC_DEPTH)
		return (uint32_t)o->window + PERF_MC_SLACK;
	return PERF_MC_DEPTH;
}

static int run_mcast(struct perf *p)
{
	static const struct rdmamsg_group_cbs cbs = {
		.on_join = mc_on_join,
		.on_message = mc_on_message,
		.on_loss = mc_on_loss,
		.on_publish = mc_on_publish,
	};
	struct rdmamsg_group_attr *attr = NULL;
	struct perf_mcast m;
	size_t max_size = PERF_MC_MIN_MAX; /* a warm-up message fits */
	const char *dev = "?";
	char *buf = NULL;
	unsigned int i;
	int rc;

	memset(&m, 0, sizeof(m));
	m.p = p;
	if (p->o.nsizes == 0) {
		p->o.sizes[0] = 64;
		p->o.sizes[1] = 4096;
		p->o.nsizes = 2;
	}
	if (!p->o.iters)
		p->o.iters = 100000;
	for (i = 0; i < p->o.nsizes; i++) {
		if (p->o.sizes[i] < sizeof(struct perf_mc)) {
			fprintf(stderr,
				"rdmamsg_perf: multicast sizes start "
				"at %zu bytes\n",
				sizeof(struct perf_mc));
			return 1;
		}
		if (p->o.sizes[i] > max_size)
			max_size = p->o.sizes[i];
	}
	rc = -ENOMEM;
	buf = calloc(1, max_size);
	if (!buf)
		goto out;
	for (i = 0; i < p->o.nsizes && !p->o.publisher; i++) {
		m.lat[i] = calloc(p->o.iters, sizeof(uint64_t));
		if (!m.lat[i])
			goto out;
	}
	rc = rdmamsg_group_attr_new(&attr);
	if (rc == 0)
		rc = rdmamsg_group_attr_set_role(
			attr, p->o.publisher ? RDMAMSG_GROUP_PUBLISHER
					     : RDMAMSG_GROUP_SUBSCRIBER);
	if (rc == 0)
		rc = rdmamsg_group_attr_set_max_msg_size(attr, max_size);
	if (rc == 0 && !p->o.publisher)
		rc = rdmamsg_group_attr_set_recv_depth(
			attr, mc_depth(&p->o, max_size));
	if (rc == 0 && p->o.poll_us != ULONG_MAX)
		rc = rdmamsg_group_attr_set_poll_us(attr,
						    (unsigned int)p->o.poll_us);
	if (rc == 0)
		rc = rdmamsg_group_attr_set_reliable(attr,
						     (uint32_t)p->o.window);
	if (rc == 0)
		rc = rdmamsg_group_attr_set_min_receivers(
			attr, (uint32_t)p->o.min_rcv);
	if (rc == 0)
		rc = rdmamsg_group_join(p->ctx, p->o.group, attr, &cbs, &m,
					&m.g);
	rdmamsg_group_attr_delete(&attr);
	if (rc < 0)
		goto out;
	while (!m.joined && (rc = perf_wait(p)) >= 0)
		;
	if (rc >= 0)
		rc = m.joined < 0 ? m.joined : 0;
	if (rc == 0) {
		rdmamsg_ctx_get_device_name(p->ctx, &dev);
		printf("# rdmamsg_perf mcast: %s %s over %s, %s mode%s\n",
		       p->o.publisher ? "publishing to" : "subscribed to",
		       p->o.group, dev, p->o.window ? "reliable" : "default",
		       p->o.pace ? ", paced" : "");
		rc = p->o.publisher ? mc_publish(&m, buf) : mc_subscribe(&m);
	}
	if (rc == 0 && p->o.publisher)
		rc = mc_linger(&m);
	if (rc == 0)
		mc_stats(&m);
	rdmamsg_group_close(m.g, mc_on_closed);
	while (!m.closed && perf_wait(p) >= 0)
		;
out:
	if (rc < 0)
		fprintf(stderr, "rdmamsg_perf: mcast: %s\n",
			rdmamsg_strerror(rc));
	for (i = 0; i < p->o.nsizes; i++)
		free(m.lat[i]);
	free(buf);
	return rc < 0 ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * main
 * --------------------------------------------------------------------- */

static void usage(FILE *f)
{
	static const char text[] =
		"usage: rdmamsg_perf -s [-p PORT] [-b ADDR] [--loop]\n"
		"                    [--fd|--busy|--ev] [--cpu N]\n"
		"       rdmamsg_perf -c HOST [-p PORT] [-t lat|bw|rate]\n"
		"                    [--size N[,N...]] [-n ITERS] [-w WARMUP]\n"
		"                    [--fd|--busy|--ev] [--zcopy|--nocopy] "
		"[--srq] "
		"[--dc]\n"
		"                    [--window N] [--cpu N] [--rndv-thresh N]\n"
		"                    [--recv-depth N] [--info]\n"
		"       rdmamsg_perf -P GROUP|-L GROUP [--size N[,N...]] "
		"[-n ITERS]\n"
		"                    [--reliable WINDOW] [--pace RATE] "
		"[--linger MS]\n"
		"                    [--subscribers N] [--recv-depth N] "
		"[--poll-us US]\n"
		"\n"
		"  -s, --server      serve one client, exit when it leaves\n"
		"  -l, --loop        (server) serve clients until killed\n"
		"  -b, --bind ADDR   (server) local address (default 0.0.0.0)\n"
		"  -c, --client HOST connect to HOST\n"
		"  -p, --port PORT   port (default 18600)\n"
		"  -t, --test TEST   lat: one-way latency (default),\n"
		"                    bw: bandwidth, rate: message rate\n"
		"  -S, --size N,...  message sizes, repeatable (default:\n"
		"                    lat 8,64,512,4096,65536; bw "
		"1024,4096,65536;\n"
		"                    rate 8)\n"
		"  -n, --iters N     iterations per size (default 10000;\n"
		"                    rate 100000)\n"
		"  -w, --warmup N    untimed iterations first\n"
		"                    (default iters/10, at most 1000)\n"
		"      --window N    (bw, rate) at most N messages sent and\n"
		"                    not yet acknowledged by the server\n"
		"                    (default: no bound but credits)\n"
		"      --cpu N       pin the process to CPU N\n"
		"      --rndv-thresh N  rdmamsg_send() goes by rendezvous "
		"above\n"
		"                    N bytes "
		"(rdmamsg_ep_attr_set_rndv_threshold;\n"
		"                    default RDMAMSG_RNDV_THRESH or 32768)\n"
		"      --info        (client) print the protocol thresholds "
		"of\n"
		"                    the connection, measure nothing\n"
		"      --fd          block in poll() on rdmamsg_ctx_get_fd()\n"
		"                    after rdmamsg_ctx_arm() (default)\n"
		"      --busy        spin on rdmamsg_ctx_progress()\n"
		"                    (pays only with a spare core per "
		"process)\n"
		"      --ev          drive the context from a libev loop\n"
		"      --zcopy       send pool buffers with\n"
		"                    rdmamsg_send_buf() instead of copying\n"
		"      --nocopy      send from one buffer of\n"
		"                    rdmamsg_mr_alloc() with\n"
		"                    rdmamsg_send_nocopy() (the server's\n"
		"                    lat replies too, instead of echoing)\n"
		"      --srq         endpoints receive through a shared\n"
		"                    receive queue (rdmamsg_srq_create)\n"
		"      --dc          (client) the endpoint is DC\n"
		"                    (rdmamsg_ep_attr_set_transport; implies\n"
		"                    --srq; the server needs --srq)\n"
		"  -P, --publish G   multicast: publish to group G "
		"(\"239.1.2.3\")\n"
		"  -L, --subscribe G multicast: subscribe to group G (start\n"
		"                    subscribers first; sizes and iters as\n"
		"                    the publisher's; default 64,4096 and\n"
		"                    100000)\n"
		"      --reliable W  multicast reliable mode, window W\n"
		"      --pace RATE   (publisher) at most RATE messages/s\n"
		"      --linger MS   (publisher) stay MS ms in the group "
		"after\n"
		"                    the last message (default 1000)\n"
		"      --subscribers N (reliable publisher) publish once N\n"
		"                    subscribers are heard from, so that they\n"
		"                    get every message (rdmamsg_group_attr_\n"
		"                    set_min_receivers)\n"
		"      --recv-depth N (subscriber) receive buffers posted\n"
		"                    (default 4096; reliable, messages of\n"
		"                    one datagram: the window + 128)\n"
		"                    (server, client) its endpoints' receive\n"
		"                    buffers, the credits the peer gets, a\n"
		"                    fixed window (rdmamsg_ep_attr_set_\n"
		"                    recv_depth, 2 to 4096; default the\n"
		"                    library's: 32, growing to 128)\n"
		"      --poll-us US  (subscriber) after a message, poll for\n"
		"                    US microseconds (yielding the CPU) "
		"before\n"
		"                    blocking (default the library's, 30\n"
		"                    us: rdmamsg_group_attr_set_poll_us)\n"
		"                    (multicast: -w N on both sides: N "
		"untimed\n"
		"                    messages of one datagram each first)\n"
		"  -v, --verbose     library log messages up to info (-vv: "
		"debug)\n";

	fputs(text, f);
}

/* parse_ulong -- a whole decimal number within [min, max] */
static int parse_ulong(const char *s, unsigned long min, unsigned long max,
		       unsigned long *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* parse_sizes -- append a comma-separated list of sizes */
static int parse_sizes(struct perf_opts *o, const char *arg)
{
	char tmp[256], *tok, *save = NULL;
	unsigned long v;

	if (strlen(arg) >= sizeof(tmp))
		return -EINVAL;
	strcpy(tmp, arg);
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == PERF_MAX_SIZES ||
		    parse_ulong(tok, 0, PERF_MAX_MSG, &v) < 0)
			return -EINVAL;
		o->sizes[o->nsizes++] = v;
	}
	return 0;
}

/* parse_args -- fill the options; -1 on a usage error */
static int parse_args(struct perf_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"server", no_argument, NULL, 's'},
		{"loop", no_argument, NULL, 'l'},
		{"bind", required_argument, NULL, 'b'},
		{"client", required_argument, NULL, 'c'},
		{"port", required_argument, NULL, 'p'},
		{"test", required_argument, NULL, 't'},
		{"size", required_argument, NULL, 'S'},
		{"iters", required_argument, NULL, 'n'},
		{"warmup", required_argument, NULL, 'w'},
		{"fd", no_argument, NULL, 'F'},
		{"busy", no_argument, NULL, 'B'},
		{"zcopy", no_argument, NULL, 'Z'},
		{"nocopy", no_argument, NULL, 'O'},
		{"srq", no_argument, NULL, 'Q'},
		{"dc", no_argument, NULL, 'D'},
		{"ev", no_argument, NULL, 'E'},
		{"publish", required_argument, NULL, 'P'},
		{"subscribe", required_argument, NULL, 'L'},
		{"reliable", required_argument, NULL, 'R'},
		{"pace", required_argument, NULL, 'A'},
		{"linger", required_argument, NULL, 'G'},
		{"subscribers", required_argument, NULL, 'U'},
		{"recv-depth", required_argument, NULL, 'd'},
		{"poll-us", required_argument, NULL, 'y'},
		{"window", required_argument, NULL, 'W'},
		{"cpu", required_argument, NULL, 'C'},
		{"rndv-thresh", required_argument, NULL, 'T'},
		{"info", no_argument, NULL, 'I'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	unsigned long v;
	int ch;

	memset(o, 0, sizeof(*o));
	o->port = PERF_DEFAULT_PORT;
	o->bind = "0.0.0.0";
	o->warmup = ULONG_MAX;
	o->linger = ULONG_MAX;
	o->poll_us = ULONG_MAX;
	o->cpu = -1;
	while ((ch = getopt_long(argc, argv, "slb:c:p:t:S:n:w:P:L:vh", longopts,
				 NULL)) != -1) {
		switch (ch) {
		case 's':
			o->server = 1;
			break;
		case 'l':
			o->serve_forever = 1;
			break;
		case 'b':
			o->bind = optarg;
			break;
		case 'c':
			o->host = optarg;
			break;
		case 'p':
			if (parse_ulong(optarg, 1, 65535, &v) < 0)
				return -1;
			o->port = (unsigned int)v;
			break;
		case 't':
			if (!strcmp(optarg, "lat"))
				o->test = PERF_LAT;
			else if (!strcmp(optarg, "bw"))
				o->test = PERF_BW;
			else if (!strcmp(optarg, "rate"))
				o->test = PERF_RATE;
			else
				return -1;
			break;
		case 'S':
			if (parse_sizes(o, optarg) < 0)
				return -1;
			break;
		case 'n':
			if (parse_ulong(optarg, 1, 100000000, &o->iters) < 0)
				return -1;
			break;
		case 'w':
			if (parse_ulong(optarg, 0, 100000000, &o->warmup) < 0)
				return -1;
			break;
		case 'F':
			o->drive = DRIVE_FD;
			break;
		case 'B':
			o->drive = DRIVE_BUSY;
			break;
		case 'Z':
			o->zcopy = 1;
			break;
		case 'O':
			o->nocopy = 1;
			break;
		case 'Q':
			o->srq = 1;
			break;
		case 'D':
			o->dc = 1;
			o->srq = 1;
			break;
		case 'E':
			o->drive = DRIVE_EV;
			break;
		case 'P':
		case 'L':
			if (o->group)
				return -1;
			o->group = optarg;
			o->publisher = ch == 'P';
			o->test = PERF_MCAST;
			break;
		case 'R':
			if (parse_ulong(optarg, 1, 1u << 20, &o->window) < 0)
				return -1;
			break;
		case 'A':
			if (parse_ulong(optarg, 1, 100000000, &o->pace) < 0)
				return -1;
			break;
		case 'G':
			if (parse_ulong(optarg, 0, 600000, &v) < 0)
				return -1;
			o->linger = v;
			break;
		case 'U':
			if (parse_ulong(optarg, 1, 1024, &o->min_rcv) < 0)
				return -1;
			break;
		case 'd':
			if (parse_ulong(optarg, 2, 16384, &o->rdepth) < 0)
				return -1;
			break;
		case 'y':
			if (parse_ulong(optarg, 0, 100000, &o->poll_us) < 0)
				return -1;
			break;
		case 'T':
			if (parse_ulong(optarg, RDMAMSG_RNDV_THRESH_MIN,
					PERF_MAX_MSG, &v) < 0) {
				fprintf(stderr,
					"rdmamsg_perf: --rndv-thresh %s: "
					"want %d to %u\n",
					optarg, RDMAMSG_RNDV_THRESH_MIN,
					PERF_MAX_MSG);
				return -1;
			}
			o->rndv_thresh = v;
			break;
		case 'I':
			o->info = 1;
			break;
		case 'W':
			if (parse_ulong(optarg, 1, 100000000, &o->outstanding) <
			    0) {
				fprintf(stderr,
					"rdmamsg_perf: --window %s: "
					"want 1 to 100000000\n",
					optarg);
				return -1;
			}
			break;
		case 'C':
			if (parse_ulong(optarg, 0, CPU_SETSIZE - 1, &v) < 0) {
				fprintf(stderr,
					"rdmamsg_perf: --cpu %s: want "
					"a CPU number 0 to %d\n",
					optarg, CPU_SETSIZE - 1);
				return -1;
			}
			o->cpu = (long)v;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	if (optind != argc)
		return -1;
	if (o->group) { /* multicast: no server, no client, no TCP-ish test */
		if (o->rdepth && o->rdepth < 16) {
			fprintf(stderr,
				"rdmamsg_perf: --recv-depth %lu: a "
				"subscriber takes 16 to 16384\n",
				o->rdepth);
			return -1;
		}
		if (o->min_rcv && (!o->publisher || !o->window)) {
			fprintf(stderr, "rdmamsg_perf: --subscribers is for "
					"a reliable publisher\n");
			return -1;
		}
		return o->server || o->host || o->outstanding ? -1 : 0;
	}
	if (o->server == !!o->host || o->window || o->pace ||
	    o->linger != ULONG_MAX || o->poll_us != ULONG_MAX || o->min_rcv)
		return -1;
	if (o->rdepth > 4096) {
		fprintf(stderr,
			"rdmamsg_perf: --recv-depth %lu: an endpoint "
			"takes 2 to 4096\n",
			o->rdepth);
		return -1;
	}
	if (o->zcopy && o->nocopy) {
		fprintf(stderr,
			"rdmamsg_perf: --zcopy or --nocopy, not both\n");
		return -1;
	}
	if (o->outstanding && (o->server || o->test == PERF_LAT)) {
		fprintf(stderr, "rdmamsg_perf: --window is for a bw or "
				"rate client\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rdmamsg_ctx_attr *attr = NULL;
	struct perf p;
	int rc, ret = 1, srq_closed = 0;

	memset(&p, 0, sizeof(p));
	if (parse_args(&p.o, argc, argv) < 0) {
		usage(stderr);
		return 2;
	}
	if (p.o.cpu >= 0 && pin_cpu(p.o.cpu) < 0) {
		fprintf(stderr,
			"rdmamsg_perf: --cpu %ld: cannot run there: %s\n",
			p.o.cpu, strerror(errno));
		return 2;
	}
	rdmamsg_log_set_function(perf_log, NULL);
	rdmamsg_log_set_level(p.o.verbose == 0	 ? RDMAMSG_LOG_WARNING
			      : p.o.verbose == 1 ? RDMAMSG_LOG_INFO
						 : RDMAMSG_LOG_DEBUG);

	rc = rdmamsg_ctx_attr_new(&attr);
	if (rc < 0)
		goto err;
	if (p.o.drive == DRIVE_EV) {
		p.loop = ev_loop_new(EVFLAG_AUTO);
		rc = -ENOMEM;
		if (!p.loop)
			goto err_delete_attr;
		rc = rdmamsg_ctx_attr_set_loop(attr, p.loop);
		if (rc < 0)
			goto err_destroy_loop;
	}
	rc = rdmamsg_ctx_create(attr, &p.ctx);
	if (rc < 0)
		goto err_destroy_loop;
	rc = rdmamsg_ctx_get_fd(p.ctx, &p.fd);
	if (rc < 0)
		goto err_destroy_ctx;
	if (p.o.srq) {
		struct rdmamsg_srq_attr sa = {.max_bufs = 256,
					      .buf_size = 8192};

		rc = rdmamsg_srq_create(p.ctx, &sa, &p.srq);
		if (rc < 0) {
			fprintf(stderr, "rdmamsg_perf: SRQ: %s\n",
				rdmamsg_strerror(rc));
			goto err_destroy_ctx;
		}
	}

	ret = p.o.group	   ? run_mcast(&p)
	      : p.o.server ? run_server(&p)
			   : run_client(&p);

	rc = 0;
	if (p.srq &&
	    rdmamsg_srq_close(p.srq, perf_srq_closed, &srq_closed) == 0)
		while (!srq_closed && perf_wait(&p) >= 0)
			; /* the close callback comes from the loop */
err_destroy_ctx:
	if (rdmamsg_ctx_destroy(&p.ctx) < 0)
		ret = 1;
err_destroy_loop:
	if (p.loop)
		ev_loop_destroy(p.loop);
err_delete_attr:
	rdmamsg_ctx_attr_delete(&attr);
err:
	if (rc < 0) {
		fprintf(stderr, "rdmamsg_perf: %s\n", rdmamsg_strerror(rc));
		ret = 1;
	}
	return ret;
}
