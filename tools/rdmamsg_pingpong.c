/* SPDX-License-Identifier: MIT */
/*
 * rdmamsg_pingpong -- one process, one thread, two rdmamsg contexts
 * connected to each other, exchanging messages in ping-pong with
 * rdmamsg_send() and on_recv, driven by rdmamsg_ctx_progress() (busy
 * mode): the loop callgrind counts librdmamsg's and the fabric's
 * instructions per message on (tools/rdmamsg_pingpong-insns.sh), as
 * tools/soft_pingpong does for raw verbs.
 *
 *   RDMAMSG_FABRIC=soft valgrind --tool=callgrind \
 *	tools/rdmamsg_pingpong [-n ITERS] [-s SIZE] [-r] [-w | -i | -t]
 *	[-c CPU0,CPU1]
 *
 * -r connects with RDMAMSG_FAILOVER_REPLAY (the accepting side then keeps
 * its session too): the replay bookkeeping's steady-state cost is the
 * difference against a run without it.
 *
 * -w streams instead: the client sends ITERS messages back to back (both
 * sides progressed whenever a send is refused for credits), the server
 * only counts them: the cost of a streamed message (a message rate).
 *
 * -i polls instead: ITERS progress passes of the client with nothing in
 * flight, the cost of an idle pass (half of which, on average, a busy
 * receiver spends between a message's arrival and its look at it).  Each
 * context opens a device context of its own (lib/ctx.c), so a pass looks
 * at its own QP only, as in two processes.
 *
 * -t runs the ping-pong on two threads instead, each context driven by
 * its own (busy; -c CPU0,CPU1 pins the server's and the client's), and
 * prints the one-way latency, half a round trip's average: what one
 * process's contexts on threads of their own cost each other.  A
 * benchmark's number, not a count.
 *
 * One message (and its echo) goes first, not counted (warm_up).  A
 * message is one rdmamsg_send() (a round trip is two).  Each wait
 * progresses the waiting side, and the other side too after every 64
 * empty passes (nothing to do there in the usual case: a send is in the
 * peer's ring when rdmamsg_send() returns on softrdma).  Prints the
 * message count; exits 1 on any error, or after 60 s without progress.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "rdmamsg.h"

struct side {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	uint64_t got;
	size_t last_len;
	int up, status, closed, echo, echo_owed, errors;
	char *buf;
};

static struct side srv, cli;
static struct rdmamsg_listener *lst;
static int lst_closed, stream, idle, threads;
static int cpus[2] = {-1, -1}; /* -c: the server's, the client's */

static void die(const char *what, int rc)
{
	fprintf(stderr, "rdmamsg_pingpong: %s failed (%d)\n", what, rc);
	exit(1);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_connect(struct rdmamsg_ep *ep, int status, int reason,
		       const void *pdata, size_t len, void *arg)
{
	struct side *s = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	s->up = 1;
	s->status = status;
}

/* echo -- the server's reply (again later if credits are out) */
static void echo(struct side *s, size_t len)
{
	int rc = rdmamsg_send(s->ep, s->buf, len, NULL);

	if (rc == -EAGAIN)
		s->echo_owed = 1;
	else if (rc < 0)
		s->errors++;
	else
		s->echo_owed = 0;
}

static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	struct side *s = arg;

	(void)imm;
	(void)flags;
	if (!s->ep)
		s->ep = ep;
	s->got++;
	s->last_len = len;
	if (s->echo) {
		memcpy(s->buf, data, len);
		echo(s, len);
	}
}

static void on_writable(struct rdmamsg_ep *ep, void *arg)
{
	struct side *s = arg;

	(void)ep;
	if (s->echo_owed)
		echo(s, s->last_len);
}

static void on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)status;
	(void)arg;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = on_connect,
	.on_recv = on_recv,
	.on_writable = on_writable,
	.on_disconnect = on_disconnect,
};

static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	(void)l;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, NULL, &cbs, arg, &srv.ep))
		srv.errors++;
}

static void on_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct side *)arg)->closed = 1;
}

static void on_lst_closed(struct rdmamsg_listener *l, void *arg)
{
	(void)l;
	(void)arg;
	lst_closed = 1;
}

/* run -- progress a (and b after every 64 empty passes) until *flag
 * reaches want */
