/* SPDX-License-Identifier: MIT */
/*
 * api_contract.c -- the public calls against their documented contracts:
 * NULL objects, out-of-range values, objects of another context, closed
 * objects, wrapping offsets and sizes; each gets the error rdmamsg.h and
 * the man pages name, and nothing is made or changed by a failed call.
 */
#include "config.h"

#include <ev.h>
#include <stdint.h>

#include "../tap.h"
#include "util.h"

/* struct uset -- one unsigned setter of an attribute and a bad value */
struct uset {
	const char *name;
	int (*fn)(void *attr, unsigned int v);
	unsigned int v;
	int want;
};

/* struct zset -- one size_t setter of an attribute and a bad value */
struct zset {
	const char *name;
	int (*fn)(void *attr, size_t v);
	size_t v;
	int want;
};

#define USET(f, val, w)                                                   \
	{                                                                 \
#f "(" #val ")", (int (*)(void *, unsigned int))f, val, w \
	}
#define ZSET(f, val, w)                                             \
	{                                                           \
#f "(" #val ")", (int (*)(void *, size_t))f, val, w \
	}

static const struct uset ctx_usets[] = {
	USET(rdmamsg_ctx_attr_set_listen_backlog, 0, -EINVAL),
	USET(rdmamsg_ctx_attr_set_listen_backlog, 65537, -EINVAL),
	USET(rdmamsg_ctx_attr_set_max_pending, 0, -EINVAL),
	USET(rdmamsg_ctx_attr_set_max_pending, 65537, -EINVAL),
	/* the ends of the documented ranges are taken */
	USET(rdmamsg_ctx_attr_set_listen_backlog, 1, 0),
	USET(rdmamsg_ctx_attr_set_listen_backlog, 65536, 0),
	USET(rdmamsg_ctx_attr_set_max_pending, 1, 0),
	USET(rdmamsg_ctx_attr_set_max_pending, 65536, 0),
};

static const struct zset ctx_zsets[] = {
	ZSET(rdmamsg_ctx_attr_set_pool_limit, 0, -EINVAL),
	ZSET(rdmamsg_ctx_attr_set_pool_limit, (1u << 20) - 1, -EINVAL),
	ZSET(rdmamsg_ctx_attr_set_pool_limit, 1u << 20, 0),
};

static const struct uset ep_usets[] = {
	USET(rdmamsg_ep_attr_set_connect_timeout, 0, -EINVAL),
	USET(rdmamsg_ep_attr_set_peer_timeout, 29, -EINVAL),
	USET(rdmamsg_ep_attr_set_peer_timeout, 1, -EINVAL),
	USET(rdmamsg_ep_attr_set_recv_depth, 1, -EINVAL),
	USET(rdmamsg_ep_attr_set_recv_depth, 4097, -EINVAL),
	USET(rdmamsg_ep_attr_set_send_depth, 3, -EINVAL),
	USET(rdmamsg_ep_attr_set_send_depth, 4097, -EINVAL),
	USET(rdmamsg_ep_attr_set_send_backlog, 1048577, -EINVAL),
	USET(rdmamsg_ep_attr_set_session_linger, 0, -EINVAL),
	USET(rdmamsg_ep_attr_set_session_linger, 3600001, -EINVAL),
	USET(rdmamsg_ep_attr_set_ack_timeout, 32, -EINVAL),
	USET(rdmamsg_ep_attr_set_failover, 3, -EINVAL),
	USET(rdmamsg_ep_attr_set_apm, 2, -EINVAL),
	USET(rdmamsg_ep_attr_set_transport, 2, -EINVAL),
	USET(rdmamsg_ep_attr_set_connect_timeout, 1, 0),
	USET(rdmamsg_ep_attr_set_peer_timeout, 0, 0),
	USET(rdmamsg_ep_attr_set_peer_timeout, 30, 0),
	USET(rdmamsg_ep_attr_set_recv_depth, 2, 0),
	USET(rdmamsg_ep_attr_set_recv_depth, 4096, 0),
	USET(rdmamsg_ep_attr_set_send_depth, 4, 0),
	USET(rdmamsg_ep_attr_set_send_depth, 4096, 0),
	USET(rdmamsg_ep_attr_set_send_backlog, 0, 0),
	USET(rdmamsg_ep_attr_set_send_backlog, 1048576, 0),
	USET(rdmamsg_ep_attr_set_session_linger, 1, 0),
	USET(rdmamsg_ep_attr_set_session_linger, 3600000, 0),
	USET(rdmamsg_ep_attr_set_ack_timeout, 0, 0),
	USET(rdmamsg_ep_attr_set_ack_timeout, 31, 0),
};

static const struct zset ep_zsets[] = {
	ZSET(rdmamsg_ep_attr_set_eager_size, 63, -EINVAL),
	ZSET(rdmamsg_ep_attr_set_eager_size, (1u << 20) + 1, -EINVAL),
	ZSET(rdmamsg_ep_attr_set_max_msg_size, 100, -EINVAL),
	ZSET(rdmamsg_ep_attr_set_max_msg_size, (64u << 20) + 1, -EINVAL),
	ZSET(rdmamsg_ep_attr_set_max_large_size, 4095, -EINVAL),
	ZSET(rdmamsg_ep_attr_set_max_large_size, ((size_t)1 << 40) + 1,
	     -EINVAL),
	ZSET(rdmamsg_ep_attr_set_rndv_threshold, RDMAMSG_RNDV_THRESH_MIN - 1,
	     -EINVAL),
	ZSET(rdmamsg_ep_attr_set_rndv_threshold, ((size_t)1 << 40) + 1,
	     -EINVAL),
	ZSET(rdmamsg_ep_attr_set_eager_size, 64, 0),
	ZSET(rdmamsg_ep_attr_set_max_msg_size, 64u << 20, 0),
	ZSET(rdmamsg_ep_attr_set_eager_size, 1u << 20, 0),
	ZSET(rdmamsg_ep_attr_set_max_large_size, 4096, 0),
	ZSET(rdmamsg_ep_attr_set_max_large_size, (size_t)1 << 40, 0),
	ZSET(rdmamsg_ep_attr_set_rndv_threshold, RDMAMSG_RNDV_THRESH_MIN, 0),
	ZSET(rdmamsg_ep_attr_set_rndv_threshold, (size_t)1 << 40, 0),
};

static const struct uset group_usets[] = {
	USET(rdmamsg_group_attr_set_role, 0, -EINVAL),
	USET(rdmamsg_group_attr_set_role, 4, -EINVAL),
	USET(rdmamsg_group_attr_set_recv_depth, 15, -EINVAL),
	USET(rdmamsg_group_attr_set_recv_depth, 16385, -EINVAL),
	USET(rdmamsg_group_attr_set_send_depth, 15, -EINVAL),
	USET(rdmamsg_group_attr_set_send_depth, 16385, -EINVAL),
	USET(rdmamsg_group_attr_set_batch, 2, -EINVAL),
	USET(rdmamsg_group_attr_set_heartbeat, 0, -EINVAL),
	USET(rdmamsg_group_attr_set_heartbeat, 60001, -EINVAL),
	USET(rdmamsg_group_attr_set_poll_us, 100001, -EINVAL),
	USET(rdmamsg_group_attr_set_reliable, 65537, -EINVAL),
	USET(rdmamsg_group_attr_set_role, 1, 0),
	USET(rdmamsg_group_attr_set_role, 3, 0),
	USET(rdmamsg_group_attr_set_recv_depth, 16, 0),
	USET(rdmamsg_group_attr_set_recv_depth, 16384, 0),
	USET(rdmamsg_group_attr_set_send_depth, 16, 0),
	USET(rdmamsg_group_attr_set_send_depth, 16384, 0),
	USET(rdmamsg_group_attr_set_batch, 0, 0),
	USET(rdmamsg_group_attr_set_heartbeat, 1, 0),
	USET(rdmamsg_group_attr_set_heartbeat, 60000, 0),
	USET(rdmamsg_group_attr_set_poll_us, 0, 0),
	USET(rdmamsg_group_attr_set_poll_us, 100000, 0),
	USET(rdmamsg_group_attr_set_reliable, 0, 0),
	USET(rdmamsg_group_attr_set_reliable, 65536, 0),
};

