// SPDX-License-Identifier: MIT
/*
 * roce.c -- the RoCE v2 wire codec (see roce.h): opcode table, encode and
 * decode of the transport headers, the invariant CRC, segmentation.
 *
 * Written from the InfiniBand Architecture Specification (vol. 1, ch. 9
 * "Transport layer" and annex A17 "RoCE v2"); the ICRC masking matches
 * what the Linux rxe driver puts on the wire.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "roce.h"

#define F(x) ROCE_F_##x

/* what each operation carries, before the transport is applied */
static const uint16_t op_flags[32] = {
	[ROCE_SEND_FIRST] = F(PAYLOAD) | F(FIRST) | F(REQ),
	[ROCE_SEND_MIDDLE] = F(PAYLOAD) | F(REQ),
	[ROCE_SEND_LAST] = F(PAYLOAD) | F(LAST) | F(REQ),
	[ROCE_SEND_LAST_IMM] = F(IMMDT) | F(PAYLOAD) | F(LAST) | F(REQ),
	[ROCE_SEND_ONLY] = F(PAYLOAD) | F(FIRST) | F(LAST) | F(REQ),
	[ROCE_SEND_ONLY_IMM] =
		F(IMMDT) | F(PAYLOAD) | F(FIRST) | F(LAST) | F(REQ),
	[ROCE_WRITE_FIRST] = F(RETH) | F(PAYLOAD) | F(FIRST) | F(REQ),
	[ROCE_WRITE_MIDDLE] = F(PAYLOAD) | F(REQ),
	[ROCE_WRITE_LAST] = F(PAYLOAD) | F(LAST) | F(REQ),
	[ROCE_WRITE_LAST_IMM] = F(IMMDT) | F(PAYLOAD) | F(LAST) | F(REQ),
	[ROCE_WRITE_ONLY] = F(RETH) | F(PAYLOAD) | F(FIRST) | F(LAST) | F(REQ),
	[ROCE_WRITE_ONLY_IMM] =
		F(RETH) | F(IMMDT) | F(PAYLOAD) | F(FIRST) | F(LAST) | F(REQ),
	[ROCE_READ_REQ] = F(RETH) | F(FIRST) | F(LAST) | F(REQ),
	[ROCE_READ_RESP_FIRST] = F(AETH) | F(PAYLOAD) | F(FIRST),
	[ROCE_READ_RESP_MIDDLE] = F(PAYLOAD),
	[ROCE_READ_RESP_LAST] = F(AETH) | F(PAYLOAD) | F(LAST),
	[ROCE_READ_RESP_ONLY] = F(AETH) | F(PAYLOAD) | F(FIRST) | F(LAST),
	[ROCE_ACK] = F(AETH) | F(FIRST) | F(LAST),
	[ROCE_ATOMIC_ACK] = F(AETH) | F(ATMACK) | F(FIRST) | F(LAST),
	[ROCE_CMP_SWAP] = F(ATMETH) | F(FIRST) | F(LAST) | F(REQ),
	[ROCE_FETCH_ADD] = F(ATMETH) | F(FIRST) | F(LAST) | F(REQ),
	[ROCE_SEND_LAST_INV] = F(IETH) | F(PAYLOAD) | F(LAST) | F(REQ),
	[ROCE_SEND_ONLY_INV] =
		F(IETH) | F(PAYLOAD) | F(FIRST) | F(LAST) | F(REQ),
	[ROCE_ATOMIC_WRITE] =
		F(RETH) | F(PAYLOAD) | F(FIRST) | F(LAST) | F(REQ),
};

static const char *const op_names[32] = {
	[ROCE_SEND_FIRST] = "SEND_FIRST",
	[ROCE_SEND_MIDDLE] = "SEND_MIDDLE",
	[ROCE_SEND_LAST] = "SEND_LAST",
	[ROCE_SEND_LAST_IMM] = "SEND_LAST_IMM",
	[ROCE_SEND_ONLY] = "SEND_ONLY",
	[ROCE_SEND_ONLY_IMM] = "SEND_ONLY_IMM",
	[ROCE_WRITE_FIRST] = "WRITE_FIRST",
	[ROCE_WRITE_MIDDLE] = "WRITE_MIDDLE",
	[ROCE_WRITE_LAST] = "WRITE_LAST",
	[ROCE_WRITE_LAST_IMM] = "WRITE_LAST_IMM",
	[ROCE_WRITE_ONLY] = "WRITE_ONLY",
	[ROCE_WRITE_ONLY_IMM] = "WRITE_ONLY_IMM",
	[ROCE_READ_REQ] = "READ_REQ",
	[ROCE_READ_RESP_FIRST] = "READ_RESP_FIRST",
	[ROCE_READ_RESP_MIDDLE] = "READ_RESP_MIDDLE",
	[ROCE_READ_RESP_LAST] = "READ_RESP_LAST",
	[ROCE_READ_RESP_ONLY] = "READ_RESP_ONLY",
	[ROCE_ACK] = "ACK",
	[ROCE_ATOMIC_ACK] = "ATOMIC_ACK",
	[ROCE_CMP_SWAP] = "CMP_SWAP",
	[ROCE_FETCH_ADD] = "FETCH_ADD",
	[ROCE_SEND_LAST_INV] = "SEND_LAST_INV",
	[ROCE_SEND_ONLY_INV] = "SEND_ONLY_INV",
	[ROCE_ATOMIC_WRITE] = "ATOMIC_WRITE",
};

