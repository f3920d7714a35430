/* SPDX-License-Identifier: MIT */
/*
 * close_peer.c -- a close right behind the last operations, between two
 * hosts of the namespace fabric (tests/netns/close-hosts.sh): every
 * operation before the goodbye completes with success and lands exactly
 * once, also when the acknowledgements are lost on the wire.
 *
 *   close_peer server BIND PORT NCONN NMSG
 *	exports a region of NCONN slots of SLOT bytes, sends the export to
 *	each client connection, counts each connection's messages (its
 *	index and a sequence number from 0: in order, each once) and, once
 *	NCONN connections have closed, checks every slot's bytes.  Ends
 *	with "server: C connections, M messages, B bad, S bad slots, D
 *	unclean disconnects"; exit 0 when every count is as it should be.
 *
 *   close_peer client HOST PORT NCONN NMSG
 *	opens NCONN connections at once; on each, once the export came,
 *	sends NMSG messages, writes its slot (one RDMA write) and closes at
 *	once, without waiting for any completion (linger: what is queued
 *	goes first).  Ends with "client: C connections, O ok, F failed on
 *	N of them (first failure: ...)"; exit 0 when every completion was a
 *	success.
 *
 * Before the receiver of the goodbye left the disconnect to the closer
 * (PEER_CLOSED, lib/lane.h), its disconnect could overtake the lost
 * acknowledgement of a client's last operations, which the client's QP
 * then flushed (-ECANCELED) though the server had them.
 *
 * Both roles set a close timeout of CLOSE_MS: with 20% loss on the
 * server's packets an acknowledgement can be lost several times in a row,
 * each costing the client's ack timeout (about 1 s) before it sends
 * again; the server's bound for the client's disconnect is its own close
 * timeout.  SIGTERM ends either role at once.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdmamsg.h"

#define SLOT	 4096
#define MSG_LEN	 64
#define CLOSE_MS 20000
#define MAX_CONN 256
#define MAX_MSG	 100000

static struct rdmamsg_ctx *ctx;

/* step -- block on the fd unless work is pending, then progress */
static void step(void)
{
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(ctx, &pfd.fd);
	pfd.events = POLLIN;
	if (rdmamsg_ctx_arm(ctx) == 0)
		poll(&pfd, 1, 100);
	rdmamsg_ctx_progress(ctx);
}

/* pattern -- byte i of connection c's slot */
static uint8_t pattern(uint32_t c, size_t i)
{
	return (uint8_t)(c * 31 + i * 7 + (i >> 8) + 1);
}

/* ---- server ---------------------------------------------------------- */

struct sconn {
	uint32_t idx, next; /* the client's index (from its first message) */
	int have_idx;
};

static uint8_t *region;
static struct rdmamsg_mr *region_mr;
static unsigned int nconn, nclosed;
static int lclosed;
static unsigned long long s_msgs, s_bad, s_unclean;

static void srv_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];

	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	if (status || rdmamsg_mr_export(region_mr, ex, sizeof(ex)) ||
	    rdmamsg_send(ep, ex, sizeof(ex), NULL))
		s_bad++;
}

/* srv_recv -- {connection index, sequence number}, then filler */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct sconn *c = arg;
	uint32_t h[2];
	size_t i;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len != MSG_LEN) {
		s_bad++;
		return;
	}
	memcpy(h, data, sizeof(h));
	if (!c->have_idx) {
		c->have_idx = 1;
		c->idx = h[0];
	}
	if (h[0] != c->idx || h[1] != c->next)
		s_bad++;
	for (i = sizeof(h); i < len; i++)
		if (((uint8_t *)data)[i] != (uint8_t)(h[1] + i))
			s_bad++;
	c->next = h[1] + 1;
	s_msgs++;
}

static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	free(arg);
	nclosed++;
}

static void srv_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)arg;
	if (status)
		s_unclean++;
	if (rdmamsg_ep_close(ep, srv_closed))
		s_bad++;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_connect,
	.on_recv = srv_recv,
	.on_disconnect = srv_disconnect,
};

static struct rdmamsg_ep_attr *srv_attr;

static void on_conn_req(struct rdmamsg_listener *lst,
			struct rdmamsg_conn_req *req, const void *pdata,
			size_t len, void *arg)
{
	struct rdmamsg_ep *ep;
	struct sconn *c = calloc(1, sizeof(*c));

	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	if (!c || rdmamsg_conn_req_accept(req, srv_attr, &srv_cbs, c, &ep)) {
		free(c);
		s_bad++;
	}
}

