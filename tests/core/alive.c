/* SPDX-License-Identifier: MIT */
/*
 * alive.c -- a hung target of one-sided work is still found dead.  The
 * client writes the server's exported region without pause; the server
 * (a child) is then stopped (SIGSTOP): its connection stays open, and on
 * this host its memory still takes the writes and answers reads of its
 * clock (lib/ep.c), which stands still.  The client's completed writes
 * count as signs of life only while the server's clock moved at the last
 * read, so the client must get on_disconnect (-ETIMEDOUT) within its
 * peer timeout and a bounded slack, with every write completed once.
 * A live, idle server before that must not be declared dead.
 */
#include "config.h"

#include <signal.h>

#include "../tap.h"
#include "util.h"

#define PEER_MS 600
#define REGION	(1 << 20)
#define CHUNK	(64 << 10)
#define MAXOPS	2000000

/* ---- server (child) ------------------------------------------------- */

struct srv {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_mr *mr;
	int done, failures;
};

static void srv_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct srv *s = arg;
	uint8_t ex[RDMAMSG_MR_EXPORT_SIZE];

	(void)reason;
	(void)pdata;
	(void)len;
	if (status || rdmamsg_mr_export(s->mr, ex, sizeof(ex)) ||
	    rdmamsg_send(ep, ex, sizeof(ex), NULL))
		s->failures++;
}

static void srv_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct srv *s = arg;

	(void)status;
	rdmamsg_ep_close(ep, NULL);
	s->done = 1;
}

static const struct rdmamsg_ep_cbs srv_cbs = {
	.on_connect = srv_connect,
	.on_disconnect = srv_disc,
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
	rdmamsg_ep_attr_set_peer_timeout(a, PEER_MS);
	if (rdmamsg_conn_req_accept(req, a, &srv_cbs, s, &ep))
		s->failures++;
	rdmamsg_ep_attr_delete(&a);
}

