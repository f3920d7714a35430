/* SPDX-License-Identifier: MIT */
/*
 * net.c -- softrdma between hosts: RC over RoCE v2 (UDP port 4791).
 *
 * Shape.  One agent process per host (per network namespace, agent.c)
 * owns UDP port 4791 and gives each process a socket of its own on it, to
 * which the kernel steers the packets of the QPNs the process registered:
 * a packet goes from the wire to the process with no hop between.  What
 * the agent still gets (a QPN registered a moment ago, multicast, a
 * process that has no socket of its own) it checks and hands over on the
 * process's connection to it (ctl_fd).
 *
 * Each process runs the RC transport of its own QPs (this file): the
 * requester (segmentation at the path MTU, PSNs, ack requests, a window of
 * 128 packets, go-back-N on a PSN sequence NAK, the retransmission timer of
 * 4.096 us * 2^timeout and retry_cnt, RNR NAKs with the responder's timer
 * and rnr_retry), the completer (ACKs, READ responses, atomic ACKs) and
 * the responder (in-order PSNs, one PSN sequence NAK per gap, duplicates
 * acknowledged without a second delivery, READ responses sent a burst at
 * a time, a repeated READ restarting the response under way at its PSN,
 * rkeys of MRs and memory windows checked as on one host (mw.c), RNR NAK
 * when no receive is posted; an atomic write, IBA 1.5's ATOMIC_WRITE,
 * placed in one 8-byte store and answered by a zero-length READ response,
 * a repeat answered again without placing it twice, as rxe does).  It
 * sends its packets itself, from unconnected UDP sockets with
 * IP_PMTUDISC_DO (the ICRC covers the IPv4 id, which Linux leaves 0 for
 * such packets, and numbers 0, 1, 2 ... in the segments of a GSO send:
 * batch_commit), and takes its packets in
 * whichever thread polls: an application thread busy-polling a CQ reads
 * its socket itself (soft_net_progress), and while none has for a
 * millisecond, a receive thread of the process (net_main) waits on it.
 * That thread also runs the timers, and only it reads what the agent
 * hands over.
 *
 * Enabled with SOFTRDMA_NET=1 (else a foreign GID stays an unreachable
 * path, as before).  SOFTRDMA_TEST_NETFAULT (tests only) injects faults
 * into every packet this process sends:
 * "seed=N,drop=P,dup=P,reorder=P,corrupt=P" with P in percent (corrupt:
 * one bit flipped past the BTH, which the receiver's ICRC check drops),
 * and "rdlast=N": of the packets that end a READ response (LAST or
 * ONLY, so also an atomic write's answer) the first of every N is lost
 * (N = 2: a READ's response loses its last packet, and that packet sent
 * again arrives); "atmack=N": of the atomic ACKs, the first of every N is
 * lost.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "net.h"
#include "roce.h"
#include "ud.h"

#define NET_MAX_QP    4096
#define NET_HASH      4096 /* buckets of QPNs (their low bits: the slot) */
#define NET_WINDOW    128  /* unacknowledged packets in flight */
#define NET_ACK_EVERY 32   /* ack request every N packets of a message */
#define NET_LATE_NS   50000000ull /* a timer this late: we were not run */
#define NET_LATE_MAX  8	 /* such late timeouts not counted between ACKs */
#define NET_HEAD      64 /* room before a packet for its IP/UDP headers */
#define NET_BUF \
	(NET_HEAD + ROCE_MAX_HDR_LEN + ROCE_ATMETH_LEN + ROCE_MAX_PMTU + 8)
#define NET_RD_BURST 32 /* READ response packets sent in one go */
/* a READ's gap asked for again after this many packets past it (doubling) */
#define NET_OOO_MIN 256
#define NET_OOO_MAX (1u << 20)
#define NET_DF_MAX  1024 /* requests held behind a READ response */
/* atomic results kept for repeated requests: as many as the requester's
 * window holds atomics, and SOFT_MAX_RD_ATOM, max_dest_rd_atomic's top */
#define NET_ATM_SAVED 128
/* the inline ring's bytes at most: a deeper queue of large inline sends
 * than it holds copies the excess into memory of their own (inl_take) */
#define NET_INL_RING (256u << 10)

struct net_swqe {
	uint64_t wr_id;
	enum ibv_wr_opcode op;
	int signaled;
	int se;		 /* IBV_SEND_SOLICITED */
	int fence;	 /* IBV_SEND_FENCE: sent once the READs and atomics
			  * posted before it have their responses */
	uint32_t status; /* a local error found at post */
	uint32_t len;
	uint32_t niov;
	struct iovec *iov;
	uint8_t *inl;	  /* its inline bytes: in inls, or its own (inl_own) */
	uint64_t inl_end; /* in inls: inl_head after it (0: not there) */
	int inl_own;	  /* inl was malloc()ed: inls had no room */
	uint64_t raddr;
	uint32_t rkey;
	uint32_t imm; /* host order of the wire value */
	uint32_t inv;
	uint64_t swap, cmp;
	uint32_t psn, npkts;   /* PSN space it takes */
	uint32_t got;	       /* READ: response packets placed */
	uint32_t rereq;	       /* READ: got when last re-requested + 1 */
	uint32_t ooo, ooo_max; /* READ: packets past the gap since, limit */
	uint32_t ooo_last;     /* READ: the last one's place, 0: none */
	uint32_t srqn;	       /* an XRC initiator's: the XRCETH's SRQ */
	int done;
	int rd_held; /* READ or atomic: holds one of max_rd_atomic (rd_take) */
};

struct net_pkt {
	struct net_pkt *next;
	size_t len;
	uint8_t data[];
};

/* the IP header fields a packet asks for: a UD datagram its AH's hop
 * limit, traffic class and flow label, an RC QP's packets its path's
 * (ah_attr.grh, as rxe's prepare_ipv4_hdr / prepare_ipv6_hdr take TTL and
 * TOS from the QP's AV, and mlx5 the flow label too); all 0: the
 * socket's own (and flow label 0) */
struct ip_opt {
	uint8_t ttl, tos;
	uint32_t flow; /* IPv6 only */
};

struct soft_net_qp {
	struct soft_qp *qp;
	struct soft_net_qp *hnext;	   /* net_hash's chain */
	struct net_pkt *in_head, *in_tail; /* soft_net_mtx */
	_Atomic int pending;
	struct soft_context *ctx;
	uint64_t queued_at; /* in_head waits since; soft_net_mtx */
	uint32_t qpn, dqpn;
	int family;
	uint8_t src[16], dst[16]; /* 4 bytes used for AF_INET */
	uint32_t pmtu;
	int ud; /* a UD QP: datagrams only, none of what follows */
	/* the transport of its packets: ROCE_RC, or ROCE_XRC for an XRC
	 * initiator (requests with the XRCETH) or target (responses) */
	uint8_t base;
	struct ip_opt ip; /* a UD datagram's AH's (soft_net_ud_send), an RC
			   * QP's path's (soft_net_connect) */
	/* requester */
	struct net_swqe *sq;
	struct iovec *iovs;
	/* inline data, copied at post: a byte ring taken in order and given
	 * back as the WQEs complete (a WQE does not reserve max_inl) */
	uint8_t *inls;
	uint64_t inl_size, inl_head, inl_tail;
	uint32_t sq_n, max_sge, max_inl;
	uint64_t head, tail, txw;
	/* the WQEs begun: every one below it has had a packet sent (in SQD
	 * only those go on, tx_push; drained once all have completed) */
	uint64_t started;
	uint32_t txp;
	uint32_t sq_psn, una;
	uint32_t rd_out; /* READs and atomics begun, not completed (rd_take) */
	int psn_set;
	uint64_t timer_at, rnr_until;
	uint32_t retries, rnrs, late;
	/* responder */
	uint32_t epsn, msn;
	int nak_sent;
	int ack_due; /* an ACK of ack_psn owed, sent once for a run */
	uint32_t ack_psn;
	/* since when ack_due waits for a send (ack_hold); atomic: the held
	 * list (held_nq) is read under soft_net_mtx, not this QP's lock */
	_Atomic uint64_t ack_held;
	int rx_active; /* a SEND in progress */
	int srq_held;  /* srq_wqe: taken from the QP's SRQ, not completed */
	/* an XRC target: the XRC SRQ the request in hand names (set by
	 * responder while it runs), and the number of the last one taken:
	 * the SEND, WRITE or READ under way's */
	struct soft_srq *xsrq;
	uint32_t xsrqn;
	/* an XRC target's SRQ of another process or context of this host
	 * (xrc.c soft_xsrq_map), mapped while its number is the last one
	 * named; xfor: the request in hand's SRQ is it (set by responder
	 * while it runs); held_for: srq_wqe is its WQE held_idx, HELD there
	 * until the message ends (soft_xsrq_hold, soft_xsrq_release) */
	struct soft_srq_ref xref;
	int xfor, held_for;
	int xbad; /* resp_wqe found xref's ring corrupt */
	uint64_t held_idx;
	struct soft_rwqe srq_wqe;
	uint64_t rx_off;
	int wr_active; /* a WRITE in progress */
	uint64_t wr_va, wr_len, wr_off;
	uint32_t wr_rkey;
	/* the results of the last NET_ATM_SAVED atomics executed, by PSN:
	 * a repeated atomic is answered from its own (atm_find) */
	struct {
		uint32_t psn;
		uint64_t orig;
	} atm[NET_ATM_SAVED];
	uint32_t atm_n; /* atomics saved so far (atm[atm_n % NET_ATM_SAVED]
			 * is the next) */
	/* the READ response being sent, NET_RD_BURST packets at a time
	 * (resp_pump): response k has PSN rs_psn + k */
	int rs_active;
	uint32_t rs_psn, rs_k, rs_n, rs_len, rs_rkey;
	uint64_t rs_va;
	/* requests that came while it is sent, answered after it in order */
	struct net_pkt *df_head, *df_tail;
	uint32_t df_n;
};

pthread_mutex_t soft_net_mtx = PTHREAD_MUTEX_INITIALIZER;
/* our QPs on the network path: net_tbl[0, net_nqp), and by QPN */
static struct soft_net_qp *net_tbl[NET_MAX_QP];
static int net_nqp;
static struct soft_net_qp *net_hash[NET_HASH];
/* the receive thread's longest sleep with nothing to do, ms
 * (SOFTRDMA_NET_IDLE_MS, 1 to 10,000: tests lengthen it so that an ACK
 * left to this sleep would be seconds late, never a scheduling delay) */
static int net_idle_ms = 50;
static int net_debug = -1; /* SOFTRDMA_NET_DEBUG: a line per packet in */
static int ctl_fd = -1, udp4 = -1, udp6 = -1;
/* our sockets on UDP 4791 (IPv4, IPv6) the kernel steers our packets to,
 * -1: none (the agent hands them over); our QPs that receive on each (a
 * UD QP on both) */
static int rx_fd[2] = {-1, -1};
static int fam_users[2];
/* what mc_route set on our sockets (IPv4, IPv6) to send to a group: the
 * interface, by the source address SRC (HAVE: one is set), and the TTL
 * (0: none yet); soft_net_mtx */
static struct mc_set {
	uint8_t src[16];
	int have, ttl;
} mc_set[2];
/* when a poller last took packets in (soft_net_progress): for a
 * millisecond after, our thread leaves the sockets to it; unless the
 * process armed a CQ in the last 10 ms (soft_net_sleeping): it polls
 * only when woken, and sleeps in between */
static _Atomic uint64_t poll_at, arm_at;
#define NET_POLLER_NS 1000000ull
#define NET_ARMED_NS  10000000ull
/* polls to go before a poller reads the clock again (poll_clock); soft_net_mtx */
#define NET_CLOCK_POLLS 4
static unsigned int poll_stale;
/* an ACK an application's poll owes waits this long for the application
 * to send (ack_hold) */
#define NET_ACK_HOLD_NS 5000ull
static _Atomic int acks_held; /* QPs with ack_held set */
/* the QPs whose ACKs our polls hold, for acks_aged; soft_net_mtx.  An entry
 * whose ack_held went to 0 (sent with a send) is stale and skipped */
#define NET_HELD 16
static struct soft_net_qp *held_nq[NET_HELD];
static int held_n;
/* our thread is about to sleep for long: a post wakes it (net_kick) for
 * the timer of what it sends */
static _Atomic int thr_asleep;
/* our thread sleeps longer than a millisecond (no poller a moment ago):
 * an ACK a poll holds wakes it (ack_hold), or it would not release the
 * ACK for up to 50 ms once the poller stops polling */
static _Atomic int thr_long;
/* our thread waits without our sockets (a poller reads them): an
 * application thread about to sleep wakes it (soft_net_sleeping) */
static _Atomic int thr_nosock;
static uint16_t sport4, sport6;
static int thr_started;
static pid_t thr_pid; /* the process our thread runs in */
static pthread_t net_thr;
/* the context whose lock our thread waits for (it stays until the wait
 * is over: soft_net_ctx_gone); soft_net_mtx */
static struct soft_context *boost_ctx;
static pthread_cond_t boost_cv = PTHREAD_COND_INITIALIZER;

/* the multicast groups this process's UD QPs are attached to: one pair per
 * (group, QP); soft_net_mtx */
#define NET_MAX_MC 4096

struct net_mc {
	uint8_t gid[16];
	uint32_t qpn;
};

static struct net_mc net_mcs[NET_MAX_MC];
static int net_nmc;

/* ---------------------------------------------------------------- */
/* fault injection (tests) */

pthread_mutex_t soft_flt_mtx = PTHREAD_MUTEX_INITIALIZER;
static int flt_on = -1; /* read through flt_state */
static double flt_drop, flt_dup, flt_reorder, flt_corrupt;
static unsigned long flt_rdlast, flt_rdlast_n; /* rdlast=N, seen so far */
static unsigned long flt_atmack, flt_atmack_n; /* atmack=N, seen so far */
static uint64_t flt_rng;
static uint8_t flt_held[NET_BUF];
static size_t flt_held_len;
static int flt_held_fd;
static struct sockaddr_storage flt_held_to;
static socklen_t flt_held_tolen;
static struct ip_opt flt_held_o;
static uint64_t flt_held_gen; /* packets held so far */

/* flt_state -- fault injection -1: not looked at yet, 0: off, 1: on.
 * Every sender reads it without soft_flt_mtx (wire_send, batch_slot, the
 * network thread's flt_release); flt_init sets it once, under soft_flt_mtx,
 * after the parameters it publishes */
static int flt_state(void)
{
	return __atomic_load_n(&flt_on, __ATOMIC_ACQUIRE);
}

/* flt_init -- SOFTRDMA_TEST_NETFAULT parsed; soft_flt_mtx held */
static void flt_init(void)
{
	const char *e = getenv("SOFTRDMA_TEST_NETFAULT");
	char *s, *tok, *save = NULL;
	int on = 0;

	flt_rng = 0x9e3779b97f4a7c15ull;
	if (!e || !*e)
		goto publish;
	s = strdup(e);
	if (!s)
		goto publish;
	for (tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strncmp(tok, "seed=", 5))
			flt_rng ^= strtoull(tok + 5, NULL, 0) *
				   0x2545f4914f6cdd1dull;
		else if (!strncmp(tok, "drop=", 5))
			flt_drop = strtod(tok + 5, NULL) / 100;
		else if (!strncmp(tok, "dup=", 4))
			flt_dup = strtod(tok + 4, NULL) / 100;
		else if (!strncmp(tok, "reorder=", 8))
			flt_reorder = strtod(tok + 8, NULL) / 100;
		else if (!strncmp(tok, "corrupt=", 8))
			flt_corrupt = strtod(tok + 8, NULL) / 100;
		else if (!strncmp(tok, "rdlast=", 7))
			flt_rdlast = strtoul(tok + 7, NULL, 0);
		else if (!strncmp(tok, "atmack=", 7))
			flt_atmack = strtoul(tok + 7, NULL, 0);
	}
	free(s);
	if (!flt_rng)
		flt_rng = 1;
	on = flt_drop > 0 || flt_dup > 0 || flt_reorder > 0 ||
	     flt_corrupt > 0 || flt_rdlast > 0 || flt_atmack > 0;
publish:
	__atomic_store_n(&flt_on, on, __ATOMIC_RELEASE);
}

/* flt_rc_xrc -- OPCODE is of RC or of XRC (whose responses are RC's) */
static int flt_rc_xrc(uint8_t opcode)
{
	return (opcode & 0xe0) == ROCE_RC || (opcode & 0xe0) == ROCE_XRC;
}

/* flt_rdlast_hit -- the packet of LEN bytes at BUF (its BTH first) ends
 * a READ response and is the first of N such (rdlast=N): lost; soft_flt_mtx
 * held */
static int flt_rdlast_hit(const uint8_t *buf, size_t len)
{
	if (!flt_rdlast || len < ROCE_BTH_LEN || !flt_rc_xrc(buf[0]) ||
	    ((buf[0] & 0x1f) != ROCE_READ_RESP_LAST &&
	     (buf[0] & 0x1f) != ROCE_READ_RESP_ONLY))
		return 0;
	return flt_rdlast_n++ % flt_rdlast == 0;
}

/* flt_atmack_hit -- the packet is an atomic ACK and the first of N such
 * (atmack=N): lost; soft_flt_mtx held */
static int flt_atmack_hit(const uint8_t *buf, size_t len)
{
	if (!flt_atmack || len < ROCE_BTH_LEN || !flt_rc_xrc(buf[0]) ||
	    (buf[0] & 0x1f) != ROCE_ATOMIC_ACK)
		return 0;
	return flt_atmack_n++ % flt_atmack == 0;
}

static double flt_rand(void)
{
	flt_rng ^= flt_rng << 13;
	flt_rng ^= flt_rng >> 7;
	flt_rng ^= flt_rng << 17;
	return (double)(flt_rng >> 11) / (double)(1ull << 53);
}

/* the control messages of a packet at most: the TOS / traffic class,
 * TTL / hop limit and flow label of an ip_opt, then UDP_SEGMENT */
#define NET_CTL                                                       \
	(CMSG_SPACE(sizeof(uint16_t)) + 2 * CMSG_SPACE(sizeof(int)) + \
	 CMSG_SPACE(sizeof(uint32_t)))

/* 1: the kernel refused a flow label (a network namespace with exclusive
 * flow labels wants each acquired first): none is sent any more */
static _Atomic int net_fl_off;

/* ctl_put -- a control message of LEVEL, TYPE and the LEN bytes at V at
 * offset AT of the (cmsghdr-aligned) buffer B; the offset after it */
static size_t ctl_put(char *b, size_t at, int level, int type, const void *v,
		      size_t len)
{
	struct cmsghdr c;

	/* the padding too: the kernel reads CMSG_SPACE bytes (valgrind) */
	memset(b + at, 0, CMSG_SPACE(len));
	memset(&c, 0, sizeof(c));
	c.cmsg_level = level;
	c.cmsg_type = type;
	c.cmsg_len = CMSG_LEN(len);
	memcpy(b + at, &c, sizeof(c));
	memcpy(b + at + CMSG_LEN(0), v, len);
	return at + CMSG_SPACE(len);
}

/*
 * ip_opt_ctl -- the control messages of O for a packet of FAMILY into B
 * (room for NET_CTL): the TOS / traffic class, the TTL / hop limit
 * unless 0, which the kernel refuses (the socket's, the host's default,
 * stays), and IPv6's flow label unless 0 (the socket's kernel labels are
 * off: 0 on the wire, as mlx5 sends the AV's 0); their length, 0 for
 * none.  Per packet, since the socket is every QP's.
 */
static size_t ip_opt_ctl(char *b, int family, const struct ip_opt *o)
{
	int v6 = family == AF_INET6, lv = v6 ? IPPROTO_IPV6 : IPPROTO_IP, v;
	uint32_t fl = o && v6 &&
				      !atomic_load_explicit(
					      &net_fl_off, memory_order_relaxed)
			      ? o->flow & 0xfffff
			      : 0;
	size_t at = 0;

	if (!o || (!o->ttl && !o->tos && !fl))
		return 0;
	v = o->tos;
	at = ctl_put(b, at, lv, v6 ? IPV6_TCLASS : IP_TOS, &v, sizeof(v));
	if (o->ttl) {
		v = o->ttl;
		at = ctl_put(b, at, lv, v6 ? IPV6_HOPLIMIT : IP_TTL, &v,
			     sizeof(v));
	}
	if (fl) {
		fl = htonl(fl);
		at = ctl_put(b, at, lv, IPV6_FLOWINFO, &fl, sizeof(fl));
	}
	return at;
}