static void run(struct side *a, struct side *b, volatile uint64_t *flag,
		uint64_t want)
{
	long long end = 0;
	unsigned int spins = 0;

	while (*flag < want) {
		if (rdmamsg_ctx_progress(a->ctx) < 0)
			die("rdmamsg_ctx_progress", 0);
		if (*flag >= want)
			break;
		if (++spins % 64)
			continue;
		if (rdmamsg_ctx_progress(b->ctx) < 0)
			die("rdmamsg_ctx_progress", 0);
		if (!end)
			end = now_ms() + 60000;
		else if (!(spins % 65536) && now_ms() > end)
			die("waiting (60 s)", 0);
	}
}

/* run_flag -- progress both until *flag is set */
static void run_flag(struct side *a, struct side *b, volatile int *flag)
{
	long long end = now_ms() + 60000;

	while (!*flag) {
		rdmamsg_ctx_progress(a->ctx);
		rdmamsg_ctx_progress(b->ctx);
		if (now_ms() > end)
			die("waiting for the connection or the close (60 s)",
			    0);
	}
}

/* pingpong -- the measured loop (callgrind --toggle-collect=pingpong:
 * connection set-up and teardown, whose spinning depends on time, are
 * left out) */
__attribute__((noinline)) static void pingpong(long iters, size_t size)
{
	long i;
	int rc;

	if (idle) {
		for (i = 0; i < iters; i++)
			if (rdmamsg_ctx_progress(cli.ctx) < 0)
				die("rdmamsg_ctx_progress", 0);
		return;
	}
	for (i = 0; stream && i < iters; i++) {
		while ((rc = rdmamsg_send(cli.ep, cli.buf, size, NULL)) ==
		       -EAGAIN) {
			rdmamsg_ctx_progress(srv.ctx);
			rdmamsg_ctx_progress(cli.ctx);
		}
		if (rc < 0)
			die("rdmamsg_send", rc);
	}
	if (stream) {
		run(&srv, &cli, &srv.got, (uint64_t)iters);
		if (srv.last_len != size)
			die("the stream", 0);
		return;
	}
	for (i = 0; i < iters; i++) {
		do {
			rc = rdmamsg_send(cli.ep, cli.buf, size, NULL);
			if (rc == -EAGAIN) { /* credits out: both move */
				rdmamsg_ctx_progress(srv.ctx);
				rdmamsg_ctx_progress(cli.ctx);
			}
		} while (rc == -EAGAIN);
		if (rc < 0)
			die("rdmamsg_send", rc);
		run(&srv, &cli, &srv.got, (uint64_t)i + 1);
		run(&cli, &srv, &cli.got, (uint64_t)i + 1);
		if (cli.last_len != size || srv.errors)
			die("the echo", srv.errors);
	}
}

/* pin -- the calling thread on CPU c (-1: anywhere) */
static void pin(int c)
{
	if (c >= 0 && pin_cpu(c))
		die("sched_setaffinity", -errno);
}

static atomic_int srv_stop;

/* srv_thread -- -t: the server's context, busy, until the client is done
 * (its echoes go from on_recv) */
static void *srv_thread(void *arg)
{
	(void)arg;
	pin(cpus[0]);
	while (!atomic_load_explicit(&srv_stop, memory_order_relaxed))
		if (rdmamsg_ctx_progress(srv.ctx) < 0)
			die("rdmamsg_ctx_progress", 0);
	return NULL;
}

/* pingpong_threads -- -t: the client's round trips on this thread, the
 * server's on another; prints the one-way latency */
static void pingpong_threads(long iters, size_t size)
{
	uint64_t t0, ns;
	pthread_t th;
	long i;
	int rc;

	rc = pthread_create(&th, NULL, srv_thread, NULL);
	if (rc)
		die("pthread_create", rc);
	pin(cpus[1]);
	t0 = now_ns();
	for (i = 0; i < iters; i++) {
		while ((rc = rdmamsg_send(cli.ep, cli.buf, size, NULL)) ==
		       -EAGAIN)
			rdmamsg_ctx_progress(cli.ctx);
		if (rc < 0)
			die("rdmamsg_send", rc);
		while (cli.got < (uint64_t)i + 1)
			if (rdmamsg_ctx_progress(cli.ctx) < 0)
				die("rdmamsg_ctx_progress", 0);
	}
	ns = now_ns() - t0;
	atomic_store(&srv_stop, 1);
	pthread_join(th, NULL);
	if (cli.last_len != size || srv.errors)
		die("the echo", srv.errors);
	printf("one-way latency %.3f us (%ld round trips, two threads)\n",
	       (double)ns / (double)iters / 2e3, iters);
}

