/* SPDX-License-Identifier: MIT */
/*
 * group.c -- multicast groups: a UD lane of the context per group (its own
 * UD QP on the interface's CQ, completions routed by wr_id, receive
 * buffers from the context's pool), joined with rdma_join_multicast(_ex)
 * (send-only for a publisher-only group).
 *
 * Publisher: every message gets the next sequence number and goes out as
 * fragments of at most one path MTU, back to back (lib/proto.h,
 * struct rdmamsg__mc_wire), or, one that fits a path MTU but not with
 * the header (4 KiB), bare: without it, its sequence number in the
 * immediate data, its publisher known by the sender's address and QP
 * number; while idle (or sending bare datagrams) it sends a heartbeat
 * naming its next sequence number every heartbeat period, and a last one
 * (FIN) when it leaves.
 *
 * Subscriber: per publisher the next sequence number it expects.  A
 * publisher heard of for the first time starts at the first message whose
 * first fragment (or at the sequence number a heartbeat names): a late
 * joiner is reported no losses from before it joined.  Anything that skips
 * sequence numbers (a datagram lost, a fragment missing, a heartbeat
 * ahead of what arrived) is reported to on_loss with its range, exactly
 * once, so that reported + received == published.  Datagrams that came
 * before (sequence below the expected one) are dropped as duplicates,
 * the rest of a message already reported lost as lost_fragments.
 * Reordering inside one publisher's stream counts as loss.
 *
 * Reliable mode (window != 0): the publisher keeps its last window
 * messages, sends a heartbeat with its unicast address every period and
 * receives NAKs and status messages there; a subscriber keeps what comes
 * after a missing message (its reorder slots), NAKs exactly the messages
 * it misses (a selective NAK's bitmap; the publisher sends only those
 * again) and reports only what the publisher no longer keeps (a MCF_LOW
 * heartbeat); the publisher stays
 * within window of the subscriber its flow-control strategy names (min:
 * the slowest heard from lately; max: the fastest; tagged: the slowest
 * of those with its tag) and repairs: unicast to the subscriber whose NAK
 * (carrying its address) asked, so that the others see no duplicates;
 * by multicast when a second subscriber NAKs while (or shortly after) a
 * repair is under way, one repair then serving every subscriber missing
 * the same messages.  A repair goes before new messages but takes at
 * most half of a busy send queue: publishing goes on meanwhile, only
 * the window stops it.
 *
 * Everything the user sees is called from the context's progress: message
 * and loss callbacks from the CQ drain, the close callback from a timer,
 * never from inside a call of the user's.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "dispatch.h"
#include "group.h"
#include "internal.h"
#include "proto.h"

#define GRH_BYTES	 40
#define G_RX_PAD	 24 /* before the GRH: the payload 64-byte aligned */
#define G_RX_CHUNK	 (4u << 20) /* receive slots share pool buffers this big */
#define G_DEF_MAX_MSG	 (64u << 10)
#define G_DEF_RDEPTH	 512
#define G_DEF_SDEPTH	 256
#define G_MIN_DEPTH	 16
#define G_MAX_DEPTH	 16384
#define G_DEF_HB_MS	 100
#define G_DEF_POLL_US	 30 /* doc/performance.md, "Multicast groups" */
#define G_MAX_POLL_US	 100000
#define G_RESOLVE_MS	 5000
#define G_CLOSE_MS	 2000 /* sends still in flight after: cancelled */
#define G_MAX_PUBLISHERS 1024
#define G_MAX_RECEIVERS	 1024
#define G_MAX_WINDOW	 65536
#define G_NAK_MS	 2	    /* a subscriber's first NAK back-off */
#define G_NAK_MAX_MS	 50	    /* its longest */
#define G_REPAIR_HOLD_NS 1000000ull /* a repair is not restarted sooner */
#define G_RCV_EXPIRE_MS	 5000	    /* or 10 heartbeats: not waited for */
#define G_OOO_MAX	 256	    /* a subscriber's reorder slots, at most */
#define G_NAK_PLAIN	 4	    /* every 4th NAK plain, until one worked, */
#define G_NAK_PLAIN_MS	 500	    /* once selective ones failed this long */
#define G_PACK_MAX	 64	    /* messages a batch carries, at most */
#define G_CHAIN		 32	    /* sends a post chains, one signalled */
#define G_MAX_RECS	 65536	    /* publishes in flight, at most */
#define G_REPOST	 32	    /* receives posted again at once */
#define G_SM_PASS	 16 /* a pass's end: status if window / this more */
#define G_FINS		 3  /* a leaving publisher's last heartbeats */
#define G_FIN_GAP_MS	 50 /* apart (or a heartbeat period, if shorter) */

enum { G_RESOLVING = 0, G_JOINING, G_UP, G_FAILED };

struct rdmamsg_group_attr {
	unsigned int role;
	size_t max_msg;
	uint32_t rdepth, sdepth;
	unsigned int hb_ms;
	uint32_t window;
	int flow;	  /* enum rdmamsg_group_flow */
	uint32_t fc_tag;  /* TAGGED: the subscribers' tag waited for */
	uint32_t tag;	  /* ours, in our status messages */
	uint32_t min_rcv; /* publishes held until this many are heard */
	int batch;	  /* small messages packed while others are in flight */
	unsigned int poll_us; /* a subscriber's poll before it blocks */
	char *bind;
};

/* a send queued (sq_post .. sq_head - 1) or posted (sq_tail ..): its
 * work request, built as it is queued, chained to the next as it goes */
struct gtx {
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct rdmamsg_buf *buf;
};

/* a message published: on_publish once datagram dg (its last) is done */
struct grec {
	void *op_ctx;
	uint64_t dg;
};

struct gpub {
	uint64_t id;
	uint64_t next; /* the sequence number expected */
	char *asm_buf; /* reassembly of message next */
	size_t asm_cap;
	uint32_t asm_total, asm_off;
	int assembling;
	/* reliable mode: the way back to the publisher */
	struct ibv_ah *ah;
	uint32_t qpn;
	int gap; /* next is missing: NAKed (or waiting for the address) */
	int unreliable;	  /* its heartbeats have no address */
	uint64_t nak_ns;  /* when it was NAKed last */
	uint32_t nak_ms;  /* the back-off */
	uint64_t sm_sent; /* the position the last status message said */
	uint64_t seen;	  /* one past the last message it told us of */
	uint64_t last_ns; /* when we last heard from it */
	/* reliable mode: what came after a missing message, kept */
	struct gooo *ooo; /* nooo slots (a power of two), seq % nooo */
	uint32_t nooo;
	uint64_t nak_hi; /* one past the last message our last NAK named */
	uint32_t nak_n;	 /* NAKs sent for the gap at hand */
	int sel_sent;	 /* our last NAK was selective */
	int sel_ok;	 /* a repair came after a selective NAK */
	uint64_t sel_ns; /* our first selective NAK (while !sel_ok) */
	/* the last range reported lost: later fragments of its messages
	 * are counted as lost_fragments, not duplicates */
	uint64_t lost_first, lost_end;
	/* where its last headed datagram came from (GRH source address,
	 * QP number): its bare datagrams are known by it */
	uint8_t src[16];
	uint32_t src_qpn;
	int have_src;
};

/* a message kept for repair (reliable publisher) */
struct gkeep {
	uint64_t seq;
	size_t len, cap;
	char *data;
	int want;	 /* a NAK asked for it: the repair sends it */
	uint64_t rep_ns; /* when it was last repaired (0: never) */
	uint64_t rep_to; /* to whom: a subscriber's id, 0 multicast */
};

/* a message that came ahead of a missing one (reliable subscriber) */
struct gooo {
	uint64_t seq;
	char *data;
	size_t cap;
	uint32_t total, off;
	/* OOO_EMPTY, OOO_PART (off bytes so far), OOO_FULL, OOO_LOST (above
	 * our maximum size: reported lost in its turn) */
	int state;
};

enum { OOO_EMPTY = 0, OOO_PART, OOO_FULL, OOO_LOST };

/* a subscriber a reliable publisher heard from */
struct grcv {
	uint64_t id, pos, last_ns;
	uint32_t tag; /* the one its status messages carry */
	int silent;   /* not heard from lately: not waited for */
	int left;     /* its LEAVE came: its status messages are stale */
	/* the way to it for unicast repairs (its NAKs' address) */
	struct ibv_ah *ah;
	uint32_t qpn;
	uint8_t addr[RDMAMSG_MC_ADDR];
};

struct rdmamsg_group {
	struct rdmamsg__cmobj obj; /* first: the iface and cm/ find us */
	struct rdmamsg_ctx *ctx;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	uint32_t rqpn, rqkey;
	struct sockaddr_storage maddr;
	int state, status;
	/* a join went out: the id holds a membership until
	 * rdma_leave_multicast */
	int joined;
	/* the QP (ours, not the id's: rdma_cm attaches none) is attached to
	 * the group at mgid, mlid: detached before it is destroyed (the
	 * kernel refuses to destroy an attached QP) */
	int attached;
	union ibv_gid mgid;
	uint16_t mlid;
	unsigned int role;
	size_t max_msg;
	uint32_t rdepth, sdepth;
	unsigned int hb_ms;
	uint64_t poll_ns; /* after a receive, poll this long before blocking */
	uint64_t rx_ns;	  /* the pass that last received (ctx->now) */
	struct rdmamsg_group_cbs cbs;
	void *arg;
	uint64_t pub_id;
	uint32_t mtu;  /* path MTU: payload bytes of a datagram */
	uint32_t frag; /* our payload per datagram (mtu - header) */

	/* the interface: our UD QP's completions come to lane.ops->wcs */
	struct rdmamsg__lane lane;

	/* send side */
	struct gtx *tx;
	uint32_t sq_mask;
	/* sends sq_tail .. sq_post - 1 are posted, sq_post .. sq_head - 1
	 * queued for the pass's end (post_to) */
	uint64_t sq_head, sq_post, sq_tail;
	uint64_t next_seq;
	int sent_since_hb;
	int bare_since_hb; /* a bare datagram: the next heartbeat goes */
	/* the messages published, not yet completed: rec_tail .. rec_post -
	 * 1 are in datagrams posted, rec_post .. rec_head - 1 in the batch */
	struct grec *recs;
	uint32_t rec_mask;
	uint64_t rec_head, rec_post, rec_tail;
	/* the batch being filled: pk_n messages from pk_seq on */
	int batch;
	struct rdmamsg_buf *pk;
	uint32_t pk_n;
	uint64_t pk_seq;

	/* receive side: nrx slots of rx_len bytes (a GRH and a datagram of
	 * the path MTU) and their pad, packed into nrxc pool buffers */
	struct rdmamsg_buf **rxc;
	uint32_t nrxc;
	char **rxa;    /* slot i's start */
	uint32_t *rxk; /* its lkey */
	uint32_t rx_len;
	uint32_t nrx;
	uint32_t *rpend; /* receive buffers to post again, nrpend of them */
	uint32_t nrpend;
	int sm_due; /* reliable: a delivery since the pass began */
	struct gpub *pubs;
	uint32_t npub;
	uint32_t drop_every, drop_n; /* test hook: RDMAMSG_TEST_MC_DROP */

	/* reliable mode (window != 0) */
	uint32_t window;
	int flow;	      /* enum rdmamsg_group_flow */
	uint32_t fc_tag, tag; /* as in the attributes */
	uint32_t min_rcv;     /* as in the attributes */
	struct gkeep *keep;   /* publisher: the last window messages */
	struct grcv *rcv;     /* publisher: the subscribers it waits for */
	uint32_t nrcv;
	union ibv_gid gid; /* ours, for the heartbeats' MCF_ADDR */
	uint8_t sgid_index, port;
	int have_gid;
	/* the repair under way: the kept messages wanted, from rep_next
	 * (the lowest) to rep_end (one past the highest) */
	uint64_t rep_next, rep_end, rep_ns;
	uint64_t rep_to;       /* to subscriber: unicast; 0: multicast */
	struct ibv_ah *rep_ah; /* where it goes */
	uint32_t rep_qpn;
	int repairing;
	uint32_t fins;	  /* last heartbeats (MCF_FIN) sent as we leave */
	uint64_t fin_ns;  /* when the last of them went */
	uint64_t sm_last; /* when sm_fn last ran */

	struct rdmamsg_buf *hold; /* the context is busy while we live */
	struct rdmamsg__timer hb_timer, step_timer, close_timer, sm_timer;
	struct rdmamsg_group_stats st;
	int closing, close_timed_out, ref;
	void (*close_cb)(struct rdmamsg_group *g, void *arg);
};

/* ---- attributes ---------------------------------------------------- */

