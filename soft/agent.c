/* SPDX-License-Identifier: MIT */
/*
 * agent.c -- the host's RoCE v2 agent: UDP port 4791, and who gets what
 * comes to it (agent.h).
 *
 * The agent is started on demand by the first process that needs the
 * network path (fork, setsid, fork), found through the abstract unix
 * socket "softrdma-roce-<uid>" (abstract names are per network namespace,
 * i.e. per host), and exits a second after its last client.
 *
 * Steering, so that a packet goes from the wire to the process that owns
 * its QP with no hop through the agent (as an HCA puts it into the QP's
 * memory by itself).  The agent binds UDP 4791 first and alone, then
 * allows SO_REUSEPORT: its socket is index 0 of the port's reuseport
 * group (and a group left by a previous agent's processes makes the bind
 * fail instead of giving us another index).  It makes the group at once,
 * with a first socket for processes and a program that returns 0, so
 * that the kernel never spreads the port's packets by hash; where the
 * kernel refuses the program, no process gets a socket (ag_group).  For
 * each process that asks (AG_SOCK) it gives a free socket of the group,
 * or binds one more to the port, which joins the group at the next index,
 * keeps it and passes a copy to the process.  It closes
 * none while it runs, so the indices never move; a socket whose process
 * went is drained and given to the next that asks.  Whenever the
 * registrations change, it attaches to the group a classic BPF program
 * (SO_ATTACH_REUSEPORT_CBPF, no privilege needed): a binary search on the
 * BTH's DestQP returning the index of the socket of the process that
 * registered that QPN, 0 for any other.  So the kernel delivers to the
 * owner's socket; the agent still gets what it cannot steer (a QPN
 * registered a moment ago, a process with no socket of its own, more QPNs
 * than the program holds) and multicast (the processes' sockets have
 * IP_MULTICAST_ALL off), checks it and hands it over.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "roce.h"
#include "softrdma.h"

#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif
#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

#define AG_MAX_CLIENTS 256
#define AG_MAX_QPS     8192
#define AG_MAX_SLOTS   64   /* sockets per family given to processes */
#define AG_STEER_MAX   1024 /* QPNs the kernel steers; the rest: the agent */
#define AG_MAX_MC      4096
#define AG_BATCH       16

struct ag_qp {
	uint32_t qpn;
	int fd;
};

/* a socket on the port given to a process: reuseport index k + 1 */
struct ag_slot {
	int fd;
	int owner; /* the process's connection, -1: free */
};

/* a process that is a member of a multicast group */
struct ag_mc {
	int fd;
	int family;
	uint8_t addr[16];
};

static struct ag_qp ag_qps[AG_MAX_QPS];
static int ag_nqps;
static struct ag_mc ag_mcs[AG_MAX_MC];
static int ag_nmc;
static int ag_u[2] = {-1, -1}; /* ours, index 0: IPv4, IPv6 */
static struct ag_slot ag_slots[2][AG_MAX_SLOTS];
static int ag_nslots[2];
static int ag_steer_dirty;

static int fam_idx(int family)
{
	return family == AF_INET ? 0 : 1;
}

static void ag_name(struct sockaddr_un *a, socklen_t *len)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "softrdma-roce-%u", (unsigned int)getuid());
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

void soft_big_buffers(int fd)
{
	int sz = 16 << 20;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
}

/*
 * ag_udp -- a socket on UDP 4791 of FAMILY: the agent's own (SLOT 0:
 * bound alone, then open to the group) or one for a process (SO_REUSEPORT
 * before the bind: it joins the group; no multicast of groups it did not
 * join itself, i.e. none)
 */
