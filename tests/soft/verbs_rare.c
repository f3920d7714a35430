/* SPDX-License-Identifier: MIT */
/*
 * verbs_rare.c -- the rarely used libibverbs entry points, as rdma-core
 * and the kernel answer them over an HCA (rxe, mlx5):
 *  - ibv_query_gid_type: an empty entry of the table is type 0 and
 *    success (rdma-core's "Preserve API behavior for empty GID"), past
 *    the table -1;
 *  - ibv_query_pkey / ibv_get_pkey_index: the P_Key table is read from
 *    sysfs, an index past it is ENOENT; a P_Key is looked up by its 16
 *    bits (0x7fff is not 0xffff);
 *  - _ibv_query_gid_ex: a whole ibv_gid_entry at least (EINVAL), a longer
 *    one's tail zeroed; _ibv_query_gid_table: too small is -EINVAL,
 *    entries of another size are cut or zero-padded at their stride; an
 *    address's GID names its interface (ndev_ifindex);
 *  - the query_device_ex and query_port ops: at least the legacy device
 *    attributes (ibv_cmd_query_device_any), the caller's whole size
 *    zeroed, and a newer ibv_port_attr's active_speed_ex set;
 *  - ibv_reg_mr_iova: the iova has the address's page offset and does
 *    not wrap (EINVAL); the flush access bits are EOPNOTSUPP, unknown
 *    bits EINVAL, the optional range ignored;
 *  - ibv_rereg_mr's return values and errno, keys kept;
 *  - ibv_resize_cq: not below what the CQ holds, completions in order;
 *  - ibv_import_device: EINVAL, ENOENT or EOPNOTSUPP by the fd;
 *  - ibv_read_sysfs_file reads the file it is given;
 *  - the rate conversions know 800 and 1200 Gb/s;
 *  - the extended verbs softrdma has not: EOPNOTSUPP, as rdma-core gives
 *    for a provider without them;
 *  - no capability advertised that is not there.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

/* rdma-core declares these in driver.h (ibv_query_gid_type with an
 * enum ibv_gid_type_sysfs *) */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, int *type);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);

/* all_bytes -- the n bytes at p are all v */
static int all_bytes(const void *p, size_t n, unsigned char v)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (c[i] != v)
			return 0;
	return 1;
}

/* test_gid_type -- empty entry: type 0; past the table: -1 EINVAL */
static void test_gid_type(struct tctx *t)
{
	struct ibv_port_attr pa;
	struct ibv_gid_entry ge;
	int type, empty = -1, i;

	is_int(ibv_query_port(t->ctx, 1, &pa), 0, "query_port");
	for (i = 0; i < pa.gid_tbl_len && empty < 0; i++)
		if (ibv_query_gid_ex(t->ctx, 1, (uint32_t)i, &ge, 0) == ENODATA)
			empty = i;
	ok(empty > 0, "an empty GID entry (%d)", empty);
	type = 7;
	is_int(ibv_query_gid_type(t->ctx, 1, (unsigned)empty, &type), 0,
	       "gid_type of an empty entry: success");
	is_int(type, 0, "empty entry: IB/RoCE v1 (0)");
	type = 7;
	is_int(ibv_query_gid_type(t->ctx, 1, 1, &type), 0, "gid_type of GID 1");
	is_int(type, 1, "GID 1: RoCE v2");
	errno = 0;
	is_int(ibv_query_gid_type(t->ctx, 1, (unsigned)pa.gid_tbl_len, &type),
	       -1, "gid_type past the table: -1");
	is_int(errno, EINVAL, "EINVAL");
}

/* test_pkey -- the one P_Key 0xffff; nothing else found */
static void test_pkey(struct tctx *t)
{
	struct ibv_port_attr pa;
	__be16 pk = 0;

	is_int(ibv_query_port(t->ctx, 1, &pa), 0, "query_port");
	is_int(ibv_query_pkey(t->ctx, 1, 0, &pk), 0, "query_pkey 0");
	is_int(ntohs(pk), 0xffff, "P_Key 0xffff");
	errno = 0;
	is_int(ibv_query_pkey(t->ctx, 1, pa.pkey_tbl_len, &pk), -1,
	       "query_pkey past pkey_tbl_len: -1");
	is_int(errno, ENOENT, "ENOENT (no sysfs file)");
	is_int(ibv_get_pkey_index(t->ctx, 1, htons(0xffff)), 0,
	       "get_pkey_index(0xffff) = 0");
	errno = 0;
	is_int(ibv_get_pkey_index(t->ctx, 1, htons(0x7fff)), -1,
	       "get_pkey_index(0x7fff): not in the table");
	is_int(errno, ENOENT, "ENOENT");
	is_int(ibv_get_pkey_index(t->ctx, 1, htons(0x1234)), -1,
	       "get_pkey_index(0x1234): -1");
}

