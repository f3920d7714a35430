/* SPDX-License-Identifier: MIT */
/*
 * acktimeout.c -- rdmamsg_ep_attr_set_ack_timeout: the local ACK timeout
 * of an endpoint's QP.
 *
 * Two contexts of this process on softrdma.  Out-of-range values and
 * NULL are refused with -EINVAL; a DC endpoint with an exponent is refused
 * at connect and makes nothing.  Each side's QP is then queried
 * (IBV_QP_TIMEOUT) once connected: a plain endpoint keeps the CM's
 * default (softrdma's, as rdma_cm's: 18), an endpoint with an exponent
 * has it, a RDMAMSG_FAILOVER_REPLAY session gets 17 on both sides (the
 * accepting side too), and a session with an exponent has that one.
 *
 * The QPs are the lanes' own, not rdma_cm's: each on its context's own
 * device context (two contexts share none, nor librdmacm's), connected
 * through rdma_init_qp_attr and conn_param.qp_num.  Each pair is then
 * checked as librdmacm would have left it: both in RTS, each addressed to
 * the other's QPN and PSN, RDMA READ and atomics allowed (the access
 * flags of the second INIT, once the limits are known) with the limits
 * both sides asked for (16, the most rdmamsg asks), the retry counts of
 * the connection parameters (7; RNR: 0, RDMAMSG_TEST_RNR_RETRY).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../tap.h"
#include "util.h"
#include "internal.h"
#include "dispatch.h"

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_disconnect = test_side_on_disconnect,
};

/* qp_timeout -- the local ACK timeout of ep's QP; -1 if it cannot say */
static int qp_timeout(struct rdmamsg_ep *ep)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qa;

	if (!ep || !ep->ln || !ep->ln->qp)
		return -1;
	memset(&qa, 0, sizeof(qa));
	if (ep->ctx->ops->query_qp(ep->ln->qp, &qa, IBV_QP_TIMEOUT, &init))
		return -1;
	return qa.timeout;
}

/* qp_of -- ep's QP and its attributes; NULL if it has none */
static struct ibv_qp *qp_of(struct rdmamsg_ep *ep, struct ibv_qp_attr *qa)
{
	struct ibv_qp_init_attr init;

	memset(qa, 0, sizeof(*qa));
	if (!ep || !ep->ln || !ep->ln->qp ||
	    ep->ctx->ops->query_qp(ep->ln->qp, qa,
				   IBV_QP_STATE | IBV_QP_ACCESS_FLAGS |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC |
					   IBV_QP_MAX_DEST_RD_ATOMIC |
					   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY,
				   &init))
		return NULL;
	return ep->ln->qp;
}

/* pair -- the two connected QPs, each as librdmacm would have left it */
static void pair(const char *what, struct rdmamsg_ep *cli,
		 struct rdmamsg_ep *srv)
{
	const int rw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_qp_attr c, s;
	struct ibv_qp *cq = qp_of(cli, &c), *sq = qp_of(srv, &s);

	ok(cq && sq && cq->context == cli->ctx->verbs &&
		   sq->context == srv->ctx->verbs &&
		   cli->ctx->verbs != srv->ctx->verbs &&
		   cli->ctx->verbs != cli->ctx->cm_verbs &&
		   srv->ctx->verbs != srv->ctx->cm_verbs && !cli->id->qp &&
		   !srv->id->qp,
	   "%s: each QP on its context's own device context, none the id's",
	   what);
	if (!cq || !sq)
		return;
	ok(c.qp_state == IBV_QPS_RTS && s.qp_state == IBV_QPS_RTS,
	   "%s: both in RTS (%d, %d)", what, (int)c.qp_state, (int)s.qp_state);
	ok(c.dest_qp_num == sq->qp_num && s.dest_qp_num == cq->qp_num &&
		   c.rq_psn == s.sq_psn && s.rq_psn == c.sq_psn,
	   "%s: each addressed to the other's QPN and PSN", what);
	ok((c.qp_access_flags & rw) == rw && (s.qp_access_flags & rw) == rw,
	   "%s: RDMA READ, WRITE and atomics allowed (%#x, %#x)", what,
	   c.qp_access_flags, s.qp_access_flags);
	ok(c.max_rd_atomic == 16 && c.max_dest_rd_atomic == 16 &&
		   s.max_rd_atomic == 16 && s.max_dest_rd_atomic == 16,
	   "%s: READ limits %u/%u and %u/%u (want 16)", what, c.max_rd_atomic,
	   c.max_dest_rd_atomic, s.max_rd_atomic, s.max_dest_rd_atomic);
	/* the RNR retry count is the peer's (its REQ or REP): 0 from
	 * RDMAMSG_TEST_RNR_RETRY, which test_setup sets */
	ok(c.retry_cnt == 7 && c.rnr_retry == 0 && s.retry_cnt == 7 &&
		   s.rnr_retry == 0,
	   "%s: retry counts 7 and RNR 0 (%u %u, %u %u)", what, c.retry_cnt,
	   c.rnr_retry, s.retry_cnt, s.rnr_retry);
}

