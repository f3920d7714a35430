#!/bin/sh
# mkcorpus.sh -- (re)write the seed inputs of the fuzz targets written here
# (cm_handshake, rmr_import) into tests/fuzz/corpus/: a few valid inputs
# and the edges of each format.  Run it again when a format changes;
# libFuzzer's own finds (tools/fuzz.sh) are kept in the same directories
# under their SHA-1 names and are not touched here.
#
# usage: tests/fuzz/mkcorpus.sh [TARGET...]
set -eu

dir=$(cd "$(dirname "$0")" && pwd)/corpus

# bytes HEX... -- write the bytes spelled in hex (spaces ignored)
bytes() {
	hex=$(echo "$*" | tr -d ' \n')
	while [ -n "$hex" ]; do
		rest=${hex#??}
		# shellcheck disable=SC2059 # the format is the byte
		printf "\\$(printf %03o "0x${hex%"$rest"}")"
		hex=$rest
	done
}

# seed TARGET NAME HEX... -- one seed input
seed() {
	mkdir -p "$dir/$1"
	t=$1 f=$2
	shift 2
	bytes "$@" >"$dir/$t/$f"
}

# cm/handshake.h: magic "RM", version, kind (1 request, 2 accept,
# 3 reject), depth (16 bits), control credits (3), user length, eager size,
# max message, reason (32 bits each), then up to 32 user bytes, big-endian.
hs() {
	seed cm_handshake req-plain \
		524d 03 01 0040 03 00 00002000 00100000 00000000
	seed cm_handshake req-user5 \
		524d 03 01 0040 03 05 00002000 00100000 00000000 68656c6c6f
	seed cm_handshake req-user32 \
		524d 03 01 0002 03 20 00000040 00000040 00000000 \
		000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
	seed cm_handshake acc-padded \
		524d 03 02 ffff 03 00 ffffffff ffffffff 00000000 \
		0000000000000000
	seed cm_handshake rej-reason \
		524d 03 03 0000 00 00 00000000 00000000 00010003
	seed cm_handshake rej-other-version \
		524d 09 03 0000 00 03 00000000 00000000 00000007 414243
	seed cm_handshake req-other-version \
		524d 01 01 0040 02 00 00002000 00100000 00000000
	seed cm_handshake req-user-overrun \
		524d 03 01 0040 03 21 00002000 00100000 00000000 41
	seed cm_handshake req-short \
		524d 03 01 0040 03 00 00002000 00100000 0000
	seed cm_handshake req-eager-above-max \
		524d 03 01 0040 03 00 00100000 00002000 00000000
	seed cm_handshake bad-kind \
		524d 03 07 0040 03 00 00002000 00100000 00000000
	# sessions: 4 names one (8-byte id, then at most 24 user bytes),
	# 5 reconnects it (id, 8-byte count), 6 accepts that (count)
	seed cm_handshake sreq-user3 \
		524d 03 04 0040 03 03 00002000 00100000 00000000 \
		0102030405060708 414243
	seed cm_handshake sreq-id0 \
		524d 03 04 0040 03 00 00002000 00100000 00000000 \
		0000000000000000
	seed cm_handshake sreq-user25 \
		524d 03 04 0040 03 19 00002000 00100000 00000000 \
		0102030405060708 \
		000102030405060708090a0b0c0d0e0f101112131415161718
	seed cm_handshake rreq \
		524d 03 05 0040 03 00 00002000 00100000 00000000 \
		0102030405060708 00000000000186a0
	seed cm_handshake rreq-short \
		524d 03 05 0040 03 00 00002000 00100000 00000000 \
		0102030405060708 000000000001
	seed cm_handshake rreq-user \
		524d 03 05 0040 03 01 00002000 00100000 00000000 \
		0102030405060708 00000000000186a0 41
	seed cm_handshake racc \
		524d 03 06 0040 03 00 00002000 00100000 00000000 \
		ffffffffffffffff
	# DC (bit 7 of the kind, plain request or accept only): DCT number,
	# access key, endpoint tag (16 bytes), then at most 16 user bytes
	seed cm_handshake dc-req-user2 \
		524d 03 81 0040 03 02 00002000 00100000 00000000 \
		00012345 0102030405060708 0000002a 4142
	seed cm_handshake dc-acc \
		524d 03 82 0040 03 00 00002000 00100000 00000000 \
		00fedcba 8877665544332211 00000001
	seed cm_handshake dc-sreq \
		524d 03 84 0040 03 00 00002000 00100000 00000000 \
		0102030405060708 00012345 0102030405060708 0000002a
	seed cm_handshake dc-req-user17 \
		524d 03 81 0040 03 11 00002000 00100000 00000000 \
		00012345 0102030405060708 0000002a \
		000102030405060708090a0b0c0d0e0f10
	# an accept offering RDMAMSG_HS_CAP_DCSRC (caps 0x10): after the
	# user bytes, the nonce, the count of DCIs (1..16), 3 bytes each
	seed cm_handshake dc-acc-dcsrc \
		524d 03 82 0040 03 02 00002000 00100000 00000010 \
		00fedcba 8877665544332211 00000001 6869 \
		0102030405060708 04 00012a 00012b 00012c 00012d
	seed cm_handshake dc-racc-dcsrc16 \
		524d 03 86 0040 03 00 00002000 00100000 00000010 \
		0000000000000063 00012345 0102030405060708 0000002a \
		a1a2a3a4a5a6a7a8 10 000101 000102 000103 000104 000105 \
		000106 000107 000108 000109 00010a 00010b 00010c 00010d \
		00010e 00010f 000110
}

# lib/mr.c: magic "RMX1", access, rkey, reserved (32 bits each), address,
# length (64 bits each), little-endian.
mr() {
	seed rmr_import read-write \
		524d5831 03000000 78563412 00000000 \
		00f0ffff7f000000 0000100000000000
	seed rmr_import all-access-top \
		524d5831 07000000 ffffffff 00000000 \
		ffffffffffffff7f 0000000000000080
	seed rmr_import no-access-one-byte \
		524d5831 00000000 01000000 00000000 \
		0000000000000000 0100000000000000
	seed rmr_import wraps \
		524d5831 01000000 01000000 00000000 \
		ffffffffffffffff 0200000000000000
	seed rmr_import zero-length \
		524d5831 01000000 01000000 00000000 \
		0010000000000000 0000000000000000
	seed rmr_import unknown-access \
		524d5831 08000000 01000000 00000000 \
		0010000000000000 0010000000000000
	seed rmr_import trailing \
		524d5831 02000000 01000000 ffffffff \
		0010000000000000 0010000000000000 00ff
	seed rmr_import short \
		524d5831 02000000 01000000 00000000 \
		0010000000000000 00100000000000
	seed rmr_import bad-magic \
		524d5832 02000000 01000000 00000000 \
		0010000000000000 0010000000000000
}

[ $# -gt 0 ] || set -- cm_handshake rmr_import
for t in "$@"; do
	case $t in
	cm_handshake) hs ;;
	rmr_import) mr ;;
	*) echo "mkcorpus.sh: no seeds for $t here" >&2 && exit 1 ;;
	esac
done
