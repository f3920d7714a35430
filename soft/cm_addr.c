/* SPDX-License-Identifier: MIT */
/* cm_addr.c -- softrdma's librdmacm: device, addresses, bind and resolution */
#include "config.h"
#include "softrdma.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "cm_internal.h"

/*
 * The one softrdma device, opened once per process and shared by every id
 * (as librdmacm shares its per-device contexts); the default PD lives while
 * ids hold it.
 */
static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	/* a forked child's copy of its parent's context: not ours to close,
	 * kept reachable (not leaked) until the child exits */
	struct ibv_context *inherited;
	int refcnt;
	uint8_t max_init, max_resp;
	/* the XRC domain of XRC ids given none (librdmacm's
	 * ucma_get_xrcd: one of no file per device), while ids hold it */
	struct ibv_xrcd *xrcd;
} scm_dev;

/* scm_dev_open_locked -- open softrdma0 on first use */
static int scm_dev_open_locked(void)
{
	struct ibv_device **list;
	struct ibv_device_attr attr;
	int n, i;

	if (scm_dev.ctx && to_sctx(scm_dev.ctx)->owner_pid != soft_self_pid) {
		/* forked after the parent opened it: the child opens a
		 * context of its own; the parent's ids are not usable here */
		scm_dev.inherited = scm_dev.ctx;
		scm_dev.ctx = NULL;
		scm_dev.pd = NULL;
		scm_dev.refcnt = 0;
	}
	if (scm_dev.ctx)
		return 0;
	list = ibv_get_device_list(&n);
	if (!list)
		return ENODEV;
	for (i = 0; i < n && !scm_dev.ctx; i++)
		scm_dev.ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!scm_dev.ctx)
		return ENODEV;
	scm_dev.max_init = scm_dev.max_resp = 16;
	if (!ibv_query_device(scm_dev.ctx, &attr)) {
		scm_dev.max_init = attr.max_qp_init_rd_atom > 255
					   ? 255
					   : (uint8_t)attr.max_qp_init_rd_atom;
		scm_dev.max_resp = attr.max_qp_rd_atom > 255
					   ? 255
					   : (uint8_t)attr.max_qp_rd_atom;
	}
	return 0;
}

/* scm_dev_mtu -- a port's active MTU now: with SOFTRDMA_NET=1 it
 * follows the port's interface (soft/port.c), so it is read at each
 * resolution, not once */
static enum ibv_mtu scm_dev_mtu(uint8_t port)
{
	struct ibv_port_attr pattr;

	memset(&pattr, 0, sizeof(pattr));
	if (!ibv_query_port(scm_dev.ctx, port, &pattr) && pattr.active_mtu &&
	    pattr.active_mtu < IBV_MTU_4096)
		return pattr.active_mtu;
	return IBV_MTU_4096;
}

/* scm__dev_max -- the device's RDMA read limits (librdmacm's cma_dev) */
int scm__dev_max(uint8_t *init_depth, uint8_t *resp_res)
{
	if (!scm_dev.ctx)
		return ENODEV;
	*init_depth = scm_dev.max_init;
	*resp_res = scm_dev.max_resp;
	return 0;
}

/* scm__addr_gid -- the RoCE GID of an IP address (IPv4-mapped for v4) */
void scm__addr_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12],
		       &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		       16);
	}
}

