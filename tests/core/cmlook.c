/* SPDX-License-Identifier: MIT */
/*
 * cmlook.c -- a busy-polling context looks at its channels every
 * millisecond, but every RDMAMSG__LOOK_HS_NS while one of its endpoints
 * resolves or connects (ctx->cm_waits, lib/ep.c cm_wait), so that a
 * handshake's CM events, and the first message that waits for the
 * passive side to be up, do not wait for the millisecond.  Two contexts
 * driven by rdmamsg_ctx_progress() alone (no fd, no arm):
 *
 * - a connection: the client counts one endpoint from rdmamsg_connect()
 *   on and its next look is due within RDMAMSG__LOOK_HS_NS after every
 *   pass until it is up; the server counts its accepted endpoint until it
 *   is up; both count none once up, and their next look is then the
 *   millisecond's again; a message goes through;
 * - a connect refused (a port nobody listens on), and one closed at once
 *   before any CM event: each context counts none afterwards (a count
 *   left behind would keep the short looks, a system call every 20 us,
 *   for the context's life).
 * The contexts have no watch (RDMAMSG_NO_WATCH=1): the looks after a
 * handshake checked here are the millisecond's (a watch that is ON looks
 * every RDMAMSG__WATCH_LOOK_NS: lib/watch.c, tests/core/watch).
 */
#include "config.h"

#include <stdint.h>

#include "../tap.h"
#include "util.h"
#include "internal.h"

/* spin -- busy passes of both contexts until *flag, or 10 s; in *shorts
 * the passes of a that counted a waiting endpoint, and in *late those
 * among them whose next look was further than RDMAMSG__LOOK_HS_NS */
static void spin(struct test_side *a, struct test_side *b, volatile int *flag,
		 long *shorts, long *late)
{
	long long end = test_now_ms() + 10000;

	while (!*flag && test_now_ms() < end) {
		rdmamsg_ctx_progress(a->ctx);
		rdmamsg_ctx_progress(b->ctx);
		if (a->ctx->cm_waits) {
			(*shorts)++;
			if (a->ctx->next_epoll >
			    a->ctx->now + RDMAMSG__LOOK_HS_NS)
				(*late)++;
		}
	}
}

/* looked_long -- after a pass that looked at the channels, the next look
 * is further away than a handshake's */
static int looked_long(struct rdmamsg_ctx *ctx)
{
	int i;

	for (i = 0; i < 1000000; i++) {
		rdmamsg_ctx_progress(ctx);
		if (ctx->looked == ctx->ifc.pass)
			return ctx->next_epoll - ctx->now > RDMAMSG__LOOK_HS_NS;
	}
	return 0;
}

static volatile int accepted; /* on_req ran */

/* on_req -- test_side_on_req, counted */
static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	test_side_on_req(l, req, pdata, len, arg);
	accepted = 1;
}

/* sides -- srv listening on sctx (its address in addr), cli on cctx */
static void sides(struct test_side *srv, struct test_side *cli,
		  struct rdmamsg_ctx *sctx, struct rdmamsg_ctx *cctx,
		  char *addr, size_t len)
{
	memset(srv, 0, sizeof(*srv));
	memset(cli, 0, sizeof(*cli));
	srv->ctx = sctx;
	cli->ctx = cctx;
	srv->cbs = &test_hello_cbs;
	accepted = 0;
	if (test_side_listen(srv, on_req, addr, len))
		bail_out("listen");
}

