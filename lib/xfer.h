/* SPDX-License-Identifier: MIT */
/*
 * xfer.h -- internals of the transfers beside eager messages: memory
 * registrations, one-sided operations, rendezvous (large messages) and
 * request/response.  Private.
 */
#ifndef RDMAMSG_XFER_H
#define RDMAMSG_XFER_H

#include <stdint.h>

#include "idtab.h"
#include "internal.h"
#include "proto.h"

/* the transfer header (struct rdmamsg__xhdr, X_*, XF_*) is in proto.h */

struct rndv_send;   /* a rendezvous source (rndv.c) */
struct rdmamsg__mw; /* a memory window (rndv.c) */

/* What a signalled work request of this layer was (one per send slot). */
enum { OP_NONE = 0, OP_RMA, OP_PULL, OP_MW, OP_INV };

struct rdmamsg__xop {
	uint8_t kind;
	void (*cb)(struct rdmamsg_ep *ep, int status, uint64_t value,
		   void *op_ctx);
	void *op_ctx;
	struct rdmamsg_mr *mr; /* kept busy until the completion */
	struct rdmamsg__pull *pull;
	struct rndv_send *send; /* OP_INV: one of its windows ... */
	struct rdmamsg__mw *mw; /* ... this one, is invalidated */
	uint32_t len;
	int atomic;
};

/* freed states of one kind kept for reuse (rndv.c): each's first bytes
 * link to the next */
struct rdmamsg__scache {
	void *head;
	uint32_t n;
};

/* per-endpoint state of this layer, made on first use */
struct rdmamsg__xfer {
	struct rdmamsg_ep *ep;
	struct rdmamsg__xop *ops;    /* indexed like ep->slots */
	struct rdmamsg_buf *atom;    /* 8 bytes per slot for atomic results */
	struct rdmamsg__idt sends;   /* rendezvous sends awaiting X_FIN */
	struct rdmamsg__idt reqs;    /* our outstanding requests */
	struct rdmamsg__list pulls;  /* rendezvous receives, queued/active */
	struct rdmamsg__list fins;   /* FINs waiting for pool memory */
	struct rdmamsg__list order;  /* ordered pulls, messages held behind */
	struct rdmamsg__list invs;   /* windows waiting for a send slot */
	struct rdmamsg__mw *mw_free; /* windows ready to bind (rndv.c) */
	int mw_state;		     /* 1: bind windows, -1: register */
	uint32_t nsends;	     /* rendezvous sources alive */
	uint32_t ncopied;	     /* of them copies of a caller's message */
	uint64_t copied_bytes;	     /* their lengths (rndv.c's copy_full) */
	int draining;
	uint32_t active_pulls, reads_inflight;
	uint64_t active_bytes;
	uint32_t reading;	/* active pulls with bytes still to come */
	uint64_t reading_bytes; /* their lengths */
	uint32_t unposted;	/* active pulls with bytes no READ asked for */
	int held_back;		/* the first waiting pull met a bound that
				 * nothing has loosened since (rndv.c) */
	struct rdmamsg__list req_due; /* our requests by deadline */
	struct rdmamsg__list sreqs;   /* peer's requests not answered */
	struct rdmamsg__timer req_timer;
	uint64_t late;
	/* the peer's announcements whose FIN is not posted yet: each holds
	 * the credit of the message that carried it (rndv.c) */
	uint32_t rts_held;
	struct rdmamsg_buf *fin_sending; /* rdmamsg__xfer_send's FIN */
	/* the FIN's registered buffer where the pool has none and the QP
	 * no inline room (xfer.c's fin_ctl), made on first need */
	struct rdmamsg_buf *fin_ctl;
	int fin_ctl_err; /* registering it failed (logged once) */
	int down;
	/* the message being received invalidated rx_inv (msg.c's rx_inv,
	 * taken by its FIN) */
	uint32_t rx_inv;
	int rx_inv_set;

	/* freed rendezvous states (rndv.c), reused: no allocation per
	 * message */
	struct rdmamsg__scache sfree, pfree;
};

