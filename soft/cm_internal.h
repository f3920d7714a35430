/* SPDX-License-Identifier: MIT */
/* cm_internal.h -- softrdma's librdmacm: ids, channels, events, wire format */
#ifndef SOFTRDMA_CM_INTERNAL_H
#define SOFTRDMA_CM_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "softrdma.h"

/*
 * Private data sizes of the IB CM messages (IBTA 12.6); RoCE hardware
 * reports the whole field to the receiver, zero padded.  PS_TCP/PS_UDP
 * requests spend 36 bytes of the REQ on the CMA header.
 */
#define SCM_REQ_PDATA	   92
#define SCM_REP_PDATA	   196
#define SCM_REJ_PDATA	   148
#define SCM_SIDR_REQ_PDATA 216
#define SCM_SIDR_REP_PDATA 136
#define SCM_CMA_HDR	   36
#define SCM_MAX_PDATA	   256

/* SIDR REP status (enum ib_cm_sidr_status). */
#define SCM_SIDR_UNSUPPORTED 1
#define SCM_SIDR_REJECT	     2

/* IB CM reject reasons (enum ib_cm_rej_reason). */
#define SCM_REJ_TIMEOUT		   4
#define SCM_REJ_INVALID_SERVICE_ID 8
#define SCM_REJ_CONSUMER_DEFINED   28
#define SCM_REJ_VENDOR_OPTION	   35
/*
 * softrdma's own, never reported: no path joins the two sides (another
 * /dev/shm on this host, or another host while SOFTRDMA_NET=1 is not set
 * on both); the active side reports UNREACHABLE as for a lost REQ.
 */
#define SCM_REJ_NO_PATH 0xff00

/* librdmacm's default when no conn_param gives the retry counts. */
#define SCM_DEFAULT_RETRY 7

/*
 * A REP is queued as CONNECT_RESPONSE; rdma_get_cm_event turns it into
 * ESTABLISHED (or CONNECT_ERROR) when the id has a QP, as librdmacm does.
 */
#define SCM_EVENT_CONN_RESP RDMA_CM_EVENT_CONNECT_RESPONSE

enum scm_state {
	SCM_IDLE,
	SCM_ADDR_BOUND,
	SCM_ADDR_RESOLVED,
	SCM_ROUTE_RESOLVED,
	SCM_LISTEN,
	SCM_CONNECTING,	   /* active: TCP connect in progress */
	SCM_REQ_SENT,	   /* active: waiting for REP */
	SCM_REP_RCVD,	   /* active: REP queued, RTU not sent yet */
	SCM_REQ_WAIT,	   /* passive, hidden: socket accepted, no REQ yet */
	SCM_REQ_RCVD,	   /* passive: CONNECT_REQUEST reported */
	SCM_REP_SENT,	   /* passive: accepted, waiting for RTU */
	SCM_CONNECTED,	   /* established */
	SCM_DISCONNECTING, /* DREQ sent, waiting for DREP */
	SCM_DREQ_RCVD,	   /* DISCONNECTED reported, DREP when the user
			    * disconnects or destroys the id */
	SCM_DISCONNECTED,  /* terminal: disconnected, rejected, failed */
};

/* Wire message types (one fixed-size struct scm_wire each). */
enum scm_msg {
	SCM_MSG_REQ = 1,
	SCM_MSG_REP,
	SCM_MSG_REJ,
	SCM_MSG_RTU,
	SCM_MSG_DREQ,
	SCM_MSG_DREP,
};

/* 0x5c: the format before the registry id (peers refuse each other). */
#define SCM_WIRE_MAGIC 0x5d
#define SCM_REG_ID_LEN 16

/*
 * One CM message on the TCP stream; integers in network order.  Every
 * field comes from the peer: scm__wire_check validates a message whole
 * before any field is used.
 */
struct scm_wire {
	uint8_t magic;
	uint8_t type;
	uint8_t pdata_len;
	uint8_t qp_type;
	uint16_t reason;
	uint16_t ps;
	uint32_t qpn;
	uint32_t psn;
	uint8_t resp_res;
	uint8_t init_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint8_t mtu;
	/* REQ: the traffic class of the requester's path (the IB CM's
	 * CM_REQ_PRIMARY_TRAFFIC_CLASS); 0 in the other messages */
	uint8_t tclass;
	uint32_t qkey;
	uint8_t gid[16];
	/* the sender's shared-memory registry: peers share it, or are
	 * on other hosts (RoCE v2) */
	uint8_t reg_id[SCM_REG_ID_LEN];
	uint8_t pdata[SCM_SIDR_REQ_PDATA]; /* the largest: SIDR REQ */
} __attribute__((packed));

_Static_assert(sizeof(struct scm_wire) == 276, "CM wire message size");