/* warm_up -- one message there (and back when the server echoes), not
 * counted: the server grants its credits in-band once the connection is
 * up, when its progress next reads the CM channel (a clock decides), and
 * a counted loop that waited for the grant varied with the load */
static void warm_up(size_t size)
{
	int rc;

	while ((rc = rdmamsg_send(cli.ep, cli.buf, size, NULL)) == -EAGAIN) {
		rdmamsg_ctx_progress(srv.ctx);
		rdmamsg_ctx_progress(cli.ctx);
	}
	if (rc < 0)
		die("rdmamsg_send", rc);
	run(&srv, &cli, &srv.got, 1);
	if (srv.echo)
		run(&cli, &srv, &cli.got, 1);
	srv.got = cli.got = 0;
}

int main(int argc, char **argv)
{
	long iters = 100000;
	size_t size = 8;
	uint16_t port;
	char addr[64];
	struct rdmamsg_ep_attr *attr = NULL;
	int opt, rc, replay = 0;

	while ((opt = getopt(argc, argv, "n:s:rwitc:")) != -1) {
		switch (opt) {
		case 'n':
			iters = atol(optarg);
			break;
		case 's':
			size = (size_t)atol(optarg);
			break;
		case 'r':
			replay = 1;
			break;
		case 'w':
			stream = 1;
			break;
		case 'i':
			idle = 1;
			break;
		case 't':
			threads = 1;
			break;
		case 'c':
			if (cpu_pair(optarg, &cpus[0], &cpus[1]))
				return 2;
			break;
		default:
			fprintf(stderr, "usage: rdmamsg_pingpong [-n ITERS] "
					"[-s SIZE] [-r] [-w | -i | -t] "
					"[-c CPU0,CPU1]\n");
			return 2;
		}
	}
	if (iters < 1 || size < 1 || size > (1u << 20) ||
	    stream + idle + threads > 1)
		return 2;
	srv.buf = calloc(1, size);
	cli.buf = calloc(1, size);
	if (!srv.buf || !cli.buf)
		die("calloc", 0);
	srv.echo = !stream;
	if ((rc = rdmamsg_ctx_create(NULL, &srv.ctx)) ||
	    (rc = rdmamsg_ctx_create(NULL, &cli.ctx)))
		die("rdmamsg_ctx_create", rc);
	if ((rc = rdmamsg_listen(srv.ctx, "127.0.0.1:0", on_req, &srv, &lst)))
		die("rdmamsg_listen", rc);
	rdmamsg_listener_get_port(lst, &port);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	if (replay && ((rc = rdmamsg_ep_attr_new(&attr)) ||
		       (rc = rdmamsg_ep_attr_set_failover(
				attr, RDMAMSG_FAILOVER_REPLAY))))
		die("the replay attribute", rc);
	rc = rdmamsg_connect(cli.ctx, addr, attr, &cbs, &cli, &cli.ep);
	rdmamsg_ep_attr_delete(&attr);
	if (rc)
		die("rdmamsg_connect", rc);
	run_flag(&cli, &srv, &cli.up);
	if (cli.status)
		die("connect", cli.status);
	warm_up(size);
	if (threads)
		pingpong_threads(iters, size);
	else
		pingpong(iters, size);
	if (idle)
		printf("%ld idle passes\n", iters);
	else
		printf("%ld messages of %zu bytes\n",
		       stream ? iters : 2 * iters, size);
	rdmamsg_ep_close(cli.ep, on_closed);
	run_flag(&cli, &srv, &cli.closed);
	if (srv.ep) {
		rdmamsg_ep_close(srv.ep, on_closed);
		run_flag(&srv, &cli, &srv.closed);
	}
	rdmamsg_listener_close(lst, on_lst_closed);
	run_flag(&srv, &cli, &lst_closed);
	rdmamsg_ctx_destroy(&cli.ctx);
	rdmamsg_ctx_destroy(&srv.ctx);
	free(srv.buf);
	free(cli.buf);
	return 0;
}
