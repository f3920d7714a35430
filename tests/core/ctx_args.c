/* SPDX-License-Identifier: MIT */
/* ctx_args.c -- contexts, attributes, caps, buffers: bad inputs and basics */
#include "config.h"

#include <ev.h>
#include <pthread.h>

#include "../tap.h"
#include "util.h"

static int wakeups;

/* on_wakeup -- counts wake-up callbacks */
static void on_wakeup(struct rdmamsg_ctx *ctx, void *arg)
{
	(void)ctx;
	(void)arg;
	wakeups++;
}

static int inner_run = 1;

/* run_inside -- a wakeup callback that tries to run its own context */
static void run_inside(struct rdmamsg_ctx *ctx, void *arg)
{
	(void)arg;
	inner_run = rdmamsg_ctx_run(ctx);
}

/* on_lst_req -- a listener that is never connected to */
static void on_lst_req(struct rdmamsg_listener *lst,
		       struct rdmamsg_conn_req *req, const void *pdata,
		       size_t len, void *arg)
{
	(void)lst;
	(void)pdata;
	(void)len;
	(void)arg;
	rdmamsg_conn_req_reject(req, 0, NULL, 0);
}

/* waker -- a foreign thread pokes the context */
static void *waker(void *arg)
{
	usleep(50000);
	rdmamsg_ctx_wakeup(arg);
	return NULL;
}

