/* SPDX-License-Identifier: MIT */
/* device.c -- softrdma device list, context, queries and helper verbs */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"
#include "softrdma.h"
#include "ud.h"

#undef ibv_query_port
#undef ibv_get_device_list

/*
 * GID table: entry 0 is the link-local fe80::/64 GID made from the node
 * GUID, entry 1 is ::ffff:127.0.0.1, then the host's other interface
 * addresses (IPv4-mapped, then global IPv6), all of type RoCE v2.  Between
 * hosts (SOFTRDMA_NET=1) each interface has a port of its own (port.c),
 * and an entry is on its interface's port only, as a multi-port HCA's GID
 * tables hold each port's netdev's addresses.  Each port numbers its own
 * entries from 0, as an HCA's: index 0 is the port's link-local GID (port
 * 1's the node GUID's, port p's the GUID plus p - 1, as a port's default
 * GID is its own MAC's), then the port's entries in the table's order
 * (port_ent).  With one port the indices are the table's.
 */
static union ibv_gid gid_tbl[SOFT_GID_TBL_LEN];
static uint8_t gid_port[SOFT_GID_TBL_LEN]; /* the port entry i is on */
/* the interface index of entry i's netdev (ndev_ifindex): its address's
 * interface, lo's for loopback and the node-GUID GID */
static uint32_t gid_ifindex[SOFT_GID_TBL_LEN];
static int gid_count;
/* port p's GID index j is entry port_ent[p][j], for j < port_ngid[p] */
static uint8_t port_ent[SOFT_ROCE_PORTS + 1][SOFT_GID_TBL_LEN];
static uint8_t port_ngid[SOFT_ROCE_PORTS + 1];
/*
 * SOFTRDMA_LINK=ib: two InfiniBand ports (apm.c).  Each port's GID 0 is
 * the subnet prefix fe80::/64 with that port's GUID (node GUID + port);
 * the rest of the table is the same as port 1's in the default mode, so
 * address-based resolution (rdma_cm) still finds a GID.  LIDs are
 * 2 per host, derived from the host id and its first interface address;
 * with SOFTRDMA_NET=1 each port is on a rail and has the LID of its
 * rail's address (iblink.c).
 */
int soft_link_ib;
static union ibv_gid port_gid0[SOFT_IB_PORTS + 1];
static uint16_t port_lid[SOFT_IB_PORTS + 1];
static uint64_t node_guid; /* host order */
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;
static const char not_mlx5_marker[] = "softrdma";

static struct soft_device soft_dev = {
	.dev =
		{
			.node_type = IBV_NODE_CA,
			.transport_type = IBV_TRANSPORT_IB,
			.name = "softrdma0",
			.dev_name = "uverbs_softrdma0",
			.dev_path =
				"/sys/class/infiniband_verbs/uverbs_softrdma0",
			.ibdev_path = "/sys/class/infiniband/softrdma0",
		},
	.not_mlx5 = not_mlx5_marker,
};

/* gid_add -- append a GID unless present or the table is full; the new
 * entry's index, or -1 */
static int gid_add(const union ibv_gid *g)
{
	int i;

	for (i = 0; i < gid_count; i++)
		if (!memcmp(&gid_tbl[i], g, sizeof(*g)))
			return -1;
	if (gid_count == SOFT_GID_TBL_LEN)
		return -1;
	gid_tbl[gid_count] = *g;
	return gid_count++;
}

static void gid_v4(union ibv_gid *g, uint32_t addr_be)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	memcpy(&g->raw[12], &addr_be, 4);
}

/* gid_linklocal -- port p's link-local GID: fe80::/64 with the node GUID
 * plus p - 1 as its interface ID (modified EUI-64) */
static void gid_linklocal(union ibv_gid *g, uint32_t p)
{
	uint64_t id = htobe64((node_guid + p - 1) ^ 0x0200000000000000ull);

	memset(g, 0, sizeof(*g));
	g->raw[0] = 0xfe;
	g->raw[1] = 0x80;
	memcpy(&g->raw[8], &id, 8);
}

static void dev_init(void);

