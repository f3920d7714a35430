/* SPDX-License-Identifier: MIT */
/*
 * echo_server.c -- an rdmamsg server embedded in the caller's libev loop
 *
 *   echo_server [-p PORT] [-b ADDR] [-i SECONDS]
 *
 * The loop belongs to this program and carries its own watchers next to
 * rdmamsg's: a repeating timer prints statistics, and a stdin watcher reads
 * commands ("stats", "quit").  "quit" or end of input shuts down gracefully:
 * the listener is closed, every endpoint is closed asynchronously, our
 * watchers are stopped, and ev_run() returns because nothing is active.
 *
 * Every message is echoed back without a copy: rdmamsg_recv_keep() takes the
 * receive buffer and rdmamsg_send_buf() sends it, handing it back to the
 * library.  When the peer has no credits left the buffer waits in a queue
 * until on_writable.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ev.h>

#include "rdmamsg.h"

#define DEFAULT_PORT 18610
#define MAX_QUEUED   4096 /* echoes waiting for credits, per client */

/* an echo waiting for credits */
struct pending {
	struct pending *next;
	struct rdmamsg_buf *buf; /* NULL: a copy follows this header */
	size_t len;
	uint32_t imm;
	int has_imm;
};

/* one client */
struct client {
	struct server *srv;
	struct client *prev, *next;
	struct rdmamsg_ep *ep;
	unsigned int id;
	uint64_t msgs;
	uint64_t bytes;
	struct pending *head, *tail; /* waiting for on_writable */
	unsigned int queued;
};

struct server {
	struct ev_loop *loop;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	ev_timer stats;
	ev_io input;
	char line[256];
	size_t line_len;
	struct client *clients; /* connected and closing */
	unsigned int next_id;
	uint64_t msgs; /* echoed, all clients */
	uint64_t bytes;
	uint64_t last_msgs;
	int quitting;
	int status;
};

/* ------------------------------------------------------------------------
 * Clients
 * --------------------------------------------------------------------- */

/* client_closed -- the endpoint is freed: drop the client */
static void client_closed(struct rdmamsg_ep *ep, void *arg)
{
	struct client *c = arg;
	struct pending *q;

	(void)ep;
	while ((q = c->head)) {
		c->head = q->next;
		if (q->buf)
			rdmamsg_buf_free(q->buf);
		free(q);
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		c->srv->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	printf("client %u: closed after %" PRIu64 " messages, %" PRIu64
	       " bytes\n",
	       c->id, c->msgs, c->bytes);
	fflush(stdout);
	free(c);
}

/* client_close -- start closing; client_closed finishes */
static void client_close(struct client *c)
{
	rdmamsg_ep_close(c->ep, client_closed); /* -EALREADY is fine */
}

/* echo -- send one message back: the kept buffer without a copy, or the
 * data with one; -EAGAIN when out of credits (nothing was sent) */
static int echo(struct client *c, struct rdmamsg_buf *buf, const void *data,
		size_t len, int has_imm, uint32_t imm)
{
	if (buf)
		return has_imm ? rdmamsg_send_buf_imm(c->ep, buf, len, imm,
						      NULL)
			       : rdmamsg_send_buf(c->ep, buf, len, NULL);
	return has_imm ? rdmamsg_send_imm(c->ep, data, len, imm, NULL)
		       : rdmamsg_send(c->ep, data, len, NULL);
}

/* enqueue -- keep an echo for on_writable */
static int enqueue(struct client *c, struct rdmamsg_buf *buf, const void *data,
		   size_t len, int has_imm, uint32_t imm)
{
	struct pending *q;

	if (c->queued >= MAX_QUEUED)
		return -ENOBUFS;
	q = malloc(sizeof(*q) + (buf ? 0 : len));
	if (!q)
		return -ENOMEM;
	q->next = NULL;
	q->buf = buf;
	q->len = len;
	q->has_imm = has_imm;
	q->imm = imm;
	if (!buf)
		memcpy(q + 1, data, len);
	if (c->tail)
		c->tail->next = q;
	else
		c->head = q;
	c->tail = q;
	c->queued++;
	return 0;
}

/* on_writable -- credits are back: send what waited, in order */
static void on_writable(struct rdmamsg_ep *ep, void *arg)
{
	struct client *c = arg;
	struct pending *q;
	int rc;

	(void)ep;
	while ((q = c->head)) {
		rc = echo(c, q->buf, q + 1, q->len, q->has_imm, q->imm);
		if (rc == -EAGAIN)
			return;
		c->head = q->next;
		if (!c->head)
			c->tail = NULL;
		c->queued--;
		if (rc < 0 && q->buf)
			rdmamsg_buf_free(
				q->buf); /* a failed send leaves it ours */
		free(q);
		if (rc < 0) {
			client_close(c);
			return;
		}
	}
}

/* on_recv -- echo the message back, zero-copy when the buffer can be kept */
static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	struct client *c = arg;
	struct rdmamsg_buf *buf = NULL;
	int has_imm = !!(flags & RDMAMSG_RECV_IMM);
	int rc;

	c->msgs++;
	c->bytes += len;
	c->srv->msgs++;
	c->srv->bytes += len;
	/* without the buffer, data would be valid only until we return */
	if (rdmamsg_recv_keep(ep, &buf) < 0)
		buf = NULL; /* no spare buffer: copy instead */
	/* keep the order: once something waits, everything waits */
	rc = c->head ? -EAGAIN : echo(c, buf, data, len, has_imm, imm);
	if (rc == -EAGAIN)
		rc = enqueue(c, buf, data, len, has_imm, imm);
	if (rc == 0)
		return; /* the buffer is the library's, or queued */
	if (buf)
		rdmamsg_buf_free(buf); /* a failed send leaves it ours */
	fprintf(stderr, "client %u: echo: %s\n", c->id,
		rc == -ENOBUFS ? "client does not read its echoes"
			       : rdmamsg_strerror(rc));
	client_close(c);
}

