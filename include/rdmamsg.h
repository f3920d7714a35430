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
 * first device, 64 MiB pool limit, no huge pages */
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

/* rdmamsg_ctx_attr_set_pool_limit -- most bytes the pool may register;
 * -EINVAL below 1 MiB */
int rdmamsg_ctx_attr_set_pool_limit(struct rdmamsg_ctx_attr *attr,
				    size_t bytes);

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
 * endpoints, listeners, buffers or close callbacks are outstanding */
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
 * mode, a private poll() loop in fd mode */
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
 * receive depth 64, send depth 128, send backlog 1024 messages */
int rdmamsg_ep_attr_new(struct rdmamsg_ep_attr **attr);

/* rdmamsg_ep_attr_delete -- free *attr and set it to NULL */
int rdmamsg_ep_attr_delete(struct rdmamsg_ep_attr **attr);

/* rdmamsg_ep_attr_set_connect_timeout -- ms until a connect attempt fails
 * with -ETIMEDOUT (0 is invalid) */
int rdmamsg_ep_attr_set_connect_timeout(struct rdmamsg_ep_attr *attr,
					unsigned int ms);

/* rdmamsg_ep_attr_set_close_timeout -- ms rdmamsg_ep_close() waits for the
 * peer and for flushed operations before it cancels what is left */
int rdmamsg_ep_attr_set_close_timeout(struct rdmamsg_ep_attr *attr,
				      unsigned int ms);

/* rdmamsg_ep_attr_set_peer_timeout -- a peer silent for this many ms (at
 * least 30) is dead (on_disconnect gets -ETIMEDOUT); keep-alives go out at
 * a third of it; 0 turns detection off */
int rdmamsg_ep_attr_set_peer_timeout(struct rdmamsg_ep_attr *attr,
				     unsigned int ms);

/* rdmamsg_ep_attr_set_eager_size -- bytes per receive buffer (one message or
 * fragment); 64 .. 1 MiB */
int rdmamsg_ep_attr_set_eager_size(struct rdmamsg_ep_attr *attr, size_t size);

/* rdmamsg_ep_attr_set_max_msg_size -- largest message, split into eager-size
 * fragments and reassembled; at least the eager size, at most 64 MiB */
int rdmamsg_ep_attr_set_max_msg_size(struct rdmamsg_ep_attr *attr, size_t size);

/* rdmamsg_ep_attr_set_recv_depth -- receive buffers, i.e. the credits the
 * peer gets; 2 .. 4096 */
int rdmamsg_ep_attr_set_recv_depth(struct rdmamsg_ep_attr *attr,
				   unsigned int depth);

/* rdmamsg_ep_attr_set_send_depth -- send work requests in flight; 4 .. 4096 */
int rdmamsg_ep_attr_set_send_depth(struct rdmamsg_ep_attr *attr,
				   unsigned int depth);

/* rdmamsg_ep_attr_set_send_backlog -- messages queued while out of credits
 * before sends return -EAGAIN; 0 .. 1048576 */
int rdmamsg_ep_attr_set_send_backlog(struct rdmamsg_ep_attr *attr,
				     unsigned int msgs);

/* rdmamsg_ep_attr_set_private_data -- application bytes sent with connect
 * (or accept); copied; -EINVAL above RDMAMSG_PRIVATE_DATA_MAX */
int rdmamsg_ep_attr_set_private_data(struct rdmamsg_ep_attr *attr,
				     const void *data, size_t len);

/* ------------------------------------------------------------------------
 * Endpoints.
 * --------------------------------------------------------------------- */

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
	0x10005 /* nobody listens there (or not an rdmamsg peer) */

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
	/* on_disconnect -- the connection went down: 0 (peer closed),
	 * -ECONNRESET, -ETIMEDOUT (peer silent past the peer timeout),
	 * -EPROTO (peer broke the protocol), -ENOBUFS (no pool memory to
	 * reassemble a message), -ENODEV (device gone).  Close follows. */
	void (*on_disconnect)(struct rdmamsg_ep *ep, int status, void *arg);
};

/*
 * rdmamsg_connect -- start connecting to "host:port" ("[v6addr]:port" for
 * IPv6); on_connect reports the outcome.  attr may be NULL (defaults).
 * -EINVAL for a malformed address.  Every endpoint, whatever its state, is
 * freed by rdmamsg_ep_close() only.
 */
int rdmamsg_connect(struct rdmamsg_ctx *ctx, const char *addr,
		    const struct rdmamsg_ep_attr *attr,
		    const struct rdmamsg_ep_cbs *cbs, void *arg,
		    struct rdmamsg_ep **ep);

/*
 * rdmamsg_ep_close -- close asynchronously: sends not yet posted and those
 * the peer did not complete get on_send(-ECANCELED), every posted send
 * completes exactly once, then close_cb(ep, arg) (may be NULL) runs and the
 * endpoint is freed.  -EALREADY when close was already called.
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
 * reused on return.  Small messages go inline, large ones are fragmented.
 * -ENOTCONN unless connected, -EMSGSIZE above the maximum, -EAGAIN when out
 * of credits and the backlog (or the pool) is full (on_writable follows).
 * op_ctx comes back in on_send.
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
 * rdmamsg_recv_keep -- from inside on_recv only: take the buffer holding the
 * current message (rdmamsg_buf_get_data() == the callback's data); free it
 * with rdmamsg_buf_free().  -EINVAL outside on_recv, -ENOMEM when no
 * replacement receive buffer can be had (the data is then valid only until
 * the callback returns).
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

/* rdmamsg_listener_get_port -- the port the listener is bound to */
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

#ifdef __cplusplus
}
#endif

#endif /* RDMAMSG_H */
