/* SPDX-License-Identifier: MIT */
/*
 * apm.c -- automatic path migration of RC endpoints (rdmamsg_ep_attr_set_apm)
 * on softrdma's InfiniBand mode (SOFTRDMA_LINK=ib: a device with two
 * ports, whose links the test hook softrdma_port_set_state pulls and puts
 * back): two contexts of one process, a numbered stream of messages from
 * one to the other, the primary port's link taken down mid-stream (both
 * ends migrate to port 2, nothing lost or repeated), then port 2's (back
 * to port 1), then both (the migration fails and is reported); in the
 * RoCE mode (a child process) no alternate is loaded and nothing breaks.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdint.h>

#include "../tap.h"
#include "util.h"

struct ibv_context;
struct ibv_device;

struct side {
	struct test_side t;
	int migrated, mig_failed; /* path events seen */
	unsigned int port;	  /* the port the last one named */
	int bad_event;		  /* an event APM should not cause */
};

static struct side srv, cli;
static long long cut_ms, mig_ms; /* the first cut, and its migration */

/* requests in flight across the first cut: each answered once, intact */
#define MAX_REQS 1000
static uint8_t answered[MAX_REQS];
static unsigned int nreq, answers, bad_answers;
static int (*port_set)(struct ibv_context *ctx, uint8_t port, int up);
static struct ibv_context *hook_ctx;
static struct ibv_device **hook_list;
static void (*free_list)(struct ibv_device **list);
static int (*close_dev)(struct ibv_context *ctx);

/* on_recv_cb -- in-order sequence numbers in the immediate */
static void on_recv_cb(struct rdmamsg_ep *ep, void *data, size_t len,
		       uint32_t imm, unsigned int flags, void *arg)
{
	struct side *s = arg;
	uint64_t v;

	(void)ep;
	(void)flags;
	if (len != 8)
		s->t.bad++;
	memcpy(&v, data, 8);
	if (v != s->t.got || imm != (uint32_t)s->t.got)
		s->t.bad++;
	s->t.got++;
}

/* on_path -- record the APM events */
static void on_path(struct rdmamsg_ep *ep, enum rdmamsg_path_event event,
		    unsigned int path, int status, void *arg)
{
	struct side *s = arg;

	(void)ep;
	printf("# %s: path event %d, port %u, status %d\n",
	       s == &cli ? "client" : "server", (int)event, path, status);
	if (event == RDMAMSG_PATH_MIGRATED && status == 0) {
		if (!s->migrated && s == &cli)
			mig_ms = test_now_ms();
		s->migrated++;
		s->port = path;
	} else if (event == RDMAMSG_PATH_MIG_FAILED && status == -ENETDOWN) {
		s->mig_failed++;
		s->port = path;
	} else {
		s->bad_event++;
	}
}

/* on_request -- the server echoes the request's 8 bytes */
static void on_request(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
		       void *data, size_t len, void *arg)
{
	(void)ep;
	(void)arg;
	if (rdmamsg_respond(req, data, len))
		rdmamsg_req_drop(req); /* the client sees it missing */
}

/* on_response -- one answer of request i */
static void on_response(struct rdmamsg_ep *ep, int status, void *data,
			size_t len, void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	uint64_t v = ~0ull;

	(void)ep;
	if (len == 8)
		memcpy(&v, data, 8);
	if (status || i >= MAX_REQS || v != i || answered[i]++)
		bad_answers++;
	answers++;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = test_side_on_connect,
	.on_recv = on_recv_cb,
	.on_disconnect = test_side_on_disconnect,
};

/* apm_attr -- APM on, the path callback, keep-alives rare: nothing is in
 * flight while both links are down, so that the connection outlives it */
static struct rdmamsg_ep_attr *apm_attr(int apm)
{
	struct rdmamsg_ep_attr *a = test_ep_attr(8192, 1 << 20);

	if (rdmamsg_ep_attr_set_apm(a,
				    apm ? RDMAMSG_APM_AUTO : RDMAMSG_APM_OFF) ||
	    rdmamsg_ep_attr_set_on_request(a, on_request) ||
	    rdmamsg_ep_attr_set_path_cb(a, on_path) ||
	    rdmamsg_ep_attr_set_peer_timeout(a, 0) ||
	    rdmamsg_ep_attr_set_connect_timeout(a, 60000))
		bail_out("attributes");
	return a;
}

/* on_req -- accept with APM on (arg: &srv.t, which is &srv) */
static void on_req(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		   const void *pdata, size_t len, void *arg)
{
	struct rdmamsg_ep_attr *a = apm_attr(1);

	(void)l;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, a, &cbs, arg, &srv.t.ep))
		srv.t.status = -1;
	rdmamsg_ep_attr_delete(&a);
}