struct rdmamsg_mr {
	struct rdmamsg_ctx *ctx;
	struct ibv_mr *mr;
	char *addr;
	size_t len;
	size_t owned; /* the mapping rdmamsg_mr_alloc made at addr, or 0 */
	unsigned int access;
	unsigned int busy; /* operations in flight */
	int bindable;	   /* registered with IBV_ACCESS_MW_BIND (rndv.c) */
	struct rdmamsg__list link;
	struct rdmamsg__mr_iov
		*iov; /* rdmamsg_mr_reg_iov/_strided (mr_iov.c) */
};

/* mr_iov.c: regions over non-contiguous memory */
#define RDMAMSG__IOV_LOCAL_SGE 2 /* the endpoints' QPs' max_send_sge */
int rdmamsg__mr_iov_exportable(const struct rdmamsg_mr *mr);
int rdmamsg__mr_iov_sges(const struct rdmamsg_mr *mr, size_t off, size_t len,
			 struct ibv_sge *sge, int max);
void rdmamsg__mr_iov_dereg(struct rdmamsg_mr *mr);

struct rdmamsg_rmr {
	uint64_t addr, len;
	uint32_t rkey;
	unsigned int access;
};

/* msg.c: a FIN as SEND_WITH_INV of rkey */
int rdmamsg__ep_send_x_inv(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf,
			   size_t len, uint32_t rkey);

/* xfer.c */
int rdmamsg__xfer_get(struct rdmamsg_ep *ep, struct rdmamsg__xfer **xf);
int rdmamsg__xfer_send(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x,
		       const void *data, size_t len);
void rdmamsg__xfer_posted(struct rdmamsg_ep *ep, const struct rdmamsg_buf *n);

/* rma.c */
int rdmamsg__xop_post(struct rdmamsg_ep *ep, struct ibv_send_wr *wr,
		      const struct rdmamsg__xop *op);

/* rndv.c */
int rdmamsg__rndv_send(struct rdmamsg_ep *ep, int inner, uint64_t req,
		       const void *data, size_t len, struct rdmamsg_mr *mr,
		       struct rdmamsg_buf *zb, int xflags, uint32_t imm,
		       void *op_ctx, int report);
int rdmamsg__rndv_hold(struct rdmamsg_ep *ep, int kind, uint64_t req,
		       struct rdmamsg_buf *take, const void *data, size_t len,
		       uint32_t imm, unsigned int flags);
void rdmamsg__rndv_inv_done(struct rdmamsg_ep *ep, struct rdmamsg__xop *op,
			    int status);
void rdmamsg__rndv_inv_retry(struct rdmamsg_ep *ep);
void rdmamsg__rndv_recv(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x);
void rdmamsg__rndv_pull_done(struct rdmamsg_ep *ep, struct rdmamsg__xop *op,
			     int status);
void rdmamsg__rndv_pump(struct rdmamsg_ep *ep);
void rdmamsg__rndv_refuse_idle(struct rdmamsg_ep *ep);
void rdmamsg__rndv_fin_retry(struct rdmamsg_ep *ep);
void rdmamsg__rndv_unsent(struct rdmamsg_ep *ep, uint64_t id, int status);
void rdmamsg__rndv_fin_later(struct rdmamsg_ep *ep,
			     const struct rdmamsg__xhdr *fin);
void rdmamsg__rndv_fin_posted(struct rdmamsg_ep *ep);
void rdmamsg__rndv_down(struct rdmamsg_ep *ep, int status);
void rdmamsg__rndv_free(struct rdmamsg_ep *ep);

/* req.c */
void rdmamsg__req_recv(struct rdmamsg_ep *ep, int kind, uint64_t req,
		       void *data, size_t len);
void rdmamsg__req_timeout(struct rdmamsg_ep *ep);
void rdmamsg__req_down(struct rdmamsg_ep *ep, int status);
void rdmamsg__req_fail(struct rdmamsg_ep *ep, uint64_t id, int status);
void rdmamsg__req_free(struct rdmamsg_ep *ep);

#endif /* RDMAMSG_XFER_H */
