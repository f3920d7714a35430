/* SPDX-License-Identifier: MIT */
/*
 * dc_rails.c -- DC endpoints on both ports of a two-rail host
 * (tests/netns/dc-rails.sh), through the public API only.
 *
 *   dc_rails ADDR1 ADDR2 PORT
 *	one process, two contexts (a server and a client) on the host's
 *	device, which has a port per rail (softrdma, SOFTRDMA_NET=1): the
 *	server listens on ADDR1:PORT and ADDR2:PORT, the client connects a
 *	DC endpoint to each, so that rdma_cm binds one connection to port 1
 *	and the other to port 2; each endpoint sends COUNT numbered messages
 *	(8 B .. 3,000 B), one at a time, which the server echoes and the
 *	client checks (number, size, bytes, order).  It prints each
 *	context's DC counters ("stats WHO dcts N dcis N endpoints N") with
 *	both endpoints open, closes the one on ADDR2 and prints them again,
 *	sends COUNT more on the one left, and says "done bad B"; once both
 *	contexts' SRQs are closed, it says "srq closed" and prints the
 *	counters a third time; exit 0 when every step worked and nothing was
 *	bad.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdmamsg.h"

#define COUNT  300
#define MAXLEN 3000
#define EAGER  8192

struct cli_ep {
	struct rdmamsg_ep *ep;
	int id, up, status, closed;
	unsigned int echoed; /* echoes received, in order */
	unsigned int bad;
};

static struct rdmamsg_ctx *sctx, *cctx;
static unsigned int srv_open, srv_bad;

/* msg_len -- the size of message k */
static size_t msg_len(unsigned int k)
{
	return 8 + (size_t)k * 37 % (MAXLEN - 7);
}

/* fill -- the bytes of endpoint id's message k */
static void fill(unsigned char *m, int id, unsigned int k)
{
	size_t j, n = msg_len(k);

	for (j = 0; j < n; j++)
		m[j] = (unsigned char)(id * 91 + k * 7 + j);
}

static void progress(void)
{
	rdmamsg_ctx_progress(sctx);
	rdmamsg_ctx_progress(cctx);
}

/* wait_for -- progress until *flag (or 10 s); 0 when it came */
static int wait_for(const int *flag)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!*flag) {
		progress();
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			return -1;
	}
	return 0;
}

/* ---- server: echo ---------------------------------------------------- */

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)imm;
	(void)flags;
	(void)arg;
	if (rdmamsg_send(ep, data, len, NULL))
		srv_bad++;
}

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	srv_open--;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, srv_closed);
}

static void srv_conn(struct rdmamsg_ep *ep, int status, int reason,
		     const void *pdata, size_t len, void *arg)
{
	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	if (status) {
		srv_bad++;
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
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, arg, &srv_cbs, NULL, &ep) == 0) {
		srv_open++;
	} else {
		srv_bad++;
		rdmamsg_conn_req_reject(req, 1, NULL, 0);
	}
}

/* ---- client ---------------------------------------------------------- */

static void c_conn(struct rdmamsg_ep *ep, int status, int reason,
		   const void *pdata, size_t len, void *arg)
{
	struct cli_ep *e = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	e->status = status;
	e->up = 1;
}

static void c_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		   unsigned int flags, void *arg)
{
	struct cli_ep *e = arg;
	unsigned char m[MAXLEN];

	(void)ep;
	(void)imm;
	(void)flags;
	fill(m, e->id, e->echoed);
	if (len != msg_len(e->echoed) || memcmp(data, m, len))
		e->bad++;
	e->echoed++;
}

static void c_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli_ep *)arg)->closed = 1;
}

static void c_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	((struct cli_ep *)arg)->bad++; /* nobody should go down */
	printf("disconnected %d (%d)\n", ((struct cli_ep *)arg)->id, status);
}

static const struct rdmamsg_ep_cbs c_cbs = {
	.on_connect = c_conn,
	.on_recv = c_recv,
	.on_disconnect = c_disc,
};

/* stream -- COUNT more messages on e, each echoed before the next; 0 when
 * every echo came */
static int stream(struct cli_ep *e)
{
	unsigned char m[MAXLEN];
	unsigned int k, end = e->echoed + COUNT;
	int ret;

	for (k = e->echoed; k < end; k++) {
		fill(m, e->id, k);
		while ((ret = rdmamsg_send(e->ep, m, msg_len(k), NULL)) ==
		       -EAGAIN)
			progress();
		if (ret) {
			printf("send %d/%u: %d\n", e->id, k, ret);
			return -1;
		}
		while (e->echoed <= k) {
			struct timespec t0, t;

			clock_gettime(CLOCK_MONOTONIC, &t0);
			do {
				progress();
				clock_gettime(CLOCK_MONOTONIC, &t);
			} while (e->echoed <= k && t.tv_sec - t0.tv_sec <= 10);
			if (e->echoed <= k) {
				printf("no echo %d/%u\n", e->id, k);
				return -1;
			}
		}
	}
	return 0;
}

