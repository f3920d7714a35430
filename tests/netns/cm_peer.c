/* SPDX-License-Identifier: MIT */
/*
 * cm_peer.c -- rdma_cm and an SRQ between two hosts of the namespace
 * fabric (softrdma's CM over TCP, data over RoCE v2), run by
 * tests/netns/cm-hosts.sh:
 *
 *   cm_peer server PORT           on one host; exits on SIGTERM too
 *   cm_peer client SERVER PORT    on another: TAP on stdout
 *
 * The client connects with private data; the server checks it, makes its
 * QP on a shared receive queue of SRQ_WR receives with the limit armed at
 * SRQ_LIMIT, and accepts with private data of its own, which the client
 * checks in ESTABLISHED.  The client sends NMSG messages of mixed sizes
 * (sequence number and pattern in the data); the server reposts nothing
 * until IBV_EVENT_SRQ_LIMIT_REACHED came (meanwhile the client meets RNR
 * NAKs and retries), then checks every message in order.  The client
 * disconnects (DISCONNECTED on both sides), then asks for a second
 * connection, which the server rejects with private data: the client
 * gets REJECTED, status 28 (consumer defined), and that private data.
 * The server exits 0 when every check of its side passed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "../tap.h"

#define NMSG	   100u
#define SRQ_WR	   64
#define SRQ_LIMIT  16
#define BUF	   65536
#define TMO_MS	   60000
#define PD_HELLO   "cm_peer hello"
#define PD_REJECT  "cm_peer reject me"
#define PD_WELCOME "cm_peer welcome"
#define PD_NO	   "cm_peer no thanks"

static const uint32_t sizes[] = {4, 100, 1024, 1500, 4096, 20000, 65536};
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static uint32_t msg_len(uint32_t i)
{
	return sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
}

static void fill(uint8_t *p, uint32_t i, uint32_t len)
{
	uint32_t k;

	memcpy(p, &i, 4);
	for (k = 4; k < len; k++)
		p[k] = (uint8_t)(i * 7 + k);
}

static int check(const uint8_t *p, uint32_t i, uint32_t len)
{
	uint32_t k, got;

	memcpy(&got, p, 4);
	if (got != i)
		return 0;
	for (k = 4; k < len; k++)
		if (p[k] != (uint8_t)(i * 7 + k))
			return 0;
	return 1;
}

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* next_event -- the channel's next event (TMO_MS at most, or SIGTERM) */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *e;
	struct pollfd p = {ch->fd, POLLIN, 0};
	long long end = now_ms() + TMO_MS;

	while (!stop && now_ms() < end) {
		if (poll(&p, 1, 100) == 1 && !rdma_get_cm_event(ch, &e))
			return e;
	}
	return NULL;
}

/* ---------------------------------------------------------------- */

struct srv {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	uint8_t *buf;
	int posted;
};

static int srv_post(struct srv *v, uint32_t slot)
{
	struct ibv_sge sge = {(uintptr_t)(v->buf + (size_t)slot * BUF), BUF,
			      v->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1};
	struct ibv_recv_wr *bad;

	return ibv_post_srq_recv(v->srq, &wr, &bad);
}

static int srv_setup(struct srv *v, struct rdma_cm_id *id)
{
	struct ibv_srq_init_attr sa;
	struct ibv_srq_attr lim;
	uint32_t i;

	v->pd = id->pd;
	v->cq = ibv_create_cq(id->verbs, SRQ_WR * 2, NULL, NULL, 0);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = SRQ_WR;
	sa.attr.max_sge = 1;
	v->srq = v->cq ? ibv_create_srq(v->pd, &sa) : NULL;
	v->buf = calloc(SRQ_WR, BUF);
	v->mr = v->buf && v->srq
			? ibv_reg_mr(v->pd, v->buf, (size_t)SRQ_WR * BUF,
				     IBV_ACCESS_LOCAL_WRITE)
			: NULL;
	if (!v->mr)
		return -1;
	for (i = 0; i < SRQ_WR; i++)
		if (srv_post(v, i))
			return -1;
	memset(&lim, 0, sizeof(lim));
	lim.srq_limit = SRQ_LIMIT;
	return ibv_modify_srq(v->srq, &lim, IBV_SRQ_LIMIT);
}

