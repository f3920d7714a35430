/* SPDX-License-Identifier: MIT */
/*
 * rdmamsg.h -- high-level messaging over RDMA
 *
 * The one public header.  All objects are opaque; every call returns 0 or a
 * negative errno and leaves its output parameters untouched on failure.  A
 * call that fails never invokes its callback.
 *
 * Threads: a context and everything made from it (endpoints, listeners,
 * buffers) belong to the one thread that drives the context's loop.  The only
 * call that is safe from any thread is rdmamsg_ctx_wakeup().  The logging
 * setters are process-wide and meant to be called before contexts exist.
 *
 * Callbacks run from the context's loop (ev_run() of the caller's libev loop,
 * rdmamsg_ctx_progress() or rdmamsg_ctx_run()), never from inside the call
 * that caused them, except where a description says so.
 */
#ifndef RDMAMSG_H
#define RDMAMSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDMAMSG_VERSION_MAJOR 0
#define RDMAMSG_VERSION_MINOR 1
#define RDMAMSG_VERSION_PATCH 0

/* libev's loop; rdmamsg.h does not require ev.h */
struct ev_loop;

struct rdmamsg_ctx;	 /* device, PD, pools, loop adapter */
struct rdmamsg_ctx_attr; /* context parameters (setters below) */
struct rdmamsg_ep;	 /* one reliable connection */
struct rdmamsg_ep_attr;	 /* endpoint parameters (setters below) */
struct rdmamsg_listener; /* passive side: accepts connection requests */
struct rdmamsg_conn_req; /* a connection request waiting for a decision */
struct rdmamsg_buf;	 /* a registered buffer from a context's pool */

/* rdmamsg_version -- the library's version as "MAJOR.MINOR.PATCH" */
const char *rdmamsg_version(void);

/* rdmamsg_strerror -- a constant description for any value a call returns */
const char *rdmamsg_strerror(int err);

/* ------------------------------------------------------------------------
 * Logging.  The library never prints; it hands formatted messages at or
 * below the level to the log function (none by default).
 * --------------------------------------------------------------------- */

enum rdmamsg_log_level {
	RDMAMSG_LOG_DISABLED = -1, /* no messages at all */
	RDMAMSG_LOG_ERROR = 0,
	RDMAMSG_LOG_WARNING = 1,
	RDMAMSG_LOG_NOTICE = 2,
	RDMAMSG_LOG_INFO = 3,
	RDMAMSG_LOG_DEBUG = 4,
};

/*
 * rdmamsg_log_set_function -- route log messages to fn(level, func, msg, arg)
 * fn NULL turns logging off.  msg is valid only during the call.
 */
int rdmamsg_log_set_function(void (*fn)(int level, const char *func,
					const char *msg, void *arg),
			     void *arg);

/* rdmamsg_log_set_level -- messages above level are dropped (default WARNING);
 * -EINVAL outside RDMAMSG_LOG_DISABLED..RDMAMSG_LOG_DEBUG */
int rdmamsg_log_set_level(int level);

/* rdmamsg_log_get_level -- the current level */
int rdmamsg_log_get_level(int *level);

/* ------------------------------------------------------------------------
 * Context attributes.
 * --------------------------------------------------------------------- */

enum rdmamsg_fabric {
	RDMAMSG_FABRIC_AUTO = 0,  /* verbs if a device exists, else softrdma */
	RDMAMSG_FABRIC_VERBS = 1, /* libibverbs/librdmacm hardware */
	RDMAMSG_FABRIC_SOFT = 2,  /* softrdma (dlopen'ed) */
};

/* rdmamsg_ctx_attr_new -- attributes with defaults: no loop (fd mode), AUTO
 * fabric (the environment variable RDMAMSG_FABRIC=auto|verbs|soft applies),
 * first device, 256 MiB pool limit, no huge pages */
int rdmamsg_ctx_attr_new(struct rdmamsg_ctx_attr **attr);

/* rdmamsg_ctx_attr_delete -- free *attr and set it to NULL */
int rdmamsg_ctx_attr_delete(struct rdmamsg_ctx_attr **attr);

/* rdmamsg_ctx_attr_set_loop -- run inside the caller's libev loop; NULL
 * selects fd mode (rdmamsg_ctx_get_fd/arm/progress or rdmamsg_ctx_run) */
int rdmamsg_ctx_attr_set_loop(struct rdmamsg_ctx_attr *attr,
			      struct ev_loop *loop);

/* rdmamsg_ctx_attr_set_fabric -- pick the fabric; AUTO consults the
 * environment variable RDMAMSG_FABRIC */
int rdmamsg_ctx_attr_set_fabric(struct rdmamsg_ctx_attr *attr,
				enum rdmamsg_fabric fabric);

/* rdmamsg_ctx_attr_set_device -- a device name ("mlx5_0", "softrdma0") or a
 * local IP address the device owns; NULL means the first device */
int rdmamsg_ctx_attr_set_device(struct rdmamsg_ctx_attr *attr,
				const char *device);

/* rdmamsg_ctx_attr_set_pool_limit -- most bytes the pool may register
 * (default 256 MiB: it grows on demand, and idle slabs beyond 8 MiB go back
 * to the system when endpoints close); -EINVAL below 1 MiB */
int rdmamsg_ctx_attr_set_pool_limit(struct rdmamsg_ctx_attr *attr,
				    size_t bytes);

/* rdmamsg_ctx_attr_set_listen_backlog -- connection requests the fabric
 * queues for each listener before the loop takes them (rdma_listen's
 * backlog); default 1024, 1 .. 65536 */
int rdmamsg_ctx_attr_set_listen_backlog(struct rdmamsg_ctx_attr *attr,
					unsigned int requests);

/* rdmamsg_ctx_attr_set_max_pending -- unfinished handshakes of all the
 * context's listeners at once (requests not yet decided plus accepted ones
 * not yet established); more are rejected with RDMAMSG_REJECT_RESOURCES;
 * default 1024, 1 .. 65536 */
int rdmamsg_ctx_attr_set_max_pending(struct rdmamsg_ctx_attr *attr,
				     unsigned int handshakes);

/* rdmamsg_ctx_attr_set_huge_pages -- back pool slabs with huge pages when the
 * system has them (falls back to normal pages) */
int rdmamsg_ctx_attr_set_huge_pages(struct rdmamsg_ctx_attr *attr, int enable);

/* rdmamsg_ctx_attr_set_wakeup_cb -- cb(ctx, arg) runs in the loop thread after
 * rdmamsg_ctx_wakeup() was called (once per batch of wake-ups) */
int rdmamsg_ctx_attr_set_wakeup_cb(struct rdmamsg_ctx_attr *attr,
				   void (*cb)(struct rdmamsg_ctx *ctx,
					      void *arg),
				   void *arg);

/* ------------------------------------------------------------------------
 * Context.
 * --------------------------------------------------------------------- */

/*
 * rdmamsg_ctx_create -- open the fabric and device, make PD, completion
 * channel and loop adapter.  attr may be NULL (defaults).  -ENODEV when no
 * device (or softrdma library) can be found, -ENOTSUP for an unknown
 * RDMAMSG_FABRIC value.
 */
int rdmamsg_ctx_create(const struct rdmamsg_ctx_attr *attr,
		       struct rdmamsg_ctx **ctx);

/* rdmamsg_ctx_destroy -- free the context and set *ctx to NULL; -EBUSY while
 * endpoints, listeners, SRQs, groups, registered regions, buffers or close
 * callbacks are outstanding, and from a callback of the context */
int rdmamsg_ctx_destroy(struct rdmamsg_ctx **ctx);

/* rdmamsg_ctx_get_fd -- one pollable fd (fd mode and libev mode alike):
 * readable when rdmamsg_ctx_progress() has work */
int rdmamsg_ctx_get_fd(const struct rdmamsg_ctx *ctx, int *fd);

/*
 * rdmamsg_ctx_arm -- prepare to block on the fd: 0 means nothing is pending
 * and the fd will become readable when something happens; -EBUSY means work
 * is pending, so call rdmamsg_ctx_progress() instead of blocking.
 */
int rdmamsg_ctx_arm(struct rdmamsg_ctx *ctx);

/* rdmamsg_ctx_progress -- do all ready work without blocking: completions,
 * connection events, timers, deferred callbacks */
int rdmamsg_ctx_progress(struct rdmamsg_ctx *ctx);

/* rdmamsg_ctx_run -- drive the context until no endpoint or listener is left
 * or rdmamsg_ctx_stop() is called: ev_run() of the caller's loop in libev
 * mode, a private poll() loop in fd mode; -EBUSY from a callback of the
 * context */
int rdmamsg_ctx_run(struct rdmamsg_ctx *ctx);

/* rdmamsg_ctx_stop -- make rdmamsg_ctx_run() return after the current pass */
int rdmamsg_ctx_stop(struct rdmamsg_ctx *ctx);

/* rdmamsg_ctx_wakeup -- wake the loop (safe from any thread and from signal
 * handlers); runs the wakeup callback in the loop thread */
int rdmamsg_ctx_wakeup(struct rdmamsg_ctx *ctx);

/* rdmamsg_ctx_get_fabric -- the fabric the context runs on (VERBS or SOFT) */
int rdmamsg_ctx_get_fabric(const struct rdmamsg_ctx *ctx,
			   enum rdmamsg_fabric *fabric);

/* rdmamsg_ctx_get_device_name -- the device's name, valid while ctx lives */
int rdmamsg_ctx_get_device_name(const struct rdmamsg_ctx *ctx,
				const char **name);

enum rdmamsg_cap {
	RDMAMSG_CAP_MAX_MSG_SIZE = 0, /* largest message rdmamsg_send takes */
	RDMAMSG_CAP_MAX_INLINE = 1,   /* device inline data limit (bytes) */
	RDMAMSG_CAP_SRQ = 2,	      /* shared receive queues */
	RDMAMSG_CAP_ATOMICS = 3,      /* 64-bit fetch-add / compare-swap */
	RDMAMSG_CAP_MULTICAST = 4,    /* UD multicast groups */
	RDMAMSG_CAP_APM = 5,	      /* automatic path migration */
	RDMAMSG_CAP_DC = 6,	      /* dynamically connected transport */
	RDMAMSG_CAP_UMR = 7,	      /* user-mode memory registration */
};