/* on_connect -- the accepted connection is up, or failed */
static void on_connect(struct rdmamsg_ep *ep, int status, int reason,
		       const void *pdata, size_t pdata_len, void *arg)
{
	struct client *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)pdata_len;
	if (status == 0) {
		printf("client %u: connected\n", c->id);
		fflush(stdout);
		return;
	}
	fprintf(stderr, "client %u: connection failed: %s\n", c->id,
		rdmamsg_strerror(status));
	client_close(c);
}

/* on_disconnect -- the client went away */
static void on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct client *c = arg;

	(void)ep;
	if (status < 0)
		fprintf(stderr, "client %u: lost: %s\n", c->id,
			rdmamsg_strerror(status));
	client_close(c);
}

static const struct rdmamsg_ep_cbs client_cbs = {
	.on_connect = on_connect,
	.on_recv = on_recv,
	.on_writable = on_writable,
	.on_disconnect = on_disconnect,
};

/* on_conn_req -- accept every client */
static void on_conn_req(struct rdmamsg_listener *lst,
			struct rdmamsg_conn_req *req, const void *pdata,
			size_t pdata_len, void *arg)
{
	struct server *srv = arg;
	struct client *c;
	int rc;

	(void)lst;
	(void)pdata;
	(void)pdata_len;
	c = calloc(1, sizeof(*c));
	if (!c) {
		rdmamsg_conn_req_reject(req, 1, NULL, 0);
		return;
	}
	c->srv = srv;
	c->id = ++srv->next_id;
	rc = rdmamsg_conn_req_accept(req, NULL, &client_cbs, c, &c->ep);
	if (rc < 0) {
		fprintf(stderr, "accept: %s\n", rdmamsg_strerror(rc));
		rdmamsg_conn_req_reject(req, 1, NULL, 0);
		free(c);
		return;
	}
	c->next = srv->clients;
	if (c->next)
		c->next->prev = c;
	srv->clients = c;
}

/* ------------------------------------------------------------------------
 * Our own watchers
 * --------------------------------------------------------------------- */

/* print_stats -- one line about the whole server */
static void print_stats(struct server *srv, double interval)
{
	struct client *c;
	unsigned int n = 0;
	size_t reg = 0, used = 0;

	for (c = srv->clients; c; c = c->next)
		n++;
	rdmamsg_ctx_query_pool(srv->ctx, &reg, &used);
	printf("stats: %u clients, %" PRIu64 " messages, %" PRIu64
	       " bytes echoed",
	       n, srv->msgs, srv->bytes);
	if (interval > 0)
		printf(", %.0f msgs/s",
		       (double)(srv->msgs - srv->last_msgs) / interval);
	printf("; pool %zu of %zu bytes in use\n", used, reg);
	fflush(stdout);
	srv->last_msgs = srv->msgs;
}

/* on_stats -- the repeating timer */
static void on_stats(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	print_stats(w->data, w->repeat);
}

/* quit -- close everything; the loop ends when the last close completes */
static void quit(struct server *srv)
{
	struct client *c, *next;

	if (srv->quitting)
		return;
	srv->quitting = 1;
	printf("quitting\n");
	fflush(stdout);
	ev_timer_stop(srv->loop, &srv->stats);
	ev_io_stop(srv->loop, &srv->input);
	rdmamsg_listener_close(srv->lst, NULL);
	srv->lst = NULL;
	for (c = srv->clients; c; c = next) {
		next = c->next; /* client_closed runs later, from the loop */
		client_close(c);
	}
}