static const struct zset group_zsets[] = {
	ZSET(rdmamsg_group_attr_set_max_msg_size, 0, -EINVAL),
	ZSET(rdmamsg_group_attr_set_max_msg_size, (16u << 20) + 1, -EINVAL),
	ZSET(rdmamsg_group_attr_set_max_msg_size, 1, 0),
	ZSET(rdmamsg_group_attr_set_max_msg_size, 16u << 20, 0),
};

/* run_usets -- each setter with NULL and with its bad value on attr */
static void run_usets(const struct uset *t, size_t n, void *attr)
{
	size_t i;

	for (i = 0; i < n; i++) {
		is_int(t[i].fn(NULL, t[i].v), -EINVAL, t[i].name);
		is_int(t[i].fn(attr, t[i].v), t[i].want, t[i].name);
	}
}

/* run_zsets -- as run_usets for size_t setters */
static void run_zsets(const struct zset *t, size_t n, void *attr)
{
	size_t i;

	for (i = 0; i < n; i++) {
		is_int(t[i].fn(NULL, t[i].v), -EINVAL, t[i].name);
		is_int(t[i].fn(attr, t[i].v), t[i].want, t[i].name);
	}
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* on_recv_cb -- counts messages; tries the calls an on_recv may make */
static int in_cb_destroy = 1, in_cb_progress = 1, in_cb_keep2 = 1;
static int in_cb_arm = 1, in_cb_run = 1;
static struct rdmamsg_ctx *recv_ctx;

static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	struct test_side *s = arg;
	struct rdmamsg_buf *b, *b2 = NULL;

	(void)data;
	(void)len;
	(void)imm;
	(void)flags;
	s->got++;
	if (s->got == 2) {
		in_cb_destroy = rdmamsg_ctx_destroy(&recv_ctx);
		in_cb_progress = rdmamsg_ctx_progress(recv_ctx);
		in_cb_arm = rdmamsg_ctx_arm(recv_ctx);
		in_cb_run = rdmamsg_ctx_run(recv_ctx);
		if (!rdmamsg_recv_keep(ep, &b)) {
			in_cb_keep2 = rdmamsg_recv_keep(ep, &b2);
			rdmamsg_buf_free(b);
		}
	}
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_disconnect = test_side_on_disconnect,
};

/* on_resp -- a response callback never expected to run */
static void on_resp(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		    void *arg)
{
	(void)ep;
	(void)status;
	(void)data;
	(void)len;
	(void)arg;
}

/* the server's requests: what bad responses gave, and the one held */
static int resp_null = 1, resp_big = 1;
static struct rdmamsg_req *held;

/* on_request -- bad responses to a live request, then hold it */
static void on_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
		       void *data, size_t len, void *arg)
{
	(void)ep;
	(void)data;
	(void)len;
	(void)arg;
	resp_null = rdmamsg_respond(req, NULL, 1);
	resp_big = rdmamsg_respond(req, "x", SIZE_MAX);
	if (held)
		rdmamsg_req_drop(held);
	held = req;
}

/* on_group -- group callbacks: count closes */
static int gclosed;
static void on_gclose(struct rdmamsg_group *g, void *arg)
{
	(void)g;
	(void)arg;
	gclosed++;
}

static void on_lreq(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		    const void *pdata, size_t len, void *arg)
{
	(void)l;
	(void)pdata;
	(void)len;
	(void)arg;
	rdmamsg_conn_req_reject(req, 0, NULL, 0);
}

static int lclosed;
static void on_lclose(struct rdmamsg_listener *l, void *arg)
{
	(void)l;
	(void)arg;
	lclosed++;
}

/* bad_decisions -- what on_conn_req's bad accepts and rejects gave */
static int bad_dec[6] = {1, 1, 1, 1, 1, 1};

/* on_req_checks -- try bad decisions on a live request, then accept it
 * (test_side_on_req): each failure leaves the request pending */
static void on_req_checks(struct rdmamsg_listener *l,
			  struct rdmamsg_conn_req *req, const void *pdata,
			  size_t len, void *arg)
{
	char big[RDMAMSG_PRIVATE_DATA_MAX + 1] = {0};
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ep *ep = NULL;

	rdmamsg_ep_attr_new(&a);
	rdmamsg_ep_attr_set_failover(a, RDMAMSG_FAILOVER_RECONNECT);
	bad_dec[0] = rdmamsg_conn_req_reject(req, -1, NULL, 0);
	bad_dec[1] = rdmamsg_conn_req_reject(req, 65536, NULL, 0);
	bad_dec[2] = rdmamsg_conn_req_reject(req, 0, big, sizeof(big));
	bad_dec[3] = rdmamsg_conn_req_reject(req, 0, NULL, 1);
	bad_dec[4] = rdmamsg_conn_req_accept(req, a, &cbs, arg, &ep);
	bad_dec[5] = rdmamsg_conn_req_accept(req, NULL, NULL, arg, &ep);
	if (ep)
		bad_dec[5] = 99; /* an endpoint from a failed accept */
	rdmamsg_ep_attr_delete(&a);
	test_side_on_req(l, req, pdata, len, arg);
}

