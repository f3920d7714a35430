/* SPDX-License-Identifier: MIT */
/*
 * chain.c -- a message of several fragments goes out as one chain of
 * sends (msg.c pump_chain): one ibv_post_send for up to 8 of its
 * fragments.  Two contexts of this process; the client's provider
 * post_send is counted (calls, SEND work requests, the longest chain).
 * Messages of 1 to 10 fragments and single ones between them, in bursts
 * past the credit window: every message arrives once, in order, byte for
 * byte, every on_send comes once with 0, the server's reply to each
 * (which the client owes credits for) arrives, and the client posted
 * fewer times than it had sends, in chains of 8 at most.  Then the same with
 * the provider refusing chains (ENOMEM at the first WR, or at the second
 * with the first posted, as verbs allows; two of every four chains): what
 * it refused is taken back (the credits its headers returned too) and
 * posted again later, nothing lost, doubled or reordered, and the
 * connection stays up.
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "../core/util.h"
#include "pattern.h"
#include "internal.h"

#define NMSG  200
#define FRAG  8192
#define MAXSZ (10 * FRAG)

/* the first, of 10 fragments, finds a full window: a chain of 8, then 2 */
static const size_t sizes[] = {MAXSZ,	     2 * FRAG, FRAG + 1,    100,
			       3 * FRAG - 1, 5 * FRAG, FRAG,	    8,
			       2 * FRAG + 1, 1,	       4 * FRAG + 7};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static struct test_side srv, cli;
static unsigned char buf[MAXSZ];
static volatile unsigned int recvd, sent, replies;
static unsigned int next, bad_recv, bad_send, send_err, bad_reply, reply_err;
static unsigned char done[NMSG];

/* the client's post_send, counted; refusing chains when refuse is set */
static int (*real_post)(struct ibv_qp *, struct ibv_send_wr *,
			struct ibv_send_wr **);
static struct ibv_qp *cli_qp;
static unsigned int ncalls, nsends, longest, nchains, refuse, nrefused;

static int count_post(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad)
{
	const struct ibv_send_wr *w;
	struct ibv_send_wr first;
	unsigned int n = 0;
	int ret;

	if (qp != cli_qp)
		return real_post(qp, wr, bad);
	for (w = wr; w; w = w->next)
		n += w->opcode == IBV_WR_SEND;
	ncalls++;
	nsends += n;
	if (n > longest)
		longest = n;
	if (n < 2)
		return real_post(qp, wr, bad);
	if (refuse && nchains % 4 == 0) {
		/* refused at the first: nothing posted */
		nchains++;
		nrefused++;
		*bad = wr;
		return ENOMEM;
	}
	if (refuse && nchains++ % 4 == 2) {
		/* the first posted, the rest refused at the second */
		first = *wr;
		first.next = NULL;
		ret = real_post(qp, &first, bad);
		if (ret) {
			*bad = wr;
			return ret;
		}
		nrefused++;
		*bad = wr->next;
		return ENOMEM;
	}
	return real_post(qp, wr, bad);
}

static size_t msg_len(uint32_t seq)
{
	return sizes[seq % NSIZES];
}

/* push -- send until the connection says -EAGAIN */
static void push(void)
{
	int ret;

	while (next < NMSG && !send_err) {
		fill(buf, msg_len(next), next);
		ret = rdmamsg_send(cli.ep, buf, msg_len(next),
				   (void *)(uintptr_t)next);
		if (ret == -EAGAIN)
			return;
		if (ret) {
			send_err = (unsigned int)-ret;
			return;
		}
		next++;
	}
}

static void on_send(struct rdmamsg_ep *ep, int status, void *op, void *arg)
{
	(void)ep;
	(void)arg;
	if (status || (uintptr_t)op >= NMSG || done[(uintptr_t)op]++)
		bad_send++;
	sent++;
}

static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	if (len != msg_len(recvd) || !same(data, len, recvd))
		bad_recv++;
	/* a reply to each: the client owes credits, which its fragments'
	 * headers return */
	if (rdmamsg_send(ep, (const void *)&recvd, sizeof(recvd), NULL))
		reply_err++;
	recvd++;
}

