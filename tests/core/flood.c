/* SPDX-License-Identifier: MIT */
/*
 * flood.c -- a flood of fake connection requests: raw librdmacm clients
 * send valid-looking handshakes and never finish (no RTU: they never take
 * the response).  The server's unfinished handshakes stay under its cap
 * (rdmamsg_ctx_attr_set_max_pending), cost no pool memory, and expire at
 * the connect timeout; a real client still gets in and exchanges data.
 */
#include "config.h"

#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include "../tap.h"
#include "util.h"
#include "internal.h"
#include "handshake.h"

#define CAP    16
#define NFLOOD 40

/* ---- server (child) ------------------------------------------------ */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	int up, refused;
};

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)imm;
	(void)flags;
	(void)arg;
	rdmamsg_send(ep, data, len, NULL);
}

static void srv_close_ep(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)status;
	(void)arg;
	rdmamsg_ep_close(ep, NULL);
}

static void srv_conn(struct rdmamsg_ep *ep, int status, int reason,
		     const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;

	(void)reason;
	(void)pdata;
	(void)len;
	if (status)
		rdmamsg_ep_close(ep, NULL); /* a fake one timed out */
	else
		s->up++;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_conn,
	.on_recv = srv_recv,
	.on_disconnect = srv_close_ep,
};

static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ep *ep;

	(void)lst;
	(void)pdata;
	(void)len;
	rdmamsg_ep_attr_new(&a);
	rdmamsg_ep_attr_set_connect_timeout(a, 4000);
	if (rdmamsg_conn_req_accept(req, a, &srv_cbs, s, &ep))
		s->refused++;
	rdmamsg_ep_attr_delete(&a);
}

static int ctl[2]; /* 'p': report, 'q': quit */
static int go[2];  /* test -> real client: connect now */

static int server(int wfd, void *arg)
{
	struct rdmamsg_ctx_attr *ca;
	struct srv s;
	struct pollfd p;
	char cmd;

	(void)arg;
	close(ctl[1]);
	close(go[0]);
	close(go[1]);
	memset(&s, 0, sizeof(s));
	rdmamsg_ctx_attr_new(&ca);
	rdmamsg_ctx_attr_set_max_pending(ca, CAP);
	if (rdmamsg_ctx_create(ca, &s.ctx))
		return 10;
	rdmamsg_ctx_attr_delete(&ca);
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
			r[0] = s.ctx->pending_hs;
			r[1] = used;
			r[2] = (uint64_t)s.up;
			r[3] = reg;
			if (write(wfd, r, sizeof(r)) != sizeof(r))
				return 12;
		}
		test_idle(s.ctx, 5);
	}
	rdmamsg_listener_close(s.lst, NULL);
	{
		struct rdmamsg__list *pos, *tmp;

		list_for_each_safe (pos, tmp, &s.ctx->eps) {
			struct rdmamsg_ep *ep =
				container_of(pos, struct rdmamsg_ep, link);

			if (!ep->closing)
				rdmamsg_ep_close(ep, NULL);
		}
	}
	test_idle(s.ctx, 300);
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 13;
	return 0;
}

/* ---- the real client (child) --------------------------------------- */

struct cli {
	int up, status, reason, echo, closed;
};

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)pdata;
	(void)len;
	c->up = 1;
	c->status = status;
	c->reason = reason;
}

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)imm;
	(void)flags;
	if (len == 5 && !memcmp(data, "hello", 5))
		((struct cli *)arg)->echo = 1;
}

static void cli_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct cli *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
};

static char addr[64];

/* real -- connect (refused while the cap is full: retry), say hello;
 * reports {attempts, refused for resources, echoed} */
static int real(int wfd, void *arg)
{
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	struct cli c;
	uint64_t r[3] = {0, 0, 0};
	char b;

	(void)arg;
	close(ctl[0]);
	close(ctl[1]);
	close(go[1]);
	if (read(go[0], &b, 1) != 1)
		return 20;
	if (rdmamsg_ctx_create(NULL, &ctx))
		return 21;
	for (;;) {
		memset(&c, 0, sizeof(c));
		r[0]++;
		if (rdmamsg_connect(ctx, addr, NULL, &cli_cbs, &c, &ep))
			return 22;
		test_run_until(ctx, &c.up, 60000);
		if (!c.status)
			break;
		if (c.status == -ECONNREFUSED &&
		    c.reason == RDMAMSG_REJECT_RESOURCES)
			r[1]++;
		rdmamsg_ep_close(ep, cli_closed);
		test_run_until(ctx, &c.closed, 60000);
		if (r[0] > 100)
			return 23;
		usleep(100 * 1000);
	}
	rdmamsg_send(ep, "hello", 5, NULL);
	test_run_until(ctx, &c.echo, 60000);
	r[2] = (uint64_t)c.echo;
	rdmamsg_ep_close(ep, cli_closed);
	test_run_until(ctx, &c.closed, 60000);
	if (write(wfd, r, sizeof(r)) != sizeof(r))
		return 24;
	return rdmamsg_ctx_destroy(&ctx) ? 25 : 0;
}