/* fl_refused -- a send with O's flow label failed with ERR: the kernel
 * wants its labels acquired (exclusive labels in the namespace); 1 when
 * that was it, and no label is sent from now on (the packet goes again
 * without) */
static int __attribute__((noinline))
fl_refused(const struct sockaddr *to, const struct ip_opt *o, int err)
{
	if (err != EINVAL || to->sa_family != AF_INET6 || !o ||
	    !(o->flow & 0xfffff) ||
	    atomic_exchange_explicit(&net_fl_off, 1, memory_order_relaxed))
		return 0;
	return 1;
}

static void raw_send_ip(int fd, const void *buf, size_t len,
			const struct sockaddr *to, socklen_t tolen,
			const struct ip_opt *o)
{
	union {
		struct cmsghdr h;
		char b[NET_CTL];
	} ctl;
	struct iovec iov = {(void *)(uintptr_t)buf, len};
	struct msghdr m;

	/* a full socket buffer or an unreachable network is a lost packet:
	 * the retransmission timer covers it, as on a wire */
	memset(&m, 0, sizeof(m));
	m.msg_controllen = ip_opt_ctl(ctl.b, to->sa_family, o);
	if (!m.msg_controllen) {
		(void)!sendto(fd, buf, len, MSG_DONTWAIT, to, tolen);
		return;
	}
	m.msg_name = (void *)(uintptr_t)to;
	m.msg_namelen = tolen;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.b;
	if (sendmsg(fd, &m, MSG_DONTWAIT) < 0 && fl_refused(to, o, errno)) {
		m.msg_controllen = ip_opt_ctl(ctl.b, to->sa_family, o);
		m.msg_control = m.msg_controllen ? ctl.b : NULL;
		(void)!sendmsg(fd, &m, MSG_DONTWAIT);
	}
}

/*
 * Sending in batches: the packets a caller makes in one go (a message's
 * segments in tx_push, a READ response's burst) are kept, between
 * batch_begin and batch_end, in a buffer of the calling thread and sent
 * by one sendmmsg per NET_BATCH (fault injection sends one by one).  A
 * packet the kernel refuses is lost, as with sendto.
 *
 * UDP segmentation (GSO): consecutive packets of the batch to one QP of
 * one host whose lengths are equal (the last may be shorter) leave as one
 * datagram with UDP_SEGMENT, which crosses the stack, veth and bridge
 * whole; the kernel (or a NIC) cuts it into the packets again, packet k
 * with IPv4 identification k, so its ICRC is made for k (roce.h).  A
 * message's first packet is longer (RETH): the next ends its datagram,
 * the rest share another.  Where the
 * kernel refuses it (UDP_SEGMENT unknown, a device that cannot checksum),
 * or with SOFTRDMA_NET_GSO=0, each packet is a datagram.
 */
#define NET_BATCH 16

struct net_batch {
	struct net_batch *all_next; /* tb_all's list */
	_Atomic int owned;	    /* a thread's tb (0: free for the next) */
	int depth;		    /* batch_begin nesting */
	unsigned int n;		    /* packets */
	unsigned int nm; /* datagrams: a packet, or a GSO run of them */
	int fd;		 /* every packet of the batch leaves by this socket */
	struct mmsghdr mm[NET_BATCH];	       /* per datagram */
	struct sockaddr_storage to[NET_BATCH]; /* per datagram */
	struct ip_opt o[NET_BATCH];	       /* per datagram */
	union {
		struct cmsghdr h;
		char b[NET_CTL];
	} ctl[NET_BATCH];	 /* per datagram: its ip_opt's, UDP_SEGMENT */
	uint16_t seg[NET_BATCH]; /* per datagram: its packets' length */
	uint16_t hl[NET_BATCH];	 /* per datagram: IP and UDP header */
	size_t bytes[NET_BATCH]; /* per datagram */
	struct iovec iov[NET_BATCH];	 /* per packet */
	uint8_t buf[NET_BATCH][NET_BUF]; /* per packet */
};

/* 1: GSO sends; 0: off (SOFTRDMA_NET_GSO=0, or the kernel refused it) */
static _Atomic int net_gso = -1;

static __thread struct net_batch *tb;
static pthread_key_t tb_key;
static pthread_once_t tb_once = PTHREAD_ONCE_INIT;
static int tb_key_ok;
/* every batch made, a thread's tb or free for the next thread's: none is
 * freed, so that a forked child, where the other threads are gone, gives
 * theirs to its own (soft_net_fork_child) and loses none */
static struct net_batch *_Atomic tb_all;

/* tb_free -- a thread's end: its batch free for another */
static void tb_free(void *p)
{
	struct net_batch *b = p;

	atomic_store(&b->owned, 0);
}

/* tb_take -- a batch for this thread: a free one, else a new one */
static struct net_batch *tb_take(void)
{
	struct net_batch *b;
	int free_one;

