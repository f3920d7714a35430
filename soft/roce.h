/* SPDX-License-Identifier: MIT */
/*
 * roce.h -- the RoCE v2 wire codec: InfiniBand transport headers (BTH and
 * its extensions) over UDP port 4791, the invariant CRC, segmentation at
 * the path MTU.  Pure functions over byte buffers: no sockets, no verbs.
 *
 * The decoder takes untrusted bytes (the wire): every length is checked
 * against the buffer before use, and a packet that is truncated, carries
 * an unknown opcode or contradicts itself is refused with an error.
 *
 * Layout of a packet (all multi-byte fields big-endian except the ICRC,
 * which is sent least significant byte first, as Ethernet's FCS):
 *
 *   [IPv4 20 | IPv6 40] UDP 8 | BTH 12 | [DETH 8] [XRCETH 4] [RETH 16]
 *   [AtomicETH 28] [AETH 4] [AtomicAckETH 8] [ImmDt 4] [IETH 4] | payload |
 *   pad 0-3 | ICRC 4
 */
#ifndef SOFT_ROCE_H
#define SOFT_ROCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ROCE_UDP_PORT	4791
#define ROCE_BTH_LEN	12
#define ROCE_RETH_LEN	16
#define ROCE_AETH_LEN	4
#define ROCE_ATMETH_LEN 28
#define ROCE_ATMACK_LEN 8
#define ROCE_IMMDT_LEN	4
#define ROCE_IETH_LEN	4
#define ROCE_DETH_LEN	8
#define ROCE_XRCETH_LEN 4
#define ROCE_ICRC_LEN	4
#define ROCE_MAX_HDR_LEN \
	(ROCE_BTH_LEN + ROCE_XRCETH_LEN + ROCE_RETH_LEN + ROCE_IMMDT_LEN)
#define ROCE_PSN_MASK	  0xffffffu
#define ROCE_QPN_MASK	  0xffffffu
#define ROCE_DEFAULT_PKEY 0xffff
#define ROCE_MAX_PMTU	  4096

/* transport bases (top 3 bits of the opcode) */
enum {
	ROCE_RC = 0x00,
	ROCE_UC = 0x20,
	ROCE_UD = 0x60,
	/* IBA 9.2 table 38's XRC (101): RC's operations; a request carries
	 * the XRCETH, a response (ACK, READ response, atomic ACK) does not */
	ROCE_XRC = 0xa0,
};

/* operations (low 5 bits of the opcode), as the IBA numbers them */
enum {
	ROCE_SEND_FIRST = 0x00,
	ROCE_SEND_MIDDLE = 0x01,
	ROCE_SEND_LAST = 0x02,
	ROCE_SEND_LAST_IMM = 0x03,
	ROCE_SEND_ONLY = 0x04,
	ROCE_SEND_ONLY_IMM = 0x05,
	ROCE_WRITE_FIRST = 0x06,
	ROCE_WRITE_MIDDLE = 0x07,
	ROCE_WRITE_LAST = 0x08,
	ROCE_WRITE_LAST_IMM = 0x09,
	ROCE_WRITE_ONLY = 0x0a,
	ROCE_WRITE_ONLY_IMM = 0x0b,
	ROCE_READ_REQ = 0x0c,
	ROCE_READ_RESP_FIRST = 0x0d,
	ROCE_READ_RESP_MIDDLE = 0x0e,
	ROCE_READ_RESP_LAST = 0x0f,
	ROCE_READ_RESP_ONLY = 0x10,
	ROCE_ACK = 0x11,
	ROCE_ATOMIC_ACK = 0x12,
	ROCE_CMP_SWAP = 0x13,
	ROCE_FETCH_ADD = 0x14,
	ROCE_SEND_LAST_INV = 0x16,
	ROCE_SEND_ONLY_INV = 0x17,
	/* IBA 1.5 (rxe's IB_OPCODE_RC_ATOMIC_WRITE): RETH and 8 bytes of
	 * payload; answered by a zero-length READ_RESP_ONLY */
	ROCE_ATOMIC_WRITE = 0x1d,
};