/*
 * rdmamsg_ctx_query_caps -- one capability of the context's device: numeric
 * ones (MAX_MSG_SIZE, MAX_INLINE) give their value, yes/no ones give 1;
 * -ENOTSUP when the device lacks it, -EINVAL for an unknown cap.
 */
int rdmamsg_ctx_query_caps(const struct rdmamsg_ctx *ctx, enum rdmamsg_cap cap,
			   uint64_t *value);

/* rdmamsg_ctx_query_pool -- bytes the pool has registered and bytes of it
 * handed out (buffers, receive rings, send rings) */
int rdmamsg_ctx_query_pool(const struct rdmamsg_ctx *ctx, size_t *registered,
			   size_t *in_use);

/* ------------------------------------------------------------------------
 * Registered buffers.  The data path never registers memory: sends copy
 * into, or (zero-copy) send from, pool buffers.
 * --------------------------------------------------------------------- */

/* rdmamsg_buf_alloc -- a buffer of at least size bytes; -EINVAL for size 0,
 * -EMSGSIZE above the largest size class (RDMAMSG_CAP_MAX_MSG_SIZE),
 * -ENOMEM when the pool limit is reached */
int rdmamsg_buf_alloc(struct rdmamsg_ctx *ctx, size_t size,
		      struct rdmamsg_buf **buf);

/* rdmamsg_buf_free -- give a buffer back to its pool (also for buffers kept
 * with rdmamsg_recv_keep()) */
int rdmamsg_buf_free(struct rdmamsg_buf *buf);

/* rdmamsg_buf_get_data -- where the buffer's bytes start */
int rdmamsg_buf_get_data(const struct rdmamsg_buf *buf, void **data);

/* rdmamsg_buf_get_size -- the buffer's capacity in bytes */
int rdmamsg_buf_get_size(const struct rdmamsg_buf *buf, size_t *size);

/* ------------------------------------------------------------------------
 * Endpoint attributes.  Both sides advertise theirs in the handshake; the
 * connection uses the smaller eager and maximum message sizes.
 * --------------------------------------------------------------------- */

/* Most bytes of application private data on connect, accept and reject. */
#define RDMAMSG_PRIVATE_DATA_MAX 32

/* rdmamsg_ep_attr_new -- defaults: connect timeout 5000 ms, close timeout
 * 2000 ms, peer timeout 10000 ms, eager size 8192, maximum message 1 MiB,
 * receive depth 32 growing to RDMAMSG_RECV_DEPTH_GROW, send depth 128,
 * send backlog 1024 messages, no linger.  Pool memory per connected
 * endpoint: (receive depth + 3) receive buffers of the eager size (about
 * 283 KiB by default; a window that grew holds more), plus one copy buffer
 * of the eager size per send slot that a copied (not inline, not
 * zero-copy) send has used, at most send depth + 1. */
int rdmamsg_ep_attr_new(struct rdmamsg_ep_attr **attr);

/* rdmamsg_ep_attr_delete -- free *attr and set it to NULL */
int rdmamsg_ep_attr_delete(struct rdmamsg_ep_attr **attr);

/* rdmamsg_ep_attr_set_connect_timeout -- ms until a connect attempt fails
 * with -ETIMEDOUT (0 is invalid) */
int rdmamsg_ep_attr_set_connect_timeout(struct rdmamsg_ep_attr *attr,
					unsigned int ms);

/* rdmamsg_ep_attr_set_close_timeout -- the longest rdmamsg_ep_close() takes:
 * past it, the goodbye, the linger and the flush of posted operations are
 * given up and what is left is cancelled (close itself never blocks); also
 * how long an endpoint whose peer said goodbye keeps the connection up for
 * the peer's own disconnect before it disconnects itself */
int rdmamsg_ep_attr_set_close_timeout(struct rdmamsg_ep_attr *attr,
				      unsigned int ms);

/* rdmamsg_ep_attr_set_peer_timeout -- a peer without a sign of life for
 * this many ms (at least 30) is dead (on_disconnect gets -ETIMEDOUT);
 * keep-alives go out at a third of it; 0 turns detection off.  Signs of
 * life: anything received; between peers of this version also the peer's
 * event-loop clock changing (read with RDMA READ while nothing is heard,
 * so the target of long one-sided work keeps a busy initiator whose
 * keep-alives wait behind its writes), and our own RDMA operations
 * completing while such a read waits behind them, unless the last read
 * found the clock standing still.  A hung, dead or cut-off peer is found
 * within the timeout, a third of it and a read's round trip after its
 * last sign (rdmamsg_connect(3)) */
int rdmamsg_ep_attr_set_peer_timeout(struct rdmamsg_ep_attr *attr,
				     unsigned int ms);

/* rdmamsg_ep_attr_set_eager_size -- bytes per receive buffer (one message or
 * fragment); 64 .. 1 MiB */
int rdmamsg_ep_attr_set_eager_size(struct rdmamsg_ep_attr *attr, size_t size);

/* rdmamsg_ep_attr_set_max_msg_size -- largest message, split into eager-size
 * fragments and reassembled; at least the eager size, at most 64 MiB */
int rdmamsg_ep_attr_set_max_msg_size(struct rdmamsg_ep_attr *attr, size_t size);

/* rdmamsg_ep_attr_set_recv_depth -- receive buffers, i.e. the credits the
 * peer gets; 2 .. 4096.  The window then stays at depth, unless
 * rdmamsg_ep_attr_set_recv_depth_max lets it grow */
int rdmamsg_ep_attr_set_recv_depth(struct rdmamsg_ep_attr *attr,
				   unsigned int depth);

/*
 * rdmamsg_ep_attr_set_recv_depth_max -- the receive window grows, up to
 * depth (2 .. 4096; below the receive depth: the receive depth), while
 * the peer keeps using it whole: each time the peer has sent every
 * credit it held without packing its messages (a pack carries many on
 * one credit), the window doubles with receive buffers from the pool
 * (none taken when the pool or the completion queue has no room: it
 * stays), and stays grown until the endpoint closes.  Not on an SRQ or
 * DC (their buffers are shared), and only with a peer of this version.
 * Default: RDMAMSG_RECV_DEPTH_GROW, or the receive depth where
 * rdmamsg_ep_attr_set_recv_depth set one (a fixed window).
 */
#define RDMAMSG_RECV_DEPTH_GROW 128
int rdmamsg_ep_attr_set_recv_depth_max(struct rdmamsg_ep_attr *attr,
				       unsigned int depth);

/* rdmamsg_ep_attr_set_send_depth -- send work requests in flight; 4 .. 4096 */
int rdmamsg_ep_attr_set_send_depth(struct rdmamsg_ep_attr *attr,
				   unsigned int depth);

/* rdmamsg_ep_attr_set_send_backlog -- messages queued while out of credits
 * before sends return -EAGAIN (copied ones also only up to
 * RDMAMSG_COPY_AHEAD bytes: rdmamsg_send); 0 .. 1048576 */
int rdmamsg_ep_attr_set_send_backlog(struct rdmamsg_ep_attr *attr,
				     unsigned int msgs);

/* rdmamsg_ep_attr_set_linger -- with enable set, rdmamsg_ep_close() first
 * sends the queued messages (bounded by the close timeout) instead of
 * cancelling them; default off */
int rdmamsg_ep_attr_set_linger(struct rdmamsg_ep_attr *attr, int enable);

/* rdmamsg_ep_attr_set_private_data -- application bytes sent with connect
 * (or accept); copied; -EINVAL above RDMAMSG_PRIVATE_DATA_MAX */
int rdmamsg_ep_attr_set_private_data(struct rdmamsg_ep_attr *attr,
				     const void *data, size_t len);

/* ------------------------------------------------------------------------
 * Endpoints.
 * --------------------------------------------------------------------- */

