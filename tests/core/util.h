/* SPDX-License-Identifier: MIT */
/* util.h -- helpers shared by the core tests */
#ifndef RDMAMSG_TEST_UTIL_H
#define RDMAMSG_TEST_UTIL_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "rdmamsg.h"

/* test_ep_attr -- endpoint attributes with these eager and message sizes */
static inline struct rdmamsg_ep_attr *test_ep_attr(size_t eager, size_t max)
{
	struct rdmamsg_ep_attr *a;

	if (rdmamsg_ep_attr_new(&a))
		bail_out("rdmamsg_ep_attr_new");
	rdmamsg_ep_attr_set_eager_size(a, eager);
	rdmamsg_ep_attr_set_max_msg_size(a, max);
	return a;
}

/*
 * test_hold_port -- keep a TCP port of 127.0.0.1 that nobody listens on:
 * a socket bound to it, not listening, so that a connect there is refused
 * and no other test running beside this one can listen there; port 0:
 * any free port, else that port (which a listener just left) if it can
 * be had within about a second.  Returns the port (0: none could be held)
 * with the socket in *fd, to close when done.
 */
static inline uint16_t test_hold_port(uint16_t port, int *fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int i;

	for (i = 0; i < 100; i++) {
		*fd = socket(AF_INET, SOCK_STREAM, 0);
		if (*fd < 0)
			return 0;
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sin.sin_port = htons(port);
		if (!bind(*fd, (struct sockaddr *)&sin, sizeof(sin)) &&
		    !getsockname(*fd, (struct sockaddr *)&sin, &len))
			return ntohs(sin.sin_port);
		close(*fd);
		*fd = -1;
		if (!port)
			return 0;
		usleep(10000);
	}
	return 0;
}

/* test_now_ms -- monotonic milliseconds */
static inline long long test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* test_log -- library messages become TAP diagnostics */
static inline void test_log(int level, const char *func, const char *msg,
			    void *arg)
{
	(void)arg;
	printf("# [%d %s] %s\n", level, func, msg);
	fflush(stdout);
}