	for (b = atomic_load(&tb_all); b; b = b->all_next) {
		free_one = 0;
		if (atomic_compare_exchange_strong(&b->owned, &free_one, 1)) {
			b->depth = 0;
			b->n = b->nm = 0;
			return b;
		}
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	atomic_store(&b->owned, 1);
	b->all_next = atomic_load(&tb_all);
	while (!atomic_compare_exchange_weak(&tb_all, &b->all_next, b))
		;
	return b;
}

static void tb_key_make(void)
{
	tb_key_ok = !pthread_key_create(&tb_key, tb_free);
}

/* gso_renumber -- the ICRCs of datagram M's packets switched between
 * their segments' IPv4 identifications and 0 (XOR both ways) */
static void gso_renumber(unsigned int m)
{
	struct msghdr *h = &tb->mm[m].msg_hdr;
	size_t j;

	if (tb->hl[m] != roce_ip_udp_len(AF_INET))
		return;
	for (j = 1; j < h->msg_iovlen; j++) {
		size_t len = tb->hl[m] + h->msg_iov[j].iov_len;

		roce_icrc_xor((uint8_t *)h->msg_iov[j].iov_base - tb->hl[m],
			      len, roce_icrc_id_delta(len, (unsigned int)j));
	}
}

/* gso_refused -- datagram M was refused for its GSO: no more of them; its
 * packets leave one by one, each with its ICRC for identification 0 */
static void gso_refused(unsigned int m)
{
	struct msghdr *h = &tb->mm[m].msg_hdr;
	size_t j;

	atomic_store(&net_gso, 0);
	gso_renumber(m);
	for (j = 0; j < h->msg_iovlen; j++)
		raw_send_ip(tb->fd, h->msg_iov[j].iov_base,
			    h->msg_iov[j].iov_len, h->msg_name, h->msg_namelen,
			    &tb->o[m]);
}

/* batch_ctl -- datagram M's control messages: its ip_opt's, then
 * UDP_SEGMENT when it is a GSO run of packets */
static void batch_ctl(unsigned int m)
{
	struct msghdr *h = &tb->mm[m].msg_hdr;
	size_t at = ip_opt_ctl(tb->ctl[m].b, tb->to[m].ss_family, &tb->o[m]);

	if (h->msg_iovlen > 1)
		at = ctl_put(tb->ctl[m].b, at, IPPROTO_UDP, UDP_SEGMENT,
			     &tb->seg[m], sizeof(uint16_t));
	h->msg_control = at ? tb->ctl[m].b : NULL;
	h->msg_controllen = at;
}

static void batch_flush(void)
{
	unsigned int i = 0, j;

	while (i < tb->nm) {
		int r = sendmmsg(tb->fd, tb->mm + i, tb->nm - i, MSG_DONTWAIT);

		if (r > 0) {
			i += (unsigned int)r;
			continue;
		}
		if (fl_refused((struct sockaddr *)&tb->to[i], &tb->o[i],
			       errno)) {
			for (j = i; j < tb->nm; j++)
				batch_ctl(j); /* no more labels */
			continue;
		}
		/* not EINVAL: a QP's path MTU above the link's (lost, as
		 * a switch drops such packets) must not end GSO for all */
		if (tb->mm[i].msg_hdr.msg_iovlen > 1 &&
		    (errno == EIO || errno == ENOPROTOOPT ||
		     errno == EOPNOTSUPP))
			gso_refused(i);
		i++; /* refused: that one lost */
	}
	tb->n = 0;
	tb->nm = 0;
}

static void batch_begin(void)
{
	if (!tb) {
		pthread_once(&tb_once, tb_key_make);
		if (!tb_key_ok)
			return;
		tb = tb_take();
		if (!tb)
			return;
		if (pthread_setspecific(tb_key, tb)) {
			tb_free(tb);
			tb = NULL;
			return;
		}
	}
	tb->depth++;
}

static void batch_end(void)
{
	if (tb && tb->depth && !--tb->depth && tb->n)
		batch_flush();
}

/* batch_slot -- the buffer of the batch's next packet to FD (the packet
 * at NET_HEAD in it, its headers for the ICRC before), or NULL: no batch
 * (then the packet goes by wire_send); batch_commit adds it */
static uint8_t *batch_slot(int fd)
{
	if (!tb || !tb->depth || flt_state())
		return NULL;
	if (tb->n && tb->fd != fd)
		batch_flush();
	tb->fd = fd;
	return tb->buf[tb->n];
}

/* gso_peer -- the packet in slot K (HL bytes of headers before it, IP
 * fields O) may share datagram M: GSO on, the same QP (the kernel steers
 * the datagram whole by its first packet's DestQP) of the same host, the
 * same IP header */
static int gso_peer(unsigned int m, unsigned int k, size_t hl,
		    const struct sockaddr *to, socklen_t tolen,
		    const struct ip_opt *o)
{
	const struct msghdr *h = &tb->mm[m].msg_hdr;
	const uint8_t *first = h->msg_iov[0].iov_base;

	return net_gso > 0 && tb->hl[m] == hl && h->msg_namelen == tolen &&
	       !memcmp(h->msg_name, to, tolen) &&
	       !memcmp(first + 5, tb->buf[k] + NET_HEAD + 5, 3) &&
	       tb->o[m].ttl == o->ttl && tb->o[m].tos == o->tos &&
	       tb->o[m].flow == o->flow;
}

/* gso_joins -- the packet of LEN bytes in slot K (HL bytes of headers
 * before it) can be the next segment of datagram M */
static int gso_joins(unsigned int m, unsigned int k, size_t len, size_t hl,
		     const struct sockaddr *to, socklen_t tolen,
		     const struct ip_opt *o)
{
	const struct msghdr *h = &tb->mm[m].msg_hdr;
	size_t last = h->msg_iov[h->msg_iovlen - 1].iov_len;

	/* as long as the packets before are all of the segment size and
	 * all fit one datagram */
	return len <= tb->seg[m] && last == tb->seg[m] &&
	       h->msg_iovlen < ROCE_GSO_MAX_SEGS &&
	       tb->bytes[m] + len <= 65535 - hl &&
	       gso_peer(m, k, hl, to, tolen, o);
}

/*
 * gso_ahead -- the request of LEN bytes in slot K goes to the QP whose
 * ACK, alone, is datagram M (an ACK held for the application's send:
 * soft_net_post_send): the request goes first and the ACK rides behind
 * it as the datagram's last, shorter segment, so the two cross the stack
 * in one datagram and reach a receiver taking it whole (UDP_GRO) in one
 * run: one datagram each way of a ping-pong, not two.  A responder may
 * send its ACKs later than its own requests (ACKs coalesce; an ACK only
 * has to come before the requester's timer, and the two PSN spaces are
 * apart); rxe posts the receive's CQE before it sends its ACK.  A
 * request shorter than the ACK (a SEND of 0 to 3 bytes) keeps the ACK
 * ahead in a datagram of its own.
 */
static int gso_ahead(unsigned int m, unsigned int k, size_t len, size_t hl,
		     const struct sockaddr *to, socklen_t tolen,
		     const struct ip_opt *o)
{
	const struct msghdr *h = &tb->mm[m].msg_hdr;
	const uint8_t *ack = h->msg_iov[0].iov_base;

	return h->msg_iovlen == 1 &&
	       tb->seg[m] == ROCE_BTH_LEN + ROCE_AETH_LEN + ROCE_ICRC_LEN &&
	       ack[0] == (ROCE_RC | ROCE_ACK) &&
	       (ack[ROCE_BTH_LEN] & ROCE_AETH_TYPE_MASK) == ROCE_AETH_ACK &&
	       (roce_op_flags(tb->buf[k][NET_HEAD]) & ROCE_F_REQ) &&
	       len > tb->seg[m] && gso_peer(m, k, hl, to, tolen, o);
}

/* gso_swap -- datagram M, an ACK in slot K - 1, becomes the request of
 * LEN bytes in slot K, then the ACK (gso_ahead) */
static void gso_swap(unsigned int m, unsigned int k, size_t len, size_t hl)
{
	struct msghdr *h = &tb->mm[m].msg_hdr;
	struct iovec ack = tb->iov[k - 1];

	/* the ACK is segment 1 now: its ICRC for IPv4 identification 1 */
	if (hl == roce_ip_udp_len(AF_INET))
		roce_icrc_xor((uint8_t *)ack.iov_base - hl, hl + ack.iov_len,
			      roce_icrc_id_delta(hl + ack.iov_len, 1));
	tb->iov[k - 1] = tb->iov[k];
	tb->iov[k] = ack;
	h->msg_iovlen = 2;
	tb->seg[m] = (uint16_t)len;
	tb->bytes[m] += len;
}

/* batch_commit -- the packet of LEN bytes in the slot batch_slot gave
 * (its IP and UDP headers, HL bytes, before it; its IP fields O) leaves
 * with the batch */
static void batch_commit(size_t len, size_t hl, const struct sockaddr *to,
			 socklen_t tolen, const struct ip_opt *o)
{
	unsigned int k = tb->n++, m = tb->nm - 1;
	struct msghdr *h;

	tb->iov[k].iov_base = tb->buf[k] + NET_HEAD;
	tb->iov[k].iov_len = len;
	if (tb->nm && (gso_joins(m, k, len, hl, to, tolen, o) ||
		       gso_ahead(m, k, len, hl, to, tolen, o))) {
		unsigned int j; /* its segment's IPv4 identification */

		h = &tb->mm[m].msg_hdr;
		j = (unsigned int)h->msg_iovlen;
		if (tb->seg[m] < len) {
			gso_swap(m, k, len, hl);
		} else {
			if (hl == roce_ip_udp_len(AF_INET))
				roce_icrc_xor(tb->buf[k] + NET_HEAD - hl,
					      hl + len,
					      roce_icrc_id_delta(hl + len, j));
			h->msg_iovlen++;
			tb->bytes[m] += len;
		}
		if (j == 1) /* a GSO run now: UDP_SEGMENT too */
			batch_ctl(m);
	} else {
		m = tb->nm++;
		memcpy(&tb->to[m], to, tolen);
		memset(&tb->mm[m], 0, sizeof(tb->mm[m]));
		h = &tb->mm[m].msg_hdr;
		h->msg_name = &tb->to[m];
		h->msg_namelen = tolen;
		h->msg_iov = &tb->iov[k];
		h->msg_iovlen = 1;
		tb->o[m] = *o;
		batch_ctl(m);
		tb->seg[m] = (uint16_t)len;
		tb->hl[m] = (uint16_t)hl;
		tb->bytes[m] = len;
	}
	if (tb->n == NET_BATCH)
		batch_flush();
}

static void wire_send(int fd, const void *buf, size_t len,
		      const struct sockaddr *to, socklen_t tolen,
		      const struct ip_opt *o)
{
	static uint8_t bad[NET_BUF]; /* soft_flt_mtx */
	int dup = 0, hold = 0;

	if (flt_state() < 0) {
		pthread_mutex_lock(&soft_flt_mtx);
		if (flt_state() < 0)
			flt_init();
		pthread_mutex_unlock(&soft_flt_mtx);
	}
	if (!flt_state()) {
		raw_send_ip(fd, buf, len, to, tolen, o);
		return;
	}
	pthread_mutex_lock(&soft_flt_mtx);
	if (flt_rdlast_hit(buf, len) || flt_atmack_hit(buf, len) ||
	    flt_rand() < flt_drop)
		goto out;
	if (len > ROCE_BTH_LEN && len <= sizeof(bad) &&
	    flt_rand() < flt_corrupt) {
		/* a bit flipped past the BTH (its resv8a byte is outside
		 * the ICRC): the receiver must drop it, a loss */
		size_t at = ROCE_BTH_LEN +
			    (size_t)(flt_rand() * (double)(len - ROCE_BTH_LEN));

		memcpy(bad, buf, len);
		bad[at < len ? at : len - 1] ^= (uint8_t)(1u << (at % 8));
		raw_send_ip(fd, bad, len, to, tolen, o);
		goto out;
	}
	dup = flt_rand() < flt_dup;
	hold = !flt_held_len && len <= sizeof(flt_held) &&
	       flt_rand() < flt_reorder;
	if (hold) {
		memcpy(flt_held, buf, len);
		flt_held_len = len;
		flt_held_fd = fd;
		memcpy(&flt_held_to, to, tolen);
		flt_held_tolen = tolen;
		memset(&flt_held_o, 0, sizeof(flt_held_o));
		if (o)
			flt_held_o = *o;
		flt_held_gen++;
		goto out;
	}
	raw_send_ip(fd, buf, len, to, tolen, o);
	if (dup)
		raw_send_ip(fd, buf, len, to, tolen, o);
	if (flt_held_len) { /* the held one now comes after this one */
		raw_send_ip(flt_held_fd, flt_held, flt_held_len,
			    (struct sockaddr *)&flt_held_to, flt_held_tolen,
			    &flt_held_o);
		flt_held_len = 0;
	}
out:
	pthread_mutex_unlock(&soft_flt_mtx);
}

/*
 * flt_release -- a packet held for reordering that nothing has followed
 * since the last call (the receive thread's pass, every 50 ms at most)
 * goes out now: a network reorders, it does not keep a packet for good.
 * Held until the next send, the last packet of a burst was lost, such as
 * a responder's one NAK before its QP goes to ERR.
 */
static void flt_release(void)
{
	static uint64_t seen;

	if (flt_state() <= 0)
		return;
	pthread_mutex_lock(&soft_flt_mtx);
	if (flt_held_len && flt_held_gen == seen) {
		raw_send_ip(flt_held_fd, flt_held, flt_held_len,
			    (struct sockaddr *)&flt_held_to, flt_held_tolen,
			    &flt_held_o);
		flt_held_len = 0;
	}
	seen = flt_held_gen;
	pthread_mutex_unlock(&soft_flt_mtx);
}

/* ---------------------------------------------------------------- */
/* the sending side of one packet */

static int udp_open(int family, uint16_t *port)
{
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int v = family == AF_INET ? IP_PMTUDISC_DO : IPV6_PMTUDISC_DO, off = 0;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (fd < 0)
		return -1;
	soft_big_buffers(fd);
	/* GSO sends (batch_commit) where the kernel knows them (Linux 4.18) */
	if (setsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &off, sizeof(off)))
		atomic_store(&net_gso, 0);
	else if (atomic_load(&net_gso) < 0)
		atomic_store(&net_gso, soft_gso_enabled());
	if (family == AF_INET) {
		(void)setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v,
				 sizeof(v));
		/* our host's group members have their copy through shm */
		(void)setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &off,
				 sizeof(off));
	} else {
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v,
				 sizeof(v));
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &off,
				 sizeof(off));
		/* the flow label is the QP's or AH's, 0 included (mlx5), not
		 * one the kernel hashes from the addresses and ports */
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, &off,
				 sizeof(off));
	}
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)family;
	if (bind(fd, (struct sockaddr *)&ss,
		 family == AF_INET ? sizeof(struct sockaddr_in)
				   : sizeof(struct sockaddr_in6)) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		close(fd);
		return -1;
	}
	*port = ntohs(family == AF_INET
			      ? ((struct sockaddr_in *)&ss)->sin_port
			      : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static void pkt_send(struct soft_net_qp *nq, struct roce_pkt *p)
{
	uint8_t own[NET_BUF], *buf;
	size_t hl = roce_ip_udp_len(nq->family);
	int fd = nq->family == AF_INET ? udp4 : udp6;
	struct sockaddr_storage to;
	socklen_t tolen;
	struct roce_ip ip;
	ssize_t n;

	memset(&to, 0, sizeof(to));
	if (nq->family == AF_INET) {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&to;

		a4->sin_family = AF_INET;
		a4->sin_port = htons(ROCE_UDP_PORT);
		memcpy(&a4->sin_addr, nq->dst, 4);
		tolen = sizeof(*a4);
	} else {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&to;

		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(ROCE_UDP_PORT);
		memcpy(&a6->sin6_addr, nq->dst, 16);
		tolen = sizeof(*a6);
	}
	p->bth.pkey = ROCE_DEFAULT_PKEY;
	p->bth.dqpn = nq->dqpn;
	/* IB mode: MigReq says "migrated" (apm.c) */
	p->bth.migreq = soft_link_ib && soft_apm_migreq(nq->qp);
	/* made where it is sent from: the batch's next slot, or here */
	buf = batch_slot(fd);
	if (!buf)
		buf = own;
	n = roce_encode(p, buf + NET_HEAD, NET_BUF - NET_HEAD);
	if (n < 0)
		return;
	memset(&ip, 0, sizeof(ip));
	ip.family = nq->family;
	memcpy(ip.src, nq->src, 16);
	memcpy(ip.dst, nq->dst, 16);
	ip.sport = nq->family == AF_INET ? sport4 : sport6;
	ip.dport = ROCE_UDP_PORT;
	ip.ttl = 64;
	if (roce_ip_udp_hdr(&ip, buf + NET_HEAD - hl, hl + (size_t)n,
			    (size_t)n) != (ssize_t)hl ||
	    roce_icrc_set(buf + NET_HEAD - hl, hl + (size_t)n))
		return;
	if (buf != own)
		batch_commit((size_t)n, hl, (struct sockaddr *)&to, tolen,
			     &nq->ip);
	else
		wire_send(fd, buf + NET_HEAD, (size_t)n, (struct sockaddr *)&to,
			  tolen, &nq->ip);
}

static void send_ack(struct soft_net_qp *nq, uint8_t syndrome, uint32_t psn)
{
	struct roce_pkt p;

	nq->ack_due = 0; /* this one says as much: it is later, or a NAK */
	if (nq->ack_held) {
		atomic_store_explicit(&nq->ack_held, 0, memory_order_relaxed);
		atomic_fetch_sub(&acks_held, 1);
	}
	memset(&p, 0, sizeof(p));
	p.bth.opcode = nq->base | ROCE_ACK;
	p.bth.psn = psn & ROCE_PSN_MASK;
	p.aeth.syndrome = syndrome;
	p.aeth.msn = nq->msn & ROCE_PSN_MASK;
	pkt_send(nq, &p);
}

/*
 * ack_later -- an ACK of PSN is owed: sent by ack_flush once the packets
 * taken in together have run, so a burst of requests is acknowledged
 * once, by its last (coalesced ACKs, as the transport allows: an ACK
 * acknowledges every PSN up to its own); a NAK, a READ response or an
 * atomic ACK sent meanwhile goes after it
 */
static void ack_later(struct soft_net_qp *nq, uint32_t psn)
{
	nq->ack_due = 1;
	nq->ack_psn = psn;
}

static void ack_flush(struct soft_net_qp *nq)
{
	if (nq->ack_due)
		send_ack(nq, ROCE_AETH_ACK | 0x1f, nq->ack_psn);
}

static void net_kick(void);

/*
 * ack_hold -- the ACK a run of an application's poll owes waits for what
 * the application sends next on the QP, and leaves with it, first, in
 * one sendmmsg (soft_net_post_send): in a ping-pong a system call less
 * per message each way, as an HCA that coalesces ACKs.  It waits at
 * most until the application's next poll NET_ACK_HOLD_NS later, its
 * arming a CQ to sleep (soft_net_sleeping), the QP's release, exit()
 * (net_fini), or our thread's timers (a millisecond at most while a
 * poller polls).  Not for the progress thread's runs: nobody sends after
 * them.
 */
static void ack_hold(struct soft_net_qp *nq, uint64_t now)
{
	int i, n = 0;

	if (!nq->ack_due || nq->ack_held)
		return;
	/* listed once (stale entries dropped), or not held at all when the
	 * list is full: flushed with the run's batch */
	for (i = 0; i < held_n; i++)
		if (held_nq[i] != nq && held_nq[i]->ack_held)
			held_nq[n++] = held_nq[i];
	held_n = n;
	if (held_n == NET_HELD) {
		ack_flush(nq);
		return;
	}
	held_nq[held_n++] = nq;
	atomic_store_explicit(&nq->ack_held, now, memory_order_relaxed);
	atomic_fetch_add(&acks_held, 1);
	if (atomic_load(&thr_long) && atomic_exchange(&thr_long, 0))
		net_kick(); /* once per poll gap: a steady poller's thread
			     * naps a millisecond at most */
}

/* held_for -- NQ's ACK has been held NS by NOW (held after NOW: no) */
static int held_for(const struct soft_net_qp *nq, uint64_t now, uint64_t ns)
{
	uint64_t h = atomic_load_explicit(&nq->ack_held, memory_order_relaxed);

	return h && h + ns <= now;
}

/*
 * acks_aged -- once one of the ACKs our polls hold for CTX's QPs has
 * waited NET_ACK_HOLD_NS, it leaves with all those held half as long, in
 * one sendmmsg: a passive receiver of several QPs (nothing of theirs to
 * send) made a sendto per QP and hold, from each QP's nq_run.  Sent a
 * little early, an ACK only loses its ride with a send.  CTX's lock and
 * soft_net_mtx held.
 */
static void acks_aged(struct soft_context *ctx, uint64_t now)
{
	int i, n = 0, due = 0;

	for (i = 0; i < held_n; i++)
		due |= held_nq[i]->ctx == ctx &&
		       held_for(held_nq[i], now, NET_ACK_HOLD_NS);
	if (!due)
		return;
	batch_begin();
	for (i = 0; i < held_n; i++) {
		if (held_nq[i]->ctx == ctx &&
		    held_for(held_nq[i], now, NET_ACK_HOLD_NS / 2))
			ack_flush(held_nq[i]);
		if (held_nq[i]->ack_held)
			held_nq[n++] = held_nq[i];
	}
	held_n = n;
	batch_end();
}

/* ack_flush_aged -- ack_flush, unless the ACK is held and young (held
 * after NOW, as by a run after the poll read its clock: young) */
static void ack_flush_aged(struct soft_net_qp *nq, uint64_t now)
{
	if (nq->ack_held && !held_for(nq, now, NET_ACK_HOLD_NS))
		return;
	ack_flush(nq);
}

/* ---------------------------------------------------------------- */
/* helpers */

/* iov_at -- the LEN bytes at OFF of IOV: in place when they lie in one
 * piece, else copied into SCRATCH */
static const uint8_t *iov_at(const struct iovec *iov, uint32_t niov,
			     uint64_t off, uint64_t len, uint8_t *scratch)
{
	uint32_t i;

	for (i = 0; i < niov && off >= iov[i].iov_len; i++)
		off -= iov[i].iov_len;
	if (i < niov && iov[i].iov_len - off >= len)
		return (const uint8_t *)iov[i].iov_base + off;
	soft_iov_gather(iov + i, niov - i, off, scratch, len);
	return scratch;
}

static uint64_t qp_timeout_ns(struct soft_qp *qp)
{
	uint64_t t = roce_timeout_ns(qp->attr.timeout);

	return t ? t : UINT64_MAX / 4; /* 0: wait forever */
}

/* ---------------------------------------------------------------- */
/* requester */

static uint8_t req_op_only(const struct net_swqe *w)
{
	switch (w->op) {
	case IBV_WR_SEND:
		return ROCE_SEND_ONLY;
	case IBV_WR_SEND_WITH_IMM:
		return ROCE_SEND_ONLY_IMM;
	case IBV_WR_SEND_WITH_INV:
		return ROCE_SEND_ONLY_INV;
	case IBV_WR_RDMA_WRITE:
		return ROCE_WRITE_ONLY;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return ROCE_WRITE_ONLY_IMM;
	default:
		return 0xff; /* no such opcode: roce_seg_opcode refuses it */
	}
}

/* tx_one -- packet txp of WQE w; 0 sent, -1 window closed */
static void tx_one(struct soft_net_qp *nq, struct net_swqe *w, uint32_t k)
{
	uint8_t data[ROCE_MAX_PMTU];
	struct roce_pkt p;
	uint32_t seg;
	int op;

	memset(&p, 0, sizeof(p));
	p.bth.psn = roce_psn_add(w->psn, k);
	p.xrc_srqn = w->srqn; /* sent by an XRC initiator only */
	if (w->op == IBV_WR_RDMA_READ) {
		uint64_t off = (uint64_t)k * nq->pmtu;

		p.bth.opcode = nq->base | ROCE_READ_REQ;
		p.bth.ackreq = 1;
		p.reth.va = w->raddr + off;
		p.reth.rkey = w->rkey;
		p.reth.len = (uint32_t)(w->len - off);
		pkt_send(nq, &p);
		return;
	}
	if (w->op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		p.bth.opcode = nq->base | (w->op == IBV_WR_ATOMIC_CMP_AND_SWP
						   ? ROCE_CMP_SWAP
						   : ROCE_FETCH_ADD);
		p.bth.ackreq = 1;
		p.atmeth.va = w->raddr;
		p.atmeth.rkey = w->rkey;
		p.atmeth.swap_add = w->swap;
		p.atmeth.compare = w->cmp;
		pkt_send(nq, &p);
		return;
	}
	if (w->op == IBV_WR_ATOMIC_WRITE) {
		/* RETH and the 8 bytes taken at post (w->swap) */
		p.bth.opcode = ROCE_RC | ROCE_ATOMIC_WRITE;
		p.bth.ackreq = 1;
		p.reth.va = w->raddr;
		p.reth.rkey = w->rkey;
		p.reth.len = 8;
		p.payload = (const uint8_t *)&w->swap;
		p.payload_len = 8;
		pkt_send(nq, &p);
		return;
	}
	op = roce_seg_opcode((uint8_t)(nq->base | req_op_only(w)), k, w->npkts);
	if (op < 0)
		return;
	p.bth.opcode = (uint8_t)op;
	seg = roce_seg_len(w->len, nq->pmtu, k);
	p.payload = w->inl ? w->inl + (uint64_t)k * nq->pmtu
			   : iov_at(w->iov, w->niov, (uint64_t)k * nq->pmtu,
				    seg, data);
	p.payload_len = seg;
	p.bth.ackreq = k + 1 == w->npkts || (k + 1) % NET_ACK_EVERY == 0;
	p.bth.se = k + 1 == w->npkts && w->se;
	p.imm = w->imm;
	p.ieth = w->inv;
	if (k == 0) {
		p.reth.va = w->raddr;
		p.reth.rkey = w->rkey;
		p.reth.len = w->len;
	}
	pkt_send(nq, &p);
}

/* fenced -- WQE number I is fenced (IBV_SEND_FENCE) and a READ or an
 * atomic before it still waits for its response: not sent yet (the IB
 * spec's fence, so that it may carry or depend on what they fetched);
 * once they are answered the fence is met for good (responses are not
 * taken back) */
static int fenced(struct soft_net_qp *nq, uint64_t i)
{
	struct net_swqe *w = &nq->sq[i % nq->sq_n];
	uint64_t j;

	if (!w->fence)
		return 0;
	for (j = nq->tail; j < i; j++) {
		const struct net_swqe *b = &nq->sq[j % nq->sq_n];

		if (soft_op_rd_atomic(b->op) && !b->done && !b->status)
			return 1;
	}
	w->fence = 0;
	return 0;
}

/*
 * rd_take -- W, a READ or an atomic (an atomic write too) about to be sent
 * for the first time, takes one of the QP's max_rd_atomic until it
 * completes (complete_wqe); -1 when that many are outstanding: it waits,
 * and the send queue behind it (rxe_req.c's check_init_depth: the WQE is
 * not begun, and the requester stops at it).  max_rd_atomic 0 lets none
 * go, as in rxe (rxe_qp.c sets req.rd_atomic to 0, which check_init_depth
 * never passes): it waits until the QP is given more (SQD, then RTS).
 */
static int __attribute__((noinline))
rd_take(struct soft_net_qp *nq, struct net_swqe *w)
{
	if (nq->rd_out >= nq->qp->attr.max_rd_atomic)
		return -1;
	nq->rd_out++;
	w->rd_held = 1;
	return 0;
}

/* tx_push -- send what the window and the RNR wait allow; lock held */
static void tx_push(struct soft_net_qp *nq)
{
	uint64_t now = 0;

	if (nq->qp->state == IBV_QPS_ERR)
		return;
	if (nq->rnr_until) {
		now = soft_now_ns();
		if (now < nq->rnr_until)
			return;
		nq->rnr_until = 0;
	}
	batch_begin();
	while (nq->txw < nq->head) {
		struct net_swqe *w = &nq->sq[nq->txw % nq->sq_n];
		uint32_t count = soft_op_rd_atomic(w->op) ? 1 : w->npkts;
		uint32_t k = nq->txp;

		if (w->status)
			break; /* it ends the QP when it reaches the tail */
		if (w->done) {
			nq->txw++;
			nq->txp = 0;
			continue;
		}
		/* SQD: the messages begun go on, no new one starts */
		if (nq->txw >= nq->started && nq->qp->state == IBV_QPS_SQD)
			break;
		if (fenced(nq, nq->txw))
			break;
		if (soft_op_rd_atomic(w->op) && !w->rd_held && rd_take(nq, w))
			break;
		if (w->op == IBV_WR_RDMA_READ)
			k = w->got; /* what is missing of it */
		/* behind una (a READ answered out of order): inside */
		if (roce_psn_cmp(roce_psn_add(w->psn, k), nq->una) >=
		    NET_WINDOW)
			break;
		tx_one(nq, w, k);
		if (nq->started <= nq->txw)
			nq->started = nq->txw + 1;
		if (!nq->timer_at) {
			if (!now)
				now = soft_now_ns();
			nq->timer_at = now + qp_timeout_ns(nq->qp);
		}
		if (++nq->txp >= count) {
			nq->txw++;
			nq->txp = 0;
		}
	}
	batch_end();
}

/* complete_wqe -- the WQE at the tail is finished with STATUS */
static void complete_wqe(struct soft_net_qp *nq, enum ibv_wc_status status)
{
	struct net_swqe *w = &nq->sq[nq->tail % nq->sq_n];
	struct ibv_wc wc;

	nq->tail++;
	if (w->rd_held) { /* one more READ or atomic may go (tx_push) */
		w->rd_held = 0;
		nq->rd_out--;
	}
	if (w->inl_own)
		free(w->inl);
	else if (w->inl_end)
		nq->inl_tail = w->inl_end; /* its room is free */
	w->inl = NULL;
	w->inl_own = 0;
	if (nq->txw < nq->tail) {
		nq->txw = nq->tail;
		nq->txp = 0;
	}
	if (status == IBV_WC_SUCCESS && !w->signaled)
		return;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = status;
	wc.opcode = soft_wc_opcode((enum ibv_wr_opcode)w->op);
	wc.byte_len = w->len;
	wc.qp_num = nq->qpn;
	soft_cq_push(nq->qp->scq, &wc, 0);
}

/* fail -- the tail WQE ends with STATUS, the QP goes to ERR, the rest
 * flushes */
static void fail(struct soft_net_qp *nq, enum ibv_wc_status status)
{
	if (nq->tail < nq->head)
		complete_wqe(nq, status);
	soft_qp_to_error(nq->qp);
	while (nq->tail < nq->head)
		complete_wqe(nq, IBV_WC_WR_FLUSH_ERR);
	nq->timer_at = 0;
	nq->rnr_until = 0;
}

/* acked -- every packet up to PSN is acknowledged: complete in order */
static void acked(struct soft_net_qp *nq, uint32_t psn)
{
	while (nq->tail < nq->head) {
		struct net_swqe *w = &nq->sq[nq->tail % nq->sq_n];
		uint32_t last = roce_psn_add(w->psn, w->npkts - 1);

		if (w->status) {
			fail(nq, (enum ibv_wc_status)w->status);
			return;
		}
		/* an atomic write returns no data: an ACK of a later PSN
		 * completes it, as rxe's check_psn completes a WQE that is
		 * not a READ or an atomic */
		if (soft_op_rd_atomic(w->op) && w->op != IBV_WR_ATOMIC_WRITE &&
		    !w->done) {
			/* its last PSN acknowledged (a response to a later
			 * request, or an ACK of it or past it: rxe's
			 * check_psn, a response PSN past the WQE's last) */
			if (roce_psn_cmp(last, psn) <= 0 &&
			    nq->txw > nq->tail) {
				/* later requests were answered, this one's
				 * response was lost: ask again */
				nq->txw = nq->tail;
				nq->txp = 0;
			}
			break;
		}
		if (!w->done && roce_psn_cmp(last, psn) > 0)
			break;
		complete_wqe(nq, IBV_WC_SUCCESS);
	}
	if (roce_psn_cmp(roce_psn_add(psn, 1), nq->una) > 0)
		nq->una = roce_psn_add(psn, 1);
	/* SQD: SQ_DRAINED as the last message begun completes, from
	 * whichever thread took its ACK in */
	if (nq->qp->sqd_notify)
		soft_sqd_check(nq->qp);
}

/* rewind -- go back to PSN (go-back-N), or to an older READ or atomic
 * whose response is still missing: una passes it once a later request is
 * acknowledged (acked), and a timeout or a NAK resuming at una or past it
 * must ask for that response again, not skip it (the WQE would never
 * complete and the retries run out) */
static void rewind_to(struct soft_net_qp *nq, uint32_t psn)
{
	uint64_t i;

	for (i = nq->tail; i < nq->head; i++) {
		struct net_swqe *w = &nq->sq[i % nq->sq_n];
		int32_t d = roce_psn_cmp(psn, w->psn);

		if (w->status)
			continue;
		if ((d >= 0 && (uint32_t)d < w->npkts) ||
		    (d > 0 && soft_op_rd_atomic(w->op) && !w->done)) {
			nq->txw = i;
			nq->txp = soft_op_rd_atomic(w->op) ? 0 : (uint32_t)d;
			return;
		}
	}
	nq->txw = nq->tail;
	nq->txp = 0;
}

static void progress_made(struct soft_net_qp *nq)
{
	nq->retries = 0;
	nq->late = 0;
	nq->timer_at =
		nq->tail < nq->head ? soft_now_ns() + qp_timeout_ns(nq->qp) : 0;
}

static enum ibv_wc_status nak_status(uint8_t v)
{
	switch (v) {
	case ROCE_NAK_REMOTE_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	case ROCE_NAK_REMOTE_OP:
		return IBV_WC_REM_OP_ERR;
	default:
		return IBV_WC_REM_INV_REQ_ERR;
	}
}

/* completer -- a response packet (ACK, READ response, atomic ACK) */
static void completer(struct soft_net_qp *nq, const struct roce_pkt *p)
{
	uint8_t op = p->bth.opcode & 0x1f;
	unsigned int fl = roce_op_flags(p->bth.opcode);
	uint32_t psn = p->bth.psn;
	struct net_swqe *w;

	if (nq->tail == nq->head || roce_psn_cmp(psn, nq->sq_psn) >= 0 ||
	    roce_psn_cmp(psn, nq->sq[nq->tail % nq->sq_n].psn) < 0)
		return; /* nothing of ours: stale or forged */
	if (op == ROCE_ACK) {
		uint8_t t = roce_aeth_type(p->aeth.syndrome);

		if (t == ROCE_AETH_ACK) {
			acked(nq, psn);
			progress_made(nq);
			nq->rnrs = 0;
		} else if (t == ROCE_AETH_RNR_NAK) {
			acked(nq, roce_psn_add(psn, ROCE_PSN_MASK));
			if (nq->qp->attr.rnr_retry != 7 &&
			    ++nq->rnrs > nq->qp->attr.rnr_retry) {
				fail(nq, IBV_WC_RNR_RETRY_EXC_ERR);
				return;
			}
			nq->rnr_until = soft_now_ns() +
					roce_rnr_timer_ns(roce_aeth_value(
						p->aeth.syndrome));
			rewind_to(nq, psn);
			nq->timer_at = 0;
			nq->retries = 0;
			return; /* the thread sends again at rnr_until */
		} else if (t == ROCE_AETH_NAK) {
			uint8_t v = roce_aeth_value(p->aeth.syndrome);

			acked(nq, roce_psn_add(psn, ROCE_PSN_MASK));
			if (v == ROCE_NAK_PSN_SEQ) {
				rewind_to(nq, psn);
				progress_made(nq);
			} else {
				fail(nq, nak_status(v));
				return;
			}
		}
		tx_push(nq);
		return;
	}
	/* READ responses and atomic ACKs answer the oldest such request */
	acked(nq, roce_psn_add(psn, ROCE_PSN_MASK));
	if (nq->tail == nq->head)
		return;
	w = &nq->sq[nq->tail % nq->sq_n];
	if (op == ROCE_ATOMIC_ACK) {
		if (w->done || psn != w->psn ||
		    (w->op != IBV_WR_ATOMIC_CMP_AND_SWP &&
		     w->op != IBV_WR_ATOMIC_FETCH_AND_ADD))
			return;
		{
			uint64_t v = p->atmack;

			soft_iov_scatter(w->iov, w->niov, 0, (uint8_t *)&v, 8);
		}
		w->done = 1;
	} else if ((fl & ROCE_F_PAYLOAD) && w->op == IBV_WR_ATOMIC_WRITE) {
		/* its answer: a zero-length READ_RESP_ONLY at its PSN
		 * (rxe_resp.c's send_read_response_ack, rxe_comp.c's
		 * check_ack) */
		if (w->done || psn != w->psn)
			return;
		if (op != ROCE_READ_RESP_ONLY || p->payload_len ||
		    roce_aeth_type(p->aeth.syndrome) != ROCE_AETH_ACK) {
			fail(nq, IBV_WC_BAD_RESP_ERR);
			return;
		}
		w->done = 1;
	} else if (fl & ROCE_F_PAYLOAD) { /* READ_RESP_* */
		uint64_t off;

		if (w->op != IBV_WR_RDMA_READ || w->done)
			return;
		if (psn != roce_psn_add(w->psn, w->got)) {
			/* a gap: ask for the rest from it (the responder
			 * stops the old stream there); again at the same
			 * place when a new stream came without it (its first
			 * packet lost too: the places went back) or when
			 * many more came past it than the last time (our
			 * request was lost), not waiting for the timer */
			uint32_t at = (uint32_t)roce_psn_cmp(psn, w->psn);
			int again;

			if (roce_psn_cmp(psn, roce_psn_add(w->psn, w->got)) <=
			    0)
				return;
			if (w->rereq != w->got + 1) {
				again = 1;
				w->ooo_max = NET_OOO_MIN;
			} else if ((w->ooo_last && at < w->ooo_last) ||
				   ++w->ooo >= w->ooo_max) {
				again = 1;
				if (w->ooo_max < NET_OOO_MAX)
					w->ooo_max *= 2;
			} else {
				again = 0;
			}
			w->ooo_last = at;
			if (again) {
				w->rereq = w->got + 1;
				w->ooo = 0;
				rewind_to(nq, w->psn);
				tx_push(nq);
			}
			return;
		}
		off = (uint64_t)w->got * nq->pmtu;
		if (p->payload_len != roce_seg_len(w->len, nq->pmtu, w->got) ||
		    ((fl & ROCE_F_LAST) != 0) != (w->got + 1 == w->npkts)) {
			fail(nq, IBV_WC_BAD_RESP_ERR);
			return;
		}
		soft_iov_scatter(w->iov, w->niov, off, p->payload,
				 p->payload_len);
		w->got++;
		w->ooo_last = 0;
		nq->retries = 0;
		nq->late = 0;
		if (w->got < w->npkts) {
			nq->timer_at = soft_now_ns() + qp_timeout_ns(nq->qp);
			return;
		}
		w->done = 1;
	} else {
		return;
	}
	acked(nq, roce_psn_add(w->psn, w->npkts - 1));
	progress_made(nq);
	tx_push(nq);
}

/* ---------------------------------------------------------------- */
/* responder */

/* resp_pd -- the PD whose keys serve the request in hand: the QP's, or an
 * XRC target's SRQ's (nq->xsrq, set by responder and resp_burst while
 * they run: the target has none of its own) */
static const struct soft_pd *resp_pd(const struct soft_net_qp *nq)
{
	return nq->xsrq ? nq->xsrq->pd : nq->qp->pd;
}

/* rkey_va -- the local address of [va, va+len) under RKEY with NEED, an
 * MR's or a window's, checked as on one host (mw.c); stripe lock held on
 * success */
static uint8_t *rkey_va(struct soft_net_qp *nq, uint32_t rkey, uint64_t va,
			uint64_t len, uint32_t need, pthread_mutex_t **lk)
{
	uint8_t *p;

	return soft_rkey_target(nq->qp, resp_pd(nq), rkey, va, len, need, &p,
				lk)
		       ? NULL
		       : p;
}

/*
 * resp_mem -- LEN bytes at VA under RKEY with access NEED: BUF's bytes
 * written into them (WRITE), theirs read into BUF, or, BUF NULL, only
 * checked; an MR's or a window's of this process (rkey_va), or, for an
 * XRC target whose SRQ is another process's or context's (nq->xfor), an
 * MR of that SRQ's owner and PD (its registry entry, dc.c
 * soft_remote_move) on a target with the access.  0, or -1: refused
 * (NAK remote access error).
 */
static int resp_mem(struct soft_net_qp *nq, uint32_t rkey, uint64_t va,
		    uint64_t len, uint32_t need, int write, void *buf)
{
	const struct soft_srq_ref *x = &nq->xref;
	pthread_mutex_t *lk;
	uint8_t *p;

	if (nq->xfor)
		return (nq->qp->attr.qp_access_flags & need) &&
				       !soft_remote_move(x->pid, x->start,
							 x->pd_id, rkey, va,
							 len, need, write, buf)
			       ? 0
			       : -1;
	p = rkey_va(nq, rkey, va, len, need, &lk);
	if (!p)
		return -1;
	if (buf && write)
		memcpy(p, buf, len);
	else if (buf)
		memcpy(buf, p, len);
	pthread_mutex_unlock(lk);
	return 0;
}

/*
 * xsrq_find -- an XRC target's SRQ number SRQN: the XRC SRQ of its
 * domain in its context (*srq), or, of another process or context of
 * this host, mapped (nq->xref, *srq NULL: its WQEs taken, its data placed
 * and its completions left in its segment, as a same-host initiator does
 * them, dc.c); 0, or ROCE_NAK_INVALID_REQ for a number no SRQ of its
 * domain has (the target NAKs an invalid request: IBA 9.7.5.2.9).  The
 * mapping of an SRQ holding a WQE of ours stays for that WQE: another
 * number is refused meanwhile (a message does not change SRQ).
 */
static int xsrq_find(struct soft_net_qp *nq, uint32_t srqn,
		     struct soft_srq **srq)
{
	const struct soft_xrcd *x = nq->qp->xrcd;
	struct soft_list *l;
	uint32_t c, id;

	*srq = NULL;
	if (soft_xrc_srq_target(srqn, &c, &id) || !x)
		return ROCE_NAK_INVALID_REQ;
	if (c != (uint32_t)nq->ctx->reg_idx) {
		if (nq->xref.sh && nq->xref.srqn == srqn &&
		    (nq->held_for || soft_xsrq_ok(&nq->xref, x->id)))
			return 0;
		if (nq->held_for)
			return ROCE_NAK_INVALID_REQ;
		soft_srq_ref_unmap(&nq->xref);
		return soft_xsrq_map(srqn, x->id, &nq->xref)
			       ? ROCE_NAK_INVALID_REQ
			       : 0;
	}
	for (l = nq->ctx->srqs.next; l != &nq->ctx->srqs; l = l->next) {
		struct soft_srq *s =
			soft_container_of(l, struct soft_srq, link);

		if (!s->xcq || s->xsrqn != srqn)
			continue;
		if (!s->shm || !s->shm->xrcd_id || s->shm->xrcd_id != x->id)
			return ROCE_NAK_INVALID_REQ;
		*srq = s;
		return 0;
	}
	return ROCE_NAK_INVALID_REQ;
}

/* hold_stop -- tests/netns/xrc-hosts.sh: the process stops once it holds
 * another process's WQE (SOFTRDMA_TEST_HOLD_STOP=1), the hold left for
 * its owner to find (and flush once this process is killed) */
static void hold_stop(void)
{
	static _Atomic int stop = -1;

	if (soft_env_flag(&stop, "SOFTRDMA_TEST_HOLD_STOP")) {
		atomic_store(&stop, 0);
		raise(SIGSTOP);
	}
}

/* resp_wqe -- the receive WQE of the message in progress: on an SRQ,
 * taken from it at the message's first packet and held by the QP until
 * the message completes (other QPs share the SRQ); NULL: none posted, or
 * (nq->xbad set) another process's XRC SRQ whose ring is corrupt
 * (resp_no_wqe) */
static struct soft_rwqe *resp_wqe(struct soft_net_qp *nq)
{
	struct soft_qp *qp = nq->qp;
	struct soft_srq *srq = nq->xsrq ? nq->xsrq : qp->srq;

	nq->xbad = 0;
	if (nq->xfor) { /* another process's XRC SRQ */
		if (!nq->srq_held) {
			int r = soft_xsrq_hold(&nq->xref, nq->qpn, nq->dqpn,
					       &nq->srq_wqe, &nq->held_idx);

			nq->xbad = r < 0;
			if (!r) {
				nq->srq_held = nq->held_for = 1;
				hold_stop();
			}
		}
		return nq->srq_held ? &nq->srq_wqe : NULL;
	}
	if (srq) {
		if (!nq->srq_held && !soft_srq_take(srq, &nq->srq_wqe))
			nq->srq_held = 1;
		return nq->srq_held ? &nq->srq_wqe : NULL;
	}
	return qp->rq_head == qp->rq_tail
		       ? NULL
		       : &qp->rq[qp->rq_tail & (qp->rq_size - 1)];
}

static void resp_take_wqe(struct soft_net_qp *nq)
{
	struct soft_qp *qp = nq->qp;

	if (qp->srq || nq->xsrq || nq->held_for) {
		nq->srq_held = 0;
		return;
	}
	qp->rq_tail++;
	if (qp->rq_shm)
		atomic_store_explicit(&qp->seg->rq_cons, qp->rq_tail,
				      memory_order_release);
}

/* resp_err -- a request we cannot execute: NAK, responder QP to ERR, and
 * the affiliated error the IB spec names for it (11.6.3): an rkey, range
 * or access violation is a local access violation work queue error
 * (IBV_EVENT_QP_ACCESS_ERR, mlx5's WQ_ACCESS_ERROR), a remote operational
 * error (a WQE that cannot be fetched) a local work queue catastrophic
 * error (IBV_EVENT_QP_FATAL, mlx5's WQ_CATAS_ERROR), anything else an
 * invalid request work queue error (IBV_EVENT_QP_REQ_ERR) */
static void resp_err(struct soft_net_qp *nq, uint8_t nak, uint32_t psn)
{
	send_ack(nq, ROCE_AETH_NAK | nak, psn);
	soft_async_event(nq->ctx,
			 nak == ROCE_NAK_REMOTE_ACCESS ? IBV_EVENT_QP_ACCESS_ERR
			 : nak == ROCE_NAK_REMOTE_OP   ? IBV_EVENT_QP_FATAL
						       : IBV_EVENT_QP_REQ_ERR,
			 &nq->qp->qpx.qp_base);
	soft_qp_to_error(nq->qp);
}

/* resp_no_wqe -- resp_wqe found no WQE for the request at psn: an RNR
 * NAK (receiver not ready), or, for an SRQ of another process whose ring
 * is corrupt (a WQE count or an SGE count out of bounds), what an HCA
 * that cannot fetch the WQE does: a remote operational error (resp_err:
 * the initiator's IBV_WC_REM_OP_ERR, the target in ERR) */
static void resp_no_wqe(struct soft_net_qp *nq, uint32_t psn)
{
	if (nq->xbad)
		resp_err(nq, ROCE_NAK_REMOTE_OP, psn);
	else
		send_ack(nq,
			 ROCE_AETH_RNR_NAK | (nq->qp->attr.min_rnr_timer &
					      ROCE_AETH_VALUE_MASK),
			 psn);
}

/* xfor_place -- resp_place into a WQE of another process's XRC SRQ: each
 * SGE's part through its owner's registry entry (dc.c soft_remote_move:
 * its key, PD, local write, range) */
static int xfor_place(struct soft_net_qp *nq, const struct soft_rwqe *r,
		      uint64_t off, const uint8_t *src, uint32_t len,
		      enum ibv_wc_status *st)
{
	const struct soft_srq_ref *x = &nq->xref;
	uint64_t room = 0, at = 0, end = off + len;
	uint32_t i;

	for (i = 0; i < r->num_sge; i++)
		room += r->sge[i].length;
	if (off > room || len > room - off) {
		*st = IBV_WC_LOC_LEN_ERR;
		return -1;
	}
	for (i = 0; i < r->num_sge && at < end; i++) {
		const struct ibv_sge *g = &r->sge[i];
		uint64_t a = off > at ? off : at;
		uint64_t b = end < at + g->length ? end : at + g->length;

		if (a < b &&
		    soft_remote_move(x->pid, x->start, x->pd_id, g->lkey,
				     g->addr + (a - at), b - a,
				     IBV_ACCESS_LOCAL_WRITE, 1,
				     (void *)(uintptr_t)(src + (a - off)))) {
			*st = IBV_WC_LOC_PROT_ERR;
			return -1;
		}
		at += g->length;
	}
	return 0;
}

/* resp_place -- payload into the receive WQE at offset; 0 or -1 */
static int resp_place(struct soft_net_qp *nq, struct soft_rwqe *r, uint64_t off,
		      const uint8_t *src, uint32_t len, enum ibv_wc_status *st)
{
	struct iovec iov[SOFT_MAX_SGE];
	uint64_t room = 0;
	uint32_t i;

	if (nq->held_for)
		return xfor_place(nq, r, off, src, len, st);
	for (i = 0; i < r->num_sge; i++) {
		room += r->sge[i].length;
		if (soft_local_sge(resp_pd(nq), &r->sge[i],
				   IBV_ACCESS_LOCAL_WRITE, &iov[i])) {
			*st = IBV_WC_LOC_PROT_ERR;
			return -1;
		}
	}
	if (off > room || len > room - off) {
		*st = IBV_WC_LOC_LEN_ERR;
		return -1;
	}
	soft_iov_scatter(iov, r->num_sge, off, src, len);
	return 0;
}

/* resp_complete -- a receive completion of the QP, its WQE taken: an XRC
 * target's on its SRQ's CQ (another process's SRQ: its outbox entry,
 * HELD until now), else on the QP's */
static void resp_complete(struct soft_net_qp *nq, struct ibv_wc *wc,
			  int solicited)
{
	if (nq->held_for) {
		soft_xsrq_release(&nq->xref, nq->held_idx, wc, solicited);
		nq->held_for = 0;
		return;
	}
	soft_cq_push(nq->xsrq ? nq->xsrq->xcq : nq->qp->rcq, wc, solicited);
}

/* held_flush -- the SRQ's WQE the message under way took completes
 * flushed: an XRC target's on its SRQ's CQ, if still there (another
 * process's: its outbox entry, no longer HELD) */
static void held_flush(struct soft_net_qp *nq)
{
	struct soft_srq *srq = NULL;
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = nq->srq_wqe.wr_id;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.qp_num = nq->qpn;
	nq->srq_held = 0;
	if (nq->held_for)
		resp_complete(nq, &wc, 0);
	else if (nq->base != ROCE_XRC)
		soft_cq_push(nq->qp->rcq, &wc, 0);
	else if (!xsrq_find(nq, nq->xsrqn, &srq) && srq)
		soft_cq_push(srq->xcq, &wc, 0);
}

static void resp_recv_done(struct soft_net_qp *nq, const struct roce_pkt *p,
			   enum ibv_wc_opcode opc, uint32_t len,
			   enum ibv_wc_status st)
{
	struct soft_qp *qp = nq->qp;
	struct soft_rwqe *r = resp_wqe(nq);
	unsigned int fl = roce_op_flags(p->bth.opcode);
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->wr_id;
	wc.status = st;
	wc.opcode = opc;
	wc.byte_len = len;
	wc.qp_num = nq->qpn;
	wc.src_qp = nq->dqpn;
	if (st == IBV_WC_SUCCESS && (fl & ROCE_F_IMMDT)) {
		wc.imm_data = htonl(p->imm);
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	if (st == IBV_WC_SUCCESS && (fl & ROCE_F_IETH)) {
		wc.invalidated_rkey = p->ieth;
		wc.wc_flags |= IBV_WC_WITH_INV;
	}
	resp_take_wqe(nq);
	resp_complete(nq, &wc, p->bth.se);
	if (st != IBV_WC_SUCCESS)
		soft_qp_to_error(qp);
}

/*
 * resp_read -- answer READ request p: its range checked whole, then its
 * response sent NET_RD_BURST packets at a time (resp_pump), with what came
 * in looked at between bursts.  A READ request repeated while a response
 * is under way (the requester asking again from a lost packet) replaces
 * it: the response restarts at the PSN asked for and the rest of the old
 * stream is never sent (rxe_resp.c, duplicate_request: a duplicate READ
 * replays from its own PSN, va and length).  Without that, each loss
 * cost the whole rest of the message again.
 */
static void resp_read(struct soft_net_qp *nq, const struct roce_pkt *p)
{
	ack_flush(nq); /* what came before, acknowledged first */
	nq->rs_active = 0;
	if (p->reth.len && resp_mem(nq, p->reth.rkey, p->reth.va, p->reth.len,
				    IBV_ACCESS_REMOTE_READ, 0, NULL)) {
		resp_err(nq, ROCE_NAK_REMOTE_ACCESS, p->bth.psn);
		return;
	}
	nq->rs_active = 1;
	nq->rs_psn = p->bth.psn;
	nq->rs_k = 0;
	nq->rs_n = roce_npkts(p->reth.len, nq->pmtu);
	nq->rs_va = p->reth.va;
	nq->rs_len = p->reth.len;
	nq->rs_rkey = p->reth.rkey;
}

/* resp_burst -- up to NET_RD_BURST packets of the READ response */
static void resp_burst(struct soft_net_qp *nq)
{
	uint8_t data[ROCE_MAX_PMTU];
	struct roce_pkt r;
	int i, xpd = 0;

	if (nq->base == ROCE_XRC && !nq->xsrq && !nq->xfor) {
		/* an XRC target's READ, between bursts: its SRQ's PD (or
		 * another process's SRQ's owner and PD), if the SRQ is
		 * still there */
		struct soft_srq *srq = NULL;

		if (xsrq_find(nq, nq->xsrqn, &srq)) {
			nq->rs_active = 0;
			resp_err(nq, ROCE_NAK_REMOTE_ACCESS,
				 roce_psn_add(nq->rs_psn, nq->rs_k));
			return;
		}
		if (srq)
			nq->xsrq = srq;
		else
			nq->xfor = 1;
		xpd = 1;
	}
	batch_begin();
	for (i = 0; i < NET_RD_BURST && nq->rs_active; i++) {
		uint32_t k = nq->rs_k;
		uint32_t seg = roce_seg_len(nq->rs_len, nq->pmtu, k);

		memset(&r, 0, sizeof(r));
		r.bth.opcode = (uint8_t)roce_seg_opcode(
			nq->base | ROCE_READ_RESP_ONLY, k, nq->rs_n);
		r.bth.psn = roce_psn_add(nq->rs_psn, k);
		r.aeth.syndrome = ROCE_AETH_ACK | 0x1f;
		r.aeth.msn = nq->msn & ROCE_PSN_MASK;
		/* checked again with the copy: a dereg, an unbind or an
		 * invalidation waits for it */
		if (seg && resp_mem(nq, nq->rs_rkey,
				    nq->rs_va + (uint64_t)k * nq->pmtu, seg,
				    IBV_ACCESS_REMOTE_READ, 0, data)) {
			nq->rs_active = 0;
			resp_err(nq, ROCE_NAK_REMOTE_ACCESS, r.bth.psn);
			break;
		}
		r.payload = data;
		r.payload_len = seg;
		pkt_send(nq, &r);
		if (++nq->rs_k == nq->rs_n)
			nq->rs_active = 0;
	}
	batch_end();
	if (xpd) {
		nq->xsrq = NULL;
		nq->xfor = 0;
	}
}

static void df_free(struct soft_net_qp *nq)
{
	while (nq->df_head) {
		struct net_pkt *k = nq->df_head;

		nq->df_head = k->next;
		free(k);
	}
	nq->df_tail = NULL;
	nq->df_n = 0;
}

/* resp_defer -- a request that came while a READ response is sent: kept
 * for after it, in order (an ACK for it now would tell the requester the
 * READ was answered); one copy of a retransmitted packet; when too many
 * wait, the requester sends again */
static void resp_defer(struct soft_net_qp *nq, const uint8_t *buf, size_t len)
{
	struct net_pkt *k;

	if (nq->df_n >= NET_DF_MAX)
		return;
	for (k = nq->df_head; k; k = k->next)
		if (k->len == len && !memcmp(k->data, buf, len))
			return;
	k = malloc(sizeof(*k) + len);
	if (!k)
		return;
	k->next = NULL;
	k->len = len;
	memcpy(k->data, buf, len);
	if (nq->df_tail)
		nq->df_tail->next = k;
	else
		nq->df_head = k;
	nq->df_tail = k;
	nq->df_n++;
}

/* resp_replay -- p, a request that came while a READ response is sent, is
 * a repeated READ asking from no later than where that response is: it
 * replaces the response (later ones wait their turn) */
static int resp_replay(const struct soft_net_qp *nq, const struct roce_pkt *p)
{
	return nq->rs_active && (p->bth.opcode & 0x1f) == ROCE_READ_REQ &&
	       roce_psn_cmp(p->bth.psn, nq->epsn) < 0 &&
	       roce_psn_cmp(p->bth.psn, roce_psn_add(nq->rs_psn, nq->rs_k)) <=
		       0;
}

/* atm_find -- the saved result of the atomic at PSN; -1: none (never
 * executed here, or too long ago: the requester's window is past it) */
static int atm_find(const struct soft_net_qp *nq, uint32_t psn, uint64_t *orig)
{
	uint32_t n = nq->atm_n < NET_ATM_SAVED ? nq->atm_n : NET_ATM_SAVED;
	uint32_t i;

	for (i = 1; i <= n; i++) {
		uint32_t at = (nq->atm_n - i) % NET_ATM_SAVED;

		if (nq->atm[at].psn == psn) {
			*orig = nq->atm[at].orig;
			return 0;
		}
	}
	return -1;
}

static void resp_atomic(struct soft_net_qp *nq, const struct roce_pkt *p)
{
	uint8_t op = p->bth.opcode & 0x1f;
	pthread_mutex_t *lk;
	uint64_t *v, orig;
	struct roce_pkt r;

	ack_flush(nq); /* what came before, acknowledged first */
	if (p->atmeth.va & 7) {
		resp_err(nq, ROCE_NAK_INVALID_REQ, p->bth.psn);
		return;
	}
	if (nq->xfor) { /* another process's XRC SRQ: its owner's word */
		const struct soft_srq_ref *x = &nq->xref;

		if (!(nq->qp->attr.qp_access_flags &
		      IBV_ACCESS_REMOTE_ATOMIC) ||
		    soft_remote_atomic(x->pid, x->start, x->pd_id,
				       p->atmeth.rkey, p->atmeth.va,
				       op == ROCE_CMP_SWAP
					       ? IBV_WR_ATOMIC_CMP_AND_SWP
					       : IBV_WR_ATOMIC_FETCH_AND_ADD,
				       op == ROCE_CMP_SWAP ? p->atmeth.compare
							   : p->atmeth.swap_add,
				       p->atmeth.swap_add, &orig)) {
			resp_err(nq, ROCE_NAK_REMOTE_ACCESS, p->bth.psn);
			return;
		}
		goto answer;
	}
	v = (uint64_t *)rkey_va(nq, p->atmeth.rkey, p->atmeth.va, 8,
				IBV_ACCESS_REMOTE_ATOMIC, &lk);
	if (!v) {
		resp_err(nq, ROCE_NAK_REMOTE_ACCESS, p->bth.psn);
		return;
	}
	/* under the lock of the word itself (a window may name it at
	 * another address), the one the shared-memory path's atomics take */
	if (op == ROCE_CMP_SWAP)
		soft_atomic_exec(soft_self_pid, (uintptr_t)v, (uint8_t *)v, 1,
				 p->atmeth.compare, p->atmeth.swap_add, &orig);
	else
		soft_atomic_exec(soft_self_pid, (uintptr_t)v, (uint8_t *)v, 0,
				 p->atmeth.swap_add, 0, &orig);
	pthread_mutex_unlock(lk);
answer:
	nq->atm[nq->atm_n % NET_ATM_SAVED].psn = p->bth.psn;
	nq->atm[nq->atm_n % NET_ATM_SAVED].orig = orig;
	nq->atm_n++;
	nq->msn++;
	memset(&r, 0, sizeof(r));
	r.bth.opcode = nq->base | ROCE_ATOMIC_ACK;
	r.bth.psn = p->bth.psn;
	r.aeth.msn = nq->msn & ROCE_PSN_MASK;
	r.atmack = orig;
	pkt_send(nq, &r);
}

/* resp_aw_ack -- an atomic write's answer: a zero-length READ_RESP_ONLY at
 * its PSN (rxe_resp.c's send_read_response_ack) */
static void resp_aw_ack(struct soft_net_qp *nq, uint32_t psn)
{
	struct roce_pkt r;

	memset(&r, 0, sizeof(r));
	r.bth.opcode = ROCE_RC | ROCE_READ_RESP_ONLY;
	r.bth.psn = psn;
	r.aeth.syndrome = ROCE_AETH_ACK | 0x1f;
	r.aeth.msn = nq->msn & ROCE_PSN_MASK;
	pkt_send(nq, &r);
}

/*
 * resp_atomic_write -- ATOMIC_WRITE p (rxe_resp.c's atomic_write_reply and
 * rxe_mr_do_atomic_write): remote write access on the QP and on the MR or
 * window, as on one host (data.c's atomic_write); a RETH length or a
 * payload other than 8 bytes, or an address not 8-byte aligned, is an
 * invalid request.  The 8 bytes are placed in one aligned store, under the
 * stripe lock the other atomics take, and the PSN is kept with the atomics'
 * results, so that a repeat is answered without placing them again (rxe's
 * responder resource, res->replay).
 */
static void resp_atomic_write(struct soft_net_qp *nq, const struct roce_pkt *p)
{
	pthread_mutex_t *lk, *al;
	uint64_t *v, val;

	ack_flush(nq); /* what came before, acknowledged first */
	if (!(nq->qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE)) {
		resp_err(nq, ROCE_NAK_REMOTE_ACCESS, p->bth.psn);
		return;
	}
	if (p->reth.len != 8 || p->payload_len != 8 || (p->reth.va & 7)) {
		resp_err(nq, ROCE_NAK_INVALID_REQ, p->bth.psn);
		return;
	}
	memcpy(&val, p->payload, 8);
	if (nq->xfor) { /* another process's XRC SRQ: its owner's word */
		const struct soft_srq_ref *x = &nq->xref;
		uint64_t none;

		if (soft_remote_atomic(x->pid, x->start, x->pd_id, p->reth.rkey,
				       p->reth.va, IBV_WR_ATOMIC_WRITE, 0, val,
				       &none)) {
			resp_err(nq, ROCE_NAK_REMOTE_ACCESS, p->bth.psn);
			return;
		}
		goto answer;
	}
	v = (uint64_t *)rkey_va(nq, p->reth.rkey, p->reth.va, 8,
				IBV_ACCESS_REMOTE_WRITE, &lk);
	if (!v) {
		resp_err(nq, ROCE_NAK_REMOTE_ACCESS, p->bth.psn);
		return;
	}
	if ((uintptr_t)v & 7) { /* a window naming it at another address */
		pthread_mutex_unlock(lk);
		resp_err(nq, ROCE_NAK_INVALID_REQ, p->bth.psn);
		return;
	}
	al = soft_atomic_lock(soft_self_pid, (uintptr_t)v);
	soft_stripe_lock(al);
	__atomic_store_n(v, val, __ATOMIC_RELEASE);
	pthread_mutex_unlock(al);
	pthread_mutex_unlock(lk);
answer:
	nq->atm[nq->atm_n % NET_ATM_SAVED].psn = p->bth.psn;
	nq->atm[nq->atm_n % NET_ATM_SAVED].orig = 0;
	nq->atm_n++;
	nq->msn++;
	resp_aw_ack(nq, p->bth.psn);
}

/*
 * resp_malformed -- P, the request at the expected PSN, breaks into the
 * message under way (a SEND's or a WRITE's packets must follow their
 * FIRST, each kind its own, up to the LAST), continues none, or has a
 * length its place in a message cannot have at the path MTU: FIRST and
 * MIDDLE exactly one MTU, LAST 1 to one MTU, ONLY one MTU at most, a
 * RETH's length 2^31 at most (rxe_resp.c's check_op_seq and
 * check_length; a class C error, NAK invalid request)
 */
static int resp_malformed(const struct soft_net_qp *nq,
			  const struct roce_pkt *p)
{
	uint8_t op = p->bth.opcode & 0x1f;
	unsigned int fl = roce_op_flags(p->bth.opcode);
	int send = op <= ROCE_SEND_ONLY_IMM || op == ROCE_SEND_LAST_INV ||
		   op == ROCE_SEND_ONLY_INV;
	int write = op >= ROCE_WRITE_FIRST && op <= ROCE_WRITE_ONLY_IMM;

	if (nq->rx_active ? !send || (fl & ROCE_F_FIRST)
			  : send && !(fl & ROCE_F_FIRST))
		return 1;
	if (nq->wr_active ? !write || (fl & ROCE_F_FIRST)
			  : write && !(fl & ROCE_F_FIRST))
		return 1;
	if ((fl & ROCE_F_RETH) && p->reth.len > (1u << 31))
		return 1;
	if (!send && !write)
		return 0;
	if ((fl & ROCE_F_FIRST) && (fl & ROCE_F_LAST))
		return p->payload_len > nq->pmtu;
	if (!(fl & ROCE_F_LAST))
		return p->payload_len != nq->pmtu;
	return !p->payload_len || p->payload_len > nq->pmtu;
}

/*
 * rd_atomic_refused -- a READ, atomic or atomic write to a responder
 * whose max_dest_rd_atomic is 0: rxe's check_resource answers
 * RESPST_ERR_TOO_MANY_RDMA_ATM_REQ, a class C error (NAK invalid request,
 * the QP to ERR).  Any other limit takes the request: rxe recycles its
 * responder resources ("it is the requesters job to not send too many"),
 * so 1 or more is never enforced here either.
 */
static int rd_atomic_refused(struct soft_net_qp *nq, uint32_t psn)
{
	if (nq->qp->attr.max_dest_rd_atomic)
		return 0;
	ack_flush(nq); /* what came before, acknowledged first */
	resp_err(nq, ROCE_NAK_INVALID_REQ, psn);
	return 1;
}

static void rc_responder(struct soft_net_qp *nq, const struct roce_pkt *p);

/*
 * responder -- a request packet.  An XRC target's names, in its XRCETH,
 * the XRC SRQ that takes it: of the target's domain (else NAK invalid
 * request), the same in every packet of a message; its WQEs, its CQ and
 * its PD (the rkeys of WRITE, READ and atomics) serve the request, as an
 * HCA's XRC target takes them (the target has none of its own)
 */
static void responder(struct soft_net_qp *nq, const struct roce_pkt *p)
{
	struct soft_qp *qp = nq->qp;
	struct soft_srq *srq = NULL;
	int32_t d = roce_psn_cmp(p->bth.psn, nq->epsn);
	int nak;

	if (nq->base != ROCE_XRC || d > 0 || qp->state < IBV_QPS_RTR ||
	    qp->state == IBV_QPS_ERR) {
		rc_responder(nq, p); /* no SRQ needed: nothing taken */
		return;
	}
	nak = xsrq_find(nq, p->xrc_srqn, &srq);
	if (!nak && d == 0 && (nq->rx_active || nq->wr_active) &&
	    p->xrc_srqn != nq->xsrqn)
		nak = ROCE_NAK_INVALID_REQ; /* a message changing SRQ */
	if (nak) {
		if (d < 0)
			return; /* a duplicate naming none: dropped */
		ack_flush(nq);	/* what came before: acknowledged first */
		nq->rx_active = 0;
		nq->wr_active = 0;
		resp_err(nq, (uint8_t)nak, p->bth.psn);
		return;
	}
	nq->xsrq = srq;
	nq->xfor = !srq; /* another process's: nq->xref */
	/* the message under way's; a repeated READ restarts its response
	 * (resp_read), whose later bursts take this SRQ's PD */
	if (d == 0 || (p->bth.opcode & 0x1f) == ROCE_READ_REQ)
		nq->xsrqn = p->xrc_srqn;
	rc_responder(nq, p);
	nq->xsrq = NULL;
	nq->xfor = 0;
}

/* rc_responder -- a request packet, RC's responder */
static void rc_responder(struct soft_net_qp *nq, const struct roce_pkt *p)
{
	struct soft_qp *qp = nq->qp;
	uint8_t op = p->bth.opcode & 0x1f;
	unsigned int fl = roce_op_flags(p->bth.opcode);
	uint32_t psn = p->bth.psn;
	int32_t d = roce_psn_cmp(psn, nq->epsn);
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct soft_rwqe *r;

	if (qp->state < IBV_QPS_RTR || qp->state == IBV_QPS_ERR)
		return;
	if (d > 0) { /* a gap: one NAK until it closes */
		if (!nq->nak_sent)
			send_ack(nq, ROCE_AETH_NAK | ROCE_NAK_PSN_SEQ,
				 nq->epsn);
		nq->nak_sent = 1;
		return;
	}
	if (d < 0) { /* a duplicate: never delivered twice */
		if (op == ROCE_READ_REQ) {
			resp_read(nq, p);
		} else if (op == ROCE_CMP_SWAP || op == ROCE_FETCH_ADD) {
			/* answered from its saved result, never executed
			 * again: of any of the atomics in flight, not only
			 * the last (rxe's find_resource); none saved: dropped
			 * (rxe's class D) */
			struct roce_pkt a;
			uint64_t orig;

			if (atm_find(nq, psn, &orig))
				return;
			ack_flush(nq);
			memset(&a, 0, sizeof(a));
			a.bth.opcode = nq->base | ROCE_ATOMIC_ACK;
			a.bth.psn = psn;
			a.aeth.msn = nq->msn & ROCE_PSN_MASK;
			a.atmack = orig;
			pkt_send(nq, &a);
		} else if (op == ROCE_ATOMIC_WRITE) {
			/* acknowledged again, never placed again (rxe's
			 * duplicate_request: res->replay); none saved:
			 * dropped */
			uint64_t orig;

			if (atm_find(nq, psn, &orig))
				return;
			ack_flush(nq);
			resp_aw_ack(nq, psn);
		} else if (p->bth.ackreq) {
			ack_later(nq, roce_psn_add(nq->epsn, ROCE_PSN_MASK));
		}
		return;
	}
	nq->nak_sent = 0;
	if (resp_malformed(nq, p)) {
		nq->rx_active = 0;
		nq->wr_active = 0;
		resp_err(nq, ROCE_NAK_INVALID_REQ, psn);
		return;
	}
	switch (op) {
	case ROCE_SEND_FIRST:
	case ROCE_SEND_MIDDLE:
	case ROCE_SEND_LAST:
	case ROCE_SEND_LAST_IMM:
	case ROCE_SEND_ONLY:
	case ROCE_SEND_ONLY_IMM:
	case ROCE_SEND_LAST_INV:
	case ROCE_SEND_ONLY_INV:
		if ((fl & ROCE_F_FIRST) ? nq->rx_active : !nq->rx_active) {
			resp_err(nq, ROCE_NAK_INVALID_REQ, psn);
			return;
		}
		r = resp_wqe(nq);
		if (!r) {
			resp_no_wqe(nq, psn);
			return;
		}
		if (fl & ROCE_F_FIRST)
			nq->rx_off = 0;
		nq->rx_active = 1;
		if (resp_place(nq, r, nq->rx_off, p->payload, p->payload_len,
			       &st)) {
			nq->rx_active = 0;
			resp_recv_done(nq, p, IBV_WC_RECV, 0, st);
			send_ack(nq,
				 ROCE_AETH_NAK |
					 (st == IBV_WC_LOC_PROT_ERR
						  ? ROCE_NAK_REMOTE_OP
						  : ROCE_NAK_INVALID_REQ),
				 psn);
			soft_async_event(nq->ctx, IBV_EVENT_QP_REQ_ERR,
					 &qp->qpx.qp_base);
			return;
		}
		nq->rx_off += p->payload_len;
		if (fl & ROCE_F_LAST) {
			if ((fl & ROCE_F_IETH) &&
			    soft_mw_remote_inv(p->ieth,
					       nq->xfor ? nq->xref.pid
							: soft_self_pid,
					       nq->xfor ? nq->xref.pd_id
							: resp_pd(nq)->pd_id,
					       nq->qpn) != IBV_WC_SUCCESS) {
				nq->rx_active = 0;
				resp_recv_done(nq, p, IBV_WC_RECV,
					       (uint32_t)nq->rx_off,
					       IBV_WC_REM_INV_REQ_ERR);
				send_ack(nq,
					 ROCE_AETH_NAK | ROCE_NAK_INVALID_REQ,
					 psn);
				return;
			}
			nq->rx_active = 0;
			nq->msn++;
			resp_recv_done(nq, p, IBV_WC_RECV, (uint32_t)nq->rx_off,
				       IBV_WC_SUCCESS);
		}
		break;
	case ROCE_WRITE_FIRST:
	case ROCE_WRITE_MIDDLE:
	case ROCE_WRITE_LAST:
	case ROCE_WRITE_LAST_IMM:
	case ROCE_WRITE_ONLY:
	case ROCE_WRITE_ONLY_IMM:
		if ((fl & ROCE_F_FIRST) ? nq->wr_active : !nq->wr_active) {
			resp_err(nq, ROCE_NAK_INVALID_REQ, psn);
			return;
		}
		if ((fl & ROCE_F_IMMDT) && !resp_wqe(nq)) {
			resp_no_wqe(nq, psn);
			return;
		}
		if (fl & ROCE_F_FIRST) {
			nq->wr_va = p->reth.va;
			nq->wr_len = p->reth.len;
			nq->wr_rkey = p->reth.rkey;
			nq->wr_off = 0;
			if (nq->wr_len &&
			    resp_mem(nq, nq->wr_rkey, nq->wr_va, nq->wr_len,
				     IBV_ACCESS_REMOTE_WRITE, 1, NULL)) {
				resp_err(nq, ROCE_NAK_REMOTE_ACCESS, psn);
				return;
			}
		}
		nq->wr_active = 1;
		if (p->payload_len > nq->wr_len - nq->wr_off ||
		    ((fl & ROCE_F_LAST) &&
		     nq->wr_off + p->payload_len != nq->wr_len)) {
			nq->wr_active = 0;
			resp_err(nq, ROCE_NAK_INVALID_REQ, psn);
			return;
		}
		if (p->payload_len &&
		    resp_mem(nq, nq->wr_rkey, nq->wr_va + nq->wr_off,
			     p->payload_len, IBV_ACCESS_REMOTE_WRITE, 1,
			     (void *)(uintptr_t)p->payload)) {
			nq->wr_active = 0;
			resp_err(nq, ROCE_NAK_REMOTE_ACCESS, psn);
			return;
		}
		nq->wr_off += p->payload_len;
		if (fl & ROCE_F_LAST) {
			nq->wr_active = 0;
			nq->msn++;
			if (fl & ROCE_F_IMMDT)
				resp_recv_done(nq, p, IBV_WC_RECV_RDMA_WITH_IMM,
					       (uint32_t)nq->wr_len,
					       IBV_WC_SUCCESS);
		}
		break;
	case ROCE_READ_REQ:
		if (nq->rx_active || nq->wr_active) {
			resp_err(nq, ROCE_NAK_INVALID_REQ, psn);
			return;
		}
		if (rd_atomic_refused(nq, psn))
			return;
		nq->msn++;
		resp_read(nq, p);
		if (qp->state != IBV_QPS_ERR)
			nq->epsn = roce_psn_add(
				nq->epsn, roce_npkts(p->reth.len, nq->pmtu));
		return;
	case ROCE_CMP_SWAP:
	case ROCE_FETCH_ADD:
		if (rd_atomic_refused(nq, psn))
			return;
		resp_atomic(nq, p);
		if (qp->state != IBV_QPS_ERR)
			nq->epsn = roce_psn_add(nq->epsn, 1);
		return;
	case ROCE_ATOMIC_WRITE:
		if (rd_atomic_refused(nq, psn))
			return;
		resp_atomic_write(nq, p);
		if (qp->state != IBV_QPS_ERR)
			nq->epsn = roce_psn_add(nq->epsn, 1);
		return;
	default:
		resp_err(nq, ROCE_NAK_INVALID_REQ, psn);
		return;
	}
	nq->epsn = roce_psn_add(nq->epsn, 1);
	if (p->bth.ackreq)
		ack_later(nq, psn);
}

/* ---------------------------------------------------------------- */
/* the process's thread: packets from the agent, timers */

/* nq_timer -- the retransmission timer and the RNR wait; ctx lock held */
static int nq_timer(struct soft_net_qp *nq, uint64_t now)
{
	if (nq->tail == nq->head || nq->qp->state == IBV_QPS_ERR)
		return 0;
	if (nq->tail >= nq->started && nq->qp->state == IBV_QPS_SQD) {
		nq->timer_at = 0; /* SQD: what waits was never sent */
		return 0;
	}
	if (nq->rnr_until) {
		if (now >= nq->rnr_until)
			tx_push(nq);
	} else if (nq->timer_at && now >= nq->timer_at) {
		uint64_t to = qp_timeout_ns(nq->qp);
		int late = now - nq->timer_at >
			   (to > NET_LATE_NS ? to : NET_LATE_NS);

		/* found expired a whole timeout late (50 ms at least): our
		 * own engine was not run (descheduled, or a poller holding
		 * the context lock was), the peer was not silent; what came
		 * in meanwhile went first (nq_run): send again, no retry
		 * counted, at most NET_LATE_MAX times between two ACKs (a
		 * dead peer still ends the QP however late we run) */
		if (late && nq->late < NET_LATE_MAX) {
			nq->late++;
		} else if (++nq->retries > nq->qp->attr.retry_cnt) {
			/* IB mode: an armed QP migrates (apm.c) */
			if (!soft_link_ib || !soft_apm_timeout(nq->qp)) {
				fail(nq, IBV_WC_RETRY_EXC_ERR);
				return 0;
			}
			return 1; /* soft_net_repath sent again */
		}
		rewind_to(nq, nq->una);
		nq->timer_at = now + qp_timeout_ns(nq->qp);
		tx_push(nq);
	}
	return 1;
}

/* nq_input -- one packet the agent handed us (HELD: one that waited
 * behind a READ response, its turn now) */
static void nq_input(struct soft_net_qp *nq, const uint8_t *buf, size_t len,
		     int held)
{
	struct ag_fwd fw;
	struct roce_pkt p;

	if (len < sizeof(fw))
		return;
	memcpy(&fw, buf, sizeof(fw));
	if (roce_decode(buf + sizeof(fw), len - sizeof(fw), &p) ||
	    (p.bth.opcode & 0xe0) != nq->base || p.bth.dqpn != nq->qpn)
		return;
	/* an XRC initiator has no responder, a target no requester: a
	 * request to the one or a response to the other is dropped */
	if (nq->base == ROCE_XRC &&
	    !(roce_op_flags(p.bth.opcode) & ROCE_F_REQ) !=
		    (nq->qp->type == IBV_QPT_XRC_SEND))
		return;
	/* only the peer's address speaks for the peer (IB mode: on the
	 * QP's primary path, or on its alternate, iblink.c) */
	if (soft_link_ib) {
		if (soft_ib_net_in(nq->qp, fw.family, fw.src, p.bth.migreq,
				   nq->family, nq->dst) < 0)
			return;
	} else if (fw.family != nq->family ||
		   memcmp(fw.src, nq->dst, nq->family == AF_INET ? 4 : 16)) {
		return;
	}
	if (net_debug > 0)
		fprintf(stderr,
			"%llu %d in op %x psn %u epsn %u una %u tail %llu head "
			"%llu txw %llu syn %x\n",
			(unsigned long long)(soft_now_ns() / 1000) % 100000000,
			getpid(), p.bth.opcode, p.bth.psn, nq->epsn, nq->una,
			(unsigned long long)nq->tail,
			(unsigned long long)nq->head,
			(unsigned long long)nq->txw, p.aeth.syndrome);
	if (!(roce_op_flags(p.bth.opcode) & ROCE_F_REQ))
		completer(nq, &p);
	else if ((nq->rs_active || (!held && nq->df_head)) &&
		 !resp_replay(nq, &p))
		resp_defer(nq, buf, len);
	else
		responder(nq, &p);
}

/* resp_pump -- the READ response under way, a burst; once it is sent, the
 * requests that waited for it, in order, until one starts another */
static void resp_pump(struct soft_net_qp *nq)
{
	struct net_pkt *k;

	for (;;) {
		if (nq->qp->state < IBV_QPS_RTR ||
		    nq->qp->state == IBV_QPS_ERR) {
			nq->rs_active = 0;
			df_free(nq);
			return;
		}
		if (nq->rs_active) {
			resp_burst(nq);
			if (nq->rs_active)
				return; /* the next burst after what came in */
			continue;
		}
		k = nq->df_head;
		if (!k)
			return;
		nq->df_head = k->next;
		if (!nq->df_head)
			nq->df_tail = NULL;
		nq->df_n--;
		nq_input(nq, k->data, k->len, 1);
		free(k);
	}
}

/*
 * nq_run -- the packets queued for the QP, then its timers; ctx lock
 * held.  Whoever holds the context lock runs it: the owner's poll or
 * progress thread (soft_net_progress) or, when the lock is free, our
 * thread.  So a busy poller is never made to wait for the lock.  NOW:
 * the poll's clock (soft_net_progress), or 0: read it here.
 */
static void nq_run(struct soft_net_qp *nq, int net_locked, int app,
		   uint64_t now)
{
	struct net_pkt *l, *n;

	if (atomic_load_explicit(&nq->pending, memory_order_acquire)) {
		if (!net_locked)
			pthread_mutex_lock(&soft_net_mtx);
		l = nq->in_head;
		nq->in_head = nq->in_tail = NULL;
		atomic_store(&nq->pending, 0);
		if (!net_locked)
			pthread_mutex_unlock(&soft_net_mtx);
		for (; l; l = n) {
			n = l->next;
			if (nq->qp->state != IBV_QPS_RESET)
				nq_input(nq, l->data, l->len, 0);
			free(l);
		}
	}
	if (!now)
		now = soft_now_ns();
	nq_timer(nq, now);
	if (nq->rs_active || nq->df_head)
		resp_pump(nq);
	if (app)
		ack_flush_aged(nq, now);
	else
		ack_flush(nq);
}

static int net_start(void);

static struct soft_net_qp *nq_find(uint32_t qpn)
{
	struct soft_net_qp *nq = net_hash[qpn % NET_HASH];

	while (nq && nq->qpn != qpn)
		nq = nq->hnext;
	return nq;
}

/* fam_count -- NQ counted in or out (D) of the users of its family's
 * socket (of both: a UD QP, and in the IB mode a QP whose paths may
 * change family, soft_net_repath); soft_net_mtx held */
static void fam_count(const struct soft_net_qp *nq, int d)
{
	int both = nq->ud || soft_link_ib;

	if (both || nq->family != AF_INET6)
		fam_users[0] += d;
	if (both || nq->family == AF_INET6)
		fam_users[1] += d;
}

/* nq_add -- NQ on the network path: found by its QPN, which the host's
 * agent steers to us; -1 when it cannot be (then its packets go
 * nowhere, as to an unreachable path); soft_net_mtx held */
static int nq_add(struct soft_net_qp *nq)
{
	struct ag_msg m = {AG_REG, nq->qpn};

	if (net_nqp == NET_MAX_QP || net_start())
		return -1;
	net_tbl[net_nqp++] = nq;
	fam_count(nq, 1);
	nq->hnext = net_hash[nq->qpn % NET_HASH];
	net_hash[nq->qpn % NET_HASH] = nq;
	(void)!send(ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
	return 0;
}

/* nq_remove -- NQ leaves the network path; soft_net_mtx held */
static void nq_remove(struct soft_net_qp *nq)
{
	struct ag_msg m = {AG_UNREG, nq->qpn};
	struct soft_net_qp **pp = &net_hash[nq->qpn % NET_HASH];
	int i, ours = 0;

	for (i = 0; i < net_nqp; i++)
		if (net_tbl[i] == nq) {
			net_tbl[i] = net_tbl[--net_nqp];
			fam_count(nq, -1);
			ours = 1;
		}
	for (i = 0; i < held_n; i++)
		if (held_nq[i] == nq)
			held_nq[i--] = held_nq[--held_n];
	while (*pp && *pp != nq)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = nq->hnext;
	/* not a forked child's copy of its parent's (soft_net_fork_child):
	 * the agent would take it from whichever registered that QPN */
	if (ours && ctl_fd >= 0)
		(void)!send(ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
}

/* ud_decode -- a UD datagram from the agent (its ag_fwd first) into D;
 * 0, or -1 when it is no UD SEND_ONLY(_WITH_IMM) that fits a cell, or
 * (IB mode) a LID-routed one from an address with no LID: it cannot have
 * come through the subnet, whose LRH would carry the sender's LID */
static int ud_decode(const uint8_t *buf, size_t len, struct soft_net_ud *d)
{
	static const uint8_t v4m[12] = {0, 0, 0, 0, 0,	  0,
					0, 0, 0, 0, 0xff, 0xff};
	struct roce_pkt p;
	struct ag_fwd fw;

	if (len < sizeof(fw))
		return -1;
	memcpy(&fw, buf, sizeof(fw));
	if (roce_decode(buf + sizeof(fw), len - sizeof(fw), &p) ||
	    (p.bth.opcode != (ROCE_UD | ROCE_SEND_ONLY) &&
	     p.bth.opcode != (ROCE_UD | ROCE_SEND_ONLY_IMM)) ||
	    p.payload_len > SOFT_UD_MTU)
		return -1;
	memset(d, 0, sizeof(*d));
	if (fw.family == AF_INET) {
		memcpy(d->sgid, v4m, 12);
		memcpy(d->sgid + 12, fw.src, 4);
		memcpy(d->dgid, v4m, 12);
		memcpy(d->dgid + 12, fw.dst, 4);
	} else {
		memcpy(d->sgid, fw.src, 16);
		memcpy(d->dgid, fw.dst, 16);
	}
	d->qpn = p.deth.sqpn;
	d->qkey = p.deth.qkey;
	d->has_imm = p.bth.opcode == (ROCE_UD | ROCE_SEND_ONLY_IMM);
	d->imm = htonl(p.imm);
	d->solicited = p.bth.se;
	/* as the IP header came (IP_RECVTTL, IP_RECVTOS; IPv6's hop limit
	 * and traffic class), as rxe copies it into the GRH */
	d->hop_limit = fw.hop_limit;
	d->tclass = fw.tclass;
	d->flow_label = fw.flow_label;
	d->data = p.payload;
	d->len = p.payload_len;
	if (soft_link_ib) {
		/* the LRH's: SL and LNH in the DETH's reserved byte (roce.h),
		 * the SLID the source address's, as the fabric sets it */
		uint32_t a;

		d->sl = p.deth.resv & ROCE_DETH_IB_SL;
		d->no_grh = !!(p.deth.resv & ROCE_DETH_IB_LOCAL);
		if (fw.family == AF_INET) {
			memcpy(&a, fw.src, 4);
			d->slid = soft_ib_addr_lid(a);
		}
		if (d->no_grh && !d->slid)
			return -1;
	}
	return 0;
}

/* ud_in -- a datagram for a UD QP: into its own queue, where the
 * shared-memory path's checks (Q_Key, a posted receive, length) apply */
static void ud_in(struct soft_net_qp *nq, const uint8_t *buf, size_t len)
{
	struct soft_net_ud d;

	if (!ud_decode(buf, len, &d))
		soft_ud_net_input(nq->qp, &d);
}

/*
 * mc_in -- a datagram to a group (QPN 0xFFFFFF): a copy to each QP of this
 * process attached to the group its IP destination names (the GRH's DGID),
 * each with its own Q_Key check and posted receive (rxe_rcv_mcast_pkt);
 * soft_net_mtx held
 */
static void mc_in(const uint8_t *buf, size_t len)
{
	struct soft_net_ud d;
	struct soft_net_qp *nq;
	int i;

	/* a group is found by the GRH's MGID: no GRH, no group */
	if (ud_decode(buf, len, &d) || d.no_grh)
		return;
	for (i = 0; i < net_nmc; i++) {
		if (memcmp(net_mcs[i].gid, d.dgid, 16))
			continue;
		nq = nq_find(net_mcs[i].qpn);
		if (nq && nq->ud)
			soft_ud_net_input(nq->qp, &d);
	}
}

/*
 * A run: packets taken in together (one recvmmsg) for the QPs of one
 * context are run as they come, under the context's lock (the caller's,
 * or taken for the run), with no copy; their ACKs go once, at the end of
 * the run (ack_flush).  A packet whose context's lock is held elsewhere,
 * or that comes behind others already queued, is queued for whoever
 * holds the lock (nq_run).
 */
struct rx_run {
	struct soft_context *ctx; /* whose lock the run holds, or NULL */
	int ours;		  /* taken for the run (else the caller's) */
	int n;
	struct soft_net_qp *nqs[NET_BATCH]; /* the QPs run */
};

/*
 * run_end -- the QPs run: READ responses under way, their ACKs (one per
 * QP for the run; held for the application's send when it polled:
 * ack_hold), the lock.  An HCA acknowledges as the packets come,
 * whatever the application does next: an ACK sent after the answer the
 * application could send made a requester's send completion come after
 * that answer (perftest -e polls its send CQ once after the answer's
 * event: the late completion then overflowed that one-entry CQ and
 * perftest waited forever); a held ACK leaves with that answer, in the
 * same datagram, so that a receiver runs both at once (gso_ahead), or
 * else ahead of it.
 */
static void run_end(struct rx_run *run)
{
	/* an application's poll holds its ACKs for its sends (ack_hold) */
	int hold = run->ctx && !run->ours && !run->ctx->in_thread;
	uint64_t now = hold ? soft_now_ns() : 0;
	int i;

	for (i = 0; i < run->n; i++) {
		if (run->nqs[i]->rs_active || run->nqs[i]->df_head)
			resp_pump(run->nqs[i]);
		if (hold)
			ack_hold(run->nqs[i], now);
		else
			ack_flush(run->nqs[i]);
	}
	/* on the wire before the lock goes: the application it lets in
	 * must not send an answer ahead of an ACK not held */
	if (tb && tb->n)
		batch_flush();
	if (run->ctx && run->ours)
		soft_unlock(&run->ctx->lock);
	run->ctx = NULL;
	run->n = 0;
}

/* run_ctx -- the run holds CTX's lock (HELD: the caller's); -1 when it
 * is held elsewhere */
static int run_ctx(struct rx_run *run, struct soft_context *ctx,
		   struct soft_context *held)
{
	if (run->ctx == ctx)
		return 0;
	run_end(run);
	if (ctx != held && soft_trylock(&ctx->lock))
		return -1;
	run->ctx = ctx;
	run->ours = ctx != held;
	return 0;
}

/* run_add -- NQ is one of the run's QPs */
static void run_add(struct rx_run *run, struct soft_net_qp *nq)
{
	int i;

	for (i = 0; i < run->n; i++)
		if (run->nqs[i] == nq)
			return;
	if (run->n < NET_BATCH)
		run->nqs[run->n++] = nq;
	else
		ack_flush(nq); /* more QPs than datagrams: GRO coalesced */
}

/* net_packet -- a packet for its QP: run now if the run can hold its
 * context's lock, else queued for whoever holds it; soft_net_mtx held */
static void net_packet(const uint8_t *buf, size_t len,
		       struct soft_context *held, struct rx_run *run)
{
	struct soft_net_qp *nq;
	struct net_pkt *k;
	uint32_t qpn;

	if (len < sizeof(struct ag_fwd) + ROCE_BTH_LEN)
		return;
	qpn = (uint32_t)buf[sizeof(struct ag_fwd) + 5] << 16 |
	      (uint32_t)buf[sizeof(struct ag_fwd) + 6] << 8 |
	      buf[sizeof(struct ag_fwd) + 7];
	if (qpn == ROCE_QPN_MASK) {
		mc_in(buf, len);
		return;
	}
	nq = nq_find(qpn);
	if (!nq)
		return;
	if (nq->ud) {
		ud_in(nq, buf, len);
		return;
	}
	if (!run_ctx(run, nq->ctx, held)) {
		if (nq->in_head)
			nq_run(nq, 1, 0, 0); /* those that came before, first */
		if (nq->qp->state != IBV_QPS_RESET)
			nq_input(nq, buf, len, 0);
		run_add(run, nq);
		return;
	}
	k = malloc(sizeof(*k) + len);
	if (!k)
		return;
	k->next = NULL;
	k->len = len;
	memcpy(k->data, buf, len);
	if (nq->in_tail) {
		nq->in_tail->next = k;
	} else {
		nq->in_head = k;
		nq->queued_at = soft_now_ns();
	}
	nq->in_tail = k;
	atomic_store_explicit(&nq->pending, 1, memory_order_release);
	soft_wake_ctx((uint32_t)nq->ctx->reg_idx);
}

/* what a packet of a datagram (soft_ag_datagram) needs for net_packet */
struct rx_arg {
	struct soft_context *held;
	struct rx_run *run;
};

/* rx_seg -- a checked packet from our socket: its ag_fwd just before it
 * (over the headers its check used), then its QP's; soft_net_mtx held */
static void rx_seg(void *arg, uint8_t *pkt, size_t n, const struct ag_fwd *fw)
{
	struct rx_arg *a = arg;

	memcpy(pkt - sizeof(*fw), fw, sizeof(*fw));
	net_packet(pkt - sizeof(*fw), sizeof(*fw) + n, a->held, a->run);
}

/* rx_fd_in -- up to MAX datagrams from FD (our socket of FAMILY on UDP
 * 4791, or, FAMILY 0, our connection to the agent) into their QPs'
 * queues; how many came; HELD as net_packet's; soft_net_mtx held */
static int rx_fd_in(int fd, int family, int max, struct soft_context *held)
{
	/* soft_net_mtx held while they are used: one set per process, a
	 * datagram taken whole (UDP_GRO) in each buffer; the agent's
	 * connection has no name, and control data only with a socket it
	 * gives us late (soft_ag_sockets) */
	static uint8_t buf[NET_BATCH][AG_HEAD + AG_DGRAM_MAX];
	static struct ag_rxbuf rb[NET_BATCH];
	static struct mmsghdr mm_udp[NET_BATCH], mm_ctl[NET_BATCH];
	static int ready;
	struct rx_run run = {0};
	struct rx_arg arg = {held, &run};
	struct mmsghdr *mm = family ? mm_udp : mm_ctl;
	int i = 0, j, r, want;
	uint8_t *p;

	if (!ready) {
		soft_ag_recv_init(mm_udp, rb, &buf[0][0], sizeof(buf[0]),
				  NET_BATCH);
		soft_ag_recv_init(mm_ctl, rb, &buf[0][0], sizeof(buf[0]),
				  NET_BATCH);
		for (j = 0; j < NET_BATCH; j++)
			mm_ctl[j].msg_hdr.msg_name = NULL;
		soft_ag_recv_reset(mm_ctl, NET_BATCH);
		ready = 1;
	}
	while (i < max) {
		want = max - i < NET_BATCH ? max - i : NET_BATCH;
		r = recvmmsg(fd, mm, (unsigned int)want,
			     MSG_DONTWAIT | MSG_CMSG_CLOEXEC, NULL);
		if (r <= 0)
			break;
		batch_begin(); /* what the run sends, in one go */
		for (j = 0; j < r; j++) {
			p = buf[j] + AG_HEAD;
			if (!family) {
				/* ag_fwd and packet as the agent sent them,
				 * or a late answer: our socket from now on */
				if (mm[j].msg_len &&
				    !soft_ag_answer(p, mm[j].msg_len,
						    &mm[j].msg_hdr, rx_fd))
					net_packet(p, mm[j].msg_len, held,
						   &run);
				continue;
			}
			(void)soft_ag_datagram(family, p, mm[j].msg_len,
					       &mm[j].msg_hdr, rx_seg, &arg);
		}
		run_end(&run);
		batch_end();
		soft_ag_recv_reset(mm, (unsigned int)r);
		i += r;
		if (r < want)
			break;
	}
	return i;
}

/* net_rx -- up to MAX packets of each source in: our sockets and, with
 * AGENT (our thread), what the agent hands over; how many datagrams came;
 * HELD as net_packet's; soft_net_mtx held */
static int net_rx(int max, struct soft_context *held, int agent)
{
	int n = 0;

	/* a poller reads only the sockets of families in use: a system
	 * call less per poll where one is not */
	if (rx_fd[0] >= 0 && (agent || fam_users[0]))
		n += rx_fd_in(rx_fd[0], AF_INET, max, held);
	if (rx_fd[1] >= 0 && (agent || fam_users[1]))
		n += rx_fd_in(rx_fd[1], AF_INET6, max, held);
	if (agent && ctl_fd >= 0)
		n += rx_fd_in(ctl_fd, 0, max, held);
	return n;
}

/* a QP whose packets waited this long behind its context's lock is run
 * by waiting for that lock (boost) */
#define NET_WAITED_NS 500000ull

/* timers -- every QP whose context lock is free; 1: work outstanding;
 * the first QP whose packets waited NET_WAITED_NS for a held lock names
 * boost_ctx; soft_net_mtx held */
static int timers(void)
{
	uint64_t now = soft_now_ns();
	int i, busy = 0;

	for (i = 0; i < net_nqp; i++) {
		struct soft_net_qp *nq = net_tbl[i];

		if (nq->ud)
			continue;
		if (!soft_trylock(&nq->ctx->lock)) {
			nq_run(nq, 1, 0, 0);
			busy |= nq->tail < nq->head || nq->rx_active ||
				nq->wr_active;
			if (nq->rs_active)
				busy |= 2; /* a READ response: no sleep */
			soft_unlock(&nq->ctx->lock);
			continue;
		}
		busy = 1;
		if (!boost_ctx && nq->in_head &&
		    now - nq->queued_at >= NET_WAITED_NS)
			boost_ctx = nq->ctx;
	}
	return busy;
}

/*
 * boost -- wait for boost_ctx's lock, then run its QPs.  The lock is a
 * priority-inheriting futex (soft_lock_t): while we, SCHED_FIFO, wait, the
 * holder runs at our priority, so an application poller the scheduler
 * took off the CPU while it held the lock finishes its sweep at once and
 * the packets that came for its QPs are answered (ACKs, READ responses,
 * NAKs) as an HCA would, not when the poller is next given a CPU.  No
 * lock of ours is held while we wait (the holder may want soft_net_mtx);
 * soft_net_ctx_gone keeps the context until we are done.
 */
static void boost(void)
{
	struct soft_context *ctx;
	int i;

	pthread_mutex_lock(&soft_net_mtx);
	ctx = boost_ctx;
	pthread_mutex_unlock(&soft_net_mtx);
	if (!ctx)
		return;
	soft_lock(&ctx->lock);
	pthread_mutex_lock(&soft_net_mtx);
	for (i = 0; i < net_nqp; i++) {
		struct soft_net_qp *nq = net_tbl[i];

		if (!nq->ud && nq->ctx == ctx)
			nq_run(nq, 1, 0, 0);
	}
	pthread_mutex_unlock(&soft_net_mtx);
	soft_unlock(&ctx->lock);
	pthread_mutex_lock(&soft_net_mtx);
	boost_ctx = NULL;
	pthread_cond_broadcast(&boost_cv);
	pthread_mutex_unlock(&soft_net_mtx);
}

/* acks_release -- the ACKs our polls held go now (ack_hold); a lock held
 * elsewhere is our thread's or a poller's, which send them; never blocks */
static void acks_release(void)
{
	int i;

	if (!atomic_load(&acks_held) || pthread_mutex_trylock(&soft_net_mtx))
		return;
	for (i = 0; i < net_nqp; i++) {
		struct soft_net_qp *nq = net_tbl[i];

		if (nq->ud || soft_trylock(&nq->ctx->lock))
			continue;
		ack_flush(nq);
		soft_unlock(&nq->ctx->lock);
	}
	pthread_mutex_unlock(&soft_net_mtx);
}

/*
 * fini_hold -- tests only (SOFTRDMA_TEST_FINI_BUSY=1; rc-hosts.sh "last
 * word"): at exit our thread holds soft_net_mtx for 20 ms, as its timers
 * or its receive may when exit() comes; 1 asked, 2 held
 */
static _Atomic int fini_hold;

static void fini_busy(void)
{
	int i;

	atomic_store(&fini_hold, 1);
	net_kick();
	for (i = 0; i < 1000 && atomic_load(&fini_hold) != 2; i++)
		usleep(100);
}

/*
 * net_fini -- at exit, an HCA would have sent the ACKs we hold.  A lock
 * that is busy (our thread's timers or receive, a poller of another
 * thread) is tried again every millisecond, 100 ms at most: the holder
 * sends a held ACK only once it is NET_ACK_HOLD_NS old, and exit() ends
 * it first (rc-hosts.sh "last word": the client's SEND, taken by a poll,
 * then failed with RETRY_EXC_ERR); a lock this thread holds (exit() from
 * a signal handler) is given up after those 100 ms, as soft_exit_lock
 */
__attribute__((destructor)) static void net_fini(void)
{
	static _Atomic int busy = -1;
	int i;

	if (!thr_started || thr_pid != getpid())
		return;
	if (soft_env_flag(&busy, "SOFTRDMA_TEST_FINI_BUSY"))
		fini_busy();
	for (i = 0; i < 100 && atomic_load(&acks_held); i++) {
		if (i)
			usleep(1000);
		acks_release();
	}
}

void soft_net_sleeping(void)
{
	if (!thr_started || thr_pid != getpid())
		return;
	atomic_store(&arm_at, soft_now_ns());
	acks_release(); /* we will not send soon */
	if (atomic_exchange(&thr_nosock, 0))
		net_kick();
}

void soft_net_ctx_gone(struct soft_context *ctx)
{
	if (!thr_started || thr_pid != getpid())
		return; /* no thread of ours here (none, or a forked copy) */
	pthread_mutex_lock(&soft_net_mtx);
	while (boost_ctx == ctx)
		pthread_cond_wait(&boost_cv, &soft_net_mtx);
	pthread_mutex_unlock(&soft_net_mtx);
}

static int kick_fd[2] = {-1, -1};

static void net_kick(void)
{
	char c = 1;

	if (kick_fd[1] >= 0)
		(void)!write(kick_fd[1], &c, 1);
}

/* mc_first -- pair I is the first of its group in the table */
static int mc_first(int i)
{
	int k;

	for (k = 0; k < i; k++)
		if (!memcmp(net_mcs[k].gid, net_mcs[i].gid, 16))
			return 0;
	return 1;
}

/* gid_split -- a GID as an address: family, and the bytes that count */
static int gid_split(const uint8_t *gid, uint8_t *addr)
{
	static const uint8_t v4m[12] = {0, 0, 0, 0, 0,	  0,
					0, 0, 0, 0, 0xff, 0xff};

	memset(addr, 0, 16);
	if (!memcmp(gid, v4m, 12)) {
		memcpy(addr, gid + 12, 4);
		return AF_INET;
	}
	memcpy(addr, gid, 16);
	return AF_INET6;
}

/* mc_tell -- tell the agent this process joins or leaves a group */
static void mc_tell(uint32_t op, const uint8_t *gid)
{
	struct ag_mmsg mm;

	memset(&mm, 0, sizeof(mm));
	mm.op = op;
	mm.family = (uint32_t)gid_split(gid, mm.addr);
	if (ctl_fd >= 0)
		(void)!send(ctl_fd, &mm, sizeof(mm), MSG_NOSIGNAL);
}

/* reregister -- a new agent (the old one went away) learns our QPNs */
static void reregister(void)
{
	int i;

	for (i = 0; i < net_nqp; i++) {
		struct ag_msg m = {AG_REG, net_tbl[i]->qpn};

		(void)!send(ctl_fd, &m, sizeof(m), MSG_NOSIGNAL);
	}
	for (i = 0; i < net_nmc; i++)
		if (mc_first(i))
			mc_tell(AG_MJOIN, net_mcs[i].gid);
}

/* rx_sockets -- our sockets on the port from the agent on ctl_fd (its
 * only reader: our thread, or net_start before there is one); one whose
 * answer comes late is taken by rx_fd_in */
static void rx_sockets(int fd[2])
{
	const int want[2] = {udp4 >= 0, udp6 >= 0};

	soft_ag_sockets(ctl_fd, want, fd);
}

/* agent_again -- the agent went away: our sockets of its group closed
 * first (the new agent binds the port alone), then another agent, new
 * sockets, and our registrations */
static void agent_again(void)
{
	int fd, fds[2], k;

	pthread_mutex_lock(&soft_net_mtx);
	for (k = 0; k < 2; k++) {
		if (rx_fd[k] >= 0)
			close(rx_fd[k]);
		rx_fd[k] = -1;
	}
	pthread_mutex_unlock(&soft_net_mtx);
	fd = soft_ag_connect();
	if (fd < 0) {
		usleep(100000);
		return;
	}
	pthread_mutex_lock(&soft_net_mtx);
	dup2(fd, ctl_fd);
	close(fd);
	pthread_mutex_unlock(&soft_net_mtx);
	rx_sockets(fds);
	pthread_mutex_lock(&soft_net_mtx);
	rx_fd[0] = fds[0];
	rx_fd[1] = fds[1];
	reregister();
	pthread_mutex_unlock(&soft_net_mtx);
}

static void *net_main(void *arg)
{
	int busy = 0;

	soft_internal = 1;
	(void)arg;
	soft_hca_priority(); /* the receive side of our "HCA" */
	for (;;) {
		struct pollfd pf[4];
		int n, k, np = 2;
		int timeout = (busy & 2) ? 0 : busy ? 1 : net_idle_ms;
		uint64_t now;

		pf[0].fd = ctl_fd;
		pf[0].events = POLLIN;
		pf[1].fd = kick_fd[0];
		pf[1].events = POLLIN;
		/* a poller took packets in a moment ago: it goes on doing
		 * so, and waking for what it takes would only take its CPU
		 * (we run SCHED_FIFO); a millisecond after its last, ours,
		 * or at once when it arms a CQ to sleep (thr_nosock first:
		 * soft_net_sleeping sets arm_at, then looks at it) */
		atomic_store(&thr_nosock, 1);
		now = soft_now_ns();
		if (now - atomic_load(&poll_at) < NET_POLLER_NS &&
		    now - atomic_load(&arm_at) >= NET_ARMED_NS) {
			if (timeout > 1)
				timeout = 1;
		} else {
			atomic_store(&thr_nosock, 0);
			for (k = 0; k < 2; k++)
				if (rx_fd[k] >= 0) {
					pf[np].fd = rx_fd[k];
					pf[np++].events = POLLIN;
				}
		}
		atomic_store(&thr_long, timeout > 1);
		/* an ACK held before thr_long was seen set (ack_hold counts
		 * it in acks_held first, both seq_cst): no long sleep */
		if (timeout > 1 && atomic_load(&acks_held))
			timeout = 1;
		n = poll(pf, (nfds_t)np, timeout);
		if (atomic_load(&fini_hold) == 1) {
			pthread_mutex_lock(&soft_net_mtx);
			atomic_store(&fini_hold, 2);
			usleep(20000);
			pthread_mutex_unlock(&soft_net_mtx);
		}
		atomic_store(&thr_long, 0);
		atomic_store(&thr_asleep, 0);
		atomic_store(&thr_nosock, 0);
		if (n > 0 && (pf[1].revents & POLLIN)) {
			char c[64];

			(void)!read(kick_fd[0], c, sizeof(c));
		}
		for (k = 0; n > 0 && k < np; k++)
			if (k != 1 && (pf[k].revents & POLLIN))
				break;
		if (n > 0 && k < np) {
			pthread_mutex_lock(&soft_net_mtx);
			net_rx(256, NULL, 1);
			pthread_mutex_unlock(&soft_net_mtx);
		}
		if (n > 0 && (pf[0].revents & (POLLHUP | POLLERR)))
			agent_again();
		/* about to sleep for long unless timers() finds work: a
		 * post from now on wakes us (soft_net_post_send) */
		atomic_store(&thr_asleep, 1);
		pthread_mutex_lock(&soft_net_mtx);
		busy = timers();
		pthread_mutex_unlock(&soft_net_mtx);
		if (busy)
			atomic_store(&thr_asleep, 0);
		boost();
		flt_release();
	}
	return NULL;
}

/* net_start -- sockets, agent and thread, once; soft_net_mtx held */
static int net_start(void)
{
	sigset_t all, old;

	if (thr_started)
		return 0;
	if (udp4 < 0)
		udp4 = udp_open(AF_INET, &sport4);
	if (udp6 < 0)
		udp6 = udp_open(AF_INET6, &sport6);
	if (kick_fd[0] < 0 && pipe2(kick_fd, O_CLOEXEC | O_NONBLOCK))
		return -1;
	if (ctl_fd < 0) {
		ctl_fd = soft_ag_connect();
		if (ctl_fd >= 0)
			rx_sockets(rx_fd);
	}
	if (ctl_fd < 0 || (udp4 < 0 && udp6 < 0))
		return -1;
	if (net_debug < 0) {
		const char *e = getenv("SOFTRDMA_NET_IDLE_MS");

		net_debug = getenv("SOFTRDMA_NET_DEBUG") != NULL;
		if (e && atoi(e) >= 1 && atoi(e) <= 10000)
			net_idle_ms = atoi(e);
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!pthread_create(&net_thr, NULL, net_main, NULL)) {
		pthread_detach(net_thr);
		thr_started = 1;
		thr_pid = getpid();
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return thr_started ? 0 : -1;
}

/* fd_drop -- our copy of *FD closed (the file stays open in any other
 * process that has one), *FD -1 */
static void fd_drop(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* fork_forget_qps -- a forked child's tables emptied of its parent's
 * QPs; their ACKs owed and held are the parent's to send */
static void fork_forget_qps(void)
{
	int i;

	for (i = 0; i < net_nqp; i++) {
		struct soft_net_qp *nq = net_tbl[i];

		nq->ack_due = 0;
		atomic_store(&nq->ack_held, 0);
	}
	memset(net_hash, 0, sizeof(net_hash));
	net_nqp = held_n = net_nmc = 0;
	fam_users[0] = fam_users[1] = 0;
	atomic_store(&acks_held, 0);
	boost_ctx = NULL;
}

/* fork_forget_files -- a forked child's copies of its parent's sockets,
 * agent connection and wake-up pipe closed, and what was set on them
 * forgotten */
static void fork_forget_files(void)
{
	fd_drop(&udp4);
	fd_drop(&udp6);
	fd_drop(&ctl_fd);
	fd_drop(&rx_fd[0]);
	fd_drop(&rx_fd[1]);
	fd_drop(&kick_fd[0]);
	fd_drop(&kick_fd[1]);
	sport4 = sport6 = 0;
	memset(mc_set, 0, sizeof(mc_set));
	flt_held_len = 0; /* a packet held for the parent's socket */
}

/* fork_forget_batches -- a forked child's batches of the threads that
 * did not come along free for its own */
static void fork_forget_batches(void)
{
	struct net_batch *b;

	for (b = atomic_load(&tb_all); b; b = b->all_next)
		if (b != tb)
			atomic_store(&b->owned, 0);
}

/*
 * soft_net_fork_child -- in a forked child (fork.c), the parent's network
 * path forgotten.  Its thread did not come along, and its sockets, its
 * connection to the host's agent and its thread's pipe are the parent's
 * files: the agent steers the QPNs registered on that connection to the
 * parent's socket, where the parent's thread takes and drops what comes
 * for the child's QPs, and what the child's polls read there, the
 * parent's QPs miss; a QP of the parent's that the child destroys would
 * unregister it at the agent.  Our copies closed, the tables emptied and
 * no thread: the child's first QP on the network path starts a path of
 * its own (net_start: sockets, a connection and registrations of its
 * own, a thread).  The parent's QPs the child inherited are in none of
 * its tables: unusable, as rdma-core says of inherited objects, but
 * destroying them sends nothing and frees only the child's copies.
 */
void soft_net_fork_child(void)
{
	fork_forget_qps();
	fork_forget_files();
	fork_forget_batches();
	thr_started = 0;
	thr_pid = 0;
	atomic_store(&thr_asleep, 0);
	atomic_store(&thr_long, 0);
	atomic_store(&thr_nosock, 0);
	atomic_store(&poll_at, 0);
	atomic_store(&arm_at, 0);
	/* no thread here waits on it, or forks the host's agent */
	pthread_cond_init(&boost_cv, NULL);
	atomic_store(&soft_agent_spawning, 0);
}

/* src_for -- the address this host sends from towards DST */
static int src_for(int family, const uint8_t *dst, uint8_t *src)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = -1;

	if (fd < 0)
		return -1;
	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(ROCE_UDP_PORT);
		memcpy(&a->sin_addr, dst, 4);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(ROCE_UDP_PORT);
		memcpy(&a->sin6_addr, dst, 16);
		sl = sizeof(*a);
	}
	if (!connect(fd, (struct sockaddr *)&ss, sl)) {
		sl = sizeof(ss);
		if (!getsockname(fd, (struct sockaddr *)&ss, &sl)) {
			if (family == AF_INET)
				memcpy(src,
				       &((struct sockaddr_in *)&ss)->sin_addr,
				       4);
			else
				memcpy(src,
				       &((struct sockaddr_in6 *)&ss)->sin6_addr,
				       16);
			r = 0;
		}
	}
	close(fd);
	return r;
}

static int net_enabled(void)
{
	static _Atomic int on = -1;

	return soft_env_flag(&on, "SOFTRDMA_NET");
}

int soft_net_enabled(void)
{
	return net_enabled();
}

int soft_net_start(void)
{
	int r;

	if (!net_enabled())
		return -1;
	pthread_mutex_lock(&soft_net_mtx);
	r = net_start();
	pthread_mutex_unlock(&soft_net_mtx);
	return r;
}

/*
 * path_ip -- the IP header fields of the QP's packets, its ACKs and READ
 * responses too, from its path AH: RoCE's GRH hop limit and traffic class
 * are the IP header's TTL and TOS (rxe's prepare_ipv4_hdr and
 * prepare_ipv6_hdr take them from the QP's AV; mlx5 the same from the
 * QP context's path); an InfiniBand link has no IP header to show them
 */
static void path_ip(struct soft_net_qp *nq, const struct ibv_ah_attr *ah)
{
	memset(&nq->ip, 0, sizeof(nq->ip));
	if (soft_link_ib)
		return;
	nq->ip.ttl = ah->grh.hop_limit;
	nq->ip.tos = ah->grh.traffic_class;
	nq->ip.flow = ah->grh.flow_label & 0xfffff;
}

/* net_attach -- soft_net_connect's network state of qp (qp->net), if its
 * path can have one; lock held */
static void net_attach(struct soft_qp *qp)
{
	const uint8_t *g = qp->attr.ah_attr.grh.dgid.raw;
	static const uint8_t v4m[12] = {0, 0, 0, 0, 0,	  0,
					0, 0, 0, 0, 0xff, 0xff};
	struct soft_net_qp *nq;
	uint32_t n;
	int i;

	if (qp->net ||
	    (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_XRC_SEND &&
	     qp->type != IBV_QPT_XRC_RECV) ||
	    !net_enabled())
		return; /* unreachable path: sends time out (RETRY_EXC_ERR) */
	nq = calloc(1, sizeof(*nq));
	if (!nq)
		return;
	nq->qp = qp;
	nq->base = qp->type == IBV_QPT_RC ? ROCE_RC : ROCE_XRC;
	nq->ctx = qp->ctx;
	nq->qpn = qp->qpx.qp_base.qp_num;
	nq->dqpn = qp->attr.dest_qp_num & ROCE_QPN_MASK;
	nq->pmtu = roce_mtu_bytes(qp->attr.path_mtu);
	if (!nq->pmtu)
		nq->pmtu = 1024;
	path_ip(nq, &qp->attr.ah_attr);
	if (soft_link_ib) { /* by DLID or GID, on the port's rail */
		if (soft_ib_path_addr(qp, 0, &nq->family, nq->dst)) {
			free(nq);
			return; /* no address: an unreachable path */
		}
	} else if (!memcmp(g, v4m, 12)) {
		nq->family = AF_INET;
		memcpy(nq->dst, g + 12, 4);
	} else {
		nq->family = AF_INET6;
		memcpy(nq->dst, g, 16);
	}
	n = qp->cap.max_send_wr ? qp->cap.max_send_wr : 1;
	nq->sq_n = n;
	nq->max_sge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
	nq->max_inl = qp->cap.max_inline_data;
	nq->sq = calloc(n, sizeof(*nq->sq));
	nq->iovs = calloc((size_t)n * nq->max_sge, sizeof(*nq->iovs));
	nq->inl_size = (uint64_t)n * nq->max_inl;
	if (nq->inl_size > NET_INL_RING)
		nq->inl_size = NET_INL_RING; /* >= SOFT_MAX_INLINE */
	nq->inls = nq->inl_size ? malloc(nq->inl_size) : NULL;
	nq->epsn = qp->attr.rq_psn & ROCE_PSN_MASK;
	if (!nq->sq || !nq->iovs || (nq->max_inl && !nq->inls) ||
	    src_for(nq->family, nq->dst, nq->src))
		goto fail;
	pthread_mutex_lock(&soft_net_mtx);
	i = nq_add(nq);
	pthread_mutex_unlock(&soft_net_mtx);
	if (i)
		goto fail;
	qp->net = nq;
	return;
fail:
	free(nq->sq);
	free(nq->iovs);
	free(nq->inls);
	free(nq);
}

void soft_net_connect(struct soft_qp *qp, const struct soft_qp_ops *ops)
{
	net_attach(qp);
	if (qp->net)
		qp->ops = ops;
}

void soft_net_repath(struct soft_qp *qp)
{
	struct soft_net_qp *nq = qp->net;
	uint8_t dst[16], src[16];
	int family;

	if (!nq || soft_ib_path_addr(qp, 0, &family, dst) ||
	    src_for(family, dst, src))
		return; /* no route: its packets go nowhere, retries tell */
	nq->family = family;
	memcpy(nq->dst, dst, 16);
	memcpy(nq->src, src, 16);
	path_ip(nq, &qp->attr.ah_attr);
	/* a new path: retries afresh, what is unacknowledged sent again */
	nq->retries = 0;
	nq->late = 0;
	if (nq->tail < nq->head && !nq->rnr_until) {
		rewind_to(nq, nq->una);
		nq->timer_at = soft_now_ns() + qp_timeout_ns(qp);
		tx_push(nq);
	}
}

void soft_net_release(struct soft_qp *qp)
{
	struct soft_net_qp *nq = qp->net;

	if (!nq)
		return;
	ack_flush(nq); /* held for a send that will not come */
	pthread_mutex_lock(&soft_net_mtx);
	nq_remove(nq);
	pthread_mutex_unlock(&soft_net_mtx);
	qp->net = NULL;
	if (nq->held_for) /* another process's WQE: never left HELD */
		held_flush(nq);
	soft_srq_ref_unmap(&nq->xref);
	df_free(nq);
	for (; nq->tail < nq->head; nq->tail++)
		if (nq->sq[nq->tail % nq->sq_n].inl_own)
			free(nq->sq[nq->tail % nq->sq_n].inl);
	while (nq->in_head) {
		struct net_pkt *k = nq->in_head;

		nq->in_head = k->next;
		free(k);
	}
	free(nq->sq);
	free(nq->iovs);
	free(nq->inls);
	free(nq);
}

/*
 * inl_take -- room for w's len inline bytes: the inline ring's next piece
 * (the ring's tail end skipped when too short), else, the ring full of
 * WQEs not yet acknowledged, memory of w's own.  0 or ENOMEM.
 */
static int inl_take(struct soft_net_qp *nq, struct net_swqe *w, uint64_t len)
{
	uint64_t pos, skip = 0;

	if (!len) {
		w->inl = nq->inls; /* nothing to copy (NULL when max_inl 0) */
		return 0;
	}
	pos = nq->inl_head % nq->inl_size;
	if (pos + len > nq->inl_size)
		skip = nq->inl_size - pos;
	if (nq->inl_head + skip + len - nq->inl_tail <= nq->inl_size) {
		w->inl = nq->inls + (pos + skip) % nq->inl_size;
		nq->inl_head += skip + len;
		w->inl_end = nq->inl_head;
		return 0;
	}
	w->inl = malloc(len);
	if (!w->inl)
		return ENOMEM;
	w->inl_own = 1;
	return 0;
}

/* soft_net_sq_room -- send WRs the queue takes now; ctx lock held */
uint32_t soft_net_sq_room(struct soft_qp *qp)
{
	return soft_sq_room(qp, qp->net->head - qp->net->tail);
}

/* sq_take -- the next send queue entry for wr, zeroed but for its
 * wr_id, opcode, signalling and PSN (the queue's first WR sets the
 * starting PSN); NULL when the queue is full */
static struct net_swqe *sq_take(struct soft_net_qp *nq,
				const struct ibv_send_wr *wr)
{
	struct soft_qp *qp = nq->qp;
	struct net_swqe *w;

	if (!soft_net_sq_room(qp))
		return NULL;
	w = &nq->sq[nq->head % nq->sq_n];
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->op = wr->opcode;
	w->signaled =
		qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED) ? 1 : 0;
	if (!nq->psn_set) {
		nq->sq_psn = qp->attr.sq_psn & ROCE_PSN_MASK;
		nq->una = nq->sq_psn;
		nq->psn_set = 1;
	}
	w->psn = nq->sq_psn;
	return w;
}

/* post_local -- BIND_MW or LOCAL_INV: executed at post, as the
 * shared-memory path does (mw.c's checks and errors), completed in order
 * behind what was posted before it; it takes no PSN */
static int post_local(struct soft_net_qp *nq, struct ibv_send_wr *wr)
{
	struct soft_qp *qp = nq->qp;
	struct net_swqe *w;

	if (soft_mw_check_wr(qp, wr))
		return EINVAL;
	w = sq_take(nq, wr);
	if (!w)
		return ENOMEM;
	w->status = qp->state == IBV_QPS_ERR ? IBV_WC_WR_FLUSH_ERR
					     : soft_mw_local_op(qp, wr);
	w->done = w->status == IBV_WC_SUCCESS;
	nq->head++;
	return 0;
}

/* aw_take -- an atomic write's 8 bytes into w->swap at post, as rxe
 * keeps them in the WQE: inline, or from its SGE under its lkey (a
 * local source, no access flag needed); -1: the lkey does not cover it */
static int aw_take(struct soft_qp *qp, struct net_swqe *w,
		   struct ibv_send_wr *wr)
{
	struct iovec iov;

	if (wr->send_flags & IBV_SEND_INLINE) {
		memcpy(&w->swap, (void *)(uintptr_t)wr->sg_list[0].addr, 8);
		return 0;
	}
	if (soft_local_sge(qp->pd, &wr->sg_list[0], 0, &iov) || iov.iov_len < 8)
		return -1;
	memcpy(&w->swap, iov.iov_base, 8);
	return 0;
}

/* post_one -- one checked WR into the send queue */
static int post_one(struct soft_net_qp *nq, struct ibv_send_wr *wr)
{
	struct soft_qp *qp = nq->qp;
	struct net_swqe *w;
	uint64_t len = 0;
	int i;

	/* an XRC initiator's operations, as on one host (dc.c's dc_take):
	 * RC's but the atomic write (IBA 1.5's, which softrdma does not
	 * send on XRC) */
	if (nq->base == ROCE_XRC && wr->opcode == IBV_WR_ATOMIC_WRITE)
		return EINVAL;
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_ATOMIC_WRITE:
		if (soft_atomic_sge_bad(wr))
			return EINVAL;
		break;
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
		return post_local(nq, wr);
	default:
		return EINVAL;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > nq->max_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (len > SOFT_MAX_MSG_SZ)
		return EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) &&
	    wr->opcode != IBV_WR_ATOMIC_WRITE &&
	    (wr->opcode == IBV_WR_RDMA_READ || len > nq->max_inl))
		return EINVAL;
	w = sq_take(nq, wr);
	if (!w)
		return ENOMEM;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		w->se = 1;
	if (wr->send_flags & IBV_SEND_FENCE)
		w->fence = 1;
	w->len = (uint32_t)len;
	w->iov = nq->iovs + (nq->head % nq->sq_n) * nq->max_sge;
	w->niov = (uint32_t)wr->num_sge;
	if (wr->opcode == IBV_WR_ATOMIC_WRITE) {
		if (aw_take(qp, w, wr))
			w->status = IBV_WC_LOC_PROT_ERR;
	} else if (wr->send_flags & IBV_SEND_INLINE) {
		uint64_t off = 0;

		if (inl_take(nq, w, len))
			return ENOMEM;
		for (i = 0; i < wr->num_sge; i++) {
			memcpy(w->inl + off,
			       (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
	} else {
		uint32_t need = soft_op_rd_atomic(wr->opcode)
					? IBV_ACCESS_LOCAL_WRITE
					: 0;

		for (i = 0; i < wr->num_sge; i++)
			if (soft_local_sge(qp->pd, &wr->sg_list[i], need,
					   &w->iov[i]))
				w->status = IBV_WC_LOC_PROT_ERR;
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_WRITE:
		w->raddr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->raddr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->swap = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP
				  ? wr->wr.atomic.swap
				  : wr->wr.atomic.compare_add;
		w->cmp = wr->wr.atomic.compare_add;
		w->len = 8;
		break;
	default:
		break;
	}
	if (wr->opcode == IBV_WR_SEND_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		w->imm = ntohl(wr->imm_data);
	if (wr->opcode == IBV_WR_SEND_WITH_INV)
		w->inv = wr->invalidate_rkey;
	/* the XRCETH's 24 bits: a larger number, which no SRQ has, goes
	 * as 0, which none has either (the target NAKs it, as on one host) */
	if (nq->base == ROCE_XRC)
		w->srqn = wr->qp_type.xrc.remote_srqn <= ROCE_SRQN_MASK
				  ? wr->qp_type.xrc.remote_srqn
				  : 0;
	w->npkts = w->status ? 0
		   : (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		      wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
		      wr->opcode == IBV_WR_ATOMIC_WRITE)
			   ? 1
			   : roce_npkts(w->len, nq->pmtu);
	nq->sq_psn = roce_psn_add(nq->sq_psn, w->npkts);
	nq->head++;
	return 0;
}

int soft_net_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad)
{
	struct soft_net_qp *nq = qp->net;
	int ret = 0;

	if (qp->state < IBV_QPS_RTS) {
		*bad = wr;
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		ret = post_one(nq, wr);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	/* an ACK held for this send goes with it: in one datagram behind
	 * its first packet (gso_ahead), else ahead of it */
	batch_begin();
	ack_flush(nq);
	if (qp->state == IBV_QPS_ERR) {
		batch_end();
		soft_net_progress(qp);
		return ret;
	}
	/* a local error or a local operation at the tail completes at once */
	if (nq->tail < nq->head && (nq->sq[nq->tail % nq->sq_n].status ||
				    nq->sq[nq->tail % nq->sq_n].done))
		acked(nq, roce_psn_add(nq->una, ROCE_PSN_MASK));
	tx_push(nq);
	batch_end();
	/* our thread sleeping for long would run this send's timer late */
	if (atomic_load(&thr_asleep) && atomic_exchange(&thr_asleep, 0))
		net_kick();
	return ret;
}

int soft_net_ops_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad)
{
	int ret;

	soft_lock(&qp->ctx->lock);
	if (qp->ops->post_send != soft_net_ops_post_send) {
		soft_unlock(&qp->ctx->lock);
		return qp->ops->post_send(qp, wr, bad);
	}
	ret = soft_net_post_send(qp, wr, bad);
	soft_unlock(&qp->ctx->lock);
	return ret;
}

/*
 * poll_clock -- the time for a poller's poll, read at every
 * NET_CLOCK_POLLS-th poll, at the one after a poll that took packets in,
 * and at each while an ACK is held (its 5 us count): an empty poll read
 * the clock twice here (its timers run late by a few polls at most,
 * never early, and a QP's shortest timeout is 8 us); soft_net_mtx held
 */
static uint64_t poll_clock(void)
{
	static uint64_t at;

	if (!poll_stale-- ||
	    atomic_load_explicit(&acks_held, memory_order_relaxed)) {
		at = soft_now_ns();
		poll_stale = NET_CLOCK_POLLS - 1;
	}
	return at;
}

int soft_net_sq_drained(struct soft_qp *qp)
{
	struct soft_net_qp *nq = qp->net;

	return !nq || nq->tail >= nq->started || nq->tail == nq->head;
}

void soft_net_sq_release(struct soft_qp *qp)
{
	if (qp->net && qp->net->tail < qp->net->head)
		tx_push(qp->net);
}

void soft_net_progress(struct soft_qp *qp)
{
	struct soft_net_qp *nq = qp->net;
	uint64_t now = 0;

	/* a poller takes its packets in itself: no wait for our thread */
	if (!pthread_mutex_trylock(&soft_net_mtx)) {
		now = poll_clock();
		atomic_store_explicit(&poll_at, now, memory_order_relaxed);
		if (net_rx(64, qp->ctx, 0))
			poll_stale = 0; /* the next poll reads the clock */
		if (held_n)
			acks_aged(qp->ctx, now);
		pthread_mutex_unlock(&soft_net_mtx);
	}
	if (nq->ud)
		return; /* datagrams went into the UD queue: ud.c delivers */
	nq_run(nq, 0, !qp->ctx->in_thread, now);
	if (qp->state == IBV_QPS_ERR) {
		while (nq->tail < nq->head)
			complete_wqe(nq, IBV_WC_WR_FLUSH_ERR);
		if (nq->srq_held) /* the SRQ's WQE of a broken message */
			held_flush(nq);
	}
}

void soft_net_ud_attach(struct soft_qp *qp)
{
	struct soft_net_qp *nq;
	int i;

	if (qp->net || qp->type != IBV_QPT_UD || !net_enabled())
		return;
	nq = calloc(1, sizeof(*nq));
	if (!nq)
		return; /* then only this host reaches it */
	nq->qp = qp;
	nq->ctx = qp->ctx;
	nq->qpn = qp->qpx.qp_base.qp_num;
	nq->ud = 1;
	pthread_mutex_lock(&soft_net_mtx);
	i = nq_add(nq);
	pthread_mutex_unlock(&soft_net_mtx);
	if (i)
		free(nq); /* then only this host reaches it */
	else
		qp->net = nq;
}

/* if_of -- the index of the interface that has address A, 0 if none */
static unsigned int if_of(int family, const uint8_t *a)
{
	struct ifaddrs *ifa, *i;
	unsigned int idx = 0;

	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && !idx; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != family)
			continue;
		if (family == AF_INET
			    ? !memcmp(&((struct sockaddr_in *)i->ifa_addr)
					       ->sin_addr,
				      a, 4)
			    : !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)
					       ->sin6_addr,
				      a, 16))
			idx = if_nametoindex(i->ifa_name);
	}
	freeifaddrs(ifa);
	return idx;
}