/*
 * Path failover (issue 15).  An active endpoint may be given several
 * addresses of its peer, comma-separated in rdmamsg_connect()'s address
 * ("10.231.1.2:7000,10.231.2.2:7000"), at most RDMAMSG_MAX_PATHS; each
 * entry must be a valid address with a port.  A list of more than one
 * needs the policy RDMAMSG_FAILOVER_RECONNECT (-EINVAL otherwise).
 *
 * RDMAMSG_FAILOVER_OFF (the default): one address, today's behaviour.
 * RDMAMSG_FAILOVER_RECONNECT: a connect attempt that fails on a path
 * because of the path -- nobody listens there (-ECONNREFUSED with
 * RDMAMSG_REJECT_NO_LISTENER), the address or route does not resolve or
 * the peer is unreachable (-EHOSTUNREACH), the attempt timed out
 * (-ETIMEDOUT: each path gets the whole connect timeout), the
 * connection was reset before it was up (-ECONNRESET), or the device
 * port it was bound to went down (-ENETDOWN; a session's reconnect
 * attempt or handshake is abandoned at the port event) -- is tried again
 * on the next path, in list order; on_connect reports only the outcome
 * of the last attempt.  A path whose address cannot be resolved at the
 * call itself is skipped there (counted in path_downs; no event, since
 * no callback runs inside the call).  A refusal by the peer (an application or library
 * reject reason), -EPROTO and local resource errors end the connect at
 * once.  Only the connecting side fails over: rdmamsg_conn_req_accept()
 * with an attribute whose policy is not RDMAMSG_FAILOVER_OFF is -EINVAL
 * (the request stays pending).
 *
 * RDMAMSG_FAILOVER_REPLAY: the above, and reconnect-and-replay of an
 * established connection.  When a connection that was up fails while both
 * processes live (a work request's retry exhaustion, the device port
 * the connection uses going down -- IBV_EVENT_PORT_ERR, status
 * -ENETDOWN, acted on at once --, the peer gone silent for the peer
 * timeout, the connection reset without a goodbye), the connecting side
 * reconnects: PATH_DOWN, then
 * FAILOVER_START on the next path of the list (wrapping around to the
 * first, the failed one included), at most `tries` attempts within
 * `timeout_ms` of the failure (rdmamsg_ep_attr_set_reconnect; defaults 16
 * and 10,000 ms; each attempt gets the connect timeout or what is left;
 * after one round over the list at once, each failed attempt is followed
 * by a backoff of 10 ms doubling up to 1,000 ms, never past timeout_ms),
 * then FAILOVER_DONE once traffic can resume.  A session's QP has a local
 * ACK timeout of 17 (537 ms, rdmamsg_ep_attr_set_ack_timeout) and retry
 * count 7: a cut path with sends in
 * flight fails in about 4.3 s, an idle one at the latest at the peer
 * timeout, a pulled cable (the local port down) at once
 * (rdmamsg_connect.3).  The two sides exchange how
 * many data fragments each received, each sends again what the other did
 * not receive, and no message is lost, delivered twice or reordered; on_connect
 * does not run again.  During the outage rdmamsg_ep_get_state() says
 * RDMAMSG_EP_CONNECTING, sends queue within the send backlog (then
 * -EAGAIN and on_writable, as without credits; one above the message
 * maximum, a rendezvous, is -ENOTCONN), outstanding requests stay
 * outstanding (the request or its response is sent again: answered once).
 * One-sided operations (write, write with immediate, read, atomics) and
 * rendezvous pulls in flight at the failure complete with -ECONNRESET:
 * they may or may not have executed at the peer, since RDMA writes
 * cannot be made idempotent by the library; the rendezvous send waiting
 * for such a pull completes with the error its receiver reports.
 * Sends (messages, requests, responses) report on_send 0 once posted,
 * as without a policy; the library keeps a copy of every data fragment
 * until the peer's credits show it delivered: at most the peer's receive
 * depth times the eager size per endpoint.
 * The accepting side needs no policy: a request that names a session
 * (sent by a REPLAY connector) makes its endpoint keep copies too, and
 * when that connection fails the endpoint waits up to its session linger
 * (rdmamsg_ep_attr_set_session_linger, default 15,000 ms; state
 * RDMAMSG_EP_CONNECTING) for the connector's reconnect, which the
 * listener that accepted it takes without calling on_conn_req.  The
 * reconnect request names the session by a random 64-bit id: a peer that
 * restarted (a new process, a new endpoint) does not know it and refuses
 * (RDMAMSG_REJECT_SESSION), so nothing is ever replayed into a new
 * session.  on_disconnect then reports: -ECONNRESET when the peer refused
 * the session (it restarted) or the connection was reset; otherwise the
 * status of the last attempt that ran its course (-ECONNREFUSED: nobody
 * listens any more, the peer process is gone; -ETIMEDOUT, -EHOSTUNREACH;
 * an attempt that timeout_ms cut short counts only when it was the
 * first); on the accepting
 * side, -ETIMEDOUT once the linger ran out.  FAILOVER_FAILED precedes it.
 * A clean close (the peer's goodbye, status 0), a protocol error
 * (-EPROTO) and local resource errors are never reconnected.  A reconnect
 * attempt refused for another reason than RDMAMSG_REJECT_SESSION or a
 * protocol mismatch (RDMAMSG_REJECT_VERSION, _HANDSHAKE: the session ends
 * with -ECONNREFUSED) is tried again within the bounds.  Either side may
 * receive through an SRQ (rdmamsg_ep_attr_set_srq): a reconnect takes the
 * endpoint's window on it again (an SRQ full by then fails that attempt,
 * tried again within the bounds).  Limit: at most
 * RDMAMSG_HS_SESSION_USER (24) bytes of private data (-EINVAL at
 * rdmamsg_connect).  rdmamsg_ep_get_path_stats' last_failover_ns is the
 * time from the failure to the reconnect that resumed traffic.
 */
#define RDMAMSG_MAX_PATHS 8

enum rdmamsg_failover {
	RDMAMSG_FAILOVER_OFF = 0,
	RDMAMSG_FAILOVER_RECONNECT = 1,
	RDMAMSG_FAILOVER_REPLAY = 2,
};

#define RDMAMSG_HS_SESSION_USER 24 /* private data bytes with REPLAY */
#define RDMAMSG_DC_SESSION_USER 8  /* ... and over DC (the DC block's 16) */

/* rdmamsg_ep_attr_set_reconnect -- with RDMAMSG_FAILOVER_REPLAY: how long
 * (1 .. 3,600,000 ms) and in how many connect attempts (1 .. 1,000) an
 * established connection that failed may be reconnected; -EINVAL
 * otherwise */
int rdmamsg_ep_attr_set_reconnect(struct rdmamsg_ep_attr *attr,
				  unsigned int timeout_ms, unsigned int tries);

/* rdmamsg_ep_attr_set_session_linger -- an accepted endpoint of a session
 * waits this long (1 .. 3,600,000 ms) for its connector's reconnect;
 * -EINVAL otherwise */
int rdmamsg_ep_attr_set_session_linger(struct rdmamsg_ep_attr *attr,
				       unsigned int ms);

/* rdmamsg_ep_attr_set_ack_timeout -- the local ACK timeout of the
 * endpoint's QP as InfiniBand's exponent: 4.096 us x 2^exp, exp 1 .. 31
 * (the QP fails after 8 such timeouts without an acknowledgement, retry
 * count 7); 0: the default, 17 (537 ms) for a RDMAMSG_FAILOVER_REPLAY
 * session, the connection manager's own otherwise (rdma_cm: 18, 1.07 s).
 * Where the CM cannot set it, the CM's default stays (logged).  A DC
 * endpoint shares its context's DCIs: -EINVAL at connect or accept with
 * an exponent set.  -EINVAL for exp above 31 */
int rdmamsg_ep_attr_set_ack_timeout(struct rdmamsg_ep_attr *attr,
				    unsigned int exp);

/* rdmamsg_ep_test_break -- for tests (fault injection): the endpoint's
 * connection fails as after a transport retry exhaustion (its QP goes to
 * the error state and the endpoint handles the failure as it would a
 * RETRY_EXC_ERR completion) at once: the callbacks it brings
 * (on_disconnect, on_send(-ECANCELED) of queued sends, responses of
 * outstanding requests, a session's path events) run inside this call;
 * 0, -EINVAL for NULL, -ENOTCONN unless connected */
int rdmamsg_ep_test_break(struct rdmamsg_ep *ep);

/* What a path callback reports; path is the index in the address list. */
enum rdmamsg_path_event {
	RDMAMSG_PATH_DOWN = 1,	     /* path failed (status: why) */
	RDMAMSG_FAILOVER_START = 2,  /* trying path next (status 0) */
	RDMAMSG_FAILOVER_DONE = 3,   /* connected on path (status 0) */
	RDMAMSG_FAILOVER_FAILED = 4, /* the last path failed too (status) */
	/* automatic path migration (rdmamsg_ep_attr_set_apm): path is then
	 * the local device port the connection uses */
	RDMAMSG_PATH_MIGRATED = 5,   /* moved to the alternate path (0) */
	RDMAMSG_PATH_MIG_FAILED = 6, /* the alternate failed too (-ENETDOWN) */
};

/* rdmamsg_ep_attr_set_failover -- the policy above; -EINVAL for a value
 * that is not an enum rdmamsg_failover */
int rdmamsg_ep_attr_set_failover(struct rdmamsg_ep_attr *attr,
				 enum rdmamsg_failover policy);

/* rdmamsg_ep_attr_set_path_cb -- cb(ep, event, path, status, arg) runs
 * from the progress loop on each path event, before on_connect reports
 * the outcome; arg is the endpoint's; NULL: none */
int rdmamsg_ep_attr_set_path_cb(struct rdmamsg_ep_attr *attr,
				void (*cb)(struct rdmamsg_ep *ep,
					   enum rdmamsg_path_event event,
					   unsigned int path, int status,
					   void *arg));

/* Path counters of an endpoint (rdmamsg_ep_get_path_stats). */
struct rdmamsg_path_stats {
	unsigned int npaths;	   /* addresses given */
	unsigned int path;	   /* the one in use (or tried last) */
	uint64_t path_downs;	   /* RDMAMSG_PATH_DOWN events */
	uint64_t failovers;	   /* RDMAMSG_FAILOVER_DONE events */
	uint64_t failover_fails;   /* RDMAMSG_FAILOVER_FAILED events */
	uint64_t last_failover_ns; /* first path down to FAILOVER_DONE */
	uint64_t attempts;	   /* connect attempts after a failure
				    * (RDMAMSG_FAILOVER_START events) */
	uint64_t migrations;	   /* RDMAMSG_PATH_MIGRATED events */
	uint64_t mig_fails;	   /* RDMAMSG_PATH_MIG_FAILED events */
	unsigned int apm;	   /* 1: an alternate path is loaded */
};

/*
 * Automatic path migration (APM), where the device has it (InfiniBand:
 * IBV_DEVICE_AUTO_PATH_MIG and a second active port; never on RoCE or
 * iWARP, which is what reconnect-and-replay is for).  With
 * RDMAMSG_APM_AUTO on both sides, each end offers the LID of its other
 * port in the handshake (then 4 fewer application bytes fit: 28, 20 with
 * RDMAMSG_FAILOVER_REPLAY); once connected, each loads the alternate path
 * (its other port to the peer's) into its QP and arms it (IBV_MIG_REARM).
 * When the primary path fails, the HCA moves the connection to the
 * alternate with no loss and no repetition: RDMAMSG_PATH_MIGRATED on the
 * path callback, the counters below; the endpoint then loads the old
 * primary as its new alternate and re-arms (armed again once that path is
 * up).  Should the alternate fail too: RDMAMSG_PATH_MIG_FAILED, and the
 * connection fails as without APM (then the failover policy applies).
 * Where either side cannot (no APM on its device, one port, APM off) no
 * alternate is loaded and the endpoint works as without: path stats'
 * apm says which.  The accepting side sets it in the attribute it passes
 * to rdmamsg_conn_req_accept.  DC endpoints have no QP of their own: APM
 * with RDMAMSG_TRANSPORT_DC is -EINVAL at rdmamsg_connect.
 */