static void lst_closed(struct rdmamsg_listener *lst, void *arg)
{
	(void)lst;
	(void)arg;
	lclosed = 1;
}

static int server(const char *bind, const char *port, unsigned int nmsg)
{
	struct rdmamsg_listener *lst;
	unsigned long long slots_bad = 0;
	char addr[300];
	unsigned int c;
	size_t i;
	int ret;

	region = calloc(nconn, SLOT);
	if (!region)
		return 1;
	ret = rdmamsg_mr_reg(ctx, region, (size_t)nconn * SLOT,
			     RDMAMSG_ACCESS_REMOTE_WRITE, &region_mr);
	if (ret) {
		fprintf(stderr, "close_peer: register: %s\n",
			rdmamsg_strerror(ret));
		return 1;
	}
	if (rdmamsg_ep_attr_new(&srv_attr) ||
	    rdmamsg_ep_attr_set_close_timeout(srv_attr, CLOSE_MS))
		return 1;
	snprintf(addr, sizeof(addr), "%s:%s", bind, port);
	ret = rdmamsg_listen(ctx, addr, on_conn_req, NULL, &lst);
	if (ret) {
		fprintf(stderr, "close_peer: listen on %s: %s\n", addr,
			rdmamsg_strerror(ret));
		return 1;
	}
	printf("server: listening on %s\n", addr);
	fflush(stdout);
	while (nclosed < nconn)
		step();
	rdmamsg_listener_close(lst, lst_closed);
	while (!lclosed)
		step();
	for (c = 0; c < nconn; c++) {
		for (i = 0; i < SLOT; i++)
			if (region[(size_t)c * SLOT + i] != pattern(c, i))
				break;
		slots_bad += i < SLOT;
	}
	printf("server: %u connections, %llu messages, %llu bad, %llu bad "
	       "slots, %llu unclean disconnects\n",
	       nclosed, s_msgs, s_bad, slots_bad, s_unclean);
	rdmamsg_ep_attr_delete(&srv_attr);
	rdmamsg_mr_dereg(&region_mr);
	free(region);
	return s_msgs != (unsigned long long)nconn * nmsg || s_bad ||
	       slots_bad || s_unclean;
}

/* ---- client ---------------------------------------------------------- */

struct cconn {
	struct rdmamsg_ep *ep;
	struct rdmamsg_rmr *rmr;
	uint32_t idx;
	int up, failed, started, closed, bad;
};

static unsigned long long c_ok, c_fail;
static unsigned int c_closed, c_failed_conns;
static char first_fail[160];

static struct cconn *cs;
static unsigned int c_bad_conns;

static void fail(const char *what, int status, uint32_t idx)
{
	c_fail++;
	if (!cs[idx].bad) {
		cs[idx].bad = 1;
		c_bad_conns++;
	}
	if (!first_fail[0])
		snprintf(first_fail, sizeof(first_fail),
			 "connection %u: %s: %s", idx, what,
			 rdmamsg_strerror(status));
}

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cconn *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	if (status) {
		c->failed = 1;
		fail("connect", status, c->idx);
	} else {
		c->up = 1;
	}
}

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct cconn *c = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (c->rmr || rdmamsg_rmr_import(data, len, &c->rmr)) {
		c->failed = 1;
		fail("export", -EPROTO, c->idx);
	}
}

static void cli_sent(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	struct cconn *c = arg;

	(void)ep;
	(void)op;
	if (status)
		fail("send", status, c->idx);
	else
		c_ok++;
}

static void cli_wrote(struct rdmamsg_ep *ep, int status, uint64_t value,
		      void *op_ctx)
{
	struct cconn *c = op_ctx;

	(void)ep;
	(void)value;
	if (status)
		fail("write", status, c->idx);
	else
		c_ok++;
}

static void cli_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct cconn *c = arg;

	(void)ep;
	/* the server closes only after our goodbye: never before */
	if (!c->started) {
		c->failed = 1;
		fail("disconnected before the close", status, c->idx);
	}
}

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	struct cconn *c = arg;

	(void)ep;
	c->closed = 1;
	c_closed++;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_send = cli_sent,
	.on_disconnect = cli_disconnect,
};

