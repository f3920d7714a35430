/* SPDX-License-Identifier: MIT */
/* cm_stubs.c -- librdmacm entry points softrdma does not serve (yet) */
#include "config.h"
#include "softrdma.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/uio.h>
#include <rdma/rsocket.h>

#include "cm_internal.h"

/*
 * An LD_PRELOAD library must define every name librdmacm exports (Debian
 * binaries are BIND_NOW): the ones softrdma does not implement fail cleanly.
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

/* rsockets: not provided by softrdma */
#define SCM_RS_STUB(ret, name, args) \
	SOFT_EXPORT ret name args;   \
	ret name args                \
	{                            \
		errno = ENOSYS;      \
		return (ret)-1;      \
	}

SCM_RS_STUB(int, rsocket, (int domain, int type, int protocol))
SCM_RS_STUB(int, rbind, (int s, const struct sockaddr *a, socklen_t l))
SCM_RS_STUB(int, rlisten, (int s, int backlog))
SCM_RS_STUB(int, raccept, (int s, struct sockaddr *a, socklen_t *l))
SCM_RS_STUB(int, rconnect, (int s, const struct sockaddr *a, socklen_t l))
SCM_RS_STUB(int, rshutdown, (int s, int how))
SCM_RS_STUB(int, rclose, (int s))
SCM_RS_STUB(ssize_t, rrecv, (int s, void *b, size_t n, int f))
SCM_RS_STUB(ssize_t, rrecvfrom,
	    (int s, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l))
SCM_RS_STUB(ssize_t, rrecvmsg, (int s, struct msghdr *m, int f))
SCM_RS_STUB(ssize_t, rsend, (int s, const void *b, size_t n, int f))
SCM_RS_STUB(ssize_t, rsendto,
	    (int s, const void *b, size_t n, int f, const struct sockaddr *a,
	     socklen_t l))
SCM_RS_STUB(ssize_t, rsendmsg, (int s, const struct msghdr *m, int f))
SCM_RS_STUB(ssize_t, rread, (int s, void *b, size_t n))
SCM_RS_STUB(ssize_t, rreadv, (int s, const struct iovec *v, int n))
SCM_RS_STUB(ssize_t, rwrite, (int s, const void *b, size_t n))
SCM_RS_STUB(ssize_t, rwritev, (int s, const struct iovec *v, int n))
SCM_RS_STUB(int, rpoll, (struct pollfd * f, nfds_t n, int t))
SCM_RS_STUB(int, rselect,
	    (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t))
SCM_RS_STUB(int, rgetpeername, (int s, struct sockaddr *a, socklen_t *l))
SCM_RS_STUB(int, rgetsockname, (int s, struct sockaddr *a, socklen_t *l))
SCM_RS_STUB(int, rsetsockopt,
	    (int s, int lv, int o, const void *v, socklen_t l))
SCM_RS_STUB(int, rgetsockopt, (int s, int lv, int o, void *v, socklen_t *l))
SCM_RS_STUB(off_t, riomap, (int s, void *b, size_t n, int p, int f, off_t o))
SCM_RS_STUB(int, riounmap, (int s, void *b, size_t n))

SOFT_EXPORT int rfcntl(int s, int cmd, ...);

/* rfcntl -- not provided */
int rfcntl(int s, int cmd, ...)
{
	(void)s;
	(void)cmd;
	errno = ENOSYS;
	return -1;
}

SOFT_EXPORT size_t riowrite(int s, const void *b, size_t n, off_t o, int f);

/* riowrite -- not provided (returns size_t: 0 with errno) */
size_t riowrite(int s, const void *b, size_t n, off_t o, int f)
{
	(void)s;
	(void)b;
	(void)n;
	(void)o;
	(void)f;
	errno = ENOSYS;
	return 0;
}