unsigned int roce_op_flags(uint8_t opcode)
{
	unsigned int op = opcode & 0x1f, fl = op_flags[op];

	if (!fl)
		return 0;
	switch (opcode & 0xe0) {
	case ROCE_RC:
		break;
	case ROCE_UC:
		/* sends and writes, no invalidate; no responses */
		if (op > ROCE_WRITE_ONLY_IMM)
			return 0;
		break;
	case ROCE_UD:
		if (op != ROCE_SEND_ONLY && op != ROCE_SEND_ONLY_IMM)
			return 0;
		fl |= F(DETH);
		break;
	case ROCE_XRC:
		/* table 38 gives XRC RC's operations up to SEND_ONLY_INV;
		 * IBA 1.5's ATOMIC_WRITE is not one softrdma sends on XRC */
		if (op == ROCE_ATOMIC_WRITE)
			return 0;
		if (fl & F(REQ))
			fl |= F(XRCETH);
		break;
	default:
		return 0;
	}
	return fl | F(VALID);
}

const char *roce_op_name(uint8_t opcode)
{
	return roce_op_flags(opcode) ? op_names[opcode & 0x1f] : "UNKNOWN";
}

static size_t flags_hdr_len(unsigned int fl)
{
	size_t n = ROCE_BTH_LEN;

	if (fl & F(DETH))
		n += ROCE_DETH_LEN;
	if (fl & F(XRCETH))
		n += ROCE_XRCETH_LEN;
	if (fl & F(RETH))
		n += ROCE_RETH_LEN;
	if (fl & F(ATMETH))
		n += ROCE_ATMETH_LEN;
	if (fl & F(AETH))
		n += ROCE_AETH_LEN;
	if (fl & F(ATMACK))
		n += ROCE_ATMACK_LEN;
	if (fl & F(IMMDT))
		n += ROCE_IMMDT_LEN;
	if (fl & F(IETH))
		n += ROCE_IETH_LEN;
	return n;
}

