/* SPDX-License-Identifier: MIT */
/*
 * hostile.c -- a hostile peer against an rdmamsg server.  The attacker is a
 * raw librdmacm/libibverbs program (softrdma through the ordinary API) that
 * speaks a valid handshake and then: reads and writes the server's pool
 * with its exact keys and addresses (learnt here from the server's
 * internals: on hardware keys are small integers, easy to guess), returns
 * more credits than it was granted, and sends malformed or oversized
 * headers of every kind (message, fragment, credit update, rendezvous,
 * request/response) and a response to a request never made; on an
 * endpoint of the server's SRQ it sends data and control messages past
 * the credits it holds.  Meanwhile an honest rdmamsg client exchanges
 * verified messages with the same server.
 *
 * Asserted: every pool access fails with a remote access error and reads
 * nothing; every protocol violation closes the attacker's endpoint with
 * -EPROTO; the honest client is unaffected (every echo verified, no
 * disconnect); none of its bytes ever reaches the attacker; the server
 * survives and ends with every object closed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include "../tap.h"
#include "util.h"
#include "internal.h"
#include "proto.h"
#include "handshake.h"
#include "rawpeer.h"

#define SECRET	  "SECRET-of-the-honest-client:"
#define MSG_LEN	  1000 /* copied through the server's pool, not inline */
#define EAGER	  RAWPEER_EAGER
#define A_DEPTH	  RAWPEER_DEPTH
#define A_NRX	  RAWPEER_NRX
#define A_RXLEN	  RAWPEER_RXLEN
#define MAX_SLAB  4
#define ATK_SEND  RAWPEER_SEND /* wr_id of the attacker's sends */
#define SRQ_DEPTH 16	       /* receive depth of the SRQ endpoints */

static uint64_t total_leaked; /* secret bytes any attack saw */

struct slab_info {
	uint64_t addr, len;
	uint32_t rkey, lkey;
};

/* ---- the server (child) -------------------------------------------- */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_listener *lst;
	struct rdmamsg_srq *srq;	  /* of the endpoints asking "srq" */
	struct rdmamsg_ep_attr *srq_attr; /* receive through it */
	int wfd, nopen, dumped, failures;
	uint64_t nrecv;
};

/* srv_dump -- tell the test where the pool is (what an attacker guesses) */
static void srv_dump(struct srv *s)
{
	struct slab_info si[MAX_SLAB];
	struct rdmamsg__slab *sl;
	uint32_t n = 0;

	memset(si, 0, sizeof(si));
	/* the slabs of the receive buffers' class (where the honest client's
	 * messages land) */
	for (sl = s->ctx->pool.slabs; sl && n < MAX_SLAB; sl = sl->next) {
		if (sl->descs[0].cap != EAGER)
			continue;
		si[n].addr = (uint64_t)(uintptr_t)sl->mem;
		si[n].len = sl->len;
		si[n].rkey = sl->mr->rkey;
		si[n].lkey = sl->mr->lkey;
		n++;
	}
	if (write(s->wfd, &n, sizeof(n)) != sizeof(n) ||
	    write(s->wfd, si, sizeof(si)) != sizeof(si))
		_exit(91);
}

/* srv_recv -- echo; once the honest client's data sits in the pool, dump */
static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct srv *s = arg;

	(void)imm;
	(void)flags;
	if (rdmamsg_send(ep, data, len, NULL))
		s->failures++;
	if (++s->nrecv == 50 && !s->dumped) {
		s->dumped = 1;
		srv_dump(s);
	}
}

/* srv_closed -- an endpoint is freed */
static void srv_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct srv *)arg)->nopen--;
}

/* srv_disc -- report the status to the test, close */
static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct srv *s = arg;
	int32_t st = status;

	if (write(s->wfd, &st, sizeof(st)) != sizeof(st))
		_exit(92);
	rdmamsg_ep_close(ep, srv_closed);
}

