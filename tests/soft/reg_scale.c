/* SPDX-License-Identifier: MIT */
/*
 * reg_scale.c -- the host registry holds more than the old 4,096 QPs and
 * 16,384 MRs (issue 10): one process creates 10,000 QPs and 20,000 MRs,
 * every QPN and key distinct and well-formed, then destroys them all;
 * keys of a slot differ across generations.  A new registry holds pages
 * only for what was used (soft_reg qp_top, mr_top): the first process's
 * sweep reads no further, and tmpfs gives no page to what nobody read.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../tap.h"

#define NQP 10000
#define NMR 20000

/* cmp_u32 -- qsort order */
static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* distinct -- are the n values all different? (sorts them) */
static int distinct(uint32_t *v, int n)
{
	int i;

	qsort(v, (size_t)n, sizeof(*v), cmp_u32);
	for (i = 1; i < n; i++)
		if (v[i] == v[i - 1])
			return 0;
	return 1;
}

/* reg_bytes -- the bytes tmpfs holds for this run's registry (-1: none) */
static long long reg_bytes(const char *prefix)
{
	char name[128];
	struct stat st;

	snprintf(name, sizeof(name), "/dev/shm/%s-registry", prefix);
	return stat(name, &st) ? -1 : (long long)st.st_blocks * 512;
}

int main(void)
{
	int nqp = tap_small() ? 4200 : NQP, nmr = tap_small() ? 16500 : NMR;
	struct ibv_device **l;
	struct ibv_context *ctx;
	struct ibv_qp_init_attr qa;
	struct ibv_device_attr da;
	struct ibv_qp **qps;
	struct ibv_mr **mrs;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint32_t *v, key0;
	int i, n, bad = 0;
	char buf[64], prefix[64];
	long long held;

	/* a registry of our own, new (under the run's prefix, which its
	 * clean-up removes: tests/lib.sh) */
	snprintf(prefix, sizeof(prefix), "%s-rs%d",
		 getenv("SOFTRDMA_SHM_PREFIX") ? getenv("SOFTRDMA_SHM_PREFIX")
					       : "reg-scale",
		 (int)getpid());
	setenv("SOFTRDMA_SHM_PREFIX", prefix, 1);
	l = ibv_get_device_list(NULL);
	ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (l)
		ibv_free_device_list(l);
	if (!ctx)
		bail_out("open device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	held = reg_bytes(prefix);
	ok(held > 0 && held <= (1 << 20),
	   "a new registry, one context open: %lld bytes held, not all 12 MiB",
	   held);
	qps = calloc((size_t)nqp, sizeof(*qps));
	mrs = calloc((size_t)nmr, sizeof(*mrs));
	v = calloc((size_t)(nmr > nqp ? nmr : nqp), sizeof(*v));
	if (!pd || !cq || !qps || !mrs || !v)
		bail_out("resources");
	memset(&da, 0, sizeof(da));
	is_int(ibv_query_device(ctx, &da), 0, "query_device");
	ok(da.max_qp >= 65536 && da.max_mr >= 65536,
	   "query_device: max_qp %d, max_mr %d (at least 65,536)", da.max_qp,
	   da.max_mr);

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	for (n = 0; n < nqp; n++) {
		qps[n] = ibv_create_qp(pd, &qa);
		if (!qps[n])
			break;
		v[n] = qps[n]->qp_num;
		if (v[n] <= 1 || v[n] >= 0xffffff)
			bad++;
	}
	is_int(n, nqp, "QPs created in one process");
	if (n < nqp)
		diag("create_qp %d: %s", n, strerror(errno));
	is_int(bad, 0, "every QPN within 24 bits, not 0, 1 or 0xffffff");
	ok(distinct(v, n), "every QPN distinct");
	for (i = 0, bad = 0; i < n; i++)
		bad += !!ibv_destroy_qp(qps[i]);
	is_int(bad, 0, "all destroyed");

	for (n = 0; n < nmr; n++) {
		mrs[n] = ibv_reg_mr(pd, buf, sizeof(buf),
				    IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_READ);
		if (!mrs[n])
			break;
		v[n] = mrs[n]->rkey;
	}
	is_int(n, nmr, "MRs registered in one process");
	if (n < nmr)
		diag("reg_mr %d: %s", n, strerror(errno));
	ok(distinct(v, n), "every key distinct");
	for (i = 0, bad = 0; i < n; i++)
		bad += !!ibv_dereg_mr(mrs[i]);
	is_int(bad, 0, "all deregistered");

	/* the same slot again and again: a new key each time */
	mrs[0] = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	key0 = mrs[0] ? mrs[0]->lkey : 0;
	for (i = 0, bad = 0; mrs[0] && i < 2000; i++) {
		ibv_dereg_mr(mrs[0]);
		mrs[0] = ibv_reg_mr(pd, buf, sizeof(buf),
				    IBV_ACCESS_LOCAL_WRITE);
		if (!mrs[0] || mrs[0]->lkey == key0)
			bad++;
	}
	is_int(bad, 0, "re-registration never reuses the first key");
	if (mrs[0])
		ibv_dereg_mr(mrs[0]);

	free(v);
	free(mrs);
	free(qps);
	ok(!ibv_destroy_cq(cq) && !ibv_dealloc_pd(pd) && !ibv_close_device(ctx),
	   "everything closed");
	return done_testing();
}