enum rdmamsg_apm {
	RDMAMSG_APM_OFF = 0,  /* default */
	RDMAMSG_APM_AUTO = 1, /* load and re-arm alternate paths */
};

/* rdmamsg_ep_attr_set_apm -- the APM mode above; -EINVAL for NULL or a
 * value that is not an enum rdmamsg_apm */
int rdmamsg_ep_attr_set_apm(struct rdmamsg_ep_attr *attr,
			    enum rdmamsg_apm mode);

/* rdmamsg_ep_get_path_stats -- copy the counters; -EINVAL for NULL */
int rdmamsg_ep_get_path_stats(const struct rdmamsg_ep *ep,
			      struct rdmamsg_path_stats *stats);

enum rdmamsg_ep_state {
	RDMAMSG_EP_CONNECTING = 0,   /* resolving, handshaking */
	RDMAMSG_EP_CONNECTED = 1,    /* sends allowed */
	RDMAMSG_EP_DISCONNECTED = 2, /* failed, rejected, or peer gone */
	RDMAMSG_EP_CLOSING = 3,	     /* rdmamsg_ep_close() called */
};

/* Flags of a received message. */
#define RDMAMSG_RECV_IMM 0x1 /* imm carries the sender's immediate value */

/* Library reasons in on_connect's reason when status is -EPROTO or the
 * library rejected; application reasons are 0 .. 65535. */
#define RDMAMSG_REJECT_VERSION	 0x10001 /* incompatible protocol version */
#define RDMAMSG_REJECT_HANDSHAKE 0x10002 /* malformed handshake */
#define RDMAMSG_REJECT_RESOURCES 0x10003 /* passive side out of resources */
#define RDMAMSG_REJECT_CLOSED	 0x10004 /* listener closed before deciding */
#define RDMAMSG_REJECT_NO_LISTENER \
	0x10005 /* nobody listens there: the fabric said so (IB CM reason 8,
		 * invalid service id; a refused connection); any other reject
		 * without an rdmamsg answer is RDMAMSG_REJECT_RESOURCES */
#define RDMAMSG_REJECT_SESSION \
	0x10006 /* a reconnect named a session the peer does not know (it
		 * restarted, or the session lingered out) */

/*
 * Endpoint callbacks: a table the caller fills (unused ones NULL) and the
 * library copies.  arg is the pointer given to rdmamsg_connect() or
 * rdmamsg_conn_req_accept().
 */
struct rdmamsg_ep_cbs {
	/*
	 * on_connect -- the connection is up (status 0; pdata is the peer's
	 * accept private data) or failed: -ECONNREFUSED (rejected; reason is
	 * the application's or an RDMAMSG_REJECT_* value, pdata the reject's
	 * private data), -EPROTO (incompatible peer; reason RDMAMSG_REJECT_*),
	 * -ETIMEDOUT, -EHOSTUNREACH.  After a failure only close is allowed.
	 */
	void (*on_connect)(struct rdmamsg_ep *ep, int status, int reason,
			   const void *pdata, size_t pdata_len, void *arg);
	/*
	 * on_recv -- one whole message; data is valid until return unless
	 * the callback calls rdmamsg_recv_keep().  flags: RDMAMSG_RECV_IMM.
	 */
	void (*on_recv)(struct rdmamsg_ep *ep, void *data, size_t len,
			uint32_t imm, unsigned int flags, void *arg);
	/* on_send -- a send finished: 0, or -ECANCELED / an error when the
	 * connection went down first; exactly once per accepted send.  When
	 * NULL, completions are batched (faster). */
	void (*on_send)(struct rdmamsg_ep *ep, int status, void *op_ctx,
			void *arg);
	/* on_writable -- sends may succeed again after one returned -EAGAIN */
	void (*on_writable)(struct rdmamsg_ep *ep, void *arg);
	/* on_disconnect -- the connection went down: 0 (the peer closed it
	 * with rdmamsg_ep_close()), -ECONNRESET (reset, or the peer died
	 * without closing), -ETIMEDOUT (peer silent past the peer timeout),
	 * -EPROTO (peer broke the protocol: the endpoint is closed and the
	 * reason logged), -ENOBUFS (no memory at all to reassemble a message:
	 * a full pool alone reassembles on the heap),
	 * -ENODEV (device gone).  Close follows. */
	void (*on_disconnect)(struct rdmamsg_ep *ep, int status, void *arg);
};

/*
 * rdmamsg_connect -- start connecting to "host:port" ("[v6addr]:port" for
 * IPv6); on_connect reports the outcome.  attr may be NULL (defaults).
 * -EINVAL for a malformed address; a comma-separated list of addresses
 * with RDMAMSG_FAILOVER_RECONNECT (see above).  Every endpoint, whatever its state, is
 * freed by rdmamsg_ep_close() only.
 */
int rdmamsg_connect(struct rdmamsg_ctx *ctx, const char *addr,
		    const struct rdmamsg_ep_attr *attr,
		    const struct rdmamsg_ep_cbs *cbs, void *arg,
		    struct rdmamsg_ep **ep);

/*
 * rdmamsg_ep_close -- close asynchronously: queued sends not yet posted get
 * on_send(-ECANCELED) (with linger set they are sent first), a goodbye
 * tells the peer (its on_disconnect gets 0), posted sends the peer did not
 * complete get -ECANCELED, every posted send completes exactly once, then
 * close_cb(ep, arg) (may be NULL) runs and the endpoint is freed; the close
 * timeout bounds it all.  -EALREADY when close was already called.
 */
int rdmamsg_ep_close(struct rdmamsg_ep *ep,
		     void (*close_cb)(struct rdmamsg_ep *ep, void *arg));

/* rdmamsg_ep_get_state -- the endpoint's state */
int rdmamsg_ep_get_state(const struct rdmamsg_ep *ep,
			 enum rdmamsg_ep_state *state);

/* rdmamsg_ep_get_max_msg_size -- largest message either side accepts
 * (-ENOTCONN before the handshake completed) */
int rdmamsg_ep_get_max_msg_size(const struct rdmamsg_ep *ep, size_t *size);

/*
 * rdmamsg_send -- send len bytes (0 allowed) copied from data; data may be
 * reused on return.  The protocol goes by size (rdmamsg_ep_get_protocols):
 * inline, copied into a pool buffer up to the eager size, fragments up to
 * the rendezvous threshold, and above it rendezvous: one copy into
 * pre-registered pool memory that the receiver pulls with RDMA READ
 * (through a memory window over just those bytes, no registration per
 * message), up to the large maximum.  The receiver cannot tell which:
 * same callback, same bytes, same flags, the order of sending kept.
 * -ENOTCONN unless connected, -EMSGSIZE above the large maximum, -EAGAIN
 * when out of credits and the backlog (or the pool) is full, or when its
 * copies queued in the backlog, or its rendezvous copies not yet read,
 * would exceed RDMAMSG_COPY_AHEAD bytes (unset: 1 MiB, two copies at
 * least; "0": no bound but the backlog's messages and the pool), or
 * when the peer's receive depth less one of rendezvous sends await the
 * receiver's answer (each holds a credit of the peer's window until then)
 * (on_writable follows: a burst of large messages meets it early).
 * op_ctx comes back in on_send (for a rendezvous, once the receiver has
 * the bytes).
 */
int rdmamsg_send(struct rdmamsg_ep *ep, const void *data, size_t len,
		 void *op_ctx);

/* rdmamsg_send_imm -- rdmamsg_send() carrying a 32-bit immediate value */
int rdmamsg_send_imm(struct rdmamsg_ep *ep, const void *data, size_t len,
		     uint32_t imm, void *op_ctx);

/*
 * rdmamsg_send_buf -- zero-copy: send the first len bytes of a pool buffer
 * the caller filled; on success the buffer belongs to the library, which
 * frees it after the completion; on failure it stays the caller's.
 * -EINVAL when buf is not the caller's, is from another context, or holds
 * fewer than len bytes.
 */
int rdmamsg_send_buf(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf, size_t len,
		     void *op_ctx);

/* rdmamsg_send_buf_imm -- rdmamsg_send_buf() carrying an immediate value */
int rdmamsg_send_buf_imm(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf,
			 size_t len, uint32_t imm, void *op_ctx);

/*
 * rdmamsg_sendv -- rdmamsg_send() of the concatenation of iovcnt pieces
 * (1 .. RDMAMSG_IOV_MAX; a piece of length 0 may have a NULL base); the
 * pieces may be reused on return.  One piece is sent as rdmamsg_send()
 * sends it; several are gathered into a pool buffer, one copy, the one
 * rdmamsg_send() makes of contiguous data (registering the caller's
 * pieces for each send would cost more than that copy: memory registered
 * once goes without a copy through rdmamsg_mr_reg_iov() and
 * rdmamsg_send_mr()).  -EINVAL for NULL ep or iov, iovcnt out of range or
 * a NULL base with a length; -EMSGSIZE when the total overflows or is
 * above the large maximum; when the pool has no buffer for the gather
 * (a total above the pool's largest buffer is gathered on the heap),
 * -EAGAIN (on_writable follows) or -ENOMEM as for rdmamsg_send()'s copy;
 * otherwise as rdmamsg_send().
 */
#define RDMAMSG_IOV_MAX 1024
int rdmamsg_sendv(struct rdmamsg_ep *ep, const struct iovec *iov, int iovcnt,
		  void *op_ctx);