static int ag_udp(int family, int slot)
{
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0), one = 1;
	int off = 0;
	struct sockaddr_storage ss;
	socklen_t sl;

	if (fd < 0)
		return -1;
	soft_big_buffers(fd);
	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(ROCE_UDP_PORT);
		sl = sizeof(*a);
		(void)setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
		/* the GRH of a UD receive shows TTL and TOS as they came */
		(void)setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &one, sizeof(one));
		(void)setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
		if (slot)
			(void)setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &off,
					 sizeof(off));
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(ROCE_UDP_PORT);
		sl = sizeof(*a);
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
				 sizeof(one));
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one,
				 sizeof(one));
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &one,
				 sizeof(one));
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one,
				 sizeof(one));
		/* and its flow label (the kernel gives a non-zero one) */
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_FLOWINFO, &one,
				 sizeof(one));
		if (slot)
			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL,
					 &off, sizeof(off));
	}
	if (slot && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		goto fail;
	if (bind(fd, (struct sockaddr *)&ss, sl))
		goto fail;
	if (!slot) {
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one,
				 sizeof(one));
		soft_ag_gro(fd);
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/*
 * Multicast in the agent (as rxe_mcast.c/rxe_recv.c): a process that
 * attached a QP to a group is a member of the group's address here; the
 * host joins the IP group (IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP, on every
 * multicast-capable interface that is up, loopback aside) when its first
 * process joins, and leaves it with the last.  A packet to the group is
 * handed to every member process, which gives each of its attached QPs a
 * copy (rxe_rcv_mcast_pkt).  Senders do not loop their packets back
 * (IP_MULTICAST_LOOP 0): the QPs of the sending host have theirs through
 * shared memory.
 */

/* ag_mc_ip -- the host joins (JOIN 1) or leaves the IP group on each of
 * its multicast interfaces */
static void ag_mc_ip(int family, const uint8_t *addr, int join)
{
	int u = ag_u[fam_idx(family)];
	struct ifaddrs *ifa, *i;
	unsigned int done[64], ndone = 0, k, idx;

	if (u < 0 || getifaddrs(&ifa))
		return;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != family ||
		    !(i->ifa_flags & IFF_UP) ||
		    !(i->ifa_flags & IFF_MULTICAST) ||
		    (i->ifa_flags & IFF_LOOPBACK))
			continue;
		idx = if_nametoindex(i->ifa_name);
		for (k = 0; k < ndone && done[k] != idx; k++)
			;
		if (!idx || k < ndone || ndone == 64)
			continue;
		done[ndone++] = idx;
		if (family == AF_INET) {
			struct ip_mreqn mr;

			memset(&mr, 0, sizeof(mr));
			memcpy(&mr.imr_multiaddr, addr, 4);
			mr.imr_ifindex = (int)idx;
			(void)setsockopt(u, IPPROTO_IP,
					 join ? IP_ADD_MEMBERSHIP
					      : IP_DROP_MEMBERSHIP,
					 &mr, sizeof(mr));
		} else {
			struct ipv6_mreq mr;

			memset(&mr, 0, sizeof(mr));
			memcpy(&mr.ipv6mr_multiaddr, addr, 16);
			mr.ipv6mr_interface = idx;
			(void)setsockopt(u, IPPROTO_IPV6,
					 join ? IPV6_JOIN_GROUP
					      : IPV6_LEAVE_GROUP,
					 &mr, sizeof(mr));
		}
	}
	freeifaddrs(ifa);
}

/* ag_mc_members -- processes of this host in the group */
static int ag_mc_members(int family, const uint8_t *addr)
{
	int i, n = 0;

	for (i = 0; i < ag_nmc; i++)
		n += ag_mcs[i].family == family &&
		     !memcmp(ag_mcs[i].addr, addr, 16);
	return n;
}

/* ag_mc_leave -- FD leaves the group (ADDR NULL: every group) */
static void ag_mc_leave(int fd, int family, const uint8_t *addr)
{
	struct ag_mc m;
	int i;

	for (i = 0; i < ag_nmc;) {
		if (ag_mcs[i].fd != fd ||
		    (addr && (ag_mcs[i].family != family ||
			      memcmp(ag_mcs[i].addr, addr, 16)))) {
			i++;
			continue;
		}
		m = ag_mcs[i];
		ag_mcs[i] = ag_mcs[--ag_nmc];
		if (!ag_mc_members(m.family, m.addr))
			ag_mc_ip(m.family, m.addr, 0);
	}
}

/* ag_mc_join -- FD joins a group (a checked message) */
static void ag_mc_join(int fd, int family, const uint8_t *addr)
{
	int i;

	if (!soft_addr_is_mcast(family, addr))
		return;
	for (i = 0; i < ag_nmc; i++)
		if (ag_mcs[i].fd == fd && ag_mcs[i].family == family &&
		    !memcmp(ag_mcs[i].addr, addr, 16))
			return;
	if (ag_nmc == AG_MAX_MC)
		return;
	if (!ag_mc_members(family, addr))
		ag_mc_ip(family, addr, 1);
	ag_mcs[ag_nmc].fd = fd;
	ag_mcs[ag_nmc].family = family;
	memcpy(ag_mcs[ag_nmc].addr, addr, 16);
	ag_nmc++;
}