/* what an opcode carries and where it sits in a message (roce_op_flags) */
enum {
	ROCE_F_VALID = 1 << 0,
	ROCE_F_RETH = 1 << 1,
	ROCE_F_AETH = 1 << 2,
	ROCE_F_ATMETH = 1 << 3,
	ROCE_F_ATMACK = 1 << 4,
	ROCE_F_IMMDT = 1 << 5,
	ROCE_F_IETH = 1 << 6,
	ROCE_F_DETH = 1 << 7,
	ROCE_F_PAYLOAD = 1 << 8, /* may carry payload */
	ROCE_F_FIRST = 1 << 9,	 /* first or only packet of a message */
	ROCE_F_LAST = 1 << 10,	 /* last or only packet of a message */
	ROCE_F_REQ = 1 << 11,	 /* sent by the requester */
	ROCE_F_XRCETH = 1 << 12, /* an XRC request */
};

/* AETH syndrome: type in bits 7-5, value in bits 4-0 */
enum {
	ROCE_AETH_ACK = 0x00,	  /* value: credit count (0x1f: invalid) */
	ROCE_AETH_RNR_NAK = 0x20, /* value: the RNR timer code */
	ROCE_AETH_NAK = 0x60,	  /* value: one of ROCE_NAK_* */
	ROCE_AETH_TYPE_MASK = 0xe0,
	ROCE_AETH_VALUE_MASK = 0x1f,
};

enum {
	ROCE_NAK_PSN_SEQ = 0,
	ROCE_NAK_INVALID_REQ = 1,
	ROCE_NAK_REMOTE_ACCESS = 2,
	ROCE_NAK_REMOTE_OP = 3,
	ROCE_NAK_INVALID_RD_REQ = 4,
};

struct roce_bth {
	uint8_t opcode;
	uint8_t se;	/* solicited event */
	uint8_t migreq; /* the M bit */
	uint8_t pad;	/* pad count, 0-3 */
	uint8_t tver;	/* transport header version, 0 */
	uint8_t fecn, becn;
	uint8_t ackreq;
	uint16_t pkey;
	uint32_t dqpn; /* 24 bits */
	uint32_t psn;  /* 24 bits */
};

struct roce_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t len;
};

struct roce_aeth {
	uint8_t syndrome;
	uint32_t msn; /* 24 bits */
};

struct roce_atmeth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add; /* swap value (CMP_SWAP) or addend (FETCH_ADD) */
	uint64_t compare;
};

/*
 * The DETH's reserved byte is zero on RoCE (and ignored there).  In
 * softrdma's InfiniBand mode (soft/iblink.c) it carries what an IB
 * datagram's LRH has and the RoCE v2 encapsulation lost: the SL (bits
 * 3:0) and whether the packet has a GRH (ROCE_DETH_IB_LOCAL set: LNH
 * "IBA local", no GRH).  The LRH's SLID is the source address's LID
 * (soft_ib_addr_lid), as a switch fabric sets it from the sending port.
 * The ICRC covers the byte.
 */
#define ROCE_DETH_IB_SL	   0x0f
#define ROCE_DETH_IB_LOCAL 0x10

struct roce_deth {
	uint32_t qkey;
	uint32_t sqpn; /* 24 bits */
	uint8_t resv;  /* the reserved byte (ROCE_DETH_IB_*) */
};

/* XRCETH (IBA 9.3.7 "XRC extended transport header"): 8 reserved bits and
 * the 24-bit number of the XRC SRQ that takes the message */
#define ROCE_SRQN_MASK 0xffffffu

/*
 * One decoded (or to be encoded) transport packet.  Only the extension
 * headers that the opcode carries (roce_op_flags) are read or written; the
 * others are ignored.  payload points into the decoded buffer.
 */
struct roce_pkt {
	struct roce_bth bth;
	struct roce_deth deth;
	uint32_t xrc_srqn; /* XRCETH: 24 bits */
	struct roce_reth reth;
	struct roce_atmeth atmeth;
	struct roce_aeth aeth;
	uint64_t atmack; /* AtomicAckETH: the original remote data */
	uint32_t imm;	 /* ImmDt, as on the wire (big-endian value) */
	uint32_t ieth;	 /* IETH: the rkey to invalidate */
	const uint8_t *payload;
	uint32_t payload_len; /* without the pad */
};

/*
 * roce_pkey_ours -- a packet's BTH P_Key matches our QPs' (the default
 * partition's 0xFFFF, every QP's pkey_index 0): the same 15-bit key, of
 * which either side is a full member (rxe_recv.c's pkey_match: ours is);
 * roce_decode refuses a packet of another partition (-EACCES), which its
 * receivers drop silently, as rxe's check_keys and an HCA drop it
 */