/* attrs -- every attribute setter with NULL and out-of-range values */
static void attrs(void)
{
	struct rdmamsg_ctx_attr *ca;
	struct rdmamsg_ep_attr *ea;
	struct rdmamsg_group_attr *ga;
	char pd[RDMAMSG_PRIVATE_DATA_MAX + 1] = {0};

	if (rdmamsg_ctx_attr_new(&ca) || rdmamsg_ep_attr_new(&ea) ||
	    rdmamsg_group_attr_new(&ga))
		bail_out("attributes");
	run_usets(ctx_usets, N(ctx_usets), ca);
	run_zsets(ctx_zsets, N(ctx_zsets), ca);
	run_usets(ep_usets, N(ep_usets), ea);
	run_zsets(ep_zsets, N(ep_zsets), ea);
	run_usets(group_usets, N(group_usets), ga);
	run_zsets(group_zsets, N(group_zsets), ga);

	is_int(rdmamsg_ep_attr_new(NULL), -EINVAL, "ep_attr_new(NULL)");
	is_int(rdmamsg_ep_attr_delete(NULL), -EINVAL, "ep_attr_delete(NULL)");
	is_int(rdmamsg_group_attr_new(NULL), -EINVAL, "group_attr_new(NULL)");
	is_int(rdmamsg_group_attr_delete(NULL), -EINVAL,
	       "group_attr_delete(NULL)");
	is_int(rdmamsg_ep_attr_set_close_timeout(NULL, 1), -EINVAL,
	       "set_close_timeout(NULL)");
	is_int(rdmamsg_ep_attr_set_linger(NULL, 1), -EINVAL,
	       "set_linger(NULL)");
	is_int(rdmamsg_ep_attr_set_reconnect(ea, 1, 1), 0,
	       "set_reconnect(1, 1)");
	is_int(rdmamsg_ep_attr_set_reconnect(ea, 3600000, 1000), 0,
	       "set_reconnect(3600000, 1000)");
	is_int(rdmamsg_ep_attr_set_reconnect(ea, 0, 1), -EINVAL,
	       "set_reconnect(0 ms)");
	is_int(rdmamsg_ep_attr_set_reconnect(ea, 3600001, 1), -EINVAL,
	       "set_reconnect(3600001 ms)");
	is_int(rdmamsg_ep_attr_set_reconnect(ea, 1000, 0), -EINVAL,
	       "set_reconnect(0 tries)");
	is_int(rdmamsg_ep_attr_set_reconnect(ea, 1000, 1001), -EINVAL,
	       "set_reconnect(1001 tries)");
	is_int(rdmamsg_ep_attr_set_private_data(ea, pd, sizeof(pd)), -EINVAL,
	       "private data above RDMAMSG_PRIVATE_DATA_MAX");
	is_int(rdmamsg_ep_attr_set_private_data(ea, NULL, 4), -EINVAL,
	       "private data NULL with a length");
	is_int(rdmamsg_ep_attr_set_path_cb(NULL, NULL), -EINVAL,
	       "set_path_cb(NULL)");
	is_int(rdmamsg_ep_attr_set_recv_alloc(NULL, NULL), -EINVAL,
	       "set_recv_alloc(NULL)");
	is_int(rdmamsg_ep_attr_set_on_request(NULL, NULL), -EINVAL,
	       "set_on_request(NULL)");
	is_int(rdmamsg_ep_attr_set_on_write_imm(NULL, NULL), -EINVAL,
	       "set_on_write_imm(NULL)");
	is_int(rdmamsg_ep_attr_set_srq(NULL, NULL), -EINVAL,
	       "set_srq(NULL attr)");
	is_int(rdmamsg_group_attr_set_flow_control(ga, RDMAMSG_GROUP_FLOW_MIN,
						   1),
	       -EINVAL, "flow MIN with a tag");
	is_int(rdmamsg_group_attr_set_flow_control(
		       ga, RDMAMSG_GROUP_FLOW_TAGGED, 0),
	       -EINVAL, "flow TAGGED without a tag");
	is_int(rdmamsg_group_attr_set_flow_control(
		       ga, (enum rdmamsg_group_flow)3, 0),
	       -EINVAL, "unknown flow");
	is_int(rdmamsg_group_attr_set_tag(NULL, 1), -EINVAL,
	       "group set_tag(NULL)");
	is_int(rdmamsg_group_attr_set_min_receivers(NULL, 1), -EINVAL,
	       "group set_min_receivers(NULL)");
	is_int(rdmamsg_group_attr_set_min_receivers(ga, 1025), -EINVAL,
	       "group set_min_receivers(1025)");
	is_int(rdmamsg_group_attr_set_min_receivers(ga, 1024), 0,
	       "group set_min_receivers(1024)");
	is_int(rdmamsg_group_attr_set_bind_addr(NULL, NULL), -EINVAL,
	       "group set_bind_addr(NULL)");

	rdmamsg_group_attr_delete(&ga);
	rdmamsg_ep_attr_delete(&ea);
	rdmamsg_ctx_attr_delete(&ca);
	ok(!ga && !ea && !ca, "deletes clear the pointers");
}

/* dc_args -- DC endpoints: what rdmamsg_ep_attr_set_transport(3) refuses */
static void dc_args(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg_srq_attr sa = {.max_bufs = 64, .buf_size = 1024};
	char pd[RDMAMSG_DC_PRIVATE_DATA_MAX + 1] = {0};
	struct test_side side = {0};
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_ep *ep = NULL;
	struct rdmamsg_srq *srq;
	int closed = 0;
	uint64_t v;

	if (rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v)) {
		skip_one("no DC here");
		return;
	}
	if (rdmamsg_srq_create(ctx, &sa, &srq))
		bail_out("srq_create");
	rdmamsg_ep_attr_new(&a);
	rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC);
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", a, &cbs, &side, &ep),
	       -EINVAL, "DC without an SRQ");
	rdmamsg_ep_attr_set_srq(a, srq);
	rdmamsg_ep_attr_set_ack_timeout(a, 14);
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", a, &cbs, &side, &ep),
	       -EINVAL, "DC with an ACK timeout");
	rdmamsg_ep_attr_set_ack_timeout(a, 0);
	rdmamsg_ep_attr_set_private_data(a, pd, sizeof(pd));
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", a, &cbs, &side, &ep),
	       -EINVAL, "DC with private data above 16 bytes");
	rdmamsg_ep_attr_set_private_data(a, pd, RDMAMSG_DC_SESSION_USER + 1);
	rdmamsg_ep_attr_set_failover(a, RDMAMSG_FAILOVER_REPLAY);
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", a, &cbs, &side, &ep),
	       -EINVAL, "DC REPLAY with private data above 8 bytes");
	rdmamsg_ep_attr_set_failover(a, RDMAMSG_FAILOVER_OFF);
	rdmamsg_ep_attr_set_private_data(a, NULL, 0);
	rdmamsg_ep_attr_set_apm(a, RDMAMSG_APM_AUTO);
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", a, &cbs, &side, &ep),
	       -EINVAL, "DC with APM");
	rdmamsg_ep_attr_set_apm(a, RDMAMSG_APM_OFF);
	rdmamsg_ep_attr_set_eager_size(a, 2048);
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", a, &cbs, &side, &ep),
	       -EINVAL, "eager size above the SRQ's buffers");
	ok(ep == NULL, "no DC endpoint from failed connects");
	rdmamsg_ep_attr_delete(&a);
	is_int(rdmamsg_srq_close(srq, test_srq_closed, &closed), 0,
	       "DC SRQ closed");
	test_run_until(ctx, &closed, 2000);
	is_int(rdmamsg_ctx_dc_stats(ctx, NULL), -EINVAL, "dc_stats NULL out");
}

/* objects -- context, buffers, regions, SRQs, listeners, groups and
 * endpoints that are not connected: bad arguments and closed objects */
