/* SPDX-License-Identifier: MIT */
/*
 * pingpong.c -- ping-pong messages over rdmamsg inside a libev loop
 *
 *   pingpong -s [-p PORT] [-b ADDR]                server: echo one client
 *   pingpong -c HOST [-p PORT] [-n N] [--size N]   client
 *
 * The program owns the libev loop and hands it to rdmamsg through the context
 * attributes; everything then happens in callbacks.  The client sends N
 * messages one at a time, checks that every echo carries exactly the bytes it
 * sent, and prints round-trip statistics.  Both sides end when their last
 * rdmamsg object is closed: the library keeps the loop alive only while an
 * endpoint or listener exists, so ev_run() simply returns.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>

#include "rdmamsg.h"

#define DEFAULT_PORT 18610
#define MAX_SIZE     (64u << 20) /* rdmamsg's largest message */

struct pingpong {
	struct ev_loop *loop;
	struct rdmamsg_ctx *ctx;
	ev_signal sigint;
	ev_signal sigterm;
	struct rdmamsg_listener *lst;
	struct rdmamsg_ep *ep;
	struct rdmamsg_ep_attr *ep_attr; /* --ack-timeout, else NULL */
	int status;			 /* exit status */

	/* client */
	unsigned long count; /* messages to send */
	unsigned long received;
	size_t size;
	unsigned char *msg; /* the message in flight */
	uint64_t sent_at;
	uint64_t *rtt; /* nanoseconds, one per message */
	uint64_t started;
};

/* now_ns -- monotonic time in nanoseconds */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* fill -- the bytes of message number seq; the echo must match them */
static void fill(unsigned char *buf, size_t size, unsigned long seq)
{
	size_t i;

	for (i = 0; i < size; i++)
		buf[i] = (unsigned char)(seq * 131 + i * 7 + (i >> 8));
}

/* ep_closed -- the endpoint is gone; the listener (if any) goes next */
static void ep_closed(struct rdmamsg_ep *ep, void *arg)
{
	struct pingpong *pp = arg;

	(void)ep;
	pp->ep = NULL;
	if (pp->lst)
		rdmamsg_listener_close(pp->lst, NULL);
	pp->lst = NULL;
	/* no rdmamsg object is left: ev_run() returns */
}

/* shutdown_all -- close whatever is open (a signal, an error, the end) */
static void shutdown_all(struct pingpong *pp)
{
	if (pp->ep) {
		if (rdmamsg_ep_close(pp->ep, ep_closed) == -EALREADY)
			return; /* already on its way */
	} else if (pp->lst) {
		rdmamsg_listener_close(pp->lst, NULL);
		pp->lst = NULL;
	}
}

/* on_signal -- Ctrl-C: close everything and let the loop run out */
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct pingpong *pp = w->data;

	(void)loop;
	(void)revents;
	fprintf(stderr, "pingpong: interrupted\n");
	pp->status = 1;
	shutdown_all(pp);
}

/* on_disconnect -- the peer went away */
static void on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct pingpong *pp = arg;

	(void)ep;
	if (status < 0 || (pp->msg && pp->received < pp->count)) {
		fprintf(stderr, "pingpong: peer gone: %s\n",
			status ? rdmamsg_strerror(status) : "closed early");
		pp->status = 1;
	}
	shutdown_all(pp);
}

/* ------------------------------------------------------------------------
 * Server: echo every message of one client.
 * --------------------------------------------------------------------- */

/* srv_on_recv -- send the message back; data is ours only until return,
 * and rdmamsg_send() copies it */
static void srv_on_recv(struct rdmamsg_ep *ep, void *data, size_t len,
			uint32_t imm, unsigned int flags, void *arg)
{
	struct pingpong *pp = arg;
	int rc;

	(void)imm;
	(void)flags;
	rc = rdmamsg_send(ep, data, len, NULL);
	if (rc < 0) {
		/* one message in flight at a time: no -EAGAIN from a
		 * well-behaved client */
		fprintf(stderr, "pingpong: echo: %s\n", rdmamsg_strerror(rc));
		pp->status = 1;
		shutdown_all(pp);
	}
}