/*
 * The listener's defences (cm_conn.c): an accepted socket must deliver a
 * complete, valid REQ within the handshake time, or it is closed; at most
 * SCM_HALF_OPEN_MAX sockets per listener wait for theirs (the oldest one
 * idle for a quarter of that time makes room for a newcomer; with none,
 * accept() pauses); a REQ beyond the listen backlog waits, unanswered,
 * until the user takes a pending request.
 */
#define SCM_HANDSHAKE_MS  5000
#define SCM_HALF_OPEN_MAX 1024
/* how long accept() pauses when out of fds or of half-open room (ms) */
#define SCM_ACCEPT_PAUSE_MS 100

/* scm_wire.c: pure, for the fuzzer too */
int scm__wire_check(const struct scm_wire *w);
size_t scm__wire_pdata_max(const struct scm_wire *w);

struct scm_id;

struct scm_channel {
	struct rdma_event_channel ch; /* public part, fd is an eventfd */
	struct scm_event *head, *tail;
	int sync;    /* private channel of a synchronous id */
	int waiters; /* threads blocked in rdma_get_cm_event() */
	int dead;    /* destroyed while some waited: kept for them */
	struct scm_channel *dead_next; /* the dead ones (cm.c scm_dead) */
};

/* A multicast group an id joined (librdmacm's cma_multicast). */
struct scm_mc {
	struct scm_mc *next;
	struct sockaddr_storage addr;
	union ibv_gid mgid;
	void *context;
	uint32_t join_flags;
	uint32_t reported, completed; /* its events handed out / acked */
};

struct scm_event {
	struct rdma_cm_event ev; /* public part */
	struct scm_id *owner;	 /* id whose ack count this event feeds */
	struct scm_mc *mc;	 /* multicast event: counted on the group */
	struct scm_event *next;
	uint8_t pdata[SCM_MAX_PDATA];
};

/*
 * librdmacm's rsocket code (which runs on softrdma's ids when softrdma is
 * preloaded) reads a few fields of its struct cma_id_private, which begins
 * with the rdma_cm_id: ucma_complete() reads sync, ucma_max_qpsize() reads
 * cma_dev->max_qpsize.  struct scm_id begins the same way (rdma-core 44's
 * layout), and cma_dev points to a struct cma_device lookalike.
 */
struct scm_cma_dev {
	void *dev;
	void *entry[2];
	void *verbs, *pd, *xrcd, *port;
	uint64_t guid;
	int port_cnt;
	int refcnt;
	int max_qpsize;
	uint8_t max_initiator_depth;
	uint8_t max_responder_resources;
	int ibv_idx;
	uint8_t is_device_dead;
};

struct scm_id {
	struct rdma_cm_id id;		   /* public part */
	const struct scm_cma_dev *cma_dev; /* librdmacm's layout from here */
	void *connect;			   /* ai_connect of create_ep */
	size_t connect_len;
	int events_completed;
	int connect_error;
	int sync;
	/* softrdma's own from here */
	struct soft_list link; /* all ids of the process */
	struct scm_id *hnext;  /* the same handle's hash bucket */
	uint64_t handle;       /* epoll key: ids are looked up, never trusted */
	struct soft_list tlink;	  /* in the list of ids with a deadline */
	struct soft_list waiting; /* listener: children accepted in that
				   * order, REQ_WAIT ones at least (others
				   * are dropped as the list is walked) */
	struct soft_list wlink;	  /* child: in its listener's waiting */
	enum scm_state state;
	int destroying;
	int fd; /* TCP socket: bound, listening or connected */
	int in_epoll;
	uint32_t reported, completed; /* events handed out / acked */
	pthread_cond_t cond;
	struct scm_id *listen; /* parent listener of a passive id */
	int backlog;
	int listened; /* rdma_listen succeeded once: it may have children */
	int accept_paused; /* listener: out of fds, accept() resumes later */
	int deferred;	   /* child: REQ beyond the backlog, held in req */
	uint64_t born_ms;  /* child: accepted at (oldest evicted first) */
	int dev_ref;	   /* holds a reference on the shared device */
	int bound;	   /* owns its port (the kernel's bind list) */

	/* connection parameters (local view) */
	uint8_t init_depth, resp_res;
	uint8_t retry_count, rnr_retry_count, flow_control, srq;
	uint8_t mtu; /* enum ibv_mtu */
	/* tos: RDMA_OPTION_ID_TOS, or a passive id's REQ's traffic class;
	 * the QP takes path.traffic_class, fixed when the route is */
	uint8_t tos, tos_set, ack_timeout, ack_timeout_set;
	int reuseaddr, afonly, afonly_set;
	uint32_t psn;
	int sgid_index;
	/* remote side, from REQ or REP */
	int has_remote;
	uint32_t remote_qpn, remote_psn;
	union ibv_gid remote_gid;
	int peer_gone;
	int dreq_held;		      /* REP_RCVD: a DREQ, for the RTU */
	int timewait;		      /* TIMEWAIT_EXIT due at deadline_ms */
	uint64_t deadline_ms;	      /* 0: none (set by scm__deadline) */
	uint64_t connect_deadline_ms; /* REP must come by then */
	uint64_t refused_until_ms;    /* refused connects retried until */