/* ag_fwd_to -- hand a packet (with what the agent knows of it) over */
static void ag_fwd_to(int fd, const struct ag_fwd *fw, const uint8_t *pkt,
		      size_t len)
{
	struct iovec out[2];
	struct msghdr om;

	out[0].iov_base = (void *)(uintptr_t)fw;
	out[0].iov_len = sizeof(*fw);
	out[1].iov_base = (void *)(uintptr_t)pkt;
	out[1].iov_len = len;
	memset(&om, 0, sizeof(om));
	om.msg_iov = out;
	om.msg_iovlen = 2;
	(void)!sendmsg(fd, &om, MSG_DONTWAIT | MSG_NOSIGNAL);
}

int soft_gso_enabled(void)
{
	static _Atomic int on = -1; /* as soft_env_flag's cache */
	int v = atomic_load_explicit(&on, memory_order_relaxed);

	if (v < 0) {
		const char *e = getenv("SOFTRDMA_NET_GSO");

		v = !e || strcmp(e, "0");
		atomic_store_explicit(&on, v, memory_order_relaxed);
	}
	return v;
}

void soft_ag_gro(int fd)
{
	int on = soft_gso_enabled();

	/* refused (ENOPROTOOPT before Linux 5.0): the kernel cuts a GSO
	 * datagram for us, which soft_ag_datagram takes as well */
	(void)setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof(on));
}

int soft_ag_datagram(int family, uint8_t *pkt, size_t n, const struct msghdr *m,
		     ag_seg_fn *fn, void *arg)
{
	size_t hl = roce_ip_udp_len(family), gso = 0, off, len;
	const struct sockaddr_storage *from = m->msg_name;
	struct cmsghdr *c;
	struct roce_ip ip;
	struct ag_fwd fw;
	int have_dst = 0, got = 0;
	unsigned int k;

	if (n < ROCE_BTH_LEN + ROCE_ICRC_LEN || (m->msg_flags & MSG_TRUNC) ||
	    !hl || hl > AG_HEAD)
		return 0;
	memset(&ip, 0, sizeof(ip));
	memset(&fw, 0, sizeof(fw));
	fw.hop_limit = 64; /* a kernel that gives no TTL: the default */
	ip.family = family;
	ip.dport = ROCE_UDP_PORT;
	for (c = CMSG_FIRSTHDR((struct msghdr *)(uintptr_t)m); c;
	     c = CMSG_NXTHDR((struct msghdr *)(uintptr_t)m, c)) {
		if (family == AF_INET && c->cmsg_level == IPPROTO_IP &&
		    c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(ip.dst, &pi.ipi_addr, 4);
			have_dst = 1;
		} else if (family == AF_INET6 &&
			   c->cmsg_level == IPPROTO_IPV6 &&
			   c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(ip.dst, &pi.ipi6_addr, 16);
			have_dst = 1;
		} else if (c->cmsg_level == IPPROTO_IP &&
			   c->cmsg_type == IP_TTL &&
			   c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			fw.hop_limit = (uint8_t)v;
		} else if (c->cmsg_level == IPPROTO_IP &&
			   c->cmsg_type == IP_TOS &&
			   c->cmsg_len >= CMSG_LEN(1)) {
			fw.tclass = *(const uint8_t *)CMSG_DATA(c);
		} else if (c->cmsg_level == IPPROTO_IPV6 &&
			   (c->cmsg_type == IPV6_HOPLIMIT ||
			    c->cmsg_type == IPV6_TCLASS) &&
			   c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			if (c->cmsg_type == IPV6_HOPLIMIT)
				fw.hop_limit = (uint8_t)v;
			else
				fw.tclass = (uint8_t)v;
		} else if (c->cmsg_level == IPPROTO_IPV6 &&
			   c->cmsg_type == IPV6_FLOWINFO &&
			   c->cmsg_len >= CMSG_LEN(sizeof(uint32_t))) {
			uint32_t v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			fw.flow_label = ntohl(v) & 0xfffff;
		} else if (c->cmsg_level == IPPROTO_UDP &&
			   c->cmsg_type == UDP_GRO) {
			int g;

			memcpy(&g, CMSG_DATA(c), sizeof(g));
			gso = g > 0 ? (size_t)g : 0;
		}
	}
	if (!have_dst || !from)
		return 0;
	if (family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)from;

		memcpy(ip.src, &s->sin_addr, 4);
		ip.sport = ntohs(s->sin_port);
	} else {
		const struct sockaddr_in6 *s =
			(const struct sockaddr_in6 *)from;

		memcpy(ip.src, &s->sin6_addr, 16);
		ip.sport = ntohs(s->sin6_port);
	}
	fw.family = (uint8_t)family;
	fw.sport = ip.sport;
	memcpy(fw.src, ip.src, 16);
	memcpy(fw.dst, ip.dst, 16);
	/* a datagram taken whole (UDP_GRO) is segments of GSO bytes, the
	 * last maybe shorter, each a packet of its own as on the wire */
	if (!gso || gso > n)
		gso = n;
	for (k = 0, off = 0; off < n; k++, off += len) {
		uint8_t *p = pkt + off;

		len = n - off < gso ? n - off : gso;
		/* the headers the ICRC covers, just before the segment
		 * (over the tail of the one before, done with); a bad ICRC
		 * is dropped, as an HCA drops it */
		if (len < ROCE_BTH_LEN + ROCE_ICRC_LEN ||
		    roce_ip_udp_hdr(&ip, p - hl, hl + len, len) !=
			    (ssize_t)hl ||
		    roce_icrc_check_seg(p - hl, hl + len, k))
			continue;
		fn(arg, p, len, &fw);
		got++;
	}
	return got;
}