/* run -- drive both contexts until *flag (30 s at most) */
static void run(volatile int *flag)
{
	test_run2(&srv.t, &cli.t, flag, 30000);
}

/* close_all -- close both endpoints and the listener: 1 once all are */
static int close_all(void)
{
	return test_side_close2(&srv.t, &cli.t, 30000);
}

/* send_some -- n more numbered messages from the client; the ports named
 * in down[] (0-terminated) lose their link once `at` of them are out */
static uint64_t next_seq;
static void send_some(uint64_t n, uint64_t at, const uint8_t *down)
{
	uint64_t end = next_seq + n, cut = next_seq + at;
	int ret;

	while (next_seq < end) {
		if (next_seq == cut && down) {
			if (!cut_ms)
				cut_ms = test_now_ms();
			for (; *down; down++)
				if (port_set(hook_ctx, *down, 0))
					bail_out("port %u down", *down);
			down = NULL;
		}
		ret = rdmamsg_send_imm(cli.t.ep, &next_seq, 8,
				       (uint32_t)next_seq, NULL);
		if (ret == -EAGAIN) {
			rdmamsg_ctx_progress(srv.t.ctx);
			rdmamsg_ctx_progress(cli.t.ctx);
			continue;
		}
		if (ret)
			bail_out("send %llu: %s", (unsigned long long)next_seq,
				 rdmamsg_strerror(ret));
		next_seq++;
	}
}

/* drain -- until the server has everything sent (30 s at most) */
static void drain(void)
{
	TEST_RUN2_WHILE(&srv.t, &cli.t, srv.t.got < next_seq, 30000);
}

/* wait_both -- until *a and *b reach want (30 s at most) */
static void wait_both(const int *a, const int *b, int want)
{
	TEST_RUN2_WHILE(&srv.t, &cli.t, *a < want || *b < want, 30000);
}

/* hook -- softrdma's cable puller, from the library the context loaded */
static void hook(void)
{
	struct ibv_device **(*get_list)(int *n);
	struct ibv_context *(*open_dev)(struct ibv_device * dev);
	const char *path = getenv("RDMAMSG_SOFTRDMA_PATH");
	void *dl = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;

	if (!dl)
		bail_out("softrdma is not loaded from %s", path ? path : "?");
	*(void **)&port_set = dlsym(dl, "softrdma_port_set_state");
	*(void **)&get_list = dlsym(dl, "ibv_get_device_list");
	*(void **)&open_dev = dlsym(dl, "ibv_open_device");
	*(void **)&free_list = dlsym(dl, "ibv_free_device_list");
	*(void **)&close_dev = dlsym(dl, "ibv_close_device");
	if (!port_set || !get_list || !open_dev || !free_list || !close_dev)
		bail_out("softrdma lacks its test hook");
	hook_list = get_list(NULL);
	hook_ctx = hook_list && hook_list[0] ? open_dev(hook_list[0]) : NULL;
	if (!hook_ctx)
		bail_out("no softrdma device to pull cables on");
	dlclose(dl); /* the library's own reference keeps it loaded */
}

/* unhook -- close what hook() opened */
static void unhook(void)
{
	close_dev(hook_ctx);
	free_list(hook_list);
}

