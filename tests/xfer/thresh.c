/* SPDX-License-Identifier: MIT */
/*
 * thresh.c -- rdmamsg_send() picks the protocol by size, invisibly.
 *
 * Two contexts of this process.  Bad thresholds (attribute and
 * RDMAMSG_RNDV_THRESH) are refused with -EINVAL and make nothing; a good
 * environment value applies, the attribute wins over it.  On a
 * connection with eager size 8 KiB, rendezvous threshold 32 KiB and
 * maximum message 256 KiB, messages of every threshold +-1 byte (and 0,
 * 1 byte, 1 MiB) go out in a burst, each between small ones: the server
 * sees them all through on_recv, in the order sent, byte for byte, with
 * the same flags (RDMAMSG_RECV_LARGE only above the maximum message),
 * and can keep any of them (rdmamsg_recv_keep).  A request above the
 * threshold keeps its place between messages, and so does its response.
 * A 64 KiB round trip (copied whole: RDMAMSG_RNDV_PIECE=0, pieces are
 * pieces.c's) makes no memory registration (the context's reg_mr
 * is counted) and is no fragments: one send each way plus the FIN (the
 * provider's post_send is counted by opcode), one READ each way, and its
 * memory window is bound and invalidated once each way.  With
 * RDMAMSG_NO_MW=1 the same round trip registers per transfer instead and
 * still arrives whole.  The small messages' thresholds +-1 byte (the
 * inline maximum, the packing limit) in a burst that outruns the credits
 * arrive the same way, packed (fewer sends than messages), and to a
 * server that does not offer packing (RDMAMSG_NO_PACK=1), one send each.
 * Where nobody sets a threshold the connection chooses it: between two
 * contexts of this host, on softrdma, the same-host one
 * (RDMAMSG__RNDV_LOCAL_SHM) on both ends, and messages of it +-1 byte
 * arrive whole, in fragments up to it (no READ) and pulled above it (one
 * READ); the environment and the attribute override it (above).  The
 * default between hosts: tests/netns/cm-hosts.sh.
 *
 * rdmamsg_send_nocopy() from a registered region: the same burst arrives
 * exactly as rdmamsg_send()'s does (order, bytes, flags, lengths at every
 * threshold +-1), the messages above the threshold read where the caller
 * put them (their READs address the region) and the rest copied, as is a
 * message from memory no region holds (overwritten at once, it still
 * arrives as sent).  The region cannot be deregistered while a transfer
 * reads it (-EBUSY); on_send comes once the transfer's window is
 * invalidated: the region can be deregistered inside on_send, and the
 * provider lets it go (it refuses while a window is bound to it).  Four
 * 1 MiB nocopy messages sent at once arrive whole, once and in order,
 * on the soft fabric read one after the other into one destination (the
 * receiver starts a read while the reads under way stay within 1 MiB).
 * 1 MiB rdmamsg_send()s while the server does not run: by default (1 MiB,
 * two copies at least) two copies wait to be read (the third gets
 * -EAGAIN), with RDMAMSG_COPY_AHEAD=4m (a bad value: connect -EINVAL) within 4 MiB (the
 * fifth), then on_writable, and the client's pool grows by the bound at
 * most; with RDMAMSG_COPY_AHEAD=0 all five are taken; all arrive whole,
 * once, in order each way.
 * A 64 KiB nocopy round trip registers nothing and binds and invalidates
 * one window each way; without windows (RDMAMSG_NO_MW=1) the READ goes
 * with the region's key.
 *
 * Both ends offer SEND_WITH_INV (softrdma has it), so every window above
 * is invalidated by the receiver's FIN (the burst's bytes, order and
 * counts all come through that path); a round trip posts one
 * SEND_WITH_INV each way and no LOCAL_INV.  To a server that does not
 * offer it (RDMAMSG_NO_SEND_INV=1, as a peer from before it) the client
 * invalidates with LOCAL_INV instead, as it does when the server's FIN
 * finds no credit (the server's small messages filling its backlog while
 * the client does not progress): that FIN goes plain, behind them, and
 * everything arrives once.  Either way the window is gone
 * before on_send: the server's READ through its rkey afterwards (the
 * pool memory under it still registered) fails with a remote access
 * error.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"
#include "pattern.h"
#include "internal.h"
#include "dispatch.h"
#include "xfer.h"

#define EAGER  8192
#define THRESH 32768
#define MAXMSG (256 * 1024)
#define SMALL  24
#define NSIZES 13
#define MAXLEN (1024 * 1024)
#define ZC_LEN (4 * 1024 * 1024)

static const size_t sizes[NSIZES] = {
	0,	    1,	   EAGER - 1,  EAGER,  EAGER + 1,  THRESH - 1, THRESH,
	THRESH + 1, 65536, MAXMSG - 1, MAXMSG, MAXMSG + 1, MAXLEN,
};

/* what the server saw, in order */
struct seen {
	uint32_t imm;
	size_t len;
	unsigned int flags;
	int ok;	  /* bytes as sent */
	int kind; /* 0 message, 1 request */
};
#define MAXSEEN 1024

static struct seen seen[MAXSEEN];
static unsigned int nseen, kept, keep_bad, resp_ok, resp_done, acked;
static uint32_t req_seq;
static unsigned char *pat;

/* rdmamsg_send_nocopy: the client's region, where send_k puts messages
 * while nocopy is set (each its own place: they must stay until
 * on_send), and cli_sent deregistering it when dereg_in_send is set */
static unsigned char *zc;
static struct rdmamsg_mr *zc_mr;
static size_t zc_off;
static int nocopy, dereg_in_send, dereg_ret = 1;

/* counters behind the contexts' reg_mr and the provider's post_send */
static struct ibv_mr *(*real_reg)(struct ibv_pd *, void *, size_t, int);
static int (*real_post)(struct ibv_qp *, struct ibv_send_wr *,
			struct ibv_send_wr **);
static int (*real_dereg)(struct ibv_mr *);
static unsigned int nreg, nsend, nread, nbind, ninv, nread_zc, ndereg_bad;
static unsigned int nsinv;    /* the invalidations of ninv by a FIN */
static unsigned int cli_linv; /* LOCAL_INVs on the client's QP */
static unsigned int all_binds, all_invs; /* never reset */
/* the last window bound on the client's QP: its rkey and address */
static struct ibv_qp *cli_qp;
static uint32_t cli_rkey;
static uint64_t cli_addr;
/* the server's QP, and where on it (posts counted from round_trip's
 * start) its first window was bound and its first FIN invalidated */
static struct ibv_qp *srv_qp;
static unsigned int nposts, srv_bind_at, srv_fin_at;
/* the destinations of READs (big_burst) */
#define MAXDEST 8
static uintptr_t dest[MAXDEST];
static unsigned int ndest;

