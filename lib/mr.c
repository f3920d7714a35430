/* SPDX-License-Identifier: MIT */
/*
 * mr.c -- memory registrations of the caller's memory (or of memory made
 * for them, rdmamsg_mr_alloc), their export to peers and the import of a
 * peer's export.
 *
 * Export format (RDMAMSG_MR_EXPORT_SIZE bytes, little-endian): magic
 * "RMX1", access flags, rkey, reserved, address, length.  The bytes carry
 * no secret beyond the rkey, as on any RDMA fabric.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "dispatch.h"
#include "proto.h"
#include "xfer.h"

#define EXPORT_MAGIC RDMAMSG_EXPORT_MAGIC
#define ACCESS_ALL                                                  \
	(RDMAMSG_ACCESS_REMOTE_READ | RDMAMSG_ACCESS_REMOTE_WRITE | \
	 RDMAMSG_ACCESS_REMOTE_ATOMIC)

/* rdmamsg__verbs_access -- ibv access flags for RDMAMSG_ACCESS_* (local
 * write always) */
int rdmamsg__verbs_access(unsigned int access)
{
	int a = IBV_ACCESS_LOCAL_WRITE;

	if (access & RDMAMSG_ACCESS_REMOTE_READ)
		a |= IBV_ACCESS_REMOTE_READ;
	if (access & RDMAMSG_ACCESS_REMOTE_WRITE)
		a |= IBV_ACCESS_REMOTE_WRITE;
	if (access & RDMAMSG_ACCESS_REMOTE_ATOMIC)
		a |= IBV_ACCESS_REMOTE_ATOMIC;
	return a;
}

/* mr_reg -- a registration of len bytes at addr; owned: the length of
 * the mapping there that rdmamsg_mr_dereg unmaps (rdmamsg_mr_alloc), 0
 * for the caller's memory */
static int mr_reg(struct rdmamsg_ctx *ctx, void *addr, size_t len,
		  unsigned int access, size_t owned, struct rdmamsg_mr **mrp)
{
	struct rdmamsg_mr *mr;
	int ret;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	/* a rendezvous from it (rdmamsg_send_mr, rdmamsg_send_nocopy)
	 * gives the peer a window over just the bytes sent (rndv.c) */
	mr->bindable = rdmamsg__mw_cap(ctx);
	errno = 0;
	mr->mr = ctx->ops->reg_mr(
		ctx->pd, addr, len,
		rdmamsg__verbs_access(access) |
			(mr->bindable ? IBV_ACCESS_MW_BIND : 0));
	if (!mr->mr) {
		ret = rdmamsg__errno(ENOMEM);
		LOG_ERR("registering %zu bytes failed: %d", len, ret);
		goto err_free_mr;
	}
	mr->ctx = ctx;
	mr->addr = addr;
	mr->len = len;
	mr->owned = owned;
	mr->access = access;
	list_add_tail(&ctx->mrs, &mr->link);
	*mrp = mr;
	return 0;

err_free_mr:
	free(mr);
	return ret;
}

/* rdmamsg_mr_reg -- register the caller's memory */
RDMAMSG_EXPORT int rdmamsg_mr_reg(struct rdmamsg_ctx *ctx, void *addr,
				  size_t len, unsigned int access,
				  struct rdmamsg_mr **mrp)
{
	if (!ctx || !addr || !len || !mrp || (access & ~ACCESS_ALL) ||
	    len > UINTPTR_MAX - (uintptr_t)addr)
		return -EINVAL;
	return mr_reg(ctx, addr, len, access, 0, mrp);
}

/* rdmamsg_mr_alloc -- new memory, zeroed and registered: a sealed memfd
 * mapped shared (rdmamsg__shared_mem), which a provider sharing
 * registrations between processes of a host lets a peer there map, so
 * that one-sided operations and rendezvous reads of it are one memcpy
 * (softrdma: no process_vm_* call); anonymous memory where there is no
 * memfd.  rdmamsg_mr_dereg unmaps it. */