/* ib_init -- SOFTRDMA_LINK: the IB mode's port GIDs and LIDs */
static void ib_init(void)
{
	const char *e = getenv("SOFTRDMA_LINK");
	uint64_t h = node_guid;
	uint16_t base;
	int p, i;

	if (!e || !*e || !strcmp(e, "eth") || !strcmp(e, "roce"))
		return;
	if (strcmp(e, "ib")) {
		SOFT_WARN("softrdma: SOFTRDMA_LINK=%s: not ib or eth; "
			  "using eth\n",
			  e);
		return;
	}
	soft_link_ib = 1;
	/* FNV-1a over the host id and the first non-loopback GID: two
	 * namespace hosts of one machine share the host id, not addresses */
	for (i = 0; i < 16; i++)
		h = (h ^ (gid_count > 2 ? gid_tbl[2].raw[i] : 0)) *
		    0x100000001b3ull;
	/* unicast LIDs are 0x0001..0xbfff: an even base, ports base, +1 */
	base = (uint16_t)(2 + 2 * ((h ^ (h >> 32)) % 0x5ffe));
	for (p = 1; p <= SOFT_IB_PORTS; p++) {
		gid_linklocal(&port_gid0[p], (uint32_t)p);
		port_lid[p] = (uint16_t)(base + p - 1);
	}
	/* SOFTRDMA_NET=1: the ports on rails to other hosts, LIDs from the
	 * rails' addresses or SOFTRDMA_LID_MAP (iblink.c) */
	(void)soft_ib_net_init(port_lid);
}

/* gid_ent -- the table entry behind a port's GID index i, or -1 (IB
 * mode: every entry is on both ports, index for index) */
static int gid_ent(uint32_t port, uint32_t i)
{
	if (soft_link_ib)
		return i < (uint32_t)gid_count ? (int)i : -1;
	if (port > SOFT_ROCE_PORTS || i >= port_ngid[port])
		return -1;
	return port_ent[port][i];
}

/* gid_on -- a port has GID index i */
static int gid_on(uint32_t port, uint32_t i)
{
	return gid_ent(port, i) >= 0;
}

/* gid_of -- a port's GID index i: each port's own (IB mode: port 2 has
 * its own GID 0 over port 1's table); an index it does not have reads as
 * empty */
static const union ibv_gid *gid_of(uint32_t port, uint32_t i)
{
	static const union ibv_gid empty;
	int k;

	if (soft_link_ib && i == 0)
		return &port_gid0[port];
	k = gid_ent(port, i);
	return k >= 0 ? &gid_tbl[k] : &empty;
}

/* ports_number -- dev_init, once the ports are known: each further
 * port's link-local GID joins the table, then each port's indices are
 * numbered from 0, its link-local GID first */
static void ports_number(void)
{
	uint32_t p, np = soft_link_ib ? 1 : soft_port_count();
	int ll[SOFT_ROCE_PORTS + 1], k;
	union ibv_gid g;

	ll[1] = 0;
	for (p = 2; p <= np; p++) {
		gid_linklocal(&g, p);
		ll[p] = gid_add(&g);
		if (ll[p] >= 0) {
			gid_port[ll[p]] = (uint8_t)p;
			gid_ifindex[ll[p]] = soft_port_ifindex(p);
		}
	}
	for (p = 1; p <= np; p++) {
		if (ll[p] >= 0)
			port_ent[p][port_ngid[p]++] = (uint8_t)ll[p];
		for (k = 0; k < gid_count; k++)
			if (gid_port[k] == p && k != ll[p])
				port_ent[p][port_ngid[p]++] = (uint8_t)k;
	}
}

/* soft_gid_find -- the port that has GID g and its index there; -1 when
 * g is none of this device's (IB mode: port 1's index) */
int soft_gid_find(const union ibv_gid *g, uint32_t *port)
{
	uint32_t p, np;
	int j;

	pthread_once(&dev_once, dev_init);
	np = soft_link_ib ? 1 : soft_port_count();
	for (p = 1; p <= np; p++)
		if ((j = soft_gid_index(p, g)) >= 0) {
			*port = p;
			return j;
		}
	return -1;
}

/* soft_gid_index -- a port's index of GID g, -1 if it has none, as
 * rdma-core's ibv_find_gid_index */
int soft_gid_index(uint32_t port, const union ibv_gid *g)
{
	uint32_t j;

	pthread_once(&dev_once, dev_init);
	for (j = 0; j < SOFT_GID_TBL_LEN && gid_on(port, j); j++)
		if (!memcmp(gid_of(port, j), g, sizeof(*g)))
			return (int)j;
	return -1;
}