/*
 * mc_route -- our socket of FAMILY set to send to a group from the
 * interface of the source GID SGID (IP_MULTICAST_IF / IPV6_MULTICAST_IF),
 * with the AH's hop limit as TTL (rxe puts it in the IP header), the
 * address it sends from in SRC; -1 when SGID is no address of this host
 * of that family.  soft_net_mtx held.
 */
static int mc_route(int family, const uint8_t *sgid, uint8_t hop, uint8_t *src)
{
	struct mc_set *m = &mc_set[family == AF_INET ? 0 : 1];
	uint8_t a[16];
	unsigned int idx;
	int ttl = hop ? hop : 1;

	if (gid_split(sgid, a) != family)
		return -1;
	if (family == AF_INET) {
		if (!m->have || memcmp(m->src, a, 16)) {
			struct ip_mreqn mr;

			idx = if_of(AF_INET, a);
			if (!idx)
				return -1;
			memset(&mr, 0, sizeof(mr));
			memcpy(&mr.imr_address, a, 4);
			mr.imr_ifindex = (int)idx;
			if (setsockopt(udp4, IPPROTO_IP, IP_MULTICAST_IF, &mr,
				       sizeof(mr)))
				return -1;
			memcpy(m->src, a, 16);
			m->have = 1;
		}
		if (ttl != m->ttl &&
		    !setsockopt(udp4, IPPROTO_IP, IP_MULTICAST_TTL, &ttl,
				sizeof(ttl)))
			m->ttl = ttl;
	} else {
		if (!m->have || memcmp(m->src, a, 16)) {
			idx = if_of(AF_INET6, a);
			if (!idx ||
			    setsockopt(udp6, IPPROTO_IPV6, IPV6_MULTICAST_IF,
				       &idx, sizeof(idx)))
				return -1;
			memcpy(m->src, a, 16);
			m->have = 1;
		}
		if (ttl != m->ttl &&
		    !setsockopt(udp6, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &ttl,
				sizeof(ttl)))
			m->ttl = ttl;
	}
	memcpy(src, a, 16);
	return 0;
}