static struct ibv_mr *count_reg(struct ibv_pd *pd, void *addr, size_t len,
				int access)
{
	nreg++;
	return real_reg(pd, addr, len, access);
}

/* note_dest -- a READ into addr: a destination not seen before counts */
static void note_dest(uintptr_t addr)
{
	unsigned int i;

	for (i = 0; i < ndest; i++)
		if (dest[i] == addr)
			return;
	if (ndest < MAXDEST)
		dest[ndest++] = addr;
}

/* the client's SENDs of watch_len bytes (header and payload), and how
 * many of them went inline (inline_direct) */
static size_t watch_len;
static unsigned int nwatch, nwatch_inl;

/* note_inline -- a SEND of the client's: counted if watch_len long */
static void note_inline(const struct ibv_send_wr *w)
{
	size_t len = 0;
	int i;

	for (i = 0; i < w->num_sge; i++)
		len += w->sg_list[i].length;
	if (!watch_len || len != watch_len)
		return;
	nwatch++;
	nwatch_inl += !!(w->send_flags & IBV_SEND_INLINE);
}

static int count_post(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad)
{
	const struct ibv_send_wr *w;

	for (w = wr; w; w = w->next) {
		nposts++;
		if (qp == srv_qp && w->opcode == IBV_WR_BIND_MW && !srv_bind_at)
			srv_bind_at = nposts;
		if (qp == srv_qp && w->opcode == IBV_WR_SEND_WITH_INV &&
		    !srv_fin_at)
			srv_fin_at = nposts;
		switch (w->opcode) {
		case IBV_WR_SEND:
		case IBV_WR_SEND_WITH_IMM:
			nsend++;
			if (qp == cli_qp)
				note_inline(w);
			break;
		case IBV_WR_RDMA_READ:
			nread++;
			note_dest(w->sg_list[0].addr);
			/* from the caller's region, where it sent from */
			if (zc && w->wr.rdma.remote_addr >= (uintptr_t)zc &&
			    w->wr.rdma.remote_addr < (uintptr_t)zc + ZC_LEN)
				nread_zc++;
			break;
		case IBV_WR_BIND_MW:
			nbind++;
			all_binds++;
			if (qp == cli_qp) {
				cli_rkey = w->bind_mw.rkey;
				cli_addr = w->bind_mw.bind_info.addr;
			}
			break;
		case IBV_WR_SEND_WITH_INV:
			/* a FIN that invalidates the peer's window */
			nsend++;
			nsinv++;
			ninv++;
			all_invs++;
			break;
		case IBV_WR_LOCAL_INV:
			ninv++;
			all_invs++;
			cli_linv += qp == cli_qp;
			break;
		default:
			break;
		}
	}
	return real_post(qp, wr, bad);
}

static int count_dereg(struct ibv_mr *mr)
{
	int ret = real_dereg(mr);

	if (ret)
		ndereg_bad++; /* e.g. EBUSY: a window still bound to it */
	return ret;
}

/* picky: the contexts' RC QPs fail above PICKY_INLINE bytes inline, as
 * on a device whose deep send queues cannot hold WQEs that large while
 * the inline probe's shallow QP could (npicky: the refusals) */
#define PICKY_INLINE 300u
static struct ibv_qp *(*real_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
static int picky;
static unsigned int npicky;

static struct ibv_qp *picky_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *qa)
{
	if (picky && qa->qp_type == IBV_QPT_RC &&
	    qa->cap.max_inline_data > PICKY_INLINE) {
		npicky++;
		errno = EINVAL;
		return NULL;
	}
	return real_qp(pd, qa);
}

/* counted -- route ctx's registrations and its device's sends through
 * the counters (the table is copied: it is shared and read-only) */
static void counted(struct rdmamsg_ctx *ctx, struct rdmamsg__ops *copy)
{
	*copy = *ctx->ops;
	real_reg = copy->reg_mr;
	copy->reg_mr = count_reg;
	real_dereg = copy->dereg_mr;
	copy->dereg_mr = count_dereg;
	real_qp = copy->create_qp;
	copy->create_qp = picky_qp;
	ctx->ops = copy;
	if (ctx->verbs->ops.post_send != count_post) {
		real_post = ctx->verbs->ops.post_send;
		ctx->verbs->ops.post_send = count_post;
	}
}

static void srv_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct test_side *s = arg;
	struct rdmamsg_buf *b;

	if (!s->ep)
		s->ep = ep;
	if (imm == 0xEC40) {
		/* the round trip: echo it */
		if (rdmamsg_send_imm(ep, data, len, 0xEC41, NULL))
			s->bad++;
		return;
	}
	if (nseen < MAXSEEN) {
		seen[nseen].imm = imm;
		seen[nseen].len = len;
		seen[nseen].flags = flags;
		seen[nseen].ok = same(data, len, imm);
		nseen++;
	}
	/* every protocol's message can be kept */
	if (len > EAGER && imm % 2 == 0) {
		void *kd;

		if (rdmamsg_recv_keep(ep, &b)) {
			keep_bad++;
			return;
		}
		rdmamsg_buf_get_data(b, &kd);
		if (kd != data || !same(kd, len, imm))
			keep_bad++;
		rdmamsg_buf_free(b);
		kept++;
	}
}

static void srv_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
			void *data, size_t len, void *arg)
{
	uint32_t seq = 0;

	(void)ep;
	(void)arg;
	if (len >= 4)
		memcpy(&seq, data, 4);
	if (nseen < MAXSEEN) {
		seen[nseen].imm = seq;
		seen[nseen].len = len;
		seen[nseen].flags = 0;
		seen[nseen].ok = len > 4 &&
				 same((unsigned char *)data + 4, len - 4, seq);
		seen[nseen].kind = 1;
		nseen++;
	}
	fill(pat, len, seq + 1);
	if (rdmamsg_respond(req, pat, len))
		rdmamsg_req_drop(req);
}

static struct test_side *cli_side;
static uint32_t echo_got;
static unsigned int fillers; /* the server's small messages (fin_no_credit) */

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	(void)ep;
	(void)arg;
	(void)flags;
	if (imm == 0xEC41 && len == 65536 && same(data, len, 0xEC40))
		echo_got++;
	else if (imm == 0xF1F1 && len == SMALL && same(data, len, 0xF1F1))
		fillers++;
	else
		cli_side->bad++;
}

static void cli_sent(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	(void)ep;
	(void)op_ctx;
	(void)arg;
	if (status)
		cli_side->bad++;
	if (dereg_in_send) {
		/* the region is the caller's again, the peer's window
		 * over it gone */
		dereg_ret = rdmamsg_mr_dereg(&zc_mr);
		dereg_in_send = 0;
	}
	acked++;
}

static unsigned int writable; /* the client's on_writable calls */