/*
 * soft_gid_check -- an AV's sgid_index is a GID of its port, as the
 * kernel's rdma_get_gid_attr(device, port, index) resolves it for
 * ib_create_ah and ib_modify_qp: 0, -EINVAL for no such port or an index
 * past the port's table, -ENODATA for an empty entry (another port's)
 */
int soft_gid_check(uint32_t port, uint32_t idx)
{
	if (!soft_port_ok(port) || idx >= SOFT_GID_TBL_LEN)
		return -EINVAL;
	return gid_on(port, idx) ? 0 : -ENODATA;
}

/* soft_gid_get -- a port's GID index idx; 0, or -1 when the port has no
 * such index */
int soft_gid_get(uint32_t port, uint32_t idx, union ibv_gid *g)
{
	pthread_once(&dev_once, dev_init);
	if (!gid_on(port, idx))
		return -1;
	*g = *gid_of(port, idx);
	return 0;
}

/* soft_port_ok -- a port number this device has */
int soft_port_ok(uint32_t port)
{
	pthread_once(&dev_once, dev_init);
	return port >= 1 &&
	       port <= (soft_link_ib ? SOFT_IB_PORTS : soft_port_count());
}

/* soft_port_lid -- a port's LID (IB mode; 0 otherwise) */
uint16_t soft_port_lid(uint32_t port)
{
	pthread_once(&dev_once, dev_init);
	return soft_link_ib && soft_port_ok(port) ? port_lid[port] : 0;
}

/* soft_lid_port -- the local port a LID names (0: none of ours) */
int soft_lid_port(uint16_t lid)
{
	int p;

	pthread_once(&dev_once, dev_init);
	for (p = 1; soft_link_ib && p <= SOFT_IB_PORTS; p++)
		if (lid && port_lid[p] == lid)
			return p;
	return 0;
}

/* soft_gid_port -- the local port whose own GID 0 g is (0: none) */
int soft_gid_port(const union ibv_gid *g)
{
	int p;

	pthread_once(&dev_once, dev_init);
	for (p = 1; soft_link_ib && p <= SOFT_IB_PORTS; p++)
		if (!memcmp(&port_gid0[p], g, sizeof(*g)))
			return p;
	return 0;
}

/* soft_ah_local -- an address vector reaches this host: its GID (RoCE,
 * or a global IB AV), or its DLID (IB mode, LID-routed) */
int soft_ah_local(const struct ibv_ah_attr *ah)
{
	pthread_once(&dev_once, dev_init);
	if (!soft_link_ib)
		return soft_gid_local(&ah->grh.dgid);
	if (!ah->is_global)
		return soft_lid_port(ah->dlid) != 0;
	return soft_gid_local(&ah->grh.dgid) || soft_gid_port(&ah->grh.dgid);
}

/* gid_add_if -- append an address's GID and note its interface (for
 * the ports: port.c), unless it is loopback's */
static void gid_add_if(const union ibv_gid *g, const struct ifaddrs *i,
		       char (*ifn)[IF_NAMESIZE])
{
	int k = gid_add(g);

	if (k < 0 || (i->ifa_flags & IFF_LOOPBACK) || !i->ifa_name ||
	    strlen(i->ifa_name) >= IF_NAMESIZE)
		return;
	strcpy(ifn[k], i->ifa_name);
}

/* dev_init -- node GUID and GID table, once per process */
static void dev_init(void)
{
	/* the entries' interfaces */
	static char ifn[SOFT_GID_TBL_LEN][IF_NAMESIZE];
	struct ifaddrs *ifa = NULL, *i;
	union ibv_gid g;
	long hid = gethostid();
	unsigned int lo;
	int k;

	node_guid = 0x02536f6674000000ull | ((uint64_t)hid & 0xffffff);
	gid_linklocal(&g, 1);
	gid_add(&g);
	gid_v4(&g, htonl(INADDR_LOOPBACK));
	gid_add(&g);
	if (getifaddrs(&ifa) == 0) {
		for (i = ifa; i; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
				continue;
			gid_v4(&g, ((struct sockaddr_in *)i->ifa_addr)
					   ->sin_addr.s_addr);
			gid_add_if(&g, i, ifn);
		}
		for (i = ifa; i; i = i->ifa_next) {
			struct in6_addr *a;

			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6)
				continue;
			a = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
			if (IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_LOOPBACK(a))
				continue;
			memcpy(g.raw, a, 16);
			gid_add_if(&g, i, ifn);
		}
		freeifaddrs(ifa);
	}
	lo = if_nametoindex("lo");
	for (k = 0; k < gid_count; k++) {
		gid_ifindex[k] = ifn[k][0] ? if_nametoindex(ifn[k]) : 0;
		if (!gid_ifindex[k])
			gid_ifindex[k] = lo ? lo : 1;
	}
	soft_dev.dev.node_type = IBV_NODE_CA;
	ib_init();
	soft_port_bind(ifn, gid_count, gid_port); /* port.c */
	ports_number();
}