/*
 * rdmamsg_ep_attr_set_rndv_threshold -- rdmamsg_send() (and requests and
 * responses) go by rendezvous above size bytes (unless the environment
 * variable RDMAMSG_RNDV_THRESH, bytes with an optional k, m or g suffix,
 * says otherwise; the attribute wins over it).  Without either the
 * connection chooses: RDMAMSG_RNDV_THRESH_DEFAULT, or on softrdma a
 * lower one (20 KiB) to a peer on this host, where a READ from the
 * mapped pool costs fewer copies than fragments through the copy ring
 * (rdmamsg_protocols.peer_local tells).
 * Below it, and never above the negotiated maximum message size, messages
 * go eager or in fragments.  -EINVAL outside RDMAMSG_RNDV_THRESH_MIN ..
 * 2^40 (a bad RDMAMSG_RNDV_THRESH makes rdmamsg_connect() and
 * rdmamsg_conn_req_accept() fail with -EINVAL).  Endpoints with
 * RDMAMSG_FAILOVER_REPLAY, and the endpoints that accept their sessions,
 * use fragments up to the maximum message size whatever the threshold: a
 * pull in flight does not survive a reconnect.
 */
#define RDMAMSG_RNDV_THRESH_DEFAULT 32768
#define RDMAMSG_RNDV_THRESH_MIN	    64
int rdmamsg_ep_attr_set_rndv_threshold(struct rdmamsg_ep_attr *attr,
				       size_t size);

/* The sizes at which rdmamsg_send() changes protocol on a connection. */
struct rdmamsg_protocols {
	size_t max_inline;     /* up to this: inline (no copy, no buffer) */
	size_t eager;	       /* up to this: one send from a pool buffer */
	size_t rndv_threshold; /* up to this: fragments; above: rendezvous */
	size_t max_msg;	       /* negotiated maximum message size */
	size_t max_large;      /* the largest rdmamsg_send() takes */
	int rndv_window;       /* 1: rendezvous sources are exposed through a
			  * memory window bound per transfer; 0: through a
			  * registration per transfer (no type 2 windows,
			  * RDMAMSG_NO_MW=1, DC, replay) */
	int peer_local;	       /* 1: the peer is on this host (its GID is one
			  * of this device's); on softrdma its default
			  * threshold is then the same-host one */
};

/* rdmamsg_ep_get_protocols -- the thresholds in effect (-ENOTCONN before
 * the handshake completed) */
int rdmamsg_ep_get_protocols(const struct rdmamsg_ep *ep,
			     struct rdmamsg_protocols *pr);

/* rdmamsg_ep_get_window -- this endpoint's receive window: *now the data
 * credits it grants its peer (its receive depth, or more once grown), *max
 * the most it may grow to on this connection (rdmamsg_ep_attr_set_
 * recv_depth_max; the window itself where the peer or the endpoint's
 * kind lets it not grow); either may be NULL.  -ENOTCONN before the
 * handshake completed, -EINVAL for a NULL endpoint */
int rdmamsg_ep_get_window(const struct rdmamsg_ep *ep, uint32_t *now,
			  uint32_t *max);

/*
 * Packing: messages of up to RDMAMSG_PACK_MAX bytes (less on a connection
 * whose eager size is below 4 KiB: rdmamsg_ep_get_pack_limit) that
 * rdmamsg_send() and friends queue, for want of a credit or a send slot,
 * go packed, up to 128 in one send, to a peer that offered it in the
 * handshake (every peer of this version does, unless RDMAMSG_NO_PACK=1 is
 * set in its environment).  The receiver sees each as its own on_recv,
 * in order, with its own length and immediate; on_send reports each.
 */
#define RDMAMSG_PACK_MAX 1024

/* rdmamsg_ep_get_pack_limit -- the longest message this connection packs
 * (0: it does not pack); -ENOTCONN before the handshake completed */
int rdmamsg_ep_get_pack_limit(const struct rdmamsg_ep *ep, size_t *max);

/*
 * rdmamsg_recv_keep -- from inside on_recv only: take the buffer holding the
 * current message (rdmamsg_buf_get_data() == the callback's data); free it
 * with rdmamsg_buf_free().  -EINVAL outside on_recv (or a second time for
 * one message, or for a large message outside the pool: in memory
 * registered for it, or recv_alloc's), -ENOMEM when no
 * replacement receive buffer can be had (the data is then valid only until
 * the callback returns).  A fragmented message that was reassembled outside
 * the pool (the pool was full), and a message that came packed with others
 * (see RDMAMSG_PACK_MAX), are kept as a pool copy: its data are the
 * message's bytes, at another address.
 */
int rdmamsg_recv_keep(struct rdmamsg_ep *ep, struct rdmamsg_buf **buf);

/* ------------------------------------------------------------------------
 * Listeners and connection requests.
 * --------------------------------------------------------------------- */

/*
 * rdmamsg_listen -- accept connection requests on "host:port" (port 0 picks
 * a free one; see rdmamsg_listener_get_port).  on_conn_req gets every
 * request with the client's private data and must eventually accept or
 * reject it.  -EADDRINUSE when the port is taken, -ENODEV when the address
 * is not on the context's device.
 */
int rdmamsg_listen(struct rdmamsg_ctx *ctx, const char *addr,
		   void (*on_conn_req)(struct rdmamsg_listener *lst,
				       struct rdmamsg_conn_req *req,
				       const void *pdata, size_t pdata_len,
				       void *arg),
		   void *arg, struct rdmamsg_listener **lst);

/* rdmamsg_listener_get_port -- the port the listener is bound to
 * (-ENOTCONN once rdmamsg_listener_close() was called) */
int rdmamsg_listener_get_port(const struct rdmamsg_listener *lst,
			      uint16_t *port);

/* rdmamsg_listener_close -- stop listening; undecided requests are rejected
 * (RDMAMSG_REJECT_CLOSED); close_cb (may be NULL) runs from the loop, then
 * the listener is freed.  -EALREADY when already closing. */
int rdmamsg_listener_close(struct rdmamsg_listener *lst,
			   void (*close_cb)(struct rdmamsg_listener *lst,
					    void *arg));

/*
 * rdmamsg_conn_req_accept -- accept a request (inside on_conn_req or later):
 * the endpoint's on_connect follows with status 0 when the connection is up.
 * attr may be NULL.  The request is consumed on success.
 */
int rdmamsg_conn_req_accept(struct rdmamsg_conn_req *req,
			    const struct rdmamsg_ep_attr *attr,
			    const struct rdmamsg_ep_cbs *cbs, void *arg,
			    struct rdmamsg_ep **ep);

/*
 * rdmamsg_conn_req_reject -- refuse a request; the client's on_connect gets
 * -ECONNREFUSED, reason (0 .. 65535) and the private data (at most
 * RDMAMSG_PRIVATE_DATA_MAX bytes).  The request is consumed on success.
 */
int rdmamsg_conn_req_reject(struct rdmamsg_conn_req *req, int reason,
			    const void *pdata, size_t pdata_len);

/* ------------------------------------------------------------------------
 * Shared receive queues.  Endpoints of one context may share one SRQ: their
 * receive buffers then come from the SRQ instead of a ring per endpoint.
 * Each endpoint on an SRQ keeps its own credit window (its receive depth
 * plus 2 control credits) carved out of the SRQ: connecting reserves the
 * whole window, accepting a guaranteed one (1 data + 2 control credits,
 * the rest lent from the SRQ's surplus); -ENOBUFS when the SRQ's max_bufs
 * would be passed.  The SRQ's buffers are posted to cover every credit
 * granted, a consumed buffer is reposted before its credit goes back to
 * the sender, and the endpoint's window returns to the SRQ when the
 * endpoint is freed.  Lossless: a sender
 * never finds the SRQ empty (no RNR), memory stays at most max_bufs
 * buffers whatever the number of endpoints or reconnects; a peer that
 * sends past its credits is closed (-EPROTO) at its first such message.
 * See rdmamsg_srq_create(3).
 * --------------------------------------------------------------------- */

struct rdmamsg_srq; /* a shared receive queue of a context */

/* SRQ parameters for rdmamsg_srq_create() */
struct rdmamsg_srq_attr {
	unsigned int max_bufs; /* receive buffers at most; 8 .. 1048576 */
	size_t buf_size;       /* bytes per buffer: at least the eager size
				* of every endpoint on the SRQ; 64 .. 1 MiB */
};

/* What rdmamsg_srq_query() reports */
struct rdmamsg_srq_stats {
	unsigned int endpoints; /* endpoints holding a window */
	unsigned int reserved;	/* buffers of their windows */
	unsigned int bufs;	/* buffers allocated (at most max_bufs) */
	unsigned int posted;	/* buffers posted to the SRQ now */
	size_t registered;	/* pool bytes of the allocated buffers */
	unsigned long long limit_events; /* IBV_EVENT_SRQ_LIMIT_REACHED seen */
};

/*
 * rdmamsg_srq_create -- a shared receive queue on ctx; -ENOTSUP when the
 * device has none (RDMAMSG_CAP_SRQ), -EINVAL for bad attributes (or
 * max_bufs above the device's SRQ size), -ENOBUFS when the context has
 * 255 SRQs, -ENOMEM.
 */
int rdmamsg_srq_create(struct rdmamsg_ctx *ctx,
		       const struct rdmamsg_srq_attr *attr,
		       struct rdmamsg_srq **srq);

/*
 * rdmamsg_srq_close -- no new endpoint may use srq (-EINVAL from
 * rdmamsg_connect/rdmamsg_conn_req_accept with an attribute naming it,
 * also once it is freed); once the last endpoint using it is freed, its
 * buffers go back to the pool, close_cb (may be NULL) runs from the
 * context's loop -- never inside this call, even when no endpoint uses
 * it -- and srq is freed after it.  Until then rdmamsg_ctx_destroy says
 * -EBUSY.  -EALREADY when already closing.
 */
int rdmamsg_srq_close(struct rdmamsg_srq *srq,
		      void (*close_cb)(struct rdmamsg_srq *srq, void *arg),
		      void *arg);

/* rdmamsg_srq_query -- the SRQ's counters (see struct rdmamsg_srq_stats) */
int rdmamsg_srq_query(const struct rdmamsg_srq *srq,
		      struct rdmamsg_srq_stats *stats);

/*
 * rdmamsg_ep_attr_set_srq -- endpoints made with attr (rdmamsg_connect, and
 * rdmamsg_conn_req_accept on the server side) receive through srq; NULL
 * (the default) gives each endpoint its own receive ring.  The SRQ must
 * belong to the endpoint's context, not be closing, and have buffers of at
 * least the eager size (else -EINVAL when the endpoint is made).
 */