static int server(const char *port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid = NULL, *cid = NULL;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr qa;
	struct sockaddr_in a;
	struct rdma_cm_event *e;
	struct srv v;
	struct ibv_wc wc[16];
	struct ibv_async_event ae;
	uint32_t held[SRQ_WR], nheld = 0, got = 0, bad = 0;
	int limit_seen = 0, disconnected = 0, rejected = 0, fails = 0, n, i;
	long long end = now_ms() + 2 * TMO_MS;

	memset(&v, 0, sizeof(v));
	signal(SIGTERM, on_term);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)atoi(port));
	if (!ch || rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&a) || rdma_listen(lid, 4)) {
		perror("cm_peer server: listen");
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	while (!stop && !(disconnected && rejected) && now_ms() < end) {
		struct pollfd pc = {ch->fd, POLLIN, 0};

		e = NULL;
		if (poll(&pc, 1, 5) == 1 && rdma_get_cm_event(ch, &e))
			e = NULL;
		switch (e ? e->event : RDMA_CM_EVENT_TIMEWAIT_EXIT) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (e->param.conn.private_data_len >=
				    sizeof(PD_REJECT) &&
			    !memcmp(e->param.conn.private_data, PD_REJECT,
				    sizeof(PD_REJECT))) {
				if (rdma_reject(e->id, PD_NO, sizeof(PD_NO)))
					fails++;
				rdma_destroy_id(e->id);
				rejected = 1;
				break;
			}
			if (cid ||
			    e->param.conn.private_data_len < sizeof(PD_HELLO) ||
			    memcmp(e->param.conn.private_data, PD_HELLO,
				   sizeof(PD_HELLO))) {
				fprintf(stderr, "cm_peer server: unexpected "
						"request\n");
				fails++;
				rdma_reject(e->id, NULL, 0);
				break;
			}
			cid = e->id;
			if (srv_setup(&v, cid)) {
				perror("cm_peer server: SRQ");
				return 1;
			}
			memset(&qa, 0, sizeof(qa));
			qa.send_cq = qa.recv_cq = v.cq;
			qa.srq = v.srq;
			qa.qp_type = IBV_QPT_RC;
			qa.cap.max_send_wr = 4;
			qa.cap.max_send_sge = 1;
			memset(&cp, 0, sizeof(cp));
			cp.private_data = PD_WELCOME;
			cp.private_data_len = sizeof(PD_WELCOME);
			cp.rnr_retry_count = 7;
			if (rdma_create_qp(cid, v.pd, &qa) ||
			    rdma_accept(cid, &cp)) {
				perror("cm_peer server: accept");
				return 1;
			}
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT: /* (none: poll again) */
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			if (e->id == cid)
				disconnected = 1;
			break;
		default:
			fprintf(stderr, "cm_peer server: %s\n",
				rdma_event_str(e->event));
			fails++;
			break;
		}
		if (e)
			rdma_ack_cm_event(e);
		/* the receives: none reposted before the limit event */
		while (v.cq && (n = ibv_poll_cq(v.cq, 16, wc)) > 0) {
			for (i = 0; i < n; i++) {
				uint32_t s = (uint32_t)wc[i].wr_id;

				if (wc[i].status != IBV_WC_SUCCESS ||
				    wc[i].byte_len != msg_len(got) ||
				    !check(v.buf + (size_t)s * BUF, got,
					   wc[i].byte_len))
					bad++;
				got++;
				held[nheld++] = s;
			}
		}
		if (v.srq && !limit_seen) {
			struct pollfd p = {cid->verbs->async_fd, POLLIN, 0};

			if (poll(&p, 1, 0) == 1 &&
			    !ibv_get_async_event(cid->verbs, &ae)) {
				if (ae.event_type ==
					    IBV_EVENT_SRQ_LIMIT_REACHED &&
				    ae.element.srq == v.srq)
					limit_seen = 1;
				ibv_ack_async_event(&ae);
			}
		}
		if (limit_seen)
			while (nheld)
				if (srv_post(&v, held[--nheld]))
					fails++;
	}
	printf("received %u of %u, %u bad, SRQ limit event %s, "
	       "disconnected %d, rejected %d, %d failures\n",
	       got, NMSG, bad, limit_seen ? "seen" : "missing", disconnected,
	       rejected, fails);
	if (cid) {
		rdma_destroy_qp(cid);
		rdma_destroy_id(cid);
	}
	if (v.mr)
		ibv_dereg_mr(v.mr);
	if (v.srq)
		ibv_destroy_srq(v.srq);
	if (v.cq)
		ibv_destroy_cq(v.cq);
	free(v.buf);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	return stop || got != NMSG || bad || !limit_seen || !disconnected ||
	       !rejected || fails;
}

/* ---------------------------------------------------------------- */

/* resolved -- a new id with the server's address resolved, or NULL */
static struct rdma_cm_id *resolved(struct rdma_event_channel *ch,
				   struct addrinfo *ai)
{
	struct rdma_cm_event *e;
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	if (!rdma_resolve_addr(id, NULL, ai->ai_addr, 2000)) {
		e = next_event(ch);
		if (e && e->event == RDMA_CM_EVENT_ADDR_RESOLVED) {
			rdma_ack_cm_event(e);
			return id;
		}
		diag("address: %s", e ? rdma_event_str(e->event) : "none");
		if (e)
			rdma_ack_cm_event(e);
	}
	rdma_destroy_id(id);
	return NULL;
}

/* client_connect -- route, QP and a connection with private data PD on
 * a resolved id: the event it ends in (ESTABLISHED, REJECTED...), acked
 * by the caller */