/* yama_restricted -- Yama's ptrace_scope is 1 or more */
static int yama_restricted(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int v = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v >= 1;
}

/* soft_gid_local -- g is one of this host's GIDs (a local destination) */
int soft_gid_local(const union ibv_gid *g)
{
	int i;

	pthread_once(&dev_once, dev_init);
	for (i = 0; i < gid_count; i++)
		if (!memcmp(&gid_tbl[i], g, sizeof(*g)))
			return 1;
	return 0;
}

/* soft_gid_count -- number of valid GID entries */
int soft_gid_count(void)
{
	pthread_once(&dev_once, dev_init);
	return gid_count;
}

SOFT_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices);
SOFT_EXPORT void ibv_free_device_list(struct ibv_device **list);
SOFT_EXPORT const char *ibv_get_device_name(struct ibv_device *device);
SOFT_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device);
SOFT_EXPORT int ibv_get_device_index(struct ibv_device *device);
SOFT_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device);
SOFT_EXPORT int ibv_close_device(struct ibv_context *context);
SOFT_EXPORT int ibv_query_device(struct ibv_context *context,
				 struct ibv_device_attr *attr);
SOFT_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			       struct _compat_ibv_port_attr *port_attr);
SOFT_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num,
			      int index, union ibv_gid *gid);
SOFT_EXPORT int _ibv_query_gid_ex(struct ibv_context *context,
				  uint32_t port_num, uint32_t gid_index,
				  struct ibv_gid_entry *entry, uint32_t flags,
				  size_t entry_size);
SOFT_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
					 struct ibv_gid_entry *entries,
					 size_t max_entries, uint32_t flags,
					 size_t entry_size);
SOFT_EXPORT int ibv_query_gid_type(struct ibv_context *context,
				   uint8_t port_num, unsigned int index,
				   int *type);
SOFT_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num,
			       int index, __be16 *pkey);
SOFT_EXPORT int ibv_get_pkey_index(struct ibv_context *context,
				   uint8_t port_num, __be16 pkey);
SOFT_EXPORT struct ibv_context *ibv_import_device(int cmd_fd);

/* ibv_get_device_list -- the one softrdma device */
struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **l;

	pthread_once(&dev_once, dev_init);
	l = calloc(2, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	l[0] = &soft_dev.dev;
	if (num_devices)
		*num_devices = 1;
	return l;
}

/* ibv_free_device_list -- free the array from ibv_get_device_list */
void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

/* ibv_get_device_name -- kernel-style device name */
const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

/* ibv_get_device_guid -- node GUID, network order */
__be64 ibv_get_device_guid(struct ibv_device *device)
{
	pthread_once(&dev_once, dev_init);
	return htobe64(node_guid);
}

/* ibv_get_device_index -- device index (there is one device) */
int ibv_get_device_index(struct ibv_device *device)
{
	return 0;
}

static int soft_query_port(struct ibv_context *context, uint8_t port_num,
			   struct ibv_port_attr *port_attr, size_t len);
static int soft_query_device_ex(struct ibv_context *context,
				const struct ibv_query_device_ex_input *input,
				struct ibv_device_attr_ex *attr, size_t len);
static int soft_req_notify_cq_op(struct ibv_cq *cq, int solicited_only);

struct ibv_qp *soft_create_qp_ex(struct ibv_context *context,
				 struct ibv_qp_init_attr_ex *attr);
struct ibv_cq_ex *soft_create_cq_ex(struct ibv_context *context,
				    struct ibv_cq_init_attr_ex *attr);
struct ibv_td *soft_alloc_td(struct ibv_context *context,
			     struct ibv_td_init_attr *attr);
int soft_dealloc_td(struct ibv_td *td);
struct ibv_pd *soft_alloc_parent_domain(
	struct ibv_context *context, struct ibv_parent_domain_init_attr *attr);
struct ibv_srq *soft_create_srq_ex(struct ibv_context *context,
				   struct ibv_srq_init_attr_ex *attr);