/* srv_conn -- an accepted endpoint failed before it was up: report it */
static void srv_conn(struct rdmamsg_ep *ep, int status, int reason,
		     const void *pdata, size_t len, void *arg)
{
	(void)reason;
	(void)pdata;
	(void)len;
	if (status)
		srv_disc(ep, status, arg);
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_conn,
	.on_recv = srv_recv,
	.on_disconnect = srv_disc,
};

/* srv_recv_quiet -- an SRQ endpoint's message: counted, not echoed (its
 * attacker returns no credit) */
static void srv_recv_quiet(struct rdmamsg_ep *ep, void *data, size_t len,
			   uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)data;
	(void)len;
	(void)imm;
	(void)flags;
	((struct srv *)arg)->nrecv++;
}

static const struct rdmamsg_ep_cbs srv_cbs_srq = {
	.on_connect = srv_conn,
	.on_recv = srv_recv_quiet,
	.on_disconnect = srv_disc,
};

/* srv_req -- accept everybody (requests and responses enabled); one
 * whose request says "srq" receives through the server's SRQ */
static void srv_req(struct rdmamsg_listener *lst, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	struct rdmamsg_ep *ep;
	int srq = len == 3 && !memcmp(pdata, "srq", 3);

	(void)lst;
	if (rdmamsg_conn_req_accept(req, srq ? s->srq_attr : NULL,
				    srq ? &srv_cbs_srq : &srv_cbs, s, &ep) == 0)
		s->nopen++;
	else
		s->failures++;
}

static int ctl_pipe[2] = {-1, -1}; /* test -> server: quit */
static int cli_pipe[2] = {-1, -1}; /* test -> honest client: stop */

/* readable -- whether fd has a byte (or EOF) right now */
static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/* server -- child: serve until told to quit, then close everything */
static int server(int wfd, void *arg)
{
	struct srv s;

	(void)arg;
	close(ctl_pipe[1]);
	close(cli_pipe[0]);
	close(cli_pipe[1]);
	memset(&s, 0, sizeof(s));
	s.wfd = wfd;
	if (rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	{
		struct rdmamsg_srq_attr qa = {.max_bufs = 1024,
					      .buf_size = EAGER};

		if (rdmamsg_srq_create(s.ctx, &qa, &s.srq) ||
		    rdmamsg_ep_attr_new(&s.srq_attr) ||
		    rdmamsg_ep_attr_set_srq(s.srq_attr, s.srq) ||
		    rdmamsg_ep_attr_set_recv_depth(s.srq_attr, SRQ_DEPTH))
			return 15;
	}
	if (test_listen_report(s.ctx, srv_req, &s, &s.lst, wfd))
		return 11;
	while (!readable(ctl_pipe[0]))
		test_idle(s.ctx, 20);
	rdmamsg_listener_close(s.lst, NULL);
	{
		struct rdmamsg__list *pos, *tmp;

		list_for_each_safe (pos, tmp, &s.ctx->eps)
			rdmamsg_ep_close(
				container_of(pos, struct rdmamsg_ep, link),
				srv_closed);
	}
	for (int i = 0; i < 500 && s.nopen > 0; i++)
		test_idle(s.ctx, 10);
	test_idle(s.ctx, 50);
	if (s.nopen)
		return 12;
	rdmamsg_ep_attr_delete(&s.srq_attr);
	if (test_srq_close(s.ctx, s.srq, 10000))
		return 16;
	if (rdmamsg_ctx_destroy(&s.ctx))
		return 13;
	return s.failures ? 14 : 0;
}

/* ---- the honest client (child) ------------------------------------- */

struct hon {
	struct rdmamsg_ctx *ctx;
	uint64_t sent, echoed, bad;
	int up, disc, closed;
};

/* hon_fill -- message i: the secret pattern and the sequence number */
static void hon_fill(char *m, uint64_t i)
{
	size_t k;

	for (k = 0; k + sizeof(SECRET) - 1 <= MSG_LEN; k += sizeof(SECRET) - 1)
		memcpy(m + k, SECRET, sizeof(SECRET) - 1);
	memset(m + k, '#', MSG_LEN - k);
	memcpy(m, &i, sizeof(i));
}

static void hon_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	((struct hon *)arg)->up = status ? -1 : 1;
}