static struct rdma_cm_event *client_connect(struct rdma_event_channel *ch,
					    struct rdma_cm_id *id,
					    struct ibv_cq *cq, const char *pd,
					    size_t pdlen)
{
	struct rdma_cm_event *e;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr qa;

	if (rdma_resolve_route(id, 2000))
		return NULL;
	e = next_event(ch);
	if (!e || e->event != RDMA_CM_EVENT_ROUTE_RESOLVED)
		return e;
	rdma_ack_cm_event(e);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = NMSG;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, id->pd, &qa))
		return NULL;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = pd;
	cp.private_data_len = (uint8_t)pdlen;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7; /* the server holds its receives back */
	if (rdma_connect(id, &cp))
		return NULL;
	return next_event(ch);
}

static int client(const char *host, const char *port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id, *id2;
	struct rdma_cm_event *e;
	struct addrinfo hints, *ai = NULL;
	struct ibv_cq *cq = NULL, *cq2 = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_wc wc[16];
	uint8_t *buf = NULL;
	uint32_t i, done = 0, errs = 0;
	long long end;
	int n;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	if (!ch || getaddrinfo(host, port, &hints, &ai))
		bail_out("set-up: %s", strerror(errno));
	id = resolved(ch, ai);
	if (!id)
		bail_out("rdma_resolve_addr %s: %s", host, strerror(errno));
	/* the device comes with the address */
	cq = ibv_create_cq(id->verbs, NMSG + 4, NULL, NULL, 0);
	buf = malloc(BUF);
	mr = buf && cq ? ibv_reg_mr(id->pd, buf, BUF, 0) : NULL;
	if (!mr)
		bail_out("CQ/MR: %s", strerror(errno));
	e = client_connect(ch, id, cq, PD_HELLO, sizeof(PD_HELLO));
	if (!e || e->event != RDMA_CM_EVENT_ESTABLISHED)
		bail_out("connect: %s", e ? rdma_event_str(e->event) : "none");
	ok(e->param.conn.private_data_len >= sizeof(PD_WELCOME) &&
		   !memcmp(e->param.conn.private_data, PD_WELCOME,
			   sizeof(PD_WELCOME)),
	   "ESTABLISHED carries the server's private data (%u bytes)",
	   e->param.conn.private_data_len);
	ok(id->route.path_rec && id->route.path_rec->mtu == IBV_MTU_1024,
	   "path MTU 1024 (a 1500-byte link less the RoCE v2 headers)");
	rdma_ack_cm_event(e);

	/* every message its own buffer content: one at a time through buf
	 * would race the sends, so each is sent and completed in turn
	 * within a window of the CQ's size */
	for (i = 0; i < NMSG; i++) {
		struct ibv_sge sge = {(uintptr_t)buf, msg_len(i), mr->lkey};
		struct ibv_send_wr wr = {.wr_id = i,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED};
		struct ibv_send_wr *bad;

		fill(buf, i, msg_len(i));
		if (ibv_post_send(id->qp, &wr, &bad)) {
			errs++;
			break;
		}
		end = now_ms() + TMO_MS;
		while ((n = ibv_poll_cq(cq, 16, wc)) == 0 && now_ms() < end)
			usleep(100);
		if (n != 1 || wc[0].status != IBV_WC_SUCCESS) {
			diag("send %u: %s", i,
			     n == 1 ? ibv_wc_status_str(wc[0].status)
				    : "no completion");
			errs++;
			break;
		}
		done++;
	}
	ok(done == NMSG && !errs,
	   "%u of %u messages of 4 B to 64 KiB sent and acknowledged "
	   "through the server's SRQ",
	   done, NMSG);
	ok(!rdma_disconnect(id), "rdma_disconnect");
	e = next_event(ch);
	ok(e && e->event == RDMA_CM_EVENT_DISCONNECTED, "DISCONNECTED (%s)",
	   e ? rdma_event_str(e->event) : "none");
	if (e)
		rdma_ack_cm_event(e);
	rdma_destroy_qp(id);

	/* a second connection, which the server refuses */
	cq2 = ibv_create_cq(mr->pd->context, 4, NULL, NULL, 0);
	id2 = cq2 ? resolved(ch, ai) : NULL;
	if (!id2)
		bail_out("second id: %s", strerror(errno));
	e = client_connect(ch, id2, cq2, PD_REJECT, sizeof(PD_REJECT));
	ok(e && e->event == RDMA_CM_EVENT_REJECTED && e->status == 28,
	   "the server's rdma_reject: REJECTED, status 28 (%s, %d)",
	   e ? rdma_event_str(e->event) : "none", e ? e->status : 0);
	ok(e && e->param.conn.private_data_len >= sizeof(PD_NO) &&
		   !memcmp(e->param.conn.private_data, PD_NO, sizeof(PD_NO)),
	   "REJECTED carries the server's private data");
	if (e)
		rdma_ack_cm_event(e);
	rdma_destroy_qp(id2);
	rdma_destroy_id(id2);
	ibv_destroy_cq(cq2);
	ibv_dereg_mr(mr);
	free(buf);
	ibv_destroy_cq(cq);
	rdma_destroy_id(id); /* the last: it holds the device's PD */
	freeaddrinfo(ai);
	rdma_destroy_event_channel(ch);
	return done_testing();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	fprintf(stderr, "usage: cm_peer server PORT | client HOST PORT\n");
	return 2;
}