int soft_req_notify_cq(struct ibv_cq *cq, int solicited_only);

static int soft_req_notify_cq_op(struct ibv_cq *cq, int solicited_only)
{
	return soft_req_notify_cq(cq, solicited_only);
}

/* cmd_fd_kind -- fd is an eventfd, the kind of file every softrdma
 * context's cmd_fd is (/proc/self/fd's link names the kind) */
static int cmd_fd_kind(int fd)
{
	char path[64], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = 0;
	return !strcmp(link, "anon_inode:[eventfd]");
}

/*
 * ibv_import_device -- what rdma-core's ibv_import_device makes of the
 * fd: EINVAL for one that fstat refuses or that is no character device,
 * ENOENT for a character device of no device in the list (softrdma's is
 * the only one), and for softrdma's cmd_fd EOPNOTSUPP, as for a device
 * whose provider has no import_context (rxe).  The cmd_fd is an eventfd,
 * no character device: any eventfd is taken for one (an eventfd of the
 * program's own gets EOPNOTSUPP, not EINVAL).
 */
struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct stat st;

	if (fstat(cmd_fd, &st)) {
		errno = EINVAL;
		return NULL;
	}
	if (cmd_fd_kind(cmd_fd))
		errno = EOPNOTSUPP;
	else
		errno = S_ISCHR(st.st_mode) ? ENOENT : EINVAL;
	return NULL;
}

/* ibv_open_device -- a context with its registry slot and async fd */
struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct soft_context *ctx;
	struct ibv_context *c;

	if (device != &soft_dev.dev) {
		errno = ENODEV;
		return NULL;
	}
	pthread_once(&dev_once, dev_init);
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	if (soft_reg_attach())
		goto free_ctx;
	ctx->reg_idx = soft_reg_ctx_alloc();
	if (ctx->reg_idx < 0)
		goto detach;
	ctx->owner_pid = soft_self_pid;
	/* IB mode: links already down are not news to it (apm.c) */
	ctx->port_seen = atomic_load(&soft_reg->port_down);
	ctx->async = soft_evq_new(sizeof(struct ibv_async_event));
	if (!ctx->async)
		goto free_slot;
	soft_lock_init(&ctx->lock);
	soft_list_init(&ctx->qps);
	soft_list_init(&ctx->hot);
	ctx->sweep_max = soft_sweep_max();
	soft_list_init(&ctx->cqs);
	soft_list_init(&ctx->srqs);
	/*
	 * One-sided ops and large sends use process_vm_readv/writev, which
	 * Yama (ptrace_scope >= 1) refuses between processes that are not
	 * ancestor and descendant.  softrdma never lifts that protection
	 * (no PR_SET_PTRACER): where it applies, the target process moves
	 * the data itself through the ring, and its progress thread serves
	 * the rings even when no CQ is armed.
	 */
	ctx->serve_rings = soft_novm_env() || yama_restricted();
	atomic_store(&soft_reg->ctx[ctx->reg_idx].always_wake,
		     (uint32_t)ctx->serve_rings);
	if (ctx->serve_rings)
		soft_ctx_fence_wake(ctx); /* its thread waits for wakes */
	/* tests/soft/ackstop: a responder stopped in its first ACK (read at
	 * every open: a forked child may have inherited the attach) */
	soft_test_ack_stop = getenv("SOFTRDMA_TEST_ACK_STOP") != NULL;

	c = &ctx->vctx.context;
	c->device = device;
	/*
	 * No kernel behind it, but programs dup, poll or fcntl cmd_fd
	 * (pyverbs dups it to import the device, which then fails with
	 * EOPNOTSUPP as on rxe): a valid fd that never becomes readable.
	 */
	c->cmd_fd = eventfd(0, EFD_CLOEXEC);
	if (c->cmd_fd < 0)
		goto free_async;
	c->async_fd = soft_evq_fd(ctx->async);
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->ops.poll_cq = soft_poll_cq;
	c->ops.req_notify_cq = soft_req_notify_cq_op;
	c->ops.post_send = soft_post_send;
	c->ops.post_recv = soft_post_recv;
	c->ops.post_srq_recv = soft_post_srq_recv;
	c->ops.alloc_mw = soft_alloc_mw;
	c->ops.dealloc_mw = soft_dealloc_mw;
	c->ops.bind_mw = soft_bind_mw;
	ctx->vctx.sz = sizeof(struct verbs_context);
	ctx->vctx.query_port = soft_query_port;
	ctx->vctx.query_device_ex = soft_query_device_ex;
	ctx->vctx.create_qp_ex = soft_create_qp_ex;
	ctx->vctx.create_cq_ex = soft_create_cq_ex;
	ctx->vctx.create_srq_ex = soft_create_srq_ex;
	ctx->vctx.open_xrcd = soft_open_xrcd;
	ctx->vctx.close_xrcd = soft_close_xrcd;
	ctx->vctx.open_qp = soft_open_qp;
	ctx->vctx.get_srq_num = soft_get_srq_num;
	ctx->vctx.alloc_td = soft_alloc_td;
	ctx->vctx.dealloc_td = soft_dealloc_td;
	ctx->vctx.alloc_parent_domain = soft_alloc_parent_domain;
	soft_port_ctx_add(ctx); /* port events (SOFTRDMA_NET=1, port.c) */
	return c;

