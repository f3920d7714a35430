"""rdmamsg_build -- cffi (API mode, out of line) builder for rdmamsg._ffi.

The declarations below restate include/rdmamsg.h for cffi; constants and
enum values are left to the compiler (``...``), so the header stays the
single source of truth for their values.  New setters of the header go in
the tables at the top (the Python side reads the same names).

Where the library is found, first match wins:
  RDMAMSG_INCLUDE_DIR / RDMAMSG_LIB_DIR  (the in-tree build sets both)
  pkg-config rdmamsg                     (an installed library)
  /usr/local                             (make install's default prefix)
RDMAMSG_RPATH adds a run-time search path (the in-tree lib, or $(libdir)).

Run directly (``python3 rdmamsg_build.py OUTDIR``) it compiles
OUTDIR/rdmamsg/_ffi*.so; setup.py uses it through cffi_modules.
"""
import os
import shlex
import subprocess
import sys

from cffi import FFI

# Endpoint attribute setters taking one unsigned int / size_t value.
EP_ATTR_UINT = ["connect_timeout", "close_timeout", "peer_timeout",
                "recv_depth", "recv_depth_max", "send_depth", "send_backlog",
                "ack_timeout"]
EP_ATTR_SIZE = ["eager_size", "max_msg_size", "max_large_size",
                "rndv_threshold"]