/* gid_table_sizes -- entries of other sizes than ours, n of them (tab):
 * as the kernel copies them, each cut or zero-padded at its stride */
static void gid_table_sizes(struct tctx *t, const struct ibv_gid_entry *tab,
			    ssize_t n)
{
	const size_t big = sizeof(struct ibv_gid_entry) + 8;
	const size_t small = offsetof(struct ibv_gid_entry, gid_index);
	unsigned char buf[64 * (sizeof(struct ibv_gid_entry) + 8)];
	int good = 1;
	ssize_t i;

	memset(buf, 0xaa, sizeof(buf));
	is_int(_ibv_query_gid_table(t->ctx, (void *)buf, 64, 0, big), n,
	       "gid_table, longer entries");
	for (i = 0; i < n; i++)
		good &= !memcmp(buf + (size_t)i * big, &tab[i], sizeof(*tab)) &&
			all_bytes(buf + (size_t)i * big + sizeof(*tab), 8, 0);
	ok(good, "each entry at its stride, its tail zeroed");
	memset(buf, 0xaa, sizeof(buf));
	good = 1;
	is_int(_ibv_query_gid_table(t->ctx, (void *)buf, 64, 0, small), n,
	       "gid_table, shorter entries (the GIDs only)");
	for (i = 0; i < n; i++)
		good &= !memcmp(buf + (size_t)i * small, &tab[i].gid, small);
	ok(good && all_bytes(buf + (size_t)n * small, 16, 0xaa),
	   "each GID at its stride, nothing past them");
	is_int(_ibv_query_gid_table(t->ctx, (void *)buf, 64, 0, 0), -EINVAL,
	       "gid_table, entry size 0: -EINVAL");
}

/* test_gid_ex_size -- entry sizes and table sizes */
static void test_gid_ex_size(struct tctx *t)
{
	struct {
		struct ibv_gid_entry e;
		unsigned char pad[16];
	} big;
	struct ibv_gid_entry tab[64], ge;
	ssize_t n;

	memset(&big, 0xaa, sizeof(big));
	is_int(_ibv_query_gid_ex(t->ctx, 1, 1, &big.e, 0, sizeof(big.e) - 1),
	       EINVAL, "gid_ex with a short entry: EINVAL");
	ok(all_bytes(&big, sizeof(big), 0xaa), "nothing written");
	is_int(_ibv_query_gid_ex(t->ctx, 1, 1, &big.e, 0, sizeof(big)), 0,
	       "gid_ex with a longer entry");
	ok(big.e.gid_index == 1 && big.e.port_num == 1 &&
		   big.e.gid_type == IBV_GID_TYPE_ROCE_V2,
	   "the entry");
	ok(all_bytes(big.pad, sizeof(big.pad), 0), "its tail zeroed");
	is_int(ibv_query_gid_ex(t->ctx, 1, 1, &ge, 1), EINVAL,
	       "gid_ex flags 1: EINVAL");

	n = ibv_query_gid_table(t->ctx, tab, 64, 0);
	ok(n >= 2, "gid_table: %zd entries", n);
	if (n < 2)
		return;
	is_int(ibv_query_gid_table(t->ctx, tab, (size_t)n, 0), n,
	       "gid_table with exactly room");
	is_int(ibv_query_gid_table(t->ctx, tab, (size_t)n - 1, 0), -EINVAL,
	       "gid_table one short: -EINVAL");
	is_int(ibv_query_gid_table(t->ctx, tab, 64, 1), -EINVAL,
	       "gid_table flags 1: -EINVAL");
	gid_table_sizes(t, tab, n);
}