free_async:
	soft_evq_free(ctx->async);
free_slot:
	soft_reg_ctx_free(ctx->reg_idx);
detach:
	soft_reg_detach();
free_ctx:
	free(ctx);
	return NULL;
}

/* ibv_close_device -- release a context (objects must be gone) */
int ibv_close_device(struct ibv_context *context)
{
	struct soft_context *ctx;

	if (!context)
		return EINVAL;
	ctx = to_sctx(context);
	/* a forked child closing what it inherited: the progress thread
	 * and the registry slot are its parent's, left alone */
	if (ctx->owner_pid == soft_self_pid)
		soft_thread_stop(ctx);
	soft_port_ctx_del(ctx);
	/* the network path's thread waits for its lock no more */
	soft_net_ctx_gone(ctx);
	soft_evq_free(ctx->async);
	close(context->cmd_fd);
	soft_reg_ctx_free(ctx->reg_idx);
	soft_reg_detach();
	pthread_mutex_destroy(&context->mutex);
	free(ctx->bell_qp);
	free(ctx->bell_free);
	soft_map_fini(ctx);
	free(ctx);
	return 0;
}

/* fill_device_attr -- what softrdma supports */
static void fill_device_attr(struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	strcpy(a->fw_ver, "1.0.0");
	a->node_guid = htobe64(node_guid);
	a->sys_image_guid = htobe64(node_guid);
	a->max_mr_size = SOFT_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0xffffff;
	a->vendor_part_id = 1;
	a->hw_ver = 1;
	a->max_qp = SOFT_MAX_QP;
	a->max_qp_wr = SOFT_MAX_QP_WR;
	/* no RESIZE_MAX_WR: ibv_modify_qp takes no IBV_QP_CAP (qp.c, as
	 * the kernel's ib_modify_qp_is_ok), a QP's queues keep their size */
	a->device_cap_flags =
		IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
		IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_N_NOTIFY_CQ |
		IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
		IBV_DEVICE_MEM_MGT_EXTENSIONS | IBV_DEVICE_XRC;
	a->max_sge = SOFT_MAX_SGE;
	a->max_sge_rd = SOFT_MAX_SGE;
	a->max_cq = SOFT_MAX_CQ;
	a->max_cqe = SOFT_MAX_CQE;
	a->max_mr = SOFT_MAX_MR;
	a->max_mw = SOFT_MAX_MR; /* windows share the MRs' key table */
	a->max_pd = SOFT_MAX_PD;
	/* address handles are plain memory, limited by nothing else: as
	 * mlx5, which reports INT_MAX (0 would say there are none) */
	a->max_ah = INT32_MAX;
	a->max_qp_rd_atom = SOFT_MAX_RD_ATOM;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = SOFT_MAX_RD_ATOM * SOFT_MAX_QP;
	a->max_qp_init_rd_atom = SOFT_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_srq = SOFT_MAX_SRQ;
	a->max_srq_wr = SOFT_MAX_SRQ_WR;
	a->max_srq_sge = SOFT_MAX_SGE;
	a->max_pkeys = 1;
	a->max_mcast_grp = SOFT_MCAST_GRP; /* enforced in mcast.c */
	a->max_mcast_qp_attach = SOFT_MCAST_QP_ATT;
	a->max_total_mcast_qp_attach = SOFT_MCAST_TOTAL;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = (uint8_t)soft_port_count(); /* an interface each */
	if (soft_link_ib) { /* two IB ports and APM (apm.c) */
		a->phys_port_cnt = SOFT_IB_PORTS;
		a->device_cap_flags |= IBV_DEVICE_AUTO_PATH_MIG;
	}
}

