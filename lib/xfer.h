/* SPDX-License-Identifier: MIT */
/*
 * xfer.h -- internals of the transfers beside eager messages: memory
 * registrations, one-sided operations, rendezvous (large messages) and
 * request/response.  Private.
 */
#ifndef RDMAMSG_XFER_H
#define RDMAMSG_XFER_H

#include <stdint.h>

#include "internal.h"

/*
 * Control messages of this layer travel as eager data messages flagged
 * F_XFER: they use data credits and the backlog like any message, and the
 * small-message fast path only tests one more bit in a mask it tests
 * anyway.  Each starts with this header, copied as it is in memory (host
 * byte order, so only peers of the same byte order agree; issue 10's one
 * wire-format header fixes that); a request's or response's payload
 * follows it.
 */
struct rdmamsg__xhdr {
	uint8_t kind;  /* X_* */
	uint8_t inner; /* X_RTS: what the pulled bytes are (X_MSG ...) */
	uint8_t flags; /* X_RTS: XF_IMM */
	uint8_t pad;
	int32_t status; /* X_FIN: 0 or the receiver's refusal */
	uint64_t id;	/* X_RTS/X_FIN: sender's transfer id */
	uint64_t req;	/* X_REQ/X_RESP, inner X_REQ/X_RESP: request id */
	uint64_t addr;	/* X_RTS: source */
	uint64_t len;
	uint32_t rkey;
	uint32_t imm;
};

#define RDMAMSG_XHDR ((uint32_t)sizeof(struct rdmamsg__xhdr))

enum { X_MSG = 0, X_RTS = 1, X_FIN = 2, X_REQ = 3, X_RESP = 4 };
enum { XF_IMM = 1 };

/* What a signalled work request of this layer was (one per send slot). */
enum { OP_NONE = 0, OP_RMA, OP_PULL };

struct rdmamsg__xop {
	uint8_t kind;
	void (*cb)(struct rdmamsg_ep *ep, int status, uint64_t value,
		   void *op_ctx);
	void *op_ctx;
	struct rdmamsg_mr *mr; /* kept busy until the completion */
	struct rdmamsg__pull *pull;
	uint32_t len;
	int atomic;
};

/* an id table: O(1) ids with a generation, so stale ids never match */
struct rdmamsg__idtab {
	struct rdmamsg__ident {
		void *p;
		uint32_t gen;
		uint32_t next;
	} * e;
	uint32_t cap, free_head, used;
};

/* per-endpoint state of this layer, made on first use */
struct rdmamsg__xfer {
	struct rdmamsg_ep *ep;
	struct rdmamsg__xop *ops;    /* indexed like ep->slots */
	struct rdmamsg_buf *atom;    /* 8 bytes per slot for atomic results */
	struct rdmamsg__idtab sends; /* rendezvous sends awaiting X_FIN */
	struct rdmamsg__idtab reqs;  /* our outstanding requests */
	struct rdmamsg__list pulls;  /* rendezvous receives, queued/active */
	uint32_t active_pulls, reads_inflight;
	uint64_t active_bytes;
	struct rdmamsg__list req_due; /* our requests by deadline */
	struct rdmamsg__list sreqs;   /* peer's requests not answered */
	struct rdmamsg__timer req_timer;
	uint64_t late;
	int down;
};

struct rdmamsg_mr {
	struct rdmamsg_ctx *ctx;
	struct ibv_mr *mr;
	char *addr;
	size_t len;
	unsigned int access;
	unsigned int busy; /* operations in flight */
	struct rdmamsg__list link;
};

struct rdmamsg_rmr {
	uint64_t addr, len;
	uint32_t rkey;
	unsigned int access;
};

/* xfer.c */
int rdmamsg__xfer_get(struct rdmamsg_ep *ep, struct rdmamsg__xfer **xf);
int rdmamsg__idtab_add(struct rdmamsg__idtab *t, void *p, uint64_t *id);
void *rdmamsg__idtab_find(const struct rdmamsg__idtab *t, uint64_t id);
void rdmamsg__idtab_del(struct rdmamsg__idtab *t, uint64_t id);
int rdmamsg__xfer_send(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x,
		       const void *data, size_t len);

/* rma.c */
int rdmamsg__xop_post(struct rdmamsg_ep *ep, struct ibv_send_wr *wr,
		      const struct rdmamsg__xop *op);

/* rndv.c */
int rdmamsg__rndv_send(struct rdmamsg_ep *ep, int inner, uint64_t req,
		       const void *data, size_t len, struct rdmamsg_mr *mr,
		       int has_imm, uint32_t imm, void *op_ctx, int report);
void rdmamsg__rndv_recv(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x);
void rdmamsg__rndv_pull_done(struct rdmamsg_ep *ep, struct rdmamsg__xop *op,
			     int status);
void rdmamsg__rndv_pump(struct rdmamsg_ep *ep);
void rdmamsg__rndv_down(struct rdmamsg_ep *ep, int status);
void rdmamsg__rndv_free(struct rdmamsg_ep *ep);

/* req.c */
void rdmamsg__req_recv(struct rdmamsg_ep *ep, int kind, uint64_t req,
		       void *data, size_t len);
void rdmamsg__req_timeout(struct rdmamsg_ep *ep);
void rdmamsg__req_down(struct rdmamsg_ep *ep, int status);
void rdmamsg__req_free(struct rdmamsg_ep *ep);

#endif /* RDMAMSG_XFER_H */