CDEF = """
#define RDMAMSG_PRIVATE_DATA_MAX ...
#define RDMAMSG_MR_EXPORT_SIZE ...
#define RDMAMSG_RECV_IMM ...
#define RDMAMSG_RECV_LARGE ...
#define RDMAMSG_ACCESS_REMOTE_READ ...
#define RDMAMSG_ACCESS_REMOTE_WRITE ...
#define RDMAMSG_ACCESS_REMOTE_ATOMIC ...
#define RDMAMSG_REJECT_VERSION ...
#define RDMAMSG_REJECT_HANDSHAKE ...
#define RDMAMSG_REJECT_RESOURCES ...
#define RDMAMSG_REJECT_CLOSED ...
#define RDMAMSG_REJECT_NO_LISTENER ...
#define RDMAMSG_REJECT_SESSION ...
#define RDMAMSG_HS_SESSION_USER ...
#define RDMAMSG_VERSION_MAJOR ...
#define RDMAMSG_VERSION_MINOR ...
#define RDMAMSG_MAX_PATHS ...
#define RDMAMSG_IOV_MAX ...
#define RDMAMSG_RNDV_THRESH_MIN ...
#define RDMAMSG_DC_PRIVATE_DATA_MAX ...

struct iovec {
	void *iov_base;
	size_t iov_len;
};

enum rdmamsg_fabric { RDMAMSG_FABRIC_AUTO, RDMAMSG_FABRIC_VERBS,
		      RDMAMSG_FABRIC_SOFT, ... };
enum rdmamsg_cap { RDMAMSG_CAP_MAX_MSG_SIZE, RDMAMSG_CAP_MAX_INLINE,
		   RDMAMSG_CAP_SRQ, RDMAMSG_CAP_ATOMICS,
		   RDMAMSG_CAP_MULTICAST, RDMAMSG_CAP_APM, RDMAMSG_CAP_DC,
		   RDMAMSG_CAP_UMR, ... };
enum rdmamsg_ep_state { RDMAMSG_EP_CONNECTING, RDMAMSG_EP_CONNECTED,
			RDMAMSG_EP_DISCONNECTED, RDMAMSG_EP_CLOSING, ... };

enum rdmamsg_failover { RDMAMSG_FAILOVER_OFF, RDMAMSG_FAILOVER_RECONNECT,
			 RDMAMSG_FAILOVER_REPLAY,
			 ... };
enum rdmamsg_path_event { RDMAMSG_PATH_DOWN, RDMAMSG_FAILOVER_START,
			  RDMAMSG_FAILOVER_DONE, RDMAMSG_FAILOVER_FAILED,
			  RDMAMSG_PATH_MIGRATED, RDMAMSG_PATH_MIG_FAILED,
			  ... };
enum rdmamsg_apm { RDMAMSG_APM_OFF, RDMAMSG_APM_AUTO, ... };
enum rdmamsg_transport { RDMAMSG_TRANSPORT_RC, RDMAMSG_TRANSPORT_DC, ... };

struct rdmamsg_ctx;
struct rdmamsg_ctx_attr;
struct rdmamsg_ep;
struct rdmamsg_ep_attr;
struct rdmamsg_listener;
struct rdmamsg_conn_req;
struct rdmamsg_buf;
struct rdmamsg_mr;
struct rdmamsg_rmr;
struct rdmamsg_req;
struct rdmamsg_srq;

struct rdmamsg_srq_attr {
	unsigned int max_bufs;
	size_t buf_size;
	...;
};

struct rdmamsg_path_stats {
	unsigned int npaths;
	unsigned int path;
	uint64_t path_downs;
	uint64_t failovers;
	uint64_t failover_fails;
	uint64_t last_failover_ns;
	uint64_t attempts;
	uint64_t migrations;
	uint64_t mig_fails;
	unsigned int apm;
	...;
};

struct rdmamsg_protocols {
	size_t max_inline;
	size_t eager;
	size_t rndv_threshold;
	size_t max_msg;
	size_t max_large;
	int rndv_window;
	...;
};

struct rdmamsg_dc_stats {
	uint32_t dcis;
	uint32_t dcts;
	uint32_t endpoints;
	uint32_t qps;
	uint64_t tag_drops;
	uint64_t dci_waits;
	uint64_t dci_resets;
	uint64_t key_violations;
	...;
};

struct rdmamsg_srq_stats {
	unsigned int endpoints;
	unsigned int reserved;
	unsigned int bufs;
	unsigned int posted;
	size_t registered;
	unsigned long long limit_events;
	...;
};

enum rdmamsg_log_level { RDMAMSG_LOG_DISABLED, RDMAMSG_LOG_ERROR,
			 RDMAMSG_LOG_WARNING, RDMAMSG_LOG_NOTICE,
			 RDMAMSG_LOG_INFO, RDMAMSG_LOG_DEBUG, ... };

struct rdmamsg_ep_cbs {
	void (*on_connect)(struct rdmamsg_ep *, int, int, const void *,
			   size_t, void *);
	void (*on_recv)(struct rdmamsg_ep *, void *, size_t, uint32_t,
			unsigned int, void *);
	void (*on_send)(struct rdmamsg_ep *, int, void *, void *);
	void (*on_writable)(struct rdmamsg_ep *, void *);
	void (*on_disconnect)(struct rdmamsg_ep *, int, void *);
	...;
};

const char *rdmamsg_version(void);
const char *rdmamsg_strerror(int err);
int rdmamsg_log_set_level(int level);
int rdmamsg_log_get_level(int *level);

int rdmamsg_ctx_attr_new(struct rdmamsg_ctx_attr **attr);
int rdmamsg_ctx_attr_delete(struct rdmamsg_ctx_attr **attr);
int rdmamsg_ctx_attr_set_fabric(struct rdmamsg_ctx_attr *attr,
				enum rdmamsg_fabric fabric);
int rdmamsg_ctx_attr_set_device(struct rdmamsg_ctx_attr *attr,
				const char *device);
int rdmamsg_ctx_attr_set_pool_limit(struct rdmamsg_ctx_attr *attr,
				    size_t bytes);
int rdmamsg_ctx_attr_set_huge_pages(struct rdmamsg_ctx_attr *attr, int e);
int rdmamsg_ctx_attr_set_listen_backlog(struct rdmamsg_ctx_attr *attr,
					unsigned int requests);
int rdmamsg_ctx_attr_set_max_pending(struct rdmamsg_ctx_attr *attr,
				     unsigned int handshakes);
int rdmamsg_ctx_create(const struct rdmamsg_ctx_attr *attr,
		       struct rdmamsg_ctx **ctx);
int rdmamsg_ctx_destroy(struct rdmamsg_ctx **ctx);
int rdmamsg_ctx_get_fd(const struct rdmamsg_ctx *ctx, int *fd);
int rdmamsg_ctx_arm(struct rdmamsg_ctx *ctx);
int rdmamsg_ctx_progress(struct rdmamsg_ctx *ctx);
int rdmamsg_ctx_get_fabric(const struct rdmamsg_ctx *ctx,
			   enum rdmamsg_fabric *fabric);
int rdmamsg_ctx_get_device_name(const struct rdmamsg_ctx *ctx,
				const char **name);
int rdmamsg_ctx_query_caps(const struct rdmamsg_ctx *ctx,
			   enum rdmamsg_cap cap, uint64_t *value);
int rdmamsg_ctx_query_pool(const struct rdmamsg_ctx *ctx,
			   size_t *registered, size_t *in_use);

int rdmamsg_buf_alloc(struct rdmamsg_ctx *ctx, size_t size,
		      struct rdmamsg_buf **buf);
int rdmamsg_buf_free(struct rdmamsg_buf *buf);
int rdmamsg_buf_get_data(const struct rdmamsg_buf *buf, void **data);
int rdmamsg_buf_get_size(const struct rdmamsg_buf *buf, size_t *size);

int rdmamsg_ep_attr_new(struct rdmamsg_ep_attr **attr);
int rdmamsg_ep_attr_delete(struct rdmamsg_ep_attr **attr);
%(ep_attr_setters)s
int rdmamsg_ep_attr_set_private_data(struct rdmamsg_ep_attr *attr,
				     const void *data, size_t len);
int rdmamsg_ep_attr_set_on_request(struct rdmamsg_ep_attr *attr,
	void (*on_request)(struct rdmamsg_ep *, struct rdmamsg_req *,
			   void *, size_t, void *));
int rdmamsg_ep_attr_set_linger(struct rdmamsg_ep_attr *attr, int enable);
int rdmamsg_ep_attr_set_srq(struct rdmamsg_ep_attr *attr,
			    struct rdmamsg_srq *srq);
int rdmamsg_ep_attr_set_recv_alloc(struct rdmamsg_ep_attr *attr,
	int (*alloc)(struct rdmamsg_ep *, size_t, void **,
		     struct rdmamsg_mr **, void *));
int rdmamsg_srq_create(struct rdmamsg_ctx *ctx,
		       const struct rdmamsg_srq_attr *attr,
		       struct rdmamsg_srq **srq);
int rdmamsg_srq_close(struct rdmamsg_srq *srq,
		      void (*close_cb)(struct rdmamsg_srq *, void *),
		      void *arg);
int rdmamsg_srq_query(const struct rdmamsg_srq *srq,
		      struct rdmamsg_srq_stats *stats);
int rdmamsg_ep_attr_set_on_write_imm(struct rdmamsg_ep_attr *attr,
	void (*on_write_imm)(struct rdmamsg_ep *, uint32_t, size_t, void *));
int rdmamsg_ep_attr_set_apm(struct rdmamsg_ep_attr *attr,
			    enum rdmamsg_apm mode);
int rdmamsg_ep_attr_set_transport(struct rdmamsg_ep_attr *attr,
				  enum rdmamsg_transport transport);
int rdmamsg_ctx_dc_stats(const struct rdmamsg_ctx *ctx,
			 struct rdmamsg_dc_stats *stats);
int rdmamsg_ep_get_protocols(const struct rdmamsg_ep *ep,
			     struct rdmamsg_protocols *pr);
int rdmamsg_ep_get_pack_limit(const struct rdmamsg_ep *ep, size_t *max);
int rdmamsg_ep_get_window(const struct rdmamsg_ep *ep, uint32_t *now,
			  uint32_t *max);
int rdmamsg_sendv(struct rdmamsg_ep *ep, const struct iovec *iov, int iovcnt,
		  void *op_ctx);
int rdmamsg_ep_attr_set_failover(struct rdmamsg_ep_attr *attr,
				 enum rdmamsg_failover policy);
int rdmamsg_ep_attr_set_reconnect(struct rdmamsg_ep_attr *attr,
				  unsigned int timeout_ms, unsigned int tries);
int rdmamsg_ep_attr_set_session_linger(struct rdmamsg_ep_attr *attr,
				       unsigned int ms);
int rdmamsg_ep_test_break(struct rdmamsg_ep *ep);
int rdmamsg_ep_attr_set_path_cb(struct rdmamsg_ep_attr *attr,
	void (*cb)(struct rdmamsg_ep *, enum rdmamsg_path_event,
		   unsigned int, int, void *));
int rdmamsg_ep_get_path_stats(const struct rdmamsg_ep *ep,
			      struct rdmamsg_path_stats *stats);

int rdmamsg_connect(struct rdmamsg_ctx *ctx, const char *addr,
		    const struct rdmamsg_ep_attr *attr,
		    const struct rdmamsg_ep_cbs *cbs, void *arg,
		    struct rdmamsg_ep **ep);
int rdmamsg_ep_close(struct rdmamsg_ep *ep,
		     void (*close_cb)(struct rdmamsg_ep *, void *));
int rdmamsg_ep_get_state(const struct rdmamsg_ep *ep,
			 enum rdmamsg_ep_state *state);
int rdmamsg_ep_get_max_msg_size(const struct rdmamsg_ep *ep, size_t *size);
int rdmamsg_send(struct rdmamsg_ep *ep, const void *data, size_t len,
		 void *op_ctx);
int rdmamsg_send_imm(struct rdmamsg_ep *ep, const void *data, size_t len,
		     uint32_t imm, void *op_ctx);
int rdmamsg_send_buf(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf,
		     size_t len, void *op_ctx);
int rdmamsg_send_buf_imm(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf,
			 size_t len, uint32_t imm, void *op_ctx);
int rdmamsg_recv_keep(struct rdmamsg_ep *ep, struct rdmamsg_buf **buf);
int rdmamsg_send_large(struct rdmamsg_ep *ep, const void *data, size_t len,
		       void *op_ctx);
int rdmamsg_send_mr(struct rdmamsg_ep *ep, struct rdmamsg_mr *mr, size_t off,
		    size_t len, void *op_ctx);
int rdmamsg_send_nocopy(struct rdmamsg_ep *ep, const void *data, size_t len,
			void *op_ctx);
int rdmamsg_send_nocopy_imm(struct rdmamsg_ep *ep, const void *data, size_t len,
			    uint32_t imm, void *op_ctx);

int rdmamsg_listen(struct rdmamsg_ctx *ctx, const char *addr,
	void (*on_conn_req)(struct rdmamsg_listener *,
			    struct rdmamsg_conn_req *, const void *,
			    size_t, void *),
	void *arg, struct rdmamsg_listener **lst);
int rdmamsg_listener_get_port(const struct rdmamsg_listener *lst,
			      uint16_t *port);
int rdmamsg_listener_close(struct rdmamsg_listener *lst,
	void (*close_cb)(struct rdmamsg_listener *, void *));
int rdmamsg_conn_req_accept(struct rdmamsg_conn_req *req,
			    const struct rdmamsg_ep_attr *attr,
			    const struct rdmamsg_ep_cbs *cbs, void *arg,
			    struct rdmamsg_ep **ep);
int rdmamsg_conn_req_reject(struct rdmamsg_conn_req *req, int reason,
			    const void *pdata, size_t pdata_len);

int rdmamsg_request(struct rdmamsg_ep *ep, const void *data, size_t len,
		    unsigned int timeout_ms,
		    void (*response_cb)(struct rdmamsg_ep *, int, void *,
					size_t, void *),
		    void *req_arg, uint64_t *id);
int rdmamsg_request_cancel(struct rdmamsg_ep *ep, uint64_t id);
int rdmamsg_respond(struct rdmamsg_req *req, const void *data, size_t len);
int rdmamsg_req_drop(struct rdmamsg_req *req);
int rdmamsg_ep_get_late_responses(const struct rdmamsg_ep *ep, uint64_t *n);

int rdmamsg_mr_reg(struct rdmamsg_ctx *ctx, void *addr, size_t len,
		   unsigned int access, struct rdmamsg_mr **mr);
int rdmamsg_mr_dereg(struct rdmamsg_mr **mr);
int rdmamsg_mr_reg_iov(struct rdmamsg_ctx *ctx, const struct iovec *iov,
		       int iovcnt, unsigned int access, struct rdmamsg_mr **mr);
int rdmamsg_mr_reg_strided(struct rdmamsg_ctx *ctx, void *addr, size_t block,
			   size_t stride, size_t count, unsigned int access,
			   struct rdmamsg_mr **mr);
enum rdmamsg_mr_layout {
	RDMAMSG_MR_LAYOUT_CONTIG = 0,
	RDMAMSG_MR_LAYOUT_UMR = 1,
	RDMAMSG_MR_LAYOUT_SGE = 2,
};
int rdmamsg_mr_get_layout(const struct rdmamsg_mr *mr,
			  enum rdmamsg_mr_layout *layout);
int rdmamsg_mr_export(const struct rdmamsg_mr *mr, void *buf, size_t len);
int rdmamsg_rmr_import(const void *buf, size_t len, struct rdmamsg_rmr **rmr);
int rdmamsg_rmr_free(struct rdmamsg_rmr **rmr);
int rdmamsg_rmr_get_size(const struct rdmamsg_rmr *rmr, size_t *len);
int rdmamsg_write(struct rdmamsg_ep *ep, struct rdmamsg_mr *lmr, size_t loff,
		  const struct rdmamsg_rmr *rmr, size_t roff, size_t len,
		  void (*cb)(struct rdmamsg_ep *, int, uint64_t, void *),
		  void *op_ctx);
int rdmamsg_write_imm(struct rdmamsg_ep *ep, struct rdmamsg_mr *lmr,
		      size_t loff, const struct rdmamsg_rmr *rmr, size_t roff,
		      size_t len, uint32_t imm,
		      void (*cb)(struct rdmamsg_ep *, int, uint64_t, void *),
		      void *op_ctx);
int rdmamsg_read(struct rdmamsg_ep *ep, struct rdmamsg_mr *lmr, size_t loff,
		 const struct rdmamsg_rmr *rmr, size_t roff, size_t len,
		 void (*cb)(struct rdmamsg_ep *, int, uint64_t, void *),
		 void *op_ctx);
int rdmamsg_atomic_cas(struct rdmamsg_ep *ep, const struct rdmamsg_rmr *rmr,
		       size_t roff, uint64_t compare, uint64_t swap,
		       void (*cb)(struct rdmamsg_ep *, int, uint64_t, void *),
		       void *op_ctx);
int rdmamsg_atomic_fadd(struct rdmamsg_ep *ep, const struct rdmamsg_rmr *rmr,
			size_t roff, uint64_t add,
			void (*cb)(struct rdmamsg_ep *, int, uint64_t, void *),
			void *op_ctx);

/* multicast groups */
struct rdmamsg_group;
struct rdmamsg_group_attr;
enum rdmamsg_group_role { RDMAMSG_GROUP_PUBLISHER, RDMAMSG_GROUP_SUBSCRIBER,
			  ... };
enum rdmamsg_group_flow { RDMAMSG_GROUP_FLOW_MIN, RDMAMSG_GROUP_FLOW_MAX,
			  RDMAMSG_GROUP_FLOW_TAGGED, ... };
struct rdmamsg_group_msg {
	uint64_t publisher;
	uint64_t seq;
	const void *data;
	size_t len;
	...;
};
struct rdmamsg_group_cbs {
	void (*on_join)(struct rdmamsg_group *, int, void *);
	void (*on_message)(struct rdmamsg_group *,
			   const struct rdmamsg_group_msg *, void *);
	void (*on_loss)(struct rdmamsg_group *, uint64_t, uint64_t, uint64_t,
			void *);
	void (*on_publish)(struct rdmamsg_group *, void *, int, void *);
	...;
};
struct rdmamsg_group_stats {
	uint64_t msgs_published, bytes_published;
	uint64_t msgs_received, bytes_received;
	uint64_t datagrams_sent, datagrams_received, heartbeats_sent;
	uint64_t gaps;
	uint64_t msgs_lost;
	uint64_t duplicates;
	uint64_t malformed;
	uint64_t publishers;
	uint64_t naks_sent, naks_received, repairs;
	uint64_t repairs_unicast, repairs_multicast;
	uint64_t flow_control_stalls;
	uint64_t receivers;
	uint32_t mtu;
	uint64_t lost_fragments;
	uint64_t published_in_repair;
	...;
};
int rdmamsg_group_attr_new(struct rdmamsg_group_attr **attr);
int rdmamsg_group_attr_delete(struct rdmamsg_group_attr **attr);
int rdmamsg_group_attr_set_role(struct rdmamsg_group_attr *attr,
				unsigned int role);
int rdmamsg_group_attr_set_max_msg_size(struct rdmamsg_group_attr *attr,
					size_t size);
int rdmamsg_group_attr_set_bind_addr(struct rdmamsg_group_attr *attr,
				     const char *addr);
int rdmamsg_group_attr_set_recv_depth(struct rdmamsg_group_attr *attr,
				      uint32_t depth);
int rdmamsg_group_attr_set_send_depth(struct rdmamsg_group_attr *attr,
				      uint32_t depth);
int rdmamsg_group_attr_set_heartbeat(struct rdmamsg_group_attr *attr,
				     unsigned int ms);
int rdmamsg_group_attr_set_reliable(struct rdmamsg_group_attr *attr,
				    uint32_t window);
int rdmamsg_group_attr_set_flow_control(struct rdmamsg_group_attr *attr,
					enum rdmamsg_group_flow flow,
					uint32_t tag);
int rdmamsg_group_attr_set_tag(struct rdmamsg_group_attr *attr, uint32_t tag);
int rdmamsg_group_attr_set_min_receivers(struct rdmamsg_group_attr *attr,
					 uint32_t n);
int rdmamsg_group_attr_set_batch(struct rdmamsg_group_attr *attr, int on);
int rdmamsg_group_attr_set_poll_us(struct rdmamsg_group_attr *attr,
				   unsigned int us);
int rdmamsg_group_join(struct rdmamsg_ctx *ctx, const char *addr,
		       const struct rdmamsg_group_attr *attr,
		       const struct rdmamsg_group_cbs *cbs, void *arg,
		       struct rdmamsg_group **g);
int rdmamsg_group_publish(struct rdmamsg_group *g, const void *data,
			  size_t len, void *op_ctx);
int rdmamsg_group_close(struct rdmamsg_group *g,
			void (*close_cb)(struct rdmamsg_group *, void *));
int rdmamsg_group_query(const struct rdmamsg_group *g,
			struct rdmamsg_group_stats *stats);
int rdmamsg_group_get_id(const struct rdmamsg_group *g, uint64_t *id);

/* C helpers of the binding (SOURCE below): fewer crossings per message */
#define _RDMAMSG_PY_REC_SIZE ...
#define _RDMAMSG_PY_COPY_MAX ...
#define _RDMAMSG_PY_RESP ...
#define _RDMAMSG_PY_REQ ...
struct _rdmamsg_py_batch {
	unsigned int n;
	unsigned int used;
	int woke;
	uint64_t spin_ns;
	uint64_t spins;
	uint64_t spin_hits;
	uint64_t spin_polls;
	uint64_t spin_skips;
	char arena[...];
	...;
};
int _rdmamsg_py_pump(struct rdmamsg_ctx *ctx, unsigned int rounds,
		     struct _rdmamsg_py_batch *b, int spin_ok);
void _rdmamsg_py_on_recv(struct rdmamsg_ep *, void *, size_t, uint32_t,
			 unsigned int, void *);
void _rdmamsg_py_on_recv1(struct rdmamsg_ep *, void *, size_t, uint32_t,
			  unsigned int, void *);
void _rdmamsg_py_on_disconnect(struct rdmamsg_ep *, int, void *);
void _rdmamsg_py_on_ep_closed(struct rdmamsg_ep *, void *);
void _rdmamsg_py_on_request(struct rdmamsg_ep *, struct rdmamsg_req *,
			    void *, size_t, void *);
void _rdmamsg_py_on_write_imm(struct rdmamsg_ep *, uint32_t, size_t,
			      void *);
void _rdmamsg_py_on_response(struct rdmamsg_ep *, int, void *, size_t,
			     void *);
int _rdmamsg_py_send(struct rdmamsg_ctx *ctx, struct rdmamsg_ep *ep,
		     const char *data, size_t len, uintptr_t opid,
		     struct _rdmamsg_py_batch *b);
int _rdmamsg_py_sent(struct rdmamsg_ctx *ctx, struct _rdmamsg_py_batch *b);
int _rdmamsg_py_request(struct rdmamsg_ctx *ctx, struct rdmamsg_ep *ep,
			const char *data, size_t len, unsigned int ms,
			uintptr_t opid, uint64_t *id,
			struct _rdmamsg_py_batch *b);
int _rdmamsg_py_respond(uintptr_t req, const char *data, size_t len);
void _rdmamsg_py_on_send(struct rdmamsg_ep *, int, void *, void *);
void _rdmamsg_py_on_publish(struct rdmamsg_group *, void *, int, void *);
int _rdmamsg_py_log_route(int on);

/* Python callbacks (their arg is a handle or an operation id) */
extern "Python" void _py_on_connect(struct rdmamsg_ep *, int, int,
				    const void *, size_t, void *);
extern "Python" void _py_on_recv(struct rdmamsg_ep *, void *, size_t,
				 uint32_t, unsigned int, void *);
extern "Python" void _py_on_send(struct rdmamsg_ep *, int, void *, void *);
extern "Python" void _py_on_writable(struct rdmamsg_ep *, void *);
extern "Python" void _py_on_disconnect(struct rdmamsg_ep *, int, void *);
extern "Python" void _py_on_ep_closed(struct rdmamsg_ep *, void *);
extern "Python" void _py_on_path(struct rdmamsg_ep *,
				 enum rdmamsg_path_event, unsigned int, int,
				 void *);
extern "Python" void _py_on_request(struct rdmamsg_ep *,
				    struct rdmamsg_req *, void *, size_t,
				    void *);
extern "Python" void _py_on_write_imm(struct rdmamsg_ep *, uint32_t, size_t,
				      void *);
extern "Python" void _py_on_response(struct rdmamsg_ep *, int, void *,
				     size_t, void *);
extern "Python" void _py_on_rma(struct rdmamsg_ep *, int, uint64_t, void *);
extern "Python" void _py_on_conn_req(struct rdmamsg_listener *,
				     struct rdmamsg_conn_req *, const void *,
				     size_t, void *);
extern "Python" void _py_drain(struct _rdmamsg_py_batch *, unsigned int);
extern "Python" int _py_recv_alloc(struct rdmamsg_ep *, size_t, void **,
				   struct rdmamsg_mr **, void *);
extern "Python" void _py_on_srq_closed(struct rdmamsg_srq *, void *);
extern "Python" void _py_log(int, const char *, const char *);
extern "Python" void _py_on_join(struct rdmamsg_group *, int, void *);
extern "Python" void _py_on_message(struct rdmamsg_group *,
				    const struct rdmamsg_group_msg *, void *);
extern "Python" void _py_on_loss(struct rdmamsg_group *, uint64_t, uint64_t,
				 uint64_t, void *);
extern "Python" void _py_on_publish(struct rdmamsg_group *, void *, int,
				    void *);
extern "Python" void _py_on_group_closed(struct rdmamsg_group *, void *);
extern "Python" void _py_on_listener_closed(struct rdmamsg_listener *,
					    void *);
"""