/* srv_on_connect -- the accepted connection is up (or failed) */
static void srv_on_connect(struct rdmamsg_ep *ep, int status, int reason,
			   const void *pdata, size_t pdata_len, void *arg)
{
	struct pingpong *pp = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)pdata_len;
	if (status == 0) {
		printf("pingpong: client connected\n");
		fflush(stdout);
		return;
	}
	fprintf(stderr, "pingpong: connection failed: %s\n",
		rdmamsg_strerror(status));
	pp->status = 1;
	shutdown_all(pp);
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_on_connect,
	.on_recv = srv_on_recv,
	.on_disconnect = on_disconnect,
};

/* srv_on_conn_req -- take the first client, refuse the others */
static void srv_on_conn_req(struct rdmamsg_listener *lst,
			    struct rdmamsg_conn_req *req, const void *pdata,
			    size_t pdata_len, void *arg)
{
	struct pingpong *pp = arg;
	int rc;

	(void)lst;
	(void)pdata;
	(void)pdata_len;
	if (pp->ep) {
		rdmamsg_conn_req_reject(req, 1, "busy", 4);
		return;
	}
	rc = rdmamsg_conn_req_accept(req, pp->ep_attr, &srv_cbs, pp, &pp->ep);
	if (rc < 0) {
		fprintf(stderr, "pingpong: accept: %s\n", rdmamsg_strerror(rc));
		rdmamsg_conn_req_reject(req, 2, NULL, 0);
	}
}

/* ------------------------------------------------------------------------
 * Client: send count messages one at a time and time each round trip.
 * --------------------------------------------------------------------- */

/* cli_send_next -- send the next message */
static void cli_send_next(struct pingpong *pp)
{
	int rc;

	fill(pp->msg, pp->size, pp->received);
	pp->sent_at = now_ns();
	rc = rdmamsg_send(pp->ep, pp->msg, pp->size, NULL);
	if (rc < 0) {
		fprintf(stderr, "pingpong: send: %s\n", rdmamsg_strerror(rc));
		pp->status = 1;
		shutdown_all(pp);
	}
}

/* cmp_u64 -- qsort order */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* cli_report -- round-trip statistics in microseconds */
static void cli_report(struct pingpong *pp)
{
	unsigned long n = pp->count, i;
	double sum = 0, secs = (double)(now_ns() - pp->started) / 1e9;

	qsort(pp->rtt, n, sizeof(*pp->rtt), cmp_u64);
	for (i = 0; i < n; i++)
		sum += (double)pp->rtt[i];
	printf("pingpong: %lu messages of %zu bytes verified in %.3f s\n", n,
	       pp->size, secs);
	printf("pingpong: round trip us: min %.2f median %.2f avg %.2f "
	       "p99 %.2f max %.2f\n",
	       (double)pp->rtt[0] / 1e3, (double)pp->rtt[n / 2] / 1e3,
	       sum / (double)n / 1e3,
	       (double)pp->rtt[(n * 99 + 99) / 100 - 1] / 1e3,
	       (double)pp->rtt[n - 1] / 1e3);
	fflush(stdout);
}

/* cli_on_recv -- check the echo, time it, send the next message or stop */
static void cli_on_recv(struct rdmamsg_ep *ep, void *data, size_t len,
			uint32_t imm, unsigned int flags, void *arg)
{
	struct pingpong *pp = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (pp->received >= pp->count)
		return;
	pp->rtt[pp->received] = now_ns() - pp->sent_at;
	/* pp->msg still holds what was sent: rdmamsg_send() copied it */
	if (len != pp->size || memcmp(data, pp->msg, len) != 0) {
		fprintf(stderr,
			"pingpong: message %lu: echo of %zu bytes differs\n",
			pp->received, len);
		pp->status = 1;
		shutdown_all(pp);
		return;
	}
	if (++pp->received < pp->count) {
		cli_send_next(pp);
		return;
	}
	cli_report(pp);
	shutdown_all(pp);
}

