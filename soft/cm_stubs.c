/* SPDX-License-Identifier: MIT */
/* cm_stubs.c -- librdmacm entry points softrdma does not serve (yet) */
#include "config.h"
#include "softrdma.h"

#include <errno.h>
#include <string.h>

#include "cm_internal.h"

/*
 * ECE: the rdma_* names softrdma serves trivially.  librdmacm's rsocket
 * calls (rsocket, rconnect, ...) are not defined here: librdmacm's own
 * implementation runs on top of the rdma_* and ibv_* names softrdma
 * interposes, as it does over any provider.
 */

SOFT_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece);
SOFT_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece);

/* rdma_set_local_ece -- recorded; softrdma has no ECE options to offer */
int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece)
		return scm_err(EINVAL);
	scm_id_of(id)->local_ece = *ece;
	return 0;
}

/* rdma_get_remote_ece -- the peer offered none */
int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece)
		return scm_err(EINVAL);
	memset(ece, 0, sizeof(*ece));
	return 0;
}