static void objects(struct rdmamsg_ctx *ctx, struct rdmamsg_ctx *other)
{
	struct rdmamsg_srq_attr sa = {.max_bufs = 64, .buf_size = 8192};
	struct rdmamsg_srq_attr bad;
	struct rdmamsg_buf *buf = NULL;
	struct rdmamsg_mr *mr = NULL, *mr2 = NULL;
	struct rdmamsg_rmr *rmr = NULL;
	struct rdmamsg_srq *srq = NULL;
	struct rdmamsg_listener *lst = NULL;
	struct rdmamsg_group *g = NULL;
	struct rdmamsg_ep *ep = NULL;
	struct rdmamsg_ep_attr *ea;
	struct rdmamsg_group_cbs gcbs = {0};
	struct test_side side = {0};
	static char mem[8192];
	unsigned char exp[RDMAMSG_MR_EXPORT_SIZE];
	struct iovec iov[2];
	uint64_t v, id = 0;
	uint16_t port;
	size_t a, b;
	int fd, srq_closed = 0;

	/* context */
	is_int(rdmamsg_ctx_get_fd(NULL, &fd), -EINVAL, "get_fd(NULL)");
	is_int(rdmamsg_ctx_get_fd(ctx, NULL), -EINVAL, "get_fd(.., NULL)");
	is_int(rdmamsg_ctx_arm(NULL), -EINVAL, "arm(NULL)");
	is_int(rdmamsg_ctx_progress(NULL), -EINVAL, "progress(NULL)");
	is_int(rdmamsg_ctx_run(NULL), -EINVAL, "run(NULL)");
	is_int(rdmamsg_ctx_stop(NULL), -EINVAL, "stop(NULL)");
	is_int(rdmamsg_ctx_wakeup(NULL), -EINVAL, "wakeup(NULL)");
	is_int(rdmamsg_ctx_destroy(NULL), -EINVAL, "destroy(NULL)");
	is_int(rdmamsg_ctx_query_caps(ctx, (enum rdmamsg_cap)99, &v), -EINVAL,
	       "unknown cap");
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_SRQ, NULL), -EINVAL,
	       "query_caps NULL value");
	is_int(rdmamsg_ctx_query_pool(ctx, NULL, &b), -EINVAL,
	       "query_pool NULL out");
	is_int(rdmamsg_ctx_dc_stats(NULL, NULL), -EINVAL, "dc_stats(NULL)");

	/* buffers */
	is_int(rdmamsg_buf_alloc(NULL, 8, &buf), -EINVAL, "buf_alloc NULL ctx");
	is_int(rdmamsg_buf_alloc(ctx, 0, &buf), -EINVAL, "buf_alloc size 0");
	is_int(rdmamsg_buf_alloc(ctx, SIZE_MAX, &buf), -EMSGSIZE,
	       "buf_alloc SIZE_MAX");
	is_int(rdmamsg_buf_alloc(ctx, 8, NULL), -EINVAL, "buf_alloc NULL out");
	ok(buf == NULL, "no buffer from failed allocations");
	is_int(rdmamsg_buf_free(NULL), -EINVAL, "buf_free(NULL)");
	is_int(rdmamsg_buf_get_data(NULL, NULL), -EINVAL, "buf_get_data(NULL)");
	is_int(rdmamsg_buf_get_size(NULL, &a), -EINVAL, "buf_get_size(NULL)");

	/* regions */
	is_int(rdmamsg_mr_reg(ctx, mem, 0, 0, &mr), -EINVAL, "mr_reg len 0");
	is_int(rdmamsg_mr_reg(ctx, mem, sizeof(mem), 0x80, &mr), -EINVAL,
	       "mr_reg unknown access flag");
	is_int(rdmamsg_mr_reg(NULL, mem, sizeof(mem), 0, &mr), -EINVAL,
	       "mr_reg NULL ctx");
	is_int(rdmamsg_mr_reg(ctx, (void *)(UINTPTR_MAX - 16), 64, 0, &mr),
	       -EINVAL, "mr_reg range wrapping");
	is_int(rdmamsg_mr_alloc(ctx, 0, 0, &mr), -EINVAL, "mr_alloc len 0");
	is_int(rdmamsg_mr_alloc(ctx, 4096, 0x80, &mr), -EINVAL,
	       "mr_alloc unknown access flag");
	iov[0].iov_base = mem;
	iov[0].iov_len = 0;
	is_int(rdmamsg_mr_reg_iov(ctx, iov, 1, 0, &mr), -EINVAL,
	       "mr_reg_iov zero-length piece");
	iov[0].iov_len = 16;
	is_int(rdmamsg_mr_reg_iov(ctx, iov, 0, 0, &mr), -EINVAL,
	       "mr_reg_iov 0 pieces");
	is_int(rdmamsg_mr_reg_iov(ctx, iov, 1025, 0, &mr), -EINVAL,
	       "mr_reg_iov 1025 pieces");
	is_int(rdmamsg_mr_reg_strided(ctx, mem, 64, 32, 4, 0, &mr), -EINVAL,
	       "mr_reg_strided stride below block");
	is_int(rdmamsg_mr_reg_strided(ctx, mem, 64, SIZE_MAX / 2, 4, 0, &mr),
	       -EINVAL, "mr_reg_strided span wrapping");
	is_int(rdmamsg_mr_reg_strided(ctx, mem, 64, 64, 65537, 0, &mr), -EINVAL,
	       "mr_reg_strided 65537 blocks");
	ok(mr == NULL, "no region from failed registrations");
	is_int(rdmamsg_mr_dereg(NULL), -EINVAL, "mr_dereg(NULL)");
	is_int(rdmamsg_mr_dereg(&mr), -EINVAL, "mr_dereg(&NULL)");
	is_int(rdmamsg_mr_get_data(NULL, NULL, &a), -EINVAL,
	       "mr_get_data(NULL)");
	is_int(rdmamsg_mr_get_layout(NULL, NULL), -EINVAL,
	       "mr_get_layout(NULL)");
	is_int(rdmamsg_mr_reg(ctx, mem, sizeof(mem), RDMAMSG_ACCESS_REMOTE_READ,
			      &mr),
	       0, "mr_reg");
	is_int(rdmamsg_mr_export(mr, exp, sizeof(exp) - 1), -ENOSPC,
	       "mr_export short buffer");
	is_int(rdmamsg_mr_export(NULL, exp, sizeof(exp)), -EINVAL,
	       "mr_export(NULL)");
	is_int(rdmamsg_mr_export(mr, exp, sizeof(exp)), 0, "mr_export");
	is_int(rdmamsg_rmr_import(exp, sizeof(exp) - 1, &rmr), -EINVAL,
	       "rmr_import short");
	exp[0] ^= 0xff;
	is_int(rdmamsg_rmr_import(exp, sizeof(exp), &rmr), -EINVAL,
	       "rmr_import bad magic");
	ok(rmr == NULL, "no import from failed ones");
	is_int(rdmamsg_rmr_import(NULL, sizeof(exp), &rmr), -EINVAL,
	       "rmr_import(NULL)");
	is_int(rdmamsg_rmr_free(NULL), -EINVAL, "rmr_free(NULL)");
	is_int(rdmamsg_rmr_get_size(NULL, &a), -EINVAL, "rmr_get_size(NULL)");
	is_int(rdmamsg_mr_reg(other, mem, sizeof(mem), 0, &mr2), 0,
	       "mr_reg on the other context");
	is_int(rdmamsg_ctx_destroy(&other), -EBUSY,
	       "ctx_destroy with a region");
	ok(other != NULL, "context pointer kept");
	is_int(rdmamsg_mr_dereg(&mr2), 0, "mr_dereg");
	ok(mr2 == NULL, "mr_dereg clears the pointer");
	is_int(rdmamsg_buf_alloc(other, 100, &buf), 0, "buf_alloc");
	is_int(rdmamsg_ctx_destroy(&other), -EBUSY,
	       "ctx_destroy with a buffer out");
	is_int(rdmamsg_buf_free(buf), 0, "buf_free");
	buf = NULL;

	/* SRQs */
	bad = sa;
	bad.max_bufs = 7;
	is_int(rdmamsg_srq_create(ctx, &bad, &srq), -EINVAL, "srq 7 buffers");
	bad = sa;
	bad.buf_size = 63;
	is_int(rdmamsg_srq_create(ctx, &bad, &srq), -EINVAL,
	       "srq 63-byte buffers");
	bad = sa;
	bad.buf_size = (1u << 20) + 1;
	is_int(rdmamsg_srq_create(ctx, &bad, &srq), -EINVAL,
	       "srq buffers above 1 MiB");
	is_int(rdmamsg_srq_create(ctx, NULL, &srq), -EINVAL, "srq NULL attr");
	ok(srq == NULL, "no SRQ from failed creates");
	is_int(rdmamsg_srq_close(NULL, NULL, NULL), -EINVAL, "srq_close(NULL)");
	is_int(rdmamsg_srq_query(NULL, NULL), -EINVAL, "srq_query(NULL)");
	if (rdmamsg_srq_create(other, &sa, &srq))
		bail_out("srq_create");
	rdmamsg_ep_attr_new(&ea);
	is_int(rdmamsg_ep_attr_set_srq(ea, srq), 0, "set_srq");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", ea, &cbs, &side, &ep),
	       -EINVAL, "connect with an SRQ of another context");
	ok(ep == NULL, "no endpoint from it");
	is_int(rdmamsg_srq_close(srq, test_srq_closed, &srq_closed), 0,
	       "srq_close");
	is_int(rdmamsg_srq_close(srq, test_srq_closed, &srq_closed), -EALREADY,
	       "srq_close twice");
	is_int(rdmamsg_ctx_destroy(&other), -EBUSY,
	       "ctx_destroy before the SRQ's close callback");
	is_int(srq_closed, 0, "no SRQ close callback inside the call");
	is_int(rdmamsg_ep_attr_set_srq(ea, srq), -EINVAL,
	       "set_srq of a closing SRQ");
	test_run_until(other, &srq_closed, 2000);
	is_int(srq_closed, 1, "SRQ close callback once");

	/* listeners */
	is_int(rdmamsg_listen(ctx, NULL, on_lreq, NULL, &lst), -EINVAL,
	       "listen NULL address");
	is_int(rdmamsg_listen(ctx, "127.0.0.1", on_lreq, NULL, &lst), -EINVAL,
	       "listen without a port");
	is_int(rdmamsg_listen(ctx, "127.0.0.1:0", NULL, NULL, &lst), -EINVAL,
	       "listen without on_conn_req");
	is_int(rdmamsg_listen(NULL, "127.0.0.1:0", on_lreq, NULL, &lst),
	       -EINVAL, "listen NULL ctx");
	ok(lst == NULL, "no listener from failed listens");
	is_int(rdmamsg_listener_get_port(NULL, &port), -EINVAL,
	       "get_port(NULL)");
	is_int(rdmamsg_listener_close(NULL, NULL), -EINVAL,
	       "listener_close(NULL)");
	is_int(rdmamsg_conn_req_accept(NULL, NULL, &cbs, NULL, &ep), -EINVAL,
	       "accept(NULL)");
	is_int(rdmamsg_conn_req_reject(NULL, 0, NULL, 0), -EINVAL,
	       "reject(NULL)");
	if (rdmamsg_listen(ctx, "127.0.0.1:0", on_lreq, NULL, &lst))
		bail_out("listen");
	is_int(rdmamsg_listener_close(lst, on_lclose), 0, "listener_close");
	is_int(rdmamsg_listener_get_port(lst, &port), -ENOTCONN,
	       "get_port after close");
	is_int(rdmamsg_listener_close(lst, on_lclose), -EALREADY,
	       "listener_close twice");
	test_run_until(ctx, &lclosed, 2000);
	is_int(lclosed, 1, "listener close callback once");
	{
		struct rdmamsg_listener *l1, *l2 = NULL;
		char taken[64];

		if (rdmamsg_listen(ctx, "127.0.0.1:0", on_lreq, NULL, &l1) ||
		    rdmamsg_listener_get_port(l1, &port))
			bail_out("listen");
		snprintf(taken, sizeof(taken), "127.0.0.1:%u", port);
		is_int(rdmamsg_listen(ctx, taken, on_lreq, NULL, &l2),
		       -EADDRINUSE, "listen on a port taken");
		ok(l2 == NULL, "no listener from it");
		lclosed = 0;
		rdmamsg_listener_close(l1, on_lclose);
		test_run_until(ctx, &lclosed, 2000);
	}
	lst = NULL;
	is_int(rdmamsg_listen(ctx, "8.8.8.8:0", on_lreq, NULL, &lst), -ENODEV,
	       "listen on an address not on the device");
	ok(lst == NULL, "no listener from it");

	/* groups */
	is_int(rdmamsg_group_join(ctx, "10.0.0.1", NULL, &gcbs, NULL, &g),
	       -EINVAL, "join a unicast address");
	is_int(rdmamsg_group_join(ctx, "239.1.2.3", NULL, NULL, NULL, &g),
	       -EINVAL, "join without callbacks");
	is_int(rdmamsg_group_join(NULL, "239.1.2.3", NULL, &gcbs, NULL, &g),
	       -EINVAL, "join NULL ctx");
	{
		struct rdmamsg_group_attr *ga;

		rdmamsg_group_attr_new(&ga);
		rdmamsg_group_attr_set_bind_addr(ga, "239.1.1.1");
		is_int(rdmamsg_group_join(ctx, "239.1.2.3", ga, &gcbs, NULL,
					  &g),
		       -EINVAL, "join bound to a multicast address");
		rdmamsg_group_attr_set_bind_addr(ga, "::1");
		is_int(rdmamsg_group_join(ctx, "239.1.2.3", ga, &gcbs, NULL,
					  &g),
		       -EINVAL, "join bound to another family");
		rdmamsg_group_attr_set_bind_addr(ga, "1.2.3");
		is_int(rdmamsg_group_join(ctx, "239.1.2.3", ga, &gcbs, NULL,
					  &g),
		       -EINVAL, "join bound to a malformed address");
		rdmamsg_group_attr_set_bind_addr(ga, NULL);
		rdmamsg_group_attr_set_min_receivers(ga, 1);
		is_int(rdmamsg_group_join(ctx, "239.1.2.3", ga, &gcbs, NULL,
					  &g),
		       -EINVAL, "join with min receivers, not reliable");
		rdmamsg_group_attr_set_min_receivers(ga, 0);
		rdmamsg_group_attr_set_role(ga, RDMAMSG_GROUP_SUBSCRIBER);
		if (rdmamsg_group_join(ctx, "239.1.2.4", ga, &gcbs, NULL, &g) ==
		    0) {
			is_int(rdmamsg_group_publish(g, "x", 1, NULL), -EPERM,
			       "publish on a subscriber-only group");
			rdmamsg_group_close(g, on_gclose);
			test_run_until(ctx, &gclosed, 5000);
			gclosed = 0;
		}
		g = NULL;
		rdmamsg_group_attr_delete(&ga);
	}
	is_int(rdmamsg_group_join(ctx, "not-an-address", NULL, &gcbs, NULL, &g),
	       -EINVAL, "join a malformed address");
	ok(g == NULL, "no group from failed joins");
	is_int(rdmamsg_group_publish(NULL, "x", 1, NULL), -EINVAL,
	       "publish(NULL)");
	is_int(rdmamsg_group_close(NULL, NULL), -EINVAL, "group_close(NULL)");
	is_int(rdmamsg_group_query(NULL, NULL), -EINVAL, "group_query(NULL)");
	is_int(rdmamsg_group_get_id(NULL, &v), -EINVAL, "group_get_id(NULL)");
	if (rdmamsg_group_join(ctx, "239.1.2.3", NULL, &gcbs, NULL, &g) == 0) {
		is_int(rdmamsg_group_publish(g, NULL, 1, NULL), -EINVAL,
		       "publish NULL data with a length");
		is_int(rdmamsg_group_publish(g, "x", (64u << 10) + 1, NULL),
		       -EMSGSIZE, "publish above the maximum");
		is_int(rdmamsg_group_publish(g, "x", 1, NULL), -ENOTCONN,
		       "publish before the join finished");
		is_int(rdmamsg_ctx_destroy(&ctx), -EBUSY,
		       "ctx_destroy with a group");
		is_int(rdmamsg_group_close(g, on_gclose), 0, "group_close");
		is_int(rdmamsg_group_close(g, on_gclose), -EALREADY,
		       "group_close twice");
		is_int(rdmamsg_group_publish(g, "x", 1, NULL), -EPIPE,
		       "publish after close");
		test_run_until(ctx, &gclosed, 5000);
		is_int(gclosed, 1, "group close callback once");
	} else {
		skip_one("no multicast group here");
	}

	/* endpoints */
	rdmamsg_ep_attr_set_srq(ea, NULL);
	is_int(rdmamsg_connect(ctx, "127.0.0.1", NULL, &cbs, &side, &ep),
	       -EINVAL, "connect without a port");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1,127.0.0.1:2", NULL, &cbs,
			       &side, &ep),
	       -EINVAL, "an address list without the reconnect policy");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", NULL, NULL, &side, &ep),
	       -EINVAL, "connect without callbacks");
	is_int(rdmamsg_connect(ctx, "[::1:1", NULL, &cbs, &side, &ep), -EINVAL,
	       "connect to a malformed IPv6 address");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:99999", NULL, &cbs, &side, &ep),
	       -EINVAL, "connect to port 99999");
	is_int(rdmamsg_connect(ctx, "", NULL, &cbs, &side, &ep), -EINVAL,
	       "connect to an empty address");
	is_int(rdmamsg_connect(ctx, NULL, NULL, &cbs, &side, &ep), -EINVAL,
	       "connect to NULL");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:0", NULL, &cbs, &side, &ep),
	       -EINVAL, "connect to port 0");
	is_int(rdmamsg_connect(ctx, "no-such-host.invalid:7000", NULL, &cbs,
			       &side, &ep),
	       -EINVAL, "connect to a name that does not resolve");
	{
		static const char nine[] =
			"127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4,"
			"127.0.0.1:5,127.0.0.1:6,127.0.0.1:7,127.0.0.1:8,"
			"127.0.0.1:9";
		struct rdmamsg_ep_attr *fa;

		rdmamsg_ep_attr_new(&fa);
		rdmamsg_ep_attr_set_failover(fa, RDMAMSG_FAILOVER_RECONNECT);
		is_int(rdmamsg_connect(ctx, nine, fa, &cbs, &side, &ep),
		       -EINVAL, "more than RDMAMSG_MAX_PATHS addresses");
		is_int(rdmamsg_connect(ctx, "127.0.0.1:1,,127.0.0.1:2", fa,
				       &cbs, &side, &ep),
		       -EINVAL, "an empty entry in the list");
		is_int(rdmamsg_connect(ctx, "127.0.0.1:1,127.0.0.1", fa, &cbs,
				       &side, &ep),
		       -EINVAL, "an entry without a port");
		rdmamsg_ep_attr_delete(&fa);
	}
	is_int(rdmamsg_connect(NULL, "127.0.0.1:1", NULL, &cbs, &side, &ep),
	       -EINVAL, "connect NULL ctx");
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", NULL, &cbs, &side, NULL),
	       -EINVAL, "connect NULL out");
	ok(ep == NULL, "no endpoint from failed connects");
	rdmamsg_ep_attr_set_failover(ea, RDMAMSG_FAILOVER_REPLAY);
	{
		char pd[RDMAMSG_HS_SESSION_USER + 1] = {0};

		rdmamsg_ep_attr_set_private_data(ea, pd, sizeof(pd));
		is_int(rdmamsg_connect(ctx, "127.0.0.1:1", ea, &cbs, &side,
				       &ep),
		       -EINVAL, "REPLAY with private data above 24 bytes");
		ok(ep == NULL, "no endpoint from it");
	}
	is_int(rdmamsg_ep_close(NULL, NULL), -EINVAL, "ep_close(NULL)");
	is_int(rdmamsg_ep_get_state(NULL, NULL), -EINVAL, "get_state(NULL)");
	is_int(rdmamsg_ep_get_path_stats(NULL, NULL), -EINVAL,
	       "get_path_stats(NULL)");
	is_int(rdmamsg_ep_test_break(NULL), -EINVAL, "test_break(NULL)");
	is_int(rdmamsg_ep_get_late_responses(NULL, &v), -EINVAL,
	       "late_responses(NULL)");
	is_int(rdmamsg_request_cancel(NULL, 1), -EINVAL,
	       "request_cancel(NULL)");
	is_int(rdmamsg_respond(NULL, NULL, 0), -EINVAL, "respond(NULL)");
	is_int(rdmamsg_req_drop(NULL), -EINVAL, "req_drop(NULL)");
	is_int(rdmamsg_recv_keep(NULL, &buf), -EINVAL, "recv_keep(NULL)");

	dc_args(ctx);

	/* an endpoint still connecting (nobody listens at port 1 for long) */
	is_int(rdmamsg_connect(ctx, "127.0.0.1:1", NULL, &cbs, &side, &ep), 0,
	       "connect");
	is_int(rdmamsg_send(ep, "x", 1, NULL), -ENOTCONN,
	       "send while connecting");
	is_int(rdmamsg_ep_get_max_msg_size(ep, &a), -ENOTCONN,
	       "max_msg_size before the handshake");
	is_int(rdmamsg_ep_get_pack_limit(ep, &a), -ENOTCONN,
	       "pack_limit before the handshake");
	is_int(rdmamsg_ep_test_break(ep), -ENOTCONN,
	       "test_break while connecting");
	is_int(rdmamsg_request(ep, "x", 1, 0, on_resp, NULL, &id), -ENOTCONN,
	       "request while connecting");
	is_int(rdmamsg_ep_get_late_responses(ep, NULL), -EINVAL,
	       "late_responses NULL out");
	is_int(rdmamsg_ep_get_protocols(ep, NULL), -EINVAL,
	       "get_protocols NULL out");
	is_int(rdmamsg_request_cancel(ep, 12345), -ENOENT,
	       "cancel of an unknown request");
	is_int(rdmamsg_recv_keep(ep, &buf), -EINVAL,
	       "recv_keep outside on_recv");
	is_int(rdmamsg_ep_close(ep, test_side_on_close), 0, "ep_close");
	ok(!side.up && !side.disc && !side.closed,
	   "no callback inside ep_close");
	is_int(rdmamsg_ep_close(ep, test_side_on_close), -EALREADY,
	       "ep_close twice");
	is_int(rdmamsg_send(ep, "x", 1, NULL), -ENOTCONN, "send after close");
	test_run_until(ctx, &side.closed, 5000);
	ok(side.closed, "endpoint closed");

	rdmamsg_mr_dereg(&mr2);
	rdmamsg_mr_dereg(&mr);
	rdmamsg_ep_attr_delete(&ea);
}