/* on_input -- commands on stdin, one per line */
static void on_input(struct ev_loop *loop, ev_io *w, int revents)
{
	struct server *srv = w->data;
	char *nl;
	ssize_t n;

	(void)loop;
	(void)revents;
	n = read(w->fd, srv->line + srv->line_len,
		 sizeof(srv->line) - 1 - srv->line_len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		quit(srv); /* end of input */
		return;
	}
	srv->line_len += (size_t)n;
	srv->line[srv->line_len] = '\0';
	while ((nl = strchr(srv->line, '\n'))) {
		*nl = '\0';
		if (!strcmp(srv->line, "quit")) {
			quit(srv);
			return;
		}
		if (!strcmp(srv->line, "stats"))
			print_stats(srv, 0);
		else if (srv->line[0])
			fprintf(stderr, "commands: stats, quit\n");
		srv->line_len -= (size_t)(nl + 1 - srv->line);
		memmove(srv->line, nl + 1, srv->line_len + 1);
	}
	if (srv->line_len == sizeof(srv->line) - 1)
		srv->line_len = 0; /* an overlong line: forget it */
}

/* ------------------------------------------------------------------------
 * main
 * --------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: echo_server [-p PORT] [-b ADDR] [-i SECONDS]\n"
		"  -p, --port PORT      (default %u)\n"
		"  -b, --bind ADDR      local address (default 0.0.0.0)\n"
		"  -i, --interval SECS  statistics period (default 10; 0: "
		"none)\n"
		"stdin: \"stats\" prints statistics, \"quit\" or end of input "
		"stops\n",
		DEFAULT_PORT);
}

/* log_stderr -- the library's warnings and errors go to stderr */
static void log_stderr(int level, const char *func, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	fprintf(stderr, "rdmamsg: %s: %s\n", func, msg);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"port", required_argument, NULL, 'p'},
		{"bind", required_argument, NULL, 'b'},
		{"interval", required_argument, NULL, 'i'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct rdmamsg_ctx_attr *attr = NULL;
	const char *bind_addr = "0.0.0.0";
	unsigned long port = DEFAULT_PORT;
	double interval = 10;
	struct server srv;
	uint16_t bound = 0;
	char addr[300], *end;
	int ch, rc;

	memset(&srv, 0, sizeof(srv));
	while ((ch = getopt_long(argc, argv, "p:b:i:h", longopts, NULL)) !=
	       -1) {
		switch (ch) {
		case 'p':
			port = strtoul(optarg, &end, 10);
			if (*end || port > 65535)
				goto usage;
			break;
		case 'b':
			bind_addr = optarg;
			break;
		case 'i':
			interval = strtod(optarg, &end);
			if (*end || interval < 0)
				goto usage;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		goto usage;

	rdmamsg_log_set_function(log_stderr, NULL);
	srv.loop = ev_loop_new(EVFLAG_AUTO);
	if (!srv.loop) {
		fprintf(stderr, "echo_server: cannot make a libev loop\n");
		return 1;
	}
	rc = rdmamsg_ctx_attr_new(&attr);
	if (rc == 0)
		rc = rdmamsg_ctx_attr_set_loop(attr, srv.loop);
	if (rc == 0)
		rc = rdmamsg_ctx_create(attr, &srv.ctx);
	rdmamsg_ctx_attr_delete(&attr);
	if (rc < 0) {
		fprintf(stderr, "echo_server: context: %s\n",
			rdmamsg_strerror(rc));
		goto err_destroy_loop;
	}
	snprintf(addr, sizeof(addr),
		 strchr(bind_addr, ':') ? "[%s]:%lu" : "%s:%lu", bind_addr,
		 port);
	rc = rdmamsg_listen(srv.ctx, addr, on_conn_req, &srv, &srv.lst);
	if (rc < 0) {
		fprintf(stderr, "echo_server: listen on %s: %s\n", addr,
			rdmamsg_strerror(rc));
		goto err_destroy_ctx;
	}
	rdmamsg_listener_get_port(srv.lst, &bound);
	printf("echo_server: listening on port %u\n", bound);
	fflush(stdout);

	/* the program's own watchers share the loop with rdmamsg's */
	ev_timer_init(&srv.stats, on_stats, interval, interval);
	srv.stats.data = &srv;
	if (interval > 0)
		ev_timer_start(srv.loop, &srv.stats);
	ev_io_init(&srv.input, on_input, STDIN_FILENO, EV_READ);
	srv.input.data = &srv;
	ev_io_start(srv.loop, &srv.input);

	/* returns when no watcher is active: after quit, once the listener
	 * and every endpoint have finished closing */
	ev_run(srv.loop, 0);

	print_stats(&srv, 0);
	rc = rdmamsg_ctx_destroy(&srv.ctx);
	if (rc < 0) {
		fprintf(stderr, "echo_server: destroy: %s\n",
			rdmamsg_strerror(rc));
		srv.status = 1;
	}
	ev_loop_destroy(srv.loop);
	return srv.status;

err_destroy_ctx:
	rdmamsg_ctx_destroy(&srv.ctx);
err_destroy_loop:
	ev_loop_destroy(srv.loop);
	return 1;
usage:
	usage(stderr);
	return 2;
}
