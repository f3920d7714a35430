/* SPDX-License-Identifier: MIT */
/*
 * threads.c -- one context per thread, every thread at once, in one
 * process (rdmamsg(7), Threading).  The process's contexts share one
 * device context, as librdmacm's cm_ids share one per device on hardware
 * (softrdma: one context lock, one sweep), so each thread's progress
 * meets the others' there.  NCTX contexts in a ring, each connected to
 * the next; each thread drives its own: the even ones busy (a
 * rdmamsg_ctx_progress() loop), the odd ones blocking (rdmamsg_ctx_arm(),
 * then poll() on the fd): a pass of one thread that places another's
 * messages must wake that thread.  Every endpoint sends NMSG messages
 * whose sizes cycle through SIZES (inline, eager, fragmented and
 * rendezvous), each filled from its sequence number.  Checked: every
 * message arrives once, in order, intact; every send is reported sent
 * (on_send, status 0); then every endpoint, listener and context closes
 * cleanly, and nothing of it waits past its deadline.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../tap.h"
#include "util.h"

#define NCTX	    4
#define DEADLINE_MS 120000

static const size_t sizes[] = {8, 200, 5000, 20000, 70000};
#define NSIZES	 (sizeof(sizes) / sizeof(sizes[0]))
#define MAX_SIZE 70000

static uint64_t nmsg;
static atomic_int finished; /* threads whose streams both ended */

struct node {
	int idx, busy;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	uint16_t port;
	struct rdmamsg_ep *out, *in; /* to the next node; from the previous */
	char *buf;
	/* sending */
	uint64_t sent, acked;
	uint8_t *reported; /* [seq]: on_send ran for it */
	int up, status;
	/* receiving */
	uint64_t next, bad, badlen;
	/* closing */
	int out_closed, in_closed, lst_closed;
	int disc_in, disc_out; /* on_disconnect of each */
	int failures, timed_out;
};

static struct node nodes[NCTX];

/* fill -- message seq's bytes: its number, then a pattern of it */
static void fill(char *p, uint64_t seq, size_t len)
{
	size_t i;

	memcpy(p, &seq, sizeof(seq));
	for (i = sizeof(seq); i < len; i++)
		p[i] = (char)(seq * 31 + i);
}

static int intact(const char *p, uint64_t seq, size_t len)
{
	uint64_t s;
	size_t i;

	memcpy(&s, p, sizeof(s));
	if (s != seq)
		return 0;
	for (i = sizeof(seq); i < len; i++)
		if (p[i] != (char)(seq * 31 + i))
			return 0;
	return 1;
}

/* send_more -- send until the library pushes back or all went */
static void send_more(struct node *n)
{
	while (n->up && !n->status && n->sent < nmsg) {
		size_t len = sizes[n->sent % NSIZES];
		int ret;

		fill(n->buf, n->sent, len);
		ret = rdmamsg_send(n->out, n->buf, len,
				   (void *)(uintptr_t)(n->sent + 1));
		if (ret == -EAGAIN)
			return;
		if (ret) {
			diag("node %d: rdmamsg_send %llu: %d", n->idx,
			     (unsigned long long)n->sent, ret);
			n->failures++;
			return;
		}
		n->sent++;
	}
}

static void on_connect(struct rdmamsg_ep *ep, int status, int reason,
		       const void *pdata, size_t len, void *arg)
{
	struct node *n = arg;

	(void)reason;
	(void)pdata;
	(void)len;
	if (ep != n->out) { /* the accepted one */
		if (status)
			n->failures++;
		return;
	}
	n->up = 1;
	n->status = status;
	send_more(n);
}

static void on_send(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	struct node *n = arg;

	uintptr_t seq = (uintptr_t)op_ctx;

	(void)ep;
	/* each once (a rendezvous send ends after the eager ones behind
	 * it: no order) */
	if (status || !seq || seq > n->sent || n->reported[seq - 1]++)
		n->failures++;
	n->acked++;
}

static void on_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	send_more(arg);
}

static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	struct node *n = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len != sizes[n->next % NSIZES])
		n->badlen++;
	else if (!intact(data, n->next, len))
		n->bad++;
	n->next++;
}

static void on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct node *n = arg;

	if (status)
		n->failures++;
	if (ep == n->in)
		n->disc_in++;
	else
		n->disc_out++;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = on_connect,
	.on_recv = on_recv,
	.on_send = on_send,
	.on_writable = on_writable,
	.on_disconnect = on_disconnect,
};

static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	struct node *n = arg;

	(void)l;
	(void)pdata;
	(void)len;
	if (n->in || rdmamsg_conn_req_accept(req, NULL, &cbs, n, &n->in))
		n->failures++;
}

static void on_out_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct node *)arg)->out_closed = 1;
}

static void on_in_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct node *)arg)->in_closed = 1;
}

static void on_lst_closed(struct rdmamsg_listener *l, void *arg)
{
	(void)l;
	((struct node *)arg)->lst_closed = 1;
}

/* step -- one turn of node n's loop: a busy pass, or a wait on the fd
 * and a pass; the wait has no timeout but the deadline, so that a lost
 * wake-up fails the test */