/* go -- NMSG messages, the slot's write, and the close, back to back */
static void go(struct cconn *c, struct rdmamsg_mr *lmr, unsigned int nmsg)
{
	uint8_t m[MSG_LEN];
	uint32_t h[2], s;
	size_t i;
	int ret;

	c->started = 1;
	for (s = 0; s < nmsg; s++) {
		h[0] = c->idx;
		h[1] = s;
		memcpy(m, h, sizeof(h));
		for (i = sizeof(h); i < sizeof(m); i++)
			m[i] = (uint8_t)(s + i);
		ret = rdmamsg_send(c->ep, m, sizeof(m), NULL);
		if (ret)
			fail("send refused", ret, c->idx);
	}
	ret = rdmamsg_write(c->ep, lmr, (size_t)c->idx * SLOT, c->rmr,
			    (size_t)c->idx * SLOT, SLOT, cli_wrote, c);
	if (ret)
		fail("write refused", ret, c->idx);
	ret = rdmamsg_ep_close(c->ep, cli_closed);
	if (ret)
		fail("close refused", ret, c->idx);
}

static int client(const char *host, const char *port, unsigned int nmsg)
{
	struct rdmamsg_ep_attr *attr;
	struct rdmamsg_mr *lmr;
	uint8_t *buf;
	char addr[300];
	unsigned int c;
	size_t i;

	cs = calloc(nconn, sizeof(*cs));
	buf = malloc((size_t)nconn * SLOT);
	if (!cs || !buf)
		return 1;
	for (c = 0; c < nconn; c++)
		for (i = 0; i < SLOT; i++)
			buf[(size_t)c * SLOT + i] = pattern(c, i);
	if (rdmamsg_mr_reg(ctx, buf, (size_t)nconn * SLOT, 0, &lmr))
		return 1;
	if (rdmamsg_ep_attr_new(&attr) ||
	    rdmamsg_ep_attr_set_close_timeout(attr, CLOSE_MS) ||
	    rdmamsg_ep_attr_set_linger(attr, 1))
		return 1;
	snprintf(addr, sizeof(addr), "%s:%s", host, port);
	for (c = 0; c < nconn; c++) {
		cs[c].idx = c;
		if (rdmamsg_connect(ctx, addr, attr, &cli_cbs, &cs[c],
				    &cs[c].ep)) {
			fail("connect refused", -EINVAL, c);
			return 1;
		}
	}
	rdmamsg_ep_attr_delete(&attr);
	while (c_closed < nconn) {
		step();
		for (c = 0; c < nconn; c++) {
			struct cconn *x = &cs[c];

			if (x->started)
				continue;
			if (x->up && x->rmr && !x->failed) {
				go(x, lmr, nmsg);
			} else if (x->failed) {
				x->started = 1;
				c_failed_conns++;
				rdmamsg_ep_close(x->ep, cli_closed);
			}
		}
	}
	printf("client: %u connections, %llu ok, %llu failed on %u of them "
	       "(first failure: %s)\n",
	       nconn, c_ok, c_fail, c_bad_conns,
	       first_fail[0] ? first_fail : "none");
	for (c = 0; c < nconn; c++)
		rdmamsg_rmr_free(&cs[c].rmr);
	rdmamsg_mr_dereg(&lmr);
	free(buf);
	free(cs);
	return c_fail || c_failed_conns ||
	       c_ok != (unsigned long long)nconn * (nmsg + 1);
}

int main(int argc, char **argv)
{
	unsigned int nmsg = 0;
	int srv, ret;

	if (argc < 6 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client")))
		goto usage;
	srv = !strcmp(argv[1], "server");
	nconn = (unsigned int)strtoul(argv[4], NULL, 10);
	if (argc != 6 || nconn < 1 || nconn > MAX_CONN)
		goto usage;
	nmsg = (unsigned int)strtoul(argv[5], NULL, 10);
	if (nmsg > MAX_MSG)
		goto usage;
	ret = rdmamsg_ctx_create(NULL, &ctx);
	if (ret) {
		fprintf(stderr, "close_peer: no context: %s\n",
			rdmamsg_strerror(ret));
		return 1;
	}
	ret = srv ? server(argv[2], argv[3], nmsg)
		  : client(argv[2], argv[3], nmsg);
	if (rdmamsg_ctx_destroy(&ctx)) {
		fprintf(stderr, "close_peer: context not destroyed\n");
		ret = 1;
	}
	return ret;
usage:
	fprintf(stderr, "usage: close_peer server BIND PORT NCONN NMSG | "
			"close_peer client HOST PORT NCONN NMSG\n");
	return 2;
}