size_t roce_hdr_len(uint8_t opcode)
{
	unsigned int fl = roce_op_flags(opcode);

	return fl ? flags_hdr_len(fl) : 0;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

ssize_t roce_encode(const struct roce_pkt *p, uint8_t *buf, size_t cap)
{
	const struct roce_bth *b = &p->bth;
	unsigned int fl = roce_op_flags(b->opcode);
	unsigned int pad;
	size_t hl, total;
	uint8_t *q;

	if (!fl)
		return -EINVAL;
	if (b->psn > ROCE_PSN_MASK || b->dqpn > ROCE_QPN_MASK || b->tver > 15)
		return -EINVAL;
	if ((fl & F(AETH)) && p->aeth.msn > ROCE_PSN_MASK)
		return -EINVAL;
	if ((fl & F(DETH)) && p->deth.sqpn > ROCE_QPN_MASK)
		return -EINVAL;
	if ((fl & F(XRCETH)) && p->xrc_srqn > ROCE_SRQN_MASK)
		return -EINVAL;
	if (p->payload_len && (!(fl & F(PAYLOAD)) || !p->payload))
		return -EINVAL;
	if (p->payload_len > ROCE_MAX_PMTU)
		return -EMSGSIZE;
	hl = flags_hdr_len(fl);
	pad = roce_pad(p->payload_len);
	total = hl + p->payload_len + pad + ROCE_ICRC_LEN;
	if (cap < total)
		return -EMSGSIZE;

	buf[0] = b->opcode;
	buf[1] = (uint8_t)((b->se ? 0x80 : 0) | (b->migreq ? 0x40 : 0) |
			   pad << 4 | (b->tver & 0xf));
	put16(buf + 2, b->pkey);
	put32(buf + 4, (b->fecn ? 0x80000000u : 0) |
			       (b->becn ? 0x40000000u : 0) | b->dqpn);
	put32(buf + 8, (b->ackreq ? 0x80000000u : 0) | b->psn);
	q = buf + ROCE_BTH_LEN;
	if (fl & F(DETH)) {
		put32(q, p->deth.qkey);
		put32(q + 4, (uint32_t)p->deth.resv << 24 | p->deth.sqpn);
		q += ROCE_DETH_LEN;
	}
	if (fl & F(XRCETH)) {
		put32(q, p->xrc_srqn);
		q += ROCE_XRCETH_LEN;
	}
	if (fl & F(RETH)) {
		put64(q, p->reth.va);
		put32(q + 8, p->reth.rkey);
		put32(q + 12, p->reth.len);
		q += ROCE_RETH_LEN;
	}
	if (fl & F(ATMETH)) {
		put64(q, p->atmeth.va);
		put32(q + 8, p->atmeth.rkey);
		put64(q + 12, p->atmeth.swap_add);
		put64(q + 20, p->atmeth.compare);
		q += ROCE_ATMETH_LEN;
	}
	if (fl & F(AETH)) {
		put32(q, (uint32_t)p->aeth.syndrome << 24 | p->aeth.msn);
		q += ROCE_AETH_LEN;
	}
	if (fl & F(ATMACK)) {
		put64(q, p->atmack);
		q += ROCE_ATMACK_LEN;
	}
	if (fl & F(IMMDT)) {
		put32(q, p->imm);
		q += ROCE_IMMDT_LEN;
	}
	if (fl & F(IETH)) {
		put32(q, p->ieth);
		q += ROCE_IETH_LEN;
	}
	if (p->payload_len)
		memcpy(q, p->payload, p->payload_len);
	q += p->payload_len;
	memset(q, 0, pad + ROCE_ICRC_LEN);
	return (ssize_t)total;
}

int roce_decode(const uint8_t *buf, size_t len, struct roce_pkt *p)
{
	struct roce_bth *b = &p->bth;
	unsigned int fl;
	const uint8_t *q;
	size_t hl, body;
	uint32_t w;

	memset(p, 0, sizeof(*p));
	if (len < ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return -EBADMSG;
	b->opcode = buf[0];
	b->se = buf[1] >> 7;
	b->migreq = (buf[1] >> 6) & 1;
	b->pad = (buf[1] >> 4) & 3;
	b->tver = buf[1] & 0xf;
	b->pkey = get16(buf + 2);
	w = get32(buf + 4);
	b->fecn = w >> 31;
	b->becn = (w >> 30) & 1;
	b->dqpn = w & ROCE_QPN_MASK;
	w = get32(buf + 8);
	b->ackreq = w >> 31;
	b->psn = w & ROCE_PSN_MASK;

	fl = roce_op_flags(b->opcode);
	if (!fl || b->tver != 0)
		return -EINVAL;
	if (!roce_pkey_ours(b->pkey))
		return -EACCES;
	hl = flags_hdr_len(fl);
	if (len < hl + ROCE_ICRC_LEN)
		return -EBADMSG;
	body = len - hl - ROCE_ICRC_LEN;
	if (!(fl & F(PAYLOAD)) && (body || b->pad))
		return -EINVAL;
	/* only the last packet of a message is padded */
	if (b->pad && !(fl & F(LAST)))
		return -EINVAL;
	if (b->pad > body)
		return -EBADMSG;
	/* the padded payload is whole words */
	if (body & 3)
		return -EBADMSG;
	if (body - b->pad > ROCE_MAX_PMTU)
		return -EMSGSIZE;

	q = buf + ROCE_BTH_LEN;
	if (fl & F(DETH)) {
		p->deth.qkey = get32(q);
		p->deth.sqpn = get32(q + 4) & ROCE_QPN_MASK;
		p->deth.resv = q[4];
		q += ROCE_DETH_LEN;
	}
	if (fl & F(XRCETH)) {
		/* the reserved byte is ignored on receipt (IBA 9.3.7) */
		p->xrc_srqn = get32(q) & ROCE_SRQN_MASK;
		q += ROCE_XRCETH_LEN;
	}
	if (fl & F(RETH)) {
		p->reth.va = get64(q);
		p->reth.rkey = get32(q + 8);
		p->reth.len = get32(q + 12);
		q += ROCE_RETH_LEN;
	}
	if (fl & F(ATMETH)) {
		p->atmeth.va = get64(q);
		p->atmeth.rkey = get32(q + 8);
		p->atmeth.swap_add = get64(q + 12);
		p->atmeth.compare = get64(q + 20);
		q += ROCE_ATMETH_LEN;
	}
	if (fl & F(AETH)) {
		w = get32(q);
		p->aeth.syndrome = (uint8_t)(w >> 24);
		p->aeth.msn = w & ROCE_PSN_MASK;
		q += ROCE_AETH_LEN;
	}
	if (fl & F(ATMACK)) {
		p->atmack = get64(q);
		q += ROCE_ATMACK_LEN;
	}
	if (fl & F(IMMDT)) {
		p->imm = get32(q);
		q += ROCE_IMMDT_LEN;
	}
	if (fl & F(IETH)) {
		p->ieth = get32(q);
		q += ROCE_IETH_LEN;
	}
	p->payload = q;
	p->payload_len = (uint32_t)(body - b->pad);
	return 0;
}

uint32_t roce_mtu_bytes(int ibv_mtu)
{
	if (ibv_mtu < 1 || ibv_mtu > 5)
		return 0;
	return 128u << ibv_mtu;
}

uint32_t roce_npkts(uint64_t len, uint32_t pmtu)
{
	uint64_t n;

	if (!pmtu)
		return 0;
	if (!len)
		return 1;
	n = (len - 1) / pmtu + 1;
	return n > UINT32_MAX ? 0 : (uint32_t)n;
}

uint32_t roce_seg_len(uint64_t len, uint32_t pmtu, uint32_t index)
{
	uint64_t off = (uint64_t)index * pmtu;

	if (!pmtu || off >= len)
		return 0;
	return len - off < pmtu ? (uint32_t)(len - off) : pmtu;
}

int roce_seg_opcode(uint8_t op_only, uint32_t index, uint32_t npkts)
{
	uint8_t base = op_only & 0xe0, op = op_only & 0x1f;
	uint8_t first, middle, last;

	if (!roce_op_flags(op_only) || index >= npkts)
		return -EINVAL;
	if (npkts == 1)
		switch (op) {
		case ROCE_SEND_ONLY:
		case ROCE_SEND_ONLY_IMM:
		case ROCE_SEND_ONLY_INV:
		case ROCE_WRITE_ONLY:
		case ROCE_WRITE_ONLY_IMM:
		case ROCE_READ_RESP_ONLY:
			return op_only;
		default:
			return -EINVAL;
		}
	if (base == ROCE_UD)
		return -EINVAL;
	switch (op) {
	case ROCE_SEND_ONLY:
	case ROCE_SEND_ONLY_IMM:
	case ROCE_SEND_ONLY_INV:
		first = ROCE_SEND_FIRST;
		middle = ROCE_SEND_MIDDLE;
		last = op == ROCE_SEND_ONLY	  ? ROCE_SEND_LAST
		       : op == ROCE_SEND_ONLY_IMM ? ROCE_SEND_LAST_IMM
						  : ROCE_SEND_LAST_INV;
		break;
	case ROCE_WRITE_ONLY:
	case ROCE_WRITE_ONLY_IMM:
		first = ROCE_WRITE_FIRST;
		middle = ROCE_WRITE_MIDDLE;
		last = op == ROCE_WRITE_ONLY ? ROCE_WRITE_LAST
					     : ROCE_WRITE_LAST_IMM;
		break;
	case ROCE_READ_RESP_ONLY:
		first = ROCE_READ_RESP_FIRST;
		middle = ROCE_READ_RESP_MIDDLE;
		last = ROCE_READ_RESP_LAST;
		break;
	default:
		return -EINVAL;
	}
	if (index == 0)
		return base | first;
	return base | (index == npkts - 1 ? last : middle);
}

uint64_t roce_rnr_timer_ns(unsigned int code)
{
	/* IBA vol. 1 table "Encoding for RNR NAK timer field", in us */
	static const uint32_t us[32] = {
		655360, 10,    20,    30,     40,     60,     80,     120,
		160,	240,   320,   480,    640,    960,    1280,   1920,
		2560,	3840,  5120,  7680,   10240,  15360,  20480,  30720,
		40960,	61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};

	return code < 32 ? (uint64_t)us[code] * 1000 : 0;
}

uint64_t roce_timeout_ns(unsigned int timeout)
{
	if (!timeout || timeout > 31)
		return 0;
	return 4096ull << timeout;
}

static const uint32_t crc_table[256] = {
	0x00000000, 0x77073096, 0xee0e612c, 0x990951ba, 0x076dc419, 0x706af48f,
	0xe963a535, 0x9e6495a3, 0x0edb8832, 0x79dcb8a4, 0xe0d5e91e, 0x97d2d988,
	0x09b64c2b, 0x7eb17cbd, 0xe7b82d07, 0x90bf1d91, 0x1db71064, 0x6ab020f2,
	0xf3b97148, 0x84be41de, 0x1adad47d, 0x6ddde4eb, 0xf4d4b551, 0x83d385c7,
	0x136c9856, 0x646ba8c0, 0xfd62f97a, 0x8a65c9ec, 0x14015c4f, 0x63066cd9,
	0xfa0f3d63, 0x8d080df5, 0x3b6e20c8, 0x4c69105e, 0xd56041e4, 0xa2677172,
	0x3c03e4d1, 0x4b04d447, 0xd20d85fd, 0xa50ab56b, 0x35b5a8fa, 0x42b2986c,
	0xdbbbc9d6, 0xacbcf940, 0x32d86ce3, 0x45df5c75, 0xdcd60dcf, 0xabd13d59,
	0x26d930ac, 0x51de003a, 0xc8d75180, 0xbfd06116, 0x21b4f4b5, 0x56b3c423,
	0xcfba9599, 0xb8bda50f, 0x2802b89e, 0x5f058808, 0xc60cd9b2, 0xb10be924,
	0x2f6f7c87, 0x58684c11, 0xc1611dab, 0xb6662d3d, 0x76dc4190, 0x01db7106,
	0x98d220bc, 0xefd5102a, 0x71b18589, 0x06b6b51f, 0x9fbfe4a5, 0xe8b8d433,
	0x7807c9a2, 0x0f00f934, 0x9609a88e, 0xe10e9818, 0x7f6a0dbb, 0x086d3d2d,
	0x91646c97, 0xe6635c01, 0x6b6b51f4, 0x1c6c6162, 0x856530d8, 0xf262004e,
	0x6c0695ed, 0x1b01a57b, 0x8208f4c1, 0xf50fc457, 0x65b0d9c6, 0x12b7e950,
	0x8bbeb8ea, 0xfcb9887c, 0x62dd1ddf, 0x15da2d49, 0x8cd37cf3, 0xfbd44c65,
	0x4db26158, 0x3ab551ce, 0xa3bc0074, 0xd4bb30e2, 0x4adfa541, 0x3dd895d7,
	0xa4d1c46d, 0xd3d6f4fb, 0x4369e96a, 0x346ed9fc, 0xad678846, 0xda60b8d0,
	0x44042d73, 0x33031de5, 0xaa0a4c5f, 0xdd0d7cc9, 0x5005713c, 0x270241aa,
	0xbe0b1010, 0xc90c2086, 0x5768b525, 0x206f85b3, 0xb966d409, 0xce61e49f,
	0x5edef90e, 0x29d9c998, 0xb0d09822, 0xc7d7a8b4, 0x59b33d17, 0x2eb40d81,
	0xb7bd5c3b, 0xc0ba6cad, 0xedb88320, 0x9abfb3b6, 0x03b6e20c, 0x74b1d29a,
	0xead54739, 0x9dd277af, 0x04db2615, 0x73dc1683, 0xe3630b12, 0x94643b84,
	0x0d6d6a3e, 0x7a6a5aa8, 0xe40ecf0b, 0x9309ff9d, 0x0a00ae27, 0x7d079eb1,
	0xf00f9344, 0x8708a3d2, 0x1e01f268, 0x6906c2fe, 0xf762575d, 0x806567cb,
	0x196c3671, 0x6e6b06e7, 0xfed41b76, 0x89d32be0, 0x10da7a5a, 0x67dd4acc,
	0xf9b9df6f, 0x8ebeeff9, 0x17b7be43, 0x60b08ed5, 0xd6d6a3e8, 0xa1d1937e,
	0x38d8c2c4, 0x4fdff252, 0xd1bb67f1, 0xa6bc5767, 0x3fb506dd, 0x48b2364b,
	0xd80d2bda, 0xaf0a1b4c, 0x36034af6, 0x41047a60, 0xdf60efc3, 0xa867df55,
	0x316e8eef, 0x4669be79, 0xcb61b38c, 0xbc66831a, 0x256fd2a0, 0x5268e236,
	0xcc0c7795, 0xbb0b4703, 0x220216b9, 0x5505262f, 0xc5ba3bbe, 0xb2bd0b28,
	0x2bb45a92, 0x5cb36a04, 0xc2d7ffa7, 0xb5d0cf31, 0x2cd99e8b, 0x5bdeae1d,
	0x9b64c2b0, 0xec63f226, 0x756aa39c, 0x026d930a, 0x9c0906a9, 0xeb0e363f,
	0x72076785, 0x05005713, 0x95bf4a82, 0xe2b87a14, 0x7bb12bae, 0x0cb61b38,
	0x92d28e9b, 0xe5d5be0d, 0x7cdcefb7, 0x0bdbdf21, 0x86d3d2d4, 0xf1d4e242,
	0x68ddb3f8, 0x1fda836e, 0x81be16cd, 0xf6b9265b, 0x6fb077e1, 0x18b74777,
	0x88085ae6, 0xff0f6a70, 0x66063bca, 0x11010b5c, 0x8f659eff, 0xf862ae69,
	0x616bffd3, 0x166ccf45, 0xa00ae278, 0xd70dd2ee, 0x4e048354, 0x3903b3c2,
	0xa7672661, 0xd06016f7, 0x4969474d, 0x3e6e77db, 0xaed16a4a, 0xd9d65adc,
	0x40df0b66, 0x37d83bf0, 0xa9bcae53, 0xdebb9ec5, 0x47b2cf7f, 0x30b5ffe9,
	0xbdbdf21c, 0xcabac28a, 0x53b39330, 0x24b4a3a6, 0xbad03605, 0xcdd70693,
	0x54de5729, 0x23d967bf, 0xb3667a2e, 0xc4614ab8, 0x5d681b02, 0x2a6f2b94,
	0xb40bbe37, 0xc30c8ea1, 0x5a05df1b, 0x2d02ef8d,
};

/* crc_slice -- crc_table extended for eight bytes a step ("slicing by
 * 8"): crc_slice[k][b] is b's CRC followed by k zero bytes */
static uint32_t crc_slice[8][256];

__attribute__((constructor)) static void crc_slice_init(void)
{
	unsigned int i, k;

	for (i = 0; i < 256; i++)
		crc_slice[0][i] = crc_table[i];
	for (k = 1; k < 8; k++)
		for (i = 0; i < 256; i++)
			crc_slice[k][i] = (crc_slice[k - 1][i] >> 8) ^
					  crc_table[crc_slice[k - 1][i] & 0xff];
}

/* crc_slices -- LEN bytes at P into CRC eight at a time ("slicing by 8"
 * on little-endian hosts), the rest one at a time */
static uint32_t crc_slices(uint32_t crc, const uint8_t *p, size_t len)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; len >= 8; p += 8, len -= 8) {
		uint32_t a, b;

		memcpy(&a, p, 4);
		memcpy(&b, p + 4, 4);
		a ^= crc;
		crc = crc_slice[7][a & 0xff] ^ crc_slice[6][(a >> 8) & 0xff] ^
		      crc_slice[5][(a >> 16) & 0xff] ^ crc_slice[4][a >> 24] ^
		      crc_slice[3][b & 0xff] ^ crc_slice[2][(b >> 8) & 0xff] ^
		      crc_slice[1][(b >> 16) & 0xff] ^ crc_slice[0][b >> 24];
	}
#endif
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/*
 * crc_clmul -- the CRC of LEN bytes at P (at least 64, a multiple of 16)
 * by carry-less multiplication: 64 bytes folded into four 128-bit lanes
 * at a time, the lanes into one, 16 bytes at a time, then a Barrett
 * reduction to 32 bits (Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ", for the reflected polynomial 0x104c11db7;
 * the fold constants are x^(k*32) mod P, bit-reflected).  A 4 KiB packet
 * took about 10 times as long eight bytes at a time, and every packet is
 * checked at both ends.
 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul(
	uint32_t crc, const uint8_t *p, size_t len)
{
	const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
	const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
	const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
	const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);
	const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i x0, x1, x2, x3, t;

	x0 = _mm_loadu_si128((const __m128i *)p);
	x1 = _mm_loadu_si128((const __m128i *)(p + 16));
	x2 = _mm_loadu_si128((const __m128i *)(p + 32));
	x3 = _mm_loadu_si128((const __m128i *)(p + 48));
	x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)crc));
	p += 64;
	len -= 64;
#define FOLD(x, k, next)                                      \
	do {                                                  \
		t = _mm_clmulepi64_si128(x, k, 0x11);         \
		x = _mm_clmulepi64_si128(x, k, 0x00);         \
		x = _mm_xor_si128(_mm_xor_si128(x, t), next); \
	} while (0)
	for (; len >= 64; p += 64, len -= 64) {
		FOLD(x0, k1k2, _mm_loadu_si128((const __m128i *)p));
		FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
		FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
		FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
	}
	FOLD(x0, k3k4, x1);
	FOLD(x0, k3k4, x2);
	FOLD(x0, k3k4, x3);
	for (; len >= 16; p += 16, len -= 16)
		FOLD(x0, k3k4, _mm_loadu_si128((const __m128i *)p));
#undef FOLD
	/* 128 bits to 64 (appending 32 zero bits), to 32, then Barrett */
	t = _mm_clmulepi64_si128(x0, k3k4, 0x10);
	x0 = _mm_xor_si128(_mm_srli_si128(x0, 8), t);
	t = _mm_srli_si128(x0, 4);
	x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), k5, 0x00);
	x0 = _mm_xor_si128(x0, t);
	t = x0;
	x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), poly, 0x10);
	x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), poly, 0x00);
	x0 = _mm_xor_si128(x0, t);
	return (uint32_t)_mm_extract_epi32(x0, 1);
}