# Small C functions compiled into the module: one call from Python where
# a pass or a send would otherwise cross into C two or three times, and a
# send completion nobody waits for (op_ctx 0) that never enters Python.
SOURCE = r"""
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <rdmamsg.h>

static void _py_on_send(struct rdmamsg_ep *, int, void *, void *);
static void _py_on_publish(struct rdmamsg_group *, void *, int, void *);
static void _py_log(int, const char *, const char *);
static void _py_on_recv(struct rdmamsg_ep *, void *, size_t, uint32_t,
			unsigned int, void *);
static void _py_on_disconnect(struct rdmamsg_ep *, int, void *);
static void _py_on_ep_closed(struct rdmamsg_ep *, void *);
static void _py_on_request(struct rdmamsg_ep *, struct rdmamsg_req *, void *,
			   size_t, void *);
static void _py_on_write_imm(struct rdmamsg_ep *, uint32_t, size_t, void *);
static void _py_on_response(struct rdmamsg_ep *, int, void *, size_t, void *);

/* The batch.  During a progress call of the pump, on_recv copies each
 * small message (up to _RDMAMSG_PY_COPY_MAX bytes, not RECV_LARGE) into
 * the context's batch as a record -- its endpoint's arg, length, immediate
 * value and flags, then the bytes, padded to 8 -- instead of calling into
 * Python once per message; so do the completions of tracked sends (the
 * operation id and status) and responses (id, status, bytes).  The pump
 * returns to Python, which delivers the whole batch in one go
 * (Context._pump, _deliver).  Whatever else reaches Python during that
 * progress call (a larger message, a disconnect, a close, a request) first
 * has the batch drained (_py_drain), so every endpoint sees its events in
 * the library's order.  Outside a pump's progress call (no batch) each
 * goes to Python on its own as before.  So do the peer's requests up to
 * _RDMAMSG_PY_COPY_MAX bytes (the struct rdmamsg_req pointer split over
 * imm and flags), which a request handler answers from the batch. */
#define _RDMAMSG_PY_ARENA (64 * 1024)
#define _RDMAMSG_PY_COPY_MAX 2048

struct _rdmamsg_py_rec {
	uint64_t arg;
	uint32_t len;
	uint32_t imm;
	uint32_t flags;
	uint32_t kind; /* _RDMAMSG_PY_MSG, _SENT, _RESP */
};
#define _RDMAMSG_PY_MSG 0  /* arg, len, imm, flags, the bytes */
#define _RDMAMSG_PY_SENT 1 /* arg = op id, flags = status */
#define _RDMAMSG_PY_RESP 2 /* arg = op id, flags = status, len, bytes */
#define _RDMAMSG_PY_REQ 3  /* arg, len, imm | flags << 32 = the request */
#define _RDMAMSG_PY_REC_SIZE ((int)sizeof(struct _rdmamsg_py_rec))

struct _rdmamsg_py_batch {
	unsigned int n;	     /* records */
	unsigned int used;   /* bytes of arena */
	int woke;	     /* a task was woken: its step runs before arm */
	unsigned int rounds; /* progress calls the pass may still make */
	/* busy polling (Context(busy_poll=), see _rdmamsg_py_spin): */
	uint64_t spin_ns;	 /* the longest spin, 0: never (Python sets) */
	int want_spin;		 /* Python just worked: spin before arming */
	unsigned int spin_fails; /* fruitless spins in a row (capped) */
	unsigned int spin_skip;	 /* chances to spin still skipped (backoff) */
	uint64_t spins;		 /* counters: spins started, */
	uint64_t spin_hits;	 /* ended by work for Python, */
	uint64_t spin_polls;	 /* their progress calls, */
	uint64_t spin_skips;	 /* chances skipped by the backoff */
	char arena[_RDMAMSG_PY_ARENA] __attribute__((aligned(8)));
};

static void _py_drain(struct _rdmamsg_py_batch *, unsigned int);

/* the batch of the pump's progress call running in this thread, or NULL */
static __thread struct _rdmamsg_py_batch *_rdmamsg_py_cur;

/* deliver the batch now, from inside the progress call; Python reads the
 * records in place, so nothing may land in the arena meanwhile: whatever
 * the library would call back with during it goes to Python on its own
 * (it does not call back from inside the calls Python may make) */
static void _rdmamsg_py_sync(void)
{
	struct _rdmamsg_py_batch *b = _rdmamsg_py_cur;

	if (!b)
		return;
	b->woke = 1; /* Python runs: work (a busy poll's hit, see below) */
	if (!b->n)
		return;
	_rdmamsg_py_cur = NULL;
	_py_drain(b, b->n);
	b->n = 0;
	b->used = 0;
	_rdmamsg_py_cur = b;
}

/* a record of len bytes in the running pump's batch, or NULL (no batch,
 * too large: the caller goes to Python on its own, after the batch) */
static struct _rdmamsg_py_rec *_rdmamsg_py_rec(size_t len)
{
	struct _rdmamsg_py_batch *b = _rdmamsg_py_cur;
	struct _rdmamsg_py_rec *r;
	size_t need;

	if (!b || len > _RDMAMSG_PY_COPY_MAX) {
		_rdmamsg_py_sync();
		return NULL;
	}
	need = sizeof(*r) + ((len + 7) & ~(size_t)7);
	if (sizeof(b->arena) - b->used < need) {
		_rdmamsg_py_sync();
		if (sizeof(b->arena) - b->used < need) /* not drained: never */
			return NULL;
	}
	r = (struct _rdmamsg_py_rec *)(void *)(b->arena + b->used);
	r->len = (uint32_t)len;
	b->used += (unsigned int)need;
	b->n++;
	return r;
}

static void _rdmamsg_py_on_recv(struct rdmamsg_ep *ep, void *data,
				size_t len, uint32_t imm, unsigned int flags,
				void *arg)
{
	struct _rdmamsg_py_rec *r;

	r = flags & RDMAMSG_RECV_LARGE ? NULL : _rdmamsg_py_rec(len);
	if (!r) {
		_rdmamsg_py_sync();
		_py_on_recv(ep, data, len, imm, flags, arg);
		return;
	}
	r->arg = (uint64_t)(uintptr_t)arg;
	r->imm = imm;
	r->flags = flags;
	r->kind = _RDMAMSG_PY_MSG;
	memcpy(r + 1, data, len);
}

/* on_recv of an endpoint whose messages all go to Python one by one
 * (keep_threshold <= _RDMAMSG_PY_COPY_MAX) */
static void _rdmamsg_py_on_recv1(struct rdmamsg_ep *ep, void *data,
				 size_t len, uint32_t imm, unsigned int flags,
				 void *arg)
{
	_rdmamsg_py_sync();
	_py_on_recv(ep, data, len, imm, flags, arg);
}

static void _rdmamsg_py_on_disconnect(struct rdmamsg_ep *ep, int status,
				      void *arg)
{
	_rdmamsg_py_sync();
	_py_on_disconnect(ep, status, arg);
}

static void _rdmamsg_py_on_ep_closed(struct rdmamsg_ep *ep, void *arg)
{
	_rdmamsg_py_sync();
	_py_on_ep_closed(ep, arg);
}

static void _rdmamsg_py_on_request(struct rdmamsg_ep *ep,
				   struct rdmamsg_req *req, void *data,
				   size_t len, void *arg)
{
	struct _rdmamsg_py_rec *r = _rdmamsg_py_rec(len);
	uint64_t p = (uint64_t)(uintptr_t)req;

	if (!r) {
		_py_on_request(ep, req, data, len, arg);
		return;
	}
	r->arg = (uint64_t)(uintptr_t)arg;
	r->imm = (uint32_t)p;
	r->flags = (uint32_t)(p >> 32);
	r->kind = _RDMAMSG_PY_REQ;
	if (len)
		memcpy(r + 1, data, len);
}

static void _rdmamsg_py_on_write_imm(struct rdmamsg_ep *ep, uint32_t imm,
				     size_t len, void *arg)
{
	_rdmamsg_py_sync();
	_py_on_write_imm(ep, imm, len, arg);
}

static void _rdmamsg_py_on_response(struct rdmamsg_ep *ep, int status,
				    void *data, size_t len, void *arg)
{
	struct _rdmamsg_py_rec *r;

	if (status != 0)
		len = 0;
	r = _rdmamsg_py_rec(len);
	if (!r) {
		_py_on_response(ep, status, data, len, arg);
		return;
	}
	r->arg = (uint64_t)(uintptr_t)arg;
	r->imm = 0;
	r->flags = (uint32_t)status;
	r->kind = _RDMAMSG_PY_RESP;
	if (len)
		memcpy(r + 1, data, len);
}

/* Busy polling.  With b->spin_ns set, a pass that left work for Python
 * (a message, a completion, a woken task: a conversation is going on) or
 * a send from outside a pass makes the pump, once Python is done and
 * before it arms, poll the library (rdmamsg_ctx_progress) for up to
 * spin_ns: an answer that comes meanwhile is delivered without the
 * loop's trip through epoll and the peer's wake-up of this process, and
 * the peer, finding this context not armed, wakes nobody.  A spin ends at
 * the first work for Python (a hit: the next one follows that work) or
 * at spin_ns (fruitless: arm and block as without busy polling).
 * Fruitless spins back off: after the k-th in a row (k <= 10) the next
 * 2^k - 1 chances to spin are skipped, so a peer that answers slowly or
 * not at all costs a spin per 1,024 messages, not one per message.
 * Python says (spin_ok) whether the loop has nothing else ready: if it
 * has, the pass does not spin (the loop's other work is not delayed). */
static uint64_t _rdmamsg_py_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void _rdmamsg_py_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Python worked (or sent): spin before the next arm, unless busy polling
 * is off or backing off; 1 when a spin is due */
static int _rdmamsg_py_want(struct _rdmamsg_py_batch *b)
{
	if (!b->spin_ns)
		return 0;
	if (!b->want_spin) {
		if (b->spin_skip) {
			b->spin_skip--;
			b->spin_skips++;
			return 0;
		}
		b->want_spin = 1;
	}
	return 1;
}

/* one progress call with b as the batch (Python delivered the last one):
 * 1 + the records to deliver, 1 for woken tasks only (their steps run
 * before the pass arms), 0 when Python has nothing to do */
static int _rdmamsg_py_progress(struct rdmamsg_ctx *ctx,
				struct _rdmamsg_py_batch *b)
{
	int rc;

	b->n = 0;
	b->used = 0;
	b->woke = 0;
	_rdmamsg_py_cur = b;
	rdmamsg_ctx_progress(ctx);
	_rdmamsg_py_cur = NULL;
	rc = b->n ? 1 + (int)b->n : b->woke != 0;
	if (rc)
		_rdmamsg_py_want(b);
	return rc;
}

/* poll until Python has work (its progress call's result) or spin_ns
 * passed (0, backing off) */
static int _rdmamsg_py_spin(struct rdmamsg_ctx *ctx,
			    struct _rdmamsg_py_batch *b)
{
	uint64_t end = _rdmamsg_py_now() + b->spin_ns;
	int rc;

	b->spins++;
	do {
		b->spin_polls++;
		rc = _rdmamsg_py_progress(ctx, b);
		if (rc) {
			b->spin_hits++;
			b->spin_fails = 0;
			return rc;
		}
		_rdmamsg_py_relax();
	} while (_rdmamsg_py_now() < end);
	b->want_spin = 0;
	if (b->spin_fails < 10)
		b->spin_fails++;
	b->spin_skip = (1u << b->spin_fails) - 1;
	return 0;
}

/* One pass of the arm/progress protocol: progress, then arm until blocking
 * on the fd is safe (-EBUSY: work came in, progress again), at most
 * rounds progress calls (then -EBUSY: a later pass goes on).  Returns > 0
 * after a progress call that left Python work (see above): Python does it
 * and calls again with rounds 0, which goes on with arm.  Progress comes
 * first although, after a wake-up from the fd, it polls the CQs without
 * draining the channel that woke us (arm() then says -EBUSY and a second
 * progress does that): the message is delivered, and a receiver's answer
 * sent, before that bookkeeping.  Busy polling (above) spins before the
 * arm; a spin counts as one of the rounds, and a pass out of rounds that
 * would spin returns -EBUSY without arming, so that the next pass spins
 * after the loop's other callbacks. */
static int _rdmamsg_py_pump(struct rdmamsg_ctx *ctx, unsigned int rounds,
			    struct _rdmamsg_py_batch *b, int spin_ok)
{
	unsigned int idle = 0;
	int rc;

	if (rounds) {
		b->rounds = rounds - 1;
		rc = _rdmamsg_py_progress(ctx, b);
		if (rc)
			return rc;
	}
	for (;;) {
		if (b->want_spin) {
			if (!spin_ok || !b->spin_ns) {
				b->want_spin = 0; /* the loop has work, or off */
			} else {
				if (!b->rounds)
					return -EBUSY;
				b->rounds--;
				rc = _rdmamsg_py_spin(ctx, b);
				if (rc)
					return rc;
			}
		}
		rc = rdmamsg_ctx_arm(ctx);
		if (rc != -EBUSY || !b->rounds)
			return rc;
		b->rounds--;
		rc = _rdmamsg_py_progress(ctx, b);
		if (rc)
			return rc;
		/* arm() busy and progress finding nothing, twice: the context
		 * polls before it blocks (a group subscriber's poll_us, each
		 * arm a sched_yield): the next pass comes after the loop's
		 * other callbacks, not 64 yields later */
		if (++idle == 2)
			return -EBUSY;
	}
}

/* after a call from outside a pass (a send, a close ...): 1 when a pass is
 * due -- to spin for the answer, or arm() says the library left work that
 * the fd would not announce -- 0 when the fd wakes the loop for what
 * comes */
static int _rdmamsg_py_sent(struct rdmamsg_ctx *ctx,
			    struct _rdmamsg_py_batch *b)
{
	if (_rdmamsg_py_want(b))
		return 1;
	return rdmamsg_ctx_arm(ctx) == -EBUSY;
}

/* rdmamsg_send, then (ctx not NULL: a call from outside a pass) whether a
 * pass is due (_rdmamsg_py_sent): < 0 the send's error, 1 a pass is due,
 * 0 the fd wakes the loop for what comes */
static int _rdmamsg_py_send(struct rdmamsg_ctx *ctx, struct rdmamsg_ep *ep,
			    const char *data, size_t len, uintptr_t opid,
			    struct _rdmamsg_py_batch *b)
{
	int rc = rdmamsg_send(ep, data, len, (void *)opid);

	if (rc < 0 || !ctx)
		return rc;
	return _rdmamsg_py_sent(ctx, b);
}

/* rdmamsg_request with the batching response callback and op id opid,
 * then (ctx not NULL: outside a pass) whether a pass is due, as
 * _rdmamsg_py_send */
static int _rdmamsg_py_request(struct rdmamsg_ctx *ctx, struct rdmamsg_ep *ep,
			       const char *data, size_t len, unsigned int ms,
			       uintptr_t opid, uint64_t *id,
			       struct _rdmamsg_py_batch *b)
{
	int rc = rdmamsg_request(ep, data, len, ms, _rdmamsg_py_on_response,
				 (void *)opid, id);

	if (rc < 0 || !ctx)
		return rc;
	return _rdmamsg_py_sent(ctx, b);
}

/* rdmamsg_respond to the request at address req (a batch record's) */
static int _rdmamsg_py_respond(uintptr_t req, const char *data, size_t len)
{
	return rdmamsg_respond((struct rdmamsg_req *)req, data, len);
}

/* on_send: only completions somebody waits for (op_ctx != 0) reach Python */
static void _rdmamsg_py_on_send(struct rdmamsg_ep *ep, int status,
				void *op_ctx, void *arg)
{
	struct _rdmamsg_py_rec *r;

	if (!op_ctx)
		return;
	r = _rdmamsg_py_rec(0);
	if (!r) {
		_py_on_send(ep, status, op_ctx, arg);
		return;
	}
	r->arg = (uint64_t)(uintptr_t)op_ctx;
	r->imm = 0;
	r->flags = (uint32_t)status;
	r->kind = _RDMAMSG_PY_SENT;
}

/* on_publish: only completions somebody waits for (op_ctx != 0) and
 * failures (counted) reach Python */
static void _rdmamsg_py_on_publish(struct rdmamsg_group *g, void *op_ctx,
				   int status, void *arg)
{
	if (op_ctx || status < 0)
		_py_on_publish(g, op_ctx, status, arg);
}

/* rdmamsg's log function while Python routes it to logging: a message of
 * any thread goes to Python (cffi takes the GIL for a thread that lacks
 * it; every call into the library releases the GIL, so a thread that
 * logs holding a library lock cannot deadlock with one waiting for that
 * lock).  Not once the interpreter is going away, and not re-entered by
 * the same thread (a handler that calls into the library, which logs
 * again): that message is dropped, never recursed into. */
static __thread int _rdmamsg_py_in_log;

static void _rdmamsg_py_log(int level, const char *func, const char *msg,
			    void *arg)
{
	(void)arg;
	if (_rdmamsg_py_in_log || !Py_IsInitialized())
		return;
	_rdmamsg_py_in_log = 1;
	_py_log(level, func ? func : "", msg ? msg : "");
	_rdmamsg_py_in_log = 0;
}

/* on: route to Python; off: no log function (at exit, before finalizing) */
static int _rdmamsg_py_log_route(int on)
{
	return rdmamsg_log_set_function(on ? _rdmamsg_py_log : NULL, NULL);
}
"""


