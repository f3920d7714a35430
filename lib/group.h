/* SPDX-License-Identifier: MIT */
/* group.h -- multicast groups (group.c): the hook of cm/ */
#ifndef RDMAMSG_GROUP_H
#define RDMAMSG_GROUP_H

#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

struct rdmamsg_ctx;

/* an rdma_cm event of a group's id (cm/conn.c); acknowledges it */
void rdmamsg__group_cm_event(struct rdmamsg_ctx *ctx, struct rdma_cm_event *ev);

#endif /* RDMAMSG_GROUP_H */