/* test_setup -- private softrdma namespace, logging to diagnostics */
static inline void test_setup(const char *name)
{
	char prefix[64];
	const char *lvl = getenv("RDMAMSG_TEST_LOG");

	snprintf(prefix, sizeof(prefix), "rmt-%s-%d", name, (int)getpid());
	setenv("SOFTRDMA_SHM_PREFIX", prefix, 1);
	/* no RNR retries: an RNR NAK (a flow-control bug) becomes an error
	 * that fails the test instead of a silent retry */
	setenv("RDMAMSG_TEST_RNR_RETRY", "0", 0);
	rdmamsg_log_set_function(test_log, NULL);
	rdmamsg_log_set_level(lvl ? atoi(lvl) : RDMAMSG_LOG_WARNING);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* test_ctx -- a context in fd mode on softrdma (built with the tests, so
 * failing to get one is a failure, not a reason to skip) */
static inline struct rdmamsg_ctx *test_ctx(void)
{
	struct rdmamsg_ctx *ctx = NULL;
	int ret = rdmamsg_ctx_create(NULL, &ctx);

	if (ret)
		bail_out("no context on this fabric: %s",
			 rdmamsg_strerror(ret));
	return ctx;
}

/* test_run_until -- drive ctx in fd mode until *flag or ms elapse */
static inline int test_run_until(struct rdmamsg_ctx *ctx, volatile int *flag,
				 int ms)
{
	long long end = test_now_ms() + ms;
	struct pollfd pfd;

	rdmamsg_ctx_get_fd(ctx, &pfd.fd);
	pfd.events = POLLIN;
	while (!*flag && test_now_ms() < end) {
		long long left = end - test_now_ms();

		/* no timeout hides a lost wake-up: block until the deadline */
		if (rdmamsg_ctx_arm(ctx) == 0)
			poll(&pfd, 1, left > 0 ? (int)left : 0);
		rdmamsg_ctx_progress(ctx);
	}
	return *flag;
}

/* struct test_side -- one end of a test connection as the callbacks
 * below record it (tests with two contexts, or a forked peer) */
struct test_side {
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	uint64_t got, bad; /* messages received; wrong ones among them */
	int up, status;	   /* on_connect ran, with this status */
	int disc, closed;  /* on_disconnect ran; the close callback ran */
	/* test_side_listen: test_side_on_req accepts into ep with these
	 * callbacks and attributes (NULL: the defaults), the endpoint's
	 * argument this side */
	const struct rdmamsg_ep_cbs *cbs;
	struct rdmamsg_ep_attr *attr;
	struct rdmamsg_listener *lst;
	int lclosed; /* the listener's close callback ran */
};

/* test_side_on_connect -- on_connect for a struct test_side argument */
static inline void test_side_on_connect(struct rdmamsg_ep *ep, int status,
					int reason, const void *pdata,
					size_t len, void *arg)
{
	struct test_side *s = arg;

	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	s->up = 1;
	s->status = status;
}

/* test_side_on_recv_hello -- on_recv for a struct test_side whose peer
 * sends "hello": counted in got, anything else also in bad */
static inline void test_side_on_recv_hello(struct rdmamsg_ep *ep, void *data,
					   size_t len, uint32_t imm,
					   unsigned int flags, void *arg)
{
	struct test_side *s = arg;

	(void)ep;
	(void)imm;
	(void)flags;
	if (len != 5 || memcmp(data, "hello", 5))
		s->bad++;
	s->got++;
}

/* test_side_on_disconnect -- on_disconnect for a struct test_side */
static inline void test_side_on_disconnect(struct rdmamsg_ep *ep, int status,
					   void *arg)
{
	(void)ep;
	(void)status;
	((struct test_side *)arg)->disc = 1;
}

/* test_side_on_close -- close callback for an endpoint whose user
 * argument is a struct test_side */
static inline void test_side_on_close(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	((struct test_side *)arg)->closed = 1;
}

/* test_hello_cbs -- a struct test_side's callbacks, for "hello" messages
 * (unused where a test has its own) */
static const struct rdmamsg_ep_cbs test_hello_cbs __attribute__((unused)) = {
	.on_connect = test_side_on_connect,
	.on_recv = test_side_on_recv_hello,
	.on_disconnect = test_side_on_disconnect,
};

/* test_step2 -- one step of driving two contexts of this process from
 * their fds: both progressed, after a poll() of ms at most once both are
 * armed */
static inline void test_step2(struct test_side *a, struct test_side *b, int ms)
{
	struct pollfd p[2];

	rdmamsg_ctx_get_fd(a->ctx, &p[0].fd);
	rdmamsg_ctx_get_fd(b->ctx, &p[1].fd);
	p[0].events = p[1].events = POLLIN;
	if (rdmamsg_ctx_arm(a->ctx) == 0 && rdmamsg_ctx_arm(b->ctx) == 0)
		poll(p, 2, ms > 0 ? ms : 0);
	rdmamsg_ctx_progress(a->ctx);
	rdmamsg_ctx_progress(b->ctx);
}

/* test_run2 -- test_step2 until *flag or ms elapse */
static inline void test_run2(struct test_side *a, struct test_side *b,
			     volatile int *flag, int ms)
{
	long long end = test_now_ms() + ms;

	while (!*flag && test_now_ms() < end)
		test_step2(a, b, (int)(end - test_now_ms()));
}

/* TEST_RUN2_WHILE -- drive sides a and b (test_step2, in poll()s of 10
 * ms at most, cond checked after each) while cond holds, ms at most */
#define TEST_RUN2_WHILE(a, b, cond, ms)                \
	do {                                           \
		long long end_ = test_now_ms() + (ms); \
                                                       \
		while ((cond) && test_now_ms() < end_) \
			test_step2((a), (b), 10);      \
	} while (0)

/* test_side_on_req -- on_conn_req of a listener whose argument is a
 * struct test_side: accept into s->ep with s->cbs and s->attr, the
 * endpoint's argument s; a failed accept counts in s->bad */
static inline void test_side_on_req(struct rdmamsg_listener *l,
				    struct rdmamsg_conn_req *req,
				    const void *pdata, size_t len, void *arg)
{
	struct test_side *s = arg;

	(void)l;
	(void)pdata;
	(void)len;
	if (rdmamsg_conn_req_accept(req, s->attr, s->cbs, s, &s->ep))
		s->bad++;
}

/* test_side_on_lclose -- close callback of a test_side_listen listener */
static inline void test_side_on_lclose(struct rdmamsg_listener *l, void *arg)
{
	(void)l;
	((struct test_side *)arg)->lclosed = 1;
}

/* test_side_listen -- s->lst: a listener of s->ctx on 127.0.0.1, any
 * port, whose requests on_req gets with s (NULL: test_side_on_req); its
 * address ("127.0.0.1:port") in addr.  rdmamsg_listen's result. */
static inline int test_side_listen(struct test_side *s,
				   void (*on_req)(struct rdmamsg_listener *l,
						  struct rdmamsg_conn_req *req,
						  const void *pdata, size_t len,
						  void *arg),
				   char *addr, size_t len)
{
	uint16_t port = 0;
	int ret;

	s->lclosed = 0;
	ret = rdmamsg_listen(s->ctx, "127.0.0.1:0",
			     on_req ? on_req : test_side_on_req, s, &s->lst);
	if (!ret)
		rdmamsg_listener_get_port(s->lst, &port);
	snprintf(addr, len, "127.0.0.1:%u", port);
	return ret;
}

/* test_side_close2 -- close cli's endpoint (unless closed already),
 * srv's once it saw the disconnect, and srv's listener, driving both
 * sides up to ms for each: 1 once all three are closed */
static inline int test_side_close2(struct test_side *srv, struct test_side *cli,
				   int ms)
{
	if (!cli->closed)
		rdmamsg_ep_close(cli->ep, test_side_on_close);
	test_run2(srv, cli, &srv->disc, ms);
	rdmamsg_ep_close(srv->ep, test_side_on_close);
	rdmamsg_listener_close(srv->lst, test_side_on_lclose);
	test_run2(srv, cli, &cli->closed, ms);
	test_run2(srv, cli, &srv->closed, ms);
	test_run2(srv, cli, &srv->lclosed, ms);
	return cli->closed && srv->closed && srv->lclosed;
}

/* test_catch_up -- drive srv and cli until srv has received sent
 * messages (5 s at most), then 64 progress passes of each more, for the
 * credits (and a window's grant) to come back */
static inline void test_catch_up(struct test_side *srv, struct test_side *cli,
				 uint64_t sent)
{
	int i;

	TEST_RUN2_WHILE(srv, cli, srv->got < sent, 5000);
	for (i = 0; i < 64; i++) {
		rdmamsg_ctx_progress(srv->ctx);
		rdmamsg_ctx_progress(cli->ctx);
	}
}

/* test_idle -- drive ctx for ms with nothing to wait for */
static inline void test_idle(struct rdmamsg_ctx *ctx, int ms)
{
	volatile int never = 0;

	test_run_until(ctx, &never, ms);
}

/* test_srq_closed -- a close callback that counts into *arg */
static inline void test_srq_closed(struct rdmamsg_srq *srq, void *arg)
{
	(void)srq;
	(*(int *)arg)++;
}

/* test_srq_close -- close srq and drive ctx until its close callback ran
 * (from the loop, once its endpoints are freed), up to ms: 0 or what
 * rdmamsg_srq_close said, -ETIMEDOUT when the callback did not come */
static inline int test_srq_close(struct rdmamsg_ctx *ctx,
				 struct rdmamsg_srq *srq, int ms)
{
	int closed = 0;
	int ret = rdmamsg_srq_close(srq, test_srq_closed, &closed);

	if (ret)
		return ret;
	return test_run_until(ctx, &closed, ms) ? 0 : -ETIMEDOUT;
}

/* test_wait_child -- the child's exit status (or 128+signal) */
static inline int test_wait_child(pid_t pid)
{
	int st = 0;

	if (waitpid(pid, &st, 0) < 0)
		return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

#endif /* RDMAMSG_TEST_UTIL_H */

#ifndef RDMAMSG_TEST_UTIL_FORK
#define RDMAMSG_TEST_UTIL_FORK
/* test_fork -- run fn(wfd, arg) in a child; *rfd reads what it reports */
static inline pid_t test_fork(int (*fn)(int wfd, void *arg), void *arg,
			      int *rfd)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		bail_out("pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail_out("fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		_exit(fn(p[1], arg));
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

/* test_read_port -- the port a child wrote (0 on failure) */
static inline unsigned int test_read_port(int rfd)
{
	unsigned short port = 0;

	if (read(rfd, &port, sizeof(port)) != (ssize_t)sizeof(port))
		return 0;
	return port;
}

/* test_write_port -- tell the parent which port the listener got */
static inline void test_write_port(int wfd, unsigned int port)
{
	unsigned short p = (unsigned short)port;

	if (write(wfd, &p, sizeof(p)) != (ssize_t)sizeof(p))
		_exit(90);
}

/* test_listen_report -- a forked server's listener (*lst) of ctx on
 * 127.0.0.1, any port, whose requests on_req gets with arg; its port
 * written to wfd (test_fork_server reads it).  0, else what failed. */
static inline int test_listen_report(
	struct rdmamsg_ctx *ctx,
	void (*on_req)(struct rdmamsg_listener *l, struct rdmamsg_conn_req *req,
		       const void *pdata, size_t len, void *arg),
	void *arg, struct rdmamsg_listener **lst, int wfd)
{
	uint16_t port;
	int ret = rdmamsg_listen(ctx, "127.0.0.1:0", on_req, arg, lst);

	if (!ret)
		ret = rdmamsg_listener_get_port(*lst, &port);
	if (!ret)
		test_write_port(wfd, port);
	return ret;
}

/* test_fork_server -- test_fork a server that writes its port; its
 * address ("127.0.0.1:port") in addr */
static inline pid_t test_fork_server(int (*fn)(int wfd, void *arg), void *arg,
				     int *rfd, char *addr, size_t len)
{
	pid_t pid = test_fork(fn, arg, rfd);

	snprintf(addr, len, "127.0.0.1:%u", test_read_port(*rfd));
	return pid;
}
#endif