/* soft_net_mcast_attach -- QP (of this process) is attached to MGID: the
 * host's agent forwards the group's packets to us */
void soft_net_mcast_attach(struct soft_qp *qp, const uint8_t *mgid)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	int i, first = 1;

	if (!net_enabled())
		return;
	pthread_mutex_lock(&soft_net_mtx);
	for (i = 0; i < net_nmc; i++) {
		if (memcmp(net_mcs[i].gid, mgid, 16))
			continue;
		first = 0;
		if (net_mcs[i].qpn == qpn)
			goto out;
	}
	if (net_nmc == NET_MAX_MC || net_start())
		goto out; /* then only this host reaches it */
	memcpy(net_mcs[net_nmc].gid, mgid, 16);
	net_mcs[net_nmc].qpn = qpn;
	net_nmc++;
	if (first)
		mc_tell(AG_MJOIN, mgid);
out:
	pthread_mutex_unlock(&soft_net_mtx);
}

/* soft_net_mcast_detach -- QPN leaves MGID (NULL: every group) */
void soft_net_mcast_detach(uint32_t qpn, const uint8_t *mgid)
{
	uint8_t gid[16];
	int i, k;

	pthread_mutex_lock(&soft_net_mtx);
	for (i = 0; i < net_nmc;) {
		if (net_mcs[i].qpn != qpn ||
		    (mgid && memcmp(net_mcs[i].gid, mgid, 16))) {
			i++;
			continue;
		}
		memcpy(gid, net_mcs[i].gid, 16);
		net_mcs[i] = net_mcs[--net_nmc];
		for (k = 0; k < net_nmc; k++)
			if (!memcmp(net_mcs[k].gid, gid, 16))
				break;
		if (k == net_nmc)
			mc_tell(AG_MLEAVE, gid);
	}
	pthread_mutex_unlock(&soft_net_mtx);
}