	/* pending REQ, sent when the TCP connect completes */
	struct scm_wire req;
	/* receive framing */
	uint8_t rbuf[sizeof(struct scm_wire)];
	size_t rlen;

	struct ibv_qp_init_attr *qp_init_attr; /* rdma_create_ep passive */
	struct ibv_sa_path_rec path;
	struct ibv_ece local_ece;
	struct scm_mc *mcs; /* joined groups */
};

_Static_assert(offsetof(struct scm_id, sync) ==
		       sizeof(struct rdma_cm_id) + 3 * sizeof(void *) + 8,
	       "cma_id_private layout (rdma-core 44)");
_Static_assert(offsetof(struct scm_cma_dev, max_qpsize) == 72,
	       "cma_device layout (rdma-core 44)");

static inline struct scm_id *scm_id_of(struct rdma_cm_id *id)
{
	return (struct scm_id *)id;
}

static inline struct scm_channel *scm_ch_of(struct rdma_event_channel *ch)
{
	return (struct scm_channel *)ch;
}

/* librdmacm's ERR(): set errno, return -1. */
static inline int scm_err(int e)
{
	errno = e;
	return -1;
}

/* cm.c */
extern pthread_mutex_t scm__lock;
struct scm_channel *scm__channel_new(int sync);
void scm__channel_free(struct scm_channel *ch);
struct scm_event *scm__post(struct scm_id *id, struct scm_id *owner,
			    enum rdma_cm_event_type type, int status,
			    const void *pdata, size_t pdata_len,
			    size_t field_len);
void scm__ack_locked(struct scm_event *evt);
int scm__get_event_locked(struct scm_channel *ch, struct scm_event **out);
int scm__complete(struct scm_id *s);
struct scm_id *scm__id_new(struct scm_channel *ch, void *context,
			   enum rdma_port_space ps, enum ibv_qp_type qp_type);
void scm__id_free_locked(struct scm_id *s);
struct scm_id *scm__id_find(uint64_t handle);
int scm__id_alive(uint64_t handle);
void scm__deadline(struct scm_id *s, uint64_t ms);
struct scm_id *scm__next_due(uint64_t now);
int scm__create_id_qpt(struct rdma_cm_id **id, enum rdma_port_space ps,
		       enum ibv_qp_type qpt);
uint64_t scm__now_ms(void);
int scm__thread_get(void);
void scm__thread_put(void);
int scm__epoll_add(struct scm_id *s, uint32_t events);
int scm__epoll_mod(struct scm_id *s, uint32_t events);
void scm__epoll_del(struct scm_id *s);
void scm__wake(void);
void scm__close_fd(struct scm_id *s);

/* cm_addr.c */
int scm__dev_attach(struct scm_id *s);
void scm__dev_detach(struct scm_id *s);
struct ibv_xrcd *scm__dev_xrcd(void);
int scm__dev_max(uint8_t *init_depth, uint8_t *resp_res);
void scm__addr_gid(const struct sockaddr *sa, union ibv_gid *gid);
socklen_t scm__addr_len(const struct sockaddr *sa);
int scm__addr_is_any(const struct sockaddr *sa);
int scm__bind_socket(struct scm_id *s, const struct sockaddr *sa);
int scm__set_afonly(struct scm_id *s, int afonly);
int scm__port_check(const struct scm_id *s, const struct sockaddr *sa,
		    int reuse);
void scm__fill_path(struct scm_id *s);
enum ibv_mtu scm__path_mtu(const struct sockaddr *dst, enum ibv_mtu dev_mtu);

/* cm_mcast.c */
void scm__mc_process_locked(struct scm_event *e);
void scm__mc_free_all_locked(struct scm_id *s);

/* cm_conn.c */
void scm__progress(uint32_t events, struct scm_id *s);
void scm__timeouts(uint64_t now);
int scm__process_conn_resp(struct scm_id *s, struct scm_event *evt);
void scm__teardown_locked(struct scm_id *s);
void scm__backlog_drain(struct scm_id *l);
void scm__child_gone(struct scm_id *c);
int scm__send(struct scm_id *s, struct scm_wire *w);
int scm__modify_qp_err(struct scm_id *s);

#endif /* SOFTRDMA_CM_INTERNAL_H */