/* cli_on_connect -- start sending, or report why we could not connect */
static void cli_on_connect(struct rdmamsg_ep *ep, int status, int reason,
			   const void *pdata, size_t pdata_len, void *arg)
{
	struct pingpong *pp = arg;
	size_t max = 0;

	if (status < 0) {
		fprintf(stderr, "pingpong: connect: %s",
			rdmamsg_strerror(status));
		if (status == -ECONNREFUSED &&
		    reason == RDMAMSG_REJECT_NO_LISTENER)
			fprintf(stderr, " (nothing listens there)");
		else if (status == -ECONNREFUSED)
			/* the server's reason and private data */
			fprintf(stderr, " (reason %d: %.*s)", reason,
				(int)pdata_len, (const char *)pdata);
		fprintf(stderr, "\n");
		pp->status = 1;
		shutdown_all(pp);
		return;
	}
	rdmamsg_ep_get_max_msg_size(ep, &max);
	if (pp->size > max) {
		fprintf(stderr,
			"pingpong: %zu bytes exceed the connection's "
			"maximum of %zu\n",
			pp->size, max);
		pp->status = 1;
		shutdown_all(pp);
		return;
	}
	printf("pingpong: connected, sending %lu messages of %zu bytes\n",
	       pp->count, pp->size);
	fflush(stdout);
	pp->started = now_ns();
	cli_send_next(pp);
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_on_connect,
	.on_recv = cli_on_recv,
	.on_disconnect = on_disconnect,
};

