/* SPDX-License-Identifier: MIT */
/*
 * iblink.c -- the InfiniBand mode between hosts (SOFTRDMA_LINK=ib with
 * SOFTRDMA_NET=1): each of the device's two ports on a rail of its own.
 *
 * Port p is bound to an interface (a rail): SOFTRDMA_IB_NETDEV="IF1,IF2"
 * names them, else they are the host's first two interfaces, loopback
 * aside, that have an IPv4 address (in the order the kernel lists them).
 * The packets are still RoCE v2 datagrams over UDP between the hosts;
 * what the IB mode adds is the addressing an IB subnet has:
 *  - each port has a LID.  By default it is the low 16 bits of its rail's
 *    IPv4 address (10.231.1.2 -> LID 0x0102 = 258), so the addressing plan
 *    is the subnet manager's table; SOFTRDMA_LID_MAP=FILE gives the table
 *    instead, one "LID IPV4-ADDRESS" pair a line (LID decimal or 0x-hex,
 *    unicast: 1..0xbfff; '#' starts a comment), as an SM's LID assignment
 *    would, and a port's LID is the one its rail's address has there;
 *  - a LID-routed address vector (is_global 0) reaches the address its
 *    DLID has: the table's, or by default the address in the local port's
 *    rail /16 with the DLID as its low 16 bits (from 10.231.1.1, DLID
 *    0x0102 is 10.231.1.2); a global one (a GRH) the address in its DGID
 *    (an IPv4-mapped GID), as in the RoCE mode;
 *  - the QP's packets go to that address from the local port's rail
 *    address, and only the path's peer address speaks for the QP;
 *  - a UD datagram carries its AV's SL and whether it has a GRH in the
 *    DETH's reserved byte (roce.h), and its receiver reports as SLID
 *    the LID of the address it came from (soft_ib_addr_lid), as a
 *    switch fabric sets the SLID from the sending port.
 * A migration (apm.c) moves the QP's packets to its alternate path's
 * addresses; a responder migrates when a packet of its peer comes on the
 * alternate path (soft_ib_net_in).  A DLID that maps to no address is an
 * unreachable path (the QP's sends time out, RETRY_EXC_ERR), as on a
 * subnet where the SM has no route to it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "softrdma.h"

#define LIDMAP_MAX 4096
#define IF_POLL_NS 10000000ull /* the rails' carrier read every 10 ms */

struct rail {
	char ifname[IF_NAMESIZE];
	uint32_t addr; /* network order; 0: none */
};

struct lidmap {
	uint16_t lid;
	uint32_t addr; /* network order */
};

int soft_ib_net;
static struct rail rails[SOFT_IB_PORTS + 1];
static struct lidmap *lmap;
static size_t lmap_n;
static int lmap_on;
static _Atomic uint32_t if_down;    /* bit p: port p's interface is down */
static _Atomic uint64_t if_read_at; /* ns: if_down last read */
static int if_fd = -1;

/* parse_lid -- a unicast LID in decimal or 0x-hex; 0 if none */
static uint16_t parse_lid(const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || !v || v >= 0xc000)
		return 0;
	return (uint16_t)v;
}

/* map_load -- SOFTRDMA_LID_MAP: 0, or -1 (said why) */
static int map_load(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[256];
	unsigned int ln = 0;

	if (!f) {
		SOFT_WARN("softrdma: SOFTRDMA_LID_MAP=%s: %s\n", path,
			  strerror(errno));
		return -1;
	}
	lmap = calloc(LIDMAP_MAX, sizeof(*lmap));
	if (!lmap) {
		fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char lid[64], addr[64], extra[2];
		struct in_addr a;
		uint16_t l;
		size_t i;
		char *h = strchr(line, '#');
		int n;

		ln++;
		if (h)
			*h = 0;
		n = sscanf(line, "%63s %63s %1s", lid, addr, extra);
		if (n <= 0)
			continue;
		l = n == 2 ? parse_lid(lid) : 0;
		if (!l || inet_pton(AF_INET, addr, &a) != 1) {
			SOFT_WARN("softrdma: SOFTRDMA_LID_MAP=%s line %u: not "
				  "\"LID IPV4-ADDRESS\" with a unicast LID\n",
				  path, ln);
			goto bad;
		}
		for (i = 0; i < lmap_n; i++)
			if (lmap[i].lid == l || lmap[i].addr == a.s_addr) {
				SOFT_WARN("softrdma: SOFTRDMA_LID_MAP=%s line "
					  "%u: LID %u or %s given twice\n",
					  path, ln, l, addr);
				goto bad;
			}
		if (lmap_n == LIDMAP_MAX) {
			SOFT_WARN("softrdma: SOFTRDMA_LID_MAP=%s: more than %d "
				  "entries\n",
				  path, LIDMAP_MAX);
			goto bad;
		}
		lmap[lmap_n].lid = l;
		lmap[lmap_n].addr = a.s_addr;
		lmap_n++;
	}
	fclose(f);
	lmap_on = 1;
	return 0;
bad:
	fclose(f);
	free(lmap);
	lmap = NULL;
	lmap_n = 0;
	return -1;
}