static void step(struct node *n, long long end)
{
	long long left = end - test_now_ms();
	struct pollfd pfd;

	if (!n->busy && rdmamsg_ctx_arm(n->ctx) == 0) {
		if (rdmamsg_ctx_get_fd(n->ctx, &pfd.fd))
			n->failures++;
		pfd.events = POLLIN;
		poll(&pfd, 1, left > 0 ? (int)left : 0);
	}
	if (rdmamsg_ctx_progress(n->ctx))
		n->failures++;
}

/* RUN -- step until COND or the deadline */
#define RUN(n, cond, end)                                \
	do {                                             \
		while (!(cond) && test_now_ms() < (end)) \
			step(n, end);                    \
		if (!(cond))                             \
			(n)->timed_out++;                \
	} while (0)

/* all_finished -- one more thread's streams ended; the last one wakes
 * every context, since the others wait for it, not for their fds */
static void all_finished(void)
{
	int i;

	if (atomic_fetch_add(&finished, 1) + 1 < NCTX)
		return;
	for (i = 0; i < NCTX; i++)
		rdmamsg_ctx_wakeup(nodes[i].ctx);
}

static void *node_main(void *arg)
{
	struct node *n = arg;
	struct node *to = &nodes[(n->idx + 1) % NCTX];
	long long end = test_now_ms() + DEADLINE_MS;
	char addr[32];
	int ret;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", to->port);
	ret = rdmamsg_connect(n->ctx, addr, NULL, &cbs, n, &n->out);
	if (ret) {
		diag("node %d: rdmamsg_connect: %d", n->idx, ret);
		n->failures++;
		n->up = 1;
		n->status = ret;
	}
	/* both streams: ours sent and reported, the previous node's in */
	RUN(n, n->failures || (n->acked == nmsg && n->next == nmsg), end);
	all_finished();
	/* everyone's streams ended before anyone closes (a close would cut
	 * a peer's stream short) */
	RUN(n, atomic_load(&finished) == NCTX, end);
	/* each closes its own connection; the accepting side closes once
	 * it saw that close (status 0), so each side's view is certain */
	if (n->out)
		rdmamsg_ep_close(n->out, on_out_closed);
	else
		n->out_closed = 1;
	RUN(n, n->out_closed && n->in && n->disc_in, end);
	if (n->in)
		rdmamsg_ep_close(n->in, on_in_closed);
	rdmamsg_listener_close(n->lst, on_lst_closed);
	RUN(n, n->in_closed && n->lst_closed, end);
	return NULL;
}

int main(void)
{
	pthread_t th[NCTX];
	int i, ret;

	test_setup("threads");
	nmsg = tap_small() ? 300 : 3000;
	for (i = 0; i < NCTX; i++) {
		struct node *n = &nodes[i];

		n->idx = i;
		n->busy = !(i % 2);
		n->buf = malloc(MAX_SIZE);
		n->reported = calloc(nmsg, 1);
		if (!n->buf || !n->reported)
			bail_out("malloc");
		n->ctx = test_ctx();
		ret = rdmamsg_listen(n->ctx, "127.0.0.1:0", on_req, n, &n->lst);
		if (ret || rdmamsg_listener_get_port(n->lst, &n->port))
			bail_out("rdmamsg_listen: %d", ret);
	}
	/* each context is its thread's from here until the join */
	for (i = 0; i < NCTX; i++)
		if (pthread_create(&th[i], NULL, node_main, &nodes[i]))
			bail_out("pthread_create");
	for (i = 0; i < NCTX; i++)
		pthread_join(th[i], NULL);

	for (i = 0; i < NCTX; i++) {
		struct node *n = &nodes[i];

		ok(!n->status && n->sent == nmsg && n->acked == nmsg,
		   "node %d (%s): all %llu sent and reported sent (status %d, "
		   "%llu sent, %llu reported)",
		   i, n->busy ? "busy" : "blocking", (unsigned long long)nmsg,
		   n->status, (unsigned long long)n->sent,
		   (unsigned long long)n->acked);
		ok(n->next == nmsg && !n->bad && !n->badlen,
		   "node %d: all %llu received once, in order, intact (%llu "
		   "received, %llu damaged, %llu of a wrong length)",
		   i, (unsigned long long)nmsg, (unsigned long long)n->next,
		   (unsigned long long)n->bad, (unsigned long long)n->badlen);
		/* the previous node's close reached our accepted endpoint;
		 * ours closed first, and saw nothing of the next's */
		ok(n->out_closed && n->in_closed && n->lst_closed &&
			   n->disc_in == 1 && !n->disc_out && !n->failures &&
			   !n->timed_out,
		   "node %d: closed cleanly (disconnects %d in, %d out; %d "
		   "failures, %d waits past the deadline)",
		   i, n->disc_in, n->disc_out, n->failures, n->timed_out);
		ok(rdmamsg_ctx_destroy(&n->ctx) == 0 && !n->ctx,
		   "node %d: context destroyed", i);
		free(n->buf);
		free(n->reported);
	}
	return done_testing();
}