static int crc_has_clmul = -1;

__attribute__((constructor)) static void crc_clmul_init(void)
{
	__builtin_cpu_init();
	crc_has_clmul = __builtin_cpu_supports("pclmul") &&
			__builtin_cpu_supports("sse4.1");
}
#endif

/* roce_crc32 -- the reflected CRC-32 of the ICRC (as zlib's crc32, without
 * its pre- and post-inversion) */
uint32_t roce_crc32(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

#if defined(__x86_64__) && defined(__GNUC__)
	if (len >= 64 && crc_has_clmul > 0) {
		size_t n = len & ~(size_t)15;

		crc = crc_clmul(crc, p, n);
		p += n;
		len -= n;
	}
#endif
	return crc_slices(crc, p, len);
}

#define IP4_HLEN 20
#define IP6_HLEN 40
#define UDP_HLEN 8

/* the IP header length of PKT after checking it is IP/UDP of LEN bytes */
static int ip_udp_check(const uint8_t *pkt, size_t len, size_t *hlen)
{
	size_t hl, udp_len;

	if (len < 1)
		return -EINVAL;
	if ((pkt[0] >> 4) == 4) {
		/* no options: rxe sends none, and the ICRC would cover them */
		if (pkt[0] != 0x45 || len < IP4_HLEN + UDP_HLEN)
			return -EINVAL;
		if (pkt[9] != 17 || get16(pkt + 2) != len)
			return -EINVAL;
		hl = IP4_HLEN;
	} else if ((pkt[0] >> 4) == 6) {
		if (len < IP6_HLEN + UDP_HLEN)
			return -EINVAL;
		if (pkt[6] != 17 || get16(pkt + 4) != len - IP6_HLEN)
			return -EINVAL;
		hl = IP6_HLEN;
	} else {
		return -EINVAL;
	}
	udp_len = get16(pkt + hl + 4);
	if (udp_len != len - hl ||
	    udp_len < UDP_HLEN + ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return -EINVAL;
	*hlen = hl;
	return 0;
}

int roce_icrc_calc(const uint8_t *pkt, size_t len, uint32_t *icrc)
{
	static const uint8_t lrh[8] = {0xff, 0xff, 0xff, 0xff,
				       0xff, 0xff, 0xff, 0xff};
	uint8_t ps[IP6_HLEN + UDP_HLEN + ROCE_BTH_LEN];
	size_t hl, n;
	uint32_t crc;
	int rc;

	rc = ip_udp_check(pkt, len, &hl);
	if (rc)
		return rc;
	n = hl + UDP_HLEN + ROCE_BTH_LEN;
	memcpy(ps, pkt, n);
	if (hl == IP4_HLEN) {
		ps[1] = 0xff;		/* TOS */
		ps[8] = 0xff;		/* TTL */
		ps[10] = ps[11] = 0xff; /* header checksum */
	} else {
		ps[0] |= 0x0f; /* traffic class, high nibble */
		ps[1] = ps[2] = ps[3] =
			0xff; /* traffic class low, flow label */
		ps[7] = 0xff; /* hop limit */
	}
	ps[hl + 6] = ps[hl + 7] = 0xff; /* UDP checksum */
	ps[hl + UDP_HLEN + 4] = 0xff;	/* BTH resv8a (FECN, BECN, resv6) */
	crc = roce_crc32(0xffffffffu, lrh, sizeof(lrh));
	crc = roce_crc32(crc, ps, n);
	crc = roce_crc32(crc, pkt + n, len - n - ROCE_ICRC_LEN);
	*icrc = ~crc;
	return 0;
}

int roce_icrc_set(uint8_t *pkt, size_t len)
{
	uint32_t icrc;
	uint8_t *q;
	int rc = roce_icrc_calc(pkt, len, &icrc);

	if (rc)
		return rc;
	q = pkt + len - ROCE_ICRC_LEN;
	q[0] = (uint8_t)icrc;
	q[1] = (uint8_t)(icrc >> 8);
	q[2] = (uint8_t)(icrc >> 16);
	q[3] = (uint8_t)(icrc >> 24);
	return 0;
}

int roce_icrc_check(const uint8_t *pkt, size_t len)
{
	const uint8_t *q;
	uint32_t icrc;
	int rc = roce_icrc_calc(pkt, len, &icrc);

	if (rc)
		return rc;
	q = pkt + len - ROCE_ICRC_LEN;
	if (q[0] != (uint8_t)icrc || q[1] != (uint8_t)(icrc >> 8) ||
	    q[2] != (uint8_t)(icrc >> 16) || q[3] != (uint8_t)(icrc >> 24))
		return -EBADMSG;
	return 0;
}

/* multmodp -- A times B modulo the CRC's polynomial (bit-reflected, as
 * zlib's crc32_combine) */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	for (; m; m >>= 1) {
		if (a & m)
			p ^= b;
		b = b & 1 ? (b >> 1) ^ 0xedb88320u : b >> 1;
	}
	return p;
}