/* ibv_query_device -- device attributes */
int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	if (!context || !attr)
		return EINVAL;
	pthread_once(&dev_once, dev_init);
	fill_device_attr(attr);
	return 0;
}

static int soft_query_device_ex(struct ibv_context *context,
				const struct ibv_query_device_ex_input *input,
				struct ibv_device_attr_ex *attr, size_t len)
{
	struct ibv_device_attr_ex a;

	/* as rdma-core's ibv_cmd_query_device_any: at least the legacy
	 * attributes, and all of the caller's size zeroed (a newer
	 * library's fields too) */
	if (!attr || (input && input->comp_mask) || len < sizeof(a.orig_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	pthread_once(&dev_once, dev_init);
	fill_device_attr(&a.orig_attr);
	/* RDMA atomic write, as rxe reports it: the kernel's
	 * IB_UVERBS_DEVICE_ATOMIC_WRITE bit, which libibverbs 44's headers do
	 * not name yet */
	a.device_cap_flags_ex =
		a.orig_attr.device_cap_flags | SOFT_DEVICE_ATOMIC_WRITE;
	a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
	memset(attr, 0, len);
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

/* fill_port_attr -- an active RoCE v2 port; with SOFTRDMA_NET=1 its
 * state and MTU are its interface's (port.c) */
static void fill_port_attr(struct ibv_port_attr *p, uint32_t port)
{
	memset(p, 0, sizeof(*p));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = IBV_MTU_4096;
	p->gid_tbl_len = SOFT_GID_TBL_LEN;
	p->port_cap_flags = IBV_PORT_CM_SUP;
	p->max_msg_sz = SOFT_MAX_MSG_SZ;
	p->pkey_tbl_len = 1;
	p->max_vl_num = 1;
	p->active_width = 2;  /* 4x */
	p->active_speed = 32; /* EDR */
	p->phys_state = 5;    /* LinkUp */
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
	if (!soft_link_ib)
		(void)soft_port_eth(port, p);
}

/*
 * The ibv_port_attr of rdma-core 47 and later: active_speed_ex after
 * port_cap_flags2, which the kernel (ib_uverbs_query_port_resp_ex) sets
 * to the active speed; programs built with those headers read it first
 * (active_speed_ex ? active_speed_ex : active_speed).
 */
struct soft_port_attr_ex {
	struct ibv_port_attr base;
	uint32_t active_speed_ex;
};

/* soft_query_port -- the query_port op: len bytes of port_attr, as
 * libibverbs' __lib_query_port fills them (a longer struct's tail zero) */
static int soft_query_port(struct ibv_context *context, uint8_t port_num,
			   struct ibv_port_attr *port_attr, size_t len)
{
	struct soft_port_attr_ex ax;
	struct ibv_port_attr a;

	if (!context || !port_attr || !soft_port_ok(port_num))
		return EINVAL;
	fill_port_attr(&a, port_num);
	if (soft_link_ib) { /* an IB port of a subnet of its own (apm.c) */
		a.link_layer = IBV_LINK_LAYER_INFINIBAND;
		a.port_cap_flags |= IBV_PORT_SM;
		a.lid = port_lid[port_num];
		a.sm_lid = port_lid[1];
		a.lmc = 0;
		a.sm_sl = 0;
		a.subnet_timeout = 18;
		a.max_vl_num = 1;
		if (!soft_port_up(port_num)) {
			a.state = IBV_PORT_DOWN;
			a.phys_state = 3; /* Disabled */
		}
	}
	memset(&ax, 0, sizeof(ax));
	ax.base = a;
	ax.active_speed_ex = a.active_speed;
	memset(port_attr, 0, len);
	memcpy(port_attr, &ax, len < sizeof(ax) ? len : sizeof(ax));
	return 0;
}

/* ibv_query_port -- legacy entry: the 48-byte compat struct */
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
		   struct _compat_ibv_port_attr *port_attr)
{
	return soft_query_port(context, port_num,
			       (struct ibv_port_attr *)port_attr, 48);
}

/* ibv_query_gid -- one GID; unused entries read as zero */
int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
		  union ibv_gid *gid)
{
	pthread_once(&dev_once, dev_init);
	if (!context || !gid || !soft_port_ok(port_num) || index < 0 ||
	    index >= SOFT_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*gid = *gid_of(port_num, (uint32_t)index);
	return 0;
}

static void fill_gid_entry(struct ibv_gid_entry *e, uint32_t port, uint32_t i)
{
	memset(e, 0, sizeof(*e));
	e->gid = *gid_of(port, i);
	e->gid_index = i;
	e->port_num = port;
	e->gid_type = soft_link_ib ? IBV_GID_TYPE_IB : IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = soft_link_ib ? 0 : gid_ifindex[gid_ent(port, i)];
}

/*
 * _ibv_query_gid_ex -- GID entry with its type, as the kernel's
 * UVERBS_METHOD_QUERY_GID_ENTRY: the entry attribute is a whole
 * ib_uverbs_gid_entry at least (UVERBS_ATTR_STRUCT: EINVAL when
 * shorter), a longer one has its tail zeroed
 * (uverbs_copy_to_struct_or_zero)
 */
int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
		      uint32_t gid_index, struct ibv_gid_entry *entry,
		      uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;