RDMAMSG_EXPORT int rdmamsg_mr_alloc(struct rdmamsg_ctx *ctx, size_t len,
				    unsigned int access,
				    struct rdmamsg_mr **mrp)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t page = pg > 0 ? (size_t)pg : 4096, mlen;
	void *p;
	int fd, ret;

	if (!ctx || !len || !mrp || (access & ~ACCESS_ALL))
		return -EINVAL;
	if (len > SIZE_MAX - (page - 1))
		return -ENOMEM;
	mlen = (len + page - 1) & ~(page - 1);
	p = rdmamsg__shared_mem("rdmamsg-mr", mlen, 0, &fd);
	if (!p) {
		LOG_ERR("no memory for a %zu-byte region", len);
		return -ENOMEM;
	}
	ret = mr_reg(ctx, p, len, access, mlen, mrp);
	if (fd >= 0)
		close(fd); /* the mapping keeps the file */
	if (ret < 0)
		munmap(p, mlen);
	return ret;
}

/* rdmamsg_mr_dereg -- deregister when nothing uses the region */
RDMAMSG_EXPORT int rdmamsg_mr_dereg(struct rdmamsg_mr **mrp)
{
	struct rdmamsg_mr *mr;

	if (!mrp || !*mrp)
		return -EINVAL;
	mr = *mrp;
	if (mr->busy)
		return -EBUSY;
	if (mr->iov)
		rdmamsg__mr_iov_dereg(mr); /* its pieces and mkey */
	else
		mr->ctx->ops->dereg_mr(mr->mr);
	if (mr->owned)
		munmap(mr->addr, mr->owned); /* rdmamsg_mr_alloc's */
	list_del(&mr->link);
	free(mr);
	*mrp = NULL;
	return 0;
}

/* rdmamsg_mr_get_data -- start and length */
RDMAMSG_EXPORT int rdmamsg_mr_get_data(const struct rdmamsg_mr *mr, void **addr,
				       size_t *len)
{
	if (!mr || (!addr && !len))
		return -EINVAL;
	if (addr)
		*addr = mr->addr;
	if (len)
		*len = mr->len;
	return 0;
}

/* rdmamsg_mr_export -- the bytes a peer imports */
RDMAMSG_EXPORT int rdmamsg_mr_export(const struct rdmamsg_mr *mr, void *buf,
				     size_t len)
{
	uint8_t *p = buf;
	uint32_t v32;
	uint64_t v64;

	if (!mr || !buf)
		return -EINVAL;
	if (len < RDMAMSG_MR_EXPORT_SIZE)
		return -ENOSPC;
	if (rdmamsg__mr_iov_exportable(mr))
		return -ENOTSUP; /* pieces without UMR: no one key */
	memset(p, 0, RDMAMSG_MR_EXPORT_SIZE);
	v32 = htole32(EXPORT_MAGIC);
	memcpy(p, &v32, 4);
	v32 = htole32(mr->access);
	memcpy(p + 4, &v32, 4);
	v32 = htole32(mr->mr->rkey);
	memcpy(p + 8, &v32, 4);
	v64 = htole64((uint64_t)(uintptr_t)mr->addr);
	memcpy(p + 16, &v64, 8);
	v64 = htole64((uint64_t)mr->len);
	memcpy(p + 24, &v64, 8);
	return 0;
}

/* rdmamsg_rmr_import -- a peer's region from its export */
RDMAMSG_EXPORT int rdmamsg_rmr_import(const void *buf, size_t len,
				      struct rdmamsg_rmr **rmrp)
{
	struct rdmamsg_rmr *r;
	uint32_t access, rkey;
	uint64_t addr, rlen;

	if (!buf || !rmrp)
		return -EINVAL;
	if (rdmamsg__export_decode(buf, len, ACCESS_ALL, &addr, &rlen, &rkey,
				   &access))
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->addr = addr;
	r->len = rlen;
	r->rkey = rkey;
	r->access = access;
	*rmrp = r;
	return 0;
}

/* rdmamsg_rmr_free -- forget an imported region */
RDMAMSG_EXPORT int rdmamsg_rmr_free(struct rdmamsg_rmr **rmrp)
{
	if (!rmrp)
		return -EINVAL;
	free(*rmrp);
	*rmrp = NULL;
	return 0;
}

/* rdmamsg_rmr_get_size -- the imported region's length */
RDMAMSG_EXPORT int rdmamsg_rmr_get_size(const struct rdmamsg_rmr *rmr,
					size_t *len)
{
	if (!rmr || !len)
		return -EINVAL;
	*len = (size_t)rmr->len;
	return 0;
}