/* test_gid_ndev -- an address's GID names its interface (ndev_ifindex) */
static void test_gid_ndev(struct tctx *t)
{
	struct ibv_gid_entry tab[64];
	struct ifaddrs *ifa = NULL, *i;
	ssize_t n = ibv_query_gid_table(t->ctx, tab, 64, 0), k;
	int checked = 0, good = 1;

	if (!ok(n > 0 && getifaddrs(&ifa) == 0, "gid_table, getifaddrs"))
		return;
	for (k = 0; k < n; k++)
		for (i = ifa; i; i = i->ifa_next) {
			struct sockaddr_in *sin = (void *)i->ifa_addr;

			if (!sin || sin->sin_family != AF_INET ||
			    (i->ifa_flags & IFF_LOOPBACK) ||
			    memcmp(&tab[k].gid.raw[12], &sin->sin_addr, 4) ||
			    tab[k].gid.raw[10] != 0xff)
				continue;
			checked++;
			if (tab[k].ndev_ifindex !=
			    if_nametoindex(i->ifa_name)) {
				diag("GID %zd (%s): ndev_ifindex %u", k,
				     i->ifa_name, tab[k].ndev_ifindex);
				good = 0;
			}
			break;
		}
	freeifaddrs(ifa);
	if (!checked) {
		skip_one("no IPv4 address but loopback's");
		return;
	}
	ok(good, "%d interface GIDs name their interface", checked);
}

/* test_query_sizes -- the ops' attr sizes, as newer/older programs pass */
static void test_query_sizes(struct tctx *t)
{
	struct verbs_context *v = verbs_get_ctx(t->ctx);
	union {
		struct ibv_device_attr_ex a;
		unsigned char b[sizeof(struct ibv_device_attr_ex) + 64];
	} d;
	union {
		struct ibv_port_attr a;
		unsigned char b[sizeof(struct ibv_port_attr) + 16];
	} p;
	size_t ex_off =
		(offsetof(struct ibv_port_attr, port_cap_flags2) + 2 + 3) &
		~(size_t)3;
	uint32_t speed_ex;

	if (!ok(v && v->query_device_ex && v->query_port, "the ops"))
		return;
	memset(&d, 0xaa, sizeof(d));
	is_int(v->query_device_ex(t->ctx, NULL, &d.a,
				  sizeof(struct ibv_device_attr) - 1),
	       EINVAL, "query_device_ex shorter than ibv_device_attr: EINVAL");
	is_int(v->query_device_ex(t->ctx, NULL, &d.a, sizeof(d)), 0,
	       "query_device_ex, a longer struct");
	ok(d.a.orig_attr.max_qp > 0, "its attributes");
	ok(all_bytes(d.b + sizeof(d.a), sizeof(d) - sizeof(d.a), 0),
	   "the tail zeroed");

	memset(&p, 0xaa, sizeof(p));
	is_int(v->query_port(t->ctx, 1, &p.a, sizeof(p)), 0,
	       "query_port, a longer struct");
	memcpy(&speed_ex, p.b + ex_off, sizeof(speed_ex));
	ok(p.a.active_speed && speed_ex == p.a.active_speed,
	   "active_speed_ex %u = active_speed %u", speed_ex, p.a.active_speed);
	ok(all_bytes(p.b + ex_off + 4, sizeof(p) - ex_off - 4, 0),
	   "the rest zeroed");
}

/* test_reg_iova -- iova page offset and wrap; access bits */
static void test_reg_iova(struct tctx *t)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *buf = aligned_alloc((size_t)pg, 2 * (size_t)pg);
	const int lw = IBV_ACCESS_LOCAL_WRITE;
	struct ibv_mr *mr;

	if (!ok(buf != NULL, "buffer"))
		return;
	mr = ibv_reg_mr_iova(t->pd, buf + 16, 64, 0x100000 + 16, lw);
	ok(mr != NULL, "reg_mr_iova, same page offset");
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr_iova(t->pd, buf + 16, 64, 0x100000 + 17, lw);
	ok(!mr && errno == EINVAL, "reg_mr_iova, another page offset: EINVAL");
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr_iova(t->pd, buf, 2 * (size_t)pg,
			     UINT64_MAX & ~(uint64_t)(pg - 1), lw);
	ok(!mr && errno == EINVAL, "reg_mr_iova, iova + length wraps: EINVAL");
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr_iova2(t->pd, buf, 64, (uintptr_t)buf, lw | (1u << 8));
	ok(!mr && errno == EOPNOTSUPP,
	   "FLUSH_GLOBAL access, no flush: EOPNOTSUPP");
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr_iova2(t->pd, buf, 64, (uintptr_t)buf, lw | (1u << 10));
	ok(!mr && errno == EINVAL, "an unknown access bit: EINVAL");
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr_iova2(t->pd, buf, 64, (uintptr_t)buf,
			      IBV_ACCESS_REMOTE_WRITE);
	ok(!mr && errno == EINVAL, "REMOTE_WRITE without LOCAL_WRITE: EINVAL");
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr_iova2(t->pd, buf, 64, (uintptr_t)buf,
			      lw | IBV_ACCESS_RELAXED_ORDERING | (1u << 25));
	ok(mr != NULL, "optional range bits ignored");
	if (mr)
		ibv_dereg_mr(mr);
	free(buf);
}