int soft_net_ud_send(struct soft_qp *qp, const struct soft_net_ud *d,
		     const struct iovec *iov, int niov)
{
	static int last_family;
	static uint8_t last_dst[16], last_src[16];
	uint8_t data[SOFT_UD_MTU];
	struct soft_net_qp nq;
	struct roce_pkt p;
	size_t off = 0;
	int i, r = -1;

	if (!net_enabled() || d->len > SOFT_UD_MTU)
		return -1;
	for (i = 0; i < niov; i++) {
		if (iov[i].iov_len > sizeof(data) - off)
			return -1;
		memcpy(data + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	if (off != d->len)
		return -1;
	memset(&nq, 0, sizeof(nq));
	nq.qp = qp;
	nq.dqpn = d->qpn & ROCE_QPN_MASK;
	nq.family = gid_split(d->dgid, nq.dst);
	memset(&p, 0, sizeof(p));
	p.bth.opcode = (uint8_t)(ROCE_UD | (d->has_imm ? ROCE_SEND_ONLY_IMM
						       : ROCE_SEND_ONLY));
	p.bth.se = (uint8_t) !!d->solicited;
	p.bth.psn = 0;
	p.deth.qkey = d->qkey;
	p.deth.sqpn = qp->qpx.qp_base.qp_num & ROCE_QPN_MASK;
	if (soft_link_ib) /* the LRH's SL and LNH (roce.h) */
		p.deth.resv = (uint8_t)((d->sl & ROCE_DETH_IB_SL) |
					(d->no_grh ? ROCE_DETH_IB_LOCAL : 0));
	p.imm = ntohl(d->imm);
	p.payload = data;
	p.payload_len = d->len;
	nq.ip.ttl = d->hop_limit;
	nq.ip.tos = d->tclass;
	nq.ip.flow = d->flow_label & 0xfffff;
	pthread_mutex_lock(&soft_net_mtx);
	if (net_start())
		goto out;
	if (soft_addr_is_mcast(nq.family, nq.dst)) {
		/* to a group: from the AH's source GID's interface */
		if (mc_route(nq.family, d->sgid, d->hop_limit, nq.src))
			goto out;
		pkt_send(&nq, &p);
		r = 0;
		goto out;
	}
	if (last_family != nq.family || memcmp(last_dst, nq.dst, 16)) {
		last_family = 0;
		if (src_for(nq.family, nq.dst, last_src))
			goto out;
		last_family = nq.family;
		memcpy(last_dst, nq.dst, 16);
	}
	memcpy(nq.src, last_src, 16);
	pkt_send(&nq, &p);
	r = 0;
out:
	pthread_mutex_unlock(&soft_net_mtx);
	return r;
}