/* rail_named -- the IPv4 address of interface NAME into port p */
static int rail_named(const struct ifaddrs *ifa, uint32_t p, const char *name)
{
	const struct ifaddrs *i;

	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    i->ifa_name && !strcmp(i->ifa_name, name) &&
		    strlen(name) < IF_NAMESIZE) {
			strcpy(rails[p].ifname, name);
			rails[p].addr = ((struct sockaddr_in *)i->ifa_addr)
						->sin_addr.s_addr;
			return 0;
		}
	return -1;
}

/* rails_pick -- the ports' interfaces; 0, or -1 (said why) */
static int rails_pick(const struct ifaddrs *ifa)
{
	const char *e = getenv("SOFTRDMA_IB_NETDEV");
	const struct ifaddrs *i;
	uint32_t p = 1;

	if (e && *e) {
		char buf[2 * IF_NAMESIZE + 2], *comma;

		if (strlen(e) >= sizeof(buf) || !(comma = strchr(e, ',')))
			goto bad_env;
		strcpy(buf, e);
		comma = buf + (comma - e);
		*comma = 0;
		if (rail_named(ifa, 1, buf) || rail_named(ifa, 2, comma + 1) ||
		    !strcmp(buf, comma + 1))
			goto bad_env;
		return 0;
	}
	for (i = ifa; i && p <= SOFT_IB_PORTS; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !i->ifa_name ||
		    (p == 2 && !strcmp(rails[1].ifname, i->ifa_name)))
			continue;
		if (!rail_named(ifa, p, i->ifa_name))
			p++;
	}
	if (p > SOFT_IB_PORTS)
		return 0;
	SOFT_WARN("softrdma: SOFTRDMA_LINK=ib with SOFTRDMA_NET=1 needs two "
		  "interfaces with IPv4 addresses (one rail a port); found "
		  "%u: the ports stay on this host\n",
		  p - 1);
	return -1;
bad_env:
	SOFT_WARN("softrdma: SOFTRDMA_IB_NETDEV=%s: not two different "
		  "interfaces with IPv4 addresses (\"IF1,IF2\"); the ports "
		  "stay on this host\n",
		  e);
	return -1;
}

/* lid_of_addr -- the LID an address has (0: none) */
static uint16_t lid_of_addr(uint32_t addr)
{
	size_t i;
	uint32_t low = ntohl(addr) & 0xffff;

	if (!lmap_on)
		return low && low < 0xc000 ? (uint16_t)low : 0;
	for (i = 0; i < lmap_n; i++)
		if (lmap[i].addr == addr)
			return lmap[i].lid;
	return 0;
}

/*
 * soft_ib_net_init -- dev_init, IB mode: bind the ports to their rails
 * and give them their LIDs (lids[1..2]); 1 when the IB mode spans hosts,
 * 0 when it stays on this host (no SOFTRDMA_NET, or no two rails: lids
 * untouched)
 */