/* x8nmodp -- x^(8 N) modulo the polynomial: what N zero bytes after a
 * CRC's state multiply it by */
static uint32_t x8nmodp(size_t n)
{
	uint32_t p = 1u << 31, sq = 1u << 23; /* 1, x^8 */

	for (; n; n >>= 1) {
		if (n & 1)
			p = multmodp(sq, p);
		sq = multmodp(sq, sq);
	}
	return p;
}

/*
 * The identification sits at bytes 4-5 of the IPv4 header; LEN - 10 bytes
 * of the CRC's input follow it (the rest of the packet but the ICRC).  A
 * change of the field changes the CRC by the field's change run through
 * the CRC from a zero state and shifted by those bytes: one delta per bit
 * of the field, kept for the last length asked (a sender's and a
 * receiver's packets are mostly of one length).
 */
static __thread size_t dl_len;
static __thread uint32_t dl_bit[16];

uint32_t roce_icrc_id_delta(size_t len, unsigned int id_xor)
{
	uint32_t d = 0;
	unsigned int b;

	if (!id_xor || len < IP4_HLEN + UDP_HLEN + ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return 0;
	if (dl_len != len) {
		uint32_t shift = x8nmodp(len - 10);

		for (b = 0; b < 16; b++) {
			uint8_t f[2] = {(uint8_t)((1u << b) >> 8),
					(uint8_t)(1u << b)};

			dl_bit[b] = multmodp(shift, roce_crc32(0, f, 2));
		}
		dl_len = len;
	}
	for (b = 0; b < 16; b++)
		if (id_xor & (1u << b))
			d ^= dl_bit[b];
	return d;
}

void roce_icrc_xor(uint8_t *pkt, size_t len, uint32_t delta)
{
	uint8_t *q = pkt + len - ROCE_ICRC_LEN;

	q[0] ^= (uint8_t)delta;
	q[1] ^= (uint8_t)(delta >> 8);
	q[2] ^= (uint8_t)(delta >> 16);
	q[3] ^= (uint8_t)(delta >> 24);
}

int roce_icrc_check_seg(const uint8_t *pkt, size_t len, unsigned int seg)
{
	const uint8_t *q;
	uint32_t icrc, x;
	unsigned int k;
	int rc = roce_icrc_calc(pkt, len, &icrc);

	if (rc)
		return rc;
	q = pkt + len - ROCE_ICRC_LEN;
	x = icrc ^ ((uint32_t)q[0] | (uint32_t)q[1] << 8 |
		    (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24);
	if (!x)
		return 0;
	if ((pkt[0] >> 4) != 4)
		return -EBADMSG;
	/* the identification is taken as 0 in ICRC: X is the delta of the
	 * one the packet was sent with, if any is one of a GSO send's */
	if (seg && seg < ROCE_GSO_MAX_SEGS && x == roce_icrc_id_delta(len, seg))
		return 0;
	for (k = 1; k < ROCE_GSO_MAX_SEGS; k++)
		if (k != seg && x == roce_icrc_id_delta(len, k))
			return 0;
	return -EBADMSG;
}

size_t roce_ip_udp_len(int family)
{
	if (family == AF_INET)
		return IP4_HLEN + UDP_HLEN;
	if (family == AF_INET6)
		return IP6_HLEN + UDP_HLEN;
	return 0;
}

/* one's complement sum of LEN bytes as 16-bit big-endian words */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	while (len > 1) {
		sum += get16(p);
		p += 2;
		len -= 2;
	}
	if (len)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

ssize_t roce_ip_udp_hdr(const struct roce_ip *ip, uint8_t *buf, size_t cap,
			size_t ib_len)
{
	size_t hl = roce_ip_udp_len(ip->family), udp_len;
	uint8_t *u;

	if (!hl || ib_len < ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return -EINVAL;
	if (ib_len > 65535 - hl || cap < hl + ib_len)
		return -EMSGSIZE;
	udp_len = UDP_HLEN + ib_len;
	if (ip->family == AF_INET) {
		buf[0] = 0x45;
		buf[1] = ip->tos;
		put16(buf + 2, (uint16_t)(hl + ib_len));
		put16(buf + 4, ip->id);
		put16(buf + 6, 0x4000); /* DF, offset 0 */
		buf[8] = ip->ttl;
		buf[9] = 17;
		put16(buf + 10, 0);
		memcpy(buf + 12, ip->src, 4);
		memcpy(buf + 16, ip->dst, 4);
		u = buf + IP4_HLEN;
	} else {
		if (ip->flow_label > 0xfffff)
			return -EINVAL;
		put32(buf, 6u << 28 | (uint32_t)ip->tos << 20 | ip->flow_label);
		put16(buf + 4, (uint16_t)udp_len);
		buf[6] = 17;
		buf[7] = ip->ttl;
		memcpy(buf + 8, ip->src, 16);
		memcpy(buf + 24, ip->dst, 16);
		u = buf + IP6_HLEN;
	}
	put16(u, ip->sport);
	put16(u + 2, ip->dport);
	put16(u + 4, (uint16_t)udp_len);
	put16(u + 6, 0);
	return (ssize_t)hl;
}

ssize_t roce_ip_udp(const struct roce_ip *ip, uint8_t *buf, size_t cap,
		    size_t ib_len)
{
	ssize_t hl = roce_ip_udp_hdr(ip, buf, cap, ib_len);
	size_t alen = ip->family == AF_INET ? 4 : 16, udp_len;
	uint8_t *u, proto[4];
	uint32_t sum;
	uint16_t c;
	int rc;

	if (hl < 0)
		return hl;
	u = buf + hl - UDP_HLEN;
	udp_len = UDP_HLEN + ib_len;
	if (ip->family == AF_INET)
		put16(buf + 10, csum_fold(csum_add(0, buf, IP4_HLEN)));
	rc = roce_icrc_set(buf, (size_t)hl + ib_len);
	if (rc)
		return rc;
	/* pseudo header: addresses, protocol, UDP length */
	sum = csum_add(0, u - 2 * alen, 2 * alen);
	proto[0] = 0;
	proto[1] = 17;
	put16(proto + 2, (uint16_t)udp_len);
	sum = csum_add(sum, proto, 4);
	sum = csum_add(sum, u, udp_len);
	c = csum_fold(sum);
	put16(u + 6, c ? c : 0xffff);
	return hl;
}