void soft_ag_recv_init(struct mmsghdr *mm, struct ag_rxbuf *rb, uint8_t *buf,
		       size_t size, unsigned int count)
{
	unsigned int j;

	for (j = 0; j < count; j++) {
		rb[j].iov.iov_base = buf + (size_t)j * size + AG_HEAD;
		rb[j].iov.iov_len = size - AG_HEAD;
		memset(&mm[j], 0, sizeof(mm[j]));
		mm[j].msg_hdr.msg_name = &rb[j].from;
		mm[j].msg_hdr.msg_iov = &rb[j].iov;
		mm[j].msg_hdr.msg_iovlen = 1;
		mm[j].msg_hdr.msg_control = rb[j].ctl;
	}
	soft_ag_recv_reset(mm, count);
}

void soft_ag_recv_reset(struct mmsghdr *mm, unsigned int count)
{
	unsigned int j;

	for (j = 0; j < count; j++) {
		mm[j].msg_hdr.msg_namelen =
			mm[j].msg_hdr.msg_name ? sizeof(struct sockaddr_storage)
					       : 0;
		mm[j].msg_hdr.msg_controllen =
			mm[j].msg_hdr.msg_control ? AG_CTL_LEN : 0;
	}
}

/* ag_rx_one -- a packet that came to the agent, checked: handed to the
 * process of its QPN, or to every member of its group */
static void ag_rx_one(void *arg, uint8_t *pkt, size_t n,
		      const struct ag_fwd *fw)
{
	uint32_t qpn;
	int i;

	(void)arg;
	qpn = (uint32_t)pkt[5] << 16 | (uint32_t)pkt[6] << 8 | pkt[7];
	if (soft_addr_is_mcast(fw->family, fw->dst)) {
		/* to a group: QPN 0xFFFFFF only, once to each member */
		if (qpn != ROCE_QPN_MASK)
			return;
		for (i = 0; i < ag_nmc; i++)
			if (ag_mcs[i].family == fw->family &&
			    !memcmp(ag_mcs[i].addr, fw->dst, 16))
				ag_fwd_to(ag_mcs[i].fd, fw, pkt, n);
		return;
	}
	for (i = 0; i < ag_nqps; i++)
		if (ag_qps[i].qpn == qpn) {
			ag_fwd_to(ag_qps[i].fd, fw, pkt, n);
			return;
		}
}

/* ag_rx -- up to AG_BATCH datagrams from our socket of FAMILY by one
 * recvmmsg; how many came (the agent is one thread: static buffers) */
static int ag_rx(int family)
{
	static uint8_t buf[AG_BATCH][AG_HEAD + AG_DGRAM_MAX];
	static struct ag_rxbuf rb[AG_BATCH];
	static struct mmsghdr mm[AG_BATCH];
	static int ready;
	int j, r;

	if (!ready) {
		soft_ag_recv_init(mm, rb, &buf[0][0], sizeof(buf[0]), AG_BATCH);
		ready = 1;
	}
	r = recvmmsg(ag_u[fam_idx(family)], mm, AG_BATCH, MSG_DONTWAIT, NULL);
	for (j = 0; j < r; j++)
		(void)soft_ag_datagram(family, buf[j] + AG_HEAD, mm[j].msg_len,
				       &mm[j].msg_hdr, ag_rx_one, NULL);
	if (r > 0) /* what recvmmsg changed, for the next call */
		soft_ag_recv_reset(mm, (unsigned int)r);
	return r;
}