/* hon_recv -- every echo must be the message sent, in order */
static void hon_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct hon *h = arg;
	char m[MSG_LEN];

	(void)ep;
	(void)imm;
	(void)flags;
	hon_fill(m, h->echoed);
	if (len != MSG_LEN || memcmp(m, data, MSG_LEN))
		h->bad++;
	h->echoed++;
}

static void hon_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	printf("# honest client: disconnected %d\n", status);
	((struct hon *)arg)->disc = 1;
}

static void hon_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct hon *)arg)->closed = 1;
}

static const struct rdmamsg_ep_cbs hon_cbs = {
	.on_connect = hon_connect,
	.on_recv = hon_recv,
	.on_disconnect = hon_disc,
};

/* honest -- child: exchange verified messages until told to stop */
static int honest(int wfd, void *arg)
{
	const char *addr = arg;
	struct rdmamsg_ep *ep;
	struct hon h;
	char m[MSG_LEN];
	uint64_t r[3];

	close(ctl_pipe[0]);
	close(ctl_pipe[1]);
	close(cli_pipe[1]);
	memset(&h, 0, sizeof(h));
	if (rdmamsg_ctx_create(NULL, &h.ctx))
		return 20;
	if (rdmamsg_connect(h.ctx, addr, NULL, &hon_cbs, &h, &ep))
		return 21;
	while (!h.up)
		test_idle(h.ctx, 10);
	if (h.up < 0)
		return 22;
	while (!h.disc && (!readable(cli_pipe[0]) || h.sent < 200)) {
		/* a window of 4 messages in flight */
		while (h.sent - h.echoed < 4) {
			hon_fill(m, h.sent);
			if (rdmamsg_send(ep, m, MSG_LEN, NULL))
				break;
			h.sent++;
		}
		test_idle(h.ctx, 2);
	}
	for (int i = 0; i < 500 && h.echoed < h.sent && !h.disc; i++)
		test_idle(h.ctx, 10);
	r[0] = h.sent;
	r[1] = h.echoed;
	r[2] = h.bad + (uint64_t)h.disc;
	rdmamsg_ep_close(ep, hon_closed);
	test_run_until(h.ctx, &h.closed, 60000);
	if (write(wfd, r, sizeof(r)) != sizeof(r))
		return 23;
	if (!h.closed || rdmamsg_ctx_destroy(&h.ctx))
		return 24;
	return 0;
}

/* ---- the attacker (this process) ----------------------------------- */

struct atk {
	struct rawpeer r; /* receive buffers, then a send area, then a read
			   * area */
	uint64_t leaked;  /* secret bytes seen */
};

#define A_SEND_OFF RAWPEER_SEND_OFF
#define A_READ_OFF (A_SEND_OFF + 65536)
#define A_MEM	   (A_READ_OFF + ((size_t)1 << 20))

/* has_secret -- whether the honest client's pattern is in p[0..len) */
static int has_secret(const char *p, size_t len)
{
	size_t n = sizeof(SECRET) - 1, i;

	for (i = 0; i + n <= len; i++)
		if (p[i] == 'S' && !memcmp(p + i, SECRET, n))
			return 1;
	return 0;
}

/* atk_poll -- one completion within ms: its status, or -1 */
static int atk_poll(struct atk *a, int ms, struct ibv_wc *wc)
{
	int st = rawpeer_poll(&a->r, ms, wc);

	if (st == IBV_WC_SUCCESS && !(wc->wr_id & ATK_SEND) &&
	    has_secret(a->r.mem + wc->wr_id * A_RXLEN, wc->byte_len))
		a->leaked++;
	return st;
}