int main(void)
{
	struct rdmamsg_ctx_attr *attr = NULL;
	struct rdmamsg_ctx *ctx = NULL, *ctx2 = NULL;
	struct rdmamsg_buf *buf = NULL, *b2, *b3[2];
	enum rdmamsg_fabric fab;
	const char *name = NULL;
	uint64_t v = 12345;
	size_t reg, used, sz;
	void *data;
	int fd = -1, level;
	struct ev_loop *loop;

	test_setup("ctx_args");
	ctx = test_ctx();
	rdmamsg_ctx_destroy(&ctx);

	/* logging */
	is_int(rdmamsg_log_set_level(RDMAMSG_LOG_DEBUG + 1), -EINVAL,
	       "log level above DEBUG is rejected");
	is_int(rdmamsg_log_set_level(-2), -EINVAL, "log level below DISABLED");
	is_int(rdmamsg_log_get_level(NULL), -EINVAL, "get_level(NULL)");
	rdmamsg_log_get_level(&level);
	is_int(level, RDMAMSG_LOG_WARNING, "level unchanged by failures");

	/* attributes */
	is_int(rdmamsg_ctx_attr_new(NULL), -EINVAL, "ctx_attr_new(NULL)");
	is_int(rdmamsg_ctx_attr_delete(NULL), -EINVAL, "ctx_attr_delete(NULL)");
	is_int(rdmamsg_ctx_attr_new(&attr), 0, "ctx_attr_new");
	is_int(rdmamsg_ctx_attr_set_fabric(attr, (enum rdmamsg_fabric)7),
	       -EINVAL, "unknown fabric");
	is_int(rdmamsg_ctx_attr_set_fabric(NULL, RDMAMSG_FABRIC_SOFT), -EINVAL,
	       "set_fabric(NULL)");
	is_int(rdmamsg_ctx_attr_set_pool_limit(attr, 1000), -EINVAL,
	       "pool limit below 1 MiB");
	is_int(rdmamsg_ctx_attr_set_device(attr, ""), -EINVAL,
	       "empty device name");
	is_int(rdmamsg_ctx_attr_set_loop(NULL, NULL), -EINVAL,
	       "set_loop(NULL attr)");
	is_int(rdmamsg_ctx_attr_set_huge_pages(NULL, 1), -EINVAL,
	       "set_huge_pages(NULL)");
	is_int(rdmamsg_ctx_attr_set_wakeup_cb(NULL, on_wakeup, NULL), -EINVAL,
	       "set_wakeup_cb(NULL)");

	/* context creation */
	is_int(rdmamsg_ctx_create(NULL, NULL), -EINVAL, "ctx_create(.., NULL)");
	rdmamsg_ctx_attr_set_device(attr, "no-such-device0");
	ctx = NULL;
	is_int(rdmamsg_ctx_create(attr, &ctx), -ENODEV, "unknown device");
	ok(ctx == NULL, "output untouched on failure");
	rdmamsg_ctx_attr_set_device(attr, NULL);

	setenv("RDMAMSG_FABRIC", "bogus", 1);
	is_int(rdmamsg_ctx_create(NULL, &ctx), -ENOTSUP,
	       "RDMAMSG_FABRIC=bogus");
	setenv("RDMAMSG_FABRIC", "auto", 1);
	is_int(rdmamsg_ctx_create(NULL, &ctx), 0, "RDMAMSG_FABRIC=auto");
	rdmamsg_ctx_get_fabric(ctx, &fab);
	diag("auto picked %s", fab == RDMAMSG_FABRIC_SOFT ? "soft" : "verbs");
	rdmamsg_ctx_destroy(&ctx);
	{
		struct rdmamsg_ctx_attr *va;
		int ret;

		rdmamsg_ctx_attr_new(&va);
		rdmamsg_ctx_attr_set_fabric(va, RDMAMSG_FABRIC_VERBS);
		ret = rdmamsg_ctx_create(va, &ctx);
		ok(ret == 0 || ret == -ENODEV,
		   "fabric VERBS: a context or -ENODEV (%s)",
		   rdmamsg_strerror(ret));
		if (!ret)
			rdmamsg_ctx_destroy(&ctx);
		rdmamsg_ctx_attr_delete(&va);
	}
	setenv("RDMAMSG_FABRIC", "soft", 1);
	rdmamsg_ctx_attr_set_wakeup_cb(attr, on_wakeup, NULL);
	rdmamsg_ctx_attr_set_huge_pages(attr, 1);
	if (rdmamsg_ctx_create(attr, &ctx))
		bail_out("no softrdma context");
	unsetenv("RDMAMSG_FABRIC");
	ok(ctx != NULL, "soft context");
	rdmamsg_ctx_get_fabric(ctx, &fab);
	is_int(fab, RDMAMSG_FABRIC_SOFT, "fabric is soft");
	is_int(rdmamsg_ctx_get_device_name(ctx, &name), 0, "device name");
	ok(name && !strcmp(name, "softrdma0"), "device is softrdma0 (%s)",
	   name ? name : "?");
	is_int(rdmamsg_ctx_get_device_name(NULL, &name), -EINVAL,
	       "device name NULL ctx");
	is_int(rdmamsg_ctx_get_fabric(ctx, NULL), -EINVAL, "fabric NULL out");

	/* the device by name and by address */
	rdmamsg_ctx_attr_set_device(attr, "softrdma0");
	is_int(rdmamsg_ctx_create(attr, &ctx2), 0, "by name softrdma0");
	is_int(rdmamsg_ctx_destroy(&ctx2), 0, "destroy it");
	ok(ctx2 == NULL, "destroy clears the pointer");
	rdmamsg_ctx_attr_set_device(attr, "127.0.0.1");
	is_int(rdmamsg_ctx_create(attr, &ctx2), 0, "by address 127.0.0.1");
	if (ctx2)
		rdmamsg_ctx_destroy(&ctx2);

	/* caps */
	is_int(rdmamsg_ctx_query_caps(NULL, RDMAMSG_CAP_SRQ, &v), -EINVAL,
	       "caps NULL ctx");
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_SRQ, NULL), -EINVAL,
	       "caps NULL value");
	is_int(rdmamsg_ctx_query_caps(ctx, (enum rdmamsg_cap)99, &v), -EINVAL,
	       "unknown cap");
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_MAX_MSG_SIZE, &v), 0,
	       "max message size");
	ok(v >= (1u << 20), "max message size %llu", (unsigned long long)v);
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_MAX_INLINE, &v), 0,
	       "max inline");
	diag("inline %llu", (unsigned long long)v);
	v = 777;
	setenv("RDMAMSG_NO_DC", "1", 1);
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v), -ENOTSUP,
	       "DC forced off (RDMAMSG_NO_DC=1 at the first query)");
	is_int(v, 777, "value untouched on -ENOTSUP");
	unsetenv("RDMAMSG_NO_DC");
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v), -ENOTSUP,
	       "probed once: still off for this context");
	{
		struct rdmamsg_ctx *c3 = test_ctx();
		enum rdmamsg_fabric f3 = RDMAMSG_FABRIC_VERBS;
		int r3;

		rdmamsg_ctx_get_fabric(c3, &f3);
		r3 = rdmamsg_ctx_query_caps(c3, RDMAMSG_CAP_DC, &v);
		if (f3 == RDMAMSG_FABRIC_SOFT)
			ok(r3 == 0 && v == 1,
			   "DC: softrdma emulates it (tests/soft/dc)");
		else
			diag("DC on a verbs device: %d", r3);
		is_int(rdmamsg_ctx_destroy(&c3), 0,
		       "destroy after the probe: 0");
	}
	is_int(rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_UMR, &v), 0,
	       "UMR: softrdma emulates it (tests/xfer/mr_iov)");
	is_int((int)v, 1, "a yes/no capability: 1");

	/* buffers */
	is_int(rdmamsg_buf_alloc(ctx, 0, &buf), -EINVAL, "buf_alloc size 0");
	is_int(rdmamsg_buf_alloc(NULL, 64, &buf), -EINVAL, "buf_alloc NULL");
	is_int(rdmamsg_buf_alloc(ctx, 64, NULL), -EINVAL, "buf_alloc NULL out");
	is_int(rdmamsg_buf_alloc(ctx, (size_t)1 << 40, &buf), -EMSGSIZE,
	       "buf_alloc 1 TiB");
	/* the default pool limit is 256 MiB: three 64 MiB buffers (plus
	 * their headroom) fit, a fourth passes it */
	is_int(rdmamsg_buf_alloc(ctx, 64 << 20, &buf), 0, "64 MiB buffer");
	is_int(rdmamsg_buf_alloc(ctx, 64 << 20, &b3[0]), 0, "a second one");
	is_int(rdmamsg_buf_alloc(ctx, 64 << 20, &b3[1]), 0, "a third one");
	is_int(rdmamsg_buf_alloc(ctx, 64 << 20, &b2), -ENOMEM,
	       "a fourth one passes the 256 MiB limit");
	rdmamsg_buf_free(buf);
	rdmamsg_buf_free(b3[0]);
	rdmamsg_buf_free(b3[1]);
	is_int(rdmamsg_buf_alloc(ctx, 100, &buf), 0, "100 B buffer");
	is_int(rdmamsg_buf_get_size(buf, &sz), 0, "get_size");
	ok(sz >= 100, "capacity %zu", sz);
	is_int(rdmamsg_buf_get_data(buf, &data), 0, "get_data");
	memset(data, 0xab, sz);
	rdmamsg_ctx_query_pool(ctx, &reg, &used);
	ok(reg >= used && used > 0, "pool: %zu registered, %zu in use", reg,
	   used);
	is_int(rdmamsg_ctx_destroy(&ctx), -EBUSY,
	       "destroy with a buffer out is -EBUSY");
	is_int(rdmamsg_buf_free(buf), 0, "buf_free");
	is_int(rdmamsg_buf_free(buf), -EINVAL, "double free is caught");
	is_int(rdmamsg_buf_free(NULL), -EINVAL, "buf_free(NULL)");
	is_int(rdmamsg_buf_get_data(NULL, &data), -EINVAL, "get_data(NULL)");
	is_int(rdmamsg_buf_get_size(NULL, &sz), -EINVAL, "get_size(NULL)");

	/* fd mode loop: wake-up, arm, progress */
	is_int(rdmamsg_ctx_get_fd(ctx, NULL), -EINVAL, "get_fd NULL out");
	is_int(rdmamsg_ctx_get_fd(ctx, &fd), 0, "get_fd");
	ok(fd >= 0, "fd %d", fd);
	is_int(rdmamsg_ctx_arm(NULL), -EINVAL, "arm(NULL)");
	is_int(rdmamsg_ctx_progress(NULL), -EINVAL, "progress(NULL)");
	is_int(rdmamsg_ctx_wakeup(NULL), -EINVAL, "wakeup(NULL)");
	is_int(rdmamsg_ctx_arm(ctx), 0, "arm with nothing pending");
	{
		struct pollfd p = {.fd = fd, .events = POLLIN};

		is_int(poll(&p, 1, 0), 0, "fd idle");
		rdmamsg_ctx_wakeup(ctx);
		is_int(poll(&p, 1, 1000), 1, "fd readable after wakeup");
		rdmamsg_ctx_progress(ctx);
		is_int(wakeups, 1, "wakeup callback ran once");
		is_int(poll(&p, 1, 0), 0, "fd idle again");
	}
	{
		/* wake-up from another thread while this one blocks */
		struct pollfd p = {.fd = fd, .events = POLLIN};
		pthread_t th;

		wakeups = 0;
		pthread_create(&th, NULL, waker, ctx);
		is_int(poll(&p, 1, 5000), 1, "woken by another thread");
		rdmamsg_ctx_progress(ctx);
		is_int(wakeups, 1, "its wakeup callback ran here");
		pthread_join(th, NULL);
	}
	is_int(rdmamsg_ctx_run(ctx), 0, "run returns at once: nothing open");
	is_int(rdmamsg_ctx_run(NULL), -EINVAL, "run(NULL)");
	{
		/* from a callback the outer pass holds the context: a run
		 * there could never progress and would spin for good */
		struct rdmamsg_ctx_attr *ra;
		struct rdmamsg_listener *lst;
		struct rdmamsg_ctx *rc;

		rdmamsg_ctx_attr_new(&ra);
		rdmamsg_ctx_attr_set_wakeup_cb(ra, run_inside, NULL);
		if (rdmamsg_ctx_create(ra, &rc) ||
		    rdmamsg_listen(rc, "127.0.0.1:0", on_lst_req, NULL, &lst))
			bail_out("no context with a listener");
		rdmamsg_ctx_wakeup(rc);
		alarm(20); /* a spinning run fails the test, not the suite */
		rdmamsg_ctx_progress(rc);
		alarm(0);
		is_int(inner_run, -EBUSY, "run from a callback: -EBUSY");
		rdmamsg_listener_close(lst, NULL);
		rdmamsg_ctx_progress(rc);
		is_int(rdmamsg_ctx_destroy(&rc), 0, "its context destroyed");
		rdmamsg_ctx_attr_delete(&ra);
	}
	is_int(rdmamsg_ctx_stop(NULL), -EINVAL, "stop(NULL)");
	is_int(rdmamsg_ctx_query_pool(NULL, &reg, &used), -EINVAL,
	       "query_pool(NULL)");
	is_int(rdmamsg_ctx_query_pool(ctx, NULL, &used), -EINVAL,
	       "query_pool NULL out");
	{
		struct rdmamsg_ep_attr *ea = NULL;

		is_int(rdmamsg_ep_attr_new(NULL), -EINVAL, "ep_attr_new(NULL)");
		is_int(rdmamsg_ep_attr_delete(NULL), -EINVAL,
		       "ep_attr_delete(NULL)");
		rdmamsg_ep_attr_new(&ea);
		is_int(rdmamsg_ep_attr_set_close_timeout(NULL, 5), -EINVAL,
		       "close timeout NULL attr");
		is_int(rdmamsg_ep_attr_set_peer_timeout(ea, 10), -EINVAL,
		       "peer timeout 10 ms (too short)");
		is_int(rdmamsg_ep_attr_set_peer_timeout(ea, 0), 0,
		       "peer timeout 0 (off)");
		is_int(rdmamsg_ep_attr_set_send_backlog(ea, 2000000), -EINVAL,
		       "backlog above 1048576");
		is_int(rdmamsg_ep_attr_set_eager_size(ea, (size_t)2 << 20),
		       -EINVAL, "eager size above 1 MiB");
		is_int(rdmamsg_ep_attr_set_recv_depth(ea, 5000), -EINVAL,
		       "recv depth above 4096");
		is_int(rdmamsg_ep_attr_set_send_depth(ea, 3), -EINVAL,
		       "send depth 3");
		rdmamsg_ep_attr_delete(&ea);
		ok(ea == NULL, "ep_attr_delete clears the pointer");
	}
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "destroy");
	is_int(rdmamsg_ctx_destroy(&ctx), -EINVAL, "destroy(&NULL)");
	is_int(rdmamsg_ctx_destroy(NULL), -EINVAL, "destroy(NULL)");

	/* libev mode: the loop stays empty with an idle context */
	loop = ev_loop_new(EVFLAG_AUTO);
	rdmamsg_ctx_attr_set_device(attr, NULL);
	rdmamsg_ctx_attr_set_loop(attr, loop);
	setenv("RDMAMSG_FABRIC", "soft", 1);
	is_int(rdmamsg_ctx_create(attr, &ctx), 0, "libev context");
	wakeups = 0;
	rdmamsg_ctx_wakeup(ctx);
	ev_run(loop, EVRUN_NOWAIT);
	is_int(wakeups, 1, "wakeup through libev");
	is_int(ev_run(loop, 0), 0, "ev_run returns: idle context holds no ref");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "destroy libev context");
	ev_loop_destroy(loop);
	rdmamsg_ctx_attr_delete(&attr);
	ok(attr == NULL, "attr_delete clears the pointer");
	return done_testing();
}