/* scm__addr_len -- length of an IP socket address, 0 if not one */
socklen_t scm__addr_len(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

/* scm__addr_is_any -- wildcard address? */
int scm__addr_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(
			&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

/*
 * scm__dev_attach -- give an id the device, the default PD, the port and
 * source GID (from route.addr.src_addr).
 */
int scm__dev_attach(struct scm_id *s)
{
	union ibv_gid sgid;
	uint32_t port;
	int err, idx;

	err = scm_dev_open_locked();
	if (err)
		return err;
	if (!s->dev_ref) {
		if (!scm_dev.refcnt && !scm_dev.pd) {
			scm_dev.pd = ibv_alloc_pd(scm_dev.ctx);
			if (!scm_dev.pd)
				return errno ? errno : ENOMEM;
		}
		scm_dev.refcnt++;
		s->dev_ref = 1;
	}
	s->id.verbs = scm_dev.ctx;
	if (!s->id.pd)
		s->id.pd = scm_dev.pd;
	scm__addr_gid(&s->id.route.addr.src_addr, &sgid);
	s->id.route.addr.addr.ibaddr.sgid = sgid;
	s->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
	/* the port of the address's interface (RoCE between hosts: the
	 * port its GID is on; IB mode: its rail's) and the GID's index
	 * there, as the kernel's cma_acquire_dev_by_src_ip finds the port
	 * holding the GID */
	idx = soft_gid_find(&sgid, &port);
	s->sgid_index = idx < 0 ? 0 : idx; /* IB mode: the same on both */
	s->id.port_num = soft_link_ib
				 ? soft_ib_sa_port(&s->id.route.addr.src_addr)
				 : (uint8_t)(idx < 0 ? 1 : port);
	s->mtu = scm_dev_mtu(s->id.port_num);
	return 0;
}

/* scm__dev_xrcd -- the device's XRC domain, opened on first use; NULL
 * with errno */
struct ibv_xrcd *scm__dev_xrcd(void)
{
	struct ibv_xrcd_init_attr a;
	struct ibv_xrcd *x;

	pthread_mutex_lock(&scm__lock);
	if (!scm_dev.xrcd && scm_dev.ctx) {
		memset(&a, 0, sizeof(a));
		a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
		a.fd = -1;
		a.oflags = O_CREAT;
		scm_dev.xrcd = ibv_open_xrcd(scm_dev.ctx, &a);
	}
	x = scm_dev.xrcd;
	if (!x && !errno)
		errno = ENODEV;
	pthread_mutex_unlock(&scm__lock);
	return x;
}

/* scm__dev_detach -- drop an id's hold on the device and default PD */
void scm__dev_detach(struct scm_id *s)
{
	if (!s->dev_ref)
		return;
	s->dev_ref = 0;
	if (scm_dev.refcnt == 1 && scm_dev.xrcd &&
	    !ibv_close_xrcd(scm_dev.xrcd))
		scm_dev.xrcd = NULL;
	if (!--scm_dev.refcnt && scm_dev.pd) {
		if (!ibv_dealloc_pd(scm_dev.pd))
			scm_dev.pd = NULL;
	}
}

/* scm__bind_socket -- the id's TCP socket, bound: it owns the port */
int scm__bind_socket(struct scm_id *s, const struct sockaddr *sa)
{
	socklen_t len = scm__addr_len(sa);
	int one = 1, fd, err;

	err = scm__port_check(s, sa, s->reuseaddr);
	if (err)
		return err;
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return errno;
	/*
	 * The RDMA port space has no TIME_WAIT: let a port be bound again
	 * while old connections linger.  Two listeners still conflict.
	 */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa->sa_family == AF_INET6 && s->afonly_set)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &s->afonly,
			   sizeof(s->afonly));
	if (bind(fd, sa, len)) {
		err = errno;
		close(fd);
		/* another process's id: the kernel refuses a wildcard with
		 * EADDRNOTAVAIL (cma_check_port) */
		if (err == EADDRINUSE && scm__addr_is_any(sa))
			err = EADDRNOTAVAIL;
		return err;
	}
	len = sizeof(s->id.route.addr.src_storage);
	getsockname(fd, &s->id.route.addr.src_addr, &len);
	s->fd = fd;
	s->bound = 1;
	return 0;
}

/*
 * scm__set_afonly -- RDMA_OPTION_ID_AFONLY, also on a bound id (the
 * kernel takes it until the id listens).  An IPv6 socket's IPV6_V6ONLY
 * is fixed at bind, so a bound one is replaced by a socket bound to the
 * same address and port with the new setting (neither listens: the
 * port may be held twice for that moment).
 */
int scm__set_afonly(struct scm_id *s, int afonly)
{
	const struct sockaddr *sa = &s->id.route.addr.src_addr;
	int one = 1, fd;

	if (s->fd >= 0 && sa->sa_family == AF_INET6 &&
	    (!s->afonly_set || s->afonly != afonly)) {
		fd = socket(AF_INET6,
			    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return errno;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &afonly,
			       sizeof(afonly)) ||
		    bind(fd, sa, sizeof(struct sockaddr_in6))) {
			int err = errno;

			close(fd);
			return err;
		}
		scm__close_fd(s);
		s->fd = fd;
	}
	s->afonly = afonly;
	s->afonly_set = 1;
	return 0;
}

SOFT_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr);
SOFT_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id,
				  struct sockaddr *src_addr,
				  struct sockaddr *dst_addr, int timeout_ms);
SOFT_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms);
SOFT_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				 const struct rdma_addrinfo *hints,
				 struct rdma_addrinfo **res);
SOFT_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res);
SOFT_EXPORT struct ibv_context **rdma_get_devices(int *num_devices);
SOFT_EXPORT void rdma_free_devices(struct ibv_context **list);