static void on_reply(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	unsigned int seq;

	(void)ep;
	(void)imm;
	(void)flags;
	(void)arg;
	memcpy(&seq, data, len == sizeof(seq) ? sizeof(seq) : 0);
	if (len != sizeof(seq) || seq != replies)
		bad_reply++;
	replies++;
}

static void on_writable(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	push();
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = test_side_on_connect,
	.on_disconnect = test_side_on_disconnect,
	.on_recv = on_recv,
};

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = test_side_on_connect,
	.on_disconnect = test_side_on_disconnect,
	.on_send = on_send,
	.on_recv = on_reply,
	.on_writable = on_writable,
};

/* run -- a connection whose messages up to MAXSZ go in fragments of
 * FRAG; NMSG messages through it (refusing chains part-way when asked) */
static void run(int refusing)
{
	struct rdmamsg_ep_attr *attr = test_ep_attr(FRAG, 1 << 20);
	const char *how = refusing ? "chains refused" : "chains";
	long long end;
	char addr[64];

	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	memset(done, 0, sizeof(done));
	recvd = sent = replies = next = bad_recv = bad_send = send_err = 0;
	bad_reply = reply_err = 0;
	ncalls = nsends = longest = nchains = nrefused = 0;
	refuse = 0;
	if (rdmamsg_ep_attr_set_rndv_threshold(attr, MAXSZ) ||
	    rdmamsg_ep_attr_set_recv_depth(attr, 16))
		bail_out("endpoint attributes");
	srv.ctx = test_ctx();
	cli.ctx = test_ctx();
	srv.cbs = &srv_cbs;
	srv.attr = attr;
	if (test_side_listen(&srv, NULL, addr, sizeof(addr)) ||
	    rdmamsg_connect(cli.ctx, addr, attr, &cli_cbs, &cli, &cli.ep))
		bail_out("listen, connect");
	TEST_RUN2_WHILE(&srv, &cli, !srv.up || !cli.up, 10000);
	ok(srv.up && cli.up && !srv.status && !cli.status, "%s: connected",
	   how);
	cli_qp = cli.ep->ln->qp;
	real_post = cli.ctx->verbs->ops.post_send;
	cli.ctx->verbs->ops.post_send = count_post;
	refuse = refusing;
	end = test_now_ms() + 60000;
	while ((recvd < NMSG || sent < NMSG || replies < NMSG) && !srv.disc &&
	       !cli.disc && !send_err && test_now_ms() < end) {
		push();
		test_run2(&srv, &cli, &(int){0}, 5);
	}
	refuse = 0;
	ok(recvd == NMSG && sent == NMSG,
	   "%s: every message arrived (%u of %d), every on_send came (%u)", how,
	   recvd, NMSG, sent);
	ok(!bad_recv && !bad_send,
	   "%s: each once, in order, intact; each on_send once with 0 "
	   "(%u %u)",
	   how, bad_recv, bad_send);
	ok(replies == NMSG && !bad_reply && !reply_err,
	   "%s: the server's %u replies arrived, in order (%u %u)", how,
	   replies, bad_reply, reply_err);
	ok(!send_err && !srv.disc && !cli.disc,
	   "%s: no send error (%u), still connected", how, send_err);
	ok(ncalls < nsends && longest == 8,
	   "%s: %u posts for %u sends, chains of up to %u", how, ncalls, nsends,
	   longest);
	if (refusing)
		ok(nrefused > 0, "%s: %u chains refused", how, nrefused);
	cli.ctx->verbs->ops.post_send = real_post;
	ok(test_side_close2(&srv, &cli, 10000), "%s: closed", how);
	rdmamsg_ep_attr_delete(&attr);
	is_int(rdmamsg_ctx_destroy(&cli.ctx), 0, "client context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.ctx), 0, "server context destroyed");
}

int main(void)
{
	test_setup("chain");
	run(0);
	run(1);
	return done_testing();
}