/* test_rereg -- return values, errno, keys */
static void test_rereg(struct tctx *t)
{
	char *a = calloc(1, 8192), *b = calloc(1, 8192);
	struct ibv_pd *pd2 = ibv_alloc_pd(t->ctx);
	const int lw = IBV_ACCESS_LOCAL_WRITE;
	struct ibv_mr *mr = a ? ibv_reg_mr(t->pd, a, 4096, lw) : NULL;
	uint32_t lkey, rkey;

	if (!ok(mr && b && pd2, "mr, buffer, pd"))
		goto out;
	lkey = mr->lkey;
	rkey = mr->rkey;
	errno = 0;
	is_int(ibv_rereg_mr(mr, 1 << 3, NULL, NULL, 0, 0),
	       IBV_REREG_MR_ERR_INPUT, "unknown flag: ERR_INPUT");
	is_int(errno, EINVAL, "EINVAL");
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL,
			    4096, 0),
	       IBV_REREG_MR_ERR_INPUT, "translation without addr: ERR_INPUT");
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, lw),
	       IBV_REREG_MR_ERR_INPUT,
	       "access without CHANGE_ACCESS: ERR_INPUT");
	errno = 0;
	is_int(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_CMD,
	       "no flag: ERR_CMD (the kernel's EINVAL)");
	is_int(errno, EINVAL, "EINVAL");
	errno = 0;
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			    lw | (1 << 9)),
	       IBV_REREG_MR_ERR_CMD, "FLUSH_PERSISTENT access: ERR_CMD");
	is_int(errno, EOPNOTSUPP, "EOPNOTSUPP");
	is_int(ibv_rereg_mr(mr,
			    IBV_REREG_MR_CHANGE_TRANSLATION |
				    IBV_REREG_MR_CHANGE_PD |
				    IBV_REREG_MR_CHANGE_ACCESS,
			    pd2, b + 4096, 4096, lw | IBV_ACCESS_REMOTE_WRITE),
	       0, "all three changed");
	ok(mr->addr == b + 4096 && mr->length == 4096 && mr->pd == pd2,
	   "addr, length and pd as asked");
	ok(mr->lkey == lkey && mr->rkey == rkey, "keys kept");
	is_int(ibv_dealloc_pd(pd2), EBUSY, "its new PD is in use");
	is_int(ibv_dereg_mr(mr), 0, "dereg");
	mr = NULL;
out:
	if (mr)
		ibv_dereg_mr(mr);
	if (pd2)
		ibv_dealloc_pd(pd2);
	free(a);
	free(b);
}