/* connected -- data-path calls with bad arguments on a live connection */
static void connected(struct test_side *srv, struct test_side *cli)
{
	struct rdmamsg_buf *buf, *obuf;
	struct rdmamsg_mr *lmr, *omr, *ro;
	struct rdmamsg_rmr *rmr;
	unsigned char exp[RDMAMSG_MR_EXPORT_SIZE];
	static char mem[8192], mem2[64];
	struct rdmamsg_protocols pr;
	struct iovec iov[2];
	uint64_t id = 0;
	size_t sz;
	int ret;

	is_int(rdmamsg_ep_get_protocols(cli->ep, &pr), 0, "protocols");
	is_int(rdmamsg_send(cli->ep, NULL, 1, NULL), -EINVAL,
	       "send NULL data with a length");
	is_int(rdmamsg_send(NULL, "x", 1, NULL), -EINVAL, "send NULL ep");
	is_int(rdmamsg_send(cli->ep, "x", SIZE_MAX, NULL), -EMSGSIZE,
	       "send SIZE_MAX");
	is_int(rdmamsg_send(cli->ep, "x", pr.max_large + 1, NULL), -EMSGSIZE,
	       "send above the large maximum");
	{
		/* -EMSGSIZE only above the large maximum: a message above the
		 * negotiated maximum goes by rendezvous (rdmamsg_send(3)) */
		size_t big = pr.max_msg + 1;
		char *p = calloc(1, big);

		ok(p && pr.max_large > pr.max_msg,
		   "large maximum above max_msg");
		is_int(rdmamsg_send(cli->ep, p, big, NULL), 0,
		       "send of max_msg + 1 bytes");
		TEST_RUN2_WHILE(srv, cli, srv->got < 1, 5000);
		is_int(srv->got, 1, "received");
		free(p);
	}
	is_int(rdmamsg_send_imm(cli->ep, NULL, 1, 0, NULL), -EINVAL,
	       "send_imm NULL data");
	is_int(rdmamsg_send_nocopy(cli->ep, NULL, 1, NULL), -EINVAL,
	       "send_nocopy NULL data");
	is_int(rdmamsg_send_nocopy(cli->ep, "x", SIZE_MAX, NULL), -EMSGSIZE,
	       "send_nocopy SIZE_MAX");
	is_int(rdmamsg_send_large(cli->ep, "x", SIZE_MAX, NULL), -EMSGSIZE,
	       "send_large SIZE_MAX");

	/* sendv */
	iov[0].iov_base = mem;
	iov[0].iov_len = SIZE_MAX;
	iov[1].iov_base = mem;
	iov[1].iov_len = 2;
	is_int(rdmamsg_sendv(cli->ep, iov, 2, NULL), -EMSGSIZE,
	       "sendv total wrapping");
	is_int(rdmamsg_sendv(cli->ep, iov, 0, NULL), -EINVAL, "sendv 0 pieces");
	is_int(rdmamsg_sendv(cli->ep, iov, RDMAMSG_IOV_MAX + 1, NULL), -EINVAL,
	       "sendv too many pieces");
	is_int(rdmamsg_sendv(cli->ep, NULL, 1, NULL), -EINVAL,
	       "sendv NULL iov");
	iov[0].iov_base = NULL;
	iov[0].iov_len = 1;
	is_int(rdmamsg_sendv(cli->ep, iov, 2, NULL), -EINVAL,
	       "sendv NULL base with a length");

	/* zero-copy */
	if (rdmamsg_buf_alloc(cli->ctx, 64, &buf) ||
	    rdmamsg_buf_alloc(srv->ctx, 64, &obuf))
		bail_out("buf_alloc");
	rdmamsg_buf_get_size(buf, &sz);
	is_int(rdmamsg_send_buf(cli->ep, buf, sz + 1, NULL), -EINVAL,
	       "send_buf beyond the buffer");
	ret = rdmamsg_send_buf(cli->ep, buf, SIZE_MAX, NULL);
	ok(ret == -EINVAL || ret == -EMSGSIZE,
	   "send_buf SIZE_MAX: -EINVAL (beyond the buffer) or -EMSGSIZE (%d)",
	   ret);
	is_int(rdmamsg_send_buf(cli->ep, obuf, 8, NULL), -EINVAL,
	       "send_buf of another context's buffer");
	is_int(rdmamsg_send_buf(cli->ep, NULL, 8, NULL), -EINVAL,
	       "send_buf NULL buffer");
	is_int(rdmamsg_send_buf_imm(cli->ep, obuf, 8, 0, NULL), -EINVAL,
	       "send_buf_imm of another context's buffer");
	is_int(rdmamsg_buf_free(obuf), 0, "buf_free of the other");
	is_int(rdmamsg_buf_free(obuf), -EINVAL, "buf_free twice");
	is_int(rdmamsg_buf_get_size(obuf, &sz), -EINVAL,
	       "buf_get_size of a freed buffer");
	is_int(rdmamsg_send_buf(cli->ep, buf, 8, NULL), 0, "send_buf");
	is_int(rdmamsg_send_buf(cli->ep, buf, 8, NULL), -EINVAL,
	       "send_buf of a buffer already sent");
	is_int(rdmamsg_buf_free(buf), -EINVAL, "buf_free of a sent buffer");

	/* requests */
	is_int(rdmamsg_request(cli->ep, "x", SIZE_MAX, 0, on_resp, NULL, &id),
	       -EMSGSIZE, "request SIZE_MAX");
	is_int(rdmamsg_request(cli->ep, "x", 1, 0, NULL, NULL, &id), -EINVAL,
	       "request without a callback");
	is_int(rdmamsg_request(cli->ep, NULL, 1, 0, on_resp, NULL, &id),
	       -EINVAL, "request NULL data");
	ok(id == 0, "no id from failed requests");
	is_int(rdmamsg_request(cli->ep, "x", 1, 0, on_resp, NULL, &id), 0,
	       "request");
	is_int(rdmamsg_request_cancel(cli->ep, id), 0, "request_cancel");
	is_int(rdmamsg_request_cancel(cli->ep, id), -ENOENT,
	       "request_cancel twice");

	/* one-sided */
	if (rdmamsg_mr_reg(cli->ctx, mem, sizeof(mem),
			   RDMAMSG_ACCESS_REMOTE_READ |
				   RDMAMSG_ACCESS_REMOTE_WRITE,
			   &lmr) ||
	    rdmamsg_mr_reg(srv->ctx, mem, sizeof(mem),
			   RDMAMSG_ACCESS_REMOTE_WRITE, &omr) ||
	    rdmamsg_mr_reg(cli->ctx, mem2, sizeof(mem2), 0, &ro))
		bail_out("mr_reg");
	rdmamsg_mr_export(omr, exp, sizeof(exp));
	if (rdmamsg_rmr_import(exp, sizeof(exp), &rmr))
		bail_out("rmr_import");
	is_int(rdmamsg_write(cli->ep, lmr, 1, rmr, 0, SIZE_MAX, NULL, NULL),
	       -ERANGE, "write loff + len wrapping");
	is_int(rdmamsg_write(cli->ep, lmr, 0, rmr, SIZE_MAX, 2, NULL, NULL),
	       -ERANGE, "write roff + len wrapping");
	is_int(rdmamsg_write(cli->ep, lmr, 0, rmr, 0, sizeof(mem) + 1, NULL,
			     NULL),
	       -ERANGE, "write beyond the regions");
	is_int(rdmamsg_write(cli->ep, omr, 0, rmr, 0, 8, NULL, NULL), -EINVAL,
	       "write from another context's region");
	is_int(rdmamsg_write(cli->ep, NULL, 0, rmr, 0, 8, NULL, NULL), -EINVAL,
	       "write NULL region");
	is_int(rdmamsg_read(cli->ep, lmr, 0, rmr, 0, 8, NULL, NULL), -EACCES,
	       "read without remote read access");
	is_int(rdmamsg_write_imm(cli->ep, lmr, 0, rmr, SIZE_MAX, 2, 0, NULL,
				 NULL),
	       -ERANGE, "write_imm roff + len wrapping");
	ret = rdmamsg_atomic_cas(cli->ep, rmr, 3, 0, 0, NULL, NULL);
	is_int(ret, -EINVAL, "cas unaligned");
	ret = rdmamsg_atomic_fadd(cli->ep, rmr, SIZE_MAX - 7, 1, NULL, NULL);
	ok(ret == -ERANGE || ret == -ENOTSUP, "fadd at SIZE_MAX - 7: %d", ret);
	is_int(rdmamsg_atomic_fadd(NULL, rmr, 0, 1, NULL, NULL), -EINVAL,
	       "fadd NULL ep");
	is_int(rdmamsg_send_mr(cli->ep, lmr, 0, 0, NULL), -EINVAL,
	       "send_mr len 0");
	is_int(rdmamsg_send_mr(cli->ep, lmr, 1, SIZE_MAX, NULL), -ERANGE,
	       "send_mr off + len wrapping");
	is_int(rdmamsg_send_mr(cli->ep, omr, 0, 8, NULL), -EINVAL,
	       "send_mr of another context's region");
	is_int(rdmamsg_send_mr(cli->ep, ro, 0, 8, NULL), -EACCES,
	       "send_mr without remote read");

	/* calls from inside on_recv */
	recv_ctx = srv->ctx;
	is_int(rdmamsg_send(cli->ep, "hello", 5, NULL), 0, "send");
	TEST_RUN2_WHILE(srv, cli, srv->got < 3, 5000);
	is_int(srv->got, 3, "all three received");
	is_int(in_cb_destroy, -EBUSY, "ctx_destroy from a callback");
	ok(recv_ctx == srv->ctx, "the context pointer untouched");
	is_int(in_cb_progress, 0, "ctx_progress from a callback does nothing");
	is_int(in_cb_keep2, -EINVAL, "recv_keep twice for one message");
	is_int(in_cb_arm, -EBUSY, "ctx_arm from a callback");
	is_int(in_cb_run, -EBUSY, "ctx_run from a callback");

	/* a region an operation in flight uses */
	is_int(rdmamsg_mr_export(lmr, exp, sizeof(exp)), 0, "export lmr");
	{
		struct rdmamsg_rmr *self;
		int done = 0;

		rdmamsg_mr_export(omr, exp, sizeof(exp));
		if (rdmamsg_rmr_import(exp, sizeof(exp), &self))
			bail_out("rmr_import");
		is_int(rdmamsg_write(cli->ep, lmr, 0, self, 0, 64, NULL, NULL),
		       0, "write");
		is_int(rdmamsg_mr_dereg(&lmr), -EBUSY,
		       "mr_dereg while a write uses it");
		ok(lmr != NULL, "region pointer kept");
		TEST_RUN2_WHILE(srv, cli, !done++, 200);
		rdmamsg_rmr_free(&self);
	}

	/* a cut: handled at once, inside the call (rdmamsg.h) */
	is_int(cli->disc, 0, "no disconnect yet");
	is_int(rdmamsg_ep_test_break(cli->ep), 0, "test_break");
	is_int(cli->disc, 1, "on_disconnect ran inside test_break");
	is_int(rdmamsg_ep_test_break(cli->ep), -ENOTCONN,
	       "test_break once down");

	/* an endpoint that is closing */
	is_int(rdmamsg_ep_close(cli->ep, test_side_on_close), 0,
	       "close the client");
	iov[0].iov_base = mem;
	iov[0].iov_len = 8;
	iov[1].iov_base = mem;
	iov[1].iov_len = 8;
	is_int(rdmamsg_send(cli->ep, "x", 1, NULL), -ENOTCONN,
	       "send while closing");
	is_int(rdmamsg_sendv(cli->ep, iov, 2, NULL), -ENOTCONN,
	       "sendv while closing");
	is_int(rdmamsg_request(cli->ep, "x", 1, 0, on_resp, NULL, &id),
	       -ENOTCONN, "request while closing");
	is_int(rdmamsg_write(cli->ep, lmr, 0, rmr, 0, 8, NULL, NULL), -ENOTCONN,
	       "write while closing");
	is_int(rdmamsg_send_mr(cli->ep, lmr, 0, 8, NULL), -ENOTCONN,
	       "send_mr while closing");
	is_int(rdmamsg_ep_test_break(cli->ep), -ENOTCONN,
	       "test_break while closing");
	is_int(rdmamsg_ep_close(cli->ep, test_side_on_close), -EALREADY,
	       "close twice");

	rdmamsg_rmr_free(&rmr);
	rdmamsg_mr_dereg(&ro);
	rdmamsg_mr_dereg(&omr);
	rdmamsg_mr_dereg(&lmr);
}