/* atk_connect -- a raw client with a valid handshake (rawpeer_connect:
 * HS_REQ; HS_SREQ names session sid; HS_RREQ reconnects it and expects
 * a refusal: 1, its reason in a->r.reason) */
static int atk_connect2(struct atk *a, unsigned int port, uint8_t kind,
			uint64_t sid, uint64_t delivered)
{
	memset(a, 0, sizeof(*a));
	return rawpeer_connect(&a->r, port, A_MEM, kind, sid, delivered);
}

static int atk_connect(struct atk *a, unsigned int port)
{
	return atk_connect2(a, port, HS_REQ, 0, 0);
}

/* atk_free -- tear the raw client down */
static void atk_free(struct atk *a)
{
	rawpeer_free(&a->r);
	total_leaked += a->leaked;
	a->leaked = 0;
}

/* atk_send -- len bytes from the send area as one message */
static int atk_send(struct atk *a, size_t len)
{
	return rawpeer_send(&a->r, len);
}

/* atk_rdma -- one RDMA READ or WRITE of len bytes at a remote address */
static int atk_rdma(struct atk *a, enum ibv_wr_opcode op, uint64_t raddr,
		    uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(a->r.mem + A_READ_OFF),
			      .length = len,
			      .lkey = a->r.mr->lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = ATK_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(a->r.id->qp, &wr, &bad);
}

/* hdr -- a message header at the start of the send area */
static struct rdmamsg__wire *hdr(struct atk *a, uint8_t type, uint8_t flags,
				 uint16_t credits, uint8_t ctl, uint32_t total)
{
	struct rdmamsg__wire *h = (void *)(a->r.mem + A_SEND_OFF);

	memset(h, 0, sizeof(*h));
	h->type = type;
	h->flags = flags;
	h->credits = htole16(credits);
	h->ctl = ctl;
	h->total = htole32(total);
	return h;
}

/* xhdr -- a data message flagged F_XFER carrying the transfer header x */
static size_t xmsg(struct atk *a, const struct rdmamsg__xhdr *x, size_t extra)
{
	hdr(a, W_DATA, F_FIRST | F_LAST | F_XFER, 0, 0, 0);
	memcpy(a->r.mem + A_SEND_OFF + RDMAMSG_HDR, x, RDMAMSG_XHDR);
	return RDMAMSG_HDR + RDMAMSG_XHDR + extra;
}

static int srv_rfd;

/* srv_status -- the next endpoint status the server reports, or 1 */
static int srv_status(int ms)
{
	struct pollfd p = {.fd = srv_rfd, .events = POLLIN};
	int32_t st;

	if (poll(&p, 1, ms) != 1 ||
	    read(srv_rfd, &st, sizeof(st)) != sizeof(st))
		return 1;
	return st;
}

/* proto_attack -- connect, send one malformed message of len bytes made
 * by the caller, and expect the server to close us with -EPROTO */
static void proto_attack(unsigned int port, const char *what,
			 size_t (*make)(struct atk *a))
{
	struct atk a;
	struct ibv_wc wc;
	int ret, st;

	ret = atk_connect(&a, port);
	if (ret) {
		ok(0, "%s: attacker connects (%d)", what, ret);
		atk_free(&a);
		return;
	}
	ret = atk_send(&a, make(&a));
	ok(ret == 0, "%s: sent", what);
	st = srv_status(15000);
	ok(st == -EPROTO, "%s: the server closed the endpoint (%d, -EPROTO)",
	   what, st);
	ok(rawpeer_event(&a.r, RDMA_CM_EVENT_DISCONNECTED, 10000, NULL, NULL) ==
		   0,
	   "%s: the attacker is disconnected", what);
	while (atk_poll(&a, 10, &wc) >= 0)
		;
	atk_free(&a);
}