static void stats(const char *who, struct rdmamsg_ctx *ctx)
{
	struct rdmamsg_dc_stats st;

	memset(&st, 0, sizeof(st));
	rdmamsg_ctx_dc_stats(ctx, &st);
	printf("stats %s dcts %u dcis %u endpoints %u\n", who, st.dcts, st.dcis,
	       st.endpoints);
}

static struct rdmamsg_srq *mk_srq(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg_srq_attr sa = {.max_bufs = 256, .buf_size = EAGER};
	struct rdmamsg_srq *srq;

	return rdmamsg_srq_create(ctx, &sa, &srq) ? NULL : srq;
}

static struct rdmamsg_ep_attr *mk_attr(struct rdmamsg_srq *srq)
{
	struct rdmamsg_ep_attr *a;

	if (rdmamsg_ep_attr_new(&a))
		return NULL;
	if (rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC) ||
	    rdmamsg_ep_attr_set_srq(a, srq) ||
	    rdmamsg_ep_attr_set_eager_size(a, EAGER) ||
	    rdmamsg_ep_attr_set_peer_timeout(a, 0)) {
		rdmamsg_ep_attr_delete(&a);
		return NULL;
	}
	return a;
}

int main(int argc, char **argv)
{
	struct rdmamsg_listener *lst[2] = {NULL, NULL};
	struct rdmamsg_srq *ssrq, *csrq;
	struct rdmamsg_ep_attr *sattr, *cattr;
	struct cli_ep e[2];
	char a[2][64];
	int i, rc = 1;
	unsigned int bad;

	if (argc != 4)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (rdmamsg_ctx_create(NULL, &sctx) || rdmamsg_ctx_create(NULL, &cctx))
		return 3;
	ssrq = mk_srq(sctx);
	csrq = mk_srq(cctx);
	sattr = ssrq ? mk_attr(ssrq) : NULL;
	cattr = csrq ? mk_attr(csrq) : NULL;
	if (!sattr || !cattr)
		return 4;
	memset(e, 0, sizeof(e));
	for (i = 0; i < 2; i++) {
		snprintf(a[i], sizeof(a[i]), "%s:%s", argv[1 + i], argv[3]);
		if (rdmamsg_listen(sctx, a[i], srv_req, sattr, &lst[i])) {
			printf("listen on %s failed\n", a[i]);
			return 5;
		}
	}
	printf("listening\n");
	for (i = 0; i < 2; i++) {
		e[i].id = i;
		if (rdmamsg_connect(cctx, a[i], cattr, &c_cbs, &e[i],
				    &e[i].ep) ||
		    wait_for(&e[i].up) || e[i].status) {
			printf("connect to %s failed (%d)\n", a[i],
			       e[i].status);
			return 6;
		}
		printf("connected %d to %s\n", i, a[i]);
	}
	if (stream(&e[0]) || stream(&e[1]))
		goto out;
	stats("client", cctx);
	stats("server", sctx);
	rdmamsg_ep_close(e[1].ep, c_closed);
	if (wait_for(&e[1].closed))
		goto out;
	for (i = 0; i < 1000 && srv_open > 1; i++)
		progress();
	printf("closed 1\n");
	stats("client", cctx);
	if (stream(&e[0]))
		goto out;
	printf("streamed 0 again\n");
	rc = 0;
out:
	bad = srv_bad + e[0].bad + e[1].bad;
	printf("done bad %u echoed %u %u\n", bad, e[0].echoed, e[1].echoed);
	if (!e[0].closed && e[0].ep) {
		rdmamsg_ep_close(e[0].ep, c_closed);
		wait_for(&e[0].closed);
	}
	for (i = 0; i < 2; i++)
		if (lst[i])
			rdmamsg_listener_close(lst[i], NULL);
	for (i = 0; i < 100000 && srv_open; i++)
		progress();
	rdmamsg_srq_close(ssrq, NULL, NULL);
	rdmamsg_srq_close(csrq, NULL, NULL);
	for (i = 0; i < 100; i++)
		progress();
	printf("srq closed\n");
	stats("client", cctx);
	stats("server", sctx);
	rdmamsg_ep_attr_delete(&sattr);
	rdmamsg_ep_attr_delete(&cattr);
	if (rdmamsg_ctx_destroy(&cctx) || rdmamsg_ctx_destroy(&sctx)) {
		printf("a context would not go\n");
		rc = 1;
	}
	return rc || bad ? 1 : 0;
}