static inline int roce_pkey_ours(uint16_t pkey)
{
	return (pkey & 0x7fff) == (ROCE_DEFAULT_PKEY & 0x7fff);
}

/* roce_op_flags -- ROCE_F_* of OPCODE; 0 for an opcode we do not speak */
unsigned int roce_op_flags(uint8_t opcode);

/* roce_op_name -- OPCODE's operation ("SEND_ONLY"), "UNKNOWN" if none */
const char *roce_op_name(uint8_t opcode);

/* roce_hdr_len -- BTH plus the extension headers of OPCODE; 0 if unknown */
size_t roce_hdr_len(uint8_t opcode);

/* roce_pad -- pad bytes that bring LEN to a multiple of 4 */
static inline unsigned int roce_pad(size_t len)
{
	return (unsigned int)(-len & 3);
}

/*
 * roce_encode -- write P's transport packet (BTH, extension headers,
 * payload, zero pad and a zero ICRC slot) into BUF of CAP bytes.  The pad
 * count is computed from payload_len (p->bth.pad is ignored).  Returns the
 * bytes written (BTH to ICRC inclusive), -EINVAL for an unknown opcode, a
 * payload on an opcode without one, or a field out of range, -EMSGSIZE if
 * CAP is too small.  The ICRC is filled by roce_icrc_set once the IP and
 * UDP headers are known.
 */
ssize_t roce_encode(const struct roce_pkt *p, uint8_t *buf, size_t cap);

/*
 * roce_decode -- parse BUF of LEN bytes (a UDP payload: BTH to ICRC
 * inclusive) into P.  Does not check the ICRC (that needs the IP header:
 * roce_icrc_check).  Returns 0, -EBADMSG for a truncated packet or a pad
 * count larger than the payload, -EINVAL for an unknown opcode, a
 * transport version other than 0, a payload or pad on an opcode that
 * carries none, -EACCES for a P_Key not of the default partition (the
 * receiver drops it, as rxe's check_keys).
 */
int roce_decode(const uint8_t *buf, size_t len, struct roce_pkt *p);

/* AETH helpers */
static inline uint8_t roce_aeth_type(uint8_t syndrome)
{
	return syndrome & ROCE_AETH_TYPE_MASK;
}

static inline uint8_t roce_aeth_value(uint8_t syndrome)
{
	return syndrome & ROCE_AETH_VALUE_MASK;
}

/*
 * Timers.  roce_rnr_timer_ns: the delay an RNR NAK's 5-bit timer code
 * (and a QP's min_rnr_timer) asks for, per the IBA's table (0 = 655.36
 * ms, 1 = 0.01 ms ... 31 = 491.52 ms); 0 for a code over 31.
 * roce_timeout_ns: the local ACK timeout of a QP's 5-bit timeout
 * attribute, 4.096 us * 2^timeout; 0 for timeout 0 (wait forever) or a
 * value over 31.
 */
uint64_t roce_rnr_timer_ns(unsigned int code);
uint64_t roce_timeout_ns(unsigned int timeout);

/* PSN arithmetic modulo 2^24 */
static inline uint32_t roce_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & ROCE_PSN_MASK;
}

