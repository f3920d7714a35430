/* SPDX-License-Identifier: MIT */
/*
 * rdmamsg.h -- high-level messaging over RDMA
 *
 * The one public header.  All objects are opaque; every call returns 0 or a
 * negative errno and leaves its output parameters untouched on failure.
 */
#ifndef RDMAMSG_H
#define RDMAMSG_H

#ifdef __cplusplus
extern "C" {
#endif

#define RDMAMSG_VERSION_MAJOR 0
#define RDMAMSG_VERSION_MINOR 1
#define RDMAMSG_VERSION_PATCH 0

/* rdmamsg_version -- the library's version as "MAJOR.MINOR.PATCH" */
const char *rdmamsg_version(void);

/* rdmamsg_strerror -- a constant description for any value a call returns */
const char *rdmamsg_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* RDMAMSG_H */