/*
 * Steering: the program attached to the group of FAMILY's port.  The
 * packet's bytes start at the UDP payload (the BTH); DestQP is the low 24
 * bits of the word at offset 4.  Leaves of up to four QPNs compare each;
 * inner nodes jump on >= to the upper half (by a long jump: cBPF's
 * conditional offsets are 8 bits).  A packet too short for the load ends
 * the program with 0: the agent.
 */
struct ag_route {
	uint32_t qpn;
	uint32_t idx;
};

static int route_cmp(const void *a, const void *b)
{
	const struct ag_route *x = a, *y = b;

	return x->qpn < y->qpn ? -1 : x->qpn > y->qpn;
}

/* steer_emit -- the search over R[lo, hi) at F[n]; the next free index */
static int steer_emit(struct sock_filter *f, int n, const struct ag_route *r,
		      int lo, int hi)
{
	int i, mid, ja;

	if (hi - lo <= 4) {
		for (i = lo; i < hi; i++) {
			f[n++] = (struct sock_filter)BPF_JUMP(
				BPF_JMP | BPF_JEQ | BPF_K, r[i].qpn, 0, 1);
			f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
							      r[i].idx);
		}
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
		return n;
	}
	mid = lo + (hi - lo) / 2;
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K,
					      r[mid].qpn, 0, 1);
	ja = n++;
	n = steer_emit(f, n, r, lo, mid);
	f[ja] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA,
					     (uint32_t)(n - ja - 1));
	return steer_emit(f, n, r, mid, hi);
}

/* ag_steer -- the program for the registrations of now, attached to the
 * group of family index FI; 0, or -1 when the kernel refused it */
static int ag_steer(int fi)
{
	static struct ag_route r[AG_STEER_MAX];
	static struct sock_filter f[BPF_MAXINSNS];
	struct sock_fprog prog;
	int n = 0, i, k;

	if (ag_u[fi] < 0 || !ag_nslots[fi])
		return -1;
	for (i = 0; i < ag_nqps && n < AG_STEER_MAX; i++) {
		for (k = 0; k < ag_nslots[fi]; k++)
			if (ag_slots[fi][k].owner == ag_qps[i].fd)
				break;
		if (k == ag_nslots[fi])
			continue; /* its process has no socket here */
		r[n].qpn = ag_qps[i].qpn & ROCE_QPN_MASK;
		r[n].idx = (uint32_t)k + 1;
		n++;
	}
	qsort(r, (size_t)n, sizeof(r[0]), route_cmp);
	memset(&prog, 0, sizeof(prog)); /* its padding goes to the kernel */
	f[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4);
	f[1] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K,
					    ROCE_QPN_MASK);
	prog.len = (unsigned short)steer_emit(f, 2, r, 0, n);
	prog.filter = f;
	return setsockopt(ag_u[fi], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
			  sizeof(prog));
}

/*
 * ag_group -- our socket of family index FI made a reuseport group with a
 * first socket for processes, and a program that steers everything to us
 * until a process has its socket: so the kernel never spreads the port's
 * packets by hash.  Where it cannot be done (a kernel without
 * SO_ATTACH_REUSEPORT_CBPF) no process gets a socket: we hand all over.
 */
static void ag_group(int fi)
{
	if (ag_u[fi] < 0)
		return;
	ag_slots[fi][0].fd = ag_udp(fi ? AF_INET6 : AF_INET, 1);
	ag_slots[fi][0].owner = -1;
	if (ag_slots[fi][0].fd < 0)
		return;
	ag_nslots[fi] = 1;
	if (!ag_steer(fi))
		return;
	close(ag_slots[fi][0].fd);
	ag_nslots[fi] = 0;
}

/* ag_drain -- what waits on a socket no process reads is thrown away */
static void ag_drain(int fd)
{
	char c;

	while (recv(fd, &c, 1, MSG_DONTWAIT | MSG_TRUNC) >= 0)
		;
}

/* ag_give_socket -- AG_SOCK from the process on CFD: a socket of ours on
 * the port for FAMILY (a free one, or a new one of the group), or none */