/* roce_child -- RoCE mode: APM offered by nobody, nothing breaks */
static int roce_child(int wfd, void *arg)
{
	struct rdmamsg_path_stats ps;
	struct rdmamsg_ep_attr *a;
	char addr[64];
	int ok = 0, srq_closed = 0;

	(void)arg;
	unsetenv("SOFTRDMA_LINK");
	srv.t.ctx = test_ctx();
	if (rdmamsg_ctx_create(NULL, &cli.t.ctx) ||
	    test_side_listen(&srv.t, on_req, addr, sizeof(addr)))
		return 1;
	a = apm_attr(1);
	if (rdmamsg_connect(cli.t.ctx, addr, a, &cbs, &cli, &cli.t.ep))
		return 2;
	rdmamsg_ep_attr_delete(&a);
	run(&cli.t.up);
	if (cli.t.status)
		return 3;
	send_some(100, 0, NULL);
	drain();
	if (!rdmamsg_ep_get_path_stats(cli.t.ep, &ps) && ps.apm == 0 &&
	    srv.t.got == 100 && !srv.t.bad)
		ok = 1;
	/* a DC endpoint has no QP to migrate: APM with DC is refused, the
	 * same attribute without APM is taken (to a port nobody listens on) */
	{
		struct rdmamsg_srq_attr sa = {.max_bufs = 16, .buf_size = 8192};
		struct rdmamsg_srq *srq = NULL;
		struct rdmamsg_ep *dep = NULL;
		int hfd = -1;
		uint16_t dead = test_hold_port(0, &hfd);

		a = apm_attr(1);
		snprintf(addr, sizeof(addr), "127.0.0.1:%u", dead);
		if (!dead || rdmamsg_srq_create(cli.t.ctx, &sa, &srq) ||
		    rdmamsg_ep_attr_set_srq(a, srq) ||
		    rdmamsg_ep_attr_set_transport(a, RDMAMSG_TRANSPORT_DC) ||
		    rdmamsg_connect(cli.t.ctx, addr, a, &cbs, &cli, &dep) !=
			    -EINVAL ||
		    dep)
			ok = 0;
		if (rdmamsg_ep_attr_set_apm(a, RDMAMSG_APM_OFF) ||
		    rdmamsg_connect(cli.t.ctx, addr, a, &cbs, &cli, &dep) ||
		    !dep)
			ok = 0;
		if (dep)
			rdmamsg_ep_close(dep, NULL);
		rdmamsg_ep_attr_delete(&a);
		if (srq)
			rdmamsg_srq_close(srq, test_srq_closed, &srq_closed);
		else
			srq_closed = 1;
		if (hfd >= 0)
			close(hfd);
	}
	if (write(wfd, &ok, sizeof(ok)) != (ssize_t)sizeof(ok))
		return 4;
	/* the SRQ's close callback comes once dep is freed */
	if (!close_all() || !test_run_until(cli.t.ctx, &srq_closed, 30000) ||
	    rdmamsg_ctx_destroy(&cli.t.ctx) || rdmamsg_ctx_destroy(&srv.t.ctx))
		return 5;
	return 0;
}

/* bad_input -- the attribute's checks */
static void bad_input(void)
{
	struct rdmamsg_ep_attr *a = test_ep_attr(8192, 1 << 20);

	is_int(rdmamsg_ep_attr_set_apm(NULL, RDMAMSG_APM_AUTO), -EINVAL,
	       "set_apm(NULL) is -EINVAL");
	is_int(rdmamsg_ep_attr_set_apm(a, (enum rdmamsg_apm)2), -EINVAL,
	       "an unknown APM mode is -EINVAL");
	is_int(rdmamsg_ep_attr_set_apm(a, (enum rdmamsg_apm) - 1), -EINVAL,
	       "a negative APM mode is -EINVAL");
	rdmamsg_ep_attr_delete(&a);
}