static void test_connection(struct rdmamsg_ctx *sctx, struct rdmamsg_ctx *cctx)
{
	static struct test_side srv, cli;
	long shorts = 0, late = 0, sshorts = 0, slate = 0;
	char addr[64];

	sides(&srv, &cli, sctx, cctx, addr, sizeof(addr));
	is_int(cctx->cm_waits, 0, "client: no endpoint waits before connect");
	if (rdmamsg_connect(cctx, addr, NULL, &test_hello_cbs, &cli, &cli.ep))
		bail_out("connect");
	is_int(cctx->cm_waits, 1, "client: its endpoint waits once connecting");
	ok(cctx->next_epoll <= cctx->now + RDMAMSG__LOOK_HS_NS,
	   "client: its next look comes within a handshake's interval");
	/* the server's endpoint: from the accept to its up */
	spin(&cli, &srv, &accepted, &shorts, &late);
	ok(accepted && srv.ep != NULL && !srv.bad, "server: accepted");
	is_int(sctx->cm_waits, srv.up ? 0 : 1,
	       "server: its accepted endpoint waits until up");
	spin(&cli, &srv, &cli.up, &shorts, &late);
	spin(&srv, &cli, &srv.up, &sshorts, &slate);
	ok(cli.up && cli.status == 0 && srv.up && srv.status == 0,
	   "both up (client %d/%d, server %d/%d)", cli.up, cli.status, srv.up,
	   srv.status);
	ok(shorts > 0 && late == 0,
	   "client: every pass while connecting looks within 20 us "
	   "(%ld passes, %ld later)",
	   shorts, late);
	ok(slate == 0, "server: so does every pass of its (%ld, %ld later)",
	   sshorts, slate);
	is_int(cctx->cm_waits, 0, "client: none waits once up");
	is_int(sctx->cm_waits, 0, "server: none waits once up");
	ok(looked_long(cctx) && looked_long(sctx),
	   "both: the next look after one is the millisecond's again");
	while (rdmamsg_send(cli.ep, "hello", 5, NULL) == -EAGAIN && !cli.disc)
		test_run2(&srv, &cli, &cli.disc, 1);
	TEST_RUN2_WHILE(&srv, &cli, srv.got < 1, 5000);
	ok(srv.got == 1 && !srv.bad, "a message goes through");
	ok(test_side_close2(&srv, &cli, 5000), "closed");
	is_int(cctx->cm_waits + sctx->cm_waits, 0, "none waits after close");
}

static void test_refused(struct rdmamsg_ctx *cctx)
{
	static struct test_side cli;
	char addr[64];
	uint16_t port;
	int fd;

	memset(&cli, 0, sizeof(cli));
	cli.ctx = cctx;
	port = test_hold_port(0, &fd);
	if (!port)
		bail_out("no port to hold");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	if (rdmamsg_connect(cctx, addr, NULL, &test_hello_cbs, &cli, &cli.ep))
		bail_out("connect");
	is_int(cctx->cm_waits, 1, "refused: the endpoint waits");
	test_run_until(cctx, &cli.up, 10000);
	ok(cli.up && cli.status != 0, "refused: on_connect with an error (%d)",
	   cli.status);
	is_int(cctx->cm_waits, 0, "refused: none waits after it");
	rdmamsg_ep_close(cli.ep, test_side_on_close);
	test_run_until(cctx, &cli.closed, 5000);
	is_int(cctx->cm_waits, 0, "refused: none after its close");
	close(fd);
}

static void test_closed_at_once(struct rdmamsg_ctx *sctx,
				struct rdmamsg_ctx *cctx)
{
	static struct test_side srv, cli;
	char addr[64];

	sides(&srv, &cli, sctx, cctx, addr, sizeof(addr));
	if (rdmamsg_connect(cctx, addr, NULL, &test_hello_cbs, &cli, &cli.ep))
		bail_out("connect");
	rdmamsg_ep_close(cli.ep, test_side_on_close);
	test_run2(&srv, &cli, &cli.closed, 10000);
	ok(cli.closed, "closed before any CM event: its close callback");
	is_int(cctx->cm_waits, 0, "closed at once: none waits");
	if (srv.ep) {
		test_run2(&srv, &cli, &srv.disc, 5000);
		rdmamsg_ep_close(srv.ep, test_side_on_close);
		test_run2(&srv, &cli, &srv.closed, 5000);
	}
	rdmamsg_listener_close(srv.lst, test_side_on_lclose);
	test_run2(&srv, &cli, &srv.lclosed, 5000);
	is_int(sctx->cm_waits, 0, "closed at once: none on the server either");
}

int main(void)
{
	struct rdmamsg_ctx *sctx, *cctx;

	test_setup("cmlook");
	setenv("RDMAMSG_NO_WATCH", "1", 1);
	sctx = test_ctx();
	cctx = test_ctx();
	test_connection(sctx, cctx);
	test_refused(cctx);
	test_closed_at_once(sctx, cctx);
	is_int(rdmamsg_ctx_destroy(&cctx), 0, "client context destroyed");
	is_int(rdmamsg_ctx_destroy(&sctx), 0, "server context destroyed");
	return done_testing();
}