/* session_attacks -- reconnect requests (HS_RREQ) are untrusted too: one
 * naming no session is refused (RDMAMSG_REJECT_SESSION); one naming a
 * real session (the attacker's own) with a count of fragments the server
 * never sent is refused as a malformed handshake, and the session ends
 * with -EPROTO, nothing replayed */
static void session_attacks(unsigned int port)
{
	const uint64_t sid = 0x5e55105e55105e55ull;
	struct atk a, b;
	int ret;

	ret = atk_connect2(&b, port, HS_RREQ, 0x1234, 0);
	ok(ret == 1 && b.r.reason == RDMAMSG_REJECT_SESSION,
	   "reconnect of no session: refused, RDMAMSG_REJECT_SESSION (%d, "
	   "%#x)",
	   ret, b.r.reason);
	atk_free(&b);
	ret = atk_connect2(&a, port, HS_SREQ, sid, 0);
	ok(ret == 0, "session request accepted (%d)", ret);
	if (ret) {
		atk_free(&a);
		return;
	}
	/* the connection drops without a goodbye: the server waits for the
	 * reconnect; it comes with a count it never sent */
	rdma_disconnect(a.r.id);
	ret = atk_connect2(&b, port, HS_RREQ, sid, 1000000);
	ok(ret == 1 && b.r.reason == RDMAMSG_REJECT_HANDSHAKE,
	   "reconnect with 1,000,000 fragments never sent: refused as "
	   "malformed (%d, %#x)",
	   ret, b.r.reason);
	is_int(srv_status(15000), -EPROTO, "the session ended with -EPROTO");
	atk_free(&b);
	atk_free(&a);
}

static size_t m_bad_type(struct atk *a)
{
	hdr(a, 9, 0, 0, 0, 0);
	return RDMAMSG_HDR;
}

static size_t m_bad_flags(struct atk *a)
{
	hdr(a, W_DATA, 0x80 | F_FIRST | F_LAST, 0, 0, 0);
	return RDMAMSG_HDR + 4;
}

static size_t m_runt(struct atk *a)
{
	hdr(a, W_DATA, F_FIRST | F_LAST, 0, 0, 0);
	return 8;
}

static size_t m_credit_payload(struct atk *a)
{
	hdr(a, W_CREDIT, 0, 0, 0, 0);
	return RDMAMSG_HDR + 100;
}

static size_t m_credit_overflow(struct atk *a)
{
	/* we sent nothing: no credit is owed to the server */
	hdr(a, W_CREDIT, 0, 65535, 0, 0);
	return RDMAMSG_HDR;
}

static size_t m_ctl_overflow(struct atk *a)
{
	hdr(a, W_KEEPALIVE, 0, 0, 255, 0);
	return RDMAMSG_HDR;
}

/* m_alive -- a keep-alive naming a clock (lib/proto.h) at addr with
 * tick_ms, payload_len bytes long */
static size_t m_alive(struct atk *a, uint64_t addr, uint32_t tick,
		      size_t payload_len)
{
	struct rdmamsg__alive_wire w;

	hdr(a, W_KEEPALIVE, 0, 0, 0, 0);
	memset(&w, 0, sizeof(w));
	w.addr = htole64(addr);
	w.rkey = htole32(0x1234);
	w.tick_ms = htole32(tick);
	memcpy(a->r.mem + A_SEND_OFF + RDMAMSG_HDR, &w, sizeof(w));
	return RDMAMSG_HDR + payload_len;
}

static size_t m_alive_long(struct atk *a)
{
	return m_alive(a, 0x10000, 100, sizeof(struct rdmamsg__alive_wire) + 8);
}

static size_t m_alive_unaligned(struct atk *a)
{
	return m_alive(a, 0x10003, 100, sizeof(struct rdmamsg__alive_wire));
}

static size_t m_alive_tick(struct atk *a)
{
	/* a tick of 1 ms would wake the server 1000 times a second */
	return m_alive(a, 0x10000, 1, sizeof(struct rdmamsg__alive_wire));
}