	pthread_once(&dev_once, dev_init);
	if (!context || !entry || flags || entry_size < sizeof(e) ||
	    !soft_port_ok(port_num) || gid_index >= SOFT_GID_TBL_LEN)
		return EINVAL;
	if (!gid_on(port_num, gid_index))
		return ENODATA;
	fill_gid_entry(&e, port_num, gid_index);
	memset(entry, 0, entry_size);
	memcpy(entry, &e, sizeof(e));
	return 0;
}

/*
 * _ibv_query_gid_table -- all valid GID entries, each entry_size apart
 * as the kernel's copy_gid_entries_to_user writes them: the first
 * entry_size bytes of each (a shorter entry is cut), the rest of a
 * longer one zeroed; no entry size is -EINVAL
 * (uverbs_attr_ptr_get_array_size)
 */
ssize_t _ibv_query_gid_table(struct ibv_context *context,
			     struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;
	uint32_t p, np;
	int i, n = 0;
	char *out;

	pthread_once(&dev_once, dev_init);
	np = soft_link_ib ? SOFT_IB_PORTS : soft_port_count();
	if (!context || !entries || flags || !entry_size)
		return -EINVAL;
	/* each entry once per port it is on: both in the IB mode, one else */
	if (max_entries < (size_t)gid_count * (soft_link_ib ? np : 1))
		return -EINVAL;
	for (p = 1; p <= np; p++)
		for (i = 0; gid_on(p, (uint32_t)i); i++) {
			fill_gid_entry(&e, p, (uint32_t)i);
			out = (char *)entries + (size_t)n++ * entry_size;
			if (entry_size > sizeof(e))
				memset(out + sizeof(e), 0,
				       entry_size - sizeof(e));
			memcpy(out, &e,
			       entry_size < sizeof(e) ? entry_size : sizeof(e));
		}
	return n;
}

/*
 * ibv_query_gid_type -- sysfs-style type: 1 is RoCE v2.  As rdma-core's
 * (verbs.c, "Preserve API behavior for empty GID"): an empty entry of
 * the table is type 0 (IB/RoCE v1) and success; past the table, or no
 * such port, -1 with errno EINVAL (rdma_get_gid_attr).
 */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, int *type)
{
	pthread_once(&dev_once, dev_init);
	if (!context || !type || !soft_port_ok(port_num) ||
	    index >= SOFT_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*type = soft_link_ib || !gid_on(port_num, index) ? 0 : 1;
	return 0;
}

/*
 * ibv_query_pkey -- the default P_Key only.  rdma-core reads
 * ports/<port>/pkeys/<index> from sysfs: an index past pkey_tbl_len, or
 * a port the device does not have, is a file that is not there (-1,
 * errno ENOENT).
 */
int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
		   __be16 *pkey)
{
	if (!context || !pkey) {
		errno = EINVAL;
		return -1;
	}
	if (!soft_port_ok(port_num) || index != 0) {
		errno = ENOENT;
		return -1;
	}
	*pkey = htons(0xffff);
	return 0;
}

/* ibv_get_pkey_index -- index of a P_Key: rdma-core compares the 16 bits
 * with each entry (ibv_query_pkey until it fails), so the limited member
 * 0x7fff is not the table's full 0xffff: -1, errno ENOENT */
int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
		       __be16 pkey)
{
	__be16 p;

	if (ibv_query_pkey(context, port_num, 0, &p))
		return -1;
	if (p != pkey) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}