static void cli_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	writable++;
}

static void on_response(struct rdmamsg_ep *ep, int status, void *data,
			size_t len, void *arg)
{
	(void)ep;
	(void)arg;
	if (!status && len == 40000 && same(data, len, req_seq + 1))
		resp_ok++;
	resp_done++;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = srv_recv,
	.on_disconnect = test_side_on_disconnect,
};

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = cli_recv,
	.on_send = cli_sent,
	.on_writable = cli_writable,
	.on_disconnect = test_side_on_disconnect,
};

static struct rdmamsg_ep_attr *srv_attr;

static int srv_no_pack; /* the server's endpoint refuses packing */
static int srv_no_inv;	/* the server's endpoint offers no SEND_WITH_INV */

/* on_req -- test_side_on_req with the server's refusals in the
 * environment (read when the endpoint is made: the client's was made
 * before) */
static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	if (srv_no_pack)
		setenv("RDMAMSG_NO_PACK", "1", 1);
	if (srv_no_inv)
		setenv("RDMAMSG_NO_SEND_INV", "1", 1);
	test_side_on_req(l, req, pdata, len, arg);
	unsetenv("RDMAMSG_NO_PACK");
	unsetenv("RDMAMSG_NO_SEND_INV");
}

/* send_k -- message seq of len bytes (or a small one), retried while the
 * backlog is full */
static int send_k(struct test_side *cli, struct test_side *srv, size_t len,
		  uint32_t seq)
{
	unsigned char *p = pat;
	int ret;

	if (nocopy) {
		if (zc_off + len > ZC_LEN)
			bail_out("the nocopy region is full");
		p = zc + zc_off;
		zc_off += (len + 63) & ~(size_t)63;
	}
	fill(p, len, seq);
	do {
		ret = nocopy ? rdmamsg_send_nocopy_imm(cli->ep, p, len, seq,
						       NULL)
			     : rdmamsg_send_imm(cli->ep, p, len, seq, NULL);
		if (ret == -EAGAIN) {
			rdmamsg_ctx_progress(cli->ctx);
			rdmamsg_ctx_progress(srv->ctx);
		}
	} while (ret == -EAGAIN);
	return ret;
}

/* pair -- contexts (counted), listener, connection; cli_attr for the
 * client's endpoint */
static void pair(struct test_side *srv, struct test_side *cli,
		 struct rdmamsg__ops *ops, struct rdmamsg_ep_attr *cli_attr)
{
	char addr[64];

	memset(srv, 0, sizeof(*srv));
	memset(cli, 0, sizeof(*cli));
	srv->cbs = &srv_cbs;
	srv->attr = srv_attr;
	srv->ctx = test_ctx();
	is_int(rdmamsg_ctx_create(NULL, &cli->ctx), 0, "second context");
	counted(srv->ctx, &ops[0]);
	counted(cli->ctx, &ops[1]);
	is_int(test_side_listen(srv, on_req, addr, sizeof(addr)), 0, "listen");
	is_int(rdmamsg_connect(cli->ctx, addr, cli_attr, &cli_cbs, cli,
			       &cli->ep),
	       0, "connect");
	{
		size_t lim = 7;

		ok(rdmamsg_ep_get_pack_limit(cli->ep, &lim) == -ENOTCONN &&
			   lim == 7,
		   "pack limit before the handshake: -ENOTCONN, untouched");
	}
	test_run2(srv, cli, &cli->up, 60000);
	is_int(cli->status, 0, "connected");
	test_run2(srv, cli, &srv->up, 60000);
	ok(srv->ep != NULL, "accepted");
}