static void ag_give_socket(int cfd, uint32_t family)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	struct ag_sock r = {AG_SOCK, family, 0, 0};
	struct iovec iov = {&r, sizeof(r)};
	struct ag_slot *s = NULL;
	struct cmsghdr *c;
	struct msghdr m;
	int fi, k;

	memset(&m, 0, sizeof(m));
	memset(&u, 0, sizeof(u)); /* the padding after the descriptor too */
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	if (family != AF_INET && family != AF_INET6)
		goto reply;
	fi = fam_idx((int)family);
	if (!ag_nslots[fi])
		goto reply; /* no group: we hand over what comes */
	for (k = 0; k < ag_nslots[fi]; k++)
		if (ag_slots[fi][k].owner == cfd)
			goto reply; /* one each */
	for (k = 0; k < ag_nslots[fi]; k++)
		if (ag_slots[fi][k].owner < 0)
			break;
	if (k == ag_nslots[fi]) {
		if (k == AG_MAX_SLOTS)
			goto reply;
		ag_slots[fi][k].fd = ag_udp((int)family, 1);
		if (ag_slots[fi][k].fd < 0)
			goto reply;
		ag_nslots[fi]++;
	}
	s = &ag_slots[fi][k];
	ag_drain(s->fd);
	s->owner = cfd;
	ag_steer_dirty = 1;
	r.slot = (uint32_t)k + 1;
	m.msg_control = u.b;
	m.msg_controllen = sizeof(u.b);
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &s->fd, sizeof(int));
reply:
	if (sendmsg(cfd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && s)
		s->owner = -1; /* it never got it */
}

/* ag_drop_client -- the process on FD went: its groups, QPNs, sockets */
static void ag_drop_client(int fd)
{
	int i, fi;

	ag_mc_leave(fd, 0, NULL);
	for (i = 0; i < ag_nqps;) {
		if (ag_qps[i].fd == fd)
			ag_qps[i] = ag_qps[--ag_nqps];
		else
			i++;
	}
	for (fi = 0; fi < 2; fi++)
		for (i = 0; i < ag_nslots[fi]; i++)
			if (ag_slots[fi][i].owner == fd) {
				ag_slots[fi][i].owner = -1;
				ag_drain(ag_slots[fi][i].fd);
			}
	ag_steer_dirty = 1;
	close(fd);
}