/* roce_psn_cmp -- <0, 0, >0 as A is before, at or after B (within 2^23) */
static inline int32_t roce_psn_cmp(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

/*
 * Segmentation.  roce_mtu_bytes maps an ibv_mtu value (1 = 256 ... 5 =
 * 4096) to bytes, 0 for anything else.  roce_npkts is the packet count of
 * a LEN-byte message (a zero-byte message is one packet).  roce_seg_len is
 * the payload of packet INDEX.  roce_seg_opcode picks the opcode of packet
 * INDEX of NPKTS for a message of kind OP_ONLY (a *_ONLY or *_ONLY_*
 * opcode with its transport base: e.g. ROCE_RC | ROCE_WRITE_ONLY_IMM, or
 * ROCE_RC | ROCE_READ_RESP_ONLY); returns -EINVAL when OP_ONLY is not such
 * an opcode, the transport cannot segment it (UD) or INDEX >= NPKTS.
 */
uint32_t roce_mtu_bytes(int ibv_mtu);
uint32_t roce_npkts(uint64_t len, uint32_t pmtu);
uint32_t roce_seg_len(uint64_t len, uint32_t pmtu, uint32_t index);
int roce_seg_opcode(uint8_t op_only, uint32_t index, uint32_t npkts);

/*
 * The invariant CRC.  PKT starts at the IP header (IPv4 without options or
 * IPv6 without extension headers, followed by UDP) and LEN covers it up to
 * and including the 4-byte ICRC at its end.  The variant fields (IPv4 TOS,
 * TTL and header checksum; IPv6 traffic class, flow label and hop limit;
 * the UDP checksum; the BTH's resv8a byte) are taken as all ones, preceded
 * by 8 bytes of 0xff in place of the LRH.
 *
 * roce_icrc_calc stores the ICRC the packet must carry; roce_icrc_set
 * writes it; roce_icrc_check returns 0 when it matches, -EBADMSG if not.
 * All return -EINVAL for a buffer that is not IP/UDP carrying at least a
 * BTH and an ICRC, or whose IP/UDP lengths disagree with LEN.
 */
int roce_icrc_calc(const uint8_t *pkt, size_t len, uint32_t *icrc);
int roce_icrc_set(uint8_t *pkt, size_t len);
int roce_icrc_check(const uint8_t *pkt, size_t len);

/*
 * UDP segmentation offload (GSO) and the ICRC.  The kernel (or a NIC) cuts
 * a GSO send from an unconnected socket with DF set into datagrams whose
 * IPv4 identifications are 0, 1, 2 ... (segment k: k), and the ICRC covers
 * that field; a receiver cannot read it.  The CRC is linear, so the ICRCs
 * of one packet under two identifications differ by a term that depends
 * only on the packet's length and the two identifications' XOR.
 *
 * roce_icrc_id_delta is that term for an IPv4 packet of LEN bytes (IP
 * header to ICRC inclusive) and identifications differing by ID_XOR: a
 * sender XORs it into an ICRC computed with identification 0 for segment
 * k (roce_icrc_xor); 0 for ID_XOR 0.  roce_icrc_check_seg checks a packet
 * whose headers were rebuilt with identification 0 as if it carried
 * SEG, then any of 0 to ROCE_GSO_MAX_SEGS - 1 (a datagram the kernel cut
 * before it reached the socket, or one of a GRO-coalesced run of
 * separate sends, all 0); IPv6 has no identification: a plain check.
 */
#define ROCE_GSO_MAX_SEGS 64 /* the kernel's UDP_MAX_SEGMENTS until 6.9 */

uint32_t roce_icrc_id_delta(size_t len, unsigned int id_xor);
void roce_icrc_xor(uint8_t *pkt, size_t len, uint32_t delta);
int roce_icrc_check_seg(const uint8_t *pkt, size_t len, unsigned int seg);

/* crc32 as Ethernet's (reflected 0xedb88320), running state in and out */
uint32_t roce_crc32(uint32_t crc, const void *buf, size_t len);

/*
 * roce_ip_udp -- write an IPv4 (FAMILY AF_INET: 20 bytes, DF, id 0) or
 * IPv6 (AF_INET6: 40 bytes) header and a UDP header for a UDP payload of
 * IB_LEN bytes into BUF (CAP bytes), with correct IP and UDP checksums.
 * SRC/DST are 4 or 16 address bytes.  Returns the header bytes written, or
 * -EINVAL / -EMSGSIZE.  The UDP checksum covers the payload, so BUF must
 * already hold the IB_LEN payload bytes after the headers.
 */
struct roce_ip {
	int family;
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	uint8_t ttl, tos;    /* hop limit and traffic class for IPv6 */
	uint32_t flow_label; /* IPv6 only, 20 bits */
	uint16_t id;	     /* IPv4 identification */
};

ssize_t roce_ip_udp(const struct roce_ip *ip, uint8_t *buf, size_t cap,
		    size_t ib_len);

/*
 * roce_ip_udp_hdr -- the same headers without the checksums (IPv4 header
 * and UDP checksums 0), which is all the ICRC needs: it masks both, so a
 * packet a socket sends or received has its ICRC set or checked over
 * these without a pass over the payload for a checksum the kernel makes
 * (or checked) itself.  BUF need not hold the payload yet.
 */
ssize_t roce_ip_udp_hdr(const struct roce_ip *ip, uint8_t *buf, size_t cap,
			size_t ib_len);

/* roce_ip_udp_len -- header bytes roce_ip_udp writes for FAMILY, 0 if none */
size_t roce_ip_udp_len(int family);

#endif /* SOFT_ROCE_H */