/* def_poll_us -- the default poll before blocking: RDMAMSG_GROUP_POLL_US
 * (0 .. G_MAX_POLL_US) if set, else G_DEF_POLL_US */
static unsigned int def_poll_us(void)
{
	const char *e = getenv("RDMAMSG_GROUP_POLL_US");
	unsigned long v;
	char *end;

	if (!e || !*e)
		return G_DEF_POLL_US;
	errno = 0;
	v = strtoul(e, &end, 10);
	if (errno || *end || v > G_MAX_POLL_US || e[0] == '-') {
		LOG_WARN("RDMAMSG_GROUP_POLL_US=%s ignored (0 .. %u)", e,
			 G_MAX_POLL_US);
		return G_DEF_POLL_US;
	}
	return (unsigned int)v;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_new(struct rdmamsg_group_attr **attr)
{
	struct rdmamsg_group_attr *a;

	if (!attr)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->role = RDMAMSG_GROUP_PUBLISHER | RDMAMSG_GROUP_SUBSCRIBER;
	a->max_msg = G_DEF_MAX_MSG;
	a->rdepth = G_DEF_RDEPTH;
	a->sdepth = G_DEF_SDEPTH;
	a->hb_ms = G_DEF_HB_MS;
	a->batch = 1;
	a->poll_us = def_poll_us();
	*attr = a;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_delete(struct rdmamsg_group_attr **attr)
{
	if (!attr)
		return -EINVAL;
	if (*attr) {
		free((*attr)->bind);
		free(*attr);
		*attr = NULL;
	}
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_role(struct rdmamsg_group_attr *attr,
					       unsigned int role)
{
	if (!attr || !role ||
	    (role & ~(RDMAMSG_GROUP_PUBLISHER | RDMAMSG_GROUP_SUBSCRIBER)))
		return -EINVAL;
	attr->role = role;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_max_msg_size(
	struct rdmamsg_group_attr *attr, size_t size)
{
	if (!attr || !size || size > RDMAMSG_MC_MAX_MSG)
		return -EINVAL;
	attr->max_msg = size;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_bind_addr(
	struct rdmamsg_group_attr *attr, const char *addr)
{
	char *s = NULL;

	if (!attr)
		return -EINVAL;
	if (addr) {
		s = strdup(addr);
		if (!s)
			return -ENOMEM;
	}
	free(attr->bind);
	attr->bind = s;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_recv_depth(
	struct rdmamsg_group_attr *attr, uint32_t depth)
{
	if (!attr || depth < G_MIN_DEPTH || depth > G_MAX_DEPTH)
		return -EINVAL;
	attr->rdepth = depth;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_send_depth(
	struct rdmamsg_group_attr *attr, uint32_t depth)
{
	if (!attr || depth < G_MIN_DEPTH || depth > G_MAX_DEPTH)
		return -EINVAL;
	attr->sdepth = depth;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_reliable(
	struct rdmamsg_group_attr *attr, uint32_t window)
{
	if (!attr || window > G_MAX_WINDOW)
		return -EINVAL;
	attr->window = window;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_flow_control(
	struct rdmamsg_group_attr *attr, enum rdmamsg_group_flow flow,
	uint32_t tag)
{
	if (!attr)
		return -EINVAL;
	switch (flow) {
	case RDMAMSG_GROUP_FLOW_MIN:
	case RDMAMSG_GROUP_FLOW_MAX:
		if (tag)
			return -EINVAL;
		break;
	case RDMAMSG_GROUP_FLOW_TAGGED:
		if (!tag)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	attr->flow = flow;
	attr->fc_tag = tag;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_tag(struct rdmamsg_group_attr *attr,
					      uint32_t tag)
{
	if (!attr)
		return -EINVAL;
	attr->tag = tag;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_min_receivers(
	struct rdmamsg_group_attr *attr, uint32_t n)
{
	if (!attr || n > G_MAX_RECEIVERS)
		return -EINVAL;
	attr->min_rcv = n;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_batch(struct rdmamsg_group_attr *attr,
						int on)
{
	if (!attr || (on != 0 && on != 1))
		return -EINVAL;
	attr->batch = on;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_heartbeat(
	struct rdmamsg_group_attr *attr, unsigned int ms)
{
	if (!attr || !ms || ms > 60000)
		return -EINVAL;
	attr->hb_ms = ms;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_attr_set_poll_us(
	struct rdmamsg_group_attr *attr, unsigned int us)
{
	if (!attr || us > G_MAX_POLL_US)
		return -EINVAL;
	attr->poll_us = us;
	return 0;
}

/* ---- addresses ----------------------------------------------------- */

/* parse_ip -- a numeric IPv4 or IPv6 address ("[v6]" too), port 0 */
static int parse_ip(const char *s, struct sockaddr_storage *ss)
{
	char host[INET6_ADDRSTRLEN + 1];
	size_t n;

	if (!s)
		return -EINVAL;
	n = strlen(s);
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		s++;
		n -= 2;
	}
	if (!n || n >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *)ss)->sin_addr) ==
	    1) {
		ss->ss_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, host,
		      &((struct sockaddr_in6 *)ss)->sin6_addr) == 1) {
		ss->ss_family = AF_INET6;
		return 0;
	}
	return -EINVAL;
}

/* is_mcast -- a multicast address? */
static int is_mcast(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return IN_MULTICAST(ntohl(
			((const struct sockaddr_in *)ss)->sin_addr.s_addr));
	return IN6_IS_ADDR_MULTICAST(
		&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* ---- teardown ------------------------------------------------------ */

static void step_fn(struct rdmamsg__timer *t);
static void sm_fn(struct rdmamsg__timer *t);
static int heartbeat(struct rdmamsg_group *g, uint16_t flags, uint64_t seq);
static uint32_t room(const struct rdmamsg_group *g);
static int flush(struct rdmamsg_group *g);
static void tx_flush(struct rdmamsg_group *g);
static int rcv_behind(struct rdmamsg_group *g);
static void hb_fn(struct rdmamsg__timer *t);
static void close_fn(struct rdmamsg__timer *t);
static void pub_free(struct rdmamsg_group *g, struct gpub *p);

/* kick -- run the group's step from the next timer pass */
static void kick(struct rdmamsg_group *g)
{
	if (!g->step_timer.active)
		rdmamsg__timer_start(g->ctx, &g->step_timer, 0);
}

/* complete_tx -- sends tail .. upto - 1 are done with status: their
 * buffers go back, the messages in them complete */
static void complete_tx(struct rdmamsg_group *g, uint64_t upto, int status)
{
	while (g->sq_tail < upto) {
		struct gtx *t = &g->tx[g->sq_tail & g->sq_mask];

		g->sq_tail++;
		if (t->buf)
			rdmamsg__buf_put(t->buf);
		t->buf = NULL;
	}
	/* on_publish may publish: the ring is read again each time */
	while (g->rec_tail < g->rec_post &&
	       g->recs[g->rec_tail & g->rec_mask].dg < upto) {
		void *op_ctx = g->recs[g->rec_tail & g->rec_mask].op_ctx;

		g->rec_tail++;
		if (g->cbs.on_publish)
			g->cbs.on_publish(g, op_ctx, status, g->arg);
	}
}

/* cancel_recs -- the group goes: every message not completed yet (the
 * batch's too) completes with -ECANCELED */
static void cancel_recs(struct rdmamsg_group *g)
{
	if (g->pk)
		rdmamsg__buf_put(g->pk);
	g->pk = NULL;
	g->pk_n = 0;
	g->rec_post = g->rec_head;
	while (g->rec_tail < g->rec_head) {
		void *op_ctx = g->recs[g->rec_tail & g->rec_mask].op_ctx;

		g->rec_tail++;
		if (g->cbs.on_publish)
			g->cbs.on_publish(g, op_ctx, -ECANCELED, g->arg);
	}
}

/* group_free -- everything goes; close_cb last */
static void group_free(struct rdmamsg_group *g)
{
	struct rdmamsg_ctx *ctx = g->ctx;
	void (*cb)(struct rdmamsg_group *, void *) = g->close_cb;
	void *arg = g->arg;
	uint32_t i;

	rdmamsg__timer_stop(ctx, &g->hb_timer);
	rdmamsg__timer_stop(ctx, &g->step_timer);
	rdmamsg__timer_stop(ctx, &g->close_timer);
	rdmamsg__timer_stop(ctx, &g->sm_timer);
	/* as rdma_leave_multicast detaches a QP of the id's own */
	if (g->attached)
		ctx->ops->detach_mcast(g->qp, &g->mgid, g->mlid);
	g->attached = 0;
	if (g->id && g->joined)
		ctx->ops->leave_multicast(g->id, (struct sockaddr *)&g->maddr);
	if (g->qp)
		ctx->ops->destroy_qp(g->qp);
	g->qp = NULL;
	/* the QP is gone: nothing touches the buffers any more */
	complete_tx(g, g->sq_head, -ECANCELED);
	cancel_recs(g);
	if (g->ah)
		ctx->ops->destroy_ah(g->ah);
	if (g->id)
		ctx->ops->destroy_id(g->id);
	rdmamsg__iface_detach(&g->lane);
	/* a drain outside a progress pass (a timer's) may have queued our
	 * ready() for the next one */
	if (!list_empty(&g->lane.ready_link))
		list_del(&g->lane.ready_link);
	for (i = 0; i < g->nrxc; i++)
		rdmamsg__buf_put(g->rxc[i]);
	for (i = 0; i < g->npub; i++)
		pub_free(g, &g->pubs[i]);
	free(g->pubs);
	for (i = 0; g->keep && i < g->window; i++)
		free(g->keep[i].data);
	free(g->keep);
	for (i = 0; i < g->nrcv; i++)
		if (g->rcv[i].ah)
			ctx->ops->destroy_ah(g->rcv[i].ah);
	free(g->rcv);
	/* the close callback may still query the group */
	g->rcv = NULL;
	g->nrcv = 0;
	if (g->hold)
		rdmamsg__buf_put(g->hold);
	free(g->rxc);
	free(g->rxa);
	free(g->rxk);
	free(g->rpend);
	free(g->tx);
	free(g->recs);
	rdmamsg__loop_unref(ctx);
	if (cb)
		cb(g, arg);
	free(g);
}

/* fin_gap_ms -- a leaving publisher's last heartbeats go this far apart */
static unsigned int fin_gap_ms(const struct rdmamsg_group *g)
{
	return g->hb_ms < G_FIN_GAP_MS ? g->hb_ms : G_FIN_GAP_MS;
}

/* fin_wait -- a leaving publisher sends its last heartbeat G_FINS times,
 * fin_gap_ms apart: one lost (the wire, or a subscriber's receive queue
 * still full of the burst before it, whose tail it missed too) would
 * leave that subscriber unaware of the tail, neither received nor
 * reported lost (rdmamsg_group_join(3)).  1 while the next is not due
 * yet (the step timer runs again when it is) */
static int fin_wait(struct rdmamsg_group *g)
{
	uint64_t gap = (uint64_t)fin_gap_ms(g) * 1000000ull;

	if (!g->fins || g->fins >= G_FINS ||
	    rdmamsg__now_ns() - g->fin_ns >= gap)
		return 0;
	rdmamsg__timer_start_at(g->ctx, &g->step_timer, g->fin_ns + gap);
	return 1;
}

/* step_fn -- deferred work: the close, once the sends are done */
static void step_fn(struct rdmamsg__timer *t)
{
	struct rdmamsg_group *g =
		container_of(t, struct rdmamsg_group, step_timer);

	if (g->pk_n)
		flush(g); /* without room: a completion flushes it */
	tx_flush(g);
	if (!g->closing)
		return;
	if (g->state == G_UP && g->qp && !g->close_timed_out) {
		if ((g->role & RDMAMSG_GROUP_PUBLISHER) && g->fins < G_FINS) {
			/* reliable: linger while subscribers miss messages */
			if (!g->fins && g->window &&
			    (g->repairing || rcv_behind(g))) {
				rdmamsg__timer_start(g->ctx, &g->step_timer, 1);
				return;
			}
			if (fin_wait(g))
				return;
			/* the last heartbeat: our final sequence number */
			if (heartbeat(g, MCF_FIN, g->next_seq) == -EAGAIN &&
			    !room(g))
				return; /* a completion kicks again */
			g->fins++;
			g->fin_ns = rdmamsg__now_ns();
			if (fin_wait(g))
				return;
		}
		if (g->sq_head != g->sq_tail)
			return; /* the last completion kicks again */
	}
	group_free(g);
}

/* close_fn -- sends did not complete in time: cancel them */
static void close_fn(struct rdmamsg__timer *t)
{
	struct rdmamsg_group *g =
		container_of(t, struct rdmamsg_group, close_timer);

	g->close_timed_out = 1;
	kick(g);
}

/* fail -- the join failed: on_join(status) once */
static void fail(struct rdmamsg_group *g, int status)
{
	if (g->state == G_FAILED)
		return;
	g->state = G_FAILED;
	g->status = status;
	LOG_WARN("multicast group: join failed: %d", status);
	if (!g->closing && g->cbs.on_join)
		g->cbs.on_join(g, status, g->arg);
	if (g->closing)
		kick(g);
}

/* ---- sending ------------------------------------------------------- */

/* tx_post -- post the sends queued (sq_post .. sq_head - 1) in chains of
 * up to G_CHAIN, each chain's last signalled: a signalled completion
 * completes the unsignalled ones before it, as on an HCA's send queue.
 * 0, or ibv_post_send's negative errno (what it refused stays queued) */
static int tx_post(struct rdmamsg_group *g)
{
	struct ibv_send_wr *bad = NULL, *w;
	uint32_t i, k;
	int ret;

	while (g->sq_post < g->sq_head) {
		k = g->sq_head - g->sq_post > G_CHAIN
			    ? G_CHAIN
			    : (uint32_t)(g->sq_head - g->sq_post);
		for (i = 0; i + 1 < k; i++) {
			w = &g->tx[(g->sq_post + i) & g->sq_mask].wr;
			w->next = &g->tx[(g->sq_post + i + 1) & g->sq_mask].wr;
			w->send_flags = 0;
		}
		w = &g->tx[(g->sq_post + k - 1) & g->sq_mask].wr;
		w->next = NULL;
		w->send_flags = IBV_SEND_SIGNALED;
		w = &g->tx[g->sq_post & g->sq_mask].wr;
		ret = ibv_post_send(g->qp, w, &bad);
		if (ret) {
			/* the ones before bad were posted (ibv_post_send(3)),
			 * unsignalled: the retry's signalled send covers them */
			for (i = 0; bad && w && w != bad; i++)
				w = w->next;
			g->sq_post += i;
			return -ret;
		}
		g->sq_post += k;
	}
	return 0;
}

/* tx_flush -- post what is queued, from the pass's end or a completion;
 * what the send queue refuses with nothing of ours in flight to retry
 * after completes with the error (a loss the subscribers see) */
static void tx_flush(struct rdmamsg_group *g)
{
	int ret;

	if (g->sq_post == g->sq_head || !g->qp)
		return;
	ret = tx_post(g);
	if (!ret)
		return;
	LOG_ERR("multicast: ibv_post_send failed: %d", ret);
	if (g->sq_post != g->sq_tail)
		return; /* retried on its completion */
	g->st.datagrams_sent -= g->sq_head - g->sq_post;
	g->sq_post = g->sq_head;
	complete_tx(g, g->sq_head, ret);
}

/* post_to -- n datagrams (bufs, their len) to ah/qpn (imm: the one
 * datagram's immediate data, or NULL) queued, the send queue's room
 * checked by the caller; posted now when nothing of ours is in flight
 * (a paced publisher's message goes at once, signalled) or without
 * batching (each message posted at once), else with the ones queued
 * after it within the pass (the pass's end, a completion or a full
 * chain posts them): one signalled send, and one completion to handle,
 * a chain, as perftest's selective signalling */
static void post_to(struct rdmamsg_group *g, struct ibv_ah *ah, uint32_t qpn,
		    struct rdmamsg_buf **bufs, uint32_t n, const uint32_t *imm)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		uint64_t s = g->sq_head + i;
		struct gtx *t = &g->tx[s & g->sq_mask];

		t->buf = bufs[i];
		t->sge.addr = (uintptr_t)bufs[i]->data;
		t->sge.length = (uint32_t)bufs[i]->len;
		t->sge.lkey = bufs[i]->lkey;
		t->wr.wr_id = RDMAMSG__WRID_SEND | g->lane.wrid_tag |
			      (s & RDMAMSG__WRID_OWN_MASK);
		t->wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
		t->wr.imm_data = imm ? *imm : 0;
		t->wr.wr.ud.ah = ah;
		t->wr.wr.ud.remote_qpn = qpn;
		t->wr.wr.ud.remote_qkey = g->rqkey;
	}
	g->sq_head += n;
	g->st.datagrams_sent += n;
	if (!g->batch || g->sq_post == g->sq_tail ||
	    g->sq_head - g->sq_post >= G_CHAIN) {
		if (tx_post(g)) {
			LOG_WARN("multicast: ibv_post_send failed, retried");
			kick(g);
		}
	} else {
		kick(g); /* at the latest, the pass's end posts it */
	}
}

/* room -- datagrams the send queue takes now */
static uint32_t room(const struct rdmamsg_group *g)
{
	return g->sdepth - (uint32_t)(g->sq_head - g->sq_tail);
}

/* add_rec -- a message published: posted (its last datagram the one
 * posted last), or in the batch (posted 0) */
static void add_rec(struct rdmamsg_group *g, void *op_ctx, int posted)
{
	struct grec *r = &g->recs[g->rec_head & g->rec_mask];

	r->op_ctx = op_ctx;
	r->dg = g->sq_head - 1;
	g->rec_head++;
	if (posted)
		g->rec_post = g->rec_head;
}

/* flush -- the batch goes (as BATCH, lib/proto.h): 0, or -EAGAIN (no
 * room: a completion flushes it) or the post's error (it stays) */
static int flush(struct rdmamsg_group *g)
{
	struct rdmamsg__mc_wire h;
	uint64_t r;

	if (!g->pk_n)
		return 0;
	if (g->state != G_UP || !room(g))
		return -EAGAIN;
	memset(&h, 0, sizeof(h));
	h.type = MC_BATCH;
	h.pub = g->pub_id;
	h.seq = g->pk_seq;
	h.total = g->pk_n;
	rdmamsg__mc_encode(&h, g->pk->data);
	post_to(g, g->ah, g->rqpn, &g->pk, 1, NULL);
	for (r = g->rec_post; r < g->rec_head; r++)
		g->recs[r & g->rec_mask].dg = g->sq_head - 1;
	g->rec_post = g->rec_head;
	g->pk = NULL;
	g->pk_n = 0;
	return 0;
}

/* pack -- message len bytes at data (len + RDMAMSG_MC_REC fits in a
 * datagram) into the batch as g->next_seq, the batch sent first when
 * it is full: 0, or -EAGAIN (nothing taken) */
static int pack(struct rdmamsg_group *g, const void *data, size_t len,
		void *op_ctx)
{
	uint32_t v = htole32((uint32_t)len);

	if (g->pk_n &&
	    (g->pk->len + RDMAMSG_MC_REC + len >
		     RDMAMSG_MC_HDR + (size_t)g->frag ||
	     g->pk_n == G_PACK_MAX) &&
	    flush(g))
		return -EAGAIN;
	if (!g->pk_n) {
		if (!g->pk && rdmamsg__buf_get(g->ctx, RDMAMSG_MC_HDR + g->frag,
					       BUF_LIB, &g->pk))
			return -EAGAIN;
		g->pk->len = RDMAMSG_MC_HDR;
		g->pk_seq = g->next_seq;
		kick(g); /* it goes at the latest from the next pass */
	}
	memcpy(g->pk->data + g->pk->len, &v, RDMAMSG_MC_REC);
	if (len)
		memcpy(g->pk->data + g->pk->len + RDMAMSG_MC_REC, data, len);
	g->pk->len += RDMAMSG_MC_REC + len;
	g->pk_n++;
	add_rec(g, op_ctx, 0);
	return 0;
}

/* control -- one datagram of header and plen bytes of payload pl to
 * ah/qpn (a status message's total: our tag; a selective NAK's: its bits,
 * nbits): 0, or a negative errno */
static int control_n(struct rdmamsg_group *g, struct ibv_ah *ah, uint32_t qpn,
		     int type, uint16_t flags, uint64_t seq, uint32_t nbits,
		     const void *pl, uint32_t plen)
{
	struct rdmamsg__mc_wire h;
	struct rdmamsg_buf *b;
	int ret;

	if (g->state != G_UP || !room(g))
		return -EAGAIN;
	ret = rdmamsg__buf_get(g->ctx, RDMAMSG_MC_HDR + plen, BUF_LIB, &b);
	if (ret)
		return ret;
	memset(&h, 0, sizeof(h));
	h.type = (uint8_t)type;
	h.flags = flags;
	h.pub = g->pub_id;
	h.seq = seq;
	if (type == MC_STATUS)
		h.total = g->tag;
	else if (type == MC_NAK && (flags & MCF_SEL))
		h.total = nbits;
	rdmamsg__mc_encode(&h, b->data);
	if (plen)
		memcpy(b->data + RDMAMSG_MC_HDR, pl, plen);
	b->len = RDMAMSG_MC_HDR + plen;
	post_to(g, ah, qpn, &b, 1, NULL);
	return 0;
}

static int control(struct rdmamsg_group *g, struct ibv_ah *ah, uint32_t qpn,
		   int type, uint16_t flags, uint64_t seq, const void *pl,
		   uint32_t plen)
{
	return control_n(g, ah, qpn, type, flags, seq, 0, pl, plen);
}

/* heartbeat -- tell the subscribers our next sequence number (with
 * MCF_LOW: the oldest we can repair, seq) */
static int heartbeat(struct rdmamsg_group *g, uint16_t flags, uint64_t seq)
{
	uint8_t addr[RDMAMSG_MC_ADDR];
	uint32_t qpn;
	int ret;

	/* it names our next sequence number: the batch goes before */
	if (g->pk_n && flush(g))
		return -EAGAIN;
	if (g->window && g->have_gid && !flags) {
		/* where NAKs and status messages go */
		memcpy(addr, g->gid.raw, 16);
		qpn = htole32(g->qp->qp_num);
		memcpy(addr + 16, &qpn, 4);
		ret = control(g, g->ah, g->rqpn, MC_HEARTBEAT, MCF_ADDR, seq,
			      addr, sizeof(addr));
	} else {
		ret = control(g, g->ah, g->rqpn, MC_HEARTBEAT, flags, seq, NULL,
			      0);
	}
	if (!ret)
		g->st.heartbeats_sent++;
	return ret;
}

/* hb_fn -- the heartbeat period: one while idle */
static void hb_fn(struct rdmamsg__timer *t)
{
	struct rdmamsg_group *g =
		container_of(t, struct rdmamsg_group, hb_timer);

	/* a closing reliable publisher lingers for its subscribers: they
	 * learn of a tail they missed from its heartbeats, until its FIN */
	if (g->state != G_UP || (g->closing && (!g->window || g->fins)))
		return;
	/* reliable: always (the address); else while idle, or after bare
	 * datagrams (a subscriber knows their sender by a headed one) */
	if (!g->sent_since_hb || g->window || g->bare_since_hb)
		heartbeat(g, 0, g->next_seq);
	/* reliable: the subscribers silent too long go now, not at the
	 * next publish (an idle publisher's stay counted otherwise) */
	if (g->window && g->nrcv)
		rcv_behind(g);
	g->sent_since_hb = 0;
	g->bare_since_hb = 0;
	rdmamsg__timer_start(g->ctx, &g->hb_timer, g->hb_ms);
}

/* bare -- a message of len bytes goes bare (lib/proto.h): too long for
 * a datagram with our header, not for one without */
static int bare(const struct rdmamsg_group *g, size_t len)
{
	return g->batch && len > g->frag && len <= g->mtu;
}

/* dgrams -- the datagrams a message of len bytes takes */
static uint32_t dgrams(const struct rdmamsg_group *g, size_t len)
{
	if (!len || bare(g, len))
		return 1;
	return (uint32_t)((len - 1) / g->frag + 1);
}

/* send_msg -- message seq (len bytes at data) as its fragments, or bare:
 * 0, or -EAGAIN (no room in the send queue or the pool: nothing sent) */
static int send_msg(struct rdmamsg_group *g, struct ibv_ah *ah, uint32_t qpn,
		    uint64_t seq, const void *data, size_t len, void *op_ctx,
		    int report)
{
	struct rdmamsg_buf *bufs[64], **bv = bufs;
	struct rdmamsg__mc_wire h;
	uint32_t n, i, hl = RDMAMSG_MC_HDR, fr = g->frag, imm = 0;
	int ret = 0, b = bare(g, len);

	if (b) {
		hl = 0;
		fr = (uint32_t)len;
		imm = htobe32((uint32_t)seq);
	}
	n = dgrams(g, len);
	if (n > room(g))
		return -EAGAIN;
	if (n > 64) {
		bv = malloc(n * sizeof(*bv));
		if (!bv)
			return -ENOMEM;
	}
	memset(&h, 0, sizeof(h));
	h.type = MC_DATA;
	h.pub = g->pub_id;
	h.seq = seq;
	h.total = (uint32_t)len;
	for (i = 0; i < n; i++) {
		size_t off = (size_t)i * fr;
		size_t part = len - off > fr ? fr : len - off;

		ret = rdmamsg__buf_get(g->ctx, hl + part, BUF_LIB, &bv[i]);
		if (ret) {
			while (i--)
				rdmamsg__buf_put(bv[i]);
			ret = -EAGAIN;
			goto out;
		}
		h.off = (uint32_t)off;
		if (hl)
			rdmamsg__mc_encode(&h, bv[i]->data);
		if (part)
			memcpy(bv[i]->data + hl, (const char *)data + off,
			       part);
		bv[i]->len = hl + part;
	}
	post_to(g, ah, qpn, bv, n, b ? &imm : NULL);
	if (report)
		add_rec(g, op_ctx, 1);
	if (b)
		g->bare_since_hb = 1;
out:
	if (bv != bufs)
		free(bv);
	return ret;
}

/* ---- reliable mode: the publisher's side ----------------------------- */

/* low_seq -- the oldest message a reliable publisher still keeps */
static uint64_t low_seq(const struct rdmamsg_group *g)
{
	return g->next_seq > g->window ? g->next_seq - g->window : 0;
}

/* rcv_expire_ns -- a subscriber silent this long is not waited for, a
 * publisher silent this long is gone */
static uint64_t rcv_expire_ns(const struct rdmamsg_group *g)
{
	uint64_t ms = (uint64_t)g->hb_ms * 10;

	return (ms > G_RCV_EXPIRE_MS ? ms : G_RCV_EXPIRE_MS) * 1000000ull;
}

/* rcv_expired -- subscriber r has been silent too long at now: no longer
 * waited for (nor counted as a receiver) */
static int rcv_expired(const struct rdmamsg_group *g, const struct grcv *r,
		       uint64_t now)
{
	return now > r->last_ns && now - r->last_ns > rcv_expire_ns(g);
}

/* rcv_limit -- the position of the subscriber the flow-control strategy
 * waits for, among those still heard from (the ones silent too long are
 * forgotten): min the slowest, max the fastest, tagged the slowest with
 * our fc_tag.  How many it chose among (then *lim), 0 if none */
static uint32_t rcv_limit(struct rdmamsg_group *g, uint64_t now, uint64_t *lim)
{
	uint32_t i = 0, n = 0;

	while (i < g->nrcv) {
		struct grcv *r = &g->rcv[i];

		i++;
		if (r->silent)
			continue;
		if (rcv_expired(g, r, now)) {
			/* kept (its address may be in use) until its slot
			 * is needed */
			LOG_INFO("multicast: subscriber %016llx silent, no "
				 "longer waited for",
				 (unsigned long long)r->id);
			r->silent = 1;
			continue;
		}
		if (g->flow == RDMAMSG_GROUP_FLOW_TAGGED && r->tag != g->fc_tag)
			continue;
		if (!n || (g->flow == RDMAMSG_GROUP_FLOW_MAX ? r->pos > *lim
							     : r->pos < *lim))
			*lim = r->pos;
		n++;
	}
	return n;
}

/* rcv_behind -- the subscriber waited for misses messages */
static int rcv_behind(struct rdmamsg_group *g)
{
	uint64_t lim;

	return rcv_limit(g, rdmamsg__now_ns(), &lim) && lim < g->next_seq;
}

/* repair_done -- no repair under way: nothing wanted */
static void repair_done(struct rdmamsg_group *g)
{
	g->repairing = 0;
	g->rep_next = UINT64_MAX;
	g->rep_end = 0;
}

/* pump -- send the kept messages wanted, lowest first, as far as the
 * send queue allows (the next completion goes on): a repair takes half
 * of the queue at most unless the queue is empty, so that new messages
 * interleave with it (the window, not the repair, stops a publisher) */
static void pump(struct rdmamsg_group *g)
{
	while (g->repairing && g->rep_next < g->rep_end) {
		struct gkeep *k;
		uint32_t n;

		if (g->rep_next < low_seq(g))
			g->rep_next = low_seq(g); /* gone meanwhile */
		if (g->rep_next >= g->rep_end)
			break;
		k = &g->keep[g->rep_next % g->window];
		if (k->seq != g->rep_next || !k->want) {
			g->rep_next++; /* not asked for (or never kept) */
			continue;
		}
		n = dgrams(g, k->len);
		if (g->sq_head != g->sq_tail && room(g) < n + g->sdepth / 2)
			return; /* the other half is the publisher's */
		if (send_msg(g, g->rep_ah, g->rep_qpn, k->seq, k->data, k->len,
			     NULL, 0))
			return;
		k->want = 0;
		k->rep_ns = g->ctx->now;
		k->rep_to = g->rep_to;
		g->st.repairs++;
		if (g->rep_to)
			g->st.repairs_unicast++;
		else
			g->st.repairs_multicast++;
		g->rep_next++;
	}
	repair_done(g);
}

/* want -- subscriber id asks for kept message seq again: marked for the
 * repair, unless it went out a moment ago by multicast or to id (then it
 * is on its way); 1 if marked */
static int want(struct rdmamsg_group *g, uint64_t seq, uint64_t id,
		uint64_t now)
{
	struct gkeep *k = &g->keep[seq % g->window];

	if (k->seq != seq)
		return 0; /* never kept (no memory) */
	if (k->rep_ns && now - k->rep_ns < G_REPAIR_HOLD_NS &&
	    (!k->rep_to || k->rep_to == id))
		return 0;
	k->want = 1;
	if (seq < g->rep_next)
		g->rep_next = seq;
	if (seq + 1 > g->rep_end)
		g->rep_end = seq + 1;
	return 1;
}

/* find_rcv -- the subscriber id a reliable publisher heard from, or NULL */
static struct grcv *find_rcv(struct rdmamsg_group *g, uint64_t id)
{
	uint32_t i;

	for (i = 0; i < g->nrcv; i++)
		if (g->rcv[i].id == id)
			return &g->rcv[i];
	return NULL;
}

/* rcv_ah -- the way to subscriber r at addr (its NAK's MCF_ADDR payload,
 * untrusted): its address handle, or NULL (multicast then) */
static struct ibv_ah *rcv_ah(struct rdmamsg_group *g, struct grcv *r,
			     const uint8_t *addr)
{
	struct ibv_ah_attr a;
	uint32_t qpn;

	if (!addr)
		return NULL;
	if (r->ah)
		/* an address that changed: the old one may be in flight */
		return memcmp(r->addr, addr, RDMAMSG_MC_ADDR) ? NULL : r->ah;
	memcpy(&qpn, addr + 16, 4);
	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	memcpy(a.grh.dgid.raw, addr, 16);
	a.grh.sgid_index = g->sgid_index;
	a.grh.hop_limit = 64;
	a.port_num = g->port;
	r->ah = g->ctx->ops->create_ah(g->ctx->pd, &a);
	if (!r->ah)
		return NULL;
	memcpy(r->addr, addr, RDMAMSG_MC_ADDR);
	r->qpn = le32toh(qpn) & 0xffffff;
	return r->ah;
}

/* on_nak -- subscriber id (at addr, or NULL) misses our messages: those
 * of bitmap bm (nbits of them, bit i for message seq + i; checked by
 * rdmamsg__mc_decode) or, without one, all from seq on */
static void on_nak(struct rdmamsg_group *g, uint64_t id, uint64_t seq,
		   const uint8_t *addr, const uint8_t *bm, uint32_t nbits)
{
	uint64_t now = g->ctx->now, s, end, low;
	struct grcv *r;
	struct ibv_ah *ah;
	int any = 0;

	g->st.naks_received++;
	if (!g->window || seq >= g->next_seq)
		return;
	if (bm && nbits > g->next_seq - seq) {
		/* messages we never sent: not a NAK of ours */
		g->st.malformed++;
		return;
	}
	low = low_seq(g);
	if (seq < low)
		/* gone: it reports them lost */
		heartbeat(g, MCF_LOW, low);
	end = bm ? seq + nbits : g->next_seq;
	for (s = seq < low ? low : seq; s < end; s++)
		if (!bm || rdmamsg__mc_nak_bit(bm, (uint32_t)(s - seq)))
			any |= want(g, s, id, now);
	if (!any)
		return; /* all on their way already: suppressed */
	if (g->repairing) {
		/* a second subscriber misses messages while a unicast
		 * repair is under way: multicast from now on, one repair
		 * then serving both */
		if (g->rep_to && g->rep_to != id) {
			g->rep_to = 0;
			g->rep_ah = g->ah;
			g->rep_qpn = g->rqpn;
			g->rep_ns = now;
		}
		pump(g);
		return;
	}
	r = find_rcv(g, id);
	ah = r && !r->silent ? rcv_ah(g, r, addr) : NULL;
	if (g->rep_to != id && now - g->rep_ns < G_REPAIR_HOLD_NS)
		ah = NULL; /* another one asked a moment ago: multicast */
	g->repairing = 1;
	g->rep_ns = now;
	g->rep_to = ah ? id : 0;
	g->rep_ah = ah ? ah : g->ah;
	g->rep_qpn = ah ? r->qpn : g->rqpn;
	pump(g);
}

/* on_status -- subscriber id (tagged tag) has everything before pos */
static void on_status(struct rdmamsg_group *g, uint64_t id, uint64_t pos,
		      uint32_t tag)
{
	struct grcv *r = NULL, *v;
	uint32_t i;

	if (!g->window)
		return;
	r = find_rcv(g, id);
	if (r && r->left)
		return; /* sent before its LEAVE, come after it */
	if (r && r->silent) {
		r->silent = 0; /* back: waited for from where it is */
		r->pos = pos;
	}
	for (i = 0; !r && i < g->nrcv; i++) {
		/* a silent one's slot, once nothing is in flight (its
		 * address handle may be) */
		if (!g->rcv[i].silent || g->sq_head != g->sq_tail ||
		    (g->repairing && g->rep_to == g->rcv[i].id))
			continue;
		r = &g->rcv[i];
		if (r->ah)
			g->ctx->ops->destroy_ah(r->ah);
		memset(r, 0, sizeof(*r));
		r->id = id;
		r->pos = pos;
	}
	if (!r) {
		if (g->nrcv >= G_MAX_RECEIVERS)
			return;
		v = realloc(g->rcv, (g->nrcv + 1) * sizeof(*v));
		if (!v)
			return;
		g->rcv = v;
		r = &v[g->nrcv++];
		memset(r, 0, sizeof(*r));
		r->id = id;
		r->pos = pos;
	}
	r->tag = tag;
	if (pos > r->pos)
		r->pos = pos;
	if (r->pos > g->next_seq)
		r->pos = g->next_seq; /* a position we never reached: lies */
	r->last_ns = g->ctx->now;
}

/* on_leave -- subscriber id closes (its LEAVE): no longer waited for (nor
 * counted), at once rather than once its silence ages it out; its slot
 * stays, as a silent one's, until one is needed (its address handle may
 * be in flight) */
static void on_leave(struct rdmamsg_group *g, uint64_t id)
{
	struct grcv *r;

	if (!g->window)
		return;
	r = find_rcv(g, id);
	if (!r || r->left)
		return;
	LOG_INFO("multicast: subscriber %016llx left", (unsigned long long)id);
	r->silent = 1;
	r->left = 1;
}

/* keep_msg -- a reliable publisher keeps message seq for repair */
static int keep_msg(struct rdmamsg_group *g, uint64_t seq, const void *data,
		    size_t len)
{
	struct gkeep *k = &g->keep[seq % g->window];

	if (k->cap < len) {
		char *d = realloc(k->data, len);

		if (!d)
			return -ENOMEM;
		k->data = d;
		k->cap = len;
	}
	if (len)
		memcpy(k->data, data, len);
	k->len = len;
	k->seq = seq;
	k->want = 0;
	k->rep_ns = 0;
	k->rep_to = 0;
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_publish(struct rdmamsg_group *g,
					 const void *data, size_t len,
					 void *op_ctx)
{
	uint64_t lim;
	uint32_t n;
	int ret;

	if (!g || (!data && len))
		return -EINVAL;
	if (!(g->role & RDMAMSG_GROUP_PUBLISHER))
		return -EPERM;
	if (len > g->max_msg)
		return -EMSGSIZE;
	if (g->closing)
		return -EPIPE;
	if (g->state != G_UP)
		return -ENOTCONN;
	if (g->window) {
		/* flow control: not before min_rcv subscribers are heard,
		 * then the one the strategy names; a repair under way goes
		 * first, new messages take the room it leaves (half of the
		 * send queue at least) */
		n = rcv_limit(g, g->ctx->now, &lim);
		if (n < g->min_rcv || (n && g->next_seq - lim >= g->window)) {
			g->st.flow_control_stalls++;
			return -EAGAIN;
		}
		if (g->repairing)
			pump(g);
	}
	if (g->rec_head - g->rec_tail > g->rec_mask) {
		g->st.flow_control_stalls++;
		return -EAGAIN; /* too many publishes in flight */
	}
	if (g->batch && len + RDMAMSG_MC_REC <= g->frag &&
	    (g->pk_n || g->sq_head != g->sq_tail))
		/* others in flight: packed, to go with the next ones */
		ret = pack(g, data, len, op_ctx);
	else if (g->pk_n && flush(g))
		ret = -EAGAIN; /* the batch goes first, in order */
	else
		ret = send_msg(g, g->ah, g->rqpn, g->next_seq, data, len,
			       op_ctx, 1);
	if (ret) {
		if (ret == -EAGAIN)
			g->st.flow_control_stalls++;
		return ret;
	}
	if (g->window && keep_msg(g, g->next_seq, data, len))
		LOG_WARN("multicast: no memory to keep message %llu for "
			 "repair",
			 (unsigned long long)g->next_seq);
	if (g->repairing)
		g->st.published_in_repair++;
	g->next_seq++;
	g->sent_since_hb = 1;
	g->st.msgs_published++;
	g->st.bytes_published += len;
	return 0;
}

/* ---- receiving ----------------------------------------------------- */

/* post_recvs -- the receive buffers taken since the last call posted
 * (again), in chains: one provider call per G_REPOST buffers rather than
 * one per datagram.  0, or the provider's error (the rest stay ours) */
static int post_recvs(struct rdmamsg_group *g)
{
	struct ibv_recv_wr wr[G_REPOST], *bad;
	struct ibv_sge sge[G_REPOST];
	uint32_t i, k, done = 0;
	int ret = 0;

	if (!g->qp) {
		g->nrpend = 0; /* the QP is gone: the buffers stay ours */
		return 0;
	}
	while (done < g->nrpend) {
		k = g->nrpend - done > G_REPOST ? G_REPOST : g->nrpend - done;
		for (i = 0; i < k; i++) {
			uint32_t idx = g->rpend[done + i];

			sge[i].addr = (uintptr_t)g->rxa[idx] + G_RX_PAD;
			sge[i].length = g->rx_len;
			sge[i].lkey = g->rxk[idx];
			wr[i].wr_id = g->lane.wrid_tag | idx;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
		}
		ret = ibv_post_recv(g->qp, wr, &bad);
		if (ret) {
			LOG_WARN("multicast: receives not posted: %d", ret);
			break;
		}
		done += k;
	}
	g->nrpend = 0;
	return ret;
}

/* find_pub -- the state of publisher id, or NULL */
static struct gpub *find_pub(struct rdmamsg_group *g, uint64_t id)
{
	uint32_t i;

	for (i = 0; i < g->npub; i++)
		if (g->pubs[i].id == id)
			return &g->pubs[i];
	return NULL;
}

/* status -- tell p (reliable mode) that we have everything before next */
static void status(struct rdmamsg_group *g, struct gpub *p)
{
	uint64_t to = htole64(p->id);

	if (g->closing)
		return; /* we said LEAVE (goodbye): nothing more */
	if (p->ah && !control(g, p->ah, p->qpn, MC_STATUS, 0, p->next, &to, 8))
		p->sm_sent = p->next;
}

/* ooo_missing -- message seq of p (below hi, one past the last heard
 * of) is neither here nor arriving now */
static int ooo_missing(const struct gpub *p, uint64_t seq, uint64_t hi)
{
	const struct gooo *o = &p->ooo[seq & (p->nooo - 1)];

	if (seq == p->next && p->assembling)
		return 0; /* its fragments are arriving */
	if (o->seq != seq || o->state == OOO_EMPTY)
		return 1;
	/* a part of it: the rest is on its way if it is the last heard of */
	return o->state == OOO_PART && seq + 1 < hi;
}

/* nak -- ask p for what we miss again, at most once per back-off unless
 * force: the messages missing among those kept for reordering (MCF_SEL),
 * else (no reorder slots, or every G_NAK_PLAIN-th NAK once no repair
 * answered a selective one for G_NAK_PLAIN_MS: an older publisher) all
 * from next on */
static void nak(struct rdmamsg_group *g, struct gpub *p, int force)
{
	uint64_t now = g->ctx->now, to = htole64(p->id), first = p->next, hi;
	uint8_t pl[8 + RDMAMSG_MC_ADDR + G_OOO_MAX / 8];
	uint32_t qpn, a = 0, n = 0, i;
	uint16_t flags = 0;
	int plain;

	if (!p->ah || g->closing ||
	    (!force && now - p->nak_ns < (uint64_t)p->nak_ms * 1000000ull))
		return;
	plain = !p->nooo || (!p->sel_ok && p->sel_ns &&
			     now - p->sel_ns >= G_NAK_PLAIN_MS * 1000000ull &&
			     p->nak_n % G_NAK_PLAIN == G_NAK_PLAIN - 1);
	hi = p->seen > p->next ? p->seen : p->next + 1;
	memcpy(pl, &to, 8);
	if (!plain) {
		/* the reorder slots hold next .. next + nooo - 1 */
		if (hi - p->next > p->nooo)
			hi = p->next + p->nooo;
		while (first < hi && !ooo_missing(p, first, hi))
			first++;
		if (first == hi)
			return; /* nothing missing (any more) */
		n = (uint32_t)(hi - first);
		while (!ooo_missing(p, first + n - 1, hi))
			n--; /* (the first one is missing) */
		if (g->have_gid) {
			/* our address: the repair may come unicast */
			memcpy(pl + 8, g->gid.raw, 16);
			qpn = htole32(g->qp->qp_num);
			memcpy(pl + 24, &qpn, 4);
			a = RDMAMSG_MC_ADDR;
			flags |= MCF_ADDR;
		}
		memset(pl + 8 + a, 0, (n + 7) / 8);
		for (i = 0; i < n; i++)
			if (ooo_missing(p, first + i, hi))
				pl[8 + a + i / 8] |= (uint8_t)(1u << (i % 8));
		flags |= MCF_SEL;
	}
	if (control_n(g, p->ah, p->qpn, MC_NAK, flags, first, n, pl,
		      8 + a + (n + 7) / 8))
		return; /* no room: the next datagram or tick tries again */
	g->st.naks_sent++;
	p->nak_ns = now;
	p->nak_n++;
	p->sel_sent = !plain;
	if (!plain && !p->sel_ns)
		p->sel_ns = now;
	p->nak_hi = plain ? hi : first + n;
	if (p->nak_ms < G_NAK_MAX_MS)
		p->nak_ms *= 2;
}

/* pub_free -- what publisher p's slot holds */
static void pub_free(struct rdmamsg_group *g, struct gpub *p)
{
	uint32_t j;

	for (j = 0; j < p->nooo; j++)
		free(p->ooo[j].data);
	free(p->ooo);
	free(p->asm_buf);
	if (p->ah)
		g->ctx->ops->destroy_ah(p->ah);
}

/* pub_gone -- the slot of a publisher that is gone (silent for as long
 * as a subscriber that stops being waited for: its heartbeats would have
 * come; left or not), the one silent longest, whose address handle no
 * send in flight uses; NULL if none */
static struct gpub *pub_gone(struct rdmamsg_group *g)
{
	uint64_t now = g->ctx->now;
	struct gpub *o = NULL;
	uint32_t i;

	if (g->sq_head != g->sq_tail)
		return NULL; /* a NAK or status may use its address handle */
	for (i = 0; i < g->npub; i++) {
		struct gpub *p = &g->pubs[i];

		if (now > p->last_ns && now - p->last_ns > rcv_expire_ns(g) &&
		    (!o || p->last_ns < o->last_ns))
			o = p;
	}
	return o;
}

/* new_pub -- a publisher heard of for the first time, expecting next */
static struct gpub *new_pub(struct rdmamsg_group *g, uint64_t id, uint64_t next)
{
	struct gpub *v, *p;

	if (g->npub >= G_MAX_PUBLISHERS) {
		/* publishers come and go (each join has an id of its own):
		 * one gone makes room */
		p = pub_gone(g);
		if (!p)
			return NULL;
		LOG_INFO("multicast: publisher %016llx silent, forgotten for "
			 "%016llx",
			 (unsigned long long)p->id, (unsigned long long)id);
		pub_free(g, p);
	} else {
		v = realloc(g->pubs, (g->npub + 1) * sizeof(*v));
		if (!v)
			return NULL;
		g->pubs = v;
		p = &v[g->npub++];
	}
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->next = next;
	p->seen = next;
	p->last_ns = g->ctx->now;
	p->nak_ms = G_NAK_MS;
	g->st.publishers++;
	return p;
}

/* pub_addr -- a reliable publisher's unicast address (MCF_ADDR): the
 * way for our NAKs and status messages */
static void pub_addr(struct rdmamsg_group *g, struct gpub *p, const char *pl)
{
	struct ibv_ah_attr a;
	uint32_t qpn, n;

	if (p->ah || !g->window)
		return;
	memcpy(&qpn, pl + 16, 4);
	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	memcpy(a.grh.dgid.raw, pl, 16);
	a.grh.sgid_index = g->sgid_index;
	a.grh.hop_limit = 64;
	a.port_num = g->port;
	p->ah = g->ctx->ops->create_ah(g->ctx->pd, &a);
	if (!p->ah) {
		LOG_WARN("multicast: no way back to publisher %016llx (%d): "
			 "its losses are reported, not repaired",
			 (unsigned long long)p->id, rdmamsg__errno(EINVAL));
		p->unreliable = 1;
		return;
	}
	p->qpn = le32toh(qpn) & 0xffffff;
	/* reorder slots: what comes after a missing message is kept, so
	 * that only the missing ones are asked for again */
	n = g->window < G_OOO_MAX ? g->window : G_OOO_MAX;
	while (n & (n - 1))
		n &= n - 1;
	p->ooo = calloc(n, sizeof(*p->ooo));
	if (p->ooo)
		p->nooo = n;
	else
		LOG_WARN("multicast: no memory for reordering: go-back-N "
			 "repairs");
	status(g, p);
	if (p->gap)
		nak(g, p, 1);
}

/* lose -- messages next .. upto - 1 of p are lost: report them */
static void lose(struct rdmamsg_group *g, struct gpub *p, uint64_t upto)
{
	uint64_t first = p->next;

	p->assembling = 0;
	if (upto <= first)
		return;
	p->next = upto;
	p->gap = 0;
	p->lost_first = first;
	p->lost_end = upto;
	g->st.gaps++;
	g->st.msgs_lost += upto - first;
	if (g->cbs.on_loss && !g->closing)
		g->cbs.on_loss(g, p->id, first, upto - first, g->arg);
}

/* miss -- message next of p is missing: reliable mode asks for it again
 * (1: the datagram at hand is dropped), else it is lost up to upto (0) */
static int miss(struct rdmamsg_group *g, struct gpub *p, uint64_t upto)
{
	if (!g->window || p->unreliable) {
		lose(g, p, upto);
		return 0;
	}
	/* without its address yet: wait for its next heartbeat */
	p->assembling = 0;
	if (!p->gap) {
		p->gap = 1;
		p->nak_n = 0;
		if (p->next >= p->nak_hi) {
			/* not asked for yet: at once */
			p->nak_ms = G_NAK_MS;
			nak(g, p, 1);
			return 1;
		}
	}
	nak(g, p, 0);
	return 1;
}

/* deliver -- message seq of p, complete */
static void deliver(struct rdmamsg_group *g, struct gpub *p, const void *data,
		    size_t len)
{
	struct rdmamsg_group_msg m;

	m.publisher = p->id;
	m.seq = p->next;
	m.data = data ? data : "";
	m.len = len;
	p->next++;
	p->assembling = 0;
	p->gap = 0;
	g->st.msgs_received++;
	g->st.bytes_received += len;
	if (p->ah) {
		if (p->next - p->sm_sent >= (g->window + 3) / 4)
			status(g, p);
		else
			g->sm_due = 1; /* at the pass's end, maybe */
	}
	if (g->cbs.on_message && !g->closing)
		g->cbs.on_message(g, &m, g->arg);
}

/* ooo_ready -- message seq of p is whole in its reorder slot (or known to
 * be above our maximum size: its turn reports it) */
static int ooo_ready(const struct gpub *p, uint64_t seq)
{
	const struct gooo *o;

	if (!p->nooo)
		return 0;
	o = &p->ooo[seq & (p->nooo - 1)];
	return o->seq == seq && (o->state == OOO_FULL || o->state == OOO_LOST);
}

/* drain -- deliver what the reorder slots hold from next on, in order */
static void drain(struct rdmamsg_group *g, struct gpub *p)
{
	while (!p->assembling && ooo_ready(p, p->next)) {
		struct gooo *o = &p->ooo[p->next & (p->nooo - 1)];
		int lost = o->state == OOO_LOST;

		o->state = OOO_EMPTY;
		if (lost)
			lose(g, p, p->next + 1);
		else
			deliver(g, p, o->data, o->total);
	}
}

/* fill_gap -- after p->next moved: deliver what waited for it; if the
 * message next is still missing, ask for it (reliable mode) */
static void fill_gap(struct rdmamsg_group *g, struct gpub *p)
{
	drain(g, p);
	if (p->nooo && !p->unreliable && p->next < p->seen &&
	    ooo_missing(p, p->next, p->seen))
		miss(g, p, p->seen);
}

/* skip -- nothing before upto will be repaired: what the reorder slots
 * hold is delivered, the rest reported lost, in order.  upto comes from a
 * peer (a heartbeat, the highest sequence number heard of): only the
 * slots' span next .. next + nooo - 1 can hold a message (ooo_put), so
 * that is all that is looked at, and what lies beyond it is one loss
 * report however far upto is */
static void skip(struct rdmamsg_group *g, struct gpub *p, uint64_t upto)
{
	p->assembling = 0;
	while (p->next < upto) {
		uint64_t e = p->next, lim = upto;

		if (upto - p->next > p->nooo)
			lim = p->next + p->nooo;
		while (e < lim && !ooo_ready(p, e))
			e++;
		if (e == lim)
			e = upto; /* none held before upto */
		lose(g, p, e);
		drain(g, p);
	}
}

/* ooo_put -- one fragment (n bytes at pay) of message h->seq of p, which
 * came ahead of a missing one, into its reorder slot */
static void ooo_put(struct rdmamsg_group *g, struct gpub *p,
		    const struct rdmamsg__mc_wire *h, const char *pay,
		    uint32_t n)
{
	struct gooo *o = &p->ooo[h->seq & (p->nooo - 1)];
	int same = o->seq == h->seq && o->state != OOO_EMPTY;

	if (same && (o->state == OOO_FULL || (h->off && h->off < o->off))) {
		g->st.duplicates++;
		return;
	}
	if (!h->off) {
		/* a message's first fragment: (again) from the start */
		if (o->cap < h->total) {
			char *b = realloc(o->data, h->total);

			if (!b) {
				LOG_WARN("no memory to keep %u bytes",
					 h->total);
				o->state = OOO_EMPTY; /* asked for again */
				return;
			}
			o->data = b;
			o->cap = h->total;
		}
		if (n)
			memcpy(o->data, pay, n);
		o->seq = h->seq;
		o->total = h->total;
		o->off = n;
		o->state = n == h->total ? OOO_FULL : OOO_PART;
		return;
	}
	if (!same || h->total != o->total || h->off != o->off) {
		/* a fragment lost in the middle: the message is missing */
		if (same)
			o->state = OOO_EMPTY;
		return;
	}
	memcpy(o->data + o->off, pay, n);
	o->off += n;
	if (o->off == o->total)
		o->state = OOO_FULL;
}

/* on_data -- one fragment (pay bytes) of message h->seq of p */
static void on_data(struct rdmamsg_group *g, struct gpub *p,
		    const struct rdmamsg__mc_wire *h, const char *pay,
		    uint32_t n)
{
	if (h->seq < p->next ||
	    (p->assembling && h->seq == p->next && h->off < p->asm_off)) {
		if (h->seq >= p->lost_first && h->seq < p->lost_end)
			g->st.lost_fragments++; /* its message is lost */
		else
			g->st.duplicates++;
		return;
	}
	if (p->nooo && !p->unreliable &&
	    (h->seq > p->next ||
	     (p->ooo[h->seq & (p->nooo - 1)].seq == h->seq &&
	      p->ooo[h->seq & (p->nooo - 1)].state == OOO_PART))) {
		/* reliable: kept for its turn (beyond the slots: dropped,
		 * asked for again later); next is missing, or in a slot */
		if (h->seq > p->next)
			p->assembling = 0; /* the rest of next is lost */
		if (h->seq - p->next < p->nooo)
			ooo_put(g, p, h, pay, n);
		fill_gap(g, p);
		return;
	}
	/* an abandoned reassembly included */
	if (h->seq > p->next && miss(g, p, h->seq))
		return;
	/* h->seq == p->next */
	if (!p->assembling) {
		if (h->off) {
			/* its first fragment lost */
			if (!miss(g, p, h->seq + 1))
				g->st.lost_fragments++;
			return;
		}
		if (n == h->total) {
			deliver(g, p, pay, n);
			fill_gap(g, p);
			return;
		}
		if (p->asm_cap < h->total) {
			char *b = realloc(p->asm_buf, h->total);

			if (!b) {
				LOG_WARN("no memory to reassemble %u bytes",
					 h->total);
				lose(g, p, h->seq + 1);
				return;
			}
			p->asm_buf = b;
			p->asm_cap = h->total;
		}
		memcpy(p->asm_buf, pay, n);
		p->asm_off = n;
		p->asm_total = h->total;
		p->assembling = 1;
		return;
	}
	if (h->total != p->asm_total || h->off != p->asm_off) {
		/* a fragment lost in the middle (or a header that lies) */
		if (!miss(g, p, h->seq + 1))
			g->st.lost_fragments++;
		return;
	}
	memcpy(p->asm_buf + p->asm_off, pay, n);
	p->asm_off += n;
	if (p->asm_off == p->asm_total) {
		deliver(g, p, p->asm_buf, p->asm_total);
		fill_gap(g, p);
	}
}

/* too_big -- a datagram of message h->seq of p, above our maximum size:
 * the message is lost (rdmamsg_group_join(3)), reported in its turn, not
 * asked for again (a reliable publisher waiting for us would stall) */
static void too_big(struct rdmamsg_group *g, struct gpub *p,
		    const struct rdmamsg__mc_wire *h)
{
	struct gooo *o;

	if (h->seq < p->next) {
		if (h->seq >= p->lost_first && h->seq < p->lost_end)
			g->st.lost_fragments++;
		else
			g->st.duplicates++;
		return;
	}
	if (h->seq > p->next && p->nooo && !p->unreliable) {
		/* reliable, ahead of a missing one: it waits for its turn
		 * (beyond the slots: asked for again later) */
		o = &p->ooo[h->seq & (p->nooo - 1)];
		if (h->seq - p->next < p->nooo) {
			if (o->seq == h->seq && o->state == OOO_LOST)
				g->st.lost_fragments++;
			o->seq = h->seq;
			o->state = OOO_LOST;
		}
		p->assembling = 0; /* the rest of next is lost */
		fill_gap(g, p);
		return;
	}
	/* the ones before it missing: asked for (reliable mode), or lost */
	if (h->seq > p->next && miss(g, p, h->seq))
		return;
	lose(g, p, h->seq + 1);
	fill_gap(g, p);
}

/* on_batch -- the h->total whole messages of a BATCH at r (checked by
 * rdmamsg__mc_decode), each as a DATA datagram of its own */
static void on_batch(struct rdmamsg_group *g, struct gpub *p,
		     const struct rdmamsg__mc_wire *h, const uint8_t *r)
{
	struct rdmamsg__mc_wire m = *h;
	uint32_t i, n;

	m.type = MC_DATA;
	m.off = 0;
	for (i = 0; i < h->total; i++) {
		n = rdmamsg__mc_rec(r);
		m.seq = h->seq + i;
		m.total = n;
		/* the ones after it are not missing: they come next */
		if (m.seq + 1 > p->seen)
			p->seen = m.seq + 1;
		if (n > g->max_msg)
			too_big(g, p, &m);
		else
			on_data(g, p, &m, (const char *)r + RDMAMSG_MC_REC, n);
		r += RDMAMSG_MC_REC + n;
	}
}

static void pub_datagram(struct rdmamsg_group *g, struct gpub *p,
			 const struct rdmamsg__mc_wire *h, const char *pay,
			 uint32_t n);

/* wc_src -- the sender of datagram w (GRH at grh) into src: 0, or -1 */
static int wc_src(const struct ibv_wc *w, const char *grh, uint8_t *src)
{
	if (!(w->wc_flags & IBV_WC_GRH))
		return -1;
	return rdmamsg__mc_grh_src((const uint8_t *)grh, src) ? -1 : 0;
}

/* find_src -- the publisher whose headed datagrams come from address src
 * and QP qpn, or NULL */
static struct gpub *find_src(struct rdmamsg_group *g, const uint8_t *src,
			     uint32_t qpn)
{
	uint32_t i;

	for (i = 0; i < g->npub; i++)
		if (g->pubs[i].have_src && g->pubs[i].src_qpn == qpn &&
		    !memcmp(g->pubs[i].src, src, 16))
			return &g->pubs[i];
	return NULL;
}

/* note_src -- publisher p's headed datagram w came from src: its bare
 * ones will (a publisher that had it before, gone, no longer has it) */
static void note_src(struct rdmamsg_group *g, struct gpub *p,
		     const struct ibv_wc *w, const uint8_t *src)
{
	uint32_t qpn = w->src_qp & 0xffffff;
	struct gpub *o;

	if (p->have_src && p->src_qpn == qpn && !memcmp(p->src, src, 16))
		return;
	while ((o = find_src(g, src, qpn)))
		o->have_src = 0;
	memcpy(p->src, src, 16);
	p->src_qpn = qpn;
	p->have_src = 1;
}

/* on_bare -- a bare datagram (lib/proto.h): len bytes after the GRH at
 * grh, one whole message of the publisher it came from, if we know it
 * (else it is one from before we heard of it, as before our join) */
static void on_bare(struct rdmamsg_group *g, const struct ibv_wc *w,
		    const char *grh, uint32_t len)
{
	struct rdmamsg__mc_wire h;
	struct gpub *p;
	uint8_t src[16];

	if (!(g->role & RDMAMSG_GROUP_SUBSCRIBER) || wc_src(w, grh, src))
		return;
	p = find_src(g, src, w->src_qp & 0xffffff);
	if (!p)
		return;
	memset(&h, 0, sizeof(h));
	/* (one above our maximum size: too_big) */
	if (rdmamsg__mc_seq(p->next, be32toh(w->imm_data), &h.seq)) {
		g->st.malformed++;
		return;
	}
	g->st.datagrams_received++;
	h.type = MC_DATA;
	h.pub = p->id;
	h.total = len;
	pub_datagram(g, p, &h, grh + GRH_BYTES, len);
}

/* on_datagram -- datagram w: len bytes after the GRH at grh */
static void on_datagram(struct rdmamsg_group *g, const struct ibv_wc *w,
			const char *grh, uint32_t len)
{
	const char *d = grh + GRH_BYTES;
	struct rdmamsg__mc_wire h;
	struct gpub *p;
	uint8_t src[16];
	uint64_t to;

	/* the wire's limit: a message above ours is lost, not malformed */
	if (rdmamsg__mc_decode(d, len, RDMAMSG_MC_MAX_MSG, &h)) {
		g->st.malformed++;
		return;
	}
	if (h.pub == g->pub_id)
		return; /* our own, looped back */
	g->st.datagrams_received++;
	if (h.type == MC_NAK || h.type == MC_STATUS || h.type == MC_LEAVE) {
		/* to a publisher, from a subscriber (h.pub) */
		memcpy(&to, d + RDMAMSG_MC_HDR, 8);
		if (le64toh(to) != g->pub_id ||
		    !(g->role & RDMAMSG_GROUP_PUBLISHER))
			return;
		if (h.type == MC_NAK) {
			const uint8_t *pl = (const uint8_t *)d + RDMAMSG_MC_HDR;
			uint32_t a = (h.flags & MCF_ADDR) ? RDMAMSG_MC_ADDR : 0;

			on_nak(g, h.pub, h.seq, a ? pl + 8 : NULL,
			       (h.flags & MCF_SEL) ? pl + 8 + a : NULL,
			       h.total);
		} else if (h.type == MC_LEAVE) {
			on_leave(g, h.pub);
		} else {
			on_status(g, h.pub, h.seq, h.total);
		}
		return;
	}
	if (!(g->role & RDMAMSG_GROUP_SUBSCRIBER))
		return;
	p = find_pub(g, h.pub);
	if (!p) {
		uint64_t start = h.seq;

		/* it leaves before we knew it; or names the oldest message
		 * it keeps, not its next */
		if (h.type == MC_HEARTBEAT && (h.flags & (MCF_FIN | MCF_LOW)))
			return;
		/* reliable: DATA may be a repair, sent again by multicast
		 * for another subscriber, of a message from long before we
		 * joined; we start at its heartbeat (one every period) or
		 * batch (never a repair) */
		if (h.type == MC_DATA && g->window)
			return;
		/* a late joiner starts at the next whole message (a
		 * batch's messages are whole) */
		if (h.type == MC_DATA && h.off)
			start++;
		p = new_pub(g, h.pub, start);
		if (!p) {
			g->st.malformed++;
			return;
		}
	}
	if (!wc_src(w, grh, src))
		note_src(g, p, w, src);
	pub_datagram(g, p, &h, d + RDMAMSG_MC_HDR, len - RDMAMSG_MC_HDR);
}

/* pub_datagram -- a datagram of publisher p: header *h, n bytes of
 * payload at pay */
static void pub_datagram(struct rdmamsg_group *g, struct gpub *p,
			 const struct rdmamsg__mc_wire *h, const char *pay,
			 uint32_t n)
{
	p->last_ns = g->ctx->now;
	/* a repair of ours after a selective NAK: the publisher takes them */
	if (h->type == MC_DATA && !h->off && h->seq >= p->next &&
	    h->seq < p->seen && p->sel_sent)
		p->sel_ok = 1;
	/* (a batch's messages: each as it is taken, in on_batch) */
	if (h->type == MC_DATA && h->seq + 1 > p->seen)
		p->seen = h->seq + 1;
	else if (h->type == MC_HEARTBEAT && !(h->flags & MCF_LOW) &&
		 h->seq > p->seen)
		p->seen = h->seq;
	if (h->type == MC_HEARTBEAT) {
		if (h->flags & MCF_FIN)
			p->have_src = 0; /* its QP may come back as another's */
		if (h->flags & MCF_ADDR)
			pub_addr(g, p, pay);
		else if (!h->flags)
			p->unreliable =
				1; /* a publisher not in reliable mode */
		if (h->seq <= p->next)
			return;
		if (p->nooo && !(h->flags & MCF_LOW)) {
			/* every fragment before it was sent before it: a
			 * part of its last message is all that comes */
			struct gooo *o = &p->ooo[(h->seq - 1) & (p->nooo - 1)];

			if (o->seq == h->seq - 1 && o->state == OOO_PART)
				o->state = OOO_EMPTY;
		}
		if (h->flags & (MCF_LOW | MCF_FIN)) {
			skip(g, p, h->seq); /* never to be repaired */
			if (!(h->flags & MCF_FIN))
				fill_gap(g, p); /* the rest may be */
		} else
			miss(g, p, h->seq);
		return;
	}
	if (h->type == MC_BATCH) {
		on_batch(g, p, h, (const uint8_t *)pay);
		return;
	}
	if (h->total > g->max_msg)
		too_big(g, p, h);
	else
		on_data(g, p, h, pay, n);
}

/* drop -- the test hook RDMAMSG_TEST_MC_DROP: one datagram in drop_every
 * "lost on the wire", at (fixed) random */
static int drop(struct rdmamsg_group *g)
{
	if (!g->drop_every)
		return 0;
	g->drop_n ^= g->drop_n << 13;
	g->drop_n ^= g->drop_n >> 17;
	g->drop_n ^= g->drop_n << 5;
	return g->drop_n % g->drop_every == 0;
}

/* sm_fn -- a reliable subscriber's period: status messages, NAKs again */
static void sm_fn(struct rdmamsg__timer *t)
{
	struct rdmamsg_group *g =
		container_of(t, struct rdmamsg_group, sm_timer);
	uint32_t i;
	int slept;

	if (g->closing || g->state != G_UP)
		return;
	/* a silence we slept through (this process stopped or starved) is
	 * not the publishers': they get a new grace period */
	slept = g->sm_last && g->ctx->now - g->sm_last > rcv_expire_ns(g) / 2;
	g->sm_last = g->ctx->now;
	for (i = 0; i < g->npub; i++) {
		struct gpub *p = &g->pubs[i];

		if (!p->ah)
			continue;
		if (slept)
			p->last_ns = g->ctx->now;
		if (p->gap && g->ctx->now - p->last_ns > rcv_expire_ns(g)) {
			/* a publisher silent this long (gone without its
			 * last heartbeat) repairs nothing more: what it
			 * told us of is lost */
			LOG_INFO("multicast: publisher %016llx silent, its "
				 "missing messages are lost",
				 (unsigned long long)p->id);
			skip(g, p, p->seen > p->next ? p->seen : p->next);
			p->gap = 0;
			continue;
		}
		if (p->gap)
			nak(g, p, 0);
		status(g, p);
	}
	rdmamsg__timer_start(g->ctx, &g->sm_timer, g->hb_ms);
}

/*
 * poll_after_rx -- a subscriber that received within poll_ns of its last
 * receive is likely to again as soon: its context polls that long before
 * it blocks (rdmamsg_ctx_arm), instead of being woken for every datagram
 * of a stream.  One whose datagrams come further apart (a paced stream)
 * blocks at once: its poll would find nothing, and on a busy machine the
 * CPU it spins (yielding) is the sender's.  N datagrams came in this
 * poll: more than one is a stream too (they came faster than we polled).
 */
static void poll_after_rx(struct rdmamsg_group *g, uint32_t n)
{
	struct rdmamsg_ctx *ctx = g->ctx;
	uint64_t last = g->rx_ns;

	g->rx_ns = ctx->now;
	if (!g->poll_ns || (n < 2 && ctx->now - last > g->poll_ns))
		return;
	if (ctx->now + g->poll_ns > ctx->poll_until)
		ctx->poll_until = ctx->now + g->poll_ns;
}

/* group_wcs -- the lane's wcs(): completions of g's QP at wc (n of them,
 * the first routed to g); the run of them that is g's is handled; how
 * many */
static uint32_t group_wcs(struct rdmamsg__lane *lane, const struct ibv_wc *wc,
			  uint32_t n)
{
	struct rdmamsg_group *g =
		container_of(lane, struct rdmamsg_group, lane);
	uint64_t tag = wc[0].wr_id & RDMAMSG_WRID_TAG_BITS;
	uint32_t i, rx = 0;

	for (i = 0; i < n && (wc[i].wr_id & RDMAMSG_WRID_TAG_BITS) == tag;
	     i++) {
		const struct ibv_wc *w = &wc[i];
		uint64_t own = w->wr_id & RDMAMSG__WRID_OWN_MASK;

		if (!g->qp || w->qp_num != g->qp->qp_num)
			continue; /* not ours */
		if (w->wr_id & RDMAMSG__WRID_SEND) {
			uint64_t s =
				g->sq_tail + ((own - (uint32_t)g->sq_tail) &
					      RDMAMSG__WRID_OWN_MASK);

			if (s >= g->sq_post)
				continue;
			if (w->status != IBV_WC_SUCCESS) {
				LOG_WARN("multicast send: %s",
					 ibv_wc_status_str(w->status));
				complete_tx(g, s + 1,
					    w->status == IBV_WC_WR_FLUSH_ERR
						    ? -ECANCELED
						    : -EIO);
			} else {
				complete_tx(g, s + 1, 0);
			}
			if (g->repairing)
				pump(g);
			if (g->pk_n)
				flush(g);
			tx_flush(g);
			if (g->closing && g->sq_head == g->sq_tail)
				kick(g);
			continue;
		}
		if (own >= g->nrx || !g->rxa[own])
			continue;
		if (w->status != IBV_WC_SUCCESS) {
			if (w->status != IBV_WC_WR_FLUSH_ERR)
				LOG_WARN("multicast receive: %s",
					 ibv_wc_status_str(w->status));
			continue; /* the buffer stays ours until the end */
		}
		if (w->byte_len < GRH_BYTES || w->byte_len > g->rx_len)
			g->st.malformed++;
		else if (drop(g))
			; /* test hook */
		else if (w->wc_flags & IBV_WC_WITH_IMM)
			on_bare(g, w, g->rxa[own] + G_RX_PAD,
				w->byte_len - GRH_BYTES);
		else
			on_datagram(g, w, g->rxa[own] + G_RX_PAD,
				    w->byte_len - GRH_BYTES);
		rx++;
		g->rpend[g->nrpend++] = (uint32_t)own;
		if (g->nrpend >= G_REPOST)
			post_recvs(g);
	}
	if (rx)
		poll_after_rx(g, rx);
	return i;
}

/* group_ready -- the lane's ready(), at the end of a pass that had
 * completions of ours: the receive buffers taken go back; a reliable
 * subscriber that delivered tells its publishers where it is now (a
 * publisher held at the window goes on as soon as we caught up, not
 * when a quarter of the window more has come) */
static void group_ready(void *owner)
{
	struct rdmamsg_group *g = owner;
	uint32_t i, min;

	if (g->nrpend)
		post_recvs(g);
	if (!g->sm_due)
		return;
	g->sm_due = 0;
	min = g->window / G_SM_PASS ? g->window / G_SM_PASS : 1;
	for (i = 0; i < g->npub; i++) {
		struct gpub *p = &g->pubs[i];

		if (p->ah && p->next - p->sm_sent >= min)
			status(g, p);
	}
}

/* a group is a UD lane of its own kind; only the interface calls it */
static const struct rdmamsg__lane_ops group_lane_ops = {
	.name = "ud-mcast",
	.wcs = group_wcs,
};
static const struct rdmamsg__lane_cbs group_lane_cbs = {
	.ready = group_ready,
};

/* ---- joining ------------------------------------------------------- */

/* port_mtu -- the path MTU in bytes of the id's port (4096 if unknown) */
static uint32_t port_mtu(struct rdmamsg_group *g)
{
	struct ibv_port_attr pa;
	uint8_t port = g->id->port_num ? g->id->port_num : 1;

	memset(&pa, 0, sizeof(pa));
	if (ibv_query_port(g->id->verbs, port, &pa) || pa.active_mtu < 1 ||
	    pa.active_mtu > IBV_MTU_4096)
		return 4096;
	return 128u << pa.active_mtu;
}

/*
 * rx_slots -- the nrx receive slots, packed G_RX_CHUNK bytes to a pool
 * buffer: a slot is its pad, the GRH and a datagram of the path MTU
 * (4,160 bytes at 4,096), rounded to a cache line, where a pool buffer of
 * its own would be twice that (the next power of two), and the slots lie
 * in a handful of registrations instead of one pool slab per 127 of
 * them (a sender that places into them looks each one up).  A slot's
 * payload starts on a cache line: the copy into it and its reader's
 * loads are fastest there (the pool's buffers are 64-byte aligned).  All
 * queued to be posted; 0 or a negative errno (what was got is put back
 * by group_free)
 */
static int rx_slots(struct rdmamsg_group *g)
{
	size_t stride = (G_RX_PAD + GRH_BYTES + g->mtu + 63) & ~(size_t)63;
	uint32_t per = (uint32_t)(G_RX_CHUNK / stride), i, j, n;
	int ret;

	g->rx_len = GRH_BYTES + g->mtu;
	g->rxc = calloc((g->nrx - 1) / per + 1, sizeof(*g->rxc));
	g->rxa = calloc(g->nrx, sizeof(*g->rxa));
	g->rxk = calloc(g->nrx, sizeof(*g->rxk));
	g->rpend = calloc(g->nrx, sizeof(*g->rpend));
	if (!g->rxc || !g->rxa || !g->rxk || !g->rpend)
		return -ENOMEM;
	for (i = 0; i < g->nrx; i += n) {
		struct rdmamsg_buf *b;

		n = g->nrx - i < per ? g->nrx - i : per;
		ret = rdmamsg__buf_get(g->ctx, n * stride, BUF_LIB, &b);
		if (ret)
			return ret;
		g->rxc[g->nrxc++] = b;
		/* touched now, at the join, rather than by the first
		 * datagram each takes (softrdma does not fault pages in at
		 * registration, as pinning them does) */
		memset(b->data, 0, n * stride);
		for (j = 0; j < n; j++) {
			g->rxa[i + j] = b->data + j * stride;
			g->rxk[i + j] = b->lkey;
			g->rpend[g->nrpend++] = i + j;
		}
	}
	return 0;
}

/* ud_rts -- the group's QP to RTS as librdmacm's ucma_init_ud_qp moves a
 * QP it makes for a UD id: INIT with rdma_init_qp_attr's port, P_Key and
 * Q_Key (the kernel gives a UD id nothing more), then RTR and RTS */
static int ud_rts(struct rdmamsg_group *g)
{
	const struct rdmamsg__ops *ops = g->ctx->ops;
	struct ibv_qp_attr qa;
	int mask = 0, ret;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	if (ops->init_qp_attr(g->id, &qa, &mask) ||
	    ops->modify_qp(g->qp, &qa, mask))
		goto err;
	qa.qp_state = IBV_QPS_RTR;
	if (ops->modify_qp(g->qp, &qa, IBV_QP_STATE))
		goto err;
	qa.qp_state = IBV_QPS_RTS;
	qa.sq_psn = 0;
	if (ops->modify_qp(g->qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto err;
	return 0;
err:
	ret = rdmamsg__errno(EINVAL);
	LOG_ERR("the group's UD QP cannot be made ready: %d", ret);
	return ret;
}

/* setup -- the address is resolved: QP, receives, join */
static int setup(struct rdmamsg_group *g)
{
	struct rdmamsg_ctx *ctx = g->ctx;
	struct ibv_qp_init_attr qa;
	struct rdma_cm_join_mc_attr_ex jx;
	uint32_t i, need, sd = 1;
	int ret;

	if (g->id->verbs != ctx->cm_verbs)
		return -ENODEV; /* the group is routed to another device */
	g->mtu = port_mtu(g);
	if (g->mtu <= RDMAMSG_MC_HDR)
		return -EINVAL;
	g->frag = g->mtu - RDMAMSG_MC_HDR;
	if (g->role & RDMAMSG_GROUP_PUBLISHER) {
		uint64_t per = (g->max_msg - 1) / g->frag + 1;

		if (per + 1 > g->sdepth) {
			LOG_ERR("a %zu byte message is %llu datagrams, more "
				"than the send depth %u",
				g->max_msg, (unsigned long long)per, g->sdepth);
			return -EINVAL;
		}
		sd = g->sdepth;
	} else {
		/* a subscriber sends only NAKs and status messages */
		sd = g->window ? 64 : 1;
		g->sdepth = sd;
	}
	if (g->window) {
		g->keep = calloc(g->window, sizeof(*g->keep));
		if (!g->keep)
			return -ENOMEM;
		repair_done(g);
	}
	while (sd & (sd - 1))
		sd++; /* a power of two: the ring is indexed by a mask */
	g->tx = calloc(sd, sizeof(*g->tx));
	if (!g->tx)
		return -ENOMEM;
	g->sq_mask = sd - 1;
	for (i = 0; i < sd; i++) {
		/* what every send has in common, once */
		g->tx[i].wr.sg_list = &g->tx[i].sge;
		g->tx[i].wr.num_sge = 1;
	}
	if (g->role & RDMAMSG_GROUP_PUBLISHER) {
		uint32_t nr = sd * G_PACK_MAX < G_MAX_RECS ? sd * G_PACK_MAX
							   : G_MAX_RECS;

		if (nr < sd)
			nr = sd;
		g->recs = calloc(nr, sizeof(*g->recs));
		if (!g->recs)
			return -ENOMEM;
		g->rec_mask = nr - 1;
	}
	/* a reliable publisher hears NAKs and status messages */
	g->nrx = (g->role & RDMAMSG_GROUP_SUBSCRIBER) || g->window ? g->rdepth
								   : 0;
	need = sd + g->nrx;
	g->lane.ops = &group_lane_ops;
	g->lane.cbs = &group_lane_cbs;
	g->lane.owner = g;
	g->lane.ctx = ctx;
	ret = rdmamsg__iface_attach(&g->lane, need);
	if (ret)
		return ret;
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_UD;
	qa.send_cq = qa.recv_cq = g->lane.icq->cq;
	qa.cap.max_send_wr = sd;
	qa.cap.max_recv_wr = g->nrx ? g->nrx : 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	g->qp = ctx->ops->create_qp(ctx->qp_pd, &qa);
	if (!g->qp) {
		ret = rdmamsg__errno(ENOMEM);
		LOG_ERR("ibv_create_qp (UD) failed: %d", ret);
		return ret;
	}
	ret = ud_rts(g);
	if (ret)
		return ret;
	if (g->nrx) {
		ret = rx_slots(g);
		if (ret)
			return ret;
		ret = post_recvs(g);
		if (ret)
			return -ret;
	}
	if (g->role & RDMAMSG_GROUP_SUBSCRIBER) {
		if (ctx->ops->join_multicast(g->id,
					     (struct sockaddr *)&g->maddr, g))
			return rdmamsg__errno(EINVAL);
	} else {
		memset(&jx, 0, sizeof(jx));
		jx.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
			       RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
		jx.addr = (struct sockaddr *)&g->maddr;
		jx.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
		if (ctx->ops->join_multicast_ex(g->id, &jx, g))
			return rdmamsg__errno(EINVAL);
	}
	g->joined = 1;
	g->state = G_JOINING;
	return 0;
}

/* rdmamsg__group_cm_event -- an rdma_cm event of a group's id; acks it */
void rdmamsg__group_cm_event(struct rdmamsg_ctx *ctx, struct rdma_cm_event *ev)
{
	struct rdmamsg_group *g = ev->id->context;
	enum rdma_cm_event_type type = ev->event;
	struct ibv_ah_attr ah = ev->param.ud.ah_attr;
	uint32_t qpn = ev->param.ud.qp_num, qkey = ev->param.ud.qkey;
	int status = ev->status, ret;

	ctx->ops->ack_cm_event(ev);
	if (g->state == G_FAILED)
		return;
	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (g->state != G_RESOLVING)
			return;
		ret = g->closing ? 0 : setup(g);
		if (ret)
			fail(g, ret);
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		if (g->state != G_JOINING)
			return;
		/* a member that receives attaches its QP, as librdmacm's
		 * ucma_process_join does the id's (a send-only one does not) */
		if (g->role & RDMAMSG_GROUP_SUBSCRIBER) {
			if (ctx->ops->attach_mcast(g->qp, &ah.grh.dgid,
						   ah.dlid)) {
				fail(g, rdmamsg__errno(EINVAL));
				return;
			}
			g->attached = 1;
			g->mgid = ah.grh.dgid;
			g->mlid = ah.dlid;
		}
		g->ah = ctx->ops->create_ah(ctx->pd, &ah);
		if (!g->ah) {
			fail(g, rdmamsg__errno(EINVAL));
			return;
		}
		g->rqpn = qpn;
		g->rqkey = qkey;
		g->sgid_index = ah.grh.sgid_index;
		g->port = ah.port_num ? ah.port_num : 1;
		if (g->window && !ctx->ops->query_gid(ctx->verbs, g->port,
						      g->sgid_index, &g->gid))
			g->have_gid = 1;
		g->state = G_UP;
		if (g->closing) {
			kick(g);
			return;
		}
		if (g->role & RDMAMSG_GROUP_PUBLISHER) {
			heartbeat(g, 0,
				  g->next_seq); /* subscribers learn of us */
			rdmamsg__timer_start(ctx, &g->hb_timer, g->hb_ms);
		}
		if (g->window && (g->role & RDMAMSG_GROUP_SUBSCRIBER))
			rdmamsg__timer_start(ctx, &g->sm_timer, g->hb_ms);
		if (g->cbs.on_join)
			g->cbs.on_join(g, 0, g->arg);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		fail(g, status < 0 ? status : -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		fail(g, -ENODEV);
		break;
	default:
		break;
	}
}

RDMAMSG_EXPORT int rdmamsg_group_join(struct rdmamsg_ctx *ctx, const char *addr,
				      const struct rdmamsg_group_attr *attr,
				      const struct rdmamsg_group_cbs *cbs,
				      void *arg, struct rdmamsg_group **gp)
{
	struct sockaddr_storage maddr, bind;
	struct rdmamsg_group *g;
	const char *env;
	int ret;

	/* without a table nothing would report the join's end (rdmamsg.h) */
	if (!ctx || !addr || !cbs || !gp)
		return -EINVAL;
	if (parse_ip(addr, &maddr) || !is_mcast(&maddr))
		return -EINVAL;
	if (attr && attr->bind &&
	    (parse_ip(attr->bind, &bind) || is_mcast(&bind) ||
	     bind.ss_family != maddr.ss_family))
		return -EINVAL;
	/* only a reliable publisher hears of its subscribers */
	if (attr && attr->min_rcv && !attr->window)
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->maddr = maddr;
	g->obj.type = OBJ_GROUP;
	g->ctx = ctx;
	list_init(&g->lane.ready_link);
	/* a pool buffer held while the group lives: rdmamsg_ctx_destroy()
	 * is -EBUSY until it is closed */
	ret = rdmamsg__buf_get(ctx, 1, BUF_LIB, &g->hold);
	if (ret)
		goto err_free;
	g->role = attr ? attr->role
		       : RDMAMSG_GROUP_PUBLISHER | RDMAMSG_GROUP_SUBSCRIBER;
	g->max_msg = attr ? attr->max_msg : G_DEF_MAX_MSG;
	g->rdepth = attr ? attr->rdepth : G_DEF_RDEPTH;
	g->sdepth = attr ? attr->sdepth : G_DEF_SDEPTH;
	g->hb_ms = attr ? attr->hb_ms : G_DEF_HB_MS;
	g->window = attr ? attr->window : 0;
	g->flow = attr ? attr->flow : RDMAMSG_GROUP_FLOW_MIN;
	g->fc_tag = attr ? attr->fc_tag : 0;
	g->tag = attr ? attr->tag : 0;
	g->min_rcv = attr ? attr->min_rcv : 0;
	g->batch = attr ? attr->batch : 1;
	g->poll_ns = (uint64_t)(attr ? attr->poll_us : def_poll_us()) * 1000;
	g->cbs = *cbs;
	g->arg = arg;
	while (!g->pub_id)
		if (getrandom(&g->pub_id, sizeof(g->pub_id), 0) !=
		    sizeof(g->pub_id))
			g->pub_id = rdmamsg__now_ns() ^ (uintptr_t)g;
	env = getenv("RDMAMSG_TEST_MC_DROP");
	if (env)
		g->drop_every = (uint32_t)atoi(env);
	g->drop_n = 2463534242u;
	rdmamsg__timer_init(&g->hb_timer, hb_fn);
	rdmamsg__timer_init(&g->step_timer, step_fn);
	rdmamsg__timer_init(&g->close_timer, close_fn);
	rdmamsg__timer_init(&g->sm_timer, sm_fn);
	if (ctx->ops->create_id(ctx->ech, &g->id, &g->obj, RDMA_PS_UDP)) {
		ret = rdmamsg__errno(ENOMEM);
		goto err_hold;
	}
	if (ctx->ops->resolve_addr(
		    g->id, attr && attr->bind ? (struct sockaddr *)&bind : NULL,
		    (struct sockaddr *)&g->maddr, G_RESOLVE_MS)) {
		ret = rdmamsg__errno(EINVAL);
		goto err_id;
	}
	rdmamsg__loop_ref(ctx);
	*gp = g;
	return 0;

err_id:
	ctx->ops->destroy_id(g->id);
err_hold:
	rdmamsg__buf_put(g->hold);
err_free:
	free(g);
	return ret;
}

/* goodbye -- a closing reliable subscriber tells each publisher it has
 * the way to that it leaves (LEAVE): they stop waiting for it now, not
 * after its silence (5 s); one the send queue has no room for, or that
 * is lost, ages out as before */
static void goodbye(struct rdmamsg_group *g)
{
	uint32_t i;

	for (i = 0; i < g->npub; i++) {
		struct gpub *p = &g->pubs[i];
		uint64_t to = htole64(p->id);

		if (p->ah)
			control(g, p->ah, p->qpn, MC_LEAVE, 0, p->next, &to, 8);
	}
}

RDMAMSG_EXPORT int rdmamsg_group_close(struct rdmamsg_group *g,
				       void (*close_cb)(struct rdmamsg_group *g,
							void *arg))
{
	if (!g)
		return -EINVAL;
	if (g->closing)
		return -EALREADY;
	g->closing = 1;
	g->close_cb = close_cb;
	if (g->window)
		goodbye(g);
	if (!g->window)
		rdmamsg__timer_stop(g->ctx, &g->hb_timer); /* (hb_fn) */
	rdmamsg__timer_stop(g->ctx, &g->sm_timer);
	rdmamsg__timer_start(g->ctx, &g->close_timer, G_CLOSE_MS);
	kick(g);
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_query(const struct rdmamsg_group *g,
				       struct rdmamsg_group_stats *st)
{
	uint64_t now;
	uint32_t i;

	if (!g || !st)
		return -EINVAL;
	*st = g->st;
	st->mtu = g->frag;
	/* as of now: the ones silent too long are not counted, whether or
	 * not a publish (or a heartbeat period) looked at them since */
	st->receivers = 0;
	now = rdmamsg__now_ns();
	for (i = 0; i < g->nrcv; i++)
		st->receivers +=
			!g->rcv[i].silent && !rcv_expired(g, &g->rcv[i], now);
	return 0;
}

RDMAMSG_EXPORT int rdmamsg_group_get_id(const struct rdmamsg_group *g,
					uint64_t *id)
{
	if (!g || !id)
		return -EINVAL;
	*id = g->pub_id;
	return 0;
}