/* ---- the flood (this process) -------------------------------------- */

struct fake {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
};

/* fake_event -- wait for one event of type */
static int fake_event(struct fake *f, enum rdma_cm_event_type type)
{
	struct pollfd p = {.fd = f->ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int got;

	if (poll(&p, 1, 5000) != 1 || rdma_get_cm_event(f->ch, &ev))
		return -1;
	got = ev->event;
	rdma_ack_cm_event(ev);
	return got == (int)type ? 0 : -1;
}

/* fake_connect -- a valid handshake without a QP; never finished */
static int fake_connect(struct fake *f, unsigned int port)
{
	struct sockaddr_in dst;
	struct rdma_conn_param cp;
	struct rdmamsg__hs hs;
	uint8_t pdata[RDMAMSG_HS_MAX];

	f->ch = rdma_create_event_channel();
	if (!f->ch || rdma_create_id(f->ch, &f->id, NULL, RDMA_PS_TCP))
		return -1;
	memset(&dst, 0, sizeof(dst));
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)port);
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rdma_resolve_addr(f->id, NULL, (struct sockaddr *)&dst, 2000) ||
	    fake_event(f, RDMA_CM_EVENT_ADDR_RESOLVED) ||
	    rdma_resolve_route(f->id, 2000) ||
	    fake_event(f, RDMA_CM_EVENT_ROUTE_RESOLVED))
		return -2;
	memset(&hs, 0, sizeof(hs));
	hs.kind = HS_REQ;
	hs.depth = 64;
	hs.ctl = RDMAMSG_CTL_CREDITS;
	hs.eager = 8192;
	hs.max_msg = 1 << 20;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = pdata;
	cp.private_data_len = (uint8_t)rdmamsg__hs_encode(&hs, pdata);
	cp.qp_num = 0x4242;
	cp.responder_resources = cp.initiator_depth = 1;
	return rdma_connect(f->id, &cp) ? -3 : 0;
}

static int srv_query(int srfd, uint64_t q[4])
{
	return write(ctl[1], "p", 1) == 1 &&
	       read(srfd, q, 4 * sizeof(*q)) == 4 * sizeof(*q);
}

int main(void)
{
	static struct fake f[NFLOOD];
	uint64_t q[4], r[3];
	unsigned int port;
	int srfd, crfd, i, nok = 0;
	pid_t spid, cpid;

	test_setup("flood");
	if (pipe(ctl) || pipe(go))
		bail_out("pipe");
	spid = test_fork_server(server, NULL, &srfd, addr, sizeof(addr));
	port = (unsigned int)atoi(strchr(addr, ':') + 1);
	cpid = test_fork(real, NULL, &crfd);
	close(ctl[0]);
	close(go[0]);

	for (i = 0; i < NFLOOD; i++)
		nok += fake_connect(&f[i], port) == 0;
	is_int(nok, NFLOOD, "fake requests sent");
	/* until the server has taken them (a loaded machine is slow) */
	for (i = 0; i < 60; i++) {
		if (!srv_query(srfd, q) || q[0] >= CAP)
			break;
		usleep(50 * 1000);
	}
	ok(i < 60, "server reports");
	printf("# under the flood: %llu unfinished handshakes, %llu bytes of "
	       "pool in use\n",
	       (unsigned long long)q[0], (unsigned long long)q[1]);
	ok(q[0] == CAP, "unfinished handshakes capped at %d (%llu)", CAP,
	   (unsigned long long)q[0]);
	is_int(q[1], 0, "and they hold no pool memory");

	/* a real client, while the fake ones still hold their slots */
	if (write(go[1], "g", 1) != 1)
		bail_out("write");
	ok(read(crfd, r, sizeof(r)) == sizeof(r), "real client reports");
	printf("# real client: %llu attempts, %llu refused for resources\n",
	       (unsigned long long)r[0], (unsigned long long)r[1]);
	ok(r[2] == 1, "the real client got in and its message came back");
	ok(r[0] - 1 == r[1], "every refusal said resources, not a failure");
	is_int(test_wait_child(cpid), 0, "real client exits cleanly");
	ok(srv_query(srfd, q), "server reports");
	ok(q[0] <= CAP, "still capped (%llu)", (unsigned long long)q[0]);

	for (i = 0; i < NFLOOD; i++) {
		if (f[i].id)
			rdma_destroy_id(f[i].id);
		if (f[i].ch)
			rdma_destroy_event_channel(f[i].ch);
	}
	if (write(ctl[1], "q", 1) != 1)
		bail_out("write");
	is_int(test_wait_child(spid), 0, "server exits cleanly");
	close(srfd);
	close(crfd);
	return done_testing();
}