int rdmamsg_ep_attr_set_srq(struct rdmamsg_ep_attr *attr,
			    struct rdmamsg_srq *srq);

/* ------------------------------------------------------------------------
 * Transport of an endpoint's connection (rdmamsg_ep_attr_set_transport(3)).
 * RC (the default): a reliable-connected QP of the endpoint's own.  DC
 * (RDMAMSG_CAP_DC): the endpoint's messages travel over the context's few
 * shared DC initiators (DCIs) to the peer context's one DC target (DCT),
 * which receives on the endpoint's SRQ, so a server with thousands of DC
 * endpoints has a handful of QPs.  The API is the same (ordering, credits,
 * fragmentation, requests, rendezvous, close); RDMA write with immediate
 * is not available (-ENOTCONN).  A DC endpoint needs an SRQ
 * (rdmamsg_ep_attr_set_srq; all DC endpoints of a context share one) and
 * at most RDMAMSG_DC_PRIVATE_DATA_MAX bytes of private data (the
 * handshake carries the DCT number, access key and endpoint tag; with
 * RDMAMSG_FAILOVER_REPLAY RDMAMSG_DC_SESSION_USER).  A DC session
 * reconnects as an RC one does, each reconnect on new DC lanes of the
 * new path's port (new tags: what the old ones still carry is dropped).
 * The connecting side chooses: a server accepts a DC request as DC
 * whatever its accept attributes say.
 */
enum rdmamsg_transport {
	RDMAMSG_TRANSPORT_RC = 0,
	RDMAMSG_TRANSPORT_DC = 1,
};

#define RDMAMSG_DC_PRIVATE_DATA_MAX 16

/* rdmamsg_ep_attr_set_transport -- RC or DC; -EINVAL for another value.
 * rdmamsg_connect/rdmamsg_conn_req_accept with DC give -ENOTSUP where the
 * context has no DC (rdmamsg_ctx_query_caps RDMAMSG_CAP_DC, or
 * RDMAMSG_NO_DC=1), -EINVAL without an SRQ, with another SRQ than the
 * context's DC endpoints use, or with private data above
 * RDMAMSG_DC_PRIVATE_DATA_MAX (RDMAMSG_DC_SESSION_USER with
 * RDMAMSG_FAILOVER_REPLAY); nothing is made. */
int rdmamsg_ep_attr_set_transport(struct rdmamsg_ep_attr *attr,
				  enum rdmamsg_transport transport);

/* A context's DC resources and counters (rdmamsg_ctx_dc_stats). */
struct rdmamsg_dc_stats {
	uint32_t dcis;		 /* DC initiators made (shared, per context
				  * and port) */
	uint32_t dcts;		 /* DC targets made (one per port used;
				  * they go with the SRQ) */
	uint32_t endpoints;	 /* DC endpoints (lanes) open */
	uint32_t qps;		 /* QPs of the context's DC machinery */
	uint64_t tag_drops;	 /* DC messages for no (or a stale) endpoint,
				  * or not from its peer's DCIs */
	uint64_t dci_waits;	 /* sends that waited for a free DCI */
	uint64_t dci_resets;	 /* DCIs reset after an error */
	uint64_t key_violations; /* wrong-key requests the DCT dropped (where
				  * the device counts them, softrdma) */
};

/* rdmamsg_ctx_dc_stats -- the context's DC counters; -ENOTSUP without
 * DC */
int rdmamsg_ctx_dc_stats(const struct rdmamsg_ctx *ctx,
			 struct rdmamsg_dc_stats *stats);

/* ------------------------------------------------------------------------
 * Large messages (rendezvous).  rdmamsg_send() takes any size up to the
 * large maximum (default 1 GiB) and goes by rendezvous above its threshold
 * (rdmamsg_ep_attr_set_rndv_threshold): the sender announces the source,
 * the receiver pulls it with RDMA READ, and on_send fires when the
 * receiver has the data in place; those messages keep their place in the
 * stream.  A message above the negotiated maximum message size is "large":
 * it lands where the allocation callback puts it and is flagged
 * RDMAMSG_RECV_LARGE.  rdmamsg_send_mr() sends from the caller's
 * registration without a copy; its messages are large whatever their
 * size and complete in any order relative to other messages (small ones
 * never wait behind them).  The receiver enforces its own large maximum:
 * the sender's on_send gets -EMSGSIZE (or the allocation callback's error)
 * when it refuses.
 * --------------------------------------------------------------------- */

struct rdmamsg_mr;  /* a registered region of the caller's memory */
struct rdmamsg_rmr; /* a peer's region, imported from its export */
struct rdmamsg_req; /* a peer's request waiting for rdmamsg_respond() */

/* Flag of a received message: a large one (above the negotiated maximum
 * message size, or from rdmamsg_send_mr()), placed by recv_alloc. */
#define RDMAMSG_RECV_LARGE 0x2

/* rdmamsg_ep_attr_set_max_large_size -- largest message by rendezvous
 * (default 1 GiB); 4096 .. 2^40 */
int rdmamsg_ep_attr_set_max_large_size(struct rdmamsg_ep_attr *attr,
				       size_t size);

/*
 * rdmamsg_ep_attr_set_recv_alloc -- choose where a large message lands:
 * alloc(ep, len, &data, &mr, arg) returns 0 and sets data (len bytes inside
 * mr, a region of the endpoint's context, which must stay registered until
 * on_recv; else the message is refused with -EINVAL) to receive there, the
 * caller then owning the bytes; returns 0 leaving *mr NULL for the
 * library's own memory (valid until on_recv returns); returns a negative
 * errno to refuse the message (the sender's on_send gets it).
 */
int rdmamsg_ep_attr_set_recv_alloc(struct rdmamsg_ep_attr *attr,
				   int (*alloc)(struct rdmamsg_ep *ep,
						size_t len, void **data,
						struct rdmamsg_mr **mr,
						void *arg));

/* rdmamsg_send_large -- deprecated, unnecessary: the same as rdmamsg_send(),
 * which takes any size up to the large maximum itself */
int rdmamsg_send_large(struct rdmamsg_ep *ep, const void *data, size_t len,
		       void *op_ctx);

/*
 * rdmamsg_send_mr -- zero-copy rendezvous of len bytes at offset off of mr
 * (registered with RDMAMSG_ACCESS_REMOTE_READ): the bytes must stay
 * unchanged and mr registered until on_send.  Where the device has type 2
 * memory windows the peer reads through one bound over just those bytes,
 * invalidated before on_send (mr may be deregistered inside it), never
 * with mr's own key.  -EINVAL for len 0, -ERANGE outside mr, -EACCES
 * without remote read access, otherwise as rdmamsg_send().
 */
int rdmamsg_send_mr(struct rdmamsg_ep *ep, struct rdmamsg_mr *mr, size_t off,
		    size_t len, void *op_ctx);

/*
 * rdmamsg_send_nocopy -- rdmamsg_send() without its copy where it can: the
 * len bytes at data must stay unchanged until on_send (as with
 * rdmamsg_send_mr()).  Above the rendezvous threshold, when the bytes lie
 * inside one region of this context registered with rdmamsg_mr_reg() and
 * RDMAMSG_ACCESS_REMOTE_READ, the receiver reads them where they are, through
 * a memory window bound over just those bytes for the transfer (where the
 * device has type 2 windows; else with the region's key), and on_send comes
 * once the peer can reach them no more: the caller's registrations are the
 * registration cache, nothing is registered per message, and the region
 * cannot be deregistered while it is read (-EBUSY).  Otherwise the bytes
 * are copied, as rdmamsg_send() copies them.  The receiver cannot tell:
 * same callback, bytes, flags and order as rdmamsg_send().  Errors as
 * rdmamsg_send().
 */
int rdmamsg_send_nocopy(struct rdmamsg_ep *ep, const void *data, size_t len,
			void *op_ctx);

/* rdmamsg_send_nocopy_imm -- rdmamsg_send_nocopy() with an immediate value */
int rdmamsg_send_nocopy_imm(struct rdmamsg_ep *ep, const void *data, size_t len,
			    uint32_t imm, void *op_ctx);

/* ------------------------------------------------------------------------
 * Request/response.  The library correlates responses with requests (a
 * 64-bit id in the header), times requests out and cancels them; requests
 * and responses of any size up to the large maximum (rendezvous beyond
 * the eager maximum).
 * --------------------------------------------------------------------- */

/*
 * rdmamsg_ep_attr_set_on_request -- on_request(ep, req, data, len, arg)
 * gets each request of the peer; data is valid until it returns, req
 * until rdmamsg_respond() or rdmamsg_req_drop() (or the endpoint's close
 * callback).  Without it, requests are dropped (the peer times out).
 */
int rdmamsg_ep_attr_set_on_request(struct rdmamsg_ep_attr *attr,
				   void (*on_request)(struct rdmamsg_ep *ep,
						      struct rdmamsg_req *req,
						      void *data, size_t len,
						      void *arg));

/*
 * rdmamsg_request -- send a request; response_cb(ep, status, data, len,
 * req_arg) runs exactly once: 0 with the response (data valid until it
 * returns), -ETIMEDOUT after timeout_ms (0: no timeout), -ECANCELED after
 * rdmamsg_request_cancel() or rdmamsg_ep_close(), -ECONNRESET (or the
 * endpoint's error) when the connection goes down, the receiver's
 * refusal (-EMSGSIZE, -ENOMEM ...) of a request or response that went by
 * rendezvous (or -ECONNRESET: its read cut in a replay session).  *id
 * identifies the request for cancellation.  Errors as rdmamsg_send():
 * -EMSGSIZE above the large maximum (any len, SIZE_MAX included), -EAGAIN
 * when the pool is short (on_writable follows; nothing was sent, try
 * again), -ENOMEM when it is short and nothing of this endpoint is in
 * flight.
 */
int rdmamsg_request(struct rdmamsg_ep *ep, const void *data, size_t len,
		    unsigned int timeout_ms,
		    void (*response_cb)(struct rdmamsg_ep *ep, int status,
					void *data, size_t len, void *req_arg),
		    void *req_arg, uint64_t *id);