/* ------------------------------------------------------------------------
 * main
 * --------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pingpong -s [-p PORT] [-b ADDR] [-t EXP]\n"
		"       pingpong -c HOST [-p PORT] [-n COUNT] [--size BYTES] "
		"[-t EXP]\n"
		"  -s, --server     echo the messages of one client, then "
		"exit\n"
		"  -b, --bind ADDR  (server) local address (default 0.0.0.0)\n"
		"  -c, --client HOST\n"
		"  -p, --port PORT  (default %u)\n"
		"  -n, --count N    messages to send (default 1000)\n"
		"  -S, --size N     bytes per message (default 64)\n"
		"  -t, --ack-timeout EXP\n"
		"                   the QP's ACK timeout, 4.096 us x 2^EXP "
		"(1-31;\n"
		"                   default rdma_cm's): lower it on lossy "
		"links\n",
		DEFAULT_PORT);
}

/* parse_num -- a whole decimal number within [min, max] */
static int parse_num(const char *s, unsigned long min, unsigned long max,
		     unsigned long *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* log_stderr -- the library's warnings and errors go to stderr */
static void log_stderr(int level, const char *func, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	fprintf(stderr, "rdmamsg: %s: %s\n", func, msg);
}

/* start -- listen or connect, according to the options */
static int start(struct pingpong *pp, const char *host, const char *bind_addr,
		 unsigned long port)
{
	const char *name = host ? host : bind_addr;
	char addr[300];
	int rc;

	/* "host:port", or "[v6addr]:port" */
	snprintf(addr, sizeof(addr), strchr(name, ':') ? "[%s]:%lu" : "%s:%lu",
		 name, port);
	if (!host) {
		rc = rdmamsg_listen(pp->ctx, addr, srv_on_conn_req, pp,
				    &pp->lst);
		if (rc == 0) {
			printf("pingpong: listening on %s\n", addr);
			fflush(stdout);
		}
	} else {
		rc = -ENOMEM;
		pp->msg = malloc(pp->size ? pp->size : 1);
		pp->rtt = calloc(pp->count, sizeof(*pp->rtt));
		if (pp->msg && pp->rtt)
			rc = rdmamsg_connect(pp->ctx, addr, pp->ep_attr,
					     &cli_cbs, pp, &pp->ep);
	}
	if (rc < 0)
		fprintf(stderr, "pingpong: %s %s: %s\n",
			host ? "connect" : "listen on", addr,
			rdmamsg_strerror(rc));
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"server", no_argument, NULL, 's'},
		{"client", required_argument, NULL, 'c'},
		{"bind", required_argument, NULL, 'b'},
		{"port", required_argument, NULL, 'p'},
		{"count", required_argument, NULL, 'n'},
		{"size", required_argument, NULL, 'S'},
		{"ack-timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct rdmamsg_ctx_attr *attr = NULL;
	const char *host = NULL, *bind_addr = "0.0.0.0";
	unsigned long port = DEFAULT_PORT, v;
	struct pingpong pp;
	int server = 0, ch, rc;

	memset(&pp, 0, sizeof(pp));
	pp.count = 1000;
	pp.size = 64;
	while ((ch = getopt_long(argc, argv, "sc:b:p:n:S:t:h", longopts,
				 NULL)) != -1) {
		switch (ch) {
		case 's':
			server = 1;
			break;
		case 'c':
			host = optarg;
			break;
		case 'b':
			bind_addr = optarg;
			break;
		case 'p':
			if (parse_num(optarg, 1, 65535, &port) < 0)
				goto usage;
			break;
		case 'n':
			if (parse_num(optarg, 1, 100000000, &pp.count) < 0)
				goto usage;
			break;
		case 'S':
			if (parse_num(optarg, 0, MAX_SIZE, &v) < 0)
				goto usage;
			pp.size = v;
			break;
		case 't':
			/* a lost tail waits out the ACK timeout (rdma_cm's
			 * 18: 1.07 s); on a lossy link, ask for less */
			if (parse_num(optarg, 1, 31, &v) < 0 ||
			    (!pp.ep_attr && rdmamsg_ep_attr_new(&pp.ep_attr)) ||
			    rdmamsg_ep_attr_set_ack_timeout(pp.ep_attr,
							    (unsigned int)v))
				goto usage;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc || server == !!host)
		goto usage;

	rdmamsg_log_set_function(log_stderr, NULL);
	pp.loop = ev_loop_new(EVFLAG_AUTO);
	if (!pp.loop) {
		fprintf(stderr, "pingpong: cannot make a libev loop\n");
		return 1;
	}
	rc = rdmamsg_ctx_attr_new(&attr);
	if (rc == 0)
		rc = rdmamsg_ctx_attr_set_loop(attr, pp.loop);
	if (rc == 0)
		rc = rdmamsg_ctx_create(attr, &pp.ctx);
	rdmamsg_ctx_attr_delete(&attr);
	if (rc < 0) {
		fprintf(stderr, "pingpong: context: %s\n",
			rdmamsg_strerror(rc));
		goto err_destroy_loop;
	}

	/* our own watchers: Ctrl-C and kill close everything gracefully.
	 * They are unref'd so that they alone do not keep the loop running */
	ev_signal_init(&pp.sigint, on_signal, SIGINT);
	ev_signal_init(&pp.sigterm, on_signal, SIGTERM);
	pp.sigint.data = pp.sigterm.data = &pp;
	ev_signal_start(pp.loop, &pp.sigint);
	ev_unref(pp.loop);
	ev_signal_start(pp.loop, &pp.sigterm);
	ev_unref(pp.loop);

	rc = start(&pp, host, bind_addr, port);
	if (rc == 0)
		ev_run(pp.loop, 0); /* returns once nothing is left */
	else
		pp.status = 1;

	ev_ref(pp.loop);
	ev_signal_stop(pp.loop, &pp.sigterm);
	ev_ref(pp.loop);
	ev_signal_stop(pp.loop, &pp.sigint);
	rc = rdmamsg_ctx_destroy(&pp.ctx);
	if (rc < 0) {
		fprintf(stderr, "pingpong: destroy: %s\n",
			rdmamsg_strerror(rc));
		pp.status = 1;
	}
	free(pp.rtt);
	free(pp.msg);
	ev_loop_destroy(pp.loop);
	rdmamsg_ep_attr_delete(&pp.ep_attr);
	return pp.status;

err_destroy_loop:
	ev_loop_destroy(pp.loop);
	rdmamsg_ep_attr_delete(&pp.ep_attr);
	return 1;
usage:
	usage(stderr);
	rdmamsg_ep_attr_delete(&pp.ep_attr);
	return 2;
}