int soft_ib_net_init(uint16_t *lids)
{
	const char *m = getenv("SOFTRDMA_LID_MAP");
	struct ifaddrs *ifa = NULL;
	uint16_t l[SOFT_IB_PORTS + 1];
	uint32_t p;
	int r;

	if (!soft_net_enabled())
		return 0;
	if (m && *m && map_load(m))
		return 0;
	if (getifaddrs(&ifa))
		return 0;
	r = rails_pick(ifa);
	freeifaddrs(ifa);
	if (r)
		goto off;
	for (p = 1; p <= SOFT_IB_PORTS; p++) {
		char a[INET_ADDRSTRLEN];

		l[p] = lid_of_addr(rails[p].addr);
		if (l[p])
			continue;
		inet_ntop(AF_INET, &rails[p].addr, a, sizeof(a));
		SOFT_WARN("softrdma: port %u's rail %s (%s) has no LID (%s); "
			  "the ports stay on this host\n",
			  p, rails[p].ifname, a,
			  lmap_on ? "not in SOFTRDMA_LID_MAP"
				  : "its low 16 bits are no unicast LID");
		goto off;
	}
	if (l[1] == l[2])
		goto off;
	for (p = 1; p <= SOFT_IB_PORTS; p++)
		lids[p] = l[p];
	soft_ib_net = 1;
	return 1;
off:
	memset(rails, 0, sizeof(rails));
	free(lmap);
	lmap = NULL;
	lmap_n = 0;
	lmap_on = 0;
	return 0;
}

/* soft_ib_lid_addr -- the address DLID has, seen from port p (network
 * order); 0, or -1 when it has none */
int soft_ib_lid_addr(uint32_t port, uint16_t dlid, uint32_t *addr)
{
	size_t i;

	if (!soft_ib_net || !soft_port_ok(port) || !dlid || dlid >= 0xc000)
		return -1;
	if (!lmap_on) {
		*addr = (rails[port].addr & htonl(0xffff0000u)) | htonl(dlid);
		return 0;
	}
	for (i = 0; i < lmap_n; i++)
		if (lmap[i].lid == dlid) {
			*addr = lmap[i].addr;
			return 0;
		}
	return -1;
}

/* soft_ib_addr_lid -- the LID of an IPv4 address (network order; 0: it
 * has none) */
uint16_t soft_ib_addr_lid(uint32_t addr)
{
	return soft_ib_net ? lid_of_addr(addr) : 0;
}

/* soft_ib_addr_port -- the local port whose rail has address addr (0:
 * none) */
uint32_t soft_ib_addr_port(uint32_t addr)
{
	uint32_t p;

	for (p = 1; soft_ib_net && p <= SOFT_IB_PORTS; p++)
		if (rails[p].addr == addr)
			return p;
	return 0;
}

/* soft_ib_rail_if -- port p's interface name (NULL: none) */
const char *soft_ib_rail_if(uint32_t port)
{
	return soft_ib_net && soft_port_ok(port) ? rails[port].ifname : NULL;
}

/* path_addr -- the peer's address on a path (port, AV) */
static int path_addr(uint32_t port, const struct ibv_ah_attr *ah, int *family,
		     uint8_t *dst)
{
	static const uint8_t v4m[12] = {0, 0, 0, 0, 0,	  0,
					0, 0, 0, 0, 0xff, 0xff};
	const uint8_t *g = ah->grh.dgid.raw;
	uint32_t a;

	if (ah->is_global) {
		if (!memcmp(g, v4m, 12)) {
			*family = AF_INET;
			memset(dst, 0, 16);
			memcpy(dst, g + 12, 4);
		} else {
			*family = AF_INET6;
			memcpy(dst, g, 16);
		}
		return 0;
	}
	if (soft_ib_lid_addr(port, ah->dlid, &a))
		return -1;
	*family = AF_INET;
	memset(dst, 0, 16);
	memcpy(dst, &a, 4);
	return 0;
}

/* soft_ib_path_addr -- the peer's address on the QP's primary path (alt
 * 0) or alternate (1); 0, or -1 when none reaches it */
int soft_ib_path_addr(const struct soft_qp *qp, int alt, int *family,
		      uint8_t *dst)
{
	const struct ibv_qp_attr *a = &qp->attr;

	if (alt && !qp->alt_valid)
		return -1;
	return alt ? path_addr(a->alt_port_num, &a->alt_ah_attr, family, dst)
		   : path_addr(a->port_num, &a->ah_attr, family, dst);
}