/* rdma_bind_addr -- claim a local address and port */
int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct scm_id *s = scm_id_of(id);
	int err;

	if (!id || !addr)
		return scm_err(EINVAL);
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return scm_err(EAFNOSUPPORT);
	pthread_mutex_lock(&scm__lock);
	if (s->state != SCM_IDLE) {
		err = EINVAL;
		goto unlock;
	}
	err = scm__bind_socket(s, addr);
	if (err)
		goto unlock;
	if (!scm__addr_is_any(addr)) {
		err = scm__dev_attach(s);
		if (err) {
			scm__close_fd(s);
			s->bound = 0;
			goto unlock;
		}
	}
	s->state = SCM_ADDR_BOUND;
unlock:
	pthread_mutex_unlock(&scm__lock);
	return err ? scm_err(err) : 0;
}

/* scm_set_port -- set the port of an IP socket address */
static void scm_set_port(struct sockaddr *sa, in_port_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = port;
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = port;
}

/* scm_get_port -- port of an IP socket address */
static in_port_t scm_get_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

/* scm_route_src -- the source address the host would use to reach dst
 * (from the address from, if given): the routing table's error if none */
static int scm_route_src(const struct sockaddr *dst,
			 const struct sockaddr *from,
			 struct sockaddr_storage *src)
{
	struct sockaddr_storage d, f;
	socklen_t len = scm__addr_len(dst);
	int fd, err = 0;

	memcpy(&d, dst, len);
	/* UDP connect() only consults the routing table; any port will do */
	if (d.ss_family == AF_INET)
		((struct sockaddr_in *)&d)->sin_port = htons(9);
	else
		((struct sockaddr_in6 *)&d)->sin6_port = htons(9);
	fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	if (from) { /* the route from that source (the kernel's saddr) */
		memcpy(&f, from, scm__addr_len(from));
		scm_set_port((struct sockaddr *)&f, 0);
		if (bind(fd, (struct sockaddr *)&f, scm__addr_len(from))) {
			err = errno;
			goto out;
		}
	}
	if (connect(fd, (struct sockaddr *)&d, len)) {
		err = errno;
		goto out;
	}
	len = sizeof(*src);
	if (getsockname(fd, (struct sockaddr *)src, &len))
		err = errno;
out:
	close(fd);
	return err;
}

/*
 * scm__path_mtu -- the path MTU towards another host, as rxe derives it
 * from its interface: the largest IB MTU that fits the IP MTU of the
 * route less the RoCE v2 headers (rxe's RXE_MAX_HDR_LENGTH, 80 bytes),
 * the formula of the port's active MTU, and never above the port's (the
 * port's interface and the route's differ on a second rail); the port's
 * own MTU for a destination on this host
 */
enum ibv_mtu scm__path_mtu(const struct sockaddr *dst, enum ibv_mtu dev_mtu)
{
	struct sockaddr_storage d;
	socklen_t len = scm__addr_len(dst), ol;
	union ibv_gid g;
	enum ibv_mtu m;
	int fd, mtu = 0;

	scm__addr_gid(dst, &g);
	if (soft_gid_local(&g))
		return dev_mtu;
	memcpy(&d, dst, len);
	if (d.ss_family == AF_INET)
		((struct sockaddr_in *)&d)->sin_port = htons(4791);
	else
		((struct sockaddr_in6 *)&d)->sin6_port = htons(4791);
	fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return dev_mtu;
	ol = sizeof(mtu);
	if (connect(fd, (struct sockaddr *)&d, len) ||
	    (d.ss_family == AF_INET
		     ? getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &ol)
		     : getsockopt(fd, IPPROTO_IPV6, IPV6_MTU, &mtu, &ol)))
		mtu = 0;
	close(fd);
	if (mtu <= 0)
		return dev_mtu;
	m = soft_port_mtu_of(mtu); /* as the port's (soft/port.c) */
	return m < dev_mtu ? m : dev_mtu;
}

/* scm_resolve_locked -- the body of rdma_resolve_addr */
static int scm_resolve_locked(struct scm_id *s, struct sockaddr *src,
			      struct sockaddr *dst)
{
	struct sockaddr_storage rsrc, any;
	in_port_t port;
	int err, wild;

