/* SPDX-License-Identifier: MIT */
/* misc.c -- string helpers, rates, fork, sysfs and unsupported verbs */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "softrdma.h"

SOFT_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status);
SOFT_EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type);
SOFT_EXPORT const char *ibv_port_state_str(enum ibv_port_state port_state);
SOFT_EXPORT const char *ibv_event_type_str(enum ibv_event_type event);
SOFT_EXPORT int ibv_rate_to_mult(enum ibv_rate rate);
SOFT_EXPORT enum ibv_rate mult_to_ibv_rate(int mult);
SOFT_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate);
SOFT_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps);
SOFT_EXPORT int ibv_fork_init(void);
SOFT_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void);
SOFT_EXPORT int ibv_dontfork_range(void *base, size_t size);
SOFT_EXPORT int ibv_dofork_range(void *base, size_t size);
SOFT_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file,
				    char *buf, size_t size);
SOFT_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					  struct ibv_device *dev,
					  const char *fnfmt, ...);
SOFT_EXPORT const char *ibv_get_sysfs_path(void);
SOFT_EXPORT void ibv_register_driver(const char *name, void *init_func);
SOFT_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context,
					 uint32_t pd_handle);
SOFT_EXPORT void ibv_unimport_pd(struct ibv_pd *pd);
SOFT_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle);
SOFT_EXPORT void ibv_unimport_mr(struct ibv_mr *mr);
SOFT_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context,
					 uint32_t dm_handle);
SOFT_EXPORT void ibv_unimport_dm(struct ibv_dm *dm);
SOFT_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece);
SOFT_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece);
SOFT_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp,
					   enum ibv_wr_opcode op,
					   uint32_t flags);
SOFT_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
					    struct ibv_ah_attr *attr,
					    uint8_t eth_mac[6], uint16_t *vid);
SOFT_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					     size_t length, uint64_t iova,
					     int fd, int access);

/* ibv_wc_status_str -- rdma-core's text for a completion status */
const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const str[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};

	if ((unsigned)status >= sizeof(str) / sizeof(str[0]))
		return "unknown";
	return str[status];
}

/* ibv_node_type_str -- text for a node type */
const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	static const char *const str[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};

	if (node_type < IBV_NODE_CA || node_type > IBV_NODE_UNSPECIFIED)
		return "unknown";
	return str[node_type];
}

/* ibv_port_state_str -- text for a port state */
const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	static const char *const str[] = {
		[IBV_PORT_NOP] = "no state change (NOP)",
		[IBV_PORT_DOWN] = "down",
		[IBV_PORT_INIT] = "init",
		[IBV_PORT_ARMED] = "armed",
		[IBV_PORT_ACTIVE] = "active",
		[IBV_PORT_ACTIVE_DEFER] = "active defer",
	};

	if (port_state < IBV_PORT_NOP || port_state > IBV_PORT_ACTIVE_DEFER)
		return "unknown";
	return str[port_state];
}

/* ibv_event_type_str -- text for an async event type */
const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const str[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] =
			"invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] =
			"local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};

	if ((unsigned)event >= sizeof(str) / sizeof(str[0]))
		return "unknown";
	return str[event];
}