/*
 * soft_ib_net_in -- a packet for the QP from SRC (FAMILY), its BTH's
 * MigReq bit MIGREQ, while the primary path's peer address is CUR
 * (CUR_FAMILY): 0 when it came on the primary path, 1 when it came on
 * the alternate with MigReq set and the QP migrated (a responder follows
 * its requester: apm.c), -1 otherwise (dropped, as an HCA drops a packet
 * whose SLID is not the path's).  MigReq keeps a packet that was sent on
 * the old path before the peer migrated, and delivered late (held in a
 * neighbour queue while the rail was cut), from moving the QP back onto
 * that path; ctx lock held
 */
int soft_ib_net_in(struct soft_qp *qp, int family, const uint8_t *src,
		   int migreq, int cur_family, const uint8_t *cur)
{
	size_t n = family == AF_INET ? 4 : 16;
	uint8_t alt[16];
	int f;

	if (family == cur_family && !memcmp(src, cur, n)) {
		qp->mig_unacked = 0; /* the peer answers on this path */
		return 0;
	}
	if (!migreq || soft_ib_path_addr(qp, 1, &f, alt) || f != family ||
	    memcmp(src, alt, n))
		return -1;
	return soft_apm_follow(qp) ? 1 : -1;
}

/* if_is_up -- an interface up with carrier (rxe's port state) */
static int if_is_up(const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, name, strlen(name) + 1);
	if (ioctl(if_fd, SIOCGIFFLAGS, &ifr))
		return 0; /* gone: down */
	return (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
}

/*
 * soft_ib_if_down -- the ports whose rail interface is down (bit p), as
 * read at most 10 ms ago: a port follows its interface's carrier, as
 * rxe's does (a pulled cable: PORT_ERR, the port DOWN).  Read on the
 * progress passes (soft_port_poll), so a process that makes none sees a
 * change at its next one.
 */
uint32_t soft_ib_if_down(void)
{
	uint64_t now, at;
	uint32_t m = 0, p;

	if (!soft_ib_net)
		return 0;
	now = soft_now_ns();
	at = atomic_load_explicit(&if_read_at, memory_order_relaxed);
	if (at && now - at < IF_POLL_NS)
		return atomic_load_explicit(&if_down, memory_order_relaxed);
	if (!atomic_compare_exchange_strong(&if_read_at, &at, now))
		return atomic_load_explicit(&if_down, memory_order_relaxed);
	if (if_fd < 0)
		if_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (if_fd < 0)
		return 0;
	for (p = 1; p <= SOFT_IB_PORTS; p++)
		if (!if_is_up(rails[p].ifname))
			m |= 1u << p;
	atomic_store_explicit(&if_down, m, memory_order_relaxed);
	return m;
}

/* soft_ib_sa_port -- rdma_cm: the port an id bound to address sa uses
 * (its rail's; port 1 when no rail has it, or in the other modes) */
uint8_t soft_ib_sa_port(const struct sockaddr *sa)
{
	uint32_t p;

	if (!soft_ib_net || !sa || sa->sa_family != AF_INET)
		return 1;
	p = soft_ib_addr_port(
		((const struct sockaddr_in *)sa)->sin_addr.s_addr);
	return p ? (uint8_t)p : 1;
}

/* soft_ib_cm_av -- rdma_cm's RTR address vector between hosts in the IB
 * mode: LID-routed to the LID of the peer's address (an IPv4-mapped
 * DGID), as a path record would give; unchanged when that address has no
 * LID (then the GRH routes it) */
void soft_ib_cm_av(struct ibv_ah_attr *ah)
{
	static const uint8_t v4m[12] = {0, 0, 0, 0, 0,	  0,
					0, 0, 0, 0, 0xff, 0xff};
	uint32_t a;
	uint16_t lid;

	if (!soft_ib_net || !ah->is_global || memcmp(ah->grh.dgid.raw, v4m, 12))
		return;
	memcpy(&a, ah->grh.dgid.raw + 12, 4);
	lid = soft_ib_addr_lid(a);
	if (!lid || soft_lid_port(lid))
		return; /* no LID, or one of ours (this host: the GRH) */
	ah->dlid = lid;
	ah->src_path_bits = 0;
	ah->is_global = 0;
	memset(&ah->grh, 0, sizeof(ah->grh));
}