/* test_resize_cq -- not below what it holds; order kept */
static void test_resize_cq(struct tctx *t)
{
	struct ibv_device_attr da;
	struct ibv_qp_attr qa;
	struct ibv_wc wc[8];
	struct ibv_cq *cq = ibv_create_cq(t->ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp = NULL;
	char buf[64];
	int i, n, cqe, in_order = 1;
	struct ibv_mr *mr =
		ibv_reg_mr(t->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);

	is_int(ibv_query_device(t->ctx, &da), 0, "query_device");
	if (!ok(cq && mr, "cq, mr"))
		goto out;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(t->pd, &ia);
	if (!ok(qp != NULL, "qp"))
		goto out;
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	is_int(ibv_modify_qp(qp, &qa,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS),
	       0, "INIT");
	for (i = 1; i <= 6; i++)
		t_post_recv(qp, buf, sizeof(buf), mr->lkey, (uint64_t)i);
	qa.qp_state = IBV_QPS_ERR;
	is_int(ibv_modify_qp(qp, &qa, IBV_QP_STATE), 0, "ERR: 6 flushes");
	cqe = cq->cqe;
	is_int(ibv_resize_cq(cq, 3), EINVAL, "resize below the 6 held: EINVAL");
	is_int(ibv_resize_cq(cq, 5), EINVAL,
	       "resize to 5 (7 rounded up) with 6 held: EINVAL");
	is_int(cq->cqe, cqe, "cqe unchanged");
	is_int(ibv_resize_cq(cq, 0), EINVAL, "resize to 0: EINVAL");
	is_int(ibv_resize_cq(cq, da.max_cqe + 1), EINVAL,
	       "resize past max_cqe: EINVAL");
	is_int(ibv_resize_cq(cq, 100), 0, "resize to 100");
	ok(cq->cqe >= 100 && cq->cqe <= da.max_cqe, "cqe %d", cq->cqe);
	n = t_wait(cq, wc, 6, 2000);
	is_int(n, 6, "the 6 flushes");
	for (i = 0; i < n; i++)
		in_order &= wc[i].wr_id == (uint64_t)i + 1 &&
			    wc[i].status == IBV_WC_WR_FLUSH_ERR;
	ok(in_order, "in order, flushed");
	is_int(ibv_resize_cq(cq, 1), 0, "empty: resize to 1");
	ok(cq->cqe >= 1, "cqe %d", cq->cqe);
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
}

/* import_errno -- ibv_import_device(fd)'s errno (0: it gave a context) */
static int import_errno(int fd)
{
	struct ibv_context *c;

	errno = 0;
	c = ibv_import_device(fd);
	if (c) {
		ibv_close_device(c);
		return 0;
	}
	return errno;
}

/* test_import -- errno by the kind of fd */
static void test_import(struct tctx *t)
{
	int p[2], fd, d;

	is_int(import_errno(-1), EINVAL, "import_device(-1): EINVAL");
	if (pipe(p) == 0) {
		is_int(import_errno(p[0]), EINVAL,
		       "import_device(a pipe): EINVAL");
		close(p[0]);
		close(p[1]);
	}
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		is_int(import_errno(fd), ENOENT,
		       "import_device(/dev/null): ENOENT, no such device");
		close(fd);
	}
	d = dup(t->ctx->cmd_fd);
	is_int(import_errno(d), EOPNOTSUPP,
	       "import_device(a dup of cmd_fd): EOPNOTSUPP, as rxe");
	close(d);
	errno = 0;
	ok(!ibv_import_pd(t->ctx, t->pd->handle) && errno == EOPNOTSUPP,
	   "import_pd: EOPNOTSUPP");
	errno = 0;
	ok(!ibv_import_mr(t->pd, 1) && errno == EOPNOTSUPP,
	   "import_mr: EOPNOTSUPP");
	errno = 0;
	ok(!ibv_import_dm(t->ctx, 1) && errno == EOPNOTSUPP,
	   "import_dm: EOPNOTSUPP");
}

/* test_sysfs -- ibv_read_sysfs_file reads any file, as rdma-core's */
static void test_sysfs(void)
{
	char dir[] = "/tmp/verbs_rare-XXXXXX", path[64], buf[16];
	FILE *f;

	if (!ok(mkdtemp(dir) != NULL, "a directory"))
		return;
	snprintf(path, sizeof(path), "%s/attr", dir);
	f = fopen(path, "w");
	if (f) {
		fputs("hello\n", f);
		fclose(f);
	}
	memset(buf, 'x', sizeof(buf));
	is_int(ibv_read_sysfs_file(dir, "attr", buf, sizeof(buf)), 5,
	       "read_sysfs_file: 5 bytes, the newline dropped");
	ok(!strcmp(buf, "hello"), "its text");
	is_int(ibv_read_sysfs_file(dir, "attr", buf, 6), 5,
	       "a buffer just big enough: the newline's byte ends it");
	errno = 0;
	is_int(ibv_read_sysfs_file(dir, "attr", buf, 5), -1,
	       "no room for the NUL: -1");
	errno = 0;
	is_int(ibv_read_sysfs_file(dir, "none", buf, sizeof(buf)), -1,
	       "a missing file: -1");
	is_int(errno, ENOENT, "ENOENT");
	unlink(path);
	rmdir(dir);
}