/* check -- connect with cli_exp / srv_exp (-1: not set) and the failover
 * policy; both QPs must then have want_cli / want_srv */
static void check(const char *what, int cli_exp, int srv_exp,
		  enum rdmamsg_failover policy, int want_cli, int want_srv)
{
	struct test_side srv, cli;
	struct rdmamsg_ep_attr *ca = NULL;
	char addr[64];
	int got;

	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	srv.ctx = test_ctx();
	cli.ctx = test_ctx();
	srv.cbs = &cbs;
	if (rdmamsg_ep_attr_new(&srv.attr) || rdmamsg_ep_attr_new(&ca) ||
	    (srv_exp >= 0 &&
	     rdmamsg_ep_attr_set_ack_timeout(srv.attr, (unsigned)srv_exp)) ||
	    (cli_exp >= 0 &&
	     rdmamsg_ep_attr_set_ack_timeout(ca, (unsigned)cli_exp)) ||
	    rdmamsg_ep_attr_set_failover(ca, policy))
		bail_out("attributes");
	if (test_side_listen(&srv, NULL, addr, sizeof(addr)))
		bail_out("listen");
	ok(rdmamsg_connect(cli.ctx, addr, ca, &cbs, &cli, &cli.ep) == 0,
	   "%s: connect", what);
	test_run2(&srv, &cli, &cli.up, 60000);
	test_run2(&srv, &cli, &srv.up, 60000);
	ok(cli.up && !cli.status && srv.up && !srv.status && !srv.bad,
	   "%s: connected", what);
	got = qp_timeout(cli.ep);
	ok(got == want_cli, "%s: the connecting side's QP: %d (want %d)", what,
	   got, want_cli);
	got = qp_timeout(srv.ep);
	ok(got == want_srv, "%s: the accepting side's QP: %d (want %d)", what,
	   got, want_srv);
	pair(what, cli.ep, srv.ep);
	ok(test_side_close2(&srv, &cli, 60000), "%s: everything closed", what);
	ok(!rdmamsg_ctx_destroy(&cli.ctx) && !rdmamsg_ctx_destroy(&srv.ctx),
	   "%s: contexts destroyed", what);
	rdmamsg_ep_attr_delete(&ca);
	rdmamsg_ep_attr_delete(&srv.attr);
}

/* bad_values -- refused, and a DC endpoint with an exponent makes nothing */
static void bad_values(void)
{
	struct rdmamsg_ctx *ctx = test_ctx();
	struct rdmamsg_srq_attr sa = {.max_bufs = 64, .buf_size = 8192};
	struct rdmamsg_srq *srq = NULL;
	struct rdmamsg_ep_attr *a = NULL;
	struct rdmamsg_ep *ep = NULL;
	struct test_side s;
	uint64_t v;

	memset(&s, 0, sizeof(s));
	is_int(rdmamsg_ep_attr_new(&a), 0, "attributes");
	is_int(rdmamsg_ep_attr_set_ack_timeout(NULL, 14), -EINVAL,
	       "NULL attributes: -EINVAL");
	is_int(rdmamsg_ep_attr_set_ack_timeout(a, 32), -EINVAL,
	       "exponent 32: -EINVAL");
	is_int(rdmamsg_ep_attr_set_ack_timeout(a, 4096), -EINVAL,
	       "exponent 4096: -EINVAL");
	is_int(rdmamsg_ep_attr_set_ack_timeout(a, 31), 0, "exponent 31");
	is_int(rdmamsg_ep_attr_set_ack_timeout(a, 0), 0, "0: the default");
	if (rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v) ||
	    rdmamsg_srq_create(ctx, &sa, &srq)) {
		ok(1, "# SKIP a DC endpoint with an exponent: no DC here");
	} else {
		rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC);
		rdmamsg_ep_attr_set_srq(a, srq);
		rdmamsg_ep_attr_set_ack_timeout(a, 14);
		ok(rdmamsg_connect(ctx, "127.0.0.1:1", a, &cbs, &s, &ep) ==
				   -EINVAL &&
			   !ep,
		   "a DC endpoint with an exponent: -EINVAL, no endpoint");
		test_srq_close(ctx, srq, 10000);
	}
	rdmamsg_ep_attr_delete(&a);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
}

int main(void)
{
	test_setup("acktimeout");
	bad_values();
	check("plain", -1, -1, RDMAMSG_FAILOVER_OFF, 18, 18);
	check("exponent 12 and 20", 12, 20, RDMAMSG_FAILOVER_OFF, 12, 20);
	check("session", -1, -1, RDMAMSG_FAILOVER_REPLAY, 17, 17);
	check("session, exponent 14 and 15", 14, 15, RDMAMSG_FAILOVER_REPLAY,
	      14, 15);
	return done_testing();
}