/* pool_limit -- a context whose pool is full says -ENOMEM, and recovers */
static void pool_limit(void)
{
	struct rdmamsg_ctx_attr *ca;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_buf *b[64];
	int i, n = 0, ret = 0;

	rdmamsg_ctx_attr_new(&ca);
	rdmamsg_ctx_attr_set_pool_limit(ca, 1u << 20);
	if (rdmamsg_ctx_create(ca, &ctx))
		bail_out("ctx_create");
	rdmamsg_ctx_attr_delete(&ca);
	is_int(rdmamsg_buf_alloc(ctx, 2u << 20, &b[0]), -ENOMEM,
	       "buffer above the pool limit");
	for (i = 0; i < 64; i++) {
		ret = rdmamsg_buf_alloc(ctx, 64u << 10, &b[n]);
		if (ret)
			break;
		n++;
	}
	is_int(ret, -ENOMEM, "a full pool says -ENOMEM");
	ok(n > 0 && n < 64, "%d buffers of 64 KiB in a 1 MiB pool", n);
	while (n > 0)
		rdmamsg_buf_free(b[--n]);
	is_int(rdmamsg_buf_alloc(ctx, 64u << 10, &b[0]), 0,
	       "room again after the frees");
	rdmamsg_buf_free(b[0]);
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "pool context destroyed");
}