static size_t m_frag_total(struct atk *a)
{
	/* a first fragment announcing 4 GiB */
	hdr(a, W_DATA, F_FIRST, 0, 0, 0xffffffffu);
	return RDMAMSG_HDR + 100;
}

static size_t m_frag_orphan(struct atk *a)
{
	hdr(a, W_DATA, F_LAST, 0, 0, 0);
	return RDMAMSG_HDR + 100;
}

static size_t m_frag_short(struct atk *a)
{
	/* one fragment of 100 bytes announces 50 */
	hdr(a, W_DATA, F_FIRST, 0, 0, 50);
	return RDMAMSG_HDR + 100;
}

static size_t m_x_runt(struct atk *a)
{
	hdr(a, W_DATA, F_FIRST | F_LAST | F_XFER, 0, 0, 0);
	return RDMAMSG_HDR + 10;
}

static size_t m_x_kind(struct atk *a)
{
	struct rdmamsg__xhdr x;

	memset(&x, 0, sizeof(x));
	x.kind = 77;
	return xmsg(a, &x, 0);
}

static size_t m_rts_zero(struct atk *a)
{
	struct rdmamsg__xhdr x;

	memset(&x, 0, sizeof(x));
	x.kind = X_RTS;
	x.inner = X_MSG;
	x.id = 1;
	x.len = 0;
	return xmsg(a, &x, 0);
}

static size_t m_rts_wrap(struct atk *a)
{
	struct rdmamsg__xhdr x;

	memset(&x, 0, sizeof(x));
	x.kind = X_RTS;
	x.inner = X_MSG;
	x.id = 1;
	x.addr = htole64(UINT64_MAX - 10);
	x.len = htole64(4096);
	return xmsg(a, &x, 0);
}

static size_t m_rts_inner(struct atk *a)
{
	struct rdmamsg__xhdr x;

	memset(&x, 0, sizeof(x));
	x.kind = X_RTS;
	x.inner = 9;
	x.id = 1;
	x.len = htole64(4096);
	return xmsg(a, &x, 0);
}

static size_t m_fin_unknown(struct atk *a)
{
	struct rdmamsg__xhdr x;

	memset(&x, 0, sizeof(x));
	x.kind = X_FIN;
	x.id = htole64(0x0000000500000003ull);
	return xmsg(a, &x, 0);
}

static size_t m_fin_status(struct atk *a)
{
	struct rdmamsg__xhdr x;

	memset(&x, 0, sizeof(x));
	x.kind = X_FIN;
	x.status = (int32_t)htole32(12345);
	return xmsg(a, &x, 0);
}

static size_t m_resp_unknown(struct atk *a)
{
	struct rdmamsg__xhdr x;

	/* the server never sent a request: no id was ever issued */
	memset(&x, 0, sizeof(x));
	x.kind = X_RESP;
	x.req = htole64(0x0000000700000002ull);
	return xmsg(a, &x, 5);
}

static size_t m_req_junk(struct atk *a)
{
	struct rdmamsg__xhdr x;

	memset(&x, 0, sizeof(x));
	x.kind = X_REQ;
	x.req = htole64(1);
	x.rkey = htole32(0xdead);
	return xmsg(a, &x, 5);
}

/* pool_attack -- an RDMA READ or WRITE at the server's pool with its
 * exact address and key (and guessed ones around it) */
static void pool_attack(unsigned int port, const struct slab_info *si,
			enum ibv_wr_opcode op, uint32_t key, const char *what)
{
	struct atk a;
	struct ibv_wc wc;
	int ret, st;

