/* SPDX-License-Identifier: MIT */
/*
 * leave.c -- a group whose join failed after the join went out still
 * leaves it before its QP goes.  librdmacm attaches the id's QP when it
 * delivers MULTICAST_JOIN, and the kernel refuses to destroy an attached
 * QP (EBUSY, uverbs_free_qp; softrdma does the same), so a group that
 * skipped rdma_leave_multicast because the join ended in failure leaked
 * its QP: here the address handle of the join cannot be made (the
 * context's create_ah fails once), the group reports the failure, closes,
 * and the test checks that rdma_leave_multicast ran and that no QP
 * segment of softrdma is left in /dev/shm.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "../core/util.h"
#include "internal.h"
#include "dispatch.h"

static struct ibv_ah *(*real_create_ah)(struct ibv_pd *, struct ibv_ah_attr *);
static int (*real_leave)(struct rdma_cm_id *, struct sockaddr *);
static int ah_fail, leaves;

/* failing_ah -- the next create_ah fails (EINVAL), the rest go through */
static struct ibv_ah *failing_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	if (ah_fail) {
		ah_fail = 0;
		errno = EINVAL;
		return NULL;
	}
	return real_create_ah(pd, a);
}

/* counted_leave -- rdma_leave_multicast, counted */
static int counted_leave(struct rdma_cm_id *id, struct sockaddr *addr)
{
	leaves++;
	return real_leave(id, addr);
}

/* qp_segments -- softrdma's QP segments of this test in /dev/shm */
static int qp_segments(void)
{
	const char *prefix = getenv("SOFTRDMA_SHM_PREFIX");
	size_t n = strlen(prefix);
	struct dirent *d;
	DIR *dir = opendir("/dev/shm");
	int count = 0;

	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		if (!strncmp(d->d_name, prefix, n) &&
		    strstr(d->d_name + n, "-qp-"))
			count++;
	closedir(dir);
	return count;
}

static int joined, status, closed;

static void on_join(struct rdmamsg_group *g, int st, void *arg)
{
	(void)g;
	(void)arg;
	joined = 1;
	status = st;
}

static void on_closed(struct rdmamsg_group *g, void *arg)
{
	(void)g;
	(void)arg;
	closed = 1;
}

int main(void)
{
	struct rdmamsg_group_cbs cbs = {.on_join = on_join};
	struct rdmamsg__ops ops;
	struct rdmamsg_group *g = NULL;
	struct rdmamsg_ctx *ctx;
	int before;

	test_setup("group-leave");
	ctx = test_ctx();
	ops = *ctx->ops; /* shared and read-only: ours is a copy */
	real_create_ah = ops.create_ah;
	ops.create_ah = failing_ah;
	real_leave = ops.leave_multicast;
	ops.leave_multicast = counted_leave;
	ctx->ops = &ops;
	before = qp_segments();
	ok(before >= 0, "/dev/shm readable (%d QP segments)", before);

	ah_fail = 1;
	ok(!rdmamsg_group_join(ctx, "239.1.2.77", NULL, &cbs, NULL, &g),
	   "join");
	test_run_until(ctx, &joined, 10000);
	ok(joined && status < 0, "the join fails: its AH (%d)", status);
	ok(!rdmamsg_group_close(g, on_closed), "close");
	test_run_until(ctx, &closed, 10000);
	ok(closed, "closed");
	is_int(leaves, 1, "rdma_leave_multicast ran once");
	is_int(qp_segments(), before, "its QP is gone (none left attached)");

	/* a group that joined leaves once too */
	joined = closed = 0;
	leaves = 0;
	ok(!rdmamsg_group_join(ctx, "239.1.2.78", NULL, &cbs, NULL, &g),
	   "join another");
	test_run_until(ctx, &joined, 10000);
	is_int(status, 0, "joined");
	ok(!rdmamsg_group_close(g, on_closed), "close");
	test_run_until(ctx, &closed, 10000);
	is_int(leaves, 1, "rdma_leave_multicast ran once");
	is_int(qp_segments(), before, "its QP is gone");
	is_int(rdmamsg_ctx_destroy(&ctx), 0, "context destroyed");
	return done_testing();
}