/* libev_destroy -- in libev mode too, a wakeup callback that destroys its
 * own context is refused (the pass running it holds the context) */
static struct rdmamsg_ctx *ev_ctx;
static int ev_destroy = 1, ev_calls;

static void on_ev_wakeup(struct rdmamsg_ctx *ctx, void *arg)
{
	(void)ctx;
	(void)arg;
	ev_calls++;
	ev_destroy = rdmamsg_ctx_destroy(&ev_ctx);
}

static void libev_destroy(void)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct rdmamsg_ctx_attr *ca;
	int i;

	rdmamsg_ctx_attr_new(&ca);
	rdmamsg_ctx_attr_set_loop(ca, loop);
	rdmamsg_ctx_attr_set_wakeup_cb(ca, on_ev_wakeup, NULL);
	if (rdmamsg_ctx_create(ca, &ev_ctx))
		bail_out("libev context");
	rdmamsg_ctx_attr_delete(&ca);
	rdmamsg_ctx_wakeup(ev_ctx);
	for (i = 0; i < 200 && !ev_calls; i++) {
		ev_run(loop, EVRUN_NOWAIT);
		usleep(1000);
	}
	is_int(ev_calls, 1, "libev: the wakeup callback ran");
	is_int(ev_destroy, -EBUSY, "libev: ctx_destroy from a callback");
	ok(ev_ctx != NULL, "libev: the context survives it");
	is_int(rdmamsg_ctx_destroy(&ev_ctx), 0, "libev: destroyed outside");
	ev_loop_destroy(loop);
}

