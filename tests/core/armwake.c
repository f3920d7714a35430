/* SPDX-License-Identifier: MIT */
/*
 * armwake.c -- no lost wake-up with lazy arming: a context arms its CQs
 * only in rdmamsg_ctx_arm(), just before its caller blocks, so every
 * message must make the fd readable once arm() said 0.  A server process
 * driven only by poll() on its fd echoes; the client makes many round
 * trips, each waited for either in poll() on its fd after arm() returned
 * 0 or by spinning on progress (which leaves the CQs unarmed), switching
 * every few rounds so that each change of mode is crossed many times, with
 * messages of one fragment and of several.  A lost wake-up shows as a
 * poll() that sleeps through its whole (generous) deadline with a reply
 * due: counted as a stall, and the test fails on the first.  On softrdma
 * SOFTRDMA_TEST_NOSWEEP=1 leaves the waking to the direct path alone (the
 * progress thread's timed passes would otherwise hide a lost wake-up).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "../tap.h"
#include "util.h"

#define STALL_MS 30000 /* a wake-up that never comes, not a slow machine */
#define BIG	 20000 /* above the eager size: several fragments */

/* each process (the client, the forked server) has one connection */
static uint64_t stalls;	       /* poll()s that slept through a reply */
static unsigned char buf[BIG]; /* a payload sent or checked */

/* fill -- the payload of round i, len bytes */
static void fill(unsigned char *p, size_t len, uint64_t i)
{
	size_t k;

	for (k = 0; k < len; k++)
		p[k] = (unsigned char)(i * 131 + k);
}

/* round_len -- one fragment or several, in an irregular pattern */
static size_t round_len(uint64_t i)
{
	return i % 7 == 3 ? BIG : 8 + (size_t)(i % 13);
}

static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	struct test_side *s = arg;

	(void)flags;
	if (!s->ep)
		s->ep = ep;
	if (imm != (uint32_t)s->got || len != round_len(s->got)) {
		s->bad++;
	} else {
		fill(buf, len, s->got);
		if (memcmp(buf, data, len))
			s->bad++;
	}
	s->got++;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_disconnect = test_side_on_disconnect,
};

/* wait_fd -- drive ctx from its fd alone until *n reaches want (or the
 * peer left): block only after arm() returned 0, and count a poll() that
 * slept through STALL_MS */
static int wait_fd(struct test_side *s, volatile uint64_t *n, uint64_t want)
{
	struct pollfd p;

	rdmamsg_ctx_get_fd(s->ctx, &p.fd);
	p.events = POLLIN;
	while (*n < want && !s->disc) {
		if (rdmamsg_ctx_arm(s->ctx) == 0 &&
		    poll(&p, 1, STALL_MS) == 0) {
			stalls++;
			return -1;
		}
		rdmamsg_ctx_progress(s->ctx);
	}
	return *n >= want ? 0 : -1;
}

/* wait_busy -- spin on progress (the CQs stay unarmed) */
static int wait_busy(struct test_side *s, volatile uint64_t *n, uint64_t want)
{
	long long end = test_now_ms() + STALL_MS;

	while (*n < want && !s->disc && test_now_ms() < end)
		rdmamsg_ctx_progress(s->ctx);
	return *n >= want ? 0 : -1;
}

/* send_round -- send round i's message, waiting out -EAGAIN */
static int send_round(struct test_side *s, uint64_t i)
{
	size_t len = round_len(i);
	long long end = test_now_ms() + STALL_MS;
	int ret;

	fill(buf, len, i);
	while ((ret = rdmamsg_send_imm(s->ep, buf, len, (uint32_t)i, NULL)) ==
		       -EAGAIN &&
	       test_now_ms() < end)
		rdmamsg_ctx_progress(s->ctx);
	return ret;
}

static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	struct test_side *s = arg;
	struct rdmamsg_ep_attr *a = test_ep_attr(4096, 65536);

	(void)l;
	(void)pdata;
	(void)len;
	if (s->ep || rdmamsg_conn_req_accept(req, a, &cbs, s, &s->ep))
		rdmamsg_conn_req_reject(req, 0, NULL, 0);
	rdmamsg_ep_attr_delete(&a);
}

/* server -- echo every message, driven from the fd alone, until the
 * client disconnects (or none came for STALL_MS) */
static int server(int wfd, void *arg)
{
	static struct test_side s;
	struct rdmamsg_listener *lst;
	uint64_t sent = 0;

	(void)arg;
	if (rdmamsg_ctx_create(NULL, &s.ctx))
		return 10;
	if (test_listen_report(s.ctx, on_req, &s, &lst, wfd))
		return 11;
	for (;;) {
		if (wait_fd(&s, &s.got, sent + 1))
			break;
		if (send_round(&s, sent))
			return 12;
		sent++;
	}
	if (stalls)
		return 13;
	if (s.bad)
		return 14;
	if (!s.disc)
		return 15;
	rdmamsg_ep_close(s.ep, test_side_on_close);
	test_run_until(s.ctx, &s.closed, STALL_MS);
	rdmamsg_listener_close(lst, NULL);
	test_idle(s.ctx, 100);
	if (!s.closed || rdmamsg_ctx_destroy(&s.ctx))
		return 16;
	return 0;
}

int main(void)
{
	static struct test_side c;
	struct rdmamsg_ep_attr *a;
	char addr[64];
	uint64_t i, n, fd_rounds = 0;
	int rfd, fail = 0;
	pid_t pid;

	/* softrdma: no progress-thread pass for CQs whose waiter is woken
	 * directly through its channel, so that a lost wake-up shows as a
	 * stall, not as a 100 ms delay (other fabrics ignore it) */
	setenv("SOFTRDMA_TEST_NOSWEEP", "1", 1);
	test_setup("armwake");
	n = tap_small() ? 400 : 6000;
	pid = test_fork_server(server, NULL, &rfd, addr, sizeof(addr));
	c.ctx = test_ctx();
	a = test_ep_attr(4096, 65536);
	is_int(rdmamsg_connect(c.ctx, addr, a, &cbs, &c, &c.ep), 0, "connect");
	rdmamsg_ep_attr_delete(&a);
	test_run_until(c.ctx, &c.up, STALL_MS);
	is_int(c.status, 0, "connected");
	for (i = 0; i < n && !c.status; i++) {
		/* modes change every 1, 2 or 3 rounds */
		int by_fd = (i / (1 + i % 3)) % 2 == 0;

		if (send_round(&c, i)) {
			fail = 1;
			break;
		}
		if (by_fd) {
			fd_rounds++;
			if (wait_fd(&c, &c.got, i + 1)) {
				fail = 1;
				break;
			}
		} else if (wait_busy(&c, &c.got, i + 1)) {
			fail = 1;
			break;
		}
	}
	printf("# %llu round trips, %llu of them waited for in poll()\n",
	       (unsigned long long)c.got, (unsigned long long)fd_rounds);
	is_int(stalls, 0, "no poll() slept through a reply (lost wake-up)");
	ok(!fail, "every round trip completed");
	is_int(c.got, n, "every echo received");
	is_int(c.bad, 0, "every echo in order and intact");
	ok(fd_rounds > n / 4 && fd_rounds < n - n / 4,
	   "both ways of waiting were used");
	rdmamsg_ep_close(c.ep, test_side_on_close);
	test_run_until(c.ctx, &c.closed, STALL_MS);
	ok(c.closed, "closed");
	is_int(test_wait_child(pid), 0,
	       "server: no stall, every message intact, exits cleanly");
	close(rfd);
	is_int(rdmamsg_ctx_destroy(&c.ctx), 0, "context destroyed");
	return done_testing();
}