/* ag_client -- what the process on FD said; -1: it went */
static int ag_client(int fd)
{
	union {
		struct ag_msg m;
		struct ag_mmsg mm;
	} u;
	ssize_t r;
	int j;

	for (;;) {
		r = recv(fd, &u, sizeof(u), MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (r <= 0) {
			ag_drop_client(fd);
			return -1;
		}
		if (r == (ssize_t)sizeof(u.mm) &&
		    (u.mm.op == AG_MJOIN || u.mm.op == AG_MLEAVE) &&
		    (u.mm.family == AF_INET || u.mm.family == AF_INET6)) {
			uint8_t ga[16] = {0};

			memcpy(ga, u.mm.addr, u.mm.family == AF_INET ? 4 : 16);
			if (u.mm.op == AG_MJOIN)
				ag_mc_join(fd, (int)u.mm.family, ga);
			else
				ag_mc_leave(fd, (int)u.mm.family, ga);
		} else if (r == (ssize_t)sizeof(u.m) && u.m.op == AG_REG) {
			for (j = 0; j < ag_nqps; j++)
				if (ag_qps[j].qpn == u.m.qpn)
					break;
			if (j == ag_nqps && ag_nqps < AG_MAX_QPS)
				ag_nqps++;
			if (j < AG_MAX_QPS) {
				ag_qps[j].qpn = u.m.qpn;
				ag_qps[j].fd = fd;
				ag_steer_dirty = 1;
			}
		} else if (r == (ssize_t)sizeof(u.m) && u.m.op == AG_UNREG) {
			for (j = 0; j < ag_nqps; j++)
				if (ag_qps[j].qpn == u.m.qpn &&
				    ag_qps[j].fd == fd) {
					ag_qps[j] = ag_qps[--ag_nqps];
					ag_steer_dirty = 1;
				}
		} else if (r == (ssize_t)sizeof(u.m) && u.m.op == AG_SOCK) {
			ag_give_socket(fd, u.m.qpn);
		}
	}
}

/*
 * soft_net_agent_main -- the agent's loop; returns when it had no client
 * for a second (or could not start: another agent, port taken)
 */
int soft_net_agent_main(void)
{
	static struct pollfd pf[3 + AG_MAX_CLIENTS];
	struct sockaddr_un a;
	socklen_t alen;
	int lfd, ncl = 0, i, fi, udp;
	uint64_t idle_since;

	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return 1;
	ag_name(&a, &alen);
	if (bind(lfd, (struct sockaddr *)&a, alen) || listen(lfd, 64)) {
		close(lfd);
		return 1; /* one agent per host */
	}
	ag_u[0] = ag_udp(AF_INET, 0);
	ag_u[1] = ag_udp(AF_INET6, 0);
	if (ag_u[0] < 0 && ag_u[1] < 0) {
		close(lfd);
		return 1;
	}
	/* SOFTRDMA_NET_NOSTEER=1 (tests, comparisons): everything through
	 * us, as before there was steering */
	if (!getenv("SOFTRDMA_NET_NOSTEER"))
		for (fi = 0; fi < 2; fi++)
			ag_group(fi);
	idle_since = soft_now_ns();
	for (;;) {
		int n;

		pf[0].fd = lfd;
		pf[0].events = POLLIN;
		pf[1].fd = ag_u[0];
		pf[1].events = POLLIN;
		pf[2].fd = ag_u[1];
		pf[2].events = POLLIN;
		n = poll(pf, (nfds_t)(3 + ncl), 200);
		if (n < 0 && errno != EINTR)
			break;
		/* idle: only when nothing is pending (a client queued on
		 * lfd is accepted first) */
		if (!ncl && !(n > 0 && (pf[0].revents & POLLIN)) &&
		    soft_now_ns() - idle_since > 1000000000ull)
			break;
		if (n <= 0)
			continue;
		/* registrations first, all of them, from every client (also
		 * one poll did not flag, when datagrams came): a QP's
		 * registration (or a group's join) is sent before its number
		 * can reach a peer, so a datagram read after this finds its QP
		 * however late this thread ran (else it would be dropped as
		 * for nobody: a lost UD datagram, a retransmission on RC) */
		udp = (pf[1].revents | pf[2].revents) & POLLIN;
		for (i = 3; i < 3 + ncl; i++) {
			if (!pf[i].revents && !udp)
				continue;
			if (ag_client(pf[i].fd) < 0) {
				pf[i] = pf[3 + --ncl];
				i--;
				if (!ncl)
					idle_since = soft_now_ns();
			}
		}
		/* the kernel steers by the registrations of now */
		if (ag_steer_dirty) {
			ag_steer_dirty = 0;
			for (fi = 0; fi < 2; fi++)
				(void)ag_steer(fi);
		}
		/* up to 64 datagrams of each family per pass */
		if (pf[1].revents & POLLIN)
			for (i = 0; i < 4; i++)
				if (ag_rx(AF_INET) < AG_BATCH)
					break;
		if (pf[2].revents & POLLIN)
			for (i = 0; i < 4; i++)
				if (ag_rx(AF_INET6) < AG_BATCH)
					break;
		if (pf[0].revents & POLLIN) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			struct ucred cr;
			socklen_t cl = sizeof(cr);

			if (c >= 0 &&
			    (ncl >= AG_MAX_CLIENTS ||
			     getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) ||
			     cr.uid != getuid())) {
				close(c);
			} else if (c >= 0) {
				soft_big_buffers(c);
				pf[3 + ncl].fd = c;
				pf[3 + ncl].events = POLLIN;
				pf[3 + ncl].revents = 0;
				ncl++;
			}
		}
	}
	/* UDP 4791 first: an agent that can bind our name once lfd is
	 * closed must find the port free, for both families (no client is
	 * left, so none holds one of the group's sockets) */
	for (fi = 0; fi < 2; fi++) {
		for (i = 0; i < ag_nslots[fi]; i++)
			close(ag_slots[fi][i].fd);
		if (ag_u[fi] >= 0)
			close(ag_u[fi]);
	}
	close(lfd);
	for (i = 0; i < ncl; i++)
		close(pf[3 + i].fd);
	/* as an HCA when its processes are gone: what the killed ones left
	 * goes now, not with the host's next process (a new agent may start
	 * meanwhile: the registry's lock orders us with its users) */
	soft_reg_reap();
	return 0;
}

/*
 * soft_hca_priority -- the calling thread is part of the host's "HCA"
 * (the agent, a process's receive thread): it must run as soon as a
 * packet arrives, ahead of busy pollers and CPU hogs, or the peers'
 * transport timers run out while a packet waits for the scheduler (on a
 * loaded 2-core machine a woken nice-0 thread waited up to 700 ms, longer
 * than ibv_rc_pingpong's whole retry budget).  SCHED_FIFO where we may
 * (root, CAP_SYS_NICE; nothing we fork inherits it), else nice -10, else
 * as we are.  Its work is bounded by the packets that arrive.
 */
