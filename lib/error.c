/* SPDX-License-Identifier: MIT */
/* error.c -- error strings and version */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "rdmamsg.h"
#include "internal.h"

#define STR_(x) #x
#define STR(x)	STR_(x)

/* rdmamsg_version -- the library's version as "MAJOR.MINOR.PATCH" */
RDMAMSG_EXPORT const char *rdmamsg_version(void)
{
	return STR(RDMAMSG_VERSION_MAJOR) "." STR(
		RDMAMSG_VERSION_MINOR) "." STR(RDMAMSG_VERSION_PATCH);
}

/* rdmamsg_strerror -- a constant description for any value a call returns */
RDMAMSG_EXPORT const char *rdmamsg_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -EINVAL:
		return "invalid argument";
	case -ENOMEM:
		return "out of memory";
	case -EAGAIN:
		return "resource temporarily unavailable, try again";
	case -EBUSY:
		return "work is pending";
	case -EMSGSIZE:
		return "message too large";
	case -ENOTCONN:
		return "endpoint is not connected";
	case -ENOTSUP:
		return "operation not supported by this fabric or device";
	case -ECANCELED:
		return "operation canceled";
	case -ETIMEDOUT:
		return "operation timed out";
	case -ECONNREFUSED:
		return "connection refused by peer";
	case -ECONNRESET:
		return "connection reset by peer";
	case -EACCES:
		return "remote access denied";
	case -EREMOTEIO:
		return "remote operation failed";
	case -ENODEV:
		return "no RDMA device";
	case -EPROTO:
		return "protocol error or incompatible peer";
	case -EALREADY:
		return "operation already in progress";
	case -EHOSTUNREACH:
		return "peer address or route cannot be resolved";
	case -EADDRINUSE:
		return "address already in use";
	case -ENOENT:
		return "no such device or request";
	case -ENOBUFS:
		return "receive buffers exhausted";
	case -ERANGE:
		return "outside the memory region";
	case -ENOSPC:
		return "output buffer too small";
	case -EPIPE:
		return "group or endpoint is closing";
	case -EPERM:
		return "not permitted in this role";
	case -EADDRNOTAVAIL:
		return "address not available (not multicast, or on no device)";
	case -EMFILE:
		return "too many open files";
	case -EIO:
		return "the device failed the operation";
	case -ENETDOWN:
		return "the device port went down";
	}
	return "unknown error";
}