	if (s->state == SCM_IDLE) {
		if (src) {
			err = scm__bind_socket(s, src);
			if (err)
				return err;
		} else {
			memset(&any, 0, sizeof(any));
			any.ss_family = dst->sa_family;
			err = scm__bind_socket(s, (struct sockaddr *)&any);
			if (err)
				return err;
		}
		s->state = SCM_ADDR_BOUND;
	} else if (s->state != SCM_ADDR_BOUND) {
		return EINVAL;
	}
	if (s->id.route.addr.src_addr.sa_family != dst->sa_family)
		return EINVAL;
	memcpy(&s->id.route.addr.dst_storage, dst, scm__addr_len(dst));
	/*
	 * No route (from the bound source, if any): the kernel's
	 * rdma_resolve_ip fails at once with what the routing table says
	 * (ENETUNREACH, EHOSTUNREACH...), and rdma_resolve_addr returns it
	 * with no event; the id stays bound, to be resolved again.
	 * ADDR_ERROR is for what fails later (the neighbour, the device).
	 */
	wild = scm__addr_is_any(&s->id.route.addr.src_addr);
	err = scm_route_src(dst, wild ? NULL : &s->id.route.addr.src_addr,
			    &rsrc);
	if (err)
		return err;
	if (wild) {
		port = scm_get_port(&s->id.route.addr.src_addr);
		memcpy(&s->id.route.addr.src_storage, &rsrc,
		       scm__addr_len((struct sockaddr *)&rsrc));
		scm_set_port(&s->id.route.addr.src_addr, port);
	}
	err = scm__dev_attach(s);
	if (err) {
		scm__post(s, s, RDMA_CM_EVENT_ADDR_ERROR, -err, NULL, 0, 0);
		return 0;
	}
	scm__addr_gid(dst, &s->id.route.addr.addr.ibaddr.dgid);
	s->mtu = (uint8_t)scm__path_mtu(dst, (enum ibv_mtu)s->mtu);
	s->state = SCM_ADDR_RESOLVED;
	scm__post(s, s, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0, 0);
	return 0;
}

/* rdma_resolve_addr -- pick the source, the device and the GIDs */
int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
		      struct sockaddr *dst_addr, int timeout_ms)
{
	struct scm_id *s = scm_id_of(id);
	int err, sync;

	(void)timeout_ms;
	if (!id || !scm__addr_len(dst_addr))
		return scm_err(EINVAL);
	if (src_addr && !scm__addr_len(src_addr))
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	err = scm_resolve_locked(s, src_addr, dst_addr);
	sync = s->sync; /* s may be gone once unlocked (async ids) */
	pthread_mutex_unlock(&scm__lock);
	if (err)
		return scm_err(err);
	return sync ? scm__complete(s) : 0;
}

/* scm__fill_path -- the one path record RoCE gives (librdmacm copies it) */
void scm__fill_path(struct scm_id *s)
{
	struct ibv_sa_path_rec *p = &s->path;

	memset(p, 0, sizeof(*p));
	p->dgid = s->id.route.addr.addr.ibaddr.dgid;
	p->sgid = s->id.route.addr.addr.ibaddr.sgid;
	p->hop_limit = 64;
	p->traffic_class = s->tos;
	p->reversible = 1;
	p->numb_path = 1;
	p->pkey = htons(0xffff);
	p->mtu_selector = 2;
	p->mtu = s->mtu;
	p->rate_selector = 2;
	p->rate = 3;
	p->packet_life_time_selector = 2;
	p->packet_life_time = 16;
	if (!s->id.route.path_rec)
		s->id.route.path_rec = malloc(sizeof(*p));
	if (s->id.route.path_rec) {
		*s->id.route.path_rec = *p;
		s->id.route.num_paths = 1;
	}
}

/* rdma_resolve_route -- RoCE routes come with the address */
int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct scm_id *s = scm_id_of(id);
	int err = 0, sync;

	(void)timeout_ms;
	if (!id)
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	if (s->state != SCM_ADDR_RESOLVED) {
		err = EINVAL;
	} else {
		s->state = SCM_ROUTE_RESOLVED;
		scm__fill_path(s);
		scm__post(s, s, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0, 0);
	}
	sync = s->sync; /* s may be gone once unlocked (async ids) */
	pthread_mutex_unlock(&scm__lock);
	if (err)
		return scm_err(err);
	return sync ? scm__complete(s) : 0;
}