/* srq_limit -- the 256th SRQ of a context is -ENOBUFS (rdmamsg.h) */
static void srq_limit(void)
{
	struct rdmamsg_srq_attr sa = {.max_bufs = 8, .buf_size = 64};
	static struct rdmamsg_srq *q[300];
	struct rdmamsg_ctx *ctx = test_ctx();
	int i, n = 0, closed = 0, ret = 0;

	for (i = 0; i < 300; i++) {
		ret = rdmamsg_srq_create(ctx, &sa, &q[n]);
		if (ret)
			break;
		n++;
	}
	diag("%d SRQs, then %d", n, ret);
	ok(n == 255 ? ret == -ENOBUFS : ret == -ENOMEM,
	   "the SRQ after the last: -ENOBUFS at 255, else -ENOMEM (%d, %d)", n,
	   ret);
	for (i = 0; i < n; i++)
		rdmamsg_srq_close(q[i], test_srq_closed, &closed);
	for (i = 0; i < 200 && closed < n; i++)
		test_idle(ctx, 10);
	is_int(closed, n, "all SRQs closed");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "SRQ context destroyed");
}

int main(void)
{
	static struct test_side srv, cli;
	char addr[64];

	test_setup("api_contract");
	attrs();
	pool_limit();
	srq_limit();
	libev_destroy();

	srv.ctx = test_ctx();
	cli.ctx = test_ctx();
	objects(cli.ctx, srv.ctx);

	srv.cbs = &cbs;
	rdmamsg_ep_attr_new(&srv.attr);
	rdmamsg_ep_attr_set_on_request(srv.attr, on_request);
	if (test_side_listen(&srv, on_req_checks, addr, sizeof(addr)))
		bail_out("listen");
	is_int(rdmamsg_connect(cli.ctx, addr, NULL, &cbs, &cli, &cli.ep), 0,
	       "connect");
	test_run2(&srv, &cli, &cli.up, 5000);
	is_int(cli.status, 0, "connected");
	is_int(bad_dec[0], -EINVAL, "reject reason -1");
	is_int(bad_dec[1], -EINVAL, "reject reason 65536");
	is_int(bad_dec[2], -EINVAL, "reject private data above the maximum");
	is_int(bad_dec[3], -EINVAL, "reject NULL private data with a length");
	is_int(bad_dec[4], -EINVAL, "accept with a failover policy");
	is_int(bad_dec[5], -EINVAL, "accept without callbacks");
	if (cli.status == 0 && cli.up)
		connected(&srv, &cli);
	test_run2(&srv, &cli, &srv.disc, 5000);
	ok(held != NULL, "the server got a request");
	is_int(resp_null, -EINVAL, "respond NULL data with a length");
	is_int(resp_big, -EMSGSIZE, "respond SIZE_MAX");
	if (held) {
		is_int(rdmamsg_respond(held, "x", 1), -ENOTCONN,
		       "respond once the connection is down");
		is_int(rdmamsg_req_drop(held), 0, "the request stays: drop it");
	}
	ok(test_side_close2(&srv, &cli, 5000), "everything closed");
	rdmamsg_ep_attr_delete(&srv.attr);
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
	return done_testing();
}
