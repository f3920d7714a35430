/* SPDX-License-Identifier: MIT */
/*
 * agent.h -- the host's RoCE v2 agent (agent.c) and what the processes of
 * the host (net.c) say to it.
 *
 * One agent per host (network namespace) owns UDP port 4791.  A process
 * connects to it over an abstract SOCK_SEQPACKET socket, asks it for a
 * socket of its own on the port (AG_SOCK), and registers the QPNs it
 * receives for (AG_REG, AG_UNREG) and the multicast groups its QPs joined
 * (AG_MJOIN, AG_MLEAVE).  The kernel then steers each packet to the socket
 * of the process owning its destination QPN (a reuseport group with a
 * classic BPF program on the BTH's DestQP, kept by the agent); what it
 * cannot steer (a QPN registered a moment ago, a process without a socket
 * of its own, multicast) comes to the agent, which checks it and hands it
 * over on the process's connection, prefixed by a struct ag_fwd.
 */
#ifndef SOFT_AGENT_H
#define SOFT_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum { AG_REG = 1, AG_UNREG = 2, AG_MJOIN = 3, AG_MLEAVE = 4, AG_SOCK = 5 };

/* AG_REG, AG_UNREG (a QPN); AG_SOCK (qpn: the address family) */
struct ag_msg {
	uint32_t op;
	uint32_t qpn;
};

/* a process joins / leaves an IP multicast group (its first QP attached,
 * its last detached): the agent forwards the group's packets to it */
struct ag_mmsg {
	uint32_t op;
	uint32_t family;
	uint8_t addr[16];
};

/* linux/in6.h's, which glibc's netinet/in.h leaves out: a socket option
 * and control message of an IPv6 packet's flow label, and (Linux 4.10)
 * the option that turns the kernel's own labels off for a socket */
#ifndef IPV6_FLOWINFO
#define IPV6_FLOWINFO 11
#endif
#ifndef IPV6_AUTOFLOWLABEL
#define IPV6_AUTOFLOWLABEL 70
#endif

/* the agent's answer to AG_SOCK: slot 0 and no descriptor when it has
 * none to give, else the socket as SCM_RIGHTS */
struct ag_sock {
	uint32_t op;
	uint32_t family;
	uint32_t slot;
	uint32_t pad;
};

/* what a packet received on UDP 4791 says besides its bytes; the agent
 * puts it before each packet it hands over */
struct ag_fwd {
	uint8_t family;
	uint8_t tclass; /* IPv4 TOS or IPv6 traffic class, as received */
	uint16_t sport;
	uint8_t src[16];
	uint8_t dst[16];   /* the address it came to: the GRH's DGID */
	uint8_t hop_limit; /* IPv4 TTL or IPv6 hop limit, as received */
	uint8_t pad[3];
	uint32_t flow_label; /* IPv6's, as received (IPV6_FLOWINFO) */
};

/* room left before a datagram received: its IP and UDP headers for the
 * ICRC, then the ag_fwd that goes before it */
#define AG_HEAD 64

/* soft_addr_is_mcast -- an IPv4 class D or IPv6 multicast address (4 or
 * 16 bytes) */
static inline int soft_addr_is_mcast(int family, const uint8_t *a)
{
	return family == AF_INET ? (a[0] & 0xf0) == 0xe0 : a[0] == 0xff;
}

/* soft_ag_connect -- our connection to the host's agent, starting the
 * agent if needed; -1 if none could be had */
int soft_ag_connect(void);

/*
 * soft_ag_sockets -- sockets of our own on UDP 4791 from the agent on
 * connection CTL, asked for each family whose WANT[k] is set (k 0:
 * AF_INET, 1: AF_INET6), into FD[k], -1 where none came.  The agent
 * hands over the packets of a family we have none of.  The answers are
 * waited for half a second at most (an agent of an older softrdma gives
 * none); one that comes later is a message on CTL for its reader to give
 * soft_ag_answer: the agent steers our QPNs to that socket from then on.
 */
void soft_ag_sockets(int ctl, const int want[2], int fd[2]);

/*
 * soft_ag_answer -- a message of N bytes at BUF received on the agent's
 * connection with M's control data (a buffer of AG_CTL_LEN): 1 when it is
 * an answer to AG_SOCK, whose socket goes into FD[k] for its family where
 * FD[k] is -1; 0 when it is something else.  Every other descriptor M
 * carries is closed.
 */
int soft_ag_answer(const void *buf, size_t n, struct msghdr *m, int fd[2]);

/* the largest UDP payload: a datagram received whole (UDP_GRO) */
#define AG_DGRAM_MAX 65536

/* soft_gso_enabled -- UDP GSO sends and GRO receives (SOFTRDMA_NET_GSO=0:
 * neither, for measurements and tests) */
int soft_gso_enabled(void);

/* soft_ag_gro -- FD takes a GSO datagram whole (UDP_GRO), unless GSO is
 * off; else the kernel cuts it, which is taken as well */
void soft_ag_gro(int fd);

/*
 * soft_ag_datagram -- a datagram of N bytes at PKT, received on a socket
 * of FAMILY on UDP 4791 as M says (the sender's address, IP_PKTINFO, the
 * segment size of one taken whole with UDP_GRO), with AG_HEAD bytes free
 * before PKT: FN(ARG, packet, length, what it came with) for each RoCE v2
 * packet of it (a GRO datagram's segments, in order) with a good ICRC;
 * those with a bad one are dropped, as an HCA drops them.  FN must be done
 * with a packet when it returns: the next one's headers for its ICRC
 * check are written over the last AG_HEAD bytes before it.  Returns the
 * packets given to FN.
 */
typedef void ag_seg_fn(void *arg, uint8_t *pkt, size_t n,
		       const struct ag_fwd *fw);
int soft_ag_datagram(int family, uint8_t *pkt, size_t n, const struct msghdr *m,
		     ag_seg_fn *fn, void *arg);

/* soft_ag_recv_init -- the recvmmsg entries for up to COUNT datagrams of
 * SIZE bytes each (AG_HEAD free before each), their names and control
 * data, in the arrays given; soft_ag_recv_reset -- what a recvmmsg
 * changed in the first COUNT (the name's and the control data's lengths:
 * a call that took nothing changed nothing); entries whose name or
 * control data were set to NULL keep none */
#define AG_CTL_LEN 192
struct ag_rxbuf {
	struct sockaddr_storage from;
	char ctl[AG_CTL_LEN];
	struct iovec iov;
};
void soft_ag_recv_init(struct mmsghdr *mm, struct ag_rxbuf *rb, uint8_t *buf,
		       size_t size, unsigned int count);
void soft_ag_recv_reset(struct mmsghdr *mm, unsigned int count);

/* soft_hca_priority -- the calling thread is part of the host's "HCA" */
void soft_hca_priority(void);

/* soft_big_buffers -- 16 MiB socket buffers where we may */
void soft_big_buffers(int fd);

/* soft_net_agent_main -- the host's agent (tests start it by hand) */
int soft_net_agent_main(void);

#endif /* SOFT_AGENT_H */