/* scm_copy_addr -- duplicate a socket address */
static int scm_copy_addr(struct sockaddr **dst, socklen_t *dst_len,
			 const struct sockaddr *src, socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return ENOMEM;
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

/* scm_to_ai -- librdmacm's hints translation to getaddrinfo's */
static void scm_to_ai(struct addrinfo *ai, const struct rdma_addrinfo *rai)
{
	memset(ai, 0, sizeof(*ai));
	if (rai->ai_flags & RAI_PASSIVE)
		ai->ai_flags = AI_PASSIVE;
	if (rai->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	ai->ai_family = rai->ai_family;
	switch (rai->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ai->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ai->ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (rai->ai_port_space) {
	case RDMA_PS_TCP:
		ai->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_IPOIB:
	case RDMA_PS_UDP:
		ai->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		if (ai->ai_socktype == SOCK_STREAM)
			ai->ai_protocol = IPPROTO_TCP;
		else if (ai->ai_socktype == SOCK_DGRAM)
			ai->ai_protocol = IPPROTO_UDP;
		break;
	default:
		break;
	}
}

/* scm_to_rai -- fill rai from getaddrinfo's first answer */
static int scm_to_rai(struct rdma_addrinfo *rai,
		      const struct rdma_addrinfo *hints,
		      const struct addrinfo *ai)
{
	if (hints->ai_qp_type)
		rai->ai_qp_type = hints->ai_qp_type;
	else if (ai->ai_socktype == SOCK_STREAM)
		rai->ai_qp_type = IBV_QPT_RC;
	else if (ai->ai_socktype == SOCK_DGRAM)
		rai->ai_qp_type = IBV_QPT_UD;
	if (hints->ai_port_space)
		rai->ai_port_space = hints->ai_port_space;
	else if (ai->ai_protocol == IPPROTO_TCP)
		rai->ai_port_space = RDMA_PS_TCP;
	else if (ai->ai_protocol == IPPROTO_UDP)
		rai->ai_port_space = RDMA_PS_UDP;
	rai->ai_family = ai->ai_family;
	if (hints->ai_flags & RAI_PASSIVE) {
		rai->ai_flags = RAI_PASSIVE;
		if (ai->ai_canonname)
			rai->ai_src_canonname = strdup(ai->ai_canonname);
		return scm_copy_addr(&rai->ai_src_addr, &rai->ai_src_len,
				     ai->ai_addr, ai->ai_addrlen);
	}
	if (ai->ai_canonname)
		rai->ai_dst_canonname = strdup(ai->ai_canonname);
	return scm_copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr,
			     ai->ai_addrlen);
}

/*
 * rdma_getaddrinfo -- getaddrinfo(3) for RDMA.  As librdmacm's (its
 * ucma_getaddrinfo returns getaddrinfo's result as it is), a resolver
 * failure returns the EAI_* code itself, for gai_strerror (rdma_client
 * and rdma_server print it so); other failures return -1 with errno.
 */
int rdma_getaddrinfo(const char *node, const char *service,
		     const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo nohints;
	struct rdma_addrinfo *rai;
	struct addrinfo aih, *ai;
	int ret = 0;

	if ((!service && !node && !hints) || !res)
		return scm_err(EINVAL);
	rai = calloc(1, sizeof(*rai));
	if (!rai)
		return scm_err(ENOMEM);
	if (!hints)
		hints = &nohints;
	if (node || service) {
		if (hints != &nohints) {
			scm_to_ai(&aih, hints);
			ret = getaddrinfo(node, service, &aih, &ai);
		} else {
			ret = getaddrinfo(node, service, NULL, &ai);
		}
		if (ret) {
			rdma_freeaddrinfo(rai);
			return ret;
		}
		ret = scm_to_rai(rai, hints, ai);
		freeaddrinfo(ai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = scm_copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len,
					    hints->ai_dst_addr,
					    hints->ai_dst_len);
	}
	if (!ret && !rai->ai_src_len && hints->ai_src_len)
		ret = scm_copy_addr(&rai->ai_src_addr, &rai->ai_src_len,
				    hints->ai_src_addr, hints->ai_src_len);
	if (ret) {
		rdma_freeaddrinfo(rai);
		return scm_err(ret);
	}
	*res = rai;
	return 0;
}

/* rdma_freeaddrinfo -- free a list from rdma_getaddrinfo */
void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	struct rdma_addrinfo *rai;

	while (res) {
		rai = res;
		res = res->ai_next;
		free(rai->ai_connect);
		free(rai->ai_route);
		free(rai->ai_src_canonname);
		free(rai->ai_dst_canonname);
		free(rai->ai_src_addr);
		free(rai->ai_dst_addr);
		free(rai);
	}
}

/* rdma_get_devices -- the opened device contexts, NULL terminated */
struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;
	int n;

	pthread_mutex_lock(&scm__lock);
	n = scm_dev_open_locked() ? 0 : 1;
	list = calloc(n + 1, sizeof(*list));
	if (list && n)
		list[0] = scm_dev.ctx;
	pthread_mutex_unlock(&scm__lock);
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	if (num_devices)
		*num_devices = n;
	return list;
}

/* rdma_free_devices -- free rdma_get_devices' array (contexts stay open) */
void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