	ret = atk_connect(&a, port);
	if (ret) {
		ok(0, "%s: attacker connects (%d)", what, ret);
		atk_free(&a);
		return;
	}
	if (op == IBV_WR_RDMA_WRITE)
		memset(a.r.mem + A_READ_OFF, 'X', 4096);
	ret = atk_rdma(&a, op, si->addr, key,
		       op == IBV_WR_RDMA_WRITE	     ? 4096
		       : si->len < ((size_t)1 << 20) ? (uint32_t)si->len
						     : (uint32_t)1 << 20);
	ok(ret == 0, "%s: posted", what);
	do {
		st = atk_poll(&a, 10000, &wc);
	} while (st == IBV_WC_SUCCESS && !(wc.wr_id & ATK_SEND));
	ok(st == IBV_WC_REM_ACCESS_ERR,
	   "%s: remote access error (status %d: %s)", what, st,
	   st >= 0 ? ibv_wc_status_str((enum ibv_wc_status)st) : "none");
	if (op == IBV_WR_RDMA_READ) {
		size_t i, nz = 0;

		for (i = 0; i < ((size_t)1 << 20); i++)
			nz += a.r.mem[A_READ_OFF + i] != 0;
		ok(nz == 0, "%s: not one byte read (%zu)", what, nz);
		a.leaked += has_secret(a.r.mem + A_READ_OFF, (size_t)1 << 20);
	}
	/* our QP is in error now; leaving ends the server's endpoint */
	rdma_disconnect(a.r.id);
	st = srv_status(15000);
	ok(st != 1, "%s: the server closed the endpoint (%d)", what, st);
	atk_free(&a);
}

/* srq_attack -- an endpoint on the server's SRQ gets n messages (W_DATA
 * of 1 byte, or header-only type), sent back to back without regard to
 * the credits it was granted or given back: what goes past them takes
 * buffers of the SRQ that other endpoints' windows hold, so the server
 * closes it with -EPROTO (an own ring would meet it with RNR) */
static void srq_attack(unsigned int port, const char *what, uint8_t type,
		       unsigned int n)
{
	struct atk a;
	struct ibv_wc wc;
	unsigned int sent = 0, done = 0;
	int ret, st;

	memset(&a, 0, sizeof(a));
	ret = rawpeer_connect_user(&a.r, port, A_MEM, HS_REQ, 0, 0, "srq");
	if (ret) {
		ok(0, "%s: attacker connects (%d)", what, ret);
		atk_free(&a);
		return;
	}
	if (type == W_DATA)
		hdr(&a, W_DATA, F_FIRST | F_LAST, 0, 0, 0);
	else
		hdr(&a, type, 0, 0, 0, 0);
	/* at most 8 in flight (the QP's 16), the next posted as each
	 * completes; a send failed once the server closed us */
	ret = 0;
	while (done < n && ret >= 0) {
		while (sent < n && sent - done < 8 &&
		       atk_send(&a, RDMAMSG_HDR + (type == W_DATA)) == 0)
			sent++;
		ret = atk_poll(&a, 5000, &wc);
		if (ret < 0)
			break;
		if (wc.wr_id & ATK_SEND) {
			done++;
			if (ret != IBV_WC_SUCCESS)
				break;
		}
	}
	diag("%s: %u sent, %u completed", what, sent, done);
	st = srv_status(15000);
	ok(st == -EPROTO, "%s: the server closed the endpoint (%d, -EPROTO)",
	   what, st);
	rdma_disconnect(a.r.id);
	while (atk_poll(&a, 10, &wc) >= 0)
		;
	atk_free(&a);
}