void soft_hca_priority(void)
{
	struct sched_param sp;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	memset(&sp, 0, sizeof(sp));
	sp.sched_priority = 1;
	if (!sched_setscheduler(tid, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp))
		return;
	(void)setpriority(PRIO_PROCESS, (id_t)tid, -10);
}

__thread int soft_agent_forking __attribute__((tls_model("initial-exec")));
_Atomic int soft_agent_spawning;

/* ag_spawn -- start the host's agent: fork, setsid, fork; it keeps none
 * of our descriptors, and none of the program's signal handlers or the
 * forking thread's mask (the program's, or the net thread's: all) */
static void ag_spawn(void)
{
	pid_t p, q;
	sigset_t none;
	int fd, sig;

	soft_agent_forking = 1; /* stays set in the agent */
	atomic_fetch_add(&soft_agent_spawning, 1);
	p = fork();
	if (p) {
		soft_agent_forking = 0;
		atomic_fetch_sub(&soft_agent_spawning, 1);
	}
	if (p < 0)
		return;
	if (p) {
		while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
			;
		return;
	}
	setsid();
	q = fork();
	if (q)
		_exit(0);
	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL); /* SIGKILL, SIGSTOP: EINVAL */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	syscall(SYS_close_range, 0u, ~0u, 0u);
	fd = open("/dev/null", O_RDWR);
	if (fd == 0) {
		(void)!dup(0);
		(void)!dup(0);
	}
	(void)!chdir("/");
	soft_hca_priority(); /* the host's HCA */
	_exit(soft_net_agent_main());
}

int soft_ag_connect(void)
{
	struct sockaddr_un a;
	socklen_t alen;
	int fd, i;

	ag_name(&a, &alen);
	for (i = 0; i < 200; i++) {
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (!connect(fd, (struct sockaddr *)&a, alen)) {
			soft_big_buffers(fd);
			return fd;
		}
		close(fd);
		if (i == 0 || i % 50 == 0)
			ag_spawn();
		usleep(10000);
	}
	return -1;
}

int soft_ag_answer(const void *buf, size_t n, struct msghdr *m, int fd[2])
{
	struct ag_sock r;
	struct cmsghdr *c;
	int got = -1, d, k, ans;
	size_t i;

	for (c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		for (i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		     i++) {
			memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < 0)
				got = d;
			else
				close(d);
		}
	}
	ans = n == sizeof(r) && !(m->msg_flags & MSG_TRUNC);
	if (ans)
		memcpy(&r, buf, sizeof(r));
	ans = ans && r.op == AG_SOCK;
	k = ans ? fam_idx((int)r.family) : 0;
	if (got < 0)
		return ans;
	if (!ans || !r.slot || fd[k] >= 0 ||
	    (r.family != AF_INET && r.family != AF_INET6)) {
		close(got); /* none of ours, or one we already have */
		return ans;
	}
	/* ours to set: a socket another process had keeps what it set */
	soft_ag_gro(got);
	fd[k] = got;
	return 1;
}

void soft_ag_sockets(int ctl, const int want[2], int fd[2])
{
	static const int fam[2] = {AF_INET, AF_INET6};
	union {
		struct cmsghdr h;
		char b[AG_CTL_LEN];
	} u;
	uint64_t end = soft_now_ns() + 500000000ull, now;
	struct pollfd pf = {ctl, POLLIN, 0};
	struct ag_sock r;
	struct iovec iov = {&r, sizeof(r)};
	struct msghdr m;
	int k, asked = 0;
	ssize_t n;

	for (k = 0; k < 2; k++) {
		struct ag_msg q = {AG_SOCK, (uint32_t)fam[k]};

		fd[k] = -1;
		if (want[k] && send(ctl, &q, sizeof(q), MSG_NOSIGNAL) ==
				       (ssize_t)sizeof(q))
			asked++;
	}
	while (asked && (now = soft_now_ns()) < end) {
		n = poll(&pf, 1, (int)((end - now + 999999) / 1000000));
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1)
			break;
		memset(&m, 0, sizeof(m));
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = u.b;
		m.msg_controllen = sizeof(u.b);
		n = recvmsg(ctl, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			break; /* the agent went: agent_again asks the next */
		asked -= soft_ag_answer(&r, (size_t)n, &m, fd);
	}
}