/* unpair -- close everything, destroy both contexts */
static void unpair(struct test_side *srv, struct test_side *cli)
{
	ok(test_side_close2(srv, cli, 60000), "everything closed");
	is_int(rdmamsg_ctx_destroy(&cli->ctx), 0, "client context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv->ctx), 0, "server context destroyed");
}

/* inline_direct -- the inline maximum +-1 byte, one message at a time
 * with credits in hand (the direct path, not the backlog's): each
 * arrives once, byte for byte, with its immediate; it went out inline
 * (IBV_SEND_INLINE, its payload gathered from the caller's buffer) when
 * its header and payload fit the QP's inline size, not when they do not */
static void inline_direct(struct test_side *srv, struct test_side *cli,
			  const struct rdmamsg_protocols *pr, uint32_t *seq)
{
	size_t th[3] = {pr->max_inline - 1, pr->max_inline, pr->max_inline + 1};
	unsigned int i, bad = 0, inl_bad = 0;

	cli_qp = cli->ep->ln->qp;
	for (i = 0; i < 3; i++) {
		unsigned int first = nseen;
		const struct seen *x;
		volatile int never = 0;
		long long end = test_now_ms() + 60000;

		/* the burst before may have left the client without a
		 * credit: the server's update brings them */
		while ((cli->ep->credits <= 0 || cli->ep->bl_head) &&
		       test_now_ms() < end)
			test_run2(srv, cli, &never, 5);
		if (cli->ep->credits <= 0 || cli->ep->bl_head) {
			bad++;
			continue;
		}
		watch_len = th[i] + RDMAMSG_HDR;
		nwatch = nwatch_inl = 0;
		if (send_k(cli, srv, th[i], *seq)) {
			bad++;
			continue;
		}
		run_for(srv, cli, &nseen, first + 1);
		x = &seen[first];
		if (nseen != first + 1 || x->imm != *seq || !x->ok ||
		    x->len != th[i] || x->flags != RDMAMSG_RECV_IMM || x->kind)
			bad++;
		/* above the eager size it goes in fragments: not watched */
		if (th[i] <= pr->eager &&
		    (nwatch != 1 || nwatch_inl != (th[i] <= pr->max_inline)))
			inl_bad++;
		(*seq)++;
	}
	watch_len = 0;
	ok(bad == 0,
	   "inline maximum %zu +-1, sent with credits in hand: each arrives "
	   "once, byte for byte, with its immediate (%u wrong)",
	   pr->max_inline, bad);
	ok(inl_bad == 0, "...inline up to %zu bytes, not above (%u wrong)",
	   pr->max_inline, inl_bad);
}

/* small_burst -- the small messages' thresholds +-1 byte (the inline
 * maximum and the packing limit, lim: 0 where the connection does not
 * pack) between small ones, behind 200 small ones sent without letting
 * the server run: the 32 credits go at once, the rest queue, and what
 * queues goes packed.  The server sees each through on_recv, in order,
 * byte for byte, with its immediate; sends are counted */
static void small_burst(struct test_side *srv, struct test_side *cli,
			const struct rdmamsg_protocols *pr, size_t lim,
			uint32_t *seq)
{
	size_t th[6] = {pr->max_inline - 1,
			pr->max_inline,
			pr->max_inline + 1,
			lim - 1,
			lim,
			lim + 1};
	unsigned int first = nseen, n = 0, bad = 0, i;
	uint32_t seq0 = *seq;

	nsend = 0;
	for (i = 0; i < 200; i++)
		n += !send_k(cli, srv, SMALL, (*seq)++);
	for (i = 0; i < 6; i++) {
		n += !send_k(cli, srv, lim ? th[i] : th[i % 3], (*seq)++);
		n += !send_k(cli, srv, SMALL, (*seq)++);
	}
	is_int(n, 212, "212 small messages accepted");
	run_for(srv, cli, &nseen, first + n);
	is_int(nseen - first, n, "all arrived, each once");
	for (i = 0; i < n && first + i < nseen; i++) {
		const struct seen *x = &seen[first + i];
		size_t want = i < 200 || i % 2 ? SMALL
			      : lim	       ? th[(i - 200) / 2]
					       : th[(i - 200) / 2 % 3];

		if (x->imm != seq0 + i || !x->ok || x->len != want ||
		    x->flags != RDMAMSG_RECV_IMM || x->kind)
			bad++;
	}
	ok(bad == 0,
	   "in order, byte for byte, the same flags and length at every "
	   "threshold +-1 (inline %zu, packing %zu; %u wrong)",
	   pr->max_inline, lim, bad);
	if (lim)
		ok(nsend < n / 2,
		   "packed: %u sends (both ways) for %u messages", nsend, n);
	else
		ok(nsend >= n, "not packed: %u sends for %u messages", nsend,
		   n);
}

/* edge -- messages of th - 1, th and th + 1 bytes one at a time: each
 * arrives whole, in order, with its length, in fragments up to th (no
 * READ posted) and by rendezvous above it (one READ) */
static void edge(struct test_side *srv, struct test_side *cli, size_t th,
		 uint32_t *seq)
{
	unsigned int i, bad = 0, wrong = 0;

	for (i = 0; i < 3; i++) {
		size_t len = th - 1 + i;
		unsigned int first = nseen;

		nread = 0;
		if (send_k(cli, srv, len, *seq)) {
			bad++;
			break;
		}
		run_for(srv, cli, &nseen, first + 1);
		if (nseen != first + 1 || seen[first].imm != *seq ||
		    seen[first].len != len || !seen[first].ok)
			bad++;
		if (nread != (len > th)) {
			diag("%zu bytes: %u READs", len, nread);
			wrong++;
		}
		(*seq)++;
	}
	ok(bad == 0, "%zu, %zu and %zu bytes arrived whole, in order (%u bad)",
	   th - 1, th, th + 1, bad);
	ok(wrong == 0, "fragments up to %zu bytes, a READ above (%u wrong)", th,
	   wrong);
}

/* round_trip -- 64 KiB there and back; the counters from before it */
static void round_trip(struct test_side *srv, struct test_side *cli, int window)
{
	unsigned int before = echo_got;

	/* what came before settles first: a window is invalidated after its
	 * transfer's FIN, which may come after its data was delivered */
	run_for(srv, cli, &all_invs, all_binds);
	is_int(all_invs, all_binds, "every window bound so far invalidated");
	nreg = nsend = nread = nbind = ninv = nsinv = 0;
	acked = 0;
	cli_qp = cli->ep->ln->qp;
	srv_qp = srv->ep->ln->qp;
	nposts = srv_bind_at = srv_fin_at = 0;
	fill(pat, 65536, 0xEC40);
	is_int(rdmamsg_send_imm(cli->ep, pat, 65536, 0xEC40, NULL), 0,
	       "64 KiB send");
	run_for(srv, cli, &echo_got, before + 1);
	is_int(echo_got, before + 1, "its echo came back whole");
	run_for(srv, cli, &acked, 1);
	is_int(acked, 1, "on_send once");
	if (window) {
		/* the invalidations follow the FINs */
		run_for(srv, cli, &ninv, 2);
		is_int(nreg, 0, "the round trip registered no memory");
		is_int(nbind, 2, "a window bound for each direction");
		is_int(ninv, 2, "and invalidated after it");
		is_int(nsinv, srv_no_inv ? 0 : 2,
		       srv_no_inv ? "by LOCAL_INV: the server offered no "
				    "SEND_WITH_INV"
				  : "by the FIN, a SEND_WITH_INV each way");
		/* the server echoes inside its receive callback, which runs
		 * before the FIN goes: the client takes the echo's RTS
		 * first */
		if (!srv_no_inv)
			ok(srv_bind_at && srv_fin_at > srv_bind_at,
			   "the server's echo went out ahead of its FIN "
			   "(window bound at post %u, FIN at %u)",
			   srv_bind_at, srv_fin_at);
	} else {
		ok(nreg >= 2,
		   "without windows, a registration per transfer "
		   "(%u)",
		   nreg);
	}
	is_int(nread, 2, "one READ each way: no fragments");
	ok(nsend <= 6, "an RTS and a FIN each way, no fragments (%u sends)",
	   nsend);
}

/* zc_reg -- the client's nocopy region, registered for remote reads */
static void zc_reg(struct test_side *cli)
{
	is_int(rdmamsg_mr_reg(cli->ctx, zc, ZC_LEN, RDMAMSG_ACCESS_REMOTE_READ,
			      &zc_mr),
	       0, "the client registers a region to send from");
}

/* nocopy_burst -- the burst of every threshold +-1 byte again, through
 * rdmamsg_send_nocopy() from the region, and a 64 KiB message from pat
 * (no region): each arrives as rdmamsg_send()'s did; those above the
 * threshold are read in the region */
static void nocopy_burst(struct test_side *srv, struct test_side *cli,
			 uint32_t *seq)
{
	size_t want[NSIZES * 4 + 1];
	unsigned int first = nseen, n = 0, bad = 0, above = 0, i, j;
	uint32_t seq0 = *seq;

	is_int(rdmamsg_send_nocopy(NULL, zc, 1, NULL), -EINVAL,
	       "nocopy on NULL: -EINVAL");
	is_int(rdmamsg_send_nocopy(cli->ep, NULL, 1, NULL), -EINVAL,
	       "nocopy of NULL data: -EINVAL");
	zc_off = 0;
	acked = 0;
	nread = nread_zc = 0;
	nocopy = 1;
	for (i = 0; i < NSIZES; i++) {
		for (j = 0; j < 4; j++) {
			size_t len = j < 3 ? SMALL : sizes[i];

			if (send_k(cli, srv, len, (*seq)++))
				break;
			want[n++] = len;
			above += len > THRESH;
		}
	}
	nocopy = 0;
	is_int(n, NSIZES * 4, "every nocopy message accepted");
	is_int(rdmamsg_mr_dereg(&zc_mr), -EBUSY,
	       "the region cannot be deregistered while it is read");
	/* memory no region holds: copied, the caller's again at return */
	fill(pat, 65536, *seq);
	if (!rdmamsg_send_nocopy_imm(cli->ep, pat, 65536, (*seq)++, NULL))
		want[n++] = 65536;
	memset(pat, 0, 65536);
	run_for(srv, cli, &nseen, first + n);
	is_int(nseen - first, n, "all arrived, each once");
	run_for(srv, cli, &acked, n);
	is_int(acked, n, "on_send for each");
	for (i = 0; i < n && first + i < nseen; i++) {
		const struct seen *x = &seen[first + i];

		if (x->imm != seq0 + i || !x->ok || x->len != want[i] ||
		    x->kind ||
		    x->flags != (RDMAMSG_RECV_IMM |
				 (x->len > MAXMSG ? RDMAMSG_RECV_LARGE : 0))) {
			diag("message %u (%zu bytes): flags %#x, ok %d", i,
			     x->len, x->flags, x->ok);
			bad++;
		}
	}
	ok(bad == 0,
	   "in order, byte for byte, with the same lengths and flags as "
	   "rdmamsg_send()'s (%u wrong)",
	   bad);
	ok(above == 6 && nread_zc == above,
	   "the %u messages above the threshold read in the region (%u)", above,
	   nread_zc);
	is_int(nread, nread_zc + 1,
	       "and one READ more, of the copy of the message from no region");
}

/* arrived_1m -- the n 1 MiB messages from immediate seq0 on reach the
 * server (its seen[] from first) whole, once, in order, and on_send
 * comes for each */
static void arrived_1m(struct test_side *srv, struct test_side *cli,
		       unsigned int first, unsigned int n, uint32_t seq0)
{
	unsigned int bad = 0, i;

	run_for(srv, cli, &nseen, first + n);
	is_int(nseen - first, n, "all arrived, each once");
	run_for(srv, cli, &acked, n);
	is_int(acked, n, "on_send for each");
	for (i = 0; i < n && first + i < nseen; i++)
		if (seen[first + i].imm != seq0 + i || !seen[first + i].ok ||
		    seen[first + i].len != MAXLEN)
			bad++;
	is_int(bad, 0, "in order, byte for byte");
}

/* big_burst -- four 1 MiB messages by rdmamsg_send_nocopy() at once:
 * they arrive whole, once, in order; on the soft fabric (a READ is a copy
 * by the CPU) read one after the other (at most 1 MiB of READs at a time)
 * into the one destination each freed */
static void big_burst(struct test_side *srv, struct test_side *cli,
		      uint32_t *seq)
{
	unsigned int first = nseen, n = 0, i;
	enum rdmamsg_fabric fab = RDMAMSG_FABRIC_VERBS;
	uint32_t seq0 = *seq;

	rdmamsg_ctx_get_fabric(srv->ctx, &fab);
	zc_off = 0;
	acked = 0;
	nread = ndest = 0;
	nocopy = 1;
	for (i = 0; i < 4; i++)
		if (!send_k(cli, srv, MAXLEN, (*seq)++))
			n++;
	nocopy = 0;
	is_int(n, 4, "four 1 MiB nocopy messages accepted");
	arrived_1m(srv, cli, first, n, seq0);
	is_int(nread, 4, "one READ each");
	if (fab == RDMAMSG_FABRIC_SOFT)
		is_int(ndest, 1,
		       "one after the other, into the one buffer freed "
		       "before");
	else
		ok(ndest >= 1 && ndest <= 4,
		   "an HCA's reads overlap: at most four destinations (%u)",
		   ndest);
}

/* big_slabs -- ctx's pool slabs holding a 1 MiB buffer (the smaller
 * classes share slabs of 1 MiB at most) */
static unsigned int big_slabs(struct rdmamsg_ctx *ctx)
{
	const struct rdmamsg__slab *sl;
	unsigned int n = 0;

	for (sl = ctx->pool.slabs; sl; sl = sl->next)
		n += sl->len > MAXLEN;
	return n;
}

/* copy_bound -- 1 MiB messages by rdmamsg_send() while the server does
 * not run: with a bound that holds bound of them (RDMAMSG_COPY_AHEAD=4m:
 * 4; the default 1 MiB: 2, two copies at least) bound are taken, the
 * next gets -EAGAIN and on_writable
 * follows the reads, and the client's pool grows by bound 1 MiB buffers
 * at most; without one (bound 0: RDMAMSG_COPY_AHEAD=0) five of five are
 * taken.  Sixteen (or the bound) in all arrive whole, once, in order */
static void copy_bound(struct test_side *srv, struct test_side *cli,
		       uint32_t *seq, unsigned int bound)
{
	unsigned int big0 = big_slabs(cli->ctx);
	unsigned int first = nseen, n = 0, i;
	unsigned int tries = bound ? bound + 1 : 5;
	uint32_t seq0 = *seq;
	int ret = 0;

	acked = 0;
	writable = 0;
	for (i = 0; i < tries && !ret; i++) {
		fill(pat, MAXLEN, *seq);
		ret = rdmamsg_send_imm(cli->ep, pat, MAXLEN, *seq, NULL);
		if (!ret) {
			n++;
			(*seq)++;
		}
	}
	memset(pat, 0, MAXLEN); /* the copies are the library's */
	if (bound) {
		ok(n == bound && ret == -EAGAIN,
		   "a bound of %u copies: %u of 1 MiB taken while the server "
		   "does not run (%u), the next -EAGAIN (%d)",
		   bound, bound, n, ret);
		run_for(srv, cli, &writable, 1);
		ok(writable >= 1, "on_writable once the server read (%u)",
		   writable);
	} else {
		is_int(n, 5, "no bound: all five 1 MiB copies taken");
	}
	while (n < 16 && !send_k(cli, srv, MAXLEN, *seq)) {
		(*seq)++;
		n++;
	}
	ok(n >= 16, "sixteen taken in all (%u)", n);
	arrived_1m(srv, cli, first, n, seq0);
	if (bound)
		ok(big_slabs(cli->ctx) - big0 <= bound,
		   "the client's pool grew by %u 1 MiB buffers: %u at most",
		   big_slabs(cli->ctx) - big0, bound);
}

/* nocopy_round_trip -- 64 KiB by rdmamsg_send_nocopy() from the region
 * and back; cli_sent deregisters the region */
static void nocopy_round_trip(struct test_side *srv, struct test_side *cli,
			      int window)
{
	unsigned int before = echo_got;

	run_for(srv, cli, &all_invs, all_binds);
	is_int(all_invs, all_binds, "every window bound so far invalidated");
	nreg = nsend = nread = nread_zc = nbind = ninv = ndereg_bad = 0;
	nsinv = 0;
	acked = 0;
	fill(zc, 65536, 0xEC40);
	is_int(rdmamsg_send_nocopy_imm(cli->ep, zc, 65536, 0xEC40, NULL), 0,
	       "64 KiB nocopy send");
	is_int(rdmamsg_mr_dereg(&zc_mr), -EBUSY,
	       "its region cannot be deregistered before on_send");
	dereg_ret = 1;
	dereg_in_send = 1;
	run_for(srv, cli, &echo_got, before + 1);
	is_int(echo_got, before + 1, "its echo came back whole");
	run_for(srv, cli, &acked, 1);
	is_int(acked, 1, "on_send once");
	ok(dereg_ret == 0 && zc_mr == NULL,
	   "the region deregistered inside on_send (%d)", dereg_ret);
	is_int(ndereg_bad, 0,
	       "the provider let it go: no window bound to it any more");
	run_for(srv, cli, &ninv, window ? 2 : 0);
	/* without windows the echo (copied) has a registration */
	is_int(nreg, window ? 0 : 1, "the nocopy send registered no memory");
	is_int(nbind, window ? 2 : 0,
	       window ? "a window bound each way" : "no window");
	is_int(ninv, nbind, "each invalidated");
	is_int(nread, 2, "one READ each way: no fragments");
	is_int(nread_zc, 1, "the request's READ in the caller's region");
	if (window)
		is_int(nsinv, 2, "each by its FIN (SEND_WITH_INV)");
}

/* fin_no_credit -- the server has no credit left (its small messages
 * wait in its backlog, the client not progressing) when it has read the
 * client's 64 KiB message: its FIN goes plain, behind them, and the
 * client invalidates its window with LOCAL_INV; everything arrives */
static void fin_no_credit(struct test_side *srv, struct test_side *cli)
{
	static unsigned char small[SMALL];
	unsigned int nfill = 0, before = nseen, i;
	int ret = 0;

	fill(small, SMALL, 0xF1F1);
	fill(pat, 65536, 0xEC43);
	cli_qp = cli->ep->ln->qp;
	nread = nsinv = cli_linv = fillers = acked = 0;
	while (nfill < 100000 && (ret = rdmamsg_send_imm(srv->ep, small, SMALL,
							 0xF1F1, NULL)) == 0)
		nfill++;
	ok(ret == -EAGAIN && nfill > 0,
	   "the server's credits run out (%u queued, then %d)", nfill, ret);
	is_int(rdmamsg_send_imm(cli->ep, pat, 65536, 0xEC43, NULL), 0,
	       "the client sends 64 KiB");
	/* the server alone: it reads the message, its FIN finds no credit */
	for (i = 0; i < 200000 && nread < 1; i++)
		rdmamsg_ctx_progress(srv->ctx);
	is_int(nread, 1, "the server read it");
	for (i = 0; i < 1000; i++)
		rdmamsg_ctx_progress(srv->ctx);
	run_for(srv, cli, &acked, 1);
	run_for(srv, cli, &fillers, nfill);
	is_int(acked, 1, "on_send once");
	is_int(fillers, nfill, "the server's messages all arrived");
	ok(nseen == before + 1 && seen[before].len == 65536 &&
		   seen[before].imm == 0xEC43 && seen[before].ok,
	   "the 64 KiB message arrived whole, once");
	is_int(nsinv, 0, "no SEND_WITH_INV: the FIN went plain");
	is_int(cli_linv, 1, "the client invalidated its window (LOCAL_INV)");
}

static int stale_status, stale_got;

static void stale_done(struct rdmamsg_ep *ep, int status, uint64_t value,
		       void *op_ctx)
{
	(void)ep;
	(void)value;
	(void)op_ctx;
	stale_status = status;
	stale_got = 1;
}

/* stale_read -- after a round trip's on_send, the server READs through
 * the window the client bound for it (over pool memory, still
 * registered): the window is already invalid, the client's HCA refuses
 * (remote access error).  The connection ends with it. */
static void stale_read(struct test_side *srv, struct test_side *cli)
{
	static unsigned char dst[4096];
	static int never;
	struct rdmamsg_rmr rmr;
	struct rdmamsg_mr *lmr = NULL;
	int i, ret = -EBUSY;

	ok(cli_rkey != 0, "the client bound a window (%#x)", cli_rkey);
	memset(&rmr, 0, sizeof(rmr));
	rmr.addr = cli_addr;
	rmr.len = sizeof(dst);
	rmr.rkey = cli_rkey;
	rmr.access = RDMAMSG_ACCESS_REMOTE_READ;
	is_int(rdmamsg_mr_reg(srv->ctx, dst, sizeof(dst), 0, &lmr), 0,
	       "the server registers a destination");
	is_int(rdmamsg_read(srv->ep, lmr, 0, &rmr, 0, sizeof(dst), stale_done,
			    NULL),
	       0, "a READ through the old window's rkey");
	test_run2(srv, cli, &stale_got, 30000);
	is_int(stale_status, -EACCES,
	       "refused after on_send: remote access error");
	/* the failed READ takes the connection down: its slot is done
	 * (the destination free) once the server's side has flushed */
	test_run2(srv, cli, &srv->disc, 30000);
	for (i = 0; i < 1000 && (ret = rdmamsg_mr_dereg(&lmr)) == -EBUSY; i++)
		test_run2(srv, cli, &never, 1);
	is_int(ret, 0, "destination deregistered");
}

int main(void)
{
	static struct test_side srv, cli;
	static struct rdmamsg__ops ops[2];
	struct rdmamsg_ep_attr *a, *b;
	struct rdmamsg_protocols pr;
	struct rdmamsg_ep *ep = NULL;
	const char *bad_env[] = {"",   "abc",	"32x", "10",
				 "63", "2000G", "-1",  "1099511627777"};
	uint32_t seq = 1;
	uint64_t rid;
	unsigned int i, j, nsent = 0, order_bad = 0, data_bad = 0,
			   flags_bad = 0;

	test_setup("thresh");
	/* whole copies: the counts below are of one window and one READ
	 * per message each way (pieces, from 64 KiB: pieces.c) */
	setenv("RDMAMSG_RNDV_PIECE", "0", 1);
	pat = malloc(MAXLEN);
	zc = malloc(ZC_LEN);
	if (!pat || !zc)
		bail_out("no memory");
	cli_side = &cli;

	/* bad attribute values */
	is_int(rdmamsg_ep_attr_new(&a), 0, "attributes");
	is_int(rdmamsg_ep_attr_set_rndv_threshold(NULL, 4096), -EINVAL,
	       "threshold of NULL attributes: -EINVAL");
	is_int(rdmamsg_ep_attr_set_rndv_threshold(a, 0), -EINVAL,
	       "threshold 0: -EINVAL");
	is_int(rdmamsg_ep_attr_set_rndv_threshold(a,
						  RDMAMSG_RNDV_THRESH_MIN - 1),
	       -EINVAL, "threshold below the minimum: -EINVAL");
	is_int(rdmamsg_ep_attr_set_rndv_threshold(a, ((size_t)1 << 40) + 1),
	       -EINVAL, "threshold above 2^40: -EINVAL");
	is_int(rdmamsg_ep_attr_set_rndv_threshold(a, SIZE_MAX), -EINVAL,
	       "threshold SIZE_MAX: -EINVAL");
	is_int(rdmamsg_ep_attr_set_rndv_threshold(a, RDMAMSG_RNDV_THRESH_MIN),
	       0, "the minimum");
	is_int(rdmamsg_ep_attr_set_rndv_threshold(a, (size_t)1 << 40), 0,
	       "2^40");
	is_int(rdmamsg_ep_get_protocols(NULL, &pr), -EINVAL,
	       "protocols of NULL: -EINVAL");

	/* a bad environment value: connect refuses, nothing is made */
	srv.ctx = test_ctx();
	for (i = 0; i < sizeof(bad_env) / sizeof(bad_env[0]); i++) {
		if (!*bad_env[i])
			continue; /* empty: unset, the default */
		setenv("RDMAMSG_RNDV_THRESH", bad_env[i], 1);
		ep = NULL;
		ok(rdmamsg_connect(srv.ctx, "127.0.0.1:9", NULL, &cli_cbs, &cli,
				   &ep) == -EINVAL &&
			   ep == NULL,
		   "RDMAMSG_RNDV_THRESH=%s: connect -EINVAL, no endpoint",
		   bad_env[i]);
	}
	unsetenv("RDMAMSG_RNDV_THRESH");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "context destroyed");

	/* a good one applies; the attribute wins over it */
	setenv("RDMAMSG_RNDV_THRESH", "48k", 1);
	pair(&srv, &cli, ops, NULL);
	is_int(rdmamsg_ep_get_protocols(cli.ep, &pr), 0, "protocols");
	is_int(pr.rndv_threshold, 49152,
	       "RDMAMSG_RNDV_THRESH=48k applies, to a peer on this host too");
	is_int(pr.peer_local, 1, "the peer is on this host");
	unpair(&srv, &cli);
	rdmamsg_ep_attr_set_rndv_threshold(a, 20000);
	pair(&srv, &cli, ops, a);
	is_int(rdmamsg_ep_get_protocols(cli.ep, &pr), 0, "protocols");
	is_int(pr.rndv_threshold, 20000, "the attribute wins over it");
	unpair(&srv, &cli);
	unsetenv("RDMAMSG_RNDV_THRESH");

	/* the thresholds +-1 byte, in a burst, between small messages */
	b = test_ep_attr(EAGER, MAXMSG);
	is_int(rdmamsg_ep_attr_set_rndv_threshold(b, THRESH), 0,
	       "threshold 32 KiB");
	rdmamsg_ep_attr_set_on_request(b, srv_request);
	srv_attr = b;
	pair(&srv, &cli, ops, b);
	is_int(rdmamsg_ep_get_protocols(cli.ep, &pr), 0, "protocols");
	ok(pr.eager == EAGER && pr.rndv_threshold == THRESH &&
		   pr.max_msg == MAXMSG && pr.max_large >= MAXLEN,
	   "eager %zu, rendezvous above %zu, maximum %zu, large %zu", pr.eager,
	   pr.rndv_threshold, pr.max_msg, pr.max_large);
	diag("inline up to %zu, windows: %d", pr.max_inline, pr.rndv_window);
	for (i = 0; i < NSIZES; i++) {
		for (j = 0; j < 3; j++) {
			if (send_k(&cli, &srv, SMALL, seq++))
				break;
			nsent++;
		}
		if (send_k(&cli, &srv, sizes[i], seq++))
			break;
		nsent++;
	}
	is_int(nsent, NSIZES * 4, "every message accepted");
	/* a rendezvous request between messages; its response too */
	fill(pat, SMALL, seq);
	send_k(&cli, &srv, SMALL, seq++);
	req_seq = seq;
	memcpy(pat, &seq, 4);
	fill(pat + 4, 40000 - 4, seq);
	ok(rdmamsg_request(cli.ep, pat, 40000, 0, on_response, NULL, &rid) == 0,
	   "a 40,000-byte request");
	seq++;
	send_k(&cli, &srv, SMALL, seq++);
	nsent += 3;
	run_for(&srv, &cli, &nseen, nsent);
	is_int(nseen, nsent, "all arrived");
	for (i = 0; i < nseen; i++) {
		if (seen[i].imm != i + 1)
			order_bad++;
		if (!seen[i].ok)
			data_bad++;
		if (seen[i].kind == 0 &&
		    seen[i].flags !=
			    (RDMAMSG_RECV_IMM |
			     (seen[i].len > MAXMSG ? RDMAMSG_RECV_LARGE : 0))) {
			diag("message %u (%zu bytes): flags %#x", i,
			     seen[i].len, seen[i].flags);
			flags_bad++;
		}
	}
	is_int(order_bad, 0, "in the order sent, the request in its place");
	is_int(data_bad, 0, "byte for byte");
	is_int(flags_bad, 0,
	       "the same flags whatever the protocol (large: above the "
	       "maximum message only)");
	ok(kept >= 5 && keep_bad == 0,
	   "messages of every protocol can be kept (%u)", kept);
	for (i = 0; i < nseen; i++)
		if (seen[i].len != (seen[i].kind ? 40000
				    : (i % 4 == 3 && i / 4 < NSIZES)
					    ? sizes[i / 4]
					    : SMALL))
			break;
	is_int(i, nseen, "each with its length");
	run_for(&srv, &cli, &resp_done, 1);
	ok(resp_done == 1 && resp_ok == 1, "the response came back whole");

	/* the small messages' thresholds: inline and packing */
	{
		size_t lim = 0;

		is_int(rdmamsg_ep_get_pack_limit(cli.ep, &lim), 0,
		       "pack limit");
		is_int(rdmamsg_ep_get_pack_limit(cli.ep, NULL), -EINVAL,
		       "pack limit into NULL: -EINVAL");
		is_int(rdmamsg_ep_get_pack_limit(NULL, &lim), -EINVAL,
		       "pack limit of NULL: -EINVAL");
		is_int(lim, RDMAMSG_PACK_MAX,
		       "messages up to RDMAMSG_PACK_MAX go packed");
		small_burst(&srv, &cli, &pr, lim, &seq);
		inline_direct(&srv, &cli, &pr, &seq);
	}

	/* 64 KiB round trips: the second has windows and buffers in hand */
	round_trip(&srv, &cli, pr.rndv_window);
	round_trip(&srv, &cli, pr.rndv_window);
	ok(pr.rndv_window, "softrdma offers type 2 windows");

	/* rdmamsg_send_nocopy: the burst again, then the round trip */
	zc_reg(&cli);
	nocopy_burst(&srv, &cli, &seq);
	big_burst(&srv, &cli, &seq);
	copy_bound(&srv, &cli, &seq, 2);
	nocopy_round_trip(&srv, &cli, pr.rndv_window);
	is_int(srv.bad + cli.bad, 0, "no failure on either side");
	unpair(&srv, &cli);

	/* rdmamsg_send()'s copies not yet read bounded: a bad value is
	 * refused, 4m applies */
	srv.ctx = test_ctx();
	setenv("RDMAMSG_COPY_AHEAD", "4x", 1);
	ep = NULL;
	ok(rdmamsg_connect(srv.ctx, "127.0.0.1:9", NULL, &cli_cbs, &cli, &ep) ==
			   -EINVAL &&
		   ep == NULL,
	   "RDMAMSG_COPY_AHEAD=4x: connect -EINVAL, no endpoint");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "context destroyed");
	setenv("RDMAMSG_COPY_AHEAD", "4m", 1);
	pair(&srv, &cli, ops, b);
	unsetenv("RDMAMSG_COPY_AHEAD");
	copy_bound(&srv, &cli, &seq, 4);
	is_int(srv.bad + cli.bad, 0, "no failure on either side");
	unpair(&srv, &cli);
	/* and "0" lifts it: only the pool's limit */
	setenv("RDMAMSG_COPY_AHEAD", "0", 1);
	pair(&srv, &cli, ops, b);
	unsetenv("RDMAMSG_COPY_AHEAD");
	copy_bound(&srv, &cli, &seq, 0);
	is_int(srv.bad + cli.bad, 0, "no failure on either side");
	unpair(&srv, &cli);

	/* a peer without packing (RDMAMSG_NO_PACK=1 on the server, as a
	 * peer from before it): the client packs nothing, all arrives */
	srv_no_pack = 1;
	pair(&srv, &cli, ops, b);
	srv_no_pack = 0;
	{
		size_t lim = 1;

		is_int(rdmamsg_ep_get_protocols(cli.ep, &pr), 0, "protocols");
		ok(rdmamsg_ep_get_pack_limit(cli.ep, &lim) == 0 && lim == 0,
		   "the server did not offer packing: the client packs "
		   "nothing");
		small_burst(&srv, &cli, &pr, 0, &seq);
	}
	is_int(srv.bad + cli.bad, 0, "no failure on either side");
	unpair(&srv, &cli);

	/* QPs refused above PICKY_INLINE bytes inline (the probe's was
	 * not): each side's is made with the inline size halved until it
	 * fits, and the threshold moves with it */
	picky = 1;
	npicky = 0;
	pair(&srv, &cli, ops, b);
	picky = 0;
	is_int(rdmamsg_ep_get_protocols(cli.ep, &pr), 0, "protocols");
	ok(npicky >= 2 && pr.max_inline > 0 &&
		   pr.max_inline + RDMAMSG_HDR <= PICKY_INLINE,
	   "QPs refused %u times above %u bytes inline: made with %zu "
	   "payload bytes inline",
	   npicky, PICKY_INLINE, pr.max_inline);
	inline_direct(&srv, &cli, &pr, &seq);
	is_int(srv.bad + cli.bad, 0, "no failure on either side");
	unpair(&srv, &cli);

	/* without windows: a registration per transfer, the same bytes */
	setenv("RDMAMSG_NO_MW", "1", 1);
	pair(&srv, &cli, ops, b);
	is_int(rdmamsg_ep_get_protocols(cli.ep, &pr), 0, "protocols");
	is_int(pr.rndv_window, 0, "RDMAMSG_NO_MW=1: no windows");
	round_trip(&srv, &cli, 0);
	zc_reg(&cli);
	nocopy_round_trip(&srv, &cli, 0);
	is_int(srv.bad + cli.bad, 0, "no failure on either side");
	unpair(&srv, &cli);
	unsetenv("RDMAMSG_NO_MW");

	/* the windows end before on_send, whether invalidated by the FIN
	 * (SEND_WITH_INV) or, to a server that does not offer that
	 * (RDMAMSG_NO_SEND_INV=1, as a peer from before it), by LOCAL_INV:
	 * a READ through one after on_send is refused */
	for (srv_no_inv = 0; srv_no_inv < 2; srv_no_inv++) {
		pair(&srv, &cli, ops, b);
		/* the first 64 KiB each way takes its pool memory */
		fill(pat, 65536, 0xEC40);
		acked = 0;
		is_int(rdmamsg_send_imm(cli.ep, pat, 65536, 0xEC40, NULL), 0,
		       "64 KiB send");
		run_for(&srv, &cli, &echo_got, echo_got + 1);
		run_for(&srv, &cli, &acked, 1);
		round_trip(&srv, &cli, 1);
		if (!srv_no_inv)
			fin_no_credit(&srv, &cli);
		is_int(srv.bad + cli.bad, 0, "no failure on either side");
		stale_read(&srv, &cli);
		unpair(&srv, &cli);
	}
	srv_no_inv = 0;

	/* nobody sets a threshold: the connection's default, on both ends */
	srv_attr = NULL;
	pair(&srv, &cli, ops, NULL);
	{
		struct rdmamsg_protocols ps;
		enum rdmamsg_fabric fab = RDMAMSG_FABRIC_VERBS;
		size_t want = RDMAMSG_RNDV_THRESH_DEFAULT;

		rdmamsg_ctx_get_fabric(cli.ctx, &fab);
		if (fab == RDMAMSG_FABRIC_SOFT)
			want = RDMAMSG__RNDV_LOCAL_SHM;
		is_int(rdmamsg_ep_get_protocols(cli.ep, &pr), 0, "protocols");
		is_int(rdmamsg_ep_get_protocols(srv.ep, &ps), 0,
		       "the server's protocols");
		ok(pr.peer_local == 1 && ps.peer_local == 1,
		   "both ends see the peer on this host");
		ok(pr.rndv_threshold == want && ps.rndv_threshold == want,
		   "the same-host default, %zu, on both ends (%zu, %zu)", want,
		   pr.rndv_threshold, ps.rndv_threshold);
		nseen = 0;
		edge(&srv, &cli, pr.rndv_threshold, &seq);
	}
	is_int(srv.bad + cli.bad, 0, "no failure on either side");
	unpair(&srv, &cli);

	rdmamsg_ep_attr_delete(&a);
	rdmamsg_ep_attr_delete(&b);
	free(zc);
	free(pat);
	return done_testing();
}