/* rdmamsg_request_cancel -- the request's callback gets -ECANCELED (from
 * the loop, soon); -ENOENT when it completed or was cancelled already */
int rdmamsg_request_cancel(struct rdmamsg_ep *ep, uint64_t id);

/* rdmamsg_respond -- answer req with len bytes (copied) and free it;
 * -ENOTCONN when the connection is down (req stays: drop it), -EMSGSIZE
 * above the large maximum (any len), -EAGAIN when the pool is short: req
 * stays valid, on_writable follows, respond again (or drop it); -ENOMEM
 * likewise when nothing of this endpoint is in flight */
int rdmamsg_respond(struct rdmamsg_req *req, const void *data, size_t len);

/* rdmamsg_req_drop -- free req without answering (the peer times out) */
int rdmamsg_req_drop(struct rdmamsg_req *req);

/* rdmamsg_ep_get_late_responses -- responses dropped because their
 * request had timed out or been cancelled (a response to an id never
 * issued is a protocol error: on_disconnect(-EPROTO)) */
int rdmamsg_ep_get_late_responses(const struct rdmamsg_ep *ep, uint64_t *n);

/* ------------------------------------------------------------------------
 * Memory registration and one-sided operations.
 *
 * Local checks come first: a call that can tell an operation is out of
 * bounds (-ERANGE) or not permitted by the export (-EACCES) refuses it and
 * posts nothing.  What only the peer can tell (a revoked registration, a
 * forged export) completes the operation with -EACCES (remote access
 * error) or -EREMOTEIO (other remote error); the connection is then in
 * error, as on hardware: the endpoint goes down (on_disconnect gets the
 * same status) and every other pending operation, send and request
 * completes exactly once with -ECANCELED or an error.
 * --------------------------------------------------------------------- */

#define RDMAMSG_ACCESS_REMOTE_READ   0x1 /* peers may read */
#define RDMAMSG_ACCESS_REMOTE_WRITE  0x2 /* peers may write */
#define RDMAMSG_ACCESS_REMOTE_ATOMIC 0x4 /* peers may use atomics */

/* Bytes of an export (rdmamsg_mr_export). */
#define RDMAMSG_MR_EXPORT_SIZE 32

/* rdmamsg_mr_reg -- register len bytes at addr with access flags
 * (RDMAMSG_ACCESS_*; local read and write always); -EINVAL for len 0 or
 * unknown flags */
int rdmamsg_mr_reg(struct rdmamsg_ctx *ctx, void *addr, size_t len,
		   unsigned int access, struct rdmamsg_mr **mr);

/* rdmamsg_mr_alloc -- len bytes of new memory, zeroed and page-aligned,
 * registered as rdmamsg_mr_reg() registers (rdmamsg_mr_get_data() says
 * where): made the way the fabric moves it cheapest (shared memory a peer
 * on the same host may map: one-sided operations and rendezvous reads of
 * it, rdmamsg_send_nocopy() included, need no system call on softrdma);
 * rdmamsg_mr_dereg() frees it.  -EINVAL for len 0 or unknown flags,
 * -ENOMEM, or the device's error. */
int rdmamsg_mr_alloc(struct rdmamsg_ctx *ctx, size_t len, unsigned int access,
		     struct rdmamsg_mr **mr);

/*
 * rdmamsg_mr_reg_iov -- register iovcnt (1 to 1024) pieces of the
 * caller's memory, each 1 byte to 4 GiB - 1, as one region whose offsets
 * 0..len run through the pieces in order; rdmamsg_mr_reg_strided -- count
 * (1 to 65536) blocks of block bytes, stride bytes apart from addr (the
 * whole span is registered; offsets run through the blocks only).  With
 * UMR (RDMAMSG_CAP_UMR) the region has one key and its export addresses
 * all of it: a peer writes or reads the pieces in one operation.  Without
 * UMR (or with RDMAMSG_NO_UMR=1 in the environment) it is an SGE list:
 * rdmamsg_mr_export() / rdmamsg_send_mr() of it give -ENOTSUP.  Either
 * way it serves as the local region of rdmamsg_write() / rdmamsg_read()
 * for ranges of at most 2 pieces (-ENOTSUP beyond), and
 * rdmamsg_mr_get_data() reports a NULL address.  -EINVAL for bad arguments (zero lengths,
 * stride < block, wrapping ranges), -ENOMEM, or the device's error.
 */
int rdmamsg_mr_reg_iov(struct rdmamsg_ctx *ctx, const struct iovec *iov,
		       int iovcnt, unsigned int access, struct rdmamsg_mr **mr);
int rdmamsg_mr_reg_strided(struct rdmamsg_ctx *ctx, void *addr, size_t block,
			   size_t stride, size_t count, unsigned int access,
			   struct rdmamsg_mr **mr);

enum rdmamsg_mr_layout {
	RDMAMSG_MR_LAYOUT_CONTIG = 0, /* rdmamsg_mr_reg: contiguous */
	RDMAMSG_MR_LAYOUT_UMR = 1,    /* pieces under one UMR key */
	RDMAMSG_MR_LAYOUT_SGE = 2,    /* pieces as an SGE list (no UMR) */
};

/* rdmamsg_mr_get_layout -- how the region is served */
int rdmamsg_mr_get_layout(const struct rdmamsg_mr *mr,
			  enum rdmamsg_mr_layout *layout);

/* rdmamsg_mr_dereg -- deregister, free *mr (and rdmamsg_mr_alloc()'s
 * memory) and set it to NULL; -EBUSY while operations using it are in
 * flight.  Peers holding its export get remote access errors from then
 * on. */
int rdmamsg_mr_dereg(struct rdmamsg_mr **mr);

/* rdmamsg_mr_get_data -- where the region starts, and its length */
int rdmamsg_mr_get_data(const struct rdmamsg_mr *mr, void **addr, size_t *len);

/* rdmamsg_mr_export -- RDMAMSG_MR_EXPORT_SIZE opaque bytes (address,
 * length, key, access) for a peer to import; -ENOSPC when len is short,
 * -ENOTSUP for a region of pieces without UMR (RDMAMSG_MR_LAYOUT_SGE) */
int rdmamsg_mr_export(const struct rdmamsg_mr *mr, void *buf, size_t len);

/* rdmamsg_rmr_import -- a peer's region from its export; -EINVAL for
 * bytes that are not an export */
int rdmamsg_rmr_import(const void *buf, size_t len, struct rdmamsg_rmr **rmr);

/* rdmamsg_rmr_free -- free *rmr and set it to NULL */
int rdmamsg_rmr_free(struct rdmamsg_rmr **rmr);

/* rdmamsg_rmr_get_size -- the imported region's length */
int rdmamsg_rmr_get_size(const struct rdmamsg_rmr *rmr, size_t *len);

/*
 * rdmamsg_write -- RDMA write len bytes from lmr+loff to rmr+roff; cb(ep,
 * status, 0, op_ctx) runs exactly once (cb may be NULL).  -ENOTCONN,
 * -ERANGE (outside lmr or rmr), -EACCES (export lacks remote write),
 * -EMSGSIZE (above the device's message size), -EAGAIN (send queue full:
 * retry after a completion), -EINVAL (NULL or foreign objects).
 */
int rdmamsg_write(struct rdmamsg_ep *ep, struct rdmamsg_mr *lmr, size_t loff,
		  const struct rdmamsg_rmr *rmr, size_t roff, size_t len,
		  void (*cb)(struct rdmamsg_ep *ep, int status, uint64_t value,
			     void *op_ctx),
		  void *op_ctx);

/*
 * rdmamsg_write_imm -- rdmamsg_write() whose arrival the peer sees:
 * its on_write_imm(ep, imm, len, arg) runs after the data is in place.
 * Uses a receive credit of the peer: -EAGAIN when none is left.
 * -ENOTSUP on a DC endpoint (rdmamsg_ep_attr_set_transport()).
 */
int rdmamsg_write_imm(struct rdmamsg_ep *ep, struct rdmamsg_mr *lmr,
		      size_t loff, const struct rdmamsg_rmr *rmr, size_t roff,
		      size_t len, uint32_t imm,
		      void (*cb)(struct rdmamsg_ep *ep, int status,
				 uint64_t value, void *op_ctx),
		      void *op_ctx);

/* rdmamsg_ep_attr_set_on_write_imm -- what sees the peer's
 * rdmamsg_write_imm() (without it, they are ignored) */
int rdmamsg_ep_attr_set_on_write_imm(struct rdmamsg_ep_attr *attr,
				     void (*on_write_imm)(struct rdmamsg_ep *ep,
							  uint32_t imm,
							  size_t len,
							  void *arg));

/* rdmamsg_read -- RDMA read len bytes from rmr+roff into lmr+loff; as
 * rdmamsg_write() (-EACCES: export lacks remote read) */
int rdmamsg_read(struct rdmamsg_ep *ep, struct rdmamsg_mr *lmr, size_t loff,
		 const struct rdmamsg_rmr *rmr, size_t roff, size_t len,
		 void (*cb)(struct rdmamsg_ep *ep, int status, uint64_t value,
			    void *op_ctx),
		 void *op_ctx);

/*
 * rdmamsg_atomic_cas -- 8-byte compare-and-swap at rmr+roff (8-byte
 * aligned: -EINVAL otherwise); cb's value is the previous contents.
 * -ENOTSUP without device atomics, -EACCES without remote atomic access.
 */
int rdmamsg_atomic_cas(struct rdmamsg_ep *ep, const struct rdmamsg_rmr *rmr,
		       size_t roff, uint64_t compare, uint64_t swap,
		       void (*cb)(struct rdmamsg_ep *ep, int status,
				  uint64_t value, void *op_ctx),
		       void *op_ctx);

/* rdmamsg_atomic_fadd -- 8-byte fetch-and-add; as rdmamsg_atomic_cas() */
int rdmamsg_atomic_fadd(struct rdmamsg_ep *ep, const struct rdmamsg_rmr *rmr,
			size_t roff, uint64_t add,
			void (*cb)(struct rdmamsg_ep *ep, int status,
				   uint64_t value, void *op_ctx),
			void *op_ctx);