static int srv_main(int wfd, void *arg)
{
	struct rdmamsg_listener *lst;
	struct srv s;
	void *region;

	(void)arg;
	memset(&s, 0, sizeof(s));
	region = calloc(1, REGION);
	if (!region || rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	if (rdmamsg_mr_reg(s.ctx, region, REGION, RDMAMSG_ACCESS_REMOTE_WRITE,
			   &s.mr))
		return 11;
	if (test_listen_report(s.ctx, srv_req, &s, &lst, wfd))
		return 12;
	test_run_until(s.ctx, &s.done, 60000);
	return s.failures ? 13 : 0; /* killed before, normally */
}

/* ---- client --------------------------------------------------------- */

struct cli {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	struct rdmamsg_rmr *rmr;
	uint64_t posted, ok, failed, dup;
	unsigned char *seen;
	int connected, status, disc, disc_status, closed;
};

static void cli_connect(struct rdmamsg_ep *ep, int status, int reason,
			const void *pdata, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	c->connected = 1;
	c->status = status;
}

static void cli_recv(struct rdmamsg_ep *ep, void *data, size_t len,
		     uint32_t imm, unsigned int flags, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (!c->rmr && rdmamsg_rmr_import(data, len, &c->rmr))
		c->rmr = NULL;
}

static void cli_disc(struct rdmamsg_ep *ep, int status, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	c->disc = 1;
	c->disc_status = status;
}

static void cli_close_cb(struct rdmamsg_ep *ep, void *arg)
{
	struct cli *c = arg;

	(void)ep;
	c->closed = 1;
}

static struct cli *the_cli;

static void cli_wrote(struct rdmamsg_ep *ep, int status, uint64_t value,
		      void *op_ctx)
{
	struct cli *c = the_cli;
	uintptr_t i = (uintptr_t)op_ctx;

	(void)ep;
	(void)value;
	if (c->seen[i]++)
		c->dup++;
	if (status)
		c->failed++;
	else
		c->ok++;
}

static const struct rdmamsg_ep_cbs cli_cbs = {
	.on_connect = cli_connect,
	.on_recv = cli_recv,
	.on_disconnect = cli_disc,
};

/* fill -- post writes until the send queue is full */
static void fill(struct cli *c, struct rdmamsg_mr *lmr)
{
	size_t off;

	while (!c->disc && c->posted < MAXOPS) {
		off = (size_t)(c->posted % (REGION / CHUNK)) * CHUNK;
		if (rdmamsg_write(c->ep, lmr, off, c->rmr, off, CHUNK,
				  cli_wrote, (void *)(uintptr_t)c->posted))
			break;
		c->posted++;
	}
}

int main(void)
{
	struct rdmamsg_ep_attr *a;
	struct rdmamsg_mr *lmr;
	struct cli c;
	char addr[64];
	long long t0, t_stop, t_disc;
	void *buf;
	int rfd, slack;
	pid_t pid;

	test_setup("alive");
	/* detection comes within about a read of the clock and a tick
	 * after the timeout on an idle machine; a loaded one (valgrind,
	 * parallel tests) may hold either loop back for seconds */
	slack = 10000;
	memset(&c, 0, sizeof(c));
	the_cli = &c;
	c.ctx = test_ctx();
	c.seen = calloc(MAXOPS, 1);
	buf = calloc(1, REGION);
	if (!c.seen || !buf || rdmamsg_mr_reg(c.ctx, buf, REGION, 0, &lmr))
		bail_out("no memory");
	pid = test_fork_server(srv_main, NULL, &rfd, addr, sizeof(addr));
	rdmamsg_ep_attr_new(&a);
	rdmamsg_ep_attr_set_peer_timeout(a, PEER_MS);
	is_int(rdmamsg_connect(c.ctx, addr, a, &cli_cbs, &c, &c.ep), 0,
	       "connect");
	rdmamsg_ep_attr_delete(&a);
	test_run_until(c.ctx, &c.connected, 60000);
	is_int(c.status, 0, "connected");
	t0 = test_now_ms();
	while (!c.rmr && test_now_ms() - t0 < 60000)
		test_idle(c.ctx, 10);
	ok(c.rmr != NULL, "the server's region imported");

	/* idle for three peer timeouts: the live server is kept */
	test_idle(c.ctx, 3 * PEER_MS);
	ok(!c.disc, "an idle live server is kept");

	/* writes without pause; the server stops mid-stream */
	t0 = test_now_ms();
	t_stop = 0;
	while (!c.disc && test_now_ms() - t0 < 60000) {
		if (!t_stop && test_now_ms() - t0 > 300) {
			kill(pid, SIGSTOP);
			t_stop = test_now_ms();
		}
		fill(&c, lmr);
		test_idle(c.ctx, 1);
	}
	t_disc = test_now_ms();
	ok(c.disc, "on_disconnect for the stopped server");
	is_int(c.disc_status, -ETIMEDOUT, "status -ETIMEDOUT");
	ok(t_stop && t_disc - t_stop <= PEER_MS + slack,
	   "within the %d ms peer timeout (+%d ms): %lld ms", PEER_MS, slack,
	   t_disc - t_stop);
	ok(c.ok > 0, "writes completed before (%llu)",
	   (unsigned long long)c.ok);
	is_int(rdmamsg_ep_close(c.ep, cli_close_cb), 0, "close");
	test_run_until(c.ctx, &c.closed, 60000);
	ok(c.closed, "closed without the server's help");
	ok(c.ok + c.failed == c.posted,
	   "every write completed (%llu ok, %llu failed of %llu)",
	   (unsigned long long)c.ok, (unsigned long long)c.failed,
	   (unsigned long long)c.posted);
	is_int(c.dup, 0, "...exactly once");
	kill(pid, SIGKILL);
	test_wait_child(pid);
	close(rfd);
	rdmamsg_rmr_free(&c.rmr);
	rdmamsg_mr_dereg(&lmr);
	is_int(rdmamsg_ctx_destroy(&c.ctx), 0, "context destroyed");
	free(buf);
	free(c.seen);
	return done_testing();
}