def _setters():
    lines = []
    for name in EP_ATTR_UINT:
        lines.append("int rdmamsg_ep_attr_set_%s(struct rdmamsg_ep_attr *, "
                     "unsigned int);" % name)
    for name in EP_ATTR_SIZE:
        lines.append("int rdmamsg_ep_attr_set_%s(struct rdmamsg_ep_attr *, "
                     "size_t);" % name)
    return "\n".join(lines)


def _pkg_config():
    try:
        out = subprocess.run(["pkg-config", "--cflags-only-I", "--libs-only-L",
                              "rdmamsg"], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    inc = [a[2:] for a in shlex.split(out) if a.startswith("-I")]
    lib = [a[2:] for a in shlex.split(out) if a.startswith("-L")]
    return inc, lib


def _locate():
    inc = os.environ.get("RDMAMSG_INCLUDE_DIR")
    lib = os.environ.get("RDMAMSG_LIB_DIR")
    if inc or lib:
        return [inc] if inc else [], [lib] if lib else []
    found = _pkg_config()
    if found is not None:
        return found
    return ["/usr/local/include"], ["/usr/local/lib"]


def make_ffi():
    inc, lib = _locate()
    rpath = [p for p in os.environ.get("RDMAMSG_RPATH", "").split(":") if p]
    ffi = FFI()
    ffi.cdef(CDEF % {"ep_attr_setters": _setters()})
    ffi.set_source("rdmamsg._ffi", SOURCE,
                   include_dirs=inc, library_dirs=lib, libraries=["rdmamsg"],
                   runtime_library_dirs=rpath)
    return ffi


ffibuilder = make_ffi()

if __name__ == "__main__":
    outdir = sys.argv[1] if len(sys.argv) > 1 else "."
    ffibuilder.compile(tmpdir=outdir, verbose=False)