int main(void)
{
	struct slab_info si[MAX_SLAB];
	char addr[64];
	unsigned int port;
	uint32_t nslab = 0;
	uint64_t r[3] = {0, 0, 0};
	pid_t spid, cpid;
	int crfd, st;

	test_setup("hostile");
	signal(SIGPIPE, SIG_IGN);
	if (pipe(ctl_pipe) || pipe(cli_pipe))
		bail_out("pipe");
	spid = test_fork(server, NULL, &srv_rfd);
	port = test_read_port(srv_rfd);
	ok(port != 0, "server listens on %u", port);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	cpid = test_fork(honest, addr, &crfd);

	/* the honest client's messages now sit in the server's pool */
	st = read(srv_rfd, &nslab, sizeof(nslab)) == sizeof(nslab) &&
	     read(srv_rfd, si, sizeof(si)) == sizeof(si);
	ok(st && nslab > 0,
	   "server pool: %u slabs (first at %#llx, %llu bytes, rkey %#x)",
	   nslab, (unsigned long long)si[0].addr, (unsigned long long)si[0].len,
	   si[0].rkey);
	if (!nslab)
		bail_out("no pool information from the server");

	for (uint32_t k = 0; k < nslab && k < 2; k++) {
		pool_attack(port, &si[k], IBV_WR_RDMA_READ, si[k].rkey,
			    "read the pool with its rkey");
		pool_attack(port, &si[k], IBV_WR_RDMA_READ, si[k].lkey,
			    "read the pool with its lkey");
		pool_attack(port, &si[k], IBV_WR_RDMA_WRITE, si[k].rkey,
			    "write the pool with its rkey");
	}

	session_attacks(port);
	proto_attack(port, "unknown message type", m_bad_type);
	proto_attack(port, "undefined flags", m_bad_flags);
	proto_attack(port, "runt message", m_runt);
	proto_attack(port, "credit update with a payload", m_credit_payload);
	proto_attack(port, "65535 credits never granted", m_credit_overflow);
	proto_attack(port, "255 control credits", m_ctl_overflow);
	proto_attack(port, "keep-alive with a long clock", m_alive_long);
	proto_attack(port, "keep-alive naming an unaligned clock",
		     m_alive_unaligned);
	proto_attack(port, "keep-alive asking for 1 ms ticks", m_alive_tick);
	proto_attack(port, "first fragment of 4 GiB", m_frag_total);
	proto_attack(port, "fragment without a first", m_frag_orphan);
	proto_attack(port, "fragment longer than its total", m_frag_short);
	proto_attack(port, "runt transfer header", m_x_runt);
	proto_attack(port, "unknown transfer kind", m_x_kind);
	proto_attack(port, "rendezvous of 0 bytes", m_rts_zero);
	proto_attack(port, "rendezvous wrapping the address space", m_rts_wrap);
	proto_attack(port, "rendezvous of an unknown kind", m_rts_inner);
	proto_attack(port, "FIN of an unknown transfer", m_fin_unknown);
	proto_attack(port, "FIN with a positive status", m_fin_status);
	proto_attack(port, "response to a request never made", m_resp_unknown);
	proto_attack(port, "request with junk fields", m_req_junk);
	srq_attack(port, "SRQ endpoint: 200 messages past its credits", W_DATA,
		   200);
	srq_attack(port,
		   "SRQ endpoint: 200 credit updates past its control "
		   "credits",
		   W_CREDIT, 200);

	is_int(total_leaked, 0,
	       "no byte of the honest client's data reached the attacker");

	/* the honest client: still fine */
	if (write(cli_pipe[1], "s", 1) != 1)
		bail_out("write");
	ok(read(crfd, r, sizeof(r)) == sizeof(r), "honest client reports");
	ok(r[0] >= 200 && r[1] == r[0],
	   "honest client: %llu messages, %llu echoes",
	   (unsigned long long)r[0], (unsigned long long)r[1]);
	is_int(r[2], 0, "honest client: every echo intact, never disconnected");
	is_int(test_wait_child(cpid), 0, "honest client exits cleanly");
	st = srv_status(10000);
	is_int(st, 0, "the honest client's endpoint closed cleanly (0)");

	if (write(ctl_pipe[1], "q", 1) != 1)
		bail_out("write");
	is_int(test_wait_child(spid), 0, "server survived and exits cleanly");
	close(srv_rfd);
	close(crfd);
	return done_testing();
}