int main(void)
{
	struct rdmamsg_path_stats cs, ss;
	struct rdmamsg_ep_attr *a;
	char addr[64];
	int rfd, rok = 0, status;
	pid_t pid;
	/* RDMAMSG_TEST_APM_MESSAGES: a longer stream per cut (1000000) */
	const char *nm = getenv("RDMAMSG_TEST_APM_MESSAGES");
	uint64_t n = nm ? strtoull(nm, NULL, 10) : tap_small() ? 300 : 3000;

	test_setup("apm");
	bad_input();

	/* RoCE first, in a child: the mode is read once per process */
	pid = test_fork(roce_child, NULL, &rfd);
	if (read(rfd, &rok, sizeof(rok)) != (ssize_t)sizeof(rok))
		rok = 0;
	close(rfd);
	waitpid(pid, &status, 0);
	ok(rok && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "RoCE mode: APM asked for, no alternate loaded, 100 messages "
	   "delivered; APM with DC is -EINVAL (child status %d)",
	   status);

	setenv("SOFTRDMA_LINK", "ib", 1);
	srv.t.ctx = test_ctx();
	is_int(rdmamsg_ctx_create(NULL, &cli.t.ctx), 0, "second context");
	hook();
	is_int(test_side_listen(&srv.t, on_req, addr, sizeof(addr)), 0,
	       "listen");
	a = apm_attr(1);
	is_int(rdmamsg_connect(cli.t.ctx, addr, a, &cbs, &cli, &cli.t.ep), 0,
	       "connect with APM on");
	rdmamsg_ep_attr_delete(&a);
	run(&cli.t.up);
	is_int(cli.t.status, 0, "connected");
	run(&srv.t.up);
	ok(srv.t.ep && srv.t.status == 0, "accepted");
	rdmamsg_ep_get_path_stats(cli.t.ep, &cs);
	rdmamsg_ep_get_path_stats(srv.t.ep, &ss);
	ok(cs.apm == 1 && ss.apm == 1, "both sides loaded an alternate path");

	/* requests in flight, then port 1 (the primary) loses its link
	 * mid-stream */
	for (nreq = 0; nreq < (tap_small() ? 100u : MAX_REQS);) {
		uint64_t id, v = nreq;
		int ret = rdmamsg_request(cli.t.ep, &v, 8, 0, on_response,
					  (void *)(uintptr_t)nreq, &id);

		if (ret == -EAGAIN) {
			rdmamsg_ctx_progress(srv.t.ctx);
			rdmamsg_ctx_progress(cli.t.ctx);
			continue;
		}
		if (ret)
			bail_out("request %u: %s", nreq, rdmamsg_strerror(ret));
		nreq++;
	}
	send_some(n, n / 3, (const uint8_t[]){1, 0});
	wait_both(&cli.migrated, &srv.migrated, 1);
	drain();
	TEST_RUN2_WHILE(&srv.t, &cli.t, answers < nreq, 30000);
	ok(answers == nreq && !bad_answers,
	   "%u requests in flight across the cut: each answered once, "
	   "intact (%u answers, %u bad)",
	   nreq, answers, bad_answers);
	if (mig_ms)
		printf("# cut to the client's PATH_MIGRATED: %lld ms\n",
		       mig_ms - cut_ms);
	ok(srv.t.got == next_seq, "all %llu messages arrived",
	   (unsigned long long)next_seq);
	is_int(srv.t.bad, 0, "in order, none twice");
	ok(cli.migrated == 1 && srv.migrated == 1 && cli.port == 2 &&
		   srv.port == 2,
	   "both sides migrated once, to port 2 (client %d, server %d)",
	   cli.migrated, srv.migrated);
	rdmamsg_ep_get_path_stats(cli.t.ep, &cs);
	rdmamsg_ep_get_path_stats(srv.t.ep, &ss);
	ok(cs.migrations == 1 && ss.migrations == 1 && cs.apm && ss.apm,
	   "counted, and the old primary loaded as the alternate");

	/* port 1 back; port 2 (now the primary) loses its link */
	is_int(port_set(hook_ctx, 1, 1), 0, "port 1 back up");
	{
		/* re-armed once port 1 is up again: some traffic first, so
		 * that both QPs have been visited */
		volatile int never = 0;

		send_some(100, 0, NULL);
		drain();
		test_run2(&srv.t, &cli.t, &never, 300);
	}
	send_some(n, n / 2, (const uint8_t[]){2, 0});
	wait_both(&cli.migrated, &srv.migrated, 2);
	drain();
	ok(srv.t.got == next_seq, "all %llu messages arrived",
	   (unsigned long long)next_seq);
	is_int(srv.t.bad, 0, "in order, none twice");
	ok(cli.migrated == 2 && srv.migrated == 2 && cli.port == 1 &&
		   srv.port == 1,
	   "both sides migrated back to port 1 (client %d, server %d)",
	   cli.migrated, srv.migrated);

	/* port 2 back (armed again once seen), then both links down at
	 * once: the migration fails, and says so */
	is_int(port_set(hook_ctx, 2, 1), 0, "port 2 back up");
	{
		volatile int never = 0;

		send_some(100, 0, NULL);
		drain();
		test_run2(&srv.t, &cli.t, &never, 300);
	}
	is_int(port_set(hook_ctx, 2, 0), 0, "port 2 down");
	is_int(port_set(hook_ctx, 1, 0), 0, "port 1 down too");
	wait_both(&cli.mig_failed, &srv.mig_failed, 1);
	port_set(hook_ctx, 1, 1);
	port_set(hook_ctx, 2, 1);
	ok(cli.mig_failed == 1 && srv.mig_failed == 1,
	   "RDMAMSG_PATH_MIG_FAILED on both sides");
	rdmamsg_ep_get_path_stats(cli.t.ep, &cs);
	ok(cs.mig_fails == 1 && cs.migrations == 2, "counted");
	ok(!cli.bad_event && !srv.bad_event, "no other path event");

	/* the links are back: the connection still carries messages */
	send_some(100, 0, NULL);
	drain();
	ok(srv.t.got == next_seq, "all %llu messages arrived after",
	   (unsigned long long)next_seq);
	is_int(srv.t.bad, 0, "in order, none twice");

	ok(close_all(), "everything closed");
	unhook();
	is_int(rdmamsg_ctx_destroy(&cli.t.ctx), 0, "second context destroyed");
	is_int(rdmamsg_ctx_destroy(&srv.t.ctx), 0, "first context destroyed");
	return done_testing();
}