/* ---- multicast groups (rdmamsg_group_join(3)) ----------------------- */

/*
 * A group is one multicast address joined through a context: messages
 * published to it reach every subscriber of the address, each with its
 * publisher's identity and sequence number, in publish order per
 * publisher.  Messages above the path MTU are fragmented and reassembled.
 * Delivery is "unreliable but honest": what is lost is reported through
 * on_loss with its range, so that for every publisher a subscriber has
 * heard of, reported + received == published.  See rdmamsg_group_join(3).
 */
struct rdmamsg_group;	   /* a joined (or joining) multicast group */
struct rdmamsg_group_attr; /* parameters for rdmamsg_group_join() */

/* what a group does: publish, subscribe, or both (OR them) */
enum rdmamsg_group_role {
	RDMAMSG_GROUP_PUBLISHER = 1,
	RDMAMSG_GROUP_SUBSCRIBER = 2,
};

/* one received message, lent for the duration of on_message */
struct rdmamsg_group_msg {
	uint64_t publisher; /* the publisher's id (rdmamsg_group_get_id) */
	uint64_t seq;	    /* its sequence number, from 0 per publisher */
	const void *data;
	size_t len;
};

struct rdmamsg_group_cbs {
	/* the join finished: 0 (publish and receive from now on) or a
	 * negative errno (the group is dead: close it) */
	void (*on_join)(struct rdmamsg_group *g, int status, void *arg);
	/* a message (subscribers) */
	void (*on_message)(struct rdmamsg_group *g,
			   const struct rdmamsg_group_msg *msg, void *arg);
	/* messages first .. first + count - 1 of publisher are lost */
	void (*on_loss)(struct rdmamsg_group *g, uint64_t publisher,
			uint64_t first, uint64_t count, void *arg);
	/* an accepted rdmamsg_group_publish() completed (exactly once):
	 * 0 sent, or a negative errno (-ECANCELED: the group closed) */
	void (*on_publish)(struct rdmamsg_group *g, void *op_ctx, int status,
			   void *arg);
};

/* counters (rdmamsg_group_query) */
struct rdmamsg_group_stats {
	uint64_t msgs_published, bytes_published;
	uint64_t msgs_received, bytes_received;
	uint64_t datagrams_sent, datagrams_received, heartbeats_sent;
	uint64_t gaps;	     /* loss reports */
	uint64_t msgs_lost;  /* messages in them */
	uint64_t duplicates; /* datagrams dropped as already seen */
	uint64_t malformed;  /* datagrams dropped as not ours / bad */
	uint64_t publishers; /* publishers heard of */
	uint64_t naks_sent, naks_received, repairs; /* reliable mode */
	/* repairs (messages sent again) by unicast to the one subscriber
	 * that asked, and by multicast to the group */
	uint64_t repairs_unicast, repairs_multicast;
	uint64_t flow_control_stalls; /* publishes refused with -EAGAIN */
	uint64_t receivers; /* reliable publisher: subscribers it waits for */
	uint32_t mtu;	    /* payload bytes per datagram */
	/* datagrams of messages already reported lost (the fragments
	 * after a lost one), dropped: not duplicates */
	uint64_t lost_fragments;
	/* reliable publisher: messages published while a repair waited
	 * for room (repairs and new messages interleaved) */
	uint64_t published_in_repair;
};

int rdmamsg_group_attr_new(struct rdmamsg_group_attr **attr);
int rdmamsg_group_attr_delete(struct rdmamsg_group_attr **attr);
/* role: RDMAMSG_GROUP_PUBLISHER and/or RDMAMSG_GROUP_SUBSCRIBER (default
 * both); a publisher-only group joins send-only (no receives) */
int rdmamsg_group_attr_set_role(struct rdmamsg_group_attr *attr,
				unsigned int role);
/* the largest message published or accepted (default 64 KiB, at most
 * 16 MiB); -EINVAL for 0 or more */
int rdmamsg_group_attr_set_max_msg_size(struct rdmamsg_group_attr *attr,
					size_t size);
/* the local address to join from (an IP address of the device); NULL:
 * the route to the group decides */
int rdmamsg_group_attr_set_bind_addr(struct rdmamsg_group_attr *attr,
				     const char *addr);
/* receive buffers posted (default 512, 16 .. 16384) */
int rdmamsg_group_attr_set_recv_depth(struct rdmamsg_group_attr *attr,
				      uint32_t depth);
/* sends in flight (default 256, 16 .. 16384) */
int rdmamsg_group_attr_set_send_depth(struct rdmamsg_group_attr *attr,
				      uint32_t depth);
/* batching (default 1, on): a publisher packs small messages published
 * while its earlier datagrams are in flight into one datagram, and sends
 * a message of up to the path MTU that does not fit one with the group's
 * header (4 KiB) in one without; 0 sends each message in datagrams of its
 * own, all with the header (for subscribers of a version without
 * batches).  -EINVAL for other values */
int rdmamsg_group_attr_set_batch(struct rdmamsg_group_attr *attr, int on);
/* the publisher's heartbeat period while idle (default 100 ms, 1 ..
 * 60000): subscribers learn of publishers and of lost tails from it */
int rdmamsg_group_attr_set_heartbeat(struct rdmamsg_group_attr *attr,
				     unsigned int ms);
/* a subscriber that received within us microseconds of its previous
 * receive polls up to us more before its context blocks (default 30,
 * RDMAMSG_GROUP_POLL_US overrides the default; 0 .. 100000, 0: block at
 * once): rdmamsg_ctx_arm() says -EBUSY, yielding the CPU, until then */
int rdmamsg_group_attr_set_poll_us(struct rdmamsg_group_attr *attr,
				   unsigned int us);

/*
 * reliable mode (0: off, the default): a publisher keeps its last window
 * messages (1 .. 65536) for repair and never runs more than window
 * messages ahead of the subscriber its flow control waits for (below; by
 * default the slowest it hears from: status messages;
 * one silent for 5 s, or 10 heartbeat periods, is no longer waited for);
 * a subscriber asks for what it missed (NAK) instead of reporting it, and
 * reports only what the publisher can no longer repair.  Publishers and
 * subscribers of a group must agree on it.
 */
int rdmamsg_group_attr_set_reliable(struct rdmamsg_group_attr *attr,
				    uint32_t window);

/*
 * Reliable mode's flow control: whom a publisher waits for, among the
 * subscribers it hears from (Aeron's strategies).  MIN (the default): the
 * slowest; MAX: the fastest, so a slower one may fall behind the window
 * and gets a reported loss; TAGGED: the slowest of those whose tag
 * (rdmamsg_group_attr_set_tag) is tag, the others as in MAX's case; with
 * none of them heard, the publisher is not held.  tag is 0 for MIN and
 * MAX and non-zero for TAGGED, else -EINVAL.
 */
enum rdmamsg_group_flow {
	RDMAMSG_GROUP_FLOW_MIN = 0,
	RDMAMSG_GROUP_FLOW_MAX = 1,
	RDMAMSG_GROUP_FLOW_TAGGED = 2,
};
int rdmamsg_group_attr_set_flow_control(struct rdmamsg_group_attr *attr,
					enum rdmamsg_group_flow flow,
					uint32_t tag);
/* a subscriber's tag for TAGGED flow control (0, the default: none) */
int rdmamsg_group_attr_set_tag(struct rdmamsg_group_attr *attr, uint32_t tag);

/*
 * A reliable publisher's smallest group (Aeron's group minimum size):
 * publishes are refused with -EAGAIN until it hears from n of the
 * subscribers its flow control counts (TAGGED: those with its tag; MIN
 * and MAX: all), so that those get every message from the first even if
 * its heartbeat at the join was lost to them (a subscriber starts where it
 * first hears of a publisher).  0 (the default): not held.  0 .. 1024,
 * else -EINVAL; a join with n > 0 but not in reliable mode is -EINVAL.
 */
int rdmamsg_group_attr_set_min_receivers(struct rdmamsg_group_attr *attr,
					 uint32_t n);

/*
 * rdmamsg_group_join -- join the multicast group at addr ("239.1.2.3",
 * "ff0e::1" or "[ff0e::1]") through ctx; on_join reports the end of the
 * join.  -EINVAL: a NULL ctx, addr, cbs or g, addr is not a multicast
 * address, or bad attributes.
 */
int rdmamsg_group_join(struct rdmamsg_ctx *ctx, const char *addr,
		       const struct rdmamsg_group_attr *attr,
		       const struct rdmamsg_group_cbs *cbs, void *arg,
		       struct rdmamsg_group **g);

/*
 * rdmamsg_group_publish -- send len bytes of data (copied before the call
 * returns) to the group; on_publish(op_ctx) reports its completion.
 * -EMSGSIZE above the maximum size, -EPERM on a subscriber-only group,
 * -ENOTCONN before the join finished or after it failed, -EPIPE after
 * rdmamsg_group_close(), -EAGAIN when the send queue (or the pool) has no
 * room now: nothing was taken, try again after progress.
 */
int rdmamsg_group_publish(struct rdmamsg_group *g, const void *data, size_t len,
			  void *op_ctx);

/*
 * rdmamsg_group_close -- leave the group: publishes already accepted
 * complete (sent, or -ECANCELED), then the group is left and close_cb is
 * called from the context's progress; g is freed after it returns.
 * -EALREADY when already closing.
 */
int rdmamsg_group_close(struct rdmamsg_group *g,
			void (*close_cb)(struct rdmamsg_group *g, void *arg));

/* rdmamsg_group_query -- the group's counters */
int rdmamsg_group_query(const struct rdmamsg_group *g,
			struct rdmamsg_group_stats *stats);

/* rdmamsg_group_get_id -- this member's publisher id (random, non-zero) */
int rdmamsg_group_get_id(const struct rdmamsg_group *g, uint64_t *id);

#ifdef __cplusplus
}
#endif

#endif /* RDMAMSG_H */