/* test_rates -- the rate conversions know every rate verbs.h names */
static void test_rates(void)
{
	is_int(ibv_rate_to_mult(IBV_RATE_800_GBPS), 320, "800 Gb/s: 320 x");
	is_int(ibv_rate_to_mult(IBV_RATE_1200_GBPS), 480, "1200 Gb/s: 480 x");
	is_int(mult_to_ibv_rate(320), IBV_RATE_800_GBPS, "320 x: 800 Gb/s");
	is_int(mult_to_ibv_rate(480), IBV_RATE_1200_GBPS, "480 x: 1200 Gb/s");
	is_int(ibv_rate_to_mbps(IBV_RATE_800_GBPS), 850000, "800: 850000");
	is_int(ibv_rate_to_mbps(IBV_RATE_1200_GBPS), 1275000, "1200: 1275000");
	is_int(mbps_to_ibv_rate(850000), IBV_RATE_800_GBPS, "850000: 800");
	is_int(mbps_to_ibv_rate(1275000), IBV_RATE_1200_GBPS, "1275000: 1200");
	is_int(ibv_rate_to_mult(IBV_RATE_MAX), -1, "IBV_RATE_MAX: -1");
}

/* test_ext_ops -- the verbs softrdma has not, as a provider without them */
static void test_ext_ops(struct tctx *t)
{
	struct ibv_flow_attr fa;
	struct ibv_alloc_dm_attr dma;
	struct ibv_wq_init_attr wa;
	struct ibv_rwq_ind_table_init_attr ra;
	struct ibv_counters_init_attr ca;
	struct ibv_modify_cq_attr ma;
	struct ibv_values_ex rv;
	struct ibv_qp_rate_limit_attr rl;
	struct ibv_cq_init_attr_ex cx;
	struct ibv_ece ece;
	struct ibv_sge sge;
	struct ibv_qp *qp = t_rc_qp(t, 4, NULL);
	char buf[64];

	if (!ok(qp != NULL, "qp"))
		return;
	memset(&fa, 0, sizeof(fa));
	fa.size = sizeof(fa);
	fa.port = 1;
	errno = 0;
	ok(!ibv_create_flow(qp, &fa) && errno == EOPNOTSUPP,
	   "create_flow: EOPNOTSUPP");
	memset(&dma, 0, sizeof(dma));
	dma.length = 64;
	errno = 0;
	ok(!ibv_alloc_dm(t->ctx, &dma) && errno == EOPNOTSUPP,
	   "alloc_dm: EOPNOTSUPP");
	sge.addr = (uintptr_t)buf;
	sge.length = sizeof(buf);
	sge.lkey = 0;
	is_int(ibv_advise_mr(t->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1),
	       EOPNOTSUPP, "advise_mr: EOPNOTSUPP");
	memset(&wa, 0, sizeof(wa));
	wa.wq_type = IBV_WQT_RQ;
	wa.max_wr = wa.max_sge = 1;
	wa.pd = t->pd;
	wa.cq = t->cq;
	errno = 0;
	ok(!ibv_create_wq(t->ctx, &wa) && errno == EOPNOTSUPP,
	   "create_wq: EOPNOTSUPP");
	memset(&ra, 0, sizeof(ra));
	errno = 0;
	ok(!ibv_create_rwq_ind_table(t->ctx, &ra) && errno == EOPNOTSUPP,
	   "create_rwq_ind_table: EOPNOTSUPP");
	memset(&ca, 0, sizeof(ca));
	errno = 0;
	ok(!ibv_create_counters(t->ctx, &ca) && errno == EOPNOTSUPP,
	   "create_counters: EOPNOTSUPP");
	memset(&ma, 0, sizeof(ma));
	ma.attr_mask = IBV_CQ_ATTR_MODERATE;
	ma.moderate.cq_count = 4;
	is_int(ibv_modify_cq(t->cq, &ma), EOPNOTSUPP, "modify_cq: EOPNOTSUPP");
	errno = 0;
	ok(!ibv_alloc_null_mr(t->pd) && errno == EOPNOTSUPP,
	   "alloc_null_mr: EOPNOTSUPP");
	memset(&rv, 0, sizeof(rv));
	rv.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
	is_int(ibv_query_rt_values_ex(t->ctx, &rv), EOPNOTSUPP,
	       "query_rt_values_ex: EOPNOTSUPP");
	memset(&rl, 0, sizeof(rl));
	is_int(ibv_modify_qp_rate_limit(qp, &rl), EOPNOTSUPP,
	       "modify_qp_rate_limit: EOPNOTSUPP");
	memset(&cx, 0, sizeof(cx));
	cx.cqe = 4;
	cx.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	errno = 0;
	ok(!ibv_create_cq_ex(t->ctx, &cx) && errno == EOPNOTSUPP,
	   "create_cq_ex with a completion timestamp: EOPNOTSUPP");
	memset(&ece, 0, sizeof(ece));
	is_int(ibv_query_ece(qp, &ece), EOPNOTSUPP, "query_ece: EOPNOTSUPP");
	ece.vendor_id = 0x15b3;
	is_int(ibv_set_ece(qp, &ece), EOPNOTSUPP, "set_ece: EOPNOTSUPP");
	is_int(ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 0), 0,
	       "data_in_order: no promise");
	errno = 0;
	ok(!ibv_reg_dmabuf_mr(t->pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE) &&
		   errno == EOPNOTSUPP,
	   "reg_dmabuf_mr: EOPNOTSUPP");
	ibv_destroy_qp(qp);
}