static const struct {
	enum ibv_rate rate;
	int mult, mbps;
} rates[] = {
	{IBV_RATE_2_5_GBPS, 1, 2500},	    {IBV_RATE_5_GBPS, 2, 5000},
	{IBV_RATE_10_GBPS, 4, 10000},	    {IBV_RATE_20_GBPS, 8, 20000},
	{IBV_RATE_30_GBPS, 12, 30000},	    {IBV_RATE_40_GBPS, 16, 40000},
	{IBV_RATE_60_GBPS, 24, 60000},	    {IBV_RATE_80_GBPS, 32, 80000},
	{IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, 5, 14062},
	{IBV_RATE_56_GBPS, 22, 56250},	    {IBV_RATE_112_GBPS, 45, 112500},
	{IBV_RATE_168_GBPS, 67, 168750},    {IBV_RATE_25_GBPS, 10, 25781},
	{IBV_RATE_100_GBPS, 40, 103125},    {IBV_RATE_200_GBPS, 80, 206250},
	{IBV_RATE_300_GBPS, 120, 309375},   {IBV_RATE_28_GBPS, 11, 28125},
	{IBV_RATE_50_GBPS, 20, 53125},	    {IBV_RATE_400_GBPS, 160, 425000},
	{IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
	{IBV_RATE_1200_GBPS, 480, 1275000},
};
#define NRATES (sizeof(rates) / sizeof(rates[0]))

/* ibv_rate_to_mult -- rate as a multiple of 2.5 Gb/s */
int ibv_rate_to_mult(enum ibv_rate rate)
{
	size_t i;

	for (i = 0; i < NRATES; i++)
		if (rates[i].rate == rate)
			return rates[i].mult;
	return -1;
}

/* mult_to_ibv_rate -- inverse of ibv_rate_to_mult */
enum ibv_rate mult_to_ibv_rate(int mult)
{
	size_t i;

	for (i = 0; i < NRATES; i++)
		if (rates[i].mult == mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

/* ibv_rate_to_mbps -- rate in Mb/s */
int ibv_rate_to_mbps(enum ibv_rate rate)
{
	size_t i;

	for (i = 0; i < NRATES; i++)
		if (rates[i].rate == rate)
			return rates[i].mbps;
	return -1;
}

/* mbps_to_ibv_rate -- inverse of ibv_rate_to_mbps */
enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	size_t i;

	for (i = 0; i < NRATES; i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

/* ibv_fork_init -- nothing to do: no pinned pages */
int ibv_fork_init(void)
{
	return 0;
}

/* ibv_is_fork_initialized -- fork is always safe on softrdma */
enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/* ibv_dontfork_range -- no-op */
int ibv_dontfork_range(void *base, size_t size)
{
	return 0;
}

/* ibv_dofork_range -- no-op */
int ibv_dofork_range(void *base, size_t size)
{
	return 0;
}

/*
 * ibv_read_sysfs_file -- rdma-core's: the text of dir/file, a final
 * newline taken off and the string terminated; its length, or -1 (errno
 * from open or read, or a text that fills buf with no room for the NUL).
 * It reads any file, not only RDMA devices' (softrdma's have none, so
 * reading them still fails with ENOENT).
 */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size)
{
	size_t plen;
	char *path;
	ssize_t len;
	int fd;

	if (!dir || !file || !buf) {
		errno = EINVAL;
		return -1;
	}
	plen = strlen(dir) + strlen(file) + 2;
	path = malloc(plen);
	if (!path) {
		errno = ENOMEM;
		return -1;
	}
	snprintf(path, plen, "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return -1;
	len = read(fd, buf, size);
	close(fd);
	if (len > 0) {
		if (buf[len - 1] == '\n')
			buf[--len] = '\0';
		else if ((size_t)len < size)
			buf[len] = '\0';
		else
			return -1; /* no room to terminate it */
	}
	return (int)len;
}

/* ibv_read_ibdev_sysfs_file -- softrdma has no sysfs files */
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct ibv_device *dev,
			      const char *fnfmt, ...)
{
	errno = ENOENT;
	return -1;
}

/* ibv_get_sysfs_path -- the sysfs mount point */
const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

/* ibv_register_driver -- providers do not apply to softrdma */
void ibv_register_driver(const char *name, void *init_func)
{
}

/* ibv_import_pd -- not supported */
struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* ibv_unimport_pd -- not supported */
void ibv_unimport_pd(struct ibv_pd *pd)
{
}

/* ibv_import_mr -- not supported */
struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* ibv_unimport_mr -- not supported */
void ibv_unimport_mr(struct ibv_mr *mr)
{
}

/* ibv_import_dm -- not supported */
struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* ibv_unimport_dm -- not supported */
void ibv_unimport_dm(struct ibv_dm *dm)
{
}

/* ibv_set_ece -- not supported */
int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

/* ibv_query_ece -- not supported */
int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

/* ibv_query_qp_data_in_order -- no ordering guarantee is promised */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
			       uint32_t flags)
{
	return 0;
}

/* ibv_resolve_eth_l2_from_gid -- no Ethernet below softrdma */
int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
				struct ibv_ah_attr *attr, uint8_t eth_mac[6],
				uint16_t *vid)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

/* ibv_reg_dmabuf_mr -- not supported */
struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/*
 * Kernel-ABI struct converters (libibverbs' marshall helpers, IBVERBS_1.0
 * and 1.1).  librdmacm calls them on the kernel's answers; they hold no
 * device state.  As upstream, the QP converter leaves qp_state (the
 * caller's input) and rate_limit untouched.
 */
SOFT_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
					    struct ib_uverbs_ah_attr *src);
SOFT_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
					    struct ib_uverbs_qp_attr *src);
SOFT_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					     struct ib_user_path_rec *src);
SOFT_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					   struct ibv_sa_path_rec *src);

/* ibv_copy_ah_attr_from_kern -- ib_uverbs_ah_attr to ibv_ah_attr */
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
				struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

/* ibv_copy_qp_attr_from_kern -- ib_uverbs_qp_attr to ibv_qp_attr */
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
				struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = (enum ibv_qp_state)src->cur_qp_state;
	dst->path_mtu = (enum ibv_mtu)src->path_mtu;
	dst->path_mig_state = (enum ibv_mig_state)src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = (int)src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

/* ibv_copy_path_rec_from_kern -- ib_user_path_rec to ibv_sa_path_rec */
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
				 struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (int)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = (int)src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = (uint8_t)src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

/* ibv_copy_path_rec_to_kern -- ibv_sa_path_rec to ib_user_path_rec */
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
			       struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(src->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(src->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic ? 1 : 0;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible ? 1 : 0;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}