/* test_caps -- nothing advertised that is not there */
static void test_caps(struct tctx *t)
{
	struct ibv_device_attr_ex dx;
	struct ibv_qp_attr qa;
	struct ibv_qp *qp = t_rc_qp(t, 4, NULL);
	struct ibv_ah_attr ah;
	struct ibv_ah *ah_obj = NULL;
	int r = -1;

	memset(&dx, 0, sizeof(dx));
	is_int(ibv_query_device_ex(t->ctx, NULL, &dx), 0, "query_device_ex");
	if (qp) {
		memset(&qa, 0, sizeof(qa));
		qa.cap.max_send_wr = 8;
		qa.cap.max_recv_wr = 8;
		r = ibv_modify_qp(qp, &qa, IBV_QP_CAP);
		ibv_destroy_qp(qp);
	}
	ok(!(dx.orig_attr.device_cap_flags & IBV_DEVICE_RESIZE_MAX_WR) ||
		   r == 0,
	   "RESIZE_MAX_WR only where modify_qp(IBV_QP_CAP) works (%d)", r);
	ok(dx.orig_attr.device_cap_flags & IBV_DEVICE_XRC,
	   "XRC, which is there (tests/soft/xrc)");
	ok(dx.orig_attr.max_ah > 0, "max_ah %d: address handles are there",
	   dx.orig_attr.max_ah);
	memset(&ah, 0, sizeof(ah));
	ah.is_global = 1;
	ah.port_num = 1;
	ah.grh.sgid_index = 1;
	ah.grh.hop_limit = 64;
	if (ibv_query_gid(t->ctx, 1, 1, &ah.grh.dgid) == 0)
		ah_obj = ibv_create_ah(t->pd, &ah);
	ok(ah_obj != NULL, "an address handle");
	if (ah_obj)
		ibv_destroy_ah(ah_obj);
	ok(!dx.rss_caps.supported_qpts && !dx.max_wq_type_rq, "no RSS, no WQ");
	ok(!dx.max_dm_size, "no device memory");
	ok(!dx.cq_mod_caps.max_cq_count, "no CQ moderation");
	ok(!dx.odp_caps.general_caps, "no ODP");
	ok(!dx.completion_timestamp_mask && !dx.hca_core_clock,
	   "no completion timestamps");
	ok(!dx.tm_caps.max_num_tags && !dx.tso_caps.max_tso &&
		   !dx.packet_pacing_caps.qp_rate_limit_max,
	   "no tag matching, TSO, pacing");
}

int main(void)
{
	struct tctx t;

	t_isolate("verbs_rare");
	if (t_open(&t, 16))
		bail_out("open");
	test_gid_type(&t);
	test_pkey(&t);
	test_gid_ex_size(&t);
	test_gid_ndev(&t);
	test_query_sizes(&t);
	test_reg_iova(&t);
	test_rereg(&t);
	test_resize_cq(&t);
	test_import(&t);
	test_ext_ops(&t);
	test_sysfs();
	test_rates();
	test_caps(&t);
	t_close(&t);
	is_int(t_shm_count(), 0, "no shm left");
	return done_testing();
}
